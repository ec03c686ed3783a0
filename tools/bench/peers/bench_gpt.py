"""W2 peer: one training step of gpt-tiny (torch_gpt.py) in PyTorch eager on the CPU.

  /usr/bin/python3 tools/bench/peers/bench_gpt.py [--threads 1] [--batch 8] [--init portable|torch]
          [--warmup 3] [--reps 5] [--iters 5]
      RESULT workload=gpt threads=T batch=B init=I ms_per_step median=M min=.. max=.. tokens_per_s=..
             gemm_gflop_per_step=.. params=.. rss_after_init_mib=.. peak_rss_mib=.. omp=.. blas=.. wait=..
  /usr/bin/python3 tools/bench/peers/bench_gpt.py --curve 20
      "step S loss L" (6 decimals) for the first 20 steps, no timing: with the portable init this is
      gpt_loss_curve_portable_T1.txt (--threads 1), which oneflow_like's trainer reproduces.
  /usr/bin/python3 tools/bench/peers/bench_gpt.py --once      one step after building (start-up cost)

A step: zero_grad(set_to_none) on batch `synthetic_batch(s)`, loss, backward, AdamW. Batches are made
before timing (64 distinct steps, cycled). ms per step: mean of --iters steps; median, min and max
over --reps such means after --warmup steps.
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in the repository
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--init", default="portable", choices=["portable", "torch"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--curve", type=int, default=0, help="print the loss of the first N steps, no timing")
    ap.add_argument("--once", action="store_true", help="run exactly one step, no timing")
    a = ap.parse_args()
    peerlib.torch_with_threads(a.threads)
    import torch_gpt

    model = torch_gpt.build(a.init, a.seed)
    opt = torch_gpt.adamw(model.parameters())
    params = sum(p.numel() for p in model.parameters())

    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        opt.step()
        return loss

    if a.curve or a.once:
        for s in range(a.curve or 1):
            loss = train_step(*torch_gpt.synthetic_batch(s, a.batch, seed=a.seed))
            if a.curve:
                print("step %d loss %.6f" % (s, loss.item()), flush=True)
        return

    rss_init = peerlib.peak_rss_mib()
    batches = [torch_gpt.synthetic_batch(s, a.batch, seed=a.seed) for s in range(64)]
    cursor = [0]

    def step():
        train_step(*batches[cursor[0] % len(batches)])
        cursor[0] += 1

    med, lo, hi = peerlib.med_min_max(peerlib.timed_reps(step, a.warmup, a.reps, a.iters), 1e3)
    tokens = a.batch * torch_gpt.GptDims().seq_len
    print("RESULT workload=gpt threads=%d batch=%d init=%s ms_per_step median=%.1f min=%.1f max=%.1f "
          "tokens_per_s=%.0f gemm_gflop_per_step=%.3f params=%d rss_after_init_mib=%.0f peak_rss_mib=%.0f %s"
          % (a.threads, a.batch, a.init, med, lo, hi, tokens / (med / 1e3), torch_gpt.gemm_gflop_per_step(a.batch),
             params, rss_init, peerlib.peak_rss_mib(), peerlib.threads_desc()), flush=True)


if __name__ == "__main__":
    main()

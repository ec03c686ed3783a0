"""W1 peer: one training step of the "mlp" workload in PyTorch eager on the CPU.

Model: 4 x Linear(1024 -> 1024, bias), ReLU between them (none after the last), MSE loss
(mean over all elements) against a target, SGD(lr 0.01, no momentum), gradients set to None
between steps; one fixed batch of 256 rows (oltrain's --data_batches=1). As oneflow_like's W1 job
(models/mlp.h), with the same portable numbers by default, so the two print the same losses:
  init="portable": weight and bias of layer i are streams 2i and 2i+1 of
      peerlib.portable_values(seed, stream, n, 1 / sqrt(3 * 1024)) (torch's nn.Linear law,
      uniform in +-1/sqrt(in)); row-major (out, in) storage.
  data: element j of x (stream 0) and target (stream 1) of batch 0 is 2u - 1,
      u = (splitmix64(splitmix64(4 * seed + stream) + (batch << 32) + j) >> 40) / 2^24.
  init="torch": torch's own nn.Linear init and torch.randn data after torch.manual_seed(seed).
GEMM work: 3 products per layer per step (forward, input and weight gradient), except the first
layer's input gradient (x needs none): 11 x 2 x 256 x 1024 x 1024 = 5.906 GFLOP at batch 256.

  /usr/bin/python3 tools/bench/peers/bench_mlp.py [--threads 1] [--batch 256] [--warmup 5] [--reps 7] [--iters 10]
      RESULT workload=mlp threads=T batch=B init=I ms_per_step median=M min=.. max=.. gflops_median=..
             gemm_gflop_per_step=.. peak_rss_mib=.. omp=.. blas=.. wait=..
  /usr/bin/python3 tools/bench/peers/bench_mlp.py --curve 5      "step S loss L" for 5 steps, no timing
ms per step: mean of --iters steps; median, min and max over --reps such means after --warmup.
"""
import argparse
import math
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in the repository
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402

WIDTH, DEPTH = 1024, 4


def portable_batch(rows, width, seed=0, index=0):
    """(x, target) as float32 numpy arrays [rows, width] (models/mlp.h SyntheticMlpBatch)."""
    import numpy as np
    out = []
    for stream in (0, 1):
        base = int(peerlib.splitmix64(np.uint64(4 * seed + stream))) + (index << 32)
        counters = np.arange(rows * width, dtype=np.uint64) + np.uint64(base & ((1 << 64) - 1))
        u = (peerlib.splitmix64(counters) >> np.uint64(40)).astype(np.float64) / 16777216.0
        out.append((2.0 * u - 1.0).astype(np.float32).reshape(rows, width))
    return out


def build(torch, init, seed, batch, width=WIDTH, depth=DEPTH):
    """(model, x, target): the W1 model and its fixed batch."""
    nn = torch.nn
    torch.manual_seed(seed)
    layers = []
    for i in range(depth):
        layers.append(nn.Linear(width, width))
        if i + 1 < depth:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    if init == "portable":
        std = 1.0 / math.sqrt(3.0 * width)
        with torch.no_grad():
            for stream, p in enumerate(model.parameters()):  # weight 0, bias 0, weight 1, ...
                p.copy_(torch.from_numpy(peerlib.portable_values(seed, stream, p.numel(), std)).view(p.shape))
        x, y = (torch.from_numpy(a) for a in portable_batch(batch, width, seed))
    else:
        x, y = torch.randn(batch, width), torch.randn(batch, width)
    return model, x, y


def gemm_gflop_per_step(batch, width=WIDTH, depth=DEPTH):
    return (3 * depth - 1) * 2.0 * batch * width * width / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--init", default="portable", choices=["portable", "torch"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--curve", type=int, default=0, help="print the loss of the first N steps, no timing")
    a = ap.parse_args()
    torch = peerlib.torch_with_threads(a.threads)
    model, x, y = build(torch, a.init, a.seed, a.batch)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    mse = torch.nn.MSELoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = mse(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if a.curve:
        for s in range(a.curve):
            print("step %d loss %.6f" % (s, step().item()), flush=True)
        return
    med, lo, hi = peerlib.med_min_max(peerlib.timed_reps(step, a.warmup, a.reps, a.iters), 1e3)
    gflop = gemm_gflop_per_step(a.batch)
    print("RESULT workload=mlp threads=%d batch=%d init=%s ms_per_step median=%.2f min=%.2f max=%.2f "
          "gflops_median=%.1f gemm_gflop_per_step=%.3f peak_rss_mib=%.0f %s"
          % (a.threads, a.batch, a.init, med, lo, hi, gflop / (med / 1e3), gflop, peerlib.peak_rss_mib(),
             peerlib.threads_desc()), flush=True)


if __name__ == "__main__":
    main()

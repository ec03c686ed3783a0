"""DDP peer: PyTorch DistributedDataParallel with gloo on the CPU, one process per rank (start
the ranks with launch.py, or any env:// launcher), one thread per process by default.

  /usr/bin/python3 tools/bench/peers/launch.py --nproc 2 tools/bench/peers/ddp_bench.py --workload W
W = mlp        W1 (bench_mlp.py: portable init and batch), global batch 256 split into equal row
               blocks, rank r taking block r
    gpt        W2 (torch_gpt.py, portable init), global batch 8 of synthetic_batch(step), rank r
               taking rows [r * 8 / world, (r + 1) * 8 / world)
    allreduce  dist.all_reduce(SUM) of a --mib (16) MiB float32 tensor, in place;
               algbw GB/s = bytes / time (with 2 ranks, bus bandwidth = algbw)
DDP's defaults (bucket_cap_mb 25, gradient_as_bucket_view False); the same global batch as
oneflow_like's --dp runs of ddp_bench.sh, so the data-parallel step computes the same update.
Rank 0 prints one line (ms per step: mean of --iters steps; median, min, max over --reps):
  RESULT workload=ddp_W world=N threads_per_proc=T global_batch=B ms_per_step median=M min=.. max=..
         (gflops_median=.. | tokens_per_s=..) peak_rss_mib_rank0=.. omp=.. blas=.. wait=..
  RESULT workload=allreduce world=N mib=S ms median=M min=.. max=.. algbw_GBps median=G min=.. max=..
--curve N prints rank 0's loss of the first N steps instead ("step S loss L", the mean over ranks).
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in the repository
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", required=True, choices=["mlp", "gpt", "allreduce"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--global-batch", type=int, default=0, help="default 256 (mlp) or 8 (gpt)")
    ap.add_argument("--init", default="portable", choices=["portable", "torch"])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--curve", type=int, default=0)
    a = ap.parse_args()
    torch = peerlib.torch_with_threads(a.threads)
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    if a.workload == "allreduce":
        nbytes = a.mib << 20
        buf = torch.ones(nbytes // 4)
        times = peerlib.timed_reps(lambda: dist.all_reduce(buf), a.warmup, a.reps, a.iters)
        med, lo, hi = peerlib.med_min_max(times, 1e3)
        if rank == 0:
            gbps = lambda ms: nbytes / (ms / 1e3) / 1e9  # noqa: E731
            print("RESULT workload=allreduce world=%d mib=%d ms median=%.2f min=%.2f max=%.2f "
                  "algbw_GBps median=%.2f min=%.2f max=%.2f" % (world, a.mib, med, lo, hi, gbps(med), gbps(hi),
                                                                gbps(lo)), flush=True)
        dist.destroy_process_group()
        return

    if a.workload == "mlp":
        import bench_mlp
        global_batch = a.global_batch or 256
        model, x, y = bench_mlp.build(torch, a.init, 0, global_batch)
        rows = global_batch // world
        x, y = x[rank * rows:(rank + 1) * rows].contiguous(), y[rank * rows:(rank + 1) * rows].contiguous()
        ddp = DDP(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        mse = torch.nn.MSELoss()
        batch_of = lambda step: (x, y)  # noqa: E731  one fixed batch, as W1
        loss_of = lambda xb, yb: mse(ddp(xb), yb)  # noqa: E731
        extra = lambda ms: "gflops_median=%.1f" % (bench_mlp.gemm_gflop_per_step(global_batch) / (ms / 1e3))  # noqa
    else:
        import torch_gpt
        global_batch = a.global_batch or 8
        model = torch_gpt.build(a.init, 0)
        # gloo cannot broadcast bool tensors; the causal masks are equal on every rank anyway.
        DDP._set_params_and_buffers_to_ignore_for_model(
            model, [n for n, _ in model.named_buffers() if n.endswith("causal_mask")])
        ddp = DDP(model)
        opt = torch_gpt.adamw(ddp.parameters())
        rows = global_batch // world
        batches = []
        for s in range(64):
            xb, yb = torch_gpt.synthetic_batch(s, global_batch)
            batches.append((xb[rank * rows:(rank + 1) * rows], yb[rank * rows:(rank + 1) * rows]))
        batch_of = lambda step: batches[step % len(batches)]  # noqa: E731
        loss_of = lambda xb, yb: ddp(xb, yb)  # noqa: E731
        seq = torch_gpt.GptDims().seq_len
        extra = lambda ms: "tokens_per_s=%.0f" % (global_batch * seq / (ms / 1e3))  # noqa: E731

    counter = [0]

    def step():
        xb, yb = batch_of(counter[0])
        counter[0] += 1
        opt.zero_grad(set_to_none=True)
        loss = loss_of(xb, yb)
        loss.backward()
        opt.step()
        return loss

    if a.curve:
        for s in range(a.curve):
            loss = step().detach()
            dist.all_reduce(loss)
            if rank == 0:
                print("step %d loss %.6f" % (s, loss.item() / world), flush=True)
        dist.destroy_process_group()
        return

    med, lo, hi = peerlib.med_min_max(peerlib.timed_reps(step, a.warmup, a.reps, a.iters), 1e3)
    if rank == 0:
        print("RESULT workload=ddp_%s world=%d threads_per_proc=%d global_batch=%d ms_per_step median=%.2f "
              "min=%.2f max=%.2f %s peak_rss_mib_rank0=%.0f %s"
              % (a.workload, world, a.threads, global_batch, med, lo, hi, extra(med), peerlib.peak_rss_mib(),
                 peerlib.threads_desc()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""The torch side of tools/bench/two_node_bench.sh that tools/bench/peers/ddp_bench.py lacks.

One process per rank, env:// rendezvous (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK; set
GLOO_SOCKET_IFNAME to the rank's interface), gloo, one thread (OMP/OpenBLAS threads set by the
caller). Rank 0 prints one RESULT line.

  ddp_main  : PyTorch DDP (gloo) of the main job's model (configs/gpt_4rank.cfg: GPT vocab 256,
              seq 64, 2 layers x 128 wide, 4 heads; peers/torch_gpt.py's architecture and portable
              init), global batch 16 split over WORLD_SIZE ranks, AdamW lr 3e-3, synthetic batches
              of the same shape (the text is irrelevant to speed). DDP has no tensor parallelism: with WORLD_SIZE=4
              this is dp=4, the DDP equivalent of the main job's dp=2 x tp=2 on 4 processes.
              RESULT ddp_main world=W ms_per_step median=M min=.. max=..   (means over --iters)
  allreduce : gloo all_reduce(SUM) of --bytes of float32, in place, waited for: as ONE tensor, and
              as consecutive --bucket_mb buckets (the gradient bytes in DDP/our bucket sizes).
              RESULT allreduce bytes=B one_ms median=M ... buckets=K bucket_ms median=M ...

  /usr/bin/python3 tools/bench/two_node_torch.py ddp_main [--warmup 3 --reps 5 --iters 4]
  /usr/bin/python3 tools/bench/two_node_torch.py allreduce --bytes 16963584 [--bucket_mb 4]
"""
import argparse
import os
import statistics
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ left in the repository
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))


def timed(step, warmup, reps, iters):
    for _ in range(warmup):
        step()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        out.append((time.perf_counter() - t0) / iters * 1e3)
    return statistics.median(out), min(out), max(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["ddp_main", "allreduce"])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--bytes", type=int, default=0)
    ap.add_argument("--bucket_mb", type=float, default=4.0)
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import torch
    import torch.distributed as dist
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    if a.what == "allreduce":
        n = a.bytes // 4
        buf = torch.ones(n)
        per = max(1, int(a.bucket_mb * (1 << 20)) // 4)
        pieces = list(buf.split(per))
        one = timed(lambda: dist.all_reduce(buf), a.warmup, a.reps, a.iters)
        buckets = timed(lambda: [dist.all_reduce(p) for p in pieces], a.warmup, a.reps, a.iters)
        if rank == 0:
            print(f"RESULT allreduce world={world} bytes={n * 4} one_ms median={one[0]:.2f} min={one[1]:.2f} "
                  f"max={one[2]:.2f} buckets={len(pieces)} bucket_mb={a.bucket_mb:g} bucket_ms median={buckets[0]:.2f} "
                  f"min={buckets[1]:.2f} max={buckets[2]:.2f}", flush=True)
    else:
        import torch_gpt as G
        from torch.nn.parallel import DistributedDataParallel as DDP
        c = G.GptDims(vocab=256, seq_len=64, n_layer=2, n_embd=128, n_head=4)
        m = G.build("portable", 0, c)
        # gloo cannot broadcast the bool causal masks (identical everywhere): keep them out of DDP's sync.
        DDP._set_params_and_buffers_to_ignore_for_model(m, [k for k, _ in m.named_buffers() if k.endswith("mask")])
        model = DDP(m)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        gb = 16
        pb = gb // world
        data = []
        for s in range(16):
            x, y = G.synthetic_batch(s, gb, c)
            data.append((x[rank * pb:(rank + 1) * pb], y[rank * pb:(rank + 1) * pb]))
        k = [0]

        def step():
            x, y = data[k[0] % len(data)]
            k[0] += 1
            opt.zero_grad(set_to_none=True)
            model(x, y).backward()
            opt.step()

        med, lo, hi = timed(step, a.warmup, a.reps, a.iters)
        params = sum(p.numel() for p in m.parameters())
        if rank == 0:
            print(f"RESULT ddp_main world={world} params={params} global_batch={gb} ms_per_step median={med:.2f} "
                  f"min={lo:.2f} max={hi:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""torch.distributed gloo all-reduce throughput: the reference for collective_bench.cc.

Same flags, same method, same output as collective_bench (one process per rank; rank 0 prints):
    result all_reduce <bytes> <median seconds> <algorithmic bandwidth bytes/s> <iters> <min seconds>
For each size: --warmup untimed all-reduces, then --iters timed ones of a float32 tensor, in
place, each synchronous. Rendezvous: torch's TCPStore on --host:--port (rank 0 serves it).

Usage: /usr/bin/python3 collective_bench_torch.py --rank 0 --world 2 --port 29601 \
           [--host 127.0.0.1] [--sizes_mib 16,256] [--iters 20,5] [--warmup 2] [--timeout_ms 60000]
"""
import argparse
import datetime
import sys
import time

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--sizes_mib", default="16,256")
    parser.add_argument("--iters", default="20,5")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout_ms", type=int, default=60000)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes_mib.split(",")]
    iters = [int(s) for s in args.iters.split(",")]

    dist.init_process_group(
        "gloo",
        init_method="tcp://%s:%d" % (args.host, args.port),
        rank=args.rank,
        world_size=args.world,
        timeout=datetime.timedelta(milliseconds=args.timeout_ms),
    )
    expect = float(sum(r + 1 for r in range(args.world)))
    for k, mib in enumerate(sizes):
        nbytes = mib << 20
        count = nbytes // 4
        n = iters[min(k, len(iters) - 1)]
        data = torch.full((count,), float(args.rank + 1), dtype=torch.float32)
        dist.all_reduce(data)
        checked = data[::4099]
        if not bool((checked == expect).all()) or float(data[-1]) != expect:
            sys.exit("collective_bench_torch: wrong sum")
        for _ in range(1, args.warmup):
            dist.all_reduce(data)
        seconds = []
        for _ in range(n):
            start = time.perf_counter()
            dist.all_reduce(data)
            seconds.append(time.perf_counter() - start)
        seconds.sort()
        median = seconds[len(seconds) // 2]
        if args.rank == 0:
            print("result all_reduce %d %.6f %.6e %d %.6f" % (nbytes, median, nbytes / median, n, seconds[0]),
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""W3 peer: PyTorch eager dispatch cost of a tiny op from Python (the reference of
//tools/bench:runtime_bench and of the eager-op line of python_bench.sh).

A chain of --n (1000) element-wise adds on 16 floats under torch.no_grad(): out-of-place
`x = x + y` (allocates its result) and in-place `x.add_(y)`, and an empty Python loop of the
same length (the interpreter's share). Microseconds per op: median, min and max over --reps
chains after --warmup chains. One line per variant:
  RESULT workload=op_overhead variant=add_outofplace|add_inplace|python_empty_loop threads=T n=N
         us_per_op median=M min=.. max=.. omp=.. blas=.. wait=..

  /usr/bin/python3 tools/bench/peers/bench_op_overhead.py [--threads 1] [--n 1000] [--reps 21] [--warmup 5]
"""
import argparse
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ left in the repository
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    torch = peerlib.torch_with_threads(a.threads)
    n = a.n

    def out_of_place():
        x, y = torch.zeros(16), torch.ones(16)
        start = time.perf_counter()
        for _ in range(n):
            x = x + y
        return time.perf_counter() - start

    def in_place():
        x, y = torch.zeros(16), torch.ones(16)
        start = time.perf_counter()
        for _ in range(n):
            x.add_(y)
        return time.perf_counter() - start

    def empty_loop():
        x = 0
        start = time.perf_counter()
        for _ in range(n):
            x = x  # noqa: PLW0127  the loop body the adds replace
        return time.perf_counter() - start

    with torch.no_grad():
        for name, chain in (("add_outofplace", out_of_place), ("add_inplace", in_place),
                            ("python_empty_loop", empty_loop)):
            for _ in range(a.warmup):
                chain()
            med, lo, hi = peerlib.med_min_max([chain() / n for _ in range(a.reps)], 1e6)
            print("RESULT workload=op_overhead variant=%s threads=%d n=%d us_per_op median=%.3f min=%.3f max=%.3f %s"
                  % (name, a.threads, n, med, lo, hi, peerlib.threads_desc()), flush=True)


if __name__ == "__main__":
    main()

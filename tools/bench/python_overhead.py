"""What the Python API costs (printed numbers, not a test).

1. The W2 GPT step (tools/bench/peers' gpt-tiny: vocab 2048, seq 128, 4 layers, 256 wide, 4 heads,
   batch 8, AdamW) defined in Python (examples/gpt_model.py) and run through nn.Graph on one rank,
   median ms per step; tools/bench/python_bench.sh runs oltrain's W2 next to it and prints the ratio.
2. An eager op round trip (add of two [64] tensors; a cached compiled plan per call) next to
   PyTorch eager dispatch of the same op, median microseconds per op.

Usage: /usr/bin/python3 tools/bench/python_overhead.py [--steps 11] [--warmup 2] [--what graph|eager|both]
Prints "RESULT graph_median_ms=..." and "RESULT eager_us=... torch_us=...".
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import oneflow_like as ol  # noqa: E402
from gpt_model import GPT  # noqa: E402


def graph_bench(steps, warmup):
    ol.manual_seed(0)
    model = GPT(2048, 128, 4, 256, 4)

    class G(ol.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(ol.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01))

        def build(self, idx, pos, targets):
            loss = ol.cross_entropy(self.model(idx, pos), targets)
            loss.backward()
            return loss

    g = G()
    rng = np.random.default_rng(0)
    pos = ol.tensor(np.tile(np.arange(128, dtype=np.int64), (8, 1)))
    times = []
    for step in range(steps):
        x = ol.tensor(rng.integers(0, 2048, (8, 128)))
        y = ol.tensor(rng.integers(0, 2048, (8, 128)))
        t0 = time.perf_counter()
        loss = float(g(x, pos, y).numpy())
        dt = (time.perf_counter() - t0) * 1e3
        if step >= warmup:
            times.append(dt)
        print(f"step {step} loss {loss:.6f} time {dt:.1f} ms", flush=True)
    med = statistics.median(times)
    print(f"RESULT graph_median_ms={med:.2f} steps_timed={len(times)}", flush=True)


def eager_bench(n=3000):
    import torch
    a = ol.tensor(np.ones(64, np.float32))
    b = ol.tensor(np.ones(64, np.float32))
    for _ in range(50):
        a + b
    ours = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            a + b
        ours.append((time.perf_counter() - t0) / n * 1e6)
    ta, tb = torch.ones(64), torch.ones(64)
    theirs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            ta + tb
        theirs.append((time.perf_counter() - t0) / n * 1e6)
    p = ol.placement("cpu", ranks=[0, 1])
    x = ol.tensor(np.ones((64, 64), np.float32), placement=p, sbp=ol.sbp.split(0))
    glob = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n // 3):
            x + x
        glob.append((time.perf_counter() - t0) / (n // 3) * 1e6)
    print(f"RESULT eager_us={statistics.median(ours):.1f} torch_us={statistics.median(theirs):.2f} "
          f"ratio={statistics.median(ours) / statistics.median(theirs):.0f} global_2rank_us={statistics.median(glob):.1f}",
          flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=11)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--what", default="both", choices=["graph", "eager", "both"])
    args = ap.parse_args()
    if args.what in ("graph", "both"):
        graph_bench(args.steps, args.warmup)
    if args.what in ("eager", "both"):
        eager_bench()

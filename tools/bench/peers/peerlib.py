"""Helpers shared by the PyTorch peer programs of tools/bench (threads, timing, RSS, the portable
counter-based generator).

Thread settings must be made before torch is imported: torch 1.13's set_num_threads does not
reach OpenBLAS, which otherwise starts one thread per core. `torch_with_threads(T)` therefore sets
OMP_NUM_THREADS and OPENBLAS_NUM_THREADS (PEER_BLAS_THREADS overrides the BLAS count alone), then
imports torch and calls torch.set_num_threads(T). With T=2 the bench scripts also export
OMP_WAIT_POLICY=PASSIVE (spinning OpenMP workers otherwise fight OpenBLAS's threads).

The portable generator (also oneflow_like/core/random.h, bit-exact):
  splitmix64(x)                   Steele et al.'s 64-bit finalizer, wrapping arithmetic
  portable_uniform(seed, s, n)    u_i = (splitmix64(seed<<48 | s<<32 | i) >> 40) / 2^24, i < n
  portable_values(seed, s, n, std) float32(std * sqrt(3) * (2u - 1)), computed in float64
"""
import math
import os
import resource
import statistics
import time

# numpy is imported inside the functions: importing it loads OpenBLAS, which reads
# OPENBLAS_NUM_THREADS once, so it must come after torch_with_threads has set it.
_MASK = (1 << 64) - 1


def torch_with_threads(threads):
    """Sets the thread environment for `threads`, imports torch and returns it."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ.get("PEER_BLAS_THREADS", str(threads))
    import torch
    torch.set_num_threads(threads)
    return torch


def threads_desc():
    """'omp=.. blas=.. wait=..' for RESULT lines."""
    import torch
    return "omp=%d blas=%s wait=%s" % (torch.get_num_threads(), os.environ.get("OPENBLAS_NUM_THREADS", "?"),
                                       os.environ.get("OMP_WAIT_POLICY", "default"))


def timed_reps(step, warmup, reps, iters):
    """Calls step() `warmup` times, then `reps` times `iters` calls; seconds per call of each rep."""
    for _ in range(warmup):
        step()
    per_call = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(iters):
            step()
        per_call.append((time.perf_counter() - start) / iters)
    return per_call


def med_min_max(values, scale=1.0):
    scaled = [v * scale for v in values]
    return statistics.median(scaled), min(scaled), max(scaled)


def peak_rss_mib():
    """The process's peak resident set (ru_maxrss is KiB on Linux), import torch included."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def splitmix64(x):
    """splitmix64 of a uint64 numpy array (or scalar), wrapping."""
    import numpy as np
    u64 = np.uint64
    x = np.asarray(x, dtype=u64)
    with np.errstate(over="ignore"):
        z = x + u64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> u64(30))) * u64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> u64(27))) * u64(0x94D049BB133111EB)
        return z ^ (z >> u64(31))


def portable_uniform(seed, stream, n):
    """n float64 values in [0, 1) with 24 random bits, element i from key seed<<48 | stream<<32 | i."""
    import numpy as np
    key = ((int(seed) << 48) | (int(stream) << 32)) & _MASK
    counters = np.arange(n, dtype=np.uint64) | np.uint64(key)
    return (splitmix64(counters) >> np.uint64(40)).astype(np.float64) / 16777216.0


def portable_values(seed, stream, n, std):
    """Uniform values with standard deviation `std`: float32(std * sqrt(3) * (2u - 1))."""
    import numpy as np
    scale = std * math.sqrt(3.0)
    return (scale * (2.0 * portable_uniform(seed, stream, n) - 1.0)).astype(np.float32)

"""Tensor creation: ol.tensor, zeros/ones/randn/rand/arange. Random values come from the counter-
based initializer of the C++ core (Philox over the logical index), so the same seed gives the same
logical tensor under any placement and SBP; each rank fills only its shards."""
import numpy as np

from . import _C, _job
from . import sbp as sbp_mod
from .tensor import Tensor, from_numpy_global, local_ranks


class _Seed:
    base = 0
    calls = 0


def manual_seed(seed):
    """Seeds ol.randn / ol.rand / dropout / nn layer initialization (same on every process)."""
    _Seed.base = int(seed)
    _Seed.calls = 0


def next_seed():
    _Seed.calls += 1
    # splitmix-style mixing of (base, call number); never 0 (0 = "derived" for the compiler)
    z = (_Seed.base * 0x9E3779B97F4A7C15 + _Seed.calls * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z ^= z >> 31
    return (z & 0x7FFFFFFFFFFFFFFF) or 1


def tensor(data, dtype=None, placement=None, sbp=None, requires_grad=False):
    """A local tensor, or with placement and sbp a global one (every process passes the same
    logical data)."""
    if isinstance(data, Tensor):
        data = data.numpy()
    array = np.array(data, dtype=dtype)
    if dtype is None and array.dtype == np.float64:
        array = array.astype(np.float32)
    _job.dtype_name(array.dtype)
    if placement is None:
        if sbp is not None:
            raise ValueError("sbp given without a placement")
        t = Tensor._local(array)
    else:
        pinned = sbp is not None
        t = from_numpy_global(array, placement, sbp if sbp is not None else [sbp_mod.broadcast] * placement.ndim,
                              pinned)
    t.requires_grad = requires_grad
    return t


def from_numpy(array):
    """A local tensor sharing the array's memory (no copy when it is C-contiguous)."""
    return Tensor._local(np.ascontiguousarray(array))


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = size[0]
    return [int(s) for s in size]


def _filled(kind, size, dtype, placement, sbp, requires_grad, a=0.0, b=0.0, seed=0):
    shape = _shape(size)
    dtype = np.dtype(dtype or np.float32)
    dt = _job.dtype_name(dtype)
    if placement is None:
        t = Tensor._local(_C.init_shard(kind, shape, [0] * len(shape), shape, dt, a, b, seed))
    else:
        pinned = sbp is not None
        sbp = sbp_mod.normalize(sbp if sbp is not None else [sbp_mod.broadcast] * placement.ndim, placement)
        nd = sbp_mod.to_text(sbp)
        _C.validate_nd_sbp(nd, shape, placement.text, False)
        shards = {}
        for r in local_ranks(placement):
            idx = placement.index_of(r)
            phys, offset = _C.shard_slice(shape, nd, placement.hierarchy, idx)
            if any(s.kind == "P" for s in sbp):  # a partial-sum value: the first device of each P axis holds it
                coords = np.unravel_index(idx, placement.hierarchy)
                if any(c != 0 for c, s in zip(coords, sbp) if s.kind == "P"):
                    shards[r] = np.zeros(phys, dtype)
                    continue
            shards[r] = _C.init_shard(kind, shape, offset, phys, dt, a, b, seed)
        t = Tensor._global(placement, sbp, shape, dtype, shards, pinned)
    t.requires_grad = requires_grad
    return t


def zeros(*size, dtype=None, placement=None, sbp=None, requires_grad=False):
    return _filled("zeros", size, dtype, placement, sbp, requires_grad)


def ones(*size, dtype=None, placement=None, sbp=None, requires_grad=False):
    return _filled("ones", size, dtype, placement, sbp, requires_grad)


def full(size, value, dtype=None, placement=None, sbp=None, requires_grad=False):
    return _filled("constant", [size] if isinstance(size, int) else size, dtype, placement, sbp, requires_grad,
                   a=float(value))


def randn(*size, dtype=None, placement=None, sbp=None, requires_grad=False, seed=None):
    return _filled("normal", size, dtype, placement, sbp, requires_grad, a=0.0, b=1.0,
                   seed=seed if seed is not None else next_seed())


def rand(*size, dtype=None, placement=None, sbp=None, requires_grad=False, seed=None):
    return _filled("uniform", size, dtype, placement, sbp, requires_grad, a=0.0, b=1.0,
                   seed=seed if seed is not None else next_seed())


def uniform(size, low, high, dtype=None, placement=None, sbp=None, seed=None):
    return _filled("uniform", size, dtype, placement, sbp, False, a=float(low), b=float(high),
                   seed=seed if seed is not None else next_seed())


def arange(n, dtype=np.int64, placement=None, sbp=None):
    return tensor(np.arange(n, dtype=dtype), placement=placement, sbp=sbp)

"""ol.save / ol.load: state dicts in the sharded, resharding checkpoint format of oltrain
(docs/checkpoint_format.md), so a checkpoint written by oltrain loads in Python and back.

    ol.save(model.state_dict(), "ckpt/step_00000010")      # a directory; every rank writes its shards
    sd = ol.load("ckpt")                                   # newest complete step_N (or a step dir)
    sd = ol.load("ckpt", placement=p, sbp=ol.sbp.broadcast)  # global tensors, any layout
    ol.save(graph, "ckpt")                                 # an nn.Graph: parameters + optimizer state
"""
import os

import numpy as np

from . import _C, _job
from . import sbp as sbp_mod
from ._state import STATE
from .tensor import Tensor, from_numpy_global, local_ranks, shards_for

_LOCAL = "cpu:[0]"


def save(obj, path, step=0):
    """Saves a state dict (name -> tensor or array) as a COMPLETE checkpoint directory `path`, or an
    nn.Graph (every variable, optimizer state included) under the root `path` (step_N)."""
    from .nn.graph import Graph
    if isinstance(obj, Graph):
        return obj.save(path, step if step else None)
    if not isinstance(obj, dict) or not obj:
        raise ValueError("ol.save takes a non-empty state dict (name -> tensor or numpy array) or an nn.Graph")
    tensors = {name: (v if isinstance(v, Tensor) else Tensor._local(np.asarray(v))) for name, v in obj.items()}
    for name, t in tensors.items():
        if t._placement is not None and any(s.kind == "P" for s in t._sbp):
            tensors[name] = t.to_global(sbp=[sbp_mod.broadcast if s.kind == "P" else s for s in t._sbp])
    kinds = {t._placement is None for t in tensors.values()}
    if len(kinds) > 1:
        raise ValueError("ol.save: the state dict mixes local and global tensors (make them all global, or all local)")
    local = kinds.pop()
    runner = _runner_for(tensors, local)
    for name, t in tensors.items():
        for r, shard in shards_for(runner, name, t, local):
            runner.write_variable_shard(name, r, shard)
    if os.path.exists(os.path.join(path, "COMPLETE")):
        raise ValueError(f"ol.save: {path} already holds a complete checkpoint")
    runner.save(path, int(step))
    runner.close()
    return path


def load(path, placement=None, sbp=None):
    """Loads every variable of a checkpoint (a COMPLETE step directory, or a root whose newest
    complete step_N is taken) saved under any layout: local tensors by default, or global ones on
    `placement` with `sbp` (default broadcast)."""
    path = _resolve(path)
    variables = _C.checkpoint_variables(path)
    tensors = {}
    for name, (shape, dtype) in variables.items():
        t = Tensor()
        t._shape, t._dtype = tuple(shape), np.dtype(_job.numpy_dtype(dtype))
        if placement is not None:
            t._placement = placement
            t._sbp = sbp_mod.normalize(sbp if sbp is not None else [sbp_mod.broadcast] * placement.ndim, placement)
            if any(s.kind == "P" for s in t._sbp):
                raise ValueError("ol.load: a partial-sum (P) layout cannot be loaded; use split or broadcast")
            nd = sbp_mod.to_text(t._sbp)
            try:
                _C.validate_nd_sbp(nd, list(shape), placement.text, False)
            except ValueError:  # e.g. a scalar or a short axis: keep it broadcast
                t._sbp = tuple([sbp_mod.broadcast] * placement.ndim)
        tensors[name] = t
    local = placement is None
    runner = _runner_for(tensors, local)
    runner.load(path)
    out = {}
    for name, t in tensors.items():
        if local:
            out[name] = Tensor._local(runner.read_variable_shard(name, 0))
        else:
            shards = {r: runner.read_variable_shard(name, r) for r in local_ranks(placement) if runner.holds(name, r)}
            out[name] = Tensor._global(placement, t._sbp, t._shape, t._dtype, shards)
    runner.close()
    return out


def _resolve(path):
    if os.path.exists(os.path.join(path, "COMPLETE")):
        return path
    steps = sorted(d for d in os.listdir(path) if d.startswith("step_")) if os.path.isdir(path) else []
    steps = [d for d in steps if os.path.exists(os.path.join(path, d, "COMPLETE"))]
    if not steps:
        raise ValueError(f"ol.load: no complete checkpoint at {path} (a directory with COMPLETE, or a root with "
                         "step_N subdirectories)")
    return os.path.join(path, steps[-1])


def _runner_for(tensors, local):
    """A plan holding every tensor as a (frozen) variable at its layout; nothing runs."""
    lines = ['config(name="checkpoint")']
    for name, t in sorted(tensors.items()):
        where = f"placement={_LOCAL} sbp=[B]" if local else \
            f"placement={t._placement.text} sbp={sbp_mod.to_text(t._sbp)}"
        lines.append(f"{_job.quote(name)} = variable(shape={_job.shape_text(t._shape)}, "
                     f"dtype={_job.dtype_name(t._dtype)}, frozen=true) {where}")
    text = "\n".join(lines) + "\n"
    world = 1 if local else (STATE.engine.world_size if STATE.engine.distributed else 0)
    engine = STATE.local() if local else STATE.engine
    return engine.new_runner(engine.compile(text, world_size=world))

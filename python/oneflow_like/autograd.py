"""Eager autograd. backward() replays the recorded ops from the leaves to the loss as one job, asks
the compiler's autograd pass for the gradients of the leaves that require them (the same backward
rules nn.Graph and oltrain use; no second implementation here), runs the compiled plan through the
actor runtime and accumulates the results into each leaf's .grad."""
import numpy as np

from . import _job
from . import sbp as sbp_mod
from ._state import STATE
from .tensor import Tensor, _LOCAL_PLACEMENT, _world, no_grad, shards_for


def backward(loss, gradient=None):
    if gradient is not None:
        loss = (loss * gradient).sum()
    if tuple(loss.shape) != ():
        raise RuntimeError(f"grad can be implicitly created only for scalar outputs (the tensor has shape "
                           f"{list(loss.shape)}; pass gradient= or reduce it first)")
    if not loss.requires_grad:
        raise RuntimeError("backward(): the tensor does not require grad (no input of the ops that made it has "
                           "requires_grad=True)")
    if loss._node is None:  # a leaf: d loss / d loss = 1
        _accumulate(loss, _ones_like(loss))
        return
    local = loss._placement is None
    names, lines, feeds, variables, nodes = {}, [f'config(name="backward")'], {}, [], []

    def leaf_name(t):
        key = id(t)
        if key not in names:
            names[key] = t._name()
            dt = _job.dtype_name(t._dtype)
            where = f"placement={_LOCAL_PLACEMENT} sbp=[B]" if local else \
                f"placement={t._placement.text} sbp={sbp_mod.to_text(t._sbp)}"
            if t.requires_grad:
                lines.append(f"{names[key]} = variable(shape={_job.shape_text(t._shape)}, dtype={dt}) {where}")
                variables.append(t)
            else:
                lines.append(f"{names[key]} = input(shape={_job.shape_text(t._shape)}, dtype={dt}) {where}")
                feeds[names[key]] = t
        return names[key]

    seen = set()

    def visit(t):
        node = t._node
        if node is None or not t.requires_grad:
            return leaf_name(t)
        if node.nid not in seen:
            seen.add(node.nid)
            args = [visit(x) for x in node.inputs]
            nodes.append((node, args))
        return f"n{node.nid}_{t._out_index}"

    root = visit(loss)
    for node, args in nodes:
        outs = ", ".join(f"n{node.nid}_{i}" for i in range(node.num_outputs))
        attrs = dict(node.attrs)
        where = ""
        if "__to_global__" in attrs:
            placement, sbp = attrs.pop("__to_global__")
            where = f" placement={placement.text} sbp={sbp_mod.to_text(sbp)}"
            if placement != node.inputs[0]._placement and any(s.kind == "P" for s in sbp):
                # as Tensor.to_global: into P across placements via B on the destination
                hop = f"n{node.nid}_hop"
                lines.append(f"{hop} = identity({args[0]}) placement={placement.text} "
                             f"sbp={sbp_mod.to_text([sbp_mod.broadcast] * placement.ndim)}")
                args = [hop]
        lines.append(f"{outs} = {node.op_type}({', '.join(args)}{_job.attrs_text(attrs)}){where}")
    if not variables:
        raise RuntimeError("backward(): no leaf tensor requires grad")
    lines.append(f"train({root}, optimizer=sgd(lr=1.0))")  # the optimizer is dropped: gradients only
    text = "\n".join(lines) + "\n"
    var_names = [names[id(v)] for v in variables]
    runner = STATE.runner_for(text, world_size=1 if local else _world(), gradients_of=var_names, local=local)
    for v, name in zip(variables, var_names):
        for r, shard in shards_for(runner, name, v, local):
            runner.write_variable_shard(name, r, shard)
    for name, t in feeds.items():
        for r, shard in shards_for(runner, name, t, local):
            runner.feed_shard(name, r, shard)
    runner.run_step()
    for v, name in zip(variables, var_names):
        gname = f"{name}/grad"
        if local:
            g = Tensor._local(runner.fetch_shards(gname, 0)[0])
        else:
            info = next(runner.binding(gname, r) for r in runner.plan.ranks if runner.binding(gname, r) is not None)
            shards = {r: runner.fetch_shards(gname, r)[0] for r in runner.local_ranks if runner.holds(gname, r)}
            # The gradient lives where the compiler computed it (the consumers' placement).
            g = Tensor._global(binding_placement(runner, gname), sbp_mod.from_text(info["nd_sbp"]),
                               info["logical_shape"], v._dtype, shards)
            if not _same_layout(g, v):
                with no_grad():
                    g = g.to_global(placement=v._placement, sbp=v._sbp)
        _accumulate(v, g)


def binding_placement(runner, name):
    """The placement of a plan's binding: its ranks in mesh order, shaped as its hierarchy."""
    from .placement import placement as Placement
    held = []
    for r in runner.plan.ranks:
        b = runner.binding(name, r)
        if b is not None:
            h = b["hierarchy"]
            held.append((int(np.ravel_multi_index(b["mesh_coords"], h)) if h else 0, r, h))
    held.sort()
    ranks = [r for _, r, _ in held]
    h = held[0][2]
    if len(h) == 2:
        ranks = [ranks[i * h[1]:(i + 1) * h[1]] for i in range(h[0])]
    return Placement("cpu", ranks)


def _same_layout(a, b):
    return a._placement == b._placement and a._sbp == b._sbp


def _ones_like(t):
    from . import creation
    return creation.ones(*t._shape, dtype=t._dtype.type, placement=t._placement, sbp=t._sbp)


def _accumulate(leaf, g):
    if leaf.grad is None:
        leaf.grad = g
    else:
        with no_grad():
            leaf.grad = leaf.grad + g


def grad(outputs, inputs):
    """ol.autograd.grad(loss, [x, w]): the gradients without touching .grad."""
    saved = [(t, t.grad) for t in inputs]
    for t in inputs:
        t.grad = None
    try:
        backward(outputs)
        return [t.grad for t in inputs]
    finally:
        for t, g in saved:
            t.grad = g

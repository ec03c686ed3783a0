"""Tracing nn.Graph.build(): ops on the graph's tensors are written as statements of one job in the
compiler's text format; each op's output shapes come from the compiler's own inference."""
import contextlib

import numpy as np

from . import _job
from . import sbp as sbp_mod
from ._state import STATE
from .tensor import Tensor

_LOCAL = "cpu:[0]"


class _Active:
    tracer = None


def active():
    return _Active.tracer is not None


class Tracer:
    def __init__(self, recompute_all=False):
        self.lines = []
        self.names = {}          # id(eager tensor) -> job name
        self.inputs = []         # (name, tensor)
        self.variables = []      # (name, parameter)
        self.constants = []      # (name, eager tensor) frozen variables holding values
        self.ops = []            # (op name, type, placement text or None)
        self.loss = None
        self.scope = []          # module path and stage of the modules being called
        self.used = set()
        self.recompute_all = recompute_all
        self.keep = []           # tensors named here stay alive while tracing

    def unique(self, base):
        base = base.replace(" ", "_") or "t"
        name, k = base, 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name

    @staticmethod
    def where(t):
        if t._placement is None:
            return f"placement={_LOCAL}", _LOCAL
        return f"placement={t._placement.text}", t._placement.text

    def declare_input(self, name, t, shape):
        name = self.unique(name)
        where, ptext = self.where(t)
        pin = f" sbp={sbp_mod.to_text(t._sbp)}" if t._placement is not None and t._pinned else \
            (" sbp=[B]" if t._placement is None else "")
        self.lines.append(f"{_job.quote(name)} = input(shape={_job.shape_text(shape)}, "
                          f"dtype={_job.dtype_name(t._dtype)}) {where}{pin}")
        self.inputs.append((name, t))
        lazy = _lazy(name, shape, t._dtype, t._placement)
        self.keep.append(t)
        return lazy

    def name_of(self, t):
        if t._lazy is not None:
            return t._lazy
        key = id(t)
        if key in self.names:
            return self.names[key]
        from .nn.module import Parameter
        is_param = isinstance(t, Parameter)
        name = self.unique(getattr(t, "_trace_name", None) or ("param" if is_param else "const"))
        where, _ = self.where(t)
        pin = f" sbp={sbp_mod.to_text(t._sbp)}" if t._placement is not None and t._pinned else \
            (" sbp=[B]" if t._placement is None else "")
        frozen = "" if (is_param and t.requires_grad) else ", frozen=true"
        self.lines.append(f"{_job.quote(name)} = variable(shape={_job.shape_text(t._shape)}, "
                          f"dtype={_job.dtype_name(t._dtype)}{frozen}) {where}{pin}")
        (self.variables if is_param else self.constants).append((name, t))
        self.names[key] = name
        self.keep.append(t)
        return name

    def record(self, op_type, inputs, attrs, num_outputs):
        args = [self.name_of(x) for x in inputs]
        prefix = next((p for p, _ in reversed(self.scope) if p), "")
        base = f"{prefix}.{op_type}" if prefix else op_type
        outs = [self.unique(base if i == 0 else f"{base}.{i}") for i in range(num_outputs)]
        opts = []
        stage = next((s for _, s in reversed(self.scope) if s is not None), None)
        if "__placement__" in attrs:
            placement, sbp = attrs.pop("__placement__")
            opts.append(f"placement={placement.text}")
            if sbp is not None:
                opts.append(f"sbp={sbp_mod.to_text(sbp)}")
        elif stage is not None and stage[1] is not None:
            opts.append(f"placement={stage[1].text}")
        if stage is not None and stage[0]:
            opts.append(f"stage={stage[0]}")
        if self.recompute_all or any(getattr(m, "activation_checkpointing", False) for m in self.modules()):
            if op_type not in ("identity",):
                opts.append("recompute=true")
        line = (f"{', '.join(_job.quote(o) for o in outs)} = {op_type}({', '.join(_job.quote(a) for a in args)}"
                f"{_job.attrs_text(attrs)})" + ("" if not opts else " " + " ".join(opts)))
        # Output shapes: the compiler's inference on this op alone.
        probe = []
        for i, x in enumerate(inputs):
            where, _ = self.where(x) if x._lazy is None else (f"placement={x._placement.text}" if x._placement is not None
                                                              else f"placement={_LOCAL}", None)
            probe.append(f"{_job.quote(args[i])} = input(shape={_job.shape_text(x._shape)}, "
                         f"dtype={_job.dtype_name(x._dtype)}) {where}")
        probe_line = line.replace(" recompute=true", "")
        probe_line = " ".join(w for w in probe_line.split(" ") if not w.startswith("stage="))
        if not inputs and "placement=" not in probe_line:
            probe_line += f" placement={_LOCAL}"
        try:
            info = STATE.engine.infer("\n".join(probe + [probe_line]) + "\n")
        except ValueError as e:
            raise ValueError(f"in nn.Graph.build(), op '{outs[0]}' ({op_type}): {e}") from None
        self.lines.append(line)
        from .placement import placement as Placement
        results = []
        for o in outs:
            shape, dtype, ptext, _ = info[o]
            pl = None
            if ptext and ptext != _LOCAL or any(x._placement is not None for x in inputs):
                pl = _placement_from_text(ptext)
            results.append(_lazy(o, shape, _job.numpy_dtype(dtype), pl))
        self.ops.append((outs[0], op_type))
        return results

    def modules(self):
        return [m for m, _ in getattr(self, "_module_stack", [])]


_PLACEMENTS = {}


def _placement_from_text(text):
    if text not in _PLACEMENTS:
        import ast
        from .placement import placement as Placement
        ranks = ast.literal_eval(text.split(":", 1)[1])
        _PLACEMENTS[text] = Placement("cpu", ranks)
    return _PLACEMENTS[text]


def _lazy(name, shape, dtype, placement):
    t = Tensor()
    t._lazy = name
    t._shape = tuple(int(d) for d in shape)
    t._dtype = np.dtype(dtype)
    t._placement = placement
    return t


def staged():
    """Whether the op being traced runs inside a module given a stage placement (set_stage)."""
    tracer = _Active.tracer
    return tracer is not None and any(s is not None and s[1] is not None for _, s in tracer.scope)


def record(op_type, inputs, attrs, num_outputs):
    tracer = _Active.tracer
    if tracer is None:
        raise RuntimeError(f"{op_type}: a graph tensor is used outside nn.Graph.build() (use the graph's outputs)")
    return tracer.record(op_type, inputs, attrs, num_outputs)


def to_global(t, placement, sbp):
    placement = placement or t._placement
    sbp = sbp_mod.normalize(sbp, placement) if sbp is not None else None
    attrs = {"__placement__": (placement, sbp)}
    return _Active.tracer.record("identity", [t], attrs, 1)[0]


def set_loss(t):
    tracer = _Active.tracer
    if tracer is None:
        raise RuntimeError("backward() of a graph tensor outside nn.Graph.build()")
    if tuple(t._shape) != ():
        raise RuntimeError(f"loss.backward(): the loss '{t._lazy}' must be a scalar, it has shape {list(t._shape)}")
    tracer.loss = t._lazy


@contextlib.contextmanager
def tracing(tracer):
    prev = _Active.tracer
    _Active.tracer = tracer
    tracer._module_stack = []
    try:
        yield tracer
    finally:
        _Active.tracer = prev


@contextlib.contextmanager
def module_scope(module):
    tracer = _Active.tracer
    if tracer is None:
        yield
        return
    path = getattr(module, "_trace_path", "")
    tracer.scope.append((path, module._stage))
    tracer._module_stack.append((module, None))
    try:
        yield
    finally:
        tracer.scope.pop()
        tracer._module_stack.pop()

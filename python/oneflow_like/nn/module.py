"""ol.nn.Module and Parameter, PyTorch-style."""
import collections

import numpy as np

from .. import sbp as sbp_mod
from ..tensor import Tensor, from_numpy_global


class Parameter(Tensor):
    """A trainable tensor of a Module (requires_grad=True)."""

    def __init__(self, data, requires_grad=True):
        super().__init__()
        if not isinstance(data, Tensor):
            from ..creation import tensor
            data = tensor(data)
        self._take(data)
        self.requires_grad = requires_grad
        self._version = 0

    def _take(self, t):
        self._placement, self._sbp, self._shape, self._dtype = t._placement, t._sbp, t._shape, t._dtype
        self._shards, self._value, self._pinned = t._shards, t._value, t._pinned
        self._logical = getattr(t, "_logical", None)

    def _assign(self, other):
        super()._assign(other)
        self._pinned = other._pinned if other._placement is not None else self._pinned
        self._version = getattr(self, "_version", 0) + 1  # nn.Graph pushes it before its next step

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    def __init__(self):
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_modules", collections.OrderedDict())
        object.__setattr__(self, "_buffers", collections.OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_stage", None)             # (stage_id, placement) from set_stage
        object.__setattr__(self, "activation_checkpointing", False)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}.__init__ must call super().__init__() before assigning '{name}'")
        for d in (self._parameters, self._modules, self._buffers):
            d.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def register_buffer(self, name, tensor):
        self._buffers[name] = tensor
        object.__setattr__(self, name, tensor)

    def register_parameter(self, name, param):
        setattr(self, name, param)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        from .. import _graph_trace
        with _graph_trace.module_scope(self):
            return self.forward(*args, **kwargs)

    # --- traversal ----------------------------------------------------------------------
    def named_modules(self, prefix=""):
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        return iter(self._modules.items())

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, p in m._parameters.items():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mp}.{name}" if mp else name), p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self):
        for mp, m in self.named_modules():
            for name, b in m._buffers.items():
                yield (f"{mp}.{name}" if mp else name), b

    # --- modes --------------------------------------------------------------------------
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None

    def requires_grad_(self, flag=True):
        for p in self.parameters():
            p.requires_grad = flag
        return self

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # --- state --------------------------------------------------------------------------
    def state_dict(self):
        out = collections.OrderedDict()
        for name, p in self.named_parameters():
            if p._sync is not None:
                p._sync(p)
            out[name] = p.detach_value()
        for name, b in self.named_buffers():
            out[name] = b
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Values are numpy arrays or tensors (local or global, any layout); each parameter keeps
        its placement and SBP."""
        params = dict(self.named_parameters())
        missing = [k for k in params if k not in state_dict]
        unexpected = [k for k in state_dict if k not in params]
        if strict and (missing or unexpected):
            raise ValueError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for name, value in state_dict.items():
            if name not in params:
                continue
            p = params[name]
            array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
            if tuple(array.shape) != tuple(p.shape):
                raise ValueError(f"load_state_dict: size mismatch for {name}: copying a param with shape "
                                 f"{list(array.shape)}, the shape in the current model is {list(p.shape)}")
            array = np.ascontiguousarray(array, dtype=p._dtype)
            if p._placement is None:
                p._assign(Tensor._local(array.copy()))
            else:
                p._assign(from_numpy_global(array, p._placement, p._sbp, p._pinned))
        return missing, unexpected

    # --- placement ----------------------------------------------------------------------
    def to_global(self, placement=None, sbp=None):
        """Moves every parameter to `placement` with `sbp` (one SBP or a tuple per mesh axis; a
        callable (name, param) -> sbp for per-parameter layouts). sbp=None: the compiler's SBP
        search chooses the layout inside nn.Graph (stored broadcast until then)."""
        for name, p in self.named_parameters():
            s = sbp(name, p) if callable(sbp) else sbp
            if p._placement is None:  # a local module: its values are the logical values (same on every rank)
                target = placement
                p._assign(from_numpy_global(p._value, target, s if s is not None else [sbp_mod.broadcast] * target.ndim))
            else:
                p._assign(p.to_global(placement=placement, sbp=s))
            if s is None:
                p._pinned = False
        return self

    to_consistent = to_global

    def set_stage(self, stage_id, placement=None):
        """Pipeline stage of this module (OneFlow's set_stage): its ops run on `placement` as
        stage `stage_id`; parameters move there (keeping their SBP when the mesh rank matches)."""
        object.__setattr__(self, "_stage", (int(stage_id), placement))
        if placement is not None:
            for _, p in self.named_parameters():
                keep = p._placement is not None and p._placement.ndim == placement.ndim
                s = p._sbp if keep else [sbp_mod.broadcast] * placement.ndim
                pinned = p._pinned if keep else False
                if p._placement is None:
                    p._assign(from_numpy_global(p._value, placement, s))
                else:
                    p._assign(p.to_global(placement=placement, sbp=s))
                p._pinned = pinned
        return self

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {sub}")
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"

"""Eager ops (and the same calls traced inside nn.Graph.build()): thin names over the op registry
(docs/ops_contract.md). Any registered op is also reachable as ol.op("type", *inputs, **attrs)."""
import builtins
import numbers

import numpy as np

from .tensor import Tensor, op, run_op


def _scalar(x):
    return isinstance(x, numbers.Number) and not isinstance(x, bool)


def add(a, b):
    if _scalar(b):
        return op("scalar_add", a, value=float(b))
    if _scalar(a):
        return op("scalar_add", b, value=float(a))
    return op("add", a, b)


def sub(a, b):
    if _scalar(b):
        return op("scalar_add", a, value=-float(b))
    if _scalar(a):
        return op("scalar_add", op("scalar_mul", b, value=-1.0), value=float(a))
    return op("sub", a, b)


def mul(a, b):
    if _scalar(b):
        return op("scalar_mul", a, value=float(b))
    if _scalar(a):
        return op("scalar_mul", b, value=float(a))
    return op("mul", a, b)


def div(a, b):
    if _scalar(b):
        return op("scalar_mul", a, value=1.0 / float(b))
    if _scalar(a):  # scalar / tensor: a 0-d operand broadcast by the op
        return op("div", np.array(a, dtype=b._dtype), b)
    return op("div", a, b)


def _dim(d, n, what="dim"):
    d = int(d)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected {what} in [{-n}, {n - 1}], but got {d})")
    return d % n


def neg(x):
    return op("scalar_mul", x, value=-1.0)


def matmul(a, b, transpose_a=False, transpose_b=False, alpha=1.0):
    attrs = {}
    if transpose_a:
        attrs["transpose_a"] = True
    if transpose_b:
        attrs["transpose_b"] = True
    if alpha != 1.0:
        attrs["alpha"] = float(alpha)
    return op("matmul", a, b, **attrs)


mm = matmul
bmm = matmul


def relu(x):
    return op("relu", x)


def gelu(x, approximate="none"):
    return op("gelu", x, approximate=approximate)


def softmax(x, dim=-1, causal=False):
    _last_axis(x, dim, "softmax")
    return op("softmax", x, causal=True) if causal else op("softmax", x)


def log_softmax(x, dim=-1, causal=False):
    _last_axis(x, dim, "log_softmax")
    return op("log_softmax", x, causal=True) if causal else op("log_softmax", x)


def _last_axis(x, dim, name):
    if dim not in (-1, x.ndim - 1):
        raise ValueError(f"{name} runs over the last axis (dim=-1); got dim={dim} for a {x.ndim}-D tensor "
                         "(transpose first)")


def layer_norm(x, normalized_shape=None, weight=None, bias=None, eps=1e-5):
    d = x.shape[-1]
    if weight is None:
        from . import creation
        kw = _like(x)
        weight = creation.ones(d, dtype=x.dtype, **kw)
        bias = creation.zeros(d, dtype=x.dtype, **kw) if bias is None else bias
    y, _, _ = run_op("layer_norm", [x, weight, bias], {"epsilon": float(eps)}, 3)
    return y


def _like(x):
    if x.placement is None:
        return {}
    from . import sbp
    return {"placement": x.placement, "sbp": [sbp.broadcast] * x.placement.ndim}


def reshape(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = shape[0]
    return op("reshape", x, shape=[int(s) for s in shape])


def transpose(x, dim0=0, dim1=1):
    n = x.ndim
    perm = list(range(n))
    dim0, dim1 = _dim(dim0, n), _dim(dim1, n)
    perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
    return op("transpose", x, perm=perm)


def permute(x, *perm):
    if len(perm) == 1 and isinstance(perm[0], (list, tuple)):
        perm = perm[0]
    return op("transpose", x, perm=[int(p) for p in perm])


def _axes(dim, n):
    if dim is None:
        return []
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return sorted(_dim(d, n) for d in dims)


def sum(x, dim=None, keepdim=False):  # noqa: A001 - torch's name
    return op("reduce_sum", x, axes=_axes(dim, x.ndim), keepdims=bool(keepdim))


def mean(x, dim=None, keepdim=False):
    return op("reduce_mean", x, axes=_axes(dim, x.ndim), keepdims=bool(keepdim))


def cross_entropy(logits, target, reduction="mean"):
    """Mean softmax cross-entropy over the label positions (logits [..., C], integer targets)."""
    if reduction != "mean":
        raise ValueError(f"cross_entropy supports reduction='mean' (the registry's op), got '{reduction}'")
    return op("sparse_softmax_cross_entropy", logits, target)


def embedding(ids, table):
    return op("embedding", table, ids)


def cat(tensors, dim=0):
    return op("concat", *tensors, axis=_dim(dim, tensors[0].ndim))


concat = cat


def split(x, split_size_or_sections, dim=0):
    dim = _dim(dim, x.ndim)
    n = x.shape[dim]
    if isinstance(split_size_or_sections, int):
        sizes = [split_size_or_sections] * (n // split_size_or_sections)
        if n % split_size_or_sections:
            sizes.append(n % split_size_or_sections)
    else:
        sizes = list(split_size_or_sections)
    outs = run_op("split", [x], {"axis": dim, "sizes": sizes}, len(sizes))
    return tuple(outs)


def slice(x, begin, end):  # noqa: A001
    return op("slice", x, begin=list(begin), end=list(end))


def broadcast_to(x, shape):
    return op("broadcast_to", x, shape=list(shape))


def cast(x, dtype):
    from . import _job
    return op("cast", x, dtype=_job.dtype_name(dtype))


def dropout(x, p=0.5, training=True, seed=None):
    if not training or p == 0.0:
        return x
    from . import creation
    return op("dropout", x, p=float(p), seed=int(seed if seed is not None else creation.next_seed()))


def identity(x):
    return op("identity", x)


def _getitem(x, index):
    if not isinstance(index, tuple):
        index = (index,)
    begin, end, squeeze = [], [], []
    for axis, n in enumerate(x.shape):
        item = index[axis] if axis < len(index) else builtins.slice(None)
        if isinstance(item, int):
            i = item % n
            begin.append(i)
            end.append(i + 1)
            squeeze.append(axis)
        elif isinstance(item, _pyslice):
            b, e, step = item.indices(n)
            if step != 1:
                raise ValueError("tensor indexing takes slices with step 1")
            begin.append(b)
            end.append(max(b, e))
        else:
            raise ValueError(f"unsupported index {item!r} (ints and slices)")
    y = slice(x, begin, end)
    if squeeze:
        y = reshape(y, [d for a, d in enumerate(y.shape) if a not in squeeze])
    return y


_pyslice = builtins.slice


def _install_methods():
    T = Tensor
    T.__add__ = lambda a, b: add(a, b)
    T.__radd__ = lambda a, b: add(b, a)
    T.__sub__ = lambda a, b: sub(a, b)
    T.__rsub__ = lambda a, b: sub(b, a)
    T.__mul__ = lambda a, b: mul(a, b)
    T.__rmul__ = lambda a, b: mul(b, a)
    T.__truediv__ = lambda a, b: div(a, b)
    T.__rtruediv__ = lambda a, b: div(b, a)
    T.__neg__ = neg
    T.__matmul__ = lambda a, b: matmul(a, b)
    T.__pow__ = _pow
    T.__getitem__ = _getitem
    T.add, T.sub, T.mul, T.div, T.matmul = add, sub, mul, div, matmul
    T.relu, T.gelu = relu, gelu
    T.softmax = softmax
    T.log_softmax = log_softmax
    T.reshape = reshape
    T.view = reshape
    T.transpose = transpose
    T.permute = permute
    T.sum, T.mean = sum, mean
    T.to = _to
    T.float = lambda x: cast(x, np.float32)
    T.double = lambda x: cast(x, np.float64)
    T.long = lambda x: cast(x, np.int64)
    T.int = lambda x: cast(x, np.int32)
    T.T = property(lambda x: transpose(x, 0, 1))
    T.flatten = lambda x, start_dim=0: reshape(x, list(x.shape[:start_dim]) + [-1])


def _pow(x, p):
    if p == 2:
        return mul(x, x)
    if p == 1:
        return x
    raise ValueError("tensor ** p supports p in (1, 2)")


def _to(x, dtype):
    return cast(x, dtype)


_install_methods()


def op_bias_add(y, b):
    return op("bias_add", y, b)


def bias_add(y, b, axis=-1):
    return op("bias_add", y, b, axis=int(axis))

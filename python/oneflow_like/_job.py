"""Writes jobs in the compiler's text format (compiler/text_format.h) for eager ops, eager
autograd and nn.Graph tracing: Python states the program, the C++ compiler does the rest."""
import numpy as np

_DTYPES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64", np.dtype(np.int32): "int32",
           np.dtype(np.int64): "int64", np.dtype(np.bool_): "bool"}
_NUMPY = {v: k for k, v in _DTYPES.items()}


def dtype_name(dtype):
    dt = np.dtype(dtype)
    if dt not in _DTYPES:
        raise ValueError(f"unsupported dtype {dt} (oneflow_like takes float32, float64, int32, int64, bool)")
    return _DTYPES[dt]


def numpy_dtype(name):
    return _NUMPY[name]


def shape_text(shape):
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def value_text(v):
    """An attribute value: 3, 0.5, true, "str", [1,2], float32."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        r = repr(float(v))
        return r if ("." in r or "e" in r or "n" in r) else r + ".0"
    if isinstance(v, str):
        if v in _NUMPY:  # a dtype attribute
            return v
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return dtype_name(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(value_text(x) for x in v) + "]"
    raise ValueError(f"attribute value {v!r} has no text form")


def attrs_text(attrs):
    return "".join(f", {k}={value_text(v)}" for k, v in sorted(attrs.items()) if v is not None)


def quote(name):
    return name if all(c.isalnum() or c in "_./" for c in name) and not name[0].isdigit() else f'"{name}"'

"""oneflow_like: global tensors, eager ops with autograd, nn.Module / nn.Graph and optimizers over
the oneflow_like C++ compiler and actor runtime.

    import oneflow_like as ol
    p = ol.placement("cpu", ranks=[0, 1])
    x = ol.randn(4, 6, placement=p, sbp=ol.sbp.split(0))
    y = (x @ ol.ones(6, 3, placement=p, sbp=ol.sbp.broadcast)).relu()
    print(y.sbp, y.numpy())
"""
import numpy as _np

from . import sbp
from . import env
from .placement import placement
from .tensor import Tensor, no_grad, op, Size
from .creation import (tensor, from_numpy, zeros, ones, full, randn, rand, uniform, arange, manual_seed)
from .functional import (add, sub, mul, div, neg, matmul, mm, bmm, relu, gelu, softmax, log_softmax, layer_norm,
                         reshape, transpose, permute, sum, mean, cross_entropy, embedding, cat, concat, split,
                         broadcast_to, cast, dropout, identity)
from . import autograd
from . import nn
from . import optim
from .checkpoint import save, load

float32 = _np.float32
float64 = _np.float64
float = _np.float32  # noqa: A001 - OneFlow's alias
double = _np.float64
int32 = _np.int32
int64 = _np.int64
long = _np.int64
bool = _np.bool_  # noqa: A001

__version__ = "0.1.0"


def op_types():
    """Every op type of the registry (docs/ops_contract.md); run any with ol.op(type, *inputs, **attrs)."""
    from ._state import STATE
    return STATE.engine.op_types()

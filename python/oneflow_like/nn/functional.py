"""ol.nn.functional: the functional ops under torch.nn.functional's names."""
from ..functional import (relu, gelu, softmax, log_softmax, layer_norm, cross_entropy, embedding, dropout,  # noqa: F401
                          matmul)


def linear(x, weight, bias=None):
    from ..functional import matmul as mm, op_bias_add
    y = mm(x, weight, transpose_b=True)
    return op_bias_add(y, bias) if bias is not None else y

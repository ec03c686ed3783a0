"""Layers: Linear, Embedding, LayerNorm, Dropout, GELU, ReLU, Sequential, ModuleList, CrossEntropyLoss.
Weights keep PyTorch's layouts (Linear weight [out, in]) and initialization laws."""
import math

from .. import creation
from .. import functional as F
from .module import Module, Parameter


def _init(shape, kind, a, b):
    return creation.uniform(shape, a, b) if kind == "uniform" else creation.randn(*shape) * b + a


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight = Parameter(creation.uniform([out_features, in_features], -bound, bound))
        self.bias = Parameter(creation.uniform([out_features], -bound, bound)) if bias else None

    def forward(self, x):
        y = F.matmul(x, self.weight, transpose_b=True)
        if self.bias is not None:
            y = F.op_bias_add(y, self.bias)
        return y

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(creation.randn(num_embeddings, embedding_dim))

    def forward(self, ids):
        return F.embedding(ids, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        d = normalized_shape if isinstance(normalized_shape, int) else normalized_shape[-1]
        self.normalized_shape, self.eps = d, eps
        self.weight = Parameter(creation.ones(d), requires_grad=elementwise_affine)
        self.bias = Parameter(creation.zeros(d), requires_grad=elementwise_affine)

    def forward(self, x):
        return F.layer_norm(x, (self.normalized_shape,), self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"({self.normalized_shape},), eps={self.eps}"


class Dropout(Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


class Identity(Module):
    def forward(self, x):
        return x


class Softmax(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim)


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, m):
        setattr(self, str(len(self._modules)), m)
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __iter__(self):
        return iter(self._modules.values())

    def __len__(self):
        return len(self._modules)


class CrossEntropyLoss(Module):
    """Mean softmax cross-entropy; logits [..., C] with integer targets [...] (flattened as torch's
    F.cross_entropy(logits.view(-1, C), targets.view(-1)))."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, logits, target):
        return F.cross_entropy(logits, target, self.reduction)

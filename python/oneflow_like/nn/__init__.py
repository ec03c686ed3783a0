"""ol.nn: modules, layers, losses and nn.Graph (trace once, compile, run the plan every step)."""
from .module import Module, Parameter
from .layers import (Linear, Embedding, LayerNorm, Dropout, GELU, ReLU, Identity, Softmax, Sequential, ModuleList,
                     CrossEntropyLoss)
from .graph import Graph
from . import functional

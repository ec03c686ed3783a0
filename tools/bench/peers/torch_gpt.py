"""W2 "gpt-tiny" in plain PyTorch: the model oneflow_like's GPT job reproduces (models/gpt.h), its
portable initialization and synthetic data, and the optimizer settings of the benchmarks.

Model (GptDims defaults = gpt-tiny: vocab 2048, seq_len 128, 4 layers, 256 wide, 4 heads):
  x = wte[idx] + wpe[0..T)                               learned token and position embeddings
  per block (pre-LayerNorm, residual, no dropout):
    q, k, v = split(Linear(C -> 3C)(LayerNorm(x)))        heads of C / n_head
    x = x + Linear(C -> C)(softmax(causal(q k^T / sqrt(hd))) v)
    x = x + Linear(4C -> C)(gelu_erf(Linear(C -> 4C)(LayerNorm(x))))
  loss = mean cross-entropy(Linear(C -> vocab, no bias)(LayerNorm(x)), targets)   untied head
  gpt-tiny has 4,240,896 parameters. LayerNorm eps 1e-5. No fused attention.
Parameters, in named_parameters() order (their index is the portable stream number):
  wte.weight, wpe.weight, then per block ln1.{weight,bias}, qkv.{weight,bias}, proj.{weight,bias},
  ln2.{weight,bias}, fc.{weight,bias}, fc2.{weight,bias}; ln_f.{weight,bias}; lm_head.weight.
Initialization: LayerNorm weight 1 and bias 0, Linear biases 0, Linear/Embedding weights of std
  0.02: init="portable" (default) draws them from peerlib.portable_values(seed, stream, n, 0.02)
  in torch's row-major storage order (bit-exact in C++: oneflow_like/core/random.h);
  init="torch" from torch's normal generator after torch.manual_seed(seed).
Data: synthetic_batch(step, batch): sequence b of step s starts at r mod vocab and strides by
  1 + ((r >> 32) mod 8), r = splitmix64((seed << 40) + (s << 20) + 0xABCDE + b); its seq_len + 1
  tokens give inputs [:-1] and targets [1:] (models/synthetic_data.h, bit-exact).
Optimizer: AdamW(lr 3e-4, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01 on every parameter),
  gradients set to None between steps.
"""
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import peerlib


@dataclass
class GptDims:
    vocab: int = 2048
    seq_len: int = 128
    n_layer: int = 4
    n_embd: int = 256
    n_head: int = 4


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.n_head = d.n_head
        self.ln1 = nn.LayerNorm(d.n_embd)
        self.qkv = nn.Linear(d.n_embd, 3 * d.n_embd)
        self.proj = nn.Linear(d.n_embd, d.n_embd)
        self.ln2 = nn.LayerNorm(d.n_embd)
        self.fc = nn.Linear(d.n_embd, 4 * d.n_embd)
        self.fc2 = nn.Linear(4 * d.n_embd, d.n_embd)
        # A buffer, not a parameter: DDP must be told to skip it (gloo cannot broadcast bool).
        self.register_buffer("causal_mask", torch.ones(d.seq_len, d.seq_len, dtype=torch.bool).tril())

    def attention(self, h):
        batch, steps, width = h.shape
        head = width // self.n_head
        q, k, v = self.qkv(h).split(width, dim=2)
        q, k, v = (t.view(batch, steps, self.n_head, head).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head))
        scores = scores.masked_fill(~self.causal_mask[:steps, :steps], float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(batch, steps, width))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, dims=None):
        super().__init__()
        self.dims = dims or GptDims()
        d = self.dims
        self.wte = nn.Embedding(d.vocab, d.n_embd)
        self.wpe = nn.Embedding(d.seq_len, d.n_embd)
        self.blocks = nn.ModuleList(Block(d) for _ in range(d.n_layer))
        self.ln_f = nn.LayerNorm(d.n_embd)
        self.lm_head = nn.Linear(d.n_embd, d.vocab, bias=False)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def init_weights(model, init="portable", seed=0):
    """LayerNorm 1 / 0, biases 0, weights of std 0.02 (portable or torch's generator)."""
    with torch.no_grad():
        for stream, (name, p) in enumerate(model.named_parameters()):
            layer_norm = name.startswith("ln_f.") or ".ln1." in name or ".ln2." in name
            if layer_norm:
                p.fill_(1.0 if name.endswith(".weight") else 0.0)
            elif name.endswith(".bias"):
                p.zero_()
            elif init == "torch":
                p.normal_(0.0, 0.02)
            elif init == "portable":
                values = peerlib.portable_values(seed, stream, p.numel(), 0.02)
                p.copy_(torch.from_numpy(values).view(p.shape))
            else:
                raise ValueError("init must be portable or torch, got %r" % init)
    return model


def build(init="portable", seed=0, dims=None):
    torch.manual_seed(seed)
    return init_weights(Gpt(dims), init, seed)


def adamw(params):
    return torch.optim.AdamW(params, lr=3e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def synthetic_batch(step, batch, dims=None, seed=0):
    """(inputs, targets): int64 [batch, seq_len] each."""
    d = dims or GptDims()
    offset = (seed << 40) + (step << 20) + 0xABCDE
    r = peerlib.splitmix64(np.arange(batch, dtype=np.uint64) + np.uint64(offset))
    start = (r % np.uint64(d.vocab)).astype(np.int64)
    stride = ((r >> np.uint64(32)) % np.uint64(8)).astype(np.int64) + 1
    t = np.arange(d.seq_len + 1, dtype=np.int64)
    tokens = torch.from_numpy((start[:, None] + stride[:, None] * t[None, :]) % d.vocab)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def gemm_gflop_per_step(batch, dims=None):
    """GFLOP of the step's matrix products (forward, input and weight gradients): the work a
    step needs at the sgemm rate. Attention products count the full (unmasked) T x T."""
    d = dims or GptDims()
    c, t = d.n_embd, d.seq_len
    per_token = d.n_layer * (2 * c * (3 * c + c + 4 * c + 4 * c) + 2 * 2 * t * c) + 2 * c * d.vocab
    return 3.0 * per_token * batch * t / 1e9

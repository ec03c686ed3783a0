"""A decoder-only GPT written with ol.nn (the architecture of oltrain's GPT and of
tools/bench/peers/torch_gpt.py: pre-LayerNorm blocks, causal attention, GELU MLP, untied head).
Layouts are set per parameter by name (`param_sbp`), Megatron style on the tensor axis."""
import math

import oneflow_like as ol
import oneflow_like.nn as nn


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(n_embd)
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.ln2 = nn.LayerNorm(n_embd)
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.fc2 = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.n_head
        q, k, v = ol.split(self.qkv(self.ln1(x)), C, dim=2)
        q, k, v = [t.reshape(B, T, self.n_head, hd).permute(0, 2, 1, 3) for t in (q, k, v)]
        att = ol.matmul(q, k, transpose_b=True, alpha=1.0 / math.sqrt(hd))
        att = ol.softmax(att, causal=True)
        y = (att @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(self.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, seq_len, n_layer, n_embd, n_head):
        super().__init__()
        self.seq_len = seq_len
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(seq_len, n_embd)
        self.blocks = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        for name, p in self.named_parameters():  # GPT-2 style init, as torch_gpt.py
            if name.endswith("weight") and p.ndim == 2:
                p._assign(ol.randn(*p.shape) * 0.02)
            elif name.endswith("bias") and ".ln" not in name and "ln_f" not in name:
                p._assign(ol.zeros(*p.shape))

    def forward(self, idx, pos):
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


COLUMN = (".qkv.weight", ".qkv.bias", ".fc.weight", ".fc.bias")  # split the output features
ROW = (".proj.weight", ".fc2.weight")                            # split the input features


def param_sbp(name, tp_axis, ndim):
    """Megatron-style layout of parameter `name` on a mesh with `ndim` axes, the tensor-parallel
    axis being `tp_axis` (None: no tensor parallelism)."""
    layout = [ol.sbp.broadcast] * ndim
    if tp_axis is not None:
        if name.endswith(COLUMN):
            layout[tp_axis] = ol.sbp.split(0)
        elif name.endswith(ROW):
            layout[tp_axis] = ol.sbp.split(1)
    return tuple(layout)

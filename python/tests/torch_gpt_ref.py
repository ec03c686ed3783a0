"""The GPT of examples/gpt_model.py in PyTorch (same parameter names and layouts), for references."""
import math

import torch
import torch.nn as tnn
import torch.nn.functional as F


class Block(tnn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln1, self.ln2 = tnn.LayerNorm(C), tnn.LayerNorm(C)
        self.qkv, self.proj = tnn.Linear(C, 3 * C), tnn.Linear(C, C)
        self.fc, self.fc2 = tnn.Linear(C, 4 * C), tnn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.H
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = [t.view(B, T, self.H, hd).transpose(1, 2) for t in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class GPT(tnn.Module):
    def __init__(self, vocab, T, L, C, H):
        super().__init__()
        self.wte, self.wpe = tnn.Embedding(vocab, C), tnn.Embedding(T, C)
        self.blocks = tnn.ModuleList([Block(C, H) for _ in range(L)])
        self.ln_f = tnn.LayerNorm(C)
        self.lm_head = tnn.Linear(C, vocab, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def train_losses(state, batches, steps, lr, dims):
    torch.manual_seed(0)
    model = GPT(*dims)
    model.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    out = []
    for _ in range(steps):
        x, y = next(batches)
        logits = model(torch.tensor(x))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.tensor(y).reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out

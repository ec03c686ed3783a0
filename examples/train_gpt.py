"""Trains a GPT defined in Python (gpt_model.py) with nn.Graph on the GPL-3 text, character level.

    tools/olrun --nproc-per-node 4 examples/train_gpt.py            # 2 x 2 data x tensor parallel
    tools/olrun --nproc-per-node 4 examples/train_gpt.py --pipeline # 2 stages x 2 data parallel
    /usr/bin/python3 examples/train_gpt.py                          # one process, 4 ranks as threads

Rank 0 prints the plan summary, then the loss per step.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oneflow_like as ol  # noqa: E402
from gpt_model import GPT, param_sbp  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dp", type=int, default=2, help="data-parallel degree")
    p.add_argument("--tp", type=int, default=2, help="tensor-parallel degree (Megatron-style)")
    p.add_argument("--pipeline", action="store_true", help="two pipeline stages of dp ranks each (no tp)")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--micro-batches", type=int, default=1)
    p.add_argument("--zero", action="store_true", help="ZeRO-1: shard the optimizer state over dp")
    p.add_argument("--recompute", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default="/usr/share/common-licenses/GPL-3")
    p.add_argument("--init-from", default="", help="an .npz of parameters (e.g. copied from a PyTorch model)")
    p.add_argument("--losses-out", default="", help="write the losses (one per line) here, rank 0")
    p.add_argument("--save", default="", help="save a sharded checkpoint here at the end")
    return p.parse_args(argv)


def batches(text, batch, seq_len, seed):
    rng = np.random.default_rng(seed)
    while True:
        starts = rng.integers(0, len(text) - seq_len - 1, size=batch)
        x = np.stack([text[s:s + seq_len] for s in starts]).astype(np.int64)
        y = np.stack([text[s + 1:s + seq_len + 1] for s in starts]).astype(np.int64)
        yield x, y


class TrainGraph(ol.nn.Graph):
    def __init__(self, model, args):
        super().__init__()
        self.model = model
        self.loss_fn = ol.nn.CrossEntropyLoss()
        self.add_optimizer(ol.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0))
        if args.micro_batches > 1:
            self.config.set_gradient_accumulation_steps(args.micro_batches)
        if args.zero:
            self.config.enable_zero(True, stage=1)
        if args.recompute:
            self.config.enable_recompute(True)

    def build(self, idx, pos, targets):
        loss = self.loss_fn(self.model(idx, pos), targets)
        loss.backward()
        return loss


def main(argv=None):
    args = parse_args(argv)
    ol.manual_seed(args.seed)
    text = np.frombuffer(open(args.data, "rb").read(), dtype=np.uint8)
    model = GPT(256, args.seq_len, args.n_layer, args.n_embd, args.n_head)
    if args.init_from:
        model.load_state_dict(dict(np.load(args.init_from)))
    S, B = ol.sbp.split, ol.sbp.broadcast
    if args.pipeline:
        stages = [ol.placement("cpu", ranks=list(range(s * args.dp, (s + 1) * args.dp))) for s in range(2)]
        for name, p in model.named_parameters():
            p._assign(p.to_global(placement=stages[0], sbp=B))
        half = (args.n_layer + 1) // 2
        model.wte.set_stage(0, stages[0])
        model.wpe.set_stage(0, stages[0])
        for i, block in enumerate(model.blocks):
            block.set_stage(0 if i < half else 1, stages[0 if i < half else 1])
        model.ln_f.set_stage(1, stages[1])
        model.lm_head.set_stage(1, stages[1])
        first, last, data = stages[0], stages[1], (S(0),)
        pos_sbp = (B,)
    else:
        ndim = 2 if args.dp > 1 and args.tp > 1 else 1
        ranks = [[d * args.tp + t for t in range(args.tp)] for d in range(args.dp)] if ndim == 2 else \
            list(range(args.dp * args.tp))
        first = last = ol.placement("cpu", ranks=ranks)
        tp_axis = (1 if ndim == 2 else 0) if args.tp > 1 else None
        model.to_global(first, sbp=lambda name, p: param_sbp(name, tp_axis, ndim))
        data = (S(0), B) if ndim == 2 else ((S(0),) if args.dp > 1 else (B,))
        pos_sbp = (B,) * ndim
    graph = TrainGraph(model, args)
    pos = ol.tensor(np.tile(np.arange(args.seq_len, dtype=np.int64), (args.batch, 1)), placement=first, sbp=pos_sbp)
    losses = []
    leader = ol.env.get_rank() == 0
    gen = batches(text, args.batch, args.seq_len, args.seed)
    t0 = time.time()
    for step in range(args.steps):
        x, y = next(gen)
        loss = graph(ol.tensor(x, placement=first, sbp=data), pos, ol.tensor(y, placement=last, sbp=data))
        value = float(loss.numpy())
        losses.append(value)
        if step == 0 and leader:
            print(graph, flush=True)
        if leader and (step % 10 == 0 or step == args.steps - 1):
            tok = args.batch * args.seq_len * (step + 1) / (time.time() - t0)
            print(f"step {step:4d}  loss {value:.4f}  {tok:,.0f} tokens/s", flush=True)
    if args.save:
        path = graph.save(args.save)
        if leader:
            print(f"saved {path}")
    if leader and args.losses_out:
        with open(args.losses_out, "w") as f:
            f.write("\n".join(f"{v:.7g}" for v in losses) + "\n")
    return losses


if __name__ == "__main__":
    main()

"""A two-stage pipeline MLP trained by nn.Graph (stage 0 on rank 0, stage 1 on rank 1, two
micro-batches); run as a script by test_multiprocess.py, in one process or under olrun. Prints
one line "FACTS {json}" per process: its losses, the facts of the plan it holds and of the whole
plan (compiled on request), the trained weights. PIPELINE_MLP_RANK1_MICRO=N gives rank 1 another
micro-batch count (another job)."""
import json
import os

import numpy as np

import oneflow_like as ol

micro = 2
if ol.env.get_rank() == 1 and os.environ.get("PIPELINE_MLP_RANK1_MICRO"):
    micro = int(os.environ["PIPELINE_MLP_RANK1_MICRO"])
ol.manual_seed(3)
B = ol.sbp.broadcast
stages = [ol.placement("cpu", ranks=[0]), ol.placement("cpu", ranks=[1])]


class MLP(ol.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = ol.nn.Linear(8, 16)
        self.act = ol.nn.ReLU()
        self.fc2 = ol.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


model = MLP()
for _, p in model.named_parameters():
    p._assign(p.to_global(placement=stages[0], sbp=B))
model.fc1.set_stage(0, stages[0])
model.act.set_stage(0, stages[0])
model.fc2.set_stage(1, stages[1])


class TrainGraph(ol.nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = model
        self.loss_fn = ol.nn.CrossEntropyLoss()
        self.add_optimizer(ol.optim.SGD(model.parameters(), lr=0.1))
        self.config.set_gradient_accumulation_steps(micro)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


graph = TrainGraph()
rng = np.random.default_rng(0)
losses = []
for step in range(3):
    x = rng.standard_normal((8, 8)).astype(np.float32)
    y = rng.integers(0, 4, size=8).astype(np.int64)
    # the loss lives on rank 1 only: rank 0 reads it through its layout of rank 1's binding
    loss = graph(ol.tensor(x, placement=stages[0], sbp=B), ol.tensor(y, placement=stages[1], sbp=B))
    losses.append(float(loss.numpy()))
plan, whole = graph.plan, graph.whole_plan()
facts = dict(rank=ol.env.get_rank(), losses=losses, per_rank=plan.per_rank, plan_rank=plan.rank,
             lowered=plan.lowered_ranks, ranks=plan.ranks, tasks=plan.num_tasks,
             planned={str(k): v for k, v in plan.planned_bytes.items()}, agreement=plan.agreement,
             whole_per_rank=whole.per_rank, whole_lowered=whole.lowered_ranks, whole_tasks=whole.num_tasks,
             whole_planned={str(k): v for k, v in whole.planned_bytes.items()},
             fc1=model.fc1.weight.numpy().tolist(), fc2=model.fc2.weight.numpy().tolist())
print("FACTS " + json.dumps(facts), flush=True)
if ol.env.get_rank() == 0:
    print(graph, flush=True)

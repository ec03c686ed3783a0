"""nn.Graph against PyTorch 1.13: the losses of models trained with nn.Graph under data, tensor,
pipeline and 2-D layouts (all ranks as threads of this process) equal PyTorch's."""
import os
import re
import sys

import numpy as np
import pytest
import torch

import oneflow_like as ol

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_gpt  # noqa: E402
from gpt_model import GPT  # noqa: E402
from torch_gpt_ref import train_losses  # noqa: E402

DIMS = dict(vocab=256, seq=16, layers=2, embd=32, heads=4)
STEPS = 20


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    ol.manual_seed(5)
    model = GPT(DIMS["vocab"], DIMS["seq"], DIMS["layers"], DIMS["embd"], DIMS["heads"])
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    path = str(tmp_path_factory.mktemp("gpt") / "init.npz")
    np.savez(path, **state)
    text = np.frombuffer(open("/usr/share/common-licenses/GPL-3", "rb").read(), dtype=np.uint8)
    losses = train_losses(state, train_gpt.batches(text, 8, DIMS["seq"], 0), STEPS, 3e-3,
                          (DIMS["vocab"], DIMS["seq"], DIMS["layers"], DIMS["embd"], DIMS["heads"]))
    return path, losses


def _args(init, extra):
    return ["--steps", str(STEPS), "--batch", "8", "--seq-len", str(DIMS["seq"]), "--n-layer", str(DIMS["layers"]),
            "--n-embd", str(DIMS["embd"]), "--n-head", str(DIMS["heads"]), "--lr", "3e-3", "--init-from", init] + extra


@pytest.mark.parametrize("layout", [["--dp", "4", "--tp", "1"], ["--dp", "1", "--tp", "2"], ["--dp", "2", "--tp", "2"],
                                    ["--dp", "2", "--pipeline", "--micro-batches", "2"],
                                    ["--dp", "2", "--tp", "2", "--zero", "--recompute"]],
                         ids=["dp4", "tp2", "dp2xtp2", "pp2", "2d_zero_recompute"])
def test_gpt_losses_match_pytorch(reference, layout):
    init, expected = reference
    losses = train_gpt.main(_args(init, layout))
    np.testing.assert_allclose(losses, expected, rtol=2e-4, atol=2e-5)
    assert losses[-1] < losses[0]


class ResidualMLP(ol.nn.Module):
    """A model the C++ trainer does not have: LayerNorm + residual MLP blocks."""

    def __init__(self, d, hidden, classes, blocks=2):
        super().__init__()
        self.ln = ol.nn.ModuleList([ol.nn.LayerNorm(d) for _ in range(blocks)])
        self.fc1 = ol.nn.ModuleList([ol.nn.Linear(d, hidden) for _ in range(blocks)])
        self.fc2 = ol.nn.ModuleList([ol.nn.Linear(hidden, d) for _ in range(blocks)])
        self.head = ol.nn.Linear(d, classes)

    def forward(self, x):
        for ln, f1, f2 in zip(self.ln, self.fc1, self.fc2):
            x = x + f2(ol.relu(f1(ln(x))))
        return self.head(x)


def _torch_mlp(state, d, hidden, classes, blocks=2):
    tn = torch.nn

    class M(tn.Module):
        def __init__(self):
            super().__init__()
            self.ln = tn.ModuleList([tn.LayerNorm(d) for _ in range(blocks)])
            self.fc1 = tn.ModuleList([tn.Linear(d, hidden) for _ in range(blocks)])
            self.fc2 = tn.ModuleList([tn.Linear(hidden, d) for _ in range(blocks)])
            self.head = tn.Linear(d, classes)

        def forward(self, x):
            for ln, f1, f2 in zip(self.ln, self.fc1, self.fc2):
                x = x + f2(torch.relu(f1(ln(x))))
            return self.head(x)

    m = M()
    m.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    return m


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_residual_mlp_tp2_matches_pytorch(optimizer):
    d, hidden, classes, n = 12, 20, 5, 10
    ol.manual_seed(1)
    model = ResidualMLP(d, hidden, classes)
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    p = ol.placement("cpu", ranks=[0, 1])
    S, B = ol.sbp.split, ol.sbp.broadcast
    model.to_global(p, sbp=lambda name, _: S(0) if name.startswith("fc1.") else
                    (S(1) if name.startswith("fc2.") and name.endswith("weight") else B))
    make = (lambda ps: ol.optim.SGD(ps, lr=0.1, momentum=0.9)) if optimizer == "sgd" else \
        (lambda ps: ol.optim.Adam(ps, lr=1e-2))

    class G(ol.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.loss = ol.nn.CrossEntropyLoss()
            self.add_optimizer(make(model.parameters()))

        def build(self, x, y):
            loss = self.loss(self.model(x), y)
            loss.backward()
            return loss

    g = G()
    tm = _torch_mlp(state, d, hidden, classes)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9) if optimizer == "sgd" else \
        torch.optim.Adam(tm.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    for step in range(n):
        x = rng.standard_normal((8, d)).astype(np.float32)
        y = rng.integers(0, classes, 8)
        loss = g(ol.tensor(x, placement=p, sbp=B), ol.tensor(y, placement=p, sbp=B))
        tl = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        topt.zero_grad()
        tl.backward()
        topt.step()
        np.testing.assert_allclose(float(loss.numpy()), tl.item(), rtol=1e-4, atol=1e-5, err_msg=f"step {step}")
    # column-parallel fc1 (weight S(0)): the compiler's SBP for its matmul splits the features
    assert re.search(r"model\.fc1\.0\.matmul: matmul  in .*\(S\(0\)\) -> out \(S\(1\)\)", repr(g)), repr(g)
    trained = model.state_dict()
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(trained[k].numpy(), v.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)


def test_graph_checkpoint_round_trip(tmp_path):
    """graph.save writes oltrain's sharded format; a graph of another layout loads it."""
    ol.manual_seed(2)
    model = ResidualMLP(8, 16, 3, blocks=1)
    p2 = ol.placement("cpu", ranks=[0, 1])
    model.to_global(p2, sbp=lambda name, _: ol.sbp.split(0) if name.startswith("fc1.") else ol.sbp.broadcast)

    def graph_for(m):
        class G(ol.nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = m
                self.add_optimizer(ol.optim.AdamW(m.parameters(), lr=1e-2))

            def build(self, x, y):
                loss = ol.cross_entropy(self.model(x), y)
                loss.backward()
                return loss
        return G()

    g = graph_for(model)
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    y = np.array([0, 1, 2, 1])
    for _ in range(3):
        g(ol.tensor(x, placement=p2, sbp=ol.sbp.broadcast), ol.tensor(y, placement=p2, sbp=ol.sbp.broadcast))
    path = g.save(str(tmp_path))
    assert os.path.exists(os.path.join(path, "COMPLETE"))
    before = {k: v.numpy() for k, v in model.state_dict().items()}
    next_loss = float(g(ol.tensor(x, placement=p2, sbp=ol.sbp.broadcast),
                        ol.tensor(y, placement=p2, sbp=ol.sbp.broadcast)).numpy())
    ol.manual_seed(9)
    other = ResidualMLP(8, 16, 3, blocks=1)
    p3 = ol.placement("cpu", ranks=[0, 1, 2])
    other.to_global(p3, sbp=ol.sbp.broadcast)
    g2 = graph_for(other)
    g2(ol.tensor(x, placement=p3, sbp=ol.sbp.split(0)), ol.tensor(y, placement=p3, sbp=ol.sbp.split(0)))
    g2.load(str(tmp_path))
    for k, v in other.state_dict().items():
        np.testing.assert_allclose(v.numpy(), before[k], rtol=0, atol=0, err_msg=k)
    loss = float(g2(ol.tensor(x, placement=p3, sbp=ol.sbp.split(0)), ol.tensor(y, placement=p3, sbp=ol.sbp.split(0))).numpy())
    np.testing.assert_allclose(loss, next_loss, rtol=1e-5)  # Adam state came back too


def test_save_plan_for_olplan(tmp_path):
    p = ol.placement("cpu", ranks=[0, 1])
    lin = ol.nn.Linear(4, 2).to_global(p, ol.sbp.broadcast)

    class G(ol.nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin = lin

        def build(self, x):
            return self.lin(x)

    g = G()
    g(ol.ones(4, 4, placement=p, sbp=ol.sbp.split(0)))
    path = g.save_plan(str(tmp_path / "plan.pb"))
    with open(path, "rb") as f:
        assert f.read() == g.plan.serialize()
    assert g.plan.hash.startswith("fnv1a64:")


def test_graph_bad_input():
    p = ol.placement("cpu", ranks=[0, 1])
    q = ol.placement("cpu", ranks=[2, 3])

    class G(ol.nn.Graph):
        def build(self, a, b):
            return a + b

    with pytest.raises(ValueError, match="different placements|placement"):
        G()(ol.ones(2, 2, placement=p, sbp=ol.sbp.broadcast), ol.ones(2, 2, placement=q, sbp=ol.sbp.broadcast))

    class H(ol.nn.Graph):
        def build(self, a, b):
            return a @ b

    with pytest.raises(ValueError, match="matmul"):
        H()(ol.ones(2, 3, placement=p, sbp=ol.sbp.broadcast), ol.ones(2, 3, placement=p, sbp=ol.sbp.broadcast))


def test_accumulation_calls_equal_micro_batches():
    """set_accumulation_calls(2) over two half batches == one call split into 2 micro-batches."""
    p = ol.placement("cpu", ranks=[0, 1])
    x = np.random.default_rng(3).standard_normal((8, 5)).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    results = []
    for mode in ("micro", "calls"):
        ol.manual_seed(11)
        model = ResidualMLP(5, 8, 3, blocks=1)
        model.to_global(p, ol.sbp.broadcast)

        class G(ol.nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model
                self.add_optimizer(ol.optim.SGD(model.parameters(), lr=0.5))
                if mode == "micro":
                    self.config.set_gradient_accumulation_steps(2)
                else:
                    self.config.set_accumulation_calls(2)

            def build(self, a, b):
                loss = ol.cross_entropy(self.model(a), b)
                loss.backward()
                return loss

        g = G()
        for _ in range(2):
            if mode == "micro":
                g(ol.tensor(x, placement=p, sbp=ol.sbp.split(0)), ol.tensor(y, placement=p, sbp=ol.sbp.split(0)))
            else:
                assert g(ol.tensor(x[:4], placement=p, sbp=ol.sbp.split(0)),
                         ol.tensor(y[:4], placement=p, sbp=ol.sbp.split(0))) is None  # no update yet
                g(ol.tensor(x[4:], placement=p, sbp=ol.sbp.split(0)), ol.tensor(y[4:], placement=p, sbp=ol.sbp.split(0)))
        results.append({k: v.numpy() for k, v in model.state_dict().items()})
    for k in results[0]:
        np.testing.assert_allclose(results[1][k], results[0][k], rtol=1e-5, atol=1e-6, err_msg=k)

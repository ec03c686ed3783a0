"""Eager training: forward, backward() and optimizer.step() (the registry's update ops) on global
and local tensors, against PyTorch 1.13 step by step; nn.Graph outputs per micro-batch."""
import numpy as np
import pytest
import torch

import oneflow_like as ol

S, B = ol.sbp.split, ol.sbp.broadcast


@pytest.mark.parametrize("kind", ["sgd", "sgd_momentum", "adam", "adamw"])
@pytest.mark.parametrize("layout", ["local", "dp2", "tp2"])
def test_eager_training_matches_pytorch(kind, layout):
    ol.manual_seed(4)
    m = ol.nn.Sequential(ol.nn.Linear(6, 10), ol.nn.GELU(), ol.nn.Linear(10, 3))
    state = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    p = ol.placement("cpu", ranks=[0, 1])
    if layout == "dp2":
        m.to_global(p, B)
    elif layout == "tp2":
        m.to_global(p, sbp=lambda name, _: S(0) if name.startswith("0.") else (S(1) if name == "2.weight" else B))
    tm = torch.nn.Sequential(torch.nn.Linear(6, 10), torch.nn.GELU(), torch.nn.Linear(10, 3))
    tm.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    make = {"sgd": (lambda ps, mod: mod.SGD(ps, lr=0.1)),
            "sgd_momentum": (lambda ps, mod: mod.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01)),
            "adam": (lambda ps, mod: mod.Adam(ps, lr=1e-2, weight_decay=0.01)),
            "adamw": (lambda ps, mod: mod.AdamW(ps, lr=1e-2, weight_decay=0.1))}[kind]
    opt, topt = make(list(m.parameters()), ol.optim), make(tm.parameters(), torch.optim)
    rng = np.random.default_rng(1)
    for step in range(4):
        x = rng.standard_normal((8, 6)).astype(np.float32)
        y = rng.integers(0, 3, 8)
        if layout == "local":
            xt, yt = ol.tensor(x), ol.tensor(y)
        else:
            xt = ol.tensor(x, placement=p, sbp=S(0) if layout == "dp2" else B)
            yt = ol.tensor(y, placement=p, sbp=S(0) if layout == "dp2" else B)
        loss = ol.cross_entropy(m(xt), yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        tl = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        topt.zero_grad()
        tl.backward()
        topt.step()
        np.testing.assert_allclose(loss.item(), tl.item(), rtol=1e-5, atol=1e-6, err_msg=f"step {step}")
    for k, v in tm.state_dict().items():
        got = m.state_dict()[k]
        np.testing.assert_allclose(got.numpy(), v.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)
        if layout != "local":
            assert got.placement == p  # parameters keep their placement through updates


def test_graph_returns_whole_batch_outputs_over_micro_batches():
    p = ol.placement("cpu", ranks=[0, 1])
    ol.manual_seed(6)
    lin = ol.nn.Linear(4, 3).to_global(p, B)

    class G(ol.nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin = lin
            self.config.set_gradient_accumulation_steps(2)

        def build(self, x):
            return self.lin(x)

    x = np.random.default_rng(2).standard_normal((6, 4)).astype(np.float32)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    for sbp in (B, S(0)):
        out = G()(ol.tensor(x, placement=p, sbp=sbp))
        assert tuple(out.shape) == (6, 3)
        np.testing.assert_allclose(out.numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)


def test_numpy_interop_without_copies():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ol.from_numpy(a)
    assert np.shares_memory(t.numpy(), a)  # local tensors wrap the array
    y = t * 2.0
    assert y.numpy() is y.numpy()  # the fetched result is held, not copied per access
    np.testing.assert_array_equal(np.asarray(y), a * 2)
    p = ol.placement("cpu", ranks=[0, 1])
    g = ol.tensor(a, placement=p, sbp=ol.sbp.split(0))
    assert np.shares_memory(g.to_local(rank=0).numpy(), g.to_local(rank=0).numpy())  # shards: views, no copies

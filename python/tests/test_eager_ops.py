"""Eager ops and eager autograd on global and local tensors, against PyTorch 1.13 on CPU.

Every case builds the inputs as oneflow_like tensors (global with the given placement and SBPs,
or local) and as torch tensors, compares the forward value, then backpropagates a scalar loss
sum(y * c) with a fixed random c (so no gradient is symmetric by accident) and compares each
leaf's .grad; the gradient of a global leaf must come back in the leaf's own placement and SBP."""
import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import oneflow_like as ol

S0, S1 = ol.sbp.split(0), ol.sbp.split(1)
B, P = ol.sbp.broadcast, ol.sbp.partial_sum
NAMES = {S0: "S0", S1: "S1", B: "B", P: "P", None: "local"}

PA = ol.placement("cpu", ranks=[0, 1])
P3 = ol.placement("cpu", ranks=[0, 1, 2])
MESH = ol.placement("cpu", ranks=[[0, 1], [2, 3]])

RTOL, ATOL = 1e-4, 1e-5

torch.set_default_dtype(torch.float32)


def _name(s):
    if isinstance(s, tuple):
        return "(" + ",".join(NAMES[x] for x in s) + ")"
    return NAMES[s]


def _ol(array, placement, sbp, requires_grad=False):
    dtype = array.dtype.type
    if placement is None:
        return ol.tensor(array, dtype=dtype, requires_grad=requires_grad)
    if sbp is None:
        sbp = (B,) * placement.ndim
    return ol.tensor(array, dtype=dtype, placement=placement, sbp=sbp, requires_grad=requires_grad)


def _seq(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def check(ol_fn, torch_fn, inputs, placement, backward=True, seed=0):
    """inputs: [(array, sbp, requires_grad)]; sbp is ignored for local (placement None)."""
    ins = [_ol(a, placement, s, g) for a, s, g in inputs]
    tins = [torch.tensor(a, requires_grad=g) for a, _, g in inputs]
    ys, tys = _seq(ol_fn(*ins)), _seq(torch_fn(*tins))
    assert len(ys) == len(tys)
    for y, ty in zip(ys, tys):
        ref = ty.detach().numpy()
        assert tuple(y.shape) == ref.shape
        assert y.is_global == (placement is not None)
        if placement is not None:
            assert y.placement == placement and len(y.sbp) == placement.ndim
        got = y.numpy()
        assert got.dtype == ref.dtype
        np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)
    if not backward or not any(g for _, _, g in inputs):
        return ins
    rs = np.random.RandomState(1000 + seed)
    # one backward() per output: .grad accumulates over them, like torch's
    for y, ty in zip(ys, tys):
        assert y.requires_grad and not y.is_leaf
        if ty.dim() == 0:
            loss, tloss = y, ty
        else:
            c = rs.randn(*ty.shape).astype(ty.detach().numpy().dtype)
            loss = (y * _ol(c, placement, None)).sum()
            tloss = (ty * torch.tensor(c)).sum()
        loss.backward()
        tloss.backward(retain_graph=True)
    for x, tx, (_, _, g) in zip(ins, tins, inputs):
        if not g:
            assert x.grad is None
            continue
        assert x.grad is not None
        if placement is not None:
            assert x.grad.placement == x.placement
            assert x.grad.sbp == x.sbp
        assert tuple(x.grad.shape) == tuple(x.shape)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    return ins


def _rand(*shape, seed=0):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


X_SBPS = [S0, S1, B, P, None]  # None = a local tensor
X_IDS = [NAMES[s] for s in X_SBPS]


def _pl(sbp):
    return None if sbp is None else PA


# --- elementwise, tensor (op) tensor -------------------------------------------------------------

BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "div": (lambda a, b: a / b, lambda a, b: a / b),
    "ol.add": (ol.add, torch.add),
    "ol.mul": (ol.mul, torch.mul),
}
PAIR_SBPS = [(S0, S0), (S0, B), (B, S1), (S1, S0), (P, B), (B, B), (S1, P), (None, None)]


@pytest.mark.parametrize("sbps", PAIR_SBPS, ids=[f"{_name(a)}-{_name(b)}" for a, b in PAIR_SBPS])
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op, sbps):
    a, b = _rand(6, 5, seed=1), _rand(6, 5, seed=2)
    if op == "div":
        b = np.abs(b) + 0.5
    check(*BINARY[op], [(a, sbps[0], True), (b, sbps[1], True)], _pl(sbps[0]), seed=hash(op) % 97)


@pytest.mark.parametrize("sa,sb", [(S0, B), (S1, S0), (B, B), (None, None)], ids=["S0-B", "S1-S0", "B-B", "local"])
def test_binary_broadcasting(sa, sb):
    a, bias = _rand(6, 5, seed=3), _rand(5, seed=4)
    check(lambda x, y: x + y, lambda x, y: x + y, [(a, sa, True), (bias, sb, True)], _pl(sa))
    col = np.abs(_rand(6, 1, seed=5)) + 0.5
    check(lambda x, y: x * y - x / y, lambda x, y: x * y - x / y, [(a, sa, True), (col, S0 if sb == S0 else sb, True)],
          _pl(sa), seed=1)


# --- elementwise with Python scalars ---------------------------------------------------------------

SCALAR = {
    "x+s": (lambda x: x + 2.5, lambda x: x + 2.5),
    "s+x": (lambda x: 2.5 + x, lambda x: 2.5 + x),
    "x-s": (lambda x: x - 1.5, lambda x: x - 1.5),
    "s-x": (lambda x: 1.5 - x, lambda x: 1.5 - x),
    "x*s": (lambda x: x * 3.0, lambda x: x * 3.0),
    "s*x": (lambda x: 3 * x, lambda x: 3 * x),
    "x/s": (lambda x: x / 4.0, lambda x: x / 4.0),
    "-x": (lambda x: -x, lambda x: -x),
    "x**2": (lambda x: x ** 2, lambda x: x ** 2),
    "chain": (lambda x: (x * 2 + 1) / 3 - x * x, lambda x: (x * 2 + 1) / 3 - x * x),
}


@pytest.mark.parametrize("sbp", X_SBPS, ids=X_IDS)
@pytest.mark.parametrize("op", list(SCALAR))
def test_scalar(op, sbp):
    check(*SCALAR[op], [(_rand(6, 5, seed=6), sbp, True)], _pl(sbp), seed=len(op))


@pytest.mark.parametrize("sbp", [S0, None], ids=["S0", "local"])
def test_scalar_divided_by_tensor(sbp):
    a = np.abs(_rand(6, 5, seed=7)) + 0.5
    check(lambda x: 2.0 / x, lambda x: 2.0 / x, [(a, sbp, True)], _pl(sbp))


# --- matmul --------------------------------------------------------------------------------------

MM_SBPS = [(S0, B), (B, S1), (S1, S0), (B, B), (S0, S1), (S1, B), (P, B), (B, S0), (S0, S0), (None, None)]


@pytest.mark.parametrize("sbps", MM_SBPS, ids=[f"{_name(a)}-{_name(b)}" for a, b in MM_SBPS])
def test_matmul(sbps):
    a, w = _rand(6, 5, seed=8), _rand(5, 4, seed=9)
    check(lambda x, y: x @ y, lambda x, y: x @ y, [(a, sbps[0], True), (w, sbps[1], True)], _pl(sbps[0]))
    check(ol.matmul, torch.matmul, [(a, sbps[0], True), (w, sbps[1], True)], _pl(sbps[0]), seed=1)


@pytest.mark.parametrize("sbps", MM_SBPS, ids=[f"{_name(a)}-{_name(b)}" for a, b in MM_SBPS])
def test_matmul_transpose_b(sbps):
    a, wt = _rand(6, 5, seed=10), _rand(4, 5, seed=11)
    check(lambda x, y: ol.matmul(x, y, transpose_b=True), lambda x, y: x @ y.T,
          [(a, sbps[0], True), (wt, sbps[1], True)], _pl(sbps[0]))


def test_matmul_transpose_a_and_alpha():
    a, w = _rand(5, 6, seed=12), _rand(5, 4, seed=13)
    check(lambda x, y: ol.matmul(x, y, transpose_a=True, alpha=0.5), lambda x, y: 0.5 * (x.T @ y),
          [(a, S1, True), (w, B, True)], PA)


def test_matmul_batched_with_shared_weight():
    a, w = _rand(3, 4, 5, seed=14), _rand(5, 2, seed=15)
    for sa, sw in [(S0, B), (ol.sbp.split(1), B), (B, S1), (None, None)]:
        check(ol.matmul, torch.matmul, [(a, sa, True), (w, sw, True)], _pl(sa))


# --- reductions ----------------------------------------------------------------------------------

REDUCE = {
    "sum": (lambda x: ol.sum(x), torch.sum),
    "sum0": (lambda x: ol.sum(x, 0), lambda x: torch.sum(x, 0)),
    "sum1k": (lambda x: ol.sum(x, dim=1, keepdim=True), lambda x: torch.sum(x, 1, keepdim=True)),
    "sum-1": (lambda x: x.sum(-1), lambda x: x.sum(-1)),
    "sum01": (lambda x: ol.sum(x, dim=(0, 1)), lambda x: torch.sum(x, (0, 1))),
    "mean": (lambda x: ol.mean(x), torch.mean),
    "mean0k": (lambda x: ol.mean(x, 0, keepdim=True), lambda x: torch.mean(x, 0, keepdim=True)),
    "mean1": (lambda x: ol.mean(x, dim=1), lambda x: torch.mean(x, 1)),
    "mean-method": (lambda x: x.mean(0), lambda x: x.mean(0)),
}


@pytest.mark.parametrize("sbp", X_SBPS, ids=X_IDS)
@pytest.mark.parametrize("op", list(REDUCE))
def test_reduce(op, sbp):
    check(*REDUCE[op], [(_rand(7, 5, seed=16), sbp, True)], _pl(sbp), seed=len(op))


# --- activations, softmax, layer_norm ------------------------------------------------------------

ACT = {
    "relu": (ol.relu, torch.relu),
    "relu-method": (lambda x: x.relu(), lambda x: x.relu()),
    "gelu-exact": (lambda x: ol.gelu(x, approximate="none"), lambda x: F.gelu(x)),
    "gelu-default": (ol.gelu, F.gelu),  # OneFlow/torch default: exact
    "gelu-tanh": (lambda x: ol.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
    "softmax": (ol.softmax, lambda x: torch.softmax(x, -1)),
    "softmax-dim1": (lambda x: ol.softmax(x, dim=1), lambda x: torch.softmax(x, 1)),
    "log_softmax": (ol.log_softmax, lambda x: torch.log_softmax(x, -1)),
    "log_softmax-method": (lambda x: x.log_softmax(-1), lambda x: x.log_softmax(-1)),
}


@pytest.mark.parametrize("sbp", X_SBPS, ids=X_IDS)
@pytest.mark.parametrize("op", list(ACT))
def test_activation(op, sbp):
    a = _rand(6, 5, seed=17) * 2
    a[0, 0] = 0.0  # relu's kink: both sides use gradient 0 at 0
    check(*ACT[op], [(a, sbp, True)], _pl(sbp), seed=len(op))


def test_softmax_3d():
    a = _rand(2, 3, 7, seed=18) * 3
    for s in [S0, ol.sbp.split(2), B, None]:
        check(ol.softmax, lambda x: torch.softmax(x, -1), [(a, s, True)], _pl(s))


LN_SBPS = [(S0, B), (S1, B), (B, B), (P, B), (S0, S0), (B, S0), (None, None)]


@pytest.mark.parametrize("sbps", LN_SBPS, ids=[f"{_name(a)}-{_name(b)}" for a, b in LN_SBPS])
def test_layer_norm(sbps):
    a = _rand(6, 5, seed=19) * 2 + 1
    w, b = _rand(5, seed=20), _rand(5, seed=21)
    sx, sw = sbps
    check(lambda x, g, bb: ol.layer_norm(x, (5,), g, bb), lambda x, g, bb: F.layer_norm(x, (5,), g, bb),
          [(a, sx, True), (w, sw, True), (b, sw, True)], _pl(sx))


def test_layer_norm_defaults_and_eps():
    a = _rand(4, 8, seed=22)
    check(lambda x: ol.layer_norm(x, (8,)), lambda x: F.layer_norm(x, (8,)), [(a, S0, True)], PA)
    check(lambda x: ol.layer_norm(x, (8,), eps=0.5), lambda x: F.layer_norm(x, (8,), eps=0.5), [(a, None, True)],
          None)


# --- shape ops -----------------------------------------------------------------------------------

SHAPE = {
    "reshape": (lambda x: ol.reshape(x, 3, 10), lambda x: x.reshape(3, 10)),
    "reshape-list": (lambda x: ol.reshape(x, [10, -1]), lambda x: x.reshape(10, -1)),
    "reshape-flat": (lambda x: x.reshape(-1), lambda x: x.reshape(-1)),
    "view": (lambda x: x.view(2, 3, 5), lambda x: x.view(2, 3, 5)),
    "transpose": (lambda x: ol.transpose(x, 0, 1), lambda x: x.transpose(0, 1)),
    "T": (lambda x: x.T, lambda x: x.T),
    "transpose-method": (lambda x: x.transpose(1, 0), lambda x: x.transpose(1, 0)),
}


@pytest.mark.parametrize("sbp", X_SBPS, ids=X_IDS)
@pytest.mark.parametrize("op", list(SHAPE))
def test_shape_op(op, sbp):
    check(*SHAPE[op], [(_rand(6, 5, seed=23), sbp, True)], _pl(sbp), seed=len(op))


def test_permute_3d():
    a = _rand(2, 3, 4, seed=24)
    for s in [S0, S1, ol.sbp.split(2), None]:
        check(lambda x: ol.permute(x, 2, 0, 1), lambda x: x.permute(2, 0, 1), [(a, s, True)], _pl(s))
        check(lambda x: ol.transpose(x, 0, 2), lambda x: x.transpose(0, 2), [(a, s, True)], _pl(s))


CAT_SBPS = [(S0, S0), (S0, B), (S1, S0), (B, B), (P, S1), (None, None)]


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("sbps", CAT_SBPS, ids=[f"{_name(a)}-{_name(b)}" for a, b in CAT_SBPS])
def test_cat(sbps, dim):
    a, b = _rand(6, 5, seed=25), _rand(6, 5, seed=26)
    if dim == 0:
        b = b[:3].copy()  # unequal sizes along the cat axis
    else:
        b = b[:, :2].copy()
    check(lambda x, y: ol.cat([x, y], dim=dim), lambda x, y: torch.cat([x, y], dim), [(a, sbps[0], True),
                                                                                      (b, sbps[1], True)],
          _pl(sbps[0]))


def test_cat_three_and_concat_alias():
    a, b, c = _rand(2, 5, seed=27), _rand(3, 5, seed=28), _rand(4, 5, seed=29)
    check(lambda x, y, z: ol.concat([x, y, z], 0), lambda x, y, z: torch.cat([x, y, z], 0),
          [(a, S0, True), (b, B, True), (c, S1, True)], PA)


SPLITS = {
    "int-dim0": (lambda x: ol.split(x, 2, dim=0), lambda x: torch.split(x, 2, 0)),
    "int-uneven-dim0": (lambda x: ol.split(x, 4), lambda x: torch.split(x, 4)),
    "sections-dim1": (lambda x: ol.split(x, [2, 3], dim=1), lambda x: torch.split(x, [2, 3], 1)),
    "int-dim-1": (lambda x: ol.split(x, 2, dim=-1), lambda x: torch.split(x, 2, -1)),
}


@pytest.mark.parametrize("sbp", X_SBPS, ids=X_IDS)
@pytest.mark.parametrize("op", list(SPLITS))
def test_split(op, sbp):
    check(*SPLITS[op], [(_rand(6, 5, seed=30), sbp, True)], _pl(sbp), seed=len(op))


# --- losses and embedding ------------------------------------------------------------------------

CE_SBPS = [(S0, S0), (S0, B), (B, S0), (B, B), (S1, B), (S1, S0), (None, None)]


@pytest.mark.parametrize("sbps", CE_SBPS, ids=[f"{_name(a)}-{_name(b)}" for a, b in CE_SBPS])
def test_cross_entropy(sbps):
    logits = _rand(7, 5, seed=31) * 2
    target = np.random.RandomState(32).randint(0, 5, size=7).astype(np.int64)
    check(ol.cross_entropy, F.cross_entropy, [(logits, sbps[0], True), (target, sbps[1], False)], _pl(sbps[0]))


def test_cross_entropy_int32_targets_and_3d_logits():
    logits = _rand(2, 3, 5, seed=33)
    target = np.random.RandomState(34).randint(0, 5, size=(2, 3)).astype(np.int64)
    check(ol.cross_entropy, lambda x, t: F.cross_entropy(x.reshape(-1, 5), t.reshape(-1)),
          [(logits, S0, True), (target, S0, False)], PA)
    t32 = target.astype(np.int32)
    check(ol.cross_entropy, lambda x, t: F.cross_entropy(x.reshape(-1, 5), t.reshape(-1).long()),
          [(logits, B, True), (t32, B, False)], PA, seed=1)


EMB_SBPS = [(S0, B), (B, S0), (B, S1), (S0, S0), (S1, S1), (S0, S1), (B, B), (None, None)]


@pytest.mark.parametrize("sbps", EMB_SBPS, ids=[f"ids{_name(a)}-table{_name(b)}" for a, b in EMB_SBPS])
def test_embedding(sbps):
    table = _rand(7, 4, seed=35)
    ids = np.random.RandomState(36).randint(0, 7, size=(3, 5)).astype(np.int64)
    ids[0, :3] = 2  # a repeated id: its gradient rows add up
    check(ol.embedding, lambda i, t: F.embedding(i, t), [(ids, sbps[0], False), (table, sbps[1], True)],
          _pl(sbps[0]))


# --- other placements: 3 ranks (uneven shards) and a 2-D mesh -------------------------------------

def test_mlp_on_three_ranks():
    x, w1, w2 = _rand(7, 5, seed=40), _rand(5, 6, seed=41), _rand(6, 3, seed=42)
    target = np.random.RandomState(43).randint(0, 3, size=7).astype(np.int64)

    def olf(x, w1, w2, t):
        return ol.cross_entropy(ol.gelu(x @ w1) @ w2, t)

    def tf(x, w1, w2, t):
        return F.cross_entropy(F.gelu(x @ w1) @ w2, t)

    for sx, s1, s2 in [(S0, B, B), (B, S1, S0), (S1, S0, B), (S0, S1, S0)]:
        check(olf, tf, [(x, sx, True), (w1, s1, True), (w2, s2, True), (target, S0, False)], P3)


MESH_CASES = [
    ((S0, B), (B, S1)),
    ((S0, S1), (B, S0)),
    ((B, S0), (S1, B)),
    ((S1, S0), (S0, B)),
    ((P, S0), (B, B)),
]


@pytest.mark.parametrize("sx,sw", MESH_CASES, ids=[f"{_name(a)}-{_name(b)}" for a, b in MESH_CASES])
def test_ops_on_2d_mesh(sx, sw):
    x, w = _rand(7, 5, seed=44), _rand(5, 6, seed=45)
    g, b = _rand(6, seed=46), _rand(6, seed=47)

    def olf(x, w, g, b):
        h = ol.layer_norm(x @ w, (6,), g, b)
        return ol.softmax(ol.relu(h) * 2.0 + h), ol.sum(h, dim=0), ol.mean(h)

    def tf(x, w, g, b):
        h = F.layer_norm(x @ w, (6,), g, b)
        return torch.softmax(torch.relu(h) * 2.0 + h, -1), torch.sum(h, 0), torch.mean(h)

    check(olf, tf, [(x, sx, True), (w, sw, True), (g, (B, B), True), (b, (B, B), True)], MESH)


def test_float64_ops():
    a, w = np.random.RandomState(48).randn(6, 5), np.random.RandomState(49).randn(5, 4)
    ins = check(lambda x, y: ol.softmax(ol.gelu(x @ y)).sum(dim=1), lambda x, y: torch.softmax(F.gelu(x @ y), -1).sum(1),
                [(a, S0, True), (w, B, True)], PA)
    assert ins[0].dtype == ol.float64 and ins[0].grad.dtype == ol.float64
    assert ins[0].grad.numpy().dtype == np.float64


# --- autograd behaviour --------------------------------------------------------------------------

@pytest.mark.parametrize("sx,sw", [(S0, B), (S1, S0), (P, B), (None, None)], ids=["S0-B", "S1-S0", "P-B", "local"])
def test_grads_accumulate_over_two_backward_calls(sx, sw):
    a, w = _rand(6, 5, seed=50), _rand(5, 4, seed=51)
    c = _rand(6, 4, seed=52)
    x, wt = _ol(a, _pl(sx), sx, True), _ol(w, _pl(sx), sw, True)
    tx, tw = torch.tensor(a, requires_grad=True), torch.tensor(w, requires_grad=True)
    cc = _ol(c, _pl(sx), None)
    y = ol.gelu(x @ wt)
    loss = (y * cc).sum()
    loss.backward()
    g1x, g1w = x.grad.numpy().copy(), wt.grad.numpy().copy()
    loss.backward()  # same graph again
    (F.gelu(tx @ tw) * torch.tensor(c)).sum().backward()
    np.testing.assert_allclose(g1x, tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(g1w, tw.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(x.grad.numpy(), 2 * tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(wt.grad.numpy(), 2 * tw.grad.numpy(), rtol=RTOL, atol=ATOL)
    # a new graph from the same leaves also accumulates
    loss2 = ((x * 3.0) @ wt).sum()
    loss2.backward()
    (tx * 3.0 @ tw).sum().backward()
    (F.gelu(tx @ tw) * torch.tensor(c)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(wt.grad.numpy(), tw.grad.numpy(), rtol=RTOL, atol=ATOL)
    if sx is not None:
        assert x.grad.sbp == x.sbp and wt.grad.sbp == wt.sbp


def test_only_leaves_that_require_grad_get_grads():
    a, w = _rand(6, 5, seed=53), _rand(5, 4, seed=54)
    x = ol.tensor(a, placement=PA, sbp=S0, requires_grad=True)
    wt = ol.tensor(w, placement=PA, sbp=B)
    y = x @ wt
    assert y.requires_grad and not y.is_leaf and x.is_leaf
    y.sum().backward()
    assert wt.grad is None
    np.testing.assert_allclose(x.grad.numpy(), np.tile(w.sum(axis=1), (6, 1)), rtol=RTOL, atol=ATOL)


def test_no_grad_records_nothing():
    x = ol.tensor(_rand(3, 4, seed=55), placement=PA, sbp=S0, requires_grad=True)
    with ol.no_grad():
        y = x * 2.0
    assert not y.requires_grad
    z = x * 2.0
    assert z.requires_grad


def test_backward_with_gradient_argument():
    a, g = _rand(6, 5, seed=56), _rand(6, 5, seed=57)
    x = ol.tensor(a, placement=PA, sbp=S1, requires_grad=True)
    y = ol.relu(x) * 1.5
    y.backward(ol.tensor(g, placement=PA, sbp=B))
    tx = torch.tensor(a, requires_grad=True)
    (torch.relu(tx) * 1.5).backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    assert x.grad.sbp == (S1,)


def test_autograd_grad_function():
    a = _rand(4, 3, seed=58)
    x = ol.tensor(a, placement=PA, sbp=S0, requires_grad=True)
    loss = (x * x).sum()
    (gx,) = ol.autograd.grad(loss, [x])
    np.testing.assert_allclose(gx.numpy(), 2 * a, rtol=RTOL, atol=ATOL)
    assert x.grad is None  # .grad untouched


# --- 0-d tensors ---------------------------------------------------------------------------------

def test_global_scalar_results_feed_further_ops():
    x = ol.tensor(_rand(6, 5, seed=59), placement=PA, sbp=S0)
    s = x.sum()
    assert s.shape == () and s.ndim == 0
    np.testing.assert_allclose((s * 2.0 + s).numpy(), 3 * x.numpy().sum(), rtol=RTOL)
    assert isinstance(s.item(), float)


def test_local_scalar_results_feed_further_ops():
    x = ol.tensor(_rand(6, 5, seed=60))
    s = x.sum()
    np.testing.assert_allclose((s * 2.0).numpy(), 2 * x.numpy().sum(), rtol=RTOL)


def test_global_scalar_from_data():
    t = ol.tensor(2.5, placement=PA, sbp=B)
    assert t.shape == ()
    assert t.numpy() == np.float32(2.5)

"""Global tensors: SBP/placement conversions through to_global (the compiler's boxing), to_local
shards, local -> global, random/constant creation with placement, and tensor properties.

Everything runs in one process: every rank of a placement is simulated by this process, so
`numpy()` assembles the logical value from all shards and `to_local(rank=r)` returns rank r's
shard. Shapes are chosen so that no split is even (5x7 on 3 ranks or a [2,2] mesh, 7x11 on a
[2,3] mesh), which exercises balanced-split boxing with unequal shard sizes."""
import itertools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import oneflow_like as ol

S0, S1, S2 = ol.sbp.split(0), ol.sbp.split(1), ol.sbp.split(2)
B, P = ol.sbp.broadcast, ol.sbp.partial_sum
SBPS = [S0, S1, B, P]
NAMES = {S0: "S0", S1: "S1", S2: "S2", B: "B", P: "P"}

RTOL, ATOL = 1e-6, 1e-5  # P shards are arbitrary float addends: sums are exact only up to rounding


def _name(s):
    if isinstance(s, tuple):
        return "(" + ",".join(NAMES[x] for x in s) + ")"
    return NAMES[s]


def _data(shape, seed=0, dtype=np.float32):
    return np.random.RandomState(seed).randn(*shape).astype(dtype)


def _assert_global(t, array, placement, sbp):
    assert t.is_global
    assert t.placement == placement
    assert t.sbp == (sbp if isinstance(sbp, tuple) else (sbp,))
    assert tuple(t.shape) == array.shape
    assert t.dtype == array.dtype.type
    got = t.numpy()
    assert got.shape == array.shape and got.dtype == array.dtype
    np.testing.assert_allclose(got, array, rtol=RTOL, atol=ATOL)


def _run_isolated(code, timeout=120):
    """Runs `code` in a fresh interpreter (for cases that crash the process)."""
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(ol.__file__)))
    prelude = f"import sys; sys.path.insert(0, {pkg_parent!r})\nimport numpy as np\nimport oneflow_like as ol\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


# --- 1-D placements ------------------------------------------------------------------------------

P3 = ol.placement("cpu", ranks=[0, 1, 2])


@pytest.mark.parametrize("shape", [(5, 7), (7, 5)])
@pytest.mark.parametrize("src,dst", list(itertools.product(SBPS, SBPS)),
                         ids=[f"{_name(a)}->{_name(b)}" for a, b in itertools.product(SBPS, SBPS)])
def test_to_global_1d_every_pair(src, dst, shape):
    a = _data(shape, seed=1)
    x = ol.tensor(a, placement=P3, sbp=src)
    _assert_global(x, a, P3, src)
    y = x.to_global(sbp=dst)
    _assert_global(y, a, P3, dst)
    # the source is untouched
    _assert_global(x, a, P3, src)


@pytest.mark.parametrize("src,dst", list(itertools.product([S0, S1, S2, B, P], repeat=2)),
                         ids=[f"{_name(a)}->{_name(b)}" for a, b in itertools.product([S0, S1, S2, B, P], repeat=2)])
def test_to_global_1d_3d_tensor(src, dst):
    a = _data((4, 5, 7), seed=2)
    y = ol.tensor(a, placement=P3, sbp=src).to_global(sbp=dst)
    _assert_global(y, a, P3, dst)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32, np.bool_])
@pytest.mark.parametrize("src,dst", [(S0, S1), (S1, B), (B, P), (P, S0), (P, B), (S0, P)],
                         ids=lambda s: _name(s))
def test_to_global_1d_dtypes(dtype, src, dst):
    a = (np.arange(35).reshape(5, 7) % 3).astype(dtype) if dtype != np.float64 else _data((5, 7), seed=3, dtype=dtype)
    x = ol.tensor(a, dtype=dtype, placement=P3, sbp=src)
    y = x.to_global(sbp=dst)
    _assert_global(y, a, P3, dst)
    if dtype != np.float64:
        assert np.array_equal(y.numpy(), a)  # integer / bool boxing is exact


CHAINS_1D = [
    [S0, S1, B, P, S0],
    [P, S1, P, B, S0, S0],
    [B, P, P, S1, S0, B],
    [S1, S0, P, S1, B, P, B],
]


@pytest.mark.parametrize("chain", CHAINS_1D, ids=lambda c: "-".join(_name(s) for s in c))
def test_to_global_1d_chains(chain):
    a = _data((5, 7), seed=4)
    x = ol.tensor(a, placement=P3, sbp=chain[0])
    for s in chain[1:]:
        x = x.to_global(sbp=s)
        _assert_global(x, a, P3, s)


def test_to_global_same_sbp_and_default_sbp():
    a = _data((5, 7), seed=5)
    x = ol.tensor(a, placement=P3, sbp=S1)
    y = x.to_global(sbp=S1)
    _assert_global(y, a, P3, S1)
    z = x.to_global()  # no sbp: keeps the source's
    _assert_global(z, a, P3, S1)
    w = x.to_global(sbp=(S0,))  # a 1-tuple is the same as one SBP
    _assert_global(w, a, P3, S0)


# --- 2-D placements ------------------------------------------------------------------------------

MESH22 = ol.placement("cpu", ranks=[[0, 1], [2, 3]])
MESH23 = ol.placement("cpu", ranks=[[0, 1, 2], [3, 4, 5]])
ND = list(itertools.product(SBPS, SBPS))
ND_PAIRS = list(itertools.product(ND, ND))


@pytest.mark.parametrize("src,dst", ND_PAIRS, ids=[f"{_name(a)}->{_name(b)}" for a, b in ND_PAIRS])
def test_to_global_2x2_mesh_every_pair(src, dst):
    a = _data((5, 7), seed=6)
    x = ol.tensor(a, placement=MESH22, sbp=src)
    _assert_global(x, a, MESH22, src)
    y = x.to_global(sbp=dst)
    _assert_global(y, a, MESH22, dst)


# A deterministic sample of the 256 pairs on the [2,3] mesh (every source and destination
# appears; 7x11 is split unevenly by 2, 3 and 6).
ND_SAMPLE = [(ND[i], ND[(5 * i + 3) % 16]) for i in range(16)] + [(ND[(7 * i + 1) % 16], ND[i]) for i in range(16)]


@pytest.mark.parametrize("src,dst", ND_SAMPLE, ids=[f"{_name(a)}->{_name(b)}" for a, b in ND_SAMPLE])
def test_to_global_2x3_mesh_sampled_pairs(src, dst):
    a = _data((7, 11), seed=7)
    y = ol.tensor(a, placement=MESH23, sbp=src).to_global(sbp=dst)
    _assert_global(y, a, MESH23, dst)


def _valid_for_3x5(nd):
    # [3,5] on a [2,2] mesh: an axis split by both mesh axes needs >= 4 elements
    return not (nd[0] == nd[1] == S0)


ND_3x5 = [(s, d) for s, d in ND_PAIRS if _valid_for_3x5(s) and _valid_for_3x5(d)][::7]


@pytest.mark.parametrize("src,dst", ND_3x5, ids=[f"{_name(a)}->{_name(b)}" for a, b in ND_3x5])
def test_to_global_2x2_mesh_small_tensor(src, dst):
    a = _data((3, 5), seed=8)
    y = ol.tensor(a, placement=MESH22, sbp=src).to_global(sbp=dst)
    _assert_global(y, a, MESH22, dst)


CHAINS_2D = [
    [(S0, S1), (S1, S0), (B, P), (P, P), (S0, S0), (B, B)],
    [(P, B), (S1, S1), (P, S0), (B, S1), (S0, P), (S0, S1)],
    [(B, B), (P, P), (S1, S0), (S0, B), (P, S1), (B, P), (S1, S1)],
]


@pytest.mark.parametrize("chain", CHAINS_2D, ids=lambda c: "-".join(_name(s) for s in c))
@pytest.mark.parametrize("mesh,shape", [(MESH22, (5, 7)), (MESH23, (7, 11))], ids=["2x2", "2x3"])
def test_to_global_2d_chains(chain, mesh, shape):
    a = _data(shape, seed=9)
    x = ol.tensor(a, placement=mesh, sbp=chain[0])
    for s in chain[1:]:
        x = x.to_global(sbp=s)
        _assert_global(x, a, mesh, s)


# --- placement changes ---------------------------------------------------------------------------

PA = ol.placement("cpu", ranks=[0, 1])
P123 = ol.placement("cpu", ranks=[1, 2, 3])
P23 = ol.placement("cpu", ranks=[2, 3])
P3_ONLY = ol.placement("cpu", ranks=[3])
P201 = ol.placement("cpu", ranks=[2, 0, 1])
MESH22_REV = ol.placement("cpu", ranks=[[3, 2], [1, 0]])

# Destination SBPs without P when the destination has ranks outside the source (see
# test_to_global_partial_sum_onto_new_ranks for that case).
PLACEMENT_CASES = [
    (PA, P123, [S0, S1, B, P], [S0, S1, B]),
    (PA, P23, [S0, S1, B, P], [S0, S1, B]),
    (P3, PA, [S0, S1, B, P], [S0, S1, B, P]),
    (P3, P3_ONLY, [S0, S1, B, P], [S0, B, P]),
    (P3, P201, [S0, S1, B, P], [S0, S1, B, P]),
    (P3_ONLY, P3, [B], [S0, S1, B]),
]
PLACEMENT_PARAMS = [(src_p, dst_p, s, d) for src_p, dst_p, ss, ds in PLACEMENT_CASES for s in ss for d in ds]


@pytest.mark.parametrize("src_p,dst_p,src,dst", PLACEMENT_PARAMS,
                         ids=[f"{sp.ranks}{_name(s)}->{dp.ranks}{_name(d)}".replace(" ", "")
                              for sp, dp, s, d in PLACEMENT_PARAMS])
def test_to_global_placement_change_1d(src_p, dst_p, src, dst):
    a = _data((5, 7), seed=10)
    x = ol.tensor(a, placement=src_p, sbp=src)
    y = x.to_global(placement=dst_p, sbp=dst)
    _assert_global(y, a, dst_p, dst)
    for r in dst_p.flat_ranks:  # every rank of the new placement holds its shard
        assert y.to_local(rank=r).ndim == 2


MESH_PLACEMENT_PARAMS = [
    (PA, (S0,), MESH22, (S0, S1)),
    (PA, (B,), MESH22, (S1, B)),
    (MESH22, (S0, S1), PA, (B,)),
    (MESH22, (P, S0), PA, (S1,)),
    (MESH22, (P, P), P23, (P,)),
    (MESH22, (S1, P), MESH22_REV, (S0, S1)),
    (MESH22, (B, S0), MESH22_REV, (P, P)),
    (MESH22, (S0, S1), MESH23, (S1, S0)),
    (MESH23, (P, S1), MESH22, (B, S0)),
]


@pytest.mark.parametrize("src_p,src,dst_p,dst", MESH_PLACEMENT_PARAMS,
                         ids=[f"{sp.hierarchy}{_name(s)}->{dp.hierarchy}{_name(d)}".replace(" ", "")
                              for sp, s, dp, d in MESH_PLACEMENT_PARAMS])
def test_to_global_placement_change_2d(src_p, src, dst_p, dst):
    a = _data((5, 7), seed=11)
    y = ol.tensor(a, placement=src_p, sbp=src).to_global(placement=dst_p, sbp=dst)
    _assert_global(y, a, dst_p, dst)


def test_to_global_placement_chain():
    a = _data((5, 7), seed=12)
    x = ol.tensor(a, placement=PA, sbp=S0)
    steps = [(P123, S1), (P3, B), (MESH22, (S0, S1)), (P23, S0), (P3_ONLY, B), (MESH23, (S1, S0)), (PA, P)]
    for p, s in steps:
        x = x.to_global(placement=p, sbp=s)
        _assert_global(x, a, p, s if isinstance(s, tuple) else s)


def test_to_global_placement_change_keeps_or_resets_sbp():
    a = _data((5, 7), seed=13)
    x = ol.tensor(a, placement=PA, sbp=S1)
    y = x.to_global(placement=P123)  # same mesh rank: the SBP is kept
    _assert_global(y, a, P123, S1)
    z = x.to_global(placement=MESH22)  # a different mesh rank: broadcast on every axis
    _assert_global(z, a, MESH22, (B, B))


@pytest.mark.parametrize("src_ranks,dst_ranks", [([0, 1], [1, 2, 3]), ([0, 1], [2, 3])])
def test_to_global_partial_sum_onto_new_ranks(src_ranks, dst_ranks):
    r = _run_isolated(f"""
        a = np.arange(35, dtype=np.float32).reshape(5, 7)
        x = ol.tensor(a, placement=ol.placement("cpu", ranks={src_ranks}), sbp=ol.sbp.split(0))
        y = x.to_global(placement=ol.placement("cpu", ranks={dst_ranks}), sbp=ol.sbp.partial_sum)
        assert y.sbp == (ol.sbp.partial_sum,)
        assert np.allclose(y.numpy(), a)
        print("OK")
    """)
    assert r.returncode == 0 and "OK" in r.stdout, (r.returncode, r.stderr[-2000:])


# --- to_local ------------------------------------------------------------------------------------

def test_to_local_split0_of_7_on_3_ranks_is_balanced():
    a = np.arange(7 * 2, dtype=np.float32).reshape(7, 2)
    x = ol.tensor(a, placement=P3, sbp=S0)
    sizes = [x.to_local(rank=r).shape[0] for r in P3.flat_ranks]
    assert sizes == [3, 2, 2]
    for r, ref in zip(P3.flat_ranks, np.array_split(a, 3, axis=0)):
        local = x.to_local(rank=r)
        assert not local.is_global and local.placement is None and local.sbp is None
        np.testing.assert_array_equal(local.numpy(), ref)


@pytest.mark.parametrize("shape,axis", [((5, 7), 0), ((5, 7), 1), ((4, 5, 7), 2), ((2, 8), 1), ((7, 3), 0)])
def test_to_local_split_matches_array_split(shape, axis):
    a = _data(shape, seed=14)
    x = ol.tensor(a, placement=P3, sbp=ol.sbp.split(axis))
    for r, ref in zip(P3.flat_ranks, np.array_split(a, 3, axis=axis)):
        np.testing.assert_array_equal(x.to_local(rank=r).numpy(), ref)
    # and after boxing into that layout from another one
    y = ol.tensor(a, placement=P3, sbp=B).to_global(sbp=ol.sbp.split(axis))
    for r, ref in zip(P3.flat_ranks, np.array_split(a, 3, axis=axis)):
        np.testing.assert_allclose(y.to_local(rank=r).numpy(), ref, rtol=RTOL, atol=ATOL)


def test_to_local_default_is_first_rank_of_placement():
    a = _data((7, 3), seed=15)
    x = ol.tensor(a, placement=P201, sbp=S0)  # rank 2 holds the first shard
    np.testing.assert_array_equal(x.to_local().numpy(), a[:3])
    np.testing.assert_array_equal(x.to_local(rank=2).numpy(), a[:3])
    np.testing.assert_array_equal(x.to_local(rank=0).numpy(), a[3:5])
    np.testing.assert_array_equal(x.to_local(rank=1).numpy(), a[5:])


def test_to_local_broadcast_and_partial_sum():
    a = _data((5, 7), seed=16)
    xb = ol.tensor(a, placement=P3, sbp=B)
    for r in P3.flat_ranks:
        np.testing.assert_array_equal(xb.to_local(rank=r).numpy(), a)
    for src in [S0, S1, B]:
        xp = ol.tensor(a, placement=P3, sbp=src).to_global(sbp=P)
        parts = [xp.to_local(rank=r).numpy() for r in P3.flat_ranks]
        assert all(p.shape == a.shape for p in parts)
        np.testing.assert_allclose(np.sum(parts, axis=0), a, rtol=RTOL, atol=ATOL)
    xp = ol.tensor(a, placement=P3, sbp=P)
    np.testing.assert_allclose(np.sum([xp.to_local(rank=r).numpy() for r in P3.flat_ranks], axis=0), a,
                               rtol=RTOL, atol=ATOL)


def _mesh_shards(a, mesh_shape, nd):
    """Reference shard of every device of a mesh (row-major): nested balanced splits, mesh axis 0 first."""
    out = {}
    for coords in itertools.product(*[range(n) for n in mesh_shape]):
        piece = a
        for axis, s in enumerate(nd):
            if s.kind == "S":
                piece = np.array_split(piece, mesh_shape[axis], axis=s.axis)[coords[axis]]
        out[coords] = piece
    return out


@pytest.mark.parametrize("nd", [(S0, S1), (S1, S0), (S0, S0), (S1, S1), (B, S1), (S0, B), (B, B)],
                         ids=lambda s: _name(s))
@pytest.mark.parametrize("mesh", [MESH22, MESH23], ids=["2x2", "2x3"])
def test_to_local_2d_mesh_shards(mesh, nd):
    a = _data((7, 11), seed=17)
    x = ol.tensor(a, placement=mesh, sbp=nd)
    ref = _mesh_shards(a, mesh.hierarchy, nd)
    for idx, r in enumerate(mesh.flat_ranks):
        coords = tuple(int(c) for c in np.unravel_index(idx, mesh.hierarchy))
        np.testing.assert_array_equal(x.to_local(rank=r).numpy(), ref[coords])


def test_to_local_2d_partial_sum_axis():
    a = _data((5, 7), seed=18)
    x = ol.tensor(a, placement=MESH22, sbp=(B, B)).to_global(sbp=(P, S1))
    cols = np.array_split(a, 2, axis=1)
    for j in range(2):  # along mesh axis 0 the two ranks hold addends of the same column block
        parts = [x.to_local(rank=MESH22.ranks[i][j]).numpy() for i in range(2)]
        np.testing.assert_allclose(parts[0] + parts[1], cols[j], rtol=RTOL, atol=ATOL)


def test_to_local_of_local_returns_itself():
    t = ol.tensor(_data((2, 3)))
    assert t.to_local() is t


# --- local -> global -----------------------------------------------------------------------------

@pytest.mark.parametrize("placement,sbp,expect", [
    (PA, S0, lambda a: np.concatenate([a, a], axis=0)),
    (PA, S1, lambda a: np.concatenate([a, a], axis=1)),
    (PA, B, lambda a: a),
    (PA, P, lambda a: 2 * a),
    (P3, S0, lambda a: np.concatenate([a, a, a], axis=0)),
    (P3, P, lambda a: 3 * a),
    (MESH22, (S0, S1), lambda a: np.tile(a, (2, 2))),
    (MESH22, (S1, B), lambda a: np.tile(a, (1, 2))),
    (MESH22, (B, S0), lambda a: np.tile(a, (2, 1))),
    (MESH22, (P, S1), lambda a: 2 * np.tile(a, (1, 2))),
    (MESH22, (P, P), lambda a: 4 * a),
], ids=["2S0", "2S1", "2B", "2P", "3S0", "3P", "22S0S1", "22S1B", "22BS0", "22PS1", "22PP"])
def test_local_to_global(placement, sbp, expect):
    a = _data((3, 5), seed=19)
    local = ol.tensor(a)
    assert not local.is_global and local.placement is None and local.sbp is None
    g = local.to_global(placement=placement, sbp=sbp)
    ref = expect(a)
    _assert_global(g, ref, placement, sbp)
    for r in placement.flat_ranks:  # every simulated rank's shard is the local array
        np.testing.assert_array_equal(g.to_local(rank=r).numpy(), a)
    # the result is an ordinary global tensor: it boxes like one
    _assert_global(g.to_global(sbp=(B,) * placement.ndim), ref, placement, (B,) * placement.ndim)


def test_local_to_global_default_sbp_is_broadcast():
    a = _data((3, 5), seed=20)
    g = ol.tensor(a).to_global(placement=MESH22)
    _assert_global(g, a, MESH22, (B, B))


def test_local_to_global_same_axis_split_by_both_mesh_axes():
    a = _data((3, 5), seed=21)
    g = ol.tensor(a).to_global(placement=MESH22, sbp=(S0, S0))
    _assert_global(g, np.tile(a, (4, 1)), MESH22, (S0, S0))


# --- creation with placement ---------------------------------------------------------------------

LAYOUTS = [(P3, S0), (P3, S1), (P3, B), (P3, P), (PA, S1), (MESH22, (S0, S1)), (MESH22, (P, S0)),
           (MESH22, (S1, P)), (MESH22, (P, P)), (MESH22, (S0, S0)), (MESH23, (B, S1)), (MESH23, (S1, S1))]
LAYOUT_IDS = [f"{p.hierarchy}{_name(s)}".replace(" ", "") for p, s in LAYOUTS]


@pytest.mark.parametrize("fn", [ol.randn, ol.rand], ids=["randn", "rand"])
def test_random_is_layout_independent(fn):
    ref = fn(5, 6, seed=7).numpy()
    assert ref.shape == (5, 6) and ref.dtype == np.float32
    assert not np.array_equal(ref, fn(5, 6, seed=8).numpy())  # the seed matters
    np.testing.assert_array_equal(fn(5, 6, seed=7).numpy(), ref)  # and determines the value
    for p, s in LAYOUTS:
        t = fn(5, 6, placement=p, sbp=s, seed=7)
        assert t.sbp == (s if isinstance(s, tuple) else (s,)) and t.placement == p and tuple(t.shape) == (5, 6)
        np.testing.assert_array_equal(t.numpy(), ref, err_msg=f"{p.hierarchy} {_name(s)}")
    big = fn(7, 11, seed=3).numpy()
    np.testing.assert_array_equal(fn(7, 11, placement=MESH23, sbp=(S1, S1), seed=3).numpy(), big)
    np.testing.assert_array_equal(fn((7, 11), placement=MESH23, sbp=(S0, S1), seed=3).numpy(), big)


def test_random_float64_layout_independent():
    ref = ol.randn(5, 6, dtype=ol.float64, seed=11).numpy()
    assert ref.dtype == np.float64
    t = ol.randn(5, 6, dtype=ol.float64, placement=MESH22, sbp=(S1, S0), seed=11)
    assert t.dtype == np.float64
    np.testing.assert_array_equal(t.numpy(), ref)


def test_random_distributions():
    n = ol.randn(4000, placement=P3, sbp=S0, seed=5).numpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1.0) < 0.1
    u = ol.rand(4000, placement=P3, sbp=S0, seed=5).numpy()
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.05
    # shards of different ranks are not copies of each other
    x = ol.randn(6, 4, placement=P3, sbp=S0, seed=5)
    assert not np.array_equal(x.to_local(rank=0).numpy(), x.to_local(rank=1).numpy())


def test_manual_seed_reproducible():
    ol.manual_seed(123)
    a = ol.randn(5, 6, placement=P3, sbp=S1).numpy()
    b = ol.rand(5, 6, placement=P3, sbp=S1).numpy()
    ol.manual_seed(123)
    np.testing.assert_array_equal(ol.randn(5, 6, placement=MESH22, sbp=(S0, S1)).numpy(), a)
    np.testing.assert_array_equal(ol.rand(5, 6).numpy(), b)
    assert not np.array_equal(ol.randn(5, 6).numpy(), a)


@pytest.mark.parametrize("p,s", LAYOUTS, ids=LAYOUT_IDS)
def test_zeros_ones_full(p, s):
    shape = (7, 11) if p is MESH23 else (5, 6)
    z = ol.zeros(*shape, placement=p, sbp=s)
    _assert_global(z, np.zeros(shape, np.float32), p, s)
    o = ol.ones(*shape, placement=p, sbp=s)  # under P the value is still all ones
    _assert_global(o, np.ones(shape, np.float32), p, s)
    f = ol.full(shape, 2.5, placement=p, sbp=s)
    _assert_global(f, np.full(shape, 2.5, np.float32), p, s)
    o64 = ol.ones(shape, dtype=ol.int64, placement=p, sbp=s)
    _assert_global(o64, np.ones(shape, np.int64), p, s)


def test_zeros_ones_local_and_default_sbp():
    np.testing.assert_array_equal(ol.zeros(2, 3).numpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(ol.ones((2, 3), dtype=ol.float64).numpy(), np.ones((2, 3)))
    assert ol.ones(2, 3).numpy().dtype == np.float32
    o = ol.ones(5, 3, placement=MESH22)
    _assert_global(o, np.ones((5, 3), np.float32), MESH22, (B, B))
    ar = ol.arange(7, placement=P3, sbp=S0)
    _assert_global(ar, np.arange(7, dtype=np.int64), P3, S0)
    assert [ar.to_local(rank=r).numpy().tolist() for r in P3.flat_ranks] == [[0, 1, 2], [3, 4], [5, 6]]


# --- properties ----------------------------------------------------------------------------------

def test_global_tensor_properties():
    a = _data((5, 7), seed=22)
    x = ol.tensor(a, placement=MESH22, sbp=(S0, S1))
    assert isinstance(x.shape, tuple) and x.shape == (5, 7) and list(x.shape) == [5, 7]
    assert x.size() == (5, 7) and x.size(1) == 7 and x.shape.numel() == 35
    assert x.ndim == 2 and x.dim() == 2 and x.numel() == 35 and len(x) == 5
    assert x.dtype == ol.float32 and x.dtype == np.float32
    assert x.is_global and x.placement == MESH22 and x.placement.ndim == 2
    assert x.placement.hierarchy == [2, 2] and x.placement.flat_ranks == [0, 1, 2, 3]
    assert x.sbp == (S0, S1)
    assert not x.requires_grad and x.is_leaf and x.grad is None
    assert ol.tensor(a, dtype=ol.float64, placement=P3, sbp=S0).dtype == ol.float64
    assert ol.tensor(np.arange(6), placement=P3, sbp=S0).dtype == ol.int64
    assert ol.tensor(np.arange(6, dtype=np.int32), placement=P3, sbp=S0).dtype == ol.int32
    assert ol.tensor(a.astype(np.float64), placement=P3, sbp=S0).dtype == ol.float32  # float64 data defaults to float32
    y = x.to_global(sbp=(P, B))
    assert y.shape == (5, 7) and y.dtype == ol.float32
    assert "placement=" in repr(x) and "sbp=" in repr(x)


def test_placement_and_sbp_values():
    assert ol.placement("cpu", ranks=[0, 1, 2]) == P3
    assert ol.placement("cpu", ranks=[2, 0, 1]) != P3  # rank order is part of the placement
    assert ol.placement("cpu", ranks=[[0, 1], [2, 3]]) == MESH22 and MESH22 != ol.placement("cpu", ranks=[0, 1, 2, 3])
    assert P3.ndim == 1 and P3.hierarchy == [3] and MESH23.hierarchy == [2, 3]
    assert hash(ol.placement("cpu", ranks=[0, 1])) == hash(PA)
    assert ol.sbp.split(1) == S1 and S1 != S0 and B != P
    assert len({ol.sbp.split(0), S0, B, ol.sbp.broadcast}) == 2


def test_global_tensor_from_tensor_and_lists():
    x = ol.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], placement=P3, sbp=S0)
    _assert_global(x, np.array([[1, 2], [3, 4], [5, 6]], np.float32), P3, S0)
    y = ol.tensor(x, placement=PA, sbp=S1)  # from a global tensor: its logical value
    _assert_global(y, x.numpy(), PA, S1)


def test_to_global_propagates_grad_through_boxing():
    rs = np.random.RandomState(23)
    a, c = rs.randn(5, 7).astype(np.float32), rs.randn(5, 7).astype(np.float32)
    x = ol.tensor(a, placement=P3, sbp=S0, requires_grad=True)
    y = x.to_global(sbp=S1).to_global(sbp=B)
    assert y.requires_grad and not y.is_leaf
    loss = (y * ol.tensor(c, placement=P3, sbp=B)).sum()
    loss.backward()
    assert x.grad.sbp == (S0,) and x.grad.placement == P3
    np.testing.assert_allclose(x.grad.numpy(), c, rtol=1e-5, atol=1e-6)


def test_to_global_grad_through_placement_change():
    rs = np.random.RandomState(24)
    a, c = rs.randn(5, 7).astype(np.float32), rs.randn(5, 7).astype(np.float32)
    x = ol.tensor(a, placement=PA, sbp=B, requires_grad=True)
    y = x.to_global(placement=P23, sbp=B)
    (y * ol.tensor(c, placement=P23, sbp=B)).sum().backward()
    assert x.grad.placement == PA and x.grad.sbp == (B,)
    np.testing.assert_allclose(x.grad.numpy(), c, rtol=1e-5, atol=1e-6)


def test_backward_of_loss_on_another_placement():
    a = _data((5, 7), seed=25)
    x = ol.tensor(a, placement=PA, sbp=S0, requires_grad=True)
    y = x.to_global(placement=P23, sbp=B)
    y.sum().backward()
    assert x.grad.placement == PA and x.grad.sbp == (S0,)
    np.testing.assert_allclose(x.grad.numpy(), np.ones_like(a), rtol=1e-5, atol=1e-6)

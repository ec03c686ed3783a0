"""Bad input raises a clear exception whose message names what is wrong (op, shapes, SBPs,
placements), and the process keeps working afterwards."""
import re

import numpy as np
import pytest

import oneflow_like as ol

S0, S1 = ol.sbp.split(0), ol.sbp.split(1)
B, P = ol.sbp.broadcast, ol.sbp.partial_sum
PA = ol.placement("cpu", ranks=[0, 1])
PB = ol.placement("cpu", ranks=[2, 3])
P3 = ol.placement("cpu", ranks=[0, 1, 2])
MESH = ol.placement("cpu", ranks=[[0, 1], [2, 3]])


def _z(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def _ones(*shape, placement=None, sbp=None, dtype=np.float32):
    return ol.tensor(np.ones(shape, dtype), placement=placement, sbp=sbp)


# --- matmul and elementwise shapes ---------------------------------------------------------------

@pytest.mark.parametrize("placement,sbp", [(None, None), (PA, B), (PA, S0)], ids=["local", "B", "S0"])
def test_matmul_shape_mismatch_names_op_and_shapes(placement, sbp):
    a = _ones(2, 3, placement=placement, sbp=sbp)
    b = _ones(4, 5, placement=placement, sbp=None if placement is None else B)
    with pytest.raises(ValueError, match=r"matmul .*inner dimensions differ") as e:
        a @ b
    msg = str(e.value)
    assert "[2,3]" in msg and "[4,5]" in msg and "k=3" in msg and "k=4" in msg
    with pytest.raises(ValueError, match=r"matmul .*\[2,3\].*\[4,5\]"):
        ol.matmul(a, b)


def test_matmul_transpose_b_mismatch_hints_at_the_flag():
    a, b = _ones(2, 3), _ones(3, 5)
    with pytest.raises(ValueError, match=r"inner dimensions differ.*transpose_b=true.*did you mean transpose_b=false"):
        ol.matmul(a, b, transpose_b=True)


def test_elementwise_not_broadcastable():
    with pytest.raises(ValueError, match=r"add .*not broadcastable.*\[2,3\].*\[4,5\]"):
        _ones(2, 3, placement=PA, sbp=S0) + _ones(4, 5, placement=PA, sbp=B)
    with pytest.raises(ValueError, match=r"mul .*not broadcastable"):
        _ones(2, 3) * _ones(2, 4)


def test_dtype_mismatch_asks_for_a_cast():
    with pytest.raises(ValueError, match=r"mul .*dtypes differ.*float32.*int64.*insert a cast"):
        _ones(2, 3) * _ones(2, 3, dtype=np.int64)


# --- SBP / placement validation ------------------------------------------------------------------

@pytest.mark.parametrize("axis", [2, 5])
def test_split_on_missing_axis(axis):
    with pytest.raises(ValueError, match=rf"split axis {axis} .*out of range for a tensor with 2 axes"):
        ol.tensor(_z(2, 3), placement=PA, sbp=ol.sbp.split(axis))
    with pytest.raises(ValueError, match=rf"S\({axis}\)"):
        ol.zeros(2, 3, placement=PA, sbp=ol.sbp.split(axis))
    with pytest.raises(ValueError, match=rf"S\({axis}\)"):
        ol.tensor(_z(2, 3), placement=PA, sbp=B).to_global(sbp=ol.sbp.split(axis))
    with pytest.raises(ValueError, match=rf"splits axis {axis} but the local tensor has 2 axes"):
        ol.tensor(_z(2, 3)).to_global(placement=PA, sbp=ol.sbp.split(axis))


@pytest.mark.parametrize("bad", [-1, 1.0, "0", None])
def test_split_needs_non_negative_int(bad):
    with pytest.raises(ValueError, match="sbp.split needs a non-negative int axis"):
        ol.sbp.split(bad)


@pytest.mark.parametrize("sbp,n", [(S0, 1), ((B,), 1), ((B, B, B), 3), ([S0, S1, P], 3)], ids=["one", "1-tuple",
                                                                                              "3-tuple", "3-list"])
def test_sbp_of_wrong_length_for_2d_placement(sbp, n):
    pat = rf"has {n} entries but placement cpu:\[\[0,1\],\[2,3\]\] has 2 mesh axes"
    with pytest.raises(ValueError, match=pat):
        ol.tensor(_z(4, 4), placement=MESH, sbp=sbp)
    with pytest.raises(ValueError, match=pat):
        ol.randn(4, 4, placement=MESH, sbp=sbp)
    with pytest.raises(ValueError, match=pat):
        ol.tensor(_z(4, 4), placement=MESH, sbp=(B, B)).to_global(sbp=sbp)


def test_sbp_tuple_for_1d_placement():
    with pytest.raises(ValueError, match=r"sbp \[B, B\] has 2 entries but placement cpu:\[0,1\] has 1 mesh axes"):
        ol.tensor(_z(4, 4), placement=PA, sbp=(B, B))


@pytest.mark.parametrize("bad", ["S(0)", 0, "broadcast"])
def test_not_an_sbp(bad):
    with pytest.raises(ValueError, match=r"not an SBP: .*use ol.sbp.split\(dim\), ol.sbp.broadcast"):
        ol.tensor(_z(4, 4), placement=PA, sbp=bad)


def test_split_into_more_parts_than_elements():
    # 3 rows on 4 devices: one shard would be empty
    with pytest.raises(ValueError, match=r"axis 0 has 3 elements but is split into 4 parts.*would be empty"):
        ol.tensor(_z(3, 5), placement=MESH, sbp=(B, B)).to_global(sbp=(S0, S0))
    with pytest.raises(ValueError, match=r"axis 0 has 2 elements but is split into 3 parts.*would be empty"):
        ol.tensor(_z(2, 5), placement=P3, sbp=S0).to_global(sbp=B)


def test_split_into_more_parts_than_elements_rejected_at_creation():
    with pytest.raises(ValueError, match="would be empty"):
        ol.tensor(_z(2, 5), placement=P3, sbp=S0)


def test_bad_placements():
    with pytest.raises(ValueError, match=r"placement type 'cuda' is not available"):
        ol.placement("cuda", ranks=[0, 1])
    with pytest.raises(ValueError, match=r"duplicate rank 0"):
        ol.placement("cpu", ranks=[0, 0])
    with pytest.raises(ValueError, match=r"ragged rank hierarchy"):
        ol.placement("cpu", ranks=[[0, 1], [2]])
    with pytest.raises(ValueError, match=r"rank -1 is out of range"):
        ol.placement("cpu", ranks=[-1, 0])
    with pytest.raises(ValueError, match=r"placement must be an ol.placement, got 'cpu:\[0,1\]'"):
        ol.tensor(_z(2, 2), placement="cpu:[0,1]", sbp=B)


def test_sbp_without_placement():
    with pytest.raises(ValueError, match="sbp given without a placement"):
        ol.tensor(_z(2, 2), sbp=B)
    with pytest.raises(ValueError, match=r"to_global\(\) of a local tensor needs a placement"):
        ol.tensor(_z(2, 2)).to_global(sbp=B)


def test_to_local_of_a_rank_outside_the_placement():
    x = ol.tensor(_z(4, 2), placement=PA, sbp=S0)
    with pytest.raises(ValueError, match=r"rank 3 holds no shard of this tensor \(placement cpu:\[0,1\]\)"):
        x.to_local(rank=3)


# --- placements and local/global mixing ----------------------------------------------------------

@pytest.mark.parametrize("op,fn", [("add", lambda a, b: a + b), ("mul", lambda a, b: a * b),
                                   ("matmul", lambda a, b: a @ b), ("concat", lambda a, b: ol.cat([a, b]))])
def test_ops_on_different_placements(op, fn):
    a = _ones(3, 3, placement=PA, sbp=S0)
    b = _ones(3, 3, placement=PB, sbp=B)
    with pytest.raises(ValueError, match=rf"{op}: inputs are on different placements, cpu:\[0,1\] and cpu:\[2,3\]"
                                         r".*to_global\(placement="):
        fn(a, b)
    # the hint works
    np.testing.assert_allclose(fn(a, b.to_global(placement=PA, sbp=B)).numpy(), fn(np.ones((3, 3)), np.ones((3, 3)))
                               if op != "concat" else np.ones((6, 3)))


def test_ops_on_1d_and_2d_placements_of_same_ranks():
    a = _ones(4, 4, placement=ol.placement("cpu", ranks=[0, 1, 2, 3]), sbp=S0)
    b = _ones(4, 4, placement=MESH, sbp=(S0, S1))
    with pytest.raises(ValueError, match=r"different placements, cpu:\[0,1,2,3\] and cpu:\[\[0,1\],\[2,3\]\]"):
        a + b


@pytest.mark.parametrize("op,fn", [("add", lambda a, b: a + b), ("mul", lambda a, b: b * a),
                                   ("matmul", lambda a, b: a @ b), ("sub", lambda a, b: ol.sub(b, a))])
def test_mixing_local_and_global(op, fn):
    g = _ones(3, 3, placement=PA, sbp=B)
    loc = _ones(3, 3)
    with pytest.raises(ValueError, match=rf"{op}: mixes local and global tensors \(call .to_global\(placement, sbp\)"):
        fn(g, loc)


def test_python_scalars_and_numpy_arrays_mix_with_global_tensors():
    # not an error: plain data becomes a broadcast tensor on the other input's placement
    g = _ones(2, 3, placement=PA, sbp=S0)
    y = g + np.full((2, 3), 2.0, np.float32)
    assert y.placement == PA
    np.testing.assert_array_equal(y.numpy(), np.full((2, 3), 3.0))


# --- autograd ------------------------------------------------------------------------------------

@pytest.mark.parametrize("placement,sbp", [(None, None), (PA, S0)], ids=["local", "S0"])
def test_backward_on_non_scalar(placement, sbp):
    x = ol.tensor(_z(2, 3), placement=placement, sbp=sbp, requires_grad=True)
    y = x * 2.0
    with pytest.raises(RuntimeError, match=r"grad can be implicitly created only for scalar outputs .*shape \[2, 3\]"):
        y.backward()
    assert x.grad is None
    y.sum().backward()  # still usable
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 2.0))


def test_backward_without_requires_grad():
    x = ol.tensor(_z(2, 3), placement=PA, sbp=S0)
    with pytest.raises(RuntimeError, match=r"backward\(\): the tensor does not require grad"):
        (x * 2.0).sum().backward()


# --- dtypes --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float16, np.uint8, np.int8])
def test_unsupported_dtype(dtype):
    name = np.dtype(dtype).name
    pat = rf"unsupported dtype {name} \(oneflow_like takes float32, float64, int32, int64, bool\)"
    with pytest.raises(ValueError, match=pat):
        ol.tensor(np.zeros((2, 3), dtype))
    with pytest.raises(ValueError, match=pat):
        ol.tensor(np.zeros((2, 3), dtype), placement=PA, sbp=S0)
    with pytest.raises(ValueError, match=pat):
        ol.zeros(2, 3, dtype=dtype)
    with pytest.raises(ValueError, match=pat):
        ol.tensor(np.zeros((2, 3)), dtype=dtype)


def test_complex_python_data():
    with pytest.raises(ValueError, match="unsupported dtype complex128"):
        ol.tensor([[1 + 2j, 3.0]])


# --- op arguments --------------------------------------------------------------------------------

def test_op_argument_errors():
    x = _ones(2, 3, placement=PA, sbp=S1)
    with pytest.raises(ValueError, match=r"reshape .*cannot reshape input \[2,3\] \(6 elements\) to \[4,2\] \(8 elements\)"):
        ol.reshape(x, 4, 2)
    with pytest.raises(ValueError, match=r"softmax runs over the last axis \(dim=-1\); got dim=0"):
        ol.softmax(x, dim=0)
    with pytest.raises(ValueError, match=r"transpose .*perm \[0,0\] is not a permutation"):
        ol.permute(x, 0, 0)
    with pytest.raises(ValueError, match=r"concat .*input 1 float32\[2,4\] does not match input 0 float32\[2,3\]"):
        ol.cat([x, _ones(2, 4, placement=PA, sbp=B)], dim=0)
    with pytest.raises(ValueError, match=r"split .*sizes \[1,1\] must be non-negative and sum to 3"):
        ol.split(x, [1, 1], dim=1)
    with pytest.raises(ValueError, match=r"layer_norm .*gamma float32\[4\] must be float32\[3\]"):
        ol.layer_norm(x, (3,), _ones(4, placement=PA, sbp=B), _ones(4, placement=PA, sbp=B))
    with pytest.raises(ValueError, match=re.escape("tensor ** p supports p in (1, 2)")):
        x ** 3
    with pytest.raises(ValueError, match=r"item\(\) needs a one-element tensor, this one has shape \[2, 3\]"):
        x.item()


def test_loss_and_embedding_argument_errors():
    logits = _ones(4, 3, placement=PA, sbp=S0)
    with pytest.raises(ValueError, match=r"sparse_softmax_cross_entropy .*labels must be int32 or int64, got float32\[4\]"):
        ol.cross_entropy(logits, _ones(4, placement=PA, sbp=S0))
    with pytest.raises(ValueError, match=r"labels int64\[3\] must have the shape of logits float32\[4,3\] without its "
                                         r"class axis"):
        ol.cross_entropy(logits, ol.tensor(np.zeros(3, np.int64), placement=PA, sbp=B))
    with pytest.raises(ValueError, match=r"cross_entropy supports reduction='mean'.*got 'sum'"):
        ol.cross_entropy(logits, ol.tensor(np.zeros(4, np.int64), placement=PA, sbp=S0), reduction="sum")
    table = _ones(5, 2, placement=PA, sbp=B)
    with pytest.raises(ValueError, match=r"embedding .*ids must be int32 or int64, got float32\[3\]"):
        ol.embedding(_ones(3, placement=PA, sbp=B), table)
    with pytest.raises(ValueError, match=r"embedding .*table must be a float32 or float64 \[V, D\] tensor, got int64\[3\]"):
        ol.embedding(table, ol.tensor(np.zeros(3, np.int64), placement=PA, sbp=B))  # arguments swapped


@pytest.mark.parametrize("fn", [lambda x: ol.sum(x, dim=5), lambda x: ol.mean(x, dim=2),
                                lambda x: ol.transpose(x, 0, 2), lambda x: ol.split(x, 1, dim=3)],
                         ids=["sum", "mean", "transpose", "split"])
def test_out_of_range_dim(fn):
    x = _ones(2, 3, placement=PA, sbp=S0)
    with pytest.raises((ValueError, IndexError, RuntimeError), match=r"(?i)out of range|dim"):
        fn(x)


# --- recovery ------------------------------------------------------------------------------------

def test_engine_keeps_working_after_errors():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = ol.tensor(a, placement=PA, sbp=S0)
    for bad in [lambda: x @ x, lambda: x + _ones(4, 5, placement=PA, sbp=B), lambda: x.to_global(sbp=ol.sbp.split(7))]:
        with pytest.raises(ValueError):
            bad()
    np.testing.assert_allclose((x @ x.T).numpy(), a @ a.T)
    np.testing.assert_allclose(x.to_global(sbp=S1).numpy(), a)

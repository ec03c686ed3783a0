"""A tour of global tensors: create one, reshard it through every SBP transition on a 1-D and a
2-D placement, move it between placements, and print what each step holds.

    /usr/bin/python3 examples/global_tensor_tour.py                 # 4 ranks as threads
    tools/olrun --nproc-per-node 4 examples/global_tensor_tour.py   # 4 processes
"""
import numpy as np

import oneflow_like as ol

S, B, P = ol.sbp.split, ol.sbp.broadcast, ol.sbp.partial_sum
leader = ol.env.get_rank() == 0


def show(what, t, a):
    ok = np.allclose(t.numpy(), a)  # collective under a launcher
    if leader:
        print(f"{what:<34} sbp={'(' + ', '.join(s.text for s in t.sbp) + ')':<12} placement={t.placement.text:<18} "
              f"logical={list(t.shape)} equal={ok}")
    if not ok:
        raise SystemExit(f"{what}: the logical value changed")


a = np.arange(5 * 7, dtype=np.float32).reshape(5, 7)  # 5 x 7: not divisible by the meshes
line = ol.placement("cpu", ranks=[0, 1, 2, 3])
x = ol.tensor(a, placement=line, sbp=S(0))
show("ol.tensor S(0)", x, a)
for sbp in [S(1), B, P, S(0), P, S(1), B]:
    x = x.to_global(sbp=sbp)
    show(f"to_global -> {sbp.text}", x, a)
mesh = ol.placement("cpu", ranks=[[0, 1], [2, 3]])
y = x.to_global(placement=mesh, sbp=(S(0), S(1)))
show("1-D -> 2-D mesh (S(0), S(1))", y, a)
for sbp in [(B, S(0)), (P, B), (S(1), P), (B, B)]:
    y = y.to_global(sbp=sbp)
    show(f"to_global -> ({sbp[0].text}, {sbp[1].text})", y, a)
z = y.to_global(placement=ol.placement("cpu", ranks=[1, 3]), sbp=S(0))
show("mesh -> ranks [1, 3] S(0)", z, a)
w = ol.randn(5, 7, placement=mesh, sbp=(S(0), S(1)), seed=3)
same = np.array_equal(w.numpy(), ol.randn(5, 7, placement=line, sbp=B, seed=3).numpy())
x0 = x.to_global(sbp=S(0))  # every process runs every op (SPMD), then looks at its own shard
print(f"rank {ol.env.get_rank()}: local shard of the S(0) tensor has shape {list(x0.to_local().shape)}"
      if ol.env.is_distributed() else "shards of the S(0) tensor: " +
      ", ".join(f"rank {r}: {list(x0.to_local(rank=r).shape)}" for r in line.flat_ranks))
if leader:
    print(f"randn(seed=3) is the same logical tensor under (S(0), S(1)) and B: {same}")

"""ol.save / ol.load: state dicts in oltrain's sharded checkpoint format, any layout in and out,
and a checkpoint written by oltrain that goes through Python and back to oltrain."""
import os
import re
import subprocess

import numpy as np
import pytest

import oneflow_like as ol

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
S, B = ol.sbp.split, ol.sbp.broadcast


def test_state_dict_round_trip_across_layouts(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 3)).astype(np.float32)
    b = np.arange(4, dtype=np.int64)
    c = rng.standard_normal((7,)).astype(np.float32)
    p2 = ol.placement("cpu", ranks=[0, 1])
    mesh = ol.placement("cpu", ranks=[[0, 1], [2, 3]])
    sd = {"w": ol.tensor(a, placement=mesh, sbp=(S(0), S(1))), "b": ol.tensor(b, placement=mesh, sbp=(B, B)),
          "c": ol.tensor(c, placement=mesh, sbp=(S(0), ol.sbp.partial_sum))}
    ol.save(sd, str(tmp_path / "step_00000007"), step=7)
    assert os.path.exists(tmp_path / "step_00000007" / "COMPLETE")
    local = ol.load(str(tmp_path))  # the root: its newest complete step
    for name, ref in (("w", a), ("b", b), ("c", c)):
        assert local[name].placement is None
        np.testing.assert_allclose(local[name].numpy(), ref, rtol=1e-6, err_msg=name)
    split = ol.load(str(tmp_path / "step_00000007"), placement=p2, sbp=S(0))
    assert split["w"].sbp == (S(0),) and split["w"].to_local(rank=1).shape == (2, 3)
    np.testing.assert_array_equal(split["b"].numpy(), b)
    with pytest.raises(ValueError, match="already holds a complete checkpoint"):
        ol.save(sd, str(tmp_path / "step_00000007"))
    with pytest.raises(ValueError, match="no complete checkpoint"):
        ol.load(str(tmp_path / "nothing"))


def test_module_state_dict_save_load(tmp_path):
    ol.manual_seed(3)
    m = ol.nn.Sequential(ol.nn.Linear(4, 6), ol.nn.ReLU(), ol.nn.Linear(6, 2))
    ol.save(m.state_dict(), str(tmp_path / "m"))
    other = ol.nn.Sequential(ol.nn.Linear(4, 6), ol.nn.ReLU(), ol.nn.Linear(6, 2))
    other.load_state_dict(ol.load(str(tmp_path / "m")))
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(other.state_dict()[k].numpy(), v.numpy())
    with pytest.raises(ValueError, match="size mismatch for 0.weight"):
        ol.nn.Sequential(ol.nn.Linear(5, 6)).load_state_dict({"0.weight": np.zeros((6, 4), np.float32),
                                                              "0.bias": np.zeros(6, np.float32)})


def _oltrain(ckpt, steps, layout):
    binary = os.path.join(ROOT, "tools/train/oltrain")
    if not os.path.exists(binary):
        binary = os.path.join(ROOT, "bazel-bin/tools/train/oltrain")
    if not os.path.exists(binary):
        pytest.skip("oltrain is not built (bazel build //tools/train:oltrain)")
    cmd = [binary, "--model=gpt", "--vocab=256", "--seq_len=16", "--n_layer=1", "--n_embd=32", "--n_head=4",
           "--batch=4", f"--steps={steps}", "--data=/usr/share/common-licenses/GPL-3", f"--checkpoint_dir={ckpt}"] + layout
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return [float(v) for v in re.findall(r"^step \d+ loss ([0-9.]+)", r.stdout, re.M)]


def test_oltrain_checkpoint_through_python_and_back(tmp_path):
    first, through = str(tmp_path / "oltrain"), str(tmp_path / "python")
    _oltrain(first, 3, ["--dp=2"])
    sd = ol.load(first)  # parameters and Adam state (h0.fc.weight/adam_m, ...), as saved on 2 ranks
    assert "wte" in sd and "h0.fc.weight/adam_m" in sd
    assert sd["wte"].shape == (256, 32)
    ol.save(sd, os.path.join(through, "step_00000002"), step=2)
    direct = _oltrain(first, 5, ["--resume", "--tp=2"])
    via_python = _oltrain(through, 5, ["--resume", "--tp=2"])
    assert len(direct) == 2
    assert via_python == direct

"""Python scripts under olrun (one process per rank over TCP): the same losses as one process,
each process compiling only its own rank's plan (issue 16), SBP transitions across processes, a
rank given another job is refused naming what differs, and a failing rank ends the job naming it."""
import json
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np

import oneflow_like as ol

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYPATH = os.path.dirname(os.path.dirname(os.path.abspath(ol.__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import train_gpt  # noqa: E402


def olrun(args, nproc=4, timeout=240, env_extra=None):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, PYTHONPATH=PYPATH, OL_WATCHDOG_MS="30000", **(env_extra or {}))
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    cmd = [sys.executable, os.path.join(ROOT, "tools/olrun"), "--nproc-per-node", str(nproc), "--master-addr",
           "127.0.0.1", "--master-port", str(port)] + args
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


SMALL = ["--steps", "4", "--batch", "8", "--seq-len", "16", "--n-embd", "32"]


def test_train_gpt_2d_and_pipeline_match_one_process(tmp_path):
    expected = train_gpt.main(SMALL + ["--save", str(tmp_path / "one")])
    reference = ol.load(str(tmp_path / "one"))
    for i, layout in enumerate((["--dp", "2", "--tp", "2"], ["--dp", "2", "--pipeline", "--micro-batches", "2"])):
        out, ckpt = str(tmp_path / "losses.txt"), str(tmp_path / f"multi{i}")
        r = olrun([os.path.join(ROOT, "examples/train_gpt.py")] + SMALL + layout + ["--losses-out", out, "--save", ckpt])
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert "plan of rank 0 (compiled per rank" in r.stdout, r.stdout[-3000:]  # rank 0 printed its graph
        losses = [float(v) for v in open(out).read().split()]
        np.testing.assert_allclose(losses, expected, rtol=1e-5, atol=1e-6, err_msg=" ".join(layout))
        # every process saved its shards; the checkpoint holds the one-process run's weights
        saved = ol.load(ckpt)
        for name in ("model.wte.weight", "model.blocks.0.qkv.weight", "model.lm_head.weight"):
            np.testing.assert_allclose(saved[name].numpy(), reference[name].numpy(), rtol=1e-4, atol=1e-6,
                                       err_msg=f"{name} {' '.join(layout)}")


PIPELINE_MLP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipeline_mlp.py")


def facts(output):
    return {f["rank"]: f for f in (json.loads(line.split("FACTS ", 1)[1]) for line in output.splitlines()
                                   if "FACTS {" in line)}


def test_each_process_compiles_only_its_rank_and_trains_as_one_process():
    env = dict(os.environ, PYTHONPATH=PYPATH)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    one = subprocess.run([sys.executable, PIPELINE_MLP], env=env, capture_output=True, text=True, timeout=120)
    assert one.returncode == 0, one.stdout[-3000:] + one.stderr[-3000:]
    single = facts(one.stdout)[0]
    assert not single["per_rank"] and single["plan_rank"] == -1 and single["lowered"] == [0, 1]
    r = olrun([PIPELINE_MLP], nproc=2, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ranks = facts(r.stdout)
    assert sorted(ranks) == [0, 1]
    for rank, f in ranks.items():
        # the plan this process runs is its own rank's; the whole job's facts stay available
        assert f["per_rank"] and f["plan_rank"] == rank and f["lowered"] == [rank], f
        assert f["ranks"] == [0, 1] and list(f["planned"]) == [str(rank)]
        assert f["planned"][str(rank)] == single["planned"][str(rank)]  # the same memory plan as the whole plan's
        assert not f["whole_per_rank"] and f["whole_lowered"] == [0, 1] and f["whole_tasks"] == single["tasks"]
        assert f["agreement"] == ranks[0]["agreement"] and f["agreement"]["pieces_per_step"] == 2
        # rank 0 holds no shard of the loss (stage 1): it reads it through rank 1's binding
        np.testing.assert_allclose(f["losses"], single["losses"], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(f["fc1"], single["fc1"], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(f["fc2"], single["fc2"], rtol=1e-6, atol=1e-7)
    assert ranks[0]["tasks"] + ranks[1]["tasks"] == single["tasks"]  # the rank plans add up to the whole plan
    assert "plan of rank 0 (compiled per rank" in r.stdout


def test_a_rank_given_another_job_is_refused_naming_what_differs():
    start = time.time()
    r = olrun([PIPELINE_MLP], nproc=2, timeout=120, env_extra={"PIPELINE_MLP_RANK1_MICRO": "4"})
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert time.time() - start < 25, "refused at once, not by the 30 s watchdog"
    assert "FACTS" not in out  # no step ran
    assert "ValueError: rank 1 compiled another job than rank 0: pieces_per_step 4 vs 2" in out, out[-3000:]
    # rank 0 stops too, naming rank 1 and the difference
    assert re.search(r"\[rank 0\].*rank 1 .*aborted the job.*pieces_per_step 4 vs 2", out), out[-3000:]


def test_global_tensor_tour_under_olrun():
    r = olrun([os.path.join(ROOT, "examples/global_tensor_tour.py")])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "equal=False" not in r.stdout
    assert r.stdout.count("equal=True") >= 14
    assert "rank 3: local shard of the S(0) tensor has shape [1, 7]" in r.stdout


def test_failing_rank_ends_the_job_naming_it(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(
        "import numpy as np\nimport oneflow_like as ol\n"
        "p = ol.placement('cpu', ranks=[0, 1])\n"
        "x = ol.tensor(np.ones((4, 4), np.float32), placement=p, sbp=ol.sbp.split(0))\n"
        "if ol.env.get_rank() == 1:\n    raise SystemExit('rank 1 gives up')\n"
        "print((x + x).to_global(sbp=ol.sbp.broadcast).numpy().sum())\n")
    r = olrun([str(script)], nproc=2, timeout=120)
    assert r.returncode != 0
    assert "rank 1" in r.stdout + r.stderr


def test_placement_outside_the_world(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("import oneflow_like as ol\nol.placement('cpu', ranks=[0, 5])\n")
    r = olrun([str(script)], nproc=2, timeout=120)
    assert r.returncode != 0
    assert "WORLD_SIZE=2" in r.stdout + r.stderr


def test_exception_on_one_rank_stops_every_rank_with_its_message(tmp_path):
    script = tmp_path / "raise.py"
    script.write_text(
        "import numpy as np\nimport oneflow_like as ol\n"
        "p = ol.placement('cpu', ranks=[0, 1])\n"
        "x = ol.tensor(np.ones((4, 4), np.float32), placement=p, sbp=ol.sbp.split(0))\n"
        "if ol.env.get_rank() == 1:\n    raise RuntimeError('bad data on rank 1')\n"
        "print((x + x).to_global(sbp=ol.sbp.broadcast).numpy().sum())\n")
    r = olrun([str(script)], nproc=2, timeout=120)
    assert r.returncode != 0
    # rank 0 stops at once (no watchdog wait) with rank 1's exception in its message
    assert "[rank 0]" in r.stdout + r.stderr
    assert "uncaught RuntimeError: bad data on rank 1" in r.stdout + r.stderr

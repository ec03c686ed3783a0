"""Tests of olrun under Slurm: hostlist expansion (zero padding, ranges, lists, several bracket
groups, malformed input), the settings derived from SLURM_* variables, and olrun itself under a
simulated `srun --ntasks-per-node=1` (two "nodes" on this machine, no flag but
--nproc-per-node): every rank gets the right rank, world, master and the same token; explicit
flags win; a malformed node list stops olrun with a clear error before any rank starts.
"""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import slurm  # noqa: E402

OLRUN = next(p for p in (os.path.join(os.getcwd(), "tools/olrun"), os.path.join(HERE, "..", "olrun"))
             if os.path.exists(p))
HANG_GUARD_S = 60


def srun_env(node_id, nodes="localhost,localhost", nnodes=2, **extra):
    env = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_NNODES": str(nnodes),
           "SLURM_NODEID": str(node_id), "SLURM_JOB_NODELIST": nodes, "SLURM_NTASKS": str(nnodes)}
    env.update(extra)
    return env


@pytest.mark.parametrize("text, hosts", [
    ("gpu5", ["gpu5"]),
    ("node[01-03,07],gpu5", ["node01", "node02", "node03", "node07", "gpu5"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("r[1-2]-n[01-02]", ["r1-n01", "r1-n02", "r2-n01", "r2-n02"]),
    ("a[1,3]b,c[2]", ["a1b", "a3b", "c2"]),
    ("a,b.example.org,c-1", ["a", "b.example.org", "c-1"]),
])
def test_hostlist_expansion(text, hosts):
    assert slurm.expand_hostlist(text) == hosts


@pytest.mark.parametrize("text, why", [
    ("", "it is empty"),
    ("node[01-03", "'[' is never closed"),
    ("node]1", "']' without '['"),
    ("node[[1]]", "nested '['"),
    ("node[]", "empty brackets"),
    ("node[a-b]", "'a-b' in [a-b] is not a number"),
    ("node[1-]", "'1-' in [1-] is not a number"),
    ("node[3-1]", "range 3-1 in [3-1] runs backwards"),
    ("a,,b", "a host name is empty"),
    ("a,", "a host name is empty"),
    ("a b", "white space"),
    ("n[0-99999999]", "more than 65536 hosts"),
    ("n[1-300]m[1-300]", "more than 65536 hosts"),
])
def test_malformed_hostlists_name_the_variable_and_the_problem(text, why):
    with pytest.raises(slurm.SlurmError) as error:
        slurm.expand_hostlist(text, "SLURM_JOB_NODELIST")
    assert str(error.value).startswith(f"SLURM_JOB_NODELIST='{text}': ")
    assert why in str(error.value)


def test_settings_from_the_environment():
    assert slurm.from_environment({}) is None
    assert slurm.from_environment({"SLURM_JOB_ID": "1", "SLURM_NNODES": "2"}) is None  # sbatch/salloc: no step
    nodes = "node[01-03,07]"
    settings = [slurm.from_environment(srun_env(i, nodes, 4)) for i in range(4)]
    assert [s.node_rank for s in settings] == [0, 1, 2, 3]
    assert all(s.nnodes == 4 and s.master_host == "node01" for s in settings)
    assert len({(s.master_port, s.job_token) for s in settings}) == 1   # every node agrees
    assert 20000 <= settings[0].master_port < 40000
    other_job = slurm.from_environment(srun_env(0, nodes, 4, SLURM_JOB_ID="4243"))
    assert other_job.job_token != settings[0].job_token
    # The step's own node list and count win over the job's.
    step = slurm.from_environment(srun_env(1, nodes, 4, SLURM_STEP_NODELIST="node[03,07]", SLURM_STEP_NUM_NODES="2",
                                           SLURM_STEP_NUM_TASKS="2"))
    assert (step.nnodes, step.node_rank, step.master_host) == (2, 1, "node03")


@pytest.mark.parametrize("extra, why", [
    ({"SLURM_NODEID": "4"}, "SLURM_NODEID=4 is not below SLURM_NNODES=4"),
    ({"SLURM_NODEID": "x"}, "SLURM_NODEID='x': expected an integer"),
    ({"SLURM_JOB_NODELIST": "node[01-03]"}, "names 3 hosts but SLURM_NNODES=4"),
    ({"SLURM_NTASKS": "32"}, "SLURM_NTASKS=32 tasks run on 4 node(s): use srun --ntasks-per-node=1"),
    ({"SLURM_JOB_NODELIST": "node[01-03"}, "SLURM_JOB_NODELIST='node[01-03': '[' is never closed"),
])
def test_inconsistent_environment_is_refused_clearly(extra, why):
    with pytest.raises(slurm.SlurmError) as error:
        slurm.from_environment(srun_env(0, "node[01-03,07]", 4, **extra))
    assert why in str(error.value)


RANK_SCRIPT = """
import json, os
keys = ["RANK", "WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "OL_JOB_TOKEN", "OL_BIND_ADDR"]
print("ENV " + json.dumps({k: os.environ.get(k) for k in keys}), flush=True)
"""


def run_olrun(args, env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k not in ("OL_JOB_TOKEN", "OL_BIND_ADDR")}
    env.update(env_extra)
    return subprocess.run([OLRUN] + args, capture_output=True, text=True, timeout=HANG_GUARD_S, env=env)


def rank_envs(stdout):
    return [json.loads(line.split("ENV ", 1)[1]) for line in stdout.splitlines() if "ENV " in line]


def test_olrun_under_a_simulated_srun_needs_no_other_flag(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    seen = []
    for node in (0, 1):   # what srun --ntasks-per-node=1 starts on each of the two nodes
        p = run_olrun(["--nproc-per-node", "2", str(script)], srun_env(node))
        assert p.returncode == 0, p.stdout + p.stderr
        assert f"olrun: Slurm job 4242 step 0: node {node} of 2, master localhost = 127.0.0.1:" in p.stderr
        seen += rank_envs(p.stdout)
    assert sorted(int(e["RANK"]) for e in seen) == [0, 1, 2, 3]
    assert {e["WORLD_SIZE"] for e in seen} == {"4"}
    assert {e["MASTER_ADDR"] for e in seen} == {"127.0.0.1"}
    assert len({(e["MASTER_PORT"], e["OL_JOB_TOKEN"]) for e in seen}) == 1
    assert {e["OL_BIND_ADDR"] for e in seen} == {None}   # a loopback master needs none
    assert [e["NODE_RANK"] for e in seen if int(e["RANK"]) >= 2] == ["1", "1"]


def test_explicit_flags_win_and_no_slurm_ignores_it(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    p = run_olrun(["--nnodes", "1", "--node-rank", "0", "--master-port", "29999", "--nproc-per-node", "1",
                   str(script)], srun_env(1, OL_JOB_TOKEN="mine"))
    assert p.returncode == 0, p.stdout + p.stderr
    (env,) = rank_envs(p.stdout)
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_PORT"], env["OL_JOB_TOKEN"]) == ("0", "1", "29999", "mine")
    p = run_olrun(["--no-slurm", "--nproc-per-node", "1", str(script)], srun_env(1, SLURM_JOB_NODELIST="bad[")
                  )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Slurm" not in p.stderr and rank_envs(p.stdout)[0]["WORLD_SIZE"] == "1"


def test_malformed_slurm_environment_stops_olrun_before_any_rank(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    p = run_olrun(["--nproc-per-node", "1", str(script)], srun_env(0, "node[01-03,07"))
    assert p.returncode == 2
    assert ("Slurm environment: SLURM_JOB_NODELIST='node[01-03,07': '[' is never closed "
            "(--no-slurm ignores Slurm)") in p.stderr
    assert "ENV " not in p.stdout

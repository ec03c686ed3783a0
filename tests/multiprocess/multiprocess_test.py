"""Multi-process training through tools/olrun on loopback (one process per rank, TCP).

Checks: 2- and 4-process runs equal the in-process run of the same layout (the same printed
losses) and the 1-rank run (to float tolerance); a rank killed mid-step or mid-rendezvous ends
the job with a message naming it, within the heartbeat timeout, leaving no process behind;
resume after a crash continues the loss curve of an uninterrupted run exactly, also under
another layout (resharding) to tolerance; garbage and wrong tokens sent to the master port do
not disturb a running job; a layout that does not fit the world is refused; --timeline under
olrun writes one trace per rank whose cross-rank flows match; OL_TRANSPORT is validated, and
the RDMA transport without a device fails the job with a clear message.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.getcwd()  # the runfiles root (bazel) or the repo root
OLTRAIN = os.path.join(ROOT, "tools/train/oltrain")
OLRUN = os.path.join(ROOT, "tools/olrun")
TINY = ["--model=gpt", "--vocab=64", "--seq_len=16", "--n_layer=2", "--n_embd=32", "--n_head=2",
        "--batch=8", "--lr=3e-3", "--watchdog_ms=30000", "--data=synthetic"]
HANG_GUARD_S = 120
# One BLAS thread everywhere: sgemm's rounding depends on its thread blocking, and the
# equality checks compare in-process runs with per-process ranks bit for bit.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def losses(output):
    found = {}
    for m in re.finditer(r"^(?:\[rank 0\] )?step (\d+) loss ([0-9.]+)", output, re.M):
        found[int(m.group(1))] = m.group(2)
    return found


def run_local(args):
    p = subprocess.run([OLTRAIN] + TINY + args, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert p.returncode == 0, p.stdout + p.stderr
    return losses(p.stdout)


def olrun(nproc, args, env_extra=None, expect_ok=True):
    env = dict(os.environ, OLRUN_TRAINER=OLTRAIN, OL_HEARTBEAT_TIMEOUT_MS="1500")
    env.update(env_extra or {})
    cmd = [OLRUN, "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           "--config", os.path.join(ROOT, "configs/gpt_tiny.cfg")] + TINY + args
    start = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD_S, env=env)
    out = p.stdout + p.stderr
    if expect_ok:
        assert p.returncode == 0, out
    return p.returncode, out, time.time() - start


def close(a, b):
    return abs(float(a) - float(b)) <= 1e-5 + 1e-4 * abs(float(b))


def no_stray_trainers(marker):
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if "oltrain" in line and marker in line]


def test_two_and_four_processes_equal_the_in_process_runs(tmp_path):
    steps = ["--steps=4"]
    one = run_local(steps)
    local_dp2 = run_local(steps + ["--dp=2"])
    local_2d = run_local(steps + ["--dp=2", "--tp=2", "--micro_batches=2"])
    timeline = tmp_path / "timeline"
    _, out2, _ = olrun(2, steps + ["--dp=2", "--timeline=%s" % timeline])
    _, out4, _ = olrun(4, steps + ["--dp=2", "--tp=2", "--micro_batches=2"])
    two, four = losses(out2), losses(out4)
    assert sorted(two) == [0, 1, 2, 3], out2
    assert sorted(four) == [0, 1, 2, 3], out4
    assert two == local_dp2, (two, local_dp2)   # same plan, same arithmetic: the same losses
    assert four == local_2d, (four, local_2d)
    for s in range(4):
        assert close(two[s], one[s]) and close(four[s], one[s]), (s, one, two, four)
    assert float(one[3]) < float(one[0])
    assert "TCP transport" in out4
    # --timeline under olrun: one Chrome trace per rank, with the rank's acts and its sends to
    # the other rank (flow starts) matched by receives there (flow ends).
    flows = {}
    for rank in (0, 1):
        path = timeline / ("timeline.rank%d.json" % rank)
        assert path.exists(), out2
        events = json.load(open(path))["traceEvents"]
        assert any(e["ph"] == "X" and e.get("cat") == "COMPUTE" and e["pid"] == rank for e in events)
        flows[rank] = {(e["ph"], e["id"]) for e in events if e["ph"] in ("s", "f")}
    sent = {i for ph, i in flows[0] if ph == "s"}
    assert sent and sent <= {i for ph, i in flows[1] if ph == "f"}


def test_collective_boxing_under_olrun_equals_the_in_process_runs():
    """--boxing=collective: gloo calls between the processes (rendezvous through the control
    plane) give the same losses as the in-process run of the same plan and as the p2p plan."""
    steps = ["--steps=3"]
    local_p2p = run_local(steps + ["--dp=2", "--tp=2"])
    local = run_local(steps + ["--dp=2", "--tp=2", "--boxing=collective"])
    _, out, _ = olrun(4, steps + ["--dp=2", "--tp=2", "--boxing=collective"])
    four = losses(out)
    assert sorted(four) == [0, 1, 2], out
    assert four == local, (four, local)
    for s in range(3):
        assert close(four[s], local_p2p[s]), (s, four, local_p2p)


def test_rank_killed_during_collectives_ends_the_job_naming_it():
    code, out, seconds = olrun(2, ["--steps=50", "--dp=2", "--boxing=collective"],
                               {"OL_FAULT_INJECT": "rank=1,at=step,step=3"}, expect_ok=False)
    assert code != 0, out
    assert re.search(r"\[rank 0\].*rank 1", out), out
    assert seconds < 60, seconds
    assert not no_stray_trainers("gpt_tiny.cfg")


def test_rank_killed_mid_step_ends_the_job_naming_it():
    code, out, seconds = olrun(2, ["--steps=50", "--dp=2"], {"OL_FAULT_INJECT": "rank=1,at=step,step=3"},
                               expect_ok=False)
    assert code != 0, out
    assert "rank 1" in out, out
    # rank 0 reports the dead peer itself (control plane or data link), not just the launcher
    assert re.search(r"\[rank 0\].*rank 1", out), out
    assert seconds < 60, seconds
    assert not no_stray_trainers("gpt_tiny.cfg")


def test_rank_killed_mid_rendezvous_ends_the_job_naming_it():
    code, out, seconds = olrun(2, ["--steps=5", "--dp=2"], {"OL_FAULT_INJECT": "rank=1,at=rendezvous"},
                               expect_ok=False)
    assert code != 0, out
    assert re.search(r"\[rank 0\].*rank 1", out), out
    assert seconds < 60, seconds


def test_resume_after_a_crash_continues_the_uninterrupted_curve(tmp_path):
    common = ["--steps=6", "--dp=2", "--data=synthetic", "--checkpoint_every=2"]
    straight = losses(olrun(2, common + [f"--checkpoint_dir={tmp_path}/a"])[1])
    assert sorted(straight) == list(range(6))
    ckpt = f"--checkpoint_dir={tmp_path}/b"
    code, out, _ = olrun(2, common + [ckpt], {"OL_FAULT_INJECT": "rank=1,at=step,step=5"}, expect_ok=False)
    assert code != 0, out
    assert os.path.exists(f"{tmp_path}/b/step_00000003/COMPLETE"), out
    _, out, _ = olrun(2, common + [ckpt, "--resume"])
    resumed = losses(out)
    assert "resumed from" in out and sorted(resumed) == [4, 5], out
    assert resumed == {s: straight[s] for s in (4, 5)}
    # The step-3 checkpoint (saved by 2 ranks) under another layout, 1 process: resharded on
    # load, the curve continues to float tolerance.
    shutil.copytree(f"{tmp_path}/b/step_00000003", f"{tmp_path}/c/step_00000003")
    _, out, _ = olrun(1, ["--steps=6", "--dp=1", "--data=synthetic", f"--checkpoint_dir={tmp_path}/c", "--resume"])
    one = losses(out)
    assert sorted(one) == [4, 5], out
    for s in (4, 5):
        assert close(one[s], straight[s]), (one, straight)


def test_garbage_and_wrong_token_on_the_master_port_do_not_disturb_the_job():
    port = free_port()
    stop = threading.Event()

    def attack():
        while not stop.is_set():
            for payload in (b"\x00" * 64, b"GET / HTTP/1.0\r\n\r\n", b"\xff" * 4 + b"garbage", os.urandom(256)):
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                        s.sendall(payload)
                except OSError:
                    pass
            time.sleep(0.05)

    thread = threading.Thread(target=attack, daemon=True)
    thread.start()
    env = dict(os.environ, OLRUN_TRAINER=OLTRAIN)
    cmd = [OLRUN, "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
           "--config", os.path.join(ROOT, "configs/gpt_tiny.cfg")] + TINY + ["--steps=4", "--dp=2"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD_S, env=env)
    finally:
        stop.set()
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(losses(p.stdout + p.stderr)) == [0, 1, 2, 3]


def test_layout_that_does_not_fit_the_world_is_refused():
    code, out, _ = olrun(2, ["--steps=2", "--dp=4"], expect_ok=False)
    assert code != 0
    assert "needs 4 ranks, but WORLD_SIZE is 2" in out, out


def test_transport_choice_is_validated_and_rdma_without_a_device_fails_clearly():
    code, out, _ = olrun(2, ["--steps=2", "--dp=2"], env_extra={"OL_TRANSPORT": "bogus"}, expect_ok=False)
    assert code != 0
    assert "OL_TRANSPORT='bogus': expected tcp or ibverbs" in out, out
    if os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband"):
        pytest.skip("this machine has an RDMA device: the no-device path cannot be shown here")
    code, out, seconds = olrun(2, ["--steps=2", "--dp=2"], env_extra={"OL_TRANSPORT": "ibverbs"}, expect_ok=False)
    assert code != 0
    assert "OL_TRANSPORT=ibverbs: no RDMA device found" in out, out
    assert "job FAILED" in out and seconds < 60, out


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))

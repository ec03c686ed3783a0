"""Multi-process training through tools/olrun on loopback (one process per rank, TCP).

Checks: 2- and 4-process runs equal the in-process run of the same layout (the same printed
losses) and the 1-rank run (to float tolerance); a rank killed mid-step or mid-rendezvous ends
the job with a message naming it, within the heartbeat timeout, leaving no process behind;
resume after a crash continues the loss curve of an uninterrupted run exactly, also under
another layout (resharding) to tolerance; garbage and wrong tokens sent to the master port do
not disturb a running job; a layout that does not fit the world is refused; --timeline under
olrun writes one trace per rank whose cross-rank flows match; ranks of one node talk through
shared memory by default and give the same losses as OL_TRANSPORT=tcp, also with two nodes of
two ranks (shared memory within, TCP across); OL_TRANSPORT is validated, and the RDMA
transport without a device fails the job with a clear message. Restarts: with
--max-restarts 1 a rank killed mid-training (first round only) costs one restart and the losses
equal an uninterrupted run's, on one node and on two olrun "nodes"; with 0 the job fails as
before; a stale rank of an earlier restart round is refused at the rendezvous. Preflight: a node
with another checkpoint directory, too little memory or another trainer binary fails the job
before training with one line naming the node (exit 3, not restarted); so does a rank given
another job (another layer count or micro-batch count), naming what differs.
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


def olrun(nproc, args, env_extra=None, expect_ok=True, flags=()):
    env = dict(os.environ, OLRUN_TRAINER=OLTRAIN, OL_HEARTBEAT_TIMEOUT_MS="1500")
    env.update(env_extra or {})
    cmd = [OLRUN, "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1", "--master-port", str(free_port())]
    cmd += list(flags) + ["--config", os.path.join(ROOT, "configs/gpt_tiny.cfg")] + TINY + args
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
    received = {i for ph, i in flows[1] if ph == "f" and i.startswith("0>1:")}
    assert sent and received and received <= sent, (sorted(received - sent)[:5])
    # A message still in flight when the job ended (e.g. a buffer returned after the last step)
    # may reach rank 1 after it wrote its trace: only the last message of a stream
    # (from>to:kind:register) may lack its receive; the stream's earlier ones arrived before it.
    last = {}
    for i in sent:
        stream, seq = i.rsplit(":", 1)
        last[stream] = max(last.get(stream, -1), int(seq))
    for i in sent - received:
        stream, seq = i.rsplit(":", 1)
        assert int(seq) == last[stream], ("not received, and not the last of its stream", i, last[stream])


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
    # gloo over its own TCP instead of ours (OL_GLOO_TRANSPORT; the default is ol): the same bits
    _, out, _ = olrun(4, steps + ["--dp=2", "--tp=2", "--boxing=collective"], {"OL_GLOO_TRANSPORT": "gloo_tcp"})
    assert losses(out) == four, (losses(out), four)
    code, out, _ = olrun(2, ["--steps=2", "--dp=2", "--boxing=collective"], {"OL_GLOO_TRANSPORT": "bogus"},
                         expect_ok=False)
    assert code != 0
    assert "OL_GLOO_TRANSPORT: gloo transport 'bogus' is none of 'ol'" in out, out


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
    assert "OL_TRANSPORT='bogus': expected shm (the default), tcp or ibverbs" in out, out
    if os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband"):
        pytest.skip("this machine has an RDMA device: the no-device path cannot be shown here")
    code, out, seconds = olrun(2, ["--steps=2", "--dp=2"], env_extra={"OL_TRANSPORT": "ibverbs"}, expect_ok=False)
    assert code != 0
    assert "OL_TRANSPORT=ibverbs: no RDMA device found" in out, out
    assert "job FAILED" in out and seconds < 60, out


def olrun_two_nodes(args, env_nodes=({}, {}), flags=(), expect_ok=True, nproc_per_node=1):
    """Two olrun "nodes" on loopback (1 rank each, --nnodes 2), started together like two hosts.
    What differs on node i: env_nodes[i], and args[i] when args is a tuple of two lists.
    Returns [(exit code, output)] per node."""
    port = free_port()
    procs = []
    for node, extra in enumerate(env_nodes):
        env = dict(os.environ, OLRUN_TRAINER=OLTRAIN, OL_HEARTBEAT_TIMEOUT_MS="1500", OL_JOB_TOKEN="two-node-token",
                   OL_CONNECT_TIMEOUT_MS="20000")
        env.update(extra)
        node_args = args[node] if isinstance(args, tuple) else args
        cmd = [OLRUN, "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", str(nproc_per_node), "--master-addr",
               "127.0.0.1", "--master-port", str(port)] + list(flags) + [
               "--config", os.path.join(ROOT, "configs/gpt_tiny.cfg")] + TINY + node_args
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env))
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=HANG_GUARD_S)
        results.append((p.returncode, out))
    if expect_ok:
        assert all(code == 0 for code, _ in results), results
    return results


def test_shared_memory_within_a_node_gives_the_tcp_losses():
    """OL_TRANSPORT=shm (the default): ranks of one node exchange through shared-memory rings
    (comm/shm_transport.h); OL_TRANSPORT=tcp keeps TCP. Same losses bit for bit, as the
    in-process run's. Two olrun "nodes" of two ranks each (dp=2 x tp=2): shared memory within a
    node, TCP across (comm/hybrid_transport.h), the same losses again."""
    steps = ["--steps=3", "--dp=2"]
    local = run_local(steps)
    _, shm_out, _ = olrun(2, steps)
    _, tcp_out, _ = olrun(2, steps, {"OL_TRANSPORT": "tcp"})
    assert "shared-memory transport to ranks 0-1 of this node" in shm_out, shm_out
    assert "), TCP transport" in tcp_out and "shared-memory" not in tcp_out, tcp_out
    assert sorted(losses(shm_out)) == [0, 1, 2], shm_out
    assert losses(shm_out) == losses(tcp_out) == local, (shm_out, tcp_out, local)
    layout = ["--steps=3", "--dp=2", "--tp=2"]
    local_2d = run_local(layout)
    node0, node1 = olrun_two_nodes(layout, nproc_per_node=2)
    assert "shared-memory transport to ranks 0-1 of this node, TCP transport to the others" in node0[1], node0[1]
    assert "all 2 ranks of node 1 exited 0" in node1[1], node1[1]  # only rank 0 prints the layout
    assert losses(node0[1]) == local_2d, (node0[1], local_2d)


CURVE = ["--steps=6", "--dp=2", "--checkpoint_every=2"]
KILL_RANK1_AT_STEP5_ONCE = {"OL_FAULT_INJECT": "rank=1,at=step,step=5,round=0"}


def test_max_restarts_survives_a_killed_rank_with_the_uninterrupted_losses(tmp_path):
    straight = losses(olrun(2, CURVE + [f"--checkpoint_dir={tmp_path}/a"])[1])
    assert sorted(straight) == list(range(6))
    code, out, seconds = olrun(2, CURVE + [f"--checkpoint_dir={tmp_path}/b"], KILL_RANK1_AT_STEP5_ONCE,
                               flags=["--max-restarts", "1"])
    assert code == 0, out
    assert "olrun: restart 1 of 1: rank 1 failed (killed by SIGKILL" in out, out
    assert "resumed from %s/b/step_00000003: continuing at step 4" % tmp_path in out, out
    assert "(round 1: after 1 restart(s))" in out
    assert losses(out) == straight, (losses(out), straight)   # steps 4, 5 of round 1 included
    # --max-restarts 0 (the default): the first failure ends the job, naming the rank.
    code, out, _ = olrun(2, CURVE + [f"--checkpoint_dir={tmp_path}/c"], KILL_RANK1_AT_STEP5_ONCE,
                         flags=["--max-restarts", "0"], expect_ok=False)
    assert code != 0 and "olrun: job FAILED" in out and "first failure: rank 1 (killed by SIGKILL)" in out, out
    assert "olrun: restart" not in out


def test_two_nodes_restart_together_from_the_checkpoint(tmp_path):
    straight = losses(olrun(2, CURVE + [f"--checkpoint_dir={tmp_path}/a"])[1])
    node0, node1 = olrun_two_nodes(CURVE + [f"--checkpoint_dir={tmp_path}/b"],
                                   (KILL_RANK1_AT_STEP5_ONCE, KILL_RANK1_AT_STEP5_ONCE), flags=["--max-restarts", "1"])
    assert "olrun: restart 1 of 1: rank 1 failed (killed by SIGKILL" in node1[1], node1[1]
    # Node 0's rank 0 fails naming rank 1: by the control plane's notice ("rank 1 (host ...") or,
    # when the data link's EOF arrives first, "link to rank 1 closed" (both seen; a race).
    assert "olrun: restart 1 of 1: rank 0 failed" in node0[1], node0[1]
    assert "rank 1 (host" in node0[1] or "link to rank 1 closed" in node0[1], node0[1]
    assert losses(node0[1]) == straight, (node0[1], straight)


def test_a_stale_rank_of_an_earlier_round_is_refused(tmp_path):
    """Rank 0 of restart round 1 serves the job; a rank 1 still of round 0 is refused at the
    rendezvous (naming both rounds) and the job goes on with rank 1 of round 1."""
    port = free_port()
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OL_JOB_TOKEN="t",
               OL_HEARTBEAT_TIMEOUT_MS="1500")
    args = [OLTRAIN, "--config", os.path.join(ROOT, "configs/gpt_tiny.cfg")] + TINY + ["--steps=2", "--dp=2"]
    run = lambda rank, round_: subprocess.Popen(args, env=dict(env, RANK=str(rank), OL_RESTART_ROUND=str(round_)),
                                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    master = run(0, 1)
    stale_out, _ = run(1, 0).communicate(timeout=HANG_GUARD_S)
    assert "refused rank 1" in stale_out and "the rank is of restart round 0 but the job is at round 1" in stale_out, \
        stale_out
    current_out, _ = run(1, 1).communicate(timeout=HANG_GUARD_S)
    master_out, _ = master.communicate(timeout=HANG_GUARD_S)
    assert master.returncode == 0, master_out + current_out
    assert sorted(losses(master_out)) == [0, 1], master_out


def test_preflight_failures_name_the_node_and_are_not_restarted(tmp_path):
    # Node 1 sees another checkpoint directory (as with a local disk instead of a shared one).
    results = olrun_two_nodes((["--steps=2", "--dp=2", f"--checkpoint_dir={tmp_path}/shared"],
                               ["--steps=2", "--dp=2", f"--checkpoint_dir={tmp_path}/local"]),
                              flags=["--max-restarts", "1"], expect_ok=False)
    for code, out in results:
        assert code == 3, out
        assert ("preflight: node 1 (host %s, rank 1): the checkpoint directory %s/local is not shared with node 0: "
                "rank 0's marker %s/local/.olpreflight-" % (socket.gethostname(), tmp_path, tmp_path)) in out, out
        assert "olrun: not restarting (rank %d exited 3: its preflight checks failed" % results.index((code, out)) in out
        assert "step 0" not in out
    assert os.listdir(f"{tmp_path}/shared") == []   # rank 0 removed its marker
    # Node 1 has too little memory for its rank's plan.
    for code, out in olrun_two_nodes(["--steps=2", "--dp=2"], ({}, {"OL_MEM_AVAILABLE_BYTES": "1000"}),
                                     expect_ok=False):
        assert code == 3 and re.search(r"preflight: node 1 \(host [^,]+, rank 1\): the planned memory of its 1 "
                                       r"rank\(s\) \(ranks 1..1\), [0-9.]+ MiB, exceeds the memory available on "
                                       r"the node, 0.0 MiB \(OL_MEM_AVAILABLE_BYTES\)", out), out
    # Node 1 runs another build of the trainer.
    other = tmp_path / "oltrain_other"
    shutil.copy(OLTRAIN, other)
    with open(other, "ab") as f:
        f.write(b"\0")
    for code, out in olrun_two_nodes(["--steps=2", "--dp=2"], ({}, {"OLRUN_TRAINER": str(other)}), expect_ok=False):
        assert code == 3 and "preflight: node 1 (host" in out and "runs another trainer binary than rank 0" in out, out
    # One node: a checkpoint directory that cannot be created.
    (tmp_path / "file").write_text("x")
    code, out, _ = olrun(2, ["--steps=2", "--dp=2", f"--checkpoint_dir={tmp_path}/file/ckpt"], expect_ok=False)
    assert code == 3 and "preflight: node 0 (host" in out and "cannot create the checkpoint directory" in out, out


def test_a_rank_given_another_job_is_refused_naming_what_differs():
    # Each process compiles only its own rank's plan; the ranks compare the job's agreement (the
    # global decisions) before any data moves, and a mismatch names what differs.
    for other, named in ((["--n_layer=3"], "ops "), (["--micro_batches=2"], "pieces_per_step 2 vs 1")):
        results = olrun_two_nodes((["--steps=2", "--dp=2"], ["--steps=2", "--dp=2"] + other), expect_ok=False)
        for code, out in results:
            assert code != 0 and "step 0 loss" not in out, out
        code, out = results[1]
        assert code == 3 and "rank 1 compiled another job than rank 0: " in out and named in out, out


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))

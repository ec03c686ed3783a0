"""Tests of tools/olrun with tiny Python ranks written to tmp dirs.

Checks: the rank/world variables of a 2 nodes x 2 processes job (both node launches); the
token (explicit, from $OL_JOB_TOKEN, random but shared); [rank R] prefixes on stdout and
stderr with whole lines only, and raw per-rank logs; fail-fast (a rank exiting 3 stops a
sleeping peer, the summary names it, olrun exits 3); a rank killed by SIGKILL reported by
signal; SIGKILL after the grace period for a rank ignoring SIGTERM; SIGTERM / SIGINT to olrun
forwarded; --timeout-s; no process left behind (ranks and their children, also when olrun
itself is SIGKILLed); bad flags; --config with a fake trainer from $OLRUN_TRAINER; --max-restarts
(every rank started again with OL_RESTART_ROUND, the restart logged naming the failed rank and
its last line, bounded, no restart after a preflight failure (exit 3) or bad usage (exit 2)).
Timeouts here are hang guards only.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
OLRUN = next(p for p in (os.path.join(os.getcwd(), "tools/olrun"), os.path.join(HERE, "..", "olrun"))
             if os.path.exists(p))
LAUNCHER_SOURCE = os.path.join(os.path.dirname(OLRUN), "launcher", "olrun.py")
HANG_GUARD_S = 60


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write(directory, name, body, executable=False):
    path = os.path.join(str(directory), name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(body).lstrip())
    if executable:
        os.chmod(path, 0o755)
    return path


def run(args, env_extra=None, olrun=OLRUN, **kwargs):
    env = dict(os.environ)
    env.pop("OL_JOB_TOKEN", None)
    env.pop("OLRUN_TRAINER", None)
    env.update(env_extra or {})
    return subprocess.run([olrun] + args, capture_output=True, text=True, timeout=HANG_GUARD_S, env=env, **kwargs)


def start(args, **kwargs):
    env = dict(os.environ)
    env.pop("OL_JOB_TOKEN", None)
    return subprocess.Popen([OLRUN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            **kwargs)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"   # a zombie is dead, only not yet reaped by its (new) parent
    except (FileNotFoundError, IndexError):
        return False


def still_alive_after_guard(pids, guard_s=20):
    """The pids still running once they all ended or guard_s passed (a hang guard, not a timing check)."""
    deadline = time.monotonic() + guard_s
    while time.monotonic() < deadline:
        living = [p for p in pids if alive(p)]
        if not living:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def wait_for_files(paths, process=None):
    deadline = time.monotonic() + HANG_GUARD_S
    while not all(os.path.exists(p) and os.path.getsize(p) > 0 for p in paths):
        assert time.monotonic() < deadline, f"hang guard: {paths} never appeared"
        if process is not None and process.poll() is not None:
            raise AssertionError(f"olrun ended early: {process.communicate()}")
        time.sleep(0.05)


def read_pids(paths):
    return [int(open(p).read().split()[0]) for p in paths]


# A rank that records its pid (and a grandchild's) in DIR, then does what ACTION_<RANK> says.
RANK_SCRIPT = """
    import os, signal, subprocess, sys, time
    rank = int(os.environ["RANK"])
    directory = sys.argv[1]
    action = os.environ.get(f"ACTION_{rank}", "sleep")
    child = subprocess.Popen(["sleep", "600"]) if "grandchild" in action else None
    if "ignore_term" in action:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "record_signal" in action:
        def on_signal(signum, frame):
            with open(os.path.join(directory, f"signal_{rank}"), "w") as f:
                f.write(signal.Signals(signum).name)
            sys.exit(0)
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    pids = f"{os.getpid()} {child.pid if child else ''}"
    with open(os.path.join(directory, f"pid_{rank}.tmp"), "w") as f:
        f.write(pids)
    os.rename(os.path.join(directory, f"pid_{rank}.tmp"), os.path.join(directory, f"pid_{rank}"))
    print(f"ready {rank}", flush=True)
    if "after_0" in action:  # wait until rank 0 is set up
        while not os.path.exists(os.path.join(directory, "pid_0")):
            time.sleep(0.01)
    if "exit3" in action:
        sys.exit(3)
    if "exit0" in action:
        sys.exit(0)
    if "sigkill" in action:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(600)
"""


def pids_of(directory, ranks):
    paths = [os.path.join(str(directory), f"pid_{r}") for r in ranks]
    pids = []
    for line in (open(p).read().split() for p in paths):
        pids.extend(int(x) for x in line)
    return pids


def test_environment_of_two_nodes_by_two_processes(tmp_path):
    script = write(tmp_path, "env.py", """
        import json, os, sys
        names = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR",
                 "MASTER_PORT", "OL_JOB_TOKEN"]
        print("ENV " + json.dumps({"env": {n: os.environ.get(n) for n in names}, "argv": sys.argv[1:]}))
    """)
    port = free_port()
    seen = {}
    for node in (0, 1):
        p = run(["--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                 "--master-port", str(port), "--job-token", "tok-123", script, "-x", "--flag=1", "plain"])
        assert p.returncode == 0, p.stdout + p.stderr
        for m in re.finditer(r"^\[rank (\d+)\] ENV (.*)$", p.stdout, re.M):
            seen[int(m.group(1))] = (node, json.loads(m.group(2)))
    assert sorted(seen) == [0, 1, 2, 3], seen
    for rank, (node, record) in seen.items():
        assert record["argv"] == ["-x", "--flag=1", "plain"]
        assert record["env"] == {
            "RANK": str(rank), "WORLD_SIZE": "4", "LOCAL_RANK": str(rank % 2), "LOCAL_WORLD_SIZE": "2",
            "NODE_RANK": str(node), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OL_JOB_TOKEN": "tok-123",
        }, (rank, record)
    assert seen[2][0] == 1 and seen[3][0] == 1


def test_job_token_random_when_not_given_and_from_environment(tmp_path):
    script = write(tmp_path, "token.py", "import os; print('TOKEN', os.environ['OL_JOB_TOKEN'], os.environ['MASTER_PORT'])\n")

    def tokens(env_extra=None):
        p = run(["--nproc-per-node", "3", script], env_extra)
        assert p.returncode == 0, p.stdout + p.stderr
        found = re.findall(r"^\[rank \d\] TOKEN (\S+) (\d+)$", p.stdout, re.M)
        assert len(found) == 3, p.stdout
        assert len(set(found)) == 1, found     # every rank: the same token and (defaulted) port
        assert 1 <= int(found[0][1]) <= 65535
        return found[0][0]

    first, second = tokens(), tokens()
    assert len(first) >= 16 and first != second
    assert tokens({"OL_JOB_TOKEN": "from-env"}) == "from-env"


def test_prefixes_whole_lines_and_writes_raw_logs(tmp_path):
    script = write(tmp_path, "talk.py", """
        import os, sys
        rank = int(os.environ["RANK"])
        letter = "abc"[rank]
        for i in range(200):
            sys.stdout.write(letter * 3000 + f" {i}\\n")
        sys.stderr.write(f"warning from {rank}\\n")
        sys.stdout.write("no newline at the end")
    """)
    logs = tmp_path / "logs"
    p = run(["--nproc-per-node", "3", "--log-dir", str(logs), script])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 3 * 201, len(lines)
    counts = {0: 0, 1: 0, 2: 0}
    for line in lines:
        m = re.fullmatch(r"\[rank (\d)\] (?:([abc])\2{2999} (\d+)|no newline at the end)", line)
        assert m, line[:100]
        rank = int(m.group(1))
        if m.group(2):
            assert m.group(2) == "abc"[rank] and int(m.group(3)) == counts[rank]  # in order, never mixed
            counts[rank] += 1
    assert counts == {0: 200, 1: 200, 2: 200}
    for rank in range(3):
        assert f"[rank {rank}] warning from {rank}\n" in p.stderr
        raw = (logs / f"rank_{rank}.log").read_text()
        assert not raw.startswith("[rank")
        assert raw.count("abc"[rank] * 3000) == 200 and f"warning from {rank}\n" in raw
        # raw: whole lines of both streams as they came, nothing added to the unfinished last one
        assert raw.count("no newline at the end") == 1 and "no newline at the end\n" not in raw
    assert re.search(r"olrun: all 3 ranks of node 0 exited 0", p.stderr), p.stderr


def test_a_very_long_line_is_forwarded_in_prefixed_pieces(tmp_path):
    script = write(tmp_path, "long.py", "print('x' * 150000)\n")
    p = run(["--nproc-per-node", "1", "--log-dir", str(tmp_path / "logs"), script])
    assert p.returncode == 0, p.stderr
    pieces = p.stdout.splitlines()
    assert len(pieces) == 3 and all(re.fullmatch(r"\[rank 0\] x+", piece) for piece in pieces), [x[:20] for x in pieces]
    assert sum(len(piece) - len("[rank 0] ") for piece in pieces) == 150000
    assert (tmp_path / "logs" / "rank_0.log").read_text() == "x" * 150000 + "\n"


def test_failing_rank_stops_a_sleeping_peer_and_is_named(tmp_path):
    script = write(tmp_path, "rank.py", RANK_SCRIPT)
    p = run(["--nproc-per-node", "2", script, str(tmp_path)], {"ACTION_1": "after_0 exit3"})
    assert p.returncode == 3, p.stdout + p.stderr
    summary = p.stderr.strip().splitlines()[-1]
    assert "FAILED" in summary and "first failure: rank 1 (exit code 3)" in summary, summary
    assert "stopped by olrun: rank 0 (killed by SIGTERM)" in summary, summary
    assert still_alive_after_guard(pids_of(tmp_path, [0, 1])) == []


def test_rank_killed_by_sigkill_is_reported_by_signal(tmp_path):
    script = write(tmp_path, "rank.py", RANK_SCRIPT)
    p = run(["--nproc-per-node", "3", script, str(tmp_path)], {"ACTION_2": "after_0 sigkill"})
    assert p.returncode == 128 + signal.SIGKILL, p.stdout + p.stderr
    assert "first failure: rank 2 (killed by SIGKILL)" in p.stderr, p.stderr
    assert "rank 0 (killed by SIGTERM)" in p.stderr and "rank 1 (killed by SIGTERM)" in p.stderr, p.stderr


def test_rank_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path):
    script = write(tmp_path, "rank.py", RANK_SCRIPT)
    p = run(["--nproc-per-node", "2", "--grace-s", "0.5", script, str(tmp_path)],
            {"ACTION_0": "ignore_term", "ACTION_1": "after_0 exit3"})
    assert p.returncode == 3, p.stdout + p.stderr
    assert "stopped by olrun: rank 0 (killed by SIGKILL)" in p.stderr, p.stderr


def test_no_process_left_behind_on_failure_or_success(tmp_path):
    script = write(tmp_path, "rank.py", RANK_SCRIPT)
    failed = tmp_path / "failed"
    failed.mkdir()
    p = run(["--nproc-per-node", "2", script, str(failed)],
            {"ACTION_0": "grandchild", "ACTION_1": "grandchild after_0 exit3"})
    assert p.returncode == 3, p.stdout + p.stderr
    pids = pids_of(failed, [0, 1])
    assert len(pids) == 4   # 2 ranks, 2 grandchildren
    assert still_alive_after_guard(pids) == []
    # A rank that exits 0 but leaves a child running: its process group goes with the job.
    succeeded = tmp_path / "succeeded"
    succeeded.mkdir()
    p = run(["--nproc-per-node", "1", script, str(succeeded)], {"ACTION_0": "grandchild exit0"})
    assert p.returncode == 0, p.stdout + p.stderr
    pids = pids_of(succeeded, [0])
    assert len(pids) == 2 and still_alive_after_guard(pids) == []


def test_ranks_die_when_olrun_is_sigkilled(tmp_path):
    script = write(tmp_path, "rank.py", RANK_SCRIPT)
    process = start(["--nproc-per-node", "2", script, str(tmp_path)])
    try:
        wait_for_files([tmp_path / "pid_0", tmp_path / "pid_1"], process)
        ranks = pids_of(tmp_path, [0, 1])
        assert all(alive(p) for p in ranks)
        process.kill()   # no chance to clean up: PR_SET_PDEATHSIG must do it
        process.communicate(timeout=HANG_GUARD_S)
        assert still_alive_after_guard(ranks) == []
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_olrun_is_forwarded_and_cleans_up(tmp_path, signum):
    script = write(tmp_path, "rank.py", RANK_SCRIPT)
    process = start(["--nproc-per-node", "2", script, str(tmp_path)])
    try:
        wait_for_files([tmp_path / "pid_0", tmp_path / "pid_1"], process)
        ranks = pids_of(tmp_path, [0, 1])
        process.send_signal(signum)
        out, err = process.communicate(timeout=HANG_GUARD_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signum, (out, err)
    assert f"olrun got {signal.Signals(signum).name}" in err, err
    assert still_alive_after_guard(ranks) == []


def test_signal_reaches_the_ranks_as_sent(tmp_path):
    script = write(tmp_path, "rank.py", RANK_SCRIPT)
    env = dict(os.environ, ACTION_0="record_signal", ACTION_1="record_signal")
    env.pop("OL_JOB_TOKEN", None)
    process = subprocess.Popen([OLRUN, "--nproc-per-node", "2", script, str(tmp_path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for_files([tmp_path / "pid_0", tmp_path / "pid_1"], process)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=HANG_GUARD_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, out + err
    for rank in (0, 1):
        assert (tmp_path / f"signal_{rank}").read_text() == "SIGINT"


def test_timeout_stops_the_job(tmp_path):
    script = write(tmp_path, "rank.py", RANK_SCRIPT)
    p = run(["--nproc-per-node", "2", "--timeout-s", "1", script, str(tmp_path)])
    assert p.returncode == 124, p.stdout + p.stderr
    assert "exceeded --timeout-s 1" in p.stderr, p.stderr
    assert still_alive_after_guard(pids_of(tmp_path, [0, 1])) == []


def test_config_runs_the_trainer_with_the_config_and_extra_arguments(tmp_path):
    trainer = write(tmp_path, "fake_trainer", """
        #!/usr/bin/python3
        import json, os, sys
        print("TRAINER", os.environ["RANK"], json.dumps(sys.argv[1:]))
    """, executable=True)
    config = write(tmp_path, "job.cfg", "[model]\nkind = mlp\n")
    for flag in (["--config", config], [f"--config={config}"]):
        p = run(["--nproc-per-node", "2", "--master-port", str(free_port())] + flag + ["--steps=3", "--dp", "2", "x"],
                {"OLRUN_TRAINER": trainer})
        assert p.returncode == 0, p.stdout + p.stderr
        found = dict(re.findall(r"^\[rank (\d)\] TRAINER \d (.*)$", p.stdout, re.M))
        assert sorted(found) == ["0", "1"], p.stdout
        for argv in found.values():
            assert json.loads(argv) == [f"--config={config}", "--steps=3", "--dp", "2", "x"]


def test_config_without_a_built_trainer_says_how_to_build_it(tmp_path):
    # A copy of the launcher in an empty tree: no bazel-bin/tools/train/oltrain above it.
    launcher = tmp_path / "tree" / "tools" / "launcher"
    launcher.mkdir(parents=True)
    shutil.copy(LAUNCHER_SOURCE, launcher / "olrun.py")
    shutil.copy(os.path.join(os.path.dirname(LAUNCHER_SOURCE), "slurm.py"), launcher / "slurm.py")
    config = write(tmp_path, "job.cfg", "[model]\n")
    p = run(["--nproc-per-node", "1", "--config", config], olrun=str(launcher / "olrun.py"))
    assert p.returncode == 2 and "tools/bazel.sh build -c opt //tools/train:oltrain" in p.stderr, p.stderr
    p = run(["--nproc-per-node", "1", "--config", config], {"OLRUN_TRAINER": str(tmp_path / "missing")})
    assert p.returncode == 2 and "OLRUN_TRAINER" in p.stderr and "not an executable" in p.stderr, p.stderr


@pytest.mark.parametrize("args, message", [
    (["--nproc-per-node", "0", "S"], "--nproc-per-node 0: must be in [1, 1024]"),
    (["--nproc-per-node", "5000", "S"], "--nproc-per-node 5000: must be in [1, 1024]"),
    (["--nproc-per-node", "two", "S"], "--nproc-per-node: invalid int value"),
    (["S"], "the following arguments are required: --nproc-per-node"),
    (["--nnodes", "0", "--nproc-per-node", "1", "S"], "--nnodes 0: must be >= 1"),
    (["--nnodes", "2", "--node-rank", "2", "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", "9",
      "--job-token", "t", "S"], "--node-rank 2: must be in [0, 1]"),
    (["--node-rank", "-1", "--nproc-per-node", "1", "S"], "--node-rank -1"),
    (["--nproc-per-node", "1", "--master-port", "0", "S"], "--master-port 0: must be in 1..65535"),
    (["--nproc-per-node", "1", "--master-port", "65536", "S"], "--master-port 65536: must be in 1..65535"),
    (["--nproc-per-node", "1", "--master-addr", "", "S"], "--master-addr '': must be a non-empty"),
    (["--nnodes", "2", "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", "9", "S"],
     "--job-token (or $OL_JOB_TOKEN) is required when --nnodes > 1"),
    (["--nnodes", "2", "--nproc-per-node", "1", "--job-token", "t", "S"], "--master-addr and --master-port are required"),
    (["--nproc-per-node", "1", "--timeout-s", "-1", "S"], "--timeout-s -1.0: must be > 0"),
    (["--nproc-per-node", "1", "--bogus", "S"], "unrecognized arguments: --bogus"),
    (["--nproc-per-node", "1"], "nothing to run"),
    (["--nproc-per-node", "1", "missing_script.py"], "script missing_script.py: no such file"),
    (["--nproc-per-node", "1", "--config", "missing.cfg"], "--config missing.cfg: no such file"),
    (["--nproc-per-node", "1", "--config"], "--config: expected one argument"),
    (["--nproc-per-node", "1", "--log-dir", "S/logs", "S"], "/logs: cannot create it (Not a directory)"),
])
def test_bad_flags_are_refused_with_a_clear_message(tmp_path, args, message):
    script = write(tmp_path, "ok.py", "print('must not run')\n")
    args = [a.replace("S", script, 1) if a.startswith("S") else a for a in args]
    p = run(args, cwd=str(tmp_path))
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr, p.stderr
    assert "must not run" not in p.stdout
    assert os.listdir(tmp_path) == ["ok.py"]   # nothing created (e.g. no log dir) before the checks pass


def test_help_documents_every_flag_and_variable():
    p = run(["--help"])
    assert p.returncode == 0
    for word in ("--nnodes", "--node-rank", "--nproc-per-node", "--master-addr", "--master-port", "--job-token",
                 "--log-dir", "--timeout-s", "--config", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                 "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "OL_JOB_TOKEN", "OLRUN_TRAINER", "examples:",
                 "--max-restarts", "OL_RESTART_ROUND", "--no-slurm", "SLURM_JOB_NODELIST", "srun"):
        assert word in p.stdout, word


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_peers_get_report_time_before_being_stopped(tmp_path):
    # Rank 1 fails at once; rank 0 "notices" a moment later and exits with its own report, as
    # oltrain ranks do when the control plane tells them a peer died. Within --report-s olrun
    # lets it, so its report reaches the output and it is not counted as stopped by olrun.
    script = write(tmp_path, "r.py", """
        import os, sys, time
        if os.environ["RANK"] == "1":
            sys.exit(3)
        time.sleep(0.5)
        print("rank 0: peer rank 1 died", flush=True)
        sys.exit(1)
        """)
    p = run(["--nproc-per-node", "2", "--report-s", "20", script])
    assert p.returncode == 3, p.stdout + p.stderr
    assert "[rank 0] rank 0: peer rank 1 died" in p.stdout, p.stdout + p.stderr
    assert "first failure: rank 1" in p.stderr
    assert "stopped by olrun" not in p.stderr, p.stderr
    bad = run(["--nproc-per-node", "2", "--report-s", "-1", script])
    assert bad.returncode == 2 and "--report-s" in bad.stderr


# A rank that fails in the rounds listed in FAIL_ROUNDS (OL_RESTART_ROUND) with exit FAIL_CODE.
RESTART_SCRIPT = """
    import os, sys
    rank, round_ = os.environ["RANK"], os.environ["OL_RESTART_ROUND"]
    print(f"round {round_} of {os.environ['OL_MAX_RESTARTS']}", flush=True)
    if rank == "1" and round_ in os.environ["FAIL_ROUNDS"].split(","):
        print(f"rank 1 breaks in round {round_}", file=sys.stderr, flush=True)
        sys.exit(int(os.environ.get("FAIL_CODE", "7")))
    """


def test_max_restarts_starts_every_rank_again_naming_the_failed_rank(tmp_path):
    script = write(tmp_path, "r.py", RESTART_SCRIPT)
    logs = tmp_path / "logs"
    p = run(["--nproc-per-node", "2", "--max-restarts", "2", "--log-dir", str(logs), script], {"FAIL_ROUNDS": "0,1"})
    assert p.returncode == 0, p.stdout + p.stderr
    for r in (0, 1, 2):
        assert f"[rank 0] round {r} of 2" in p.stdout and f"[rank 1] round {r} of 2" in p.stdout
    assert ("olrun: restart 1 of 2: rank 1 failed (exit code 7; its last line: rank 1 breaks in round 0); "
            "starting every rank of node 0 again as round 1") in p.stderr, p.stderr
    assert "olrun: restart 2 of 2: rank 1 failed (exit code 7; its last line: rank 1 breaks in round 1)" in p.stderr
    assert "olrun: round 0 of the job FAILED" in p.stderr
    assert "exited 0 (ranks 0-1 of world 2)" in p.stderr and "(round 2: after 2 restart(s))" in p.stderr
    log = (logs / "rank_1.log").read_text()   # every round's output, rounds marked
    assert "rank 1 breaks in round 0" in log and "=== olrun: restart round 2 ===\nround 2 of 2" in log


def test_restarts_are_bounded_and_zero_fails_as_before(tmp_path):
    script = write(tmp_path, "r.py", RESTART_SCRIPT)
    p = run(["--nproc-per-node", "2", "--max-restarts", "1", script], {"FAIL_ROUNDS": "0,1,2"})
    assert p.returncode == 7, p.stdout + p.stderr
    assert "restart 1 of 1" in p.stderr and "restart 2" not in p.stderr
    assert ("olrun: job FAILED for good: round 1 failed (rank 1 failed (exit code 7; its last line: rank 1 breaks "
            "in round 1)) and all 1 restart(s) of --max-restarts are used up") in p.stderr, p.stderr
    p = run(["--nproc-per-node", "2", script], {"FAIL_ROUNDS": "0"})
    assert p.returncode == 7 and "olrun: job FAILED after" in p.stderr and "restart" not in p.stderr


def test_a_preflight_failure_or_bad_usage_is_not_restarted(tmp_path):
    script = write(tmp_path, "r.py", RESTART_SCRIPT)
    p = run(["--nproc-per-node", "2", "--max-restarts", "3", script], {"FAIL_ROUNDS": "0", "FAIL_CODE": "3"})
    assert p.returncode == 3, p.stdout + p.stderr
    assert ("olrun: not restarting (rank 1 exited 3: its preflight checks failed; restarting cannot fix that); "
            "job FAILED") in p.stderr, p.stderr
    assert "round 1" not in p.stdout
    p = run(["--nproc-per-node", "2", "--max-restarts", "3", script], {"FAIL_ROUNDS": "0", "FAIL_CODE": "2"})
    assert p.returncode == 2 and "olrun: not restarting (rank 1 exited 2: bad usage;" in p.stderr, p.stderr
    bad = run(["--nproc-per-node", "1", "--max-restarts", "-1", script])
    assert bad.returncode == 2 and "--max-restarts -1: must be >= 0" in bad.stderr

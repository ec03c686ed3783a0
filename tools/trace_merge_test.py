"""Tests of tools/trace_merge.py.

Synthetic rank files check the merge itself (metadata first, then events by timestamp, every
event kept, flows paired, bare-list inputs, directories) and that bad inputs are named with a
clear message and exit status 2 without writing anything: malformed JSON (line and column),
a non-trace object, an event without "ph"/"pid", the same pid in two files. The real files of a
2-rank run (oneflow_like/actor:timeline_testbin, written by WriteRankTimeline) must merge with
every remote send's flow paired to its receive on the other rank.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.getcwd()  # the runfiles root under bazel test; the checkout when run by hand
MERGE = os.path.join(ROOT, "tools", "trace_merge.py")
TESTBIN = os.path.join(ROOT, "oneflow_like", "actor", "timeline_testbin")
HANG_GUARD_S = 60


def run_merge(*args):
    return subprocess.run([sys.executable, MERGE, *args], capture_output=True, text=True, timeout=HANG_GUARD_S)


def write(path, data):
    with open(path, "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def rank_trace(rank, times, flow=None):
    events = [{"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"rank {rank}"}}]
    for t in times:
        events.append({"name": f"act{t}", "ph": "X", "ts": t, "dur": 1, "pid": rank, "tid": 0})
    if flow is not None:
        ph, ts, flow_id = flow
        events.append({"name": "message", "cat": "transfer", "ph": ph, "id": flow_id, "ts": ts, "pid": rank, "tid": 0})
    return {"traceEvents": events}


def test_merges_ranks_by_time_with_metadata_first(tmp_path):
    a = write(tmp_path / "r0.json", rank_trace(0, [5, 30, 10], flow=("s", 5, "0>1:1:7:0")))
    b = write(tmp_path / "r1.json", rank_trace(1, [1, 20], flow=("f", 21, "0>1:1:7:0")))
    out = tmp_path / "merged.json"
    result = run_merge("-o", str(out), a, b)
    assert result.returncode == 0, result.stderr
    assert "1 paired flows" in result.stderr and "warning" not in result.stderr
    events = json.loads(out.read_text())["traceEvents"]
    assert len(events) == 2 + 5 + 2
    assert [e["ph"] for e in events[:2]] == ["M", "M"]
    timed = events[2:]
    assert [e["ts"] for e in timed] == sorted(e["ts"] for e in timed)
    assert {e["pid"] for e in timed} == {0, 1}
    # Equal timestamps keep file order (r0's "s" at 5 was written after its act at 5).
    at_five = [e["ph"] for e in timed if e["ts"] == 5]
    assert at_five == ["X", "s"]


def test_unpaired_flows_are_a_warning_not_an_error(tmp_path):
    a = write(tmp_path / "r0.json", rank_trace(0, [1], flow=("s", 1, "0>1:1:7:0")))
    out = tmp_path / "merged.json"
    result = run_merge("-o", str(out), a)
    assert result.returncode == 0, result.stderr
    assert "1 flow starts (sends) and 0 flow ends (receives) have no partner" in result.stderr
    assert out.exists()


def test_bare_lists_and_directories_are_inputs(tmp_path):
    d = tmp_path / "traces"
    d.mkdir()
    write(d / "a.json", rank_trace(0, [2])["traceEvents"])  # a bare list
    write(d / "b.json", rank_trace(1, [1]))
    write(d / "notes.txt", "not a trace, not *.json")
    out = tmp_path / "merged.json"
    result = run_merge("-o", str(out), str(d))
    assert result.returncode == 0, result.stderr
    assert [e["name"] for e in json.loads(out.read_text())["traceEvents"]][2:] == ["act1", "act2"]


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"traceEvents": [{"ph": "X", "pid": 0, "ts": 1},', "invalid JSON at line 1 column"),
        ("\x89PNG garbage \xff", "invalid JSON"),
        ('{"events": []}', 'without a "traceEvents" list'),
        ('{"traceEvents": {"ph": "X"}}', '"traceEvents" is a dict'),
        ('{"traceEvents": [{"ph": "X", "pid": 0, "ts": 1}, 7]}', "event 1 is a int"),
        ('{"traceEvents": [{"name": "a", "pid": 0, "ts": 1}]}', 'event 0 has no string "ph"'),
        ('{"traceEvents": [{"name": "a", "ph": "X", "pid": "0", "ts": 1}]}', 'event 0 ("a") has no integer "pid"'),
        ('{"traceEvents": [{"name": "a", "ph": "X", "pid": 0}]}', 'event 0 ("a") has no numeric "ts"'),
    ],
)
def test_malformed_file_is_named_and_nothing_is_written(tmp_path, content, message):
    good = write(tmp_path / "r0.json", rank_trace(0, [1]))
    bad = write(tmp_path / "r1.json", content)
    out = tmp_path / "merged.json"
    result = run_merge("-o", str(out), good, bad)
    assert result.returncode == 2
    assert result.stderr.startswith(f"trace_merge: {bad}: "), result.stderr
    assert message in result.stderr, result.stderr
    assert not out.exists()
    assert [n for n in os.listdir(tmp_path) if n.startswith(".trace_merge")] == []


def test_same_pid_in_two_files_and_missing_files_are_errors(tmp_path):
    a = write(tmp_path / "a.json", rank_trace(0, [1]))
    b = write(tmp_path / "b.json", rank_trace(0, [2]))
    out = tmp_path / "merged.json"
    result = run_merge("-o", str(out), a, b)
    assert result.returncode == 2
    assert f"{b}: pid 0 also appears in {a}" in result.stderr
    missing = run_merge("-o", str(out), a, str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "nope.json: cannot read" in missing.stderr
    assert run_merge("-o", a, a).returncode == 2  # would overwrite an input
    assert not out.exists()


def test_real_rank_files_merge_with_every_transfer_paired(tmp_path):
    produced = subprocess.run([TESTBIN, str(tmp_path)], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert produced.returncode == 0, produced.stderr
    files = [str(tmp_path / f"trace.rank{r}.json") for r in (0, 1)]
    for rank, path in enumerate(files):  # each file alone is a valid trace of one pid
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        assert {e["pid"] for e in events} == {rank}
    out = tmp_path / "merged.json"
    result = run_merge("-o", str(out), *files)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr, result.stderr
    events = json.loads(out.read_text())["traceEvents"]
    # Acts per rank and step: x.source, x.transfer, x.concat, relu, y.sink.
    acts = [e for e in events if e["ph"] == "X" and "firing" in e.get("args", {})]
    assert len(acts) == 2 * 2 * 5
    # Each step each rank sends x ("ready") and gets it back ("returned"): 8 sends, 8 receives,
    # and every flow start has exactly one end, on the other rank.
    starts = {e["id"]: e["pid"] for e in events if e["ph"] == "s"}
    ends = {e["id"]: e["pid"] for e in events if e["ph"] == "f"}
    assert len(starts) == 8 and starts.keys() == ends.keys()
    assert all(starts[i] != ends[i] for i in starts)
    sends = [e for e in events if e["ph"] == "X" and e["name"].startswith("send ")]
    receives = [e for e in events if e["ph"] == "X" and e["name"].startswith("receive ")]
    assert len(sends) == len(receives) == 8
    assert any(e["name"].startswith("wait: ") for e in events)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names[(0, 10001)] == "receives from rank 1" and names[(1, 10000)] == "receives from rank 0"

#!/usr/bin/python3
"""Merges per-rank Chrome trace files into one trace (open it in chrome://tracing or Perfetto).

Each rank of a job writes its own timeline (oneflow_like/actor/runtime.h: WriteRankTimeline,
{"traceEvents": [...]} with pid = rank). This tool validates every input and writes one
{"traceEvents": [...]} file: metadata events first, then every other event ordered by
timestamp (stable, so events of one file keep their order at equal times).

  /usr/bin/python3 tools/trace_merge.py -o merged.json trace.rank0.json trace.rank1.json
  /usr/bin/python3 tools/trace_merge.py -o merged.json traces/     # every *.json in the dir

Inputs may also be a bare JSON list of events (the other form Chrome accepts). Errors (exit
status 2, nothing written): a file that cannot be read, is not JSON (named with line and
column), has no "traceEvents" list, holds an event that is not an object with a string "ph"
and an integer "pid" (named by index), or claims a pid that another file also claims (the same
rank twice). After merging, flow events ("s" starts, "f" ends: a remote send and its receive)
are paired by id; unpaired ones are reported on stderr (a rank's file is missing or was
written mid-step) but are not an error. Uses the standard library only.
"""
import argparse
import json
import os
import sys
import tempfile


class MergeError(Exception):
    """A bad input: the message names the file and what is wrong with it."""


def _load_events(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise MergeError(f"{path}: cannot read: {e.strerror}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise MergeError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise MergeError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    if isinstance(data, dict):
        if "traceEvents" not in data:
            raise MergeError(f'{path}: a JSON object without a "traceEvents" list (not a Chrome trace?)')
        events = data["traceEvents"]
    else:
        events = data
    if not isinstance(events, list):
        raise MergeError(f'{path}: "traceEvents" is a {type(events).__name__}, expected a list of events')
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise MergeError(f"{path}: event {index} is a {type(event).__name__}, expected an object")
        if not isinstance(event.get("ph"), str):
            raise MergeError(f'{path}: event {index} has no string "ph" (phase)')
        pid = event.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise MergeError(f'{path}: event {index} ("{event.get("name", "")}") has no integer "pid"')
        if event["ph"] != "M" and not isinstance(event.get("ts"), (int, float)):
            raise MergeError(f'{path}: event {index} ("{event.get("name", "")}") has no numeric "ts"')
    return events


def _expand(inputs):
    paths = []
    for item in inputs:
        if os.path.isdir(item):
            found = sorted(os.path.join(item, n) for n in os.listdir(item) if n.endswith(".json"))
            if not found:
                raise MergeError(f"{item}: a directory without *.json files")
            paths.extend(found)
        else:
            paths.append(item)
    return paths


def merge(paths):
    """Returns (merged trace dict, list of warnings). Raises MergeError on a bad input."""
    owner_of_pid = {}
    metadata, timed = [], []
    for path in paths:
        events = _load_events(path)
        for pid in sorted({e["pid"] for e in events}):
            if pid in owner_of_pid:
                raise MergeError(f"{path}: pid {pid} also appears in {owner_of_pid[pid]} (the same rank twice?)")
            owner_of_pid[pid] = path
        for event in events:
            (metadata if event["ph"] == "M" else timed).append(event)
    timed.sort(key=lambda e: e["ts"])  # stable
    starts, ends = {}, {}
    for event in timed:
        if event["ph"] in ("s", "f") and "id" in event:
            bucket = starts if event["ph"] == "s" else ends
            bucket[str(event["id"])] = bucket.get(str(event["id"]), 0) + 1
    warnings = []
    unpaired_starts = sum(max(0, n - ends.get(i, 0)) for i, n in starts.items())
    unpaired_ends = sum(max(0, n - starts.get(i, 0)) for i, n in ends.items())
    if unpaired_starts or unpaired_ends:
        warnings.append(f"{unpaired_starts} flow starts (sends) and {unpaired_ends} flow ends (receives) have no "
                        "partner: is a rank's file missing, or was one written mid-step?")
    stats = {"files": len(paths), "events": len(metadata) + len(timed), "pids": sorted(owner_of_pid),
             "flows": sum(min(n, ends.get(i, 0)) for i, n in starts.items())}
    return {"traceEvents": metadata + timed, "displayTimeUnit": "ms"}, warnings, stats


def _write(trace, output):
    text = json.dumps(trace, separators=(",", ":"))
    if output == "-":
        sys.stdout.write(text + "\n")
        return
    directory = os.path.dirname(os.path.abspath(output))
    fd, tmp = tempfile.mkstemp(prefix=".trace_merge.", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, output)  # readers never see half a file
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(description="Merge per-rank Chrome trace files into one.")
    parser.add_argument("inputs", nargs="+", help="per-rank trace files, or directories of *.json files")
    parser.add_argument("-o", "--output", required=True, help="merged trace file ('-' = stdout)")
    args = parser.parse_args(argv)
    try:
        paths = _expand(args.inputs)
        if args.output != "-" and any(os.path.abspath(p) == os.path.abspath(args.output) for p in paths):
            raise MergeError(f"{args.output}: the output is also an input")
        trace, warnings, stats = merge(paths)
        _write(trace, args.output)
    except MergeError as e:
        print(f"trace_merge: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"trace_merge: {args.output}: cannot write: {e.strerror}", file=sys.stderr)
        return 2
    for warning in warnings:
        print(f"trace_merge: warning: {warning}", file=sys.stderr)
    print(f"trace_merge: {stats['events']} events from {stats['files']} files (pids "
          f"{', '.join(map(str, stats['pids']))}), {stats['flows']} paired flows -> {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

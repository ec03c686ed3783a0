#!/usr/bin/python3
"""olplan compare: a plan's prediction (olplan simulate) against a measured run's timeline
(`oltrain --timeline DIR`: DIR/timeline.json, or DIR/timeline.rank<R>.json under olrun).

    tools/olplan compare --config configs/gpt_4rank.cfg --timeline /tmp/tl [--in-process] [--json]

Reports the step time predicted vs measured, then per task the busy time per step predicted vs
measured (the same task names on both sides), the largest mismatches first. Measured step time:
per rank, the median gap between the ends of consecutive steps (each firing's step is its firing
number over the task's firings per step), leaving the first step out; the slowest rank counts.
"""
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile


def fail(msg, code=1):
    print(f"olplan: {msg}", file=sys.stderr)
    sys.exit(code)


def load_trace(path):
    try:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{path}: not a Chrome trace of oltrain --timeline ({e})")
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "task" in e.get("args", {})]


def main(argv):
    binary, args = argv[0], argv[1:]
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    timeline = None
    rest = []
    i = 0
    while i < len(args):
        if args[i] == "--timeline" and i + 1 < len(args):
            timeline = args[i + 1]
            i += 2
        elif args[i].startswith("--timeline="):
            timeline = args[i].split("=", 1)[1]
            i += 1
        else:
            rest.append(args[i])
            i += 1
    if not timeline:
        fail("compare needs --timeline DIR (from `oltrain ... --timeline DIR`)", 2)
    files = sorted(glob.glob(os.path.join(timeline, "timeline.rank*.json"))) or \
        sorted(glob.glob(os.path.join(timeline, "timeline.json")))
    if not files:
        fail(f"{timeline}: no timeline.json or timeline.rank<R>.json")
    steps = 3
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([binary, "simulate", *rest, "--json", "--sim-steps", str(steps), "--trace-dir", tmp],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr)
            sys.exit(r.returncode)
        sim = json.loads(r.stdout)
        predicted = {}
        per_step = {}
        for path in glob.glob(os.path.join(tmp, "predicted.rank*.json")):
            with open(path) as f:
                for e in json.load(f)["traceEvents"]:
                    predicted[e["name"]] = predicted.get(e["name"], 0.0) + e["dur"] / steps
                    per_step[e["name"]] = per_step.get(e["name"], 0) + 1
    per_step = {k: max(1, v // steps) for k, v in per_step.items()}
    measured, step_times = {}, []
    fired = {}
    for path in files:
        events = load_trace(path)
        ends = {}
        for e in events:
            name = e["name"]
            if name not in per_step:
                continue
            fired[name] = fired.get(name, 0) + 1
            measured[name] = measured.get(name, 0.0) + e["dur"]
            step = (int(e["args"].get("firing", 1)) - 1) // per_step[name]
            ends[step] = max(ends.get(step, 0), e["ts"] + e["dur"])
        ordered = [ends[k] for k in sorted(ends)]
        gaps = [b - a for a, b in zip(ordered, ordered[1:])][1:] or [b - a for a, b in zip(ordered, ordered[1:])]
        if gaps:
            step_times.append(statistics.median(gaps))
    if not measured:
        fail(f"{timeline}: no task of this plan appears in the timeline (was it recorded from the same job?)")
    steps_measured = max(1, round(statistics.median(fired[n] / per_step[n] for n in fired)))
    measured = {k: v / steps_measured for k, v in measured.items()}
    pred_step = sim["step_seconds"] * 1e6
    meas_step = max(step_times) if step_times else float("nan")
    rows = []
    for name in sorted(set(predicted) | set(measured)):
        p, m = predicted.get(name, 0.0), measured.get(name, 0.0)
        rows.append((abs(p - m), name, p, m))
    rows.sort(reverse=True)
    error = (pred_step - meas_step) / meas_step if meas_step == meas_step and meas_step > 0 else float("nan")
    if as_json:
        print(json.dumps({"predicted_step_us": pred_step, "measured_step_us": meas_step, "error": error,
                          "steps_measured": steps_measured,
                          "tasks": [{"task": n, "predicted_us_per_step": p, "measured_us_per_step": m}
                                    for _, n, p, m in rows]}))
        return
    print(f"step time: predicted {pred_step / 1e3:.3f} ms, measured {meas_step / 1e3:.3f} ms "
          f"({error * 100:+.1f}%; {steps_measured} measured steps, {len(files)} timeline file(s))")
    print("largest mismatches, busy time per step (predicted vs measured):")
    for _, name, p, m in rows[:12]:
        print(f"  {name:<48} {p / 1e3:9.3f} ms  {m / 1e3:9.3f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])

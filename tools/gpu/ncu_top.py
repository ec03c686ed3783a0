"""Prints the kernels with the most total GPU time from ncu --print-summary per-kernel --csv files
(tools/gpu/ncu_step.sh): per file, the total and the top 15 by count x average duration.
  python3 tools/gpu/ncu_top.py ncu_ours.csv [ncu_torch.csv ...]
"""
import csv
import sys


def rows(path):
    with open(path, errors="replace") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own log lines start with ==PROF==
    out = {}
    for r in csv.DictReader(lines):
        name = r.get("Kernel Name") or r.get("Function Name") or r.get("Name") or "?"
        metric = r.get("Metric Name", "")
        if metric and metric != "gpu__time_duration.sum":
            continue
        unit = (r.get("Metric Unit") or "").strip()
        try:
            avg = float((r.get("Average") or r.get("Metric Value") or "0").replace(",", ""))
            count = int(float((r.get("Invocations") or r.get("Count") or "1").replace(",", "")))
        except ValueError:
            continue
        scale = {"ns": 1e-6, "nsecond": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0}.get(unit, 1e-6)
        total, n = out.get(name, (0.0, 0))
        out[name] = (total + avg * count * scale, n + count)
    return out


def main():
    for path in sys.argv[1:]:
        try:
            k = rows(path)
        except OSError as e:
            print("%s: %s" % (path, e))
            continue
        total = sum(t for t, _ in k.values())
        print("%s: %d kernel names, %d launches, %.2f ms GPU time" % (path, len(k), sum(n for _, n in k.values()), total))
        for name, (t, n) in sorted(k.items(), key=lambda kv: -kv[1][0])[:15]:
            print("  %8.3f ms %5d x  %s" % (t, n, name[:110]))


if __name__ == "__main__":
    main()

"""Renders tools/bench/all.sh's results as one markdown table (stdlib only).

  bench_table.py --rows ROWS.tsv [--header HEADER.txt] [--notes NOTES.txt]

ROWS.tsv: one benchmark per line, tab-separated:
  benchmark, unit, ours, peer name, peer value, limit name, limit value, note
The limit value is in the unit of `ours`: for times (ms, us, s) the ideal time at the physical
limit, for rates (GFLOP/s, GB/s) the limit rate. Columns printed: ours, the peer, ours / peer, the
limit and the fraction of it reached (ideal time / our time, or our rate / limit rate).
"""
import argparse

TIME_UNITS = ("ms", "us", "s")


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def fmt(value):
    if value is None:
        return "-"
    if value >= 100:
        return "%.0f" % value
    if value >= 10:
        return "%.1f" % value
    return "%.3g" % value


def render(rows, header_lines, notes):
    out = ["# oneflow_like benchmarks (tools/bench/all.sh)", ""]
    out += ["- " + line for line in header_lines if line.strip()]
    out += ["- ours / peer: < 1 is better for times (ms, us, s), > 1 for rates (GFLOP/s, GB/s); "
            "fraction of limit: the ideal time at the limit / our time, or our rate / the limit rate", ""]
    out.append("| benchmark | ours | peer | ours / peer | physical limit (same run) | fraction of limit |")
    out.append("|---|---:|---|---:|---|---:|")
    for fields in rows:
        fields = (fields + [""] * 8)[:8]
        name, unit, ours, peer_name, peer, limit_name, limit, note = fields
        o, p, lim = number(ours), number(peer), number(limit)
        ratio = "%.2f" % (o / p) if o is not None and p else "-"
        if peer_name and p is not None:
            peer_cell = "%s: %s" % (peer_name, fmt(p))
        else:
            peer_cell = peer_name or "-"
        if lim is not None and o:
            fraction = lim / o if unit in TIME_UNITS else o / lim
            limit_cell = "%s: %s %s" % (limit_name, fmt(lim), unit)
            fraction_cell = "%.0f%%" % (100 * fraction)
        else:
            limit_cell = ("%s: not measured" % limit_name) if limit_name else "-"
            fraction_cell = "-"
        ours_cell = fmt(o) if o is not None else "no result"
        if note:
            ours_cell += " (%s)" % note
        out.append("| %s | %s | %s | %s | %s | %s |" % (name, ours_cell, peer_cell, ratio, limit_cell, fraction_cell))
    if notes:
        out += ["", "Skipped or failed:", ""]
        out += [("- " + n) if not n.startswith("    ") else n for n in notes]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", required=True)
    ap.add_argument("--header")
    ap.add_argument("--notes")
    a = ap.parse_args()
    rows = [line.rstrip("\n").split("\t") for line in open(a.rows) if line.strip()]
    header = open(a.header).read().splitlines() if a.header else []
    notes = [n for n in open(a.notes).read().splitlines() if n.strip()] if a.notes else []
    print(render(rows, header, notes), end="")


if __name__ == "__main__":
    main()

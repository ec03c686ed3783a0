"""Where a data-parallel step's time goes, from one rank's oltrain --timeline (timeline.rank<R>.json).

For each step (from one firing of the first input source to the next) of a dp run, with p2p or
collective boxing, it prints in ms from the step's start:
  loss       forward done (the loss sink acted)
  bwd end    the last gradient op (a COMPUTE act named */grad*) ended
  busy       the rank's COMPUTE acts summed (forward + backward + optimizer; its own compute time)
  comm 1st   the first gradient went to the link: p2p the first "send ready '*/grad'"; collective
             the first gradient bucket's call (its act's recorded start: the last attempt to fire
             before the call, i.e. when its inputs were complete)
  comm done  the last gradient arrived: p2p the last "receive ready '*/grad'"; collective the last
             gradient bucket's call finished
  link       comm done - comm 1st (the time the gradient exchange occupied the link)
  idle       step - busy: the time the rank waited (communication compute did not hide, wake-ups)
  tail       step end - comm done (optimizer updates, the next step's start)
  gather 1st, gather done  (--zero_stage=2 runs only) the parameters' all-gather for this step's
             forward: p2p the first "send ready" / last "receive ready" of a parameter register
             ('wte', 'wpe', '*.weight', '*.bias'); collective the first start / last end of a
             parameter's all_gather call; negative: before the step's first input source (the
             previous step's updates release them)
(With p2p, wte's gradient needs the peer's embedding gradients, which queue behind the weight
gradients on the link: "bwd end" then moves with "comm done".)
then the medians over the steps after --skip and, for collective runs, each bucket's start and
end (medians), and the link rate: bytes sent per step (p2p: the send events' bytes) / link, or
--grad_bytes B / link.

With --comm_ms and --compute_ms (the bench's comm-only and compute-only times) it prints the
bound for communication that overlaps only backward: step ~ comm 1st + comm-only (~: the job
may send a little less than the comm-only bytes, e.g. wte's gradient is formed from the gathered
embedding gradients instead of being all-reduced).

  /usr/bin/python3 tools/bench/two_node_timeline.py [--skip 3] [--grad_bytes B] [--comm_ms C --compute_ms P] TIMELINE.json
"""
import argparse
import collections
import json
import re
import statistics
import sys


def is_grad_comm(e):
    name = e["name"]
    if e["cat"] == "COLLECTIVE":
        return "grad_bucket" in name or ("/grad" in name and "embed" not in name)
    return False


PARAM = r"(wte|wpe|[^'@]*\.(weight|bias))"


def is_param_gather(e):
    if e["cat"] == "COLLECTIVE":
        return re.match(PARAM + r"\.all_gather", e["name"]) is not None
    return re.match(r"(send|receive) ready '" + PARAM + "@", e["name"]) is not None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("timeline")
    ap.add_argument("--skip", type=int, default=3, help="first steps left out (warm-up)")
    ap.add_argument("--grad_bytes", type=int, default=0)
    ap.add_argument("--comm_ms", type=float, default=0, help="comm-only time, for the bound below")
    ap.add_argument("--compute_ms", type=float, default=0, help="compute-only step, for the bound below")
    a = ap.parse_args()
    with open(a.timeline) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    sources = [e for e in events if e["cat"] == "SOURCE"]
    if not sources:
        sys.exit("two_node_timeline: no SOURCE acts in " + a.timeline)
    first = min(sources, key=lambda e: e["ts"])["name"]
    starts = sorted(e["ts"] for e in sources if e["name"] == first)
    rows, buckets = [], collections.defaultdict(lambda: ([], []))
    for k in range(a.skip, len(starts) - 1):
        t0, t1 = starts[k], starts[k + 1]
        win = [e for e in events if t0 <= e["ts"] < t1 and e["cat"] != "wait"]
        ms = lambda t: (t - t0) / 1e3
        loss = [e["ts"] + e["dur"] for e in win if e["cat"] == "SINK"]
        compute = [e for e in win if e["cat"] == "COMPUTE"]
        grads = [e["ts"] + e["dur"] for e in compute if "/grad" in e["name"]]
        coll = [e for e in win if is_grad_comm(e)]
        sends = [e["ts"] for e in win if re.match(r"send ready '.*/grad", e["name"])]
        sent = sum(e["args"].get("bytes", 0) for e in win if e["name"].startswith("send ready"))
        recvs = [e["ts"] + e["dur"] for e in win if re.match(r"receive ready '.*/grad", e["name"])]
        # This step's gathers end before its loss; they may start before t0 (the previous step's updates
        # release them before the next input source fires).
        loss_t = min((e["ts"] for e in win if e["cat"] == "SINK"), default=t1)
        gathers = [e for e in events if is_param_gather(e) and t0 - (t1 - t0) / 3 <= e["ts"] + e["dur"] <= loss_t]
        if coll:
            c1, cd = min(e["ts"] for e in coll), max(e["ts"] + e["dur"] for e in coll)
            for e in coll:
                buckets[e["name"]][0].append(ms(e["ts"]))
                buckets[e["name"]][1].append(ms(e["ts"] + e["dur"]))
        elif sends and recvs:
            c1, cd = min(sends), max(recvs)
        else:
            continue
        if not loss or not grads:
            continue
        bwd_end = max(grads)
        rows.append(dict(step=ms(t1), loss=ms(min(loss)), bwd=ms(bwd_end),
                         busy=sum(e["dur"] for e in compute) / 1e3, c1=ms(c1), cd=ms(cd), link=(cd - c1) / 1e3,
                         tail=(t1 - cd) / 1e3, sent=sent))
        rows[-1]["idle"] = rows[-1]["step"] - rows[-1]["busy"]
        if gathers:
            rows[-1]["g1"] = ms(min(e["ts"] for e in gathers))
            rows[-1]["gd"] = ms(max(e["ts"] + e["dur"] for e in gathers))
    if not rows:
        sys.exit("two_node_timeline: no complete steps after --skip %d in %s" % (a.skip, a.timeline))
    cols = ["step", "loss", "bwd", "busy", "idle", "c1", "cd", "link", "tail"]
    head = ["step", "loss", "bwd end", "busy", "idle", "comm 1st", "comm done", "link", "tail"]
    zero2 = all("g1" in r for r in rows)
    if zero2:
        cols += ["g1", "gd"]
        head += ["gather 1st", "gather done"]
    print("  " + " ".join("%9s" % h for h in ["", *head]))
    for i, r in enumerate(rows):
        print("  " + " ".join(["%9s" % ("step %d" % (a.skip + i))] + ["%9.1f" % r[c] for c in cols]))
    med = {c: statistics.median(r[c] for r in rows) for c in cols}
    print("  " + " ".join(["%9s" % "median"] + ["%9.1f" % med[c] for c in cols]))
    if buckets:
        print("  gradient buckets (median start -> end, ms from the step's start): " + "; ".join(
            "%s %.1f -> %.1f" % (n.split(".")[0], statistics.median(s), statistics.median(d))
            for n, (s, d) in sorted(buckets.items(), key=lambda kv: statistics.median(kv[1][1]))))
    rate = ""
    sent = statistics.median(r["sent"] for r in rows)
    if sent:
        rate = " (%d bytes sent per step by this rank: %.2f Gbit/s)" % (sent, sent * 8 / (med["link"] / 1e3) / 1e9)
    elif a.grad_bytes:
        rate = " (%.2f Gbit/s if all %d gradient bytes crossed)" % (a.grad_bytes * 8 / (med["link"] / 1e3) / 1e9,
                                                                    a.grad_bytes)
    print("  => the gradients go on the link %.1f ms into the step (forward done at %.1f); the exchange then "
          "occupies it %.1f ms%s, until %.1f; %.1f ms after it (optimizer). The rank computes %.1f ms of the "
          "%.1f ms step and waits %.1f."
          % (med["c1"], med["loss"], med["link"], rate, med["cd"], med["tail"], med["busy"], med["step"], med["idle"]))
    if zero2:
        print("  => zero_stage=2: the parameters' all-gathers for this step start %.1f ms in and the last arrives at "
              "%.1f (forward done at %.1f); the gradients' reduce-scatter runs %.1f -> %.1f."
              % (med["g1"], med["gd"], med["loss"], med["c1"], med["cd"]))
        if a.comm_ms and a.compute_ms:
            print("  => with half the bytes in each pass the bound is about max(forward, comm-only / 2) + max(backward, "
                  "comm-only / 2); measured overlap %.2f" % (med["step"] / max(a.compute_ms, a.comm_ms)))
    elif a.comm_ms and a.compute_ms:
        bound = med["c1"] + a.comm_ms
        print("  => while the gradients cross only after forward (the first is ready %.1f ms in), a step takes about "
              "%.1f + comm-only %.1f = %.1f ms: overlap ~ %.1f / max(%.1f, %.1f) = %.2f (measured step: %.2f)"
              % (med["c1"], med["c1"], a.comm_ms, bound, bound, a.compute_ms, a.comm_ms,
                 bound / max(a.compute_ms, a.comm_ms), med["step"] / max(a.compute_ms, a.comm_ms)))


if __name__ == "__main__":
    main()

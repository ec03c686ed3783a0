#!/usr/bin/env bash
# Our gloo all-reduce (collective_bench.cc: comm/gloo_collective.h, ranks meeting through the
# control plane) vs torch.distributed's gloo all-reduce (collective_bench_torch.py), in the same
# run, 2 processes each over 127.0.0.1, float32 sums of 16 MiB and 256 MiB in place. Both link
# the same libgloo, so what is lost is our wrapper's overhead. Builds //tools/bench:collective_bench
# (-c opt), then per round runs ours and torch's (the order alternates round to round) and
# prints, per size, the median over rounds of each side's median call time, the fastest call of
# all rounds (steadier when the machine is loaded), and for both
#   ratio = our throughput / torch's throughput = torch ms / our ms   (goal: >= 0.95)
# Machines here are shared and have few cores: run it when the load is low, compare ratios.
#
# Usage: tools/bench/collective_bench.sh [--rounds 3] [--sizes_mib 16,256] [--iters 20,5] [--warmup 2]
#                                        [--gloo_transport ol|gloo_tcp]  (ours: default the backend's)
#   OUTPUT_BASE=...   Bazel output base for the build (default: tools/bazel.sh's)
#   BENCH=/path/to/collective_bench   skip the build and use this binary
#   PYTHON=/usr/bin/python3           the Python with torch
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=3
SIZES=16,256
ITERS=20,5
WARMUP=2
PYTHON="${PYTHON:-/usr/bin/python3}"
OURS_EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --sizes_mib) SIZES="$2"; shift 2 ;;
    --iters) ITERS="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --gloo_transport) OURS_EXTRA=(--gloo_transport "$2"); shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "collective_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ -z "${BENCH:-}" ]]; then
  if [[ -n "${OUTPUT_BASE:-}" ]]; then
    BAZEL=(bazel --batch --output_base="${OUTPUT_BASE}")
  else
    BAZEL=(bash tools/bazel.sh)
  fi
  "${BAZEL[@]}" build -c opt --color=no --curses=no //tools/bench:collective_bench >&2
  BENCH="$("${BAZEL[@]}" info -c opt bazel-bin 2>/dev/null)/tools/bench/collective_bench"
fi
TORCH_BENCH=tools/bench/collective_bench_torch.py

free_port() {
  "${PYTHON}" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# run_pair NAME CMD...: rank 1 in the background, rank 0 in the foreground (its result lines
# tagged NAME on stdout); fails if either rank fails.
run_pair() {
  local name="$1" port pid1 out
  shift
  port="$(free_port)"
  "$@" --rank 1 --world 2 --port "${port}" --sizes_mib "${SIZES}" --iters "${ITERS}" --warmup "${WARMUP}" >/dev/null &
  pid1=$!
  if ! out="$("$@" --rank 0 --world 2 --port "${port}" --sizes_mib "${SIZES}" --iters "${ITERS}" --warmup "${WARMUP}")"; then
    kill "${pid1}" 2>/dev/null || true
    echo "collective_bench.sh: ${name} rank 0 failed" >&2
    return 1
  fi
  wait "${pid1}" || { echo "collective_bench.sh: ${name} rank 1 failed" >&2; return 1; }
  echo "${out}" | awk -v name="${name}" '$1 == "result" { print name, $0 }'
}

echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)"
RESULTS=""
for round in $(seq "${ROUNDS}"); do
  if (( round % 2 == 1 )); then order="ours torch"; else order="torch ours"; fi
  for side in ${order}; do
    if [[ "${side}" == ours ]]; then
      lines="$(run_pair ours "${BENCH}" "${OURS_EXTRA[@]}")"
    else
      lines="$(run_pair torch "${PYTHON}" "${TORCH_BENCH}")"
    fi
    echo "${lines}" | sed "s/^/round ${round} /"
    RESULTS+="${lines}"$'\n'
  done
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "${RESULTS}" | "${PYTHON}" -c '
import collections, statistics, sys
median = collections.defaultdict(lambda: collections.defaultdict(list))
best = collections.defaultdict(lambda: collections.defaultdict(list))
for line in sys.stdin:
    f = line.split()
    if len(f) >= 7 and f[1] == "result":
        median[int(f[3])][f[0]].append(float(f[4]))
        best[int(f[3])][f[0]].append(float(f[7]) if len(f) >= 8 else float(f[4]))
print("%-8s %9s %9s %10s %10s %7s   %13s %13s %7s" % ("size", "ours ms", "torch ms", "ours GB/s", "torch GB/s",
      "ratio", "ours best ms", "torch best ms", "ratio"))
for size in sorted(median):
    ours, torch = statistics.median(median[size]["ours"]), statistics.median(median[size]["torch"])
    ours_best, torch_best = min(best[size]["ours"]), min(best[size]["torch"])
    print("%-8s %9.2f %9.2f %10.2f %10.2f %7.3f   %13.2f %13.2f %7.3f" % ("%d MiB" % (size >> 20), ours * 1e3,
          torch * 1e3, size / ours / 1e9, size / torch / 1e9, torch / ours, ours_best * 1e3, torch_best * 1e3,
          torch_best / ours_best))
print("ms: median over rounds of each run'"'"'s median call; best: the fastest call of all rounds.")
print("ratio = our throughput / torch throughput (= torch ms / our ms; goal >= 0.95); "
      "GB/s = tensor bytes / median call time (1 GB = 1e9 bytes)")'

#!/usr/bin/env bash
# Python API overhead, side by side (printed numbers, not a test): the W2 GPT step through
# nn.Graph (tools/bench/python_overhead.py) vs the same job through oltrain (-c opt, one rank,
# OPENBLAS_NUM_THREADS=1 for both), alternating which goes first, several rounds; medians and the
# ratio python / oltrain (goal: under 1.03). Then the eager op round trip vs PyTorch eager.
# Usage: tools/bench/python_bench.sh [--rounds 3]
#   OLTRAIN=/path/to/oltrain   skip oltrain's build and use this binary
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=3
[[ "${1:-}" == "--rounds" ]] && ROUNDS="$2"
bash tools/install_python.sh >/dev/null 2>&1 || { echo "python_bench: tools/install_python.sh failed" >&2; exit 1; }
if [[ -z "${OLTRAIN:-}" ]]; then
  bash tools/bazel.sh build -c opt --color=no --curses=no //tools/train:oltrain >/dev/null 2>&1
  OLTRAIN="$(bash tools/bazel.sh info -c opt bazel-bin 2>/dev/null)/tools/train/oltrain"
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
run_oltrain() { "$OLTRAIN" --model=gpt --steps=11 --warmup=2 2>&1 | sed -n 's/.*median_ms_per_step=\([0-9.]*\).*/\1/p'; }
run_python() { /usr/bin/python3 tools/bench/python_overhead.py --what graph 2>&1 | sed -n 's/.*graph_median_ms=\([0-9.]*\).*/\1/p'; }
ours=(); theirs=()
for ((r = 0; r < ROUNDS; r++)); do
  if (( r % 2 == 0 )); then a=$(run_python); b=$(run_oltrain); else b=$(run_oltrain); a=$(run_python); fi
  echo "round $r: nn.Graph ${a} ms  oltrain ${b} ms"
  ours+=("$a"); theirs+=("$b")
done
/usr/bin/python3 - "${ours[*]}" "${theirs[*]}" <<'PY'
import statistics, sys
a = [float(v) for v in sys.argv[1].split()]; b = [float(v) for v in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"W2 step, 1 rank, T=1: nn.Graph {ma:.2f} ms  oltrain {mb:.2f} ms  ratio {ma / mb:.3f}")
PY
/usr/bin/python3 tools/bench/python_overhead.py --what eager | grep RESULT

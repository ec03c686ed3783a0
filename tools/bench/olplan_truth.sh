#!/usr/bin/env bash
# olplan's truthfulness on this machine: for W1, W2 and every shipped config, the step time
# olplan simulate predicts against the step time oltrain measures, in one process and under olrun,
# and the planned peak memory against the allocator's measured high-water mark. Prints one
# markdown table (error = predicted / measured - 1).
#
# Usage: tools/bench/olplan_truth.sh [--runs 3] [--jobs "w1 w2 gpt_tiny mlp gpt_4rank gpt_3d"]
#   Measured: the median over --runs runs of oltrain's median step (--steps=40 --warmup=5).
#   One process: OPENBLAS_NUM_THREADS=1 (the BLAS pools of several ranks in one process
#   oversubscribe the cores; olplan simulate --in-process reads the same variable). olrun sets
#   the BLAS threads per process itself. Needs a profile: `tools/olplan calibrate` (once).
#   As root the measured runs are real-time (chrt -f 50, inherited by olrun's ranks), so other
#   work on the machine (builds, benches) cannot preempt them: without it a busy 2-core machine
#   turned gpt_4rank's 22.7 ms step into 33-58 ms. --no-rt measures at normal priority.
#   Not for jobs with --boxing=collective: a thread that spins at real-time priority is never
#   preempted by the same-priority compute threads of its core (gloo under SCHED_FIFO made W2
#   dp2 235 ms instead of 130); the shipped configs use point-to-point boxing.
#   OLTRAIN=... OLPLAN=... use these optimized binaries instead of building.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=3
no_rt=0
jobs="w1 w2 gpt_tiny mlp gpt_4rank gpt_3d"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --no-rt) no_rt=1; shift ;;
    *) echo "olplan_truth: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [ -n "${OLTRAIN:-}" ] && [ -n "${OLPLAN:-}" ]; then  # prebuilt binaries: no build
  oltrain="$OLTRAIN"; olplan="$OLPLAN"
else
  bash tools/bazel.sh build -c opt --color=no --curses=no //tools/train:oltrain //tools/plan:olplan >/dev/null 2>&1 \
    || { echo "olplan_truth: build failed (bash tools/bazel.sh build -c opt //tools/train:oltrain //tools/plan:olplan)" >&2; exit 1; }
  bin="$(bash tools/bazel.sh info -c opt bazel-bin 2>/dev/null)"
  oltrain="$bin/tools/train/oltrain"
  olplan="$bin/tools/plan/olplan"
fi
[ -f "$HOME/.cache/oneflow_like/olplan_profile.txt" ] || "$olplan" calibrate >/dev/null
rt=()
if [ "$no_rt" = 0 ] && [ "$(id -u)" = 0 ] && command -v chrt >/dev/null; then rt=(chrt -f 50); fi
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
field() { sed -n "s/.*RESULT.* $1=\([0-9.]*\).*/\1/p" | head -1; }
err() { awk -v p="$1" -v m="$2" 'BEGIN { if (m > 0) printf "%+.0f%%", (p / m - 1) * 100; else print "n/a" }'; }

flags_of() {  # job -> oltrain flags
  case "$1" in
    w1) echo "--model=mlp" ;;
    w2) echo "--model=gpt" ;;
    *) echo "--config configs/$1.cfg" ;;
  esac
}
world_of() {  # job -> ranks
  "$olplan" summary --json $(flags_of "$1") 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["world_size"])'
}

echo "| job | ranks | one process: predicted / measured | olrun: predicted / measured | memory: planned / measured |"
echo "|---|---|---|---|---|"
for job in $jobs; do
  read -r -a flags <<<"$(flags_of "$job")"
  world=$(world_of "$job")
  threads=1
  one=() ; mem=()
  for _ in $(seq 1 "$runs"); do
    out=$(env ${threads:+OPENBLAS_NUM_THREADS=$threads} "${rt[@]}" "$oltrain" "${flags[@]}" --steps=40 --warmup=5 2>&1)
    one+=("$(field median_ms_per_step <<<"$out")"); mem+=("$(field measured_peak_mib_per_rank <<<"$out")")
  done
  one_ms=$(printf '%s\n' "${one[@]}" | median)
  mem_mib=$(printf '%s\n' "${mem[@]}" | median)
  pred_one=$(env ${threads:+OPENBLAS_NUM_THREADS=$threads} "$olplan" simulate --json --in-process "${flags[@]}" 2>/dev/null \
    | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["step_seconds"] * 1e3)')
  planned=$("$olplan" summary --json "${flags[@]}" 2>/dev/null \
    | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["peak_bytes"] / 2**20)')
  if [ "$world" -gt 1 ]; then
    multi=()
    for _ in $(seq 1 "$runs"); do
      out=$(OLRUN_TRAINER="$oltrain" "${rt[@]}" tools/olrun --nproc-per-node "$world" --master-addr 127.0.0.1 --master-port "$(port)" \
        "${flags[@]}" --steps=40 --warmup=5 2>&1)
      multi+=("$(field median_ms_per_step <<<"$out")")
    done
    multi_ms=$(printf '%s\n' "${multi[@]}" | median)
    pred_multi=$("$olplan" simulate --json "${flags[@]}" 2>/dev/null \
      | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["step_seconds"] * 1e3)')
    olrun_cell=$(printf '%.2f / %.2f ms (%s)' "$pred_multi" "$multi_ms" "$(err "$pred_multi" "$multi_ms")")
  else
    olrun_cell="(one process)"
  fi
  printf '| %s | %s | %.2f / %.2f ms (%s) | %s | %.2f / %.2f MiB (%s) |\n' "$job" "$world" "$pred_one" "$one_ms" \
    "$(err "$pred_one" "$one_ms")" "$olrun_cell" "$planned" "$mem_mib" "$(err "$planned" "$mem_mib")"
done

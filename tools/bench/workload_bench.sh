#!/usr/bin/env bash
# Side-by-side benchmark of the standard workloads (tools/bench/peers/README.md) on ONE rank:
# oneflow_like's trainer (tools/train:oltrain, -c opt) vs PyTorch 1.13 eager (peers/bench_mlp.py,
# peers/bench_gpt.py under /usr/bin/python3: the same portable init and data), alternating the
# two systems (which one goes first flips every round), several rounds, then medians over rounds
# and the ratio ours / torch (< 1.0 = oneflow_like faster). Memory: oneflow_like's planned peak
# bytes per rank (from the plan) and its process peak RSS (/usr/bin/time) next to torch's peak
# RSS (ru_maxrss, incl. `import torch`). Fair settings (peers/README.md): OMP_NUM_THREADS=T
# OPENBLAS_NUM_THREADS=T for both systems, and OMP_WAIT_POLICY=PASSIVE when T=2.
#
# Usage: tools/bench/workload_bench.sh [--rounds 3] [--threads "1 2"] [--workloads "mlp gpt"]
#   OLTRAIN=/path/to/oltrain   skip the build and use this binary
#   OLTRAIN_BEFORE=/path       a second oltrain (e.g. built before a change), run in the same
#                              rotation each round; the summary adds its median and ratio
#   OUTPUT_BASE=...            Bazel output base for the build (default ~/.cache/oneflow_like-bazel/ob)
# Prints one "round" line per run and a summary table; takes ~1-2 minutes per round at T=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=3
THREADS="1 2"
WORKLOADS="mlp gpt"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --workloads) WORKLOADS="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "workload_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
BENCH="$PWD/tools/bench/peers"
PY=/usr/bin/python3
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "workload_bench.sh: $PY lacks torch: apt-get install python3-torch" >&2; exit 1
fi
if [[ -z "${OLTRAIN:-}" ]]; then
  OB="${OUTPUT_BASE:-$HOME/.cache/oneflow_like-bazel/ob}"
  bazel --batch --output_base="$OB" build -c opt --color=no --curses=no //tools/train:oltrain >&2
  OLTRAIN="$(bazel --batch --output_base="$OB" info -c opt bazel-bin 2>/dev/null)/tools/train/oltrain"
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

run_torch() {  # workload threads -> "ms rss_mib"
  local w="$1" t="$2" args
  if [[ "$w" == mlp ]]; then args=("$BENCH/bench_mlp.py" --threads "$t" --warmup 3 --reps 3 --iters 5)
  else args=("$BENCH/bench_gpt.py" --threads "$t" --init portable --warmup 2 --reps 3 --iters 3); fi
  env OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" $WAIT "$PY" "${args[@]}" > "$TMP/torch.out"
  local line; line="$(grep '^RESULT' "$TMP/torch.out")"
  # " median=" (with the space): the line also has gflops_median=, which is not a time.
  echo "$(sed -E 's/.* median=([0-9.]+).*/\1/' <<<"$line") $(sed -E 's/.*peak_rss_mib=([0-9.]+).*/\1/' <<<"$line")"
}

run_ours() {  # workload threads [binary] -> "ms planned_mib rss_mib"
  local w="$1" t="$2" bin="${3:-$OLTRAIN}" args
  if [[ "$w" == mlp ]]; then args="--model=mlp --steps=17 --warmup=2"
  else args="--model=gpt --steps=11 --warmup=2"; fi
  env OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" $WAIT /usr/bin/time -f "MAXRSS_KB %M" -o "$TMP/time.out" \
    "$bin" $args > "$TMP/ours.out"
  local line; line="$(grep '^RESULT' "$TMP/ours.out")"
  local kb; kb="$(awk '/MAXRSS_KB/ {print $2}' "$TMP/time.out")"
  echo "$(sed -E 's/.*median_ms_per_step=([0-9.]+).*/\1/' <<<"$line")" \
       "$(sed -E 's/.*planned_peak_mib_per_rank=([0-9.]+).*/\1/' <<<"$line")" "$(awk "BEGIN {print $kb / 1024}")"
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }

echo "oneflow_like: $OLTRAIN${OLTRAIN_BEFORE:+ (before: $OLTRAIN_BEFORE)}"
echo "torch: $($PY -c 'import torch; print(torch.__version__)'), $BENCH"
SUMMARY="$TMP/summary"
for t in $THREADS; do
  WAIT=""; [[ "$t" == 2 ]] && WAIT="OMP_WAIT_POLICY=PASSIVE"
  for w in $WORKLOADS; do
    : > "$TMP/ours.ms"; : > "$TMP/torch.ms"; : > "$TMP/before.ms"
    for r in $(seq 1 "$ROUNDS"); do
      b="" bms=""
      if (( r % 2 )); then
        o="$(run_ours "$w" "$t")"
        if [[ -n "${OLTRAIN_BEFORE:-}" ]]; then b="$(run_ours "$w" "$t" "$OLTRAIN_BEFORE")"; fi
        p="$(run_torch "$w" "$t")"
      else
        p="$(run_torch "$w" "$t")"
        if [[ -n "${OLTRAIN_BEFORE:-}" ]]; then b="$(run_ours "$w" "$t" "$OLTRAIN_BEFORE")"; fi
        o="$(run_ours "$w" "$t")"
      fi
      read -r oms oplan orss <<<"$o"; read -r pms prss <<<"$p"
      echo "$oms" >> "$TMP/ours.ms"; echo "$pms" >> "$TMP/torch.ms"
      if [[ -n "$b" ]]; then read -r bms _ _ <<<"$b"; echo "$bms" >> "$TMP/before.ms"; bms=" before $bms ms"; fi
      echo "round $r $w T=$t: oneflow_like $oms ms (planned $oplan MiB, rss $orss MiB)  torch $pms ms (rss $prss MiB)$bms"
    done
    om="$(median < "$TMP/ours.ms")"; pm="$(median < "$TMP/torch.ms")"
    printf "%-4s T=%s  oneflow_like %8.2f ms  torch %8.2f ms  ratio %5.2f  | planned/rank %7s MiB, rss %6.0f MiB | torch rss %5s MiB\n" \
      "$w" "$t" "$om" "$pm" "$(awk "BEGIN {print $om / $pm}")" "$oplan" "$orss" "$prss" >> "$SUMMARY"
    if [[ -n "${OLTRAIN_BEFORE:-}" ]]; then
      bm="$(median < "$TMP/before.ms")"
      printf "%-4s T=%s  before       %8.2f ms  torch %8.2f ms  ratio %5.2f  (OLTRAIN_BEFORE)\n" \
        "$w" "$t" "$bm" "$pm" "$(awk "BEGIN {print $bm / $pm}")" >> "$SUMMARY"
    fi
  done
done
echo "== medians over $ROUNDS rounds (ms per step; ratio = oneflow_like / torch, < 1 = faster) =="
cat "$SUMMARY"

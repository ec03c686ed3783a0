#!/usr/bin/env bash
# Where the GPT step's time goes on one GPU: oltrain_cuda under runtime / backend variants side
# by side in one run (median ms per step, and the process's CPU seconds per step), plus one host
# timeline (--timeline, packed into $OUT/timeline.tar.gz). Run on the GPU machine after
# run_checks.sh has unpacked the pack:
#   bash tools/gpu/step_variants.sh [PACK_DIR]      (default /tmp/ol_gpu_checks/gpu_pack)
set -uo pipefail
cd "$(dirname "$0")/../.."
root="${1:-${TMPDIR:-/tmp}/ol_gpu_checks/gpu_pack}"
out="${OUT:-/tmp}"
dims="${DIMS:---vocab=8192 --seq_len=512 --n_layer=12 --n_embd=768 --n_head=12 --batch=8}"
steps="${STEPS:-30}"
export LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
oltrain="$root/tools/oltrain_cuda"
echo "| variant | ms/step | CPU s/step |"
echo "|---|---|---|"
# variant NAME ENV... -- FLAGS...
variant() {
  local name="$1"; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local log="/tmp/variant.log" cpu
  local start=$SECONDS
  ( TIMEFORMAT='%U %S'; time env "${envs[@]}" timeout 90 "$oltrain" --model=gpt --device=cuda $dims --steps="$steps" \
      --warmup=5 "$@" >"$log" 2>&1 ) 2>/tmp/variant.time
  cpu="$(awk -v n="$steps" '{ printf "%.3f", ($1 + $2) / n }' /tmp/variant.time)"
  local ms
  ms="$(sed -n 's/.*median_ms_per_step=\([0-9.]*\).*/\1/p' "$log" | tail -1)"
  [ -n "$ms" ] || { ms="failed"; tail -3 "$log" | sed 's/^/    /' >&2; }
  echo "| $name | $ms | $cpu |"
  # RunTraining's stream-thread loads (is the compute stream's host thread the bound?).
  echo "$name: $(grep -m1 '^host threads' "$log") | $(grep -m1 '^cuda host cost' "$log")" >>/tmp/variant_hosts.txt
}
: >/tmp/variant_hosts.txt
# Alternated, each twice, so that drift between runs shows as a spread within a row pair.
for round in 1 2; do
  variant "default (stream-ordered, run-ahead, 1 compute stream)" X=1 --
  variant "OL_CUDA_SPIN_COMPLETIONS=1 (completion threads spin)" OL_CUDA_SPIN_COMPLETIONS=1 --
  variant "--reuse_memory=false" X=1 -- --reuse_memory=false
  variant "OL_CUDA_CHECK_INDICES=0 (no id / label range checks)" OL_CUDA_CHECK_INDICES=0 --
done
echo; cat /tmp/variant_hosts.txt
rm -rf /tmp/ol_timeline && mkdir -p /tmp/ol_timeline
timeout 90 "$oltrain" --model=gpt --device=cuda $dims --steps=6 --warmup=2 --timeline=/tmp/ol_timeline \
  >/tmp/timeline_run.log 2>&1
echo "timeline run: exit $?, $(ls /tmp/ol_timeline | wc -l) files"
tar -C /tmp -czf "$out/timeline.tar.gz" ol_timeline

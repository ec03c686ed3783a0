#!/usr/bin/env bash
# Per-kernel GPU time of one GPT training step, ours (oltrain_cuda) and PyTorch eager's, with
# Nsight Compute (ncu: each kernel timed alone, serialized; gpu__time_duration only, one pass).
# Run on the GPU machine after run_checks.sh has unpacked the pack (it needs the pack's tools/
# and lib/). Writes ncu_ours.csv and ncu_torch.csv (ncu's per-kernel summary: name, count,
# average / min / max duration) to $OUT (or /tmp), then prints the ten biggest of each side
# by total time (tools/gpu/ncu_top.py).
#   bash tools/gpu/ncu_step.sh [PACK_DIR]    (default /tmp/ol_gpu_checks/gpu_pack)
set -uo pipefail
cd "$(dirname "$0")/../.."
root="${1:-${TMPDIR:-/tmp}/ol_gpu_checks/gpu_pack}"
out="${OUT:-/tmp}"
dims="${DIMS:---vocab=8192 --seq_len=512 --n_layer=12 --n_embd=768 --n_head=12 --batch=8}"
ncu="$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
[ -x "$ncu" ] || { echo "ncu_step: no ncu on this machine"; exit 0; }
export LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
common=(--clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel --csv)
# Two steps (the first also runs the initializers): the summary's counts say which is which.
timeout "${NCU_TIMEOUT_S:-150}" "$ncu" "${common[@]}" "$root/tools/oltrain_cuda" --model=gpt --device=cuda $dims \
  --steps=2 --warmup=1 >"$out/ncu_ours.csv" 2>"$out/ncu_ours.err"
echo "ncu ours: exit $? ($(wc -l <"$out/ncu_ours.csv") lines)"
timeout "${NCU_TIMEOUT_S:-150}" "$ncu" "${common[@]}" python3 tools/gpu/torch_gpt_cuda.py $(echo "$dims" | sed 's/=/ /g') \
  --steps 2 --warmup 1 >"$out/ncu_torch.csv" 2>"$out/ncu_torch.err"
echo "ncu torch: exit $? ($(wc -l <"$out/ncu_torch.csv") lines)"
python3 tools/gpu/ncu_top.py "$out/ncu_ours.csv" "$out/ncu_torch.csv"

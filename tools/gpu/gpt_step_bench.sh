#!/usr/bin/env bash
# The GPT training step on one GPU: oltrain_cuda (--device=cuda) next to PyTorch eager on CUDA
# (tools/gpu/torch_gpt_cuda.py, the same model, float32, TF32 off, AdamW), in the same run.
# Prints a markdown table: ms per step, tokens/s, matmul TFLOP/s and its fraction of the H100's
# FP32 peak (67 TFLOP/s, SXM datasheet; no TF32 on either side), ours / PyTorch, and olplan's
# predicted step for the same job (tools/plan/profiles/h100_fp32.txt) against ours.
# Run by run_checks.sh --bench on a GPU machine (copied into the pack's bench/ by pack.sh, with
# oltrain_cuda in the pack's tools/); from the repository root. Exits 0 without a GPU.
#   DIMS="--vocab=8192 --seq_len=512 --n_layer=12 --n_embd=768 --n_head=12 --batch=8" bash gpt_step_bench.sh
set -uo pipefail
pack="$(cd "$(dirname "$0")/.." && pwd)"
oltrain="${OLTRAIN_CUDA:-$pack/tools/oltrain_cuda}"
olplan="${OLPLAN:-$pack/tools/olplan}"
dims="${DIMS:---vocab=8192 --seq_len=512 --n_layer=12 --n_embd=768 --n_head=12 --batch=8}"
peak_tflops=67
# Each run gets RUN_TIMEOUT_S (default 90): a hang costs one row, not the whole device call.
run_timeout="${RUN_TIMEOUT_S:-90}"
# The pack's libraries (run_checks.sh exports them too; this makes a direct run work).
export LD_LIBRARY_PATH="$(dirname "$oltrain")/../lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ! nvidia-smi -L >/dev/null 2>&1; then echo "gpt_step_bench: no GPU visible; skipped"; exit 0; fi
[ -x "$oltrain" ] || { echo "gpt_step_bench: $oltrain missing (pack.sh carries it)"; exit 0; }
ours="$(timeout "$run_timeout" "$oltrain" --model=gpt --device=cuda $dims --steps=30 --warmup=5 2>&1 | tee /dev/stderr | grep RESULT | tail -1)"
ours_tf32="$(OL_CUDA_TF32=1 timeout "$run_timeout" "$oltrain" --model=gpt --device=cuda $dims --steps=30 --warmup=5 2>&1 | tee /dev/stderr \
  | grep RESULT | tail -1)"
# Without stream-ordered hand-offs (actor/stream_ordered.h): every kernel waits for its producer's
# completion event, a host round trip per act (what they save).
ours_finish="$(timeout "$run_timeout" "$oltrain" --model=gpt --device=cuda $dims --steps=30 --warmup=5 --stream_ordered=false 2>&1 \
  | tee /dev/stderr | grep RESULT | tail -1)"
# Without run-ahead (train/run_training.h): the host fetches step n's loss and feeds step n + 1
# before starting it, so the GPU idles for that bubble every step (what run-ahead saves).
ours_serial="$(timeout "$run_timeout" "$oltrain" --model=gpt --device=cuda $dims --steps=30 --warmup=5 --run_ahead=false 2>&1 \
  | tee /dev/stderr | grep RESULT | tail -1)"
# Two compute streams (weight gradients on the second): registers cross the streams at enqueue
# with CUDA events, or (OL_CUDA_STREAM_EVENTS=0) when their producer finished.
ours_two="$(timeout "$run_timeout" "$oltrain" --model=gpt --device=cuda $dims --steps=30 --warmup=5 --compute_streams=2 2>&1 \
  | tee /dev/stderr | grep RESULT | tail -1)"
ours_two_finish="$(OL_CUDA_STREAM_EVENTS=0 timeout "$run_timeout" "$oltrain" --model=gpt --device=cuda $dims --steps=30 --warmup=5 \
  --compute_streams=2 2>&1 | tee /dev/stderr | grep RESULT | tail -1)"
peer_args="$(echo "$dims" | sed 's/=/ /g')"
peer="$(timeout "$run_timeout" python3 tools/gpu/torch_gpt_cuda.py $peer_args 2>&1 | tee /dev/stderr | grep RESULT | tail -1)"
ours_ms="$(echo "$ours" | sed -n 's/.*median_ms_per_step=\([0-9.]*\).*/\1/p')"
tf32_ms="$(echo "$ours_tf32" | sed -n 's/.*median_ms_per_step=\([0-9.]*\).*/\1/p')"
finish_ms="$(echo "$ours_finish" | sed -n 's/.*median_ms_per_step=\([0-9.]*\).*/\1/p')"
serial_ms="$(echo "$ours_serial" | sed -n 's/.*median_ms_per_step=\([0-9.]*\).*/\1/p')"
two_ms="$(echo "$ours_two" | sed -n 's/.*median_ms_per_step=\([0-9.]*\).*/\1/p')"
two_finish_ms="$(echo "$ours_two_finish" | sed -n 's/.*median_ms_per_step=\([0-9.]*\).*/\1/p')"
peer_ms="$(echo "$peer" | sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p')"
# The step's matmul GFLOP (forward, input and weight gradients; attention's full T x T), as
# tools/bench/peers/torch_gpt.py's gemm_gflop_per_step counts them.
dim() { echo "$dims" | tr ' ' '\n' | sed -n "s/^--$1=//p"; }
gflop="$(awk -v V="$(dim vocab)" -v T="$(dim seq_len)" -v L="$(dim n_layer)" -v C="$(dim n_embd)" -v B="$(dim batch)" \
  'BEGIN { per_token = L * (2 * C * (12 * C) + 4 * T * C) + 2 * C * V; printf "%.3f", 3 * per_token * B * T / 1e9 }')"
tokens="$(echo "$dims" | sed -n 's/.*--seq_len=\([0-9]*\).*--batch=\([0-9]*\).*/\1 \2/p' | awk '{print $1 * $2}')"
# olplan's prediction of the same job with the FP32 H100 profile (issue 12's truth row for a GPU).
predicted_ms=""
if [ -x "$olplan" ]; then
  predicted_ms="$("$olplan" simulate --json --device=cuda --profile tools/plan/profiles/h100_fp32.txt --model=gpt $dims \
    2>/dev/null | python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["step_seconds"] * 1e3))' 2>/dev/null)"
fi
echo
echo "GPT step on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1): $dims"
echo "| runner | ms/step | tokens/s | matmul TFLOP/s | of FP32 peak ($peak_tflops) |"
echo "|---|---|---|---|---|"
row() {
  awk -v n="$1" -v ms="$2" -v g="$3" -v t="$4" -v p="$peak_tflops" 'BEGIN {
    if (ms == "" || ms <= 0) { printf "| %s | failed | | | |\n", n; exit }
    tf = g / ms; printf "| %s | %.2f | %.0f | %.2f | %.1f%% |\n", n, ms, t / (ms / 1e3), tf, 100 * tf / p }'
}
row "oneflow_like (oltrain_cuda)" "$ours_ms" "$gflop" "$tokens"
row "oneflow_like, OL_CUDA_TF32=1 (TF32 matmuls; % of the FP32 peak)" "$tf32_ms" "$gflop" "$tokens"
row "oneflow_like, --stream_ordered=false (hand-offs at completion)" "$finish_ms" "$gflop" "$tokens"
row "oneflow_like, --run_ahead=false (each step started after the last loss is fetched)" "$serial_ms" "$gflop" "$tokens"
row "oneflow_like, --compute_streams=2 (events between the streams)" "$two_ms" "$gflop" "$tokens"
row "oneflow_like, --compute_streams=2, OL_CUDA_STREAM_EVENTS=0 (across streams at completion)" "$two_finish_ms" "$gflop" "$tokens"
row "PyTorch eager" "$peer_ms" "$gflop" "$tokens"
awk -v a="$ours_ms" -v b="$peer_ms" 'BEGIN { if (a > 0 && b > 0) printf "ours / PyTorch (time): %.2f\n", a / b }'
awk -v p="$predicted_ms" -v m="$ours_ms" 'BEGIN { if (p > 0 && m > 0) printf "olplan predicted (h100_fp32 profile): %.2f ms, measured %.2f ms: %+.0f%%\n", p, m, (p / m - 1) * 100 }'

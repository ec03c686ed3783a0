#!/usr/bin/env bash
# Runs the packed CUDA tests (tools/gpu/pack.sh) on a GPU machine and prints one summary.
# Needs no Bazel: only the pack, bash, tar and the machine's CUDA 13 libraries.
#
#   bash tools/gpu/run_checks.sh [--sanitize | --sanitize-only] [--bench] [PACK]
#     PACK: .gpu_pack/gpu_pack.tar.gz (default) or its unpacked gpu_pack/ folder
#     --sanitize: also run cuda_kernels_test under compute-sanitizer's memcheck (out-of-bounds
#              and misaligned accesses) and racecheck (shared-memory races; the cuBLAS tests
#              MatmulTest and OpKernelsTest.Matmul left out); each counts as one more binary
#              in the verdict
#     --sanitize-only: the sanitizer runs alone (a second device call after the plain tests)
#     --bench: after the tests, run the pack's benchmarks (bench/*: kernel timings and the GPT
#              step as markdown tables, also written to $OUT/bench.md); they do not change the
#              verdict
# Environment: CHECK_TIMEOUT_S (per binary, default 120), SANITIZE_TIMEOUT_S (per sanitizer
# run, default 180), OUT (if set, logs and the summary are
# also written there: the device tool returns $OUT's files), GTEST_FILTER (passed through).
#
# For each binary: one run with a timeout; PASS (none failed; skips only for reasons a one-GPU
# machine has, e.g. "needs 2 CUDA devices"), SKIP (no GPU visible: its GPU tests skipped), FAIL
# (a failed test, a crash, a missing library, or "no CUDA device" although nvidia-smi lists a
# GPU) or TIMEOUT. Last line: "N passed, N failed" (binaries; SKIP counts as neither).
# Exit 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/../.."

bench=0 sanitize=0 plain=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench=1; shift ;;
    --sanitize) sanitize=1; shift ;;
    --sanitize-only) sanitize=1; plain=0; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
pack="${1:-.gpu_pack/gpu_pack.tar.gz}"
timeout_s="${CHECK_TIMEOUT_S:-120}"
work="${TMPDIR:-/tmp}/ol_gpu_checks"
mkdir -p "$work"
logs="${OUT:-$work/logs}"
mkdir -p "$logs"

if [ -d "$pack" ]; then
  root="$pack"
elif [ -f "$pack" ]; then
  rm -rf "$work/gpu_pack" && mkdir -p "$work" && tar -C "$work" -xzf "$pack" || { echo "cannot unpack $pack"; exit 1; }
  root="$work/gpu_pack"
else
  echo "run_checks.sh: no pack at $pack (run tools/gpu/pack.sh where Bazel is, then carry .gpu_pack)"
  echo "0 passed, 1 failed"
  exit 1
fi
[ -f "$root/MANIFEST.txt" ] && sed -n '1,4p' "$root/MANIFEST.txt"

# The machine's GPU, if any.
gpu_visible=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >"$work/nvidia-smi.txt" 2>&1; then
  gpu_visible=1
  echo "GPU: $(head -1 "$work/nvidia-smi.txt")"
else
  echo "GPU: none visible (nvidia-smi: $(head -1 "$work/nvidia-smi.txt" 2>/dev/null || echo 'not installed'))"
fi

# Libraries: the pack's, then the machine's CUDA, then PyTorch's nvidia wheels as a fallback.
lib_path="$root/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && lib_path="$lib_path:$d"
done
for d in /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib /usr/local/lib/python3*/dist-packages/nvidia/*/lib; do
  [ -d "$d" ] && lib_path="$lib_path:$d"
done
export LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Missing libraries (or too old a libstdc++: then the pack's lib-compat/ is added).
loads() { ldd "$1" 2>&1 | grep -E "not found|version .* not found" ; }
for b in "$root"/bin/*; do
  if loads "$b" | grep -q "libstdc++\|libgcc_s"; then
    echo "using the pack's libstdc++ (the machine's is older)"
    export LD_LIBRARY_PATH="$root/lib-compat:$LD_LIBRARY_PATH"
    break
  fi
done

passed=0 failed=0 skipped=0
summary="$logs/summary.txt"
: >"$summary"

# check NAME LOG CMD...: runs one gtest binary (CMD) with the timeout, records its verdict.
check() {
  local name="$1" log="$2"
  shift 2
  local start rc secs n_pass n_fail n_skip n_total counts skip_reason verdict
  start=$(date +%s)
  timeout "$timeout_s" "$@" --gtest_color=no ${GTEST_FILTER:+--gtest_filter="$GTEST_FILTER"} >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  n_pass=$(grep -oP '^\[  PASSED  \] \K[0-9]+' "$log" | tail -1)
  n_fail=$(grep -oP '^\[  FAILED  \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1)
  n_skip=$(grep -oP '^\[  SKIPPED \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1)
  n_total=$(grep -oP '^\[==========\] \K[0-9]+(?= tests? from .* ran)' "$log" | tail -1)
  counts="${n_total:-?} tests: ${n_pass:-0} passed, ${n_fail:-0} failed, ${n_skip:-0} skipped, ${secs}s"
  skip_reason="$(grep -m1 -oE '(no CUDA device|needs [0-9]+ CUDA devices).*' "$log")"
  if [ "$rc" = 124 ]; then
    verdict="TIMEOUT after ${timeout_s}s"
  elif [ "$rc" != 0 ] || [ "${n_fail:-0}" != 0 ]; then
    verdict="FAIL (exit $rc; $counts$(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors?' "$log" | sed 's/^/; /'))"
  elif [ "$gpu_visible" = 1 ] && grep -q 'no CUDA device' "$log"; then
    verdict="FAIL (nvidia-smi lists a GPU but the tests found none: $(grep -m1 -o 'no CUDA device.*' "$log"))"
  elif [ "$gpu_visible" = 0 ] && [ "${n_skip:-0}" != 0 ]; then
    verdict="SKIP ($counts; $skip_reason)"
  else
    verdict="PASS ($counts${skip_reason:+; skipped: $skip_reason})"
  fi
  record "$name" "$log" "$verdict"
}

# record NAME LOG VERDICT: counts it, and keeps a failure's first messages for the summary.
record() {
  case "$3" in
    PASS*) passed=$((passed + 1)) ;;
    SKIP*) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1))
       { echo "  $1:"
         grep -E -A4 '^\[  FAILED  \] [A-Za-z]|Failure$|^========= (Invalid|Race|Error|Program hit)' "$2" | head -40 \
           | sed 's/^/    /'; } >>"$summary.details" ;;
  esac
  echo "$1: $3" | tee -a "$summary"
}

for b in "$root"/bin/*; do
  [ "$plain" = 1 ] || break  # --sanitize-only: the sanitizer runs below, not the plain ones
  name="$(basename "$b")"
  log="$logs/$name.log"
  missing="$(loads "$b")"
  if [ -n "$missing" ]; then
    echo "$missing" >"$log"
    record "$name" "$log" "FAIL (missing libraries: $(echo "$missing" | awk '{print $1}' | tr '\n' ' '))"
  else
    check "$name" "$log" "$b"
  fi
done

if [ "$sanitize" = 1 ]; then
  sanitizer="$(command -v compute-sanitizer || true)"
  for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -z "$sanitizer" ] && [ -x "$c" ] && sanitizer="$c"
  done
  if [ "$gpu_visible" = 0 ]; then
    echo "compute-sanitizer: SKIP (no GPU visible)" | tee -a "$summary"
  elif [ -z "$sanitizer" ]; then
    record "compute-sanitizer" /dev/null "FAIL (compute-sanitizer not found)"
  else
    timeout_s="${SANITIZE_TIMEOUT_S:-180}"
    check "cuda_kernels_test under memcheck" "$logs/memcheck.log" \
      "$sanitizer" --tool memcheck --error-exitcode 99 "$root/bin/cuda_kernels_test"
    GTEST_FILTER="${GTEST_FILTER:--MatmulTest.*:OpKernelsTest.Matmul}" check "cuda_kernels_test under racecheck" "$logs/racecheck.log" \
      "$sanitizer" --tool racecheck --error-exitcode 99 "$root/bin/cuda_kernels_test"
  fi
fi

if [ -f "$summary.details" ]; then
  echo "details:" | tee -a "$summary"
  tee -a "$summary" <"$summary.details"
  rm -f "$summary.details"
fi
if [ "$bench" = 1 ]; then
  : >"$logs/bench.md"
  for b in "$root"/bench/*; do
    [ -x "$b" ] || continue
    echo "== $(basename "$b")"
    timeout "$timeout_s" "$b" 2>&1 | tee -a "$logs/bench.md"
  done
fi
echo "logs: $logs"
echo "$passed passed, $failed failed$([ "$skipped" -gt 0 ] && echo " ($skipped skipped: no GPU)")" | tee -a "$summary"
[ "$failed" = 0 ]

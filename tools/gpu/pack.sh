#!/usr/bin/env bash
# Packs the CUDA test binaries for a GPU machine that has no Bazel and no Debian packages (the
# `device` tool's machines: CUDA 13 at /usr/local/cuda, no network). Run HERE, where Bazel and
# the CUDA toolkit are:
#
#   bash tools/gpu/pack.sh            # -> .gpu_pack/gpu_pack.tar.gz (git-ignored), ~20 MB
#
# It builds the binaries (tools/bazel.sh), copies them with every shared library they load that
# the GPU machine may lack (ldd: Debian's absl, glog, gflags, gtest, protobuf, OpenBLAS,
# gfortran, ..., Bazel's own solib .so files, and libcudart, which is small). Left out:
# glibc's own libraries and the big CUDA libraries the GPU machine has (libcuda, cuBLAS,
# cuBLASLt, NCCL: found there under /usr/local/cuda/lib64 or PyTorch's nvidia wheels).
# libstdc++ / libgcc_s go to lib-compat/, used there only if the system's are too old.
# Then tools/gpu/run_checks.sh (tracked, so it travels with the tree) runs them there:
#
#   device run, carry [".gpu_pack"]:  bash tools/gpu/run_checks.sh
#
# Usage: pack.sh [--out DIR] [--no-build] [bazel test target ...]   (default: the targets below)
# The benchmark binaries (bench_targets) go to bench/ in the pack (run_checks.sh --bench).
set -euo pipefail
cd "$(dirname "$0")/../.."

out=.gpu_pack
build=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  # cuda_kernels_test holds the kernel tests and the op kernel table's (op_kernels_test.cc).
  targets=(
    //oneflow_like/core/cuda:cuda_device_test
    //oneflow_like/core/cuda:cuda_kernels_test
    //oneflow_like/comm:nccl_collective_test
    //oneflow_like/train:cuda_trainer_test
  )
fi
bench_targets=(//oneflow_like/core/cuda:cuda_kernel_bench)
# Binaries the benchmarks run (the pack's tools/), and bench scripts copied into bench/.
tool_targets=(//tools/train:oltrain_cuda //tools/plan:olplan)
bench_scripts=(tools/gpu/gpt_step_bench.sh)

if [ "$build" = 1 ]; then
  bash tools/bazel.sh build "${targets[@]}" "${bench_targets[@]}" "${tool_targets[@]}" --color=no --curses=no \
    --symlink_prefix=/
fi
bin_dir="$(bash tools/bazel.sh info bazel-bin 2>/dev/null)"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/gpu_pack/bin" "$stage/gpu_pack/bench" "$stage/gpu_pack/tools" "$stage/gpu_pack/lib" \
  "$stage/gpu_pack/lib-compat"
for s in "${bench_scripts[@]}"; do cp "$s" "$stage/gpu_pack/bench/"; done

# Libraries the GPU machine provides itself (glibc, the driver, the big CUDA libraries).
system_lib() {
  case "$1" in
    linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*) return 0 ;;
    libcuda.so*|libcublas.so*|libcublasLt.so*|libnccl.so*|libnvidia-*) return 0 ;;
  esac
  return 1
}

for t in "${targets[@]}" "${bench_targets[@]}" "${tool_targets[@]}"; do
  pkg="${t#//}"; pkg="${pkg%%:*}"; name="${t##*:}"
  src="$bin_dir/$pkg/$name"
  [ -x "$src" ] || { echo "pack.sh: $src is missing (build $t first)" >&2; exit 1; }
  case " ${bench_targets[*]} " in *" $t "*) kind=bench ;; *) kind=bin ;; esac
  case " ${tool_targets[*]} " in *" $t "*) kind=tools ;; esac
  cp "$src" "$stage/gpu_pack/$kind/$name"
  chmod u+w "$stage/gpu_pack/$kind/$name"
  strip --strip-debug "$stage/gpu_pack/$kind/$name"
  # ldd lines: "libfoo.so.1 => /path/libfoo.so.1 (0x...)"; unresolved ones say "not found".
  while read -r lib arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = "not" ]; then echo "pack.sh: $name needs $lib, which ldd cannot find here" >&2; exit 1; fi
    system_lib "$lib" && continue
    case "$lib" in
      libstdc++.so*|libgcc_s.so*) dest=lib-compat ;;
      *) dest=lib ;;
    esac
    [ -e "$stage/gpu_pack/$dest/$lib" ] || cp -L "$path" "$stage/gpu_pack/$dest/$lib"
  done < <(ldd "$src")
done

{
  echo "oneflow_like GPU test pack"
  echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD -- oneflow_like tools || echo ' (with uncommitted changes)')"
  echo "packed: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version | tail -1)"
  echo "binaries:"; (cd "$stage/gpu_pack" && ls -1 bin bench | sed 's/^/  /')
  echo "libraries:"; (cd "$stage/gpu_pack" && ls -1 lib lib-compat | sed 's/^/  /')
} > "$stage/gpu_pack/MANIFEST.txt"

mkdir -p "$out"
tar -C "$stage" -czf "$out/gpu_pack.tar.gz.tmp" gpu_pack
mv "$out/gpu_pack.tar.gz.tmp" "$out/gpu_pack.tar.gz"
size=$(du -m "$out/gpu_pack.tar.gz" | cut -f1)
echo "pack.sh: $out/gpu_pack.tar.gz (${size} MB): $(ls "$stage/gpu_pack/bin" "$stage/gpu_pack/bench" | grep -v ':$' | tr '\n' ' ')"
if [ "$size" -gt 48 ]; then
  echo "pack.sh: warning: over 48 MB; the device tool carries 64 MiB with the working tree" >&2
fi

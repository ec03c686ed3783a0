#!/usr/bin/env bash
# The main job: set-up, build, run. Until the actor runtime lands this is the core demo: a real
# MLP training run on the CPU kernels plus a check that 4-device data- and tensor-parallel
# layouts of a layer equal the single-device result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/bazel.sh build -c opt --symlink_prefix=/ --color=no --curses=no //tools/demo:core_demo 2>&1 \
  | grep -vE '^(INFO|Loading|Analyzing)' || true
bin="$(bash tools/bazel.sh info -c opt bazel-bin 2>/dev/null)/tools/demo/core_demo"
exec "$bin" "$@"

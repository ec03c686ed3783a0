#!/usr/bin/env bash
# Runs Debian's Bazel 4.2.3 with the project's fixed output base, so the README commands,
# .ci/run and fresh clones share one build cache (plus the disk cache set in .bazelrc).
# --batch: no server survives the command. Usage: tools/bazel.sh build //...
set -euo pipefail
cd "$(dirname "$0")/.."
# Stale bazel-* links into another output base would be walked by //... ; we use none.
find . -maxdepth 1 -name 'bazel-*' -type l -delete
exec bazel --batch --output_base="${HOME}/.cache/oneflow_like-bazel/ob" "$@"

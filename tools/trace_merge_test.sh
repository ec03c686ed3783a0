#!/usr/bin/env bash
# Runs tools/trace_merge_test.py from the runfiles root (where tools/ and oneflow_like/ are).
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider tools/trace_merge_test.py "$@"

#!/usr/bin/env bash
# Runs the multi-process tests (pytest) from the runfiles root, where tools/olrun,
# tools/train/oltrain and configs/ are.
set -euo pipefail
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/multiprocess/multiprocess_test.py "$@"

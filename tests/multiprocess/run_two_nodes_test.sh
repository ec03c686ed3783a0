#!/usr/bin/env bash
# Runs the two-node test (pytest) from the runfiles root, where tools/olrun,
# tools/train/oltrain and configs/ are. -s -rs: the set-up line (namespaces, rate limit or why
# not) and any skip reason land in the test log.
set -euo pipefail
exec /usr/bin/python3 -m pytest -q -s -rs -p no:cacheprovider tests/multiprocess/two_nodes_test.py "$@"

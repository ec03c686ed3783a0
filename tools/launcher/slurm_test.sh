#!/usr/bin/env bash
# Runs tools/launcher/slurm_test.py from the runfiles root (where tools/olrun is).
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider tools/launcher/slurm_test.py "$@"

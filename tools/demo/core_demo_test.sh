#!/usr/bin/env bash
set -euo pipefail
out=$(tools/demo/core_demo --steps 15)
echo "$out"
grep -q "core demo OK" <<<"$out"
# Bad flags are rejected with a message, not a crash.
if tools/demo/core_demo --bogus 2>err.txt; then echo "accepted a bad flag"; exit 1; fi
grep -q "unknown flag '--bogus'" err.txt

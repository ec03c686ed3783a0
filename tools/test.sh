#!/usr/bin/env bash
# The whole test suite: set-up (Debian packages), then every Bazel test (C++ and Python),
# fully offline. Ends with the line "N passed, N failed" (N = test cases when GoogleTest
# reports them, else test targets). Exit code: Bazel's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
log=$(mktemp)
set +e
bash tools/bazel.sh test //... --symlink_prefix=/ --nocache_test_results --test_summary=detailed \
  --color=no --curses=no --show_progress_rate_limit=30 "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# Sum GoogleTest case counts per target ("finished with N passing and M failing" lines of
# --test_summary=detailed); targets without such a line count as one case each.
read -r passed failed < <(awk '
  /^\/\/[^ ]+ +(\(cached\) )?(PASSED|FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)/ {
    if (target != "" && !counted) { if (ok) p++; else f++ }
    target=$1; counted=0; ok=($0 ~ /PASSED/)
  }
  /finished with [0-9]+ passing and [0-9]+ failing/ {
    match($0, /finished with [0-9]+ passing and [0-9]+ failing/); s=substr($0, RSTART, RLENGTH);
    split(s, w, " "); if (!counted) { p += w[3]; f += w[6]; counted=1 } else { p += w[3]; f += w[6] }
  }
  END { if (target != "" && !counted) { if (ok) p++; else f++ } print p+0, f+0 }' "$log")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # build failure: no target reported
rm -f "$log"
echo "${passed} passed, ${failed} failed"
exit "$rc"

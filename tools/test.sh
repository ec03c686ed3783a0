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
# Bazel's summary is not a recognised closing line: print one. Prefer test-case counts (GoogleTest
# XML read by --test_summary=detailed), else count test targets.
cases=$(grep -oE 'finished with [0-9]+ passing and [0-9]+ failing' "$log" | tail -1 || true)
if [ -n "$cases" ]; then
  set -- $cases; passed=$3; failed=$6
else
  passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" || true)
  failed=$(grep -cE '^//[^ ]+ +.*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$log" || true)
fi
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # build failure: no target reported
rm -f "$log"
# `import oneflow_like` for /usr/bin/python3 (user site), from the extension the tests just built.
bash tools/install_python.sh -c fastbuild 2>&1 | tail -1 || echo "install_python: failed (see tools/install_python.sh)"
echo "${passed} passed, ${failed} failed"
exit "$rc"

#!/usr/bin/env bash
# Makes `import oneflow_like as ol` work for Debian's /usr/bin/python3: builds the extension with
# Bazel and installs the package (python/oneflow_like + _C.so) into the user site-packages
# ($(/usr/bin/python3 -m site --user-site)/oneflow_like). Idempotent. Called by both README
# commands; on its own: `bash tools/install_python.sh` (add -c opt for an optimized build, the
# default here; tools/test.sh passes its own build mode so nothing is compiled twice).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
mode=("$@"); [ ${#mode[@]} -eq 0 ] && mode=(-c opt)
bash tools/bazel.sh build "${mode[@]}" --color=no --curses=no //python/oneflow_like:_C.so 2>&1 \
  | grep -vE '^(INFO|Loading|Analyzing|Target|  bazel-bin)' || true
bin="$(bash tools/bazel.sh info "${mode[@]}" bazel-bin 2>/dev/null)"
site="$(/usr/bin/python3 -m site --user-site)"
dest="$site/oneflow_like"
rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
( cd python/oneflow_like && find . -name '*.py' -print0 | xargs -0 -I{} cp --parents {} "$dest.tmp/" )
cp "$bin/python/oneflow_like/_C.so" "$dest.tmp/_C.so" && chmod u+w "$dest.tmp/_C.so"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
/usr/bin/python3 -c 'import oneflow_like as ol; print("installed oneflow_like", ol.__version__, "->", ol.__file__)' >&2

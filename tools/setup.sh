#!/usr/bin/env bash
# Installs every Debian package oneflow_like needs. Idempotent; silent when all is present.
# Called by both README commands (tools/run_main.sh, tools/test.sh) and by .ci/run.
set -euo pipefail
PKGS=(
  bazel-bootstrap bazel-rules-java bazel-rules-proto bazel-skylib   # build (offline Bazel 4.2.3)
  libprotobuf-dev protobuf-compiler                                 # Job / Plan schemas
  libabsl-dev libgoogle-glog-dev libgtest-dev                       # status, logging, tests
  libopenblas-dev                                                   # cblas_sgemm
  pybind11-dev python3-dev python3-numpy python3-pytest             # python/ API and its tests
  python3-torch                                                     # references for the Python API's tests (PyTorch 1.13)
  chromium                                                          # olplan html's page test (headless)
  libibverbs-dev                                                    # comm/ RDMA transport (built always; runs only with a device)
  libgloo-dev                                                       # comm/ gloo collectives (CPU)
  iperf3                                                            # loopback TCP limit of tools/bench (all.sh, transport_bench.sh)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing ${#missing[@]} Debian package(s): ${missing[*]}" >&2
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2

#!/usr/bin/env bash
# TcpTransport (comm/tcp_transport.h) vs iperf3 on 127.0.0.1, in the same run: builds and runs
# //tools/bench:transport_bench (-c opt: two ranks in one process, throughput for 1 KiB .. 64 MiB
# messages and 64-byte ping-pong latency) between two iperf3 runs (one TCP stream, default
# 128 KiB writes, --seconds each), and prints our GB/s next to iperf3's mean and the ratio. Goal: >= 0.70 of iperf3 for
# large messages. Machines here are shared: run it when the load is low, compare ratios.
# Then the same figures for ShmTransport (the shared-memory transport oltrain uses between the
# ranks of a node), against the same iperf3 mean for scale.
#
# Usage: tools/bench/transport_bench.sh [--rounds 3] [--megabytes 1024] [--seconds 5]
#   OUTPUT_BASE=...   Bazel output base for the build (default: tools/bazel.sh's)
#   BENCH=/path/to/transport_bench   skip the build and use this binary
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=3
MEGABYTES=1024
SECONDS_IPERF=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --megabytes) MEGABYTES="$2"; shift 2 ;;
    --seconds) SECONDS_IPERF="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "transport_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if ! command -v iperf3 >/dev/null; then
  echo "transport_bench.sh: installing iperf3" >&2
  apt-get install -y iperf3 >&2
fi

if [[ -z "${BENCH:-}" ]]; then
  if [[ -n "${OUTPUT_BASE:-}" ]]; then
    BAZEL=(bazel --batch --output_base="${OUTPUT_BASE}")
  else
    BAZEL=(bash tools/bazel.sh)
  fi
  "${BAZEL[@]}" build -c opt --color=no --curses=no //tools/bench:transport_bench >&2
  BENCH="$("${BAZEL[@]}" info -c opt bazel-bin 2>/dev/null)/tools/bench/transport_bench"
fi

# iperf3 on a free ephemeral port, one stream, for SECONDS_IPERF; prints receiver-side GB/s.
run_iperf3() {
  local port server json
  port="$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  iperf3 -s -1 -B 127.0.0.1 -p "${port}" >/dev/null 2>&1 &
  server=$!
  json="$(mktemp)"
  for _ in $(seq 50); do
    iperf3 -c 127.0.0.1 -p "${port}" -t "${SECONDS_IPERF}" -J >"${json}" 2>/dev/null && break
    sleep 0.1
  done
  kill "${server}" 2>/dev/null || true
  /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("%.3f" % (d["end"]["sum_received"]["bits_per_second"] / 8e9))' "${json}"
  rm -f "${json}"
}

# iperf3 before and after ours (the machine is shared; the mean of both is the reference).
echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)"
IPERF_BEFORE="$(run_iperf3)"
OURS="$("${BENCH}" --rounds "${ROUNDS}" --megabytes "${MEGABYTES}")"
echo "${OURS}"
IPERF_AFTER="$(run_iperf3)"
IPERF="$(/usr/bin/python3 -c "print('%.3f' % ((${IPERF_BEFORE} + ${IPERF_AFTER}) / 2))")"
echo "iperf3 GB/s: before ${IPERF_BEFORE}, after ${IPERF_AFTER}, mean ${IPERF}"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
printf "%-14s %12s %12s %8s\n" "message size" "ours GB/s" "iperf3 GB/s" "ratio"
echo "${OURS}" | awk -v iperf="${IPERF}" '$1 == "result" && $2 == "throughput" {
  size = $3; label = (size >= 1048576) ? (size / 1048576) " MiB" : (size / 1024) " KiB";
  printf "%-14s %12.2f %12.2f %8.2f\n", label, $4, iperf, $4 / iperf }'
echo "${OURS}" | awk -v iperf="${IPERF}" '$1 == "result" && $2 == "owned_throughput" {
  size = $3; label = (size >= 1048576) ? (size / 1048576) " MiB" : (size / 1024) " KiB";
  printf "%-14s %12.2f %12.2f %8.2f   (copy + SendOwned: the runtime, multi-slot registers)\n", label, $4, iperf, $4 / iperf }'
echo "${OURS}" | awk -v iperf="${IPERF}" '$1 == "result" && $2 == "registered_throughput" {
  size = $3; label = (size >= 1048576) ? (size / 1048576) " MiB" : (size / 1024) " KiB";
  printf "%-14s %12.2f %12.2f %8.2f   (SendRegistered, zero copy: the runtime, one-slot registers)\n", label, $4, iperf, $4 / iperf }'
echo "${OURS}" | awk '$1 == "result" && $2 == "latency_us" {
  printf "64-byte round trip: median %.1f us, p99 %.1f us\n", $3, $4 }'
echo
SHM="$("${BENCH}" --shm 1 --rounds "${ROUNDS}" --megabytes "${MEGABYTES}")"
echo "${SHM}"
printf "%-14s %12s %12s %8s\n" "message size" "shm GB/s" "iperf3 GB/s" "ratio"
echo "${SHM}" | awk -v iperf="${IPERF}" '$1 == "result" && $2 ~ /throughput$/ {
  size = $3; label = (size >= 1048576) ? (size / 1048576) " MiB" : (size / 1024) " KiB";
  printf "%-14s %12.2f %12.2f %8.2f   (%s)\n", label, $4, iperf, $4 / iperf, $2 }'
echo "${SHM}" | awk '$1 == "result" && $2 == "latency_us" {
  printf "shm 64-byte round trip: median %.1f us, p99 %.1f us\n", $3, $4 }'

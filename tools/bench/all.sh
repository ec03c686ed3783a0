#!/usr/bin/env bash
# Every benchmark of tools/bench with few rounds, and ONE markdown table: per benchmark our
# number, the peer's (PyTorch eager / DDP / gloo from tools/bench/peers, OpenBLAS, memcpy, iperf3),
# the ratio ours / peer, and the fraction of the physical limit that bounds it. The limits are
# measured in the same run, first:
#   sgemm rate   OpenBLAS cblas_sgemm at 1024^3 and 2048^3 (kernel_bench's baseline), the best,
#                with 1 and with 2 threads
#   memcpy rate  one thread, bytes read + written per second (kernel_bench's baseline), the best
#   loopback TCP iperf3, one stream over 127.0.0.1 (skipped, saying so, when iperf3 is missing)
# Fractions: a step time is compared with the time its GEMMs need at the sgemm rate (W1: 5.91,
# W2: 24.16 GFLOP per step; half of it per rank for 2-rank data parallel, 1 thread per rank), a
# kernel or a transfer rate with the memcpy or iperf3 rate. ratio < 1 is better for times
# (ms, us, s), > 1 for rates (GFLOP/s, GB/s).
#
# Usage: bash tools/bench/all.sh [--rounds 1] [--out DIR] [--table FILE] [--skip "NAMES"] [--only "NAMES"]
#   NAMES (in run order): kernel workload ddp collective transport runtime python two_node compile olplan
#   --out DIR    every benchmark's log and the table (default: a new /tmp/oneflow_like-bench.XXXXXX)
#   --table FILE the markdown table (default DIR/bench_results.md); it is also printed at the end
#   --timeout S  per benchmark (default 900); a benchmark past it is stopped and its rows say so
#   SKIP_BUILD=1 use the binaries already under `tools/bazel.sh info -c opt bazel-bin`
#   BIN_DIR=DIR  take oltrain, kernel_bench, transport_bench, collective_bench, runtime_bench,
#                compile_bench and olplan from DIR (e.g. a previous run's OUT/bin): no Bazel at all
# Needs the README's set-up (tools/setup.sh) and /usr/bin/python3 with torch (python3-torch): a
# benchmark whose requirement is missing (torch, root for two_node, iperf3) is skipped with one
# line naming why. About 6-10 minutes on a 2-core machine with --rounds 1, plus the build.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"
rounds=1
out=""
table=""
skip=""
only=""
per_timeout=900
all_names="kernel workload ddp collective transport runtime python two_node compile olplan"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --table) table="$2"; shift 2 ;;
    --skip) skip="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --timeout) per_timeout="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "all.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for n in $skip $only; do
  [[ " $all_names " == *" $n "* ]] || { echo "all.sh: unknown benchmark '$n' (one of: $all_names)" >&2; exit 2; }
done
[ -n "$out" ] || out="$(mktemp -d /tmp/oneflow_like-bench.XXXXXX)"
mkdir -p "$out/logs" "$out/bin"
out="$(cd "$out" && pwd)"
[ -n "$table" ] || table="$out/bench_results.md"
rows="$out/rows.tsv"
notes="$out/notes.txt"
: >"$rows"
: >"$notes"
py=/usr/bin/python3
started=$(date +%s)

say() { echo "all.sh: $*" >&2; }
note() { echo "$*" >>"$notes"; say "$*"; }
wanted() {
  [[ " $skip " == *" $1 "* ]] && return 1
  [ -z "$only" ] || [[ " $only " == *" $1 "* ]]
}
# row BENCHMARK UNIT OURS PEER_NAME PEER LIMIT_NAME LIMIT NOTE: one line of the table. LIMIT is in
# the unit of OURS: the ideal time for times, the limit rate for rates; "" where there is none.
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$rows"; }
num() { [[ "${1:-}" =~ ^[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }
calc() { awk "BEGIN { printf \"%.4g\", ($1) }"; }
# run NAME CMD...: the command's output to logs/NAME.log under the per-benchmark timeout.
run() {
  local name="$1" t0 rc=0
  shift
  t0=$(date +%s)
  say "[$name] $* (log: $out/logs/$name.log)"
  timeout -k 20 "$per_timeout" "$@" >"$out/logs/$name.log" 2>&1 || rc=$?
  say "[$name] done in $(($(date +%s) - t0)) s (exit $rc)"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then note "$name: stopped after the ${per_timeout} s timeout (partial log: logs/$name.log)"; fi
  if [ "$rc" -ne 0 ]; then note "$name: exited $rc; last lines of logs/$name.log:"; tail -5 "$out/logs/$name.log" | sed 's/^/    /' >>"$notes"; fi
  return 0
}

have_torch=1
$py -c "import torch" 2>/dev/null || have_torch=0
torch_why="/usr/bin/python3 lacks torch (apt-get install python3-torch)"

# ---- build once; private copies (builds running beside us cannot swap a binary mid-run) --------
targets=(//tools/train:oltrain //tools/bench:kernel_bench //tools/bench:transport_bench
         //tools/bench:collective_bench //tools/bench:runtime_bench //tools/bench:compile_bench //tools/plan:olplan)
binaries=(train/oltrain bench/kernel_bench bench/transport_bench bench/collective_bench bench/runtime_bench
          bench/compile_bench plan/olplan)
if [ -n "${BIN_DIR:-}" ]; then
  for t in "${binaries[@]}"; do
    [ "$(cd "$BIN_DIR" && pwd)" = "$out/bin" ] || cp "$BIN_DIR/${t##*/}" "$out/bin/" || { say "missing $BIN_DIR/${t##*/}"; exit 1; }
  done
else
  if [ -z "${SKIP_BUILD:-}" ]; then
    say "building ${targets[*]} (-c opt; log: $out/logs/build.log)"
    bash tools/bazel.sh build -c opt --color=no --curses=no "${targets[@]}" >"$out/logs/build.log" 2>&1 ||
      { tail -30 "$out/logs/build.log" >&2; say "build failed"; exit 1; }
  fi
  bazel_bin="$(bash tools/bazel.sh info -c opt bazel-bin 2>/dev/null)"
  for t in "${binaries[@]}"; do
    cp "$bazel_bin/tools/$t" "$out/bin/" || { say "missing $bazel_bin/tools/$t (build it, or drop SKIP_BUILD)"; exit 1; }
  done
fi
bin="$out/bin"
export OLTRAIN="$bin/oltrain"

echo "machine: $(getconf _NPROCESSORS_ONLN) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" >"$out/header.txt"
echo "commit: $(git log -1 --format='%h %cd' --date=short 2>/dev/null || echo '?')$(git diff --quiet HEAD -- 2>/dev/null || echo ' + working tree'); load before: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/header.txt"
echo "torch: $([ $have_torch = 1 ] && $py -c 'import torch; print(torch.__version__)' || echo 'not installed'); rounds: $rounds" >>"$out/header.txt"

# ---- physical limits -----------------------------------------------------------------------
say "[limits] sgemm and memcpy (kernel_bench, 1 and 2 OpenBLAS threads)"
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$bin/kernel_bench" >"$out/logs/kernel_T1.log" 2>&1 || true
OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 "$bin/kernel_bench" >"$out/logs/kernel_T2.log" 2>&1 || true
# matmul rows: "matmul N^3 GFLOP/s  kernel  sgemm  ratio%"; GB/s rows: "op  kernel  memcpy  ratio%".
best_col() { awk -v pat="$2" -v col="$3" '$0 ~ pat && $col + 0 > best { best = $col + 0 } END { if (best > 0) print best }' "$1"; }
sgemm1="$(best_col "$out/logs/kernel_T1.log" '^matmul [0-9]+\\^3 GFLOP' 5)"
sgemm2="$(best_col "$out/logs/kernel_T2.log" '^matmul [0-9]+\\^3 GFLOP' 5)"
memcpy="$(best_col "$out/logs/kernel_T1.log" '^(add|gelu|softmax|layer_norm) +[0-9]' 3)"
num "$sgemm1" || { say "could not measure the sgemm rate (logs/kernel_T1.log)"; sgemm1=""; }
num "$sgemm2" || sgemm2=""
# Two threads can always do what one does: on a loaded machine the 2-thread figure can fall below.
if num "$sgemm1" && num "$sgemm2" && awk -v a="$sgemm2" -v b="$sgemm1" 'BEGIN { exit !(a < b) }'; then sgemm2="$sgemm1"; fi
num "$memcpy" || memcpy=""
iperf=""
if command -v iperf3 >/dev/null; then
  say "[limits] loopback TCP (iperf3, one stream, 3 s)"
  port="$($py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  iperf3 -s -B 127.0.0.1 -p "$port" >"$out/logs/iperf3_server.log" 2>&1 &   # until killed: a refused try costs nothing
  server=$!
  for _ in $(seq 100); do
    iperf3 -c 127.0.0.1 -p "$port" -t 3 -J >"$out/logs/iperf3.json" 2>/dev/null && break
    sleep 0.1
  done
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  iperf="$($py -c 'import json, sys; print("%.3f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e9))' \
           "$out/logs/iperf3.json" 2>/dev/null || true)"
  num "$iperf" || { note "iperf3 failed (logs/iperf3.json): no loopback TCP limit"; iperf=""; }
else
  note "iperf3 not installed: no loopback TCP limit (apt-get install iperf3, or bash tools/setup.sh)"
fi
echo "limits: sgemm ${sgemm1:-?} GFLOP/s on 1 thread, ${sgemm2:-?} on 2 (OpenBLAS, best of 1024^3 and 2048^3);" \
  "memcpy ${memcpy:-?} GB/s (1 thread, bytes read + written); loopback TCP ${iperf:-n/a} GB/s (iperf3, 1 stream)" \
  >>"$out/header.txt"

# GEMM work per step (= peers' gemm_gflop_per_step): W1 11 products of 256x1024x1024 (the first
# layer needs no input gradient); W2 3 x (forward products per token) x 8 x 128 tokens.
w1_gflop=$(calc "11 * 2 * 256 * 1024 * 1024 / 1e9")
w2_gflop=$(calc "3 * (4 * (2 * 256 * 12 * 256 + 4 * 128 * 256) + 2 * 256 * 2048) * 8 * 128 / 1e9")
# ideal_ms GFLOP RATE: ms at RATE GFLOP/s ("" without a rate).
ideal_ms() { if num "$2"; then calc "$1 / $2 * 1e3"; fi; }
sgemm_of() { if [ "$1" = 2 ]; then echo "$sgemm2"; else echo "$sgemm1"; fi; }

# ---- kernel_bench: kernels vs sgemm / memcpy (the T=1 log above; matmul also at T=2) --------------
if wanted kernel; then
  for t in 1 2; do
    while read -r label n kern base; do
      row "kernel matmul ${n}^3, T=$t (GFLOP/s)" "GFLOP/s" "$kern" "cblas_sgemm" "$base" "sgemm $t thr" "$(sgemm_of $t)" ""
    done < <(awk '/^matmul [0-9]+\^3 GFLOP/ { split($2, a, "^"); print "matmul", a[1], $4, $5 }' "$out/logs/kernel_T$t.log")
  done
  while read -r op kern base; do
    row "kernel $op, float32[4096,1024] (GB/s)" "GB/s" "$kern" "memcpy" "$base" "memcpy" "$memcpy" ""
  done < <(awk '/^(add|gelu|softmax|layer_norm) +[0-9]/ { print $1, $2, $3 }' "$out/logs/kernel_T1.log")
fi

# ---- workload_bench: W1 / W2, one rank, T = 1 and 2, vs PyTorch eager ------------------------
if wanted workload; then
  if [ $have_torch = 0 ]; then note "workload: SKIPPED: $torch_why"; else
    run workload bash tools/bench/workload_bench.sh --rounds "$rounds" --threads "1 2"
    # summary: "mlp  T=1  oneflow_like    53.91 ms  torch    75.00 ms  ratio ..."
    while read -r w t o p; do
      g=$w1_gflop name="W1 mlp"; [ "$w" = gpt ] && g=$w2_gflop name="W2 gpt-tiny"
      row "$name, 1 rank, T=$t (ms/step)" "ms" "$o" "torch eager" "$p" "GEMMs at sgemm $t thr" "$(ideal_ms "$g" "$(sgemm_of "$t")")" ""
    done < <(sed -nE 's/^(mlp|gpt) +T=([0-9]+) +oneflow_like +([0-9.]+) ms +torch +([0-9.]+) ms.*/\1 \2 \3 \4/p' "$out/logs/workload.log")
  fi
fi

# ---- ddp_bench: W1 / W2 data parallel, 2 processes x 1 thread, vs DDP gloo ---------------------
if wanted ddp; then
  if [ $have_torch = 0 ]; then note "ddp: SKIPPED: $torch_why"; else
    run ddp bash tools/bench/ddp_bench.sh --rounds "$rounds"
    while read -r w o p; do
      g=$w1_gflop name="W1 mlp"; [ "$w" = gpt ] && g=$w2_gflop name="W2 gpt-tiny"
      row "$name, dp=2 (2 procs x 1 thr) (ms/step)" "ms" "$o" "torch DDP gloo" "$p" "rank's GEMMs at sgemm 1 thr" \
        "$(ideal_ms "$(calc "$g / 2")" "$sgemm1")" ""
    done < <(sed -nE 's/^(mlp|gpt) +oneflow_like +([0-9.]+) ms +torch DDP +([0-9.]+) ms.*/\1 \2 \3/p' "$out/logs/ddp.log")
  fi
fi

# ---- collective_bench: gloo all-reduce, 2 processes, vs torch.distributed gloo -------------------
if wanted collective; then
  if [ $have_torch = 0 ]; then note "collective: SKIPPED: $torch_why"; else
    BENCH="$bin/collective_bench" run collective bash tools/bench/collective_bench.sh --rounds "$rounds" \
      --sizes_mib 16,64 --iters 10,4
    # table: "16 MiB  ours_ms torch_ms ours_GB/s torch_GB/s ratio  best..."
    while read -r mib ogb pgb; do
      row "all-reduce ${mib} MiB, 2 procs (GB/s)" "GB/s" "$ogb" "torch gloo" "$pgb" "loopback TCP (iperf3)" "$iperf" ""
    done < <(awk '$2 == "MiB" && NF >= 7 && $3 + 0 > 0 { print $1, $5, $6 }' "$out/logs/collective.log")
  fi
fi

# ---- transport_bench: TcpTransport vs iperf3 ------------------------------------------------
if wanted transport; then
  if [ -n "$iperf" ]; then
    BENCH="$bin/transport_bench" run transport bash tools/bench/transport_bench.sh --rounds "$rounds" --megabytes 256 --seconds 2
    peer="$(sed -nE 's/^iperf3 GB\/s: .* mean ([0-9.]+).*/\1/p' "$out/logs/transport.log")" peer_name="iperf3"
  else  # transport_bench.sh would install iperf3: run the binary alone
    run transport "$bin/transport_bench" --rounds "$rounds" --megabytes 256
    peer="" peer_name="iperf3 not installed"
  fi
  while read -r size gbps; do
    label="$((size >> 10)) KiB"; [ "$size" -ge 1048576 ] && label="$((size >> 20)) MiB"
    row "TCP transport, $label messages (GB/s)" "GB/s" "$gbps" "$peer_name" "$peer" "loopback TCP (iperf3)" "$iperf" ""
  done < <(awk '$1 == "result" && $2 == "throughput" && $3 >= 1048576 { print $3, $4 }' "$out/logs/transport.log")
  lat="$(awk '$1 == "result" && $2 == "latency_us" { print $3 }' "$out/logs/transport.log")"
  [ -z "$lat" ] || row "TCP transport, 64-byte round trip (us)" "us" "$lat" "" "" "" "" "median"
fi

# ---- runtime_bench: actor overhead vs PyTorch eager dispatch ----------------------------------
if wanted runtime; then
  if [ $have_torch = 1 ]; then
    run runtime "$bin/runtime_bench" --rounds "$rounds" --torch_script "$repo/tools/bench/peers/bench_op_overhead.py"
  else
    note "runtime: PyTorch reference SKIPPED: $torch_why"
    run runtime "$bin/runtime_bench" --rounds "$rounds" --no_torch
  fi
  log="$out/logs/runtime.log"
  torch_add="$(sed -nE 's/^torch eager add_ on 16 floats \(in-place\) +([0-9.]+).*/\1/p' "$log")"
  act1="$(sed -nE 's/^\(1\) acts\/s, 1 thread \(1 stream\) +[0-9]+ +([0-9.]+).*/\1/p' "$log")"
  hop="$(sed -nE 's/^\(3\) cross-thread hop latency \(ping-pong\) +([0-9.]+).*/\1/p' "$log")"
  [ -z "$act1" ] || row "actor runtime, one act on 1 thread (us)" "us" "$act1" "torch eager add_ (16 floats)" "$torch_add" "" "" ""
  [ -z "$hop" ] || row "actor runtime, cross-thread hop (us)" "us" "$hop" "torch eager add_ (16 floats)" "$torch_add" "" "" ""
fi

# ---- python_bench: the W2 step through nn.Graph vs oltrain; an eager op vs PyTorch eager ----------
if wanted python; then
  if [ $have_torch = 0 ]; then note "python: SKIPPED: $torch_why"; else
    run python bash tools/bench/python_bench.sh --rounds "$rounds"
    line="$(grep -E '^W2 step, 1 rank, T=1: nn.Graph' "$out/logs/python.log" || true)"
    g="$(sed -nE 's/.*nn.Graph ([0-9.]+) ms.*/\1/p' <<<"$line")" o="$(sed -nE 's/.*oltrain ([0-9.]+) ms.*/\1/p' <<<"$line")"
    [ -z "$g" ] || row "W2 gpt-tiny via Python nn.Graph, T=1 (ms/step)" "ms" "$g" "oltrain (C++)" "$o" "GEMMs at sgemm 1 thr" \
      "$(ideal_ms "$w2_gflop" "$sgemm1")" ""
    line="$(grep -E '^RESULT eager_us=' "$out/logs/python.log" || true)"
    e="$(sed -nE 's/.*eager_us=([0-9.]+).*/\1/p' <<<"$line")" t="$(sed -nE 's/.*torch_us=([0-9.]+).*/\1/p' <<<"$line")"
    [ -z "$e" ] || row "Python eager op, add of [64] (us)" "us" "$e" "torch eager" "$t" "" "" ""
  fi
fi

# ---- two_node_bench: 2 network namespaces over a 1 Gbit/s veth link vs DDP gloo -----------------
if wanted two_node; then
  source tools/netns_pair.sh
  why="$(netns_pair_why_not)"
  if [ -n "$why" ]; then note "two_node: SKIPPED: $why"
  elif [ $have_torch = 0 ]; then note "two_node: SKIPPED: $torch_why"
  else
    run two_node bash tools/bench/two_node_bench.sh --rounds "$rounds" --steps 8 --no-timeline
    log="$out/logs/two_node.log"
    if grep -q "SKIPPED" "$log"; then note "two_node: $(grep -m1 SKIPPED "$log")"; fi
    # W2 dp=2 over the link: the ideal step is the larger of the gradient's payload time at the
    # link rate (a 2-rank all-reduce sends the whole gradient each way) and the rank's GEMMs.
    gbytes="$(sed -nE 's/.*gradient bytes: [0-9]+ params x 4 B = ([0-9]+) B.*/\1/p' "$log")"
    rate="$(sed -nE 's/.*rate limit: ([0-9]+)gbit each way.*/\1/p' "$log")"
    ideal=""
    if num "$gbytes" && num "$rate" && num "$sgemm1"; then
      link_ms="$(calc "$gbytes * 8 / ($rate * 1e9) * 1e3")" gemm_ms="$(ideal_ms "$(calc "$w2_gflop / 2")" "$sgemm1")"
      ideal="$(awk -v a="$link_ms" -v b="$gemm_ms" 'BEGIN { m = a + 0; if (b + 0 > m) m = b + 0; printf "%.4g", m }')"
    fi
    # summary rows: NAME... p2p coll4 coll1 ddp r r r
    while IFS=$'\t' read -r name a b c1 d; do
      for k in "p2p:$a" "collective 4 MiB buckets:$b" "collective 1 MiB buckets:$c1"; do
        v="${k##*:}" kind="${k%%:*}"
        num "$v" || continue
        lim=""; lname=""
        if [[ "$name" == W2* ]]; then lim="$ideal"; lname="max(grad at ${rate:-?} Gbit/s, GEMMs at sgemm 1 thr)"; fi
        row "$name, $kind (ms/step)" "ms" "$v" "torch DDP gloo$([[ "$name" == main* ]] && echo ' dp=4')" "$d" "$lname" "$lim" ""
      done
    done < <(awk '/^(W2 dp=2|main dp2 x tp2)/ { n = NF; name = $1; for (i = 2; i <= n - 7; i++) name = name " " $i;
               printf "%s\t%s\t%s\t%s\t%s\n", name, $(n-6), $(n-5), $(n-4), $(n-3) }' "$log")
  fi
fi

# ---- compile_bench: compile time (no peer) -----------------------------------------------------
if wanted compile; then
  run compile "$bin/compile_bench" 8 64
  while read -r world layout total; do
    row "compile a 24-layer GPT, $world ranks ($layout) (s)" "s" "$total" "" "" "" "" ""
  # whole-plan rows: "ranks layout ops tasks registers MB | phases... | total ..." (total: first after the 2nd |)
  done < <(awk '$1 ~ /^[0-9]+$/ && $2 ~ /x/ && $7 == "|" {
             for (i = 8; i < NF; i++) if ($i == "|") { print $1, $2, $(i + 1); break } }' "$out/logs/compile.log")
fi

# ---- olplan_truth: predicted vs measured step (the peer is oltrain's measurement) --------------
if wanted olplan; then
  olplan_flags=(--runs "$rounds" --jobs "w1 w2")
  # At normal priority like every other benchmark here (as root it would run real-time otherwise).
  if grep -q -- '--no-rt' tools/bench/olplan_truth.sh; then olplan_flags+=(--no-rt); fi
  OLPLAN="$bin/olplan" run olplan bash tools/bench/olplan_truth.sh "${olplan_flags[@]}"
  # "| w1 | 1 | 12.34 / 56.78 ms (+3%) | ..."
  while read -r job pred meas; do
    row "olplan simulate, $job step (ms): predicted vs measured" "ms" "$pred" "oltrain measured" "$meas" "" "" ""
  done < <(sed -nE 's/^\| (w[12]) \| [0-9]+ \| ([0-9.]+) \/ ([0-9.]+) ms.*/\1 \2 \3/p' "$out/logs/olplan.log")
fi

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); $(($(date +%s) - started)) s in all" >>"$out/header.txt"
$py tools/bench/bench_table.py --header "$out/header.txt" --rows "$rows" --notes "$notes" >"$table"
cat "$table"
say "table: $table; logs: $out/logs"

#!/usr/bin/env bash
# Two nodes over a 1 Gbit/s link (issue 13): oneflow_like vs PyTorch DDP (gloo), and the overlap
# figure. The "nodes" are two network namespaces joined by a veth pair capped by htb at 1 Gbit/s
# each way (tools/netns_pair.sh; deleted on exit, also on failure or Ctrl-C). Every process runs
# 1 thread. Rows (median over --rounds of each run's median ms/step; ours and DDP alternate):
#   W2 dp=2        2 nodes x 1 process: gpt-tiny with ddp_bench.sh's exact W2 flags; ours with
#                  --boxing=p2p and --boxing=collective (gloo; gradient buckets --bucket_mb 4 and
#                  1), torch DDP gloo (tools/bench/peers/ddp_bench.py --workload gpt, one rank
#                  started per namespace with GLOO_SOCKET_IFNAME = its veth)
#   W2 zero2       the same with --zero_stage=2 (parameters stored sharded, all-gathered at their
#                  first use in the next step's forward: docs/distributed.md, "Sharded
#                  parameters"), p2p and collective 4 MiB; its DDP column repeats W2's
#   main dp2 x tp2 2 nodes x 2 processes: configs/gpt_4rank.cfg (tp pairs inside a node, dp
#                  across the link), p2p and collective; DDP has no tensor parallelism, so its
#                  column is DDP dp=4 of the same model and global batch
#                  (tools/bench/two_node_torch.py ddp_main)
# Then the overlap figure for W2 dp=2 over the link:
#   compute-only = oltrain, ONE process, dp=1, batch 4 (one rank's share), no communication: two
#                  such processes at once, one per namespace (the two ranks of the real run share
#                  this machine's cores: used), and one alone (printed for reference)
#   comm-only    = gloo all-reduce of W2's gradient bytes (params x 4 B) between the namespaces
#                  (torch.distributed: tools/bench/two_node_torch.py allreduce; one tensor, and
#                  4 MiB buckets back to back)
#   overlap      = step / max(compute-only, comm-only)   (goal <= 1.15)
# and where the time goes in rank 0's --timeline of a p2p and a collective run, with and without
# --zero_stage=2 (tools/bench/two_node_timeline.py). About 8 minutes with --rounds 2 on a quiet machine.
#
# Usage (root): tools/bench/two_node_bench.sh [--rounds 3] [--steps 12] [--no-timeline]
#   OLTRAIN=/path/to/oltrain  skip the build (else bazel -c opt build //tools/train:oltrain)
#   KEEP=DIR                  keep every run's output under DIR (else a temporary directory)
# Without root (or without `ip`) it prints why and exits 0 without measuring anything.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"
rounds=3
steps=12
timeline=1
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --no-timeline) timeline=0; shift ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "two_node_bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
source tools/netns_pair.sh
why="$(netns_pair_why_not)"
if [ -n "$why" ]; then echo "two_node_bench: SKIPPED: $why"; exit 0; fi
bench="$repo/tools/bench/peers"
[ -f "$bench/ddp_bench.py" ] || { echo "two_node_bench: $bench/ddp_bench.py not found" >&2; exit 2; }
py=/usr/bin/python3
$py -c "import torch" 2>/dev/null || { echo "two_node_bench: needs python3-torch (apt-get install python3-torch)" >&2; exit 2; }

work="${KEEP:-$(mktemp -d /tmp/two_node_bench.XXXXXX)}"
mkdir -p "$work"
cleanup() {
  netns_pair_down
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${OLTRAIN:-}" ]; then
  bash tools/bazel.sh build -c opt --color=no --curses=no //tools/train:oltrain >"$work/build.log" 2>&1 ||
    { cat "$work/build.log" >&2; echo "two_node_bench: build failed" >&2; exit 1; }
  OLTRAIN="$(bash tools/bazel.sh info -c opt bazel-bin 2>/dev/null)/tools/train/oltrain"
fi
cp "$OLTRAIN" "$work/oltrain"   # a private copy: builds running beside us cannot swap it mid-run
export OLRUN_TRAINER="$work/oltrain" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
export OL_CONNECT_TIMEOUT_MS=30000

netns_pair_up 1gbit 10.214.0
NS=("$NETNS_PAIR_NS0" "$NETNS_PAIR_NS1") DEV=("$NETNS_PAIR_DEV0" "$NETNS_PAIR_DEV1")
ADDR=("$NETNS_PAIR_ADDR0" "$NETNS_PAIR_ADDR1")
echo "== two nodes: ${NS[0]} (${ADDR[0]}) <-> ${NS[1]} (${ADDR[1]}), veth, rate limit: $NETNS_PAIR_RATE each way"
echo "== $(getconf _NPROCESSORS_ONLN) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg); oltrain: $(git log -1 --format=%h) + working tree"

W2=(--config configs/gpt_tiny.cfg --model=gpt --vocab=2048 --seq_len=128 --n_layer=4 --n_embd=256 --n_head=4
    --batch=8 --lr=3e-4 --data=synthetic)         # ddp_bench.sh's W2 flags (+ --dp=2 below)
MAIN=(--config configs/gpt_4rank.cfg)              # dp=2 tp=2 micro_batches=2
echo 29500 >"$work/port"   # fresh namespaces; a new port per run (no TIME_WAIT clash), kept in a file: the
next_port() {              # runs happen inside $(...) subshells
  local p
  p=$(($(cat "$work/port") + 1)); echo "$p" >"$work/port"; echo "$p"
}
hang_s=150

# ours NPROC LOG FLAGS...: one olrun per namespace; prints rank 0's median ms/step (empty on failure).
ours() {
  local nproc="$1" log="$2" token pid1 rc=0 port
  shift 2
  port="$(next_port)"
  token="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  OL_JOB_TOKEN="$token" OL_BIND_ADDR="${ADDR[1]}" timeout "$hang_s" ip netns exec "${NS[1]}" \
    tools/olrun --nnodes 2 --node-rank 1 --nproc-per-node "$nproc" --master-addr "${ADDR[0]}" --master-port "$port" \
    --grace-s 2 "$@" >"$log.node1" 2>&1 &
  pid1=$!
  OL_JOB_TOKEN="$token" OL_BIND_ADDR="${ADDR[0]}" timeout "$hang_s" ip netns exec "${NS[0]}" \
    tools/olrun --nnodes 2 --node-rank 0 --nproc-per-node "$nproc" --master-addr "${ADDR[0]}" --master-port "$port" \
    --grace-s 2 "$@" >"$log" 2>&1 || rc=$?
  wait "$pid1" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "two_node_bench: run failed (exit $rc): olrun $*; last lines:" >&2
    tail -5 "$log" "$log.node1" >&2
    return 0
  fi
  sed -n 's/^\[rank 0\] RESULT median_ms_per_step=\([0-9.]*\).*/\1/p' "$log"
}

# torch_ranks NPROC_PER_NODE LOG SCRIPT ARGS...: torch ranks started per namespace (env://, gloo on
# the namespace's veth); prints rank 0's RESULT line.
torch_ranks() {
  local nproc="$1" log="$2" world node lr rank pids=() rc=0 p port
  shift 2
  world=$((2 * nproc)); port="$(next_port)"
  for node in 1 0; do
    for lr in $(seq $((nproc - 1)) -1 0); do
      rank=$((node * nproc + lr))
      (cd "$bench" && exec timeout "$hang_s" ip netns exec "${NS[$node]}" env MASTER_ADDR="${ADDR[0]}" MASTER_PORT="$port" \
        WORLD_SIZE="$world" RANK="$rank" LOCAL_RANK="$lr" GLOO_SOCKET_IFNAME="${DEV[$node]}" $py "$@") \
        >"$log.rank$rank" 2>&1 &
      pids+=($!)
    done
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  if [ "$rc" -ne 0 ]; then
    echo "two_node_bench: torch run failed (exit $rc): $*; last lines:" >&2
    tail -3 "$log".rank* >&2
    return 0
  fi
  grep -h '^RESULT' "$log.rank0" || true
}
ddp_w2() { torch_ranks 1 "$1" ddp_bench.py --workload gpt --warmup 3 --reps 5 --iters 3 | sed -n 's/.*ms_per_step median=\([0-9.]*\).*/\1/p'; }
ddp_main() { torch_ranks 2 "$1" "$repo/tools/bench/two_node_torch.py" ddp_main --warmup 3 --reps 5 --iters 4 | sed -n 's/.*ms_per_step median=\([0-9.]*\).*/\1/p'; }

median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
declare -A res
record() {  # record KEY VALUE ROUND: one measurement
  local v="${2:-}"
  printf '  round %s %-22s %s\n' "$3" "$1" "${v:-FAILED} ms/step"
  [ -n "$v" ] && res[$1]+="$v " || true
}
med() { tr ' ' '\n' <<<"${res[$1]:-}" | grep . | median || echo nan; }

# ---- the runs: per round, ours and DDP alternate (which goes first flips every round), then the
# overlap parts (compute-only, comm-only) under the same conditions -------------------------------
w2_ours=("${W2[@]}" --dp=2 --steps="$steps" --warmup=3)
main_ours=("${MAIN[@]}" --steps="$steps" --warmup=3 --checkpoint_dir="$work/ckpt")
compute_flags=("${W2[@]}" --batch=4 --dp=1 --steps="$steps" --warmup=3)
params="$("$work/oltrain" "${W2[@]}" --steps=1 2>&1 | sed -n 's/^job .*, \([0-9]*\) params).*/\1/p' | head -1)"
[ -n "$params" ] || { echo "two_node_bench: could not read W2's parameter count from oltrain" >&2; exit 1; }
grad_bytes=$((params * 4))
result_of() { sed -n 's/^RESULT median_ms_per_step=\([0-9.]*\).*/\1/p' "$1"; }
for r in $(seq 1 "$rounds"); do
  echo "== round $r/$rounds (load $(cut -d' ' -f1 /proc/loadavg))"
  order="ours ddp"; [ $((r % 2)) -eq 1 ] || order="ddp ours"
  for side in $order; do
    if [ "$side" = ours ]; then
      record w2_p2p "$(ours 1 "$work/w2_p2p.$r" "${w2_ours[@]}" --boxing=p2p)" "$r"
      record w2_coll "$(ours 1 "$work/w2_coll.$r" "${w2_ours[@]}" --boxing=collective --bucket_mb=4)" "$r"
      record w2_coll1 "$(ours 1 "$work/w2_coll1.$r" "${w2_ours[@]}" --boxing=collective --bucket_mb=1)" "$r"
      record w2_z2 "$(ours 1 "$work/w2_z2.$r" "${w2_ours[@]}" --boxing=p2p --zero_stage=2)" "$r"
      record w2_z2coll "$(ours 1 "$work/w2_z2coll.$r" "${w2_ours[@]}" --boxing=collective --bucket_mb=4 --zero_stage=2)" "$r"
      record main_p2p "$(ours 2 "$work/main_p2p.$r" "${main_ours[@]}" --boxing=p2p)" "$r"
      record main_coll "$(ours 2 "$work/main_coll.$r" "${main_ours[@]}" --boxing=collective --bucket_mb=4)" "$r"
    else
      record w2_ddp "$(ddp_w2 "$work/w2_ddp.$r")" "$r"
      record main_ddp4 "$(ddp_main "$work/main_ddp.$r")" "$r"
    fi
  done
  # compute-only: two one-rank jobs at once, one per namespace (as the two ranks of the dp=2 run
  # share this machine's cores), then one alone
  ip netns exec "${NS[1]}" "$work/oltrain" "${compute_flags[@]}" >"$work/compute_two_b.$r" 2>&1 &
  pid=$!
  ip netns exec "${NS[0]}" "$work/oltrain" "${compute_flags[@]}" >"$work/compute_two.$r" 2>&1 || true
  wait "$pid" || true
  record compute_two "$(result_of "$work/compute_two.$r")" "$r"
  ip netns exec "${NS[0]}" "$work/oltrain" "${compute_flags[@]}" >"$work/compute_alone.$r" 2>&1 || true
  record compute_alone "$(result_of "$work/compute_alone.$r")" "$r"
  # comm-only: gloo all-reduce of the gradient bytes between the namespaces
  line="$(torch_ranks 1 "$work/allreduce.$r" "$repo/tools/bench/two_node_torch.py" allreduce --bytes "$grad_bytes" \
          --bucket_mb 4 --warmup 2 --reps 5 --iters 2)"
  record comm_one "$(sed -n 's/.*one_ms median=\([0-9.]*\).*/\1/p' <<<"$line")" "$r"
  record comm_buckets "$(sed -n 's/.*bucket_ms median=\([0-9.]*\).*/\1/p' <<<"$line")" "$r"
done
if [ "$timeline" = 1 ]; then
  for k in p2p coll z2 z2coll; do
    b=p2p z=0
    case $k in coll) b=collective ;; z2) z=2 ;; z2coll) b=collective z=2 ;; esac
    record "w2_${k}_timeline" "$(ours 1 "$work/w2_${k}_timeline" "${w2_ours[@]}" --boxing=$b --zero_stage=$z \
      --timeline="$work/timeline_$k")" tl
  done
fi
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- summary ----------------------------------------------------------------------------------
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || a == "" || b == 0) print "-"; else printf "%.2f", a / b }'; }
cores="$(getconf _NPROCESSORS_ONLN)"
echo
echo "== 2 nodes (network namespaces) over a veth link, htb $NETNS_PAIR_RATE each way; 1 thread per process, all"
echo "   processes share this machine's $cores cores. ms/step: median over $rounds round(s) of each run's median (ours: the"
echo "   $((steps - 3)) steps after 3 warm-up; DDP: 5 reps x 3 (W2) or 4 (main) steps after 3 warm-up); ratio = ours / DDP"
printf '%-33s %9s %11s %11s %10s %8s %8s %8s\n' "layout" "ours p2p" "coll 4MiB" "coll 1MiB" "torch DDP" "p2p/DDP" "c4/DDP" "c1/DDP"
for row in w2 w2z2 main; do
  case $row in
    w2) name="W2 dp=2 (2 nodes x 1 proc)"; d=w2_ddp; c1="$(med w2_coll1)"; a="$(med w2_p2p)" b="$(med w2_coll)" ;;
    w2z2) name="W2 dp=2 --zero_stage=2"; d=w2_ddp; c1="-"; a="$(med w2_z2)" b="$(med w2_z2coll)" ;;
    main) name="main dp2 x tp2 (2 nodes x 2 procs)"; d=main_ddp4; c1="-"; a="$(med main_p2p)" b="$(med main_coll)" ;;
  esac
  c="$(med $d)"
  printf '%-33s %9s %11s %11s %10s %8s %8s %8s\n' "$name" "$a" "$b" "$c1" "$c" "$(ratio "$a" "$c")" "$(ratio "$b" "$c")" \
    "$([ "$c1" = - ] && echo - || ratio "$c1" "$c")"
done
echo "   coll = --boxing=collective (gloo) with --bucket_mb 4 / 1. Main row: configs/gpt_4rank.cfg (GPT 2 x 128, seq 64,"
echo "   batch 16, 2 micro-batches), ranks {0,1} = one tp pair on node 0, {2,3} on node 1 (dp crosses the link). Its DDP"
echo "   column is DDP dp=4 (2 processes per node) of the same model and global batch: DDP has no tensor parallelism."
echo "   zero2 row: W2 with --zero_stage=2 (parameters sharded, all-gathered in the next forward); DDP column = W2's."
echo
compute="$(med compute_two)" alone="$(med compute_alone)" comm="$(med comm_one)" commb="$(med comm_buckets)"
echo "== overlap, W2 dp=2 over the link (goal: step / max(compute-only, comm-only) <= 1.15)"
printf '  gradient bytes: %s params x 4 B = %s B (%.2f MiB); a 2-rank all-reduce sends the whole gradient each way\n' \
  "$params" "$grad_bytes" "$(awk -v b="$grad_bytes" 'BEGIN { print b / 1048576 }')"
echo "  once: $(awk -v b="$grad_bytes" 'BEGIN { printf "%.1f", b * 8 / 1e9 * 1e3 }') ms at 1 Gbit/s (payload only)"
echo "  compute-only (oltrain dp=1 batch 4, no comm): $compute ms with two at once, one per namespace (used); $alone ms alone"
echo "  comm-only (torch gloo all_reduce of $grad_bytes B between the namespaces): $comm ms one tensor (used),"
echo "  $commb ms as 4 MiB buckets back to back"
bound="$(awk -v a="$compute" -v b="$comm" 'BEGIN { print (a > b ? a : b) }')"
fig() { awk -v s="$1" -v b="$2" 'BEGIN { if (s == "nan" || b == "nan") print "nan"; else printf "%.2f", s / b }'; }
for k in p2p coll coll1 z2 z2coll ddp; do
  case $k in p2p) n="ours p2p";; coll) n="ours coll 4MiB";; coll1) n="ours coll 1MiB";; z2) n="zero2 p2p";;
    z2coll) n="zero2 coll 4MiB";; ddp) n="torch DDP";; esac
  s="$(med w2_$k)" o="$(fig "$(med w2_$k)" "$bound")"
  v="$(awk -v o="$o" 'BEGIN { if (o == "nan") print "no result"; else print (o <= 1.15 ? "meets 1.15" : "MISSES 1.15") }')"
  printf '  %-15s step %8s ms / max(%s, %s) = %s   %s   (with the compute-only alone: %s)\n' "$n" "$s" "$compute" "$comm" \
    "$o" "$v" "$(fig "$s" "$(awk -v a="$alone" -v b="$comm" 'BEGIN { print (a > b ? a : b) }')")"
done
if [ "$timeline" = 1 ]; then
  for k in p2p coll z2 z2coll; do
    [ -f "$work/timeline_$k/timeline.rank0.json" ] || continue
    echo
    echo "== where the time goes: rank 0 of W2 dp=2, $k, --timeline (that run: $(med w2_${k}_timeline) ms/step; ms from the step's start)"
    $py tools/bench/two_node_timeline.py --skip 3 --grad_bytes "$grad_bytes" --comm_ms "$comm" --compute_ms "$compute" \
      "$work/timeline_$k/timeline.rank0.json" || true
  done
fi
[ -z "${KEEP:-}" ] || echo "(outputs kept in $work)"

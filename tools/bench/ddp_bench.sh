#!/usr/bin/env bash
# 2-process data parallel, side by side: oneflow_like (tools/olrun, 2 processes, dp=2; shared memory
# between them unless OL_TRANSPORT=tcp)
# vs PyTorch 1.13 DDP with gloo (tools/bench/peers/launch.py + ddp_bench.py), for W1 (mlp) and
# W2 (gpt-tiny), same global batch (256 rows / 8 sequences), one thread per process, the two
# systems alternating (which goes first flips every round). Prints one line per run and the
# medians over rounds with the ratio ours / DDP (< 1.0 = oneflow_like faster).
#
# Usage: tools/bench/ddp_bench.sh [--rounds 3] [--workloads "mlp gpt"]
#   OLTRAIN=/path/to/oltrain   skip the build and use this binary (else bazel -c opt build)
#   OLTRAIN_BEFORE=/path       a second oltrain (e.g. built before a change), run in the same
#                              rotation each round; the summary adds its median and ratio
#   OURS_FLAGS="..."           extra oltrain flags for our runs, e.g. "--boxing=collective --bucket_mb=4"
#                              (default: none, i.e. point-to-point boxing)
#   OURS_ALT_ENV="A=x B=y"     a second configuration of ours given as environment assignments,
#                              e.g. "OL_TRANSPORT=tcp" (the default is shared memory between the
#                              2 processes), run in the same rotation each round; the summary adds
#                              its median and ratio. (The environment reaches olrun and oltrain.)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=3
workloads="mlp gpt"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --workloads) workloads="$2"; shift 2 ;;
    *) echo "ddp_bench: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
bench="$PWD/tools/bench/peers"
[ -f "$bench/ddp_bench.py" ] || { echo "ddp_bench: $bench/ddp_bench.py not found" >&2; exit 2; }
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "ddp_bench: needs python3-torch (apt-get install python3-torch)" >&2; exit 2; }
if [ -z "${OLTRAIN:-}" ]; then
  bash tools/bazel.sh build -c opt --color=no --curses=no //tools/train:oltrain >/dev/null 2>&1
  OLTRAIN="$(bash tools/bazel.sh info -c opt bazel-bin 2>/dev/null)/tools/train/oltrain"
fi
export OLRUN_TRAINER="$OLTRAIN" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

ours() {  # $1 = mlp | gpt [$2 = oltrain binary] [$3 = environment assignments] -> ms per step (median)
  local flags
  if [ "$1" = mlp ]; then
    flags=(--config configs/mlp.cfg --model=mlp --width=1024 --depth=4 --batch=256 --lr=0.01 --dp=2 --steps=15 --warmup=3)
  else
    flags=(--config configs/gpt_tiny.cfg --model=gpt --vocab=2048 --seq_len=128 --n_layer=4 --n_embd=256 --n_head=4
           --batch=8 --lr=3e-4 --data=synthetic --dp=2 --steps=12 --warmup=3)
  fi
  # shellcheck disable=SC2086  # OURS_FLAGS is a list of flags
  # shellcheck disable=SC2086  # $3 is a list of assignments
  env OLRUN_TRAINER="${2:-$OLTRAIN}" ${3:-} tools/olrun --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$(port)" "${flags[@]}" ${OURS_FLAGS:-} 2>&1 \
    | sed -n 's/.*RESULT median_ms_per_step=\([0-9.]*\).*/\1/p'
}
ddp() {
  /usr/bin/python3 "$bench/launch.py" --nproc 2 --port "$(port)" "$bench/ddp_bench.py" --workload "$1" 2>/dev/null \
    | sed -n 's/.*ms_per_step median=\([0-9.]*\).*/\1/p'
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

declare -A ours_ms ddp_ms before_ms alt_ms
for w in $workloads; do
  for r in $(seq 1 "$rounds"); do
    alt() { if [ -n "${OURS_ALT_ENV:-}" ]; then d=$(ours "$w" "$OLTRAIN" "$OURS_ALT_ENV"); fi; }
    if [ $((r % 2)) -eq 1 ]; then a=$(ours "$w"); alt; b=$(ddp "$w"); else b=$(ddp "$w"); alt; a=$(ours "$w"); fi
    [ -n "$a" ] && [ -n "$b" ] || { echo "ddp_bench: a run printed no result (ours '$a', ddp '$b')" >&2; exit 1; }
    extra=""
    if [ -n "${OLTRAIN_BEFORE:-}" ]; then
      c=$(ours "$w" "$OLTRAIN_BEFORE"); before_ms[$w]+="$c "; extra="   before ${c} ms/step"
    fi
    if [ -n "${OURS_ALT_ENV:-}" ]; then
      alt_ms[$w]+="$d "; extra="${extra}   ${OURS_ALT_ENV} ${d} ms/step"
    fi
    echo "round $r $w: oneflow_like ${a} ms/step   torch DDP gloo ${b} ms/step${extra}"
    ours_ms[$w]+="$a "; ddp_ms[$w]+="$b "
  done
done
echo "== 2 processes x 1 thread, data parallel; medians over $rounds rounds (ratio < 1 = oneflow_like faster) =="
for w in $workloads; do
  a=$(tr ' ' '\n' <<<"${ours_ms[$w]}" | grep . | median)
  b=$(tr ' ' '\n' <<<"${ddp_ms[$w]}" | grep . | median)
  printf '%-4s oneflow_like %8.2f ms   torch DDP %8.2f ms   ratio %.2f\n' "$w" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {print a / b}')"
  if [ -n "${OLTRAIN_BEFORE:-}" ]; then
    c=$(tr ' ' '\n' <<<"${before_ms[$w]}" | grep . | median)
    printf '%-4s before       %8.2f ms   torch DDP %8.2f ms   ratio %.2f  (OLTRAIN_BEFORE)\n' "$w" "$c" "$b" "$(awk -v a="$c" -v b="$b" 'BEGIN {print a / b}')"
  fi
  if [ -n "${OURS_ALT_ENV:-}" ]; then
    d=$(tr ' ' '\n' <<<"${alt_ms[$w]}" | grep . | median)
    printf '%-4s oneflow_like %8.2f ms   torch DDP %8.2f ms   ratio %.2f  (%s)\n' "$w" "$d" "$b" "$(awk -v a="$d" -v b="$b" 'BEGIN {print a / b}')" "$OURS_ALT_ENV"
  fi
done

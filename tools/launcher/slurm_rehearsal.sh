#!/usr/bin/env bash
# A real Slurm run of olrun on this one machine: a throwaway Slurm cluster of two nodes (two
# slurmd daemons, olnode1 = 127.0.0.2 and olnode2 = 127.0.0.3, beside one slurmctld), then the
# batch script of docs/distributed.md ("Slurm"), scaled to 2 nodes x 2 ranks, through `sbatch
# --wait`: every olrun takes nodes, node rank, master and token from Slurm alone.
#
#   1. the 2 x 2 GPT (configs/gpt_4rank.cfg, dp 2 x tp 2) under sbatch: its losses must equal
#      the same job run by one olrun without Slurm (4 processes);
#   2. the same with --max-restarts 1 and rank 1 killed at step 5 of the first round: one
#      restart, resumed from the newest checkpoint, the same losses.
# Prints PASS / FAIL per check; exit 0 only if both pass.
#
# Usage (root; installs slurmd slurmctld slurm-client munge from Debian if missing):
#   bash tools/launcher/slurm_rehearsal.sh [--steps 12] [--keep]
# It adds two lines to /etc/hosts (marked "oneflow_like slurm rehearsal") and removes them at
# exit, starts munged if it is not running (and leaves it), and stops its Slurm daemons at exit.
# --keep leaves the work directory (configs, logs, the batch outputs) for a look.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
steps=12
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "slurm_rehearsal: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "slurm_rehearsal: needs root (daemons, /etc/hosts)" >&2; exit 2; }
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
  echo "slurm_rehearsal: installing slurmd slurmctld slurm-client munge (Debian)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurmd slurmctld slurm-client munge >/dev/null
fi

work="$(mktemp -d /tmp/ol_slurm.XXXXXX)"
mark="# oneflow_like slurm rehearsal"
cleanup() {
  for pid in "$work"/*.pid; do [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true; done
  sed -i "/$mark/d" /etc/hosts
  if [ "$keep" = 1 ]; then echo "slurm_rehearsal: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
printf '127.0.0.2 olnode1 %s\n127.0.0.3 olnode2 %s\n' "$mark" "$mark" >> /etc/hosts

if ! pgrep -x munged >/dev/null; then
  [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key
  mkdir -p /run/munge && chown munge:munge /run/munge
  su -s /bin/sh munge -c /usr/sbin/munged
fi

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p "$work/state" "$work/log"
export SLURM_CONF="$work/slurm.conf"
cat > "$SLURM_CONF" <<EOF
ClusterName=olrehearsal
SlurmctldHost=$(hostname)(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool.%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.%n.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=olnode1 NodeHostname=olnode1 NodeAddr=127.0.0.2 Port=$(free_port) CPUs=$(nproc) RealMemory=4000 State=UNKNOWN
NodeName=olnode2 NodeHostname=olnode2 NodeAddr=127.0.0.3 Port=$(free_port) CPUs=$(nproc) RealMemory=4000 State=UNKNOWN
PartitionName=rehearsal Nodes=olnode[1-2] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
slurmctld -i
slurmd -N olnode1
slurmd -N olnode2
for _ in $(seq 60); do
  [ "$(sinfo -h -t idle -o %D 2>/dev/null || true)" = 2 ] && break
  sleep 0.5
done
[ "$(sinfo -h -t idle -o %D 2>/dev/null || true)" = 2 ] || { sinfo || true; tail "$work"/log/*; echo "slurm_rehearsal: the two nodes did not come up" >&2; exit 1; }
echo "slurm_rehearsal: Slurm $(sinfo -V | awk '{print $2}'): $(sinfo -h -o '%P %D %T %N')"

bash tools/bazel.sh build -c opt --color=no --curses=no //tools/train:oltrain >/dev/null 2>&1 \
  || { echo "slurm_rehearsal: build failed (bash tools/bazel.sh build -c opt //tools/train:oltrain)" >&2; exit 1; }
cp "$(bash tools/bazel.sh info -c opt bazel-bin 2>/dev/null)/tools/train/oltrain" "$work/oltrain"
export OLRUN_TRAINER="$work/oltrain" OPENBLAS_NUM_THREADS=1
job=(--config configs/gpt_4rank.cfg --dp=2 --tp=2 --steps="$steps" --checkpoint_every=2)

# The batch script of docs/distributed.md, 2 nodes x 2 ranks ($1: extra olrun flags, $2: tag).
batch() {
  cat > "$work/train_$2.sbatch" <<EOF
#!/bin/bash
#SBATCH --job-name=gpt_$2
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --time=00:10:00
set -euo pipefail
cd "$root"
export OL_JOB_TOKEN=\$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
srun --ntasks-per-node=1 --kill-on-bad-exit=1 tools/olrun --nproc-per-node 2 $1 \\
    --log-dir $work/logs_$2 ${job[*]} --checkpoint_dir=$work/ckpt_$2
EOF
  sbatch --wait -o "$work/out_$2.txt" "$work/train_$2.sbatch" >/dev/null || true
  cat "$work/out_$2.txt"
}
losses() { grep -o 'step [0-9]* loss [0-9.]*' | sort -u -k2,2n; }

echo "slurm_rehearsal: reference (one olrun, 4 processes, no Slurm)"
ref="$(tools/olrun --no-slurm --nproc-per-node 4 "${job[@]}" --checkpoint_dir="$work/ckpt_ref" 2>&1)"
ref_losses="$(losses <<< "$ref")"
[ "$(wc -l <<< "$ref_losses")" = "$steps" ] || { echo "$ref" | tail; echo "slurm_rehearsal: the reference run failed" >&2; exit 1; }

status=0
check() {  # $1 name, $2 output, $3 grep pattern that must be there
  local got; got="$(losses <<< "$2")"
  if [ "$got" = "$ref_losses" ] && grep -q -- "$3" <<< "$2"; then
    echo "PASS $1: $steps losses equal the run without Slurm ($(tail -1 <<< "$got"))"
  else
    status=1
    echo "FAIL $1 (expected the losses of the run without Slurm and '$3'):"; tail -20 <<< "$2"
  fi
}
out="$(batch "" plain)"
check "sbatch 2 nodes x 2 ranks" "$out" "olrun: Slurm job [0-9]* step 0: node 0 of 2, master olnode1"
out="$(OL_FAULT_INJECT="rank=1,at=step,step=5,round=0" batch "--max-restarts 1" restart)"
check "sbatch with rank 1 killed at step 5, --max-restarts 1" "$out" "olrun: restart 1 of 1: rank 1 failed"
exit $status

#!/usr/bin/env bash
# The main job: set-up, build, run. Trains a small GPT character-level on the GPL-3 text
# (/usr/share/common-licenses/GPL-3, on every Debian machine) with configs/gpt_4rank.cfg: 4 ranks
# as 4 processes launched by tools/olrun, talking over TCP on loopback, laid out as a 2 x 2 mesh
# (data x Megatron tensor parallel) with 2 micro-batches per step. Rank 0 prints the plan
# summary, then loss and tokens/s per step; every rank's line is prefixed with its rank.
# Extra arguments go to the trainer (see `oltrain --help`), e.g. --steps=300 --resume.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/bazel.sh build -c opt --color=no --curses=no //tools/train:oltrain 2>&1 \
  | grep -vE '^(INFO|Loading|Analyzing)' || true
bash tools/install_python.sh 2>&1 | tail -1 || true   # import oneflow_like (the Python API) for /usr/bin/python3
export OLRUN_TRAINER="$(bash tools/bazel.sh info -c opt bazel-bin 2>/dev/null)/tools/train/oltrain"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
exec tools/olrun --nproc-per-node 4 --master-addr 127.0.0.1 --master-port "$port" \
  --log-dir /tmp/oneflow_like/logs/gpt_4rank --config configs/gpt_4rank.cfg "$@"

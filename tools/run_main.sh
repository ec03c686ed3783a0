#!/usr/bin/env bash
# The main job: set-up, build, run. Trains the GPT of shared/bench/torch_gpt.py (small: 2 layers,
# 64 wide, vocab 256, seq 32) on 4 ranks laid out as a 2 x 2 mesh (data x tensor parallel,
# Megatron splits) with 2 micro-batches: compiled to a Plan and executed by the actor runtime,
# all ranks inside this process (threads over the loopback transport; multi-process runs through
# `olrun` come with the multi-process issue). Prints the plan summary, then loss per step.
# Extra arguments go to oltrain (see `oltrain --help`), e.g. --steps=200 --dp=4 --tp=1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/bazel.sh build -c opt --symlink_prefix=/ --color=no --curses=no //tools/train:oltrain 2>&1 \
  | grep -vE '^(INFO|Loading|Analyzing)' || true
bin="$(bash tools/bazel.sh info -c opt bazel-bin 2>/dev/null)/tools/train/oltrain"
exec "$bin" --model=gpt --vocab=256 --seq_len=32 --n_layer=2 --n_embd=64 --n_head=4 --batch=16 \
  --dp=2 --tp=2 --micro_batches=2 --steps=60 --lr=3e-3 "$@"

#!/usr/bin/env bash
# `make run`: the main job. Trains the reference CNN on Fashion-MNIST for two
# epochs with one parameter server and two workers (32 images each per step:
# the same global batch of 64 as the PyTorch baseline recipe), then says
# whether it reached the 0.875 test accuracy the baseline reaches.
set -uo pipefail
cd "$(dirname "$0")/.."
log=build/run.jsonl
./build/dtrain launch -n 3 -- train examples/cnn.cfg --mode ps-sync --servers 1 --batch 32 \
    --epochs 2 --log "$log" | tee build/run.out
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "make run: training failed (exit $rc)"; exit "$rc"; }
acc=$(sed -n 's/.*"event":"summary","test_accuracy":\([0-9.]*\).*/\1/p' build/run.out | tail -n1)
if /usr/bin/python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.875 else 1)"; then
    echo "make run: cnn, 1 server + 2 workers, 2 epochs: test accuracy $acc >= 0.875 (PyTorch baseline 0.878). Log: $log"
else
    echo "make run: cnn, 1 server + 2 workers, 2 epochs: test accuracy $acc is BELOW the 0.875 target. Log: $log"
    exit 1
fi

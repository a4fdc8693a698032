#!/usr/bin/env bash
# One pass through every command and mode, each run ending as it should
# (success, a usage or model-file error after MPI has started, a divergence,
# an agreed SIGTERM stop). In the release build a smoke test; in the ASan
# build the suite's leak check of the command line: the other CLI tests run
# there with leak detection off (tests/CMakeLists.txt says why), so every
# path a run can end by is here, once.
source "$(dirname "$0")/clilib.sh" "$1"
MPIRUN="mpirun --oversubscribe --bind-to none"
M=$TMP/net.cfg
cp "$SRC/tests/data/small_net.cfg" "$M"
A=(--dataset synthetic --threads 1 --quiet)
cd "$TMP" || exit 1

# Serial: a checkpoint directory with a log and a timeline, then resumed.
expect 0 "" -- "$DTRAIN" train "$M" "${A[@]}" --max-steps 12 --checkpoint-dir ck --checkpoint-every 6 --log run.jsonl \
    --timeline tl.json --optimizer adam
expect 0 "" -- "$DTRAIN" train "$M" "${A[@]}" --max-steps 18 --checkpoint-dir ck --resume auto --log run.jsonl \
    --optimizer adam

# Every mode, with its extras: buckets and top-k on the ring, the shared-memory
# window, servers sharded two ways with Poseidon's SACP, the asynchronous
# policies (ps-hogwild's deferred applier stands for ps-async-nowait's too),
# stale-synchronous servers, worker groups.
expect 0 "" -- $MPIRUN -np 2 "$DTRAIN" train "$M" "${A[@]}" --max-steps 12 --mode allreduce --grad-compression topk:0.1 \
    --checkpoint ar.ckpt
expect 0 "" -- $MPIRUN -np 2 "$DTRAIN" train "$M" "${A[@]}" --max-steps 12 --mode allreduce --allreduce-algo shm --optimizer lamb
expect 0 "" -- $MPIRUN -np 4 "$DTRAIN" train "$M" "${A[@]}" --max-steps 12 --mode ps-sync --servers 2 --sacp \
    --grad-compression bf16 --checkpoint ps.ckpt
expect 0 "" -- $MPIRUN -np 3 "$DTRAIN" train "$M" "${A[@]}" --max-steps 12 --mode ps-async
expect 0 "" -- $MPIRUN -np 3 "$DTRAIN" train "$M" "${A[@]}" --max-steps 12 --mode ps-ssp --staleness 1
expect 0 "" -- $MPIRUN -np 3 "$DTRAIN" train "$M" "${A[@]}" --max-steps 12 --mode ps-hogwild
expect 0 "" -- $MPIRUN -np 5 "$DTRAIN" train "$M" "${A[@]}" --max-steps 12 --mode ps-async --group-size 2

# The other commands.
expect 0 "accuracy" -- "$DTRAIN" eval "$M" --dataset synthetic --weights ps.ckpt
expect 0 "-> m.onnx" -- "$DTRAIN" export "$M" --weights ar.ckpt -o m.onnx
expect 0 "" -- "$DTRAIN" info "$SRC/examples/resnet20_fm.cfg" --json
expect 0 "" -- "$DTRAIN" plot run.jsonl -o run.png
expect 0 "" -- "$DTRAIN" simulate "$M" --nodes 1,4 --servers 2 --reps 2 --grad-compression bf16
expect 0 "" -- $MPIRUN -np 2 "$DTRAIN" sweep "$M" --grid lr=0.05,0.1 --dataset synthetic --threads 1 \
    --max-steps 4 --out sweep.jsonl

# Ends other than success, after MPI and the net are up.
expect 1 "ar.ckpt: checkpoint is for a different model" -- "$DTRAIN" train "$SRC/examples/cnn.cfg" \
    --dataset synthetic --threads 1 --max-steps 2 --resume ar.ckpt
expect 1 "training diverged" -- $MPIRUN -np 3 "$DTRAIN" train "$M" "${A[@]}" --max-steps 12 --mode ps-sync --lr 1e6
"$DTRAIN" train "$M" --dataset synthetic --threads 1 --quiet --epochs 500 --checkpoint stop.ckpt \
    --log stop.jsonl > stop.out 2>&1 &
job=$!
wait_for stop.jsonl '"event":"step"' 120
kill -TERM $job
wait $job
rc=$?
check "SIGTERM: agreed stop, exit 1 ($rc)" test $rc -eq 1 || tail -5 stop.out
check "SIGTERM: the checkpoint is written" test -s stop.ckpt
finish

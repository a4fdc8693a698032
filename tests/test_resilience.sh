#!/usr/bin/env bash
# A user's work is never lost: checkpoint directories (rotation, latest,
# best.ckpt, --resume auto), no exploding checkpoint over good ones, resumed
# logs appended, automatic restarts (launch --max-restarts) that end where an
# uninterrupted run ends, output paths refused before training, and the CLI's
# everyday edges (--help, --version, flags twice or idle in the mode, a
# missing --, usage errors printed once under mpirun, no escape codes in a file).
source "$(dirname "$0")/clilib.sh" "$1"
MPIRUN="mpirun --oversubscribe --bind-to none"
M=$TMP/net.cfg
cp "$SRC/tests/data/small_net.cfg" "$M"
A=(--dataset synthetic --threads 1 --quiet --seed 3)
same() { /usr/bin/python3 "$SRC/tests/ckpt_diff.py" "$1" "$2" 0 > /dev/null; }
cd "$TMP" || exit 1

# Checkpoint directory: the last K, latest, best.ckpt; --resume auto continues
# from the newest and appends to the log (a resume record; plot reads it whole).
"$DTRAIN" train "$M" "${A[@]}" --max-steps 60 --checkpoint-dir ck --checkpoint-every 10 --keep 2 --log run.jsonl > /dev/null
check "dir run" test $? -eq 0
check "keeps 2" test "$(ls ck | grep -c '^step-')" -eq 2
check "latest -> step-60" test "$(readlink ck/latest)" = step-60.ckpt
check "best.ckpt" test -s ck/best.ckpt
"$DTRAIN" train "$M" "${A[@]}" --max-steps 100 --checkpoint-dir ck --checkpoint-every 10 --keep 2 --resume auto \
    --log run.jsonl > /dev/null
check "resume auto runs" test $? -eq 0
check "log holds both parts" test "$(grep -c '"event":"config"' run.jsonl)" -eq 2
check "resume record at 60" grep -q '"event":"resume","step":60' run.jsonl
check "elapsed_s goes on" /usr/bin/python3 -c "
import json,sys
e=[json.loads(l)['elapsed_s'] for l in open('run.jsonl') if 'elapsed_s' in l]
sys.exit(0 if all(b >= a for a, b in zip(e, e[1:])) else 1)"
"$DTRAIN" train "$M" "${A[@]}" --max-steps 100 --checkpoint straight.ckpt > /dev/null
check "resumed == uninterrupted" same straight.ckpt ck/step-100.ckpt
expect 0 "" -- "$DTRAIN" plot run.jsonl -o run.svg
expect 2 "checkpoint is at step 100, and this run ends at step 100" -- "$DTRAIN" train "$M" "${A[@]}" --max-steps 100 --resume ck
expect 2 "is a directory, not a checkpoint file" -- "$DTRAIN" eval "$M" --dataset synthetic --weights ck
expect 0 "accuracy" -- "$DTRAIN" eval "$M" --dataset synthetic --weights ck/latest
expect 0 "no checkpoint yet; starting from the beginning" -- "$DTRAIN" train "$M" --dataset synthetic --threads 1 \
    --max-steps 5 --checkpoint-dir fresh --resume auto

# An exploding run (forced: once the best is known, every smoothed loss is
# over 1e-6 x it) never writes over the good checkpoints; it says so and exits 1.
expect 1 "training exploded: the checkpoint at step 200 was not written" -- "$DTRAIN" train "$M" "${A[@]}" \
    --max-steps 200 --checkpoint-dir boom --checkpoint-every 20 --max-loss-ratio 1e-6 --log boom.jsonl
check "skips logged" grep -q '"event":"checkpoint_skipped"' boom.jsonl
last=$(readlink boom/latest)
check "latest is a good one ($last)" test -n "$last" -a "$last" != step-200.ckpt
check "latest loads" "$DTRAIN" eval "$M" --dataset synthetic --weights boom/latest

# Output paths: refused before training, nothing touched.
cp "$M" keep.cfg
expect 2 "--checkpoint keep.cfg is the model file" -- "$DTRAIN" train keep.cfg "${A[@]}" --checkpoint keep.cfg
expect 2 "--log keep.cfg is the model file" -- "$DTRAIN" train keep.cfg "${A[@]}" --log keep.cfg
check "model file intact" cmp -s keep.cfg "$M"
expect 2 "--log and --checkpoint name the same file" -- "$DTRAIN" train "$M" "${A[@]}" --checkpoint x --log ./x
expect 2 "--log ck/latest is the checkpoint to resume from" -- "$DTRAIN" train "$M" "${A[@]}" --resume ck/latest --log ck/latest
expect 1 "--checkpoint keep.cfg/c.ckpt: cannot create the folder keep.cfg" -- "$DTRAIN" train "$M" "${A[@]}" \
    --checkpoint keep.cfg/c.ckpt
expect 1 "--log keep.cfg/l.jsonl: cannot create the folder keep.cfg" -- "$DTRAIN" train "$M" "${A[@]}" --log keep.cfg/l.jsonl
expect 2 "--checkpoint and --checkpoint-dir exclude each other" -- "$DTRAIN" train "$M" "${A[@]}" --checkpoint a --checkpoint-dir b
expect 2 "--resume auto needs --checkpoint-dir" -- "$DTRAIN" train "$M" "${A[@]}" --resume auto

# Everyday edges.
for c in train eval info bench simulate plot sweep launch; do
    expect 0 "usage: dtrain $c" -- "$DTRAIN" $c --help
done
expect 0 "oneDNN: [0-9]+\.[0-9]+" -- "$DTRAIN" --version
expect 2 "--batch is given twice" -- "$DTRAIN" train "$M" "${A[@]}" --batch 4 --batch 8
expect 2 "--staleness applies to --mode ps-ssp, not serial" -- "$DTRAIN" train "$M" "${A[@]}" --staleness 2
expect 2 "--servers applies to --mode ps-sync, ps-async, ps-ssp, ps-async-nowait or ps-hogwild, not allreduce" -- $MPIRUN -np 2 "$DTRAIN" train "$M" "${A[@]}" --servers 2
expect 2 "--server-nice applies to --mode ps-sync, ps-async, ps-ssp, ps-async-nowait or ps-hogwild, not serial" -- \
    "$DTRAIN" train "$M" "${A[@]}" --server-nice 5
expect 2 "--server-nice: 20 is out of range \[0, 19\]" -- "$DTRAIN" train "$M" "${A[@]}" --mode ps-sync --server-nice 20
expect 2 "--slow-worker 0:5: rank 0 is not a worker" -- $MPIRUN -np 3 "$DTRAIN" train "$M" "${A[@]}" --mode ps-sync --slow-worker 0:5
# Across hosts launch raises Open MPI's TCP eager limit, unless the user set it.
expect 0 "--host t1:1,t2:1 --mca btl_tcp_eager_limit 262144 --bind-to none" -- "$DTRAIN" launch --dry-run \
    --hosts t1:1,t2:1 -- train "$M"
expect 0 "^mpirun (.* )?--host t1:1,t2:1 --bind-to none " -- env OMPI_MCA_btl_tcp_eager_limit=65536 "$DTRAIN" \
    launch --dry-run --hosts t1:1,t2:1 -- train "$M"
expect 2 "put -- between launch's flags and the command" -- "$DTRAIN" launch -n 2 train "$M" --max-steps 2
out=$($MPIRUN -np 3 "$DTRAIN" train "$M" "${A[@]}" --batch 0 2>&1); rc=$?
check "usage error under mpirun: exit 2 ($rc)" test $rc -eq 2
check "printed once" test "$(grep -c -- '--batch: 0 is out of range' <<<"$out")" -eq 1
check "no MPI_ABORT banner" bash -c "! grep -q MPI_ABORT <<<'$out'"
# SIGUSR1 asks for a progress line now: a plain line, as the output is a file.
"$DTRAIN" launch -n 2 -- train "$M" --dataset synthetic --threads 1 --max-steps 3000 --straggle 1:2 --log plain.jsonl \
    > plain.out 2>&1 &
job=$!
wait_for plain.jsonl '"event":"step"' 60
kill -USR1 "$(rank_pid plain.jsonl 0)"
timeout 120 tail --pid=$job -f /dev/null; wait $job
check "launch > file: no escape codes" bash -c "! grep -q $'\033' plain.out"
check "SIGUSR1: a progress line" grep -q "^epoch 1/1 step" plain.out

# Automatic restarts: a rank killed twice at random moments; the job comes
# back from the newest checkpoint and ends where an uninterrupted run ends
# (bit for bit: serial, allreduce and ps-sync are deterministic).
declare -A NP=([serial]=1 [allreduce]=2 [ps-sync]=3)
MODES=(serial allreduce ps-sync)
# Under the sanitizers (CI's time budget) the mode with the most ranks and
# messages only; the release build runs all three.
[ -n "${DT_SANITIZE:-}" ] && MODES=(ps-sync)
for mode in "${MODES[@]}"; do
    R=(train "$M" "${A[@]}" --mode "$mode" --max-steps 2500 --checkpoint-every 50)
    "$DTRAIN" launch -n "${NP[$mode]}" -- "${R[@]}" --checkpoint-dir "u_$mode" > /dev/null 2>&1
    "$DTRAIN" launch -n "${NP[$mode]}" --max-restarts 3 -- "${R[@]}" --straggle 1:2 --checkpoint-dir "r_$mode" \
        --log "r_$mode.jsonl" > "r_$mode.out" 2>&1 &
    job=$!
    for kill in 1 2; do
        # After the restart before it: a checkpoint of this attempt.
        for _ in $(seq 1 600); do
            [ "$(sed -n '/"event":"resume"/,$p' "r_$mode.jsonl" | grep -c '"event":"checkpoint"')" -gt 0 ] ||
                [ $kill = 1 ] && grep -q '"event":"checkpoint"' "r_$mode.jsonl" && break
            sleep 0.1
        done
        sleep "0.$((RANDOM % 10 + 5))"
        pids=($(job_pids "r_$mode.jsonl"))
        [ ${#pids[@]} -gt 0 ] && kill -9 "${pids[$((RANDOM % ${#pids[@]}))]}"
        wait_for "r_$mode.jsonl" "\"event\":\"restart\",\"attempt\":$kill" 60
    done
    timeout 300 tail --pid=$job -f /dev/null; wait $job; rc=$?
    check "$mode: restarted run completes ($rc)" test $rc -eq 0 || tail -5 "r_$mode.out"
    check "$mode: two restarts logged" test "$(grep -c '"event":"restart"' "r_$mode.jsonl")" -eq 2
    check "$mode: equals the uninterrupted run" same "u_$mode/step-2500.ckpt" "r_$mode/step-2500.ckpt"
    grep "restart" "r_$mode.out"
done
finish

#!/usr/bin/env bash
# Crash safety in every mode. (1) A process killed part-way through writing a
# checkpoint (tests/killwrite.c, LD_PRELOAD) leaves the previous checkpoint
# intact, and resuming from it ends where an uninterrupted run ends. (2) Any
# rank killed with SIGKILL at a random moment: --resume continues from the
# last complete checkpoint; lockstep modes then end bit for bit where the
# uninterrupted run ends; ps-async runs to the end. (3) SIGTERM to every rank:
# worker 0 writes a final checkpoint at the step they stop at, every rank
# exits without MPI_Abort.
source "$(dirname "$0")/clilib.sh" "$1"
MPIRUN="mpirun --oversubscribe --bind-to none"
cp "$SRC/tests/data/small_net.cfg" "$TMP/net.cfg"
ARGS=(--dataset synthetic --threads 1 --quiet --seed 5)

declare -A NP=([serial]=1 [allreduce]=2 [ps-sync]=3 [ps-async]=3)
cmd() { # mode -> the training command line for that mode (without -np for serial)
    local mode=$1
    if [ "$mode" = serial ]; then echo "$DTRAIN train $TMP/net.cfg";
    else echo "$MPIRUN -np ${NP[$mode]} -x LD_PRELOAD -x DT_KILL_AFTER_BYTES $DTRAIN train $TMP/net.cfg --mode $mode"; fi
}
same() { check "$1 == $2" /usr/bin/python3 "$SRC/tests/ckpt_diff.py" "$1" "$2" 0; }
step_of() { /usr/bin/python3 -c "import struct,sys; d=open(sys.argv[1],'rb').read(80); print(struct.unpack_from('<Q', d, 32)[0])" "$1"; }

# (1) Killed while writing the second checkpoint.
if [ -z "${DT_SANITIZE:-}" ]; then
    for mode in serial ps-sync; do
        d=$TMP/w_$mode; mkdir -p "$d"
        timeout 300 $(cmd $mode) "${ARGS[@]}" --max-steps 20 --checkpoint "$d/straight.ckpt" > "$d/straight.out" 2>&1
        check "$mode: uninterrupted run" test $? -eq 0
        timeout 300 $(cmd $mode) "${ARGS[@]}" --max-steps 5 --checkpoint "$d/five.ckpt" > /dev/null 2>&1
        size=$(stat -c %s "$d/five.ckpt")
        # The first checkpoint (step 5) is written whole, the second (step
        # 10) dies after half of it.
        LD_PRELOAD=$DT_KILLWRITE DT_KILL_AFTER_BYTES=$((size + size / 2)) timeout 300 $(cmd $mode) "${ARGS[@]}" \
            --max-steps 20 --checkpoint-every 5 --checkpoint "$d/run.ckpt" > "$d/killed.out" 2>&1
        rc=$?
        check "$mode: killed mid-write exits non-zero ($rc)" test $rc -ne 0
        check "$mode: half-written temporary left behind" test "$(stat -c %s "$d/run.ckpt.tmp")" -lt "$size"
        check "$mode: previous checkpoint intact (step $(step_of "$d/run.ckpt"))" test "$(step_of "$d/run.ckpt")" = 5
        same "$d/five.ckpt" "$d/run.ckpt"
        timeout 300 $(cmd $mode) "${ARGS[@]}" --max-steps 20 --resume "$d/run.ckpt" --checkpoint "$d/resumed.ckpt" \
            > "$d/resumed.out" 2>&1
        check "$mode: resume after the crash runs" test $? -eq 0 || tail -3 "$d/resumed.out"
        same "$d/straight.ckpt" "$d/resumed.ckpt"
    done
fi

# (2) SIGKILL of a random rank at a random moment, then --resume.
# The killed run sleeps 2 ms a step (--straggle 1:2: timing only, the same
# arithmetic) so the kill lands mid-run.
STEPS=3000
for mode in serial allreduce ps-sync ps-async; do
    d=$TMP/k_$mode; mkdir -p "$d"
    timeout 300 $(cmd $mode) "${ARGS[@]}" --max-steps $STEPS --checkpoint "$d/straight.ckpt" > "$d/straight.out" 2>&1
    check "$mode: uninterrupted run" test $? -eq 0
    $(cmd $mode) "${ARGS[@]}" --max-steps $STEPS --checkpoint-every 100 --checkpoint "$d/run.ckpt" \
        --straggle 1:2 --log "$d/run.jsonl" > "$d/killed.out" 2>&1 &
    job=$!
    for _ in $(seq 1 600); do grep -q '"event":"checkpoint"' "$d/run.jsonl" 2>/dev/null && break; sleep 0.05; done
    sleep "0.$((RANDOM % 10))"
    pids=($(job_pids "$d/run.jsonl"))
    victim=none
    [ ${#pids[@]} -gt 0 ] && victim=${pids[$((RANDOM % ${#pids[@]}))]} && kill -9 "$victim"
    timeout 30 tail --pid=$job -f /dev/null; wait $job; rc=$?
    killed_at=$(grep -c '"event":"step"' "$d/run.jsonl")
    ck=$(step_of "$d/run.ckpt")
    echo "$mode: killed pid $victim of ${#pids[@]} at step ~$killed_at, exit $rc; last checkpoint at step $ck (lost $((killed_at - ck)) steps)"
    if [ "$rc" -eq 0 ]; then echo "$mode: the run ended before the kill; nothing to resume"; continue; fi
    # A kill inside the write of the checkpoint at step killed_at (a
    # multiple of 100, already logged) leaves the one before: 100 lost.
    lost=$((killed_at - ck))
    check "$mode: lost fewer steps than the checkpoint interval, or killed while writing one" \
        test $lost -lt 100 -o \( $lost -eq 100 -a $((killed_at % 100)) -eq 0 \) -o "$mode" = ps-async
    timeout 300 $(cmd $mode) "${ARGS[@]}" --max-steps $STEPS --resume "$d/run.ckpt" --checkpoint "$d/resumed.ckpt" \
        > "$d/resumed.out" 2>&1
    check "$mode: resume runs to the end" test $? -eq 0 || tail -3 "$d/resumed.out"
    if [ "$mode" = ps-async ]; then # timing decides its updates: it must finish with a finite loss
        check "$mode: finite loss" grep -qE '"train_loss":[0-9]' "$d/resumed.out"
    else
        same "$d/straight.ckpt" "$d/resumed.ckpt"
    fi
done

# (3) SIGTERM to every rank: a final checkpoint at the step they stop at,
# every rank exits by itself (no MPI_Abort), exit status 1.
for mode in serial allreduce ps-sync ps-async; do
    d=$TMP/t_$mode; mkdir -p "$d"
    $(cmd $mode) "${ARGS[@]}" --max-steps 1000000 --straggle 1:2 --checkpoint "$d/run.ckpt" --log "$d/run.jsonl" \
        > "$d/term.out" 2>&1 &
    job=$!
    for _ in $(seq 1 600); do [ "$(cat "$d/run.jsonl" 2>/dev/null | grep -c '"event":"step"')" -gt 50 ] && break; sleep 0.05; done
    kill -TERM $(job_pids "$d/run.jsonl") 2>/dev/null
    timeout 60 tail --pid=$job -f /dev/null; wait $job; rc=$?
    check "$mode: SIGTERM exits 1 ($rc)" test "$rc" -eq 1
    check "$mode: says where it stopped" grep -q "interrupted at step [0-9]*; checkpoint written" "$d/term.out"
    check "$mode: no MPI_Abort" bash -c "! grep -q MPI_ABORT '$d/term.out'"
    stopped=$(sed -n 's/.*interrupted at step \([0-9]*\); checkpoint written.*/\1/p' "$d/term.out" | head -1)
    check "$mode: checkpoint at the stop step ($stopped)" test "$(step_of "$d/run.ckpt")" = "$stopped"
done
finish

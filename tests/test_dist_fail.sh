#!/usr/bin/env bash
# Failure behaviour of distributed runs: a killed rank ends the job within
# seconds naming the rank; a stalled rank is named by the waiting ranks,
# and after --stall-abort the job ends (exit 3) leaving no process; ranks
# with different model files are refused at start-up.
source "$(dirname "$0")/clilib.sh" "$1"
MPIRUN="mpirun --oversubscribe --bind-to none"
M=$SRC/examples/mlp.cfg
LONG="--dataset synthetic --epochs 50 --threads 1 --no-prefetch"


# A killed worker: the job exits non-zero within 10 s and says which rank.
for mode in "allreduce" "ps-sync --servers 1"; do
    np=2; [ "${mode%% *}" = ps-sync ] && np=3
    rm -f "$TMP/kill.jsonl"
    $MPIRUN -np $np "$DTRAIN" train "$M" $LONG --mode $mode --log "$TMP/kill.jsonl" --seed 11 \
        > "$TMP/kill.out" 2>&1 &
    job=$!
    wait_for "$TMP/kill.jsonl" '"event":"step"' 60
    victim=$(rank_pid "$TMP/kill.jsonl" 1)
    kill -9 "$victim"
    t0=$(date +%s.%N)
    timeout 30 tail --pid=$job -f /dev/null
    wait $job; rc=$?
    dt=$(echo "$(date +%s.%N) - $t0" | bc)
    echo "$mode: killed pid $victim, job exited $rc after ${dt}s"
    check "$mode: killed rank ends the job non-zero" test "$rc" -ne 0
    check "$mode: within 10 s ($dt)" test "$(echo "$dt < 10" | bc)" -eq 1
    check "$mode: message names the rank" grep -qiE "rank [0-9]+.*(exited|killed|signal)|process rank [0-9]+" "$TMP/kill.out"
done

# A stalled rank (SIGSTOP): the waiting ranks name it after --stall-timeout.
stall_case() { # mode np expected-pattern rank-to-stop
    local mode=$1 np=$2 pattern=$3
    rm -f "$TMP/stall.jsonl"
    $MPIRUN -np "$np" "$DTRAIN" train "$M" $LONG --mode $mode --stall-timeout 1 --log "$TMP/stall.jsonl" \
        --seed 12 > "$TMP/stall.out" 2>&1 &
    local job=$!
    wait_for "$TMP/stall.jsonl" '"event":"step"' 60
    local victim; victim=$(rank_pid "$TMP/stall.jsonl" "$4")
    echo "$mode: stopping world rank $4 (pid $victim)"
    kill -STOP "$victim"
    wait_for "$TMP/stall.out" "$pattern" 15
    check "$mode: stall names the stopped rank (/$pattern/)" grep -qE "$pattern" "$TMP/stall.out"
    kill -CONT "$victim"; kill -9 "$victim"
    timeout 30 tail --pid=$job -f /dev/null; wait $job 2>/dev/null
    grep -E "waited" "$TMP/stall.out" | head -2
}
stall_case "allreduce" 2 "ranks that have not reached it: 1" 1
stall_case "allreduce --allreduce-algo ring" 2 "ranks that have not reached it: 1" 1
# In a worker group the leader waiting for a stopped member names the group;
# if the stop falls while the workers agree on stopping (every 10 steps),
# that agreement names the member instead: either way rank 2 is named.
stall_case "ps-sync --servers 1 --group-size 2" 3 "(group gradient allreduce|parameters from the group's leader) has waited [0-9]+ s; its worker group is ranks 1-2|metrics allreduce\)? has waited [0-9]+ s; ranks that have not reached it: 2 \(" 2
# The server names every worker whose gradients it misses: one blocked in a
# collective with the stopped rank is missing too, and names rank 2 itself.
stall_case "ps-sync --servers 1" 3 "gradients from worker rank\(s\) ([0-9] \([^)]*\), )*2 \([^)]*\)$|have not reached it: 2 \([^)]*\)$" 2
# A stopped server is named by the workers waiting for its layers.
stall_case "ps-sync --servers 1" 3 "waited [0-9]+ s for parameters from server rank\(s\) 0 \([^)]*\)$" 0

# --stall-abort S: with a rank frozen (SIGSTOP), a rank that waited S s
# ends the whole job under dtrain launch, exit 3, naming the rank and its
# host; nothing of the job is left. (Bounds: S + the stall clock's tick +
# the launcher's 10 s grace, far above what a run takes, 5-6 s.)
abort_case() { # mode np victim-rank pattern
    local mode=$1 np=$2 victim_rank=$3 pattern=$4 log=$TMP/abort.jsonl
    rm -f "$log"
    "$DTRAIN" launch -n "$np" -- train "$M" $LONG --mode $mode --stall-timeout 1 --stall-abort 4 --log "$log" \
        > "$TMP/abort.out" 2>&1 &
    local job=$!
    wait_for "$log" '"event":"step"' 60
    local victim; victim=$(rank_pid "$log" "$victim_rank")
    kill -STOP "$victim"
    local t0; t0=$(date +%s.%N)
    timeout 60 tail --pid=$job -f /dev/null
    wait $job; local rc=$?
    local dt; dt=$(echo "$(date +%s.%N) - $t0" | bc)
    echo "$mode: rank $victim_rank stopped, the job exited $rc after ${dt}s"
    check "$mode: a frozen rank ends the job with exit 3 ($rc)" test "$rc" -eq 3 || tail -5 "$TMP/abort.out"
    check "$mode: within S + 15 s ($dt)" test "$(echo "$dt < 19" | bc)" -eq 1
    check "$mode: the line names the rank and host (/$pattern/)" \
        grep -qE "$pattern.*giving up after --stall-abort 4 s: ending the job" "$TMP/abort.out"
    sleep 0.5
    check "$mode: no process of the job is left" test -z "$(job_pids "$log")"
    kill -9 $(job_pids "$log") 2> /dev/null
}
abort_case "allreduce" 2 1 "ranks that have not reached it: 1 \($(hostname)\)"
abort_case "allreduce --allreduce-algo ring" 2 1 "ranks that have not reached it: 1 \($(hostname)\)"
# (A frozen worker stops the server's clock, and so the other worker, which
# waits for the server: whichever gives up first names what it waited for.)
abort_case "ps-sync --servers 1" 3 2 "(gradients from worker rank\(s\) [0-9, ()a-z-]*2 \($(hostname)\)|parameters from server rank\(s\) 0 \($(hostname)\))"
abort_case "ps-sync --servers 1" 3 0 "parameters from server rank\(s\) 0 \($(hostname)\)"
expect 2 "--stall-abort: .*-1" -- "$DTRAIN" train "$M" --dataset synthetic --stall-abort -1

# Different model files on different ranks: refused at start-up, exit 2.
expect 2 "ranks disagree on the model: rank\(s\) 1" -- $MPIRUN -np 1 "$DTRAIN" train "$M" --dataset synthetic \
    : -np 1 "$DTRAIN" train "$SRC/examples/cnn.cfg" --dataset synthetic
finish

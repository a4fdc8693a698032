#!/usr/bin/env bash
# Signals never crash a run (oneDNN #4845: a handler on a thread inside a
# JIT GEMM corrupts the heap, so dtrain takes signals on a thread of its
# own). Each run trains with oneDNN GEMMs on every rank, gets a burst of a
# harmless signal at 100 Hz (SIGUSR1: print a progress line), then SIGINT or
# SIGTERM to one random rank (worker or server) or to every rank, while the
# burst goes on until the job ends. Every run must exit 1, say where it
# stopped, leave a checkpoint `dtrain eval` reads, and print no sanitizer
# report, heap corruption or MPI_ABORT.
#   DT_SIGNAL_RUNS   runs per mode (default 2; `make soak` runs 20)
#   DT_SIGNAL_BURST  the burst's signal (USR1; INT measures the old handler)
source "$(dirname "$0")/clilib.sh" "$1"
RUNS=${DT_SIGNAL_RUNS:-2}
BURST=${DT_SIGNAL_BURST:-USR1}
MPIRUN="mpirun --oversubscribe --bind-to none"
if [ -n "${DT_SANITIZE:-}" ]; then MODEL=$SRC/tests/data/small_net.cfg; DATA=(--dataset synthetic); else
    MODEL=$SRC/examples/cnn.cfg; DATA=(--dataset synthetic --batch 32); fi
declare -A NP=([serial]=1 [allreduce]=2 [ps-sync]=3 [ps-ssp]=3)
# ps-ssp's workers agree on a stop in a sum they finish steps after starting it.
declare -A EXTRA=([ps-ssp]="--staleness 2")
runs=0; crashes=0

burst() { # pids...: SIGBURST to each at 100 Hz until they are gone
    while kill -0 "$@" 2>/dev/null; do kill -"$BURST" "$@" 2>/dev/null; sleep 0.01; done
}

for mode in serial allreduce ps-sync ps-ssp; do
    for i in $(seq 1 "$RUNS"); do
        d=$TMP/$mode-$i; mkdir -p "$d"
        if [ "$mode" = serial ]; then launch=("$DTRAIN"); else launch=($MPIRUN -np "${NP[$mode]}" "$DTRAIN"); fi
        # --epochs: the run must outlast the signals (small_net's one epoch
        # takes ~2 s, less than the random wait below).
        "${launch[@]}" train "$MODEL" "${DATA[@]}" --mode "$mode" --threads 1 --epochs 1000 --max-steps 100000 --seed $i \
            --checkpoint "$d/run.ckpt" --log "$d/run.jsonl" ${EXTRA[$mode]:-} > "$d/out" 2>&1 &
        job=$!
        wait_for "$d/run.jsonl" '"event":"step"' 120
        pids=($(job_pids "$d/run.jsonl"))
        burst "${pids[@]}" & bp=$!
        sleep "$((RANDOM % 2)).$((RANDOM % 10))"
        stopsig=$([ $((RANDOM % 2)) = 0 ] && echo INT || echo TERM)
        if [ $((RANDOM % 3)) = 0 ]; then victims=("${pids[@]}"); else victims=(${pids[$((RANDOM % ${#pids[@]}))]}); fi
        kill -"$stopsig" "${victims[@]}" 2>/dev/null
        timeout 120 tail --pid=$job -f /dev/null; wait $job; rc=$?
        kill $bp 2>/dev/null; wait $bp 2>/dev/null
        runs=$((runs + 1))
        ok=1
        [ "$rc" -eq 1 ] || ok=0
        grep -q "interrupted at step [0-9]*; checkpoint written" "$d/out" || ok=0
        grep -qiE "sanitizer|runtime error|corrupted|double free|free\(\)|MPI_ABORT|segmentation" "$d/out" && ok=0
        "$DTRAIN" eval "$MODEL" --dataset synthetic --weights "$d/run.ckpt" > "$d/eval" 2>&1 || ok=0
        if [ $ok = 0 ]; then
            crashes=$((crashes + 1))
            echo "$mode run $i: SIG$stopsig to ${#victims[@]} of ${#pids[@]} rank(s): exit $rc"; tail -5 "$d/out"
        fi
        check "$mode run $i: SIG$stopsig during a SIG$BURST burst ends in order" test $ok = 1
    done
done
# ps-ssp agrees on a stop without pulling its workers into step: the sum
# begun at step 10k is finished s + 1 steps later, so SIGINT to every rank
# stops both workers at one step 10k + 3 with --staleness 2 (a blocking
# agreement would stop them at 10k).
d=$TMP/ssp-stop; mkdir -p "$d"
$MPIRUN -np 3 "$DTRAIN" train "$MODEL" "${DATA[@]}" --mode ps-ssp --staleness 2 --threads 1 --epochs 1000 \
    --max-steps 100000 --checkpoint "$d/run.ckpt" --log "$d/run.jsonl" > "$d/out" 2>&1 &
job=$!
wait_for "$d/run.jsonl" '"step":12,' 120
kill -INT $(job_pids "$d/run.jsonl") 2>/dev/null
timeout 120 tail --pid=$job -f /dev/null; wait $job
check "ps-ssp --staleness 2: SIGINT to every rank stops both workers at one step 10k + 3" /usr/bin/python3 -c "
import re; steps = [int(n) for n in re.findall(r'interrupted at step (\d+)', open('$d/out').read())]
assert len(steps) >= 2 and len(set(steps)) == 1 and steps[0] % 10 == 3, steps"
echo "signals: $runs runs, $crashes crashes (burst SIG$BURST)"
finish

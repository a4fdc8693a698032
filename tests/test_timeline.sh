#!/usr/bin/env bash
# --timeline: serial, allreduce (2 ranks), ps-sync (1 server + 2 workers)
# and ps-hogwild (two applier threads) each write one valid Chrome trace
# holding every rank: per-layer forward and backward spans in every step,
# communication with byte counts, server receive/apply/reply spans (ps-sync
# committing each clock segment by segment), every
# track nested or disjoint (tests/timeline_check.py); the overlap script
# reads it. A clean stop (SIGTERM) still merges the file; a killed run
# leaves a part the script reads; a bad path stops the run before training.
source "$(dirname "$0")/clilib.sh" "$1"
MPIRUN="mpirun --oversubscribe --bind-to none"
cp "$SRC/tests/data/small_net.cfg" "$TMP/net.cfg"
CHECK=(/usr/bin/python3 "$SRC/tests/timeline_check.py")
OVERLAP=(/usr/bin/python3 "$SRC/bench/timeline_overlap.py")
K=12
LAYERS=$("$DTRAIN" info "$TMP/net.cfg" --json | /usr/bin/python3 -c 'import json, sys; print(len(json.load(sys.stdin)["nodes"]) - 1)')

run() { # name ranks args... (CFG: the model, else net.cfg)
    local name=$1 np=$2; shift 2
    local cmd=("$DTRAIN" train "${CFG:-$TMP/net.cfg}" --dataset synthetic --max-steps $K --threads 1 --quiet
               --checkpoint "$TMP/$name.ckpt" --checkpoint-every 5 --timeline "$TMP/$name.json" "$@")
    [ "$np" = 1 ] || cmd=(timeout 300 $MPIRUN -np "$np" "${cmd[@]}")
    "${cmd[@]}" > "$TMP/$name.out" 2>&1
    check "$name runs" test $? -eq 0 || tail -5 "$TMP/$name.out"
    check "$name: parts merged and removed" test -z "$(ls "$TMP/$name.json".rank* 2>/dev/null)"
}
overlap_rows() { # file workers: the overlap script prints one row per worker
    local rows
    rows=$("${OVERLAP[@]}" "$1" --json | /usr/bin/python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert all(0 <= r["overlap_share"] <= 1 and r["steps"] > 0 for r in rows), rows
print(len(rows))')
    test "$rows" = "$2"
}

run serial 1
check "serial timeline" "${CHECK[@]}" "$TMP/serial.json" --steps $K --layers "$LAYERS" --workers 0
# The ring's 2621-float buckets: several per step, overlapping backward.
run ar 2 --mode allreduce --allreduce-algo ring --fusion-mb 0.01
check "allreduce timeline" "${CHECK[@]}" "$TMP/ar.json" --steps $K --layers "$LAYERS" --workers 0,1 --comm
check "allreduce: several buckets per step" /usr/bin/python3 -c "
import json; ev = json.load(open('$TMP/ar.json'))['traceEvents']
assert sum(e['name'] == 'allreduce bucket' for e in ev) > 2 * 2 * $K"
# The shared window (the default here): one sum-and-update span per step and worker.
run ar_shm 2 --mode allreduce
check "allreduce shm timeline" "${CHECK[@]}" "$TMP/ar_shm.json" --steps $K --layers "$LAYERS" --workers 0,1 --comm
check "allreduce shm: one span per step" /usr/bin/python3 -c "
import json; ev = json.load(open('$TMP/ar_shm.json'))['traceEvents']
assert sum(e['name'] == 'shared-memory allreduce + update' for e in ev) == 2 * $K"
run ps 3 --mode ps-sync --servers 1
check "ps-sync timeline" "${CHECK[@]}" "$TMP/ps.json" --steps $K --layers "$LAYERS" --workers 1,2 --servers 0 --comm
# Segmented replies: the server commits each clock layer by layer (the
# three layers with parameters, top first), each segment sent to both workers
# (and whole shards for the pulls before checkpoints and evaluation).
check "ps-sync: clocks committed segment by segment" /usr/bin/python3 -c "
import json, collections; ev = json.load(open('$TMP/ps.json'))['traceEvents']
seg = collections.defaultdict(list)
for e in ev:
    if e.get('name') == 'apply clock': seg[e['args']['clock']].append(e['args']['segment'])
assert sorted(seg) == list(range($K)) and all(v == [0, 1, 2] for v in seg.values()), dict(seg)
assert sum(e.get('name') == 'reply' for e in ev) >= 2 * 3 * $K"
run hogwild 3 --mode ps-hogwild --servers 1
check "ps-hogwild timeline" "${CHECK[@]}" "$TMP/hogwild.json" --steps any --layers "$LAYERS" --workers 1,2 \
    --servers 0 --comm
# Turns (ps_server.c's admit_turn): out of step, a segment of 1 MiB or more
# (here a 216 x 2048 connected layer, 1.77 MB) comes in from one worker at
# a time. Each such segment of every clock has a turn span; no two overlap.
sed -e 's/^output=32$/output=2048/' "$TMP/net.cfg" > "$TMP/wide.cfg"
CFG="$TMP/wide.cfg" run turns 3 --mode ps-async --servers 1
check "ps-async: large segments take turns" /usr/bin/python3 -c "
import json; ev = json.load(open('$TMP/turns.json'))['traceEvents']
t = sorted((e for e in ev if e.get('name') == 'turn'), key=lambda e: e['ts'])
assert len(t) >= 2 * $K and {e['args']['worker'] for e in t} == {1, 2}, len(t)
assert all(a['ts'] + a['dur'] <= b['ts'] for a, b in zip(t, t[1:])), 'turns overlap'"
for r in serial ar ps hogwild; do
    "${OVERLAP[@]}" "$TMP/$r.json" > "$TMP/$r.overlap" 2>&1
    check "overlap script on $r" test $? -eq 0 || cat "$TMP/$r.overlap"
done
check "overlap rows allreduce" overlap_rows "$TMP/ar.json" 2
check "overlap rows ps-sync" overlap_rows "$TMP/ps.json" 2
cat "$TMP/ar.overlap"

# A clean stop (SIGTERM to every rank): allreduce workers stop at the same
# step; ps-async workers each after their step, then they meet and stop the
# server, which ends too. The file is merged either way.
stop_run() { # NAME NP CHECK-ARGS... -- TRAIN-ARGS...
    local name=$1 np=$2; shift 2
    local checks=()
    while [ "$1" != "--" ]; do checks+=("$1"); shift; done
    shift
    $MPIRUN -np $np "$DTRAIN" train "$TMP/net.cfg" --dataset synthetic --epochs 50 --threads 1 --seed 13 \
        --log "$TMP/$name.jsonl" --timeline "$TMP/$name.json" "$@" > "$TMP/$name.out" 2>&1 &
    local job=$! pids=()
    wait_for "$TMP/$name.jsonl" '"step":20,' 120
    for r in $(seq 0 $((np - 1))); do pids+=($(rank_pid "$TMP/$name.jsonl" $r)); done
    kill -TERM "${pids[@]}"
    timeout 60 tail --pid=$job -f /dev/null
    wait $job
    check "$name: stopped run exits 1" test $? -eq 1
    check "$name: stopped run says interrupted" grep -q "interrupted at step" "$TMP/$name.out"
    check "$name: merged timeline" "${CHECK[@]}" "$TMP/$name.json" --steps any --layers "$LAYERS" "${checks[@]}"
}
stop_run stop 2 --workers 0,1 --comm --
stop_run stop_async 3 --workers 1,2 --servers 0 --comm -- --mode ps-async --servers 1

# A killed run: the part holds every event up to the last checkpoint.
"$DTRAIN" train "$TMP/net.cfg" --dataset synthetic --epochs 50 --threads 1 --checkpoint "$TMP/kill.ckpt" \
    --checkpoint-every 5 --timeline "$TMP/kill.json" > "$TMP/kill.out" 2>&1 &
job=$!
wait_for "$TMP/kill.json.rank0" '"name":"checkpoint"' 120
kill -KILL $job
wait $job 2>/dev/null
check "killed run: the part is read" overlap_rows "$TMP/kill.json.rank0" 1

# A bad path stops the run before it trains (exit 1, the path named): a
# folder that cannot be made (a file is in the way; a missing one is made),
# a directory, a rank's part that cannot be created.
for bad in "$TMP/net.cfg/t.json" "$TMP"; do
    out=$(timeout 120 "$DTRAIN" train "$TMP/net.cfg" --dataset synthetic --max-steps 5 --timeline "$bad" 2>&1)
    rc=$?
    check "bad --timeline $bad: exit 1" test $rc -eq 1
    check "bad --timeline $bad: message" grep -qE -- "--timeline $bad: (cannot create|is a directory)" <<<"$out" ||
        echo "$out"
    check "bad --timeline $bad: before training" test -z "$(grep 'dtrain: training' <<<"$out")"
done
mkdir -p "$TMP/parts/t.json.rank0" "$TMP/parts/t.json.rank1"
expect 1 "rank [01]: --timeline .*cannot create .*t.json.rank[01]: Is a directory" -- $MPIRUN -np 2 "$DTRAIN" train \
    "$TMP/net.cfg" --dataset synthetic --max-steps 5 --timeline "$TMP/parts/t.json"
finish

#!/usr/bin/env bash
# A resumed run's log tells the uninterrupted run's story: stopped at an
# epoch's end (its evaluation done, then the checkpoint) the resumed part
# does not evaluate that epoch again, and stopped mid-epoch its epoch's
# train_loss still covers the steps before the checkpoint (carried in it).
# Each eval record of the straight run appears once, with the same figures;
# the interrupted first part adds only its own final evaluation (and, for a
# restart from an earlier checkpoint, the steps after it are logged twice,
# their evaluations not: the one at the checkpoint's step is not repeated).
source "$(dirname "$0")/clilib.sh" "$1"
cd "$TMP" || exit 1
cp "$SRC/tests/data/small_net.cfg" n.cfg
A=(n.cfg --dataset synthetic --threads 1 --quiet --batch 500 --epochs 3) # 120 steps an epoch
"$DTRAIN" train "${A[@]}" --log straight.jsonl > /dev/null
check "straight run" test -s straight.jsonl
# Stopped at 120 (an epoch's end) and at 180 (mid-epoch), resumed from the
# checkpoint written there; and a run killed at 200 restarted from its
# periodic checkpoint at 120 (written after that epoch's evaluation).
for stop in 120 180 200; do
    if [ $stop = 200 ]; then
        "$DTRAIN" train "${A[@]}" --max-steps 200 --checkpoint-dir ck200 --checkpoint-every 120 --log r200.jsonl \
            > /dev/null
        check "periodic checkpoint at the epoch's end" test -e ck200/step-120.ckpt
        "$DTRAIN" train "${A[@]}" --resume ck200/step-120.ckpt --log r200.jsonl > /dev/null
    else
        "$DTRAIN" train "${A[@]}" --max-steps $stop --checkpoint-dir "ck$stop" --log "r$stop.jsonl" > /dev/null
        "$DTRAIN" train "${A[@]}" --checkpoint-dir "ck$stop" --resume auto --log "r$stop.jsonl" > /dev/null
    fi
    check "stopped at $stop: one eval record per step, the straight run's figures" /usr/bin/python3 -c "
import json, sys
def evals(path):
    return [r for r in map(json.loads, open(path)) if r['event'] == 'eval']
key = lambda r: (r['epoch'], r['test_accuracy'], r['test_loss'], r['train_loss'])
want, got = evals('straight.jsonl'), evals('r$stop.jsonl')
steps = [r['step'] for r in got]
assert len(steps) == len(set(steps)), ('an evaluation repeated', steps)
by_step = {r['step']: r for r in got}
for r in want:
    assert r['step'] in by_step and key(by_step[r['step']]) == key(r), (r, by_step.get(r['step']))
extra = set(by_step) - {r['step'] for r in want}
assert extra <= {$stop}, extra
"
done
finish

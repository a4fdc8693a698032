#!/usr/bin/env bash
# dtrain sweep through mpirun: every combination of the grid runs exactly
# once, spread round-robin over groups of ranks; each record is complete; a
# diverging trial is reported as failed while the others finish; a trial is
# the train run with the same flags (serial, allreduce on the group's
# communicator, parameter servers among the group's ranks: a diverging
# parameter-server trial ends its servers too); exit codes: 0 if any trial
# succeeded, 1 if none did or the sweep was interrupted, 2 for bad usage.
source "$(dirname "$0")/clilib.sh" "$1"
MPIRUN="timeout 300 mpirun --oversubscribe --bind-to none"
NET=$SRC/tests/data/small_net.cfg
COMMON=(--dataset synthetic --max-steps 30 --threads 1)

# records FILE TRIALS RANKS GROUPS: checks the JSONL of a sweep against the
# grid's axes, given in AXES as a JSON object of value lists; MODE: the
# trials' mode, unless the grid has a mode axis.
records() {
    /usr/bin/python3 - "$@" <<'EOF'
import itertools, json, os, sys
path, ntrials, ranks, groups = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
axes = json.loads(os.environ["AXES"])
recs = [json.loads(l) for l in open(path)]
keys = {"trial", "grid", "mode", "status", "error", "test_accuracy", "test_loss", "train_loss",
        "images_per_sec", "staleness_mean", "staleness_max", "max_clock_gap", "wall_s", "steps", "group", "ranks"}
staleness = ("staleness_mean", "staleness_max", "max_clock_gap")
assert len(recs) == ntrials, len(recs)
for r in recs:
    assert set(r) == keys, sorted(r)
    assert r["ranks"] == ranks and r["group"] == (r["trial"] - 1) % groups, r   # round-robin
    assert r["mode"] == r["grid"].get("mode", os.environ.get("MODE")), r
    if r["grid"]["lr"] >= 1e5:
        assert r["status"] == "failed" and "diverged" in r["error"], r
        assert r["test_accuracy"] is None and r["steps"] is None, r
        assert all(r[k] is None for k in staleness), r
    else:
        assert r["status"] == "ok" and r["error"] is None, r
        assert 0 <= r["test_accuracy"] <= 1 and r["test_loss"] > 0 and r["train_loss"] > 0, r
        assert r["images_per_sec"] > 0 and r["wall_s"] > 0, r
        assert r["steps"] == 30 or r["mode"] == "ps-async" and r["steps"] > 0, r  # independent: unequal shares
        if r["mode"].startswith("ps-"):
            assert all(r[k] >= 0 for k in staleness), r
        else:
            assert all(r[k] is None for k in staleness), r
combos = [tuple(r["grid"][k] for k in axes) for r in recs]
want = list(itertools.product(*axes.values()))
assert sorted(combos) == sorted(want), (combos, want)          # every combination exactly once
assert [r["trial"] for r in recs] == list(range(1, ntrials + 1))
assert combos == want                                            # trial order: nested loops
EOF
}

# table FILE: rows sorted by accuracy (ok first), failed ones last, summary last.
table() {
    /usr/bin/python3 - "$@" <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
summary = json.loads(lines[-1]); rows = lines[1:-1]
head = lines[0].split()
assert head[0] == "trial" and summary["event"] == "sweep", lines
ok = [r for r in rows if r.rstrip().endswith(" ok")]
failed = [r for r in rows if " failed: " in r]
assert rows == ok + failed and len(rows) == summary["trials"], rows
acc = [float(r.split()[head.index("test_acc")]) for r in ok]
assert acc == sorted(acc, reverse=True), acc
assert summary["ok"] == len(ok) and summary["failed"] == len(failed), summary
assert summary["best"]["test_accuracy"] == acc[0], summary
EOF
}

# 3 ranks, one per trial: 3 x 2 = 6 trials, two per rank; lr 1e6 diverges.
$MPIRUN -np 3 "$DTRAIN" sweep "$NET" --grid lr=0.05,0.1,1e6 batch=8,16 "${COMMON[@]}" \
    --out "$TMP/s3.jsonl" > "$TMP/s3.out" 2> "$TMP/s3.err"
check "3 ranks: exit 0 with failed trials" test $? -eq 0 || tail -5 "$TMP/s3.err"
AXES='{"lr":[0.05,0.1,1e6],"batch":[8,16]}' MODE=serial check "3 ranks: records" records "$TMP/s3.jsonl" 6 1 3
check "3 ranks: table and summary" table "$TMP/s3.out"
check "3 ranks: a line per finished trial" test "$(grep -c '^dtrain sweep: trial [1-6]/6 ' "$TMP/s3.err")" -eq 6

# A trial is the train run with its flags (same seed, same thread count).
"$DTRAIN" train "$NET" "${COMMON[@]}" --lr 0.1 --batch 16 --quiet > "$TMP/plain.out" 2>&1
check "a serial trial equals dtrain train" /usr/bin/python3 -c "
import json
plain = json.loads(open('$TMP/plain.out').read().splitlines()[-1])
r = [json.loads(l) for l in open('$TMP/s3.jsonl')]
r = [x for x in r if x['grid'] == {'lr': 0.1, 'batch': 16}][0]
assert r['test_accuracy'] == plain['test_accuracy'], (r, plain)"

# 4 ranks in 2 groups of 2: each trial runs allreduce on its group's
# communicator; 2 x 8 images per step equal serial batch 16 (above).
$MPIRUN -np 4 "$DTRAIN" sweep "$NET" --grid lr=0.05,1e6,0.1 --ranks-per-trial 2 --batch 8 "${COMMON[@]}" \
    --out "$TMP/s2.jsonl" > "$TMP/s2.out" 2> "$TMP/s2.err"
check "2 ranks per trial: exit 0" test $? -eq 0 || tail -5 "$TMP/s2.err"
AXES='{"lr":[0.05,1e6,0.1]}' MODE=allreduce check "2 ranks per trial: records" records "$TMP/s2.jsonl" 3 2 2
check "2 ranks per trial: table" table "$TMP/s2.out"
check "allreduce trial equals serial at the global batch" /usr/bin/python3 -c "
import json
a = {json.dumps(x['grid']): x for x in map(json.loads, open('$TMP/s2.jsonl'))}['{\"lr\": 0.1}']
b = [x for x in map(json.loads, open('$TMP/s3.jsonl')) if x['grid'] == {'lr': 0.1, 'batch': 16}][0]
assert abs(a['test_accuracy'] - b['test_accuracy']) <= 2e-3, (a, b)"

# Parameter servers: 3 ranks form one group, 1 server + 2 workers. A
# diverging trial fails and ends its servers (the next trial runs on the
# same ranks); the ok trials report staleness; a ps-sync trial is the train
# run with its flags.
$MPIRUN -np 3 "$DTRAIN" sweep "$NET" --grid mode=ps-sync,ps-async,ps-ssp lr=1e6,0.1 --ranks-per-trial 3 \
    --batch 8 "${COMMON[@]}" --out "$TMP/ps.jsonl" > "$TMP/ps.out" 2> "$TMP/ps.err"
check "parameter servers: exit 0 with failed trials" test $? -eq 0 || tail -5 "$TMP/ps.err"
AXES='{"mode":["ps-sync","ps-async","ps-ssp"],"lr":[1e6,0.1]}' check "parameter servers: records" \
    records "$TMP/ps.jsonl" 6 3 1
check "parameter servers: table with staleness" table "$TMP/ps.out"
check "parameter servers: lag and clock gap columns" grep -q "lag_mean  lag_max  clock_gap" "$TMP/ps.out"
$MPIRUN -np 3 "$DTRAIN" train "$NET" --mode ps-sync --lr 0.1 --batch 8 "${COMMON[@]}" --quiet \
    > "$TMP/ps_plain.out" 2>&1
check "a ps trial equals dtrain train; ps-sync is never stale, ps-ssp within its bound" /usr/bin/python3 -c "
import json
plain = json.loads(open('$TMP/ps_plain.out').read().splitlines()[-1])
r = {x['grid']['mode']: x for x in map(json.loads, open('$TMP/ps.jsonl')) if x['status'] == 'ok'}
assert r['ps-sync']['test_accuracy'] == plain['test_accuracy'], (r['ps-sync'], plain)
assert r['ps-sync']['staleness_max'] == 0 and r['ps-sync']['max_clock_gap'] == 0, r
assert r['ps-ssp']['max_clock_gap'] <= 3 and r['ps-ssp']['staleness_max'] <= 3, r"

# Any model-file [net] key is a grid key (its train flag, netkeys.c): the
# policy over a file whose schedule is Darknet's steps, and flip; a trial
# is the train run with those flags; names in the records as the file's.
sed 's/^epochs=1$/epochs=1\npolicy=steps\nsteps=10,20\nscales=0.1,0.1/' "$NET" > "$TMP/steps.cfg"
"$DTRAIN" sweep "$TMP/steps.cfg" --grid policy=cosine,steps crop-pad=0,1 "${COMMON[@]}" --out "$TMP/keys.jsonl" \
    > "$TMP/keys.out" 2> "$TMP/keys.err"
check "model-file keys: exit 0" test $? -eq 0 || tail -5 "$TMP/keys.err"
"$DTRAIN" train "$TMP/steps.cfg" "${COMMON[@]}" --policy cosine --crop-pad 1 --quiet > "$TMP/cos.out" 2>&1
check "model-file keys: 4 trials, each the train run" /usr/bin/python3 -c "
import json
r = [json.loads(l) for l in open('$TMP/keys.jsonl')]
assert [x['grid'] for x in r] == [{'policy': p, 'crop_pad': c} for p in ('cosine', 'steps') for c in (0, 1)], r
assert all(x['status'] == 'ok' for x in r), r
plain = json.loads(open('$TMP/cos.out').read().splitlines()[-1])
assert r[1]['test_accuracy'] == plain['test_accuracy'], (r[1], plain)
assert len({x['train_loss'] for x in r}) == 4, r"
expect 2 "\-\-grid trial 2 \(policy=fancy\): \-\-policy fancy \(over .*\): bad value 'fancy' for policy" -- \
    "$DTRAIN" sweep "$NET" --grid policy=cosine,fancy
expect 2 "\-\-grid: min_lr is swept; do not also give \-\-min-lr" -- "$DTRAIN" sweep "$NET" --grid min_lr=0,0.1 --min-lr 0.2
expect 2 "\-\-grid: learning_rate is given twice \(as \-\-lr\)" -- "$DTRAIN" sweep "$NET" --grid lr=0.1 learning_rate=0.2

# Every trial failed: exit 1, the records are still written.
expect 1 "sweep: every trial failed" -- $MPIRUN -np 2 "$DTRAIN" sweep "$NET" --grid lr=1e5,1e6 "${COMMON[@]}" \
    --out "$TMP/bad.jsonl"
check "failed trials recorded" test "$(grep -c '"status":"failed"' "$TMP/bad.jsonl")" -eq 2

# Interrupted (SIGTERM): the running trial stops, the rest are skipped, exit 1.
"$DTRAIN" sweep "$NET" --grid seed=1,2,3 --dataset synthetic --epochs 50 --threads 1 --out "$TMP/int.jsonl" \
    > "$TMP/int.out" 2>&1 &
pid=$!
sleep 3
kill -TERM $pid
wait $pid
check "interrupted sweep exits 1" test $? -eq 1
check "interrupted: the running trial stopped, the others skipped" /usr/bin/python3 -c "
import json
r = [json.loads(l) for l in open('$TMP/int.jsonl')]
assert [x['status'] for x in r][1:] == ['skipped', 'skipped'], r
assert r[0]['status'] in ('failed', 'skipped') and all('interrupted' in x['error'] for x in r), r"

# Usage errors: exit 2, one line, said once (by rank 0), nothing run.
expect 2 "^dtrain: --grid: 'lr' is not KEY=V1,V2" -- "$DTRAIN" sweep "$NET" --grid lr
expect 2 "unknown key 'size' \(keys: lr, batch.*, or any \[net\] key of the model file\)" -- "$DTRAIN" sweep "$NET" --grid size=1,2
expect 2 "lr has an empty value in 'lr=0.1,'" -- "$DTRAIN" sweep "$NET" --grid lr=0.1,
expect 2 "lr lists 0.1 twice" -- "$DTRAIN" sweep "$NET" --grid lr=0.1,0.1
expect 2 "lr is given twice" -- "$DTRAIN" sweep "$NET" --grid lr=0.1 lr=0.2
expect 2 "\-\-grid KEY=V1,V2,... is required" -- "$DTRAIN" sweep "$NET" --lr 0.1
expect 2 "\-\-grid trial 2 \(batch=abc\): \-\-batch: 'abc' is not an integer" -- \
    "$DTRAIN" sweep "$NET" --grid batch=8,abc
expect 2 "lr is swept; do not also give \-\-lr" -- "$DTRAIN" sweep "$NET" --grid lr=0.1 --lr 0.2
expect 2 "\-\-log: not for a sweep" -- "$DTRAIN" sweep "$NET" --grid lr=0.1 --log "$TMP/x.jsonl"
expect 2 "\-\-grid trial 1 \(mode=ps-sync\): \-\-mode ps-sync \-\-servers 1 needs at least 2 ranks, a trial has 1 rank \(\-\-ranks-per-trial\)\$" -- \
    "$DTRAIN" sweep "$NET" --grid mode=ps-sync,serial
expect 2 "\-\-grid: mode is swept; do not also give \-\-mode" -- "$DTRAIN" sweep "$NET" --grid mode=serial --mode serial
expect 2 "\-\-grid trial 1 \(straggle=0.1\): \-\-straggle: '0.1' is not P:MS" -- \
    "$DTRAIN" sweep "$NET" --grid straggle=0.1
expect 2 "\-\-ranks-per-trial: 0 is out of range" -- "$DTRAIN" sweep "$NET" --grid lr=0.1 --ranks-per-trial 0
expect 0 "ranks-per-trial" -- "$DTRAIN" sweep --help
out=$($MPIRUN -np 3 "$DTRAIN" sweep "$NET" --grid lr=0.1 --ranks-per-trial 2 2>&1); rc=$?
check "indivisible ranks: exit 2" test $rc -eq 2
check "indivisible ranks: said once" test "$(grep -c "ranks-per-trial 2 does not divide the job's 3 ranks" <<<"$out")" -eq 1
finish

#!/usr/bin/env bash
# A checkpoint directory has one owner and room for what it keeps: a second
# run on a live directory is refused at start (exit 2) naming the owner; a
# killed run's lock never blocks a --resume; a file system without room for
# --keep checkpoints, the one being written and best.ckpt is refused before
# training with the sizes, or with --keep-fewer keeps as many as fit.
source "$(dirname "$0")/clilib.sh" "$1"
M=$SRC/examples/mlp.cfg
D=$TMP/dir
LONG=(--dataset synthetic --threads 1 --quiet --epochs 1000 --no-prefetch)

"$DTRAIN" train "$M" "${LONG[@]}" --checkpoint-dir "$D" --checkpoint-every 50 --log "$TMP/owner.jsonl" \
    > "$TMP/owner.out" 2>&1 &
owner=$!
wait_for "$TMP/owner.jsonl" '"event":"checkpoint"' 60
expect 2 "--checkpoint-dir $D is in use by another run \(host $(hostname), pid $owner, started 20[0-9-]+T[0-9:]+Z; $D/.lock\)" \
    -- "$DTRAIN" train "$M" --dataset synthetic --threads 1 --max-steps 5 --seed 2 --checkpoint-dir "$D" \
    --log "$TMP/refused.jsonl"
check "the refused run wrote nothing, not even its log" test ! -e "$TMP/refused.jsonl"
check "the owner's lock names it" grep -q "pid $owner," "$D/.lock"
kill -9 $owner
wait $owner 2> /dev/null
check "the killed run's lock file stays" test -s "$D/.lock"
last=$(readlink "$D/latest" | sed 's/[^0-9]//g')
expect 0 "\"event\":\"summary\".*\"steps\":$((last + 20))," -- "$DTRAIN" train "$M" --dataset synthetic --threads 1 \
    --quiet --epochs 1000 --max-steps $((last + 20)) --no-prefetch --checkpoint-dir "$D" --resume auto
expect 2 "--keep-fewer needs --checkpoint-dir" -- "$DTRAIN" train "$M" --dataset synthetic --keep-fewer
expect 2 "--keep-global-batch keeps the global batch of the checkpoint a run resumes from: give --resume" -- \
    "$DTRAIN" train "$M" --dataset synthetic --keep-global-batch

# Room: mlp's checkpoints are 3.3 MB (parameters and momentum), so a 6 MB
# file system holds none beside the one being written and best.ckpt, and a
# 12 MB one exactly one.
if [ "$(id -u)" -eq 0 ] && mkdir -p "$TMP/small" && mount -t tmpfs -o size=6m tmpfs "$TMP/small" 2> /dev/null; then
    expect 2 "--checkpoint-dir $TMP/small/D: its file system has room for [0-9.]+ MB of checkpoints, and keeping --keep 3 of 3.3 MB needs 16.3 MB" \
        -- "$DTRAIN" train "$M" --dataset synthetic --threads 1 --max-steps 5 --checkpoint-dir "$TMP/small/D"
    check "refused before training: no checkpoint written" test -z "$(ls "$TMP/small/D" 2> /dev/null)"
    umount "$TMP/small"
    mount -t tmpfs -o size=12m tmpfs "$TMP/small"
    expect 0 "room for 1 checkpoint, not --keep 3: keeping 1 \(--keep-fewer\)" -- "$DTRAIN" train "$M" \
        --dataset synthetic --threads 1 --max-steps 300 --checkpoint-every 100 --checkpoint-dir "$TMP/small/D" --keep-fewer
    check "one step checkpoint kept" test "$(ls "$TMP/small/D" | grep -c '^step-')" -eq 1
    sleep 0.2
    umount "$TMP/small"
else
    echo "skipped the room checks: no tmpfs mount here (not root?)"
fi
finish

#!/usr/bin/env bash
# Input limits seen from the command line: a model over the machine's memory
# is refused before anything is allocated, with the estimate; a checkpoint
# whose position does not fit this run is refused naming the file.
source "$(dirname "$0")/clilib.sh" "$1"

printf '[net]\nchannels=1\nheight=4096\nwidth=4096\n[connected]\noutput=16777216\n[softmax]\n' > "$TMP/huge.cfg"
expect 1 "huge.cfg: the model needs about [0-9.]+ GiB at batch 1 .*workspace.*this machine has" -- \
    "$DTRAIN" info "$TMP/huge.cfg"
expect 1 "huge.cfg: the model needs about" -- "$DTRAIN" train "$TMP/huge.cfg" --dataset synthetic

# 20 steps of batch 8, then a resume with steps of 8192 samples.
N=$SRC/tests/data/small_net.cfg
"$DTRAIN" train "$N" --dataset synthetic --max-steps 20 --checkpoint "$TMP/s.ckpt" --quiet > /dev/null
check "train writes a checkpoint" test -s "$TMP/s.ckpt"
expect 2 "resume .*s.ckpt: the checkpoint's steps were of 8 samples, this run's are of 8192" -- \
    "$DTRAIN" train "$N" --dataset synthetic --batch 8192 --resume "$TMP/s.ckpt" --quiet

finish

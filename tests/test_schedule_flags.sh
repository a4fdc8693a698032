#!/usr/bin/env bash
# Model-file [net] keys as train flags (src/cli/netkeys.c, from the model
# file's one key table): the schedule from the command line (--policy,
# --steps, --scales, --min-lr ...) as the file would set it (the lr of each
# step in the log), checked as the file's keys are, errors naming the flag;
# a policy given so replaces the file's schedule; --help lists the flags.
source "$(dirname "$0")/clilib.sh" "$1"
NET=$SRC/tests/data/small_net.cfg
RUN=("$DTRAIN" train "$NET" --dataset synthetic --threads 1 --quiet)
# lrs LOG: the lr of each step, one line.
lrs() { /usr/bin/python3 -c "
import json, sys
print(' '.join('%g' % r['lr'] for r in map(json.loads, open(sys.argv[1])) if r['event'] == 'step'))" "$1"; }

# Darknet's steps policy: the rate x 0.1 from step 3, x 0.5 more from step 5.
"${RUN[@]}" --max-steps 6 --policy steps --steps 3,5 --scales 0.1,0.5 --log "$TMP/steps.jsonl" > /dev/null
check "--policy steps runs" test $? -eq 0
check "steps schedule: $(lrs "$TMP/steps.jsonl")" test "$(lrs "$TMP/steps.jsonl")" = "0.05 0.05 0.005 0.005 0.0025 0.0025"
# The same from the file: the same rates.
sed 's/^epochs=1$/epochs=1\npolicy=steps\nsteps=3,5\nscales=0.1,0.5/' "$NET" > "$TMP/steps.cfg"
"$DTRAIN" train "$TMP/steps.cfg" --dataset synthetic --threads 1 --quiet --max-steps 6 --log "$TMP/file.jsonl" > /dev/null
check "flags == file" test "$(lrs "$TMP/file.jsonl")" = "$(lrs "$TMP/steps.jsonl")"
# --policy over the file's steps schedule: its steps= and scales= are not read.
"$DTRAIN" train "$TMP/steps.cfg" --dataset synthetic --threads 1 --quiet --max-steps 6 --policy constant \
    --log "$TMP/const.jsonl" > /dev/null
check "--policy replaces the file's schedule" test "$(lrs "$TMP/const.jsonl")" = "0.05 0.05 0.05 0.05 0.05 0.05"
# Darknet's poly over max_batches, and a cosine to --min-lr: as the file's keys.
sed '/^epochs=1$/d' "$NET" > "$TMP/noepochs.cfg"
"$DTRAIN" train "$TMP/noepochs.cfg" --dataset synthetic --threads 1 --quiet --policy poly --max-batches 4 --power 1 \
    --log "$TMP/poly.jsonl" > /dev/null
check "poly: $(lrs "$TMP/poly.jsonl")" test "$(lrs "$TMP/poly.jsonl")" = "0.0375 0.025 0.0125 0"
expect 0 "cosine" -- "$DTRAIN" train "$NET" --dataset synthetic --threads 1 --max-steps 1 --policy cosine --min-lr 0.001

# Checked as the file's keys, named by their flag (usage errors: exit 2).
expect 2 "^dtrain: --policy steps \(over .*small_net.cfg\): policy=steps needs steps=$" -- "${RUN[@]}" --policy steps
expect 2 "^dtrain: --steps 3,5 \(over .*small_net.cfg\): steps= applies only to policy=steps \(policy is constant\)$" -- \
    "${RUN[@]}" --steps 3,5 --scales 0.1,0.1
expect 2 "^dtrain: --steps 5,3 \(over .*\): steps must be strictly ascending \(3 after 5\)$" -- \
    "${RUN[@]}" --policy steps --steps 5,3 --scales 0.1,0.1
expect 2 "^dtrain: --scales 0.1 \(over .*\): steps= has 2 values and scales= 1; each step needs its scale$" -- \
    "${RUN[@]}" --policy steps --steps 3,5 --scales 0.1
expect 2 "^dtrain: --policy fancy \(over .*\): bad value 'fancy' for policy: expected one of constant, step" -- \
    "${RUN[@]}" --policy fancy
expect 2 "^dtrain: --gamma 0 \(over .*\): gamma=0 is out of range" -- "${RUN[@]}" --policy step --gamma 0
expect 2 "unknown flag '--learning-rate'" -- "${RUN[@]}" --learning-rate 0.1  # it is --lr
# --help lists them, from the table.
expect 2 "max_batches= and epochs= both set the run's length \(line 12\); give one" -- "${RUN[@]}" --max-batches 4
expect 0 "--width --policy" -- "$DTRAIN" train --help
# The optimiser's hyperparameters are rows of their own (optim.h's table), with their usage.
expect 0 "  --nesterov 0\|1 +sgd: Nesterov's momentum" -- "$DTRAIN" train --help
expect 0 "--scales --step --scale" -- "$DTRAIN" train --help
finish

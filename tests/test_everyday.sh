#!/usr/bin/env bash
# What a new user trips on: no subcommand writes over its inputs or one
# output over another (refused before anything is written, exit 2, the
# flag named), an export's format follows its extension, the folders of
# outputs are made, and the messages that used to mislead.
source "$(dirname "$0")/clilib.sh" "$1"
cd "$TMP" || exit 1
cp "$SRC/tests/data/small_net.cfg" m.cfg
A=(--dataset synthetic --threads 1 --quiet)
"$DTRAIN" train m.cfg "${A[@]}" --max-steps 5 --checkpoint m.ckpt --log run.jsonl > /dev/null
check "a checkpoint to work with" test -s m.ckpt
cp m.cfg m.cfg.orig; cp m.ckpt m.ckpt.orig; cp run.jsonl run.jsonl.orig
intact() { check "$1 intact" cmp -s "$1" "$1.orig"; }

# Outputs that are inputs or each other: exit 2, the flag named, nothing written.
expect 2 "^dtrain: -o m.cfg is the model file: it would be overwritten$" -- "$DTRAIN" export m.cfg --weights m.ckpt -o m.cfg
expect 2 "^dtrain: -o ./m.ckpt is the checkpoint given to --weights" -- "$DTRAIN" export m.cfg --weights m.ckpt -o ./m.ckpt
ln -s m.cfg link.cfg
expect 2 "^dtrain: -o link.cfg is the model file" -- "$DTRAIN" export m.cfg --weights m.ckpt -o link.cfg
expect 2 "^dtrain: --logits-out m.ckpt is the checkpoint given to --weights" -- "$DTRAIN" eval m.cfg --dataset synthetic \
    --weights m.ckpt --logits-out m.ckpt
expect 2 "^dtrain: --logits-out m.cfg is the model file" -- "$DTRAIN" eval m.cfg --dataset synthetic --weights m.ckpt \
    --logits-out m.cfg
expect 2 "^dtrain: --data-out run.jsonl is a log to plot" -- "$DTRAIN" plot run.jsonl -o c.png --data-out run.jsonl
expect 2 "^dtrain: -o run.jsonl is a log to plot" -- "$DTRAIN" plot run.jsonl -o run.jsonl
expect 2 "^dtrain: -o and --data-out name the same file \(c.svg\)" -- "$DTRAIN" plot run.jsonl -o c.svg --data-out c.svg
expect 2 "^dtrain: --out m.cfg is the model file" -- "$DTRAIN" sweep m.cfg --grid lr=0.01 --out m.cfg "${A[@]}"
expect 2 "^dtrain: --profile-out ./m.cfg is the model file" -- "$DTRAIN" bench m.cfg --profile-out ./m.cfg --steps 2
for f in m.cfg m.ckpt run.jsonl; do intact $f; done
check "no c.svg" test ! -e c.svg

# An export's format is its extension's.
expect 2 "^dtrain: export: -o my.pt: unknown extension \(known: .onnx, .weights;" -- "$DTRAIN" export m.cfg --weights m.ckpt -o my.pt
check "no my.pt" test ! -e my.pt
expect 0 "-> m.onnx" -- "$DTRAIN" export m.cfg --weights m.ckpt -o m.onnx
expect 0 "-> M.ONNX" -- "$DTRAIN" export m.cfg --weights m.ckpt -o M.ONNX

# Folders of outputs are made (mkdir -p); one that cannot be is named.
expect 0 "" -- "$DTRAIN" train m.cfg "${A[@]}" --max-steps 2 --checkpoint-dir runs/a/ck --log runs/b/run.jsonl \
    --timeline runs/c/t.json
check "log in a new folder" test -s runs/b/run.jsonl
check "checkpoint dir in a new folder" test -e runs/a/ck/latest
expect 0 "" -- "$DTRAIN" eval m.cfg --dataset synthetic --weights m.ckpt --logits-out out/l/logits.f32
check "logits in a new folder" test -s out/l/logits.f32
expect 0 "" -- "$DTRAIN" export m.cfg --weights m.ckpt -o out/x/m.onnx
check "export in a new folder" test -s out/x/m.onnx
expect 0 "" -- "$DTRAIN" plot run.jsonl -o out/p/c.svg --data-out out/q/c.tsv
check "plot in new folders" test -s out/p/c.svg -a -s out/q/c.tsv
expect 0 "" -- "$DTRAIN" sweep m.cfg --grid lr=0.01,0.02 --out out/s/sweep.jsonl "${A[@]}" --max-steps 2
check "sweep --out in a new folder" test -s out/s/sweep.jsonl
expect 1 "^dtrain: --log m.cfg/x/run.jsonl: cannot create the folder m.cfg: Not a directory$" -- "$DTRAIN" train m.cfg \
    "${A[@]}" --max-steps 2 --log m.cfg/x/run.jsonl
intact m.cfg

# Messages: every valid key listed (the last of [net] too) and the nearest
# named, for keys, sections and flags.
printf '[net]\nlearning_rte=0.1\n' > typo.cfg
expect 2 "^dtrain: typo.cfg:2: unknown key 'learning_rte' in \[net\] \(did you mean learning_rate\?\) \(valid: batch, .*, \
dataset, flip, .*, precision, winograd, mean, std\)$" -- "$DTRAIN" info typo.cfg
sed 's/^\[maxpool\]/[maxpol]/' m.cfg > typo.cfg
expect 2 "typo.cfg:18: unknown section \[maxpol\] \(did you mean maxpool\?\)" -- "$DTRAIN" info typo.cfg
expect 2 "^dtrain: unknown flag '--max-step' \(did you mean --max-steps\?\) \(see --help\)$" -- "$DTRAIN" train m.cfg --max-step 3
expect 2 "^dtrain: unknown flag '--logits' \(did you mean --logits-out\?\)" -- "$DTRAIN" eval m.cfg --weights m.ckpt --logits x
expect 2 "^dtrain: unknown flag '--bogus' \(see --help\)$" -- "$DTRAIN" train m.cfg --bogus 3

# Messages: a file that is not a checkpoint says so (not "truncated"); a
# checkpoint of another model names the first layer that differs.
echo "lr=0.1" > notes.txt
expect 1 "^dtrain: notes.txt: not a dtrain checkpoint \(too short\)$" -- "$DTRAIN" train m.cfg "${A[@]}" --weights notes.txt
expect 1 "^dtrain: m.cfg: not a dtrain checkpoint \(bad magic\)$" -- "$DTRAIN" eval m.cfg --dataset synthetic --weights m.cfg
sed 's/output=32/output=16/' m.cfg > sixteen.cfg
expect 1 "^dtrain: m.ckpt: checkpoint is for a different model: layer 3 is connected 6x6x6 -> 32x1x1, 6912 weights \+ 32 \
biases in the checkpoint, connected 6x6x6 -> 16x1x1, 3456 weights \+ 16 biases in this model$" -- "$DTRAIN" eval sixteen.cfg \
    --dataset synthetic --weights m.ckpt
expect 1 "m.ckpt: checkpoint is for a different model: layer 3 is connected" -- "$DTRAIN" train sixteen.cfg "${A[@]}" \
    --resume m.ckpt --max-steps 10
expect 1 "m.ckpt: checkpoint is for a different model: layer 3 is connected" -- "$DTRAIN" export sixteen.cfg \
    --weights m.ckpt -o s.onnx

# launch checks the train flags before starting mpirun: one line, exit 2.
out=$("$DTRAIN" launch -n 2 -- train m.cfg "${A[@]}" --max-step 3 2>&1); rc=$?
check "launch: a mistyped train flag is exit 2 ($rc)" test $rc -eq 2
check "launch: one line naming it ($out)" test "$out" = \
    "dtrain: unknown flag '--max-step' (did you mean --max-steps?) (see --help)"
expect 2 "^dtrain: --batch: 0 is out of range" -- "$DTRAIN" launch -n 2 --dry-run -- train m.cfg --batch 0

# Strictness alike everywhere: a flag that does nothing is an error.
expect 2 "^dtrain: info: --workers applies to --plan \(the communication plan\); add --plan$" -- "$DTRAIN" info m.cfg --workers 4
expect 2 "^dtrain: info: --mode applies to --plan" -- "$DTRAIN" info m.cfg --json --mode allreduce
expect 0 "workers" -- "$DTRAIN" info m.cfg --plan --workers 4
expect 0 "^note: m.cfg:9: momentum= applies only to optimizer=sgd or lars \(--optimizer is adam\): ignored$" -- \
    "$DTRAIN" train m.cfg --dataset synthetic --threads 1 --max-steps 2 --optimizer adam
sed 's/^momentum=0.9$/optimizer=adam\nmomentum=0.9/' m.cfg > adam.cfg
expect 2 "adam.cfg:10: momentum= applies only to optimizer=sgd or lars \(optimizer is adam\)" -- "$DTRAIN" info adam.cfg
# The run's length: a --max-steps the file's epochs end first is noted; a
# run stopped part way into an epoch says so (not "epoch 1").
expect 0 "^note: --max-steps 10 is past the run's end: it ends at step 6 \(1 epoch of 6 steps: m.cfg's epochs=, or \
--epochs\)$" -- "$DTRAIN" train m.cfg --dataset synthetic --threads 1 --max-steps 10 --batch 10000
"$DTRAIN" train m.cfg --dataset synthetic --threads 1 --max-steps 13 --batch 500 --log part.jsonl > part.out
check "partial epoch said" grep -q "^epoch 1 (partial: 0.108 epochs, step 13): test accuracy" part.out
check "partial epoch logged" grep -q '"event":"eval","step":13,"epoch":1,"epochs":0.108,' part.jsonl

# --version says which libraries dtrain links as ldd sees them, and the
# README's opening does not claim another.
linked=$(ldd "$DTRAIN" | grep -c libopenblas)
if [ "$linked" = 0 ]; then want="OpenBLAS: not linked"; else want="OpenBLAS: [0-9]"; fi
expect 0 "^$want" -- "$DTRAIN" --version
if [ "$linked" = 0 ]; then
    check "README's opening names no OpenBLAS under dtrain" bash -c "! sed -n '1,/^\$/p;/^dtrain trains/,/^\$/p' \
        '$SRC/README.md' | grep -q OpenBLAS"
fi

# The examples name files as the repository's layout has them, not by one
# machine's absolute paths.
check "no example names an absolute /work path" bash -c "! grep -n '/work/' '$SRC'/examples/*.cfg"

# eval of a model whose input is not the data set's: which --dataset fits.
sed -e 's/^channels=1$/channels=3/' -e 's/^height=12$/height=32/' -e 's/^width=12$/width=32/' m.cfg > c32.cfg
"$DTRAIN" train c32.cfg "${A[@]}" --max-steps 2 --checkpoint c32.ckpt > /dev/null
expect 2 "c32.cfg: model input is 3x32x32 but fashion-mnist images are 1x28x28; its input is cifar10's: give --dataset \
cifar10$" -- "$DTRAIN" eval c32.cfg --weights c32.ckpt
sed -e 's/^height=12$/height=20/' m.cfg > h20.cfg
"$DTRAIN" train h20.cfg "${A[@]}" --max-steps 2 --checkpoint h20.ckpt > /dev/null
expect 2 "; give --dataset folder --data-dir DIR for images of another shape$" -- "$DTRAIN" eval h20.cfg --weights h20.ckpt
finish

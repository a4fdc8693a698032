#!/usr/bin/env bash
# Darknet's .weights files both ways, against Debian's darknet (pjreddie's,
# git 61c9d02e): on a small labelled set of square PNGs (4 classes, 64
# training and 32 test images each, 32x32) and a 3x28x28 classifier with
# batch-normalised convolutional and connected sections (Darknet's crop,
# min_crop=max_crop=32, so both evaluate the centre 32x32 square resized to
# 28x28: Darknet's validate_classifier_single and center_crop_image),
#   (a) a net trained by `darknet classifier train` gives in `dtrain eval`
#       the accuracy `darknet classifier valid` prints, and, with its
#       running variances rewritten for dtrain's batch-norm epsilon, its
#       probabilities within 1e-4 (tests/darknet_valid_check.py says why
#       and which near ties may go either way);
#   (b) a net trained by dtrain and exported to .weights gives in darknet
#       the accuracy and (variances rewritten likewise) the probabilities
#       dtrain eval gives;
#   (c) checkpoint -> .weights -> dtrain is exact: .weights -> .weights
#       rewrites the same bytes, and eval's logits from the .weights equal
#       the checkpoint's bit for bit; train --weights and predict take it;
#   (d) truncated, too long and another model's files are one-line errors.
# Skipped (77) without darknet or python3's PIL and numpy.
source "$(dirname "$0")/clilib.sh" "$1"
command -v darknet > /dev/null ||
    { echo "test_darknet_weights: skipped (Debian's darknet is not installed)"; exit 77; }
CLASSES=k_blue,k_gold,k_green,k_red # Darknet's label of an image: the name its path contains
make_images tree "$TMP/img" $CLASSES 64 32 --square
cd "$TMP" || exit 1
tr , '\n' <<<"$CLASSES" > labels.txt # dtrain's class order: the folders', bytewise
find "$TMP/img/train" -name '*.png' | LC_ALL=C sort > train.list
find "$TMP/img/test" -name '*.png' | LC_ALL=C sort > test.list # dtrain eval's order
mkdir backup
printf 'classes=4\ntrain=%s\nvalid=%s\nlabels=%s\nbackup=%s\ntop=1\n' "$TMP/train.list" "$TMP/test.list" \
    "$TMP/labels.txt" "$TMP/backup" > tiny.data
cat > tiny.cfg << 'EOF'
[net]
batch=32
subdivisions=1
height=28
width=28
channels=3
min_crop=32
max_crop=32
learning_rate=0.1
policy=poly
power=4
max_batches=48
momentum=0.9
decay=0.0005

[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
batch_normalize=1
filters=16
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[connected]
output=32
batch_normalize=1
activation=leaky

[connected]
output=4
activation=linear

[softmax]
groups=1
EOF
EVAL=(--dataset folder --data-dir "$TMP/img" --threads 1)

CHECK="$SRC/tests/darknet_valid_check.py"
BN_VARS="24:8 296:16 26648:32" # tiny.cfg's running variances: (float offset after the header):(count)

# valid WEIGHTS OUT: darknet classifier valid's output.
valid() {
    timeout 300 darknet classifier valid tiny.data tiny.cfg "$1" > "$2" 2> "$2.err"
    check "darknet classifier valid $1" test $? -eq 0 || tail -3 "$2.err"
}
# dteval WEIGHTS LOGITS: prints dtrain eval's accuracy.
dteval() {
    "$DTRAIN" eval tiny.cfg --weights "$1" "${EVAL[@]}" --json --logits-out "$2" |
        sed -n 's/.*"test_accuracy":\([0-9.]*\).*/\1/p'
}
# agree WHAT VALID LOGITS ACCURACY TOLERANCE
agree() {
    check "$1" /usr/bin/python3 "$CHECK" compare "$2" "$3" 4 "${4:-0}" "$5"
}

# (a) Darknet's training, evaluated by both: after its first epoch (8 steps)
# and at its end. The accuracy as it is (probabilities within 1e-1: batch
# norm's epsilon; Darknet seeds its training from the clock, srand(time(0))
# in train_classifier, so every run trains another net, and one after its
# first epoch differed by 0.052 here), and exact once the variances give
# dtrain Darknet's divisor.
timeout 600 darknet classifier train tiny.data tiny.cfg -nogpu > darknet.train 2>&1
check "darknet classifier train writes backup/tiny.weights" test -s backup/tiny.weights || tail -3 darknet.train
for w in tiny_1 tiny; do
    valid "backup/$w.weights" "$w.valid"
    agree "$w.weights: dtrain eval's accuracy is darknet valid's" "$w.valid" "$w.logits" \
        "$(dteval "backup/$w.weights" "$w.logits")" 1e-1
    /usr/bin/python3 "$CHECK" eps to-dtrain "backup/$w.weights" "$w.eps.weights" $BN_VARS
    agree "$w.weights with Darknet's divisor: dtrain's probabilities are darknet's (1e-4)" "$w.valid" \
        "$w.eps.logits" "$(dteval "$w.eps.weights" "$w.eps.logits")" 1e-4
done

# (b) dtrain's training, exported, evaluated by both (a few steps: not every
# image right); the same two comparisons.
"$DTRAIN" train tiny.cfg "${EVAL[@]}" --max-steps 4 --quiet --checkpoint d.ckpt > d.train 2>&1
check "dtrain trains tiny.cfg" test $? -eq 0 || tail -3 d.train
expect 0 "step 4 of d.ckpt\) -> d.weights" -- "$DTRAIN" export tiny.cfg --weights d.ckpt -o d.weights
acc=$(dteval d.ckpt d.logits)
valid d.weights d.valid
agree "d.weights: darknet valid's accuracy is dtrain eval's" d.valid d.logits "$acc" 5e-2
/usr/bin/python3 "$CHECK" eps to-darknet d.weights d.eps.weights $BN_VARS
valid d.eps.weights d.eps.valid
agree "d.weights with dtrain's divisor: darknet's probabilities are dtrain's (1e-4)" d.eps.valid d.logits "$acc" 1e-4

# (c) exact round trips; --weights F.weights in train and predict; Darknet's header.
expect 0 "-> d2.weights" -- "$DTRAIN" export tiny.cfg --weights d.weights -o d2.weights
check ".weights -> dtrain -> .weights: the same bytes" cmp d.weights d2.weights
"$DTRAIN" eval tiny.cfg --weights d.weights "${EVAL[@]}" --logits-out w.logits > /dev/null
"$DTRAIN" eval tiny.cfg --weights d.ckpt "${EVAL[@]}" --logits-out c.logits > /dev/null
check "eval's logits from d.weights equal d.ckpt's bit for bit" cmp w.logits c.logits
check "header: major 0, minor 2, revision 0, seen 128 (4 steps of 32) as 8 bytes" \
    test "$(od -An -tu4 -N20 -w20 d.weights | tr -s ' ')" = " 0 2 0 128 0"
expect 0 "starting from the weights of backup/tiny.weights \(Darknet weights" -- \
    "$DTRAIN" train tiny.cfg "${EVAL[@]}" --weights backup/tiny.weights --max-steps 1 --checkpoint warm.ckpt
expect 0 "k_red|3" -- "$DTRAIN" predict tiny.cfg --weights d.weights "$TMP/img/test/k_red/img000.png"

# (d) files that do not fit the model file: one line, exit 1, nothing loaded.
head -c -4 d.weights > short.weights
cat d.weights d.weights > long.weights
sed 's/^filters=8$/filters=6/' tiny.cfg > other.cfg
head -c 20 d.weights > header.weights
bad() { # bad NAME PATTERN -- CMD...: exit 1, the output ends with one line saying PATTERN
    local name=$1 pattern=$2
    shift 3
    expect 1 "$pattern" -- "$@"
    check "$name: one line" grep -qE "^dtrain: .*$pattern" <<<"$("$@" 2>&1 | tail -1)"
}
bad truncated "short.weights: Darknet weights end inside the \[connected\] section of line 45 \(dtrain layer 11\)" \
    -- "$DTRAIN" eval tiny.cfg --weights short.weights "${EVAL[@]}"
bad "too long" "long.weights: 107268 bytes left after the last section's arrays" \
    -- "$DTRAIN" eval tiny.cfg --weights long.weights "${EVAL[@]}"
bad "another model" "d.weights: .* the model needs .* bytes" \
    -- "$DTRAIN" eval other.cfg --weights d.weights "${EVAL[@]}"
bad "header only" "header.weights: Darknet weights end inside the \[convolutional\] section of line 16" \
    -- "$DTRAIN" predict tiny.cfg --weights header.weights "$TMP/img/test/k_red/img000.png"
bad "export of a short file" "short.weights: Darknet weights end inside" \
    -- "$DTRAIN" export tiny.cfg --weights short.weights -o s.onnx
bad "train --weights of a long file" "long.weights: 107268 bytes left" \
    -- "$DTRAIN" train tiny.cfg "${EVAL[@]}" --weights long.weights --max-steps 1
check "no output of a failed export" test ! -e s.onnx
expect 2 "--partial: d.weights is Darknet weights" -- \
    "$DTRAIN" train tiny.cfg "${EVAL[@]}" --weights d.weights --partial --max-steps 1
finish

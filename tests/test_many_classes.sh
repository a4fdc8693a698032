#!/usr/bin/env bash
# Labels past a byte, end to end (labels are 32-bit): a folder of 300 class
# folders trains and evaluates (eval's count of right answers is the
# argmax of its --logits-out against the labels); a 300-class run resumed
# from its checkpoint equals the uninterrupted one; dtrain launch -n 2
# allreduce and ps-sync (2 workers, 1 server) on 300-class synthetic data
# equal serial with the global batch; eval of 5000 classes (no confusion
# matrix of that size); info and bench of 1000-output models on synthetic
# data. Skipped (77) without python3, PIL and numpy.
source "$(dirname "$0")/clilib.sh" "$1"
CLASSES=$(seq -f "k%04g" 0 299 | paste -sd,)
make_images tree "$TMP/f" "$CLASSES" 2 8
cat > "$TMP/m.cfg" <<'EOF'
[net]
channels=3
height=8
width=8
batch=20
learning_rate=0.5
momentum=0.9
epochs=30
dataset=folder
[connected]
output=300
activation=linear
[softmax]
EOF

# Trains (600 images, 300 classes) and evaluates: labels up to 299 in the
# summary, eval's accuracy is the logits' argmax against the labels, and
# well above chance (1/300).
"$DTRAIN" train "$TMP/m.cfg" --data-dir "$TMP/f" --threads 1 --quiet --checkpoint "$TMP/f.ckpt" > "$TMP/f.out" 2>&1
check "300-class folder trains" test $? -eq 0 || tail -5 "$TMP/f.out"
"$DTRAIN" eval "$TMP/m.cfg" --weights "$TMP/f.ckpt" --data-dir "$TMP/f" --json --logits-out "$TMP/f.f32" \
    > "$TMP/eval.json" 2> "$TMP/eval.err"
check "300-class folder evaluates" test $? -eq 0 || cat "$TMP/eval.err"
check "eval = argmax of its logits, above chance" /usr/bin/python3 - "$TMP/eval.json" "$TMP/f.f32" <<'EOF'
import json, struct, sys
j = json.loads(open(sys.argv[1]).read())
raw = open(sys.argv[2], "rb").read()
n, c = j["samples"], 300
x = struct.unpack("<%df" % (n * c), raw)
assert n == 300 and len(j["classes"]) == 300 and j["classes"][299] == "k0299", (n, len(j["classes"]))
# the test set has one image per class, in label order
right = sum(max(range(c), key=lambda k: (x[i * c + k], -k)) == i for i in range(n))
assert abs(right / n - j["test_accuracy"]) < 1e-3, (right, j["test_accuracy"])
assert j["test_accuracy"] > 0.1, j["test_accuracy"]
EOF

# A 300-class checkpoint resumes: 12 steps, then 12 more from the 6th-step
# file, equal bit for bit (a batch past label 255 included).
TRAIN_DATA=(--data-dir "$TMP/f")
train_ckpt straight 1 "$TMP/m.cfg" --max-steps 12
train_ckpt half 1 "$TMP/m.cfg" --max-steps 6
train_ckpt resumed 1 "$TMP/m.cfg" --max-steps 12 --resume "$TMP/half.ckpt"
same straight resumed 0

# Distributed on 300-class synthetic data: 2 workers of 8 (allreduce; ps-sync
# with 1 server) against serial with 16 (summation order only: TOL as
# test_dist).
sed 's/^dataset=folder$/dataset=synthetic/; s/^batch=20$/batch=16/; s/^learning_rate=0.5$/learning_rate=0.05/' \
    "$TMP/m.cfg" > "$TMP/s.cfg"
TOL=2e-5
TRAIN_DATA=(--dataset synthetic)
train_ckpt serial 1 "$TMP/s.cfg" --max-steps 20 --batch 16
for mode in allreduce ps-sync; do
    np=$([ $mode = allreduce ] && echo 2 || echo 3)
    timeout 300 "$DTRAIN" launch -n $np -- train "$TMP/s.cfg" --dataset synthetic --threads 1 --quiet --max-steps 20 \
        --batch 8 --mode $mode --checkpoint "$TMP/$mode.ckpt" > "$TMP/$mode.out" 2>&1
    check "launch -n $np $mode runs" test $? -eq 0 || tail -5 "$TMP/$mode.out"
    same serial $mode $TOL
done

# A 1000-output model (Darknet's ImageNet classifiers' head) on synthetic data.
sed 's/^output=300$/output=1000/' "$TMP/s.cfg" > "$TMP/k.cfg"
expect 0 "1000" -- "$DTRAIN" info "$TMP/k.cfg"
expect 0 "images_per_sec" -- "$DTRAIN" bench "$TMP/k.cfg" --steps 2 --threads 1
expect 0 "" -- "$DTRAIN" train "$TMP/k.cfg" --dataset synthetic --threads 1 --quiet --max-steps 2
# 5000 classes: eval counts per class at any count; a confusion matrix
# (5000^2 cells) is refused, naming the flag.
sed 's/^output=300$/output=5000/' "$TMP/s.cfg" > "$TMP/k5.cfg"
train_ckpt k5 1 "$TMP/k5.cfg" --max-steps 2
expect 0 '"samples":10000' -- "$DTRAIN" eval "$TMP/k5.cfg" --weights "$TMP/k5.ckpt" --dataset synthetic --json
expect 2 "^dtrain: --confusion: .*k5.cfg has 5000 classes, a matrix is kept for at most 4096$" -- \
    "$DTRAIN" eval "$TMP/k5.cfg" --weights "$TMP/k5.ckpt" --dataset synthetic --confusion
# Darknet's own darknet.cfg (1000 outputs, 256x256 input) when Debian's darknet is installed.
DN=/usr/share/darknet/cfg/darknet.cfg
if [ -r $DN ]; then
    expect 0 "7319416 parameters" -- "$DTRAIN" info $DN
    expect 0 "images_per_sec" -- "$DTRAIN" bench $DN --steps 1 --batch 1 --threads 1
fi
finish

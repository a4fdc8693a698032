#!/usr/bin/env bash
# dtrain train/eval/bench on a folder of images (tests/make_images.py writes
# 4 classes of small PNGs and JPEGs): the class mapping printed, saved in
# the checkpoint and used by eval (a test folder with one class keeps its
# label); images held in memory or decoded per batch by several threads
# train the same bits; a resumed run equals the uninterrupted one; 2 ranks
# of allreduce equal serial with the global batch; each bad input is a
# one-line error naming the file, and --skip-bad-images counts instead.
# Skipped (77) without python3, PIL and numpy.
source "$(dirname "$0")/clilib.sh" "$1"
make_images tree "$TMP/imgs" b,a,C,_x 24 12
cat > "$TMP/m.cfg" <<'EOF'
[net]
channels=3
height=12
width=12
batch=8
learning_rate=0.05
momentum=0.9
epochs=2
flip=1
crop_pad=1
dataset=folder
[connected]
output=32
activation=relu
[connected]
output=4
activation=linear
[softmax]
EOF
M=$TMP/m.cfg
TRAIN_DATA=(--data-dir "$TMP/imgs") # dataset=folder is the model file's
K=24

# The mapping, sorted bytewise, printed at start; how the images are held.
"$DTRAIN" train "$M" --data-dir "$TMP/imgs" --threads 1 --max-steps 2 > "$TMP/start.out" 2>&1
check "mapping printed" grep -q "^classes: 0 C, 1 _x, 2 a, 3 b$" "$TMP/start.out"
check "held in memory" grep -q "imgs/train: 96 images in 4 classes, decoded once and held in memory" "$TMP/start.out"
expect 0 "imgs/test: 48 images in 4 classes, decoded per batch by 3 loader threads" -- \
    "$DTRAIN" train "$M" --data-dir "$TMP/imgs" --threads 1 --max-steps 2 --cache-mb 0 --loader-threads 3

# In memory, or per batch with 3 threads and no prefetch: the same bits; a
# run resumed from the middle (per batch) equals the uninterrupted one.
train_ckpt mem 1 "$M" --max-steps $K
train_ckpt disk 1 "$M" --max-steps $K --cache-mb 0 --loader-threads 3 --no-prefetch
same mem disk 0
train_ckpt half 1 "$M" --max-steps 10 --cache-mb 0
train_ckpt resumed 1 "$M" --max-steps $K --resume "$TMP/half.ckpt"
same mem resumed 0
grep -q '"test_accuracy":1.0000' "$TMP/mem.out" || { echo "FAIL: not learnt: $(tail -1 "$TMP/mem.out")"; fails=$((fails + 1)); }
# Without dataset=folder eval reads Fashion-MNIST: the checkpoint's class
# names say what it was trained on.
sed '/^dataset=folder$/d' "$M" > "$TMP/nofolder.cfg"
expect 2 "model input is 3x12x12 but fashion-mnist images are 1x28x28; the checkpoint was trained on a folder data set \
\(4 classes, 'C' first\): give --dataset folder --data-dir DIR$" -- "$DTRAIN" eval "$TMP/nofolder.cfg" --weights "$TMP/mem.ckpt"

# Darknet's crop decodes the folder at max_crop x max_crop (3 x 16 x 16
# bytes for 96 images: 0.07 MiB) and crops 12 x 12 from it; eval takes
# the centre crop of the same squares.
sed -e 's/^crop_pad=1$/min_crop=12\nmax_crop=16\nhue=0.1/' "$M" > "$TMP/dk.cfg"
expect 0 "imgs/train: 96 images in 4 classes, decoded once and held in memory \(0.07 MiB\)" -- \
    "$DTRAIN" train "$TMP/dk.cfg" --data-dir "$TMP/imgs" --threads 1 --max-steps 4 --checkpoint "$TMP/dk.ckpt"
expect 0 "accuracy" -- "$DTRAIN" eval "$TMP/dk.cfg" --data-dir "$TMP/imgs" --weights "$TMP/dk.ckpt"

# 2 ranks of batch 4 (each loading the folder) equal serial at batch 8.
# (Under the sanitizers, CI's time: not this, nor the error messages and
# the bench below, which tests/test_folder.c and test_image.c cover there.)
if [ -z "${DT_SANITIZE:-}" ]; then
train_ckpt ar 2 "$M" --max-steps $K --batch 4 --mode allreduce --cache-mb 0
same mem ar 2e-6
fi

# eval: the checkpoint's classes, in the summary, label a test folder that
# has only class b (alone, sorted, it would be label 0).
expect 0 '"test_accuracy":1.0000,.*"classes":\["C","_x","a","b"\],"skipped":0,"ignored":0' -- \
    "$DTRAIN" eval "$M" --weights "$TMP/mem.ckpt" --data-dir "$TMP/imgs" --json
mkdir -p "$TMP/only_b/test" && cp -r "$TMP/imgs/test/b" "$TMP/only_b/test/"
expect 0 '"test_accuracy":1.0000,.*"samples":12,' -- \
    "$DTRAIN" eval "$M" --weights "$TMP/mem.ckpt" --data-dir "$TMP/only_b" --cache-mb 0 --json
mv "$TMP/only_b/test/b" "$TMP/only_b/test/zebra"
expect 1 "only_b/test/zebra: class 'zebra' is not one of the 4 classes of .*mem.ckpt" -- \
    "$DTRAIN" eval "$M" --weights "$TMP/mem.ckpt" --data-dir "$TMP/only_b"
# mean= and std= (per channel, [net]): the input is (byte / 255 - mean) /
# std. A linear model's logits with them, from its plain logits and its
# weights: (plain - b) / s - (sum_c mean_c W_c 1) / s + b (one std, three means).
printf '[net]\nchannels=3\nheight=12\nwidth=12\nbatch=8\nlearning_rate=0.05\ndataset=folder\n[connected]\noutput=4\nactivation=linear\n[softmax]\n' \
    > "$TMP/lin.cfg"
sed 's/^dataset=folder$/dataset=folder\nmean=0.1,0.2,0.3\nstd=0.5,0.5,0.5/' "$TMP/lin.cfg" > "$TMP/norm.cfg"
train_ckpt lin 1 "$TMP/lin.cfg" --max-steps 4
"$DTRAIN" eval "$TMP/lin.cfg" --weights "$TMP/lin.ckpt" --data-dir "$TMP/imgs" --logits-out "$TMP/plain.f32" > /dev/null
check "eval plain" test $? -eq 0
"$DTRAIN" eval "$TMP/norm.cfg" --weights "$TMP/lin.ckpt" --data-dir "$TMP/imgs" --logits-out "$TMP/norm.f32" > /dev/null
check "eval with mean= and std=" test $? -eq 0
check "normalised logits" /usr/bin/python3 -c "
import numpy as np, struct, sys
raw = open('$TMP/lin.ckpt', 'rb').read()
w = np.frombuffer(raw, '<f4', 4 * 432 + 4, 80)
W, b = w[:4 * 432].reshape(4, 3, 144), w[4 * 432:]
plain = np.fromfile('$TMP/plain.f32', '<f4').reshape(-1, 4)
norm = np.fromfile('$TMP/norm.f32', '<f4').reshape(-1, 4)
want = (plain - b) / 0.5 - (np.array([0.1, 0.2, 0.3]) @ W.sum(2).T) / 0.5 + b
assert np.abs(norm - want).max() < 1e-4, np.abs(norm - want).max()"
# Training reads them too (a different run), and a flag gives them as well.
train_ckpt norm 1 "$TMP/norm.cfg" --max-steps 4
train_ckpt flags 1 "$TMP/lin.cfg" --max-steps 4 --mean 0.1,0.2,0.3 --std 0.5,0.5,0.5
check "trained on normalised input" bash -c "! /usr/bin/python3 $SRC/tests/ckpt_diff.py $TMP/lin.ckpt $TMP/norm.ckpt 0 > /dev/null"
same norm flags 0
# export says them in its preprocessing note.
expect 0 "-> $TMP/norm.onnx" -- "$DTRAIN" export "$TMP/norm.cfg" --weights "$TMP/lin.ckpt" -o "$TMP/norm.onnx"
check "export states mean and std" /usr/bin/python3 -c "
import onnx, sys
meta = {p.key: p.value for p in onnx.load(sys.argv[1]).metadata_props}
assert 'R,G,B; then minus mean (0.100000001, 0.200000003, 0.300000012) and over std (0.5, 0.5, 0.5) per channel' \
    in meta['preprocessing'], meta" "$TMP/norm.onnx"
sed 's/^mean=.*/mean=0.1,0.2/' "$TMP/norm.cfg" > "$TMP/norm2.cfg"
expect 2 "norm2.cfg:8: mean= has 2 values, the input has 3 channels \(channels=\): one per channel" -- \
    "$DTRAIN" info "$TMP/norm2.cfg"
expect 2 "\-\-std 0.5,0 \(over .*lin.cfg\): std=0.5,0 is out of range: expected a comma list of one number per channel, each > 0" -- \
    "$DTRAIN" train "$TMP/lin.cfg" --data-dir "$TMP/imgs" --std 0.5,0

# --val-split: a folder without test/ holds out a seeded, stratified share
# of train/ (6 of each class's 24 here) as its test set; eval takes the
# same share with the same --seed.
mkdir -p "$TMP/vs" && cp -r "$TMP/imgs/train" "$TMP/vs/"
"$DTRAIN" train "$M" --data-dir "$TMP/vs" --threads 1 --max-steps 6 --val-split 0.25 --seed 3 \
    --checkpoint "$TMP/vs.ckpt" > "$TMP/vs.out" 2>&1
check "--val-split runs" test $? -eq 0 || tail -3 "$TMP/vs.out"
check "train: the rest" grep -q "vs/train: 72 images in 4 classes" "$TMP/vs.out"
check "test: the held-out share" grep -q "vs/train held out (--val-split 0.25, seed 3): 24 images in 4 classes" \
    "$TMP/vs.out"
acc=$(sed -n 's/.*"test_accuracy":\([0-9.]*\).*/\1/p' "$TMP/vs.out")
expect 0 "\"test_accuracy\":$acc,.*\"samples\":24," -- \
    "$DTRAIN" eval "$M" --weights "$TMP/vs.ckpt" --data-dir "$TMP/vs" --val-split 0.25 --seed 3 --json
expect 0 "\"samples\":72," -- \
    "$DTRAIN" eval "$M" --weights "$TMP/vs.ckpt" --data-dir "$TMP/vs" --val-split 0.25 --seed 3 --json --split train
expect 2 "\-\-val-split: .*imgs/test exists" -- "$DTRAIN" train "$M" --data-dir "$TMP/imgs" --val-split 0.2
expect 2 "\-\-val-split applies to \-\-dataset folder, not synthetic" -- \
    "$DTRAIN" train "$M" --dataset synthetic --val-split 0.2
expect 1 "vs/test: no such folder" -- "$DTRAIN" train "$M" --data-dir "$TMP/vs" --max-steps 1

# export: the ONNX model carries the class names in label order and the
# resize in its preprocessing note.
expect 0 "-> $TMP/m.onnx" -- "$DTRAIN" export "$M" --weights "$TMP/mem.ckpt" -o "$TMP/m.onnx"
check "export names the classes" /usr/bin/python3 -c "
import onnx, sys
meta = {p.key: p.value for p in onnx.load(sys.argv[1]).metadata_props}
assert [meta['class_%d' % i] for i in range(4)] == ['C', '_x', 'a', 'b'], meta
assert 'class_4' not in meta and 'centre-cropped' in meta['preprocessing'], meta
" "$TMP/m.onnx"

# Resuming on class folders that changed.
cp -r "$TMP/imgs" "$TMP/renamed" && mv "$TMP/renamed/train/a" "$TMP/renamed/train/aa" &&
    mv "$TMP/renamed/test/a" "$TMP/renamed/test/aa"
expect 2 "--resume .*half.ckpt: label 2 is class 'a' in the checkpoint, 'aa' in the train folder" -- \
    "$DTRAIN" train "$M" --data-dir "$TMP/renamed" --threads 1 --max-steps $K --resume "$TMP/half.ckpt"

# Resuming on a smaller train folder (12 images a class, not 24): step 10
# has no place in its epochs of 6 steps.
cp -r "$TMP/imgs" "$TMP/fewer"
for d in "$TMP/fewer/train"/*; do ls "$d" | head -12 | while read -r f; do rm "$d/$f"; done; done
expect 2 "--resume .*half.ckpt: the checkpoint stopped at step 10 of an epoch, this run's epochs have 6 steps" -- \
    "$DTRAIN" train "$M" --data-dir "$TMP/fewer" --threads 1 --max-steps $K --resume "$TMP/half.ckpt"

# Bad input: one line naming the file, exit 1; or skipped and counted.
make_images bad "$TMP/bad"
cp "$TMP/bad/truncated.jpg" "$TMP/imgs/train/a/z.jpg"
expect 1 "^dtrain: .*imgs/train/a/z.jpg: corrupt JPEG" -- "$DTRAIN" train "$M" --data-dir "$TMP/imgs" --max-steps 2
expect 0 "imgs/train: skipped 1 unreadable file \(--skip-bad-images\); the first: .*z.jpg: corrupt JPEG" -- \
    "$DTRAIN" train "$M" --data-dir "$TMP/imgs" --max-steps 2 --skip-bad-images
if [ -n "${DT_SANITIZE:-}" ]; then finish; exit; fi
rm "$TMP/imgs/train/a/z.jpg"
# Files that are no images by name, beside the class folders and in them:
# counted in one line, not read, not fatal (torchvision's ImageFolder).
cp "$TMP/bad/notes.txt" "$TMP/imgs/train/a/" && echo x > "$TMP/imgs/train/a/Thumbs.db"
echo "my photos" > "$TMP/imgs/train/README"
expect 0 "imgs/train: 3 files not .jpg, .jpeg or .png ignored \(the first: .*imgs/train/README\)" -- \
    "$DTRAIN" train "$M" --data-dir "$TMP/imgs" --max-steps 2
rm "$TMP/imgs/train/README" "$TMP/imgs/train/a/notes.txt" "$TMP/imgs/train/a/Thumbs.db"
mkdir "$TMP/imgs/test/zzz" && cp "$TMP/bad/good.png" "$TMP/imgs/test/zzz/"
expect 1 "imgs/test/zzz: class 'zzz' is not one of the 4 classes of .*imgs/train" -- \
    "$DTRAIN" train "$M" --data-dir "$TMP/imgs" --max-steps 2
rm -r "$TMP/imgs/test/zzz"
mv "$TMP/imgs/test" "$TMP/test_away"
expect 1 "imgs/test: no such folder" -- "$DTRAIN" train "$M" --data-dir "$TMP/imgs" --max-steps 2
mv "$TMP/test_away" "$TMP/imgs/test"
sed 's/^output=4$/output=3/' "$M" > "$TMP/three.cfg"
expect 2 "three.cfg: the model has 3 outputs, fewer than the 4 classes of" -- \
    "$DTRAIN" train "$TMP/three.cfg" --data-dir "$TMP/imgs" --max-steps 2
sed 's/^output=4$/output=6/' "$M" > "$TMP/six.cfg"
expect 0 "note: .*six.cfg has 6 outputs for 4 classes; outputs 4 to 5 are never a label" -- \
    "$DTRAIN" train "$TMP/six.cfg" --data-dir "$TMP/imgs" --max-steps 2
expect 2 "--dataset folder needs --data-dir DIR" -- "$DTRAIN" train "$M"
expect 2 "--cache-mb applies to --dataset folder and --data, not synthetic" -- \
    "$DTRAIN" train "$M" --dataset synthetic --cache-mb 10
expect 2 "--skip-bad-images applies to --dataset folder and --data, not synthetic" -- \
    "$DTRAIN" eval "$M" --weights "$TMP/mem.ckpt" --dataset synthetic --skip-bad-images

# Gray images for a 1-channel model.
make_images tree "$TMP/gray" x,y 8 12 --gray
sed 's/^channels=3$/channels=1/; s/^output=4$/output=2/' "$M" > "$TMP/one.cfg"
expect 0 '"steps":2,' -- "$DTRAIN" train "$TMP/one.cfg" --data-dir "$TMP/gray" --max-steps 2 --quiet

# The loader alone: decoding and augmentation, images/s; the scan's time and
# its list's bytes per file ("b/img000.png" and its NUL, an 8-byte offset, a
# 4-byte label: 25, and the folder's path once).
expect 0 '"event":"loader_bench".*"cached":false.*"scan_s":[0-9.]+,"list_bytes_per_file":25\.[0-9],.*"images_per_sec":[0-9]' -- \
    "$DTRAIN" bench "$M" --data-only --data-dir "$TMP/imgs" --cache-mb 0 --loader-threads 2 --steps 5
expect 2 "apply to --data-only" -- "$DTRAIN" bench "$M" --data-dir "$TMP/imgs"
finish

#!/usr/bin/env bash
# Fine-tuning: a small Fashion-MNIST cnn's checkpoint starts a model with a
# new 3-class head on a folder of real images (pullover, coat, shirt).
# --weights --partial loads the layers that match in place, kind and shapes
# and prints a table of them; --freeze N keeps layers 0..N-1 bit for bit
# (serial and allreduce); after the same steps the fine-tuned head beats a
# run from scratch. Refusals: --partial without --weights, --freeze over the
# model's layers, --freeze with ps-ssp's read-my-writes, a checkpoint whose
# layers share nothing. Skipped (77) without python3 + PIL + numpy or the
# Fashion-MNIST files.
source "$(dirname "$0")/clilib.sh" "$1"
FASHION=/usr/share/datasets/fashion-mnist
[ -f $FASHION/train-images-idx3-ubyte.gz ] || { echo "test_finetune: skipped (no $FASHION)"; exit 77; }
make_images fashion $FASHION "$TMP/f3" 2,4,6 100
cat > "$TMP/pre.cfg" <<'CFG'
[net]
batch=32
channels=1
height=28
width=28
learning_rate=0.02
momentum=0.9
decay=0.0005
epochs=1
policy=constant
dataset=fashion-mnist
[convolutional]
filters=8
size=5
pad=1
activation=relu
[maxpool]
size=2
stride=2
[convolutional]
filters=16
size=5
pad=1
activation=relu
[maxpool]
size=2
stride=2
[connected]
output=64
activation=relu
[connected]
output=10
activation=linear
[softmax]
CFG
sed -e 's/^output=10$/output=3/' -e 's/^dataset=fashion-mnist$/dataset=folder/' -e 's/^batch=32$/batch=16/' \
    "$TMP/pre.cfg" > "$TMP/head3.cfg"
LAYERS="/usr/bin/python3 $SRC/tests/ckpt_layers.py"
acc() { sed -n 's/.*"test_accuracy":\([0-9.]*\).*/\1/p' "$1" | tail -1; }

TRAIN_DATA=(--dataset fashion-mnist)
train_ckpt pre 1 "$TMP/pre.cfg" --max-steps 600
TRAIN_DATA=(--data-dir "$TMP/f3")
STEPS=10
FT=(--weights "$TMP/pre.ckpt" --partial)
# The table: the trunk loaded, the 10-class head skipped and why.
"$DTRAIN" train "$TMP/head3.cfg" --data-dir "$TMP/f3" --threads 1 --max-steps $STEPS "${FT[@]}" --freeze 8 \
    --checkpoint "$TMP/ft.ckpt" > "$TMP/ft.out" 2>&1
check "fine-tune runs" test $? -eq 0 || tail -5 "$TMP/ft.out"
check "trunk loaded" grep -qE "^ +6  connected +64x1x1 +50240  loaded$" "$TMP/ft.out"
check "head skipped" grep -qE "^ +8  connected +3x1x1 +195  skipped: its output is 3x1x1 here, 10x1x1 in the" \
    "$TMP/ft.out"
check "counted" grep -q "^--partial: 3 of 4 layers with parameters or state taken from" "$TMP/ft.out"
# --freeze 8: the loaded layers are the checkpoint's, bit for bit, after training.
check "loaded and frozen" $LAYERS "$TMP/pre.ckpt" "$TMP/ft.ckpt" 8
# The head as initialised: one step at the smallest rate moves no float.
train_ckpt init 1 "$TMP/head3.cfg" --max-steps 1 "${FT[@]}" --lr 1e-12 --momentum 0 --decay 0
check "the loaded layers are the checkpoint's" $LAYERS "$TMP/pre.ckpt" "$TMP/init.ckpt" 8
trained() { check "$1 trained the head" bash -c "! $LAYERS '$TMP/init.ckpt' '$TMP/$1.ckpt' 10 8 > /dev/null"; }
trained ft
# --freeze 6: the convolutions stay, the loaded connected layer 6 trains.
train_ckpt ft6 1 "$TMP/head3.cfg" --max-steps $STEPS "${FT[@]}" --freeze 6
check "frozen 6" $LAYERS "$TMP/pre.ckpt" "$TMP/ft6.ckpt" 6
check "layer 6 trained" bash -c "! $LAYERS '$TMP/pre.ckpt' '$TMP/ft6.ckpt' 7 6 > /dev/null"
# Exact wherever the update runs: allreduce with adam (its moments never
# start for frozen layers), sufficient factors (the frozen connected layer's
# gradient rebuilt, not applied), parameter servers (the servers' step).
train_ckpt ar 2 "$TMP/head3.cfg" --max-steps $STEPS "${FT[@]}" --freeze 8 --batch 8 --optimizer adam
check "frozen under allreduce" $LAYERS "$TMP/pre.ckpt" "$TMP/ar.ckpt" 8
train_ckpt sfb 2 "$TMP/head3.cfg" --max-steps $STEPS "${FT[@]}" --freeze 8 --batch 8 --sfb
check "frozen under --sfb" $LAYERS "$TMP/pre.ckpt" "$TMP/sfb.ckpt" 8
train_ckpt ps 3 "$TMP/head3.cfg" --max-steps $STEPS "${FT[@]}" --freeze 8 --batch 8 --mode ps-sync
check "frozen under ps-sync" $LAYERS "$TMP/pre.ckpt" "$TMP/ps.ckpt" 8
trained ps
# The same steps from scratch learn less.
train_ckpt scratch 1 "$TMP/head3.cfg" --max-steps $STEPS
a=$(acc "$TMP/ft.out") b=$(acc "$TMP/scratch.out")
echo "after $STEPS steps: --partial --freeze 8 test accuracy $a, from scratch $b"
check "fine-tuning beats scratch" /usr/bin/python3 -c "import sys; sys.exit(not $a > $b + 0.1)"

expect 2 "--partial needs --weights" -- "$DTRAIN" train "$TMP/head3.cfg" --data-dir "$TMP/f3" --partial
expect 2 "--freeze 10: .*head3.cfg has 10 layers" -- "$DTRAIN" train "$TMP/head3.cfg" --data-dir "$TMP/f3" --freeze 10
expect 2 "--freeze does not run with --mode ps-ssp --staleness 3" -- timeout 120 mpirun --oversubscribe \
    --bind-to none -np 2 "$DTRAIN" train "$TMP/head3.cfg" --data-dir "$TMP/f3" --mode ps-ssp --freeze 2
# A checkpoint with nothing in common: refused, not a silent fresh start.
sed -e 's/^filters=8$/filters=4/' -e 's/^filters=16$/filters=6/' -e 's/^output=64$/output=32/' "$TMP/head3.cfg" \
    > "$TMP/other.cfg"
expect 2 "--partial: no layer of .*pre.ckpt matches" -- "$DTRAIN" train "$TMP/other.cfg" --data-dir "$TMP/f3" \
    --max-steps 1 "${FT[@]}"
# A checkpoint from before the layer table (version 6: the same file without
# version 7's epoch section and architecture): refused, saying what to do;
# --weights alone still loads it whole.
/usr/bin/python3 - "$TMP/pre.ckpt" "$TMP/v6.ckpt" <<'PY'
import struct, sys, zlib
raw = open(sys.argv[1], 'rb').read()
arch = len(raw) - 4 - 56 * 10 - 16  # the architecture's head: u32 layers, input C, H, W
nlayers = struct.unpack_from('<I', raw, arch)[0]
assert nlayers == 10, nlayers
body = bytearray(raw[:arch - 32])   # without version 7's epoch section (32 bytes) before it
struct.pack_into('<I', body, 8, 6)
open(sys.argv[2], 'wb').write(bytes(body) + struct.pack('<I', zlib.crc32(bytes(body))))
PY
expect 2 "--partial: .*v6.ckpt has no layer table \(written before dtrain kept one, checkpoint version 7\); --weights without --partial loads it whole" -- \
    "$DTRAIN" train "$TMP/head3.cfg" --data-dir "$TMP/f3" --max-steps 1 --weights "$TMP/v6.ckpt" --partial
expect 0 "starting from the weights of .*v6.ckpt" -- \
    "$DTRAIN" train "$TMP/pre.cfg" --max-steps 1 --threads 1 --weights "$TMP/v6.ckpt"
finish

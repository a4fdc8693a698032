#!/usr/bin/env bash
# ONNX export (dtrain export), checked by tools that are not dtrain: every
# example model and tests/data/export_kinds.cfg (each layer kind) is
# trained a few steps, exported, validated by python3-onnx's checker (with
# shape inference), run by ONNX Runtime (npm's onnxruntime-node) on real
# test images, and its logits compared with `dtrain eval --logits-out` (1e-4
# relative) and its test accuracy with dtrain's (equal), on the first 1000
# Fashion-MNIST test images (trained on the first 2000 training images);
# the 3x32x32 models on CIFAR-10 batches made of the same images (CIFAR-10
# itself is not installed here). Then the refusals. Release builds only for the
# runtime part (it is the same code under the sanitizers' test_graph).
source "$(dirname "$0")/clilib.sh" "$1"
FM=/usr/share/datasets/fashion-mnist

# roundtrip NAME MODEL DATASET DIR STEPS [TRAIN FLAGS]: train, export, check, compare.
roundtrip() {
    local name=$1 model=$2 ds=$3 dir=$4 steps=$5 t0=$SECONDS
    shift 5
    "$DTRAIN" train "$model" --dataset "$ds" --data-dir "$dir" --max-steps "$steps" --threads 2 "$@" \
        --quiet --checkpoint "$TMP/$name.ckpt" > "$TMP/$name.train" 2>&1 ||
        { echo "FAIL: $name trains"; tail -3 "$TMP/$name.train"; fails=$((fails + 1)); return; }
    expect 0 "-> $TMP/$name.onnx" -- "$DTRAIN" export "$model" --weights "$TMP/$name.ckpt" -o "$TMP/$name.onnx"
    check "$name: onnx checker" /usr/bin/python3 -c \
        "import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)" "$TMP/$name.onnx"
    local acc ort
    acc=$("$DTRAIN" eval "$model" --json --weights "$TMP/$name.ckpt" --dataset "$ds" --data-dir "$dir" \
              --threads 2 --logits-out "$TMP/$name.logits" | sed -n 's/.*"test_accuracy":\([0-9.]*\).*/\1/p')
    ort=$(node "$SRC/tests/onnx_run.js" "$TMP/$name.onnx" "$ds" "$dir" "$TMP/$name.logits" 1e-4)
    check "$name: ONNX Runtime's logits within 1e-4 of dtrain's ($ort)" test $? -eq 0
    check "$name: ONNX Runtime's accuracy $ort equals dtrain eval's $acc" \
        grep -q "\"accuracy\":\"$acc\"" <<<"$ort"
    echo "$name: dtrain eval $acc, ONNX Runtime $ort ($((SECONDS - t0)) s)"
}

# torch_roundtrip NAME DATASET DIR: after roundtrip NAME, the checkpoint as a
# state_dict of torch_ref_models' NAME (scripts/export_torch.py) gives
# dtrain's logits in PyTorch.
torch_roundtrip() {
    local name=$1 ds=$2 dir=$3 model="$SRC/examples/$1.cfg"
    expect 0 "-> $TMP/$name.pt" -- /usr/bin/python3 "$SRC/scripts/export_torch.py" "$model" \
        "$TMP/$name.ckpt" -o "$TMP/$name.pt" --ref "$name" --dtrain "$DTRAIN" --ref-dir "$REF"
    check "$name: PyTorch's logits from the exported state_dict within 1e-4 of dtrain's" \
        /usr/bin/python3 "$SRC/tests/torch_check.py" "$REF" "$name" "$TMP/$name.pt" "$ds" "$dir" \
        "$TMP/$name.logits"
}
REF="$SRC/../shared/reference"

# A shortcut from a smaller map (Darknet spreads it over every 2nd cell):
# conv stride 2 (14x14), maxpool (7x7), route back to the conv, shortcut
# from the pool.
cat > "$TMP/up.cfg" <<'CFG'
[net]
channels=1
height=28
width=28
batch=32
[convolutional]
filters=4
size=3
stride=2
pad=1
activation=relu
[maxpool]
size=2
stride=2
[route]
layers=0
[shortcut]
from=1
[connected]
output=10
activation=linear
[softmax]
CFG

if [ -z "${DT_SANITIZE:-}" ]; then
    ORT="${DT_BUILD_DIR:-$TMP}/ort"
    bash "$SRC/scripts/install-onnxruntime.sh" "$ORT" || { echo "FAIL: cannot install onnxruntime-node"; exit 1; }
    export NODE_PATH="$ORT/node_modules"
    /usr/bin/python3 "$SRC/tests/make_subsets.py" "$FM" "$TMP" 2000 1000
    roundtrip up "$TMP/up.cfg" fashion-mnist "$TMP/fashion" 30
    roundtrip kinds "$SRC/tests/data/export_kinds.cfg" fashion-mnist "$TMP/fashion" 30
    roundtrip mlp "$SRC/examples/mlp.cfg" fashion-mnist "$TMP/fashion" 30
    roundtrip cnn "$SRC/examples/cnn.cfg" fashion-mnist "$TMP/fashion" 20
    roundtrip cnn_bn "$SRC/examples/cnn_bn.cfg" fashion-mnist "$TMP/fashion" 20
    roundtrip resnet20_fm "$SRC/examples/resnet20_fm.cfg" fashion-mnist "$TMP/fashion" 15 --batch 32
    roundtrip cifar "$SRC/examples/cifar.cfg" cifar10 "$TMP/cifar" 20
    roundtrip resnet20 "$SRC/examples/resnet20.cfg" cifar10 "$TMP/cifar" 15 --batch 32
    for m in mlp cnn resnet20_fm; do torch_roundtrip $m fashion-mnist "$TMP/fashion"; done
    for m in cifar resnet20; do torch_roundtrip $m cifar10 "$TMP/cifar"; done
    # Modules whose parameters do not line up are refused, naming the tensors.
    expect 1 "export_torch: the torch module has 4 parameters and buffers, the checkpoint 8 tensors" -- \
        /usr/bin/python3 "$SRC/scripts/export_torch.py" "$SRC/examples/cnn.cfg" "$TMP/cnn.ckpt" \
        -o "$TMP/bad.pt" --ref mlp --dtrain "$DTRAIN" --ref-dir "$REF"
    printf 'import torch.nn as nn\ndef net():\n    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))\n' > "$TMP/mine.py"
    expect 1 "export_torch: torch '1.weight' \(256, 784\) does not match dtrain 'l0.weight' \(512, 784\)" -- \
        /usr/bin/python3 "$SRC/scripts/export_torch.py" "$SRC/examples/mlp.cfg" "$TMP/mlp.ckpt" \
        -o "$TMP/bad.pt" --module "$TMP/mine.py:net" --dtrain "$DTRAIN"
    expect 1 "export_torch: .*/cnn.ckpt: checkpoint is for a different model" -- \
        /usr/bin/python3 "$SRC/scripts/export_torch.py" "$SRC/examples/cnn_bn.cfg" "$TMP/cnn.ckpt" \
        -o "$TMP/bad.pt" --dtrain "$DTRAIN"
    expect 1 "export_torch: --module $TMP/mine.py:nope: $TMP/mine.py has no nope" -- \
        /usr/bin/python3 "$SRC/scripts/export_torch.py" "$SRC/examples/mlp.cfg" "$TMP/mlp.ckpt" \
        -o "$TMP/bad.pt" --module "$TMP/mine.py:nope" --dtrain "$DTRAIN"
    check "refused torch exports write nothing" test ! -e "$TMP/bad.pt" -a ! -e "$TMP/bad.pt.tmp"
fi

# Refusals: nothing is written, an earlier file at -o is left as it was.
# (Every layer kind exports; a kind without an emitter would be refused by
# name before anything is written: onnx_export.c's check_exportable.)
M="$SRC/tests/data/small_resnet.cfg"
"$DTRAIN" train "$M" --dataset synthetic --max-steps 1 --quiet --threads 1 --checkpoint "$TMP/s.ckpt" > /dev/null
echo keep > "$TMP/keep.onnx"
expect 1 "s.ckpt: checkpoint is for a different model" -- "$DTRAIN" export "$SRC/examples/mlp.cfg" --weights "$TMP/s.ckpt" -o "$TMP/keep.onnx"
expect 1 "nosuch.ckpt" -- "$DTRAIN" export "$M" --weights "$TMP/nosuch.ckpt" -o "$TMP/keep.onnx"
check "refused exports leave -o as it was" grep -qx keep "$TMP/keep.onnx"
# A folder of -o that cannot be made (a file is in the way): named, exit 1.
expect 1 "-o $TMP/keep.onnx/dir/m.onnx: cannot create the folder $TMP/keep.onnx: Not a directory" -- \
    "$DTRAIN" export "$M" --weights "$TMP/s.ckpt" -o "$TMP/keep.onnx/dir/m.onnx"
expect 2 "needs MODEL.cfg, --weights CHECKPOINT and -o FILE" -- "$DTRAIN" export "$M" -o "$TMP/m.onnx"
expect 2 "--format torch: dtrain writes onnx and darknet; for PyTorch run scripts/export_torch.py" -- \
    "$DTRAIN" export "$M" --weights "$TMP/s.ckpt" -o "$TMP/m.onnx" --format torch
expect 0 "usage: dtrain export" -- "$DTRAIN" export --help
expect 2 "unknown flag|unknown option" -- "$DTRAIN" export "$M" --weights "$TMP/s.ckpt" -o "$TMP/m.onnx" --bogus
expect 1 "--logits-out $TMP/keep.onnx/l: cannot create the folder $TMP/keep.onnx: Not a directory" -- \
    "$DTRAIN" eval "$M" --weights "$TMP/s.ckpt" --dataset synthetic --logits-out "$TMP/keep.onnx/l"

echo "test_export: $passes passed, $fails failed"
[ "$fails" -eq 0 ]

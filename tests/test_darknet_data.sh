#!/usr/bin/env bash
# Darknet's data files (--data F.data): train reaches 100% on a small
# generated set in 2 epochs; eval --data on valid= equals eval of the same
# images as a folder (accuracy and loss to the digit); allreduce and
# ps-sync on 2 workers equal serial with the global batch; predict names
# classes by names= and takes valid='s images; paths are relative to the
# current directory (as Darknet's fopen() takes them); each bad file is a
# one-line error naming it (and the list's line). Skipped (77) without
# python3, PIL and numpy.
source "$(dirname "$0")/clilib.sh" "$1"
cd "$TMP" || exit 1
# Relative paths throughout: labels are found in the whole path, and a
# mktemp name could hold one.
make_images tree imgs cat,dog,cow,owl 24 12
cat > m.cfg <<'EOF'
[net]
channels=3
height=12
width=12
batch=8
learning_rate=0.05
momentum=0.9
epochs=2
flip=1
[connected]
output=32
activation=relu
[connected]
output=4
activation=linear
[softmax]
EOF
M=m.cfg
printf 'cat\ndog\ncow\nowl\n' > labels.txt
printf 'Felis catus\nCanis familiaris\nBos taurus\nStrix aluco\n' > names.txt
find imgs/train -type f | sort > train.list
find imgs/test -type f | sort > valid.list
# As Debian's imagenet1k.data is written: spaces around '=', a comment, a
# key of Darknet's detector that a classifier does not use.
cat > d.data <<'EOF'
# a small Darknet data file
classes = 4
train  = train.list
valid  = valid.list
labels = labels.txt
backup = bk/
top=2
eval=imagenet
EOF

# Train 2 epochs: the classes as labels= orders them, checkpoints in backup=.
"$DTRAIN" train "$M" --data d.data --threads 1 > train.out 2>&1
check "train runs" test $? -eq 0 || tail -5 train.out
check "label order of labels=" grep -q "^classes: 0 cat, 1 dog, 2 cow, 3 owl$" train.out
check "train list read" grep -q "^d.data train: 96 images in 4 classes, decoded once and held in memory" train.out
check "valid list is the test set" grep -q "^d.data valid: 48 images in 4 classes" train.out
check "checkpoints in backup=" test -f bk/latest
grep -q '"test_accuracy":1.0000' train.out || { echo "FAIL: not learnt: $(tail -1 train.out)"; fails=$((fails + 1)); }

# eval --data on valid= = eval of the same images as a folder, from a
# checkpoint that is not yet right everywhere.
"$DTRAIN" train "$M" --data d.data --threads 1 --max-steps 3 --checkpoint early.ckpt > /dev/null 2>&1
metrics() { "$DTRAIN" eval "$M" --weights early.ckpt --json --threads 1 "$@" | grep -o '"test_accuracy":[0-9.]*,"test_loss":[0-9.]*'; }
a=$(metrics --data d.data); b=$(metrics --dataset folder --data-dir imgs)
check "eval --data = eval of the folder ($a; $b)" test -n "$a" -a "$a" = "$b"
expect 0 "top-2 accuracy" -- "$DTRAIN" eval "$M" --data d.data --weights bk/latest
expect 0 "on the d.data train set: 96 samples" -- "$DTRAIN" eval "$M" --data d.data --weights bk/latest --split train

# Debian's darknet labels valid= alike: its `classifier valid` prints each
# image's class (the first label in the path; here every path holds one),
# counted per class as dtrain's eval counts them.
if command -v darknet > /dev/null; then
    sed -n '1,/^\[softmax\]/p' "$M" | grep -v -E '^(epochs|flip)=' > dn.cfg
    timeout 120 darknet classifier valid d.data dn.cfg 2> /dev/null | awk -F', ' '/^imgs\// {print $2}' |
        sort | uniq -c | awk '{print $2, $1}' > darknet.counts
    "$DTRAIN" eval "$M" --data d.data --weights bk/latest | awk '/^[0-9]+ [a-z]+ +[0-9.]+ +[0-9]+$/ {print $1, $4}' |
        sort > dtrain.counts
    check "labels per class as Debian's darknet decides them" test -s darknet.counts -a \
        "$(cat darknet.counts)" = "$(cat dtrain.counts)"
else
    echo "not checked against Debian's darknet (not installed)"
fi

# names= name the classes of predict (the checkpoint's are labels=), top=
# is its k, valid='s images when none are given.
sed 's/^backup.*/names = names.txt/' d.data > n.data
"$DTRAIN" predict "$M" --data n.data --weights bk/latest > pred.out 2>&1
check "predict runs" test $? -eq 0 || tail -3 pred.out
check "valid's 48 images predicted" test "$(grep -c '^imgs/' pred.out)" = 48
check "top= classes each, named by names=" test "$(grep -c '%  [0-9] [A-Z]' pred.out)" = 96
check "an owl is an owl" grep -A1 -q '^imgs/test/owl/img000.png' pred.out
grep -A1 '^imgs/test/owl/img000.png' pred.out | grep -q '%  3 Strix aluco$' || { echo "FAIL: owl"; fails=$((fails + 1)); }
"$DTRAIN" predict "$M" --data n.data --weights bk/latest imgs/test/cow/img000.png --top 1 > one.out 2>&1
check "--top over top=, images given over valid=" test "$(wc -l < one.out)" = 2
# eval: a checkpoint whose classes are named otherwise.
expect 2 "label 0 is 'Felis catus' there but 'cat' in bk/latest" -- \
    "$DTRAIN" eval "$M" --data n.data --weights bk/latest

# Relative paths are the current directory's, not the data file's.
mkdir -p sub
cp d.data sub/d.data
check "sub/d.data's lists read from here" test "$(metrics --data sub/d.data)" = "$a"
(cd sub && sed 's|^|../|' ../valid.list > valid.list &&
    printf 'classes=4\nvalid=valid.list\nlabels=../labels.txt\n' > r.data &&
    "$DTRAIN" eval "../$M" --data r.data --weights ../early.ckpt --json --threads 1 |
    grep -o '"test_accuracy":[0-9.]*,"test_loss":[0-9.]*') > sub.out
check "a data file's paths relative to the current directory" test "$(cat sub.out)" = "$a"

# The loader alone on the train list.
expect 0 '"event":"loader_bench","dataset":"darknet","samples":96,' -- \
    "$DTRAIN" bench "$M" --data-only --data d.data --steps 3

# 2 workers of batch 4 (each reading the lists) = serial at batch 8.
if [ -z "${DT_SANITIZE:-}" ]; then
TRAIN_DATA=(--data d.data)
K=12
train_ckpt serial 1 "$M" --max-steps $K
train_ckpt ar 2 "$M" --max-steps $K --batch 4 --mode allreduce
same serial ar 2e-6
train_ckpt ps 3 "$M" --max-steps $K --batch 4 --mode ps-sync
same serial ps 2e-6
fi

# Errors: one line naming the file (and the list's line).
printf 'cat\ndog\ncow\nowl\nimg\n' > l5.txt
sed 's/^output=4$/output=5/' "$M" > m5.cfg
sed 's/labels.txt/l5.txt/; s/classes = 4/classes=5/' d.data > two.data
expect 1 "^dtrain: train.list:1: imgs/train/cat/img000.png: labels 'cat' and 'img' of l5.txt are both in the path" -- \
    "$DTRAIN" train m5.cfg --data two.data
printf 'cat\ndog\ncow\nzzz\n' > lz.txt
sed 's/labels.txt/lz.txt/' d.data > none.data
expect 1 "^dtrain: train.list:73: imgs/train/owl/img000.png: none of the 4 labels of lz.txt is in the path$" -- \
    "$DTRAIN" train "$M" --data none.data
expect 2 "^dtrain: two.data: classes=5 but the model has 4 outputs$" -- "$DTRAIN" train "$M" --data two.data
expect 2 "^dtrain: two.data: classes=5 but the model m.cfg has 4 outputs$" -- \
    "$DTRAIN" predict "$M" --data two.data --weights bk/latest imgs/test/cow/img000.png
printf 'cat\ndog\ncow\n' > l3.txt
sed 's/labels.txt/l3.txt/' d.data > cm.data
expect 1 "^dtrain: cm.data: classes=4 but labels= l3.txt has 3 labels$" -- "$DTRAIN" train "$M" --data cm.data
sed 's/train.list/nope.list/' d.data > ml.data
expect 1 "^dtrain: ml.data: train= nope.list: No such file or directory$" -- "$DTRAIN" train "$M" --data ml.data
: > empty.list
sed 's/valid.list/empty.list/' d.data > el.data
expect 1 "^dtrain: empty.list: empty \(valid= of el.data: one entry a line\)$" -- \
    "$DTRAIN" eval "$M" --data el.data --weights bk/latest
(cat train.list; echo; echo imgs/train/cat/gone.png) > gone.list
sed 's/train.list/gone.list/' d.data > mi.data
expect 1 "^dtrain: gone.list:98: imgs/train/cat/gone.png: No such file or directory$" -- "$DTRAIN" train "$M" --data mi.data
expect 0 "skipped 1 unreadable file" -- "$DTRAIN" train "$M" --data mi.data --skip-bad-images --max-steps 1
echo imgs/train/cat/gone.png > gone1.list
sed 's/train.list/gone1.list/' d.data > mi1.data
expect 1 "^dtrain: gone1.list: no readable images \(1 skipped; the first: cannot open imgs/train/cat/gone.png" -- \
    "$DTRAIN" train "$M" --data mi1.data --skip-bad-images
printf 'classes=4\nvalid=valid.list\nlabls=labels.txt\n' > typo.data
expect 1 "^dtrain: typo.data:3: unknown key 'labls' \(did you mean labels\?\)" -- \
    "$DTRAIN" eval "$M" --data typo.data --weights bk/latest
printf 'classes=4\nclasses=4\n' > dup.data
expect 1 "^dtrain: dup.data:2: classes= given twice \(also on line 1\)$" -- "$DTRAIN" train "$M" --data dup.data
# tree= (Darknet's hierarchical softmax, imagenet9k.hierarchy's way): labels= names the tree's nodes in its
# order, an image's label its node; two inner nodes that no path names. The net with [softmax] tree= learns
# the 4 leaves; predict ranks the leaf probabilities as eval's accuracy does.
printf 'mammal -1\nbird -1\ncat 0\ndog 0\ncow 0\nowl 1\n' > t.tree
printf 'mammal\nbird\ncat\ndog\ncow\nowl\n' > tlabels.txt
printf 'classes=6\ntrain=train.list\nvalid=valid.list\nlabels=tlabels.txt\ntree=t.tree\n' > tree.data
sed -e 's/^output=4$/output=6/' -e 's|^\[softmax\]$|[softmax]\ntree=t.tree|' "$M" > t.cfg
"$DTRAIN" train t.cfg --data tree.data --threads 1 --checkpoint t.ckpt > ttrain.out 2>&1
check "tree= trains" test $? -eq 0 || tail -5 ttrain.out
acc=$(grep -o '"test_accuracy":[0-9.]*' ttrain.out | tail -1 | cut -d: -f2)
check "tree= learns the 4 leaves ($acc of 48)" awk "BEGIN {exit !($acc >= 0.9)}"
"$DTRAIN" predict t.cfg --weights t.ckpt --data tree.data --top 1 --threads 1 > tpred.out 2>&1
right=$(paste -d' ' - - < tpred.out | awk '{split($1, p, "/"); n++; r += (p[3] == $4)} END {printf "%.4f", r / n}')
check "predict's top leaf agrees with eval ($right, $acc)" test "$right" = "$(printf %.4f "$acc")"
echo "tree=: test accuracy $acc (chance 0.25), predict's top-1 right $right"
check "predict gives a leaf's probability" grep -qE '^ +[0-9.]+%  [2-5] (cat|dog|cow|owl)$' tpred.out
printf 'mammal\ncat\nbird\ndog\ncow\nowl\n' > tlabels2.txt
sed 's/tlabels.txt/tlabels2.txt/' tree.data > tree2.data
expect 1 "^dtrain: tree2.data: labels= tlabels2.txt line 2 is 'cat' but tree= t.tree node 1 is 'bird': dtrain takes the labels in the tree's order only$" -- \
    "$DTRAIN" train t.cfg --data tree2.data
printf 'train=train.list\n' > nocl.data
expect 1 "^dtrain: nocl.data: no classes= \(the number of classes\)$" -- "$DTRAIN" train "$M" --data nocl.data
expect 1 "^dtrain: absent.data: cannot open" -- "$DTRAIN" train "$M" --data absent.data
expect 2 "^dtrain: --data d.data excludes --dataset" -- "$DTRAIN" train "$M" --data d.data --dataset folder
expect 2 "^dtrain: --data d.data excludes --data-dir" -- "$DTRAIN" eval "$M" --data d.data --data-dir imgs \
    --weights bk/latest
expect 2 "^dtrain: --dataset darknet: give Darknet's data file as --data FILE.data$" -- \
    "$DTRAIN" train "$M" --dataset darknet
finish

#!/usr/bin/env bash
# The command line: exit codes (0 ok, 1 runtime, 2 usage/model file), one
# clear line naming the file/line/flag, and the output formats.
source "$(dirname "$0")/clilib.sh" "$1"
M=$SRC/examples/mlp.cfg

# Usage errors: exit 2.
expect 2 "usage" -- "$DTRAIN"
expect 2 "unknown command 'fly'" -- "$DTRAIN" fly
expect 2 "unknown flag '--bogus'" -- "$DTRAIN" train "$M" --bogus
expect 2 "\-\-batch: 'abc' is not an integer" -- "$DTRAIN" train "$M" --batch abc
expect 2 "\-\-lr: .* out of range" -- "$DTRAIN" train "$M" --lr -1
expect 2 "\-\-epochs needs a value" -- "$DTRAIN" train "$M" --epochs
expect 2 "unknown dataset 'imagenet'" -- "$DTRAIN" train "$M" --dataset imagenet
expect 2 "checkpoint-every needs --checkpoint" -- "$DTRAIN" train "$M" --checkpoint-every 5
expect 2 "expected one MODEL.cfg" -- "$DTRAIN" train
expect 2 "\-\-lr-scaling: unknown rule 'sqrt' \(linear, none\)" -- "$DTRAIN" train "$M" --lr-scaling sqrt
expect 2 "\-\-warmup-epochs: .* out of range" -- "$DTRAIN" train "$M" --warmup-epochs -1
expect 2 "\-\-warmup-epochs: 'x' is not a number" -- "$DTRAIN" train "$M" --warmup-epochs x
expect 2 "\-\-momentum: 1 is not below 1" -- "$DTRAIN" train "$M" --momentum 1
expect 2 "\-\-decay: .* out of range" -- "$DTRAIN" train "$M" --decay -0.1
expect 0 "\-\-max-steps" -- "$DTRAIN" train --help

# Model-file errors: exit 2, FILE:LINE.
printf '[net]\nchannels=1\nheight=28\nwidth=28\n[connected]\noutput=10\nbogus=1\n[softmax]\n' > "$TMP/badkey.cfg"
expect 2 "badkey.cfg:7: .*bogus" -- "$DTRAIN" train "$TMP/badkey.cfg"
printf '[net]\nchannels=1\nheight=4\nwidth=4\n[convolutional]\nfilters=2\nsize=7\n[softmax]\n' > "$TMP/kernel.cfg"
expect 2 "kernel.cfg:5: " -- "$DTRAIN" info "$TMP/kernel.cfg"
expect 1 "cannot|No such" -- "$DTRAIN" train "$TMP/missing.cfg"

# Data errors: exit 1 naming the file.
mkdir -p "$TMP/empty" "$TMP/bad"
expect 1 "train-images-idx3-ubyte" -- "$DTRAIN" train "$M" --data-dir "$TMP/empty"
printf 'not an idx file at all' > "$TMP/bad/train-images-idx3-ubyte"
cp /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz "$TMP/bad/"
expect 1 "train-images-idx3-ubyte.*magic" -- "$DTRAIN" train "$M" --data-dir "$TMP/bad"

# info: table and graph JSON.
expect 0 "total: 407050 parameters" -- "$DTRAIN" info "$M"
# The engine column: a ResNet's ReLUs run inside the batch norm before them.
expect 0 "^2 .*activation .*folded into L1$" -- "$DTRAIN" info "$SRC/examples/resnet20_fm.cfg"
# Winograd: the 16 3x3 stride-1 convolutions of resnet20_fm run it (dtrain's
# on a CPU whose layout is nChw8c, AVX2 without AVX-512, and on Zen 4's
# nChw16c; oneDNN's between other CPUs' nChw16c activations), the stem (1
# channel, NCHW input) and the strided ones do not; winograd=0 turns it off.
"$DTRAIN" info "$SRC/examples/resnet20_fm.cfg" --json > "$TMP/w.json"
sed 's/^\[net\]$/[net]\nwinograd=0/' "$SRC/examples/resnet20_fm.cfg" > "$TMP/now.cfg"
"$DTRAIN" info "$TMP/now.cfg" --json > "$TMP/now.json"
grep -qE "^3 .*convolutional .*nChw(8|16)c, Winograd( \(oneDNN\))?$" \
    <("$DTRAIN" info "$SRC/examples/resnet20_fm.cfg") && on=1 || on=0
check "info's table marks Winograd's convolutions as --json does" test "$on" = "$(/usr/bin/python3 -c "
import json; print(int(json.load(open('$TMP/w.json'))['nodes'][4]['winograd']))")"
check "info --json: which convolutions run Winograd" /usr/bin/python3 -c "
import json; g=json.load(open('$TMP/w.json')); n=json.load(open('$TMP/now.json'))
convs=[x for x in g['nodes'] if x['type']=='convolutional']
wino=[x['id'] for x in convs if x['winograd']]
assert wino==[x['id'] for x in convs if x['flops']==3612672], wino
assert len(wino)==16, wino
assert not any(x.get('winograd') for x in n['nodes'])"
"$DTRAIN" info "$SRC/examples/cnn.cfg" --json > "$TMP/g.json"
check "info --json is a graph" /usr/bin/python3 -c "
import json,sys; g=json.load(open('$TMP/g.json'))
assert g['params']==3274634, g['params']
ids=[n['id'] for n in g['nodes']]; assert ids[0]=='input'
assert len(g['edges'])==len(ids)-1 and all(e[0] in ids and e[1] in ids for e in g['edges'])"

# info --dot: Graphviz DOT, one node per layer plus the input, a chain of
# edges; parsed by dot when it is installed, by its structure otherwise.
"$DTRAIN" info "$SRC/examples/cnn.cfg" --dot > "$TMP/g.dot"
check "info --dot exits 0" test $? -eq 0
if command -v dot > /dev/null; then
    check "dot parses info --dot" dot -Tsvg -o /dev/null "$TMP/g.dot"
fi
check "info --dot is the graph of info --json" /usr/bin/python3 -c "
import json, re
text = open('$TMP/g.dot').read()
g = json.load(open('$TMP/g.json'))
assert text.startswith('digraph ') and text.rstrip().endswith('}'), text[:40]
depth = 0
for c in re.sub(r'\"(\\\\.|[^\"\\\\])*\"', '', text):   # braces outside strings balance
    depth += {'{': 1, '}': -1}.get(c, 0)
    assert depth >= 0
assert depth == 0
nodes = re.findall(r'^  (\w+) \[label=\"([^\"]*)\"\];$', text, re.M)
edges = re.findall(r'^  (\w+) -> (\w+);$', text, re.M)
assert [n for n, _ in nodes] == [n['id'] for n in g['nodes']], nodes
assert [list(e) for e in edges] == g['edges'], edges
for (_, label), n in zip(nodes, g['nodes']):
    shape = 'x'.join(map(str, n['output']))
    assert n['type'] in label and shape in label, (label, n)
    assert n['type'] == 'input' or label.endswith('%d params' % n['params']), (label, n)"
expect 2 "\-\-json, \-\-dot and \-\-plan exclude each other" -- "$DTRAIN" info "$M" --json --dot

# bench prints its JSON line with peak RSS.
expect 0 '"event":"bench".*"images_per_sec":[0-9.]+.*"peak_rss_mb"' -- "$DTRAIN" bench "$M" --steps 3 --threads 1
# --winograd: the setting in the JSON line; a flag; a model's, not the loader's.
expect 0 '"winograd":0,' -- "$DTRAIN" bench "$SRC/examples/resnet20_fm.cfg" --steps 1 --batch 2 --threads 1 --winograd 0
expect 2 "\-\-winograd" -- "$DTRAIN" bench "$M" --winograd 2
expect 2 "\-\-winograd time the model" -- "$DTRAIN" bench "$M" --data-only --winograd 1

# train on synthetic data: summary is the last line of stdout and of the log;
# checkpoint + eval reproduce the accuracy; a corrupted checkpoint is refused.
"$DTRAIN" train "$M" --dataset synthetic --max-steps 30 --log "$TMP/run.jsonl" \
    --checkpoint "$TMP/m.ckpt" > "$TMP/out.txt" 2>&1
check "train exits 0" test $? -eq 0
check "summary last on stdout" grep -qE '^\{"event":"summary","test_accuracy":[0-9.]+,"train_loss":[0-9.]+,"steps":30,"epochs":[0-9.]+,"images_per_sec":[0-9.]+,"wall_s":' <(tail -n1 "$TMP/out.txt")
check "summary last in log" grep -q '"event":"summary"' <(tail -n1 "$TMP/run.jsonl")
check "log is JSONL with steps and eval" /usr/bin/python3 -c "
import json; ev=[json.loads(l) for l in open('$TMP/run.jsonl')]
kinds=[e['event'] for e in ev]; assert kinds.count('step')==30 and 'eval' in kinds and kinds[0]=='config', kinds"
acc=$(tail -n1 "$TMP/out.txt" | sed 's/.*"test_accuracy":\([0-9.]*\).*/\1/')
expect 0 "\"test_accuracy\":$acc" -- "$DTRAIN" eval "$M" --weights "$TMP/m.ckpt" --dataset synthetic --json
cp "$TMP/m.ckpt" "$TMP/bad.ckpt"
printf '\x55' | dd of="$TMP/bad.ckpt" bs=1 seek=5000 conv=notrunc status=none
expect 1 "bad.ckpt: checksum mismatch" -- "$DTRAIN" eval "$M" --weights "$TMP/bad.ckpt" --dataset synthetic
expect 1 "different model" -- "$DTRAIN" eval "$SRC/examples/cnn.cfg" --weights "$TMP/m.ckpt" --dataset synthetic
expect 1 "bad.ckpt: checksum mismatch" -- "$DTRAIN" train "$M" --dataset synthetic --resume "$TMP/bad.ckpt"

# --weights: a fresh run (its own batch, step 1) from the checkpoint's
# weights; at lr 1e-12 they stay what eval of the checkpoint measured.
expect 0 "starting from the weights of .*m.ckpt \(step 30 of its run\)" -- "$DTRAIN" train "$M" --dataset synthetic \
    --weights "$TMP/m.ckpt" --lr 1e-12 --max-steps 1 --batch 16 --checkpoint "$TMP/w.ckpt" --log "$TMP/w.jsonl"
check "--weights: a fresh run of 1 step" grep -q '"event":"summary".*"steps":1,' "$TMP/w.jsonl"
check "--weights: logged" grep -q '"event":"weights",.*m.ckpt","its_step":30' "$TMP/w.jsonl"
expect 0 "\"test_accuracy\":$acc" -- "$DTRAIN" eval "$M" --weights "$TMP/w.ckpt" --dataset synthetic --json
expect 2 "\-\-weights goes with \-\-resume auto only" -- "$DTRAIN" train "$M" --weights "$TMP/m.ckpt" \
    --resume "$TMP/m.ckpt"
# With --resume auto: the weights while the directory is empty, then its own.
expect 0 "no checkpoint yet; starting from \-\-weights" -- "$DTRAIN" train "$M" --dataset synthetic \
    --weights "$TMP/m.ckpt" --resume auto --checkpoint-dir "$TMP/wd" --max-steps 3
out=$("$DTRAIN" train "$M" --dataset synthetic --weights "$TMP/m.ckpt" --resume auto --checkpoint-dir "$TMP/wd" \
    --max-steps 5 2>&1)
check "--weights with --resume auto: the directory's checkpoint continues" grep -q "resumed from .*step-3.ckpt at step 3" <<<"$out"
check "--weights with --resume auto: the weights left" test "$(grep -c 'starting from the weights' <<<"$out")" -eq 0
expect 2 "\-\-weights .*wd/latest is in \-\-checkpoint-dir .*wd, whose checkpoints this run replaces" -- \
    "$DTRAIN" train "$M" --dataset synthetic --weights "$TMP/wd/latest" --checkpoint-dir "$TMP/wd" --batch 32
expect 2 "\-\-log .*m.ckpt is the checkpoint given to \-\-weights" -- "$DTRAIN" train "$M" --weights "$TMP/m.ckpt" \
    --log "$TMP/m.ckpt"
expect 1 "m.ckpt: checkpoint is for a different model" -- "$DTRAIN" train "$SRC/examples/cnn.cfg" --dataset synthetic \
    --weights "$TMP/m.ckpt" --max-steps 1

# Large-minibatch recipe: batch 32 on small_net.cfg's base batch 8 is k = 4:
# lr 0.05 x 4 = 0.2, warmup over 0.002 epochs (4 of 1875 steps) from 0.05.
"$DTRAIN" train "$SRC/tests/data/small_net.cfg" --dataset synthetic --max-steps 6 --threads 1 --batch 32 \
    --lr-scaling linear --warmup-epochs 0.002 --log "$TMP/lb.jsonl" > "$TMP/lb.out" 2>&1
check "recipe run exits 0" test $? -eq 0
check "start line shows the recipe" grep -q "lr 0.05 x 4 = 0.2 (linear scaling from base batch 8, warmup 0.002 epochs from 0.05, then constant)" "$TMP/lb.out"
check "config record and per-step rates follow the recipe" /usr/bin/python3 -c "
import json; ev=[json.loads(l) for l in open('$TMP/lb.jsonl')]
c=ev[0]; assert (c['base_lr'],c['lr_scale'],c['lr'],c['warmup_epochs'],c['warmup_start_lr'])==(0.05,4,0.2,0.002,0.05), c
lr=[e['lr'] for e in ev if e['event']=='step']
want=[0.05,0.0875,0.125,0.1625,0.2,0.2]
assert all(abs(a-b)<1e-6 for a,b in zip(lr,want)) and len(lr)==6, lr"

# Divergence: NaN/inf loss stops with the step named, exit 1.
expect 1 "loss is (NaN|infinite) at step" -- "$DTRAIN" train "$M" --dataset synthetic --lr 1e6 --max-steps 200

# A [connected] right before [softmax] without activation= takes Darknet's
# logistic: one note at start-up naming its line and the fix; none for
# activation=linear or an explicit activation=logistic, none with --quiet.
NET=$SRC/tests/data/small_net.cfg
grep -v '^activation=linear$' "$NET" > "$TMP/logistic.cfg"
sed 's/^activation=linear$/activation=logistic/' "$NET" > "$TMP/explicit.cfg"
line=$(grep -n '^\[connected\]' "$TMP/logistic.cfg" | tail -1 | cut -d: -f1)
RUN1=(--dataset synthetic --max-steps 1 --threads 1)
expect 0 "^note: .*logistic.cfg:$line: the \[connected\] before \[softmax\] has no activation=, so Darknet's default logistic .* costs accuracy; write activation=linear there" -- \
    "$DTRAIN" train "$TMP/logistic.cfg" "${RUN1[@]}"
for cfg in "$NET" "$TMP/explicit.cfg"; do
    out=$("$DTRAIN" train "$cfg" "${RUN1[@]}" 2>&1)
    check "no note for $(basename "$cfg")" bash -c "! grep -q 'Darknet.s default logistic' <<<'$out'"
done
out=$("$DTRAIN" train "$TMP/logistic.cfg" "${RUN1[@]}" --quiet 2>&1)
check "no note with --quiet" test "$(wc -l <<<"$out")" -eq 1

finish

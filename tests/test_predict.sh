#!/usr/bin/env bash
# dtrain predict: on a small folder's test split (tests/make_images.py), a
# model with Darknet's crop and mean=/std= (eval's preprocessing beyond
# decoding): each image's top-1 is the argmax of eval --logits-out for the
# same image, so predict is right exactly where eval counts right, and its
# probabilities are the softmax of those logits; image files, a folder and
# --list give the same answers; class names come from the checkpoint;
# errors are one line naming the file. Skipped (77) without python3, PIL
# and numpy.
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
min_crop=12
max_crop=16
mean=0.5,0.4,0.3
std=0.25,0.3,0.2
dataset=folder
[connected]
output=16
activation=relu
[connected]
output=4
activation=linear
[softmax]
EOF
M=$TMP/m.cfg
# A few steps only: some test images are still wrong, so agreement means something.
"$DTRAIN" train "$M" --data-dir "$TMP/imgs" --threads 1 --quiet --max-steps 4 --checkpoint "$TMP/ck" > "$TMP/train.out" 2>&1
check "trains" test $? -eq 0 || tail -3 "$TMP/train.out"
"$DTRAIN" eval "$M" --weights "$TMP/ck" --data-dir "$TMP/imgs" --json --logits-out "$TMP/logits" > "$TMP/eval.json"
check "evaluates" test $? -eq 0
"$DTRAIN" predict "$M" --weights "$TMP/ck" "$TMP/imgs/test" --json --top 4 --threads 1 > "$TMP/pred.json" 2> "$TMP/pred.err"
check "predicts a folder" test $? -eq 0 || cat "$TMP/pred.err"
check "predict agrees with eval per image" /usr/bin/python3 - "$TMP/eval.json" "$TMP/logits" "$TMP/pred.json" <<'EOF'
import json, math, os, struct, sys
ev = json.loads(open(sys.argv[1]).read())
n, c, names = ev["samples"], 4, ev["classes"]
raw = open(sys.argv[2], "rb").read()
z = struct.unpack("<%df" % (n * c), raw)
recs = [json.loads(l) for l in open(sys.argv[3])]
assert len(recs) == n == 48, (len(recs), n)
right = 0
for i, r in enumerate(recs):
    row = z[i * c:(i + 1) * c]
    best = max(range(c), key=lambda k: (row[k], -k))
    label = names.index(os.path.basename(os.path.dirname(r["image"])))
    top = r["top"]
    assert len(top) == 4 and top[0]["class"] == best, (r, row)
    assert top[0]["name"] == names[best]
    m = max(row); s = sum(math.exp(v - m) for v in row)
    for t in top:
        assert abs(t["p"] - math.exp(row[t["class"]] - m) / s) < 2e-6, (t, row)
    assert all(top[j]["p"] >= top[j + 1]["p"] for j in range(3))
    right += best == label
assert right == round(ev["test_accuracy"] * n), (right, ev["test_accuracy"])
assert 0 < right < n, right  # not trivially all right or all wrong
print("predict: %d of %d right, as eval" % (right, n))
EOF

# The same images named one by one, and in a list file: the same lines.
ls "$TMP"/imgs/test/a/* | head -3 > "$TMP/list"
"$DTRAIN" predict "$M" --weights "$TMP/ck" $(cat "$TMP/list") --json --top 4 --threads 1 > "$TMP/files.json"
"$DTRAIN" predict "$M" --weights "$TMP/ck" --list "$TMP/list" --json --top 4 --threads 1 > "$TMP/listed.json"
grep -F -f "$TMP/list" "$TMP/pred.json" > "$TMP/want.json"
check "image files = folder" cmp -s "$TMP/files.json" "$TMP/want.json"
check "--list = folder" cmp -s "$TMP/listed.json" "$TMP/want.json"
# The text form: the image, then top-k lines of percent, index and name (default k = 5, at most 4 outputs here).
expect 0 "^  +[0-9.]+%  [0-3] (C|_x|a|b)$" -- "$DTRAIN" predict "$M" --weights "$TMP/ck" "$(head -1 "$TMP/list")"
check "4 lines of classes" test "$("$DTRAIN" predict "$M" --weights "$TMP/ck" "$(head -1 "$TMP/list")" | grep -c %)" = 4

# Errors: one line naming the file or flag, non-zero, never a crash.
printf 'not an image' > "$TMP/bad.png"
expect 1 "bad.png" -- "$DTRAIN" predict "$M" --weights "$TMP/ck" "$TMP/bad.png"
expect 1 "nothere.jpg: No such file" -- "$DTRAIN" predict "$M" --weights "$TMP/ck" "$TMP/nothere.jpg"
expect 2 "needs MODEL.cfg, --weights" -- "$DTRAIN" predict "$M" "$TMP/bad.png"
expect 2 "--top" -- "$DTRAIN" predict "$M" --weights "$TMP/ck" --top 0 "$TMP/bad.png"
mkdir "$TMP/empty"
expect 2 "no images" -- "$DTRAIN" predict "$M" --weights "$TMP/ck" "$TMP/empty"
expect 1 "nolist" -- "$DTRAIN" predict "$M" --weights "$TMP/ck" --list "$TMP/nolist"
finish

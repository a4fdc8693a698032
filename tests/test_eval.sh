#!/usr/bin/env bash
# dtrain eval's summary a person reads, checked against a confusion matrix
# computed here from its --logits-out and the test labels: accuracy (right
# of all), every class's accuracy and samples, top-5, the --confusion
# matrix; --json keeps the one machine line (with the same matrix);
# --split train evaluates the training set; a bad split is refused.
# Skipped (77) without the Fashion-MNIST files or numpy.
source "$(dirname "$0")/clilib.sh" "$1"
FASHION=/usr/share/datasets/fashion-mnist
[ -f $FASHION/t10k-labels-idx1-ubyte.gz ] || { echo "test_eval: skipped (no $FASHION)"; exit 77; }
/usr/bin/python3 -c "import numpy" 2>/dev/null || { echo "test_eval: skipped (numpy is needed)"; exit 77; }
sed -e 's/^epochs=2$/epochs=1/' -e 's/^filters=32$/filters=4/' -e 's/^filters=64$/filters=8/' \
    -e 's/^output=1024$/output=32/' "$SRC/examples/cnn.cfg" > "$TMP/m.cfg"
TRAIN_DATA=(--dataset fashion-mnist)
train_ckpt m 1 "$TMP/m.cfg" --max-steps 60
EVAL=("$DTRAIN" eval "$TMP/m.cfg" --weights "$TMP/m.ckpt" --threads 1)
"${EVAL[@]}" --confusion --logits-out "$TMP/logits" > "$TMP/summary" 2>&1
check "eval runs" test $? -eq 0 || cat "$TMP/summary"
"${EVAL[@]}" --confusion --json > "$TMP/json" 2>&1
check "eval --json runs" test $? -eq 0 || cat "$TMP/json"
check "one JSON line" test "$(wc -l < "$TMP/json")" -eq 1
check "summary and JSON match the matrix computed from the logits" /usr/bin/python3 - "$TMP" $FASHION <<'PY'
import gzip, json, sys
import numpy as np
tmp, fashion = sys.argv[1], sys.argv[2]
raw = gzip.open(fashion + "/t10k-labels-idx1-ubyte.gz").read()
labels = np.frombuffer(raw, np.uint8, offset=8).astype(int)
logits = np.fromfile(tmp + "/logits", "<f4").reshape(len(labels), 10)
pred = logits.argmax(1)  # the first largest, as dtrain counts it
m = np.zeros((10, 10), int)
np.add.at(m, (labels, pred), 1)
above = (logits > logits[np.arange(len(labels)), labels][:, None]).sum(1)
right, top5 = int(np.trace(m)), float((above < 5).mean())
want = ["accuracy %.4f (%d of %d right)" % (right / len(labels), right, len(labels)), "top-5 accuracy %.4f" % top5]
want += ["%-16s %8.4f %8d" % (y, m[y, y] / m[y].sum(), m[y].sum()) for y in range(10)]
want += ["%-16s" % y + "".join(" %6d" % v for v in m[y]) for y in range(10)]
text = open(tmp + "/summary").read()
missing = [w for w in want if w not in text]
assert not missing, "summary lacks %s:\n%s" % (missing, text)
j = json.loads(open(tmp + "/json").read())
assert j["confusion"] == m.tolist(), j["confusion"]
assert "%.4f" % j["test_accuracy"] == "%.4f" % (right / len(labels)) and j["samples"] == 10000, j
PY
expect 0 "on the fashion-mnist train set: 60000 samples" -- "${EVAL[@]}" --split train
expect 0 '"samples":60000,.*"split":"train"' -- "${EVAL[@]}" --split train --json
expect 2 "--split: unknown split 'val' \(train, test\)" -- "${EVAL[@]}" --split val
finish

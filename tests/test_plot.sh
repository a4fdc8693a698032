#!/usr/bin/env bash
# dtrain plot: images of one and of two real training runs (a PNG's
# signature and size, a well-formed SVG), the plotted points equal to the
# logs' records, and bad input refused with one clear line and exit 2.
source "$(dirname "$0")/clilib.sh" "$1"
PY=/usr/bin/python3
cp "$SRC/tests/data/small_net.cfg" "$TMP/net.cfg"

# Two short runs on synthetic data (large batches: few steps, an evaluation
# after each of 2 and 3 epochs).
"$DTRAIN" train "$TMP/net.cfg" --dataset synthetic --epochs 2 --batch 500 --threads 1 \
    --log "$TMP/run_a.jsonl" --quiet > "$TMP/a.out" 2>&1
check "train run_a exits 0" test $? -eq 0
"$DTRAIN" train "$TMP/net.cfg" --dataset synthetic --epochs 3 --batch 1000 --lr 0.02 --threads 1 \
    --log "$TMP/run_b.jsonl" --quiet > "$TMP/b.out" 2>&1
check "train run_b exits 0" test $? -eq 0

# Each says what it wrote, in one line.
expect 0 "^plot: wrote $TMP/one.svg \(SVG 1200 x 800: 1 run, 240 training-loss and 2 test-accuracy points\) and the points to $TMP/one.tsv$" -- \
    "$DTRAIN" plot "$TMP/run_a.jsonl" -o "$TMP/one.svg" --data-out "$TMP/one.tsv"
expect 0 "^plot: wrote $TMP/two.png \(PNG 1200 x 800: 2 runs, 420 training-loss and 5 test-accuracy points\) and the points to $TMP/two.tsv$" -- \
    "$DTRAIN" plot "$TMP/run_a.jsonl" "$TMP/run_b.jsonl" -o "$TMP/two.png" --data-out "$TMP/two.tsv"
expect 0 "^plot: wrote $TMP/two.SVG \(SVG 640 x 480: 2 runs, 420 training-loss and 5 test-accuracy points\) and the points to $TMP/two_svg.tsv$" -- \
    "$DTRAIN" plot "$TMP/run_a.jsonl" "$TMP/run_b.jsonl" -o "$TMP/two.SVG" \
    --data-out "$TMP/two_svg.tsv" --width 640 --height 480

check "PNG: signature, IHDR, 1200 x 800" $PY -c "
import struct; b = open('$TMP/two.png', 'rb').read()
assert b[:8] == b'\x89PNG\r\n\x1a\n', b[:8]
assert b[12:16] == b'IHDR', b[12:16]
assert struct.unpack('>II', b[16:24]) == (1200, 800), struct.unpack('>II', b[16:24])"

check "SVG: well-formed XML of the asked size" $PY -c "
import xml.etree.ElementTree as ET
for path, size in (('$TMP/one.svg', ('1200pt', '800pt')), ('$TMP/two.SVG', ('640pt', '480pt'))):
    root = ET.parse(path).getroot()
    assert root.tag == '{http://www.w3.org/2000/svg}svg', root.tag
    assert (root.get('width'), root.get('height')) == size, (root.get('width'), root.get('height'))"

check "the same points whatever the format or size" cmp -s "$TMP/two.tsv" "$TMP/two_svg.tsv"

# Every plotted point is a record of the logs, exactly, in log order.
check "plotted points equal the logs' records" $PY -c "
import json
def expected(paths):
    rows = []
    for panel, event, value, x in (('loss_vs_step', 'step', 'loss', 'step'),
                                   ('loss_vs_time', 'step', 'loss', 'elapsed_s'),
                                   ('accuracy_vs_step', 'eval', 'test_accuracy', 'step'),
                                   ('accuracy_vs_time', 'eval', 'test_accuracy', 'elapsed_s')):
        for path in paths:
            label = path.rsplit('/', 1)[1].rsplit('.', 1)[0]
            for line in open(path):
                r = json.loads(line)
                if r['event'] == event:
                    rows.append((panel, label, float(r[x]), float(r[value])))
    return rows
def plotted(tsv):
    lines = open(tsv).read().splitlines()
    assert lines[0] == 'panel\tlabel\tx\ty', lines[0]
    return [(p, l, float(x), float(y)) for p, l, x, y in (s.split('\t') for s in lines[1:])]
for tsv, runs in (('one', ['run_a']), ('two', ['run_a', 'run_b'])):
    want = expected(['$TMP/%s.jsonl' % r for r in runs])
    got = plotted('$TMP/%s.tsv' % tsv)
    assert got == want, (tsv, len(got), len(want), [g for g, w in zip(got, want) if g != w][:3])
    steps = sum(1 for row in want if row[0] == 'loss_vs_step')
    evals = sum(1 for row in want if row[0] == 'accuracy_vs_step')
    assert steps == {'one': 240, 'two': 420}[tsv] and evals == {'one': 2, 'two': 5}[tsv], (steps, evals)"

# A killed run's log whose last line was cut while written: plotted
# without it, and said; the same cut line followed by a newline (a line
# that was written whole) is still an error.
cp "$TMP/run_a.jsonl" "$TMP/cut.jsonl"
printf '{"event":"step","step":241,"epoch":1,"lo' >> "$TMP/cut.jsonl"
n=$(($(wc -l < "$TMP/run_a.jsonl") + 1))
expect 0 "note: $TMP/cut.jsonl:$n: the last line is cut off \(a killed run's log\?\); left out" -- \
    "$DTRAIN" plot "$TMP/cut.jsonl" -o "$TMP/cut.svg" --data-out "$TMP/cut.tsv"
check "the cut log plots as the whole one" cmp -s <(sed 's/\tcut\t/\trun_a\t/' "$TMP/cut.tsv") "$TMP/one.tsv"
echo >> "$TMP/cut.jsonl"
expect 2 "cut.jsonl:$n: " -- "$DTRAIN" plot "$TMP/cut.jsonl" -o "$TMP/cut2.svg"

# Usage and input errors: one line naming the flag, file or line; exit 2; no image.
expect 2 "no RUN.jsonl given" -- "$DTRAIN" plot -o "$TMP/x.svg"
expect 2 "\-o FILE.svg\|FILE.png is required" -- "$DTRAIN" plot "$TMP/run_a.jsonl"
expect 2 "\-o needs a value" -- "$DTRAIN" plot "$TMP/run_a.jsonl" -o
expect 2 "x.jpg: unknown image format \(the name must end in .svg or .png\)" -- \
    "$DTRAIN" plot "$TMP/run_a.jsonl" -o "$TMP/x.jpg"
expect 2 "missing.jsonl: cannot open: No such file" -- "$DTRAIN" plot "$TMP/missing.jsonl" -o "$TMP/x.svg"
expect 2 "\-\-width: 10 is out of range" -- "$DTRAIN" plot "$TMP/run_a.jsonl" -o "$TMP/x.svg" --width 10
head -n 3 "$TMP/run_a.jsonl" > "$TMP/bad.jsonl"
printf '{"event":"step","step":4,"loss":0.5,}\n' >> "$TMP/bad.jsonl"
expect 2 "bad.jsonl:4: column 37: expected a string key" -- \
    "$DTRAIN" plot "$TMP/run_a.jsonl" "$TMP/bad.jsonl" -o "$TMP/x.svg"
printf '{"event":"step","step":1,"loss":2.3,"elapsed_s":0.1}\n\n' > "$TMP/blank.jsonl"
expect 2 "blank.jsonl:2: empty line" -- "$DTRAIN" plot "$TMP/blank.jsonl" -o "$TMP/x.svg"
printf '{"event":"step","step":1,"loss":2.3}\n' > "$TMP/old.jsonl"
expect 2 "old.jsonl:1: step record without a number \"elapsed_s\"" -- \
    "$DTRAIN" plot "$TMP/old.jsonl" -o "$TMP/x.svg"
printf '{"event":"eval","step":1,"test_accuracy":"high","elapsed_s":1}\n' > "$TMP/acc.jsonl"
expect 2 "acc.jsonl:1: eval record without a number \"test_accuracy\"" -- \
    "$DTRAIN" plot "$TMP/acc.jsonl" -o "$TMP/x.svg"
grep -v '"event":"step"' "$TMP/run_a.jsonl" > "$TMP/nosteps.jsonl"
expect 2 "nosteps.jsonl: no step records" -- "$DTRAIN" plot "$TMP/nosteps.jsonl" -o "$TMP/x.svg"
check "no image after an input error" test ! -e "$TMP/x.svg"

# An output that cannot be written is a runtime error (exit 1).
# (A missing folder is made; one a file is in the way of is not.)
expect 1 "run_b.jsonl/x.png: cannot create the folder" -- "$DTRAIN" plot "$TMP/run_a.jsonl" -o "$TMP/run_b.jsonl/x.png"

finish

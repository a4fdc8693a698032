#!/usr/bin/env bash
# Darknet's cfg folder (Debian's darknet: /usr/share/darknet/cfg) against
# Darknet's own parser. Its 28 classifier and feature-extractor cfgs (every
# cfg but the detection ones with [yolo]/[region]/[detection], the
# recurrent ones with [rnn]/[gru]/[lstm] and writing.cfg, a per-pixel
# regression ending in [cost] without [softmax]) each build in dtrain info
# --json with the output shape and parameter count of every section that
# tests/darknet_shapes (linking libdarknet.so) prints, and the same total;
# the two feature extractors are refused by train in one line naming
# their last section and give predict --features a vector of their
# output's size; every detection and recurrent cfg is refused in one line
# naming the section and its line. Training: test_darknet_zoo. Skipped
# (77) without darknet (apt-get install darknet) or python3.
source "$(dirname "$0")/clilib.sh" "$1"
CFG=${DT_DARKNET_CFG:-/usr/share/darknet/cfg}
SHAPES=${DT_BUILD_DIR:?}/tests/darknet_shapes
if [ ! -d "$CFG" ] || [ ! -x "$SHAPES" ] || ! /usr/bin/python3 -c '' 2>/dev/null; then
    echo "test_darknet_cfgs: skipped (needs $CFG, $SHAPES built against libdarknet.so, python3)"
    exit 77
fi
CLASSIFIERS="alexnet cifar cifar.test darknet darknet19 darknet19_448 darknet53 darknet53_448 darknet9000
  densenet201 extraction extraction.conv extraction22k go go.test resnet18 resnet34 resnet50 resnet101 resnet152
  resnext50 resnext101-32x4d resnext152-32x4d strided tiny vgg-16"
EXTRACTORS="jnet-conv vgg-conv"
files=()
for n in $CLASSIFIERS $EXTRACTORS; do files+=("$CFG/$n.cfg"); done
check "28 cfgs" test ${#files[@]} -eq 28

# Darknet's view: one parse of each, batch 1 (about 25 s and 2 GB for all 28).
"$SHAPES" "${files[@]}" > "$TMP/darknet.txt" 2> "$TMP/darknet.err"
check "darknet parses all 28" test $? -eq 0 || tail -3 "$TMP/darknet.err"
for f in "${files[@]}"; do
    "$DTRAIN" info "$f" --json --batch 1 > "$TMP/$(basename "$f").json" 2> "$TMP/info.err"
    check "$(basename "$f") builds" test $? -eq 0 || cat "$TMP/info.err"
done
/usr/bin/python3 - "$TMP" "$TMP/darknet.txt" > "$TMP/compare.out" <<'PY'
# Darknet's layer i is the cfg's section i after [net]; dtrain's layers carry
# their section's line, so the layers of section i are those with its line
# (a [convolutional] with batch_normalize=1 and an activation: three), the
# section's output is the last one's, and its parameters their sum.
# Darknet's [cost] adds no dtrain layer; its [softmax] and [reorg] extra=
# have no out_c/h/w, only outputs.
import json, os, re, sys
tmp, darknet = sys.argv[1], sys.argv[2]
cfgs, cur = {}, None
for line in open(darknet):
    w = line.split()
    if w[0] == 'cfg': cur = w[1]; cfgs[cur] = {'layers': []}
    elif w[0] == 'total': cfgs[cur]['total'] = int(w[1])
    else: cfgs[cur]['layers'].append((w[1], *map(int, w[2:])))
bad = 0
for path, dk in cfgs.items():
    lines = [i + 1 for i, l in enumerate(open(path)) if re.match(r'\s*\[', l)][1:]
    j = json.load(open(os.path.join(tmp, os.path.basename(path) + '.json')))
    by_line = {}
    for n in j['nodes'][1:]: by_line.setdefault(n['line'], []).append(n)
    errs = []
    if len(lines) != len(dk['layers']): errs.append('%d sections, darknet %d layers' % (len(lines), len(dk['layers'])))
    for i, (ln, (kind, c, h, w, outputs, params)) in enumerate(zip(lines, dk['layers'])):
        nodes = by_line.get(ln, [])
        if kind == 'cost':
            if nodes: errs.append('section %d [cost] line %d has layers' % (i, ln))
            continue
        if not nodes: errs.append('section %d [%s] line %d: no layer' % (i, kind, ln)); continue
        out, p = nodes[-1]['output'], sum(n['params'] for n in nodes)
        shape_ok = out == [c, h, w] if c else out[0] * out[1] * out[2] == outputs
        if not shape_ok or p != params:
            errs.append('section %d [%s] line %d: dtrain %s, %d params; darknet %dx%dx%d (%d), %d'
                        % (i, kind, ln, 'x'.join(map(str, out)), p, c, h, w, outputs, params))
    if j['params'] != dk['total']: errs.append('total: dtrain %d, darknet %d' % (j['params'], dk['total']))
    print('%-24s %3d sections %12d parameters %s' % (os.path.basename(path), len(lines), dk['total'],
                                                     'ok' if not errs else 'DIFFERS'))
    for e in errs[:5]: print('    ' + e)
    bad += bool(errs)
sys.exit(1 if bad or len(cfgs) != 28 else 0)
PY
check "dtrain's shapes and counts are Darknet's" test $? -eq 0 || cat "$TMP/compare.out"

# Feature extractors: train says why not; predict --features gives their output.
make_images tree "$TMP/imgs" a 1 16
img=$(find "$TMP/imgs" -name '*.png' | head -1)
for n in $EXTRACTORS; do
    expect 2 "^dtrain: $CFG/$n.cfg:[0-9]+: the net ends in \[maxpool\], not \[softmax\]: a feature extractor has no loss layer" \
        -- "$DTRAIN" train "$CFG/$n.cfg" --dataset synthetic --max-steps 1
    size=$(/usr/bin/python3 -c 'import json,sys,functools; o=json.load(open(sys.argv[1]))["nodes"][-1]["output"]; print(o[0]*o[1]*o[2])' "$TMP/$n.cfg.json")
    words=$("$DTRAIN" predict "$CFG/$n.cfg" --features --threads 1 "$img" | wc -w)
    check "$n: predict --features prints its $size values" test "$words" -eq $((size + 1))
done

# Detection and recurrent cfgs: refused, one line naming the section's line.
for f in "$CFG"/*.cfg; do
    line=$(grep -nE '^\[(yolo|region|detection|rnn|gru|lstm|crnn)\]' "$f" | head -1 | cut -d: -f1)
    [ -n "$line" ] || continue
    expect 2 "^dtrain: $f:$line: \[[a-z]+\] is Darknet's (detection|recurrent) layer: dtrain builds classifiers and feature extractors only$" \
        -- "$DTRAIN" info "$f"
done
finish

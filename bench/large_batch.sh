#!/usr/bin/env bash
# Large batch on Fashion-MNIST with examples/cnn_bn.cfg (batch norm), 2
# workers (allreduce), the same number of epochs for every run:
#   b128   global batch 128 (2 x 64): the file's SGD, lr 0.05, warmup 0.5, cosine
#   goyal  global batch 4096 (2 x 256 x --accumulate 8): SGD, linear scaling
#          (lr x 4096/64 = 3.2), warmup W epochs, cosine
#   lars   the same batch: LARS, lr L (trust coefficient 0.001), warmup W, cosine
#   lamb   the same batch: LAMB, lr M, warmup W, cosine
# Prints each run's test accuracy after every epoch and the final one; logs
# stay in OUT (default bench/out/large_batch) for plots:
#   build/dtrain plot OUT/b128.jsonl OUT/goyal.jsonl OUT/lars.jsonl OUT/lamb.jsonl -o large_batch.svg
# Usage: bash bench/large_batch.sh [EPOCHS] [W] [L] [M]   (defaults 6 1 20 0.05)
set -uo pipefail
cd "$(dirname "$0")/.."
E=${1:-6} W=${2:-1} L=${3:-20} M=${4:-0.05}
OUT=${OUT:-bench/out/large_batch}
mkdir -p "$OUT"
C=(train examples/cnn_bn.cfg --mode allreduce --epochs "$E" --quiet)
BIG=(--batch 256 --accumulate 8 --warmup-epochs "$W")
run() { # name args...
    local name=$1; shift
    build/dtrain launch -n 2 -- "${C[@]}" --log "$OUT/$name.jsonl" "$@" > "$OUT/$name.out" 2>&1 ||
        echo "$name: exit $? ($(tail -n1 "$OUT/$name.out"))"
}
run b128 --batch 64
run goyal "${BIG[@]}" --lr-scaling linear
# The papers' LARS and LAMB: no decay and no trust ratio on biases and batch norm
# (cnn_bn.cfg says exclude_bias_bn=0, PyTorch's SGD).
run lars "${BIG[@]}" --optimizer lars --lr "$L" --exclude-bias-bn 1
run lamb "${BIG[@]}" --optimizer lamb --lr "$M" --exclude-bias-bn 1
for name in b128 goyal lars lamb; do
    /usr/bin/python3 - "$OUT/$name.jsonl" "$name" <<'PY'
import json, sys
acc, summary = [], {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get('event') == 'eval': acc.append(r['test_accuracy'])
    if r.get('event') == 'summary': summary = r
    if r.get('event') == 'config': cfg = r
print('%-6s global batch %5d  %-5s lr %-7.4g per epoch %s  final %.4f  wall %.0f s  %.0f img/s' % (
    sys.argv[2], cfg['global_batch'], cfg['optimizer'], cfg['lr'], ' '.join('%.4f' % a for a in acc),
    summary.get('test_accuracy', float('nan')), summary.get('wall_s', 0), summary.get('images_per_sec', 0)))
PY
done

#!/usr/bin/env bash
# Adam and AdamW next to SGD on examples/cnn.cfg, Fashion-MNIST: test
# accuracy after EPOCHS epochs in serial (batch 64), and what their extra
# state costs per step: img/s in serial and in allreduce (2 workers x 32,
# STEPS steps), each as a ratio to SGD's. Usage: bash bench/optimizers.sh [EPOCHS] [STEPS]
set -uo pipefail
cd "$(dirname "$0")/.."
E=${1:-2} S=${2:-300}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
field() { sed -n "s/.*\"event\":\"summary\".*\"$2\":\([0-9.]*\).*/\1/p" "$1" | tail -n1; }
declare -A LR=([sgd]=0.01 [adam]=0.001 [adamw]=0.001) EXTRA=([sgd]="" [adam]="" [adamw]="--decay 0.01")
for opt in sgd adam adamw; do
    build/dtrain train examples/cnn.cfg --epochs "$E" --optimizer $opt --lr ${LR[$opt]} ${EXTRA[$opt]} --quiet \
        > "$D/$opt.serial" 2>&1
    build/dtrain launch -n 2 -- train examples/cnn.cfg --mode allreduce --batch 32 --max-steps "$S" \
        --optimizer $opt --lr ${LR[$opt]} ${EXTRA[$opt]} --quiet > "$D/$opt.ar" 2>&1
done
base_s=$(field "$D/sgd.serial" images_per_sec) base_a=$(field "$D/sgd.ar" images_per_sec)
printf '%-6s %-6s %9s %14s %8s %16s %8s\n' optim lr "accuracy" "serial img/s" "vs sgd" "allreduce img/s" "vs sgd"
for opt in sgd adam adamw; do
    s=$(field "$D/$opt.serial" images_per_sec) a=$(field "$D/$opt.ar" images_per_sec)
    printf '%-6s %-6s %9s %14s %8.3f %16s %8.3f\n' $opt ${LR[$opt]} "$(field "$D/$opt.serial" test_accuracy)" "$s" \
        "$(echo "$s / $base_s" | bc -l)" "$a" "$(echo "$a / $base_a" | bc -l)"
done

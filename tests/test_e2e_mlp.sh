#!/usr/bin/env bash
# End to end: the reference MLP trained one epoch on real Fashion-MNIST
# reaches at least 0.82 test accuracy.
source "$(dirname "$0")/clilib.sh" "$1"
"$DTRAIN" train "$SRC/examples/mlp.cfg" --epochs 1 --quiet > "$TMP/out.txt"
check "mlp trains" test $? -eq 0
acc=$(sed -n 's/.*"test_accuracy":\([0-9.]*\).*/\1/p' "$TMP/out.txt")
echo "mlp 1 epoch: test accuracy $acc"
check "accuracy $acc >= 0.82" /usr/bin/python3 -c "assert float('$acc') >= 0.82"
finish

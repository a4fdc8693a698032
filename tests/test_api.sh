#!/usr/bin/env bash
# The job API (include/dtrain.h) from a C program: examples/train_from_memory,
# built against libdtrain.so, trains from arrays in its memory, stops from
# its record callback, and its evaluation agrees with its predictions;
# serially and on 2 ranks (allreduce) and 3 (ps-sync with 1 server); and
# `make install` gives a prefix where pkg-config builds the same program.
source "$(dirname "$0")/clilib.sh" "$1"
EXAMPLE=${DT_BUILD_DIR:?}/train_from_memory

# run NAME CMD...: the example's line, "N steps ..., test accuracy A (loss L), predicted R of 1000 right".
run() {
    local name=$1; shift
    timeout 300 "$@" > "$TMP/$name.out" 2>&1
    check "$name runs" test $? -eq 0 || tail -5 "$TMP/$name.out"
    local line acc right
    line=$(grep '^train_from_memory:' "$TMP/$name.out")
    acc=$(sed -E 's/.*test accuracy ([0-9.]+).*/\1/' <<<"$line")
    right=$(sed -E 's/.*predicted ([0-9]+) of.*/\1/' <<<"$line")
    echo "$name: $line"
    check "$name learns (accuracy $acc >= 0.95)" awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }'
    check "$name: predict's argmax is right as often as evaluate counts ($right / 1000 = $acc)" \
        awk -v a="$acc" -v r="$right" 'BEGIN { exit !(r / 1000 == a) }'
    check "$name stopped by the callback" grep -q "stopped by the callback" <<<"$line"
}
MPI=(timeout 300 mpirun --oversubscribe --bind-to none)
run serial "$EXAMPLE"
run allreduce "${MPI[@]}" -np 2 "$EXAMPLE"
run ps_sync "${MPI[@]}" -np 3 "$EXAMPLE" ps-sync

# An installed prefix: the header, the library and pkg-config build the example.
if [ -z "${DT_SANITIZE:-}" ]; then
    cmake --install "$DT_BUILD_DIR" --prefix "$TMP/prefix" > "$TMP/install.out" 2>&1
    check "make install's prefix" test -f "$TMP/prefix/include/dtrain.h"
    pc=$(ls "$TMP"/prefix/lib*/pkgconfig/dtrain.pc "$TMP"/prefix/lib/*/pkgconfig/dtrain.pc 2>/dev/null | head -1)
    check "pkg-config file installed" test -n "$pc"
    flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --define-variable=prefix="$TMP/prefix" --cflags --libs dtrain)
    cc "$SRC/examples/train_from_memory.c" $flags -o "$TMP/installed_example" > "$TMP/cc.out" 2>&1
    check "the example builds against the installed prefix ($flags)" test $? -eq 0 || cat "$TMP/cc.out"
    libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --define-variable=prefix="$TMP/prefix" --variable=libdir dtrain)
    run installed env LD_LIBRARY_PATH="$libdir" "$TMP/installed_example"
fi
finish

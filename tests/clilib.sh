# Shared helpers for the CLI tests: run dtrain, check exit code and message.
# Usage in a test: source "$(dirname "$0")/clilib.sh" "$1"
DTRAIN=${1:?path to dtrain}
SRC=${DT_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0; passes=0

# expect CODE PATTERN -- CMD...: exit code CODE and stderr+stdout matching PATTERN.
expect() {
    local code=$1 pattern=$2; shift 3
    local out rc
    out=$(timeout 120 "$@" 2>&1); rc=$?
    if [ "$rc" != "$code" ] || ! grep -qE -- "$pattern" <<<"$out"; then
        echo "FAIL: $* -> exit $rc (want $code), output:"; echo "$out" | tail -5
        echo "      (wanted /$pattern/)"
        fails=$((fails + 1))
    else
        passes=$((passes + 1))
    fi
}

# train_ckpt NAME RANKS MODEL ARGS...: a short train run on synthetic data
# (or the data flags in TRAIN_DATA) (mpirun for RANKS > 1) that must
# succeed, its checkpoint in $TMP/NAME.ckpt and its output in $TMP/NAME.out;
# same A B TOL compares two such checkpoints (parameters and optimiser
# state, tests/ckpt_diff.py).
TRAIN_DATA=(--dataset synthetic)
train_ckpt() {
    local name=$1 np=$2 net=$3; shift 3
    local cmd=("$DTRAIN" train "$net" "${TRAIN_DATA[@]}" --threads 1 --quiet --checkpoint "$TMP/$name.ckpt" "$@")
    if [ "$np" = 1 ]; then
        "${cmd[@]}" > "$TMP/$name.out" 2>&1
    else
        timeout 300 mpirun --oversubscribe --bind-to none -np "$np" "${cmd[@]}" > "$TMP/$name.out" 2>&1
    fi
    check "$name runs" test $? -eq 0 || tail -5 "$TMP/$name.out"
}
same() {
    check "$1 == $2" /usr/bin/python3 "$SRC/tests/ckpt_diff.py" "$TMP/$1.ckpt" "$TMP/$2.ckpt" "$3"
}

# check DESCRIPTION COMMAND...: the command must succeed.
check() { # returns the command's failure too, so `check ... || show the output` works
    local what=$1; shift
    if "$@"; then passes=$((passes + 1)); else echo "FAIL: $what"; fails=$((fails + 1)); return 1; fi
}

# pids of the running dtrain train job whose command line carries marker $1
# (use the test's own $TMP path: other runs on the machine differ).
job_pids() { pgrep -f "^[^ ]*dtrain train .*$1"; }

# pid of world rank $2 of that job.
rank_pid() {
    local pid
    for pid in $(job_pids "$1"); do
        tr '\0' '\n' < /proc/$pid/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$pid"
    done
}

# wait_for FILE PATTERN SECONDS: until FILE has a line matching PATTERN.
wait_for() {
    for _ in $(seq 1 $(($3 * 10))); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}

# make_images ARGS...: tests/make_images.py ARGS (image files for folder
# tests); without python3's PIL and numpy the test is skipped (exit 77), and
# any other failure fails it.
make_images() {
    /usr/bin/python3 "$SRC/tests/make_images.py" "$@"
    local rc=$?
    [ $rc = 3 ] && { echo "$(basename "$0" .sh): skipped (python3 with PIL and numpy is needed)"; exit 77; }
    [ $rc = 0 ] || { echo "FAIL: make_images.py $1"; exit 1; }
}

finish() {
    echo "$passes passed, $fails failed"
    [ "$fails" -eq 0 ]
}

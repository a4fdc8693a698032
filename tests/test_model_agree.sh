#!/usr/bin/env bash
# Ranks must read the same model file, in meaning: files that differ in any
# value (the learning rate as much as a layer's size) are refused at
# start-up with exit 2 and one message, the same on every rank, naming the
# first difference with both values and where they are; the job ends
# without MPI_Abort. Files that differ only in comments, spacing, key order
# or how a number is written are accepted. So is a checkpoint to resume
# from that does not fit the model, the seed or the global batch, or is
# missing: every worker checks it before any mode starts and the job ends
# in order, with one message; so does what a trainer finds when it loads
# its data.
source "$(dirname "$0")/clilib.sh" "$1"
MPIRUN="mpirun --oversubscribe --bind-to none"
NET=$SRC/tests/data/small_net.cfg   # learning_rate=0.05 on line 8, output=32 on line 22

# Each rank trains DIR/rankR.cfg, R its world rank: mpirun gives every rank
# the same command line, this gives them different files.
cat > "$TMP/pick.sh" <<'EOF'
#!/usr/bin/env bash
dtrain=$1 dir=$2; shift 2
exec "$dtrain" train "$dir/rank${OMPI_COMM_WORLD_RANK:?not started by Open MPI}.cfg" "$@"
EOF
chmod +x "$TMP/pick.sh"

# job NAME NP: runs the rank files in $TMP/NAME; output in $out, status in $rc.
job() {
    out=$(timeout 120 $MPIRUN -np "$2" "$TMP/pick.sh" "$DTRAIN" "$TMP/$1" --dataset synthetic --threads 1 \
        --max-steps 2 --quiet 2>&1); rc=$?
}

# refused NAME PATTERN: exit 2, the message matches, every rank that says
# it says the same, and no rank was aborted. (Once the first rank exits
# non-zero, mpirun may SIGTERM the others while they finalise; what they
# print then is not the check's.)
refused() {
    local name=$1 pattern=$2
    check "$name: exit 2 (got $rc)" test "$rc" -eq 2 || echo "$out" | tail -5
    check "$name: message /$pattern/" grep -qE -- "$pattern" <<<"$out" || echo "$out" | tail -5
    check "$name: the same message on every rank" test "$(grep '^dtrain: rank [0-9]*: ranks disagree' <<<"$out" |
        sed 's/^dtrain: rank [0-9]*: //' | sort -u | wc -l)" -eq 1
    check "$name: no MPI_Abort" test "$(grep -c MPI_ABORT <<<"$out")" -eq 0 || echo "$out" | tail -5
}

# The learning rate differs (same shapes): refused, both values named.
mkdir -p "$TMP/lr"
cp "$NET" "$TMP/lr/rank0.cfg"
sed 's/^learning_rate=0.05$/learning_rate=0.01/' "$NET" > "$TMP/lr/rank1.cfg"
job lr 2
refused lr "ranks disagree on the model: rank\(s\) 1 read a different model file than rank 0: rank 0 has \[net\] learning_rate=0\.05 \($TMP/lr/rank0\.cfg line 8\), rank 1 has \[net\] learning_rate=0\.01 \($TMP/lr/rank1\.cfg line 8\); give every rank the same model file"

# Only comments, blank lines, spacing, CRLF, key order within a section
# and the spelling of numbers differ: the job runs.
mkdir -p "$TMP/same"
cp "$NET" "$TMP/same/rank0.cfg"
{
    echo "# the same net, written differently"
    echo
    echo "  [net]   ; input"
    echo "height = 12"
    echo "channels=1   # grey"
    echo "width=12"
    echo "batch=8"
    echo "learning_rate = 5e-2"
    echo "momentum=0.90"
    echo "decay=5e-4"
    echo "exclude_bias_bn = 0"
    echo "epochs=1"
    echo
    sed -n '/^\[convolutional\]/,$p' "$NET" | sed 's/=/ = /; s/$/\r/'
} > "$TMP/same/rank1.cfg"
job same 2
check "comments and spacing only: runs (exit $rc)" test "$rc" -eq 0 || echo "$out" | tail -5

# A layer's size differs: still refused, naming the section.
mkdir -p "$TMP/shape"
cp "$NET" "$TMP/shape/rank0.cfg"
sed 's/^output=32$/output=64/' "$NET" > "$TMP/shape/rank1.cfg"
job shape 2
refused shape "rank 0 has \[connected\] output=32 \($TMP/shape/rank0\.cfg line 22\), rank 1 has \[connected\] output=64 \($TMP/shape/rank1\.cfg line 22\)"

# A key one file leaves to its default: refused (say so, not silently
# equal), naming the section it is missing from.
mkdir -p "$TMP/missing"
cp "$NET" "$TMP/missing/rank0.cfg"
grep -v '^momentum=' "$NET" > "$TMP/missing/rank1.cfg"
job missing 2
refused missing "rank 0 has \[net\] momentum=0\.9 \($TMP/missing/rank0\.cfg line 9\), rank 1 has no momentum= in \[net\] \($TMP/missing/rank1\.cfg line 3\)"

# Three ranks, only rank 2 differs, by a section: the message names rank 2.
mkdir -p "$TMP/extra"
cp "$NET" "$TMP/extra/rank0.cfg"
cp "$NET" "$TMP/extra/rank1.cfg"
sed 's/^\[softmax\]$/[dropout]\n[softmax]/' "$NET" > "$TMP/extra/rank2.cfg"
job extra 3
refused extra "rank\(s\) 2 read a different model file than rank 0: rank 0 has \[softmax\] \($TMP/extra/rank0\.cfg line 27\), rank 2 has \[dropout\] \($TMP/extra/rank2\.cfg line 27\)"
# --resume: a checkpoint of another model, of another seed, or none; in
# allreduce and with a server (its rank 0 reads no checkpoint).
"$DTRAIN" train "$NET" --dataset synthetic --threads 1 --quiet --max-steps 3 --checkpoint "$TMP/small.ckpt" > /dev/null
resume_refused() { # name code pattern np args...
    local name=$1 code=$2 pattern=$3 np=$4; shift 4
    out=$(timeout 120 $MPIRUN -np "$np" "$DTRAIN" train "$@" --dataset synthetic --threads 1 --quiet \
        2>&1); rc=$?
    check "$name: exit $code (got $rc)" test "$rc" -eq "$code" || echo "$out" | tail -5
    check "$name: said once: /$pattern/" test "$(grep -cE -- "$pattern" <<<"$out")" -eq 1 || echo "$out" | tail -5
    check "$name: no MPI_Abort" test "$(grep -c MPI_ABORT <<<"$out")" -eq 0 || echo "$out" | tail -5
}
resume_refused "resume: other model" 1 "small.ckpt: checkpoint is for a different model" 2 \
    "$SRC/examples/cnn.cfg" --resume "$TMP/small.ckpt" --max-steps 5
resume_refused "resume: other model, ps-sync" 1 "small.ckpt: checkpoint is for a different model" 3 \
    "$SRC/examples/cnn.cfg" --resume "$TMP/small.ckpt" --mode ps-sync --servers 1 --max-steps 5
resume_refused "resume: other seed" 2 "small.ckpt: checkpoint was written with --seed 1, this run has --seed 4" 2 \
    "$NET" --resume "$TMP/small.ckpt" --seed 4 --max-steps 5
resume_refused "resume: no such file" 1 "none.ckpt: cannot open checkpoint" 2 "$NET" --resume "$TMP/none.ckpt" --max-steps 5
resume_refused "resume: nothing left" 2 "small.ckpt: the checkpoint is at step 3, and this run ends at step 3" 3 \
    "$NET" --resume "$TMP/small.ckpt" --max-steps 3 --mode ps-sync --servers 1 --batch 4
# Steps of another global batch (batch x accumulate x workers): 2 workers
# of 8 after steps of 8.
resume_refused "resume: other global batch" 2 "small.ckpt: the checkpoint's steps were of 8 samples, this run's are of 16" 2 \
    "$NET" --resume "$TMP/small.ckpt" --max-steps 5
resume_refused "resume: other global batch, ps-sync" 2 "small.ckpt: the checkpoint's steps were of 8 samples, this run's are of 16" 3 \
    "$NET" --resume "$TMP/small.ckpt" --max-steps 5 --mode ps-sync --servers 1
resume_refused "weights: other model" 1 "small.ckpt: checkpoint is for a different model" 2 \
    "$SRC/examples/cnn.cfg" --weights "$TMP/small.ckpt" --max-steps 5
# The same global batch on other workers continues; --weights takes any.
out=$(timeout 120 $MPIRUN -np 2 "$DTRAIN" train "$NET" --resume "$TMP/small.ckpt" --max-steps 5 --batch 4 \
    --dataset synthetic --threads 1 --quiet 2>&1); rc=$?
check "resume: 2 workers of 4 after steps of 8: exit 0 (got $rc)" test "$rc" -eq 0 || echo "$out" | tail -5
out=$(timeout 120 $MPIRUN -np 3 "$DTRAIN" train "$NET" --weights "$TMP/small.ckpt" --max-steps 2 --mode ps-sync \
    --dataset synthetic --threads 1 --quiet 2>&1); rc=$?
check "weights: ps-sync on 2 workers of 8: exit 0 (got $rc)" test "$rc" -eq 0 || echo "$out" | tail -5
# What only a trainer finds, once it loads its data, is agreed there: a
# data set the last rank (a worker) cannot load (an empty folder) while the
# other worker trains on synthetic data; one message, exit 1, no MPI_Abort.
mkdir -p "$TMP/empty"
cat > "$TMP/data.sh" <<EOF
#!/usr/bin/env bash
if [ "\$OMPI_COMM_WORLD_RANK" = "\$((OMPI_COMM_WORLD_SIZE - 1))" ]; then set -- "\$@" --dataset folder --data-dir "$TMP/empty"
else set -- "\$@" --dataset synthetic; fi
exec "$DTRAIN" train "$NET" --threads 1 --quiet --max-steps 2 "\$@"
EOF
chmod +x "$TMP/data.sh"
for mode in "allreduce" "ps-sync --servers 1"; do
    np=2; [ "$mode" = allreduce ] || np=3
    out=$(timeout 120 $MPIRUN -np $np "$TMP/data.sh" --mode $mode 2>&1); rc=$?
    check "data set missing on one rank, $mode: exit 1 (got $rc)" test "$rc" -eq 1 || echo "$out" | tail -5
    check "data set missing on one rank, $mode: said once" test "$(grep -c "$TMP/empty" <<<"$out")" -eq 1 ||
        echo "$out" | tail -5
    check "data set missing on one rank, $mode: no MPI_Abort" test "$(grep -c MPI_ABORT <<<"$out")" -eq 0
done
finish

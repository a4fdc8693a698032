#!/usr/bin/env bash
# The asynchronous and stale-synchronous parameter servers: ps-ssp with
# staleness 0 is ps-sync; SSP bounds the clock gap under a slow worker and
# the fast worker is really blocked; ps-async with one worker is serial;
# large gradient segments, which take turns on a server's link out of step,
# keep ps-async and ps-ssp with one worker serial and count right with two;
# every ps mode (with 1 or 2 servers) trains the mlp to >= 0.80 in one epoch;
# shard versions never go back, and the servers count every gradient.
# Worker groups (--group-size): one group of all workers is ps-sync, and 4
# workers in groups of 2 train the mlp to >= 0.80.
source "$(dirname "$0")/clilib.sh" "$1"
MPIRUN="mpirun --oversubscribe --bind-to none"
cp "$SRC/tests/data/small_net.cfg" "$TMP/net.cfg"
train() { # name ranks args... (the model: $CFG, else net.cfg)
    local name=$1 np=$2; shift 2
    local cmd=("$DTRAIN" train "${CFG:-$TMP/net.cfg}" --dataset synthetic --threads 1 --quiet
               --checkpoint "$TMP/$name.ckpt" --log "$TMP/$name.jsonl" "$@")
    [ "$np" = 1 ] || cmd=(timeout 300 $MPIRUN -np "$np" "${cmd[@]}")
    "${cmd[@]}" > "$TMP/$name.out" 2>&1
    check "$name runs" test $? -eq 0 || tail -5 "$TMP/$name.out"
}
same() { check "$1 == $2" /usr/bin/python3 "$SRC/tests/ckpt_diff.py" "$TMP/$1.ckpt" "$TMP/$2.ckpt" "$3"; }
field() { sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" "$TMP/$1.out" | tail -n1; }

# ps-ssp --staleness 0 is ps-sync, to the bit (same commit code, same order).
train sync 4 --mode ps-sync --servers 2 --max-steps 30
train ssp0 4 --mode ps-ssp --staleness 0 --servers 2 --max-steps 30
same sync ssp0 0
check "ps-sync reads no stale parameters" test "$(field sync staleness_max)" = 0

# ps-async with one worker is serial (one gradient, one update, in order,
# lr / W = lr, never stale).
train serial 1 --max-steps 30
train async1 2 --mode ps-async --max-steps 30
same serial async1 1e-6
# So is ps-ssp with one worker (every segment commits as it arrives, so
# read-my-writes has nothing to re-apply), here with 2 servers: segments,
# their committed counts and the shards all land where they belong.
train ssp1 3 --mode ps-ssp --staleness 2 --servers 2 --max-steps 30
same serial ssp1 1e-6

# Out of step, a server takes in large gradient segments (1 MiB or more)
# one at a time (ps_server.c's admit_turn). With the first connected layer
# 4096 wide (216 x 4096 floats, 3.5 MB; 1.8 MB a shard of two) the turns
# path carries it: with one worker ps-async and ps-ssp are still serial;
# with two, ps-async, ps-ssp, ps-async-nowait and bf16 pushes train,
# versions never go back, and the servers count every gradient (a mismatch
# fails the run).
sed 's/^output=32$/output=4096/' "$TMP/net.cfg" > "$TMP/wide.cfg"
check "wide.cfg has the 4096-wide layer" grep -q '^output=4096$' "$TMP/wide.cfg"
wide() { CFG=$TMP/wide.cfg train "$@"; }
wide wide_serial 1 --max-steps 20
wide wide_async1 2 --mode ps-async --max-steps 20
same wide_serial wide_async1 1e-6
wide wide_ssp1 3 --mode ps-ssp --staleness 2 --servers 2 --max-steps 20
same wide_serial wide_ssp1 1e-6
wide wide_async2 4 --mode ps-async --servers 2 --max-steps 30
wide wide_ssp2 4 --mode ps-ssp --staleness 1 --servers 2 --max-steps 30
# The deferred modes (a STEP may wait for its slot before its turn), and
# 16-bit words (1.8 MB in bf16 with one server: still a turn).
wide wide_nowait2 4 --mode ps-async-nowait --servers 2 --max-steps 30
wide wide_bf16 3 --mode ps-async --grad-compression bf16 --max-steps 30
for r in wide_async2 wide_ssp2 wide_nowait2 wide_bf16; do
    check "$r: versions monotonic" /usr/bin/python3 -c "
import json
v=[json.loads(l)['version'] for l in open('$TMP/$r.jsonl') if '\"event\":\"step\"' in l]
assert v and all(b >= a for a, b in zip(v, v[1:])), v[:20]"
done

# Worker groups: a group of every worker is one client of the servers, so
# ps-async with it is ps-sync (2 workers, 2 servers), bit for bit; groups of
# 1 are plain ps-async; a group size that does not divide the workers fails.
train group_all 4 --mode ps-async --group-size 2 --servers 2 --max-steps 30
same sync group_all 0
train sync_group 4 --mode ps-sync --group-size 2 --servers 2 --max-steps 30
same sync sync_group 0
train groups_of_1 3 --mode ps-async --group-size 1 --max-steps 30
check "groups of 1 run as ps-async" grep -q '"mode":"ps-async"' "$TMP/groups_of_1.out"
expect 2 "--group-size 3 does not divide the 2 workers" -- $MPIRUN -np 3 "$DTRAIN" train "$TMP/net.cfg" \
    --mode ps-async --group-size 3
expect 2 "--group-size applies to --mode ps-sync or ps-async, not allreduce" -- $MPIRUN -np 2 "$DTRAIN" train \
    "$TMP/net.cfg" --mode allreduce --group-size 2

# A persistent straggler (world rank 2 = worker 1 sleeps 20 ms a step): SSP
# lets the fast worker (rank 1) run exactly s clocks ahead and no further,
# so it spends most of its step blocked.
for s in 1 3; do
    train slow_ssp$s 3 --mode ps-ssp --staleness $s --max-steps 60 --slow-worker 2:20
    gap=$(field slow_ssp$s max_clock_gap); wait_share=$(field slow_ssp$s comm_wait_share)
    echo "ssp s=$s: largest clock gap $gap, fast worker waiting $wait_share of its step"
    check "ssp s=$s gap $gap == $s" test "$gap" = "$s"
    check "ssp s=$s fast worker blocked ($wait_share)" /usr/bin/python3 -c "assert float('$wait_share') > 0.3"
done
# ps-async does not bound it: the fast worker runs away.
train slow_async 3 --mode ps-async --max-steps 60 --slow-worker 2:20
gap=$(field slow_async max_clock_gap)
check "ps-async gap $gap > 3" test "$gap" -gt 3

# The deferred modes (reply first, apply in applier threads: one under a
# lock, or two without one), with 1 and 2 servers and a slow worker: they
# run to the end, the servers' gradient counts hold, the loss stays finite.
for mode in ps-async-nowait ps-hogwild; do
    for S in 1 2; do
        name="${mode}_s$S"
        train "$name" $((S + 2)) --mode $mode --servers $S --max-steps 80 --slow-worker $((S + 1)):5
        loss=$(sed -n 's/.*"train_loss":\([0-9.a-z]*\).*/\1/p' "$TMP/$name.out")
        check "$name: finite loss ($loss)" /usr/bin/python3 -c "import math; assert math.isfinite(float('$loss'))"
    done
done

# Versions seen by worker 0 never decrease; every mode's servers checked
# their gradient counts at the end (a mismatch fails the run).
for r in sync slow_ssp3 slow_async ps-async-nowait_s2 ps-hogwild_s2; do
    check "$r: versions monotonic" /usr/bin/python3 -c "
import json
v=[json.loads(l)['version'] for l in open('$TMP/$r.jsonl') if '\"event\":\"step\"' in l]
assert v and all(b >= a for a, b in zip(v, v[1:])), v[:20]"
done

# Real data below: not under the sanitizers (slow there; the code paths
# are the ones above).
if [ -n "${DT_SANITIZE:-}" ]; then finish; exit $?; fi

# Every ps mode, 2 workers of 32, with 1 or 2 servers (alternating: the
# sharding itself is checked above and in test_dist, CI's time): the mlp on
# Fashion-MNIST, one epoch, >= 0.80 test accuracy, finite loss. The file's
# recipe with the rate annealed to 0 over the epoch (policy=cosine): at a
# constant rate the asynchronous modes' last iterate swings with timing
# (20 runs each at momentum 0.9: ps-hogwild 0.792-0.831, 3 under 0.80;
# ps-async-nowait 0.800-0.836; ps-async 0.804-0.840), annealed it settles
# (20 runs each: every asynchronous mode and ps-ssp s = 1, 3 within
# 0.833-0.839; ps-sync 0.8373; docs/MODES.md, "Annealing under asynchrony").
sed 's/^policy=constant$/policy=cosine/' "$SRC/examples/mlp.cfg" > "$TMP/mlp_cosine.cfg"
check "mlp_cosine.cfg anneals" grep -q '^policy=cosine$' "$TMP/mlp_cosine.cfg"
S=1
for mode in ps-sync ps-async ps-async-nowait ps-hogwild "ps-ssp --staleness 1"; do
    S=$((3 - S)) # 2, 1, 2, 1, 2
    name="mlp_${mode%% *}_s$S"
    timeout 300 $MPIRUN -np $((S + 2)) "$DTRAIN" train "$TMP/mlp_cosine.cfg" --epochs 1 --threads 1 --quiet \
        --batch 32 --servers $S --mode $mode > "$TMP/$name.out" 2>&1
    check "$name runs" test $? -eq 0 || tail -3 "$TMP/$name.out"
    acc=$(field $name test_accuracy); loss=$(sed -n 's/.*"train_loss":\([0-9.a-z]*\).*/\1/p' "$TMP/$name.out")
    echo "$name: test accuracy $acc, train loss $loss"
    check "$name accuracy $acc >= 0.80" /usr/bin/python3 -c "import math; assert float('$acc') >= 0.80 and math.isfinite(float('$loss'))"
done
# SINGA worker groups: 4 workers in 2 groups of 2 (Downpour between the
# groups), 1 server, 32 per worker, one epoch annealed (0.818-0.821 over 6
# runs; at a constant rate timing moved it between 0.79 and 0.83).
timeout 300 $MPIRUN -np 5 "$DTRAIN" train "$TMP/mlp_cosine.cfg" --epochs 1 --threads 1 --quiet \
    --mode ps-async --group-size 2 --batch 32 > "$TMP/mlp_groups.out" 2>&1
check "mlp groups runs" test $? -eq 0 || tail -3 "$TMP/mlp_groups.out"
acc=$(field mlp_groups test_accuracy)
echo "mlp 2 groups of 2: test accuracy $acc"
check "mlp groups accuracy $acc >= 0.80" /usr/bin/python3 -c "assert float('$acc') >= 0.80"
finish

#!/usr/bin/env bash
# Distributed modes through mpirun: allreduce and ps-sync with N workers of
# batch b give the parameters (and optimiser state) of serial with batch N*b;
# allreduce in the shared window (the default on one machine), as a ring
# and as MPI_Iallreduce; fused buckets equal unfused and buckets that split
# a layer; ps-sync
# checkpoints (with 2 servers) resume exactly. Sufficient-factor
# broadcasting (--sfb) and SACP (--sacp) give the same parameters as well.
source "$(dirname "$0")/clilib.sh" "$1"
MPIRUN="mpirun --oversubscribe --bind-to none"
cp "$SRC/tests/data/small_net.cfg" "$TMP/net.cfg"
K=25
# Float tolerance: per-worker means averaged vs one mean over the whole
# batch differ in summation order only (~1e-7 relative per step); after 25
# momentum steps the parameters agree to well under 1e-5.
TOL=2e-5
run() { # name ranks args...
    local name=$1 np=$2; shift 2
    release_only "$name" && return 0
    train_ckpt "$name" "$np" "$TMP/net.cfg" --max-steps $K "$@"
}

# Sanitizer builds run 2 workers only (CI time): 3 workers exercise the
# same threads with other shard arithmetic, which the release build checks.
# They skip too the variants whose code another run covers (the ring and
# MPI paths of unfused, split and whole buckets; one server of two).
NS=(2 3)
RELEASE_ONLY=""
[ -n "${DT_SANITIZE:-}" ] && NS=(2) && RELEASE_ONLY=" ar2_unfused ar2_split ar2_ring ar2_sfb_ring ps2_s1 ar4_ring "
# TSan looks for races between threads: ps-sync runs no thread beyond the
# loader's, which every run has, so its runs and resume are left to the
# release and ASan builds (CI time).
[ "${DT_SANITIZE:-}" = thread ] && RELEASE_ONLY+="ps2_s2 ps2_s2_sfb ps2_s1_sacp ps_resume "
release_only() { [[ "$RELEASE_ONLY" == *" $1 "* ]]; }
for N in "${NS[@]}"; do
    B=$((N == 2 ? 8 : 7))   # 3 x 7 = 21 does not divide the 60000 samples: uneven tail dropped
    run serial$N 1 --batch $((N * B))
    run ar$N "$N" --mode allreduce --batch $B    # auto: the shared window
    run ar${N}_unfused "$N" --mode allreduce --batch $B --allreduce-algo mpi --fusion-mb 0
    run ar${N}_split "$N" --mode allreduce --batch $B --allreduce-algo mpi --fusion-mb 0.01 # 2621 floats: splits layers
    # dtrain's ring on every bucket (uneven chunks: 7334 floats, 2621-float buckets), and MPI's on every one
    run ar${N}_ring "$N" --mode allreduce --batch $B --allreduce-algo ring
    run ar${N}_ring_split "$N" --mode allreduce --batch $B --allreduce-algo ring --fusion-mb 0.01
    run ar${N}_mpi "$N" --mode allreduce --batch $B --allreduce-algo mpi
    run ar${N}_sfb_ring "$N" --mode allreduce --batch $B --sfb --allreduce-algo ring
    run ps${N}_s1 $((N + 1)) --mode ps-sync --servers 1 --batch $B --server-nice 7
    run ps${N}_s2 $((N + 2)) --mode ps-sync --servers 2 --batch $B
    run ar${N}_sfb "$N" --mode allreduce --batch $B --sfb --fusion-mb 0.001
    run ps${N}_s2_sfb $((N + 2)) --mode ps-sync --servers 2 --batch $B --sfb
    run ps${N}_s1_sacp $((N + 1)) --mode ps-sync --servers 1 --batch $B --sacp
    for m in ar$N ar${N}_unfused ar${N}_split ar${N}_ring ar${N}_ring_split ar${N}_mpi ar${N}_sfb_ring ps${N}_s1 ps${N}_s2 ar${N}_sfb ps${N}_s2_sfb ps${N}_s1_sacp; do
        release_only $m || same serial$N $m $TOL
    done
    release_only ar${N}_unfused || same ar${N}_mpi ar${N}_unfused 0
done

# 4 workers: the ring's three reduce-scatter and three allgather rounds,
# and the window's four uneven shards (7334 parameters).
run serial4x4 1 --batch 16
run ar4_ring 4 --mode allreduce --batch 4 --allreduce-algo ring --fusion-mb 0.01
run ar4_shm 4 --mode allreduce --batch 4 --allreduce-algo shm
release_only ar4_ring || same serial4x4 ar4_ring $TOL
same serial4x4 ar4_shm $TOL

# Dropout: worker r's masks are those of samples r x b .. r x b + b - 1 of
# the global batch (net.h's sample_base), so 2 workers of 8 draw exactly the
# masks of serial with 16; before, every rank drew serial's first 8.
sed 's/^\[connected\]$/[dropout]\nprobability=0.3\n[connected]/' "$TMP/net.cfg" > "$TMP/drop.cfg"
train_ckpt drop_serial 1 "$TMP/drop.cfg" --max-steps $K --batch 16
train_ckpt drop_ar 2 "$TMP/drop.cfg" --max-steps $K --batch 8 --mode allreduce
same drop_serial drop_ar $TOL

# A ring step's message over 64000 bytes goes as segments of that size
# (ring.c), and beyond 64 of them the segments grow, each message cut by
# its own length at both ends. cnn (3.27 M floats) in one 16 MiB bucket
# between 2 workers: 6.5 MB chunks, 64 segments of 102 KB; in bf16 words
# 51 segments of 64000 bytes. 3 workers and a 3,145,729-float bucket:
# chunks of 1,048,576 and one of 1,048,577 floats, cut in 64 segments of
# 16384 and of 16385 (when a rank cut both of its messages by its longer
# one, the ends disagreed and the run corrupted memory). Global batch 12,
# 3 steps; release build only.
if [ -z "${DT_SANITIZE:-}" ]; then
    CNN=("$SRC/examples/cnn.cfg" --max-steps 3)
    train_ckpt cnn_serial 1 "${CNN[@]}" --batch 12
    train_ckpt cnn_ring_grown 2 "${CNN[@]}" --batch 6 --mode allreduce --allreduce-algo ring --fusion-mb 16
    train_ckpt cnn_ring_bf16 2 "${CNN[@]}" --batch 6 --mode allreduce --allreduce-algo ring --fusion-mb 16 \
        --grad-compression bf16
    train_ckpt cnn_ring3_uneven 3 "${CNN[@]}" --batch 4 --mode allreduce --allreduce-algo ring \
        --fusion-mb 12.0000039
    same cnn_serial cnn_ring_grown $TOL
    same cnn_serial cnn_ring_bf16 1e-2 # test_compression's bf16 tolerance
    same cnn_serial cnn_ring3_uneven $TOL
fi

# allreduce in the shared window: worker 0 checkpoints the shared
# parameters while its peer runs ahead (every 5 steps); a resumed run gives
# the uninterrupted one's parameters bit for bit.
K=30
run straight_shm 2 --mode allreduce --checkpoint-every 5
K=12
run half_shm 2 --mode allreduce
timeout 300 $MPIRUN -np 2 "$DTRAIN" train "$TMP/net.cfg" --dataset synthetic --max-steps 30 --threads 1 \
    --quiet --mode allreduce --resume "$TMP/half_shm.ckpt" --checkpoint "$TMP/resumed_shm.ckpt" \
    > "$TMP/resumed_shm.out" 2>&1
check "allreduce resume runs" test $? -eq 0 || tail -5 "$TMP/resumed_shm.out"
same straight_shm resumed_shm 0

if ! release_only ps_resume; then
    # Checkpoint with 2 servers, resume, same as uninterrupted (bit for bit).
    K=30
    run straight 4 --mode ps-sync --servers 2
    K=12
    run half 4 --mode ps-sync --servers 2
    timeout 300 $MPIRUN -np 4 "$DTRAIN" train "$TMP/net.cfg" --dataset synthetic --max-steps 30 --threads 1 \
        --quiet --mode ps-sync --servers 2 --resume "$TMP/half.ckpt" --checkpoint "$TMP/resumed.ckpt" > "$TMP/resumed.out" 2>&1
    check "ps-sync resume runs" test $? -eq 0 || tail -5 "$TMP/resumed.out"
    same straight resumed 0
    # The same checkpoint resumes in allreduce mode too (one file format for all modes).
    timeout 300 $MPIRUN -np 2 "$DTRAIN" train "$TMP/net.cfg" --dataset synthetic --max-steps 30 --threads 1 \
        --quiet --mode allreduce --resume "$TMP/half.ckpt" --checkpoint "$TMP/resumed_ar.ckpt" > "$TMP/resumed_ar.out" 2>&1
    check "resume in allreduce runs" test $? -eq 0
    same straight resumed_ar $TOL

    # Observability: the summary carries overlap, bytes per step, server CPU share.
    check "ps summary fields" grep -qE '"comm_overlap":[0-9.]+,"comm_wait_share":[0-9.]+,"bytes_per_step":[0-9]+,"server_cpu_share":[0-9.]+' "$TMP/ps2_s2.out"
    check "servers at nice 19 by default" grep -q '"server_nice":19' "$TMP/ps2_s2.out"
fi
# --server-nice 7 (or the nice this test started at, if higher: never lowered).
if ! release_only ps2_s1; then
    check "servers at --server-nice 7" grep -q "\"server_nice\":$(($(nice) > 7 ? $(nice) : 7))" "$TMP/ps2_s1.out"
fi

# SFB moves fewer bytes than the gradients it replaces, as planned; the
# start-up plan names the layers (small_net at batch 8: layer 3 by SFB).
timeout 300 $MPIRUN -np 3 "$DTRAIN" train "$TMP/net.cfg" --dataset synthetic --max-steps 2 --threads 1 \
    --mode ps-sync --sacp > "$TMP/plan.out" 2>&1
check "sacp plan printed" grep -q "plan: layer 3 connected .*usual *0.056 MB  sfb *0.016 MB  -> sfb" "$TMP/plan.out"
"$DTRAIN" info "$TMP/net.cfg" --plan --workers 2 > "$TMP/info_plan.out"
check "info --plan = start-up plan" diff <(grep "plan: layer" "$TMP/plan.out") <(grep "plan: layer" "$TMP/info_plan.out")
check "sfb bytes as planned" /usr/bin/python3 - "$TMP/ar2.out" "$TMP/ar2_sfb.out" <<'PY'
import json, sys
a, b = (json.loads([l for l in open(f) if '"summary"' in l][-1]) for f in sys.argv[1:])
assert b["bytes_per_step"] < a["bytes_per_step"], (a, b)
assert b["bytes_per_step"] == b["plan_bytes_per_step"], b
PY
# Large-minibatch recipe: the rate follows the global batch (2 x 8 = 16 on
# a base of 8: k = 2), so allreduce equals serial at batch 16 with the recipe.
run serial_lb 1 --batch 16 --lr-scaling linear --warmup-epochs 0.005
run ar_lb 2 --mode allreduce --batch 8 --lr-scaling linear --warmup-epochs 0.005
same serial_lb ar_lb $TOL

# Divergence under allreduce: the workers agree and all stop (exit 1, no
# hang, no MPI_Abort needed for the others), the checkpoint is not written.
expect 1 "training diverged" -- $MPIRUN -np 2 "$DTRAIN" train "$TMP/net.cfg" --dataset synthetic --lr 1e6 \
    --max-steps 200 --threads 1 --quiet --checkpoint "$TMP/nan.ckpt"
check "no checkpoint of diverged parameters" test ! -e "$TMP/nan.ckpt"
# Under parameter servers, independent workers too: each finishes its step,
# tells the servers to stop and meets the others at the end; the job ends
# without MPI_Abort and no checkpoint is written.
for m in ps-sync ps-async ps-hogwild; do
    out=$($MPIRUN -np 3 "$DTRAIN" train "$TMP/net.cfg" --mode $m --dataset synthetic --lr 1e6 --max-steps 200 \
        --threads 1 --quiet --checkpoint "$TMP/nan_$m.ckpt" --checkpoint-every 1 2>&1); rc=$?
    check "$m divergence: exit 1, said by both workers" test $rc -eq 1 -a \
        "$(grep -c '^dtrain: rank [12]: training diverged' <<<"$out")" -eq 2 || echo "$out" | tail -5
    check "$m divergence: no MPI_Abort" test "$(grep -c MPI_ABORT <<<"$out")" -eq 0
    check "$m divergence: no checkpoint, or a finite one from before it" /usr/bin/python3 -c "
import os, re, struct, sys
import numpy as np
if not os.path.exists(sys.argv[2]): sys.exit(0)  # the parameters were non-finite at the first checkpoint
# Worker 0 (rank 1) writes it; its own step count names where it stopped.
first = int(re.search(r'rank 1: training diverged: .* (?:at|by) step (\d+)', sys.argv[1]).group(1))
raw = open(sys.argv[2], 'rb').read()
step = struct.unpack_from('<Q', raw, 32)[0]
n = sum(struct.unpack_from('<QQQ', raw, 56))
assert step <= first and np.isfinite(np.frombuffer(raw, '<f4', n, 80)).all(), (step, first)
" "$out" "$TMP/nan_$m.ckpt"
done

# Usage errors.
expect 2 "needs at least 3 ranks" -- $MPIRUN -np 2 "$DTRAIN" train "$TMP/net.cfg" --mode ps-sync --servers 2
expect 2 "unknown mode 'ps-magic' \(serial, allreduce, ps-sync, ps-async, ps-ssp, ps-async-nowait or ps-hogwild\)" -- \
    "$DTRAIN" train "$TMP/net.cfg" --mode ps-magic
# The usage text has a line for every mode and algorithm of the table.
usage=$("$DTRAIN" train --help)
for m in serial allreduce ps-sync ps-async ps-ssp ps-async-nowait ps-hogwild auto ring mpi shm hier; do
    check "usage lists $m" grep -qE "^ {26}$m +[a-zA-Z]" <<<"$usage"
done
expect 2 "--fusion-mb applies to --allreduce-algo auto, ring or mpi \(buckets\), not hier" -- "$DTRAIN" train \
    "$TMP/net.cfg" --mode allreduce --allreduce-algo hier --fusion-mb 1
expect 2 "serial runs on one rank" -- $MPIRUN -np 2 "$DTRAIN" train "$TMP/net.cfg" --mode serial
expect 2 "--sfb applies to --mode allreduce or ps-sync, not ps-async" -- \
    $MPIRUN -np 3 "$DTRAIN" train "$TMP/net.cfg" --mode ps-async --sfb
expect 2 "exclude each other" -- "$DTRAIN" train "$TMP/net.cfg" --sfb --sacp
expect 2 "--allreduce-algo: unknown algorithm 'tree'" -- "$DTRAIN" train "$TMP/net.cfg" --allreduce-algo tree
expect 2 "--allreduce-algo applies to --mode allreduce, not serial" -- "$DTRAIN" train "$TMP/net.cfg" --allreduce-algo ring
expect 2 "--allreduce-algo shm and --sacp exclude each other" -- "$DTRAIN" train "$TMP/net.cfg" --mode allreduce \
    --allreduce-algo shm --sacp
finish

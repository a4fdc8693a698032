#!/usr/bin/env bash
# --grad-compression (src/plan/codec.h): in allreduce and ps-sync, bf16 and
# fp16 stay within a stated distance of serial with the global batch after
# 25 steps (and do round: they differ from it); every server policy runs
# with bf16 and a resumed bf16 ps-sync run equals an uninterrupted one;
# ps-sync's commit (decoding in it, encoding once) equals ps-async's path
# bit for bit with one worker;
# top-k with R = 1 sends every
# value and equals the uncompressed ring bit for bit; bytes per step are
# the formulas' (ring halved; top-k (P-1) k 8 each way); a top-k run
# resumes exactly (its residuals are checkpointed); info --plan halves
# the dense bytes; on real data, mlp with top-k 1% over 2 workers reaches
# 0.80 in one epoch. Bad values are one-line errors.
source "$(dirname "$0")/clilib.sh" "$1"
cp "$SRC/tests/data/small_net.cfg" "$TMP/net.cfg"
# Tolerances after 25 momentum steps at lr 0.05 (measured: bf16 3.9e-3,
# fp16 5.0e-5 on 2 workers; 1.2e-3 and 4.4e-5 on 3): every gradient is
# rounded W-1 times on its way round the ring, to 8 (bf16) or 11 (fp16)
# bits of mantissa.
TOL_BF16=1e-2
TOL_FP16=5e-4
run() { train_ckpt "$1" "$2" "$TMP/net.cfg" --max-steps 25 "${@:3}"; }
run serial2 1 --batch 16
run ar2_ring 2 --batch 8 --allreduce-algo ring
run ar2_bf16 2 --batch 8 --grad-compression bf16
run ar2_fp16 2 --batch 8 --grad-compression fp16
run ar2_topk1 2 --batch 8 --grad-compression topk:1
run ar2_topk 2 --batch 8 --grad-compression topk:0.1
same serial2 ar2_bf16 $TOL_BF16
same serial2 ar2_fp16 $TOL_FP16
check "bf16 rounds (differs from fp32)" bash -c "! /usr/bin/python3 '$SRC/tests/ckpt_diff.py' '$TMP/serial2.ckpt' '$TMP/ar2_bf16.ckpt' 1e-6"
same ar2_ring ar2_topk1 0
# Parameter servers: the pushed gradients and the replies in 16-bit words,
# so the workers also compute on rounded parameters, and the difference
# grows faster than the ring's (synthetic data at lr 0.05 amplifies it:
# after 25 steps bf16 8.1e-3, fp16 6.9e-3 in the momentum): compared after
# 3 steps (measured: bf16 1.4e-2, fp16 3.8e-5; every step, the first too,
# computes on rounded parameters); the servers' shard and sums stay fp32.
TOL_PS_BF16=3e-2
TOL_PS_FP16=2e-4
train_ckpt serial2_3 1 "$TMP/net.cfg" --max-steps 3 --batch 16
train_ckpt ps2_bf16_3 3 "$TMP/net.cfg" --max-steps 3 --batch 8 --mode ps-sync --grad-compression bf16
train_ckpt ps2_fp16_3 3 "$TMP/net.cfg" --max-steps 3 --batch 8 --mode ps-sync --grad-compression fp16
same serial2_3 ps2_bf16_3 $TOL_PS_BF16
same serial2_3 ps2_fp16_3 $TOL_PS_FP16
# ps-sync decodes a clock's words in its commit, block by block, and encodes
# the reply once for every worker; ps-async decodes each segment as it
# arrives and encodes a reply per worker. With one worker (lr / 1, a sum of
# one) the two are the same arithmetic: bit for bit, on mlp's layers of
# many commit blocks (ps_clocked.c).
train_ckpt ps1_sync_bf16 2 "$SRC/examples/mlp.cfg" --max-steps 5 --batch 16 --mode ps-sync --grad-compression bf16
train_ckpt ps1_async_bf16 2 "$SRC/examples/mlp.cfg" --max-steps 5 --batch 16 --mode ps-async --grad-compression bf16
same ps1_sync_bf16 ps1_async_bf16 0
bytes() { sed -n 's/.*"bytes_per_step":\([0-9]*\).*/\1/p' "$TMP/$1.out"; }
# small_net: 7334 floats, one bucket; sent + received per step.
check "ring bytes: 2 x 2 (1/2) 7334 4" test "$(bytes ar2_ring)" = 58672
check "bf16 bytes: half" test "$(bytes ar2_bf16)" = 29336
check "top-k 0.1 bytes: 2 x ceil(733.4) 8" test "$(bytes ar2_topk)" = 11744
check "ps-sync bf16 bytes: a push and a pull of 7334 x 2" test "$(bytes ps2_bf16_3)" = 29336
# A top-k run resumes exactly: every worker's residual (the gradients it has
# not sent yet) is in the checkpoint, so 10 steps and a resume to 25 end on
# the 25-step run's parameters bit for bit. A run of another worker count
# (the same global batch: 4 workers of 4) starts its error feedback from
# zero, and says so.
train_ckpt topk_half 2 "$TMP/net.cfg" --max-steps 10 --batch 8 --grad-compression topk:0.1
train_ckpt topk_resumed 2 "$TMP/net.cfg" --max-steps 25 --batch 8 --grad-compression topk:0.1 \
    --resume "$TMP/topk_half.ckpt"
same ar2_topk topk_resumed 0
timeout 300 mpirun --oversubscribe --bind-to none -np 4 "$DTRAIN" train "$TMP/net.cfg" --dataset synthetic \
    --threads 1 --max-steps 12 --batch 4 --grad-compression topk:0.1 --resume "$TMP/topk_half.ckpt" \
    > "$TMP/topk_4.out" 2>&1
check "resumed by 4 workers" test $? -eq 0 || tail -5 "$TMP/topk_4.out"
check "another worker count: said" grep -q "top-k residuals are those of 2 workers x 7334 floats, this run has \
4 x 7334: error feedback starts from zero" "$TMP/topk_4.out"
timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$DTRAIN" train "$TMP/net.cfg" --dataset synthetic \
    --threads 1 --max-steps 2 --grad-compression topk:0.1 > "$TMP/start.out" 2>&1
check "start line names the compression" grep -q "gradients as topk:0.1$" "$TMP/start.out"
check "and how the pairs travel" grep -q "topk:0.1 pairs allgathered; 5872 bytes sent per step" "$TMP/start.out"
if [ -z "${DT_SANITIZE:-}" ]; then
    # 3 workers: two rounding hops; split buckets (uneven chunks).
    run serial3 1 --batch 21
    run ar3_bf16 3 --batch 7 --grad-compression bf16 --fusion-mb 0.01
    run ar3_fp16 3 --batch 7 --grad-compression fp16
    same serial3 ar3_bf16 $TOL_BF16
    same serial3 ar3_fp16 $TOL_FP16
    # Every server policy with bf16 (2 servers: segments cut between them),
    # and a resumed bf16 ps-sync run ends where an uninterrupted one without
    # a checkpoint at the resume step does (pulls and checkpoints move fp32;
    # the step after one rounds the parameters as a reply would have).
    for m in "ps-async --servers 2" "ps-ssp --staleness 2" "ps-async-nowait" "ps-hogwild --servers 2"; do
        run "ps_${m%% *}" 4 --batch 8 --mode $m --grad-compression bf16
    done
    P=(--batch 8 --mode ps-sync --grad-compression bf16)
    train_ckpt ps_straight 3 "$TMP/net.cfg" --max-steps 20 "${P[@]}"
    train_ckpt ps_half 3 "$TMP/net.cfg" --max-steps 10 "${P[@]}"
    train_ckpt ps_resumed 3 "$TMP/net.cfg" --max-steps 20 "${P[@]}" --resume "$TMP/ps_half.ckpt"
    same ps_straight ps_resumed 0
    # Real data: the model file's global batch of 64 over 2 workers.
    timeout 300 mpirun --oversubscribe --bind-to none -np 2 "$DTRAIN" train "$SRC/examples/mlp.cfg" --epochs 1 \
        --threads 1 --batch 32 --grad-compression topk:1% --quiet > "$TMP/mlp.out" 2>&1
    check "mlp topk:1% trains" test $? -eq 0
    acc=$(sed -n 's/.*"test_accuracy":\([0-9.]*\).*/\1/p' "$TMP/mlp.out")
    echo "mlp, 2 workers, topk:1%, 1 epoch: test accuracy $acc"
    check "accuracy $acc >= 0.80" /usr/bin/python3 -c "assert float('$acc') >= 0.80"
fi
"$DTRAIN" info "$TMP/net.cfg" --plan --mode allreduce > "$TMP/plan.out"
"$DTRAIN" info "$TMP/net.cfg" --plan --mode allreduce --grad-compression fp16 > "$TMP/plan16.out"
check "info --plan: fp16 halves the usual bytes" /usr/bin/python3 - "$TMP/plan.out" "$TMP/plan16.out" <<'PY'
import re, sys
usual = [re.findall(r"usual +([0-9.]+) MB", open(f).read()) for f in sys.argv[1:]]
assert usual[0][1] == "0.056" and usual[1][1] == "0.028", usual
PY
"$DTRAIN" info "$TMP/net.cfg" --plan > "$TMP/plan_ps.out"
"$DTRAIN" info "$TMP/net.cfg" --plan --grad-compression bf16 > "$TMP/plan_ps16.out"
check "info --plan ps-sync: bf16 halves what a server moves" /usr/bin/python3 - "$TMP/plan_ps.out" "$TMP/plan_ps16.out" <<'PY'
import re, sys
mb = [float(re.findall(r"each server moves ([0-9.]+) MB", open(f).read())[0]) for f in sys.argv[1:]]
assert abs(mb[1] - mb[0] / 2) < 2e-3, mb
PY
expect 2 "^dtrain: --grad-compression topk:0.01 works with --mode allreduce; the parameter servers take bf16 or fp16$" \
    -- "$DTRAIN" info "$TMP/net.cfg" --plan --grad-compression topk:1%
expect 2 "^dtrain: --grad-compression: unknown 'zip' \(none, bf16, fp16, topk:R\)$" -- "$DTRAIN" train "$TMP/net.cfg" \
    --dataset synthetic --grad-compression zip
expect 2 "topk:0: R must be a fraction in \(0, 1\]" -- "$DTRAIN" train "$TMP/net.cfg" --dataset synthetic \
    --grad-compression topk:0
expect 2 "--grad-compression bf16 applies to --mode allreduce, ps-sync, ps-async, ps-ssp, ps-async-nowait or ps-hogwild, not serial" -- "$DTRAIN" train "$TMP/net.cfg" --dataset synthetic \
    --grad-compression bf16
expect 2 "exclude each other \(the window moves nothing over a wire\)" -- mpirun --oversubscribe -np 2 "$DTRAIN" \
    train "$TMP/net.cfg" --dataset synthetic --grad-compression bf16 --allreduce-algo shm
finish

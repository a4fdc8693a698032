#!/usr/bin/env bash
# Graphs in every training mode, and Darknet's subdivisions. A residual net without batch norm
# (tests/data/small_resnet.cfg: shortcuts, a route, global average pooling)
# gives serial's parameters with the global batch in allreduce (the shared
# window and the ring) and ps-sync with 1 and 2 servers, and a checkpoint
# resumed mid-run equals the uninterrupted run; examples/resnet20_fm.cfg
# (batch norm, whose statistics are each worker's own, as in PyTorch's DDP
# without SyncBatchNorm) trains a few steps in allreduce, ps-sync with 2
# servers and ps-async.
source "$(dirname "$0")/clilib.sh" "$1"
K=20
run() { train_ckpt "$@"; } # name ranks net args...

# One mean over 16 samples against two over 8 averaged: ~1e-7 relative per
# step; after 20 SGD steps the largest difference measured was 1.0e-7 in the
# parameters and 2.6e-7 in the momentum.
RES="$SRC/tests/data/small_resnet.cfg"
run res 1 "$RES" --max-steps $K --batch 16
# (Under the sanitizers, CI's time budget: the shared window and 2 servers;
# the ring and 1 server run the same graph code, checked in release.)
MODES=(res_ar_shm res_ar_ring res_ps1 res_ps2)
[ -n "${DT_SANITIZE:-}" ] && MODES=(res_ar_shm res_ps2)
run res_ar_shm 2 "$RES" --max-steps $K --batch 8 --mode allreduce --allreduce-algo shm
[ -z "${DT_SANITIZE:-}" ] && run res_ar_ring 2 "$RES" --max-steps $K --batch 8 --mode allreduce --allreduce-algo ring
[ -z "${DT_SANITIZE:-}" ] && run res_ps1 3 "$RES" --max-steps $K --batch 8 --mode ps-sync --servers 1
run res_ps2 4 "$RES" --max-steps $K --batch 8 --mode ps-sync --servers 2
for m in "${MODES[@]}"; do same res $m 2e-6; done
run res_half 1 "$RES" --max-steps 10 --batch 16
run res_resumed 1 "$RES" --max-steps $K --batch 16 --resume "$TMP/res_half.ckpt"
same res res_resumed 0

# Darknet's subdivisions=4 at batch 16 (4 passes of 4) equals batch 16 in
# one pass, serial and allreduce (where each worker's batch=16 is split).
sed 's/^batch=8$/batch=16/' "$RES" > "$TMP/b16.cfg"
sed 's/^batch=8$/batch=16\nsubdivisions=4/' "$RES" > "$TMP/sub4.cfg"
run sub_one 1 "$TMP/b16.cfg" --max-steps $K
run sub_four 1 "$TMP/sub4.cfg" --max-steps $K
run sub_ar 2 "$TMP/sub4.cfg" --max-steps $K --mode allreduce
run sub_ar_one 2 "$TMP/b16.cfg" --max-steps $K --mode allreduce
same sub_one sub_four 2e-6
same sub_ar_one sub_ar 2e-6
grep -q "\"global_batch\":16," "$TMP/sub_four.out" || expect 0 x -- false

# SFB rebuilds a connected layer's gradient from sufficient factors; with
# batch_normalize=1 it has no bias, so no bias gradient (the batch norm's
# gradients after it stay the reduced ones): equal to plain allreduce.
sed '/^output=32$/a batch_normalize=1' "$SRC/tests/data/small_net.cfg" > "$TMP/fcbn.cfg"
run fcbn_ar 2 "$TMP/fcbn.cfg" --max-steps $K --mode allreduce
run fcbn_sfb 2 "$TMP/fcbn.cfg" --max-steps $K --mode allreduce --sfb
same fcbn_ar fcbn_sfb 2e-6

# Darknet's max_batches is the run's length in steps; --epochs cannot
# change it, and flags cannot undo subdivisions= or add a second warmup.
DK="$SRC/tests/data/darknet_small.cfg"
run dk 1 "$DK"
grep -q '"steps":8,' "$TMP/dk.out" || expect 0 x -- false
expect 2 "--epochs: .*darknet_small.cfg sets max_batches=8, the run's length in steps" -- \
    "$DTRAIN" train "$DK" --dataset synthetic --epochs 2
expect 2 "--accumulate: .*darknet_small.cfg sets subdivisions=2" -- \
    "$DTRAIN" train "$DK" --dataset synthetic --accumulate 4
expect 2 "--warmup-epochs: .*darknet_small.cfg has burn_in=2, Darknet's warmup" -- \
    "$DTRAIN" train "$DK" --dataset synthetic --warmup-epochs 1

# Darknet's [crop] as the first layer (as in its AlexNet, VGG-16 and
# Extraction files): a random 24x24 window of each 28x28 image, mirrored
# half the time, trains; info shows the cropped shape.
printf '[net]\nbatch=8\nchannels=1\nheight=28\nwidth=28\nlearning_rate=0.05\n[crop]\ncrop_height=24\ncrop_width=24\nflip=1\nangle=0\nsaturation=1\nexposure=1\n[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\nactivation=ramp\n[connected]\noutput=10\nactivation=linear\n[softmax]\n[cost]\n' > "$TMP/crop.cfg"
run crop 1 "$TMP/crop.cfg" --max-steps 4
"$DTRAIN" info "$TMP/crop.cfg" | grep -q "^0 *crop .*1x24x24" || expect 0 x -- false

# ResNet-20 on 1x28x28 synthetic images, a few steps per mode.
R20="$SRC/examples/resnet20_fm.cfg"
# Under the sanitizers (CI's time budget) allreduce alone: the ps modes run
# the same net code, and test_dist covers them there.
S=3
run r20_ar 2 "$R20" --max-steps $S --batch 8 --mode allreduce
grep -q '"steps":'$S "$TMP/r20_ar.out" || expect 0 x -- false
if [ -z "${DT_SANITIZE:-}" ]; then
    run r20_ps2 4 "$R20" --max-steps $S --batch 8 --mode ps-sync --servers 2
    run r20_async 3 "$R20" --max-steps $S --batch 8 --mode ps-async
fi

echo "test_graph_modes: $passes passed, $fails failed"
[ "$fails" = 0 ]

#!/usr/bin/env bash
# Every optimiser in every mode that can run it: allreduce (the shared
# window and the ring) and ps-sync with 1 and 2 servers (2 servers split
# the layers; LARS and LAMB shards are cut between tensors) give serial's
# parameters and optimiser state with the global batch; a checkpoint
# resumed mid-run equals the uninterrupted run (serial, and ps-sync with 2
# servers); --accumulate 4 at batch 4 equals batch 16, serial and
# allreduce; bad values and impossible combinations are one-line errors.
# (SGD's equalities are test_dist's; its numbers against PyTorch, and every
# optimiser's, test_golden's.)
source "$(dirname "$0")/clilib.sh" "$1"
MPIRUN="mpirun --oversubscribe --bind-to none"
NET="$SRC/tests/data/small_net.cfg"
K=20
run() { # name ranks args...
    local name=$1 np=$2; shift 2
    train_ckpt "$name" "$np" "$NET" "$@"
}

# Summation order differs between one mean over 16 samples and two over 8
# averaged (~1e-7 relative per step); after 20 steps the largest difference
# measured was 4e-7 (lamb). Adam-style steps divide by sqrt(v), so an
# element whose gradient is near 0 could differ by up to lr: 5e-6 leaves
# room for a little of that, not for a wrong step (lr 2e-3, lars 1).
# Under the sanitizers (CI's time budget): the optimiser with trust ratios
# and two state slots (lamb: every code path adam has, and the norms), and
# one asynchronous mode; the release build runs all.
OPTS=(adam adamw lars lamb) ASYNC=(ps-async ps-async-nowait ps-hogwild)
[ -n "${DT_SANITIZE:-}" ] && OPTS=(lamb) ASYNC=(ps-hogwild)
for opt in "${OPTS[@]}"; do
    case $opt in lars) LR=1 ;; *) LR=0.002 ;; esac
    O="--optimizer $opt --lr $LR --max-steps $K"
    run $opt 1 $O --batch 16
    run ${opt}_ar_shm 2 $O --batch 8 --mode allreduce --allreduce-algo shm
    run ${opt}_ar_ring 2 $O --batch 8 --mode allreduce --allreduce-algo ring
    run ${opt}_ps1 3 $O --batch 8 --mode ps-sync --servers 1
    run ${opt}_ps2 4 $O --batch 8 --mode ps-sync --servers 2
    for m in ${opt}_ar_shm ${opt}_ar_ring ${opt}_ps1 ${opt}_ps2; do same $opt $m 5e-6; done
    # Resumed at step 10 from a checkpoint of a run cut there: bit for bit.
    run ${opt}_half 1 --optimizer $opt --lr $LR --max-steps 10 --batch 16
    run ${opt}_resumed 1 $O --batch 16 --resume "$TMP/${opt}_half.ckpt"
    same $opt ${opt}_resumed 0
    run ${opt}_ps2_half 4 --optimizer $opt --lr $LR --max-steps 10 --batch 8 --mode ps-sync --servers 2
    run ${opt}_ps2_resumed 4 $O --batch 8 --mode ps-sync --servers 2 --resume "$TMP/${opt}_ps2_half.ckpt"
    same ${opt}_ps2 ${opt}_ps2_resumed 0
done
# SFB layers are updated by every worker with its own state.
run lamb_ps2_sfb 4 --optimizer lamb --lr 0.002 --max-steps $K --batch 8 --mode ps-sync --servers 2 --sfb
same lamb lamb_ps2_sfb 5e-6
# The asynchronous modes run them (no equality: the order of updates is theirs).
for m in "${ASYNC[@]}"; do
    run lars_$m 4 --optimizer lars --lr 1 --max-steps $K --batch 8 --mode $m --servers 2
done

# Accumulation: 4 passes of 4 are one batch of 16 (no batch norm or dropout here).
for opt in sgd adam; do
    run acc_$opt 1 --optimizer $opt --lr 0.002 --max-steps $K --batch 16
    run acc_${opt}_4x4 1 --optimizer $opt --lr 0.002 --max-steps $K --batch 4 --accumulate 4
    run acc_${opt}_ar 2 --optimizer $opt --lr 0.002 --max-steps $K --batch 2 --accumulate 4 --mode allreduce \
        --allreduce-algo ring
    same acc_$opt acc_${opt}_4x4 5e-6
    same acc_$opt acc_${opt}_ar 5e-6
done
grep -q '"global_batch":16' "$TMP/acc_adam_ar.out" || expect 0 'x' -- false

# A checkpoint of another optimiser is refused, naming both.
O1=${OPTS[0]} # a checkpoint of the first optimiser run above
expect 2 "holds the state of optimizer $O1, this run uses sgd \(--optimizer $O1 continues it\)" -- \
    "$DTRAIN" train "$NET" --dataset synthetic --max-steps 30 --resume "$TMP/${O1}_half.ckpt"
# Bad values and combinations.
T=("$DTRAIN" train "$NET" --dataset synthetic --max-steps 1)
expect 2 "--optimizer: unknown optimizer 'adagrad' \(sgd, adam, adamw, lars, lamb\)" -- "${T[@]}" --optimizer adagrad
expect 2 "--beta1" -- "${T[@]}" --optimizer adam --beta1 -0.5
expect 2 "--beta2: 1 is not below 1" -- "${T[@]}" --optimizer adam --beta2 1
expect 2 "--eps" -- "${T[@]}" --optimizer adam --eps 0
expect 2 "--beta1 applies only to --optimizer adam, adamw or lamb \(the optimizer is sgd\)" -- "${T[@]}" --beta1 0.8
expect 2 "--momentum applies only to --optimizer sgd or lars \(the optimizer is adam\)" -- \
    "${T[@]}" --optimizer adam --momentum 0.5
expect 2 "--trust-coefficient applies only to --optimizer lars" -- "${T[@]}" --optimizer lamb --trust-coefficient 0.01
expect 2 "--exclude-bias-bn" -- "${T[@]}" --exclude-bias-bn 2
expect 2 "--accumulate" -- "${T[@]}" --accumulate 0
expect 2 "ps-ssp --staleness 3 runs only with --optimizer sgd" -- \
    $MPIRUN -np 3 "${T[@]}" --mode ps-ssp --optimizer adam
expect 2 "--accumulate 2 does not run with --sfb" -- $MPIRUN -np 2 "${T[@]}" --mode allreduce --sfb --accumulate 2
printf '[net]\nchannels=1\nheight=12\nwidth=12\noptimizer=adam\nmomentum=0.9\n[connected]\noutput=10\n[softmax]\n' \
    > "$TMP/bad.cfg"
expect 2 "bad.cfg:6: momentum= applies only to optimizer=sgd or lars \(optimizer is adam\)" -- \
    "$DTRAIN" train "$TMP/bad.cfg" --dataset synthetic --max-steps 1
printf '[net]\nchannels=1\nheight=12\nwidth=12\noptimizer=adam\nbeta1=0.8\n[connected]\noutput=10\n[softmax]\n' \
    > "$TMP/adam.cfg"
expect 2 "--optimizer sgd: .*adam.cfg sets beta1=, which sgd does not read \(remove it\)" -- \
    "$DTRAIN" train "$TMP/adam.cfg" --dataset synthetic --max-steps 1 --optimizer sgd
printf '[net]\nchannels=1\nheight=12\nwidth=12\noptimizer=rmsprop\n[connected]\noutput=10\n[softmax]\n' \
    > "$TMP/bad2.cfg"
expect 2 "bad2.cfg:5: bad value 'rmsprop' for optimizer" -- "$DTRAIN" train "$TMP/bad2.cfg" --dataset synthetic

echo "test_optimizers: $passes passed, $fails failed"
[ "$fails" = 0 ]

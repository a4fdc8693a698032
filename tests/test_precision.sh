#!/usr/bin/env bash
# --precision / [net] precision=: on every CPU, refuses unknown names and
# CPUs without bf16 (exit 2, naming the instructions); where the CPU has
# bf16, runs it from the command line and the model file, says so (start
# line, log, summary, info, bench),
# resumes across precisions both ways, and runs in allreduce and ps-sync on
# 2 workers. (Numerics: test_bf16 per layer, test_golden against
# torch.autocast.)
source "$(dirname "$0")/clilib.sh" "$1"

# small_net with an 8-channel convolution, which runs in bf16 (a conv of
# fewer than 4 input channels stays fp32).
NET=$TMP/net.cfg
sed '/^\[maxpool\]/i [convolutional]\nfilters=8\nsize=3\npad=1\nactivation=relu\n' \
    "$SRC/tests/data/small_net.cfg" > "$NET"
sed 's/^\[net\]$/[net]\nprecision=bf16/' "$NET" > "$TMP/bf16net.cfg"

# On every CPU: what info says, bad names, and bf16 refused where oneDNN
# finds no bf16 instructions (told to use AVX-512 or AVX2 without them, or
# a CPU that has none), naming what it finds.
expect 0 'precision fp32' -- "$DTRAIN" info "$NET"
expect 0 'precision bf16' -- "$DTRAIN" info "$TMP/bf16net.cfg"
expect 0 '"precision":"bf16"' -- "$DTRAIN" info "$TMP/bf16net.cfg" --json
expect 2 "^dtrain: --precision: unknown precision 'fp16' \(fp32, bf16\)$" -- \
    "$DTRAIN" train "$NET" --dataset synthetic --precision fp16
sed 's/^\[net\]$/[net]\nprecision=half/' "$NET" > "$TMP/half.cfg"
expect 2 "$TMP/half.cfg:4: bad value 'half' for precision: expected one of fp32, bf16" -- "$DTRAIN" train "$TMP/half.cfg" --dataset synthetic
expect 2 '^dtrain: --precision: bf16 needs the AVX512_BF16 or AMX-BF16 instructions, and oneDNN finds only (AVX-512|AVX2) on this CPU \(use fp32\)$' -- \
    env ONEDNN_MAX_CPU_ISA=AVX512_CORE "$DTRAIN" train "$NET" --dataset synthetic --precision bf16
expect 2 "^dtrain: $TMP/bf16net.cfg: \[net\] precision: bf16 needs .* AVX2 on this CPU" -- \
    env ONEDNN_MAX_CPU_ISA=AVX2 "$DTRAIN" train "$TMP/bf16net.cfg" --dataset synthetic
expect 0 'precision bf16' -- env ONEDNN_MAX_CPU_ISA=AVX2 "$DTRAIN" info "$TMP/bf16net.cfg"
expect 0 '"precision":"fp32"' -- env ONEDNN_MAX_CPU_ISA=AVX2 "$DTRAIN" bench "$TMP/bf16net.cfg" --steps 1 \
    --precision fp32

# The rest trains in bf16: on this CPU's own instructions only.
probe=$("$DTRAIN" bench "$SRC/tests/data/small_net.cfg" --steps 1 --precision bf16 2>&1)
if [ $? -eq 2 ] && grep -q 'bf16 needs the AVX512_BF16' <<<"$probe"; then
    echo "test_precision: bf16 training not tested on this CPU: $probe"
    finish
    exit
fi

train_ckpt bf16 1 "$NET" --max-steps 6 --precision bf16 --log "$TMP/bf16.jsonl"
check "summary says bf16" grep -q '"precision":"bf16"' "$TMP/bf16.out"
check "log config says bf16" grep -q '"event":"config".*"precision":"bf16"' "$TMP/bf16.jsonl"
expect 0 ', bf16, 1 thread, mode serial' -- "$DTRAIN" train "$NET" --dataset synthetic --max-steps 1 --threads 1 \
    --precision bf16

# The model file's precision=, overridden by the flag.
expect 0 '"precision":"bf16"' -- "$DTRAIN" bench "$TMP/bf16net.cfg" --steps 2 --threads 1
expect 0 '"precision":"fp32"' -- "$DTRAIN" bench "$TMP/bf16net.cfg" --steps 2 --threads 1 --precision fp32

# Under the sanitizers, the rest (resume, distributed modes) runs code that
# fp32 runs too; the bf16 layers themselves are test_bf16's.
if [ -n "${DT_SANITIZE:-}" ]; then finish; exit; fi

# Checkpoints hold fp32 master weights: bf16 resumes in fp32 and back.
train_ckpt half_bf16 1 "$NET" --max-steps 3 --precision bf16
cp "$TMP/half_bf16.ckpt" "$TMP/start_bf16.ckpt"
train_ckpt to_fp32 1 "$NET" --max-steps 6 --resume "$TMP/start_bf16.ckpt"
check "bf16 -> fp32 resume reaches step 6" grep -q '"steps":6' "$TMP/to_fp32.out"
train_ckpt half_fp32 1 "$NET" --max-steps 3
train_ckpt to_bf16 1 "$NET" --max-steps 6 --resume "$TMP/half_fp32.ckpt" --precision bf16
check "fp32 -> bf16 resume reaches step 6, in bf16" grep -q '"steps":6.*"precision":"bf16"' "$TMP/to_bf16.out"
expect 0 '"test_accuracy"' -- "$DTRAIN" eval "$NET" --weights "$TMP/to_bf16.ckpt" --dataset synthetic --json \
    --precision bf16

# Distributed: allreduce on 2 workers, ps-sync on 2 workers and a server.
# The gradients exchanged are fp32 either way.
train_ckpt ar 2 "$NET" --max-steps 4 --precision bf16 --mode allreduce
check "allreduce bf16 summary" grep -q '"mode":"allreduce".*"precision":"bf16"' "$TMP/ar.out"
train_ckpt ps 3 "$NET" --max-steps 4 --precision bf16 --mode ps-sync
check "ps-sync bf16 summary" grep -q '"mode":"ps-sync".*"precision":"bf16"' "$TMP/ps.out"

finish

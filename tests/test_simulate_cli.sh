#!/usr/bin/env bash
# dtrain simulate and bench --profile-out on the command line: flags and
# units refused with exit 2 and a clear line, profiles written and read back,
# the table and the JSON lines; bench/mpi_link, which measures its link flags
# (two ranks, and three for the fan-in).
source "$(dirname "$0")/clilib.sh" "$1"
M=$SRC/examples/mlp.cfg
S="--reps 2 --threads 1"
[ -n "${DT_SANITIZE:-}" ] && S="--reps 1 --threads 1" # CI's time: a measurement is slow under them

expect 2 "\-\-bandwidth: '10Gb' is not a bandwidth .*Gbps" -- "$DTRAIN" simulate "$M" --bandwidth 10Gb
expect 2 "\-\-bandwidth: 'fast' is not a bandwidth" -- "$DTRAIN" simulate "$M" --bandwidth fast
expect 2 "\-\-bandwidth: '0Gbps' is not a bandwidth" -- "$DTRAIN" simulate "$M" --bandwidth 0Gbps
expect 2 "\-\-latency: '20' is not a latency .*us" -- "$DTRAIN" simulate "$M" --latency 20
expect 2 "\-\-latency: '5 weeks' is not a latency" -- "$DTRAIN" simulate "$M" --latency "5 weeks"
expect 2 "\-\-kernel-rate: .0Gbps. is not a bandwidth" -- "$DTRAIN" simulate "$M" --shared-cores 2 --kernel-rate 0Gbps
expect 2 "\-\-kernel-rate prices .* needs \-\-shared-cores" -- "$DTRAIN" simulate "$M" --kernel-rate 16Gbps
expect 2 "\-\-busy-bandwidth is .* it needs \-\-shared-cores" -- "$DTRAIN" simulate "$M" --busy-bandwidth 1Gbps
expect 2 "\-\-busy-bandwidth: 'fast' is not a bandwidth" -- "$DTRAIN" simulate "$M" --shared-cores 2 --busy-bandwidth fast
expect 2 "\-\-fan-in-share: 2 is out of range \[0, 1\]" -- "$DTRAIN" simulate "$M" --fan-in-share 2
expect 2 "\-\-server-nice: 20 is out of range \[0, 19\]" -- "$DTRAIN" simulate "$M" --server-nice 20
expect 2 "\-\-nodes: '0' is not a node count" -- "$DTRAIN" simulate "$M" --nodes 0,2
expect 2 "\-\-nodes: 'x' is not a node count" -- "$DTRAIN" simulate "$M" --nodes 1,x
expect 2 "\-\-nodes: bad list '1,,2'" -- "$DTRAIN" simulate "$M" --nodes 1,,2
expect 2 "\-\-modes: unknown mode 'ring'" -- "$DTRAIN" simulate "$M" --modes allreduce,ring
expect 2 "\-\-servers: .* out of range" -- "$DTRAIN" simulate "$M" --servers 0
expect 2 "unknown flag '--gpus'" -- "$DTRAIN" simulate "$M" --gpus 8
expect 2 "expected MODEL.cfg or --profile" -- "$DTRAIN" simulate
expect 0 "\-\-shared-cores" -- "$DTRAIN" simulate --help
expect 1 "nope.cfg: cannot open" -- "$DTRAIN" simulate "$TMP/nope.cfg"

# The table: one row per node count and mode, one node is the serial step.
expect 0 "nodes +mode +step ms +img/s +speedup +comm share" -- "$DTRAIN" simulate "$M" $S --nodes 1,4
"$DTRAIN" simulate "$M" $S --nodes 1,2,8 --modes allreduce,ps-sync+sacp --bandwidth 1Gbps --latency 1ms --json \
    > "$TMP/sim.jsonl"
check "simulate --json: one line per prediction" /usr/bin/python3 -c "
import json; rows=[json.loads(l) for l in open('$TMP/sim.jsonl')]
assert [(r['nodes'], r['mode'], r['factors']) for r in rows] == [(n, m, f) for n in (1, 2, 8)
                                                                 for m, f in (('allreduce', 'none'), ('ps-sync', 'sacp'))], rows
assert all(r['event'] == 'simulate' and r['bandwidth_gbps'] == 1 and r['latency_us'] == 1000 for r in rows)
one = [r for r in rows if r['nodes'] == 1]
assert all(r['speedup'] == 1 and r['comm_share'] == 0 and r['mb_sent'] == 0 for r in one), one
assert all(r['comm_share'] > 0 for r in rows if r['nodes'] > 1)"

# bench --profile-out writes a profile that simulate reads (and checks against the model).
# --measure-workers 2: measured with a second worker computing beside it.
expect 0 '"event":"bench"' -- "$DTRAIN" bench "$M" --steps 3 --threads 1 --batch 16 --profile-out "$TMP/p.json" \
    --measure-workers 2
check "profile format" /usr/bin/python3 -c "
import json; p=json.load(open('$TMP/p.json'))
assert p['format'] == 'dtrain-profile' and p['version'] == 3 and p['batch'] == 16 and p['reps'] == 3
assert p['workers'] == 2 and p['straggler'] >= 1
assert p['topk_s'] > 0
assert sum(l['params'] for l in p['layers']) == 407050 and p['layers'][0]['fc_in'] == 784"
expect 0 "compute from the profile at 1 thread .*, 2 workers at once, the slowest" -- \
    "$DTRAIN" simulate --profile "$TMP/p.json" --nodes 2
# With shared cores the compute is measured as the largest job runs it: 2
# workers of 1 thread on 2 cores; a synchronous mode waits for the slowest.
"$DTRAIN" simulate "$M" --nodes 1,2 --modes allreduce,ps-async --threads 1 --shared-cores 2 --reps 3 --batch 16 \
    --json > "$TMP/shared.jsonl"
check "simulate --shared-cores 2 --threads 1: measured with 2 workers, the straggler in allreduce only" \
    /usr/bin/python3 -c "
import json; rows=[json.loads(l) for l in open('$TMP/shared.jsonl')]
assert len(rows) == 4 and all(r['measured_workers'] == 2 for r in rows), rows
assert all(r['straggler'] == 1 for r in rows if r['nodes'] == 1 or r['mode'] == 'ps-async'), rows
assert all(r['straggler'] >= 1 for r in rows), rows"
expect 2 "\\-\\-measure-workers applies to --profile-out" -- "$DTRAIN" bench "$M" --steps 1 --measure-workers 2
expect 2 "\\-\\-measure-workers: 0 is out of range" -- "$DTRAIN" simulate "$M" --measure-workers 0
expect 0 "batch 16 per worker" -- "$DTRAIN" simulate "$M" --profile "$TMP/p.json" --nodes 2
expect 0 "topk:0.01" -- "$DTRAIN" simulate --profile "$TMP/p.json" --nodes 2 --modes allreduce --grad-compression topk:0.01
# MODE+sacp, MODE+sfb: a mode's factors (test_sim checks the arithmetic).
expect 0 "    2  allreduce\+sacp " -- "$DTRAIN" simulate --profile "$TMP/p.json" --nodes 2 --modes allreduce+sacp
"$DTRAIN" simulate --profile "$SRC/docs/profiles/cnn-1t.json" --nodes 2 --modes allreduce --bandwidth 1Gbps --json \
    > "$TMP/ring.jsonl" && "$DTRAIN" simulate --profile "$SRC/docs/profiles/cnn-1t.json" --nodes 2 --modes allreduce+sacp \
    --bandwidth 1Gbps --json > "$TMP/sacp.jsonl"
check "simulate --modes allreduce+sacp: cnn's fc1024 by factors, fewer bytes, a shorter step at 1 Gbit/s" /usr/bin/python3 -c "
import json; r=json.load(open('$TMP/ring.jsonl')); s=json.load(open('$TMP/sacp.jsonl'))
assert (r['factors'], r['fc_sfb'], s['factors'], s['fc_sfb']) == ('none', 0, 'sacp', 1), (r, s)
assert s['mb_sent'] < r['mb_sent'] / 5 and s['step_ms'] < r['step_ms'], (r, s)"
# --server-nice reaches the model (test_sim has the arithmetic): on shared
# cores a server at nice 0 commits cnn's fc1024 beside the compute at half a
# core, at nice 19 (the default) hardly before backward is over.
NICE=(--profile "$SRC/docs/profiles/cnn-1t.json" --nodes 2 --modes ps-sync --shared-cores 2 --busy-bandwidth 5Gbps
      --grad-compression bf16 --json)
"$DTRAIN" simulate "${NICE[@]}" > "$TMP/nice19.jsonl" && "$DTRAIN" simulate "${NICE[@]}" --server-nice 0 \
    > "$TMP/nice0.jsonl"
check "simulate --server-nice 0: the commit beside the compute, a shorter step" /usr/bin/python3 -c "
import json; a=json.load(open('$TMP/nice0.jsonl')); b=json.load(open('$TMP/nice19.jsonl'))
assert a['step_ms'] < b['step_ms'] - 1, (a, b)"
expect 2 "\-\-modes: sfb is an option of a mode, not a mode: write ps-sync\+sfb or allreduce\+sfb" -- \
    "$DTRAIN" simulate "$M" --modes allreduce,sfb
expect 2 "\-\-modes: the simulator does not model ps-hogwild" -- "$DTRAIN" simulate "$M" --modes ps-hogwild
expect 2 "\-\-modes: ps-ssp\+sacp: ps-ssp has no sufficient factors" -- "$DTRAIN" simulate "$M" --modes ps-ssp+sacp
# A version 1 profile (before its top-k rate) still prices everything else.
expect 0 "ps-sync" -- "$DTRAIN" simulate --profile "$SRC/docs/profiles/cnn-1t.json" --nodes 2 --modes ps-sync
expect 2 "the profile has no top-k rate \(version 1\): measure it again" -- "$DTRAIN" simulate \
    --profile "$SRC/docs/profiles/cnn-1t.json" --nodes 2 --modes allreduce --grad-compression topk:0.01
expect 2 "\-\-batch 32: --profile .* was measured at batch 16" -- "$DTRAIN" simulate "$M" --profile "$TMP/p.json" --batch 32
expect 2 "\-\-profile .*p.json has 4 layers, .*cnn.cfg has 10" -- "$DTRAIN" simulate "$SRC/examples/cnn.cfg" --profile "$TMP/p.json"
expect 2 "\-\-threads, --reps and --measure-workers set the measurement" -- "$DTRAIN" simulate \
    --profile "$TMP/p.json" --threads 2
expect 2 "\-\-threads, --reps and --measure-workers set the measurement" -- "$DTRAIN" simulate --profile "$TMP/p.json" \
    --measure-workers 2
expect 1 "missing.json: cannot open" -- "$DTRAIN" simulate --profile "$TMP/missing.json"
printf '{"format":"dtrain-profile","version":1,\n"batch":' > "$TMP/bad.json"
expect 1 "bad.json:2: expected a value" -- "$DTRAIN" simulate --profile "$TMP/bad.json"
expect 1 "--profile-out $TMP/p.json/x.json: cannot create the folder" -- "$DTRAIN" bench "$M" --steps 1 --threads 1 \
    --profile-out "$TMP/p.json/x.json"

# mpi_link measures what the bench scripts pass as --bandwidth/--latency,
# --busy-bandwidth and --kernel-rate: all six lines, every figure positive,
# a compute loss that other load hid said to be unmeasured (a rate of 0
# would price the link's copies at nothing). Not under the
# sanitizers: MPI's start alone is slow there, and no dtrain code is new.
LINK=$(dirname "$DTRAIN")/mpi_link
if [ -z "${DT_SANITIZE:-}" ]; then
    expect 2 "usage: mpirun -np 2[|]3 mpi_link" -- mpirun --oversubscribe -np 1 "$LINK"
    mpirun --oversubscribe --bind-to none -np 2 "$LINK" 1 > "$TMP/link.json" 2>&1
    check "mpi_link measures six links" /usr/bin/python3 -c "
import json; got = {l['link']: l for l in map(json.loads, open('$TMP/link.json'))}
assert sorted(got) == sorted(['allreduce', 'p2p', 'allreduce_busy', 'p2p_busy', 'allreduce_cpu', 'p2p_cpu']), got
assert all(l['bandwidth_gbps'] > 0 for l in got.values() if 'bandwidth_gbps' in l), got
# A compute loss is a rate, or null with the reason when other load hid it (CTest runs tests side by side).
assert all(l['kernel_gbps'] > 0 if l['kernel_gbps'] is not None else l['unmeasured'] for l in got.values()
           if 'kernel_gbps' in l), got
assert all(l['latency_us'] > 0 for l in got.values() if 'latency_us' in l), got" || cat "$TMP/link.json"
    # Three ranks: two pushing into the third at once (--fan-in-share).
    mpirun --oversubscribe --bind-to none -np 3 "$LINK" 2 > "$TMP/fan.json" 2>&1
    check "mpi_link measures a fan-in" /usr/bin/python3 -c "
import json; got = json.loads(open('$TMP/fan.json').read())
assert got['link'] == 'fan_in' and 0.5 <= got['first_share'] <= 1 and got['bandwidth_gbps'] > 0, got" ||
        cat "$TMP/fan.json"
fi

finish

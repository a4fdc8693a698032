#!/usr/bin/env bash
# Across hosts: an emulated cluster of network namespaces (scripts/cluster.sh,
# its own names and subnet so that a user's cluster is left alone), ranks
# started on them by dtrain launch --hosts through the cluster's launch
# agent, gradients over TCP between hosts and shared memory within one. A
# 2-host job (2 ranks on each) in allreduce (auto = hierarchical, ring; and
# hier with one worker per host, ring over uneven hosts) and ps-sync equals
# serial with the global batch (hier with bf16 on the wire within bf16's
# tolerance); a host's link down for 3 s stalls the job, which goes on,
# and with --stall-timeout 1 the stall inspector names the rank across
# it until the job goes on; a host lost for good is dropped and the job
# finishes on the other (--min-workers), as does a job whose host cannot be
# reached at its start; a stop signal the ranks cannot follow ends in a
# bounded time; ps-async and ps-ssp train; the cluster script's own edges. Needs root and network namespaces (else exit 77);
# release build only (the same code as the one-machine tests, CI time).
source "$(dirname "$0")/clilib.sh" "$1"
[ -n "${DT_SANITIZE:-}" ] && { echo "skipped under sanitizers (test_dist covers the code)"; exit 77; }
export DT_CLUSTER=dtt DT_CLUSTER_HOST=t DT_CLUSTER_NET=10.78.0
CL="$SRC/scripts/cluster.sh"
[ "$(id -u)" -eq 0 ] || { echo "skipped: not root"; exit 77; }
ip netns add dtt-probe 2> /dev/null || { echo "skipped: no network namespaces here"; exit 77; }
ip netns del dtt-probe
trap 'bash "$CL" down > /dev/null 2>&1; rm -rf "$TMP"' EXIT
expect 0 "t3 10.78.0.3 namespace dtt-t3 link 1Gbit" -- bash "$CL" up 3 --bandwidth 1gbit
expect 0 "t2 10.78.0.2 .* link 1Gbit" -- bash "$CL" up 2 --bandwidth 1gbit  # idempotent; t3 goes
check "t3 removed" test "$(ip netns list | grep -c '^dtt-t')" -eq 2
expect 2 "up: give the number of hosts" -- bash "$CL" up x
expect 2 "unknown flag '--bw'" -- bash "$CL" up 2 --bw 1
expect 2 "tc cannot shape .* '1 gbit'" -- bash "$CL" shape "1 gbit"
expect 0 "t1 .* link unshaped" -- bash "$CL" shape none
expect 2 "agent: no host 'nohost'" -- bash "$CL" agent nohost true
check "names in /etc/hosts" grep -q "^10.78.0.2 t2 # dtrain-cluster dtt$" /etc/hosts

cp "$SRC/tests/data/small_net.cfg" "$TMP/net.cfg"
AGENT="$CL agent"
hosts() { # name hosts args...: a launch --hosts run whose checkpoint is $TMP/name.ckpt
    local name=$1 h=$2; shift 2
    timeout 300 "$DTRAIN" launch --hosts "$h" --launch-agent "$AGENT" -- train "$TMP/net.cfg" --dataset synthetic \
        --threads 1 --checkpoint "$TMP/$name.ckpt" "$@" > "$TMP/$name.out" 2>&1
    check "$name runs" test $? -eq 0 || tail -5 "$TMP/$name.out"
}
K=25
TOL=2e-5 # as test_dist: summation order only
train_ckpt serial 1 "$TMP/net.cfg" --max-steps $K --batch 16
hosts ar_auto t1:2,t2:2 --max-steps $K --mode allreduce --batch 4  # hier: 2 hosts of 2
hosts ar_hier1 t1:1,t2:1 --max-steps $K --mode allreduce --batch 8 --allreduce-algo hier # windows of one
hosts ar_ring t1:2,t2:2 --max-steps $K --mode allreduce --batch 4 --allreduce-algo ring --fusion-mb 0.01
hosts ar_uneven t1:2,t2:1 --max-steps $K --mode allreduce --batch 4 --allreduce-algo ring
train_ckpt serial12 1 "$TMP/net.cfg" --max-steps $K --batch 12
hosts ps_sync t1:2,t2:2 --max-steps $K --mode ps-sync --servers 2 --batch 8 # 2 workers, 2 servers
train_ckpt serial_ps 1 "$TMP/net.cfg" --max-steps $K --batch 16
hosts ar_hier_bf16 t1:2,t2:2 --max-steps $K --mode allreduce --batch 4 --grad-compression bf16 # hier, ring in bf16
for m in ar_auto ar_hier1 ar_ring; do same serial $m $TOL; done
same serial ar_hier_bf16 1e-2 # test_compression's tolerance
# Per worker each way: (L-1)/L of 7334 floats from the window, and its
# 3667-float shard round the 2-host ring in 2-byte words; sent + received.
check "hier bf16 bytes per step" grep -q '"bytes_per_step":44004' "$TMP/ar_hier_bf16.out"
same serial12 ar_uneven $TOL
same serial_ps ps_sync $TOL
check "the ranks ran on both hosts" grep -q '"workers":4' "$TMP/ar_auto.out"
check "auto chose hier" grep -q "^allreduce: hier, 2 hosts x 2 workers" "$TMP/ar_auto.out"
check "ring when asked" grep -q "^allreduce: 4 fusion buckets (--fusion-mb 0.01), 4 by dtrain's ring" "$TMP/ar_ring.out"
hosts ps_async t1:2,t2:1 --max-steps 40 --mode ps-async --servers 1
hosts ps_ssp t1:2,t2:1 --max-steps 40 --mode ps-ssp --servers 1 --staleness 2
# Link down for D s mid-run (--stall-timeout T): TCP retransmits once it
# is back and the job goes on to the end, the outage a gap in its steps.
# With D > T the stall inspector names, every T s, the rank across the
# dead link (each host's rank cannot hear the other's heartbeats).
# (Rank 0 sleeps 20 ms a step so the run outlasts the outage.)
hosts_link_down() { # D T
    local down=$1 stall=$2 log=$TMP/down$1_$2.jsonl out=$TMP/down$1_$2.out t0=$SECONDS
    timeout 120 "$DTRAIN" launch --hosts t1:1,t2:1 --launch-agent "$AGENT" -- train "$TMP/net.cfg" \
        --dataset synthetic --threads 1 --quiet --max-steps 150 --slow-worker 0:20 --mode allreduce \
        --allreduce-algo ring --stall-timeout "$stall" --log "$log" > "$out" 2>&1 &
    local job=$!
    wait_for "$log" '"step":20,' 60
    ip netns exec dtt-t2 ip link set eth0 down; sleep "$down"; ip netns exec dtt-t2 ip link set eth0 up
    wait $job; local rc=$?
    echo "link down $down s, --stall-timeout $stall: exit $rc after $((SECONDS - t0)) s"
    check "link down $down s, --stall-timeout $stall: the job recovers and ends" test $rc -eq 0 || tail -5 "$out"
    check "link down $down s, --stall-timeout $stall: the outage shows as a gap of $down s or more" /usr/bin/python3 - "$log" "$down" <<'PY'
import json, sys
t = [e["elapsed_s"] for e in map(json.loads, open(sys.argv[1])) if e["event"] == "step"]
gap = max(b - a for a, b in zip(t, t[1:]))
print(f"largest gap between steps {gap:.2f} s over {len(t)} steps")
assert len(t) == 150 and gap >= float(sys.argv[2]) - 0.5
PY
    if [ "$down" -gt "$stall" ]; then
        check "link down $down s, --stall-timeout $stall: rank 0 names rank 1" \
            grep -q "rank 0: gradient allreduce of step [0-9]* has waited $stall s; ranks that have not reached it: 1" \
            "$out"
        check "link down $down s, --stall-timeout $stall: rank 1 names rank 0" \
            grep -q "rank 1: gradient allreduce of step [0-9]* has waited $stall s; ranks that have not reached it: 0" \
            "$out"
    else
        check "link down $down s, --stall-timeout $stall: no stall report" test "$(grep -c 'has waited' "$out")" -eq 0
    fi
}
hosts_link_down 3 10
hosts_link_down 3 1

# A host lost for good: its link goes down mid-run and stays down. Rank 0
# gives up after --stall-abort 3 s; mpirun, which cannot reach the lost
# host's daemon, does not end the job, so the launcher kills it 10 s later,
# drops the host (--min-workers 1) and resumes from the newest checkpoint on
# the host left with the global batch kept: 2 passes of 64 on 1 worker where
# 2 workers took 64 each. A step then sums the same 128 samples' gradients
# in the same order (worker 0's, then worker 1's; pass 1's, then pass 2's),
# so the run is the uninterrupted one bit for bit: the accuracy (within
# 0.005, as the issue asks) and the parameters (exactly).
lost_host() {
    local run=$1; shift
    timeout 300 "$DTRAIN" launch --hosts t1:1,t2:1 --launch-agent "$AGENT" "$@" -- train "$SRC/examples/mlp.cfg" \
        --threads 1 --quiet --epochs 2 --slow-worker 0:10 --mode allreduce --checkpoint-every 100 --stall-timeout 1 \
        --stall-abort 3 --checkpoint-dir "$TMP/$run" --log "$TMP/$run.jsonl" > "$TMP/$run.out" 2>&1
}
accuracy() { sed -n 's/.*"event":"summary","test_accuracy":\([0-9.]*\).*/\1/p' "$TMP/$1.out"; }
lost_host straight
check "the uninterrupted run ends" test $? -eq 0 || tail -5 "$TMP/straight.out"
lost_host lost --max-restarts 2 --min-workers 1 &
job=$!
wait_for "$TMP/lost.jsonl" '"step":300,' 120
ip netns exec dtt-t2 ip link set eth0 down
t_fault=$(date +%s.%N)
wait $job; rc=$?
ip netns exec dtt-t2 ip link set eth0 up
echo "lost host: exit $rc; accuracy $(accuracy lost) (uninterrupted $(accuracy straight))"
check "lost host: the run finishes on the host left" test $rc -eq 0 || tail -5 "$TMP/lost.out"
check "lost host: the launcher dropped t2" grep -q "dropping host t2 (1 worker left); resuming from .*step-300.ckpt" \
    "$TMP/lost.out"
check "lost host: the restart is logged with the host" grep -q '"event":"restart".*"stalled":true.*"dropped_host":"t2"' \
    "$TMP/lost.jsonl"
check "lost host: the global batch kept" grep -q '"workers":1,"global_batch":128' "$TMP/lost.out"
check "lost host: the uninterrupted run's accuracy" /usr/bin/python3 -c \
    "import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 0.005)" "$(accuracy lost)" "$(accuracy straight)"
check "lost host: its parameters" /usr/bin/python3 "$SRC/tests/ckpt_diff.py" "$(readlink -f "$TMP/lost/latest")" \
    "$(readlink -f "$TMP/straight/latest")" 0
/usr/bin/python3 - "$TMP/lost.jsonl" "$t_fault" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
restart = next(i for i, e in enumerate(events) if e["event"] == "restart")
first = next(e for e in events[restart:] if e["event"] == "step")
print(f"lost host: first step after the restart: {first['step']} (the fault at step ~300)")
PY

# A host that cannot be reached when the job starts: Open MPI cannot start
# its daemon, and the restart runs on the other host.
ip netns exec dtt-t2 ip link set eth0 down
expect 0 "restart 1 of 1: the job could not be started .*dropping host t2 \(1 worker left\)" -- "$DTRAIN" launch \
    --hosts t1:1,t2:1 --launch-agent "$AGENT" --max-restarts 1 --min-workers 1 -- train "$TMP/net.cfg" \
    --dataset synthetic --threads 1 --quiet --max-steps 5 --mode allreduce --checkpoint-dir "$TMP/nostart"
expect 1 "host t2 failed, and without it 1 worker would be left \(--min-workers 2\)" -- "$DTRAIN" launch \
    --hosts t1:1,t2:1 --launch-agent "$AGENT" --max-restarts 1 --min-workers 2 -- train "$TMP/net.cfg" \
    --dataset synthetic --threads 1 --quiet --max-steps 5 --mode allreduce --checkpoint-dir "$TMP/nostart2"

# A stop signal the ranks cannot follow (rank 0 waits for rank 1 across the
# dead link; --stall-abort 0 waits for ever): the launcher kills mpirun and
# every rank after --stop-timeout.
ip netns exec dtt-t2 ip link set eth0 up
"$DTRAIN" launch --hosts t1:1,t2:1 --launch-agent "$AGENT" --stop-timeout 3 -- train "$TMP/net.cfg" --dataset synthetic \
    --threads 1 --quiet --max-steps 100000 --mode allreduce --stall-abort 0 --log "$TMP/stop.jsonl" > "$TMP/stop.out" 2>&1 &
job=$!
wait_for "$TMP/stop.jsonl" '"step":20,' 60
ip netns exec dtt-t2 ip link set eth0 down
sleep 1
kill -TERM $job
t0=$SECONDS
timeout 30 tail --pid=$job -f /dev/null
wait $job; rc=$?
ip netns exec dtt-t2 ip link set eth0 up
echo "stop with a dead link: exit $rc after $((SECONDS - t0)) s"
check "stop with a dead link: exit 137 (mpirun killed)" test $rc -eq 137
check "stop with a dead link: the launcher ends the job within 10 s" test $((SECONDS - t0)) -le 10
check "stop with a dead link: it says why" grep -q "did not stop within --stop-timeout; killing mpirun and every rank" \
    "$TMP/stop.out"
sleep 0.5
check "stop with a dead link: no process of the job is left" test -z "$(job_pids "$TMP/stop.jsonl")"
expect 2 "hier needs the same number of workers on every host" -- "$DTRAIN" launch --hosts t1:2,t2:1 \
    --launch-agent "$AGENT" -- train "$TMP/net.cfg" --dataset synthetic --mode allreduce --allreduce-algo hier
expect 2 "shm needs every worker on one host \(here 2 hosts\)" -- "$DTRAIN" launch --hosts t1:1,t2:1 \
    --launch-agent "$AGENT" -- train "$TMP/net.cfg" --dataset synthetic --mode allreduce --allreduce-algo shm
expect 2 "more ranks than --hosts has slots" -- "$DTRAIN" launch -n 5 --hosts t1:2,t2:2 -- train "$TMP/net.cfg"
finish

#!/usr/bin/env bash
# How long a fault takes to end a job, and to restart it: a worker frozen
# (SIGSTOP) in allreduce on this machine, and a host's link taken down for
# good between two emulated hosts (scripts/cluster.sh, as root) under
# `dtrain launch --max-restarts 1 --min-workers 1`. Prints, per case, the
# seconds from the fault to the launcher's exit (frozen) or to the restarted
# run's first step (link), with --stall-timeout 20 --stall-abort S, or with
# train's defaults (--stall-timeout 60, --stall-abort 10 x that).
#   bash bench/fault_times.sh [S|default] [frozen|link|both]
set -u
S=${1:-20}
CASES=${2:-both}
cd "$(dirname "$0")/.."
DT=$PWD/build/dtrain
ABORT=(--stall-timeout 20 --stall-abort "$S")
[ "$S" = default ] && ABORT=() # train's defaults: --stall-timeout 60, --stall-abort 600
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
wait_for() { for _ in $(seq 1 $(($3 * 10))); do grep -qE "$2" "$1" 2> /dev/null && return 0; sleep 0.1; done; return 1; }
RUN=(train examples/mlp.cfg --dataset synthetic --threads 1 --quiet --epochs 100000 --no-prefetch --mode allreduce
     "${ABORT[@]}")

if [ "$CASES" != link ]; then
    "$DT" launch -n 2 -- "${RUN[@]}" --log "$TMP/frozen.jsonl" > "$TMP/frozen.out" 2>&1 &
    job=$!
    wait_for "$TMP/frozen.jsonl" '"event":"step"' 60
    for p in $(pgrep -f "dtrain train .*$TMP/frozen.jsonl"); do
        tr '\0' '\n' < /proc/$p/environ | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$p
    done
    kill -STOP "$victim"
    t0=$(date +%s.%N)
    wait $job
    rc=$?
    echo "frozen worker, --stall-abort $S: exit $rc, $(echo "$(date +%s.%N) - $t0" | bc) s from SIGSTOP to the launcher's exit"
fi

if [ "$CASES" != frozen ]; then
    export DT_CLUSTER=dtf DT_CLUSTER_HOST=f DT_CLUSTER_NET=10.76.0
    bash scripts/cluster.sh up 2 > /dev/null || exit 1
    trap 'rm -rf "$TMP"; bash scripts/cluster.sh down > /dev/null 2>&1' EXIT
    "$DT" launch --hosts f1:1,f2:1 --launch-agent "$PWD/scripts/cluster.sh agent" --max-restarts 1 --min-workers 1 -- \
        "${RUN[@]}" --max-steps 3000 --slow-worker 0:10 --checkpoint-every 200 --checkpoint-dir "$TMP/ck" \
        --log "$TMP/link.jsonl" > "$TMP/link.out" 2>&1 &
    job=$!
    wait_for "$TMP/link.jsonl" '"step":500,' 120
    ip netns exec dtf-f2 ip link set eth0 down
    t0=$(date +%s.%N)
    # a rank gives up (--stall-abort), or Open MPI loses the host's daemon first
    wait_for "$TMP/link.out" "giving up after|ORTE has lost communication" 3600
    t1=$(date +%s.%N)
    how=$(grep -q "giving up after" "$TMP/link.out" && echo "a rank gave up" || echo "Open MPI lost the host's daemon")
    wait_for "$TMP/link.out" "dtrain launch: restart 1" 3600
    t2=$(date +%s.%N)
    # the restarted run's first step: the first step record after the restart record
    until python3 -c "
import json,sys
ev=[json.loads(l) for l in open('$TMP/link.jsonl') if l.strip()]
r=[i for i,e in enumerate(ev) if e['event']=='restart']
sys.exit(0 if r and any(e['event']=='step' for e in ev[r[0]:]) else 1)" 2> /dev/null; do sleep 0.05; done
    t3=$(date +%s.%N)
    wait $job
    rc=$?
    echo "link down, --stall-abort $S: $how after $(echo "$t1 - $t0" | bc) s, the job ended and the" \
         "restart began after $(echo "$t2 - $t0" | bc) s, its first step after $(echo "$t3 - $t0" | bc) s; exit $rc"
fi

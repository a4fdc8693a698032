#!/usr/bin/env bash
# make run's job (cnn, 1 server + 2 workers, ps-sync, batch 32, 2 epochs) on
# Fashion-MNIST, straight and under `dtrain launch --max-restarts 5` with a
# random rank SIGKILLed three times (each after its attempt's first
# checkpoint, at a random moment): final accuracy of both, the steps and
# seconds each failure lost, wall times.
#   bash bench/restarts.sh [EVERY]          on this machine
#   bash bench/restarts.sh [EVERY] hosts    across 2 emulated hosts (as root:
#       scripts/cluster.sh up 2 --bandwidth 1gbit; the server and worker 0 on
#       h1, worker 1 on h2; the cluster stays up: scripts/cluster.sh down)
set -uo pipefail
cd "$(dirname "$0")/.."
EVERY=${1:-100}
WHERE=(-n 3)
if [ "${2:-}" = hosts ]; then
    bash scripts/cluster.sh up 2 --bandwidth 1gbit > /dev/null || exit 1
    WHERE=(--hosts h1:2,h2:1 --launch-agent "$PWD/scripts/cluster.sh agent")
fi
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
R=(train examples/cnn.cfg --mode ps-sync --servers 1 --batch 32 --epochs 2 --quiet --checkpoint-every "$EVERY")
t0=$(date +%s.%N)
build/dtrain launch "${WHERE[@]}" -- "${R[@]}" --checkpoint-dir "$D/u" --log "$D/u.jsonl" > "$D/u.out" 2>&1
t1=$(date +%s.%N)
build/dtrain launch "${WHERE[@]}" --max-restarts 5 -- "${R[@]}" --checkpoint-dir "$D/r" --log "$D/r.jsonl" \
    > "$D/r.out" 2>&1 &
job=$!
for k in 1 2 3; do
    # Once this attempt has written a checkpoint, at a random moment in the
    # next checkpoint interval or so.
    for _ in $(seq 1 3000); do
        [ "$(sed -n '/"event":"config"/h; /"event":"config"/!H; ${x;p}' "$D/r.jsonl" 2>/dev/null |
            grep -c '"event":"checkpoint"')" -gt 0 ] && break
        sleep 0.2
    done
    sleep $((2 + RANDOM % 15))
    pids=($(pgrep -f "^[^ ]*dtrain train .*$D/r.jsonl"))
    [ ${#pids[@]} -gt 0 ] && kill -9 "${pids[$((RANDOM % ${#pids[@]}))]}"
    for _ in $(seq 1 300); do [ "$(grep -c '"event":"restart"' "$D/r.jsonl")" -ge $k ] && break; sleep 0.2; done
done
wait $job; rc=$?
t2=$(date +%s.%N)
acc() { sed -n 's/.*"event":"summary","test_accuracy":\([0-9.]*\).*/\1/p' "$1" | tail -n1; }
echo "uninterrupted: test accuracy $(acc "$D/u.out"), wall $(printf %.1f "$(echo "$t1 - $t0" | bc)") s"
echo "3 kills, --max-restarts 5 (exit $rc): test accuracy $(acc "$D/r.out"), wall $(printf %.1f "$(echo "$t2 - $t1" | bc)") s"
grep '"event":"restart"' "$D/r.jsonl"
grep 'restart' "$D/r.out"
/usr/bin/python3 tests/ckpt_diff.py "$D/u/latest" "$D/r/latest" 0 && echo "final parameters: bit for bit equal"

#!/usr/bin/env bash
# The README says what is true: every command of its ```sh blocks runs and
# exits 0, in order, in a folder where the files it names exist (training
# shortened with --max-steps; the images, the 3-class head and the
# checkpoints the README assumes are made first), and its flag tables name
# exactly the flags `dtrain train --help` and `dtrain eval --help` list.
# What is not run is said: `make run`/`make test` (they are this suite and
# CI), `make install` (test_api.sh installs), and the minutes-long engine benchmark. Release build only (CI time).
source "$(dirname "$0")/clilib.sh" "$1"
[ -n "${DT_SANITIZE:-}" ] && { echo "skipped under sanitizers (the same commands run in the release build)"; exit 77; }
README=$SRC/README.md
W=$TMP/work
mkdir -p "$W/build"
ln -s "$(readlink -f "$DTRAIN")" "$W/build/dtrain"
for d in examples scripts bench tests; do ln -s "$SRC/$d" "$W/$d"; done

# The files the README's commands take for granted.
make_images tree "$W/photos" dog,fox,wolf 70 28 --gray
sed 's/^output=10$/output=3/' "$SRC/examples/cnn.cfg" > "$W/head3.cfg"
cp "$W/head3.cfg" "$W/my.cfg"
echo "localhost slots=4" > "$W/hosts"
(cd "$W" && build/dtrain train examples/cnn_bn.cfg --max-steps 2 --quiet --checkpoint cnn_bn.ckpt > /dev/null &&
    build/dtrain train examples/resnet20_fm.cfg --max-steps 1 --batch 8 --quiet --checkpoint r20.ckpt > /dev/null) ||
    check "fixtures" false
# The emulated cluster the README's host examples use (h1, h2), under names
# of its own so that a user's cluster is left alone.
export DT_CLUSTER=dtr DT_CLUSTER_HOST=h DT_CLUSTER_NET=10.80.0
cluster=0
[ "$(id -u)" -eq 0 ] && ip netns add dtr-probe 2> /dev/null && ip netns del dtr-probe && cluster=1
trap 'bash "$SRC/scripts/cluster.sh" down > /dev/null 2>&1; rm -rf "$TMP"' EXIT
HAS_BF16=$(grep -qw -E 'avx512_bf16|amx_bf16' /proc/cpuinfo && echo 1 || echo 0)

# Each command of the ```sh blocks, continuations joined, output lines and
# comments dropped, one per line of $TMP/commands.
/usr/bin/python3 - "$README" > "$TMP/commands" <<'PY'
import re, sys
lines, block, cmds = open(sys.argv[1]).read().split("\n"), None, []
for line in lines:
    if line.startswith("```"):
        block = [] if line == "```sh" and block is None else None
        continue
    if block is None:
        continue
    if cmds and cmds[-1].endswith("\\"):
        cmds[-1] = cmds[-1][:-1] + " " + line.strip()
    elif re.match(r"(build/|scripts/|bench/|/usr/bin/python3 |mpirun |make |find |printf )", line):
        cmds.append(line)
for c in cmds:
    print(re.sub(r"\s+#\s.*$", "", c).strip())
PY
check "the README has commands" test "$(wc -l < "$TMP/commands")" -ge 30

ran=0
while IFS= read -r cmd; do
    case $cmd in
    "make run"* | "make test"*) echo "not run here: $cmd (the suite and CI run it)"; continue ;;
    "make install"*) echo "not run here: $cmd (tests/test_api.sh installs into a prefix and builds against it)"; continue ;;
    bench/bench_engine.py*) echo "not run here: $cmd (minutes of benchmark; docs/PERFORMANCE.md)"; continue ;;
    *cluster.sh*|*--hosts*) [ $cluster = 1 ] || { echo "not run here: $cmd (needs root and namespaces)"; continue; } ;;
    esac
    run=$cmd
    # Training in a few steps: train, sweep and launch ... train|sweep.
    if [[ $cmd =~ (dtrain (launch .*-- )?(train|sweep)) ]] && [[ $cmd != *--max-steps* ]]; then
        steps=3
        [[ $cmd == *"--resume"* ]] && steps=6
        run="$cmd --max-steps $steps"
    fi
    out=$(cd "$W" && timeout 300 bash -c "$run" 2>&1 < /dev/null); rc=$?
    ran=$((ran + 1))
    if [ $rc -ne 0 ] && [[ $cmd == *"--precision bf16"* ]] && [ "$HAS_BF16" = 0 ] &&
        grep -q "bf16" <<< "$out"; then
        echo "refused on this CPU, as documented: $cmd"
        continue
    fi
    check "README: $cmd (exit $rc)" test $rc -eq 0 || tail -5 <<< "$out"
done < "$TMP/commands"
echo "ran $ran commands of the README"

# Flag tables against --help: the README's tables name only flags that
# exist, and every flag of train's own list (not its --KEY section) is in the
# train table.
help_flags() { "$DTRAIN" "$1" --help | sed -n '/^  --KEY/q; s/^  \(--[a-z0-9-]*\).*/\1/p' | sort -u; }
table_flags() { # the table after the line matching $1
    awk -v start="$1" 'index($0, start) {on = 1; next} on && /^\|/ {print; seen = 1; next} on && seen {exit}' "$README" |
        grep -v '^|---' |
        sed 's/|[^|]*|$//' | grep -o -- '--[a-z0-9-]*' | sort -u
}
help_flags train > "$TMP/train_help"
table_flags '`dtrain train MODEL.cfg` flags' > "$TMP/train_table"
check "every train flag of --help is in the README's table: $(comm -23 "$TMP/train_help" "$TMP/train_table" | tr '\n' ' ')" \
    test -z "$(comm -23 "$TMP/train_help" "$TMP/train_table")"
"$DTRAIN" train --help | grep -o -- '--[a-z0-9-]*' | sort -u > "$TMP/train_all"
check "every flag of the README's train table is a train flag: $(comm -13 "$TMP/train_all" "$TMP/train_table" | tr '\n' ' ')" \
    test -z "$(comm -13 "$TMP/train_all" "$TMP/train_table")"
"$DTRAIN" eval --help | grep -o -- '--[a-z0-9-]*' | sort -u > "$TMP/eval_all"
table_flags '| `eval` flag |' > "$TMP/eval_table"
check "every flag of the README's eval table is an eval flag: $(comm -13 "$TMP/eval_all" "$TMP/eval_table" | tr '\n' ' ')" \
    test -z "$(comm -13 "$TMP/eval_all" "$TMP/eval_table")"
finish

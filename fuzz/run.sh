#!/usr/bin/env bash
# Runs each libFuzzer harness for a bounded time and summarises the runs.
#   fuzz/run.sh BUILD_DIR SECONDS HARNESS...     (`make fuzz` calls it)
# Each harness starts from its seeds (fuzz/corpus/H) and past crashes
# (fuzz/regress/H), with the dictionary fuzz/H.dict if there is one. New
# inputs go to BUILD_DIR/fuzz-work/H (kept between runs, never into the
# source tree), crash inputs to BUILD_DIR/fuzz-crashes/H/. Exit status 1 if
# any harness crashed.
set -u
build=${1:?build dir}; seconds=${2:?seconds}; shift 2
src=$(cd "$(dirname "$0")" && pwd)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
summary=() crashed=0
for h in "$@"; do
    work=$build/fuzz-work/$h crashes=$build/fuzz-crashes/$h log=$build/fuzz-$h.log
    mkdir -p "$work" "$crashes"
    before=$(ls "$crashes" | wc -l)
    # -timeout: an input running 10 s is a hang; -rss_limit_mb: libFuzzer's
    # default, stated; the harnesses keep far below it.
    seeds=("$src/corpus/$h") opts=()
    [ -d "$src/regress/$h" ] && seeds+=("$src/regress/$h")
    [ -f "$src/$h.dict" ] && opts+=(-dict="$src/$h.dict")
    "$build/fuzz/fuzz_$h" "$work" "${seeds[@]}" "${opts[@]}" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$crashes/" > "$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
    time=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
    new=$(( $(ls "$crashes" | wc -l) - before ))
    if [ $rc -ne 0 ]; then
        crashed=1
        echo "fuzz_$h: crashed (exit $rc), input in $crashes, log $log:"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*fuzz invariant|unclean failure)' "$log" | head -5
    fi
    summary+=("$(printf '%-16s %10s %8s %8s %6s %8s %7s' "fuzz_$h" "${execs:-?}" \
        "${time:-${seconds}+}" "${rate:-?}" "${cov:-?}" "${rss:-?}" "$new")")
done
printf '%-16s %10s %8s %8s %6s %8s %7s\n' harness execs seconds exec/s cov rss_mb crashes
printf '%s\n' "${summary[@]}"
exit $crashed

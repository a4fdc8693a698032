#!/usr/bin/env python3
"""Checks a dtrain --timeline file (tests/test_timeline.sh).

usage: timeline_check.py FILE --steps N|any --layers L --workers 0,1 [--servers 0] [--comm]

Asserts: valid JSON in the traceEvents form; exactly the given ranks
(pids), each with a process name, every track with a thread name; complete
events with non-negative times; events on one track nested or disjoint;
on every worker, N step spans (any: at least one), each holding one
forward span per layer (0..L-1) and one backward span per layer below the
softmax (0..L-2) on the trainer track; with --comm, communication spans
with a byte count inside the steps; on every server, one receive span per
worker step, and apply and reply spans.
Exits non-zero with the first failed assertion."""
import argparse
import collections
import json
import re
import sys

CATS = {"step", "forward", "backward", "update", "comm", "wait", "data", "eval", "checkpoint"}


def ns(x):
    return round(x * 1000)


def check_nesting(spans, where):
    """Spans of one track, as (start, end, name) in ns: nested or disjoint."""
    stack = []
    for start, end, name in sorted(spans, key=lambda s: (s[0], -s[1])):
        while stack and stack[-1][1] <= start:
            stack.pop()
        if stack:
            assert end <= stack[-1][1], f"{where}: '{name}' [{start}, {end}] overlaps '{stack[-1][2]}' " \
                                        f"[{stack[-1][0]}, {stack[-1][1]}] without nesting"
        stack.append((start, end, name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--steps", required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--workers", required=True)
    ap.add_argument("--servers", default="")
    ap.add_argument("--comm", action="store_true")
    a = ap.parse_args()
    workers = [int(p) for p in a.workers.split(",")]
    servers = [int(p) for p in a.servers.split(",") if p]

    events = json.load(open(a.file))["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    assert all(e["ph"] in ("X", "M") for e in events), "only complete and metadata events"
    assert sorted(procs) == sorted(workers + servers), f"process names for {sorted(procs)}"
    for p in workers:
        assert re.fullmatch(rf"rank {p} \(worker \d+\)", procs[p]), procs[p]
    for p in servers:
        assert procs[p] == f"rank {p} server", procs[p]
    assert {e["pid"] for e in spans} == set(workers + servers), "events for every rank"

    tracks = collections.defaultdict(list)
    for e in spans:
        assert e["cat"] in CATS, e
        assert e["dur"] >= 0 and e["ts"] >= 0, e
        assert (e["pid"], e["tid"]) in threads, f"no thread name for {e['pid']}/{e['tid']}"
        tracks[e["pid"], e["tid"]].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]))
    for (pid, tid), ss in tracks.items():
        check_nesting(ss, f"rank {pid} track {tid}")

    worker_steps = 0
    for p in workers:
        main_track = [e for e in spans if e["pid"] == p and e["tid"] == 0]
        steps = [e for e in main_track if e["cat"] == "step"]
        if a.steps == "any":
            assert steps, f"rank {p}: no steps"
        else:
            assert len(steps) == int(a.steps), f"rank {p}: {len(steps)} steps, want {a.steps}"
        worker_steps += len(steps)
        for st in steps:
            t0, t1 = ns(st["ts"]), ns(st["ts"]) + ns(st["dur"])
            inside = [e for e in main_track if t0 <= ns(e["ts"]) and ns(e["ts"]) + ns(e["dur"]) <= t1]
            for cat, prefix, n in (("forward", "fwd", a.layers), ("backward", "bwd", a.layers - 1)):
                idx = sorted(int(e["name"].split()[1]) for e in inside if e["cat"] == cat)
                assert idx == list(range(n)), f"rank {p} step {st['args']['step']}: {prefix} layers {idx}"
                assert all(e["name"].startswith(prefix + " ") for e in inside if e["cat"] == cat)
        if a.comm:
            comm = [e for e in spans if e["pid"] == p and e["cat"] == "comm"]
            assert len(comm) >= len(steps), f"rank {p}: {len(comm)} communication spans for {len(steps)} steps"
            assert all(e["args"]["bytes"] > 0 for e in comm), f"rank {p}: byte counts"
            bounds = [(ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])) for s in steps]
            assert all(any(b0 <= ns(e["ts"]) and ns(e["ts"]) + ns(e["dur"]) <= b1 for b0, b1 in bounds)
                       for e in comm), f"rank {p}: communication outside the steps"
    for p in servers:
        mine = [e for e in spans if e["pid"] == p]
        receives = sum(1 for e in mine if e["name"] == "receive gradients")
        assert receives == worker_steps, f"server rank {p}: {receives} gradients received, {worker_steps} sent"
        assert sum(1 for e in mine if e["name"] == "reply") >= worker_steps, f"server rank {p}: replies"
        assert any(e["cat"] == "update" for e in mine), f"server rank {p}: no update spans"
    print(f"{a.file}: {len(spans)} spans on {len(tracks)} tracks of {len(procs)} ranks: ok")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"timeline_check: {e}", file=sys.stderr)
        sys.exit(1)

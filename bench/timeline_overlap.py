#!/usr/bin/env python3
"""How much communication a dtrain run hid behind backprop, from its timeline.

usage: bench/timeline_overlap.py FILE.json [MORE.json ...] [--skip N] [--json]

Reads a `dtrain train ... --timeline FILE.json` file (or the per-rank parts
FILE.json.rank<R> a killed run leaves behind, several at once) and prints,
for each worker rank, over its training steps but the first N (--skip,
default 1: the first step also builds oneDNN's primitives and the caches):
  backward      total time of the backward passes (union of the "bwd" spans)
  comm          total time communication was in flight (union of the "comm"
                spans: allreduce buckets, ps push and pull), inside steps
  overlapped    share of comm that ran while backward was computing:
                |comm ∩ backward| / |comm|
  exposed/step  communication not overlapped with backward, per step
  wait/step     time the trainer thread sat blocked on communication, per step
Start-up broadcasts and evaluation pulls fall outside the steps and are not
counted. --json prints one JSON object per worker instead of the table."""
import argparse
import json
import sys


def load(path):
    """Events of a merged file ({"traceEvents": [...]}) or of a part
    ("[" + one event per line with a trailing comma, maybe cut short)."""
    text = open(path).read()
    if text.lstrip().startswith("["):
        lines = text.split("\n")
        if not text.endswith("\n"):
            lines = lines[:-1]  # the line a kill cut short
        body = ",".join(l.rstrip(",") for l in lines[1:] if l.strip())
        return json.loads("[" + body + "]")
    return json.loads(text)["traceEvents"]


def union(spans):
    """Sorted disjoint intervals covering spans [(start, end)]."""
    out = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def intersect(a, b):
    """Intersection of two sorted disjoint interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append([s, e])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def total(intervals):
    return sum(e - s for s, e in intervals)


def analyse(events, skip):
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    rows = []
    for pid in sorted(p for p, n in names.items() if "worker" in n):
        mine = [e for e in events if e["ph"] == "X" and e["pid"] == pid]

        def spans(cat):
            return union((e["ts"], e["ts"] + e["dur"]) for e in mine if e["cat"] == cat)

        kept = sorted((e["ts"], e["ts"] + e["dur"]) for e in mine if e["cat"] == "step")
        kept = kept[skip:] if len(kept) > skip else kept
        steps, nsteps = union(kept), len(kept)
        backward = intersect(spans("backward"), steps)
        comm = intersect(spans("comm"), steps)
        overlapped = total(intersect(comm, backward))
        wait = total(intersect(spans("wait"), steps))
        per = max(nsteps, 1)
        rows.append({
            "rank": pid, "process": names[pid], "steps": nsteps,
            "step_ms": total(steps) / 1e3 / per,
            "backward_ms": total(backward) / 1e3,
            "comm_ms": total(comm) / 1e3,
            "overlap_share": overlapped / total(comm) if comm else 0.0,
            "exposed_comm_ms_per_step": (total(comm) - overlapped) / 1e3 / per,
            "wait_ms_per_step": wait / 1e3 / per,
        })
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--skip", type=int, default=1, help="leave out each worker's first N steps (default 1)")
    ap.add_argument("--json", action="store_true", help="one JSON object per worker")
    a = ap.parse_args()
    events = [e for f in a.files for e in load(f)]
    rows = analyse(events, max(a.skip, 0))
    if not rows:
        sys.exit(f"{' '.join(a.files)}: no worker ranks in the timeline")
    if a.json:
        for r in rows:
            print(json.dumps(r))
        return
    print(f"{'rank':<22} {'steps':>5} {'step ms':>8} {'backward ms':>11} {'comm ms':>9} {'overlapped':>10} "
          f"{'exposed ms/step':>15} {'wait ms/step':>12}")
    for r in rows:
        print(f"{r['process']:<22} {r['steps']:>5} {r['step_ms']:>8.2f} {r['backward_ms']:>11.1f} "
              f"{r['comm_ms']:>9.1f} {100 * r['overlap_share']:>9.1f}% {r['exposed_comm_ms_per_step']:>15.3f} "
              f"{r['wait_ms_per_step']:>12.3f}")


if __name__ == "__main__":
    main()

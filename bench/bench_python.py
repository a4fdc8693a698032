#!/usr/bin/python3
"""Python overhead: training img/s and peak RSS of `fit` from numpy arrays
(the package, tests/python's Fashion-MNIST reader) against `dtrain train`
on the same model, steps and threads, alternately, ROUNDS rounds; prints
medians and the ratio fit/CLI. img/s is the run summary's images_per_sec
(the trainer's own clock, same in both); cpu s is the process's user +
system time (loading the data included); RSS is /usr/bin/time -v's maximum
resident set size of the whole process (the interpreter, numpy and the
arrays in Python's case; "arrays RSS" is that of the interpreter with the
arrays and the model loaded, without a fit).
usage: bench/bench_python.py [--rounds 3] [--threads 2] [--models mlp:1500,cnn:150]"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.environ.get("DT_BUILD_DIR", os.path.join(SRC, "build"))
FIT = r'''
import json, sys, dtrain
from conftest import fashion_mnist
x, y, xt, yt = fashion_mnist()
m = dtrain.Model(sys.argv[1])
h = m.fit(x, y, validation_data=(xt, yt), max_steps=int(sys.argv[2]), threads=int(sys.argv[3]), verbose=False)
print(json.dumps(h.summary))
'''
# The interpreter, numpy and the arrays alone: what fit adds to it is the library's.
ARRAYS = r'''
import json, sys, dtrain
from conftest import fashion_mnist
x, y, xt, yt = fashion_mnist()
m = dtrain.Model(sys.argv[1])
print(json.dumps({"event": "summary", "images_per_sec": 0}))
'''


def timed(cmd, env=None):
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    summary = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{") and '"summary"' in l][-1]
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) / 1024
    cpu = sum(float(re.search(rf"{k} time \(seconds\): ([\d.]+)", p.stderr).group(1)) for k in ("User", "System"))
    return summary["images_per_sec"], rss, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="mlp:1500,cnn:150")
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python") + os.pathsep + os.path.join(SRC, "tests", "python"),
               DTRAIN_LIBRARY=os.path.join(BUILD, "libdtrain.so"), PYTHONDONTWRITEBYTECODE="1")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"CPU: {cpu}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at start; "
          f"threads {a.threads}, {a.rounds} rounds (medians)")
    print(f"{'model':6} {'steps':>6} {'CLI img/s':>10} {'fit img/s':>10} {'fit/CLI':>8} {'CLI cpu s':>10} "
          f"{'fit cpu s':>10} {'CLI RSS MB':>11} {'fit RSS MB':>11} {'arrays RSS':>11}")
    for spec in a.models.split(","):
        name, steps = spec.split(":")
        model = os.path.join(SRC, "examples", name + ".cfg")
        c_ips, f_ips, c_rss, f_rss, c_cpu, f_cpu = [], [], [], [], [], []
        for _ in range(a.rounds):
            ips, rss, cpu = timed([os.path.join(BUILD, "dtrain"), "train", model, "--dataset", "fashion-mnist",
                                   "--max-steps", steps, "--threads", str(a.threads), "--quiet"])
            c_ips.append(ips), c_rss.append(rss), c_cpu.append(cpu)
            ips, rss, cpu = timed(["/usr/bin/python3", "-c", FIT, model, steps, str(a.threads)], env)
            f_ips.append(ips), f_rss.append(rss), f_cpu.append(cpu)
        base = timed(["/usr/bin/python3", "-c", ARRAYS, model], env)[1]
        med = statistics.median
        c, f = med(c_ips), med(f_ips)
        print(f"{name:6} {steps:>6} {c:10.1f} {f:10.1f} {f / c:8.3f} {med(c_cpu):10.2f} {med(f_cpu):10.2f} "
              f"{med(c_rss):11.1f} {med(f_rss):11.1f} {base:11.1f}   "
              f"(img/s CLI {['%.0f' % v for v in c_ips]}, fit {['%.0f' % v for v in f_ips]})", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()

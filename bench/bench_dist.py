#!/usr/bin/python3
"""Distributed throughput, side by side in one run: dtrain serial (1 thread),
two serial trainers at once (no communication: what two ranks on this
machine can compute at best; their img/s summed), allreduce (2 ranks x 1
thread; the default algorithm, shared memory here, and the ring for
comparison), ps-sync (1 server + 2 workers), each of the two again with --sacp (sufficient factors where they move fewer bytes), and PyTorch
DDP with gloo (2 processes x 1 thread, shared/reference/torch_ddp.py), for
cnn and cifar at 64 images per worker. Alternates the runs for ROUNDS
rounds and prints medians, the ratios against DDP, and the share of the
step spent waiting for communication that compute did not hide. Like
torch_ddp.py, the first 5 steps (oneDNN builds its kernels there) are left
out of the timing; dtrain's numbers come from worker 0's --log.

usage: bench/bench_dist.py [--rounds 3] [--models cnn,cifar] [--steps 60]
                           [--only 'allreduce 2x1,allreduce ring 2x1']  (DDP always runs)
"""
import argparse, collections, json, os, re, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, 'build', 'dtrain')
DDP = os.path.join(ROOT, '..', 'shared', 'reference', 'torch_ddp.py')
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1',
           OPENBLAS_NUM_THREADS='1', OMP_NUM_THREADS='1')


WARMUP = 5  # steps left out of the timing, as torch_ddp.py does


def dtrain_cmd(model, steps, ranks, mode, extra, log):
    cmd = [DTRAIN, 'train', os.path.join(ROOT, 'examples', model + '.cfg'), '--dataset', 'synthetic',
           '--batch', '64', '--max-steps', str(steps + WARMUP), '--threads', '1', '--quiet', '--log', log]
    if ranks > 1:
        cmd = ['mpirun', '--oversubscribe', '--bind-to', 'none', '-np', str(ranks)] + cmd + ['--mode', mode]
        if mode == 'ps-sync':
            cmd += ['--servers', '1']
        cmd += extra
    return cmd


# What read_log reads off a run: img/s, the share of step time spent waiting
# for communication, the share of communication hidden behind compute, bytes
# sent and received per step by worker 0, and its median step time.
Run = collections.namedtuple('Run', 'ips wait overlap bytes step_ms')


def read_log(log):
    """The Run of a run log (worker 0's), warm-up steps left out."""
    events = [json.loads(line) for line in open(log)]
    os.unlink(log)
    cfg = next(e for e in events if e['event'] == 'config')
    summary = next((e for e in events if e['event'] == 'summary'), {})
    steps_ev = [e for e in events if e['event'] == 'step'][WARMUP:]
    t = sum(e['step_s'] for e in steps_ev)
    comm = sum(e['comm_s'] for e in steps_ev)
    wait = sum(e['comm_wait_s'] for e in steps_ev)
    return Run(cfg['global_batch'] * len(steps_ev) / t, wait / t, max(0.0, 1 - wait / comm) if comm > 0 else 0.0,
               summary.get('bytes_per_step', 0.0), statistics.median(e['step_s'] for e in steps_ev) * 1e3)


def keep_runs(runs, only, script):
    """The runs (tuples, name first) that --only names (all without it);
    exits naming the first unknown name."""
    if not only:
        return runs
    keep = only.split(',')
    unknown = [k for k in keep if k not in [r[0] for r in runs]]
    if unknown:
        sys.exit(f'{script}: --only: unknown run {unknown[0]!r}')
    return [r for r in runs if r[0] in keep]


def dtrain(model, steps, ranks, mode, extra):
    if mode == 'pair':  # two independent serial trainers at once: the ceiling with no communication
        logs = [tempfile.NamedTemporaryFile(suffix='.jsonl', delete=False).name for _ in range(2)]
        procs = [subprocess.Popen(dtrain_cmd(model, steps, 1, 'serial', [], log), env=ENV,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for log in logs]
        if any(p.wait() != 0 for p in procs):
            raise RuntimeError('a serial trainer of the pair failed')
        return Run(sum(read_log(log).ips for log in logs), 0.0, 0.0, 0.0, 0.0)
    log = tempfile.NamedTemporaryFile(suffix='.jsonl', delete=False).name
    subprocess.run(dtrain_cmd(model, steps, ranks, mode, extra, log), check=True, capture_output=True,
                   text=True, env=ENV)
    return read_log(log)


def ddp(model, steps):
    out = subprocess.run(['/usr/bin/python3', DDP, model, '64', '2', str(steps)], check=True,
                         capture_output=True, text=True, env=ENV).stdout
    return float(re.search(r'(\d+) img/s', out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--models', default='cnn,cifar')
    ap.add_argument('--steps', type=int, default=60)
    ap.add_argument('--only', help='comma-separated run names to keep')
    a = ap.parse_args()
    runs = [('serial 1x1', 1, 'serial', []), ('2 serial side by side', 1, 'pair', []),
            ('allreduce 2x1', 2, 'allreduce', []),
            ('allreduce ring 2x1', 2, 'allreduce', ['--allreduce-algo', 'ring']),
            ('allreduce+sacp 2x1', 2, 'allreduce', ['--sacp']), ('ps-sync 1s+2w', 3, 'ps-sync', []),
            ('ps-sync+sacp 1s+2w', 3, 'ps-sync', ['--sacp'])]
    runs = keep_runs(runs, a.only, 'bench_dist.py')
    result = {}
    for model in a.models.split(','):
        steps = a.steps if model == 'cnn' else max(a.steps // 2, 20)
        got = {name: [] for name, _, _, _ in runs}
        got['torch DDP gloo 2x1'] = []
        for _ in range(a.rounds):
            for name, ranks, mode, extra in runs:
                got[name].append(dtrain(model, steps, ranks, mode, extra))
            got['torch DDP gloo 2x1'].append(Run(ddp(model, steps), 0.0, 0.0, 0.0, 0.0))
        ref = statistics.median(x[0] for x in got['torch DDP gloo 2x1'])
        print(f'\n{model} (64 images per worker, {steps} steps, {a.rounds} rounds, medians)')
        print(f'{"run":22} {"img/s":>8} {"vs DDP":>7} {"comm wait":>10} {"overlap":>8}')
        result[model] = {}
        for name, vals in got.items():
            ips = statistics.median(v[0] for v in vals)
            wait = statistics.median(v[1] for v in vals)
            ov = statistics.median(v[2] for v in vals)
            result[model][name] = {'images_per_sec': ips, 'vs_ddp': ips / ref, 'comm_wait_share': wait,
                                   'comm_overlap': ov}
            print(f'{name:22} {ips:>8.0f} {ips / ref:>7.2f} {wait:>10.1%} {ov:>8.1%}', flush=True)
    print(json.dumps({'event': 'bench_dist', 'rounds': a.rounds, 'results': result}))


if __name__ == '__main__':
    sys.exit(main())

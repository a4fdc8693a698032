#!/usr/bin/python3
"""dtrain vs PyTorch (CPU) training throughput, side by side in one run.

For each model (mlp, cnn, cifar, resnet20, resnet20_fm) at batch 64 and each thread count (1, 2),
alternates `dtrain bench` and shared/reference/torch_ref.py for ROUNDS rounds
(PyTorch with OPENBLAS_NUM_THREADS/OMP_NUM_THREADS set to the same count),
and prints the medians, the ratio dtrain/PyTorch, and dtrain's achieved
GFLOP/s as a fraction of this machine's measured sgemm peak.

usage: bench/bench_engine.py [--rounds 3] [--models mlp,cnn,cifar,resnet20,resnet20_fm] [--threads 1,2]
"""
import argparse, json, os, re, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, 'build', 'dtrain')
PEAK = os.path.join(ROOT, 'build', 'sgemm_peak')
REF = os.path.join(ROOT, '..', 'shared', 'reference', 'torch_ref.py')
STEPS = {'mlp': 400, 'cnn': 40, 'cifar': 20, 'resnet20': 10, 'resnet20_fm': 12}


def run(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return out.strip().splitlines()[-1]


def dtrain_bench(model, threads):
    line = run([DTRAIN, 'bench', os.path.join(ROOT, 'examples', model + '.cfg'), '--batch', '64',
                '--steps', str(STEPS[model]), '--threads', str(threads)])
    j = json.loads(line)
    return j['images_per_sec'], j['gflops']


def torch_bench(model, threads):
    # torch.set_num_threads() does not reach the OpenBLAS that Debian's
    # PyTorch calls for Linear layers; without this a "1 thread" PyTorch run
    # uses every core in its matrix products.
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    line = run(['/usr/bin/python3', REF, model, '64', str(threads), str(STEPS[model])], env)
    return float(re.search(r'(\d+) img/s', line).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--models', default='mlp,cnn,cifar,resnet20,resnet20_fm')
    ap.add_argument('--threads', default='1,2')
    a = ap.parse_args()
    env_note = 'OPENBLAS_CORETYPE=%s' % os.environ.get('OPENBLAS_CORETYPE', '(unset)')
    peaks = {t: json.loads(run([PEAK, str(t)]))['gflops'] for t in map(int, a.threads.split(','))}
    print(f'sgemm peak: ' + ', '.join(f'{t} thread(s) {g:.0f} GFLOP/s' for t, g in peaks.items())
          + f'  [{env_note}]')
    print(f'{"model":6} {"thr":>3} {"dtrain img/s":>13} {"torch img/s":>12} {"ratio":>6} '
          f'{"GFLOP/s":>8} {"of peak":>8}')
    rows = []
    for model in a.models.split(','):
        for t in map(int, a.threads.split(',')):
            d, p, g = [], [], []
            for _ in range(a.rounds):  # alternate so drift hits both alike
                ips, gf = dtrain_bench(model, t)
                d.append(ips), g.append(gf)
                p.append(torch_bench(model, t))
            md, mp, mg = statistics.median(d), statistics.median(p), statistics.median(g)
            rows.append({'model': model, 'threads': t, 'dtrain': md, 'torch': mp,
                         'ratio': md / mp, 'gflops': mg, 'peak_fraction': mg / peaks[t]})
            print(f'{model:6} {t:>3} {md:>13.0f} {mp:>12.0f} {md / mp:>6.2f} {mg:>8.1f} '
                  f'{mg / peaks[t]:>8.0%}', flush=True)
    print(json.dumps({'event': 'bench_engine', 'rounds': a.rounds, 'rows': rows}))


if __name__ == '__main__':
    sys.exit(main())

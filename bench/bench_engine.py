#!/usr/bin/python3
"""dtrain vs PyTorch (CPU) training throughput, side by side in one run.

For each model (mlp, cnn, cifar, resnet20, resnet20_fm by default) at batch 64 and each thread count (1, 2),
alternates `dtrain bench` and shared/reference/torch_ref.py for ROUNDS rounds
(PyTorch with OPENBLAS_NUM_THREADS/OMP_NUM_THREADS set to the same count),
and prints the medians, the ratio dtrain/PyTorch, and dtrain's achieved
GFLOP/s as a fraction of this machine's measured sgemm peak. The GFLOP/s
count a direct convolution's operations, so a model whose convolutions run
Winograd's algorithm (fewer multiplications) can pass 100 % of the peak.

With --precision bf16: per model and thread count, alternates dtrain bf16,
dtrain fp32, PyTorch bf16 (autocast) and PyTorch fp32, and prints the four
medians, dtrain's bf16/fp32 speedup, dtrain bf16 / PyTorch bf16, and
dtrain bf16's achieved TFLOP/s against the bf16 peak (build/bf16_peak).

Both then print a roofline table (bench/roofline.py has the formulas): per
model and thread count, dtrain's training step (fp32, or bf16 with
--precision bf16) counted from the model (GFLOP and MB a step), its achieved
GFLOP/s against the measured peak (fp32: build/roofline_peak's FMA kernel,
bf16: build/bf16_peak), its GB/s against the measured memory bandwidth
(roofline_peak's STREAM triad), its arithmetic intensity (FLOP/B) against
the ridge point (peak / bandwidth), which of the two bounds it, and its
GFLOP/s as a share of the roof at its intensity. The ceilings are measured
once, at the start, and printed with the CPU.

The ImageNet-sized models resnet18 and resnet50 (examples/resnet18.cfg and
resnet50.cfg, 3x224x224, 1000 classes, against torchvision's models in
torch_ref.py) run at batch 16 (STEPS steps a round) and only when named in
--models: they take minutes (resnet50: 8.2 GFLOP per image forward, 3x that
per image trained).

usage: bench/bench_engine.py [--rounds 3] [--models mlp,cnn,cifar,resnet20,resnet20_fm] [--threads 1,2]
                             [--precision fp32|bf16]
       bench/bench_engine.py --models resnet18,resnet50 [--threads 2] [...]
"""
import argparse, json, os, re, statistics, subprocess, sys

import roofline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, 'build', 'dtrain')
PEAK = os.path.join(ROOT, 'build', 'sgemm_peak')
BF16_PEAK = os.path.join(ROOT, 'build', 'bf16_peak')
REF = os.path.join(ROOT, '..', 'shared', 'reference', 'torch_ref.py')
STEPS = {'mlp': 400, 'cnn': 40, 'cifar': 20, 'resnet20': 10, 'resnet20_fm': 12, 'resnet18': 6, 'resnet50': 3}
DEFAULT_MODELS = 'mlp,cnn,cifar,resnet20,resnet20_fm'
BATCH = {'resnet18': 16, 'resnet50': 16}  # others: 64


def batch_of(model):
    return BATCH.get(model, 64)


def fmt_ips(v, width):
    """img/s in width columns: whole numbers, one decimal below 100."""
    return f'{v:>{width}.{0 if v >= 100 else 1}f}'


def run(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return out.strip().splitlines()[-1]


def dtrain_bench(model, threads, precision='fp32'):
    line = run([DTRAIN, 'bench', cfg_of(model), '--batch', str(batch_of(model)),
                '--steps', str(STEPS[model]), '--threads', str(threads), '--precision', precision])
    j = json.loads(line)
    return j['images_per_sec'], j['gflops']


def cfg_of(model):
    return os.path.join(ROOT, 'examples', model + '.cfg')


def print_roofline(title, roofs):
    """The roofline table of rows [(model, threads, roof_row)]."""
    print(title)
    print(roofline.ROOF_HEADER)
    for model, t, r in roofs:
        print(roofline.roof_line(model, t, r))


def torch_bench(model, threads, precision='fp32'):
    # torch.set_num_threads() does not reach the OpenBLAS that Debian's
    # PyTorch calls for Linear layers; without this a "1 thread" PyTorch run
    # uses every core in its matrix products.
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    bs = batch_of(model)
    line = run(['/usr/bin/python3', REF, model, str(bs), str(threads), str(STEPS[model]), precision], env)
    # img/s from the step time: torch_ref.py rounds img/s to an integer, too
    # coarse for the ImageNet-sized models (a few img/s).
    return bs * 1000.0 / float(re.search(r'\(([\d.]+) ms/step\)', line).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--models', default=DEFAULT_MODELS,
                    help='comma list of: ' + ','.join(STEPS) + ' (default %(default)s; resnet18 and resnet50 '
                    'run at batch 16, the others at 64)')
    ap.add_argument('--threads', default='1,2')
    ap.add_argument('--precision', default='fp32', choices=['fp32', 'bf16'])
    a = ap.parse_args()
    unknown = [m for m in a.models.split(',') if m not in STEPS]
    if unknown:
        ap.error('unknown model %s (models: %s)' % (unknown[0], ','.join(STEPS)))
    if a.precision == 'bf16':
        return bench_bf16(a)
    env_note = 'OPENBLAS_CORETYPE=%s' % os.environ.get('OPENBLAS_CORETYPE', '(unset)')
    peaks = {t: json.loads(run([PEAK, str(t)]))['gflops'] for t in map(int, a.threads.split(','))}
    print(f'sgemm peak: ' + ', '.join(f'{t} thread(s) {g:.0f} GFLOP/s' for t, g in peaks.items())
          + f'  [{env_note}]')
    ceil = roofline.measure_ceilings(list(peaks))
    print(roofline.describe_ceilings(ceil), flush=True)
    roofs = []
    print(f'{"model":11} {"thr":>3} {"dtrain img/s":>13} {"torch img/s":>12} {"ratio":>6} '
          f'{"GFLOP/s":>8} {"of peak":>8}')
    rows = []
    for model in a.models.split(','):
        cost = roofline.step_cost(roofline.model_info(cfg_of(model), batch_of(model)), batch_of(model))
        for t in map(int, a.threads.split(',')):
            d, p, g = [], [], []
            for _ in range(a.rounds):  # alternate so drift hits both alike
                ips, gf = dtrain_bench(model, t)
                d.append(ips), g.append(gf)
                p.append(torch_bench(model, t))
            md, mp, mg = statistics.median(d), statistics.median(p), statistics.median(g)
            roof = roofline.roof_row(cost, batch_of(model) * 1e3 / md, ceil[t])
            roofs.append((model, t, roof))
            rows.append({'model': model, 'batch': batch_of(model), 'threads': t, 'dtrain': md, 'torch': mp,
                         'ratio': md / mp, 'gflops': mg, 'peak_fraction': mg / peaks[t], 'roofline': roof})
            print(f'{model:11} {t:>3} {fmt_ips(md, 13)} {fmt_ips(mp, 12)} {md / mp:>6.2f} {mg:>8.1f} '
                  f'{mg / peaks[t]:>8.0%}', flush=True)
    print_roofline('roofline of dtrain fp32 (step counted from the model, bench/roofline.py):', roofs)
    print(json.dumps({'event': 'bench_engine', 'rounds': a.rounds, 'cpu': roofline.cpu_name(),
                      'ceilings': ceil, 'rows': rows}))


def bench_bf16(a):
    threads = list(map(int, a.threads.split(',')))
    peaks = {t: json.loads(run([BF16_PEAK, str(t)])) for t in threads}
    print('bf16 peak: ' + ', '.join(f'{t} thread(s) {p["gflops"]:.0f} GFLOP/s ({p["impl"]})'
                                    for t, p in peaks.items()))
    ceil = roofline.measure_ceilings(threads, peaks)
    print(roofline.describe_ceilings(ceil), flush=True)
    roofs = []
    print(f'{"model":11} {"thr":>3} {"dt bf16":>8} {"dt fp32":>8} {"pt bf16":>8} {"pt fp32":>8} '
          f'{"dt bf16/fp32":>12} {"dt/pt bf16":>10} {"TFLOP/s":>8} {"of peak":>8}   (img/s, medians)')
    rows = []
    for model in a.models.split(','):
        cost = roofline.step_cost(roofline.model_info(cfg_of(model), batch_of(model)), batch_of(model))
        for t in threads:
            r = {'db': [], 'df': [], 'pb': [], 'pf': [], 'g': []}
            for _ in range(a.rounds):  # alternate so drift hits all four alike
                ips, gf = dtrain_bench(model, t, 'bf16')
                r['db'].append(ips), r['g'].append(gf)
                r['df'].append(dtrain_bench(model, t, 'fp32')[0])
                r['pb'].append(torch_bench(model, t, 'bf16'))
                r['pf'].append(torch_bench(model, t, 'fp32'))
            m = {k: statistics.median(v) for k, v in r.items()}
            row = {'model': model, 'batch': batch_of(model), 'threads': t,
                   'dtrain_bf16': m['db'], 'dtrain_fp32': m['df'],
                   'torch_bf16': m['pb'], 'torch_fp32': m['pf'], 'speedup': m['db'] / m['df'],
                   'vs_torch_bf16': m['db'] / m['pb'], 'tflops': m['g'] / 1e3,
                   'peak_fraction': m['g'] / peaks[t]['gflops'],
                   'roofline': roofline.roof_row(cost, batch_of(model) * 1e3 / m['db'], ceil[t])}
            roofs.append((model, t, row['roofline']))
            rows.append(row)
            print(f'{model:11} {t:>3} {fmt_ips(m["db"], 8)} {fmt_ips(m["df"], 8)} '
                  f'{fmt_ips(m["pb"], 8)} {fmt_ips(m["pf"], 8)} '
                  f'{row["speedup"]:>12.2f} {row["vs_torch_bf16"]:>10.2f} {row["tflops"]:>8.2f} '
                  f'{row["peak_fraction"]:>8.1%}', flush=True)
    print_roofline('roofline of dtrain bf16 (step counted from the model, bench/roofline.py; bytes counted '
                   'as fp32, an upper bound where activations are bf16):', roofs)
    print(json.dumps({'event': 'bench_engine_bf16', 'rounds': a.rounds, 'cpu': roofline.cpu_name(),
                      'ceilings': ceil, 'rows': rows}))


if __name__ == '__main__':
    sys.exit(main())

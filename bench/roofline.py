"""The roofline of a dtrain training step: its FLOPs and memory traffic,
counted from the model (`dtrain info --json`), against this machine's
measured ceilings (build/roofline_peak: an FMA-bound kernel and a STREAM
triad; for bf16, build/bf16_peak). bench/bench_engine.py prints the table;
tests/test_roofline.sh checks the counts against hand counts.

FLOPs of one training step at batch B (the layers' own forward counts, as
`dtrain info` prints them, are per image):
    convolutional, connected: 3 x forward (forward, weight gradient, input
        gradient); 2 x forward where the layer reads only the data input
        (dtrain skips that input gradient);
    every other layer: 2 x forward (its backward does about as much);
    the optimiser's few FLOPs per parameter are not counted.

Bytes moved by one training step (fp32, 4 bytes a value; bf16 runs keep
activations, weights and gradients in fp32 between layers, so the same
count): every non-folded layer reads its inputs X (bytes of all its input
tensors at batch B) and weights P, and writes its output Y, forward; its
backward reads dY and X and writes dP, and, unless it reads only the data
input, reads P and writes dX:
    layer bytes = fwd (X + P + Y) + bwd (Y + X + P + [X + P])
A ReLU folded into the layer before it (`folded` in info) runs in that
layer's pass and moves nothing of its own. The optimiser (SGD with
momentum, every reference model's) reads weights, gradients and momentum
and writes weights and momentum: 5 x 4 bytes a parameter (3 + 2 x slots).
It assumes each tensor crosses memory once per use: a lower bound for the
activations that do not fit in cache (cache reuse between adjacent layers of
a small net can make the real traffic lower, a convolution's reorders and
im2col higher).
"""
import json, os, subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, 'build', 'dtrain')
ROOFLINE_PEAK = os.path.join(ROOT, 'build', 'roofline_peak')
VALUE_BYTES = 4          # fp32 activations, weights, gradients
OPTIM_SLOTS = 1          # SGD with momentum
PRODUCT_LAYERS = ('convolutional', 'connected')


def _elems(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def model_info(cfg, batch, dtrain=DTRAIN):
    """`dtrain info CFG --json --batch B`, parsed."""
    out = subprocess.run([dtrain, 'info', cfg, '--json', '--batch', str(batch)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def step_cost(info, batch, optim_slots=OPTIM_SLOTS):
    """FLOPs and bytes of one training step at `batch` (formulas above):
    {'flops', 'bytes', 'fwd_flops', 'act_bytes', 'param_bytes', 'optim_bytes',
    'by_kind': {layer type: {'flops', 'bytes'}} (the optimiser's bytes apart)}."""
    nodes = {n['id']: n for n in info['nodes']}
    inputs = {}
    for src, dst in info['edges']:
        inputs.setdefault(dst, []).append(src)
    flops = fwd = act = par = 0
    kinds = {}
    for n in info['nodes']:
        if n['id'] == 'input':
            continue
        srcs = inputs.get(n['id'], [])
        data_only = all(s == 'input' for s in srcs)
        f = n['flops'] * batch
        fwd += f
        k = kinds.setdefault(n['type'], {'flops': 0, 'bytes': 0})
        k['flops'] += f * (3 if n['type'] in PRODUCT_LAYERS and not data_only else 2)
        if n['folded']:
            continue
        x = sum(_elems(nodes[s]['output']) for s in srcs) * batch * VALUE_BYTES
        y = _elems(n['output']) * batch * VALUE_BYTES
        p = n['params'] * VALUE_BYTES
        a, w = (x + y) + (y + x + (0 if data_only else x)), p + (p + (0 if data_only else p))
        act, par, k['bytes'] = act + a, par + w, k['bytes'] + a + w
    flops = sum(k['flops'] for k in kinds.values())
    optim = (3 + 2 * optim_slots) * info['params'] * VALUE_BYTES
    return {'flops': flops, 'fwd_flops': fwd, 'bytes': act + par + optim, 'act_bytes': act,
            'param_bytes': par, 'optim_bytes': optim, 'by_kind': kinds}


def cpu_name():
    """The CPU's model name and the features that pick dtrain's kernels."""
    name, flags = '?', set()
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                k, _, v = line.partition(':')
                if k.strip() == 'model name' and name == '?':
                    name = v.strip()
                elif k.strip() == 'flags' and not flags:
                    flags = set(v.split())
    except OSError:
        pass
    feats = [x for x in ('avx2', 'avx512f', 'avx512_bf16', 'amx_bf16') if x in flags]
    return f'{name} ({", ".join(feats) or "no AVX2"})'


def _run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure_ceilings(threads, bf16_peaks=None):
    """Per thread count: {'peak': GFLOP/s, 'peak_what': ..., 'bw': GB/s,
    'fma_gflops', 'fma_gflops_wall', 'isa'}, from build/roofline_peak. The
    peak is its FMA kernel's rate per second of CPU time (other processes on
    the cores do not lower it; the triad's wall-clock bandwidth they do), or
    with bf16_peaks ({threads: bf16_peak's JSON}, measured by the caller)
    bf16_peak's matmul (AMX or AVX512_BF16 kernels, by the wall clock)."""
    out = {}
    for t in threads:
        r = _run_json([ROOFLINE_PEAK, str(t)])
        c = {'bw': r['triad_gbs'], 'peak': r['fma_gflops'], 'peak_what': 'fp32 FMA (' + r['isa'] + ', per CPU second)',
             'fma_gflops': r['fma_gflops'], 'fma_gflops_wall': r['fma_gflops_wall'], 'isa': r['isa']}
        if bf16_peaks:
            c['peak'], c['peak_what'] = bf16_peaks[t]['gflops'], 'bf16 matmul (' + bf16_peaks[t]['impl'] + ')'
        out[t] = c
    return out


def describe_ceilings(ceil):
    """The ceilings in a line or two: with a warning when the cores were
    busy with other work (the FMA kernel's wall-clock rate under 80 % of its
    CPU-time rate), which lowers the triad, bf16_peak and every img/s, not
    the fp32 peak."""
    ts = sorted(ceil)
    what = ceil[ts[0]]['peak_what']
    line = (f'roofline ceilings on {cpu_name()}: {what} peak '
            + ' / '.join(f'{ceil[t]["peak"]:.0f}' for t in ts) + ' GFLOP/s, triad '
            + ' / '.join(f'{ceil[t]["bw"]:.1f}' for t in ts) + ' GB/s, ridge '
            + ' / '.join(f'{ceil[t]["peak"] / ceil[t]["bw"]:.1f}' for t in ts)
            + ' FLOP/B on ' + ' / '.join(map(str, ts)) + ' thread(s)')
    if any(ceil[t]['fma_gflops_wall'] < 0.8 * ceil[t]['fma_gflops'] for t in ts):
        line += ('\nwarning: other processes held the cores (FMA kernel by the wall clock '
                 + ' / '.join(f'{ceil[t]["fma_gflops_wall"]:.0f}' for t in ts) + ' of '
                 + ' / '.join(f'{ceil[t]["fma_gflops"]:.0f}' for t in ts)
                 + ' GFLOP/s): the wall-clock ceilings (the triad, bf16_peak) read low, and every img/s; '
                 'rerun when the machine is quiet')
    return line


def roof_row(cost, ms_per_step, ceil):
    """The roofline of one measured step against the ceilings `ceil` of its
    thread count."""
    s = ms_per_step / 1e3
    gflops, gbs = cost['flops'] / s / 1e9, cost['bytes'] / s / 1e9
    ai = cost['flops'] / cost['bytes']
    ridge = ceil['peak'] / ceil['bw']
    roof = min(ceil['peak'], ai * ceil['bw'])  # attainable GFLOP/s at this intensity
    return {'gflop_step': cost['flops'] / 1e9, 'mb_step': cost['bytes'] / 1e6, 'ms_step': ms_per_step,
            'gflops': gflops, 'of_peak': gflops / ceil['peak'], 'gbs': gbs, 'of_bw': gbs / ceil['bw'],
            'intensity': ai, 'ridge': ridge, 'bound': 'compute' if ai >= ridge else 'memory',
            'of_roof': gflops / roof}


ROOF_HEADER = (f'{"model":11} {"thr":>3} {"GFLOP/step":>10} {"ms/step":>8} {"GFLOP/s":>8} {"of peak":>7} '
               f'{"MB/step":>8} {"GB/s":>6} {"of bw":>6} {"FLOP/B":>6} {"ridge":>5} {"bound":>7} {"of roof":>7}')


def roof_line(model, threads, r):
    return (f'{model:11} {threads:>3} {r["gflop_step"]:>10.3f} {r["ms_step"]:>8.2f} {r["gflops"]:>8.1f} '
            f'{r["of_peak"]:>7.0%} {r["mb_step"]:>8.1f} {r["gbs"]:>6.1f} {r["of_bw"]:>6.0%} '
            f'{r["intensity"]:>6.1f} {r["ridge"]:>5.1f} {r["bound"]:>7} {r["of_roof"]:>7.0%}')

#!/usr/bin/python3
"""Training throughput of dtrain against Darknet itself (Debian's `darknet`,
pjreddie's, CPU with OpenBLAS) on the same cfg file and the same images.

    bench/bench_darknet.py [--cfgs cifar,darknet] [--steps 8] [--batch 32] [--threads 2] [--rounds 3]

For each of Darknet's own cfgs (from /usr/share/darknet/cfg) it writes a copy
with the run's batch (subdivisions=1), makes a labelled image set of the cfg's
input size (tests/make_images.py tree: as many
classes as the model has outputs, class-named folders, which label the images
for both programs through a Darknet .data file), and times STEPS training steps of each program, ROUNDS
times, alternating:

  darknet classifier train F.data CFG -nogpu    its per-iteration "seconds"
  dtrain train CFG --data F.data --max-steps N  its step records' step_s

Both read the same .data file (dtrain's --data). The first two steps of each
run are warm-up and not counted. Prints img/s medians side by side and their
ratio (dtrain / Darknet). Darknet's threads are OpenBLAS's
(OPENBLAS_NUM_THREADS); dtrain's are --threads.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, 'build', 'dtrain')
CFG_DIR = '/usr/share/darknet/cfg'


def cfg_value(text, key, default=None):
    m = re.search(r'^\s*%s\s*=\s*([^\s#;]+)' % re.escape(key), text, re.M)
    return m.group(1) if m else default


def write_cfg(src, dst, batch, steps):
    """src's text with batch=, subdivisions=1 and max_batches= set in [net]."""
    text = open(src).read()
    for key, val in (('batch', batch), ('subdivisions', 1), ('max_batches', steps)):
        if cfg_value(text, key) is None:
            text = text.replace('[net]', '[net]\n%s=%s' % (key, val), 1)
        else:
            text = re.sub(r'^(\s*%s\s*=).*$' % key, r'\g<1>%s' % val, text, count=1, flags=re.M)
    open(dst, 'w').write(text)
    return text


def classes_of(cfg):
    """The model's outputs: the last layer's channels (dtrain info --json)."""
    out = subprocess.run([DTRAIN, 'info', cfg, '--json'], check=True, capture_output=True, text=True).stdout
    return json.loads(out)['nodes'][-1]['output'][0]


def make_data(work, side, classes, n):
    """An image tree of `classes` classes at side x side, n training images
    each, and its .data file."""
    tree = os.path.join(work, 'img')
    # Darknet's label is the name an image's path contains: names of one width, none inside another.
    names = ','.join('k_c%05d' % i for i in range(classes))
    subprocess.run(['/usr/bin/python3', os.path.join(ROOT, 'tests', 'make_images.py'), 'tree', tree, names, str(n),
                    str(side), '--square'], check=True, stdout=subprocess.DEVNULL)
    folders = sorted(os.listdir(os.path.join(tree, 'train')))
    with open(os.path.join(work, 'labels.txt'), 'w') as f:
        f.write(''.join('%s\n' % c for c in folders))
    for split in ('train', 'test'):
        with open(os.path.join(work, split + '.list'), 'w') as f:
            for c in folders:
                d = os.path.join(tree, split, c)
                f.write(''.join(os.path.join(d, p) + '\n' for p in sorted(os.listdir(d))))
    data = os.path.join(work, 'bench.data')
    with open(data, 'w') as f:
        f.write('classes=%d\ntrain=%s/train.list\nvalid=%s/test.list\nlabels=%s/labels.txt\nbackup=%s/backup\ntop=2\n'
                % (classes, work, work, work, work))
    os.makedirs(os.path.join(work, 'backup'), exist_ok=True)
    return data


def darknet_run(data, cfg, batch, threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run(['darknet', 'classifier', 'train', data, cfg, '-nogpu'], env=env, capture_output=True,
                         text=True, timeout=3600).stdout + ''
    secs = [float(m.group(1)) for m in re.finditer(r'rate, ([0-9.]+) seconds', out)]
    if len(secs) < 3:
        sys.exit('darknet printed no iteration times:\n' + out[-2000:])
    return [batch / s for s in secs[2:]]


def dtrain_run(data, cfg, batch, steps, threads, work):
    # The run's final evaluation comes after its last step record.
    log = os.path.join(work, 'dtrain.jsonl')
    run = subprocess.run([DTRAIN, 'train', cfg, '--data', data, '--batch', str(batch), '--max-steps', str(steps),
                          '--threads', str(threads), '--quiet', '--log', log], capture_output=True, text=True,
                         timeout=3600)
    if run.returncode != 0:
        sys.exit('dtrain train failed: ' + run.stderr[-2000:])
    steps_s = [json.loads(l)['step_s'] for l in open(log) if '"event":"step"' in l]
    os.remove(log)
    return [batch / s for s in steps_s[2:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--cfgs', default='cifar,darknet')
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    print('cfg, batch %d, %d threads, %d steps (2 warm-up), %d rounds: img/s medians' % (a.batch, a.threads, a.steps,
                                                                                       a.rounds))
    print('%-10s %12s %12s %8s' % ('cfg', 'darknet', 'dtrain', 'ratio'))
    for name in a.cfgs.split(','):
        with tempfile.TemporaryDirectory() as work:
            cfg = os.path.join(work, name + '.cfg')
            text = write_cfg(os.path.join(CFG_DIR, name + '.cfg'), cfg, a.batch, a.steps)
            # Images of the input's size (Darknet's crop rescales them either way).
            side = min(int(cfg_value(text, 'max_crop', 1 << 20)), int(cfg_value(text, 'width')))
            classes = classes_of(cfg)
            data = make_data(work, side, classes, max(a.batch * a.steps // classes + 1, 2))
            dk, dt = [], []
            for _ in range(a.rounds):
                dk.append(statistics.median(darknet_run(data, cfg, a.batch, a.threads)))
                dt.append(statistics.median(dtrain_run(data, cfg, a.batch, a.steps, a.threads, work)))
            d, t = statistics.median(dk), statistics.median(dt)
            print('%-10s %12.1f %12.1f %8.2f' % (name, d, t, t / d), flush=True)


if __name__ == '__main__':
    main()

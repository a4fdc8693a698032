#!/usr/bin/python3
"""Validates dtrain simulate against real runs on this machine: 1, 2 and 3
ranks sharing its cores, Open MPI's shared-memory transport as the network.

For each model (cnn, cifar; 64 images per worker) and run
    serial          1 rank,  threads = cores
    allreduce       2 ranks, threads = cores / 2
    allreduce       3 ranks, threads = max(1, cores / 3)
    ps-sync         1 server + 2 workers, threads = max(1, cores / 3)
it runs
  - the prediction: dtrain simulate MODEL --nodes W --modes MODE --threads T
    --shared-cores CORES --bandwidth B --latency L (compute measured on the
    spot at T threads; the workers share the machine's cores), and
  - the real run: dtrain launch -n P -- train MODEL --dataset synthetic
    --batch 64 --threads T --max-steps WARMUP+STEPS --log X.jsonl, allreduce
    with --allreduce-algo ring, the algorithm the model prices (the serial
    run without launch: mpirun -np 1 would bind its threads to one core), the
    median step_s of worker 0 after WARMUP steps,
and prints predicted against measured step time and the error. B and L are
measured first with build/mpi_link, the link between two ranks as dtrain
drives it: through dtrain's ring for the allreduce runs, through
MPI_Isend/MPI_Irecv for ps-sync, with what a transfer costs the shared
cores beside the compute (--kernel-rate, --busy-bandwidth; unless
--bandwidth/--latency give one link for all, priced on the wire alone).
With --rounds R everything is repeated R
times, alternating, and medians are compared. Run it on a quiet machine.

usage: bench/validate_sim.py [--models cnn,cifar] [--steps 30] [--rounds 1]
                             [--bandwidth 20Gbps --latency 0.5us] [--target 25]
exit status: 0, or 1 with --check when an error exceeds --target percent.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, 'build')
DTRAIN = os.path.join(BUILD, 'dtrain')
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
WARMUP = 5  # steps left out of the measured median (oneDNN builds its kernels there)
BATCH = 64


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=ENV).stdout


def measure_links(where=('-np', '2'), fan_in_where=('-np', '3', '--oversubscribe', '--bind-to', 'none')):
    """{'allreduce': (bandwidth, latency), 'p2p': (...), both '..._busy'
    (measured with every core busy), both '..._cpu' (the bytes sent plus
    received per second of the machine's cores, as (rate, None)) and
    'fan_in' (the share of a server's link the first of two workers pushing
    at once takes, as (share, None))} as dtrain drives the ranks
    (bench/mpi_link), medians of 3 runs, as simulate flags. where: mpirun's
    flags placing the two ranks; fan_in_where: the three, the server's
    first (default: on this machine)."""
    root = ['--allow-run-as-root'] if os.geteuid() == 0 else []
    got = [json.loads(line) for _ in range(3)
           for line in run(['mpirun'] + root + list(where) + [os.path.join(BUILD, 'mpi_link')]).splitlines()]
    fan_in = [json.loads(run(['mpirun'] + root + list(fan_in_where) + [os.path.join(BUILD, 'mpi_link')]))
              for _ in range(3)]
    links = {}
    for name in ('allreduce', 'p2p', 'allreduce_busy', 'p2p_busy'):
        mine = [g for g in got if g['link'] == name]
        # Four significant digits: at 100 Mbit/s two decimals of Gbit/s would
        # round 0.055 to 0.06, a 9% error in every prediction.
        links[name] = (f'{statistics.median(g["bandwidth_gbps"] for g in mine):.4g}Gbps',
                       f'{statistics.median(g["latency_us"] for g in mine):.3f}us')
    for name in ('allreduce_cpu', 'p2p_cpu'):
        rates = [g['kernel_gbps'] for g in got if g['link'] == name and g['kernel_gbps'] is not None]
        if not rates:
            sys.exit(f'validate_sim.py: mpi_link could not measure {name} in 3 runs (other load on the cores); '
                     'run it on quiet cores')
        links[name] = (f'{statistics.median(rates):.4g}Gbps', None)
    links['fan_in'] = (f'{statistics.median(f["first_share"] for f in fan_in):.3g}', None)
    return links


def link_text(name, value, latency):
    """One of measure_links' entries as words."""
    if name == 'fan_in':
        return f'{name}: the first pushing takes {value} of the link'
    return f'{name} {value}' + (f', {latency} per message' if latency else ' per CPU-second')


def link_costs(links, way):
    """simulate's flags for what measure_links found on link `way`
    (allreduce, p2p) besides its bandwidth and latency: what a transfer
    costs beside the compute (--kernel-rate: the kernel's copies;
    --busy-bandwidth: the rate kept on busy cores) and, for the servers'
    pushes, how two share a link (--fan-in-share); none for a link given
    by hand."""
    if way + '_cpu' not in links:
        return []
    fan_in = ['--fan-in-share', links['fan_in'][0]] if way == 'p2p' else []
    return ['--kernel-rate', links[way + '_cpu'][0], '--busy-bandwidth', links[way + '_busy'][0], *fan_in]


def predict(model, workers, mode, threads, cores, bw, lat, extra=()):
    out = run([DTRAIN, 'simulate', model, '--nodes', str(workers), '--modes', mode, '--threads', str(threads),
               '--shared-cores', str(cores), '--bandwidth', bw, '--latency', lat, '--batch', str(BATCH),
               '--servers', '1', '--reps', '20', '--json', *extra])
    return json.loads(out.splitlines()[-1])['step_ms']


def measure(model, ranks, mode, threads, steps):
    log = tempfile.NamedTemporaryFile(suffix='.jsonl', delete=False).name
    train = ['train', model, '--dataset', 'synthetic', '--batch', str(BATCH), '--threads', str(threads),
             '--max-steps', str(WARMUP + steps), '--quiet', '--log', log]
    if ranks == 1:
        run([DTRAIN] + train)
    else:
        # The simulator models a cluster's allreduce as fusion buckets on a
        # ring; on one machine dtrain would take its shared-memory window.
        run([DTRAIN, 'launch', '-n', str(ranks), '--', *train, '--mode', mode] +
            (['--servers', '1'] if mode == 'ps-sync' else ['--allreduce-algo', 'ring']))
    with open(log) as f:
        steps_ev = [e for e in map(json.loads, f) if e['event'] == 'step'][WARMUP:]
    os.unlink(log)
    return statistics.median(e['step_s'] for e in steps_ev) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--models', default='cnn,cifar')
    ap.add_argument('--steps', type=int, default=30)
    ap.add_argument('--rounds', type=int, default=1)
    ap.add_argument('--bandwidth')
    ap.add_argument('--latency')
    ap.add_argument('--target', type=float, default=25.0, help='error bound in percent')
    ap.add_argument('--check', action='store_true', help='exit 1 if an error exceeds --target')
    a = ap.parse_args()
    if bool(a.bandwidth) != bool(a.latency):
        ap.error('give both --bandwidth and --latency, or neither (then they are measured)')
    cores = os.cpu_count()
    if a.bandwidth:
        links = {'allreduce': (a.bandwidth, a.latency), 'p2p': (a.bandwidth, a.latency)}
    else:
        links = measure_links()
    for name, (bw, lat) in links.items():
        print('link ' + link_text(name, bw, lat))
    print(f'{cores} cores; {BATCH} images per worker; {a.steps} steps after {WARMUP}, {a.rounds} round(s)',
          flush=True)
    # (name, ranks, workers, mode): the serial run is one worker predicted as one node.
    runs = [('serial', 1, 1, 'serial'), ('allreduce', 2, 2, 'allreduce'), ('allreduce', 3, 3, 'allreduce'),
            ('ps-sync 1s+2w', 3, 2, 'ps-sync')]
    print(f'{"model":6} {"run":14} {"ranks":>5} {"threads":>7} {"predicted ms":>12} {"measured ms":>11} '
          f'{"error":>7}', flush=True)
    rows, worst = [], 0.0
    for name in a.models.split(','):
        model = os.path.join(ROOT, 'examples', name + '.cfg')
        for label, ranks, workers, mode in runs:
            threads = max(1, cores // ranks)
            pred, meas = [], []
            way = 'p2p' if mode == 'ps-sync' else 'allreduce'
            bw, lat = links[way]
            for _ in range(a.rounds):
                pred.append(predict(model, workers, 'allreduce' if mode == 'serial' else mode, threads, cores,
                                    bw, lat, link_costs(links, way)))
                meas.append(measure(model, ranks, mode, threads, a.steps))
            p, m = statistics.median(pred), statistics.median(meas)
            err = (p - m) / m * 100
            worst = max(worst, abs(err))
            rows.append({'model': name, 'run': label, 'ranks': ranks, 'threads': threads, 'predicted_ms': p,
                         'measured_ms': m, 'error_pct': err})
            print(f'{name:6} {label:14} {ranks:>5} {threads:>7} {p:>12.1f} {m:>11.1f} {err:>+6.1f}%', flush=True)
    ok = worst <= a.target
    print(f'largest error {worst:.1f}% ({"within" if ok else "outside"} the {a.target:g}% target)')
    print(json.dumps({'event': 'validate_sim', 'links': links, 'cores': cores, 'rows': rows,
                      'max_abs_error_pct': worst}))
    return 1 if a.check and not ok else 0


if __name__ == '__main__':
    sys.exit(main())

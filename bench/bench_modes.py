#!/usr/bin/python3
"""Parameter-server modes compared, the table of docs/MODES.md.

1. examples/cnn.cfg trained EPOCHS epochs on Fashion-MNIST in every ps mode
   with 1 server + 2 workers and 2 servers + 2 workers: test accuracy, img/s,
   staleness (mean/max version lag), largest clock gap.
2. Throughput (synthetic data, STEPS steps per worker) under transient
   stragglers (--straggle 0.1:50) and a persistent one (--slow-worker on
   worker 1, 50 ms a step), 1 server + 2 workers, and the ratio to ps-sync.
   After the table: what a mode that hid every transient straggler would
   gain with a core per rank, (T + MS(1 - (1-P)^W)) / (T + MS P) with T ps-sync's step
   time without stragglers: ps-sync waits for the slowest of W workers each
   clock, a mode that hides stragglers still loses each worker's own sleeps.
--workers W runs both parts with W workers instead of 2; --model another
model file (the accuracy runs train it --epochs epochs on its dataset).
Every run uses --batch per worker (default 32: the model file's batch of 64
split over the 2 workers, as `make run`, so every mode makes the updates of
the serial reference run).

usage: bench/bench_modes.py [--model examples/cnn.cfg] [--epochs 2] [--steps 200] [--batch 32] [--servers 1,2] [--seeds 1]
                            [--workers 2] [--skip-accuracy] [--skip-throughput]
Prints markdown tables and a final JSON line.
"""
import argparse, json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, 'build', 'dtrain')
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
MODES = [['ps-sync'], ['ps-async'], ['ps-async-nowait'], ['ps-hogwild'], ['ps-ssp', '--staleness', '3']]


STRAGGLE_P, STRAGGLE_MS = 0.1, 50


def run(model, servers, workers, mode, extra, batch):
    cmd = ['mpirun', '--oversubscribe', '--bind-to', 'none', '-np', str(servers + workers), DTRAIN, 'train', model,
           '--threads', '1', '--quiet', '--batch', str(batch), '--mode'] + mode + ['--servers', str(servers)] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=ENV).stdout
    return json.loads(out.strip().splitlines()[-1])


def name(mode):
    return mode[0] + (' s=' + mode[2] if len(mode) > 1 else '')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', default=os.path.join(ROOT, 'examples', 'cnn.cfg'))
    ap.add_argument('--epochs', type=int, default=2)
    ap.add_argument('--steps', type=int, default=200)
    ap.add_argument('--batch', type=int, default=32, help='per worker')
    ap.add_argument('--servers', default='1,2', help='server counts of the accuracy runs')
    ap.add_argument('--seeds', type=int, default=1,
                    help='accuracy runs per mode (seeds 1..N; the table shows their mean)')
    ap.add_argument('--workers', type=int, default=2)
    ap.add_argument('--skip-accuracy', action='store_true')
    ap.add_argument('--skip-throughput', action='store_true')
    a = ap.parse_args()
    result = {'accuracy': [], 'stragglers': []}
    if not a.skip_accuracy:
        # One run's test accuracy moves by up to ~0.7 points with the seed and, in the
        # asynchronous modes, with timing; --seeds N averages N runs per mode.
        print(f'\n| mode | servers | test accuracy (mean of {a.seeds}) | per seed | vs ps-sync | img/s | '
              f'staleness mean | staleness max | max clock gap |')
        print('|---|---|---|---|---|---|---|---|---|')
        for servers in (int(x) for x in a.servers.split(',')):
            sync_acc = None
            for mode in MODES:
                runs = [run(a.model, servers, a.workers, mode, ['--epochs', str(a.epochs), '--seed', str(s)], a.batch)
                        for s in range(1, a.seeds + 1)]
                acc = [j['test_accuracy'] for j in runs]
                mean = sum(acc) / len(acc)
                sync_acc = mean if sync_acc is None else sync_acc
                avg = lambda k: sum(j[k] for j in runs) / len(runs)
                result['accuracy'].append(dict(mode=name(mode), servers=servers, test_accuracy=mean,
                                               per_seed=acc, runs=runs))
                print(f'| {name(mode)} | {servers} | {mean:.4f} | {" ".join(f"{x:.4f}" for x in acc)} | '
                      f'{100 * (mean - sync_acc):+.2f} | {avg("images_per_sec"):.0f} | '
                      f'{avg("staleness_mean"):.2f} | {max(j["staleness_max"] for j in runs):.0f} | '
                      f'{max(j["max_clock_gap"] for j in runs)} |', flush=True)
    if a.skip_throughput:
        print(json.dumps({'event': 'bench_modes', 'epochs': a.epochs, 'batch': a.batch, 'seeds': a.seeds,
                          'results': result}))
        return 0
    straggle = f'{STRAGGLE_P}:{STRAGGLE_MS}'
    cases = [('none', []), (f'transient --straggle {straggle}', ['--straggle', straggle]),
             ('persistent --slow-worker 2:50', ['--slow-worker', '2:50'])]
    print(f'\n| mode | stragglers | img/s | vs ps-sync | staleness mean | max clock gap |')
    print('|---|---|---|---|---|---|')
    bound = None
    for label, extra in cases:
        base = None
        for mode in MODES:
            j = run(a.model, 1, a.workers, mode, ['--dataset', 'synthetic', '--max-steps', str(a.steps)] + extra,
                    a.batch)
            base = base or j['images_per_sec']
            if bound is None:  # ps-sync without stragglers: the step time T, in ms
                t_ms = 1000 * a.batch * a.workers / base
                bound = ((t_ms + STRAGGLE_MS * (1 - (1 - STRAGGLE_P) ** a.workers)) /
                         (t_ms + STRAGGLE_MS * STRAGGLE_P))
            result["stragglers"].append(dict(j, mode=name(mode), stragglers=label))
            print(f'| {name(mode)} | {label} | {j["images_per_sec"]:.0f} | {j["images_per_sec"] / base:.2f} | '
                  f'{j["staleness_mean"]:.2f} | {j["max_clock_gap"]} |', flush=True)
    print(f'\nps-sync step without stragglers: T = {t_ms:.1f} ms. Under transient stragglers a mode that hid '
          f'every straggler but still lost its own workers\' sleeps would be {bound:.2f}x ps-sync with a core per '
          f'rank (ranks that share cores hand a sleeper\'s core to the others, so a run can pass it).')
    print(json.dumps({'event': 'bench_modes', 'model': a.model, 'epochs': a.epochs, 'steps': a.steps,
                      'batch': a.batch, 'workers': a.workers, 'step_ms': t_ms, 'transient_bound': bound,
                      'results': result}))


if __name__ == '__main__':
    sys.exit(main())

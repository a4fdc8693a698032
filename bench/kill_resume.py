#!/usr/bin/python3
"""Kill and resume on real data: for each mode, train MODEL for EPOCHS epochs
uninterrupted; train it again with --checkpoint-every N, SIGKILL one rank
(picked at random) at a random moment, then --resume from the checkpoint the
killed run left; report the steps lost and the final test accuracy against
the uninterrupted run.

usage: bench/kill_resume.py [--model mlp] [--epochs 2] [--every 100] [--seed 1]
       [--modes serial,allreduce,ps-sync,ps-async]
Prints a markdown table and a final JSON line.
"""
import argparse, json, os, random, signal, struct, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, 'build', 'dtrain')
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
RANKS = {'serial': 1, 'allreduce': 2, 'ps-sync': 3, 'ps-async': 3, 'ps-async-nowait': 3, 'ps-ssp': 3}


def command(mode, model, epochs, extra):
    cmd = [DTRAIN, 'train', os.path.join(ROOT, 'examples', model + '.cfg'), '--epochs', str(epochs),
           '--threads', '1', '--quiet'] + extra
    if RANKS[mode] > 1:
        cmd = ['mpirun', '--oversubscribe', '--bind-to', 'none', '-np', str(RANKS[mode])] + cmd + ['--mode', mode]
    return cmd


def summary(out):
    return json.loads([l for l in out.splitlines() if '"summary"' in l][-1])


def ckpt_step(path):
    with open(path, 'rb') as f:
        return struct.unpack_from('<Q', f.read(80), 32)[0]


def steps_logged(log):
    try:
        return sum('"event":"step"' in l for l in open(log))
    except FileNotFoundError:
        return 0


def rank_pids(marker):
    out = subprocess.run(['pgrep', '-f', '^[^ ]*dtrain train .*' + marker], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def trial(mode, a, tmp, rng):
    straight = subprocess.run(command(mode, a.model, a.epochs, ['--seed', str(a.seed)]), capture_output=True,
                              text=True, env=ENV, check=True)
    acc0 = summary(straight.stdout)['test_accuracy']
    ckpt, log = os.path.join(tmp, mode + '.ckpt'), os.path.join(tmp, mode + '.jsonl')
    killed = subprocess.Popen(command(mode, a.model, a.epochs, ['--seed', str(a.seed), '--checkpoint', ckpt,
                                                                '--checkpoint-every', str(a.every), '--log', log]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    total = summary(straight.stdout)['steps']
    # Kill somewhere between 20% and 80% of the run, after the first checkpoint.
    target = rng.uniform(0.2, 0.8) * total
    while killed.poll() is None and (steps_logged(log) < max(target, a.every + 1) or not os.path.exists(ckpt)):
        time.sleep(0.01)
    pids = rank_pids(log)
    victim = rng.choice(pids) if pids else None
    at = steps_logged(log)
    if victim:
        os.kill(victim, signal.SIGKILL)
    killed.wait()
    saved = ckpt_step(ckpt)
    resumed = subprocess.run(command(mode, a.model, a.epochs, ['--seed', str(a.seed), '--resume', ckpt]),
                             capture_output=True, text=True, env=ENV, check=True)
    acc1 = summary(resumed.stdout)['test_accuracy']
    return {'mode': mode, 'ranks': RANKS[mode], 'victim_pid_index': pids.index(victim) if victim else -1,
            'killed_at_step': at, 'checkpoint_step': saved, 'steps_lost': at - saved,
            'uninterrupted_accuracy': acc0, 'resumed_accuracy': acc1, 'delta_points': 100 * (acc1 - acc0)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', default='mlp')
    ap.add_argument('--epochs', type=int, default=2)
    ap.add_argument('--every', type=int, default=100)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--modes', default='serial,allreduce,ps-sync,ps-async')
    a = ap.parse_args()
    rng = random.Random(a.seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        print(f'{a.model}, {a.epochs} epochs, checkpoint every {a.every} steps, one random rank SIGKILLed '
              f'at a random moment, then --resume')
        print('| mode | ranks | killed at step | last checkpoint | steps lost | uninterrupted acc | resumed acc | Δ points |')
        print('|---|---|---|---|---|---|---|---|')
        for mode in a.modes.split(','):
            r = trial(mode, a, tmp, rng)
            rows.append(r)
            print(f"| {mode} | {r['ranks']} | {r['killed_at_step']} | {r['checkpoint_step']} | {r['steps_lost']} | "
                  f"{r['uninterrupted_accuracy']:.4f} | {r['resumed_accuracy']:.4f} | {r['delta_points']:+.2f} |",
                  flush=True)
    print(json.dumps({'event': 'kill_resume', 'model': a.model, 'epochs': a.epochs, 'rows': rows}))


if __name__ == '__main__':
    sys.exit(main())

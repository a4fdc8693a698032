#!/usr/bin/python3
"""dtrain's loader vs torchvision's at ImageNet scale, with RandomResizedCrop(224) + flip.

On an ImageNet-shaped folder (bench/make_imagenet_tree.py: DIR/train/<1000 classes>/
JPEGs of ImageNet's sizes) times, alternately for ROUNDS rounds and for T = 1 and 2
loader threads / worker processes, STEPS training batches of 64 at 3x224x224:
  dtrain   `dtrain bench CFG --data-only --dataset folder --data-dir DIR --cache-mb 0
           --loader-threads T --steps STEPS`, CFG's [net] having augment=resized_crop
           (scale 0.08-1, ratio 3/4-4/3, flip): each sample's whole JPEG decoded (at
           1/2, 1/4 or 1/8 where the region allows), its region resized to 224 x 224;
           after 3 batches of warm-up
  torch    ImageFolder(DIR/train) with RandomResizedCrop(224), RandomHorizontalFlip(),
           ToTensor() in a DataLoader with num_workers=T (worker processes), batch 64,
           shuffled; after its first batch (workers started)
and prints the median images/s of each and their ratio, and dtrain's load time (the
scan, and each file decoded once at 1/8 to check it).

usage: bench/bench_loader.py DIR [--rounds 3] [--steps 30]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, 'build', 'dtrain')
CFG = """[net]
batch=64
channels=3
height=224
width=224
dataset=folder
augment=resized_crop
eval_resize=256

[connected]
output=1000

[softmax]
"""
TORCH_LOADER = r'''
import sys, time, torch, torchvision.transforms as T
from torchvision.datasets import ImageFolder
torch.set_num_threads(1)
root, workers, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor()])
dl = torch.utils.data.DataLoader(ImageFolder(root + "/train", tf), batch_size=64, shuffle=True,
                                 num_workers=workers, drop_last=True)
it = iter(dl)
next(it)                      # workers started and warm, as dtrain's load is not timed either
t0, n = time.perf_counter(), 0
for _ in range(steps):
    x, y = next(it)
    n += x.shape[0]
print(n / (time.perf_counter() - t0))
'''


def dtrain_run(cfg, d, threads, steps):
    out = subprocess.run(['nice', DTRAIN, 'bench', cfg, '--data-only', '--dataset', 'folder', '--data-dir', d,
                          '--cache-mb', '0', '--loader-threads', str(threads), '--steps', str(steps)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def torch_rate(d, threads, steps):
    out = subprocess.run(['nice', '/usr/bin/python3', '-c', TORCH_LOADER, d, str(threads), str(steps)], check=True,
                         capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS='1')).stdout
    return float(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dir')
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--steps', type=int, default=30)
    a = ap.parse_args()
    with tempfile.NamedTemporaryFile('w', suffix='.cfg') as f:
        f.write(CFG)
        f.flush()
        print(f'{a.dir}: batches of 64 at 3x224x224, RandomResizedCrop + flip, {a.steps} batches a run, '
              f'{a.rounds} alternated rounds, medians', flush=True)
        print(f'{"threads":>7} {"dtrain img/s":>13} {"torchvision img/s":>18} {"ratio":>6} '
              f'{"dtrain load_s":>14} {"scan_s":>7}', flush=True)
        for threads in (1, 2):
            d, t, load, scan = [], [], [], []
            for _ in range(a.rounds):
                r = dtrain_run(f.name, a.dir, threads, a.steps)
                d.append(r['images_per_sec'])
                load.append(r['load_s'])
                scan.append(r['scan_s'])
                t.append(torch_rate(a.dir, threads, a.steps))
            md, mt = statistics.median(d), statistics.median(t)
            print(f'{threads:>7} {md:>13.0f} {mt:>18.0f} {md / mt:>6.2f} {statistics.median(load):>14.2f} '
                  f'{statistics.median(scan):>7.2f}', flush=True)
            print(f'        (dtrain {sorted(round(x) for x in d)}, torchvision {sorted(round(x) for x in t)})',
                  flush=True)


if __name__ == '__main__':
    main()

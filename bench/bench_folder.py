#!/usr/bin/python3
"""dtrain's folder loader vs torchvision's ImageFolder + DataLoader, side by side.

Makes (once) a folder of N RGB JPEGs of SIZE x SIZE from Fashion-MNIST
(bench/make_image_folder.py) and times, alternately for ROUNDS rounds, one
pass of training batches of 64 at 3x32x32 (examples/cifar.cfg's input and
augmentation: resize + centre crop, random 4-pixel-padded crop, random flip)
through:
  dtrain   `dtrain bench examples/cifar.cfg --data-only --dataset folder
           --cache-mb 0 --loader-threads T`: every image decoded again for
           every batch (not the in-memory cache), T loader threads
  torch    ImageFolder with Resize(32), CenterCrop(32), RandomCrop(32,
           padding=4), RandomHorizontalFlip(), ToTensor() in a DataLoader
           with num_workers=T (worker processes), batch 64, shuffled
and prints the median images/s of each and the ratio, for T = 1 and 2.

usage: bench/bench_folder.py [--rounds 3] [--images 6000] [--size 128] [--dir /tmp/dt_jpegs]
"""
import argparse, json, os, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, 'build', 'dtrain')
TORCH_LOADER = r'''
import sys, time, torch, torchvision.transforms as T
from torchvision.datasets import ImageFolder
torch.set_num_threads(1)
root, workers = sys.argv[1], int(sys.argv[2])
tf = T.Compose([T.Resize(32), T.CenterCrop(32), T.RandomCrop(32, padding=4),
                T.RandomHorizontalFlip(), T.ToTensor()])
dl = torch.utils.data.DataLoader(ImageFolder(root + "/train", tf), batch_size=64, shuffle=True,
                                 num_workers=workers, drop_last=True)
it = iter(dl)
next(it)                      # workers started and warm, as dtrain's load is not timed either
t0, n = time.perf_counter(), 0
for x, y in it:
    n += x.shape[0]
print(n / (time.perf_counter() - t0))
'''


def dtrain_rate(d, threads, steps):
    out = subprocess.run([DTRAIN, 'bench', os.path.join(ROOT, 'examples', 'cifar.cfg'), '--data-only',
                          '--dataset', 'folder', '--data-dir', d, '--cache-mb', '0',
                          '--loader-threads', str(threads), '--steps', str(steps)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])['images_per_sec']


def torch_rate(d, threads):
    out = subprocess.run(['/usr/bin/python3', '-c', TORCH_LOADER, d, str(threads)], check=True,
                         capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS='1')).stdout
    return float(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--images', type=int, default=6000)
    ap.add_argument('--size', type=int, default=128)
    ap.add_argument('--dir', default='/tmp/dt_jpegs')
    a = ap.parse_args()
    if not os.path.isdir(os.path.join(a.dir, 'train')):
        subprocess.run(['/usr/bin/python3', os.path.join(ROOT, 'bench', 'make_image_folder.py'), 'jpeg',
                        a.dir, str(a.images), str(a.size)], check=True)
    steps = a.images // 64 - 1
    print(f'{a.images} JPEGs of {a.size}x{a.size} RGB in {a.dir}; batches of 64 at 3x32x32, '
          f'{a.rounds} alternated rounds, medians')
    print(f'{"threads":>7} {"dtrain img/s":>13} {"torchvision img/s":>18} {"ratio":>6}')
    for threads in (1, 2):
        d, t = [], []
        for _ in range(a.rounds):
            d.append(dtrain_rate(a.dir, threads, steps))
            t.append(torch_rate(a.dir, threads))
        md, mt = statistics.median(d), statistics.median(t)
        print(f'{threads:>7} {md:>13.0f} {mt:>18.0f} {md / mt:>6.2f}', flush=True)


if __name__ == '__main__':
    main()

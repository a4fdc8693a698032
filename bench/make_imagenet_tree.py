#!/usr/bin/python3
"""make_imagenet_tree.py DIR [--classes 1000] [--per 30] [--procs 2]: an ImageNet-shaped
folder of real JPEGs for the loader at ImageNet scale (docs/IMAGES.md):
DIR/train/nXXXXXXXX/nXXXXXXXX_N.JPEG and DIR/test/nXXXXXXXX/... (a tenth of
--per, at least 1), CLASSES class folders. Each image has ImageNet's typical
size (width 400-500, height 300-375, drawn per file; a fifth are portrait),
a coarse random field of its class's colour enlarged plus pixel noise, saved by
PIL at quality 90 (about 90 KB a file; ImageNet averages about 110 KB). Deterministic
(seeded per file); --procs processes write it."""
import argparse, os, sys
from multiprocessing import Pool

import numpy as np
from PIL import Image


NOISE = 40


def write_class(args):
    out, k, per, val = args
    wnid = "n%08d" % (1440764 + k * 7919)
    for split, count in (("train", per), ("test", val)):
        d = os.path.join(out, split, wnid)
        os.makedirs(d, exist_ok=True)
        for i in range(count):
            rng = np.random.default_rng((k, i, split == "test"))
            w, h = int(rng.integers(400, 501)), int(rng.integers(300, 376))
            if rng.random() < 0.2:
                w, h = h, w
            base = np.array([(k * 97) % 256, (k * 57 + 80) % 256, (255 - k * 83) % 256], np.float32)
            # Structure: a coarse random field of the class's colour, enlarged (bicubic); then noise.
            coarse = np.clip(base + rng.normal(0, 40, (h // 8, w // 8, 3)), 0, 255).astype(np.uint8)
            img = np.asarray(Image.fromarray(coarse, "RGB").resize((w, h), Image.BICUBIC), np.int16)
            img = np.clip(img + rng.integers(-NOISE, NOISE + 1, (h, w, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img, "RGB").save(os.path.join(d, "%s_%d.JPEG" % (wnid, 10000 + i)), "JPEG", quality=90)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--per", type=int, default=30)
    ap.add_argument("--procs", type=int, default=2)
    a = ap.parse_args()
    val = max(1, a.per // 10)
    with Pool(a.procs) as p:
        p.map(write_class, [(a.dir, k, a.per, val) for k in range(a.classes)], chunksize=10)
    print("%s: %d classes, %d train and %d test JPEGs each" % (a.dir, a.classes, a.per, val), file=sys.stderr)


if __name__ == "__main__":
    main()

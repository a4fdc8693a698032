#!/usr/bin/python3
"""Folders of images in the layout `--dataset folder` reads (D/train/<class>/,
D/test/<class>/), made from Fashion-MNIST so that results can be compared
with training on its IDX files.

  make_image_folder.py png OUT            every image as a 28x28 grey PNG,
                                          pixel for pixel (70 000 files)
  make_image_folder.py jpeg OUT N SIZE    the first N training images (and
                                          N/6 test ones) as SIZE x SIZE RGB
                                          JPEGs (quality 90), upscaled and
                                          coloured: a typical photo folder
                                          for decode-throughput benchmarks

Class folders are named by Fashion-MNIST's class names with their label as
a prefix ("0_tshirt" ...), so sorting them gives the IDX labels' order.
"""
import gzip
import os
import sys

import numpy as np
from PIL import Image

FM = "/usr/share/datasets/fashion-mnist"
NAMES = ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
         "boot"]


def idx(stem):
    path = os.path.join(FM, stem)
    data = open(path, "rb").read() if os.path.exists(path) else gzip.open(path + ".gz").read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def split(name):
    prefix = "train" if name == "train" else "t10k"
    return idx(f"{prefix}-images-idx3-ubyte"), idx(f"{prefix}-labels-idx1-ubyte")


def write(out, name, images, labels, save):
    for c, cname in enumerate(NAMES):
        os.makedirs(os.path.join(out, name, f"{c}_{cname}"), exist_ok=True)
    for i, (img, lab) in enumerate(zip(images, labels)):
        save(img, os.path.join(out, name, f"{lab}_{NAMES[lab]}", f"{i:05d}"))


def png(img, base):
    Image.fromarray(img, "L").save(base + ".png")


def jpeg_of(size):
    def save(img, base):
        g = np.asarray(Image.fromarray(img, "L").resize((size, size), Image.BILINEAR))
        rgb = np.stack([g, g // 2 + 64, 255 - g], axis=2).astype(np.uint8)
        Image.fromarray(rgb, "RGB").save(base + ".jpg", quality=90)
    return save


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("png", "jpeg"):
        sys.exit(__doc__)
    kind, out = sys.argv[1], sys.argv[2]
    if kind == "png":
        for name in ("train", "test"):
            write(out, name, *split(name), png)
        return
    n, size = int(sys.argv[3]), int(sys.argv[4])
    for name, count in (("train", n), ("test", max(1, n // 6))):
        images, labels = split(name)
        write(out, name, images[:count], labels[:count], jpeg_of(size))


if __name__ == "__main__":
    main()

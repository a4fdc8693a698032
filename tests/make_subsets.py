"""Small data sets of real Fashion-MNIST images for tests that need fewer
images than the whole test set, or CIFAR-10's format where CIFAR-10 itself
is not installed:
  OUT_DIR/fashion/  the first NTRAIN training and NTEST test images (IDX)
  OUT_DIR/cifar/    the same as CIFAR-10 binary batches (data_batch_1.bin,
                    test_batch.bin): each 28x28 image centred on a 32x32
                    black square, R its grey, G and B other maps of it so
                    the channels differ.

    python3 make_subsets.py FASHION_DIR OUT_DIR NTRAIN NTEST
"""
import gzip
import os
import sys

import numpy as np


def idx(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def idx_write(array, magic, path):
    with open(path, "wb") as f:
        f.write(magic.to_bytes(4, "big"))
        for d in array.shape:
            f.write(int(d).to_bytes(4, "big"))
        f.write(array.astype(np.uint8).tobytes())


def batch(images, labels, path):
    n = len(labels)
    x = np.zeros((n, 3, 32, 32), np.uint8)
    x[:, 0, 2:30, 2:30] = images
    x[:, 1, 2:30, 2:30] = images // 2 + 64
    x[:, 2, 2:30, 2:30] = 255 - images
    rec = np.concatenate([labels.reshape(n, 1), x.reshape(n, 3072)], axis=1)
    rec.astype(np.uint8).tofile(path)


def main():
    src, out, ntrain, ntest = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    for sub in ("fashion", "cifar"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    sets = {}
    for split, n in (("train", ntrain), ("t10k", ntest)):
        for kind, magic in (("images-idx3", 0x803), ("labels-idx1", 0x801)):
            stem = f"{split}-{kind}-ubyte"
            path = next(p for p in (os.path.join(src, stem), os.path.join(src, stem + ".gz"))
                        if os.path.exists(p))
            sets[split, kind] = idx(path)[:n]
            idx_write(sets[split, kind], magic, os.path.join(out, "fashion", stem))
    for split, name in (("train", "data_batch_1.bin"), ("t10k", "test_batch.bin")):
        batch(sets[split, "images-idx3"], sets[split, "labels-idx1"], os.path.join(out, "cifar", name))


if __name__ == "__main__":
    main()

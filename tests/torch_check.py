"""Loads a state_dict written by scripts/export_torch.py --ref NAME into
torch_ref_models' model NAME (strictly: every key) and compares its outputs
on a test set with `dtrain eval --logits-out`.

    torch_check.py REF_DIR NAME MODEL.pt DATASET DIR LOGITS.f32 [TOL]

DATASET fashion-mnist (DIR/t10k-*-ubyte) or cifar10 (DIR/test_batch.bin);
inputs are pixel bytes / 255 as dtrain feeds them. Prints the largest
difference relative to max(1, |logit|) and exits 1 above TOL (1e-4)."""
import gzip
import os
import sys

import numpy as np
import torch


def test_images(kind, d):
    if kind == "cifar10":
        rec = np.fromfile(os.path.join(d, "test_batch.bin"), np.uint8).reshape(-1, 3073)
        return rec[:, 1:].reshape(-1, 3, 32, 32)
    path = os.path.join(d, "t10k-images-idx3-ubyte")
    data = open(path, "rb").read() if os.path.exists(path) else gzip.open(path + ".gz").read()
    n, h, w = (int.from_bytes(data[4 * i:4 * i + 4], "big") for i in (1, 2, 3))
    return np.frombuffer(data, np.uint8, n * h * w, 16).reshape(n, 1, h, w)


def main():
    ref_dir, name, pt, kind, d, logits = sys.argv[1:7]
    tol = float(sys.argv[7]) if len(sys.argv) > 7 else 1e-4
    sys.path.insert(0, ref_dir)
    import torch_ref_models

    torch.set_num_threads(1)
    model = torch_ref_models.model(name)
    model.load_state_dict(torch.load(pt), strict=True)
    model.eval()
    x = torch.from_numpy(test_images(kind, d).astype(np.float32) / 255)
    with torch.no_grad():
        out = torch.cat([model(x[i:i + 500]) for i in range(0, len(x), 500)]).numpy()
    ref = np.fromfile(logits, np.float32).reshape(out.shape)
    rel = float(np.max(np.abs(out - ref) / np.maximum(1, np.abs(ref))))
    print(f"torch {name}: {len(x)} samples, largest relative difference {rel:.3g}")
    sys.exit(0 if rel <= tol else 1)


main()

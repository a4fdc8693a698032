#!/usr/bin/python3
"""Compares `darknet classifier valid` with `dtrain eval` on the same images.

    darknet_valid_check.py compare VALID_OUT LOGITS CLASSES DTRAIN_ACCURACY TOL
    darknet_valid_check.py eps to-dtrain|to-darknet IN OUT OFFSET:N...

compare: VALID_OUT is darknet's output: per image (the .data's valid list, in
order) a line "PATH, CLASS, P0, P1, " (its probabilities of classes 0 and 1,
%f) and one "I: top 1: ACC, ..." (the running top-1 accuracy; the last is the
set's). LOGITS: dtrain eval --logits-out, float32 (images, CLASSES) in the
same order. Passes when every printed probability is within TOL of dtrain's
softmax and the accuracies are equal, except that an image whose two largest
dtrain probabilities are within TOL of each other may be decided either way.
Prints the figures.

The two programs compute the same function but for batch norm's epsilon:
Darknet divides by sqrt(var) + 1e-6, dtrain (as PyTorch) by sqrt(var + 1e-5),
so an activation normalised with running variance v differs by a relative
(1e-5 - 2e-6 sqrt(v)) / 2v: 2e-3 for v = 0.0025, a variance seen in the
first layer after one epoch of Darknet's training here; probabilities then
differ by a few 1e-2 (up to 0.052 seen). eps rewrites a weights file's variances (the float32
arrays of N values at float offset OFFSET after the 20-byte header) so that
the other program's formula gives this one's divisor: to-dtrain v' =
(sqrt(v) + 1e-6)^2 - 1e-5 (a Darknet file for dtrain), to-darknet v' =
(sqrt(v + 1e-5) - 1e-6)^2 (dtrain's file for Darknet). With that, what is
left is the order of the sums (OpenBLAS, oneDNN) and %f's rounding: ~1e-5.
"""
import sys

import numpy as np


def compare(valid_out, logits_path, classes, dtrain_acc, tol):
    probs, acc = [], None
    with open(valid_out) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if " top 1: " in line:
                acc = float(line.split(" top 1: ")[1].split(",")[0])
            elif len(parts) >= 4 and parts[0].startswith("/"):
                probs.append((float(parts[2]), float(parts[3])))
    logits = np.fromfile(logits_path, np.float32).reshape(-1, classes).astype(np.float64)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    if acc is None or len(probs) != len(p):
        print("darknet printed %d images and %s accuracy, dtrain evaluated %d" % (len(probs), acc, len(p)))
        return 1
    diff = np.abs(p[:, :2] - np.array(probs)).max()
    top2 = np.sort(p, 1)[:, -2:]
    ties = int((top2[:, 1] - top2[:, 0] < tol).sum())
    wrong = abs(acc - dtrain_acc) * len(p)
    print("darknet valid top-1 %.6f, dtrain eval %.4f on %d images; largest probability difference %.2g "
          "(tolerance %g); near ties %d" % (acc, dtrain_acc, len(p), diff, tol, ties))
    return 0 if diff <= tol and wrong <= ties + 0.5 else 1


def eps(direction, src, dst, spans):
    raw = np.fromfile(src, np.uint8)
    floats = raw[20:].view(np.float32).copy()
    for span in spans:
        off, n = (int(x) for x in span.split(":"))
        v = floats[off:off + n].astype(np.float64)
        if direction == "to-dtrain":
            v = (np.sqrt(v) + 1e-6) ** 2 - 1e-5
        else:
            v = (np.sqrt(v + 1e-5) - 1e-6) ** 2
        floats[off:off + n] = v.astype(np.float32)
    np.concatenate([raw[:20], floats.view(np.uint8)]).tofile(dst)
    return 0


if __name__ == "__main__":
    a = sys.argv
    if len(a) == 7 and a[1] == "compare":
        sys.exit(compare(a[2], a[3], int(a[4]), float(a[5]), float(a[6])))
    if len(a) >= 6 and a[1] == "eps" and a[2] in ("to-dtrain", "to-darknet"):
        sys.exit(eps(a[2], a[3], a[4], a[5:]))
    sys.exit(__doc__)

#!/usr/bin/python3
"""Compares two dtrain checkpoints (format: include/dtrain/checkpoint.h).
usage: ckpt_diff.py A B TOL  -> prints the largest absolute differences of
parameters and optimiser state (any optimiser, any version); exit 1 if either exceeds TOL (0 = identical).
A checkpoint without optimiser state (dtrain_model_save, Python's model.save) compares by its parameters:
the state is compared only where both have it."""
import struct, sys
import numpy as np


def load(path):
    raw = open(path, 'rb').read()
    assert raw[:8] == b'DTCKPT01', path + ': not a checkpoint'
    nparams, nstate, nmom = struct.unpack_from('<QQQ', raw, 56)
    f = np.frombuffer(raw, '<f4', nparams + nstate + nmom, 80)
    step = struct.unpack_from('<Q', raw, 32)[0]
    return step, f[:nparams], f[nparams + nstate:]


def largest(x, y):
    # np.max of an empty difference raises; nothing to differ is 0
    return float(np.max(np.abs(x - y))) if x.size else 0.0


a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
sa, pa, ma = load(a)
sb, pb, mb = load(b)
if sa != sb or pa.shape != pb.shape:
    sys.exit(f'{a} (step {sa}, {pa.size} params) vs {b} (step {sb}, {pb.size} params): not comparable')
if ma.size and mb.size and ma.shape != mb.shape:
    sys.exit(f'{a} ({ma.size} optimiser values) vs {b} ({mb.size}): not comparable (another optimiser)')
dp = largest(pa, pb)
if ma.size and mb.size:
    dm = largest(ma, mb)
    state = f'max |optimiser state diff| {dm:.3g}'
else:
    dm = 0.0
    state = 'optimiser state not compared (%s has none)' % (a if not ma.size else b)
print(f'max |param diff| {dp:.3g}, {state} (tolerance {tol:g}, step {sa})')
sys.exit(0 if dp <= tol and dm <= tol else 1)

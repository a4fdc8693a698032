#!/usr/bin/python3
"""Compares two dtrain checkpoints (format: include/dtrain/checkpoint.h).
usage: ckpt_diff.py A B TOL  -> prints the largest absolute differences of
parameters and optimiser state (any optimiser, any version); exit 1 if either exceeds TOL (0 = identical)."""
import struct, sys
import numpy as np


def load(path):
    raw = open(path, 'rb').read()
    assert raw[:8] == b'DTCKPT01', path + ': not a checkpoint'
    nparams, nstate, nmom = struct.unpack_from('<QQQ', raw, 56)
    f = np.frombuffer(raw, '<f4', nparams + nstate + nmom, 80)
    step = struct.unpack_from('<Q', raw, 32)[0]
    return step, f[:nparams], f[nparams + nstate:]


a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
sa, pa, ma = load(a)
sb, pb, mb = load(b)
if sa != sb or pa.shape != pb.shape:
    sys.exit(f'{a} (step {sa}, {pa.size} params) vs {b} (step {sb}, {pb.size} params): not comparable')
dp, dm = float(np.max(np.abs(pa - pb))), float(np.max(np.abs(ma - mb)))
print(f'max |param diff| {dp:.3g}, max |optimiser state diff| {dm:.3g} (tolerance {tol:g}, step {sa})')
sys.exit(0 if dp <= tol and dm <= tol else 1)

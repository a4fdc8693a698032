#!/usr/bin/python3
"""The first layers of two dtrain checkpoints (format: include/dtrain/checkpoint.h,
version 7 and later: the architecture at the end) compared bit for bit.
usage: ckpt_layers.py A B N [FROM]  -> exit 0 when layers FROM..N-1 (FROM: 0) have the
same kind, shapes and parameters and state in both files, 1 (saying where) otherwise."""
import struct
import sys

import numpy as np


def load(path):
    raw = open(path, 'rb').read()
    assert raw[:8] == b'DTCKPT01', path + ': not a checkpoint'
    version = struct.unpack_from('<I', raw, 8)[0]
    assert version >= 7, f'{path}: version {version} has no layer table'
    nparams, nstate, nopt = struct.unpack_from('<QQQ', raw, 56)
    f = np.frombuffer(raw, '<f4', nparams + nstate, 80)
    at = 80 + 4 * (nparams + nstate + nopt) + 24
    at += 8 + struct.unpack_from('<II', raw, at)[1]           # class names
    nworkers, _, each = struct.unpack_from('<IIQ', raw, at)   # worker state
    at += 16 + 4 * nworkers * each + 8 + 32                   # the samples per step, the epoch
    nlayers = struct.unpack_from('<I', raw, at)[0]            # then u32 input C, H, W
    # per layer: u32 kind, input C, H, W, output C, H, W, 0; u64 weights, biases, state
    table = [struct.unpack_from('<I3I3IIQQQ', raw, at + 16 + 56 * i) for i in range(nlayers)]
    return f[:nparams], f[nparams:], table


def prefix(table, n):
    """Floats of parameters and of state in the first n layers."""
    return sum(e[8] + e[9] for e in table[:n]), sum(e[10] for e in table[:n])


pa, sa, ta = load(sys.argv[1])
pb, sb, tb = load(sys.argv[2])
n = int(sys.argv[3])
lo = int(sys.argv[4]) if len(sys.argv) > 4 else 0
for i in range(n):
    if ta[i] != tb[i]:
        sys.exit(f'layer {i}: {ta[i]} vs {tb[i]}')
(p0, s0), (p1, s1) = prefix(ta, lo), prefix(ta, n)
dp = np.nonzero(pa[p0:p1].view(np.uint32) != pb[p0:p1].view(np.uint32))[0]
ds = np.nonzero(sa[s0:s1].view(np.uint32) != sb[s0:s1].view(np.uint32))[0]
print(f'layers {lo}..{n - 1}: {p1 - p0} parameters, {s1 - s0} state values; {dp.size} and {ds.size} differ')
sys.exit(1 if dp.size or ds.size else 0)

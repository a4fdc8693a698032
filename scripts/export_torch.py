#!/usr/bin/env python3
"""PyTorch export of a dtrain checkpoint: a state_dict for torch.load.

    export_torch.py MODEL.cfg CHECKPOINT -o model.pt [--ref NAME | --module FILE.py:FUNC]
                    [--dtrain PATH] [--ref-dir DIR]

Reads the checkpoint by its documented layout (docs/EXPORT.md) and slices
its flat blocks with the per-layer tensor shapes of `dtrain info MODEL.cfg
--json`. With --ref NAME (mlp, cnn, cifar, resnet20, resnet20_fm) the
tensors are renamed to the keys of ../shared/reference/torch_ref_models.py's
model NAME, and with --module FILE.py:FUNC to those of the nn.Module FUNC()
returns: both must register the same parameters and batch-norm buffers in
dtrain's layer order, with the same shapes (checked: the first mismatch is
an error naming both tensors). Without either, the keys are dtrain's own:
"l<layer>.weight", ".bias", ".running_mean", ".running_var". dtrain does not
write PyTorch modules for arbitrary model files; docs/EXPORT.md says how to
run any of them through ONNX instead.

Exit status 0, or 1 with a one-line error.
"""
import argparse
import importlib.util
import json
import os
import struct
import subprocess
import sys
import zlib

HEADER = struct.Struct("<8sIIQQQQiiQQQ")  # 80 bytes, see include/dtrain/checkpoint.h
MAGIC = b"DTCKPT01"


class ExportError(Exception):
    pass


def read_checkpoint(path):
    """(shape hash, params, state) of a checkpoint, after checking its CRC
    and that its arrays fit in the file."""
    import numpy as np

    with open(path, "rb") as f:
        data = f.read()
    if len(data) < HEADER.size + 4 or data[:8] != MAGIC:
        raise ExportError(f"{path}: not a dtrain checkpoint")
    body, (crc,) = data[:-4], struct.unpack("<I", data[-4:])
    if zlib.crc32(body) != crc:
        raise ExportError(f"{path}: CRC mismatch (damaged checkpoint)")
    _, version, _, shape_hash, _, _, _, _, _, nparams, nstate, nopt = HEADER.unpack_from(data)
    if not 1 <= version <= 7:
        raise ExportError(f"{path}: checkpoint version {version} is not one this script reads (1-7)")
    if HEADER.size + 4 * (nparams + nstate + nopt) + 4 > len(data):
        raise ExportError(f"{path}: its arrays run past the end of the file")
    off = HEADER.size
    params = np.frombuffer(data, "<f4", nparams, off)
    state = np.frombuffer(data, "<f4", nstate, off + 4 * nparams)
    return shape_hash, params, state


def dtrain_tensors(dtrain, model, ckpt, shape_hash, params, state):
    """[(dtrain name, numpy array)] in checkpoint order (parameters and state
    blocks each in layer order, a layer's tensors in its listed order)."""
    out = subprocess.run([dtrain, "info", model, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise ExportError(out.stderr.strip() or f"dtrain info {model} failed")
    graph = json.loads(out.stdout)
    if int(graph["shape_hash"], 16) != shape_hash:
        raise ExportError(f"{ckpt}: checkpoint is for a different model (shape hash {shape_hash:016x}, "
                          f"{model} has {graph['shape_hash']})")
    offset = {"params": 0, "state": 0}
    blocks = {"params": params, "state": state}
    tensors = []
    for node in graph["nodes"]:
        for t in node.get("tensors", []):
            n = 1
            for d in t["shape"]:
                n *= d
            block, at = t["block"], offset[t["block"]]
            if at + n > len(blocks[block]):
                raise ExportError(f"{model}: checkpoint holds fewer values than the model's {block}")
            arr = blocks[block][at:at + n].reshape(t["shape"])
            tensors.append((f"l{node['id'][1:]}.{t['name']}", arr))
            offset[block] = at + n
    for block, used in offset.items():
        if used != len(blocks[block]):
            raise ExportError(f"{model}: checkpoint's {block} block has {len(blocks[block])} values, "
                              f"the model {used}")
    return tensors


def target_module(args):
    if args.ref:
        sys.path.insert(0, args.ref_dir)
        import torch_ref_models
        return torch_ref_models.model(args.ref)
    path, _, func = args.module.rpartition(":")
    if not path or not func:
        raise ExportError(f"--module {args.module}: expected FILE.py:FUNC")
    spec = importlib.util.spec_from_file_location("user_module", path)
    if spec is None:
        raise ExportError(f"--module {args.module}: {path} is not a Python file")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not hasattr(mod, func):
        raise ExportError(f"--module {args.module}: {path} has no {func}")
    return getattr(mod, func)()


def rename(tensors, module):
    """dtrain's tensors under module's state_dict keys, in order."""
    import torch

    keys = [(k, v) for k, v in module.state_dict().items() if not k.endswith("num_batches_tracked")]
    if len(keys) != len(tensors):
        raise ExportError(f"the torch module has {len(keys)} parameters and buffers, "
                          f"the checkpoint {len(tensors)} tensors")
    sd = {}
    for (key, ref), (name, arr) in zip(keys, tensors):
        if tuple(ref.shape) != arr.shape:
            raise ExportError(f"torch '{key}' {tuple(ref.shape)} does not match dtrain '{name}' {arr.shape}")
        sd[key] = torch.from_numpy(arr.copy())
    for k, v in module.state_dict().items():
        if k.endswith("num_batches_tracked"):
            sd[k] = v.clone()
    return sd


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("checkpoint")
    p.add_argument("-o", required=True, help="output .pt (a state_dict)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--ref", help="name of a torch_ref_models.py model")
    g.add_argument("--module", help="FILE.py:FUNC returning the nn.Module")
    p.add_argument("--dtrain", default=os.path.join(here, "..", "build", "dtrain"))
    p.add_argument("--ref-dir", default=os.path.join(here, "..", "..", "shared", "reference"))
    args = p.parse_args()
    tmp = args.o + ".tmp"
    try:
        import torch

        shape_hash, params, state = read_checkpoint(args.checkpoint)
        tensors = dtrain_tensors(args.dtrain, args.model, args.checkpoint, shape_hash, params, state)
        if args.ref or args.module:
            sd = rename(tensors, target_module(args))
        else:
            sd = {name: torch.from_numpy(arr.copy()) for name, arr in tensors}
        torch.save(sd, tmp)
        os.replace(tmp, args.o)
        print(f"export_torch: {len(sd)} tensors from {args.checkpoint} -> {args.o}")
    except Exception as e:  # one line, whatever failed (a user module may raise anything)
        if os.path.exists(tmp):
            os.remove(tmp)
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"export_torch: {msg}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

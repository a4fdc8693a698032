"""tests/ckpt_diff.py, the checkpoint comparer the shell tests use: with and
without optimiser state (model.save writes none)."""
import struct
import subprocess

import numpy as np

import dtrain
from conftest import PYTHON, SRC, example

DIFF = SRC + "/tests/ckpt_diff.py"


def write(path, step, params, opt):
    """A checkpoint's header fields ckpt_diff reads (magic, step, counts) and its arrays."""
    head = bytearray(80)
    head[:8] = b"DTCKPT01"
    struct.pack_into("<Q", head, 32, step)
    struct.pack_into("<QQQ", head, 56, len(params), 0, len(opt))
    path.write_bytes(bytes(head) + np.asarray(list(params) + list(opt), "<f4").tobytes())
    return str(path)


def diff(a, b, tol=0):
    return subprocess.run([PYTHON, DIFF, a, b, str(tol)], capture_output=True, text=True)


def test_without_optimiser_state(tmp_path):
    a = write(tmp_path / "a", 5, [1, 2, 3], [])
    same, other = write(tmp_path / "b", 5, [1, 2, 3], []), write(tmp_path / "c", 5, [1, 2, 3.5], [])
    r = diff(a, same)
    assert r.returncode == 0 and "not compared" in r.stdout, r.stdout + r.stderr
    assert diff(a, other).returncode == 1
    assert diff(a, other, 0.5).returncode == 0


def test_state_on_one_side_compares_the_parameters(tmp_path):
    bare, full = write(tmp_path / "a", 5, [1, 2], []), write(tmp_path / "b", 5, [1, 2], [7, 8])
    r = diff(bare, full)
    assert r.returncode == 0 and "not compared" in r.stdout, r.stdout + r.stderr
    assert diff(full, write(tmp_path / "c", 5, [1, 2], [7, 9])).returncode == 1
    assert "not comparable" in diff(full, write(tmp_path / "d", 5, [1, 2], [7])).stderr


def test_saved_models(tmp_path):
    m = dtrain.Model(example("mlp.cfg"))
    m.save(str(tmp_path / "a.ckpt"))
    m.save(str(tmp_path / "b.ckpt"))
    r = diff(str(tmp_path / "a.ckpt"), str(tmp_path / "b.ckpt"))
    assert r.returncode == 0, r.stdout + r.stderr

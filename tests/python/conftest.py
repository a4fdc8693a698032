"""Shared set-up of the Python package's tests (run by CTest's test_python,
or `PYTHONPATH=python /usr/bin/python3 -m pytest tests/python` from a built
checkout): the package from this checkout's python/, the library from the
build directory (DT_BUILD_DIR, default build/), Fashion-MNIST read into
numpy, and helpers to run the CLI and compare checkpoints."""
import gzip
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

SRC = os.environ.get("DT_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DT_BUILD_DIR") or os.path.join(SRC, "build")
DTRAIN = os.path.join(BUILD, "dtrain")
PYTHON = "/usr/bin/python3"
FM = "/usr/share/datasets/fashion-mnist"
os.environ.setdefault("DTRAIN_LIBRARY", os.path.join(BUILD, "libdtrain.so"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
    os.environ.setdefault(k, "1")
sys.path.insert(0, os.path.join(SRC, "python"))
sys.path.insert(0, os.path.dirname(__file__))

MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none"]


def env():
    """The environment of a child process that imports this checkout's package."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.path.join(SRC, "python") + os.pathsep + os.path.dirname(__file__)
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    return e


def read_idx(path):
    """An IDX file (gzip'd or not) as a numpy array of its shape."""
    raw = (gzip.open if path.endswith(".gz") else open)(path, "rb").read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


_fm = {}


def fashion_mnist():
    """(x_train (60000, 28, 28) uint8, y_train, x_test (10000, 28, 28), y_test)."""
    if not _fm:
        _fm["v"] = tuple(read_idx(os.path.join(FM, f)) for f in (
            "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
            "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"))
    return _fm["v"]


@pytest.fixture(scope="session")
def fm():
    if not os.path.exists(os.path.join(FM, "train-images-idx3-ubyte.gz")):
        pytest.skip("Fashion-MNIST is not installed (dataset-fashion-mnist)")
    return fashion_mnist()


def ckpt_params(path):
    """A dtrain checkpoint's parameters (include/dtrain/checkpoint.h) as float32."""
    raw = open(path, "rb").read()
    assert raw[:8] == b"DTCKPT01", path + ": not a checkpoint"
    nparams, = struct.unpack_from("<Q", raw, 56)
    return np.frombuffer(raw, "<f4", nparams, 80)


def cli(*args, check=True, **kw):
    """Runs build/dtrain ARGS; returns the CompletedProcess (text)."""
    p = subprocess.run([DTRAIN] + [str(a) for a in args], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"dtrain {' '.join(map(str, args))}: exit {p.returncode}\n{p.stdout[-2000:]}\n"
                             f"{p.stderr[-2000:]}")
    return p


def last_json(text):
    """The last line of text that is a JSON object."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError("no JSON line in:\n" + text[-2000:])


def example(name):
    return os.path.join(SRC, "examples", name)

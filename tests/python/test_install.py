"""`make install`'s layout: the package in PREFIX/lib/python3/dist-packages
finds the library installed beside it (no checkout, no DTRAIN_LIBRARY)."""
import os
import subprocess

import pytest

from conftest import BUILD, PYTHON, example


def test_installed_package_finds_its_library(tmp_path):
    prefix = tmp_path / "prefix"
    p = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    site = prefix / "lib" / "python3" / "dist-packages"
    if not (site / "dtrain" / "__init__.py").exists():
        pytest.fail("make install put no Python package in PREFIX/lib/python3/dist-packages:\n" + p.stdout[-2000:])
    e = {k: v for k, v in os.environ.items() if k not in ("DTRAIN_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")}
    e["PYTHONPATH"] = str(site)
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    code = ("import dtrain, numpy as np, sys\n"
            "m = dtrain.Model(sys.argv[1])\n"
            "print(dtrain.library_path)\n"
            "print(m.predict(np.zeros((2, 28, 28), np.uint8)).shape)\n")
    r = subprocess.run([PYTHON, "-c", code, example("mlp.cfg")], cwd=str(tmp_path), capture_output=True, text=True,
                       env=e, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lib, shape = r.stdout.split("\n")[:2]
    assert os.path.realpath(lib).startswith(os.path.realpath(prefix)), lib
    assert shape == "(2, 10)"

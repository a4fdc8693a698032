"""The README's Python example runs as written from a built checkout
(PYTHONPATH=python, the working directory the checkout's root)."""
import os
import re
import subprocess

from conftest import BUILD, PYTHON, SRC


def readme_example():
    text = open(os.path.join(SRC, "README.md")).read()
    sec = text[text.index("\n## Python"):]
    m = re.search(r"```python\n(.*?)```", sec, re.S)
    assert m, "README.md's Python section has a ```python block"
    return m.group(1)


def test_readme_python_example(tmp_path):
    code = readme_example()
    e = dict(os.environ, PYTHONPATH="python", PYTHONDONTWRITEBYTECODE="1")
    if os.path.realpath(BUILD) == os.path.realpath(os.path.join(SRC, "build")):
        e.pop("DTRAIN_LIBRARY", None)  # as written: the package finds build/libdtrain.so itself
    p = subprocess.run([PYTHON, "-c", code], cwd=SRC, capture_output=True, text=True, env=e, timeout=600)
    print(p.stdout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert re.search(r"test accuracy 0\.[6-9]\d*", p.stdout), p.stdout

"""Every bad input is an exception of the right class carrying a one-line
message, raised before the library runs where Python can tell; the
interpreter goes on (a good fit runs afterwards)."""
import numpy as np
import pytest

import dtrain
from conftest import example

BAD_CFG = "[net]\nchannels=1\nheight=28\nwidth=28\n\n[connected]\noutput=10\nfitler=3\nactivation=linear\n[softmax]\n"


@pytest.fixture(scope="module")
def m():
    return dtrain.Model(example("mlp.cfg"))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    return rng.integers(0, 256, (64, 28, 28), dtype=np.uint8), rng.integers(0, 10, 64).astype(np.int64)


def one_line(e):
    msg = str(e.value)
    assert msg and "\n" not in msg, msg
    assert isinstance(e.value, dtrain.Error)
    return msg


def test_model_errors(tmp_path):
    with pytest.raises(dtrain.FileError) as e:
        dtrain.Model(str(tmp_path / "missing.cfg"))
    assert "missing.cfg" in one_line(e)
    with pytest.raises(dtrain.ConfigError, match="fitler") as e:
        dtrain.Model(BAD_CFG)
    one_line(e)
    with pytest.raises(dtrain.ConfigError):
        dtrain.Model("[net]\nchannels=1\n\n[bogus]\n")
    with pytest.raises(dtrain.FileError):
        dtrain.Model(example("mlp.cfg"), weights=tmp_path / "none.ckpt")
    (tmp_path / "junk.ckpt").write_bytes(b"not a checkpoint at all" * 10)
    with pytest.raises(dtrain.FormatError) as e:
        dtrain.Model(example("mlp.cfg"), weights=tmp_path / "junk.ckpt")
    one_line(e)
    with pytest.raises(dtrain.DtypeError):
        dtrain.Model(42)


def test_weights_of_another_model(tmp_path):
    dtrain.Model(example("mlp.cfg")).save(tmp_path / "mlp.ckpt")
    with pytest.raises((dtrain.FormatError, dtrain.UsageError, dtrain.ConfigError)) as e:
        dtrain.Model(example("cnn.cfg"), weights=tmp_path / "mlp.ckpt")
    one_line(e)


@pytest.mark.parametrize("xf, yf, exc, match", [
    (lambda x: x.astype(np.float64), None, dtrain.DtypeError, "float64"),
    (lambda x: x.astype(np.int32), None, dtrain.DtypeError, "int32"),
    (lambda x: x[:, :27], None, dtrain.UsageError, r"\(64, 27, 28\)"),
    (lambda x: x.reshape(64, 784), None, dtrain.UsageError, "input"),
    (lambda x: np.stack([x, x], 1), None, dtrain.UsageError, "input"),
    (None, lambda y: y[:-1], dtrain.UsageError, "63 labels for 64 images"),
    (None, lambda y: np.where(np.arange(64) == 7, 10, y), dtrain.FormatError, r"y\[7\]: label 10 out of range"),
    (None, lambda y: np.where(np.arange(64) == 3, -1, y), dtrain.FormatError, "label -1"),
    (None, lambda y: y.astype(np.float32), dtrain.DtypeError, "integers"),
    (None, lambda y: y.reshape(8, 8), dtrain.UsageError, "shape"),
])
def test_fit_bad_arrays(m, data, xf, yf, exc, match):
    x, y = data
    with pytest.raises(exc, match=match) as e:
        m.fit(xf(x) if xf else x, yf(y) if yf else y, max_steps=1, verbose=False)
    one_line(e)


def test_fit_bad_arguments(m, data, tmp_path):
    x, y = data
    with pytest.raises(dtrain.UsageError):
        m.fit(x, None)
    with pytest.raises(dtrain.UsageError, match="not both"):
        m.fit(x, y, dataset="mnist")
    with pytest.raises(dtrain.UsageError, match="validation_data"):
        m.fit(x, y, validation_data=(x,), max_steps=1, verbose=False)
    with pytest.raises(dtrain.UsageError, match="validation_data"):
        m.fit(x, y, validation_data=(x[:10], y[:9]), max_steps=1, verbose=False)
    with pytest.raises(dtrain.UsageError, match="batch") as e:  # the library's message
        m.fit(x, y, batch="x", verbose=False)
    one_line(e)
    with pytest.raises(dtrain.UsageError, match="no_such_flag|no-such-flag") as e:
        m.fit(x, y, no_such_flag=1, verbose=False)
    one_line(e)
    with pytest.raises(dtrain.UsageError):
        m.fit(x, y, mode="ps-magic", verbose=False)
    with pytest.raises(dtrain.UsageError):
        m.fit(x, y, callbacks=[42])
    with pytest.raises(dtrain.UsageError):
        m.fit(x, y, lr={"a": 1})
    with pytest.raises(dtrain.FileError):
        m.fit(data=str(tmp_path / "missing.data"), verbose=False)
    with pytest.raises(dtrain.FileError):
        m.fit(dataset="fashion-mnist", data_dir=str(tmp_path / "nowhere"), verbose=False)


def test_inference_errors(m, data, tmp_path):
    x, y = data
    with pytest.raises(dtrain.UsageError):
        m.predict(x[:, :20])
    with pytest.raises(dtrain.DtypeError):
        m.predict(x.astype(np.float16))
    with pytest.raises(dtrain.DtypeError):
        m.predict("images")
    with pytest.raises(dtrain.UsageError, match="no images"):
        m.predict(x[:0])
    with pytest.raises(dtrain.UsageError, match="labels for"):
        m.evaluate(x, y[:5])
    with pytest.raises(dtrain.FormatError):
        m.evaluate(x, y + 10)
    with pytest.raises(dtrain.FileError) as e:
        m.save(tmp_path / "no" / "such" / "dir" / "m.ckpt")
    one_line(e)
    with pytest.raises(dtrain.Error) as e:
        m.export(tmp_path / "m.unknown-format")
    one_line(e)


def test_interpreter_goes_on(m, data):
    """After all of the above the same model trains, predicts, evaluates."""
    x, y = data
    h = m.fit(x, y, max_steps=2, batch=16, threads=1, verbose=False)
    assert h.summary["steps"] == 2
    assert m.predict(x).shape == (64, 10)
    assert 0 <= m.evaluate(x, y)["accuracy"] <= 1


def test_exception_classes():
    assert issubclass(dtrain.UsageError, ValueError) and issubclass(dtrain.DtypeError, TypeError)
    assert issubclass(dtrain.FileError, OSError) and issubclass(dtrain.ConfigError, dtrain.Error)
    e = dtrain.FileError("x.cfg: no such file", 3)
    assert str(e) == "x.cfg: no such file" and e.status == 3

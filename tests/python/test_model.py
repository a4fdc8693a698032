"""Model: loading from a path or text, summary() against `dtrain info`,
the Sequential builder, rank and world in one process."""
import re

import numpy as np
import pytest

import dtrain
from conftest import cli, example


def info_layers(path):
    rows = []
    for line in cli("info", path).stdout.splitlines():
        m = re.match(r"^(\d+)\s+(\w+)\s+\d+\s+\S+\s+(\d+)x(\d+)x(\d+)\s+(\d+)\s", line)
        if m:
            rows.append({"index": int(m[1]), "kind": m[2], "shape": (int(m[3]), int(m[4]), int(m[5])),
                         "params": int(m[6])})
    return rows


@pytest.mark.parametrize("name", ["cnn.cfg", "mlp.cfg", "resnet20_fm.cfg"])
def test_summary_is_info(name):
    m = dtrain.Model(example(name))
    s = m.summary()
    assert s == info_layers(example(name))
    assert m.params == sum(r["params"] for r in s)
    assert m.layers == len(s)


def test_model_shape():
    m = dtrain.Model(example("cnn.cfg"))
    assert m.input_shape == (1, 28, 28) and m.classes == 10 and m.params == 3274634 and m.outputs == 10
    assert "3274634 parameters" in repr(m)


def test_model_from_text_equals_file():
    text = open(example("mlp.cfg")).read()
    a, b = dtrain.Model(text), dtrain.Model(example("mlp.cfg"))
    assert a.summary() == b.summary()
    x = np.arange(4 * 784, dtype=np.uint8).reshape(4, 28, 28)
    assert np.array_equal(a.predict(x), b.predict(x)), "both initialised from seed 1"


def test_sequential_builds_the_example_cnn():
    net = (dtrain.Sequential((1, 28, 28), batch=64, learning_rate=0.01, momentum=0.9, decay=0.0005,
                             exclude_bias_bn=0, epochs=2, policy="constant")
           .conv(32, 5).maxpool(2).conv(64, 5).maxpool(2)
           .dense(1024).dense(10, activation="linear").softmax())
    text = net.text()
    assert text.startswith("[net]\nchannels=1\nheight=28\nwidth=28\n")
    m = net.build()
    ref = dtrain.Model(example("cnn.cfg"))
    assert m.summary() == ref.summary()
    x = (np.arange(3 * 784) % 251).astype(np.uint8).reshape(3, 1, 28, 28)
    assert np.array_equal(m.predict(x), ref.predict(x))


def test_sequential_keys_and_errors(tmp_path):
    net = (dtrain.Sequential((28, 28), batch=8).dense(16, batch_normalize=1).dropout(0.25)
           .dense(3, activation="linear").softmax())
    assert "[dropout]\nprobability=0.25" in net.text() and "batch_normalize=1" in net.text()
    p = net.save(tmp_path / "n.cfg")
    assert dtrain.Model(p).classes == 3
    with pytest.raises(dtrain.ConfigError, match="fitler"):
        dtrain.Sequential((1, 8, 8)).add("convolutional", fitler=3, size=3).build()


def test_rank_world_alone():
    assert dtrain.rank() == 0 and dtrain.world() == 1
    assert dtrain.__version__.count(".") == 2


def test_role_alone():
    """Before any fit: one process is worker 0 in the modes that run on one
    rank; a ps-* mode needs a rank beyond its servers, as fit would say."""
    assert dtrain.role() == "chief" and dtrain.is_chief()
    assert dtrain.is_chief(mode="serial", epochs=1)
    with pytest.raises(dtrain.UsageError, match="needs at least 2 ranks"):
        dtrain.role(mode="ps-sync", servers=1)
    with pytest.raises(dtrain.UsageError, match="unknown mode 'nope'"):
        dtrain.is_chief(mode="nope")
    with pytest.raises(dtrain.UsageError, match="--servers"):
        dtrain.role(servers="x")

"""fit against `dtrain train`: the same parameters, bit for bit, from uint8
arrays of Fashion-MNIST, from float32 ones and from a Darknet data file;
records and callbacks; a callback that stops the run; a second fit that
continues; predict, evaluate, save and load."""
import json
import os
import subprocess

import numpy as np
import pytest

import dtrain
from conftest import PYTHON, SRC, ckpt_params, cli, env, example, last_json

STEPS = 20
SEED = 3


@pytest.fixture(scope="module")
def mlp_cli(fm, tmp_path_factory):
    """The CLI's mlp run: its checkpoint and summary."""
    d = tmp_path_factory.mktemp("cli")
    ck = d / "cli.ckpt"
    p = cli("train", example("mlp.cfg"), "--dataset", "fashion-mnist", "--max-steps", STEPS, "--seed", SEED,
            "--threads", 1, "--quiet", "--checkpoint", ck, "--log", d / "cli.jsonl")
    return ck, last_json(p.stdout), d / "cli.jsonl"


@pytest.fixture(scope="module")
def mlp_fit(fm, tmp_path_factory):
    """fit of the same run from uint8 arrays (the whole training set, the test set for evaluation)."""
    xtr, ytr, xte, yte = fm
    d = tmp_path_factory.mktemp("fit")
    seen = []
    m = dtrain.Model(example("mlp.cfg"))
    h = m.fit(xtr, ytr, validation_data=(xte, yte), max_steps=STEPS, seed=SEED, threads=1, verbose=False,
              callbacks=[seen.append], log=d / "fit.jsonl", checkpoint=d / "run.ckpt")
    m.save(d / "fit.ckpt")
    return m, h, d, seen


def test_fit_uint8_equals_cli(mlp_cli, mlp_fit):
    ck, summary, _ = mlp_cli
    m, h, d, _ = mlp_fit
    a, b = ckpt_params(ck), ckpt_params(d / "fit.ckpt")
    assert a.shape == b.shape == (m.params,)
    assert np.array_equal(a, b), f"max |diff| {np.max(np.abs(a - b))}"
    # The same evaluation: the test set given as arrays is the CLI's.
    assert h.summary["test_accuracy"] == summary["test_accuracy"]
    assert h.summary["train_loss"] == summary["train_loss"]
    assert h.summary["steps"] == summary["steps"] == STEPS


def test_fit_cnn_equals_cli(fm, tmp_path):
    xtr, ytr, xte, yte = fm
    cli("train", example("cnn.cfg"), "--dataset", "fashion-mnist", "--max-steps", 6, "--seed", SEED, "--threads", 1,
        "--quiet", "--checkpoint", tmp_path / "cli.ckpt")
    m = dtrain.Model(example("cnn.cfg"))
    m.fit(xtr[:, None], ytr, validation_data=(xte[:, None], yte), max_steps=6, seed=SEED, threads=1, verbose=False)
    m.save(tmp_path / "fit.ckpt")
    assert np.array_equal(ckpt_params(tmp_path / "cli.ckpt"), ckpt_params(tmp_path / "fit.ckpt"))


def test_fit_float32_equals_uint8(fm, mlp_fit, tmp_path):
    xtr, ytr, xte, yte = fm
    m = dtrain.Model(example("mlp.cfg"))
    m.fit(xtr.astype(np.float32) / np.float32(255), ytr, validation_data=(xte.astype(np.float32) / 255, yte),
          max_steps=STEPS, seed=SEED, threads=1, verbose=False)
    m.save(tmp_path / "f32.ckpt")
    a, b = ckpt_params(mlp_fit[2] / "fit.ckpt"), ckpt_params(tmp_path / "f32.ckpt")
    assert np.array_equal(a, b), f"max |diff| {np.max(np.abs(a - b))}"


def test_records_are_the_logs(mlp_fit):
    """The callbacks get every record of the log file, in order, as dicts; the
    history is the same list."""
    _, h, d, seen = mlp_fit
    logged = [json.loads(line) for line in open(d / "fit.jsonl")]
    assert seen == logged == list(h)
    events = [r["event"] for r in h]
    assert events[0] == "config" and events[-1] == "summary" and "eval" in events
    steps = h.steps
    assert steps and all("loss" in r and "lr" in r for r in steps), steps[:2]
    assert h.evals and "test_accuracy" in h.evals[-1]


def test_records_match_cli_log(mlp_cli, mlp_fit):
    """The log's metrics are the CLI's, but for timings."""
    _, _, cli_log = mlp_cli
    cli_recs = [json.loads(line) for line in open(cli_log)]
    fit_recs = list(mlp_fit[1])
    assert [r["event"] for r in cli_recs] == [r["event"] for r in fit_recs]
    for a, b in zip(cli_recs, fit_recs):
        if a["event"] == "step":
            assert a["step"] == b["step"]
            for k in ("loss", "train_loss", "lr"):
                if k in a:
                    assert a[k] == b[k], (k, a, b)
        if a["event"] == "eval":
            assert a["test_accuracy"] == b["test_accuracy"]


def test_history_to_pandas(mlp_fit):
    pd = pytest.importorskip("pandas")
    df = mlp_fit[1].to_pandas("step")
    assert isinstance(df, pd.DataFrame) and len(df) == len(mlp_fit[1].steps)


def test_callback_stops_the_run(fm, tmp_path):
    xtr, ytr, xte, yte = fm
    m = dtrain.Model(example("mlp.cfg"))
    before = m.predict(xte[:8])
    h = m.fit(xtr[:4096], ytr[:4096], validation_data=(xte[:512], yte[:512]), max_steps=1000, threads=1,
              verbose=False, checkpoint=tmp_path / "stop.ckpt",
              callbacks=lambda r: r["event"] == "step" and r["step"] >= 5)
    assert m.stopped
    last = max(r["step"] for r in h.steps)
    assert 5 <= last < 20, last
    # It ends as a finished run ends: evaluation, final checkpoint, summary.
    events = [r["event"] for r in h]
    assert events[-3:] == ["eval", "checkpoint", "summary"], events[-4:]
    assert h.summary["steps"] == last
    assert os.path.exists(tmp_path / "stop.ckpt"), "the final checkpoint of a stopped run"
    assert not np.array_equal(before, m.predict(xte[:8])), "the model holds the trained parameters"


def test_callback_exception_propagates(fm):
    xtr, ytr, _, _ = fm
    m = dtrain.Model(example("mlp.cfg"))

    class Boom(Exception):
        pass

    def cb(r):
        if r["event"] == "step":
            raise Boom("from a callback")

    with pytest.raises(Boom):
        m.fit(xtr[:2048], ytr[:2048], max_steps=50, threads=1, verbose=False, callbacks=cb)
    # The interpreter and the library go on.
    h = m.fit(xtr[:2048], ytr[:2048], max_steps=2, threads=1, verbose=False)
    assert h.summary["steps"] == 2


def test_second_fit_continues(fm, mlp_fit):
    """A second fit starts from the first one's parameters (here at a
    learning rate too small to move them)."""
    xtr, ytr, xte, yte = fm
    m = dtrain.Model(example("mlp.cfg"), weights=mlp_fit[2] / "fit.ckpt")
    p0 = m.predict(xte[:64])
    m.fit(xtr[:1024], ytr[:1024], max_steps=2, lr=1e-12, momentum=0, decay=0, threads=1, verbose=False)
    assert np.allclose(m.predict(xte[:64]), p0, atol=1e-6)
    fresh = dtrain.Model(example("mlp.cfg")).predict(xte[:64])
    assert not np.allclose(fresh, p0, atol=1e-3)


def test_predict_equals_eval_logits(fm, mlp_cli, tmp_path):
    """predict is the softmax of the logits `dtrain eval` computes;
    evaluate's accuracy and loss are eval's."""
    xtr, ytr, xte, yte = fm
    ck = mlp_cli[0]
    p = cli("eval", example("mlp.cfg"), "--weights", ck, "--dataset", "fashion-mnist", "--json", "--threads", 1,
            "--logits-out", tmp_path / "logits.f32")
    ev = last_json(p.stdout)
    logits = np.fromfile(tmp_path / "logits.f32", np.float32).reshape(len(xte), 10)
    e = np.exp(logits - logits.max(1, keepdims=True))
    soft = e / e.sum(1, keepdims=True)
    m = dtrain.Model(example("mlp.cfg"), weights=ck)
    prob = m.predict(xte)
    assert prob.shape == (len(xte), 10) and prob.dtype == np.float32
    assert np.allclose(prob, soft, atol=2e-6), np.max(np.abs(prob - soft))
    assert np.allclose(prob.sum(1), 1, atol=1e-5)
    r = m.evaluate(xte, yte)
    assert abs(r["accuracy"] - ev["test_accuracy"]) < 1e-9
    assert abs(r["loss"] - ev["test_loss"]) < 1e-4 * max(1, ev["test_loss"])
    assert abs(r["accuracy"] - float(np.mean(prob.argmax(1) == yte))) < 1e-9
    # (n, C, H, W) and float32 inputs predict the same.
    assert np.array_equal(m.predict(xte[:100, None]), prob[:100])
    assert np.allclose(m.predict(xte[:100].astype(np.float32) / 255), prob[:100], atol=1e-6)


def test_save_load_round_trip(fm, mlp_fit, tmp_path):
    _, _, xte, yte = fm
    m = mlp_fit[0]
    m.save(tmp_path / "a.ckpt")
    m2 = dtrain.Model(example("mlp.cfg"), weights=tmp_path / "a.ckpt")
    assert np.array_equal(m.predict(xte[:256]), m2.predict(xte[:256]))
    assert m.evaluate(xte, yte) == m2.evaluate(xte, yte)
    m2.save(tmp_path / "b.ckpt")
    assert np.array_equal(ckpt_params(tmp_path / "a.ckpt"), ckpt_params(tmp_path / "b.ckpt"))
    # `dtrain eval` reads it as a checkpoint of its own.
    ev = last_json(cli("eval", example("mlp.cfg"), "--weights", tmp_path / "a.ckpt", "--json", "--threads", 1).stdout)
    assert abs(ev["test_accuracy"] - m.evaluate(xte, yte)["accuracy"]) < 1e-9


def test_export(mlp_fit, tmp_path):
    m = mlp_fit[0]
    m.export(tmp_path / "m.weights")
    m.export(tmp_path / "m.onnx")
    assert os.path.getsize(tmp_path / "m.weights") > 4 * m.params
    assert os.path.getsize(tmp_path / "m.onnx") > 4 * m.params
    # Darknet weights load back as the same parameters.
    m3 = dtrain.Model(example("mlp.cfg"), weights=tmp_path / "m.weights")
    m3.save(tmp_path / "back.ckpt")
    m.save(tmp_path / "orig.ckpt")
    assert np.array_equal(ckpt_params(tmp_path / "back.ckpt"), ckpt_params(tmp_path / "orig.ckpt"))


def test_darknet_data_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = subprocess.run([PYTHON, os.path.join(SRC, "tests", "make_images.py"), "tree", "imgs", "cat,dog,cow,owl", "24",
                        "12"], capture_output=True, text=True)
    if r.returncode == 3:
        pytest.skip("make_images.py needs PIL and numpy")
    assert r.returncode == 0, r.stderr
    cfg = ("[net]\nchannels=3\nheight=12\nwidth=12\nbatch=8\nlearning_rate=0.05\nmomentum=0.9\nepochs=2\n"
           "[connected]\noutput=32\nactivation=relu\n[connected]\noutput=4\nactivation=linear\n[softmax]\n")
    open("m.cfg", "w").write(cfg)
    open("labels.txt", "w").write("cat\ndog\ncow\nowl\n")
    for split, name in (("train", "train.list"), ("test", "valid.list")):
        files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join("imgs", split)) for f in fs)
        open(name, "w").write("\n".join(files) + "\n")
    open("d.data", "w").write("classes=4\ntrain=train.list\nvalid=valid.list\nlabels=labels.txt\n")
    cli("train", "m.cfg", "--data", "d.data", "--max-steps", 12, "--threads", 1, "--quiet", "--checkpoint", "cli.ckpt")
    m = dtrain.Model(cfg)  # the model's text
    h = m.fit(data="d.data", max_steps=12, threads=1, verbose=False)
    m.save("fit.ckpt")
    assert np.array_equal(ckpt_params("cli.ckpt"), ckpt_params("fit.ckpt"))
    assert h.summary["steps"] == 12


def test_dataset_option(tmp_path):
    """A built-in data set by name, with a data set's options."""
    m = dtrain.Model(os.path.join(SRC, "tests", "data", "small_net.cfg"))
    h = m.fit(dataset="synthetic", max_steps=3, threads=1, verbose=False, checkpoint=tmp_path / "s.ckpt")
    assert h.summary["steps"] == 3
    cli("train", os.path.join(SRC, "tests", "data", "small_net.cfg"), "--dataset", "synthetic", "--max-steps", 3,
            "--threads", 1, "--quiet", "--checkpoint", tmp_path / "c.ckpt")
    assert np.array_equal(ckpt_params(tmp_path / "s.ckpt"), ckpt_params(tmp_path / "c.ckpt"))


def test_verbose_prints_progress(fm):
    """verbose=True: the library prints the start-up line and summary on
    stdout (worker 0); verbose=False: only the summary."""
    code = ("import numpy as np, dtrain\n"
            "from conftest import fashion_mnist, example\n"
            "x, y, _, _ = fashion_mnist()\n"
            "m = dtrain.Model(example('mlp.cfg'))\n"
            "m.fit(x[:1024], y[:1024], max_steps=3, threads=1, verbose=%s)\n")
    loud = subprocess.run([PYTHON, "-c", code % True], capture_output=True, text=True, env=env(), timeout=300)
    quiet = subprocess.run([PYTHON, "-c", code % False], capture_output=True, text=True, env=env(), timeout=300)
    assert loud.returncode == 0 and quiet.returncode == 0, loud.stderr + quiet.stderr
    assert '"event":"summary"' in quiet.stdout.replace(" ", "")
    assert len(loud.stdout.splitlines()) > len(quiet.stdout.splitlines())


def test_strided_and_temporary_arrays(fm, tmp_path):
    """A non-contiguous view is made contiguous (one copy) and kept alive
    with the labels while the library reads them, even when the caller holds
    no reference (temporaries; a collection in the middle of the run)."""
    import gc
    xtr, ytr, _, _ = fm
    a = dtrain.Model(example("mlp.cfg"))
    a.fit(xtr[:8192:2], ytr[:8192:2].astype(np.int64), max_steps=15, threads=1, verbose=False,
          callbacks=lambda r: gc.collect() and False)
    a.save(tmp_path / "a.ckpt")
    b = dtrain.Model(example("mlp.cfg"))
    b.fit(np.ascontiguousarray(xtr[:8192:2]), np.ascontiguousarray(ytr[:8192:2], dtype=np.int32), max_steps=15,
          threads=1, verbose=False)
    b.save(tmp_path / "b.ckpt")
    assert np.array_equal(ckpt_params(tmp_path / "a.ckpt"), ckpt_params(tmp_path / "b.ckpt"))

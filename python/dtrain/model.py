"""dtrain.Model: a network and its parameters, trained by fit (a job of the
library, include/dtrain.h) from numpy arrays or a data set on disk."""
import ctypes
import json
import os
import shutil
import signal
import tempfile
import threading

import numpy as np

from . import _lib
from .errors import DtypeError, Error, FormatError, UsageError

_lib_ = _lib.lib
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class History(list):
    """The records of a run's log, as dicts, in order ("event": "config",
    "step", "eval", "summary"; fields as the log's). Filled on worker 0
    only (the ranks that get the records); empty elsewhere."""

    def events(self, event):
        return [r for r in self if r.get("event") == event]

    @property
    def steps(self):
        return self.events("step")

    @property
    def evals(self):
        return self.events("eval")

    @property
    def summary(self):
        s = self.events("summary")
        return s[-1] if s else None

    def to_pandas(self, event=None):
        """A pandas DataFrame of the records (those of one event if given);
        needs pandas."""
        import pandas as pd  # noqa: deferred: pandas is optional
        return pd.DataFrame(self.events(event) if event else list(self))


def _opt_value(name, value):
    if value is True:
        return "1"
    if value is False:
        return "0"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (str, int, float, np.integer, np.floating)):
        return str(value)
    raise UsageError(f"option {name}: a {type(value).__name__} is not a value (give a str, number or bool)")


class Model:
    """A model from a model file's path or its text (anything holding a
    newline is text), with the parameters of weights (a dtrain checkpoint
    or Darknet .weights), else initialised from seed 1 as a fresh
    `dtrain train` is."""

    def __init__(self, path_or_cfg_text, weights=None):
        if isinstance(path_or_cfg_text, os.PathLike):
            path_or_cfg_text = os.fspath(path_or_cfg_text)
        if not isinstance(path_or_cfg_text, str):
            raise DtypeError(f"Model: a model file's path or text (str), not {type(path_or_cfg_text).__name__}")
        if weights is not None:
            weights = os.fspath(weights)
        if "\n" not in path_or_cfg_text and os.path.exists(path_or_cfg_text):
            path_or_cfg_text = os.path.abspath(path_or_cfg_text)  # fit reads it again, from any directory
        self._src = path_or_cfg_text
        self._h = None
        self._params_set = weights is not None  # parameters other than seed 1's: a second fit starts from them
        self.is_worker = self.is_chief = True  # until a fit says otherwise (a server rank; a worker other than 0)
        self.stopped = False
        self.history = History()
        h = ctypes.c_void_p()
        _lib.check(_lib_.dtrain_model_load(ctypes.byref(h), _lib.enc(path_or_cfg_text), _lib.enc(weights)),
                   "dtrain_model_load")
        self._set_handle(h)

    def _set_handle(self, h):
        old, self._h = self._h, h
        if old:
            _lib_.dtrain_model_free(old)
        c, hh, w, k, layers = (ctypes.c_int() for _ in range(5))
        p = ctypes.c_size_t()
        _lib.check(_lib_.dtrain_model_shape(self._h, ctypes.byref(c), ctypes.byref(hh), ctypes.byref(w),
                                            ctypes.byref(k), ctypes.byref(p), ctypes.byref(layers)),
                   "dtrain_model_shape")
        self.input_shape = (c.value, hh.value, w.value)
        self.classes = k.value
        self.params = p.value
        self.layers = layers.value
        if self.classes == 0 and self.layers > 0:
            lc, lh, lw = self.summary()[-1]["shape"]
            self.outputs = lc * lh * lw
        else:
            self.outputs = self.classes

    def close(self):
        """Frees the library's model now (else when the object goes)."""
        if self._h:
            _lib_.dtrain_model_free(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _handle(self):
        if not self._h:
            raise UsageError("the model was closed")
        return self._h

    def __repr__(self):
        src = self._src if "\n" not in self._src else "<model text>"
        return (f"dtrain.Model({src!r}: input {self.input_shape}, {self.classes} classes, "
                f"{self.layers} layers, {self.params} parameters)")

    # ---- what `dtrain info` prints, as data ----
    def summary(self):
        """One dict per layer: index, kind (as the model file names it),
        shape (its output's C, H, W) and params (parameter count)."""
        out = []
        kind = ctypes.create_string_buffer(64)
        c, h, w = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        p = ctypes.c_size_t()
        n = self.layers if hasattr(self, "layers") else 0
        for i in range(n):
            _lib.check(_lib_.dtrain_model_layer(self._handle(), i, kind, len(kind), ctypes.byref(c), ctypes.byref(h),
                                                ctypes.byref(w), ctypes.byref(p)), "dtrain_model_layer")
            out.append({"index": i, "kind": kind.value.decode(), "shape": (c.value, h.value, w.value),
                        "params": p.value})
        return out

    # ---- arrays: checked here, before the library sees them ----
    def _images(self, x, what="x"):
        if not isinstance(x, np.ndarray):
            if hasattr(x, "__array__") or isinstance(x, (list, tuple)):
                x = np.asarray(x)
            else:
                raise DtypeError(f"{what}: a numpy array of images, not {type(x).__name__}")
        if x.dtype == np.uint8:
            dtype = _lib.U8
        elif x.dtype == np.float32:
            dtype = _lib.F32
        else:
            raise DtypeError(f"{what}: dtype {x.dtype} (uint8 images, scaled by 1/255, or float32 ones; "
                             f"e.g. x.astype(np.float32))")
        c, h, w = self.input_shape
        takes = f"(n, {c}, {h}, {w})" + (f" or (n, {h}, {w})" if c == 1 else "")
        if not ((x.ndim == 3 and c == 1 and x.shape[1:] == (h, w)) or (x.ndim == 4 and x.shape[1:] == (c, h, w))):
            raise UsageError(f"{what}: shape {x.shape}; the model's input takes {takes}")
        if x.shape[0] < 1:
            raise UsageError(f"{what}: no images (shape {x.shape})")
        if x.shape[0] > 2**31 - 1:
            raise UsageError(f"{what}: {x.shape[0]} images, over 2^31 - 1")
        return np.ascontiguousarray(x), dtype

    def _labels(self, y, n, what="y"):
        y = np.asarray(y)
        if y.dtype.kind not in "iu":
            raise DtypeError(f"{what}: dtype {y.dtype}; labels are integers (class numbers)")
        if y.ndim != 1:
            raise UsageError(f"{what}: shape {y.shape}; labels are one integer per image, shape (n,)")
        if len(y) != n:
            raise UsageError(f"{what}: {len(y)} labels for {n} images")
        if self.classes > 0 and len(y):
            lo, hi = int(y.min()), int(y.max())
            if lo < 0 or hi >= self.classes:
                bad = lo if lo < 0 else hi
                at = int(np.argmax(y == bad))
                raise FormatError(f"{what}[{at}]: label {bad} out of range: the model has {self.classes} classes "
                                  f"(0 .. {self.classes - 1})")
        return np.ascontiguousarray(y, dtype=np.int32)

    # ---- inference ----
    def predict(self, x):
        """(n, classes) float32: the softmax's probabilities of each image
        (with [softmax] tree=, the leaves' probabilities, inner nodes 0; a
        feature extractor: its last layer's values)."""
        x, dtype = self._images(x)
        n = x.shape[0]
        out = np.empty((n, self.outputs), dtype=np.float32)
        _lib.check(_lib_.dtrain_model_predict(self._handle(), x.ctypes.data_as(ctypes.c_void_p), dtype, n,
                                              out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))),
                   "dtrain_model_predict")
        return out

    def evaluate(self, x, y):
        """{"accuracy": ..., "loss": ...} over images x and labels y, as
        `dtrain eval` computes them."""
        x, dtype = self._images(x)
        if self.classes == 0:
            raise UsageError("evaluate: the model has no [softmax] (a feature extractor): nothing to score")
        y = self._labels(y, x.shape[0])
        acc, loss = ctypes.c_double(), ctypes.c_double()
        _lib.check(_lib_.dtrain_model_evaluate(self._handle(), x.ctypes.data_as(ctypes.c_void_p), dtype,
                                               x.shape[0], y.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                               ctypes.byref(acc), ctypes.byref(loss)), "dtrain_model_evaluate")
        return {"accuracy": acc.value, "loss": loss.value}

    def save(self, path):
        """The parameters as a dtrain checkpoint (what Model(..., weights=)
        and `dtrain train --weights` read; no optimiser state)."""
        path = os.fspath(path)
        _lib.check(_lib_.dtrain_model_save(self._handle(), _lib.enc(path)), "dtrain_model_save")

    def export(self, path):
        """As `dtrain export`: the extension says the format (.onnx, .weights)."""
        _lib.check(_lib_.dtrain_model_export(self._handle(), _lib.enc(os.fspath(path))), "dtrain_model_export")

    # ---- training ----
    def fit(self, x=None, y=None, validation_data=None, callbacks=None, verbose=True, **options):
        """Trains the model: on images x (n, C, H, W) or (n, H, W), uint8 or
        float32, with integer labels y; or on a data set named by the
        options dataset=, data_dir= or data= (a Darknet .data file), or the
        model file's. validation_data=(x, y) is the test set evaluated each
        epoch (default: with arrays, the training arrays). Every other
        keyword is a `dtrain train` flag, `_` for `-` (epochs, batch,
        max_steps, seed, mode, servers, lr, checkpoint, ...); True/False for
        flags without a value. callbacks: callables called with each record
        of the log (a dict) on worker 0; one returning True stops the run at
        a step every worker agrees on. Returns the History (worker 0's
        records). Afterwards the model holds the trained parameters (worker
        0's) on every rank; a second fit continues from them."""
        if (x is None) != (y is None):
            raise UsageError("fit: give both x and y (images and labels), or neither (a data set by option)")
        if x is not None:
            for k in ("dataset", "data_dir", "data"):
                if options.get(k) is not None:
                    raise UsageError(f"fit: x and y, or {k}=, not both")
        if validation_data is not None and x is None:
            raise UsageError("fit: validation_data goes with x and y (a data set on disk has its own test set)")
        if callbacks is None:
            callbacks = []
        elif callable(callbacks):
            callbacks = [callbacks]
        else:
            callbacks = list(callbacks)
            for cb in callbacks:
                if not callable(cb):
                    raise UsageError(f"fit: callback {cb!r} is not callable")
        keep = []  # the arrays the library reads (it does not copy them) until the run ends
        if x is not None:
            xs, xd = self._images(x, "x")
            ys = self._labels(y, xs.shape[0], "y")
            keep += [xs, ys]
            if validation_data is not None:
                if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
                    raise UsageError("fit: validation_data is a pair (x, y)")
                vx, vd = self._images(validation_data[0], "validation_data x")
                vy = self._labels(validation_data[1], vx.shape[0], "validation_data y")
                keep += [vx, vy]
        values = {}
        for k, v in options.items():
            if v is None:
                continue
            values[k] = _opt_value(k, v)
        if not verbose and "quiet" not in values:
            values["quiet"] = "1"

        job = ctypes.c_void_p()
        tmpdir = None
        state = {"stop": False, "sigint": False, "error": None}
        history = History()
        old_handlers = {}
        _lib.check(_lib_.dtrain_job_create(ctypes.byref(job), _lib.enc(self._src)), "dtrain_job_create")
        try:
            if self._params_set and "weights" not in values and "resume" not in values:
                tmpdir = tempfile.mkdtemp(prefix="dtrain-fit-")
                start = os.path.join(tmpdir, "start.ckpt")
                self.save(start)
                values["weights"] = start
            for k, v in values.items():
                _lib.check(_lib_.dtrain_job_set(job, _lib.enc(k), _lib.enc(v)), "dtrain_job_set")
            if x is not None:
                c, h, w = self.input_shape
                _lib.check(_lib_.dtrain_job_set_arrays(job, _lib.TRAIN, xs.ctypes.data_as(ctypes.c_void_p), xd,
                                                       xs.shape[0], c, h, w,
                                                       ys.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))),
                           "dtrain_job_set_arrays")
                if validation_data is not None:
                    _lib.check(_lib_.dtrain_job_set_arrays(job, _lib.TEST, vx.ctypes.data_as(ctypes.c_void_p), vd,
                                                           vx.shape[0], c, h, w,
                                                           vy.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))),
                               "dtrain_job_set_arrays")

            def on_record(_ctx, text):
                # Never lets an exception out into C: it is kept, the run
                # stopped, and it is raised when dtrain_job_run returns.
                try:
                    rec = json.loads(text.decode())
                    history.append(rec)
                    for cb in callbacks:
                        if cb(rec) is True:
                            state["stop"] = True
                except BaseException as e:  # noqa: a callback's KeyboardInterrupt too
                    if state["error"] is None:
                        state["error"] = e
                    state["stop"] = True
                return 1 if (state["stop"] or state["sigint"]) else 0

            fn = _lib.RECORD_FN(on_record)
            keep.append(fn)
            _lib.check(_lib_.dtrain_job_on_record(job, fn, None), "dtrain_job_on_record")

            if threading.current_thread() is threading.main_thread():
                def on_sigint(_signum, _frame):
                    state["sigint"] = True
                # SIGINT (Ctrl-C), and SIGTERM: what mpirun sends every rank
                # when it (or `dtrain launch`) gets Ctrl-C, SIGKILL following.
                for sig in _STOP_SIGNALS:
                    old_handlers[sig] = signal.signal(sig, on_sigint)
            try:
                status = _lib_.dtrain_job_run(job)
                _let_handlers_run()  # a signal taken while the library ran reaches on_sigint, not the old handler
            finally:
                for sig, old in old_handlers.items():
                    signal.signal(sig, old)
            _lib.check(status, "dtrain_job_run")
            self.is_worker = bool(_lib_.dtrain_job_is_worker(job))
            self.is_chief = _job_role(job) == "chief"  # worker 0, the rank the records went to
            self.stopped = bool(_lib_.dtrain_job_stopped(job))  # the callback ended the run early (every worker)
            # Every rank, servers too: worker 0 sends them the trained model.
            m = ctypes.c_void_p()
            _lib.check(_lib_.dtrain_job_take_model(job, ctypes.byref(m)), "dtrain_job_take_model")
            self._set_handle(m)
            self._params_set = True
        finally:
            _lib_.dtrain_job_free(job)
            if tmpdir:
                shutil.rmtree(tmpdir, ignore_errors=True)
        del keep
        if state["error"] is not None:
            raise state["error"]
        if state["sigint"]:
            raise KeyboardInterrupt
        self.history = history
        return history


def _let_handlers_run():
    """A Python call: CPython runs the handlers of signals taken meanwhile."""


def rank():
    """This process's rank in MPI_COMM_WORLD (initialising MPI)."""
    r = _lib_.dtrain_rank()
    if r < 0:
        raise Error(_lib.last_error() or "MPI could not start")
    return r


def world():
    """The number of processes in MPI_COMM_WORLD (initialising MPI)."""
    w = _lib_.dtrain_world()
    if w < 0:
        raise Error(_lib.last_error() or "MPI could not start")
    return w


_ROLES = {0: "server", 1: "chief", 2: "worker"}


def role(**options):
    """This rank's part in a fit with these options (fit's keywords; only
    mode and servers matter), known before any fit: "server" (the first
    servers ranks of a ps-* mode), "chief" (worker 0: the rank that prints
    and gets the records) or "worker". Initialises MPI."""
    job = ctypes.c_void_p()
    # The job's model is not read to answer: "" stands for it.
    _lib.check(_lib_.dtrain_job_create(ctypes.byref(job), b""), "dtrain_job_create")
    try:
        for k, v in options.items():
            if v is not None:
                _lib.check(_lib_.dtrain_job_set(job, _lib.enc(k), _lib.enc(_opt_value(k, v))), "dtrain_job_set")
        return _job_role(job)
    finally:
        _lib_.dtrain_job_free(job)


def _job_role(job):
    r = ctypes.c_int()
    _lib.check(_lib_.dtrain_job_role(job, ctypes.byref(r)), "dtrain_job_role")
    return _ROLES[r.value]


def is_chief(**options):
    """Whether this rank will be worker 0 of a fit with these options
    (role(**options) == "chief"): the rank to print on."""
    return role(**options) == "chief"

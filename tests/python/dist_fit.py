"""One script for every mode, run alone or under mpirun / dtrain launch:
fits the mlp on a Fashion-MNIST subset from uint8 arrays; worker 0 (known
before the run: dtrain.is_chief) saves the model and writes the run's
records; again=1: every rank fits a second time from the first run's model
and writes its predictions (OUT_PREFIX.predict.RANK.npy). Usage:
  dist_fit.py OUT_PREFIX [option=value ...]   (options as fit's keywords; stop_at=N: a callback stops at step N)"""
import json
import sys

import numpy as np

import dtrain
from conftest import example, fashion_mnist

out = sys.argv[1]
opts = dict(a.split("=", 1) for a in sys.argv[2:])
stop_at = int(opts.pop("stop_at", 0))
again = opts.pop("again", None)  # a second fit, then predict, on every rank (servers too)
chief = dtrain.is_chief(**opts)  # known before the run
x, y, xt, yt = fashion_mnist()
m = dtrain.Model(example("mlp.cfg"))
cb = (lambda r: r["event"] == "step" and r["step"] >= stop_at) if stop_at else None
h = m.fit(x[:4096], y[:4096], validation_data=(xt[:1000], yt[:1000]), threads=1, verbose=False, callbacks=cb,
          **opts)
assert chief == m.is_chief, (chief, m.is_chief)
if m.is_chief:  # worker 0: the rank that prints and gets the records
    m.save(out + ".ckpt")
    json.dump({"rank": dtrain.rank(), "world": dtrain.world(), "stopped": m.stopped, "records": list(h),
               "accuracy": m.evaluate(xt[:1000], yt[:1000])["accuracy"]}, open(out + ".json", "w"))
    print(f"worker 0 is rank {dtrain.rank()} of {dtrain.world()}: {h.summary}")
if again:
    m.fit(x[:4096], y[:4096], threads=1, verbose=False, **opts)
    np.save(f"{out}.predict.{dtrain.rank()}.npy", m.predict(xt[:64]))
    print(f"rank {dtrain.rank()} ({dtrain.role(**opts)}): second fit ran")

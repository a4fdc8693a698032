"""One script for every mode, run alone or under mpirun / dtrain launch:
fits the mlp on a Fashion-MNIST subset from uint8 arrays; worker 0 saves
the model and writes the run's records. Usage:
  dist_fit.py OUT_PREFIX [option=value ...]   (options as fit's keywords; stop_at=N: a callback stops at step N)"""
import json
import sys

import dtrain
from conftest import example, fashion_mnist

out = sys.argv[1]
opts = dict(a.split("=", 1) for a in sys.argv[2:])
stop_at = int(opts.pop("stop_at", 0))
again = opts.pop("again", None)  # a second fit after a ps-* run: refused on every rank alike
x, y, xt, yt = fashion_mnist()
m = dtrain.Model(example("mlp.cfg"))
cb = (lambda r: r["event"] == "step" and r["step"] >= stop_at) if stop_at else None
h = m.fit(x[:4096], y[:4096], validation_data=(xt[:1000], yt[:1000]), threads=1, verbose=False, callbacks=cb,
          **opts)
if m.is_chief:  # worker 0: the rank that prints and gets the records
    m.save(out + ".ckpt")
    json.dump({"rank": dtrain.rank(), "world": dtrain.world(), "stopped": m.stopped, "records": list(h),
               "accuracy": m.evaluate(xt[:1000], yt[:1000])["accuracy"]}, open(out + ".json", "w"))
    print(f"worker 0 is rank {dtrain.rank()} of {dtrain.world()}: {h.summary}")
if again:
    try:
        m.fit(x[:4096], y[:4096], threads=1, verbose=False, **opts)
        print(f"rank {dtrain.rank()}: second fit ran")
    except dtrain.UsageError as e:
        print(f"rank {dtrain.rank()}: second fit refused: {e}")

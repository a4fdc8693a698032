"""Ctrl-C during fit stops the run at an agreed step with its final
checkpoint, restores the program's handler and raises KeyboardInterrupt;
the GIL is released while the library trains."""
import os
import signal
import subprocess
import threading
import time


import dtrain
from conftest import DTRAIN, MPIRUN, PYTHON, env, example, fashion_mnist

CHILD = r'''
import os, signal, sys, dtrain
from conftest import example, fashion_mnist
x, y, _, _ = fashion_mnist()
m = dtrain.Model(example("mlp.cfg"))
ck = sys.argv[1]
handler = signal.getsignal(signal.SIGINT)
def started(r):
    if r["event"] == "step" and r["step"] == 3:
        print("training", flush=True)
try:
    m.fit(x, y, epochs=5, threads=1, verbose=False, checkpoint=ck, callbacks=started)
    print("finished without an interrupt")
except KeyboardInterrupt:
    assert signal.getsignal(signal.SIGINT) is handler, "the program's handler is back"
    assert m.stopped and os.path.exists(ck)
    print("KeyboardInterrupt after step", m.history.summary["steps"] if m.history.summary else "?", flush=True)
    m.predict(x[:4])  # the model and the interpreter go on
    print("still alive")
'''


def test_sigint_stops_fit(tmp_path):
    ck = tmp_path / "int.ckpt"
    p = subprocess.Popen([PYTHON, "-c", CHILD, str(ck)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env())
    line = p.stdout.readline()
    assert line.strip() == "training", line + p.stderr.read()
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, out + err
    assert "KeyboardInterrupt after step" in out and "still alive" in out, out + err
    assert time.time() - t0 < 60
    assert os.path.getsize(ck) > 0


def test_gil_released(tmp_path):
    """A Python thread runs while another thread's fit trains: the main
    thread counts for 0.3 s during the run (a callback keeps the run going
    until the count is done), as fast as alone, give or take the machine."""
    x, y, _, _ = fashion_mnist()
    m = dtrain.Model(example("mlp.cfg"))
    started, counted = threading.Event(), threading.Event()
    err = []

    def cb(r):
        if r["event"] == "step":
            started.set()
        return counted.is_set()

    def train():
        try:
            m.fit(x[:8192], y[:8192], epochs=1000, threads=1, verbose=False, callbacks=cb)
        except BaseException as e:  # noqa
            err.append(e)
        started.set()

    def count(seconds):
        n, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            n += 1
        return n

    alone = count(0.3)
    t = threading.Thread(target=train)
    t.start()
    assert started.wait(120)
    during = count(0.3)
    counted.set()
    t.join(120)
    assert not t.is_alive() and not err, err
    assert m.stopped
    # Held GIL: the counting thread would run only between the fit thread's
    # callbacks (~1 ms apart, a switch interval of 5 ms each): a few per cent
    # of its pace. Released: close to its own pace (a shared 2-core machine:
    # a lenient bound).
    assert during > 0.25 * alone, (during, alone)
    print(f"counting while fit trains: {during / alone:.2f} of its pace alone")


MPI_CHILD = r'''
import os, sys, dtrain
from conftest import example, fashion_mnist
x, y, _, _ = fashion_mnist()
m = dtrain.Model(example("mlp.cfg"))
ready = sys.argv[1]
def started(r):
    if r["event"] == "step" and r["step"] == 3:
        open(ready, "w").write(str(os.getpid()))
try:
    m.fit(x[:8192], y[:8192], mode="allreduce", batch=16, epochs=20, threads=1, verbose=False, callbacks=started,
          checkpoint=sys.argv[2])
    print(f"rank {dtrain.rank()}: returned, stopped={m.stopped}", flush=True)
except KeyboardInterrupt:
    print(f"rank {dtrain.rank()}: KeyboardInterrupt, stopped={m.stopped}", flush=True)
'''


def test_sigint_to_worker0_stops_allreduce(tmp_path):
    """SIGINT to worker 0 alone (under mpirun, 2 workers): every rank stops at
    one step; worker 0 raises KeyboardInterrupt, the other returns."""
    ready = tmp_path / "ready"
    p = subprocess.Popen(["timeout", "300"] + MPIRUN + ["-np", "2", PYTHON, "-c", MPI_CHILD, str(ready),
                                                        str(tmp_path / "ar.ckpt")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    t0 = time.time()
    while not ready.exists() or not ready.read_text():
        assert p.poll() is None and time.time() - t0 < 240, p.communicate()
        time.sleep(0.1)
    os.kill(int(ready.read_text()), signal.SIGINT)
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, out + err
    assert "rank 0: KeyboardInterrupt, stopped=True" in out, out + err
    # dtrain.h: every worker's dtrain_job_stopped says the run ended early;
    # only rank 0 took the signal.
    assert "rank 1: returned, stopped=True" in out, out + err
    assert os.path.getsize(tmp_path / "ar.ckpt") > 0


def test_ctrl_c_to_launch(tmp_path):
    """Ctrl-C to `dtrain launch -n 2 -- python3 script.py`: mpirun sends the
    ranks SIGTERM (then SIGKILL); fit takes it as SIGINT: every rank stops
    at one step, the final checkpoint is written, KeyboardInterrupt raised."""
    ready = tmp_path / "ready"
    p = subprocess.Popen([DTRAIN, "launch", "-n", "2", "--", PYTHON, "-c", MPI_CHILD, str(ready),
                          str(tmp_path / "ar.ckpt")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env())
    t0 = time.time()
    while not ready.exists() or not ready.read_text():
        assert p.poll() is None and time.time() - t0 < 240, p.communicate()
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=240)
    assert "rank 0: KeyboardInterrupt, stopped=True" in out, out + err
    assert os.path.getsize(tmp_path / "ar.ckpt") > 0

"""dtrain from Python: train, evaluate and use dtrain's models on numpy
arrays or data sets on disk, in any of dtrain's modes under mpirun.
A ctypes binding of libdtrain.so's job API (include/dtrain.h); see
docs/PYTHON.md.

    import dtrain
    model = dtrain.Model("examples/cnn.cfg")
    history = model.fit(x_train, y_train, validation_data=(x_test, y_test), epochs=1)
    model.evaluate(x_test, y_test)        # {"accuracy": ..., "loss": ...}
    model.predict(x_test[:5])             # (5, 10) float32 probabilities
"""
import atexit as _atexit

from . import _lib
from .builder import Sequential
from .errors import (ConfigError, DtypeError, Error, FileError, FormatError, InternalError, Interrupted, MPIError,
                     NumericError, OutOfMemoryError, StalledError, UsageError)
from .model import History, Model, is_chief, rank, role, world

__version__ = _lib.lib.dtrain_version().decode()
library_path = _lib.path

__all__ = ["Model", "Sequential", "History", "rank", "world", "role", "is_chief", "finalize", "Error", "UsageError",
           "DtypeError", "ConfigError", "FileError", "FormatError", "OutOfMemoryError", "NumericError", "MPIError",
           "Interrupted", "InternalError", "StalledError", "library_path"]


_finalized = False


def finalize():
    """MPI_Finalize, if dtrain initialised MPI (else nothing). Called at
    exit; call it yourself only when done with dtrain in this process."""
    global _finalized
    if not _finalized:
        _finalized = True
        _lib.lib.dtrain_finalize()


_atexit.register(finalize)

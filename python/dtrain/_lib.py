"""ctypes bindings of libdtrain.so (include/dtrain.h): finding the library,
prototypes, statuses to exceptions. Internal: use the package's API."""
import ctypes
import ctypes.util
import os

from .errors import error_for

# dtrain_status codes (include/dtrain.h).
OK = 0
U8, F32 = 0, 1
TRAIN, TEST = 0, 1

RECORD_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)


def _candidates():
    """Where libdtrain.so may be, in order: $DTRAIN_LIBRARY; a built
    checkout (python/dtrain/../../build/); an installed package
    (PREFIX/lib/python3/dist-packages/dtrain -> PREFIX/lib, and the
    multiarch lib directory); the loader's search (find_library)."""
    env = os.environ.get("DTRAIN_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "..", "..", "build", "libdtrain.so")
    site = os.path.dirname(here)
    if os.path.basename(site) in ("dist-packages", "site-packages"):  # installed: PREFIX/lib/python3/dist-packages
        prefix_lib = os.path.normpath(os.path.join(site, "..", ".."))
        yield os.path.join(prefix_lib, "libdtrain.so")
        import sysconfig
        multiarch = sysconfig.get_config_var("MULTIARCH")
        if multiarch:
            yield os.path.join(prefix_lib, multiarch, "libdtrain.so")
    found = ctypes.util.find_library("dtrain")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            # RTLD_GLOBAL: Open MPI's plugins, loaded later by libmpi, resolve
            # symbols of libmpi and libopen-pal through the global scope.
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("dtrain: libdtrain.so not found (build it with `make` in the checkout, "
                      "or set DTRAIN_LIBRARY); tried: " + "; ".join(tried))


lib, path = _load()

_p = ctypes.c_void_p
_pp = ctypes.POINTER(ctypes.c_void_p)
_int_p = ctypes.POINTER(ctypes.c_int)
_size_p = ctypes.POINTER(ctypes.c_size_t)
_dbl_p = ctypes.POINTER(ctypes.c_double)
_c = ctypes.c_char_p
_i = ctypes.c_int

_PROTOS = {
    "dtrain_last_error": (_c, []),
    "dtrain_version": (_c, []),
    "dtrain_init": (_i, []),
    "dtrain_rank": (_i, []),
    "dtrain_world": (_i, []),
    "dtrain_finalize": (_i, []),
    "dtrain_model_load": (_i, [_pp, _c, _c]),
    "dtrain_model_free": (None, [_p]),
    "dtrain_model_shape": (_i, [_p, _int_p, _int_p, _int_p, _int_p, _size_p, _int_p]),
    "dtrain_model_layer": (_i, [_p, _i, ctypes.c_char_p, ctypes.c_size_t, _int_p, _int_p, _int_p, _size_p]),
    "dtrain_model_predict": (_i, [_p, _p, _i, _i, ctypes.POINTER(ctypes.c_float)]),
    "dtrain_model_evaluate": (_i, [_p, _p, _i, _i, ctypes.POINTER(ctypes.c_int32), _dbl_p, _dbl_p]),
    "dtrain_model_save": (_i, [_p, _c]),
    "dtrain_model_export": (_i, [_p, _c]),
    "dtrain_job_create": (_i, [_pp, _c]),
    "dtrain_job_free": (None, [_p]),
    "dtrain_job_set": (_i, [_p, _c, _c]),
    "dtrain_job_set_arrays": (_i, [_p, _i, _p, _i, _i, _i, _i, _i, ctypes.POINTER(ctypes.c_int32)]),
    "dtrain_job_on_record": (_i, [_p, RECORD_FN, _p]),
    "dtrain_job_run": (_i, [_p]),
    "dtrain_job_role": (_i, [_p, _int_p]),
    "dtrain_job_is_worker": (_i, [_p]),
    "dtrain_job_stopped": (_i, [_p]),
    "dtrain_job_take_model": (_i, [_p, _pp]),
}

missing = []
for _name, (_res, _args) in _PROTOS.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        missing.append(_name)
        continue
    _f.restype = _res
    _f.argtypes = _args
if missing:
    raise ImportError(f"dtrain: {path} lacks {', '.join(missing)} (an older build? rebuild with `make`)")


def enc(s):
    return None if s is None else os.fsencode(s) if isinstance(s, os.PathLike) else str(s).encode()


def last_error():
    msg = lib.dtrain_last_error()
    return msg.decode(errors="replace") if msg else ""


def check(status, what=None):
    """Raises the exception of a failed status with dtrain's message."""
    if status != OK:
        msg = last_error() or (what or "dtrain call") + " failed"
        raise error_for(status, msg)

"""dtrain's exceptions: one class per dtrain_status of include/dtrain.h,
each carrying the library's one-line message (str(e), e.message) and the
status (e.status). Checks made in Python before calling the library (a
wrong dtype, a shape that does not match the model, lengths that differ,
a label out of range) raise the same classes."""


class Error(Exception):
    """Every dtrain failure. .status is the dtrain_status code, .message the
    one-line message."""
    status = None

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class UsageError(Error, ValueError):
    """A bad option, value, array shape or type (DTRAIN_ERR_USAGE)."""
    status = 1


class DtypeError(UsageError, TypeError):
    """An array of a dtype dtrain does not take (uint8 or float32 images,
    integer labels)."""


class ConfigError(Error, ValueError):
    """A bad model: syntax, keys, shapes (DTRAIN_ERR_CONFIG)."""
    status = 2


class FileError(Error, OSError):
    """A file missing, unreadable or unwritable (DTRAIN_ERR_IO)."""
    status = 3

    def __init__(self, message, status=None):
        OSError.__init__(self, message)
        self.message = message
        if status is not None:
            self.status = status

    def __str__(self):
        return self.message


class FormatError(Error, ValueError):
    """Data or a checkpoint malformed; a label out of range (DTRAIN_ERR_FORMAT)."""
    status = 4


class OutOfMemoryError(Error, MemoryError):
    """An allocation failed or a size is over a limit (DTRAIN_ERR_NOMEM)."""
    status = 5


class NumericError(Error, ArithmeticError):
    """The loss became NaN or infinite (DTRAIN_ERR_NUMERIC)."""
    status = 6


class MPIError(Error):
    """An MPI call failed, a peer was lost (DTRAIN_ERR_MPI)."""
    status = 7


class Interrupted(Error):
    """Stopped by SIGINT/SIGTERM inside the library (DTRAIN_ERR_INTERRUPTED)."""
    status = 8


class InternalError(Error):
    """A bug in dtrain (DTRAIN_ERR_INTERNAL)."""
    status = 9


class StalledError(Error):
    """Waited --stall-abort seconds for other ranks (DTRAIN_ERR_STALLED)."""
    status = 10


_BY_STATUS = {c.status: c for c in (UsageError, ConfigError, FileError, FormatError, OutOfMemoryError,
                                    NumericError, MPIError, Interrupted, InternalError, StalledError)}


def error_for(status, message):
    cls = _BY_STATUS.get(status, Error)
    e = cls(message, status)
    return e

#include "dtrain/status.h"

#include <stdarg.h>

/* Room for a model-file error listing every key of [net]. */
static _Thread_local char last_error[2048];

dt_status dt_fail(dt_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

const char *dt_last_error(void) { return last_error; }

const char *dt_status_name(dt_status s) {
    switch (s) {
    case DT_OK: return "ok";
    case DT_ERR_USAGE: return "usage error";
    case DT_ERR_CONFIG: return "model file error";
    case DT_ERR_IO: return "I/O error";
    case DT_ERR_FORMAT: return "format error";
    case DT_ERR_NOMEM: return "out of memory";
    case DT_ERR_NUMERIC: return "numeric error";
    case DT_ERR_MPI: return "MPI error";
    case DT_ERR_INTERRUPTED: return "interrupted";
    case DT_ERR_INTERNAL: return "internal error";
    case DT_ERR_STALLED: return "stalled";
    }
    return "unknown error";
}

int dt_status_exit_code(dt_status s) {
    if (s == DT_OK) return 0;
    if (s == DT_ERR_USAGE || s == DT_ERR_CONFIG) return 2;
    if (s == DT_ERR_STALLED) return 3;
    return 1;
}

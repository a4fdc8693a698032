/* Status codes and error messages shared by every dtrain module.
 *
 * Library functions return a dt_status; on failure they record a one-line
 * message (file/line/flag named by the caller) retrievable with
 * dt_last_error(). The message is thread-local, like errno, so the loader's
 * prefetch thread and the trainer never overwrite each other's message.
 * Only src/cli/ turns a status into an exit code (dt_status_exit_code). */
#ifndef DTRAIN_STATUS_H
#define DTRAIN_STATUS_H

#include <stdio.h>
#include <stdlib.h>

typedef enum {
    DT_OK = 0,
    DT_ERR_USAGE,    /* bad command-line flag or value            -> exit 2 */
    DT_ERR_CONFIG,   /* bad model file (syntax, keys, shapes)     -> exit 2 */
    DT_ERR_IO,       /* file missing/unreadable/unwritable        -> exit 1 */
    DT_ERR_FORMAT,   /* data or checkpoint file malformed/corrupt -> exit 1 */
    DT_ERR_NOMEM,    /* allocation failed or size over a limit    -> exit 1 */
    DT_ERR_NUMERIC,  /* NaN/inf loss                              -> exit 1 */
    DT_ERR_MPI,      /* MPI call failed, peer lost, stall         -> exit 1 */
    DT_ERR_INTERRUPTED, /* SIGINT/SIGTERM received                -> exit 1 */
    DT_ERR_INTERNAL, /* invariant broken (a bug)                  -> exit 1 */
    DT_ERR_STALLED   /* waited --stall-abort s for other ranks    -> exit 3 */
} dt_status;

/* Records a printf-style message for the current thread and returns s. */
dt_status dt_fail(dt_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The last message recorded by dt_fail on this thread ("" if none). */
const char *dt_last_error(void);

/* Short name of a status, e.g. "config error". */
const char *dt_status_name(dt_status s);

/* Exit code the CLI uses: 0 ok, 2 usage/config, 3 stalled, 1 otherwise. */
int dt_status_exit_code(dt_status s);

/* Propagate a failure to the caller. */
#define DT_TRY(expr)                          \
    do {                                      \
        dt_status dt_try_s_ = (expr);         \
        if (dt_try_s_ != DT_OK) return dt_try_s_; \
    } while (0)

/* Invariant check: a failed one is a bug in dtrain, never a user error. */
#define DT_ASSERT(cond)                                                        \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "dtrain: internal error: %s:%d: assertion '%s' failed\n", \
                    __FILE__, __LINE__, #cond);                                \
            abort();                                                           \
        }                                                                      \
    } while (0)

#endif

/* Minimal assertion helpers for dtrain's test programs: a failed check
 * prints file:line and the values, and the program exits 1 at the end. */
#ifndef DT_TESTUTIL_H
#define DT_TESTUTIL_H

#include <stddef.h>
#include <stdio.h>

#include "dtrain/net.h"

extern int dt_test_failures;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            dt_test_failures++;                                                  \
        }                                                                        \
    } while (0)

/* |a - b| <= atol + rtol * |b| */
#define CHECK_CLOSE(a, b, atol, rtol) dt_check_close((a), (b), (atol), (rtol), __FILE__, __LINE__, #a)

/* Elementwise CHECK_CLOSE over n floats; reports the worst element once. */
#define CHECK_ALLCLOSE(a, b, n, atol, rtol) \
    dt_check_allclose((a), (b), (n), (atol), (rtol), __FILE__, __LINE__, #a)

/* Status must be DT_OK; otherwise prints dt_last_error(). */
#define CHECK_OK(expr) dt_check_ok((expr), __FILE__, __LINE__, #expr)

int dt_check_close(double a, double b, double atol, double rtol, const char *file, int line,
                   const char *what);
int dt_check_allclose(const float *a, const float *b, size_t n, double atol, double rtol,
                      const char *file, int line, const char *what);
int dt_check_ok(int status, const char *file, int line, const char *what);

struct dt_loader;
/* Makes `calls` calls of dt_loader_next on a and b (epoch markers
 * included), whose samples are `sample` floats each, and counts the calls
 * whose n, labels or images differ. */
int dt_test_loaders_differ(struct dt_loader *a, struct dt_loader *b, size_t sample, int calls);

/* Path of a file in the source tree (DT_SOURCE_DIR/rel) in a static buffer. */
const char *dt_test_src_path(const char *rel);

/* Writes `text` to `path` (replacing it); a file that cannot be opened
 * counts as a failed check. */
void dt_test_write_text(const char *path, const char *text);

/* Two optimiser steps (m's optimiser and base rate) of m->accumulate passes
 * of m->batch (at most 64) random images and labels through net (built
 * from m, which must end in [softmax]): each pass's loss must be finite
 * and positive, and most parameters must move. */
void dt_test_train_two_steps(dt_net *net, const dt_model_spec *m);

/* Print "N passed, M failed" style result and return the exit code. */
int dt_test_finish(const char *name);

#endif

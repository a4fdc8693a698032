/* Checked allocation. Sizes are multiplied with overflow checks and compared
 * against a ceiling before allocating, so a corrupt header or an absurd model
 * is refused with a message instead of crashing or swapping. */
#ifndef DTRAIN_MEM_H
#define DTRAIN_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/status.h"

/* Largest single allocation dtrain makes (bytes); a request above it fails
 * with DT_ERR_NOMEM and says how much was asked for. */
#define DT_MAX_ALLOC ((size_t)16 << 30)

/* *out = a * b, or DT_ERR_NOMEM if it overflows size_t. `what` names the
 * quantity in the error message. */
dt_status dt_mul_size(size_t *out, size_t a, size_t b, const char *what);

/* 64-byte aligned, zeroed allocation of n floats / n bytes; *out = NULL on
 * failure. Free with dt_free. n == 0 returns a valid small block. */
dt_status dt_alloc_floats(float **out, size_t n, const char *what);
dt_status dt_alloc_bytes(void **out, size_t n, const char *what);
/* The same as dt_alloc_floats, not zeroed: for scratch that is written
 * before it is read, where zeroing would be a serial pass over memory. */
dt_status dt_alloc_scratch_floats(float **out, size_t n, const char *what);
void dt_free(void *p);

#endif

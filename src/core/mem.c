#include "dtrain/mem.h"

#include <stdlib.h>
#include <string.h>

dt_status dt_mul_size(size_t *out, size_t a, size_t b, const char *what) {
    if (a != 0 && b > SIZE_MAX / a)
        return dt_fail(DT_ERR_NOMEM, "%s: size %zu x %zu overflows", what, a, b);
    *out = a * b;
    return DT_OK;
}

/* n bytes, 64-byte aligned, zeroed when `zero`. */
static dt_status alloc_aligned(void **out, size_t n, int zero, const char *what) {
    *out = NULL;
    if (n > DT_MAX_ALLOC)
        return dt_fail(DT_ERR_NOMEM, "%s: %.1f GiB requested, over the %zu GiB limit", what,
                       (double)n / (1 << 30), DT_MAX_ALLOC >> 30);
    size_t rounded = (n + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    void *p = aligned_alloc(64, rounded);
    if (!p) return dt_fail(DT_ERR_NOMEM, "%s: cannot allocate %zu bytes", what, n);
    if (zero) memset(p, 0, rounded);
    *out = p;
    return DT_OK;
}

dt_status dt_alloc_bytes(void **out, size_t n, const char *what) { return alloc_aligned(out, n, 1, what); }

static dt_status alloc_floats(float **out, size_t n, int zero, const char *what) {
    size_t bytes = 0;
    *out = NULL;
    DT_TRY(dt_mul_size(&bytes, n, sizeof(float), what));
    void *p;
    DT_TRY(alloc_aligned(&p, bytes, zero, what));
    *out = p;
    return DT_OK;
}

dt_status dt_alloc_floats(float **out, size_t n, const char *what) { return alloc_floats(out, n, 1, what); }

dt_status dt_alloc_scratch_floats(float **out, size_t n, const char *what) { return alloc_floats(out, n, 0, what); }

void dt_free(void *p) { free(p); }

#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/data.h"
#include "dtrain/status.h"

int dt_test_failures = 0;

int dt_check_close(double a, double b, double atol, double rtol, const char *file, int line,
                   const char *what) {
    if (!(fabs(a - b) <= atol + rtol * fabs(b))) {
        fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g (atol %g, rtol %g)\n", file, line, what,
                a, b, atol, rtol);
        dt_test_failures++;
        return 0;
    }
    return 1;
}

int dt_check_allclose(const float *a, const float *b, size_t n, double atol, double rtol,
                      const char *file, int line, const char *what) {
    size_t worst = 0, bad = 0;
    double worst_excess = -1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        double lim = atol + rtol * fabs(b[i]);
        if (!(d <= lim)) {
            bad++;
            if (d - lim > worst_excess || isnan(d)) worst_excess = d - lim, worst = i;
        }
    }
    if (bad) {
        fprintf(stderr, "%s:%d: %s: %zu of %zu differ; worst [%zu] %.9g vs %.9g\n", file, line,
                what, bad, n, worst, a[worst], b[worst]);
        dt_test_failures++;
        return 0;
    }
    return 1;
}

int dt_check_ok(int status, const char *file, int line, const char *what) {
    if (status != DT_OK) {
        fprintf(stderr, "%s:%d: %s failed: %s: %s\n", file, line, what,
                dt_status_name((dt_status)status), dt_last_error());
        dt_test_failures++;
        return 0;
    }
    return 1;
}

const char *dt_test_src_path(const char *rel) {
    static char buf[4096];
    const char *root = getenv("DT_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : "..", rel);
    return buf;
}

void dt_test_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

int dt_test_finish(const char *name) {
    if (dt_test_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, dt_test_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

int dt_test_loaders_differ(struct dt_loader *a, struct dt_loader *b, size_t sample, int calls) {
    int diff = 0;
    for (int k = 0; k < calls; k++) {
        const float *xa, *xb;
        const dt_label *ya, *yb;
        int na = -1, nb = -2;
        CHECK_OK(dt_loader_next(a, &xa, &ya, &na));
        CHECK_OK(dt_loader_next(b, &xb, &yb, &nb));
        diff += na != nb || (na > 0 && (memcmp(ya, yb, sizeof *ya * (size_t)na) ||
                                        memcmp(xa, xb, sizeof(float) * (size_t)na * sample)));
    }
    return diff;
}

#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/data.h"
#include "dtrain/mem.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
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

void dt_test_train_two_steps(dt_net *net, const dt_model_spec *m) {
    float *x = NULL, *state = NULL, *before = NULL, *acc = NULL;
    dt_optim *opt = NULL;
    size_t nx = dt_shape_size(net->input) * (size_t)m->batch;
    CHECK(m->batch <= 64 && net->classes > 0);
    if (m->batch > 64 || net->classes <= 0 || !CHECK_OK(dt_alloc_floats(&x, nx, "x")) ||
        !CHECK_OK(dt_alloc_floats(&before, net->nparams, "p")) ||
        !CHECK_OK(dt_alloc_floats(&acc, net->nparams, "acc")) ||
        !CHECK_OK(dt_optim_create_for_net(&opt, &state, &m->optim, net)))
        goto done;
    memcpy(before, net->params, sizeof(float) * net->nparams);
    dt_rng rng = dt_rng_seed(5);
    dt_label labels[64];
    for (int step = 1; step <= 2; step++) {
        memset(acc, 0, sizeof(float) * net->nparams);
        for (int pass = 0; pass < m->accumulate; pass++) {
            for (size_t i = 0; i < nx; i++) x[i] = dt_rng_uniform(&rng);
            for (int b = 0; b < m->batch; b++) labels[b] = (dt_label)(dt_rng_next(&rng) % (uint64_t)net->classes);
            dt_net_forward(net, x, m->batch, 1);
            double loss = dt_net_loss(net, labels, m->batch) / m->batch;
            CHECK(isfinite(loss) && loss > 0);
            dt_net_backward(net, x, m->batch, NULL, NULL);
            for (size_t i = 0; i < net->nparams; i++) acc[i] += net->grads[i] / (float)m->accumulate;
        }
        memcpy(net->grads, acc, sizeof(float) * net->nparams);
        dt_optim_update_net(opt, (float)m->sched.base_lr, step, net, state, 0, net->nparams);
    }
    size_t moved = 0;
    for (size_t i = 0; i < net->nparams; i++) moved += net->params[i] != before[i];
    CHECK(moved > net->nparams / 2);
done:
    dt_optim_free(opt);
    dt_free(state), dt_free(acc), dt_free(before), dt_free(x);
}

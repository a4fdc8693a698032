/* Kind and activation names, the ops table by kind, and helpers shared by the
 * layer files (declared in layer_impl.h). */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "layers/layer_impl.h"

/* Indexed by dt_layer_kind. */
static const dt_layer_ops *const kind_ops[DT_LAYER_KIND_COUNT] = {
    [DT_LAYER_CONV] = &dt_conv_ops,       [DT_LAYER_MAXPOOL] = &dt_maxpool_ops,
    [DT_LAYER_AVGPOOL] = &dt_avgpool_ops, [DT_LAYER_DENSE] = &dt_dense_ops,
    [DT_LAYER_ACT] = &dt_act_ops,         [DT_LAYER_DROPOUT] = &dt_dropout_ops,
    [DT_LAYER_LRN] = &dt_lrn_ops,         [DT_LAYER_BATCHNORM] = &dt_batchnorm_ops,
    [DT_LAYER_SOFTMAX] = &dt_softmax_ops,
};

/* Indexed by dt_activation. */
static const char *const act_names[] = {"linear", "relu", "leaky", "tanh", "sigmoid"};
#define ACT_COUNT (int)(sizeof act_names / sizeof act_names[0])

const dt_layer_ops *dt_layer_ops_of(dt_layer_kind kind) {
    if ((int)kind < 0 || kind >= DT_LAYER_KIND_COUNT) return NULL;
    return kind_ops[kind];
}

int dt_layer_kind_from_name(const char *name) {
    for (int k = 0; k < DT_LAYER_KIND_COUNT; k++)
        if (strcmp(kind_ops[k]->name, name) == 0) return k;
    return -1;
}

const char *dt_activation_name(dt_activation a) {
    if ((int)a < 0 || (int)a >= ACT_COUNT) return "?";
    return act_names[a];
}

int dt_activation_from_name(const char *name) {
    for (int a = 0; a < ACT_COUNT; a++)
        if (strcmp(act_names[a], name) == 0) return a;
    return -1;
}

dt_status dt_layer_config_error(const dt_layer *l, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const dt_layer_ops *ops = dt_layer_ops_of(l->spec.kind);
    return dt_fail(DT_ERR_CONFIG, "line %d: [%s] %s", l->spec.line, ops ? ops->name : "?", msg);
}

dt_status dt_layer_mul(const dt_layer *l, size_t *out, size_t a, size_t b, const char *what) {
    if (a != 0 && b > SIZE_MAX / a)
        return dt_layer_config_error(l, "%s size %zu x %zu overflows", what, a, b);
    *out = a * b;
    return DT_OK;
}

dt_status dt_layer_check_shape(const dt_layer *l, dt_shape s, const char *what) {
    if (s.c < 1 || s.h < 1 || s.w < 1)
        return dt_layer_config_error(l, "%s shape %dx%dx%d has a dimension < 1", what, s.c, s.h,
                                     s.w);
    size_t hw = 0, n = 0;
    DT_TRY(dt_layer_mul(l, &hw, (size_t)s.h, (size_t)s.w, what));
    DT_TRY(dt_layer_mul(l, &n, hw, (size_t)s.c, what));
    if (n > INT_MAX)
        return dt_layer_config_error(l, "%s shape %dx%dx%d is too large (%zu values per sample)",
                                     what, s.c, s.h, s.w, n);
    return DT_OK;
}

/* One spatial dimension of a window: n input cells -> *out positions. */
static dt_status window_dim(const dt_layer *l, int n, const char *dim, int *out) {
    const dt_layer_spec *s = &l->spec;
    long long padded = (long long)n + 2LL * s->pad;
    if (s->size > padded)
        return dt_layer_config_error(l, "size %d is larger than the padded input %s %lld (%d + 2*%d)",
                                     s->size, dim, padded, n, s->pad);
    *out = (int)((padded - s->size) / s->stride + 1);
    return DT_OK;
}

dt_status dt_layer_window_setup(const dt_layer *l, int *oh, int *ow) {
    const dt_layer_spec *s = &l->spec;
    DT_TRY(dt_layer_check_shape(l, l->in, "input"));
    if (s->size < 1) return dt_layer_config_error(l, "size must be >= 1, got %d", s->size);
    if (s->stride < 1) return dt_layer_config_error(l, "stride must be >= 1, got %d", s->stride);
    if (s->pad < 0) return dt_layer_config_error(l, "pad must be >= 0, got %d", s->pad);
    DT_TRY(window_dim(l, l->in.h, "height", oh));
    return window_dim(l, l->in.w, "width", ow);
}

dt_status dt_layer_setup_same(dt_layer *l) {
    DT_TRY(dt_layer_check_shape(l, l->in, "input"));
    l->out = l->in;
    l->nw = l->nb = l->nstate = 0;
    return DT_OK;
}

size_t dt_layer_no_floats(const dt_layer *l, int batch) {
    (void)l, (void)batch;
    return 0;
}

void dt_layer_init_none(dt_layer *l, dt_rng *rng) { (void)l, (void)rng; }

uint64_t dt_layer_flops_elems(const dt_layer *l) { return dt_shape_size(l->out); }

void dt_layer_fill_uniform(float *x, size_t n, float bound, dt_rng *rng) {
    for (size_t i = 0; i < n; i++) x[i] = (2.0f * dt_rng_uniform(rng) - 1.0f) * bound;
}

enum { LANES = 16 };

double dt_layer_sum(const float *x, size_t n) {
    float acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += x[i + j];
    double s = 0;
    for (; i < n; i++) s += x[i];
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}

double dt_layer_dot(const float *x, const float *y, size_t n) {
    float acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += x[i + j] * y[i + j];
    double s = 0;
    for (; i < n; i++) s += (double)x[i] * y[i];
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}

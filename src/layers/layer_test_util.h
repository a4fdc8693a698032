/* Test helper shared by tests/test_gradcheck.c and tests/test_layers_ref.c:
 * a layer with its own parameter, gradient, state, saved, workspace and
 * activation buffers for one batch size, as the net would give it. */
#ifndef DT_LAYERS_LAYER_TEST_UTIL_H
#define DT_LAYERS_LAYER_TEST_UTIL_H

#include <string.h>

#include "dtrain/layer.h"
#include "dtrain/mem.h"
#include "dtrain/rng.h"

typedef struct {
    dt_layer l;
    int batch;
    size_t nin, nout;  /* batch * per-sample in / out sizes */
    float *in, *out;   /* (B, in), (B, out) */
    float *din, *dout; /* (B, in), (B, out) */
    float *ws;
} test_layer;

/* x[i] ~ U(lo, hi). */
static inline void tl_fill(float *x, size_t n, float lo, float hi, dt_rng *rng) {
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * dt_rng_uniform(rng);
}

static inline void tl_free(test_layer *t) {
    if (t->l.ops && t->l.ops->destroy) t->l.ops->destroy(&t->l);
    dt_free(t->l.w), dt_free(t->l.dw), dt_free(t->l.state), dt_free(t->l.saved);
    dt_free(t->ws), dt_free(t->in), dt_free(t->out), dt_free(t->din), dt_free(t->dout);
    memset(t, 0, sizeof *t);
}

/* Sets the layer up for input shape `in`, allocates every buffer, inits the
 * parameters from `seed` and fills the input with U(-1, 1). */
static inline dt_status tl_create(test_layer *t, dt_layer_spec spec, dt_shape in, int batch,
                                  uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->l.spec = spec;
    t->l.ops = dt_layer_ops_of(spec.kind);
    t->l.in = t->l.ins[0] = in;
    t->l.ninputs = 1;
    t->l.seed = seed;
    t->l.winograd = 1; /* as a net does by default ([net] winograd=1) */
    t->batch = batch;
    DT_TRY(t->l.ops->setup(&t->l));
    t->nin = dt_shape_size(in) * (size_t)batch;
    t->nout = dt_shape_size(t->l.out) * (size_t)batch;
    size_t np = t->l.nw + t->l.nb;
    dt_status s = DT_OK;
    if (s == DT_OK) s = dt_alloc_floats(&t->l.w, np, "params");
    if (s == DT_OK) s = dt_alloc_floats(&t->l.dw, np, "grads");
    if (s == DT_OK) s = dt_alloc_floats(&t->l.state, t->l.nstate, "state");
    if (s == DT_OK) s = dt_alloc_floats(&t->l.saved, t->l.ops->saved_floats(&t->l, batch), "saved");
    if (s == DT_OK) s = dt_alloc_floats(&t->ws, t->l.ops->workspace_floats(&t->l, batch), "ws");
    if (s == DT_OK) s = dt_alloc_floats(&t->in, t->nin, "in");
    if (s == DT_OK) s = dt_alloc_floats(&t->din, t->nin, "din");
    if (s == DT_OK) s = dt_alloc_floats(&t->out, t->nout, "out");
    if (s == DT_OK) s = dt_alloc_floats(&t->dout, t->nout, "dout");
    if (s != DT_OK) {
        tl_free(t);
        return s;
    }
    t->l.b = t->l.w + t->l.nw;
    t->l.db = t->l.dw + t->l.nw;
    dt_rng rng = dt_rng_seed(seed);
    t->l.ops->init(&t->l, &rng);
    tl_fill(t->in, t->nin, -1.0f, 1.0f, &rng);
    return DT_OK;
}

/* Spec helpers: a spec of `kind` with everything else zero but line 7. */
static inline dt_layer_spec tl_spec(dt_layer_kind kind) {
    dt_layer_spec s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.line = 7;
    return s;
}

static inline dt_layer_spec tl_conv(int filters, int size, int stride, int pad) {
    dt_layer_spec s = tl_spec(DT_LAYER_CONV);
    s.conv.filters = filters, s.size = size, s.stride = stride, s.pad = pad;
    return s;
}

#endif

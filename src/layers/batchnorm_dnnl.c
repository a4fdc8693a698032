/* [batchnorm] on bf16 activations (l->in_bf16: the net keeps the input and
 * output in bf16, nChw16c, between bf16 convolutions), by oneDNN's batch
 * normalisation primitive (declared in dnnl_layer.h).
 *
 * Same meaning as batchnorm.c's fp32 passes: batch statistics in f32 (mean
 * and biased variance over B*H*W, accumulated in f32 by oneDNN), gamma and
 * beta f32 (use_scale, use_shift), their gradients f32, the running
 * statistics updated here (the unbiased variance, as PyTorch), a folded
 * ReLU by oneDNN's fuse_norm_relu (its mask kept in the primitive's
 * workspace between forward and backward). Only the data and its gradients
 * are bf16. saved: mean (C) then variance (C) of the training forward (the
 * fp32 path keeps 1/std there; each path reads only its own).
 *
 * Plans per batch size as in dnnl_layer.c (NPLANS kept, least recently
 * used rebuilt): primitives for the training forward, the evaluation
 * forward and backward, memory objects whose handles are set on each call,
 * the workspace, and user-mode scratchpads. */
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <stdint.h>
#include <string.h>

#include "dtrain/mem.h"
#include "layers/dnnl_layer.h"

#define DNNL_TRY(call)                                                   \
    do {                                                                 \
        dnnl_status_t dnnl_s_ = (call);                                  \
        if (dnnl_s_ != dnnl_success) return dnnl_failed(dnnl_s_, #call); \
    } while (0)

static dt_status dnnl_failed(dnnl_status_t s, const char *call) {
    return dt_fail(s == dnnl_out_of_memory ? DT_ERR_NOMEM : DT_ERR_INTERNAL, "oneDNN: %s: %s", call,
                   dnnl_status2str(s));
}

/* Passes, and the memory objects of their arguments. */
enum { P_TRAIN, P_EVAL, P_BWD, P_COUNT };
enum { M_SRC, M_DST, M_DDST, M_DSRC, M_MEAN, M_VAR, M_SCALE, M_SHIFT, M_DSCALE, M_DSHIFT, M_WS, M_COUNT };

typedef struct {
    int batch; /* 0: unused */
    uint64_t used;
    dnnl_primitive_t prim[P_COUNT];
    dnnl_memory_t scratch[P_COUNT];
    dnnl_memory_t mem[M_COUNT]; /* M_WS allocated (NULL without a fused ReLU), the others handles */
} bn_plan;

#define NPLANS 3

typedef struct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_attr_t attr;
    dt_status failed;
    uint64_t clock;
    bn_plan plans[NPLANS];
} bn_impl;

static void plan_clear(bn_plan *p) {
    for (int i = 0; i < P_COUNT; i++) {
        if (p->prim[i]) (void)dnnl_primitive_destroy(p->prim[i]);
        if (p->scratch[i]) (void)dnnl_memory_destroy(p->scratch[i]);
    }
    for (int i = 0; i < M_COUNT; i++)
        if (p->mem[i]) (void)dnnl_memory_destroy(p->mem[i]);
    memset(p, 0, sizeof *p);
}

static dt_status make_prim(bn_impl *d, bn_plan *p, int pass, const_dnnl_primitive_desc_t pd) {
    DNNL_TRY(dnnl_primitive_create(&p->prim[pass], pd));
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (md && dnnl_memory_desc_get_size(md) > 0)
        DNNL_TRY(dnnl_memory_create(&p->scratch[pass], md, d->engine, DNNL_MEMORY_ALLOCATE));
    return DT_OK;
}

/* The three primitives and the memory objects of l at `batch`. */
static dt_status plan_build(bn_impl *d, bn_plan *p, const dt_layer *l, int batch) {
    dnnl_memory_desc_t data, stat;
    dnnl_dims_t dims = {batch, l->in.c, l->in.h, l->in.w}, cdims = {l->in.c};
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&data, 4, dims, dnnl_bf16,
                                          l->in_layout == DT_LAYOUT_NCHW16C ? dnnl_nChw16c : dnnl_nChw8c));
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&stat, 1, cdims, dnnl_f32, dnnl_a));
    unsigned relu = l->relu_out ? (unsigned)dnnl_fuse_norm_relu : 0u;
    unsigned flags = (unsigned)dnnl_use_scale | (unsigned)dnnl_use_shift | relu;
    float eps = l->spec.bn.eps;
    dnnl_batch_normalization_desc_t od;
    dnnl_primitive_desc_t train = NULL, pd = NULL;
    DNNL_TRY(dnnl_batch_normalization_forward_desc_init(&od, dnnl_forward_training, &data, eps, flags));
    DNNL_TRY(dnnl_primitive_desc_create(&train, &od, d->attr, d->engine, NULL));
    dt_status s = make_prim(d, p, P_TRAIN, train);
    const dnnl_memory_desc_t *ws = dnnl_primitive_desc_query_md(train, dnnl_query_workspace_md, 0);
    if (s == DT_OK && relu && ws && dnnl_memory_desc_get_size(ws) > 0 &&
        dnnl_memory_create(&p->mem[M_WS], ws, d->engine, DNNL_MEMORY_ALLOCATE) != dnnl_success)
        s = dt_fail(DT_ERR_NOMEM, "oneDNN batch norm: workspace");
    if (s == DT_OK &&
        dnnl_batch_normalization_backward_desc_init(&od, dnnl_backward, &data, &data, eps, flags) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &od, d->attr, d->engine, train) == dnnl_success) {
        s = make_prim(d, p, P_BWD, pd);
        (void)dnnl_primitive_desc_destroy(pd);
    } else if (s == DT_OK) {
        s = dt_fail(DT_ERR_INTERNAL, "oneDNN batch norm: no backward primitive");
    }
    (void)dnnl_primitive_desc_destroy(train);
    DT_TRY(s);
    DNNL_TRY(dnnl_batch_normalization_forward_desc_init(&od, dnnl_forward_inference, &data, eps,
                                                        flags | (unsigned)dnnl_use_global_stats));
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &od, d->attr, d->engine, NULL));
    s = make_prim(d, p, P_EVAL, pd);
    (void)dnnl_primitive_desc_destroy(pd);
    DT_TRY(s);
    for (int i = 0; i < M_WS; i++)
        DNNL_TRY(dnnl_memory_create(&p->mem[i], i <= M_DSRC ? &data : &stat, d->engine, DNNL_MEMORY_NONE));
    return DT_OK;
}

static dt_status impl_create(bn_impl *d) {
    DNNL_TRY(dnnl_engine_create(&d->engine, dnnl_cpu, 0));
    DNNL_TRY(dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags));
    DNNL_TRY(dnnl_primitive_attr_create(&d->attr));
    DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(d->attr, dnnl_scratchpad_mode_user));
    return DT_OK;
}

static dt_status plan_get(dt_layer *l, int batch, bn_impl **dp, bn_plan **pp) {
    if (!l->impl) {
        DT_TRY(dt_alloc_bytes(&l->impl, sizeof(bn_impl), "oneDNN batch norm"));
        bn_impl *d = l->impl;
        d->failed = impl_create(d);
    }
    bn_impl *d = l->impl;
    DT_TRY(d->failed);
    bn_plan *p = NULL, *lru = &d->plans[0];
    for (int i = 0; i < NPLANS; i++) {
        if (d->plans[i].batch == batch) p = &d->plans[i];
        if (d->plans[i].used < lru->used) lru = &d->plans[i];
    }
    if (!p) {
        p = lru;
        plan_clear(p);
        dt_status s = plan_build(d, p, l, batch);
        if (s != DT_OK) {
            plan_clear(p);
            return s;
        }
        p->batch = batch;
    }
    p->used = ++d->clock;
    *dp = d;
    *pp = p;
    return DT_OK;
}

/* Points memory object m of p at x (oneDNN takes void *; inputs are only read). */
static dt_status bind(bn_plan *p, int m, const void *x) {
    DNNL_TRY(dnnl_memory_set_data_handle(p->mem[m], (void *)(uintptr_t)x));
    return DT_OK;
}

static dt_status run(bn_impl *d, bn_plan *p, int pass, int n, const int *args) {
    dnnl_exec_arg_t a[M_COUNT + 1];
    for (int i = 0; i < n; i++) a[i] = (dnnl_exec_arg_t){args[2 * i], p->mem[args[2 * i + 1]]};
    if (p->scratch[pass]) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->scratch[pass]};
    DNNL_TRY(dnnl_primitive_execute(p->prim[pass], d->stream, n, a));
    DNNL_TRY(dnnl_stream_wait(d->stream));
    return DT_OK;
}

dt_status dt_bn_dnnl_forward(dt_layer *l, float *out, const float *in, int batch, int train) {
    bn_impl *d;
    bn_plan *p;
    DT_TRY(plan_get(l, batch, &d, &p));
    int C = l->in.c;
    float *mean = train ? l->saved : l->state, *var = mean + C;
    DT_TRY(bind(p, M_SRC, in));
    DT_TRY(bind(p, M_DST, out));
    DT_TRY(bind(p, M_MEAN, mean));
    DT_TRY(bind(p, M_VAR, var));
    DT_TRY(bind(p, M_SCALE, l->w));
    DT_TRY(bind(p, M_SHIFT, l->b));
    int args[] = {DNNL_ARG_SRC, M_SRC, DNNL_ARG_DST, M_DST, DNNL_ARG_MEAN, M_MEAN, DNNL_ARG_VARIANCE, M_VAR,
                  DNNL_ARG_SCALE, M_SCALE, DNNL_ARG_SHIFT, M_SHIFT, DNNL_ARG_WORKSPACE, M_WS};
    int n = train && p->mem[M_WS] ? 7 : 6;
    DT_TRY(run(d, p, train ? P_TRAIN : P_EVAL, n, args));
    if (!train) return DT_OK;
    float *rmean = l->state, *rvar = l->state + C, m = l->spec.bn.momentum;
    double count = (double)batch * (double)l->in.h * (double)l->in.w;
    float unbias = count > 1 ? (float)(count / (count - 1)) : 1.0f;
    for (int c = 0; c < C; c++) {
        rmean[c] = (1.0f - m) * rmean[c] + m * mean[c];
        rvar[c] = (1.0f - m) * rvar[c] + m * var[c] * unbias;
    }
    return DT_OK;
}

dt_status dt_bn_dnnl_backward(dt_layer *l, float *din, const float *dout, const float *in, int batch) {
    bn_impl *d;
    bn_plan *p;
    DT_TRY(plan_get(l, batch, &d, &p));
    int C = l->in.c;
    DT_TRY(bind(p, M_SRC, in));
    DT_TRY(bind(p, M_DDST, dout));
    DT_TRY(bind(p, M_DSRC, din));
    DT_TRY(bind(p, M_MEAN, l->saved));
    DT_TRY(bind(p, M_VAR, l->saved + C));
    DT_TRY(bind(p, M_SCALE, l->w));
    DT_TRY(bind(p, M_SHIFT, l->b)); /* not read, but oneDNN asks for it with use_shift */
    DT_TRY(bind(p, M_DSCALE, l->dw));
    DT_TRY(bind(p, M_DSHIFT, l->db));
    int args[] = {DNNL_ARG_SRC,        M_SRC,   DNNL_ARG_DIFF_DST,   M_DDST,   DNNL_ARG_DIFF_SRC,   M_DSRC,
                  DNNL_ARG_MEAN,       M_MEAN,  DNNL_ARG_VARIANCE,   M_VAR,    DNNL_ARG_SCALE,      M_SCALE,
                  DNNL_ARG_SHIFT,      M_SHIFT, DNNL_ARG_DIFF_SCALE, M_DSCALE, DNNL_ARG_DIFF_SHIFT, M_DSHIFT,
                  DNNL_ARG_WORKSPACE,  M_WS};
    return run(d, p, P_BWD, p->mem[M_WS] ? 10 : 9, args);
}

void dt_bn_dnnl_destroy(dt_layer *l) {
    bn_impl *d = l->impl;
    if (!d) return;
    for (int i = 0; i < NPLANS; i++) plan_clear(&d->plans[i]);
    if (d->attr) (void)dnnl_primitive_attr_destroy(d->attr);
    if (d->stream) (void)dnnl_stream_destroy(d->stream);
    if (d->engine) (void)dnnl_engine_destroy(d->engine);
    dt_free(d);
    l->impl = NULL;
}

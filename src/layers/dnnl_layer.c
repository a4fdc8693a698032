/* Layers through oneDNN (declared in dnnl_layer.h).
 *
 * Why: OpenBLAS sgemm reaches about half of a core's peak on the im2col
 * products of small convolutions ((64 x 800) . (800 x 196) in the cnn
 * model); oneDNN's JIT convolutions work on channel-blocked layouts
 * (nChw16c or nChw8c activations, OIhw16i16o-like weights) and run near peak. In bf16
 * (AVX512_BF16 dot products, or AMX tiles) they do two or more times the
 * arithmetic of f32 FMAs per cycle, for convolutions and inner products.
 *
 * How: the net's buffers are f32 in its layouts (NCHW, blocked or NC
 * activations, by the layer's in_layout/out_layout; OIHW or OI weights, 1D
 * bias), except blocked activations the net keeps in bf16 (in_bf16,
 * out_bf16): "plain" below means these. Each primitive is created with layout "any" (in
 * the compute type); where oneDNN picks a layout or type other than the
 * plain f32 one, a tensor gets a buffer in that layout and type and a
 * reorder between it and the dtrain buffer (cheap next to the product;
 * it converts f32 <-> bf16 too). Tensors of the same dtrain buffer and
 * layout are shared between primitives (the forward's blocked input serves
 * backward-weights too). An input copy is refreshed once per call; the one
 * exception is a backward that directly follows the forward of the same
 * plan on the same buffers: by the layer contract it gets that forward's
 * input and weights, so their copies (the bf16 weights: cast once per step)
 * are reused.
 *
 * Plans: the primitives and blocked buffers for one batch size. The forward
 * half is built by the first forward at that size, the backward half by the
 * first backward, so evaluation-only sizes build no backward primitives.
 * NPLANS plans are kept; another batch size rebuilds the least recently
 * used one (allocating on that call only). Three cover an epoch: the full
 * batch, the short last training batch and the short last evaluation batch
 * (their creation, tens of ms, is paid once per run). Every primitive has a
 * user-mode scratchpad allocated with it, because oneDNN's library mode
 * allocates and frees one on every execution. */
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <stdint.h>
#include <string.h>

#include "dtrain/mem.h"
#include "layers/dnnl_layer.h"

dt_status dt_dnnl_failed(dnnl_status_t s, const char *call) {
    return dt_fail(s == dnnl_out_of_memory ? DT_ERR_NOMEM : DT_ERR_INTERNAL, "oneDNN: %s: %s",
                   call, dnnl_status2str(s));
}

static dt_status ctx_create(dt_dnnl_ctx *c) {
    DT_DNNL_TRY(dnnl_engine_create(&c->engine, dnnl_cpu, 0));
    DT_DNNL_TRY(dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags));
    DT_DNNL_TRY(dnnl_primitive_attr_create(&c->attr));
    DT_DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(c->attr, dnnl_scratchpad_mode_user));
    return DT_OK;
}

dt_status dt_dnnl_ctx_init(dt_dnnl_ctx *c) {
    c->failed = ctx_create(c);
    return c->failed;
}

void dt_dnnl_ctx_free(dt_dnnl_ctx *c) {
    /* oneDNN's destroy calls fail only for invalid handles; these are ours. */
    if (c->attr) (void)dnnl_primitive_attr_destroy(c->attr);
    if (c->stream) (void)dnnl_stream_destroy(c->stream);
    if (c->engine) (void)dnnl_engine_destroy(c->engine);
    memset(c, 0, sizeof *c);
}

/* The dtrain buffers a layer reads or writes. */
enum { B_IN, B_W, B_BIAS, B_OUT, B_DOUT, B_DIN, B_DW, B_DB, B_COUNT };

/* Written by the primitive (and copied out to the dtrain buffer after it). */
static int is_output(int buf) { return buf == B_OUT || buf == B_DIN || buf == B_DW || buf == B_DB; }

/* A primitive and its scratchpad (NULL when it needs none). */
typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t scratch;
} op;

/* One dtrain buffer as a primitive sees it. `user` is the buffer in its
 * plain layout, its pointer set on each call; `mem` is what primitives read
 * or write: `user` itself when oneDNN chose the plain layout, else a buffer
 * of oneDNN's layout that `reorder` fills from `user` (inputs) or copies
 * into it (outputs). */
typedef struct {
    int buf; /* B_* */
    dnnl_memory_t user, mem;
    op reorder;      /* prim is NULL when mem == user */
    uint64_t filled; /* the call whose input reorder last ran (0: never, or the buffer moved;
                        calls count from 1, so 0 is never fresh) */
} tensor;

/* Tensors of a plan: at most forward 4 + backward-weights 4 + backward-data
 * 3 when none is shared; arguments of one primitive: at most 4. */
#define MAX_TENSORS 11
#define MAX_ARGS 4

/* A primitive and the tensors of its arguments. */
typedef struct {
    op run;
    int n;
    int arg[MAX_ARGS];   /* DNNL_ARG_* */
    tensor *t[MAX_ARGS]; /* into the plan's tensors */
} step;

typedef struct {
    int batch;        /* 0: slot unused */
    uint64_t used;    /* clock of the last call: the least recent plan is rebuilt */
    dt_status failed; /* building failed: every call at this batch falls back */
    int has_bwd;      /* backward half built */
    dnnl_primitive_desc_t fwd_pd; /* kept as the hint the backward primitives need */
    step fwd, bwd_weights, bwd_data;
    tensor t[MAX_TENSORS];
    int nt;
} plan;

#define NPLANS 3

typedef struct {
    dt_dnnl_ctx ctx;
    dt_precision precision;     /* of the plans built (another clears them) */
    int in_bf16, out_bf16;      /* the activations' types of the plans built (likewise) */
    uint64_t clock;             /* counts calls: input-refresh passes and plan recency */
    uint64_t last_forward;      /* clock of the last forward call */
    plan *last_forward_plan;    /* its plan */
    plan plans[NPLANS];
} dnnl_layer;

/* Plain descriptors of the buffers and the "any" descriptors a kind builds
 * its op descriptors from, of one layer at one batch size. */
typedef struct {
    /* By B_*: in, din (B, src) and out, dout (B, dst) nchw (or nChw8c/16c,
     * by the layer's layouts) or nc; w, dw
     * oihw, goihw (groups) or oi; bias, db a (F). All f32 but the
     * activations the net keeps in bf16. */
    dnnl_memory_desc_t plain[B_COUNT];
    dnnl_memory_desc_t any_src, any_wei, any_dst, any_diff_wei;
    dt_dnnl_dims dims;
    dt_dnnl_descs descs;
} geometry;

/* oneDNN's tag of a 4-d activation in layout t. */
static dnnl_format_tag_t activation_tag(dt_layout t) {
    return t == DT_LAYOUT_NCHW16C ? dnnl_nChw16c : t == DT_LAYOUT_NCHW8C ? dnnl_nChw8c : dnnl_nchw;
}

static dt_status geometry_of(const dt_layer *l, const dt_dnnl_kind *k, int batch, geometry *g) {
    memset(g, 0, sizeof *g);
    k->describe(l, batch, &g->dims);
    int nd = g->dims.ndims, wnd = g->dims.wei_ndims ? g->dims.wei_ndims : nd;
    dnnl_format_tag_t wei = wnd == 5 ? dnnl_goihw : nd == 4 ? dnnl_oihw : dnnl_oi;
    /* Blocked activations are handed to oneDNN as they are: where its
     * primitive picks that layout too (f32: nChw16c on AVX-512, nChw8c on
     * AVX2), no reorder runs. */
    dnnl_format_tag_t in = nd == 4 ? activation_tag(l->in_layout) : dnnl_nc;
    dnnl_format_tag_t out = nd == 4 ? activation_tag(l->out_layout) : dnnl_nc;
    dnnl_data_type_t t = l->precision == DT_PRECISION_BF16 ? dnnl_bf16 : dnnl_f32;
    dnnl_dims_t bias = {g->dims.dst[1]};
    /* Activations the net keeps in bf16 (l->in_bf16, out_bf16: blocked,
     * between layers that all handle bf16) are handed over as they are. */
    dnnl_data_type_t in_t = nd == 4 && l->in_bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_data_type_t out_t = nd == 4 && l->out_bf16 ? dnnl_bf16 : dnnl_f32;
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&g->plain[B_IN], nd, g->dims.src, in_t, in));
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&g->plain[B_W], wnd, g->dims.wei, dnnl_f32, wei));
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&g->plain[B_BIAS], 1, bias, dnnl_f32, dnnl_a));
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&g->plain[B_OUT], nd, g->dims.dst, out_t, out));
    g->plain[B_DOUT] = g->plain[B_OUT];
    g->plain[B_DIN] = g->plain[B_IN];
    g->plain[B_DW] = g->plain[B_W];
    g->plain[B_DB] = g->plain[B_BIAS];
    dnnl_format_tag_t any = dnnl_format_tag_any;
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&g->any_src, nd, g->dims.src, t, any));
    dnnl_format_tag_t wtag = k->plain_weights ? wei : any;
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&g->any_wei, wnd, g->dims.wei, t, wtag));
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&g->any_dst, nd, g->dims.dst, t, any));
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&g->any_diff_wei, wnd, g->dims.wei, dnnl_f32, wtag));
    g->descs = (dt_dnnl_descs){&g->any_src, &g->any_wei,      &g->any_dst,
                               &g->any_diff_wei, l->nb > 0 ? &g->plain[B_BIAS] : NULL,
                               &g->dims};
    return DT_OK;
}

static void op_destroy(op *o) {
    /* oneDNN's destroy calls fail only for invalid handles; these are ours. */
    if (o->prim) (void)dnnl_primitive_destroy(o->prim);
    if (o->scratch) (void)dnnl_memory_destroy(o->scratch);
    memset(o, 0, sizeof *o);
}

static dt_status op_create(dnnl_layer *d, op *o, const_dnnl_primitive_desc_t pd) {
    DT_DNNL_TRY(dnnl_primitive_create(&o->prim, pd));
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (md && dnnl_memory_desc_get_size(md) > 0)
        DT_DNNL_TRY(dnnl_memory_create(&o->scratch, md, d->ctx.engine, DNNL_MEMORY_ALLOCATE));
    return DT_OK;
}

/* Executes o with args[0..n) plus its scratchpad. */
static dt_status op_run(dnnl_layer *d, const op *o, int n, const dnnl_exec_arg_t *args) {
    dnnl_exec_arg_t all[MAX_ARGS + 1];
    memcpy(all, args, sizeof(dnnl_exec_arg_t) * (size_t)n);
    if (o->scratch) all[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, o->scratch};
    DT_DNNL_TRY(dnnl_primitive_execute(o->prim, d->ctx.stream, n, all));
    return DT_OK;
}

static void tensor_destroy(tensor *t) {
    op_destroy(&t->reorder);
    if (t->mem && t->mem != t->user) (void)dnnl_memory_destroy(t->mem);
    if (t->user) (void)dnnl_memory_destroy(t->user);
    memset(t, 0, sizeof *t);
}

/* t stands for buffer `buf` (plain layout `plain`) in layout `want`. */
static dt_status tensor_create(dnnl_layer *d, tensor *t, int buf, const dnnl_memory_desc_t *plain,
                               const dnnl_memory_desc_t *want) {
    t->buf = buf;
    DT_DNNL_TRY(dnnl_memory_create(&t->user, plain, d->ctx.engine, DNNL_MEMORY_NONE));
    if (dnnl_memory_desc_equal(plain, want)) {
        t->mem = t->user;
        return DT_OK;
    }
    DT_DNNL_TRY(dnnl_memory_create(&t->mem, want, d->ctx.engine, DNNL_MEMORY_ALLOCATE));
    int out = is_output(buf);
    dnnl_primitive_desc_t pd;
    DT_DNNL_TRY(dnnl_reorder_primitive_desc_create(&pd, out ? want : plain, d->ctx.engine,
                                                out ? plain : want, d->ctx.engine, d->ctx.attr));
    dt_status s = op_create(d, &t->reorder, pd);
    (void)dnnl_primitive_desc_destroy(pd);
    return s;
}

static int has_layout(const tensor *t, const dnnl_memory_desc_t *want) {
    const dnnl_memory_desc_t *md;
    return dnnl_memory_get_memory_desc(t->mem, &md) == dnnl_success &&
           dnnl_memory_desc_equal(md, want);
}

/* Creates the primitive of pd in s, with argument arg[i] on buffer buf[i]:
 * an existing tensor of that buffer and layout, else a new one. */
static dt_status step_create(dnnl_layer *d, plan *p, step *s, const_dnnl_primitive_desc_t pd,
                             const geometry *g, int n, const int *arg, const int *buf) {
    DT_TRY(op_create(d, &s->run, pd));
    for (int i = 0; i < n; i++) {
        const dnnl_memory_desc_t *want =
            dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg[i]);
        if (!want) return dt_fail(DT_ERR_INTERNAL, "oneDNN: no descriptor for argument %d", arg[i]);
        tensor *t = NULL;
        for (int j = 0; j < p->nt && !t; j++)
            if (p->t[j].buf == buf[i] && has_layout(&p->t[j], want)) t = &p->t[j];
        if (!t) {
            DT_ASSERT(p->nt < MAX_TENSORS);
            t = &p->t[p->nt++];
            DT_TRY(tensor_create(d, t, buf[i], &g->plain[buf[i]], want));
        }
        s->arg[i] = arg[i];
        s->t[i] = t;
    }
    s->n = n;
    return DT_OK;
}

/* Refreshes s's input copies not filled since call `fresh_since`, executes
 * s, and copies its outputs out to the dtrain buffers. */
static dt_status step_run(dnnl_layer *d, const step *s, uint64_t fresh_since) {
    dnnl_exec_arg_t args[MAX_ARGS];
    for (int i = 0; i < s->n; i++) {
        tensor *t = s->t[i];
        args[i] = (dnnl_exec_arg_t){s->arg[i], t->mem};
        if (is_output(t->buf) || !t->reorder.prim || t->filled >= fresh_since)
            continue;
        dnnl_exec_arg_t io[2] = {{DNNL_ARG_FROM, t->user}, {DNNL_ARG_TO, t->mem}};
        DT_TRY(op_run(d, &t->reorder, 2, io));
        t->filled = d->clock;
    }
    DT_TRY(op_run(d, &s->run, s->n, args));
    for (int i = 0; i < s->n; i++) {
        const tensor *t = s->t[i];
        if (!is_output(t->buf) || !t->reorder.prim) continue;
        dnnl_exec_arg_t io[2] = {{DNNL_ARG_FROM, t->mem}, {DNNL_ARG_TO, t->user}};
        DT_TRY(op_run(d, &t->reorder, 2, io));
    }
    return DT_OK;
}

/* Points every tensor whose buffer is in bufs (B_COUNT entries, NULL for
 * buffers this call does not touch) at it; a copy of a buffer that moved
 * is stale. */
static dt_status bind(plan *p, const float *const *bufs) {
    for (int j = 0; j < p->nt; j++) {
        const float *x = bufs[p->t[j].buf];
        if (!x) continue;
        void *old = NULL;
        DT_DNNL_TRY(dnnl_memory_get_data_handle(p->t[j].user, &old));
        if (old != (const void *)x) p->t[j].filled = 0;
        /* oneDNN takes void *; it only reads the inputs' buffers. */
        DT_DNNL_TRY(dnnl_memory_set_data_handle(p->t[j].user, (void *)(uintptr_t)x));
    }
    return DT_OK;
}

static void plan_clear(plan *p) {
    op_destroy(&p->fwd.run);
    op_destroy(&p->bwd_weights.run);
    op_destroy(&p->bwd_data.run);
    for (int j = 0; j < p->nt; j++) tensor_destroy(&p->t[j]);
    if (p->fwd_pd) (void)dnnl_primitive_desc_destroy(p->fwd_pd);
    memset(p, 0, sizeof *p);
}

/* The bias is last in the argument lists, so a layer without one passes
 * the first n - 1. */
static dt_status build_forward(dnnl_layer *d, plan *p, const dt_dnnl_kind *k, const geometry *g) {
    dt_dnnl_op_desc od;
    DT_DNNL_TRY(k->op_desc(&od, DT_DNNL_FORWARD, &g->descs));
    DT_DNNL_TRY(dnnl_primitive_desc_create(&p->fwd_pd, &od, d->ctx.attr, d->ctx.engine, NULL));
    static const int arg[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    static const int buf[] = {B_IN, B_W, B_OUT, B_BIAS};
    return step_create(d, p, &p->fwd, p->fwd_pd, g, g->descs.bias ? 4 : 3, arg, buf);
}

/* Creates the primitive of `pass` (hinted by the forward) into st. */
static dt_status build_backward_step(dnnl_layer *d, plan *p, step *st, const dt_dnnl_kind *k,
                                     const geometry *g, dt_dnnl_pass pass, int n, const int *arg,
                                     const int *buf) {
    dt_dnnl_op_desc od;
    DT_DNNL_TRY(k->op_desc(&od, pass, &g->descs));
    dnnl_primitive_desc_t pd;
    DT_DNNL_TRY(dnnl_primitive_desc_create(&pd, &od, d->ctx.attr, d->ctx.engine, p->fwd_pd));
    dt_status s = step_create(d, p, st, pd, g, n, arg, buf);
    (void)dnnl_primitive_desc_destroy(pd);
    return s;
}

static dt_status build_backward(dnnl_layer *d, plan *p, const dt_dnnl_kind *k, const geometry *g) {
    static const int warg[] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS,
                               DNNL_ARG_DIFF_BIAS};
    static const int wbuf[] = {B_IN, B_DOUT, B_DW, B_DB};
    DT_TRY(build_backward_step(d, p, &p->bwd_weights, k, g, DT_DNNL_BACKWARD_WEIGHTS,
                               g->descs.bias ? 4 : 3, warg, wbuf));
    static const int darg[] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC};
    static const int dbuf[] = {B_DOUT, B_W, B_DIN};
    return build_backward_step(d, p, &p->bwd_data, k, g, DT_DNNL_BACKWARD_DATA, 3, darg, dbuf);
}

/* The dnnl_layer of l, created on first use; plans of another precision
 * or activation types than l's are dropped. */
static dt_status impl_get(dt_layer *l, const dt_dnnl_kind *k, dnnl_layer **dp) {
    if (!l->impl) {
        DT_TRY(dt_alloc_bytes(&l->impl, sizeof(dnnl_layer), k->what));
        dnnl_layer *d = l->impl;
        (void)dt_dnnl_ctx_init(&d->ctx);
        d->precision = l->precision;
        d->in_bf16 = l->in_bf16, d->out_bf16 = l->out_bf16;
    }
    dnnl_layer *d = l->impl;
    if (d->ctx.failed != DT_OK) return d->ctx.failed;
    if (d->precision != l->precision || d->in_bf16 != l->in_bf16 || d->out_bf16 != l->out_bf16) {
        for (int i = 0; i < NPLANS; i++) plan_clear(&d->plans[i]);
        d->last_forward_plan = NULL;
        d->precision = l->precision;
        d->in_bf16 = l->in_bf16, d->out_bf16 = l->out_bf16;
    }
    *dp = d;
    return DT_OK;
}

/* The plan of l for `batch`, built up to its backward half if `backward`. */
static dt_status plan_get(dt_layer *l, const dt_dnnl_kind *k, int batch, int backward,
                          dnnl_layer **dp, plan **pp) {
    DT_ASSERT(batch >= 1); /* batch 0 marks an unused plan */
    dnnl_layer *d;
    DT_TRY(impl_get(l, k, &d));
    plan *p = NULL, *lru = &d->plans[0];
    for (int i = 0; i < NPLANS; i++) {
        if (d->plans[i].batch == batch) p = &d->plans[i];
        if (d->plans[i].used < lru->used) lru = &d->plans[i];
    }
    if (!p) {
        p = lru;
        if (p == d->last_forward_plan) d->last_forward_plan = NULL;
        plan_clear(p);
        p->batch = batch;
    }
    p->used = ++d->clock;
    *dp = d;
    *pp = p;
    if (p->failed != DT_OK) return p->failed;
    if (p->fwd_pd && (!backward || p->has_bwd)) return DT_OK;
    geometry g;
    dt_status s = geometry_of(l, k, batch, &g);
    if (s == DT_OK && g.dims.winograd && !p->fwd_pd) {
        /* Winograd for all three passes or for none: built together, and on
         * any refusal (a shape oneDNN's Winograd does not take) the direct
         * kernels instead. */
        s = build_forward(d, p, k, &g);
        if (s == DT_OK) s = build_backward(d, p, k, &g);
        if (s == DT_OK) {
            p->has_bwd = 1;
            return DT_OK;
        }
        plan_clear(p);
        p->batch = batch;
        p->used = d->clock;
        g.dims.winograd = 0;
        s = DT_OK;
    }
    if (s == DT_OK && !p->fwd_pd) s = build_forward(d, p, k, &g);
    if (s == DT_OK && backward) s = build_backward(d, p, k, &g);
    if (s != DT_OK) {
        /* A half-built plan is freed; the caller falls back for this batch. */
        plan_clear(p);
        p->batch = batch;
        p->used = d->clock;
        p->failed = s;
        return s;
    }
    p->has_bwd |= backward;
    return DT_OK;
}

dt_status dt_dnnl_forward(dt_layer *l, const dt_dnnl_kind *k, float *out, const float *in,
                          int batch) {
    dnnl_layer *d;
    plan *p;
    DT_TRY(plan_get(l, k, batch, 0, &d, &p));
    const float *bufs[B_COUNT] = {[B_IN] = in, [B_W] = l->w, [B_BIAS] = l->b, [B_OUT] = out};
    DT_TRY(bind(p, bufs));
    DT_TRY(step_run(d, &p->fwd, d->clock));
    DT_DNNL_TRY(dnnl_stream_wait(d->ctx.stream));
    d->last_forward = d->clock;
    d->last_forward_plan = p;
    return DT_OK;
}

void dt_dnnl_forget_forward(dt_layer *l) {
    if (l->impl) ((dnnl_layer *)l->impl)->last_forward_plan = NULL;
}

dt_status dt_dnnl_backward(dt_layer *l, const dt_dnnl_kind *k, float *din, const float *dout,
                           const float *in, int batch, int weights) {
    dnnl_layer *d;
    plan *p;
    DT_TRY(plan_get(l, k, batch, 1, &d, &p));
    const float *bufs[B_COUNT] = {[B_IN] = in,   [B_W] = l->w,   [B_DOUT] = dout,
                                  [B_DIN] = din, [B_DW] = l->dw, [B_DB] = l->db};
    DT_TRY(bind(p, bufs));
    /* Right after this plan's forward, the copies it made (input, weights)
     * still hold this call's buffers (bind cleared any that moved). */
    uint64_t fresh_since =
        d->last_forward_plan == p && d->last_forward == d->clock - 1 ? d->last_forward : d->clock;
    if (weights) DT_TRY(step_run(d, &p->bwd_weights, fresh_since));
    if (din) DT_TRY(step_run(d, &p->bwd_data, fresh_since));
    DT_DNNL_TRY(dnnl_stream_wait(d->ctx.stream));
    return DT_OK;
}

void dt_dnnl_destroy(dt_layer *l) {
    dnnl_layer *d = l->impl;
    if (!d) return;
    for (int i = 0; i < NPLANS; i++) plan_clear(&d->plans[i]);
    dt_dnnl_ctx_free(&d->ctx);
    dt_free(d);
    l->impl = NULL;
}

/* Names of oneDNN's CPU ISAs, for the precision check's message. */
static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "SSE4.1";
    case dnnl_cpu_isa_avx: return "AVX";
    case dnnl_cpu_isa_avx2: return "AVX2";
    case dnnl_cpu_isa_avx2_vnni: return "AVX2 with VNNI";
    case dnnl_cpu_isa_avx512_mic: case dnnl_cpu_isa_avx512_mic_4ops: return "AVX-512 (Xeon Phi)";
    case dnnl_cpu_isa_avx512_core: return "AVX-512";
    case dnnl_cpu_isa_avx512_core_vnni: return "AVX-512 with VNNI";
    case dnnl_cpu_isa_avx512_core_bf16: return "AVX-512 with BF16";
    case dnnl_cpu_isa_avx512_core_amx: return "AVX-512 with AMX";
    default: return "no vector extensions";
    }
}

dt_status dt_precision_check(dt_precision p) {
    if (p != DT_PRECISION_BF16) return DT_OK;
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    /* oneDNN's ISA values are bit sets: each contains the ones it extends. */
    if (((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) ==
        (unsigned)dnnl_cpu_isa_avx512_core_bf16)
        return DT_OK;
    return dt_fail(DT_ERR_CONFIG,
                   "bf16 needs the AVX512_BF16 or AMX-BF16 instructions, and oneDNN finds only %s "
                   "on this CPU (use fp32)",
                   isa_name(isa));
}

dt_layout dt_layout_native(void) {
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    unsigned core = (unsigned)dnnl_cpu_isa_avx512_core, avx2 = (unsigned)dnnl_cpu_isa_avx2;
    return (isa & core) == core ? DT_LAYOUT_NCHW16C : (isa & avx2) == avx2 ? DT_LAYOUT_NCHW8C : DT_LAYOUT_NCHW;
}

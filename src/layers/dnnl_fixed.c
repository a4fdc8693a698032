/* Fixed plans (declared in dnnl_layer.h): the oneDNN primitives of a layer
 * whose tensors need no reorders (batch norm and max pooling on bf16
 * activations in the net's blocked layout), per batch size. The kind's
 * build function creates a plan's primitives and memory objects; this file
 * keeps NPLANS of them (the least recently used rebuilt for another batch
 * size, as dnnl_layer.c does), binds buffers and runs passes. */
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/mem.h"
#include "layers/dnnl_layer.h"

#define NPLANS 3

typedef struct {
    dt_dnnl_ctx ctx;
    uint64_t clock; /* counts calls: plan recency */
    dt_dnnl_fixed_plan plans[NPLANS];
} dt_dnnl_fixed;

static void plan_clear(dt_dnnl_fixed_plan *p) {
    /* oneDNN's destroy calls fail only for invalid handles; these are ours. */
    for (int i = 0; i < DT_DNNL_PASSES; i++) {
        if (p->prim[i]) (void)dnnl_primitive_destroy(p->prim[i]);
        if (p->scratch[i]) (void)dnnl_memory_destroy(p->scratch[i]);
    }
    for (int i = 0; i < DT_DNNL_MEMS; i++)
        if (p->mem[i]) (void)dnnl_memory_destroy(p->mem[i]);
    memset(p, 0, sizeof *p);
}

dt_status dt_dnnl_fixed_prim(const dt_dnnl_ctx *c, dt_dnnl_fixed_plan *p, int pass,
                             const_dnnl_primitive_desc_t pd) {
    DT_DNNL_TRY(dnnl_primitive_create(&p->prim[pass], pd));
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (md && dnnl_memory_desc_get_size(md) > 0)
        DT_DNNL_TRY(dnnl_memory_create(&p->scratch[pass], md, c->engine, DNNL_MEMORY_ALLOCATE));
    return DT_OK;
}

/* Builds p for `batch`; leaves it cleared on an error. */
static dt_status plan_build(const dt_dnnl_ctx *c, dt_dnnl_fixed_plan *p, const dt_layer *l, int batch,
                            dt_dnnl_fixed_build build) {
    plan_clear(p);
    dt_status s = build(c, p, l, batch);
    if (s != DT_OK) {
        plan_clear(p);
        return s;
    }
    p->batch = batch;
    return DT_OK;
}

dt_status dt_dnnl_fixed_get(dt_layer *l, int batch, dt_dnnl_fixed_build build, const char *what,
                            dt_dnnl_fixed_plan **pp) {
    if (!l->impl) {
        DT_TRY(dt_alloc_bytes(&l->impl, sizeof(dt_dnnl_fixed), what));
        (void)dt_dnnl_ctx_init(&((dt_dnnl_fixed *)l->impl)->ctx);
    }
    dt_dnnl_fixed *d = l->impl;
    DT_TRY(d->ctx.failed);
    dt_dnnl_fixed_plan *p = NULL, *lru = &d->plans[0];
    for (int i = 0; i < NPLANS; i++) {
        if (d->plans[i].batch == batch) p = &d->plans[i];
        if (d->plans[i].used < lru->used) lru = &d->plans[i];
    }
    if (!p) {
        p = lru;
        DT_TRY(plan_build(&d->ctx, p, l, batch, build));
    }
    p->used = ++d->clock;
    *pp = p;
    return DT_OK;
}

dt_status dt_dnnl_fixed_bind(dt_dnnl_fixed_plan *p, int m, const void *x) {
    DT_DNNL_TRY(dnnl_memory_set_data_handle(p->mem[m], (void *)(uintptr_t)x));
    return DT_OK;
}

dt_status dt_dnnl_fixed_run(dt_layer *l, dt_dnnl_fixed_plan *p, int pass, int n, const int *args) {
    const dt_dnnl_fixed *d = l->impl;
    dnnl_exec_arg_t a[DT_DNNL_MEMS + 1];
    for (int i = 0; i < n; i++) a[i] = (dnnl_exec_arg_t){args[2 * i], p->mem[args[2 * i + 1]]};
    if (p->scratch[pass]) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->scratch[pass]};
    DT_DNNL_TRY(dnnl_primitive_execute(p->prim[pass], d->ctx.stream, n, a));
    DT_DNNL_TRY(dnnl_stream_wait(d->ctx.stream));
    return DT_OK;
}

int dt_dnnl_fixed_supported(const dt_layer *l, dt_dnnl_fixed_build build) {
    dt_dnnl_ctx c = {0};
    dt_dnnl_fixed_plan p = {0};
    int ok = dt_dnnl_ctx_init(&c) == DT_OK && plan_build(&c, &p, l, 1, build) == DT_OK;
    plan_clear(&p);
    dt_dnnl_ctx_free(&c);
    return ok;
}

void dt_dnnl_fixed_destroy(dt_layer *l) {
    dt_dnnl_fixed *d = l->impl;
    if (!d) return;
    for (int i = 0; i < NPLANS; i++) plan_clear(&d->plans[i]);
    dt_dnnl_ctx_free(&d->ctx);
    dt_free(d);
    l->impl = NULL;
}

void dt_dnnl_fixed_check(dt_status s, const char *what) {
    if (s != DT_OK) fprintf(stderr, "dtrain: %s on bf16 activations: %s\n", what, dt_last_error());
    DT_ASSERT(s == DT_OK);
}

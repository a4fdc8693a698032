/* Fast paths (im2col + sgemm conv, sgemm dense) against the plain reference
 * loops on odd shapes, forward and every gradient, with din == NULL; the
 * OpenMP passes (activations, batch norm, pooling) give the same bits on 1
 * and 3 threads; layers on nChw8c and nChw16c activations (both on any CPU)
 * compute what they do on NCHW; plus setup validation messages, names, init
 * bounds and flops. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "dtrain/layer.h"
#include "layers/layer_impl.h"
#include "layers/layer_test_util.h"
#include "layers/winograd.h"
#include "testutil.h"

static float max_abs(const float *x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}

/* |fast - ref| <= 1e-4 * (|ref| + max|ref|): relative to the buffer's scale,
 * since sums over thousands of terms lose absolute precision on small values. */
static void check_close_scaled_tol(const float *fast, const float *ref, size_t n, double rtol,
                                   const char *what) {
    double atol = rtol * (max_abs(ref, n) + 1e-6);
    if (!dt_check_allclose(fast, ref, n, atol, rtol, __FILE__, __LINE__, what))
        fprintf(stderr, "  (in %s)\n", what);
}

static void check_close_scaled(const float *fast, const float *ref, size_t n, const char *what) {
    check_close_scaled_tol(fast, ref, n, 1e-4, what);
}

/* forward/backward vs forward_ref/backward_ref on t's input and a random
 * dout; then backward with din == NULL must give the same dw/db and leave
 * din alone, and (ops->optional_wgrad) both with dw == NULL the same din
 * and db. dw/db are poisoned first: backward must overwrite them. */
static void check_fast_vs_ref(test_layer *t, const char *name) {
    dt_layer *l = &t->l;
    dt_rng rng = dt_rng_seed(99);
    size_t np = l->nw + l->nb;
    float *ref_out, *ref_din, *ref_dw, *fast_dw;
    CHECK_OK(dt_alloc_floats(&ref_out, t->nout, "t"));
    CHECK_OK(dt_alloc_floats(&ref_din, t->nin, "t"));
    CHECK_OK(dt_alloc_floats(&ref_dw, np, "t"));
    CHECK_OK(dt_alloc_floats(&fast_dw, np, "t"));
    tl_fill(t->dout, t->nout, -1.0f, 1.0f, &rng);

    l->ops->forward_ref(l, ref_out, t->in, t->batch, 1, t->ws);
    l->ops->forward(l, t->out, t->in, t->batch, 1, t->ws);
    check_close_scaled(t->out, ref_out, t->nout, name);

    for (size_t i = 0; i < np; i++) l->dw[i] = 1e3f;
    l->ops->backward_ref(l, ref_din, t->dout, t->in, t->out, t->batch, t->ws);
    memcpy(ref_dw, l->dw, sizeof(float) * np);
    for (size_t i = 0; i < np; i++) l->dw[i] = -7.0f;
    l->ops->backward(l, t->din, t->dout, t->in, t->out, t->batch, t->ws);
    check_close_scaled(t->din, ref_din, t->nin, name);
    check_close_scaled(l->dw, ref_dw, l->nw, name);
    check_close_scaled(l->db, ref_dw + l->nw, l->nb, name);

    memcpy(fast_dw, l->dw, sizeof(float) * np);
    for (size_t i = 0; i < np; i++) l->dw[i] = 3.0f;
    for (size_t i = 0; i < t->nin; i++) t->din[i] = 42.0f;
    l->ops->backward(l, NULL, t->dout, t->in, t->out, t->batch, t->ws);
    CHECK(memcmp(l->dw, fast_dw, sizeof(float) * np) == 0);
    size_t untouched = 0;
    for (size_t i = 0; i < t->nin; i++) untouched += t->din[i] == 42.0f;
    CHECK(untouched == t->nin);

    /* Kinds that leave the weight gradient to the caller (SFB): with dw
     * NULL both passes give the same db and din and write no weight. */
    if (l->ops->optional_wgrad) {
        float *dw = l->dw;
        for (size_t i = 0; i < np; i++) dw[i] = 5.0f;
        l->dw = NULL;
        for (int ref = 0; ref < 2; ref++) {
            (ref ? l->ops->backward_ref : l->ops->backward)(l, t->din, t->dout, t->in, t->out, t->batch, t->ws);
            check_close_scaled(t->din, ref_din, t->nin, name);
            check_close_scaled(l->db, ref_dw + l->nw, l->nb, name);
            size_t kept = 0;
            for (size_t i = 0; i < l->nw; i++) kept += dw[i] == 5.0f;
            CHECK(kept == l->nw);
        }
        l->dw = dw;
    }

    dt_free(ref_out), dt_free(ref_din), dt_free(ref_dw), dt_free(fast_dw);
}

/* One training forward and backward of t on `threads` threads: out, din and
 * dw/db (the next np floats) into res (nout + nin + np). */
static void run_on_threads(test_layer *t, int threads, float *res) {
    dt_layer *l = &t->l;
    size_t np = l->nw + l->nb;
    omp_set_num_threads(threads);
    l->ops->forward(l, t->out, t->in, t->batch, 1, t->ws);
    l->ops->backward(l, t->din, t->dout, t->in, t->out, t->batch, t->ws);
    omp_set_num_threads(1);
    memcpy(res, t->out, sizeof(float) * t->nout);
    memcpy(res + t->nout, t->din, sizeof(float) * t->nin);
    memcpy(res + t->nout + t->nin, l->dw, sizeof(float) * np);
}

/* A layer on a batch above DT_LAYER_PAR_FLOATS (so its loops do split) gives
 * the same bits on 1 and 3 threads: each value is computed by one thread in
 * one order, so a run does not depend on --threads beyond the convolutions. */
static void threads_case_in(dt_layer_spec s, dt_shape in, int B, dt_layout layout, int relu_out,
                            const char *name) {
    test_layer t;
    if (!CHECK_OK(tl_create(&t, s, in, B, 17))) return;
    CHECK(t.nin >= 32768);
    /* A blocked layout and a fused ReLU as the net would set them (the
     * input's values need no conversion: any values do). */
    t.l.in_layout = layout;
    t.l.out_layout = t.l.ops->layouts && t.l.ops->layouts(&t.l) == DT_LAYOUTS_READS_ANY ? DT_LAYOUT_NCHW : layout;
    t.l.relu_out = relu_out;
    dt_free(t.ws);
    if (!CHECK_OK(dt_alloc_floats(&t.ws, t.l.ops->workspace_floats(&t.l, B) + 1, "ws"))) {
        tl_free(&t);
        return;
    }
    dt_rng rng = dt_rng_seed(5);
    tl_fill(t.dout, t.nout, -1.0f, 1.0f, &rng);
    size_t n = t.nout + t.nin + t.l.nw + t.l.nb;
    float *one, *three;
    if (CHECK_OK(dt_alloc_floats(&one, n, "one")) && CHECK_OK(dt_alloc_floats(&three, n, "three"))) {
        run_on_threads(&t, 1, one);
        run_on_threads(&t, 3, three);
        int same = memcmp(one, three, sizeof(float) * n) == 0;
        CHECK(same);
        if (!same) fprintf(stderr, "  (in %s)\n", name);
        dt_free(three);
    }
    dt_free(one);
    tl_free(&t);
}

static void threads_case(dt_layer_spec s, dt_shape in, int B, const char *name) {
    threads_case_in(s, in, B, DT_LAYOUT_NCHW, 0, name);
}

static void test_threads(void) {
    dt_layer_spec bn = tl_spec(DT_LAYER_BATCHNORM);
    bn.bn.momentum = 0.1f, bn.bn.eps = 1e-5f;
    threads_case(bn, (dt_shape){7, 13, 11}, 40, "batchnorm");
    threads_case_in(bn, (dt_shape){7, 13, 11}, 40, DT_LAYOUT_NCHW, 1, "batchnorm + relu");
    for (dt_layout t = DT_LAYOUT_NCHW8C; t <= DT_LAYOUT_NCHW16C; t++) {
        threads_case_in(bn, (dt_shape){32, 13, 11}, 12, t, 0, "batchnorm blocked");
        threads_case_in(bn, (dt_shape){16, 40, 40}, 3, t, 1, "batchnorm + relu blocked");
    }
    for (int a = DT_ACT_LINEAR; a < DT_ACT_COUNT; a++) {
        dt_layer_spec s = tl_spec(DT_LAYER_ACT);
        s.act.fn = (dt_activation)a, s.act.slope = 0.1f;
        threads_case(s, (dt_shape){5, 9, 9}, 90, dt_activation_name((dt_activation)a));
    }
    dt_layer_spec pool = tl_spec(DT_LAYER_MAXPOOL);
    pool.size = 2, pool.stride = 2;
    threads_case(pool, (dt_shape){6, 14, 14}, 32, "maxpool 2x2");
    pool.size = 3, pool.pad = 1;
    threads_case(pool, (dt_shape){6, 14, 13}, 32, "maxpool 3x3/2");
    pool.kind = DT_LAYER_AVGPOOL;
    threads_case(pool, (dt_shape){6, 14, 13}, 32, "avgpool 3x3/2");
    pool.size = pool.stride = pool.pad = 0;
    threads_case(pool, (dt_shape){6, 14, 13}, 32, "global avgpool");
    threads_case_in(pool, (dt_shape){32, 14, 13}, 6, DT_LAYOUT_NCHW8C, 0, "global avgpool nChw8c");
    threads_case_in(pool, (dt_shape){32, 14, 13}, 6, DT_LAYOUT_NCHW16C, 0, "global avgpool nChw16c");
}

/* dst (B, s) in layout t <- src in NCHW, into a new buffer (NULL on failure). */
static float *to_blocked(const float *src, int batch, dt_shape s, dt_layout t) {
    float *dst = NULL;
    if (CHECK_OK(dt_alloc_floats(&dst, dt_shape_size(s) * (size_t)batch, "blocked")))
        dt_layout_convert(dst, t, src, DT_LAYOUT_NCHW, batch, s);
    return dst;
}

/* A layer on activations in blocked layout t (input and output as its rule
 * allows) computes what it computes on NCHW: the same training forward,
 * input and parameter gradients, running statistics and evaluation forward,
 * within rtol of the buffer's scale (sums run in another order). */
static void layout_case_in(dt_layer_spec s, dt_shape in, int B, double rtol, dt_precision prec, dt_layout lay,
                           const char *what) {
    char name[128];
    snprintf(name, sizeof name, "%s %s", what, dt_layout_name(lay));
    test_layer t;
    if (!CHECK_OK(tl_create(&t, s, in, B, 23))) return;
    dt_layer *l = &t.l;
    l->precision = prec;
    dt_layout_rule rule = l->ops->layouts ? l->ops->layouts(l) : DT_LAYOUTS_NCHW;
    CHECK(rule != DT_LAYOUTS_NCHW);
    dt_rng rng = dt_rng_seed(8);
    tl_fill(t.dout, t.nout, -1.0f, 1.0f, &rng);
    size_t np = l->nw + l->nb;
    float *ref = NULL, *state0 = NULL, *bws = NULL;
    float *bin = to_blocked(t.in, B, in, lay);
    int out_blocked = rule != DT_LAYOUTS_READS_ANY;
    float *bdout = out_blocked ? to_blocked(t.dout, B, l->out, lay) : NULL;
    size_t nref = 2 * t.nout + t.nin + np + l->nstate;
    if (!bin || (out_blocked && !bdout) || !CHECK_OK(dt_alloc_floats(&ref, nref, "ref")) ||
        !CHECK_OK(dt_alloc_floats(&state0, l->nstate + 1, "state")))
        goto done;
    memcpy(state0, l->state, sizeof(float) * l->nstate);
    /* NCHW: train forward, backward, then evaluation forward. */
    l->ops->forward(l, t.out, t.in, B, 1, t.ws);
    memcpy(ref, t.out, sizeof(float) * t.nout);
    l->ops->backward(l, t.din, t.dout, t.in, t.out, B, t.ws);
    memcpy(ref + t.nout, t.din, sizeof(float) * t.nin);
    memcpy(ref + t.nout + t.nin, l->dw, sizeof(float) * np);
    memcpy(ref + t.nout + t.nin + np, l->state, sizeof(float) * l->nstate);
    l->ops->forward(l, t.out, t.in, B, 0, t.ws);
    memcpy(ref + t.nout + t.nin + np + l->nstate, t.out, sizeof(float) * t.nout);
    /* The same in the blocked layout, from the same state, with its own
     * workspace and (for oneDNN) plans. */
    if (l->ops->destroy) l->ops->destroy(l);
    memcpy(l->state, state0, sizeof(float) * l->nstate);
    l->in_layout = lay;
    l->out_layout = out_blocked ? lay : DT_LAYOUT_NCHW;
    if (!CHECK_OK(dt_alloc_floats(&bws, l->ops->workspace_floats(l, B) + 1, "ws"))) goto done;
    const float *dout = out_blocked ? bdout : t.dout;
    float *out = t.out, *din = t.din;
    if (!CHECK_OK(dt_alloc_floats(&out, t.nout, "out")) || !CHECK_OK(dt_alloc_floats(&din, t.nin, "din")))
        goto done;
    l->ops->forward(l, out, bin, B, 1, bws);
    if (out_blocked) dt_layout_convert(t.out, DT_LAYOUT_NCHW, out, lay, B, l->out);
    else memcpy(t.out, out, sizeof(float) * t.nout);
    check_close_scaled_tol(t.out, ref, t.nout, rtol, name);
    l->ops->backward(l, din, dout, bin, out, B, bws);
    dt_layout_convert(t.din, DT_LAYOUT_NCHW, din, lay, B, in);
    check_close_scaled_tol(t.din, ref + t.nout, t.nin, rtol, name);
    check_close_scaled_tol(l->dw, ref + t.nout + t.nin, np, rtol, name);
    check_close_scaled_tol(l->state, ref + t.nout + t.nin + np, l->nstate, rtol, name);
    l->ops->forward(l, out, bin, B, 0, bws);
    if (out_blocked) dt_layout_convert(t.out, DT_LAYOUT_NCHW, out, lay, B, l->out);
    else memcpy(t.out, out, sizeof(float) * t.nout);
    check_close_scaled_tol(t.out, ref + t.nout + t.nin + np + l->nstate, t.nout, rtol, name);
    dt_free(out), dt_free(din);
done:
    dt_free(ref), dt_free(state0), dt_free(bws), dt_free(bin), dt_free(bdout);
    tl_free(&t);
}

/* layout_case_in in nChw8c and in nChw16c. */
static void layout_case(dt_layer_spec s, dt_shape in, int B, double rtol, dt_precision prec, const char *name) {
    layout_case_in(s, in, B, rtol, prec, DT_LAYOUT_NCHW8C, name);
    layout_case_in(s, in, B, rtol, prec, DT_LAYOUT_NCHW16C, name);
}

static void test_layouts(void) {
    dt_layer_spec bn = tl_spec(DT_LAYER_BATCHNORM);
    bn.bn.momentum = 0.1f, bn.bn.eps = 1e-5f;
    layout_case(bn, (dt_shape){32, 7, 5}, 6, 1e-5, DT_PRECISION_FP32, "batchnorm");
    layout_case(bn, (dt_shape){16, 28, 28}, 33, 1e-5, DT_PRECISION_FP32, "batchnorm, 28x28: chunked sums");
    layout_case_in(bn, (dt_shape){24, 5, 5}, 4, 1e-5, DT_PRECISION_FP32, DT_LAYOUT_NCHW8C, "batchnorm, 3 blocks");
    dt_layer_spec act = tl_spec(DT_LAYER_ACT);
    act.act.fn = DT_ACT_RELU;
    layout_case(act, (dt_shape){16, 3, 5}, 3, 0, DT_PRECISION_FP32, "relu");
    dt_layer_spec gap = tl_spec(DT_LAYER_AVGPOOL);
    layout_case(gap, (dt_shape){48, 5, 3}, 4, 1e-6, DT_PRECISION_FP32, "global avgpool");
    layout_case(tl_conv(32, 3, 2, 1), (dt_shape){16, 9, 8}, 3, 1e-5, DT_PRECISION_FP32, "conv -> blocked");
    layout_case(tl_conv(16, 1, 1, 0), (dt_shape){32, 6, 6}, 2, 1e-5, DT_PRECISION_FP32, "conv 1x1");
    dt_layer_spec grouped = tl_conv(32, 3, 1, 1), depthwise = tl_conv(16, 3, 2, 1);
    grouped.conv.groups = 2, depthwise.conv.groups = 16;
    layout_case(grouped, (dt_shape){16, 7, 6}, 2, 1e-5, DT_PRECISION_FP32, "conv, 2 groups");
    layout_case(depthwise, (dt_shape){16, 9, 8}, 3, 1e-5, DT_PRECISION_FP32, "conv, depthwise");
    /* bf16: the same bf16 operands reach the same kernels from either layout. */
    if (dt_precision_check(DT_PRECISION_BF16) == DT_OK)
        layout_case(tl_conv(32, 3, 2, 1), (dt_shape){16, 9, 8}, 3, 1e-5, DT_PRECISION_BF16, "conv bf16");
}

/* The Winograd kernels in `layout` on 1 and 3 threads, called directly
 * (so nChw16c's are tested on every AVX2 CPU, though layers run them on
 * Zen 4 only), for a convolution of C into s's filters over (B, C, H, W),
 * against the layer's own path on 1 thread: bit for bit where that path is
 * theirs (out and din: each tile is one thread's), else (oneDNN) within
 * 5e-5; dw within rounding (the threads' sums are added in order). */
static void winograd_direct_case(dt_layer_spec s, dt_shape in, int B, dt_layout layout, const char *name) {
    test_layer t;
    if (!CHECK_OK(tl_create(&t, s, in, B, 9))) return;
    t.l.in_layout = t.l.out_layout = layout;
    dt_free(t.ws); /* the blocked layout's fallback workspace */
    if (!CHECK_OK(dt_alloc_floats(&t.ws, t.l.ops->workspace_floats(&t.l, B) + 1, "ws"))) {
        tl_free(&t);
        return;
    }
    dt_rng rng = dt_rng_seed(4);
    tl_fill(t.dout, t.nout, -1.0f, 1.0f, &rng);
    size_t n = t.nout + t.nin + t.l.nw + t.l.nb, at = t.nout + t.nin;
    float *layer = NULL, *one = NULL, *three = NULL;
    if (CHECK_OK(dt_alloc_floats(&layer, n, "layer")) && CHECK_OK(dt_alloc_floats(&one, n, "one")) &&
        CHECK_OK(dt_alloc_floats(&three, n, "three"))) {
        run_on_threads(&t, 1, layer);
        float *res[2] = {one, three};
        for (int k = 0; k < 2; k++) {
            omp_set_num_threads(k ? 3 : 1);
            CHECK_OK(dt_winograd_forward(&t.l, t.out, t.in, t.batch));
            CHECK_OK(dt_winograd_backward(&t.l, t.din, t.dout, t.in, t.batch));
            omp_set_num_threads(1);
            memcpy(res[k], t.out, sizeof(float) * t.nout);
            memcpy(res[k] + t.nout, t.din, sizeof(float) * t.nin);
            memcpy(res[k] + at, t.l.dw, sizeof(float) * (t.l.nw + t.l.nb));
        }
        char what[3][160];
        snprintf(what[0], sizeof what[0], "%s: Winograd's out, din against oneDNN's path", name);
        snprintf(what[1], sizeof what[1], "%s: Winograd's dw against the layer's", name);
        snprintf(what[2], sizeof what[2], "%s: Winograd's dw, 1 and 3 threads", name);
        if (dt_layer_winograd(&t.l))
            CHECK(memcmp(layer, one, sizeof(float) * at) == 0); /* the layer ran them */
        else
            check_close_scaled_tol(one, layer, at, 5e-5, what[0]);
        check_close_scaled_tol(one + at, layer + at, t.l.nw + t.l.nb, 5e-5, what[1]);
        CHECK(memcmp(one, three, sizeof(float) * at) == 0); /* each tile is one thread's */
        check_close_scaled_tol(three + at, one + at, t.l.nw + t.l.nb, 1e-5, what[2]);
    }
    dt_free(layer), dt_free(one), dt_free(three);
    tl_free(&t);
}

/* The Winograd path (winograd.h): where it applies, and, where it runs (an
 * AVX2 CPU), its forward, gradients and evaluation forward against the
 * layer's NCHW path (oneDNN, which conv_case holds to the reference loops)
 * through layout_case_in, on tile grids with odd edges, one tile, several
 * blocks, tiles wholly inside the image (10x11), 8-filter remainders, rows
 * padded to 6, blocks of 6 tiles (the widest, 128 channels), with and
 * without bias, in nChw8c, and in nChw16c those whose channels are whole
 * blocks of 16 (with two 8-channel groups a cell), these also through
 * winograd_direct_case; then that case's 1-against-3-threads check in
 * nChw8c. Tolerance 5e-5 of the buffer's scale: F(4x4, 3x3)'s transforms
 * add and subtract terms up to 5 and 8 times a value and scale by 1/24, so
 * an output's rounding is some ten times a direct sum's (measured: a few
 * 1e-6, at most 1.0e-5 with 256 channels). */
static void test_winograd(void) {
    test_layer t;
    if (!CHECK_OK(tl_create(&t, tl_conv(16, 3, 1, 1), (dt_shape){16, 7, 6}, 2, 5))) return;
    t.l.in_layout = t.l.out_layout = DT_LAYOUT_NCHW8C;
#if defined(__x86_64__) || defined(__i386__)
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), zen = __builtin_cpu_is("amdfam19h");
#else
    int avx2 = 0, zen = 0;
#endif
    CHECK(dt_layer_winograd(&t.l) == avx2);
    t.l.winograd = 0; /* [net] winograd=0 */
    CHECK(!dt_layer_winograd(&t.l));
    t.l.winograd = 1, t.l.precision = DT_PRECISION_BF16;
    CHECK(!dt_layer_winograd(&t.l));
    t.l.precision = DT_PRECISION_FP32, t.l.out_layout = DT_LAYOUT_NCHW;
    CHECK(!dt_layer_winograd(&t.l));
    t.l.out_layout = DT_LAYOUT_NCHW8C, t.l.spec.conv.dilation = 2;
    CHECK(!dt_layer_winograd(&t.l));
    t.l.spec.conv.dilation = 1, t.l.spec.conv.groups = 2;
    CHECK(!dt_layer_winograd(&t.l));
    t.l.spec.conv.groups = 1, t.l.in_layout = t.l.out_layout = DT_LAYOUT_NCHW16C; /* Zen 4's (winograd.c) */
    CHECK(dt_layer_winograd(&t.l) == (avx2 && zen));
    tl_free(&t);
    if (!CHECK_OK(tl_create(&t, tl_conv(16, 3, 1, 1), (dt_shape){256, 3, 3}, 1, 5))) return;
    t.l.in_layout = t.l.out_layout = DT_LAYOUT_NCHW8C;
    CHECK(!dt_layer_winograd(&t.l)); /* wider than MAX_CHANNELS */
    tl_free(&t);
    if (!avx2) return;
    static const struct {
        int C, F, H, W, B, no_bias;
        const char *what;
    } cases[] = {
        {16, 16, 7, 6, 3, 0, "odd rows"},
        {8, 24, 5, 9, 13, 0, "8 -> 24, blocks"},
        {24, 8, 1, 1, 2, 0, "1x1 images: one tile, all padding"},
        {40, 16, 4, 3, 1, 1, "rows padded 40 -> 42, batch 1, no bias"},
        {16, 40, 10, 11, 4, 1, "16 + 16 + 8 filters, no bias"},
        {128, 16, 3, 4, 2, 1, "blocks of 6 tiles"},
        {48, 32, 5, 9, 13, 0, "48 -> 32, blocks"},
        {16, 48, 10, 11, 4, 1, "16 + 16 + 16 filters, no bias"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[96];
        snprintf(name, sizeof name, "conv 3x3 Winograd %s", cases[i].what);
        dt_layer_spec s = tl_conv(cases[i].F, 3, 1, 1);
        s.no_bias = cases[i].no_bias;
        dt_shape in = {cases[i].C, cases[i].H, cases[i].W};
        layout_case_in(s, in, cases[i].B, 5e-5, DT_PRECISION_FP32, DT_LAYOUT_NCHW8C, name);
        if (cases[i].C % 16 == 0 && cases[i].F % 16 == 0) {
            layout_case_in(s, in, cases[i].B, 5e-5, DT_PRECISION_FP32, DT_LAYOUT_NCHW16C, name);
            winograd_direct_case(s, in, cases[i].B, DT_LAYOUT_NCHW16C, name);
        }
    }
    winograd_direct_case(tl_conv(32, 3, 1, 1), (dt_shape){16, 14, 14}, 16, DT_LAYOUT_NCHW8C, "threads, nChw8c");
    winograd_direct_case(tl_conv(32, 3, 1, 1), (dt_shape){16, 14, 14}, 16, DT_LAYOUT_NCHW16C, "threads, nChw16c");
}

static void gemm_forward(dt_layer *l, float *out, const float *in, int batch, int train, float *ws) {
    (void)train;
    dt_conv_forward_gemm(l, out, in, batch, ws);
}

static void gemm_backward(dt_layer *l, float *din, const float *dout, const float *in, const float *out, int batch,
                          float *ws) {
    (void)out;
    dt_conv_backward_gemm(l, din, dout, in, batch, ws);
}

/* G groups, dilation D. */
static void conv_case_gd(int C, int H, int W, int F, int K, int S, int P, int B, int G, int D) {
    test_layer t;
    char name[96];
    snprintf(name, sizeof name, "conv C%d %dx%d F%d K%d S%d P%d B%d G%d D%d", C, H, W, F, K, S, P, B, G, D);
    dt_layer_spec s = tl_conv(F, K, S, P);
    s.conv.groups = G, s.conv.dilation = D;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){C, H, W}, B, 1000 + (uint64_t)K))) return;
    CHECK(t.l.nw == (size_t)F * (size_t)(C / G) * (size_t)K * (size_t)K);
    int E = (K - 1) * D + 1; /* PyTorch's output size */
    CHECK(t.l.out.h == (H + 2 * P - E) / S + 1 && t.l.out.w == (W + 2 * P - E) / S + 1);
    check_fast_vs_ref(&t, name);
    /* The sgemm path oneDNN's failures fall back to, the same way. */
    const dt_layer_ops *ops = t.l.ops;
    dt_layer_ops gemm = *ops;
    gemm.forward = gemm_forward, gemm.backward = gemm_backward;
    t.l.ops = &gemm;
    strncat(name, " sgemm", sizeof name - strlen(name) - 1);
    check_fast_vs_ref(&t, name);
    t.l.ops = ops;
    tl_free(&t);
}

static void conv_case_groups(int C, int H, int W, int F, int K, int S, int P, int B, int G) {
    conv_case_gd(C, H, W, F, K, S, P, B, G, 1);
}

static void conv_case(int C, int H, int W, int F, int K, int S, int P, int B) {
    conv_case_groups(C, H, W, F, K, S, P, B, 1);
}

static void dense_case(dt_shape in, int outputs, int B) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_DENSE);
    s.dense.outputs = outputs;
    if (!CHECK_OK(tl_create(&t, s, in, B, 2000 + (uint64_t)outputs))) return;
    check_fast_vs_ref(&t, "dense");
    tl_free(&t);
}

/* Pools against PyTorch's definition written out naively: the full K x K
 * window, padding as -inf for max and as zeros counted in the K*K divisor
 * for avg (count_include_pad=True). The input is all negative, so a padded
 * cell winning a max window would show up as a 0. */
static void pool_case(dt_layer_kind kind, int K, int S, int P, dt_shape in, int B) {
    test_layer t;
    dt_layer_spec s = tl_spec(kind);
    s.size = K, s.stride = S, s.pad = P;
    if (!CHECK_OK(tl_create(&t, s, in, B, 3000))) return;
    int OH = t.l.out.h, OW = t.l.out.w;
    CHECK(OH == (in.h + 2 * P - K) / S + 1 && OW == (in.w + 2 * P - K) / S + 1);
    float *want;
    if (!CHECK_OK(dt_alloc_floats(&want, t.nout, "want"))) return;
    for (size_t i = 0; i < t.nin; i++) t.in[i] = -1.5f - 0.5f * t.in[i];
    for (int p = 0; p < B * in.c; p++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                float m = -INFINITY, sum = 0;
                for (int kh = 0; kh < K; kh++)
                    for (int kw = 0; kw < K; kw++) {
                        int h = oh * S - P + kh, w = ow * S - P + kw;
                        int inside = h >= 0 && h < in.h && w >= 0 && w < in.w;
                        float v = inside ? t.in[((size_t)p * in.h + h) * in.w + w] : 0.0f;
                        if (inside && v > m) m = v;
                        sum += v;
                    }
                want[((size_t)p * OH + oh) * OW + ow] =
                    kind == DT_LAYER_MAXPOOL ? m : sum / (float)(K * K);
            }
    t.l.ops->forward(&t.l, t.out, t.in, B, 1, t.ws);
    CHECK_ALLCLOSE(t.out, want, t.nout, 1e-6, 1e-6);
    dt_free(want);
    tl_free(&t);
}

/* Max-pool ties go to the first cell of the window (PyTorch's CPU kernel):
 * on a constant input each 2x2 window routes its gradient to its top-left. */
static void maxpool_ties(void) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_MAXPOOL);
    s.size = 2, s.stride = 2;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){1, 4, 4}, 1, 3001))) return;
    for (size_t i = 0; i < t.nin; i++) t.in[i] = 0.5f;
    for (size_t i = 0; i < t.nout; i++) t.dout[i] = (float)(i + 1);
    t.l.ops->forward(&t.l, t.out, t.in, 1, 1, t.ws);
    t.l.ops->backward(&t.l, t.din, t.dout, t.in, t.out, 1, t.ws);
    const float want[16] = {1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0};
    CHECK_ALLCLOSE(t.din, want, 16, 0, 0);
    /* A NaN anywhere in a window is its max and takes its gradient. */
    t.in[5] = NAN;
    t.l.ops->forward(&t.l, t.out, t.in, 1, 1, t.ws);
    t.l.ops->backward(&t.l, t.din, t.dout, t.in, t.out, 1, t.ws);
    CHECK(isnan(t.out[0]) && t.out[1] == 0.5f && t.din[5] == 1.0f && t.din[0] == 0.0f);
    tl_free(&t);
    /* The same rules on rows of 9 windows (the vector loop takes four at a
     * time, the tail one), against the rule written out: the first maximum
     * of the window in reading order, the last NaN if any. Output row 0:
     * ties and -0 against +0 (the vector loop); row 1: NaNs in several
     * lanes and in the tail (the row is redone by the generic loop). */
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){1, 4, 18}, 1, 3001))) return;
    for (int i = 0; i < 72; i++) t.in[i] = (float)((i * 7) % 5) - 2.0f; /* many ties */
    t.in[2] = -0.0f, t.in[3] = 0.0f, t.in[20] = 0.0f, t.in[21] = -0.0f;
    t.in[36 + 5] = NAN;                             /* window 2: top right */
    t.in[36 + 24] = NAN, t.in[36 + 25] = NAN;       /* window 3: both bottom cells */
    t.in[36 + 17] = NAN;                            /* window 8: the tail */
    t.l.ops->forward(&t.l, t.out, t.in, 1, 1, t.ws);
    const int32_t *arg = (const int32_t *)t.l.saved;
    for (int oh = 0; oh < 2; oh++)
        for (int ow = 0; ow < 9; ow++) {
            int b = 36 * oh + 2 * ow, cells[4] = {b, b + 1, b + 18, b + 19}, best = cells[0], nan = -1;
            for (int c = 1; c < 4; c++)
                if (t.in[cells[c]] > t.in[best]) best = cells[c];
            for (int c = 0; c < 4; c++)
                if (isnan(t.in[cells[c]])) nan = cells[c];
            if (nan >= 0) best = nan;
            CHECK(arg[9 * oh + ow] == best);
            CHECK(memcmp(&t.out[9 * oh + ow], &t.in[best], sizeof(float)) == 0);
        }
    tl_free(&t);
}

/* LRN forward against Darknet's formula (torch.nn.LocalResponseNorm's with
 * alpha x size), per element. */
static void lrn_case(int C, int size) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_LRN);
    s.lrn.size = size, s.lrn.alpha = 0.3f, s.lrn.beta = 0.75f, s.lrn.k = 1.5f;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){C, 2, 3}, 2, 3002))) return;
    t.l.ops->forward(&t.l, t.out, t.in, 2, 1, t.ws);
    float *want;
    if (!CHECK_OK(dt_alloc_floats(&want, t.nout, "want"))) return;
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < 6; i++) {
                double sq = 0;
                for (int j = c - size / 2; j <= c + (size - 1) / 2; j++)
                    if (j >= 0 && j < C) sq += pow(t.in[(b * C + j) * 6 + i], 2);
                double a = t.in[(b * C + c) * 6 + i];
                want[(b * C + c) * 6 + i] = (float)(a / pow(1.5 + 0.3 * sq, 0.75));
            }
    CHECK_ALLCLOSE(t.out, want, t.nout, 1e-6, 1e-5);
    dt_free(want);
    tl_free(&t);
}

/* setup() must fail with DT_ERR_CONFIG and "line 7: [section] ..." containing `needle`. */
static void config_error(dt_layer_spec s, dt_shape in, const char *section, const char *needle) {
    dt_layer l;
    memset(&l, 0, sizeof l);
    l.spec = s;
    l.ops = dt_layer_ops_of(s.kind);
    l.in = in;
    dt_status st = l.ops->setup(&l);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "line 7: [%s] ", section);
    const char *msg = dt_last_error();
    int ok = st == DT_ERR_CONFIG && strncmp(msg, prefix, strlen(prefix)) == 0 &&
             strstr(msg, needle) != NULL;
    if (!ok)
        fprintf(stderr, "expected config error '%s...%s', got %d '%s'\n", prefix, needle, st, msg);
    CHECK(ok);
}

static void test_config_errors(void) {
    dt_shape img = {3, 8, 8};
    config_error(tl_conv(4, 11, 1, 1), img, "convolutional", "larger than the padded input");
    config_error(tl_conv(4, 3, 0, 1), img, "convolutional", "stride");
    dt_layer_spec odd = tl_conv(4, 3, 1, 1);
    odd.conv.groups = 3;
    config_error(odd, (dt_shape){6, 8, 8}, "convolutional", "groups=3 must divide the 6 input channels and the 4 filters");
    dt_layer_spec wide = tl_conv(4, 3, 1, 0);
    wide.conv.dilation = 4;
    config_error(wide, (dt_shape){1, 8, 8}, "convolutional", "size 3 dilated by 4 spans 9 cells, more than the padded input");
    config_error(tl_conv(0, 3, 1, 1), img, "convolutional", "filters");
    config_error(tl_conv(4, 3, 1, -1), img, "convolutional", "pad");
    config_error(tl_conv(4, 0, 1, 0), img, "convolutional", "size");
    config_error(tl_conv(4, 3, 1, 1), (dt_shape){0, 8, 8}, "convolutional", "dimension < 1");
    config_error(tl_conv(4, 3, 1, 1), (dt_shape){1 << 30, 1 << 30, 1 << 30}, "convolutional",
                 "overflows");
    config_error(tl_conv(4, 1, 1, 0), (dt_shape){1 << 20, 1 << 10, 4}, "convolutional",
                 "too large");
    dt_layer_spec mp = tl_spec(DT_LAYER_MAXPOOL);
    mp.size = 2, mp.stride = 2, mp.pad = 2;
    config_error(mp, img, "maxpool", "padding 2 before and 2 after must be smaller than size 2");
    dt_layer_spec ap = tl_spec(DT_LAYER_AVGPOOL);
    ap.size = 3, ap.stride = 1, ap.pad = 0;
    config_error(ap, (dt_shape){3, 2, 8}, "avgpool", "height");
    dt_layer_spec dr = tl_spec(DT_LAYER_DROPOUT);
    dr.dropout.p = 1.0f;
    config_error(dr, img, "dropout", "[0, 1)");
    dr.dropout.p = -0.1f;
    config_error(dr, img, "dropout", "[0, 1)");
    dt_layer_spec lrn = tl_spec(DT_LAYER_LRN);
    lrn.lrn.size = 4, lrn.lrn.alpha = 1e-4f, lrn.lrn.beta = 0.75f, lrn.lrn.k = 1;
    config_error(lrn, img, "lrn", "odd");
    lrn.lrn.size = 0;
    config_error(lrn, img, "lrn", "odd");
    dt_layer_spec dn = tl_spec(DT_LAYER_DENSE);
    config_error(dn, img, "connected", "output");
    dt_layer_spec act = tl_spec(DT_LAYER_ACT);
    act.act.fn = (dt_activation)9;
    config_error(act, img, "activation", "unknown activation");
    dt_layer_spec bn = tl_spec(DT_LAYER_BATCHNORM);
    bn.bn.momentum = 0.1f, bn.bn.eps = 0;
    config_error(bn, img, "batchnorm", "eps");
}

static void test_names(void) {
    /* The registry is generated from DT_LAYER_KINDS: every kind has ops,
     * and its section name leads back to it. */
    for (int k = 0; k < DT_LAYER_KIND_COUNT; k++) {
        const dt_layer_ops *ops = dt_layer_ops_of((dt_layer_kind)k);
        CHECK(ops != NULL);
        if (ops) CHECK(dt_layer_kind_from_name(ops->name) == k);
    }
    CHECK(dt_layer_kind_from_name("convolutional") == DT_LAYER_CONV);
    CHECK(dt_layer_kind_from_name("connected") == DT_LAYER_DENSE);
    CHECK(dt_layer_kind_from_name("crop") == DT_LAYER_CROP);
    CHECK(dt_layer_kind_from_name("conv") == -1);
    static const char *acts[DT_ACT_COUNT] = {"linear", "relu", "leaky", "tanh", "sigmoid", "ramp"};
    for (int a = 0; a < DT_ACT_COUNT; a++) {
        CHECK(strcmp(dt_activation_name((dt_activation)a), acts[a]) == 0);
        CHECK(dt_activation_from_name(acts[a]) == a);
    }
    CHECK(dt_activation_from_name("swish") == -1);
    CHECK(dt_activation_from_name("logistic") == DT_ACT_SIGMOID);
}

/* PyTorch default init: U(+-1/sqrt(fan_in)) for conv/dense weight and bias;
 * flops are 2 multiply-adds per weight use. */
static void test_init_and_flops(void) {
    test_layer t;
    if (!CHECK_OK(tl_create(&t, tl_conv(16, 3, 1, 1), (dt_shape){8, 10, 12}, 1, 5))) return;
    float bound = 1.0f / sqrtf(8 * 9);
    CHECK(t.l.nw == 16 * 8 * 9 && t.l.nb == 16);
    CHECK(max_abs(t.l.w, t.l.nw) <= bound && max_abs(t.l.w, t.l.nw) > 0.95f * bound);
    CHECK(max_abs(t.l.b, t.l.nb) <= bound);
    double mean = 0;
    for (size_t i = 0; i < t.l.nw; i++) mean += t.l.w[i];
    CHECK_CLOSE(mean / (double)t.l.nw, 0.0, 0.1 * bound, 0);
    CHECK(t.l.ops->flops(&t.l) == 2ULL * 16 * 8 * 9 * 10 * 12);
    tl_free(&t);

    dt_layer_spec s = tl_spec(DT_LAYER_DENSE);
    s.dense.outputs = 30;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){4, 5, 5}, 1, 6))) return;
    bound = 1.0f / sqrtf(100);
    CHECK(max_abs(t.l.w, t.l.nw) <= bound && max_abs(t.l.w, t.l.nw) > 0.95f * bound);
    CHECK(max_abs(t.l.b, t.l.nb) <= bound);
    CHECK(t.l.ops->flops(&t.l) == 2ULL * 100 * 30);
    tl_free(&t);
}

int main(void) {
    conv_case(3, 7, 9, 5, 3, 1, 1, 3);   /* odd channels, non-square */
    conv_case(2, 8, 7, 4, 3, 2, 1, 3);   /* stride 2, pad 1 */
    conv_case(4, 5, 6, 6, 1, 1, 0, 3);   /* 1x1 fast path without im2col */
    conv_case(3, 7, 5, 2, 1, 2, 0, 3);   /* 1x1 strided: im2col */
    conv_case(3, 5, 5, 2, 1, 1, 1, 2);   /* 1x1 padded: im2col */
    conv_case(1, 10, 10, 8, 5, 1, 2, 3); /* first conv of the cnn model */
    conv_case(5, 11, 8, 3, 4, 3, 2, 3);  /* even kernel, stride 3 */
    conv_case(2, 7, 7, 3, 7, 1, 0, 3);   /* 1x1 output */
    conv_case(2, 4, 5, 3, 3, 1, 3, 2);   /* pad beyond the kernel: all-padding windows */
    /* Groups: oneDNN's grouped and depthwise kernels; the sgemm path's
     * per-group products where oneDNN refuses the padding (the last two). */
    conv_case_groups(4, 7, 6, 6, 3, 1, 1, 3, 2);
    conv_case_groups(8, 9, 7, 8, 3, 2, 1, 2, 8);  /* depthwise, stride 2 */
    conv_case_groups(6, 5, 5, 9, 1, 1, 0, 2, 3);  /* pointwise groups */
    conv_case_groups(4, 4, 5, 6, 3, 1, 3, 2, 2);
    conv_case_groups(6, 4, 4, 3, 1, 1, 1, 2, 3);
    /* Dilation: taps 2 and 3 cells apart, "same" padding, strided, grouped. */
    conv_case_gd(3, 9, 8, 4, 3, 1, 2, 2, 1, 2);
    conv_case_gd(2, 11, 10, 3, 3, 2, 1, 2, 1, 3);
    conv_case_gd(4, 8, 9, 4, 2, 1, 1, 2, 2, 2);
    conv_case(16, 12, 12, 32, 3, 1, 1, 3);
    dense_case((dt_shape){3, 2, 5}, 7, 3);
    dense_case((dt_shape){1, 1, 1}, 1, 1);
    dense_case((dt_shape){33, 1, 1}, 17, 5);
    dense_case((dt_shape){1, 28, 28}, 64, 4);
    dense_case((dt_shape){4, 16, 16}, 520, 33); /* forward through W . in^T (I >= 1024, B >= 32, O >= 512) */
    pool_case(DT_LAYER_MAXPOOL, 2, 2, 0, (dt_shape){3, 7, 6}, 2);
    pool_case(DT_LAYER_MAXPOOL, 2, 2, 0, (dt_shape){2, 6, 21}, 2); /* rows of 10: the SSE2 loop and its tail */
    pool_case(DT_LAYER_MAXPOOL, 3, 2, 1, (dt_shape){2, 8, 7}, 2);
    pool_case(DT_LAYER_MAXPOOL, 3, 1, 2, (dt_shape){2, 4, 5}, 1);
    pool_case(DT_LAYER_AVGPOOL, 3, 2, 1, (dt_shape){2, 8, 7}, 2);
    pool_case(DT_LAYER_AVGPOOL, 2, 1, 1, (dt_shape){3, 4, 5}, 2);
    pool_case(DT_LAYER_AVGPOOL, 3, 3, 0, (dt_shape){1, 10, 8}, 1);
    maxpool_ties();
    lrn_case(7, 5);
    lrn_case(3, 5); /* window wider than the channels */
    lrn_case(4, 1);
    test_threads();
    test_layouts();
    test_winograd();
    test_config_errors();
    test_names();
    test_init_and_flops();
    return dt_test_finish("test_layers_ref");
}

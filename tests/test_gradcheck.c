/* Finite-difference gradient checks of every layer kind, plus the numbers of
 * batch-norm running statistics / eval mode and dropout masks, and a small
 * conv->relu->maxpool->dense->softmax-xent net chained by hand.
 *
 * Method: a scalar loss L = sum(out * R) with a fixed random R (so dL/dout =
 * R), analytic gradients from backward(dout = R), numeric ones by central
 * differences (L(x + eps) - L(x - eps)) / (2 eps) computed with the loss in
 * double. Forward is in float, so eps is 1e-3..1e-2 and tolerances are
 * stated per check (atol covers float rounding / eps, rtol the O(eps^2)
 * truncation of non-linear layers). */
#include <math.h>
#include <string.h>

#include "dtrain/layer.h"
#include "layers/layer_test_util.h"
#include "testutil.h"

static double loss_of(test_layer *t, const float *R, int train) {
    t->l.ops->forward(&t->l, t->out, t->in, t->batch, train, t->ws);
    double s = 0;
    for (size_t i = 0; i < t->nout; i++) s += (double)t->out[i] * R[i];
    return s;
}

/* Numeric dL/dx[i] by central differences, compared with analytic g. */
static void compare_numeric(test_layer *t, const float *R, int train, float *x, size_t n,
                            const float *g, float eps, double atol, double rtol, const char *name,
                            const char *what) {
    float *num;
    if (!CHECK_OK(dt_alloc_floats(&num, n, "numeric"))) return;
    for (size_t i = 0; i < n; i++) {
        float keep = x[i];
        float hi = keep + eps, lo = keep - eps;
        x[i] = hi;
        double lp = loss_of(t, R, train);
        x[i] = lo;
        double lm = loss_of(t, R, train);
        x[i] = keep;
        num[i] = (float)((lp - lm) / ((double)hi - (double)lo));
    }
    if (!dt_check_allclose(g, num, n, atol, rtol, __FILE__, __LINE__, what))
        fprintf(stderr, "  (%s: analytic vs numeric d/d%s)\n", name, what);
    dt_free(num);
}

/* Checks din, dw and db of t (whose input is already filled). */
static void gradcheck(test_layer *t, int train, float eps, double atol, double rtol,
                      const char *name) {
    dt_layer *l = &t->l;
    dt_rng rng = dt_rng_seed(4242);
    float *R;
    if (!CHECK_OK(dt_alloc_floats(&R, t->nout, "R"))) return;
    tl_fill(R, t->nout, -1.0f, 1.0f, &rng);
    memcpy(t->dout, R, sizeof(float) * t->nout);
    l->ops->forward(l, t->out, t->in, t->batch, train, t->ws);
    l->ops->backward(l, t->din, t->dout, t->in, t->out, t->batch, t->ws);
    /* Later forwards do not touch din/dw/db, so they stay the analytic values. */
    compare_numeric(t, R, train, t->in, t->nin, t->din, eps, atol, rtol, name, "in");
    compare_numeric(t, R, train, l->w, l->nw, l->dw, eps, atol, rtol, name, "w");
    compare_numeric(t, R, train, l->b, l->nb, l->db, eps, atol, rtol, name, "b");
    dt_free(R);
}

static void conv_check_gd(int C, int H, int W, int F, int K, int S, int P, int B, int G, int D) {
    test_layer t;
    dt_layer_spec s = tl_conv(F, K, S, P);
    s.conv.groups = G, s.conv.dilation = D;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){C, H, W}, B, 11))) return;
    /* Linear in every argument: only float rounding, ~1e-5, remains. */
    gradcheck(&t, 1, 1e-2f, 5e-4, 1e-3, G > 1 ? "grouped conv" : D > 1 ? "dilated conv" : "conv");
    tl_free(&t);
}

static void conv_check_groups(int C, int H, int W, int F, int K, int S, int P, int B, int G) {
    conv_check_gd(C, H, W, F, K, S, P, B, G, 1);
}

static void conv_check(int C, int H, int W, int F, int K, int S, int P, int B) {
    conv_check_groups(C, H, W, F, K, S, P, B, 1);
}

/* Pools: the input is a shuffled grid of values 0.03 apart, so no window
 * has a tie within eps and the argmax never moves. */
static void pool_check(dt_layer_kind kind, int size, int stride, int pad, int extra, dt_shape in, int B) {
    test_layer t;
    dt_layer_spec s = tl_spec(kind);
    s.size = size, s.stride = stride, s.pad = pad, s.pad_extra = extra;
    if (!CHECK_OK(tl_create(&t, s, in, B, 12))) return;
    dt_rng rng = dt_rng_seed(13);
    for (size_t i = 0; i < t.nin; i++) t.in[i] = 0.03f * (float)i - 0.015f * (float)t.nin;
    for (size_t i = t.nin - 1; i > 0; i--) {
        size_t j = dt_rng_below(&rng, (uint32_t)(i + 1));
        float tmp = t.in[i];
        t.in[i] = t.in[j], t.in[j] = tmp;
    }
    gradcheck(&t, 1, 3e-3f, 5e-4, 1e-3, kind == DT_LAYER_MAXPOOL ? "maxpool" : "avgpool");
    tl_free(&t);
}

static void dense_check(void) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_DENSE);
    s.dense.outputs = 5;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){2, 3, 2}, 3, 14))) return;
    gradcheck(&t, 1, 1e-2f, 5e-4, 1e-3, "dense");
    tl_free(&t);
}

static void act_check(dt_activation a) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_ACT);
    s.act.fn = a, s.act.slope = 0.1f;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){3, 4, 5}, 2, 15))) return;
    /* Keep inputs 0.05 away from the relu/leaky kink at 0 (eps is 5e-3). */
    for (size_t i = 0; i < t.nin; i++)
        if (fabsf(t.in[i]) < 0.05f) t.in[i] += t.in[i] < 0 ? -0.05f : 0.05f;
    gradcheck(&t, 1, 5e-3f, 5e-4, 2e-3, dt_activation_name(a));
    tl_free(&t);
}

static void dropout_check(void) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_DROPOUT);
    s.dropout.p = 0.4f;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){4, 3, 3}, 3, 16))) return;
    t.l.step = 3; /* same mask in every forward of the check */
    gradcheck(&t, 1, 1e-2f, 5e-4, 1e-3, "dropout");
    tl_free(&t);
}

static void crop_check(int flip, int noadjust) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_CROP);
    s.crop.h = 3, s.crop.w = 4, s.crop.flip = flip, s.crop.noadjust = noadjust;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){2, 5, 7}, 3, 17))) return;
    t.l.step = 4; /* the same windows in every forward of the check */
    gradcheck(&t, 1, 1e-2f, 5e-4, 1e-3, flip ? "crop flip" : "crop");
    tl_free(&t);
}

/* [reorg]: a permutation (or a copy with zeros after it), so exact. */
static void reorg_check(int stride, int reverse, int extra, dt_shape in) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_REORG);
    s.stride = stride, s.reorg.reverse = reverse, s.reorg.extra = extra;
    if (!CHECK_OK(tl_create(&t, s, in, 2, 31))) return;
    gradcheck(&t, 1, 1e-2f, 5e-4, 1e-3, extra ? "reorg extra" : reverse ? "reorg reverse" : "reorg");
    tl_free(&t);
}

/* [reorg] stride=2 by hand from Darknet's reorg_cpu: it reads its (4, 2, 2)
 * input holding 0..15 as one 4x4 map (C / s^2 channels of 2H x 2W) and
 * writes channel o as the cells (2y + o / 2, 2x + o % 2), out (16, 1, 1);
 * reverse=1 on (4, 2, 2) undoes that into (1, 4, 4). extra=2 appends two
 * zeros. */
static void reorg_numbers(void) {
    static const float want[16] = {0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15};
    test_layer f, r, e;
    dt_layer_spec s = tl_spec(DT_LAYER_REORG);
    s.stride = 2;
    if (!CHECK_OK(tl_create(&f, s, (dt_shape){4, 2, 2}, 1, 32))) return;
    s.reorg.reverse = 1;
    if (!CHECK_OK(tl_create(&r, s, (dt_shape){4, 2, 2}, 1, 33))) return;
    s.reorg.reverse = 0, s.reorg.extra = 2;
    if (!CHECK_OK(tl_create(&e, s, (dt_shape){4, 2, 2}, 1, 34))) return;
    CHECK(f.l.out.c == 16 && f.l.out.h == 1 && f.l.out.w == 1);
    CHECK(r.l.out.c == 1 && r.l.out.h == 4 && r.l.out.w == 4);
    CHECK(e.l.out.c == 18 && e.l.out.h == 1 && e.l.out.w == 1);
    float iota[16];
    for (int i = 0; i < 16; i++) iota[i] = (float)i;
    memcpy(f.in, iota, sizeof iota);
    f.l.ops->forward(&f.l, f.out, f.in, 1, 1, f.ws);
    CHECK(memcmp(f.out, want, sizeof want) == 0);
    memcpy(r.in, want, sizeof want);
    r.l.ops->forward(&r.l, r.out, r.in, 1, 1, r.ws);
    CHECK(memcmp(r.out, iota, sizeof iota) == 0);
    memcpy(e.in, iota, sizeof iota);
    e.l.ops->forward(&e.l, e.out, e.in, 1, 1, e.ws);
    CHECK(memcmp(e.out, iota, sizeof iota) == 0 && e.out[16] == 0 && e.out[17] == 0);
    tl_free(&f), tl_free(&r), tl_free(&e);
}

/* [crop] by hand: evaluation is the centre window of 2 x - 1; training
 * windows lie inside the image, differ between images and steps, and with
 * flip=1 some are mirrored. */
static void crop_numbers(void) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_CROP);
    s.crop.h = 4, s.crop.w = 4, s.crop.flip = 1;
    enum { B = 16, H = 9, W = 10 };
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){1, H, W}, B, 5))) return;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < H * W; i++) t.in[b * H * W + i] = (float)(i + 1); /* value = 1 + y W + x */
    t.l.ops->forward(&t.l, t.out, t.in, B, 0, t.ws);
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++) CHECK(t.out[y * 4 + x] == 2 * (float)(1 + (y + 2) * W + (x + 3)) - 1);
    int mirrored = 0, offsets[H * W] = {0};
    for (int step = 0; step < 4; step++) {
        t.l.step = (uint64_t)step;
        t.l.ops->forward(&t.l, t.out, t.in, B, 1, t.ws);
        for (int b = 0; b < B; b++) {
            const float *o = t.out + b * 16;
            int at = (int)((o[0] + 1) / 2) - 1, y0 = at / W, x0 = at % W; /* where the first output reads */
            int flip = o[1] < o[0];
            if (flip) x0 -= 3;
            mirrored += flip;
            CHECK(y0 >= 0 && y0 <= H - 4 && x0 >= 0 && x0 <= W - 4);
            for (int y = 0; y < 4; y++)
                for (int x = 0; x < 4; x++)
                    CHECK(o[y * 4 + x] == 2 * (float)(1 + (y0 + y) * W + x0 + (flip ? 3 - x : x)) - 1);
            offsets[y0 * W + x0]++;
        }
    }
    int distinct = 0;
    for (int i = 0; i < H * W; i++) distinct += offsets[i] > 0;
    CHECK(mirrored > 8 && mirrored < 56 && distinct > 10); /* 64 draws of 42 windows, half mirrored */
    tl_free(&t);
}

/* [crop] shift=0.2 (strided.cfg): in training, the same windows as without
 * it, each (image, channel) moved by one draw in [-0.1, 0.1), the draws
 * differing; evaluation unchanged. */
static void crop_shift_numbers(void) {
    enum { B = 4, C = 3, H = 6, W = 5 };
    test_layer a, b;
    dt_layer_spec s = tl_spec(DT_LAYER_CROP);
    s.crop.h = 3, s.crop.w = 3, s.crop.flip = 1;
    if (!CHECK_OK(tl_create(&a, s, (dt_shape){C, H, W}, B, 6))) return;
    s.crop.shift = 0.2f;
    if (!CHECK_OK(tl_create(&b, s, (dt_shape){C, H, W}, B, 6))) return;
    tl_fill(a.in, a.nin, 0.0f, 1.0f, &(dt_rng){8});
    memcpy(b.in, a.in, sizeof(float) * a.nin);
    for (int train = 0; train < 2; train++) {
        a.l.ops->forward(&a.l, a.out, a.in, B, train, a.ws);
        b.l.ops->forward(&b.l, b.out, b.in, B, train, b.ws);
        double first = b.out[0] - a.out[0], spread = 0;
        for (int bc = 0; bc < B * C; bc++) {
            double d0 = b.out[bc * 9] - a.out[bc * 9];
            CHECK(train ? d0 >= -0.1 && d0 < 0.1 : d0 == 0);
            for (int i = 1; i < 9; i++) CHECK_CLOSE(b.out[bc * 9 + i] - a.out[bc * 9 + i], d0, 1e-6, 0);
            spread = fmax(spread, fabs(d0 - first));
        }
        CHECK(train ? spread > 0.01 : spread == 0);
    }
    tl_free(&a), tl_free(&b);
}

static void lrn_check(int C, int size) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_LRN);
    /* A large alpha makes the cross-channel term as big as the direct one. */
    s.lrn.size = size, s.lrn.alpha = 1.0f, s.lrn.beta = 0.75f, s.lrn.k = 2.0f;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){C, 3, 4}, 2, 17))) return;
    tl_fill(t.in, t.nin, -2.0f, 2.0f, &(dt_rng){5});
    gradcheck(&t, 1, 1e-2f, 1e-3, 5e-3, "lrn");
    tl_free(&t);
}

static void batchnorm_check(dt_shape in, int B) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_BATCHNORM);
    s.bn.momentum = 0.1f, s.bn.eps = 1e-5f;
    if (!CHECK_OK(tl_create(&t, s, in, B, 18))) return;
    dt_rng rng = dt_rng_seed(19);
    tl_fill(t.l.w, t.l.nw, 0.5f, 1.5f, &rng); /* gamma != 1 so dx depends on it */
    tl_fill(t.l.b, t.l.nb, -0.5f, 0.5f, &rng);
    gradcheck(&t, 1, 1e-2f, 2e-3, 1e-2, in.h == 1 ? "batchnorm (C,1,1)" : "batchnorm (C,H,W)");
    tl_free(&t);
}

/* Summed xent of softmax(t->in) against labels; probs left in t->out. */
static double xent_of(test_layer *t, const dt_label *labels, float *dlogits) {
    t->l.ops->forward(&t->l, t->out, t->in, t->batch, 1, t->ws);
    return dt_softmax_xent_loss(dlogits, t->in, t->out, labels, t->batch,
                                (int)dt_shape_size(t->l.out), dt_softmax_temperature(&t->l.spec));
}

/* With Darknet's temperature T (1: none): p = softmax(z / T). */
static void softmax_xent_check(float T) {
    enum { B = 3, C = 7 };
    const dt_label labels[B] = {2, 0, 6};
    test_layer t;
    dt_layer_spec spec = tl_spec(DT_LAYER_SOFTMAX);
    spec.softmax.temp = T;
    if (!CHECK_OK(tl_create(&t, spec, (dt_shape){C, 1, 1}, B, 20))) return;
    tl_fill(t.in, t.nin, -3.0f, 3.0f, &(dt_rng){21});
    float dlogits[B * C], scratch[B * C], num[B * C];
    double loss = xent_of(&t, labels, dlogits);
    double expect = 0;
    for (int b = 0; b < B; b++) {
        double z = 0, sum_p = 0;
        for (int c = 0; c < C; c++) z += exp(t.in[b * C + c] / T);
        for (int c = 0; c < C; c++) sum_p += t.out[b * C + c];
        CHECK_CLOSE(sum_p, 1.0, 1e-6, 0);
        CHECK_CLOSE(t.out[b * C + labels[b]], exp(t.in[b * C + labels[b]] / T) / z, 1e-7, 1e-6);
        expect += log(z) - t.in[b * C + labels[b]] / T;
    }
    CHECK_CLOSE(loss, expect, 1e-6, 1e-6);
    /* d(mean loss)/dlogits numerically vs dlogits = (p - onehot) / (T B). */
    const float eps = 1e-2f;
    for (int i = 0; i < B * C; i++) {
        float keep = t.in[i];
        t.in[i] = keep + eps;
        double lp = xent_of(&t, labels, scratch);
        t.in[i] = keep - eps;
        double lm = xent_of(&t, labels, scratch);
        t.in[i] = keep;
        num[i] = (float)((lp - lm) / (2.0 * eps) / B);
    }
    CHECK_ALLCLOSE(dlogits, num, (size_t)(B * C), 2e-4, 2e-3);
    /* The layer's backward passes the logit gradient through. */
    t.l.ops->backward(&t.l, t.din, dlogits, t.in, t.out, B, t.ws);
    CHECK(memcmp(t.din, dlogits, sizeof dlogits) == 0);
    tl_free(&t);

    /* Any input shape is flattened: (2, 2, 2) is 8 classes per sample. */
    if (!CHECK_OK(tl_create(&t, tl_spec(DT_LAYER_SOFTMAX), (dt_shape){2, 2, 2}, 2, 22))) return;
    t.l.ops->forward(&t.l, t.out, t.in, 2, 0, t.ws);
    double s0 = 0, s1 = 0;
    for (int i = 0; i < 8; i++) s0 += t.out[i], s1 += t.out[8 + i];
    CHECK_CLOSE(s0, 1.0, 1e-6, 0);
    CHECK_CLOSE(s1, 1.0, 1e-6, 0);
    tl_free(&t);
}

/* BatchNorm2d with C=2, B=2, (1, 2) pixels, momentum 0.1, eps 1e-5:
 *   channel 0 values 1 2 | 3 6: mean 3, biased var 3.5, unbiased 14/3
 *   channel 1 values -1 -1 | 1 1: mean 0, biased var 1, unbiased 4/3
 * running mean 0.1*mean, running var 0.9 + 0.1*unbiased. */
static void batchnorm_numbers(void) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_BATCHNORM);
    s.bn.momentum = 0.1f, s.bn.eps = 1e-5f;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){2, 1, 2}, 2, 23))) return;
    CHECK(t.l.nw == 2 && t.l.nb == 2 && t.l.nstate == 4);
    CHECK(t.l.w[0] == 1 && t.l.w[1] == 1 && t.l.b[0] == 0 && t.l.b[1] == 0);
    CHECK(t.l.state[0] == 0 && t.l.state[1] == 0 && t.l.state[2] == 1 && t.l.state[3] == 1);
    const float x[8] = {1, 2, -1, -1, 3, 6, 1, 1}; /* (B, C, 1, 2) */
    memcpy(t.in, x, sizeof x);
    t.l.ops->forward(&t.l, t.out, t.in, 2, 1, t.ws);
    double sd0 = sqrt(3.5 + 1e-5), sd1 = sqrt(1.0 + 1e-5);
    const float want[8] = {(float)(-2 / sd0), (float)(-1 / sd0), (float)(-1 / sd1),
                           (float)(-1 / sd1), (float)(0 / sd0),  (float)(3 / sd0),
                           (float)(1 / sd1),  (float)(1 / sd1)};
    CHECK_ALLCLOSE(t.out, want, 8, 1e-6, 1e-5);
    CHECK_CLOSE(t.l.state[0], 0.3, 1e-7, 1e-6);
    CHECK_CLOSE(t.l.state[1], 0.0, 1e-7, 1e-6);
    CHECK_CLOSE(t.l.state[2], 0.9 + 0.1 * 14.0 / 3.0, 1e-7, 1e-6);
    CHECK_CLOSE(t.l.state[3], 0.9 + 0.1 * 4.0 / 3.0, 1e-7, 1e-6);
    /* A second training step moves the running stats again from there. */
    t.l.ops->forward(&t.l, t.out, t.in, 2, 1, t.ws);
    CHECK_CLOSE(t.l.state[0], 0.9 * 0.3 + 0.1 * 3, 1e-7, 1e-6);
    CHECK_CLOSE(t.l.state[2], 0.9 * (0.9 + 0.1 * 14.0 / 3.0) + 0.1 * 14.0 / 3.0, 1e-7, 1e-6);
    /* Eval: gamma (2, -1), beta (0.5, 0.25) on the running statistics. */
    t.l.w[0] = 2, t.l.w[1] = -1, t.l.b[0] = 0.5f, t.l.b[1] = 0.25f;
    t.l.ops->forward(&t.l, t.out, t.in, 2, 0, t.ws);
    float ev[8];
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < 2; c++)
            for (int i = 0; i < 2; i++) {
                int k = (b * 2 + c) * 2 + i;
                ev[k] = (float)(t.l.w[c] * (x[k] - t.l.state[c]) / sqrt(t.l.state[2 + c] + 1e-5) +
                                t.l.b[c]);
            }
    CHECK_ALLCLOSE(t.out, ev, 8, 1e-6, 1e-5);
    CHECK_CLOSE(t.out[0], 2 * (1 - 0.57) / sqrt(0.9 * (0.9 + 1.4 / 3.0) + 1.4 / 3.0 + 1e-5) + 0.5,
                1e-5, 1e-5);
    tl_free(&t);
}

static void dropout_numbers(void) {
    test_layer t;
    dt_layer_spec s = tl_spec(DT_LAYER_DROPOUT);
    s.dropout.p = 0.3f;
    if (!CHECK_OK(tl_create(&t, s, (dt_shape){1000, 10, 10}, 1, 24))) return;
    for (size_t i = 0; i < t.nin; i++) t.in[i] += 2.0f; /* no zeros in the input */
    float scale = 1.0f / 0.7f;
    t.l.step = 5;
    t.l.ops->forward(&t.l, t.out, t.in, 1, 1, t.ws);
    size_t kept = 0, exact = 0;
    for (size_t i = 0; i < t.nin; i++) {
        kept += t.out[i] != 0;
        exact += t.out[i] == 0 || t.out[i] == t.in[i] * scale;
    }
    /* 1e5 Bernoulli(0.7): standard deviation of the fraction ~0.0015. */
    CHECK_CLOSE((double)kept / (double)t.nin, 0.7, 0.008, 0);
    CHECK(exact == t.nin);
    /* Same (seed, step): same mask; another step: another mask. */
    float *first;
    if (!CHECK_OK(dt_alloc_floats(&first, t.nout, "first"))) return;
    memcpy(first, t.out, sizeof(float) * t.nout);
    t.l.ops->forward(&t.l, t.out, t.in, 1, 1, t.ws);
    CHECK(memcmp(first, t.out, sizeof(float) * t.nout) == 0);
    t.l.step = 6;
    t.l.ops->forward(&t.l, t.out, t.in, 1, 1, t.ws);
    size_t differ = 0;
    for (size_t i = 0; i < t.nout; i++) differ += (first[i] == 0) != (t.out[i] == 0);
    CHECK(differ > t.nout / 10); /* 2 p (1-p) = 42% expected */
    /* Eval is the identity. */
    t.l.ops->forward(&t.l, t.out, t.in, 1, 0, t.ws);
    CHECK(memcmp(t.out, t.in, sizeof(float) * t.nout) == 0);
    dt_free(first);
    tl_free(&t);
}

/* conv -> relu -> maxpool -> dense -> softmax, mean xent; numeric gradient
 * of the first conv's weights and bias through the whole chain. */
enum { NET_LAYERS = 5, NET_B = 2 };

static double net_loss(test_layer *ls, const dt_label *labels, float *dlogits) {
    for (int i = 0; i < NET_LAYERS; i++) {
        if (i > 0) memcpy(ls[i].in, ls[i - 1].out, sizeof(float) * ls[i].nin);
        ls[i].l.ops->forward(&ls[i].l, ls[i].out, ls[i].in, NET_B, 1, ls[i].ws);
    }
    const test_layer *sm = &ls[NET_LAYERS - 1];
    return dt_softmax_xent_loss(dlogits, sm->in, sm->out, labels, NET_B,
                                (int)dt_shape_size(sm->l.out), 1.0f) / NET_B;
}

static void net_check(void) {
    test_layer ls[NET_LAYERS];
    dt_layer_spec specs[NET_LAYERS] = {tl_conv(3, 3, 1, 1), tl_spec(DT_LAYER_ACT),
                                       tl_spec(DT_LAYER_MAXPOOL), tl_spec(DT_LAYER_DENSE),
                                       tl_spec(DT_LAYER_SOFTMAX)};
    specs[1].act.fn = DT_ACT_RELU;
    specs[2].size = 2, specs[2].stride = 2;
    specs[3].dense.outputs = 4;
    dt_shape in = {2, 6, 6};
    for (int i = 0; i < NET_LAYERS; i++) {
        if (!CHECK_OK(tl_create(&ls[i], specs[i], in, NET_B, 30 + (uint64_t)i))) return;
        in = ls[i].l.out;
    }
    const dt_label labels[NET_B] = {1, 3};
    float dlogits[NET_B * 4];
    net_loss(ls, labels, dlogits);
    /* Backward by hand: the softmax layer's gradient is dlogits itself. */
    memcpy(ls[3].dout, dlogits, sizeof dlogits);
    for (int i = 3; i >= 0; i--) {
        dt_layer *l = &ls[i].l;
        l->ops->backward(l, i == 0 ? NULL : ls[i].din, ls[i].dout, ls[i].in, ls[i].out, NET_B,
                         ls[i].ws);
        if (i > 0) memcpy(ls[i - 1].dout, ls[i].din, sizeof(float) * ls[i].nin);
    }
    dt_layer *conv = &ls[0].l;
    size_t np = conv->nw + conv->nb;
    float num[64], scratch[NET_B * 4];
    const float eps = 1e-3f;
    for (size_t i = 0; i < np; i++) {
        float keep = conv->w[i]; /* w then b: one block */
        conv->w[i] = keep + eps;
        double lp = net_loss(ls, labels, scratch);
        conv->w[i] = keep - eps;
        double lm = net_loss(ls, labels, scratch);
        conv->w[i] = keep;
        num[i] = (float)((lp - lm) / (2.0 * eps));
    }
    CHECK(np == 3 * 2 * 9 + 3);
    CHECK_ALLCLOSE(conv->dw, num, np, 3e-4, 1e-2);
    for (int i = 0; i < NET_LAYERS; i++) tl_free(&ls[i]);
}

int main(void) {
    conv_check(3, 7, 9, 5, 3, 2, 1, 2); /* stride 2, pad 1, odd channels, non-square */
    conv_check(2, 6, 5, 3, 3, 1, 1, 2);
    conv_check(4, 5, 6, 3, 1, 1, 0, 2); /* 1x1 fast path */
    conv_check(2, 8, 7, 4, 4, 3, 2, 1); /* even kernel, stride 3 */
    conv_check_groups(4, 6, 5, 6, 3, 1, 1, 2, 2);
    conv_check_groups(3, 7, 6, 3, 3, 2, 1, 2, 3); /* depthwise */
    conv_check_gd(2, 9, 8, 3, 3, 1, 2, 2, 1, 2);   /* dilated */
    pool_check(DT_LAYER_MAXPOOL, 2, 2, 0, 0, (dt_shape){3, 6, 7}, 2);
    pool_check(DT_LAYER_MAXPOOL, 3, 2, 1, 0, (dt_shape){2, 7, 7}, 2);
    pool_check(DT_LAYER_MAXPOOL, 3, 1, 2, 0, (dt_shape){2, 4, 5}, 1);
    /* Darknet's defaults: 2x2/2 with padding 1 (after) on odd sides (7 -> 4,
     * the last window half padding; the 2x2 fast path must not run), and
     * 3x3/1 with padding 2 (1 before, 1 after). */
    pool_check(DT_LAYER_MAXPOOL, 2, 2, 0, 1, (dt_shape){2, 7, 5}, 2);
    pool_check(DT_LAYER_MAXPOOL, 3, 1, 1, 0, (dt_shape){2, 5, 4}, 1);
    pool_check(DT_LAYER_AVGPOOL, 3, 2, 1, 0, (dt_shape){2, 7, 6}, 2);
    pool_check(DT_LAYER_AVGPOOL, 2, 1, 1, 0, (dt_shape){3, 4, 5}, 2);
    dense_check();
    for (int a = DT_ACT_LINEAR; a < DT_ACT_COUNT; a++) act_check((dt_activation)a);
    dropout_check();
    crop_check(0, 0);
    crop_check(1, 1);
    reorg_check(2, 0, 0, (dt_shape){8, 4, 6});
    reorg_check(2, 1, 0, (dt_shape){8, 3, 2});
    reorg_check(3, 0, 0, (dt_shape){9, 3, 3});
    reorg_check(1, 0, 3, (dt_shape){2, 3, 3}); /* go.cfg's extra=1, stride=1 */
    lrn_check(7, 5);
    lrn_check(4, 3);
    batchnorm_check((dt_shape){4, 3, 3}, 3);
    batchnorm_check((dt_shape){5, 1, 1}, 6);
    softmax_xent_check(1.0f);
    softmax_xent_check(3.0f); /* Darknet's cifar.test.cfg */
    batchnorm_numbers();
    dropout_numbers();
    crop_numbers();
    crop_shift_numbers();
    reorg_numbers();
    net_check();
    return dt_test_finish("test_gradcheck");
}

/* bf16 convolutions and connected layers (oneDNN) against fp32, on odd
 * shapes: forward, input gradient and weight/bias gradients.
 *
 * Tolerance, per element: bf16 keeps 8 significant bits, so rounding an
 * operand to nearest costs a relative error of at most u = 2^-8. A product
 * of two rounded operands is off by at most (2u + u^2)|a||b|; the K-term
 * sum is accumulated in f32 (error about K * 2^-24 relative: 0.03u at the
 * K <= 425 here); a bf16 result (forward output, input gradient) is rounded
 * once more, u|y| <= u S. So |y_bf16 - y_fp32| <= 3u S + tiny, where S is
 * the sum of |a||b| over the dot product's terms: the same layer run in
 * fp32 on the absolute values of its operands (errors partly cancel, so
 * the measured worst is near 1.5u). The check also requires each of the
 * output, input gradient and weight gradient to differ somewhere from fp32
 * (bf16 really ran in every pass) and that a tiny learning rate still moves
 * fp32  * master weights. Skipped (77) on a CPU without bf16. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtrain/layer.h"
#include "dtrain/net.h"
#include "dtrain/optim.h"
#include "layers/layer_test_util.h"
#include "testutil.h"

static const double U = 1.0 / 256; /* 2^-8, bf16's unit roundoff */

static void abs_all(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = fabsf(x[i]);
}

/* Worst |a - b| / (S + 1e-30) over n elements, and whether any differ. */
static double worst_ratio(const float *a, const float *b, const float *s, size_t n, int *differs) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > 0) *differs = 1;
        double r = e / ((double)s[i] + 1e-30);
        if (r > worst) worst = r;
    }
    return worst;
}

typedef struct {
    float *out, *din, *dw; /* (B, out), (B, in), (nw + nb) */
} pass_result;

/* Forward and backward of t in its precision into r (allocated here). */
static void run_pass(test_layer *t, pass_result *r) {
    size_t np = t->l.nw + t->l.nb;
    CHECK_OK(dt_alloc_floats(&r->out, t->nout, "t"));
    CHECK_OK(dt_alloc_floats(&r->din, t->nin, "t"));
    CHECK_OK(dt_alloc_floats(&r->dw, np, "t"));
    t->l.ops->forward(&t->l, t->out, t->in, t->batch, 1, t->ws);
    t->l.ops->backward(&t->l, t->din, t->dout, t->in, t->out, t->batch, t->ws);
    memcpy(r->out, t->out, sizeof(float) * t->nout);
    memcpy(r->din, t->din, sizeof(float) * t->nin);
    memcpy(r->dw, t->l.dw, sizeof(float) * np);
}

static void free_result(pass_result *r) { dt_free(r->out), dt_free(r->din), dt_free(r->dw); }

static void check_layer(dt_layer_spec spec, dt_shape in, int batch, const char *name) {
    test_layer t, a;
    CHECK_OK(tl_create(&t, spec, in, batch, 5));
    CHECK_OK(tl_create(&a, spec, in, batch, 5));
    dt_rng rng = dt_rng_seed(17);
    tl_fill(t.dout, t.nout, -1.0f, 1.0f, &rng);
    size_t np = t.l.nw + t.l.nb;
    /* The bound's sums: the fp32 layer on |in|, |w|, |b|, |dout|. */
    memcpy(a.in, t.in, sizeof(float) * t.nin);
    memcpy(a.dout, t.dout, sizeof(float) * t.nout);
    abs_all(a.in, a.nin), abs_all(a.dout, a.nout), abs_all(a.l.w, np);
    pass_result f32, s, b16;
    run_pass(&t, &f32);
    run_pass(&a, &s);
    t.l.precision = DT_PRECISION_BF16;
    run_pass(&t, &b16);
    int d_out = 0, d_din = 0, d_dw = 0;
    double r_out = worst_ratio(b16.out, f32.out, s.out, t.nout, &d_out);
    double r_din = worst_ratio(b16.din, f32.din, s.din, t.nin, &d_din);
    double r_dw = worst_ratio(b16.dw, f32.dw, s.dw, np, &d_dw);
    printf("%-28s error / (u S): out %.2f, din %.2f, dw/db %.2f (bound 3)\n", name, r_out / U,
           r_din / U, r_dw / U);
    CHECK(d_out && d_din && d_dw);
    CHECK(r_out <= 3 * U + 1e-6);
    CHECK(r_din <= 3 * U + 1e-6);
    CHECK(r_dw <= 3 * U + 1e-6);

    /* A backward not right after its forward re-casts its inputs itself:
     * the same bits as the one that reused the forward's copies. */
    t.l.ops->backward(&t.l, t.din, t.dout, t.in, t.out, t.batch, t.ws);
    CHECK(memcmp(t.din, b16.din, sizeof(float) * t.nin) == 0);
    CHECK(memcmp(t.l.dw, b16.dw, sizeof(float) * np) == 0);
    /* New weights are cast again by the next forward. */
    for (size_t i = 0; i < t.l.nw; i++) t.l.w[i] *= -1.0f;
    t.l.ops->forward(&t.l, t.out, t.in, t.batch, 1, t.ws);
    int moved = 0;
    for (size_t i = 0; i < t.nout; i++) moved |= t.out[i] != b16.out[i];
    CHECK(moved);
    /* Without dw (SFB rebuilds it from factors) a connected layer's backward
     * takes din from bf16 and db in fp32. */
    if (spec.kind == DT_LAYER_DENSE) {
        for (size_t i = 0; i < t.l.nw; i++) t.l.w[i] *= -1.0f;
        float *dw = t.l.dw;
        t.l.dw = NULL;
        for (size_t i = 0; i < np; i++) dw[i] = 7.0f;
        t.l.ops->forward(&t.l, t.out, t.in, t.batch, 1, t.ws);
        t.l.ops->backward(&t.l, t.din, t.dout, t.in, t.out, t.batch, t.ws);
        int kept = 1;
        for (size_t i = 0; i < t.l.nw; i++) kept &= dw[i] == 7.0f;
        CHECK(kept);
        CHECK(memcmp(t.din, b16.din, sizeof(float) * t.nin) == 0);
        if (t.l.nb) CHECK_ALLCLOSE(t.l.db, f32.dw + t.l.nw, t.l.nb, 1e-5, 1e-5);
        t.l.dw = dw;
        for (size_t i = 0; i < t.l.nw; i++) t.l.w[i] *= -1.0f;
    }
    /* Back to fp32: the same bits as the first fp32 pass. */
    for (size_t i = 0; i < t.l.nw; i++) t.l.w[i] *= -1.0f;
    t.l.precision = DT_PRECISION_FP32;
    t.l.ops->forward(&t.l, t.out, t.in, t.batch, 1, t.ws);
    CHECK(memcmp(t.out, f32.out, sizeof(float) * t.nout) == 0);
    free_result(&f32), free_result(&s), free_result(&b16);
    tl_free(&t), tl_free(&a);
}

static dt_layer_spec dense(int outputs, int no_bias) {
    dt_layer_spec s = tl_spec(DT_LAYER_DENSE);
    s.dense.outputs = outputs;
    s.no_bias = no_bias;
    return s;
}

/* x rounded to bf16 (nearest, ties to even), as a float. */
static float to_bf16(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* A tiny rate moves the fp32 master weights by -lr * grad, which bf16
 * (8 bits) would round away: |lr * g| is far below half a bf16 ulp of w. */
static void check_master_weights(void) {
    static const char cfg[] = "[net]\nbatch=4\nchannels=1\nheight=8\nwidth=8\nmomentum=0\ndecay=0\n"
                              "precision=bf16\n[convolutional]\nfilters=4\nsize=3\npad=1\n"
                              "activation=relu\n[connected]\noutput=3\nactivation=linear\n[softmax]\n";
    dt_model_spec spec;
    CHECK_OK(dt_model_parse_string(&spec, cfg, "tiny.cfg"));
    CHECK(spec.precision == DT_PRECISION_BF16);
    dt_net *net;
    CHECK_OK(dt_net_create(&net, &spec, 4, 3));
    /* The 1-channel convolution stays fp32 (dt_layer_precision), the
     * connected layer runs bf16. */
    CHECK(net->precision == DT_PRECISION_BF16);
    CHECK(net->layers[0].precision == DT_PRECISION_FP32);
    CHECK(net->layers[2].precision == DT_PRECISION_BF16);
    float x[4 * 64], *before;
    dt_label y[4] = {0, 1, 2, 1};
    dt_rng rng = dt_rng_seed(3);
    tl_fill(x, 4 * 64, 0.0f, 1.0f, &rng);
    CHECK_OK(dt_alloc_floats(&before, net->nparams, "t"));
    memcpy(before, net->params, sizeof(float) * net->nparams);
    dt_optim *opt;
    float *state;
    CHECK_OK(dt_optim_create_for_net(&opt, &state, &spec.optim, net));
    dt_net_forward(net, x, 4, 1);
    dt_net_loss(net, y, 4);
    dt_net_backward(net, x, 4, NULL, NULL);
    const float lr = 1e-6f;
    dt_optim_update_net(opt, lr, 1, net, state, 0, net->nparams);
    size_t moved = 0, exact = 0, nonzero = 0, bf16_moved = 0;
    for (size_t i = 0; i < net->nparams; i++) {
        if (net->grads[i] == 0) continue;
        nonzero++;
        moved += net->params[i] != before[i];
        exact += net->params[i] == before[i] - lr * net->grads[i];
        bf16_moved += to_bf16(to_bf16(before[i]) - lr * net->grads[i]) != to_bf16(before[i]);
    }
    printf("lr %g: of %zu weights with a gradient, %zu moved, %zu by exactly -lr * grad in fp32 "
           "(bf16 master weights: %zu would move)\n", lr, nonzero, moved, exact, bf16_moved);
    CHECK(nonzero > 0 && exact == nonzero && moved * 5 >= nonzero * 4);
    CHECK(bf16_moved * 10 < nonzero);
    dt_free(before);
    dt_optim_free(opt);
    dt_free(state);
    dt_net_free(net);
}

int main(void) {
    if (dt_precision_check(DT_PRECISION_BF16) != DT_OK) {
        printf("test_bf16: skipped: %s\n", dt_last_error());
        return 77;
    }
    dt_layer_spec c = tl_conv(5, 3, 2, 1);
    check_layer(c, (dt_shape){3, 11, 9}, 3, "conv 3x11x9 k3 s2 p1 -> 5");
    c = tl_conv(7, 5, 1, 2);
    check_layer(c, (dt_shape){17, 7, 6}, 2, "conv 17x7x6 k5 s1 p2 -> 7");
    c = tl_conv(6, 1, 1, 0);
    c.no_bias = 1;
    check_layer(c, (dt_shape){13, 5, 5}, 3, "conv 1x1 no bias 13x5x5 -> 6");
    check_layer(dense(19, 0), (dt_shape){37, 1, 1}, 5, "connected 37 -> 19");
    check_layer(dense(11, 1), (dt_shape){3, 7, 9}, 4, "connected 3x7x9 no bias -> 11");
    check_master_weights();
    return dt_test_finish("test_bf16");
}

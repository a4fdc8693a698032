/* bf16 activations between layers (dt_net_set_precision's plan): where a
 * bf16 net keeps them, and that its loss, gradients and batch-norm
 * statistics match fp32 within bf16's tolerance.
 *
 * The net, a small ResNet: stem conv -> BN -> ReLU, whose output fans out
 * (to a conv and a shortcut: the net adds its two gradients in bf16), conv
 * -> BN -> ReLU -> conv -> BN, an identity shortcut with its ReLU, a
 * strided conv block and an "option A" shortcut (stride 2, zero channels),
 * global pool, connected, softmax. Every activation from the stem conv's
 * output to the pool's input is bf16; the input, the pool's output and the
 * logits are fp32.
 *
 * A second net puts the other kinds that pass bf16 on between those: the
 * stem's max pool (3x3/2, Darknet's padding=3: one padded cell before, two
 * after) and a [route] concatenating its output with a later convolution's
 * (every activation from the stem conv's output to the pool's input is
 * bf16 there too). A bf16 max pool picks each window's maximum among
 * the rounded values, so where two inputs lie within a bf16 ulp it can
 * route a gradient to another cell than fp32 does, a difference the edges
 * net (fp32 activations) does not have: with a 2-channel (fp32) stem its
 * weight gradient was 17.9 u from fp32's, the edges net's 8.0 u; that
 * net's bound gets 12 u of slack instead of 2 u (still under 40 u).
 *
 * Tolerance: bf16 products already round their operands and results (the
 * "edges" net below: the same bf16 net with every activation fp32, as
 * before activations were kept bf16; at this random init its gradients
 * are 1-33 u from fp32's, u = 2^-8, the error of a chain of bf16
 * convolutions with batch norms). Keeping activations bf16 rounds the
 * batch norms' and shortcuts' outputs and gradients too, errors of the
 * same size that partly cancel: per layer with parameters, |g_bf16 -
 * g_fp32| / |g_fp32| (2-norms) must stay under 1.25 times the edges net's
 * error plus 2 u (the max-pool net: 12 u, above), and under 40 u; the
 * loss, evaluation probabilities and running statistics within a few u. Skipped (77) on a CPU without bf16. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtrain/layer.h"
#include "dtrain/net.h"
#include "layers/layer_test_util.h"
#include "testutil.h"

static const double U = 1.0 / 256;

static const char cfg[] = /* %d: input channels */
    "[net]\nbatch=8\nchannels=%d\nheight=10\nwidth=10\nprecision=bf16\n"
    "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\nactivation=relu\n"
    "[convolutional]\nbatch_normalize=1\nfilters=32\nsize=3\npad=1\nactivation=relu\n"
    "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\nactivation=linear\n"
    "[shortcut]\nfrom=-3\nactivation=relu\n"
    "[convolutional]\nbatch_normalize=1\nfilters=32\nsize=3\nstride=2\npad=1\nactivation=relu\n"
    "[convolutional]\nbatch_normalize=1\nfilters=32\nsize=3\npad=1\nactivation=linear\n"
    "[shortcut]\nfrom=-3\nactivation=relu\n"
    "[avgpool]\n[connected]\noutput=10\nactivation=linear\n[softmax]\n";

/* Layers: 0-2 conv BN ReLU, 3 maxpool, 4 route, 5-7 conv BN ReLU, 8 route
 * (the pool's 16 and the conv's 32 channels), 9-10 conv BN, 11 avgpool. */
static const char pool_cfg[] = /* %d: input channels */
    "[net]\nbatch=8\nchannels=%d\nheight=10\nwidth=10\nprecision=bf16\n"
    "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\nactivation=relu\n"
    "[maxpool]\nsize=3\nstride=2\npadding=3\n[route]\nlayers=-1\n"
    "[convolutional]\nbatch_normalize=1\nfilters=32\nsize=3\npad=1\nactivation=relu\n"
    "[route]\nlayers=-1,-3\n"
    "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\nactivation=linear\n"
    "[avgpool]\n[connected]\noutput=10\nactivation=linear\n[softmax]\n";

/* A net of the test: its text, layer count, the last layer whose output is
 * bf16 (the next is the global pool), a batch norm on bf16 data, and the
 * slack of its gradients' bound in u (see the tolerance above). */
typedef struct {
    const char *cfg;
    int nlayers, last_b16, bn;
    double slack;
} net_case;

enum { B = 8 };

/* |a - b| / |ref| (2-norms over n). */
static double err_of(const float *a, const float *b, const float *ref, size_t n) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        e += d * d;
        s += (double)ref[i] * ref[i];
    }
    return sqrt(e) / (sqrt(s) + 1e-30);
}

static double rel_err(const float *a, const float *b, size_t n) { return err_of(a, b, b, n); }

static dt_net *make(const dt_model_spec *spec) {
    dt_net *net;
    CHECK_OK(dt_net_create(&net, spec, B, 11));
    return net;
}

static double step(dt_net *net, const float *x, const dt_label *y) {
    dt_net_forward(net, x, B, 1);
    double loss = dt_net_loss(net, y, B);
    dt_net_backward(net, x, B, NULL, NULL);
    return loss;
}

/* The net on `channels` input channels: 16 or 3 (RGB), every convolution
 * bf16; 2, the stem convolution fp32 (dt_layer_precision), writing bf16
 * through a reorder. */
static void check_net(const net_case *nc, int channels) {
    printf("-- %d input channels, %d layers\n", channels, nc->nlayers);
    char text[2048];
    snprintf(text, sizeof text, nc->cfg, channels);
    dt_model_spec spec;
    CHECK_OK(dt_model_parse_string(&spec, text, "acts.cfg"));
    dt_net *b16 = make(&spec), *f32 = make(&spec), *edges = make(&spec);
    CHECK_OK(dt_net_set_precision(f32, DT_PRECISION_FP32));
    /* Where the bf16 net keeps bf16: the outputs of layers 0-last_b16
     * (convs, BNs, folded ReLUs, shortcuts, max pools, routes), so the
     * inputs of 1 to the global pool's. */
    int L = nc->nlayers, last = nc->last_b16;
    CHECK(b16->nlayers == L && L <= 20);
    CHECK(b16->layers[last + 1].spec.kind == DT_LAYER_AVGPOOL);
    int out_b16[20], in_b16[20];
    for (int i = 0; i < L; i++) out_b16[i] = i <= last, in_b16[i] = i >= 1 && i <= last + 1;
    for (int i = 0; i < b16->nlayers; i++) {
        const dt_layer *l = &b16->layers[i];
        if (l->out_bf16 != out_b16[i] || l->in_bf16 != in_b16[i])
            printf("layer %d (%s): in_bf16 %d out_bf16 %d, expected %d %d\n", i, l->ops->name, l->in_bf16,
                   l->out_bf16, in_b16[i], out_b16[i]);
        CHECK(l->out_bf16 == out_b16[i] && l->in_bf16 == in_b16[i]);
        CHECK(!f32->layers[i].in_bf16 && !f32->layers[i].out_bf16);
        /* The edges net: bf16 products, every activation fp32 (as before
         * activations were kept bf16; set before its first pass). */
        edges->layers[i].in_bf16 = edges->layers[i].out_bf16 = 0;
    }
    CHECK((b16->layers[0].precision == DT_PRECISION_BF16) == (channels >= 3));
    float x[B * 16 * 10 * 10];
    dt_label y[B] = {0, 1, 2, 3, 4, 5, 6, 7};
    dt_rng rng = dt_rng_seed(5);
    tl_fill(x, (size_t)(B * channels * 10 * 10), -1.0f, 1.0f, &rng);
    double lf = step(f32, x, y), lb = step(b16, x, y), le = step(edges, x, y);
    printf("loss: fp32 %.6f, bf16 %.6f (edges only %.6f)\n", lf, lb, le);
    CHECK(fabs(lb - lf) <= 8 * U * fabs(lf));
    double worst = 0;
    for (int i = 0; i < b16->nlayers; i++) {
        const dt_layer *l = &b16->layers[i];
        size_t off = b16->param_offset[i], n = l->nw + l->nb;
        if (n == 0) continue;
        double eb = rel_err(b16->grads + off, f32->grads + off, n);
        double ee = rel_err(edges->grads + off, f32->grads + off, n);
        double be = err_of(b16->grads + off, edges->grads + off, f32->grads + off, n);
        printf("layer %2d %-13s grad error / u: bf16 %.3f, edges only %.3f, bf16 against edges %.3f\n", i,
               l->ops->name, eb / U, ee / U, be / U);
        CHECK(eb <= 1.25 * ee + nc->slack * U && eb <= 40 * U);
        if (eb / U > worst) worst = eb / U;
    }
    /* The batch norm that ran on bf16 data: its running statistics. */
    const dt_layer *bn = &b16->layers[nc->bn];
    size_t so = (size_t)(bn->state - b16->state);
    double es = rel_err(bn->state, f32->state + so, bn->nstate);
    printf("bf16 batch norm's running statistics: error / u %.2f\n", es / U);
    CHECK(es <= 2 * U);
    /* Evaluation (running statistics) agrees too. */
    const float *pb = dt_net_forward(b16, x, B, 0);
    float probs[B * 10];
    memcpy(probs, pb, sizeof probs);
    const float *pf = dt_net_forward(f32, x, B, 0);
    double ep = rel_err(probs, pf, B * 10);
    printf("evaluation probabilities: error / u %.2f; worst gradient %.2f\n", ep / U, worst);
    CHECK(ep <= 8 * U);

    /* Switched to fp32, a bf16 net keeps no bf16 and computes fp32's bits. */
    dt_net *sw = make(&spec), *ref = make(&spec);
    CHECK_OK(dt_net_set_precision(ref, DT_PRECISION_FP32));
    step(sw, x, y); /* its bf16 plans exist */
    memcpy(sw->state, ref->state, sizeof(float) * ref->nstate);
    CHECK_OK(dt_net_set_precision(sw, DT_PRECISION_FP32));
    for (int i = 0; i < sw->nlayers; i++) CHECK(!sw->layers[i].in_bf16 && !sw->layers[i].out_bf16);
    double ls = step(sw, x, y), lr = step(ref, x, y);
    CHECK(ls == lr);
    CHECK(memcmp(sw->grads, ref->grads, sizeof(float) * ref->nparams) == 0);
    /* And back: bf16 again, as the first bf16 net computed. */
    CHECK_OK(dt_net_set_precision(sw, DT_PRECISION_BF16));
    CHECK(sw->layers[nc->bn].in_bf16 && sw->layers[nc->bn - 1].out_bf16);
    dt_net_free(sw), dt_net_free(ref);
    dt_net_free(b16), dt_net_free(f32), dt_net_free(edges);
}

int main(void) {
    if (dt_precision_check(DT_PRECISION_BF16) != DT_OK) {
        printf("test_bf16_acts: skipped: %s\n", dt_last_error());
        return 77;
    }
    const net_case resnet = {cfg, 20, 16, 4, 2}, pooled = {pool_cfg, 14, 10, 6, 12};
    check_net(&resnet, 16);
    check_net(&resnet, 3);
    check_net(&resnet, 2);
    check_net(&pooled, 16);
    check_net(&pooled, 3);
    check_net(&pooled, 2);
    return dt_test_finish("test_bf16_acts");
}

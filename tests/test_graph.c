/* Layer graphs: [shortcut], [route], global [avgpool], [cost], and the
 * net's backward over outputs that feed several layers.
 *
 * - Whole-net finite differences: for small graph models written as model
 *   files (a layer feeding two later ones, shortcuts between equal and
 *   mismatched shapes in both directions, route, a batch-normalised ResNet
 *   block), every parameter's gradient of the mean cross-entropy against
 *   central differences (the loss in double, eps 1e-3: atol 3e-4 and rtol
 *   1e-2 cover float forward rounding / eps, as in test_gradcheck).
 * - Darknet's shortcut between mismatched shapes, by hand: the sum is over
 *   the shared channels, the larger map read (or the smaller one written)
 *   every H1/H2 cells.
 * - The parser maps Darknet's section indices onto the built layers, and
 *   refuses what has no meaning, naming file and line. */
#include <math.h>
#include <string.h>

#include "dtrain/mem.h"
#include "dtrain/net.h"
#include "dtrain/rng.h"
#include "testutil.h"

enum { B = 3 };

/* Mean cross-entropy of x with labels, after a training forward. */
static double mean_loss(dt_net *net, const float *x, const dt_label *labels) {
    dt_net_forward(net, x, B, 1);
    return dt_net_loss(net, labels, B) / B;
}

/* Every parameter's gradient of net against central differences. */
static void net_gradcheck(const char *name, const char *cfg) {
    dt_model_spec *m = NULL;
    dt_net *net = NULL;
    float *x = NULL, *num = NULL, *grad = NULL;
    if (!CHECK_OK(dt_alloc_bytes((void **)&m, sizeof *m, "spec")) ||
        !CHECK_OK(dt_model_parse_string(m, cfg, name)) || !CHECK_OK(dt_net_create(&net, m, B, 7)))
        goto done;
    size_t nx = dt_shape_size(net->input) * B, np = net->nparams;
    if (!CHECK_OK(dt_alloc_floats(&x, nx, "x")) || !CHECK_OK(dt_alloc_floats(&num, np, "num")) ||
        !CHECK_OK(dt_alloc_floats(&grad, np, "grad")))
        goto done;
    dt_rng rng = dt_rng_seed(99);
    for (size_t i = 0; i < nx; i++) x[i] = 2.0f * dt_rng_uniform(&rng) - 1.0f;
    const dt_label labels[B] = {1, 0, 2};
    mean_loss(net, x, labels);
    /* dt_net_loss's dlogits are (p - onehot) / B: the mean's gradient. */
    dt_net_backward(net, x, B, NULL, NULL);
    memcpy(grad, net->grads, sizeof(float) * np);
    const float eps = 1e-3f;
    for (size_t i = 0; i < np; i++) {
        float keep = net->params[i];
        net->params[i] = keep + eps;
        double lp = mean_loss(net, x, labels);
        net->params[i] = keep - eps;
        double lm = mean_loss(net, x, labels);
        net->params[i] = keep;
        num[i] = (float)((lp - lm) / (2.0 * eps));
    }
    printf("  %s: %d layers, %zu parameters, %d gradient buffers\n", name, net->nlayers, np, net->ngbuf);
    if (!dt_check_allclose(grad, num, np, 3e-4, 1e-2, __FILE__, __LINE__, name))
        fprintf(stderr, "  (%s: analytic vs numeric parameter gradients)\n", name);
done:
    dt_free(grad), dt_free(num), dt_free(x);
    dt_net_free(net);
    dt_free(m);
}

#define NET(c, h, w) "[net]\nchannels=" #c "\nheight=" #h "\nwidth=" #w "\n"
/* A 3x3 convolution, linear (CONV), with an activation (CONV_ACT), or batch
 * normalised (CONV_BN); HEAD: global pool, a linear connected layer and the
 * softmax. (Darknet's default activation, logistic, is said nowhere.) */
#define CONV_KEYS(f, s) "[convolutional]\nfilters=" #f "\nsize=3\nstride=" #s "\npad=1\n"
#define CONV(f, s) CONV_KEYS(f, s) "activation=linear\n"
#define CONV_ACT(f, s, a) CONV_KEYS(f, s) "activation=" #a "\n"
#define CONV_BN(f, s, a) CONV_KEYS(f, s) "batch_normalize=1\nactivation=" #a "\n"
#define HEAD "[avgpool]\n[connected]\noutput=3\nactivation=linear\n[softmax]\n"

static void test_gradients(void) {
    /* Section 0's output feeds section 1 and the shortcut: its gradient is
     * the sum of both paths. */
    net_gradcheck("two_consumers.cfg",
                  NET(2, 5, 5) CONV_ACT(3, 1, tanh)  CONV(3, 1)
                  "[shortcut]\nfrom=-2\nactivation=tanh\n" HEAD);
    /* From 3x6x6 into 5x3x3 (read every 2nd cell, 3 shared channels), then
     * from 5x3x3 into 2x3x3 (2 shared channels). */
    net_gradcheck("shortcut_down.cfg",
                  NET(2, 6, 6) CONV(3, 1) CONV(5, 2) "[shortcut]\nfrom=-2\n" CONV(2, 1)
                  "[shortcut]\nfrom=-2\n" HEAD);
    /* From 2x3x3 into the 2x6x6 a route passes on (written every 2nd cell). */
    net_gradcheck("shortcut_up.cfg",
                  NET(1, 6, 6) CONV_ACT(2, 1, tanh)  CONV(2, 2)
                  "[route]\nlayers=0\n[shortcut]\nfrom=1\n" HEAD);
    /* Concatenation of two branches (3 + 2 channels), a shortcut by
     * absolute index, and one layer routed twice. */
    net_gradcheck("route.cfg",
                  NET(2, 4, 4) CONV_ACT(2, 1, tanh)  CONV(3, 1)
                  "[route]\nlayers=-1,-2,-2\n" CONV(4, 1) "[shortcut]\nfrom=1\n" HEAD);
    /* A ResNet basic block with stride 2, batch norm in training mode (tanh
     * instead of relu: batch norm puts half the values near relu's kink,
     * where central differences are wrong; the ResNet-20 golden in
     * test_golden has the relus). */
    net_gradcheck("resnet_block.cfg",
                  NET(2, 6, 6) CONV_BN(2, 1, tanh)  CONV_BN(4, 2, tanh)
                   CONV_BN(4, 1, linear)
                  "[shortcut]\nfrom=-3\nactivation=tanh\n" HEAD);
}

/* Forward of cfg on x (1x4x4 = 1..16) after zeroing every parameter and
 * setting those of layer `one` to 1; *out = layer `at`'s output. */
static int forward_hand(dt_model_spec *m, dt_net **net, const char *cfg, int one, int at,
                        const float **out) {
    if (!CHECK_OK(dt_model_parse_string(m, cfg, "hand.cfg")) || !CHECK_OK(dt_net_create(net, m, 1, 1)))
        return 0;
    memset((*net)->params, 0, sizeof(float) * (*net)->nparams);
    dt_layer *l = &(*net)->layers[one];
    for (size_t i = 0; i < l->nw; i++) l->w[i] = 1.0f;
    float x[16];
    for (int i = 0; i < 16; i++) x[i] = (float)(i + 1);
    dt_net_forward(*net, x, 1, 0);
    *out = (*net)->act[at];
    return 1;
}

/* Darknet's shortcut_cpu between mismatched shapes, by hand. */
static void test_shortcut_values(void) {
    dt_model_spec *m = NULL;
    dt_net *net = NULL;
    const float *y;
    if (!CHECK_OK(dt_alloc_bytes((void **)&m, sizeof *m, "spec"))) return;
    /* Layer 0 passes x (1x4x4) on, layer 1 makes 2x2x2 zeros, the shortcut
     * adds x read every 2nd cell into channel 0 (the one shared channel). */
    if (forward_hand(m, &net, NET(1, 4, 4) "[avgpool]\nsize=1\n[convolutional]\nfilters=2\nsize=1\n"
                                           "stride=2\nactivation=linear\n[shortcut]\nfrom=0\n[softmax]\n",
                     0, 2, &y)) {
        const float want[8] = {1, 3, 9, 11, 0, 0, 0, 0};
        CHECK_ALLCLOSE(y, want, 8, 0, 0);
    }
    dt_net_free(net);
    net = NULL;
    /* Layer 1 (weight 1, stride 2) makes x[0::2, 0::2] (1x2x2), layer 3
     * 2x4x4 zeros from the route of x; the shortcut writes the 2x2 values
     * every 2nd cell of channel 0. */
    if (forward_hand(m, &net, NET(1, 4, 4) "[avgpool]\nsize=1\n[convolutional]\nfilters=1\nsize=1\n"
                                           "stride=2\nactivation=linear\n[route]\nlayers=0\n[convolutional]\n"
                                           "filters=2\nsize=1\nactivation=linear\n[shortcut]\nfrom=1\n[softmax]\n",
                     1, 4, &y)) {
        float want[32] = {0};
        want[0] = 1, want[2] = 3, want[8] = 9, want[10] = 11;
        CHECK_ALLCLOSE(y, want, 32, 0, 0);
    }
    dt_net_free(net);
    dt_free(m);
}

/* Darknet numbers sections from 0 after [net], one layer each; dtrain
 * expands a conv section into conv, batch norm and activation layers, so the
 * references must land on each section's last layer. */
static void test_section_indices(void) {
    dt_model_spec *m = NULL;
    if (!CHECK_OK(dt_alloc_bytes((void **)&m, sizeof *m, "spec"))) return;
    if (CHECK_OK(dt_model_parse_string(m, NET(1, 4, 4) CONV_BN(2, 1, relu) 
                                          CONV(2, 1) "[shortcut]\nfrom=-2\n[route]\nlayers=-1,0\n"
                                          "[avgpool]\n[softmax]\n[cost]\ntype=sse\n",
                                       "idx.cfg"))) {
        /* layers: 0 conv 1 bn 2 relu | 3 conv | 4 shortcut | 5 route | 6 avgpool | 7 softmax */
        const dt_layer_spec *sc = &m->layers[4], *rt = &m->layers[5];
        CHECK(m->nlayers == 8 && m->layers[0].no_bias && !m->layers[3].no_bias);
        CHECK(sc->kind == DT_LAYER_SHORTCUT && sc->ninputs == 2 && sc->inputs[0] == 3 && sc->inputs[1] == 2);
        CHECK(rt->kind == DT_LAYER_ROUTE && rt->ninputs == 2 && rt->inputs[0] == 4 && rt->inputs[1] == 2);
        CHECK(m->layers[6].ninputs == 0 && m->layers[6].size == 0);
    }
    dt_free(m);
}

/* cfg is refused, by the parser or the net builder, with a message that
 * contains want. */
static void refused(const char *cfg, const char *want) {
    dt_model_spec *m = NULL;
    dt_net *net = NULL;
    if (!CHECK_OK(dt_alloc_bytes((void **)&m, sizeof *m, "spec"))) return;
    dt_status s = dt_model_parse_string(m, cfg, "bad.cfg");
    if (s == DT_OK) s = dt_net_create(&net, m, 2, 1);
    int ok = s == DT_ERR_CONFIG && strstr(dt_last_error(), want) != NULL;
    if (!ok) fprintf(stderr, "status %d, message '%s'; expected '%s'\n", s, dt_last_error(), want);
    CHECK(ok);
    dt_net_free(net);
    dt_free(m);
}

static void test_errors(void) {
    refused(NET(1, 4, 4) CONV(2, 1) "[shortcut]\nfrom=-3\n" HEAD,
            "bad.cfg:12: from=-3 names section -2, but only sections 0..0 come before this one");
    refused(NET(1, 4, 4) "[shortcut]\nfrom=0\n" HEAD, "bad.cfg:5: [shortcut] needs a layer before it");
    refused(NET(1, 4, 4) "[route]\nlayers=-1\n" HEAD, "bad.cfg:6: layers=-1 names section -1");
    refused(NET(1, 4, 4) CONV(2, 1) CONV(2, 2) "[route]\nlayers=-1,-2\n" HEAD,
            "bad.cfg:17: [route] layers= entry 2 has spatial size 4x4, entry 1 has 2x2");
    refused(NET(1, 4, 4) CONV(2, 1) CONV(2, 1) "[route]\nlayers=0\n" HEAD,
            "bad.cfg:11: [convolutional] output is read by no later layer");
    refused(NET(1, 4, 4) "[route]\nlayers=1,2,3,4,5,6,7,8,9\n" HEAD, "layers= takes at most 8 values");
    refused(NET(1, 4, 4) CONV(2, 1) "[route]\nlayers=0,x\n" HEAD, "bad value '0,x' for layers");
    refused(NET(1, 4, 4) CONV(2, 1) "[route]\nlayers=-0.5\n" HEAD, "bad value '-0.5' for layers");
    refused(NET(1, 4, 4) CONV(2, 1) "[route]\nlayers=0x0\n" HEAD, "bad value '0x0' for layers");
    refused(NET(1, 4, 4) HEAD "[cost]\ntype=masked\n",
            "bad.cfg:11: [cost] type=masked would train another loss");
    refused(NET(1, 4, 4) CONV(2, 1) "[cost]\n" HEAD, "bad.cfg:11: [cost] must follow [softmax]");
    refused(NET(1, 4, 4) HEAD "[cost]\n[cost]\n", "bad.cfg:11: second [cost] section");
    refused(NET(1, 4, 4) HEAD "[cost]\n[dropout]\n", "[dropout] after [softmax]");
    refused(NET(1, 4, 4) "[avgpool]\npad=1\n[softmax]\n", "[avgpool] without size= is global");
    refused(NET(1, 4, 4) CONV(2, 1) "[softmax]\ngroups=2\n", "groups=2 is out of range");
}

/* Training forward, loss, backward and an evaluation forward of net on x:
 * res <- loss, gradients (nparams), state (nstate), probabilities (B x 3). */
static void train_pass(dt_net *net, const float *x, float *res) {
    const dt_label labels[B] = {2, 0, 1};
    res[0] = (float)mean_loss(net, x, labels);
    dt_net_backward(net, x, B, NULL, NULL);
    memcpy(res + 1, net->grads, sizeof(float) * net->nparams);
    memcpy(res + 1 + net->nparams, net->state, sizeof(float) * net->nstate);
    memcpy(res + 1 + net->nparams + net->nstate, dt_net_forward(net, x, B, 0), sizeof(float) * B * 3);
}

/* The engine's fast paths against the plain one (spec.plain_engine: NCHW
 * activations, every ReLU its own pass): loss, gradients, running
 * statistics and evaluation within float rounding of other summation
 * orders. `blocked16` of the layers are expected in nChw16c on AVX-512,
 * `blocked8` in nChw8c on AVX2 (CTest runs this test on both: test_graph
 * under ONEDNN_MAX_CPU_ISA=AVX2 too), and `fused` ReLUs folded into the
 * layer before them. */
static void engine_case(const char *name, const char *cfg, int blocked16, int blocked8, int fused) {
    dt_model_spec *m = NULL;
    dt_net *fast = NULL, *plain = NULL;
    float *x = NULL, *a = NULL, *b = NULL;
    if (!CHECK_OK(dt_alloc_bytes((void **)&m, sizeof *m, "spec")) ||
        !CHECK_OK(dt_model_parse_string(m, cfg, name)) || !CHECK_OK(dt_net_create(&fast, m, B, 5)))
        goto done;
    m->plain_engine = 1;
    if (!CHECK_OK(dt_net_create(&plain, m, B, 5))) goto done;
    int L = fast->nlayers, nblocked = 0, nfused = 0;
    for (int i = 0; i < L; i++) {
        const dt_layer *p = &plain->layers[i];
        CHECK(p->in_layout == DT_LAYOUT_NCHW && p->out_layout == DT_LAYOUT_NCHW && !p->folded && !p->relu_out);
        CHECK(fast->layers[i].out_layout == DT_LAYOUT_NCHW || fast->layers[i].out_layout == dt_layout_native());
        nblocked += fast->layers[i].out_layout != DT_LAYOUT_NCHW;
        nfused += fast->layers[i].folded;
    }
    dt_layout native = dt_layout_native();
    CHECK(nblocked == (native == DT_LAYOUT_NCHW16C ? blocked16 : native == DT_LAYOUT_NCHW8C ? blocked8 : 0));
    CHECK(nfused == fused);
    CHECK(dt_net_bytes(fast) < dt_net_bytes(plain) || fused == 0); /* folded ReLUs keep no output */
    printf("  %s: %d of %d activations %s, %d ReLUs folded\n", name, nblocked, L, dt_layout_name(native), nfused);
    size_t nx = dt_shape_size(fast->input) * B, nres = 1 + fast->nparams + fast->nstate + B * 3;
    if (!CHECK_OK(dt_alloc_floats(&x, nx, "x")) || !CHECK_OK(dt_alloc_floats(&a, nres, "a")) ||
        !CHECK_OK(dt_alloc_floats(&b, nres, "b")))
        goto done;
    dt_rng rng = dt_rng_seed(4);
    for (size_t i = 0; i < nx; i++) x[i] = 2.0f * dt_rng_uniform(&rng) - 1.0f;
    train_pass(fast, x, a);
    train_pass(plain, x, b);
    CHECK_CLOSE(a[0], b[0], 0, 1e-6);
    float gmax = 0;
    for (size_t i = 1; i < nres; i++) gmax = fabsf(b[i]) > gmax ? fabsf(b[i]) : gmax;
    if (!dt_check_allclose(a + 1, b + 1, nres - 1, 1e-5 * gmax, 1e-4, __FILE__, __LINE__, name))
        fprintf(stderr, "  (%s: fast vs plain engine)\n", name);
done:
    dt_free(x), dt_free(a), dt_free(b);
    dt_net_free(fast), dt_net_free(plain);
    dt_free(m);
}

/* A ResNet's stages (an identity and an option-A shortcut, a global pool)
 * in 16 and 32 channels (blocked on AVX2 and AVX-512) and in 8 (blocked on
 * AVX2 only): its 5 ReLUs after batch norms and shortcuts fold; a ReLU whose
 * input has two readers does not. */
static void test_engine(void) {
#define STAGES(c1, c2)                                                                             \
    CONV_BN(c1, 1, relu)  CONV_BN(c1, 1, relu)  \
    CONV_BN(c1, 1, linear) "[shortcut]\nfrom=-3\nactivation=relu\n" CONV_BN(c2, 2, relu)                    \
     CONV_BN(c2, 1, linear) "[shortcut]\nfrom=-3\nactivation=relu\n"
    engine_case("resnet16.cfg", NET(1, 8, 8) STAGES(16, 32) HEAD, 17, 17, 5);
    engine_case("resnet8.cfg", NET(1, 8, 8) STAGES(8, 8) HEAD, 0, 17, 5);
    /* The batch norm's output is read by the ReLU and the shortcut: no fold. */
    engine_case("two_readers.cfg",
                NET(1, 8, 8) CONV(16, 1) "[batchnorm]\n[activation]\nactivation=relu\n[shortcut]\nfrom=-2\n" HEAD,
                4, 4, 0);
#undef STAGES
}

int main(void) {
    printf("graph gradients against central differences:\n");
    test_gradients();
    test_engine();
    test_shortcut_values();
    test_section_indices();
    test_errors();
    return dt_test_finish("test_graph");
}

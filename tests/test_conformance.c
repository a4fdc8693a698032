/* Every layer kind passes the same checks (ggml's test-backend-ops is the
 * model): a kind of the registry without a row in `cases` fails here, so a
 * new kind cannot land without them.
 *
 * Each case is a small net in which the kind sits after a convolution (or,
 * for a kind that takes a flat input, a connected layer), so that the
 * parameters of that layer see the kind's backward. For each:
 *   gradients   the net's loss differentiated by central differences in the
 *               parameters (up to 48 of them, spread over every layer that
 *               has any) against backward: ||num - ana|| <= 3 % ||ana||
 *               (smooth kinds agree to 1e-4; a max or a leaky ReLU whose
 *               input crosses its kink inside +-eps costs up to 2 % at
 *               eps 1e-3, shrinking with eps);
 *   threads     loss and every gradient with 1 and 2 OpenMP threads;
 *   layouts     the CPU's blocked activation layout (what dt_net_create
 *               picks) against plain NCHW with no fused ReLUs;
 *   precision   bf16 products against fp32 where this CPU runs bf16;
 *   ONNX        the kind appears in tests/data/export_kinds.cfg, which
 *               test_export trains, exports and runs in ONNX Runtime;
 *   documented  each of its model-file keys in docs/MODEL_FILES.md.
 * Training-mode forwards draw dropout masks and crop windows from the net's
 * step counter, which is reset before each, so every loss of a case sees
 * the same masks. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/mem.h"
#include "dtrain/net.h"
#include "dtrain/rng.h"
#include "dtrain/textfile.h"
#include "layers/layer_keys.h"
#include "testutil.h"

enum { BATCH = 4, FD_SAMPLES = 48 };

#define NET_8x8 "[net]\nchannels=2\nheight=8\nwidth=8\nbatch=4\nlearning_rate=0.01\n"
#define CONV "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
/* 16 channels: blocked (nChw16c with AVX-512), bf16 activations in bf16. */
#define CONV16 "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=linear\n"
#define HEAD "[connected]\noutput=3\nactivation=linear\n[softmax]\n"

static const struct {
    dt_layer_kind kind;
    const char *model;
} cases[] = {
    {DT_LAYER_CONV, NET_8x8 "[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\ngroups=2\nactivation=linear\n" HEAD},
    /* Between convolutions of 16 channels, on the blocked layout and in
     * bf16; padding=3: one cell before, two after (pad_extra). */
    {DT_LAYER_MAXPOOL, NET_8x8 CONV16 "[maxpool]\nsize=3\nstride=2\npadding=3\n" CONV16 HEAD},
    {DT_LAYER_AVGPOOL, NET_8x8 CONV "[avgpool]\n" HEAD},
    {DT_LAYER_DENSE, NET_8x8 "[connected]\noutput=6\nactivation=linear\n" HEAD},
    {DT_LAYER_ACT, NET_8x8 CONV "[activation]\nactivation=leaky\n" HEAD},
    {DT_LAYER_DROPOUT, NET_8x8 CONV "[dropout]\nprobability=0.3\n" HEAD},
    {DT_LAYER_LRN, NET_8x8 CONV "[lrn]\nsize=3\n" HEAD},
    {DT_LAYER_BATCHNORM, NET_8x8 CONV "[batchnorm]\n" HEAD},
    {DT_LAYER_SOFTMAX, NET_8x8 CONV HEAD},
    {DT_LAYER_SHORTCUT, NET_8x8 CONV CONV "[shortcut]\nfrom=-2\nactivation=linear\n" HEAD},
    {DT_LAYER_ROUTE, NET_8x8 CONV16 CONV16 "[route]\nlayers=-1,-2\n" CONV16 HEAD},
    {DT_LAYER_CROP, NET_8x8 CONV "[crop]\ncrop_height=6\ncrop_width=6\nflip=1\n" HEAD},
    {DT_LAYER_REORG, NET_8x8 CONV "[reorg]\nstride=2\n" HEAD},
};
enum { NCASES = (int)(sizeof cases / sizeof *cases) };

/* A case's net, its input (BATCH, in) and labels. */
typedef struct {
    dt_net *net;
    float *x;
    dt_label labels[BATCH];
} probe;

static int probe_make(probe *p, const char *model, int plain, dt_precision prec) {
    memset(p, 0, sizeof *p);
    dt_model_spec spec;
    if (!CHECK_OK(dt_model_parse_string(&spec, model, "conformance.cfg"))) return 0;
    spec.plain_engine = plain;
    if (!CHECK_OK(dt_net_create(&p->net, &spec, BATCH, 7))) return 0;
    if (prec != DT_PRECISION_FP32 && !CHECK_OK(dt_net_set_precision(p->net, prec))) return 0;
    size_t n = (size_t)BATCH * dt_shape_size(p->net->input);
    if (!CHECK_OK(dt_alloc_floats(&p->x, n, "input"))) return 0;
    dt_rng rng = dt_rng_seed(11);
    for (size_t i = 0; i < n; i++) p->x[i] = dt_rng_uniform(&rng) * 2 - 1;
    for (int b = 0; b < BATCH; b++) p->labels[b] = b % p->net->classes;
    return 1;
}

static void probe_free(probe *p) {
    dt_net_free(p->net);
    dt_free(p->x);
}

/* The mean loss of one training forward with the masks of step 0 (backward
 * differentiates the mean; dt_net_loss returns the sum); with grads,
 * backward too (p->net->grads). */
static double probe_loss(probe *p, int grads) {
    p->net->step = 0;
    p->net->sample_base = 0;
    dt_net_forward(p->net, p->x, BATCH, 1);
    double loss = dt_net_loss(p->net, p->labels, BATCH) / BATCH;
    if (grads) {
        memset(p->net->grads, 0, p->net->nparams * sizeof(float));
        dt_net_backward(p->net, p->x, BATCH, NULL, NULL);
    }
    return loss;
}

/* ||a - b|| / ||b|| over n floats. */
static double rel_diff(const float *a, const float *b, size_t n) {
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r += (double)b[i] * b[i];
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

static void check_gradients(const char *name, probe *p) {
    dt_net *net = p->net;
    float *ana, num[FD_SAMPLES], picked[FD_SAMPLES];
    if (!CHECK_OK(dt_alloc_floats(&ana, net->nparams, "gradient"))) return;
    probe_loss(p, 1);
    memcpy(ana, net->grads, net->nparams * sizeof(float));
    /* Spread the samples over every parameter: a stride through the vector. */
    size_t stride = net->nparams > FD_SAMPLES ? net->nparams / FD_SAMPLES : 1;
    int n = 0;
    for (size_t i = 0; i < net->nparams && n < FD_SAMPLES; i += stride, n++) {
        float keep = net->params[i];
        const float eps = 1e-3f;
        net->params[i] = keep + eps;
        double lp = probe_loss(p, 0);
        net->params[i] = keep - eps;
        double lm = probe_loss(p, 0);
        net->params[i] = keep;
        num[n] = (float)((lp - lm) / (2 * eps));
        picked[n] = ana[i];
    }
    double e = rel_diff(num, picked, (size_t)n);
    if (e > 0.03) fprintf(stderr, "%s: finite differences differ from backward by %.3g\n", name, e);
    CHECK(e <= 0.03);
    dt_free(ana);
}

/* Loss and gradients of a and b agree within tol (relative). */
static void check_same(const char *name, const char *what, probe *a, probe *b, double tol) {
    double la = probe_loss(a, 1), lb = probe_loss(b, 1);
    double e = rel_diff(a->net->grads, b->net->grads, a->net->nparams);
    if (fabs(la - lb) > tol * fabs(lb) || e > tol)
        fprintf(stderr, "%s: %s: loss %.9g vs %.9g, gradients differ by %.3g (tolerance %.3g)\n", name, what, la, lb,
                e, tol);
    CHECK(fabs(la - lb) <= tol * fabs(lb));
    CHECK(e <= tol);
}

static void check_threads(const char *name, const char *model) {
    probe one, two;
    omp_set_num_threads(1);
    int ok = probe_make(&one, model, 0, DT_PRECISION_FP32);
    omp_set_num_threads(2);
    if (ok && probe_make(&two, model, 0, DT_PRECISION_FP32)) {
        /* Both see threads' sums in their own order: rounding only. */
        omp_set_num_threads(1);
        double l1 = probe_loss(&one, 1);
        omp_set_num_threads(2);
        double l2 = probe_loss(&two, 1);
        double e = rel_diff(two.net->grads, one.net->grads, one.net->nparams);
        if (fabs(l1 - l2) > 1e-5 * fabs(l1) || e > 1e-4)
            fprintf(stderr, "%s: 1 vs 2 threads: loss %.9g vs %.9g, gradients differ by %.3g\n", name, l1, l2, e);
        CHECK(fabs(l1 - l2) <= 1e-5 * fabs(l1));
        CHECK(e <= 1e-4);
        probe_free(&two);
    }
    if (ok) probe_free(&one);
    omp_set_num_threads(1);
}

/* The kinds of the sections of tests/data/export_kinds.cfg, as built. */
static int exported_kinds(unsigned char seen[DT_LAYER_KIND_COUNT]) {
    const char *src = getenv("DT_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/export_kinds.cfg", src ? src : ".");
    dt_model_spec spec;
    if (!CHECK_OK(dt_model_parse_file(&spec, path))) return 0;
    for (int i = 0; i < spec.nlayers; i++) seen[spec.layers[i].kind] = 1;
    return 1;
}

/* Each key of kind's section named in the model-file reference, as `key`
 * or key=. */
static void check_documented(const char *doc, dt_layer_kind kind) {
    const dt_layer_ops *ops = dt_layer_ops_of(kind);
    for (const dt_key_def *k = ops->keys; k->name; k++) {
        char a[96], b[96];
        snprintf(a, sizeof a, "`%s`", k->name);
        snprintf(b, sizeof b, "%s=", k->name);
        if (!strstr(doc, a) && !strstr(doc, b)) {
            fprintf(stderr, "[%s]: key %s is not in docs/MODEL_FILES.md\n", ops->name, k->name);
            CHECK(0);
        }
    }
}

/* 1 when a layer of kind k in net reads bf16 activations. */
static int reads_bf16(const dt_net *net, int k) {
    for (int i = 0; i < net->nlayers; i++)
        if (net->layers[i].spec.kind == (dt_layer_kind)k && net->layers[i].in_bf16) return 1;
    return 0;
}

int main(void) {
    omp_set_num_threads(1);
    unsigned char exported[DT_LAYER_KIND_COUNT] = {0};
    int have_export = exported_kinds(exported);
    char *doc = NULL, path[4096];
    const char *src = getenv("DT_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/docs/MODEL_FILES.md", src ? src : ".");
    CHECK_OK(dt_read_text_file(&doc, path, 1 << 20, DT_ERR_IO, "the model-file reference"));
    int bf16 = dt_precision_check(DT_PRECISION_BF16) == DT_OK;
    for (int k = 0; k < DT_LAYER_KIND_COUNT; k++) {
        const char *name = dt_layer_ops_of((dt_layer_kind)k)->name;
        int c = 0;
        while (c < NCASES && cases[c].kind != (dt_layer_kind)k) c++;
        if (c == NCASES) {
            fprintf(stderr, "[%s] has no row in test_conformance.c's cases\n", name);
            CHECK(0);
            continue;
        }
        probe native, plain;
        if (probe_make(&native, cases[c].model, 0, DT_PRECISION_FP32)) {
            check_gradients(name, &native);
            if (probe_make(&plain, cases[c].model, 1, DT_PRECISION_FP32)) {
                check_same(name, "blocked layout vs NCHW", &native, &plain, 1e-4);
                probe_free(&plain);
            }
            if (bf16 && probe_make(&plain, cases[c].model, 0, DT_PRECISION_BF16)) {
                /* bf16 keeps 8 bits of mantissa in the products' operands. */
                check_same(name, "bf16 vs fp32", &plain, &native, 0.05);
                /* Their cases put these kinds on the bf16 activations. */
                if (k == DT_LAYER_MAXPOOL || k == DT_LAYER_ROUTE) CHECK(reads_bf16(plain.net, k));
                probe_free(&plain);
            }
            probe_free(&native);
        }
        check_threads(name, cases[c].model);
        if (have_export && !exported[k]) {
            fprintf(stderr, "[%s] is not in tests/data/export_kinds.cfg (its ONNX round trip)\n", name);
            CHECK(0);
        }
        if (doc) check_documented(doc, (dt_layer_kind)k);
        printf("%-14s checked (gradients, threads, layouts%s, ONNX case, keys documented)\n", name,
               bf16 ? ", bf16" : "");
    }
    free(doc);
    return dt_test_finish("test_conformance");
}

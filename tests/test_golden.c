/* Golden tests: dtrain's numerics against PyTorch 1.13, from the files that
 * scripts/gen_golden.py writes into tests/golden/ (regenerate with
 * `/usr/bin/python3 scripts/gen_golden.py`).
 *
 * File format (little-endian; see gen_golden.py):
 *   "DTGOLD01", uint32 narrays, then per array: uint32 name length L (1..31),
 *   L name bytes, uint32 ndim (0..4), ndim uint32 dims, prod(dims) float32.
 *
 * 1. Per-layer cases: each layer is built by hand (spec, input shape from
 *    the file's x, setup, buffers from the ops' sizes), given the file's
 *    parameters and state, run forward (training mode) and backward with the
 *    file's upstream gradient g; out, dx, dw, db (and for batch norm the
 *    updated running statistics and an eval-mode output) must match torch.
 * 2. Whole model: examples/cnn.cfg from identical initial weights (a portable
 *    hash formula, the same in gen_golden.py) trained 10 SGD steps on the
 *    first 160 Fashion-MNIST training images; each step's loss must match;
 *    also in bf16 against torch.autocast (cnn_sgd_bf16); and
 *    examples/resnet20_fm.cfg (resnet20_fm_sgd, and in bf16
 *    resnet20_fm_sgd_bf16). Skipped (exit 0) when the Fashion-MNIST files
 *    are absent; the bf16 cases when the CPU has no bf16.
 * 3. ImageNet-sized: examples/resnet18.cfg and resnet50.cfg against
 *    torchvision's resnet18 and resnet50, 3 and 2 SGD steps on one batch of
 *    2 images 3x224x224 made by a hash formula (no data set; resnet18_sgd,
 *    resnet50_sgd, and resnet18 in bf16: resnet18_sgd_bf16). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/data.h"
#include "dtrain/layer.h"
#include "dtrain/mem.h"
#include "dtrain/model.h"
#include "dtrain/net.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Golden file reader                                                       */

enum { GOLDEN_MAX_ARRAYS = 16, GOLDEN_MAX_NAME = 31, GOLDEN_MAX_DIMS = 4 };
#define GOLDEN_MAX_BYTES ((size_t)1 << 20) /* all goldens together stay below 1 MB */

typedef struct {
    char name[GOLDEN_MAX_NAME + 1];
    int ndim;
    size_t dims[GOLDEN_MAX_DIMS];
    size_t n;    /* prod(dims) */
    float *data; /* (n), owned */
} golden_array;

typedef struct {
    char path[512];
    int narrays;
    golden_array arr[GOLDEN_MAX_ARRAYS];
} golden;

static void golden_free(golden *g) {
    for (int i = 0; i < g->narrays; i++) dt_free(g->arr[i].data);
    g->narrays = 0;
}

/* Reports a malformed or unreadable golden file as a test failure. */
static int golden_error(const golden *g, const char *msg) {
    fprintf(stderr, "%s: %s (regenerate with /usr/bin/python3 scripts/gen_golden.py)\n", g->path,
            msg);
    dt_test_failures++;
    return 0;
}

/* Bytes [*pos, *pos + n) of buf (len), advancing *pos; NULL past the end. */
static const unsigned char *take(const unsigned char *buf, size_t len, size_t *pos, size_t n) {
    if (n > len - *pos) return NULL;
    *pos += n;
    return buf + *pos - n;
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int take_u32(const unsigned char *buf, size_t len, size_t *pos, uint32_t *v) {
    const unsigned char *p = take(buf, len, pos, 4);
    if (p) *v = le32(p);
    return p != NULL;
}

/* Parses buf (len bytes) into g; every count and size is checked against
 * what is left of the buffer before it is used. */
static int golden_parse(golden *g, const unsigned char *buf, size_t len) {
    size_t pos = 0;
    uint32_t narrays;
    const unsigned char *magic = take(buf, len, &pos, 8);
    if (!magic || memcmp(magic, "DTGOLD01", 8) != 0) return golden_error(g, "bad magic");
    if (!take_u32(buf, len, &pos, &narrays)) return golden_error(g, "truncated header");
    if (narrays > GOLDEN_MAX_ARRAYS) return golden_error(g, "too many arrays");
    for (uint32_t a = 0; a < narrays; a++) {
        golden_array *ga = &g->arr[g->narrays];
        uint32_t namelen, ndim, dim;
        const unsigned char *name;
        if (!take_u32(buf, len, &pos, &namelen) || namelen < 1 || namelen > GOLDEN_MAX_NAME ||
            !(name = take(buf, len, &pos, namelen)))
            return golden_error(g, "bad or truncated array name");
        memcpy(ga->name, name, namelen);
        ga->name[namelen] = '\0';
        if (!take_u32(buf, len, &pos, &ndim) || ndim > GOLDEN_MAX_DIMS)
            return golden_error(g, "bad or truncated dimension count");
        ga->ndim = (int)ndim;
        ga->n = 1;
        for (uint32_t d = 0; d < ndim; d++) {
            if (!take_u32(buf, len, &pos, &dim) || dim > GOLDEN_MAX_BYTES / 4)
                return golden_error(g, "bad or truncated dimension");
            ga->dims[d] = dim;
            ga->n *= dim; /* both factors <= 2^18: no overflow */
            if (ga->n > GOLDEN_MAX_BYTES / 4) return golden_error(g, "array larger than the file");
        }
        const unsigned char *raw = take(buf, len, &pos, 4 * ga->n);
        if (!raw) return golden_error(g, "truncated array data");
        if (dt_alloc_floats(&ga->data, ga->n, ga->name) != DT_OK)
            return golden_error(g, "out of memory");
        g->narrays++;
        for (size_t i = 0; i < ga->n; i++) {
            uint32_t bits = le32(raw + 4 * i); /* IEEE binary32, as numpy '<f4' wrote it */
            memcpy(&ga->data[i], &bits, sizeof bits);
        }
    }
    if (pos != len) return golden_error(g, "trailing bytes after the last array");
    return 1;
}

/* Loads tests/golden/<name>.bin; 0 (and a failure recorded) on any error. */
static int golden_load(golden *g, const char *name) {
    memset(g, 0, sizeof *g);
    char rel[128];
    snprintf(rel, sizeof rel, "tests/golden/%s.bin", name);
    snprintf(g->path, sizeof g->path, "%s", dt_test_src_path(rel));
    FILE *f = fopen(g->path, "rb");
    if (!f) return golden_error(g, "cannot open");
    unsigned char *buf = malloc(GOLDEN_MAX_BYTES + 1);
    size_t len = buf ? fread(buf, 1, GOLDEN_MAX_BYTES + 1, f) : 0;
    int ok = !buf || ferror(f)        ? golden_error(g, "read error")
             : len > GOLDEN_MAX_BYTES ? golden_error(g, "file larger than 1 MB")
                                      : golden_parse(g, buf, len);
    fclose(f);
    free(buf);
    if (!ok) golden_free(g);
    return ok;
}

static const golden_array *golden_find(const golden *g, const char *name) {
    for (int i = 0; i < g->narrays; i++)
        if (strcmp(g->arr[i].name, name) == 0) return &g->arr[i];
    return NULL;
}

/* The values of array `name`, which must hold exactly n floats. */
static const float *golden_need(const golden *g, const char *name, size_t n) {
    const golden_array *a = golden_find(g, name);
    char msg[128];
    if (!a) {
        snprintf(msg, sizeof msg, "array '%s' missing", name);
    } else if (a->n != n) {
        snprintf(msg, sizeof msg, "array '%s' has %zu values, dtrain has %zu", name, a->n, n);
    } else {
        return a->data;
    }
    golden_error(g, msg);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Per-layer cases                                                          */

/* Largest errors seen in one case, for the log. rel is taken over elements
 * with |expected| >= 1e-3, as smaller ones make relative errors meaningless;
 * used is the largest |got - ref| / (atol + rtol |ref|) (1 = at the limit). */
typedef struct {
    double abs, rel, used;
} err_stats;

/* got (n) against golden array `key`, |got - ref| <= atol + rtol |ref|. */
static void compare(err_stats *e, const golden *g, const char *key, const float *got, size_t n,
                    double atol, double rtol) {
    const float *ref = golden_need(g, key, n);
    if (!ref) return;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (d > e->abs || isnan(d)) e->abs = d;
        if (fabs(ref[i]) >= 1e-3 && d / fabs(ref[i]) > e->rel) e->rel = d / fabs(ref[i]);
        if (d / (atol + rtol * fabs(ref[i])) > e->used) e->used = d / (atol + rtol * fabs(ref[i]));
    }
    if (!dt_check_allclose(got, ref, n, atol, rtol, __FILE__, __LINE__, key))
        fprintf(stderr, "  (in %s)\n", g->path);
}

typedef struct {
    const char *name; /* tests/golden/<name>.bin */
    dt_layer_spec spec;
} layer_case;

/* Tolerance |got - ref| <= 1e-5 + 1e-4 |ref| for every case: values are
 * O(0.1) to O(10) and the longest sums have 108 terms (conv dw over B*OH*OW),
 * so float32 rounding in another summation order (sgemm vs oneDNN) stays
 * near 1e-6 relative; observed at most 5% of this tolerance. */
#define LAYER_ATOL 1e-5
#define LAYER_RTOL 1e-4

static const layer_case layer_cases[] = {
    {"conv_k3s2p1", {.kind = DT_LAYER_CONV, .conv.filters = 5, .size = 3, .stride = 2, .pad = 1}},
    {"conv_k5s1p2", {.kind = DT_LAYER_CONV, .conv.filters = 4, .size = 5, .stride = 1, .pad = 2}},
    {"conv_k1", {.kind = DT_LAYER_CONV, .conv.filters = 3, .size = 1, .stride = 1, .pad = 0}},
    {"maxpool_k3s2p1", {.kind = DT_LAYER_MAXPOOL, .size = 3, .stride = 2, .pad = 1}},
    {"maxpool_k2s2", {.kind = DT_LAYER_MAXPOOL, .size = 2, .stride = 2, .pad = 0}},
    {"avgpool_k3s2p1", {.kind = DT_LAYER_AVGPOOL, .size = 3, .stride = 2, .pad = 1}},
    {"dense", {.kind = DT_LAYER_DENSE, .dense.outputs = 7}},
    {"relu", {.kind = DT_LAYER_ACT, .act.fn = DT_ACT_RELU}},
    {"leaky", {.kind = DT_LAYER_ACT, .act.fn = DT_ACT_LEAKY, .act.slope = 0.1f}},
    {"tanh", {.kind = DT_LAYER_ACT, .act.fn = DT_ACT_TANH}},
    {"sigmoid", {.kind = DT_LAYER_ACT, .act.fn = DT_ACT_SIGMOID}},
    {"lrn", {.kind = DT_LAYER_LRN, .lrn.size = 5, .lrn.alpha = 0.002f /* torch's 0.01 / 5 */, .lrn.beta = 0.75f,
             .lrn.k = 1.0f}},
    {"batchnorm2d", {.kind = DT_LAYER_BATCHNORM, .bn.momentum = 0.1f, .bn.eps = 1e-5f}},
    {"batchnorm1d", {.kind = DT_LAYER_BATCHNORM, .bn.momentum = 0.1f, .bn.eps = 1e-5f}},
    {"softmax_xent", {.kind = DT_LAYER_SOFTMAX}},
};

/* The buffers of one layer for one batch, as the net would give them. */
typedef struct {
    float *params, *grads; /* (nw + nb): w then b, dw then db */
    float *state, *saved, *ws, *out, *din, *dout;
    dt_label *labels; /* (B), softmax case only */
} layer_bufs;

static int alloc_bufs(layer_bufs *m, dt_layer *l, int batch) {
    size_t np = l->nw + l->nb, nin = dt_shape_size(l->in) * (size_t)batch;
    size_t nout = dt_shape_size(l->out) * (size_t)batch;
    int ok = CHECK_OK(dt_alloc_floats(&m->params, np, "params")) &&
             CHECK_OK(dt_alloc_floats(&m->grads, np, "grads")) &&
             CHECK_OK(dt_alloc_floats(&m->state, l->nstate, "state")) &&
             CHECK_OK(dt_alloc_floats(&m->saved, l->ops->saved_floats(l, batch), "saved")) &&
             CHECK_OK(dt_alloc_floats(&m->ws, l->ops->workspace_floats(l, batch), "ws")) &&
             CHECK_OK(dt_alloc_floats(&m->out, nout, "out")) &&
             CHECK_OK(dt_alloc_floats(&m->din, nin, "din")) &&
             CHECK_OK(dt_alloc_floats(&m->dout, nout, "dout")) &&
             CHECK_OK(dt_alloc_bytes((void **)&m->labels, sizeof *m->labels * (size_t)batch, "labels"));
    l->w = m->params, l->b = m->params + l->nw;
    l->dw = m->grads, l->db = m->grads + l->nw;
    l->state = m->state, l->saved = m->saved;
    return ok;
}

static void free_bufs(layer_bufs *m) {
    dt_free(m->params), dt_free(m->grads), dt_free(m->state), dt_free(m->saved);
    dt_free(m->ws), dt_free(m->out), dt_free(m->din), dt_free(m->dout), dt_free(m->labels);
}

/* Copies golden array `key` (exactly n values) into dst. */
static int load_into(float *dst, const golden *g, const char *key, size_t n) {
    const float *src = golden_need(g, key, n);
    if (src) memcpy(dst, src, sizeof(float) * n);
    return src != NULL;
}

/* The loss gradient of the softmax case: dt_softmax_xent_loss of the
 * probabilities against the file's labels, its mean loss checked. */
static int xent_dout(err_stats *e, const golden *g, layer_bufs *m, const float *logits, int batch,
                     int classes) {
    const float *lab = golden_need(g, "labels", (size_t)batch);
    if (!lab) return 0;
    for (int b = 0; b < batch; b++) {
        if (!(lab[b] >= 0 && lab[b] < (float)classes && lab[b] == floorf(lab[b])))
            return golden_error(g, "label out of range");
        m->labels[b] = (dt_label)lab[b];
    }
    float loss = (float)(dt_softmax_xent_loss(m->dout, logits, m->out, m->labels, batch, classes, 1.0f) / batch);
    compare(e, g, "loss", &loss, 1, LAYER_ATOL, LAYER_RTOL);
    return 1;
}

/* Forward, backward and (batch norm) eval forward of the case's layer with
 * the file's input, parameters, state and upstream gradient. */
static void run_layer(const layer_case *c, const golden *g, dt_layer *l, layer_bufs *m,
                      const float *x, int batch, err_stats *e) {
    size_t nin = dt_shape_size(l->in) * (size_t)batch;
    size_t nout = dt_shape_size(l->out) * (size_t)batch;
    if ((l->nw && !load_into(l->w, g, "w", l->nw)) || (l->nb && !load_into(l->b, g, "b", l->nb)) ||
        (l->nstate && !load_into(l->state, g, "state", l->nstate)))
        return;
    l->ops->forward(l, m->out, x, batch, 1, m->ws);
    compare(e, g, "out", m->out, nout, LAYER_ATOL, LAYER_RTOL);
    if (c->spec.kind == DT_LAYER_SOFTMAX ? !xent_dout(e, g, m, x, batch, (int)dt_shape_size(l->out))
                                         : !load_into(m->dout, g, "g", nout))
        return;
    /* backward must overwrite dw/db, not accumulate into them. */
    for (size_t i = 0; i < l->nw + l->nb; i++) m->grads[i] = 1e3f;
    l->ops->backward(l, m->din, m->dout, x, m->out, batch, m->ws);
    compare(e, g, "dx", m->din, nin, LAYER_ATOL, LAYER_RTOL);
    if (l->nw) compare(e, g, "dw", l->dw, l->nw, LAYER_ATOL, LAYER_RTOL);
    if (l->nb) compare(e, g, "db", l->db, l->nb, LAYER_ATOL, LAYER_RTOL);
    if (l->nstate) {
        compare(e, g, "state_out", l->state, l->nstate, LAYER_ATOL, LAYER_RTOL);
        l->ops->forward(l, m->out, x, batch, 0, m->ws);
        compare(e, g, "out_eval", m->out, nout, LAYER_ATOL, LAYER_RTOL);
    }
}

static void layer_golden(const layer_case *c) {
    golden g;
    if (!golden_load(&g, c->name)) return;
    const golden_array *x = golden_find(&g, "x"), *out = golden_find(&g, "out");
    dt_layer l;
    memset(&l, 0, sizeof l);
    l.spec = c->spec;
    l.spec.line = 1;
    l.ops = dt_layer_ops_of(c->spec.kind);
    if (!x || x->ndim != 4 || !out || out->ndim != 4) {
        golden_error(&g, "x and out must be (B, C, H, W) arrays");
        golden_free(&g);
        return;
    }
    int batch = (int)x->dims[0];
    l.in = (dt_shape){(int)x->dims[1], (int)x->dims[2], (int)x->dims[3]};
    layer_bufs m = {0};
    if (CHECK_OK(l.ops->setup(&l)) && alloc_bufs(&m, &l, batch)) {
        /* A shape disagreement means the table above and gen_golden.py differ. */
        if (out->dims[0] != (size_t)batch || out->dims[1] != (size_t)l.out.c ||
            out->dims[2] != (size_t)l.out.h || out->dims[3] != (size_t)l.out.w) {
            golden_error(&g, "output shape differs from dtrain's for this spec");
        } else {
            err_stats e = {0, 0, 0};
            run_layer(c, &g, &l, &m, x->data, batch, &e);
            printf("  %-15s B%d %dx%dx%d -> %dx%dx%d: max abs err %.2e, rel %.2e, %.1f%% of tol\n",
                   c->name, batch, l.in.c, l.in.h, l.in.w, l.out.c, l.out.h, l.out.w, e.abs,
                   e.rel, 100 * e.used);
        }
    }
    free_bufs(&m);
    if (l.ops && l.ops->destroy) l.ops->destroy(&l);
    golden_free(&g);
}

/* ------------------------------------------------------------------------ */
/* Whole model: examples/cnn.cfg, 10 SGD steps                             */

/* Loss, relative. Observed 1.5e-7, the size of float32 rounding itself
 * (torch float32 and float64 runs differ by 1.6e-7). 1e-5 leaves ~60x for
 * other BLAS kernels or summation orders, and still fails a learning rate
 * 1% off (changes the losses by 1.5e-4) or lost momentum (1e-2); a lost
 * weight decay (6e-6) is below it, test_optim covers the update rule. */
#define LOSS_RTOL 1e-5
/* Final parameters: sum against sqrt(n * sumsq), sumsq relative. Observed
 * <= 4e-7, mostly torch's own float32 rounding of gradients summed over up to
 * 12544 terms (a float64 torch run lands nearer dtrain's sums); 1e-5 is a
 * loose second check behind the losses. */
#define SUM_TOL 1e-5

/* One parameter tensor of the net in flat order (conv1.w, conv1.b, ...). */
typedef struct {
    float *p;
    size_t n, fan_in;
    int hashed; /* conv/dense: initialised by init_tensor (batch norm keeps 1 and 0) */
} tensor_view;

enum { MAX_TENSORS = 2 * DT_MAX_LAYERS };

/* The net's weight and bias tensors; conv (F, C, K, K) and dense (O, I)
 * weights have fan_in C*K*K or I = nw / out channels, which the bias (if
 * any) shares; batch norm's scale and shift are tensors too. */
static int net_tensors(dt_net *net, tensor_view *t) {
    int nt = 0;
    for (int i = 0; i < net->nlayers; i++) {
        dt_layer *l = &net->layers[i];
        if (l->nw == 0) continue;
        int hashed = l->spec.kind == DT_LAYER_CONV || l->spec.kind == DT_LAYER_DENSE;
        size_t fan_in = l->nw / (size_t)l->out.c;
        t[nt++] = (tensor_view){l->w, l->nw, fan_in, hashed};
        if (l->nb) t[nt++] = (tensor_view){l->b, l->nb, fan_in, hashed};
    }
    return nt;
}

/* Tensor number t, element i: u = (dt_hash64(t * 1000003 + i) >> 40) / 2^24,
 * value = (2u - 1) / sqrt(fan_in), in float32 exactly as init_tensor() in
 * gen_golden.py: u and 2u - 1 are exact, 1/sqrtf and the product are each
 * one correctly rounded operation (no contraction under -std=c11). */
static void init_tensor(const tensor_view *v, int t) {
    float bound = 1.0f / sqrtf((float)v->fan_in);
    for (size_t i = 0; i < v->n; i++) {
        float u = (float)(dt_hash64((uint64_t)t * 1000003u + i) >> 40) * (1.0f / 16777216.0f);
        v->p[i] = (2.0f * u - 1.0f) * bound;
    }
}

/* The SGD settings the golden was made with (hyper = lr, momentum, decay,
 * batch) must be examples/cnn.cfg's, else the losses cannot agree. */
static int check_hyper(const golden *g, const dt_model_spec *spec) {
    const float *h = golden_need(g, "hyper", 4);
    if (!h) return 0;
    /* & rather than &&: report every mismatch. */
    int ok = CHECK_CLOSE(spec->sched.base_lr, h[0], 0, 1e-6) &
             CHECK_CLOSE(spec->optim.momentum, h[1], 0, 1e-6) &
             CHECK_CLOSE(spec->optim.decay, h[2], 0, 1e-6);
    CHECK(spec->optim.kind == DT_OPT_SGD && spec->optim.nesterov == 0 && spec->sched.kind == DT_SCHED_CONSTANT &&
          spec->sched.warmup_epochs == 0);
    return ok && h[3] >= 1 && h[3] <= 1024 ? (int)h[3] : 0;
}

/* Final parameter tensors t (nt) against the golden sums. */
static void compare_sums(const tensor_view *t, int nt, const float *ref_sum,
                         const float *ref_sumsq) {
    for (int i = 0; i < nt; i++) {
        double sum = 0, sumsq = 0;
        for (size_t j = 0; j < t[i].n; j++) {
            double w = t[i].p[j];
            sum += w, sumsq += w * w;
        }
        /* The sum of symmetric random weights is near 0, so its error is
         * measured against the scale of its terms, sqrt(n * sumsq) (the
         * Cauchy-Schwarz bound of sum |w|). */
        double scale = sqrt((double)t[i].n * sumsq);
        CHECK_CLOSE(sum, ref_sum[i], SUM_TOL * scale, 0);
        CHECK_CLOSE(sumsq, ref_sumsq[i], 0, SUM_TOL);
        printf("  tensor %d (%7zu values): sum err %.2e (scaled %.2e), sumsq rel err %.2e\n", i,
               t[i].n, fabs(sum - ref_sum[i]), fabs(sum - ref_sum[i]) / scale,
               fabs(sumsq - ref_sumsq[i]) / ref_sumsq[i]);
    }
}

/* Step s's batch: fills x (batch, net input) and labels (batch); 0 if it cannot. */
typedef int (*batch_fn)(const void *ctx, size_t s, int batch, float *x, dt_label *labels);

/* Consecutive batches of a Fashion-MNIST dt_dataset (ctx) in file order,
 * x = byte / 255 in float32, as torch computes it. */
static int fmnist_batch(const void *ctx, size_t s, int batch, float *x, dt_label *labels) {
    const dt_dataset *ds = ctx;
    size_t nx = (size_t)batch * 784;
    if (dt_shape_size(ds->shape) != 784 || (s + 1) * (size_t)batch > (size_t)ds->n) return 0;
    const uint8_t *bytes = ds->images + s * nx;
    for (size_t i = 0; i < nx; i++) x[i] = (float)bytes[i] / 255.0f;
    memcpy(labels, ds->labels + s * (size_t)batch, sizeof *labels * (size_t)batch);
    return 1;
}

/* Initialises the net by the formula, trains it one optimiser step per
 * golden loss on the batches next_batch gives, checking each step's loss,
 * then (without loss64) the final parameters' sums. */
static void train_and_compare(dt_net *net, const dt_model_spec *spec, batch_fn next_batch, const void *ctx,
                              const golden *g, int batch) {
    const char *name = dt_optim_kind_name(spec->optim.kind), *prec = dt_precision_name(spec->precision);
    int bf16 = spec->precision == DT_PRECISION_BF16;
    const golden_array *ga = golden_find(g, "loss");
    size_t steps = ga ? ga->n : 0, nx = (size_t)batch * dt_shape_size(net->input);
    tensor_view t[MAX_TENSORS];
    int nt = net_tensors(net, t);
    const float *ref_loss = golden_need(g, "loss", steps);
    /* With loss64 the final sums are not compared (they carry the noise
     * below). bf16: step s may also differ from torch's autocast losses by
     * 3 x the largest spread of torch's bf16 and fp32 runs up to s (2e-5 at
     * step 0, 3e-4 by step 8): dtrain rounds to bf16 at other points than
     * torch (its activations between layers and its first, 1-channel
     * convolution stay fp32), which is noise of that size, not a bias
     * (resnet20_fm_sgd_bf16: torch's bf16 and fp32 losses part by 1.7e-3 at
     * step 0, dtrain's bf16 losses stay within 1.4e-3 relative of torch's;
     * resnet18_sgd_bf16: 9.5e-3 at step 0 on a loss of 7.41, dtrain's 7.4068
     * against torch's 7.4190 there, 0.0415 against 0.0432 at step 2). The
     * ResNet: float32 rounding amplified through 19 batch norms is chaotic
     * (torch's float32 and float64 losses part by 1e-6 by step 2, 7e-5 at
     * step 5, 1.3e-3 at step 6), so two float32 orders of summation cannot
     * be held to each other; step s is compared with the float64 loss
     * instead, within 10 x torch's own float32 drift up to s: as close to
     * the exact run as PyTorch within an order of magnitude. Steps 0-2
     * (drift <= 3e-6) still catch any wrong forward or gradient. resnet18
     * (20 batch norms over 2 images): drift 3e-7 at step 0 and 3e-4 at
     * step 1, where one step on its batch has moved the loss from 7.41 to
     * 3.24; dtrain has been within 2e-7 relative of torch's float32 losses
     * there (5e-6 at step 2, loss 0.042). resnet50: drift 3.4e-6 at step 0,
     * which checks the file's forward pass; its float32 gradients differ
     * from float64 by ~2% already (gen_golden.py), so step 1 (drift 0.019,
     * on a loss of 0.65) checks the backward only to ~10%. */
    const float *ref64 = golden_find(g, "loss64") ? golden_need(g, "loss64", steps) : NULL;
    const float *ref_sum = ref64 ? NULL : golden_need(g, "sum", (size_t)nt);
    const float *ref_sumsq = ref64 ? NULL : golden_need(g, "sumsq", (size_t)nt);
    if (!ref_loss || (!ref64 && (!ref_sum || !ref_sumsq))) return;
    float *x = NULL, *state = NULL; /* (B, C, H, W) batch, (nslots, nparams) optimiser state */
    dt_label *labels = NULL;        /* (B) */
    dt_optim *opt = NULL;
    if (CHECK_OK(dt_alloc_floats(&x, nx, "x")) &&
        CHECK_OK(dt_alloc_bytes((void **)&labels, sizeof *labels * (size_t)batch, "labels")) &&
        CHECK_OK(dt_optim_create_for_net(&opt, &state, &spec->optim, net))) {
        for (int i = 0; i < nt; i++)
            if (t[i].hashed) init_tensor(&t[i], i);
        double worst = 0, spread = 0;
        for (size_t s = 0; s < steps; s++) {
            int have = next_batch(ctx, s, batch, x, labels);
            CHECK(have);
            if (!have) break;
            dt_net_forward(net, x, batch, 1);
            double loss = dt_net_loss(net, labels, batch) / batch;
            dt_net_backward(net, x, batch, NULL, NULL);
            dt_optim_update_net(opt, (float)spec->sched.base_lr, (long)s + 1, net, state, 0, net->nparams);
            double drift_factor = bf16 ? 3 : 10;
            if (ref64 && drift_factor * fabs((double)ref_loss[s] - ref64[s]) > spread)
                spread = drift_factor * fabs((double)ref_loss[s] - ref64[s]);
            CHECK_CLOSE(loss, ref64 && !bf16 ? ref64[s] : ref_loss[s], spread, LOSS_RTOL);
            double rel = fabs(loss - ref_loss[s]) / fabs(ref_loss[s]);
            worst = rel > worst ? rel : worst;
            printf("  %s %s %s step %zu: loss %.7f, torch %.7f", spec->path, name, prec, s, loss,
                   (double)ref_loss[s]);
            if (ref64) printf(" (%s %.7f)", bf16 ? "torch fp32" : "float64", (double)ref64[s]);
            printf("\n");
        }
        printf("  %s %s %s: max rel loss err %.2e\n", spec->path, name, prec, worst);
        if (!ref64) compare_sums(t, nt, ref_sum, ref_sumsq);
    }
    dt_optim_free(opt);
    dt_free(state);
    dt_free(labels);
    dt_free(x);
}

/* cnn_<optimizer>.bin's hyper (optimizer index, lr, decay, batch, momentum,
 * beta1, beta2, eps, trust, exclude_bias_bn) into spec; the batch. */
static int set_hyper(const golden *g, dt_model_spec *spec) {
    const float *h = golden_need(g, "hyper", 10);
    int valid = h && h[0] >= 0 && h[0] < DT_OPT_COUNT && h[3] >= 1 && h[3] <= 1024;
    CHECK(valid);
    if (!valid) return 0;
    dt_optim_cfg *o = &spec->optim;
    o->kind = (dt_optim_kind)(int)h[0];
    spec->sched.base_lr = h[1];
    o->decay = h[2];
    o->momentum = h[4];
    o->beta1 = h[5];
    o->beta2 = h[6];
    o->eps = h[7];
    o->trust = h[8];
    o->exclude = (int)h[9];
    return (int)h[3];
}

/* The Fashion-MNIST training files into images and labels (600 bytes
 * each); 0, with "<what>: skipped" printed, when they are not installed. */
static int fmnist_train_files(char *images, char *labels, const char *what) {
    const char *dir = dt_dataset_default_dir(DT_DATASET_FASHION_MNIST);
    snprintf(images, 600, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(labels, 600, "%s/train-labels-idx1-ubyte.gz", dir);
    if (access(images, R_OK) == 0 && access(labels, R_OK) == 0) return 1;
    printf("  %s: skipped, %s not found\n", what, images);
    return 0;
}

/* The precision of a case: bf16 for the cases named *_bf16 (the fp32
 * case's run against torch.autocast's losses), else fp32. 0, with the
 * case's skip printed, when this CPU has no bf16. */
static int case_precision(const char *case_name, dt_precision *p) {
    size_t n = strlen(case_name);
    *p = n > 5 && strcmp(case_name + n - 5, "_bf16") == 0 ? DT_PRECISION_BF16 : DT_PRECISION_FP32;
    if (*p == DT_PRECISION_FP32 || dt_precision_check(DT_PRECISION_BF16) == DT_OK) return 1;
    printf("  %s: skipped: %s\n", case_name, dt_last_error());
    return 0;
}

static void cnn_golden(const char *case_name) {
    char images[600], labels[600];
    dt_precision prec;
    if (!fmnist_train_files(images, labels, "cnn") || !case_precision(case_name, &prec)) return;
    golden g;
    if (!golden_load(&g, case_name)) return;
    int is_sgd = strcmp(case_name, "cnn_sgd") == 0 || strcmp(case_name, "cnn_sgd_bf16") == 0;
    dt_model_spec *spec = NULL; /* ~125 KB: on the heap */
    dt_net *net = NULL;
    dt_dataset *ds = NULL;
    int batch = 0;
    if (CHECK_OK(dt_alloc_bytes((void **)&spec, sizeof *spec, "model spec")) &&
        CHECK_OK(dt_model_parse_file(spec, dt_test_src_path("examples/cnn.cfg"))) &&
        (batch = is_sgd ? check_hyper(&g, spec) : set_hyper(&g, spec)) > 0 &&
        (spec->precision = prec, 1) && CHECK_OK(dt_net_create(&net, spec, batch, 1)) &&
        CHECK_OK(dt_dataset_load_idx(&ds, images, labels)))
        train_and_compare(net, spec, fmnist_batch, ds, &g, batch);
    dt_dataset_free(ds);
    dt_net_free(net);
    dt_free(spec);
    golden_free(&g);
}

/* examples/resnet20_fm.cfg against torch_ref_models' resnet20_fm: 10 SGD
 * steps at the golden's rate (0.001, constant) and the file's momentum and
 * decay, batch norm with each batch's statistics; case_name
 * resnet20_fm_sgd, or resnet20_fm_sgd_bf16 for bf16 against autocast. */
static void resnet_golden(const char *case_name) {
    char images[600], labels[600];
    dt_precision prec;
    if (!fmnist_train_files(images, labels, "resnet20_fm") || !case_precision(case_name, &prec)) return;
    golden g;
    if (!golden_load(&g, case_name)) return;
    dt_model_spec *spec = NULL;
    dt_net *net = NULL;
    dt_dataset *ds = NULL;
    const float *h = golden_need(&g, "hyper", 4);
    if (h && CHECK_OK(dt_alloc_bytes((void **)&spec, sizeof *spec, "model spec")) &&
        CHECK_OK(dt_model_parse_file(spec, dt_test_src_path("examples/resnet20_fm.cfg"))) &&
        CHECK_CLOSE(spec->optim.momentum, h[1], 0, 1e-6) & CHECK_CLOSE(spec->optim.decay, h[2], 0, 1e-6) &&
        (spec->precision = prec, 1) && CHECK_OK(dt_net_create(&net, spec, (int)h[3], 1)) &&
        CHECK_OK(dt_dataset_load_idx(&ds, images, labels))) {
        spec->sched.base_lr = h[0];
        train_and_compare(net, spec, fmnist_batch, ds, &g, (int)h[3]);
    }
    dt_dataset_free(ds);
    dt_net_free(net);
    dt_free(spec);
    golden_free(&g);
}

/* The batch of the ImageNet-sized cases, imagenet_batch() in gen_golden.py:
 * value i of the (B, 3, 224, 224) batch is (dt_hash64(2^40 + i) >> 40) / 2^24
 * (exact in float32, in [0, 1)), label b is (dt_hash64(2^41 + b) >> 40) mod
 * 1000; the same batch every step. ctx: the net, which must take 3x224x224
 * and have 1000 classes. */
static int imagenet_batch(const void *ctx, size_t s, int batch, float *x, dt_label *labels) {
    const dt_net *net = ctx;
    (void)s;
    if (net->input.c != 3 || net->input.h != 224 || net->input.w != 224 || net->classes != 1000) return 0;
    size_t nx = (size_t)batch * 3 * 224 * 224;
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)(dt_hash64(((uint64_t)1 << 40) + i) >> 40) * (1.0f / 16777216.0f);
    for (int b = 0; b < batch; b++)
        labels[b] = (dt_label)((dt_hash64(((uint64_t)1 << 41) + (uint64_t)b) >> 40) % 1000);
    return 1;
}

/* examples/<model>.cfg against torchvision's <model> (<model>_sgd.bin): the
 * golden's SGD steps on imagenet_batch() with the file's learning rate,
 * momentum, decay and exclude_bias_bn, which must be the golden's (hyper =
 * lr, momentum, decay, batch, exclude_bias_bn); the file's warmup starts at
 * factor 1 and its milestones are epochs away, so these steps run at the
 * file's rate. The tolerance is resnet20_fm's (see train_and_compare).
 * suffix "" or "_bf16" (bf16 against autocast, <model>_sgd_bf16.bin). */
static void imagenet_golden(const char *model, const char *suffix) {
    char case_name[64], path[64];
    snprintf(case_name, sizeof case_name, "%s_sgd%s", model, suffix);
    snprintf(path, sizeof path, "examples/%s.cfg", model);
    dt_precision prec;
    if (!case_precision(case_name, &prec)) return;
    golden g;
    if (!golden_load(&g, case_name)) return;
    dt_model_spec *spec = NULL;
    dt_net *net = NULL;
    const float *h = golden_need(&g, "hyper", 5);
    int batch = h && h[3] >= 1 && h[3] <= 64 ? (int)h[3] : 0;
    if (h) CHECK(batch > 0);
    if (batch && CHECK_OK(dt_alloc_bytes((void **)&spec, sizeof *spec, "model spec")) &&
        CHECK_OK(dt_model_parse_file(spec, dt_test_src_path(path)))) {
        int ok = CHECK_CLOSE(spec->sched.base_lr, h[0], 0, 1e-6) &
                 CHECK_CLOSE(spec->optim.momentum, h[1], 0, 1e-6) & CHECK_CLOSE(spec->optim.decay, h[2], 0, 1e-6) &
                 CHECK_CLOSE(spec->optim.exclude, h[4], 0, 0);
        ok = ok && spec->optim.kind == DT_OPT_SGD && !spec->optim.nesterov &&
             (spec->sched.warmup_epochs == 0 || spec->sched.warmup_start_factor == 1);
        CHECK(ok);
        spec->precision = prec;
        if (ok && CHECK_OK(dt_net_create(&net, spec, batch, 1)))
            train_and_compare(net, spec, imagenet_batch, net, &g, batch);
    }
    dt_net_free(net);
    dt_free(spec);
    golden_free(&g);
}

int main(void) {
    printf("per-layer goldens (atol %g, rtol %g):\n", LAYER_ATOL, LAYER_RTOL);
    for (size_t i = 0; i < sizeof layer_cases / sizeof layer_cases[0]; i++)
        layer_golden(&layer_cases[i]);
    printf("whole model (examples/cnn.cfg from identical weights; torch.optim SGD, Adam, AdamW, and LARS, LAMB "
           "as the papers' formulas):\n");
    const char *cases[] = {"cnn_sgd", "cnn_sgd_bf16", "cnn_adam", "cnn_adamw", "cnn_lars", "cnn_lamb"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) cnn_golden(cases[i]);
    printf("ResNet-20 (examples/resnet20_fm.cfg from identical weights; torch.optim SGD):\n");
    resnet_golden("resnet20_fm_sgd");
    resnet_golden("resnet20_fm_sgd_bf16");
    printf("ImageNet-sized ResNets (examples/resnet18.cfg and resnet50.cfg against torchvision's, from identical "
           "weights; torch.optim SGD):\n");
    imagenet_golden("resnet18", "");
    imagenet_golden("resnet18", "_bf16");
    imagenet_golden("resnet50", "");
    return dt_test_finish("test_golden");
}

#include "dtrain/net.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/mem.h"
#include "dtrain/timer.h"

/* FNV-1a over the words that define the architecture. */
static uint64_t fnv_mix(uint64_t h, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static uint64_t shape_hash(const dt_net *net) {
    uint64_t h = 0xcbf29ce484222325ULL;
    h = fnv_mix(h, (uint64_t)net->input.c << 40 | (uint64_t)net->input.h << 20 | (uint64_t)net->input.w);
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        h = fnv_mix(h, (uint64_t)l->spec.kind);
        h = fnv_mix(h, (uint64_t)l->out.c << 40 | (uint64_t)l->out.h << 20 | (uint64_t)l->out.w);
        h = fnv_mix(h, l->nw);
        h = fnv_mix(h, l->nb);
        h = fnv_mix(h, l->nstate);
    }
    return h;
}

/* Sizes of everything the net allocates, computed before allocating. */
typedef struct {
    size_t acts, max_act, saved, ws;
} net_sizes;

/* *acc += a * b, or 0 if that overflows size_t. */
static int add_product(size_t *acc, size_t a, size_t b) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    if (SIZE_MAX - *acc < a * b) return 0;
    *acc += a * b;
    return 1;
}

/* net->bytes: every float dt_net_create allocates (see dt_net_bytes). */
static int total_bytes(dt_net *net, const net_sizes *sz) {
    size_t floats = 0, batch = (size_t)net->max_batch;
    return add_product(&floats, net->nparams, 3) && add_product(&floats, net->nstate, 1) &&
           add_product(&floats, sz->ws, 1) && add_product(&floats, sz->acts, 1) &&
           add_product(&floats, sz->saved, 1) && add_product(&floats, sz->max_act, 2 * batch) &&
           add_product(&net->bytes, floats, sizeof(float));
}

/* Shape inference: every layer's setup and the sizes of the blocks, each sum
 * overflow-checked, so an absurd model is refused here, not when allocating. */
static dt_status setup_layers(dt_net *net, const dt_model_spec *spec, net_sizes *sz) {
    dt_shape in = spec->input;
    size_t batch = (size_t)net->max_batch;
    memset(sz, 0, sizeof *sz);
    sz->max_act = dt_shape_size(in);
    net->param_offset[0] = 0;
    net->nstate = 0;
    for (int i = 0; i < net->nlayers; i++) {
        dt_layer *l = &net->layers[i];
        l->spec = spec->layers[i];
        l->ops = dt_layer_ops_of(l->spec.kind);
        l->in = in;
        dt_status s = l->ops->setup(l);
        if (s != DT_OK) {
            /* Layers say "line N: ..."; make it "FILE:N: ..." like the parser. */
            char msg[512];
            const char *m = dt_last_error();
            if (strncmp(m, "line ", 5) == 0) m += 5;
            snprintf(msg, sizeof msg, "%s", m);
            return dt_fail(s, "%s:%s", spec->path, msg);
        }
        net->param_offset[i + 1] = net->param_offset[i];
        size_t ws = l->ops->workspace_floats(l, net->max_batch);
        if (!add_product(&net->param_offset[i + 1], l->nw, 1) ||
            !add_product(&net->param_offset[i + 1], l->nb, 1) ||
            !add_product(&net->nstate, l->nstate, 1) ||
            !add_product(&sz->acts, dt_shape_size(l->out), batch) ||
            !add_product(&sz->saved, l->ops->saved_floats(l, net->max_batch), 1))
            return dt_fail(DT_ERR_NOMEM, "%s:%d: layer sizes overflow", spec->path, l->spec.line);
        if (dt_shape_size(l->out) > sz->max_act) sz->max_act = dt_shape_size(l->out);
        if (ws > sz->ws) sz->ws = ws;
        in = l->out;
    }
    if (net->nlayers < 2 || net->layers[net->nlayers - 1].spec.kind != DT_LAYER_SOFTMAX)
        return dt_fail(DT_ERR_CONFIG, "%s: the model needs at least one layer before a final [softmax]",
                       spec->path);
    net->nparams = net->param_offset[net->nlayers];
    net->classes = (int)dt_shape_size(in);
    net->nws = sz->ws;
    if (!total_bytes(net, sz))
        return dt_fail(DT_ERR_NOMEM, "%s: the model's memory at batch %d overflows 64 bits",
                       spec->path, net->max_batch);
    return DT_OK;
}

size_t dt_net_bytes(const dt_net *net) { return net->bytes; }

/* Refuse a net that cannot fit in this machine's memory, with the estimate. */
static dt_status check_fits(const dt_net *net, const char *path) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return DT_OK;
    double need = (double)net->bytes, have = (double)pages * (double)page;
    if (need > 0.9 * have)
        return dt_fail(DT_ERR_NOMEM,
                       "%s: the model needs about %.1f GiB at batch %d (parameters, gradients, "
                       "optimiser state, activations, saved values, workspace), this machine "
                       "has %.1f GiB",
                       path, need / (1 << 30), net->max_batch, have / (1 << 30));
    return DT_OK;
}

/* Every layer's w, b, dw, db: views into the net's current blocks. */
static void bind_views(dt_net *net) {
    for (int i = 0; i < net->nlayers; i++) {
        dt_layer *l = &net->layers[i];
        l->w = net->params + net->param_offset[i];
        l->b = l->w + l->nw;
        l->dw = net->grads + net->param_offset[i];
        l->db = l->dw + l->nw;
    }
}

static dt_status allocate(dt_net *net, const net_sizes *sz) {
    float *acts, *dbuf, *saved;
    size_t dsize;
    DT_TRY(dt_alloc_floats(&net->own_params, net->nparams, "parameters"));
    DT_TRY(dt_alloc_floats(&net->own_grads, net->nparams, "gradients"));
    DT_TRY(dt_alloc_floats(&net->state, net->nstate, "layer state"));
    DT_TRY(dt_alloc_floats(&net->ws, sz->ws, "workspace"));
    DT_TRY(dt_alloc_floats(&acts, sz->acts, "activations"));
    net->blocks[0] = acts;
    DT_TRY(dt_mul_size(&dsize, sz->max_act, (size_t)net->max_batch, "gradient buffers"));
    DT_TRY(dt_alloc_floats(&dbuf, 2 * dsize, "gradient buffers"));
    net->blocks[1] = dbuf;
    DT_TRY(dt_alloc_floats(&saved, sz->saved, "saved values"));
    net->blocks[2] = saved;
    DT_TRY(dt_alloc_bytes((void **)&net->act, sizeof(float *) * (size_t)net->nlayers, "layers"));
    net->blocks[3] = net->act;
    net->dbuf[0] = dbuf;
    net->dbuf[1] = dbuf + dsize;

    size_t state_off = 0;
    for (int i = 0; i < net->nlayers; i++) {
        dt_layer *l = &net->layers[i];
        l->state = net->state + state_off;
        state_off += l->nstate;
        l->saved = saved;
        saved += l->ops->saved_floats(l, net->max_batch);
        net->act[i] = acts;
        acts += dt_shape_size(l->out) * (size_t)net->max_batch;
    }
    net->params = net->own_params;
    net->grads = net->own_grads;
    bind_views(net);
    return DT_OK;
}

void dt_net_bind_grads(dt_net *net, float *grads) {
    dt_free(net->own_grads);
    net->own_grads = NULL;
    net->grads = grads;
    bind_views(net);
}

void dt_net_bind_blocks(dt_net *net, float *params, float *grads) {
    dt_free(net->own_params);
    net->own_params = NULL;
    net->params = params;
    dt_net_bind_grads(net, grads);
}

/* A net with its layers set up (shapes, sizes, net->bytes) but none of the
 * big blocks allocated; *sz gets the block sizes. */
static dt_status plan(dt_net **out, const dt_model_spec *spec, int max_batch, net_sizes *sz) {
    *out = NULL;
    if (max_batch < 1) return dt_fail(DT_ERR_USAGE, "batch size must be at least 1");
    dt_net *net;
    DT_TRY(dt_alloc_bytes((void **)&net, sizeof *net, "net"));
    net->nlayers = spec->nlayers;
    net->input = spec->input;
    net->max_batch = max_batch;
    dt_status s = dt_alloc_bytes((void **)&net->layers, sizeof(dt_layer) * (size_t)spec->nlayers + 1, "layers");
    if (s == DT_OK)
        s = dt_alloc_bytes((void **)&net->param_offset, sizeof(size_t) * ((size_t)spec->nlayers + 1),
                           "layers");
    if (s == DT_OK) s = setup_layers(net, spec, sz);
    if (s != DT_OK) {
        dt_net_free(net);
        return s;
    }
    *out = net;
    return DT_OK;
}

dt_status dt_net_estimate(size_t *bytes, const dt_model_spec *spec, int max_batch) {
    *bytes = 0;
    dt_net *net;
    net_sizes sz;
    DT_TRY(plan(&net, spec, max_batch, &sz));
    *bytes = net->bytes;
    dt_net_free(net);
    return DT_OK;
}

dt_status dt_net_create(dt_net **out, const dt_model_spec *spec, int max_batch, uint64_t seed) {
    *out = NULL;
    dt_net *net;
    net_sizes sz;
    DT_TRY(plan(&net, spec, max_batch, &sz));
    dt_status s = check_fits(net, spec->path);
    if (s == DT_OK) s = allocate(net, &sz);
    if (s != DT_OK) {
        dt_net_free(net);
        return s;
    }
    for (int i = 0; i < net->nlayers; i++) {
        dt_layer *l = &net->layers[i];
        dt_rng rng = dt_rng_seed(dt_hash3(seed, (uint64_t)i, 0x1417));
        l->seed = dt_hash3(seed, (uint64_t)i, 0xd209);
        l->ops->init(l, &rng);
    }
    net->shape_hash = shape_hash(net);
    *out = net;
    return DT_OK;
}

void dt_net_free(dt_net *net) {
    if (!net) return;
    dt_free(net->own_params);
    dt_free(net->own_grads);
    dt_free(net->state);
    dt_free(net->ws);
    for (int i = 0; i < 4; i++) dt_free(net->blocks[i]);
    for (int i = 0; net->layers && i < net->nlayers; i++)
        if (net->layers[i].ops && net->layers[i].ops->destroy)
            net->layers[i].ops->destroy(&net->layers[i]);
    dt_free(net->layers);
    dt_free(net->param_offset);
    dt_free(net);
}

/* "fwd 3 convolutional" / "bwd 4 relu" on the trainer's track, from t0 to now. */
static void layer_span(const dt_net *net, int i, dt_tl_cat cat, double t0) {
    const dt_layer *l = &net->layers[i];
    const char *kind = l->spec.kind == DT_LAYER_ACT ? dt_activation_name(l->spec.act) : l->ops->name;
    char name[DT_TL_NAME_MAX];
    snprintf(name, sizeof name, "%s %d %s", cat == DT_TL_CAT_FORWARD ? "fwd" : "bwd", i, kind);
    dt_timeline_span(net->timeline, DT_TL_MAIN, cat, name, t0, dt_now(), NULL, 0);
}

/* Layer i's forward pass; its input is x for the first layer. */
static void forward_layer(dt_net *net, int i, const float *x, int batch, int train) {
    dt_layer *l = &net->layers[i];
    l->step = net->step;
    l->ops->forward(l, net->act[i], i > 0 ? net->act[i - 1] : x, batch, train, net->ws);
}

const float *dt_net_forward(dt_net *net, const float *x, int batch, int train) {
    DT_ASSERT(batch >= 1 && batch <= net->max_batch);
    /* Training passes only: evaluation is one span of the trainer's. */
    int traced = net->timeline && train;
    for (int i = 0; i < net->nlayers; i++) {
        double t0 = traced ? dt_now() : 0;
        forward_layer(net, i, x, batch, train);
        if (traced) layer_span(net, i, DT_TL_CAT_FORWARD, t0);
    }
    if (train) net->step++;
    return net->act[net->nlayers - 1];
}

double dt_net_loss(dt_net *net, const uint8_t *labels, int batch) {
    /* The softmax layer's input is the logits (the net always has a layer
     * before it: the parser requires one). */
    return dt_softmax_xent_loss(net->dbuf[0], net->act[net->nlayers - 2], net->act[net->nlayers - 1],
                                labels, batch, net->classes);
}

/* Layer i's backward pass. The softmax layer's gradient is folded into
 * dt_net_loss (dlogits in dbuf[0]), so backward starts at the layer below
 * it, and layer i reads its output gradient from dbuf[(nlayers - 2 - i) % 2]
 * and writes its input gradient into the other buffer. */
static void backward_layer(dt_net *net, int i, const float *x, int batch) {
    dt_layer *l = &net->layers[i];
    int cur = (net->nlayers - 2 - i) % 2;
    const float *in = i > 0 ? net->act[i - 1] : x;
    float *din = i > 0 ? net->dbuf[1 - cur] : NULL;
    l->ops->backward(l, din, net->dbuf[cur], in, net->act[i], batch, net->ws);
}

void dt_net_backward(dt_net *net, const float *x, int batch, dt_grad_ready_fn ready, void *ctx) {
    for (int i = net->nlayers - 2; i >= 0; i--) {
        double t0 = net->timeline ? dt_now() : 0;
        backward_layer(net, i, x, batch);
        if (net->timeline) layer_span(net, i, DT_TL_CAT_BACKWARD, t0);
        if (ready && net->layers[i].nw + net->layers[i].nb > 0) {
            net->bwd_in = i > 0 ? net->act[i - 1] : x;
            net->bwd_dout = net->dbuf[(net->nlayers - 2 - i) % 2];
            net->bwd_batch = batch;
            ready(ctx, i);
        }
    }
}

dt_status dt_net_profile(dt_net *net, const float *x, const uint8_t *labels, int batch, int reps,
                         double *fwd_s, double *bwd_s) {
    if (batch < 1 || batch > net->max_batch || reps < 1)
        return dt_fail(DT_ERR_USAGE, "profile: batch %d (max %d) and reps %d must be positive", batch,
                       net->max_batch, reps);
    int L = net->nlayers;
    double *t;
    size_t n;
    DT_TRY(dt_mul_size(&n, 2 * (size_t)L, (size_t)reps, "profile timings"));
    DT_TRY(dt_alloc_bytes((void **)&t, n * sizeof(double), "profile timings"));
    /* t[(2 * i + 0/1) * reps + r]: forward/backward of layer i in rep r. */
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < L; i++) {
            double t0 = dt_now();
            forward_layer(net, i, x, batch, 1);
            t[(size_t)(2 * i) * (size_t)reps + (size_t)r] = dt_now() - t0;
        }
        net->step++;
        /* The loss (softmax cross-entropy gradient) counts as the softmax
         * layer's backward: it is that layer's share of the step. */
        double t0 = dt_now();
        dt_net_loss(net, labels, batch);
        t[(size_t)(2 * (L - 1) + 1) * (size_t)reps + (size_t)r] = dt_now() - t0;
        for (int i = L - 2; i >= 0; i--) {
            t0 = dt_now();
            backward_layer(net, i, x, batch);
            t[(size_t)(2 * i + 1) * (size_t)reps + (size_t)r] = dt_now() - t0;
        }
    }
    for (int k = 0; k < 2 * L; k++) {
        double med = dt_median(t + (size_t)k * (size_t)reps, reps);
        if (k % 2)
            bwd_s[k / 2] = med;
        else
            fwd_s[k / 2] = med;
    }
    dt_free(t);
    return DT_OK;
}

int dt_net_count_correct(const dt_net *net, const uint8_t *labels, int batch) {
    const float *p = net->act[net->nlayers - 1];
    int correct = 0;
    for (int b = 0; b < batch; b++) {
        const float *row = p + (size_t)b * (size_t)net->classes;
        int best = 0;
        for (int c = 1; c < net->classes; c++)
            if (row[c] > row[best]) best = c;
        correct += best == labels[b];
    }
    return correct;
}

uint64_t dt_net_flops(const dt_net *net) {
    uint64_t f = 0;
    for (int i = 0; i < net->nlayers; i++) f += net->layers[i].ops->flops(&net->layers[i]);
    return f;
}

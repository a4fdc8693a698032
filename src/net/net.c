#include "dtrain/net.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/mem.h"
#include "dtrain/softmax_tree.h"
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
        /* Edges other than "the previous layer", so a chain hashes as before
         * graphs existed (its checkpoints still load, unless batch_normalize=1
         * dropped a bias: another architecture). */
        if (l->ninputs != 1 || l->spec.inputs[0] != i - 1)
            for (int k = 0; k < l->ninputs; k++) h = fnv_mix(h, (uint64_t)(l->spec.inputs[k] + 2) << 32 | (uint64_t)k);
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
           add_product(&floats, sz->saved, 1) &&
           add_product(&floats, sz->max_act, (size_t)net->ngbuf * batch) &&
           add_product(&net->bytes, floats, sizeof(float));
}

/* Gradient buffers, as a stack of free slot numbers. */
typedef struct {
    int free[2 * DT_MAX_LAYERS + 2];
    int nfree, nslots;
} slot_pool;

static int slot_take(slot_pool *p) { return p->nfree ? p->free[--p->nfree] : p->nslots++; }
static void slot_give(slot_pool *p, int s) { p->free[p->nfree++] = s; }

/* net->groute and ngbuf: backward's buffers, found by running its order
 * once. A layer's output gradient takes a buffer when its last consumer (the
 * first to run backward) writes it and frees it after the layer's own
 * backward; later consumers write into a temporary buffer that is added in.
 * An output nobody reads (except the softmax's) would get no gradient: the
 * model is refused. */
static dt_status plan_gradients(dt_net *net, const dt_model_spec *spec) {
    slot_pool pool = {.nfree = 0, .nslots = 0};
    int L = net->nlayers;
    for (int i = 0; i < L; i++) net->groute[i].out = -1;
    net->groute[net->layers[L - 1].spec.inputs[0]].out = slot_take(&pool); /* the loss's dlogits */
    for (int i = L - 2; i >= 0; i--) {
        const dt_layer *l = &net->layers[i];
        dt_grad_route *r = &net->groute[i];
        if (r->out < 0)
            return dt_fail(DT_ERR_CONFIG, "%s:%d: [%s] output is read by no later layer", spec->path,
                           l->spec.line, l->ops->name);
        if (l->folded) { /* its input's gradient is its own: the fusing layer masks it */
            r->add[0] = 0;
            r->in[0] = net->groute[l->spec.inputs[0]].out = r->out;
            continue;
        }
        for (int k = 0; k < l->ninputs; k++) {
            int from = l->spec.inputs[k];
            dt_grad_route *src = from >= 0 ? &net->groute[from] : NULL;
            r->add[k] = src && src->out >= 0;
            if (!src)
                r->in[k] = -1;
            else if (r->add[k])
                r->in[k] = slot_take(&pool);
            else
                r->in[k] = src->out = slot_take(&pool);
        }
        slot_give(&pool, r->out);
        for (int k = 0; k < l->ninputs; k++)
            if (r->add[k]) slot_give(&pool, r->in[k]);
    }
    net->ngbuf = pool.nslots;
    return DT_OK;
}

/* Layers that read layer i's output (the loss reads the logits: counted). */
static int readers_of(const dt_net *net, int i) {
    int n = 0;
    for (int j = i + 1; j < net->nlayers; j++)
        for (int k = 0; k < net->layers[j].ninputs; k++) n += net->layers[j].spec.inputs[k] == i;
    return n;
}

/* A ReLU [activation] whose only input is a layer that fuses ReLUs (batch
 * norm, shortcut), reading only layers, and that is that layer's only
 * reader, is folded into it: ResNets' conv -> BN -> ReLU and BN -> shortcut
 * -> ReLU. Returns how many floats per sample folding saves (the ReLUs'
 * outputs, which alias their inputs'). */
static size_t plan_fusion(dt_net *net) {
    size_t saved = 0;
    for (int i = 1; i < net->nlayers; i++) {
        dt_layer *a = &net->layers[i], *l = &net->layers[a->spec.inputs[0] >= 0 ? a->spec.inputs[0] : i];
        if (!(a->ops->caps & DT_LAYER_CAP_FOLDS) || a->spec.act.fn != DT_ACT_RELU || a->spec.inputs[0] < 0 ||
            !l->ops->fuses_relu || l->relu_out || readers_of(net, a->spec.inputs[0]) != 1)
            continue;
        int from_layers = 1;
        for (int k = 0; k < l->ninputs; k++) from_layers &= l->spec.inputs[k] >= 0;
        if (!from_layers) continue;
        l->relu_out = a->folded = 1;
        saved += dt_shape_size(a->out);
    }
    return saved;
}

static dt_layout_rule layout_rule(const dt_layer *l) {
    return l->ops->layouts ? l->ops->layouts(l) : DT_LAYOUTS_NCHW;
}

static int layout_root(int *parent, int i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

/* Each layer's in_layout and out_layout. Layers that FOLLOW tie their
 * inputs' and output's layouts together; each group of activations tied
 * this way is in the blocked layout `native` (of k channels a block) when
 * every one has a multiple of k channels, none is the data, every producer
 * can write it (a FOLLOW member or a convolution) and every reader can read
 * it; else NCHW. In a ResNet that makes every activation between the stem
 * and the global pool blocked (the final softmax reads NCHW). NCHW
 * everywhere when `native` is. */
/* parent[]: the union-find forest of the layout groups (FOLLOW ties). */
static void layout_groups(const dt_net *net, int *parent) {
    int L = net->nlayers;
    for (int i = 0; i < L; i++) parent[i] = i;
    for (int i = 0; i < L; i++)
        if (layout_rule(&net->layers[i]) == DT_LAYOUTS_FOLLOW)
            for (int k = 0; k < net->layers[i].ninputs; k++)
                if (net->layers[i].spec.inputs[k] >= 0)
                    parent[layout_root(parent, net->layers[i].spec.inputs[k])] = layout_root(parent, i);
}

static void plan_layouts(dt_net *net, dt_layout native) {
    int L = net->nlayers, parent[DT_MAX_LAYERS];
    unsigned char blocked[DT_MAX_LAYERS];
    layout_groups(net, parent);
    for (int i = 0; i < L; i++) blocked[i] = 1;
    for (int i = 0; i < L; i++) {
        const dt_layer *l = &net->layers[i];
        dt_layout_rule rule = layout_rule(l);
        int writes_nchw = rule == DT_LAYOUTS_NCHW || rule == DT_LAYOUTS_READS_ANY;
        if (native == DT_LAYOUT_NCHW || writes_nchw || l->out.c % dt_layout_block(native) != 0)
            blocked[layout_root(parent, i)] = 0;
        for (int k = 0; k < l->ninputs; k++) {
            int from = l->spec.inputs[k];
            if (from < 0 && rule == DT_LAYOUTS_FOLLOW) blocked[layout_root(parent, i)] = 0;
            if (from >= 0 && rule == DT_LAYOUTS_NCHW) blocked[layout_root(parent, from)] = 0;
        }
    }
    blocked[layout_root(parent, L - 1)] = 0; /* the net's output (probabilities or features) is read as NCHW */
    for (int i = 0; i < L; i++) {
        dt_layer *l = &net->layers[i];
        l->out_layout = blocked[layout_root(parent, i)] ? native : DT_LAYOUT_NCHW;
        int from = l->spec.inputs[0];
        l->in_layout = from >= 0 && blocked[layout_root(parent, from)] ? native : DT_LAYOUT_NCHW;
    }
}

/* Layer i's inputs: the spec's (or the previous layer), each an earlier
 * layer or the data (-1), their shapes into l->ins. A kind with one input
 * (forward, not forward_n) gets exactly one. */
static dt_status resolve_inputs(dt_net *net, const dt_model_spec *spec, int i) {
    dt_layer *l = &net->layers[i];
    if (l->spec.ninputs == 0) {
        l->spec.ninputs = 1;
        l->spec.inputs[0] = i - 1;
    }
    l->ninputs = l->spec.ninputs;
    if (l->ninputs > DT_LAYER_MAX_INPUTS || (!l->ops->forward_n && l->ninputs != 1))
        return dt_fail(DT_ERR_CONFIG, "%s:%d: [%s] takes %s input, got %d", spec->path, l->spec.line,
                       l->ops->name, l->ops->forward_n ? "at most 8" : "one", l->ninputs);
    for (int k = 0; k < l->ninputs; k++) {
        int from = l->spec.inputs[k];
        if (from < -1 || from >= i)
            return dt_fail(DT_ERR_CONFIG,
                           "%s:%d: [%s] reads layer %d, which is not an earlier layer (this is "
                           "layer %d of the built net)",
                           spec->path, l->spec.line, l->ops->name, from, i);
        l->ins[k] = from < 0 ? spec->input : net->layers[from].out;
    }
    l->in = l->ins[0];
    return DT_OK;
}

/* Shape inference: every layer's setup and the sizes of the blocks, each sum
 * overflow-checked, so an absurd model is refused here, not when allocating. */
static dt_status setup_layers(dt_net *net, const dt_model_spec *spec, net_sizes *sz) {
    size_t batch = (size_t)net->max_batch;
    memset(sz, 0, sizeof *sz);
    sz->max_act = dt_shape_size(spec->input);
    net->param_offset[0] = 0;
    net->nstate = 0;
    for (int i = 0; i < net->nlayers; i++) {
        dt_layer *l = &net->layers[i];
        l->spec = spec->layers[i];
        l->winograd = spec->winograd;
        l->ops = dt_layer_ops_of(l->spec.kind);
        DT_TRY(resolve_inputs(net, spec, i));
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
        if (!add_product(&net->param_offset[i + 1], l->nw, 1) ||
            !add_product(&net->param_offset[i + 1], l->nb, 1) ||
            !add_product(&net->nstate, l->nstate, 1) ||
            !add_product(&sz->acts, dt_shape_size(l->out), batch) ||
            !add_product(&sz->saved, l->ops->saved_floats(l, net->max_batch), 1))
            return dt_fail(DT_ERR_NOMEM, "%s:%d: layer sizes overflow", spec->path, l->spec.line);
        if (dt_shape_size(l->out) > sz->max_act) sz->max_act = dt_shape_size(l->out);
    }
    /* The last layer is a [softmax] (the loss) after at least one layer, or that of a feature extractor. */
    if (net->nlayers < 1) return dt_fail(DT_ERR_CONFIG, "%s: the model has no layers", spec->path);
    const dt_layer *last = &net->layers[net->nlayers - 1];
    int has_loss = last->spec.kind == DT_LAYER_SOFTMAX;
    if (has_loss && last->spec.inputs[0] < 0)
        return dt_fail(DT_ERR_CONFIG, "%s: the model needs at least one layer before a final [softmax]",
                       spec->path);
    size_t folded = spec->plain_engine ? 0 : plan_fusion(net);
    sz->acts -= folded * batch; /* cannot wrap: each was added above */
    DT_TRY(plan_gradients(net, spec));
    plan_layouts(net, spec->plain_engine ? DT_LAYOUT_NCHW : dt_layout_native());
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        size_t ws = l->ops->workspace_floats(l, net->max_batch); /* may depend on the layouts */
        if (ws > sz->ws) sz->ws = ws;
    }
    net->nparams = net->param_offset[net->nlayers];
    net->classes = has_loss ? (int)dt_shape_size(last->out) : 0;
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
        l->dw = net->caller_wgrad[i] ? NULL : net->grads + net->param_offset[i];
        l->db = net->grads + net->param_offset[i] + l->nw;
    }
}

static dt_status allocate(dt_net *net, const net_sizes *sz) {
    float *acts, *gbuf, *saved;
    size_t dsize, gsize;
    DT_TRY(dt_alloc_floats(&net->own_params, net->nparams, "parameters"));
    DT_TRY(dt_alloc_floats(&net->own_grads, net->nparams, "gradients"));
    DT_TRY(dt_alloc_floats(&net->state, net->nstate, "layer state"));
    DT_TRY(dt_alloc_floats(&net->ws, sz->ws, "workspace"));
    DT_TRY(dt_alloc_floats(&acts, sz->acts, "activations"));
    net->blocks[0] = acts;
    DT_TRY(dt_mul_size(&dsize, sz->max_act, (size_t)net->max_batch, "gradient buffers"));
    DT_TRY(dt_mul_size(&gsize, dsize, (size_t)net->ngbuf, "gradient buffers"));
    DT_TRY(dt_alloc_floats(&gbuf, gsize, "gradient buffers"));
    net->blocks[1] = gbuf;
    DT_TRY(dt_alloc_floats(&saved, sz->saved, "saved values"));
    net->blocks[2] = saved;
    DT_TRY(dt_alloc_bytes((void **)&net->act, sizeof(float *) * (size_t)net->nlayers, "layers"));
    net->blocks[3] = net->act;
    DT_TRY(dt_alloc_bytes((void **)&net->gbuf, sizeof(float *) * (size_t)net->ngbuf, "layers"));
    net->blocks[4] = net->gbuf;
    for (int s = 0; s < net->ngbuf; s++) net->gbuf[s] = gbuf + (size_t)s * dsize;

    size_t state_off = 0;
    for (int i = 0; i < net->nlayers; i++) {
        dt_layer *l = &net->layers[i];
        l->state = net->state + state_off;
        state_off += l->nstate;
        l->saved = saved;
        saved += l->ops->saved_floats(l, net->max_batch);
        if (l->folded) { /* the fusing layer writes the ReLU's output */
            net->act[i] = net->act[l->spec.inputs[0]];
            continue;
        }
        net->act[i] = acts;
        acts += dt_shape_size(l->out) * (size_t)net->max_batch;
    }
    net->params = net->own_params;
    net->grads = net->own_grads;
    bind_views(net);
    return DT_OK;
}

dt_status dt_net_leave_weight_grad(dt_net *net, int i) {
    if (i < 0 || i >= net->nlayers)
        return dt_fail(DT_ERR_USAGE, "layer %d is not one of the net's %d layers", i, net->nlayers);
    const dt_layer *l = &net->layers[i];
    if (!l->ops->optional_wgrad)
        return dt_fail(DT_ERR_USAGE, "layer %d ([%s]) always computes its weight gradient", i, l->ops->name);
    net->caller_wgrad[i] = 1;
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

dt_status dt_net_own_blocks(dt_net *net) {
    if (!net->own_params) {
        DT_TRY(dt_alloc_floats(&net->own_params, net->nparams, "parameters"));
        memcpy(net->own_params, net->params, sizeof(float) * net->nparams);
        net->params = net->own_params;
    }
    if (!net->own_grads) {
        DT_TRY(dt_alloc_floats(&net->own_grads, net->nparams, "gradients"));
        net->grads = net->own_grads;
    }
    bind_views(net);
    return DT_OK;
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
    if (s == DT_OK)
        s = dt_alloc_bytes((void **)&net->groute, sizeof(dt_grad_route) * (size_t)spec->nlayers + 1,
                           "layers");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&net->caller_wgrad, (size_t)spec->nlayers + 1, "layers");
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
    if (dt_precision_check(spec->precision) != DT_OK) {
        char why[256]; /* dt_fail writes the buffer dt_last_error reads */
        snprintf(why, sizeof why, "%s", dt_last_error());
        return dt_fail(DT_ERR_CONFIG, "%s: [net] precision: %s", spec->path, why);
    }
    DT_TRY(plan(&net, spec, max_batch, &sz));
    *bytes = net->bytes;
    dt_net_free(net);
    return DT_OK;
}

dt_status dt_net_create(dt_net **out, const dt_model_spec *spec, int max_batch, uint64_t seed) {
    *out = NULL;
    dt_net *net;
    net_sizes sz;
    if (dt_precision_check(spec->precision) != DT_OK) {
        char why[256]; /* dt_fail writes the buffer dt_last_error reads */
        snprintf(why, sizeof why, "%s", dt_last_error());
        return dt_fail(DT_ERR_CONFIG, "%s: [net] precision: %s", spec->path, why);
    }
    DT_TRY(plan(&net, spec, max_batch, &sz));
    dt_status s = check_fits(net, spec->path);
    if (s == DT_OK) s = allocate(net, &sz);
    /* Beside the softmax's own output of the same size, which the estimate counts. */
    if (s == DT_OK && dt_softmax_tree_of(&net->layers[net->nlayers - 1]))
        s = dt_alloc_floats(&net->scores, (size_t)max_batch * (size_t)net->classes, "tree scores");
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
    s = dt_net_set_precision(net, spec->precision); /* checked above: cannot fail */
    if (s != DT_OK) {
        dt_net_free(net);
        return s;
    }
    *out = net;
    return DT_OK;
}

/* Each layer's in_bf16 and out_bf16 for the layers' current precisions: a
 * layout group (plan_layouts) of blocked activations is stored in bf16 when
 * the net's precision is bf16 and every layer writing or reading one of its
 * activations handles bf16 there (ops->bf16_acts). In a ResNet that is
 * every activation from the stem convolution's output to the global pool's
 * input: convolutions, batch norms, folded ReLUs and shortcuts (the
 * gradients of an activation read twice are added in bf16). */
static void plan_bf16(dt_net *net, dt_precision p) {
    int L = net->nlayers, parent[DT_MAX_LAYERS];
    unsigned char ok[DT_MAX_LAYERS];
    layout_groups(net, parent);
    for (int i = 0; i < L; i++) ok[i] = p == DT_PRECISION_BF16;
    for (int i = 0; i < L; i++) {
        const dt_layer *l = &net->layers[i];
        int handles = l->ops->bf16_acts && l->ops->bf16_acts(l);
        if (!handles || l->out_layout == DT_LAYOUT_NCHW) ok[layout_root(parent, i)] = 0;
        for (int k = 0; k < l->ninputs; k++)
            if (l->spec.inputs[k] >= 0 && !handles) ok[layout_root(parent, l->spec.inputs[k])] = 0;
    }
    ok[layout_root(parent, L - 1)] = 0;
    for (int i = 0; i < L; i++) {
        dt_layer *l = &net->layers[i];
        int from = l->spec.inputs[0];
        l->out_bf16 = ok[layout_root(parent, i)];
        l->in_bf16 = from >= 0 && ok[layout_root(parent, from)];
    }
}

dt_status dt_net_set_precision(dt_net *net, dt_precision p) {
    DT_TRY(dt_precision_check(p));
    net->precision = p;
    for (int i = 0; i < net->nlayers; i++)
        net->layers[i].precision = dt_layer_precision(&net->layers[i], p);
    plan_bf16(net, p);
    return DT_OK;
}

void dt_net_free(dt_net *net) {
    if (!net) return;
    dt_free(net->own_params);
    dt_free(net->own_grads);
    dt_free(net->state);
    dt_free(net->ws);
    for (int i = 0; i < 5; i++) dt_free(net->blocks[i]);
    for (int i = 0; net->layers && i < net->nlayers; i++)
        if (net->layers[i].ops && net->layers[i].ops->destroy)
            net->layers[i].ops->destroy(&net->layers[i]);
    dt_free(net->layers);
    dt_free(net->param_offset);
    dt_free(net->groute);
    dt_free(net->caller_wgrad);
    dt_free(net->scores);
    dt_free(net);
}

/* "fwd 3 convolutional" / "bwd 4 relu" on the trainer's track, from t0 to now. */
static void layer_span(const dt_net *net, int i, dt_tl_cat cat, double t0) {
    const dt_layer *l = &net->layers[i];
    const char *kind = l->spec.kind == DT_LAYER_ACT ? dt_activation_name(l->spec.act.fn) : l->ops->name;
    char name[DT_TL_NAME_MAX];
    snprintf(name, sizeof name, "%s %d %s", cat == DT_TL_CAT_FORWARD ? "fwd" : "bwd", i, kind);
    dt_timeline_span(net->timeline, DT_TL_MAIN, cat, name, t0, dt_now(), NULL, 0);
}

const float *dt_net_output(const dt_net *net, int from, const float *x) {
    return from < 0 ? x : net->act[from];
}

/* Layer i's forward pass from its inputs' outputs (x for the data). */
static void forward_layer(dt_net *net, int i, const float *x, int batch, int train) {
    dt_layer *l = &net->layers[i];
    l->step = net->step;
    l->sample_base = net->sample_base;
    if (l->folded) return;
    if (!l->ops->forward_n) {
        l->ops->forward(l, net->act[i], dt_net_output(net, l->spec.inputs[0], x), batch, train, net->ws);
        return;
    }
    const float *in[DT_LAYER_MAX_INPUTS];
    for (int k = 0; k < l->ninputs; k++) in[k] = dt_net_output(net, l->spec.inputs[k], x);
    l->ops->forward_n(l, net->act[i], in, batch);
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
    const dt_softmax_tree *tree = dt_softmax_tree_of(&net->layers[net->nlayers - 1]);
    if (tree) dt_softmax_tree_predict(tree, net->scores, net->act[net->nlayers - 1], batch);
    return net->act[net->nlayers - 1];
}

const float *dt_net_scores(const dt_net *net) {
    return net->scores ? net->scores : net->act[net->nlayers - 1];
}

double dt_net_loss(dt_net *net, const dt_label *labels, int batch) {
    DT_ASSERT(net->classes > 0); /* callers refused a feature extractor (dt_model_check_loss) */
    /* The softmax layer's input is the logits (always a layer: setup_layers
     * requires one); dlogits go to that layer's output-gradient buffer. */
    const dt_layer *head = &net->layers[net->nlayers - 1];
    int logits = head->spec.inputs[0];
    const dt_softmax_tree *tree = dt_softmax_tree_of(head);
    float *dlogits = net->gbuf[net->groute[logits].out], temp = dt_softmax_temperature(&head->spec);
    if (tree) /* Darknet's [cost] type=masked after it: the mask is part of this loss */
        return dt_softmax_tree_loss(tree, dlogits, net->act[logits], net->act[net->nlayers - 1], labels, batch, temp);
    return dt_softmax_xent_loss(dlogits, net->act[logits], net->act[net->nlayers - 1], labels, batch, net->classes,
                                temp);
}

/* Layer i's backward pass, with the buffers net->groute planned. The
 * softmax layer's gradient is folded into dt_net_loss, so backward starts
 * at the layer below it. */
static void backward_layer(dt_net *net, int i, const float *x, int batch) {
    dt_layer *l = &net->layers[i];
    if (l->folded) return;
    const dt_grad_route *r = &net->groute[i];
    float *din[DT_LAYER_MAX_INPUTS];
    for (int k = 0; k < l->ninputs; k++) din[k] = r->in[k] >= 0 ? net->gbuf[r->in[k]] : NULL;
    const float *dout = net->gbuf[r->out];
    if (l->ops->backward_n)
        l->ops->backward_n(l, din, dout, net->act[i], batch);
    else
        l->ops->backward(l, din[0], dout, dt_net_output(net, l->spec.inputs[0], x), net->act[i],
                         batch, net->ws);
    for (int k = 0; k < l->ninputs; k++)
        if (r->add[k])
            dt_layer_add_acts(net->gbuf[net->groute[l->spec.inputs[k]].out], din[k],
                              dt_shape_size(l->ins[k]) * (size_t)batch, net->layers[l->spec.inputs[k]].out_bf16);
}

void dt_net_backward(dt_net *net, const float *x, int batch, dt_grad_ready_fn ready, void *ctx) {
    for (int i = net->nlayers - 2; i >= 0; i--) {
        double t0 = net->timeline ? dt_now() : 0;
        backward_layer(net, i, x, batch);
        if (net->timeline) layer_span(net, i, DT_TL_CAT_BACKWARD, t0);
        if (ready && net->layers[i].nw + net->layers[i].nb > 0) {
            net->bwd_in = dt_net_output(net, net->layers[i].spec.inputs[0], x);
            net->bwd_dout = net->gbuf[net->groute[i].out];
            net->bwd_batch = batch;
            ready(ctx, i);
        }
    }
}

dt_status dt_net_time_step(dt_net *net, const float *x, const dt_label *labels, int batch, double *fwd_s,
                           double *bwd_s) {
    if (batch < 1 || batch > net->max_batch)
        return dt_fail(DT_ERR_USAGE, "profile: batch %d must be in [1, %d]", batch, net->max_batch);
    int L = net->nlayers;
    for (int i = 0; i < L; i++) {
        double t0 = dt_now();
        forward_layer(net, i, x, batch, 1);
        fwd_s[i] = dt_now() - t0;
    }
    net->step++;
    /* The loss (softmax cross-entropy gradient) counts as the softmax
     * layer's backward: it is that layer's share of the step. */
    double t0 = dt_now();
    dt_net_loss(net, labels, batch);
    bwd_s[L - 1] = dt_now() - t0;
    for (int i = L - 2; i >= 0; i--) {
        t0 = dt_now();
        backward_layer(net, i, x, batch);
        bwd_s[i] = dt_now() - t0;
    }
    return DT_OK;
}

int dt_net_count_correct(const dt_net *net, const dt_label *labels, int batch) {
    const float *p = dt_net_scores(net);
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

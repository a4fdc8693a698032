/* The architecture a checkpoint records, and what differs between two
 * (checkpoint.h): a checkpoint of another model names the first layer that
 * differs rather than two hashes. */
#include <stdio.h>
#include <string.h>

#include "dtrain/checkpoint.h"
#include "dtrain/darknet_weights.h"
#include "dtrain/mem.h"
#include "dtrain/net.h"

static void put_shape(uint32_t out[3], dt_shape s) {
    out[0] = (uint32_t)s.c, out[1] = (uint32_t)s.h, out[2] = (uint32_t)s.w;
}

dt_status dt_ckpt_arch_of(dt_ckpt_arch *arch, const dt_net *net) {
    memset(arch, 0, sizeof *arch);
    put_shape(arch->input, net->input);
    void *p;
    DT_TRY(dt_alloc_bytes(&p, (size_t)net->nlayers * sizeof *arch->layers, "checkpoint architecture"));
    arch->layers = p;
    arch->nlayers = net->nlayers;
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        dt_ckpt_layer *c = &arch->layers[i];
        memset(c, 0, sizeof *c);
        c->kind = (uint32_t)l->spec.kind;
        put_shape(c->in, l->in);
        put_shape(c->out, l->out);
        c->nw = l->nw, c->nb = l->nb, c->nstate = l->nstate;
    }
    return DT_OK;
}

void dt_ckpt_arch_free(dt_ckpt_arch *arch) {
    dt_free(arch->layers);
    arch->layers = NULL;
    arch->nlayers = 0;
}

static const char *kind_name(uint32_t kind) {
    const dt_layer_ops *ops = kind < DT_LAYER_KIND_COUNT ? dt_layer_ops_of((dt_layer_kind)kind) : NULL;
    return ops ? ops->name : "an unknown kind";
}

/* "connected 3136 -> 1024x1x1, 3211264 weights + 1024 biases" */
static void describe(char *buf, size_t cap, const dt_ckpt_layer *l) {
    int n = snprintf(buf, cap, "%s %ux%ux%u -> %ux%ux%u", kind_name(l->kind), l->in[0], l->in[1], l->in[2], l->out[0],
                     l->out[1], l->out[2]);
    if (n < 0 || (size_t)n >= cap || (!l->nw && !l->nb && !l->nstate)) return;
    snprintf(buf + n, cap - (size_t)n, ", %llu weights + %llu biases%s", (unsigned long long)l->nw,
             (unsigned long long)l->nb, l->nstate ? " + statistics" : "");
}

static int same_layer(const dt_ckpt_layer *a, const dt_ckpt_layer *b) {
    return a->kind == b->kind && !memcmp(a->in, b->in, sizeof a->in) && !memcmp(a->out, b->out, sizeof a->out) &&
           a->nw == b->nw && a->nb == b->nb && a->nstate == b->nstate;
}

int dt_ckpt_arch_diff(char *buf, size_t cap, const dt_ckpt_arch *file, const dt_ckpt_arch *model) {
    if (memcmp(file->input, model->input, sizeof file->input) != 0) {
        snprintf(buf, cap, "its input is %ux%ux%u, this model's %ux%ux%u", file->input[0], file->input[1],
                 file->input[2], model->input[0], model->input[1], model->input[2]);
        return 1;
    }
    int n = file->nlayers < model->nlayers ? file->nlayers : model->nlayers;
    char a[160], b[160];
    for (int i = 0; i < n; i++) {
        if (same_layer(&file->layers[i], &model->layers[i])) continue;
        describe(a, sizeof a, &file->layers[i]);
        describe(b, sizeof b, &model->layers[i]);
        /* Layers are numbered from 0, as in dtrain info. */
        snprintf(buf, cap, "layer %d is %s in the checkpoint, %s in this model", i, a, b);
        return 1;
    }
    if (file->nlayers == model->nlayers) return 0;
    snprintf(buf, cap, "the checkpoint has %d layers, this model %d (the first %d are alike)", file->nlayers,
             model->nlayers, n);
    return 1;
}

dt_status dt_checkpoint_load_net(const char *path, const dt_net *net, dt_ckpt_meta *meta, dt_ckpt_arrays *a) {
    if (dt_darknet_weights_is(path)) {
        uint64_t seen;
        DT_TRY(dt_darknet_weights_load(path, net, &seen));
        memset(meta, 0, sizeof *meta);
        meta->best_accuracy = -1;
        meta->evaluated_step = -1;
        meta->seen = seen;
        meta->darknet = 1;
        return DT_OK;
    }
    dt_ckpt_arch arch;
    DT_TRY(dt_ckpt_arch_of(&arch, net));
    a->params = net->params, a->nparams = net->nparams;
    a->state = net->state, a->nstate = net->nstate;
    a->arch = &arch;
    dt_status s = dt_checkpoint_load(path, net->shape_hash, meta, a);
    a->arch = NULL;
    dt_ckpt_arch_free(&arch);
    return s;
}

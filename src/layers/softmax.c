/* [softmax]: probabilities over the C = c*h*w values of each sample (the
 * input flattened), out (B, C) = exp((x - max) / T) / sum exp((x - max) / T)
 * with Darknet's temperature T (1 unless temperature= says). With tree=
 * (Darknet's hierarchical softmax) it is one such softmax per group of
 * sibling nodes of the tree, which the layer reads when the net is built
 * and keeps in l->impl (dtrain/softmax_tree.h). It is the last layer and is
 * trained with cross-entropy: dt_softmax_xent_loss (or, with a tree,
 * dt_softmax_tree_loss) gives the gradient with respect to the logits
 * directly, so backward passes its incoming gradient through unchanged (it
 * treats dout as d loss / d logits). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/softmax_tree.h"
#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

/* With tree=, reads the tree into l->impl (freed by softmax_destroy). */
static dt_status softmax_setup(dt_layer *l) {
    const dt_layer_spec *sp = &l->spec;
    if (sp->softmax.tree_nodes && (size_t)sp->softmax.tree_nodes != dt_shape_size(l->in))
        return dt_layer_config_error(l, "tree= has %d nodes, the softmax %zu inputs: they must be equal",
                                     sp->softmax.tree_nodes, dt_shape_size(l->in));
    if (sp->softmax.tree_nodes && !l->impl) {
        dt_softmax_tree *t;
        if (dt_softmax_tree_read(&t, sp->softmax.tree_path) != DT_OK) {
            char why[512]; /* dt_fail writes the buffer dt_last_error reads */
            snprintf(why, sizeof why, "%s", dt_last_error());
            return dt_layer_config_error(l, "tree=: %s", why);
        }
        l->impl = t;
        if (t->n != sp->softmax.tree_nodes)
            return dt_layer_config_error(l, "tree=%s has %d nodes now, %d when the model file was read",
                                         sp->softmax.tree_path, t->n, sp->softmax.tree_nodes);
    }
    return dt_layer_setup_same(l);
}

static void softmax_destroy(dt_layer *l) {
    dt_softmax_tree_free(l->impl);
    l->impl = NULL;
}

const dt_softmax_tree *dt_softmax_tree_of(const dt_layer *l) {
    return l->spec.kind == DT_LAYER_SOFTMAX ? l->impl : NULL;
}

static uint64_t softmax_flops(const dt_layer *l) { return 3 * (uint64_t)dt_shape_size(l->in); }

/* out (B, C) <- softmax of in (B, C) per row, or per group of the tree's nodes. */
static void softmax_forward(dt_layer *l, float *out, const float *in, int batch, int train,
                            float *ws) {
    (void)train, (void)ws;
    if (l->impl) {
        dt_softmax_tree_forward(l->impl, out, in, batch, dt_softmax_temperature(&l->spec));
        return;
    }
    size_t C = dt_shape_size(l->in);
    const float inv_t = 1.0f / dt_softmax_temperature(&l->spec);
    for (int b = 0; b < batch; b++) {
        const float *x = in + (size_t)b * C;
        float *p = out + (size_t)b * C;
        float m = x[0];
        for (size_t i = 1; i < C; i++) m = x[i] > m ? x[i] : m;
        float sum = 0;
        for (size_t i = 0; i < C; i++) {
            p[i] = expf((x[i] - m) * inv_t);
            sum += p[i];
        }
        float inv = 1.0f / sum;
        for (size_t i = 0; i < C; i++) p[i] *= inv;
    }
}

/* din (B, C) <- dout (B, C), already the gradient wrt the logits. */
static void softmax_backward(dt_layer *l, float *din, const float *dout, const float *in,
                             const float *out, int batch, float *ws) {
    (void)in, (void)out, (void)ws;
    if (din && din != dout) memcpy(din, dout, sizeof(float) * dt_shape_size(l->in) * (size_t)batch);
}

double dt_softmax_xent_loss(float *dlogits, const float *logits, const float *probs,
                            const dt_label *labels, int batch, int classes, float temperature) {
    double loss = 0, inv_t = 1.0 / temperature;
    float inv_b = 1.0f / (float)batch, g = (float)inv_t * inv_b;
    for (int b = 0; b < batch; b++) {
        const float *z = logits + (size_t)b * classes;
        const float *p = probs + (size_t)b * classes;
        float *d = dlogits + (size_t)b * classes;
        int y = labels[b];
        /* loss = logsumexp(z / T) - z_y / T, as PyTorch's cross_entropy of
         * z / T: finite for any finite logits (no underflow of p_y), NaN/inf
         * once they are not, which is how the trainer detects divergence. */
        double m = z[0], s = 0;
        for (int c = 1; c < classes; c++) m = z[c] > m ? z[c] : m;
        for (int c = 0; c < classes; c++) s += exp(((double)z[c] - m) * inv_t);
        loss += m * inv_t + log(s) - z[y] * inv_t;
        for (int c = 0; c < classes; c++) d[c] = p[c] * g;
        d[y] -= g;
    }
    return loss;
}

/* Darknet's groups=, at the only value dtrain trains. */
typedef struct {
    int groups;
} softmax_own_keys;
DT_OWN_FITS(softmax_own_keys);

static const dt_key_def softmax_keys[] = {
    {"groups", DT_KEY_INT, DT_OWN_KEY(softmax_own_keys, groups), 1, 1, 1, 0, NULL},
    {"temperature", DT_KEY_FLOAT, DT_SPEC_KEY(softmax.temp), 1, 0, 1e6, DT_KEY_LO_OPEN, NULL},
    {"tree", DT_KEY_PATH, 0, 0, 0, 0, 0, NULL},
    {0}};

/* tree=: Darknet's tree file, read here for its errors (naming the model
 * file's line) and counts; its path is kept for the layer's setup. */
static dt_status check_tree(const dt_section *s, const char *path, dt_layer_spec *layer) {
    int line = dt_section_key_line(s, "tree");
    if (strlen(path) >= sizeof layer->softmax.tree_path)
        return dt_section_error(s, line, "tree=%s: a path of at most %d characters, please", path,
                                DT_TREE_PATH_MAX - 1);
    dt_softmax_tree *t;
    if (dt_softmax_tree_read(&t, path) != DT_OK) {
        char why[512]; /* dt_fail writes the buffer dt_last_error reads */
        snprintf(why, sizeof why, "%s", dt_last_error());
        return dt_section_error(s, line, "tree=: %s", why);
    }
    dt_status st = t->n > DT_KEY_DIM_MAX ? dt_section_error(s, line, "tree=%s: more than %d nodes", path,
                                                             DT_KEY_DIM_MAX)
                                         : DT_OK;
    layer->softmax.tree_nodes = t->n, layer->softmax.tree_groups = t->groups;
    snprintf(layer->softmax.tree_path, sizeof layer->softmax.tree_path, "%s", path);
    dt_softmax_tree_free(t);
    return st;
}

static dt_status softmax_end_section(const dt_section *s, const dt_section_vals *v, dt_layer_spec *layer) {
    (void)v;
    const char *tree = dt_section_key_path(s);
    return tree ? check_tree(s, tree, layer) : DT_OK;
}

const dt_layer_ops dt_softmax_ops = {
    .name = "softmax",
    .keys = softmax_keys,
    .end_section = softmax_end_section,
    .setup = softmax_setup,
    .saved_floats = dt_layer_no_floats,
    .workspace_floats = dt_layer_no_floats,
    .init = dt_layer_init_none,
    .forward = softmax_forward,
    .backward = softmax_backward,
    .flops = softmax_flops,
    .destroy = softmax_destroy,
};

/* [softmax]: probabilities over the C = c*h*w values of each sample (the
 * input flattened), out (B, C) = exp((x - max) / T) / sum exp((x - max) / T)
 * with Darknet's temperature T (1 unless temperature= says). With tree=
 * (Darknet's hierarchical softmax: a softmax per group of sibling nodes)
 * the net builds, but train, eval and predict's classes refuse it
 * (dt_model_check_loss), so this flat softmax never stands in for it. It is the
 * last layer and is trained with cross-entropy: dt_softmax_xent_loss gives
 * the gradient with respect to the logits directly, so backward passes its
 * incoming gradient through unchanged (it treats dout as d loss / d logits). */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

static dt_status softmax_setup(dt_layer *l) {
    if (l->spec.softmax.tree_nodes && (size_t)l->spec.softmax.tree_nodes != dt_shape_size(l->in))
        return dt_layer_config_error(l, "tree= has %d nodes, the softmax %zu inputs: they must be equal",
                                     l->spec.softmax.tree_nodes, dt_shape_size(l->in));
    return dt_layer_setup_same(l);
}

static uint64_t softmax_flops(const dt_layer *l) { return 3 * (uint64_t)dt_shape_size(l->in); }

/* out (B, C) <- softmax of in (B, C) per row. */
static void softmax_forward(dt_layer *l, float *out, const float *in, int batch, int train,
                            float *ws) {
    (void)train, (void)ws;
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

/* tree=: Darknet's tree file (read_tree in its src/tree.c), one node a line,
 * "NAME PARENT" (PARENT a node before it, or -1); a group is a run of
 * consecutive lines of one parent, and Darknet's softmax runs over each
 * group. Counts the nodes and groups into the spec. */
static dt_status read_tree(const dt_section *s, const char *path, dt_layer_spec *layer) {
    int line = dt_section_key_line(s, "tree");
    FILE *f = fopen(path, "r");
    if (!f) return dt_section_error(s, line, "tree=%s: cannot open: %s", path, strerror(errno));
    char buf[1024], name[256];
    int nodes = 0, groups = 0, last = -2, parent;
    dt_status st = DT_OK;
    while (st == DT_OK && fgets(buf, sizeof buf, f)) {
        if (sscanf(buf, "%255s %d", name, &parent) != 2 || parent < -1 || parent >= nodes)
            st = dt_section_error(s, line, "tree=%s: line %d is not \"NAME PARENT\" with PARENT -1 or an earlier "
                                  "line's node", path, nodes + 1);
        else if (nodes == DT_KEY_DIM_MAX)
            st = dt_section_error(s, line, "tree=%s: more than %d nodes", path, DT_KEY_DIM_MAX);
        groups += parent != last;
        last = parent;
        nodes++;
    }
    fclose(f);
    if (st == DT_OK && !nodes) st = dt_section_error(s, line, "tree=%s: no nodes", path);
    layer->softmax.tree_nodes = nodes, layer->softmax.tree_groups = groups;
    return st;
}

static dt_status softmax_end_section(const dt_section *s, const dt_section_vals *v, dt_layer_spec *layer) {
    (void)v;
    const char *tree = dt_section_key_path(s);
    return tree ? read_tree(s, tree, layer) : DT_OK;
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
};

/* Darknet's hierarchical softmax (softmax_tree.h). */
#include "dtrain/softmax_tree.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/mem.h"
#include "dtrain/textfile.h"

enum { TREE_MAX_BYTES = 64 << 20, TREE_MAX_NODES = 1 << 24 };

void dt_softmax_tree_free(dt_softmax_tree *t) {
    if (!t) return;
    for (int i = 0; t->name && i < t->n; i++) dt_free(t->name[i]);
    dt_free(t->name);
    dt_free(t->parent);
    dt_free(t->group);
    dt_free(t->offset);
    dt_free(t->size);
    dt_free(t->leaf);
    dt_free(t);
}

/* The arrays of a tree of n nodes (groups at most n). */
static dt_status tree_alloc(dt_softmax_tree *t, int n) {
    size_t m = (size_t)n;
    dt_status s = dt_alloc_bytes((void **)&t->parent, m * sizeof(int), "tree");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&t->group, m * sizeof(int), "tree");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&t->offset, m * sizeof(int), "tree");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&t->size, m * sizeof(int), "tree");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&t->leaf, m, "tree");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&t->name, m * sizeof(char *), "tree");
    return s;
}

/* Node t->n from one line "NAME PARENT": its name, parent and group (a new
 * group when the parent differs from the previous line's: Darknet's runs). */
static dt_status take_node(dt_softmax_tree *t, const char *line, const char *path) {
    char name[DT_TREE_NAME_MAX + 1];
    int parent, i = t->n, end = 0;
    if (sscanf(line, "%255s %d %n", name, &parent, &end) != 2 || line[end] || parent < -1 || parent >= i)
        return dt_fail(DT_ERR_FORMAT, "%s:%d: not \"NAME PARENT\" with PARENT -1 or an earlier line's node", path,
                       i + 1);
    size_t len = strlen(name) + 1;
    DT_TRY(dt_alloc_bytes((void **)&t->name[i], len, "tree"));
    memcpy(t->name[i], name, len);
    if (i == 0 || parent != t->parent[i - 1]) t->offset[t->groups++] = i;
    t->parent[i] = parent;
    t->group[i] = t->groups - 1;
    t->size[t->groups - 1]++;
    t->leaf[i] = 1;
    if (parent >= 0) t->leaf[parent] = 0;
    t->n++;
    return DT_OK;
}

/* The lines of text (NUL-terminated, modified) into t, whose arrays hold n. */
static dt_status take_lines(dt_softmax_tree *t, char *text, const char *path) {
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r') line[len - 1] = '\0';
        DT_TRY(take_node(t, line, path));
    }
    if (!t->n) return dt_fail(DT_ERR_FORMAT, "%s: no nodes", path);
    return DT_OK;
}

dt_status dt_softmax_tree_read(dt_softmax_tree **out, const char *path) {
    *out = NULL;
    char *text;
    DT_TRY(dt_read_text_file(&text, path, TREE_MAX_BYTES, DT_ERR_FORMAT, "a tree file"));
    int n = 0;
    for (const char *c = text; *c; c++) n += *c == '\n' || (c[1] == '\0');
    dt_softmax_tree *t = NULL;
    dt_status s = n > TREE_MAX_NODES ? dt_fail(DT_ERR_FORMAT, "%s: more than %d nodes", path, TREE_MAX_NODES)
                                     : dt_alloc_bytes((void **)&t, sizeof *t, "tree");
    if (s == DT_OK) s = tree_alloc(t, n > 0 ? n : 1);
    if (s == DT_OK) s = take_lines(t, text, path);
    free(text);
    if (s != DT_OK) {
        dt_softmax_tree_free(t);
        return s;
    }
    *out = t;
    return DT_OK;
}

/* p (m) <- softmax(x (m) * inv_t), as softmax.c's flat one. */
static void group_softmax(float *p, const float *x, int m, float inv_t) {
    float mx = x[0], sum = 0;
    for (int i = 1; i < m; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < m; i++) sum += p[i] = expf((x[i] - mx) * inv_t);
    float inv = 1.0f / sum;
    for (int i = 0; i < m; i++) p[i] *= inv;
}

void dt_softmax_tree_forward(const dt_softmax_tree *t, float *out, const float *in, int batch, float temp) {
    const float inv_t = 1.0f / temp;
    for (int b = 0; b < batch; b++)
        for (int g = 0; g < t->groups; g++) {
            size_t at = (size_t)b * (size_t)t->n + (size_t)t->offset[g];
            group_softmax(out + at, in + at, t->size[g], inv_t);
        }
}

/* One unmasked group's loss logsumexp(z / T) - z_y / T (in double, finite
 * for any finite logits, as dt_softmax_xent_loss) and its gradient d (m) =
 * (p - onehot_y) * g, for the group's logits z and probabilities p (m). */
static double group_loss(float *d, const float *z, const float *p, int m, int y, double inv_t, float g) {
    double mx = z[0], s = 0;
    for (int i = 1; i < m; i++) mx = z[i] > mx ? z[i] : mx;
    for (int i = 0; i < m; i++) {
        s += exp(((double)z[i] - mx) * inv_t);
        d[i] = p[i] * g;
    }
    d[y] -= g;
    return mx * inv_t + log(s) - z[y] * inv_t;
}

/* Darknet's fill_hierarchy gives truth 1 to the label and its ancestors,
 * each in its own group (siblings share a parent, so none is another's
 * ancestor), 0 to the rest of those groups, and masks every other group:
 * so the unmasked groups are exactly those of the path from the label to
 * its root, each with one truth-1 node, and the row's other gradients are
 * 0. Darknet's CPU forward_softmax_layer forgets this mask (its
 * softmax_x_ent_cpu takes SECRET_NUM as a truth); its GPU path masks delta
 * and loss (mask_gpu), which is what is trained here. */
double dt_softmax_tree_loss(const dt_softmax_tree *t, float *dlogits, const float *logits, const float *probs,
                            const int32_t *labels, int batch, float temp) {
    double loss = 0, inv_t = 1.0 / temp;
    float g = (float)inv_t / (float)batch;
    for (int b = 0; b < batch; b++) {
        size_t row = (size_t)b * (size_t)t->n;
        memset(dlogits + row, 0, sizeof(float) * (size_t)t->n);
        for (int v = labels[b]; v >= 0; v = t->parent[v]) {
            int k = t->group[v], o = t->offset[k];
            size_t at = row + (size_t)o;
            loss += group_loss(dlogits + at, logits + at, probs + at, t->size[k], v - o, inv_t, g);
        }
    }
    return loss;
}

void dt_softmax_tree_predict(const dt_softmax_tree *t, float *scores, const float *probs, int batch) {
    for (int b = 0; b < batch; b++) {
        float *s = scores + (size_t)b * (size_t)t->n;
        const float *p = probs + (size_t)b * (size_t)t->n;
        for (int i = 0; i < t->n; i++) s[i] = t->parent[i] >= 0 ? p[i] * s[t->parent[i]] : p[i];
        for (int i = 0; i < t->n; i++) s[i] = t->leaf[i] ? s[i] : 0;
    }
}

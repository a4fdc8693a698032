/* Darknet's hierarchical softmax ([softmax] tree=, darknet9000.cfg): the
 * tree file, the softmax per group of sibling nodes, the masked
 * cross-entropy of a label's truth (Darknet's fill_hierarchy) and the
 * probabilities of the leaves (Darknet's hierarchy_predictions). The
 * softmax layer owns one tree (src/layers/softmax.c); the net's loss and
 * class scores (net.c) use the same functions, so training, eval and
 * predict agree. Facts from Darknet's src/tree.c,
 * src/data.c and src/softmax_layer.c. */
#ifndef DTRAIN_SOFTMAX_TREE_H
#define DTRAIN_SOFTMAX_TREE_H

#include <stdint.h>

#include "dtrain/status.h"

/* Darknet's read_tree: node i is line i "NAME PARENT" (PARENT -1 for a
 * root, else an earlier line); a group is a run of consecutive lines of one
 * parent, so group g is nodes [offset[g], offset[g] + size[g]). A leaf is a
 * node no line names as its parent. Immutable once read. */
typedef struct dt_softmax_tree {
    int n, groups;
    int *parent;      /* (n) -1: a root */
    int *group;       /* (n) the group of each node */
    int *offset;      /* (groups) first node of each group */
    int *size;        /* (groups) nodes of each group */
    unsigned char *leaf; /* (n) 1: no child */
    char **name;      /* (n) the first word of each line */
} dt_softmax_tree;

/* The longest name a line may have (Darknet reads at most 255 bytes). */
enum { DT_TREE_NAME_MAX = 255 };

/* Reads path. Errors (DT_ERR_IO, DT_ERR_FORMAT "PATH:LINE: ...",
 * DT_ERR_NOMEM) leave *out NULL. Free with dt_softmax_tree_free. */
dt_status dt_softmax_tree_read(dt_softmax_tree **out, const char *path);
void dt_softmax_tree_free(dt_softmax_tree *t);

/* out (B, n) <- a softmax of in (B, n) / temp over each group (Darknet's
 * forward_softmax_layer with a tree). out may not alias in. */
void dt_softmax_tree_forward(const dt_softmax_tree *t, float *out, const float *in, int batch, float temp);

/* The masked cross-entropy of logits z (B, n) whose group softmaxes are
 * probs (B, n), for labels (B) < n (any node). Darknet's fill_hierarchy
 * makes the truth of label k 1 at k and its ancestors, 0 at the other
 * nodes of their groups, and masks every other group; the loss is the sum
 * over samples and unmasked groups of logsumexp(z_g / T) - z_y / T (y the
 * group's truth-1 node), dlogits (B, n) = (p - t) / (T B) on unmasked nodes
 * and 0 on masked ones. Returns the summed loss, as dt_softmax_xent_loss. */
double dt_softmax_tree_loss(const dt_softmax_tree *t, float *dlogits, const float *logits, const float *probs,
                            const int32_t *labels, int batch, float temp);

/* scores (B, n) <- Darknet's hierarchy_predictions of the group softmaxes
 * probs (B, n) with only_leaves: a node's probability is its conditional
 * times its parent's (parents come first), inner nodes 0. */
void dt_softmax_tree_predict(const dt_softmax_tree *t, float *scores, const float *probs, int batch);

/* The tree of a [softmax] layer with tree= in a built net (NULL: another
 * layer, or a flat softmax). */
struct dt_layer;
const dt_softmax_tree *dt_softmax_tree_of(const struct dt_layer *l);

#endif

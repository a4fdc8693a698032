/* Kind and activation names and the ops table by kind. */
#include <string.h>

#include "layers/layer_impl.h"

/* Indexed by dt_layer_kind. */
static const dt_layer_ops *const kind_ops[DT_LAYER_KIND_COUNT] = {
    [DT_LAYER_CONV] = &dt_conv_ops,       [DT_LAYER_MAXPOOL] = &dt_maxpool_ops,
    [DT_LAYER_AVGPOOL] = &dt_avgpool_ops, [DT_LAYER_DENSE] = &dt_dense_ops,
    [DT_LAYER_ACT] = &dt_act_ops,         [DT_LAYER_DROPOUT] = &dt_dropout_ops,
    [DT_LAYER_LRN] = &dt_lrn_ops,         [DT_LAYER_BATCHNORM] = &dt_batchnorm_ops,
    [DT_LAYER_SOFTMAX] = &dt_softmax_ops, [DT_LAYER_SHORTCUT] = &dt_shortcut_ops,
    [DT_LAYER_ROUTE] = &dt_route_ops,
};

/* Indexed by dt_precision. */
static const char *const precision_names[DT_PRECISION_COUNT] = {"fp32", "bf16"};

const char *dt_precision_name(dt_precision p) {
    if ((int)p < 0 || p >= DT_PRECISION_COUNT) return "?";
    return precision_names[p];
}

int dt_precision_from_name(const char *name) {
    for (int p = 0; p < DT_PRECISION_COUNT; p++)
        if (strcmp(precision_names[p], name) == 0) return p;
    return -1;
}

dt_precision dt_layer_precision(const dt_layer *l, dt_precision p) {
    return l->spec.kind == DT_LAYER_CONV && l->in.c < 4 ? DT_PRECISION_FP32 : p;
}

/* Indexed by dt_activation. */
static const char *const act_names[] = {"linear", "relu", "leaky", "tanh", "sigmoid"};
#define ACT_COUNT (int)(sizeof act_names / sizeof act_names[0])

const dt_layer_ops *dt_layer_ops_of(dt_layer_kind kind) {
    if ((int)kind < 0 || kind >= DT_LAYER_KIND_COUNT) return NULL;
    return kind_ops[kind];
}

int dt_layer_kind_from_name(const char *name) {
    for (int k = 0; k < DT_LAYER_KIND_COUNT; k++)
        if (strcmp(kind_ops[k]->name, name) == 0) return k;
    return -1;
}

const char *dt_activation_name(dt_activation a) {
    if ((int)a < 0 || (int)a >= ACT_COUNT) return "?";
    return act_names[a];
}

int dt_activation_from_name(const char *name) {
    for (int a = 0; a < ACT_COUNT; a++)
        if (strcmp(act_names[a], name) == 0) return a;
    if (strcmp(name, "logistic") == 0) return DT_ACT_SIGMOID; /* Darknet's name */
    return -1;
}

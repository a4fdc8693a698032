/* Kind and activation names (and the activation keys' choices), and the
 * ops table by kind. */
#include <string.h>

#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

#define DECLARE_OPS(e, name) extern const dt_layer_ops dt_##name##_ops;
DT_LAYER_KINDS(DECLARE_OPS)
#undef DECLARE_OPS

/* Indexed by dt_layer_kind. */
static const dt_layer_ops *const kind_ops[DT_LAYER_KIND_COUNT] = {
#define OPS_ENTRY(e, name) [DT_LAYER_##e] = &dt_##name##_ops,
    DT_LAYER_KINDS(OPS_ENTRY)
#undef OPS_ENTRY
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
    return l->spec.kind == DT_LAYER_CONV && l->in.c < 3 ? DT_PRECISION_FP32 : p;
}

/* Indexed by dt_activation. */
static const char *const act_names[DT_ACT_COUNT] = {"linear", "relu", "leaky", "tanh", "sigmoid", "ramp"};
#define ACT_COUNT DT_ACT_COUNT

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

static const char *activation_name(int v) { return dt_activation_name((dt_activation)v); }
_Static_assert(sizeof(dt_activation) == sizeof(int), "activation keys are stored as int");
const dt_key_choices dt_activation_choices = {dt_activation_from_name, activation_name, ACT_COUNT};

int dt_activation_from_name(const char *name) {
    for (int a = 0; a < ACT_COUNT; a++)
        if (strcmp(act_names[a], name) == 0) return a;
    if (strcmp(name, "logistic") == 0) return DT_ACT_SIGMOID; /* Darknet's name */
    return -1;
}

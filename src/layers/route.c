/* [route]: Darknet's concatenation. in[k] (C_k, H, W) for k < ninputs ->
 * out (sum C_k, H, W), the inputs' channels in the order listed (one input:
 * passes it on). Spatial sizes must agree. In the net's blocked layout
 * (every C_k a multiple of k) a sample is its channel blocks in order, so
 * concatenation copies the same spans; bf16 activations (in_bf16) are 2
 * bytes a value instead of 4. */
#include <string.h>

#include "dtrain/model.h"
#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

static dt_status route_setup(dt_layer *l) {
    int c = 0;
    for (int k = 0; k < l->ninputs; k++) {
        dt_shape s = l->ins[k];
        DT_TRY(dt_layer_check_shape(l, s, "input"));
        if (s.h != l->ins[0].h || s.w != l->ins[0].w)
            return dt_layer_config_error(l,
                                         "layers= entry %d has spatial size %dx%d, entry 1 has "
                                         "%dx%d; concatenated layers must agree",
                                         k + 1, s.h, s.w, l->ins[0].h, l->ins[0].w);
        if (s.c > (1 << 30) - c) return dt_layer_config_error(l, "too many channels");
        c += s.c;
    }
    l->out = (dt_shape){c, l->ins[0].h, l->ins[0].w};
    DT_TRY(dt_layer_check_shape(l, l->out, "output"));
    l->nw = l->nb = l->nstate = 0;
    return DT_OK;
}

/* Bytes of one activation value. */
static size_t value_bytes(const dt_layer *l) { return l->in_bf16 ? sizeof(uint16_t) : sizeof(float); }

/* out (B, sum C_k, H, W) <- in[k] (B, C_k, H, W), sample by sample. */
static void route_forward(dt_layer *l, float *out, const float *const *in, int batch) {
    size_t v = value_bytes(l), osz = dt_shape_size(l->out) * v;
    for (int b = 0; b < batch; b++) {
        char *y = (char *)out + (size_t)b * osz;
        for (int k = 0; k < l->ninputs; k++) {
            size_t n = dt_shape_size(l->ins[k]) * v;
            memcpy(y, (const char *)in[k] + (size_t)b * n, n);
            y += n;
        }
    }
}

/* din[k] <- input k's channels of dout. */
static void route_backward(dt_layer *l, float *const *din, const float *dout, const float *out, int batch) {
    (void)out;
    size_t v = value_bytes(l), osz = dt_shape_size(l->out) * v;
    for (int b = 0; b < batch; b++) {
        const char *dy = (const char *)dout + (size_t)b * osz;
        for (int k = 0; k < l->ninputs; k++) {
            size_t n = dt_shape_size(l->ins[k]) * v;
            if (din[k]) memcpy((char *)din[k] + (size_t)b * n, dy, n);
            dy += n;
        }
    }
}

/* Copies bf16 values as they are, in the blocked layout (the net's plan
 * ties the inputs' and the output's layouts and types). */
static int route_bf16_acts(const dt_layer *l) { return l->in_layout != DT_LAYOUT_NCHW; }

/* ---- model-file keys ---------------------------------------------------- */

typedef struct {
    dt_key_layers layers;
} route_own_keys;
DT_OWN_FITS(route_own_keys);

static const dt_key_def route_keys[] = {
    {"layers", DT_KEY_LAYERS, DT_OWN_KEY(route_own_keys, layers), 0, -DT_MAX_LAYERS, DT_MAX_LAYERS, DT_KEY_REQUIRED,
     NULL},
    {0}};

static dt_status route_end_section(const dt_section *s, const dt_section_vals *v, dt_layer_spec *layer) {
    const dt_key_layers *refs = &((const route_own_keys *)(const void *)&v->own)->layers;
    layer->ninputs = refs->n;
    for (int i = 0; i < refs->n; i++) DT_TRY(dt_section_layer(s, "layers", refs->ref[i], &layer->inputs[i]));
    return DT_OK;
}

const dt_layer_ops dt_route_ops = {
    .name = "route",
    .keys = route_keys,
    .end_section = route_end_section,
    .setup = route_setup,
    .saved_floats = dt_layer_no_floats,
    .workspace_floats = dt_layer_no_floats,
    .init = dt_layer_init_none,
    .forward_n = route_forward,
    .backward_n = route_backward,
    .layouts = dt_layout_follow, /* channel blocks concatenate as spans */
    .bf16_acts = route_bf16_acts,
    .flops = dt_layer_flops_elems,
};

/* dtrain net -> ONNX graph (see dtrain/export.h and docs/EXPORT.md).
 *
 * Each layer kind has an emitter in `emitters`, which adds the operators
 * computing the layer's output from its inputs' tensors and names that
 * output. Tensors are 4-D (batch, C, H, W) except after a connected layer
 * or a Flatten, where they are 2-D (batch, C) with C x 1 x 1 samples: the
 * same values in the same order, so converting is a Flatten or an
 * Unsqueeze and costs nothing. Emitters ask for the rank they need. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/export.h"
#include "export/onnx_builder.h"

typedef struct {
    dt_onnx *m;
    const dt_net *net;
    const dt_export_info *info;
    const char **name; /* (nlayers) each layer's output tensor */
    int *rank;         /* (nlayers) 2 or 4 */
    int ntmp;          /* temporaries named so far (t<n>_...) */
} export_ctx;

/* One input of a layer: its tensor and rank. */
typedef struct {
    const char *name;
    int rank;
} tensor;

typedef void (*emit_fn)(export_ctx *x, int i, const tensor *in);

static const dt_layer *layer_of(const export_ctx *x, int i) { return &x->net->layers[i]; }

/* The tensor name of layer i's output: "l<i>_<section>". */
static const char *out_name(export_ctx *x, int i) {
    return dt_onnx_name(x->m, "l%d_%s", i, layer_of(x, i)->ops->name);
}

static void set_out(export_ctx *x, int i, const char *name, int rank) {
    x->name[i] = name;
    x->rank[i] = rank;
}

/* t as 4-D (batch, C, 1, 1) when it is 2-D. */
static const char *as_4d(export_ctx *x, tensor t) {
    if (t.rank == 4) return t.name;
    static const int64_t axes[] = {2, 3};
    int k = x->ntmp++;
    const char *ax = dt_onnx_name(x->m, "t%d_axes", k);
    dt_onnx_init_int64s(x->m, ax, axes, 2);
    const char *out = dt_onnx_name(x->m, "t%d_4d", k);
    dt_onnx_node(x->m, "Unsqueeze", (const char *[]){t.name, ax}, 2, out);
    return out;
}

/* t as 2-D (batch, C*H*W) when it is 4-D; the flattened tensor is `name`
 * (NULL: a name of its own). */
static const char *as_2d(export_ctx *x, tensor t, const char *name) {
    if (t.rank == 2 && !name) return t.name;
    const char *out = name ? name : dt_onnx_name(x->m, "t%d_flat", x->ntmp++);
    void *n = dt_onnx_node(x->m, t.rank == 2 ? "Identity" : "Flatten", &t.name, 1, out);
    if (t.rank == 4) dt_onnx_attr_int(x->m, n, "axis", 1);
    return out;
}

/* Float initializer "l<i>.<what>" of shape dims; its name. */
static const char *param(export_ctx *x, int i, const char *what, const int64_t *dims, int ndims,
                         const float *data) {
    const char *name = dt_onnx_name(x->m, "l%d.%s", i, what);
    dt_onnx_init_floats(x->m, name, dims, ndims, data);
    return name;
}

/* kernel_shape, strides and pads of a square window (pads: begin then end
 * per spatial axis, the end side `extra` larger). */
static void window_attrs(export_ctx *x, void *node, const dt_layer_spec *s, int extra) {
    int64_t k[2] = {s->size, s->size}, st[2] = {s->stride, s->stride};
    int64_t pads[4] = {s->pad, s->pad, s->pad + extra, s->pad + extra};
    dt_onnx_attr_ints(x->m, node, "kernel_shape", k, 2);
    dt_onnx_attr_ints(x->m, node, "strides", st, 2);
    dt_onnx_attr_ints(x->m, node, "pads", pads, 4);
}

static void emit_conv(export_ctx *x, int i, const tensor *in) {
    const dt_layer *l = layer_of(x, i);
    const dt_layer_spec *s = &l->spec;
    int groups = dt_layer_groups(s);
    int64_t wd[4] = {s->conv.filters, l->in.c / groups, s->size, s->size}, bd[1] = {s->conv.filters};
    const char *args[3] = {as_4d(x, in[0]), param(x, i, "weight", wd, 4, l->w), NULL};
    int nargs = 2;
    if (l->nb) args[nargs++] = param(x, i, "bias", bd, 1, l->b);
    const char *out = out_name(x, i);
    void *node = dt_onnx_node(x->m, "Conv", args, nargs, out);
    window_attrs(x, node, s, 0);
    if (groups > 1) dt_onnx_attr_int(x->m, node, "group", groups);
    int64_t dil[2] = {dt_layer_dilation(s), dt_layer_dilation(s)};
    if (dil[0] > 1) dt_onnx_attr_ints(x->m, node, "dilations", dil, 2);
    set_out(x, i, out, 4);
}

static void emit_maxpool(export_ctx *x, int i, const tensor *in) {
    const dt_layer *l = layer_of(x, i);
    const char *src = as_4d(x, in[0]), *out = out_name(x, i);
    /* ONNX's padded cells never win either, and its floor-mode size is ours. */
    window_attrs(x, dt_onnx_node(x->m, "MaxPool", &src, 1, out), &l->spec, l->spec.pad_extra);
    set_out(x, i, out, 4);
}

static void emit_avgpool(export_ctx *x, int i, const tensor *in) {
    const dt_layer *l = layer_of(x, i);
    const char *src = as_4d(x, in[0]), *out = out_name(x, i);
    if (l->spec.size == 0) {
        dt_onnx_node(x->m, "GlobalAveragePool", &src, 1, out);
    } else { /* dtrain divides by K*K always: padded cells count */
        void *n = dt_onnx_node(x->m, "AveragePool", &src, 1, out);
        window_attrs(x, n, &l->spec, 0);
        dt_onnx_attr_int(x->m, n, "count_include_pad", 1);
    }
    set_out(x, i, out, 4);
}

/* Gemm(A (batch, in), W (out, in), b) with transB: out = A W^T + b. */
static void emit_dense(export_ctx *x, int i, const tensor *in) {
    const dt_layer *l = layer_of(x, i);
    int64_t wd[2] = {l->spec.dense.outputs, (int64_t)dt_shape_size(l->in)}, bd[1] = {l->spec.dense.outputs};
    const char *args[3] = {as_2d(x, in[0], NULL), param(x, i, "weight", wd, 2, l->w), NULL};
    int nargs = 2;
    if (l->nb) args[nargs++] = param(x, i, "bias", bd, 1, l->b);
    const char *out = out_name(x, i);
    dt_onnx_attr_int(x->m, dt_onnx_node(x->m, "Gemm", args, nargs, out), "transB", 1);
    set_out(x, i, out, 2);
}

static void emit_act(export_ctx *x, int i, const tensor *in) {
    const dt_layer *l = layer_of(x, i);
    static const char *const ops[] = {[DT_ACT_LINEAR] = "Identity", [DT_ACT_RELU] = "Relu",
                                      [DT_ACT_LEAKY] = "LeakyRelu", [DT_ACT_TANH] = "Tanh",
                                      [DT_ACT_SIGMOID] = "Sigmoid"};
    const char *out = out_name(x, i);
    if (l->spec.act.fn == DT_ACT_RAMP) {
        /* 1.1 LeakyRelu(x, 1/11): 1.1 x above 0, 0.1 x below */
        const char *leaky = dt_onnx_name(x->m, "l%d_leaky", i), *k = dt_onnx_name(x->m, "l%d_gain", i);
        dt_onnx_attr_float(x->m, dt_onnx_node(x->m, "LeakyRelu", &in[0].name, 1, leaky), "alpha", 1.0f / 11.0f);
        int64_t one = 1;
        dt_onnx_init_fill(x->m, k, &one, 1, 1.1f);
        dt_onnx_node(x->m, "Mul", (const char *[]){leaky, k}, 2, out);
        set_out(x, i, out, in[0].rank);
        return;
    }
    void *n = dt_onnx_node(x->m, ops[l->spec.act.fn], &in[0].name, 1, out);
    if (l->spec.act.fn == DT_ACT_LEAKY) dt_onnx_attr_float(x->m, n, "alpha", l->spec.act.slope);
    set_out(x, i, out, in[0].rank);
}

/* Inference: dropout is the identity, so its output is its input's tensor. */
static void emit_dropout(export_ctx *x, int i, const tensor *in) {
    set_out(x, i, in[0].name, in[0].rank);
}

static void emit_lrn(export_ctx *x, int i, const tensor *in) {
    const dt_layer_spec *s = &layer_of(x, i)->spec;
    const char *src = as_4d(x, in[0]), *out = out_name(x, i);
    void *n = dt_onnx_node(x->m, "LRN", &src, 1, out); /* the same formula as PyTorch's */
    dt_onnx_attr_int(x->m, n, "size", s->lrn.size);
    dt_onnx_attr_float(x->m, n, "alpha", s->lrn.alpha * (float)s->lrn.size); /* ONNX divides it by size */
    dt_onnx_attr_float(x->m, n, "beta", s->lrn.beta);
    dt_onnx_attr_float(x->m, n, "bias", s->lrn.k);
    set_out(x, i, out, 4);
}

static void emit_batchnorm(export_ctx *x, int i, const tensor *in) {
    const dt_layer *l = layer_of(x, i);
    int64_t cd[1] = {l->in.c};
    const char *args[5] = {in[0].name, param(x, i, "weight", cd, 1, l->w),
                           param(x, i, "bias", cd, 1, l->b),
                           param(x, i, "running_mean", cd, 1, l->state),
                           param(x, i, "running_var", cd, 1, l->state + l->in.c)};
    const char *out = out_name(x, i);
    dt_onnx_attr_float(x->m, dt_onnx_node(x->m, "BatchNormalization", args, 5, out), "epsilon",
                       l->spec.bn.eps);
    set_out(x, i, out, in[0].rank);
}

/* The last layer: "logits" (its input, 2-D) and "probabilities". */
static void emit_softmax(export_ctx *x, int i, const tensor *in) {
    const char *logits = as_2d(x, in[0], "logits");
    float t = dt_softmax_temperature(&layer_of(x, i)->spec);
    if (t != 1.0f) { /* Darknet's temperature: Softmax(logits / T) */
        int64_t one = 1;
        const char *k = dt_onnx_name(x->m, "l%d_inv_temperature", i), *z = dt_onnx_name(x->m, "l%d_scaled", i);
        dt_onnx_init_fill(x->m, k, &one, 1, 1.0f / t);
        dt_onnx_node(x->m, "Mul", (const char *[]){logits, k}, 2, z);
        logits = z;
    }
    dt_onnx_attr_int(x->m, dt_onnx_node(x->m, "Softmax", &logits, 1, "probabilities"), "axis", 1);
    set_out(x, i, "probabilities", 2);
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* Darknet's shortcut (shortcut.c): in[0] plus the block of in[1] that the
 * two share. Equal shapes: Add. Otherwise, with in[1] (C1, H1, W1) and
 * in[0] (C2, H2, W2): in[1]'s shared channels, read every `stride` = W1/W2
 * cells when it is larger (Slice with steps: ResNet's option A); spread to
 * every `sample` = W2/W1-th cell when it is smaller (a per-channel
 * ConvTranspose of a 1x1 kernel of ones with that stride writes input cell
 * i at i * sample, zeros between); zero-padded at the end to in[0]'s shape
 * (Pad), then added. */
static void emit_shortcut(export_ctx *x, int i, const tensor *in) {
    const dt_layer *l = layer_of(x, i);
    dt_shape o = l->ins[0], a = l->ins[1];
    const char *out = out_name(x, i);
    if (o.c == a.c && o.h == a.h && o.w == a.w && in[0].rank == in[1].rank) {
        dt_onnx_node(x->m, "Add", (const char *[]){in[0].name, in[1].name}, 2, out);
        set_out(x, i, out, in[0].rank);
        return;
    }
    int stride = a.w / o.w > 1 ? a.w / o.w : 1, sample = o.w / a.w > 1 ? o.w / a.w : 1;
    int c = min_int(a.c, o.c), h = min_int(a.h, o.h), w = min_int(a.w, o.w);
    int64_t starts[3] = {0, 0, 0}, ends[3] = {c, (int64_t)(h - 1) * stride + 1,
                                              (int64_t)(w - 1) * stride + 1};
    int64_t axes[3] = {1, 2, 3}, steps[3] = {1, stride, stride};
    int64_t spread_h = (int64_t)(h - 1) * sample + 1, spread_w = (int64_t)(w - 1) * sample + 1;
    int64_t pads[8] = {0, 0, 0, 0, 0, o.c - c, o.h - spread_h, o.w - spread_w};
    const char *names[5] = {dt_onnx_name(x->m, "l%d_starts", i), dt_onnx_name(x->m, "l%d_ends", i),
                            dt_onnx_name(x->m, "l%d_axes", i), dt_onnx_name(x->m, "l%d_steps", i),
                            dt_onnx_name(x->m, "l%d_pads", i)};
    const int64_t *vals[5] = {starts, ends, axes, steps, pads};
    for (int k = 0; k < 5; k++) dt_onnx_init_int64s(x->m, names[k], vals[k], k == 4 ? 8 : 3);
    const char *shared = dt_onnx_name(x->m, "l%d_sampled", i);
    dt_onnx_node(x->m, "Slice",
                 (const char *[]){as_4d(x, in[1]), names[0], names[1], names[2], names[3]}, 5,
                 shared);
    if (sample > 1) {
        int64_t kd[4] = {c, 1, 1, 1}, k11[2] = {1, 1}, st[2] = {sample, sample};
        const char *ones = dt_onnx_name(x->m, "l%d_ones", i);
        const char *spread = dt_onnx_name(x->m, "l%d_spread", i);
        dt_onnx_init_fill(x->m, ones, kd, 4, 1.0f);
        void *n = dt_onnx_node(x->m, "ConvTranspose", (const char *[]){shared, ones}, 2, spread);
        dt_onnx_attr_int(x->m, n, "group", c);
        dt_onnx_attr_ints(x->m, n, "kernel_shape", k11, 2);
        dt_onnx_attr_ints(x->m, n, "strides", st, 2);
        shared = spread;
    }
    const char *padded = dt_onnx_name(x->m, "l%d_padded", i);
    dt_onnx_node(x->m, "Pad", (const char *[]){shared, names[4]}, 2, padded);
    dt_onnx_node(x->m, "Add", (const char *[]){as_4d(x, in[0]), padded}, 2, out);
    set_out(x, i, out, 4);
}

/* Concatenation along channels (one input: passed on). */
static void emit_route(export_ctx *x, int i, const tensor *in) {
    const dt_layer *l = layer_of(x, i);
    if (l->ninputs == 1) {
        set_out(x, i, in[0].name, in[0].rank);
        return;
    }
    int rank = 2;
    for (int k = 0; k < l->ninputs; k++)
        if (in[k].rank == 4) rank = 4;
    const char *names[DT_LAYER_MAX_INPUTS];
    for (int k = 0; k < l->ninputs; k++)
        names[k] = rank == 4 ? as_4d(x, in[k]) : in[k].name;
    const char *out = out_name(x, i);
    dt_onnx_attr_int(x->m, dt_onnx_node(x->m, "Concat", names, l->ninputs, out), "axis", 1);
    set_out(x, i, out, rank);
}

/* Inference: the centre window (Slice), then 2 x - 1 unless noadjust. */
static void emit_crop(export_ctx *x, int i, const tensor *in) {
    const dt_layer *l = layer_of(x, i);
    int64_t dh = (l->in.h - l->out.h) / 2, dw = (l->in.w - l->out.w) / 2;
    int64_t starts[2] = {dh, dw}, ends[2] = {dh + l->out.h, dw + l->out.w}, axes[2] = {2, 3};
    const char *names[3] = {dt_onnx_name(x->m, "l%d_starts", i), dt_onnx_name(x->m, "l%d_ends", i),
                            dt_onnx_name(x->m, "l%d_axes", i)};
    const int64_t *vals[3] = {starts, ends, axes};
    for (int k = 0; k < 3; k++) dt_onnx_init_int64s(x->m, names[k], vals[k], 2);
    const char *out = out_name(x, i);
    const char *window = l->spec.crop.noadjust ? out : dt_onnx_name(x->m, "l%d_window", i);
    dt_onnx_node(x->m, "Slice", (const char *[]){as_4d(x, in[0]), names[0], names[1], names[2]}, 4, window);
    if (!l->spec.crop.noadjust) {
        int64_t one = 1;
        const char *two = dt_onnx_name(x->m, "l%d_two", i), *minus = dt_onnx_name(x->m, "l%d_minus_one", i);
        const char *scaled = dt_onnx_name(x->m, "l%d_scaled", i);
        dt_onnx_init_fill(x->m, two, &one, 1, 2.0f);
        dt_onnx_init_fill(x->m, minus, &one, 1, -1.0f);
        dt_onnx_node(x->m, "Mul", (const char *[]){window, two}, 2, scaled);
        dt_onnx_node(x->m, "Add", (const char *[]){scaled, minus}, 2, out);
    }
    set_out(x, i, out, 4);
}

/* Darknet's reorg (layers/reorg.c) as Reshape, Transpose, Reshape. With
 * the input (C, H, W), stride s and C' = C / s^2, its permutation reads a
 * sample as A (C', H, s, W, s) and writes it as B (s, s, C', H, W), B[i,
 * j, c, y, x] = A[c, y, i, x, j] (forward: the input is A, the output B;
 * reverse=1: the input is B, the output A). extra=N: the flattened input
 * followed by N zeros (Pad). A shape's leading 0 copies the batch. */
static void emit_reorg(export_ctx *x, int i, const tensor *in) {
    const dt_layer *l = layer_of(x, i);
    const dt_layer_spec *sp = &l->spec;
    const char *out = out_name(x, i);
    if (sp->reorg.extra) {
        int64_t pads[4] = {0, 0, 0, sp->reorg.extra};
        const char *p = dt_onnx_name(x->m, "l%d_pads", i);
        dt_onnx_init_int64s(x->m, p, pads, 4);
        dt_onnx_node(x->m, "Pad", (const char *[]){as_2d(x, in[0], NULL), p}, 2, out);
        set_out(x, i, out, 2);
        return;
    }
    const int64_t s = sp->stride, c = l->in.c / (s * s), h = l->in.h, w = l->in.w;
    const int64_t a[6] = {0, c, h, s, w, s}, b[6] = {0, s, s, c, h, w};
    const int64_t to_b[6] = {0, 3, 5, 1, 2, 4}, to_a[6] = {0, 3, 4, 1, 5, 2};
    const int64_t o[4] = {0, l->out.c, l->out.h, l->out.w};
    const int reverse = sp->reorg.reverse;
    const char *view = dt_onnx_name(x->m, "l%d_view", i), *shape = dt_onnx_name(x->m, "l%d_shape", i);
    const char *viewed = dt_onnx_name(x->m, "l%d_viewed", i), *moved = dt_onnx_name(x->m, "l%d_moved", i);
    dt_onnx_init_int64s(x->m, view, reverse ? b : a, 6);
    dt_onnx_init_int64s(x->m, shape, o, 4);
    dt_onnx_node(x->m, "Reshape", (const char *[]){in[0].name, view}, 2, viewed);
    dt_onnx_attr_ints(x->m, dt_onnx_node(x->m, "Transpose", &viewed, 1, moved), "perm", reverse ? to_a : to_b, 6);
    dt_onnx_node(x->m, "Reshape", (const char *[]){moved, shape}, 2, out);
    set_out(x, i, out, 4);
}

static const emit_fn emitters[DT_LAYER_KIND_COUNT] = {
    [DT_LAYER_CONV] = emit_conv,           [DT_LAYER_MAXPOOL] = emit_maxpool,
    [DT_LAYER_AVGPOOL] = emit_avgpool,     [DT_LAYER_DENSE] = emit_dense,
    [DT_LAYER_ACT] = emit_act,             [DT_LAYER_DROPOUT] = emit_dropout,
    [DT_LAYER_LRN] = emit_lrn,             [DT_LAYER_BATCHNORM] = emit_batchnorm,
    [DT_LAYER_SOFTMAX] = emit_softmax,     [DT_LAYER_SHORTCUT] = emit_shortcut,
    [DT_LAYER_ROUTE] = emit_route,         [DT_LAYER_CROP] = emit_crop,
    [DT_LAYER_REORG] = emit_reorg,
};

/* What no operator sequence above expresses, as a reason; NULL if exportable. */
static const char *unexportable(const dt_layer *l) {
    if (l->spec.kind == DT_LAYER_SOFTMAX && l->spec.softmax.tree_nodes)
        return "Darknet's hierarchical softmax (tree=) has no ONNX form here";
    int known = (unsigned)l->spec.kind < DT_LAYER_KIND_COUNT && emitters[l->spec.kind];
    return known ? NULL : "the exporter has no ONNX form for this kind yet";
}

static dt_status check_exportable(const dt_net *net, const dt_export_info *info) {
    for (int i = 0; i < net->nlayers; i++) {
        const char *why = unexportable(&net->layers[i]);
        if (why)
            return dt_fail(DT_ERR_CONFIG, "%s:%d: [%s] (layer %d) cannot be exported to ONNX: %s",
                           info->model_path, net->layers[i].spec.line, net->layers[i].ops->name,
                           i, why);
    }
    return DT_OK;
}

static void emit_graph(export_ctx *x) {
    const dt_net *net = x->net;
    int64_t in_dims[4] = {DT_ONNX_BATCH, net->input.c, net->input.h, net->input.w};
    dt_onnx_input(x->m, "input", in_dims, 4);
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        tensor in[DT_LAYER_MAX_INPUTS];
        for (int k = 0; k < l->ninputs; k++) {
            int from = l->spec.inputs[k];
            in[k] = from < 0 ? (tensor){"input", 4} : (tensor){x->name[from], x->rank[from]};
        }
        emitters[l->spec.kind](x, i, in);
    }
    if (!net->classes) { /* a feature extractor: its last layer's output, (batch, C, H, W) or (batch, C H W) */
        int last = net->nlayers - 1, rank = x->rank[last];
        dt_shape o = net->layers[last].out;
        int64_t dims[4] = {DT_ONNX_BATCH, rank == 4 ? o.c : (int64_t)dt_shape_size(o), o.h, o.w};
        dt_onnx_node(x->m, "Identity", &x->name[last], 1, "features");
        dt_onnx_output(x->m, "features", dims, rank);
        return;
    }
    int64_t out_dims[2] = {DT_ONNX_BATCH, net->classes};
    dt_onnx_output(x->m, "logits", out_dims, 2);
    dt_onnx_output(x->m, "probabilities", out_dims, 2);
}

/* "; then minus mean (0.485, ...) and over std (...) per channel, as
 * torchvision's Normalize", or "; no mean or std applied". */
static const char *normalisation(char *buf, size_t cap, const dt_export_info *info) {
    const dt_channel_values *v[2] = {info->mean, info->std};
    const char *what[2] = {"minus mean", "over std"};
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < 2; k++)
        for (int c = 0; v[k] && c < v[k]->n && used < cap; c++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s%s%.9g%s", c ? ", " : used ? " and " : "; then ",
                                     c ? "" : what[k], c ? "" : " (", (double)v[k]->v[c],
                                     c == v[k]->n - 1 ? ")" : "");
    if (!used) snprintf(buf, cap, "; no mean or std applied");
    else if (used < cap) snprintf(buf + used, cap - used, " per channel, as torchvision's Normalize");
    return buf;
}

/* metadata_props: how to feed the model, where it came from, class names. */
static void emit_metadata(export_ctx *x) {
    const dt_net *net = x->net;
    char norm[1536], note[2048]; /* (dt_onnx_name's are short names) */
    snprintf(note, sizeof note, "input = pixel byte / 255, float32 NCHW (batch, %d, %d, %d); channels grey or R,G,B%s%s",
             net->input.c, net->input.h, net->input.w, normalisation(norm, sizeof norm, x->info),
             x->info->nclass_names ? "; images of other sizes first resized (bilinear, PIL's) so that they cover HxW, "
                                     "then centre-cropped to it, as torchvision's Resize + CenterCrop"
                                   : "");
    dt_onnx_meta(x->m, "preprocessing", note);
    dt_onnx_meta(x->m, "model_file", x->info->model_path);
    dt_onnx_meta(x->m, "weights", x->info->weights_path);
    for (int c = 0; c < x->info->nclass_names; c++)
        dt_onnx_meta(x->m, dt_onnx_name(x->m, "class_%d", c), x->info->class_names[c]);
}

dt_status dt_export_onnx(const dt_net *net, const char *path, const dt_export_info *info) {
    DT_TRY(check_exportable(net, info));
    dt_onnx *m;
    DT_TRY(dt_onnx_create(&m));
    const char **names = calloc((size_t)net->nlayers, sizeof *names);
    int *ranks = calloc((size_t)net->nlayers, sizeof *ranks);
    dt_status s = DT_OK;
    if (!names || !ranks) {
        s = dt_fail(DT_ERR_NOMEM, "export: out of memory");
    } else {
        export_ctx x = {m, net, info, names, ranks, 0};
        emit_graph(&x);
        emit_metadata(&x);
        char doc[1200];
        snprintf(doc, sizeof doc, "%s trained by dtrain; parameters from %s", info->model_path,
                 info->weights_path);
        s = dt_onnx_write(m, path, "dtrain", info->version, doc);
    }
    free(names);
    free(ranks);
    dt_onnx_free(m);
    return s;
}

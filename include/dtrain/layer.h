/* Layers: one file per kind in src/layers/, all behind one small vtable.
 *
 * Conventions
 * - Activations are floats in NCHW or, where the net chose it, a blocked
 *   layout (see dt_layout; `in_layout`/`out_layout`); a layer's per-sample shapes
 *   are `in`/`out` either way. In a bf16 net, blocked activations between
 *   layers that all handle it hold bf16 values instead (`in_bf16`/`out_bf16`,
 *   ops->bf16_acts).
 * - Forward/backward signatures: outputs first, then saved inputs, then
 *   batch size and scratch. All activation, parameter and scratch buffers
 *   are preallocated by the net; layers know nothing about MPI and never
 *   fail at run time. The one exception to "no allocation" is the oneDNN
 *   convolution, which builds and caches its primitives and blocked-layout
 *   buffers (in l->impl) on the first call at each batch size; if oneDNN
 *   cannot, that batch size uses the im2col + GEMM path instead.
 * - Trainable parameters `w`, `b` and their gradients `dw`, `db` are views
 *   into the net's flat parameter/gradient blocks. backward() OVERWRITES
 *   dw/db with the gradient of the batch loss (the loss gradient it receives
 *   is already divided by the batch size, so no layer divides by B). dw is
 *   NULL, for kinds with ops->optional_wgrad, when the net's owner computes
 *   the weight gradient itself (dt_net_leave_weight_grad: SFB rebuilds it
 *   from sufficient factors); backward then skips that product.
 * - `din` may be NULL: the first layer skips its input gradient.
 * - Non-trainable state (batch-norm running statistics) lives in `state`, a
 *   view into the net's flat buffer block, checkpointed with the parameters.
 * - Per-batch values backward needs (max-pool argmax, dropout mask, BN
 *   mean and 1/std, LRN scale) live in `saved`, sized by saved_floats().
 * - `ws` is a scratch area shared by all layers, sized by the net to the
 *   largest workspace_floats() of any layer (im2col columns etc.).
 */
#ifndef DTRAIN_LAYER_H
#define DTRAIN_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/rng.h"
#include "dtrain/status.h"

typedef struct {
    int c, h, w;
} dt_shape;

static inline size_t dt_shape_size(dt_shape s) { return (size_t)s.c * (size_t)s.h * (size_t)s.w; }

typedef enum {
    DT_ACT_LINEAR = 0,
    DT_ACT_RELU,
    DT_ACT_LEAKY,  /* max(x, slope*x), slope from spec.act.slope (default 0.1) */
    DT_ACT_TANH,
    DT_ACT_SIGMOID,
    DT_ACT_RAMP,   /* Darknet's: x > 0 ? 1.1 x : 0.1 x */
    DT_ACT_COUNT
} dt_activation;

/* The layer kinds, X(ENUM, name): kind DT_LAYER_<ENUM>, whose ops are
 * dt_<name>_ops in src/layers/<file>.c (the registry, registry.c, is built
 * from this list). Adding a kind is its file and one line here, and for a
 * kind with keys of its own its dt_<name>_spec below and its member in
 * dt_layer_spec's union. */
#define DT_LAYER_KINDS(X)                                                                        \
    X(CONV, conv)           /* [convolutional] */                                                \
    X(MAXPOOL, maxpool)     /* [maxpool] */                                                      \
    X(AVGPOOL, avgpool)     /* [avgpool] */                                                      \
    X(DENSE, dense)         /* [connected] */                                                    \
    X(ACT, act)             /* [activation] (also split off a section's activation=) */          \
    X(DROPOUT, dropout)     /* [dropout] */                                                      \
    X(LRN, lrn)             /* [lrn] local response normalisation across channels */             \
    X(BATCHNORM, batchnorm) /* [batchnorm] (also split off batch_normalize=1) */                 \
    X(SOFTMAX, softmax)     /* [softmax], must be last; trained with cross-entropy */            \
    X(SHORTCUT, shortcut)   /* [shortcut] previous layer's output + an earlier one's (Darknet) */ \
    X(ROUTE, route)         /* [route] earlier layers' outputs concatenated along channels */    \
    X(CROP, crop)           /* [crop] Darknet's random crop (centre crop in evaluation) */     \
    X(REORG, reorg)         /* [reorg] Darknet's space-to-depth permutation, or extra= zeros */

typedef enum {
#define DT_LAYER_KIND_ENUM(e, name) DT_LAYER_##e,
    DT_LAYER_KINDS(DT_LAYER_KIND_ENUM)
#undef DT_LAYER_KIND_ENUM
    DT_LAYER_KIND_COUNT
} dt_layer_kind;

/* The arithmetic of convolutions and connected layers (see dnnl_layer.h):
 * fp32, or bf16 operands with f32 accumulation and f32 weight gradients.
 * Master weights, optimiser state, softmax and the loss are fp32 in either;
 * in bf16, an activation (and its gradient) between layers that all handle
 * it in bf16 is stored in bf16 (dt_layer.in_bf16, out_bf16; the net
 * chooses, dt_net_set_precision), the others are fp32. */
typedef enum { DT_PRECISION_FP32 = 0, DT_PRECISION_BF16, DT_PRECISION_COUNT } dt_precision;

const char *dt_precision_name(dt_precision p); /* "fp32", "bf16" */
int dt_precision_from_name(const char *name);  /* -1 if unknown */
/* DT_OK when this CPU runs p natively (bf16: AVX512_BF16 or AMX-BF16, as
 * oneDNN finds them, ONEDNN_MAX_CPU_ISA included); else DT_ERR_CONFIG
 * naming the instructions that are missing. Never a slow emulation. */
dt_status dt_precision_check(dt_precision p);

/* How an activation (and its gradient) is laid out in memory. NCHW is the
 * net's own; the blocked layouts are oneDNN's nChw8c and nChw16c, (B, C/k,
 * H, W, k) with channel c at block c/k, lane c%k: what its convolutions
 * compute in with AVX2 (k = 8) and AVX-512 (k = 16), so a convolution
 * reading or writing one needs no reorder. The net chooses per activation
 * (dt_net_create): the CPU's blocked layout (dt_layout_native) where every
 * layer touching it handles it and C is a multiple of k. */
typedef enum { DT_LAYOUT_NCHW = 0, DT_LAYOUT_NCHW8C, DT_LAYOUT_NCHW16C } dt_layout;
#define DT_LAYOUT_MAX_BLOCK 16

/* k of a layout: channels a block (1 for NCHW). */
static inline int dt_layout_block(dt_layout t) {
    return t == DT_LAYOUT_NCHW16C ? 16 : t == DT_LAYOUT_NCHW8C ? 8 : 1;
}

/* "nchw", "nChw8c", "nChw16c" (oneDNN's names). */
const char *dt_layout_name(dt_layout t);

/* What a kind does with layouts (dt_layer_ops.layouts):
 *   NCHW:    reads and writes NCHW only (the default);
 *   FOLLOW:  elementwise or per channel: its inputs and output share one
 *            layout, whichever it is;
 *   READS_ANY: reads either layout, writes NCHW (global average pooling);
 *   ANY:     each side either, independently (convolutions). */
typedef enum {
    DT_LAYOUTS_NCHW = 0,
    DT_LAYOUTS_FOLLOW,
    DT_LAYOUTS_READS_ANY,
    DT_LAYOUTS_ANY
} dt_layout_rule;

/* The blocked layout oneDNN's f32 convolutions compute in on this CPU, as
 * oneDNN finds it (ONEDNN_MAX_CPU_ISA included): NCHW16C with AVX-512,
 * NCHW8C with AVX2; NCHW below AVX2 (the net then keeps NCHW). */
dt_layout dt_layout_native(void);

/* Most inputs a layer takes (a [route] of up to this many layers). */
#define DT_LAYER_MAX_INPUTS 8
/* The longest tree= path a [softmax] keeps, with its NUL (the spec is copied whole: kept short). */
#define DT_TREE_PATH_MAX 256

/* Each kind's own hyperparameters, as the model file gives them: one struct
 * per kind, the member of dt_layer_spec's union named after the kind (bn:
 * batchnorm). They
 * are here, not in the kind's file, because dt_layer_spec is a value type
 * (model specs, checkpoints' architecture, tests build them) and C needs the
 * whole definition; the keys that fill them are in the kind's file. Field
 * names are the kind's model-file keys where that is short enough. */
typedef struct {
    int filters;  /* output channels */
    int groups;   /* channel groups, each filter reading its group's C / groups input
                     channels (0 or 1: none); C and filters divide by it */
    int dilation; /* spacing of the kernel's taps, which span (size - 1) x dilation + 1
                     cells (0 or 1: adjacent) */
} dt_conv_spec;

typedef struct {
    int outputs; /* output= */
} dt_dense_spec;

typedef struct {
    dt_activation fn;
    float slope; /* DT_ACT_LEAKY's: max(x, slope x) */
} dt_act_spec;

typedef struct {
    float p; /* probability of dropping, in [0, 1) */
} dt_dropout_spec;

typedef struct {
    int size;                  /* channels in the window (odd) */
    float alpha, beta, k;      /* b = a / (k + alpha/size * sum a^2)^beta (PyTorch) */
} dt_lrn_spec;

typedef struct {
    float momentum; /* running = (1-m)*running + m*batch (PyTorch, 0.1) */
    float eps;      /* 1e-5 */
} dt_batchnorm_spec;

typedef struct {
    float temp;                  /* probabilities of in / temperature (0 or 1: none) */
    int tree_nodes, tree_groups; /* Darknet's tree= (hierarchical softmax: one per group of
                                    sibling nodes), its nodes and groups; 0: none */
    char tree_path[DT_TREE_PATH_MAX]; /* tree='s file, resolved ("": none); the layer reads it
                                         (dtrain/softmax_tree.h) when the net is built */
} dt_softmax_spec;

typedef struct {
    int h, w;     /* output height and width */
    int flip;     /* 1: mirror half of the training images */
    int noadjust; /* 0: outputs 2 x - 1 (Darknet's [0, 1] -> [-1, 1]); 1: x */
    float shift;  /* training adds (u - 1/2) x shift per image and channel */
} dt_crop_spec;

typedef struct {
    int reverse; /* 1: depth to space (out C / s^2, H s, W s) */
    int extra;   /* > 0: the input flattened, then this many zeros */
} dt_reorg_spec;

/* Hyperparameters of one layer as the model file gives them: what every
 * kind has or several share, then one kind's own in the union. Only the
 * member of `kind` means anything: code never reads another kind's member,
 * it checks the kind first. */
typedef struct {
    dt_layer_kind kind;
    /* The layers whose outputs this one reads, as indices of earlier layers
     * of the net (-1: the net's input). ninputs 0 means "the previous
     * layer" (the input for layer 0). Shortcut: {previous, from}; route:
     * the listed layers in order. */
    int ninputs;
    int inputs[DT_LAYER_MAX_INPUTS];
    int line;    /* line of the section in the model file, for errors */
    int no_bias; /* conv/dense: no bias (batch norm after it gives the shift); the parser
                    sets it for every kind from the fused batch_normalize= key */
    int size;    /* conv kernel / pool window (square); avgpool 0: global */
    int stride;  /* conv / pool / reorg */
    int pad;     /* conv / pool: zero padding before (top/left) and, for conv and avgpool,
                    after (pool: padded cells never win / are counted) */
    int pad_extra; /* maxpool: one more padded cell after (bottom/right), 0 or 1: Darknet's
                      total padding T is pad = T/2, pad_extra = T%2; conv and avgpool
                      refuse it */
    union {
        dt_conv_spec conv;
        dt_dense_spec dense;
        dt_act_spec act;
        dt_dropout_spec dropout;
        dt_lrn_spec lrn;
        dt_batchnorm_spec bn;
        dt_softmax_spec softmax;
        dt_crop_spec crop;
        dt_reorg_spec reorg;
    };
} dt_layer_spec;

/* A convolution's channel groups and dilation (1 when the spec says 0 or 1,
 * and for the other windowed kinds, whose shared window code asks too). */
static inline int dt_layer_groups(const dt_layer_spec *s) {
    return s->kind == DT_LAYER_CONV && s->conv.groups > 1 ? s->conv.groups : 1;
}
static inline int dt_layer_dilation(const dt_layer_spec *s) {
    return s->kind == DT_LAYER_CONV && s->conv.dilation > 1 ? s->conv.dilation : 1;
}

typedef struct dt_layer {
    dt_layer_spec spec;
    const struct dt_layer_ops *ops;
    dt_shape in, out;      /* per-sample shapes, set by setup(); in = ins[0] */
    int ninputs;           /* >= 1, resolved by the net from spec.ninputs */
    dt_shape ins[DT_LAYER_MAX_INPUTS]; /* each input's shape, set by the net */
    float *w, *dw;         /* conv (F, C, K, K); dense (out, in); bn gamma (C) */
    size_t nw;
    float *b, *db;         /* conv (F); dense (out); bn beta (C) */
    size_t nb;
    float *state;          /* bn: running mean (C) then running var (C) */
    size_t nstate;
    float *saved;          /* saved_floats(batch) floats, see above */
    uint64_t seed;         /* dropout, crop: per-layer seed (from run seed and layer index) */
    uint64_t step;         /* dropout, crop: set by the net before each forward, as is */
    uint64_t sample_base;  /* the batch's first sample in the global batch: image b's draws
                              are f(seed, step, sample_base + b) */
    dt_precision precision; /* conv, dense: of their products; set by the net */
    int winograd;          /* conv: 1 when it may run Winograd's algorithm ([net] winograd); set by
                              the net */
    int relu_out;          /* set by the net (ops->fuses_relu): the output is ReLU'd in the
                              same pass, and backward masks dout by out > 0; the [activation]
                              reading it is `folded` */
    int folded;            /* set by the net: a ReLU done by the layer it reads; runs nothing,
                              its output is that layer's buffer */
    dt_layout in_layout;   /* of every input (FOLLOW kinds' inputs share one), set by the net
                              at create; NCHW unless ops->layouts allows another */
    dt_layout out_layout;  /* of the output (and of its gradient), likewise */
    int in_bf16;           /* set by the net (dt_net_set_precision): the input (and its gradient)
                              is stored as bf16 values, 2 bytes each, in the first half of its
                              float buffer; only where ops->bf16_acts says the layer handles it */
    int out_bf16;          /* the same for the output and its gradient */
    void *impl;            /* kind-private state kept between calls (conv: oneDNN primitives),
                              NULL until forward/backward creates it; freed by ops->destroy */
} dt_layer;

/* A kind's model-file keys and the parser's view of its section
 * (src/layers/layer_keys.h). */
struct dt_key_def;
struct dt_section;
struct dt_section_vals;

/* What a kind is, for the code outside src/layers that treats some kinds
 * apart (dt_layer_ops.caps), so that it asks the kind instead of naming it:
 *   FACTORS  weights (out, in) whose gradient is a sum over the batch of
 *            outer products (output gradient x input), so sufficient
 *            factors can carry it (--sfb/--sacp plans, the simulator);
 *   SCALES   its weights are per-channel scales, not a matrix: optimisers
 *            treat them as plain tensors, like biases (no trust ratio and
 *            no weight decay when excluded);
 *   FOLDS    a ReLU of this kind may run inside the layer it reads (a
 *            reader whose ops->fuses_relu is set), aliasing its output. */
enum { DT_LAYER_CAP_FACTORS = 1 << 0, DT_LAYER_CAP_SCALES = 1 << 1, DT_LAYER_CAP_FOLDS = 1 << 2 };

typedef struct dt_layer_ops {
    const char *name;  /* section name in model files, e.g. "convolutional" */
    /* The section's keys, a table ending in {0} (src/layers/layer_keys.h),
     * and, for kinds with keys that are not spec fields or defaults that
     * depend on other keys, the hook that finishes *layer (v->spec as read)
     * from them when the section ends (NULL: v->spec is the layer). */
    const struct dt_key_def *keys;
    dt_status (*end_section)(const struct dt_section *s, const struct dt_section_vals *v, dt_layer_spec *layer);
    /* Validates spec against l->in, sets l->out, nw, nb, nstate. Errors are
     * DT_ERR_CONFIG with a message starting "line N: [section] ..." (the net
     * builder prefixes the file name). Sizes are overflow-checked. */
    dt_status (*setup)(dt_layer *l);
    size_t (*saved_floats)(const dt_layer *l, int batch);
    size_t (*workspace_floats)(const dt_layer *l, int batch);
    /* Initial parameters and state (PyTorch's defaults for the layer). */
    void (*init)(dt_layer *l, dt_rng *rng);
    /* out (B, out) <- in (B, in). train != 0: dropout active, BN batch stats. */
    void (*forward)(dt_layer *l, float *out, const float *in, int batch, int train, float *ws);
    /* din (B, in) and dw/db <- dout (B, out), given the forward's in and out. */
    void (*backward)(dt_layer *l, float *din, const float *dout, const float *in,
                     const float *out, int batch, float *ws);
    /* Kinds with several inputs (shortcut, route) have these instead of
     * forward/backward (which are NULL): in[k] (B, ins[k]), the forward's
     * out (B, out) given back to backward_n, and din[k]
     * (B, ins[k]) overwritten, NULL where input k is the net's data. The
     * din[k] are distinct buffers even when two inputs are the same layer
     * (the net adds them up). */
    void (*forward_n)(struct dt_layer *l, float *out, const float *const *in, int batch);
    void (*backward_n)(struct dt_layer *l, float *const *din, const float *dout, const float *out,
                       int batch);
    /* Plain loops computing the same as forward/backward, kept for tests.
     * NULL when forward/backward already are plain loops. */
    void (*forward_ref)(dt_layer *l, float *out, const float *in, int batch, int train, float *ws);
    void (*backward_ref)(dt_layer *l, float *din, const float *dout, const float *in,
                         const float *out, int batch, float *ws);
    /* 1: forward and backward honour l->relu_out, so a ReLU [activation]
     * that is the only reader of the output runs inside this layer's passes
     * (saving a read and a write of the activation and of its gradient). */
    int fuses_relu;
    /* 1: backward accepts dw NULL (see the conventions above). */
    int optional_wgrad;
    /* Which layouts the layer handles (NULL: DT_LAYOUTS_NCHW). Gradients
     * travel in their activation's layout. */
    dt_layout_rule (*layouts)(const dt_layer *l);
    /* 1 when the layer, as it is now (its precision, folded), reads and
     * writes bf16 activations (in_bf16, out_bf16) in the blocked layout: a
     * FOLLOW kind both sides at once, an ANY kind each side alone (NULL:
     * never). */
    int (*bf16_acts)(const dt_layer *l);
    /* Multiply-adds x2 of one sample's forward pass (for info and GFLOP/s). */
    uint64_t (*flops)(const dt_layer *l);
    /* Frees l->impl (no-op when NULL). Whoever owns a layer calls it before
     * dropping it (dt_net_free does). NULL when the kind keeps no impl. */
    void (*destroy)(dt_layer *l);
    unsigned caps;     /* DT_LAYER_CAP_* */
    /* The axes of w as the layer stores it, outermost first, into dims;
     * returns their count (NULL: one axis of l->nw). Convolution: (F,
     * C/groups, K, K); connected: (out, in). */
    int (*weight_dims)(const dt_layer *l, size_t dims[4]);
} dt_layer_ops;

/* The precision a layer of the net runs in when the net's is p: p, except
 * that a convolution of 1 or 2 input channels (a first layer on grey
 * images) stays fp32, where oneDNN's bf16 kernels were slower (cnn's
 * 1-channel conv on the Xeon: 4.4 ms a step in bf16, 3.5 in fp32). An RGB
 * stem runs bf16: resnet18's 7x7 stem took 13.3 + 10.5 ms a step in bf16
 * against 19.3 + 20.7 in fp32 (Zen 4, batch 16, 2 threads). */
dt_precision dt_layer_precision(const dt_layer *l, dt_precision p);

/* 1 when convolution l runs Winograd's algorithm (src/layers/winograd.h):
 * l->winograd is set ([net] winograd=1, the default), it is 3x3 with
 * stride 1, padding 1, no dilation or groups, in fp32, with at most 128
 * channels and filters, its input and output are nChw8c (the net's layout
 * on AVX2 CPUs without AVX-512; channels and filters are then multiples of
 * 8), or nChw16c on AMD's Zen 4 (AVX-512 at AVX2's FMA width), and the CPU
 * has AVX2 and FMA. */
int dt_layer_winograd(const dt_layer *l);
/* Whether convolution l tries oneDNN's Winograd (its F(4x4, 3x3) kernels
 * for all three passes, the direct ones where oneDNN refuses the shape):
 * l->winograd is set, it is 3x3 with stride 1, no dilation or groups, in
 * fp32, between nChw16c activations (AVX-512), where dt_layer_winograd's
 * kernels do not run (Intel's AVX-512; on Zen 4 the layers wider than
 * theirs). */
int dt_layer_dnnl_winograd(const dt_layer *l);

/* dst (n) += src (n): activation gradients, bf16 values when bf16 (the
 * net's sum of a fanned-out activation's gradients). */
void dt_layer_add_acts(float *dst, const float *src, size_t n, int bf16);

/* The ops of a kind (never NULL for a valid kind). */
const dt_layer_ops *dt_layer_ops_of(dt_layer_kind kind);

/* Section name <-> kind ("convolutional" -> DT_LAYER_CONV); -1 if unknown. */
int dt_layer_kind_from_name(const char *name);
const char *dt_activation_name(dt_activation a);
int dt_activation_from_name(const char *name); /* -1 if unknown; Darknet's "logistic" is sigmoid */

/* A class label: 32-bit so that ImageNet-22K's 21841 classes (and more)
 * fit; data sets, the loader, the loss and the metrics all pass labels as
 * arrays of dt_label. */
typedef int32_t dt_label;

/* Softmax cross-entropy head: given the logits (B, C) fed to the softmax
 * layer, its probabilities (B, C) = softmax(z / T) and labels (B), writes
 * dlogits (B, C) = (p - onehot) / (T B) and returns the summed (not
 * averaged) loss logsumexp(z / T) - z_y / T. Labels are < C (checked by the
 * loader). T is the layer's temperature (dt_softmax_temperature). */
double dt_softmax_xent_loss(float *dlogits, const float *logits, const float *probs,
                            const dt_label *labels, int batch, int classes, float temperature);

/* A softmax layer's temperature: its spec's, 1 when that is 0 (unset). */
static inline float dt_softmax_temperature(const dt_layer_spec *s) {
    return s->softmax.temp > 0 ? s->softmax.temp : 1.0f;
}

#endif

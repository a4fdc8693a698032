/* [reorg]: Darknet's reorg layer (src/reorg_layer.c), a fixed permutation
 * of each sample's values, so backward is its inverse. With the input
 * (C, H, W) and stride s, Darknet's reorg_cpu pairs the flat index
 *   a = x + W (y + H k)                                   (k < C, y < H, x < W)
 * with
 *   p(a) = (x s + o % s) + W s ((y s + o / s) + H s (k % C')),
 * where C' = C / s^2 and o = k / C'. Forward (reverse=0): out[a] = in[p(a)],
 * out (C s^2, H / s, W / s); reverse=1: out[p(a)] = in[a], out (C / s^2,
 * H s, W s). (Darknet's forward calls reorg_cpu with forward=0, hence the
 * direction.) extra=N instead passes the C H W values through and appends
 * N zeros (go.cfg's "pass" move): out (C H W + N, 1, 1); its gradient
 * drops the N. No saved buffers: the permutation is recomputed. */
#include <string.h>

#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

static dt_status reorg_setup(dt_layer *l) {
    DT_TRY(dt_layer_check_shape(l, l->in, "input"));
    const dt_shape in = l->in;
    const int s = l->spec.stride, s2 = s * s;
    l->nw = l->nb = l->nstate = 0;
    if (l->spec.reorg.extra) {
        l->out = (dt_shape){(int)dt_shape_size(in) + l->spec.reorg.extra, 1, 1};
        return dt_layer_check_shape(l, l->out, "output");
    }
    if (in.c % s2)
        return dt_layer_config_error(l, "stride %d needs input channels divisible by %d (stride squared), got %d",
                                     s, s2, in.c);
    if (l->spec.reorg.reverse) {
        l->out = (dt_shape){in.c / s2, in.h * s, in.w * s};
        return dt_layer_check_shape(l, l->out, "output");
    }
    if (in.h % s || in.w % s)
        return dt_layer_config_error(l, "stride %d must divide the input's %dx%d", s, in.h, in.w);
    l->out = (dt_shape){in.c * s2, in.h / s, in.w / s};
    return DT_OK;
}

/* Darknet's reorg_cpu pairing: p(a) for a = x + W (y + H k), input (C, H, W). */
static size_t reorg_pair(dt_shape in, int s, int k, int y, int x) {
    const int cc = in.c / (s * s), o = k / cc;
    return (size_t)(x * s + o % s) +
           (size_t)in.w * s * ((size_t)(y * s + o / s) + (size_t)in.h * s * (size_t)(k % cc));
}

/* dst (B, n) <- src (B, n) permuted: gather (dst[a] = src[p(a)]) or
 * scatter (dst[p(a)] = src[a]); n = C H W of the input. */
static void permute(const dt_layer *l, float *dst, const float *src, int batch, int gather) {
    const dt_shape in = l->in;
    const size_t n = dt_shape_size(in);
    for (int b = 0; b < batch; b++) {
        float *d = dst + (size_t)b * n;
        const float *x0 = src + (size_t)b * n;
        size_t a = 0;
        for (int k = 0; k < in.c; k++)
            for (int y = 0; y < in.h; y++)
                for (int x = 0; x < in.w; x++, a++) {
                    size_t p = reorg_pair(in, l->spec.stride, k, y, x);
                    if (gather)
                        d[a] = x0[p];
                    else
                        d[p] = x0[a];
                }
    }
}

/* out (B, out) <- in (B, C, H, W) permuted, or with extra followed by zeros. */
static void reorg_forward(dt_layer *l, float *out, const float *in, int batch, int train, float *ws) {
    (void)train, (void)ws;
    const size_t n = dt_shape_size(l->in), m = dt_shape_size(l->out);
    if (l->spec.reorg.extra) {
        for (int b = 0; b < batch; b++) {
            memcpy(out + (size_t)b * m, in + (size_t)b * n, sizeof(float) * n);
            memset(out + (size_t)b * m + n, 0, sizeof(float) * (m - n));
        }
        return;
    }
    permute(l, out, in, batch, !l->spec.reorg.reverse);
}

/* din (B, C, H, W) <- dout (B, out) through the inverse permutation (extra:
 * its first C H W values). */
static void reorg_backward(dt_layer *l, float *din, const float *dout, const float *in, const float *out,
                           int batch, float *ws) {
    (void)in, (void)out, (void)ws;
    if (!din) return;
    const size_t n = dt_shape_size(l->in), m = dt_shape_size(l->out);
    if (l->spec.reorg.extra) {
        for (int b = 0; b < batch; b++) memcpy(din + (size_t)b * n, dout + (size_t)b * m, sizeof(float) * n);
        return;
    }
    permute(l, din, dout, batch, l->spec.reorg.reverse);
}

/* ---- model-file keys ---------------------------------------------------- */

/* Darknet's flatten= (an NCHW -> NHWC transpose) is used by none of its
 * classifier files and is refused. */
typedef struct {
    int flatten;
} reorg_own_keys;
DT_OWN_FITS(reorg_own_keys);

static const dt_key_def reorg_keys[] = {
    {"stride", DT_KEY_INT, DT_SPEC_KEY(stride), 1, 1, DT_KEY_DIM_MAX, 0, NULL},
    {"reverse", DT_KEY_INT, DT_SPEC_KEY(reorg.reverse), 0, 0, 1, 0, NULL},
    {"extra", DT_KEY_INT, DT_SPEC_KEY(reorg.extra), 0, 0, DT_KEY_DIM_MAX, 0, NULL},
    {"flatten", DT_KEY_INT, DT_OWN_KEY(reorg_own_keys, flatten), 0, 0, 1, 0, NULL},
    {0}};

static dt_status reorg_end_section(const dt_section *s, const dt_section_vals *v, dt_layer_spec *layer) {
    (void)layer;
    const reorg_own_keys *k = (const reorg_own_keys *)(const void *)&v->own;
    if (k->flatten)
        return dt_section_error(s, dt_section_key_line(s, "flatten"),
                                "[reorg] flatten=1 (Darknet's NCHW -> NHWC transpose) is not implemented");
    return DT_OK;
}

const dt_layer_ops dt_reorg_ops = {
    .name = "reorg",
    .keys = reorg_keys,
    .end_section = reorg_end_section,
    .setup = reorg_setup,
    .saved_floats = dt_layer_no_floats,
    .workspace_floats = dt_layer_no_floats,
    .init = dt_layer_init_none,
    .forward = reorg_forward,
    .backward = reorg_backward,
    .flops = dt_layer_flops_elems,
};

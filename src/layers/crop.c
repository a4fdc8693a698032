/* [crop]: Darknet's crop layer (src/crop_layer.c), the first layer of its
 * AlexNet, VGG-16 and Extraction (GoogLeNet) files. in (C, H, W) -> out
 * (C, crop_h, crop_w): in training each image's window starts at a random
 * (dh, dw) in [0, H - crop_h] x [0, W - crop_w] and, with flip=1, is
 * mirrored half the time; in evaluation it is the centre window (offsets
 * (H - crop_h) / 2, (W - crop_w) / 2), never mirrored. Values become
 * 2 x - 1 (Darknet maps its [0, 1] images to [-1, 1] here) unless
 * noadjust=1. In training, shift= adds (u - 1/2) x shift to every value
 * of channel c of an image, u uniform in [0, 1) per image and channel (as
 * Darknet's GPU layer, levels_image_kernel; its CPU layer ignores shift).
 * The draws of image b come from (seed, step, its position in the global
 * batch), one per image as Darknet's GPU layer (its CPU layer draws once
 * per batch).
 * saved (B, 3): each image's dh, dw and flip, for backward. */
#include <string.h>

#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

static dt_status crop_setup(dt_layer *l) {
    DT_TRY(dt_layer_check_shape(l, l->in, "input"));
    if (l->spec.crop.h < 1 || l->spec.crop.w < 1 || l->spec.crop.h > l->in.h || l->spec.crop.w > l->in.w)
        return dt_layer_config_error(l, "crop of %dx%d does not fit the %dx%d input", l->spec.crop.h, l->spec.crop.w,
                                     l->in.h, l->in.w);
    l->out = (dt_shape){l->in.c, l->spec.crop.h, l->spec.crop.w};
    l->nw = l->nb = l->nstate = 0;
    return DT_OK;
}

static size_t crop_saved_floats(const dt_layer *l, int batch) {
    (void)l;
    return 3 * (size_t)batch;
}

static float crop_scale(const dt_layer *l) { return l->spec.crop.noadjust ? 1.0f : 2.0f; }

/* out (B, C, ch, cw) <- in (B, C, H, W) windows; saved (B, 3) <- dh, dw, flip. */
static void crop_forward(dt_layer *l, float *out, const float *in, int batch, int train, float *ws) {
    (void)ws;
    const dt_shape is = l->in, os = l->out;
    const float scale = crop_scale(l), shift = l->spec.crop.noadjust ? 0.0f : -1.0f;
    for (int b = 0; b < batch; b++) {
        int dh = (is.h - os.h) / 2, dw = (is.w - os.w) / 2, flip = 0;
        if (train) {
            dt_rng r = dt_rng_seed(dt_hash3(l->seed, l->step, l->sample_base + (uint64_t)b));
            dh = (int)dt_rng_below(&r, (uint32_t)(is.h - os.h + 1));
            dw = (int)dt_rng_below(&r, (uint32_t)(is.w - os.w + 1));
            flip = l->spec.crop.flip && (dt_rng_next(&r) >> 63);
        }
        float *sv = l->saved + 3 * (size_t)b;
        sv[0] = (float)dh, sv[1] = (float)dw, sv[2] = (float)flip;
        /* A second stream for the shifts, so that shift= leaves the windows' draws as they were. */
        dt_rng rs = dt_rng_seed(dt_hash3(l->seed ^ 0x5368696674ULL, l->step, l->sample_base + (uint64_t)b));
        for (int c = 0; c < os.c; c++) {
            float add = shift;
            if (train && l->spec.crop.shift != 0) add += ((float)dt_rng_uniform(&rs) - 0.5f) * l->spec.crop.shift;
            for (int y = 0; y < os.h; y++) {
                const float *row = in + (((size_t)b * (size_t)is.c + (size_t)c) * (size_t)is.h + (size_t)(y + dh)) *
                                            (size_t)is.w + (size_t)dw;
                float *o = out + (((size_t)b * (size_t)os.c + (size_t)c) * (size_t)os.h + (size_t)y) * (size_t)os.w;
                for (int x = 0; x < os.w; x++) o[x] = row[flip ? os.w - 1 - x : x] * scale + add;
            }
        }
    }
}

/* din (B, C, H, W) <- dout scattered into each image's window, x scale;
 * zero outside it. */
static void crop_backward(dt_layer *l, float *din, const float *dout, const float *in, const float *out, int batch,
                          float *ws) {
    (void)in, (void)out, (void)ws;
    if (!din) return;
    const dt_shape is = l->in, os = l->out;
    const float scale = crop_scale(l);
    memset(din, 0, sizeof(float) * dt_shape_size(is) * (size_t)batch);
    for (int b = 0; b < batch; b++) {
        const float *sv = l->saved + 3 * (size_t)b;
        int dh = (int)sv[0], dw = (int)sv[1], flip = sv[2] != 0;
        for (int c = 0; c < os.c; c++)
            for (int y = 0; y < os.h; y++) {
                float *row = din + (((size_t)b * (size_t)is.c + (size_t)c) * (size_t)is.h + (size_t)(y + dh)) *
                                       (size_t)is.w + (size_t)dw;
                const float *g = dout + (((size_t)b * (size_t)os.c + (size_t)c) * (size_t)os.h + (size_t)y) * (size_t)os.w;
                for (int x = 0; x < os.w; x++) row[flip ? os.w - 1 - x : x] = g[x] * scale;
            }
    }
}

/* ---- model-file keys ---------------------------------------------------- */

/* Darknet's keys that only its GPU layer applies and dtrain does not,
 * accepted at their neutral values (its own files write them so). */
typedef struct {
    float angle, saturation, exposure;
} crop_own_keys;
DT_OWN_FITS(crop_own_keys);

static const dt_key_def crop_keys[] = {
    {"crop_height", DT_KEY_INT, DT_SPEC_KEY(crop.h), 0, 1, DT_KEY_DIM_MAX, DT_KEY_REQUIRED, NULL},
    {"crop_width", DT_KEY_INT, DT_SPEC_KEY(crop.w), 0, 1, DT_KEY_DIM_MAX, DT_KEY_REQUIRED, NULL},
    {"flip", DT_KEY_INT, DT_SPEC_KEY(crop.flip), 0, 0, 1, 0, NULL},
    {"noadjust", DT_KEY_INT, DT_SPEC_KEY(crop.noadjust), 0, 0, 1, 0, NULL},
    {"angle", DT_KEY_FLOAT, DT_OWN_KEY(crop_own_keys, angle), 0, -180, 180, 0, NULL},
    {"saturation", DT_KEY_FLOAT, DT_OWN_KEY(crop_own_keys, saturation), 1, 0, 100, DT_KEY_LO_OPEN, NULL},
    {"exposure", DT_KEY_FLOAT, DT_OWN_KEY(crop_own_keys, exposure), 1, 0, 100, DT_KEY_LO_OPEN, NULL},
    {"shift", DT_KEY_FLOAT, DT_SPEC_KEY(crop.shift), 0, -100, 100, 0, NULL},
    {0}};

static dt_status crop_end_section(const dt_section *s, const dt_section_vals *v, dt_layer_spec *layer) {
    (void)layer;
    const crop_own_keys *k = (const crop_own_keys *)(const void *)&v->own;
    const struct {
        const char *key;
        float value, neutral;
    } gpu_only[] = {{"angle", k->angle, 0}, {"saturation", k->saturation, 1}, {"exposure", k->exposure, 1}};
    for (size_t i = 0; i < sizeof gpu_only / sizeof *gpu_only; i++)
        if (gpu_only[i].value != gpu_only[i].neutral)
            return dt_section_error(s, dt_section_key_line(s, gpu_only[i].key),
                                    "[crop] %s=%g: only Darknet's GPU crop applies it (dtrain's [crop] is its CPU "
                                    "layer: window, flip, rescale); give %g, and use [net]'s angle=, saturation=, "
                                    "exposure= for Darknet's augmentation",
                                    gpu_only[i].key, (double)gpu_only[i].value, (double)gpu_only[i].neutral);
    return DT_OK;
}

const dt_layer_ops dt_crop_ops = {
    .name = "crop",
    .keys = crop_keys,
    .end_section = crop_end_section,
    .setup = crop_setup,
    .saved_floats = crop_saved_floats,
    .workspace_floats = dt_layer_no_floats,
    .init = dt_layer_init_none,
    .forward = crop_forward,
    .backward = crop_backward,
    .flops = dt_layer_flops_elems,
};

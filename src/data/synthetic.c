/* Seeded synthetic data. Each class has a template image of random bytes; a
 * sample is the average of its class template and uniform noise, so the
 * classes are learnable (far apart on average) but individual pixels are
 * noisy.
 *
 * Two splitmix64 streams (rng.h) make the bytes, eight per draw:
 *   templates: seeded by (seed), its bytes the classes' templates one after
 *     another, (classes, C, H, W);
 *   samples: seeded by (seed, stream), per sample one draw for the label,
 *     then ceil(C*H*W / 8) draws of noise.
 * splitmix64's state after k draws is its seed's plus k increments, so
 * sample i and its template bytes are computed without the samples and
 * classes before them (dt_rng_skip): a set too large to hold is generated
 * per sample when the loader needs it, the same bytes a held set holds. */
#include "data/internal.h"
#include "dtrain/mem.h"
#include "dtrain/rng.h"

/* How a set's samples are generated: the fetch context of an unheld set. */
typedef struct {
    dt_rng templates, samples; /* the streams at their first draw */
    size_t size;               /* bytes of a sample, C*H*W */
    uint64_t draws;            /* draws of a sample: its label and its noise */
    uint32_t classes;
} synth;

/* Fills n bytes from r, eight per draw. */
static void fill_bytes(uint8_t *p, size_t n, dt_rng *r) {
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = dt_rng_next(r);
        for (size_t k = 0; k < 8 && i + k < n; k++) p[i + k] = (uint8_t)(v >> (8 * k));
    }
}

/* p[i] = (p[i] + t[i]) / 2 for i < n, t the bytes from byte `first` on of
 * the stream at r (as fill_bytes lays a stream's bytes out). */
static void average_with(uint8_t *p, size_t n, dt_rng r, uint64_t first) {
    dt_rng_skip(&r, first / 8);
    uint64_t v = dt_rng_next(&r) >> (8 * (first % 8));
    unsigned k = (unsigned)(first % 8); /* bytes of the current draw used */
    for (size_t i = 0; i < n; i++, k++) {
        if (k == 8) v = dt_rng_next(&r), k = 0;
        p[i] = (uint8_t)((p[i] + (uint8_t)v) / 2);
        v >>= 8;
    }
}

/* Sample idx's label. */
static dt_label synth_label(const synth *g, int idx) {
    dt_rng r = g->samples;
    dt_rng_skip(&r, (uint64_t)idx * g->draws);
    return (dt_label)dt_rng_below(&r, g->classes);
}

/* dt_fetch_fn: sample idx (C, H, W) into out; reads g only (thread-safe). */
static dt_status synth_fetch(void *ctx, int idx, uint8_t *out) {
    const synth *g = ctx;
    dt_rng r = g->samples;
    dt_rng_skip(&r, (uint64_t)idx * g->draws);
    uint32_t label = dt_rng_below(&r, g->classes);
    fill_bytes(out, g->size, &r);
    average_with(out, g->size, g->templates, (uint64_t)label * g->size);
    return DT_OK;
}

static void synth_free(void *ctx) {
    dt_free(ctx);
}

dt_status dt_data_synthetic(dt_dataset **out, dt_shape shape, int classes, int n, uint64_t seed,
                            uint64_t stream, size_t held_bytes) {
    *out = NULL;
    if (!dt_data_shape_ok(shape))
        return dt_fail(DT_ERR_USAGE, "synthetic dataset: shape %dx%dx%d out of range (C 1..%d, H, W 1..%d)",
                       shape.c, shape.h, shape.w, DT_DATA_MAX_CHANNELS, DT_DATA_MAX_DIM);
    if (classes < 1 || classes > DT_DATA_MAX_CLASSES)
        return dt_fail(DT_ERR_USAGE, "synthetic dataset: %d classes (must be 1..%d)", classes, DT_DATA_MAX_CLASSES);
    if (n < 1 || n > DT_DATA_MAX_SAMPLES)
        return dt_fail(DT_ERR_USAGE, "synthetic dataset: %d samples (must be 1..%d)", n,
                       DT_DATA_MAX_SAMPLES);
    void *p;
    DT_TRY(dt_alloc_bytes(&p, sizeof(synth), "synthetic dataset"));
    synth *g = p;
    g->templates = dt_rng_seed(dt_hash3(seed, 0x7e3a1a7e, 0));
    g->samples = dt_rng_seed(dt_hash3(seed, 0x5a3b1e, stream));
    g->size = dt_shape_size(shape);
    g->draws = 1 + (g->size + 7) / 8;
    g->classes = (uint32_t)classes;
    /* At most DT_DATA_MAX_SAMPLES x 64 x 4096 x 4096 bytes, below 2^57: no overflow. */
    const size_t bytes = (size_t)n * g->size;
    dt_status s = bytes <= held_bytes ? dt_data_new(out, n, shape, classes)
                                      : dt_data_new_labels(out, n, shape, classes);
    if (s != DT_OK) {
        dt_free(g);
        return s;
    }
    dt_dataset *ds = *out;
    for (int i = 0; i < n; i++) ds->labels[i] = synth_label(g, i);
    if (ds->images) {
        for (int i = 0; i < n; i++) synth_fetch(g, i, ds->images + (size_t)i * g->size);
        dt_free(g);
    } else {
        ds->fetch = synth_fetch;
        ds->fetch_ctx = g;
        ds->fetch_free = synth_free;
    }
    return DT_OK;
}

dt_status dt_dataset_synthetic(dt_dataset **out, dt_shape shape, int classes, int n, uint64_t seed) {
    return dt_data_synthetic(out, shape, classes, n, seed, 0, DT_SYNTHETIC_HELD_BYTES);
}

/* Seeded synthetic data. Each class has a template image of random bytes; a
 * sample is the average of its class template and uniform noise, so the
 * classes are learnable (far apart on average) but individual pixels are
 * noisy. */
#include "data/internal.h"
#include "dtrain/mem.h"
#include "dtrain/rng.h"

/* Fills n bytes from r, eight per draw. */
static void fill_bytes(uint8_t *p, size_t n, dt_rng *r) {
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = dt_rng_next(r);
        for (size_t k = 0; k < 8 && i + k < n; k++) p[i + k] = (uint8_t)(v >> (8 * k));
    }
}

dt_status dt_data_synthetic(dt_dataset **out, dt_shape shape, int classes, int n, uint64_t seed,
                            uint64_t stream) {
    *out = NULL;
    if (!dt_data_shape_ok(shape))
        return dt_fail(DT_ERR_USAGE, "synthetic dataset: shape %dx%dx%d out of range (C 1..%d, H, W 1..%d)",
                       shape.c, shape.h, shape.w, DT_DATA_MAX_CHANNELS, DT_DATA_MAX_DIM);
    if (classes < 1 || classes > DT_DATA_MAX_CLASSES)
        return dt_fail(DT_ERR_USAGE, "synthetic dataset: %d classes (must be 1..%d)", classes, DT_DATA_MAX_CLASSES);
    if (n < 1 || n > DT_DATA_MAX_SAMPLES)
        return dt_fail(DT_ERR_USAGE, "synthetic dataset: %d samples (must be 1..%d)", n,
                       DT_DATA_MAX_SAMPLES);
    size_t size = dt_shape_size(shape), tbytes;
    DT_TRY(dt_mul_size(&tbytes, (size_t)classes, size, "synthetic templates"));
    void *p;
    DT_TRY(dt_alloc_bytes(&p, tbytes, "synthetic templates"));
    uint8_t *templates = p; /* (classes, C, H, W) */
    dt_rng r = dt_rng_seed(dt_hash3(seed, 0x7e3a1a7e, 0));
    fill_bytes(templates, tbytes, &r);
    dt_status s = dt_data_new(out, n, shape, classes);
    if (s == DT_OK) {
        dt_dataset *ds = *out;
        r = dt_rng_seed(dt_hash3(seed, 0x5a3b1e, stream));
        for (int i = 0; i < n; i++) {
            int label = (int)dt_rng_below(&r, (uint32_t)classes);
            uint8_t *img = ds->images + (size_t)i * size;
            const uint8_t *t = templates + (size_t)label * size;
            ds->labels[i] = (dt_label)label;
            fill_bytes(img, size, &r);
            for (size_t k = 0; k < size; k++) img[k] = (uint8_t)((img[k] + t[k]) / 2);
        }
    }
    dt_free(templates);
    return s;
}

dt_status dt_dataset_synthetic(dt_dataset **out, dt_shape shape, int classes, int n, uint64_t seed) {
    return dt_data_synthetic(out, shape, classes, n, seed, 0);
}

/* Darknet's classifier augmentation (src/data/augment.c) and its use by the
 * loader and the model file: HSV conversions on known colours, the colour
 * distortion's invariants (hue shifts every pixel by one amount, exposure
 * scales every value by one factor, both within their ranges), the crop's
 * geometry read back from coordinate ramps (the identity at scale 1; a
 * shift window for a smaller output; a rotation by an angle within range,
 * stretched by the aspect), Darknet's evaluation resize and centre crop on
 * ramps whose resized values are known exactly, and the loader making
 * samples of another size than its images, identically on 1 and 3 threads;
 * random erasing's rectangles (share, aspect, rate) and the loader's use of
 * it (the same sample but for one rectangle of the mean, in its own stream);
 * RandomResizedCrop's sampler (bounds, fallback, statistics against
 * torchvision's own sampler) and the loader's use of it.
 * Formulas: pjreddie/darknet's src/image.c and src/utils.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/augment.h"
#include "dtrain/data.h"
#include "dtrain/model.h"
#include "testutil.h"

static void test_hsv(void) {
    /* (3, n): red, green, blue, grey, black, an orange */
    float x[3 * 6] = {1, 0, 0, 0.5f, 0, 1, 0, 1, 0, 0.5f, 0, 0.5f, 0, 0, 1, 0.5f, 0, 0};
    const float want[3 * 6] = {0, 1.0f / 3, 2.0f / 3, 0, 0, 1.0f / 12, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0.5f, 0, 1};
    float orig[3 * 6];
    memcpy(orig, x, sizeof x);
    dt_augment_rgb_to_hsv(x, 6);
    CHECK_ALLCLOSE(x, want, 18, 1e-6, 0);
    dt_augment_hsv_to_rgb(x, 6);
    CHECK_ALLCLOSE(x, orig, 18, 1e-6, 0);
    /* random colours round-trip */
    dt_rng r = dt_rng_seed(7);
    float y[3 * 100], y0[3 * 100];
    for (int i = 0; i < 300; i++) y[i] = y0[i] = dt_rng_uniform(&r);
    dt_augment_rgb_to_hsv(y, 100);
    dt_augment_hsv_to_rgb(y, 100);
    CHECK_ALLCLOSE(y, y0, 300, 2e-6, 0);
}

static void test_distort(void) {
    enum { N = 64 };
    dt_rng r = dt_rng_seed(3);
    float x[3 * N], x0[3 * N], h0[3 * N], h1[3 * N];
    for (int i = 0; i < 3 * N; i++) x[i] = x0[i] = 0.1f + 0.8f * dt_rng_uniform(&r);
    /* hue only: saturation and value unchanged, hue moved by one d in [-0.2, 0.2] */
    dt_augment a = {.aspect = 1, .hue = 0.2f, .saturation = 1, .exposure = 1};
    dt_rng d = dt_rng_seed(11);
    dt_augment_distort(x, 3, N, &a, &d);
    memcpy(h0, x0, sizeof h0);
    memcpy(h1, x, sizeof h1);
    dt_augment_rgb_to_hsv(h0, N);
    dt_augment_rgb_to_hsv(h1, N);
    CHECK_ALLCLOSE(h1 + N, h0 + N, 2 * N, 2e-5, 0);
    float shift = remainderf(h1[0] - h0[0], 1.0f);
    CHECK(fabsf(shift) <= 0.2f + 1e-6f && fabsf(shift) > 0);
    for (int i = 0; i < N; i++) CHECK_CLOSE(remainderf(h1[i] - h0[i] - shift, 1.0f), 0, 2e-5, 0);
    /* exposure only, on grey values: every value times one f in [1/1.5, 1.5], clamped */
    float g[N], g0[N];
    for (int i = 0; i < N; i++) g[i] = g0[i] = 0.6f * (float)i / N;
    dt_augment e = {.aspect = 1, .saturation = 1, .exposure = 1.5f};
    int seen_up = 0, seen_down = 0;
    for (uint64_t seed = 0; seed < 16; seed++) {
        memcpy(g, g0, sizeof g);
        d = dt_rng_seed(seed);
        dt_augment_distort(g, 1, N, &e, &d);
        float f = g[N - 1] / g0[N - 1];
        CHECK(f >= 1 / 1.5f - 1e-6f && f <= 1.5f + 1e-6f);
        seen_up |= f > 1, seen_down |= f < 1;
        for (int i = 0; i < N; i++) CHECK_CLOSE(g[i], fminf(g0[i] * f, 1.0f), 1e-6, 0);
    }
    CHECK(seen_up && seen_down); /* rand_scale: the factor or its inverse */
}

/* Channel 0 holds x + 1, channel 1 y + 1 of an (h, w) image (0 stays "outside"). */
static void ramps(float *im, int h, int w) {
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            im[y * w + x] = (float)x + 1;
            im[h * w + y * w + x] = (float)y + 1;
        }
}

static void test_crop(void) {
    enum { S = 32, O = 28 };
    float im[2 * S * S], out[2 * S * S];
    ramps(im, S, S);
    dt_shape is = {2, S, S};
    /* scale 1, no slack, no rotation: the identity */
    dt_augment a = {.crop = 1, .min_crop = S, .max_crop = S, .aspect = 1, .saturation = 1, .exposure = 1};
    dt_rng r = dt_rng_seed(1);
    dt_augment_crop(out, is, im, is, &a, &r);
    CHECK(memcmp(out, im, sizeof im) == 0);
    /* a 28 x 28 window of the 32 x 32 image: x + 2 + dx, dx in [-2, 2] */
    dt_shape os = {2, O, O};
    for (uint64_t seed = 0; seed < 8; seed++) {
        r = dt_rng_seed(seed);
        dt_augment_crop(out, os, im, is, &a, &r);
        float ox = out[0] - 1, oy = out[O * O] - 1; /* where output (0, 0) reads */
        CHECK(ox >= 0 - 1e-4f && ox <= 4 + 1e-4f && oy >= -1e-4f && oy <= 4 + 1e-4f);
        for (int y = 0; y < O; y++)
            for (int x = 0; x < O; x++) {
                CHECK_CLOSE(out[y * O + x], ox + 1 + (float)x, 1e-4, 0);
                CHECK_CLOSE(out[O * O + y * O + x], oy + 1 + (float)y, 1e-4, 0);
            }
    }
    /* rotation and stretch: one step right in the output moves (aspect/s)
     * (cos, sin) in the image, one step down (1/s) (-sin, cos), with
     * |angle| <= 30 degrees. Read near the centre, inside the image. */
    dt_augment rot = a;
    rot.angle = 30;
    rot.aspect = 1.25f;
    for (uint64_t seed = 0; seed < 8; seed++) {
        r = dt_rng_seed(seed);
        dt_augment_crop(out, is, im, is, &rot, &r);
        int c = S / 2 * S + S / 2;
        float ux = out[c + 1] - out[c], uy = out[S * S + c + 1] - out[S * S + c];
        float vx = out[c + S] - out[c], vy = out[S * S + c + S] - out[S * S + c];
        float stretch = hypotf(ux, uy), rad = atan2f(uy, ux);
        CHECK(fabsf(rad) <= 30 * 3.14159265f / 180 + 1e-4f);
        /* the stretch is 1.25 or 1/1.25 over s, with s = S / shorter side */
        /* aspect drawn in [1, 1.25] or its inverse; s = 32 / the shorter side
         * (truncated to an int, as Darknet's) */
        float s = 1 / hypotf(vx, vy), aspect = stretch * s;
        CHECK(aspect >= 0.8f - 1e-3f && aspect <= 1.25f + 1e-3f);
        int lo = aspect >= 1 ? S : (int)(S * (aspect - 1e-4f)), hi = aspect >= 1 ? S : (int)(S * (aspect + 1e-4f));
        CHECK(fabsf(s - (float)S / (float)lo) < 1e-4f || fabsf(s - (float)S / (float)hi) < 1e-4f);
        CHECK_CLOSE(vx, -sinf(rad) * hypotf(vx, vy), 1e-3, 0);
        CHECK_CLOSE(vy, cosf(rad) * hypotf(vx, vy), 1e-3, 0);
    }
}

/* Darknet's evaluation: the centre square (rows 4..35 of a 40 x 32
 * image), resized to 28 x 28 corners to corners: output column c reads
 * column c * 31 / 27, so on ramps (linear in x and y) the value is exact. */
static void test_eval(void) {
    enum { H = 40, W = 32, O = 28 };
    float im[H * W];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) im[y * W + x] = (float)x / (W - 1) + (float)y / (H - 1);
    dt_shape is = {1, H, W}, os = {1, O, O};
    float *ws = malloc(sizeof(float) * dt_augment_eval_floats(os, is)), out[O * O];
    if (!ws) return;
    dt_augment_eval(out, os, im, is, ws);
    for (int y = 0; y < O; y++)
        for (int x = 0; x < O; x++)
            CHECK_CLOSE(out[y * O + x], (float)x / 27 + (4 + (float)y * 31 / 27) / 39, 3e-6, 0);
    free(ws);
    /* 256 -> 224 (ImageNet's sizes): the last row is the last input row (on
     * a ramp in y: 1), not Darknet's float-rounded (1 - dy) ~ 0 weight */
    enum { L = 256, M = 224 };
    float *big = malloc(sizeof(float) * L * L), *small = malloc(sizeof(float) * M * M);
    ws = malloc(sizeof(float) * dt_augment_eval_floats((dt_shape){1, M, M}, (dt_shape){1, L, L}));
    if (big && small && ws) {
        for (int y = 0; y < L; y++)
            for (int x = 0; x < L; x++) big[y * L + x] = (float)y / (L - 1);
        dt_augment_eval(small, (dt_shape){1, M, M}, big, (dt_shape){1, L, L}, ws);
        for (int y = 0; y < M; y++) CHECK_CLOSE(small[y * M + M / 2], (float)y / (M - 1), 2e-5, 0);
    }
    free(big), free(small), free(ws);
    /* the same size: the image itself */
    dt_shape same = {1, O, O};
    float sq[O * O], out2[O * O];
    ws = malloc(sizeof(float) * dt_augment_eval_floats(same, same));
    if (!ws) return;
    for (int i = 0; i < O * O; i++) sq[i] = (float)i;
    dt_augment_eval(out2, same, sq, same, ws);
    CHECK(memcmp(sq, out2, sizeof sq) == 0);
    free(ws);
}

/* Training sample 0 of epoch 0 built by hand as the loader documents it:
 * dataset image perm[0] of the epoch's Fisher-Yates permutation (stream
 * (seed, 0, 0x5eed)), from its own stream (seed, 0, idx): Darknet's crop,
 * the flip draw, the distortion, then normalisation. want (3, 28, 28). */
static int expected_first_sample(float *want, const dt_dataset *ds, const dt_augment *a, uint64_t seed) {
    uint32_t n = (uint32_t)ds->n, *perm = malloc(sizeof(uint32_t) * n);
    if (!perm) return -1;
    for (uint32_t i = 0; i < n; i++) perm[i] = i;
    dt_rng pr = dt_rng_seed(dt_hash3(seed, 0, 0x5eed));
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = dt_rng_below(&pr, i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int idx = (int)perm[0];
    free(perm);
    const dt_shape is = ds->shape, os = {3, 28, 28};
    float im[3 * 32 * 32];
    for (int i = 0; i < 3 * 32 * 32; i++) im[i] = (float)ds->images[(size_t)idx * 3 * 32 * 32 + (size_t)i] / 255.0f;
    dt_rng r = dt_rng_seed(dt_hash3(seed, 0, (uint64_t)idx));
    dt_augment_crop(want, os, im, is, a, &r);
    if (dt_rng_next(&r) >> 63)
        for (int row = 0; row < 3 * 28; row++)
            for (int x = 0; x < 14; x++) {
                float t = want[row * 28 + x];
                want[row * 28 + x] = want[row * 28 + 27 - x], want[row * 28 + 27 - x] = t;
            }
    dt_augment_distort(want, 3, 28 * 28, a, &r);
    for (int i = 0; i < 3 * 28 * 28; i++) want[i] = (want[i] - ds->mean[i / 784]) / ds->std[i / 784];
    return idx;
}

/* The loader makes 3 x 28 x 28 samples from 3 x 32 x 32 images, normalised,
 * as built by hand, the same on 1 and 3 threads, evaluation by the resize +
 * centre crop. */
static void test_loader(void) {
    dt_dataset *ds;
    CHECK_OK(dt_dataset_synthetic(&ds, (dt_shape){3, 32, 32}, 10, 64, 5));
    if (!ds) return;
    ds->mean[0] = 0.5f, ds->std[0] = 0.25f;
    dt_augment a = {.crop = 1, .min_crop = 32, .max_crop = 40, .angle = 7, .aspect = 0.75f, .hue = 0.1f,
                    .saturation = 0.75f, .exposure = 0.75f};
    const float *x1, *x3;
    const dt_label *y;
    int n;
    float *keep = malloc(sizeof(float) * 16 * 3 * 28 * 28);
    for (int threads = 1; threads <= 3 && keep; threads += 2) {
        dt_loader *ld;
        dt_loader_cfg cfg = {.batch = 16, .workers = 1, .seed = 9, .shuffle = 1, .flip = 1, .augment = &a,
                             .out = {3, 28, 28}, .threads = threads};
        CHECK_OK(dt_loader_create(&ld, ds, &cfg));
        if (!ld) break;
        CHECK_OK(dt_loader_next(ld, threads == 1 ? &x1 : &x3, &y, &n));
        CHECK(n == 16);
        if (threads == 1) {
            memcpy(keep, x1, sizeof(float) * 16 * 3 * 28 * 28);
            float want[3 * 28 * 28];
            int idx = expected_first_sample(want, ds, &a, 9);
            CHECK(idx >= 0 && y[0] == ds->labels[idx]);
            CHECK_ALLCLOSE(x1, want, 3 * 28 * 28, 1e-6, 0);
        } else {
            CHECK(memcmp(keep, x3, sizeof(float) * 16 * 3 * 28 * 28) == 0);
        }
        dt_loader_free(ld);
    }
    free(keep);
    /* evaluation: Darknet's transform of sample 0 */
    dt_loader *ev;
    dt_loader_cfg ecfg = {.batch = 4, .workers = 1, .out = {3, 28, 28}};
    CHECK_OK(dt_loader_create(&ev, ds, &ecfg));
    if (ev) {
        CHECK_OK(dt_loader_next(ev, &x1, &y, &n));
        float im[3 * 32 * 32], ws[3 * 32 * (32 + 28)], want[3 * 28 * 28];
        for (int i = 0; i < 3 * 32 * 32; i++) im[i] = (float)ds->images[i] / 255.0f;
        CHECK(dt_augment_eval_floats((dt_shape){3, 28, 28}, ds->shape) <= sizeof ws / sizeof *ws);
        dt_augment_eval(want, (dt_shape){3, 28, 28}, im, ds->shape, ws);
        for (int i = 0; i < 3 * 28 * 28; i++) want[i] = (want[i] - ds->mean[i / 784]) / ds->std[i / 784];
        CHECK_ALLCLOSE(x1, want, 3 * 28 * 28, 1e-6, 0);
        dt_loader_free(ev);
    }
    /* training at another size without Darknet's crop is refused */
    dt_loader *bad = NULL;
    dt_loader_cfg bcfg = {.batch = 4, .workers = 1, .shuffle = 1, .out = {3, 28, 28}};
    CHECK(dt_loader_create(&bad, ds, &bcfg) == DT_ERR_USAGE && !bad);
    dt_dataset_free(ds);
}

/* Random erasing on 2000 images of ones (2 x 28 x 28) at p = 0.5: each is
 * unchanged or has exactly one rectangle of zeros, on both channels, whose
 * area is within [0.02, 0.33] of the image (widened by the rounding of
 * each side, +-0.5) and aspect within [0.3, 3.3] (the same); about half are
 * erased; p = 0 and 1 never and always (the image is large enough for the
 * first draw of most). */
static int erased_box(const float *x, int *top, int *left, int *h, int *w) {
    int y0 = 28, y1 = -1, x0 = 28, x1 = -1, zeros = 0;
    for (int i = 0; i < 28 * 28; i++) {
        if (x[i] != x[784 + i] || (x[i] != 0 && x[i] != 1)) return -1;
        if (x[i] == 0) {
            int y = i / 28, xx = i % 28;
            zeros++, y0 = y < y0 ? y : y0, y1 = y > y1 ? y : y1, x0 = xx < x0 ? xx : x0, x1 = xx > x1 ? xx : x1;
        }
    }
    if (!zeros) return 0;
    *top = y0, *left = x0, *h = y1 - y0 + 1, *w = x1 - x0 + 1;
    return zeros == *h * *w ? 1 : -1; /* a full rectangle */
}

static void test_erase(void) {
    float x[2 * 28 * 28];
    int erased = 0, bad = 0;
    for (int k = 0; k < 2000; k++) {
        for (int i = 0; i < 2 * 28 * 28; i++) x[i] = 1;
        dt_rng r = dt_rng_seed(dt_hash3(3, (uint64_t)k, 7));
        dt_augment_erase(x, (dt_shape){2, 28, 28}, 0.5f, &r);
        int top, left, h, w, got = erased_box(x, &top, &left, &h, &w);
        if (got < 0) {
            bad++;
            continue;
        }
        if (!got) continue;
        erased++;
        /* h and w are the rounded sqrt(A s a) and sqrt(A s / a), s the share, a the aspect. */
        double hl = h - 0.5, hh = h + 0.5, wl = w - 0.5, wh = w + 0.5;
        if (h >= 28 || w >= 28 || hl * wl > 0.33 * 784 || hh * wh < 0.02 * 784 || hl / wh > 3.3 || hh / wl < 0.3)
            bad++;
    }
    CHECK(bad == 0);
    CHECK(erased > 900 && erased < 1100); /* 1000 +- 4.5 sigma */
    int never = 0, always = 0;
    for (int k = 0; k < 200; k++) {
        int top, left, h, w;
        for (int i = 0; i < 2 * 28 * 28; i++) x[i] = 1;
        dt_rng r = dt_rng_seed((uint64_t)k);
        dt_augment_erase(x, (dt_shape){2, 28, 28}, 0.0f, &r);
        never += erased_box(x, &top, &left, &h, &w) != 0;
        dt_augment_erase(x, (dt_shape){2, 28, 28}, 1.0f, &r);
        always += erased_box(x, &top, &left, &h, &w) == 1;
    }
    CHECK(never == 0 && always >= 195);
}

/* The loader with erase=1 and with none, the same seed: every sample is
 * its unerased self but for one rectangle set to 0 (the normalised mean),
 * the same on 1 and 3 threads; evaluation batches are never erased. */
static void test_loader_erase(void) {
    dt_dataset *ds;
    CHECK_OK(dt_dataset_synthetic(&ds, (dt_shape){1, 28, 28}, 10, 64, 5));
    if (!ds) return;
    enum { B = 16, S = 28 * 28 };
    static float plain[B * S], keep[B * S];
    for (int pass = 0; pass < 3; pass++) {
        dt_loader *ld;
        dt_loader_cfg cfg = {.batch = B, .workers = 1, .seed = 9, .shuffle = 1, .flip = 1, .crop_pad = 2,
                             .erase = pass ? 1.0f : 0.0f, .threads = pass == 2 ? 3 : 1};
        CHECK_OK(dt_loader_create(&ld, ds, &cfg));
        if (!ld) break;
        const float *x;
        const dt_label *y;
        int n;
        CHECK_OK(dt_loader_next(ld, &x, &y, &n));
        if (pass == 0) memcpy(plain, x, sizeof plain);
        if (pass == 1) memcpy(keep, x, sizeof keep);
        if (pass == 2) CHECK(memcmp(keep, x, sizeof keep) == 0);
        for (int b = 0; pass == 1 && b < B; b++) {
            int changed = 0, outside = 0, y0 = S, y1 = -1, x0 = S, x1 = -1;
            for (int i = 0; i < S; i++) {
                if (x[b * S + i] == plain[b * S + i]) continue;
                changed++;
                outside += x[b * S + i] != 0;
                int yy = i / 28, xx = i % 28;
                y0 = yy < y0 ? yy : y0, y1 = yy > y1 ? yy : y1, x0 = xx < x0 ? xx : x0, x1 = xx > x1 ? xx : x1;
            }
            /* The changed pixels' box is all 0 (pixels already at the mean
             * inside it do not change): the sample is its unerased self but
             * for one rectangle of 0. */
            int box = 1;
            for (int yy = y0; changed && yy <= y1; yy++)
                for (int xx = x0; xx <= x1; xx++) box &= x[b * S + yy * 28 + xx] == 0;
            CHECK(outside == 0 && changed > 0 && box);
        }
        dt_loader_free(ld);
    }
    dt_loader *ev;
    dt_loader_cfg ecfg = {.batch = B, .workers = 1, .erase = 1.0f};
    CHECK_OK(dt_loader_create(&ev, ds, &ecfg));
    if (ev) {
        const float *x;
        const dt_label *y;
        int n, zeros = 0;
        CHECK_OK(dt_loader_next(ev, &x, &y, &n));
        for (int i = 0; i < B * S; i++) zeros += x[i] == 0;
        CHECK(zeros < B * S / 20);
        dt_loader_free(ev);
    }
    dt_loader *bad = NULL;
    dt_loader_cfg bcfg = {.batch = 4, .workers = 1, .shuffle = 1, .erase = 1.5f};
    CHECK(dt_loader_create(&bad, ds, &bcfg) == DT_ERR_USAGE && !bad);
    dt_dataset_free(ds);
}

/* Darknet's cfg/cifar.cfg [net] keys: the crop on (min = max = 32 for a
 * 28 x 28 net), the colour keys as written; a crop key alone takes
 * Darknet's defaults; crop_pad with a crop is an error. */
/* A region of share s (of H x W) and ratio r = w / h whose sides were
 * rounded to integers: inside the image, and within the bounds widened by
 * half a pixel on each side. */
static void check_region(dt_rect c, int H, int W, const dt_augment *a) {
    CHECK(c.h >= 1 && c.w >= 1 && c.y >= 0 && c.x >= 0 && c.y + c.h <= H && c.x + c.w <= W);
    const double area = (double)H * W;
    CHECK((c.w - 0.5) * (c.h - 0.5) <= a->scale[1] * area && (c.w + 0.5) * (c.h + 0.5) >= a->scale[0] * area);
    CHECK((c.w - 0.5) / (c.h + 0.5) <= a->ratio[1] && (c.w + 0.5) / (c.h - 0.5) >= a->ratio[0]);
}

/* 20000 draws on an image of H x W: every region inside it and within the
 * bounds; the mean share, the share below 0.3 and the mean log ratio as
 * torchvision 0.14's RandomResizedCrop.get_params gives them (20000 draws,
 * torch.manual_seed(0): want[], tolerances about 6 standard errors). */
static void rrc_stats(int H, int W, const double want[3]) {
    const dt_augment a = {.resized_crop = 1, .scale = {0.08f, 1.0f}, .ratio = {0.75f, 4.0f / 3.0f}};
    dt_rng r = dt_rng_seed(21);
    double share = 0, small = 0, logr = 0;
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        dt_rect c = dt_augment_rrc_pick(H, W, &a, &r);
        check_region(c, H, W, &a);
        double s = (double)c.h * c.w / ((double)H * W);
        share += s, small += s < 0.3, logr += log((double)c.w / c.h);
    }
    CHECK_CLOSE(share / n, want[0], 0.01, 0);
    CHECK_CLOSE(small / n, want[1], 0.015, 0);
    CHECK_CLOSE(logr / n, want[2], 0.008, 0);
}

static void test_rrc_pick(void) {
    rrc_stats(750, 1000, (const double[]){0.4342, 0.3168, 0.0316});
    rrc_stats(60, 20, (const double[]){0.2294, 0.7508, -0.0449}); /* often the fallback */
    /* The fallback: no draw fits an image of 100:1, so its centre at the
     * nearest allowed ratio (torchvision: h = 10, w = round(10 x 4/3)). */
    dt_augment a = {.resized_crop = 1, .scale = {0.08f, 1.0f}, .ratio = {0.75f, 4.0f / 3.0f}};
    dt_rng r = dt_rng_seed(3);
    for (int i = 0; i < 100; i++) {
        dt_rect wide = dt_augment_rrc_pick(10, 1000, &a, &r), tall = dt_augment_rrc_pick(1000, 10, &a, &r);
        CHECK(wide.y == 0 && wide.x == 493 && wide.h == 10 && wide.w == 13);
        CHECK(tall.y == 493 && tall.x == 0 && tall.h == 13 && tall.w == 10);
    }
    /* scale 1: only ratio 1 fits a square, and the fallback is the whole image. */
    a.scale[0] = 1;
    for (int i = 0; i < 100; i++) {
        dt_rect c = dt_augment_rrc_pick(100, 100, &a, &r);
        CHECK(c.y == 0 && c.x == 0 && c.h == 100 && c.w == 100);
    }
    /* a 1-pixel image */
    dt_rect one = dt_augment_rrc_pick(1, 1, &a, &r);
    CHECK(one.y == 0 && one.x == 0 && one.h == 1 && one.w == 1);
}

/* The loader's RandomResizedCrop of in-memory 3 x 32 x 32 images to
 * 3 x 24 x 24: the first sample as built by hand (the region drawn from
 * the sample's stream, resized, the flip draw, normalised), the same batch
 * on 1 and 3 threads; refused with crop_pad. */
static void test_loader_rrc(void) {
    dt_dataset *ds;
    CHECK_OK(dt_dataset_synthetic(&ds, (dt_shape){3, 32, 32}, 10, 64, 5));
    if (!ds) return;
    const dt_augment a = {.aspect = 1, .saturation = 1, .exposure = 1, .resized_crop = 1, .scale = {0.08f, 1.0f},
                          .ratio = {0.75f, 4.0f / 3.0f}};
    enum { S = 3 * 24 * 24 };
    static float keep[16 * S];
    for (int threads = 1; threads <= 3; threads += 2) {
        dt_loader *ld;
        dt_loader_cfg cfg = {.batch = 16, .workers = 1, .seed = 4, .shuffle = 1, .flip = 1, .augment = &a,
                             .out = {3, 24, 24}, .threads = threads};
        CHECK_OK(dt_loader_create(&ld, ds, &cfg));
        if (!ld) break;
        const float *x;
        const dt_label *y;
        int n;
        CHECK_OK(dt_loader_next(ld, &x, &y, &n));
        if (threads == 1) {
            memcpy(keep, x, sizeof keep);
            /* the first sample: perm[0] of epoch 0 */
            uint32_t perm[64];
            for (uint32_t i = 0; i < 64; i++) perm[i] = i;
            dt_rng pr = dt_rng_seed(dt_hash3(4, 0, 0x5eed));
            for (uint32_t i = 63; i > 0; i--) {
                uint32_t j = dt_rng_below(&pr, i + 1), t = perm[i];
                perm[i] = perm[j], perm[j] = t;
            }
            dt_rng r = dt_rng_seed(dt_hash3(4, 0, perm[0]));
            float want[S], ws[1024];
            const dt_shape os = {3, 24, 24};
            CHECK(dt_augment_resize_floats(os) <= sizeof ws / sizeof *ws);
            dt_rect c = dt_augment_rrc_pick(32, 32, &a, &r);
            dt_augment_resize_region(want, os, ds->images + (size_t)perm[0] * 3 * 32 * 32, 32, 1, 32 * 32, c, ws);
            if (dt_rng_next(&r) >> 63)
                for (int row = 0; row < 3 * 24; row++)
                    for (int xx = 0; xx < 12; xx++) {
                        float t = want[row * 24 + xx];
                        want[row * 24 + xx] = want[row * 24 + 23 - xx], want[row * 24 + 23 - xx] = t;
                    }
            CHECK_ALLCLOSE(x, want, S, 0, 0); /* mean 0, std 1 */
            CHECK(y[0] == ds->labels[perm[0]]);
        } else {
            CHECK(memcmp(keep, x, sizeof keep) == 0);
        }
        dt_loader_free(ld);
    }
    dt_loader *bad = NULL;
    dt_loader_cfg bcfg = {.batch = 4, .workers = 1, .shuffle = 1, .crop_pad = 2, .augment = &a, .out = {3, 24, 24}};
    CHECK(dt_loader_create(&bad, ds, &bcfg) == DT_ERR_USAGE && !bad);
    dt_dataset_free(ds);
}

static void test_model_keys(void) {
    dt_model_spec *m = malloc(sizeof *m);
    if (!m) return;
    const char *cifar = "[net]\nbatch=128\nsubdivisions=1\nheight=28\nwidth=28\nchannels=3\nmax_crop=32\nmin_crop=32\n"
                        "hue=.1\nsaturation=.75\nexposure=.75\n[connected]\noutput=10\n[softmax]\n";
    CHECK_OK(dt_model_parse_string(m, cifar, "cifar.cfg"));
    CHECK(m->augment.crop == 1 && m->augment.min_crop == 32 && m->augment.max_crop == 32);
    CHECK(m->augment.angle == 0 && m->augment.aspect == 1);
    CHECK(m->augment.hue == 0.1f && m->augment.saturation == 0.75f && m->augment.exposure == 0.75f);
    CHECK(m->flip == 1); /* Darknet's classifier flips every image at random */
    CHECK_OK(dt_model_parse_string(m, "[net]\nheight=224\nwidth=224\nchannels=3\nangle=7\n[connected]\noutput=2\n"
                                      "[softmax]\n", "d.cfg"));
    CHECK(m->augment.crop && m->augment.min_crop == 224 && m->augment.max_crop == 448);
    CHECK_OK(dt_model_parse_string(m, "[net]\nheight=28\nwidth=28\nchannels=1\n[connected]\noutput=2\n[softmax]\n", "p.cfg"));
    CHECK(!m->augment.crop && m->augment.aspect == 1 && m->augment.saturation == 1 && m->augment.exposure == 1);
    CHECK(m->flip == 0);
    CHECK_OK(dt_model_parse_string(m, "[net]\nheight=28\nwidth=28\nchannels=1\nexposure=1.5\nflip=0\n[connected]\n"
                                      "output=2\n[softmax]\n", "f.cfg"));
    CHECK(m->flip == 0 && !m->augment.crop && m->augment.exposure == 1.5f);
    dt_status st = dt_model_parse_string(m, "[net]\nheight=28\nwidth=28\nchannels=1\ncrop_pad=4\nmin_crop=28\n"
                                            "[connected]\noutput=2\n[softmax]\n", "two.cfg");
    CHECK(st == DT_ERR_CONFIG && strstr(dt_last_error(), "two.cfg:5: crop_pad= with Darknet's augmentation"));
    st = dt_model_parse_string(m, "[net]\nheight=28\nwidth=28\nchannels=1\nexposure=1.5\ncrop_pad=4\n"
                                  "[connected]\noutput=2\n[softmax]\n", "two.cfg");
    CHECK(st == DT_ERR_CONFIG && strstr(dt_last_error(), "two.cfg:6: crop_pad= with Darknet's augmentation"));
    /* random erasing: a probability */
    CHECK_OK(dt_model_parse_string(m, "[net]\nheight=28\nwidth=28\nchannels=1\nerase=0.5\n[connected]\noutput=2\n"
                                      "[softmax]\n", "e.cfg"));
    CHECK(m->erase == 0.5f && m->flip == 0);
    st = dt_model_parse_string(m, "[net]\nheight=28\nwidth=28\nchannels=1\nerase=1.5\n[connected]\noutput=2\n"
                                  "[softmax]\n", "e.cfg");
    CHECK(st == DT_ERR_CONFIG && strstr(dt_last_error(), "e.cfg:5") && strstr(dt_last_error(), "erase"));
    /* a colour key at its neutral value changes nothing, flip included */
    CHECK_OK(dt_model_parse_string(m, "[net]\nheight=28\nwidth=28\nchannels=1\nsaturation=1\n[connected]\n"
                                      "output=2\n[softmax]\n", "n.cfg"));
    CHECK(m->flip == 0 && !m->augment.crop);
    /* RandomResizedCrop: torchvision's ranges by default, flip on */
    const char *rrc = "[net]\nheight=224\nwidth=224\nchannels=3\naugment=resized_crop\neval_resize=256\n"
                      "[connected]\noutput=2\n[softmax]\n";
    CHECK_OK(dt_model_parse_string(m, rrc, "r.cfg"));
    CHECK(m->augment.resized_crop && !m->augment.crop && m->flip == 1 && m->eval_resize == 256);
    CHECK(m->augment.scale[0] == 0.08f && m->augment.scale[1] == 1 && m->augment.ratio[0] == 0.75f &&
          m->augment.ratio[1] == 4.0f / 3.0f);
    CHECK_OK(dt_model_parse_string(m, "[net]\nheight=32\nwidth=32\nchannels=3\naugment=resized_crop\nflip=0\n"
                                      "crop_scale=0.25, 1\ncrop_ratio=0.5,2\n[connected]\noutput=2\n[softmax]\n",
                                      "r.cfg"));
    CHECK(m->flip == 0 && m->augment.scale[0] == 0.25f && m->augment.ratio[1] == 2);
    static const struct {
        const char *keys, *message;
    } bad[] = {{"crop_scale=0.2,0.1\n", "r.cfg:5: bad value '0.2,0.1' for crop_scale"},
               {"crop_scale=0,1\n", "crop_scale=0,1 is out of range"},
               {"crop_ratio=2\n", "bad value '2' for crop_ratio"},
               {"min_crop=40\n", "r.cfg:5: min_crop= with augment=resized_crop"},
               {"crop_pad=4\n", "r.cfg:5: crop_pad= with augment=resized_crop"}};
    st = dt_model_parse_string(m, "[net]\nheight=32\nwidth=32\nchannels=3\nmax_crop=40\neval_resize=36\n"
                                  "[connected]\noutput=2\n[softmax]\n", "r.cfg");
    CHECK(st == DT_ERR_CONFIG && strstr(dt_last_error(), "r.cfg:6: eval_resize= with Darknet's crop"));
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[512];
        snprintf(text, sizeof text, "[net]\nheight=32\nwidth=32\nchannels=3\n%saugment=resized_crop\n"
                 "[connected]\noutput=2\n[softmax]\n", bad[i].keys);
        st = dt_model_parse_string(m, text, "r.cfg");
        CHECK(st == DT_ERR_CONFIG && strstr(dt_last_error(), bad[i].message));
        if (!strstr(dt_last_error(), bad[i].message)) fprintf(stderr, "got: %s\n", dt_last_error());
    }
    st = dt_model_parse_string(m, "[net]\nheight=32\nwidth=32\nchannels=3\neval_resize=31\n[connected]\n"
                                  "output=2\n[softmax]\n", "r.cfg");
    CHECK(st == DT_ERR_CONFIG && strstr(dt_last_error(), "r.cfg:5: eval_resize=31 is shorter than the input's"));
    st = dt_model_parse_string(m, "[net]\nheight=32\nwidth=32\nchannels=3\ncrop_scale=0.5,1\n[connected]\n"
                                  "output=2\n[softmax]\n", "r.cfg");
    CHECK(st == DT_ERR_CONFIG && strstr(dt_last_error(), "r.cfg:5: crop_scale= is RandomResizedCrop's"));
    free(m);
}

int main(void) {
    test_hsv();
    test_distort();
    test_crop();
    test_eval();
    test_loader();
    test_erase();
    test_loader_erase();
    test_model_keys();
    test_rrc_pick();
    test_loader_rrc();
    return dt_test_finish("test_augment");
}

/* The loader against the contract in data.h: sharding equals the serial
 * batch, epochs are permutations, eval covers every sample once, seek and
 * prefetch do not change a bit, augmentation is deterministic and real. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/data.h"
#include "dtrain/rng.h"
#include "testutil.h"

enum { C = 2, H = 4, W = 5, SAMPLE = C * H * W };

/* Byte of sample i at (c, y, x): nonzero and distinct within an image (so a
 * shift or mirror is identifiable), varying between samples. */
static uint8_t byte_at(int i, int c, int y, int x) { return (uint8_t)(1 + c * 100 + y * W + x + (i % 10) * 10); }

/* n samples (n <= 255) whose label is their index, so a batch tells which
 * samples it holds. */
static dt_dataset make_ds(int n) {
    dt_dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.n = n;
    ds.shape = (dt_shape){C, H, W};
    ds.classes = n;
    ds.images = malloc((size_t)n * SAMPLE);
    ds.labels = malloc((size_t)n * sizeof *ds.labels);
    for (int i = 0; i < n; i++) {
        ds.labels[i] = (dt_label)i;
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) ds.images[i * SAMPLE + (c * H + y) * W + x] = byte_at(i, c, y, x);
    }
    for (int c = 0; c < DT_DATA_MAX_CHANNELS; c++) ds.mean[c] = 0.0f, ds.std[c] = 1.0f;
    return ds;
}

static void free_ds(dt_dataset *ds) {
    free(ds->images);
    free(ds->labels);
}

static dt_loader_cfg train_cfg(int batch, int rank, int world) {
    dt_loader_cfg cfg = {.batch = batch, .worker = rank, .workers = world, .seed = 1234, .shuffle = 1,
                         .flip = 1, .crop_pad = 1, .prefetch = 0};
    return cfg;
}

/* The permutation of the contract, written independently: Fisher-Yates
 * from dt_rng_seed(dt_hash3(seed, epoch, 0x5eed)). */
static void ref_perm(uint32_t *p, int n, uint64_t seed, int epoch) {
    for (int i = 0; i < n; i++) p[i] = (uint32_t)i;
    dt_rng r = dt_rng_seed(dt_hash3(seed, (uint64_t)epoch, 0x5eed));
    for (uint32_t i = (uint32_t)n - 1; i > 0; i--) {
        uint32_t j = dt_rng_below(&r, i + 1), t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

/* Takes the end-of-epoch marker: n == 0, then the position is (epoch+1, 0). */
static void expect_epoch_end(dt_loader *l, int epoch) {
    const float *x;
    const dt_label *y;
    int n = -1, e, s;
    CHECK_OK(dt_loader_next(l, &x, &y, &n));
    CHECK(n == 0);
    dt_loader_position(l, &e, &s);
    CHECK(e == epoch + 1 && s == 0);
}

/* Per step, the W shards are the serial batch of B*W split in rank order,
 * bit for bit (augmentation included); over an epoch they cover exactly the
 * first steps*B*W entries of the permutation, each once. */
static void test_shards(void) {
    const int ns[] = {100, 101, 97}, bs[] = {4, 5};
    for (int ni = 0; ni < 3; ni++)
        for (int bi = 0; bi < 2; bi++)
            for (int world = 1; world <= 3; world++) {
                const int n = ns[ni], b = bs[bi], gb = b * world, steps = n / gb;
                dt_dataset ds = make_ds(n);
                dt_loader *serial = NULL, *rank[3] = {NULL};
                dt_loader_cfg cfg = train_cfg(gb, 0, 1);
                CHECK_OK(dt_loader_create(&serial, &ds, &cfg));
                for (int r = 0; r < world; r++) {
                    cfg = train_cfg(b, r, world);
                    cfg.prefetch = r == 1; /* mix both paths */
                    CHECK_OK(dt_loader_create(&rank[r], &ds, &cfg));
                    CHECK(rank[r] && dt_loader_steps_per_epoch(rank[r]) == steps);
                }
                if (!serial || !rank[world - 1]) return;
                CHECK(dt_loader_steps_per_epoch(serial) == steps);
                uint32_t perm[101];
                int seen[101], mismatches = 0, wrong_n = 0;
                dt_label first_epoch[101];
                for (int epoch = 0; epoch < 2; epoch++) {
                    ref_perm(perm, n, 1234, epoch);
                    memset(seen, 0, sizeof seen);
                    for (int t = 0; t < steps; t++) {
                        const float *sx, *x;
                        const dt_label *sy, *y;
                        int sn, rn;
                        CHECK_OK(dt_loader_next(serial, &sx, &sy, &sn));
                        wrong_n += sn != gb;
                        if (epoch == 0) memcpy(first_epoch + t * gb, sy, sizeof *sy * (size_t)gb);
                        for (int r = 0; r < world; r++) {
                            CHECK_OK(dt_loader_next(rank[r], &x, &y, &rn));
                            wrong_n += rn != b;
                            mismatches += memcmp(y, sy + r * b, sizeof *y * (size_t)b) != 0;
                            mismatches += memcmp(x, sx + (size_t)r * b * SAMPLE, sizeof(float) * b * SAMPLE) != 0;
                            for (int i = 0; i < b; i++) {
                                seen[y[i]]++;
                                mismatches += (uint32_t)y[i] != perm[t * gb + r * b + i];
                            }
                        }
                    }
                    CHECK(wrong_n == 0 && mismatches == 0);
                    int once = 0, more = 0;
                    for (int i = 0; i < n; i++) once += seen[i] == 1, more += seen[i] > 1;
                    CHECK(once == steps * gb && more == 0);
                    expect_epoch_end(serial, epoch);
                    for (int r = 0; r < world; r++) expect_epoch_end(rank[r], epoch);
                }
                /* Consecutive epochs are different permutations. */
                uint32_t p1[101];
                ref_perm(p1, n, 1234, 1);
                int same = 1;
                for (int i = 0; i < steps * gb; i++) same &= (uint32_t)first_epoch[i] == p1[i];
                CHECK(!same);
                dt_loader_free(serial);
                for (int r = 0; r < world; r++) dt_loader_free(rank[r]);
                free_ds(&ds);
            }
}

/* Without shuffle: rank r takes [r*N/W, (r+1)*N/W) in order, batches of B
 * with a short last one; all ranks together cover every sample once. The
 * values are the normalised bytes (byte / 255 - mean) / std. */
static void test_eval(void) {
    const int ns[] = {100, 101, 97}, bs[] = {4, 5};
    for (int ni = 0; ni < 3; ni++)
        for (int bi = 0; bi < 2; bi++)
            for (int world = 1; world <= 3; world++) {
                const int n = ns[ni], b = bs[bi];
                dt_dataset ds = make_ds(n);
                ds.mean[1] = 0.5f, ds.std[1] = 0.25f;
                int count[101] = {0}, bad = 0;
                for (int r = 0; r < world; r++) {
                    dt_loader_cfg cfg = {.batch = b, .worker = r, .workers = world, .seed = 7, .prefetch = r & 1};
                    dt_loader *l = NULL;
                    CHECK_OK(dt_loader_create(&l, &ds, &cfg));
                    if (!l) return;
                    const int lo = r * n / world, hi = (r + 1) * n / world, steps = (hi - lo + b - 1) / b;
                    CHECK(dt_loader_steps_per_epoch(l) == steps);
                    int next = lo;
                    for (int t = 0; t < steps; t++) {
                        const float *x;
                        const dt_label *y;
                        int got;
                        CHECK_OK(dt_loader_next(l, &x, &y, &got));
                        bad += got != (t < steps - 1 ? b : hi - lo - (steps - 1) * b);
                        for (int i = 0; i < got; i++, next++) {
                            bad += y[i] != next;
                            count[y[i]]++;
                            for (int k = 0; k < SAMPLE; k++) {
                                int c = k / (H * W);
                                float want = ((float)ds.images[next * SAMPLE + k] / 255.0f - ds.mean[c]) / ds.std[c];
                                bad += x[i * SAMPLE + k] != want;
                            }
                        }
                    }
                    bad += next != hi;
                    expect_epoch_end(l, 0);
                    dt_loader_free(l);
                }
                CHECK(bad == 0);
                int once = 0;
                for (int i = 0; i < n; i++) once += count[i] == 1;
                CHECK(once == n);
                free_ds(&ds);
            }
}

static void test_prefetch_and_seek(void) {
    dt_dataset ds = make_ds(101);
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        dt_loader_cfg cfg = train_cfg(5, 1, 2);
        cfg.shuffle = shuffle;
        dt_loader *off = NULL, *on = NULL;
        CHECK_OK(dt_loader_create(&off, &ds, &cfg));
        cfg.prefetch = 1;
        CHECK_OK(dt_loader_create(&on, &ds, &cfg));
        if (!off || !on) return;
        const int steps = dt_loader_steps_per_epoch(on); /* 10 training, 11 eval */
        CHECK(steps == (shuffle ? 10 : 11));
        /* Three and a half epochs, markers included. */
        CHECK(dt_test_loaders_differ(off, on, SAMPLE, 3 * (steps + 1) + steps / 2) == 0);
        /* Seek both (the prefetch thread is running) and compare again. */
        CHECK_OK(dt_loader_seek(off, 1, 7));
        CHECK_OK(dt_loader_seek(on, 1, 7));
        CHECK(dt_test_loaders_differ(off, on, SAMPLE, 2 * (steps + 1)) == 0);

        /* seek(2, 3) then next == the batch reached by stepping from (0, 0). */
        CHECK_OK(dt_loader_seek(off, 0, 0));
        const float *x;
        const dt_label *y;
        int n, e, s;
        float want_x[5 * SAMPLE];
        dt_label want_y[5];
        for (int k = 0; k < 2 * (steps + 1) + 3; k++) CHECK_OK(dt_loader_next(off, &x, &y, &n));
        dt_loader_position(off, &e, &s);
        CHECK(e == 2 && s == 3);
        CHECK_OK(dt_loader_next(off, &x, &y, &n));
        CHECK(n == 5);
        memcpy(want_x, x, sizeof want_x);
        memcpy(want_y, y, sizeof want_y);
        dt_loader *fresh[2] = {off, on};
        for (int k = 0; k < 2; k++) {
            CHECK_OK(dt_loader_seek(fresh[k], 2, 3));
            dt_loader_position(fresh[k], &e, &s);
            CHECK(e == 2 && s == 3);
            CHECK_OK(dt_loader_next(fresh[k], &x, &y, &n));
            CHECK(n == 5 && memcmp(y, want_y, sizeof want_y) == 0 && memcmp(x, want_x, sizeof want_x) == 0);
        }
        /* Seeking to the marker position gives the marker, then epoch e+1. */
        CHECK_OK(dt_loader_seek(on, 4, steps));
        expect_epoch_end(on, 4);
        CHECK(dt_loader_seek(on, 0, steps + 1) == DT_ERR_USAGE);
        CHECK(strstr(dt_last_error(), "loader") != NULL);
        CHECK(dt_loader_seek(on, -1, 0) == DT_ERR_USAGE);
        dt_loader_free(off);
        dt_loader_free(on);
    }
    /* A prefetching loader freed before its first batch, and right after one. */
    dt_loader_cfg cfg = train_cfg(5, 0, 1);
    cfg.prefetch = 1;
    dt_loader *l = NULL;
    CHECK_OK(dt_loader_create(&l, &ds, &cfg));
    dt_loader_free(l);
    CHECK_OK(dt_loader_create(&l, &ds, &cfg));
    const float *x;
    const dt_label *y;
    int n;
    CHECK_OK(dt_loader_next(l, &x, &y, &n));
    CHECK(n == 5);
    dt_loader_free(l);
    dt_loader_free(NULL);
    free_ds(&ds);
}

/* Expected augmented value: crop window offset (dy, dx) in [-pad, pad], then
 * mirror; outside the image is the zero byte. */
static float aug_ref(int i, int c, int y, int x, int dy, int dx, int flip) {
    int sy = y + dy, sx = (flip ? W - 1 - x : x) + dx;
    if (sy < 0 || sy >= H || sx < 0 || sx >= W) return 0.0f;
    return (float)byte_at(i, c, sy, sx) / 255.0f;
}

static int matches(const float *img, int i, int dy, int dx, int flip) {
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                if (img[(c * H + y) * W + x] != aug_ref(i, c, y, x, dy, dx, flip)) return 0;
    return 1;
}

/* Every augmented image must be exactly one (offset, flip) of its source;
 * tallies how often each occurred over `epochs` epochs of 100 samples. */
static void tally_aug(const dt_dataset *ds, int pad, int flip, uint64_t seed, int epochs,
                      int hist[5][5][2], int *unmatched, uint8_t *fingerprint) {
    dt_loader_cfg cfg = {.batch = 10, .workers = 1, .seed = seed, .flip = flip, .crop_pad = pad};
    dt_loader *l = NULL;
    CHECK_OK(dt_loader_create(&l, ds, &cfg));
    if (!l) return;
    for (int e = 0; e < epochs; e++) {
        for (int t = 0; t <= 10; t++) {
            const float *x;
            const dt_label *y;
            int n;
            CHECK_OK(dt_loader_next(l, &x, &y, &n));
            for (int k = 0; k < n; k++) {
                int found = 0;
                for (int dy = -pad; dy <= pad; dy++)
                    for (int dx = -pad; dx <= pad; dx++)
                        for (int f = 0; f <= flip; f++)
                            if (matches(x + k * SAMPLE, y[k], dy, dx, f)) {
                                hist[dy + 2][dx + 2][f]++;
                                *fingerprint++ = (uint8_t)((dy + 2) * 10 + (dx + 2) * 2 + f);
                                found++;
                            }
                *unmatched += found != 1;
            }
        }
    }
    dt_loader_free(l);
}

static void test_augmentation(void) {
    dt_dataset ds = make_ds(100);
    int hist[5][5][2], unmatched = 0;
    uint8_t fp_a[400], fp_b[400], fp_c[400];

    /* Flip only: each image is itself or its mirror, about half each. */
    memset(hist, 0, sizeof hist);
    tally_aug(&ds, 0, 1, 99, 4, hist, &unmatched, fp_a);
    CHECK(unmatched == 0);
    CHECK(hist[2][2][0] + hist[2][2][1] == 400);
    CHECK(hist[2][2][1] > 150 && hist[2][2][1] < 250);

    /* Crop only, pad 2: every offset in [-2, 2]^2 occurs (~16 times each). */
    memset(hist, 0, sizeof hist);
    tally_aug(&ds, 2, 0, 99, 4, hist, &unmatched, fp_a);
    CHECK(unmatched == 0);
    int offsets = 0;
    for (int dy = 0; dy < 5; dy++)
        for (int dx = 0; dx < 5; dx++) offsets += hist[dy][dx][0] > 0;
    CHECK(offsets == 25);
    CHECK(hist[2][2][0] < 50);

    /* Both: deterministic per seed, different for another seed, and the
     * same sample is augmented differently in different epochs. */
    memset(hist, 0, sizeof hist);
    tally_aug(&ds, 2, 1, 99, 4, hist, &unmatched, fp_a);
    tally_aug(&ds, 2, 1, 99, 4, hist, &unmatched, fp_b);
    tally_aug(&ds, 2, 1, 100, 4, hist, &unmatched, fp_c);
    CHECK(unmatched == 0);
    CHECK(memcmp(fp_a, fp_b, sizeof fp_a) == 0);
    CHECK(memcmp(fp_a, fp_c, sizeof fp_a) != 0);
    CHECK(memcmp(fp_a, fp_a + 100, 100) != 0);
    int mirrored = 0;
    for (int dy = 0; dy < 5; dy++)
        for (int dx = 0; dx < 5; dx++) mirrored += hist[dy][dx][1];
    CHECK(mirrored > 450 && mirrored < 750); /* of 1200 */
    free_ds(&ds);
}

static void test_bad_cfg(void) {
    dt_dataset ds = make_ds(20);
    dt_loader *l = NULL;
    dt_loader_cfg cfg = train_cfg(0, 0, 1);
    CHECK(dt_loader_create(&l, &ds, &cfg) == DT_ERR_USAGE);
    cfg = train_cfg(4, 2, 2);
    CHECK(dt_loader_create(&l, &ds, &cfg) == DT_ERR_USAGE);
    cfg = train_cfg(7, 0, 3); /* 21 > 20 samples */
    CHECK(dt_loader_create(&l, &ds, &cfg) == DT_ERR_USAGE);
    CHECK(strstr(dt_last_error(), "20 samples") != NULL);
    cfg.shuffle = 0; /* evaluation needs no full batch */
    CHECK_OK(dt_loader_create(&l, &ds, &cfg));
    CHECK(l && dt_loader_steps_per_epoch(l) == 1);
    dt_loader_free(l);
    l = NULL;
    cfg = train_cfg(4, 0, 1);
    ds.std[1] = 0.0f;
    CHECK(dt_loader_create(&l, &ds, &cfg) == DT_ERR_USAGE);
    ds.std[1] = 1.0f;
    ds.labels[13] = 20;
    CHECK(dt_loader_create(&l, &ds, &cfg) == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "index 13") != NULL);
    CHECK(l == NULL);
    free_ds(&ds);
}

int main(void) {
    test_shards();
    test_eval();
    test_prefetch_and_seek();
    test_augmentation();
    test_bad_cfg();
    return dt_test_finish("test_loader");
}

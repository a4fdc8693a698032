/* Folder data sets (data.h) on trees tests/make_images.py writes: the class
 * mapping, images held in memory or decoded per batch (bit for bit the
 * same, any thread count, with or without prefetch), shards of 2 ranks
 * covering an epoch once, augmentation from the seed, the test split's
 * classes, every kind of bad input named in one line, and skipping; a
 * folder loaded with regions (RandomResizedCrop from whole images decoded
 * per sample) giving the batches of the same images held in memory.
 * Skipped (77) without python3, PIL and numpy. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/augment.h"
#include "dtrain/data.h"
#include "testutil.h"

#define SIDE 12
static const dt_shape SHAPE = {3, SIDE, SIDE};
enum { SAMPLE = 3 * SIDE * SIDE, PER_CLASS = 6, CLASSES = 4, N = PER_CLASS * CLASSES };

static char dir[] = "/tmp/dt_folder_XXXXXX";

/* dir/rel in one of four static buffers. */
static const char *at(const char *rel) {
    static char bufs[4][1200];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, sizeof bufs[0], "%s/%s", dir, rel);
    return p;
}

/* Runs a shell command made from fmt; its exit code. */
static int sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static dt_folder_opts opts(size_t cache, int threads) {
    dt_folder_opts o = {.threads = threads, .cache_bytes = cache};
    return o;
}

static dt_dataset *load(const char *split, size_t cache, int threads) {
    dt_folder_opts o = opts(cache, threads);
    dt_dataset *ds = NULL;
    CHECK_OK(dt_dataset_load_folder(&ds, at(split), SHAPE, &o));
    return ds;
}

/* Loading at(split) with o must fail with want, one line naming `names`
 * and containing needle. */
static void expect_fail(const char *split, const dt_folder_opts *o, dt_status want, const char *names,
                        const char *needle) {
    dt_dataset *ds = NULL;
    dt_status s = dt_dataset_load_folder(&ds, at(split), SHAPE, o);
    const char *msg = dt_last_error();
    if (s != want || ds || !strstr(msg, names) || !strstr(msg, needle) || strchr(msg, '\n')) {
        fprintf(stderr, "FAIL: %s: status %d (want %d), message '%s' (want '%s' and '%s')\n", split, s, want, msg,
                names, needle);
        dt_test_failures++;
    }
    dt_dataset_free(ds);
}

/* Classes sorted bytewise (not by locale), dotfiles ignored, samples in
 * (class, file) order; cached and on-demand bytes equal. */
static void test_mapping_and_fetch(void) {
    dt_dataset *mem = load("t/train", (size_t)1 << 30, 2), *disk = load("t/train", 0, 3);
    if (!mem || !disk) return;
    const char *want[CLASSES] = {"C", "_x", "a", "b"};
    CHECK(mem->classes == CLASSES && mem->class_names.n == CLASSES && mem->n == N);
    for (int c = 0; c < CLASSES && mem->class_names.n == CLASSES; c++)
        CHECK(strcmp(mem->class_names.names[c], want[c]) == 0);
    int ordered = 1;
    for (int i = 0; i < N; i++) ordered &= mem->labels[i] == i / PER_CLASS && disk->labels[i] == mem->labels[i];
    CHECK(ordered);
    CHECK(mem->images && !mem->fetch && !disk->images && disk->fetch);
    static uint8_t one[SAMPLE];
    int same = 0;
    for (int i = 0; i < N; i++) {
        CHECK_OK(disk->fetch(disk->fetch_ctx, i, one));
        same += memcmp(one, mem->images + (size_t)i * SAMPLE, SAMPLE) == 0;
    }
    CHECK(same == N);
    CHECK(mem->mean[0] == 0.0f && mem->std[2] == 1.0f && mem->skipped == 0);
    /* The defaults of dt_dataset_load (no options). */
    dt_dataset *dflt = NULL;
    CHECK_OK(dt_dataset_load(&dflt, DT_DATASET_FOLDER, at("t"), 1, SHAPE, 0, 0, NULL));
    CHECK(dflt && dflt->n == N && dflt->images && memcmp(dflt->images, mem->images, (size_t)N * SAMPLE) == 0);
    dt_dataset_free(dflt);
    dt_dataset_free(mem);
    dt_dataset_free(disk);
}

static dt_loader_cfg train_cfg(int batch, int rank, int world, int threads, int prefetch, uint64_t seed) {
    dt_loader_cfg c = {.batch = batch, .worker = rank, .workers = world, .seed = seed, .shuffle = 1, .flip = 1,
                       .crop_pad = 2, .prefetch = prefetch, .threads = threads};
    return c;
}

/* Batches from memory and from disk, 1 or 3 threads, with and without
 * prefetch, are the same bits; the seed decides the augmentation. */
static void test_paths_equal(void) {
    dt_dataset *mem = load("t/train", (size_t)1 << 30, 1), *disk = load("t/train", 0, 1);
    if (!mem || !disk) return;
    dt_loader *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    dt_loader_cfg ca = train_cfg(5, 0, 1, 1, 0, 9), cb = train_cfg(5, 0, 1, 3, 1, 9), cd = train_cfg(5, 0, 1, 2, 1, 10);
    CHECK_OK(dt_loader_create(&a, mem, &ca));
    CHECK_OK(dt_loader_create(&b, disk, &cb));
    CHECK_OK(dt_loader_create(&c, mem, &cb));
    CHECK_OK(dt_loader_create(&d, mem, &cd));
    if (a && b && c && d) {
        CHECK(dt_test_loaders_differ(a, b, SAMPLE, 3 * 5) == 0); /* three epochs of 4 batches and a marker */
        CHECK_OK(dt_loader_seek(a, 0, 0));
        CHECK(dt_test_loaders_differ(a, c, SAMPLE, 10) == 0);
        CHECK_OK(dt_loader_seek(a, 0, 0));
        CHECK(dt_test_loaders_differ(a, d, SAMPLE, 4) == 4); /* another seed: other batches */
        /* The same bits in a resumed position. */
        CHECK_OK(dt_loader_seek(a, 2, 1));
        CHECK_OK(dt_loader_seek(b, 2, 1));
        CHECK(dt_test_loaders_differ(a, b, SAMPLE, 6) == 0);
    }
    dt_loader_free(a), dt_loader_free(b), dt_loader_free(c), dt_loader_free(d);
    dt_dataset_free(mem);
    dt_dataset_free(disk);
}

/* Which dataset sample img (C, H, W normalised, no augmentation) is. */
static int which(const dt_dataset *ds, const float *img) {
    for (int i = 0; i < ds->n; i++) {
        int same = 1;
        for (int k = 0; k < SAMPLE && same; k++) same = img[k] == ds->images[(size_t)i * SAMPLE + k] / 255.0f;
        if (same) return i;
    }
    return -1;
}

/* Two ranks of an on-demand set: each step's shards are the serial batch
 * split in rank order, and every epoch covers steps x 2B samples once. */
static void test_shards(void) {
    dt_dataset *mem = load("t/train", (size_t)1 << 30, 1), *disk = load("t/train", 0, 2);
    if (!mem || !disk) return;
    const int B = 5, W = 2, steps = N / (B * W);
    dt_loader *serial = NULL, *rank[2] = {NULL, NULL};
    dt_loader_cfg cs = train_cfg(B * W, 0, 1, 1, 0, 4);
    cs.flip = cs.crop_pad = 0;
    CHECK_OK(dt_loader_create(&serial, disk, &cs));
    for (int r = 0; r < W; r++) {
        dt_loader_cfg cr = train_cfg(B, r, W, 2, r, 4);
        cr.flip = cr.crop_pad = 0;
        CHECK_OK(dt_loader_create(&rank[r], disk, &cr));
    }
    if (!serial || !rank[0] || !rank[1]) return;
    for (int epoch = 0; epoch < 2; epoch++) {
        int seen[N] = {0}, split = 0, unknown = 0;
        for (int t = 0; t < steps; t++) {
            const float *sx, *x;
            const dt_label *sy, *y;
            int sn, n;
            CHECK_OK(dt_loader_next(serial, &sx, &sy, &sn));
            for (int r = 0; r < W; r++) {
                CHECK_OK(dt_loader_next(rank[r], &x, &y, &n));
                split += n == B && memcmp(x, sx + (size_t)r * B * SAMPLE, sizeof(float) * B * SAMPLE) == 0 &&
                         memcmp(y, sy + r * B, sizeof *y * (size_t)B) == 0;
                for (int i = 0; i < n; i++) {
                    int k = which(mem, x + (size_t)i * SAMPLE);
                    if (k < 0) unknown++;
                    else seen[k]++, unknown += mem->labels[k] != y[i];
                }
            }
        }
        int once = 0, more = 0;
        for (int i = 0; i < N; i++) once += seen[i] == 1, more += seen[i] > 1;
        CHECK(split == steps * W && unknown == 0 && once == steps * B * W && more == 0);
        const float *x;
        const dt_label *y;
        int n;
        CHECK_OK(dt_loader_next(serial, &x, &y, &n));
        CHECK(n == 0);
        for (int r = 0; r < W; r++) CHECK_OK(dt_loader_next(rank[r], &x, &y, &n));
    }
    dt_loader_free(serial), dt_loader_free(rank[0]), dt_loader_free(rank[1]);
    dt_dataset_free(mem);
    dt_dataset_free(disk);
}

/* The test split: labelled by the train set's names; a missing or extra
 * class folder refused, or (all_classes 0, eval) a subset accepted. */
static void test_splits(void) {
    dt_dataset *train = load("t/train", (size_t)1 << 30, 1);
    if (!train) return;
    dt_folder_opts o = opts((size_t)1 << 30, 2);
    o.classes = &train->class_names;
    o.all_classes = 1;
    o.classes_from = "TRAIN";
    dt_dataset *test = NULL;
    CHECK_OK(dt_dataset_load_folder(&test, at("t/test"), SHAPE, &o));
    CHECK(test && test->n == CLASSES * PER_CLASS / 2 && test->classes == CLASSES);
    dt_dataset_free(test);
    CHECK(rename(at("t/test/a"), at("away_a")) == 0);
    expect_fail("t/test", &o, DT_ERR_FORMAT, "t/test", "no folder for class 'a', which TRAIN has");
    /* eval: a subset keeps the given labels */
    o.all_classes = 0;
    test = NULL;
    CHECK_OK(dt_dataset_load_folder(&test, at("t/test"), SHAPE, &o));
    if (test) {
        CHECK(test->classes == CLASSES && test->n == 3 * PER_CLASS / 2);
        CHECK(test->labels[0] == 0 && test->labels[PER_CLASS / 2] == 1 && test->labels[PER_CLASS] == 3);
    }
    dt_dataset_free(test);
    CHECK(rename(at("away_a"), at("t/test/zebra")) == 0);
    expect_fail("t/test", &o, DT_ERR_FORMAT, "t/test/zebra", "class 'zebra' is not one of the 4 classes of TRAIN");
    CHECK(rename(at("t/test/zebra"), at("t/test/a")) == 0);
    dt_dataset_free(train);
}

/* bad/FILE moved into class folder t/train/b: refused naming it; with
 * skip_bad, counted. */
static void bad_file(const char *file, const char *needle) {
    char from[1200], to[1200];
    snprintf(from, sizeof from, "%s", at("bad/"));
    strncat(from, file, sizeof from - strlen(from) - 1);
    snprintf(to, sizeof to, "%s", at("t/train/b/"));
    strncat(to, file, sizeof to - strlen(to) - 1);
    CHECK(rename(from, to) == 0);
    dt_folder_opts o = opts(0, 2);
    expect_fail("t/train", &o, DT_ERR_FORMAT, to, needle);
    o.regions = 1; /* only checked at load: at the smallest scale */
    expect_fail("t/train", &o, DT_ERR_FORMAT, to, needle);
    o.regions = 0;
    o.skip_bad = 1;
    for (int cache = 0; cache <= 1; cache++) {
        o.cache_bytes = cache ? (size_t)1 << 30 : 0;
        dt_dataset *ds = NULL;
        CHECK_OK(dt_dataset_load_folder(&ds, at("t/train"), SHAPE, &o));
        CHECK(ds && ds->n == N && ds->skipped == 1 && ds->skipped_first && strstr(ds->skipped_first, to));
        dt_dataset_free(ds);
    }
    CHECK(rename(to, from) == 0);
}

typedef struct {
    const dt_augment *a;
    dt_rng *r;
} rrc_draw;

static dt_rect pick(void *ctx, int h, int w) {
    const rrc_draw *d = ctx;
    return dt_augment_rrc_pick(h, w, d->a, d->r);
}

/* RandomResizedCrop to 3 x 8 x 8 from the files' whole images (regions):
 * the same bits on 1 and 2 threads, with and without prefetch, and the
 * first sample as built by hand from fetch_region (the sample's stream
 * draws the region, then the flip); nothing is cached with regions,
 * whatever the budget. */
static void test_regions(void) {
    dt_folder_opts o = opts((size_t)1 << 30, 2);
    o.regions = 1;
    dt_dataset *whole = NULL;
    CHECK_OK(dt_dataset_load_folder(&whole, at("t/train"), SHAPE, &o));
    if (!whole) return;
    CHECK(!whole->images && whole->fetch && whole->fetch_region);
    const dt_augment a = {.aspect = 1, .saturation = 1, .exposure = 1, .resized_crop = 1, .scale = {0.08f, 1.0f},
                          .ratio = {0.75f, 4.0f / 3.0f}};
    enum { B = 8, S = 3 * 8 * 8 };
    static float keep[B * S];
    for (int run = 0; run < 3; run++) {
        dt_loader_cfg c = {.batch = B, .workers = 1, .seed = 7, .shuffle = 1, .flip = 1, .augment = &a,
                           .out = {3, 8, 8}, .prefetch = run == 2, .threads = run ? 2 : 1};
        dt_loader *ld = NULL;
        CHECK_OK(dt_loader_create(&ld, whole, &c));
        if (!ld) break;
        const float *x;
        const dt_label *y;
        int n;
        CHECK_OK(dt_loader_next(ld, &x, &y, &n));
        if (run == 0)
            memcpy(keep, x, sizeof keep);
        else
            CHECK(memcmp(keep, x, sizeof keep) == 0);
        dt_loader_free(ld);
    }
    uint32_t perm[N];
    for (uint32_t i = 0; i < N; i++) perm[i] = i;
    dt_rng pr = dt_rng_seed(dt_hash3(7, 0, 0x5eed));
    for (uint32_t i = N - 1; i > 0; i--) {
        uint32_t j = dt_rng_below(&pr, i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    dt_rng r = dt_rng_seed(dt_hash3(7, 0, perm[0]));
    rrc_draw d = {&a, &r};
    dt_image img;
    dt_rect region;
    CHECK_OK(whole->fetch_region(whole->fetch_ctx, (int)perm[0], 8, 8, pick, &d, &img, &region));
    float want[S], ws[256];
    CHECK(img.c == 3 && dt_augment_resize_floats((dt_shape){3, 8, 8}) <= sizeof ws / sizeof *ws);
    dt_augment_resize_region(want, (dt_shape){3, 8, 8}, img.px, (size_t)img.w * 3, 3, 1, region, ws);
    dt_image_free(&img);
    if (dt_rng_next(&r) >> 63)
        for (int row = 0; row < 3 * 8; row++)
            for (int x = 0; x < 4; x++) {
                float t = want[row * 8 + x];
                want[row * 8 + x] = want[row * 8 + 7 - x], want[row * 8 + 7 - x] = t;
            }
    CHECK(memcmp(keep, want, sizeof want) == 0);
    dt_dataset_free(whole);
}

/* FNV-1a of sample i's bytes (held in memory). */
static uint64_t sample_hash(const dt_dataset *ds, int i) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int k = 0; k < SAMPLE; k++) h = (h ^ ds->images[(size_t)i * SAMPLE + k]) * 0x100000001b3ULL;
    return h ^ ds->labels[i];
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The split (train 1: the rest, 0: the held-out share) of v/ with --val-split share and seed. */
static dt_dataset *held(int train, double share, uint64_t seed, const dt_class_names *classes) {
    dt_folder_opts o = opts((size_t)1 << 30, 2);
    o.val_split = share, o.seed = seed, o.classes = classes, o.all_classes = classes != NULL;
    dt_dataset *ds = NULL;
    CHECK_OK(dt_dataset_load(&ds, DT_DATASET_FOLDER, at("v"), train, SHAPE, 0, seed, &o));
    return ds;
}

/* --val-split on a folder with no test/: per class round(0.34 x 6) = 2
 * files held out, the rest trains; together they are the folder, apart
 * they share nothing; the same seed draws the same, another seed others;
 * refused beside a test/ and for a class of one image. */
static void test_val_split(void) {
    CHECK(sh("mkdir -p %s/v && cp -r %s/t/train %s/v/", dir, dir, dir) == 0);
    dt_dataset *all = load("v/train", (size_t)1 << 30, 1);
    dt_dataset *tr = held(1, 0.34, 5, NULL), *te = all ? held(0, 0.34, 5, &all->class_names) : NULL;
    if (!all || !tr || !te) goto out;
    CHECK(tr->n == CLASSES * 4 && te->n == CLASSES * 2 && te->classes == CLASSES);
    int per[CLASSES] = {0};
    for (int i = 0; i < te->n; i++) per[te->labels[i]]++;
    for (int c = 0; c < CLASSES; c++) CHECK(per[c] == 2);
    uint64_t a[N], b[N];
    for (int i = 0; i < N; i++) a[i] = sample_hash(all, i);
    for (int i = 0; i < tr->n; i++) b[i] = sample_hash(tr, i);
    for (int i = 0; i < te->n; i++) b[tr->n + i] = sample_hash(te, i);
    qsort(a, N, sizeof *a, cmp_u64);
    qsort(b, N, sizeof *b, cmp_u64);
    CHECK(memcmp(a, b, sizeof a) == 0); /* a partition of the folder */
    dt_dataset *again = held(0, 0.34, 5, &all->class_names), *other = held(0, 0.34, 6, &all->class_names);
    CHECK(again && memcmp(again->images, te->images, (size_t)te->n * SAMPLE) == 0);
    CHECK(other && other->n == te->n && memcmp(other->images, te->images, (size_t)te->n * SAMPLE) != 0);
    dt_dataset_free(again);
    dt_dataset_free(other);
    dt_folder_opts o = opts(0, 1);
    o.val_split = 0.2;
    dt_dataset *ds = NULL;
    CHECK(dt_dataset_load(&ds, DT_DATASET_FOLDER, at("t"), 1, SHAPE, 0, 1, &o) == DT_ERR_USAGE);
    CHECK(strstr(dt_last_error(), "t/test exists; --val-split holds out part of DIR/train") != NULL);
    CHECK(sh("mkdir %s/v/train/solo && cp %s/bad/good.png %s/v/train/solo/", dir, dir, dir) == 0);
    CHECK(dt_dataset_load(&ds, DT_DATASET_FOLDER, at("v"), 1, SHAPE, 0, 1, &o) == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "v/train/solo: one image; --val-split needs two per class") != NULL);
out:
    dt_dataset_free(all);
    dt_dataset_free(tr);
    dt_dataset_free(te);
}

/* Files that are no images by their names, beside the class folders and in
 * them (a README, Thumbs.db, a text file with an image's name elsewhere):
 * counted and named, not read, with or without skipping bad files; a
 * class folder of nothing else is still an error. */
static void test_ignored_files(void) {
    CHECK(sh("cd %s/t/train && echo hi > README && echo x > b/Thumbs.db && cp ../../bad/notes.txt b/", dir) == 0);
    for (int skip = 0; skip <= 1; skip++) {
        dt_folder_opts o = opts(0, 2);
        o.skip_bad = skip;
        dt_dataset *ds = NULL;
        CHECK_OK(dt_dataset_load_folder(&ds, at("t/train"), SHAPE, &o));
        CHECK(ds && ds->n == N && ds->skipped == 0 && ds->ignored == 3 && ds->classes == CLASSES);
        CHECK(ds && ds->ignored_first && strcmp(ds->ignored_first, at("t/train/README")) == 0);
        dt_dataset_free(ds);
    }
    CHECK(sh("cd %s/t/train && rm README b/Thumbs.db b/notes.txt", dir) == 0);
}

/* 300 class folders (labels past a byte), two images each: labels follow
 * the sorted folders up to 299, and --val-split holds out one of each. */
static void test_many_classes(void) {
    CHECK(sh("cd %s && for i in $(seq 1000 1299); do mkdir -p many/c$i && cp bad/good.png many/c$i/a.png && "
             "cp bad/good.png many/c$i/b.png; done", dir) == 0);
    dt_folder_opts o = opts(1 << 20, 2);
    dt_dataset *ds = NULL;
    CHECK_OK(dt_dataset_load_folder(&ds, at("many"), SHAPE, &o));
    CHECK(ds && ds->n == 600 && ds->classes == 300 && ds->labels[599] == 299 && ds->labels[300] == 150);
    CHECK(ds && strcmp(ds->class_names.names[299], "c1299") == 0);
    dt_dataset_free(ds);
    o.val_split = 0.5;
    CHECK_OK(dt_dataset_load_folder(&ds, at("many"), SHAPE, &o));
    CHECK(ds && ds->n == 300 && ds->labels[299] == 299);
    dt_dataset_free(ds);
}

static void test_bad_input(void) {
    bad_file("empty.png", "empty file");
    bad_file("truncated.png", "corrupt PNG");
    bad_file("truncated.jpg", "corrupt JPEG");
    bad_file("garbage.jpg", "not a PNG or JPEG");
    bad_file("huge.png", "30000 x 30000");
    dt_folder_opts o = opts(0, 1);
    /* A folder in a class folder, then a class folder of nothing else. */
    CHECK(mkdir(at("t/train/b/sub"), 0755) == 0);
    expect_fail("t/train", &o, DT_ERR_FORMAT, "t/train/b/sub", "a folder inside a class folder");
    CHECK(rmdir(at("t/train/b/sub")) == 0);
    CHECK(mkdir(at("t/train/empty"), 0755) == 0);
    expect_fail("t/train", &o, DT_ERR_FORMAT, "t/train/empty", "no images in this class folder");
    /* Only bad files: nothing left even when skipping. */
    CHECK(sh("cp %s/bad/text.png %s/t/train/empty/", dir, dir) == 0);
    o.skip_bad = 1;
    expect_fail("t/train", &o, DT_ERR_FORMAT, "t/train/empty", "no readable images");
    o.skip_bad = 0;
    CHECK(sh("rm -r %s/t/train/empty", dir) == 0);
    /* No train folder; no class folders (a file beside them is none). */
    expect_fail("nowhere/train", &o, DT_ERR_IO, "nowhere/train", "no such folder");
    CHECK(mkdir(at("none"), 0755) == 0);
    CHECK(sh("cp %s/bad/good.png %s/none/", dir, dir) == 0);
    expect_fail("none", &o, DT_ERR_FORMAT, "none", "no class folders");
    /* Channels the images cannot give. */
    dt_dataset *ds = NULL;
    CHECK(dt_dataset_load_folder(&ds, at("t/train"), (dt_shape){2, 8, 8}, &o) == DT_ERR_CONFIG);
    test_many_classes();
}

/* An on-demand sample that can no longer be decoded: the batch fails
 * naming the file, the position stays, and once the file is back the same
 * batch comes. */
static void test_fetch_failure(void) {
    dt_dataset *disk = load("t/train", 0, 1);
    if (!disk) return;
    dt_loader *l = NULL, *ref = NULL;
    dt_loader_cfg c = train_cfg(N, 0, 1, 2, 1, 3); /* one batch of everything */
    CHECK_OK(dt_loader_create(&l, disk, &c));
    c.prefetch = 0;
    CHECK_OK(dt_loader_create(&ref, disk, &c));
    if (!l || !ref) return;
    CHECK(rename(at("t/train/a/img002.png"), at("away.png")) == 0);
    const float *x;
    const dt_label *y;
    int n = -1, e, s;
    CHECK(dt_loader_next(l, &x, &y, &n) == DT_ERR_IO);
    CHECK(strstr(dt_last_error(), "t/train/a/img002.png") != NULL);
    dt_loader_position(l, &e, &s);
    CHECK(e == 0 && s == 0);
    CHECK(rename(at("away.png"), at("t/train/a/img002.png")) == 0);
    CHECK(dt_test_loaders_differ(l, ref, SAMPLE, 4) == 0);
    dt_loader_free(l);
    dt_loader_free(ref);
    dt_dataset_free(disk);
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s tree %s/t b,a,C,_x %d %d && /usr/bin/python3 %s bad %s/bad",
             dt_test_src_path("tests/make_images.py"), dir, PER_CLASS, SIDE, dt_test_src_path("tests/make_images.py"),
             dir);
    int rc = system(cmd);
    if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 3) {
        printf("test_folder: skipped (python3 with PIL and numpy is needed to write the images)\n");
        return 77;
    }
    CHECK(rc == 0);
    /* Ignored: names starting with '.', files and folders alike. */
    CHECK(sh("touch %s/t/train/a/.DS_Store && mkdir %s/t/train/.hidden", dir, dir) == 0);
    test_mapping_and_fetch();
    test_paths_equal();
    test_regions();
    test_shards();
    test_splits();
    test_ignored_files();
    test_val_split();
    test_bad_input();
    test_fetch_failure();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return dt_test_finish("test_folder");
}

/* Dataset readers: IDX (plain and gzip), CIFAR-10 binary batches and
 * synthetic data, on files written to a temporary directory; every malformed
 * input must fail with DT_ERR_IO / DT_ERR_FORMAT and a message naming the
 * file. Real Fashion-MNIST is checked when installed. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "data/internal.h"
#include "dtrain/data.h"
#include "dtrain/rng.h"
#include "testutil.h"

static char tmpdir[] = "/tmp/dtrain_test_data_XXXXXX";

/* dir/name in a static buffer (one of four, so a call can use several). */
static const char *path_of(const char *dir, const char *name) {
    static char bufs[4][1100];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, sizeof bufs[0], "%s/%s", dir, name);
    return p;
}

/* Writes len bytes to path, gzip-compressed when gz is set. */
static void write_file(const char *path, int gz, const void *data, size_t len) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        CHECK(f != NULL);
        if (!f) return;
        if (len) CHECK(gzwrite(f, data, (unsigned)len) == (int)len);
        CHECK(gzclose(f) == Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        if (!f) return;
        CHECK(fwrite(data, 1, len, f) == len);
        CHECK(fclose(f) == 0);
    }
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* Writes an IDX file: magic, ndims dims, then payload_len payload bytes
 * (which may disagree with the dims, to make broken files). */
static void write_idx(const char *path, int gz, uint32_t magic, int ndims, const uint32_t *dims,
                      const uint8_t *payload, size_t payload_len) {
    size_t header = 4 + 4 * (size_t)ndims;
    uint8_t *buf = malloc(header + payload_len);
    put_be32(buf, magic);
    for (int d = 0; d < ndims; d++) put_be32(buf + 4 + 4 * d, dims[d]);
    if (payload_len) memcpy(buf + header, payload, payload_len);
    write_file(path, gz, buf, header + payload_len);
    free(buf);
}

/* Test IDX content: N images of H x W, pixel bytes spread over 0..255. */
enum { N = 7, H = 3, W = 4 };
static uint8_t pixel(int i, int k) { return (uint8_t)(i * 37 + k * 11 + (i * k) % 5); }

static void write_images(const char *path, int gz, uint32_t magic, uint32_t n, size_t have) {
    uint8_t payload[N * H * W];
    for (int i = 0; i < N; i++)
        for (int k = 0; k < H * W; k++) payload[i * H * W + k] = pixel(i, k);
    uint32_t dims[3] = {n, H, W};
    write_idx(path, gz, magic, 3, dims, payload, have);
}

static void write_labels(const char *path, int gz, uint32_t n, const uint8_t *labels) {
    uint32_t dims[1] = {n};
    write_idx(path, gz, 0x801, 1, dims, labels, n);
}

static const uint8_t good_labels[N] = {3, 0, 9, 1, 4, 1, 5};

/* s must be the status `want` with a message containing every given
 * substring (NULL-terminated list). */
static void expect_fail(dt_status s, dt_status want, const char *sub1, const char *sub2,
                        const char *sub3) {
    CHECK(s == want);
    const char *subs[3] = {sub1, sub2, sub3};
    for (int i = 0; i < 3; i++) {
        if (subs[i] && !strstr(dt_last_error(), subs[i])) {
            fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", dt_last_error(), subs[i]);
            CHECK(strstr(dt_last_error(), subs[i]) != NULL);
        }
    }
}

static void test_kinds(void) {
    CHECK(dt_dataset_kind_from_name("fashion-mnist") == DT_DATASET_FASHION_MNIST);
    CHECK(dt_dataset_kind_from_name("mnist") == DT_DATASET_MNIST);
    CHECK(dt_dataset_kind_from_name("cifar10") == DT_DATASET_CIFAR10);
    CHECK(dt_dataset_kind_from_name("synthetic") == DT_DATASET_SYNTHETIC);
    CHECK(dt_dataset_kind_from_name("imagenet") == -1);
    for (int k = 0; k <= DT_DATASET_SYNTHETIC; k++)
        CHECK(dt_dataset_kind_from_name(dt_dataset_kind_name((dt_dataset_kind)k)) == k);
    CHECK(strcmp(dt_dataset_default_dir(DT_DATASET_FASHION_MNIST), "/usr/share/datasets/fashion-mnist") == 0);
}

static void check_idx_content(const dt_dataset *ds) {
    CHECK(ds->n == N);
    CHECK(ds->shape.c == 1 && ds->shape.h == H && ds->shape.w == W);
    CHECK(ds->classes == 10);
    CHECK(ds->mean[0] == 0.0f && ds->std[0] == 1.0f);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        bad += ds->labels[i] != good_labels[i];
        for (int k = 0; k < H * W; k++) bad += ds->images[i * H * W + k] != pixel(i, k);
    }
    CHECK(bad == 0);
}

static void test_idx_ok(void) {
    for (int gz = 0; gz < 4; gz++) { /* bit 0: images gzipped, bit 1: labels gzipped */
        const char *img = path_of(tmpdir, "ok-images"), *lab = path_of(tmpdir, "ok-labels");
        write_images(img, gz & 1, 0x803, N, N * H * W);
        write_labels(lab, gz & 2, N, good_labels);
        dt_dataset *ds = NULL;
        CHECK_OK(dt_dataset_load_idx(&ds, img, lab));
        if (ds) check_idx_content(ds);
        dt_dataset_free(ds);
    }
}

/* dt_dataset_load finds train-* / t10k-* files with and without .gz. */
static void test_load_dir(void) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/mnist", tmpdir);
    CHECK(mkdir(dir, 0700) == 0);
    write_images(path_of(dir, "train-images-idx3-ubyte.gz"), 1, 0x803, N, N * H * W);
    write_labels(path_of(dir, "train-labels-idx1-ubyte"), 0, N, good_labels);
    dt_dataset *ds = NULL;
    dt_shape none = {0, 0, 0};
    CHECK_OK(dt_dataset_load(&ds, DT_DATASET_MNIST, dir, 1, none, 0, 0, NULL));
    if (ds) check_idx_content(ds);
    dt_dataset_free(ds);
    /* No test files yet: the error names the missing file. */
    ds = NULL;
    expect_fail(dt_dataset_load(&ds, DT_DATASET_MNIST, dir, 0, none, 0, 0, NULL), DT_ERR_IO, "cannot open",
                "t10k-images-idx3-ubyte", dir);
    CHECK(ds == NULL);
    write_images(path_of(dir, "t10k-images-idx3-ubyte"), 0, 0x803, 3, 3 * H * W);
    write_labels(path_of(dir, "t10k-labels-idx1-ubyte.gz"), 1, 3, good_labels);
    CHECK_OK(dt_dataset_load(&ds, DT_DATASET_FASHION_MNIST, dir, 0, none, 0, 0, NULL));
    CHECK(ds && ds->n == 3 && ds->labels[2] == good_labels[2] && ds->images[2 * H * W + 5] == pixel(2, 5));
    dt_dataset_free(ds);
}

static void test_idx_errors(void) {
    const char *img = path_of(tmpdir, "e-images"), *lab = path_of(tmpdir, "e-labels");
    const char *missing = path_of(tmpdir, "no-such-file");
    dt_dataset *ds = NULL;
    write_labels(lab, 0, N, good_labels);

    expect_fail(dt_dataset_load_idx(&ds, missing, lab), DT_ERR_IO, "cannot open", missing, NULL);
    write_images(img, 0, 0x803, N, N * H * W);
    expect_fail(dt_dataset_load_idx(&ds, img, missing), DT_ERR_IO, "cannot open", missing, NULL);

    for (int gz = 0; gz < 2; gz++) {
        /* 5 whole images and part of a sixth. */
        write_images(img, gz, 0x803, N, 5 * H * W + 3);
        expect_fail(dt_dataset_load_idx(&ds, img, lab), DT_ERR_FORMAT, img,
                    "truncated: expected 7 images", "file ends after 5");
        /* A gzip stream cut in the middle (the deflate data ends early). */
        if (gz) {
            write_images(img, 1, 0x803, N, N * H * W);
            struct stat st;
            CHECK(stat(img, &st) == 0 && truncate(img, st.st_size / 2) == 0);
            expect_fail(dt_dataset_load_idx(&ds, img, lab), DT_ERR_FORMAT, img,
                        "truncated: expected 7 images", NULL);
        }
        /* Labels file given as the images file. */
        write_images(img, gz, 0x801, N, N * H * W);
        expect_fail(dt_dataset_load_idx(&ds, img, lab), DT_ERR_FORMAT, img, "0x00000801",
                    "0x00000803");
    }
    /* Header itself cut short. */
    write_file(img, 0, "\0\0\x08\x03\0\0", 6);
    expect_fail(dt_dataset_load_idx(&ds, img, lab), DT_ERR_FORMAT, img, "truncated", NULL);
    /* Data beyond what the header declares. */
    write_images(img, 0, 0x803, N - 1, N * H * W);
    expect_fail(dt_dataset_load_idx(&ds, img, lab), DT_ERR_FORMAT, img, "after the 6 images", NULL);
    /* 7 images, 6 labels. */
    write_images(img, 0, 0x803, N, N * H * W);
    write_labels(lab, 0, N - 1, good_labels);
    expect_fail(dt_dataset_load_idx(&ds, img, lab), DT_ERR_FORMAT, "7 images", "6 labels", lab);
    /* Label 12 at index 4. */
    uint8_t labels[N];
    memcpy(labels, good_labels, N);
    labels[4] = 12;
    write_labels(lab, 1, N, labels);
    expect_fail(dt_dataset_load_idx(&ds, img, lab), DT_ERR_FORMAT, lab, "label 12 at index 4", NULL);
    /* Dimensions out of range. */
    uint32_t dims[3] = {N, 0, W};
    write_idx(img, 0, 0x803, 3, dims, NULL, 0);
    expect_fail(dt_dataset_load_idx(&ds, img, lab), DT_ERR_FORMAT, img, "dimension 1", NULL);
    dims[1] = H, dims[2] = DT_DATA_MAX_DIM + 1;
    write_idx(img, 0, 0x803, 3, dims, NULL, 0);
    expect_fail(dt_dataset_load_idx(&ds, img, lab), DT_ERR_FORMAT, img, "4097", NULL);
    CHECK(ds == NULL);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A 100-byte file whose header claims billions (or ten million) of 28x28
 * images fails at once, without allocating what the header claims. */
static void test_idx_huge_header(void) {
    const char *img = path_of(tmpdir, "huge-images"), *lab = path_of(tmpdir, "huge-labels");
    write_labels(lab, 0, N, good_labels);
    uint8_t junk[100 - 16];
    memset(junk, 7, sizeof junk);
    dt_dataset *ds = NULL;
    for (int gz = 0; gz < 2; gz++) {
        uint32_t dims[3] = {2147483648u, 28, 28};
        write_idx(img, gz, 0x803, 3, dims, junk, sizeof junk);
        double t0 = now_s();
        expect_fail(dt_dataset_load_idx(&ds, img, lab), DT_ERR_FORMAT, img, "2147483648 images",
                    NULL);
        /* Within the sample bound but 7.8 GB: only the file size limits it. */
        dims[0] = 10000000;
        write_idx(img, gz, 0x803, 3, dims, junk, sizeof junk);
        expect_fail(dt_dataset_load_idx(&ds, img, lab), DT_ERR_FORMAT, img,
                    "expected 10000000 images", "file ends after 0");
        CHECK(now_s() - t0 < 1.0);
    }
    CHECK(ds == NULL);
}

/* A CIFAR-10 record: label, then 3072 bytes derived from (file, i). */
enum { REC = 3073 };
static void cifar_record(uint8_t *rec, int file, int i) {
    rec[0] = (uint8_t)((i + file) % 10);
    for (int k = 0; k < 3072; k++) rec[1 + k] = (uint8_t)(file * 50 + i * 7 + k * 3);
}

static void write_cifar(const char *path, int gz, int file, int records, size_t extra) {
    size_t len = (size_t)records * REC + extra;
    uint8_t *buf = calloc(len ? len : 1, 1);
    for (int i = 0; i < records; i++) cifar_record(buf + (size_t)i * REC, file, i);
    write_file(path, gz, buf, len);
    free(buf);
}

static void test_cifar(void) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cifar", tmpdir);
    CHECK(mkdir(dir, 0700) == 0);
    dt_dataset *ds = NULL;
    expect_fail(dt_dataset_load_cifar10(&ds, dir, 1), DT_ERR_IO, dir, "data_batch_1.bin", NULL);
    expect_fail(dt_dataset_load_cifar10(&ds, dir, 0), DT_ERR_IO, "test_batch.bin", "cannot open", NULL);
    /* Batches 1 and 3 present (3 gzipped), 2, 4, 5 missing. */
    write_cifar(path_of(dir, "data_batch_1.bin"), 0, 1, 5, 0);
    write_cifar(path_of(dir, "data_batch_3.bin"), 1, 3, 3, 0);
    write_cifar(path_of(dir, "test_batch.bin"), 0, 9, 4, 0);
    CHECK_OK(dt_dataset_load(&ds, DT_DATASET_CIFAR10, dir, 1, (dt_shape){0, 0, 0}, 0, 0, NULL));
    if (ds) {
        CHECK(ds->n == 8 && ds->classes == 10);
        CHECK(ds->shape.c == 3 && ds->shape.h == 32 && ds->shape.w == 32);
        uint8_t rec[REC];
        int bad = 0;
        for (int i = 0; i < 8; i++) {
            cifar_record(rec, i < 5 ? 1 : 3, i < 5 ? i : i - 5);
            bad += ds->labels[i] != rec[0] || memcmp(ds->images + (size_t)i * 3072, rec + 1, 3072);
        }
        CHECK(bad == 0);
        CHECK(ds->mean[2] == 0.0f && ds->std[2] == 1.0f);
    }
    dt_dataset_free(ds);
    CHECK_OK(dt_dataset_load_cifar10(&ds, dir, 0));
    CHECK(ds && ds->n == 4 && ds->labels[3] == (3 + 9) % 10);
    dt_dataset_free(ds);
    ds = NULL;

    const char *bad_path = path_of(dir, "data_batch_3.bin");
    write_cifar(bad_path, 1, 3, 3, 100);
    expect_fail(dt_dataset_load_cifar10(&ds, dir, 1), DT_ERR_FORMAT, bad_path, "3073", NULL);
    write_cifar(bad_path, 0, 3, 0, 0);
    expect_fail(dt_dataset_load_cifar10(&ds, dir, 1), DT_ERR_FORMAT, bad_path, "3073", NULL);
    write_cifar(bad_path, 0, 3, 3, 0);
    uint8_t rec[REC];
    cifar_record(rec, 3, 0);
    rec[0] = 10;
    FILE *f = fopen(bad_path, "r+b");
    CHECK(f && fseek(f, 2 * REC, SEEK_SET) == 0 && fwrite(rec, 1, 1, f) == 1);
    if (f) fclose(f);
    expect_fail(dt_dataset_load_cifar10(&ds, dir, 1), DT_ERR_FORMAT, bad_path, "label 10 at index 2",
                NULL);
    CHECK(ds == NULL);
}

/* The descriptor entry points read from the current offset (here past a
 * prefix) and name the files by the names given. */
static void test_fd_readers(void) {
    const char *img = path_of(tmpdir, "fd-images"), *lab = path_of(tmpdir, "fd-labels");
    uint8_t payload[N * H * W + 16];
    for (int i = 0; i < N; i++)
        for (int k = 0; k < H * W; k++) payload[16 + i * H * W + k] = pixel(i, k);
    uint32_t dims[3] = {N, H, W};
    put_be32(payload, 0x803);
    for (int d = 0; d < 3; d++) put_be32(payload + 4 + 4 * d, dims[d]);
    uint8_t prefixed[5 + sizeof payload];
    memcpy(prefixed, "JUNK!", 5);
    memcpy(prefixed + 5, payload, sizeof payload);
    write_file(img, 0, prefixed, sizeof prefixed);
    write_labels(lab, 1, N, good_labels);
    int ifd = open(img, O_RDONLY), lfd = open(lab, O_RDONLY);
    CHECK(ifd >= 0 && lfd >= 0);
    dt_dataset *ds = NULL;
    CHECK(lseek(ifd, 5, SEEK_SET) == 5);
    CHECK_OK(dt_dataset_load_idx_fd(&ds, ifd, "my-images", lfd, "my-labels"));
    if (ds) check_idx_content(ds);
    dt_dataset_free(ds);
    ds = NULL;
    CHECK(lseek(ifd, 0, SEEK_SET) == 0 && lseek(lfd, 0, SEEK_SET) == 0);
    expect_fail(dt_dataset_load_idx_fd(&ds, ifd, "my-images", lfd, "my-labels"), DT_ERR_FORMAT,
                "my-images: bad magic", NULL, NULL);
    close(ifd);
    close(lfd);

    const char *cif = path_of(tmpdir, "fd-cifar");
    write_cifar(cif, 1, 2, 3, 0);
    int cfd = open(cif, O_RDONLY);
    CHECK(cfd >= 0);
    CHECK_OK(dt_dataset_load_cifar10_fd(&ds, cfd, "my-batch"));
    CHECK(ds && ds->n == 3 && ds->labels[2] == (2 + 2) % 10);
    dt_dataset_free(ds);
    ds = NULL;
    expect_fail(dt_dataset_load_cifar10_fd(&ds, cfd, "my-batch"), DT_ERR_FORMAT, "my-batch: size 0",
                NULL, NULL); /* at the end now */
    close(cfd);
    CHECK(ds == NULL);
}

/* Nearest-class-mean accuracy on b with the means of a: synthetic classes
 * must be learnable, and a test set must share the train set's classes. */
static double nearest_mean_accuracy(const dt_dataset *a, const dt_dataset *b) {
    size_t sz = (size_t)a->shape.c * a->shape.h * a->shape.w;
    double *mean = calloc((size_t)a->classes * sz, sizeof(double));
    int *count = calloc((size_t)a->classes, sizeof(int));
    for (int i = 0; i < a->n; i++) {
        count[a->labels[i]]++;
        for (size_t k = 0; k < sz; k++) mean[a->labels[i] * sz + k] += a->images[i * sz + k];
    }
    for (int c = 0; c < a->classes; c++)
        for (size_t k = 0; k < sz; k++) mean[c * sz + k] /= count[c] ? count[c] : 1;
    int right = 0;
    for (int i = 0; i < b->n; i++) {
        int best = 0;
        double best_d = 1e300;
        for (int c = 0; c < a->classes; c++) {
            double d = 0;
            for (size_t k = 0; k < sz; k++) {
                double e = b->images[i * sz + k] - mean[c * sz + k];
                d += e * e;
            }
            if (d < best_d) best_d = d, best = c;
        }
        right += best == b->labels[i];
    }
    free(mean);
    free(count);
    return (double)right / b->n;
}

static void test_synthetic(void) {
    dt_shape shape = {3, 6, 5};
    dt_dataset *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(dt_dataset_synthetic(&a, shape, 7, 2000, 42));
    CHECK_OK(dt_dataset_synthetic(&b, shape, 7, 2000, 42));
    CHECK_OK(dt_dataset_synthetic(&c, shape, 7, 2000, 43));
    if (!a || !b || !c) return;
    CHECK(a->n == 2000 && a->classes == 7 && a->shape.c == 3 && a->shape.h == 6 && a->shape.w == 5);
    CHECK(memcmp(a->images, b->images, 2000 * 90) == 0 && memcmp(a->labels, b->labels, 2000) == 0);
    CHECK(memcmp(a->images, c->images, 2000 * 90) != 0 && memcmp(a->labels, c->labels, 2000) != 0);
    int hist[7] = {0}, out_of_range = 0;
    for (int i = 0; i < a->n; i++) {
        if (a->labels[i] < 7) hist[a->labels[i]]++;
        else out_of_range++;
    }
    CHECK(out_of_range == 0);
    for (int k = 0; k < 7; k++) CHECK(hist[k] > 200 && hist[k] < 380); /* ~286 each */
    /* Learnable: class means of the first seed classify its own data. */
    double acc = nearest_mean_accuracy(a, a);
    CHECK(acc > 0.9);
    /* Different seed, different classes: near chance (1/7). */
    CHECK(nearest_mean_accuracy(a, c) < 0.3);
    dt_dataset_free(a);
    dt_dataset_free(b);
    dt_dataset_free(c);

    /* Through dt_dataset_load: train = dt_dataset_synthetic, test differs
     * but shares the classes. */
    dt_dataset *train = NULL, *test = NULL, *direct = NULL;
    dt_shape small = {1, 4, 4};
    CHECK_OK(dt_dataset_load(&train, DT_DATASET_SYNTHETIC, NULL, 1, small, 0, 5, NULL));
    CHECK_OK(dt_dataset_load(&test, DT_DATASET_SYNTHETIC, NULL, 0, small, 0, 5, NULL));
    CHECK_OK(dt_dataset_synthetic(&direct, small, 10, 60000, 5));
    if (train && test && direct) {
        CHECK(train->n == 60000 && test->n == 10000 && train->classes == 10);
        CHECK(memcmp(train->images, direct->images, 60000 * 16) == 0);
        CHECK(memcmp(train->images, test->images, 10000 * 16) != 0);
        CHECK(nearest_mean_accuracy(train, test) > 0.5); /* 16 noisy pixels; chance is 0.1 */
    }
    dt_dataset_free(train);
    dt_dataset_free(test);
    dt_dataset_free(direct);
    dt_dataset *bad = NULL;
    expect_fail(dt_dataset_synthetic(&bad, (dt_shape){0, 4, 4}, 10, 10, 1), DT_ERR_USAGE,
                "synthetic", NULL, NULL);
    expect_fail(dt_dataset_synthetic(&bad, small, DT_DATA_MAX_CLASSES + 1, 10, 1), DT_ERR_USAGE, "100001 classes",
                NULL, NULL);
    CHECK(bad == NULL);
    /* Labels above 255: 1000 classes (a Darknet ImageNet cfg's outputs),
     * and dt_dataset_load's class count. */
    CHECK_OK(dt_dataset_synthetic(&bad, small, 1000, 5000, 1));
    int top = 0;
    for (int i = 0; bad && i < bad->n; i++) top = bad->labels[i] > top ? bad->labels[i] : top;
    CHECK(bad && bad->classes == 1000 && top > 990);
    dt_dataset_free(bad);
    CHECK_OK(dt_dataset_load(&bad, DT_DATASET_SYNTHETIC, NULL, 0, small, 300, 5, NULL));
    CHECK(bad && bad->classes == 300);
    dt_dataset_free(bad);
}

/* The synthetic set's contract written independently, sequentially:
 * templates (classes, C, H, W) are the first bytes of the stream seeded by
 * (seed, 0x7e3a1a7e, 0), eight a draw; then per sample of the stream seeded
 * by (seed, 0x5a3b1e, stream) a label draw and C*H*W noise bytes, the image
 * the average of noise and template. images (n, C, H, W), labels (n). */
static void synthetic_reference(uint8_t *images, dt_label *labels, dt_shape shape, int classes, int n, uint64_t seed,
                                uint64_t stream) {
    size_t size = dt_shape_size(shape), tbytes = (size_t)classes * size;
    uint8_t *templates = malloc(tbytes), *noise = malloc(size);
    dt_rng r = dt_rng_seed(dt_hash3(seed, 0x7e3a1a7e, 0));
    uint64_t v = 0;
    for (size_t i = 0; i < tbytes; i++) {
        if (i % 8 == 0) v = dt_rng_next(&r);
        templates[i] = (uint8_t)(v >> (8 * (i % 8)));
    }
    r = dt_rng_seed(dt_hash3(seed, 0x5a3b1e, stream));
    for (int i = 0; i < n; i++) {
        labels[i] = (dt_label)dt_rng_below(&r, (uint32_t)classes);
        for (size_t k = 0; k < size; k++) {
            if (k % 8 == 0) v = dt_rng_next(&r);
            noise[k] = (uint8_t)(v >> (8 * (k % 8)));
        }
        for (size_t k = 0; k < size; k++)
            images[(size_t)i * size + k] = (uint8_t)((noise[k] + templates[(size_t)labels[i] * size + k]) / 2);
    }
    free(templates);
    free(noise);
}

/* A held set and one generated per sample (held_bytes 0) hold the
 * reference's bytes, also through the loader's threads; shapes whose
 * samples are not a multiple of eight bytes start templates mid-draw. */
static void test_synthetic_on_demand(void) {
    const dt_shape shapes[] = {{3, 6, 5}, {1, 4, 4}, {3, 7, 7}};
    for (int t = 0; t < 3; t++) {
        dt_shape shape = shapes[t];
        const int n = 700, classes = t == 1 ? 10 : 301;
        size_t size = dt_shape_size(shape);
        uint8_t *ref = malloc((size_t)n * size), *one = malloc(size);
        dt_label *ref_labels = malloc(sizeof(dt_label) * (size_t)n);
        synthetic_reference(ref, ref_labels, shape, classes, n, 42, (uint64_t)t);
        dt_dataset *held = NULL, *gen = NULL;
        CHECK_OK(dt_data_synthetic(&held, shape, classes, n, 42, (uint64_t)t, DT_SYNTHETIC_HELD_BYTES));
        CHECK_OK(dt_data_synthetic(&gen, shape, classes, n, 42, (uint64_t)t, 0));
        if (held && gen) {
            CHECK(held->images && !held->fetch && !gen->images && gen->fetch);
            CHECK(memcmp(held->images, ref, (size_t)n * size) == 0);
            CHECK(memcmp(held->labels, ref_labels, sizeof(dt_label) * (size_t)n) == 0);
            CHECK(memcmp(gen->labels, ref_labels, sizeof(dt_label) * (size_t)n) == 0);
            int bad = 0;
            for (int i = 0; i < n; i++) {
                CHECK_OK(gen->fetch(gen->fetch_ctx, i, one));
                bad += memcmp(one, ref + (size_t)i * size, size) != 0;
            }
            CHECK(bad == 0);
            /* The loader's batches, built by three threads, are the held set's. */
            dt_loader_cfg lc = {.batch = 64, .workers = 1, .seed = 3, .shuffle = 1, .flip = 1, .threads = 3};
            dt_loader *a = NULL, *b = NULL;
            CHECK_OK(dt_loader_create(&a, held, &lc));
            CHECK_OK(dt_loader_create(&b, gen, &lc));
            for (int step = 0; a && b && step < 3; step++) {
                const float *xa, *xb;
                const dt_label *ya, *yb;
                int na = 0, nb = 0;
                CHECK_OK(dt_loader_next(a, &xa, &ya, &na));
                CHECK_OK(dt_loader_next(b, &xb, &yb, &nb));
                CHECK(na == 64 && nb == 64 && memcmp(xa, xb, sizeof(float) * 64 * size) == 0 &&
                      memcmp(ya, yb, sizeof(dt_label) * 64) == 0);
            }
            dt_loader_free(a);
            dt_loader_free(b);
        }
        dt_dataset_free(held);
        dt_dataset_free(gen);
        free(ref);
        free(one);
        free(ref_labels);
    }
    /* ImageNet's shape: 60000 samples (8.5 GiB if held) are not held. */
    dt_dataset *big = NULL;
    CHECK_OK(dt_dataset_load(&big, DT_DATASET_SYNTHETIC, NULL, 1, (dt_shape){3, 224, 224}, 1000, 5, NULL));
    CHECK(big && !big->images && big->fetch && big->n == 60000 && big->classes == 1000);
    dt_dataset_free(big);
}

static void test_fashion_mnist(void) {
    const char *dir = dt_dataset_default_dir(DT_DATASET_FASHION_MNIST);
    if (access(dir, R_OK) != 0) {
        printf("test_data: %s not present, real-data check skipped\n", dir);
        return;
    }
    dt_shape none = {0, 0, 0};
    for (int train = 1; train >= 0; train--) {
        dt_dataset *ds = NULL;
        CHECK_OK(dt_dataset_load(&ds, DT_DATASET_FASHION_MNIST, NULL, train, none, 0, 0, NULL));
        if (!ds) continue;
        int n = train ? 60000 : 10000;
        CHECK(ds->n == n && ds->classes == 10);
        CHECK(ds->shape.c == 1 && ds->shape.h == 28 && ds->shape.w == 28);
        int hist[10] = {0};
        for (int i = 0; i < ds->n; i++) hist[ds->labels[i] % 10]++;
        for (int k = 0; k < 10; k++) CHECK(hist[k] == n / 10); /* balanced classes */
        CHECK(ds->labels[0] == 9);                               /* an ankle boot, in both */
        if (train) {
            long sum = 0;
            for (int k = 0; k < 784; k++) sum += ds->images[k];
            CHECK(sum == 76247);
            CHECK(ds->labels[1] == 0 && ds->labels[3] == 3);
        }
        dt_dataset_free(ds);
    }
}

/* Removes the temporary directory tree (two levels deep). */
static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0) remove_tree(p);
    }
    closedir(d);
    rmdir(dir);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_kinds();
    test_idx_ok();
    test_load_dir();
    test_idx_errors();
    test_idx_huge_header();
    test_cifar();
    test_fd_readers();
    test_synthetic();
    test_synthetic_on_demand();
    test_fashion_mnist();
    remove_tree(tmpdir);
    return dt_test_finish("test_data");
}

/* Checkpoint files: round trip, and every kind of damage is refused without
 * touching the caller's arrays. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "dtrain/checkpoint.h"
#include "dtrain/ckptdir.h"
#include "testutil.h"

#define NP 1000
#define NS 7

static char dir[] = "/tmp/dt_ckpt_XXXXXX";

static void fill(float *p, size_t n, float base) {
    for (size_t i = 0; i < n; i++) p[i] = base + (float)i * 0.5f;
}

static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void flip_byte(const char *path, long offset) {
    FILE *f = fopen(path, "r+b");
    fseek(f, offset, SEEK_SET);
    int c = fgetc(f);
    fseek(f, offset, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static void copy_file(const char *from, const char *to, long limit) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int c;
    for (long i = 0; (limit < 0 || i < limit) && (c = fgetc(a)) != EOF; i++) fputc(c, b);
    fclose(a);
    fclose(b);
}

/* Loading `path` must fail with `want` and a message containing `needle`,
 * and leave the arrays as they were. */
static void expect_reject(const char *path, uint64_t hash, dt_status want, const char *needle) {
    float p[NP], s[NS], m[NP];
    fill(p, NP, -7), fill(s, NS, -7), fill(m, NP, -7);
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0, NULL, NULL, 0, 0, 0, NULL};
    dt_ckpt_meta meta;
    dt_status st = dt_checkpoint_load(path, hash, &meta, &a);
    CHECK(st == want);
    if (!strstr(dt_last_error(), needle)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", dt_last_error(), needle);
        dt_test_failures++;
    }
    CHECK(p[0] == -7.0f && p[NP - 1] == -7.0f + (NP - 1) * 0.5f && m[3] == -5.5f);
}

/* Loading path as another model (hash 0x1234) with a's arrays and
 * architecture: DT_ERR_FORMAT and needle. */
static void expect_reject_arrays(const char *path, const dt_ckpt_arrays *a, const char *needle) {
    dt_ckpt_meta meta;
    CHECK(dt_checkpoint_load(path, 0x1234, &meta, a) == DT_ERR_FORMAT);
    if (!strstr(dt_last_error(), needle)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", dt_last_error(), needle);
        dt_test_failures++;
    }
}

/* A version 1 file (no loss figures: what dtrain wrote before them) still
 * loads, its figures unknown. Made from v2's bytes: version 1, the 24
 * trailer bytes dropped, the CRC recomputed. */
static void check_version1(const char *v2, const char *v1) {
    FILE *f = fopen(v2, "rb");
    static unsigned char buf[80 + (2 * NP + NS) * 4 + 24 + 4];
    CHECK(f && fread(buf, 1, sizeof buf, f) == sizeof buf);
    if (f) fclose(f);
    buf[8] = 1;
    size_t n = sizeof buf - 24 - 4;
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf, (uInt)n);
    memcpy(buf + n, &crc, 4);
    f = fopen(v1, "wb");
    CHECK(f && fwrite(buf, 1, n + 4, f) == n + 4);
    if (f) fclose(f);
    float p[NP], s[NS], m[NP];
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0, NULL, NULL, 0, 0, 0, NULL};
    dt_ckpt_meta got;
    CHECK_OK(dt_checkpoint_load(v1, 0xabcdef, &got, &a));
    CHECK(got.step == 1234 && got.loss == 0 && got.best_loss == 0 && got.best_accuracy == -1 && p[1] == 1.5f);
}

/* try_one of dt_ckptdir_newest: the file must load. */
static dt_status loads(const char *path, void *ctx) {
    (void)ctx;
    float p[NP], s[NS], m[NP];
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0, NULL, NULL, 0, 0, 0, NULL};
    dt_ckpt_meta got;
    return dt_checkpoint_load(path, 0xabcdef, &got, &a);
}

static int count_skipped;
static void skipped(const char *path, const char *why, void *ctx) {
    (void)path, (void)why, (void)ctx;
    count_skipped++;
}

static int exists_step(const char *d, long step) {
    char p[512];
    snprintf(p, sizeof p, "%s/step-%ld.ckpt", d, step);
    return access(p, F_OK) == 0;
}

/* A checkpoint directory: rotation keeps K, latest names the newest, the
 * newest complete one is found even when latest's target is damaged, and
 * a resumed run's abandoned future is removed. */
static void check_directory(const dt_ckpt_meta *meta, const dt_ckpt_arrays *a) {
    char d[300], path[512], link[64], chosen[512];
    snprintf(d, sizeof d, "%s/ckdir", dir);
    CHECK_OK(dt_ckptdir_prepare(d)); /* created */
    char none[512];
    CHECK(dt_ckptdir_newest(d, loads, skipped, NULL, none, sizeof none) == DT_ERR_IO);
    CHECK(strstr(dt_last_error(), "no checkpoint in it") != NULL);
    for (long step = 10; step <= 50; step += 10) {
        CHECK_OK(dt_ckptdir_step_path(path, sizeof path, d, step));
        CHECK_OK(dt_checkpoint_save(path, meta, a));
        CHECK_OK(dt_ckptdir_commit(d, step, 3));
    }
    CHECK(!exists_step(d, 10) && !exists_step(d, 20) && exists_step(d, 30) && exists_step(d, 40) && exists_step(d, 50));
    snprintf(path, sizeof path, "%s/latest", d);
    ssize_t len = readlink(path, link, sizeof link - 1);
    CHECK(len > 0);
    if (len > 0) link[len] = 0;
    CHECK(len > 0 && strcmp(link, "step-50.ckpt") == 0);
    CHECK_OK(dt_ckptdir_newest(d, loads, skipped, NULL, chosen, sizeof chosen));
    CHECK(strstr(chosen, "step-50.ckpt") != NULL && count_skipped == 0);
    /* latest's target damaged (a disk error): the next newest is taken. */
    CHECK_OK(dt_ckptdir_step_path(path, sizeof path, d, 50));
    flip_byte(path, 90);
    CHECK_OK(dt_ckptdir_newest(d, loads, skipped, NULL, chosen, sizeof chosen));
    CHECK(strstr(chosen, "step-40.ckpt") != NULL && count_skipped == 1);
    /* Resumed from 40, it writes 45: 50 (the abandoned future) goes. */
    CHECK_OK(dt_ckptdir_step_path(path, sizeof path, d, 45));
    CHECK_OK(dt_checkpoint_save(path, meta, a));
    CHECK_OK(dt_ckptdir_commit(d, 45, 2));
    CHECK(!exists_step(d, 50) && exists_step(d, 45) && exists_step(d, 40) && !exists_step(d, 30));
    /* Not a directory, or not writable. */
    CHECK(dt_ckptdir_prepare(path) == DT_ERR_USAGE);
    CHECK(strstr(dt_last_error(), "not a directory") != NULL);
    snprintf(path, sizeof path, "%s/no/such/parent", dir);
    CHECK(dt_ckptdir_prepare(path) == DT_ERR_IO);
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", d);
    CHECK(system(rm) == 0);
}

/* Another optimiser's state of the same size (adam's vs adamw's): a whole
 * file is a usage error naming both, leaving the arrays alone; a damaged
 * one is a format error (so a checkpoint directory skips it). */
static void check_other_optimizer(const char *other, const dt_ckpt_meta *meta, const dt_ckpt_arrays *a) {
    dt_ckpt_arrays adam = *a;
    adam.optimizer = 1;
    CHECK_OK(dt_checkpoint_save(other, meta, &adam));
    float p2[NP], s2[NS], m2[NP];
    memset(p2, 0, sizeof p2);
    dt_ckpt_arrays adamw = {p2, NP, s2, NS, m2, NP, 2, NULL, NULL, 0, 0, 0, NULL};
    dt_ckpt_meta got;
    CHECK(dt_checkpoint_load(other, 0xabcdef, &got, &adamw) == DT_ERR_USAGE);
    CHECK(strstr(dt_last_error(), "holds the state of optimizer adam, this run uses adamw") != NULL);
    CHECK(p2[0] == 0);
    flip_byte(other, 80 + 4 * 500);
    CHECK(dt_checkpoint_load(other, 0xabcdef, &got, &adamw) == DT_ERR_FORMAT);
    CHECK(dt_checkpoint_load(other, 0xabcdef, &got, &adam) == DT_ERR_FORMAT);
}

/* Where version 4's class-name section starts in a file of NP, NS, NP floats. */
#define NAMES_AT (80 + (2 * NP + NS) * 4 + 24)
/* Version 7's sections with no layers: the epoch (32), the architecture's head (16). */
#define V7_BYTES 48

/* buf (len bytes, the last 4 its CRC) to path with the CRC recomputed. */
static void write_with_crc(const char *path, unsigned char *buf, size_t len) {
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf, (uInt)(len - 4));
    memcpy(buf + len - 4, &crc, 4);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, len, f) == len);
    if (f) fclose(f);
}

/* Version 6 and 5 files (no epoch accounting and architecture; version 5
 * no samples per step either: what dtrain wrote before them) still load,
 * with evaluated_step -1 and step_samples 0 (unknown). Made from v7's
 * bytes (size): the version changed, the bytes before the CRC gone. */
static void check_version6(const char *v7, const char *older, long size) {
    static unsigned char buf[1 << 16];
    FILE *f = fopen(v7, "rb");
    CHECK(f && size <= (long)sizeof buf && fread(buf, 1, (size_t)size, f) == (size_t)size);
    if (f) fclose(f);
    const struct {
        unsigned char version;
        long drop;
        uint64_t step_samples;
    } older_ones[] = {{6, V7_BYTES, 512}, {5, V7_BYTES + 8, 0}};
    static unsigned char v[1 << 16];
    for (size_t i = 0; i < sizeof older_ones / sizeof *older_ones; i++) {
        long n = size - older_ones[i].drop;
        memcpy(v, buf, (size_t)n - 4);
        v[8] = older_ones[i].version;
        write_with_crc(older, v, (size_t)n);
        float p[NP], s[NS], m[NP];
        dt_ckpt_arrays b = {p, NP, s, NS, m, NP, 0, NULL, NULL, 0, 0, 0, NULL};
        dt_ckpt_meta got;
        CHECK_OK(dt_checkpoint_load(older, 0xabcdef, &got, &b));
        CHECK(got.step == 1234 && got.step_samples == older_ones[i].step_samples && got.best_accuracy == 0.875 &&
              got.evaluated_step == -1 && got.epoch_loss_count == 0 && p[NP - 1] == 1.0f + 0.5f * (NP - 1));
    }
    /* A version 7 file without them is short. */
    v[8] = 7;
    write_with_crc(older, v, (size_t)(size - V7_BYTES - 8));
    expect_reject(older, 0xabcdef, DT_ERR_FORMAT, "truncated");
}

/* A checkpoint records its net's layers: one of another model names the
 * first layer that differs (or the input, or the layer counts); before
 * version 7, or without them, the parameter counts. A file that is not a
 * checkpoint at all says so, whatever its length. */
static void check_architecture(const char *path, const char *other, const dt_ckpt_meta *meta) {
    float p[NP], s[NS], m[NP];
    fill(p, NP, 1), fill(s, NS, 2), fill(m, NP, 3);
    dt_ckpt_layer layers[2] = {{0, {1, 12, 12}, {6, 12, 12}, 0, 54, 6, 0}, {3, {864, 1, 1}, {10, 1, 1}, 0, 8640, 10, 0}};
    dt_ckpt_arch arch = {{1, 12, 12}, 2, layers};
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0, NULL, NULL, 0, 0, 0, &arch};
    CHECK_OK(dt_checkpoint_save(other, meta, &a));
    CHECK(file_size(other) == file_size(path) + 2 * 56);
    dt_ckpt_layer mine[3];
    memcpy(mine, layers, sizeof layers);
    mine[1].out[0] = 3, mine[1].nw = 2592, mine[1].nb = 3;
    dt_ckpt_arch model = {{1, 12, 12}, 2, mine};
    a.arch = &model;
    expect_reject_arrays(other, &a, "checkpoint is for a different model: layer 1 is connected 864x1x1 -> 10x1x1, "
                         "8640 weights + 10 biases in the checkpoint, connected 864x1x1 -> 3x1x1, 2592 weights + 3 "
                         "biases in this model");
    model.input[0] = 3;
    expect_reject_arrays(other, &a, "different model: its input is 1x12x12, this model's 3x12x12");
    model.input[0] = 1, model.nlayers = 1;
    expect_reject_arrays(other, &a, "different model: the checkpoint has 2 layers, this model 1");
    a.arch = NULL;
    expect_reject_arrays(other, &a, "different model: the same number of parameters (1000), but another");
    CHECK_OK(dt_checkpoint_load(other, 0xabcdef, &(dt_ckpt_meta){0}, &a)); /* the same model loads */
    FILE *f = fopen(other, "w");
    if (f) fputs("0.5\n", f), fclose(f);
    expect_reject(other, 0xabcdef, DT_ERR_FORMAT, "not a dtrain checkpoint (too short)");
    f = fopen(other, "w");
    if (f) fputs("[net]\nbatch=8\nchannels=1\nheight=12\nwidth=12\n[connected]\noutput=10\n[softmax]\n", f), fclose(f);
    expect_reject(other, 0xabcdef, DT_ERR_FORMAT, "not a dtrain checkpoint (bad magic)");
}

/* path's class-name section broken as described (CRC valid): refused with
 * needle, the arrays untouched and no names returned. */
static void reject_names(const char *path, const char *needle) {
    float p[NP], s[NS], m[NP];
    fill(p, NP, -7), fill(s, NS, -7), fill(m, NP, -7);
    dt_class_names got = {0, NULL};
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0, &got, NULL, 0, 0, 0, NULL};
    dt_ckpt_meta meta;
    CHECK(dt_checkpoint_load(path, 0xabcdef, &meta, &a) == DT_ERR_FORMAT);
    if (!strstr(dt_last_error(), needle)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", dt_last_error(), needle);
        dt_test_failures++;
    }
    CHECK(got.n == 0 && got.names == NULL && p[0] == -7.0f && m[3] == -5.5f);
}

/* Version 4's class names: a round trip; not returned when not asked for;
 * a version 3 file (no section) loads with none; a damaged section is
 * refused; the writer refuses names a reader would refuse. */
static void check_class_names(const char *path, const char *other, const dt_ckpt_meta *meta) {
    float p[NP], s[NS], m[NP];
    fill(p, NP, 1), fill(s, NS, 2), fill(m, NP, 3);
    char *names[] = {"cat", "dog", "zebra"};
    dt_class_names three = {3, names};
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0, &three, NULL, 0, 0, 0, NULL};
    CHECK_OK(dt_checkpoint_save(path, meta, &a));
    /* "cat\0dog\0zebra\0", an empty worker state, the epoch, no layers */
    enum { SIZE = NAMES_AT + 8 + 14 + 16 + 8 + V7_BYTES + 4 };
    CHECK(file_size(path) == SIZE);
    float p2[NP], s2[NS], m2[NP];
    dt_class_names got = {0, NULL};
    dt_ckpt_arrays b = {p2, NP, s2, NS, m2, NP, 0, &got, NULL, 0, 0, 0, NULL};
    dt_ckpt_meta gm;
    CHECK_OK(dt_checkpoint_load(path, 0xabcdef, &gm, &b));
    CHECK(got.n == 3 && strcmp(got.names[0], "cat") == 0 && strcmp(got.names[2], "zebra") == 0 && p2[7] == p[7]);
    dt_class_names_free(&got);
    b.classes = NULL;
    CHECK_OK(dt_checkpoint_load(path, 0xabcdef, &gm, &b));
    CHECK_OK(dt_checkpoint_verify(path, &gm));

    static unsigned char buf[SIZE];
    FILE *f = fopen(path, "rb");
    CHECK(f && fread(buf, 1, SIZE, f) == SIZE);
    if (f) fclose(f);
    /* Version 3: the same without the section. */
    static unsigned char v3[SIZE];
    memcpy(v3, buf, NAMES_AT);
    v3[8] = 3;
    write_with_crc(other, v3, NAMES_AT + 4);
    b.classes = &got;
    CHECK_OK(dt_checkpoint_load(other, 0xabcdef, &gm, &b));
    CHECK(got.n == 0 && gm.step == meta->step);
    /* Damaged sections, each with a valid CRC. */
    const struct {
        uint32_t count, bytes;
        const char *names, *needle;
    } bad[] = {{4, 14, "cat\0dog\0zebra", "class name 3 is cut short"},
               {2, 14, "cat\0dog\0zebra", "6 bytes after its 2 names"},
               {3, 14, "cat\0cat\0zebra", "names class 'cat' twice"},
               {3, 14, "cat\0\0og\0zebra", "class name 1 is empty"},
               {3, 14, "cat\0dog\0zebraX", "cut short"},
               {3, 31, "cat\0dog\0zebra", "class names of 31 bytes, the file holds 14"},
               {DT_DATA_MAX_CLASSES + 1, 14, "cat\0dog\0zebra", "classes (at most 100000)"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memcpy(v3, buf, SIZE);
        memcpy(v3 + NAMES_AT, &bad[i].count, 4);
        memcpy(v3 + NAMES_AT + 4, &bad[i].bytes, 4);
        memcpy(v3 + NAMES_AT + 8, bad[i].names, 14);
        write_with_crc(other, v3, SIZE);
        reject_names(other, bad[i].needle);
    }
    /* More bytes than any names section: refused by size before reading. */
    FILE *big = fopen(other, "wb");
    CHECK(big != NULL);
    for (long k = 0; big && k < NAMES_AT + 8 + DT_CKPT_MAX_NAME_BYTES + 1 + 4; k++) fputc(k < NAMES_AT ? buf[k] : 0, big);
    if (big) fclose(big);
    reject_names(other, "truncated or corrupt");
    /* The writer: names a reader would refuse leave the old file as it was. */
    char *twice[] = {"cat", "cat"};
    dt_class_names dup = {2, twice};
    a.classes = &dup;
    CHECK(dt_checkpoint_save(path, meta, &a) == DT_ERR_FORMAT);
    CHECK(file_size(path) == SIZE);
}

/* A folder of ImageNet's size: 1000 class names (past the 256 and 64 KiB
 * of checkpoints before labels were 32-bit: the layout is the same) make
 * the round trip in order; a name repeated far apart is still refused. */
static void check_many_class_names(const char *path, const dt_ckpt_meta *meta) {
    enum { K = 1000 };
    static char store[K][80];
    static char *names[K];
    for (int i = 0; i < K; i++) snprintf(store[i], sizeof store[i], "n%08d_a_long_wordnet_style_class_name", i), names[i] = store[i];
    float p[NP], s[NS], m[NP];
    fill(p, NP, 1), fill(s, NS, 2), fill(m, NP, 3);
    dt_class_names many = {K, names};
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0, &many, NULL, 0, 0, 0, NULL};
    CHECK_OK(dt_checkpoint_save(path, meta, &a));
    dt_class_names got = {0, NULL};
    dt_ckpt_arrays b = a;
    b.classes = &got;
    dt_ckpt_meta gm;
    CHECK_OK(dt_checkpoint_load(path, 0xabcdef, &gm, &b));
    CHECK(got.n == K && strcmp(got.names[0], names[0]) == 0 && strcmp(got.names[K - 1], names[K - 1]) == 0);
    dt_class_names_free(&got);
    names[900] = names[3];
    CHECK(dt_checkpoint_save(path, meta, &a) == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "twice") != NULL);
    names[900] = store[900];
}

/* Version 5's worker state: each worker gets its own part back, only when
 * the file holds as many parts of the size it asks for; damage is refused
 * without touching it; a version 4 file loads with none. */
static void load_worker(const char *path, int nworkers, int worker, float mine[5], dt_ckpt_meta *gm, dt_status want,
                        const char *needle) {
    float p[NP], s[NS], m[NP];
    dt_ckpt_arrays b = {p, NP, s, NS, m, NP, 0, NULL, NULL, 0, 0, 0, NULL};
    b.worker_state = mine, b.worker_floats = 5, b.nworkers = nworkers, b.worker = worker;
    CHECK(dt_checkpoint_load(path, 0xabcdef, gm, &b) == want);
    if (needle && !strstr(dt_last_error(), needle)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", dt_last_error(), needle);
        dt_test_failures++;
    }
}

static void check_worker_state(const char *path, const char *other, const dt_ckpt_meta *meta) {
    float p[NP], s[NS], m[NP], all[15], mine[5];
    fill(p, NP, 1), fill(s, NS, 2), fill(m, NP, 3), fill(all, 15, 100);
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0, NULL, NULL, 0, 0, 0, NULL};
    a.worker_state = all, a.worker_floats = 5, a.nworkers = 3;
    CHECK_OK(dt_checkpoint_save(path, meta, &a));
    enum { WORK_AT = NAMES_AT + 8, SIZE = WORK_AT + 16 + 15 * 4 + 8 + V7_BYTES + 4 };
    CHECK(file_size(path) == SIZE);
    dt_ckpt_meta gm;
    fill(mine, 5, -7);
    load_worker(path, 3, 1, mine, &gm, DT_OK, NULL);
    CHECK(memcmp(mine, all + 5, sizeof mine) == 0 && gm.file_nworkers == 3 && gm.file_worker_floats == 5);
    fill(mine, 5, -7);
    load_worker(path, 2, 1, mine, &gm, DT_OK, NULL); /* written by 3 workers: not this run's */
    CHECK(mine[0] == -7.0f && gm.file_nworkers == 3);
    static unsigned char buf[SIZE];
    FILE *f = fopen(path, "rb");
    CHECK(f && fread(buf, 1, SIZE, f) == SIZE);
    if (f) fclose(f);
    copy_file(path, other, -1);
    flip_byte(other, WORK_AT + 16 + 12 * 4); /* worker 2's part */
    load_worker(other, 3, 1, mine, &gm, DT_ERR_FORMAT, "checksum mismatch");
    CHECK(mine[0] == -7.0f);
    /* Heads that do not fit the file (CRC valid): refused. */
    static unsigned char bad[SIZE];
    const struct {
        uint32_t n, zero;
        uint64_t each;
        const char *needle;
    } heads[] = {{3, 0, 6, "worker state of 3 x 6 floats, the file holds 60 bytes"},
                 {0xffffffffu, 0, 0x4000000000000001ull, "truncated or corrupt"},
                 {3, 1, 5, "non-zero reserved word"},
                 {0xffffffffu, 0, 0, "worker state of 4294967295 x 0 floats"},
                 {0, 0, 5, "worker state of 0 x 5 floats"}};
    for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) {
        memcpy(bad, buf, SIZE);
        memcpy(bad + WORK_AT, &heads[i].n, 4);
        memcpy(bad + WORK_AT + 4, &heads[i].zero, 4);
        memcpy(bad + WORK_AT + 8, &heads[i].each, 8);
        write_with_crc(other, bad, SIZE);
        load_worker(other, 3, 1, mine, &gm, DT_ERR_FORMAT, heads[i].needle);
        CHECK(mine[0] == -7.0f);
    }
    /* Version 4: the same without the section. */
    memcpy(bad, buf, WORK_AT);
    bad[8] = 4;
    write_with_crc(other, bad, WORK_AT + 4);
    load_worker(other, 3, 1, mine, &gm, DT_OK, NULL);
    CHECK(mine[0] == -7.0f && gm.file_nworkers == 0 && gm.file_worker_floats == 0);
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    char path[256], other[256];
    snprintf(path, sizeof path, "%s/run.ckpt", dir);
    snprintf(other, sizeof other, "%s/bad.ckpt", dir);

    float p[NP], s[NS], m[NP];
    fill(p, NP, 1), fill(s, NS, 2), fill(m, NP, 3);
    dt_ckpt_meta meta = {0xabcdef, 42, 1234, 1300, 3, 17, 0.25, 0.125, 0.875, 0, 512, 0, 0, 40.5, 96, 0.75, 1234, 1234 * 512, 0};
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0, NULL, NULL, 0, 0, 0, NULL};
    CHECK_OK(dt_checkpoint_save(path, &meta, &a));
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0); /* renamed, nothing left behind */

    /* Round trip. */
    float p2[NP], s2[NS], m2[NP];
    dt_ckpt_arrays b = {p2, NP, s2, NS, m2, NP, 0, NULL, NULL, 0, 0, 0, NULL};
    dt_ckpt_meta got;
    CHECK_OK(dt_checkpoint_load(path, 0xabcdef, &got, &b));
    CHECK(memcmp(p, p2, sizeof p) == 0 && memcmp(s, s2, sizeof s) == 0 && memcmp(m, m2, sizeof m) == 0);
    CHECK(got.seed == 42 && got.step == 1234 && got.net_step == 1300 && got.epoch == 3 &&
          got.step_in_epoch == 17 && got.loss == 0.25 && got.best_loss == 0.125 && got.best_accuracy == 0.875 &&
          got.step_samples == 512 && got.epoch_loss_sum == 40.5 && got.epoch_loss_count == 96 &&
          got.last_epoch_loss == 0.75 && got.evaluated_step == 1234 && got.seen == 1234 * 512 && !got.darknet);
    /* Eval readers skip the momentum. */
    dt_ckpt_arrays c = {p2, NP, s2, NS, NULL, 0, 0, NULL, NULL, 0, 0, 0, NULL};
    CHECK_OK(dt_checkpoint_load(path, 0xabcdef, &got, &c));
    /* A checkpoint without optimiser state (the job API's model save): its
     * checksum covers the whole file all the same. */
    dt_ckpt_arrays bare = {p, NP, s, NS, NULL, 0, 0, NULL, NULL, 0, 0, 0, NULL};
    CHECK_OK(dt_checkpoint_save(other, &meta, &bare));
    memset(p2, 0, sizeof p2);
    CHECK_OK(dt_checkpoint_load(other, 0xabcdef, &got, &c));
    CHECK(memcmp(p, p2, sizeof p) == 0);
    flip_byte(other, 80 + 4 * 3);
    CHECK(dt_checkpoint_load(other, 0xabcdef, &got, &c) == DT_ERR_FORMAT && strstr(dt_last_error(), "checksum"));

    /* Damage of every kind. */
    long size = file_size(path);
    /* empty class-name and worker sections, no layers */
    CHECK(size == 80 + (2 * NP + NS) * 4 + 24 + 8 + 16 + 8 + V7_BYTES + 4);
    check_version1(path, other);
    check_version6(path, other, size);
    check_architecture(path, other, &meta);
    expect_reject(dir, 0xabcdef, DT_ERR_USAGE, "is a directory, not a checkpoint file");
    expect_reject(path, 0x1234, DT_ERR_FORMAT, "different model");
    copy_file(path, other, -1);
    flip_byte(other, 80 + 4 * 500); /* one parameter byte */
    expect_reject(other, 0xabcdef, DT_ERR_FORMAT, "checksum mismatch");
    copy_file(path, other, -1);
    flip_byte(other, 0);
    expect_reject(other, 0xabcdef, DT_ERR_FORMAT, "bad magic");
    copy_file(path, other, size - 10);
    expect_reject(other, 0xabcdef, DT_ERR_FORMAT, "truncated");
    copy_file(path, other, 40);
    expect_reject(other, 0xabcdef, DT_ERR_FORMAT, "truncated");
    copy_file(path, other, -1);
    flip_byte(other, 64 + 3); /* nparams -> huge: refused before allocating */
    expect_reject(other, 0xabcdef, DT_ERR_FORMAT, "parameters");
    expect_reject("/nonexistent/x.ckpt", 0xabcdef, DT_ERR_IO, "/nonexistent/x.ckpt");
    check_other_optimizer(other, &meta, &a);

    /* From a descriptor: the checkpoint starts at its offset (here after a
     * prefix) and messages use the given name. */
    FILE *pf = fopen(other, "wb"), *src = fopen(path, "rb");
    CHECK(pf && src);
    if (pf) fputs("prefix", pf);
    for (int ch; pf && src && (ch = fgetc(src)) != EOF;) fputc(ch, pf);
    if (src) fclose(src);
    if (pf) fclose(pf);
    int fd = open(other, O_RDONLY);
    CHECK(fd >= 0 && lseek(fd, 6, SEEK_SET) == 6);
    memset(p2, 0, sizeof p2);
    CHECK_OK(dt_checkpoint_load_fd(fd, "my.ckpt", 0xabcdef, &got, &b));
    CHECK(memcmp(p, p2, sizeof p) == 0 && got.step == 1234);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    CHECK(dt_checkpoint_load_fd(fd, "my.ckpt", 0xabcdef, &got, &b) == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "my.ckpt: not a dtrain checkpoint") != NULL);
    close(fd);

    /* A step the trainer's signed counters cannot hold (only a crafted file
     * has one: the CRC is valid). */
    dt_ckpt_meta far = meta;
    far.step = (uint64_t)INT64_MAX + 1;
    CHECK_OK(dt_checkpoint_save(other, &far, &a));
    expect_reject(other, 0xabcdef, DT_ERR_FORMAT, "step 9223372036854775808");

    /* A failed save leaves the previous checkpoint intact. */
    char bad_dir_path[300];
    snprintf(bad_dir_path, sizeof bad_dir_path, "%s/missing-dir/run.ckpt", dir);
    CHECK(dt_checkpoint_save(bad_dir_path, &meta, &a) == DT_ERR_IO);
    CHECK(strstr(dt_last_error(), "missing-dir") != NULL);
    /* A leftover half-written temp file (a crash mid-write) does not matter. */
    FILE *f = fopen(tmp, "wb");
    fputs("half written", f);
    fclose(f);
    CHECK_OK(dt_checkpoint_load(path, 0xabcdef, &got, &b));
    CHECK_OK(dt_checkpoint_save(path, &meta, &a));
    CHECK(access(tmp, F_OK) != 0);

    check_directory(&meta, &a);
    check_class_names(path, other, &meta);
    check_many_class_names(path, &meta);
    check_worker_state(path, other, &meta);

    unlink(path);
    unlink(other);
    rmdir(dir);
    return dt_test_finish("test_checkpoint");
}

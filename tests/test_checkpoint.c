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
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0};
    dt_ckpt_meta meta;
    dt_status st = dt_checkpoint_load(path, hash, &meta, &a);
    CHECK(st == want);
    if (!strstr(dt_last_error(), needle)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", dt_last_error(), needle);
        dt_test_failures++;
    }
    CHECK(p[0] == -7.0f && p[NP - 1] == -7.0f + (NP - 1) * 0.5f && m[3] == -5.5f);
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
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0};
    dt_ckpt_meta got;
    CHECK_OK(dt_checkpoint_load(v1, 0xabcdef, &got, &a));
    CHECK(got.step == 1234 && got.loss == 0 && got.best_loss == 0 && got.best_accuracy == -1 && p[1] == 1.5f);
}

/* try_one of dt_ckptdir_newest: the file must load. */
static dt_status loads(const char *path, void *ctx) {
    (void)ctx;
    float p[NP], s[NS], m[NP];
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0};
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
    dt_ckpt_arrays adamw = {p2, NP, s2, NS, m2, NP, 2};
    dt_ckpt_meta got;
    CHECK(dt_checkpoint_load(other, 0xabcdef, &got, &adamw) == DT_ERR_USAGE);
    CHECK(strstr(dt_last_error(), "holds the state of optimizer adam, this run uses adamw") != NULL);
    CHECK(p2[0] == 0);
    flip_byte(other, 80 + 4 * 500);
    CHECK(dt_checkpoint_load(other, 0xabcdef, &got, &adamw) == DT_ERR_FORMAT);
    CHECK(dt_checkpoint_load(other, 0xabcdef, &got, &adam) == DT_ERR_FORMAT);
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    char path[256], other[256];
    snprintf(path, sizeof path, "%s/run.ckpt", dir);
    snprintf(other, sizeof other, "%s/bad.ckpt", dir);

    float p[NP], s[NS], m[NP];
    fill(p, NP, 1), fill(s, NS, 2), fill(m, NP, 3);
    dt_ckpt_meta meta = {0xabcdef, 42, 1234, 1300, 3, 17, 0.25, 0.125, 0.875, 0};
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP, 0};
    CHECK_OK(dt_checkpoint_save(path, &meta, &a));
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0); /* renamed, nothing left behind */

    /* Round trip. */
    float p2[NP], s2[NS], m2[NP];
    dt_ckpt_arrays b = {p2, NP, s2, NS, m2, NP, 0};
    dt_ckpt_meta got;
    CHECK_OK(dt_checkpoint_load(path, 0xabcdef, &got, &b));
    CHECK(memcmp(p, p2, sizeof p) == 0 && memcmp(s, s2, sizeof s) == 0 && memcmp(m, m2, sizeof m) == 0);
    CHECK(got.seed == 42 && got.step == 1234 && got.net_step == 1300 && got.epoch == 3 &&
          got.step_in_epoch == 17 && got.loss == 0.25 && got.best_loss == 0.125 && got.best_accuracy == 0.875);
    /* Eval readers skip the momentum. */
    dt_ckpt_arrays c = {p2, NP, s2, NS, NULL, 0, 0};
    CHECK_OK(dt_checkpoint_load(path, 0xabcdef, &got, &c));

    /* Damage of every kind. */
    long size = file_size(path);
    CHECK(size == 80 + (2 * NP + NS) * 4 + 24 + 4);
    check_version1(path, other);
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

    unlink(path);
    unlink(other);
    rmdir(dir);
    return dt_test_finish("test_checkpoint");
}

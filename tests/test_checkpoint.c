/* Checkpoint files: round trip, and every kind of damage is refused without
 * touching the caller's arrays. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/checkpoint.h"
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
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP};
    dt_ckpt_meta meta;
    dt_status st = dt_checkpoint_load(path, hash, &meta, &a);
    CHECK(st == want);
    if (!strstr(dt_last_error(), needle)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", dt_last_error(), needle);
        dt_test_failures++;
    }
    CHECK(p[0] == -7.0f && p[NP - 1] == -7.0f + (NP - 1) * 0.5f && m[3] == -5.5f);
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    char path[256], other[256];
    snprintf(path, sizeof path, "%s/run.ckpt", dir);
    snprintf(other, sizeof other, "%s/bad.ckpt", dir);

    float p[NP], s[NS], m[NP];
    fill(p, NP, 1), fill(s, NS, 2), fill(m, NP, 3);
    dt_ckpt_meta meta = {0xabcdef, 42, 1234, 1300, 3, 17};
    dt_ckpt_arrays a = {p, NP, s, NS, m, NP};
    CHECK_OK(dt_checkpoint_save(path, &meta, &a));
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0); /* renamed, nothing left behind */

    /* Round trip. */
    float p2[NP], s2[NS], m2[NP];
    dt_ckpt_arrays b = {p2, NP, s2, NS, m2, NP};
    dt_ckpt_meta got;
    CHECK_OK(dt_checkpoint_load(path, 0xabcdef, &got, &b));
    CHECK(memcmp(p, p2, sizeof p) == 0 && memcmp(s, s2, sizeof s) == 0 && memcmp(m, m2, sizeof m) == 0);
    CHECK(got.seed == 42 && got.step == 1234 && got.net_step == 1300 && got.epoch == 3 &&
          got.step_in_epoch == 17);
    /* Eval readers skip the momentum. */
    dt_ckpt_arrays c = {p2, NP, s2, NS, NULL, 0};
    CHECK_OK(dt_checkpoint_load(path, 0xabcdef, &got, &c));

    /* Damage of every kind. */
    long size = file_size(path);
    CHECK(size == 80 + (2 * NP + NS) * 4 + 4);
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

    unlink(path);
    unlink(other);
    rmdir(dir);
    return dt_test_finish("test_checkpoint");
}

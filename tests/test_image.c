/* Image decoding and fitting (image.h) against the bytes tests/make_images.py
 * expects: every PNG colour type and bit depth exactly, JPEGs within 1 of
 * PIL's decode, resizing and centre crops exactly as PIL + torchvision; and
 * every kind of broken file refused with one line naming it; regions of
 * whole images (RandomResizedCrop's) decoded at libjpeg-turbo's reduced
 * scales as PIL's draft() decodes them, and resized as torchvision's
 * resized_crop (float tensor, bilinear, antialias=False) resizes them.
 * Skipped (77) when python3 with PIL and numpy is not there to write the
 * files; the regions' part when torch and torchvision are not. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/augment.h"
#include "dtrain/image.h"
#include "dtrain/mem.h"
#include "testutil.h"

static char dir[] = "/tmp/dt_image_XXXXXX";

static const char *in_dir(const char *sub, const char *name) {
    static char bufs[2][1200];
    static int next;
    char *p = bufs[next++ % 2];
    snprintf(p, sizeof bufs[0], "%s/%s/%s", dir, sub, name);
    return p;
}

/* Runs make_images.py MODE into dir/sub; 77 when it says PIL is missing,
 * 4 when torch or torchvision is. */
static int make(const char *mode, const char *sub) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s %s/%s", dt_test_src_path("tests/make_images.py"), mode, dir, sub);
    int rc = system(cmd);
    if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 3) return 77;
    if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 4) return 4;
    CHECK(rc == 0);
    return rc == 0 ? 0 : 1;
}

static size_t read_all(const char *path, uint8_t *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* Every case of cases.txt: dtrain's bytes against the expected ones. */
static void test_refs(void) {
    FILE *list = fopen(in_dir("refs", "cases.txt"), "r");
    CHECK(list != NULL);
    if (!list) return;
    char name[256], ref[300];
    int c, h, w, tol, cases = 0;
    static uint8_t got[3 * 64 * 64], want[3 * 64 * 64];
    while (fscanf(list, "%255s %d %d %d %299s %d", name, &c, &h, &w, ref, &tol) == 6) {
        size_t n = (size_t)c * h * w;
        cases++;
        memset(got, 0xaa, sizeof got);
        CHECK_OK(dt_image_load(got, (dt_shape){c, h, w}, 0, in_dir("refs", name)));
        CHECK(read_all(in_dir("refs", ref), want, sizeof want) == n);
        int worst = 0;
        for (size_t i = 0; i < n; i++) {
            int d = abs((int)got[i] - (int)want[i]);
            if (d > worst) worst = d;
        }
        if (worst > tol) {
            fprintf(stderr, "%s as %dx%dx%d: off by up to %d (tolerance %d)\n", name, c, h, w, worst, tol);
            dt_test_failures++;
        }
        CHECK(got[n] == 0xaa); /* nothing written past the sample */
    }
    fclose(list);
    CHECK(cases >= 60);
}

static dt_rect fixed_region(void *ctx, int h, int w) {
    const dt_rect *r = ctx;
    CHECK(r->y + r->h <= h && r->x + r->w <= w);
    return *r;
}

/* Each case of crops.txt: the region decoded (scale and rounding as
 * make_images.py's crops() says) and its resize against torchvision's
 * floats, to 2.5e-7: the arithmetic is PyTorch's, operation for operation
 * (its weights checked one by one), and the results differ by at most one
 * float ulp (1.2e-7 below 1; seen on Zen 4), where one build fuses a
 * product and a sum into an FMA and the other does not. The reduced-scale
 * cases decode as PIL's draft() does, to the byte. */
static void test_crops(void) {
    FILE *list = fopen(in_dir("crops", "crops.txt"), "r");
    CHECK(list != NULL);
    if (!list) return;
    char name[256], ref[300];
    int c, cases = 0;
    dt_rect want, got, region;
    int oh, ow;
    while (fscanf(list, "%255s %d %d %d %d %d %d %d %d %d %d %d %299s", name, &c, &region.y, &region.x, &region.h,
                  &region.w, &oh, &ow, &want.y, &want.x, &want.h, &want.w, ref) == 13) {
        cases++;
        dt_image img;
        CHECK_OK(dt_image_load_region(&img, &got, in_dir("crops", name), c, oh, ow, fixed_region, &region));
        CHECK(got.y == want.y && got.x == want.x && got.h == want.h && got.w == want.w);
        const dt_shape os = {c, oh, ow};
        const size_t n = dt_shape_size(os), px = (size_t)img.c;
        float *out, *ws, *exp;
        CHECK_OK(dt_alloc_floats(&out, n, "test"));
        CHECK_OK(dt_alloc_floats(&exp, n + 1, "test"));
        CHECK_OK(dt_alloc_floats(&ws, dt_augment_resize_floats(os), "test"));
        dt_augment_resize_region(out, os, img.px, (size_t)img.w * px, px, px == 1 ? 0 : 1, got, ws);
        FILE *f = fopen(in_dir("crops", ref), "rb");
        size_t nread = f ? fread(exp, sizeof(float), n + 1, f) : 0;
        if (nread != n) fprintf(stderr, "%s: %zu floats, not %zu\n", ref, nread, n);
        CHECK(nread == n);
        if (f) fclose(f);
        double worst = 0;
        for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)out[i] - exp[i]));
        if (worst > 2.5e-7) {
            fprintf(stderr, "%s region %dx%d at (%d, %d) to %dx%dx%d: off by up to %g\n", name, region.h, region.w,
                    region.y, region.x, c, oh, ow, worst);
            dt_test_failures++;
        }
        dt_free(out);
        dt_free(exp);
        dt_free(ws);
        dt_image_free(&img);
    }
    fclose(list);
    CHECK(cases == 7);
}

/* Each case of sides.txt: dt_image_load with a side (eval_resize=) against
 * torchvision's Resize(side) + CenterCrop on PIL images, to the byte (JPEGs
 * within 1, as test_refs; those at least twice the resized size decoded at
 * 1/2, 1/4 or 1/8 as PIL's draft() decodes them); a side too short for the
 * crop is refused. */
static void test_sides(void) {
    FILE *list = fopen(in_dir("crops", "sides.txt"), "r");
    CHECK(list != NULL);
    if (!list) return;
    char name[256], ref[300];
    int c, h, w, side, cases = 0;
    static uint8_t got[3 * 128 * 128], want[3 * 128 * 128];
    while (fscanf(list, "%255s %d %d %d %d %299s", name, &c, &h, &w, &side, ref) == 6) {
        size_t n = (size_t)c * h * w;
        cases++;
        CHECK(n <= sizeof got);
        if (n > sizeof got) break;
        CHECK_OK(dt_image_load(got, (dt_shape){c, h, w}, side, in_dir("crops", name)));
        CHECK(read_all(in_dir("crops", ref), want, sizeof want) == n);
        int worst = 0;
        for (size_t i = 0; i < n; i++) worst = abs((int)got[i] - (int)want[i]) > worst ? abs((int)got[i] - want[i]) : worst;
        if (worst > (strstr(name, ".jpg") ? 1 : 0)) {
            fprintf(stderr, "%s at side %d to %dx%dx%d: off by up to %d\n", name, side, c, h, w, worst);
            dt_test_failures++;
        }
    }
    fclose(list);
    CHECK(cases == 6);
    CHECK(dt_image_load(got, (dt_shape){3, 40, 40}, 30, in_dir("crops", "photo.png")) == DT_ERR_USAGE);
}

/* file (in dir/bad) must fail with status want and one line naming it and
 * containing needle. */
static void expect_bad(const char *file, dt_status want, const char *needle) {
    uint8_t out[3 * 8 * 8];
    const char *path = in_dir("bad", file);
    dt_status s = dt_image_load(out, (dt_shape){3, 8, 8}, 0, path);
    const char *msg = dt_last_error();
    if (s != want || !strstr(msg, path) || !strstr(msg, needle) || strchr(msg, '\n')) {
        fprintf(stderr, "%s: status %d (want %d), message '%s' (want '%s')\n", file, s, want, msg, needle);
        dt_test_failures++;
    }
}

static void test_bad_files(void) {
    uint8_t out[3 * 8 * 8];
    CHECK_OK(dt_image_load(out, (dt_shape){3, 8, 8}, 0, in_dir("bad", "good.png")));
    CHECK_OK(dt_image_load(out, (dt_shape){1, 8, 8}, 0, in_dir("bad", "good.jpg")));
    expect_bad("empty.png", DT_ERR_FORMAT, "empty file");
    expect_bad("truncated.png", DT_ERR_FORMAT, "corrupt PNG");
    expect_bad("truncated.jpg", DT_ERR_FORMAT, "corrupt JPEG");
    expect_bad("bad_crc.png", DT_ERR_FORMAT, "corrupt PNG");
    expect_bad("garbage.jpg", DT_ERR_FORMAT, "not a PNG or JPEG");
    expect_bad("text.png", DT_ERR_FORMAT, "not a PNG or JPEG");
    expect_bad("huge.png", DT_ERR_FORMAT, "30000 x 30000");
    expect_bad("bomb.png", DT_ERR_FORMAT, "more than its");
    expect_bad("cmyk.jpg", DT_ERR_FORMAT, "CMYK");
    expect_bad("missing.png", DT_ERR_IO, "cannot open");
    uint8_t small[8];
    CHECK(dt_image_load(small, (dt_shape){2, 2, 2}, 0, in_dir("bad", "good.png")) == DT_ERR_USAGE);
}

/* From memory: no file name needed, nothing leaks on any path (ASan). */
static void test_memory(void) {
    dt_image img;
    const uint8_t jpeg_start[] = {0xff, 0xd8, 0xff, 0xe0, 0, 16};
    CHECK(dt_image_decode(&img, jpeg_start, sizeof jpeg_start, "x.jpg") == DT_ERR_FORMAT);
    CHECK(img.px == NULL && img.w == 0);
    CHECK(strncmp(dt_last_error(), "x.jpg: corrupt ", 15) == 0);
    const uint8_t png_start[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0};
    CHECK(dt_image_decode(&img, png_start, sizeof png_start, "y.png") == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "y.png: corrupt PNG") != NULL);
    dt_image_free(&img);
    /* A 1 x 1 gray image fitted to 3 x 4 x 2: the pixel everywhere. */
    uint8_t px = 77, out[24];
    dt_image one = {1, 1, 1, &px};
    CHECK_OK(dt_image_fit(out, (dt_shape){3, 4, 2}, 0, &one));
    int all = 1;
    for (int i = 0; i < 24; i++) all &= out[i] == 77;
    CHECK(all);
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    int rc = make("refs", "refs");
    if (rc == 0) rc = make("bad", "bad");
    if (rc == 77) {
        printf("test_image: skipped (python3 with PIL and numpy is needed to write the images)\n");
        return 77;
    }
    test_refs();
    if (make("crops", "crops") == 4)
        printf("test_image: regions not checked (torch and torchvision are needed for their references)\n");
    else
        test_crops(), test_sides();
    test_bad_files();
    test_memory();
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return dt_test_finish("test_image");
}

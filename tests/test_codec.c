/* Gradient compression's arithmetic (src/plan/codec.h), without MPI:
 * bf16 and fp16 against their definitions on every 16-bit word (each word
 * decodes and encodes back to itself; a value halfway between two
 * neighbours rounds to the even one, just above it to the upper); top-k's
 * selection against a sort, and its error feedback: nothing is lost, what
 * is not sent is carried and sent once it is large enough. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/codec.h"
#include "testutil.h"

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static int is_nan_word(dt_gc_kind k, uint16_t h) {
    return k == DT_GC_BF16 ? (h & 0x7f80) == 0x7f80 && (h & 0x7f) : (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

/* Every word of the kind: round trip, and rounding of the midpoints to the
 * next word up (in magnitude, same sign). */
static void test_half_words(dt_gc_kind k) {
    int bad_trip = 0, bad_mid = 0, bad_above = 0;
    for (uint32_t w = 0; w < 65536; w++) {
        uint16_t h = (uint16_t)w, up = (uint16_t)(w + 1);
        if (is_nan_word(k, h)) {
            bad_trip += !isnan(dt_half_to_float(k, h)) || !is_nan_word(k, dt_half_from_float(k, dt_half_to_float(k, h)));
            continue;
        }
        float f = dt_half_to_float(k, h);
        bad_trip += dt_half_from_float(k, f) != h && !(f == 0 && (h & 0x7fff) == 0);
        if ((h & 0x7fff) >= (k == DT_GC_BF16 ? 0x7f80 : 0x7c00) - 1) continue; /* up is infinity or past it */
        double a = dt_half_to_float(k, h), b = dt_half_to_float(k, up), mid = (a + b) / 2;
        uint16_t even = (h & 1) ? up : h;
        bad_mid += dt_half_from_float(k, (float)mid) != even;
        float above = nextafterf((float)mid, (float)b); /* any float past the midpoint */
        bad_above += dt_half_from_float(k, above) != up;
    }
    CHECK(bad_trip == 0 && bad_mid == 0 && bad_above == 0);
}

static void test_half_values(void) {
    CHECK(dt_half_from_float(DT_GC_BF16, 1.0f) == 0x3f80);
    CHECK(dt_half_from_float(DT_GC_FP16, 1.0f) == 0x3c00);
    CHECK(dt_half_from_float(DT_GC_FP16, 65504.0f) == 0x7bff);  /* the largest */
    CHECK(dt_half_from_float(DT_GC_FP16, 65519.0f) == 0x7bff);  /* below the midpoint */
    CHECK(dt_half_from_float(DT_GC_FP16, 65520.0f) == 0x7c00);  /* the midpoint, ties to even: infinity */
    CHECK(dt_half_from_float(DT_GC_FP16, -1e9f) == 0xfc00);
    CHECK(dt_half_from_float(DT_GC_FP16, 0x1p-24f) == 0x0001); /* the smallest subnormal */
    CHECK(dt_half_from_float(DT_GC_FP16, 0x1p-25f) == 0x0000); /* half of it: ties to even, zero */
    CHECK(dt_half_from_float(DT_GC_FP16, 0x1.8p-25f) == 0x0001);
    CHECK(dt_half_from_float(DT_GC_FP16, 0x1.ff8p-15f) == 0x03ff); /* the largest subnormal */
    CHECK(dt_half_from_float(DT_GC_FP16, 0x1.ffcp-15f) == 0x0400); /* a tie: carries into the smallest normal */
    CHECK(dt_half_from_float(DT_GC_BF16, 3e38f) == 0x7f62);
    CHECK(dt_half_from_float(DT_GC_BF16, 3.4028235e38f) == 0x7f80); /* rounds to infinity */
    /* The buffer forms agree with the scalar ones; add accumulates in fp32. */
    float x[5] = {0.1f, -2.5f, 3e-6f, 1234.5f, 0}, y[5], acc[5] = {1, 1, 1, 1, 1};
    uint16_t h[5];
    for (int k = DT_GC_BF16; k <= DT_GC_FP16; k++) {
        dt_half_encode(k, x, h, 5);
        dt_half_decode(k, h, y, 5);
        for (int i = 0; i < 5; i++) CHECK(h[i] == dt_half_from_float(k, x[i]) && y[i] == dt_half_to_float(k, h[i]));
        dt_half_add(k, h, acc, 5);
        memcpy(y, x, sizeof x);
        dt_half_round(k, y, 5);
        for (int i = 0; i < 5; i++) CHECK(y[i] == dt_half_to_float(k, h[i]));
    }
    for (int i = 0; i < 5; i++)
        CHECK(acc[i] == 1.0f + dt_half_to_float(DT_GC_BF16, dt_half_from_float(DT_GC_BF16, x[i])) +
                            dt_half_to_float(DT_GC_FP16, dt_half_from_float(DT_GC_FP16, x[i])));
}

/* The k largest |g| by a sort of the indices (ties: lower index first). */
static const float *sort_base;
static int by_magnitude(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    float x = fabsf(sort_base[i]), y = fabsf(sort_base[j]);
    return x > y ? -1 : x < y ? 1 : i - j;
}

static void test_topk_selection(void) {
    enum { N = 5000 };
    static float g[N], ref[N], residual[N];
    static uint32_t pairs[2 * N];
    static int order[N];
    unsigned seed = 7;
    for (int trial = 0; trial < 6; trial++) {
        for (int i = 0; i < N; i++) { /* many ties: values on a coarse grid, some zero, both signs */
            seed = seed * 1103515245u + 12345u;
            g[i] = (float)((int)(seed >> 16) % 41 - 20) * (trial % 2 ? 0.25f : 1e-30f);
            ref[i] = g[i];
            order[i] = i;
            residual[i] = 0;
        }
        size_t k = (size_t[]){1, 7, 50, 999, 4999, 5000}[trial];
        sort_base = ref;
        qsort(order, N, sizeof *order, by_magnitude);
        static unsigned char chosen[N];
        memset(chosen, 0, sizeof chosen);
        for (size_t j = 0; j < k; j++) chosen[order[j]] = 1;
        dt_topk_encode(g, residual, N, k, pairs);
        int bad = 0;
        size_t j = 0;
        for (int i = 0; i < N; i++) { /* pairs in index order, exactly the chosen; the rest kept */
            if (chosen[i]) {
                bad += j >= k || pairs[2 * j] != (uint32_t)i || pairs[2 * j + 1] != bits(ref[i]) || residual[i] != 0;
                j++;
            } else {
                bad += residual[i] != ref[i];
            }
        }
        CHECK(bad == 0 && j == k);
        for (int i = 0; i < N; i++) bad += g[i] != 0.0f; /* left zeroed for the gathered pairs */
        CHECK(bad == 0);
        dt_topk_add(pairs, k, 1.0f, g);
        for (int i = 0; i < N; i++) bad += g[i] + residual[i] != ref[i]; /* sent + kept = all */
        CHECK(bad == 0);
        memset(g, 0, sizeof g);
        dt_topk_add(pairs, k, 0.5f, g); /* scaled pair by pair */
        for (int i = 0; i < N; i++) bad += g[i] != (chosen[i] ? ref[i] * 0.5f : 0.0f);
        CHECK(bad == 0);
    }
}

/* Error feedback over steps: a small gradient that never makes the top k
 * on its own is carried until its sum does, then sent whole. */
static void test_topk_feedback(void) {
    float residual[4] = {0}, g[4];
    uint32_t pairs[2];
    float sent_small = 0;
    for (int step = 0; step < 4; step++) {
        float fresh[4] = {1.0f, 0.3f, 0.0f, -0.2f};
        memcpy(g, fresh, sizeof g);
        dt_topk_encode(g, residual, 4, 1, pairs);
        float x[4] = {0};
        dt_topk_add(pairs, 1, 1.0f, x);
        sent_small += x[1];
        if (step == 0) CHECK(pairs[0] == 0 && x[0] == 1.0f && residual[1] == 0.3f && residual[3] == -0.2f);
    }
    /* Step 3: index 1 has gathered 4 x 0.3 = 1.2 > 1 and goes; index 3
     * (-0.8) waits. */
    CHECK_CLOSE(sent_small, 1.2, 1e-6, 0);
    CHECK(residual[1] == 0);
    CHECK_CLOSE(residual[3], -0.8, 1e-6, 0);
}

static void test_names_and_bytes(void) {
    dt_grad_codec c;
    char name[32];
    CHECK_OK(dt_grad_codec_parse("topk:1%", &c));
    CHECK(c.kind == DT_GC_TOPK && fabs(c.ratio - 0.01) < 1e-12);
    CHECK(strcmp(dt_grad_codec_name(&c, name, sizeof name), "topk:0.01") == 0);
    CHECK_OK(dt_grad_codec_parse("fp16", &c));
    CHECK(c.kind == DT_GC_FP16);
    CHECK(dt_grad_codec_parse("topk:0", &c) == DT_ERR_USAGE);
    CHECK(dt_grad_codec_parse("topk:1.5", &c) == DT_ERR_USAGE);
    CHECK(dt_grad_codec_parse("topk:0.1x", &c) == DT_ERR_USAGE);
    CHECK(dt_grad_codec_parse("bf16 ", &c) == DT_ERR_USAGE);
    CHECK(dt_topk_count(0.01, 7334) == 74 && dt_topk_count(1e-9, 10) == 1 && dt_topk_count(1, 10) == 10);
    /* Ring: 2 (P-1)/P n words each way; top-k: (P-1) k pairs of 8 bytes. */
    dt_grad_codec none = {DT_GC_NONE, 0}, bf16 = {DT_GC_BF16, 0}, topk = {DT_GC_TOPK, 0.01};
    CHECK_CLOSE(dt_allreduce_bytes_each_way(&none, 1000, 4), 6000, 0, 0);
    CHECK_CLOSE(dt_allreduce_bytes_each_way(NULL, 1000, 4), 6000, 0, 0);
    CHECK_CLOSE(dt_allreduce_bytes_each_way(&bf16, 1000, 4), 3000, 0, 0);
    CHECK_CLOSE(dt_allreduce_bytes_each_way(&topk, 1000, 4), 240, 0, 0);
    CHECK_CLOSE(dt_allreduce_bytes_each_way(&topk, 1000, 1), 0, 0, 0);
}

int main(void) {
    test_half_words(DT_GC_BF16);
    test_half_words(DT_GC_FP16);
    test_half_values();
    test_topk_selection();
    test_topk_feedback();
    test_names_and_bytes();
    return dt_test_finish("test_codec");
}

/* Darknet weights files (darknet_weights.h) on a synthetic net with every
 * section kind they hold: a batch-normalised convolution, a [batchnorm], a
 * convolution with its bias, a batch-normalised and a plain connected
 * layer. Saved arrays are where Darknet's order puts them; a load into
 * another net gives bit-identical parameters and state; the transposed
 * connected weights of files with minor > 1000 (and their 4-byte seen)
 * load; short, long and unsavable cases fail with one message and change
 * nothing; only files with Darknet's header are recognised. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/checkpoint.h"
#include "dtrain/darknet_weights.h"
#include "dtrain/net.h"
#include "testutil.h"

static const char cfg[] =
    "[net]\nbatch=2\nheight=6\nwidth=6\nchannels=2\n"                                  /* lines 1-5 */
    "\n[convolutional]\nbatch_normalize=1\nfilters=3\nsize=3\npad=1\nactivation=leaky\n" /* line 7 */
    "\n[batchnorm]\n"                                                                   /* line 14 */
    "\n[convolutional]\nfilters=2\nsize=1\nactivation=linear\n"                         /* line 16 */
    "\n[connected]\noutput=4\nbatch_normalize=1\nactivation=leaky\n"                    /* line 21 */
    "\n[connected]\noutput=3\nactivation=linear\n"                                      /* line 26 */
    "\n[softmax]\n";

/* Layers: 0 conv, 1 bn, 2 act | 3 bn | 4 conv | 5 dense, 6 bn, 7 act | 8 dense | 9 softmax.
 * File floats: conv 3+3+3+3+54, batchnorm 3+3+3, conv 2+6, connected 4+288+12, connected 3+12. */
enum { FLOATS = 66 + 9 + 8 + 304 + 15 };

static dt_net *make_net(uint64_t seed) {
    dt_model_spec m;
    dt_net *net = NULL;
    if (!CHECK_OK(dt_model_parse_string(&m, cfg, "io.cfg")) || !CHECK_OK(dt_net_create(&net, &m, 2, seed)))
        return NULL;
    return net;
}

/* Distinct values everywhere (variances positive); the [batchnorm]'s shift 0. */
static void fill(dt_net *net, float base) {
    for (size_t i = 0; i < net->nparams; i++) net->params[i] = base + 0.001f * (float)i;
    for (size_t i = 0; i < net->nstate; i++) net->state[i] = base + 1 + 0.01f * (float)i;
    memset(net->layers[3].b, 0, net->layers[3].nb * sizeof(float));
}

static float *read_file(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    float *buf = NULL;
    *n = -1;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (*n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)*n)) && fread(buf, 1, (size_t)*n, f) != (size_t)*n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

static void write_file(const char *path, const void *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, n, f) == n);
    if (f) CHECK(fclose(f) == 0);
}

static int same_net(const dt_net *a, const dt_net *b) {
    return memcmp(a->params, b->params, a->nparams * sizeof(float)) == 0 &&
           memcmp(a->state, b->state, a->nstate * sizeof(float)) == 0;
}

/* The file's next array is the net's count floats at ptr. */
static void next(const float **at, const float *ptr, size_t count) {
    CHECK(memcmp(*at, ptr, count * sizeof(float)) == 0);
    *at += count;
}

/* The file's arrays in Darknet's order, each compared with the net's. */
static void check_order(const float *f, const dt_net *n) {
    const dt_layer *L = n->layers;
    const float *at = f + 5; /* after the 20-byte header */
    next(&at, L[1].b, 3), next(&at, L[1].w, 3), next(&at, L[1].state, 3), next(&at, L[1].state + 3, 3);
    next(&at, L[0].w, 54);
    next(&at, L[3].w, 3), next(&at, L[3].state, 3), next(&at, L[3].state + 3, 3);
    next(&at, L[4].b, 2), next(&at, L[4].w, 6);
    next(&at, L[6].b, 4), next(&at, L[5].w, 288), next(&at, L[6].w, 4), next(&at, L[6].state, 4);
    next(&at, L[6].state + 4, 4);
    next(&at, L[8].b, 3), next(&at, L[8].w, 12);
    CHECK(at == f + 5 + FLOATS);
}

int main(void) {
    char dir[] = "/tmp/dt_dkw_XXXXXX", path[64], other[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/a.weights", dir);
    snprintf(other, sizeof other, "%s/b.weights", dir);
    dt_net *a = make_net(1), *b = make_net(2);
    if (!a || !b) return dt_test_finish("test_darknet_weights_io");
    CHECK(a->nlayers == 10 && a->layers[3].spec.kind == DT_LAYER_BATCHNORM && a->layers[4].nb == 2);
    fill(a, 0.5f);

    /* Saved: header 0, 2, 0, seen (u64), then the arrays in Darknet's order. */
    CHECK_OK(dt_darknet_weights_save(path, a, 12345));
    long n;
    float *f = read_file(path, &n);
    CHECK(f && n == 20 + 4 * FLOATS);
    if (f && n == 20 + 4 * FLOATS) {
        int32_t h[3];
        uint64_t seen;
        memcpy(h, f, sizeof h);
        memcpy(&seen, (char *)f + 12, sizeof seen);
        CHECK(h[0] == 0 && h[1] == 2 && h[2] == 0 && seen == 12345);
        check_order(f, a);
    }
    CHECK(dt_darknet_weights_is(path));

    /* Loaded into another net: the same bits. */
    uint64_t seen = 0;
    CHECK(!same_net(a, b));
    CHECK_OK(dt_darknet_weights_load(path, b, &seen));
    CHECK(seen == 12345 && same_net(a, b));

    /* Minor > 1000: seen is 4 bytes and connected weights are (inputs, outputs). */
    if (f && n == 20 + 4 * FLOATS) {
        float *t = malloc(16 + 4 * FLOATS);
        int32_t h[4] = {0, 1001, 0, 77};
        memcpy(t, h, sizeof h);
        memcpy(t + 4, f + 5, 4 * FLOATS);
        float *w5 = t + 4 + 66 + 9 + 8 + 4, *w8 = t + 4 + 66 + 9 + 8 + 304 + 3;
        for (int o = 0; o < 4; o++)
            for (int i = 0; i < 72; i++) w5[i * 4 + o] = a->layers[5].w[o * 72 + i];
        for (int o = 0; o < 3; o++)
            for (int i = 0; i < 4; i++) w8[i * 3 + o] = a->layers[8].w[o * 4 + i];
        write_file(other, t, 16 + 4 * FLOATS);
        free(t);
        fill(b, 2.0f);
        CHECK_OK(dt_darknet_weights_load(other, b, &seen));
        CHECK(seen == 77 && same_net(a, b));
    }

    /* Short and long files: one message naming the section or the excess; b unchanged. */
    if (f && n == 20 + 4 * FLOATS) {
        fill(b, 3.0f);
        dt_net *keep = make_net(3);
        if (keep) fill(keep, 3.0f);
        write_file(other, f, (size_t)n - 4);
        CHECK(dt_darknet_weights_load(other, b, &seen) == DT_ERR_FORMAT);
        CHECK(strstr(dt_last_error(), "b.weights: Darknet weights end inside the [connected] section of line 26 "
                                      "(dtrain layer 8)") != NULL);
        write_file(other, f, 20 + 4 * 60);
        CHECK(dt_darknet_weights_load(other, b, &seen) == DT_ERR_FORMAT);
        CHECK(strstr(dt_last_error(), "[convolutional] section of line 7 (dtrain layer 0)") != NULL);
        float *longer = calloc(1, (size_t)n + 8);
        if (longer) {
            memcpy(longer, f, (size_t)n);
            write_file(other, longer, (size_t)n + 8);
            free(longer);
        }
        CHECK(dt_darknet_weights_load(other, b, &seen) == DT_ERR_FORMAT);
        CHECK(strstr(dt_last_error(), "b.weights: 8 bytes left after the last section's arrays") != NULL);
        write_file(other, f, 12);
        CHECK(dt_darknet_weights_load(other, b, &seen) == DT_ERR_FORMAT);
        CHECK(strstr(dt_last_error(), "12 bytes, shorter than a Darknet weights header (16)") != NULL);
        write_file(other, f, 18); /* version 0.2: seen takes 8 bytes */
        CHECK(dt_darknet_weights_load(other, b, &seen) == DT_ERR_FORMAT);
        CHECK(strstr(dt_last_error(), "18 bytes, shorter than its Darknet 0.2 header (20)") != NULL);
        CHECK(!strchr(dt_last_error(), '\n'));
        if (keep) CHECK(same_net(b, keep));
        dt_net_free(keep);
    }

    /* A [batchnorm] shift Darknet cannot store: refused, nothing written. */
    a->layers[3].b[1] = 0.25f;
    unlink(other);
    CHECK(dt_darknet_weights_save(other, a, 0) == DT_ERR_CONFIG);
    CHECK(strstr(dt_last_error(), "the [batchnorm] section of line 14 (dtrain layer 3) has a learned shift") != NULL);
    CHECK(access(other, F_OK) != 0);

    /* Recognised by content: not a checkpoint, not text, not a short file. */
    dt_ckpt_arrays arr = {a->params, a->nparams, a->state, a->nstate, NULL, 0, 0, NULL, NULL, 0, 0, 0, NULL};
    dt_ckpt_meta meta = {0};
    meta.shape_hash = a->shape_hash;
    CHECK_OK(dt_checkpoint_save(other, &meta, &arr));
    CHECK(!dt_darknet_weights_is(other));
    dt_test_write_text(other, "[net]\nbatch=1\n");
    CHECK(!dt_darknet_weights_is(other));
    write_file(other, "\0\0\0\0\2\0\0\0", 8);
    CHECK(!dt_darknet_weights_is(other));
    CHECK(!dt_darknet_weights_is("/nonexistent/x.weights"));

    free(f);
    unlink(path);
    unlink(other);
    rmdir(dir);
    dt_net_free(a);
    dt_net_free(b);
    return dt_test_finish("test_darknet_weights_io");
}

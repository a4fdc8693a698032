/* Simulator profiles: a profile file written and read back, every older
 * version still read, each malformed field refused with its name (and the
 * line of a syntax error); and the measurement: the per-layer timing entry
 * point computes the gradients of a plain step, a profile measured alone
 * and beside companion workers (threads) has the model's layers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/mem.h"
#include "dtrain/net.h"
#include "dtrain/sim.h"
#include "testutil.h"

/* A convolution, a fully connected layer and the loss, with values that
 * survive a write and read only if every field is carried. Heap-allocated
 * (DT_MAX_LAYERS layers); the caller frees it. */
static dt_profile *three_layers(void) {
    dt_profile *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->batch = 64, p->threads = 1, p->reps = 1, p->nlayers = 3;
    static const struct { const char *kind; double fwd, bwd; size_t params; int fc_out, fc_in; } layers[] = {
        {"convolutional", 0.011, 0.022, 51264, 0, 0},
        {"connected", 0.007, 0.009, 3212288, 1024, 3136},
        {"softmax", 0.000004, 0.000007, 0, 0, 0},
    };
    for (int i = 0; i < 3; i++) {
        dt_sim_layer *l = &p->layers[i];
        snprintf(l->kind, sizeof l->kind, "%s", layers[i].kind);
        l->fwd_s = layers[i].fwd, l->bwd_s = layers[i].bwd, l->params = layers[i].params;
        l->fc_out = layers[i].fc_out, l->fc_in = layers[i].fc_in;
    }
    p->update_s = 0.0012, p->sum_s = 0.0006, p->gemm_gflops = 60;
    return p;
}

/* Reading `text` as a profile fails with DT_ERR_FORMAT mentioning `what`. */
static void bad_profile(const char *path, const char *text, const char *what) {
    dt_profile *q = malloc(sizeof *q);
    dt_test_write_text(path, text);
    dt_status s = dt_profile_read(q, path);
    if (s != DT_ERR_FORMAT || !strstr(dt_last_error(), what)) {
        fprintf(stderr, "profile '%s': status %d, message '%s', expected '%s'\n", text, s, dt_last_error(),
                what);
        dt_test_failures++;
    }
    free(q);
}

#define PROFILE_HEAD_V3 \
    "{\"format\":\"dtrain-profile\",\"version\":3,\"model\":\"m\",\"batch\":8,\"threads\":1,\"reps\":3," \
    "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":5,\"topk_s\":4,"
#define PROFILE_HEAD \
    "{\"format\":\"dtrain-profile\",\"version\":2,\"model\":\"m\",\"batch\":8,\"threads\":1,\"reps\":3,"
#define PROFILE_HEAD_V1 \
    "{\"format\":\"dtrain-profile\",\"version\":1,\"model\":\"m\",\"batch\":8,\"threads\":1,\"reps\":3,"
#define ONE_LAYER \
    "\"layers\":[{\"kind\":\"connected\",\"fwd_s\":1,\"bwd_s\":2,\"params\":30,\"fc_out\":3,\"fc_in\":9}]"

/* Malformed profiles and the words their refusal must name. */
static const struct {
    const char *text, *what;
} bad_profiles[] = {
    {PROFILE_HEAD_V3 "\"workers\":2," ONE_LAYER "}",
     "missing 'straggler'"},
    {PROFILE_HEAD_V3 "\"workers\":0,\"straggler\":1," ONE_LAYER "}",
     "'workers' must be at least 1"},
    {PROFILE_HEAD_V3 "\"workers\":2,\"straggler\":0.9," ONE_LAYER "}",
     "'straggler' must be a ratio of at least 1"},
    {PROFILE_HEAD "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":5,\"topk_s\":4,\"workers\":2," ONE_LAYER "}",
     "'workers' is not a field of version 2 profiles"},
    {PROFILE_HEAD_V1 "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":5,\"topk_s\":4," ONE_LAYER "}",
     "'topk_s' is not a field of version 1 profiles"},
    {PROFILE_HEAD "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":5," ONE_LAYER "}",
     "missing 'topk_s'"},
    {PROFILE_HEAD "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":5,\"topk_s\":0," ONE_LAYER "}",
     "'topk_s' must be positive"},
    {"{\"format\":\"other\"}",
     "not a dtrain profile"},
    {PROFILE_HEAD_V1 "\"update_s\":1,\"sum_s\":1," ONE_LAYER "}",
     "missing 'gemm_gflops'"},
    {PROFILE_HEAD_V1 "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":0," ONE_LAYER "}",
     "gemm_gflops"},
    {PROFILE_HEAD_V1 "\"update_s\":-1,\"sum_s\":1,\"gemm_gflops\":5," ONE_LAYER "}",
     "'update_s' must be a non-negative number"},
    {PROFILE_HEAD_V1 "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":5,\"extra\":2," ONE_LAYER "}",
     "unknown field 'extra'"},
    {PROFILE_HEAD_V1 "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":5,\"layers\":[]}",
     "no layers"},
    {PROFILE_HEAD_V1 "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":5,\"layers\":[{\"kind\":\"x\"}]}",
     "layer 0: missing 'fwd_s'"},
    {PROFILE_HEAD_V1 "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":5,\n" ONE_LAYER,
     "p.json:2:"},
    {"{\"format\":\"dtrain-profile\",\"version\":4}",
     "version 4, this dtrain reads versions 1 to 3"},
};

static void test_profile_files(void) {
    char dir[] = "/tmp/dt_sim_XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/p.json", dir);
    dt_profile *p = three_layers(), *q = malloc(sizeof *q);
    if (!p || !q) {
        CHECK(p && q);
        free(p);
        free(q);
        return;
    }
    snprintf(p->model, sizeof p->model, "dir/\"quoted\" model.cfg");
    p->topk_s = 0.0042;
    p->workers = 2;
    p->straggler = 1.25;
    CHECK_OK(dt_profile_write(p, path));
    CHECK_OK(dt_profile_read(q, path));
    CHECK(strcmp(q->model, p->model) == 0);
    CHECK(q->batch == 64 && q->threads == 1 && q->reps == 1 && q->nlayers == 3);
    CHECK_CLOSE(q->update_s, p->update_s, 0, 1e-8);
    CHECK_CLOSE(q->sum_s, p->sum_s, 0, 1e-8);
    CHECK_CLOSE(q->gemm_gflops, p->gemm_gflops, 0, 1e-5);
    CHECK_CLOSE(q->topk_s, p->topk_s, 0, 1e-8);
    CHECK(q->workers == 2 && q->straggler == 1.25);
    for (int i = 0; i < p->nlayers; i++) {
        CHECK(strcmp(q->layers[i].kind, p->layers[i].kind) == 0);
        CHECK_CLOSE(q->layers[i].fwd_s, p->layers[i].fwd_s, 0, 1e-8);
        CHECK_CLOSE(q->layers[i].bwd_s, p->layers[i].bwd_s, 0, 1e-8);
        CHECK(q->layers[i].params == p->layers[i].params);
        CHECK(q->layers[i].fc_out == p->layers[i].fc_out && q->layers[i].fc_in == p->layers[i].fc_in);
    }
    dt_test_write_text(path, PROFILE_HEAD "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":5,\"topk_s\":4," ONE_LAYER "}");
    CHECK_OK(dt_profile_read(q, path));
    CHECK(q->nlayers == 1 && q->layers[0].fc_in == 9 && q->topk_s == 4);
    CHECK(q->workers == 1 && q->straggler == 1); /* version 2: measured alone */
    /* Version 1 (before topk_s) still reads, without a top-k rate. */
    dt_test_write_text(path, PROFILE_HEAD_V1 "\"update_s\":1,\"sum_s\":1,\"gemm_gflops\":5," ONE_LAYER "}");
    CHECK_OK(dt_profile_read(q, path));
    CHECK(q->nlayers == 1 && q->topk_s == 0);
    for (size_t i = 0; i < sizeof bad_profiles / sizeof *bad_profiles; i++)
        bad_profile(path, bad_profiles[i].text, bad_profiles[i].what);
    unlink(path);
    CHECK(dt_profile_read(q, path) == DT_ERR_IO);
    rmdir(dir);
    free(q);
    free(p);
}

/* dt_net_time_step times each layer on its own but computes what a plain
 * forward, loss and backward compute. */
static void test_net_profile(void) {
    dt_model_spec spec;
    if (!CHECK_OK(dt_model_parse_file(&spec, dt_test_src_path("examples/cnn.cfg")))) return;
    const int B = 4;
    dt_net *net;
    if (!CHECK_OK(dt_net_create(&net, &spec, B, 7))) return;
    size_t nx = dt_shape_size(spec.input) * B;
    float *x = malloc(sizeof(float) * nx), *g = malloc(sizeof(float) * net->nparams);
    dt_label y[4] = {1, 7, 3, 0};
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 37) % 101) / 101.0f;
    dt_net_forward(net, x, B, 1);
    dt_net_loss(net, y, B);
    dt_net_backward(net, x, B, NULL, NULL);
    memcpy(g, net->grads, sizeof(float) * net->nparams);
    memset(net->grads, 0, sizeof(float) * net->nparams);
    double fwd[16], bwd[16];
    CHECK_OK(dt_net_time_step(net, x, y, B, fwd, bwd));
    CHECK_ALLCLOSE(net->grads, g, net->nparams, 0, 0);
    for (int i = 0; i < net->nlayers; i++) CHECK(fwd[i] >= 0 && bwd[i] >= 0);
    CHECK(fwd[0] > 0 && bwd[0] > 0); /* a convolution takes measurable time */
    CHECK(dt_net_time_step(net, x, y, B + 1, fwd, bwd) == DT_ERR_USAGE);
    free(x);
    free(g);
    dt_net_free(net);

    /* The whole profile of the mlp. */
    CHECK_OK(dt_model_parse_file(&spec, dt_test_src_path("examples/mlp.cfg")));
    spec.batch = 8;
    dt_profile *p = malloc(sizeof *p);
    /* Alone, and with two companions computing beside it (their steps
     * begun together): the same layers; the slowest of three is never
     * ahead of the measured one. */
    for (int workers = 1; workers <= 3; workers += 2) {
        CHECK_OK(dt_profile_measure(p, &spec, 1, 3, workers));
        size_t total = 0;
        int fc = 0;
        for (int i = 0; i < p->nlayers; i++) {
            total += p->layers[i].params;
            fc += p->layers[i].fc_out > 0;
        }
        CHECK(total == 407050 && fc == 2 && p->batch == 8 && p->reps == 3 && p->workers == workers);
        CHECK(p->layers[0].fc_out == 512 && p->layers[0].fc_in == 784);
        CHECK(p->gemm_gflops > 0 && p->update_s > 0 && p->sum_s > 0 && p->layers[0].fwd_s > 0);
        CHECK(workers == 1 ? p->straggler == 1 : p->straggler >= 1);
    }
    CHECK(dt_profile_measure(p, &spec, 1, 3, 0) == DT_ERR_USAGE);
    CHECK(dt_profile_measure(p, &spec, 1, 3, DT_PROFILE_MAX_WORKERS + 1) == DT_ERR_USAGE);
    free(p);
}
int main(void) {
    test_profile_files();
    test_net_profile();
    return dt_test_finish("test_sim_profile");
}

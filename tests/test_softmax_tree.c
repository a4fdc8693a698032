/* Darknet's hierarchical softmax (dtrain/softmax_tree.h) on a hand-made
 * tree of 9 nodes in 4 groups:
 *   group 0: r0 r1 (roots)      group 1: a0 a1 a2 (children of r0)
 *   group 2: b0 b1 (of r1)      group 3: c0 c1 (of a1, a grandchild group)
 * the reading (groups, leaves), the truth of a label by hand (recovered
 * from the gradient: t = p - B d; masked groups exactly 0), the loss's
 * value, a central-difference gradient check at temperatures 1 and 2, the
 * leaf probabilities by hand, and a net with tree= learning a synthetic task
 * of the 6 leaves well above chance (1/6). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/mem.h"
#include "dtrain/model.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "dtrain/softmax_tree.h"
#include "testutil.h"

#define N 9
static const char tree_text[] = "r0 -1\nr1 -1\na0 0\na1 0\na2 0\nb0 1\nb1 1\nc0 3\nc1 3\n";

static void check_read(const dt_softmax_tree *t) {
    CHECK(t->n == N && t->groups == 4);
    static const int off[4] = {0, 2, 5, 7}, size[4] = {2, 3, 2, 2};
    for (int g = 0; g < 4 && t->groups == 4; g++) CHECK(t->offset[g] == off[g] && t->size[g] == size[g]);
    static const unsigned char leaf[N] = {0, 0, 1, 0, 1, 1, 1, 1, 1};
    for (int i = 0; i < N; i++) CHECK(t->leaf[i] == leaf[i]);
    CHECK(t->parent[7] == 3 && t->group[7] == 3 && strcmp(t->name[7], "c0") == 0);
}

/* Label 7 (c0): 1 at c0, a1, r0; group 2 (b0 b1) masked. Label 1 (r1, an
 * inner node): 1 at r1; groups 1, 2 and 3 masked (none of them holds it). */
static void check_truth(const dt_softmax_tree *t) {
    static const float z[2 * N] = {0.3f, -0.2f, 1.0f, 0.5f, -1.0f, 0.2f, 0.1f, -0.4f, 0.7f,
                                   -0.5f, 0.9f, 0.0f, 0.3f, 0.6f, -0.8f, 0.4f, 0.2f, -0.1f};
    static const float want[2][N] = {{1, 0, 0, 1, 0, -1, -1, 1, 0}, {0, 1, -1, -1, -1, -1, -1, -1, -1}};
    const int32_t labels[2] = {7, 1};
    float p[2 * N], d[2 * N];
    dt_softmax_tree_forward(t, p, z, 2, 1);
    double loss = dt_softmax_tree_loss(t, d, z, p, labels, 2, 1);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < N; i++) {
            float pi = p[b * N + i], di = d[b * N + i];
            if (want[b][i] < 0) CHECK(di == 0.0f); /* masked (Darknet's SECRET_NUM): no gradient */
            else CHECK_CLOSE(pi - 2 * di, want[b][i], 1e-6, 0);
        }
    /* -log p(c0 | a1) - log p(a1 | r0) - log p(r0) - log p(r1) */
    double by_hand = -log(p[7]) - log(p[3]) - log(p[0]) - log(p[N + 1]);
    CHECK_CLOSE(loss, by_hand, 1e-5, 0);
}

/* d(loss / B)/dz against dlogits, at temperature temp. */
static void check_gradient(const dt_softmax_tree *t, float temp) {
    enum { B = 3 };
    float z[B * N], p[B * N], d[B * N], scratch[B * N];
    const int32_t labels[B] = {8, 4, 6};
    dt_rng rng = dt_rng_seed(11);
    for (int i = 0; i < B * N; i++) z[i] = 2 * dt_rng_uniform(&rng) - 1;
    dt_softmax_tree_forward(t, p, z, B, temp);
    dt_softmax_tree_loss(t, d, z, p, labels, B, temp);
    double worst = 0;
    for (int i = 0; i < B * N; i++) {
        const float h = 1e-2f, z0 = z[i];
        double f[2];
        for (int s = 0; s < 2; s++) {
            z[i] = z0 + (s ? -h : h);
            dt_softmax_tree_forward(t, p, z, B, temp);
            f[s] = dt_softmax_tree_loss(t, scratch, z, p, labels, B, temp) / B;
        }
        z[i] = z0;
        double num = (f[0] - f[1]) / (2.0 * h), err = fabs(num - d[i]);
        worst = err > worst ? err : worst;
    }
    printf("gradient check T=%g: worst |numeric - analytic| %.2e\n", temp, worst);
    CHECK(worst < 1e-5);
    /* Label 8 (c1) masks group 2 (b0 b1): exactly 0 there. */
    CHECK(d[5] == 0.0f && d[6] == 0.0f);
}

/* All logits 0: each group uniform; leaves a0 a2 1/2 x 1/3, b0 b1 1/2 x 1/2,
 * c0 c1 1/2 x 1/3 x 1/2; inner nodes 0. */
static void check_predict(const dt_softmax_tree *t) {
    float z[N] = {0}, p[N], s[N];
    dt_softmax_tree_forward(t, p, z, 1, 1);
    dt_softmax_tree_predict(t, s, p, 1);
    static const float want[N] = {0, 0, 1.f / 6, 0, 1.f / 6, 0.25f, 0.25f, 1.f / 12, 1.f / 12};
    CHECK_ALLCLOSE(s, want, N, 1e-7, 1e-6);
}

/* 8 inputs -> [connected] 9 -> [softmax] tree=: leaf class c's inputs are a
 * fixed random template plus noise; SGD on batches of 16; accuracy
 * (dt_net_count_correct over the leaf probabilities) on 600 fresh samples. */
static void check_learns(const char *tree_path) {
    static const int leaves[6] = {2, 4, 5, 6, 7, 8};
    char cfg[1280]; /* the text below and a path of up to 1023 bytes */
    int len = snprintf(cfg, sizeof cfg, "[net]\nbatch=16\nchannels=8\nheight=1\nwidth=1\nlearning_rate=0.1\nmomentum=0.9\n"
             "decay=0\n[connected]\noutput=9\nactivation=linear\n[softmax]\ntree=%s\n", tree_path);
    CHECK(len > 0 && (size_t)len < sizeof cfg);
    dt_model_spec *m = NULL;
    dt_net *net = NULL;
    dt_optim *opt = NULL;
    float *state = NULL, x[16 * 8], tmpl[6][8];
    dt_label y[16];
    dt_rng rng = dt_rng_seed(3);
    for (int c = 0; c < 6; c++)
        for (int i = 0; i < 8; i++) tmpl[c][i] = 2 * dt_rng_uniform(&rng) - 1;
    if (!CHECK_OK(dt_alloc_bytes((void **)&m, sizeof *m, "spec")) ||
        !CHECK_OK(dt_model_parse_string(m, cfg, "t.cfg")) ||
        !CHECK_OK(dt_net_create(&net, m, 16, 1)) || !CHECK_OK(dt_optim_create_for_net(&opt, &state, &m->optim, net)))
        goto done;
    long right = 0;
    double first = 0, last = 0;
    for (int step = 1; step <= 300 + 600 / 16; step++) {
        for (int b = 0; b < 16; b++) {
            int c = (int)(dt_rng_next(&rng) % 6);
            y[b] = leaves[c];
            for (int i = 0; i < 8; i++) x[b * 8 + i] = tmpl[c][i] + 0.5f * (2 * dt_rng_uniform(&rng) - 1);
        }
        if (step > 300) { /* held out: fresh samples, no update */
            dt_net_forward(net, x, 16, 0);
            right += dt_net_count_correct(net, y, 16);
            continue;
        }
        dt_net_forward(net, x, 16, 1);
        double loss = dt_net_loss(net, y, 16) / 16;
        CHECK(isfinite(loss));
        if (step == 1) first = loss;
        last = loss;
        dt_net_backward(net, x, 16, NULL, NULL);
        dt_optim_update_net(opt, 0.1f, step, net, state, 0, net->nparams);
    }
    double acc = (double)right / (600 / 16 * 16);
    printf("tree net: loss %.3f -> %.3f in 300 steps, held-out accuracy %.3f (chance 0.167)\n", first, last, acc);
    CHECK(acc > 0.9 && last < first / 4);
done:
    dt_optim_free(opt);
    dt_free(state);
    dt_net_free(net);
    dt_free(m);
}

int main(void) {
    const char *path = "test_softmax_tree.tree";
    dt_test_write_text(path, tree_text);
    dt_softmax_tree *t = NULL;
    if (CHECK_OK(dt_softmax_tree_read(&t, path))) {
        check_read(t);
        check_truth(t);
        check_gradient(t, 1);
        check_gradient(t, 2);
        check_predict(t);
    }
    dt_softmax_tree_free(t);
    dt_test_write_text("bad.tree", "r0 -1\nx 5\n");
    CHECK(dt_softmax_tree_read(&t, "bad.tree") == DT_ERR_FORMAT && t == NULL);
    char abs[1024];
    CHECK(getcwd(abs, sizeof abs - 32) != NULL);
    strcat(abs, "/test_softmax_tree.tree");
    check_learns(abs);
    remove(path);
    remove("bad.tree");
    return dt_test_finish("test_softmax_tree");
}

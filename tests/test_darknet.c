/* Darknet's meaning of its model-file keys: tests/data/darknet_small.cfg
 * (pad flag and padding, maxpool's default stride, size and padding, no
 * conv bias under batch_normalize, a shortcut between mismatched shapes,
 * route, global avgpool, subdivisions, burn_in, the steps policy,
 * max_batches, [softmax] groups and [cost]) builds the shapes, parameter
 * counts and learning rates its comments work out from Darknet's source,
 * and trains 2 steps (losses finite, parameters moved); a file of Darknet's
 * defaults and section aliases builds what Darknet would; grouped and
 * depthwise convolutions have Darknet's weight counts and train. */
#include <math.h>
#include <string.h>

#include "dtrain/mem.h"
#include "dtrain/net.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "testutil.h"

enum { SECTIONS = 11 };

/* Each section's output layer in the built net (conv sections expand into
 * conv, batch norm, activation), shape and parameters. */
static const struct {
    int layer;
    dt_shape out;
    size_t params;
} want[SECTIONS] = {
    {2, {8, 16, 16}, 232}, {3, {8, 8, 8}, 0},   {5, {16, 3, 3}, 1168}, {6, {16, 3, 3}, 272},
    {8, {16, 3, 3}, 0},    {9, {16, 3, 3}, 0},  {10, {32, 3, 3}, 0},   {11, {32, 2, 2}, 0},
    {12, {10, 2, 2}, 330}, {13, {10, 1, 1}, 0}, {14, {10, 1, 1}, 0},
};

static void check_shapes(const dt_net *net) {
    CHECK(net->nlayers == 15 && net->nparams == 232 + 1168 + 272 + 330);
    int first = 0;
    for (int s = 0; s < SECTIONS && net->nlayers == 15; s++) {
        const dt_layer *l = &net->layers[want[s].layer];
        size_t params = 0;
        for (int i = first; i <= want[s].layer; i++) params += net->layers[i].nw + net->layers[i].nb;
        int ok = l->out.c == want[s].out.c && l->out.h == want[s].out.h && l->out.w == want[s].out.w &&
                 params == want[s].params;
        if (!ok)
            fprintf(stderr, "section %d: %dx%dx%d, %zu parameters; want %dx%dx%d, %zu\n", s, l->out.c, l->out.h,
                    l->out.w, params, want[s].out.c, want[s].out.h, want[s].out.w, want[s].params);
        CHECK(ok);
        first = want[s].layer + 1;
    }
    CHECK(net->layers[0].nb == 0 && net->layers[4].nb == 16); /* bias only without batch norm */
}

/* Two optimiser steps of batch x accumulate random images. */
static void train_two_steps(dt_net *net, const dt_model_spec *m) {
    float *x = NULL, *state = NULL, *before = NULL, *acc = NULL;
    dt_optim *opt = NULL;
    size_t nx = dt_shape_size(net->input) * (size_t)m->batch;
    if (!CHECK_OK(dt_alloc_floats(&x, nx, "x")) || !CHECK_OK(dt_alloc_floats(&before, net->nparams, "p")) ||
        !CHECK_OK(dt_alloc_floats(&acc, net->nparams, "acc")) ||
        !CHECK_OK(dt_optim_create_for_net(&opt, &state, &m->optim, net)))
        goto done;
    memcpy(before, net->params, sizeof(float) * net->nparams);
    dt_rng rng = dt_rng_seed(5);
    dt_label labels[64];
    for (int step = 1; step <= 2; step++) {
        memset(acc, 0, sizeof(float) * net->nparams);
        for (int pass = 0; pass < m->accumulate; pass++) {
            for (size_t i = 0; i < nx; i++) x[i] = dt_rng_uniform(&rng);
            for (int b = 0; b < m->batch; b++) labels[b] = (dt_label)(dt_rng_next(&rng) % 10);
            dt_net_forward(net, x, m->batch, 1);
            double loss = dt_net_loss(net, labels, m->batch) / m->batch;
            CHECK(isfinite(loss) && loss > 0);
            dt_net_backward(net, x, m->batch, NULL, NULL);
            for (size_t i = 0; i < net->nparams; i++) acc[i] += net->grads[i] / (float)m->accumulate;
        }
        memcpy(net->grads, acc, sizeof(float) * net->nparams);
        dt_optim_update_net(opt, (float)m->sched.base_lr, step, net, state, 0, net->nparams);
    }
    size_t moved = 0;
    for (size_t i = 0; i < net->nparams; i++) moved += net->params[i] != before[i];
    CHECK(moved > net->nparams / 2);
done:
    dt_optim_free(opt);
    dt_free(state), dt_free(acc), dt_free(before), dt_free(x);
}

/* A Darknet file that leaves out every key it can, with Darknet's other
 * section names: Darknet's defaults from parser.c (parse_net_options:
 * batch 1, learning_rate .001, momentum .9, decay .0001; decay on weights
 * only (update_*_layer); a logistic activation after convolutional and
 * connected layers; [normalization]: size 5, alpha .0001, beta .75, kappa
 * 1), and policy=step in Darknet's form: lr * scale^(b / step). */
static void test_defaults(dt_model_spec *m) {
    const char *cfg = "[network]\nheight=8\nwidth=8\nchannels=1\npolicy=step\nstep=2\nscale=0.5\n"
                      "[conv]\nfilters=2\nsize=3\npad=1\n[max]\nsize=2\nstride=2\n[normalization]\n"
                      "[avg]\n[conn]\noutput=3\n[soft]\n";
    if (!CHECK_OK(dt_model_parse_string(m, cfg, "defaults.cfg"))) return;
    /* [net]'s other defaults: test_model's test_defaults. */
    CHECK(m->batch == 1 && m->accumulate == 1);
    /* b = step + 1: 0.001 at b = 1, x0.5 from b = 2, x0.25 from b = 4. */
    const double rate[] = {0.001, 0.0005, 0.0005, 0.00025};
    for (int step = 0; step < 4; step++) CHECK_CLOSE(dt_lr_at(&m->sched, step, 1000), rate[step], 1e-15, 0);
    static const dt_layer_kind kinds[] = {DT_LAYER_CONV, DT_LAYER_ACT,   DT_LAYER_MAXPOOL, DT_LAYER_LRN,
                                          DT_LAYER_AVGPOOL, DT_LAYER_DENSE, DT_LAYER_ACT, DT_LAYER_SOFTMAX};
    CHECK(m->nlayers == 8);
    for (int i = 0; i < 8 && i < m->nlayers; i++) CHECK(m->layers[i].kind == kinds[i]);
    if (m->nlayers != 8) return;
    CHECK(m->layers[1].act == DT_ACT_SIGMOID && m->layers[6].act == DT_ACT_SIGMOID);
    const dt_layer_spec *lrn = &m->layers[3];
    CHECK(lrn->lrn_size == 5 && lrn->lrn_k == 1.0f);
    CHECK_CLOSE(lrn->lrn_alpha, 1e-4, 0, 1e-6);
    CHECK_CLOSE(lrn->lrn_beta, 0.75, 0, 1e-6);
}

/* groups= as Darknet's parse_convolutional reads it (AlexeyAB's fork uses
 * it for depthwise convolutions): c / groups x n x size x size weights, a
 * filter reading its group's channels. 4 channels, 8 filters in 2 groups:
 * 4/2 x 8 x 9 = 144 weights (no bias under batch_normalize; the batch
 * norm's 16); depthwise over the 8: 8/8 x 8 x 9 = 72 and 8 biases. */
static void test_groups(dt_model_spec *m) {
    const char *cfg = "[net]\nbatch=4\nheight=8\nwidth=8\nchannels=4\nlearning_rate=0.1\n"
                      "[convolutional]\nfilters=8\nsize=3\npad=1\ngroups=2\nbatch_normalize=1\nactivation=leaky\n"
                      "[convolutional]\nfilters=8\nsize=3\npad=1\ngroups=8\nactivation=linear\n"
                      "[avgpool]\n[softmax]\n";
    dt_net *net = NULL;
    if (!CHECK_OK(dt_model_parse_string(m, cfg, "groups.cfg")) || !CHECK_OK(dt_net_create(&net, m, m->batch, 3)))
        return;
    CHECK(net->layers[0].nw == 144 && net->layers[0].nb == 0 && net->nparams == 144 + 16 + 72 + 8);
    train_two_steps(net, m);
    dt_net_free(net);
    /* groups must divide the channels and the filters */
    const char *bad = "[net]\nheight=8\nwidth=8\nchannels=4\n[convolutional]\nfilters=6\nsize=3\ngroups=3\n"
                      "[softmax]\n";
    if (CHECK_OK(dt_model_parse_string(m, bad, "bad.cfg"))) {
        CHECK(dt_net_create(&net, m, 1, 1) == DT_ERR_CONFIG);
        CHECK(strstr(dt_last_error(), "bad.cfg:5: [convolutional] groups=3 must divide the 4 input channels") != NULL);
    }
}

int main(void) {
    dt_model_spec *m = NULL;
    dt_net *net = NULL;
    if (CHECK_OK(dt_alloc_bytes((void **)&m, sizeof *m, "spec")) &&
        CHECK_OK(dt_model_parse_file(m, dt_test_src_path("tests/data/darknet_small.cfg")))) {
        CHECK(m->batch == 4 && m->accumulate == 2 && m->subdivisions == 2); /* 8 = 2 passes of 4 */
        /* The rates the file's comments work out (step = b - 1). */
        const double rate[] = {0.00625, 0.1, 0.01, 0.01, 0.01, 0.001, 0.001, 0.001};
        for (int step = 0; step < 8; step++) CHECK_CLOSE(dt_lr_at(&m->sched, step, 1000), rate[step], 1e-12, 0);
        CHECK(m->sched.max_batches == 8);
        if (CHECK_OK(dt_net_create(&net, m, m->batch, 3))) {
            check_shapes(net);
            train_two_steps(net, m);
        }
    }
    if (m) test_defaults(m);
    if (m) test_groups(m);
    dt_net_free(net);
    dt_free(m);
    return dt_test_finish("test_darknet");
}

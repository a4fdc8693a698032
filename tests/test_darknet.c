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
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dtrain/mem.h"
#include "dtrain/net.h"
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
    CHECK(m->layers[1].act.fn == DT_ACT_SIGMOID && m->layers[6].act.fn == DT_ACT_SIGMOID);
    const dt_layer_spec *lrn = &m->layers[3];
    CHECK(lrn->lrn.size == 5 && lrn->lrn.k == 1.0f);
    CHECK_CLOSE(lrn->lrn.alpha, 1e-4, 0, 1e-6);
    CHECK_CLOSE(lrn->lrn.beta, 0.75, 0, 1e-6);
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
    dt_test_train_two_steps(net, m);
    dt_net_free(net);
    /* groups must divide the channels and the filters */
    const char *bad = "[net]\nheight=8\nwidth=8\nchannels=4\n[convolutional]\nfilters=6\nsize=3\ngroups=3\n"
                      "[softmax]\n";
    if (CHECK_OK(dt_model_parse_string(m, bad, "bad.cfg"))) {
        CHECK(dt_net_create(&net, m, 1, 1) == DT_ERR_CONFIG);
        CHECK(strstr(dt_last_error(), "bad.cfg:5: [convolutional] groups=3 must divide the 4 input channels") != NULL);
    }
}

/* [softmax] tree= (darknet9000.cfg): Darknet's tree file, groups as runs
 * of one parent: a, b under none; c, d under a; e under b: 5 nodes in 3
 * groups. It builds and has a loss (dt_model_check_loss; its numbers:
 * test_softmax_tree, test_darknet_tree); [cost] type=masked is its mask
 * (after a plain softmax, refused). A relative tree= is found beside the
 * cfg's folder (Darknet's cfg/, data/); a bad tree file is an error naming
 * the cfg's line and the tree's. */
static void test_tree(dt_model_spec *m) {
    char dir[] = "/tmp/dt_tree_XXXXXX", path[64];
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/data", dir);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/cfg", dir);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/data/t.tree", dir);
    dt_test_write_text(path, "a -1\nb -1\nc 0\nd 0\ne 1\n");
    const char *cfg = "[net]\nheight=2\nwidth=2\nchannels=1\n[connected]\noutput=5\n[softmax]\ntree=data/t.tree\n"
                      "[cost]\ntype=masked\n";
    snprintf(path, sizeof path, "%s/cfg/t.cfg", dir);
    dt_test_write_text(path, cfg);
    dt_net *net = NULL;
    if (CHECK_OK(dt_model_parse_file(m, path))) {
        const dt_layer_spec *sm = &m->layers[m->nlayers - 1];
        CHECK(sm->softmax.tree_nodes == 5 && sm->softmax.tree_groups == 3);
        CHECK_OK(dt_model_check_loss(m));
        if (CHECK_OK(dt_net_create(&net, m, 1, 1))) CHECK(net->classes == 5 && net->scores != NULL);
        dt_net_free(net);
    }
    CHECK(dt_model_parse_string(m, "[net]\nheight=2\nwidth=2\nchannels=1\n[connected]\noutput=5\n[softmax]\n"
                                   "[cost]\ntype=masked\n", "m.cfg") == DT_ERR_CONFIG);
    dt_test_write_text(path, "[net]\nheight=2\nwidth=2\nchannels=1\n[connected]\noutput=4\n[softmax]\n"
                             "tree=data/t.tree\n");
    if (CHECK_OK(dt_model_parse_file(m, path))) {
        CHECK(dt_net_create(&net, m, 1, 1) == DT_ERR_CONFIG);
        CHECK(strstr(dt_last_error(), "tree= has 5 nodes, the softmax 4 inputs") != NULL);
    }
    snprintf(path, sizeof path, "%s/data/t.tree", dir);
    dt_test_write_text(path, "a -1\nb 3\n"); /* a parent after its child */
    snprintf(path, sizeof path, "%s/cfg/t.cfg", dir);
    CHECK(dt_model_parse_file(m, path) == DT_ERR_CONFIG);
    CHECK(strstr(dt_last_error(), "t.cfg:8: tree=") != NULL && strstr(dt_last_error(), "t.tree:2: not \"NAME PARENT\"") != NULL);
    snprintf(path, sizeof path, "rm -r %s", dir);
    CHECK(system(path) == 0);
}

/* A feature extractor (no [softmax], as vgg-conv.cfg) ending in a
 * convolution whose channels the engine would block: no classes, and its
 * output, what predict --features prints, is NCHW: the plain engine's. */
static void test_feature_extractor(dt_model_spec *m) {
    const char *cfg = "[net]\nchannels=3\nheight=8\nwidth=8\n[convolutional]\nfilters=16\nsize=3\npad=1\n"
                      "activation=relu\n[convolutional]\nfilters=32\nsize=3\npad=1\nactivation=relu\n";
    dt_net *fast = NULL, *plain = NULL;
    float x[2 * 3 * 8 * 8];
    dt_rng rng = dt_rng_seed(9);
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) x[i] = dt_rng_uniform(&rng);
    if (CHECK_OK(dt_model_parse_string(m, cfg, "fe.cfg")) && CHECK_OK(dt_net_create(&fast, m, 2, 3))) {
        m->plain_engine = 1;
        if (CHECK_OK(dt_net_create(&plain, m, 2, 3))) {
            CHECK(fast->classes == 0 && fast->layers[fast->nlayers - 1].out_layout == DT_LAYOUT_NCHW);
            const float *a = dt_net_forward(fast, x, 2, 0), *b = dt_net_forward(plain, x, 2, 0);
            CHECK_ALLCLOSE(a, b, 2 * 32 * 8 * 8, 1e-5, 1e-4);
        }
    }
    dt_net_free(fast), dt_net_free(plain);
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
            dt_test_train_two_steps(net, m);
        }
    }
    if (m) test_defaults(m);
    if (m) test_groups(m);
    if (m) test_tree(m);
    if (m) test_feature_extractor(m);
    dt_net_free(net);
    dt_free(m);
    return dt_test_finish("test_darknet");
}

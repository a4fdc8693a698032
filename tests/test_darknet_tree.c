/* The hierarchical softmax against Darknet itself (Debian's libdarknet.so,
 * through the peer program tests/darknet_tree.c): a 3x4x4 input, a 3x3
 * convolution, a connected layer to the 9418 nodes of Darknet's own
 * data/9k.tree and [softmax] tree= temperature=1.5, its parameters written
 * by dtrain as a .weights file that Darknet loads. For 6 random inputs and
 * labels (leaves and inner nodes, roots among them) Darknet's
 * network_predict (one softmax per group) and hierarchy_predictions
 * (only_leaves) equal dtrain's forward and dt_net_scores within 1e-6
 * absolute + 1e-4 relative (float sums in another order); with
 * fill_hierarchy's truth t, dtrain's gradient is 0 exactly where t is
 * SECRET_NUM and (p - t) / (T B) elsewhere, and its loss is the sum of
 * -log p over t = 1 (Darknet's GPU path: its CPU path does not mask).
 * Skipped (77) without Darknet or its tree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/darknet_weights.h"
#include "dtrain/mem.h"
#include "dtrain/model.h"
#include "dtrain/rng.h"
#include "testutil.h"

#define TREE "/usr/share/darknet/data/9k.tree"
enum { B = 6, NIN = 48 };

static const char cfg[] = "[net]\nbatch=1\nsubdivisions=1\nchannels=3\nheight=4\nwidth=4\n"
                          "[convolutional]\nfilters=4\nsize=3\npad=1\nstride=1\nactivation=leaky\n"
                          "[connected]\noutput=9418\nactivation=linear\n"
                          "[softmax]\ntemperature=1.5\ntree=" TREE "\n";

/* IN for the peer: B, the inputs (B, 3, 4, 4), the labels (B). */
static int write_input(const char *path, const float *x, const dt_label *y) {
    FILE *f = fopen(path, "wb");
    int b = B;
    int ok = f && fwrite(&b, sizeof b, 1, f) == 1 && fwrite(x, sizeof *x, B * NIN, f) == B * NIN &&
             fwrite(y, sizeof *y, B, f) == B;
    return (f ? fclose(f) == 0 : 0) && ok;
}

/* d (B, n) and loss of dtrain's net against Darknet's truth dk[b] (3 x n:
 * predict, hierarchy, truth). */
static void check_loss(const dt_net *net, const float *d, double loss, const float *dk, int n) {
    const float *p = net->act[net->nlayers - 1];
    double dk_loss = 0, worst = 0;
    long masked = 0, nonzero = 0;
    for (int b = 0; b < B; b++) {
        const float *t = dk + ((size_t)b * 3 + 2) * (size_t)n;
        for (int i = 0; i < n; i++) {
            size_t at = (size_t)b * (size_t)n + (size_t)i;
            if (t[i] == -1234) { /* SECRET_NUM */
                masked++;
                nonzero += d[at] != 0;
                continue;
            }
            double e = fabs(d[at] * 1.5 * B - (p[at] - t[i]));
            worst = e > worst ? e : worst;
            if (t[i] == 1) dk_loss -= log(dk[(size_t)b * 3 * (size_t)n + (size_t)i]);
        }
    }
    printf("masked %ld of %d x %d; gradient vs p - t worst %.2e; loss %.6f, Darknet's masked %.6f\n", masked, B, n,
           worst, loss, dk_loss);
    CHECK(masked > (long)B * n / 2 && nonzero == 0 && worst < 1e-6);
    CHECK_CLOSE(loss, dk_loss, 0, 1e-4);
}

static void compare(dt_net *net, const float *x, const dt_label *y, const float *dk) {
    int n = net->classes;
    float *mine = NULL, *hier = NULL, *theirs = NULL, *theirs_h = NULL;
    if (!CHECK_OK(dt_alloc_floats(&mine, (size_t)B * n, "x")) ||
        !CHECK_OK(dt_alloc_floats(&hier, (size_t)B * n, "x")) ||
        !CHECK_OK(dt_alloc_floats(&theirs, (size_t)B * n, "x")) ||
        !CHECK_OK(dt_alloc_floats(&theirs_h, (size_t)B * n, "x")))
        goto done;
    dt_net_forward(net, x, B, 0);
    memcpy(mine, net->act[net->nlayers - 1], sizeof(float) * (size_t)B * n);
    memcpy(hier, dt_net_scores(net), sizeof(float) * (size_t)B * n);
    for (int b = 0; b < B; b++) {
        memcpy(theirs + (size_t)b * n, dk + (size_t)b * 3 * n, sizeof(float) * (size_t)n);
        memcpy(theirs_h + (size_t)b * n, dk + ((size_t)b * 3 + 1) * n, sizeof(float) * (size_t)n);
    }
    double w[2] = {0, 0};
    for (size_t i = 0; i < (size_t)B * n; i++) {
        w[0] = fmax(w[0], fabs(mine[i] - theirs[i]));
        w[1] = fmax(w[1], fabs(hier[i] - theirs_h[i]));
    }
    printf("vs Darknet: group softmaxes worst |diff| %.2e, hierarchy_predictions %.2e\n", w[0], w[1]);
    CHECK_ALLCLOSE(mine, theirs, (size_t)B * n, 1e-6, 1e-4);
    CHECK_ALLCLOSE(hier, theirs_h, (size_t)B * n, 1e-6, 1e-4);
    double loss = dt_net_loss(net, y, B);
    int logits = net->layers[net->nlayers - 1].spec.inputs[0];
    check_loss(net, net->gbuf[net->groute[logits].out], loss, dk, n);
done:
    dt_free(mine), dt_free(hier), dt_free(theirs), dt_free(theirs_h);
}

int main(void) {
    const char *bd = getenv("DT_BUILD_DIR");
    char peer[1024], cmd[2048];
    snprintf(peer, sizeof peer, "%s/tests/darknet_tree", bd ? bd : "..");
    if (access(peer, X_OK) != 0 || access(TREE, R_OK) != 0) {
        printf("test_darknet_tree: skipped (no %s or %s: apt-get install darknet)\n", peer, TREE);
        return 77;
    }
    dt_test_write_text("tree.cfg", cfg);
    dt_model_spec *m = NULL;
    dt_net *net = NULL;
    float x[B * NIN], *dk = NULL;
    dt_label y[B] = {0, 5, 9417, 1000, 4000, 17}; /* a root; inner nodes and leaves of 9k.tree */
    dt_rng rng = dt_rng_seed(21);
    for (int i = 0; i < B * NIN; i++) x[i] = 4 * dt_rng_uniform(&rng) - 2;
    if (!CHECK_OK(dt_alloc_bytes((void **)&m, sizeof *m, "spec")) ||
        !CHECK_OK(dt_model_parse_file(m, "tree.cfg")) || !CHECK_OK(dt_net_create(&net, m, B, 7)) ||
        !CHECK_OK(dt_darknet_weights_save("tree.weights", net, 0)))
        goto done;
    int wrote = write_input("tree.in", x, y);
    CHECK(wrote);
    snprintf(cmd, sizeof cmd, "%s tree.cfg tree.weights tree.in tree.out 2> tree.err", peer);
    size_t n3 = (size_t)B * 3 * (size_t)net->classes;
    int ran = wrote && system(cmd) == 0;
    CHECK(ran);
    if (!ran) system("cat tree.err >&2");
    FILE *f = ran && CHECK_OK(dt_alloc_floats(&dk, n3, "darknet")) ? fopen("tree.out", "rb") : NULL;
    int got = f && fread(dk, sizeof *dk, n3, f) == n3;
    if (f) fclose(f);
    CHECK(!ran || got);
    if (got) compare(net, x, y, dk);
done:
    dt_free(dk);
    dt_net_free(net);
    dt_free(m);
    remove("tree.cfg"), remove("tree.weights"), remove("tree.in"), remove("tree.out"), remove("tree.err");
    return dt_test_finish("test_darknet_tree");
}

/* darknet_tree CFG WEIGHTS IN OUT: Darknet's own hierarchical softmax
 * (Debian's libdarknet.so) for tests/test_darknet_tree.c. IN holds int32 B,
 * then B samples of the net's inputs (float), then B int32 labels; OUT gets,
 * per sample, network_predict's output (n floats: the group softmaxes),
 * hierarchy_predictions of it with only_leaves (n), and fill_hierarchy's
 * truth of the label (n: 1, 0 or SECRET_NUM). CFG's [net] batch is 1. */
#include <darknet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* In libdarknet.so (src/data.c), not in darknet.h. */
void fill_hierarchy(float *truth, int k, tree *hierarchy);

static int fail(const char *what) {
    perror(what);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: darknet_tree CFG WEIGHTS IN OUT\n");
        return 2;
    }
    network *net = parse_network_cfg(argv[1]);
    load_weights(net, argv[2]);
    tree *t = net->hierarchy;
    if (!t) return fprintf(stderr, "%s: no tree=\n", argv[1]), 1;
    int n = t->n, inputs = net->inputs, batch;
    FILE *in = fopen(argv[3], "rb"), *out = fopen(argv[4], "wb");
    if (!in || !out) return fail("darknet_tree: open");
    if (fread(&batch, sizeof batch, 1, in) != 1 || batch < 1) return fail("darknet_tree: read");
    float *x = calloc((size_t)batch * inputs, sizeof *x), *v = calloc((size_t)n, sizeof *v);
    int *labels = calloc((size_t)batch, sizeof *labels);
    if (!x || !v || !labels) return fail("darknet_tree: calloc");
    if (fread(x, sizeof *x, (size_t)batch * inputs, in) != (size_t)batch * inputs ||
        fread(labels, sizeof *labels, (size_t)batch, in) != (size_t)batch)
        return fail("darknet_tree: read");
    for (int b = 0; b < batch; b++) {
        memcpy(v, network_predict(net, x + (size_t)b * inputs), sizeof *v * (size_t)n);
        if (fwrite(v, sizeof *v, (size_t)n, out) != (size_t)n) return fail("darknet_tree: write");
        hierarchy_predictions(v, n, t, 1, 1);
        if (fwrite(v, sizeof *v, (size_t)n, out) != (size_t)n) return fail("darknet_tree: write");
        memset(v, 0, sizeof *v * (size_t)n);
        v[labels[b]] = 1;
        fill_hierarchy(v, n, t);
        if (fwrite(v, sizeof *v, (size_t)n, out) != (size_t)n) return fail("darknet_tree: write");
    }
    fclose(in);
    free(x), free(v), free(labels);
    free_network(net);
    return fclose(out) ? fail("darknet_tree: close") : 0;
}

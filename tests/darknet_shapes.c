/* darknet_shapes CFG...: each cfg as Darknet's own parser builds it
 * (libdarknet.so, Debian's darknet), one line per layer
 *   LAYER TYPE C H W OUTPUTS PARAMS
 * then "total PARAMS". PARAMS counts a layer's trainable arrays as Darknet
 * stores them: weights, biases, and batch norm's scales (rolling mean and
 * variance are state). parse_network_cfg allocates every output for the
 * file's batch, so each cfg is first copied to a temporary file with
 * batch=1 and subdivisions=1. The parse runs in the cfg's folder's parent
 * (Darknet's root: /usr/share/darknet), where Darknet resolves the paths a
 * cfg names (darknet9000.cfg's tree=data/9k.tree). Darknet logs each layer
 * to stderr; tests/test_darknet_cfgs.sh compares stdout with dtrain info. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <darknet.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *type_name(LAYER_TYPE t) {
    switch (t) {
    case CONVOLUTIONAL: return "convolutional";
    case CONNECTED: return "connected";
    case MAXPOOL: return "maxpool";
    case SOFTMAX: return "softmax";
    case DROPOUT: return "dropout";
    case CROP: return "crop";
    case ROUTE: return "route";
    case COST: return "cost";
    case NORMALIZATION: return "lrn";
    case AVGPOOL: return "avgpool";
    case SHORTCUT: return "shortcut";
    case ACTIVE: return "activation";
    case BATCHNORM: return "batchnorm";
    case REORG: return "reorg";
    default: return "other";
    }
}

static size_t layer_params(const layer *l) {
    switch (l->type) {
    case CONVOLUTIONAL: /* weights (n, c/groups, size, size), biases (n), scales (n) */
        return (size_t)l->nweights + (size_t)l->n * (l->batch_normalize ? 2 : 1);
    case CONNECTED: /* weights (outputs, inputs), biases, scales (outputs) */
        return (size_t)l->inputs * l->outputs + (size_t)l->outputs * (l->batch_normalize ? 2 : 1);
    case BATCHNORM: return 2 * (size_t)l->out_c; /* scales, biases */
    default: return 0;
    }
}

/* Copies src to dst with [net]'s batch= and subdivisions= replaced by 1. */
static int copy_batch1(const char *src, const char *dst) {
    FILE *in = fopen(src, "r"), *out = fopen(dst, "w");
    if (!in || !out) return -1;
    char line[4096];
    int in_net = 0;
    while (fgets(line, sizeof line, in)) {
        const char *p = line + strspn(line, " \t");
        if (*p == '[') in_net = !strncmp(p, "[net]", 5) || !strncmp(p, "[network]", 9);
        if (in_net && (!strncmp(p, "batch", 5) || !strncmp(p, "subdivisions", 12)) &&
            strchr(" \t=", p[p[0] == 'b' ? 5 : 12]))
            continue;
        fputs(line, out);
        if (in_net && (*p == '[')) fputs("batch=1\nsubdivisions=1\n", out);
    }
    fclose(in);
    return fclose(out);
}

int main(int argc, char **argv) {
    for (int a = 1; a < argc; a++) {
        char path[PATH_MAX], dir[PATH_MAX], tmp[] = "/tmp/darknet_shapes_XXXXXX";
        if (!realpath(argv[a], path)) { perror(argv[a]); return 1; }
        int fd = mkstemp(tmp);
        if (fd < 0 || close(fd) || copy_batch1(path, tmp)) { perror(tmp); return 1; }
        snprintf(dir, sizeof dir, "%s", path);
        if (chdir(dirname(dirname(dir)))) { perror(dir); return 1; }
        network *net = parse_network_cfg(tmp);
        unlink(tmp);
        size_t total = 0;
        printf("cfg %s\n", argv[a]);
        for (int i = 0; i < net->n; i++) {
            const layer *l = &net->layers[i];
            size_t p = layer_params(l);
            total += p;
            printf("%d %s %d %d %d %d %zu\n", i, type_name(l->type), l->out_c, l->out_h, l->out_w, l->outputs, p);
        }
        printf("total %zu\n", total);
        fflush(stdout);
        free_network(net);
    }
    return 0;
}

/* ONNX export without a runtime (test_export.sh runs the files in ONNX
 * Runtime; this one also runs under the sanitizers):
 * - the file written for a small net parses back with protobuf-c into the
 *   graph expected: the operators in order, initializers holding the net's
 *   own parameters and batch-norm statistics, the input and outputs;
 * - a layer kind without an emitter is refused naming the model file's
 *   line, before anything is written (an invalid kind stands in for one);
 * - a feature extractor (no [softmax], as Darknet's vgg-conv.cfg) has one
 *   output, "features", its last layer's (batch, C, H, W);
 * - [softmax] temperature=T (cifar.test.cfg) is Softmax(logits x 1/T). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/export.h"
#include "dtrain/mem.h"
#include "onnx/onnx.pb-c.h"
#include "testutil.h"

/* CHECK as an expression, for the ifs that skip what a failure leaves unset. */
#define EXPECT(cond) expect_true((cond), __LINE__, #cond)
static int expect_true(int cond, int line, const char *what) {
    if (!cond) {
        fprintf(stderr, "%s:%d: EXPECT(%s) failed\n", __FILE__, line, what);
        dt_test_failures++;
    }
    return cond;
}

static const char model[] =
    "[net]\nchannels=1\nheight=6\nwidth=6\n"
    "[convolutional]\nfilters=2\nsize=3\npad=1\nbatch_normalize=1\nactivation=relu\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[dropout]\n"
    "[connected]\noutput=3\nactivation=linear\n"
    "[softmax]\n";

/* Reads a whole file; NULL if it cannot. */
static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        buf = len > 0 ? malloc((size_t)len) : NULL;
        rewind(f);
        if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) free(buf), buf = NULL;
        *n = (size_t)len;
    }
    fclose(f);
    return buf;
}

static const Onnx__TensorProto *find_init(const Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_initializer; i++)
        if (strcmp(g->initializer[i]->name, name) == 0) return g->initializer[i];
    return NULL;
}

/* The initializer `name` holds n floats equal to want. */
static void check_init(const Onnx__GraphProto *g, const char *name, const float *want, size_t n) {
    const Onnx__TensorProto *t = find_init(g, name);
    if (!EXPECT(t != NULL) || !EXPECT(t->n_float_data == n)) return;
    CHECK(memcmp(t->float_data, want, n * sizeof *want) == 0);
}

static void test_graph_written(dt_net *net, const char *path) {
    for (size_t i = 0; i < net->nstate; i++) net->state[i] = 0.5f + (float)i; /* not the defaults */
    dt_export_info info = {"m.cfg", "m.ckpt", "test", NULL, 0, NULL, NULL};
    if (!CHECK_OK(dt_export_onnx(net, path, &info))) return;
    size_t n = 0;
    uint8_t *buf = slurp(path, &n);
    Onnx__ModelProto *m = buf ? onnx__model_proto__unpack(NULL, n, buf) : NULL;
    if (EXPECT(m != NULL) && EXPECT(m->graph != NULL)) {
        const Onnx__GraphProto *g = m->graph;
        static const char *const ops[] = {"Conv", "BatchNormalization", "Relu", "MaxPool",
                                          "Flatten", "Gemm", "Identity", "Softmax"};
        if (EXPECT(g->n_node == sizeof ops / sizeof *ops))
            for (size_t i = 0; i < g->n_node; i++) CHECK(strcmp(g->node[i]->op_type, ops[i]) == 0);
        CHECK(m->n_opset_import == 1 && m->opset_import[0]->version == 13);
        CHECK(g->n_input == 1 && strcmp(g->input[0]->name, "input") == 0);
        CHECK(g->n_output == 2 && strcmp(g->output[0]->name, "logits") == 0 &&
              strcmp(g->output[1]->name, "probabilities") == 0);
        const dt_layer *conv = &net->layers[0], *bn = &net->layers[1], *fc = &net->layers[5];
        check_init(g, "l0.weight", conv->w, conv->nw);
        CHECK(find_init(g, "l0.bias") == NULL); /* batch_normalize=1: no conv bias */
        check_init(g, "l1.weight", bn->w, bn->nw);
        check_init(g, "l1.running_mean", bn->state, 2);
        check_init(g, "l1.running_var", bn->state + 2, 2);
        check_init(g, "l5.weight", fc->w, fc->nw);
        check_init(g, "l5.bias", fc->b, fc->nb);
        const Onnx__TensorProto *w = find_init(g, "l5.weight");
        CHECK(w && w->n_dims == 2 && w->dims[0] == 3 && w->dims[1] == 18);
    }
    onnx__model_proto__free_unpacked(m, NULL);
    free(buf);
}

static void test_refused(dt_net *net, const char *path) {
    dt_layer_kind kind = net->layers[4].spec.kind;
    net->layers[4].spec.kind = DT_LAYER_KIND_COUNT; /* a kind the exporter does not know */
    dt_export_info info = {"m.cfg", "m.ckpt", "test", NULL, 0, NULL, NULL};
    CHECK(dt_export_onnx(net, path, &info) == DT_ERR_CONFIG);
    CHECK(strstr(dt_last_error(), "m.cfg:14: [dropout] (layer 4) cannot be exported to ONNX") != NULL);
    CHECK(access(path, F_OK) != 0);
    net->layers[4].spec.kind = kind;
}

static const char extractor[] = "[net]\nchannels=1\nheight=6\nwidth=6\n"
                                "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=relu\n"
                                "[maxpool]\nsize=2\nstride=2\n";

static void test_features(const char *path) {
    dt_model_spec *spec = NULL;
    dt_net *net = NULL;
    dt_export_info info = {"f.cfg", "f.ckpt", "test", NULL, 0, NULL, NULL};
    if (CHECK_OK(dt_alloc_bytes((void **)&spec, sizeof *spec, "spec")) &&
        CHECK_OK(dt_model_parse_string(spec, extractor, "f.cfg")) && CHECK_OK(dt_net_create(&net, spec, 1, 3)) &&
        CHECK_OK(dt_export_onnx(net, path, &info))) {
        CHECK(net->classes == 0);
        size_t n = 0;
        uint8_t *buf = slurp(path, &n);
        Onnx__ModelProto *m = buf ? onnx__model_proto__unpack(NULL, n, buf) : NULL;
        if (EXPECT(m != NULL) && EXPECT(m->graph != NULL)) {
            const Onnx__GraphProto *g = m->graph;
            CHECK(g->n_output == 1 && strcmp(g->output[0]->name, "features") == 0);
            const Onnx__TypeProto *t = g->output[0]->type;
            const Onnx__TensorShapeProto *sh = t && t->tensor_type ? t->tensor_type->shape : NULL;
            CHECK(sh && sh->n_dim == 4 && sh->dim[1]->dim_value == 4 && sh->dim[2]->dim_value == 3 &&
                  sh->dim[3]->dim_value == 3);
        }
        onnx__model_proto__free_unpacked(m, NULL);
        free(buf);
    }
    dt_net_free(net);
    dt_free(spec);
}

static void test_temperature(const char *path) {
    dt_model_spec *spec = NULL;
    dt_net *net = NULL;
    dt_export_info info = {"t.cfg", "t.ckpt", "test", NULL, 0, NULL, NULL};
    if (CHECK_OK(dt_alloc_bytes((void **)&spec, sizeof *spec, "spec")) &&
        CHECK_OK(dt_model_parse_string(spec, "[net]\nchannels=1\nheight=2\nwidth=2\n[connected]\noutput=3\n"
                                             "activation=linear\n[softmax]\ntemperature=4\n", "t.cfg")) &&
        CHECK_OK(dt_net_create(&net, spec, 1, 3)) && CHECK_OK(dt_export_onnx(net, path, &info))) {
        size_t n = 0;
        uint8_t *buf = slurp(path, &n);
        Onnx__ModelProto *m = buf ? onnx__model_proto__unpack(NULL, n, buf) : NULL;
        if (EXPECT(m != NULL) && EXPECT(m->graph != NULL) && EXPECT(m->graph->n_node >= 2)) {
            const Onnx__GraphProto *g = m->graph;
            CHECK(strcmp(g->node[g->n_node - 2]->op_type, "Mul") == 0 &&
                  strcmp(g->node[g->n_node - 1]->op_type, "Softmax") == 0);
            const float quarter = 0.25f;
            check_init(g, "l1_inv_temperature", &quarter, 1);
        }
        onnx__model_proto__free_unpacked(m, NULL);
        free(buf);
    }
    dt_net_free(net);
    dt_free(spec);
}

int main(void) {
    dt_model_spec *spec = NULL;
    dt_net *net = NULL;
    char written[] = "/tmp/dt_test_export_XXXXXX", refused[] = "/tmp/dt_test_refuse_XXXXXX";
    int fd1 = mkstemp(written), fd2 = mkstemp(refused);
    if (EXPECT(fd1 >= 0 && fd2 >= 0) && CHECK_OK(dt_alloc_bytes((void **)&spec, sizeof *spec, "spec")) &&
        CHECK_OK(dt_model_parse_string(spec, model, "m.cfg")) && CHECK_OK(dt_net_create(&net, spec, 2, 3))) {
        close(fd1), close(fd2);
        unlink(refused);
        test_graph_written(net, written);
        test_refused(net, refused);
        test_features(written);
        test_temperature(written);
    }
    unlink(written);
    dt_net_free(net);
    dt_free(spec);
    return dt_test_finish("test_export_onnx");
}

/* The job API's models: load, describe, predict, evaluate, save, export
 * (dtrain.h). */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "dtrain/checkpoint.h"
#include "dtrain/export.h"
#include "dtrain/infer.h"
#include "dtrain/layer.h"
#include "dtrain/mem.h"
#include "dtrain/setup.h"
#include "dtrain/train.h"

dt_status dt_api_model_new(dtrain_model **out, const dt_model_spec *spec, dt_net *net, const char *text) {
    *out = NULL;
    dtrain_model *m = calloc(1, sizeof *m);
    char *copy = strdup(text);
    if (!m || !copy) {
        free(m);
        free(copy);
        return dt_fail(DT_ERR_NOMEM, "out of memory for a model");
    }
    m->spec = *spec;
    m->net = net;
    m->text = copy;
    *out = m;
    return DT_OK;
}

void dtrain_model_free(dtrain_model *m) {
    if (!m) return;
    dt_net_free(m->net);
    dt_class_names_free(&m->names);
    free(m->text);
    free(m);
}

/* A model as `dtrain predict` loads one (dt_infer_spec, dt_infer_net),
 * fp32 when the CPU cannot run the file's precision= (predict and
 * evaluate need no bf16). */
dtrain_status dtrain_model_load(dtrain_model **out, const char *model, const char *weights) {
    *out = NULL;
    if (!model) return (dtrain_status)dt_fail(DT_ERR_USAGE, "a model file's path or text is needed");
    dt_model_spec spec;
    DT_API_TRY(dt_infer_spec(&spec, model, 0, NULL, DT_INFER_FP32_FALLBACK));
    dt_net *net = NULL;
    dt_class_names names = {0, NULL};
    dt_ckpt_meta meta;
    dtrain_model *m = NULL;
    dt_status s = dt_infer_net(&net, &names, &meta, &spec, weights, 0);
    if (s == DT_OK) s = dt_api_model_new(&m, &spec, net, model);
    if (s != DT_OK) {
        dt_net_free(net);
        dt_class_names_free(&names);
        return (dtrain_status)s;
    }
    m->names = names;
    *out = m;
    return DTRAIN_OK;
}

dtrain_status dtrain_model_shape(const dtrain_model *m, int *c, int *h, int *w, int *classes, size_t *params,
                                 int *layers) {
    const dt_net *net = m->net;
    if (c) *c = net->input.c;
    if (h) *h = net->input.h;
    if (w) *w = net->input.w;
    if (classes) *classes = net->classes;
    if (params) *params = net->nparams;
    if (layers) *layers = net->nlayers;
    return DTRAIN_OK;
}

dtrain_status dtrain_model_layer(const dtrain_model *m, int i, char *kind, size_t cap, int *c, int *h, int *w,
                                 size_t *params) {
    if (i < 0 || i >= m->net->nlayers)
        return (dtrain_status)dt_fail(DT_ERR_USAGE, "layer %d: the model has layers 0 to %d", i, m->net->nlayers - 1);
    const dt_layer *l = &m->net->layers[i];
    if (kind && cap) snprintf(kind, cap, "%s", dt_layer_ops_of(l->spec.kind)->name);
    if (c) *c = l->out.c;
    if (h) *h = l->out.h;
    if (w) *w = l->out.w;
    if (params) *params = l->nw + l->nb;
    return DTRAIN_OK;
}

/* x (n, input) of dtype with labels y as a data set the loader reads
 * (borrowed), normalised as training normalises. */
static dt_status arrays_of(dt_dataset **ds, const dtrain_model *m, const void *x, dtrain_dtype dtype, int n,
                           const int32_t *y, int classes) {
    if (!x) return dt_fail(DT_ERR_USAGE, "no images given");
    if (dtype != DTRAIN_U8 && dtype != DTRAIN_F32)
        return dt_fail(DT_ERR_USAGE, "images of type %d: give bytes (DTRAIN_U8) or floats (DTRAIN_F32)", (int)dtype);
    dt_array_set a = {.n = n, .shape = m->net->input, .labels = y};
    if (dtype == DTRAIN_U8) a.u8 = x;
    else a.f32 = x;
    DT_TRY(dt_dataset_of_arrays(ds, &a, classes, "images"));
    dt_status s = dt_infer_data(*ds, &m->spec, "the images");
    if (s != DT_OK) {
        dt_dataset_free(*ds);
        *ds = NULL;
    }
    return s;
}

/* Where predict's outputs go: each batch's rows in order. */
typedef struct {
    const dt_net *net;
    float *out;
    size_t width, done;
} predict_sink;

static dt_status take_outputs(void *ctx, const float *logits, int n, int width) {
    (void)logits; /* the softmax's output, not its input, is what predict returns */
    (void)width;
    predict_sink *p = ctx;
    /* A classifier's scores (with tree= the leaves' probabilities, as evaluate ranks them), else the output. */
    const float *o = p->net->classes ? dt_net_scores(p->net) : dt_net_output(p->net, p->net->nlayers - 1, NULL);
    memcpy(p->out + p->done * p->width, o, sizeof(float) * (size_t)n * p->width);
    p->done += (size_t)n;
    return DT_OK;
}

/* dt_evaluate over x with the library's signal mask; acc and loss may be NULL. */
static dt_status evaluate(dtrain_model *m, const void *x, dtrain_dtype dtype, int n, const int32_t *y, int classes,
                          dt_logits_fn fn, void *ctx, double *acc, double *loss) {
    dt_dataset *ds;
    DT_TRY(arrays_of(&ds, m, x, dtype, n, y, classes));
    dt_api_compute c;
    dt_status s = dt_api_compute_begin(&c);
    if (s == DT_OK) {
        dt_setup_threads(0, dt_api_local_ranks());
        double a, l;
        const dt_eval_cfg ec = {.batch = m->net->max_batch, .threads = 1, .on_logits = fn, .ctx = ctx};
        s = dt_evaluate(m->net, ds, &ec, &a, &l);
        if (acc) *acc = a;
        if (loss) *loss = l;
        dt_api_compute_end(&c);
    }
    dt_dataset_free(ds);
    return s;
}

dtrain_status dtrain_model_predict(dtrain_model *m, const void *x, dtrain_dtype dtype, int n, float *out) {
    if (!out) return (dtrain_status)dt_fail(DT_ERR_USAGE, "no output array given");
    const dt_layer *last = &m->net->layers[m->net->nlayers - 1];
    predict_sink sink = {m->net, out, dt_shape_size(last->out), 0};
    /* Labels only feed the loss, which predict does not report. */
    int32_t *zeros = calloc(n > 0 ? (size_t)n : 1, sizeof *zeros);
    if (!zeros) return (dtrain_status)dt_fail(DT_ERR_NOMEM, "out of memory for %d labels", n);
    dt_status s = evaluate(m, x, dtype, n, zeros, m->net->classes > 0 ? m->net->classes : 1, take_outputs, &sink,
                           NULL, NULL);
    free(zeros);
    return (dtrain_status)s;
}

dtrain_status dtrain_model_evaluate(dtrain_model *m, const void *x, dtrain_dtype dtype, int n, const int32_t *y,
                                    double *accuracy, double *loss) {
    if (m->net->classes == 0)
        return (dtrain_status)dt_fail(DT_ERR_USAGE, "%s is a feature extractor (no [softmax]): nothing to evaluate",
                                      m->spec.path);
    return (dtrain_status)evaluate(m, x, dtype, n, y, m->net->classes, NULL, NULL, accuracy, loss);
}

dtrain_status dtrain_model_save(const dtrain_model *m, const char *path) {
    if (!path) return (dtrain_status)dt_fail(DT_ERR_USAGE, "no checkpoint path given");
    const dt_net *net = m->net;
    dt_ckpt_arch arch;
    DT_API_TRY(dt_ckpt_arch_of(&arch, net));
    dt_ckpt_meta meta = {.shape_hash = net->shape_hash, .seed = 1, .best_accuracy = -1, .evaluated_step = -1};
    dt_class_names names = m->names;
    dt_ckpt_arrays a = {.params = net->params, .nparams = net->nparams, .state = net->state, .nstate = net->nstate,
                        .optimizer = m->spec.optim.kind, .classes = &names, .arch = &arch};
    dt_status s = dt_checkpoint_save(path, &meta, &a);
    dt_ckpt_arch_free(&arch);
    return (dtrain_status)s;
}

dtrain_status dtrain_model_export(const dtrain_model *m, const char *path) {
    if (!path) return (dtrain_status)dt_fail(DT_ERR_USAGE, "no export path given");
    dt_export_info info = {m->spec.path, "(the model in memory)", DT_VERSION, (const char *const *)m->names.names,
                           m->names.n, &m->spec.mean, &m->spec.std};
    return (dtrain_status)dt_export_file(m->net, path, &info, 0);
}

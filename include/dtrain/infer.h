/* Inference with a trained model: what `dtrain eval`, `dtrain predict` and
 * the job API's models (dtrain_model_load, _predict, _evaluate in
 * dtrain.h) share, so that each is a client of one implementation:
 *   dt_infer_spec, dt_infer_net  a model file (or text) and its checkpoint's
 *                                parameters and class names
 *   dt_infer_data                a data set made ready for a model (its
 *                                mean=/std=, its input checked)
 *   dt_infer_eval                `dtrain eval`: a data set's split loaded,
 *                                checked against the checkpoint, evaluated
 *                                (confusion matrix, logits file)
 *   dt_infer_predict             `dtrain predict`: image files in, each
 *                                image's top classes or features out
 * Every failure is a dt_status with a one-line message naming the flag or
 * file; nothing here prints. */
#ifndef DTRAIN_INFER_H
#define DTRAIN_INFER_H

#include "dtrain/checkpoint.h"
#include "dtrain/data.h"
#include "dtrain/metrics.h"
#include "dtrain/model.h"
#include "dtrain/net.h"
#include "dtrain/status.h"

/* How dt_infer_spec treats the model. */
enum {
    DT_INFER_SCORED = 1,       /* accuracy and loss are computed: the net needs a loss layer */
    DT_INFER_FP32_FALLBACK = 2, /* a precision= the CPU cannot run becomes fp32 (the job API: predict and
                                   evaluate need no bf16) rather than an error */
    DT_INFER_CLASSES = 4        /* dt_infer_net: the net must end in [softmax] */
};

/* The model file at model (or its text: dt_setup_model) with --batch
 * (0: the file's) and --precision (NULL: the file's) over it. */
dt_status dt_infer_spec(dt_model_spec *spec, const char *model, int batch, const char *precision, int flags);

/* spec's net for batches of spec->batch with weights' parameters (a dtrain
 * checkpoint or Darknet weights; NULL: seed 1's initial ones, as a fresh
 * run's), *names its class names (n 0: none; more than the net's outputs
 * are refused, as export refuses them) and *meta its metadata (zero
 * without weights). With DT_INFER_CLASSES a net without [softmax] (a
 * feature extractor) is refused before weights are read (predict without
 * --features). The caller frees *net and *names, also on failure. */
dt_status dt_infer_net(dt_net **net, dt_class_names *names, dt_ckpt_meta *meta, const dt_model_spec *spec,
                       const char *weights, int flags);

/* ds ready for spec: the model file's mean= and std= applied by its loader,
 * its images checked against the model's input (`what` names them). */
dt_status dt_infer_data(dt_dataset *ds, const dt_model_spec *spec, const char *what);

/* `dtrain eval`'s flags (strings borrowed; NULL and 0: not given). */
typedef struct {
    const char *model, *weights, *dataset, *data_dir, *data, *logits_out, *precision, *split;
    int batch, loader_threads, skip_bad, confusion;
    long cache_mb;    /* -1: not given */
    double val_split; /* 0: not given */
    long seed;        /* of the --val-split draw (train's --seed) */
    int local_ranks;  /* ranks on this node: --cache-mb's default */
} dt_eval_args;

/* What an evaluation found. */
typedef struct {
    dt_dataset_kind kind;
    dt_dataset *ds;       /* the split evaluated (its names, counts of skipped files) */
    dt_ckpt_meta meta;    /* the checkpoint's */
    dt_confusion conf;    /* per class; the matrix with --confusion */
    double accuracy, loss;
    double wall;          /* seconds the evaluation took */
} dt_eval_result;

/* Evaluates a->weights on the data set's split, as `dtrain eval` does,
 * writing a->logits_out (whole or not at all) when given. r is the
 * caller's to free with dt_eval_result_free, also on failure. */
dt_status dt_infer_eval(dt_eval_result *r, const dt_eval_args *a);
void dt_eval_result_free(dt_eval_result *r);

/* `dtrain predict`'s flags (strings borrowed). */
typedef struct {
    const char *model, *weights, *list, *precision, *data;
    const char *const *inputs; /* (ninputs) image files and folders */
    int ninputs, top, batch, loader_threads, features;
} dt_predict_args;

/* One class's probability for one image. */
typedef struct {
    double p;
    int c;
} dt_scored;

/* One image's result: its top k classes, most probable first (ties to the
 * lower class), the softmax of its logits in double; or with --features
 * (top NULL) its n output values. names: the classes' names (n 0: none). */
typedef dt_status (*dt_predict_fn)(void *ctx, const char *path, const dt_scored *top, int k, const float *features,
                                   int n, const dt_class_names *names);

/* Predicts every image a names (folders' images in bytewise order of
 * names, then --list's, or --data's valid= list), in order, through fn. */
dt_status dt_infer_predict(const dt_predict_args *a, dt_predict_fn fn, void *ctx);

#endif

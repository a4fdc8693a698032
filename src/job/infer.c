/* Inference with a trained model: loading it, making a data set ready for
 * it, and `dtrain eval`'s evaluation (infer.h). */
#include "dtrain/infer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/setup.h"
#include "dtrain/timer.h"
#include "dtrain/train.h"

dt_status dt_infer_spec(dt_model_spec *spec, const char *model, int batch, const char *precision, int flags) {
    DT_TRY(dt_setup_model(spec, model, batch, 0, 0));
    if (flags & DT_INFER_SCORED) DT_TRY(dt_model_check_loss(spec));
    if ((flags & DT_INFER_FP32_FALLBACK) && !precision && dt_precision_check(spec->precision) != DT_OK) {
        spec->precision = DT_PRECISION_FP32;
        return DT_OK;
    }
    return dt_setup_precision(spec, precision);
}

dt_status dt_infer_net(dt_net **net, dt_class_names *names, dt_ckpt_meta *meta, const dt_model_spec *spec,
                       const char *weights, int flags) {
    memset(meta, 0, sizeof *meta);
    DT_TRY(dt_net_create(net, spec, spec->batch, 1));
    if ((flags & DT_INFER_CLASSES) && !(*net)->classes)
        return dt_fail(DT_ERR_USAGE, "predict: %s has no [softmax], so no classes: it is a feature extractor "
                       "(give --features)", spec->path);
    if (!weights) return DT_OK;
    dt_ckpt_arrays arrays = {.classes = names};
    DT_TRY(dt_checkpoint_load_net(weights, *net, meta, &arrays));
    if (names->n > (*net)->classes)
        return dt_fail(DT_ERR_FORMAT, "%s: %d class names for a model with %d outputs", weights, names->n,
                       (*net)->classes);
    return DT_OK;
}

dt_status dt_infer_data(dt_dataset *ds, const dt_model_spec *spec, const char *what) {
    dt_data_normalise(ds, spec);
    return dt_check_input(spec, ds, what);
}

/* What each batch's logits feed, in the data set's order (one process
 * evaluates the whole set): the confusion matrix, and with --logits-out
 * PATH.tmp (raw float32, renamed to PATH once all are written: no partial
 * file at PATH). */
typedef struct {
    dt_confusion *conf;
    const dt_label *labels; /* the data set's */
    long at;                /* samples seen so far */
    FILE *f;                /* NULL: no --logits-out */
    const char *path;
} eval_sink;

static dt_status take_logits(void *ctx, const float *logits, int n, int classes) {
    eval_sink *k = ctx;
    dt_confusion_add(k->conf, logits, k->labels + k->at, n);
    k->at += n;
    size_t count = (size_t)n * (size_t)classes;
    if (k->f && fwrite(logits, sizeof *logits, count, k->f) != count)
        return dt_fail(DT_ERR_IO, "--logits-out %s: write failed: %s", k->path, strerror(errno));
    return DT_OK;
}

/* ds through net into r (accuracy, loss, confusion), and the logits into
 * the file logits_out when given. */
static dt_status evaluate(dt_net *net, const dt_dataset *ds, int batch, int threads, const char *logits_out,
                          dt_eval_result *r) {
    eval_sink k = {&r->conf, ds->labels, 0, NULL, logits_out};
    const dt_eval_cfg ec = {.batch = batch, .threads = threads, .on_logits = take_logits, .ctx = &k};
    if (!logits_out) return dt_evaluate(net, ds, &ec, &r->accuracy, &r->loss);
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", logits_out) >= (int)sizeof tmp)
        return dt_fail(DT_ERR_USAGE, "--logits-out: path too long");
    k.f = fopen(tmp, "wb");
    if (!k.f) return dt_fail(DT_ERR_IO, "--logits-out %s: cannot create %s: %s", logits_out, tmp, strerror(errno));
    dt_status s = dt_evaluate(net, ds, &ec, &r->accuracy, &r->loss);
    if (fclose(k.f) != 0 && s == DT_OK)
        s = dt_fail(DT_ERR_IO, "--logits-out %s: write failed: %s", logits_out, strerror(errno));
    if (s == DT_OK && rename(tmp, logits_out) != 0)
        s = dt_fail(DT_ERR_IO, "--logits-out %s: cannot rename %s over it: %s", logits_out, tmp, strerror(errno));
    if (s != DT_OK) remove(tmp);
    return s;
}

/* The data sets whose images have one shape, for the hint below. */
static const struct {
    dt_dataset_kind kind;
    dt_shape shape;
} fixed_shapes[] = {{DT_DATASET_FASHION_MNIST, {1, 28, 28}}, {DT_DATASET_CIFAR10, {3, 32, 32}}};

/* The model's input is not the data set's images (status s, its message
 * said): which --dataset would fit, from the checkpoint (its class names
 * are a folder's) or the input's shape. */
static dt_status with_dataset_hint(dt_status s, const dt_model_spec *spec, dt_dataset_kind kind,
                                   const dt_class_names *saved) {
    char msg[1024], hint[256];
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    snprintf(hint, sizeof hint, "give --dataset folder --data-dir DIR for images of another shape");
    for (size_t i = 0; i < sizeof fixed_shapes / sizeof *fixed_shapes; i++) {
        dt_shape f = fixed_shapes[i].shape;
        if (fixed_shapes[i].kind != kind && f.c == spec->input.c && f.h == spec->input.h && f.w == spec->input.w)
            snprintf(hint, sizeof hint, "its input is %s's: give --dataset %s",
                     dt_dataset_kind_name(fixed_shapes[i].kind), dt_dataset_kind_name(fixed_shapes[i].kind));
    }
    if (saved->n && !dt_dataset_kind_decodes(kind))
        snprintf(hint, sizeof hint, "the checkpoint was trained on a folder data set (%d classes, '%s' first): give "
                 "--dataset folder --data-dir DIR", saved->n, saved->names[0]);
    return dt_fail(s, "%s; %s", msg, hint);
}

/* --split train|test -> 1|0. */
static dt_status split_of(const char *name, int *train) {
    *train = name && strcmp(name, "train") == 0;
    if (name && !*train && strcmp(name, "test") != 0)
        return dt_fail(DT_ERR_USAGE, "--split: unknown split '%s' (train, test)", name);
    return DT_OK;
}

/* The split evaluated. A folder's class folders are labelled by the
 * checkpoint's class names when it has them (then the folder may hold
 * some classes only), else by their own sorted names. */
static dt_status load_eval_set(dt_dataset **ds, const dt_eval_args *a, dt_dataset_kind kind, const char *dir,
                               const dt_model_spec *spec, const dt_class_names *saved, int outputs) {
    int threads = a->loader_threads ? a->loader_threads : dt_setup_loader_threads(kind), train;
    DT_TRY(split_of(a->split, &train));
    dt_folder_opts fo = {.threads = threads, .cache_bytes = dt_setup_cache_bytes(a->cache_mb, a->local_ranks),
                         .skip_bad = a->skip_bad, .classes = saved->n ? saved : NULL, .classes_from = a->weights,
                         .val_split = a->val_split, .seed = (uint64_t)a->seed, .resize = spec->eval_resize};
    DT_TRY(dt_dataset_load(ds, kind, dir, train, dt_data_load_shape(spec, kind), outputs, 1, &fo));
    dt_status s = dt_infer_data(*ds, spec, dt_dataset_kind_name(kind));
    if (s != DT_OK) return with_dataset_hint(s, spec, kind, saved);
    if (kind == DT_DATASET_FOLDER && (*ds)->classes > outputs)
        return dt_fail(DT_ERR_CONFIG, "%s: the model has %d outputs, fewer than the %d classes of %s/%s", spec->path,
                       outputs, (*ds)->classes, a->data_dir, train ? "train" : "test");
    /* A data file's labels= order is the labels': a checkpoint that names
     * its classes must name them alike, or every count below is wrong. */
    const dt_class_names *now = &(*ds)->class_names;
    for (int i = 0; kind == DT_DATASET_DARKNET && saved->n && i < outputs; i++)
        if (i >= saved->n || i >= now->n || strcmp(saved->names[i], now->names[i]) != 0)
            return dt_fail(DT_ERR_USAGE, "--data %s: label %d is '%s' there but '%s' in %s", a->data, i,
                           i < now->n ? now->names[i] : "", i < saved->n ? saved->names[i] : "", a->weights);
    return DT_OK;
}

/* The data set's source and its flags, checked before any file is read;
 * *top: the k of top-k (a data file's top=, as in Darknet's classifier
 * valid, else 5). */
static dt_status eval_source(dt_dataset_kind *kind, const char **dir, int *top, const dt_eval_args *a,
                             const dt_model_spec *spec) {
    DT_TRY(dt_setup_data_source(kind, dir, a->data, a->dataset, a->data_dir, spec));
    DT_TRY(dt_setup_folder_flags(*kind, *dir, a->cache_mb, a->skip_bad));
    *top = 5;
    if (a->data) {
        dt_darknet_data d;
        DT_TRY(dt_darknet_data_read(&d, a->data));
        *top = d.top ? d.top : *top;
        dt_darknet_data_free(&d);
    }
    return dt_setup_val_split(*kind, a->val_split);
}

dt_status dt_infer_eval(dt_eval_result *r, const dt_eval_args *a) {
    memset(r, 0, sizeof *r);
    dt_model_spec spec;
    DT_TRY(dt_infer_spec(&spec, a->model, a->batch, a->precision, DT_INFER_SCORED));
    const char *dir;
    int top;
    DT_TRY(eval_source(&r->kind, &dir, &top, a, &spec));
    dt_net *net = NULL;
    dt_class_names saved = {0, NULL};
    dt_status s = dt_infer_net(&net, &saved, &r->meta, &spec, a->weights, 0);
    if (s == DT_OK && a->confusion && net->classes > DT_CONFUSION_MAX_MATRIX)
        s = dt_fail(DT_ERR_USAGE, "--confusion: %s has %d classes, a matrix is kept for at most %d", a->model,
                    net->classes, DT_CONFUSION_MAX_MATRIX);
    if (s == DT_OK) s = load_eval_set(&r->ds, a, r->kind, dir, &spec, &saved, net->classes);
    if (s == DT_OK) s = dt_confusion_init(&r->conf, net->classes, top, a->confusion);
    if (s == DT_OK) {
        int threads = a->loader_threads ? a->loader_threads : dt_setup_loader_threads(r->kind);
        double t0 = dt_now();
        s = evaluate(net, r->ds, spec.batch, threads, a->logits_out, r);
        r->wall = dt_now() - t0;
    }
    dt_class_names_free(&saved);
    dt_net_free(net);
    return s;
}

void dt_eval_result_free(dt_eval_result *r) {
    dt_confusion_free(&r->conf);
    dt_dataset_free(r->ds);
    r->ds = NULL;
}

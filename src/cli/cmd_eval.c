/* dtrain eval MODEL.cfg --weights CHECKPOINT: a short summary a person
 * reads (accuracy, loss, per class, top-5, the confusion matrix), or with
 * --json the one line scripts parse. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/opts.h"
#include "cli.h"
#include "dtrain/paths.h"
#include "dtrain/checkpoint.h"
#include "dtrain/json.h"
#include "dtrain/metrics.h"
#include "dtrain/net.h"
#include "dtrain/timer.h"
#include "dtrain/train.h"

/* What each batch's logits feed, in the data set's order (one process
 * evaluates the whole set): the confusion matrix, and with --logits-out
 * PATH.tmp (raw float32, renamed to PATH once all are written: no partial
 * file at PATH). */
typedef struct {
    dt_confusion conf;
    const dt_label *labels; /* the data set's */
    long at;               /* samples seen so far */
    FILE *f;               /* NULL: no --logits-out */
    const char *path;
} eval_sink;

static dt_status take_logits(void *ctx, const float *logits, int n, int classes) {
    eval_sink *k = ctx;
    dt_confusion_add(&k->conf, logits, k->labels + k->at, n);
    k->at += n;
    size_t count = (size_t)n * (size_t)classes;
    if (k->f && fwrite(logits, sizeof *logits, count, k->f) != count)
        return dt_fail(DT_ERR_IO, "--logits-out %s: write failed: %s", k->path, strerror(errno));
    return DT_OK;
}

/* The flags of dtrain eval (strings point into argv). */
typedef struct {
    const char *model, *weights, *dataset, *data_dir, *data, *logits_out, *precision, *split;
    int batch, threads, loader_threads, skip_bad, json, confusion;
    long cache_mb; /* -1: not given */
    double val_split; /* 0: not given */
    long seed;        /* of the --val-split draw (train's --seed) */
} eval_args;

static dt_status evaluate(dt_net *net, const dt_dataset *ds, int batch, int threads, const char *logits_out,
                          eval_sink *k, double *acc, double *loss) {
    k->labels = ds->labels;
    const dt_eval_cfg ec = {.batch = batch, .threads = threads, .on_logits = take_logits, .ctx = k};
    if (!logits_out) return dt_evaluate(net, ds, &ec, acc, loss);
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", logits_out) >= (int)sizeof tmp)
        return dt_fail(DT_ERR_USAGE, "--logits-out: path too long");
    k->f = fopen(tmp, "wb");
    k->path = logits_out;
    if (!k->f) return dt_fail(DT_ERR_IO, "--logits-out %s: cannot create %s: %s", logits_out, tmp, strerror(errno));
    dt_status s = dt_evaluate(net, ds, &ec, acc, loss);
    if (fclose(k->f) != 0 && s == DT_OK)
        s = dt_fail(DT_ERR_IO, "--logits-out %s: write failed: %s", logits_out, strerror(errno));
    k->f = NULL;
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
static dt_status load_eval_set(dt_dataset **ds, const eval_args *a, dt_dataset_kind kind, const char *dir,
                               const dt_model_spec *spec, const dt_class_names *saved, int outputs,
                               const cli_env *env) {
    int threads = a->loader_threads ? a->loader_threads : dt_setup_loader_threads(kind), train;
    DT_TRY(split_of(a->split, &train));
    dt_folder_opts fo = {.threads = threads, .cache_bytes = dt_setup_cache_bytes(a->cache_mb, env->local_ranks),
                         .skip_bad = a->skip_bad, .classes = saved->n ? saved : NULL, .classes_from = a->weights,
                         .val_split = a->val_split, .seed = (uint64_t)a->seed, .resize = spec->eval_resize};
    DT_TRY(dt_dataset_load(ds, kind, dir, train, dt_data_load_shape(spec, kind), outputs, 1, &fo));
    dt_data_normalise(*ds, spec);
    dt_status s = dt_check_input(spec, *ds, dt_dataset_kind_name(kind));
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

/* ,"classes":["cat","dog"] of a folder's test set ("" otherwise), and how
 * many files it skipped (unreadable) and ignored (not images by name). */
static void print_folder_fields(const dt_dataset *ds) {
    const dt_class_names *c = &ds->class_names;
    if (!c->n) return;
    char esc[1024];
    printf(",\"classes\":[");
    for (int i = 0; i < c->n; i++) printf("%s\"%s\"", i ? "," : "", dt_json_escape(esc, sizeof esc, c->names[i]));
    printf("],\"skipped\":%d,\"ignored\":%d", ds->skipped, ds->ignored);
}

/* --json --confusion: ,"confusion":[[...],...] rows by label, columns by prediction. */
static void print_confusion_json(const dt_confusion *c) {
    printf(",\"confusion\":[");
    for (int y = 0; y < c->classes; y++) {
        printf("%s[", y ? "," : "");
        for (int p = 0; p < c->classes; p++) printf("%s%ld", p ? "," : "", c->counts[(size_t)y * c->classes + p]);
        printf("]");
    }
    printf("]");
}

/* The machine line (--json): what scripts parse. */
static void print_json(const eval_args *a, const dt_dataset *ds, const dt_confusion *c, const dt_ckpt_meta *meta,
                       double acc, double loss, double wall) {
    printf("{\"event\":\"summary\",\"test_accuracy\":%.4f,\"test_loss\":%.4f,\"steps\":%llu,"
           "\"samples\":%d,\"images_per_sec\":%.1f,\"wall_s\":%.2f",
           acc, loss, (unsigned long long)meta->step, ds->n, wall > 0 ? ds->n / wall : 0, wall);
    if (meta->darknet) printf(",\"darknet_seen\":%llu", (unsigned long long)meta->seen);
    if (a->split) printf(",\"split\":\"%s\"", a->split);
    print_folder_fields(ds);
    if (a->confusion) print_confusion_json(c);
    printf("}\n");
}

/* "3 (coat)" for a folder's classes, "3" otherwise. */
static const char *class_label(char *buf, size_t cap, const dt_dataset *ds, int y) {
    if (y < ds->class_names.n) snprintf(buf, cap, "%d %s", y, ds->class_names.names[y]);
    else snprintf(buf, cap, "%d", y);
    return buf;
}

/* Rows: the classes that have samples, by label; columns: every prediction
 * the model made for some sample, or could (all outputs when few). */
static void print_confusion(const dt_dataset *ds, const dt_confusion *c) {
    char name[300];
    printf("confusion matrix (rows: true class, columns: predicted):\n%-16s", "");
    for (int p = 0; p < c->classes; p++) printf(" %6d", p);
    printf("\n");
    for (int y = 0; y < c->classes; y++) {
        if (!dt_confusion_support(c, y)) continue;
        printf("%-16.16s", class_label(name, sizeof name, ds, y));
        for (int p = 0; p < c->classes; p++) printf(" %6ld", c->counts[(size_t)y * c->classes + p]);
        printf("\n");
    }
}

/* The summary a person reads. */
static void print_summary(const eval_args *a, dt_dataset_kind kind, const dt_dataset *ds, const dt_confusion *c,
                          const dt_ckpt_meta *meta, double acc, double loss) {
    char name[300], from[64];
    if (meta->darknet) snprintf(from, sizeof from, "Darknet weights, %llu images seen", (unsigned long long)meta->seen);
    else snprintf(from, sizeof from, "step %llu", (unsigned long long)meta->step);
    printf("%s (%s) on the %s %s set: %d samples\n", a->weights, from,
           kind == DT_DATASET_FOLDER ? a->data_dir : kind == DT_DATASET_DARKNET ? a->data : dt_dataset_kind_name(kind),
           a->split ? a->split : "test", ds->n);
    printf("accuracy %.4f (%ld of %ld right), loss %.4f", acc, (long)(acc * c->n + 0.5), c->n, loss);
    if (c->classes > c->k) printf(", top-%d accuracy %.4f", c->k, dt_confusion_topk(c));
    if (ds->skipped) printf(", %d unreadable files skipped", ds->skipped);
    if (ds->ignored) printf(", %d files not .jpg, .jpeg or .png ignored", ds->ignored);
    printf("\n%-16s %8s %8s\n", "class", "accuracy", "samples");
    for (int y = 0; y < c->classes; y++) {
        long n = dt_confusion_support(c, y);
        if (n) printf("%-16.16s %8.4f %8ld\n", class_label(name, sizeof name, ds, y), dt_confusion_class_accuracy(c, y), n);
    }
    if (a->confusion) print_confusion(ds, c);
}

static dt_status eval_run(const eval_args *a, const cli_env *env) {
    dt_model_spec spec;
    DT_TRY(dt_setup_model(&spec, a->model, a->batch, 0, 0));
    DT_TRY(dt_model_check_loss(&spec));
    DT_TRY(dt_setup_precision(&spec, a->precision));
    dt_dataset_kind kind;
    const char *dir;
    DT_TRY(dt_setup_data_source(&kind, &dir, a->data, a->dataset, a->data_dir, &spec));
    DT_TRY(dt_setup_folder_flags(kind, dir, a->cache_mb, a->skip_bad));
    /* top= of a data file is the k of top-k, as in Darknet's classifier valid. */
    int top = 5;
    if (a->data) {
        dt_darknet_data d;
        DT_TRY(dt_darknet_data_read(&d, a->data));
        top = d.top ? d.top : top;
        dt_darknet_data_free(&d);
    }
    DT_TRY(dt_setup_val_split(kind, a->val_split));
    dt_net *net;
    DT_TRY(dt_net_create(&net, &spec, spec.batch, 1));
    dt_ckpt_meta meta;
    dt_class_names saved = {0, NULL};
    dt_ckpt_arrays arrays = {.classes = &saved};
    dt_dataset *ds = NULL;
    double t0 = 0, acc = 0, loss = 0;
    int loader_threads = a->loader_threads ? a->loader_threads : dt_setup_loader_threads(kind);
    eval_sink sink = {{0, 0, 0, 0, NULL, NULL, NULL}, NULL, 0, NULL, NULL};
    dt_status s = dt_checkpoint_load_net(a->weights, net, &meta, &arrays);
    if (s == DT_OK && a->confusion && net->classes > DT_CONFUSION_MAX_MATRIX)
        s = dt_fail(DT_ERR_USAGE, "--confusion: %s has %d classes, a matrix is kept for at most %d", a->model,
                    net->classes, DT_CONFUSION_MAX_MATRIX);
    if (s == DT_OK) s = load_eval_set(&ds, a, kind, dir, &spec, &saved, net->classes, env);
    if (s == DT_OK) s = dt_confusion_init(&sink.conf, net->classes, top, a->confusion);
    if (s == DT_OK) {
        t0 = dt_now();
        /* Every rank of an mpirun evaluates the whole set; one writes the file. */
        s = evaluate(net, ds, spec.batch, loader_threads, env->rank == 0 ? a->logits_out : NULL, &sink, &acc, &loss);
    }
    if (s == DT_OK && env->rank == 0) {
        if (a->json) print_json(a, ds, &sink.conf, &meta, acc, loss, dt_now() - t0);
        else print_summary(a, kind, ds, &sink.conf, &meta, acc, loss);
    }
    dt_confusion_free(&sink.conf);
    dt_class_names_free(&saved);
    dt_dataset_free(ds);
    dt_net_free(net);
    return s;
}

static const char eval_usage[] =
    "usage: dtrain eval MODEL.cfg --weights CHECKPOINT [flags]\n"
    "  accuracy, loss, per-class accuracy and (over 5 classes) top-5 accuracy of a checkpoint's\n"
    "  parameters on the test set\n"
    "  --json            one JSON line instead (the summary scripts parse)\n"
    "  --confusion       also the confusion matrix (rows: true class; with --json a\n"
    "                    \"confusion\" array of rows); models of up to 4096 classes\n"
    "  --split S         test (default) | train: the split evaluated (folder: DIR/S/<class>/)\n"
    "  --val-split F     folder without test/: the share F of DIR/train held out as the test\n"
    "                    split, drawn as train --val-split F with the same --seed (default 1)\n"
    "  --seed N          see --val-split\n"
    "  --weights F       checkpoint file (of a checkpoint directory: D/latest or D/best.ckpt),\n"
    "                    or Darknet weights of the model file (recognised by content)\n"
    "  --dataset D       fashion-mnist | mnist | cifar10 | synthetic | folder (default: the\n"
    "                    model file's)\n"
    "  --data-dir DIR    dataset directory (default /usr/share/datasets/fashion-mnist); folder:\n"
    "                    DIR/test/<class>/ images, labelled by the checkpoint's class names\n"
    "                    (listed in the summary), which the folders may be a subset of\n"
    "  --data F.data     Darknet's data file instead: its valid= list (--split train: train=),\n"
    "                    labelled by labels=, classes named by names=; top= is the k of top-k\n"
    "  --loader-threads N  threads building batches (default: 2 for folder, 1 otherwise)\n"
    "  --cache-mb N      folder: keep decoded images in memory up to N MiB (default: a quarter\n"
    "                    of memory)\n"
    "  --skip-bad-images folder: skip unreadable images (counted in the summary)\n"
    "  --batch N         evaluation batch (default: the model file's)\n"
    "  --threads N       threads (default: all cores)\n"
    "  --precision P     fp32 | bf16 (default: the model file's precision=, else fp32)\n"
    "  --logits-out F    also write the logits (the softmax layer's input) of every test\n"
    "                    sample to F: raw float32 in the machine's byte order (x86:\n"
    "                    little-endian), samples x classes, in the data set's order\n";

int cmd_eval(int argc, char **argv, const cli_env *env) {
    eval_args a = {.cache_mb = -1, .seed = 1};
    int help = 0;
    dt_opt flags[] = {
        {"--help", DT_OPT_FLAG, &help, 0, 0, 0},
        {"--weights", DT_OPT_STR, &a.weights, 0, 0, 0},
        {"--dataset", DT_OPT_STR, &a.dataset, 0, 0, 0},
        {"--data-dir", DT_OPT_STR, &a.data_dir, 0, 0, 0},
        {"--data", DT_OPT_STR, &a.data, 0, 0, 0},
        {"--batch", DT_OPT_INT, &a.batch, 1, 1 << 20, 0},
        {"--threads", DT_OPT_INT, &a.threads, 1, 1024, 0},
        {"--logits-out", DT_OPT_STR, &a.logits_out, 0, 0, 0},
        {"--precision", DT_OPT_STR, &a.precision, 0, 0, 0},
        {"--loader-threads", DT_OPT_INT, &a.loader_threads, 1, 256, 0},
        {"--cache-mb", DT_OPT_LONG, &a.cache_mb, 0, 1e9, 0},
        {"--skip-bad-images", DT_OPT_FLAG, &a.skip_bad, 0, 0, 0},
        {"--json", DT_OPT_FLAG, &a.json, 0, 0, 0},
        {"--confusion", DT_OPT_FLAG, &a.confusion, 0, 0, 0},
        {"--split", DT_OPT_STR, &a.split, 0, 0, 0},
        {"--val-split", DT_OPT_DOUBLE, &a.val_split, 1e-6, 1 - 1e-6, 0},
        {"--seed", DT_OPT_LONG, &a.seed, 0, 9.2e18, 0},
    };
    int npos;
    dt_status s = dt_opts_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), &a.model, 1, &npos);
    if (s == DT_OK && help) {
        fputs(eval_usage, stdout);
        return 0;
    }
    if (s == DT_OK && (npos != 1 || !a.weights))
        s = dt_fail(DT_ERR_USAGE, "eval: needs MODEL.cfg and --weights CHECKPOINT (see dtrain eval --help)");
    const dt_path paths[] = {{"MODEL.cfg", a.model, "the model file", 0},
                              {"--weights", a.weights, "the checkpoint given to --weights", 0},
                              {"--logits-out", a.logits_out, NULL, 0}};
    const int npaths = (int)(sizeof paths / sizeof *paths);
    if (s == DT_OK) s = dt_paths_check(paths, npaths);
    /* Rank 0 writes the logits. */
    if (s == DT_OK && env->rank == 0) s = dt_paths_make_parents(paths, npaths);
    if (s != DT_OK) return cli_report(s, env);
    dt_setup_threads(a.threads, env->local_ranks);
    return cli_report(eval_run(&a, env), env);
}

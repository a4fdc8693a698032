/* dtrain eval MODEL.cfg --weights CHECKPOINT: a short summary a person
 * reads (accuracy, loss, per class, top-5, the confusion matrix), or with
 * --json the one line scripts parse. */
#include <stdio.h>

#include "dtrain/opts.h"
#include "cli.h"
#include "dtrain/infer.h"
#include "dtrain/json.h"
#include "dtrain/paths.h"

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
static void print_json(const dt_eval_args *a, const dt_eval_result *r) {
    const dt_dataset *ds = r->ds;
    const dt_ckpt_meta *meta = &r->meta;
    double wall = r->wall;
    printf("{\"event\":\"summary\",\"test_accuracy\":%.4f,\"test_loss\":%.4f,\"steps\":%llu,"
           "\"samples\":%d,\"images_per_sec\":%.1f,\"wall_s\":%.2f",
           r->accuracy, r->loss, (unsigned long long)meta->step, ds->n, wall > 0 ? ds->n / wall : 0, wall);
    if (meta->darknet) printf(",\"darknet_seen\":%llu", (unsigned long long)meta->seen);
    if (a->split) printf(",\"split\":\"%s\"", a->split);
    print_folder_fields(ds);
    if (a->confusion) print_confusion_json(&r->conf);
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
static void print_summary(const dt_eval_args *a, const dt_eval_result *r) {
    const dt_dataset *ds = r->ds;
    const dt_confusion *c = &r->conf;
    const dt_ckpt_meta *meta = &r->meta;
    dt_dataset_kind kind = r->kind;
    double acc = r->accuracy;
    char name[300], from[64];
    if (meta->darknet) snprintf(from, sizeof from, "Darknet weights, %llu images seen", (unsigned long long)meta->seen);
    else snprintf(from, sizeof from, "step %llu", (unsigned long long)meta->step);
    printf("%s (%s) on the %s %s set: %d samples\n", a->weights, from,
           kind == DT_DATASET_FOLDER ? a->data_dir : kind == DT_DATASET_DARKNET ? a->data : dt_dataset_kind_name(kind),
           a->split ? a->split : "test", ds->n);
    printf("accuracy %.4f (%ld of %ld right), loss %.4f", acc, (long)(acc * c->n + 0.5), c->n, r->loss);
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

/* Evaluates (the library's dt_infer_eval) and prints on rank 0. Every
 * rank of an mpirun evaluates the whole set; rank 0 writes the logits. */
static dt_status eval_run(dt_eval_args *a, int json, const cli_env *env) {
    dt_eval_result r;
    a->local_ranks = env->local_ranks;
    if (env->rank != 0) a->logits_out = NULL;
    dt_status s = dt_infer_eval(&r, a);
    if (s == DT_OK && env->rank == 0) {
        if (json) print_json(a, &r);
        else print_summary(a, &r);
    }
    dt_eval_result_free(&r);
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
    dt_eval_args a = {.cache_mb = -1, .seed = 1};
    int help = 0, threads = 0, json = 0;
    dt_opt flags[] = {
        {"--help", DT_OPT_FLAG, &help, 0, 0, 0},
        {"--weights", DT_OPT_STR, &a.weights, 0, 0, 0},
        {"--dataset", DT_OPT_STR, &a.dataset, 0, 0, 0},
        {"--data-dir", DT_OPT_STR, &a.data_dir, 0, 0, 0},
        {"--data", DT_OPT_STR, &a.data, 0, 0, 0},
        {"--batch", DT_OPT_INT, &a.batch, 1, 1 << 20, 0},
        {"--threads", DT_OPT_INT, &threads, 1, 1024, 0},
        {"--logits-out", DT_OPT_STR, &a.logits_out, 0, 0, 0},
        {"--precision", DT_OPT_STR, &a.precision, 0, 0, 0},
        {"--loader-threads", DT_OPT_INT, &a.loader_threads, 1, 256, 0},
        {"--cache-mb", DT_OPT_LONG, &a.cache_mb, 0, 1e9, 0},
        {"--skip-bad-images", DT_OPT_FLAG, &a.skip_bad, 0, 0, 0},
        {"--json", DT_OPT_FLAG, &json, 0, 0, 0},
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
    dt_setup_threads(threads, env->local_ranks);
    return cli_report(eval_run(&a, json, env), env);
}

/* dtrain predict MODEL.cfg --weights CHECKPOINT IMAGE|FOLDER... [--list F]:
 * the top-k classes of each image with their probabilities, each image
 * preprocessed as eval preprocesses a folder's (decoded and fitted by the
 * folder code, then the evaluation loader's crop and mean=/std=), one
 * block per image or with --json one JSON object per image. --features:
 * the net's output vector per image instead (a feature extractor's, or a
 * classifier's logits). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dtrain/opts.h"
#include "cli.h"
#include "dtrain/checkpoint.h"
#include "dtrain/json.h"
#include "dtrain/mem.h"
#include "dtrain/net.h"
#include "dtrain/textfile.h"
#include "dtrain/train.h"

/* A growing list of owned paths. */
typedef struct {
    char **p; /* (n) malloc'd strings */
    int n, cap;
} path_list;

static void path_list_free(path_list *l) {
    for (int i = 0; i < l->n; i++) free(l->p[i]);
    free(l->p);
    *l = (path_list){NULL, 0, 0};
}

static dt_status path_list_add(path_list *l, const char *path) {
    if (l->n == DT_DATA_MAX_SAMPLES) return dt_fail(DT_ERR_USAGE, "%s: more than %d images", path, DT_DATA_MAX_SAMPLES);
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **p = realloc(l->p, sizeof *p * (size_t)cap);
        if (!p) return dt_fail(DT_ERR_NOMEM, "predict: out of memory listing images");
        l->p = p, l->cap = cap;
    }
    if (!(l->p[l->n] = strdup(path))) return dt_fail(DT_ERR_NOMEM, "predict: out of memory listing images");
    l->n++;
    return DT_OK;
}

static int visible(const struct dirent *d) { return d->d_name[0] != '.'; }
static int bytewise(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

/* The image files of folder dir and of its subfolders (depth levels
 * deeper at most), in bytewise order of their names at each level: a test
 * split's class folders come in the order eval reads them. */
static dt_status add_folder(path_list *l, const char *dir, int depth) {
    struct dirent **names;
    int n = scandir(dir, &names, visible, bytewise);
    if (n < 0) return dt_fail(DT_ERR_IO, "%s: cannot list the folder: %s", dir, strerror(errno));
    dt_status s = DT_OK;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        if (s == DT_OK && (size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name) >= sizeof path)
            s = dt_fail(DT_ERR_IO, "%s/%s: path too long", dir, names[i]->d_name);
        if (s == DT_OK && stat(path, &st) == 0 && S_ISDIR(st.st_mode) && depth > 0) s = add_folder(l, path, depth - 1);
        else if (s == DT_OK && dt_folder_is_image_name(names[i]->d_name)) s = path_list_add(l, path);
        free(names[i]);
    }
    free(names);
    return s;
}

/* --list F: one image path a line (blank lines skipped), as given. */
static dt_status add_list(path_list *l, const char *file) {
    char *text;
    DT_TRY(dt_read_text_file(&text, file, (size_t)1 << 30, DT_ERR_USAGE, "an image list"));
    dt_status s = DT_OK;
    for (char *line = text, *next; s == DT_OK && line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r') line[--len] = '\0';
        if (len) s = path_list_add(l, line);
    }
    free(text);
    return s;
}

/* Every input: a folder's images, an image file as named, the list's. */
static dt_status gather(path_list *l, const char *const *inputs, int n, const char *list) {
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(inputs[i], &st) != 0) return dt_fail(DT_ERR_IO, "%s: %s", inputs[i], strerror(errno));
        DT_TRY(S_ISDIR(st.st_mode) ? add_folder(l, inputs[i], 1) : path_list_add(l, inputs[i]));
    }
    if (list) DT_TRY(add_list(l, list));
    if (l->n == 0) return dt_fail(DT_ERR_USAGE, "predict: no images (.jpg, .jpeg, .png) in the inputs given");
    return DT_OK;
}

/* The flags of dtrain predict (strings point into argv). */
typedef struct {
    const char *model, *weights, *list, *precision, *data;
    const char **inputs; /* (ninputs) the positional words after MODEL.cfg */
    int ninputs, top, json, batch, threads, loader_threads, features;
} predict_args;

/* One class's probability for one image. */
typedef struct {
    double p;
    int c;
} scored;

/* What each batch's logits become: the next images' lines. */
typedef struct {
    const predict_args *a;
    const path_list *paths;
    const dt_class_names *names; /* --data's, else the checkpoint's (n 0: print indices) */
    scored *prob;                /* (classes) one image's softmax, then sorted */
    int probs;                   /* 1: the values handed on are probabilities already (tree=) */
    int top;                     /* classes shown per image */
    int at;                      /* images printed so far */
} printer;

/* p = softmax(z) (classes), in double as the loss computes it. */
static void softmax(scored *p, const float *z, int classes) {
    double m = z[0], sum = 0;
    for (int c = 1; c < classes; c++) m = z[c] > m ? z[c] : m;
    for (int c = 0; c < classes; c++) sum += p[c].p = exp((double)z[c] - m), p[c].c = c;
    for (int c = 0; c < classes; c++) p[c].p /= sum;
}

/* Most probable first, ties to the lower class (as eval's argmax takes
 * the first largest logit). */
static int by_probability(const void *x, const void *y) {
    const scored *a = x, *b = y;
    return a->p > b->p ? -1 : a->p < b->p ? 1 : (a->c > b->c) - (a->c < b->c);
}

/* The image's k first classes of pr->prob (sorted). */
static void print_image(const printer *pr, const char *path, int k) {
    const dt_class_names *nm = pr->names;
    char esc[8192], name[1024];
    if (pr->a->json) printf("{\"image\":\"%s\",\"top\":[", dt_json_escape(esc, sizeof esc, path));
    else printf("%s\n", path);
    for (int j = 0; j < k; j++) {
        int c = pr->prob[j].c;
        const char *cname = c < nm->n ? nm->names[c] : NULL;
        if (pr->a->json) {
            printf("%s{\"class\":%d", j ? "," : "", c);
            if (cname) printf(",\"name\":\"%s\"", dt_json_escape(name, sizeof name, cname));
            printf(",\"p\":%.6f}", pr->prob[j].p);
        } else {
            printf("  %8.4f%%  %d%s%s\n", 100 * pr->prob[j].p, c, cname ? " " : "", cname ? cname : "");
        }
    }
    if (pr->a->json) printf("]}\n");
}

/* --features: each image's n values (%.9g: floats read back exactly), a
 * line "PATH v0 v1 ..." or {"image":PATH,"features":[v0,...]}. */
static void print_features(const printer *pr, const char *path, const float *v, int n) {
    char esc[8192];
    if (pr->a->json) printf("{\"image\":\"%s\",\"features\":[", dt_json_escape(esc, sizeof esc, path));
    else fputs(path, stdout);
    for (int j = 0; j < n; j++) printf("%s%.9g", pr->a->json ? (j ? "," : "") : " ", (double)v[j]);
    puts(pr->a->json ? "]}" : "");
}

/* Sorting costs C log C per image: at ImageNet-22K's 21841 classes, far below the forward pass. */
static dt_status take_logits(void *ctx, const float *logits, int n, int classes) {
    printer *pr = ctx;
    if (pr->a->features) {
        for (int i = 0; i < n; i++, pr->at++)
            print_features(pr, pr->paths->p[pr->at], logits + (size_t)i * (size_t)classes, classes);
        return DT_OK;
    }
    int k = pr->top < classes ? pr->top : classes;
    for (int i = 0; i < n; i++, pr->at++) {
        const float *z = logits + (size_t)i * (size_t)classes;
        if (pr->probs) /* a tree's leaf probabilities (dt_evaluate), as eval ranks them */
            for (int c = 0; c < classes; c++) pr->prob[c].p = z[c], pr->prob[c].c = c;
        else
            softmax(pr->prob, z, classes);
        qsort(pr->prob, (size_t)classes, sizeof *pr->prob, by_probability);
        print_image(pr, pr->paths->p[pr->at], k);
    }
    return DT_OK;
}

/* The net with the checkpoint's parameters and class names (names beyond
 * its outputs are refused, as export refuses them); without --weights
 * (--features only) the initial parameters of a run of seed 1. */
static dt_status load_net(dt_net **net, dt_class_names *names, const predict_args *a, const dt_model_spec *spec) {
    DT_TRY(dt_net_create(net, spec, spec->batch, 1));
    if (!(*net)->classes && !a->features)
        return dt_fail(DT_ERR_USAGE, "predict: %s has no [softmax], so no classes: it is a feature extractor "
                       "(give --features)", spec->path);
    if (!a->weights) return DT_OK;
    dt_ckpt_meta meta;
    dt_ckpt_arrays arrays = {.classes = names};
    DT_TRY(dt_checkpoint_load_net(a->weights, *net, &meta, &arrays));
    if (names->n > (*net)->classes)
        return dt_fail(DT_ERR_FORMAT, "%s: %d class names for a model with %d outputs", a->weights, names->n,
                       (*net)->classes);
    return DT_OK;
}

/* --data F.data, as Darknet's classifier predict reads it: its names=
 * (else labels=) name the classes, over the checkpoint's, and its top= is
 * --top's default; given no images, its valid= list is predicted (as
 * Darknet's classifier valid goes through it: *list, the caller frees it). */
static dt_status read_data_file(const predict_args *a, dt_class_names *names, int *top, char **list) {
    dt_darknet_data d;
    DT_TRY(dt_darknet_data_read(&d, a->data));
    dt_status s = DT_OK;
    if (a->ninputs == 0 && !a->list && !d.valid)
        s = dt_fail(DT_ERR_USAGE, "predict: no images given and %s has no valid= list", a->data);
    if (s == DT_OK) s = dt_darknet_class_names(names, &d);
    if (s == DT_OK && !a->top && d.top) *top = d.top;
    if (s == DT_OK && a->ninputs == 0 && !a->list && !(*list = strdup(d.valid)))
        s = dt_fail(DT_ERR_NOMEM, "predict: out of memory");
    dt_darknet_data_free(&d);
    return s;
}

static dt_status predict_run(const predict_args *a) {
    dt_model_spec spec;
    DT_TRY(dt_setup_model(&spec, a->model, a->batch, 0, 0));
    DT_TRY(dt_setup_precision(&spec, a->precision));
    path_list paths = {NULL, 0, 0};
    dt_net *net = NULL;
    dt_class_names names = {0, NULL}, data_names = {0, NULL};
    dt_dataset *ds = NULL;
    printer pr = {a, &paths, &names, NULL, 0, a->top ? a->top : 5, 0};
    double acc, loss;
    char *valid = NULL; /* --data's valid= when it gives the images */
    dt_status s = a->data ? read_data_file(a, &data_names, &pr.top, &valid) : DT_OK;
    if (s == DT_OK) s = gather(&paths, a->inputs, a->ninputs, valid ? valid : a->list);
    if (s == DT_OK) s = load_net(&net, &names, a, &spec);
    if (s == DT_OK && a->data && data_names.n != net->classes)
        s = dt_fail(DT_ERR_CONFIG, "%s: classes=%d but the model %s has %d outputs", a->data, data_names.n, a->model,
                    net->classes);
    if (s == DT_OK && a->data) {
        dt_class_names_free(&names);
        names = data_names;
        data_names = (dt_class_names){0, NULL};
    }
    if (s == DT_OK)
        s = dt_dataset_of_files(&ds, (const char *const *)paths.p, paths.n,
                                dt_data_load_shape(&spec, DT_DATASET_FOLDER), spec.eval_resize,
                                net->classes ? net->classes : 1);
    if (s == DT_OK) {
        dt_data_normalise(ds, &spec);
        s = dt_check_input(&spec, ds, "the images");
    }
    if (s == DT_OK) pr.probs = net->scores != NULL;
    if (s == DT_OK && !a->features)
        s = dt_alloc_bytes((void **)&pr.prob, sizeof *pr.prob * (size_t)net->classes, "predict");
    if (s == DT_OK)
        s = dt_evaluate(net, ds, &(dt_eval_cfg){.batch = spec.batch, .threads = a->loader_threads, .on_logits = take_logits,
                                                .ctx = &pr}, &acc, &loss);
    dt_free(pr.prob);
    free(valid);
    dt_class_names_free(&data_names);
    dt_dataset_free(ds);
    dt_class_names_free(&names);
    dt_net_free(net);
    path_list_free(&paths);
    return s;
}

static const char predict_usage[] =
    "usage: dtrain predict MODEL.cfg --weights CHECKPOINT IMAGE|FOLDER... [--list F] [flags]\n"
    "  the most probable classes of each image and their probabilities (the softmax of\n"
    "  the logits), each image preprocessed as dtrain eval preprocesses a folder's;\n"
    "  classes named by the checkpoint's class names (a folder data set's), else by index\n"
    "  IMAGE             a .jpg, .jpeg or .png file (by content)\n"
    "  FOLDER            its image files and those of its subfolders (a test split's class\n"
    "                    folders), in bytewise order of names, as eval reads a folder\n"
    "  --list F          also the images named in F, one path a line\n"
    "  --data F.data     Darknet's data file: classes named by its names= (else labels=),\n"
    "                    top= for --top; with no images given, those of its valid= list\n"
    "  --top K           classes per image (default: --data's top=, else 5; at most the\n"
    "                    model's outputs)\n"
    "  --json            one JSON object a line per image: {\"image\":PATH,\"top\":[{\"class\":I,\n"
    "                    \"name\":NAME,\"p\":P},...]} (\"name\" when the checkpoint has names)\n"
    "  --features        the net's output per image instead, \"PATH v0 v1 ...\" (--json:\n"
    "                    {\"image\":PATH,\"features\":[...]}): a feature extractor's output (a\n"
    "                    model without [softmax]), a classifier's logits\n"
    "  --weights F       checkpoint file (of a checkpoint directory: D/latest or D/best.ckpt),\n"
    "                    or Darknet weights of the model file (recognised by content); with\n"
    "                    --features it may be left out: a run's initial parameters\n"
    "  --batch N         images per forward pass (default: the model file's)\n"
    "  --threads N       threads (default: all cores)\n"
    "  --loader-threads N  threads decoding images (default 2)\n"
    "  --precision P     fp32 | bf16 (default: the model file's precision=, else fp32)\n";

int cmd_predict(int argc, char **argv, const cli_env *env) {
    predict_args a = {.loader_threads = 2};
    int help = 0;
    dt_opt flags[] = {
        {"--help", DT_OPT_FLAG, &help, 0, 0, 0},
        {"--weights", DT_OPT_STR, &a.weights, 0, 0, 0},
        {"--list", DT_OPT_STR, &a.list, 0, 0, 0},
        {"--data", DT_OPT_STR, &a.data, 0, 0, 0},
        {"--top", DT_OPT_INT, &a.top, 1, DT_DATA_MAX_CLASSES, 0},
        {"--json", DT_OPT_FLAG, &a.json, 0, 0, 0},
        {"--features", DT_OPT_FLAG, &a.features, 0, 0, 0},
        {"--batch", DT_OPT_INT, &a.batch, 1, 1 << 20, 0},
        {"--threads", DT_OPT_INT, &a.threads, 1, 1024, 0},
        {"--loader-threads", DT_OPT_INT, &a.loader_threads, 1, 256, 0},
        {"--precision", DT_OPT_STR, &a.precision, 0, 0, 0},
    };
    const char **pos = malloc(sizeof *pos * (size_t)(argc > 0 ? argc : 1));
    if (!pos) return cli_report(dt_fail(DT_ERR_NOMEM, "predict: out of memory"), env);
    int npos;
    dt_status s = dt_opts_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), pos, argc, &npos);
    if (s == DT_OK && help) {
        fputs(predict_usage, stdout);
        free(pos);
        return 0;
    }
    if (s == DT_OK && (npos < 1 || (!a.weights && !a.features) || (npos < 2 && !a.list && !a.data)))
        s = dt_fail(DT_ERR_USAGE, "predict: needs MODEL.cfg, --weights CHECKPOINT and images, folders, --list F "
                    "or --data F.data (see dtrain predict --help)");
    if (s == DT_OK) {
        a.model = pos[0], a.inputs = pos + 1, a.ninputs = npos - 1;
        dt_setup_threads(a.threads, env->local_ranks);
        s = predict_run(&a);
    }
    free(pos);
    return cli_report(s, env);
}

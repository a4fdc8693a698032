/* `dtrain predict`'s work (infer.h): the image files of its inputs, each
 * preprocessed as eval preprocesses a folder's (decoded and fitted by the
 * folder code, then the evaluation loader's crop and mean=/std=), through
 * the net, each image's top classes (the softmax of its logits) or
 * features handed to the caller in order. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dtrain/infer.h"
#include "dtrain/mem.h"
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

/* What each batch's logits become: the next images' results. */
typedef struct {
    const dt_predict_args *a;
    const path_list *paths;
    const dt_class_names *names; /* --data's, else the checkpoint's (n 0: none) */
    dt_scored *prob;             /* (classes) one image's softmax, then sorted */
    int probs;                   /* 1: the values handed on are probabilities already (tree=) */
    int top;                     /* classes given per image */
    int at;                      /* images done so far */
    dt_predict_fn fn;
    void *ctx;
} ranker;

/* p = softmax(z) (classes), in double as the loss computes it. */
static void softmax(dt_scored *p, const float *z, int classes) {
    double m = z[0], sum = 0;
    for (int c = 1; c < classes; c++) m = z[c] > m ? z[c] : m;
    for (int c = 0; c < classes; c++) sum += p[c].p = exp((double)z[c] - m), p[c].c = c;
    for (int c = 0; c < classes; c++) p[c].p /= sum;
}

/* Most probable first, ties to the lower class (as eval's argmax takes
 * the first largest logit). */
static int by_probability(const void *x, const void *y) {
    const dt_scored *a = x, *b = y;
    return a->p > b->p ? -1 : a->p < b->p ? 1 : (a->c > b->c) - (a->c < b->c);
}

/* Sorting costs C log C per image: at ImageNet-22K's 21841 classes, far below the forward pass. */
static dt_status take_logits(void *ctx, const float *logits, int n, int classes) {
    ranker *r = ctx;
    int k = r->top < classes ? r->top : classes;
    for (int i = 0; i < n; i++, r->at++) {
        const float *z = logits + (size_t)i * (size_t)classes;
        const char *path = r->paths->p[r->at];
        if (r->a->features) {
            DT_TRY(r->fn(r->ctx, path, NULL, 0, z, classes, r->names));
            continue;
        }
        if (r->probs) /* a tree's leaf probabilities (dt_evaluate), as eval ranks them */
            for (int c = 0; c < classes; c++) r->prob[c].p = z[c], r->prob[c].c = c;
        else
            softmax(r->prob, z, classes);
        qsort(r->prob, (size_t)classes, sizeof *r->prob, by_probability);
        DT_TRY(r->fn(r->ctx, path, r->prob, k, NULL, 0, r->names));
    }
    return DT_OK;
}

/* --data F.data, as Darknet's classifier predict reads it: its names=
 * (else labels=) name the classes, over the checkpoint's, and its top= is
 * --top's default; given no images, its valid= list is predicted (as
 * Darknet's classifier valid goes through it: *list, the caller frees it). */
static dt_status read_data_file(const dt_predict_args *a, dt_class_names *names, int *top, char **list) {
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

/* --data's class names replace the checkpoint's; they must name every output. */
static dt_status use_data_names(dt_class_names *names, dt_class_names *data_names, const dt_predict_args *a,
                                int classes) {
    if (data_names->n != classes)
        return dt_fail(DT_ERR_CONFIG, "%s: classes=%d but the model %s has %d outputs", a->data, data_names->n,
                       a->model, classes);
    dt_class_names_free(names);
    *names = *data_names;
    *data_names = (dt_class_names){0, NULL};
    return DT_OK;
}

/* The images of paths through net, each result to r's fn. */
static dt_status run_images(dt_net *net, const dt_model_spec *spec, const path_list *paths, ranker *r) {
    dt_dataset *ds = NULL;
    double acc, loss;
    dt_status s = dt_dataset_of_files(&ds, (const char *const *)paths->p, paths->n,
                                      dt_data_load_shape(spec, DT_DATASET_FOLDER), spec->eval_resize,
                                      net->classes ? net->classes : 1);
    if (s == DT_OK) s = dt_infer_data(ds, spec, "the images");
    r->probs = net->scores != NULL;
    if (s == DT_OK && !r->a->features)
        s = dt_alloc_bytes((void **)&r->prob, sizeof *r->prob * (size_t)net->classes, "predict");
    if (s == DT_OK)
        s = dt_evaluate(net, ds, &(dt_eval_cfg){.batch = spec->batch, .threads = r->a->loader_threads,
                                                .on_logits = take_logits, .ctx = r}, &acc, &loss);
    dt_free(r->prob);
    r->prob = NULL;
    dt_dataset_free(ds);
    return s;
}

dt_status dt_infer_predict(const dt_predict_args *a, dt_predict_fn fn, void *ctx) {
    dt_model_spec spec;
    DT_TRY(dt_infer_spec(&spec, a->model, a->batch, a->precision, 0));
    path_list paths = {NULL, 0, 0};
    dt_net *net = NULL;
    dt_class_names names = {0, NULL}, data_names = {0, NULL};
    dt_ckpt_meta meta;
    ranker r = {a, &paths, &names, NULL, 0, a->top ? a->top : 5, 0, fn, ctx};
    char *valid = NULL; /* --data's valid= when it gives the images */
    dt_status s = a->data ? read_data_file(a, &data_names, &r.top, &valid) : DT_OK;
    if (s == DT_OK) s = gather(&paths, a->inputs, a->ninputs, valid ? valid : a->list);
    if (s == DT_OK) s = dt_infer_net(&net, &names, &meta, &spec, a->weights, a->features ? 0 : DT_INFER_CLASSES);
    if (s == DT_OK && a->data) s = use_data_names(&names, &data_names, a, net->classes);
    if (s == DT_OK) s = run_images(net, &spec, &paths, &r);
    free(valid);
    dt_class_names_free(&data_names);
    dt_class_names_free(&names);
    dt_net_free(net);
    path_list_free(&paths);
    return s;
}

/* Darknet's data files (data.h): FILE.data read as Darknet's read_data_cfg
 * reads it, its image lists labelled as Darknet's fill_truth labels them,
 * the images read by the folder code. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/internal.h"
#include "dtrain/mem.h"
#include "dtrain/softmax_tree.h"
#include "dtrain/suggest.h"
#include "dtrain/textfile.h"

/* Lists and label files are read whole: ImageNet-22K's 14 M paths of
 * ~60 bytes fit. */
#define LIST_MAX_BYTES ((size_t)4 << 30)

/* The keys Darknet's detector and segmenter read from the same files,
 * which a classifier has no use for. */
static const char *const unused_keys[] = {"eval", "map", "results", "leaves", "test"};

static void darknet_data_zero(dt_darknet_data *d) { *d = (dt_darknet_data){0}; }

void dt_darknet_data_free(dt_darknet_data *d) {
    free(d->path);
    free(d->train);
    free(d->valid);
    free(d->labels);
    free(d->names);
    free(d->backup);
    free(d->tree);
    darknet_data_zero(d);
}

/* Darknet's strip(): every space, tab and newline out of the line; and a
 * '\r' at its end (a file written on Windows), which Darknet would keep in
 * a path and then fail to open it. */
static void strip(char *s) {
    char *w = s;
    for (const char *r = s; *r; r++)
        if (*r != ' ' && *r != '\t' && *r != '\n') *w++ = *r;
    *w = '\0';
    if (w > s && w[-1] == '\r') w[-1] = '\0';
}

/* An integer value in [lo, hi]. */
static dt_status int_value(int *out, const char *v, int lo, int hi, const char *file, int line, const char *key) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return dt_fail(DT_ERR_FORMAT, "%s:%d: %s=%s is not a whole number in [%d, %d]", file, line, key, v, lo, hi);
    *out = (int)x;
    return DT_OK;
}

/* The keys read, in this order: two numbers, then the paths (slot order
 * in take_option). */
static const char *const keys[] = {"classes", "top", "train", "valid", "labels", "names", "backup", "tree"};
enum { NKEYS = sizeof keys / sizeof *keys };

/* One key=value line (stripped) into d; seen[k] the line key k was on. */
static dt_status take_option(dt_darknet_data *d, char *s, const char *file, int line, int seen[NKEYS]) {
    char *eq = strchr(s, '=');
    if (!eq) return dt_fail(DT_ERR_FORMAT, "%s:%d: '%s' is not key=value", file, line, s);
    *eq = '\0';
    const char *v = eq + 1;
    if (!*v) return dt_fail(DT_ERR_FORMAT, "%s:%d: %s= has no value", file, line, s);
    for (size_t i = 0; i < sizeof unused_keys / sizeof *unused_keys; i++)
        if (strcmp(s, unused_keys[i]) == 0) return DT_OK;
    if (strcmp(s, "tag") == 0)
        return strcmp(v, "0") == 0 ? DT_OK
                                   : dt_fail(DT_ERR_FORMAT, "%s:%d: tag=%s (labels read from tag files) is not "
                                             "supported; labels= finds each image's label in its path", file, line, v);
    int k = 0;
    while (k < NKEYS && strcmp(s, keys[k]) != 0) k++;
    if (k == NKEYS) {
        dt_suggest sg;
        char hint[128];
        dt_suggest_init(&sg, s);
        for (int i = 0; i < NKEYS; i++) dt_suggest_offer(&sg, keys[i]);
        return dt_fail(DT_ERR_FORMAT, "%s:%d: unknown key '%s'%s (Darknet's classifier reads classes, train, valid, "
                       "labels, names, backup, top, tree)", file, line, s, dt_suggest_text(&sg, hint, sizeof hint));
    }
    if (seen[k])
        return dt_fail(DT_ERR_FORMAT, "%s:%d: %s= given twice (also on line %d)", file, line, s, seen[k]);
    seen[k] = line;
    if (k == 0) return int_value(&d->classes, v, 1, DT_DATA_MAX_CLASSES, file, line, s);
    if (k == 1) return int_value(&d->top, v, 1, DT_DATA_MAX_CLASSES, file, line, s);
    char **slot[] = {&d->train, &d->valid, &d->labels, &d->names, &d->backup, &d->tree};
    _Static_assert(sizeof slot / sizeof *slot == NKEYS - 2, "a slot for every path key");
    if (!(*slot[k - 2] = strdup(v))) return dt_fail(DT_ERR_NOMEM, "%s: out of memory", file);
    return DT_OK;
}

dt_status dt_darknet_data_read(dt_darknet_data *d, const char *path) {
    darknet_data_zero(d);
    char *text;
    DT_TRY(dt_read_text_file(&text, path, (size_t)1 << 20, DT_ERR_FORMAT, "a Darknet data file"));
    int seen[NKEYS] = {0};
    dt_status s = (d->path = strdup(path)) ? DT_OK : dt_fail(DT_ERR_NOMEM, "%s: out of memory", path);
    int line = 0;
    for (char *at = text, *next; s == DT_OK && at; at = next) {
        next = strchr(at, '\n');
        if (next) *next++ = '\0';
        line++;
        strip(at);
        if (*at && *at != '#' && *at != ';') s = take_option(d, at, path, line, seen);
    }
    free(text);
    if (s == DT_OK && !seen[0]) s = dt_fail(DT_ERR_FORMAT, "%s: no classes= (the number of classes)", path);
    if (s != DT_OK) dt_darknet_data_free(d);
    return s;
}

/* The non-blank lines of file, in place in *text (malloc'd, as the lines
 * point into it): *lines (n) and each one's line number in *at (n). A
 * trailing '\r' is dropped; nothing else (Darknet keeps the line as it is). */
typedef struct {
    char *text;
    char **line; /* (n) */
    int *at;     /* (n) line numbers */
    int n;
} line_list;

static void line_list_free(line_list *l) {
    free(l->text);
    dt_free(l->line);
    dt_free(l->at);
    *l = (line_list){NULL, NULL, NULL, 0};
}

static dt_status read_lines(line_list *l, const char *file, const char *key, const char *data) {
    *l = (line_list){NULL, NULL, NULL, 0};
    struct stat st;
    if (stat(file, &st) != 0)
        return dt_fail(DT_ERR_IO, "%s: %s= %s: %s", data, key, file, strerror(errno));
    DT_TRY(dt_read_text_file(&l->text, file, LIST_MAX_BYTES, DT_ERR_FORMAT, "a list"));
    size_t lines = 1;
    for (const char *c = l->text; *c; c++) lines += *c == '\n';
    dt_status s = lines > DT_DATA_MAX_SAMPLES ? dt_fail(DT_ERR_FORMAT, "%s: more than %d lines", file,
                                                        DT_DATA_MAX_SAMPLES) : DT_OK;
    if (s == DT_OK) s = dt_alloc_bytes((void **)&l->line, lines * sizeof *l->line, "list lines");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&l->at, lines * sizeof *l->at, "list lines");
    int no = 0;
    for (char *c = l->text, *next; s == DT_OK && c; c = next) {
        next = strchr(c, '\n');
        if (next) *next++ = '\0';
        no++;
        size_t len = strlen(c);
        if (len && c[len - 1] == '\r') c[--len] = '\0';
        if (!len) continue;
        l->line[l->n] = c;
        l->at[l->n++] = no;
    }
    if (s == DT_OK && l->n == 0) s = dt_fail(DT_ERR_FORMAT, "%s: empty (%s= of %s: one entry a line)", file, key, data);
    if (s != DT_OK) line_list_free(l);
    return s;
}

/* Lines to class names, classes= of them (key: the file's key in d). */
static dt_status names_of(dt_class_names *out, const line_list *l, const dt_darknet_data *d, const char *key,
                          const char *file) {
    if (l->n != d->classes)
        return dt_fail(DT_ERR_FORMAT, "%s: classes=%d but %s= %s has %d line%s", d->path, d->classes, key, file, l->n,
                       l->n == 1 ? "" : "s");
    return dt_class_names_copy(out, &(dt_class_names){l->n, l->line});
}

dt_status dt_darknet_class_names(dt_class_names *out, const dt_darknet_data *d) {
    *out = (dt_class_names){0, NULL};
    const char *key = d->names ? "names" : "labels", *file = d->names ? d->names : d->labels;
    if (!file) return dt_fail(DT_ERR_FORMAT, "%s: neither names= nor labels= (the class names)", d->path);
    line_list l;
    DT_TRY(read_lines(&l, file, key, d->path));
    dt_status s = names_of(out, &l, d, key, file);
    line_list_free(&l);
    return s;
}

/* Darknet's fill_truth: the labels found in path (strstr); exactly one. */
static dt_status label_of(dt_label *y, const char *path, const line_list *labels, const char *list, int line,
                          const char *labels_file) {
    int found = -1;
    for (int i = 0; i < labels->n; i++) {
        if (!strstr(path, labels->line[i])) continue;
        if (found >= 0)
            return dt_fail(DT_ERR_FORMAT, "%s:%d: %s: labels '%s' and '%s' of %s are both in the path (Darknet finds "
                           "an image's one label in its path)", list, line, path, labels->line[found], labels->line[i],
                           labels_file);
        found = i;
    }
    if (found < 0)
        return dt_fail(DT_ERR_FORMAT, "%s:%d: %s: none of the %d labels of %s is in the path", list, line, path,
                       labels->n, labels_file);
    *y = (dt_label)found;
    return DT_OK;
}

/* labels= read and checked: classes= of them, none empty (every path
 * would hold it) or repeated (no path could hold one only). */
static dt_status read_labels(line_list *l, const dt_darknet_data *d) {
    if (!d->labels) return dt_fail(DT_ERR_FORMAT, "%s: no labels= (the label strings found in image paths)", d->path);
    DT_TRY(read_lines(l, d->labels, "labels", d->path));
    dt_status s = DT_OK;
    if (l->n != d->classes)
        s = dt_fail(DT_ERR_FORMAT, "%s: classes=%d but labels= %s has %d label%s", d->path, d->classes, d->labels,
                    l->n, l->n == 1 ? "" : "s");
    const char *dup = NULL;
    if (s == DT_OK) s = dt_class_names_repeated(&(dt_class_names){l->n, l->line}, &dup);
    if (s == DT_OK && dup) s = dt_fail(DT_ERR_FORMAT, "%s: label '%s' given twice", d->labels, dup);
    if (s != DT_OK) line_list_free(l);
    return s;
}

/* tree=: Darknet's classifier takes an image's label index (its line in
 * labels=) as its node in the tree (fill_hierarchy), so the simple case is
 * taken: labels= names the tree's nodes in the tree's order. */
static dt_status check_tree_labels(const line_list *l, const dt_darknet_data *d) {
    dt_softmax_tree *t;
    DT_TRY(dt_softmax_tree_read(&t, d->tree));
    dt_status s = DT_OK;
    if (t->n != l->n)
        s = dt_fail(DT_ERR_FORMAT, "%s: tree= %s has %d nodes but labels= %s %d lines: each label must be a node",
                    d->path, d->tree, t->n, d->labels, l->n);
    for (int i = 0; s == DT_OK && i < l->n; i++)
        if (strcmp(t->name[i], l->line[i]) != 0)
            s = dt_fail(DT_ERR_FORMAT, "%s: labels= %s line %d is '%s' but tree= %s node %d is '%s': dtrain takes "
                        "the labels in the tree's order only", d->path, d->labels, l->at[i], l->line[i], d->tree, i,
                        t->name[i]);
    dt_softmax_tree_free(t);
    return s;
}

dt_status dt_dataset_load_darknet(dt_dataset **out, const dt_darknet_data *d, int train, dt_shape shape,
                                  const dt_folder_opts *o) {
    *out = NULL;
    const char *key = train ? "train" : "valid", *list = train ? d->train : d->valid;
    if (!list)
        return dt_fail(DT_ERR_FORMAT, "%s: no %s= (the list of %s images)", d->path, key, train ? "training" : "test");
    line_list labels, paths = {NULL, NULL, NULL, 0};
    dt_class_names names = {0, NULL};
    dt_label *y = NULL;
    DT_TRY(read_labels(&labels, d));
    dt_status s = d->tree ? check_tree_labels(&labels, d) : DT_OK;
    if (s == DT_OK) s = read_lines(&paths, list, key, d->path);
    if (s == DT_OK) s = dt_alloc_bytes((void **)&y, sizeof *y * (size_t)paths.n, "labels");
    for (int i = 0; s == DT_OK && i < paths.n; i++) {
        s = label_of(&y[i], paths.line[i], &labels, list, paths.at[i], d->labels);
        struct stat st;
        /* A missing image named with its line here; one that does not
         * decode is named (by its path) when it is decoded. */
        if (s == DT_OK && !(o && o->skip_bad) && stat(paths.line[i], &st) != 0)
            s = dt_fail(DT_ERR_IO, "%s:%d: %s: %s", list, paths.at[i], paths.line[i], strerror(errno));
    }
    if (s == DT_OK) s = dt_darknet_class_names(&names, d);
    dt_folder_opts defaults = {.threads = 1, .cache_bytes = dt_folder_default_cache(1)};
    if (s == DT_OK)
        s = dt_data_list_dataset(out, (const char *const *)paths.line, y, paths.n, shape, &names, o ? o : &defaults);
    if (s == DT_OK && (*out)->n == 0) { /* every image skipped (--skip-bad-images) */
        s = dt_fail(DT_ERR_FORMAT, "%s: no readable images (%d skipped; the first: %s)", list, (*out)->skipped,
                    (*out)->skipped_first ? (*out)->skipped_first : "?");
        dt_dataset_free(*out);
        *out = NULL;
    }
    dt_class_names_free(&names);
    dt_free(y);
    line_list_free(&paths);
    line_list_free(&labels);
    return s;
}

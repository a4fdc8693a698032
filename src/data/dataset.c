/* Dataset kinds, dispatch, allocation and the shared gz reading helpers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/internal.h"
#include "dtrain/mem.h"

static const char *const kind_names[] = {"fashion-mnist", "mnist", "cifar10", "synthetic", "folder", "darknet",
                                           "arrays"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == DT_DATASET_KIND_COUNT, "a name for every kind");

int dt_dataset_kind_from_name(const char *name) {
    for (int k = 0; k < (int)(sizeof kind_names / sizeof kind_names[0]); k++)
        if (strcmp(name, kind_names[k]) == 0) return k;
    return -1;
}

const char *dt_dataset_kind_name(dt_dataset_kind kind) {
    if ((int)kind < 0 || (int)kind >= (int)(sizeof kind_names / sizeof kind_names[0]))
        return "unknown";
    return kind_names[kind];
}

int dt_dataset_kind_decodes(dt_dataset_kind kind) {
    return kind == DT_DATASET_FOLDER || kind == DT_DATASET_DARKNET;
}

const char *dt_dataset_default_dir(dt_dataset_kind kind) {
    switch (kind) {
    case DT_DATASET_FASHION_MNIST: return "/usr/share/datasets/fashion-mnist";
    case DT_DATASET_MNIST: return "/usr/share/datasets/mnist";
    case DT_DATASET_CIFAR10: return "/usr/share/datasets/cifar-10-batches-bin";
    case DT_DATASET_SYNTHETIC:
    case DT_DATASET_FOLDER:
    case DT_DATASET_DARKNET:
    case DT_DATASET_ARRAYS:
    case DT_DATASET_KIND_COUNT: return "";
    }
    return "";
}

dt_status dt_data_open(int *fd, const char *path) {
    /* O_NONBLOCK: a FIFO named like a data file must not hang the open (the
     * readers then refuse what is not a regular file, or fail reading it);
     * it changes nothing for regular files. */
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (*fd < 0) return dt_fail(DT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    return DT_OK;
}

dt_status dt_data_gz(gzFile *f, int fd, const char *name) {
    int own = dup(fd);
    if (own < 0) return dt_fail(DT_ERR_IO, "cannot read %s: %s", name, strerror(errno));
    *f = gzdopen(own, "rb");
    if (!*f) {
        close(own);
        return dt_fail(DT_ERR_NOMEM, "cannot read %s: out of memory", name);
    }
    return DT_OK;
}

/* Grows b so that it can hold at least need bytes (doubling, capped at max). */
static dt_status buf_reserve(dt_data_buf *b, size_t need, size_t max, const char *path) {
    if (need <= b->cap) return DT_OK;
    size_t cap = b->cap ? b->cap : (size_t)1 << 16; /* small files pay little; big ones double */
    while (cap < need) cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
    if (cap > max) cap = max;
    void *p;
    DT_TRY(dt_alloc_bytes(&p, cap, path));
    if (b->len) memcpy(p, b->p, b->len);
    dt_free(b->p);
    b->p = p;
    b->cap = cap;
    return DT_OK;
}

dt_status dt_data_read(dt_data_buf *b, gzFile f, size_t max, const char *path) {
    while (b->len < max) {
        DT_TRY(buf_reserve(b, b->len + 1, max, path));
        size_t want = (b->cap < max ? b->cap : max) - b->len;
        if (want > INT_MAX / 2) want = INT_MAX / 2; /* gzread takes an unsigned, returns int */
        int got = gzread(f, b->p + b->len, (unsigned)want);
        if (got == 0) return DT_OK;
        if (got < 0) {
            int err;
            const char *msg = gzerror(f, &err);
            if (err == Z_BUF_ERROR) return DT_OK; /* gzip stream cut short: truncation */
            return dt_fail(DT_ERR_IO, "%s: read error: %s", path,
                           err == Z_ERRNO ? strerror(errno) : msg);
        }
        b->len += (size_t)got;
    }
    return DT_OK;
}

int dt_data_more(gzFile f) {
    uint8_t byte;
    return gzread(f, &byte, 1) > 0;
}

void dt_data_buf_free(dt_data_buf *b) {
    dt_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

dt_status dt_data_new_labels(dt_dataset **out, int n, dt_shape shape, int classes) {
    *out = NULL;
    void *p;
    DT_TRY(dt_alloc_bytes(&p, sizeof(dt_dataset), "dataset"));
    dt_dataset *ds = p;
    ds->n = n;
    ds->shape = shape;
    ds->classes = classes;
    for (int c = 0; c < DT_DATA_MAX_CHANNELS; c++) ds->mean[c] = 0.0f, ds->std[c] = 1.0f;
    dt_status s = dt_alloc_bytes(&p, (size_t)n * sizeof(dt_label), "dataset labels");
    if (s != DT_OK) {
        dt_dataset_free(ds);
        return s;
    }
    ds->labels = p;
    *out = ds;
    return DT_OK;
}

dt_status dt_data_new(dt_dataset **out, int n, dt_shape shape, int classes) {
    DT_TRY(dt_data_new_labels(out, n, shape, classes));
    void *p;
    size_t bytes;
    dt_status s = dt_mul_size(&bytes, (size_t)n, dt_shape_size(shape), "dataset images");
    if (s == DT_OK) s = dt_alloc_bytes(&p, bytes, "dataset images");
    if (s != DT_OK) {
        dt_dataset_free(*out);
        *out = NULL;
        return s;
    }
    (*out)->images = p;
    return DT_OK;
}

dt_status dt_data_buf_fit(dt_data_buf *b, const char *what) {
    if (b->len == b->cap || b->len == 0) return DT_OK;
    void *p;
    DT_TRY(dt_alloc_bytes(&p, b->len, what));
    memcpy(p, b->p, b->len);
    dt_free(b->p);
    b->p = p;
    b->cap = b->len;
    return DT_OK;
}

dt_status dt_data_buf_put(dt_data_buf *b, const void *bytes, size_t n, const char *what) {
    if (n > SIZE_MAX - b->len) return dt_fail(DT_ERR_NOMEM, "%s: size overflows", what);
    DT_TRY(buf_reserve(b, b->len + n, SIZE_MAX, what));
    memcpy(b->p + b->len, bytes, n);
    b->len += n;
    return DT_OK;
}

int dt_data_shape_ok(dt_shape s) {
    return s.c >= 1 && s.c <= DT_DATA_MAX_CHANNELS && s.h >= 1 && s.h <= DT_DATA_MAX_DIM &&
           s.w >= 1 && s.w <= DT_DATA_MAX_DIM;
}

static dt_status label_out_of_range(const char *path, long label, size_t i, int classes) {
    return dt_fail(DT_ERR_FORMAT, "%s: label %ld at index %zu is out of range (must be 0..%d)", path, label, i,
                   classes - 1);
}

dt_status dt_data_check_label_bytes(const uint8_t *bytes, size_t n, size_t stride, int classes, const char *path) {
    for (size_t i = 0; i < n; i++)
        if (bytes[i * stride] >= classes) return label_out_of_range(path, bytes[i * stride], i, classes);
    return DT_OK;
}

dt_status dt_data_check_labels(const dt_label *labels, size_t n, int classes, const char *path) {
    for (size_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= classes) return label_out_of_range(path, labels[i], i, classes);
    return DT_OK;
}

void dt_dataset_free(dt_dataset *ds) {
    if (!ds) return;
    if (ds->fetch_free) ds->fetch_free(ds->fetch_ctx);
    dt_class_names_free(&ds->class_names);
    dt_free(ds->skipped_first);
    dt_free(ds->ignored_first);
    if (!ds->borrowed) {
        dt_free(ds->images);
        dt_free(ds->labels);
    }
    dt_free(ds);
}

dt_status dt_class_names_copy(dt_class_names *dst, const dt_class_names *src) {
    *dst = (dt_class_names){0, NULL};
    if (src->n <= 0) return DT_OK;
    void *p;
    DT_TRY(dt_alloc_bytes(&p, sizeof(char *) * (size_t)src->n, "class names"));
    dst->names = p;
    for (; dst->n < src->n; dst->n++) {
        size_t len = strlen(src->names[dst->n]) + 1;
        dt_status s = dt_alloc_bytes(&p, len, "class names");
        if (s != DT_OK) {
            dt_class_names_free(dst);
            return s;
        }
        memcpy(p, src->names[dst->n], len);
        dst->names[dst->n] = p;
    }
    return DT_OK;
}

static int by_string(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

dt_status dt_class_names_repeated(const dt_class_names *c, const char **dup) {
    *dup = NULL;
    if (c->n < 2) return DT_OK;
    const char **sorted; /* (n) views of c's names */
    DT_TRY(dt_alloc_bytes((void **)&sorted, sizeof *sorted * (size_t)c->n, "class names"));
    for (int i = 0; i < c->n; i++) sorted[i] = c->names[i];
    qsort(sorted, (size_t)c->n, sizeof *sorted, by_string);
    for (int i = 1; i < c->n && !*dup; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) *dup = sorted[i];
    dt_free(sorted);
    return DT_OK;
}

void dt_class_names_free(dt_class_names *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) dt_free(c->names[i]);
    dt_free(c->names);
    *c = (dt_class_names){0, NULL};
}

/* path = dir/name.gz if that exists, else dir/name; DT_ERR_IO if neither. */
static dt_status find_idx(char *path, size_t cap, const char *dir, const char *name) {
    if ((size_t)snprintf(path, cap, "%s/%s.gz", dir, name) >= cap)
        return dt_fail(DT_ERR_IO, "cannot open %s/%s: path too long", dir, name);
    if (access(path, F_OK) == 0) return DT_OK;
    snprintf(path, cap, "%s/%s", dir, name);
    if (access(path, F_OK) == 0) return DT_OK;
    return dt_fail(DT_ERR_IO, "cannot open %s/%s(.gz): no such file", dir, name);
}

/* dir/train or dir/test with fo (NULL: the defaults of data.h). */
static dt_status load_folder_split(dt_dataset **out, const char *dir, int train, dt_shape shape,
                                   const dt_folder_opts *fo) {
    if (!*dir)
        return dt_fail(DT_ERR_USAGE, "a folder dataset needs its directory (--data-dir D, holding D/train/<class>/ "
                       "and D/test/<class>/)");
    char split[4096];
    int held_out = fo && fo->val_split > 0;
    if ((size_t)snprintf(split, sizeof split, "%s/test", dir) >= sizeof split)
        return dt_fail(DT_ERR_IO, "%s: path too long", dir);
    if (held_out && access(split, F_OK) == 0)
        return dt_fail(DT_ERR_USAGE, "--val-split: %s exists; --val-split holds out part of DIR/train for a folder "
                       "without a test split (remove one of them)", split);
    snprintf(split, sizeof split, "%s/%s", dir, train || held_out ? "train" : "test");
    dt_folder_opts defaults = {.threads = 1, .cache_bytes = dt_folder_default_cache(1)};
    if (!held_out) return dt_dataset_load_folder(out, split, shape, fo ? fo : &defaults);
    dt_folder_opts part = *fo;
    part.val_split = train ? -fo->val_split : fo->val_split; /* < 0: the rest (folder.c) */
    return dt_dataset_load_folder(out, split, shape, &part);
}

dt_status dt_dataset_load(dt_dataset **out, dt_dataset_kind kind, const char *dir, int train,
                          dt_shape shape, int classes, uint64_t seed, const dt_folder_opts *fo) {
    *out = NULL;
    if (!dir || !*dir) dir = dt_dataset_default_dir(kind);
    switch (kind) {
    case DT_DATASET_FASHION_MNIST:
    case DT_DATASET_MNIST: {
        char images[4096], labels[4096];
        const char *prefix = train ? "train" : "t10k";
        char name[64];
        snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
        DT_TRY(find_idx(images, sizeof images, dir, name));
        snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
        DT_TRY(find_idx(labels, sizeof labels, dir, name));
        return dt_dataset_load_idx(out, images, labels);
    }
    case DT_DATASET_CIFAR10: return dt_dataset_load_cifar10(out, dir, train);
    case DT_DATASET_SYNTHETIC:
        return dt_data_synthetic(out, shape, classes ? classes : 10, train ? 60000 : 10000, seed, train ? 0 : 1,
                                 DT_SYNTHETIC_HELD_BYTES);
    case DT_DATASET_FOLDER: return load_folder_split(out, dir, train, shape, fo);
    case DT_DATASET_DARKNET: {
        dt_darknet_data d;
        DT_TRY(dt_darknet_data_read(&d, dir));
        dt_status s = classes > 0 && d.classes != classes
                          ? dt_fail(DT_ERR_CONFIG, "%s: classes=%d but the model has %d outputs", dir, d.classes, classes)
                          : dt_dataset_load_darknet(out, &d, train, shape, fo);
        dt_darknet_data_free(&d);
        return s;
    }
    case DT_DATASET_ARRAYS:
        return dt_fail(DT_ERR_USAGE, "dataset arrays: arrays are given through the library's job API (dtrain.h, "
                       "the Python package), not loaded from %s", dir);
    case DT_DATASET_KIND_COUNT: break;
    }
    return dt_fail(DT_ERR_USAGE, "unknown dataset kind %d", (int)kind);
}

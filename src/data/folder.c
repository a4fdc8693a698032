/* Folder datasets (data.h): DIR/<class>/<image> trees scanned in a fixed
 * order, every file decoded once at load by a thread pool, and held in
 * memory or decoded again per sample through the dataset's fetch
 * callback. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/internal.h"
#include "dtrain/image.h"
#include "dtrain/mem.h"
#include "dtrain/pool.h"
#include "dtrain/rng.h"
#include "dtrain/timer.h"

/* The files of a split in sample order: by class folder, then file name. */
typedef struct {
    /* The split's folder, then every file's path relative to it
     * ("class/file.jpg"), each NUL-terminated, back to back: at ImageNet's
     * 1.28 M files the folder is not repeated in each (bytes per file:
     * docs/IMAGES.md). */
    dt_data_buf paths;
    dt_data_buf at;     /* (n) size_t: where file i's relative path starts in paths */
    dt_data_buf labels; /* (n) dt_label */
    int n;
} file_list;

enum { PATH_CAP = 4096 }; /* every path was joined into this much at the scan */

/* File i's whole path, in buf (PATH_CAP bytes). An empty folder: the
 * files' paths are whole (dt_dataset_of_files). */
static const char *file_path(const file_list *f, int i, char *buf) {
    const char *dir = (const char *)f->paths.p;
    const char *rel = dir + ((const size_t *)(const void *)f->at.p)[i];
    snprintf(buf, PATH_CAP, "%s%s%s", dir, *dir ? "/" : "", rel);
    return buf;
}

static dt_label *file_labels(const file_list *f) { return (dt_label *)(void *)f->labels.p; }

static void file_list_free(file_list *f) {
    dt_data_buf_free(&f->paths);
    dt_data_buf_free(&f->at);
    dt_data_buf_free(&f->labels);
    f->n = 0;
}

static dt_status file_list_fit(file_list *f) {
    DT_TRY(dt_data_buf_fit(&f->paths, "image file list"));
    DT_TRY(dt_data_buf_fit(&f->at, "image file list"));
    return dt_data_buf_fit(&f->labels, "image file list");
}

/* path is dir (the split's folder, the list's first entry), '/', then the
 * file's path inside it; or dir is "" and path is whole. */
static dt_status file_list_add(file_list *f, const char *dir, const char *path, int label) {
    if (f->n >= DT_DATA_MAX_SAMPLES)
        return dt_fail(DT_ERR_FORMAT, "%s: more than %d images in the data set", path, DT_DATA_MAX_SAMPLES);
    if (f->paths.len == 0) DT_TRY(dt_data_buf_put(&f->paths, dir, strlen(dir) + 1, "image file list"));
    size_t off = f->paths.len;
    dt_label y = (dt_label)label;
    const char *rel = path + (*dir ? strlen(dir) + 1 : 0);
    DT_TRY(dt_data_buf_put(&f->paths, rel, strlen(rel) + 1, "image file list"));
    DT_TRY(dt_data_buf_put(&f->at, &off, sizeof off, "image file list"));
    DT_TRY(dt_data_buf_put(&f->labels, &y, sizeof y, "image file list"));
    f->n++;
    return DT_OK;
}

size_t dt_folder_default_cache(int ranks) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return (size_t)1 << 30; /* unknown: 1 GiB */
    return (size_t)pages * (size_t)page / 4 / (size_t)(ranks > 0 ? ranks : 1);
}

/* ---- scanning ---------------------------------------------------------------- */

typedef struct {
    const char *dir;
    const dt_folder_opts *o;
    file_list files;
    dt_class_names names;                   /* the dataset's classes (label = index) */
    uint8_t *present;                       /* (labels) 1: the class has a folder here */
    int skipped;
    char *first_skip;                       /* the first skipped file's error */
    int ignored;                            /* files not of an image extension */
    char *first_ignored;                    /* the first one's path */
} scan;

/* A folder's entries not starting with '.', sorted bytewise (not by
 * locale: every machine must see one order). The names live in one buffer
 * and one array points into it: a class folder of ImageNet's 1300 files
 * costs three allocations, not one per file as scandir's. */
typedef struct {
    dt_data_buf text; /* the names, NUL-terminated, back to back */
    char **sorted;    /* (n) views into text, sorted */
    int n;
} name_list;

static void free_list(name_list *l) {
    dt_data_buf_free(&l->text);
    dt_free(l->sorted);
    *l = (name_list){{0}, NULL, 0};
}

static int bytewise(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Reads dir's visible names into l->text (l->n of them). */
static dt_status read_names(name_list *l, DIR *d, const char *dir) {
    for (;;) {
        errno = 0;
        const struct dirent *e = readdir(d);
        if (!e) return errno ? dt_fail(DT_ERR_IO, "%s: cannot list the folder: %s", dir, strerror(errno)) : DT_OK;
        if (e->d_name[0] == '.') continue;
        if (l->n >= DT_DATA_MAX_SAMPLES)
            return dt_fail(DT_ERR_FORMAT, "%s: more than %d entries in the folder", dir, DT_DATA_MAX_SAMPLES);
        DT_TRY(dt_data_buf_put(&l->text, e->d_name, strlen(e->d_name) + 1, "folder listing"));
        l->n++;
    }
}

static dt_status list_dir(name_list *l, const char *dir) {
    *l = (name_list){{0}, NULL, 0};
    DIR *d = opendir(dir);
    if (!d && errno == ENOENT) return dt_fail(DT_ERR_IO, "%s: no such folder", dir);
    if (!d) return dt_fail(DT_ERR_IO, "%s: cannot list the folder: %s", dir, strerror(errno));
    dt_status s = read_names(l, d, dir);
    if (closedir(d) != 0 && s == DT_OK) s = dt_fail(DT_ERR_IO, "%s: cannot close the folder: %s", dir, strerror(errno));
    if (s == DT_OK) s = dt_alloc_bytes((void **)&l->sorted, sizeof *l->sorted * (size_t)(l->n ? l->n : 1), "folder listing");
    for (size_t at = 0, i = 0; s == DT_OK && i < (size_t)l->n; i++) {
        l->sorted[i] = (char *)l->text.p + at;
        at += strlen(l->sorted[i]) + 1;
    }
    if (s == DT_OK) qsort(l->sorted, (size_t)l->n, sizeof *l->sorted, bytewise);
    if (s != DT_OK) free_list(l);
    return s;
}

static dt_status join(char *buf, size_t cap, const char *a, const char *b) {
    if ((size_t)snprintf(buf, cap, "%s/%s", a, b) >= cap) return dt_fail(DT_ERR_IO, "%s/%s: path too long", a, b);
    return DT_OK;
}

/* The extensions dt_image_load decodes (by content; the name only chooses
 * which files are images, as torchvision's ImageFolder does). */
static const char *const image_exts[] = {".jpg", ".jpeg", ".png"};

int dt_folder_is_image_name(const char *name) {
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof image_exts / sizeof *image_exts; i++)
        if (strcasecmp(dot, image_exts[i]) == 0) return 1;
    return 0;
}

/* A file that is no image by its name (README, Thumbs.db): counted, the
 * first one's path kept for the report. */
static dt_status ignore_file(scan *sc, const char *path) {
    if (sc->ignored++) return DT_OK;
    size_t len = strlen(path) + 1;
    void *p;
    DT_TRY(dt_alloc_bytes(&p, len, "ignored file note"));
    memcpy(p, path, len);
    sc->first_ignored = p;
    return DT_OK;
}

/* With skip_bad, a bad file s (its message recorded) is counted instead. */
static dt_status skip_or_fail(scan *sc, dt_status s) {
    if (!sc->o->skip_bad || (s != DT_ERR_FORMAT && s != DT_ERR_IO)) return s;
    sc->skipped++;
    if (sc->first_skip) return DT_OK;
    size_t len = strlen(dt_last_error()) + 1;
    void *p;
    DT_TRY(dt_alloc_bytes(&p, len, "skipped file note"));
    memcpy(p, dt_last_error(), len);
    sc->first_skip = p;
    return DT_OK;
}

/* The image files of one class folder, added with this label. */
static dt_status scan_class(scan *sc, const char *class_dir, int label) {
    name_list names;
    DT_TRY(list_dir(&names, class_dir));
    const int n = names.n;
    dt_status s = DT_OK;
    int images = 0;
    for (int i = 0; s == DT_OK && i < n; i++) {
        char path[PATH_CAP];
        s = join(path, sizeof path, class_dir, names.sorted[i]);
        if (s == DT_OK && dt_folder_is_image_name(names.sorted[i])) {
            s = file_list_add(&sc->files, sc->dir, path, label);
            images++;
            continue;
        }
        struct stat st;
        if (s == DT_OK && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            s = skip_or_fail(sc, dt_fail(DT_ERR_FORMAT, "%s: a folder inside a class folder (class folders hold "
                                         "image files)", path));
        else if (s == DT_OK)
            s = ignore_file(sc, path);
    }
    if (s == DT_OK && images == 0)
        s = dt_fail(DT_ERR_FORMAT, "%s: no images in this class folder (dtrain reads .jpg, .jpeg and .png files)",
                    class_dir);
    free_list(&names);
    return s;
}

/* A class name and its label: o->classes sorted by name, so that each of a
 * split's folders finds its label by binary search (a test split of
 * ImageNet-22K's 21841 folders against the train set's names: C log C
 * comparisons, not C^2 / 2). */
typedef struct {
    const char *name;
    int label;
} named;

static int by_name(const void *a, const void *b) {
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

static dt_status sort_names(named **out, const dt_class_names *c) {
    *out = NULL;
    if (!c) return DT_OK;
    DT_TRY(dt_alloc_bytes((void **)out, sizeof **out * (size_t)(c->n ? c->n : 1), "class names"));
    for (int i = 0; i < c->n; i++) (*out)[i] = (named){c->names[i], i};
    qsort(*out, (size_t)c->n, sizeof **out, by_name);
    return DT_OK;
}

/* name's label in sorted (n), -1 if absent. */
static int find_label(const named *sorted, int n, const char *name) {
    const named key = {name, 0}, *hit = bsearch(&key, sorted, (size_t)n, sizeof key, by_name);
    return hit ? hit->label : -1;
}

/* The class folders of sc->dir and their files; sc->names set. */
static dt_status scan_split(scan *sc) {
    const char *dir = sc->dir;
    const dt_folder_opts *o = sc->o;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return dt_fail(DT_ERR_IO, "%s: no such folder (a folder data set is DIR/train/<class>/ and "
                       "DIR/test/<class>/ holding .jpg, .jpeg or .png images)", dir);
    name_list names;
    DT_TRY(list_dir(&names, dir));
    const int n = names.n;
    /* own: (n) views of the class folders' names, for the copy below;
     * present: (labels) as the scan struct says. */
    char **own = NULL;
    named *sorted = NULL; /* (o->classes->n) when o->classes */
    int nclasses = 0, labels = o->classes && o->classes->n > n ? o->classes->n : n;
    dt_status s = dt_alloc_bytes((void **)&own, sizeof *own * (size_t)(n ? n : 1), "class folder list");
    if (s == DT_OK) s = sort_names(&sorted, o->classes);
    if (s == DT_OK) s = dt_alloc_bytes((void **)&sc->present, (size_t)(labels ? labels : 1), "class folder list");
    if (s == DT_OK) memset(sc->present, 0, (size_t)(labels ? labels : 1));
    for (int i = 0; s == DT_OK && i < n; i++) {
        char path[PATH_CAP];
        const char *name = names.sorted[i];
        s = join(path, sizeof path, dir, name);
        if (s != DT_OK) break;
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) { /* a README beside the class folders */
            s = ignore_file(sc, path);
            continue;
        }
        if (nclasses == DT_DATA_MAX_CLASSES) {
            s = dt_fail(DT_ERR_FORMAT, "%s: more than %d class folders, dtrain trains at most %d classes", dir,
                        DT_DATA_MAX_CLASSES, DT_DATA_MAX_CLASSES);
            break;
        }
        own[nclasses] = names.sorted[i];
        int label = o->classes ? find_label(sorted, o->classes->n, name) : nclasses;
        nclasses++;
        if (s == DT_OK && label < 0)
            s = dt_fail(DT_ERR_FORMAT, "%s: class '%s' is not one of the %d classes of %s", path, name,
                        o->classes->n, o->classes_from ? o->classes_from : "the model");
        if (s == DT_OK) {
            sc->present[label] = 1;
            s = scan_class(sc, path, label);
        }
    }
    if (s == DT_OK && nclasses == 0)
        s = dt_fail(DT_ERR_FORMAT, "%s: no class folders in it (one folder of images per class)", dir);
    for (int i = 0; s == DT_OK && o->classes && o->all_classes && i < o->classes->n; i++)
        if (!sc->present[i])
            s = dt_fail(DT_ERR_FORMAT, "%s: no folder for class '%s', which %s has", dir, o->classes->names[i],
                        o->classes_from ? o->classes_from : "the model");
    if (s == DT_OK) s = dt_class_names_copy(&sc->names, o->classes ? o->classes : &(dt_class_names){nclasses, own});
    dt_free(own);
    dt_free(sorted);
    free_list(&names);
    return s;
}

/* ---- held-out share (--val-split) ------------------------------------------------ */

/* Of each class's m files (sorted), k = round(share x m) in [1, m - 1]
 * drawn by a partial Fisher-Yates shuffle from the seed and the class, so
 * the train and test loads (and every rank) draw the same. A class's files
 * are one run of the list (its folder's, scanned in one go), so the draw
 * is O(n) however many classes there are. */
static dt_status mark_held(const scan *sc, double share, uint8_t *held) {
    const file_list *f = &sc->files;
    const dt_label *y = file_labels(f);
    int *idx; /* (n) the files of the class being drawn */
    DT_TRY(dt_alloc_bytes((void **)&idx, (size_t)(f->n ? f->n : 1) * sizeof *idx, "held-out split"));
    dt_status s = DT_OK;
    for (int run = 0, end; s == DT_OK && run < f->n; run = end) {
        int c = y[run], m = 0;
        for (end = run; end < f->n && y[end] == c; end++) idx[m++] = end;
        int k = (int)(share * m + 0.5);
        k = k < 1 ? 1 : k > m - 1 ? m - 1 : k;
        if (m < 2)
            s = dt_fail(DT_ERR_FORMAT, "%s/%s: one image; --val-split needs two per class (one to train, one to test)",
                        sc->dir, sc->names.names[c]);
        dt_rng r = dt_rng_seed(dt_hash3(sc->o->seed, (uint64_t)c, 0x7661u /* "va" */));
        for (int j = 0; s == DT_OK && j < k; j++) {
            int pick = j + (int)dt_rng_below(&r, (uint32_t)(m - j)), t = idx[j];
            idx[j] = idx[pick], idx[pick] = t;
            held[idx[j]] = 1;
        }
    }
    dt_free(idx);
    return s;
}

/* --val-split: keeps the held-out files (val_split > 0) or the others (< 0). */
static dt_status hold_out(scan *sc) {
    double v = sc->o->val_split;
    file_list *f = &sc->files;
    if (v == 0 || f->n == 0) return DT_OK;
    uint8_t *held;
    DT_TRY(dt_alloc_bytes((void **)&held, (size_t)f->n, "held-out split"));
    memset(held, 0, (size_t)f->n);
    dt_status s = mark_held(sc, v > 0 ? v : -v, held);
    size_t *at = (size_t *)(void *)f->at.p;
    int kept = 0;
    for (int i = 0; s == DT_OK && i < f->n; i++)
        if (held[i] == (v > 0)) {
            at[kept] = at[i];
            file_labels(f)[kept++] = file_labels(f)[i];
        }
    if (s == DT_OK) f->n = kept;
    dt_free(held);
    return s;
}

/* ---- decoding ------------------------------------------------------------------ */

typedef struct {
    const file_list *files;
    dt_shape shape;
    int side;         /* dt_folder_opts.resize */
    int regions;      /* dt_folder_opts.regions: only check each file */
    uint8_t *images;  /* (n, C, H, W) when cached, else NULL */
    uint8_t *scratch; /* (threads, C, H, W) when not: decoded, checked, dropped */
    uint8_t *bad;     /* (n) skip_bad: 1 for a file that failed */
} decode_job;

static dt_rect whole_image(void *ctx, int h, int w) {
    (void)ctx;
    return (dt_rect){0, 0, h, w};
}

/* A file decoded as its samples will be: whole and fitted to the shape,
 * or, for regions, checked only: decoded (to the last entropy-coded block,
 * where corruption shows) at the smallest scale, as a region of 1 x 1
 * output pixels asks. out: (C, H, W) bytes (unused for regions). */
static dt_status check_or_fit(const decode_job *j, uint8_t *out, const char *path) {
    if (!j->regions) return dt_image_load(out, j->shape, j->side, path);
    dt_image img;
    dt_rect r;
    DT_TRY(dt_image_load_region(&img, &r, path, j->shape.c, 1, 1, whole_image, NULL));
    dt_image_free(&img);
    return DT_OK;
}

static dt_status decode_one(void *ctx, size_t i, int worker) {
    decode_job *j = ctx;
    const size_t sample = dt_shape_size(j->shape);
    uint8_t *out = j->images ? j->images + i * sample : j->scratch + (size_t)worker * sample;
    char path[PATH_CAP];
    dt_status s = check_or_fit(j, out, file_path(j->files, (int)i, path));
    if (s != DT_OK && j->bad && (s == DT_ERR_FORMAT || s == DT_ERR_IO)) {
        j->bad[i] = 1;
        return DT_OK;
    }
    return s;
}

/* Drops the files marked bad (keeping the order), each counted and the
 * first one's error noted (decoded again here for its message: the pool's
 * threads each have their own). */
static dt_status drop_bad(scan *sc, decode_job *j) {
    file_list *f = &sc->files;
    const size_t sample = dt_shape_size(j->shape);
    size_t *at = (size_t *)(void *)f->at.p;
    int kept = 0;
    char path[PATH_CAP];
    for (int i = 0; i < f->n; i++) {
        if (j->bad[i]) {
            if (!sc->first_skip) {
                dt_status s = check_or_fit(j, j->scratch, file_path(f, i, path));
                DT_TRY(skip_or_fail(sc, s == DT_OK ? dt_fail(DT_ERR_IO, "%s: changed while it was read",
                                                             path) : s));
            } else {
                sc->skipped++;
            }
            continue;
        }
        at[kept] = at[i];
        file_labels(f)[kept] = file_labels(f)[i];
        if (j->images && kept != i) memmove(j->images + (size_t)kept * sample, j->images + (size_t)i * sample, sample);
        kept++;
    }
    f->n = kept;
    uint8_t *left; /* (classes) 1: the class kept a file */
    DT_TRY(dt_alloc_bytes((void **)&left, (size_t)sc->names.n, "class counts"));
    memset(left, 0, (size_t)sc->names.n);
    for (int i = 0; i < kept; i++) left[file_labels(f)[i]] = 1;
    int c = 0;
    while (c < sc->names.n && (!sc->present[c] || left[c])) c++;
    dt_free(left);
    if (c < sc->names.n)
        return dt_fail(DT_ERR_FORMAT, "%s/%s: no readable images in this class folder (all skipped)", sc->dir,
                       sc->names.names[c]);
    return DT_OK;
}

/* Decodes every file of sc with o->threads threads: into *images (n, C, H,
 * W) when the set fits o->cache_bytes, else only to check it (*images NULL). */
static dt_status decode_all(scan *sc, dt_shape shape, uint8_t **images) {
    const dt_folder_opts *o = sc->o;
    const int threads = o->threads > 1 ? o->threads : 1;
    const size_t sample = dt_shape_size(shape);
    size_t bytes;
    decode_job j = {&sc->files, shape, o->resize, o->regions, NULL, NULL, NULL};
    void *p;
    dt_status s = dt_mul_size(&bytes, (size_t)sc->files.n, sample, "decoded images");
    if (s == DT_OK && bytes <= o->cache_bytes && !o->regions) s = dt_alloc_bytes(&p, bytes, "decoded images"), j.images = p;
    /* Scratch for dropped samples, and for drop_bad's second look. */
    if (s == DT_OK) s = dt_alloc_bytes(&p, sample * (size_t)threads, "image scratch"), j.scratch = p;
    if (s == DT_OK && o->skip_bad) s = dt_alloc_bytes(&p, (size_t)sc->files.n, "bad file marks"), j.bad = p;
    dt_pool *pool = NULL;
    if (s == DT_OK) s = dt_pool_create(&pool, threads);
    if (s == DT_OK) s = dt_pool_run(pool, (size_t)sc->files.n, decode_one, &j);
    dt_pool_free(pool);
    if (s == DT_OK && j.bad) s = drop_bad(sc, &j);
    dt_free(j.bad);
    dt_free(j.scratch);
    if (s != DT_OK) {
        dt_free(j.images);
        return s;
    }
    *images = j.images;
    return DT_OK;
}

/* ---- on-demand samples -------------------------------------------------------- */

typedef struct {
    file_list files;
    dt_shape shape;
    int side; /* dt_folder_opts.resize */
} source;

static dt_status fetch(void *ctx, int idx, uint8_t *out) {
    const source *src = ctx;
    char path[PATH_CAP];
    return dt_image_load(out, src->shape, src->side, file_path(&src->files, idx, path));
}

static dt_status fetch_region(void *ctx, int idx, int out_h, int out_w, dt_pick_fn pick, void *pick_ctx,
                              dt_image *img, dt_rect *r) {
    const source *src = ctx;
    char path[PATH_CAP];
    return dt_image_load_region(img, r, file_path(&src->files, idx, path), src->shape.c, out_h, out_w, pick,
                                pick_ctx);
}

static void source_free(void *ctx) {
    source *src = ctx;
    file_list_free(&src->files);
    dt_free(src);
}

/* The data set of a scanned list (sc: files, names; dt_dataset_load_folder
 * or a labelled list): decoded once by decode_all, held or fetched. sc's
 * parts are taken (freed here on failure too). */
static dt_status scanned_dataset(dt_dataset **out, scan *sc, dt_shape shape, double scan_s, size_t list_bytes) {
    uint8_t *images = NULL;
    dt_dataset *ds = NULL;
    dt_status s = decode_all(sc, shape, &images);
    dt_free(sc->present);
    if (s == DT_OK) s = dt_data_new_labels(&ds, sc->files.n, shape, sc->names.n);
    void *p = NULL;
    if (s == DT_OK && !images) s = dt_alloc_bytes(&p, sizeof(source), "image source");
    if (s != DT_OK) {
        dt_dataset_free(ds);
        dt_free(images);
        file_list_free(&sc->files);
        dt_class_names_free(&sc->names);
        dt_free(sc->first_skip);
        dt_free(sc->first_ignored);
        return s;
    }
    memcpy(ds->labels, sc->files.labels.p, (size_t)sc->files.n * sizeof *ds->labels);
    ds->class_names = sc->names;
    ds->scan_s = scan_s;
    ds->list_bytes = list_bytes;
    ds->skipped = sc->skipped;
    ds->skipped_first = sc->first_skip;
    ds->ignored = sc->ignored;
    ds->ignored_first = sc->first_ignored;
    if (images) {
        ds->images = images;
        file_list_free(&sc->files);
    } else {
        source *src = p;
        src->files = sc->files;
        src->shape = shape;
        src->side = sc->o->resize;
        ds->fetch = fetch;
        if (sc->o->regions) ds->fetch_region = fetch_region;
        ds->fetch_ctx = src;
        ds->fetch_free = source_free;
    }
    *out = ds;
    return DT_OK;
}

static dt_status check_shape(dt_shape shape, const char *what) {
    if ((shape.c != 1 && shape.c != 3) || !dt_data_shape_ok(shape))
        return dt_fail(DT_ERR_CONFIG, "%s: images of 1 (luminance) or 3 (RGB) channels of up to %dx%d are read, not "
                       "%dx%dx%d", what, DT_DATA_MAX_DIM, DT_DATA_MAX_DIM, shape.c, shape.h, shape.w);
    return DT_OK;
}

dt_status dt_dataset_load_folder(dt_dataset **out, const char *dir, dt_shape shape, const dt_folder_opts *o) {
    *out = NULL;
    DT_TRY(check_shape(shape, "a folder data set"));
    scan sc = {dir, o, {{0}, {0}, {0}, 0}, {0, NULL}, NULL, 0, NULL, 0, NULL};
    double t0 = dt_now();
    dt_status s = scan_split(&sc);
    if (s == DT_OK) s = file_list_fit(&sc.files);
    double scan_s = dt_now() - t0;
    size_t list_bytes = sc.files.paths.cap + sc.files.at.cap + sc.files.labels.cap;
    if (s == DT_OK) s = hold_out(&sc);
    if (s == DT_OK) return scanned_dataset(out, &sc, shape, scan_s, list_bytes);
    dt_free(sc.present);
    file_list_free(&sc.files);
    dt_class_names_free(&sc.names);
    dt_free(sc.first_skip);
    dt_free(sc.first_ignored);
    return s;
}

dt_status dt_data_list_dataset(dt_dataset **out, const char *const *paths, const dt_label *labels, int n,
                               dt_shape shape, const dt_class_names *names, const dt_folder_opts *o) {
    *out = NULL;
    DT_TRY(check_shape(shape, "an image list"));
    /* present stays all 0: a class may have no image in a list, and
     * drop_bad's check is of class folders emptied by --skip-bad-images. */
    scan sc = {"", o, {{0}, {0}, {0}, 0}, {0, NULL}, NULL, 0, NULL, 0, NULL};
    dt_status s = dt_alloc_bytes((void **)&sc.present, (size_t)(names->n ? names->n : 1), "class list");
    if (s == DT_OK) memset(sc.present, 0, (size_t)(names->n ? names->n : 1));
    for (int i = 0; s == DT_OK && i < n; i++) {
        if (strlen(paths[i]) >= PATH_CAP) s = dt_fail(DT_ERR_IO, "%.64s...: path too long", paths[i]);
        else s = file_list_add(&sc.files, "", paths[i], labels[i]);
    }
    if (s == DT_OK) s = file_list_fit(&sc.files);
    if (s == DT_OK) s = dt_class_names_copy(&sc.names, names);
    if (s == DT_OK) return scanned_dataset(out, &sc, shape, 0, sc.files.paths.cap + sc.files.at.cap + sc.files.labels.cap);
    dt_free(sc.present);
    file_list_free(&sc.files);
    dt_class_names_free(&sc.names);
    return s;
}

/* An on-demand data set over fl (taken: emptied here, owned by the data
 * set from then on, freed on failure too). */
static dt_status fetched_dataset(dt_dataset **out, file_list *fl, dt_shape shape, int side, int classes) {
    source *src = NULL;
    dt_status s = dt_data_new_labels(out, fl->n, shape, classes);
    if (s == DT_OK) s = dt_alloc_bytes((void **)&src, sizeof *src, "image source");
    if (s != DT_OK) {
        dt_dataset_free(*out);
        *out = NULL;
        file_list_free(fl);
        return s;
    }
    memset((*out)->labels, 0, sizeof *(*out)->labels * (size_t)fl->n);
    src->files = *fl;
    src->shape = shape;
    src->side = side;
    *fl = (file_list){{0}, {0}, {0}, 0};
    (*out)->fetch = fetch;
    (*out)->fetch_ctx = src;
    (*out)->fetch_free = source_free;
    return DT_OK;
}

dt_status dt_dataset_of_files(dt_dataset **out, const char *const *paths, int n, dt_shape shape, int side,
                              int classes) {
    *out = NULL;
    DT_TRY(check_shape(shape, "image files"));
    if (n < 1) return dt_fail(DT_ERR_USAGE, "no image files given");
    if (classes < 1) return dt_fail(DT_ERR_USAGE, "%d classes (must be at least 1)", classes);
    file_list fl = {{0}, {0}, {0}, 0};
    dt_status s = DT_OK;
    for (int i = 0; s == DT_OK && i < n; i++) {
        if (strlen(paths[i]) >= PATH_CAP) s = dt_fail(DT_ERR_IO, "%.64s...: path too long", paths[i]);
        else s = file_list_add(&fl, "", paths[i], 0);
    }
    if (s == DT_OK) s = file_list_fit(&fl);
    if (s != DT_OK) {
        file_list_free(&fl);
        return s;
    }
    return fetched_dataset(out, &fl, shape, side, classes);
}

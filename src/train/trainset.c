/* Loading and describing a run's data sets (trainset.h). */
#include "trainset.h"

#include <string.h>

#include "dtrain/mem.h"

/* "NAME: N images in K classes, held ..." and any skipped files. */
static void describe(dt_report *rep, const char *name, const dt_dataset *d, const dt_train_opts *o) {
    char line[1024];
    double mib = (double)d->n * (double)dt_shape_size(d->shape) / (1 << 20);
    int digits = mib < 1 ? 2 : 1;
    int threads = o->loader_threads > 1 ? o->loader_threads : 1;
    if (d->images)
        snprintf(line, sizeof line, "%s: %d images in %d classes, decoded once and held in memory (%.*f MiB)", name,
                 d->n, d->classes, digits, mib);
    else if (d->fetch_region)
        snprintf(line, sizeof line, "%s: %d images in %d classes, each decoded whole per sample for "
                 "RandomResizedCrop by %d loader thread%s", name, d->n, d->classes, threads, threads == 1 ? "" : "s");
    else
        snprintf(line, sizeof line, "%s: %d images in %d classes, decoded per batch by %d loader thread%s (%.*f MiB "
                 "decoded would not fit the cache; --cache-mb)", name, d->n, d->classes, threads,
                 threads == 1 ? "" : "s", digits, mib);
    dt_report_line(rep, line);
    if (d->ignored) {
        snprintf(line, sizeof line, "%s: %d file%s not .jpg, .jpeg or .png ignored (the first: %s)", name, d->ignored,
                 d->ignored == 1 ? "" : "s", d->ignored_first ? d->ignored_first : "?");
        dt_report_line(rep, line);
    }
    if (!d->skipped) return;
    snprintf(line, sizeof line, "%s: skipped %d unreadable file%s (--skip-bad-images); the first: %s", name,
             d->skipped, d->skipped == 1 ? "" : "s", d->skipped_first ? d->skipped_first : "?");
    dt_report_line(rep, line);
}

/* "classes: 0 cat, 1 dog, ..." (label, then name), one line; of more than
 * SHOWN_CLASSES the first ones and the last (the checkpoint keeps them
 * all: an ImageNet line would be 14 KB). */
enum { SHOWN_CLASSES = 24 };
static dt_status print_classes(dt_report *rep, const dt_class_names *c) {
    size_t cap = 64;
    for (int i = 0; i < c->n; i++) cap += strlen(c->names[i]) + 16;
    void *p;
    DT_TRY(dt_alloc_bytes(&p, cap, "class list"));
    char *line = p;
    size_t used = (size_t)snprintf(line, cap, "classes:");
    for (int i = 0; i < c->n; i++) {
        if (c->n > SHOWN_CLASSES && i == SHOWN_CLASSES - 1) {
            used += (size_t)snprintf(line + used, cap - used, ", ... (%d classes)", c->n);
            i = c->n - 1;
        }
        used += (size_t)snprintf(line + used, cap - used, "%s %d %s", i ? "," : "", i, c->names[i]);
    }
    dt_report_line(rep, line);
    dt_free(line);
    return DT_OK;
}

dt_status dt_check_input(const dt_model_spec *spec, const dt_dataset *d, const char *kind) {
    dt_shape in = spec->input, s = d->shape;
    if (s.c != in.c || ((s.h != in.h || s.w != in.w) && !spec->augment.crop))
        return dt_fail(DT_ERR_CONFIG, "%s: model input is %dx%dx%d but %s images are %dx%dx%d%s", spec->path, in.c, in.h,
                       in.w, kind, s.c, s.h, s.w,
                       s.c == in.c ? " (min_crop=/max_crop= would crop them to the model's size, as Darknet does)" : "");
    const dt_augment *a = &spec->augment;
    if ((a->hue != 0 || a->saturation != 1) && s.c != 3)
        return dt_fail(DT_ERR_CONFIG, "%s: hue= and saturation= need colour images; %s images have %d channel%s",
                       spec->path, kind, s.c, s.c == 1 ? "" : "s");
    return DT_OK;
}

void dt_data_normalise(dt_dataset *ds, const dt_model_spec *spec) {
    for (int c = 0; c < spec->mean.n; c++) ds->mean[c] = spec->mean.v[c];
    for (int c = 0; c < spec->std.n; c++) ds->std[c] = spec->std.v[c];
}

dt_shape dt_data_load_shape(const dt_model_spec *spec, dt_dataset_kind kind) {
    dt_shape s = spec->input;
    if (dt_dataset_kind_decodes(kind) && spec->augment.crop) s.h = s.w = spec->augment.max_crop;
    return s;
}

/* The job API's arrays: the caller's memory as the train and test sets;
 * without test arrays the training arrays are evaluated (said). */
static dt_status load_arrays(dt_dataset **train, dt_dataset **test, const dt_model_spec *spec, int outputs,
                             const dt_arrays *a, dt_report *rep) {
    DT_TRY(dt_dataset_of_arrays(train, &a->train, outputs, "training arrays"));
    dt_data_normalise(*train, spec);
    DT_TRY(dt_check_input(spec, *train, "the training arrays'"));
    if (a->test.n == 0)
        dt_report_line(rep, "note: no test arrays given: the training arrays are evaluated as the test set");
    DT_TRY(dt_dataset_of_arrays(test, a->test.n ? &a->test : &a->train, outputs,
                                a->test.n ? "test arrays" : "training arrays"));
    dt_data_normalise(*test, spec);
    return dt_check_input(spec, *test, "the test arrays'");
}

dt_status dt_trainset_load(dt_dataset **train, dt_dataset **test, const dt_model_spec *spec, int outputs,
                           const dt_train_opts *o, dt_report *rep) {
    if (o->dataset == DT_DATASET_ARRAYS) return load_arrays(train, test, spec, outputs, o->arrays, rep);
    const char *kind = dt_dataset_kind_name(o->dataset);
    /* The train set's whole images for RandomResizedCrop (regions); both
     * sets fitted with eval_resize= otherwise. */
    dt_folder_opts fo = {.threads = o->loader_threads, .cache_bytes = o->cache_bytes, .skip_bad = o->skip_bad,
                         .all_classes = 1, .val_split = o->val_split, .seed = o->seed,
                         .resize = spec->eval_resize, .regions = spec->augment.resized_crop};
    const dt_shape shape = dt_data_load_shape(spec, o->dataset);
    DT_TRY(dt_dataset_load(train, o->dataset, o->data_dir, 1, shape, outputs, o->seed, &fo));
    dt_data_normalise(*train, spec);
    const dt_dataset *d = *train;
    DT_TRY(dt_check_input(spec, d, kind));
    char split[4096] = "";
    if (o->dataset == DT_DATASET_FOLDER) {
        snprintf(split, sizeof split, "%s/train", o->data_dir);
        if (d->classes > outputs)
            return dt_fail(DT_ERR_CONFIG, "%s: the model has %d outputs, fewer than the %d classes of %s", spec->path,
                           outputs, d->classes, split);
        describe(rep, split, d, o);
        DT_TRY(print_classes(rep, &d->class_names));
        if (d->classes < outputs) {
            char note[1024];
            snprintf(note, sizeof note, "note: %s has %d outputs for %d classes; outputs %d to %d are never a label",
                     spec->path, outputs, d->classes, d->classes, outputs - 1);
            dt_report_line(rep, note);
        }
        /* The test set labels its folders by the train set's names. */
        fo.classes = &d->class_names;
        fo.classes_from = split;
    } else if (o->dataset == DT_DATASET_DARKNET) {
        snprintf(split, sizeof split, "%s train", o->data_dir);
        describe(rep, split, d, o);
        DT_TRY(print_classes(rep, &d->class_names));
    } else if (d->classes != outputs) {
        return dt_fail(DT_ERR_CONFIG, "%s: model has %d outputs but %s has %d classes", spec->path, outputs, kind,
                       d->classes);
    }
    /* The test set gets what the train set left of the cache. */
    size_t used = d->images ? (size_t)d->n * dt_shape_size(d->shape) : 0;
    fo.cache_bytes = fo.cache_bytes > used ? fo.cache_bytes - used : 0;
    fo.regions = 0; /* the test set is evaluated whole (eval_resize), never cropped at random */
    DT_TRY(dt_dataset_load(test, o->dataset, o->data_dir, 0, shape, outputs, o->seed, &fo));
    dt_data_normalise(*test, spec);
    if (o->dataset == DT_DATASET_FOLDER) {
        if (o->val_split > 0)
            snprintf(split, sizeof split, "%s/train held out (--val-split %g, seed %llu)", o->data_dir, o->val_split,
                     (unsigned long long)o->seed);
        else
            snprintf(split, sizeof split, "%s/test", o->data_dir);
        describe(rep, split, *test, o);
    } else if (o->dataset == DT_DATASET_DARKNET) {
        snprintf(split, sizeof split, "%s valid", o->data_dir);
        describe(rep, split, *test, o);
    }
    return DT_OK;
}

dt_status dt_trainset_check_classes(const dt_dataset *train, const dt_class_names *saved, const char *flag,
                                    const char *from) {
    const dt_class_names *now = &train->class_names;
    if (saved->n == 0 || now->n == 0) return DT_OK;
    int i = 0;
    while (i < saved->n && i < now->n && strcmp(saved->names[i], now->names[i]) == 0) i++;
    if (i < saved->n && i < now->n)
        return dt_fail(DT_ERR_USAGE, "%s %s: label %d is class '%s' in the checkpoint, '%s' in the train "
                       "folder (its class folders changed)", flag, from, i, saved->names[i], now->names[i]);
    if (saved->n != now->n)
        return dt_fail(DT_ERR_USAGE, "%s %s: the checkpoint has %d classes, the train folder %d (its class "
                       "folders changed)", flag, from, saved->n, now->n);
    return DT_OK;
}

/* Data sets over the caller's arrays (the job API): nothing is copied or
 * decoded; the loader shards, augments and normalises them as it does an
 * IDX file's images. */
#include "data/internal.h"
#include "dtrain/mem.h"

dt_status dt_dataset_of_arrays(dt_dataset **out, const dt_array_set *a, int classes, const char *what) {
    *out = NULL;
    if ((a->u8 == NULL) == (a->f32 == NULL))
        return dt_fail(DT_ERR_USAGE, "%s: give the images as bytes or as floats (one of the two)", what);
    if (!a->labels) return dt_fail(DT_ERR_USAGE, "%s: no labels", what);
    if (a->n < 1 || a->n > DT_DATA_MAX_SAMPLES)
        return dt_fail(DT_ERR_USAGE, "%s: %d samples (must be 1..%d)", what, a->n, DT_DATA_MAX_SAMPLES);
    if (!dt_data_shape_ok(a->shape))
        return dt_fail(DT_ERR_USAGE, "%s: images of %dx%dx%d (C 1..%d, H, W 1..%d)", what, a->shape.c, a->shape.h,
                       a->shape.w, DT_DATA_MAX_CHANNELS, DT_DATA_MAX_DIM);
    if (classes < 1 || classes > DT_DATA_MAX_CLASSES)
        return dt_fail(DT_ERR_USAGE, "%s: %d classes (must be 1..%d)", what, classes, DT_DATA_MAX_CLASSES);
    DT_TRY(dt_data_check_labels(a->labels, (size_t)a->n, classes, what));
    void *p;
    DT_TRY(dt_alloc_bytes(&p, sizeof(dt_dataset), "data set"));
    dt_dataset *ds = p;
    ds->n = a->n;
    ds->shape = a->shape;
    ds->classes = classes;
    /* Borrowed: dt_dataset_free leaves them; the loader only reads them. */
    ds->images = (uint8_t *)a->u8;
    ds->fimages = a->f32;
    ds->labels = (dt_label *)a->labels;
    ds->borrowed = 1;
    for (int c = 0; c < DT_DATA_MAX_CHANNELS; c++) ds->std[c] = 1;
    *out = ds;
    return DT_OK;
}

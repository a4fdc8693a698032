/* What the commands that load a model and data share (setup.h). */
#include "dtrain/setup.h"

#include <omp.h>
#include <string.h>
#include <unistd.h>

dt_status dt_setup_model(dt_model_spec *spec, const char *path, int batch, double lr, int epochs) {
    return dt_setup_model_over(spec, path, NULL, 0, batch, lr, epochs);
}

dt_status dt_setup_model_over(dt_model_spec *spec, const char *path, const dt_model_override *ov, int n, int batch,
                              double lr, int epochs) {
    /* A model's text (the job API's, dtrain.h) rather than a file's path. */
    if (dt_model_is_text(path))
        DT_TRY(dt_model_parse_string_over(spec, path, "model text", ov, n));
    else
        DT_TRY(dt_model_parse_file_over(spec, path, ov, n));
    if (batch > 0) spec->batch = batch;
    if (lr > 0) spec->sched.base_lr = lr;
    if (epochs > 0) {
        /* A cosine schedule spans the run's epochs unless the file set it. */
        if (spec->sched.total_epochs == spec->epochs) spec->sched.total_epochs = epochs;
        spec->epochs = epochs;
    }
    return DT_OK;
}

dt_status dt_setup_precision(dt_model_spec *spec, const char *name) {
    if (name) {
        int p = dt_precision_from_name(name);
        if (p < 0) return dt_fail(DT_ERR_USAGE, "--precision: unknown precision '%s' (fp32, bf16)", name);
        spec->precision = (dt_precision)p;
    }
    if (dt_precision_check(spec->precision) == DT_OK) return DT_OK;
    char why[256]; /* dt_fail writes the buffer dt_last_error reads */
    snprintf(why, sizeof why, "%s", dt_last_error());
    return name ? dt_fail(DT_ERR_USAGE, "--precision: %s", why)
                : dt_fail(DT_ERR_CONFIG, "%s: [net] precision: %s", spec->path, why);
}

int dt_setup_threads(int threads, int local_ranks) {
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        int ranks = local_ranks > 0 ? local_ranks : 1;
        threads = cores > ranks ? (int)(cores / ranks) : 1;
    }
    /* oneDNN (convolutions and every GEMM) runs on OpenMP's threads. */
    omp_set_num_threads(threads);
    return threads;
}

dt_status dt_setup_dataset_kind(dt_dataset_kind *kind, const char *name, const dt_model_spec *spec) {
    if (!name) name = spec->dataset[0] ? spec->dataset : "fashion-mnist";
    int k = dt_dataset_kind_from_name(name);
    if (k < 0)
        return dt_fail(DT_ERR_USAGE,
                       "--dataset: unknown dataset '%s' (fashion-mnist, mnist, cifar10, synthetic, folder)",
                       name);
    *kind = (dt_dataset_kind)k;
    return DT_OK;
}

dt_status dt_setup_data_source(dt_dataset_kind *kind, const char **dir, const char *data, const char *dataset,
                               const char *data_dir, const dt_model_spec *spec) {
    if (data && (dataset || data_dir))
        return dt_fail(DT_ERR_USAGE, "--data %s excludes %s (the data file names the image lists)", data,
                       dataset ? "--dataset" : "--data-dir");
    *dir = data ? data : data_dir;
    if (data) {
        *kind = DT_DATASET_DARKNET;
        return DT_OK;
    }
    DT_TRY(dt_setup_dataset_kind(kind, dataset, spec));
    if (*kind == DT_DATASET_DARKNET)
        return dt_fail(DT_ERR_USAGE, "%s darknet: give Darknet's data file as --data FILE.data",
                       dataset ? "--dataset" : "dataset=");
    return DT_OK;
}

dt_status dt_setup_folder_flags(dt_dataset_kind kind, const char *data_dir, long cache_mb, int skip_bad) {
    if (kind == DT_DATASET_FOLDER && (!data_dir || !*data_dir))
        return dt_fail(DT_ERR_USAGE, "--dataset folder needs --data-dir DIR (holding DIR/train/<class>/ and "
                       "DIR/test/<class>/)");
    if (!dt_dataset_kind_decodes(kind) && cache_mb >= 0)
        return dt_fail(DT_ERR_USAGE, "--cache-mb applies to --dataset folder and --data, not %s",
                       dt_dataset_kind_name(kind));
    if (!dt_dataset_kind_decodes(kind) && skip_bad)
        return dt_fail(DT_ERR_USAGE, "--skip-bad-images applies to --dataset folder and --data, not %s",
                       dt_dataset_kind_name(kind));
    return DT_OK;
}

dt_status dt_setup_val_split(dt_dataset_kind kind, double val_split) {
    if (val_split > 0 && kind != DT_DATASET_FOLDER)
        return dt_fail(DT_ERR_USAGE, "--val-split applies to --dataset folder, not %s (its test split is its own)",
                       dt_dataset_kind_name(kind));
    return DT_OK;
}

int dt_setup_loader_threads(dt_dataset_kind kind) { return dt_dataset_kind_decodes(kind) ? 2 : 1; }

size_t dt_setup_cache_bytes(long cache_mb, int local_ranks) {
    return cache_mb >= 0 ? (size_t)cache_mb << 20 : dt_folder_default_cache(local_ranks);
}

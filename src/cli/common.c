#include <mpi.h>
#include <oneapi/dnnl/dnnl.h>
#include <zlib.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_report(dt_status s, const cli_env *env) {
    if (s == DT_OK) return 0;
    if (env->world > 1)
        fprintf(stderr, "dtrain: rank %d: %s\n", env->rank, dt_last_error());
    else
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
    return dt_status_exit_code(s);
}

void cli_end_stalled_job(void *ctx, const char *line) {
    (void)ctx;
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    /* MPI_Abort asks mpirun to end every rank; should it never return
     * (mpirun itself unreachable), SIGALRM's default action ends this one. */
    alarm(20);
    MPI_Abort(MPI_COMM_WORLD, dt_status_exit_code(DT_ERR_STALLED));
    _exit(dt_status_exit_code(DT_ERR_STALLED));
}

void cli_print_version(FILE *out) {
    const dnnl_version_t *d = dnnl_version();
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(mpi, &len) != MPI_SUCCESS) snprintf(mpi, sizeof mpi, "unknown");
    char *nl = strchr(mpi, '\n');
    if (nl) *nl = '\0';
    fprintf(out, "dtrain %s\n", DT_VERSION);
    fprintf(out, "build: %s, %s, %s%s\n", DT_BUILD_TYPE, DT_BUILD_NATIVE ? "-march=native" : "generic x86-64",
            DT_BUILD_SANITIZE[0] ? "sanitizer " : "no sanitizer", DT_BUILD_SANITIZE);
    fprintf(out, "oneDNN: %d.%d.%d (%s; convolutions and every GEMM)\n", d->major, d->minor, d->patch, d->hash);
    /* dtrain links no BLAS (tests/test_everyday.sh holds this line to ldd's
     * answer); only bench/sgemm_peak does, for the reference peak. */
    fprintf(out, "OpenBLAS: not linked (dtrain's GEMMs run on oneDNN; bench/sgemm_peak links it for the reference "
                 "peak)\n");
    fprintf(out, "MPI: %s\n", mpi);
    fprintf(out, "zlib: %s, OpenMP: %d\n", zlibVersion(), _OPENMP);
}

int cli_agree_start(dt_status s, cli_env *env) {
    if (env->world == 1) return cli_report(s, env);
    int mine = s == DT_OK ? env->world : env->rank, first, code = dt_status_exit_code(s);
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS ||
        (first < env->world && MPI_Bcast(&code, 1, MPI_INT, first, MPI_COMM_WORLD) != MPI_SUCCESS)) {
        fprintf(stderr, "dtrain: rank %d: the ranks could not agree on how start-up went (MPI failed)\n", env->rank);
        return 1;
    }
    if (first == env->world) return 0;
    if (env->rank == first) fprintf(stderr, "dtrain: %s\n", dt_last_error());
    env->orderly = 1;
    return code;
}

dt_status cli_load_model(dt_model_spec *spec, const char *path, int batch, double lr, int epochs) {
    return cli_load_model_over(spec, path, NULL, 0, batch, lr, epochs);
}

dt_status cli_load_model_over(dt_model_spec *spec, const char *path, const dt_model_override *ov, int n, int batch,
                              double lr, int epochs) {
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

dt_status cli_precision(dt_model_spec *spec, const char *name) {
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

int cli_set_threads(int threads, const cli_env *env) {
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        int ranks = env->local_ranks > 0 ? env->local_ranks : 1;
        threads = cores > ranks ? (int)(cores / ranks) : 1;
    }
    /* oneDNN (convolutions and every GEMM) runs on OpenMP's threads. */
    omp_set_num_threads(threads);
    return threads;
}

dt_status cli_dataset_kind(dt_dataset_kind *kind, const char *name, const dt_model_spec *spec) {
    if (!name) name = spec->dataset[0] ? spec->dataset : "fashion-mnist";
    int k = dt_dataset_kind_from_name(name);
    if (k < 0)
        return dt_fail(DT_ERR_USAGE,
                       "--dataset: unknown dataset '%s' (fashion-mnist, mnist, cifar10, synthetic, folder)",
                       name);
    *kind = (dt_dataset_kind)k;
    return DT_OK;
}

dt_status cli_data_source(dt_dataset_kind *kind, const char **dir, const char *data, const char *dataset,
                          const char *data_dir, const dt_model_spec *spec) {
    if (data && (dataset || data_dir))
        return dt_fail(DT_ERR_USAGE, "--data %s excludes %s (the data file names the image lists)", data,
                       dataset ? "--dataset" : "--data-dir");
    *dir = data ? data : data_dir;
    if (data) {
        *kind = DT_DATASET_DARKNET;
        return DT_OK;
    }
    DT_TRY(cli_dataset_kind(kind, dataset, spec));
    if (*kind == DT_DATASET_DARKNET)
        return dt_fail(DT_ERR_USAGE, "%s darknet: give Darknet's data file as --data FILE.data",
                       dataset ? "--dataset" : "dataset=");
    return DT_OK;
}

dt_status cli_folder_flags(dt_dataset_kind kind, const char *data_dir, long cache_mb, int skip_bad) {
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

dt_status cli_val_split_flag(dt_dataset_kind kind, double val_split) {
    if (val_split > 0 && kind != DT_DATASET_FOLDER)
        return dt_fail(DT_ERR_USAGE, "--val-split applies to --dataset folder, not %s (its test split is its own)",
                       dt_dataset_kind_name(kind));
    return DT_OK;
}

int cli_default_loader_threads(dt_dataset_kind kind) { return dt_dataset_kind_decodes(kind) ? 2 : 1; }

size_t cli_cache_bytes(long cache_mb, const cli_env *env) {
    return cache_mb >= 0 ? (size_t)cache_mb << 20 : dt_folder_default_cache(env->local_ranks);
}

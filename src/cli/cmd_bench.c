/* dtrain bench MODEL.cfg: times training steps (forward, loss, backward,
 * SGD update) on synthetic data of the model's input shape; with
 * --profile-out, also each layer on its own, for dtrain simulate; with
 * --data-only, the loader alone on a data set (decoding, augmentation and
 * normalisation of training batches, as dtrain train's loader builds them). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "dtrain/opts.h"
#include "cli.h"
#include "dtrain/paths.h"
#include "dtrain/data.h"
#include "dtrain/json.h"
#include "dtrain/net.h"
#include "dtrain/mem.h"
#include "dtrain/optim.h"
#include "dtrain/sim.h"
#include "dtrain/timer.h"

/* The next training batch of ld, past an epoch's end marker (n == 0). */
/* The process's peak resident memory so far (MiB; 0 if unknown). */
static double peak_rss_mb(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss / 1024.0 : 0;
}

static dt_status next_batch(dt_loader *ld, const float **x, const dt_label **y, int *n) {
    DT_TRY(dt_loader_next(ld, x, y, n));
    return *n == 0 ? dt_loader_next(ld, x, y, n) : DT_OK;
}

static dt_status bench_run(const dt_model_spec *spec, int steps, int threads) {
    dt_net *net;
    DT_TRY(dt_net_create(&net, spec, spec->batch, 1));
    dt_dataset *ds = NULL;
    dt_loader *ld = NULL;
    dt_optim *opt = NULL;
    float *state = NULL;
    dt_loader_cfg lc = {.batch = spec->batch, .workers = 1, .seed = 1, .shuffle = 1};
    dt_status s = dt_optim_create_for_net(&opt, &state, &spec->optim, net);
    if (s == DT_OK) s = dt_dataset_synthetic(&ds, spec->input, net->classes, 4 * spec->batch, 1);
    if (s == DT_OK) s = dt_loader_create(&ld, ds, &lc);
    double t0 = 0, loss = 0;
    const int warmup = 3;
    for (int i = 0; s == DT_OK && i < warmup + steps; i++) {
        if (i == warmup) t0 = dt_now();
        const float *x;
        const dt_label *y;
        int n;
        s = next_batch(ld, &x, &y, &n);
        if (s != DT_OK) break;
        dt_net_forward(net, x, n, 1);
        loss = dt_net_loss(net, y, n) / n;
        dt_net_backward(net, x, n, NULL, NULL);
        dt_optim_update_net(opt, (float)spec->sched.base_lr, i + 1, net, state, 0, net->nparams);
    }
    if (s == DT_OK) {
        double dt = dt_now() - t0;
        /* Training FLOPs ~ 3x forward (forward, input and weight gradients). */
        double gflops = 3.0 * (double)dt_net_flops(net) * spec->batch * steps / dt / 1e9;
        char model[1024];
        printf("{\"event\":\"bench\",\"model\":\"%s\",\"precision\":\"%s\",\"winograd\":%d,\"batch\":%d,"
               "\"threads\":%d,\"steps\":%d,"
               "\"images_per_sec\":%.1f,\"ms_per_step\":%.3f,\"gflops\":%.1f,\"loss\":%.4f,"
               "\"peak_rss_mb\":%.1f}\n",
               dt_json_escape(model, sizeof model, spec->path), dt_precision_name(spec->precision), spec->winograd,
               spec->batch, threads, steps, spec->batch * steps / dt, dt / steps * 1e3,
               gflops, loss, peak_rss_mb());
    }
    dt_loader_free(ld);
    dt_dataset_free(ds);
    dt_free(state);
    dt_optim_free(opt);
    dt_net_free(net);
    return s;
}

/* The flags of --data-only. */
typedef struct {
    const char *dataset, *data_dir, *data;
    int loader_threads, skip_bad;
    long cache_mb; /* -1: not given */
} data_args;

/* --data-only: loads the training set (timed), then times `steps` training
 * batches of the model's batch, augmentation and prefetch thread. */
static dt_status bench_data(const dt_model_spec *spec, int steps, const data_args *d, const cli_env *env) {
    dt_dataset_kind kind;
    const char *dir;
    DT_TRY(dt_setup_data_source(&kind, &dir, d->data, d->dataset, d->data_dir, spec));
    DT_TRY(dt_setup_folder_flags(kind, dir, d->cache_mb, d->skip_bad));
    int threads = d->loader_threads ? d->loader_threads : dt_setup_loader_threads(kind);
    dt_folder_opts fo = {.threads = threads, .cache_bytes = dt_setup_cache_bytes(d->cache_mb, env->local_ranks),
                         .skip_bad = d->skip_bad, .resize = spec->eval_resize,
                         .regions = spec->augment.resized_crop};
    dt_dataset *ds = NULL;
    dt_loader *ld = NULL;
    dt_loader_cfg lc = {.batch = spec->batch, .workers = 1, .seed = 1, .shuffle = 1, .flip = spec->flip,
                        .crop_pad = spec->crop_pad, .erase = spec->erase, .augment = &spec->augment,
                        .out = spec->input,
                        .prefetch = 1, .threads = threads};
    double t0 = dt_now(), load_s = 0, dt = 0;
    dt_status s = dt_dataset_load(&ds, kind, dir, 1, dt_data_load_shape(spec, kind), 0, 1, &fo);
    if (s == DT_OK) load_s = dt_now() - t0, s = dt_loader_create(&ld, ds, &lc);
    const int warmup = 3;
    for (int i = 0; s == DT_OK && i < warmup + steps; i++) {
        if (i == warmup) t0 = dt_now();
        const float *x;
        const dt_label *y;
        int n;
        s = next_batch(ld, &x, &y, &n);
    }
    if (s == DT_OK) {
        dt = dt_now() - t0;
        printf("{\"event\":\"loader_bench\",\"dataset\":\"%s\",\"samples\":%d,\"shape\":[%d,%d,%d],"
               "\"batch\":%d,\"loader_threads\":%d,\"cached\":%s,\"load_s\":%.3f,\"scan_s\":%.3f,"
               "\"list_bytes_per_file\":%.1f,\"steps\":%d,\"images_per_sec\":%.1f,\"ms_per_batch\":%.3f,"
               "\"peak_rss_mb\":%.1f}\n",
               dt_dataset_kind_name(kind), ds->n, spec->input.c, spec->input.h, spec->input.w, spec->batch, threads,
               ds->images ? "true" : "false", load_s, ds->scan_s, ds->n ? (double)ds->list_bytes / ds->n : 0, steps,
               (double)spec->batch * steps / dt, dt / steps * 1e3, peak_rss_mb());
    }
    dt_loader_free(ld);
    dt_dataset_free(ds);
    return s;
}

/* The per-layer profile of dtrain simulate --profile, `steps` repetitions. */
static dt_status write_profile(const dt_model_spec *spec, int threads, int steps, int workers, const char *path) {
    dt_profile *p = malloc(sizeof *p);
    if (!p) return dt_fail(DT_ERR_NOMEM, "bench: out of memory");
    dt_status s = dt_profile_measure(p, spec, threads, steps, workers);
    if (s == DT_OK) s = dt_profile_write(p, path);
    free(p);
    return s;
}

static const char bench_usage[] =
    "usage: dtrain bench MODEL.cfg [flags]\n"
    "  times training steps (forward, backward, SGD) on random data: img/s and per layer\n"
    "  --batch N           batch (default: the model file's)\n"
    "  --steps N           timed steps (default 50)\n"
    "  --threads N         threads (default: all cores)\n"
    "  --precision P       fp32 | bf16 (default: the model file's precision=, else fp32)\n"
    "  --winograd 0|1      1: 3x3 stride-1 convolutions by Winograd's algorithm where it\n"
    "                      applies (fp32; `dtrain info` marks them); 0: oneDNN's\n"
    "                      direct kernels (default: the model file's winograd=, else 1)\n"
    "  --profile-out F     write the per-layer profile as JSON (input of dtrain simulate)\n"
    "  --measure-workers K --profile-out: measured with K workers computing at once (each\n"
    "                      of --threads), as K workers of a job on this machine (default 1)\n"
    "  --data-only         time the loader alone instead: training batches of the model's\n"
    "                      batch, input and augmentation from a data set, images/s\n"
    "  --dataset D, --data-dir DIR, --data F.data, --loader-threads N, --cache-mb N,\n"
    "  --skip-bad-images   --data-only: the data set and the loader, as for dtrain train\n"
    "                      (--cache-mb 0 times decoding per batch)\n";

int cmd_bench(int argc, char **argv, const cli_env *env) {
    int batch = 0, steps = 50, threads = 0, help = 0, data_only = 0, winograd = -1, measure_workers = 0;
    const char *profile_out = NULL, *precision = NULL;
    data_args d = {.cache_mb = -1};
    dt_opt flags[] = {
        {"--help", DT_OPT_FLAG, &help, 0, 0, 0},
        {"--batch", DT_OPT_INT, &batch, 1, 1 << 20, 0},
        {"--steps", DT_OPT_INT, &steps, 1, 1000000, 0},
        {"--threads", DT_OPT_INT, &threads, 1, 1024, 0},
        {"--profile-out", DT_OPT_STR, &profile_out, 0, 0, 0},
        {"--measure-workers", DT_OPT_INT, &measure_workers, 1, DT_PROFILE_MAX_WORKERS, 0},
        {"--precision", DT_OPT_STR, &precision, 0, 0, 0},
        {"--winograd", DT_OPT_INT, &winograd, 0, 1, 0},
        {"--data-only", DT_OPT_FLAG, &data_only, 0, 0, 0},
        {"--dataset", DT_OPT_STR, &d.dataset, 0, 0, 0},
        {"--data-dir", DT_OPT_STR, &d.data_dir, 0, 0, 0},
        {"--data", DT_OPT_STR, &d.data, 0, 0, 0},
        {"--loader-threads", DT_OPT_INT, &d.loader_threads, 1, 256, 0},
        {"--cache-mb", DT_OPT_LONG, &d.cache_mb, 0, 1e9, 0},
        {"--skip-bad-images", DT_OPT_FLAG, &d.skip_bad, 0, 0, 0},
    };
    const char *pos[1];
    int npos;
    dt_status s = dt_opts_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), pos, 1, &npos);
    if (s == DT_OK && help) {
        fputs(bench_usage, stdout);
        return 0;
    }
    if (s == DT_OK && npos != 1) s = dt_fail(DT_ERR_USAGE, "bench: expected one MODEL.cfg (see dtrain bench --help)");
    int data_flags = d.dataset || d.data_dir || d.data || d.loader_threads || d.cache_mb >= 0 || d.skip_bad;
    if (s == DT_OK && data_flags && !data_only)
        s = dt_fail(DT_ERR_USAGE, "bench: --dataset, --data-dir, --data, --loader-threads, --cache-mb and "
                    "--skip-bad-images apply to --data-only");
    if (s == DT_OK && measure_workers && !profile_out)
        s = dt_fail(DT_ERR_USAGE, "bench: --measure-workers applies to --profile-out");
    if (s == DT_OK && data_only && profile_out) s = dt_fail(DT_ERR_USAGE, "bench: --profile-out times the model, "
                                                             "--data-only the loader: give one");
    const dt_path paths[] = {{"MODEL.cfg", pos[0], "the model file", 0}, {"--profile-out", profile_out, NULL, 0}};
    if (s == DT_OK) s = dt_paths_check(paths, 2);
    if (s == DT_OK) s = dt_paths_make_parents(paths, 2);
    dt_model_spec spec;
    if (s == DT_OK) s = dt_setup_model(&spec, pos[0], batch, 0, 0);
    if (s == DT_OK && !data_only) s = dt_model_check_loss(&spec);
    if (s == DT_OK && !data_only) s = dt_setup_precision(&spec, precision);
    if (s == DT_OK && data_only && (precision || winograd >= 0))
        s = dt_fail(DT_ERR_USAGE, "bench: --precision and --winograd time the model, --data-only the loader: give one");
    if (winograd >= 0) spec.winograd = winograd;
    if (s == DT_OK && data_only) s = bench_data(&spec, steps, &d, env);
    if (s != DT_OK || data_only) return cli_report(s, env);
    int nthreads = dt_setup_threads(threads, env->local_ranks);
    s = bench_run(&spec, steps, nthreads);
    if (s == DT_OK && profile_out)
        s = write_profile(&spec, nthreads, steps, measure_workers ? measure_workers : 1, profile_out);
    return cli_report(s, env);
}

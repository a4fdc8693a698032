/* dtrain train MODEL.cfg [flags] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "dtrain/dist.h"
#include "dtrain/train.h"

static const char train_usage[] =
    "usage: dtrain train MODEL.cfg [flags]\n"
    "  --dataset fashion-mnist|mnist|cifar10|synthetic   (default: the model file's)\n"
    "  --data-dir DIR        dataset directory (default /usr/share/datasets/fashion-mnist)\n"
    "  --epochs N            override the model file's epochs\n"
    "  --max-steps N         stop after N optimiser steps\n"
    "  --batch N             batch per worker (overrides the model file)\n"
    "  --lr X                base learning rate (overrides the model file)\n"
    "  --seed N              seed of init, data order, augmentation, dropout (default 1)\n"
    "  --threads N           BLAS threads per rank (default: cores / ranks on the node)\n"
    "  --log F.jsonl         one JSON object per line: config, steps, evaluations, summary\n"
    "  --checkpoint F        write a checkpoint here (at the end and every --checkpoint-every)\n"
    "  --checkpoint-every N  also every N steps\n"
    "  --resume F            continue exactly from checkpoint F\n"
    "  --no-prefetch         build batches in the training thread\n"
    "  --mode M              serial | allreduce | ps-sync | ps-async | ps-async-nowait |\n"
    "                        ps-hogwild | ps-ssp (default: serial, or allreduce when\n"
    "                        started on several ranks)\n"
    "  --staleness S         ps-ssp: the fastest worker runs at most S clocks ahead (default 3)\n"
    "  --straggle P:MS       every worker sleeps MS ms in a step with probability P\n"
    "  --slow-worker R:MS    world rank R sleeps MS ms in every step\n"
    "  --servers S           ps-* modes: the first S ranks are parameter servers (default 1)\n"
    "  --fusion-mb X         allreduce: fusion bucket size in MiB (default 4; 0 = per layer)\n"
    "  --sfb                 allreduce, ps-sync: fully connected layers exchange sufficient\n"
    "                        factors between workers instead of their gradients\n"
    "  --sacp                allreduce, ps-sync: per layer, whichever of the two moves fewer\n"
    "                        bytes (the plan is printed at start; see dtrain info --plan)\n"
    "  --group-size K        ps-sync, ps-async: groups of K workers average their gradients\n"
    "                        among themselves; one per group talks to the servers (SINGA)\n"
    "  --stall-timeout S     name the missing ranks after S seconds of waiting (default 60)\n"
    "  --timeline F.json     trace of every rank's layers, communication, waits, data, eval and\n"
    "                        checkpoints, for chrome://tracing or ui.perfetto.dev\n"
    "  --quiet               only the final summary line\n";

/* --mode/--servers/--sfb/--sacp/--group-size against the job's ranks. */
static dt_status resolve_mode(dt_dist_cfg *dc, const char *name, int servers, const cli_env *env) {
    if (!name) name = env->world > 1 ? "allreduce" : "serial";
    int m = dt_mode_from_name(name);
    if (m < 0)
        return dt_fail(DT_ERR_USAGE, "--mode: unknown mode '%s' (serial, allreduce, ps-sync, ps-async, "
                       "ps-async-nowait, ps-hogwild, ps-ssp)", name);
    dc->mode = (dt_mode)m;
    if (dc->mode == DT_MODE_SERIAL && env->world > 1)
        return dt_fail(DT_ERR_USAGE, "--mode serial runs on one rank, this job has %d (use allreduce or "
                       "ps-sync)", env->world);
    dc->servers = dt_mode_is_ps(dc->mode) ? servers : 0;
    if (dt_mode_is_ps(dc->mode) && env->world < servers + 1)
        return dt_fail(DT_ERR_USAGE, "--mode %s --servers %d needs at least %d ranks, this job has %d "
                       "(start it with dtrain launch -n N or mpirun -np N)", name, servers, servers + 1,
                       env->world);
    return dt_dist_cfg_check(dc, env->world - dc->servers);
}

/* "A:B" with A in [amin, amax] and B >= 0 (--straggle P:MS, --slow-worker RANK:MS). */
static dt_status parse_pair(const char *arg, const char *flag, const char *form, double amin, double amax,
                            double *a, double *b) {
    char *end;
    *a = strtod(arg, &end);
    if (end == arg || *end != ':' || !(*a >= amin && *a <= amax))
        return dt_fail(DT_ERR_USAGE, "%s: '%s' is not %s (first part in [%g, %g])", flag, arg, form, amin,
                       amax);
    const char *rest = end + 1;
    *b = strtod(rest, &end);
    if (end == rest || *end != '\0' || !(*b >= 0 && *b <= 1e7))
        return dt_fail(DT_ERR_USAGE, "%s: '%s' is not %s (milliseconds >= 0)", flag, arg, form);
    return DT_OK;
}

/* Flushes (and, when the run allows it, merges) the timeline after the
 * run, which ended with status run; the run's own error stays the one
 * returned, a timeline error after a failed run is only printed. */
static dt_status close_timeline(dt_timeline *tl, const dt_comm *comm, const dt_dist_cfg *dc, dt_status run,
                                const cli_env *env) {
    if (!tl) return run;
    if (run == DT_OK) return dt_comm_timeline_close(tl, comm, run, !dt_mode_is_async(dc->mode));
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    dt_status s = dt_comm_timeline_close(tl, comm, run, !dt_mode_is_async(dc->mode));
    if (s != DT_OK) cli_report(s, env);
    return dt_fail(run, "%s", msg);
}

/* Every rank must have built the same network (same model file). */
static dt_status check_model(const dt_comm *comm, const dt_model_spec *spec) {
    if (comm->size == 1) return DT_OK;
    dt_net *net;
    DT_TRY(dt_net_create(&net, spec, 1, 1));
    dt_status s = dt_comm_check_model(comm, net->shape_hash, spec->path);
    dt_net_free(net);
    return s;
}

int cmd_train(int argc, char **argv, cli_env *env, volatile sig_atomic_t *stop) {
    const char *dataset = NULL, *data_dir = NULL, *log = NULL, *ckpt = NULL, *resume = NULL;
    const char *mode_name = NULL, *straggle_arg = NULL, *slow_arg = NULL, *timeline = NULL;
    int staleness = 3;
    int epochs = 0, batch = 0, threads = 0, quiet = 0, help = 0, no_prefetch = 0, servers = 1;
    int sfb = 0, sacp = 0, group_size = 1;
    long max_steps = 0, ckpt_every = 0, seed = 1;
    double lr = 0, fusion_mb = 4, stall_timeout = 60;
    cli_flag flags[] = {
        {"--dataset", ARG_STR, &dataset, 0, 0, 0},
        {"--data-dir", ARG_STR, &data_dir, 0, 0, 0},
        {"--epochs", ARG_INT, &epochs, 1, 100000, 0},
        {"--max-steps", ARG_LONG, &max_steps, 1, 1e15, 0},
        {"--batch", ARG_INT, &batch, 1, 1 << 20, 0},
        {"--lr", ARG_DOUBLE, &lr, 1e-12, 1e6, 0},
        {"--seed", ARG_LONG, &seed, 0, 9.2e18, 0},
        {"--threads", ARG_INT, &threads, 1, 1024, 0},
        {"--log", ARG_STR, &log, 0, 0, 0},
        {"--checkpoint", ARG_STR, &ckpt, 0, 0, 0},
        {"--checkpoint-every", ARG_LONG, &ckpt_every, 1, 1e15, 0},
        {"--resume", ARG_STR, &resume, 0, 0, 0},
        {"--no-prefetch", ARG_FLAG, &no_prefetch, 0, 0, 0},
        {"--quiet", ARG_FLAG, &quiet, 0, 0, 0},
        {"--help", ARG_FLAG, &help, 0, 0, 0},
        {"--mode", ARG_STR, &mode_name, 0, 0, 0},
        {"--servers", ARG_INT, &servers, 1, 1024, 0},
        {"--fusion-mb", ARG_DOUBLE, &fusion_mb, 0, 4096, 0},
        {"--stall-timeout", ARG_DOUBLE, &stall_timeout, 0.1, 1e6, 0},
        {"--staleness", ARG_INT, &staleness, 0, 1000, 0},
        {"--straggle", ARG_STR, &straggle_arg, 0, 0, 0},
        {"--slow-worker", ARG_STR, &slow_arg, 0, 0, 0},
        {"--sfb", ARG_FLAG, &sfb, 0, 0, 0},
        {"--sacp", ARG_FLAG, &sacp, 0, 0, 0},
        {"--group-size", ARG_INT, &group_size, 1, 1 << 20, 0},
        {"--timeline", ARG_STR, &timeline, 0, 0, 0},
    };
    const char *pos[1];
    int npos;
    dt_status s = cli_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), pos, 1, &npos);
    if (s == DT_OK && help) {
        fputs(train_usage, stdout);
        return 0;
    }
    if (s == DT_OK && npos != 1) s = dt_fail(DT_ERR_USAGE, "train: expected one MODEL.cfg\n%s", train_usage);
    if (s == DT_OK && ckpt_every && !ckpt)
        s = dt_fail(DT_ERR_USAGE, "--checkpoint-every needs --checkpoint FILE");
    dt_model_spec spec;
    if (s == DT_OK) s = cli_load_model(&spec, pos[0], batch, lr, epochs);
    dt_train_opts o;
    memset(&o, 0, sizeof o);
    if (s == DT_OK) s = cli_dataset_kind(&o.dataset, dataset, &spec);
    if (s == DT_OK && sfb && sacp) s = dt_fail(DT_ERR_USAGE, "--sfb and --sacp exclude each other");
    dt_dist_cfg dc = {DT_MODE_SERIAL, 0, fusion_mb, stall_timeout, staleness,
                      sfb ? DT_SFB_ALL : sacp ? DT_SFB_AUTO : DT_SFB_OFF, 0, NULL, group_size, NULL};
    if (s == DT_OK) dc.batch = spec.batch;
    if (s == DT_OK) s = resolve_mode(&dc, mode_name, servers, env);
    if (s == DT_OK && straggle_arg)
        s = parse_pair(straggle_arg, "--straggle", "P:MS", 0, 1, &o.straggle_p, &o.straggle_ms);
    double slow_rank = 0;
    if (s == DT_OK && slow_arg)
        s = parse_pair(slow_arg, "--slow-worker", "RANK:MS", 0, 65535, &slow_rank, &o.slow_ms);
    o.slow_rank = (int)slow_rank;
    if (s != DT_OK) return cli_report(s, env);

    dt_comm comm;
    s = dt_comm_create(&comm, dc.servers);
    if (s == DT_OK) s = check_model(&comm, &spec);
    /* Before anything trains, so a bad path stops the run at once. */
    if (s == DT_OK && timeline) s = dt_comm_timeline_open(&dc.timeline, &comm, timeline);
    o.timeline = dc.timeline;
    if (s == DT_OK && comm.worker < 0) {
        cli_set_threads(1, env); /* a server only sums and steps its shard */
        s = dt_server_run(&comm, &dc, &spec);
        s = close_timeline(dc.timeline, &comm, &dc, s, env);
        dt_timeline_free(dc.timeline);
        dt_comm_free(&comm);
        return cli_report(s, env);
    }
    if (s != DT_OK) {
        dt_comm_free(&comm);
        return cli_report(s, env);
    }

    int nthreads = cli_set_threads(threads, env);
    o.data_dir = data_dir;
    o.epochs = spec.epochs;
    o.max_steps = max_steps;
    o.seed = (uint64_t)seed;
    o.log_path = log;
    o.checkpoint_path = ckpt;
    o.checkpoint_every = ckpt_every;
    o.resume_path = resume;
    o.quiet = quiet;
    o.progress_tty = isatty(STDOUT_FILENO);
    o.rank = comm.worker;
    o.world_rank = comm.rank;
    o.world = comm.nworkers;
    o.prefetch = !no_prefetch;
    o.stop = stop;
    o.out = comm.worker == 0 ? stdout : NULL;
    if (!quiet && comm.worker == 0) {
        printf("dtrain: training %s on %s: %d layers, batch %d per worker", spec.path,
               dt_dataset_kind_name(o.dataset), spec.nlayers, spec.batch);
        if (comm.nworkers > 1)
            printf(" x %d workers = %d global", comm.nworkers, spec.batch * comm.nworkers);
        printf(", %d epochs, lr %g (%s), %d thread%s, mode %s", spec.epochs, spec.sched.base_lr,
               dt_schedule_kind_name(spec.sched.kind), nthreads, nthreads == 1 ? "" : "s",
               dt_mode_name(dc.mode));
        if (dt_mode_is_ps(dc.mode)) printf(" with %d server%s", dc.servers, dc.servers == 1 ? "" : "s");
        if (dc.mode == DT_MODE_PS_SSP) printf(", staleness %d", dc.staleness);
        if (dc.sfb != DT_SFB_OFF) printf(", %s", dc.sfb == DT_SFB_ALL ? "sfb" : "sacp");
        if (dc.group_size > 1)
            printf(", %d groups of %d workers", comm.nworkers / dc.group_size, dc.group_size);
        printf("\n");
        if (dc.sfb != DT_SFB_OFF) dc.plan_out = stdout;
    }

    dt_sync *sync = NULL;
    if (dc.mode == DT_MODE_SERIAL)
        s = dt_sync_serial_create(&sync);
    else if (dc.mode == DT_MODE_ALLREDUCE)
        s = dt_sync_allreduce_create(&sync, &comm, &dc);
    else
        s = dt_sync_ps_create(&sync, &comm, &dc);
    dt_train_summary sum;
    if (s == DT_OK) s = dt_train_run(&spec, &o, sync, &sum);
    s = close_timeline(dc.timeline, &comm, &dc, s, env);
    /* Interrupted: every worker stopped at a step, the servers were told to
     * stop, so the job can end without MPI_Abort. */
    env->orderly = s == DT_ERR_INTERRUPTED;
    if (sync) sync->free(sync);
    dt_timeline_free(dc.timeline); /* after the strategy: its threads record until it is freed */
    dt_comm_free(&comm);
    return cli_report(s, env);
}

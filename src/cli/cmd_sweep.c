/* dtrain sweep MODEL.cfg --grid KEY=V1,V2,... [KEY=...] [--ranks-per-trial n]
 *              [--out F.jsonl] [--quiet] [train flags]
 *
 * The grid's trials (the cartesian product of its axes) are spread over the
 * job's ranks: MPI_COMM_WORLD is split into groups of n consecutive ranks and
 * group g runs trials g, g + G, g + 2G, ... (round-robin), each a train run
 * on the group's communicator (serial for n = 1, allreduce otherwise, or
 * the trial's --mode, parameter servers included) with the train flags
 * given plus the trial's grid values. A trial that fails (diverges, a batch
 * the data cannot fill) is recorded with its message and the sweep goes on.
 * Then rank 0 gathers every outcome, writes one JSON record per trial to
 * --out and prints the table and a summary line.
 *
 * Every rank checks the whole command and every trial's flags before any
 * trial runs, so bad input is the same usage error (exit 2) everywhere. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/opts.h"
#include "cli.h"
#include "dtrain/job.h"
#include "dtrain/mem.h"
#include "dtrain/timer.h"
#include "grid.h"
#include "dtrain/paths.h"
#include "sweep_report.h"

#define MAX_WORDS 512

static const char sweep_usage[] =
    "usage: dtrain sweep MODEL.cfg --grid KEY=V1,V2,... [KEY=V1,...] [flags] [train flags]\n"
    "  runs every combination of the grid's values as a training run; started by\n"
    "  dtrain launch -n N (or mpirun), the trials are spread over the ranks\n"
    "  --grid KEY=V1,V2,...    keys: lr, batch, epochs, max-steps, seed, warmup-epochs,\n"
    "                          lr-scaling, mode, servers, staleness, straggle, slow-worker,\n"
    "                          optimizer, accumulate (each is the train flag --KEY), or any\n"
    "                          [net] key of the model file (momentum, decay, beta1, policy,\n"
    "                          steps, min_lr ...: its train flag)\n"
    "  --ranks-per-trial n     ranks of one trial (default 1; --mode allreduce when\n"
    "                          n > 1 unless --mode or the grid says another); n must\n"
    "                          divide the job's ranks\n"
    "  --out F.jsonl           one JSON record per trial: grid values, mode, status,\n"
    "                          error, test accuracy and loss, train loss, img/s, wall\n"
    "                          time, parameter servers' staleness and clock gap\n"
    "  --quiet                 no line per finished trial (stderr)\n"
    "  train flags             given to every trial (--epochs, --max-steps, --dataset,\n"
    "                          --mode, --servers, --straggle, --threads ...; not --log,\n"
    "                          --timeline, --checkpoint, --resume)\n"
    "exit status: 0 if at least one trial succeeded, 1 if none did, the sweep was\n"
    "  interrupted or --out could not be written, 2 for bad usage (nothing runs)\n";

typedef struct {
    cli_grid grid;
    int ranks_per_trial, quiet, help;
    const char *out_path;
    int ntrain;                 /* MODEL.cfg and the train flags every trial gets */
    char *train[MAX_WORDS];
    MPI_Comm group;             /* this rank's group */
    int ngroups, gid, leader;   /* groups, this rank's group, group rank 0 */
} sweep;

/* Splits argv into the grid, the sweep's own flags and the train words:
 * --grid takes the next word (so that a malformed one is named) and every
 * following KEY=VALUES word. */
static dt_status split_args(sweep *sw, int argc, char **argv) {
    dt_opt own[] = {
        {"--ranks-per-trial", DT_OPT_INT, &sw->ranks_per_trial, 1, 65536, 0},
        {"--out", DT_OPT_STR, &sw->out_path, 0, 0, 0},
        {"--quiet", DT_OPT_FLAG, &sw->quiet, 0, 0, 0},
        {"--help", DT_OPT_FLAG, &sw->help, 0, 0, 0},
    };
    const int nown = (int)(sizeof own / sizeof *own);
    char *mine[MAX_WORDS];
    int nmine = 0, grid_given = 0;
    for (int i = 0; i < argc; i++) {
        char *w = argv[i];
        if (strcmp(w, "--grid") == 0 || strncmp(w, "--grid=", 7) == 0) {
            int before = sw->grid.naxes;
            if (w[6] == '=') DT_TRY(cli_grid_add(&sw->grid, w + 7));
            else if (i + 1 < argc && argv[i + 1][0] != '-') DT_TRY(cli_grid_add(&sw->grid, argv[++i]));
            while (i + 1 < argc && argv[i + 1][0] != '-' && strchr(argv[i + 1], '='))
                DT_TRY(cli_grid_add(&sw->grid, argv[++i]));
            if (sw->grid.naxes == before)
                return dt_fail(DT_ERR_USAGE, "--grid needs KEY=V1,V2,... (e.g. --grid lr=0.01,0.05 batch=64,128)");
            grid_given = 1;
            continue;
        }
        char name[64];
        size_t len = strcspn(w, "=");
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), w);
        const dt_opt *f = dt_opt_find(own, nown, name);
        if (f ? nmine + 2 > MAX_WORDS : sw->ntrain == MAX_WORDS)
            return dt_fail(DT_ERR_USAGE, "sweep: more than %d arguments", MAX_WORDS);
        if (!f) {
            sw->train[sw->ntrain++] = w;
            continue;
        }
        mine[nmine++] = w;
        if (f->type != DT_OPT_FLAG && !w[len] && i + 1 < argc) mine[nmine++] = argv[++i];
    }
    int npos;
    DT_TRY(dt_opts_parse(nmine, mine, own, nown, NULL, 0, &npos));
    if (!sw->help && !grid_given)
        return dt_fail(DT_ERR_USAGE, "sweep: --grid KEY=V1,V2,... is required (see --help)");
    return DT_OK;
}

/* The sweep's files: the trials' inputs and --out. */
enum { NSWEEP_PATHS = 3 };
static const dt_path *sweep_paths(const sweep *sw, const dt_job_args *a, dt_path p[NSWEEP_PATHS]) {
    p[0] = (dt_path){"MODEL.cfg", a->model, "the model file", 0};
    p[1] = (dt_path){"--weights", a->weights, "the checkpoint given to --weights", 0};
    p[2] = (dt_path){"--out", sw->out_path, NULL, 0};
    return p;
}

/* Flags that would make trials collide (one log or checkpoint file for
 * all) or leave the two supported layouts. */
static dt_status check_base(const sweep *sw, const dt_job_args *a) {
    dt_path paths[NSWEEP_PATHS];
    if (a->log) return dt_fail(DT_ERR_USAGE, "--log: not for a sweep (each trial's record goes to --out)");
    if (a->timeline) return dt_fail(DT_ERR_USAGE, "--timeline: not for a sweep (trials would share the file)");
    if (a->ckpt || a->ckpt_every || a->resume)
        return dt_fail(DT_ERR_USAGE, "--%s: not for a sweep (trials keep no checkpoints)",
                       a->resume ? "resume" : "checkpoint");
    for (int i = 0; i < sw->grid.naxes; i++) {
        const char *flag = sw->grid.axes[i].flag;
        size_t n = strlen(flag);
        for (int w = 0; w < sw->ntrain; w++)
            if (strncmp(sw->train[w], flag, n) == 0 && (sw->train[w][n] == '\0' || sw->train[w][n] == '='))
                return dt_fail(DT_ERR_USAGE, "--grid: %s is swept; do not also give %s", sw->grid.axes[i].key,
                               flag);
    }
    return dt_paths_check(sweep_paths(sw, a, paths), NSWEEP_PATHS);
}

/* Trial t's train words: the common ones, then --KEY VALUE per axis. */
static int trial_words(const sweep *sw, long t, char **words) {
    int n = 0;
    for (int i = 0; i < sw->ntrain; i++) words[n++] = sw->train[i];
    for (int i = 0; i < sw->grid.naxes; i++) {
        words[n++] = (char *)sw->grid.axes[i].flag;
        words[n++] = (char *)cli_grid_value(&sw->grid, t, i);
    }
    return n;
}

static dt_status prepare_trial(const sweep *sw, long t, dt_job_plan *plan) {
    char *words[MAX_WORDS + 2 * CLI_GRID_MAX_AXES];
    dt_job_args a;
    DT_TRY(dt_job_parse(&a, trial_words(sw, t, words), words));
    return dt_job_prepare(plan, &a, sw->ranks_per_trial, 1);
}

/* Every trial's flags, before anything runs: a bad value is a usage error
 * naming the trial, not a failed trial. The common flags first, so that
 * their errors (a missing model file) do not name a trial. */
static dt_status check_trials(const sweep *sw, const dt_job_args *base, dt_job_plan *plan) {
    DT_TRY(dt_job_prepare(plan, base, sw->ranks_per_trial, 1));
    for (long t = 0; t < sw->grid.ntrials; t++) {
        dt_status s = prepare_trial(sw, t, plan);
        if (s == DT_OK) continue;
        char msg[512], desc[256];
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        cli_grid_describe(&sw->grid, t, desc, sizeof desc);
        return dt_fail(s, "--grid trial %ld (%s): %s", t + 1, desc, msg);
    }
    return DT_OK;
}

/* SIGINT/SIGTERM on any rank of the group: the group's ranks must agree
 * before starting a trial, or some would wait in it for the others. */
static dt_status group_stopped(const sweep *sw, cli_signals *sig, int *stopped) {
    int v = atomic_load(&sig->req.stop);
    if (sw->ranks_per_trial > 1) {
        MPI_Request req;
        DT_TRY(dt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, sw->group, &req),
                            "sweep stop check (MPI_Iallreduce)"));
        DT_TRY(dt_mpi_wait(&req, 1, 0, NULL, NULL, "sweep stop check"));
    }
    *stopped = v;
    return DT_OK;
}

/* The trial's outcome on the group's leader from every rank of the group
 * (peers: one per rank, in group order): failed if any rank failed, with
 * the first one's message (servers come first, so a server's failure is
 * named before the workers' that follow from it); otherwise the outcome of
 * worker 0, the first rank that trained (a server trains no steps). */
static void merge_outcomes(cli_trial *r, const cli_trial *peers, int n) {
    for (int i = 0; i < n; i++)
        if (peers[i].state != TRIAL_OK) {
            *r = peers[i];
            return;
        }
    for (int i = 0; i < n; i++)
        if (peers[i].steps > 0) {
            *r = peers[i];
            return;
        }
}

/* Runs trial t on this rank's group; r: the outcome (the whole group's on
 * the leader, given peers to gather into). Fails only if the group could
 * not exchange the outcomes. */
static dt_status run_trial(const sweep *sw, long t, const cli_env *env, cli_signals *sig,
                           dt_job_plan *plan, cli_trial *peers, cli_trial *r) {
    memset(r, 0, sizeof *r);
    r->trial = t;
    r->group = sw->gid;
    r->ranks = sw->ranks_per_trial;
    dt_train_summary sum;
    memset(&sum, 0, sizeof sum);
    double t0 = dt_now();
    dt_status s = prepare_trial(sw, t, plan);
    if (s == DT_OK) {
        snprintf(r->mode, sizeof r->mode, "%s", dt_mode_name(plan->dist.mode));
        s = dt_job_run(plan, sw->group, env->local_ranks, &sig->req, NULL, &sum);
    }
    r->wall_s = dt_now() - t0;
    r->status = s;
    r->state = s == DT_OK ? TRIAL_OK : TRIAL_FAILED;
    if (s != DT_OK) snprintf(r->error, sizeof r->error, "%s", dt_last_error());
    r->steps = sum.steps;
    r->test_accuracy = sum.test_accuracy;
    r->test_loss = sum.test_loss;
    r->train_loss = sum.train_loss;
    r->images_per_sec = sum.images_per_sec;
    r->has_staleness = sum.has_staleness;
    r->staleness_mean = sum.staleness_mean;
    r->staleness_max = sum.staleness_max;
    r->max_clock_gap = sum.max_clock_gap;
    if (sw->ranks_per_trial == 1) return DT_OK;
    MPI_Request req;
    DT_TRY(dt_mpi_check(MPI_Igather(r, (int)sizeof *r, MPI_BYTE, peers, (int)sizeof *r, MPI_BYTE, 0, sw->group,
                                    &req),
                        "trial outcome (MPI_Igather)"));
    DT_TRY(dt_mpi_wait(&req, 1, 0, NULL, NULL, "trial outcome (MPI_Igather)"));
    if (sw->leader) merge_outcomes(r, peers, sw->ranks_per_trial);
    return DT_OK;
}

/* "trial 3/8 (lr=0.05 batch=64) on ranks 2-3: ok, test accuracy 0.8123, 12.3 s" */
static void print_trial(const sweep *sw, const cli_trial *r, int world_rank) {
    char desc[256], ranks[32];
    cli_grid_describe(&sw->grid, r->trial, desc, sizeof desc);
    if (sw->ranks_per_trial > 1)
        snprintf(ranks, sizeof ranks, "ranks %d-%d", world_rank, world_rank + sw->ranks_per_trial - 1);
    else
        snprintf(ranks, sizeof ranks, "rank %d", world_rank);
    if (r->state == TRIAL_OK)
        fprintf(stderr, "dtrain sweep: trial %ld/%ld (%s) on %s: ok, test accuracy %.4f, %.1f s\n", r->trial + 1,
                sw->grid.ntrials, desc, ranks, r->test_accuracy, r->wall_s);
    else
        fprintf(stderr, "dtrain sweep: trial %ld/%ld (%s) on %s: %s: %s\n", r->trial + 1, sw->grid.ntrials, desc,
                ranks, r->state == TRIAL_FAILED ? "failed" : "skipped", r->error);
}

/* Where the outcomes go; allocated before any trial runs, so that the
 * end of the sweep has nothing left to fail but MPI itself. */
typedef struct {
    cli_trial *mine;            /* leaders: this group's trials, in the order run */
    int nmine;
    cli_trial *peers;           /* leaders of groups of n > 1: one trial's outcome on each rank */
    int *counts, *displs;       /* rank 0: bytes from each rank and where they land */
    cli_trial *got, *all;       /* rank 0: as received; by trial index */
    FILE *out;                  /* rank 0: --out, or NULL */
} results;

static dt_status results_open(results *res, const sweep *sw, const cli_env *env) {
    long n = sw->grid.ntrials;
    res->nmine = sw->gid < n ? (int)((n - sw->gid + sw->ngroups - 1) / sw->ngroups) : 0;
    DT_TRY(dt_alloc_bytes((void **)&res->mine, (size_t)res->nmine * sizeof *res->mine, "sweep results"));
    if (sw->leader && sw->ranks_per_trial > 1)
        DT_TRY(dt_alloc_bytes((void **)&res->peers, (size_t)sw->ranks_per_trial * sizeof *res->peers,
                              "sweep results"));
    if (env->rank != 0) return DT_OK;
    DT_TRY(dt_alloc_bytes((void **)&res->counts, (size_t)env->world * sizeof *res->counts, "sweep results"));
    DT_TRY(dt_alloc_bytes((void **)&res->displs, (size_t)env->world * sizeof *res->displs, "sweep results"));
    DT_TRY(dt_alloc_bytes((void **)&res->got, (size_t)n * sizeof *res->got, "sweep results"));
    DT_TRY(dt_alloc_bytes((void **)&res->all, (size_t)n * sizeof *res->all, "sweep results"));
    dt_path out = {"--out", sw->out_path, NULL, 0};
    DT_TRY(dt_paths_make_parents(&out, 1));
    if (sw->out_path && !(res->out = fopen(sw->out_path, "w")))
        return dt_fail(DT_ERR_IO, "--out %s: cannot open: %s", sw->out_path, strerror(errno));
    return DT_OK;
}

/* Frees everything; an --out still open here is incomplete anyway. */
static void results_free(results *res) {
    if (res->out) fclose(res->out);
    dt_free(res->mine);
    dt_free(res->peers);
    dt_free(res->counts);
    dt_free(res->displs);
    dt_free(res->got);
    dt_free(res->all);
    memset(res, 0, sizeof *res);
}

/* Leaders' outcomes -> rank 0's res->all, by trial index. Waits by polling
 * with a sleep: rank 0 may wait here while other groups still train. */
static dt_status gather(const sweep *sw, results *res, const cli_env *env) {
    int bytes = sw->leader ? res->nmine * (int)sizeof *res->mine : 0;
    MPI_Request req;
    DT_TRY(dt_mpi_check(MPI_Igather(&bytes, 1, MPI_INT, res->counts, 1, MPI_INT, 0, MPI_COMM_WORLD, &req),
                        "sweep results (MPI_Igather)"));
    DT_TRY(dt_mpi_wait(&req, 1, 0, NULL, NULL, "sweep results (MPI_Igather)"));
    long total = 0;
    if (env->rank == 0)
        for (int r = 0; r < env->world; r++) {
            res->displs[r] = (int)total;
            total += res->counts[r];
        }
    DT_TRY(dt_mpi_check(MPI_Igatherv(res->mine, bytes, MPI_BYTE, res->got, res->counts, res->displs, MPI_BYTE, 0,
                                     MPI_COMM_WORLD, &req),
                        "sweep results (MPI_Igatherv)"));
    DT_TRY(dt_mpi_wait(&req, 1, 0, NULL, NULL, "sweep results (MPI_Igatherv)"));
    if (env->rank != 0) return DT_OK;
    long n = sw->grid.ntrials;
    if (total != n * (long)sizeof *res->got)
        return dt_fail(DT_ERR_INTERNAL, "sweep: %ld outcomes arrived for %ld trials", total / (long)sizeof *res->got, n);
    for (long t = 0; t < n; t++) res->all[t].trial = -1;
    for (long i = 0; i < n; i++) {
        long t = res->got[i].trial;
        if (t < 0 || t >= n || res->all[t].trial != -1)
            return dt_fail(DT_ERR_INTERNAL, "sweep: trial %ld reported twice or out of range", t);
        res->all[t] = res->got[i];
    }
    return DT_OK;
}

/* Rank 0: --out, the table, the summary line; the sweep's exit code. */
static int finish(const sweep *sw, results *res, const cli_env *env, double wall_s) {
    long n = sw->grid.ntrials, ok = 0, interrupted = 0;
    for (long t = 0; t < n; t++) {
        ok += res->all[t].state == TRIAL_OK;
        interrupted += res->all[t].state == TRIAL_SKIPPED || res->all[t].status == DT_ERR_INTERRUPTED;
    }
    dt_status s = res->out ? cli_sweep_write_jsonl(res->out, sw->out_path, &sw->grid, res->all, n) : DT_OK;
    if (res->out && fclose(res->out) != 0 && s == DT_OK)
        s = dt_fail(DT_ERR_IO, "--out %s: write failed: %s", sw->out_path, strerror(errno));
    res->out = NULL;
    cli_sweep_print_table(stdout, &sw->grid, res->all, n);
    cli_sweep_print_summary(stdout, &sw->grid, res->all, n, env->world, sw->ranks_per_trial, wall_s);
    fflush(stdout);
    if (s != DT_OK) return cli_report(s, env);
    if (interrupted) return cli_report(dt_fail(DT_ERR_INTERRUPTED, "sweep interrupted: %ld trial(s) not finished",
                                               interrupted), env);
    if (!ok) return cli_report(dt_fail(DT_ERR_NUMERIC, "sweep: every trial failed"), env);
    return 0;
}

/* Usage errors are found the same way on every rank: rank 0 says it. */
static int usage_error(dt_status s, const cli_env *env) {
    return env->rank == 0 ? cli_report(s, env) : dt_status_exit_code(s);
}

/* After an MPI failure mid-sweep the ranks no longer move together: take
 * the job down, as a failed train run does. */
static int fatal(dt_status s, const cli_env *env) {
    int code = cli_report(s, env);
    if (env->world > 1) MPI_Abort(MPI_COMM_WORLD, code);
    return code;
}

/* This group's trials, then the gathering and rank 0's report; every rank
 * returns rank 0's exit code. */
static int run_sweep(const sweep *sw, results *res, dt_job_plan *plan, const cli_env *env,
                     cli_signals *sig, double start) {
    dt_status s = DT_OK;
    int stopped = 0;
    for (long t = sw->gid, k = 0; t < sw->grid.ntrials; t += sw->ngroups, k++) {
        cli_trial r;
        if (!stopped && (s = group_stopped(sw, sig, &stopped)) != DT_OK) return fatal(s, env);
        if (stopped) {
            r = (cli_trial){.trial = t, .state = TRIAL_SKIPPED, .status = DT_ERR_INTERRUPTED, .group = sw->gid,
                            .ranks = sw->ranks_per_trial};
            snprintf(r.error, sizeof r.error, "not run: the sweep was interrupted");
        } else if ((s = run_trial(sw, t, env, sig, plan, res->peers, &r)) != DT_OK) {
            return fatal(s, env);
        }
        if (!sw->leader) continue;
        res->mine[k] = r;
        if (!sw->quiet) print_trial(sw, &r, env->rank);
    }
    if ((s = gather(sw, res, env)) != DT_OK) return fatal(s, env);
    int code = env->rank == 0 ? finish(sw, res, env, dt_now() - start) : 0;
    MPI_Request req;
    s = dt_mpi_check(MPI_Ibcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD, &req), "sweep end (MPI_Ibcast)");
    if (s == DT_OK) s = dt_mpi_wait(&req, 1, 0, NULL, NULL, "sweep end (MPI_Ibcast)");
    return s == DT_OK ? code : fatal(s, env);
}

int cmd_sweep(int argc, char **argv, const cli_env *env, cli_signals *sig) {
    double start = dt_now();
    sweep sw;
    memset(&sw, 0, sizeof sw);
    cli_grid_init(&sw.grid);
    sw.ranks_per_trial = 1;
    sw.group = MPI_COMM_NULL;
    dt_status s = split_args(&sw, argc, argv);
    if (s == DT_OK && sw.help) {
        if (env->rank == 0) fputs(sweep_usage, stdout);
        return 0;
    }
    dt_job_args base;
    if (s == DT_OK) s = dt_job_parse(&base, sw.ntrain, sw.train);
    if (s == DT_OK) s = check_base(&sw, &base);
    if (s == DT_OK && env->world % sw.ranks_per_trial != 0)
        s = dt_fail(DT_ERR_USAGE, "--ranks-per-trial %d does not divide the job's %d rank%s", sw.ranks_per_trial,
                    env->world, env->world == 1 ? "" : "s");
    dt_job_plan plan;
    if (s == DT_OK) s = check_trials(&sw, &base, &plan);
    if (s != DT_OK) return usage_error(s, env);

    sw.ngroups = env->world / sw.ranks_per_trial;
    sw.gid = env->rank / sw.ranks_per_trial;
    sw.leader = env->rank % sw.ranks_per_trial == 0;
    s = dt_mpi_check(MPI_Comm_split(MPI_COMM_WORLD, sw.gid, env->rank, &sw.group), "sweep groups (MPI_Comm_split)");
    results res;
    memset(&res, 0, sizeof res);
    if (s == DT_OK) s = results_open(&res, &sw, env);
    /* Start only if every rank could (rank 0 opened --out, all allocated). */
    int ok = s == DT_OK;
    int rc = MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (s == DT_OK) s = dt_mpi_check(rc, "sweep start (MPI_Allreduce)");
    int code;
    if (s != DT_OK)
        code = cli_report(s, env);
    else if (!ok)
        code = 1; /* another rank could not start and said why */
    else
        code = run_sweep(&sw, &res, &plan, env, sig, start);
    results_free(&res);
    if (sw.group != MPI_COMM_NULL) MPI_Comm_free(&sw.group);
    return code;
}

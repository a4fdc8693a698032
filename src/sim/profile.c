/* Compute profiles for the scaling simulator: measured on this machine, or
 * written to and read from a JSON file. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/codec.h"
#include "dtrain/json.h"
#include "dtrain/mem.h"
#include "dtrain/net.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "dtrain/sim.h"
#include "dtrain/textfile.h"
#include "dtrain/timer.h"

#define PROFILE_FORMAT "dtrain-profile"
#define PROFILE_VERSION 3 /* 2: topk_s; 3: workers, straggler. Versions 1 and 2 still read */
#define PROFILE_MAX_BYTES ((size_t)1 << 20) /* ~100 bytes per layer; refuse anything huge */
#define PROFILE_WARMUP 3                    /* steps before timing: oneDNN builds its kernels */

/* Median of a top-k selection at R = 1% over every parameter, as a worker
 * runs it per bucket (codec.c: the residual added, a radix select, the
 * pick, the bucket zeroed): its histogram passes cost several gradient
 * sums each. */
static dt_status time_topk(dt_profile *p, const dt_net *net, double *t) {
    size_t n = net->nparams, k = dt_topk_count(0.01, n);
    float *g = NULL, *residual = NULL;
    uint32_t *pairs = NULL;
    dt_status s = dt_alloc_floats(&g, n, "top-k timing");
    if (s == DT_OK) s = dt_alloc_floats(&residual, n, "top-k timing");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&pairs, 2 * sizeof *pairs * k, "top-k timing");
    for (int r = 0; s == DT_OK && r < p->reps; r++) {
        memcpy(g, net->grads, n * sizeof *g); /* the gradients of the profiled backward passes */
        double t0 = dt_now();
        dt_topk_encode(g, residual, n, k, pairs);
        t[r] = dt_now() - t0;
    }
    if (s == DT_OK) p->topk_s = dt_median(t, p->reps);
    dt_free(g);
    dt_free(residual);
    dt_free(pairs);
    return s;
}

/* Medians of the optimiser's update and of a gradient sum over every parameter. */
static dt_status time_update(dt_profile *p, dt_net *net, const dt_model_spec *spec, double *t) {
    float *state = NULL, *acc = NULL;
    dt_optim *opt = NULL;
    dt_status s = dt_optim_create_for_net(&opt, &state, &spec->optim, net);
    if (s == DT_OK) s = dt_alloc_floats(&acc, net->nparams, "gradient sum");
    for (int r = 0; s == DT_OK && r < p->reps; r++) {
        double t0 = dt_now();
        dt_optim_update_net(opt, (float)spec->sched.base_lr, r + 1, net, state, 0, net->nparams);
        t[r] = dt_now() - t0;
    }
    if (s == DT_OK) p->update_s = dt_median(t, p->reps);
    for (int r = 0; s == DT_OK && r < p->reps; r++) {
        /* The loop a server runs per worker's gradient (ps_server.c). */
        double t0 = dt_now();
        for (size_t i = 0; i < net->nparams; i++) acc[i] += net->grads[i];
        t[r] = dt_now() - t0;
    }
    if (s == DT_OK) p->sum_s = dt_median(t, p->reps);
    dt_free(state);
    dt_optim_free(opt);
    dt_free(acc);
    return s;
}

/* The layers' parameter counts, shapes and timings into p. */
static void fill_layers(dt_profile *p, const dt_net *net, const double *fwd, const double *bwd) {
    double fc_flops = 0, fc_s = 0;
    p->nlayers = net->nlayers;
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        dt_sim_layer *sl = &p->layers[i];
        memset(sl, 0, sizeof *sl);
        snprintf(sl->kind, sizeof sl->kind, "%s", l->ops->name);
        sl->fwd_s = fwd[i];
        sl->bwd_s = bwd[i];
        sl->params = l->nw + l->nb;
        if (l->ops->caps & DT_LAYER_CAP_FACTORS) {
            sl->fc_out = (int)dt_shape_size(l->out);
            sl->fc_in = (int)dt_shape_size(l->in);
            fc_flops += (double)l->ops->flops(l) * p->batch;
            fc_s += fwd[i];
        }
    }
    p->gemm_gflops = fc_s > 0 ? fc_flops / fc_s / 1e9 : 0;
}

/* The workers computing at once: each its own net on the shared input.
 * Their timed steps start together, as a synchronous job's do. */
typedef struct {
    const float *x;         /* (batch, input): read only, shared */
    const dt_label *y;       /* (batch) */
    int batch, threads, reps, workers;
    pthread_barrier_t rep_start;
    pthread_mutex_t mu;     /* guards go */
    pthread_cond_t cv;
    int go;                 /* 0: wait, 1: measure, -1: abandon (a companion did not start) */
    atomic_int stop;        /* worker 0 has finished all its timings */
} profile_team;

typedef struct {
    profile_team *team;
    dt_net *net;
    double *layer_s;        /* (2, nlayers): one step's forward, then backward, times */
    double *step_s;         /* (reps): seconds of each timed step */
    double *per_layer;      /* worker 0: (2 * nlayers, reps), layer-major: fwd of layer i at
                               row 2i, bwd at 2i + 1; NULL for the companions */
    dt_status status;
    pthread_t thread;
} profile_worker;

/* Warm-up, then `reps` timed steps, each begun at the barrier. Always
 * reaches every barrier, so a failure cannot leave the team waiting. */
static void time_steps(profile_worker *w) {
    profile_team *team = w->team;
    size_t L = (size_t)w->net->nlayers, reps = (size_t)team->reps;
    for (int i = 0; i < PROFILE_WARMUP; i++) {
        dt_net_forward(w->net, team->x, team->batch, 1);
        dt_net_loss(w->net, team->y, team->batch);
        dt_net_backward(w->net, team->x, team->batch, NULL, NULL);
    }
    for (size_t r = 0; r < reps; r++) {
        pthread_barrier_wait(&team->rep_start);
        if (w->status != DT_OK) continue;
        double t0 = dt_now();
        w->status = dt_net_time_step(w->net, team->x, team->y, team->batch, w->layer_s, w->layer_s + L);
        w->step_s[r] = dt_now() - t0;
        for (size_t i = 0; w->per_layer && i < L; i++) {
            w->per_layer[2 * i * reps + r] = w->layer_s[i];
            w->per_layer[(2 * i + 1) * reps + r] = w->layer_s[L + i];
        }
    }
}

/* A companion: waits for the team to be complete, takes its timed steps,
 * then keeps computing (untimed) while worker 0 times the update, the sum
 * and top-k, so that those too are measured beside the others' compute. */
static void *companion_main(void *arg) {
    profile_worker *w = arg;
    profile_team *team = w->team;
    omp_set_num_threads(team->threads); /* a new thread starts with OpenMP's default */
    pthread_mutex_lock(&team->mu);
    while (team->go == 0) pthread_cond_wait(&team->cv, &team->mu);
    int go = team->go;
    pthread_mutex_unlock(&team->mu);
    if (go < 0) return NULL;
    time_steps(w);
    while (w->status == DT_OK && !atomic_load(&team->stop))
        w->status = dt_net_time_step(w->net, team->x, team->y, team->batch, w->layer_s,
                                     w->layer_s + w->net->nlayers);
    return NULL;
}

static dt_status team_init(profile_team *team) {
    if (pthread_barrier_init(&team->rep_start, NULL, (unsigned)team->workers) != 0)
        return dt_fail(DT_ERR_NOMEM, "profile: cannot create a barrier for %d workers", team->workers);
    if (pthread_mutex_init(&team->mu, NULL) != 0) {
        pthread_barrier_destroy(&team->rep_start);
        return dt_fail(DT_ERR_NOMEM, "profile: cannot create a mutex");
    }
    if (pthread_cond_init(&team->cv, NULL) != 0) {
        pthread_mutex_destroy(&team->mu);
        pthread_barrier_destroy(&team->rep_start);
        return dt_fail(DT_ERR_NOMEM, "profile: cannot create a condition variable");
    }
    return DT_OK;
}

static void team_destroy(profile_team *team) {
    pthread_cond_destroy(&team->cv);
    pthread_mutex_destroy(&team->mu);
    pthread_barrier_destroy(&team->rep_start);
}

static void team_release(profile_team *team, int go) {
    pthread_mutex_lock(&team->mu);
    team->go = go;
    pthread_cond_broadcast(&team->cv);
    pthread_mutex_unlock(&team->mu);
}

/* Starts workers 1.. on threads of their own; DT_ERR_INTERNAL (the others
 * released and joined) when one cannot start. */
static dt_status start_companions(profile_team *team, profile_worker *ws) {
    for (int k = 1; k < team->workers; k++) {
        int err = pthread_create(&ws[k].thread, NULL, companion_main, &ws[k]);
        if (err) {
            team_release(team, -1);
            for (int j = 1; j < k; j++) pthread_join(ws[j].thread, NULL);
            return dt_fail(DT_ERR_INTERNAL, "profile: cannot start a thread for worker %d of %d: %s", k + 1,
                           team->workers, strerror(err));
        }
    }
    team_release(team, 1);
    return DT_OK;
}

/* How much later the slowest of the workers ends a step they begin together
 * than worker 0 alone: the median over reps of the slowest step, over the
 * median of worker 0's (1 for one worker). */
static double straggler_ratio(const profile_worker *ws, int workers, int reps, double *scratch) {
    for (int r = 0; r < reps; r++) {
        scratch[r] = ws[0].step_s[r];
        for (int k = 1; k < workers; k++) scratch[r] = fmax(scratch[r], ws[k].step_s[r]);
    }
    double slowest = dt_median(scratch, reps);
    memcpy(scratch, ws[0].step_s, sizeof(double) * (size_t)reps);
    double own = dt_median(scratch, reps);
    return own > 0 ? fmax(1, slowest / own) : 1;
}

/* Each worker's net and timing buffers. */
static dt_status worker_create(profile_worker *w, profile_team *team, const dt_model_spec *spec, int first) {
    w->team = team;
    DT_TRY(dt_net_create(&w->net, spec, spec->batch, 1));
    size_t L = (size_t)w->net->nlayers, reps = (size_t)team->reps;
    dt_status s = dt_alloc_bytes((void **)&w->layer_s, 2 * L * sizeof(double), "profile");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&w->step_s, reps * sizeof(double), "profile");
    if (s == DT_OK && first) s = dt_alloc_bytes((void **)&w->per_layer, 2 * L * reps * sizeof(double), "profile");
    return s;
}

static void worker_free(profile_worker *w) {
    dt_net_free(w->net);
    dt_free(w->layer_s);
    dt_free(w->step_s);
    dt_free(w->per_layer);
}

/* Worker 0's share once the team runs: its timed steps, then the update,
 * sum and top-k timings, and the profile filled in; then the companions
 * are told to stop. */
static dt_status measure_team(dt_profile *p, const dt_model_spec *spec, profile_team *team, profile_worker *ws,
                              double *t) {
    profile_worker *w0 = &ws[0];
    time_steps(w0);
    dt_status s = w0->status;
    int L = w0->net->nlayers, reps = team->reps;
    double *fwd = w0->layer_s, *bwd = w0->layer_s + L; /* its last step's, replaced by the medians */
    for (int i = 0; s == DT_OK && i < L; i++) {
        fwd[i] = dt_median(w0->per_layer + (size_t)(2 * i) * (size_t)reps, reps);
        bwd[i] = dt_median(w0->per_layer + (size_t)(2 * i + 1) * (size_t)reps, reps);
    }
    if (s == DT_OK) s = time_update(p, w0->net, spec, t);
    if (s == DT_OK) s = time_topk(p, w0->net, t);
    atomic_store(&team->stop, 1);
    for (int k = 1; k < team->workers; k++) {
        pthread_join(ws[k].thread, NULL);
        if (s == DT_OK) s = ws[k].status;
    }
    if (s == DT_OK) {
        fill_layers(p, w0->net, fwd, bwd);
        p->straggler = straggler_ratio(ws, team->workers, reps, t);
    }
    return s;
}

dt_status dt_profile_measure(dt_profile *p, const dt_model_spec *spec, int threads, int reps, int workers) {
    if (reps < 1) return dt_fail(DT_ERR_USAGE, "profile: reps must be at least 1, not %d", reps);
    if (workers < 1 || workers > DT_PROFILE_MAX_WORKERS)
        return dt_fail(DT_ERR_USAGE, "profile: workers must be in [1, %d], not %d", DT_PROFILE_MAX_WORKERS,
                       workers);
    memset(p, 0, sizeof *p);
    snprintf(p->model, sizeof p->model, "%s", spec->path);
    p->batch = spec->batch;
    p->threads = threads;
    p->reps = reps;
    p->workers = workers;
    profile_team team = {.batch = spec->batch, .threads = threads, .reps = reps, .workers = workers};
    profile_worker ws[DT_PROFILE_MAX_WORKERS];
    memset(ws, 0, sizeof ws);
    float *x = NULL;
    dt_label *y = NULL;
    double *t = NULL;
    size_t nx;
    dt_status s = dt_mul_size(&nx, dt_shape_size(spec->input), (size_t)spec->batch, "profile input");
    if (s == DT_OK) s = dt_alloc_floats(&x, nx, "profile input");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&y, (size_t)spec->batch * sizeof *y, "profile labels");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&t, sizeof(double) * (size_t)reps, "profile");
    for (int k = 0; s == DT_OK && k < workers; k++) s = worker_create(&ws[k], &team, spec, k == 0);
    if (s == DT_OK) {
        /* Timings do not depend on the values; random ones keep ReLUs and
         * max-pooling on their usual mix of branches. */
        dt_rng rng = dt_rng_seed(1);
        for (size_t i = 0; i < nx; i++) x[i] = dt_rng_uniform(&rng);
        for (int i = 0; i < spec->batch; i++) y[i] = (dt_label)dt_rng_below(&rng, (uint32_t)ws[0].net->classes);
        team.x = x;
        team.y = y;
        s = team_init(&team);
        if (s == DT_OK) {
            s = start_companions(&team, ws);
            if (s == DT_OK) s = measure_team(p, spec, &team, ws, t);
            team_destroy(&team);
        }
    }
    for (int k = 0; k < workers; k++) worker_free(&ws[k]);
    dt_free(x);
    dt_free(y);
    dt_free(t);
    return s;
}

double dt_profile_step_s(const dt_profile *p) {
    double t = p->update_s;
    for (int i = 0; i < p->nlayers; i++) t += p->layers[i].fwd_s + p->layers[i].bwd_s;
    return t;
}

dt_status dt_profile_write(const dt_profile *p, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return dt_fail(DT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    char model[1024];
    fprintf(f,
            "{\"format\":\"%s\",\"version\":%d,\"model\":\"%s\",\"batch\":%d,\"threads\":%d,\"reps\":%d,\n"
            " \"workers\":%d,\"straggler\":%.6g,\n"
            " \"update_s\":%.9g,\"sum_s\":%.9g,\"gemm_gflops\":%.6g,\"topk_s\":%.9g,\n \"layers\":[\n",
            PROFILE_FORMAT, PROFILE_VERSION, dt_json_escape(model, sizeof model, p->model), p->batch,
            p->threads, p->reps, p->workers, p->straggler, p->update_s, p->sum_s, p->gemm_gflops, p->topk_s);
    for (int i = 0; i < p->nlayers; i++) {
        const dt_sim_layer *l = &p->layers[i];
        fprintf(f,
                "  {\"kind\":\"%s\",\"fwd_s\":%.9g,\"bwd_s\":%.9g,\"params\":%zu,\"fc_out\":%d,"
                "\"fc_in\":%d}%s\n",
                l->kind, l->fwd_s, l->bwd_s, l->params, l->fc_out, l->fc_in, i + 1 < p->nlayers ? "," : "");
    }
    fprintf(f, " ]}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return dt_fail(DT_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return DT_OK;
}

/* Reading: every field is required exactly once; the scanner's callback
 * fills the profile and marks what it saw. */
enum {
    F_FORMAT, F_VERSION, F_MODEL, F_BATCH, F_THREADS, F_REPS, F_UPDATE, F_SUM, F_GEMM, F_TOPK, F_WORKERS,
    F_STRAGGLER, F_TOP
};
static const char *const top_fields[F_TOP] = {"format", "version", "model", "batch", "threads", "reps",
                                              "update_s", "sum_s", "gemm_gflops", "topk_s", "workers",
                                              "straggler"};
/* The version each field first appears in: older files have none of it. */
static const int top_since[F_TOP] = {[F_TOPK] = 2, [F_WORKERS] = 3, [F_STRAGGLER] = 3};
enum { L_KIND, L_FWD, L_BWD, L_PARAMS, L_FC_OUT, L_FC_IN, L_FIELDS };
static const char *const layer_fields[L_FIELDS] = {"kind", "fwd_s", "bwd_s", "params", "fc_out", "fc_in"};

typedef struct {
    dt_profile *p;
    const char *path;
    unsigned seen;                  /* bit per top field */
    int version;                    /* 1 to PROFILE_VERSION: which fields it has (top_since) */
    unsigned char lseen[DT_MAX_LAYERS]; /* bit per layer field */
} profile_reader;

static int field_index(const char *const *names, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], key) == 0) return i;
    return -1;
}

/* A number field: finite, >= 0, an integer below `max` when max > 0. */
static dt_status number_field(const profile_reader *r, const char *path, dt_json_kind kind, double v,
                              double max, double *out) {
    if (kind != DT_JSON_NUMBER || !(v >= 0) || (max > 0 && (v != floor(v) || v > max)))
        return dt_fail(DT_ERR_FORMAT, "%s: '%s' must be a %s", r->path, path,
                       max > 0 ? "non-negative integer" : "non-negative number");
    *out = v;
    return DT_OK;
}

static dt_status layer_field(profile_reader *r, const char *path, const char *rest, dt_json_kind kind,
                             double num, const char *str) {
    char *end;
    long i = strtol(rest, &end, 10);
    int f = *end == '.' ? field_index(layer_fields, L_FIELDS, end + 1) : -1;
    if (end == rest || i < 0 || f < 0)
        return dt_fail(DT_ERR_FORMAT, "%s: unknown field '%s'", r->path, path);
    if (i >= DT_MAX_LAYERS)
        return dt_fail(DT_ERR_FORMAT, "%s: more than %d layers", r->path, DT_MAX_LAYERS);
    dt_sim_layer *l = &r->p->layers[i];
    if (r->lseen[i] & 1u << f) return dt_fail(DT_ERR_FORMAT, "%s: '%s' given twice", r->path, path);
    r->lseen[i] |= (unsigned char)(1u << f);
    if (i >= r->p->nlayers) r->p->nlayers = (int)i + 1;
    double v = 0;
    switch (f) {
    case L_KIND:
        if (kind != DT_JSON_STRING || strlen(str) >= sizeof l->kind)
            return dt_fail(DT_ERR_FORMAT, "%s: '%s' must be a layer kind", r->path, path);
        snprintf(l->kind, sizeof l->kind, "%s", str);
        return DT_OK;
    case L_FWD: return number_field(r, path, kind, num, 0, &l->fwd_s);
    case L_BWD: return number_field(r, path, kind, num, 0, &l->bwd_s);
    case L_PARAMS:
        DT_TRY(number_field(r, path, kind, num, 1e15, &v));
        l->params = (size_t)v;
        return DT_OK;
    default:
        DT_TRY(number_field(r, path, kind, num, 1 << 30, &v));
        *(f == L_FC_OUT ? &l->fc_out : &l->fc_in) = (int)v;
        return DT_OK;
    }
}

static dt_status profile_field(void *ctx, const char *path, dt_json_kind kind, double num, const char *str) {
    profile_reader *r = ctx;
    dt_profile *p = r->p;
    if (strncmp(path, "layers.", 7) == 0) return layer_field(r, path, path + 7, kind, num, str);
    int f = field_index(top_fields, F_TOP, path);
    if (f < 0) return dt_fail(DT_ERR_FORMAT, "%s: unknown field '%s'", r->path, path);
    if (r->seen & 1u << f) return dt_fail(DT_ERR_FORMAT, "%s: '%s' given twice", r->path, path);
    r->seen |= 1u << f;
    double v = 0;
    switch (f) {
    case F_FORMAT:
        if (kind != DT_JSON_STRING || strcmp(str, PROFILE_FORMAT) != 0)
            return dt_fail(DT_ERR_FORMAT, "%s: not a dtrain profile (format must be \"%s\")", r->path,
                           PROFILE_FORMAT);
        return DT_OK;
    case F_VERSION:
        if (kind != DT_JSON_NUMBER || num != floor(num) || num < 1 || num > PROFILE_VERSION)
            return dt_fail(DT_ERR_FORMAT, "%s: profile version %g, this dtrain reads versions 1 to %d", r->path,
                           kind == DT_JSON_NUMBER ? num : -1.0, PROFILE_VERSION);
        r->version = (int)num;
        return DT_OK;
    case F_MODEL:
        if (kind != DT_JSON_STRING) return dt_fail(DT_ERR_FORMAT, "%s: 'model' must be a string", r->path);
        snprintf(p->model, sizeof p->model, "%s", str);
        return DT_OK;
    case F_BATCH: case F_THREADS: case F_REPS:
        DT_TRY(number_field(r, path, kind, num, 1 << 20, &v));
        if (v < 1) return dt_fail(DT_ERR_FORMAT, "%s: '%s' must be at least 1", r->path, path);
        *(f == F_BATCH ? &p->batch : f == F_THREADS ? &p->threads : &p->reps) = (int)v;
        return DT_OK;
    case F_UPDATE: return number_field(r, path, kind, num, 0, &p->update_s);
    case F_SUM: return number_field(r, path, kind, num, 0, &p->sum_s);
    case F_TOPK: return number_field(r, path, kind, num, 0, &p->topk_s);
    case F_WORKERS:
        DT_TRY(number_field(r, path, kind, num, DT_PROFILE_MAX_WORKERS, &v));
        if (v < 1) return dt_fail(DT_ERR_FORMAT, "%s: 'workers' must be at least 1", r->path);
        p->workers = (int)v;
        return DT_OK;
    case F_STRAGGLER:
        DT_TRY(number_field(r, path, kind, num, 0, &p->straggler));
        if (!(p->straggler >= 1))
            return dt_fail(DT_ERR_FORMAT, "%s: 'straggler' must be a ratio of at least 1", r->path);
        return DT_OK;
    default: return number_field(r, path, kind, num, 0, &p->gemm_gflops);
    }
}

dt_status dt_profile_read(dt_profile *p, const char *path) {
    memset(p, 0, sizeof *p);
    profile_reader *r;
    DT_TRY(dt_alloc_bytes((void **)&r, sizeof *r, "profile reader"));
    r->p = p;
    r->path = path;
    char *text;
    dt_status s = dt_read_text_file(&text, path, PROFILE_MAX_BYTES, DT_ERR_FORMAT, "a profile");
    if (s == DT_OK) s = dt_json_scan(text, path, profile_field, r);
    free(text);
    for (int f = 0; s == DT_OK && f < F_TOP; f++) {
        int in_version = top_since[f] <= r->version; /* (an unknown version failed above) */
        if (!in_version && r->seen & 1u << f)
            s = dt_fail(DT_ERR_FORMAT, "%s: '%s' is not a field of version %d profiles", path, top_fields[f],
                        r->version);
        else if (in_version && !(r->seen & 1u << f))
            s = dt_fail(DT_ERR_FORMAT, "%s: missing '%s'", path, top_fields[f]);
    }
    if (s == DT_OK && r->version < top_since[F_WORKERS]) { /* measured by one worker alone */
        p->workers = 1;
        p->straggler = 1;
    }
    if (s == DT_OK && r->version >= top_since[F_TOPK] && !(p->topk_s > 0))
        s = dt_fail(DT_ERR_FORMAT, "%s: 'topk_s' must be positive (a measured time)", path);
    if (s == DT_OK && p->nlayers == 0) s = dt_fail(DT_ERR_FORMAT, "%s: no layers", path);
    int has_fc = 0;
    for (int i = 0; s == DT_OK && i < p->nlayers; i++) {
        for (int f = 0; s == DT_OK && f < L_FIELDS; f++)
            if (!(r->lseen[i] & 1u << f))
                s = dt_fail(DT_ERR_FORMAT, "%s: layer %d: missing '%s'", path, i, layer_fields[f]);
        has_fc |= p->layers[i].fc_out > 0 && p->layers[i].fc_in > 0;
    }
    if (s == DT_OK && has_fc && !(p->gemm_gflops > 0))
        s = dt_fail(DT_ERR_FORMAT, "%s: fully connected layers need a positive 'gemm_gflops'", path);
    dt_free(r);
    return s;
}

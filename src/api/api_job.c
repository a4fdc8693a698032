/* The job API's jobs: options by name, arrays, the record callback, the
 * run on MPI_COMM_WORLD, the trained model (dtrain.h). A job is the train
 * job of job.h with its strings and arrays kept alive. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "dtrain/job.h"

/* Values given to dtrain_job_set, copied: the option table keeps pointers. */
typedef struct job_string {
    struct job_string *next;
    char text[];
} job_string;

struct dtrain_job {
    dt_job_args args;
    dt_opt opts[DT_JOB_MAX_OPTS];
    int nopts;
    job_string *strings;
    dt_arrays arrays;    /* train.n 0: none given */
    dtrain_record_fn on_record;
    void *record_ctx;
    dt_job_requests req;
    atomic_int finish;   /* a record callback asked to end the run (the trainer's finish) */
    int stopped;         /* the run ended early by it (every worker) */
    int ran, worker;     /* after a run: this rank was a worker */
    dt_net *trained;     /* a worker's trained net, until taken */
    dt_model_spec spec;  /* its spec */
};

static dt_status keep_string(dtrain_job *j, const char *s, const char **out) {
    size_t n = strlen(s) + 1;
    job_string *k = malloc(sizeof *k + n);
    if (!k) return dt_fail(DT_ERR_NOMEM, "out of memory for an option's value");
    memcpy(k->text, s, n);
    k->next = j->strings;
    j->strings = k;
    *out = k->text;
    return DT_OK;
}

dtrain_status dtrain_job_create(dtrain_job **out, const char *model) {
    *out = NULL;
    if (!model) return (dtrain_status)dt_fail(DT_ERR_USAGE, "a model file's path or text is needed");
    dtrain_job *j = calloc(1, sizeof *j);
    if (!j) return (dtrain_status)dt_fail(DT_ERR_NOMEM, "out of memory for a job");
    dt_job_args_init(&j->args);
    j->nopts = dt_job_opts(&j->args, j->opts);
    dt_status s = keep_string(j, model, &j->args.model);
    if (s != DT_OK) {
        dtrain_job_free(j);
        return (dtrain_status)s;
    }
    *out = j;
    return DTRAIN_OK;
}

void dtrain_job_free(dtrain_job *j) {
    if (!j) return;
    while (j->strings) {
        job_string *next = j->strings->next;
        free(j->strings);
        j->strings = next;
    }
    dt_net_free(j->trained);
    free(j);
}

dtrain_status dtrain_job_set(dtrain_job *j, const char *name, const char *value) {
    if (!name) return (dtrain_status)dt_fail(DT_ERR_USAGE, "an option needs a name");
    const char *kept = NULL;
    if (value) DT_API_TRY(keep_string(j, value, &kept));
    DT_API_TRY(dt_opts_set(j->opts, j->nopts, name, kept));
    if (j->args.help) {
        j->args.help = 0;
        return (dtrain_status)dt_fail(DT_ERR_USAGE, "--help is the CLI's (dtrain train --help lists the options)");
    }
    return DTRAIN_OK;
}

dtrain_status dtrain_job_set_arrays(dtrain_job *j, int which, const void *x, dtrain_dtype dtype, int n, int c, int h,
                                    int w, const int32_t *y) {
    if (which != DTRAIN_TRAIN && which != DTRAIN_TEST)
        return (dtrain_status)dt_fail(DT_ERR_USAGE, "arrays: which is DTRAIN_TRAIN or DTRAIN_TEST, not %d", which);
    const char *what = which == DTRAIN_TRAIN ? "training arrays" : "test arrays";
    if (!x || !y) return (dtrain_status)dt_fail(DT_ERR_USAGE, "%s: images and labels are needed", what);
    if (dtype != DTRAIN_U8 && dtype != DTRAIN_F32)
        return (dtrain_status)dt_fail(DT_ERR_USAGE, "%s: images of type %d: give bytes (DTRAIN_U8) or floats "
                                      "(DTRAIN_F32)", what, (int)dtype);
    if (n < 1) return (dtrain_status)dt_fail(DT_ERR_USAGE, "%s: %d samples", what, n);
    dt_array_set a = {.n = n, .shape = {c, h, w}, .labels = y};
    if (dtype == DTRAIN_U8) a.u8 = x;
    else a.f32 = x;
    if (which == DTRAIN_TRAIN) j->arrays.train = a;
    else j->arrays.test = a;
    return DTRAIN_OK;
}

dtrain_status dtrain_job_on_record(dtrain_job *j, dtrain_record_fn fn, void *ctx) {
    j->on_record = fn;
    j->record_ctx = ctx;
    return DTRAIN_OK;
}

/* The trainer's records to the caller's callback; its "stop" becomes the
 * early finish every worker agrees on. */
static void relay_record(void *ctx, const char *json) {
    dtrain_job *j = ctx;
    if (j->on_record && j->on_record(j->record_ctx, json) != 0 && !atomic_exchange(&j->finish, 1)) j->stopped = 1;
}

/* The options over the arrays: the data set is theirs. */
static dt_status use_arrays(dtrain_job *j) {
    dt_job_args *a = &j->args;
    if (j->arrays.test.n && !j->arrays.train.n)
        return dt_fail(DT_ERR_USAGE, "test arrays without training arrays");
    if (!j->arrays.train.n) return DT_OK;
    if (a->dataset || a->data_dir || a->data)
        return dt_fail(DT_ERR_USAGE, "training arrays exclude the option %s (the arrays are the data set)",
                       a->dataset ? "dataset" : a->data_dir ? "data_dir" : "data");
    a->dataset = "arrays";
    return DT_OK;
}

/* The run once prepared: the plan's hooks, then dt_job_execute under the
 * library's signal mask. */
static dt_status execute(dtrain_job *j, dt_job_plan *p, int rank) {
    p->opts.arrays = &j->arrays;
    p->opts.on_record = relay_record;
    p->opts.record_ctx = j;
    p->opts.trained = &j->trained;
    p->opts.finish = &j->finish;
    j->spec = p->spec;
    j->worker = rank >= p->dist.servers;
    dt_api_compute c;
    DT_TRY(dt_api_compute_begin(&c));
    dt_train_summary sum;
    memset(&sum, 0, sizeof sum);
    dt_status s = dt_job_execute(p, &j->args, MPI_COMM_WORLD, dt_api_local_ranks(), &j->req, stdout, &sum);
    dt_api_compute_end(&c);
    j->stopped |= sum.ended_early; /* every worker: the finish was agreed */
    fflush(stdout);
    return s;
}

dtrain_status dtrain_job_run(dtrain_job *j) {
    if (j->ran) return (dtrain_status)dt_fail(DT_ERR_USAGE, "this job has run; create another for a new run");
    DT_API_TRY(dtrain_init());
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    j->ran = 1;
    dt_job_note_given(&j->args, j->opts, j->nopts);
    dt_status s = use_arrays(j);
    if (s == DT_OK) s = dt_job_use_backup(&j->args);
    dt_job_plan *p = calloc(1, sizeof *p);
    if (!p && s == DT_OK) s = dt_fail(DT_ERR_NOMEM, "out of memory for a job's plan");
    if (s == DT_OK) s = dt_job_prepare(p, &j->args, world, 0);
    /* A failure on one rank only (a file missing there) is every rank's. */
    s = dt_job_agree(MPI_COMM_WORLD, s);
    if (s == DT_OK) s = execute(j, p, rank);
    free(p);
    return (dtrain_status)s;
}

_Static_assert(DTRAIN_ROLE_SERVER == (int)DT_JOB_SERVER && DTRAIN_ROLE_CHIEF == (int)DT_JOB_CHIEF &&
                   DTRAIN_ROLE_WORKER == (int)DT_JOB_WORKER, "dtrain_role is dt_job_role_kind");

dtrain_status dtrain_job_role(const dtrain_job *j, dtrain_role *role) {
    DT_API_TRY(dtrain_init());
    int rank, world;
    DT_API_TRY(dt_mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank"));
    DT_API_TRY(dt_mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &world), "MPI_Comm_size"));
    dt_job_role_kind k;
    DT_API_TRY(dt_job_role(&j->args, rank, world, &k));
    *role = (dtrain_role)k;
    return DTRAIN_OK;
}

int dtrain_job_is_worker(const dtrain_job *j) { return j->ran && j->worker; }

int dtrain_job_stopped(const dtrain_job *j) { return j->stopped; }

dtrain_status dtrain_job_take_model(dtrain_job *j, dtrain_model **out) {
    *out = NULL;
    if (!j->trained)
        return (dtrain_status)dt_fail(DT_ERR_USAGE, "%s", !j->ran ? "the job has not run"
                                                   : "the trained model was taken, or the run failed");
    DT_API_TRY(dt_api_model_new(out, &j->spec, j->trained, j->args.model));
    j->trained = NULL;
    return DTRAIN_OK;
}

/* --mode ps-sync, server side: owns one shard of the flat parameters and its
 * optimiser state; applies a clock's update once every worker's gradients
 * for that clock are in, then replies with the fresh shard. Waits by
 * polling with a growing sleep, so an idle server does not take a core. */
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "dtrain/dist.h"
#include "dtrain/mem.h"
#include "dtrain/optim.h"
#include "dtrain/timer.h"
#include "ps_proto.h"

typedef struct {
    const dt_comm *comm;
    const dt_dist_cfg *cfg;
    const dt_model_spec *spec;
    dt_net *net;             /* layout only (offsets); built at batch 1 */
    size_t lo, hi, n;        /* this shard [lo, hi) of the flat block */
    float *params, *mom;     /* (n) */
    float *recv;             /* (W, n) gradient of each worker for the clock */
    float *sum;              /* (n) */
    int W;
    double (*ctrl)[PS_CTRL_LEN];  /* (W) control receive buffers */
    MPI_Request *ctrl_req;   /* (W) */
    MPI_Request *grad_req;   /* (W, nlayers) */
    int *ngrad;              /* (W) gradient receives posted for the clock */
    int *in_clock;           /* (W) worker sent STEP for the clock */
    int *stopped;            /* (W) */
    MPI_Request *param_req;  /* (W) replies of the last clock */
    float lr;
    long clock, updates;
    double wait_start;
} server;

static int world_rank_of(const server *sv, int w) { return sv->comm->nservers + w; }

static dt_status post_ctrl(server *sv, int w) {
    return dt_mpi_check(MPI_Irecv(sv->ctrl[w], PS_CTRL_LEN, MPI_DOUBLE, world_rank_of(sv, w), PS_TAG_CTRL,
                                  sv->comm->world, &sv->ctrl_req[w]),
                        "control receive (MPI_Irecv)");
}

/* Posts receives for worker w's gradient segments of this shard, in the
 * order the worker sends them: layers last to first. */
static dt_status post_grads(server *sv, int w) {
    MPI_Request *r = sv->grad_req + (size_t)w * (size_t)sv->net->nlayers;
    float *dst = sv->recv + (size_t)w * sv->n;
    int k = 0;
    for (int i = sv->net->nlayers - 1; i >= 0; i--) {
        size_t a, b;
        ps_overlap(sv->net, i, sv->lo, sv->hi, &a, &b);
        if (a == b) continue;
        DT_TRY(dt_mpi_check(MPI_Irecv(dst + (a - sv->lo), (int)(b - a), MPI_FLOAT, world_rank_of(sv, w),
                                      PS_TAG_GRAD, sv->comm->world, &r[k++]),
                            "gradient receive (MPI_Irecv)"));
    }
    sv->ngrad[w] = k;
    return DT_OK;
}

static dt_status handle_ctrl(server *sv, int w) {
    int kind = (int)sv->ctrl[w][0];
    if (kind == PS_CTRL_STOP) {
        sv->stopped[w] = 1;
        return DT_OK;
    }
    if (kind == PS_CTRL_CKPT) {
        DT_TRY(dt_mpi_check(MPI_Send(sv->mom, (int)sv->n, MPI_FLOAT, world_rank_of(sv, w), PS_TAG_MOM,
                                     sv->comm->world),
                            "optimiser state for checkpoint (MPI_Send)"));
    } else if (kind == PS_CTRL_STEP) {
        if (sv->in_clock[w])
            return dt_fail(DT_ERR_INTERNAL, "server rank %d: worker rank %d started clock %.0f twice",
                           sv->comm->rank, world_rank_of(sv, w), sv->ctrl[w][1]);
        sv->in_clock[w] = 1;
        if (w == 0) sv->lr = (float)sv->ctrl[w][2];
        DT_TRY(post_grads(sv, w));
    } else {
        return dt_fail(DT_ERR_MPI, "server rank %d: unknown control message %d from rank %d",
                       sv->comm->rank, kind, world_rank_of(sv, w));
    }
    return post_ctrl(sv, w);
}

/* 1 when every worker is in the clock and all its gradients have arrived. */
static dt_status clock_complete(server *sv, int *complete) {
    *complete = 0;
    for (int w = 0; w < sv->W; w++) {
        if (!sv->in_clock[w]) return DT_OK;
        int done = 0;
        MPI_Request *r = sv->grad_req + (size_t)w * (size_t)sv->net->nlayers;
        DT_TRY(dt_mpi_check(MPI_Testall(sv->ngrad[w], r, &done, MPI_STATUSES_IGNORE), "MPI_Testall"));
        if (!done) return DT_OK;
    }
    *complete = 1;
    return DT_OK;
}

/* Average the workers' gradients, step, reply. */
static dt_status apply_and_reply(server *sv) {
    /* Replies of the previous clock must have left before params change. */
    DT_TRY(dt_mpi_check(MPI_Waitall(sv->W, sv->param_req, MPI_STATUSES_IGNORE), "MPI_Waitall"));
    memcpy(sv->sum, sv->recv, sizeof(float) * sv->n);
    for (int w = 1; w < sv->W; w++) {
        const float *g = sv->recv + (size_t)w * sv->n;
        for (size_t i = 0; i < sv->n; i++) sv->sum[i] += g[i];
    }
    float inv = 1.0f / (float)sv->W;
    for (size_t i = 0; i < sv->n; i++) sv->sum[i] *= inv;
    dt_sgd_update(&sv->spec->sgd, sv->lr, sv->params, sv->mom, sv->sum, sv->n);
    for (int w = 0; w < sv->W; w++) {
        sv->in_clock[w] = 0;
        DT_TRY(dt_mpi_check(MPI_Isend(sv->params, (int)sv->n, MPI_FLOAT, world_rank_of(sv, w), PS_TAG_PARAM,
                                      sv->comm->world, &sv->param_req[w]),
                            "parameter reply (MPI_Isend)"));
    }
    sv->clock++;
    sv->updates++;
    return DT_OK;
}

static void report_stall(server *sv, double waited) {
    char missing[256] = "";
    size_t used = 0;
    for (int w = 0; w < sv->W && used + 1 < sizeof missing; w++) {
        int done = 0;
        if (sv->in_clock[w] && !sv->stopped[w]) {
            MPI_Request *r = sv->grad_req + (size_t)w * (size_t)sv->net->nlayers;
            MPI_Testall(sv->ngrad[w], r, &done, MPI_STATUSES_IGNORE);
        }
        if (!done && !sv->stopped[w])
            used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "",
                                     world_rank_of(sv, w));
    }
    fprintf(stderr, "dtrain: server rank %d: clock %ld has waited %.0f s for gradients from worker rank(s) %s\n",
            sv->comm->rank, sv->clock + 1, waited, missing);
}

static dt_status serve(server *sv) {
    for (int w = 0; w < sv->W; w++) DT_TRY(post_ctrl(sv, w));
    long sleep_ns = 1000;
    double idle_since = dt_now(), next_report = idle_since + sv->cfg->stall_timeout;
    for (;;) {
        int progressed = 0, active = 0;
        for (int w = 0; w < sv->W; w++) {
            if (sv->stopped[w]) continue;
            active++;
            int done = 0;
            DT_TRY(dt_mpi_check(MPI_Test(&sv->ctrl_req[w], &done, MPI_STATUS_IGNORE), "MPI_Test"));
            if (done) {
                DT_TRY(handle_ctrl(sv, w));
                progressed = 1;
            }
        }
        if (!active) break;
        int complete;
        DT_TRY(clock_complete(sv, &complete));
        if (complete) {
            DT_TRY(apply_and_reply(sv));
            progressed = 1;
        }
        double now = dt_now();
        if (progressed) {
            sleep_ns = 1000;
            idle_since = now;
            next_report = now + sv->cfg->stall_timeout;
            continue;
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000) sleep_ns *= 2;
        if (sv->cfg->stall_timeout > 0 && now >= next_report) {
            report_stall(sv, now - idle_since);
            next_report = now + sv->cfg->stall_timeout;
        }
    }
    return dt_mpi_check(MPI_Waitall(sv->W, sv->param_req, MPI_STATUSES_IGNORE), "MPI_Waitall");
}

static dt_status setup(server *sv) {
    DT_TRY(dt_net_create(&sv->net, sv->spec, 1, 1));
    sv->W = sv->comm->nworkers;
    dt_shard_range(sv->net->nparams, sv->comm->nservers, sv->comm->rank, &sv->lo, &sv->hi);
    sv->n = sv->hi - sv->lo;
    size_t W = (size_t)sv->W, L = (size_t)sv->net->nlayers, rn;
    DT_TRY(dt_mul_size(&rn, W, sv->n, "server buffers"));
    DT_TRY(dt_alloc_floats(&sv->params, sv->n, "server shard"));
    DT_TRY(dt_alloc_floats(&sv->mom, sv->n, "server shard"));
    DT_TRY(dt_alloc_floats(&sv->sum, sv->n, "server shard"));
    DT_TRY(dt_alloc_floats(&sv->recv, rn, "server gradients"));
    DT_TRY(dt_alloc_bytes((void **)&sv->ctrl, W * sizeof *sv->ctrl, "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->ctrl_req, W * sizeof(MPI_Request), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->param_req, W * sizeof(MPI_Request), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->grad_req, W * L * sizeof(MPI_Request), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->ngrad, W * sizeof(int), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->in_clock, W * sizeof(int), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->stopped, W * sizeof(int), "server"));
    for (size_t w = 0; w < W; w++) sv->param_req[w] = MPI_REQUEST_NULL;
    /* Worker 0 sends this shard's parameters and optimiser state. */
    int w0 = world_rank_of(sv, 0);
    DT_TRY(dt_mpi_check(MPI_Recv(sv->params, (int)sv->n, MPI_FLOAT, w0, PS_TAG_INIT, sv->comm->world,
                                 MPI_STATUS_IGNORE),
                        "server initialisation (MPI_Recv)"));
    return dt_mpi_check(MPI_Recv(sv->mom, (int)sv->n, MPI_FLOAT, w0, PS_TAG_INIT, sv->comm->world,
                                 MPI_STATUS_IGNORE),
                        "server initialisation (MPI_Recv)");
}

static void teardown(server *sv) {
    dt_net_free(sv->net);
    dt_free(sv->params);
    dt_free(sv->mom);
    dt_free(sv->sum);
    dt_free(sv->recv);
    dt_free(sv->ctrl);
    dt_free(sv->ctrl_req);
    dt_free(sv->param_req);
    dt_free(sv->grad_req);
    dt_free(sv->ngrad);
    dt_free(sv->in_clock);
    dt_free(sv->stopped);
}

dt_status dt_server_run(const dt_comm *c, const dt_dist_cfg *cfg, const dt_model_spec *spec) {
    server sv;
    memset(&sv, 0, sizeof sv);
    sv.comm = c;
    sv.cfg = cfg;
    sv.spec = spec;
    double t0 = dt_now();
    dt_status s = setup(&sv);
    if (s == DT_OK) s = serve(&sv);
    if (s == DT_OK) {
        /* CPU time against wall time: how much of a core the server took. */
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double st[3] = {(double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                            (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec,
                        dt_now() - t0, (double)sv.updates};
        s = dt_mpi_check(MPI_Send(st, 3, MPI_DOUBLE, world_rank_of(&sv, 0), PS_TAG_STATS, c->world),
                         "server statistics (MPI_Send)");
    }
    teardown(&sv);
    return s;
}

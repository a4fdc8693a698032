#include "group.h"

#include <limits.h>
#include <string.h>

#include "dtrain/mem.h"
#include "dtrain/timer.h"

enum { TAG_SEQ = 901 };

static dt_status post_recv(dt_group *g, int r) {
    return dt_mpi_check(MPI_Irecv(&g->inbox[r], 1, MPI_LONG, r, TAG_SEQ, g->comm.workers, &g->recv[r]),
                        "stall inspector (MPI_Irecv)");
}

/* Takes in every announcement that has arrived and reposts its receive. */
static dt_status drain(dt_group *g) {
    for (int r = 0; r < g->members; r++) {
        if (r == g->member) continue;
        for (;;) {
            int done = 0;
            DT_TRY(dt_mpi_check(MPI_Test(&g->recv[r], &done, MPI_STATUS_IGNORE), "MPI_Test"));
            if (!done) break;
            g->seen[r] = g->inbox[r];
            g->heard[r] = dt_now();
            DT_TRY(post_recv(g, r));
        }
    }
    return DT_OK;
}

/* g->world_rank: where each member of comm.workers is in comm.world. */
static dt_status find_world_ranks(dt_group *g) {
    MPI_Group mine, world;
    DT_TRY(dt_alloc_bytes((void **)&g->world_rank, (size_t)g->members * sizeof(int), "stall inspector"));
    for (int r = 0; r < g->members; r++) g->world_rank[r] = r;
    DT_TRY(dt_mpi_check(MPI_Comm_group(g->comm.workers, &mine), "MPI_Comm_group"));
    dt_status s = dt_mpi_check(MPI_Comm_group(g->comm.world, &world), "MPI_Comm_group");
    if (s == DT_OK) {
        s = dt_mpi_check(MPI_Group_translate_ranks(mine, g->members, g->world_rank, world, g->world_rank),
                         "MPI_Group_translate_ranks");
        MPI_Group_free(&world);
    }
    MPI_Group_free(&mine);
    return s;
}

dt_status dt_group_create(dt_group *g, const dt_comm *c, const dt_stall *stall) {
    memset(g, 0, sizeof *g);
    atomic_init(&g->hurry, 0);
    g->comm = *c;
    g->stall = stall;
    g->pending = MPI_REQUEST_NULL;
    DT_TRY(dt_mpi_check(MPI_Comm_rank(c->workers, &g->member), "MPI_Comm_rank"));
    DT_TRY(dt_mpi_check(MPI_Comm_size(c->workers, &g->members), "MPI_Comm_size"));
    DT_TRY(find_world_ranks(g));
    size_t n = (size_t)g->members;
    DT_TRY(dt_alloc_bytes((void **)&g->seen, n * sizeof(long), "stall inspector"));
    DT_TRY(dt_alloc_bytes((void **)&g->inbox, n * sizeof(long), "stall inspector"));
    DT_TRY(dt_alloc_bytes((void **)&g->heard, n * sizeof(double), "stall inspector"));
    DT_TRY(dt_alloc_bytes((void **)&g->recv, n * sizeof(MPI_Request), "stall inspector"));
    DT_TRY(dt_alloc_bytes((void **)&g->send, n * sizeof(MPI_Request), "stall inspector"));
    for (int r = 0; r < g->members; r++) {
        g->seen[r] = -1;
        g->recv[r] = g->send[r] = MPI_REQUEST_NULL;
        if (r != g->member) DT_TRY(post_recv(g, r));
    }
    return DT_OK;
}

void dt_group_free(dt_group *g) {
    if (g->recv) {
        dt_cancel_requests(g->recv, g->members);
        MPI_Waitall(g->members, g->send, MPI_STATUSES_IGNORE);
    }
    dt_free(g->seen);
    dt_free(g->inbox);
    dt_free(g->heard);
    dt_free(g->recv);
    dt_free(g->send);
    dt_free(g->world_rank);
    memset(g, 0, sizeof *g);
}

/* Sends this worker's count to every other worker. */
static dt_status announce(dt_group *g) {
    /* The previous announcements (8 bytes, eager) are long delivered, unless
     * a peer is stopped: then skip this heartbeat rather than block. */
    int done = 0;
    DT_TRY(dt_mpi_check(MPI_Testall(g->members, g->send, &done, MPI_STATUSES_IGNORE), "MPI_Testall"));
    if (!done) return DT_OK;
    g->outbox = g->seq;
    for (int r = 0; r < g->members; r++)
        if (r != g->member)
            DT_TRY(dt_mpi_check(MPI_Isend(&g->outbox, 1, MPI_LONG, r, TAG_SEQ, g->comm.workers, &g->send[r]),
                                "stall inspector (MPI_Isend)"));
    return drain(g);
}

dt_status dt_group_enter(dt_group *g, const char *what) {
    g->what = what;
    /* A new collective must be announced: wait for the last one to leave. */
    DT_TRY(dt_mpi_check(MPI_Waitall(g->members, g->send, MPI_STATUSES_IGNORE), "MPI_Waitall"));
    g->seq++;
    g->seen[g->member] = g->seq;
    g->heard[g->member] = dt_now();
    return announce(g);
}

static void on_stall(void *arg, double waited, int report, char *line, size_t cap) {
    dt_group *g = arg;
    if (announce(g) != DT_OK || !report) return; /* heartbeat */
    char missing[256] = "";
    size_t used = 0;
    double now = dt_now(), silent = g->stall->report > 0 ? g->stall->report : g->stall->abort;
    for (int r = 0; r < g->members; r++)
        if (r != g->member && (g->seen[r] < g->seq || now - g->heard[r] > silent))
            dt_comm_name_rank(&g->comm, g->world_rank[r], missing, sizeof missing, &used);
    snprintf(line, cap, "dtrain: rank %d: %s has waited %.0f s; ranks that have not reached it: %s", g->comm.rank,
             g->what, waited, missing[0] ? missing : "(none known: a message is slow)");
}

dt_status dt_group_wait(dt_group *g, MPI_Request *reqs, int n) {
    return dt_mpi_wait_hurry(reqs, n, g->stall, on_stall, g, g->what, &g->hurry);
}

dt_status dt_group_sum_doubles(dt_group *g, double *vals, int n, const char *what) {
    MPI_Request req;
    DT_TRY(dt_group_enter(g, what));
    DT_TRY(dt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, vals, n, MPI_DOUBLE, MPI_SUM, g->comm.workers, &req),
                        what));
    return dt_group_wait(g, &req, 1);
}

dt_status dt_group_sum_start(dt_group *g, const double *vals, int n, const char *what) {
    if (n > DT_GROUP_PENDING_MAX)
        return dt_fail(DT_ERR_INTERNAL, "%s: a deferred sum of %d values (at most %d)", what, n,
                       DT_GROUP_PENDING_MAX);
    if (g->pending != MPI_REQUEST_NULL)
        return dt_fail(DT_ERR_INTERNAL, "%s: a deferred sum while another is open", what);
    memcpy(g->pending_vals, vals, sizeof(double) * (size_t)n);
    g->npending = n;
    g->pending_what = what;
    DT_TRY(dt_group_enter(g, what));
    return dt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, g->pending_vals, n, MPI_DOUBLE, MPI_SUM, g->comm.workers,
                                       &g->pending),
                        what);
}

dt_status dt_group_sum_finish(dt_group *g, double *vals, int n) {
    if (g->pending == MPI_REQUEST_NULL || n != g->npending)
        return dt_fail(DT_ERR_INTERNAL, "finishing a deferred sum of %d values that was not started", n);
    g->what = g->pending_what;
    DT_TRY(dt_group_wait(g, &g->pending, 1)); /* sets pending to MPI_REQUEST_NULL */
    memcpy(vals, g->pending_vals, sizeof(double) * (size_t)n);
    return DT_OK;
}

dt_status dt_group_average_state(dt_group *g, dt_net *net) {
    if (net->nstate == 0) return DT_OK;
    MPI_Request req;
    DT_TRY(dt_group_enter(g, "layer-state allreduce"));
    DT_TRY(dt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, net->state, (int)net->nstate, MPI_FLOAT, MPI_SUM,
                                       g->comm.workers, &req),
                        "layer-state allreduce"));
    DT_TRY(dt_group_wait(g, &req, 1));
    for (size_t i = 0; i < net->nstate; i++) net->state[i] /= (float)g->members;
    return DT_OK;
}

dt_status dt_group_bcast_start(dt_group *g, dt_net *net, float *opt_state, size_t nopt_state) {
    if (nopt_state > INT_MAX)
        return dt_fail(DT_ERR_USAGE, "%zu optimiser values exceed an MPI count", nopt_state);
    MPI_Request req[3];
    DT_TRY(dt_group_enter(g, "start-up broadcast"));
    MPI_Comm w = g->comm.workers;
    DT_TRY(dt_mpi_check(MPI_Ibcast(net->params, (int)net->nparams, MPI_FLOAT, 0, w, &req[0]), "MPI_Ibcast"));
    DT_TRY(dt_mpi_check(MPI_Ibcast(net->state, (int)net->nstate, MPI_FLOAT, 0, w, &req[1]), "MPI_Ibcast"));
    DT_TRY(dt_mpi_check(MPI_Ibcast(opt_state, (int)nopt_state, MPI_FLOAT, 0, w, &req[2]), "MPI_Ibcast"));
    return dt_group_wait(g, req, 3);
}

dt_status dt_group_sync_alloc(dt_sync **out, size_t ctx_size) {
    *out = NULL;
    dt_sync *s;
    DT_TRY(dt_alloc_bytes((void **)&s, sizeof *s, "sync strategy"));
    dt_status st = dt_alloc_bytes(&s->ctx, ctx_size, "sync strategy");
    if (st != DT_OK) {
        dt_free(s);
        return st;
    }
    s->reduce_sum = dt_group_reduce_hook;
    s->reduce_sum_start = dt_group_reduce_start_hook;
    s->reduce_sum_finish = dt_group_reduce_finish_hook;
    s->sync_state = dt_group_state_hook;
    *out = s;
    return DT_OK;
}

void dt_group_sync_free(dt_sync *s) {
    dt_group *g = s->ctx;
    if (g->recv) dt_group_free(g);
    dt_free(s->ctx);
    dt_free(s);
}

dt_status dt_group_reduce_hook(dt_sync *s, double *vals, int n) {
    return dt_group_sum_doubles(s->ctx, vals, n, "metrics allreduce");
}

dt_status dt_group_reduce_start_hook(dt_sync *s, const double *vals, int n) {
    return dt_group_sum_start(s->ctx, vals, n, "stop agreement (deferred metrics allreduce)");
}

dt_status dt_group_reduce_finish_hook(dt_sync *s, double *vals, int n) {
    return dt_group_sum_finish(s->ctx, vals, n);
}

dt_status dt_group_state_hook(dt_sync *s, dt_trainer *t, dt_pace here) {
    return here == DT_PACE_LOCKSTEP ? dt_group_average_state(s->ctx, dt_trainer_net(t)) : DT_OK;
}

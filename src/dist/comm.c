/* MPI process layout, model agreement, and waiting without spinning. */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "dtrain/dist.h"
#include "dtrain/mem.h"
#include "dtrain/timer.h"

static const char *const mode_names[] = {"serial", "allreduce", "ps-sync", "ps-async", "ps-ssp",
                                         "ps-async-nowait", "ps-hogwild"};

static const char *const ar_algo_names[] = {"auto", "ring", "mpi", "shm"};

/* Index of name in names (count entries), -1 if absent. */
static int name_index(const char *const *names, int count, const char *name) {
    for (int i = 0; i < count; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

int dt_mode_from_name(const char *name) {
    return name_index(mode_names, (int)(sizeof mode_names / sizeof *mode_names), name);
}

const char *dt_mode_name(dt_mode mode) { return mode_names[mode]; }

int dt_ar_algo_from_name(const char *name) {
    return name_index(ar_algo_names, (int)(sizeof ar_algo_names / sizeof *ar_algo_names), name);
}

dt_status dt_mpi_check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return DT_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    return dt_fail(DT_ERR_MPI, "%s: %s", what, msg);
}

dt_status dt_comm_create(dt_comm *c, MPI_Comm world, int nservers) {
    memset(c, 0, sizeof *c);
    c->world = world;
    c->workers = MPI_COMM_NULL;
    DT_TRY(dt_mpi_check(MPI_Comm_rank(c->world, &c->rank), "MPI_Comm_rank"));
    DT_TRY(dt_mpi_check(MPI_Comm_size(c->world, &c->size), "MPI_Comm_size"));
    if (nservers < 0 || nservers >= c->size)
        return dt_fail(DT_ERR_USAGE, "--servers %d needs at least %d ranks (one worker), the job has %d",
                       nservers, nservers + 1, c->size);
    c->nservers = nservers;
    c->nworkers = c->size - nservers;
    int is_worker = c->rank >= nservers;
    c->worker = is_worker ? c->rank - nservers : -1;
    MPI_Comm split;
    DT_TRY(dt_mpi_check(MPI_Comm_split(c->world, is_worker ? 1 : MPI_UNDEFINED, c->rank, &split),
                        "MPI_Comm_split"));
    c->workers = split;
    return DT_OK;
}

void dt_comm_free(dt_comm *c) {
    if (c->workers != MPI_COMM_NULL) MPI_Comm_free(&c->workers);
    c->workers = MPI_COMM_NULL;
}

dt_status dt_comm_check_model(const dt_comm *c, uint64_t shape_hash, const char *model_path) {
    unsigned long long mine = shape_hash, *all;
    DT_TRY(dt_alloc_bytes((void **)&all, sizeof *all * (size_t)c->size, "shape hashes"));
    dt_status s = dt_mpi_check(
        MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG, c->world),
        "model check (MPI_Allgather)");
    if (s == DT_OK) {
        char ranks[256] = "";
        int bad = 0;
        for (int r = 0; r < c->size; r++)
            if (all[r] != all[0]) {
                size_t used = strlen(ranks);
                snprintf(ranks + used, sizeof ranks - used, "%s%d", bad++ ? ", " : "", r);
            }
        if (bad)
            s = dt_fail(DT_ERR_CONFIG,
                        "%s: ranks disagree on the model: rank(s) %s built a different network than "
                        "rank 0 (shape hash %016llx vs %016llx); give every rank the same model file",
                        model_path, ranks, mine, all[0]);
    }
    dt_free(all);
    return s;
}

dt_status dt_mpi_wait_hurry(MPI_Request *reqs, int n, double stall_timeout, dt_stall_fn stall, void *ctx,
                            const char *what, const atomic_int *hurry) {
    double start = dt_now(), next_tick = start + stall_timeout / 4, hurried_since = 0;
    long sleep_ns = 1000, hurried_ns = 50000, ticks = 0;
    for (;;) {
        int done = 0;
        DT_TRY(dt_mpi_check(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), what));
        if (done) return DT_OK;
        double now = dt_now();
        if (hurry && atomic_load_explicit(hurry, memory_order_relaxed)) {
            if (hurried_since == 0) hurried_since = now;
            if (now - hurried_since < 2e-3) {
                sched_yield();
            } else { /* a peer is far behind: back off, but only to 250 us */
                struct timespec ts = {0, hurried_ns};
                nanosleep(&ts, NULL);
                if (hurried_ns < 250000) hurried_ns *= 2;
            }
        } else {
            /* Back off from 1 us to 1 ms: a waiting rank must not take a
             * core from the ranks computing beside it. */
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, NULL);
            if (sleep_ns < 1000000) sleep_ns *= 2;
        }
        now = dt_now();
        if (stall && stall_timeout > 0 && now >= next_tick) {
            stall(ctx, now - start, ++ticks % 4 == 0);
            next_tick = now + stall_timeout / 4;
        }
    }
}

dt_status dt_mpi_wait(MPI_Request *reqs, int n, double stall_timeout, dt_stall_fn stall, void *ctx,
                      const char *what) {
    return dt_mpi_wait_hurry(reqs, n, stall_timeout, stall, ctx, what, NULL);
}

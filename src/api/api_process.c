/* The job API's process-wide part: MPI's start and end, messages, and the
 * signal mask while the library computes (dtrain.h). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "dtrain/job.h"

_Static_assert((int)DTRAIN_ERR_STALLED == (int)DT_ERR_STALLED && (int)DTRAIN_ERR_USAGE == (int)DT_ERR_USAGE &&
                   (int)DTRAIN_ERR_INTERRUPTED == (int)DT_ERR_INTERRUPTED,
               "dtrain_status mirrors dt_status");

/* Whether dtrain_init started MPI (then dtrain_finalize ends it). */
static int started_mpi;

const char *dtrain_last_error(void) { return dt_last_error(); }

const char *dtrain_version(void) { return DT_VERSION; }

dtrain_status dtrain_init(void) {
    int initialised, finalised;
    if (MPI_Initialized(&initialised) != MPI_SUCCESS || MPI_Finalized(&finalised) != MPI_SUCCESS)
        return (dtrain_status)dt_fail(DT_ERR_MPI, "MPI cannot say whether it is initialised");
    if (finalised)
        return (dtrain_status)dt_fail(DT_ERR_MPI, "MPI was finalised in this process: it cannot start again "
                                      "(call dtrain_finalize only at the end)");
    if (!initialised) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return (dtrain_status)dt_fail(DT_ERR_MPI, "MPI_Init_thread failed");
        started_mpi = 1;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    int provided, world;
    if (MPI_Query_thread(&provided) != MPI_SUCCESS || MPI_Comm_size(MPI_COMM_WORLD, &world) != MPI_SUCCESS)
        return (dtrain_status)dt_fail(DT_ERR_MPI, "MPI cannot say its thread level or size");
    /* allreduce communicates from its own thread, one MPI call at a time. */
    if (world > 1 && provided < MPI_THREAD_SERIALIZED)
        return (dtrain_status)dt_fail(DT_ERR_MPI, "MPI was initialised with thread level %d; dtrain needs "
                                      "MPI_THREAD_SERIALIZED or better (mpi4py: mpi4py.rc.thread_level = "
                                      "\"multiple\" before importing MPI)", provided);
    return DTRAIN_OK;
}

static int world_query(int (*query)(MPI_Comm, int *)) {
    int v;
    if (dtrain_init() != DTRAIN_OK || query(MPI_COMM_WORLD, &v) != MPI_SUCCESS) return -1;
    return v;
}

int dtrain_rank(void) { return world_query(MPI_Comm_rank); }
int dtrain_world(void) { return world_query(MPI_Comm_size); }

dtrain_status dtrain_finalize(void) {
    int finalised;
    if (!started_mpi || MPI_Finalized(&finalised) != MPI_SUCCESS || finalised) return DTRAIN_OK;
    if (MPI_Finalize() != MPI_SUCCESS) return (dtrain_status)dt_fail(DT_ERR_MPI, "MPI_Finalize failed");
    return DTRAIN_OK;
}

int dt_api_local_ranks(void) {
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int n = v ? atoi(v) : 1;
    return n > 0 ? n : 1;
}

/* The relay thread: the signals unblocked, it sleeps, and the program's
 * handlers run on it when one arrives; cancelled at the end (pause is a
 * cancellation point). */
static void *relay(void *arg) {
    (void)arg;
    sigset_t set;
    dt_job_signal_set(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    for (;;) pause();
    return NULL;
}

dt_status dt_api_compute_begin(dt_api_compute *c) {
    sigset_t set;
    dt_job_signal_set(&set);
    c->relay_started = 0;
    int rc = pthread_sigmask(SIG_BLOCK, &set, &c->saved);
    if (rc != 0) return dt_fail(DT_ERR_INTERNAL, "cannot block signals: %s", strerror(rc));
    rc = pthread_create(&c->relay, NULL, relay, NULL);
    if (rc != 0) {
        pthread_sigmask(SIG_SETMASK, &c->saved, NULL);
        return dt_fail(DT_ERR_INTERNAL, "cannot start the signal thread: %s", strerror(rc));
    }
    c->relay_started = 1;
    return DT_OK;
}

void dt_api_compute_end(dt_api_compute *c) {
    if (c->relay_started) {
        pthread_cancel(c->relay);
        pthread_join(c->relay, NULL);
    }
    pthread_sigmask(SIG_SETMASK, &c->saved, NULL);
}

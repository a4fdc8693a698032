/* --timeline across ranks: one time axis, one file.
 *
 * Clock: every rank records dt_now() (CLOCK_MONOTONIC) relative to an
 * origin taken right after a barrier at start. Ranks on rank 0's machine
 * use rank 0's reading, so their tracks line up exactly (the machine's
 * monotonic clock is shared by its processes). Ranks on other machines,
 * whose monotonic clocks have other zeros, use their own reading after the
 * barrier: aligned to within the barrier's exit skew (microseconds to tens
 * of microseconds on a cluster network), and drifting apart over hours as
 * their oscillators do.
 *
 * File: each rank writes its own part (FILE.rank<R>) and worker 0 merges
 * them once every rank has flushed, so nothing is sent over MPI and the
 * memory of a rank holds only its events since its last flush; on several
 * machines the path must be on a shared file system. */
#include <string.h>

#include "dtrain/dist.h"
#include "dtrain/timer.h"

dt_status dt_comm_timeline_open(dt_timeline **out, const dt_comm *c, const char *path) {
    *out = NULL;
    char host[MPI_MAX_PROCESSOR_NAME], host0[MPI_MAX_PROCESSOR_NAME];
    int len;
    memset(host, 0, sizeof host);
    DT_TRY(dt_mpi_check(MPI_Get_processor_name(host, &len), "MPI_Get_processor_name"));
    memcpy(host0, host, sizeof host);
    DT_TRY(dt_mpi_check(MPI_Barrier(c->world), "timeline clock (MPI_Barrier)"));
    double mine = dt_now(), origin = mine;
    DT_TRY(dt_mpi_check(MPI_Bcast(&origin, 1, MPI_DOUBLE, 0, c->world), "timeline clock (MPI_Bcast)"));
    DT_TRY(dt_mpi_check(MPI_Bcast(host0, (int)sizeof host0, MPI_CHAR, 0, c->world), "timeline clock (MPI_Bcast)"));
    if (strcmp(host, host0) != 0) origin = mine;
    return dt_timeline_create(out, path, c->rank, c->worker, origin);
}

dt_status dt_comm_timeline_close(dt_timeline *tl, const dt_comm *c, dt_status run) {
    if (!tl) return DT_OK;
    dt_status s = dt_timeline_flush(tl);
    /* After any other end a rank may never come: each part stays as it is. */
    if (!dt_run_ended_together(run)) return s;
    MPI_Request req;
    DT_TRY(dt_mpi_check(MPI_Ibarrier(c->world, &req), "timeline (MPI_Ibarrier)"));
    DT_TRY(dt_mpi_wait(&req, 1, NULL, NULL, NULL, "timeline (MPI_Ibarrier)"));
    if (s != DT_OK || c->worker != 0) return s;
    /* A clean end needs every rank's part; after an agreed stop or
     * divergence a missing part is skipped. */
    return dt_timeline_merge(dt_timeline_path(tl), c->size, run == DT_OK);
}

#include "peers.h"

#include <string.h>

#include "dtrain/dist.h"
#include "dtrain/mem.h"

enum { TAG_STEP = 901 };

static dt_status post_recv(dt_peers *p, int r) {
    return dt_mpi_check(MPI_Irecv(&p->inbox[r], 1, MPI_LONG, r, TAG_STEP, p->comm, &p->recv[r]),
                        "step announcement (MPI_Irecv)");
}

/* Takes in every announcement that has arrived and reposts its receive. */
static dt_status drain(dt_peers *p) {
    for (int r = 0; r < p->size; r++) {
        if (r == p->rank) continue;
        for (;;) {
            int done = 0;
            DT_TRY(dt_mpi_check(MPI_Test(&p->recv[r], &done, MPI_STATUS_IGNORE), "MPI_Test"));
            if (!done) break;
            p->seen[r] = p->inbox[r];
            DT_TRY(post_recv(p, r));
        }
    }
    return DT_OK;
}

dt_status dt_peers_create(dt_peers *p, MPI_Comm comm) {
    memset(p, 0, sizeof *p);
    p->comm = comm;
    DT_TRY(dt_mpi_check(MPI_Comm_rank(comm, &p->rank), "MPI_Comm_rank"));
    DT_TRY(dt_mpi_check(MPI_Comm_size(comm, &p->size), "MPI_Comm_size"));
    size_t n = (size_t)p->size;
    DT_TRY(dt_alloc_bytes((void **)&p->seen, n * sizeof(long), "peers"));
    DT_TRY(dt_alloc_bytes((void **)&p->inbox, n * sizeof(long), "peers"));
    DT_TRY(dt_alloc_bytes((void **)&p->recv, n * sizeof(MPI_Request), "peers"));
    DT_TRY(dt_alloc_bytes((void **)&p->send, n * sizeof(MPI_Request), "peers"));
    for (int r = 0; r < p->size; r++) {
        p->seen[r] = -1;
        p->recv[r] = p->send[r] = MPI_REQUEST_NULL;
        if (r != p->rank) DT_TRY(post_recv(p, r));
    }
    return DT_OK;
}

dt_status dt_peers_announce(dt_peers *p, long step) {
    /* The previous announcements (8 bytes, eager) are long delivered. */
    DT_TRY(dt_mpi_check(MPI_Waitall(p->size, p->send, MPI_STATUSES_IGNORE), "MPI_Waitall"));
    p->outbox = step;
    p->seen[p->rank] = step;
    for (int r = 0; r < p->size; r++)
        if (r != p->rank)
            DT_TRY(dt_mpi_check(MPI_Isend(&p->outbox, 1, MPI_LONG, r, TAG_STEP, p->comm, &p->send[r]),
                                "step announcement (MPI_Isend)"));
    return drain(p);
}

void dt_peers_missing(dt_peers *p, long step, char *buf, size_t cap) {
    buf[0] = '\0';
    if (drain(p) != DT_OK) return;
    size_t used = 0;
    for (int r = 0; r < p->size && used + 1 < cap; r++)
        if (p->seen[r] < step)
            used += (size_t)snprintf(buf + used, cap - used, "%s%d", used ? ", " : "", r);
}

void dt_peers_free(dt_peers *p) {
    if (p->recv) {
        for (int r = 0; r < p->size; r++) {
            if (p->recv[r] == MPI_REQUEST_NULL) continue;
            MPI_Cancel(&p->recv[r]);
            MPI_Wait(&p->recv[r], MPI_STATUS_IGNORE);
        }
        MPI_Waitall(p->size, p->send, MPI_STATUSES_IGNORE);
    }
    dt_free(p->seen);
    dt_free(p->inbox);
    dt_free(p->recv);
    dt_free(p->send);
    memset(p, 0, sizeof *p);
}

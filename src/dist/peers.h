/* Step announcements between workers, so a rank stuck waiting on a
 * collective can name the ranks that have not reached it (like Horovod's
 * stall inspector). Each worker sends its step to every other worker when it
 * starts communicating for that step, and keeps one receive posted per peer.
 * Only one thread at a time may use a dt_peers. */
#ifndef DTRAIN_DIST_PEERS_H
#define DTRAIN_DIST_PEERS_H

#include <mpi.h>

#include "dtrain/status.h"

typedef struct {
    MPI_Comm comm;      /* the workers */
    int rank, size;
    long *seen;         /* (size) latest step announced by each peer, -1 none */
    long *inbox;        /* (size) receive buffers */
    long outbox;        /* this rank's announced step (send buffer) */
    MPI_Request *recv;  /* (size) one posted receive per peer (NULL for self) */
    MPI_Request *send;  /* (size) last announcement to each peer */
} dt_peers;

dt_status dt_peers_create(dt_peers *p, MPI_Comm comm);
/* Announces `step` to every peer and collects announcements that arrived. */
dt_status dt_peers_announce(dt_peers *p, long step);
/* Writes "r1, r2" of peers whose latest step is below `step` into buf. */
void dt_peers_missing(dt_peers *p, long step, char *buf, size_t cap);
void dt_peers_free(dt_peers *p);

#endif

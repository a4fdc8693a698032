/* Messages cut into segments under Open MPI's TCP eager limit, all posted
 * at once.
 *
 * Open MPI sends a message up to btl_tcp_eager_limit (64 KiB with its
 * header) at once; a longer one waits for the receiver's rendezvous
 * handshake, whose acknowledgement travels in the receiver's TCP stream
 * behind whatever that rank is sending itself. Two ranks exchanging large
 * messages over one connection then often move them one direction at a
 * time, each waiting for the other's data to drain before its handshake
 * gets through (docs/CLUSTER.md). Segments of at most DT_SEGMENT_BYTES go
 * without handshakes, both directions at once. Used by the ring allreduce
 * and the sufficient factors' exchange. */
#ifndef DTRAIN_COMM_SEGMENTS_H
#define DTRAIN_COMM_SEGMENTS_H

#include <mpi.h>
#include <stddef.h>

#include "dtrain/status.h"

enum { DT_SEGMENT_BYTES = 64000 };

/* Segments of at most seg words that n words make (0 for n = 0). */
size_t dt_segment_count(size_t n, size_t seg);

/* Posts n words (of `size` bytes each, MPI type `type`) of buf in segments
 * of at most seg words, to peer (send = 1) or from it (send = 0), with tag
 * on comm, into reqs (room for dt_segment_count(n, seg)); returns the
 * requests posted. A post that fails sets *s, naming `what` (posting
 * nothing after it; its request stays MPI_REQUEST_NULL); *s must be DT_OK
 * on entry for any to be posted. Both ends of a message must cut it with
 * the same seg. */
int dt_post_segments(MPI_Comm comm, int tag, void *buf, size_t n, MPI_Datatype type, int size, size_t seg, int peer,
                     int send, MPI_Request *reqs, const char *what, dt_status *s);

#endif

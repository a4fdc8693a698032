/* Segmented messages: see segments.h. */
#include "segments.h"

#include <stdio.h>

#include "dtrain/dist.h"

size_t dt_segment_count(size_t n, size_t seg) { return (n + seg - 1) / seg; }

int dt_post_segments(MPI_Comm comm, int tag, void *buf, size_t n, MPI_Datatype type, int size, size_t seg, int peer,
                     int send, MPI_Request *reqs, const char *what, dt_status *s) {
    int k = 0;
    for (size_t o = 0; *s == DT_OK && o < n; o += seg, k++) {
        int len = (int)(n - o < seg ? n - o : seg);
        reqs[k] = MPI_REQUEST_NULL; /* stays so if the post fails: the cleanup skips it */
        char *at = (char *)buf + o * (size_t)size;
        int rc = send ? MPI_Isend(at, len, type, peer, tag, comm, &reqs[k])
                      : MPI_Irecv(at, len, type, peer, tag, comm, &reqs[k]);
        if (rc != MPI_SUCCESS) {
            char call[128];
            snprintf(call, sizeof call, "%s (%s)", what, send ? "MPI_Isend" : "MPI_Irecv");
            *s = dt_mpi_check(rc, call);
        }
    }
    return k;
}

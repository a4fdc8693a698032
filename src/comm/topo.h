/* Where the workers are: which of them share a host, for the hierarchical
 * allreduce (Horovod's): workers on one host sum through a shared-memory
 * window, and each sums its shard with the workers of the same local index
 * on the other hosts.
 *
 * A host is what MPI_COMM_TYPE_SHARED groups: with Open MPI, the ranks one
 * daemon started (so the namespaces of scripts/cluster.sh are hosts). */
#ifndef DTRAIN_COMM_TOPO_H
#define DTRAIN_COMM_TOPO_H

#include "dtrain/dist.h"

typedef struct {
    MPI_Comm node;       /* the workers on this host */
    MPI_Comm cross;      /* the workers of this local index on every host; MPI_COMM_NULL unless uniform */
    int local_rank, local_size;
    int hosts;           /* hosts with workers */
    int uniform;         /* every host has local_size workers */
} dt_topology;

/* Collective over c's workers; the same hosts, local_size and uniform on
 * every worker. Free with dt_topology_free. */
dt_status dt_topology_create(dt_topology *t, const dt_comm *c);
void dt_topology_free(dt_topology *t);

/* c's workers regrouped: *out has c's world and ranks with workers = comm
 * (node or cross), nworkers and worker its size and this worker's rank. */
dt_status dt_topology_comm(const dt_comm *c, MPI_Comm comm, dt_comm *out);

#endif

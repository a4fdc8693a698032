#include "topo.h"

dt_status dt_topology_create(dt_topology *t, const dt_comm *c) {
    t->node = t->cross = MPI_COMM_NULL;
    DT_TRY(dt_mpi_check(MPI_Comm_split_type(c->workers, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &t->node),
                        "finding the workers on this host (MPI_Comm_split_type)"));
    DT_TRY(dt_mpi_check(MPI_Comm_rank(t->node, &t->local_rank), "MPI_Comm_rank"));
    DT_TRY(dt_mpi_check(MPI_Comm_size(t->node, &t->local_size), "MPI_Comm_size"));
    /* hosts: one leader each; uniform: the smallest host is the largest. */
    int in[3] = {t->local_rank == 0, -t->local_size, t->local_size}, sum[1], ext[2];
    DT_TRY(dt_mpi_check(MPI_Allreduce(in, sum, 1, MPI_INT, MPI_SUM, c->workers), "counting hosts (MPI_Allreduce)"));
    DT_TRY(dt_mpi_check(MPI_Allreduce(in + 1, ext, 2, MPI_INT, MPI_MAX, c->workers),
                        "comparing hosts (MPI_Allreduce)"));
    t->hosts = sum[0];
    t->uniform = -ext[0] == ext[1];
    if (!t->uniform) return DT_OK;
    return dt_mpi_check(MPI_Comm_split(c->workers, t->local_rank, c->worker, &t->cross),
                        "grouping the workers across hosts (MPI_Comm_split)");
}

void dt_topology_free(dt_topology *t) {
    if (t->node != MPI_COMM_NULL) MPI_Comm_free(&t->node);
    if (t->cross != MPI_COMM_NULL) MPI_Comm_free(&t->cross);
}

dt_status dt_topology_comm(const dt_comm *c, MPI_Comm comm, dt_comm *out) {
    *out = *c;
    out->workers = comm;
    DT_TRY(dt_mpi_check(MPI_Comm_size(comm, &out->nworkers), "MPI_Comm_size"));
    return dt_mpi_check(MPI_Comm_rank(comm, &out->worker), "MPI_Comm_rank");
}

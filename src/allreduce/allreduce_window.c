/* --mode allreduce, the window path (allreduce.h): when every worker is on
 * this machine (--allreduce-algo auto or shm) the gradients never travel:
 * the workers share one window of gradient slots, parameters and velocity,
 * and end_step sums and updates a 1/W shard of the parameters per worker
 * (shm.h). There are no buckets and no thread then: on a machine whose
 * cores all compute, a sum run beside backprop only takes the core from it
 * (docs/PERFORMANCE.md).
 * Across hosts with the same number of workers on each, several on some
 * (--allreduce-algo auto or hier), each host has its window and worker r
 * of each host sums its shard with worker r of the others by a ring at the
 * end of the step (shm.h, topo.h: Horovod's hierarchical allreduce); bf16
 * and fp16 compress that ring. The two share the window code, so they
 * share this file. */
#include "dtrain/mem.h"
#include "dtrain/timer.h"
#include "allreduce.h"
#include "comm/shm.h"
#include "comm/topo.h"

typedef struct {
    dt_topology topo;         /* the hosts */
    int hier;                 /* several hosts: then node and cross exist */
    dt_group node, cross;     /* the workers on this host; this shard's on every host */
    dt_shm shm;
} window;

/* Whether the step ends in shared-memory windows, one per host with a
 * ring across hosts (hier): --allreduce-algo shm or hier, or auto when no
 * flag asked for network savings (--sfb/--sacp plan bytes on the wire;
 * top-k works on buckets) and the hosts allow it. bf16/fp16 leave auto the
 * hierarchy (its ring across hosts is compressed), not the one-host window
 * (no wire). Sets the bytes per step when it runs. */
static dt_status decide(ar_ctx *a, window *p, int *yes) {
    dt_ar_algo algo = a->cfg.ar_algo;
    dt_gc_kind gc = a->cfg.codec.kind;
    const dt_topology *h = &p->topo;
    if (algo == DT_AR_SHM && h->hosts > 1)
        return dt_fail(DT_ERR_USAGE, "--allreduce-algo shm needs every worker on one host (here %d hosts); use "
                                     "hier, ring or mpi across hosts", h->hosts);
    if (algo == DT_AR_HIER && !h->uniform)
        return dt_fail(DT_ERR_USAGE, "--allreduce-algo hier needs the same number of workers on every host (the "
                                     "%d hosts here differ); use ring or mpi", h->hosts);
    /* Across hosts, auto takes the hierarchy only when hosts have several
     * workers: with one each, it would only give up the buckets' overlap
     * with backprop. */
    p->hier = h->hosts > 1 && h->uniform && (algo == DT_AR_HIER || h->local_size > 1);
    *yes = (h->hosts == 1 && gc == DT_GC_NONE) || p->hier;
    if (p->hier) { /* (L-1)/L of its shard's floats from the host's slots; its shard over the ring */
        double L = h->local_size, n = (double)a->net->nparams;
        a->bytes_per_step = (L - 1) / L * n * sizeof(float) +
                            dt_allreduce_bytes_each_way(&a->cfg.codec, (size_t)(n / L), h->hosts);
    } else if (*yes) { /* a worker reads (W-1)/W of its shard from its peers' slots */
        double W = a->comm.nworkers;
        a->bytes_per_step = (W - 1) / W * (double)a->net->nparams * sizeof(float);
    }
    return DT_OK;
}

/* The hosts are looked at (collectively) unless the flags rule the window
 * out; every worker sees the same hosts and so decides alike, and frees
 * them alike when the window does not run. */
static dt_status window_enabled(ar_ctx *a, int *yes) {
    dt_ar_algo algo = a->cfg.ar_algo;
    *yes = 0;
    if (algo == DT_AR_RING || algo == DT_AR_MPI ||
        (algo == DT_AR_AUTO && (a->cfg.sfb != DT_SFB_OFF || a->cfg.codec.kind == DT_GC_TOPK)))
        return DT_OK;
    window *p;
    DT_TRY(dt_alloc_bytes((void **)&p, sizeof *p, "allreduce window"));
    dt_status st = dt_topology_create(&p->topo, &a->comm);
    if (st == DT_OK) st = decide(a, p, yes);
    if (st == DT_OK && *yes) {
        a->path_state = p;
        return DT_OK;
    }
    dt_topology_free(&p->topo);
    dt_free(p);
    return st;
}

static dt_status window_start(ar_ctx *a, dt_sync *s, dt_trainer *t) {
    /* No buckets, no thread, nothing per layer: end_step does it all. */
    window *p = a->path_state;
    dt_group *g = &a->group, *cross = NULL;
    if (p->hier) {
        dt_comm node, across;
        DT_TRY(dt_topology_comm(&a->comm, p->topo.node, &node));
        DT_TRY(dt_topology_comm(&a->comm, p->topo.cross, &across));
        DT_TRY(dt_group_create(&p->node, &node, &a->cfg.stall));
        DT_TRY(dt_group_create(&p->cross, &across, &a->cfg.stall));
        g = &p->node;
        cross = &p->cross;
    }
    DT_TRY(dt_shm_create(&p->shm, g, cross, a->cfg.codec.kind, dt_trainer_optim(t), a->net->nparams,
                         a->net->params, dt_trainer_opt_state(t)));
    dt_net_bind_blocks(a->net, p->shm.params, dt_shm_slot(&p->shm));
    dt_trainer_bind_opt_state(t, p->shm.opt_state);
    s->grad_ready = NULL;
    return DT_OK;
}

/* The sums and the update, after backprop: nothing hides them. */
static dt_status window_end_step(ar_ctx *a, dt_trainer *t, float lr, double bytes, double *comm, double *waited) {
    (void)t;
    window *p = a->path_state;
    double u0 = dt_now();
    dt_group *g = p->hier ? &p->node : &a->group;
    atomic_store(&g->hurry, 1);
    if (p->hier) atomic_store(&p->cross.hurry, 1);
    dt_status st = dt_shm_update(&p->shm, g, lr, 1.0f / (float)a->comm.nworkers, a->step + 1);
    atomic_store(&g->hurry, 0);
    if (p->hier) atomic_store(&p->cross.hurry, 0);
    DT_TRY(st);
    double u1 = dt_now();
    dt_timeline_span(a->cfg.timeline, DT_TL_COMM, DT_TL_CAT_COMM, "shared-memory allreduce + update", u0, u1,
                     (dt_tl_arg[]){{"bytes", bytes}}, 1);
    *comm += u1 - u0;
    *waited += u1 - u0;
    return DT_OK;
}

static void window_free(ar_ctx *a, int together) {
    window *p = a->path_state;
    dt_shm_free(&p->shm, together);
    if (p->hier) {
        dt_group_free(&p->node);
        dt_group_free(&p->cross);
    }
    dt_topology_free(&p->topo);
    dt_free(p);
}

static void window_describe(const ar_ctx *a, FILE *out) {
    const window *p = a->path_state;
    char codec[32];
    if (p->hier)
        fprintf(out, "allreduce: hier, %d hosts x %d workers: a shared-memory window per host, a ring across hosts "
                "(%s); %.0f bytes sent per step (and as many received)\n", p->topo.hosts, p->topo.local_size,
                dt_grad_codec_name(&a->cfg.codec, codec, sizeof codec), a->bytes_per_step);
    else
        fprintf(out, "allreduce: shm, one shared-memory window of the %d workers on this host; "
                "%.0f bytes sent per step (and as many received)\n", a->comm.nworkers, a->bytes_per_step);
}

const ar_path ar_window_path = {"window", window_enabled, window_start, window_end_step, window_free,
                                window_describe};

/* Sufficient-factor broadcasting: see sfb.h. */
#include <string.h>

#include "dtrain/mem.h"
#include "layers/gemm.h"
#include "segments.h"
#include "sfb.h"

dt_status dt_sfb_create(dt_sfb *f, dt_net *net, const dt_comm_plan *plan, int P) {
    memset(f, 0, sizeof *f);
    f->K = net->max_batch;
    f->P = P;
    DT_TRY(dt_alloc_bytes((void **)&f->index, sizeof(int) * (size_t)net->nlayers, "sfb"));
    DT_TRY(dt_alloc_bytes((void **)&f->layers, sizeof(dt_sfb_layer) * (size_t)(plan->nsfb + 1), "sfb"));
    for (int i = 0; i < net->nlayers; i++) {
        f->index[i] = -1;
        if (!plan->sfb[i]) continue;
        dt_layer *l = &net->layers[i];
        dt_sfb_layer *x = &f->layers[f->n];
        x->layer = i, x->M = l->out.c, x->N = (int)dt_shape_size(l->in);
        size_t ku, kv, all_u, all_v;
        DT_TRY(dt_mul_size(&ku, (size_t)f->K, (size_t)x->M, "sufficient factors"));
        DT_TRY(dt_mul_size(&kv, (size_t)f->K, (size_t)x->N, "sufficient factors"));
        DT_TRY(dt_mul_size(&all_u, ku, (size_t)P, "sufficient factors"));
        DT_TRY(dt_mul_size(&all_v, kv, (size_t)P, "sufficient factors"));
        DT_TRY(dt_alloc_floats(&x->u, ku, "sufficient factors"));
        DT_TRY(dt_alloc_floats(&x->v, kv, "sufficient factors"));
        DT_TRY(dt_alloc_floats(&x->all_u, all_u, "sufficient factors"));
        DT_TRY(dt_alloc_floats(&x->all_v, all_v, "sufficient factors"));
        DT_TRY(dt_net_leave_weight_grad(net, i));
        f->index[i] = f->n++;
    }
    return DT_OK;
}

void dt_sfb_free(dt_sfb *f) {
    for (int k = 0; f->layers && k < f->n; k++) {
        dt_free(f->layers[k].u);
        dt_free(f->layers[k].v);
        dt_free(f->layers[k].all_u);
        dt_free(f->layers[k].all_v);
    }
    dt_free(f->layers);
    dt_free(f->index);
    memset(f, 0, sizeof *f);
}

void dt_sfb_capture(dt_sfb *f, const dt_net *net, int layer) {
    dt_sfb_layer *x = &f->layers[f->index[layer]];
    size_t B = (size_t)net->bwd_batch, K = (size_t)f->K, M = (size_t)x->M, N = (size_t)x->N;
    memcpy(x->u, net->bwd_dout, sizeof(float) * B * M);
    memcpy(x->v, net->bwd_in, sizeof(float) * B * N);
    memset(x->u + B * M, 0, sizeof(float) * (K - B) * M);
    memset(x->v + B * N, 0, sizeof(float) * (K - B) * N);
}

enum { TAG_SFB = 903 };

/* Floats per segment of a factor message (segments.h). */
static size_t factor_segment(void) { return DT_SEGMENT_BYTES / sizeof(float); }

/* Requests dt_sfb_start posts for layer. */
static int layer_requests(const dt_sfb *f, int layer) {
    const dt_sfb_layer *x = &f->layers[f->index[layer]];
    size_t K = (size_t)f->K, seg = factor_segment();
    /* u and v, sent to and received from each other worker. */
    return (int)(2 * (size_t)(f->P - 1) * (dt_segment_count(K * (size_t)x->M, seg) +
                                           dt_segment_count(K * (size_t)x->N, seg)));
}

int dt_sfb_requests(const dt_sfb *f) {
    int n = 0;
    for (int k = 0; k < f->n; k++) n += layer_requests(f, f->layers[k].layer);
    return n;
}

/* Posts one factor's exchange with every other worker: mine (k floats) to
 * each, theirs into their blocks of all (P k, worker-major); mine copied
 * into my block. Returns the requests posted (*s: the status). */
static int exchange(const dt_sfb *f, MPI_Comm comm, int me, float *mine, float *all, size_t k, MPI_Request *reqs,
                    dt_status *s) {
    size_t seg = factor_segment();
    int n = 0;
    memcpy(all + (size_t)me * k, mine, sizeof(float) * k);
    for (int p = 0; p < f->P; p++) {
        if (p == me) continue;
        n += dt_post_segments(comm, TAG_SFB, all + (size_t)p * k, k, MPI_FLOAT, sizeof(float), seg, p, 0, reqs + n,
                              "sufficient factors", s);
        n += dt_post_segments(comm, TAG_SFB, mine, k, MPI_FLOAT, sizeof(float), seg, p, 1, reqs + n,
                              "sufficient factors", s);
    }
    return n;
}

dt_status dt_sfb_start(dt_sfb *f, int layer, MPI_Comm comm, MPI_Request *reqs, int *nreqs) {
    dt_sfb_layer *x = &f->layers[f->index[layer]];
    int me;
    *nreqs = 0;
    DT_TRY(dt_mpi_check(MPI_Comm_rank(comm, &me), "sufficient factors (MPI_Comm_rank)"));
    size_t K = (size_t)f->K;
    dt_status s = DT_OK;
    int n = exchange(f, comm, me, x->u, x->all_u, K * (size_t)x->M, reqs, &s);
    n += exchange(f, comm, me, x->v, x->all_v, K * (size_t)x->N, reqs + n, &s);
    if (s != DT_OK) {
        dt_cancel_requests(reqs, n); /* none may outlive the step's buffers */
        return s;
    }
    *nreqs = n;
    return DT_OK;
}

void dt_sfb_rebuild(const dt_sfb *f, int layer, dt_net *net, float scale) {
    const dt_sfb_layer *x = &f->layers[f->index[layer]];
    dt_layer *l = &net->layers[layer];
    int rows = f->P * f->K;
    float *dw = net->grads + net->param_offset[layer]; /* (M, N); the layer's own dw is NULL */
    dt_sgemm('T', 'N', x->M, x->N, rows, scale, x->all_u, x->M, x->all_v, x->N, 0.0f, dw, x->N);
    /* The bias gradient is the sum of the u factors; a layer without a bias
     * (batch_normalize=1: nb 0) has none, and its db is the next layer's. */
    int nb = (int)l->nb;
    memset(l->db, 0, sizeof(float) * (size_t)nb);
    for (int r = 0; r < rows; r++) {
        const float *u = x->all_u + (size_t)r * (size_t)x->M;
        for (int o = 0; o < nb; o++) l->db[o] += u[o];
    }
    for (int o = 0; o < nb; o++) l->db[o] *= scale;
}

double dt_sfb_layer_bytes_each_way(const dt_sfb *f, int layer) {
    const dt_sfb_layer *x = &f->layers[f->index[layer]];
    return dt_sfb_bytes(x->M, x->N, f->K, f->P) / 2;
}

double dt_sfb_bytes_each_way(const dt_sfb *f) {
    double bytes = 0;
    for (int k = 0; k < f->n; k++) bytes += dt_sfb_layer_bytes_each_way(f, f->layers[k].layer);
    return bytes;
}

dt_status dt_sfb_setup(dt_sync *s, dt_comm_plan *plan, dt_sfb *f, dt_net *net, const dt_dist_cfg *cfg,
                       const dt_comm *c) {
    DT_TRY(dt_comm_plan_create(plan, net, cfg->mode, cfg->sfb, c->nworkers, cfg->batch, &cfg->codec));
    DT_TRY(dt_sfb_create(f, net, plan, c->nworkers));
    if (cfg->plan_out && c->worker == 0 && cfg->sfb != DT_SFB_OFF) dt_comm_plan_write(cfg->plan_out, plan, net);
    if (cfg->sfb != DT_SFB_OFF) s->plan_bytes = dt_comm_plan_bytes(plan);
    return DT_OK;
}

/* Shard maps, communication plans and fusion buckets: pure functions of
 * sizes, no MPI. */
#include <string.h>

#include "dtrain/plan.h"
#include "dtrain/mem.h"
#include "codec.h"

void dt_shard_range(size_t n, int shards, int s, size_t *lo, size_t *hi) {
    /* The first n % shards shards get one extra float. */
    size_t base = n / (size_t)shards, extra = n % (size_t)shards, us = (size_t)s;
    *lo = us * base + (us < extra ? us : extra);
    *hi = *lo + base + (us < extra ? 1 : 0);
}

/* --grad-compression with the mode and --allreduce-algo: what would not
 * change the bytes on the wire is an error. */
static dt_status check_codec(const dt_dist_cfg *cfg) {
    dt_gc_kind gc = cfg->codec.kind;
    if (gc == DT_GC_NONE) return DT_OK;
    char name[32];
    dt_grad_codec_name(&cfg->codec, name, sizeof name);
    char flag[64];
    snprintf(flag, sizeof flag, "--grad-compression %s", name);
    DT_TRY(dt_mode_check_flag(cfg->mode, DT_MF_COMPRESSION, flag));
    if (dt_mode_is_ps(cfg->mode) && gc == DT_GC_TOPK)
        return dt_fail(DT_ERR_USAGE, "--grad-compression %s works with --mode allreduce; the parameter servers "
                                     "take bf16 or fp16", name);
    dt_ar_algo algo = cfg->ar_algo;
    if (!(dt_mode_info_of(cfg->mode)->flags & DT_MF_ALGO)) return DT_OK;
    if (algo == DT_AR_SHM || algo == DT_AR_MPI || (gc == DT_GC_TOPK && algo != DT_AR_AUTO))
        return dt_fail(DT_ERR_USAGE, "--grad-compression %s and --allreduce-algo %s exclude each other (%s); "
                                     "use %s", name, dt_ar_algo_name(algo),
                       algo == DT_AR_SHM   ? "the window moves nothing over a wire"
                       : algo == DT_AR_MPI ? "MPI_Iallreduce sums fp32 only"
                                           : "top-k allgathers its pairs, it has no ring",
                       gc == DT_GC_TOPK ? "auto" : "auto, ring or hier");
    return DT_OK;
}

dt_status dt_dist_cfg_check(const dt_dist_cfg *cfg, int nworkers) {
    if (cfg->sfb != DT_SFB_OFF)
        DT_TRY(dt_mode_check_flag(cfg->mode, DT_MF_FACTORS, cfg->sfb == DT_SFB_ALL ? "--sfb" : "--sacp"));
    if ((cfg->ar_algo == DT_AR_SHM || cfg->ar_algo == DT_AR_HIER) && cfg->sfb != DT_SFB_OFF)
        return dt_fail(DT_ERR_USAGE, "--allreduce-algo %s and --%s exclude each other: factors are sent by "
                                     "buckets, and the %s sums whole shards at the end of the step",
                       cfg->ar_algo == DT_AR_SHM ? "shm" : "hier", dt_sfb_policy_name(cfg->sfb),
                       cfg->ar_algo == DT_AR_SHM ? "shared window" : "hierarchy");
    DT_TRY(check_codec(cfg));
    int k = cfg->group_size;
    if (k == 1) return DT_OK;
    DT_TRY(dt_mode_check_flag(cfg->mode, DT_MF_GROUPS, "--group-size"));
    if (k < 1 || nworkers % k != 0)
        return dt_fail(DT_ERR_USAGE, "--group-size %d does not divide the %d workers", k, nworkers);
    if (cfg->sfb != DT_SFB_OFF) return dt_fail(DT_ERR_USAGE, "--group-size and --sfb/--sacp exclude each other");
    return DT_OK;
}

double dt_dense_bytes(dt_mode mode, size_t n, int P, const dt_grad_codec *codec) {
    if (P <= 1) return 0;
    if (dt_mode_is_ps(mode)) return 2 * dt_ps_bytes_each_way(codec, n); /* a push and a pull */
    return 2 * dt_allreduce_bytes_each_way(codec, n, P);
}

double dt_ps_bytes_each_way(const dt_grad_codec *codec, size_t n) {
    return (double)n * (codec && dt_gc_is_half(codec->kind) ? sizeof(uint16_t) : sizeof(float));
}

double dt_sfb_bytes(int M, int N, int K, int P) {
    return 2.0 * K * (P - 1) * ((double)M + N) * sizeof(float);
}

dt_status dt_comm_plan_create(dt_comm_plan *plan, const dt_net *net, dt_mode mode, dt_sfb_policy policy,
                              int P, int K, const dt_grad_codec *codec) {
    memset(plan, 0, sizeof *plan);
    size_t L = (size_t)net->nlayers;
    plan->nlayers = net->nlayers;
    DT_TRY(dt_alloc_bytes((void **)&plan->sfb, L, "communication plan"));
    DT_TRY(dt_alloc_bytes((void **)&plan->dense_bytes, L * sizeof(double), "communication plan"));
    DT_TRY(dt_alloc_bytes((void **)&plan->sfb_bytes, L * sizeof(double), "communication plan"));
    DT_TRY(dt_alloc_bytes((void **)&plan->ps_offset, (L + 1) * sizeof(size_t), "communication plan"));
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        plan->dense_bytes[i] = dt_dense_bytes(mode, l->nw + l->nb, P, codec);
        int factors = (l->ops->caps & DT_LAYER_CAP_FACTORS) != 0;
        if (factors) plan->sfb_bytes[i] = dt_sfb_bytes(l->out.c, (int)dt_shape_size(l->in), K, P);
        int fc = factors && P > 1;
        plan->sfb[i] = fc && dt_sfb_chosen(policy, plan->sfb_bytes[i], plan->dense_bytes[i]);
        plan->nsfb += plan->sfb[i];
        plan->ps_offset[i] = plan->ps_n;
        if (!plan->sfb[i]) plan->ps_n += l->nw + l->nb;
    }
    plan->ps_offset[L] = plan->ps_n;
    return DT_OK;
}

void dt_comm_plan_free(dt_comm_plan *plan) {
    dt_free(plan->sfb);
    dt_free(plan->dense_bytes);
    dt_free(plan->sfb_bytes);
    dt_free(plan->ps_offset);
    memset(plan, 0, sizeof *plan);
}

double dt_comm_plan_bytes(const dt_comm_plan *plan) {
    double total = 0;
    for (int i = 0; i < plan->nlayers; i++) total += plan->sfb[i] ? plan->sfb_bytes[i] : plan->dense_bytes[i];
    return total;
}

void dt_comm_plan_write(FILE *out, const dt_comm_plan *plan, const dt_net *net) {
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        if (l->nw + l->nb == 0) continue;
        char sfb[32] = "-";
        if (l->ops->caps & DT_LAYER_CAP_FACTORS) snprintf(sfb, sizeof sfb, "%.3f MB", plan->sfb_bytes[i] / 1e6);
        fprintf(out, "plan: layer %d %-13s %9zu params  usual %9.3f MB  sfb %11s  -> %s\n", i, l->ops->name,
                l->nw + l->nb, plan->dense_bytes[i] / 1e6, sfb, plan->sfb[i] ? "sfb" : "usual");
    }
    fprintf(out, "plan: %.3f MB per worker per step (sent + received)\n", dt_comm_plan_bytes(plan) / 1e6);
}

int dt_bucket_plan(dt_bucket *out, int max, const dt_net *net, const dt_comm_plan *plan,
                   size_t bucket_floats) {
    return dt_bucket_plan_layers(out, max, net->param_offset, net->nlayers, plan ? plan->sfb : NULL,
                                 bucket_floats);
}

int dt_bucket_plan_layers(dt_bucket *out, int max, const size_t *param_offset, int nlayers,
                          const unsigned char *sfb, size_t bucket_floats) {
    int nb = 0;
    size_t open_hi = 0, open_lo = 0; /* the bucket being filled: [open_lo, open_hi) */
    int open = 0, open_layer = 0;    /* open_layer: the layer holding open_lo */
    for (int i = nlayers - 1; i >= 0; i--) {
        size_t lo = param_offset[i], hi = param_offset[i + 1];
        if (lo == hi) continue;
        if (sfb && sfb[i]) { /* its own exchange; the open bucket cannot span it */
            if (open) {
                if (nb >= max) return -1;
                out[nb++] = (dt_bucket){open_lo, open_hi, open_layer, 0};
                open = 0;
            }
            if (nb >= max) return -1;
            out[nb++] = (dt_bucket){lo, hi, i, 1};
            continue;
        }
        if (bucket_floats == 0) { /* one bucket per layer */
            if (nb >= max) return -1;
            out[nb++] = (dt_bucket){lo, hi, i, 0};
            continue;
        }
        /* Walk the layer downwards from hi, closing a bucket whenever it is full. */
        size_t top = hi;
        int split = 0; /* a bucket closed inside a layer larger than a bucket */
        while (top > lo) {
            if (!open) open = 1, open_hi = top, open_lo = top;
            size_t room = bucket_floats - (open_hi - open_lo);
            size_t take = top - lo < room ? top - lo : room;
            open_lo = top - take;
            open_layer = i;
            top = open_lo;
            if (open_hi - open_lo == bucket_floats) {
                if (nb >= max) return -1;
                out[nb++] = (dt_bucket){open_lo, open_hi, i, 0};
                open = 0;
                split = hi - lo > bucket_floats;
            }
        }
        /* A bucket still open at a layer boundary keeps filling from the
         * layers below, unless it is the tail of a layer split over buckets:
         * that was final with the rest of the layer, and the layers below
         * would hold it back for their whole backward (cnn: the last 77 K
         * floats of fc1 waited 25 ms for conv2). */
        if (open && split) {
            if (nb >= max) return -1;
            out[nb++] = (dt_bucket){open_lo, open_hi, i, 0};
            open = 0;
        }
    }
    if (open) {
        if (nb >= max) return -1;
        out[nb++] = (dt_bucket){open_lo, open_hi, open_layer, 0};
    }
    return nb;
}

/* Parameter servers, the immediate policy (ps-async): each segment of a
 * worker's gradient is applied as it arrives, with lr / W (less when it is
 * staler than usual), and goes straight back to that worker alone. */
#include "dtrain/mem.h"
#include "dtrain/timer.h"
#include "ps_server.h"

/* The gradient each worker is sending, its step fixed at its first
 * segment. */
typedef struct {
    float *seg_lr;     /* (W) the step of the gradient arriving */
    long *seg_lag;     /* (W) its lag */
    long *seg_version; /* (W) the version w reads in the reply being sent */
} immediate;

/* The step of one gradient in the asynchronous modes. Its share of a
 * synchronous update, lr / W, so one --lr means the same step size per
 * sample in every mode. Staleness-aware beyond the normal (Zhang et al.
 * 2016): with W workers a gradient normally finds the W - 1 others' updates
 * applied since it read, plus in the deferred modes the worker's own
 * previous gradient (it read before that was applied); `normal` is that
 * count, which the share already accounts for. A staler one gets
 * lr / (1 + lag). */
float ps_async_lr(const server *sv, float lr, long lag, long normal) {
    return lag <= normal ? lr / (float)sv->W : lr / (float)(1 + lag);
}

/* The first segment of w's gradient is here (or, on a shard without
 * segments, all of it): its previous reply has gone; this gradient's lag
 * and step are fixed, and the version w will read is the shard's now plus
 * this gradient (later segments may carry more). */
static dt_status async_reply_begins(server *sv, int w) {
    immediate *p = sv->pol;
    DT_TRY(ps_wait_replies(sv, w));
    p->seg_lag[w] = sv->version - sv->peer[w].v_read; /* others' updates since w read */
    p->seg_lr[w] = ps_async_lr(sv, *lr_of(sv, w, sv->peer[w].wclock), p->seg_lag[w], sv->W - 1);
    p->seg_version[w] = sv->version + 1;
    return DT_OK;
}

/* w's gradient segment k is here; applied, it goes straight back (a
 * snapshot: another worker's update may change the shard while this reply
 * is still being read). */
static dt_status async_segment(server *sv, int w, int k) {
    immediate *p = sv->pol;
    size_t lo = sv->seg_lo[k], hi = sv->seg_hi[k];
    if (k == 0) DT_TRY(async_reply_begins(sv, w));
    double t0 = dt_now();
    const float *g = slot_of(sv, w, sv->peer[w].wclock);
    ps_apply(sv, p->seg_lr[w], p->seg_version[w] + sv->t_offset, g, lo, hi);
    dt_timeline_span(sv->cfg->timeline, DT_TL_MAIN, DT_TL_CAT_UPDATE, "apply", t0, dt_now(),
                     (dt_tl_arg[]){{"worker", world_rank_of(sv, w)}, {"clock", sv->peer[w].wclock}, {"segment", k}},
                     3);
    return ps_send_params(sv, w, ps_take_snapshot(sv, w, lo, hi), lo, hi, 1 + k, 1);
}

static dt_status immediate_complete(server *sv, int w) {
    immediate *p = sv->pol;
    /* Its segments have all gone back. */
    if (sv->nseg == 0) DT_TRY(async_reply_begins(sv, w));
    sv->version++;
    sv->applied++;
    return ps_send_header(sv, w, p->seg_lag[w], &p->seg_version[w]);
}

/* One: a gradient is applied before its worker's next can start. */
static int immediate_slots(const dt_dist_cfg *cfg) {
    (void)cfg;
    return 1;
}

static dt_status immediate_setup(server *sv, ps_traits *tr) {
    immediate *p;
    size_t W = (size_t)sv->W;
    DT_TRY(dt_alloc_bytes((void **)&p, sizeof *p, "server"));
    sv->pol = p;
    DT_TRY(dt_alloc_bytes((void **)&p->seg_lr, W * sizeof(float), "server"));
    DT_TRY(dt_alloc_bytes((void **)&p->seg_lag, W * sizeof(long), "server"));
    DT_TRY(dt_alloc_bytes((void **)&p->seg_version, W * sizeof(long), "server"));
    for (size_t w = 0; w < W; w++) p->seg_version[w] = sv->committed;
    tr->turns = 1;
    tr->decodes = 0;
    return DT_OK;
}

static void immediate_free(server *sv) {
    immediate *p = sv->pol;
    if (!p) return;
    dt_free(p->seg_lr);
    dt_free(p->seg_lag);
    dt_free(p->seg_version);
    dt_free(p);
}

const ps_policy ps_immediate_policy = {
    .slots = immediate_slots,
    .setup = immediate_setup,
    .segment = async_segment,
    .complete = immediate_complete,
    .free = immediate_free,
};

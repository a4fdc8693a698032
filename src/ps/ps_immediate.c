/* Parameter servers, the immediate policy (ps-async): each segment of a
 * worker's gradient is applied as it arrives, with lr / W (less when it is
 * staler than usual), and goes straight back to that worker alone. */
#include "dtrain/timer.h"
#include "ps_server.h"

/* The step of one gradient in the asynchronous modes. Its share of a
 * synchronous update, lr / W, so one --lr means the same step size per
 * sample in every mode. Staleness-aware beyond the normal (Zhang et al.
 * 2016): with W workers a gradient normally finds the W - 1 others' updates
 * applied since it read, plus in the deferred modes the worker's own
 * previous gradient (it read before that was applied); the share already
 * accounts for those. A staler one gets lr / (1 + lag). */
float ps_async_lr(const server *sv, float lr, long lag) {
    long normal = sv->W - 1 + sv->deferred;
    return lag <= normal ? lr / (float)sv->W : lr / (float)(1 + lag);
}

/* ps-async: the first segment of w's gradient is here (or, on a shard
 * without segments, all of it): its previous reply has gone; this
 * gradient's lag and step are fixed, and the version w will read is the
 * shard's now plus this gradient (later segments may carry more). */
static dt_status async_reply_begins(server *sv, int w) {
    DT_TRY(ps_wait_replies(sv, w));
    sv->seg_lag[w] = sv->version - sv->v_read[w]; /* others' updates since w read */
    sv->seg_lr[w] = ps_async_lr(sv, *lr_of(sv, w, sv->wclock[w]), sv->seg_lag[w]);
    sv->seg_version[w] = sv->version + 1;
    return DT_OK;
}

/* ps-async: w's gradient segment k is here; applied, it goes straight back
 * (a snapshot: another worker's update may change the shard while this
 * reply is still being read). */
static dt_status async_segment(server *sv, int w, int k) {
    size_t lo = sv->seg_lo[k], hi = sv->seg_hi[k];
    if (k == 0) DT_TRY(async_reply_begins(sv, w));
    double t0 = dt_now();
    const float *g = slot_of(sv, w, sv->wclock[w]);
    ps_apply(sv, sv->seg_lr[w], sv->seg_version[w] + sv->t_offset, g, lo, hi);
    dt_timeline_span(sv->cfg->timeline, DT_TL_MAIN, DT_TL_CAT_UPDATE, "apply", t0, dt_now(),
                     (dt_tl_arg[]){{"worker", world_rank_of(sv, w)}, {"clock", sv->wclock[w]}, {"segment", k}},
                     3);
    return ps_send_params(sv, w, ps_take_snapshot(sv, w, lo, hi), lo, hi, 1 + k, 1);
}

static dt_status immediate_complete(server *sv, int w) {
    /* Its segments have all gone back. */
    if (sv->nseg == 0) DT_TRY(async_reply_begins(sv, w));
    sv->version++;
    sv->applied++;
    return ps_send_header(sv, w, sv->seg_lag[w], &sv->seg_version[w]);
}

const ps_policy ps_immediate_policy = {async_segment, immediate_complete};

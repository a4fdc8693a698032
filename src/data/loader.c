/* The training/evaluation loader: sharding, shuffling, augmentation and
 * normalisation as data.h specifies, with an optional prefetch thread and
 * a pool of threads that build a batch's samples.
 *
 * A batch is a pure function of (epoch, step) (see build()), so whether the
 * caller or the prefetch thread builds it, and how many threads share it,
 * cannot change a bit of the output, and seeking is just setting the
 * position. Every buffer is allocated and every dataset property validated
 * at create; the one failure left is an on-demand dataset's fetch (a file
 * that cannot be decoded any more), which the batch carries to the caller. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "data/augment.h"
#include "data/internal.h"
#include "dtrain/mem.h"
#include "dtrain/pool.h"
#include "dtrain/rng.h"
#include "dtrain/timer.h"

/* Salt of random erasing's stream ("erase"). */
#define ERASE_STREAM 0x6572617365ULL

/* One batch and the position it was built for. */
typedef struct {
    float *x;   /* (batch, C, H, W) normalised */
    dt_label *y; /* (batch) */
    int n;      /* samples in it; 0 is the end-of-epoch marker */
    int epoch, step;
    dt_status status; /* of building it; a failure's message in msg (built on another thread) */
    char msg[512];
} batch_buf;

struct dt_loader {
    const dt_dataset *ds;
    dt_loader_cfg cfg;
    dt_shape out;    /* per-sample shape of the batches (cfg.out, or the dataset's) */
    size_t sample;   /* floats per sample of a batch, out's C*H*W */
    size_t image;    /* bytes per image of the dataset, its C*H*W */
    int in_floats;   /* 1: samples go through float images (augment.h): Darknet's
                      * augmentation, RandomResizedCrop or another size than the dataset's */
    int rrc;         /* 1: training with RandomResizedCrop */
    int regions;     /* rrc from the dataset's fetch_region (whole images decoded per sample) */
    float *fimg;     /* in_floats: (threads, fimg_floats) each thread's image as floats
                      * in [0, 1] and the evaluation transform's workspace */
    size_t fimg_floats;
    int lo, hi;      /* eval: this worker's sample range [lo, hi) */
    int steps;       /* batches per epoch on this worker */
    float *lut;      /* (C, 256): normalised value of each byte per channel, from the dataset's
                      * mean/std at create */
    uint32_t *perm;  /* (N) permutation of perm_epoch (training only); used by the builder only */
    dt_pool *pool;   /* cfg.threads threads building a batch's samples (the builder is one) */
    uint8_t *scratch; /* (threads, image) on-demand datasets: each thread's fetched sample */
    int perm_epoch;  /* -1 before the first one */
    int epoch, step; /* the caller's position: the batch next() returns */
    batch_buf buf[2]; /* the caller holds buf[cur]; the prefetch thread fills buf[1 - cur] */
    int cur;
    /* Prefetch (double buffering). `running` is only touched by the caller;
     * cur, ready and stop are guarded by mu. fill_epoch/fill_step are set by
     * the caller before the thread starts and owned by the thread after. */
    pthread_t thread;
    int running;
    pthread_mutex_t mu;
    pthread_cond_t filled;  /* ready became 1 */
    pthread_cond_t drained; /* ready became 0, or stop was set */
    int ready;              /* buf[1 - cur] holds the batch at the caller's position */
    int stop;
    int fill_epoch, fill_step;
};

/* The position after (epoch, step): the marker step == steps ends an epoch. */
static void advance(int steps, int *epoch, int *step) {
    if (*step < steps) {
        ++*step;
    } else {
        ++*epoch;
        *step = 0;
    }
}

/* Fisher-Yates from a stream that depends on (seed, epoch) only, so every
 * worker draws the same permutation. */
static void ensure_perm(dt_loader *l, int epoch) {
    if (l->perm_epoch == epoch) return;
    uint32_t n = (uint32_t)l->ds->n;
    for (uint32_t i = 0; i < n; i++) l->perm[i] = i;
    dt_rng r = dt_rng_seed(dt_hash3(l->cfg.seed, (uint64_t)epoch, 0x5eed));
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = dt_rng_below(&r, i + 1);
        uint32_t t = l->perm[i];
        l->perm[i] = l->perm[j];
        l->perm[j] = t;
    }
    l->perm_epoch = epoch;
}

/* Row y of channel c of sample idx normalised into row (W floats): bytes
 * through the lookup table, floats (arrays data sets) as (v - mean) / std,
 * which for v = byte / 255 is the table's value. */
static void normalised_row(const dt_loader *l, const uint8_t *img, const float *fimg, int c, int y, float *row) {
    const int H = l->ds->shape.h, W = l->ds->shape.w;
    const size_t at = ((size_t)c * H + y) * W;
    if (img) {
        const float *lut = l->lut + (size_t)c * 256;
        for (int x = 0; x < W; x++) row[x] = lut[img[at + x]];
        return;
    }
    const float mean = l->ds->mean[c], std = l->ds->std[c];
    for (int x = 0; x < W; x++) row[x] = (fimg[at + x] - mean) / std;
}

/* out (C, H, W) <- the image of dataset sample idx (C, H, W: bytes img or
 * floats fimg), cropped and flipped as drawn for (seed, epoch, idx) and
 * normalised. The crop window starts at (dy, dx) in [-pad, pad] relative
 * to the image; pixels outside the image are zero, as padding before
 * normalisation (the table's value of byte 0). */
static void make_sample(const dt_loader *l, int epoch, size_t idx, const uint8_t *img, const float *fimg, float *out) {
    const int C = l->ds->shape.c, H = l->ds->shape.h, W = l->ds->shape.w, pad = l->cfg.crop_pad;
    dt_rng r = dt_rng_seed(dt_hash3(l->cfg.seed, (uint64_t)epoch, idx));
    const int dy = (int)dt_rng_below(&r, (uint32_t)(2 * pad + 1)) - pad;
    const int dx = (int)dt_rng_below(&r, (uint32_t)(2 * pad + 1)) - pad;
    const int flip = l->cfg.flip && (dt_rng_next(&r) >> 63);
    float row[DT_DATA_MAX_DIM];
    for (int c = 0; c < C; c++) {
        const float zero = l->lut[(size_t)c * 256];
        for (int y = 0; y < H; y++) {
            float *o = out + ((size_t)c * H + y) * W;
            const int sy = y + dy;
            if (sy < 0 || sy >= H) {
                for (int x = 0; x < W; x++) o[x] = zero;
                continue;
            }
            normalised_row(l, img, fimg, c, sy, row);
            for (int x = 0; x < W; x++) {
                const int sx = (flip ? W - 1 - x : x) + dx;
                o[x] = sx >= 0 && sx < W ? row[sx] : zero;
            }
        }
    }
}

/* Training's flip and Darknet's distortion of out (l->out), drawn from r
 * after the crop's draws (r NULL in evaluation: neither), then the
 * normalisation. */
static void finish_floats(const dt_loader *l, float *out, dt_rng *r) {
    const dt_shape os = l->out;
    const size_t oplane = (size_t)os.h * (size_t)os.w;
    const dt_augment *a = l->cfg.augment;
    if (r && l->cfg.flip && (dt_rng_next(r) >> 63))
        for (size_t row = 0; row < (size_t)os.c * (size_t)os.h; row++) {
            float *p = out + row * (size_t)os.w;
            for (int x = 0, y = os.w - 1; x < y; x++, y--) {
                float t = p[x];
                p[x] = p[y];
                p[y] = t;
            }
        }
    if (r && a && dt_augment_distorts(a)) dt_augment_distort(out, os.c, oplane, a, r);
    for (int c = 0; c < os.c; c++) {
        const float mean = l->ds->mean[c], inv = 1.0f / l->ds->std[c];
        float *p = out + (size_t)c * oplane;
        for (size_t i = 0; i < oplane; i++) p[i] = (p[i] - mean) * inv;
    }
}

/* The float path of make_sample (in_floats): img (C, H, W) of the dataset
 * becomes out (C, oh, ow): in training RandomResizedCrop's region of it
 * resized, or Darknet's crop of it as floats in [0, 1] (fi, (C, H, W)), or
 * the image itself; in evaluation Darknet's resize and centre crop (its
 * workspace after fi). Then finish_floats. fi: l->fimg_floats floats. */
static void make_sample_floats(const dt_loader *l, int epoch, size_t idx, const uint8_t *img, const float *fimg,
                               float *out, float *fi) {
    const dt_shape is = l->ds->shape, os = l->out;
    const dt_augment *a = l->cfg.augment;
    const size_t plane = (size_t)is.h * (size_t)is.w;
    dt_rng r = dt_rng_seed(dt_hash3(l->cfg.seed, (uint64_t)epoch, idx));
    if (l->rrc) {
        dt_augment_resize_region(out, os, img, (size_t)is.w, 1, plane, dt_augment_rrc_pick(is.h, is.w, a, &r), fi);
        finish_floats(l, out, &r);
        return;
    }
    if (img)
        for (size_t i = 0; i < l->image; i++) fi[i] = (float)img[i] / 255.0f;
    else
        memcpy(fi, fimg, sizeof(float) * l->image);
    if (!l->cfg.shuffle)
        dt_augment_eval(out, os, fi, is, fi + l->image);
    else if (a && a->crop)
        dt_augment_crop(out, os, fi, is, a, &r);
    else
        memcpy(out, fi, sizeof(float) * l->sample);
    finish_floats(l, out, l->cfg.shuffle ? &r : NULL);
}

/* RandomResizedCrop's draw for the image a dataset's fetch_region decodes. */
typedef struct {
    const dt_augment *a;
    dt_rng *r;
} rrc_draw;

static dt_rect pick_rrc(void *ctx, int h, int w) {
    const rrc_draw *d = ctx;
    return dt_augment_rrc_pick(h, w, d->a, d->r);
}

/* make_sample_floats' RandomResizedCrop from the whole image that
 * ds->fetch_region decodes (folders loaded with regions); ws:
 * l->fimg_floats floats. The draws are those of the in-memory path. */
static dt_status make_region_sample(const dt_loader *l, int epoch, size_t idx, float *out, float *ws) {
    dt_rng r = dt_rng_seed(dt_hash3(l->cfg.seed, (uint64_t)epoch, idx));
    rrc_draw d = {l->cfg.augment, &r};
    dt_image img;
    dt_rect rect;
    DT_TRY(l->ds->fetch_region(l->ds->fetch_ctx, (int)idx, l->out.h, l->out.w, pick_rrc, &d, &img, &rect));
    /* img (h, w, c) interleaved; a gray image for an RGB model repeats its plane. */
    const size_t c = (size_t)img.c;
    dt_augment_resize_region(out, l->out, img.px, (size_t)img.w * c, c, c == 1 ? 0 : 1, rect, ws);
    dt_image_free(&img);
    finish_floats(l, out, &r);
    return DT_OK;
}

/* The batch being built: its samples are items of a pool loop. */
typedef struct {
    const dt_loader *l;
    batch_buf *b;
    int epoch;
    size_t first; /* sample i of the batch is perm[first + i] (training) or first + i */
} build_job;

static dt_status build_sample(void *ctx, size_t i, int worker) {
    const build_job *j = ctx;
    const dt_loader *l = j->l;
    const size_t idx = l->cfg.shuffle ? l->perm[j->first + i] : j->first + i;
    const uint8_t *img = NULL; /* (C, H, W) of the dataset; NULL: the sample is made from the whole image */
    const float *fimg = NULL;  /* or its floats (arrays data sets) */
    float *out = j->b->x + i * l->sample, *fi = l->fimg ? l->fimg + (size_t)worker * l->fimg_floats : NULL;
    if (l->regions) {
        DT_TRY(make_region_sample(l, j->epoch, idx, out, fi));
    } else if (l->ds->images) {
        img = l->ds->images + idx * l->image;
    } else if (l->ds->fimages) {
        fimg = l->ds->fimages + idx * l->image;
    } else {
        uint8_t *mine = l->scratch + (size_t)worker * l->image;
        DT_TRY(l->ds->fetch(l->ds->fetch_ctx, (int)idx, mine));
        img = mine;
    }
    if ((img || fimg) && l->in_floats)
        make_sample_floats(l, j->epoch, idx, img, fimg, out, fi);
    else if (img || fimg)
        make_sample(l, j->epoch, idx, img, fimg, out);
    if (l->cfg.shuffle && l->cfg.erase > 0) {
        /* A stream of its own: the other draws of a sample stay as they were. */
        dt_rng r = dt_rng_seed(dt_hash3(l->cfg.seed ^ ERASE_STREAM, (uint64_t)j->epoch, idx));
        dt_augment_erase(out, l->out, l->cfg.erase, &r);
    }
    j->b->y[i] = l->ds->labels[idx];
    return DT_OK;
}

/* b <- the batch at (epoch, step) of this worker, per the sharding in data.h;
 * a failure is kept in b (status and message) for the caller. */
static void build(dt_loader *l, batch_buf *b, int epoch, int step) {
    b->epoch = epoch;
    b->step = step;
    b->n = 0;
    b->status = DT_OK;
    if (step >= l->steps) return;
    const size_t B = (size_t)l->cfg.batch;
    size_t first, n = B;
    if (l->cfg.shuffle) {
        ensure_perm(l, epoch);
        first = ((size_t)step * (size_t)l->cfg.workers + (size_t)l->cfg.worker) * B;
    } else {
        first = (size_t)l->lo + (size_t)step * B;
        if ((size_t)l->hi - first < n) n = (size_t)l->hi - first;
    }
    build_job j = {l, b, epoch, first};
    b->status = dt_pool_run(l->pool, n, build_sample, &j);
    if (b->status != DT_OK) {
        snprintf(b->msg, sizeof b->msg, "%s", dt_last_error());
        return;
    }
    b->n = (int)n;
}

static void *producer(void *arg) {
    dt_loader *l = arg;
    int epoch = l->fill_epoch, step = l->fill_step;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (l->ready && !l->stop) pthread_cond_wait(&l->drained, &l->mu);
        if (l->stop) break;
        batch_buf *b = &l->buf[1 - l->cur];
        pthread_mutex_unlock(&l->mu);
        double t0 = dt_now();
        build(l, b, epoch, step);
        if (b->n)
            dt_timeline_span(l->cfg.timeline, DT_TL_LOADER, DT_TL_CAT_DATA, "prefetch batch", t0, dt_now(),
                             (dt_tl_arg[]){{"epoch", epoch}, {"step", step}}, 2);
        advance(l->steps, &epoch, &step);
        pthread_mutex_lock(&l->mu);
        l->ready = 1;
        pthread_cond_signal(&l->filled);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Makes buf[cur] the batch at the caller's position, starting the thread
 * (at that position) if it is not running. */
static dt_status take_prefetched(dt_loader *l) {
    if (!l->running) {
        l->ready = 0;
        l->stop = 0;
        l->fill_epoch = l->epoch;
        l->fill_step = l->step;
        int e = pthread_create(&l->thread, NULL, producer, l);
        if (e) return dt_fail(DT_ERR_NOMEM, "loader: cannot start the prefetch thread: %s", strerror(e));
        l->running = 1;
    }
    pthread_mutex_lock(&l->mu);
    while (!l->ready) pthread_cond_wait(&l->filled, &l->mu);
    l->cur = 1 - l->cur;
    l->ready = 0;
    pthread_cond_signal(&l->drained);
    pthread_mutex_unlock(&l->mu);
    return DT_OK;
}

/* Stops and joins the thread; a batch it built ahead is discarded. */
static void stop_prefetch(dt_loader *l) {
    if (!l->running) return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_signal(&l->drained);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    l->running = 0;
}

static dt_status check_cfg(const dt_dataset *ds, const dt_loader_cfg *cfg) {
    if (cfg->batch < 1) return dt_fail(DT_ERR_USAGE, "loader: batch size %d must be >= 1", cfg->batch);
    if (cfg->workers < 1 || cfg->worker < 0 || cfg->worker >= cfg->workers)
        return dt_fail(DT_ERR_USAGE, "loader: worker %d of %d workers is invalid", cfg->worker, cfg->workers);
    if (!(cfg->erase >= 0 && cfg->erase <= 1))
        return dt_fail(DT_ERR_USAGE, "loader: random erasing's probability %g must be in [0, 1]", (double)cfg->erase);
    if (cfg->crop_pad < 0 || cfg->crop_pad > DT_DATA_MAX_DIM)
        return dt_fail(DT_ERR_USAGE, "loader: crop padding %d must be in 0..%d", cfg->crop_pad,
                       DT_DATA_MAX_DIM);
    const dt_shape s = ds->shape, o = cfg->out;
    if (o.c && (o.c != s.c || !dt_data_shape_ok(o)))
        return dt_fail(DT_ERR_USAGE, "loader: samples of %dx%dx%d cannot be made from images of %dx%dx%d", o.c, o.h,
                       o.w, s.c, s.h, s.w);
    const dt_augment *a = cfg->shuffle ? cfg->augment : NULL;
    if (cfg->shuffle && o.c && (o.h != s.h || o.w != s.w) && !(a && (a->crop || a->resized_crop)))
        return dt_fail(DT_ERR_USAGE, "loader: training samples of %dx%d from images of %dx%d need Darknet's crop "
                       "or RandomResizedCrop", o.h, o.w, s.h, s.w);
    if (a && (a->crop || a->resized_crop || dt_augment_distorts(a)) && cfg->crop_pad)
        return dt_fail(DT_ERR_USAGE, "loader: crop padding does not go with Darknet's augmentation or "
                       "RandomResizedCrop");
    if (a && a->resized_crop &&
        (a->crop || !(a->scale[0] > 0 && a->scale[0] <= a->scale[1] && isfinite(a->scale[1])) ||
         !(a->ratio[0] > 0 && a->ratio[0] <= a->ratio[1] && isfinite(a->ratio[1]))))
        return dt_fail(DT_ERR_USAGE, "loader: RandomResizedCrop needs 0 < scale lo <= hi and 0 < ratio lo <= hi "
                       "(finite), and no Darknet crop; not scale %g..%g, ratio %g..%g", (double)a->scale[0],
                       (double)a->scale[1], (double)a->ratio[0], (double)a->ratio[1]);
    if (a && a->crop && (a->min_crop < 1 || a->max_crop < 1 || !(a->aspect > 0) || !isfinite(a->aspect) ||
                         !isfinite(a->angle)))
        return dt_fail(DT_ERR_USAGE, "loader: Darknet's crop needs min_crop, max_crop >= 1, a finite angle and "
                       "aspect > 0");
    /* Neutral: hue 0, saturation and exposure 1 (a zeroed dt_augment is not). */
    if (a && (!(a->hue >= 0 && a->hue <= 1) || !(a->saturation > 0) || !isfinite(a->saturation) ||
              !(a->exposure > 0) || !isfinite(a->exposure)))
        return dt_fail(DT_ERR_USAGE, "loader: Darknet's distortion needs hue in [0, 1] and finite saturation and "
                       "exposure > 0 (1: none), not %g, %g, %g", (double)a->hue, (double)a->saturation,
                       (double)a->exposure);
    if (a && (a->hue != 0 || a->saturation != 1) && s.c != 3)
        return dt_fail(DT_ERR_USAGE, "loader: hue and saturation need 3-channel images, not %d", s.c);
    if (ds->n < 1 || ds->n > DT_DATA_MAX_SAMPLES || !dt_data_shape_ok(s) || ds->classes < 1)
        return dt_fail(DT_ERR_USAGE, "loader: dataset of %d samples of %dx%dx%d, %d classes is invalid",
                       ds->n, s.c, s.h, s.w, ds->classes);
    for (int c = 0; c < s.c; c++)
        if (!(ds->std[c] > 0.0f) || !isfinite(ds->std[c]) || !isfinite(ds->mean[c]))
            return dt_fail(DT_ERR_USAGE, "loader: normalisation of channel %d (mean %g, std %g) is invalid",
                           c, (double)ds->mean[c], (double)ds->std[c]);
    if (!ds->images && !ds->fimages && !ds->fetch)
        return dt_fail(DT_ERR_USAGE, "loader: the dataset has neither images nor a way to fetch them");
    if (ds->fimages && a && a->resized_crop)
        return dt_fail(DT_ERR_USAGE, "loader: RandomResizedCrop (augment=resized_crop) needs images as bytes, "
                       "not floats");
    /* The loss relies on labels < classes (layer.h). */
    DT_TRY(dt_data_check_labels(ds->labels, (size_t)ds->n, ds->classes, "loader: dataset"));
    if (cfg->shuffle && (int64_t)ds->n < (int64_t)cfg->batch * cfg->workers)
        return dt_fail(DT_ERR_USAGE, "loader: %d samples are fewer than one global batch of %d x %d workers",
                       ds->n, cfg->batch, cfg->workers);
    return DT_OK;
}

static void free_buffers(dt_loader *l) {
    dt_pool_free(l->pool);
    dt_free(l->scratch);
    dt_free(l->fimg);
    dt_free(l->lut);
    dt_free(l->perm);
    for (int i = 0; i < 2; i++) {
        dt_free(l->buf[i].x);
        dt_free(l->buf[i].y);
    }
}

static dt_status alloc_buffers(dt_loader *l) {
    const dt_dataset *ds = l->ds;
    DT_TRY(dt_alloc_floats(&l->lut, (size_t)ds->shape.c * 256, "loader lookup table"));
    for (int c = 0; c < ds->shape.c; c++)
        for (int v = 0; v < 256; v++)
            l->lut[c * 256 + v] = ((float)v / 255.0f - ds->mean[c]) / ds->std[c];
    if (l->cfg.shuffle) {
        void *p;
        DT_TRY(dt_alloc_bytes(&p, (size_t)ds->n * sizeof(uint32_t), "loader permutation"));
        l->perm = p;
    }
    const int threads = l->cfg.threads > 1 ? l->cfg.threads : 1;
    DT_TRY(dt_pool_create(&l->pool, threads));
    if (!ds->images && !ds->fimages && !l->regions) {
        void *p;
        DT_TRY(dt_alloc_bytes(&p, l->image * (size_t)threads, "loader samples"));
        l->scratch = p;
    }
    if (l->in_floats) {
        l->fimg_floats = l->rrc ? dt_augment_resize_floats(l->out)
                                : l->image + (l->cfg.shuffle ? 0 : dt_augment_eval_floats(l->out, ds->shape));
        size_t n;
        DT_TRY(dt_mul_size(&n, l->fimg_floats, (size_t)threads, "loader images"));
        DT_TRY(dt_alloc_floats(&l->fimg, n, "loader images"));
    }
    size_t floats;
    DT_TRY(dt_mul_size(&floats, (size_t)l->cfg.batch, l->sample, "loader batch"));
    for (int i = 0; i < (l->cfg.prefetch ? 2 : 1); i++) {
        void *p;
        DT_TRY(dt_alloc_floats(&l->buf[i].x, floats, "loader batch"));
        DT_TRY(dt_alloc_bytes(&p, (size_t)l->cfg.batch * sizeof(dt_label), "loader labels"));
        l->buf[i].y = p;
    }
    return DT_OK;
}

/* The mutex and both condition variables, or none of them. */
static dt_status init_sync(dt_loader *l) {
    if (pthread_mutex_init(&l->mu, NULL) != 0)
        return dt_fail(DT_ERR_NOMEM, "loader: cannot create a mutex");
    if (pthread_cond_init(&l->filled, NULL) != 0) {
        pthread_mutex_destroy(&l->mu);
        return dt_fail(DT_ERR_NOMEM, "loader: cannot create a condition variable");
    }
    if (pthread_cond_init(&l->drained, NULL) != 0) {
        pthread_cond_destroy(&l->filled);
        pthread_mutex_destroy(&l->mu);
        return dt_fail(DT_ERR_NOMEM, "loader: cannot create a condition variable");
    }
    return DT_OK;
}

dt_status dt_loader_create(dt_loader **out, const dt_dataset *ds, const dt_loader_cfg *cfg) {
    *out = NULL;
    DT_TRY(check_cfg(ds, cfg));
    void *p;
    DT_TRY(dt_alloc_bytes(&p, sizeof(dt_loader), "loader"));
    dt_loader *l = p;
    l->ds = ds;
    l->cfg = *cfg;
    l->out = cfg->out.c ? cfg->out : ds->shape;
    l->sample = dt_shape_size(l->out);
    l->image = dt_shape_size(ds->shape);
    const dt_augment *a = cfg->shuffle ? cfg->augment : NULL;
    l->rrc = a && a->resized_crop;
    l->regions = l->rrc && ds->fetch_region;
    l->in_floats = (a && (a->crop || a->resized_crop || dt_augment_distorts(a))) || l->out.h != ds->shape.h ||
                   l->out.w != ds->shape.w;
    l->perm_epoch = -1;
    if (cfg->shuffle) {
        l->steps = (int)(ds->n / ((int64_t)cfg->batch * cfg->workers));
    } else {
        /* 64-bit products: r * N overflows int for large N and many workers. */
        l->lo = (int)((int64_t)cfg->worker * ds->n / cfg->workers);
        l->hi = (int)((int64_t)(cfg->worker + 1) * ds->n / cfg->workers);
        l->steps = (int)(((int64_t)l->hi - l->lo + cfg->batch - 1) / cfg->batch);
    }
    dt_status s = alloc_buffers(l);
    if (s == DT_OK) s = init_sync(l);
    if (s != DT_OK) {
        free_buffers(l);
        dt_free(l);
        return s;
    }
    *out = l;
    return DT_OK;
}

int dt_loader_steps_per_epoch(const dt_loader *l) { return l->steps; }

dt_status dt_loader_seek(dt_loader *l, int epoch, int step) {
    if (epoch < 0 || step < 0 || step > l->steps)
        return dt_fail(DT_ERR_USAGE, "loader: cannot seek to epoch %d step %d (an epoch has %d steps)",
                       epoch, step, l->steps);
    stop_prefetch(l);
    l->epoch = epoch;
    l->step = step;
    return DT_OK;
}

dt_status dt_loader_next(dt_loader *l, const float **x, const dt_label **y, int *n) {
    if (l->cfg.prefetch) {
        DT_TRY(take_prefetched(l));
    } else {
        build(l, &l->buf[l->cur], l->epoch, l->step);
    }
    const batch_buf *b = &l->buf[l->cur];
    DT_ASSERT(b->epoch == l->epoch && b->step == l->step);
    if (b->status != DT_OK) {
        /* The position stays; the thread, already past this batch, is
         * stopped so that a next call starts over from here. */
        stop_prefetch(l);
        return dt_fail(b->status, "%s", b->msg);
    }
    advance(l->steps, &l->epoch, &l->step);
    *x = b->x;
    *y = b->y;
    *n = b->n;
    return DT_OK;
}

void dt_loader_position(const dt_loader *l, int *epoch, int *step) {
    *epoch = l->epoch;
    *step = l->step;
}

void dt_loader_free(dt_loader *l) {
    if (!l) return;
    stop_prefetch(l);
    pthread_cond_destroy(&l->drained);
    pthread_cond_destroy(&l->filled);
    pthread_mutex_destroy(&l->mu);
    free_buffers(l);
    dt_free(l);
}

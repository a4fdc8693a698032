/* A fixed team of threads that runs one parallel loop at a time: the image
 * decoders at load (every file of a folder dataset) and the loader's batch
 * builder (a batch's samples).
 *
 * A pool of T threads is the caller of dt_pool_run plus T - 1 helpers
 * started at create and parked on a condition variable between loops, so a
 * loop per batch costs no thread creation. Items are handed out in index
 * order from one atomic counter, so uneven items (images of different
 * sizes) balance themselves. */
#ifndef DTRAIN_POOL_H
#define DTRAIN_POOL_H

#include <stddef.h>

#include "dtrain/status.h"

typedef struct dt_pool dt_pool;

/* One item of a loop; worker is the thread's index in [0, threads) (the
 * caller of dt_pool_run is 0), for per-thread scratch buffers. Called
 * concurrently from several threads: it must touch only item's data and
 * worker's scratch. */
typedef dt_status (*dt_pool_fn)(void *ctx, size_t item, int worker);

/* threads >= 1 (1: dt_pool_run runs the loop on the caller, no thread is
 * started). */
dt_status dt_pool_create(dt_pool **out, int threads);

/* Runs fn(ctx, i, worker) for every i in [0, n) and returns when all have
 * returned. When some fail, no new item is started and the result is the
 * failure (status and message) of the lowest failing i: every lower item
 * was started before it, so the outcome does not depend on timing. Not
 * reentrant; one caller at a time. */
dt_status dt_pool_run(dt_pool *p, size_t n, dt_pool_fn fn, void *ctx);

/* Stops and joins the helpers. NULL is a no-op. */
void dt_pool_free(dt_pool *p);

#endif

/* The timeline (--timeline FILE.json): what every thread of every rank did
 * and when, as a Chrome trace (chrome://tracing, ui.perfetto.dev), like
 * Horovod's timeline.
 *
 * Each rank records complete events ("ph":"X": a name, a category, a start
 * and an end) into its own dt_timeline; pid is the rank's world rank, tid
 * one of the tracks below. Recording appends a fixed-size record under a
 * mutex (no allocation but one chunk per 1024 events), so it is cheap
 * enough to leave on. dt_timeline_flush appends the records since the last
 * flush to the rank's part file FILE.json.rank<R> and drops them from
 * memory; dt_timeline_merge joins every rank's part into FILE.json.
 *
 * A part is Chrome's JSON array form written incrementally: "[" then one
 * event per line, each followed by a comma, no closing bracket (the trace
 * viewer accepts that), so a killed rank leaves a usable part holding
 * everything up to its last flush. The merged file is the object form
 * {"traceEvents":[...]} with the same lines.
 *
 * Times are dt_now() seconds; the file holds microseconds since `origin`,
 * which the ranks agree on at start (src/comm/comm_timeline.c), so every
 * rank's events share one time axis.
 *
 * Adding a span (any thread, tl may be NULL = timeline off):
 *     double t0 = dt_now();
 *     ... the work ...
 *     dt_timeline_span(tl, DT_TL_COMM, DT_TL_CAT_COMM, "sfb allgather", t0, dt_now(),
 *                      (dt_tl_arg[]){{"bytes", (double)bytes}, {"layer", i}}, 2);
 * Spans on one track must nest or be disjoint (the viewers draw each track
 * as a stack): give work that overlaps other work on its thread, such as
 * communication in flight, a track of its own. */
#ifndef DTRAIN_TIMELINE_H
#define DTRAIN_TIMELINE_H

#include "dtrain/status.h"

typedef struct dt_timeline dt_timeline;

/* Tracks (the events' tid). Named in the file by dt_timeline_flush. */
enum {
    DT_TL_MAIN = 0,    /* worker: the trainer thread; server: its serving loop */
    DT_TL_COMM = 1,    /* allreduce: the communication thread; ps worker: pushes and pulls in flight */
    DT_TL_LOADER = 2,  /* the loader's prefetch thread */
    DT_TL_APPLIER = 3, /* server applier thread k: DT_TL_APPLIER + k, k < 4 */
    DT_TL_RECV = 8     /* server: gradients of worker w in flight: DT_TL_RECV + w */
};

/* Categories ("cat"): what bench/timeline_overlap.py and the viewers' filters group by. */
typedef enum {
    DT_TL_CAT_STEP = 0,   /* one training step, enclosing its forward, backward and end_step */
    DT_TL_CAT_FORWARD,    /* one layer's forward pass */
    DT_TL_CAT_BACKWARD,   /* one layer's backward pass */
    DT_TL_CAT_UPDATE,     /* end_step (averaging, SGD), a server applying gradients */
    DT_TL_CAT_COMM,       /* communication: allreduce buckets, ps push/pull, server replies */
    DT_TL_CAT_WAIT,       /* a thread blocked on communication or sleeping (stragglers) */
    DT_TL_CAT_DATA,       /* building or waiting for a batch */
    DT_TL_CAT_EVAL,       /* test-set evaluation */
    DT_TL_CAT_CHECKPOINT, /* writing a checkpoint (and flushing the timeline) */
    DT_TL_CAT_COUNT
} dt_tl_cat;

/* A numeric argument shown with the event; key must be a string literal
 * (kept by pointer until the flush). */
typedef struct {
    const char *key;
    double value;
} dt_tl_arg;

#define DT_TL_MAX_ARGS 3
#define DT_TL_NAME_MAX 40 /* longer names are cut */

/* Opens the part file path.rank<rank> (truncating it) and writes the
 * process name: "rank R (worker W)", or "rank R server" when worker < 0.
 * origin (dt_now() seconds) is time 0 of the file. A path that is a
 * directory or whose part cannot be created is DT_ERR_IO naming it. */
dt_status dt_timeline_create(dt_timeline **out, const char *path, int rank, int worker, double origin);

/* Records [t0, t1] (dt_now() seconds) with up to DT_TL_MAX_ARGS args.
 * Thread-safe; a no-op when tl is NULL. Cannot fail: if memory runs out
 * the event is dropped and the next flush reports it. */
void dt_timeline_span(dt_timeline *tl, int track, dt_tl_cat cat, const char *name, double t0, double t1,
                      const dt_tl_arg *args, int nargs);

/* Appends the events recorded since the last flush to the part file and
 * frees them. One thread at a time (the rank's main thread); others may
 * record meanwhile. A no-op when tl is NULL. */
dt_status dt_timeline_flush(dt_timeline *tl);

/* Writes path from the parts of ranks 0..nranks-1 (in rank order, through
 * a temporary file renamed into place) and removes them. A part cut short
 * by a kill loses only its unfinished last line. A missing part is an
 * error when require_all, else skipped (a rank that never flushed). */
dt_status dt_timeline_merge(const char *path, int nranks, int require_all);

/* The path given to dt_timeline_create. */
const char *dt_timeline_path(const dt_timeline *tl);

/* Closes the part file without flushing. No-op on NULL. */
void dt_timeline_free(dt_timeline *tl);

#endif

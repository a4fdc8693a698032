/* The timeline's event buffer, part files and merge (see timeline.h).
 *
 * Events live in a list of fixed-size chunks. Recording threads append to
 * the tail under the mutex; the flushing thread takes a snapshot of the
 * list (head, tail and the tail's count) under the mutex, writes the
 * snapshot's events without holding it (chunks never move, and every
 * chunk but the tail is complete), then frees the written chunks. So a
 * recording thread never waits for file I/O. */
#include "dtrain/timeline.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dtrain/json.h"
#include "dtrain/mem.h"

typedef struct {
    double t0, t1;
    dt_tl_arg args[DT_TL_MAX_ARGS];
    int track;
    unsigned char cat, nargs;
    char name[DT_TL_NAME_MAX];
} tl_event;

#define CHUNK_EVENTS 1024

typedef struct tl_chunk {
    struct tl_chunk *next;
    int n; /* events written; final once another chunk follows */
    tl_event ev[CHUNK_EVENTS];
} tl_chunk;

struct dt_timeline {
    pthread_mutex_t mu;
    tl_chunk *head, *tail; /* under mu: chunks not yet freed by a flush, oldest first */
    long dropped;          /* under mu: events lost because a chunk could not be allocated */
    /* The flushing thread's own. */
    int head_done;         /* events of head already in the part */
    unsigned char *named;  /* (nnamed) track has its thread_name in the part */
    int nnamed;
    FILE *part;
    char *path, *part_path;
    int rank, worker;
    double origin;
};

static const char *const cat_names[DT_TL_CAT_COUNT] = {
    [DT_TL_CAT_STEP] = "step",   [DT_TL_CAT_FORWARD] = "forward", [DT_TL_CAT_BACKWARD] = "backward",
    [DT_TL_CAT_UPDATE] = "update", [DT_TL_CAT_COMM] = "comm",     [DT_TL_CAT_WAIT] = "wait",
    [DT_TL_CAT_DATA] = "data",   [DT_TL_CAT_EVAL] = "eval",       [DT_TL_CAT_CHECKPOINT] = "checkpoint",
};

const char *dt_timeline_path(const dt_timeline *tl) { return tl->path; }

static void track_name(const dt_timeline *tl, int track, char *out, size_t cap) {
    if (track == DT_TL_MAIN)
        snprintf(out, cap, "%s", tl->worker < 0 ? "server" : "trainer");
    else if (track == DT_TL_COMM)
        snprintf(out, cap, "communication");
    else if (track == DT_TL_LOADER)
        snprintf(out, cap, "loader thread");
    else if (track >= DT_TL_APPLIER && track < DT_TL_RECV)
        snprintf(out, cap, "applier %d", track - DT_TL_APPLIER);
    else
        snprintf(out, cap, "gradients from worker %d", track - DT_TL_RECV);
}

/* The thread_name (and sort order) of a track, before its first event. */
static dt_status name_track(dt_timeline *tl, int track) {
    if (track < tl->nnamed && tl->named[track]) return DT_OK;
    if (track >= tl->nnamed) {
        unsigned char *grown;
        int n = track + 16;
        DT_TRY(dt_alloc_bytes((void **)&grown, (size_t)n, "timeline tracks"));
        if (tl->nnamed) memcpy(grown, tl->named, (size_t)tl->nnamed);
        dt_free(tl->named);
        tl->named = grown;
        tl->nnamed = n;
    }
    tl->named[track] = 1;
    char name[64];
    track_name(tl, track, name, sizeof name);
    fprintf(tl->part,
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}},\n"
            "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}},\n",
            tl->rank, track, name, tl->rank, track, track);
    return DT_OK;
}

static dt_status write_event(dt_timeline *tl, const tl_event *e) {
    DT_TRY(name_track(tl, e->track));
    /* Whole nanoseconds first, so a span inside another stays inside it
     * after rounding. */
    long long ts = llround((e->t0 - tl->origin) * 1e9), end = llround((e->t1 - tl->origin) * 1e9);
    if (end < ts) end = ts;
    char name[6 * DT_TL_NAME_MAX];
    dt_json_escape(name, sizeof name, e->name);
    fprintf(tl->part, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f",
            name, cat_names[e->cat], tl->rank, e->track, (double)ts / 1e3, (double)(end - ts) / 1e3);
    for (int i = 0; i < e->nargs; i++) {
        fprintf(tl->part, "%s\"%s\":", i ? "," : ",\"args\":{", e->args[i].key);
        if (isfinite(e->args[i].value))
            fprintf(tl->part, "%.15g", e->args[i].value);
        else
            fputs("null", tl->part);
    }
    fputs(e->nargs ? "}},\n" : "},\n", tl->part);
    return DT_OK;
}

void dt_timeline_span(dt_timeline *tl, int track, dt_tl_cat cat, const char *name, double t0, double t1,
                      const dt_tl_arg *args, int nargs) {
    if (!tl) return;
    DT_ASSERT(track >= 0 && cat < DT_TL_CAT_COUNT && nargs >= 0 && nargs <= DT_TL_MAX_ARGS);
    pthread_mutex_lock(&tl->mu);
    if (!tl->tail || tl->tail->n == CHUNK_EVENTS) {
        tl_chunk *c;
        if (dt_alloc_bytes((void **)&c, sizeof *c, "timeline") != DT_OK) {
            tl->dropped++;
            pthread_mutex_unlock(&tl->mu);
            return;
        }
        if (tl->tail)
            tl->tail->next = c;
        else
            tl->head = c;
        tl->tail = c;
    }
    tl_event *e = &tl->tail->ev[tl->tail->n];
    e->t0 = t0;
    e->t1 = t1;
    e->track = track;
    e->cat = (unsigned char)cat;
    e->nargs = (unsigned char)nargs;
    for (int i = 0; i < nargs; i++) e->args[i] = args[i];
    snprintf(e->name, sizeof e->name, "%s", name);
    tl->tail->n++;
    pthread_mutex_unlock(&tl->mu);
}

dt_status dt_timeline_flush(dt_timeline *tl) {
    if (!tl) return DT_OK;
    pthread_mutex_lock(&tl->mu);
    tl_chunk *head = tl->head, *last = tl->tail;
    int last_n = last ? last->n : 0;
    long dropped = tl->dropped;
    tl->dropped = 0;
    pthread_mutex_unlock(&tl->mu);

    dt_status s = DT_OK;
    for (tl_chunk *c = head; c && s == DT_OK; c = c == last ? NULL : c->next) {
        int to = c == last ? last_n : c->n;
        for (int i = c == head ? tl->head_done : 0; i < to && s == DT_OK; i++) s = write_event(tl, &c->ev[i]);
    }
    if (s == DT_OK && (fflush(tl->part) != 0 || ferror(tl->part)))
        s = dt_fail(DT_ERR_IO, "--timeline: cannot write %s: %s", tl->part_path, strerror(errno));

    /* Everything before the snapshot's tail is written (or lost with the
     * error): free it; the tail may still be filling. */
    if (last) {
        pthread_mutex_lock(&tl->mu);
        while (tl->head != last) {
            tl_chunk *next = tl->head->next;
            dt_free(tl->head);
            tl->head = next;
        }
        pthread_mutex_unlock(&tl->mu);
        tl->head_done = last_n;
    }
    if (s == DT_OK && dropped > 0)
        s = dt_fail(DT_ERR_NOMEM, "--timeline: %ld events dropped: out of memory", dropped);
    return s;
}

dt_status dt_timeline_create(dt_timeline **out, const char *path, int rank, int worker, double origin) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return dt_fail(DT_ERR_IO, "--timeline %s: is a directory", path);
    dt_timeline *tl;
    DT_TRY(dt_alloc_bytes((void **)&tl, sizeof *tl, "timeline"));
    if (pthread_mutex_init(&tl->mu, NULL) != 0) {
        dt_free(tl);
        return dt_fail(DT_ERR_NOMEM, "--timeline: cannot create a mutex");
    }
    tl->rank = rank;
    tl->worker = worker;
    tl->origin = origin;
    size_t n = strlen(path) + 1;
    dt_status s = dt_alloc_bytes((void **)&tl->path, n, "timeline");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&tl->part_path, n + 24, "timeline");
    if (s == DT_OK) {
        memcpy(tl->path, path, n);
        snprintf(tl->part_path, n + 24, "%s.rank%d", path, rank);
        tl->part = fopen(tl->part_path, "w");
        if (!tl->part)
            s = dt_fail(DT_ERR_IO, "--timeline %s: cannot create %s: %s", path, tl->part_path, strerror(errno));
    }
    if (s == DT_OK) {
        char label[64];
        if (worker >= 0)
            snprintf(label, sizeof label, "rank %d (worker %d)", rank, worker);
        else
            snprintf(label, sizeof label, "rank %d server", rank);
        fprintf(tl->part,
                "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"%s\"}},\n"
                "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}},\n",
                rank, label, rank, rank);
        if (fflush(tl->part) != 0 || ferror(tl->part))
            s = dt_fail(DT_ERR_IO, "--timeline: cannot write %s: %s", tl->part_path, strerror(errno));
    }
    if (s != DT_OK) {
        dt_timeline_free(tl);
        return s;
    }
    *out = tl;
    return DT_OK;
}

void dt_timeline_free(dt_timeline *tl) {
    if (!tl) return;
    if (tl->part) fclose(tl->part);
    while (tl->head) {
        tl_chunk *next = tl->head->next;
        dt_free(tl->head);
        tl->head = next;
    }
    pthread_mutex_destroy(&tl->mu);
    dt_free(tl->named);
    dt_free(tl->path);
    dt_free(tl->part_path);
    dt_free(tl);
}

/* Copies a part's events into out, each preceded by a separator once
 * anything was written (*first). A last line without its newline was cut
 * by a kill mid-write: dropped. */
static dt_status copy_part(FILE *in, FILE *out, const char *part, int *first) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    dt_status s = DT_OK;
    int lineno = 0;
    while ((len = getline(&line, &cap, in)) > 0 && line[len - 1] == '\n') {
        lineno++;
        line[--len] = '\0';
        if (lineno == 1) {
            if (strcmp(line, "[") != 0) s = dt_fail(DT_ERR_FORMAT, "--timeline: %s is not a timeline part", part);
            if (s != DT_OK) break;
            continue;
        }
        if (len > 0 && line[len - 1] == ',') line[--len] = '\0';
        if (len == 0) continue;
        if (line[0] != '{') {
            s = dt_fail(DT_ERR_FORMAT, "--timeline: %s:%d: not an event", part, lineno);
            break;
        }
        fprintf(out, "%s%s", *first ? "" : ",\n", line);
        *first = 0;
    }
    if (s == DT_OK && ferror(in)) s = dt_fail(DT_ERR_IO, "--timeline: cannot read %s: %s", part, strerror(errno));
    free(line); /* getline's buffer comes from malloc */
    return s;
}

dt_status dt_timeline_merge(const char *path, int nranks, int require_all) {
    size_t n = strlen(path) + 24;
    char *tmp, *part;
    DT_TRY(dt_alloc_bytes((void **)&tmp, 2 * n, "timeline"));
    part = tmp + n;
    snprintf(tmp, n, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        dt_status s = dt_fail(DT_ERR_IO, "--timeline: cannot create %s: %s", tmp, strerror(errno));
        dt_free(tmp);
        return s;
    }
    fputs("{\"traceEvents\":[\n", out);
    int first = 1;
    dt_status s = DT_OK;
    for (int r = 0; r < nranks && s == DT_OK; r++) {
        snprintf(part, n, "%s.rank%d", path, r);
        FILE *in = fopen(part, "r");
        if (!in) {
            if (require_all || errno != ENOENT)
                s = dt_fail(DT_ERR_IO, "--timeline: cannot read rank %d's part %s: %s (on several machines "
                            "the path must be on a file system they share)", r, part, strerror(errno));
            continue;
        }
        s = copy_part(in, out, part, &first);
        fclose(in);
    }
    fputs("\n],\"displayTimeUnit\":\"ms\"}\n", out);
    if (fflush(out) != 0 || ferror(out)) {
        if (s == DT_OK) s = dt_fail(DT_ERR_IO, "--timeline: cannot write %s: %s", tmp, strerror(errno));
    }
    if (fclose(out) != 0 && s == DT_OK)
        s = dt_fail(DT_ERR_IO, "--timeline: cannot write %s: %s", tmp, strerror(errno));
    if (s == DT_OK && rename(tmp, path) != 0)
        s = dt_fail(DT_ERR_IO, "--timeline: cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (s != DT_OK) {
        remove(tmp);
    } else {
        /* The parts are in the file now. */
        for (int r = 0; r < nranks; r++) {
            snprintf(part, n, "%s.rank%d", path, r);
            if (remove(part) != 0 && errno != ENOENT)
                s = dt_fail(DT_ERR_IO, "--timeline: cannot remove %s: %s", part, strerror(errno));
        }
    }
    dt_free(tmp);
    return s;
}

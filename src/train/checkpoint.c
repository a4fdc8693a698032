#include "dtrain/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dtrain/mem.h"
#include "dtrain/model.h"
#include "dtrain/optim.h"

static const char magic[8] = {'D', 'T', 'C', 'K', 'P', 'T', '0', '1'};

/* Fixed-size header as it is on disk (all fields naturally aligned, no padding). */
typedef struct {
    char magic[8];
    uint32_t version, optimizer;
    uint64_t shape_hash, seed, step, net_step;
    int32_t epoch, step_in_epoch;
    uint64_t nparams, nstate, nopt_state;
} disk_header;

_Static_assert(sizeof(disk_header) == 80, "checkpoint header must have no padding");

typedef struct {
    int fd;
    uLong crc;
    const char *path;
} writer;

static dt_status write_all(writer *w, const void *buf, size_t n) {
    const char *p = buf;
    w->crc = crc32(w->crc, buf, 0);
    for (size_t left = n; left > 0;) {
        size_t chunk = left > (1u << 30) ? (1u << 30) : left;
        ssize_t k = write(w->fd, p, chunk);
        if (k < 0) {
            if (errno == EINTR) continue;
            return dt_fail(DT_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
        }
        w->crc = crc32(w->crc, (const Bytef *)p, (uInt)k);
        p += k;
        left -= (size_t)k;
    }
    return DT_OK;
}

static dt_status parse_names(dt_class_names *out, const char *buf, size_t len, uint32_t count, const char *path);

/* Version 4's class-name section: u32 count, u32 bytes, the names with
 * their NULs; checked as a reader will check it, so that no checkpoint is
 * written that cannot be read. */
static dt_status write_names(writer *w, const dt_class_names *c) {
    uint32_t head[2] = {0, 0}; /* count, bytes */
    char *buf = NULL;          /* (head[1]) the names back to back */
    if (c && c->n > 0) {
        size_t bytes = 0;
        for (int i = 0; i < c->n && bytes <= DT_CKPT_MAX_NAME_BYTES; i++) bytes += strlen(c->names[i]) + 1;
        if (c->n > DT_DATA_MAX_CLASSES || bytes > DT_CKPT_MAX_NAME_BYTES)
            return dt_fail(DT_ERR_USAGE, "%s: %d class names of %zu bytes do not fit a checkpoint (at most %d names, "
                           "%d bytes)", w->path, c->n, bytes, DT_DATA_MAX_CLASSES, DT_CKPT_MAX_NAME_BYTES);
        void *p;
        DT_TRY(dt_alloc_bytes(&p, bytes, "class names"));
        buf = p;
        for (int i = 0; i < c->n; i++) {
            size_t len = strlen(c->names[i]) + 1;
            memcpy(buf + head[1], c->names[i], len);
            head[1] += (uint32_t)len;
        }
        head[0] = (uint32_t)c->n;
    }
    dt_status s = parse_names(NULL, buf, head[1], head[0], w->path);
    if (s == DT_OK) s = write_all(w, head, sizeof head);
    if (s == DT_OK && buf) s = write_all(w, buf, head[1]); /* (a NULL buffer would reset the CRC) */
    dt_free(buf);
    return s;
}

/* Version 7's layer table: u32 {nlayers, 0}, then the entries. */
static dt_status write_layers(writer *w, const dt_ckpt_arrays *a) {
    uint32_t head[2] = {a->layers ? (uint32_t)a->nlayers : 0, 0};
    DT_TRY(write_all(w, head, sizeof head));
    return head[0] ? write_all(w, a->layers, head[0] * sizeof *a->layers) : DT_OK; /* (NULL would reset the CRC) */
}

/* Version 5's worker-state section: u32 {nworkers, 0}, u64 floats each,
 * then every worker's floats. */
static dt_status write_worker_state(writer *w, const dt_ckpt_arrays *a) {
    uint32_t head[2] = {a->worker_state && a->worker_floats ? (uint32_t)a->nworkers : 0, 0};
    uint64_t each = head[0] ? (uint64_t)a->worker_floats : 0;
    size_t bytes = 0;
    if (head[0]) DT_TRY(dt_mul_size(&bytes, (size_t)head[0] * sizeof(float), (size_t)each, w->path));
    DT_TRY(write_all(w, head, sizeof head));
    DT_TRY(write_all(w, &each, sizeof each));
    return bytes ? write_all(w, a->worker_state, bytes) : DT_OK; /* (a NULL buffer would reset the CRC) */
}

static dt_status write_body(writer *w, const dt_ckpt_meta *meta, const dt_ckpt_arrays *a) {
    disk_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, magic, sizeof magic);
    h.version = DT_CKPT_VERSION;
    h.shape_hash = meta->shape_hash;
    h.seed = meta->seed;
    h.step = meta->step;
    h.net_step = meta->net_step;
    h.epoch = meta->epoch;
    h.step_in_epoch = meta->step_in_epoch;
    h.nparams = a->nparams;
    h.nstate = a->nstate;
    h.nopt_state = a->nopt_state;
    h.optimizer = (uint32_t)a->optimizer;
    DT_TRY(write_all(w, &h, sizeof h));
    DT_TRY(write_all(w, a->params, a->nparams * sizeof(float)));
    DT_TRY(write_all(w, a->state, a->nstate * sizeof(float)));
    DT_TRY(write_all(w, a->opt_state, a->nopt_state * sizeof(float)));
    double figures[3] = {meta->loss, meta->best_loss, meta->best_accuracy};
    DT_TRY(write_all(w, figures, sizeof figures));
    DT_TRY(write_names(w, a->classes));
    DT_TRY(write_worker_state(w, a));
    DT_TRY(write_all(w, &meta->step_samples, sizeof meta->step_samples));
    DT_TRY(write_layers(w, a));
    uint32_t crc = (uint32_t)w->crc;
    return write_all(w, &crc, sizeof crc);
}

dt_status dt_sync_dir_of(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    int fd = open(dirname(buf), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return dt_fail(DT_ERR_IO, "%s: cannot open its directory: %s", path, strerror(errno));
    int rc = fsync(fd);
    close(fd);
    if (rc != 0) return dt_fail(DT_ERR_IO, "%s: fsync of directory failed: %s", path, strerror(errno));
    return DT_OK;
}

dt_status dt_checkpoint_save(const char *path, const dt_ckpt_meta *meta, const dt_ckpt_arrays *a) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return dt_fail(DT_ERR_USAGE, "checkpoint path too long: %s", path);
    writer w = {open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644), crc32(0L, Z_NULL, 0), tmp};
    if (w.fd < 0) return dt_fail(DT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    dt_status s = write_body(&w, meta, a);
    if (s == DT_OK && fsync(w.fd) != 0)
        s = dt_fail(DT_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
    if (close(w.fd) != 0 && s == DT_OK)
        s = dt_fail(DT_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    if (s == DT_OK && rename(tmp, path) != 0)
        s = dt_fail(DT_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
    if (s != DT_OK) {
        unlink(tmp); /* the previous checkpoint at path is untouched */
        return s;
    }
    return dt_sync_dir_of(path);
}

static dt_status read_exact(FILE *f, void *buf, size_t n, uLong *crc, const char *path) {
    if (n && fread(buf, 1, n, f) != n)
        return dt_fail(DT_ERR_FORMAT, "%s: truncated checkpoint", path);
    *crc = crc32(*crc, buf, 0);
    for (size_t off = 0; off < n;) {
        uInt chunk = (uInt)((n - off) > (1u << 30) ? (1u << 30) : (n - off));
        *crc = crc32(*crc, (const Bytef *)buf + off, chunk);
        off += chunk;
    }
    return DT_OK;
}

static dt_status check_position(const disk_header *h, const char *path);

/* a == NULL (verify only): magic, version and position, not the model. */
static dt_status check_header(const disk_header *h, uint64_t expect_hash, const dt_ckpt_arrays *a,
                              const char *path) {
    if (memcmp(h->magic, magic, sizeof magic) != 0)
        return dt_fail(DT_ERR_FORMAT, "%s: not a dtrain checkpoint (bad magic)", path);
    if (h->version < 1 || h->version > DT_CKPT_VERSION)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint version %u, this dtrain reads versions 1 to %d",
                       path, h->version, DT_CKPT_VERSION);
    if (h->version < 3 && h->optimizer != 0)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint version %u has a non-zero reserved word", path, h->version);
    if (h->optimizer >= DT_OPT_COUNT)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint names optimizer %u, this dtrain knows %d", path, h->optimizer,
                       DT_OPT_COUNT);
    if (!a) return check_position(h, path); /* dt_checkpoint_verify: no model to compare with */
    DT_TRY(dt_checkpoint_check_hash(path, h->shape_hash, expect_hash));
    if (h->nparams != a->nparams || h->nstate != a->nstate)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint holds %llu parameters and %llu state values, "
                       "the model has %zu and %zu", path, (unsigned long long)h->nparams,
                       (unsigned long long)h->nstate, a->nparams, a->nstate);
    if (a->opt_state && h->optimizer != (uint32_t)a->optimizer) return DT_OK; /* named once the CRC holds */
    if (a->opt_state && h->nopt_state != a->nopt_state)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint holds %llu optimiser values, expected %zu",
                       path, (unsigned long long)h->nopt_state, a->nopt_state);
    return check_position(h, path);
}

static dt_status check_position(const disk_header *h, const char *path) {
    if (h->epoch < 0 || h->step_in_epoch < 0)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint has a negative position", path);
    /* The trainer counts steps in signed 64-bit integers. */
    if (h->step > INT64_MAX || h->net_step > INT64_MAX)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint step %llu / %llu is out of range", path,
                       (unsigned long long)h->step, (unsigned long long)h->net_step);
    return DT_OK;
}

/* Version 2's loss figures after the arrays (bytes). */
static size_t trailer_bytes(const disk_header *h) { return h->version >= 2 ? 3 * sizeof(double) : 0; }
/* Version 4's class-name section: its two counts (bytes), then the names. */
static size_t names_head_bytes(const disk_header *h) { return h->version >= 4 ? 2 * sizeof(uint32_t) : 0; }

/* count names in buf (len bytes), each non-empty, distinct and ended by a
 * NUL, filling buf exactly; into *out (NULL: only checked). */
static dt_status parse_names(dt_class_names *out, const char *buf, size_t len, uint32_t count, const char *path) {
    if (count > DT_DATA_MAX_CLASSES)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint names %u classes (at most %d)", path, count, DT_DATA_MAX_CLASSES);
    if (count == 0) return len ? dt_fail(DT_ERR_FORMAT, "%s: checkpoint class names section has %zu bytes and no "
                                         "names", path, len) : DT_OK;
    dt_class_names views = {(int)count, NULL}; /* (count) pointers into buf */
    DT_TRY(dt_alloc_bytes((void **)&views.names, sizeof *views.names * count, "class names"));
    size_t at = 0;
    dt_status s = DT_OK;
    for (uint32_t i = 0; s == DT_OK && i < count; i++) {
        const char *end = at < len ? memchr(buf + at, '\0', len - at) : NULL;
        if (!end || end == buf + at)
            s = dt_fail(DT_ERR_FORMAT, "%s: checkpoint class name %u is %s", path, i, end ? "empty" : "cut short");
        else
            views.names[i] = (char *)(buf + at), at = (size_t)(end - buf) + 1;
    }
    if (s == DT_OK && at != len)
        s = dt_fail(DT_ERR_FORMAT, "%s: checkpoint class names section has %zu bytes after its %u names", path,
                    len - at, count);
    const char *dup = NULL;
    if (s == DT_OK) s = dt_class_names_repeated(&views, &dup);
    if (s == DT_OK && dup) s = dt_fail(DT_ERR_FORMAT, "%s: checkpoint names class '%s' twice", path, dup);
    if (s == DT_OK && out) s = dt_class_names_copy(out, &views);
    dt_free(views.names);
    return s;
}

/* Reads n bytes into nothing but the CRC (the other workers' state). */
static dt_status read_skip(FILE *f, uint64_t n, uLong *crc, const char *path) {
    char chunk[16384];
    for (uint64_t left = n; left > 0;) {
        size_t k = left > sizeof chunk ? sizeof chunk : (size_t)left;
        DT_TRY(read_exact(f, chunk, k, crc, path));
        left -= k;
    }
    return DT_OK;
}

/* Version 5's worker-state head: u32 {nworkers, 0}, u64 floats each. */
static size_t workers_head_bytes(const disk_header *h) {
    return h->version >= 5 ? 2 * sizeof(uint32_t) + sizeof(uint64_t) : 0;
}

/* Version 7's layer table head: u32 {nlayers, 0} (bytes). */
static size_t layers_head_bytes(const disk_header *h) { return h->version >= 7 ? 2 * sizeof(uint32_t) : 0; }

/* Version 6's samples per step, after the worker state (bytes). */
static size_t step_samples_bytes(const disk_header *h) { return h->version >= 6 ? sizeof(uint64_t) : 0; }

/* The version 5 section, `bytes` long by the file's size (at most, from
 * version 7: the layer table's entries follow): its head in
 * workers[0..1] (nworkers, floats each), and worker a->worker's part into
 * *mine (allocated) when the file holds what a asks for. */
static dt_status read_workers(FILE *f, uint64_t bytes, int h7, uLong *crc, const dt_ckpt_arrays *a,
                              uint64_t workers[2], float **mine, const char *path) {
    uint32_t head[2];
    uint64_t each;
    DT_TRY(read_exact(f, head, sizeof head, crc, path));
    DT_TRY(read_exact(f, &each, sizeof each, crc, path));
    if (head[1] != 0) return dt_fail(DT_ERR_FORMAT, "%s: checkpoint worker state has a non-zero reserved word", path);
    uint64_t n = head[0];
    /* None is 0 x 0: one count of zero alone would be a loop over nothing
     * (2^32 - 1 workers of no floats) or a size with no worker. */
    if ((n == 0) != (each == 0) || (each && n > bytes / sizeof(float) / each) ||
        (n * each * sizeof(float) != bytes && !(h7 && n * each * sizeof(float) < bytes)))
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint worker state of %llu x %llu floats, the file holds %llu "
                       "bytes: truncated or corrupt", path, (unsigned long long)n, (unsigned long long)each,
                       (unsigned long long)bytes);
    workers[0] = n, workers[1] = each;
    int take = a && a->worker_state && n == (uint64_t)a->nworkers && each == a->worker_floats && a->worker >= 0 &&
               (uint64_t)a->worker < n;
    if (take) DT_TRY(dt_alloc_floats(mine, (size_t)each, path));
    for (uint64_t w = 0; w < n; w++)
        DT_TRY(take && w == (uint64_t)a->worker ? read_exact(f, *mine, each * sizeof(float), crc, path)
                                                : read_skip(f, each * sizeof(float), crc, path));
    return DT_OK;
}

/* The version 7 layer table, whose entries fill the `bytes` of the file
 * left before the CRC; *out allocated (NULL when empty), its length in *n. */
static dt_status read_layers(FILE *f, uint64_t bytes, uLong *crc, dt_ckpt_layer **out, int *n, const char *path) {
    uint32_t head[2];
    *out = NULL;
    *n = 0;
    DT_TRY(read_exact(f, head, sizeof head, crc, path));
    if (head[1] != 0) return dt_fail(DT_ERR_FORMAT, "%s: checkpoint layer table has a non-zero reserved word", path);
    if (head[0] > DT_MAX_LAYERS || head[0] * sizeof **out != bytes)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint layer table of %u layers, the file holds %llu bytes: "
                       "truncated or corrupt", path, head[0], (unsigned long long)bytes);
    if (!head[0]) return DT_OK;
    DT_TRY(dt_alloc_bytes((void **)out, head[0] * sizeof **out, path));
    *n = (int)head[0];
    return read_exact(f, *out, head[0] * sizeof **out, crc, path);
}

/* Reads the arrays into one scratch block, checks the CRC, and only then
 * copies into the caller's arrays, so a corrupt file changes nothing.
 * figures: the version 2 trailer (left as it is for version 1); workers:
 * the version 5 worker state's counts (left as they are before);
 * step_samples: version 6's (left as it is before); take: NULL, or
 * receives the whole file's arrays and layer table (a == NULL). */
static dt_status read_verified(FILE *f, const disk_header *h, uLong crc, const dt_ckpt_arrays *a,
                               dt_ckpt_file *take, double figures[3], uint64_t workers[2], uint64_t *step_samples,
                               const char *path) {
    size_t total = (size_t)(h->nparams + h->nstate + h->nopt_state), bytes;
    if (h->nopt_state > (uint64_t)SIZE_MAX / 8 || total < h->nopt_state)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint sizes overflow", path);
    DT_TRY(dt_mul_size(&bytes, total, sizeof(float), path));
    /* The header's counts must match the file's size before we allocate
     * (what is left after the header: the fd may not start at offset 0). */
    struct stat st;
    off_t at = ftello(f);
    if (fstat(fileno(f), &st) != 0 || at < 0)
        return dt_fail(DT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    uint64_t left = st.st_size > at ? (uint64_t)(st.st_size - at) : 0;
    /* Everything but the class names (version 4: up to
     * DT_CKPT_MAX_NAME_BYTES, their size follows the arrays) and the
     * workers' state (version 5: its size follows the names). */
    uint64_t promised = (uint64_t)bytes + trailer_bytes(h) + names_head_bytes(h) + layers_head_bytes(h) +
                        workers_head_bytes(h) + step_samples_bytes(h) + sizeof(uint32_t);
    uint64_t most = promised + (h->version >= 4 ? DT_CKPT_MAX_NAME_BYTES : 0);
    if (left < promised || (h->version < 5 && left > most))
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint is %llu bytes, its header promises %llu%s: "
                       "truncated or corrupt", path, (unsigned long long)(sizeof *h + left),
                       (unsigned long long)(sizeof *h + promised), most > promised ? " and class names" : "");
    const uint64_t rest = left - promised; /* the names' bytes, the layer table's, then the workers' state */
    float *buf, *mine = NULL;              /* (total); (worker_floats) this worker's state */
    char *names = NULL;                    /* (names_head[1]) */
    DT_TRY(dt_alloc_floats(&buf, total, path));
    uint32_t stored, names_head[2] = {0, 0}; /* count, bytes */
    double trailer[3];
    dt_class_names parsed = {0, NULL};
    dt_status s = read_exact(f, buf, bytes, &crc, path);
    if (s == DT_OK) s = read_exact(f, trailer, trailer_bytes(h), &crc, path);
    if (s == DT_OK) s = read_exact(f, names_head, names_head_bytes(h), &crc, path);
    if (s == DT_OK && (names_head[1] > DT_CKPT_MAX_NAME_BYTES || names_head[1] > rest ||
                       (h->version < 5 && names_head[1] != rest)))
        s = dt_fail(DT_ERR_FORMAT, "%s: checkpoint class names of %u bytes, the file holds %llu: truncated or "
                    "corrupt", path, names_head[1], (unsigned long long)rest);
    void *p = NULL;
    if (s == DT_OK) s = dt_alloc_bytes(&p, names_head[1], path);
    names = p;
    if (s == DT_OK) s = read_exact(f, names, names_head[1], &crc, path);
    if (s == DT_OK && h->version >= 5)
        s = read_workers(f, rest - names_head[1], h->version >= 7, &crc, a, workers, &mine, path);
    uint64_t samples = 0;
    if (s == DT_OK) s = read_exact(f, &samples, step_samples_bytes(h), &crc, path);
    dt_ckpt_layer *layers = NULL; /* (nlayers) */
    int nlayers = 0;
    uint64_t table = rest - names_head[1] - workers[0] * workers[1] * sizeof(float); /* the table's entries */
    if (s == DT_OK && h->version >= 7) s = read_layers(f, table, &crc, &layers, &nlayers, path);
    if (s == DT_OK && fread(&stored, 1, sizeof stored, f) != sizeof stored)
        s = dt_fail(DT_ERR_FORMAT, "%s: truncated checkpoint (no checksum)", path);
    if (s == DT_OK && stored != (uint32_t)crc)
        s = dt_fail(DT_ERR_FORMAT, "%s: checksum mismatch (file %08x, computed %08x): corrupt checkpoint",
                    path, stored, (uint32_t)crc);
    if (s == DT_OK) s = parse_names(a && a->classes ? &parsed : NULL, names, names_head[1], names_head[0], path);
    if (s == DT_OK && a) {
        memcpy(a->params, buf, a->nparams * sizeof(float));
        memcpy(a->state, buf + a->nparams, a->nstate * sizeof(float));
        if (a->opt_state)
            memcpy(a->opt_state, buf + a->nparams + a->nstate, a->nopt_state * sizeof(float));
        if (a->classes) *a->classes = parsed;
        if (mine) memcpy(a->worker_state, mine, a->worker_floats * sizeof(float));
    }
    if (s == DT_OK && trailer_bytes(h)) memcpy(figures, trailer, sizeof trailer);
    if (s == DT_OK && step_samples_bytes(h)) *step_samples = samples;
    if (s == DT_OK && take) { /* the whole file's arrays, handed over */
        *take = (dt_ckpt_file){buf, h->nparams, buf + h->nparams, h->nstate, layers, nlayers};
        buf = NULL;
        layers = NULL;
    }
    dt_free(layers);
    dt_free(mine);
    dt_free(names);
    dt_free(buf);
    return s;
}

/* dt_checkpoint_load_fd, or with take (a == NULL) dt_checkpoint_read_file's read. */
static dt_status load_fd(int fd, const char *name, uint64_t expect_hash, dt_ckpt_meta *meta,
                         const dt_ckpt_arrays *a, dt_ckpt_file *take) {
    /* A stream over our own duplicate: fclose leaves fd to the caller. */
    int own = dup(fd);
    FILE *f = own < 0 ? NULL : fdopen(own, "rb");
    if (!f) {
        dt_status s = dt_fail(DT_ERR_IO, "%s: cannot read checkpoint: %s", name, strerror(errno));
        if (own >= 0) close(own);
        return s;
    }
    disk_header h;
    uLong crc = crc32(0L, Z_NULL, 0);
    double figures[3] = {0, 0, -1}; /* version 1: unknown */
    uint64_t workers[2] = {0, 0};   /* before version 5: none */
    uint64_t step_samples = 0;      /* before version 6: unknown */
    dt_status s = read_exact(f, &h, sizeof h, &crc, name);
    if (s == DT_OK) s = check_header(&h, expect_hash, a, name);
    /* Another optimiser's state: a whole file (CRC checked, nothing
     * copied) that this run cannot continue, which is a usage error; a
     * damaged one is a format error like any other. */
    int other = s == DT_OK && a && a->opt_state && h.optimizer != (uint32_t)a->optimizer;
    if (s == DT_OK) s = read_verified(f, &h, crc, other ? NULL : a, take, figures, workers, &step_samples, name);
    if (s == DT_OK && other)
        s = dt_fail(DT_ERR_USAGE, "%s: checkpoint holds the state of optimizer %s, this run uses %s "
                    "(--optimizer %s continues it)", name, dt_optim_kind_name((dt_optim_kind)h.optimizer),
                    dt_optim_kind_name((dt_optim_kind)a->optimizer), dt_optim_kind_name((dt_optim_kind)h.optimizer));
    fclose(f);
    if (s != DT_OK) return s;
    meta->shape_hash = h.shape_hash;
    meta->seed = h.seed;
    meta->step = h.step;
    meta->net_step = h.net_step;
    meta->epoch = h.epoch;
    meta->step_in_epoch = h.step_in_epoch;
    meta->loss = figures[0];
    meta->best_loss = figures[1];
    meta->best_accuracy = figures[2];
    meta->optimizer = (int)h.optimizer;
    meta->file_nworkers = workers[0];
    meta->file_worker_floats = workers[1];
    meta->step_samples = step_samples;
    return DT_OK;
}

dt_status dt_checkpoint_load_fd(int fd, const char *name, uint64_t expect_hash, dt_ckpt_meta *meta,
                                const dt_ckpt_arrays *a) {
    return load_fd(fd, name, expect_hash, meta, a, NULL);
}

dt_status dt_checkpoint_check_hash(const char *path, uint64_t file_hash, uint64_t model_hash) {
    if (file_hash == model_hash) return DT_OK;
    return dt_fail(DT_ERR_FORMAT, "%s: checkpoint is for a different model (shape hash %016llx, model has %016llx)",
                   path, (unsigned long long)file_hash, (unsigned long long)model_hash);
}

static dt_status load_path(const char *path, uint64_t expect_hash, dt_ckpt_meta *meta, const dt_ckpt_arrays *a,
                           dt_ckpt_file *take) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dt_fail(DT_ERR_IO, "%s: cannot open checkpoint: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return dt_fail(DT_ERR_USAGE, "%s is a directory, not a checkpoint file (in a checkpoint directory "
                       "name a file: %s/latest, %s/best.ckpt)", path, path, path);
    }
    dt_status s = load_fd(fd, path, expect_hash, meta, a, take);
    close(fd);
    return s;
}

dt_status dt_checkpoint_load(const char *path, uint64_t expect_hash, dt_ckpt_meta *meta,
                             const dt_ckpt_arrays *a) {
    return load_path(path, expect_hash, meta, a, NULL);
}

dt_status dt_checkpoint_read_file(const char *path, dt_ckpt_meta *meta, dt_ckpt_file *out) {
    *out = (dt_ckpt_file){NULL, 0, NULL, 0, NULL, 0};
    return load_path(path, 0, meta, NULL, out);
}

void dt_ckpt_file_free(dt_ckpt_file *f) {
    if (!f) return;
    dt_free(f->params);
    dt_free(f->layers);
    *f = (dt_ckpt_file){NULL, 0, NULL, 0, NULL, 0};
}

dt_status dt_checkpoint_verify(const char *path, dt_ckpt_meta *meta) {
    return dt_checkpoint_load(path, 0, meta, NULL);
}

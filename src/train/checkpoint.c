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
#include "dtrain/optim.h"

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

/* Version 7's epoch accounting: 4 words of 8 bytes. */
typedef struct {
    double loss_sum;
    uint64_t loss_count;
    double last_loss;
    int64_t evaluated_step;
} disk_epoch;
_Static_assert(sizeof(disk_epoch) == 32, "epoch section must have no padding");

static dt_status write_epoch(writer *w, const dt_ckpt_meta *m) {
    disk_epoch e = {m->epoch_loss_sum, m->epoch_loss_count, m->last_epoch_loss, m->evaluated_step};
    return write_all(w, &e, sizeof e);
}

_Static_assert(sizeof(dt_ckpt_layer) == 56, "a layer's record must have no padding");

/* Version 7's architecture: u32 nlayers, u32 input c, h, w, the layers. */
static dt_status write_arch(writer *w, const dt_ckpt_arch *arch) {
    uint32_t head[4] = {arch ? (uint32_t)arch->nlayers : 0, 0, 0, 0};
    if (arch) memcpy(head + 1, arch->input, sizeof arch->input);
    DT_TRY(write_all(w, head, sizeof head));
    /* (a NULL buffer would reset the CRC) */
    return head[0] ? write_all(w, arch->layers, head[0] * sizeof *arch->layers) : DT_OK;
}

static dt_status write_body(writer *w, const dt_ckpt_meta *meta, const dt_ckpt_arrays *a) {
    disk_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, DT_CKPT_MAGIC, DT_CKPT_MAGIC_BYTES);
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
    DT_TRY(write_epoch(w, meta));
    DT_TRY(write_arch(w, a->arch));
    uint32_t crc = (uint32_t)w->crc;
    return write_all(w, &crc, sizeof crc);
}

uint64_t dt_checkpoint_bytes(const dt_ckpt_arrays *a) {
    uint64_t names = 0, floats = (uint64_t)a->nparams + a->nstate + a->nopt_state;
    for (int i = 0; a->classes && i < a->classes->n; i++) names += strlen(a->classes->names[i]) + 1;
    if (a->worker_state && a->worker_floats) floats += (uint64_t)a->nworkers * a->worker_floats;
    uint64_t layers = a->arch ? (uint64_t)a->arch->nlayers * sizeof(dt_ckpt_layer) : 0;
    /* header, the arrays, the loss figures, the names' and the worker
     * state's heads, step_samples, the epoch, the architecture, the CRC */
    return sizeof(disk_header) + floats * sizeof(float) + 3 * sizeof(double) + 2 * sizeof(uint32_t) + names +
           2 * sizeof(uint32_t) + sizeof(uint64_t) + sizeof(uint64_t) + sizeof(disk_epoch) + 4 * sizeof(uint32_t) +
           layers + sizeof(uint32_t);
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

dt_status dt_write_file_atomic(const char *path, const void *buf, size_t n) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return dt_fail(DT_ERR_USAGE, "output path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return dt_fail(DT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    dt_status s = DT_OK;
    for (size_t off = 0; off < n && s == DT_OK;) {
        ssize_t w = write(fd, (const char *)buf + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) s = dt_fail(DT_ERR_IO, "%s: write failed: %s", tmp, w < 0 ? strerror(errno) : "no space");
        else off += (size_t)w;
    }
    if (s == DT_OK && fsync(fd) != 0) s = dt_fail(DT_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && s == DT_OK) s = dt_fail(DT_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    if (s == DT_OK && rename(tmp, path) != 0)
        s = dt_fail(DT_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
    if (s != DT_OK) {
        unlink(tmp);
        return s;
    }
    return dt_sync_dir_of(path);
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

/* a == NULL (verify only, or another model's file): magic, version and
 * position, not the sizes (the caller compares the shape hash first). */
static dt_status check_header(const disk_header *h, const dt_ckpt_arrays *a, const char *path) {
    if (memcmp(h->magic, DT_CKPT_MAGIC, DT_CKPT_MAGIC_BYTES) != 0)
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

/* Version 6's samples per step, after the worker state (bytes). */
static size_t step_samples_bytes(const disk_header *h) { return h->version >= 6 ? sizeof(uint64_t) : 0; }

/* Version 7's epoch section and the architecture's head (bytes). */
static size_t epoch_bytes(const disk_header *h) { return h->version >= 7 ? sizeof(disk_epoch) : 0; }
static size_t arch_head_bytes(const disk_header *h) { return h->version >= 7 ? 4 * sizeof(uint32_t) : 0; }

/* What a file holds after its arrays, as read (version 1 defaults until
 * read). */
typedef struct {
    double figures[3];     /* the version 2 trailer */
    uint64_t workers[2];   /* version 5: workers, floats each */
    uint64_t step_samples; /* version 6 */
    disk_epoch epoch;      /* version 7 */
    dt_ckpt_arch arch;     /* version 7 (layers allocated) */
} file_tail;

/* The version 5 section, up to `bytes` long by the file's size (exactly,
 * before version 7, which has the architecture after it): its head in
 * tail->workers, and worker a->worker's part into *mine (allocated) when the
 * file holds what a asks for. */
static dt_status read_workers(FILE *f, uint64_t bytes, int exact, uLong *crc, const dt_ckpt_arrays *a,
                              file_tail *tail, float **mine, const char *path) {
    uint32_t head[2];
    uint64_t each;
    DT_TRY(read_exact(f, head, sizeof head, crc, path));
    DT_TRY(read_exact(f, &each, sizeof each, crc, path));
    if (head[1] != 0) return dt_fail(DT_ERR_FORMAT, "%s: checkpoint worker state has a non-zero reserved word", path);
    uint64_t n = head[0];
    /* None is 0 x 0: one count of zero alone would be a loop over nothing
     * (2^32 - 1 workers of no floats) or a size with no worker. */
    if ((n == 0) != (each == 0) || (each && n > bytes / sizeof(float) / each) ||
        (exact ? n * each * sizeof(float) != bytes : n * each * sizeof(float) > bytes))
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint worker state of %llu x %llu floats, the file holds %llu "
                       "bytes: truncated or corrupt", path, (unsigned long long)n, (unsigned long long)each,
                       (unsigned long long)bytes);
    tail->workers[0] = n, tail->workers[1] = each;
    int take = a && a->worker_state && n == (uint64_t)a->nworkers && each == a->worker_floats && a->worker >= 0 &&
               (uint64_t)a->worker < n;
    if (take) DT_TRY(dt_alloc_floats(mine, (size_t)each, path));
    for (uint64_t w = 0; w < n; w++)
        DT_TRY(take && w == (uint64_t)a->worker ? read_exact(f, *mine, each * sizeof(float), crc, path)
                                                : read_skip(f, each * sizeof(float), crc, path));
    return DT_OK;
}

/* Version 7's architecture, whose layers take exactly `bytes` (what is
 * left of the file before the CRC). */
static dt_status read_arch(FILE *f, uint64_t bytes, uLong *crc, dt_ckpt_arch *arch, const char *path) {
    uint32_t head[4];
    DT_TRY(read_exact(f, head, sizeof head, crc, path));
    if (head[0] > DT_CKPT_MAX_LAYERS || (uint64_t)head[0] * sizeof(dt_ckpt_layer) != bytes)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint architecture of %u layers, the file holds %llu bytes for it: "
                       "truncated or corrupt", path, head[0], (unsigned long long)bytes);
    memcpy(arch->input, head + 1, sizeof arch->input);
    if (!head[0]) return DT_OK;
    void *p;
    DT_TRY(dt_alloc_bytes(&p, bytes, path));
    arch->layers = p;
    arch->nlayers = (int)head[0];
    return read_exact(f, arch->layers, bytes, crc, path);
}

/* The sections after the arrays, `rest` bytes beyond the fixed ones: the
 * class names (into *names), the workers' state (this worker's into
 * *mine), the samples per step, the epoch and the architecture. */
static dt_status read_tail(FILE *f, const disk_header *h, uint64_t rest, uLong *crc, const dt_ckpt_arrays *a,
                           file_tail *tail, uint32_t names_head[2], char **names, float **mine, const char *path) {
    DT_TRY(read_exact(f, tail->figures, trailer_bytes(h), crc, path));
    DT_TRY(read_exact(f, names_head, names_head_bytes(h), crc, path));
    if (names_head[1] > DT_CKPT_MAX_NAME_BYTES || names_head[1] > rest || (h->version < 5 && names_head[1] != rest))
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint class names of %u bytes, the file holds %llu: truncated or "
                       "corrupt", path, names_head[1], (unsigned long long)rest);
    void *p = NULL;
    DT_TRY(dt_alloc_bytes(&p, names_head[1], path));
    *names = p;
    DT_TRY(read_exact(f, *names, names_head[1], crc, path));
    rest -= names_head[1];
    if (h->version >= 5) DT_TRY(read_workers(f, rest, h->version < 7, crc, a, tail, mine, path));
    rest -= tail->workers[0] * tail->workers[1] * sizeof(float);
    DT_TRY(read_exact(f, &tail->step_samples, step_samples_bytes(h), crc, path));
    DT_TRY(read_exact(f, &tail->epoch, epoch_bytes(h), crc, path));
    return h->version >= 7 ? read_arch(f, rest, crc, &tail->arch, path) : DT_OK;
}

/* Reads the arrays into one scratch block, checks the CRC, and only then
 * copies into the caller's arrays, so a corrupt file changes nothing; the
 * sections after them into *tail (left as they are where the version has
 * none). */
static dt_status read_verified(FILE *f, const disk_header *h, uLong crc, const dt_ckpt_arrays *a, file_tail *tail,
                               dt_ckpt_file *take, const char *path) {
    size_t total = (size_t)(h->nparams + h->nstate + h->nopt_state), bytes;
    if (h->nparams > (uint64_t)SIZE_MAX / 8 || h->nstate > (uint64_t)SIZE_MAX / 8 ||
        h->nopt_state > (uint64_t)SIZE_MAX / 8 || total < h->nopt_state)
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
     * DT_CKPT_MAX_NAME_BYTES, their size follows the arrays), the workers'
     * state (version 5: its size follows the names) and the layers
     * (version 7: their count follows the workers' state). */
    uint64_t promised = (uint64_t)bytes + trailer_bytes(h) + names_head_bytes(h) + workers_head_bytes(h) +
                        step_samples_bytes(h) + epoch_bytes(h) + arch_head_bytes(h) + sizeof(uint32_t);
    uint64_t most = promised + (h->version >= 4 ? DT_CKPT_MAX_NAME_BYTES : 0);
    if (left < promised || (h->version < 5 && left > most))
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint is %llu bytes, its header promises %llu%s: "
                       "truncated or corrupt", path, (unsigned long long)(sizeof *h + left),
                       (unsigned long long)(sizeof *h + promised), most > promised ? " and class names" : "");
    float *buf, *mine = NULL;              /* (total); (worker_floats) this worker's state */
    char *names = NULL;                    /* (names_head[1]) */
    DT_TRY(dt_alloc_floats(&buf, total, path));
    uint32_t stored, names_head[2] = {0, 0}; /* count, bytes */
    dt_class_names parsed = {0, NULL};
    dt_status s = read_exact(f, buf, bytes, &crc, path);
    if (s == DT_OK) s = read_tail(f, h, left - promised, &crc, a, tail, names_head, &names, &mine, path);
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
    if (s == DT_OK && take) { /* the block is theirs now: parameters, then state */
        take->params = buf;
        take->nparams = (size_t)h->nparams;
        take->state = buf + h->nparams;
        take->nstate = (size_t)h->nstate;
        buf = NULL;
    }
    dt_free(mine);
    dt_free(names);
    dt_free(buf);
    return s;
}

/* The header after the magic, which is checked first: a file that is not a
 * checkpoint at all (a text file given as --weights) is said to be so, not
 * "truncated". */
static dt_status read_header(FILE *f, disk_header *h, uLong *crc, const char *name) {
    size_t got = fread(h, 1, DT_CKPT_MAGIC_BYTES, f);
    if (got < DT_CKPT_MAGIC_BYTES || memcmp(h->magic, DT_CKPT_MAGIC, DT_CKPT_MAGIC_BYTES) != 0)
        return dt_fail(DT_ERR_FORMAT, "%s: not a dtrain checkpoint (%s)", name,
                       got == 0 ? "empty file" : got < DT_CKPT_MAGIC_BYTES ? "too short" : "bad magic");
    *crc = crc32(*crc, (const Bytef *)h, DT_CKPT_MAGIC_BYTES);
    return read_exact(f, (char *)h + DT_CKPT_MAGIC_BYTES, sizeof *h - DT_CKPT_MAGIC_BYTES, crc, name);
}

/* The message for a checkpoint of another model: the first layer that
 * differs when the file records its architecture (version 7), else the
 * parameter counts. */
static dt_status other_model(const char *path, const disk_header *h, const dt_ckpt_arch *file,
                             const dt_ckpt_arrays *a) {
    char diff[512];
    if (h->version >= 7 && a->arch && dt_ckpt_arch_diff(diff, sizeof diff, file, a->arch))
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint is for a different model: %s", path, diff);
    if (h->nparams != a->nparams || h->nstate != a->nstate)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint is for a different model: it holds %llu parameters and %llu "
                       "state values, the model has %zu and %zu%s", path, (unsigned long long)h->nparams,
                       (unsigned long long)h->nstate, a->nparams, a->nstate,
                       h->version < 7 ? " (a checkpoint before version 7 does not record its layers)" : "");
    return dt_fail(DT_ERR_FORMAT, "%s: checkpoint is for a different model: the same number of parameters (%zu), "
                   "but another architecture%s", path, a->nparams,
                   h->version < 7 ? " (a checkpoint before version 7 does not record its layers)"
                                  : " (the layers' connections differ)");
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
    /* Before version 2 unknown figures; before 5 no workers' state; before 6
     * samples per step unknown; before 7 no evaluation recorded. */
    file_tail tail = {{0, 0, -1}, {0, 0}, 0, {0, 0, 0, -1}, {{0, 0, 0}, 0, NULL}};
    dt_status s = read_header(f, &h, &crc, name);
    /* Another model's checkpoint is read whole (its architecture is at its
     * end) and nothing copied, then named. */
    int mismatch = s == DT_OK && a && h.shape_hash != expect_hash;
    if (s == DT_OK) s = check_header(&h, mismatch ? NULL : a, name);
    /* Another optimiser's state: a whole file (CRC checked, nothing
     * copied) that this run cannot continue, which is a usage error; a
     * damaged one is a format error like any other. */
    int other = s == DT_OK && a && !mismatch && a->opt_state && h.optimizer != (uint32_t)a->optimizer;
    if (s == DT_OK) s = read_verified(f, &h, crc, other || mismatch ? NULL : a, &tail, take, name);
    if (s == DT_OK && mismatch) s = other_model(name, &h, &tail.arch, a);
    if (s == DT_OK && other)
        s = dt_fail(DT_ERR_USAGE, "%s: checkpoint holds the state of optimizer %s, this run uses %s "
                    "(--optimizer %s continues it)", name, dt_optim_kind_name((dt_optim_kind)h.optimizer),
                    dt_optim_kind_name((dt_optim_kind)a->optimizer), dt_optim_kind_name((dt_optim_kind)h.optimizer));
    fclose(f);
    if (s == DT_OK && take) { /* the layers are theirs now */
        take->arch = tail.arch;
        memset(&tail.arch, 0, sizeof tail.arch);
    }
    dt_ckpt_arch_free(&tail.arch);
    if (s != DT_OK) return s;
    meta->shape_hash = h.shape_hash;
    meta->seed = h.seed;
    meta->step = h.step;
    meta->net_step = h.net_step;
    meta->epoch = h.epoch;
    meta->step_in_epoch = h.step_in_epoch;
    meta->loss = tail.figures[0];
    meta->best_loss = tail.figures[1];
    meta->best_accuracy = tail.figures[2];
    meta->optimizer = (int)h.optimizer;
    meta->file_nworkers = tail.workers[0];
    meta->file_worker_floats = tail.workers[1];
    meta->step_samples = tail.step_samples;
    meta->epoch_loss_sum = tail.epoch.loss_sum;
    meta->epoch_loss_count = tail.epoch.loss_count;
    meta->last_epoch_loss = tail.epoch.last_loss;
    meta->evaluated_step = tail.epoch.evaluated_step;
    meta->seen = h.step * tail.step_samples;
    meta->darknet = 0;
    return DT_OK;
}

dt_status dt_checkpoint_load_fd(int fd, const char *name, uint64_t expect_hash, dt_ckpt_meta *meta,
                                const dt_ckpt_arrays *a) {
    return load_fd(fd, name, expect_hash, meta, a, NULL);
}

/* Opens path (a directory is a usage error) for load_fd. */
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
    memset(out, 0, sizeof *out);
    dt_status s = load_path(path, 0, meta, NULL, out);
    if (s != DT_OK) dt_ckpt_file_free(out);
    return s;
}

void dt_ckpt_file_free(dt_ckpt_file *f) {
    if (!f) return;
    dt_free(f->params);
    dt_ckpt_arch_free(&f->arch);
    memset(f, 0, sizeof *f);
}

dt_status dt_checkpoint_verify(const char *path, dt_ckpt_meta *meta) {
    return dt_checkpoint_load(path, 0, meta, NULL);
}

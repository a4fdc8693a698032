/* MPI process layout, model agreement, and waiting without spinning. */
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/dist.h"
#include "dtrain/mem.h"
#include "dtrain/model.h"
#include "dtrain/textfile.h"
#include "dtrain/timer.h"
#include "net/model_lex.h"

dt_status dt_mpi_check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return DT_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    return dt_fail(DT_ERR_MPI, "%s: %s", what, msg);
}

void dt_cancel_requests(MPI_Request *reqs, int n) {
    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&reqs[i]);
            MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
        }
}

/* Every rank's host name on every rank (the names messages give). */
static dt_status share_host_names(dt_comm *c) {
    char mine[DT_HOST_NAME] = "?";
    if (gethostname(mine, sizeof mine) != 0) snprintf(mine, sizeof mine, "?");
    mine[DT_HOST_NAME - 1] = '\0';
    DT_TRY(dt_alloc_bytes((void **)&c->hosts, (size_t)c->size * DT_HOST_NAME, "host names"));
    return dt_mpi_check(MPI_Allgather(mine, DT_HOST_NAME, MPI_CHAR, c->hosts, DT_HOST_NAME, MPI_CHAR, c->world),
                        "host names (MPI_Allgather)");
}

dt_status dt_comm_create(dt_comm *c, MPI_Comm world, int nservers) {
    memset(c, 0, sizeof *c);
    c->world = world;
    c->workers = MPI_COMM_NULL;
    DT_TRY(dt_mpi_check(MPI_Comm_rank(c->world, &c->rank), "MPI_Comm_rank"));
    DT_TRY(dt_mpi_check(MPI_Comm_size(c->world, &c->size), "MPI_Comm_size"));
    if (nservers < 0 || nservers >= c->size)
        return dt_fail(DT_ERR_USAGE, "--servers %d needs at least %d ranks (one worker), the job has %d",
                       nservers, nservers + 1, c->size);
    c->nservers = nservers;
    c->nworkers = c->size - nservers;
    int is_worker = c->rank >= nservers;
    c->worker = is_worker ? c->rank - nservers : -1;
    MPI_Comm split;
    DT_TRY(dt_mpi_check(MPI_Comm_split(c->world, is_worker ? 1 : MPI_UNDEFINED, c->rank, &split),
                        "MPI_Comm_split"));
    c->workers = split;
    return share_host_names(c);
}

void dt_comm_free(dt_comm *c) {
    if (c->workers != MPI_COMM_NULL) MPI_Comm_free(&c->workers);
    c->workers = MPI_COMM_NULL;
    dt_free(c->hosts);
    c->hosts = NULL;
}

const char *dt_comm_host(const dt_comm *c, int r) {
    return c->hosts && r >= 0 && r < c->size ? c->hosts + (size_t)r * DT_HOST_NAME : "?";
}

void dt_comm_name_rank(const dt_comm *c, int r, char *buf, size_t cap, size_t *used) {
    if (*used + 1 >= cap) return;
    int n = snprintf(buf + *used, cap - *used, "%s%d (%s)", *used ? ", " : "", r, dt_comm_host(c, r));
    if (n > 0) *used += (size_t)n < cap - *used ? (size_t)n : cap - 1 - *used; /* cut at cap */
}

/* ---- model agreement ------------------------------------------------------
 *
 * Every rank reads its model file again and cuts it into its meaningful
 * lines: section headers and key=value pairs, without comments, blank lines
 * and spacing (as the parser reads them). Rank 0 broadcasts its file; each
 * rank compares, section by section, and an allgather of the verdicts gives
 * every rank the same decision. The first rank that differs describes the
 * first difference and broadcasts it, so every rank fails with the same
 * DT_ERR_CONFIG message. */

#define MODEL_MAX_BYTES ((size_t)16 << 20) /* as the parser's limit */
#define BCAST_CHUNK 4096                   /* bytes per broadcast of rank 0's file */

/* A section header (val NULL, key its name) or a key=value line. */
typedef struct {
    const char *key, *val; /* into model_text.text, trimmed */
    int line;              /* 1-based line in the file */
} model_line;

typedef struct {
    char *text;        /* owned copy of the file, cut into strings */
    model_line *lines; /* (n) owned */
    int n;
    int nlines;        /* lines in the file */
    const char *path;  /* for messages (not owned) */
} model_text;

static void model_text_free(model_text *m) {
    dt_free(m->text);
    dt_free(m->lines);
    m->text = NULL;
    m->lines = NULL;
}

/* Cuts text (len bytes) into m's meaningful lines, as model.c's parser
 * reads them (model_lex.h). Never fails on odd text (the file has parsed already). */
static dt_status model_text_cut(model_text *m, const char *text, size_t len, const char *path) {
    memset(m, 0, sizeof *m);
    m->path = path;
    size_t count = 1;
    for (size_t i = 0; i < len; i++) count += text[i] == '\n';
    size_t bytes;
    DT_TRY(dt_mul_size(&bytes, count, sizeof *m->lines, "model file lines"));
    DT_TRY(dt_alloc_bytes((void **)&m->lines, bytes, "model file lines"));
    dt_status s = dt_alloc_bytes((void **)&m->text, len + 1, "model file copy");
    if (s != DT_OK) {
        model_text_free(m);
        return s;
    }
    memcpy(m->text, text, len);
    m->text[len] = '\0';
    char *line = m->text;
    while (*line) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        m->nlines++;
        char *key, *val;
        dt_model_line_kind kind = dt_model_line_cut(line, &key, &val);
        if (kind == DT_MODEL_LINE_HEADER) {
            char *close = strrchr(key, ']');
            if (close) *close = '\0';
            m->lines[m->n++] = (model_line){dt_model_trim(key + 1), NULL, m->nlines};
        } else if (kind == DT_MODEL_LINE_PAIR) {
            m->lines[m->n++] = (model_line){key, val ? val : "", m->nlines};
        }
        if (!nl) break;
        line = nl + 1;
    }
    return DT_OK;
}

/* One item of a value (no commas), trimmed: numbers compare by value
 * ("0.01" = "1e-2"), anything else as text. */
static int same_item(const char *a, size_t na, const char *b, size_t nb) {
    while (na && (*a == ' ' || *a == '\t')) a++, na--;
    while (na && (a[na - 1] == ' ' || a[na - 1] == '\t')) na--;
    while (nb && (*b == ' ' || *b == '\t')) b++, nb--;
    while (nb && (b[nb - 1] == ' ' || b[nb - 1] == '\t')) nb--;
    if (na == nb && memcmp(a, b, na) == 0) return 1;
    char x[64], y[64];
    if (na == 0 || nb == 0 || na >= sizeof x || nb >= sizeof y) return 0;
    memcpy(x, a, na);
    x[na] = '\0';
    memcpy(y, b, nb);
    y[nb] = '\0';
    char *ex, *ey;
    double dx = strtod(x, &ex), dy = strtod(y, &ey);
    return *ex == '\0' && *ey == '\0' && dx == dy;
}

/* Values mean the same: comma lists item by item (milestones=30, 60). */
static int same_value(const char *a, const char *b) {
    for (;;) {
        size_t na = strcspn(a, ","), nb = strcspn(b, ",");
        if (!same_item(a, na, b, nb)) return 0;
        if (!a[na] || !b[nb]) return !a[na] && !b[nb];
        a += na + 1;
        b += nb + 1;
    }
}

/* Index of the first header at or after i, or m->n. */
static int next_header(const model_text *m, int i) {
    while (i < m->n && m->lines[i].val) i++;
    return i;
}

/* Key key among m's lines [lo, hi), or NULL. */
static const model_line *find_line(const model_text *m, int lo, int hi, const char *key) {
    for (int i = lo; i < hi; i++)
        if (strcmp(m->lines[i].key, key) == 0) return &m->lines[i];
    return NULL;
}

/* What one rank has where the files differ: "[net] learning_rate=0.05"
 * and its line (0: none; ends: the file ends before it). */
typedef struct {
    char what[160];
    int line, ends;
} model_side;

/* "[sec] key=val" (sec NULL: before any section) for e, into side. */
static void side_has(model_side *side, const model_line *sec, const model_line *e) {
    if (!e->val)
        snprintf(side->what, sizeof side->what, "[%.40s]", e->key);
    else
        snprintf(side->what, sizeof side->what, "%s%.40s%s%.40s=%.60s", sec ? "[" : "",
                 sec ? sec->key : "", sec ? "] " : "", e->key, e->val);
    side->line = e->line;
}

/* side lacks key in section sec (NULL: before any section). */
static void side_lacks(model_side *side, const model_line *sec, const char *key) {
    snprintf(side->what, sizeof side->what, "no %.40s= in %s%.40s%s", key, sec ? "[" : "",
             sec ? sec->key : "the top of the file", sec ? "]" : "");
    side->line = sec ? sec->line : 0;
}

/* Keys of one section: a's lines [la, ha) against b's [lb, hb). 1 and the
 * two sides at the first difference (a's keys in file order, then keys
 * only b has), 0 if they mean the same. */
static int diff_keys(const model_text *a, int la, int ha, const model_text *b, int lb, int hb,
                     const model_line *seca, const model_line *secb, model_side *sa, model_side *sb) {
    for (int i = la; i < ha; i++) {
        const model_line *ea = &a->lines[i], *eb = find_line(b, lb, hb, ea->key);
        if (eb && same_value(ea->val, eb->val)) continue;
        side_has(sa, seca, ea);
        if (eb)
            side_has(sb, secb, eb);
        else
            side_lacks(sb, secb, ea->key);
        return 1;
    }
    for (int i = lb; i < hb; i++) {
        const model_line *eb = &b->lines[i];
        if (find_line(a, la, ha, eb->key)) continue;
        side_lacks(sa, seca, eb->key);
        side_has(sb, secb, eb);
        return 1;
    }
    return 0;
}

/* The first place where b's file means something else than a's: 1 and
 * both sides, 0 if they agree. Sections compare in order, the keys of a
 * section in any order. */
static int model_text_diff(const model_text *a, const model_text *b, model_side *sa, model_side *sb) {
    memset(sa, 0, sizeof *sa);
    memset(sb, 0, sizeof *sb);
    /* Lines before the first header, then one section at a time. */
    int ia = 0, ib = 0, ea = next_header(a, 0), eb = next_header(b, 0);
    if (diff_keys(a, ia, ea, b, ib, eb, NULL, NULL, sa, sb)) return 1;
    for (ia = ea, ib = eb; ia < a->n || ib < b->n; ia = ea, ib = eb) {
        const model_line *ha = ia < a->n ? &a->lines[ia] : NULL, *hb = ib < b->n ? &b->lines[ib] : NULL;
        if (!ha || !hb || strcmp(ha->key, hb->key) != 0) {
            model_side *has[2] = {sa, sb};
            const model_line *h[2] = {ha, hb};
            const model_text *m[2] = {a, b};
            for (int k = 0; k < 2; k++) {
                if (h[k]) {
                    side_has(has[k], NULL, h[k]);
                } else {
                    snprintf(has[k]->what, sizeof has[k]->what, "no section there");
                    has[k]->line = m[k]->nlines;
                    has[k]->ends = 1;
                }
            }
            return 1;
        }
        ea = next_header(a, ia + 1);
        eb = next_header(b, ib + 1);
        if (diff_keys(a, ia + 1, ea, b, ib + 1, eb, ha, hb, sa, sb)) return 1;
    }
    return 0;
}

/* snprintf for messages that may be cut short (dt_fail keeps 512 bytes). */
static void say(char *out, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void say(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

/* "rank 0 has [net] learning_rate=0.05 (a.cfg line 8)" into out. */
static void side_say(char *out, size_t cap, int rank, const model_side *s, const char *path) {
    if (s->ends)
        snprintf(out, cap, "rank %d has %s (%s ends at line %d)", rank, s->what, path, s->line);
    else if (s->line)
        snprintf(out, cap, "rank %d has %s (%s line %d)", rank, s->what, path, s->line);
    else
        snprintf(out, cap, "rank %d has %s (%s)", rank, s->what, path);
}

/* Broadcasts len bytes of buf from rank 0 in chunks of the same size on
 * every rank; buf NULL (a rank that could not allocate) takes them into
 * scratch space, so the collectives still match. */
static dt_status bcast_bytes(char *buf, size_t len, MPI_Comm comm) {
    char scratch[BCAST_CHUNK];
    for (size_t off = 0; off < len; off += BCAST_CHUNK) {
        int n = (int)(len - off < BCAST_CHUNK ? len - off : BCAST_CHUNK);
        DT_TRY(dt_mpi_check(MPI_Bcast(buf ? buf + off : scratch, n, MPI_CHAR, 0, comm),
                            "model check (MPI_Bcast)"));
    }
    return DT_OK;
}

/* What a rank found, most serious first: it could not check, its file
 * differs from rank 0's, its net differs from rank 0's. */
enum { FAILED, DIFFERS, SHAPE, NVERDICTS };

/* Rank 0's path and file text, "PATH\0TEXT", and its shape hash on every
 * rank: *buf (owned; NULL on rank 0 and where it could not be allocated:
 * *local is then the failure), *len its bytes, *hash0. Rank 0 sends mine
 * (mine_len bytes; NULL if its own read failed: it sends no text). */
static dt_status share_rank0(const dt_comm *c, const char *path, const char *mine, size_t mine_len,
                             uint64_t hash, char **buf, size_t *len, uint64_t *hash0, dt_status *local) {
    char *send = NULL;
    unsigned long long head[2] = {0, hash}; /* bytes, shape hash */
    *buf = NULL;
    if (c->rank == 0 && mine) {
        size_t plen = strlen(path) + 1;
        if (dt_alloc_bytes((void **)&send, plen + mine_len, "model check buffer") == DT_OK) {
            memcpy(send, path, plen);
            memcpy(send + plen, mine, mine_len);
            head[0] = plen + mine_len;
        } else {
            *local = DT_ERR_NOMEM;
        }
    }
    dt_status s = dt_mpi_check(MPI_Bcast(head, 2, MPI_UNSIGNED_LONG_LONG, 0, c->world), "model check (MPI_Bcast)");
    *len = (size_t)head[0];
    *hash0 = head[1];
    if (s == DT_OK && c->rank != 0 && *len &&
        dt_alloc_bytes((void **)buf, *len + 1, "model check buffer") != DT_OK && *local == DT_OK)
        *local = DT_ERR_NOMEM;
    if (s == DT_OK) s = bcast_bytes(c->rank == 0 ? send : *buf, *len, c->world);
    dt_free(send);
    if (s != DT_OK) {
        dt_free(*buf);
        *buf = NULL;
    }
    return s;
}

/* The first rank's message for verdict v on this rank (the root), into msg
 * (which holds this rank's failure for FAILED). more: other ranks with the
 * same verdict. */
static void verdict_message(char *msg, size_t cap, int v, const dt_comm *c, int more, const model_side *sides,
                            const char *path0, const char *path, uint64_t hash0, uint64_t hash) {
    char others[48] = "";
    if (more) snprintf(others, sizeof others, " and %d more", more);
    if (v == FAILED) {
        char why[512];
        snprintf(why, sizeof why, "%s", msg);
        say(msg, cap, "model check on rank %d: %s", c->rank, why);
    } else if (v == DIFFERS) {
        char a[240], b[240];
        side_say(a, sizeof a, 0, &sides[0], path0);
        side_say(b, sizeof b, c->rank, &sides[1], path);
        say(msg, cap,
            "ranks disagree on the model: rank(s) %d%s read a different model file than rank 0: %s, %s; "
            "give every rank the same model file", c->rank, others, a, b);
    } else {
        say(msg, cap,
            "ranks disagree on the model: rank(s) %d%s built a different network than rank 0 from the "
            "same model file (shape hash %016llx vs %016llx); give every rank the same model file and flags",
            c->rank, others, (unsigned long long)hash, (unsigned long long)hash0);
    }
}

dt_status dt_comm_agree(const dt_comm *c, dt_status local) {
    if (c->size == 1) return local;
    int first = local == DT_OK ? c->size : c->rank, status = (int)local;
    char msg[1024] = "";
    if (local != DT_OK) snprintf(msg, sizeof msg, "%s", dt_last_error());
    /* Without spinning: a server waits here while the workers load data. */
    MPI_Request req;
    DT_TRY(dt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, c->world, &req),
                        "agreement (MPI_Iallreduce)"));
    DT_TRY(dt_mpi_wait(&req, 1, NULL, NULL, NULL, "agreement (MPI_Iallreduce)"));
    if (first == c->size) return DT_OK;
    DT_TRY(dt_mpi_check(MPI_Bcast(&status, 1, MPI_INT, first, c->world), "agreement (MPI_Bcast)"));
    DT_TRY(dt_mpi_check(MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, c->world), "agreement (MPI_Bcast)"));
    msg[sizeof msg - 1] = '\0';
    return dt_fail((dt_status)status, "%s", msg);
}

dt_status dt_comm_check_model(const dt_comm *c, uint64_t shape_hash, const char *model) {
    if (c->size == 1) return DT_OK;
    char msg[512] = "";
    /* This rank's file (or text), cut into its lines. */
    const char *model_path = dt_model_is_text(model) ? "model text" : model;
    char *text = NULL;
    model_text mine = {0}, theirs = {0};
    dt_status local = DT_OK;
    if (model_path != model)
        local = (text = strdup(model)) ? DT_OK : dt_fail(DT_ERR_NOMEM, "out of memory for the model's text");
    else
        local = dt_read_text_file(&text, model_path, MODEL_MAX_BYTES, DT_ERR_CONFIG, "a model file");
    if (local == DT_OK) local = model_text_cut(&mine, text, strlen(text), model_path);
    if (local != DT_OK) snprintf(msg, sizeof msg, "%s", dt_last_error());

    /* Rank 0's file and shape hash on every rank; each compares its own. */
    char *buf;
    size_t len;
    uint64_t hash0;
    dt_status s = share_rank0(c, model_path, local == DT_OK ? text : NULL, text ? strlen(text) : 0, shape_hash,
                              &buf, &len, &hash0, &local);
    free(text);
    model_side sides[2];
    memset(sides, 0, sizeof sides);
    int verdict = NVERDICTS; /* agrees */
    if (s == DT_OK && local == DT_OK && c->rank != 0 && buf) {
        size_t plen = strlen(buf); /* buf has len + 1 bytes, the last 0 */
        const char *rtext = plen < len ? buf + plen + 1 : "";
        local = model_text_cut(&theirs, rtext, plen < len ? len - plen - 1 : 0, buf);
        if (local == DT_OK && model_text_diff(&theirs, &mine, &sides[0], &sides[1])) verdict = DIFFERS;
    }
    if (local != DT_OK) {
        if (!msg[0]) snprintf(msg, sizeof msg, "%s", dt_last_error());
        verdict = FAILED;
    } else if (verdict == NVERDICTS && shape_hash != hash0) {
        verdict = SHAPE;
    }

    /* For each verdict, the first rank that reached it and how many did:
     * the same decision on every rank. */
    int first[NVERDICTS], count[NVERDICTS];
    for (int v = 0; v < NVERDICTS; v++) {
        first[v] = v == verdict ? c->rank : c->size;
        count[v] = v == verdict;
    }
    if (s == DT_OK)
        s = dt_mpi_check(MPI_Allreduce(MPI_IN_PLACE, first, NVERDICTS, MPI_INT, MPI_MIN, c->world),
                         "model check (MPI_Allreduce)");
    if (s == DT_OK)
        s = dt_mpi_check(MPI_Allreduce(MPI_IN_PLACE, count, NVERDICTS, MPI_INT, MPI_SUM, c->world),
                         "model check (MPI_Allreduce)");
    int v = 0;
    while (v < NVERDICTS && first[v] == c->size) v++;
    if (s == DT_OK && v < NVERDICTS) {
        /* The first rank with the most serious verdict says why, to all. */
        int root = first[v], status = v == FAILED ? (int)local : DT_ERR_CONFIG;
        if (c->rank == root)
            verdict_message(msg, sizeof msg, v, c, count[v] - 1, sides, theirs.path, model_path, hash0,
                            shape_hash);
        s = dt_mpi_check(MPI_Bcast(&status, 1, MPI_INT, root, c->world), "model check (MPI_Bcast)");
        if (s == DT_OK)
            s = dt_mpi_check(MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, root, c->world), "model check (MPI_Bcast)");
        msg[sizeof msg - 1] = '\0';
        if (s == DT_OK) s = dt_fail((dt_status)status, "%s", msg);
    }
    dt_free(buf);
    model_text_free(&mine);
    model_text_free(&theirs);
    return s;
}

dt_status dt_mpi_wait_hurry(MPI_Request *reqs, int n, const dt_stall *stall, dt_stall_fn who, void *ctx,
                            const char *what, const atomic_int *hurry) {
    double hurried_since = 0;
    dt_backoff idle = dt_backoff_start(1000, 1000000), hurried = dt_backoff_start(50000, 250000);
    dt_stall_clock clock;
    dt_stall_clock_start(&clock, stall, dt_now());
    for (;;) {
        int done = 0;
        DT_TRY(dt_mpi_check(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), what));
        if (done) return DT_OK;
        double now = dt_now();
        if (hurry && atomic_load_explicit(hurry, memory_order_relaxed)) {
            if (hurried_since == 0) hurried_since = now;
            if (now - hurried_since < 2e-3) {
                sched_yield();
            } else { /* a peer is far behind: back off, but only to 250 us */
                dt_backoff_sleep(&hurried);
            }
        } else {
            dt_backoff_sleep(&idle); /* 1 us to 1 ms */
        }
        DT_TRY(dt_stall_clock_poll(&clock, dt_now(), who, ctx));
    }
}

dt_status dt_mpi_wait(MPI_Request *reqs, int n, const dt_stall *stall, dt_stall_fn who, void *ctx,
                      const char *what) {
    return dt_mpi_wait_hurry(reqs, n, stall, who, ctx, what, NULL);
}

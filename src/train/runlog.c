#include "dtrain/runlog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/json.h"
#include "dtrain/mem.h"

static dt_status series_push(dt_series *s, double step, double time_s, double value) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256, bytes;
        DT_TRY(dt_mul_size(&bytes, cap, sizeof(double), "run log series"));
        double **arrays[3] = {&s->step, &s->time_s, &s->value};
        for (int i = 0; i < 3; i++) {
            double *p = realloc(*arrays[i], bytes);
            if (!p) return dt_fail(DT_ERR_NOMEM, "run log series: cannot allocate %zu bytes", bytes);
            *arrays[i] = p;
        }
        s->cap = cap;
    }
    s->step[s->n] = step;
    s->time_s[s->n] = time_s;
    s->value[s->n] = value;
    s->n++;
    return DT_OK;
}

static void series_free(dt_series *s) {
    free(s->step);
    free(s->time_s);
    free(s->value);
    memset(s, 0, sizeof *s);
}

void dt_runlog_free(dt_runlog *log) {
    if (!log) return;
    series_free(&log->loss);
    series_free(&log->accuracy);
}

/* The base name of path without its last extension (the whole base name if
 * that would leave nothing), made safe to draw and to write as a TSV field. */
static void make_label(char *dst, size_t cap, const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < cap;) {
        const unsigned char *p = (const unsigned char *)base + i;
        size_t n = dt_utf8_char_len(p, len - i);
        if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f))) {
            dst[o++] = '?';
            i++;
        } else {
            memcpy(dst + o, p, n);
            o += n;
            i += n;
        }
    }
    dst[o] = '\0';
}

/* Drops the trailing points past step (a log is in step order). */
static void series_drop_after(dt_series *s, double step) {
    while (s->n > 0 && s->step[s->n - 1] > step) s->n--;
}

static dt_status need_number(const dt_json_object *obj, const char *event, const char *key,
                             double *out) {
    if (dt_json_get_number(obj, key, out) == DT_OK) return DT_OK;
    return dt_fail(DT_ERR_FORMAT, "%s record without a number \"%s\"", event, key);
}

/* One line of the log: a step or eval record becomes a point. */
static dt_status read_record(dt_runlog *log, const char *line) {
    dt_json_object obj;
    DT_TRY(dt_json_parse_object(&obj, line));
    char event[256]; /* names are short: one this long is refused as malformed */
    DT_TRY(dt_json_get_string(&obj, "event", event, sizeof event));
    const int is_step = strcmp(event, "step") == 0;
    double step, elapsed, value;
    if (strcmp(event, "resume") == 0) { /* what the crashed part did after its checkpoint was redone */
        DT_TRY(need_number(&obj, event, "step", &step));
        series_drop_after(&log->loss, step);
        series_drop_after(&log->accuracy, step);
        return DT_OK;
    }
    if (!is_step && strcmp(event, "eval") != 0) return DT_OK;
    DT_TRY(need_number(&obj, event, "step", &step));
    DT_TRY(need_number(&obj, event, is_step ? "loss" : "test_accuracy", &value));
    DT_TRY(need_number(&obj, event, "elapsed_s", &elapsed));
    return series_push(is_step ? &log->loss : &log->accuracy, step, elapsed, value);
}

static dt_status read_lines(dt_runlog *log, FILE *f, const char *path) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    dt_status s = DT_OK;
    while (s == DT_OK && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if ((size_t)len != strlen(line))
            s = dt_fail(DT_ERR_FORMAT, "contains a NUL byte");
        else
            s = read_record(log, line);
        /* Only the last line lacks its newline: a killed run's, cut while written. */
        if (s != DT_OK && s != DT_ERR_NOMEM && line[len - 1] != '\n') {
            log->cut_line = lineno;
            s = DT_OK;
        }
        if (s != DT_OK) {
            /* The message is this thread's buffer: copy it before rewriting it. */
            char msg[400];
            snprintf(msg, sizeof msg, "%s", dt_last_error());
            s = dt_fail(s, "%s:%ld: %s", path, lineno, msg);
        }
    }
    free(line);
    if (s == DT_OK && ferror(f))
        s = dt_fail(DT_ERR_IO, "%s: read failed: %s", path, strerror(errno));
    if (s == DT_OK && log->loss.n == 0)
        s = dt_fail(DT_ERR_FORMAT, "%s: no step records (is it a log of dtrain train --log?)", path);
    return s;
}

dt_status dt_runlog_read(dt_runlog *log, const char *path) {
    memset(log, 0, sizeof *log);
    make_label(log->label, sizeof log->label, path);
    FILE *f = fopen(path, "r");
    if (!f) return dt_fail(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    dt_status s = read_lines(log, f, path);
    fclose(f); /* read-only: nothing to lose if closing fails */
    if (s != DT_OK) dt_runlog_free(log);
    return s;
}

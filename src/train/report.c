#include "report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/json.h"

/* The resumed log: drops a last line a crash tore (no newline), and finds
 * the last elapsed_s (0 in a missing or empty log). */
static dt_status continue_log(const char *path, double *elapsed) {
    *elapsed = 0;
    FILE *f = fopen(path, "r+");
    if (!f) return errno == ENOENT ? DT_OK : dt_fail(DT_ERR_IO, "--log %s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long whole = 0; /* bytes in complete lines */
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] != '\n') break;
        whole += len;
        dt_json_object obj;
        double e;
        if (dt_json_parse_object(&obj, line) == DT_OK && dt_json_get_number(&obj, "elapsed_s", &e) == DT_OK)
            *elapsed = e;
    }
    free(line);
    dt_status s = DT_OK;
    if (ferror(f)) s = dt_fail(DT_ERR_IO, "--log %s: read failed: %s", path, strerror(errno));
    else if (ftruncate(fileno(f), whole) != 0) s = dt_fail(DT_ERR_IO, "--log %s: %s", path, strerror(errno));
    fclose(f);
    return s;
}

dt_status dt_report_open(dt_report *r, FILE *out, const char *log_path, int quiet, int tty, int append) {
    memset(r, 0, sizeof *r);
    r->out = out;
    r->quiet = quiet;
    r->tty = tty;
    r->start = r->last_print = dt_now();
    if (log_path) {
        double before = 0;
        if (append) DT_TRY(continue_log(log_path, &before));
        r->start -= before;
        r->log = fopen(log_path, append ? "a" : "w");
        if (!r->log) return dt_fail(DT_ERR_IO, "--log %s: cannot open: %s", log_path, strerror(errno));
    }
    return DT_OK;
}

/* Appends one line to the log. */
static dt_status log_line(dt_report *r, const char *json) {
    if (r->on_record) r->on_record(r->record_ctx, json);
    if (!r->log) return DT_OK;
    if (fprintf(r->log, "%s\n", json) < 0 || fflush(r->log) != 0)
        return dt_fail(DT_ERR_IO, "--log: write failed: %s", strerror(errno));
    return DT_OK;
}

/* Appends printf-formatted text to r (marked cut when it does not fit). */
__attribute__((format(printf, 2, 3))) static void rec_put(dt_rec *r, const char *fmt, ...) {
    if (r->cut) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->text + r->len, sizeof r->text - r->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof r->text - r->len)
        r->cut = 1;
    else
        r->len += (size_t)n;
}

/* ,"key": (keys are dtrain's own names: nothing to escape). */
static void rec_key(dt_rec *r, const char *key) { rec_put(r, ",\"%s\":", key); }

void dt_rec_begin(dt_rec *r, const char *event) {
    r->len = 0;
    r->cut = 0;
    r->text[0] = '\0';
    rec_put(r, "{\"event\":\"%s\"", event);
}

void dt_rec_int(dt_rec *r, const char *key, long long v) {
    rec_key(r, key);
    rec_put(r, "%lld", v);
}

void dt_rec_uint(dt_rec *r, const char *key, unsigned long long v) {
    rec_key(r, key);
    rec_put(r, "%llu", v);
}

void dt_rec_fixed(dt_rec *r, const char *key, double v, int decimals) {
    rec_key(r, key);
    rec_put(r, "%.*f", decimals, v);
}

void dt_rec_num(dt_rec *r, const char *key, double v, int digits) {
    rec_key(r, key);
    rec_put(r, "%.*g", digits, v);
}

void dt_rec_str(dt_rec *r, const char *key, const char *s) {
    rec_key(r, key);
    rec_put(r, "\"");
    if (r->cut) return;
    /* dt_json_escape stops short only when an escape (at most 6 bytes) and
     * the terminator no longer fit: with 8 bytes left over, s went in whole. */
    dt_json_escape(r->text + r->len, sizeof r->text - r->len, s);
    r->len += strlen(r->text + r->len);
    if (sizeof r->text - r->len < 8) r->cut = 1;
    rec_put(r, "\"");
}

void dt_rec_true(dt_rec *r, const char *key) {
    rec_key(r, key);
    rec_put(r, "true");
}

/* Closes r: DT_ERR_INTERNAL if a field did not fit (no record is cut short). */
static dt_status rec_end(dt_rec *r) {
    rec_put(r, "}");
    if (!r->cut) return DT_OK;
    return dt_fail(DT_ERR_INTERNAL, "run log record %.48s... is over %d bytes", r->text, DT_REC_MAX);
}

dt_status dt_report_record(dt_report *rep, dt_rec *r) {
    DT_TRY(rec_end(r));
    return log_line(rep, r->text);
}


/* Clears the progress bar so the next line starts clean (and the summary
 * line carries no escape codes when no bar was drawn). */
static void end_bar(dt_report *r) {
    if (r->bar_shown && r->out) fputs("\r\033[K", r->out);
    r->bar_shown = 0;
}

void dt_report_progress(dt_report *r, int epoch, int epochs, int step, int steps_per_epoch,
                        double loss, double lr, double img_per_sec, double eta_s, int force) {
    if (!r->out || r->quiet) return;
    double now = dt_now();
    if (!force && now - r->last_print < (r->tty ? 0.2 : 5.0)) return;
    r->last_print = now;
    int eta = eta_s > 0 ? (int)eta_s : 0;
    if (r->tty) {
        char bar[31];
        int filled = steps_per_epoch ? 30 * step / steps_per_epoch : 0;
        for (int i = 0; i < 30; i++) bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
        bar[30] = 0;
        fprintf(r->out, "\r\033[Kepoch %d/%d [%s] %d/%d loss %.4f lr %.4g %.0f img/s ETA %d:%02d:%02d",
                epoch + 1, epochs, bar, step, steps_per_epoch, loss, lr, img_per_sec, eta / 3600,
                eta / 60 % 60, eta % 60);
        r->bar_shown = 1;
    } else {
        fprintf(r->out, "epoch %d/%d step %d/%d loss %.4f lr %.4g %.0f img/s ETA %d:%02d:%02d\n",
                epoch + 1, epochs, step, steps_per_epoch, loss, lr, img_per_sec, eta / 3600,
                eta / 60 % 60, eta % 60);
    }
    fflush(r->out);
}

void dt_report_line(dt_report *r, const char *text) {
    if (!r->out || r->quiet) return;
    end_bar(r);
    fprintf(r->out, "%s\n", text);
    fflush(r->out);
}

dt_status dt_report_summary(dt_report *rep, dt_rec *r) {
    DT_TRY(rec_end(r));
    if (rep->out) {
        if (!rep->quiet) end_bar(rep);
        fprintf(rep->out, "%s\n", r->text);
        fflush(rep->out);
    }
    return log_line(rep, r->text);
}

dt_status dt_report_close(dt_report *r) {
    if (r->log && fclose(r->log) != 0) {
        r->log = NULL;
        return dt_fail(DT_ERR_IO, "--log: close failed: %s", strerror(errno));
    }
    r->log = NULL;
    return DT_OK;
}

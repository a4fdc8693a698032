#include "report.h"

#include <errno.h>
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

dt_status dt_report_log(dt_report *r, const char *json) {
    if (!r->log) return DT_OK;
    if (fprintf(r->log, "%s\n", json) < 0 || fflush(r->log) != 0)
        return dt_fail(DT_ERR_IO, "--log: write failed: %s", strerror(errno));
    return DT_OK;
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

dt_status dt_report_summary(dt_report *r, const char *json) {
    if (r->out) {
        if (!r->quiet) end_bar(r);
        fprintf(r->out, "%s\n", json);
        fflush(r->out);
    }
    return dt_report_log(r, json);
}

dt_status dt_report_close(dt_report *r) {
    if (r->log && fclose(r->log) != 0) {
        r->log = NULL;
        return dt_fail(DT_ERR_IO, "--log: close failed: %s", strerror(errno));
    }
    r->log = NULL;
    return DT_OK;
}

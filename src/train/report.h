/* Progress output and the JSONL run log of a training run.
 * Progress goes to `out` (a redrawn bar on a terminal, a plain line every few
 * seconds otherwise); every event is one JSON object per line in the log. */
#ifndef DTRAIN_TRAIN_REPORT_H
#define DTRAIN_TRAIN_REPORT_H

#include <stdio.h>

#include "dtrain/status.h"
#include "dtrain/timer.h"

typedef struct {
    FILE *out;        /* progress/summary stream or NULL */
    FILE *log;        /* JSONL log or NULL */
    int tty, quiet;
    int bar_shown;    /* a progress bar is on the terminal's current line */
    double start;     /* dt_report_now() at open */
    double last_print;
    void (*on_record)(void *ctx, const char *json); /* every record as it is logged (dt_train_opts) */
    void *record_ctx;
} dt_report;

/* append (a resumed run): an existing log is continued, not truncated: a
 * last line torn by a crash is dropped, and elapsed_s goes on from the
 * log's last value (start is set back by it). */
dt_status dt_report_open(dt_report *r, FILE *out, const char *log_path, int quiet, int tty, int append);
/* One record of the JSONL log, built field by field: {"event":"TYPE", then
 * the fields in the order they are added, each number in the format its
 * call names. Readers parse these records (runlog.c, dtrain plot, resume,
 * tests, bench scripts): a record's keys, their order and their number
 * formats are its contract. */
enum { DT_REC_MAX = 16384 }; /* the longest record (paths escaped) is under 9 KiB */
typedef struct {
    char text[DT_REC_MAX]; /* the record so far, terminated */
    size_t len;
    int cut;               /* a field did not fit: dt_report_record refuses it */
} dt_rec;

void dt_rec_begin(dt_rec *r, const char *event);
void dt_rec_int(dt_rec *r, const char *key, long long v);
void dt_rec_uint(dt_rec *r, const char *key, unsigned long long v);
/* v with `decimals` digits after the point (printf's %.Nf). */
void dt_rec_fixed(dt_rec *r, const char *key, double v, int decimals);
/* v with `digits` significant digits (printf's %.Ng). */
void dt_rec_num(dt_rec *r, const char *key, double v, int digits);
/* s as a JSON string (escaped). */
void dt_rec_str(dt_rec *r, const char *key, const char *s);
void dt_rec_true(dt_rec *r, const char *key);
/* Closes r and appends it to the log. */
dt_status dt_report_record(dt_report *rep, dt_rec *r);
/* Redraws/prints progress at most every few seconds (always when force). */
void dt_report_progress(dt_report *r, int epoch, int epochs, int step, int steps_per_epoch,
                        double loss, double lr, double img_per_sec, double eta_s, int force);
/* A plain line on the progress stream (not in quiet mode), ending any bar. */
void dt_report_line(dt_report *r, const char *text);
/* The summary record, closed: last line of stdout and of the log. */
dt_status dt_report_summary(dt_report *rep, dt_rec *r);
dt_status dt_report_close(dt_report *r);

#endif

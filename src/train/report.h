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
} dt_report;

/* append (a resumed run): an existing log is continued, not truncated: a
 * last line torn by a crash is dropped, and elapsed_s goes on from the
 * log's last value (start is set back by it). */
dt_status dt_report_open(dt_report *r, FILE *out, const char *log_path, int quiet, int tty, int append);
/* Appends one JSON object (without newline) to the log. */
dt_status dt_report_log(dt_report *r, const char *json);
/* Redraws/prints progress at most every few seconds (always when force). */
void dt_report_progress(dt_report *r, int epoch, int epochs, int step, int steps_per_epoch,
                        double loss, double lr, double img_per_sec, double eta_s, int force);
/* A plain line on the progress stream (not in quiet mode), ending any bar. */
void dt_report_line(dt_report *r, const char *text);
/* The summary: last line of stdout and of the log. */
dt_status dt_report_summary(dt_report *r, const char *json);
dt_status dt_report_close(dt_report *r);

#endif

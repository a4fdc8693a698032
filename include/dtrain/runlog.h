/* A training run's JSONL log (dtrain train --log) read back as series: the
 * training loss of every `step` record and the test accuracy of every `eval`
 * record, each against the step number and against the wall time
 * (`elapsed_s`, seconds since the run started). Used by dtrain plot. */
#ifndef DTRAIN_RUNLOG_H
#define DTRAIN_RUNLOG_H

#include <stddef.h>

#include "dtrain/status.h"

/* n points in three parallel arrays, in log order. */
typedef struct {
    size_t n, cap;
    double *step;   /* (n) the record's "step" */
    double *time_s; /* (n) the record's "elapsed_s" */
    double *value;  /* (n) "loss" or "test_accuracy" */
} dt_series;

typedef struct {
    /* The file name without directory and extension; control characters
     * and invalid UTF-8 shown as '?', so it can be drawn and written as TSV. */
    char label[256];
    dt_series loss;     /* one point per step record */
    dt_series accuracy; /* one point per eval record */
    long cut_line;      /* the number of a last line left out as cut off (a killed run's), 0: none */
} dt_runlog;

/* Reads the log at path into *log (owned by the caller: dt_runlog_free).
 * Strict: every line must be one JSON object with a string "event"; step
 * records need numbers step, loss and elapsed_s, eval records step,
 * test_accuracy and elapsed_s; a resume record (a run continued from a
 * checkpoint at its "step") drops the points after that step, which the
 * resumed part redoes; other events (config, checkpoint, summary) are skipped; at least one step record is required.
 * A last line without its newline that is no record (a run killed while
 * writing it) is left out, its number in cut_line. Errors: DT_ERR_IO
 * (cannot open or read), DT_ERR_FORMAT ("PATH:LINE: message"), DT_ERR_NOMEM.
 * On failure *log is left empty. */
dt_status dt_runlog_read(dt_runlog *log, const char *path);

/* Frees the series; log may be NULL. */
void dt_runlog_free(dt_runlog *log);

#endif

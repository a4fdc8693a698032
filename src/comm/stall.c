/* When a wait for other ranks reports, when it gives up, and how it sleeps
 * between polls (dist.h). */
#include <stdio.h>
#include <time.h>

#include "dtrain/dist.h"

/* The shorter of the two periods that are set (0 if neither is). */
static double shorter(double a, double b) {
    if (a <= 0) return b;
    if (b <= 0) return a;
    return a < b ? a : b;
}

void dt_stall_clock_start(dt_stall_clock *k, const dt_stall *stall, double now) {
    static const dt_stall never = {0, 0, NULL, NULL};
    if (!stall) stall = &never;
    k->stall = stall;
    k->start = k->last_poll = now;
    k->next_tick = now + shorter(stall->report, stall->abort) / 4;
    k->next_report = now + stall->report;
}

dt_status dt_stall_clock_poll(dt_stall_clock *k, double now, dt_stall_fn who, void *ctx) {
    const dt_stall *st = k->stall;
    double tick = shorter(st->report, st->abort) / 4;
    /* Polls come every millisecond or so; a longer gap means this rank was
     * not running (stopped, suspended): that time was not spent waiting. */
    double gap = now - k->last_poll;
    k->last_poll = now;
    if (gap > 1 && gap > tick) {
        k->start += gap;
        k->next_tick += gap;
        k->next_report += gap;
    }
    if (!who || tick <= 0 || now < k->next_tick) return DT_OK;
    k->next_tick = now + tick;
    int over = st->abort > 0 && now - k->start >= st->abort;
    int due = st->report > 0 && now >= k->next_report;
    char line[768] = "";
    who(ctx, now - k->start, over || due, line, sizeof line);
    if (over) {
        char full[1024];
        snprintf(full, sizeof full, "%s; giving up after --stall-abort %g s: ending the job", line, st->abort);
        if (st->give_up) st->give_up(st->ctx, full);
        return dt_fail(DT_ERR_STALLED, "%s", full);
    }
    if (due) {
        fprintf(stderr, "%s\n", line);
        k->next_report = now + st->report;
    }
    return DT_OK;
}

void dt_backoff_sleep(dt_backoff *b) {
    struct timespec ts = {b->ns / 1000000000L, b->ns % 1000000000L};
    nanosleep(&ts, NULL);
    if (b->ns < b->hi) b->ns = b->ns * 2 < b->hi ? b->ns * 2 : b->hi;
}

#include "sweep_report.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/json.h"
#include "dtrain/mem.h"

static const char *const state_names[] = {"ok", "failed", "skipped"};

/* A value as the train flag parser read it is a number, but not always in
 * JSON's syntax ("+5", ".5", "0x10"): those are written as %.17g. */
static int json_number(const char *s) {
    if (*s == '-') s++;
    if (*s == '0') s++;
    else if (isdigit((unsigned char)*s)) while (isdigit((unsigned char)*s)) s++;
    else return 0;
    if (*s == '.') {
        if (!isdigit((unsigned char)*++s)) return 0;
        while (isdigit((unsigned char)*s)) s++;
    }
    if (*s == 'e' || *s == 'E') {
        if (*++s == '+' || *s == '-') s++;
        if (!isdigit((unsigned char)*s)) return 0;
        while (isdigit((unsigned char)*s)) s++;
    }
    return *s == '\0';
}

/* {"lr":0.05,"batch":64,"lr-scaling":"linear"} of trial t. */
static void grid_json(char *buf, size_t cap, const cli_grid *g, long t) {
    size_t used = (size_t)snprintf(buf, cap, "{");
    for (int i = 0; i < g->naxes && used < cap; i++) {
        const char *v = cli_grid_value(g, t, i);
        char val[128];
        if (!g->axes[i].numeric) {
            char esc[96];
            snprintf(val, sizeof val, "\"%s\"", dt_json_escape(esc, sizeof esc, v));
        } else if (json_number(v)) {
            snprintf(val, sizeof val, "%s", v);
        } else {
            snprintf(val, sizeof val, "%.17g", strtod(v, NULL));
        }
        used += (size_t)snprintf(buf + used, cap - used, "%s\"%s\":%s", i ? "," : "", g->axes[i].key, val);
    }
    if (used < cap) snprintf(buf + used, cap - used, "}");
}

/* A metric, or null when the trial has none. */
static const char *metric(char *buf, size_t cap, const cli_trial *t, double v, const char *fmt) {
    if (t->state != TRIAL_OK) return "null";
    snprintf(buf, cap, fmt, v);
    return buf;
}

/* A parameter-server metric, or null when the trial ran none. */
static const char *ps_metric(char *buf, size_t cap, const cli_trial *t, double v, const char *fmt) {
    if (!t->has_staleness) return "null";
    return metric(buf, cap, t, v, fmt);
}

/* "\"ps-async\"", or null for a trial whose flags were not read. */
static const char *mode_json(char *buf, size_t cap, const cli_trial *t) {
    if (!t->mode[0]) return "null";
    snprintf(buf, cap, "\"%s\"", t->mode);
    return buf;
}

dt_status cli_sweep_write_jsonl(FILE *f, const char *path, const cli_grid *g, const cli_trial *t, long n) {
    for (long i = 0; i < n; i++) {
        char grid[1024], err[600] = "null", esc[560], m[7][32], steps[32], wall[32] = "null", mode[32];
        grid_json(grid, sizeof grid, g, t[i].trial);
        if (t[i].state != TRIAL_OK) snprintf(err, sizeof err, "\"%s\"", dt_json_escape(esc, sizeof esc, t[i].error));
        if (t[i].state != TRIAL_SKIPPED) snprintf(wall, sizeof wall, "%.2f", t[i].wall_s);
        if (fprintf(f,
                    "{\"trial\":%ld,\"grid\":%s,\"mode\":%s,\"status\":\"%s\",\"error\":%s,"
                    "\"test_accuracy\":%s,\"test_loss\":%s,\"train_loss\":%s,\"images_per_sec\":%s,"
                    "\"staleness_mean\":%s,\"staleness_max\":%s,\"max_clock_gap\":%s,\"wall_s\":%s,"
                    "\"steps\":%s,\"group\":%d,\"ranks\":%d}\n",
                    t[i].trial + 1, grid, mode_json(mode, sizeof mode, &t[i]), state_names[t[i].state], err,
                    metric(m[0], sizeof m[0], &t[i], t[i].test_accuracy, "%.4f"),
                    metric(m[1], sizeof m[1], &t[i], t[i].test_loss, "%.4f"),
                    metric(m[2], sizeof m[2], &t[i], t[i].train_loss, "%.4f"),
                    metric(m[3], sizeof m[3], &t[i], t[i].images_per_sec, "%.1f"),
                    ps_metric(m[4], sizeof m[4], &t[i], t[i].staleness_mean, "%.3f"),
                    ps_metric(m[5], sizeof m[5], &t[i], t[i].staleness_max, "%.0f"),
                    ps_metric(m[6], sizeof m[6], &t[i], (double)t[i].max_clock_gap, "%.0f"), wall,
                    metric(steps, sizeof steps, &t[i], (double)t[i].steps, "%.0f"), t[i].group,
                    t[i].ranks) < 0)
            return dt_fail(DT_ERR_IO, "--out %s: write failed: %s", path, strerror(errno));
    }
    if (fflush(f) != 0) return dt_fail(DT_ERR_IO, "--out %s: write failed: %s", path, strerror(errno));
    return DT_OK;
}

/* Successful trials first, best accuracy first; then failed, then skipped;
 * ties in trial order. */
static int by_result(const void *pa, const void *pb) {
    const cli_trial *a = *(const cli_trial *const *)pa, *b = *(const cli_trial *const *)pb;
    if (a->state != b->state) return a->state - b->state;
    if (a->state == TRIAL_OK && a->test_accuracy != b->test_accuracy)
        return a->test_accuracy > b->test_accuracy ? -1 : 1;
    return (a->trial > b->trial) - (a->trial < b->trial);
}

void cli_sweep_print_table(FILE *out, const cli_grid *g, const cli_trial *t, long n) {
    const cli_trial **order;
    if (dt_alloc_bytes((void **)&order, (size_t)n * sizeof *order, "sweep table") != DT_OK) {
        fprintf(out, "(no table: %s)\n", dt_last_error());
        return;
    }
    for (long i = 0; i < n; i++) order[i] = &t[i];
    qsort(order, (size_t)n, sizeof *order, by_result);
    int width[CLI_GRID_MAX_AXES];
    fprintf(out, "%5s", "trial");
    for (int a = 0; a < g->naxes; a++) {
        width[a] = (int)strlen(g->axes[a].key);
        for (int v = 0; v < g->axes[a].nvalues; v++) {
            int w = (int)strlen(g->axes[a].values[v]);
            if (w > width[a]) width[a] = w;
        }
        fprintf(out, "  %-*s", width[a], g->axes[a].key);
    }
    int ps = 0;
    for (long i = 0; i < n; i++) ps |= t[i].has_staleness;
    fprintf(out, "  %8s  %9s  %10s  %9s", "test_acc", "test_loss", "train_loss", "img/s");
    if (ps) fprintf(out, "  %8s  %7s  %9s", "lag_mean", "lag_max", "clock_gap");
    fprintf(out, "  %7s  status\n", "wall_s");
    for (long i = 0; i < n; i++) {
        const cli_trial *r = order[i];
        fprintf(out, "%5ld", r->trial + 1);
        for (int a = 0; a < g->naxes; a++) fprintf(out, "  %-*s", width[a], cli_grid_value(g, r->trial, a));
        if (r->state == TRIAL_OK)
            fprintf(out, "  %8.4f  %9.4f  %10.4f  %9.1f", r->test_accuracy, r->test_loss, r->train_loss,
                    r->images_per_sec);
        else
            fprintf(out, "  %8s  %9s  %10s  %9s", "-", "-", "-", "-");
        if (ps && r->state == TRIAL_OK && r->has_staleness)
            fprintf(out, "  %8.2f  %7.0f  %9ld", r->staleness_mean, r->staleness_max, r->max_clock_gap);
        else if (ps)
            fprintf(out, "  %8s  %7s  %9s", "-", "-", "-");
        if (r->state == TRIAL_OK)
            fprintf(out, "  %7.1f  ok\n", r->wall_s);
        else if (r->state == TRIAL_FAILED)
            fprintf(out, "  %7.1f  failed: %s\n", r->wall_s, r->error);
        else
            fprintf(out, "  %7s  skipped: %s\n", "-", r->error);
    }
    dt_free(order);
}

void cli_sweep_print_summary(FILE *out, const cli_grid *g, const cli_trial *t, long n, int ranks,
                             int ranks_per_trial, double wall_s) {
    long count[3] = {0, 0, 0};
    const cli_trial *best = NULL;
    for (long i = 0; i < n; i++) {
        count[t[i].state]++;
        if (t[i].state == TRIAL_OK && (!best || t[i].test_accuracy > best->test_accuracy)) best = &t[i];
    }
    char best_json[1200] = "null";
    if (best) {
        char grid[1024];
        grid_json(grid, sizeof grid, g, best->trial);
        snprintf(best_json, sizeof best_json, "{\"trial\":%ld,\"grid\":%s,\"test_accuracy\":%.4f}",
                 best->trial + 1, grid, best->test_accuracy);
    }
    fprintf(out,
            "{\"event\":\"sweep\",\"trials\":%ld,\"ok\":%ld,\"failed\":%ld,\"skipped\":%ld,\"ranks\":%d,"
            "\"ranks_per_trial\":%d,\"wall_s\":%.2f,\"best\":%s}\n",
            n, count[TRIAL_OK], count[TRIAL_FAILED], count[TRIAL_SKIPPED], ranks, ranks_per_trial, wall_s,
            best_json);
}

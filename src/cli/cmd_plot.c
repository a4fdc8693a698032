/* dtrain plot RUN.jsonl [RUN2.jsonl ...] -o FILE.svg|FILE.png: training loss
 * and test accuracy of one or more runs against step and wall time, in a
 * 2 x 2 grid, one colour per run. Needs no MPI (called before MPI_Init). */
#include <stdio.h>

#include "dtrain/opts.h"
#include "cli.h"
#include "dtrain/paths.h"
#include "dtrain/plot.h"
#include "dtrain/runlog.h"

#define MAX_RUNS 64

static const char plot_usage[] =
    "usage: dtrain plot RUN.jsonl [RUN2.jsonl ...] -o FILE.svg|FILE.png [flags]\n"
    "  draws training loss and test accuracy against step and against wall time\n"
    "  (4 panels), one curve per run, labelled with the log's file name without\n"
    "  its extension; the logs are those of dtrain train --log\n"
    "  -o FILE               the image: .svg or .png\n"
    "  --data-out F.tsv      also write every plotted point (panel, label, x, y)\n"
    "  --width N --height N  canvas size in pixels (SVG: points), default 1200 x 800\n";

/* The four panels: which series of a run each shows, against what. */
static const struct {
    const char *name, *title, *xlabel, *ylabel;
    int accuracy, time;
} panel_kinds[4] = {
    {"loss_vs_step", "training loss by step", "step", "loss", 0, 0},
    {"loss_vs_time", "training loss by wall time", "wall time (s)", "loss", 0, 1},
    {"accuracy_vs_step", "test accuracy by step", "step", "test accuracy", 1, 0},
    {"accuracy_vs_time", "test accuracy by wall time", "wall time (s)", "test accuracy", 1, 1},
};

static dt_status read_runs(dt_runlog *runs, const char **paths, int n) {
    for (int i = 0; i < n; i++) {
        dt_status s = dt_runlog_read(&runs[i], paths[i]);
        if (s != DT_OK) {
            while (i-- > 0) dt_runlog_free(&runs[i]);
            /* A missing or malformed log is this command's input, as a model
             * file is train's: a usage error (exit 2), not a runtime one. */
            return s == DT_ERR_NOMEM ? s : DT_ERR_USAGE;
        }
        if (runs[i].cut_line)
            fprintf(stderr, "dtrain plot: note: %s:%ld: the last line is cut off (a killed run's log?); left out\n",
                    paths[i], runs[i].cut_line);
    }
    return DT_OK;
}

/* "plot: wrote curves.png (PNG 1200 x 800: 2 runs, 420 loss and 5 accuracy
 * points) and curves.tsv" */
static void say_written(const dt_runlog *runs, int nruns, dt_plot_format fmt, const char *out, const char *data_out,
                        int width, int height) {
    size_t loss = 0, acc = 0;
    for (int r = 0; r < nruns; r++) loss += runs[r].loss.n, acc += runs[r].accuracy.n;
    printf("plot: wrote %s (%s %d x %d: %d run%s, %zu training-loss and %zu test-accuracy points)%s%s\n", out,
           fmt == DT_PLOT_PNG ? "PNG" : "SVG", width, height, nruns, nruns == 1 ? "" : "s", loss, acc,
           data_out ? " and the points to " : "", data_out ? data_out : "");
}

static dt_status draw(const dt_runlog *runs, int nruns, dt_plot_format fmt, const char *out,
                      const char *data_out, int width, int height) {
    const char *labels[MAX_RUNS];
    dt_plot_series series[4][MAX_RUNS];
    dt_plot_panel panels[4];
    for (int p = 0; p < 4; p++) {
        for (int r = 0; r < nruns; r++) {
            const dt_series *s = panel_kinds[p].accuracy ? &runs[r].accuracy : &runs[r].loss;
            series[p][r] = (dt_plot_series){r, panel_kinds[p].time ? s->time_s : s->step, s->value, s->n};
            labels[r] = runs[r].label;
        }
        panels[p] = (dt_plot_panel){panel_kinds[p].name, panel_kinds[p].title, panel_kinds[p].xlabel,
                                    panel_kinds[p].ylabel, series[p], nruns, panel_kinds[p].accuracy};
    }
    dt_plot_figure fig = {panels, 4, 2, labels, nruns};
    DT_TRY(dt_plot_write(&fig, fmt, width, height, out));
    return data_out ? dt_plot_write_tsv(&fig, data_out) : DT_OK;
}

/* Neither output may be a log or the other output; their folders are made. */
static dt_status check_paths(const char **logs, int nruns, const char *out, const char *data_out) {
    dt_path p[MAX_RUNS + 2];
    for (int i = 0; i < nruns; i++) p[i] = (dt_path){"RUN.jsonl", logs[i], "a log to plot", 0};
    p[nruns] = (dt_path){"-o", out, NULL, 0};
    p[nruns + 1] = (dt_path){"--data-out", data_out, NULL, 0};
    DT_TRY(dt_paths_check(p, nruns + 2));
    return dt_paths_make_parents(p, nruns + 2);
}

int cmd_plot(int argc, char **argv) {
    const char *out = NULL, *data_out = NULL;
    int width = 1200, height = 800, help = 0;
    dt_opt flags[] = {
        {"-o", DT_OPT_STR, &out, 0, 0, 0},
        {"--data-out", DT_OPT_STR, &data_out, 0, 0, 0},
        {"--width", DT_OPT_INT, &width, 300, 20000, 0},
        {"--height", DT_OPT_INT, &height, 200, 20000, 0},
        {"--help", DT_OPT_FLAG, &help, 0, 0, 0},
    };
    const cli_env env = {0, 1, 1, 0};
    const char *paths[MAX_RUNS];
    int nruns;
    dt_status s = dt_opts_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), paths, MAX_RUNS, &nruns);
    if (s == DT_OK && help) {
        fputs(plot_usage, stdout);
        return 0;
    }
    if (s == DT_OK && nruns == 0) s = dt_fail(DT_ERR_USAGE, "plot: no RUN.jsonl given (see dtrain plot --help)");
    if (s == DT_OK && !out) s = dt_fail(DT_ERR_USAGE, "plot: -o FILE.svg|FILE.png is required");
    dt_plot_format fmt;
    if (s == DT_OK) s = check_paths(paths, nruns, out, data_out);
    if (s == DT_OK) s = dt_plot_format_of(&fmt, out);
    dt_runlog runs[MAX_RUNS];
    if (s == DT_OK) s = read_runs(runs, paths, nruns);
    if (s != DT_OK) return cli_report(s, &env);
    s = draw(runs, nruns, fmt, out, data_out, width, height);
    if (s == DT_OK) say_written(runs, nruns, fmt, out, data_out, width, height);
    for (int i = 0; i < nruns; i++) dt_runlog_free(&runs[i]);
    return cli_report(s, &env);
}

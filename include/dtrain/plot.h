/* Line charts drawn with cairo (dtrain plot): a figure is a grid of panels,
 * each with a title, axes with ticks and numeric labels and one polyline
 * per series, under one legend for the whole figure. Written as SVG or PNG;
 * the same points can be written as TSV, so what was drawn can be checked.
 * Nothing here knows about training runs: the caller fills the panels. The
 * figure only points to the caller's arrays. */
#ifndef DTRAIN_PLOT_H
#define DTRAIN_PLOT_H

#include <stddef.h>

#include "dtrain/status.h"

typedef struct {
    int entry;           /* legend entry (and colour) of this series */
    const double *x, *y; /* (n) */
    size_t n;
} dt_plot_series;

typedef struct {
    const char *name;            /* short id for the TSV, e.g. "loss_vs_step" */
    const char *title, *xlabel, *ylabel;
    const dt_plot_series *series;
    int nseries;
    int y_fraction;              /* the values are fractions: keep the y axis within [0, 1] */
} dt_plot_panel;

typedef struct {
    const dt_plot_panel *panels;
    int npanels, cols;           /* panels fill rows of `cols`, left to right */
    const char *const *legend;   /* (nlegend) labels, UTF-8; entry i has colour i */
    int nlegend;
} dt_plot_figure;

typedef enum { DT_PLOT_SVG, DT_PLOT_PNG } dt_plot_format;

/* The format named by path's extension (.svg or .png, any case);
 * DT_ERR_USAGE naming the file otherwise. */
dt_status dt_plot_format_of(dt_plot_format *fmt, const char *path);

/* Draws fig on a width x height canvas (pixels for PNG, points for SVG) and
 * writes it to path. DT_ERR_IO naming path if it cannot be written (a partly
 * written file is removed); DT_ERR_FORMAT if a panel's values span more than
 * a double can hold. */
dt_status dt_plot_write(const dt_plot_figure *fig, dt_plot_format fmt, int width, int height,
                        const char *path);

/* Writes every point of every panel to path as TSV: the header
 * "panel<TAB>label<TAB>x<TAB>y", then one line per point with the numbers
 * as %.17g, which read back as the same doubles. Labels must not contain
 * tabs or newlines. DT_ERR_IO naming path on failure. */
dt_status dt_plot_write_tsv(const dt_plot_figure *fig, const char *path);

#endif

#include "dtrain/plot.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Matplotlib's "tab10": ten line colours that stay distinguishable, also
 * for most colour-blind readers. Entries past ten repeat them dashed. */
static const double palette[10][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
    {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
    {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}};

#define PI 3.14159265358979323846

/* Series this short get a dot on each point, so a single point (an eval
 * record of a one-epoch run) is visible at all. */
#define MARKER_MAX_POINTS 40

dt_status dt_plot_format_of(dt_plot_format *fmt, const char *path) {
    const char *dot = strrchr(path, '.');
    if (dot && strchr(dot, '/') == NULL) {
        if (strcasecmp(dot, ".svg") == 0) return *fmt = DT_PLOT_SVG, DT_OK;
        if (strcasecmp(dot, ".png") == 0) return *fmt = DT_PLOT_PNG, DT_OK;
    }
    return dt_fail(DT_ERR_USAGE, "%s: unknown image format (the name must end in .svg or .png)", path);
}

typedef struct {
    double x, y, w, h;
} rect;

/* Sizes in canvas units, scaled with the canvas. */
typedef struct {
    double font, pad, tick, line;
} metrics;

/* A linear axis: ticks k*step for k in [k0, k0 + nticks), lo/hi the first
 * and last tick, so the range ends on round numbers. */
typedef struct {
    double lo, hi, step, k0;
    int nticks;
} axis;

/* 1, 2 or 5 times a power of ten, at least raw. */
static double nice_step(double raw) {
    double e = pow(10, floor(log10(raw)));
    double f = raw / e;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * e;
}

/* An axis over [lo, hi] with about max_ticks ticks, kept within [0, 1] if
 * fraction (and the values are). */
static dt_status make_axis(axis *a, double lo, double hi, int max_ticks, int fraction,
                           const char *panel) {
    double mag = fmax(fabs(lo), fabs(hi));
    const int clamp = fraction && lo >= 0 && hi <= 1;
    if (!isfinite(hi - lo))
        return dt_fail(DT_ERR_FORMAT, "panel '%s': the values span more than can be plotted", panel);
    /* A flat series (or one point) gets a range around it, wide enough for
     * distinct round ticks at that magnitude. */
    if (hi - lo <= 1e-9 * mag) {
        double d = mag > 0 ? 0.05 * mag : 0.5;
        lo -= d;
        hi += d;
    }
    if (clamp) lo = fmax(lo, 0), hi = fmin(hi, 1);
    a->step = nice_step((hi - lo) / (max_ticks - 1));
    /* The slack keeps a bound that is a tick (1 / 0.02 = 50.000000000000007)
     * from gaining another one past it. */
    a->k0 = floor(lo / a->step + 1e-9);
    double k1 = ceil(hi / a->step - 1e-9);
    a->lo = a->k0 * a->step;
    a->hi = k1 * a->step;
    a->nticks = (int)(k1 - a->k0) + 1;
    return DT_OK;
}

static double axis_tick(const axis *a, int i) { return (a->k0 + i) * a->step; }

/* A tick's label: fixed-point with as many decimals as the step needs, or
 * exponent form for very large or small magnitudes. */
static void tick_label(char *buf, size_t cap, const axis *a, int i) {
    double mag = fmax(fabs(a->lo), fabs(a->hi));
    int step_exp = (int)floor(log10(a->step) + 1e-9);
    if (mag < 1e7 && step_exp >= -6) {
        snprintf(buf, cap, "%.*f", step_exp < 0 ? -step_exp : 0, axis_tick(a, i));
    } else {
        int digits = (int)floor(log10(mag)) - step_exp;
        snprintf(buf, cap, "%.*e", digits < 0 ? 0 : digits > 16 ? 16 : digits, axis_tick(a, i));
    }
}

/* Shows s at (x, y); (ax, ay) in [0, 1] is the point of the text's box that
 * lands there: (0, 0) top left, (0.5, 0.5) centre, (1, 1) bottom right. */
static void text_at(cairo_t *cr, const char *s, double x, double y, double ax, double ay) {
    cairo_text_extents_t te;
    cairo_font_extents_t fe;
    cairo_text_extents(cr, s, &te);
    cairo_font_extents(cr, &fe);
    cairo_move_to(cr, x - ax * te.x_advance, y + fe.ascent - ay * (fe.ascent + fe.descent));
    cairo_show_text(cr, s);
}

static double text_width(cairo_t *cr, const char *s) {
    cairo_text_extents_t te;
    cairo_text_extents(cr, s, &te);
    return te.x_advance;
}

/* Solid lines of this grey level (0 black) and width, and text in it. */
static void set_pen(cairo_t *cr, double gray, double width) {
    cairo_set_source_rgb(cr, gray, gray, gray);
    cairo_set_line_width(cr, width);
    cairo_set_dash(cr, NULL, 0, 0);
}

static void set_entry_style(cairo_t *cr, int entry, const metrics *m) {
    const double *c = palette[entry % 10];
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    cairo_set_line_width(cr, m->line);
    double dash[] = {4 * m->line, 2 * m->line};
    cairo_set_dash(cr, dash, entry >= 10 ? 2 : 0, 0);
}

/* Draws the legend across the top of the canvas, wrapped into rows;
 * returns its height. */
static double legend(cairo_t *cr, const dt_plot_figure *fig, double width, const metrics *m) {
    const double swatch = 2.5 * m->font, row_h = 1.6 * m->font;
    double x = m->pad, y = m->pad;
    for (int i = 0; i < fig->nlegend; i++) {
        double w = swatch + 0.5 * m->font + text_width(cr, fig->legend[i]) + 1.5 * m->font;
        if (x > m->pad && x + w > width - m->pad) {
            x = m->pad;
            y += row_h;
        }
        set_entry_style(cr, i, m);
        cairo_move_to(cr, x, y + row_h / 2);
        cairo_line_to(cr, x + swatch, y + row_h / 2);
        cairo_stroke(cr);
        set_pen(cr, 0, m->line);
        text_at(cr, fig->legend[i], x + swatch + 0.5 * m->font, y + row_h / 2, 0, 0.5);
        x += w;
    }
    return fig->nlegend ? y + row_h : m->pad;
}

/* The smallest and largest x and y over the panel's series; 0 if it has no points. */
static int panel_bounds(const dt_plot_panel *p, double lo[2], double hi[2]) {
    int any = 0;
    for (int s = 0; s < p->nseries; s++) {
        const dt_plot_series *ser = &p->series[s];
        for (size_t i = 0; i < ser->n; i++) {
            const double v[2] = {ser->x[i], ser->y[i]};
            for (int d = 0; d < 2; d++) {
                if (!any || v[d] < lo[d]) lo[d] = v[d];
                if (!any || v[d] > hi[d]) hi[d] = v[d];
            }
            any = 1;
        }
    }
    return any;
}

/* Where the data point (x, y) lands in the plot rectangle r. */
static void to_canvas(double *px, double *py, double x, double y, const axis *ax, const axis *ay,
                      rect r) {
    *px = r.x + (x - ax->lo) / (ax->hi - ax->lo) * r.w;
    *py = r.y + r.h - (y - ay->lo) / (ay->hi - ay->lo) * r.h;
}

static void draw_series(cairo_t *cr, const dt_plot_series *s, const axis *ax, const axis *ay,
                        rect r, const metrics *m) {
    double px, py;
    set_entry_style(cr, s->entry, m);
    for (size_t i = 0; i < s->n; i++) {
        to_canvas(&px, &py, s->x[i], s->y[i], ax, ay, r);
        if (i == 0)
            cairo_move_to(cr, px, py);
        else
            cairo_line_to(cr, px, py);
    }
    cairo_stroke(cr);
    if (s->n > MARKER_MAX_POINTS) return;
    for (size_t i = 0; i < s->n; i++) {
        to_canvas(&px, &py, s->x[i], s->y[i], ax, ay, r);
        cairo_new_sub_path(cr);
        cairo_arc(cr, px, py, 1.8 * m->line, 0, 2 * PI);
    }
    cairo_fill(cr);
}

/* Tick marks, grid lines and labels of one axis along the plot rectangle r. */
static void draw_ticks(cairo_t *cr, const axis *a, rect r, int vertical, const metrics *m) {
    char label[48];
    for (int i = 0; i < a->nticks; i++) {
        double f = (axis_tick(a, i) - a->lo) / (a->hi - a->lo);
        double px = vertical ? r.x : r.x + f * r.w, py = vertical ? r.y + r.h - f * r.h : r.y + r.h;
        set_pen(cr, 0.88, 0.5 * m->line); /* grid line */
        cairo_move_to(cr, px, py);
        cairo_line_to(cr, vertical ? r.x + r.w : px, vertical ? py : r.y);
        cairo_stroke(cr);
        set_pen(cr, 0, 0.7 * m->line);
        cairo_move_to(cr, px, py);
        cairo_line_to(cr, vertical ? px - m->tick : px, vertical ? py : py + m->tick);
        cairo_stroke(cr);
        tick_label(label, sizeof label, a, i);
        if (vertical)
            text_at(cr, label, px - 1.5 * m->tick, py, 1, 0.5);
        else
            text_at(cr, label, px, py + 1.5 * m->tick, 0.5, 0);
    }
}

/* How many ticks to aim for when `room` labels would fit: 3 to 10. */
static int tick_count(double room) { return room < 3 ? 3 : room > 10 ? 10 : (int)room; }

static dt_status draw_panel(cairo_t *cr, const dt_plot_panel *p, rect cell, const metrics *m) {
    set_pen(cr, 0, 0.7 * m->line);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
    text_at(cr, p->title, cell.x + cell.w / 2, cell.y + m->pad, 0.5, 0);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    double title_h = m->pad + 2 * m->font, xlabels_h = 1.5 * m->tick + 2.6 * m->font + m->pad;
    /* Room on the right for half of the last x tick's label. */
    rect r = {cell.x, cell.y + title_h, cell.w - m->pad - 2 * m->font, cell.h - title_h - xlabels_h};
    double lo[2], hi[2];
    if (!panel_bounds(p, lo, hi)) {
        cairo_rectangle(cr, r.x + m->pad, r.y, r.w - m->pad, r.h);
        cairo_stroke(cr);
        text_at(cr, "no data", r.x + r.w / 2, r.y + r.h / 2, 0.5, 0.5);
        return DT_OK;
    }
    axis ax, ay;
    DT_TRY(make_axis(&ay, lo[1], hi[1], tick_count(r.h / (3 * m->font)), p->y_fraction, p->name));
    /* The y labels' width decides where the plot starts, and so how many
     * x ticks fit. */
    double label_w = 0;
    char label[48];
    for (int i = 0; i < ay.nticks; i++) {
        tick_label(label, sizeof label, &ay, i);
        label_w = fmax(label_w, text_width(cr, label));
    }
    double left = m->pad + 1.8 * m->font + label_w + 1.5 * m->tick;
    r.x += left;
    r.w -= left;
    DT_TRY(make_axis(&ax, lo[0], hi[0], tick_count(r.w / (7 * m->font)), 0, p->name));
    draw_ticks(cr, &ay, r, 1, m);
    draw_ticks(cr, &ax, r, 0, m);
    text_at(cr, p->xlabel, r.x + r.w / 2, r.y + r.h + 1.5 * m->tick + 1.4 * m->font, 0.5, 0);
    cairo_save(cr);
    cairo_translate(cr, cell.x + m->pad, r.y + r.h / 2);
    cairo_rotate(cr, -PI / 2);
    text_at(cr, p->ylabel, 0, 0, 0.5, 0);
    cairo_restore(cr);
    set_pen(cr, 0, 0.7 * m->line);
    cairo_rectangle(cr, r.x, r.y, r.w, r.h);
    cairo_stroke(cr);
    /* The axes cover every point, so nothing needs clipping; series are drawn
     * last so that one lying on the frame stays visible. */
    for (int s = 0; s < p->nseries; s++) draw_series(cr, &p->series[s], &ax, &ay, r, m);
    return DT_OK;
}

static dt_status draw_figure(cairo_t *cr, const dt_plot_figure *fig, double width, double height) {
    /* Sizes are chosen for 1200 x 800 and scale with the smaller ratio. */
    double scale = fmin(width / 1200, height / 800);
    metrics m = {13 * scale, 10 * scale, 5 * scale, 1.5 * scale};
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, m.font);
    double top = legend(cr, fig, width, &m);
    int rows = (fig->npanels + fig->cols - 1) / fig->cols;
    double cell_w = (width - m.pad) / fig->cols, cell_h = (height - top) / rows;
    for (int i = 0; i < fig->npanels; i++) {
        rect cell = {i % fig->cols * cell_w, top + i / fig->cols * cell_h, cell_w, cell_h};
        DT_TRY(draw_panel(cr, &fig->panels[i], cell, &m));
    }
    return DT_OK;
}

/* Cairo writes through this into a FILE, keeping the first errno. */
typedef struct {
    FILE *f;
    int err;
} sink;

static cairo_status_t sink_write(void *closure, const unsigned char *data, unsigned int len) {
    sink *k = closure;
    if (fwrite(data, 1, len, k->f) == len) return CAIRO_STATUS_SUCCESS;
    if (!k->err) k->err = errno ? errno : EIO;
    return CAIRO_STATUS_WRITE_ERROR;
}

dt_status dt_plot_write(const dt_plot_figure *fig, dt_plot_format fmt, int width, int height,
                        const char *path) {
    sink k = {fopen(path, "wb"), 0};
    if (!k.f) return dt_fail(DT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    cairo_surface_t *surface =
        fmt == DT_PLOT_SVG ? cairo_svg_surface_create_for_stream(sink_write, &k, width, height)
                           : cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    /* cairo_create never returns NULL: errors (also the surface's) stick to
     * the context and make later calls no-ops, so one check at the end sees them. */
    cairo_t *cr = cairo_create(surface);
    dt_status s = draw_figure(cr, fig, width, height);
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (s == DT_OK && cs == CAIRO_STATUS_SUCCESS && fmt == DT_PLOT_PNG)
        cs = cairo_surface_write_to_png_stream(surface, sink_write, &k);
    cairo_surface_finish(surface); /* the SVG surface writes its document here */
    if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (fclose(k.f) != 0 && !k.err) k.err = errno;
    if (s == DT_OK && k.err)
        s = dt_fail(DT_ERR_IO, "%s: write failed: %s", path, strerror(k.err));
    else if (s == DT_OK && cs != CAIRO_STATUS_SUCCESS)
        s = dt_fail(cs == CAIRO_STATUS_NO_MEMORY ? DT_ERR_NOMEM : DT_ERR_INTERNAL, "%s: cairo: %s",
                    path, cairo_status_to_string(cs));
    if (s != DT_OK) remove(path);
    return s;
}

dt_status dt_plot_write_tsv(const dt_plot_figure *fig, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return dt_fail(DT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    int ok = fprintf(f, "panel\tlabel\tx\ty\n") >= 0;
    for (int p = 0; ok && p < fig->npanels; p++) {
        const dt_plot_panel *panel = &fig->panels[p];
        for (int s = 0; ok && s < panel->nseries; s++) {
            const dt_plot_series *ser = &panel->series[s];
            for (size_t i = 0; ok && i < ser->n; i++)
                ok = fprintf(f, "%s\t%s\t%.17g\t%.17g\n", panel->name, fig->legend[ser->entry],
                             ser->x[i], ser->y[i]) >= 0;
        }
    }
    int err = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) ok = 0, err = errno;
    if (ok) return DT_OK;
    remove(path);
    return dt_fail(DT_ERR_IO, "%s: write failed: %s", path, strerror(err));
}

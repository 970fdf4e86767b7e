/*
 * timeline_svg.c: a residency timeline as SVG, written by hand (no library).
 * Main entry point: `vs_timeline_svg_write`. Two users: `vramshim plot`
 * (tools/plot.c, a trace recorded by the shim) and the policy benchmark's
 * replays (bench/policy/svg.c).
 *
 * Each panel is one timeline (say a trace replayed under one eviction order
 * at one limit, or one recorded run). Its upper plot
 * stacks the live bytes by tier (device, host, disk) so that the top edge is
 * the bytes that exist somewhere, draws the bytes held in host copies as a
 * dashed line (the pinned pool a real run needs, clean copies of resident
 * allocations included) and the limit as a dashed rule. The strip below has
 * one tick per interval: restores (H2D) up, write-backs on eviction (D2H)
 * down, with their bytes in a tooltip (`<title>`) and in `data-bytes`.
 *
 * A timeline has one sample per operation; more operations than columns are
 * drawn as columns: the state at a column's last operation, the transfers
 * of all of them summed. The element classes and ids are what
 * check_svg.py reads; keep them in step.
 */
#include "timeline_svg.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define COLUMNS_MAX 600

/* Page and panel geometry, in SVG user units (pixels). */
#define PAGE_WIDTH 1100.0
#define PAGE_HEAD 34.0
#define PANEL_HEIGHT 450.0
#define PLOT_LEFT 90.0
#define PLOT_RIGHT 30.0
#define PLOT_TOP 84.0    /* below the panel's title, subtitle and legend */
#define PLOT_HEIGHT 220.0
#define STRIP_GAP 14.0
#define STRIP_HEIGHT 90.0

#define COLOUR_DEVICE "#1f5fbf"
#define COLOUR_HOST "#e08a00"
#define COLOUR_DISK "#7a4fa0"
#define COLOUR_HOST_COPY "#6b4400"
#define COLOUR_H2D "#2a9d2a"
#define COLOUR_D2H "#d62728"

typedef struct unit_s {
    double scale;
    const char *name;
} unit_t;

/* The largest binary unit that `max` reaches. */
static unit_t byte_unit(double max)
{
    if (max >= 1024.0 * 1024 * 1024)
        return (unit_t){1024.0 * 1024 * 1024, "GiB"};
    if (max >= 1024.0 * 1024)
        return (unit_t){1024.0 * 1024, "MiB"};
    if (max >= 1024.0)
        return (unit_t){1024.0, "KiB"};
    return (unit_t){1.0, "B"};
}

static unit_t time_unit(double span_ns)
{
    if (span_ns >= 2e9)
        return (unit_t){1e9, "s"};
    if (span_ns >= 2e6)
        return (unit_t){1e6, "ms"};
    if (span_ns >= 2e3)
        return (unit_t){1e3, "\xc2\xb5s"};
    return (unit_t){1.0, "ns"};
}

/* A step of 1, 2 or 5 times a power of ten giving about `ticks` intervals
 * over [0, range]; `range` > 0. */
static double nice_step(double range, int ticks)
{
    double raw = range / ticks, mag = 1.0;
    while (mag * 10 <= raw)
        mag *= 10;
    while (mag > raw)
        mag /= 10;
    double norm = raw / mag;
    return (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
}

void vs_timeline_format_bytes(char *buf, size_t cap, double bytes)
{
    unit_t u = byte_unit(bytes);
    double v = bytes / u.scale;
    snprintf(buf, cap, v >= 100 || u.scale == 1.0 ? "%.0f %s" : "%.1f %s", v, u.name);
}

/* Text content or an attribute value, escaped. */
static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            /* XML 1.0 has no place for other control characters. */
            if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n')
                fputc('?', f);
            else
                fputc(*s, f);
        }
    }
}

bool vs_timeline_svg_has_time(const vs_timeline_sample_t *samples, size_t count)
{
    if (!samples || count < 2)
        return false;
    for (size_t i = 1; i < count; i++)
        if (samples[i].time_ns < samples[i - 1].time_ns)
            return false;
    return samples[count - 1].time_ns > samples[0].time_ns;
}

/* One column of the plot. */
typedef struct column_s {
    const vs_timeline_sample_t *state; /* its last operation's, or the column's before it */
    uint64_t h2d, d2h, restores, evictions;
    uint64_t first_seq, last_seq; /* operations in it, when `ops` > 0 */
    uint64_t ops;
} column_t;

typedef struct panel_geom_s {
    double top;          /* of the plot */
    double left, width;  /* of the plot and the strip */
    double height;       /* of the plot */
    double strip_top;
    double ymax;         /* bytes at the plot's top edge */
} panel_geom_t;

static double plot_y(const panel_geom_t *g, double bytes)
{
    return g->top + g->height * (1.0 - bytes / g->ymax);
}

static double column_x(const panel_geom_t *g, size_t c, size_t columns)
{
    return g->left + g->width * (double)c / (double)columns;
}

typedef enum series_e { SERIES_DEVICE, SERIES_HOST, SERIES_DISK, SERIES_COUNT } series_t;

static uint64_t stacked(const vs_timeline_sample_t *s, int upto)
{
    static const vs_timeline_sample_t zero;
    if (!s)
        s = &zero;
    uint64_t v = 0;
    if (upto > SERIES_DEVICE)
        v += s->device_bytes;
    if (upto > SERIES_HOST)
        v += s->host_bytes;
    if (upto > SERIES_DISK)
        v += s->disk_bytes;
    return v;
}

/* The stacked area of one tier, as a step outline: along its top edge left
 * to right, back along the tier below right to left. Runs of equal values
 * collapse to one step. */
static void put_area(FILE *f, const panel_geom_t *g, const column_t *col, size_t columns, int series,
                     const char *cls, const char *colour)
{
    fprintf(f, "<path class=\"area %s\" fill=\"%s\" fill-opacity=\"0.55\" stroke=\"%s\" "
               "stroke-width=\"0.8\" d=\"",
            cls, colour, colour);
    for (int edge = 0; edge < 2; edge++) {
        int upto = edge == 0 ? series + 1 : series;
        for (size_t k = 0; k < columns; k++) {
            size_t c = edge == 0 ? k : columns - 1 - k;
            double y = plot_y(g, (double)stacked(col[c].state, upto));
            double xa = column_x(g, edge == 0 ? c : c + 1, columns);
            double xb = column_x(g, edge == 0 ? c + 1 : c, columns);
            bool same_next = k + 1 < columns &&
                             stacked(col[edge == 0 ? c + 1 : c - 1].state, upto) ==
                                 stacked(col[c].state, upto);
            bool same_prev = k > 0 && stacked(col[edge == 0 ? c - 1 : c + 1].state, upto) ==
                                          stacked(col[c].state, upto);
            if (!same_prev)
                fprintf(f, "%s%.2f,%.2f ", edge == 0 && k == 0 ? "M" : "L", xa, y);
            if (!same_next)
                fprintf(f, "L%.2f,%.2f ", xb, y);
        }
    }
    fprintf(f, "Z\"/>\n");
}

static void put_host_copy_line(FILE *f, const panel_geom_t *g, const column_t *col, size_t columns)
{
    fprintf(f, "<polyline class=\"host-copies\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.2\" "
               "stroke-dasharray=\"5 3\" points=\"",
            COLOUR_HOST_COPY);
    for (size_t c = 0; c < columns; c++) {
        double y = plot_y(g, col[c].state ? (double)col[c].state->host_copy_bytes : 0.0);
        fprintf(f, "%.2f,%.2f %.2f,%.2f ", column_x(g, c, columns), y, column_x(g, c + 1, columns), y);
    }
    fprintf(f, "\"/>\n");
}

static void put_y_axis(FILE *f, const panel_geom_t *g, unit_t u, double step)
{
    fprintf(f, "<g class=\"y-axis\" font-size=\"11\" text-anchor=\"end\">\n");
    for (double v = 0; v <= g->ymax * (1 + 1e-9); v += step) {
        double y = plot_y(g, v);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#ddd\"/>\n", g->left,
                y, g->left + g->width, y);
        fprintf(f, "<text class=\"tick-label\" x=\"%.2f\" y=\"%.2f\">%.10g %s</text>\n", g->left - 6,
                y + 4, v / u.scale, u.name);
    }
    fprintf(f, "<text class=\"axis-label\" transform=\"translate(%.2f,%.2f) rotate(-90)\" "
               "text-anchor=\"middle\">bytes (%s)</text>\n</g>\n",
            g->left - 70, g->top + g->height / 2, u.name);
}

/* x ticks under the strip and faint verticals through the plot. `span` is
 * the axis's extent in its own units (operations or nanoseconds). */
static void put_x_axis(FILE *f, const panel_geom_t *g, double span, bool time)
{
    unit_t u = time ? time_unit(span) : (unit_t){1.0, ""};
    double step = nice_step(span / u.scale, 8) * u.scale;
    if (!time && step < 1.0)
        step = 1.0; /* operations are whole */
    double bottom = g->strip_top + STRIP_HEIGHT;
    fprintf(f, "<g class=\"x-axis\" font-size=\"11\" text-anchor=\"middle\">\n");
    for (double v = 0; v <= span * (1 + 1e-9); v += step) {
        double x = g->left + g->width * v / span;
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#eee\"/>\n", x,
                g->top, x, bottom);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#444\"/>\n", x,
                bottom, x, bottom + 4);
        fprintf(f, "<text class=\"tick-label\" x=\"%.2f\" y=\"%.2f\">%.10g%s%s</text>\n", x, bottom + 16,
                v / u.scale, time ? " " : "", u.name);
    }
    fprintf(f, "<text class=\"axis-label\" x=\"%.2f\" y=\"%.2f\">%s</text>\n</g>\n",
            g->left + g->width / 2, bottom + 32,
            time ? "time since the first operation (the trace's clock)" : "operation");
}

static void put_strip(FILE *f, const panel_geom_t *g, const column_t *col, size_t columns)
{
    uint64_t max = 0;
    for (size_t c = 0; c < columns; c++) {
        max = col[c].h2d > max ? col[c].h2d : max;
        max = col[c].d2h > max ? col[c].d2h : max;
    }
    double half = STRIP_HEIGHT / 2, base = g->strip_top + half;
    char scale[32];
    vs_timeline_format_bytes(scale, sizeof(scale), (double)max);
    fprintf(f, "<g class=\"transfers\" data-max-bytes=\"%" PRIu64 "\">\n", max);
    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
               "stroke=\"#888\"/>\n",
            g->left, g->strip_top, g->width, STRIP_HEIGHT);
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#888\"/>\n", g->left,
            base, g->left + g->width, base);
    fprintf(f, "<g font-size=\"11\" text-anchor=\"end\">"
               "<text class=\"tick-label\" x=\"%.2f\" y=\"%.2f\">H2D %s</text>"
               "<text class=\"tick-label\" x=\"%.2f\" y=\"%.2f\">0</text>"
               "<text class=\"tick-label\" x=\"%.2f\" y=\"%.2f\">D2H %s</text></g>\n",
            g->left - 6, g->strip_top + 9, scale, g->left - 6, base + 4, g->left - 6,
            g->strip_top + STRIP_HEIGHT - 2, scale);
    double width = g->width / (double)columns * 0.8;
    width = width < 1.0 ? 1.0 : width;
    for (size_t c = 0; c < columns && max; c++) {
        double x = column_x(g, c, columns) + g->width / (double)columns / 2;
        for (int dir = 0; dir < 2; dir++) {
            uint64_t bytes = dir == 0 ? col[c].h2d : col[c].d2h;
            if (!bytes)
                continue;
            double len = (double)bytes / (double)max * (half - 1);
            char text[32];
            vs_timeline_format_bytes(text, sizeof(text), (double)bytes);
            fprintf(f, "<line class=\"%s\" data-bytes=\"%" PRIu64 "\" x1=\"%.2f\" y1=\"%.2f\" "
                       "x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"%.2f\">"
                       "<title>operations %" PRIu64 "-%" PRIu64 ": %s %s (%s: %" PRIu64 ")</title>"
                       "</line>\n",
                    dir == 0 ? "h2d" : "d2h", bytes, x, base, x, dir == 0 ? base - len : base + len,
                    dir == 0 ? COLOUR_H2D : COLOUR_D2H, width, col[c].first_seq, col[c].last_seq,
                    dir == 0 ? "H2D" : "D2H", text, dir == 0 ? "restores" : "evictions",
                    dir == 0 ? col[c].restores : col[c].evictions);
        }
    }
    fprintf(f, "</g>\n");
}

static void put_legend(FILE *f, const vs_timeline_doc_t *doc, bool limit, double x, double y)
{
    const struct {
        const char *cls, *label, *colour;
        int shape; /* 0 area, 1 dashed line, 2 tick */
    } items[] = {
        {"device", "device (resident)", COLOUR_DEVICE, 0},
        {"host", "host (evicted)", COLOUR_HOST, 0},
        {"disk", doc->disk_label ? doc->disk_label : "disk (spilled)", COLOUR_DISK, 0},
        {"host-copies", doc->host_copy_label, COLOUR_HOST_COPY, 1},
        {"limit", limit ? "limit" : NULL, "#000", 1},
        {"h2d", "H2D restores", COLOUR_H2D, 2},
        {"d2h", doc->d2h_label ? doc->d2h_label : "D2H write-backs", COLOUR_D2H, 2},
    };
    fprintf(f, "<g class=\"legend\" font-size=\"11\">\n");
    for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
        if (!items[i].label)
            continue;
        fprintf(f, "<g class=\"legend-item %s\">", items[i].cls);
        if (items[i].shape == 0)
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"14\" height=\"10\" fill=\"%s\" "
                       "fill-opacity=\"0.55\" stroke=\"%s\"/>",
                    x, y - 9, items[i].colour, items[i].colour);
        else if (items[i].shape == 1)
            fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
                       "stroke-dasharray=\"5 3\" stroke-width=\"1.2\"/>",
                    x, y - 4, x + 14, y - 4, items[i].colour);
        else
            fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
                       "stroke-width=\"3\"/>",
                    x + 7, y - 10, x + 7, y + 1, items[i].colour);
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\">", x + 19, y);
        put_escaped(f, items[i].label);
        fprintf(f, "</text></g>\n");
        x += 19 + 6.2 * (double)strlen(items[i].label) + 16;
    }
    fprintf(f, "</g>\n");
}

static int put_panel(FILE *f, const vs_timeline_doc_t *doc, const vs_timeline_panel_t *p, bool time,
                     double y0)
{
    const vs_timeline_sample_t *tl = p->samples;
    size_t n = p->count;
    size_t columns = n < COLUMNS_MAX ? n : COLUMNS_MAX;
    uint64_t passes = p->passes ? p->passes : 1;

    fprintf(f, "<g class=\"panel\" id=\"panel-");
    put_escaped(f, p->id);
    fprintf(f, "\" data-policy=\"");
    put_escaped(f, p->id);
    fprintf(f, "\" data-limit-bytes=\"%" PRIu64 "\" data-h2d-bytes=\"%" PRIu64
               "\" data-d2h-bytes=\"%" PRIu64 "\" data-passes=\"%" PRIu64 "\" data-ops=\"%zu\" "
               "data-x=\"%s\">\n",
            p->limit, p->h2d, p->d2h, passes, n, time ? "time" : "op");
    fprintf(f, "<text class=\"panel-title\" x=\"%.2f\" y=\"%.2f\" font-size=\"15\" "
               "font-weight=\"bold\">",
            PLOT_LEFT, y0 + 22);
    put_escaped(f, p->title);
    fprintf(f, "</text>\n<text class=\"panel-subtitle\" x=\"%.2f\" y=\"%.2f\" font-size=\"12\" "
               "fill=\"#333\">",
            PLOT_LEFT, y0 + 40);
    put_escaped(f, p->subtitle);
    fprintf(f, "</text>\n");
    put_legend(f, doc, p->limit > 0, PLOT_LEFT, y0 + 62);
    if (columns == 0) {
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\">no operations to plot</text>\n</g>\n", PLOT_LEFT,
                y0 + PLOT_TOP + 20);
        return 0;
    }

    column_t *col = calloc(columns, sizeof(*col));
    if (!col)
        return -ENOMEM;
    double x0 = time ? (double)tl[0].time_ns : 0.0;
    double span = time ? (double)(tl[n - 1].time_ns - tl[0].time_ns) : (double)n;
    uint64_t top = p->limit;
    for (size_t i = 0; i < n; i++) {
        const vs_timeline_sample_t *s = &tl[i], *prev = i ? s - 1 : NULL;
        /* Operation i spans [i, i + 1) on the operation axis; on the clock
         * it sits at its time. */
        double xv = time ? (double)s->time_ns - x0 : (double)i;
        size_t c = (size_t)(xv / span * (double)columns);
        c = c >= columns ? columns - 1 : c;
        column_t *cc = &col[c];
        if (!cc->ops)
            cc->first_seq = s->seq;
        cc->last_seq = s->seq;
        cc->ops++;
        cc->state = s;
        cc->h2d += s->h2d - (prev ? prev->h2d : 0);
        cc->d2h += s->d2h - (prev ? prev->d2h : 0);
        cc->restores += s->restores - (prev ? prev->restores : 0);
        cc->evictions += s->evictions - (prev ? prev->evictions : 0);
        uint64_t live = stacked(s, SERIES_COUNT);
        top = live > top ? live : top;
        if (doc->host_copy_label)
            top = s->host_copy_bytes > top ? s->host_copy_bytes : top;
    }
    /* A column without an operation keeps the state of the one before. */
    for (size_t c = 1; c < columns; c++)
        if (!col[c].state)
            col[c].state = col[c - 1].state;

    unit_t u = byte_unit((double)top);
    double step = nice_step(top ? (double)top / u.scale : 1.0, 5) * u.scale;
    panel_geom_t g = {
        .top = y0 + PLOT_TOP,
        .left = PLOT_LEFT,
        .width = PAGE_WIDTH - PLOT_LEFT - PLOT_RIGHT,
        .height = PLOT_HEIGHT,
        .strip_top = y0 + PLOT_TOP + PLOT_HEIGHT + STRIP_GAP,
    };
    g.ymax = step * (double)(uint64_t)((double)(top ? top : 1) / step + 0.999999);

    put_y_axis(f, &g, u, step);
    put_x_axis(f, &g, span, time);
    static const char *const cls[SERIES_COUNT] = {"device", "host", "disk"};
    static const char *const colour[SERIES_COUNT] = {COLOUR_DEVICE, COLOUR_HOST, COLOUR_DISK};
    for (int s = 0; s < SERIES_COUNT; s++)
        put_area(f, &g, col, columns, s, cls[s], colour[s]);
    if (doc->host_copy_label)
        put_host_copy_line(f, &g, col, columns);
    if (p->limit > 0) {
        char limit_text[32];
        vs_timeline_format_bytes(limit_text, sizeof(limit_text), (double)p->limit);
        double ly = plot_y(&g, (double)p->limit);
        fprintf(f, "<line class=\"limit\" data-bytes=\"%" PRIu64 "\" x1=\"%.2f\" y1=\"%.2f\" "
                   "x2=\"%.2f\" y2=\"%.2f\" stroke=\"#000\" stroke-dasharray=\"6 4\"/>\n",
                p->limit, g.left, ly, g.left + g.width, ly);
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"11\" text-anchor=\"end\">limit %s</text>\n",
                g.left + g.width - 4, ly - 4, limit_text);
    }
    fprintf(f, "<rect class=\"plot-frame\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
               "fill=\"none\" stroke=\"#888\"/>\n",
            g.left, g.top, g.width, g.height);
    put_strip(f, &g, col, columns);
    fprintf(f, "</g>\n");
    free(col);
    return 0;
}

int vs_timeline_svg_write(FILE *f, const vs_timeline_doc_t *doc, const vs_timeline_panel_t *panels,
                          size_t n_panels)
{
    if (n_panels == 0)
        return -EINVAL;
    for (size_t p = 0; p < n_panels; p++)
        if (!panels[p].samples && panels[p].count)
            return -EINVAL;
    bool has_time = vs_timeline_svg_has_time(panels[0].samples, panels[0].count);
    bool time = doc->x == VS_TIMELINE_X_TIME || (doc->x == VS_TIMELINE_X_AUTO && has_time);
    if (time && !has_time)
        return -EINVAL;
    double height = PAGE_HEAD + PANEL_HEIGHT * (double)n_panels;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n<title>",
            PAGE_WIDTH, height, PAGE_WIDTH, height);
    put_escaped(f, doc->title);
    fprintf(f, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text id=\"title\" x=\"10\" y=\"22\" font-size=\"16\">");
    put_escaped(f, doc->heading);
    fprintf(f, "</text>\n");
    int rc = 0;
    for (size_t p = 0; p < n_panels && rc == 0; p++)
        rc = put_panel(f, doc, &panels[p], time, PAGE_HEAD + PANEL_HEIGHT * (double)p);
    fprintf(f, "</svg>\n");
    return rc;
}

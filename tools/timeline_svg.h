/*
 * timeline_svg.h: renders residency timelines as a hand-written SVG plot,
 * one panel per timeline: where the live bytes are (device, host, disk,
 * stacked), optionally the host copies, the limit, and a tick per interval
 * for the bytes restored (H2D) and written back (D2H).
 *
 * Used by `vramshim plot` (a trace the shim recorded) and by the policy
 * benchmark (bench/policy/svg.c: replays of a trace).
 */
#ifndef VS_TIMELINE_SVG_H
#define VS_TIMELINE_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One sample per operation: where the live bytes are once the operation's
 * allocations are resident, in the tiers the shim's snapshot names (device,
 * host, disk), and the traffic so far. */
typedef struct vs_timeline_sample_s {
    uint64_t seq;             /* the operation's number in the trace */
    uint64_t time_ns;         /* the trace's time of its first use */
    uint64_t device_bytes;    /* resident */
    uint64_t host_bytes;      /* evicted, contents held on the host */
    uint64_t disk_bytes;      /* evicted to disk */
    uint64_t host_copy_bytes; /* every host copy, also of clean allocations back on the device */
    uint64_t h2d;             /* cumulative bytes */
    uint64_t d2h;             /* cumulative bytes */
    uint64_t restores;        /* cumulative: allocations with contents brought back */
    uint64_t evictions;       /* cumulative: allocations evicted, clean or not */
} vs_timeline_sample_t;

/* What the x axis counts. AUTO takes the samples' times when they never go
 * backwards and span more than zero, else the operation numbers. */
typedef enum vs_timeline_x_e {
    VS_TIMELINE_X_AUTO,
    VS_TIMELINE_X_OP,
    VS_TIMELINE_X_TIME,
} vs_timeline_x_t;

typedef struct vs_timeline_doc_s {
    const char *title;      /* the document's <title> */
    const char *heading;    /* the line above the panels */
    const char *disk_label; /* the legend's label for the disk tier */
    /* The legend's label for the host-copy line; NULL: the line is not drawn
     * (the timeline does not know its host copies). */
    const char *host_copy_label;
    const char *d2h_label; /* the legend's label for D2H ticks; NULL: "D2H write-backs" */
    vs_timeline_x_t x;
} vs_timeline_doc_t;

typedef struct vs_timeline_panel_s {
    const char *id;       /* element id "panel-<id>" and `data-policy`: [A-Za-z0-9_-] */
    const char *title;    /* plain text (escaped here) */
    const char *subtitle; /* plain text */
    const vs_timeline_sample_t *samples;
    size_t count;
    uint64_t limit;    /* bytes; 0: no limit line */
    uint64_t h2d, d2h; /* totals, for the panel's data attributes */
    uint64_t passes;   /* repeats of a main loop; 1 when not known */
} vs_timeline_panel_t;

/* Whether the samples' times can serve as the x axis (see AUTO). */
bool vs_timeline_svg_has_time(const vs_timeline_sample_t *samples, size_t count);

/* "1.5 GiB", "512 B": the units the axes use. */
void vs_timeline_format_bytes(char *buf, size_t cap, double bytes);

/* Writes the whole document to `f`. Returns 0, -EINVAL (no panel, a panel
 * without samples but a count, or X_TIME asked of samples without times) or
 * -ENOMEM. Write errors show in `ferror(f)`. */
int vs_timeline_svg_write(FILE *f, const vs_timeline_doc_t *doc, const vs_timeline_panel_t *panels,
                          size_t n_panels);

#endif

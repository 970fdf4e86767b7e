/*
 * svg.h: renders replay timelines as a hand-written SVG plot, one panel per
 * eviction order: where the live bytes are (device, host, disk, stacked),
 * the host copies, the limit, and a tick per interval for the bytes restored
 * (H2D) and written back (D2H).
 */
#ifndef VS_BENCH_SVG_H
#define VS_BENCH_SVG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "replay.h"

/* What the x axis counts. AUTO takes the trace's times when they never go
 * backwards and span more than zero, else the operation numbers. */
typedef enum vs_bench_svg_x_e {
    VS_BENCH_SVG_X_AUTO,
    VS_BENCH_SVG_X_OP,
    VS_BENCH_SVG_X_TIME,
} vs_bench_svg_x_t;

typedef struct vs_bench_svg_doc_s {
    const char *trace;  /* its name, or the file it was read from */
    unsigned limit_pct; /* of `peak` */
    uint64_t limit;     /* bytes */
    uint64_t peak;      /* bytes: the largest set of live allocations */
    uint64_t passes;    /* repeats of the main loop, for the per-pass figures */
    vs_bench_svg_x_t x;
} vs_bench_svg_doc_t;

typedef struct vs_bench_svg_panel_s {
    const char *policy;           /* the eviction order's name */
    const vs_bench_result_t *res; /* replayed with its timeline */
} vs_bench_svg_panel_t;

/* Whether the timeline's times can serve as the x axis (see AUTO). */
bool vs_bench_svg_has_time(const vs_bench_result_t *res);

/* Writes the whole document to `f`. Returns 0, -EINVAL (no panel, a panel
 * without a timeline, or X_TIME asked of a trace without times) or -ENOMEM.
 * Write errors show in `ferror(f)`. */
int vs_bench_svg_write(FILE *f, const vs_bench_svg_doc_t *doc, const vs_bench_svg_panel_t *panels,
                       size_t n_panels);

#endif

/*
 * svg.h: the replay timeline as SVG, one panel per eviction order: the
 * benchmark's titles and figures around tools/timeline_svg.h's renderer.
 */
#ifndef VS_BENCH_SVG_H
#define VS_BENCH_SVG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "replay.h"

typedef vs_timeline_x_t vs_bench_svg_x_t;
#define VS_BENCH_SVG_X_AUTO VS_TIMELINE_X_AUTO
#define VS_BENCH_SVG_X_OP VS_TIMELINE_X_OP
#define VS_BENCH_SVG_X_TIME VS_TIMELINE_X_TIME

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

/* Writes the whole document to `f`. Returns 0, -EINVAL (no panel, a panel
 * without a timeline, or X_TIME asked of a trace without times) or -ENOMEM.
 * Write errors show in `ferror(f)`. */
int vs_bench_svg_write(FILE *f, const vs_bench_svg_doc_t *doc, const vs_bench_svg_panel_t *panels,
                       size_t n_panels);

#endif

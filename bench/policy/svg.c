/*
 * svg.c: the replay timeline as SVG (`policy_replay --svg`). Main entry
 * point: `vs_bench_svg_write`.
 *
 * One panel per eviction order replayed at one limit; the drawing is
 * tools/timeline_svg.c's. Here: the titles check_svg.py reads (the trace,
 * "policy NAME", "limit N%") and the per-pass figures.
 */
#include "svg.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_MAX 512

/* A trace read from a file is named by its path: titles show the file's
 * name only. */
static const char *display_name(const char *trace)
{
    const char *slash = strrchr(trace, '/');
    return slash && slash[1] ? slash + 1 : trace;
}

int vs_bench_svg_write(FILE *f, const vs_bench_svg_doc_t *doc, const vs_bench_svg_panel_t *panels,
                       size_t n_panels)
{
    if (n_panels == 0)
        return -EINVAL;
    char title[TEXT_MAX], heading[TEXT_MAX], limit_text[32], peak_text[32];
    vs_timeline_format_bytes(limit_text, sizeof(limit_text), (double)doc->limit);
    vs_timeline_format_bytes(peak_text, sizeof(peak_text), (double)doc->peak);
    uint64_t passes = doc->passes ? doc->passes : 1;

    size_t used = (size_t)snprintf(title, sizeof(title), "policy replay: %s, ", doc->trace);
    for (size_t p = 0; p < n_panels && used < sizeof(title); p++)
        used += (size_t)snprintf(title + used, sizeof(title) - used, "%s%s", p ? "/" : "",
                                 panels[p].policy);
    if (used < sizeof(title))
        snprintf(title + used, sizeof(title) - used, ", limit %u%%", doc->limit_pct);
    snprintf(heading, sizeof(heading),
             "Replay of %s at a limit of %u%% of its peak live bytes: where the bytes are, and "
             "what moves",
             display_name(doc->trace), doc->limit_pct);

    vs_timeline_panel_t *out = calloc(n_panels, sizeof(*out));
    char (*titles)[2][TEXT_MAX] = calloc(n_panels, sizeof(*titles));
    int rc = -ENOMEM;
    if (!out || !titles)
        goto out;
    for (size_t p = 0; p < n_panels; p++) {
        const vs_bench_result_t *res = panels[p].res;
        char h2d_text[32], d2h_text[32];
        vs_timeline_format_bytes(h2d_text, sizeof(h2d_text), (double)res->h2d / (double)passes);
        vs_timeline_format_bytes(d2h_text, sizeof(d2h_text), (double)res->d2h / (double)passes);
        snprintf(titles[p][0], TEXT_MAX, "%s \xc2\xb7 policy %s \xc2\xb7 limit %u%% of peak = %s (peak %s)",
                 display_name(doc->trace), panels[p].policy, doc->limit_pct, limit_text, peak_text);
        snprintf(titles[p][1], TEXT_MAX,
                 "per pass (%" PRIu64 " passes): H2D %s, D2H %s; in all %" PRIu64
                 " restores, %" PRIu64 " evictions over %" PRIu64 " operations",
                 passes, h2d_text, d2h_text, res->restores, res->evictions, res->ops);
        out[p] = (vs_timeline_panel_t){
            .id = panels[p].policy,
            .title = titles[p][0],
            .subtitle = titles[p][1],
            .samples = res->timeline,
            .count = (size_t)res->ops,
            .limit = doc->limit,
            .h2d = res->h2d,
            .d2h = res->d2h,
            .passes = passes,
        };
    }
    vs_timeline_doc_t tdoc = {
        .title = title,
        .heading = heading,
        .disk_label = "disk (none in replay)",
        .host_copy_label = "host copies held",
        .x = doc->x,
    };
    rc = vs_timeline_svg_write(f, &tdoc, out, n_panels);
out:
    free(out);
    free(titles);
    return rc;
}

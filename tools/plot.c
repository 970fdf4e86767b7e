/* plot.c: `vramshim plot TRACE -o FILE`, a `VRAMSHIM_TRACE` recording
 * (policy/trace.h's format) drawn as an SVG timeline (timeline_svg.c) or
 * written as a Chrome trace-event JSON document for Perfetto and
 * chrome://tracing.
 *
 * Main entry point: `vs_tool_plot`. The trace is replayed once
 * (`vs_plot_replay`): every allocation's size and place is followed through
 * its `A`, `R` and `F` lines, and each operation (the `U` lines of one
 * `seq`) gives one sample of where the live bytes are. What a v1 trace
 * holds bounds what can be drawn, and the output says so rather than
 * invent: operations carry the time they were issued, not how long they
 * ran; `R` lines carry no time, so the restores and evictions between two
 * operations share the interval between them in proportion to their bytes;
 * an eviction is counted as a write-back of its bytes (a clean eviction
 * copies nothing, and the trace does not tell the two apart); an
 * allocation placed on the host when it was made (no room on the device)
 * has no line saying so: it is known by its first `R` line being a restore
 * (`vs_plot_placements`), and one never used stays counted on the device;
 * its first mapping counts as a restore of its bytes; spills to
 * disk are not recorded, so the disk tier stays empty; the limit is not in
 * the trace (`--limit`).
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "dump.h"
#include "timeline_svg.h"
#include "trace.h"

static const char vs_usage_plot[] =
    "usage: vramshim plot TRACE -o FILE [--format svg|chrome] [--limit SIZE] [--x auto|op|time]\n"
    "\n"
    "Draws a trace recorded with 'vramshim run --trace TRACE' (VRAMSHIM_TRACE).\n"
    "svg: a timeline of the bytes on the device, in host memory and on disk, the\n"
    "limit, and the bytes restored (H2D) and evicted (D2H). chrome: a trace-event\n"
    "JSON document for Perfetto (ui.perfetto.dev) and chrome://tracing: a track per\n"
    "stream with the operations issued on it, a track per copy direction with the\n"
    "restores and evictions, and counters for the bytes in each tier.\n"
    "\n"
    "  -o, --output FILE  where to write ('-': standard output)\n"
    "  --format FORMAT    svg (default) or chrome\n"
    "  --limit SIZE       the limit to draw (10G, 256M, 1073741824): the trace does\n"
    "                     not record it\n"
    "  --x AXIS           svg x axis: time (the trace's clock), op (operation\n"
    "                     numbers) or auto (time when it runs forward; default)\n"
    "  -h, --help         this help\n";

/* One allocation as the replay follows it. */
typedef struct vs_plot_alloc_s {
    uint64_t id;
    uint64_t size;
    bool on_device;
    uint64_t ordinal; /* placements pass: which `A` line made it */
    bool decided;     /* placements pass: its first `R` line was seen */
    UT_hash_handle hh;
} vs_plot_alloc_t;

/* A restore or eviction waiting for the next operation, which bounds the
 * interval it is drawn in. */
typedef struct vs_plot_move_s {
    uint64_t id;
    uint64_t size;
    bool restore;
} vs_plot_move_t;

typedef struct vs_plot_s {
    FILE *out;
    bool chrome;
    bool first_event; /* chrome: no comma before the next event */
    vs_plot_alloc_t *allocs;
    uint8_t *starts_on_host; /* bit per `A` line, in order: placed on the host */
    uint64_t alloc_lines;    /* `A` lines read so far */
    vs_timeline_sample_t state; /* the running totals */
    vs_timeline_sample_t *samples;
    size_t count, cap;
    vs_plot_move_t *moves; /* since the last operation */
    size_t moves_count, moves_cap;
    uint64_t streams_seen[4]; /* bit per stream number < 256, for thread names */
    uint64_t t0;              /* the first operation's time */
    uint64_t last_time;       /* the latest operation's time */
    bool have_time;
    /* The operation being read (its U lines are consecutive). */
    bool op_open;
    vs_trace_event_t op;
    uint64_t op_allocs, op_bytes;
} vs_plot_t;

#define VS_PLOT_TID_H2D 1
#define VS_PLOT_TID_D2H 2
#define VS_PLOT_TID_STREAM0 10

/* Nanoseconds since the trace's first operation (0 before it). Chrome's
 * times are microseconds; they are written from these integers with all
 * three decimals (vs_plot_us), so a slice that ends where the next begins
 * prints the same number for both: rounding a start and a duration apart
 * could make slices laid end to end overlap by a nanosecond. */
static uint64_t vs_plot_ns(const vs_plot_t *p, uint64_t ns)
{
    return ns > p->t0 ? ns - p->t0 : 0;
}

/* `ns` written as microseconds, exactly. */
static void vs_plot_us(FILE *out, uint64_t ns)
{
    fprintf(out, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

static void vs_plot_event_start(vs_plot_t *p)
{
    fputs(p->first_event ? "\n" : ",\n", p->out);
    p->first_event = false;
}

static void vs_plot_counter(vs_plot_t *p, uint64_t time_ns)
{
    vs_plot_event_start(p);
    fputs("{\"name\":\"bytes\",\"ph\":\"C\",\"pid\":1,\"ts\":", p->out);
    vs_plot_us(p->out, vs_plot_ns(p, time_ns));
    fprintf(p->out,
            ",\"args\":{\"device\":%" PRIu64 ",\"host\":%" PRIu64 ",\"disk\":%" PRIu64 "}}",
            p->state.device_bytes, p->state.host_bytes, p->state.disk_bytes);
}

/* The part of `span` that `done` of `total` bytes take, in whole ns: the
 * same `done` always gives the same point, and more never gives less, so
 * slices cut at these points abut and never overlap. */
static uint64_t vs_plot_share(uint64_t span, uint64_t done, uint64_t total)
{
    double share = (double)span * (double)done / (double)total;
    return share >= (double)span ? span : (uint64_t)share;
}

/* Restores and evictions since the previous operation, laid end to end on
 * their copy direction's track over [from, to] in proportion to bytes. */
static void vs_plot_flush_moves(vs_plot_t *p, uint64_t from, uint64_t to)
{
    if (!p->chrome || p->moves_count == 0)
        goto out;
    for (int restore = 0; restore < 2; restore++) {
        uint64_t total = 0;
        for (size_t i = 0; i < p->moves_count; i++)
            if (p->moves[i].restore == (bool)restore)
                total += p->moves[i].size;
        uint64_t from_ns = vs_plot_ns(p, from), span = vs_plot_ns(p, to) - from_ns, done = 0;
        for (size_t i = 0; i < p->moves_count && total; i++) {
            const vs_plot_move_t *m = &p->moves[i];
            if (m->restore != (bool)restore)
                continue;
            uint64_t start = from_ns + vs_plot_share(span, done, total);
            done += m->size;
            uint64_t end = from_ns + vs_plot_share(span, done, total);
            vs_plot_event_start(p);
            fprintf(p->out,
                    "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":",
                    restore ? "restore" : "evict", restore ? "restore" : "eviction",
                    restore ? VS_PLOT_TID_H2D : VS_PLOT_TID_D2H);
            vs_plot_us(p->out, start);
            fputs(",\"dur\":", p->out);
            vs_plot_us(p->out, end - start);
            fprintf(p->out, ",\"args\":{\"allocation\":%" PRIu64 ",\"bytes\":%" PRIu64 "}}",
                    m->id, m->size);
        }
    }
out:
    p->moves_count = 0;
}

/* `array` (of `*cap` elements of `size` bytes, `count` in use) with room
 * for one more: itself, or grown (doubling, from `first`; new bytes zero).
 * NULL when out of memory, `array` left as it was. */
static void *vs_plot_reserve(void *array, size_t *cap, size_t count, size_t size, size_t first)
{
    if (array && count < *cap)
        return array;
    size_t grown_cap = *cap ? *cap * 2 : first;
    char *grown = realloc(array, grown_cap * size);
    if (!grown)
        return NULL;
    memset(grown + *cap * size, 0, (grown_cap - *cap) * size);
    *cap = grown_cap;
    return grown;
}

static int vs_plot_push_sample(vs_plot_t *p)
{
    void *room = vs_plot_reserve(p->samples, &p->cap, p->count, sizeof(*p->samples), 1024);
    if (!room)
        return -ENOMEM;
    p->samples = room;
    p->samples[p->count++] = p->state;
    return 0;
}

/* The operation whose U lines have all been read: its slice on its stream
 * (until `next_ns`, when the next operation was issued) and its sample. */
static int vs_plot_close_op(vs_plot_t *p, uint64_t next_ns)
{
    if (!p->op_open)
        return 0;
    p->op_open = false;
    if (p->chrome) {
        uint64_t stream = p->op.stream;
        if (stream < 256 && !(p->streams_seen[stream / 64] & (1ull << (stream % 64)))) {
            p->streams_seen[stream / 64] |= 1ull << (stream % 64);
            vs_plot_event_start(p);
            fprintf(p->out,
                    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%" PRIu64
                    ",\"args\":{\"name\":\"stream %" PRIu64 "%s\"}}",
                    VS_PLOT_TID_STREAM0 + stream, stream, stream ? "" : " (legacy)");
        }
        uint64_t start = vs_plot_ns(p, p->op.time_ns), end = vs_plot_ns(p, next_ns);
        vs_plot_event_start(p);
        fprintf(p->out,
                "{\"name\":\"%s\",\"cat\":\"operation\",\"ph\":\"X\",\"pid\":1,\"tid\":%" PRIu64
                ",\"ts\":",
                strcmp(p->op.op, "launch") == 0 ? "kernel" : p->op.op,
                VS_PLOT_TID_STREAM0 + stream);
        vs_plot_us(p->out, start);
        fputs(",\"dur\":", p->out);
        vs_plot_us(p->out, end > start ? end - start : 0);
        fprintf(p->out,
                ",\"args\":{\"seq\":%" PRIu64 ",\"allocations\":%" PRIu64
                ",\"bytes\":%" PRIu64 "}}",
                p->op.seq, p->op_allocs, p->op_bytes);
    }
    return 0;
}

/* The running total that holds `a`'s bytes. */
static uint64_t *vs_plot_tier(vs_plot_t *p, const vs_plot_alloc_t *a)
{
    return a->on_device ? &p->state.device_bytes : &p->state.host_bytes;
}

static int vs_plot_event(vs_plot_t *p, const vs_trace_event_t *ev)
{
    vs_plot_alloc_t *a = NULL;
    if (ev->kind != VS_TRACE_USE)
        HASH_FIND(hh, p->allocs, &ev->id, sizeof(ev->id), a);
    switch (ev->kind) {
    case VS_TRACE_ALLOC:
        if (a) /* an id reused without its F line: forget the old one */
            *vs_plot_tier(p, a) -= a->size;
        else if (!(a = calloc(1, sizeof(*a))))
            return -ENOMEM;
        else {
            a->id = ev->id;
            HASH_ADD(hh, p->allocs, id, sizeof(a->id), a);
        }
        a->size = ev->size;
        a->on_device = !(p->starts_on_host[p->alloc_lines / 8] & (1u << (p->alloc_lines % 8)));
        p->alloc_lines++;
        *vs_plot_tier(p, a) += a->size;
        return 0;
    case VS_TRACE_FREE:
        if (a) {
            *vs_plot_tier(p, a) -= a->size;
            HASH_DEL(p->allocs, a);
            free(a);
        }
        return 0;
    case VS_TRACE_RESIDENCY:
        if (!a || a->on_device == ev->resident)
            return 0;
        a->on_device = ev->resident;
        if (ev->resident) {
            p->state.host_bytes -= a->size;
            p->state.device_bytes += a->size;
            p->state.h2d += a->size;
            p->state.restores++;
        } else {
            p->state.device_bytes -= a->size;
            p->state.host_bytes += a->size;
            p->state.d2h += a->size;
            p->state.evictions++;
        }
        void *room = vs_plot_reserve(p->moves, &p->moves_cap, p->moves_count, sizeof(*p->moves), 64);
        if (!room)
            return -ENOMEM;
        p->moves = room;
        p->moves[p->moves_count++] = (vs_plot_move_t){a->id, a->size, ev->resident};
        return 0;
    case VS_TRACE_USE:
        break;
    }
    if (p->op_open && p->op.seq == ev->seq) {
        p->op_allocs++;
        HASH_FIND(hh, p->allocs, &ev->id, sizeof(ev->id), a);
        p->op_bytes += a ? a->size : 0;
        return 0;
    }
    /* A new operation: it ends the previous one, bounds the moves made
     * since, and is one sample. */
    if (!p->have_time) {
        p->t0 = p->last_time = ev->time_ns;
        p->have_time = true;
    }
    uint64_t now = ev->time_ns > p->last_time ? ev->time_ns : p->last_time;
    int rc = vs_plot_close_op(p, now);
    vs_plot_flush_moves(p, p->count ? p->last_time : now, now);
    p->last_time = now;
    p->op = *ev;
    p->op_open = true;
    p->op_allocs = 1;
    HASH_FIND(hh, p->allocs, &ev->id, sizeof(ev->id), a);
    p->op_bytes = a ? a->size : 0;
    p->state.seq = ev->seq;
    p->state.time_ns = ev->time_ns;
    if (rc == 0)
        rc = vs_plot_push_sample(p);
    if (rc == 0 && p->chrome)
        vs_plot_counter(p, now);
    return rc;
}

static char *vs_plot_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, used = 0;
    char *buf = malloc(cap);
    while (buf) {
        used += fread(buf + used, 1, cap - used, f);
        if (used < cap)
            break;
        char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            errno = ENOMEM;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
        errno = EIO;
    }
    int err = errno;
    fclose(f);
    errno = err;
    *len = used;
    return buf;
}

static void vs_plot_free_allocs(vs_plot_alloc_t **allocs)
{
    vs_plot_alloc_t *a, *tmp;
    HASH_ITER(hh, *allocs, a, tmp)
    {
        HASH_DEL(*allocs, a);
        free(a);
    }
}

/* Which allocations started on the host: those whose first `R` line is a
 * restore. Fills `p->starts_on_host`, a bit per `A` line. 0 or -ENOMEM;
 * malformed lines are left to the main pass to report. */
static int vs_plot_placements(vs_plot_t *p, const char *buf, size_t len)
{
    vs_plot_alloc_t *live = NULL, *a;
    vs_trace_reader_t reader;
    vs_trace_event_t ev;
    uint64_t lines = 0;
    size_t cap = 0;
    int rc = 0;
    vs_trace_reader_init(&reader, buf, len);
    while (rc == 0 && (rc = vs_trace_reader_next(&reader, &ev)) > 0) {
        rc = 0;
        if (ev.kind == VS_TRACE_USE)
            continue;
        HASH_FIND(hh, live, &ev.id, sizeof(ev.id), a);
        if (ev.kind == VS_TRACE_ALLOC) {
            void *room = vs_plot_reserve(p->starts_on_host, &cap, (size_t)(lines / 8), 1, 64);
            if (room)
                p->starts_on_host = room;
            else
                rc = -ENOMEM;
            if (!a && rc == 0 && (a = calloc(1, sizeof(*a)))) {
                a->id = ev.id;
                HASH_ADD(hh, live, id, sizeof(a->id), a);
            }
            if (!a)
                rc = -ENOMEM;
            else {
                a->ordinal = lines++;
                a->decided = false;
            }
        } else if (ev.kind == VS_TRACE_RESIDENCY && a && !a->decided) {
            a->decided = true;
            if (ev.resident)
                p->starts_on_host[a->ordinal / 8] |= (uint8_t)(1u << (a->ordinal % 8));
        } else if (ev.kind == VS_TRACE_FREE && a) {
            HASH_DEL(live, a);
            free(a);
        }
    }
    vs_plot_free_allocs(&live);
    if (rc != -ENOMEM && !p->starts_on_host) /* no `A` line at all */
        p->starts_on_host = vs_plot_reserve(NULL, &cap, 0, 1, 1);
    return rc == -ENOMEM || !p->starts_on_host ? -ENOMEM : 0;
}

static void vs_plot_free(vs_plot_t *p)
{
    vs_plot_free_allocs(&p->allocs);
    free(p->starts_on_host);
    free(p->samples);
    free(p->moves);
}

/* Reads the whole trace; chrome events are written as they come. 0, or 1
 * after an error message. */
static int vs_plot_replay(vs_plot_t *p, const char *path, const char *buf, size_t len)
{
    vs_trace_reader_t reader;
    vs_trace_event_t ev;
    int rc;
    if (vs_plot_placements(p, buf, len) < 0) {
        vs_tool_error("out of memory reading %s", path);
        return 1;
    }
    vs_trace_reader_init(&reader, buf, len);
    while ((rc = vs_trace_reader_next(&reader, &ev)) > 0) {
        if (vs_plot_event(p, &ev) < 0) {
            vs_tool_error("out of memory reading %s", path);
            return 1;
        }
    }
    if (rc < 0) {
        vs_tool_error("%s: line %zu is not a vramshim trace line (see VRAMSHIM_TRACE in "
                      "docs/tools.md)",
                      path, reader.line_no);
        return 1;
    }
    vs_plot_close_op(p, p->last_time);
    vs_plot_flush_moves(p, p->last_time, p->last_time);
    /* The moves after the last operation (at exit) change the totals. */
    if (p->count && memcmp(&p->state, &p->samples[p->count - 1], sizeof(p->state)) != 0 &&
        vs_plot_push_sample(p) < 0) {
        vs_tool_error("out of memory reading %s", path);
        return 1;
    }
    return 0;
}

static int vs_plot_svg(vs_plot_t *p, const char *path, uint64_t limit, vs_timeline_x_t x)
{
    char title[512], heading[600], subtitle[512], limit_text[32] = "not given (--limit)";
    char h2d[32], d2h[32];
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (limit)
        vs_timeline_format_bytes(limit_text, sizeof(limit_text), (double)limit);
    vs_timeline_format_bytes(h2d, sizeof(h2d), (double)p->state.h2d);
    vs_timeline_format_bytes(d2h, sizeof(d2h), (double)p->state.d2h);
    snprintf(title, sizeof(title), "vramshim trace %s", name);
    snprintf(heading, sizeof(heading), "%s: where the bytes are, and what moves", name);
    snprintf(subtitle, sizeof(subtitle),
             "%" PRIu64 " restores (H2D %s), %" PRIu64 " evictions (D2H %s) over %zu operations",
             p->state.restores, h2d, p->state.evictions, d2h, p->count);
    char panel_title[600];
    snprintf(panel_title, sizeof(panel_title), "%s \xc2\xb7 limit %s", name, limit_text);
    vs_timeline_panel_t panel = {
        .id = "trace",
        .title = panel_title,
        .subtitle = subtitle,
        .samples = p->samples,
        .count = p->count,
        .limit = limit,
        .h2d = p->state.h2d,
        .d2h = p->state.d2h,
        .passes = 1,
    };
    vs_timeline_doc_t doc = {
        .title = title,
        .heading = heading,
        .disk_label = "disk (spills are not in the trace)",
        .host_copy_label = NULL,
        .d2h_label = "D2H evictions (clean ones copy nothing)",
        .x = x,
    };
    return vs_timeline_svg_write(p->out, &doc, &panel, 1);
}

static void vs_plot_chrome_begin(vs_plot_t *p, const char *path)
{
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"source\":", p->out);
    vs_json_string(p->out, path);
    fputs(",\"note\":\"operations span from their issue to the next operation's; restores and "
          "evictions share the interval before the operation that follows them\"},"
          "\"traceEvents\":[",
          p->out);
    p->first_event = true;
    static const struct {
        int tid;
        const char *name;
    } tracks[] = {
        {VS_PLOT_TID_H2D, "copy engine H2D (restores)"},
        {VS_PLOT_TID_D2H, "copy engine D2H (evictions)"},
    };
    vs_plot_event_start(p);
    fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":", p->out);
    vs_json_string(p->out, path);
    fputs("}}", p->out);
    for (size_t i = 0; i < sizeof(tracks) / sizeof(tracks[0]); i++) {
        vs_plot_event_start(p);
        fprintf(p->out,
                "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":"
                "\"%s\"}}",
                tracks[i].tid, tracks[i].name);
        vs_plot_event_start(p);
        fprintf(p->out,
                "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                "\"args\":{\"sort_index\":%d}}",
                tracks[i].tid, 100 + tracks[i].tid);
    }
}

int vs_tool_plot(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'}, {"format", required_argument, NULL, 'f'},
        {"limit", required_argument, NULL, 'l'},  {"x", required_argument, NULL, 'x'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *output = NULL;
    bool chrome = false;
    uint64_t limit = 0;
    vs_timeline_x_t x = VS_TIMELINE_X_AUTO;
    int c;
    while ((c = getopt_long(argc, argv, "ho:", options, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (!*optarg) {
                vs_tool_error("--output: expected a file name ('-' for standard output)");
                return VS_TOOL_EXIT_USAGE;
            }
            output = optarg;
            break;
        case 'f':
            if (strcmp(optarg, "svg") != 0 && strcmp(optarg, "chrome") != 0) {
                vs_tool_error("--format %s: expected svg or chrome", optarg);
                return VS_TOOL_EXIT_USAGE;
            }
            chrome = strcmp(optarg, "chrome") == 0;
            break;
        case 'l':
            if (vs_tool_parse_size(optarg, &limit) < 0 || limit == 0) {
                vs_tool_error("--limit %s: expected a size in bytes (1073741824, 10G, 10GiB, "
                              "10GB, 1.5G), not 0 and not a percentage",
                              optarg);
                return VS_TOOL_EXIT_USAGE;
            }
            break;
        case 'x':
            if (strcmp(optarg, "auto") == 0)
                x = VS_TIMELINE_X_AUTO;
            else if (strcmp(optarg, "op") == 0)
                x = VS_TIMELINE_X_OP;
            else if (strcmp(optarg, "time") == 0)
                x = VS_TIMELINE_X_TIME;
            else {
                vs_tool_error("--x %s: expected auto, op or time", optarg);
                return VS_TOOL_EXIT_USAGE;
            }
            break;
        case 'h':
            fputs(vs_usage_plot, stdout);
            return VS_TOOL_EXIT_OK;
        default:
            fputs(vs_usage_plot, stderr);
            return VS_TOOL_EXIT_USAGE;
        }
    }
    if (optind >= argc || optind + 1 < argc) {
        vs_tool_error(optind >= argc ? "plot: no TRACE given" : "plot: expected one TRACE");
        fputs(vs_usage_plot, stderr);
        return VS_TOOL_EXIT_USAGE;
    }
    if (!output) {
        vs_tool_error("plot: no output given (-o FILE, '-' for standard output)");
        return VS_TOOL_EXIT_USAGE;
    }
    const char *path = argv[optind];
    size_t len;
    char *buf = vs_plot_read_file(path, &len);
    if (!buf) {
        vs_tool_error("cannot read the trace %s: %s", path, strerror(errno));
        return VS_TOOL_EXIT_ERROR;
    }

    vs_plot_t p = {.chrome = chrome};
    bool to_stdout = strcmp(output, "-") == 0;
    p.out = to_stdout ? stdout : fopen(output, "w");
    int status = VS_TOOL_EXIT_ERROR;
    if (!p.out) {
        vs_tool_error("cannot write %s: %s", output, strerror(errno));
        goto out;
    }
    if (chrome)
        vs_plot_chrome_begin(&p, path);
    if (vs_plot_replay(&p, path, buf, len) != 0)
        goto out;
    if (chrome) {
        if (p.count)
            vs_plot_counter(&p, p.last_time);
        fputs("\n]}\n", p.out);
    } else {
        int rc = vs_plot_svg(&p, path, limit, x);
        if (rc == -EINVAL) {
            vs_tool_error("--x time: the trace's times do not run forward; use --x op");
            goto out;
        }
        if (rc < 0) {
            vs_tool_error("cannot draw %s: %s", path, strerror(-rc));
            goto out;
        }
    }
    if (fflush(p.out) != 0 || ferror(p.out)) {
        vs_tool_error("cannot write %s: %s", output, strerror(errno));
        goto out;
    }
    status = VS_TOOL_EXIT_OK;
out:
    if (p.out && !to_stdout && fclose(p.out) != 0 && status == VS_TOOL_EXIT_OK) {
        vs_tool_error("cannot write %s: %s", output, strerror(errno));
        status = VS_TOOL_EXIT_ERROR;
    }
    if (status != VS_TOOL_EXIT_OK && !to_stdout && p.out)
        remove(output); /* no half-written document left behind */
    vs_plot_free(&p);
    free(buf);
    return status;
}

/* top.c: `vramshim top PID`, a refreshing view of one process: totals
 * against its limit, eviction and restore rates, the hottest and the
 * largest allocations, and what grew over the last minute.
 *
 * Main entry point: `vs_tool_top`. Each refresh takes a fresh snapshot
 * copy; rates come from the previous copy, growth from a ring of totals
 * covering the last minute. Quits on 'q' (when the terminal is its stdin),
 * after --iterations frames, or when the process exits.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "dump.h"
#include "snapshot_reader.h"

#define VS_TOP_WINDOW_NS (60ull * 1000000000u)
#define VS_TOP_HISTORY 1024 /* samples kept; enough for a minute at 0.1 s */
#define VS_TOP_LIST 5       /* rows per list */

static const char vs_usage_top[] =
    "usage: vramshim top PID [--interval SECONDS] [--iterations N] [--bytes]\n"
    "\n"
    "A refreshing view of process PID: totals against the limit, eviction and\n"
    "restore rates, the hottest and largest allocations and what grew in the last\n"
    "minute. Quits on 'q', or when the process exits (status 0).\n"
    "\n"
    "  --interval SECONDS  time between refreshes (default 1; decimals accepted)\n"
    "  --iterations N      quit after N refreshes (default: run until quit)\n"
    "  --bytes             sizes as exact byte counts\n"
    "  -h, --help          this help\n";

typedef struct vs_top_sample_s {
    uint64_t ns;
    vs_snapshot_totals_t totals;
} vs_top_sample_t;

typedef struct vs_top_s {
    pid_t pid;
    bool bytes;
    bool tty_out;
    vs_snapshot_copy_t prev; /* the previous refresh, for rates */
    uint64_t prev_ns;
    /* The previous refresh's (id, uses), sorted by id, built once per
     * refresh: rows come in the writer's order, which need not be by id
     * (ids are reused, tables rehash), and a scan per row was quadratic
     * (15 s for a frame of 65,536 allocations). */
    struct vs_top_use_s {
        uint64_t id, uses;
    } *prev_uses;
    uint32_t prev_uses_count;
    vs_top_sample_t history[VS_TOP_HISTORY];
    size_t history_len, history_next;
} vs_top_t;

static volatile sig_atomic_t vs_top_stop;

static void vs_top_on_signal(int sig)
{
    (void)sig;
    vs_top_stop = 1;
}

static int vs_top_use_compare(const void *a, const void *b)
{
    uint64_t x = ((const struct vs_top_use_s *)a)->id, y = ((const struct vs_top_use_s *)b)->id;
    return (x > y) - (x < y);
}

/* Indexes `top->prev` by id (on failure, rates show as if every row were
 * new: 0 uses before). */
static void vs_top_index_prev(vs_top_t *top)
{
    const vs_snapshot_view_t *v = &top->prev.view;
    free(top->prev_uses);
    top->prev_uses = NULL;
    top->prev_uses_count = 0;
    if (!top->prev.buf || v->row_count == 0)
        return;
    top->prev_uses = malloc((size_t)v->row_count * sizeof(*top->prev_uses));
    if (!top->prev_uses)
        return;
    for (uint32_t i = 0; i < v->row_count; i++)
        top->prev_uses[i] = (struct vs_top_use_s){v->rows[i].alloc_id, v->rows[i].uses};
    qsort(top->prev_uses, v->row_count, sizeof(*top->prev_uses), vs_top_use_compare);
    top->prev_uses_count = v->row_count;
}

/* uses of allocation `id` in the previous refresh; 0 when it is new. */
static uint64_t vs_top_prev_uses(const vs_top_t *top, uint64_t id)
{
    uint32_t lo = 0, hi = top->prev_uses_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (top->prev_uses[mid].id == id)
            return top->prev_uses[mid].uses;
        if (top->prev_uses[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* The oldest sample no older than a minute. */
static const vs_top_sample_t *vs_top_minute_ago(const vs_top_t *top, uint64_t now)
{
    const vs_top_sample_t *best = NULL;
    for (size_t i = 0; i < top->history_len; i++) {
        const vs_top_sample_t *s = &top->history[i];
        if (now - s->ns <= VS_TOP_WINDOW_NS && (!best || s->ns < best->ns))
            best = s;
    }
    return best;
}

static void vs_top_remember(vs_top_t *top, uint64_t now, const vs_snapshot_totals_t *totals)
{
    top->history[top->history_next] = (vs_top_sample_t){.ns = now, .totals = *totals};
    top->history_next = (top->history_next + 1) % VS_TOP_HISTORY;
    if (top->history_len < VS_TOP_HISTORY)
        top->history_len++;
}

static void vs_top_delta(char *buf, size_t len, uint64_t now, uint64_t then, bool bytes)
{
    char size[32];
    vs_format_size(size, sizeof(size), now >= then ? now - then : then - now, bytes);
    snprintf(buf, len, "%c%s", now >= then ? '+' : '-', size);
}

static void vs_top_row(const vs_top_t *top, const vs_snapshot_row_t *r, uint64_t now,
                       double per_second)
{
    char size[32], place[48], age[32];
    vs_format_size(size, sizeof(size), r->size, top->bytes);
    vs_format_place(place, sizeof(place), r);
    vs_format_duration(age, sizeof(age), r->created_ns && now > r->created_ns ? now - r->created_ns
                                                                               : 0);
    printf("  %8" PRIu64 "  0x%016" PRIx64 "  %12s  %-22s  %8s  %10" PRIu64 "  %8.1f\n",
           r->alloc_id, r->address, size, place, age, r->uses, per_second);
}

static void vs_top_list_header(const char *title)
{
    printf("\n%s\n  %8s  %-18s  %12s  %-22s  %8s  %10s  %8s\n", title, "ID", "ADDRESS", "SIZE",
           "PLACE", "AGE", "USES", "USES/S");
}

/* qsort context: the frame being drawn. */
static struct {
    const vs_snapshot_row_t *rows;
    const uint64_t *heat;
} vs_top_order;

static int vs_top_by_heat(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    uint64_t ha = vs_top_order.heat[a], hb = vs_top_order.heat[b];
    if (ha != hb)
        return ha < hb ? 1 : -1;
    uint64_t sa = vs_top_order.rows[a].last_use_seq, sb = vs_top_order.rows[b].last_use_seq;
    return (sa < sb) - (sa > sb);
}

static int vs_top_by_size(const void *pa, const void *pb)
{
    const vs_snapshot_row_t *a = &vs_top_order.rows[*(const uint32_t *)pa];
    const vs_snapshot_row_t *b = &vs_top_order.rows[*(const uint32_t *)pb];
    return (a->size < b->size) - (a->size > b->size);
}

static int vs_top_frame(vs_top_t *top, const vs_snapshot_copy_t *copy, uint64_t now)
{
    const vs_snapshot_header_t *h = copy->view.header;
    const vs_snapshot_totals_t *t = &h->totals;
    const vs_snapshot_row_t *rows = copy->view.rows;
    uint32_t n = copy->view.row_count;
    char a[48], b[48], c[48], d[48];

    if (top->tty_out)
        fputs("\033[H\033[2J", stdout);
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    uint64_t real_ns = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec;
    vs_format_duration(a, sizeof(a),
                       real_ns > h->start_realtime_ns ? real_ns - h->start_realtime_ns : 0);
    vs_format_duration(b, sizeof(b), now > h->update_ns ? now - h->update_ns : 0);
    char program[VS_SNAPSHOT_PROGRAM_BYTES];
    vs_format_program(program, sizeof(program), h);
    printf("vramshim top - pid %lld (%s)  mode %s  up %s  updated %s ago\n", (long long)h->pid,
           program, vs_snapshot_mode_name(h->mode), a, b);

    uint64_t limit = vs_dump_total_limit(h);
    vs_format_size(a, sizeof(a), t->device_bytes, top->bytes);
    vs_format_size(b, sizeof(b), limit, top->bytes);
    vs_format_size(c, sizeof(c), t->host_bytes, top->bytes);
    vs_format_size(d, sizeof(d), t->disk_bytes, top->bytes);
    if (limit) {
        double used = (double)t->device_bytes / (double)limit;
        int filled = used >= 1.0 ? 30 : (int)(used * 30.0);
        char bar[31];
        memset(bar, '#', (size_t)filled);
        memset(bar + filled, '-', (size_t)(30 - filled));
        bar[30] = '\0';
        printf("device %s of %s [%s] %.0f%%   host %s   disk %s\n", a, b, bar, used * 100.0, c,
               d);
    } else {
        printf("device %s (no limit)   host %s   disk %s\n", a, c, d);
    }
    printf("allocations %" PRIu64 "   launches %" PRIu64 "   copies %" PRIu64
           "   refused allocations %" PRIu64 "\n",
           t->allocations, t->launches, t->copies, t->failed_allocations);

    double dt = top->prev.buf && now > top->prev_ns ? (double)(now - top->prev_ns) / 1e9 : 0.0;
    const vs_snapshot_totals_t *pt = top->prev.buf ? &top->prev.view.header->totals : t;
    double ev = dt > 0 ? (double)(t->evictions - pt->evictions) / dt : 0.0;
    double rs = dt > 0 ? (double)(t->restores - pt->restores) / dt : 0.0;
    vs_format_size(a, sizeof(a),
                   dt > 0 ? (uint64_t)((double)(t->bytes_evicted - pt->bytes_evicted) / dt) : 0,
                   top->bytes);
    vs_format_size(b, sizeof(b),
                   dt > 0 ? (uint64_t)((double)(t->bytes_restored - pt->bytes_restored) / dt) : 0,
                   top->bytes);
    printf("evictions %.1f/s (%s/s), %" PRIu64 " in all   restores %.1f/s (%s/s), %" PRIu64
           " in all\n",
           ev, a, t->evictions, rs, b, t->restores);

    const vs_top_sample_t *old = vs_top_minute_ago(top, now);
    if (old) {
        vs_format_duration(a, sizeof(a), now - old->ns);
        printf("grew in the last %s:", a);
        vs_top_delta(a, sizeof(a), t->device_bytes, old->totals.device_bytes, top->bytes);
        vs_top_delta(b, sizeof(b), t->host_bytes, old->totals.host_bytes, top->bytes);
        vs_top_delta(c, sizeof(c), t->disk_bytes, old->totals.disk_bytes, top->bytes);
        printf(" device %s, host %s, disk %s, allocations %+" PRId64 "\n", a, b, c,
               (int64_t)(t->allocations - old->totals.allocations));
    }

    uint32_t *order = malloc(((size_t)n + 1) * sizeof(*order));
    uint64_t *heat = malloc(((size_t)n + 1) * sizeof(*heat));
    if (!order || !heat) {
        free(order);
        free(heat);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t before = vs_top_prev_uses(top, rows[i].alloc_id);
        heat[i] = rows[i].uses >= before ? rows[i].uses - before : rows[i].uses;
        order[i] = i;
    }
    vs_top_order.rows = rows;
    vs_top_order.heat = heat;

    char title[96];
    if (dt > 0) {
        vs_format_duration(a, sizeof(a), now - top->prev_ns);
        snprintf(title, sizeof(title), "hottest (uses in the last %s)", a);
    } else {
        snprintf(title, sizeof(title), "most recently used");
    }
    vs_top_list_header(title);
    qsort(order, n, sizeof(*order), vs_top_by_heat);
    for (uint32_t k = 0; k < n && k < VS_TOP_LIST; k++)
        vs_top_row(top, &rows[order[k]], now, dt > 0 ? (double)heat[order[k]] / dt : 0.0);

    vs_top_list_header("largest");
    qsort(order, n, sizeof(*order), vs_top_by_size);
    for (uint32_t k = 0; k < n && k < VS_TOP_LIST; k++)
        vs_top_row(top, &rows[order[k]], now, dt > 0 ? (double)heat[order[k]] / dt : 0.0);

    /* `order` is still by size: the largest of the new ones come first. */
    vs_top_list_header("largest new in the last minute");
    uint32_t shown = 0;
    for (uint32_t k = 0; k < n && shown < VS_TOP_LIST; k++) {
        const vs_snapshot_row_t *r = &rows[order[k]];
        if (r->created_ns && now >= r->created_ns && now - r->created_ns <= VS_TOP_WINDOW_NS) {
            vs_top_row(top, r, now, dt > 0 ? (double)heat[order[k]] / dt : 0.0);
            shown++;
        }
    }
    if (h->rows_dropped)
        printf("\n(%" PRIu64 " allocations not published: the snapshot is full)\n",
               h->rows_dropped);
    printf(top->tty_out ? "\nq: quit\n" : "\n");
    fflush(stdout);
    free(order);
    free(heat);
    return 0;
}

static int vs_top_parse_interval(const char *text, uint64_t *ns)
{
    char *end;
    errno = 0;
    double seconds = strtod(text, &end);
    if (errno || end == text || *end || !(seconds >= 0.05 && seconds <= 3600.0))
        return -EINVAL;
    *ns = (uint64_t)(seconds * 1e9);
    return 0;
}

int vs_tool_top(int argc, char **argv)
{
    static const struct option options[] = {
        {"interval", required_argument, NULL, 'i'},
        {"iterations", required_argument, NULL, 'n'},
        {"bytes", no_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t interval_ns = 1000000000u;
    long iterations = 0;
    bool bytes = false;
    int c;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case 'i':
            if (vs_top_parse_interval(optarg, &interval_ns) < 0) {
                vs_tool_error("--interval %s: expected seconds between 0.05 and 3600", optarg);
                return VS_TOOL_EXIT_USAGE;
            }
            break;
        case 'n': {
            char *end;
            iterations = strtol(optarg, &end, 10);
            if (end == optarg || *end || iterations <= 0) {
                vs_tool_error("--iterations %s: expected a positive count", optarg);
                return VS_TOOL_EXIT_USAGE;
            }
            break;
        }
        case 'b':
            bytes = true;
            break;
        case 'h':
            fputs(vs_usage_top, stdout);
            return VS_TOOL_EXIT_OK;
        default:
            fputs(vs_usage_top, stderr);
            return VS_TOOL_EXIT_USAGE;
        }
    }
    if (optind + 1 != argc) {
        vs_tool_error(optind >= argc ? "top: no PID given" : "top: expected one PID");
        fputs(vs_usage_top, stderr);
        return VS_TOOL_EXIT_USAGE;
    }
    pid_t pid = vs_tool_parse_pid(argv[optind]);
    if (pid < 0)
        return VS_TOOL_EXIT_USAGE;

    vs_top_t *top = calloc(1, sizeof(*top));
    if (!top) {
        vs_tool_error("out of memory");
        return VS_TOOL_EXIT_ERROR;
    }
    top->pid = pid;
    top->bytes = bytes;
    top->tty_out = isatty(STDOUT_FILENO);

    /* Keys without Enter and without echo, restored on every way out. */
    bool tty_in = isatty(STDIN_FILENO);
    struct termios saved;
    bool raw_set = false;
    if (tty_in && tcgetattr(STDIN_FILENO, &saved) == 0) {
        struct termios raw = saved;
        raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        raw_set = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    } else {
        tty_in = false;
    }
    struct sigaction sa = {0};
    sa.sa_handler = vs_top_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    int status = VS_TOOL_EXIT_OK;
    long frames = 0;
    char msg[512];
    while (!vs_top_stop) {
        vs_snapshot_copy_t copy;
        int rc = vs_snapshot_read_pid(pid, &copy, msg, sizeof(msg));
        if (rc < 0) {
            /* A process that exits unlinks its snapshot, then goes away:
             * after the first frame either error means it has exited. */
            if (frames > 0 &&
                (rc == -VS_READ_ERR_NO_PROCESS || rc == -VS_READ_ERR_NOT_UNDER_SHIM)) {
                printf("vramshim: process %d exited\n", (int)pid);
            } else {
                vs_tool_error("%s", msg);
                status = VS_TOOL_EXIT_ERROR;
            }
            break;
        }
        uint64_t now = vs_dump_now_ns();
        rc = vs_top_frame(top, &copy, now);
        vs_top_remember(top, now, &copy.view.header->totals);
        vs_snapshot_copy_free(&top->prev);
        top->prev = copy;
        top->prev_ns = now;
        vs_top_index_prev(top);
        if (rc < 0) {
            vs_tool_error("out of memory");
            status = VS_TOOL_EXIT_ERROR;
            break;
        }
        if (++frames == iterations)
            break;

        /* Wait for the next refresh or a key. */
        uint64_t deadline = now + interval_ns;
        bool quit = false;
        while (!vs_top_stop && !quit) {
            uint64_t t = vs_dump_now_ns();
            if (t >= deadline)
                break;
            int wait_ms = (int)((deadline - t + 999999) / 1000000);
            if (tty_in) {
                struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
                if (poll(&pfd, 1, wait_ms) > 0) {
                    char key;
                    ssize_t got = read(STDIN_FILENO, &key, 1);
                    if (got == 1 && (key == 'q' || key == 'Q'))
                        quit = true;
                    else if (got == 0)
                        tty_in = false; /* the terminal went away: stop polling it */
                }
            } else {
                struct timespec ts = {wait_ms / 1000, (long)(wait_ms % 1000) * 1000000L};
                nanosleep(&ts, NULL);
            }
        }
        if (quit)
            break;
    }
    if (raw_set)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    vs_snapshot_copy_free(&top->prev);
    free(top->prev_uses);
    free(top);
    return status;
}

/* dump.c: `vramshim dump` output, text and JSON, and the formatting
 * helpers `ps` and `top` share.
 *
 * Main entry point: `vs_dump_write`. The view it renders has passed
 * `vs_snapshot_parse`, but its contents are still whatever the process
 * wrote: strings are escaped, times that run backwards are clamped, and
 * nothing here indexes a table with an unchecked value.
 */
#include "dump.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const vs_dump_sort_names[] = {
#define VS_DUMP_X(suffix, name) name,
    VS_DUMP_SORTS(VS_DUMP_X)
#undef VS_DUMP_X
};

int vs_dump_sort_parse(const char *name)
{
    for (int i = 0; i < VS_DUMP_SORT_COUNT; i++)
        if (strcmp(name, vs_dump_sort_names[i]) == 0)
            return i;
    return -1;
}

int vs_dump_place_parse(const char *name)
{
    for (uint32_t i = 0; i < VS_SNAPSHOT_PLACE_COUNT; i++)
        if (strcmp(name, vs_snapshot_place_name(i)) == 0)
            return (int)i;
    return -1;
}

uint64_t vs_dump_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void vs_format_size(char *buf, size_t len, uint64_t bytes, bool raw)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (raw || bytes < 1024) {
        snprintf(buf, len, raw ? "%" PRIu64 : "%" PRIu64 " B", bytes);
        return;
    }
    double value = (double)bytes;
    size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < sizeof(units) / sizeof(units[0])) {
        value /= 1024.0;
        unit++;
    }
    snprintf(buf, len, value < 10.0 ? "%.2f %s" : value < 100.0 ? "%.1f %s" : "%.0f %s", value,
             units[unit]);
}

void vs_format_duration(char *buf, size_t len, uint64_t ns)
{
    uint64_t ms = ns / 1000000u;
    uint64_t s = ns / 1000000000u;
    if (ms < 1000)
        snprintf(buf, len, "%" PRIu64 "ms", ms);
    else if (s < 60)
        snprintf(buf, len, "%.1fs", (double)ns / 1e9);
    else if (s < 3600)
        snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, (s % 3600) / 60);
    else
        snprintf(buf, len, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, (s % 86400) / 3600);
}

void vs_format_place(char *buf, size_t len, const vs_snapshot_row_t *row)
{
    if (row->keep != VS_SNAPSHOT_KEEP_NONE)
        snprintf(buf, len, "%s, kept: %s", vs_snapshot_place_name(row->place),
                 vs_snapshot_keep_name(row->keep));
    else
        snprintf(buf, len, "%s", vs_snapshot_place_name(row->place));
}

uint64_t vs_dump_total_limit(const vs_snapshot_header_t *h)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < h->device_count && i < VS_SNAPSHOT_MAX_DEVICES; i++)
        sum += h->devices[i].limit_bytes;
    return sum;
}

/* qsort has no context argument: the sort in progress. Single-threaded tool. */
static struct {
    const vs_snapshot_row_t *rows;
    vs_dump_sort_t sort;
} vs_dump_order;

#define VS_CMP(a, b) (((a) > (b)) - ((a) < (b)))

static int vs_dump_compare(const void *pa, const void *pb)
{
    const vs_snapshot_row_t *a = &vs_dump_order.rows[*(const uint32_t *)pa];
    const vs_snapshot_row_t *b = &vs_dump_order.rows[*(const uint32_t *)pb];
    int c = 0;
    switch (vs_dump_order.sort) {
    case VS_DUMP_SORT_SIZE: /* largest first */
        c = VS_CMP(b->size, a->size);
        break;
    case VS_DUMP_SORT_LAST_USE: /* most recently used first */
        c = VS_CMP(b->last_use_seq, a->last_use_seq);
        if (!c)
            c = VS_CMP(b->last_use_ns, a->last_use_ns);
        break;
    case VS_DUMP_SORT_AGE: /* oldest first */
        c = VS_CMP(a->created_ns, b->created_ns);
        break;
    case VS_DUMP_SORT_STATE: /* device, host, disk; largest first within */
        c = VS_CMP(a->place, b->place);
        if (!c)
            c = VS_CMP(b->size, a->size);
        break;
    case VS_DUMP_SORT_ID:
    case VS_DUMP_SORT_COUNT:
        break;
    }
    if (!c)
        c = VS_CMP(a->alloc_id, b->alloc_id);
    if (!c)
        c = VS_CMP(*(const uint32_t *)pa, *(const uint32_t *)pb);
    return c;
}

uint32_t *vs_dump_select(const vs_snapshot_view_t *view, const vs_dump_options_t *opts,
                         uint32_t *count)
{
    uint32_t *order = malloc(((size_t)view->row_count + 1) * sizeof(*order));
    if (!order)
        return NULL;
    uint32_t n = 0;
    for (uint32_t i = 0; i < view->row_count; i++)
        if (opts->place < 0 || view->rows[i].place == (uint32_t)opts->place)
            order[n++] = i;
    vs_dump_order.rows = view->rows;
    vs_dump_order.sort = opts->sort;
    qsort(order, n, sizeof(*order), vs_dump_compare);
    *count = n;
    return order;
}

static void vs_dump_age(char *buf, size_t len, uint64_t now, uint64_t then)
{
    if (!then) {
        snprintf(buf, len, "-");
        return;
    }
    vs_format_duration(buf, len, now > then ? now - then : 0);
}

static void vs_dump_last_use(char *buf, size_t len, uint64_t now, const vs_snapshot_row_t *r)
{
    if (!r->last_use_ns) {
        snprintf(buf, len, "%s", r->uses ? "-" : "never");
        return;
    }
    char age[32];
    vs_format_duration(age, sizeof(age), now > r->last_use_ns ? now - r->last_use_ns : 0);
    snprintf(buf, len, "%s ago", age);
}

static int vs_dump_text(FILE *out, const vs_snapshot_view_t *view, const vs_dump_options_t *opts)
{
    const vs_snapshot_header_t *h = view->header;
    const vs_snapshot_totals_t *t = &h->totals;
    char a[48], b[48], c[48], d[48], e[48], f[48];
    uint32_t count;
    uint32_t *order = vs_dump_select(view, opts, &count);
    if (!order)
        return -ENOMEM;

    uint64_t limit = vs_dump_total_limit(h);
    char program[VS_SNAPSHOT_PROGRAM_BYTES];
    vs_format_program(program, sizeof(program), h);
    vs_format_size(a, sizeof(a), limit, opts->bytes);
    vs_dump_age(b, sizeof(b), opts->now_ns, h->update_ns);
    fprintf(out, "pid %lld (%s)  mode %s  limit %s  updated %s ago\n", (long long)h->pid,
            program, vs_snapshot_mode_name(h->mode), limit ? a : "none", b);
    fprintf(out, "%8s  %-18s  %12s  %3s  %-15s  %-22s  %8s  %10s  %8s  %6s  %7s\n", "ID",
            "ADDRESS", "SIZE", "DEV", "KIND", "PLACE", "AGE", "LAST USE", "USES", "EVICT",
            "RESTORE");
    for (uint32_t k = 0; k < count; k++) {
        const vs_snapshot_row_t *r = &view->rows[order[k]];
        vs_format_size(a, sizeof(a), r->size, opts->bytes);
        vs_format_place(b, sizeof(b), r);
        vs_dump_age(c, sizeof(c), opts->now_ns, r->created_ns);
        vs_dump_last_use(d, sizeof(d), opts->now_ns, r);
        fprintf(out,
                "%8" PRIu64 "  0x%016" PRIx64 "  %12s  %3lld  %-15s  %-22s  %8s  %10s  %8" PRIu64
                "  %6" PRIu64 "  %7" PRIu64 "\n",
                r->alloc_id, r->address, a, (long long)r->device, vs_snapshot_kind_name(r->kind),
                b, c, d, r->uses, r->evictions, r->restores);
    }
    vs_format_size(a, sizeof(a), t->device_bytes, opts->bytes);
    vs_format_size(b, sizeof(b), t->host_bytes, opts->bytes);
    vs_format_size(c, sizeof(c), t->disk_bytes, opts->bytes);
    vs_format_size(d, sizeof(d), t->bytes_evicted, opts->bytes);
    vs_format_size(e, sizeof(e), t->bytes_restored, opts->bytes);
    fprintf(out,
            "total: %" PRIu64 " allocations (%u shown); device %s, host %s, disk %s; "
            "%" PRIu64 " evictions (%s), %" PRIu64 " restores (%s)",
            t->allocations, count, a, b, c, t->evictions, d, t->restores, e);
    if (h->rows_dropped) {
        vs_format_size(f, sizeof(f), h->rows_dropped, true);
        fprintf(out, "; %s allocations not published (snapshot full)", f);
    }
    fputc('\n', out);
    free(order);
    return ferror(out) ? -EIO : 0;
}

/* JSON strings: every byte that is not printable ASCII is escaped, so the
 * output is valid JSON (and valid UTF-8) whatever the program name holds. */
void vs_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static int vs_dump_json(FILE *out, const vs_snapshot_view_t *view, const vs_dump_options_t *opts)
{
    const vs_snapshot_header_t *h = view->header;
    const vs_snapshot_totals_t *t = &h->totals;
    uint32_t count;
    uint32_t *order = vs_dump_select(view, opts, &count);
    if (!order)
        return -ENOMEM;

    fprintf(out, "{\"schema\":\"" VS_DUMP_JSON_SCHEMA_ID "\",\"pid\":%lld,\"program\":",
            (long long)h->pid);
    vs_json_string(out, h->program);
    fprintf(out,
            ",\"mode\":\"%s\",\"abi_version\":%u,\"publish_count\":%" PRIu64
            ",\"updated_ns\":%" PRIu64 ",\"age_of_snapshot_ns\":%" PRIu64
            ",\"event_seq\":%" PRIu64 ",\"rows_dropped\":%" PRIu64 ",\"limit_bytes\":%" PRIu64
            ",\"host_limit_bytes\":%" PRIu64 ",\"devices\":[",
            vs_snapshot_mode_name(h->mode), h->abi_version, h->publish_count, h->update_ns,
            opts->now_ns > h->update_ns ? opts->now_ns - h->update_ns : 0, h->event_seq,
            h->rows_dropped, vs_dump_total_limit(h), h->host_limit_bytes);
    for (uint32_t i = 0; i < h->device_count && i < VS_SNAPSHOT_MAX_DEVICES; i++) {
        const vs_snapshot_device_t *dev = &h->devices[i];
        fprintf(out,
                "%s{\"ordinal\":%" PRIu64 ",\"limit_bytes\":%" PRIu64
                ",\"physical_bytes\":%" PRIu64 ",\"resident_bytes\":%" PRIu64 "}",
                i ? "," : "", dev->ordinal, dev->limit_bytes, dev->physical_bytes,
                dev->resident_bytes);
    }
    fprintf(out,
            "],\"totals\":{\"allocations\":%" PRIu64 ",\"device_bytes\":%" PRIu64
            ",\"host_bytes\":%" PRIu64 ",\"disk_bytes\":%" PRIu64 ",\"evictions\":%" PRIu64
            ",\"restores\":%" PRIu64 ",\"bytes_evicted\":%" PRIu64 ",\"bytes_restored\":%" PRIu64
            ",\"launches\":%" PRIu64 ",\"copies\":%" PRIu64 ",\"failed_allocations\":%" PRIu64
            ",\"restore_wait_ns\":%" PRIu64 ",\"host_gpu_wait_ns\":%" PRIu64 ",\"host_vmm_ns\":%" PRIu64
            "},\"allocations\":[",
            t->allocations, t->device_bytes, t->host_bytes, t->disk_bytes, t->evictions,
            t->restores, t->bytes_evicted, t->bytes_restored, t->launches, t->copies,
            t->failed_allocations, t->restore_wait_ns, t->host_gpu_wait_ns, t->host_vmm_ns);
    for (uint32_t k = 0; k < count; k++) {
        const vs_snapshot_row_t *r = &view->rows[order[k]];
        fprintf(out,
                "%s\n{\"id\":%" PRIu64 ",\"address\":\"0x%" PRIx64 "\",\"size\":%" PRIu64
                ",\"device\":%lld,\"kind\":\"%s\",\"place\":\"%s\",\"keep_resident\":",
                k ? "," : "", r->alloc_id, r->address, r->size, (long long)r->device,
                vs_snapshot_kind_name(r->kind), vs_snapshot_place_name(r->place));
        if (r->keep == VS_SNAPSHOT_KEEP_NONE)
            fputs("null", out);
        else
            fprintf(out, "\"%s\"", vs_snapshot_keep_name(r->keep));
        fprintf(out,
                ",\"created_ns\":%" PRIu64 ",\"age_ns\":%" PRIu64 ",\"last_use_ns\":",
                r->created_ns,
                r->created_ns && opts->now_ns > r->created_ns ? opts->now_ns - r->created_ns : 0);
        if (r->last_use_ns)
            fprintf(out, "%" PRIu64, r->last_use_ns);
        else
            fputs("null", out);
        fprintf(out,
                ",\"last_use_seq\":%" PRIu64 ",\"uses\":%" PRIu64 ",\"evictions\":%" PRIu64
                ",\"restores\":%" PRIu64 "}",
                r->last_use_seq, r->uses, r->evictions, r->restores);
    }
    fputs("]}\n", out);
    free(order);
    return ferror(out) ? -EIO : 0;
}

int vs_dump_write(FILE *out, const vs_snapshot_view_t *view, const vs_dump_options_t *opts)
{
    return opts->json ? vs_dump_json(out, view, opts) : vs_dump_text(out, view, opts);
}

void vs_format_program(char *buf, size_t len, const vs_snapshot_header_t *h)
{
    size_t i = 0;
    if (len == 0)
        return;
    for (; i + 1 < len && i < sizeof(h->program) && h->program[i] != '\0'; i++) {
        unsigned char c = (unsigned char)h->program[i];
        buf[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    buf[i] = '\0';
}

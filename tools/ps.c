/* ps.c: `vramshim ps`, one line (or, with --json, one object) per process
 * of the user's running under the shim.
 *
 * Main entry point: `vs_tool_ps`. The listing (`vs_snapshot_list`) removes
 * the snapshots of processes that are gone; a snapshot that cannot be read
 * is reported on stderr and skipped, so one bad process does not hide the
 * others.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dump.h"
#include "snapshot_reader.h"

#define VS_PS_JSON_SCHEMA_ID "vramshim-ps/1"

static const char vs_usage_ps[] =
    "usage: vramshim ps [--bytes] [--json]\n"
    "\n"
    "Lists your processes running under the shim: pid, program, mode, limit, and\n"
    "the bytes on the device, in host memory and on disk. Snapshots left by\n"
    "processes that have exited are removed.\n"
    "\n"
    "  --bytes      sizes as exact byte counts\n"
    "  --json       one JSON document: {\"schema\": \"" VS_PS_JSON_SCHEMA_ID "\", \"processes\":\n"
    "               [...]}, sizes in bytes, counters since the process started\n"
    "  -h, --help   this help\n";

static void vs_tool_ps_removed(pid_t pid, int err, void *arg)
{
    (void)arg;
    if (err == 0)
        fprintf(stderr, "vramshim: removed the stale snapshot of exited process %d\n", (int)pid);
    else
        fprintf(stderr, "vramshim: cannot remove the stale snapshot of exited process %d: %s\n",
                (int)pid, strerror(-err));
}

typedef struct vs_tool_ps_state_s {
    bool bytes;
    bool json;
    bool header_done;
    size_t shown;
} vs_tool_ps_state_t;

static void vs_tool_ps_json(vs_tool_ps_state_t *st, const vs_snapshot_header_t *h)
{
    const vs_snapshot_totals_t *t = &h->totals;
    printf("%s\n{\"pid\":%lld,\"program\":", st->shown ? "," : "", (long long)h->pid);
    vs_json_string(stdout, h->program);
    printf(",\"mode\":\"%s\",\"limit_bytes\":%" PRIu64 ",\"host_limit_bytes\":%" PRIu64
           ",\"device_bytes\":%" PRIu64 ",\"host_bytes\":%" PRIu64 ",\"disk_bytes\":%" PRIu64
           ",\"allocations\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"restores\":%" PRIu64
           ",\"bytes_evicted\":%" PRIu64 ",\"bytes_restored\":%" PRIu64
           ",\"failed_allocations\":%" PRIu64 ",\"devices\":[",
           vs_snapshot_mode_name(h->mode), vs_dump_total_limit(h), h->host_limit_bytes,
           t->device_bytes, t->host_bytes, t->disk_bytes, t->allocations, t->evictions,
           t->restores, t->bytes_evicted, t->bytes_restored, t->failed_allocations);
    for (uint32_t i = 0; i < h->device_count && i < VS_SNAPSHOT_MAX_DEVICES; i++)
        printf("%s{\"ordinal\":%" PRIu64 ",\"limit_bytes\":%" PRIu64 ",\"resident_bytes\":%" PRIu64
               "}",
               i ? "," : "", h->devices[i].ordinal, h->devices[i].limit_bytes,
               h->devices[i].resident_bytes);
    printf("]}");
}

static void vs_tool_ps_text(vs_tool_ps_state_t *st, pid_t pid, const vs_snapshot_header_t *h)
{
    char limit[32], device[32], host[32], disk[32];
    uint64_t limit_bytes = vs_dump_total_limit(h);
    vs_format_size(limit, sizeof(limit), limit_bytes, st->bytes);
    vs_format_size(device, sizeof(device), h->totals.device_bytes, st->bytes);
    vs_format_size(host, sizeof(host), h->totals.host_bytes, st->bytes);
    vs_format_size(disk, sizeof(disk), h->totals.disk_bytes, st->bytes);
    char program[VS_SNAPSHOT_PROGRAM_BYTES];
    vs_format_program(program, sizeof(program), h);
    printf("%8d  %-16.16s  %-7s  %10s  %10s  %10s  %10s  %7" PRIu64 "\n", (int)pid, program,
           vs_snapshot_mode_name(h->mode), limit_bytes ? limit : "none", device, host, disk,
           h->totals.allocations);
}

static void vs_tool_ps_row(pid_t pid, void *arg)
{
    vs_tool_ps_state_t *st = arg;
    vs_snapshot_copy_t copy;
    char msg[512];
    if (!st->header_done && !st->json) {
        printf("%8s  %-16s  %-7s  %10s  %10s  %10s  %10s  %7s\n", "PID", "PROGRAM", "MODE",
               "LIMIT", "DEVICE", "HOST", "DISK", "ALLOCS");
        st->header_done = true;
    }
    int rc = vs_snapshot_read_pid(pid, &copy, msg, sizeof(msg));
    if (rc < 0) {
        /* Exited between the listing and the read: nothing to show. A
         * snapshot that cannot be read (another version, damaged, a writer
         * stuck mid-update) is reported and skipped. */
        if (rc != -VS_READ_ERR_NO_PROCESS)
            vs_tool_error("skipping process %d: %s", (int)pid, msg);
        return;
    }
    if (st->json)
        vs_tool_ps_json(st, copy.view.header);
    else
        vs_tool_ps_text(st, pid, copy.view.header);
    st->shown++;
    vs_snapshot_copy_free(&copy);
}

int vs_tool_ps(int argc, char **argv)
{
    static const struct option options[] = {
        {"bytes", no_argument, NULL, 'b'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    vs_tool_ps_state_t st = {0};
    int c;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case 'b':
            st.bytes = true;
            break;
        case 'j':
            st.json = true;
            break;
        case 'h':
            fputs(vs_usage_ps, stdout);
            return VS_TOOL_EXIT_OK;
        default:
            fputs(vs_usage_ps, stderr);
            return VS_TOOL_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        vs_tool_error("ps: unexpected argument '%s'", argv[optind]);
        fputs(vs_usage_ps, stderr);
        return VS_TOOL_EXIT_USAGE;
    }
    if (st.json)
        printf("{\"schema\":\"" VS_PS_JSON_SCHEMA_ID "\",\"processes\":[");
    int n = vs_snapshot_list(vs_tool_ps_row, &st, vs_tool_ps_removed);
    if (st.json)
        printf("%s]}\n", st.shown ? "\n" : "");
    if (n < 0) {
        vs_tool_error("cannot list " VS_SNAPSHOT_SHM_DIR ": %s", strerror(-n));
        return VS_TOOL_EXIT_ERROR;
    }
    if (n == 0 && !st.json)
        printf("no processes running under vramshim\n");
    if (fflush(stdout) != 0) {
        vs_tool_error("cannot write the listing: %s", strerror(errno));
        return VS_TOOL_EXIT_ERROR;
    }
    return VS_TOOL_EXIT_OK;
}

/* shim.c: the top layer of libvramshim.so: start-up and shut-down
 * (`vs_shim_load`, `vs_shim_unload`).
 *
 * At load the constructor parses the configuration (a malformed value ends
 * the program there, with status 2), configures the layers below and
 * registers what must follow the driver's loading (the live snapshot); the
 * driver itself is opened lazily by driver.c, from whichever entry path
 * comes first. Start-up calls down into every other module; nothing calls
 * up into this file (it declares nothing in any header).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "cap.h"
#include "config.h"
#include "driver.h"
#include "log.h"
#include "offload.h"
#include "publish.h"
#include "registry.h"
#include "resolve.h"
#include "spill.h"
#include "spill_io.h"
#include "stamp_log.h"
#include "stats.h"
#include "trace_writer.h"

/* The process the constructor ran in. A child that `fork`s from it shares
 * its memory but not its threads or its driver state: at exit it must leave
 * the parent's snapshot, trace and summary alone. */
static pid_t vs_shim_pid;

__attribute__((constructor)) static void vs_shim_load(void)
{
    const vs_config_t *cfg = vs_config_get(); /* exits with 2 when malformed */

    vs_shim_pid = getpid();
    vs_stamp_log_enable(); /* uses of settled allocations are stamped off the launching thread */

    vs_spill_io_set_faults(&cfg->io_faults); /* VRAMSHIM_IO_FAULT, tests only */
    /* The spill directory is checked now, like a malformed value, rather
     * than at the first spill, hours into a run. Only offload spills. */
    if (cfg->mode == VS_MODE_OFFLOAD && cfg->spill_dir[0] != '\0') {
        char msg[512];
        if (vs_spill_configure(cfg->spill_dir, msg, sizeof msg) != 0) {
            char line[sizeof msg + 1];
            int len = snprintf(line, sizeof line, "%s\n", msg);
            ssize_t ignored = write(STDERR_FILENO, line, len > 0 ? (size_t)len : 0);
            (void)ignored;
            _exit(2); /* as for a malformed value: at load, before any GPU work */
        }
    }
    vs_driver_find_dlsym();
    /* VRAMSHIM_DRIVER is checked now too: a path that is not a driver (or
     * is this library) would fail every call, or recurse, much later. */
    if (cfg->driver[0] != '\0') {
        char why[256];
        if (vs_driver_check(cfg->driver, why, sizeof why) != 0) {
            char shown[160], line[640];
            vs_config_quote(cfg->driver, shown, sizeof shown);
            int len = snprintf(line, sizeof line, "vramshim: VRAMSHIM_DRIVER=\"%s\" is not valid: %s; accepted: %s\n",
                               shown, why, VS_DRIVER_FORMS);
            ssize_t ignored = write(STDERR_FILENO, line, len > 0 ? (size_t)len : 0);
            (void)ignored;
            _exit(2); /* as for a malformed value: at load, before any GPU work */
        }
    }
    /* The offload mode must see every pointer a launch passes: a driver
     * that cannot give kernel parameter layouts (CUDA below 12.4, e.g. the
     * R535 branch) would let kernels run on evicted memory. Refused now,
     * with the mode that still works there; cap and track count such
     * launches unscanned instead (driver.c). */
    if (cfg->mode == VS_MODE_OFFLOAD) {
        const char *path = cfg->driver[0] != '\0' ? cfg->driver : "libcuda.so.1";
        char why[160];
        int version;
        if (vs_driver_probe_param_info(path, &version, why, sizeof why) != 0) {
            char shown[160], line[640];
            vs_config_quote(path, shown, sizeof shown);
            int len = snprintf(line, sizeof line,
                               "vramshim: VRAM_LIMIT offload needs CUDA driver 12.4 or newer to see kernel arguments "
                               "(cuFuncGetParamInfo); this driver (%s) %s: run with VRAMSHIM_MODE=cap to cap memory "
                               "without offloading\n",
                               shown, why);
            ssize_t ignored = write(STDERR_FILENO, line, len > 0 ? (size_t)len : 0);
            (void)ignored;
            _exit(2); /* as for a malformed value: at load, before any GPU work */
        }
    }
    vs_cap_configure(cfg->limit, vs_driver_device_total);
    vs_driver_on_load(vs_publish_start);
    if (cfg->trace[0] != '\0')
        vs_trace_open(cfg->trace); /* the file is created at the first event */
    vs_log(VS_LOG_DEBUG, "loaded: mode %s", cfg->mode == VS_MODE_OFFLOAD ? "offload" : cfg->mode == VS_MODE_CAP ? "cap" : "track (VRAM_LIMIT unset)");
}

__attribute__((destructor)) static void vs_shim_unload(void)
{
    vs_registry_stats_t rs;
    vs_stats_t vs_stats;
    uint64_t allocations = 0;

    /* A forked child exiting (`exit(0)` after `fork`): the publisher
     * thread, the engine's threads and the driver's state stayed in the
     * parent. Joining one of those threads here would wait forever. */
    if (getpid() != vs_shim_pid) {
        vs_publish_forget();
        return;
    }
    vs_stamp_log_stop();
    vs_stats_debug_snapshot();
    vs_publish_stop();
    vs_trace_close(); /* VRAMSHIM_TRACE: what is still buffered */
    vs_resolve_report_patched();
    /* A process that never reached the driver (a shell, a script around
     * the program) has nothing to report. */
    if (!vs_log_enabled(VS_LOG_INFO) || vs_driver_handle() == NULL)
        return;
    vs_registry_stats(&rs);
    vs_stats_sum(&vs_stats);
    for (int k = 0; k < VS_ALLOC_KIND_COUNT; k++)
        allocations += rs.total_count[k];
    /* The allocations by kind, those the program made. */
    static const struct {
        const char *name;
        int kind;
    } kinds[] = {
        {"device", VS_ALLOC_DEVICE}, {"pitch", VS_ALLOC_PITCH},   {"async", VS_ALLOC_ASYNC},
        {"pool", VS_ALLOC_POOL},     {"managed", VS_ALLOC_MANAGED}, {"vmm", VS_ALLOC_VMM},
        {"pinned host", VS_ALLOC_HOST_PINNED}, {"registered host", VS_ALLOC_HOST_REGISTERED},
    };
    char by_kind[256] = "", peak[32];
    size_t used = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0] && used < sizeof by_kind; i++) {
        uint64_t count = rs.total_count[kinds[i].kind];
        if (count == 0)
            continue;
        int n = snprintf(by_kind + used, sizeof by_kind - used, "%s%" PRIu64 " %s", used ? ", " : ": ", count,
                         kinds[i].name);
        used += n > 0 ? (size_t)n : 0;
    }
    vs_log(VS_LOG_INFO, "at exit:");
    vs_log(VS_LOG_INFO, "  peak tracked    %s (%" PRIu64 " bytes) on the device; %" PRIu64 " allocations%s",
           vs_log_bytes(peak, sizeof peak, rs.peak_device_bytes), rs.peak_device_bytes, allocations, by_kind);
    vs_log(VS_LOG_INFO,
           "  operations      %" PRIu64 " launches (%" PRIu64 " unscanned), %" PRIu64 " graph launches, %" PRIu64
           " copies, %" PRIu64 " memsets; %" PRIu64 " refused",
           atomic_load(&vs_stats.launches), atomic_load(&vs_stats.launches_unscanned),
           atomic_load(&vs_stats.graph_launches), atomic_load(&vs_stats.copies), atomic_load(&vs_stats.memsets),
           atomic_load(&vs_stats.refused));
    vs_offload_shutdown();
}

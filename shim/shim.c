/* shim.c: start-up and shut-down of libvramshim.so (`vs_shim_ready`).
 *
 * At load the constructor parses the configuration (a malformed value ends
 * the program there, with status 2) and nothing else: the driver is opened
 * lazily, by whichever entry path comes first (an exported wrapper, the
 * `dlsym` override, `cuGetProcAddress`), because libcudart resolves the
 * whole driver before calling `cuInit` and some programs never touch CUDA.
 * The shim opens `libcuda.so.1` itself with RTLD_LOCAL: `dlsym(RTLD_NEXT)`
 * cannot see a driver the program opened locally. Each real entry point
 * comes from the real `dlsym` on that handle, so a wrapper's own driver
 * calls never reach a wrapper.
 */
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cap.h"
#include "config.h"
#include "log.h"
#include "offload.h"
#include "output_file.h"
#include "registry.h"
#include "spill.h"
#include "spill_io.h"
#include "trace_writer.h"

vs_real_t vs_real;

static _Atomic(vs_stats_t *) vs_stats_blocks;
static __thread vs_stats_t *vs_stats_local __attribute__((tls_model("initial-exec")));

vs_stats_t *vs_stats_mine(void)
{
    vs_stats_t *mine = vs_stats_local;
    if (mine != NULL)
        return mine;
    mine = calloc(1, sizeof *mine);
    if (mine == NULL)
        return NULL;
    mine->next = atomic_load(&vs_stats_blocks);
    while (!atomic_compare_exchange_weak(&vs_stats_blocks, &mine->next, mine)) {
    }
    vs_stats_local = mine;
    return mine;
}

void vs_stats_sum(vs_stats_t *out)
{
    memset(out, 0, sizeof *out);
    for (vs_stats_t *b = atomic_load(&vs_stats_blocks); b != NULL; b = b->next) {
#define VS_STAT_ADD(name, description)                                                             \
    atomic_store_explicit(&out->name,                                                              \
                          atomic_load_explicit(&out->name, memory_order_relaxed)                   \
                              + atomic_load_explicit(&b->name, memory_order_relaxed),              \
                          memory_order_relaxed);
        VS_STATS(VS_STAT_ADD)
#undef VS_STAT_ADD
    }
}

typedef void *(*vs_dlsym_fn)(void *, const char *);

/* Read by the `dlsym` trampoline (resolve.c): the C library's `dlsym`. */
__attribute__((visibility("hidden"))) _Atomic(vs_dlsym_fn) vs_real_dlsym_ptr;

static void *vs_driver;
static bool vs_param_info;
/* The process the constructor ran in. A child that `fork`s from it shares
 * its memory but not its threads, its driver state or its files' meaning:
 * at exit it must leave the parent's snapshot, trace and summary alone. */
static pid_t vs_shim_pid;

/* 2 once the driver is loaded (or failed to load for good). */
static _Atomic int vs_ready;
static pthread_mutex_t vs_ready_lock = PTHREAD_MUTEX_INITIALIZER;
/* Set while this thread is loading the driver: the driver's constructors may
 * call `dlsym`, which must not wait for the loading they are part of. */
static __thread int vs_loading;

VS_NO_SANITIZE static vs_dlsym_fn vs_find_real_dlsym(void)
{
    vs_dlsym_fn fn = atomic_load(&vs_real_dlsym_ptr);
    if (fn != NULL)
        return fn;
    /* `dlvsym` is not overridden, so this cannot recurse. glibc 2.34 moved
     * `dlsym` into libc under a new version; older ones only have 2.2.5. */
    void *found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (found == NULL)
        found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    /* ISO C has no cast from an object to a function pointer. */
    memcpy(&fn, &found, sizeof fn);
    atomic_store(&vs_real_dlsym_ptr, fn);
    return fn;
}

/* Called from the trampoline when the pointer is not known yet. */
__attribute__((visibility("hidden"))) vs_dlsym_fn vs_shim_init_real_dlsym(void);
VS_NO_SANITIZE vs_dlsym_fn vs_shim_init_real_dlsym(void)
{
    return vs_find_real_dlsym();
}

VS_NO_SANITIZE void *vs_shim_real_dlsym(void *handle, const char *name)
{
    vs_dlsym_fn fn = vs_find_real_dlsym();
    return fn != NULL ? fn(handle, name) : NULL;
}

int vs_shim_device_total(int device, uint64_t *bytes)
{
    CUdevice dev;
    size_t total = 0;

    if (vs_real.cuDeviceGet == NULL || vs_real.cuDeviceTotalMem_v2 == NULL)
        return -ENOSYS;
    if (vs_real.cuDeviceGet(&dev, device) != CUDA_SUCCESS
        || vs_real.cuDeviceTotalMem_v2(&total, dev) != CUDA_SUCCESS)
        return -EIO;
    *bytes = total;
    return 0;
}

static void vs_load_driver(void)
{
    const vs_config_t *cfg = vs_config_get();
    const char *path = cfg->driver[0] != '\0' ? cfg->driver : "libcuda.so.1";

    vs_driver = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (vs_driver == NULL) {
        vs_log(VS_LOG_WARN, "cannot open the CUDA driver %s: %s", path, dlerror());
        return;
    }
#define VS_HOOK(family, symbol)                                                                    \
    do {                                                                                           \
        void *found = vs_shim_real_dlsym(vs_driver, #symbol);                                      \
        memcpy(&vs_real.symbol, &found, sizeof found);                                             \
    } while (0);
#define VS_DRIVER(symbol) VS_HOOK(driver, symbol)
#include "hooks.def"
#include "driver.def"
#undef VS_DRIVER
#undef VS_HOOK
    vs_resolve_driver_loaded();

    int version = 0;
    if (vs_real.cuDriverGetVersion != NULL)
        vs_real.cuDriverGetVersion(&version);
    vs_param_info = version >= 12040 && vs_real.cuFuncGetParamInfo != NULL;
    if (!vs_param_info)
        vs_log(VS_LOG_WARN,
               "the CUDA driver (%s) reports version %d.%d; kernel parameter layouts need 12.4 or "
               "newer (cuFuncGetParamInfo): launches are counted but their pointer arguments are "
               "not seen, only the `extra` buffer form is scanned",
               path, version / 1000, version % 1000 / 10);
    vs_log(VS_LOG_DEBUG, "driver %s loaded, version %d", path, version);
    vs_publish_start();
}

int vs_shim_ready(void)
{
    if (atomic_load_explicit(&vs_ready, memory_order_acquire) == 2)
        return vs_driver != NULL ? 0 : -ENOENT;
    if (vs_loading)
        return -EDEADLK;
    int saved_errno = errno;
    pthread_mutex_lock(&vs_ready_lock);
    if (atomic_load_explicit(&vs_ready, memory_order_relaxed) != 2) {
        vs_loading = 1;
        vs_load_driver();
        vs_loading = 0;
        atomic_store_explicit(&vs_ready, 2, memory_order_release);
    }
    pthread_mutex_unlock(&vs_ready_lock);
    errno = saved_errno;
    return vs_driver != NULL ? 0 : -ENOENT;
}

void *vs_shim_driver_handle(void)
{
    return atomic_load_explicit(&vs_ready, memory_order_acquire) == 2 ? vs_driver : NULL;
}

bool vs_shim_has_param_info(void)
{
    return vs_param_info;
}

int vs_shim_current_device(void)
{
    CUdevice dev;

    if (vs_real.cuCtxGetDevice == NULL || vs_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return -1;
    return (int)dev;
}

/* One line per allocation, for tests and for people debugging a run. */
static void vs_snapshot_line(const vs_alloc_info_t *a, void *arg)
{
    FILE *f = arg;
    fprintf(f,
            "alloc id=%" PRIu64 " base=0x%" PRIxPTR " size=%" PRIu64 " device=%d kind=%s created_seq=%" PRIu64
            " created_ns=%" PRIu64 " last_use_seq=%" PRIu64 " use_count=%" PRIu64 " evictable=%d reason=\"%s\"\n",
            a->id, a->base, a->size, a->device, vs_registry_kind_name(a->kind), a->created_seq, a->created_ns,
            a->last_use_seq, a->use_count, a->evictable ? 1 : 0, a->pinned_reason ? a->pinned_reason : "");
}

void vs_shim_debug_snapshot(void)
{
    const vs_config_t *cfg = vs_config_get();
    char tmp[VS_CONFIG_PATH_MAX + 32];
    int saved_errno = errno;

    if (cfg->debug_snapshot[0] == '\0')
        return;
    /* The temporary name is predictable: it is created exclusively, 0600,
     * never through a symlink planted there (output_file.h). */
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", cfg->debug_snapshot, (int)getpid());
    int fd = vs_output_open(tmp, VS_OUTPUT_REPLACE);
    int rc = fd < 0 ? fd : vs_output_replaceable(cfg->debug_snapshot);
    FILE *f = rc == 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        if (rc == 0)
            rc = -errno;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        static _Atomic bool warned; /* rewritten at every synchronisation: say it once */
        if (!atomic_exchange(&warned, true))
            vs_log(VS_LOG_WARN, "cannot write VRAMSHIM_DEBUG_SNAPSHOT=%s: %s (it must be a regular file of "
                   "yours or a new name)", cfg->debug_snapshot, strerror(-rc));
        goto out;
    }
    fprintf(f, "seq %" PRIu64 "\n", vs_registry_next_seq());
    for (int d = 0; d < VS_MAX_DEVICES; d++) {
        if (vs_cap_used(d) != 0 || vs_cap_peak(d) != 0)
            fprintf(f, "device %d used=%" PRIu64 " peak=%" PRIu64 "\n", d, vs_cap_used(d), vs_cap_peak(d));
    }
    vs_stats_t totals;
    vs_stats_sum(&totals);
#define VS_STAT_LINE(name, description) fprintf(f, "stat " #name "=%" PRIu64 "\n", atomic_load(&totals.name));
    VS_STATS(VS_STAT_LINE)
#undef VS_STAT_LINE
    vs_registry_foreach(vs_snapshot_line, f);
    fclose(f);
    /* Readers see the old snapshot or the new one, never half of one. A
     * rename never follows a symlink at the destination: at worst it
     * replaces the link, never what it points to. */
    if (rename(tmp, cfg->debug_snapshot) != 0)
        unlink(tmp);
out:
    errno = saved_errno;
}

__attribute__((constructor)) static void vs_shim_load(void)
{
    const vs_config_t *cfg = vs_config_get(); /* exits with 2 when malformed */

    vs_shim_pid = getpid();

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
    vs_find_real_dlsym();
    vs_cap_configure(cfg->limit, vs_shim_device_total);
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
    vs_shim_debug_snapshot();
    vs_publish_stop();
    vs_trace_close(); /* VRAMSHIM_TRACE: what is still buffered */
    /* A process that never reached the driver (a shell, a script around
     * the program) has nothing to report. */
    if (!vs_log_enabled(VS_LOG_INFO) || vs_shim_driver_handle() == NULL)
        return;
    vs_offload_shutdown();
    vs_registry_stats(&rs);
    vs_stats_sum(&vs_stats);
    for (int k = 0; k < VS_ALLOC_KIND_COUNT; k++)
        allocations += rs.total_count[k];
    vs_log(VS_LOG_INFO,
           "summary: peak tracked device bytes %" PRIu64 ", allocations %" PRIu64 " (device %" PRIu64
           ", pitch %" PRIu64 ", async %" PRIu64 ", pool %" PRIu64 ", managed %" PRIu64 ", vmm %" PRIu64
           ", pinned host %" PRIu64 "), launches %" PRIu64 " (unscanned %" PRIu64 "), graph launches %" PRIu64
           ", copies %" PRIu64 ", memsets %" PRIu64 ", refused %" PRIu64,
           rs.peak_device_bytes, allocations, rs.total_count[VS_ALLOC_DEVICE], rs.total_count[VS_ALLOC_PITCH],
           rs.total_count[VS_ALLOC_ASYNC], rs.total_count[VS_ALLOC_POOL], rs.total_count[VS_ALLOC_MANAGED],
           rs.total_count[VS_ALLOC_VMM], rs.total_count[VS_ALLOC_HOST_PINNED] + rs.total_count[VS_ALLOC_HOST_REGISTERED],
           atomic_load(&vs_stats.launches), atomic_load(&vs_stats.launches_unscanned),
           atomic_load(&vs_stats.graph_launches), atomic_load(&vs_stats.copies), atomic_load(&vs_stats.memsets),
           atomic_load(&vs_stats.refused));
}

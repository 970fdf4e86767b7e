/* publish.c: the live snapshot `vramshim ps/dump/top` read.
 *
 * Once the driver is loaded (`vs_publish_start`, from `vs_load_driver`), a
 * publisher thread copies the registry into the shared-memory snapshot
 * every `VS_PUBLISH_PERIOD_MS` (shim/snapshot_writer.c keeps it consistent
 * for readers with a seqlock). The hot paths pay nothing: they only stamp
 * the registry, which the publisher reads under its read lock. At exit
 * (`vs_publish_stop`) a last publication is made and the object removed.
 * Failing to publish is logged and never affects the program.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "cap.h"
#include "config.h"
#include "log.h"
#include "offload.h"
#include "registry.h"
#include "driver.h"
#include "publish.h"
#include "stats.h"
#include "snapshot_writer.h"
#include "stamp_log.h"
#include "tunables.h"

static vs_snapshot_t *vs_publish_snapshot;
/* Physical memory per device, learned once the driver can tell (only the
 * publisher thread reads and writes it). */
static uint64_t vs_publish_physical[VS_SNAPSHOT_MAX_DEVICES];
static pthread_once_t vs_publish_once = PTHREAD_ONCE_INIT;

/* When uses happened: the hot path stamps sequence numbers, not times (a
 * clock read per launch would cost more than the whole look-up). Each
 * publication samples (event sequence, time); a use stamped with sequence
 * q happened before the first sample whose sequence is at least q, so its
 * time is known to within one publication period. The ring keeps the last
 * VS_PUBLISH_SAMPLES; only the publisher thread touches it. */
static struct {
    uint64_t seq[VS_PUBLISH_SAMPLES];
    uint64_t ns[VS_PUBLISH_SAMPLES];
    uint32_t count, next;
} vs_publish_clock;

static void vs_publish_sample(uint64_t seq, uint64_t ns)
{
    vs_publish_clock.seq[vs_publish_clock.next] = seq;
    vs_publish_clock.ns[vs_publish_clock.next] = ns;
    vs_publish_clock.next = (vs_publish_clock.next + 1) % VS_PUBLISH_SAMPLES;
    if (vs_publish_clock.count < VS_PUBLISH_SAMPLES)
        vs_publish_clock.count++;
}

/* The time of the use stamped `seq` (0: never used). */
static uint64_t vs_publish_use_time(uint64_t seq)
{
    if (seq == 0 || vs_publish_clock.count == 0)
        return 0;
    /* Samples are in increasing order from the oldest; binary search. */
    uint32_t oldest = (vs_publish_clock.next + VS_PUBLISH_SAMPLES - vs_publish_clock.count) % VS_PUBLISH_SAMPLES;
    uint32_t lo = 0, hi = vs_publish_clock.count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (vs_publish_clock.seq[(oldest + mid) % VS_PUBLISH_SAMPLES] < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == vs_publish_clock.count)
        lo = vs_publish_clock.count - 1; /* newer than the last sample: now */
    return vs_publish_clock.ns[(oldest + lo) % VS_PUBLISH_SAMPLES];
}

typedef struct vs_publish_fill_s {
    vs_snapshot_t *snap;
    uint32_t next_row;
    uint64_t rows;
    vs_snapshot_totals_t totals;
} vs_publish_fill_t;

static uint32_t vs_publish_kind(vs_alloc_kind_t kind)
{
    switch (kind) {
    case VS_ALLOC_DEVICE: return VS_SNAPSHOT_KIND_DEVICE;
    case VS_ALLOC_PITCH: return VS_SNAPSHOT_KIND_PITCH;
    case VS_ALLOC_ASYNC: return VS_SNAPSHOT_KIND_ASYNC;
    case VS_ALLOC_POOL: return VS_SNAPSHOT_KIND_POOL;
    case VS_ALLOC_MANAGED: return VS_SNAPSHOT_KIND_MANAGED;
    case VS_ALLOC_VMM: return VS_SNAPSHOT_KIND_VMM;
    case VS_ALLOC_HOST_PINNED: return VS_SNAPSHOT_KIND_HOST_PINNED;
    case VS_ALLOC_HOST_REGISTERED: return VS_SNAPSHOT_KIND_HOST_REGISTERED;
    default: return VS_SNAPSHOT_KIND_OTHER;
    }
}

/* Why an allocation that cannot be evicted stays where it is, in the
 * snapshot's terms. */
static uint32_t vs_publish_keep(const vs_alloc_info_t *a)
{
    if (a->evictable)
        return VS_SNAPSHOT_KEEP_NONE;
    if (a->pinned_reason != NULL && strstr(a->pinned_reason, "cuIpcGetMemHandle") != NULL)
        return VS_SNAPSHOT_KEEP_EXPORTED;
    switch (a->kind) {
    case VS_ALLOC_DEVICE:
    case VS_ALLOC_PITCH: return VS_SNAPSHOT_KEEP_SMALL;
    case VS_ALLOC_ASYNC:
    case VS_ALLOC_POOL: return VS_SNAPSHOT_KEEP_POOL;
    case VS_ALLOC_MANAGED: return VS_SNAPSHOT_KEEP_MANAGED;
    case VS_ALLOC_VMM: return VS_SNAPSHOT_KEEP_APP_VMM;
    default: return VS_SNAPSHOT_KEEP_HOST_MEMORY;
    }
}

static uint32_t vs_publish_place(vs_residency_t residency)
{
    switch (residency) {
    case VS_ON_HOST: return VS_SNAPSHOT_PLACE_HOST;
    case VS_ON_DISK: return VS_SNAPSHOT_PLACE_DISK;
    default: return VS_SNAPSHOT_PLACE_DEVICE;
    }
}

static void vs_publish_row(const vs_alloc_info_t *a, void *arg)
{
    vs_publish_fill_t *fill = arg;
    vs_snapshot_row_t row = {
        .alloc_id = a->id,
        .address = a->base,
        .size = a->size,
        .device = a->device,
        .kind = vs_publish_kind(a->kind),
        .place = vs_registry_kind_device_side(a->kind) ? vs_publish_place(a->residency) : VS_SNAPSHOT_PLACE_HOST,
        .keep = vs_publish_keep(a),
        .created_ns = a->created_ns,
        .last_use_seq = a->last_use_seq,
        .last_use_ns = vs_publish_use_time(a->last_use_seq),
        .uses = a->use_count,
        .evictions = a->evictions,
        .restores = a->restores,
    };

    fill->rows++;
    if (vs_registry_kind_device_side(a->kind)) {
        fill->totals.allocations++;
        if (a->residency == VS_ON_HOST)
            fill->totals.host_bytes += a->size;
        else if (a->residency == VS_ON_DISK)
            fill->totals.disk_bytes += a->size;
        else
            fill->totals.device_bytes += a->size;
    }
    if (fill->next_row < vs_snapshot_capacity(fill->snap))
        vs_snapshot_put_row(fill->snap, fill->next_row++, &row);
}

static void vs_publish_fill(vs_snapshot_t *snap, void *ctx)
{
    vs_publish_fill_t fill = {.snap = snap};
    vs_snapshot_device_t devices[VS_SNAPSHOT_MAX_DEVICES];
    uint32_t device_count = 0;
    vs_stats_t stats;

    (void)ctx;
    /* The previous publication's writes failed (/dev/shm full, the object
     * truncated by someone): the live view degrades, the program does
     * not notice. Said once. */
    static bool warned;
    int write_error = vs_snapshot_write_error(snap);
    if (write_error != 0 && !warned) {
        warned = true;
        vs_log(VS_LOG_WARN, "the live snapshot for vramshim ps/dump cannot be written (%s); it may be "
               "missing or stale", strerror(-write_error));
    }
    /* What may wait (the engine's lock, held through spill I/O; the
     * driver) is gathered first: the snapshot's sequence goes odd only at
     * the first row written (snapshot_writer.c), so readers never retry
     * through those waits ("snapshot kept changing"). */
    vs_offload_stats_t moved;
    vs_offload_stats(&moved);
    fill.totals.evictions = moved.evictions;
    fill.totals.restores = moved.restores;
    fill.totals.bytes_evicted = moved.bytes_to_host;
    fill.totals.bytes_restored = moved.bytes_to_device;
    fill.totals.restore_wait_ns = moved.restore_wait_ns;
    fill.totals.host_gpu_wait_ns = moved.host_gpu_wait_ns;
    fill.totals.host_vmm_ns = moved.host_vmm_ns;
    int present = 0;
    if (vs_real.cuDeviceGetCount == NULL || vs_real.cuDeviceGetCount(&present) != CUDA_SUCCESS)
        present = 0; /* before cuInit */
    for (int d = 0; d < VS_SNAPSHOT_MAX_DEVICES && d < VS_MAX_DEVICES; d++) {
        uint64_t limit = vs_cap_limit(d), used = vs_cap_used(d);
        /* Devices that exist, or that something was counted on. */
        if (d >= present && used == 0 && vs_cap_peak(d) == 0)
            continue;
        if (vs_publish_physical[d] == 0 && d < present)
            (void)vs_driver_device_total(d, &vs_publish_physical[d]);
        uint64_t physical = vs_publish_physical[d];
        devices[device_count++] = (vs_snapshot_device_t){
            .ordinal = (uint64_t)d,
            .limit_bytes = limit == UINT64_MAX ? 0 : limit,
            .physical_bytes = physical,
            .resident_bytes = used,
        };
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    vs_publish_sample(vs_registry_current_seq(), (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec);
    vs_stamp_log_flush(); /* every use made so far shows */
    vs_registry_foreach(vs_publish_row, &fill);
    vs_stats_sum(&stats);
    fill.totals.launches = atomic_load(&stats.launches) + atomic_load(&stats.graph_launches);
    fill.totals.copies = atomic_load(&stats.copies) + atomic_load(&stats.memsets);
    fill.totals.failed_allocations = atomic_load(&stats.refused);
    vs_snapshot_set_devices(snap, devices, device_count);
    vs_snapshot_set_totals(snap, &fill.totals);
    vs_snapshot_set_event_seq(snap, vs_registry_current_seq());
    vs_snapshot_set_row_count(snap, fill.rows);
}

static void vs_publish_open(void)
{
    const vs_config_t *cfg = vs_config_get();
    vs_snapshot_identity_t id = {
        .row_capacity = cfg->snapshot_rows, /* checked at load; 0: the default */
        .mode = cfg->mode == VS_MODE_OFFLOAD ? VS_SNAPSHOT_MODE_OFFLOAD
                : cfg->mode == VS_MODE_CAP   ? VS_SNAPSHOT_MODE_CAP
                                             : VS_SNAPSHOT_MODE_TRACK,
    };
    int err = 0;
    int saved_errno = errno;

    vs_publish_snapshot = vs_snapshot_open(&id, &err);
    if (vs_publish_snapshot == NULL) {
        vs_log(VS_LOG_WARN, "cannot publish the live snapshot for vramshim ps/dump: %s", strerror(-err));
        goto out;
    }
    err = vs_snapshot_publisher_start(vs_publish_snapshot, vs_publish_fill, NULL, VS_PUBLISH_PERIOD_MS);
    if (err != 0) {
        vs_log(VS_LOG_WARN, "cannot start the snapshot publisher: %s", strerror(-err));
        vs_snapshot_close(vs_publish_snapshot, true);
        vs_publish_snapshot = NULL;
    }
out:
    errno = saved_errno;
}

void vs_publish_start(void)
{
    pthread_once(&vs_publish_once, vs_publish_open);
}

void vs_publish_stop(void)
{
    if (vs_publish_snapshot == NULL)
        return;
    if (!vs_snapshot_owned(vs_publish_snapshot)) {
        vs_publish_forget();
        return;
    }
    vs_snapshot_publisher_stop(vs_publish_snapshot);
    vs_snapshot_close(vs_publish_snapshot, true);
    vs_publish_snapshot = NULL;
}

void vs_publish_forget(void)
{
    /* Not the creator (a forked child): unmap, never join or unlink. */
    vs_snapshot_close(vs_publish_snapshot, false);
    vs_publish_snapshot = NULL;
}

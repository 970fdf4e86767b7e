/* offload.c: the oversubscription engine (`vs_offload_alloc`, `vs_op_prepare`).
 *
 * A region is one evictable allocation: an address range reserved with
 * `cuMemAddressReserve` for its whole life, backed by one physical
 * allocation (`cuMemCreate`, the eviction unit) while resident, and by a
 * copy in the pinned host pool while evicted.
 *
 * Eviction (`vs_evict`): mark the victims moving (under the registry's
 * write lock, so no operation is between its scan and its submission),
 * make the engine's device-to-host stream wait for the streams that used
 * each victim (an event recorded on each: never a device-wide sync), copy
 * out in chunks, wait for the copies, then unmap and release. Restore
 * (`vs_restore`): make room, map new physical memory, copy in on the
 * host-to-device stream and make the application's stream wait for that
 * copy's event. The host copy is given back once the event has completed.
 *
 * Which streams used a region comes from the launch path: each operation
 * sets its stream's bit in the allocation's mask (registry.c), numbered by
 * the stream table here. A per-thread default stream can be waited for only
 * from its own thread; any other case the table cannot express falls back
 * to `cuCtxSynchronize`.
 *
 * The engine lock serialises every decision and every driver call the
 * engine makes; the fast path of an operation never takes it.
 */
#include "offload.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "cap.h"
#include "config.h"
#include "content_hash.h"
#include "device_hash.h"
#include "host_memory.h"
#include "host_pool.h"
#include "log.h"
#include "policy.h"
#include "shim.h"
#include "spill.h"
#include "trace_writer.h"

/* Copies are issued in chunks of this size, so that the two directions
 * interleave on the copy engines. */
#define VS_COPY_CHUNK_BYTES (32ull << 20)
/* How many times an operation may find something missing again after a
 * restore before the engine gives up on it. */
#define VS_OP_MAX_ATTEMPTS 8

typedef struct vs_region_s {
    uintptr_t base;
    uint64_t size;     /* requested by the application */
    uint64_t reserved; /* rounded to the granularity: address range and physical size */
    uint64_t id;       /* the registry's id, also the policy's */
    int device;
    CUcontext ctx;
    vs_residency_t where; /* VS_RESIDENT, VS_ON_HOST or VS_ON_DISK */
    CUmemGenericAllocationHandle phys;
    /* The host copy: the data while evicted. While resident it is kept as
     * long as the pool has room: when the device bytes still hash to
     * `host_hash`, an eviction drops them without copying. */
    vs_host_copy_t host;
    bool host_hash_known; /* host_hash is the content hash of host[0, size) */
    vs_content_hash_t host_hash;
    vs_spill_copy_t disk; /* VS_ON_DISK: the bytes, in the spill file */
    CUevent arriving; /* the restore copy's event until it is known complete */
    uint32_t holds;
    bool pinned;         /* never evictable (IPC export) */
    bool evicting;       /* in an eviction batch: its host copy is being written */
    bool prefetched;     /* restored ahead of its use, not used since */
    int hash_slot;       /* the eviction batch's hash slot, -1 for none */
    uint64_t synced_seq; /* last use already told to the policy */
    UT_hash_handle hh;    /* by base */
    UT_hash_handle hh_id; /* by id */
} vs_region_t;

/* A restore copy not yet known to be complete: until it is, the region is
 * arriving (every stream that uses it waits for `done`) and its host copy
 * must not change. */
typedef struct vs_deferred_s {
    CUevent done;
    uintptr_t base; /* the region restored */
    int device;
    int hash_slot; /* the restore hasher's slot hashing what arrived, -1 for none */
    uint64_t bytes;
    struct vs_deferred_s *next;
} vs_deferred_t;

/* Hash slots: one per victim of an eviction batch, and one per restore in
 * flight (the hash of what arrived becomes the host copy's). */
#define VS_EVICT_BATCH 64
#define VS_RESTORE_HASH_SLOTS 64

typedef struct vs_engine_device_s {
    bool ready;
    CUcontext ctx;
    CUstream to_host, to_device;
    uint64_t granularity;
    vs_policy_t *policy;
    /* Content hashing (clean eviction); NULL when the kernel cannot be
     * loaded: then every eviction copies. */
    bool hashers_tried;
    vs_device_hasher_t *evict_hasher, *restore_hasher;
    uint64_t restore_slots_busy; /* bit per restore_hasher slot */
    /* Prefetch: the window is the largest evictable allocation, plus the
     * largest smaller one when sizes differ (a block's tensors). */
    uint64_t largest, second;
    uint64_t prefetched_bytes; /* restored ahead, not used yet */
} vs_engine_device_t;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t released; /* an operation let go of what it held, or memory was freed */
    uint32_t ops_holding;    /* operations between their restore and their submission */
    /* The limit was passed for an operation that needed it: the next
     * operation evicts back under it. */
    _Atomic bool over_limit;
    /* An operation used a watched region: the next one runs a prefetch
     * step before its scan. */
    _Atomic bool prefetch_step_due;
    /* The prefetch under way is for an operation that names no evictable
     * allocation: it spares what the operation before used. */
    bool prefetch_spares_recent;
    bool initialised;
    bool enabled;
    uint64_t min_evict;
    vs_region_t *by_base;
    vs_region_t *by_id;
    vs_engine_device_t devices[VS_MAX_DEVICES];
    CUevent *events; /* free events */
    size_t event_count, event_capacity;
    vs_deferred_t *deferred_head, *deferred_tail;
    vs_offload_stats_t stats;
    bool warned_over_limit;
} vs_engine = {.lock = PTHREAD_MUTEX_INITIALIZER, .released = PTHREAD_COND_INITIALIZER};

/* How long an operation that finds no room waits for other operations to
 * submit and let go of what they hold, before it passes the limit. */
#define VS_ROOM_WAIT_MS 20
#define VS_ROOM_WAITS 50

static pthread_once_t vs_engine_once = PTHREAD_ONCE_INIT;

/* The region starting at `base`, or NULL. Engine lock held. */
static vs_region_t *vs_region_at(uintptr_t base)
{
    vs_region_t *r;
    HASH_FIND(hh, vs_engine.by_base, &base, sizeof base, r);
    return r;
}


static uint64_t vs_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int vs_pin_host(void **ptr, uint64_t bytes)
{
    return VS_CALL(cuMemHostAlloc, (ptr, bytes, CU_MEMHOSTALLOC_PORTABLE)) == CUDA_SUCCESS ? 0 : -ENOMEM;
}

static void vs_unpin_host(void *ptr)
{
    (void)VS_CALL(cuMemFreeHost, (ptr));
}

static void vs_engine_init(void)
{
    const vs_config_t *cfg = vs_config_get();

    vs_engine.enabled = cfg->mode == VS_MODE_OFFLOAD;
    vs_engine.min_evict = cfg->min_evict;
    /* Within the cgroup's memory limit too: the pool is pinned. */
    char why[256];
    uint64_t host_limit = vs_host_memory_pool_limit(cfg, "", why, sizeof why);
    if (why[0] != '\0')
        vs_log(VS_LOG_WARN, "%s", why);
    vs_host_pool_configure(host_limit, vs_pin_host, vs_unpin_host);
    vs_engine.initialised = true;
}

bool vs_offload_enabled(void)
{
    pthread_once(&vs_engine_once, vs_engine_init);
    return vs_engine.enabled;
}

/* ---- Capture safety ------------------------------------------------------
 * The engine's own calls must not count as "unsafe" calls in a capture
 * another thread is making (that would invalidate it): relaxed mode. */

static CUstreamCaptureMode vs_relax(void)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (VS_CALL(cuThreadExchangeStreamCaptureMode, (&mode)) != CUDA_SUCCESS)
        return CU_STREAM_CAPTURE_MODE_RELAXED;
    return mode;
}

static void vs_unrelax(CUstreamCaptureMode mode)
{
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        (void)VS_CALL(cuThreadExchangeStreamCaptureMode, (&mode));
}

static void vs_engine_lock(CUstreamCaptureMode *mode)
{
    pthread_mutex_lock(&vs_engine.lock);
    *mode = vs_relax();
}

static void vs_engine_unlock(CUstreamCaptureMode mode)
{
    vs_unrelax(mode);
    pthread_mutex_unlock(&vs_engine.lock);
}

/* ---- The stream table ---------------------------------------------------- */

typedef enum vs_stream_kind_e {
    VS_STREAM_EMPTY = 0,
    VS_STREAM_LEGACY,     /* the legacy default stream (NULL in plain variants) */
    VS_STREAM_PER_THREAD, /* one thread's per-thread default stream */
    VS_STREAM_HANDLE,     /* a created stream */
} vs_stream_kind_t;

typedef struct vs_stream_entry_s {
    vs_stream_kind_t kind;
    CUstream handle;
    pthread_t owner; /* VS_STREAM_PER_THREAD */
} vs_stream_entry_t;

#define VS_STREAM_SLOTS (VS_STREAM_BITS - 1)
static vs_stream_entry_t vs_streams[VS_STREAM_SLOTS];

/* Markers: events recorded on a stream when an operation on it starts a
 * restore, each closing a registry epoch (`vs_registry_epoch_close`). An
 * allocation last used in epoch e on that stream is done with once the
 * oldest marker closing an epoch >= e has completed: an eviction waits for
 * that marker instead of the stream's current tail, so the copy out of a
 * victim used long ago does not queue behind the copy in that the stream's
 * latest work waits for. Guarded by the engine lock. */
#define VS_MARKERS 16
typedef struct vs_marker_ring_s {
    uint64_t epoch[VS_MARKERS];
    CUevent event[VS_MARKERS];
    uint32_t next, count;
} vs_marker_ring_t;
static vs_marker_ring_t vs_markers[VS_STREAM_SLOTS];
static pthread_mutex_t vs_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t vs_streams_generation = 1;

static __thread struct {
    CUstream stream;
    bool per_thread;
    uint64_t generation;
    uint64_t bit;
} vs_stream_cache __attribute__((tls_model("initial-exec")));

static void vs_stream_classify(CUstream stream, bool per_thread, vs_stream_kind_t *kind, CUstream *handle)
{
    if (stream == NULL)
        *kind = per_thread ? VS_STREAM_PER_THREAD : VS_STREAM_LEGACY;
    else if (stream == CU_STREAM_LEGACY)
        *kind = VS_STREAM_LEGACY;
    else if (stream == CU_STREAM_PER_THREAD)
        *kind = VS_STREAM_PER_THREAD;
    else
        *kind = VS_STREAM_HANDLE;
    *handle = *kind == VS_STREAM_HANDLE ? stream : NULL;
}

/* The stream the driver means by `stream` in the variant called: NULL is
 * the per-thread default stream in the `_ptsz`/`_ptds` variants. */
static CUstream vs_stream_resolve(CUstream stream, bool per_thread)
{
    return stream == NULL && per_thread ? CU_STREAM_PER_THREAD : stream;
}

/* A copy of stream table entry `slot`. */
static vs_stream_entry_t vs_stream_entry(int slot)
{
    pthread_mutex_lock(&vs_streams_lock);
    vs_stream_entry_t e = vs_streams[slot];
    pthread_mutex_unlock(&vs_streams_lock);
    return e;
}

/* The mask bit of the stream an operation runs on. */
static uint64_t vs_stream_bit(CUstream stream, bool per_thread)
{
    uint64_t generation = atomic_load_explicit(&vs_streams_generation, memory_order_acquire);
    if (vs_stream_cache.generation == generation && vs_stream_cache.stream == stream
        && vs_stream_cache.per_thread == per_thread)
        return vs_stream_cache.bit;

    vs_stream_kind_t kind;
    CUstream handle;
    vs_stream_classify(stream, per_thread, &kind, &handle);
    pthread_t self = pthread_self();
    uint64_t bit = VS_STREAM_BIT_OVERFLOW;
    int empty = -1;
    pthread_mutex_lock(&vs_streams_lock);
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        vs_stream_entry_t *e = &vs_streams[i];
        if (e->kind == VS_STREAM_EMPTY) {
            if (empty < 0)
                empty = i;
            continue;
        }
        if (e->kind == kind && e->handle == handle
            && (kind != VS_STREAM_PER_THREAD || pthread_equal(e->owner, self))) {
            bit = 1ull << i;
            break;
        }
    }
    if (bit == VS_STREAM_BIT_OVERFLOW && empty >= 0) {
        vs_streams[empty] = (vs_stream_entry_t){.kind = kind, .handle = handle, .owner = self};
        bit = 1ull << empty;
    }
    pthread_mutex_unlock(&vs_streams_lock);
    vs_stream_cache.stream = stream;
    vs_stream_cache.per_thread = per_thread;
    vs_stream_cache.generation = generation;
    vs_stream_cache.bit = bit;
    return bit;
}

void vs_offload_stream_destroyed(CUstream stream)
{
    if (!vs_offload_enabled() || stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
        return;
    bool known = false;
    pthread_mutex_lock(&vs_streams_lock);
    for (int i = 0; i < VS_STREAM_SLOTS; i++)
        known |= vs_streams[i].kind == VS_STREAM_HANDLE && vs_streams[i].handle == stream;
    pthread_mutex_unlock(&vs_streams_lock);
    if (!known)
        return;
    /* Allocations may still name this stream's bit: its work must be over
     * before the bit can mean another stream. */
    (void)VS_CALL(cuStreamSynchronize, (stream));
    pthread_mutex_lock(&vs_streams_lock);
    int cleared = -1;
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        if (vs_streams[i].kind == VS_STREAM_HANDLE && vs_streams[i].handle == stream) {
            vs_streams[i].kind = VS_STREAM_EMPTY;
            cleared = i;
        }
    }
    atomic_fetch_add_explicit(&vs_streams_generation, 1, memory_order_acq_rel);
    pthread_mutex_unlock(&vs_streams_lock);
    if (cleared >= 0) {
        pthread_mutex_lock(&vs_engine.lock);
        vs_markers[cleared].count = 0; /* its events stay for the next stream */
        pthread_mutex_unlock(&vs_engine.lock);
    }
}

/* ---- Events -------------------------------------------------------------- */

static CUevent vs_event_get(void)
{
    if (vs_engine.event_count > 0)
        return vs_engine.events[--vs_engine.event_count];
    CUevent ev = NULL;
    if (VS_CALL(cuEventCreate, (&ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
        return NULL;
    return ev;
}

static void vs_event_put(CUevent ev)
{
    if (ev == NULL)
        return;
    if (vs_engine.event_count == vs_engine.event_capacity) {
        size_t capacity = vs_engine.event_capacity ? vs_engine.event_capacity * 2 : 16;
        CUevent *grown = realloc(vs_engine.events, capacity * sizeof *grown);
        if (grown == NULL) {
            (void)VS_CALL(cuEventDestroy_v2, (ev));
            return;
        }
        vs_engine.events = grown;
        vs_engine.event_capacity = capacity;
    }
    vs_engine.events[vs_engine.event_count++] = ev;
}

/* ---- Devices ------------------------------------------------------------- */

/* The engine's streams and granularity on `device`, created in the current
 * context the first time. NULL when the driver refuses. */
static vs_engine_device_t *vs_device(int device)
{
    if (device < 0 || device >= VS_MAX_DEVICES)
        return NULL;
    vs_engine_device_t *d = &vs_engine.devices[device];
    if (d->ready)
        return d;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t granularity = 0;
    if (VS_CALL(cuCtxGetCurrent, (&d->ctx)) != CUDA_SUCCESS || d->ctx == NULL
        || VS_CALL(cuMemGetAllocationGranularity, (&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM))
               != CUDA_SUCCESS
        || granularity == 0)
        return NULL;
    if (d->to_host == NULL && VS_CALL(cuStreamCreate, (&d->to_host, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        return NULL;
    if (d->to_device == NULL && VS_CALL(cuStreamCreate, (&d->to_device, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        return NULL;
    if (d->policy == NULL
        && vs_policy_create((vs_policy_kind_t)vs_config_get()->policy, &d->policy) != 0)
        return NULL;
    d->granularity = granularity;
    d->ready = true;
    return d;
}

/* The device's hashers, created the first time they are wanted. NULL when
 * the kernel cannot be loaded (then evictions copy, as without hashing). */
static vs_device_hasher_t *vs_evict_hasher(vs_engine_device_t *d, int device)
{
    if (!d->hashers_tried) {
        d->hashers_tried = true;
        if (vs_device_hasher_create(device, VS_EVICT_BATCH, &d->evict_hasher) != 0
            || vs_device_hasher_create(device, VS_RESTORE_HASH_SLOTS, &d->restore_hasher) != 0) {
            vs_device_hasher_destroy(d->evict_hasher);
            d->evict_hasher = NULL;
            d->restore_hasher = NULL;
            vs_log(VS_LOG_WARN, "device %d: the content-hash kernel is not available; every eviction copies", device);
        }
    }
    return d->evict_hasher;
}

/* ---- Restores in flight -------------------------------------------------- */

/* Ends restore hash `slot` (-1: none): when the copy it followed succeeded
 * and `r` still holds its host copy, the hash of what arrived becomes that
 * copy's; the slot is free again either way. */
static void vs_restore_hash_end(vs_engine_device_t *dev, vs_region_t *r, int slot, uint64_t bytes, bool copied)
{
    if (slot < 0)
        return;
    if (r != NULL && copied && r->host.count > 0) {
        r->host_hash = vs_device_hash_result(dev->restore_hasher, (unsigned)slot, bytes);
        r->host_hash_known = true;
    }
    dev->restore_slots_busy &= ~(1ull << slot);
}

/* Ends the restores whose copy has finished (they become resident, and the
 * hash of what arrived becomes their host copy's); with `wait`, waits for
 * all of them. */
static void vs_deferred_reap(bool wait)
{
    while (vs_engine.deferred_head != NULL) {
        vs_deferred_t *d = vs_engine.deferred_head;
        CUresult rc = wait ? VS_CALL(cuEventSynchronize, (d->done)) : VS_CALL(cuEventQuery, (d->done));
        if (rc == CUDA_ERROR_NOT_READY)
            return;
        /* Done, or failed: either way the copy no longer reads the host
         * memory, and every stream may use the region. */
        vs_engine.deferred_head = d->next;
        if (vs_engine.deferred_head == NULL)
            vs_engine.deferred_tail = NULL;
        vs_region_t *r = vs_region_at(d->base);
        vs_engine_device_t *dev = &vs_engine.devices[d->device];
        bool current = r != NULL && r->arriving == d->done;
        if (current) {
            r->arriving = NULL;
            (void)vs_registry_set_residency(r->base, VS_RESIDENT, false, NULL);
        }
        vs_restore_hash_end(dev, current ? r : NULL, d->hash_slot, d->bytes, rc == CUDA_SUCCESS);
        vs_event_put(d->done);
        free(d);
    }
}

/* Returns whether the region may be left arriving (false: the copy was
 * waited for here). */
static bool vs_deferred_push(CUevent done, vs_region_t *r, int hash_slot)
{
    vs_deferred_t *d = calloc(1, sizeof *d);
    if (d == NULL) {
        /* No room to defer: wait for the copy now. */
        CUresult rc = VS_CALL(cuEventSynchronize, (done));
        vs_restore_hash_end(&vs_engine.devices[r->device], r, hash_slot, r->size, rc == CUDA_SUCCESS);
        vs_event_put(done);
        return false;
    }
    d->done = done;
    d->base = r->base;
    d->device = r->device;
    d->hash_slot = hash_slot;
    d->bytes = r->size;
    if (vs_engine.deferred_tail != NULL)
        vs_engine.deferred_tail->next = d;
    else
        vs_engine.deferred_head = d;
    vs_engine.deferred_tail = d;
    return true;
}

/* ---- The disk tier -------------------------------------------------------- */

/* Pinned staging buffers for restores from disk: the read of one chunk
 * overlaps the host-to-device copy of the previous one. */
#define VS_STAGING_BUFFERS 2
#define VS_STAGING_BYTES VS_SPILL_CHUNK_BYTES

static struct {
    void *buffer[VS_STAGING_BUFFERS];
    CUevent copied[VS_STAGING_BUFFERS]; /* the copy out of each buffer */
    bool ready;
} vs_staging;

static bool vs_staging_prepare(void)
{
    if (vs_staging.ready)
        return true;
    for (int i = 0; i < VS_STAGING_BUFFERS; i++) {
        if (vs_staging.buffer[i] == NULL
            && VS_CALL(cuMemHostAlloc, (&vs_staging.buffer[i], VS_STAGING_BYTES, CU_MEMHOSTALLOC_PORTABLE))
                   != CUDA_SUCCESS) {
            vs_staging.buffer[i] = NULL;
            return false;
        }
        if (vs_staging.copied[i] == NULL
            && VS_CALL(cuEventCreate, (&vs_staging.copied[i], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
            vs_staging.copied[i] = NULL;
            return false;
        }
    }
    vs_staging.ready = true;
    return true;
}

/* The CUDA error an operation gets when its allocation cannot come back
 * from disk: a failed read is the operating system's; a block whose
 * checksum does not match is data the disk corrupted, reported as an
 * uncorrectable memory error (never silently). */
static CUresult vs_disk_error(int rc)
{
    return rc == -EBADMSG ? CUDA_ERROR_ECC_UNCORRECTABLE
           : rc == -ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY
                           : CUDA_ERROR_OPERATING_SYSTEM;
}

/* Copies `r`, on disk, into its freshly mapped memory through the staging
 * buffers, then gives its disk space back. The copy is complete on return
 * (disk reads are synchronous anyway). Engine lock held. */
static CUresult vs_restore_from_disk(vs_region_t *r, vs_engine_device_t *d)
{
    if (!vs_staging_prepare())
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t blocks_per_chunk = VS_STAGING_BYTES / VS_SPILL_BLOCK_BYTES;
    uint64_t total_blocks = (r->size + VS_SPILL_BLOCK_BYTES - 1) / VS_SPILL_BLOCK_BYTES;
    CUresult rc = CUDA_SUCCESS;
    int used[VS_STAGING_BUFFERS] = {0};
    for (uint64_t first = 0, chunk = 0; first < total_blocks && rc == CUDA_SUCCESS; first += blocks_per_chunk, chunk++) {
        int b = (int)(chunk % VS_STAGING_BUFFERS);
        uint64_t blocks = total_blocks - first < blocks_per_chunk ? total_blocks - first : blocks_per_chunk;
        if (used[b] && (rc = VS_CALL(cuEventSynchronize, (vs_staging.copied[b]))) != CUDA_SUCCESS)
            break;
        int read = vs_spill_read(&r->disk, first, blocks, vs_staging.buffer[b]);
        if (read != 0) {
            vs_log(VS_LOG_WARN, "cannot read the allocation at 0x%" PRIxPTR " back from the spill file (%s)", r->base,
                   read == -EBADMSG ? "a block failed its checksum: the data on disk is corrupt" : strerror(-read));
            rc = vs_disk_error(read);
            break;
        }
        uint64_t offset = first * VS_SPILL_BLOCK_BYTES;
        uint64_t n = r->size - offset < blocks * VS_SPILL_BLOCK_BYTES ? r->size - offset : blocks * VS_SPILL_BLOCK_BYTES;
        rc = VS_CALL(cuMemcpyHtoDAsync_v2, ((CUdeviceptr)(r->base + offset), vs_staging.buffer[b], n, d->to_device));
        if (rc == CUDA_SUCCESS)
            rc = VS_CALL(cuEventRecord, (vs_staging.copied[b], d->to_device));
        used[b] = 1;
    }
    CUresult synced = VS_CALL(cuStreamSynchronize, (d->to_device));
    if (rc == CUDA_SUCCESS)
        rc = synced;
    if (rc == CUDA_SUCCESS) {
        vs_engine.stats.disk_reads++;
        vs_engine.stats.bytes_from_disk += r->size;
        vs_spill_release(&r->disk);
    }
    return rc;
}

/* Moves host copies of regions on the host to the spill file until `need`
 * bytes of the pool went back: those predicted to be used last go first.
 * Returns the bytes given back; *failed is the first I/O error. Engine
 * lock held. */
static uint64_t vs_host_spill(uint64_t need, int *failed)
{
    uint64_t freed = 0;
    while (freed < need) {
        vs_region_t *coldest = NULL, *r, *tmp;
        uint64_t coldest_next = 0;
        HASH_ITER(hh, vs_engine.by_base, r, tmp) {
            if (r->where != VS_ON_HOST || r->host.count == 0 || r->evicting)
                continue;
            uint64_t next = VS_POLICY_NEVER;
            vs_policy_t *policy = vs_engine.devices[r->device].policy;
            if (policy != NULL)
                (void)vs_policy_predict(policy, r->id, &next);
            if (coldest == NULL || next > coldest_next) {
                coldest = r;
                coldest_next = next;
            }
        }
        if (coldest == NULL)
            break;
        int rc = vs_spill_write(coldest->host.extents, coldest->host.count, coldest->size, &coldest->disk);
        if (rc != 0) {
            vs_log(VS_LOG_WARN, "cannot spill the allocation at 0x%" PRIxPTR " to VRAMSHIM_SPILL_DIR (%s)", coldest->base,
                   strerror(-rc));
            *failed = rc;
            break;
        }
        freed += coldest->host.bytes;
        vs_host_pool_give(&coldest->host);
        coldest->host_hash_known = false;
        coldest->where = VS_ON_DISK;
        (void)vs_registry_set_residency(coldest->base, VS_ON_DISK, false, NULL);
        vs_engine.stats.spills++;
        vs_engine.stats.bytes_to_disk += coldest->size;
    }
    return freed;
}

/* Gives back the host copies that resident regions keep (only to make
 * later evictions cheaper) until `need` bytes went back. Copies a restore
 * still reads or an eviction writes stay. Returns the bytes given back. */
static uint64_t vs_host_drop_kept(uint64_t need)
{
    uint64_t freed = 0;
    vs_region_t *r, *tmp;
    HASH_ITER(hh, vs_engine.by_base, r, tmp) {
        if (freed >= need)
            break;
        if (r->where != VS_RESIDENT || r->host.count == 0 || r->evicting || r->arriving != NULL)
            continue;
        freed += r->host.bytes;
        vs_host_pool_give(&r->host);
        r->host_hash_known = false;
        vs_engine.stats.host_copies_dropped++;
    }
    return freed;
}

/* Room in the host pool: when it is full, kept host copies of resident
 * regions go first, then those that in-flight restores still read, then
 * (with VRAMSHIM_SPILL_DIR) the coldest evicted allocations go to disk.
 * 0, -ENOSPC (no room and no disk tier), -EIO/-ENOSPC from the disk. */
static int vs_host_take(uint64_t bytes, vs_host_copy_t *out)
{
    vs_deferred_reap(false);
    int rc = vs_host_pool_take(bytes, out);
    if (rc == -ENOSPC && vs_host_drop_kept(bytes) > 0)
        rc = vs_host_pool_take(bytes, out);
    if (rc == -ENOSPC && vs_engine.deferred_head != NULL) {
        vs_deferred_reap(true);
        if (vs_host_drop_kept(bytes) > 0)
            rc = vs_host_pool_take(bytes, out);
    }
    for (int round = 0; rc == -ENOSPC && vs_spill_enabled() && round < 4; round++) {
        int failed = 0;
        uint64_t freed = vs_host_spill(bytes, &failed);
        if (freed > 0)
            rc = vs_host_pool_take(bytes, out);
        if (freed == 0)
            break;
    }
    return rc;
}

/* ---- Waiting for the users of an allocation -------------------------------- */

/* Makes `waiter` wait for all work submitted so far on the streams of
 * `mask`. Returns 0, or -EBUSY when one of them is capturing (its earlier
 * work cannot be waited for without joining the capture). */
/* The oldest marker of stream `slot` closing an epoch >= `epoch`, or NULL. */
static CUevent vs_marker_find(int slot, uint64_t epoch)
{
    const vs_marker_ring_t *ring = &vs_markers[slot];
    for (uint32_t k = 0; k < ring->count; k++) {
        uint32_t at = (ring->next + VS_MARKERS - ring->count + k) % VS_MARKERS;
        if (ring->epoch[at] >= epoch)
            return ring->event[at];
    }
    return NULL;
}

static int vs_fence(uint64_t mask, CUstream waiter, uint64_t epoch)
{
    bool context_sync = (mask & VS_STREAM_BIT_OVERFLOW) != 0;
    pthread_t self = pthread_self();

    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        if ((mask & (1ull << i)) == 0)
            continue;
        vs_stream_entry_t e = vs_stream_entry(i);
        CUstream target;
        switch (e.kind) {
        case VS_STREAM_LEGACY:
            target = CU_STREAM_LEGACY;
            break;
        case VS_STREAM_PER_THREAD:
            if (!pthread_equal(e.owner, self)) {
                /* Another thread's per-thread stream: only a marker it
                 * recorded can be waited for from here. */
                CUevent marker = epoch != 0 ? vs_marker_find(i, epoch) : NULL;
                if (marker == NULL || VS_CALL(cuStreamWaitEvent, (waiter, marker, 0)) != CUDA_SUCCESS)
                    context_sync = true;
                continue;
            }
            target = CU_STREAM_PER_THREAD;
            break;
        case VS_STREAM_HANDLE:
            target = e.handle;
            break;
        default:
            continue; /* destroyed: its work was waited for then */
        }
        CUevent marker = epoch != 0 ? vs_marker_find(i, epoch) : NULL;
        if (marker != NULL && VS_CALL(cuStreamWaitEvent, (waiter, marker, 0)) == CUDA_SUCCESS)
            continue;
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        if (VS_CALL(cuStreamIsCapturing, (target, &status)) == CUDA_SUCCESS
            && status != CU_STREAM_CAPTURE_STATUS_NONE)
            return -EBUSY;
        CUevent ev = vs_event_get();
        vs_log(VS_LOG_DEBUG, "waiting for stream %p (bit %d) with event %p", (void *)target, i, (void *)ev);
        if (ev == NULL || VS_CALL(cuEventRecord, (ev, target)) != CUDA_SUCCESS
            || VS_CALL(cuStreamWaitEvent, (waiter, ev, 0)) != CUDA_SUCCESS) {
            context_sync = true;
        }
        vs_event_put(ev);
    }
    if (context_sync && VS_CALL(cuCtxSynchronize, ()) != CUDA_SUCCESS)
        return -EIO;
    return 0;
}

/* Whether any stream of `mask` is capturing now. */
static bool vs_mask_capturing(uint64_t mask)
{
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        if ((mask & (1ull << i)) == 0)
            continue;
        vs_stream_entry_t e = vs_stream_entry(i);
        if (e.kind != VS_STREAM_HANDLE)
            continue;
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        if (VS_CALL(cuStreamIsCapturing, (e.handle, &status)) == CUDA_SUCCESS
            && status != CU_STREAM_CAPTURE_STATUS_NONE)
            return true;
    }
    return false;
}

/* ---- Copies -------------------------------------------------------------- */

typedef enum vs_copy_direction_e {
    VS_COPY_OUT, /* device to host copy (eviction) */
    VS_COPY_IN,  /* host copy to device (restore) */
} vs_copy_direction_t;

/* Copies the region between the device and its host copy, extent by extent
 * in chunks of VS_COPY_CHUNK_BYTES, asynchronously on `stream`. */
static CUresult vs_copy_region(const vs_region_t *r, vs_copy_direction_t direction, CUstream stream)
{
    uint64_t offset = 0;
    for (uint32_t i = 0; i < r->host.count && offset < r->size; i++) {
        const vs_host_extent_t *e = &r->host.extents[i];
        for (uint64_t done = 0; done < e->bytes && offset < r->size;) {
            uint64_t n = e->bytes - done;
            if (n > VS_COPY_CHUNK_BYTES)
                n = VS_COPY_CHUNK_BYTES;
            if (n > r->size - offset)
                n = r->size - offset;
            unsigned char *host = (unsigned char *)e->ptr + done;
            CUdeviceptr device = (CUdeviceptr)(r->base + offset);
            CUresult rc = direction == VS_COPY_OUT ? VS_CALL(cuMemcpyDtoHAsync_v2, (host, device, n, stream))
                                                   : VS_CALL(cuMemcpyHtoDAsync_v2, (device, host, n, stream));
            if (rc != CUDA_SUCCESS)
                return rc;
            done += n;
            offset += n;
        }
    }
    return CUDA_SUCCESS;
}

/* ---- Physical memory ----------------------------------------------------- */

static CUresult vs_physical_map(vs_region_t *r)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = r->device;
    CUmemGenericAllocationHandle phys;
    CUresult rc = VS_CALL(cuMemCreate, (&phys, r->reserved, &prop, 0));
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = VS_CALL(cuMemMap, ((CUdeviceptr)r->base, r->reserved, 0, phys, 0));
    if (rc != CUDA_SUCCESS) {
        (void)VS_CALL(cuMemRelease, (phys));
        return rc;
    }
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = r->device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    rc = VS_CALL(cuMemSetAccess, ((CUdeviceptr)r->base, r->reserved, &access, 1));
    if (rc != CUDA_SUCCESS) {
        (void)VS_CALL(cuMemUnmap, ((CUdeviceptr)r->base, r->reserved));
        (void)VS_CALL(cuMemRelease, (phys));
        return rc;
    }
    r->phys = phys;
    return CUDA_SUCCESS;
}

/* vs_make_room is defined with eviction, below. */
static int vs_make_room(int device, uint64_t need, bool ignore_limit);
static void vs_policy_reset_skips(void);

/* Maps physical memory for `r`, whose bytes are already counted; when the
 * device itself is full (other processes, a limit above its size), evicts
 * whatever it takes and tries again. */
static CUresult vs_physical_map_evicting(vs_region_t *r)
{
    CUresult rc;
    while ((rc = vs_physical_map(r)) == CUDA_ERROR_OUT_OF_MEMORY) {
        int room = vs_make_room(r->device, r->reserved, true);
        vs_policy_reset_skips();
        if (room != 0)
            break;
        vs_cap_release(r->device, r->reserved); /* counted twice by the reclaim */
    }
    return rc;
}

static void vs_physical_unmap(vs_region_t *r)
{
    (void)VS_CALL(cuMemUnmap, ((CUdeviceptr)r->base, r->reserved));
    (void)VS_CALL(cuMemRelease, (r->phys));
    r->phys = 0;
}

/* Makes `waiter` wait for a restore copy's event, or, when it cannot (a
 * stream being destroyed), waits for the copy here. Engine lock held. */
static CUresult vs_wait_for_copy(CUstream waiter, CUevent copied)
{
    CUresult rc = VS_CALL(cuStreamWaitEvent, (waiter, copied, 0));
    return rc == CUDA_SUCCESS ? rc : VS_CALL(cuEventSynchronize, (copied));
}

/* ---- Policy bookkeeping -------------------------------------------------- */

static bool vs_region_evictable(const vs_region_t *r)
{
    return !r->pinned && r->holds == 0;
}

static void vs_policy_refresh(vs_region_t *r)
{
    vs_engine_device_t *d = &vs_engine.devices[r->device];
    if (d->policy != NULL)
        (void)vs_policy_set_evictable(d->policy, r->id, vs_region_evictable(r));
}

/* The last uses the launch path stamped since the policy last heard of
 * them, gathered from the registry: the policy must hear them in the order
 * they happened (it takes a use older than one it has seen as happening
 * now, which would blur the gaps it learns the cycle from). */
typedef struct vs_use_s {
    uint64_t seq;
    vs_region_t *region;
} vs_use_t;

typedef struct vs_uses_s {
    vs_use_t *uses;
    size_t count, capacity;
} vs_uses_t;

/* A prefetched region was used, evicted or freed: it no longer counts
 * against the prefetch window. */
static void vs_prefetch_forget(vs_region_t *r)
{
    if (r->prefetched) {
        r->prefetched = false;
        vs_engine.devices[r->device].prefetched_bytes -= r->reserved;
    }
}

static void vs_policy_gather_one(const vs_alloc_info_t *info, void *arg)
{
    vs_uses_t *uses = arg;
    vs_region_t *r = vs_region_at(info->base);
    if (r == NULL || info->last_use_seq <= r->synced_seq)
        return;
    if (uses->count == uses->capacity) {
        size_t capacity = uses->capacity ? uses->capacity * 2 : 64;
        vs_use_t *grown = realloc(uses->uses, capacity * sizeof *grown);
        if (grown == NULL)
            return; /* told next time */
        uses->uses = grown;
        uses->capacity = capacity;
    }
    uses->uses[uses->count++] = (vs_use_t){.seq = info->last_use_seq, .region = r};
}

static int vs_use_order(const void *a, const void *b)
{
    uint64_t x = ((const vs_use_t *)a)->seq, y = ((const vs_use_t *)b)->seq;
    return x < y ? -1 : x > y;
}

/* Tells the policy, in order, the uses stamped since the last call. Engine
 * lock held. */
static void vs_policy_sync(void)
{
    static vs_uses_t uses; /* reused: engine lock held */
    uses.count = 0;
    vs_registry_foreach(vs_policy_gather_one, &uses);
    if (uses.count > 1)
        qsort(uses.uses, uses.count, sizeof *uses.uses, vs_use_order);
    for (size_t i = 0; i < uses.count; i++) {
        vs_region_t *r = uses.uses[i].region;
        r->synced_seq = uses.uses[i].seq;
        vs_prefetch_forget(r); /* used since it was prefetched */
        vs_engine_device_t *d = &vs_engine.devices[r->device];
        if (d->policy != NULL)
            (void)vs_policy_access(d->policy, r->id, r->synced_seq, VS_POLICY_RW_UNKNOWN);
    }
}

/* ---- Eviction ------------------------------------------------------------ */

/* Puts back on the device a victim whose eviction cannot finish: every
 * stream in `streams` may still use it. */
static void vs_evict_undo(vs_region_t *r, bool had_copy, uint64_t streams)
{
    if (!had_copy) {
        vs_host_pool_give(&r->host);
        r->host_hash_known = false;
    }
    r->evicting = false;
    (void)vs_registry_set_residency(r->base, VS_RESIDENT, false, NULL);
    vs_registry_add_streams(r->base, streams);
}

/* The hash of the host copy, when it is known. */
static bool vs_host_hash(const vs_region_t *r, vs_content_hash_t *out)
{
    if (!r->host_hash_known || r->host.count == 0)
        return false;
    *out = r->host_hash;
    return true;
}

/* Evicts the regions of `victims` (all resident, on one device; at most
 * VS_EVICT_BATCH). Returns the bytes evicted; *host_full is set when the
 * host pool had no room.
 *
 * For each victim, once its users are done: the content-hash kernel runs
 * over it. A victim without a host copy is copied out at once (the hash
 * becomes its copy's). One with a host copy waits for the verdict: when the
 * device bytes hash to what the host copy hashes to, nothing is copied (a
 * clean eviction: inference weights); otherwise it is copied over its host
 * copy. Then the physical memory goes. */
static uint64_t vs_evict(vs_region_t **victims, size_t count, bool *host_full)
{
    int device = victims[0]->device;
    vs_engine_device_t *d = &vs_engine.devices[device];
    vs_device_hasher_t *hasher = vs_evict_hasher(d, device);
    bool had_copy[VS_EVICT_BATCH], copied[VS_EVICT_BATCH];
    uint64_t streams_of[VS_EVICT_BATCH];
    size_t started = 0;
    uint64_t freed = 0;

    if (count > VS_EVICT_BATCH)
        count = VS_EVICT_BATCH;
    for (size_t i = 0; i < count; i++) {
        vs_region_t *r = victims[i];
        uint64_t streams = 0;
        if (vs_registry_streams(r->base, &streams) == 0 && vs_mask_capturing(streams)) {
            victims[i] = NULL; /* used by a capture in progress: not now */
            continue;
        }
        had_copy[i] = r->host.count > 0;
        if (!had_copy[i] && vs_host_take(r->size, &r->host) != 0) {
            *host_full = true;
            for (size_t j = i; j < count; j++)
                victims[j] = NULL;
            break;
        }
        vs_alloc_info_t last;
        uint64_t epoch = vs_registry_find(r->base, &last) == 0 ? last.last_use_epoch : 0;
        (void)vs_registry_set_residency(r->base, VS_MOVING, false, &streams);
        streams_of[i] = streams;
        r->evicting = true;
        vs_log(VS_LOG_DEBUG, "evicting 0x%" PRIxPTR " (%" PRIu64 " bytes), used by streams 0x%" PRIx64, r->base,
               r->size, streams);
        if (r->arriving != NULL) {
            /* The copy out waits for the copy in. From here the region is
             * no longer arriving: the deferred entry that still owns the
             * event must not mark it resident while it moves. */
            (void)vs_wait_for_copy(d->to_host, r->arriving); /* or waits here */
            r->arriving = NULL;
        }
        if (vs_fence(streams, d->to_host, epoch) != 0) {
            vs_log(VS_LOG_WARN, "cannot evict the allocation at 0x%" PRIxPTR "; it stays on the device", r->base);
            (void)VS_CALL(cuStreamSynchronize, (d->to_host)); /* covers the copy in */
            vs_evict_undo(r, had_copy[i], streams);
            victims[i] = NULL;
            continue;
        }
        r->hash_slot = -1;
        if (hasher != NULL
            && vs_device_hash_enqueue(hasher, (unsigned)i, (CUdeviceptr)r->base, r->size, d->to_host) == CUDA_SUCCESS)
            r->hash_slot = (int)i;
        /* Without a host copy, or a hash to judge it by, the bytes go now. */
        copied[i] = !had_copy[i] || r->hash_slot < 0 || !r->host_hash_known;
        if (copied[i] && vs_copy_region(r, VS_COPY_OUT, d->to_host) != CUDA_SUCCESS) {
            vs_log(VS_LOG_WARN, "cannot evict the allocation at 0x%" PRIxPTR "; it stays on the device", r->base);
            (void)VS_CALL(cuStreamSynchronize, (d->to_host));
            vs_evict_undo(r, had_copy[i], streams);
            victims[i] = NULL;
            continue;
        }
        started++;
    }
    if (started == 0)
        return 0;
    /* One wait for the whole batch, then the verdicts; a second wait when
     * some of them must be copied after all. */
    CUresult rc = VS_CALL(cuStreamSynchronize, (d->to_host));
    bool second = false;
    for (size_t i = 0; i < count && rc == CUDA_SUCCESS; i++) {
        vs_region_t *r = victims[i];
        if (r == NULL || copied[i])
            continue;
        vs_content_hash_t on_device = vs_device_hash_result(hasher, (unsigned)i, r->size), on_host;
        if (vs_host_hash(r, &on_host) && vs_content_hash_equal(on_device, on_host))
            continue;
        copied[i] = true;
        second = true;
        if (vs_copy_region(r, VS_COPY_OUT, d->to_host) != CUDA_SUCCESS) {
            rc = CUDA_ERROR_UNKNOWN; /* handled below, for every victim of the batch */
            break;
        }
    }
    if (second && rc == CUDA_SUCCESS)
        rc = VS_CALL(cuStreamSynchronize, (d->to_host));
    else if (second)
        (void)VS_CALL(cuStreamSynchronize, (d->to_host));
    for (size_t i = 0; i < count; i++) {
        vs_region_t *r = victims[i];
        if (r == NULL)
            continue;
        if (rc != CUDA_SUCCESS) {
            /* Nothing is known to have been waited for: every stream may
             * still be using it. A host copy written in part is no longer
             * what its hash says. */
            vs_log(VS_LOG_WARN, "copying the allocation at 0x%" PRIxPTR " to the host failed (%d); it stays on the device",
                   r->base, (int)rc);
            r->host_hash_known = r->host_hash_known && !copied[i];
            vs_evict_undo(r, had_copy[i], streams_of[i] | VS_STREAM_BIT_OVERFLOW);
            continue;
        }
        if (r->hash_slot >= 0) {
            /* The kernel hashed exactly the bytes the copy then took (or
             * that the host copy already held). */
            r->host_hash = vs_device_hash_result(hasher, (unsigned)r->hash_slot, r->size);
            r->host_hash_known = true;
        } else {
            r->host_hash_known = false;
        }
        vs_physical_unmap(r);
        vs_cap_release(r->device, r->reserved);
        r->where = VS_ON_HOST;
        r->evicting = false;
        (void)vs_registry_set_residency(r->base, VS_ON_HOST, true, NULL);
        if (d->policy != NULL)
            (void)vs_policy_set_resident(d->policy, r->id, false);
        if (r->prefetched)
            vs_engine.stats.prefetch_unused++;
        vs_prefetch_forget(r);
        vs_engine.stats.evictions++;
        vs_log(VS_LOG_DEBUG, "evicted 0x%" PRIxPTR ": %s", r->base,
               copied[i] ? (had_copy[i] ? "copied (changed)" : "copied (no host copy)") : "clean, nothing copied");
        if (copied[i]) {
            vs_engine.stats.bytes_to_host += r->size;
        } else {
            vs_engine.stats.clean_drops++;
            vs_engine.stats.bytes_not_copied += r->size;
        }
        freed += r->reserved;
    }
    return freed;
}

/* With prefetch, tells the policy what the allocations of its learned cycle
 * may keep resident: the limit, less what else is resident (allocations too
 * small to evict) and room for two of the largest (one arriving while the
 * one before is used). The policy then keeps a fixed set and spreads what it
 * streams over the cycle, so that every copy overlaps compute. Without
 * prefetch nothing overlaps: Belady's order alone moves the fewest bytes. */
static void vs_policy_budget_update(vs_engine_device_t *d, int device)
{
    if (!vs_config_get()->prefetch || vs_policy_kind(d->policy) == VS_POLICY_LRU) {
        vs_policy_set_budget(d->policy, UINT64_MAX);
        return;
    }
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    uint64_t limit = vs_cap_limit(device), used = vs_cap_used(device);
    uint64_t others = used > ps.resident_bytes ? used - ps.resident_bytes : 0;
    uint64_t taken = others + 2 * d->largest;
    vs_policy_set_budget(d->policy, limit > taken ? limit - taken : 0);
}

/* Evicts from `device` until `need` more bytes fit under its limit (or, with
 * `ignore_limit`, until `need` bytes were freed), then counts `need` as
 * used. 0; -ENOSPC when nothing more can be evicted (nothing was counted);
 * -ENOMEM when the host pool is full. */
static int vs_make_room(int device, uint64_t need, bool ignore_limit)
{
    vs_engine_device_t *d = vs_device(device);
    uint64_t freed_total = 0;
    bool synced = false;

    for (int round = 0;; round++) {
        if (!ignore_limit && vs_cap_reserve(device, need) == 0)
            return 0;
        if (ignore_limit && freed_total >= need) {
            vs_cap_charge(device, need);
            return 0;
        }
        if (d == NULL || d->policy == NULL)
            return -ENOSPC;
        uint64_t deficit;
        if (ignore_limit) {
            deficit = need - freed_total;
        } else {
            uint64_t limit = vs_cap_limit(device), used = vs_cap_used(device);
            deficit = used + need > limit ? used + need - limit : need;
        }
        if (!synced) {
            vs_policy_sync();
            vs_policy_budget_update(d, device);
            synced = true;
        }
        uint64_t ids[VS_EVICT_BATCH];
        size_t n = 0;
        int rc = vs_policy_victims(d->policy, deficit, NULL, 0, ids, VS_EVICT_BATCH, &n);
        if ((rc != 0 && rc != -ENOBUFS && rc != -ENOSPC) || n == 0)
            return -ENOSPC;
        vs_region_t *victims[VS_EVICT_BATCH], *chosen[VS_EVICT_BATCH];
        size_t count = 0;
        for (size_t i = 0; i < n; i++) {
            vs_region_t *r;
            HASH_FIND(hh_id, vs_engine.by_id, &ids[i], sizeof ids[i], r);
            if (r != NULL && r->where == VS_RESIDENT && vs_region_evictable(r))
                victims[count++] = r;
        }
        if (count == 0)
            return -ENOSPC;
        memcpy(chosen, victims, count * sizeof *chosen);
        bool host_full = false;
        uint64_t freed = vs_evict(victims, count, &host_full);
        freed_total += freed;
        if (freed == 0) {
            if (host_full)
                return -ENOMEM;
            /* Chosen but not evictable now (captures): keep them out of the
             * next choice of this call. */
            for (size_t i = 0; i < count; i++)
                (void)vs_policy_set_evictable(d->policy, chosen[i]->id, false);
            if (round > 64)
                return -ENOSPC;
        }
    }
}

/* Re-allows the policy to choose every region it was told to skip. */
static void vs_policy_reset_skips(void)
{
    vs_region_t *r, *tmp;
    HASH_ITER(hh, vs_engine.by_base, r, tmp) {
        if (r->where == VS_RESIDENT)
            vs_policy_refresh(r);
    }
}

/* Counts `bytes` on `device` for something that must be resident: within
 * the limit when eviction allows, past it (with one warning) otherwise.
 * Engine lock held. 0 or -ENOMEM (host pool full). */
static int vs_charge_locked(int device, uint64_t bytes, const char *what, uint32_t own_holding)
{
    int rc;
    for (int waits = 0;; waits++) {
        rc = vs_make_room(device, bytes, false);
        vs_policy_reset_skips();
        if (rc == 0)
            return 0;
        if (rc == -ENOMEM)
            return rc;
        /* Other threads' operations hold memory only until they are
         * submitted: wait for them rather than pass the limit. Bounded, so
         * that two operations can never wait for each other for long. */
        if (vs_engine.ops_holding <= own_holding || waits >= VS_ROOM_WAITS)
            break;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += VS_ROOM_WAIT_MS * 1000000l;
        if (until.tv_nsec >= 1000000000l) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000l;
        }
        pthread_cond_timedwait(&vs_engine.released, &vs_engine.lock, &until);
    }
    vs_cap_charge(device, bytes);
    vs_engine.stats.over_limit++;
    atomic_store_explicit(&vs_engine.over_limit, true, memory_order_relaxed);
    if (!vs_engine.warned_over_limit) {
        vs_engine.warned_over_limit = true;
        vs_log(VS_LOG_WARN,
               "device %d: %s needs more than VRAM_LIMIT leaves (%" PRIu64 " of %" PRIu64
               " bytes in use, nothing more can be evicted); going past the limit",
               device, what, vs_cap_used(device), vs_cap_limit(device));
    }
    return 0;
}

/* ---- Restore ------------------------------------------------------------- */

/* A free slot of the restore hasher, or -1. */
static int vs_restore_hash_slot(vs_engine_device_t *d)
{
    if (d->restore_hasher == NULL || d->restore_slots_busy == ~0ull)
        return -1;
    int slot = __builtin_ctzll(~d->restore_slots_busy);
    if ((unsigned)slot >= vs_device_hasher_slots(d->restore_hasher))
        return -1;
    d->restore_slots_busy |= 1ull << slot;
    return slot;
}

/* Copies `r`'s host copy to its freshly mapped memory on the host-to-device
 * stream and leaves it arriving. When its host copy's hash is not known,
 * the hash of what arrived becomes it. With `waiter` (an application
 * stream), that stream waits for the copy. Engine lock held. */
static CUresult vs_restore_copy(vs_region_t *r, vs_engine_device_t *d, CUstream waiter, bool wait)
{
    CUevent done = vs_event_get();
    CUresult rc = vs_copy_region(r, VS_COPY_IN, d->to_device);
    int hash_slot = -1;
    if (rc == CUDA_SUCCESS && !r->host_hash_known && vs_evict_hasher(d, r->device) != NULL
        && (hash_slot = vs_restore_hash_slot(d)) >= 0
        && vs_device_hash_enqueue(d->restore_hasher, (unsigned)hash_slot, (CUdeviceptr)r->base, r->size,
                                  d->to_device)
               != CUDA_SUCCESS) {
        vs_restore_hash_end(d, NULL, hash_slot, 0, false);
        hash_slot = -1;
    }
    if (rc == CUDA_SUCCESS)
        rc = done != NULL ? VS_CALL(cuEventRecord, (done, d->to_device)) : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && wait)
        rc = vs_wait_for_copy(waiter, done);
    if (rc != CUDA_SUCCESS) {
        vs_log(VS_LOG_WARN, "cannot copy the allocation at 0x%" PRIxPTR " back to the device (error %d)", r->base,
               (int)rc);
        (void)VS_CALL(cuStreamSynchronize, (d->to_device));
        vs_restore_hash_end(d, NULL, hash_slot, 0, false);
        vs_event_put(done);
        return rc;
    }
    /* Streams other than `waiter` must wait for the copy too, until it is
     * known to be over: the region arrives, then is resident. */
    bool arriving = vs_deferred_push(done, r, hash_slot);
    r->arriving = arriving ? done : NULL;
    r->where = VS_RESIDENT;
    (void)vs_registry_set_residency(r->base, arriving ? VS_ARRIVING : VS_RESIDENT, true, NULL);
    return CUDA_SUCCESS;
}

/* Maps `r` (already counted) and brings its bytes back; `stream` (of the
 * variant `per_thread`) waits for them unless this is a prefetch. Engine
 * lock held. */
static CUresult vs_restore_mapped(vs_region_t *r, vs_engine_device_t *d, CUstream stream, bool per_thread,
                                  bool prefetch)
{
    CUresult rc = vs_physical_map_evicting(r);
    if (rc != CUDA_SUCCESS) {
        vs_cap_release(r->device, r->reserved);
        vs_log(VS_LOG_WARN, "cannot map device memory to restore the allocation at 0x%" PRIxPTR " (error %d)",
               r->base, (int)rc);
        return rc;
    }
    vs_log(VS_LOG_DEBUG, "%s 0x%" PRIxPTR " (%" PRIu64 " bytes%s) for stream %p", prefetch ? "prefetching" : "restoring",
           r->base, r->size, r->host.count == 0 ? ", no data yet" : "", (void *)stream);
    if (r->where == VS_ON_DISK) {
        rc = vs_restore_from_disk(r, d);
        if (rc != CUDA_SUCCESS) {
            vs_physical_unmap(r);
            vs_cap_release(r->device, r->reserved);
            return rc;
        }
        r->where = VS_RESIDENT;
        (void)vs_registry_set_residency(r->base, VS_RESIDENT, true, NULL);
        vs_engine.stats.bytes_to_device += r->size;
    } else if (r->host.count == 0) {
        /* Placed on the host at allocation and never written: nothing to
         * copy (its contents are undefined, as cuMemAlloc's are). */
        r->where = VS_RESIDENT;
        (void)vs_registry_set_residency(r->base, VS_RESIDENT, true, NULL);
    } else {
        rc = vs_restore_copy(r, d, vs_stream_resolve(stream, per_thread), !prefetch);
        if (rc != CUDA_SUCCESS) {
            vs_physical_unmap(r);
            vs_cap_release(r->device, r->reserved);
            return rc;
        }
        vs_engine.stats.bytes_to_device += r->size;
    }
    if (d->policy != NULL)
        (void)vs_policy_set_resident(d->policy, r->id, true);
    vs_engine.stats.restores++;
    /* Its use is news to the prefetcher when it was prefetched (the window
     * frees) or is streamed by the plan (it becomes the next victim). */
    bool watched = prefetch;
    if (!watched && d->policy != NULL) {
        vs_policy_stats_t ps;
        vs_policy_stats(d->policy, &ps);
        watched = ps.planned_streamed_bytes > 0 && !vs_policy_planned_resident(d->policy, r->id);
    }
    (void)vs_registry_set_watched(r->base, watched);
    if (prefetch) {
        r->prefetched = true;
        d->prefetched_bytes += r->reserved;
        vs_engine.stats.prefetches++;
        vs_engine.stats.prefetch_bytes += r->size;
    }
    return CUDA_SUCCESS;
}

/* Brings `r` back and makes `stream` (of the variant `per_thread`) wait for
 * it. Engine lock held. */
static CUresult vs_restore(vs_region_t *r, CUstream stream, bool per_thread, uint32_t own_holding)
{
    vs_engine_device_t *d = vs_device(r->device);
    uintptr_t base = r->base;
    int device = r->device;
    uint64_t reserved = r->reserved;
    if (d == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vs_charge_locked(device, reserved, "an operation", own_holding) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Making room may have waited (and let go of the engine lock): another
     * thread may have restored or freed the region meanwhile. */
    r = vs_region_at(base);
    if (r == NULL || r->where == VS_RESIDENT) {
        vs_cap_release(device, reserved);
        if (r != NULL && r->arriving != NULL)
            (void)vs_wait_for_copy(vs_stream_resolve(stream, per_thread), r->arriving);
        return CUDA_SUCCESS;
    }
    return vs_restore_mapped(r, d, stream, per_thread, false);
}

/* ---- Prefetch ------------------------------------------------------------ */

static vs_region_t *vs_region_containing(uintptr_t addr)
{
    vs_alloc_info_t info;
    if (vs_registry_find(addr, &info) != 0)
        return NULL;
    return vs_region_at(info.base);
}

/* Room for `need` bytes on `device` for a prefetch whose use is predicted
 * at `next_use`: only by evicting allocations predicted to be used later
 * than that (a prefetch never evicts what is needed sooner) and that the
 * plan streams. A step run for an operation that names no evictable
 * allocation directly spares what the operation just before used: such an
 * operation may read, through a pointer table, the buffers its predecessor
 * wrote (preload_offload's pointer_table scenario), and without prefetch it
 * would evict nothing. Counts `need`
 * on success. 0 or -EAGAIN. Engine lock held. */
static int vs_prefetch_room(vs_engine_device_t *d, int device, uint64_t need, uint64_t next_use)
{
    for (int round = 0; round < 8; round++) {
        if (vs_cap_reserve(device, need) == 0)
            return 0;
        uint64_t limit = vs_cap_limit(device), used = vs_cap_used(device);
        uint64_t deficit = used + need > limit ? used + need - limit : need;
        uint64_t ids[VS_EVICT_BATCH];
        size_t n = 0;
        int rc = vs_policy_victims(d->policy, deficit, NULL, 0, ids, VS_EVICT_BATCH, &n);
        if ((rc != 0 && rc != -ENOBUFS) || n == 0)
            return -EAGAIN;
        vs_region_t *victims[VS_EVICT_BATCH];
        size_t count = 0;
        bool skipped = false;
        for (size_t i = 0; i < n; i++) {
            vs_region_t *r;
            uint64_t victim_next = 0;
            HASH_FIND(hh_id, vs_engine.by_id, &ids[i], sizeof ids[i], r);
            if (r == NULL || r->where != VS_RESIDENT || !vs_region_evictable(r))
                return -EAGAIN;
            if (r->prefetched) {
                /* Brought in for a nearer use by an earlier prefetch. */
                (void)vs_policy_set_evictable(d->policy, r->id, false);
                skipped = true;
                continue;
            }
            if (vs_policy_predict(d->policy, r->id, &victim_next) != 0 || victim_next <= next_use
                || vs_policy_planned_resident(d->policy, r->id)
                || (vs_engine.prefetch_spares_recent && r->synced_seq + 1 >= vs_registry_current_seq()))
                return -EAGAIN; /* needed sooner than what would replace it, kept, or just used */
            victims[count++] = r;
        }
        if (skipped)
            continue; /* ask again without them (vs_prefetch resets the skips) */
        bool host_full = false;
        if (vs_evict(victims, count, &host_full) == 0)
            return -EAGAIN;
    }
    return -EAGAIN;
}

/* Restores, on the host-to-device stream and without making anyone wait,
 * the allocations the policy predicts are needed next, within a window of
 * twice the largest allocation (double buffering: one arriving while the
 * one before is used): the copies run while the current work computes. A
 * wrong prediction costs bandwidth, never correctness: the region is simply
 * resident (arriving) earlier. Engine lock held. */
static void vs_prefetch(int device)
{
    vs_engine_device_t *d = &vs_engine.devices[device];
    /* LRU ranks a region prefetched a cycle after its last use first among
     * victims: it stays the baseline, without prefetch. */
    if (!d->ready || d->policy == NULL || vs_policy_kind(d->policy) == VS_POLICY_LRU || !vs_config_get()->prefetch)
        return;
    vs_policy_budget_update(d, device);
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    uint64_t window = 2 * d->largest;
    if (ps.period == 0 || d->prefetched_bytes >= window)
        return; /* nothing learned yet, or what was prefetched is not used yet */
    uint64_t ids[8];
    size_t n = 0;
    if (vs_policy_prefetch(d->policy, window - d->prefetched_bytes, ids, 8, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        vs_region_t *r;
        uint64_t next_use = 0;
        HASH_FIND(hh_id, vs_engine.by_id, &ids[i], sizeof ids[i], r);
        if (r == NULL || r->where == VS_RESIDENT || r->pinned || (r->host.count == 0 && r->where != VS_ON_DISK)
            || vs_policy_predict(d->policy, r->id, &next_use) != 0 || next_use == VS_POLICY_NEVER)
            continue;
        if (vs_prefetch_room(d, device, r->reserved, next_use) != 0)
            break; /* room comes once what is used now is done */
        if (vs_restore_mapped(r, d, NULL, false, true) != CUDA_SUCCESS)
            break;
    }
    vs_policy_reset_skips();
}

/* Prefetches on every device. Engine lock held. */
static void vs_prefetch_all(void)
{
    /* The next step comes when an operation uses a watched region. */
    atomic_store_explicit(&vs_engine.prefetch_step_due, false, memory_order_relaxed);
    for (int device = 0; device < VS_MAX_DEVICES; device++)
        if (vs_engine.devices[device].ready)
            vs_prefetch(device);
}

/* A prefetch step, run by the operation after one that used a watched
 * region (prefetched, or streamed by the plan), before its own scan: that
 * use made room in the window and a victim of the region, and the copy
 * engine should take up the next one now rather than when something is
 * found missing. Running before the scan, the operation's own allocations
 * are the nearest uses, never victims. */
static void vs_prefetch_step(const uintptr_t *words, size_t count)
{
    CUstreamCaptureMode mode;
    vs_engine_lock(&mode);
    bool direct = false;
    for (size_t i = 0; i < count && !direct; i++)
        direct = vs_region_containing(words[i]) != NULL;
    vs_engine.prefetch_spares_recent = !direct;
    vs_deferred_reap(false);
    vs_policy_sync();
    vs_prefetch_all();
    vs_engine.prefetch_spares_recent = false;
    vs_engine_unlock(mode);
}

/* ---- Allocation and free ------------------------------------------------- */

CUresult vs_offload_alloc(CUdeviceptr *dptr, uint64_t bytes, int device, vs_alloc_kind_t kind)
{
    CUstreamCaptureMode mode;
    CUresult rc;
    CUdeviceptr va = 0;

    if (dptr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    vs_engine_lock(&mode);
    vs_engine_device_t *d = vs_device(device);
    vs_region_t *r = calloc(1, sizeof *r);
    if (d == NULL || r == NULL) {
        rc = d == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    r->size = bytes;
    r->reserved = (bytes + d->granularity - 1) / d->granularity * d->granularity;
    if (r->reserved > d->largest) {
        d->second = d->largest;
        d->largest = r->reserved;
    } else if (r->reserved < d->largest && r->reserved > d->second) {
        d->second = r->reserved;
    }
    r->device = device;
    r->ctx = d->ctx;
    rc = VS_CALL(cuMemAddressReserve, (&va, r->reserved, 0, 0, 0));
    if (rc != CUDA_SUCCESS)
        goto fail;
    r->base = (uintptr_t)va;
    /* With no room without evicting, start on the host side, holding no
     * data yet: the first copy into it lands in its host copy; the first
     * kernel that uses it maps it, with nothing to copy. */
    bool resident = vs_cap_reserve(device, r->reserved) == 0;
    if (resident && (rc = vs_physical_map_evicting(r)) != CUDA_SUCCESS) {
        vs_cap_release(device, r->reserved);
        goto fail;
    }
    vs_alloc_desc_t desc = {.base = r->base, .size = bytes, .device = device, .kind = kind, .handle = 0};
    if (vs_registry_add(&desc, &r->id) != 0) {
        if (resident) {
            vs_physical_unmap(r);
            vs_cap_release(device, r->reserved);
        }
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    r->where = resident ? VS_RESIDENT : VS_ON_HOST;
    if (!resident) {
        (void)vs_registry_set_residency(r->base, VS_ON_HOST, false, NULL);
        vs_engine.stats.placed_on_host++;
        vs_log(VS_LOG_DEBUG, "placed 0x%" PRIxPTR " (%" PRIu64 " bytes) on the host: no room", r->base, bytes);
    }
    if (vs_policy_alloc(d->policy, r->id, r->reserved, true, resident) != 0) {
        vs_log(VS_LOG_WARN, "the eviction policy cannot track allocation %" PRIu64 "; it stays where it is", r->id);
        r->pinned = true;
    }
    HASH_ADD(hh, vs_engine.by_base, base, sizeof r->base, r);
    HASH_ADD(hh_id, vs_engine.by_id, id, sizeof r->id, r);
    vs_engine_unlock(mode);
    *dptr = va;
    return CUDA_SUCCESS;

fail:
    if (va != 0)
        (void)VS_CALL(cuMemAddressFree, (va, r->reserved));
    free(r);
    vs_engine_unlock(mode);
    return rc;
}

bool vs_offload_free(CUdeviceptr dptr, CUresult *rc_out)
{
    CUstreamCaptureMode mode;
    uintptr_t base = (uintptr_t)dptr;
    vs_region_t *r;

    if (!vs_offload_enabled() || dptr == 0)
        return false;
    vs_engine_lock(&mode);
    r = vs_region_at(base);
    if (r == NULL) {
        vs_engine_unlock(mode);
        return false;
    }
    uint64_t streams = 0;
    (void)vs_registry_set_residency(base, VS_MOVING, false, &streams);
    vs_registry_remove(base, ~0u, NULL);
    vs_engine_device_t *d = &vs_engine.devices[r->device];
    if (r->where == VS_RESIDENT) {
        /* Like cuMemFree: the memory goes once the work using it is done. */
        if (r->arriving != NULL)
            (void)VS_CALL(cuEventSynchronize, (r->arriving));
        r->arriving = NULL;
        if (vs_fence(streams, d->to_host, 0) != 0)
            (void)VS_CALL(cuCtxSynchronize, ());
        (void)VS_CALL(cuStreamSynchronize, (d->to_host));
        vs_physical_unmap(r);
        vs_cap_release(r->device, r->reserved);
    }
    /* A restore that still reads the host copy was waited for above. */
    vs_host_pool_give(&r->host);
    vs_spill_release(&r->disk);
    vs_prefetch_forget(r);
    if (d->policy != NULL)
        (void)vs_policy_free(d->policy, r->id);
    HASH_DELETE(hh, vs_engine.by_base, r);
    HASH_DELETE(hh_id, vs_engine.by_id, r);
    *rc_out = VS_CALL(cuMemAddressFree, ((CUdeviceptr)r->base, r->reserved));
    free(r);
    pthread_cond_broadcast(&vs_engine.released);
    vs_engine_unlock(mode);
    return true;
}

int vs_offload_charge(int device, uint64_t bytes)
{
    CUstreamCaptureMode mode;
    vs_engine_lock(&mode);
    int rc = vs_charge_locked(device, bytes, "an allocation that cannot be evicted", 0);
    vs_engine_unlock(mode);
    return rc;
}

bool vs_offload_reclaim(int device, uint64_t bytes)
{
    CUstreamCaptureMode mode;
    vs_engine_lock(&mode);
    int rc = vs_make_room(device, bytes, true);
    vs_policy_reset_skips();
    if (rc == 0)
        vs_cap_release(device, bytes); /* the caller counts its own allocation */
    vs_engine_unlock(mode);
    return rc == 0;
}

/* The region containing `addr`. Engine lock held. */
bool vs_offload_range(uintptr_t addr, vs_offload_range_t *out)
{
    CUstreamCaptureMode mode;
    if (!vs_offload_enabled())
        return false;
    vs_engine_lock(&mode);
    vs_region_t *r = vs_region_containing(addr);
    if (r != NULL)
        *out = (vs_offload_range_t){.base = r->base, .size = r->size, .device = r->device, .ctx = r->ctx, .id = r->id};
    vs_engine_unlock(mode);
    return r != NULL;
}

void vs_offload_hold(const uintptr_t *addrs, size_t count, int delta)
{
    CUstreamCaptureMode mode;
    if (!vs_offload_enabled() || count == 0)
        return;
    vs_engine_lock(&mode);
    for (size_t i = 0; i < count; i++) {
        vs_region_t *r = vs_region_containing(addrs[i]);
        if (r == NULL)
            continue;
        if (delta > 0)
            r->holds++;
        else if (r->holds > 0)
            r->holds--;
        vs_policy_refresh(r);
    }
    vs_engine_unlock(mode);
}

void vs_offload_pin(uintptr_t addr, const char *reason)
{
    CUstreamCaptureMode mode;
    if (!vs_offload_enabled())
        return;
    vs_engine_lock(&mode);
    vs_region_t *r = vs_region_containing(addr);
    if (r != NULL) {
        r->pinned = true;
        vs_policy_refresh(r);
        (void)vs_registry_pin(r->base, reason);
    }
    vs_engine_unlock(mode);
}

/* ---- Operations ---------------------------------------------------------- */

void vs_op_begin(vs_op_t *op, CUstream stream, bool per_thread)
{
    op->stream = stream;
    op->per_thread = per_thread;
    op->restore = true;
    op->locked = false;
    op->attempts = 0;
    op->held = NULL;
    op->held_count = 0;
    op->touch.stream_bit = vs_offload_enabled() ? vs_stream_bit(stream, per_thread) : 0;
}

/* Whether everything the scan found missing is held by this operation:
 * then it is mapped (held regions are never evicted), and still arriving
 * only with this operation's stream already waiting for its copy. */
static bool vs_bases_held(const vs_op_t *op, const uintptr_t *bases, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        /* Mapped, with this operation's stream waiting for its copy; an
         * allocation freed and made again at the same address is not. */
        if (vs_registry_residency_locked(bases[i]) != VS_ARRIVING)
            return false;
        bool found = false;
        for (size_t j = 0; j < op->held_count && !found; j++)
            found = op->held[j] == bases[i];
        if (!found)
            return false;
    }
    return true;
}

/* Read lock held. */
static bool vs_op_all_held(const vs_op_t *op, const uintptr_t *words, size_t count)
{
    if (op->held_count == 0)
        return false;
    if (op->touch.missing_count <= op->touch.missing_cap)
        return vs_bases_held(op, op->touch.missing, op->touch.missing_count);
    /* More missing than the operation's buffer lists: list them all. */
    size_t cap = op->touch.missing_count;
    uintptr_t *all = malloc(cap * sizeof *all);
    if (all == NULL)
        return false;
    vs_touch_t again = {.seq = op->touch.seq, .missing = all, .missing_cap = cap};
    vs_registry_touch_many_locked(words, count, &again);
    bool held = again.missing_count <= cap && vs_bases_held(op, all, again.missing_count);
    free(all);
    return held;
}

/* The stream an operation runs on, as VRAMSHIM_TRACE numbers streams. */
static uintptr_t vs_trace_stream_key(const vs_op_t *op)
{
    return (uintptr_t)vs_stream_resolve(op->stream, op->per_thread);
}

bool vs_op_scan(vs_op_t *op, const uintptr_t *words, size_t count)
{
    /* One sequence number per operation, however many scans it takes: the
     * policy learns the order of operations, not of attempts. */
    if (op->attempts == 0) {
        op->touch.seq = vs_registry_next_seq();
        if (atomic_load_explicit(&vs_engine.prefetch_step_due, memory_order_relaxed))
            vs_prefetch_step(words, count);
    }
    op->touch.watched = false;
    op->touch.missing = op->missing;
    op->touch.missing_cap = VS_OP_MISSING_CAP;
    op->touch.missing_count = 0;
    op->touch.collect_all = false;
    vs_registry_read_begin();
    if (count > 0)
        vs_registry_touch_many_locked(words, count, &op->touch);
    if (op->touch.watched && !atomic_load_explicit(&vs_engine.prefetch_step_due, memory_order_relaxed))
        atomic_store_explicit(&vs_engine.prefetch_step_due, true, memory_order_relaxed);
    bool shrink = op->attempts == 0 && atomic_load_explicit(&vs_engine.over_limit, memory_order_relaxed);
    if ((op->touch.missing_count == 0 && !shrink) || !op->restore || vs_op_all_held(op, words, count)) {
        if (op->touch.missing_count > 0)
            vs_log(VS_LOG_DEBUG, "submitting with %zu not resident (restore %d, first 0x%" PRIxPTR ")",
                   op->touch.missing_count, op->restore, op->touch.missing[0]);
        op->locked = true;
        /* VRAMSHIM_TRACE: the uses of the operation about to be submitted,
         * listed under the read lock it is submitted under. */
        if (vs_trace_enabled())
            vs_trace_operation_locked(op->name, vs_trace_stream_key(op), words, count);
        return true;
    }
    vs_registry_read_end();
    return false;
}

/* Every base `words` touch, resident or not (malloc'd; NULL on failure). */
static uintptr_t *vs_op_collect(const uintptr_t *words, size_t count, size_t *found)
{
    size_t cap = 16;
    for (;;) {
        uintptr_t *bases = malloc(cap * sizeof *bases);
        if (bases == NULL)
            return NULL;
        vs_touch_t all = {.seq = 0, .missing = bases, .missing_cap = cap, .collect_all = true};
        vs_registry_read_begin();
        vs_registry_touch_many_locked(words, count, &all);
        vs_registry_read_end();
        if (all.missing_count <= cap) {
            *found = all.missing_count;
            return bases;
        }
        free(bases);
        cap = all.missing_count;
    }
}

typedef struct vs_marker_record_s {
    CUstream stream;
    CUevent event;
    bool recorded;
} vs_marker_record_t;

static void vs_marker_record_locked(void *arg)
{
    vs_marker_record_t *m = arg;
    m->recorded = VS_CALL(cuEventRecord, (m->event, m->stream)) == CUDA_SUCCESS;
}

/* Records a marker on `stream` (numbered `bit`) before the operation
 * preparing on it submits anything. Engine lock held. */
static void vs_marker_record(CUstream stream, uint64_t bit)
{
    if (bit == 0 || bit == VS_STREAM_BIT_OVERFLOW)
        return;
    int slot = __builtin_ctzll(bit);
    vs_marker_ring_t *ring = &vs_markers[slot];
    uint32_t at = ring->next;
    if (ring->event[at] == NULL
        && VS_CALL(cuEventCreate, (&ring->event[at], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
        ring->event[at] = NULL;
        return;
    }
    vs_marker_record_t m = {.stream = stream, .event = ring->event[at]};
    /* Re-recording an event a fence already waits for is safe: the wait
     * took the earlier record. But a marker still listed must not move:
     * drop it from the ring first. */
    if (ring->count == VS_MARKERS)
        ring->count--;
    uint64_t epoch = vs_registry_epoch_close(vs_marker_record_locked, &m);
    if (!m.recorded)
        return;
    ring->epoch[at] = epoch;
    ring->next = (at + 1) % VS_MARKERS;
    ring->count++;
}

/* Lets go of one hold on each region starting at `bases`. Engine lock
 * held. */
static void vs_unhold(const uintptr_t *bases, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        vs_region_t *r = vs_region_at(bases[i]);
        if (r != NULL && r->holds > 0) {
            r->holds--;
            vs_policy_refresh(r);
        }
    }
}

CUresult vs_op_prepare(vs_op_t *op, const uintptr_t *words, size_t count)
{
    CUstreamCaptureMode mode;
    CUresult rc = CUDA_SUCCESS;

    if (++op->attempts > VS_OP_MAX_ATTEMPTS) {
        vs_log(VS_LOG_WARN, "an operation keeps finding its memory evicted; giving up on it");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uint64_t start = vs_monotonic_ns();
    vs_engine_lock(&mode);
    /* Captured work does not run now: leave the capture alone (the graph's
     * launch restores what it needs). */
    CUstream resolved = vs_stream_resolve(op->stream, op->per_thread);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (VS_CALL(cuStreamIsCapturing, (resolved, &status)) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE) {
        op->restore = false;
        vs_engine_unlock(mode);
        return CUDA_SUCCESS;
    }
    vs_marker_record(resolved, op->touch.stream_bit);
    size_t found = 0;
    uintptr_t *bases = vs_op_collect(words, count, &found);
    if (bases == NULL) {
        vs_engine_unlock(mode);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* Hold all of them first, so restoring one never evicts another. */
    size_t held = 0;
    for (size_t i = 0; i < found; i++) {
        vs_region_t *r = vs_region_at(bases[i]);
        if (r == NULL)
            continue;
        r->holds++;
        vs_policy_refresh(r);
        bases[held++] = r->base;
    }
    vs_deferred_reap(false);
    /* An earlier operation passed the limit: back under it, now that what
     * this operation needs is held (its own restores may pass it again,
     * for the next operation to undo). */
    if (atomic_exchange_explicit(&vs_engine.over_limit, false, memory_order_relaxed)) {
        for (int device = 0; device < VS_MAX_DEVICES; device++) {
            if (vs_engine.devices[device].ready && vs_cap_used(device) > vs_cap_limit(device))
                (void)vs_make_room(device, 0, false);
        }
        vs_policy_reset_skips();
    }
    for (size_t i = 0; i < held && rc == CUDA_SUCCESS; i++) {
        vs_region_t *r = vs_region_at(bases[i]);
        if (r == NULL)
            continue;
        vs_prefetch_forget(r);
        if (r->where != VS_RESIDENT) {
            rc = vs_restore(r, op->stream, op->per_thread, op->held_count > 0 ? 1 : 0);
        } else if (r->arriving != NULL) {
            /* Restored for another stream; this one waits for the copy. */
            (void)vs_wait_for_copy(resolved, r->arriving);
        }
    }
    /* While this operation's own restores are in flight, start the copies
     * of what comes next. */
    if (rc == CUDA_SUCCESS && held > 0) {
        vs_policy_sync();
        vs_prefetch_all();
    }
    /* Holds taken by an earlier attempt are superseded. */
    vs_unhold(op->held, op->held_count);
    if (op->held_count == 0 && held > 0)
        vs_engine.ops_holding++;
    else if (op->held_count > 0 && held == 0)
        vs_engine.ops_holding--;
    free(op->held);
    op->held = bases;
    op->held_count = held;
    vs_engine.stats.restore_wait_ns += vs_monotonic_ns() - start;
    vs_engine_unlock(mode);
    return rc;
}

void vs_op_end(vs_op_t *op)
{
    if (op->locked) {
        vs_registry_read_end();
        op->locked = false;
    }
    if (op->held_count > 0) {
        CUstreamCaptureMode mode;
        vs_engine_lock(&mode);
        vs_unhold(op->held, op->held_count);
        vs_engine.ops_holding--;
        pthread_cond_broadcast(&vs_engine.released);
        vs_engine_unlock(mode);
    }
    free(op->held);
    op->held = NULL;
    op->held_count = 0;
}

/* ---- Copies served from the host copy ---------------------------------------- */

/* Copies between `host` and the host copy of a region that is on the host,
 * at `offset`. Engine lock held. */
static void vs_host_copy_bytes(vs_region_t *r, uint64_t offset, void *host, uint64_t bytes, bool to_device)
{
    uint64_t at = 0;
    unsigned char *h = host;
    for (uint32_t i = 0; i < r->host.count && bytes > 0; i++) {
        const vs_host_extent_t *e = &r->host.extents[i];
        if (offset >= at + e->bytes) {
            at += e->bytes;
            continue;
        }
        uint64_t within = offset - at;
        uint64_t n = e->bytes - within < bytes ? e->bytes - within : bytes;
        if (to_device)
            memcpy((unsigned char *)e->ptr + within, h, n);
        else
            memcpy(h, (unsigned char *)e->ptr + within, n);
        h += n;
        offset += n;
        bytes -= n;
        at += e->bytes;
    }
}

bool vs_offload_copy_host(CUdeviceptr dptr, void *host, uint64_t bytes, bool to_device, bool per_thread,
                          CUresult *rc)
{
    CUstreamCaptureMode mode;
    vs_alloc_info_t info;

    if (!vs_offload_enabled() || bytes == 0 || host == NULL || vs_registry_find((uintptr_t)dptr, &info) != 0
        || (info.residency != VS_ON_HOST))
        return false;
    /* A synchronous copy runs after the work already queued on its stream
     * (which may be writing `host`): the same order here. */
    if (VS_CALL(cuStreamSynchronize, (vs_stream_resolve(NULL, per_thread))) != CUDA_SUCCESS)
        return false; /* the driver's own call will report why */
    vs_engine_lock(&mode);
    vs_region_t *r = vs_region_at(info.base);
    uint64_t offset = (uintptr_t)dptr - info.base;
    bool served = r != NULL && r->where == VS_ON_HOST && offset + bytes <= r->size && offset + bytes >= offset
                  && (r->host.count > 0 || (to_device && vs_host_take(r->size, &r->host) == 0));
    if (served) {
        vs_host_copy_bytes(r, offset, host, bytes, to_device);
        if (to_device)
            r->host_hash_known = false;
        vs_engine.stats.bytes_served_on_host += bytes;
        (void)vs_registry_touch((uintptr_t)dptr, vs_registry_next_seq());
        if (vs_trace_enabled()) /* VRAMSHIM_TRACE: a use, though no copy crossed the link */
            vs_trace_operation_one("copy", (uintptr_t)vs_stream_resolve(NULL, per_thread), info.id);
        *rc = CUDA_SUCCESS;
    }
    vs_engine_unlock(mode);
    return served;
}

/* ---- Statistics and exit -------------------------------------------------- */

void vs_offload_stats(vs_offload_stats_t *out)
{
    pthread_mutex_lock(&vs_engine.lock);
    *out = vs_engine.stats;
    pthread_mutex_unlock(&vs_engine.lock);
}

void vs_offload_shutdown(void)
{
    if (!vs_engine.initialised || !vs_engine.enabled)
        return;
    vs_offload_stats_t s;
    vs_host_pool_stats_t pool;
    vs_offload_stats(&s);
    vs_host_pool_stats(&pool);
    vs_log(VS_LOG_INFO,
           "offload: evictions %" PRIu64 ", restores %" PRIu64 ", to host %" PRIu64 " bytes, to device %" PRIu64
           " bytes, restore wait %.3f ms, over the limit %" PRIu64 " times, host pool %" PRIu64 " of %" PRIu64
           " bytes pinned, placed on the host %" PRIu64 ", copies served from host copies %" PRIu64
           " bytes, clean evictions %" PRIu64 " (%" PRIu64 " bytes not copied), prefetches %" PRIu64 " (%" PRIu64
           " bytes, %" PRIu64 " unused), kept host copies dropped %" PRIu64,
           s.evictions, s.restores, s.bytes_to_host, s.bytes_to_device, (double)s.restore_wait_ns / 1e6, s.over_limit,
           pool.pinned, pool.limit, s.placed_on_host, s.bytes_served_on_host, s.clean_drops, s.bytes_not_copied,
           s.prefetches, s.prefetch_bytes, s.prefetch_unused, s.host_copies_dropped);
    if (vs_spill_enabled()) {
        vs_spill_stats_t disk;
        vs_spill_stats(&disk);
        vs_log(VS_LOG_INFO,
               "disk tier: spills %" PRIu64 " (%" PRIu64 " bytes), restores from disk %" PRIu64 " (%" PRIu64
               " bytes), spill file %" PRIu64 " bytes (%" PRIu64 " in use), checksum failures %" PRIu64
               ", I/O errors %" PRIu64 ", %s I/O",
               s.spills, s.bytes_to_disk, s.disk_reads, s.bytes_from_disk, disk.file_bytes, disk.used_bytes,
               disk.checksum_failures, disk.io_errors, disk.direct_io ? "direct" : "buffered");
    }
    /* The spill file has no name: it goes with the process. */
    /* The process is exiting: the pinned slabs go with it. Freeing them
     * here would race with threads still running. */
}

/* offload_tier.c: the tiers that hold evicted bytes: the pinned host pool
 * (host_pool.c) and the disk (spill.c), for the offload engine
 * (`vs_tier_host_take`, `vs_tier_restore_from_disk`), and synchronous copies
 * served on a host copy without bringing the allocation back
 * (`vs_offload_copy_host`).
 *
 * When the pool is full, kept host copies of resident regions go first,
 * then those that in-flight restores still read; then (with
 * VRAMSHIM_SPILL_DIR) the coldest evicted allocations go to disk, when an
 * operation cannot be given room otherwise (`vs_tier_spill`), those that
 * operations hold last. Restores
 * from disk go through two pinned staging buffers with block checksums.
 *
 * Everything here runs under the engine lock, except the disk I/O: a spill
 * and a restore from disk mark their region `disk_io`, let go of the
 * engine lock for the reads and writes (milliseconds to seconds), and take
 * it back to finish. Meanwhile other threads run, the snapshot publisher
 * included; whoever would free, restore, spill or write that region waits
 * for `vs_engine.disk_io_done` (`vs_engine_disk_io_wait`). The pool and
 * the spill store take their own leaf locks inside; the staging buffers
 * have theirs, taken only without the engine lock.
 */
#include "offload_internal.h"
#include "offload_device.h"
#include "offload_streams.h"
#include "offload_tier.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "driver.h"
#include "log.h"
#include "trace_writer.h"
#include "tunables.h"

/* ---- The disk tier -------------------------------------------------------- */

/* Pinned staging buffers for restores from disk, VS_STAGING_BUFFERS of one
 * spill chunk each: the read of one chunk overlaps the host-to-device copy
 * of the previous one. */
#define VS_STAGING_BYTES VS_SPILL_CHUNK_BYTES

static struct {
    pthread_mutex_t lock; /* one restore from disk at a time uses them; never under the engine lock */
    void *buffer[VS_STAGING_BUFFERS];
    CUcontext ctx; /* current when they were pinned: they die with it */
    bool ready; /* guarded by the engine lock */
} vs_tier_staging = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool vs_tier_staging_prepare(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_tier_staging.ready)
        return true;
    if (VS_CALL(cuCtxGetCurrent, (&vs_tier_staging.ctx)) != CUDA_SUCCESS)
        vs_tier_staging.ctx = NULL;
    for (int i = 0; i < VS_STAGING_BUFFERS; i++) {
        if (vs_tier_staging.buffer[i] == NULL
            && VS_CALL(cuMemHostAlloc, (&vs_tier_staging.buffer[i], VS_STAGING_BYTES, CU_MEMHOSTALLOC_PORTABLE))
                   != CUDA_SUCCESS) {
            vs_tier_staging.buffer[i] = NULL;
            return false;
        }
    }
    vs_tier_staging.ready = true;
    return true;
}

void vs_tier_ctx_forget(CUcontext ctx, bool alive)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_tier_staging.ctx != ctx)
        return;
    for (int i = 0; i < VS_STAGING_BUFFERS; i++) {
        if (vs_tier_staging.buffer[i] != NULL && alive)
            (void)VS_CALL(cuMemFreeHost, (vs_tier_staging.buffer[i]));
        vs_tier_staging.buffer[i] = NULL;
    }
    vs_tier_staging.ctx = NULL;
    vs_tier_staging.ready = false;
}

/* The CUDA error an operation gets when its allocation cannot come back
 * from disk: a failed read is the operating system's; a block whose
 * checksum does not match is data the disk corrupted, reported as an
 * uncorrectable memory error (never silently). */
static CUresult vs_tier_disk_error(int rc)
{
    return rc == -EBADMSG ? CUDA_ERROR_ECC_UNCORRECTABLE
           : rc == -ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY
                           : CUDA_ERROR_OPERATING_SYSTEM;
}

/* Lets go of the engine lock for a region's disk I/O, and takes it back.
 * The region is marked first: nothing frees, restores, spills or writes
 * it meanwhile (they wait in `vs_engine_disk_io_wait`). */
static void vs_tier_disk_io_begin(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    r->disk_io = true;
    vs_engine_spares_release();
    vs_mutex_unlock(&vs_engine.lock);
}

static void vs_tier_disk_io_end(vs_region_t *r)
{
    vs_mutex_lock(&vs_engine.lock);
    r->disk_io = false;
    pthread_cond_broadcast(&vs_engine.disk_io_done);
    pthread_cond_broadcast(&vs_engine.released); /* a charge may wait for host memory */
}

/* Reads `r` back from disk into its mapped memory, chunk by chunk through
 * the staging buffers: the read of one chunk overlaps the copy of the
 * previous one on `to_device`. Runs without the engine lock (the driver
 * and the spill store are thread-safe), with the staging lock. */
static CUresult vs_tier_read_disk_unlocked(const vs_region_t *r, CUstream to_device, CUevent copied[VS_STAGING_BUFFERS])
{
    uint64_t blocks_per_chunk = VS_STAGING_BYTES / VS_SPILL_BLOCK_BYTES;
    uint64_t total_blocks = (r->size + VS_SPILL_BLOCK_BYTES - 1) / VS_SPILL_BLOCK_BYTES;
    CUresult rc = CUDA_SUCCESS;
    int used[VS_STAGING_BUFFERS] = {0};
    pthread_mutex_lock(&vs_tier_staging.lock);
    for (uint64_t first = 0, chunk = 0; first < total_blocks && rc == CUDA_SUCCESS; first += blocks_per_chunk, chunk++) {
        int b = (int)(chunk % VS_STAGING_BUFFERS);
        uint64_t blocks = total_blocks - first < blocks_per_chunk ? total_blocks - first : blocks_per_chunk;
        if (used[b] && (rc = VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuEventSynchronize, (copied[b]))) != CUDA_SUCCESS)
            break;
        int read = vs_spill_read(&r->disk, first, blocks, vs_tier_staging.buffer[b]);
        if (read != 0) {
            vs_log(VS_LOG_WARN, "cannot read the allocation at 0x%" PRIxPTR " back from the spill file (%s)", r->base,
                   read == -EBADMSG ? "a block failed its checksum: the data on disk is corrupt" : strerror(-read));
            rc = vs_tier_disk_error(read);
            break;
        }
        uint64_t offset = first * VS_SPILL_BLOCK_BYTES;
        uint64_t n = r->size - offset < blocks * VS_SPILL_BLOCK_BYTES ? r->size - offset : blocks * VS_SPILL_BLOCK_BYTES;
        rc = VS_CALL(cuMemcpyHtoDAsync_v2, ((CUdeviceptr)(r->base + offset), vs_tier_staging.buffer[b], n, to_device));
        if (rc == CUDA_SUCCESS)
            rc = VS_CALL(cuEventRecord, (copied[b], to_device));
        used[b] = 1;
    }
    /* The staging buffers are free again once their copies are done. */
    CUresult synced = VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (to_device));
    pthread_mutex_unlock(&vs_tier_staging.lock);
    return rc == CUDA_SUCCESS ? synced : rc;
}

/* Copies `r`, on disk, into its freshly mapped memory through the staging
 * buffers, then gives its disk space back. The copy is complete on return
 * (disk reads are synchronous anyway). Engine lock held; let go during the
 * reads. */
CUresult vs_tier_restore_from_disk(vs_region_t *r, vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (!vs_tier_staging_prepare())
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = CUDA_SUCCESS;
    /* The copy out of each buffer, recorded on the device's copy stream: so
     * events of its context, from the engine's pool. */
    CUevent copied[VS_STAGING_BUFFERS] = {0};
    for (int b = 0; b < VS_STAGING_BUFFERS && rc == CUDA_SUCCESS; b++)
        if ((copied[b] = vs_engine_event_get(d->ctx)) == NULL)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        CUstream to_device = d->to_device;
        vs_arrive_join_all(); /* the host-to-device stream's order */
        vs_tier_disk_io_begin(r);
        rc = vs_tier_read_disk_unlocked(r, to_device, copied);
        vs_tier_disk_io_end(r);
    }
    for (int b = 0; b < VS_STAGING_BUFFERS; b++)
        vs_engine_event_put(d->ctx, copied[b]);
    if (rc == CUDA_SUCCESS) {
        vs_engine.stats.disk_reads++;
        vs_engine.stats.bytes_from_disk += r->size;
        vs_spill_release(&r->disk);
    }
    return rc;
}

/* The evicted region whose host copy is predicted to be used last, or NULL:
 * one that no other I/O moves, and that nothing holds unless `held` (an
 * operation about to restore it then reads it back from disk). */
static vs_region_t *vs_tier_spill_choice(bool held)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_region_t *coldest = NULL, *r, *tmp;
    uint64_t coldest_next = 0;
    HASH_ITER(hh, vs_engine.by_base, r, tmp) {
        /* (A region keeping a head on the device streams only its tail:
         * it stays in the pool, the one of its device that does, until
         * the head gives way: `vs_engine_charge_engine_locked`.) */
        if (r->where != VS_ON_HOST || r->host.count == 0 || r->evicting || r->disk_io
            || (r->holds > 0 && !held) || r->split > 0 || r->arriving != NULL)
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
    return coldest;
}

/* Moves the host copy of `r` (on the host, whole, unmarked) to disk.
 * 0 or the write's negative errno. Lets go of the engine lock during the
 * write; `r` stays valid (marked `disk_io` meanwhile). */
static int vs_tier_spill_one(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    /* Its host copy cannot change meanwhile: only a copy served from it
     * or an eviction writes a host copy, and neither touches a region
     * that is on the host and marked. */
    vs_spill_copy_t disk = {0};
    vs_tier_disk_io_begin(r);
    int rc = vs_spill_write(r->host.extents, r->host.count, r->size, &disk);
    vs_tier_disk_io_end(r);
    if (rc != 0) {
        vs_log(VS_LOG_WARN, "cannot spill the allocation at 0x%" PRIxPTR " to VRAMSHIM_SPILL_DIR (%s)", r->base,
               strerror(-rc));
        return rc;
    }
    r->disk = disk;
    vs_host_pool_give(&r->host);
    vs_engine_host_hash_forget(r);
    r->where = VS_ON_DISK;
    (void)vs_registry_set_residency(r->base, VS_ON_DISK, false, NULL);
    vs_engine.stats.spills++;
    vs_engine.stats.bytes_to_disk += r->size;
    return 0;
}

uint64_t vs_tier_spill(uint64_t need, int *failed)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    uint64_t freed = 0;
    *failed = 0;
    if (!vs_spill_enabled())
        return 0;
    while (freed < need) {
        /* Copies that operations hold go last: when the pool holds only
         * those, the victims their restores need have nowhere else to go
         * (several allocations of one operation, or of threads at once). */
        vs_region_t *coldest = vs_tier_spill_choice(false);
        if (coldest == NULL)
            coldest = vs_tier_spill_choice(true);
        if (coldest == NULL)
            break;
        uint64_t bytes = coldest->host.bytes;
        int rc = vs_tier_spill_one(coldest);
        if (rc != 0) {
            *failed = rc;
            break;
        }
        freed += bytes;
    }
    return freed;
}

bool vs_tier_spill_restoring(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (!vs_spill_enabled() || r->where != VS_ON_HOST || r->host.count == 0 || r->evicting || r->disk_io
        || r->split > 0 || r->arriving != NULL)
        return false;
    return vs_tier_spill_one(r) == 0;
}

/* Gives back the host copies that resident regions keep (only to make
 * later evictions cheaper) until `need` bytes went back. Copies a restore
 * still reads or an eviction writes stay. Returns the bytes given back. */
static uint64_t vs_tier_host_drop_kept(uint64_t need)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    uint64_t freed = 0;
    vs_region_t *r, *tmp;
    HASH_ITER(hh, vs_engine.by_base, r, tmp) {
        if (freed >= need)
            break;
        if (r->where != VS_RESIDENT || r->host.count == 0 || r->evicting || r->arriving != NULL)
            continue;
        freed += r->host.bytes;
        vs_host_pool_give(&r->host);
        vs_engine_host_hash_forget(r);
        vs_engine.stats.host_copies_dropped++;
    }
    return freed;
}

/* Room in the host pool: when it is full, kept host copies of resident
 * regions go first, then those that in-flight restores still read. 0 or
 * -ENOSPC (then `vs_tier_spill` may make room, with the lock let go). */
int vs_tier_host_take(uint64_t bytes, vs_host_copy_t *out)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_deferred_reap(false);
    if (vs_host_pool_unpinned() > 0)
        vs_engine_host_repin_orphans();
    int rc = vs_host_pool_take(bytes, out);
    if (rc == -ENOSPC && vs_tier_host_drop_kept(bytes) > 0)
        rc = vs_host_pool_take(bytes, out);
    if (rc == -ENOSPC && vs_engine.deferred_head != NULL) {
        vs_engine_deferred_reap(true);
        if (vs_tier_host_drop_kept(bytes) > 0)
            rc = vs_host_pool_take(bytes, out);
    }
    return rc;
}

/* ---- Copies -------------------------------------------------------------- */

/* Copies bytes [from, to) of the region between the device and its host
 * copy, extent by extent in chunks of VS_COPY_CHUNK_BYTES, asynchronously
 * on `stream`. */
CUresult vs_tier_copy_region(const vs_region_t *r, uint64_t from, uint64_t to, vs_copy_direction_t direction,
                             CUstream stream)
{
    /* A restore ahead of need: recorded for the arrival thread. */
    vs_arrival_t *job = direction == VS_COPY_IN && vs_engine.arrival_for == r ? vs_engine.arrival_open : NULL;
    uint64_t offset = 0; /* of the extent's first byte, in the region */
    if (to > r->size)
        to = r->size;
    for (uint32_t i = 0; i < r->host.count && offset < to; i++) {
        const vs_host_extent_t *e = &r->host.extents[i];
        uint64_t done = from > offset ? from - offset : 0;
        if (done >= e->bytes) {
            offset += e->bytes;
            continue;
        }
        offset += done;
        while (done < e->bytes && offset < to) {
            uint64_t n = e->bytes - done;
            if (n > VS_COPY_CHUNK_BYTES)
                n = VS_COPY_CHUNK_BYTES;
            if (n > to - offset)
                n = to - offset;
            unsigned char *host = (unsigned char *)e->ptr + done;
            CUdeviceptr device = (CUdeviceptr)(r->base + offset);
            CUresult rc = job != NULL ? (vs_arrive_copy(job, device, host, n) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY)
                          : direction == VS_COPY_OUT ? VS_CALL(cuMemcpyDtoHAsync_v2, (host, device, n, stream))
                                                     : VS_CALL(cuMemcpyHtoDAsync_v2, (device, host, n, stream));
            if (rc != CUDA_SUCCESS)
                return rc;
            done += n;
            offset += n;
        }
        offset += e->bytes - done;
    }
    return CUDA_SUCCESS;
}

/* ---- Copies served from the host copy ---------------------------------------- */

/* Copies between `host` and the host copy of a region that is on the host,
 * at `offset`. Engine lock held. */
static void vs_tier_copy_bytes(vs_region_t *r, uint64_t offset, void *host, uint64_t bytes, bool to_device)
{
    VS_ASSERT_HELD(&vs_engine.lock);
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

/* Whether `host` is pageable memory (the driver knows nothing of it). */
static bool vs_tier_host_pageable(const void *host)
{
    unsigned int type = 0;
    return VS_CALL(cuPointerGetAttribute, (&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)host))
           == CUDA_ERROR_INVALID_VALUE;
}

/* Orders a served copy after the work queued before it on its stream (which
 * may be writing `host`): true when it may run now. */
static bool vs_tier_served_copy_ordered(CUstream stream, bool async, const void *host)
{
    if (!async)
        return VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (stream)) == CUDA_SUCCESS; /* else the driver's call says why */
    if (vs_streams_may_be_capturing(stream))
        return false; /* captured: the copy belongs to the graph */
    CUresult idle = VS_CALL(cuStreamQuery, (stream));
    if (idle == CUDA_SUCCESS)
        return true;
    /* Busy: only a copy from pageable memory, which the driver makes
     * synchronous with the host anyway, is worth a wait for the stream. */
    return idle == CUDA_ERROR_NOT_READY && vs_tier_host_pageable(host)
           && VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (stream)) == CUDA_SUCCESS;
}

bool vs_offload_copy_host(CUdeviceptr dptr, void *host, uint64_t bytes, bool to_device, CUstream stream, bool async,
                          bool per_thread, CUresult *rc)
{
    CUstreamCaptureMode mode;
    vs_alloc_info_t info;

    if (!vs_offload_enabled() || bytes == 0 || host == NULL || vs_registry_find((uintptr_t)dptr, &info) != 0
        || (info.residency != VS_ON_HOST))
        return false;
    if (!vs_tier_served_copy_ordered(vs_streams_resolve(stream, per_thread), async, host))
        return false;
    vs_engine_lock(&mode);
    vs_region_t *r = vs_engine_region_at(info.base);
    uint64_t offset = (uintptr_t)dptr - info.base;
    /* A copy into a host copy being spilled goes the driver's way (its
     * restore waits for the spill); reading one is fine meanwhile. A region
     * that keeps a head on the device (partial residency) holds those bytes
     * there, not in its host copy: the driver's way too. */
    bool served = r != NULL && r->where == VS_ON_HOST && r->split == 0 && !(to_device && r->disk_io)
                  && offset + bytes <= r->size && offset + bytes >= offset;
    if (served && r->host.count == 0) {
        /* Its first bytes: a host copy to put them in, with colder host
         * copies moved to disk when the pool is full (the lock is let go
         * for the writes: look the region up again). */
        served = to_device && vs_tier_host_take(r->size, &r->host) == 0;
        int failed = 0;
        if (!served && to_device && vs_tier_spill(r->size, &failed) > 0) {
            r = vs_engine_disk_io_wait(info.base);
            served = r != NULL && r->where == VS_ON_HOST && r->split == 0 && offset + bytes <= r->size
                     && (r->host.count > 0 || vs_tier_host_take(r->size, &r->host) == 0);
        }
    }
    if (served) {
        vs_tier_copy_bytes(r, offset, host, bytes, to_device);
        if (to_device)
            vs_engine_host_hash_forget(r);
        vs_engine.stats.bytes_served_on_host += bytes;
        (void)vs_registry_touch((uintptr_t)dptr, vs_registry_next_seq());
        if (vs_trace_enabled()) /* VRAMSHIM_TRACE: a use, though no copy crossed the link */
            vs_trace_operation_one("copy", (uintptr_t)vs_streams_resolve(stream, per_thread), info.id);
        *rc = CUDA_SUCCESS;
    }
    vs_engine_unlock(mode);
    return served;
}

/* ---- Regions under disk I/O ---------------------------------------------- */

vs_region_t *vs_engine_disk_io_wait(uintptr_t base)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_region_t *r;
    while ((r = vs_engine_region_at(base)) != NULL && r->disk_io) {
        vs_engine_spares_release();
        vs_mutex_wait(&vs_engine.disk_io_done, &vs_engine.lock);
    }
    return r;
}

/* Waits until no region's disk I/O is under way. */
void vs_engine_disk_io_drain(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    for (;;) {
        bool busy = false;
        for (vs_region_t *r = vs_engine.by_base; r != NULL && !busy; r = r->hh.next)
            busy = r->disk_io;
        if (!busy)
            return;
        vs_engine_spares_release();
        vs_mutex_wait(&vs_engine.disk_io_done, &vs_engine.lock);
    }
}

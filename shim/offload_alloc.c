/* offload_alloc.c: the life of a region: an evictable allocation made
 * (`vs_offload_alloc`: an address range reserved for its whole life, backed
 * by physical memory while resident), freed (`vs_offload_free`,
 * `vs_offload_free_async`), and the application's own VMM memory adopted
 * as a region and detached again (`vs_offload_adopt`, `vs_offload_detach`).
 * Under the engine lock (offload_internal.h).
 */
#include "offload_internal.h"
#include "offload_device.h"
#include "offload_streams.h"
#include "offload_tier.h"
#include "offload_prefetch.h"
#include "pool_usage.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "driver.h"
#include "log.h"

/* The prefetch window's sizes: the largest evictable allocation of `d`, and
 * the largest smaller one. */
static void vs_engine_sizes_note(vs_engine_device_t *d, uint64_t reserved)
{
    if (reserved > d->largest) {
        d->second = d->largest;
        d->largest = reserved;
    } else if (reserved < d->largest && reserved > d->second) {
        d->second = reserved;
    }
}

/* A region registered (`r->id` set) joins the policy (resident or not)
 * and the engine's tables. */
static void vs_engine_region_enter(vs_engine_device_t *d, vs_region_t *r, bool resident)
{
    if (vs_policy_alloc(d->policy, r->id, r->reserved, true, resident) != 0) {
        vs_log(VS_LOG_WARN, "the eviction policy cannot track allocation %" PRIu64 "; it stays where it is", r->id);
        r->pinned = true;
    }
    HASH_ADD(hh, vs_engine.by_base, base, sizeof r->base, r);
    HASH_ADD(hh_id, vs_engine.by_id, id, sizeof r->id, r);
}

/* A region's own memory: the last step of its end. NULL is nothing. */
static void vs_engine_region_free(vs_region_t *r)
{
    if (r == NULL)
        return;
    free(r->grants);
    free(r->prop);
    free(r);
}

/* Waits for the copy of a restore that may still be filling `r`. */
static void vs_engine_arrival_wait(vs_region_t *r)
{
    if (r->arriving != NULL) {
        vs_arrive_join_event(r->arriving); /* the lock may have been let go since it was taken */
        (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuEventSynchronize, (r->arriving));
    }
    r->arriving = NULL;
}

CUresult vs_offload_alloc(CUdeviceptr *dptr, uint64_t bytes, int device, vs_alloc_kind_t kind)
{
    CUstreamCaptureMode mode;
    CUresult rc;
    CUdeviceptr va = 0;

    if (dptr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    vs_engine_lock(&mode);
    vs_engine_device_t *d = vs_engine_device(device);
    vs_region_t *r = calloc(1, sizeof *r);
    if (d == NULL || r == NULL) {
        rc = d == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    r->size = bytes;
    r->reserved = (bytes + d->granularity - 1) / d->granularity * d->granularity;
    vs_engine_sizes_note(d, r->reserved);
    r->device = device;
    /* The application's context, which the allocation dies with: not
     * necessarily the one the engine's streams were made in. */
    if (VS_CALL(cuCtxGetCurrent, (&r->ctx)) != CUDA_SUCCESS || r->ctx == NULL)
        r->ctx = d->ctx;
    rc = VS_CALL(cuMemAddressReserve, (&va, r->reserved, 0, 0, 0));
    if (rc != CUDA_SUCCESS)
        goto fail;
    r->base = (uintptr_t)va;
    /* With no room without evicting, start on the host side, holding no
     * data yet: the first copy into it lands in its host copy; the first
     * kernel that uses it maps it, with nothing to copy. */
    bool resident = vs_cap_reserve(device, r->reserved) == 0;
    if (resident && (rc = vs_engine_physical_map_evicting(r)) != CUDA_SUCCESS) {
        vs_cap_release(device, r->reserved);
        goto fail;
    }
    vs_alloc_desc_t desc = {
        .base = r->base, .size = bytes, .device = device, .kind = kind, .handle = 0, .engine_region = true};
    if (vs_registry_add(&desc, &r->id) != 0) {
        if (resident) {
            vs_engine_physical_unmap_whole(r);
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
    vs_engine_region_enter(d, r, resident);
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

/* The end of a region whose device memory is already unmapped (or never
 * was): its host copy, spilled bytes, prefetch and policy entries, its
 * records and its address range go. Returns cuMemAddressFree's result. */
/* What `vs_engine_region_release` and `vs_offload_detach` share: the
 * region's host copy, spilled bytes, prefetch and policy entries and
 * records go; its mappings and address range are left alone. */
static void vs_engine_region_forget(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = &vs_engine.devices[r->device];
    vs_host_pool_give(&r->host);
    vs_spill_release(&r->disk);
    vs_prefetch_forget(r);
    if (d->policy != NULL)
        (void)vs_policy_free(d->policy, r->id);
    /* The plan changes with the allocations: memory held for its fillers
     * is not kept past a free (the next plan holds it again). */
    vs_engine_filler_release(d);
    HASH_DELETE(hh, vs_engine.by_base, r);
    HASH_DELETE(hh_id, vs_engine.by_id, r);
    /* The run splits where it leaves. */
    if (r->run_prev != NULL)
        r->run_prev->run_next = NULL;
    if (r->run_next != NULL) {
        r->run_next->run_prev = NULL;
        vs_engine_policy_refresh(r->run_next);
    }
}

CUresult vs_engine_region_release(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_region_forget(r);
    vs_engine_range_unmapped(r->base, r->reserved);
    /* An adopted mapping's range is the application's. */
    CUresult rc = r->adopted ? CUDA_SUCCESS : VS_CALL(cuMemAddressFree, ((CUdeviceptr)r->base, r->reserved));
    vs_engine_region_free(r);
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
    /* Its disk I/O reads or writes its host copy: the free waits for it. */
    r = vs_engine_disk_io_wait(base);
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
        vs_engine_arrival_wait(r);
        if (vs_streams_fence(streams, d->to_host, 0) != 0)
            (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuCtxSynchronize, ());
        (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (d->to_host));
    }
    /* (An evicted region's users were waited for when it was evicted: the
     * head it may keep is unused.) */
    vs_engine_physical_end(r);
    /* A restore that still reads the host copy was waited for above. */
    *rc_out = vs_engine_region_release(r);
    pthread_cond_broadcast(&vs_engine.released);
    vs_engine_unlock(mode);
    return true;
}

bool vs_offload_free_async(CUdeviceptr dptr, CUstream stream, bool per_thread, CUresult *rc_out)
{
    CUstreamCaptureMode mode;
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;

    if (!vs_offload_enabled() || dptr == 0)
        return false;
    vs_engine_lock(&mode);
    bool region = vs_engine_region_at((uintptr_t)dptr) != NULL;
    vs_engine_unlock(mode);
    CUstream s = vs_streams_resolve(stream, per_thread);
    /* A capture records the free as a graph node, of memory the driver
     * does not know at this address: its answer stands. */
    if (!region || (VS_CALL(cuStreamIsCapturing, (s, &capture)) == CUDA_SUCCESS
                    && capture != CU_STREAM_CAPTURE_STATUS_NONE))
        return false;
    /* The driver frees a `cuMemAlloc` allocation once the stream reaches
     * the free; its memory here is the engine's (a reservation and its
     * mappings), freed as `cuMemFree` frees it once the work queued
     * before on the stream is done. The host waits for that work, where
     * the driver would not: the same bytes are freed at the same point of
     * the stream's order. */
    CUresult rc = VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (s));
    if (rc != CUDA_SUCCESS) {
        *rc_out = rc;
        return true;
    }
    /* Freed meanwhile by another thread: the driver's answer to a second
     * free. */
    if (!vs_offload_free(dptr, rc_out))
        *rc_out = CUDA_ERROR_INVALID_VALUE;
    return true;
}

/* ---- The application's own VMM memory -------------------------------------- */

CUresult vs_offload_adopt(uintptr_t base, uint64_t bytes, int device, CUmemGenericAllocationHandle phys,
                          uint64_t handle, const CUmemAccessDesc *grants, size_t grant_count, uintptr_t reservation,
                          const CUmemAllocationProp *prop)
{
    CUstreamCaptureMode mode;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    if (!vs_offload_enabled() || grant_count == 0 || grant_count > VS_MAX_DEVICES)
        return rc;
    vs_engine_lock(&mode);
    vs_engine_device_t *d = vs_engine_device(device);
    vs_region_t *r = NULL;
    if (d == NULL || d->granularity == 0 || bytes % d->granularity != 0 || bytes < vs_engine.min_evict
        || vs_engine_region_at(base) != NULL)
        goto fail;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if ((r = calloc(1, sizeof *r)) == NULL || (r->grants = malloc(grant_count * sizeof *grants)) == NULL)
        goto fail;
    memcpy(r->grants, grants, grant_count * sizeof *grants);
    /* Properties beyond the engine's own: its memory is made with them. */
    if (prop->requestedHandleTypes != 0 || prop->allocFlags.gpuDirectRDMACapable != 0) {
        if ((r->prop = malloc(sizeof *r->prop)) == NULL)
            goto fail;
        *r->prop = *prop;
    }
    r->grant_count = grant_count;
    r->adopted = true;
    r->base = base;
    r->size = r->reserved = bytes;
    vs_engine_sizes_note(d, bytes);
    r->device = device;
    if (VS_CALL(cuCtxGetCurrent, (&r->ctx)) != CUDA_SUCCESS || r->ctx == NULL)
        r->ctx = d->ctx;
    r->phys = phys;
    r->where = VS_RESIDENT;
    r->reservation = reservation;
    vs_alloc_desc_t desc = {
        .base = base,
        .size = bytes,
        .device = device,
        .kind = VS_ALLOC_VMM,
        .handle = handle,
        .engine_region = true,
        .registered_before = true};
    if (vs_registry_add(&desc, &r->id) != 0)
        goto fail;
    vs_engine_region_enter(d, r, true);
    /* Its neighbours in an arena: the chunk ending at its start, the one
     * starting at its end. */
    vs_region_t *prev = vs_engine_region_containing(base - 1), *next = vs_engine_region_at(base + bytes);
    bool arena = reservation != 0;
    if (arena && prev != NULL && prev->adopted && prev->reservation == reservation
        && prev->base + prev->reserved == base && prev->run_next == NULL) {
        prev->run_next = r;
        r->run_prev = prev;
    }
    if (arena && next != NULL && next->adopted && next->reservation == reservation && next->run_prev == NULL) {
        next->run_prev = r;
        r->run_next = next;
        vs_engine_policy_refresh(next);
    }
    vs_engine_policy_refresh(r);
    vs_engine_unlock(mode);
    vs_log(VS_LOG_DEBUG, "adopted the application's mapping at 0x%" PRIxPTR " (%" PRIu64 " bytes)", base, bytes);
    return CUDA_SUCCESS;

fail:
    vs_engine_region_free(r);
    vs_engine_unlock(mode);
    return rc;
}

bool vs_offload_detach(uintptr_t base, CUmemGenericAllocationHandle *phys, CUresult *rc_out)
{
    CUstreamCaptureMode mode;

    if (!vs_offload_enabled())
        return false;
    /* Pinned first: once restored, nothing evicts it again. */
    vs_engine_lock(&mode);
    vs_region_t *r = vs_engine_region_at(base);
    if (r == NULL || !r->adopted) {
        vs_engine_unlock(mode);
        return false;
    }
    r->pinned = true;
    vs_engine_policy_refresh(r);
    bool resident = r->where == VS_RESIDENT;
    vs_engine_unlock(mode);
    CUresult rc = CUDA_SUCCESS;
    if (!resident) {
        uintptr_t word = base;
        VS_OPERATE(rc, "a restore for the application's VMM call", NULL, false, &word, 1, CUDA_SUCCESS);
    }
    vs_engine_lock(&mode);
    r = vs_engine_disk_io_wait(base);
    if (r == NULL || !r->adopted) {
        /* Unmapped by another thread meanwhile: the driver's answer to a
         * call on a range no longer mapped. */
        vs_engine_unlock(mode);
        *rc_out = CUDA_ERROR_INVALID_VALUE;
        return true;
    }
    if (rc == CUDA_SUCCESS && r->where != VS_RESIDENT)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) {
        r->pinned = false; /* it stays the engine's, evictable */
        vs_engine_policy_refresh(r);
        vs_engine_unlock(mode);
        *rc_out = rc;
        return true;
    }
    VS_ASSERT(r->phys != 0 && r->split == 0 && !r->premapped && !r->phys_lent);
    /* Its restore copy may still run: the application's next call (an
     * unmap, a map elsewhere, an export) must find the bytes in place. */
    vs_engine_arrival_wait(r);
    vs_engine_deferred_reap(true);
    (void)vs_registry_remove(base, ~0u, NULL);
    *phys = r->phys;
    r->phys = 0;
    vs_engine_device_t *d = &vs_engine.devices[r->device];
    if (d->keep_id == r->id)
        d->keep_id = 0;
    /* Resident, its bytes stay counted: the caller's now. */
    vs_engine_region_forget(r);
    vs_engine_region_free(r);
    pthread_cond_broadcast(&vs_engine.released);
    vs_engine_unlock(mode);
    vs_log(VS_LOG_DEBUG, "handed the application's mapping at 0x%" PRIxPTR " back to it", base);
    *rc_out = CUDA_SUCCESS;
    return true;
}

bool vs_offload_grants(uintptr_t addr, const CUmemLocation *location, unsigned long long *flags)
{
    CUstreamCaptureMode mode;

    if (!vs_offload_enabled() || location == NULL)
        return false;
    vs_engine_lock_light(&mode);
    vs_region_t *r = vs_engine_region_containing(addr);
    bool adopted = r != NULL && r->adopted;
    if (adopted) {
        *flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
        for (size_t i = 0; i < r->grant_count; i++)
            if (r->grants[i].location.type == location->type && r->grants[i].location.id == location->id)
                *flags = r->grants[i].flags;
    }
    vs_engine_unlock(mode);
    return adopted;
}

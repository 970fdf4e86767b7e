/* hooks_memory.c: every allocator, counted against the cap and registered
 * (`cuMemAlloc_v2` and its siblings, `cuMemGetInfo_v2`).
 *
 * An allocation reserves its bytes with `vs_cap_reserve` before the driver
 * is asked, so the cap holds under any interleaving of threads, and gives
 * them back if the driver refuses. A refusal by the cap is exactly
 * CUDA_ERROR_OUT_OF_MEMORY and touches nothing else. A free forgets the
 * allocation before the driver frees it, so a concurrent allocation that
 * gets the same address back never meets a stale record.
 *
 * The application's own VMM memory is hooks_vmm.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "cap.h"
#include "config.h"
#include "log.h"
#include "offload.h"
#include "pool_async.h"
#include "pool_usage.h"
#include "registry.h"
#include "hooks.h"

#define VS_DEVICE_KINDS                                                                            \
    ((1u << VS_ALLOC_DEVICE) | (1u << VS_ALLOC_PITCH) | (1u << VS_ALLOC_ASYNC) | (1u << VS_ALLOC_POOL))

/* Whether allocations on `device` go through the offload engine: offload
 * mode and a device with VMM. A device without it keeps the cap mode's
 * accounting (a hard cap at VRAM_LIMIT; the engine warned once). */
static bool vs_memory_offloads(int device)
{
    return vs_offload_enabled() && vs_offload_device_has_vmm(device);
}

/* What the pools keep freed, the driver's and the shim's, goes back to the
 * device. True when anything went. */
static bool vs_memory_pools_trim(int device)
{
    bool served = vs_pool_async_trim_device(device);
    return vs_pool_usage_trim(device) || served;
}

/* Takes `bytes` on the current device, or refuses with
 * CUDA_ERROR_OUT_OF_MEMORY. *device is -1 when nothing was reserved (no
 * current context: the driver will fail the call itself). */
CUresult vs_memory_reserve(int device, uint64_t bytes, int *device_out)
{
    *device_out = -1;
    if (bytes == 0 || device < 0)
        return CUDA_SUCCESS;
    if (vs_memory_offloads(device)) {
        /* Offload: make room by evicting; refuse only when the host budget
         * cannot take what would have to go (and the pools keep nothing
         * more to give back). */
        if (vs_offload_charge(device, bytes) != CUDA_SUCCESS
            && (!vs_memory_pools_trim(device) || vs_offload_charge(device, bytes) != CUDA_SUCCESS)) {
            VS_COUNT(refused);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *device_out = device;
        return CUDA_SUCCESS;
    }
    /* What memory pools keep freed is given back before a refusal. */
    if (vs_cap_reserve(device, bytes) != 0 && (!vs_memory_pools_trim(device) || vs_cap_reserve(device, bytes) != 0)) {
        VS_COUNT(refused);
        vs_log(VS_LOG_INFO,
               "cap: refused %" PRIu64 " bytes on device %d (%" PRIu64 " of %" PRIu64 " bytes in use)", bytes,
               device, vs_cap_used(device), vs_cap_limit(device));
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *device_out = device;
    return CUDA_SUCCESS;
}

/* The `handle` of a pool allocation (VS_ALLOC_ASYNC, VS_ALLOC_POOL): its
 * bytes are charged through its pool's reserve (pool_usage.c), or, where
 * the driver cannot report it, alone. */
#define VS_POOL_CHARGED_THROUGH_POOL 0
#define VS_POOL_CHARGED_ALONE 1

static bool vs_memory_charged_through_pool(vs_alloc_kind_t kind, uint64_t handle)
{
    return (kind == VS_ALLOC_ASYNC || kind == VS_ALLOC_POOL) && handle == VS_POOL_CHARGED_THROUGH_POOL;
}

/* Registers what the driver returned, or gives the reservation back when
 * it failed. */
static void vs_memory_commit(CUresult rc, int device, uintptr_t base, uint64_t bytes, vs_alloc_kind_t kind,
                             uint64_t handle)
{
    vs_alloc_desc_t desc = {.base = base, .size = bytes, .device = device, .kind = kind, .handle = handle};
    int err;

    bool charged = kind != VS_ALLOC_VMM && !vs_memory_charged_through_pool(kind, handle);
    if (rc != CUDA_SUCCESS || base == 0) {
        if (device >= 0 && charged)
            vs_cap_release(device, bytes);
        return;
    }
    err = vs_registry_add(&desc, NULL);
    if (err == -EEXIST) {
        /* Freed through a path the shim does not see (legacy 32-bit entry
         * points); the old record is stale. */
        vs_alloc_info_t stale;
        if (vs_registry_remove(base, ~0u, &stale) == 0 && (VS_DEVICE_KINDS & (1u << stale.kind))
            && !vs_memory_charged_through_pool(stale.kind, stale.handle))
            vs_cap_release(stale.device, stale.size);
        err = vs_registry_add(&desc, NULL);
    }
    if (err != 0) {
        vs_log(VS_LOG_WARN, "cannot register a %s allocation of %" PRIu64 " bytes at 0x%" PRIxPTR ": error %d",
               vs_registry_kind_name(kind), bytes, base, err);
        if (device >= 0 && charged)
            vs_cap_release(device, bytes);
    }
}

/* Forgets a device allocation before the driver frees it: its record
 * only, so that nothing else frees it or finds it meanwhile. Its bytes
 * stay charged until the driver has freed them (`vs_memory_uncharge`):
 * released first, they let another thread's allocation onto the device
 * while these bytes were still there, past VRAM_LIMIT. Returns true with
 * its record in *info when it was known. */
bool vs_memory_forget(CUdeviceptr dptr, vs_alloc_info_t *info)
{
    return dptr != 0 && vs_registry_remove((uintptr_t)dptr, VS_DEVICE_KINDS | (1u << VS_ALLOC_MANAGED), info) == 0;
}

/* The driver freed it: its bytes leave the count (a pool's stay charged
 * while the pool keeps them: pool_usage.c). */
void vs_memory_uncharge(const vs_alloc_info_t *info)
{
    if (info->kind == VS_ALLOC_MANAGED)
        vs_cap_count_managed(-(int64_t)info->size);
    else if (vs_memory_charged_through_pool(info->kind, info->handle))
        return;
    else if (info->device >= 0)
        vs_cap_release(info->device, info->size);
}

/* The driver refused the free: the allocation still exists, record it
 * again (its bytes were never released). */
static void vs_memory_unforget(const vs_alloc_info_t *info)
{
    vs_alloc_desc_t desc = {
        .base = info->base, .size = info->size, .device = info->device, .kind = info->kind, .handle = info->handle};
    if (vs_registry_add(&desc, NULL) != 0)
        vs_memory_uncharge(info); /* untracked from now on: never freed through here */
}

static CUresult vs_memory_free(CUdeviceptr dptr, CUresult (*real_free)(CUdeviceptr, CUstream), CUstream stream)
{
    vs_alloc_info_t info;
    bool known = vs_memory_forget(dptr, &info);
    CUresult rc = real_free(dptr, stream);

    if (known && rc == CUDA_SUCCESS) {
        if (info.kind == VS_ALLOC_ASYNC || info.kind == VS_ALLOC_POOL)
            vs_pool_async_count_plain(info.device, -(int64_t)info.size);
        vs_memory_uncharge(&info);
    }
    else if (known)
        vs_memory_unforget(&info);
    return rc;
}

/* Whether an allocation of `bytes` on `device` becomes an evictable region. */
static bool vs_memory_evictable(uint64_t bytes, int device)
{
    /* NCCL's own memory (allocated inside its calls) is reached by its
     * peers through pointers the shim never sees: plain device memory. */
    return vs_offload_enabled() && bytes >= vs_config_get()->min_evict && device >= 0
           && vs_offload_device_has_vmm(device) && !vs_nccl_inside();
}

/* Calls the driver's allocator; in offload mode, when the device itself is
 * full, evicts and tries again. */
#define VS_ALLOC_RETRYING(rc, device, bytes, call)                                                     do {                                                                                                   (rc) = (call);                                                                                     while ((rc) == CUDA_ERROR_OUT_OF_MEMORY && (device) >= 0 && vs_memory_offloads(device)                       && vs_offload_reclaim((device), (bytes)))                                                       (rc) = (call);                                                                             } while (0)

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    int device;
    CUresult rc;

    vs_driver_ready();
    int current = bytesize > 0 ? vs_driver_current_device() : -1;
    if (vs_memory_evictable(bytesize, current))
        return vs_offload_alloc(dptr, bytesize, current, VS_ALLOC_DEVICE);
    rc = vs_memory_reserve(current, bytesize, &device);
    if (rc != CUDA_SUCCESS)
        return rc;
    VS_ALLOC_RETRYING(rc, device, bytesize, VS_CALL(cuMemAlloc_v2, (dptr, bytesize)));
    vs_memory_commit(rc, device, dptr != NULL ? (uintptr_t)*dptr : 0, bytesize, VS_ALLOC_DEVICE, 0);
    return rc;
}

/* A pitched allocation as an evictable region: the pitch is the width
 * rounded up to the device's texture pitch alignment, as the driver's. */
static CUresult vs_memory_pitch_region(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                       unsigned int ElementSizeBytes, int device)
{
    int alignment = 0;
    CUdevice dev;

    if (dptr == NULL || pPitch == NULL || WidthInBytes == 0 || Height == 0
        || (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    if (VS_CALL(cuDeviceGet, (&dev, device)) != CUDA_SUCCESS
        || VS_CALL(cuDeviceGetAttribute, (&alignment, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, dev)) != CUDA_SUCCESS
        || alignment < 512)
        alignment = 512; /* what the driver's own pitched allocations use */
    uint64_t pitch = ((uint64_t)WidthInBytes + (uint64_t)alignment - 1) / (uint64_t)alignment * (uint64_t)alignment;
    CUresult rc = vs_offload_alloc(dptr, pitch * Height, device, VS_ALLOC_PITCH);
    if (rc == CUDA_SUCCESS)
        *pPitch = (size_t)pitch;
    return rc;
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                    unsigned int ElementSizeBytes)
{
    int device;
    CUresult rc;

    vs_driver_ready();
    /* The pitch is only known afterwards: reserve the unpadded size, then
     * settle the padding once the driver has chosen it. */
    uint64_t requested = (uint64_t)WidthInBytes * Height;
    if (requested > 0 && vs_memory_evictable(requested, vs_driver_current_device()))
        return vs_memory_pitch_region(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes,
                                      vs_driver_current_device());
    rc = vs_memory_reserve(vs_driver_current_device(), requested, &device);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = VS_CALL(cuMemAllocPitch_v2, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
    uint64_t actual = requested;
    if (rc == CUDA_SUCCESS && pPitch != NULL && device >= 0) {
        actual = (uint64_t)*pPitch * Height;
        if (actual > requested && vs_memory_offloads(device))
            vs_cap_charge(device, actual - requested);
        else if (actual > requested && vs_cap_reserve(device, actual - requested) != 0) {
            /* The padding takes the device over its limit. */
            VS_CALL(cuMemFree_v2, (*dptr));
            vs_cap_release(device, requested);
            VS_COUNT(refused);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    vs_memory_commit(rc, device, dptr != NULL ? (uintptr_t)*dptr : 0, actual, VS_ALLOC_PITCH, 0);
    return rc;
}

static CUresult vs_free_sync(CUdeviceptr dptr, CUstream stream)
{
    (void)stream;
    return VS_CALL(cuMemFree_v2, (dptr));
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult rc;

    vs_driver_ready();
    if (vs_pool_async_free_now(dptr, &rc) || vs_offload_free(dptr, &rc))
        return rc;
    return vs_memory_free(dptr, vs_free_sync, NULL);
}

/* Stream-ordered allocations, from a memory pool: counted from the call, as
 * the address is handed out then. The limit is asked for what the pool
 * must newly reserve; afterwards the device is charged what the pool
 * really reserves (pool_usage.c). */
typedef struct vs_pool_alloc_s {
    int device;      /* -1: nothing reserved */
    CUmemoryPool pool;
    bool through_pool;
    uint64_t reserved; /* charged for the call */
} vs_pool_alloc_t;

static CUresult vs_pool_alloc_begin(vs_pool_alloc_t *a, CUmemoryPool pool, uint64_t bytes)
{
    int current = vs_driver_current_device();
    a->pool = vs_pool_usage_resolve(current, pool);
    a->through_pool = a->pool != NULL && vs_pool_usage_tracked(a->pool);
    a->reserved = a->through_pool ? vs_pool_usage_growth(a->pool, bytes) : bytes;
    CUresult rc = vs_memory_reserve(current, a->reserved, &a->device);
    if (a->device < 0)
        a->device = a->reserved == 0 ? current : -1;
    return rc;
}

static void vs_pool_alloc_end(const vs_pool_alloc_t *a, CUresult rc, CUdeviceptr *dptr, uint64_t bytes,
                              vs_alloc_kind_t kind)
{
    if (a->through_pool && a->device >= 0) {
        vs_cap_release(a->device, a->reserved);
        vs_pool_usage_settle(a->device, a->pool);
    }
    vs_memory_commit(rc, a->device, dptr != NULL && rc == CUDA_SUCCESS ? (uintptr_t)*dptr : 0, bytes, kind,
                     a->through_pool ? VS_POOL_CHARGED_THROUGH_POOL : VS_POOL_CHARGED_ALONE);
    if (rc == CUDA_SUCCESS)
        vs_pool_async_count_plain(a->device, (int64_t)bytes);
}

/* A stream-ordered allocation of at least VRAMSHIM_MIN_EVICT in offload
 * mode is served from evictable memory (pool_async.c), unless its pool or
 * its stream keeps it the driver's. */
static bool vs_pool_alloc_served(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream, bool per_thread,
                                 vs_alloc_kind_t kind, CUresult *rc)
{
    int current = bytes > 0 ? vs_driver_current_device() : -1;
    return vs_memory_evictable(bytes, current)
           && vs_pool_async_alloc(dptr, bytes, pool, stream, per_thread, current, kind, rc);
}

#define VS_ALLOC_ASYNC_HOOK(symbol, per_thread)                                                    \
    CUresult CUDAAPI symbol(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)                  \
    {                                                                                              \
        vs_pool_alloc_t a;                                                                         \
        CUresult rc;                                                                               \
        vs_driver_ready();                                                                         \
        if (vs_pool_alloc_served(dptr, bytesize, NULL, hStream, per_thread, VS_ALLOC_ASYNC, &rc))  \
            return rc;                                                                             \
        rc = vs_pool_alloc_begin(&a, NULL, bytesize);                                              \
        if (rc != CUDA_SUCCESS)                                                                    \
            return rc;                                                                             \
        rc = VS_CALL(symbol, (dptr, bytesize, hStream));                                           \
        vs_pool_alloc_end(&a, rc, dptr, bytesize, VS_ALLOC_ASYNC);                                 \
        return rc;                                                                                 \
    }
VS_ALLOC_ASYNC_HOOK(cuMemAllocAsync, false)
VS_ALLOC_ASYNC_HOOK(cuMemAllocAsync_ptsz, true)

#define VS_ALLOC_POOL_HOOK(symbol, per_thread)                                                     \
    CUresult CUDAAPI symbol(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) \
    {                                                                                              \
        vs_pool_alloc_t a;                                                                         \
        CUresult rc;                                                                               \
        vs_driver_ready();                                                                         \
        if (pool != NULL                                                                           \
            && vs_pool_alloc_served(dptr, bytesize, pool, hStream, per_thread, VS_ALLOC_POOL, &rc)) \
            return rc;                                                                             \
        rc = vs_pool_alloc_begin(&a, pool, bytesize);                                              \
        if (rc != CUDA_SUCCESS)                                                                    \
            return rc;                                                                             \
        rc = VS_CALL(symbol, (dptr, bytesize, pool, hStream));                                     \
        vs_pool_alloc_end(&a, rc, dptr, bytesize, VS_ALLOC_POOL);                                  \
        return rc;                                                                                 \
    }
VS_ALLOC_POOL_HOOK(cuMemAllocFromPoolAsync, false)
VS_ALLOC_POOL_HOOK(cuMemAllocFromPoolAsync_ptsz, true)

static CUresult vs_free_async(CUdeviceptr dptr, CUstream stream)
{
    return VS_CALL(cuMemFreeAsync, (dptr, stream));
}

static CUresult vs_free_async_ptsz(CUdeviceptr dptr, CUstream stream)
{
    return VS_CALL(cuMemFreeAsync_ptsz, (dptr, stream));
}

/* A served stream-ordered allocation is freed by pool_async.c; an ordinary
 * `cuMemAlloc` allocation may be freed asynchronously too, and in offload
 * mode it is the engine's (`vs_offload_free_async`); anything else goes to
 * the driver. */
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    CUresult rc;

    vs_driver_ready();
    if (vs_pool_async_free(dptr, hStream, false, &rc) ||
        vs_offload_free_async(dptr, hStream, false, &rc))
        return rc;
    return vs_memory_free(dptr, vs_free_async, hStream);
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    CUresult rc;

    vs_driver_ready();
    if (vs_pool_async_free(dptr, hStream, true, &rc) ||
        vs_offload_free_async(dptr, hStream, true, &rc))
        return rc;
    return vs_memory_free(dptr, vs_free_async_ptsz, hStream);
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    vs_driver_ready();
    return vs_pool_async_create(pool, poolProps);
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    vs_driver_ready();
    return vs_pool_async_destroy(pool);
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    vs_driver_ready();
    return vs_pool_async_get_attribute(pool, attr, value);
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    vs_driver_ready();
    return vs_pool_async_set_attribute(pool, attr, value);
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    vs_driver_ready();
    return vs_pool_async_trim_to(pool, minBytesToKeep);
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuMemAllocManaged, (dptr, bytesize, flags));
    if (rc == CUDA_SUCCESS && dptr != NULL && *dptr != 0) {
        vs_alloc_desc_t desc = {.base = (uintptr_t)*dptr,
                                .size = bytesize,
                                .device = vs_driver_current_device(),
                                .kind = VS_ALLOC_MANAGED};
        if (vs_registry_add(&desc, NULL) == 0)
            vs_cap_count_managed((int64_t)bytesize);
    }
    return rc;
}

/* ---- Pinned host memory: tracked apart, never capped ------------------- */

static void vs_host_register(void *p, uint64_t bytes, vs_alloc_kind_t kind)
{
    vs_alloc_desc_t desc = {.base = (uintptr_t)p, .size = bytes, .device = -1, .kind = kind};
    if (p != NULL && vs_registry_add(&desc, NULL) == 0)
        vs_cap_count_host((int64_t)bytes);
}

static void vs_host_forget(void *p, vs_alloc_kind_t kind)
{
    vs_alloc_info_t info;
    if (p != NULL && vs_registry_remove((uintptr_t)p, 1u << kind, &info) == 0)
        vs_cap_count_host(-(int64_t)info.size);
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuMemHostAlloc, (pp, bytesize, Flags));
    if (rc == CUDA_SUCCESS && pp != NULL)
        vs_host_register(*pp, bytesize, VS_ALLOC_HOST_PINNED);
    return rc;
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuMemAllocHost_v2, (pp, bytesize));
    if (rc == CUDA_SUCCESS && pp != NULL)
        vs_host_register(*pp, bytesize, VS_ALLOC_HOST_PINNED);
    return rc;
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuMemFreeHost, (p));
    if (rc == CUDA_SUCCESS)
        vs_host_forget(p, VS_ALLOC_HOST_PINNED);
    return rc;
}

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuMemHostRegister_v2, (p, bytesize, Flags));
    if (rc == CUDA_SUCCESS)
        vs_host_register(p, bytesize, VS_ALLOC_HOST_REGISTERED);
    return rc;
}

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuMemHostUnregister, (p));
    if (rc == CUDA_SUCCESS)
        vs_host_forget(p, VS_ALLOC_HOST_REGISTERED);
    return rc;
}

/* ---- The virtual memory figures -----------------------------------------
 * Under a limit, frameworks size themselves from cuMemGetInfo (accelerate's
 * device_map, vLLM's KV cache, PyTorch's caching allocator through
 * cudaMemGetInfo): they see the limit as the total and what is left under
 * it as free, so that what they plan fits the limit instead of being
 * streamed through it. VRAMSHIM_MEMINFO=device answers the driver's own
 * figures, for programs that should plan for the whole device and leave
 * the streaming to the shim. */

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_out, size_t *total_out)
{
    size_t physical_free = 0, physical_total = 0;
    CUresult rc;

    vs_driver_ready();
    /* The driver gets our own out-parameters: NULL from the caller is
     * tolerated, whatever the driver thinks of it. */
    rc = VS_CALL(cuMemGetInfo_v2, (&physical_free, &physical_total));
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t virtual_free = physical_free, virtual_total = physical_total;
    int device = vs_driver_current_device();
    const vs_config_t *cfg = vs_config_get();
    if (cfg->limit_set && !cfg->meminfo_device && device >= 0) {
        vs_cap_meminfo(device, physical_free, physical_total, &virtual_free, &virtual_total);
        vs_pool_async_meminfo(device, &virtual_free, &virtual_total);
    }
    if (free_out != NULL)
        *free_out = (size_t)virtual_free;
    if (total_out != NULL)
        *total_out = (size_t)virtual_total;
    return rc;
}

/* ---- What the application asks about its own pointers ------------------
 * An evictable allocation is a reservation rounded to the granularity, and
 * unmapped while evicted: the answers are the allocation's as the
 * application made it, whatever its residency. */

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    vs_offload_range_t range;

    vs_driver_ready();
    if (!vs_offload_range((uintptr_t)dptr, &range))
        return VS_CALL(cuMemGetAddressRange_v2, (pbase, psize, dptr));
    if (pbase != NULL)
        *pbase = (CUdeviceptr)range.base;
    if (psize != NULL)
        *psize = (size_t)range.size;
    return CUDA_SUCCESS;
}

/* Answers `attribute` for an evictable allocation; false for attributes
 * the driver answers the same whatever the residency. */
static bool vs_pointer_attribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr,
                                 const vs_offload_range_t *range)
{
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = range->ctx;
        return true;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        /* Stable across evictions: caches keyed on it see one buffer. */
        *(unsigned long long *)data = range->id;
        return true;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)range->base;
        return true;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = (size_t)range->size;
        return true;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
        return true;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        return true;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = range->device;
        return true;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned int *)data = 0;
        return true;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: {
        /* A stream-ordered allocation served from evictable memory names
         * its pool, as the driver's own would. */
        CUmemoryPool pool = vs_pool_async_pool_of(range->base);
        if (pool == NULL)
            return false;
        *(CUmemoryPool *)data = pool;
        return true;
    }
    default:
        return false;
    }
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    vs_offload_range_t range;

    vs_driver_ready();
    if (data != NULL && vs_offload_range((uintptr_t)ptr, &range) && vs_pointer_attribute(data, attribute, ptr, &range))
        return CUDA_SUCCESS;
    return VS_CALL(cuPointerGetAttribute, (data, attribute, ptr));
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                        CUdeviceptr ptr)
{
    vs_offload_range_t range;
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuPointerGetAttributes, (numAttributes, attributes, data, ptr));
    if (attributes == NULL || data == NULL || !vs_offload_range((uintptr_t)ptr, &range))
        return rc;
    /* The driver may have refused an unmapped range: what the shim knows
     * is answered here, the rest stays as the driver left it. */
    for (unsigned int i = 0; i < numAttributes; i++) {
        if (data[i] != NULL)
            (void)vs_pointer_attribute(data[i], attributes[i], ptr, &range);
    }
    return rc == CUDA_ERROR_INVALID_VALUE ? CUDA_SUCCESS : rc;
}

/* Legacy IPC cannot export VMM memory: an evictable allocation is pinned
 * resident and the driver's answer passed on, with advice when it fails. */
CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    vs_offload_range_t range;
    CUresult rc;

    vs_driver_ready();
    bool evictable = vs_offload_range((uintptr_t)dptr, &range);
    if (evictable)
        vs_offload_pin((uintptr_t)dptr, "exported with cuIpcGetMemHandle");
    rc = VS_CALL(cuIpcGetMemHandle, (pHandle, dptr));
    if (evictable && rc != CUDA_SUCCESS)
        vs_log(VS_LOG_WARN,
               "cuIpcGetMemHandle cannot export the %" PRIu64 "-byte allocation at 0x%" PRIxPTR
               " (evictable memory is VMM memory); set VRAMSHIM_MIN_EVICT above its size to keep such "
               "allocations plain",
               range.size, range.base);
    return rc;
}

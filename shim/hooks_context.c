/* hooks_context.c: the hooks that change what a context reaches: peer
 * access (`cuCtxEnablePeerAccess`, `cuCtxDisablePeerAccess`) and the end of
 * a context (`cuCtxDestroy`, a primary context's reset and last release),
 * which frees every allocation made in it.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "offload.h"
#include "pool_async.h"
#include "registry.h"
#include "hooks.h"

/* ---- Peer access ------------------------------------------------------------ */

/* The device of `ctx` (NULL: the current context), or -1. */
static int vs_memory_ctx_device(CUcontext ctx)
{
    CUdevice device = -1;
    if (ctx == NULL)
        return VS_CALL(cuCtxGetDevice, (&device)) == CUDA_SUCCESS ? (int)device : -1;
    if (VS_CALL(cuCtxPushCurrent_v2, (ctx)) != CUDA_SUCCESS)
        return -1;
    if (VS_CALL(cuCtxGetDevice, (&device)) != CUDA_SUCCESS)
        device = -1;
    CUcontext popped;
    (void)VS_CALL(cuCtxPopCurrent_v2, (&popped));
    return (int)device;
}

/* Peer access does not reach the offload engine's VMM mappings: once the
 * driver has enabled it, the engine grants the current context's device
 * access to the peer's evictable allocations, those mapped now and every
 * later map. */
CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    vs_driver_ready();
    CUresult rc = VS_CALL(cuCtxEnablePeerAccess, (peerContext, Flags));
    if (rc == CUDA_SUCCESS)
        vs_offload_peer_changed(vs_memory_ctx_device(NULL), vs_memory_ctx_device(peerContext), true);
    return rc;
}

/* ... and revokes it again when the last context pair between the two
 * devices is disabled, so a kernel faults as it would without the shim. */
CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext)
{
    vs_driver_ready();
    CUresult rc = VS_CALL(cuCtxDisablePeerAccess, (peerContext));
    if (rc == CUDA_SUCCESS)
        vs_offload_peer_changed(vs_memory_ctx_device(NULL), vs_memory_ctx_device(peerContext), false);
    return rc;
}


/* ---- Contexts destroyed -------------------------------------------------
 * Destroying a context frees every allocation made in it (cuda.h: "destroys
 * and cleans up all resources associated with the context"), and so do a
 * primary context's reset (`cudaDeviceReset`) and its last release. The
 * offload engine ends what it holds there (offload.c); here, the cap's
 * charge of the application's ordinary allocations made in that context
 * goes with them. Stream-ordered allocations stay charged through their
 * pool (pool_usage.c reads its reserve again); the application's own VMM
 * handles belong to no context. */

typedef struct vs_ctx_allocations_s {
    CUcontext ctx;
    uintptr_t *bases;
    size_t count, capacity;
} vs_ctx_allocations_t;

static void vs_memory_gather_one(const vs_alloc_info_t *info, void *arg)
{
    vs_ctx_allocations_t *found = arg;
    if (info->kind != VS_ALLOC_DEVICE && info->kind != VS_ALLOC_PITCH && info->kind != VS_ALLOC_MANAGED)
        return;
    if (found->count == found->capacity) {
        size_t capacity = found->capacity ? found->capacity * 2 : 64;
        uintptr_t *grown = realloc(found->bases, capacity * sizeof *grown);
        if (grown == NULL)
            return; /* left charged: counted as in use, never past the limit */
        found->bases = grown;
        found->capacity = capacity;
    }
    found->bases[found->count++] = info->base;
}

/* The application's ordinary allocations made in `ctx` (alive): those the
 * driver says belong to it, other than the offload engine's. */
static void vs_memory_ctx_allocations(CUcontext ctx, vs_ctx_allocations_t *found)
{
    memset(found, 0, sizeof *found);
    found->ctx = ctx;
    if (ctx == NULL)
        return;
    vs_registry_foreach(vs_memory_gather_one, found);
    size_t kept = 0;
    vs_offload_range_t range;
    for (size_t i = 0; i < found->count; i++) {
        CUcontext owner = NULL;
        if (vs_offload_range(found->bases[i], &range)
            || VS_CALL(cuPointerGetAttribute, (&owner, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)found->bases[i]))
                   != CUDA_SUCCESS
            || owner != ctx)
            continue;
        found->bases[kept++] = found->bases[i];
    }
    found->count = kept;
}

/* They were freed with their context: their records and charges go. */
static void vs_memory_ctx_allocations_end(vs_ctx_allocations_t *found, bool destroyed)
{
    for (size_t i = 0; destroyed && i < found->count; i++) {
        vs_alloc_info_t info;
        if (vs_memory_forget((CUdeviceptr)found->bases[i], &info))
            vs_memory_uncharge(&info);
    }
    if (destroyed && found->count > 0)
        vs_log(VS_LOG_INFO, "context %p destroyed: %zu of its allocations freed with it", (void *)found->ctx,
               found->count);
    free(found->bases);
    memset(found, 0, sizeof *found);
}

/* The primary context of `device` while it is active, NULL otherwise. Its
 * handle is had by retaining it, released at once: the count it had is
 * restored and, being at least one, nothing is destroyed. */
static CUcontext vs_memory_active_primary(CUdevice device)
{
    unsigned flags = 0;
    int active = 0;
    CUcontext primary = NULL;
    if (VS_CALL(cuDevicePrimaryCtxGetState, (device, &flags, &active)) != CUDA_SUCCESS || !active
        || VS_CALL(cuDevicePrimaryCtxRetain, (&primary, device)) != CUDA_SUCCESS)
        return NULL;
    (void)VS_CALL(cuDevicePrimaryCtxRelease_v2, (device));
    return primary;
}

static bool vs_memory_primary_active(CUdevice device)
{
    unsigned flags = 0;
    int active = 0;
    return VS_CALL(cuDevicePrimaryCtxGetState, (device, &flags, &active)) == CUDA_SUCCESS && active;
}

/* `certain`: the call destroys `ctx` when it succeeds; otherwise whether it
 * did is known only after (`destroyed`). */
typedef struct vs_ctx_destroy_s {
    vs_ctx_allocations_t allocations;
    vs_offload_ctx_end_t engine;
} vs_ctx_destroy_t;

static void vs_memory_ctx_destroy_begin(CUcontext ctx, bool certain, vs_ctx_destroy_t *destroy)
{
    vs_memory_ctx_allocations(ctx, &destroy->allocations);
    vs_offload_ctx_ending(ctx, certain, &destroy->engine);
}

static void vs_memory_ctx_destroy_end(vs_ctx_destroy_t *destroy, bool destroyed)
{
    vs_offload_ctx_ended(&destroy->engine, destroyed);
    if (destroyed && destroy->allocations.ctx != NULL)
        vs_pool_async_ctx_destroyed(destroy->allocations.ctx);
    vs_memory_ctx_allocations_end(&destroy->allocations, destroyed);
}

/* Whether `ctx` is a live context (*certain: one `cuCtxDestroy` will
 * destroy, not a primary context, which only its release or reset ends). */
static bool vs_memory_ctx_live(CUcontext ctx, bool *certain)
{
    unsigned version = 0;
    *certain = false;
    if (ctx == NULL || VS_CALL(cuCtxGetApiVersion, (ctx, &version)) != CUDA_SUCCESS)
        return false;
    int device = vs_memory_ctx_device(ctx);
    *certain = device >= 0 && vs_memory_active_primary(device) != ctx;
    return true;
}

#define VS_CTX_DESTROY_HOOK(symbol)                                                                \
    CUresult CUDAAPI symbol(CUcontext ctx)                                                         \
    {                                                                                              \
        vs_driver_ready();                                                                         \
        vs_ctx_destroy_t destroy;                                                                  \
        bool certain;                                                                              \
        bool live = vs_memory_ctx_live(ctx, &certain);                                             \
        vs_memory_ctx_destroy_begin(live ? ctx : NULL, certain, &destroy);                         \
        CUresult rc = VS_CALL(symbol, (ctx));                                                      \
        vs_memory_ctx_destroy_end(&destroy, rc == CUDA_SUCCESS);                                   \
        return rc;                                                                                 \
    }
VS_CTX_DESTROY_HOOK(cuCtxDestroy)
VS_CTX_DESTROY_HOOK(cuCtxDestroy_v2)

/* A reset destroys the primary context whatever its retain count. */
#define VS_PRIMARY_RESET_HOOK(symbol)                                                              \
    CUresult CUDAAPI symbol(CUdevice dev)                                                          \
    {                                                                                              \
        vs_driver_ready();                                                                         \
        vs_ctx_destroy_t destroy;                                                                  \
        vs_memory_ctx_destroy_begin(vs_memory_active_primary(dev), true, &destroy);                \
        CUresult rc = VS_CALL(symbol, (dev));                                                      \
        vs_memory_ctx_destroy_end(&destroy, rc == CUDA_SUCCESS);                                   \
        return rc;                                                                                 \
    }
VS_PRIMARY_RESET_HOOK(cuDevicePrimaryCtxReset)
VS_PRIMARY_RESET_HOOK(cuDevicePrimaryCtxReset_v2)

/* A release destroys the primary context when it drops the last retain,
 * which the driver alone knows (the runtime retains through a private
 * table the shim does not see): it was the last when the context is no
 * longer active after it. */
#define VS_PRIMARY_RELEASE_HOOK(symbol)                                                            \
    CUresult CUDAAPI symbol(CUdevice dev)                                                          \
    {                                                                                              \
        vs_driver_ready();                                                                         \
        vs_ctx_destroy_t destroy;                                                                  \
        vs_memory_ctx_destroy_begin(vs_memory_active_primary(dev), false, &destroy);               \
        CUresult rc = VS_CALL(symbol, (dev));                                                      \
        vs_memory_ctx_destroy_end(&destroy, rc == CUDA_SUCCESS && !vs_memory_primary_active(dev)); \
        return rc;                                                                                 \
    }
VS_PRIMARY_RELEASE_HOOK(cuDevicePrimaryCtxRelease)
VS_PRIMARY_RELEASE_HOOK(cuDevicePrimaryCtxRelease_v2)

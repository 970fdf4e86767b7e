/* sim_peer.c: peer access between the simulated devices.
 *
 * Entry points: `cuDeviceCanAccessPeer`, `cuCtxEnablePeerAccess`,
 * `cuCtxDisablePeerAccess`, `cuDeviceGetP2PAttribute`, and
 * `sim_ctx_has_peer`, which the kernels' access check (`sim_memory.c`)
 * asks. Every pair of distinct simulated devices is peer capable, as on an
 * NVLink H100 system; a device is never its own peer (the real driver
 * answers 0 for `cuDeviceCanAccessPeer(dev, dev)` and
 * CUDA_ERROR_PEER_ACCESS_UNSUPPORTED for enabling a context's own device,
 * itself included, measured on an H100).
 *
 * Peer access is from one context to another and one way: context B with
 * access to A may run kernels that touch A's `cuMemAlloc` memory. It does
 * not reach VMM mappings (`cuMemSetAccess` decides those) or pool memory.
 */
#include "sim_internal.h"

/* Serialises enabling and disabling, so "already enabled" and "too many
 * peers" are decided on a stable list. Readers (`sim_ctx_has_peer`) take
 * no lock. */
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;

bool sim_ctx_has_peer(CUcontext ctx, CUcontext owner)
{
    for (int slot = 0; slot < SIM_MAX_PEERS; slot++)
        if (atomic_load_explicit(&ctx->peers[slot], memory_order_acquire) == owner)
            return true;
    return false;
}

/* Both ordinals name devices (CUDA_ERROR_INVALID_DEVICE otherwise). */
static CUresult device_pair_valid(CUdevice first, CUdevice second)
{
    sim_device_t *device;
    CUresult result = sim_device_get(first, &device);
    return result == CUDA_SUCCESS ? sim_device_get(second, &device) : result;
}

SIM_EXPORT CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    CUresult entry = SIM_ENTER(cuDeviceCanAccessPeer, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = device_pair_valid(dev, peerDev);
    if (result != CUDA_SUCCESS)
        return result;
    if (canAccessPeer == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *canAccessPeer = dev != peerDev;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    CUresult entry = SIM_ENTER(cuCtxEnablePeerAccess, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    if (!sim_ctx_valid(peerContext))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* The H100 answers this for the current context itself too, before the
     * INVALID_CONTEXT that cuda.h documents for that case. */
    if (peerContext->device == ctx->device)
        return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    pthread_mutex_lock(&peer_lock);
    int free_slot = -1;
    for (int slot = 0; slot < SIM_MAX_PEERS; slot++) {
        CUcontext peer = atomic_load(&ctx->peers[slot]);
        if (peer == peerContext) {
            result = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
            goto out;
        }
        if (peer == NULL && free_slot < 0)
            free_slot = slot;
    }
    if (free_slot < 0) {
        result = CUDA_ERROR_TOO_MANY_PEERS;
        goto out;
    }
    atomic_store_explicit(&ctx->peers[free_slot], peerContext, memory_order_release);
    atomic_fetch_add_explicit(&sim_access_generation, 1, memory_order_release);
out:
    pthread_mutex_unlock(&peer_lock);
    return result;
}

SIM_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    CUresult entry = SIM_ENTER(cuCtxDisablePeerAccess, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    if (!sim_ctx_valid(peerContext))
        return CUDA_ERROR_INVALID_CONTEXT;
    result = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    pthread_mutex_lock(&peer_lock);
    for (int slot = 0; slot < SIM_MAX_PEERS; slot++) {
        if (atomic_load(&ctx->peers[slot]) == peerContext) {
            atomic_store_explicit(&ctx->peers[slot], NULL, memory_order_release);
            result = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&peer_lock);
    if (result == CUDA_SUCCESS)
        atomic_fetch_add_explicit(&sim_access_generation, 1, memory_order_release);
    return result;
}

SIM_EXPORT CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
                                            CUdevice dstDevice)
{
    CUresult entry = SIM_ENTER(cuDeviceGetP2PAttribute, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = device_pair_valid(srcDevice, dstDevice);
    if (result != CUDA_SUCCESS)
        return result;
    if (srcDevice == dstDevice)
        return CUDA_ERROR_INVALID_DEVICE;
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
        *value = 0; /* every pair alike: one rank */
        return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
        *value = 1;
        return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED:
        *value = 0; /* all atomics are native */
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

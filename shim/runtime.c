/* runtime.c: the runtime-level `cudaMalloc` and `cudaFree`, for programs
 * that link libcudart dynamically and would otherwise allocate through it.
 *
 * They go through the shim's own `cuMemAlloc_v2`/`cuMemFree_v2` wrappers
 * (bound inside the library by -Bsymbolic-functions), so the cap and the
 * registry see them like any driver allocation. Like cudart, they make sure
 * a context is current first: the current one if there is one, else the
 * primary context of device 0, retained once and set current on the
 * calling thread. cudart's per-thread "last error" cannot be set from here;
 * the error is returned only.
 */
#include <driver_types.h>
#include <pthread.h>
#include <stdint.h>

#include "log.h"
#include "hooks.h"

VS_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size);
VS_EXPORT cudaError_t cudaFree(void *devPtr);

static cudaError_t vs_runtime_error(CUresult rc)
{
    switch (rc) {
    case CUDA_SUCCESS:
        return cudaSuccess;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return cudaErrorMemoryAllocation;
    case CUDA_ERROR_INVALID_VALUE:
        return cudaErrorInvalidValue;
    case CUDA_ERROR_NOT_INITIALIZED:
        return cudaErrorInitializationError;
    case CUDA_ERROR_DEINITIALIZED:
        return cudaErrorCudartUnloading;
    case CUDA_ERROR_NO_DEVICE:
        return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE:
        return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT:
        return cudaErrorDeviceUninitialized;
    default:
        return cudaErrorUnknown;
    }
}

static pthread_mutex_t vs_runtime_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext vs_runtime_primary;

static CUresult vs_runtime_context(void)
{
    CUcontext current = NULL;
    CUresult rc;

    if (vs_driver_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (VS_CALL(cuCtxGetCurrent, (&current)) == CUDA_SUCCESS && current != NULL)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&vs_runtime_lock);
    if (vs_runtime_primary == NULL) {
        CUdevice device;
        rc = VS_CALL(cuInit, (0));
        if (rc == CUDA_SUCCESS)
            rc = VS_CALL(cuDeviceGet, (&device, 0));
        if (rc == CUDA_SUCCESS)
            rc = VS_CALL(cuDevicePrimaryCtxRetain, (&vs_runtime_primary, device));
        if (rc != CUDA_SUCCESS) {
            pthread_mutex_unlock(&vs_runtime_lock);
            vs_log(VS_LOG_WARN, "cudaMalloc/cudaFree: cannot make a context current (error %d)", (int)rc);
            return rc;
        }
    }
    current = vs_runtime_primary;
    pthread_mutex_unlock(&vs_runtime_lock);
    return VS_CALL(cuCtxSetCurrent, (current));
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    CUdeviceptr dptr = 0;
    CUresult rc;

    if (devPtr == NULL)
        return cudaErrorInvalidValue;
    rc = vs_runtime_context();
    if (rc != CUDA_SUCCESS)
        return vs_runtime_error(rc);
    /* cudart answers a zero-byte request with NULL and success. */
    if (size == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    rc = cuMemAlloc_v2(&dptr, size);
    if (rc != CUDA_SUCCESS)
        return vs_runtime_error(rc);
    *devPtr = (void *)(uintptr_t)dptr;
    return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr)
{
    CUresult rc = vs_runtime_context();

    /* `cudaFree(NULL)` is the customary way to create the context. */
    if (rc != CUDA_SUCCESS || devPtr == NULL)
        return vs_runtime_error(rc);
    return vs_runtime_error(cuMemFree_v2((CUdeviceptr)(uintptr_t)devPtr));
}

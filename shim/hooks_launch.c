/* hooks_launch.c: kernel launches (`cuLaunchKernel` and its siblings) and
 * the calls that change which parameter layouts are valid.
 *
 * Each launch's parameters are scanned (launch.c) and the launch goes
 * through `VS_OPERATE` (offload.h): every allocation they point into is
 * marked as used and restored first when evicted. The `_ptsz` forms differ
 * in which stream NULL means, which the restore's ordering follows.
 */
#include <stdlib.h>

#include "offload.h"
#include "hooks.h"
#include "internal.h"
#include "pool_usage.h"
#include "launch.h"

/* Words a launch's parameters usually fit in without a heap allocation. */
#define VS_LAUNCH_WORDS 512

/* Scans the parameters, then submits `call` once everything they point into
 * is resident. */
#define VS_LAUNCH(stream, per_thread, f, params, extra, call)                                      \
    do {                                                                                           \
        uintptr_t vs_buffer_[VS_LAUNCH_WORDS];                                                     \
        vs_words_t vs_words_ = VS_WORDS_INIT(vs_buffer_);                                          \
        CUresult vs_rc_;                                                                           \
        vs_driver_ready();                                                                           \
        vs_launch_gather((f), (params), (extra), &vs_words_);                                      \
        VS_OPERATE(vs_rc_, "launch", (stream), (per_thread), vs_words_.words, vs_words_.count, (call));      \
        if (vs_words_.heap != NULL)                                                                \
            free(vs_words_.heap);                                                                  \
        return vs_rc_;                                                                             \
    } while (0)

VS_LAUNCH_PATH
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    VS_LAUNCH(hStream, false, f, kernelParams, extra,
              VS_CALL(cuLaunchKernel, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                    sharedMemBytes, hStream, kernelParams, extra)));
}

VS_LAUNCH_PATH
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                     void **kernelParams, void **extra)
{
    VS_LAUNCH(hStream, true, f, kernelParams, extra,
              VS_CALL(cuLaunchKernel_ptsz, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                         sharedMemBytes, hStream, kernelParams, extra)));
}

VS_LAUNCH_PATH
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    VS_LAUNCH(config != NULL ? config->hStream : NULL, false, f, kernelParams, extra,
              VS_CALL(cuLaunchKernelEx, (config, f, kernelParams, extra)));
}

VS_LAUNCH_PATH
CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                       void **extra)
{
    VS_LAUNCH(config != NULL ? config->hStream : NULL, true, f, kernelParams, extra,
              VS_CALL(cuLaunchKernelEx_ptsz, (config, f, kernelParams, extra)));
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                           unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                           unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                           void **kernelParams)
{
    VS_LAUNCH(hStream, false, f, kernelParams, NULL,
              VS_CALL(cuLaunchCooperativeKernel, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                               sharedMemBytes, hStream, kernelParams)));
}

CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                unsigned int gridDimZ, unsigned int blockDimX,
                                                unsigned int blockDimY, unsigned int blockDimZ,
                                                unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
    VS_LAUNCH(hStream, true, f, kernelParams, NULL,
              VS_CALL(cuLaunchCooperativeKernel_ptsz, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                                    blockDimZ, sharedMemBytes, hStream, kernelParams)));
}

/* cudart launches `<<<>>>` kernels with the CUkernel from here cast to a
 * CUfunction: remember which handles are kernels. */
CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuLibraryGetKernel, (pKernel, library, name));
    if (rc == CUDA_SUCCESS && pKernel != NULL)
        vs_launch_remember_kernel(*pKernel);
    return rc;
}

/* Unloading frees function handles the driver may hand out again for other
 * kernels: cached layouts must go. */
CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuModuleUnload, (hmod));
    if (rc == CUDA_SUCCESS)
        vs_launch_forget_layouts();
    return rc;
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuLibraryUnload, (library));
    if (rc == CUDA_SUCCESS)
        vs_launch_forget_layouts();
    return rc;
}

/* A context-wide synchronisation is where a test or a person reads the
 * debugging snapshot (VRAMSHIM_DEBUG_SNAPSHOT): all work launched so far
 * has been observed. */
CUresult CUDAAPI cuCtxSynchronize(void)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuCtxSynchronize, ());
    vs_offload_settle();
    vs_pool_usage_settle_all();
    vs_stats_debug_snapshot();
    return rc;
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuCtxSynchronize_v2, (ctx));
    vs_offload_settle();
    vs_pool_usage_settle_all();
    vs_stats_debug_snapshot();
    return rc;
}

/* A destroyed stream's number in the offload engine's stream table goes to
 * the next stream created: its work must be waited for first. */
CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    vs_driver_ready();
    vs_offload_stream_destroyed(hStream);
    return VS_CALL(cuStreamDestroy, (hStream));
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    vs_driver_ready();
    vs_offload_stream_destroyed(hStream);
    return VS_CALL(cuStreamDestroy_v2, (hStream));
}

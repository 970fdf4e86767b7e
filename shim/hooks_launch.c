/* hooks_launch.c: kernel launches (`cuLaunchKernel` and its siblings) and
 * the calls that change which parameter layouts are valid.
 *
 * Each launch is observed before it is forwarded: its parameters are
 * scanned (launch.c) and every allocation they point into gets the
 * launch's sequence number as its last use. The `_ptsz` forms differ only
 * in which stream NULL means, which matters to the driver, not to the scan.
 */
#include "shim.h"

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    vs_shim_ready();
    vs_launch_observe(f, kernelParams, extra);
    return VS_CALL(cuLaunchKernel, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                    sharedMemBytes, hStream, kernelParams, extra));
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                     void **kernelParams, void **extra)
{
    vs_shim_ready();
    vs_launch_observe(f, kernelParams, extra);
    return VS_CALL(cuLaunchKernel_ptsz, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                         sharedMemBytes, hStream, kernelParams, extra));
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    vs_shim_ready();
    vs_launch_observe(f, kernelParams, extra);
    return VS_CALL(cuLaunchKernelEx, (config, f, kernelParams, extra));
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                       void **extra)
{
    vs_shim_ready();
    vs_launch_observe(f, kernelParams, extra);
    return VS_CALL(cuLaunchKernelEx_ptsz, (config, f, kernelParams, extra));
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                           unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                           unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                           void **kernelParams)
{
    vs_shim_ready();
    vs_launch_observe(f, kernelParams, NULL);
    return VS_CALL(cuLaunchCooperativeKernel, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                               sharedMemBytes, hStream, kernelParams));
}

CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                unsigned int gridDimZ, unsigned int blockDimX,
                                                unsigned int blockDimY, unsigned int blockDimZ,
                                                unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
    vs_shim_ready();
    vs_launch_observe(f, kernelParams, NULL);
    return VS_CALL(cuLaunchCooperativeKernel_ptsz, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                                    blockDimZ, sharedMemBytes, hStream, kernelParams));
}

/* cudart launches `<<<>>>` kernels with the CUkernel from here cast to a
 * CUfunction: remember which handles are kernels. */
CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    CUresult rc;

    vs_shim_ready();
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

    vs_shim_ready();
    rc = VS_CALL(cuModuleUnload, (hmod));
    if (rc == CUDA_SUCCESS)
        vs_launch_forget_layouts();
    return rc;
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
    CUresult rc;

    vs_shim_ready();
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

    vs_shim_ready();
    rc = VS_CALL(cuCtxSynchronize, ());
    vs_shim_debug_snapshot();
    return rc;
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    CUresult rc;

    vs_shim_ready();
    rc = VS_CALL(cuCtxSynchronize_v2, (ctx));
    vs_shim_debug_snapshot();
    return rc;
}

/* client_driver.h: the driver entry points a test client uses, as one table.
 *
 * The same workload (`client_workload.c`) runs over this table whichever way
 * the table was filled: by direct calls into a linked libcuda
 * (`client_direct.c`), by `dlsym` on a `dlopen`ed handle (`client_dlsym.c`),
 * or through `cuGetProcAddress_v2` exactly as libcudart does
 * (`client_cudart_like.c`). That is what lets a suite prove that a shim sees
 * the same work from every entry path.
 *
 * These clients are written against `cuda.h` only, like a user's program.
 */
#ifndef VRAMSHIM_TESTS_CLIENT_DRIVER_H
#define VRAMSHIM_TESTS_CLIENT_DRIVER_H

#include <cuda.h>
#include <cudaTypedefs.h>

/* One row per entry point: the name a program asks for, the version cudart
 * 13 asks it at, whether the per-thread form is wanted when the client runs
 * in per-thread mode, and the typed field it fills. */
#define CLIENT_DRIVER_ENTRIES(X)                                              \
    X(cuInit, 2000, 0, PFN_cuInit_v2000)                                      \
    X(cuDriverGetVersion, 2020, 0, PFN_cuDriverGetVersion_v2020)              \
    X(cuDeviceGet, 2000, 0, PFN_cuDeviceGet_v2000)                            \
    X(cuDevicePrimaryCtxRetain, 7000, 0, PFN_cuDevicePrimaryCtxRetain_v7000)  \
    X(cuDevicePrimaryCtxRelease, 11000, 0, PFN_cuDevicePrimaryCtxRelease_v11000) \
    X(cuCtxSetCurrent, 4000, 0, PFN_cuCtxSetCurrent_v4000)                    \
    X(cuMemGetInfo, 3020, 0, PFN_cuMemGetInfo_v3020)                          \
    X(cuMemAlloc, 3020, 0, PFN_cuMemAlloc_v3020)                              \
    X(cuMemFree, 3020, 0, PFN_cuMemFree_v3020)                                \
    X(cuMemcpyHtoD, 3020, 1, PFN_cuMemcpyHtoD_v3020)                          \
    X(cuMemcpyDtoH, 3020, 1, PFN_cuMemcpyDtoH_v3020)                          \
    X(cuModuleLoadData, 2000, 0, PFN_cuModuleLoadData_v2000)                  \
    X(cuModuleGetFunction, 2000, 0, PFN_cuModuleGetFunction_v2000)            \
    X(cuStreamCreate, 2000, 0, PFN_cuStreamCreate_v2000)                      \
    X(cuStreamDestroy, 4000, 0, PFN_cuStreamDestroy_v4000)                    \
    X(cuStreamSynchronize, 2000, 1, PFN_cuStreamSynchronize_v2000)            \
    X(cuEventCreate, 2000, 0, PFN_cuEventCreate_v2000)                        \
    X(cuEventRecord, 2000, 1, PFN_cuEventRecord_v2000)                        \
    X(cuStreamWaitEvent, 3020, 1, PFN_cuStreamWaitEvent_v3020)                \
    X(cuEventDestroy, 4000, 0, PFN_cuEventDestroy_v4000)                      \
    X(cuLaunchKernel, 4000, 1, PFN_cuLaunchKernel_v4000)                      \
    X(cuCtxSynchronize, 2000, 0, PFN_cuCtxSynchronize_v2000)                  \
    X(cuDeviceGetCount, 2000, 0, PFN_cuDeviceGetCount_v2000)                  \
    X(cuDeviceCanAccessPeer, 4000, 0, PFN_cuDeviceCanAccessPeer_v4000)        \
    X(cuCtxEnablePeerAccess, 4000, 0, PFN_cuCtxEnablePeerAccess_v4000)        \
    X(cuCtxDisablePeerAccess, 4000, 0, PFN_cuCtxDisablePeerAccess_v4000)      \
    X(cuMemcpyPeer, 4000, 1, PFN_cuMemcpyPeer_v4000)                          \
    X(cuMemcpyPeerAsync, 4000, 1, PFN_cuMemcpyPeerAsync_v4000)

typedef struct client_driver_s {
#define CLIENT_DRIVER_FIELD(name, version, per_thread, type) type name;
    CLIENT_DRIVER_ENTRIES(CLIENT_DRIVER_FIELD)
#undef CLIENT_DRIVER_FIELD
    const char *entry_path; /* "direct", "dlsym" or "cudart-like" */
} client_driver_t;

/* Runs the workload selected by argv (see `client_usage`). Returns the
 * process exit status: 0 when every checksum matched. */
int client_main(const client_driver_t *driver, int argc, char **argv);

#endif

/* sim_core.c: initialisation, devices, contexts and the current-context
 * stack of the simulated driver, plus the error-code table and the
 * configuration helpers every file uses.
 *
 * Main entry point: `cuInit`, which reads the configuration (`SIMCUDA_DEVICES`,
 * `SIMCUDA_DEVICE_MEM`, `SIMCUDA_FAIL` through sim_fault.c), raises the
 * open-file limit and reserves each device's address range (sim_memory.c).
 */
#include "sim_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

/* ------------------------------------------------------------------------
 * Error codes: one list, expanded into names, descriptions and the parser
 * of `SIMCUDA_FAIL`'s `err=` option. Descriptions are the first sentence of
 * cuda.h's documentation of each code.
 * ------------------------------------------------------------------------ */
#define SIM_ERROR_LIST(X) \
    X(CUDA_SUCCESS, "The API call returned with no errors") \
    X(CUDA_ERROR_INVALID_VALUE, "This indicates that one or more of the parameters passed to the API call is not within an acceptable range") \
    X(CUDA_ERROR_OUT_OF_MEMORY, "The API call failed because it was unable to allocate enough memory or other resources to perform the") \
    X(CUDA_ERROR_NOT_INITIALIZED, "This indicates that the CUDA driver has not been initialized with cuInit() or that initialization has failed") \
    X(CUDA_ERROR_DEINITIALIZED, "This indicates that the CUDA driver is in the process of shutting down") \
    X(CUDA_ERROR_PROFILER_DISABLED, "This indicates profiler is not initialized for this run") \
    X(CUDA_ERROR_PROFILER_NOT_INITIALIZED, "deprecated This error return is deprecated as of CUDA 5.0") \
    X(CUDA_ERROR_PROFILER_ALREADY_STARTED, "deprecated This error return is deprecated as of CUDA 5.0") \
    X(CUDA_ERROR_PROFILER_ALREADY_STOPPED, "deprecated This error return is deprecated as of CUDA 5.0") \
    X(CUDA_ERROR_STUB_LIBRARY, "This indicates that the CUDA driver that the application has loaded is a stub library") \
    X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "This indicates that the API call requires a newer CUDA driver than the one currently installed") \
    X(CUDA_ERROR_DEVICE_UNAVAILABLE, "This indicates that requested CUDA device is unavailable at the current time") \
    X(CUDA_ERROR_NO_DEVICE, "This indicates that no CUDA-capable devices were detected by the installed CUDA driver") \
    X(CUDA_ERROR_INVALID_DEVICE, "This indicates that the device ordinal supplied by the user does not correspond to a valid CUDA device or") \
    X(CUDA_ERROR_DEVICE_NOT_LICENSED, "This error indicates that the Grid license is not applied") \
    X(CUDA_ERROR_INVALID_IMAGE, "This indicates that the device kernel image is invalid") \
    X(CUDA_ERROR_INVALID_CONTEXT, "This most frequently indicates that there is no context bound to the current thread") \
    X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "This indicated that the context being supplied as a parameter to the API call was already the active context") \
    X(CUDA_ERROR_MAP_FAILED, "This indicates that a map or register operation has failed") \
    X(CUDA_ERROR_UNMAP_FAILED, "This indicates that an unmap or unregister operation has failed") \
    X(CUDA_ERROR_ARRAY_IS_MAPPED, "This indicates that the specified array is currently mapped and thus cannot be destroyed") \
    X(CUDA_ERROR_ALREADY_MAPPED, "This indicates that the resource is already mapped") \
    X(CUDA_ERROR_NO_BINARY_FOR_GPU, "This indicates that there is no kernel image available that is suitable for the device") \
    X(CUDA_ERROR_ALREADY_ACQUIRED, "This indicates that a resource has already been acquired") \
    X(CUDA_ERROR_NOT_MAPPED, "This indicates that a resource is not mapped") \
    X(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "This indicates that a mapped resource is not available for access as an array") \
    X(CUDA_ERROR_NOT_MAPPED_AS_POINTER, "This indicates that a mapped resource is not available for access as a pointer") \
    X(CUDA_ERROR_ECC_UNCORRECTABLE, "This indicates that an uncorrectable ECC error was detected during execution") \
    X(CUDA_ERROR_UNSUPPORTED_LIMIT, "This indicates that the CUlimit passed to the API call is not supported by the active device") \
    X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "This indicates that the CUcontext passed to the API call can only be bound to a single CPU thread at a") \
    X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "This indicates that peer access is not supported across the given devices") \
    X(CUDA_ERROR_INVALID_PTX, "This indicates that a PTX JIT compilation failed") \
    X(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "This indicates an error with OpenGL or DirectX context") \
    X(CUDA_ERROR_NVLINK_UNCORRECTABLE, "This indicates that an uncorrectable NVLink error was detected during the execution") \
    X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "This indicates that the PTX JIT compiler library was not found") \
    X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "This indicates that the provided PTX was compiled with an unsupported toolchain") \
    X(CUDA_ERROR_JIT_COMPILATION_DISABLED, "This indicates that the PTX JIT compilation was disabled") \
    X(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "This indicates that the CUexecAffinityType passed to the API call is not supported by the active device") \
    X(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, "This indicates that the code to be compiled by the PTX JIT contains unsupported call to cudaDeviceSynchronize") \
    X(CUDA_ERROR_CONTAINED, "This indicates that an exception occurred on the device that is now contained by the GPU's error") \
    X(CUDA_ERROR_INVALID_SOURCE, "This indicates that the device kernel source is invalid") \
    X(CUDA_ERROR_FILE_NOT_FOUND, "This indicates that the file specified was not found") \
    X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "This indicates that a link to a shared object failed to resolve") \
    X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "This indicates that initialization of a shared object failed") \
    X(CUDA_ERROR_OPERATING_SYSTEM, "This indicates that an OS call failed") \
    X(CUDA_ERROR_INVALID_HANDLE, "This indicates that a resource handle passed to the API call was not valid") \
    X(CUDA_ERROR_ILLEGAL_STATE, "This indicates that a resource required by the API call is not in a valid state to perform the requested") \
    X(CUDA_ERROR_LOSSY_QUERY, "This indicates an attempt was made to introspect an object in a way that would discard semantically") \
    X(CUDA_ERROR_NOT_FOUND, "This indicates that a named symbol was not found") \
    X(CUDA_ERROR_NOT_READY, "This indicates that asynchronous operations issued previously have not completed yet") \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "While executing a kernel, the device encountered a load or store instruction on an invalid memory address") \
    X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "This indicates that a launch did not occur because it did not have appropriate resources") \
    X(CUDA_ERROR_LAUNCH_TIMEOUT, "This indicates that the device kernel took too long to execute") \
    X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "This error indicates a kernel launch that uses an incompatible texturing mode") \
    X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "This error indicates that a call to cuCtxEnablePeerAccess() is trying to re-enable peer access to a") \
    X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "This error indicates that cuCtxDisablePeerAccess() is trying to disable peer access which has not been") \
    X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "This error indicates that the primary context for the specified device has already been initialized") \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED, "This error indicates that the context current to the calling thread has been destroyed using cuCtxDestroy,") \
    X(CUDA_ERROR_ASSERT, "A device-side assert triggered during kernel execution") \
    X(CUDA_ERROR_TOO_MANY_PEERS, "This error indicates that the hardware resources required to enable peer access have been exhausted for") \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "This error indicates that the memory range passed to cuMemHostRegister() has already been registered") \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "This error indicates that the pointer passed to cuMemHostUnregister() does not correspond to any currently") \
    X(CUDA_ERROR_HARDWARE_STACK_ERROR, "While executing a kernel, the device encountered a stack error") \
    X(CUDA_ERROR_ILLEGAL_INSTRUCTION, "While executing a kernel, the device encountered an illegal instruction") \
    X(CUDA_ERROR_MISALIGNED_ADDRESS, "While executing a kernel, the device encountered a load or store instruction on a memory address which is") \
    X(CUDA_ERROR_INVALID_ADDRESS_SPACE, "While executing a kernel, the device encountered an instruction which can only operate on memory locations") \
    X(CUDA_ERROR_INVALID_PC, "While executing a kernel, the device program counter wrapped its address space") \
    X(CUDA_ERROR_LAUNCH_FAILED, "An exception occurred on the device while executing a kernel") \
    X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "This error indicates that the number of blocks launched per grid for a kernel that was launched via either") \
    X(CUDA_ERROR_TENSOR_MEMORY_LEAK, "An exception occurred on the device while exiting a kernel using tensor memory: the tensor memory was not") \
    X(CUDA_ERROR_NOT_PERMITTED, "This error indicates that the attempted operation is not permitted") \
    X(CUDA_ERROR_NOT_SUPPORTED, "This error indicates that the attempted operation is not supported on the current system or device") \
    X(CUDA_ERROR_SYSTEM_NOT_READY, "This error indicates that the system is not yet ready to start any CUDA work") \
    X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "This error indicates that there is a mismatch between the versions of the display driver and the CUDA driver") \
    X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "This error indicates that the system was upgraded to run with forward compatibility but the visible") \
    X(CUDA_ERROR_MPS_CONNECTION_FAILED, "This error indicates that the MPS client failed to connect to the MPS control daemon or the MPS server") \
    X(CUDA_ERROR_MPS_RPC_FAILURE, "This error indicates that the remote procedural call between the MPS server and the MPS client failed") \
    X(CUDA_ERROR_MPS_SERVER_NOT_READY, "This error indicates that the MPS server is not ready to accept new MPS client requests") \
    X(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "This error indicates that the hardware resources required to create MPS client have been exhausted") \
    X(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "This error indicates the the hardware resources required to support device connections have been exhausted") \
    X(CUDA_ERROR_MPS_CLIENT_TERMINATED, "This error indicates that the MPS client has been terminated by the server") \
    X(CUDA_ERROR_CDP_NOT_SUPPORTED, "This error indicates that the module is using CUDA Dynamic Parallelism, but the current configuration,") \
    X(CUDA_ERROR_CDP_VERSION_MISMATCH, "This error indicates that a module contains an unsupported interaction between different versions of CUDA") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "This error indicates that the operation is not permitted when the stream is capturing") \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "This error indicates that the current capture sequence on the stream has been invalidated due to a") \
    X(CUDA_ERROR_STREAM_CAPTURE_MERGE, "This error indicates that the operation would have resulted in a merge of two independent capture sequences") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "This error indicates that the capture was not initiated in this stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "This error indicates that the capture sequence contains a fork that was not joined to the primary stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "This error indicates that a dependency would have been created which crosses the capture sequence boundary") \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "This error indicates a disallowed implicit dependency on a current capture sequence from cudaStreamLegacy") \
    X(CUDA_ERROR_CAPTURED_EVENT, "This error indicates that the operation is not permitted on an event which was last recorded in a") \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "A stream capture sequence not initiated with the CU_STREAM_CAPTURE_MODE_RELAXED argument to") \
    X(CUDA_ERROR_TIMEOUT, "This error indicates that the timeout specified for the wait operation has lapsed") \
    X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "This error indicates that the graph update was not performed because it included changes which violated") \
    X(CUDA_ERROR_EXTERNAL_DEVICE, "This indicates that an async error has occurred in a device outside of CUDA") \
    X(CUDA_ERROR_INVALID_CLUSTER_SIZE, "Indicates a kernel launch error due to cluster misconfiguration") \
    X(CUDA_ERROR_FUNCTION_NOT_LOADED, "Indiciates a function handle is not loaded when calling an API that requires a loaded function") \
    X(CUDA_ERROR_INVALID_RESOURCE_TYPE, "This error indicates one or more resources passed in are not valid resource types for the operation") \
    X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "This error indicates one or more resources are insufficient or non-applicable for the operation") \
    X(CUDA_ERROR_KEY_ROTATION, "This error indicates that an error happened during the key rotation sequence") \
    X(CUDA_ERROR_UNKNOWN, "This indicates that an unknown internal error has occurred") \
    /* end of SIM_ERROR_LIST */

SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    CUresult entry = SIM_ENTER(cuGetErrorString, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pStr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    switch (error) {
#define X(code, text) \
    case code:        \
        *pStr = text; \
        return CUDA_SUCCESS;
        SIM_ERROR_LIST(X)
#undef X
    default:
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
}

SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    CUresult entry = SIM_ENTER(cuGetErrorName, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pStr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    switch (error) {
#define X(code, text) \
    case code:        \
        *pStr = #code; \
        return CUDA_SUCCESS;
        SIM_ERROR_LIST(X)
#undef X
    default:
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
}

int sim_error_from_name(const char *name, CUresult *out)
{
#define X(code, text)              \
    if (strcmp(name, #code) == 0) { \
        *out = code;               \
        return 0;                  \
    }
    SIM_ERROR_LIST(X)
#undef X
    return -ENOENT;
}

/* ------------------------------------------------------------------------
 * Configuration helpers
 * ------------------------------------------------------------------------ */

int sim_parse_size(const char *text, uint64_t *out)
{
    if (text == NULL || *text == '\0')
        return -EINVAL;
    errno = 0;
    char *end = NULL;
    double value = strtod(text, &end);
    if (errno != 0 || end == text || !(value >= 0) || !isfinite(value))
        return -EINVAL;
    double scale = 1;
    switch (*end) {
    case 'k': case 'K': scale = 1024.0; end++; break;
    case 'm': case 'M': scale = 1024.0 * 1024; end++; break;
    case 'g': case 'G': scale = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': scale = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    /* Accept an optional "B"/"iB" suffix ("512MiB", "1GB"). */
    if (scale > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0')
        return -EINVAL;
    double bytes = value * scale;
    if (bytes > 1.8e19)
        return -EINVAL;
    *out = (uint64_t)bytes;
    return 0;
}

uint64_t sim_env_size(const char *name, uint64_t fallback)
{
    const char *text = getenv(name);
    if (text == NULL || *text == '\0')
        return fallback;
    uint64_t value;
    if (sim_parse_size(text, &value) != 0) {
        fprintf(stderr,
                "simcuda: %s=\"%s\" is not a size (accepted: a number of bytes with an optional K, M, G or T "
                "suffix, e.g. 4096, 512M, 1.5G); using %llu\n",
                name, text, (unsigned long long)fallback);
        return fallback;
    }
    return value;
}

double sim_env_double(const char *name, double fallback)
{
    const char *text = getenv(name);
    if (text == NULL || *text == '\0')
        return fallback;
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !isfinite(value)) {
        fprintf(stderr, "simcuda: %s=\"%s\" is not a number (accepted: a decimal such as 2 or 0.5); using %g\n", name,
                text, fallback);
        return fallback;
    }
    return value;
}

/* The oldest version `SIMCUDA_DRIVER_VERSION` accepts: the first with
 * `cuGetProcAddress`, which every client of the simulated driver uses. */
#define SIM_OLDEST_DRIVER_VERSION 11030

static pthread_once_t driver_version_once = PTHREAD_ONCE_INIT;
static int driver_version = CUDA_VERSION;

static void read_driver_version(void)
{
    const char *text = getenv("SIMCUDA_DRIVER_VERSION");
    if (text == NULL || *text == '\0')
        return;
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || text[0] == '+' || value % 10 != 0 ||
        value < SIM_OLDEST_DRIVER_VERSION || value > CUDA_VERSION) {
        fprintf(stderr,
                "simcuda: SIMCUDA_DRIVER_VERSION=\"%s\" is not a driver version (accepted: 1000 * major + 10 * "
                "minor, as cuDriverGetVersion reports it, from %d to %d, e.g. 12020 for 12.2); using %d\n",
                text, SIM_OLDEST_DRIVER_VERSION, CUDA_VERSION, CUDA_VERSION);
        return;
    }
    driver_version = (int)value;
}

int sim_driver_version(void)
{
    pthread_once(&driver_version_once, read_driver_version);
    return driver_version;
}

/* A switch SIMCUDA_<name>: unset, empty or 1 leaves `*on` true, 0 makes
 * it false; anything else is named on stderr and leaves it true. */
static void read_switch(const char *name, bool *on)
{
    char variable[64];
    snprintf(variable, sizeof variable, "SIMCUDA_%s", name);
    const char *text = getenv(variable);
    if (text == NULL || *text == '\0' || strcmp(text, "1") == 0)
        return;
    if (strcmp(text, "0") == 0) {
        *on = false;
        return;
    }
    fprintf(stderr, "simcuda: %s=\"%s\" is not a switch (accepted: 0 or 1); using 1\n", variable, text);
}

static pthread_once_t vmm_once = PTHREAD_ONCE_INIT;
static bool vmm_supported = true;

static void read_vmm(void)
{
    read_switch("VMM", &vmm_supported);
}

bool sim_vmm_supported(void)
{
    pthread_once(&vmm_once, read_vmm);
    return vmm_supported;
}

static pthread_once_t host_vmm_once = PTHREAD_ONCE_INIT;
static bool host_vmm_enabled = true;

static void read_host_vmm(void)
{
    read_switch("HOST_VMM", &host_vmm_enabled);
}

bool sim_host_vmm_supported(void)
{
    pthread_once(&host_vmm_once, read_host_vmm);
    /* Host-located memory is a kind of virtual memory management: a device
     * without it (SIMCUDA_VMM=0) has neither. */
    return host_vmm_enabled && sim_vmm_supported();
}

/* ------------------------------------------------------------------------
 * Initialisation
 * ------------------------------------------------------------------------ */

int sim_device_count;
sim_device_t *sim_devices;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;
static atomic_bool init_done;

static int parse_device_count(void)
{
    const char *text = getenv("SIMCUDA_DEVICES");
    if (text == NULL || *text == '\0')
        return 1;
    char *end = NULL;
    long count = strtol(text, &end, 10);
    if (end == text || *end != '\0' || count < 0 || count > SIM_MAX_DEVICES) {
        fprintf(stderr, "simcuda: SIMCUDA_DEVICES=\"%s\" is not a device count (accepted: 0 to %d); using 1\n", text,
                SIM_MAX_DEVICES);
        return 1;
    }
    return (int)count;
}

/* Every VMM handle keeps a memfd open: lift the soft descriptor limit to
 * the hard one so that programs mapping thousands of chunks do not run out. */
static void raise_file_limit(void)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &limit);
    }
}

static void init_devices(void)
{
    int count = parse_device_count();
    uint64_t total = sim_env_size("SIMCUDA_DEVICE_MEM", 1ull << 30);
    sim_devices = calloc(count > 0 ? (size_t)count : 1, sizeof(sim_device_t));
    if (sim_devices == NULL) {
        init_result = CUDA_ERROR_OUT_OF_MEMORY;
        return;
    }
    for (int i = 0; i < count; i++) {
        sim_device_t *device = &sim_devices[i];
        device->ordinal = i;
        snprintf(device->name, sizeof device->name, "simcuda device %d", i);
        /* A stable, recognisable UUID: "simcuda" and the ordinal. */
        memcpy(device->uuid.bytes, "simcuda-uuid", 12);
        device->uuid.bytes[12] = 0;
        device->uuid.bytes[13] = 0;
        device->uuid.bytes[14] = (char)(i >> 8);
        device->uuid.bytes[15] = (char)i;
        device->total_bytes = total;
        atomic_init(&device->used_bytes, 0);
        atomic_init(&device->peak_bytes, 0);
        pthread_mutex_init(&device->lock, NULL);
    }
    sim_device_count = count;
    if (sim_memory_init() != 0) {
        init_result = CUDA_ERROR_OUT_OF_MEMORY;
        return;
    }
    init_result = CUDA_SUCCESS;
    atomic_store(&init_done, true);
}

static void init_once_fn(void)
{
    sim_fault_check_config();
    (void)sim_driver_version(); /* malformed values are reported at cuInit at the latest */
    (void)sim_vmm_supported();
    (void)sim_host_vmm_supported();
    sim_clock_check_config();
    raise_file_limit();
    init_devices();
}

SIM_EXPORT CUresult cuInit(unsigned int Flags)
{
    CUresult entry = SIM_ENTER(cuInit, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&init_once, init_once_fn);
    return init_result;
}

bool sim_initialized(void)
{
    return atomic_load_explicit(&init_done, memory_order_acquire);
}

SIM_EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
    CUresult entry = SIM_ENTER(cuDriverGetVersion, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (driverVersion == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = sim_driver_version();
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------ */

CUresult sim_device_get(CUdevice ordinal, sim_device_t **out)
{
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= sim_device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *out = &sim_devices[ordinal];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult entry = SIM_ENTER(cuDeviceGet, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= sim_device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int *count)
{
    CUresult entry = SIM_ENTER(cuDeviceGetCount, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (count == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *count = sim_device_count;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDeviceGetName, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    if (name == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", device->name);
    return CUDA_SUCCESS;
}

/* An H100 SXM's answers (driver 580.159.04, recorded by
 * tests/gpu/device_attributes.c in device_attributes.h100.txt, which the sim
 * suite compares with). Attributes of features simcuda does not implement
 * (textures' gather, sparse arrays, GPUDirect RDMA, dma-buf, fabric handles,
 * host NUMA and host memory pools, timeline semaphores) read 0, as a device
 * without them would say; the bus layout is simcuda's own. */
#define SIM_DEVICE_ATTRIBUTES(X)                                   \
    X(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024)             \
    X(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024)                   \
    X(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024)                   \
    X(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64)                     \
    X(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647)              \
    X(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535)                   \
    X(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535)                   \
    X(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152)      \
    X(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536)            \
    X(CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32)                           \
    X(CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2147483647)                   \
    X(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536)          \
    X(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000)                     \
    X(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 512)                  \
    X(CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, 1)                          \
    X(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132)               \
    X(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1)                  \
    X(CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT)    \
    X(CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT, 512)                  \
    X(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1)                   \
    X(CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 1)                          \
    X(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 2619000)              \
    X(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120)           \
    X(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 52428800)                 \
    X(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048)    \
    X(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 3)                   \
    X(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1)                   \
    X(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 32)             \
    X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9)             \
    X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0)             \
    X(CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1)          \
    X(CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, 1)            \
    X(CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED, 1)             \
    X(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472) \
    X(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536) \
    X(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1)                       \
    X(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1)            \
    X(CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, 1)         \
    X(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1)                   \
    X(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448) \
    X(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1)              \
    X(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, sim_vmm_supported())  \
    X(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, sim_vmm_supported()) \
    X(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32)       \
    X(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 32768000)  \
    X(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, 134217728) \
    X(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1024)  \
    X(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1)               \
    X(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) \
    X(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 1)                       \
    X(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 1)        \
    X(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, 1)        \
    X(CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 1)                  \
    X(CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, 4)                \
    X(CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED, 1)          \
    X(CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS, 1)            \
    X(CU_DEVICE_ATTRIBUTE_NUMA_ID, -1)                             \
    X(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0)                         \
    X(CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, sim_host_vmm_supported()) \
    X(CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, sim_host_vmm_supported()) \
    X(CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 2) \
    X(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1) \
    X(CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH, 1)     \
    X(CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, 1)    \
    X(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, 590352606)            \
    X(CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID, 381751518)         \
    SIM_TEXTURE_LIMITS(X)

/* Texture and surface size limits (no texture objects are simulated). */
#define SIM_TEXTURE_LIMITS(X)                                             \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH, 131072)                \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH, 131072)                \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT, 65536)                \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH, 16384)                 \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT, 16384)                \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH, 16384)                 \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH, 32768)         \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT, 32768)        \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS, 2048)         \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH, 32768)         \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS, 2048)         \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH, 32768)          \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT, 32768)         \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE, 8192)        \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE, 8192)       \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE, 32768)       \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH, 32768)            \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH, 32768)    \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS, 2046)    \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH, 32768)                 \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH, 131072)                \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT, 65536)                \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH, 16384)                 \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT, 16384)                \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH, 16384)                 \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH, 32768)         \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS, 2048)         \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH, 32768)         \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT, 32768)        \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS, 2048)         \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH, 32768)            \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH, 32768)    \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS, 2046)    \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH, 268435456)      \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH, 131072)         \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT, 65000)         \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH, 2097120)        \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH, 32768)       \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT, 32768)      \
    X(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH, 32768)

SIM_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDeviceGetAttribute, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    if (pi == NULL || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
#define X(attribute, value) \
    case attribute:         \
        *pi = (value);      \
        return CUDA_SUCCESS;
        SIM_DEVICE_ATTRIBUTES(X)
#undef X
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        *pi = 0x18 + device->ordinal;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
        *pi = 0;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
        *pi = device->ordinal;
        return CUDA_SUCCESS;
    default:
        *pi = 0;
        return CUDA_SUCCESS;
    }
}

static CUresult device_get_uuid(CUuuid *uuid, CUdevice dev)
{
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    if (uuid == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *uuid = device->uuid;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDeviceGetUuid, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return device_get_uuid(uuid, dev);
}

SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDeviceGetUuid_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return device_get_uuid(uuid, dev);
}

SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDeviceTotalMem_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    if (bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)device->total_bytes;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDeviceGetPCIBusId, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    if (pciBusId == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "00000000:%02X:00.0", 0x18 + device->ordinal);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    CUresult entry = SIM_ENTER(cuDeviceGetByPCIBusId, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (dev == NULL || pciBusId == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    /* Accepts "domain:bus:device.function" and "bus:device.function"
     * spellings, hexadecimal as the real driver does. */
    unsigned domain = 0, bus = 0, slot = 0, function = 0;
    if (sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4) {
        domain = 0;
        if (sscanf(pciBusId, "%x:%x.%x", &bus, &slot, &function) != 3)
            return CUDA_ERROR_INVALID_VALUE;
    }
    int ordinal = (int)bus - 0x18;
    if (domain != 0 || slot != 0 || function != 0 || ordinal < 0 || ordinal >= sim_device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Contexts
 *
 * `ctx_lock` guards the list of live contexts, which lets every entry point
 * reject a destroyed or made-up handle instead of dereferencing it. Lock
 * order: `device->lock` before `ctx_lock`.
 * ------------------------------------------------------------------------ */

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext *ctx_live;
static size_t ctx_live_count, ctx_live_capacity;

/* The calling thread's current-context stack; the top is the current
 * context. A fixed depth keeps it allocation-free (thread exit leaks
 * nothing); real programs nest a handful of contexts at most. */
#define SIM_CTX_STACK_DEPTH 64
static _Thread_local CUcontext ctx_stack[SIM_CTX_STACK_DEPTH];
static _Thread_local int ctx_depth;

bool sim_ctx_valid(CUcontext ctx)
{
    if (ctx == NULL)
        return false;
    bool found = false;
    pthread_mutex_lock(&ctx_lock);
    for (size_t i = 0; i < ctx_live_count && !found; i++)
        found = ctx_live[i] == ctx;
    pthread_mutex_unlock(&ctx_lock);
    return found;
}

void sim_ctx_forget_peers(CUcontext gone)
{
    pthread_mutex_lock(&ctx_lock);
    for (size_t i = 0; i < ctx_live_count; i++) {
        for (int slot = 0; slot < SIM_MAX_PEERS; slot++) {
            CUcontext expected = gone;
            atomic_compare_exchange_strong(&ctx_live[i]->peers[slot], &expected, NULL);
        }
    }
    pthread_mutex_unlock(&ctx_lock);
    for (int slot = 0; slot < SIM_MAX_PEERS; slot++)
        atomic_store(&gone->peers[slot], NULL);
    atomic_fetch_add_explicit(&sim_access_generation, 1, memory_order_release);
}

static int ctx_register(CUcontext ctx)
{
    int rc = 0;
    pthread_mutex_lock(&ctx_lock);
    if (ctx_live_count == ctx_live_capacity) {
        size_t capacity = ctx_live_capacity ? ctx_live_capacity * 2 : 16;
        CUcontext *grown = realloc(ctx_live, capacity * sizeof *grown);
        if (grown == NULL) {
            rc = -ENOMEM;
            goto out;
        }
        ctx_live = grown;
        ctx_live_capacity = capacity;
    }
    ctx_live[ctx_live_count++] = ctx;
out:
    pthread_mutex_unlock(&ctx_lock);
    return rc;
}

static void ctx_unregister(CUcontext ctx)
{
    pthread_mutex_lock(&ctx_lock);
    for (size_t i = 0; i < ctx_live_count; i++) {
        if (ctx_live[i] == ctx) {
            ctx_live[i] = ctx_live[--ctx_live_count];
            break;
        }
    }
    pthread_mutex_unlock(&ctx_lock);
}

/* Allocates and registers a context; the execution half then gives it its
 * streams. */
static CUresult ctx_new(sim_device_t *device, bool is_primary, unsigned flags, CUcontext *out)
{
    static _Atomic unsigned long long last_id;
    CUcontext ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ctx->id = ++last_id;
    ctx->device = device;
    ctx->is_primary = is_primary;
    ctx->flags = flags;
    ctx->default_pool = sim_memory_default_pool(device);
    pthread_mutex_init(&ctx->streams_lock, NULL);
    CUresult result = sim_exec_ctx_created(ctx);
    if (result != CUDA_SUCCESS) {
        pthread_mutex_destroy(&ctx->streams_lock);
        free(ctx);
        return result;
    }
    if (ctx_register(ctx) != 0) {
        sim_exec_ctx_destroying(ctx);
        pthread_mutex_destroy(&ctx->streams_lock);
        free(ctx);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = ctx;
    return CUDA_SUCCESS;
}

CUcontext sim_ctx_current(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

CUresult sim_ctx_require(CUcontext *out)
{
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    CUcontext ctx = sim_ctx_current();
    if (ctx == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = ctx;
    return CUDA_SUCCESS;
}

/* Flags a context accepts: one scheduling mode, the two legacy bits. */
static bool ctx_flags_valid(unsigned flags)
{
    unsigned known = CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_COREDUMP_ENABLE |
                     CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS;
    unsigned sched = flags & CU_CTX_SCHED_MASK;
    return (flags & ~known) == 0 && sched != (CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD) && sched <= CU_CTX_SCHED_BLOCKING_SYNC;
}

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (pctx == NULL || !ctx_flags_valid(flags))
        return CUDA_ERROR_INVALID_VALUE;
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    if (ctx_depth >= SIM_CTX_STACK_DEPTH)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUcontext ctx;
    result = ctx_new(device, false, flags, &ctx);
    if (result != CUDA_SUCCESS)
        return result;
    ctx_stack[ctx_depth++] = ctx;
    *pctx = ctx;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuCtxCreate, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return ctx_create(pctx, flags, dev);
}

SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuCtxCreate_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return ctx_create(pctx, flags, dev);
}

SIM_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                   unsigned int flags, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuCtxCreate_v3, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    /* Execution affinity (SM partitioning) is an MPS feature the simulated
     * device does not have. */
    if (numParams < 0 || (numParams > 0 && paramsArray == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    if (numParams > 0)
        return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
    return ctx_create(pctx, flags, dev);
}

SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                                   CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuCtxCreate_v4, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (ctxCreateParams != NULL) {
        if (ctxCreateParams->numExecAffinityParams < 0 ||
            (ctxCreateParams->numExecAffinityParams > 0 && ctxCreateParams->execAffinityParams == NULL))
            return CUDA_ERROR_INVALID_VALUE;
        if (ctxCreateParams->numExecAffinityParams > 0)
            return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
        /* CUDA in graphics (CIG) needs a D3D12/Vulkan device. */
        if (ctxCreateParams->cigParams != NULL)
            return CUDA_ERROR_NOT_SUPPORTED;
    }
    return ctx_create(pctx, flags, dev);
}

static CUresult ctx_destroy(CUcontext ctx)
{
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!sim_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    /* A primary context belongs to its device: only Release/Reset end it. */
    if (ctx->is_primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_unregister(ctx);
    sim_exec_ctx_destroying(ctx);
    sim_memory_ctx_destroying(ctx);
    sim_ctx_forget_peers(ctx);
    /* The real driver pops the destroyed context if it is current to the
     * calling thread; stale entries of other threads stay (as there). */
    int kept = 0;
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] != ctx)
            ctx_stack[kept++] = ctx_stack[i];
    ctx_depth = kept;
    pthread_mutex_destroy(&ctx->streams_lock);
    free(ctx);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
    CUresult entry = SIM_ENTER(cuCtxDestroy, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return ctx_destroy(ctx);
}

SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult entry = SIM_ENTER(cuCtxDestroy_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return ctx_destroy(ctx);
}

static CUresult ctx_push(CUcontext ctx)
{
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!sim_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth >= SIM_CTX_STACK_DEPTH)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx)
{
    CUresult entry = SIM_ENTER(cuCtxPushCurrent, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return ctx_push(ctx);
}

SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult entry = SIM_ENTER(cuCtxPushCurrent_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return ctx_push(ctx);
}

static CUresult ctx_pop(CUcontext *pctx)
{
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext ctx = ctx_stack[--ctx_depth];
    if (pctx != NULL)
        *pctx = ctx;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    CUresult entry = SIM_ENTER(cuCtxPopCurrent, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return ctx_pop(pctx);
}

SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CUresult entry = SIM_ENTER(cuCtxPopCurrent_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return ctx_pop(pctx);
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult entry = SIM_ENTER(cuCtxSetCurrent, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    /* NULL unbinds: it empties the stack's top slot. */
    if (ctx == NULL) {
        if (ctx_depth > 0)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (!sim_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == 0)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult entry = SIM_ENTER(cuCtxGetCurrent, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = sim_ctx_current();
    return CUDA_SUCCESS;
}

/* `ctx` NULL means the current context, as in the `_v2` forms taking one. */
static CUresult ctx_resolve(CUcontext ctx, CUcontext *out)
{
    if (ctx == NULL)
        return sim_ctx_require(out);
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!sim_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = ctx;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    CUresult entry = SIM_ENTER(cuCtxGetDevice, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *device = ctx->device->ordinal;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    CUresult entry = SIM_ENTER(cuCtxGetDevice_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = ctx_resolve(ctx, &ctx);
    if (result != CUDA_SUCCESS)
        return result;
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *device = ctx->device->ordinal;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetFlags(unsigned int *flags)
{
    CUresult entry = SIM_ENTER(cuCtxGetFlags, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    if (flags == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = ctx->flags;
    return CUDA_SUCCESS;
}

/* cuBLASLt keys its per-context kernel registry on this id (through the
 * context export table of `sim_export.c`). */
SIM_EXPORT CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    CUresult entry = SIM_ENTER(cuCtxGetId, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = ctx_resolve(ctx, &ctx);
    if (result != CUDA_SUCCESS)
        return result;
    if (ctxId == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *ctxId = ctx->id;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    CUresult entry = SIM_ENTER(cuCtxGetApiVersion, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = ctx_resolve(ctx, &ctx);
    if (result != CUDA_SUCCESS)
        return result;
    if (version == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    /* Contexts report the API generation of `cuCtxCreate_v2` onwards. */
    *version = 3020;
    return CUDA_SUCCESS;
}

static CUresult ctx_synchronize(CUcontext ctx)
{
    CUresult result = ctx_resolve(ctx, &ctx);
    if (result != CUDA_SUCCESS)
        return result;
    result = sim_capture_check_unsafe_call();
    if (result != CUDA_SUCCESS)
        return result;
    return sim_exec_ctx_synchronize(ctx);
}

SIM_EXPORT CUresult cuCtxSynchronize(void)
{
    CUresult entry = SIM_ENTER(cuCtxSynchronize, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return ctx_synchronize(NULL);
}

SIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    CUresult entry = SIM_ENTER(cuCtxSynchronize_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return ctx_synchronize(ctx);
}

/* ------------------------------------------------------------------------
 * Primary contexts: one per device, created by the first retain and kept
 * until exit so that its handle stays valid across release/retain cycles
 * (programs cache it). "Active" means retained at least once.
 * ------------------------------------------------------------------------ */

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDevicePrimaryCtxRetain, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&device->lock);
    if (device->primary == NULL)
        result = ctx_new(device, true, device->primary_flags, &device->primary);
    if (result == CUDA_SUCCESS) {
        device->primary->flags = device->primary_flags;
        device->primary_refcount++;
        *pctx = device->primary;
    }
    pthread_mutex_unlock(&device->lock);
    return result;
}

/* Ends what a primary context holds, as the real driver does when it is
 * reset or released for the last time: its work completes, then its
 * streams, events, allocations and pinned host memory are destroyed and its
 * peer access ends. The handle stays valid (programs cache it): it gets a
 * fresh legacy stream for the next retain. */
static void primary_destroy_resources(CUcontext primary)
{
    sim_exec_ctx_destroying(primary);
    sim_memory_ctx_destroying(primary);
    sim_ctx_forget_peers(primary);
    if (sim_exec_ctx_created(primary) != CUDA_SUCCESS)
        fprintf(stderr, "simcuda: out of memory re-creating the legacy stream of a reset primary context\n");
}

/* The last release destroys the primary context ("If the usage drops to 0
 * the primary context of device dev will be destroyed regardless of how
 * many threads it is current to", cuda.h). */
static CUresult primary_release(CUdevice dev)
{
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    bool last = false;
    pthread_mutex_lock(&device->lock);
    if (device->primary_refcount <= 0)
        result = CUDA_ERROR_INVALID_CONTEXT;
    else
        last = --device->primary_refcount == 0;
    CUcontext primary = device->primary;
    pthread_mutex_unlock(&device->lock);
    if (last && primary != NULL)
        primary_destroy_resources(primary);
    return result;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDevicePrimaryCtxRelease, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return primary_release(dev);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDevicePrimaryCtxRelease_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return primary_release(dev);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult entry = SIM_ENTER(cuDevicePrimaryCtxGetState, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    if (flags == NULL || active == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&device->lock);
    *flags = device->primary_flags;
    *active = device->primary_refcount > 0;
    pthread_mutex_unlock(&device->lock);
    return CUDA_SUCCESS;
}

static CUresult primary_set_flags(CUdevice dev, unsigned flags)
{
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    if (!ctx_flags_valid(flags))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&device->lock);
    device->primary_flags = flags;
    if (device->primary != NULL)
        device->primary->flags = flags;
    pthread_mutex_unlock(&device->lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuDevicePrimaryCtxSetFlags, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return primary_set_flags(dev, flags);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuDevicePrimaryCtxSetFlags_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return primary_set_flags(dev, flags);
}

/* Reset waits for the context's work, destroys everything made in it
 * (streams, events, allocations, pinned host memory) and leaves it inactive
 * with default flags; the handle stays valid. */
static CUresult primary_reset(CUdevice dev)
{
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    pthread_mutex_lock(&device->lock);
    CUcontext primary = device->primary;
    device->primary_refcount = 0;
    device->primary_flags = 0;
    if (primary != NULL)
        primary->flags = 0;
    pthread_mutex_unlock(&device->lock);
    if (primary != NULL)
        primary_destroy_resources(primary);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDevicePrimaryCtxReset, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return primary_reset(dev);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDevicePrimaryCtxReset_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return primary_reset(dev);
}

/* ------------------------------------------------------------------------
 * Context limits and stream priorities (libraries query them at start-up)
 * ------------------------------------------------------------------------ */

/* Guarded by limits_lock; one set for every context, as H100 defaults. */
static pthread_mutex_t limits_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t ctx_limits[CU_LIMIT_MAX] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
    [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
};

SIM_EXPORT CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    CUresult entry = SIM_ENTER(cuCtxGetLimit, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pvalue == NULL || (int)limit < 0 || limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&limits_lock);
    *pvalue = ctx_limits[limit];
    pthread_mutex_unlock(&limits_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    CUresult entry = SIM_ENTER(cuCtxSetLimit, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((int)limit < 0 || limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&limits_lock);
    ctx_limits[limit] = value;
    pthread_mutex_unlock(&limits_lock);
    return CUDA_SUCCESS;
}

/* Priorities are accepted and reported; streams run alike. */
SIM_EXPORT CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    CUresult entry = SIM_ENTER(cuCtxGetStreamPriorityRange, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (leastPriority != NULL)
        *leastPriority = SIM_PRIORITY_LEAST;
    if (greatestPriority != NULL)
        *greatestPriority = SIM_PRIORITY_GREATEST;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
    CUresult entry = SIM_ENTER(cuCtxGetCacheConfig, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pconfig == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pconfig = CU_FUNC_CACHE_PREFER_NONE;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
    CUresult entry = SIM_ENTER(cuCtxSetCacheConfig, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    return config <= CU_FUNC_CACHE_PREFER_EQUAL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

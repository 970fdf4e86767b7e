/* sim_kernel.c: modules, libraries, the kernel registry and launches.
 *
 * Kernels are host functions registered by name (the built-ins of
 * `sim_builtin.c` and whatever tests add through `simcuda_register_kernel`).
 * Any image loads; a module or library resolves a kernel by name from the
 * registry. `CUfunction` and `CUkernel` handles are the same registry entry,
 * so cudart's cast of a `CUkernel` to `CUfunction` launches correctly.
 * A launch copies its arguments (from `kernelParams` or the packed `extra`
 * buffer) and queues the kernel on the stream's worker.
 * Entry points: `cuLaunchKernel*`, `cuModule*`, `cuLibrary*`, `cuFunc*`,
 * `cuKernel*`, `simcuda_register_kernel`.
 */
#include "sim_exec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------
 * Registry
 * ------------------------------------------------------------------------ */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static sim_kernel_t *registry; /* guarded by registry_lock; never shrinks */
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

static size_t natural_alignment(size_t size)
{
    size_t align = 1;
    while (align < size && align < 8)
        align *= 2;
    return align;
}

static sim_kernel_t *find_locked(const char *name)
{
    for (sim_kernel_t *k = registry; k != NULL; k = k->next)
        if (strcmp(k->name, name) == 0)
            return k;
    return NULL;
}

SIM_EXPORT int simcuda_register_kernel(const simcuda_kernel_desc_t *desc)
{
    if (desc == NULL || desc->name == NULL || desc->name[0] == '\0' || desc->fn == NULL ||
        (desc->param_count > 0 && desc->param_sizes == NULL))
        return -EINVAL;
    unsigned n = desc->param_count;
    sim_kernel_t *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return -ENOMEM;
    k->name = strdup(desc->name);
    k->param_offsets = calloc(n ? n : 1, sizeof(size_t));
    k->param_sizes = calloc(n ? n : 1, sizeof(size_t));
    int rc = 0;
    if (k->name == NULL || k->param_offsets == NULL || k->param_sizes == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    size_t end = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t size = desc->param_sizes[i], offset;
        if (size == 0) {
            rc = -EINVAL;
            goto out;
        }
        if (desc->param_offsets != NULL) {
            offset = desc->param_offsets[i];
            if (offset < end) { /* parameters must not overlap, in order */
                rc = -EINVAL;
                goto out;
            }
        } else {
            size_t align = desc->param_aligns != NULL ? desc->param_aligns[i] : natural_alignment(size);
            if (align == 0 || (align & (align - 1)) != 0) {
                rc = -EINVAL;
                goto out;
            }
            offset = (end + align - 1) & ~(align - 1);
        }
        k->param_offsets[i] = offset;
        k->param_sizes[i] = size;
        end = offset + size;
    }
    k->magic = SIM_KERNEL_MAGIC;
    k->param_count = n;
    k->args_size = end;
    k->fn = desc->fn;
    k->user = desc->user;
    k->cost = desc->cost;
    k->cost_ns = desc->cost_ns;
    pthread_mutex_lock(&registry_lock);
    if (find_locked(k->name) != NULL) {
        rc = -EEXIST;
    } else {
        k->next = registry;
        registry = k;
    }
    pthread_mutex_unlock(&registry_lock);
out:
    if (rc != 0) {
        free(k->name);
        free(k->param_offsets);
        free(k->param_sizes);
        free(k);
    }
    return rc;
}

sim_kernel_t *sim_kernel_find(const char *name)
{
    pthread_once(&builtins_once, sim_builtin_register_all);
    pthread_mutex_lock(&registry_lock);
    sim_kernel_t *k = find_locked(name);
    pthread_mutex_unlock(&registry_lock);
    return k;
}

sim_kernel_t *sim_kernel_from_handle(const void *handle)
{
    const sim_kernel_t *k = handle;
    if (k == NULL || k->magic != SIM_KERNEL_MAGIC)
        return NULL;
    return (sim_kernel_t *)k;
}

/* ------------------------------------------------------------------------
 * Launch descriptors
 * ------------------------------------------------------------------------ */

CUresult sim_launch_build(sim_launch_desc_t *out, sim_kernel_t *kernel, void **kernel_params, void **extra)
{
    if (kernel_params != NULL && extra != NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const void *buffer = NULL;
    size_t buffer_size = 0;
    bool have_size = false;
    if (extra != NULL) {
        for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
                buffer = extra[i + 1];
            } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != NULL) {
                buffer_size = *(const size_t *)extra[i + 1];
                have_size = true;
            } else {
                return CUDA_ERROR_INVALID_VALUE;
            }
        }
        if (kernel->param_count > 0 && (buffer == NULL || !have_size || buffer_size < kernel->args_size))
            return CUDA_ERROR_INVALID_VALUE;
    } else if (kernel_params == NULL && kernel->param_count > 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t size = kernel->args_size > buffer_size ? kernel->args_size : buffer_size;
    unsigned char *args = calloc(1, size ? size : 1);
    void **ptrs = calloc(kernel->param_count ? kernel->param_count : 1, sizeof(void *));
    if (args == NULL || ptrs == NULL) {
        free(args);
        free(ptrs);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (buffer != NULL)
        memcpy(args, buffer, buffer_size);
    for (unsigned i = 0; i < kernel->param_count; i++) {
        ptrs[i] = args + kernel->param_offsets[i];
        if (kernel_params != NULL)
            memcpy(ptrs[i], kernel_params[i], kernel->param_sizes[i]);
    }
    out->kernel = kernel;
    out->args = args;
    out->args_size = size;
    out->param_ptrs = ptrs;
    return CUDA_SUCCESS;
}

static simcuda_launch_t launch_geometry(const sim_launch_desc_t *launch)
{
    simcuda_launch_t geometry;
    memcpy(geometry.grid, launch->grid, sizeof(geometry.grid));
    memcpy(geometry.block, launch->block, sizeof(geometry.block));
    geometry.shared_bytes = launch->shared_bytes;
    return geometry;
}

void sim_launch_execute(const sim_launch_desc_t *launch)
{
    if (launch->kernel->ptx_func != NULL) {
        sim_module_execute(launch->kernel, launch->args, launch->grid, launch->block, launch->shared_bytes);
        return;
    }
    simcuda_launch_t geometry = launch_geometry(launch);
    launch->kernel->fn(launch->param_ptrs, &geometry, launch->kernel->user);
}

/* The kernel's own cost, plus the time to bring the host-located memory
 * its arguments point into over the host link: each such mapping counts
 * whole, once, at the host-to-device bandwidth, as if read once
 * (`sim_mem_host_located_bytes`; tests/simcuda/README.md, "Host-located
 * memory"). */
uint64_t sim_launch_cost_ns(const sim_launch_desc_t *launch)
{
    const sim_kernel_t *k = launch->kernel;
    uint64_t cost_ns = k->cost_ns;
    if (k->cost != NULL) {
        simcuda_launch_t geometry = launch_geometry(launch);
        cost_ns = k->cost(launch->param_ptrs, &geometry, k->user);
    }
    if (!sim_clock_is_virtual())
        return cost_ns;
    uint64_t host_bytes = sim_mem_host_located_bytes(launch->args, launch->args_size);
    return host_bytes != 0 ? cost_ns + sim_clock_transfer_ns(SIM_ENGINE_H2D, host_bytes) : cost_ns;
}

static CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shared, CUstream hStream,
                       void **params, void **extra, bool per_thread)
{
    sim_kernel_t *kernel = sim_kernel_from_handle(f);
    if (kernel == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    for (int d = 0; d < 3; d++)
        if (grid[d] == 0 || block[d] == 0)
            return CUDA_ERROR_INVALID_VALUE;
    if ((uint64_t)block[0] * block[1] * block[2] > 1024 || block[2] > 64 || grid[1] > 65535 || grid[2] > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(hStream, per_thread, &result);
    if (s == NULL)
        return result;
    sim_cmd_t cmd = {.kind = SIM_CMD_KERNEL};
    result = sim_launch_build(&cmd.u.launch, kernel, params, extra);
    if (result != CUDA_SUCCESS)
        return result;
    memcpy(cmd.u.launch.grid, grid, sizeof(cmd.u.launch.grid));
    memcpy(cmd.u.launch.block, block, sizeof(cmd.u.launch.block));
    cmd.u.launch.shared_bytes = shared;
    return sim_submit(s, &cmd);
}

#define LAUNCH_PARAMS                                                                                      \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, \
     unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,         \
     void **kernelParams, void **extra)
#define COOPERATIVE_PARAMS                                                                                 \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, \
     unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,         \
     void **kernelParams)
#define SIM_LAUNCH_FN(symbol, params, extra_arg, per_thread)                                               \
    SIM_EXPORT CUresult symbol params                                                                     \
    {                                                                                                     \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                                             \
        if (entry != CUDA_SUCCESS)                                                                        \
            return entry;                                                                                 \
        const unsigned grid[3] = {gridDimX, gridDimY, gridDimZ};                                          \
        const unsigned block[3] = {blockDimX, blockDimY, blockDimZ};                                      \
        return launch(f, grid, block, sharedMemBytes, hStream, kernelParams, extra_arg, per_thread);      \
    }

SIM_LAUNCH_FN(cuLaunchKernel, LAUNCH_PARAMS, extra, false)
SIM_LAUNCH_FN(cuLaunchKernel_ptsz, LAUNCH_PARAMS, extra, true)
SIM_LAUNCH_FN(cuLaunchCooperativeKernel, COOPERATIVE_PARAMS, NULL, false)
SIM_LAUNCH_FN(cuLaunchCooperativeKernel_ptsz, COOPERATIVE_PARAMS, NULL, true)

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **params, void **extra, bool per_thread)
{
    if (config == NULL || (config->numAttrs > 0 && config->attrs == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
    const unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
    return launch(f, grid, block, config->sharedMemBytes, config->hStream, params, extra, per_thread);
}

SIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    CUresult entry = SIM_ENTER(cuLaunchKernelEx, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return launch_ex(config, f, kernelParams, extra, false);
}

SIM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                          void **extra)
{
    CUresult entry = SIM_ENTER(cuLaunchKernelEx_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return launch_ex(config, f, kernelParams, extra, true);
}

static CUresult param_info(const void *handle, size_t index, size_t *offset, size_t *size)
{
    sim_kernel_t *k = sim_kernel_from_handle(handle);
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (offset == NULL || index >= k->param_count)
        return CUDA_ERROR_INVALID_VALUE;
    *offset = k->param_offsets[index];
    if (size != NULL)
        *size = k->param_sizes[index];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    CUresult entry = SIM_ENTER(cuFuncGetParamInfo, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return param_info(func, paramIndex, paramOffset, paramSize);
}

SIM_EXPORT CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    CUresult entry = SIM_ENTER(cuKernelGetParamInfo, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return param_info(kernel, paramIndex, paramOffset, paramSize);
}

/* Values a small compiled kernel would report. */
static CUresult func_attribute(int *value, CUfunction_attribute attribute, const void *handle)
{
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_kernel_t *k = sim_kernel_from_handle(handle);
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (k->ptx_module != NULL && sim_module_attribute(k, attribute, value))
        return CUDA_SUCCESS;
    switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *value = 1024;
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
        *value = 32;
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        *value = 90;
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *value = 48 * 1024;
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        *value = -1;
        return CUDA_SUCCESS;
    default:
        if ((int)attribute < 0 || attribute >= CU_FUNC_ATTRIBUTE_MAX)
            return CUDA_ERROR_INVALID_VALUE;
        *value = 0;
        return CUDA_SUCCESS;
    }
}

SIM_EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    CUresult entry = SIM_ENTER(cuFuncGetAttribute, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return func_attribute(pi, attrib, hfunc);
}

SIM_EXPORT CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuKernelGetAttribute, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (dev < 0 || dev >= sim_device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    return func_attribute(pi, attrib, kernel);
}

/* Setting attributes is accepted and has no effect on a host function. */
SIM_EXPORT CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    CUresult entry = SIM_ENTER(cuFuncSetAttribute, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (sim_kernel_from_handle(hfunc) == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX || value < -1)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuKernelSetAttribute, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (sim_kernel_from_handle(kernel) == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (dev < 0 || dev >= sim_device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    if ((int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX || val < -1)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    CUresult entry = SIM_ENTER(cuFuncSetCacheConfig, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (sim_kernel_from_handle(hfunc) == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    return config <= CU_FUNC_CACHE_PREFER_EQUAL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult kernel_name(const char **name, const void *handle)
{
    if (name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    sim_kernel_t *k = sim_kernel_from_handle(handle);
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = k->name;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    CUresult entry = SIM_ENTER(cuFuncGetName, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return kernel_name(name, hfunc);
}

SIM_EXPORT CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    CUresult entry = SIM_ENTER(cuKernelGetName, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return kernel_name(name, hfunc);
}


/* Cache and shared-memory bank preferences are hints; accepted. */
SIM_EXPORT CUresult cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuKernelSetCacheConfig, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (sim_kernel_from_handle(kernel) == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (dev < 0 || dev >= sim_device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    return config <= CU_FUNC_CACHE_PREFER_EQUAL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

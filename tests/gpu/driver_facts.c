/* driver_facts.c: what the driver answers where the shim and the simulated
 * driver depend on its exact behaviour, printed as one `name value` line per
 * fact so that a real GPU's answers can be recorded and a simulated driver
 * compared with them.
 *
 * The facts are error codes of documented misuse (virtual-memory calls out
 * of order, frees of interior pointers, events and streams of different
 * contexts, unknown export tables), the parameter layout the driver reports
 * for PTX entries nvcc would write (by-value structs, `.align 8 .b8 p[48]`),
 * device capabilities and what `cuMemGetInfo` counts of a memory pool's
 * freed bytes. Lines whose name starts with `info.` describe the machine and
 * are never compared.
 *
 *     driver_facts                 print the facts of the driver found
 *     driver_facts --compare FILE  print them and compare with FILE (facts
 *                                  recorded on a GPU); FILE's lines that
 *                                  start with `gap ` name facts the
 *                                  simulated driver is known to answer
 *                                  differently: they are reported, not failed
 *
 * Exits 77 where no driver or device answers, 1 when a compared fact
 * differs (or a known gap no longer does: the list must shrink with it).
 * An entry point the driver lacks is the fact `absent.SYMBOL 1`, and each
 * call to it answers -1.
 */
#include <cuda.h>
#include <cudaTypedefs.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The entry points, by the symbol the driver exports and their typedef. */
#define FACTS_DRIVER(X)                                                                            \
    X(cuInit, "cuInit", PFN_cuInit_v2000)                                                          \
    X(cuDriverGetVersion, "cuDriverGetVersion", PFN_cuDriverGetVersion_v2020)                      \
    X(cuDeviceGet, "cuDeviceGet", PFN_cuDeviceGet_v2000)                                           \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", PFN_cuDeviceGetAttribute_v2000)                \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", PFN_cuDevicePrimaryCtxRetain_v7000)    \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", PFN_cuCtxSetCurrent_v4000)                               \
    X(cuCtxCreate, "cuCtxCreate_v2", PFN_cuCtxCreate_v3020)                                        \
    X(cuCtxDestroy, "cuCtxDestroy_v2", PFN_cuCtxDestroy_v4000)                                     \
    X(cuCtxSynchronize, "cuCtxSynchronize", PFN_cuCtxSynchronize_v2000)                            \
    X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity",                              \
      PFN_cuMemGetAllocationGranularity_v10020)                                                    \
    X(cuMemCreate, "cuMemCreate", PFN_cuMemCreate_v10020)                                          \
    X(cuMemAddressReserve, "cuMemAddressReserve", PFN_cuMemAddressReserve_v10020)                  \
    X(cuMemAddressFree, "cuMemAddressFree", PFN_cuMemAddressFree_v10020)                           \
    X(cuMemMap, "cuMemMap", PFN_cuMemMap_v10020)                                                   \
    X(cuMemUnmap, "cuMemUnmap", PFN_cuMemUnmap_v10020)                                             \
    X(cuMemSetAccess, "cuMemSetAccess", PFN_cuMemSetAccess_v10020)                                 \
    X(cuMemRelease, "cuMemRelease", PFN_cuMemRelease_v10020)                                       \
    X(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", PFN_cuMemRetainAllocationHandle_v11000) \
    X(cuMemAlloc, "cuMemAlloc_v2", PFN_cuMemAlloc_v3020)                                           \
    X(cuMemFree, "cuMemFree_v2", PFN_cuMemFree_v3020)                                              \
    X(cuMemGetInfo, "cuMemGetInfo_v2", PFN_cuMemGetInfo_v3020)                                     \
    X(cuMemGetAddressRange, "cuMemGetAddressRange_v2", PFN_cuMemGetAddressRange_v3020)             \
    X(cuIpcGetMemHandle, "cuIpcGetMemHandle", PFN_cuIpcGetMemHandle_v4010)                         \
    X(cuPointerGetAttribute, "cuPointerGetAttribute", PFN_cuPointerGetAttribute_v4000)             \
    X(cuModuleLoadData, "cuModuleLoadData", PFN_cuModuleLoadData_v2000)                            \
    X(cuModuleGetFunction, "cuModuleGetFunction", PFN_cuModuleGetFunction_v2000)                   \
    X(cuFuncGetParamInfo, "cuFuncGetParamInfo", PFN_cuFuncGetParamInfo_v12040)                    \
    X(cuGetExportTable, "cuGetExportTable", PFN_cuGetExportTable_v3000)                            \
    X(cuEventCreate, "cuEventCreate", PFN_cuEventCreate_v2000)                                     \
    X(cuEventRecord, "cuEventRecord", PFN_cuEventRecord_v2000)                                     \
    X(cuStreamCreate, "cuStreamCreate", PFN_cuStreamCreate_v2000)                                  \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", PFN_cuStreamWaitEvent_v3020)                         \
    X(cuStreamSynchronize, "cuStreamSynchronize", PFN_cuStreamSynchronize_v2000)                   \
    X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", PFN_cuCtxEnablePeerAccess_v4000)             \
    X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", PFN_cuDeviceCanAccessPeer_v4000)             \
    X(cuMemAllocAsync, "cuMemAllocAsync", PFN_cuMemAllocAsync_v11020)                              \
    X(cuMemFreeAsync, "cuMemFreeAsync", PFN_cuMemFreeAsync_v11020)                                 \
    X(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", PFN_cuDeviceGetDefaultMemPool_v11020) \
    X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", PFN_cuMemPoolSetAttribute_v11020)            \
    X(cuStreamWriteValue32, "cuStreamWriteValue32_v2", PFN_cuStreamWriteValue32_v11070)

static struct {
#define FACTS_FIELD(field, symbol, type) type field;
    FACTS_DRIVER(FACTS_FIELD)
#undef FACTS_FIELD
} drv;

#define FACTS_MAX 128
/* A call through the table; -1 where the driver lacks the entry point. */
#define CALL(field, args) (drv.field == NULL ? -1ll : (long long)drv.field args)
#define FACTS_NAME 64

typedef struct fact_s {
    char name[FACTS_NAME];
    long long value;
} fact_t;

static fact_t facts[FACTS_MAX];
static int fact_count;

static void fact(const char *name, long long value)
{
    if (fact_count == FACTS_MAX) {
        fprintf(stderr, "driver_facts: more than %d facts\n", FACTS_MAX);
        exit(1);
    }
    snprintf(facts[fact_count].name, FACTS_NAME, "%s", name);
    facts[fact_count].value = value;
    fact_count++;
    printf("%s %lld\n", name, value);
}

/* A PTX module with entries whose parameters nvcc writes in these shapes:
 * scalars of each width, a by-value struct of six pointers
 * (`.align 8 .b8 p[48]`), a 16-byte-aligned vector, and none at all. */
static const char facts_ptx[] = ".version 6.3\n"
                                ".target sm_75\n"
                                ".address_size 64\n"
                                ".visible .entry facts_params(\n"
                                "  .param .u64 facts_params_0,\n"
                                "  .param .u32 facts_params_1,\n"
                                "  .param .align 8 .b8 facts_params_2[48],\n"
                                "  .param .f32 facts_params_3,\n"
                                "  .param .u8 facts_params_4,\n"
                                "  .param .align 16 .b8 facts_params_5[32],\n"
                                "  .param .u16 facts_params_6\n"
                                ")\n"
                                "{\n"
                                "  ret;\n"
                                "}\n"
                                ".visible .entry facts_none()\n"
                                "{\n"
                                "  ret;\n"
                                "}\n";

static void facts_params(void)
{
    CUmodule module;
    CUfunction fn = NULL, none = NULL;
    CUresult rc = CALL(cuModuleLoadData, (&module, facts_ptx));
    fact("module_load.ptx_text", rc);
    if (rc != CUDA_SUCCESS)
        return;
    fact("module_get_function.missing", CALL(cuModuleGetFunction, (&fn, module, "facts_missing")));
    rc = CALL(cuModuleGetFunction, (&fn, module, "facts_params"));
    fact("module_get_function.found", rc);
    if (rc == CUDA_SUCCESS) {
        for (size_t i = 0; i <= 7; i++) {
            size_t offset = 0, size = 0;
            char name[FACTS_NAME];
            rc = CALL(cuFuncGetParamInfo, (fn, i, &offset, &size));
            snprintf(name, sizeof name, "param_info.%zu.result", i);
            fact(name, rc);
            if (rc != CUDA_SUCCESS)
                continue;
            snprintf(name, sizeof name, "param_info.%zu.offset", i);
            fact(name, (long long)offset);
            snprintf(name, sizeof name, "param_info.%zu.size", i);
            fact(name, (long long)size);
        }
    }
    if (CALL(cuModuleGetFunction, (&none, module, "facts_none")) == CUDA_SUCCESS) {
        size_t offset, size;
        fact("param_info.no_params.0.result", CALL(cuFuncGetParamInfo, (none, 0, &offset, &size)));
    }
}

static void facts_vmm(CUdevice device)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t minimum = 0, recommended = 0;
    fact("granularity.result",
         CALL(cuMemGetAllocationGranularity, (&minimum, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)));
    (void)CALL(cuMemGetAllocationGranularity, (&recommended, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    fact("info.granularity.minimum", (long long)minimum);
    fact("info.granularity.recommended", (long long)recommended);
    if (minimum == 0)
        return;
    size_t g = minimum;
    CUmemGenericAllocationHandle handle, other;
    fact("mem_create.zero", CALL(cuMemCreate, (&handle, 0, &prop, 0)));
    fact("mem_create.unaligned", CALL(cuMemCreate, (&handle, g + 4096, &prop, 0)));
    CUdeviceptr va = 0, va2 = 0;
    fact("address_reserve.unaligned", CALL(cuMemAddressReserve, (&va2, g + 4096, 0, 0, 0)));
    if (CALL(cuMemAddressReserve, (&va, 2 * g, 0, 0, 0)) != CUDA_SUCCESS || CALL(cuMemCreate, (&handle, g, &prop, 0)) != CUDA_SUCCESS) {
        fact("vmm.setup", 1);
        return;
    }
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, device}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    fact("mem_set_access.unmapped", CALL(cuMemSetAccess, (va, g, &access, 1)));
    fact("mem_unmap.unmapped", CALL(cuMemUnmap, (va, g)));
    fact("mem_map.offset_nonzero", CALL(cuMemMap, (va, g, g, handle, 0)));
    fact("mem_map.larger_than_handle", CALL(cuMemMap, (va, 2 * g, 0, handle, 0)));
    fact("mem_map.ok", CALL(cuMemMap, (va, g, 0, handle, 0)));
    if (CALL(cuMemCreate, (&other, g, &prop, 0)) == CUDA_SUCCESS) {
        fact("mem_map.twice", CALL(cuMemMap, (va, g, 0, other, 0)));
        (void)CALL(cuMemRelease, (other));
    }
    fact("mem_set_access.ok", CALL(cuMemSetAccess, (va, g, &access, 1)));
    CUmemGenericAllocationHandle retained;
    fact("mem_retain_handle.mapped", CALL(cuMemRetainAllocationHandle, (&retained, (void *)(uintptr_t)(va + 64))));
    fact("mem_retain_handle.same", retained == handle);
    (void)CALL(cuMemRelease, (retained));
    CUdeviceptr base = 0;
    size_t size = 0;
    fact("address_range.vmm_interior", CALL(cuMemGetAddressRange, (&base, &size, va + 64)));
    fact("address_range.vmm_base_is_mapping", base == va);
    fact("address_range.vmm_size_is_mapping", size == g);
    CUcontext owner = NULL;
    fact("pointer_attribute.vmm.context", CALL(cuPointerGetAttribute, (&owner, CU_POINTER_ATTRIBUTE_CONTEXT, va)));
    fact("pointer_attribute.vmm.context_null", owner == NULL);
    unsigned int memory_type = 0;
    fact("pointer_attribute.vmm.memory_type_result",
         CALL(cuPointerGetAttribute, (&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va)));
    fact("pointer_attribute.vmm.memory_type", memory_type);
    CUipcMemHandle ipc;
    fact("ipc_get_mem_handle.vmm", CALL(cuIpcGetMemHandle, (&ipc, va)));
    /* Two handles mapped side by side, then one grant and one unmap over
     * both: how the offload engine maps an allocation's head and tail. */
    if (CALL(cuMemCreate, (&other, g, &prop, 0)) == CUDA_SUCCESS) {
        if (CALL(cuMemMap, (va + g, g, 0, other, 0)) == CUDA_SUCCESS) {
            fact("mem_set_access.two_mappings", CALL(cuMemSetAccess, (va, 2 * g, &access, 1)));
            CUresult both = CALL(cuMemUnmap, (va, 2 * g));
            fact("mem_unmap.two_mappings", both);
            if (both != CUDA_SUCCESS) {
                (void)CALL(cuMemUnmap, (va, g));
                (void)CALL(cuMemUnmap, (va + g, g));
            }
            (void)CALL(cuMemMap, (va, g, 0, handle, 0)); /* as the facts below expect */
        }
        (void)CALL(cuMemRelease, (other));
    }
    /* The first granule of a two-granule handle mapped alone: whether one
     * allocation's physical memory could be mapped ahead for a smaller
     * restore (docs/benchmarks.md, "On a real GPU"). An H200 refuses it
     * (CUDA_ERROR_NOT_SUPPORTED): a handle maps whole; so does simcuda. */
    CUmemGenericAllocationHandle part;
    if (CALL(cuMemCreate, (&part, 2 * g, &prop, 0)) == CUDA_SUCCESS) {
        CUresult mapped = CALL(cuMemMap, (va + g, g, 0, part, 0));
        fact("mem_map.part_of_handle", mapped);
        if (mapped == CUDA_SUCCESS)
            (void)CALL(cuMemUnmap, (va + g, g));
        (void)CALL(cuMemRelease, (part));
    }
    fact("address_free.mapped", CALL(cuMemAddressFree, (va, 2 * g)) == CUDA_SUCCESS ? 0 : 1);
    fact("mem_release.mapped", CALL(cuMemRelease, (handle)));
    fact("mem_unmap.after_release", CALL(cuMemUnmap, (va, g)));
    fact("mem_retain_handle.unmapped", CALL(cuMemRetainAllocationHandle, (&retained, (void *)(uintptr_t)va)));
    fact("address_free.ok", CALL(cuMemAddressFree, (va, 2 * g)));
}

static void facts_memory(CUdevice device, CUstream stream)
{
    CUdeviceptr p = 0;
    fact("mem_alloc.zero", CALL(cuMemAlloc, (&p, 0)));
    fact("mem_free.null", CALL(cuMemFree, (0)));
    if (CALL(cuMemAlloc, (&p, 1 << 20)) != CUDA_SUCCESS) {
        fact("mem_alloc.setup", 1);
        return;
    }
    CUipcMemHandle ipc;
    fact("ipc_get_mem_handle.mem_alloc", CALL(cuIpcGetMemHandle, (&ipc, p)));
    CUmemGenericAllocationHandle retained;
    fact("mem_retain_handle.mem_alloc", CALL(cuMemRetainAllocationHandle, (&retained, (void *)(uintptr_t)p)));
    CUdeviceptr base = 0;
    size_t size = 0;
    fact("address_range.mem_alloc_interior", CALL(cuMemGetAddressRange, (&base, &size, p + 100)));
    fact("address_range.mem_alloc_base", base == p);
    fact("address_range.mem_alloc_size", (long long)size);
    fact("stream_write_value32", CALL(cuStreamWriteValue32, (stream, p, 7, 0)));
    (void)CALL(cuStreamSynchronize, (stream));
    fact("mem_free.interior", CALL(cuMemFree, (p + 256)));
    fact("mem_free.ok", CALL(cuMemFree, (p)));
    fact("mem_free.twice", CALL(cuMemFree, (p)));

    /* A pool's freed bytes: counted as used while the pool keeps them. */
    CUmemoryPool pool;
    if (CALL(cuDeviceGetDefaultMemPool, (&pool, device)) != CUDA_SUCCESS)
        return;
    const size_t bytes = 256u << 20;
    for (int keep = 0; keep <= 1; keep++) {
        cuuint64_t threshold = keep ? UINT64_MAX : 0;
        (void)CALL(cuMemPoolSetAttribute, (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
        size_t free_before, free_after, total;
        (void)CALL(cuStreamSynchronize, (stream));
        (void)CALL(cuMemGetInfo, (&free_before, &total));
        CUdeviceptr q;
        if (CALL(cuMemAllocAsync, (&q, bytes, stream)) != CUDA_SUCCESS)
            return;
        (void)CALL(cuMemFreeAsync, (q, stream));
        (void)CALL(cuStreamSynchronize, (stream));
        (void)CALL(cuMemGetInfo, (&free_after, &total));
        long long kept = (long long)free_before - (long long)free_after >= (long long)bytes / 2;
        fact(keep ? "pool.threshold_max.freed_bytes_counted_used" : "pool.threshold_zero.freed_bytes_counted_used", kept);
    }
    cuuint64_t zero = 0;
    (void)CALL(cuMemPoolSetAttribute, (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
    (void)CALL(cuCtxSynchronize, ());
}

static void facts_contexts(CUdevice device, CUcontext primary, CUstream stream)
{
    CUevent ev;
    CUcontext second = NULL;
    fact("event_create", CALL(cuEventCreate, (&ev, CU_EVENT_DISABLE_TIMING)));
    if (CALL(cuCtxCreate, (&second, 0, device)) != CUDA_SUCCESS) {
        fact("ctx_create", 1);
        return;
    }
    CUstream foreign;
    fact("stream_create.second_context", CALL(cuStreamCreate, (&foreign, CU_STREAM_NON_BLOCKING)));
    /* `ev` is the primary context's, `foreign` the second's. */
    fact("event_record.cross_context", CALL(cuEventRecord, (ev, foreign)));
    fact("stream_wait_event.cross_context", CALL(cuStreamWaitEvent, (foreign, ev, 0)));
    fact("ctx_enable_peer.self", CALL(cuCtxEnablePeerAccess, (second, 0)));
    (void)CALL(cuStreamSynchronize, (foreign));
    (void)CALL(cuCtxSetCurrent, (primary));
    fact("event_record.same_context", CALL(cuEventRecord, (ev, stream)));
    (void)CALL(cuCtxDestroy, (second));
    (void)CALL(cuCtxSetCurrent, (primary));
    int can = -1;
    fact("device_can_access_peer.self.result",
         CALL(cuDeviceCanAccessPeer, (&can, device, device)));
    fact("device_can_access_peer.self", can);
}

static void facts_export_tables(void)
{
    static const struct {
        const char *name;
        unsigned char bytes[16];
    } tables[] = {
        {"export_table.unknown", {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10}},
        /* The table libcudart asks for first and must not get. */
        {"info.export_table.f8cff951", {0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9}},
        /* NVRTC's. */
        {"info.export_table.da9151d3", {0xda, 0x91, 0x51, 0xd3, 0x3a, 0xe6, 0xcc, 0x41, 0xa5, 0xc0, 0x4f, 0x26, 0xd5, 0x33, 0xe3, 0x28}},
    };
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        const void *table = NULL;
        CUuuid id;
        memcpy(id.bytes, tables[i].bytes, sizeof id.bytes);
        fact(tables[i].name, CALL(cuGetExportTable, (&table, &id)));
    }
}

static int compare(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "driver_facts: cannot open %s\n", path);
        return 1;
    }
    char line[256];
    int differ = 0, compared = 0;
    char gaps[FACTS_MAX][FACTS_NAME];
    int gap_count = 0;
    /* The gaps first: they may be listed anywhere in the file. */
    while (fgets(line, sizeof line, f) != NULL)
        if (gap_count < FACTS_MAX && sscanf(line, "gap %63s", gaps[gap_count]) == 1)
            gap_count++;
    rewind(f);
    while (fgets(line, sizeof line, f) != NULL) {
        char name[FACTS_NAME];
        long long value;
        if (line[0] == '#' || strncmp(line, "gap ", 4) == 0 || sscanf(line, "%63s %lld", name, &value) != 2
            || strncmp(name, "info.", 5) == 0)
            continue;
        int known_gap = 0;
        for (int g = 0; g < gap_count; g++)
            known_gap |= strcmp(gaps[g], name) == 0;
        const fact_t *mine = NULL;
        for (int i = 0; i < fact_count; i++)
            if (strcmp(facts[i].name, name) == 0)
                mine = &facts[i];
        compared++;
        int same = mine != NULL && mine->value == value;
        if (!same && !known_gap) {
            printf("DIFFERS %s: the GPU answered %lld, this driver %s%lld\n", name, value,
                   mine == NULL ? "never got that far, " : "", mine == NULL ? 0 : mine->value);
            differ++;
        } else if (!same) {
            printf("known gap %s: the GPU answered %lld, this driver %lld\n", name, value, mine == NULL ? 0 : mine->value);
        } else if (known_gap) {
            printf("FIXED %s now matches the GPU: remove its `gap` line\n", name);
            differ++;
        }
    }
    fclose(f);
    printf("driver_facts: %d facts compared with %s, %d differ\n", compared, path, differ);
    return differ == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *compare_with = argc == 3 && strcmp(argv[1], "--compare") == 0 ? argv[2] : NULL;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        printf("driver_facts: no libcuda.so.1: skipped\n");
        return 77;
    }
#define FACTS_OPEN(field, symbol, type)                                                            \
    {                                                                                              \
        void *found = dlsym(lib, symbol);                                                          \
        if (found == NULL)                                                                         \
            fact("absent." symbol, 1);                                                             \
        memcpy(&drv.field, &found, sizeof found);                                                  \
    }
    FACTS_DRIVER(FACTS_OPEN)
#undef FACTS_OPEN
    CUdevice device;
    CUcontext primary;
    int version = 0;
    if (CALL(cuInit, (0)) != CUDA_SUCCESS || CALL(cuDeviceGet, (&device, 0)) != CUDA_SUCCESS
        || CALL(cuDevicePrimaryCtxRetain, (&primary, device)) != CUDA_SUCCESS || CALL(cuCtxSetCurrent, (primary)) != CUDA_SUCCESS) {
        printf("driver_facts: no device answers: skipped\n");
        return 77;
    }
    (void)CALL(cuDriverGetVersion, (&version));
    fact("info.driver_version", version);
    static const struct {
        const char *name;
        CUdevice_attribute attribute;
    } attributes[] = {
        {"attribute.virtual_memory_management", CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
        {"attribute.memory_pools", CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED},
        {"attribute.unified_addressing", CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING},
        {"attribute.posix_fd_handles", CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED},
        {"info.attribute.async_engine_count", CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT},
        {"info.attribute.multiprocessors", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
    };
    for (size_t i = 0; i < sizeof attributes / sizeof attributes[0]; i++) {
        int value = -1;
        CUresult rc = CALL(cuDeviceGetAttribute, (&value, attributes[i].attribute, device));
        fact(attributes[i].name, rc == CUDA_SUCCESS ? value : -(long long)rc);
    }
    CUstream stream;
    if (CALL(cuStreamCreate, (&stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        return 1;
    fact("module_load.garbage", CALL(cuModuleLoadData, (&(CUmodule){0}, "not a module")));
    facts_params();
    facts_vmm(device);
    facts_memory(device, stream);
    facts_contexts(device, primary, stream);
    facts_export_tables();
    return compare_with != NULL ? compare(compare_with) : 0;
}

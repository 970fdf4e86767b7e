/* test_sim_host_vmm.c: host-located virtual memory management in simcuda:
 * `cuMemCreate` with a host location (`CU_MEM_LOCATION_TYPE_HOST`, or
 * `..._HOST_NUMA` node 0), mapped into a reservation and granted to the
 * device, which its kernels (built-in and PTX) then read and write while
 * the host reads it too; copies both ways, the pointer and handle queries,
 * the documented errors, that it is charged to no device, the CPU's own
 * grant (`HOST_NUMA` access descriptors), and the virtual clock charging a
 * kernel for the host-located bytes it reaches at the link's bandwidth.
 *
 *   test_sim_host_vmm on    (SIMCUDA_HOST_VMM=1) everything above;
 *   test_sim_host_vmm off   (SIMCUDA_HOST_VMM=0) a device without host
 *                           VMM: the attributes read 0, creation is
 *                           CUDA_ERROR_NOT_SUPPORTED;
 *   test_sim_host_vmm kernel-fault  (run by `on`) a kernel touching
 *                           host-located memory its device was not granted.
 *
 * Each mode first checks that SIMCUDA_HOST_VMM is set as meson sets it.
 * main() sets SIMCUDA_CLOCK=virtual, SIMCUDA_HOST_COSTS=off (so that a
 * kernel's modeled time is its cost alone) and SIMCUDA_DEVICE_MEM=96M
 * before the first driver call; bandwidths are the defaults: 50 GB/s
 * (50e9 bytes/s) each way over the link, 2000 GB/s on the device.
 */
#include <cuda.h>

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "vs_test.h"

#include "simcuda.h"

#define MiB ((size_t)1 << 20)
#define GRAN (2 * MiB)
#define DEVICE_MEM (96 * MiB)
#define LINK_BYTES_PER_S 50e9
#define DEVICE_BYTES_PER_S 2000e9

static const char *self_path;
static CUcontext ctx;
static CUmodule module;
static CUfunction fn_fill, fn_checksum, fn_copy, fn_add_struct;

/* Each thread i < n: p[i] = 2 * p[i] + 1, through generic addresses. */
static const char twice_plus_one_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry twice_plus_one(.param .u64 p, .param .u32 n)\n{\n"
    ".reg .pred %p<2>; .reg .b32 %r<8>; .reg .b64 %rd<4>;\n"
    "ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [n];\n"
    "mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;\n"
    "mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "setp.ge.u32 %p1, %r5, %r1;\n"
    "@%p1 bra $DONE;\n"
    "mul.wide.u32 %rd2, %r5, 4; add.s64 %rd3, %rd1, %rd2;\n"
    "ld.global.u32 %r6, [%rd3]; mad.lo.s32 %r7, %r6, 2, 1; st.global.u32 [%rd3], %r7;\n"
    "$DONE:\nret;\n}\n";

static int setup(void **state)
{
    (void)state;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoadData(&module, "image") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_fill, module, "sim_fill_u32") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_checksum, module, "sim_checksum_u32") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_copy, module, "sim_copy") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_add_struct, module, "sim_add_u32_struct") != CUDA_SUCCESS)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

static CUmemAllocationProp location_prop(CUmemLocationType type, int id)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = type;
    prop.location.id = id;
    return prop;
}

static CUmemAllocationProp host_prop(void)
{
    /* cuda.h: the id "is ignored for HOST allocations". */
    return location_prop(CU_MEM_LOCATION_TYPE_HOST, 12345);
}

static CUresult grant_to(CUmemLocationType type, CUdeviceptr ptr, size_t size, CUmemAccess_flags flags)
{
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = type;
    desc.location.id = 0;
    desc.flags = flags;
    return cuMemSetAccess(ptr, size, &desc, 1);
}

/* A reservation of `size` with one host-located handle mapped over it and
 * granted read-write to device 0. */
typedef struct host_mapping_s {
    CUdeviceptr va;
    size_t size;
    CUmemGenericAllocationHandle handle;
} host_mapping_t;

static host_mapping_t host_mapping(size_t size)
{
    host_mapping_t m = {.size = size};
    CUmemAllocationProp prop = host_prop();
    assert_int_equal(cuMemAddressReserve(&m.va, size, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&m.handle, size, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(m.va, size, 0, m.handle, 0), CUDA_SUCCESS);
    assert_int_equal(grant_to(CU_MEM_LOCATION_TYPE_DEVICE, m.va, size, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
                     CUDA_SUCCESS);
    return m;
}

static void host_mapping_free(host_mapping_t *m)
{
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(cuMemUnmap(m->va, m->size), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(m->handle), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(m->va, m->size), CUDA_SUCCESS);
}

static size_t used_bytes(void)
{
    size_t free_now = 0, total = 0;
    assert_int_equal(cuMemGetInfo_v2(&free_now, &total), CUDA_SUCCESS);
    assert_int_equal(total, DEVICE_MEM);
    return total - free_now;
}

static uint32_t fill_value(uint32_t seed, uint64_t i)
{
    return seed ^ (uint32_t)(i * 2654435761u);
}

static uint64_t checksum_host(const uint32_t *data, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (uint64_t)data[i] * (i + 1);
    return sum;
}

static void launch_fill(CUdeviceptr dst, uint64_t n, uint32_t seed)
{
    void *params[] = {&dst, &n, &seed};
    assert_int_equal(cuLaunchKernel(fn_fill, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
}

static void launch_checksum(CUdeviceptr src, uint64_t n, CUdeviceptr out)
{
    void *params[] = {&src, &n, &out};
    assert_int_equal(cuLaunchKernel(fn_checksum, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
}

/* Settles all work and returns the host clock: the start of a scenario. */
static uint64_t quiesce(void)
{
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    return simcuda_clock_now_ns();
}

static uint64_t transfer_ns(uint64_t bytes, double bytes_per_s)
{
    return (uint64_t)((double)bytes * 1e9 / bytes_per_s + 0.5);
}

static void assert_host_vmm_setting(const char *expected)
{
    const char *setting = getenv("SIMCUDA_HOST_VMM");
    assert_non_null(setting);
    assert_string_equal(setting, expected);
}

/* Both host VMM attributes of device 0 (host and host NUMA) answer `expected`. */
static void assert_host_vmm_attributes(int expected)
{
    static const CUdevice_attribute attributes[] = {
        CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
    };
    for (size_t i = 0; i < sizeof attributes / sizeof attributes[0]; i++) {
        int value = -1;
        assert_int_equal(cuDeviceGetAttribute(&value, attributes[i], 0), CUDA_SUCCESS);
        assert_int_equal(value, expected);
    }
}

/* ------------------------------------------------------------------------
 * SIMCUDA_HOST_VMM=1
 * ------------------------------------------------------------------------ */

static void test_host_vmm_attributes_read_one(void **state)
{
    (void)state;
    assert_host_vmm_setting("1");
    assert_host_vmm_attributes(1);
    assert_int_equal(simcuda_clock_is_virtual(), 1);
}

/* The device's 2 MiB, minimum and recommended, for both host locations;
 * the NUMA node must exist and HOST_NUMA_CURRENT is no creatable location. */
static void test_host_granularity_is_the_devices(void **state)
{
    (void)state;
    CUmemAllocationProp device = location_prop(CU_MEM_LOCATION_TYPE_DEVICE, 0);
    size_t device_granularity = 0;
    assert_int_equal(cuMemGetAllocationGranularity(&device_granularity, &device, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                     CUDA_SUCCESS);
    const CUmemAllocationProp hosts[] = {host_prop(), location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0)};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        size_t minimum = 0, recommended = 0;
        assert_int_equal(cuMemGetAllocationGranularity(&minimum, &hosts[i], CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                         CUDA_SUCCESS);
        assert_int_equal(cuMemGetAllocationGranularity(&recommended, &hosts[i], CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                         CUDA_SUCCESS);
        assert_int_equal(minimum, device_granularity);
        assert_int_equal(recommended, device_granularity);
        assert_int_equal(minimum, GRAN);
    }
    size_t granularity = 0;
    CUmemAllocationProp other_node = location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 1);
    assert_int_equal(cuMemGetAllocationGranularity(&granularity, &other_node, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                     CUDA_ERROR_INVALID_VALUE);
    CUmemAllocationProp current = location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0);
    assert_int_equal(cuMemGetAllocationGranularity(&granularity, &current, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                     CUDA_ERROR_INVALID_VALUE);
}

/* Every error cuda.h documents for a host location, and nothing charged
 * by any of them. */
static void test_host_create_refuses_what_cuda_h_refuses(void **state)
{
    (void)state;
    size_t used_before = used_bytes();
    CUmemGenericAllocationHandle handle = 0;
    CUmemAllocationProp prop = host_prop();
    /* Not a multiple of the granularity, empty, flags, an unpinned type. */
    assert_int_equal(cuMemCreate(&handle, GRAN + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemCreate(&handle, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemCreate(NULL, GRAN, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    prop.type = CU_MEM_ALLOCATION_TYPE_INVALID;
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    /* "HOST allocations are not IPC capable and requestedHandleTypes must
     * be 0, any other value will result in CUDA_ERROR_INVALID_VALUE." */
    prop = host_prop();
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    /* "Specifying CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT ... will result
     * in CUDA_ERROR_INVALID_VALUE." */
    prop = location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0);
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    /* A NUMA node the host does not have (only node 0: "On systems where
     * NUMA is not available ... id must be set to 0"). */
    prop = location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 1);
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    prop = location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, -1);
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    /* HOST_NUMA may be exportable as a POSIX descriptor, not as fabric
     * (which the devices report no support for, as for device memory). */
    prop = location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(handle, 0);
    assert_int_equal(used_bytes(), used_before);
}

/* Both host locations create memory with the properties asked for; a
 * HOST_NUMA handle asked exportable exports as a POSIX descriptor. */
static void test_host_create_keeps_location_and_exports_numa(void **state)
{
    (void)state;
    CUmemAllocationProp host = host_prop();
    CUmemAllocationProp numa = location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0);
    numa.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemGenericAllocationHandle host_handle, numa_handle;
    assert_int_equal(cuMemCreate(&host_handle, GRAN, &host, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&numa_handle, 2 * GRAN, &numa, 0), CUDA_SUCCESS);
    CUmemAllocationProp got;
    assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&got, host_handle), CUDA_SUCCESS);
    assert_int_equal(got.location.type, CU_MEM_LOCATION_TYPE_HOST);
    assert_int_equal(got.type, CU_MEM_ALLOCATION_TYPE_PINNED);
    assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&got, numa_handle), CUDA_SUCCESS);
    assert_int_equal(got.location.type, CU_MEM_LOCATION_TYPE_HOST_NUMA);
    assert_int_equal(got.location.id, 0);
    int fd = -1;
    assert_int_equal(cuMemExportToShareableHandle(&fd, numa_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                     CUDA_SUCCESS);
    assert_true(fd >= 0);
    assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)(2 * GRAN));
    close(fd);
    assert_int_equal(cuMemExportToShareableHandle(&fd, host_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemRelease(host_handle), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(numa_handle), CUDA_SUCCESS);
}

/* Host-located memory is host memory: more of it than the device holds is
 * created, mapped and granted while cuMemGetInfo and the device's capacity
 * stay as they were; the same size on the device does not fit. */
static void test_host_located_memory_is_charged_to_no_device(void **state)
{
    (void)state;
    size_t used_before = used_bytes();
    const size_t size = 2 * DEVICE_MEM;
    CUmemAllocationProp device = location_prop(CU_MEM_LOCATION_TYPE_DEVICE, 0);
    CUmemGenericAllocationHandle handle;
    assert_int_equal(cuMemCreate(&handle, size, &device, 0), CUDA_ERROR_OUT_OF_MEMORY);
    host_mapping_t m = host_mapping(size);
    assert_int_equal(used_bytes(), used_before);
    /* The whole device is still there to allocate. */
    CUdeviceptr dev;
    assert_int_equal(cuMemAlloc_v2(&dev, DEVICE_MEM - used_before), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(dev), CUDA_SUCCESS);
    ((volatile char *)(uintptr_t)m.va)[size - 1] = 7;
    host_mapping_free(&m);
    assert_int_equal(used_bytes(), used_before);
}

/* Granted to the device, the mapping is the kernels' to write and read,
 * and the host reads what they wrote; before the grant the host faults. */
static void test_kernels_write_and_read_host_located_memory(void **state)
{
    (void)state;
    const uint64_t n = (4 * MiB) / 4;
    CUmemAllocationProp prop = host_prop();
    CUdeviceptr va, out;
    CUmemGenericAllocationHandle handle;
    assert_int_equal(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&handle, 4 * MiB, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va, 4 * MiB, 0, handle, 0), CUDA_SUCCESS);
    /* A new mapping has no access, for the host either. */
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, va), SIGSEGV);
    assert_int_equal(grant_to(CU_MEM_LOCATION_TYPE_DEVICE, va, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
                     CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&out, 8), CUDA_SUCCESS);

    launch_fill(va, n, 0xc0ffee);
    launch_checksum(va, n, out);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    const uint32_t *host = (const uint32_t *)(uintptr_t)va;
    for (uint64_t i = 0; i < n; i += 4099)
        assert_int_equal(host[i], fill_value(0xc0ffee, i));
    uint64_t sum = 0;
    assert_int_equal(cuMemcpyDtoH_v2(&sum, out, 8), CUDA_SUCCESS);
    assert_true(sum == checksum_host(host, n));

    /* The PTX interpreter reaches it through generic addresses too. */
    CUmodule ptx_module;
    CUfunction twice_plus_one;
    assert_int_equal(cuModuleLoadData(&ptx_module, twice_plus_one_ptx), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&twice_plus_one, ptx_module, "twice_plus_one"), CUDA_SUCCESS);
    uint32_t count = 1024;
    void *params[] = {&va, &count};
    assert_int_equal(cuLaunchKernel(twice_plus_one, 4, 1, 1, 256, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    for (uint64_t i = 0; i < count; i++)
        assert_int_equal(host[i], 2 * fill_value(0xc0ffee, i) + 1);
    assert_int_equal(host[count], fill_value(0xc0ffee, count));
    assert_int_equal(cuModuleUnload(ptx_module), CUDA_SUCCESS);

    assert_int_equal(cuMemFree_v2(out), CUDA_SUCCESS);
    assert_int_equal(cuMemUnmap(va, 4 * MiB), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(handle), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(va, 4 * MiB), CUDA_SUCCESS);
}

/* Copies in and out, from pageable host memory, device memory and with
 * the asynchronous forms; a copy between the device and host-located
 * memory crosses the link: one copy engine, at the link's bandwidth. */
static void test_copies_both_ways(void **state)
{
    (void)state;
    const size_t bytes = 10000000; /* 200 us at 50 GB/s */
    host_mapping_t m = host_mapping(6 * GRAN);
    unsigned char *pageable = malloc(bytes), *back = malloc(bytes);
    assert_non_null(pageable);
    assert_non_null(back);
    for (size_t i = 0; i < bytes; i++)
        pageable[i] = (unsigned char)(i * 31 + 7);
    assert_int_equal(cuMemcpyHtoD_v2(m.va, pageable, bytes), CUDA_SUCCESS);
    assert_memory_equal((const void *)(uintptr_t)m.va, pageable, bytes);
    memset(back, 0, bytes);
    assert_int_equal(cuMemcpyDtoH_v2(back, m.va, bytes), CUDA_SUCCESS);
    assert_memory_equal(back, pageable, bytes);

    CUdeviceptr dev;
    CUstream stream;
    assert_int_equal(cuMemAlloc_v2(&dev, bytes), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    /* Host-located to device: the host-to-device engine. */
    uint64_t t0 = quiesce();
    assert_int_equal(cuMemcpyDtoDAsync_v2(dev, m.va, bytes, stream), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, transfer_ns(bytes, LINK_BYTES_PER_S));
    memset(back, 0, bytes);
    assert_int_equal(cuMemcpyDtoH_v2(back, dev, bytes), CUDA_SUCCESS);
    assert_memory_equal(back, pageable, bytes);
    /* Device to host-located (the other half): the device-to-host engine. */
    assert_int_equal(cuMemsetD8_v2(dev, 0x5a, bytes), CUDA_SUCCESS);
    t0 = quiesce();
    assert_int_equal(cuMemcpyAsync(m.va + GRAN, dev, bytes, stream), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, transfer_ns(bytes, LINK_BYTES_PER_S));
    const unsigned char *landed = (const unsigned char *)(uintptr_t)(m.va + GRAN);
    assert_int_equal(landed[0], 0x5a);
    assert_int_equal(landed[bytes - 1], 0x5a);
    assert_int_equal(landed[-1], pageable[GRAN - 1]);

    assert_int_equal(cuStreamDestroy_v2(stream), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(dev), CUDA_SUCCESS);
    free(pageable);
    free(back);
    host_mapping_free(&m);
}

/* The pointer queries say host memory, of the reservation and the mapping;
 * legacy IPC refuses it as any VMM memory. */
static void test_pointer_queries_report_the_host(void **state)
{
    (void)state;
    CUmemAllocationProp prop = host_prop();
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle, retained;
    assert_int_equal(cuMemAddressReserve(&va, 3 * GRAN, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va + GRAN, GRAN, 0, handle, 0), CUDA_SUCCESS);
    assert_int_equal(grant_to(CU_MEM_LOCATION_TYPE_DEVICE, va + GRAN, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READ),
                     CUDA_SUCCESS);
    CUdeviceptr inside = va + GRAN + 100;
    unsigned memory_type = 0, access = 0;
    void *host_pointer = NULL, *mapping_base = NULL;
    CUdeviceptr device_pointer = 0, range_start = 0;
    size_t range_size = 0, mapping_size = 0;
    int ordinal = -1;
    bool ipc_capable = true;
    CUcontext owner = (CUcontext)1;
    assert_int_equal(cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, inside), CUDA_SUCCESS);
    assert_int_equal(memory_type, CU_MEMORYTYPE_HOST);
    assert_int_equal(cuPointerGetAttribute(&host_pointer, CU_POINTER_ATTRIBUTE_HOST_POINTER, inside), CUDA_SUCCESS);
    assert_ptr_equal(host_pointer, (void *)(uintptr_t)inside);
    assert_int_equal(cuPointerGetAttribute(&device_pointer, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, inside),
                     CUDA_SUCCESS);
    assert_int_equal(device_pointer, inside);
    assert_int_equal(cuPointerGetAttribute(&range_start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside),
                     CUDA_SUCCESS);
    assert_int_equal(range_start, va);
    assert_int_equal(cuPointerGetAttribute(&range_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside), CUDA_SUCCESS);
    assert_int_equal(range_size, 3 * GRAN);
    assert_int_equal(cuPointerGetAttribute(&mapping_base, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, inside),
                     CUDA_SUCCESS);
    assert_ptr_equal(mapping_base, (void *)(uintptr_t)(va + GRAN));
    assert_int_equal(cuPointerGetAttribute(&mapping_size, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, inside), CUDA_SUCCESS);
    assert_int_equal(mapping_size, GRAN);
    assert_int_equal(cuPointerGetAttribute(&access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, inside), CUDA_SUCCESS);
    assert_int_equal(access, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ);
    assert_int_equal(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, inside), CUDA_SUCCESS);
    assert_int_equal(ordinal, 0);
    assert_int_equal(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, inside), CUDA_SUCCESS);
    assert_null(owner);
    assert_int_equal(cuPointerGetAttribute(&ipc_capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, inside),
                     CUDA_SUCCESS);
    assert_false(ipc_capable);
    CUipcMemHandle ipc;
    assert_int_equal(cuIpcGetMemHandle(&ipc, inside), CUDA_ERROR_INVALID_VALUE);
    /* The handle behind the address, and its host location. */
    assert_int_equal(cuMemRetainAllocationHandle(&retained, (void *)(uintptr_t)inside), CUDA_SUCCESS);
    assert_true(retained == handle);
    CUmemAllocationProp got;
    assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&got, retained), CUDA_SUCCESS);
    assert_int_equal(got.location.type, CU_MEM_LOCATION_TYPE_HOST);
    assert_int_equal(cuMemRelease(retained), CUDA_SUCCESS);
    /* The unmapped granules around it are nobody's. */
    assert_int_equal(cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemUnmap(va + GRAN, GRAN), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(handle), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(va, 3 * GRAN), CUDA_SUCCESS);
}

/* A HOST_NUMA descriptor is the CPU's grant: taken by host-located
 * mappings, refused (with nothing changed) over device memory. */
static void test_host_numa_grant_is_for_host_located_memory_only(void **state)
{
    (void)state;
    CUmemAllocationProp numa = location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0);
    CUmemAllocationProp device = location_prop(CU_MEM_LOCATION_TYPE_DEVICE, 0);
    CUdeviceptr va;
    CUmemGenericAllocationHandle host_handle, device_handle;
    assert_int_equal(cuMemAddressReserve(&va, 2 * GRAN, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&host_handle, GRAN, &numa, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&device_handle, GRAN, &device, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va, GRAN, 0, host_handle, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va + GRAN, GRAN, 0, device_handle, 0), CUDA_SUCCESS);

    /* The CPU alone, read only: the host reads and cannot write. */
    assert_int_equal(grant_to(CU_MEM_LOCATION_TYPE_HOST_NUMA, va, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READ),
                     CUDA_SUCCESS);
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, va), 0);
    assert_int_equal(vs_test_child_signal(vs_test_write_byte, va), SIGSEGV);
    unsigned long long flags = 99;
    CUmemLocation cpu = {.type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = 0};
    CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    assert_int_equal(cuMemGetAccess(&flags, &cpu, va), CUDA_SUCCESS);
    assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_READ);
    assert_int_equal(cuMemGetAccess(&flags, &gpu, va), CUDA_SUCCESS);
    assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);

    /* cuda.h: no HOST_NUMA accessibility for memory of other locations,
     * alone or in a range with host-located memory; nothing changes. */
    assert_int_equal(grant_to(CU_MEM_LOCATION_TYPE_HOST_NUMA, va + GRAN, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(grant_to(CU_MEM_LOCATION_TYPE_HOST_NUMA, va, 2 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemGetAccess(&flags, &cpu, va), CUDA_SUCCESS);
    assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_READ);
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, va + GRAN), SIGSEGV);
    assert_int_equal(cuMemGetAccess(&flags, &cpu, va + GRAN), CUDA_ERROR_INVALID_VALUE);
    /* A HOST descriptor is no access location cuMemSetAccess knows. */
    assert_int_equal(grant_to(CU_MEM_LOCATION_TYPE_HOST, va, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
                     CUDA_ERROR_INVALID_VALUE);

    /* The device's grant over both, then the CPU's write: all usable. */
    assert_int_equal(grant_to(CU_MEM_LOCATION_TYPE_DEVICE, va, 2 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
                     CUDA_SUCCESS);
    assert_int_equal(grant_to(CU_MEM_LOCATION_TYPE_HOST_NUMA, va, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
                     CUDA_SUCCESS);
    assert_int_equal(vs_test_child_signal(vs_test_write_byte, va), 0);

    assert_int_equal(cuMemUnmap(va, 2 * GRAN), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(host_handle), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(device_handle), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(va, 2 * GRAN), CUDA_SUCCESS);
}

/* As for device memory: a release while mapped keeps the bytes until the
 * unmap; after it the address faults and the handle is gone. */
static void test_unmap_and_release_work_as_for_device_memory(void **state)
{
    (void)state;
    host_mapping_t m = host_mapping(GRAN);
    memset((void *)(uintptr_t)m.va, 0x42, GRAN);
    assert_int_equal(cuMemRelease(m.handle), CUDA_SUCCESS);
    assert_int_equal(((const unsigned char *)(uintptr_t)m.va)[GRAN - 1], 0x42);
    assert_int_equal(cuMemRelease(m.handle), CUDA_ERROR_INVALID_VALUE);
    /* Unmapping part of a mapping is refused. */
    assert_int_equal(cuMemUnmap(m.va, GRAN / 2), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemUnmap(m.va, GRAN), CUDA_SUCCESS);
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, m.va), SIGSEGV);
    CUmemGenericAllocationHandle retained;
    assert_int_equal(cuMemRetainAllocationHandle(&retained, (void *)(uintptr_t)m.va), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemMap(m.va, GRAN, 0, m.handle, 0), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuMemAddressFree(m.va, GRAN), CUDA_SUCCESS);
}

/* A kernel without the device's grant faults on host-located memory as on
 * device memory, even while the CPU may touch it. Runs `kernel-fault`. */
static void test_kernel_without_grant_faults(void **state)
{
    (void)state;
    char path[] = "/tmp/test_sim_host_vmm.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd, STDERR_FILENO);
        execl(self_path, self_path, "kernel-fault", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char text[4096] = {0};
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
        fail_msg("child ended with status %d, not SIGSEGV; stderr: %s", status, got > 0 ? text : "");
    if (strstr(text, "host-located memory it has no peer access or cuMemSetAccess grant to: illegal address") == NULL)
        fail_msg("no line naming the host-located memory; stderr: %s", text);
}

/* The child of `test_kernel_without_grant_faults`: the CPU may write the
 * mapping, the device may not; the kernel's write must not return. */
static int kernel_fault_main(void)
{
    if (setup(NULL) != 0)
        return 2;
    CUmemAllocationProp prop = location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0);
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle;
    if (cuMemAddressReserve(&va, GRAN, 0, 0, 0) != CUDA_SUCCESS || cuMemCreate(&handle, GRAN, &prop, 0) != CUDA_SUCCESS
        || cuMemMap(va, GRAN, 0, handle, 0) != CUDA_SUCCESS
        || grant_to(CU_MEM_LOCATION_TYPE_HOST_NUMA, va, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE) != CUDA_SUCCESS)
        return 3;
    memset((void *)(uintptr_t)va, 1, GRAN);
    uint64_t n = GRAN / 4;
    uint32_t seed = 1;
    void *params[] = {&va, &n, &seed};
    if (cuLaunchKernel(fn_fill, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS)
        return 4;
    (void)cuCtxSynchronize();
    return 5; /* the kernel returned: the grant was not checked */
}

/* The clock: a kernel reading 64 MiB of host-located memory takes the
 * time to move them over the link (64 MiB at 50 GB/s: 1.342 ms) longer
 * than the same kernel over device memory. */
static void test_clock_charges_host_located_reads_at_link_bandwidth(void **state)
{
    (void)state;
    const size_t bytes = 64 * MiB;
    const uint64_t n = bytes / 4;
    host_mapping_t m = host_mapping(bytes);
    CUdeviceptr dev, out;
    assert_int_equal(cuMemAlloc_v2(&dev, bytes), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&out, 8), CUDA_SUCCESS);
    launch_fill(dev, n, 77);
    assert_int_equal(cuMemcpyDtoD_v2(m.va, dev, bytes), CUDA_SUCCESS);

    uint64_t t0 = quiesce();
    launch_checksum(dev, n, out);
    uint64_t device_ns = quiesce() - t0;
    uint64_t device_sum = 0;
    assert_int_equal(cuMemcpyDtoH_v2(&device_sum, out, 8), CUDA_SUCCESS);
    t0 = quiesce();
    launch_checksum(m.va, n, out);
    uint64_t host_ns = quiesce() - t0;
    uint64_t host_sum = 0;
    assert_int_equal(cuMemcpyDtoH_v2(&host_sum, out, 8), CUDA_SUCCESS);
    assert_true(host_sum == device_sum);

    /* The model exactly: the device kernel's bytes at 2000 GB/s; the same
     * plus the mapping's 64 MiB at 50 GB/s. */
    uint64_t link_ns = transfer_ns(bytes, LINK_BYTES_PER_S);
    assert_int_equal(device_ns, transfer_ns(4 * n + 8, DEVICE_BYTES_PER_S));
    assert_true(host_ns >= device_ns + link_ns);
    assert_int_equal(host_ns, device_ns + link_ns);

    assert_int_equal(cuMemFree_v2(out), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(dev), CUDA_SUCCESS);
    host_mapping_free(&m);
}

/* What the model counts: every host-located mapping some 8-byte word of
 * the arguments points into, whole and once; pointers inside a by-value
 * struct included; PTX kernels alike; device memory and host-located
 * memory no argument points into, not at all. */
static void test_clock_counts_each_host_located_mapping_once(void **state)
{
    (void)state;
    host_mapping_t a = host_mapping(4 * GRAN), b = host_mapping(GRAN);
    CUdeviceptr dev;
    assert_int_equal(cuMemAlloc_v2(&dev, GRAN), CUDA_SUCCESS);
    const uint64_t link_a = transfer_ns(4 * GRAN, LINK_BYTES_PER_S);
    const uint64_t link_b = transfer_ns(GRAN, LINK_BYTES_PER_S);

    /* Two pointers into one mapping: its 8 MiB once. */
    uint64_t bytes = GRAN;
    CUdeviceptr dst = a.va, src = a.va + 2 * GRAN + 64;
    void *copy_params[] = {&dst, &src, &bytes};
    uint64_t t0 = quiesce();
    assert_int_equal(cuLaunchKernel(fn_copy, 1, 1, 1, 1, 1, 1, 0, NULL, copy_params, NULL), CUDA_SUCCESS);
    assert_int_equal(quiesce() - t0, transfer_ns(2 * bytes, DEVICE_BYTES_PER_S) + link_a);

    /* Device to device: nothing over the link. */
    dst = dev;
    src = dev + GRAN / 2;
    bytes = GRAN / 2;
    t0 = quiesce();
    assert_int_equal(cuLaunchKernel(fn_copy, 1, 1, 1, 1, 1, 1, 0, NULL, copy_params, NULL), CUDA_SUCCESS);
    assert_int_equal(quiesce() - t0, transfer_ns(2 * bytes, DEVICE_BYTES_PER_S));

    /* A 40-byte struct with pointers at 8, 24 and 32: two into `a`, one
     * into `b`. */
    struct {
        uint64_t n;
        CUdeviceptr a;
        uint32_t tag;
        CUdeviceptr b;
        CUdeviceptr out;
    } args;
    memset(&args, 0, sizeof args); /* the padding after `tag` too: every word is scanned */
    args.n = GRAN / 4;
    args.a = a.va;
    args.tag = 9;
    args.b = a.va + GRAN;
    args.out = b.va;
    void *struct_params[] = {&args};
    t0 = quiesce();
    assert_int_equal(cuLaunchKernel(fn_add_struct, 1, 1, 1, 1, 1, 1, 0, NULL, struct_params, NULL), CUDA_SUCCESS);
    assert_int_equal(quiesce() - t0, transfer_ns(12 * (GRAN / 4), DEVICE_BYTES_PER_S) + link_a + link_b);

    /* A PTX kernel: 2 us plus 1 ns a thread, plus `b` over the link. */
    CUmodule ptx_module;
    CUfunction twice_plus_one;
    assert_int_equal(cuModuleLoadData(&ptx_module, twice_plus_one_ptx), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&twice_plus_one, ptx_module, "twice_plus_one"), CUDA_SUCCESS);
    uint32_t count = 1024;
    void *ptx_params[] = {&b.va, &count};
    t0 = quiesce();
    assert_int_equal(cuLaunchKernel(twice_plus_one, 4, 1, 1, 256, 1, 1, 0, NULL, ptx_params, NULL), CUDA_SUCCESS);
    assert_int_equal(quiesce() - t0, 2000 + 1024 + link_b);
    assert_int_equal(cuModuleUnload(ptx_module), CUDA_SUCCESS);

    assert_int_equal(cuMemFree_v2(dev), CUDA_SUCCESS);
    host_mapping_free(&a);
    host_mapping_free(&b);
}

/* ------------------------------------------------------------------------
 * SIMCUDA_HOST_VMM=0
 * ------------------------------------------------------------------------ */

static void test_off_attributes_read_zero(void **state)
{
    (void)state;
    assert_host_vmm_setting("0");
    assert_host_vmm_attributes(0);
    /* Device memory keeps its virtual memory management. */
    int value = -1;
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
                     CUDA_SUCCESS);
    assert_int_equal(value, 1);
}

/* Valid host properties are CUDA_ERROR_NOT_SUPPORTED with nothing made;
 * malformed ones are still CUDA_ERROR_INVALID_VALUE first; device memory
 * is created as before. */
static void test_off_host_create_not_supported(void **state)
{
    (void)state;
    size_t used_before = used_bytes();
    CUmemGenericAllocationHandle handle = 0;
    CUmemAllocationProp host = host_prop();
    CUmemAllocationProp numa = location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0);
    assert_int_equal(cuMemCreate(&handle, GRAN, &host, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuMemCreate(&handle, GRAN, &numa, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(handle, 0);
    assert_int_equal(cuMemCreate(&handle, GRAN + 4096, &host, 0), CUDA_ERROR_INVALID_VALUE);
    host.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    assert_int_equal(cuMemCreate(&handle, GRAN, &host, 0), CUDA_ERROR_INVALID_VALUE);
    CUmemAllocationProp current = location_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0);
    assert_int_equal(cuMemCreate(&handle, GRAN, &current, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(used_bytes(), used_before);

    /* The granularity is still answered, as under SIMCUDA_VMM=0. */
    size_t granularity = 0;
    host.requestedHandleTypes = 0;
    assert_int_equal(cuMemGetAllocationGranularity(&granularity, &host, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                     CUDA_SUCCESS);
    assert_int_equal(granularity, GRAN);

    CUmemAllocationProp device = location_prop(CU_MEM_LOCATION_TYPE_DEVICE, 0);
    assert_int_equal(cuMemCreate(&handle, GRAN, &device, 0), CUDA_SUCCESS);
    assert_int_equal(used_bytes(), used_before + GRAN);
    assert_int_equal(cuMemRelease(handle), CUDA_SUCCESS);
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    setenv("SIMCUDA_CLOCK", "virtual", 1);
    setenv("SIMCUDA_HOST_COSTS", "off", 1);
    setenv("SIMCUDA_DEVICE_MEM", "96M", 1);
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "kernel-fault") == 0)
        return kernel_fault_main();
    if (strcmp(mode, "on") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_host_vmm_attributes_read_one),
            cmocka_unit_test(test_host_granularity_is_the_devices),
            cmocka_unit_test(test_host_create_refuses_what_cuda_h_refuses),
            cmocka_unit_test(test_host_create_keeps_location_and_exports_numa),
            cmocka_unit_test(test_host_located_memory_is_charged_to_no_device),
            cmocka_unit_test(test_kernels_write_and_read_host_located_memory),
            cmocka_unit_test(test_copies_both_ways),
            cmocka_unit_test(test_pointer_queries_report_the_host),
            cmocka_unit_test(test_host_numa_grant_is_for_host_located_memory_only),
            cmocka_unit_test(test_unmap_and_release_work_as_for_device_memory),
            cmocka_unit_test(test_kernel_without_grant_faults),
            cmocka_unit_test(test_clock_charges_host_located_reads_at_link_bandwidth),
            cmocka_unit_test(test_clock_counts_each_host_located_mapping_once),
        };
        return cmocka_run_group_tests_name("simcuda host-located VMM", tests, setup, NULL);
    }
    if (strcmp(mode, "off") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_off_attributes_read_zero),
            cmocka_unit_test(test_off_host_create_not_supported),
        };
        return cmocka_run_group_tests_name("simcuda SIMCUDA_HOST_VMM=0", tests, setup, NULL);
    }
    fprintf(stderr, "usage: %s on|off|kernel-fault\n", argv[0]);
    return 2;
}

/* test_sim_vmm.c: simcuda's virtual memory management: reservations,
 * memfd-backed handles, mappings that fault until cuMemSetAccess grants
 * access and again after cuMemUnmap, grants over several mappings, handle
 * retention (one reference more) and export, and the capacity those
 * handles use.
 */
#include <cuda.h>

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "vs_test.h"

#define MiB ((size_t)1 << 20)
#define GRAN (2 * MiB)

static int setup(void **state)
{
    (void)state;
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static CUmemAllocationProp device_prop(bool exportable)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    if (exportable)
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

static CUresult grant(CUdeviceptr ptr, size_t size, CUmemAccess_flags flags)
{
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = 0;
    desc.flags = flags;
    return cuMemSetAccess(ptr, size, &desc, 1);
}

static size_t used_bytes(void)
{
    size_t free_now, total;
    assert_int_equal(cuMemGetInfo_v2(&free_now, &total), CUDA_SUCCESS);
    return total - free_now;
}

static void test_granularity_is_two_mib(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_prop(false);
    size_t minimum = 0, recommended = 0;
    assert_int_equal(cuMemGetAllocationGranularity(&minimum, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    assert_int_equal(cuMemGetAllocationGranularity(&recommended, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                     CUDA_SUCCESS);
    assert_int_equal(minimum, GRAN);
    assert_int_equal(recommended, GRAN);
    CUmemGenericAllocationHandle handle;
    assert_int_equal(cuMemCreate(&handle, GRAN + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
}

static void test_mapping_faults_until_access_is_granted(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_prop(false);
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle;
    assert_int_equal(cuMemAddressReserve(&va, 4 * GRAN, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(va % GRAN, 0);
    /* Reserved but unmapped address space faults. */
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, va), SIGSEGV);
    assert_int_equal(cuMemCreate(&handle, 2 * GRAN, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va + GRAN, 2 * GRAN, 0, handle, 0), CUDA_SUCCESS);
    /* Overlapping mappings are refused (a handle of its own: a handle maps
     * whole, so its first granule alone would be refused for that). */
    CUmemGenericAllocationHandle other;
    assert_int_equal(cuMemCreate(&other, GRAN, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va + 2 * GRAN, GRAN, 0, other, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemRelease(other), CUDA_SUCCESS);
    /* Mapped without access: still faults. */
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, va + GRAN), SIGSEGV);
    unsigned long long flags = 99;
    CUmemLocation location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    assert_int_equal(cuMemGetAccess(&flags, &location, va + GRAN), CUDA_SUCCESS);
    assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);

    assert_int_equal(grant(va + GRAN, 2 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READ), CUDA_SUCCESS);
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, va + GRAN), 0);
    assert_int_equal(vs_test_child_signal(vs_test_write_byte, va + GRAN), SIGSEGV);
    assert_int_equal(grant(va + GRAN, 2 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
    assert_int_equal(cuMemGetAccess(&flags, &location, va + 3 * GRAN - 1), CUDA_SUCCESS);
    assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    memset((void *)(va + GRAN), 0x77, 2 * GRAN);
    /* Neighbouring unmapped pages still fault. */
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, va), SIGSEGV);
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, va + 3 * GRAN), SIGSEGV);

    /* Map the same memory a second time: both views share the bytes. */
    CUdeviceptr va2;
    assert_int_equal(cuMemAddressReserve(&va2, 2 * GRAN, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va2, 2 * GRAN, 0, handle, 0), CUDA_SUCCESS);
    assert_int_equal(grant(va2, 2 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
    assert_int_equal(((unsigned char *)va2)[GRAN + 5], 0x77);

    /* Partial unmaps are refused; whole ones make the range fault again. */
    assert_int_equal(cuMemUnmap(va + GRAN, GRAN), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAddressFree(va, 4 * GRAN), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    assert_int_equal(cuMemUnmap(va + GRAN, 2 * GRAN), CUDA_SUCCESS);
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, va + GRAN), SIGSEGV);
    assert_int_equal(cuMemUnmap(va2, 2 * GRAN), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(handle), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(handle), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAddressFree(va, 4 * GRAN), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(va2, 2 * GRAN), CUDA_SUCCESS);
    assert_int_equal(used_bytes(), 0);
}

static void test_release_while_mapped_keeps_memory_until_unmap(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_prop(false);
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle, retained;
    assert_int_equal(cuMemAddressReserve(&va, GRAN, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(used_bytes(), GRAN);
    assert_int_equal(cuMemMap(va, GRAN, 0, handle, 0), CUDA_SUCCESS);
    assert_int_equal(grant(va, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(handle), CUDA_SUCCESS);
    assert_int_equal(used_bytes(), GRAN);
    ((char *)va)[0] = 42;
    assert_int_equal(cuMemRetainAllocationHandle(&retained, (void *)(va + 100)), CUDA_SUCCESS);
    assert_int_equal(retained, handle);
    CUmemAllocationProp read_back;
    assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&read_back, retained), CUDA_SUCCESS);
    assert_int_equal(read_back.location.id, 0);
    assert_int_equal(read_back.type, CU_MEM_ALLOCATION_TYPE_PINNED);
    assert_int_equal(cuMemRelease(retained), CUDA_SUCCESS);
    assert_int_equal(cuMemUnmap(va, GRAN), CUDA_SUCCESS);
    assert_int_equal(used_bytes(), 0);
    assert_int_equal(cuMemRetainAllocationHandle(&retained, (void *)va), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAddressFree(va, GRAN), CUDA_SUCCESS);
}

/* cuda.h: the retained handle "must be released with corresponding number
 * of calls to cuMemRelease": a retain is one more reference, beside the
 * one cuMemCreate gave, and the memory lives until every reference is
 * released and every mapping unmapped, in any order. */
static void test_retained_handle_is_one_more_reference(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_prop(false);
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle, retained;
    assert_int_equal(cuMemAddressReserve(&va, 2 * GRAN, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&handle, 2 * GRAN, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va, 2 * GRAN, 0, handle, 0), CUDA_SUCCESS);
    assert_int_equal(grant(va, 2 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
    ((unsigned char *)va)[GRAN + 1] = 0x3c;

    /* Retained while the creator's reference is held: the same value; its
     * release leaves the creator's reference working. */
    assert_int_equal(cuMemRetainAllocationHandle(&retained, (void *)(va + GRAN + 1)), CUDA_SUCCESS);
    assert_int_equal(retained, handle);
    assert_int_equal(cuMemRelease(retained), CUDA_SUCCESS);
    CUmemAllocationProp read_back;
    assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&read_back, handle), CUDA_SUCCESS);
    assert_int_equal(read_back.location.id, 0);

    /* Two retains, then the creator's release: two references remain. */
    assert_int_equal(cuMemRetainAllocationHandle(&retained, (void *)va), CUDA_SUCCESS);
    assert_int_equal(cuMemRetainAllocationHandle(&retained, (void *)va), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(handle), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(retained), CUDA_SUCCESS);
    assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&read_back, handle), CUDA_SUCCESS);
    /* Unmapped while a reference is held: the memory stays, and a new
     * mapping of the handle sees its bytes. */
    assert_int_equal(cuMemUnmap(va, 2 * GRAN), CUDA_SUCCESS);
    assert_int_equal(used_bytes(), 2 * GRAN);
    assert_int_equal(cuMemMap(va, 2 * GRAN, 0, retained, 0), CUDA_SUCCESS);
    assert_int_equal(grant(va, 2 * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READ), CUDA_SUCCESS);
    assert_int_equal(((unsigned char *)va)[GRAN + 1], 0x3c);
    /* The last reference released while mapped; the unmap frees it. */
    assert_int_equal(cuMemRelease(retained), CUDA_SUCCESS);
    assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&read_back, handle), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(used_bytes(), 2 * GRAN);
    assert_int_equal(cuMemUnmap(va, 2 * GRAN), CUDA_SUCCESS);
    assert_int_equal(used_bytes(), 0);
    assert_int_equal(cuMemAddressFree(va, 2 * GRAN), CUDA_SUCCESS);
}

/* cuMemSetAccess over a range of several mappings (an H200 accepts it,
 * tests/gpu/driver_facts.recorded.txt: mem_set_access.two_mappings) grants
 * each of them, as cuMemGetAccess tells at any address in each; a range
 * that does not cover whole mappings, or has a hole, is refused and
 * changes nothing. cuMemGetAccess answers only where something is mapped. */
static void test_access_over_several_mappings(void **state)
{
    (void)state;
    enum { COUNT = 3 };
    CUmemAllocationProp prop = device_prop(false);
    CUmemLocation device0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    CUmemGenericAllocationHandle handles[COUNT];
    CUdeviceptr va;
    unsigned long long flags = 99;
    assert_int_equal(cuMemAddressReserve(&va, (COUNT + 1) * GRAN, 0, 0, 0), CUDA_SUCCESS);
    for (int i = 0; i < COUNT; i++) {
        assert_int_equal(cuMemCreate(&handles[i], GRAN, &prop, 0), CUDA_SUCCESS);
        assert_int_equal(cuMemMap(va + (CUdeviceptr)i * GRAN, GRAN, 0, handles[i], 0), CUDA_SUCCESS);
    }
    /* Refused: starting inside a mapping, ending inside one, or running
     * past the last mapping into unmapped space. */
    assert_int_equal(grant(va + GRAN / 2, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(grant(va, GRAN + GRAN / 2, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(grant(va + GRAN, COUNT * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_ERROR_INVALID_VALUE);
    for (int i = 0; i < COUNT; i++) {
        assert_int_equal(cuMemGetAccess(&flags, &device0, va + (CUdeviceptr)i * GRAN), CUDA_SUCCESS);
        assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    }
    assert_int_equal(cuMemGetAccess(&flags, &device0, va + COUNT * GRAN), CUDA_ERROR_INVALID_VALUE);

    assert_int_equal(grant(va, COUNT * GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);
    for (int i = 0; i < COUNT; i++) {
        assert_int_equal(cuMemGetAccess(&flags, &device0, va + (CUdeviceptr)i * GRAN + GRAN - 1), CUDA_SUCCESS);
        assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        vs_test_write_byte(va + (CUdeviceptr)i * GRAN + 7);
    }
    /* One of them alone, read-only: the others keep their grant. */
    assert_int_equal(grant(va + GRAN, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READ), CUDA_SUCCESS);
    assert_int_equal(vs_test_child_signal(vs_test_write_byte, va + GRAN), SIGSEGV);
    assert_int_equal(cuMemGetAccess(&flags, &device0, va + 2 * GRAN), CUDA_SUCCESS);
    assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

    /* A new mapping starts with no access (cuda.h, cuMemUnmap). */
    assert_int_equal(cuMemUnmap(va, GRAN), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va, GRAN, 0, handles[0], 0), CUDA_SUCCESS);
    assert_int_equal(cuMemGetAccess(&flags, &device0, va), CUDA_SUCCESS);
    assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    assert_int_equal(cuMemUnmap(va, COUNT * GRAN), CUDA_SUCCESS);
    for (int i = 0; i < COUNT; i++)
        assert_int_equal(cuMemRelease(handles[i]), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(va, (COUNT + 1) * GRAN), CUDA_SUCCESS);
    assert_int_equal(used_bytes(), 0);
}

static void test_pointer_queries_and_ipc_on_vmm_memory(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_prop(true);
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle;
    assert_int_equal(cuMemAddressReserve(&va, 4 * GRAN, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va + GRAN, GRAN, 0, handle, 0), CUDA_SUCCESS);
    assert_int_equal(grant(va + GRAN, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_SUCCESS);

    CUdeviceptr base = 0;
    size_t size = 0;
    assert_int_equal(cuMemGetAddressRange_v2(&base, &size, va + GRAN + 10), CUDA_SUCCESS);
    assert_int_equal(base, va + GRAN);
    assert_int_equal(size, GRAN);
    assert_int_equal(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + GRAN + 10),
                     CUDA_SUCCESS);
    assert_int_equal(base, va);
    assert_int_equal(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + GRAN + 10), CUDA_SUCCESS);
    assert_int_equal(size, 4 * GRAN);
    unsigned long long handle_types = 0;
    assert_int_equal(cuPointerGetAttribute(&handle_types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, va + GRAN),
                     CUDA_SUCCESS);
    assert_int_equal(handle_types, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    bool ipc = true;
    assert_int_equal(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, va + GRAN),
                     CUDA_SUCCESS);
    assert_false(ipc);
    int ordinal = -1;
    assert_int_equal(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va),
                     CUDA_ERROR_INVALID_VALUE); /* reserved, unmapped */

    /* Legacy IPC refuses VMM memory, as the real driver does. */
    CUipcMemHandle ipc_handle;
    assert_int_equal(cuIpcGetMemHandle(&ipc_handle, va + GRAN), CUDA_ERROR_INVALID_VALUE);

    /* The exported descriptor is the memory itself. */
    ((unsigned char *)va)[GRAN + 3] = 0xee;
    int fd = -1;
    assert_int_equal(cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                     CUDA_SUCCESS);
    assert_true(fd >= 0);
    unsigned char *view = mmap(NULL, GRAN, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(view != MAP_FAILED);
    assert_int_equal(view[3], 0xee);
    munmap(view, GRAN);
    close(fd);

    CUmemAllocationProp plain = device_prop(false);
    CUmemGenericAllocationHandle unexportable;
    assert_int_equal(cuMemCreate(&unexportable, GRAN, &plain, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemExportToShareableHandle(&fd, unexportable, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemRelease(unexportable), CUDA_SUCCESS);

    assert_int_equal(cuMemUnmap(va + GRAN, GRAN), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(handle), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(va, 4 * GRAN), CUDA_SUCCESS);
}

static void test_reservation_honours_free_hint(void **state)
{
    (void)state;
    CUdeviceptr first, second;
    assert_int_equal(cuMemAddressReserve(&first, 2 * GRAN, 0, 0, 0), CUDA_SUCCESS);
    /* Growing a segment in place: ask for the range right after it. */
    assert_int_equal(cuMemAddressReserve(&second, 2 * GRAN, 0, first + 2 * GRAN, 0), CUDA_SUCCESS);
    assert_int_equal(second, first + 2 * GRAN);
    assert_int_equal(cuMemAddressFree(first, 2 * GRAN), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(second, 2 * GRAN), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressReserve(&first, GRAN + 1, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
}

static void test_many_handles_stay_open(void **state)
{
    (void)state;
    /* Each handle keeps a memfd; cuInit raised the descriptor limit. */
    enum { COUNT = 300 };
    static CUmemGenericAllocationHandle handles[COUNT];
    CUmemAllocationProp prop = device_prop(false);
    for (int i = 0; i < COUNT; i++)
        assert_int_equal(cuMemCreate(&handles[i], GRAN, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(used_bytes(), COUNT * GRAN);
    for (int i = 0; i < COUNT; i++)
        assert_int_equal(cuMemRelease(handles[i]), CUDA_SUCCESS);
    assert_int_equal(used_bytes(), 0);
}

int main(void)
{
    setenv("SIMCUDA_DEVICE_MEM", "1G", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_granularity_is_two_mib),
        cmocka_unit_test(test_mapping_faults_until_access_is_granted),
        cmocka_unit_test(test_release_while_mapped_keeps_memory_until_unmap),
        cmocka_unit_test(test_retained_handle_is_one_more_reference),
        cmocka_unit_test(test_access_over_several_mappings),
        cmocka_unit_test(test_pointer_queries_and_ipc_on_vmm_memory),
        cmocka_unit_test(test_reservation_honours_free_hint),
        cmocka_unit_test(test_many_handles_stay_open),
    };
    return cmocka_run_group_tests_name("simcuda VMM", tests, setup, NULL);
}

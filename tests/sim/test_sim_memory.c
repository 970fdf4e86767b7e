/* test_sim_memory.c: simcuda's device, pool, managed and pinned host
 * memory: capacity, exact cuMemGetInfo figures, faults on freed memory,
 * pointer attributes and address ranges.
 *
 * Runs with SIMCUDA_DEVICE_MEM=64M so capacity is easy to reach.
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "vs_test.h"

#define MiB ((size_t)1 << 20)
#define DEVICE_MEM (64 * MiB)

static CUcontext ctx;

static int setup(void **state)
{
    (void)state;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static size_t free_bytes(void)
{
    size_t free_now = 0, total = 0;
    assert_int_equal(cuMemGetInfo_v2(&free_now, &total), CUDA_SUCCESS);
    assert_int_equal(total, DEVICE_MEM);
    return free_now;
}

static void test_mem_get_info_counts_exact_bytes(void **state)
{
    (void)state;
    assert_int_equal(free_bytes(), DEVICE_MEM);
    CUdeviceptr a, b, c, d;
    size_t pitch = 0;
    assert_int_equal(cuMemAlloc_v2(&a, 1000), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), DEVICE_MEM - 1000);
    assert_int_equal(cuMemAllocPitch_v2(&b, &pitch, 100, 10, 4), CUDA_SUCCESS);
    assert_int_equal(pitch, 512);
    assert_int_equal(free_bytes(), DEVICE_MEM - 1000 - 5120);
    assert_int_equal(cuMemAllocManaged(&c, 3 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocAsync(&d, 2 * MiB, NULL), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), DEVICE_MEM - 1000 - 5120 - 5 * MiB);
    assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(b), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(c), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeAsync(d, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), DEVICE_MEM);
    assert_int_equal(cuMemGetInfo_v2(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
}

static void test_device_memory_is_usable_and_distinct(void **state)
{
    (void)state;
    CUdeviceptr a, b;
    assert_int_equal(cuMemAlloc_v2(&a, 3 * MiB), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&b, 3 * MiB), CUDA_SUCCESS);
    assert_true(a + 3 * MiB <= b || b + 3 * MiB <= a);
    memset((void *)a, 0xab, 3 * MiB);
    memset((void *)b, 0xcd, 3 * MiB);
    assert_int_equal(((unsigned char *)a)[3 * MiB - 1], 0xab);
    assert_int_equal(a % (2 * MiB), 0);
    assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree_v2(b + 8), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree_v2(b), CUDA_SUCCESS);
}

static void test_freed_device_memory_faults(void **state)
{
    (void)state;
    CUdeviceptr dptr;
    assert_int_equal(cuMemAlloc_v2(&dptr, 4096), CUDA_SUCCESS);
    assert_int_equal(vs_test_child_signal(vs_test_write_byte, dptr), 0);
    assert_int_equal(cuMemFree_v2(dptr), CUDA_SUCCESS);
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, dptr), SIGSEGV);
    /* The next allocation does not land on the freed range. */
    CUdeviceptr next;
    assert_int_equal(cuMemAlloc_v2(&next, 4096), CUDA_SUCCESS);
    assert_int_not_equal(next, dptr);
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, dptr), SIGSEGV);
    /* Past the end of an allocation there is a guard page. */
    assert_int_equal(vs_test_child_signal(vs_test_write_byte, next + 4096), SIGSEGV);
    assert_int_equal(cuMemFree_v2(next), CUDA_SUCCESS);
}

static void test_stream_ordered_free_faults_after_sync(void **state)
{
    (void)state;
    CUdeviceptr dptr;
    CUmemoryPool pool = NULL;
    assert_int_equal(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    assert_non_null(pool);
    assert_int_equal(cuMemAllocFromPoolAsync(&dptr, 8192, pool, NULL), CUDA_SUCCESS);
    CUmemoryPool owner = NULL;
    assert_int_equal(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, dptr), CUDA_SUCCESS);
    assert_ptr_equal(owner, pool);
    assert_int_equal(cuMemFreeAsync(dptr, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeAsync(dptr, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, dptr), SIGSEGV);
    assert_int_equal(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), DEVICE_MEM);
}

typedef CUresult (*alloc_fn)(CUdeviceptr *out, size_t size);

static CUresult alloc_plain(CUdeviceptr *out, size_t size)
{
    return cuMemAlloc_v2(out, size);
}

static CUresult alloc_pitch(CUdeviceptr *out, size_t size)
{
    size_t pitch;
    return cuMemAllocPitch_v2(out, &pitch, size / 16, 16, 4);
}

static CUresult alloc_managed(CUdeviceptr *out, size_t size)
{
    return cuMemAllocManaged(out, size, CU_MEM_ATTACH_GLOBAL);
}

static CUresult alloc_async(CUdeviceptr *out, size_t size)
{
    return cuMemAllocAsync(out, size, NULL);
}

static CUresult alloc_vmm(CUdeviceptr *out, size_t size)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle handle;
    CUresult result = cuMemCreate(&handle, size, &prop, 0);
    if (result == CUDA_SUCCESS)
        *out = (CUdeviceptr)handle;
    return result;
}

static void test_every_allocator_fails_over_capacity(void **state)
{
    (void)state;
    alloc_fn allocators[] = {alloc_plain, alloc_pitch, alloc_managed, alloc_async, alloc_vmm};
    /* Fill 48 MiB, leaving 16 MiB free. */
    CUdeviceptr filler;
    assert_int_equal(cuMemAlloc_v2(&filler, 48 * MiB), CUDA_SUCCESS);
    memset((void *)filler, 0x5a, 48 * MiB);
    for (size_t i = 0; i < sizeof allocators / sizeof *allocators; i++) {
        CUdeviceptr out = 0;
        assert_int_equal(allocators[i](&out, 18 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(free_bytes(), 16 * MiB);
        /* An allocation that fits still succeeds. */
        assert_int_equal(allocators[i](&out, 16 * MiB), CUDA_SUCCESS);
        assert_int_equal(free_bytes(), 0);
        if (allocators[i] == alloc_vmm)
            assert_int_equal(cuMemRelease((CUmemGenericAllocationHandle)out), CUDA_SUCCESS);
        else if (allocators[i] == alloc_async)
            assert_int_equal(cuMemFreeAsync(out, NULL), CUDA_SUCCESS);
        else
            assert_int_equal(cuMemFree_v2(out), CUDA_SUCCESS);
        assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
        assert_int_equal(free_bytes(), 16 * MiB);
    }
    /* The earlier allocation kept its contents through all this. */
    for (size_t offset = 0; offset < 48 * MiB; offset += 4096)
        assert_int_equal(((unsigned char *)filler)[offset], 0x5a);
    assert_int_equal(cuMemFree_v2(filler), CUDA_SUCCESS);
}

static void test_pointer_attributes_describe_device_memory(void **state)
{
    (void)state;
    CUdeviceptr dptr;
    assert_int_equal(cuMemAlloc_v2(&dptr, 10000), CUDA_SUCCESS);
    CUdeviceptr inside = dptr + 1234;

    CUcontext owner = NULL;
    unsigned memory_type = 0;
    CUdeviceptr start = 0, device_pointer = 0;
    size_t size = 0;
    int ordinal = -1;
    bool managed = true, mapped = false, ipc = false;
    unsigned long long id1 = 0, id2 = 0;
    assert_int_equal(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, inside), CUDA_SUCCESS);
    assert_ptr_equal(owner, ctx);
    assert_int_equal(cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, inside), CUDA_SUCCESS);
    assert_int_equal(memory_type, CU_MEMORYTYPE_DEVICE);
    assert_int_equal(cuPointerGetAttribute(&device_pointer, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, inside),
                     CUDA_SUCCESS);
    assert_int_equal(device_pointer, inside);
    void *host = NULL;
    assert_int_equal(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, inside),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside), CUDA_SUCCESS);
    assert_int_equal(start, dptr);
    assert_int_equal(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside), CUDA_SUCCESS);
    assert_int_equal(size, 10000);
    assert_int_equal(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, inside), CUDA_SUCCESS);
    assert_int_equal(ordinal, 0);
    assert_int_equal(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, inside), CUDA_SUCCESS);
    assert_false(managed);
    assert_int_equal(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, inside), CUDA_SUCCESS);
    assert_true(mapped);
    assert_int_equal(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, inside),
                     CUDA_SUCCESS);
    assert_true(ipc);
    unsigned long long handle_types = 99;
    assert_int_equal(cuPointerGetAttribute(&handle_types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, inside),
                     CUDA_SUCCESS);
    assert_int_equal(handle_types, CU_MEM_HANDLE_TYPE_NONE);
    assert_int_equal(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, dptr), CUDA_SUCCESS);

    CUdeviceptr other;
    assert_int_equal(cuMemAlloc_v2(&other, 100), CUDA_SUCCESS);
    assert_int_equal(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, other), CUDA_SUCCESS);
    assert_int_not_equal(id1, id2);

    /* Past the requested size, and unknown pointers, are invalid. */
    assert_int_equal(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dptr + 10000),
                     CUDA_ERROR_INVALID_VALUE);
    int stack_value = 0;
    assert_int_equal(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                           (CUdeviceptr)(uintptr_t)&stack_value),
                     CUDA_ERROR_INVALID_VALUE);

    /* The plural form reports unknown pointers as zeros, not as an error. */
    CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
                                        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_HOST_POINTER};
    memory_type = 77;
    owner = (CUcontext)1;
    ordinal = -1;
    host = (void *)1;
    void *data[] = {&memory_type, &owner, &ordinal, &host};
    assert_int_equal(cuPointerGetAttributes(4, attributes, data, (CUdeviceptr)(uintptr_t)&stack_value),
                     CUDA_SUCCESS);
    assert_int_equal(memory_type, 0);
    assert_null(owner);
    assert_null(host);
    assert_int_equal(cuPointerGetAttributes(4, attributes, data, inside), CUDA_SUCCESS);
    assert_int_equal(memory_type, CU_MEMORYTYPE_DEVICE);
    assert_ptr_equal(owner, ctx);
    assert_int_equal(ordinal, 0);
    assert_null(host);

    CUdeviceptr base = 0;
    assert_int_equal(cuMemGetAddressRange_v2(&base, &size, inside), CUDA_SUCCESS);
    assert_int_equal(base, dptr);
    assert_int_equal(size, 10000);
    assert_int_equal(cuMemGetAddressRange_v2(&base, &size, (CUdeviceptr)(uintptr_t)&stack_value),
                     CUDA_ERROR_NOT_FOUND);
    CUipcMemHandle ipc_handle;
    assert_int_equal(cuIpcGetMemHandle(&ipc_handle, dptr), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(dptr), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(other), CUDA_SUCCESS);
    assert_int_equal(cuMemGetAddressRange_v2(&base, &size, inside), CUDA_ERROR_NOT_FOUND);
}

static void test_managed_memory_is_host_accessible(void **state)
{
    (void)state;
    CUdeviceptr dptr;
    assert_int_equal(cuMemAllocManaged(&dptr, 4096, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAllocManaged(&dptr, 4096, CU_MEM_ATTACH_HOST), CUDA_SUCCESS);
    bool managed = false;
    void *host = NULL;
    assert_int_equal(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, dptr), CUDA_SUCCESS);
    assert_true(managed);
    assert_int_equal(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, dptr), CUDA_SUCCESS);
    assert_ptr_equal(host, (void *)dptr);
    CUipcMemHandle ipc_handle;
    assert_int_equal(cuIpcGetMemHandle(&ipc_handle, dptr), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree_v2(dptr), CUDA_SUCCESS);
}

static void test_pinned_host_memory_is_registered(void **state)
{
    (void)state;
    void *pinned = NULL;
    assert_int_equal(cuMemHostAlloc(&pinned, 5000, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
                     CUDA_SUCCESS);
    memset(pinned, 1, 5000);
    unsigned flags = 0;
    assert_int_equal(cuMemHostGetFlags(&flags, pinned), CUDA_SUCCESS);
    assert_int_equal(flags, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    CUdeviceptr mapped = 0;
    assert_int_equal(cuMemHostGetDevicePointer_v2(&mapped, (char *)pinned + 10, 0), CUDA_SUCCESS);
    assert_int_equal(mapped, (CUdeviceptr)(uintptr_t)pinned + 10);
    unsigned memory_type = 0;
    assert_int_equal(cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, mapped), CUDA_SUCCESS);
    assert_int_equal(memory_type, CU_MEMORYTYPE_HOST);
    /* Pinned memory does not count against the device. */
    assert_int_equal(free_bytes(), DEVICE_MEM);
    assert_int_equal(cuMemFreeHost((char *)pinned + 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFreeHost(pinned), CUDA_SUCCESS);
    assert_int_equal(cuMemHostGetFlags(&flags, pinned), CUDA_ERROR_INVALID_VALUE);

    void *host = NULL;
    assert_int_equal(cuMemAllocHost_v2(&host, 100), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeHost(host), CUDA_SUCCESS);

    size_t length = 3 * 4096;
    char *buffer = aligned_alloc(4096, length);
    assert_non_null(buffer);
    assert_int_equal(cuMemHostRegister_v2(buffer, length, CU_MEMHOSTREGISTER_PORTABLE), CUDA_SUCCESS);
    assert_int_equal(cuMemHostRegister_v2(buffer + 4096, 100, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    assert_int_equal(cuMemHostGetDevicePointer_v2(&mapped, buffer + 5000, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemHostUnregister(buffer + 1), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    assert_int_equal(cuMemHostUnregister(buffer), CUDA_SUCCESS);
    assert_int_equal(cuMemHostUnregister(buffer), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    assert_int_equal(cuMemHostGetDevicePointer_v2(&mapped, buffer, 0), CUDA_ERROR_INVALID_VALUE);
    free(buffer);
}

static void test_destroyed_context_frees_its_memory(void **state)
{
    (void)state;
    CUcontext own;
    assert_int_equal(cuCtxCreate_v4(&own, NULL, 0, 0), CUDA_SUCCESS);
    CUdeviceptr dptr;
    assert_int_equal(cuMemAlloc_v2(&dptr, 4 * MiB), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), DEVICE_MEM - 4 * MiB);
    assert_int_equal(cuCtxDestroy_v2(own), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), DEVICE_MEM);
    assert_int_equal(vs_test_child_signal(vs_test_read_byte, dptr), SIGSEGV);
}

/* A pool keeps freed memory up to its release threshold: it stays counted
 * by cuMemGetInfo (as on an H100, tests/gpu/driver_facts.recorded.txt), is
 * reused by the pool's next allocation, and goes back with cuMemPoolTrimTo,
 * a threshold of 0, or when an allocation needs it. */
static void test_pool_keeps_freed_memory_up_to_threshold(void **state)
{
    (void)state;
    CUmemoryPool pool;
    CUstream stream;
    cuuint64_t value = 0, keep_all = UINT64_MAX, zero = 0;
    const size_t bytes = 8u << 20;
    assert_int_equal(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &value), CUDA_SUCCESS);
    assert_int_equal(value, 0);
    int reuse = 0;
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse), CUDA_SUCCESS);
    assert_int_equal(reuse, 1);

    /* Threshold 0: freed memory is released. */
    size_t before = free_bytes();
    CUdeviceptr p;
    assert_int_equal(cuMemAllocAsync(&p, bytes, stream), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeAsync(p, stream), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), before);
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value), CUDA_SUCCESS);
    assert_int_equal(value, 0);

    /* Threshold max: kept, counted as used, reused at the same address. */
    assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocAsync(&p, bytes, stream), CUDA_SUCCESS);
    CUdeviceptr first = p;
    assert_int_equal(cuMemFreeAsync(p, stream), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), before - bytes);
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value), CUDA_SUCCESS);
    assert_int_equal(value, bytes);
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &value), CUDA_SUCCESS);
    assert_int_equal(value, 0);
    assert_int_equal(cuMemAllocAsync(&p, bytes / 2 + 1, stream), CUDA_SUCCESS);
    assert_int_equal(p, first);
    assert_int_equal(free_bytes(), before - bytes);
    assert_int_equal(cuMemsetD8Async(p, 0x3c, bytes / 2 + 1, stream), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeAsync(p, stream), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);

    /* Trimming releases what is not in use. */
    assert_int_equal(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), before);

    /* An allocation the device cannot take beside what the pool keeps gets
     * the kept memory first. */
    size_t most = free_bytes() - (4u << 20);
    assert_int_equal(cuMemAllocAsync(&p, most, stream), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeAsync(p, stream), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), before - most);
    CUdeviceptr small, big;
    assert_int_equal(cuMemAllocAsync(&small, 8u << 20, stream), CUDA_SUCCESS); /* does not fit the kept block's half rule */
    assert_int_equal(cuMemAllocAsync(&big, most / 2 + (8u << 20), stream), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeAsync(small, stream), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeAsync(big, stream), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);

    /* High-water marks reset only to zero; current figures are read-only. */
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &value), CUDA_SUCCESS);
    assert_true(value >= most);
    cuuint64_t one = 1;
    assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &zero),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolGetAttribute(NULL, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &value), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemPoolGetAttribute(pool, (CUmemPool_attribute)99, &value), CUDA_ERROR_INVALID_VALUE);

    assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), before);
    assert_int_equal(cuStreamDestroy_v2(stream), CUDA_SUCCESS);
}

/* The stream-ordered allocator's reuse: a block freed on a stream is the
 * same stream's next allocation at once, before the stream reaches the
 * free; another stream gets it only once the free has run, and not at all
 * without CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC. A free not yet run is
 * never released by cuMemPoolTrimTo. Stream `a` is held back by a memory
 * wait so its free stays queued. */
static void test_pool_reuse_follows_stream_order(void **state)
{
    (void)state;
    CUmemoryPool pool;
    CUstream a, b;
    CUdeviceptr flag, p, q, r;
    cuuint64_t keep_all = UINT64_MAX, zero = 0, value = 0;
    const size_t bytes = 4u << 20;
    assert_int_equal(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&flag, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(flag, 0, 1), CUDA_SUCCESS);

    assert_int_equal(cuStreamWaitValue32_v2(a, flag, 1, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocAsync(&p, bytes, a), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeAsync(p, a), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    /* Queued, not run: the same stream reuses it, another does not. */
    assert_int_equal(cuMemAllocAsync(&q, bytes, a), CUDA_SUCCESS);
    assert_int_equal(q, p);
    assert_int_equal(cuMemFreeAsync(q, a), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocAsync(&r, bytes, b), CUDA_SUCCESS);
    assert_true(r != p);
    assert_int_equal(cuMemFreeAsync(r, b), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);
    /* The trim releases what b freed, not the block a has yet to free. */
    assert_int_equal(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value), CUDA_SUCCESS);
    assert_int_equal(value, bytes);
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &value), CUDA_SUCCESS);
    assert_int_equal(value, 0);

    /* Once a has run the free, b may take it (opportunistic reuse). */
    assert_int_equal(cuMemsetD32Async(flag, 1, 1, b), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(a), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocAsync(&r, bytes, b), CUDA_SUCCESS);
    assert_int_equal(r, p);
    assert_int_equal(cuMemFreeAsync(r, b), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);

    /* Without opportunistic reuse, a completed free on b is b's alone. */
    int off = 0;
    assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &off), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocAsync(&q, bytes, a), CUDA_SUCCESS);
    assert_true(q != p);
    assert_int_equal(cuMemAllocAsync(&r, bytes, b), CUDA_SUCCESS);
    assert_int_equal(r, p);
    assert_int_equal(cuMemFreeAsync(q, a), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeAsync(r, b), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    int on = 1;
    assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &on), CUDA_SUCCESS);

    assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value), CUDA_SUCCESS);
    assert_int_equal(value, 0);
    assert_int_equal(cuMemFree_v2(flag), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(b), CUDA_SUCCESS);
}

/* Created pools: the properties cuda.h documents are checked, the pool
 * becomes the device's current pool with cuDeviceSetMemPool (cuMemAllocAsync
 * then allocates from it), maxSize bounds what it reserves, and
 * cuMemPoolDestroy with an allocation outstanding invalidates the handle at
 * once while the allocation stays usable until freed. A default pool
 * cannot be destroyed. */
static void test_created_pool_properties_current_and_destroy(void **state)
{
    (void)state;
    CUmemoryPool pool, current, def;
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    assert_int_equal(cuMemPoolCreate(NULL, &props), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemPoolCreate(&pool, NULL), CUDA_ERROR_INVALID_VALUE);
    CUmemPoolProps bad = props;
    bad.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
    assert_int_equal(cuMemPoolCreate(&pool, &bad), CUDA_ERROR_INVALID_VALUE);
    bad = props;
    bad.location.id = 7;
    assert_int_equal(cuMemPoolCreate(&pool, &bad), CUDA_ERROR_INVALID_VALUE);
    bad = props;
    bad.reserved[3] = 1;
    assert_int_equal(cuMemPoolCreate(&pool, &bad), CUDA_ERROR_INVALID_VALUE);
    bad = props;
    bad.location.type = CU_MEM_LOCATION_TYPE_HOST;
    bad.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    assert_int_equal(cuMemPoolCreate(&pool, &bad), CUDA_ERROR_INVALID_VALUE);
    bad.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    assert_int_equal(cuMemPoolCreate(&pool, &bad), CUDA_ERROR_NOT_SUPPORTED);
    bad.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
    assert_int_equal(cuMemPoolCreate(&pool, &bad), CUDA_ERROR_INVALID_VALUE);

    props.maxSize = 8u << 20;
    assert_int_equal(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGetDefaultMemPool(&def, 0), CUDA_SUCCESS);
    assert_true(pool != def);
    assert_int_equal(cuDeviceSetMemPool(0, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuDeviceSetMemPool(0, pool), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGetMemPool(&current, 0), CUDA_SUCCESS);
    assert_ptr_equal(current, pool);

    CUdeviceptr p, q;
    assert_int_equal(cuMemAllocAsync(&p, 6u << 20, NULL), CUDA_SUCCESS);
    CUmemoryPool owner = NULL;
    assert_int_equal(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p), CUDA_SUCCESS);
    assert_ptr_equal(owner, pool);
    assert_int_equal(cuMemAllocAsync(&q, 4u << 20, NULL), CUDA_ERROR_OUT_OF_MEMORY); /* maxSize */
    cuuint64_t value = 0;
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &value), CUDA_SUCCESS);
    assert_int_equal(value, 6u << 20);

    assert_int_equal(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemPoolDestroy(pool), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &value), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuDeviceGetMemPool(&current, 0), CUDA_SUCCESS);
    assert_ptr_equal(current, def);
    size_t before = free_bytes();
    assert_int_equal(cuMemsetD8_v2(p, 0x5a, 6u << 20), CUDA_SUCCESS);
    unsigned char byte = 0;
    assert_int_equal(cuMemcpyDtoH_v2(&byte, p + (5u << 20), 1), CUDA_SUCCESS);
    assert_int_equal(byte, 0x5a);
    assert_int_equal(cuMemFreeAsync(p, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), before + (6u << 20));
}

int main(void)
{
    setenv("SIMCUDA_DEVICE_MEM", "64M", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_get_info_counts_exact_bytes),
        cmocka_unit_test(test_device_memory_is_usable_and_distinct),
        cmocka_unit_test(test_freed_device_memory_faults),
        cmocka_unit_test(test_stream_ordered_free_faults_after_sync),
        cmocka_unit_test(test_every_allocator_fails_over_capacity),
        cmocka_unit_test(test_pointer_attributes_describe_device_memory),
        cmocka_unit_test(test_managed_memory_is_host_accessible),
        cmocka_unit_test(test_pinned_host_memory_is_registered),
        cmocka_unit_test(test_destroyed_context_frees_its_memory),
        cmocka_unit_test(test_pool_keeps_freed_memory_up_to_threshold),
        cmocka_unit_test(test_pool_reuse_follows_stream_order),
        cmocka_unit_test(test_created_pool_properties_current_and_destroy),
    };
    return cmocka_run_group_tests_name("simcuda memory", tests, setup, NULL);
}

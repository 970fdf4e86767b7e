/* preload_offload_pools.c: stream-ordered allocations under the offload
 * mode, on the simulated driver.
 *
 * - `async`: 8 x 4 MiB from `cuMemAllocAsync` (a quarter of them fits the
 *   limit the test sets), each filled by a kernel and checked byte for
 *   byte after the others have pushed it out; then the pool's semantics:
 *   a block freed on a stream is that stream's next allocation at once,
 *   another stream's only once the stream has passed the free; what is
 *   released and when (threshold, `cuMemPoolTrimTo`); the pool's figures
 *   and `cuMemGetInfo` (free plus the live allocations within the total,
 *   as PyTorch's cudaMallocAsync backend asserts).
 * - `passthrough`: what stays the driver's: an allocation from a pool
 *   created exportable, one on a capturing stream, one below
 *   VRAMSHIM_MIN_EVICT; and one served from a created pool (not
 *   exportable), with its figures.
 *
 * Whether an allocation was served from evictable memory is asked of the
 * simulated driver itself (`simcuda_entry_point`, which the shim does not
 * interpose): its own CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE names the pool
 * only for memory the pool gave.
 *
 * Exit status: 0 when every check holds, 1 otherwise, 2 on a usage error.
 */
#include "preload_util.h"
#include "simcuda.h"

#define MiB (1ull << 20)
#define BUFFERS 8
#define BUFFER_BYTES (4 * MiB)

static CUfunction fn_fill, fn_checksum;

static void setup(void)
{
    CUmodule module;
    (void)preload_context();
    VS_CHECK(cuModuleLoadData(&module, "preload_offload_pools kernels"));
    VS_CHECK(cuModuleGetFunction(&fn_fill, module, "sim_fill_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_checksum, module, "sim_checksum_u32"));
}

static uint32_t fill_word(uint32_t seed, uint64_t i)
{
    return seed ^ (uint32_t)(i * 2654435761u);
}

static void launch_fill(CUdeviceptr dst, uint64_t bytes, uint32_t seed, CUstream stream)
{
    uint64_t words = bytes / 4;
    void *args[] = {&dst, &words, &seed};
    VS_CHECK(cuLaunchKernel(fn_fill, 1, 1, 1, 64, 1, 1, 0, stream, args, NULL));
}

/* Every word of `src` as `launch_fill(seed)` left it, read back through a
 * kernel (which restores it) and a copy. */
static bool exact(CUdeviceptr src, uint64_t bytes, uint32_t seed, CUstream stream)
{
    static uint32_t *back;
    if (back == NULL && (back = malloc(BUFFER_BYTES)) == NULL)
        exit(1);
    uint64_t words = bytes / 4, sum = 0, expected = 0;
    CUdeviceptr result;
    VS_CHECK(cuMemAlloc(&result, 8));
    void *args[] = {&src, &words, &result};
    VS_CHECK(cuLaunchKernel(fn_checksum, 1, 1, 1, 64, 1, 1, 0, stream, args, NULL));
    VS_CHECK(cuStreamSynchronize(stream));
    VS_CHECK(cuMemcpyDtoH(&sum, result, sizeof sum));
    VS_CHECK(cuMemFree(result));
    for (uint64_t i = 0; i < words; i++)
        expected += (uint64_t)fill_word(seed, i) * (i + 1);
    if (sum != expected)
        return false;
    VS_CHECK(cuMemcpyDtoH(back, src, bytes));
    for (uint64_t i = 0; i < words; i++)
        if (back[i] != fill_word(seed, i))
            return false;
    return true;
}

typedef CUresult pointer_attribute_fn_t(void *, CUpointer_attribute, CUdeviceptr);

/* The pool the simulated driver says `ptr` came from (NULL: none of its
 * pools: the shim served it from its own memory). */
static CUmemoryPool driver_pool_of(CUdeviceptr ptr)
{
    static pointer_attribute_fn_t *driver_attribute;
    if (driver_attribute == NULL)
        driver_attribute = __extension__(pointer_attribute_fn_t *) simcuda_entry_point("cuPointerGetAttribute");
    CUmemoryPool pool = NULL;
    if (driver_attribute == NULL || driver_attribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ptr) != CUDA_SUCCESS)
        return NULL;
    return pool;
}

static uint64_t pool_figure(CUmemoryPool pool, CUmemPool_attribute attr)
{
    cuuint64_t value = 0;
    VS_CHECK(cuMemPoolGetAttribute(pool, attr, &value));
    return value;
}

/* cuMemGetInfo: free plus what is allocated stays within the total. */
static void expect_meminfo_consistent(const char *when, uint64_t live)
{
    size_t free_bytes = 0, total = 0;
    VS_CHECK(cuMemGetInfo(&free_bytes, &total));
    VS_EXPECT(free_bytes + live <= total, "%s: cuMemGetInfo free %zu + %llu allocated > total %zu", when, free_bytes,
              (unsigned long long)live, total);
}

/* ---- async ------------------------------------------------------------------ */

static void case_async(void)
{
    CUmemoryPool pool;
    CUstream s1, s2;
    CUdeviceptr buffers[BUFFERS], flag;
    cuuint64_t keep_all = UINT64_MAX, zero = 0;
    VS_CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuDeviceGetMemPool(&pool, 0));
    VS_CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all));

    /* The working set: four times the limit. */
    for (int i = 0; i < BUFFERS; i++) {
        VS_CHECK(cuMemAllocAsync(&buffers[i], BUFFER_BYTES, s1));
        VS_EXPECT(driver_pool_of(buffers[i]) == NULL, "buffer %d is the driver's pool memory, not evictable", i);
        CUmemoryPool owner = NULL;
        VS_CHECK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, buffers[i] + 4096));
        VS_EXPECT(owner == pool, "buffer %d does not name its pool", i);
        launch_fill(buffers[i], BUFFER_BYTES, 10u + (uint32_t)i, s1);
    }
    VS_CHECK(cuStreamSynchronize(s1));
    for (int i = 0; i < BUFFERS; i++)
        VS_EXPECT(exact(buffers[i], BUFFER_BYTES, 10u + (uint32_t)i, s1), "buffer %d after the others", i);
    VS_EXPECT(pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == BUFFERS * BUFFER_BYTES,
              "used: %llu bytes, expected the 8 buffers",
              (unsigned long long)pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT));
    VS_EXPECT(pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == BUFFERS * BUFFER_BYTES, "reserved");
    VS_EXPECT(pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= BUFFERS * BUFFER_BYTES, "used high-water mark");
    expect_meminfo_consistent("8 buffers live", BUFFERS * BUFFER_BYTES);

    /* Freed on s1: s1's next allocation of the size takes it at once. */
    VS_CHECK(cuMemFreeAsync(buffers[0], s1));
    CUdeviceptr again;
    VS_CHECK(cuMemAllocAsync(&again, BUFFER_BYTES, s1));
    VS_EXPECT(again == buffers[0], "the same stream did not reuse its freed block at once");
    launch_fill(again, BUFFER_BYTES, 100, s1);
    buffers[0] = again;

    /* s1 held back by a memory wait: its free is queued, not passed. */
    VS_CHECK(cuMemAlloc(&flag, 4));
    VS_CHECK(cuMemsetD32(flag, 0, 1));
    VS_CHECK(cuStreamWaitValue32(s1, flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    VS_CHECK(cuMemFreeAsync(buffers[1], s1));
    VS_EXPECT(cuStreamQuery(s1) == CUDA_ERROR_NOT_READY, "s1 is not held back");
    CUdeviceptr other;
    VS_CHECK(cuMemAllocAsync(&other, BUFFER_BYTES, s2));
    VS_EXPECT(other != buffers[1], "another stream reused a block before its stream passed the free");
    launch_fill(other, BUFFER_BYTES, 200, s2);
    VS_CHECK(cuStreamSynchronize(s2));
    VS_EXPECT(pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == BUFFERS * BUFFER_BYTES, "used after the free");
    /* The queued free's memory is not given back, even when asked to. */
    VS_CHECK(cuMemPoolTrimTo(pool, 0));
    VS_EXPECT(pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == (BUFFERS + 1) * BUFFER_BYTES,
              "reserved with a free queued: %llu",
              (unsigned long long)pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
    /* Once s1 has passed it, s2 may take it. */
    VS_CHECK(cuMemsetD32Async(flag, 1, 1, s2));
    VS_CHECK(cuStreamSynchronize(s1));
    CUdeviceptr later;
    VS_CHECK(cuMemAllocAsync(&later, BUFFER_BYTES, s2));
    VS_EXPECT(later == buffers[1], "another stream did not reuse a block its stream had passed");
    launch_fill(later, BUFFER_BYTES, 201, s2);
    buffers[1] = later;
    VS_CHECK(cuStreamSynchronize(s2));

    /* Everything byte-exact after all that moving. */
    VS_EXPECT(exact(buffers[0], BUFFER_BYTES, 100, s1), "the reused buffer");
    VS_EXPECT(exact(buffers[1], BUFFER_BYTES, 201, s2), "the buffer reused across streams");
    VS_EXPECT(exact(other, BUFFER_BYTES, 200, s2), "the other stream's buffer");
    for (int i = 2; i < BUFFERS; i++)
        VS_EXPECT(exact(buffers[i], BUFFER_BYTES, 10u + (uint32_t)i, s1), "buffer %d at the end", i);
    expect_meminfo_consistent("9 buffers live", (BUFFERS + 1) * BUFFER_BYTES);

    /* Freed and passed: kept under the threshold, given back by a trim. */
    VS_CHECK(cuMemFreeAsync(other, s2));
    VS_CHECK(cuStreamSynchronize(s2));
    VS_EXPECT(pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == (BUFFERS + 1) * BUFFER_BYTES,
              "a freed block kept under the threshold");
    VS_CHECK(cuMemPoolTrimTo(pool, 0));
    VS_EXPECT(pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == BUFFERS * BUFFER_BYTES, "after the trim");
    /* Threshold 0: released once the stream has passed the free. */
    VS_CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
    for (int i = 0; i < BUFFERS; i++)
        VS_CHECK(cuMemFreeAsync(buffers[i], i % 2 ? s2 : s1));
    VS_CHECK(cuCtxSynchronize());
    VS_EXPECT(pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0, "reserved after the last frees: %llu",
              (unsigned long long)pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
    VS_EXPECT(pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0, "used after the last frees");
    VS_EXPECT(cuMemFreeAsync(buffers[2], s1) == CUDA_ERROR_INVALID_VALUE, "a second free was accepted");
    VS_CHECK(cuMemFree(flag));
    VS_CHECK(cuStreamDestroy(s1));
    VS_CHECK(cuStreamDestroy(s2));
}

/* ---- passthrough -------------------------------------------------------------- */

static void case_passthrough(void)
{
    CUstream s;
    CUmemoryPool exportable, created;
    CUmemPoolProps props;
    CUdeviceptr p;
    VS_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    VS_CHECK(cuMemPoolCreate(&exportable, &props));
    VS_CHECK(cuMemAllocFromPoolAsync(&p, BUFFER_BYTES, exportable, s));
    VS_EXPECT(driver_pool_of(p) == exportable, "an exportable pool's allocation was not left to the driver");
    VS_EXPECT(pool_figure(exportable, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == BUFFER_BYTES, "exportable pool used");
    VS_CHECK(cuMemFreeAsync(p, s));
    VS_CHECK(cuStreamSynchronize(s));
    VS_CHECK(cuMemPoolDestroy(exportable));

    /* Below VRAMSHIM_MIN_EVICT: the driver's. */
    CUmemoryPool def;
    VS_CHECK(cuDeviceGetDefaultMemPool(&def, 0));
    VS_CHECK(cuMemAllocAsync(&p, 64 * 1024, s));
    VS_EXPECT(driver_pool_of(p) == def, "a small allocation was not left to the driver");
    VS_CHECK(cuMemFreeAsync(p, s));

    /* On a capturing stream: a graph's memory, the driver's. */
    CUgraph graph;
    VS_CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUresult rc = cuMemAllocAsync(&p, BUFFER_BYTES, s);
    VS_CHECK(cuStreamEndCapture(s, &graph));
    VS_EXPECT(rc == CUDA_SUCCESS && driver_pool_of(p) == def, "an allocation during capture was not the driver's");
    VS_CHECK(cuGraphDestroy(graph));
    if (rc == CUDA_SUCCESS)
        VS_CHECK(cuMemFreeAsync(p, s));

    /* A created pool, not exportable, on the device: served. */
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    VS_CHECK(cuMemPoolCreate(&created, &props));
    VS_CHECK(cuMemAllocFromPoolAsync(&p, BUFFER_BYTES, created, s));
    VS_EXPECT(driver_pool_of(p) == NULL, "a created pool's allocation was not served");
    launch_fill(p, BUFFER_BYTES, 5, s);
    VS_EXPECT(exact(p, BUFFER_BYTES, 5, s), "the created pool's buffer");
    VS_EXPECT(pool_figure(created, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == BUFFER_BYTES, "created pool used");
    VS_CHECK(cuMemFreeAsync(p, s));
    VS_CHECK(cuStreamSynchronize(s));
    VS_EXPECT(pool_figure(created, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0, "created pool used after the free");
    VS_CHECK(cuMemPoolDestroy(created));
    VS_CHECK(cuStreamDestroy(s));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: preload_offload_pools async|passthrough\n");
        return 2;
    }
    vs_test_set_phase(argv[1]);
    setup();
    if (strcmp(argv[1], "async") == 0) {
        case_async();
    } else if (strcmp(argv[1], "passthrough") == 0) {
        case_passthrough();
    } else {
        fprintf(stderr, "preload_offload_pools: unknown case %s\n", argv[1]);
        return 2;
    }
    unsigned long failed = vs_test_failure_count();
    printf("preload_offload_pools %s: %s (%lu failures)\n", argv[1], failed == 0 ? "ok" : "FAILED", failed);
    return failed == 0 ? 0 : 1;
}

/* preload_observe.c: run under LD_PRELOAD=libvramshim.so with
 * VRAMSHIM_MODE=cap VRAM_LIMIT=256M on the simulated driver, linked directly
 * against libcuda and written against cuda.h only, like a user's program.
 * Built twice: plain, and with CUDA_API_PER_THREAD_DEFAULT_STREAM so every
 * launch, copy and memset goes through the `_ptsz`/`_ptds` entry points.
 *
 * What the shim saw is read back through its debugging snapshot
 * (VRAMSHIM_DEBUG_SNAPSHOT): each test stamps some allocations and checks
 * that exactly those moved their last-use sequence numbers.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "preload_util.h"

#define MiB (1ull << 20)
#define WORDS (1024u * 1024u) /* 4 MiB of uint32_t */

typedef struct add_args_s {
    uint64_t n;
    CUdeviceptr a;
    uint32_t tag;
    CUdeviceptr b;
    CUdeviceptr out;
} add_args_t;
_Static_assert(sizeof(add_args_t) == 40, "sim_add_u32_struct takes 40 bytes");

static CUmodule module;
static CUfunction fill_fn, checksum_fn, add_fn;

static int setup(void **state)
{
    (void)state;
    preload_context();
    VS_CHECK(cuModuleLoadData(&module, "simcuda builtins"));
    VS_CHECK(cuModuleGetFunction(&fill_fn, module, "sim_fill_u32"));
    VS_CHECK(cuModuleGetFunction(&checksum_fn, module, "sim_checksum_u32"));
    VS_CHECK(cuModuleGetFunction(&add_fn, module, "sim_add_u32_struct"));
    return 0;
}

static CUdeviceptr alloc_filled(uint32_t seed)
{
    CUdeviceptr p;
    uint64_t n = WORDS;
    VS_CHECK(cuMemAlloc(&p, WORDS * sizeof(uint32_t)));
    void *args[] = {&p, &n, &seed};
    VS_CHECK(cuLaunchKernel(fill_fn, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    return p;
}

/* True when `p`'s last use moved past the snapshot `before`. */
static bool used_since(const preload_snapshot_t *after, const preload_snapshot_t *before, CUdeviceptr p)
{
    preload_alloc_t a = preload_find(after, p);
    assert_true(a.found);
    return a.last_use_seq > before->seq;
}

static void test_struct_param_pointers_stamp_exactly_their_allocations(void **state)
{
    (void)state;
    CUdeviceptr a = alloc_filled(1), b = alloc_filled(2), out = alloc_filled(3), other = alloc_filled(4);
    preload_snapshot_t before = preload_snapshot();

    add_args_t args = {.n = WORDS, .a = a, .tag = 0xdeadbeef, .b = b, .out = out};
    void *params[] = {&args};
    VS_CHECK(cuLaunchKernel(add_fn, 1, 1, 1, 64, 1, 1, 0, NULL, params, NULL));
    preload_snapshot_t after = preload_snapshot();

    assert_true(used_since(&after, &before, a));
    assert_true(used_since(&after, &before, b));
    assert_true(used_since(&after, &before, out));
    assert_false(used_since(&after, &before, other));
    assert_int_equal(preload_find(&after, a).use_count, preload_find(&before, a).use_count + 1);

    /* The kernel really ran on what the shim forwarded. */
    uint32_t host_a[4], host_b[4], host_out[4];
    VS_CHECK(cuMemcpyDtoH(host_a, a, sizeof host_a));
    VS_CHECK(cuMemcpyDtoH(host_b, b, sizeof host_b));
    VS_CHECK(cuMemcpyDtoH(host_out, out, sizeof host_out));
    for (int i = 0; i < 4; i++)
        assert_int_equal(host_out[i], host_a[i] + host_b[i]);

    VS_CHECK(cuMemFree(a));
    VS_CHECK(cuMemFree(b));
    VS_CHECK(cuMemFree(out));
    VS_CHECK(cuMemFree(other));
    preload_snapshot_free(&before);
    preload_snapshot_free(&after);
}

static void test_extra_buffer_form_is_scanned(void **state)
{
    (void)state;
    CUdeviceptr src = alloc_filled(7), result, other = alloc_filled(8);
    VS_CHECK(cuMemAlloc(&result, 2 * MiB));
    preload_snapshot_t before = preload_snapshot();

    struct {
        CUdeviceptr src;
        uint64_t n;
        CUdeviceptr out;
    } packed = {src, WORDS, result};
    size_t size = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    VS_CHECK(cuLaunchKernel(checksum_fn, 1, 1, 1, 64, 1, 1, 0, NULL, NULL, extra));
    preload_snapshot_t after = preload_snapshot();

    assert_true(used_since(&after, &before, src));
    assert_true(used_since(&after, &before, result));
    assert_false(used_since(&after, &before, other));
    VS_CHECK(cuMemFree(src));
    VS_CHECK(cuMemFree(result));
    VS_CHECK(cuMemFree(other));
    preload_snapshot_free(&before);
    preload_snapshot_free(&after);
}

static void test_cukernel_handle_cast_to_function_is_scanned(void **state)
{
    (void)state;
    CUlibrary library;
    CUkernel kernel;
    CUdeviceptr a = alloc_filled(1), b = alloc_filled(2), out = alloc_filled(3);
    VS_CHECK(cuLibraryLoadData(&library, "simcuda builtins", NULL, NULL, 0, NULL, NULL, 0));
    VS_CHECK(cuLibraryGetKernel(&kernel, library, "sim_add_u32_struct"));
    preload_snapshot_t before = preload_snapshot();

    add_args_t args = {.n = 16, .a = a, .tag = 1, .b = b, .out = out};
    void *params[] = {&args};
    /* As cudart does for <<<>>>: the CUkernel passed as a CUfunction. */
    VS_CHECK(cuLaunchKernel((CUfunction)(void *)kernel, 1, 1, 1, 64, 1, 1, 0, NULL, params, NULL));
    preload_snapshot_t after = preload_snapshot();

    assert_true(used_since(&after, &before, a));
    assert_true(used_since(&after, &before, b));
    assert_true(used_since(&after, &before, out));
    VS_CHECK(cuLibraryUnload(library));
    VS_CHECK(cuMemFree(a));
    VS_CHECK(cuMemFree(b));
    VS_CHECK(cuMemFree(out));
    preload_snapshot_free(&before);
    preload_snapshot_free(&after);
}

static void test_launch_ex_and_cooperative_are_scanned(void **state)
{
    (void)state;
    CUdeviceptr a = alloc_filled(1), b = alloc_filled(2);
    preload_snapshot_t s0 = preload_snapshot();

    uint64_t n = WORDS;
    uint32_t seed = 5;
    void *fill_a[] = {&a, &n, &seed};
    CUlaunchConfig config = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64, .blockDimY = 1,
                             .blockDimZ = 1};
    VS_CHECK(cuLaunchKernelEx(&config, fill_fn, fill_a, NULL));
    preload_snapshot_t s1 = preload_snapshot();
    assert_true(used_since(&s1, &s0, a));
    assert_false(used_since(&s1, &s0, b));

    void *fill_b[] = {&b, &n, &seed};
    VS_CHECK(cuLaunchCooperativeKernel(fill_fn, 1, 1, 1, 64, 1, 1, 0, NULL, fill_b));
    preload_snapshot_t s2 = preload_snapshot();
    assert_true(used_since(&s2, &s1, b));
    assert_false(used_since(&s2, &s1, a));

    VS_CHECK(cuMemFree(a));
    VS_CHECK(cuMemFree(b));
    preload_snapshot_free(&s0);
    preload_snapshot_free(&s1);
    preload_snapshot_free(&s2);
}

static void test_graph_launch_stamps_what_the_graph_references(void **state)
{
    (void)state;
    CUdeviceptr a = alloc_filled(1), b = alloc_filled(2), out = alloc_filled(3), other = alloc_filled(4);
    CUgraph graph;
    CUgraphNode node;
    CUgraphExec exec;
    add_args_t args = {.n = WORDS, .a = a, .tag = 0, .b = b, .out = out};
    void *params[] = {&args};
    CUDA_KERNEL_NODE_PARAMS p = {.func = add_fn,
                                 .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                 .blockDimX = 64, .blockDimY = 1, .blockDimZ = 1,
                                 .kernelParams = params};
    VS_CHECK(cuGraphCreate(&graph, 0));
    VS_CHECK(cuGraphAddKernelNode(&node, graph, NULL, 0, &p));
    VS_CHECK(cuGraphInstantiate(&exec, graph, 0));
    preload_snapshot_t before = preload_snapshot();

    /* Replay never goes through cuLaunchKernel. */
    VS_CHECK(cuGraphLaunch(exec, NULL));
    preload_snapshot_t after = preload_snapshot();
    assert_true(used_since(&after, &before, a));
    assert_true(used_since(&after, &before, b));
    assert_true(used_since(&after, &before, out));
    assert_false(used_since(&after, &before, other));
    assert_int_equal(preload_stat(&after, "graph_launches"), preload_stat(&before, "graph_launches") + 1);

    VS_CHECK(cuGraphExecDestroy(exec));
    VS_CHECK(cuGraphDestroy(graph));
    VS_CHECK(cuMemFree(a));
    VS_CHECK(cuMemFree(b));
    VS_CHECK(cuMemFree(out));
    VS_CHECK(cuMemFree(other));
    preload_snapshot_free(&before);
    preload_snapshot_free(&after);
}

static void test_copies_and_memsets_stamp_device_operands(void **state)
{
    (void)state;
    CUdeviceptr a, b, c;
    uint32_t host[256] = {0};
    VS_CHECK(cuMemAlloc(&a, 2 * MiB));
    VS_CHECK(cuMemAlloc(&b, 2 * MiB));
    VS_CHECK(cuMemAlloc(&c, 2 * MiB));
    preload_snapshot_t s0 = preload_snapshot();

    VS_CHECK(cuMemcpyHtoD(a + 4096, host, sizeof host)); /* interior pointer */
    preload_snapshot_t s1 = preload_snapshot();
    assert_true(used_since(&s1, &s0, a));
    assert_false(used_since(&s1, &s0, b));

    VS_CHECK(cuMemsetD32Async(b, 7, 1024, NULL));
    VS_CHECK(cuMemcpyDtoD(c, b, 4096));
    preload_snapshot_t s2 = preload_snapshot();
    assert_true(used_since(&s2, &s1, b));
    assert_true(used_since(&s2, &s1, c));
    assert_false(used_since(&s2, &s1, a));
    assert_true(preload_stat(&s2, "memsets") >= 1);

    VS_CHECK(cuMemFree(a));
    VS_CHECK(cuMemFree(b));
    VS_CHECK(cuMemFree(c));
    preload_snapshot_free(&s0);
    preload_snapshot_free(&s1);
    preload_snapshot_free(&s2);
}

static void test_cap_grants_four_64mib_then_exactly_out_of_memory(void **state)
{
    (void)state;
    CUdeviceptr bufs[4], extra;
    size_t free_bytes = 0, total = 0;
    for (int i = 0; i < 4; i++)
        VS_CHECK(cuMemAlloc(&bufs[i], 64 * MiB));
    assert_int_equal(cuMemAlloc(&extra, 64 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemAlloc(&extra, 1), CUDA_ERROR_OUT_OF_MEMORY);
    VS_CHECK(cuMemGetInfo(&free_bytes, &total));
    assert_int_equal(total, 256 * MiB);
    assert_int_equal(free_bytes, 0);

    /* The refusals left every other allocation in place. */
    preload_snapshot_t snap = preload_snapshot();
    for (int i = 0; i < 4; i++)
        assert_true(preload_find(&snap, bufs[i]).found);
    assert_int_equal(preload_device_used(&snap), 256 * MiB);
    preload_snapshot_free(&snap);

    VS_CHECK(cuMemFree(bufs[3]));
    VS_CHECK(cuMemGetInfo(&free_bytes, NULL)); /* NULL tolerated */
    assert_int_equal(free_bytes, 64 * MiB);
    VS_CHECK(cuMemGetInfo(NULL, &total));
    assert_int_equal(total, 256 * MiB);
    VS_CHECK(cuMemGetInfo(NULL, NULL));
    VS_CHECK(cuMemAlloc(&bufs[3], 64 * MiB));
    for (int i = 0; i < 4; i++)
        VS_CHECK(cuMemFree(bufs[i]));
    VS_CHECK(cuMemGetInfo(&free_bytes, &total));
    assert_int_equal(free_bytes, 256 * MiB);
}

static void test_cap_counts_pitch_async_and_vmm_but_not_managed(void **state)
{
    (void)state;
    CUdeviceptr pitched, async_ptr, managed, big;
    size_t pitch = 0, free_bytes, total;

    VS_CHECK(cuMemAllocPitch(&pitched, &pitch, 1000, 1024, 4));
    VS_CHECK(cuMemAllocAsync(&async_ptr, 64 * MiB, NULL));
    VS_CHECK(cuMemAllocManaged(&managed, 64 * MiB, CU_MEM_ATTACH_GLOBAL));

    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t granularity = 0;
    VS_CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va;
    size_t vmm_bytes = 64 * MiB;
    VS_CHECK(cuMemCreate(&handle, vmm_bytes, &prop, 0));
    VS_CHECK(cuMemAddressReserve(&va, vmm_bytes, 0, 0, 0));
    VS_CHECK(cuMemMap(va, vmm_bytes, 0, handle, 0));
    CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    VS_CHECK(cuMemSetAccess(va, vmm_bytes, &access, 1));

    preload_snapshot_t snap = preload_snapshot();
    uint64_t pitched_bytes = (uint64_t)pitch * 1024;
    assert_int_equal(preload_device_used(&snap), pitched_bytes + 64 * MiB + vmm_bytes);
    assert_string_equal(preload_find(&snap, pitched).kind, "pitch");
    assert_string_equal(preload_find(&snap, async_ptr).kind, "async");
    assert_string_equal(preload_find(&snap, managed).kind, "managed");
    assert_string_equal(preload_find(&snap, va).kind, "vmm");
    preload_snapshot_free(&snap);

    /* What is left under the cap is what cuMemGetInfo says and what an
     * allocation gets. */
    VS_CHECK(cuMemGetInfo(&free_bytes, &total));
    assert_int_equal(free_bytes, 256 * MiB - pitched_bytes - 64 * MiB - vmm_bytes);
    assert_int_equal(cuMemAlloc(&big, free_bytes + 1), CUDA_ERROR_OUT_OF_MEMORY);
    VS_CHECK(cuMemAlloc(&big, free_bytes));
    VS_CHECK(cuMemFree(big));

    /* VMM memory is given back once released and unmapped. */
    VS_CHECK(cuMemRelease(handle));
    snap = preload_snapshot();
    assert_int_equal(preload_device_used(&snap), pitched_bytes + 64 * MiB + vmm_bytes);
    preload_snapshot_free(&snap);
    VS_CHECK(cuMemUnmap(va, vmm_bytes));
    VS_CHECK(cuMemAddressFree(va, vmm_bytes));
    VS_CHECK(cuMemFreeAsync(async_ptr, NULL));
    VS_CHECK(cuMemFree(pitched));
    VS_CHECK(cuMemFree(managed));
    snap = preload_snapshot();
    assert_int_equal(preload_device_used(&snap), 0);
    preload_snapshot_free(&snap);
}

static void test_runtime_cudamalloc_goes_through_the_cap(void **state)
{
    (void)state;
    typedef int (*malloc_fn)(void **, size_t);
    typedef int (*free_fn)(void *);
    malloc_fn rt_malloc;
    free_fn rt_free;
    void *found = dlsym(RTLD_DEFAULT, "cudaMalloc");
    assert_non_null(found);
    memcpy(&rt_malloc, &found, sizeof found);
    found = dlsym(RTLD_DEFAULT, "cudaFree");
    assert_non_null(found);
    memcpy(&rt_free, &found, sizeof found);

    void *bufs[4], *extra = NULL;
    for (int i = 0; i < 4; i++)
        assert_int_equal(rt_malloc(&bufs[i], 64 * MiB), 0);
    assert_int_equal(rt_malloc(&extra, 64 * MiB), 2); /* cudaErrorMemoryAllocation */
    preload_snapshot_t snap = preload_snapshot();
    assert_string_equal(preload_find(&snap, (CUdeviceptr)(uintptr_t)bufs[0]).kind, "device");
    preload_snapshot_free(&snap);
    for (int i = 0; i < 4; i++)
        assert_int_equal(rt_free(bufs[i]), 0);
    assert_int_equal(rt_free(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_struct_param_pointers_stamp_exactly_their_allocations),
        cmocka_unit_test(test_extra_buffer_form_is_scanned),
        cmocka_unit_test(test_cukernel_handle_cast_to_function_is_scanned),
        cmocka_unit_test(test_launch_ex_and_cooperative_are_scanned),
        cmocka_unit_test(test_graph_launch_stamps_what_the_graph_references),
        cmocka_unit_test(test_copies_and_memsets_stamp_device_operands),
        cmocka_unit_test(test_cap_grants_four_64mib_then_exactly_out_of_memory),
        cmocka_unit_test(test_cap_counts_pitch_async_and_vmm_but_not_managed),
        cmocka_unit_test(test_runtime_cudamalloc_goes_through_the_cap),
    };
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    return cmocka_run_group_tests_name("preload_observe (per-thread entry points)", tests, setup, NULL);
#else
    return cmocka_run_group_tests_name("preload_observe", tests, setup, NULL);
#endif
}

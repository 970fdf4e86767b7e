/* test_sim_link.c: the JIT linker, `cuKernelGetLibrary`, tensor-map
 * encoding and managed-memory prefetch against cuda.h's documented
 * behaviour (sim_link.c): what a linked image runs, which inputs and
 * arguments are refused and with which error.
 */
#include <cuda.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static CUcontext ctx;

static int setup(void **state)
{
    (void)state;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

/* out[i] = in[i] * 3 + 1 for 64 threads. */
static const char scale_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry scale(.param .u64 pin, .param .u64 pout)\n{\n"
    "  .reg .b32 %r<4>;\n  .reg .b64 %rd<8>;\n"
    "  ld.param.u64 %rd1, [pin];\n  ld.param.u64 %rd2, [pout];\n"
    "  mov.u32 %r1, %tid.x;\n  mul.wide.u32 %rd3, %r1, 4;\n"
    "  add.s64 %rd4, %rd1, %rd3;\n  add.s64 %rd5, %rd2, %rd3;\n"
    "  ld.global.u32 %r2, [%rd4];\n  mad.lo.u32 %r3, %r2, 3, 1;\n"
    "  st.global.u32 [%rd5], %r3;\n  ret;\n}\n";

static void test_linked_ptx_runs(void **state)
{
    (void)state;
    CUlinkState link;
    assert_int_equal(cuLinkCreate_v2(0, NULL, NULL, &link), CUDA_SUCCESS);
    assert_int_equal(cuLinkAddData_v2(link, CU_JIT_INPUT_PTX, (void *)scale_ptx, sizeof(scale_ptx), "scale.ptx", 0,
                                   NULL, NULL),
                     CUDA_SUCCESS);
    void *image = NULL;
    size_t size = 0;
    assert_int_equal(cuLinkComplete(link, &image, &size), CUDA_SUCCESS);
    assert_non_null(image);
    assert_true(size > sizeof(scale_ptx));

    CUmodule module;
    CUfunction fn;
    assert_int_equal(cuModuleLoadData(&module, image), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&fn, module, "scale"), CUDA_SUCCESS);
    /* The image belongs to the link state: loading copied what it needs. */
    assert_int_equal(cuLinkDestroy(link), CUDA_SUCCESS);

    CUdeviceptr in, out;
    uint32_t host[64], result[64];
    for (int i = 0; i < 64; i++)
        host[i] = (uint32_t)(i * 7 + 5);
    assert_int_equal(cuMemAlloc_v2(&in, sizeof(host)), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&out, sizeof(host)), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoD_v2(in, host, sizeof(host)), CUDA_SUCCESS);
    void *args[] = {&in, &out};
    assert_int_equal(cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(result, out, sizeof(result)), CUDA_SUCCESS);
    for (int i = 0; i < 64; i++)
        assert_int_equal(result[i], host[i] * 3 + 1);
    assert_int_equal(cuMemFree_v2(in), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(out), CUDA_SUCCESS);
    assert_int_equal(cuModuleUnload(module), CUDA_SUCCESS);
}

static void test_link_refusals(void **state)
{
    (void)state;
    char log[256] = "";
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, (void *)(uintptr_t)sizeof(log)};
    CUlinkState link;
    assert_int_equal(cuLinkCreate_v2(0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CUjit_option bad_option = CU_JIT_NUM_OPTIONS;
    void *bad_value = NULL;
    assert_int_equal(cuLinkCreate_v2(1, &bad_option, &bad_value, &link), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuLinkCreate_v2(2, options, values, &link), CUDA_SUCCESS);

    /* PTX that does not compile: INVALID_PTX, with the reason in the log. */
    static const char broken[] = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry b()\n{\n  frobnicate;\n}\n";
    assert_int_equal(cuLinkAddData_v2(link, CU_JIT_INPUT_PTX, (void *)broken, sizeof(broken), "broken", 0, NULL, NULL),
                     CUDA_ERROR_INVALID_PTX);
    assert_true(strlen(log) > 0);
    /* A cubin that is not a CUDA ELF, a fatbin without its magic. */
    static char not_elf[128] = "not an ELF file";
    assert_int_equal(cuLinkAddData_v2(link, CU_JIT_INPUT_CUBIN, not_elf, sizeof(not_elf), "x", 0, NULL, NULL),
                     CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(cuLinkAddData_v2(link, CU_JIT_INPUT_FATBINARY, not_elf, sizeof(not_elf), "x", 0, NULL, NULL),
                     CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(cuLinkAddData_v2(link, (CUjitInputType)99, not_elf, sizeof(not_elf), "x", 0, NULL, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuLinkAddData_v2(link, CU_JIT_INPUT_PTX, NULL, 10, "x", 0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuLinkAddFile_v2(link, CU_JIT_INPUT_PTX, "/nonexistent/x.ptx", 0, NULL, NULL),
                     CUDA_ERROR_FILE_NOT_FOUND);
    /* Nothing added yet: nothing to link. */
    void *image;
    size_t size;
    assert_int_equal(cuLinkComplete(link, &image, &size), CUDA_ERROR_INVALID_VALUE);
    /* Two PTX inputs: refused (one PTX module per image), saying why. */
    assert_int_equal(cuLinkAddData_v2(link, CU_JIT_INPUT_PTX, (void *)scale_ptx, sizeof(scale_ptx), "a", 0, NULL, NULL),
                     CUDA_SUCCESS);
    assert_int_equal(cuLinkAddData_v2(link, CU_JIT_INPUT_PTX, (void *)scale_ptx, sizeof(scale_ptx), "b", 0, NULL, NULL),
                     CUDA_SUCCESS);
    log[0] = '\0';
    assert_int_equal(cuLinkComplete(link, &image, &size), CUDA_ERROR_NOT_SUPPORTED);
    assert_non_null(strstr(log, "2 PTX inputs"));
    assert_int_equal(cuLinkDestroy(link), CUDA_SUCCESS);
    /* A handle that is no link state (a destroyed one is undefined
     * behaviour, on the real driver as here). */
    static uint64_t not_a_link[32];
    assert_int_equal(cuLinkDestroy((CUlinkState)(void *)not_a_link), CUDA_ERROR_INVALID_HANDLE);
}

static void test_link_add_file(void **state)
{
    (void)state;
    char path[] = "/tmp/simcuda-link-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *file = fdopen(fd, "w");
    fputs(scale_ptx, file);
    fclose(file);
    CUlinkState link;
    void *image;
    size_t size;
    CUmodule module;
    CUfunction fn;
    assert_int_equal(cuLinkCreate_v2(0, NULL, NULL, &link), CUDA_SUCCESS);
    assert_int_equal(cuLinkAddFile_v2(link, CU_JIT_INPUT_PTX, path, 0, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuLinkComplete(link, &image, &size), CUDA_SUCCESS);
    assert_int_equal(cuModuleLoadData(&module, image), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&fn, module, "scale"), CUDA_SUCCESS);
    assert_int_equal(cuModuleUnload(module), CUDA_SUCCESS);
    assert_int_equal(cuLinkDestroy(link), CUDA_SUCCESS);
    remove(path);
}

static void test_kernel_get_library(void **state)
{
    (void)state;
    CUlibrary library, found = NULL;
    CUkernel kernel;
    assert_int_equal(cuLibraryLoadData(&library, scale_ptx, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    assert_int_equal(cuLibraryGetKernel(&kernel, library, "scale"), CUDA_SUCCESS);
    assert_int_equal(cuKernelGetLibrary(&found, kernel), CUDA_SUCCESS);
    assert_ptr_equal(found, library);
    assert_int_equal(cuKernelGetLibrary(NULL, kernel), CUDA_ERROR_INVALID_VALUE);
    /* A built-in kernel, registered by name, belongs to no library. */
    CUkernel builtin;
    assert_int_equal(cuLibraryGetKernel(&builtin, library, "sim_fill_u32"), CUDA_SUCCESS);
    assert_int_equal(cuKernelGetLibrary(&found, builtin), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuLibraryUnload(library), CUDA_SUCCESS);
}

static void test_tensor_map_encode_tiled(void **state)
{
    (void)state;
    CUdeviceptr base;
    assert_int_equal(cuMemAlloc_v2(&base, 1 << 20), CUDA_SUCCESS);
    static CUtensorMap map __attribute__((aligned(64)));
    cuuint64_t dims[2] = {256, 256}, strides[1] = {256 * 4};
    cuuint32_t box[2] = {32, 32}, element_strides[2] = {1, 1};
#define ENCODE(m, type, rank, addr, d, s, b, e, swz)                                                              \
    cuTensorMapEncodeTiled((m), (type), (rank), (void *)(uintptr_t)(addr), (d), (s), (b), (e),                   \
                           CU_TENSOR_MAP_INTERLEAVE_NONE, (swz), CU_TENSOR_MAP_L2_PROMOTION_NONE,                \
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    assert_int_equal(ENCODE(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box, element_strides,
                            CU_TENSOR_MAP_SWIZZLE_128B),
                     CUDA_SUCCESS);
    /* Misaligned map or address, stride not a multiple of 16, box over 256,
     * inner box wider than the swizzle span, rank 0 and 6. */
    CUtensorMap *misaligned = (CUtensorMap *)((char *)&map + 8);
    assert_int_equal(ENCODE(misaligned, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box,
                            element_strides, CU_TENSOR_MAP_SWIZZLE_NONE),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(ENCODE(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base + 4, dims, strides, box, element_strides,
                            CU_TENSOR_MAP_SWIZZLE_NONE),
                     CUDA_ERROR_INVALID_VALUE);
    cuuint64_t odd_strides[1] = {256 * 4 + 4};
    assert_int_equal(ENCODE(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, odd_strides, box, element_strides,
                            CU_TENSOR_MAP_SWIZZLE_NONE),
                     CUDA_ERROR_INVALID_VALUE);
    cuuint32_t big_box[2] = {512, 32};
    assert_int_equal(ENCODE(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, big_box,
                            element_strides, CU_TENSOR_MAP_SWIZZLE_NONE),
                     CUDA_ERROR_INVALID_VALUE);
    cuuint32_t wide_box[2] = {64, 32}; /* 256 bytes > the 128-byte swizzle */
    assert_int_equal(ENCODE(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, wide_box,
                            element_strides, CU_TENSOR_MAP_SWIZZLE_128B),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(ENCODE(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 0, base, dims, strides, box, element_strides,
                            CU_TENSOR_MAP_SWIZZLE_NONE),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(ENCODE(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 6, base, dims, strides, box, element_strides,
                            CU_TENSOR_MAP_SWIZZLE_NONE),
                     CUDA_ERROR_INVALID_VALUE);
#undef ENCODE
    assert_int_equal(cuMemFree_v2(base), CUDA_SUCCESS);
}

static void test_prefetch_managed_only(void **state)
{
    (void)state;
    CUdeviceptr managed, plain;
    CUstream stream;
    assert_int_equal(cuMemAllocManaged(&managed, 1 << 16, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&plain, 1 << 16), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8_v2(managed, 0x5a, 1 << 16), CUDA_SUCCESS);
    assert_int_equal(cuMemPrefetchAsync(managed, 1 << 16, 0, stream), CUDA_SUCCESS);
    assert_int_equal(cuMemPrefetchAsync(managed, 1 << 16, CU_DEVICE_CPU, stream), CUDA_SUCCESS);
    CUmemLocation device0 = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    CUmemLocation host = {CU_MEM_LOCATION_TYPE_HOST, 0};
    assert_int_equal(cuMemPrefetchAsync_v2(managed, 4096, device0, 0, stream), CUDA_SUCCESS);
    assert_int_equal(cuMemPrefetchAsync_v2(managed, 4096, host, 0, stream), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    /* The bytes stay where they are: the device shares the host's pages. */
    unsigned char *bytes = (unsigned char *)(uintptr_t)managed;
    assert_int_equal(bytes[0], 0x5a);
    assert_int_equal(bytes[(1 << 16) - 1], 0x5a);
    /* Not managed, past its end, a device that does not exist, flags. */
    assert_int_equal(cuMemPrefetchAsync(plain, 4096, 0, stream), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemPrefetchAsync(managed, (1 << 16) + 1, 0, stream), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemPrefetchAsync(managed, 4096, 7, stream), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(cuMemPrefetchAsync_v2(managed, 4096, device0, 1, stream), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamDestroy_v2(stream), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(managed), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(plain), CUDA_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linked_ptx_runs),       cmocka_unit_test(test_link_refusals),
        cmocka_unit_test(test_link_add_file),         cmocka_unit_test(test_kernel_get_library),
        cmocka_unit_test(test_tensor_map_encode_tiled), cmocka_unit_test(test_prefetch_managed_only),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

/* test_sim_procaddr.c: simcuda's cuGetProcAddress resolves by request name,
 * requested version and stream flags, reports not-found and
 * version-insufficient statuses, and works before cuInit.
 */
#include <cuda.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

/* Function pointers compared as data: POSIX makes the conversion exact. */
#define FN(symbol) (__extension__(void *) & symbol)

static void *resolve(const char *name, int version, cuuint64_t flags, CUresult expected,
                     CUdriverProcAddressQueryResult expected_status)
{
    void *pfn = (void *)1;
    CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)99;
    assert_int_equal(cuGetProcAddress_v2(name, &pfn, version, flags, &status), expected);
    assert_int_equal(status, expected_status);
    return pfn;
}

static void test_resolves_before_init_and_itself(void **state)
{
    (void)state;
    /* Nothing has called cuInit: libcudart resolves everything first. */
    assert_ptr_equal(resolve("cuInit", 2000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS), FN(cuInit));
    assert_ptr_equal(resolve("cuGetProcAddress", 11030, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuGetProcAddress));
    assert_ptr_equal(resolve("cuGetProcAddress", 12000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuGetProcAddress_v2));
    void *pfn = NULL;
    assert_int_equal(cuGetProcAddress("cuMemAlloc", &pfn, 3020, 0), CUDA_SUCCESS);
    assert_ptr_equal(pfn, FN(cuMemAlloc_v2));
}

static void test_picks_highest_version_not_above_request(void **state)
{
    (void)state;
    assert_ptr_equal(resolve("cuCtxSynchronize", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuCtxSynchronize_v2));
    assert_ptr_equal(resolve("cuCtxSynchronize", 12090, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuCtxSynchronize));
    assert_ptr_equal(resolve("cuCtxCreate", 3020, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS), FN(cuCtxCreate_v2));
    assert_ptr_equal(resolve("cuCtxCreate", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS), FN(cuCtxCreate_v4));
    assert_ptr_equal(resolve("cuDeviceGetUuid", 9020, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuDeviceGetUuid));
    assert_ptr_equal(resolve("cuDeviceGetUuid", 11040, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuDeviceGetUuid_v2));
    assert_ptr_equal(resolve("cuMemHostRegister", 6050, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuMemHostRegister_v2));
    assert_ptr_equal(resolve("cuDevicePrimaryCtxRelease", 7000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuDevicePrimaryCtxRelease));
    assert_ptr_equal(resolve("cuDevicePrimaryCtxRelease", 11000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuDevicePrimaryCtxRelease_v2));
}

/* The graph and stream-memory entry points added for issue 14, at the
 * versions cudaTypedefs.h gives them. */
static void test_graph_and_memop_entry_points_resolve_at_their_versions(void **state)
{
    (void)state;
    assert_ptr_equal(resolve("cuGraphAddNode", 12020, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS), FN(cuGraphAddNode));
    assert_ptr_equal(resolve("cuGraphAddNode", 12030, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuGraphAddNode_v2));
    assert_null(resolve("cuGraphConditionalHandleCreate", 12020, 0, CUDA_ERROR_NOT_FOUND,
                        CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT));
    assert_ptr_equal(resolve("cuGraphConditionalHandleCreate", 12030, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuGraphConditionalHandleCreate));
    assert_ptr_equal(resolve("cuGraphExecMemcpyNodeSetParams", 10020, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuGraphExecMemcpyNodeSetParams));
    assert_ptr_equal(resolve("cuGraphExecMemsetNodeSetParams", 10020, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuGraphExecMemsetNodeSetParams));
    assert_ptr_equal(resolve("cuGraphExecChildGraphNodeSetParams", 11010, 0, CUDA_SUCCESS,
                             CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuGraphExecChildGraphNodeSetParams));
    assert_ptr_equal(resolve("cuGraphMemcpyNodeGetParams", 10000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuGraphMemcpyNodeGetParams));
    assert_ptr_equal(resolve("cuGraphMemsetNodeGetParams", 10000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuGraphMemsetNodeGetParams));
    assert_ptr_equal(resolve("cuGraphBatchMemOpNodeGetParams", 11070, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuGraphBatchMemOpNodeGetParams));
    assert_ptr_equal(resolve("cuStreamWaitValue32", 11070, 2, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuStreamWaitValue32_v2_ptsz));
    assert_ptr_equal(resolve("cuMemRetainAllocationHandle", 11000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuMemRetainAllocationHandle));
}

static void test_per_thread_flag_selects_ptsz_variant(void **state)
{
    (void)state;
    assert_ptr_equal(resolve("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CUDA_SUCCESS,
                             CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuMemAllocAsync_ptsz));
    assert_ptr_equal(resolve("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, CUDA_SUCCESS,
                             CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuMemAllocAsync));
    assert_ptr_equal(resolve("cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_DEFAULT, CUDA_SUCCESS,
                             CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuMemFreeAsync));
    /* No per-thread form: the plain one is returned. */
    assert_ptr_equal(resolve("cuMemAlloc", 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CUDA_SUCCESS,
                             CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuMemAlloc_v2));
}

static void test_unknown_and_too_old_requests_are_not_found(void **state)
{
    (void)state;
    assert_null(resolve("cuNoSuchFunction", 13000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND));
    assert_null(resolve("", 0, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND));
    /* Exported symbol names are not request names. */
    assert_null(resolve("cuMemAlloc_v2", 13000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND));
    assert_null(
        resolve("cuMemAlloc", 3010, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT));
    assert_null(
        resolve("cuMemCreate", 10010, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT));
    void *pfn = NULL;
    assert_int_equal(cuGetProcAddress_v2(NULL, &pfn, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGetProcAddress_v2("cuInit", NULL, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    /* A status pointer is optional. */
    assert_int_equal(cuGetProcAddress_v2("cuInit", &pfn, 13000, 0, NULL), CUDA_SUCCESS);
    assert_int_equal(cuGetProcAddress("cuNoSuchFunction", &pfn, 13000, 0), CUDA_ERROR_NOT_FOUND);
    assert_null(pfn);
}

static void test_cudart_startup_requests_of_implemented_functions_resolve(void **state)
{
    (void)state;
    /* A sample of what libcudart 13 asks at start-up, with its versions. */
    static const struct {
        const char *name;
        int version;
        cuuint64_t flags;
    } requests[] = {
        {"cuInit", 2000, 0},          {"cuDeviceGet", 2000, 0},          {"cuDeviceTotalMem", 3020, 0},
        {"cuDriverGetVersion", 2020, 0}, {"cuDeviceGetPCIBusId", 4010, 0}, {"cuDevicePrimaryCtxSetFlags", 11000, 0},
        {"cuCtxGetDevice", 13000, 0}, {"cuCtxPopCurrent", 4000, 0},      {"cuMemGetInfo", 3020, 0},
        {"cuMemFreeHost", 2000, 0},   {"cuMemHostGetFlags", 2030, 0},    {"cuPointerGetAttributes", 7000, 0},
        {"cuMemAllocFromPoolAsync", 11020, 2}, {"cuGetErrorName", 6000, 0}, {"cuIpcGetMemHandle", 4010, 0},
    };
    for (size_t i = 0; i < sizeof requests / sizeof *requests; i++) {
        void *pfn = NULL;
        CUdriverProcAddressQueryResult status;
        CUresult result = cuGetProcAddress_v2(requests[i].name, &pfn, requests[i].version, requests[i].flags, &status);
        if (result != CUDA_SUCCESS)
            fprintf(stderr, "unresolved: %s at %d\n", requests[i].name, requests[i].version);
        assert_int_equal(result, CUDA_SUCCESS);
        assert_non_null(pfn);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolves_before_init_and_itself),
        cmocka_unit_test(test_picks_highest_version_not_above_request),
        cmocka_unit_test(test_per_thread_flag_selects_ptsz_variant),
        cmocka_unit_test(test_graph_and_memop_entry_points_resolve_at_their_versions),
        cmocka_unit_test(test_unknown_and_too_old_requests_are_not_found),
        cmocka_unit_test(test_cudart_startup_requests_of_implemented_functions_resolve),
    };
    return cmocka_run_group_tests_name("simcuda cuGetProcAddress", tests, NULL, NULL);
}

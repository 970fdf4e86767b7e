/* test_sim_devices.c: simcuda's devices, versions, error strings, primary
 * and ordinary contexts and the current-context stack.
 *
 * Runs with SIMCUDA_DEVICES=2 and SIMCUDA_DEVICE_MEM=1.5G, set by main()
 * before the first driver call.
 */
#include <cuda.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_init_reports_driver_version_of_header(void **state)
{
    (void)state;
    int version = 0;
    assert_int_equal(cuDriverGetVersion(&version), CUDA_SUCCESS);
    assert_int_equal(version, CUDA_VERSION);
    assert_int_equal(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuInit(0), CUDA_SUCCESS);
    assert_int_equal(cuInit(0), CUDA_SUCCESS);
}

static void test_devices_follow_environment(void **state)
{
    (void)state;
    int count = 0;
    assert_int_equal(cuDeviceGetCount(&count), CUDA_SUCCESS);
    assert_int_equal(count, 2);
    CUdevice dev;
    assert_int_equal(cuDeviceGet(&dev, 1), CUDA_SUCCESS);
    assert_int_equal(dev, 1);
    assert_int_equal(cuDeviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE);
    char name[64];
    assert_int_equal(cuDeviceGetName(name, sizeof name, 1), CUDA_SUCCESS);
    assert_string_equal(name, "simcuda device 1");
    size_t total = 0;
    assert_int_equal(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    assert_int_equal(total, (size_t)3 << 29); /* 1.5G */
}

static void test_device_attributes_look_like_h100(void **state)
{
    (void)state;
    int value = -1;
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), CUDA_SUCCESS);
    assert_int_equal(value, 9);
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0), CUDA_SUCCESS);
    assert_int_equal(value, 0);
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0), CUDA_SUCCESS);
    assert_int_equal(value, 1);
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1),
                     CUDA_SUCCESS);
    assert_int_equal(value, 1);
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0), CUDA_SUCCESS);
    assert_int_equal(value, 1);
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), CUDA_SUCCESS);
    assert_int_equal(value, 132);
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 5), CUDA_ERROR_INVALID_DEVICE);
}

static void test_uuid_and_pci_bus_id_identify_each_device(void **state)
{
    (void)state;
    CUuuid a, b, a_v1;
    assert_int_equal(cuDeviceGetUuid_v2(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGetUuid_v2(&b, 1), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGetUuid(&a_v1, 0), CUDA_SUCCESS);
    assert_memory_equal(a.bytes, a_v1.bytes, sizeof a.bytes);
    assert_memory_not_equal(a.bytes, b.bytes, sizeof a.bytes);
    char bus[32];
    assert_int_equal(cuDeviceGetPCIBusId(bus, sizeof bus, 1), CUDA_SUCCESS);
    CUdevice dev = -1;
    assert_int_equal(cuDeviceGetByPCIBusId(&dev, bus), CUDA_SUCCESS);
    assert_int_equal(dev, 1);
}

static void test_error_name_and_string_cover_codes(void **state)
{
    (void)state;
    const char *text = NULL;
    assert_int_equal(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &text), CUDA_SUCCESS);
    assert_string_equal(text, "CUDA_ERROR_OUT_OF_MEMORY");
    assert_int_equal(cuGetErrorName(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, &text), CUDA_SUCCESS);
    assert_string_equal(text, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
    assert_int_equal(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &text), CUDA_SUCCESS);
    assert_non_null(text);
    assert_true(strlen(text) > 10);
    assert_int_equal(cuGetErrorString((CUresult)123456, &text), CUDA_ERROR_INVALID_VALUE);
    assert_null(text);
}

static void test_primary_context_is_shared_and_counted(void **state)
{
    (void)state;
    unsigned flags = 99;
    int active = -1;
    assert_int_equal(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    assert_int_equal(active, 0);
    assert_int_equal(cuDevicePrimaryCtxSetFlags_v2(0, CU_CTX_SCHED_BLOCKING_SYNC), CUDA_SUCCESS);
    CUcontext first, second;
    assert_int_equal(cuDevicePrimaryCtxRetain(&first, 0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRetain(&second, 0), CUDA_SUCCESS);
    assert_ptr_equal(first, second);
    assert_int_equal(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    assert_int_equal(active, 1);
    assert_int_equal(flags, CU_CTX_SCHED_BLOCKING_SYNC);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    assert_int_equal(active, 0);
    /* The primary context cannot be destroyed like an ordinary one. */
    assert_int_equal(cuCtxDestroy_v2(first), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    assert_int_equal(flags, 0);
}

static void test_context_stack_pushes_and_pops_in_order(void **state)
{
    (void)state;
    CUcontext current = (CUcontext)1;
    assert_int_equal(cuCtxGetCurrent(&current), CUDA_SUCCESS);
    assert_null(current);
    CUdevice dev;
    assert_int_equal(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);

    CUcontext a, b, popped;
    assert_int_equal(cuCtxCreate_v4(&a, NULL, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetCurrent(&current), CUDA_SUCCESS);
    assert_ptr_equal(current, a);
    assert_int_equal(cuCtxCreate_v2(&b, 0, 1), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    assert_int_equal(dev, 1);
    assert_int_equal(cuCtxGetDevice_v2(&dev, a), CUDA_SUCCESS);
    assert_int_equal(dev, 0);

    assert_int_equal(cuCtxPopCurrent_v2(&popped), CUDA_SUCCESS);
    assert_ptr_equal(popped, b);
    assert_int_equal(cuCtxGetCurrent(&current), CUDA_SUCCESS);
    assert_ptr_equal(current, a);
    assert_int_equal(cuCtxPushCurrent_v2(b), CUDA_SUCCESS);
    assert_int_equal(cuCtxPushCurrent_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    assert_int_equal(dev, 0);

    /* SetCurrent replaces the top only. */
    assert_int_equal(cuCtxSetCurrent(b), CUDA_SUCCESS);
    assert_int_equal(cuCtxPopCurrent_v2(&popped), CUDA_SUCCESS);
    assert_ptr_equal(popped, b);
    assert_int_equal(cuCtxPopCurrent_v2(&popped), CUDA_SUCCESS);
    assert_ptr_equal(popped, b);
    assert_int_equal(cuCtxPopCurrent_v2(&popped), CUDA_SUCCESS);
    assert_ptr_equal(popped, a);
    assert_int_equal(cuCtxPopCurrent_v2(&popped), CUDA_ERROR_INVALID_CONTEXT);

    assert_int_equal(cuCtxPushCurrent_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize_v2(b), CUDA_SUCCESS);
    assert_int_equal(cuCtxDestroy_v2(a), CUDA_SUCCESS);
    /* Destroying the current context pops it. */
    assert_int_equal(cuCtxGetCurrent(&current), CUDA_SUCCESS);
    assert_null(current);
    assert_int_equal(cuCtxPushCurrent_v2(a), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxDestroy_v2(a), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxDestroy_v2(b), CUDA_SUCCESS);
}

/* Ids are unique for the life of the process: a context created at the
 * address of a destroyed one still gets a new id. */
static void test_context_id_is_unique_and_never_reused(void **state)
{
    (void)state;
    unsigned long long id_a = 0, id_b = 0, id_current = 0;
    assert_int_equal(cuCtxGetId(NULL, &id_a), CUDA_ERROR_INVALID_CONTEXT);
    CUcontext a, b;
    assert_int_equal(cuCtxCreate_v2(&a, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetId(a, &id_a), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetId(NULL, &id_current), CUDA_SUCCESS);
    assert_true(id_current == id_a);
    assert_int_equal(cuCtxGetId(a, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuCtxDestroy_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetId(a, &id_b), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxCreate_v2(&b, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetId(b, &id_b), CUDA_SUCCESS);
    assert_true(id_b != id_a);
    assert_int_equal(cuCtxDestroy_v2(b), CUDA_SUCCESS);
}

/* The private tables cuBLASLt's static runtime reads for every GEMM
 * candidate: the tools-TLS table's slot 2 gives the calling thread's
 * current context, the context table's slot 4 its id. */
static void test_export_tables_give_current_context_and_its_id(void **state)
{
    (void)state;
    static const CUuuid tools_tls = {{0x42, (char)0xd8, 0x5a, (char)0x81, 0x23, (char)0xf6, (char)0xcb, 0x47,
                                      (char)0x82, (char)0x98, (char)0xf6, (char)0xe7, (char)0x8a, 0x3a,
                                      (char)0xec, (char)0xdc}};
    static const CUuuid context = {{0x21, 0x31, (char)0x8c, 0x60, (char)0x97, 0x14, 0x32, 0x48, (char)0x8c,
                                    (char)0xa6, 0x41, (char)0xff, 0x73, 0x24, (char)0xc8, (char)0xf2}};
    const void **tls_table = NULL, **ctx_table = NULL;
    assert_int_equal(cuGetExportTable((const void **)&tls_table, &tools_tls), CUDA_SUCCESS);
    assert_int_equal(cuGetExportTable((const void **)&ctx_table, &context), CUDA_SUCCESS);
    assert_true((uintptr_t)tls_table[0] >= 3 * sizeof(void *));
    assert_true((uintptr_t)ctx_table[0] >= 5 * sizeof(void *));
    CUresult (*current)(CUcontext *) = __extension__(CUresult(*)(CUcontext *))tls_table[2];
    CUresult (*ctx_id)(CUcontext, unsigned long long *) =
        __extension__(CUresult(*)(CUcontext, unsigned long long *))ctx_table[4];

    CUcontext got = (CUcontext)1;
    assert_int_equal(current(&got), CUDA_SUCCESS);
    assert_null(got);
    assert_int_equal(current(NULL), CUDA_ERROR_INVALID_VALUE);
    unsigned long long id = 0, expected = 0;
    assert_int_equal(ctx_id(NULL, &id), CUDA_ERROR_INVALID_CONTEXT);

    CUcontext ctx;
    assert_int_equal(cuCtxCreate_v2(&ctx, 0, 1), CUDA_SUCCESS);
    assert_int_equal(current(&got), CUDA_SUCCESS);
    assert_ptr_equal(got, ctx);
    assert_int_equal(ctx_id(got, &id), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetId(ctx, &expected), CUDA_SUCCESS);
    assert_true(id == expected);
    assert_int_equal(cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
}

static void test_context_create_rejects_bad_arguments(void **state)
{
    (void)state;
    CUcontext ctx;
    assert_int_equal(cuCtxCreate_v4(&ctx, NULL, 0, 7), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(cuCtxCreate_v4(&ctx, NULL, 0x10000, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuCtxCreate_v4(NULL, NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CUexecAffinityParam affinity = {0};
    CUctxCreateParams params = {.execAffinityParams = &affinity, .numExecAffinityParams = 1};
    assert_int_equal(cuCtxCreate_v4(&ctx, &params, 0, 0), CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY);
}

int main(void)
{
    setenv("SIMCUDA_DEVICES", "2", 1);
    setenv("SIMCUDA_DEVICE_MEM", "1.5G", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_reports_driver_version_of_header),
        cmocka_unit_test(test_devices_follow_environment),
        cmocka_unit_test(test_device_attributes_look_like_h100),
        cmocka_unit_test(test_uuid_and_pci_bus_id_identify_each_device),
        cmocka_unit_test(test_error_name_and_string_cover_codes),
        cmocka_unit_test(test_primary_context_is_shared_and_counted),
        cmocka_unit_test(test_context_stack_pushes_and_pops_in_order),
        cmocka_unit_test(test_context_id_is_unique_and_never_reused),
        cmocka_unit_test(test_export_tables_give_current_context_and_its_id),
        cmocka_unit_test(test_context_create_rejects_bad_arguments),
    };
    return cmocka_run_group_tests_name("simcuda devices and contexts", tests, NULL, NULL);
}

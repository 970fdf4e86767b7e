/* test_sim_kernel.c: simcuda's modules, libraries and launches: every
 * built-in kernel's result, the `kernelParams` and packed `extra` forms, a
 * by-value struct parameter, a device-side pointer table, a CUkernel used
 * as a CUfunction, parameter layouts, kernels registered through simcuda.h
 * and arguments copied at launch.
 */
#include <cuda.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "simcuda.h"

static CUcontext ctx;
static CUmodule module;
static CUlibrary library;
static const char image[] = "\x7f" "ELF any bytes: the simulator does not parse images";

static int setup(void **state)
{
    (void)state;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoadData(&module, image) != CUDA_SUCCESS ||
        cuLibraryLoadData(&library, image, NULL, NULL, 0, NULL, NULL, 0) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static CUfunction get_function(const char *name)
{
    CUfunction f = NULL;
    assert_int_equal(cuModuleGetFunction(&f, module, name), CUDA_SUCCESS);
    return f;
}

static CUdeviceptr upload(const void *host, size_t bytes)
{
    CUdeviceptr d;
    assert_int_equal(cuMemAlloc_v2(&d, bytes), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoD_v2(d, host, bytes), CUDA_SUCCESS);
    return d;
}

static void launch(CUfunction f, void **params, void **extra)
{
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, extra), CUDA_SUCCESS);
}

static uint64_t checksum(const uint32_t *v, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (uint64_t)v[i] * (i + 1);
    return sum;
}

static void test_fill_and_checksum_builtins_compute_documented_values(void **state)
{
    (void)state;
    enum { N = 10000 };
    CUdeviceptr data, out;
    assert_int_equal(cuMemAlloc_v2(&data, N * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&out, 8), CUDA_SUCCESS);
    uint64_t n = N;
    uint32_t seed = 0x5eed;
    void *fill_params[] = {&data, &n, &seed};
    launch(get_function("sim_fill_u32"), fill_params, NULL);
    void *sum_params[] = {&data, &n, &out};
    launch(get_function("sim_checksum_u32"), sum_params, NULL);

    uint32_t *host = malloc(N * 4);
    uint64_t sum = 0;
    assert_int_equal(cuMemcpyDtoH_v2(host, data, N * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(&sum, out, 8), CUDA_SUCCESS);
    for (uint64_t i = 0; i < N; i++)
        assert_int_equal(host[i], seed ^ (uint32_t)(i * 2654435761u));
    assert_int_equal(sum, checksum(host, N));
    free(host);
    cuMemFree_v2(data);
    cuMemFree_v2(out);
}

static void test_axpy_builtin_scales_and_adds(void **state)
{
    (void)state;
    float x[64], y[64];
    for (int i = 0; i < 64; i++) {
        x[i] = (float)i;
        y[i] = 1.0f;
    }
    CUdeviceptr dx = upload(x, sizeof(x)), dy = upload(y, sizeof(y));
    float a = 2.5f;
    uint64_t n = 64;
    void *params[] = {&a, &dx, &dy, &n};
    launch(get_function("sim_axpy_f32"), params, NULL);
    assert_int_equal(cuMemcpyDtoH_v2(y, dy, sizeof(y)), CUDA_SUCCESS);
    for (int i = 0; i < 64; i++)
        assert_true(y[i] == 2.5f * (float)i + 1.0f);
    cuMemFree_v2(dx);
    cuMemFree_v2(dy);
}

static void test_copy_builtin_via_extra_buffer(void **state)
{
    (void)state;
    char src[100], dst[100] = {0};
    for (int i = 0; i < 100; i++)
        src[i] = (char)(i * 3);
    CUdeviceptr dsrc = upload(src, 100), ddst = upload(dst, 100);
    /* The packed layout: dst@0, src@8, bytes@16. */
    struct { CUdeviceptr dst, src; uint64_t bytes; } packed = {ddst, dsrc, 100};
    size_t size = sizeof(packed);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    launch(get_function("sim_copy"), NULL, extra);
    assert_int_equal(cuMemcpyDtoH_v2(dst, ddst, 100), CUDA_SUCCESS);
    assert_memory_equal(dst, src, 100);

    /* A buffer smaller than the layout, or both forms at once, is refused. */
    size_t small = 16;
    void *short_extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &small,
                           CU_LAUNCH_PARAM_END};
    assert_int_equal(cuLaunchKernel(get_function("sim_copy"), 1, 1, 1, 1, 1, 1, 0, NULL, NULL, short_extra),
                     CUDA_ERROR_INVALID_VALUE);
    void *params[] = {&ddst, &dsrc, &packed.bytes};
    assert_int_equal(cuLaunchKernel(get_function("sim_copy"), 1, 1, 1, 1, 1, 1, 0, NULL, params, extra),
                     CUDA_ERROR_INVALID_VALUE);
    cuMemFree_v2(dsrc);
    cuMemFree_v2(ddst);
}

typedef struct add_args_s {
    uint64_t n;
    const uint32_t *a;
    uint32_t tag;
    const uint32_t *b;
    uint32_t *out;
} add_args_t;

static void test_struct_param_builtin_reads_pointers_inside_struct(void **state)
{
    (void)state;
    uint32_t a[50], b[50], out[50];
    for (uint32_t i = 0; i < 50; i++) {
        a[i] = i;
        b[i] = 1000 * i;
    }
    CUdeviceptr da = upload(a, sizeof(a)), db = upload(b, sizeof(b)), dout;
    assert_int_equal(cuMemAlloc_v2(&dout, sizeof(out)), CUDA_SUCCESS);
    add_args_t args = {50, (const uint32_t *)da, 7, (const uint32_t *)db, (uint32_t *)dout};
    void *params[] = {&args};
    CUfunction f = get_function("sim_add_u32_struct");
    launch(f, params, NULL);
    assert_int_equal(cuMemcpyDtoH_v2(out, dout, sizeof(out)), CUDA_SUCCESS);
    for (uint32_t i = 0; i < 50; i++)
        assert_int_equal(out[i], 1001 * i);

    size_t offset = 99, size = 0;
    assert_int_equal(cuFuncGetParamInfo(f, 0, &offset, &size), CUDA_SUCCESS);
    assert_int_equal(offset, 0);
    assert_int_equal(size, 40);
    assert_int_equal(cuFuncGetParamInfo(f, 1, &offset, &size), CUDA_ERROR_INVALID_VALUE);
    cuMemFree_v2(da);
    cuMemFree_v2(db);
    cuMemFree_v2(dout);
}

static void test_gather_builtin_follows_device_side_pointer_table(void **state)
{
    (void)state;
    enum { COUNT = 3, N = 257 };
    uint32_t host[COUNT][N];
    CUdeviceptr buffers[COUNT];
    for (int k = 0; k < COUNT; k++) {
        for (int i = 0; i < N; i++)
            host[k][i] = (uint32_t)(k * 100000 + i);
        buffers[k] = upload(host[k], sizeof(host[k]));
    }
    CUdeviceptr table = upload(buffers, sizeof(buffers)), out;
    assert_int_equal(cuMemAlloc_v2(&out, COUNT * 8), CUDA_SUCCESS);
    uint64_t count = COUNT, n = N;
    void *params[] = {&table, &count, &n, &out};
    launch(get_function("sim_gather_checksum"), params, NULL);
    uint64_t sums[COUNT];
    assert_int_equal(cuMemcpyDtoH_v2(sums, out, sizeof(sums)), CUDA_SUCCESS);
    for (int k = 0; k < COUNT; k++) {
        assert_int_equal(sums[k], checksum(host[k], N));
        cuMemFree_v2(buffers[k]);
    }
    cuMemFree_v2(table);
    cuMemFree_v2(out);
}

static void test_param_info_follows_c_abi_alignment(void **state)
{
    (void)state;
    CUkernel k;
    assert_int_equal(cuLibraryGetKernel(&k, library, "sim_axpy_f32"), CUDA_SUCCESS);
    const size_t offsets[] = {0, 8, 16, 24}, sizes[] = {4, 8, 8, 8};
    for (size_t i = 0; i < 4; i++) {
        size_t offset = 1, size = 1;
        assert_int_equal(cuKernelGetParamInfo(k, i, &offset, &size), CUDA_SUCCESS);
        assert_int_equal(offset, offsets[i]);
        assert_int_equal(size, sizes[i]);
    }
    size_t offset, size;
    assert_int_equal(cuKernelGetParamInfo(k, 4, &offset, &size), CUDA_ERROR_INVALID_VALUE);
    CUfunction f = get_function("sim_fill_u32");
    assert_int_equal(cuFuncGetParamInfo(f, 2, &offset, &size), CUDA_SUCCESS);
    assert_int_equal(offset, 16);
    assert_int_equal(size, 4);
}

static void test_unknown_kernel_name_is_not_found(void **state)
{
    (void)state;
    CUfunction f;
    CUkernel k;
    assert_int_equal(cuModuleGetFunction(&f, module, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(cuLibraryGetKernel(&k, library, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(cuModuleLoad((CUmodule *)&f, "/nonexistent/file.cubin"), CUDA_ERROR_FILE_NOT_FOUND);
}

/* cudart launches `<<<>>>` with a CUkernel cast to CUfunction. */
static void test_kernel_handle_launches_as_function(void **state)
{
    (void)state;
    CUkernel k;
    CUfunction f;
    assert_int_equal(cuLibraryGetKernel(&k, library, "sim_fill_u32"), CUDA_SUCCESS);
    assert_int_equal(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
    CUdeviceptr d;
    assert_int_equal(cuMemAlloc_v2(&d, 16 * 4), CUDA_SUCCESS);
    uint64_t n = 16;
    uint32_t seed = 77;
    void *params[] = {&d, &n, &seed};
    assert_int_equal(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
    uint32_t out[16];
    assert_int_equal(cuMemcpyDtoH_v2(out, d, sizeof(out)), CUDA_SUCCESS);
    for (uint64_t i = 0; i < 16; i++)
        assert_int_equal(out[i], 77u ^ (uint32_t)(i * 2654435761u));
    const char *name = NULL;
    assert_int_equal(cuFuncGetName(&name, f), CUDA_SUCCESS);
    assert_string_equal(name, "sim_fill_u32");
    cuMemFree_v2(d);
}

static void test_launch_ex_and_cooperative_run_on_given_stream(void **state)
{
    (void)state;
    CUstream s;
    CUdeviceptr d;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&d, 8 * 4), CUDA_SUCCESS);
    uint64_t n = 8;
    uint32_t seed = 1;
    void *params[] = {&d, &n, &seed};
    CUlaunchConfig config = {.gridDimX = 2, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64, .blockDimY = 1,
                             .blockDimZ = 1, .hStream = s};
    CUfunction f = get_function("sim_fill_u32");
    assert_int_equal(cuLaunchKernelEx(&config, f, params, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    uint32_t out[8];
    assert_int_equal(cuMemcpyDtoH_v2(out, d, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(out[5], 1u ^ (uint32_t)(5 * 2654435761u));
    seed = 2;
    assert_int_equal(cuLaunchCooperativeKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, s, params), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernelEx_ptsz(&config, f, params, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(out, d, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(out[5], 2u ^ (uint32_t)(5 * 2654435761u));
    assert_int_equal(cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, s, params, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuLaunchKernel((CUfunction)&config, 1, 1, 1, 1, 1, 1, 0, s, params, NULL),
                     CUDA_ERROR_INVALID_HANDLE);
    cuMemFree_v2(d);
    cuStreamDestroy_v2(s);
}

/* A registered kernel: char, double, pointer: natural alignment gives
 * offsets 0, 8, 16. Its body checks that the arguments are launch-time
 * copies by running after the caller has changed its variables. */
static void record_args(void **args, const simcuda_launch_t *launch, void *user)
{
    uint64_t *seen = *(uint64_t **)args[2];
    seen[0] = (uint64_t)*(unsigned char *)args[0];
    seen[1] = (uint64_t)(*(double *)args[1] * 10);
    seen[2] = launch->grid[0] * 1000u + launch->block[0];
    seen[3] = (uint64_t)(uintptr_t)user;
}

typedef struct gate_s {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool open;
} gate_t;

static void gate_pass(void *arg)
{
    gate_t *gate = arg;
    pthread_mutex_lock(&gate->lock);
    while (!gate->open)
        pthread_cond_wait(&gate->cond, &gate->lock);
    pthread_mutex_unlock(&gate->lock);
}

static void test_registered_kernel_gets_launch_time_argument_copies(void **state)
{
    (void)state;
    const size_t sizes[] = {1, 8, 8};
    simcuda_kernel_desc_t desc = {
        .name = "test_record_args", .param_count = 3, .param_sizes = sizes, .fn = record_args,
        .user = (void *)(uintptr_t)42, .cost_ns = 1000,
    };
    assert_int_equal(simcuda_register_kernel(&desc), 0);
    assert_int_equal(simcuda_register_kernel(&desc), -EEXIST);
    desc.name = NULL;
    assert_int_equal(simcuda_register_kernel(&desc), -EINVAL);

    CUfunction f = get_function("test_record_args");
    size_t offset, size;
    assert_int_equal(cuFuncGetParamInfo(f, 1, &offset, &size), CUDA_SUCCESS);
    assert_int_equal(offset, 8);

    CUstream s;
    CUdeviceptr seen;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&seen, 4 * 8), CUDA_SUCCESS);
    gate_t gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    assert_int_equal(cuLaunchHostFunc(s, gate_pass, &gate), CUDA_SUCCESS);
    unsigned char c = 5;
    double x = 2.5;
    void *params[] = {&c, &x, &seen};
    assert_int_equal(cuLaunchKernel(f, 3, 1, 1, 7, 1, 1, 0, s, params, NULL), CUDA_SUCCESS);
    c = 9; /* too late: the launch copied the arguments */
    x = 8.0;
    pthread_mutex_lock(&gate.lock);
    gate.open = true;
    pthread_cond_broadcast(&gate.cond);
    pthread_mutex_unlock(&gate.lock);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    uint64_t host[4];
    assert_int_equal(cuMemcpyDtoH_v2(host, seen, sizeof(host)), CUDA_SUCCESS);
    assert_int_equal(host[0], 5);
    assert_int_equal(host[1], 25);
    assert_int_equal(host[2], 3007);
    assert_int_equal(host[3], 42);
    cuMemFree_v2(seen);
    cuStreamDestroy_v2(s);
}

static void test_func_attributes_report_plausible_values(void **state)
{
    (void)state;
    int value = 0;
    CUfunction f = get_function("sim_copy");
    assert_int_equal(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f), CUDA_SUCCESS);
    assert_int_equal(value, 1024);
    assert_int_equal(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536), CUDA_SUCCESS);
    assert_int_equal(cuModuleUnload(module), CUDA_SUCCESS);
    assert_int_equal(cuModuleLoadDataEx(&module, image, 0, NULL, NULL), CUDA_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_and_checksum_builtins_compute_documented_values),
        cmocka_unit_test(test_axpy_builtin_scales_and_adds),
        cmocka_unit_test(test_copy_builtin_via_extra_buffer),
        cmocka_unit_test(test_struct_param_builtin_reads_pointers_inside_struct),
        cmocka_unit_test(test_gather_builtin_follows_device_side_pointer_table),
        cmocka_unit_test(test_param_info_follows_c_abi_alignment),
        cmocka_unit_test(test_unknown_kernel_name_is_not_found),
        cmocka_unit_test(test_kernel_handle_launches_as_function),
        cmocka_unit_test(test_launch_ex_and_cooperative_run_on_given_stream),
        cmocka_unit_test(test_registered_kernel_gets_launch_time_argument_copies),
        cmocka_unit_test(test_func_attributes_report_plausible_values),
    };
    return cmocka_run_group_tests_name("simcuda kernels", tests, setup, NULL);
}

/* test_sim_content_hash.c: simcuda's built-in `vramshim_content_hash`
 * against the host's `vs_content_hash`, over random data of lengths that
 * cover every tail, and its adding into the lanes (the real kernel's
 * atomic adds: the caller zeroes them first).
 */
#include <cuda.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "content_hash.h"

static CUcontext ctx;
static CUfunction kernel;
static const char image[] = "any image: the simulator finds kernels by name";

static int setup(void **state)
{
    (void)state;
    CUmodule module;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS
        || cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoadData(&module, image) != CUDA_SUCCESS
        || cuModuleGetFunction(&kernel, module, VS_CONTENT_HASH_KERNEL) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static void fill_random(unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (unsigned char)(seed >> 56);
    }
}

/* Launches the kernel over `bytes` at `data`, adding into `lanes`. */
static void launch_hash(CUdeviceptr data, uint64_t bytes, CUdeviceptr lanes)
{
    void *params[] = {&data, &bytes, &lanes};
    assert_int_equal(cuLaunchKernel(kernel, 4, 1, 1, 256, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
}

static vs_content_hash_t read_lanes(CUdeviceptr lanes)
{
    vs_content_hash_t h;
    assert_int_equal(cuMemcpyDtoH_v2(h.lane, lanes, sizeof h.lane), CUDA_SUCCESS);
    return h;
}

static void test_content_hash_kernel_matches_host_for_every_tail(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {0, 1, 7, 8, 9, 4095, (2u << 20) + 3};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        uint64_t bytes = sizes[s];
        unsigned char *host = malloc(bytes + 1);
        assert_non_null(host);
        fill_random(host, bytes, 1000 + s);
        CUdeviceptr data, lanes;
        assert_int_equal(cuMemAlloc_v2(&data, bytes + 1), CUDA_SUCCESS);
        assert_int_equal(cuMemAlloc_v2(&lanes, 16), CUDA_SUCCESS);
        if (bytes > 0)
            assert_int_equal(cuMemcpyHtoD_v2(data, host, bytes), CUDA_SUCCESS);
        /* A byte past the end that must not count. */
        assert_int_equal(cuMemsetD8_v2(data + bytes, 0xa5, 1), CUDA_SUCCESS);
        assert_int_equal(cuMemsetD32_v2(lanes, 0, 4), CUDA_SUCCESS);

        launch_hash(data, bytes, lanes);
        vs_content_hash_t device = vs_content_hash_final(read_lanes(lanes), bytes);
        vs_content_hash_t expected = vs_content_hash(host, bytes);
        if (!vs_content_hash_equal(device, expected))
            fail_msg("%llu bytes: kernel %016llx %016llx, host %016llx %016llx", (unsigned long long)bytes,
                     (unsigned long long)device.lane[0], (unsigned long long)device.lane[1],
                     (unsigned long long)expected.lane[0], (unsigned long long)expected.lane[1]);
        free(host);
        cuMemFree_v2(data);
        cuMemFree_v2(lanes);
    }
}

/* Two launches without zeroing in between add up, as atomic adds do. */
static void test_content_hash_kernel_adds_into_the_lanes(void **state)
{
    (void)state;
    enum { BYTES = 1000 };
    unsigned char host[BYTES];
    fill_random(host, BYTES, 7);
    CUdeviceptr data, lanes;
    assert_int_equal(cuMemAlloc_v2(&data, BYTES), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&lanes, 16), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoD_v2(data, host, BYTES), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(lanes, 0, 4), CUDA_SUCCESS);

    launch_hash(data, BYTES, lanes);
    launch_hash(data, BYTES, lanes);
    vs_content_hash_t once = {{0, 0}};
    vs_content_hash_update(&once, 0, host, BYTES);
    vs_content_hash_t twice = read_lanes(lanes);
    assert_int_equal(twice.lane[0], once.lane[0] * 2);
    assert_int_equal(twice.lane[1], once.lane[1] * 2);
    cuMemFree_v2(data);
    cuMemFree_v2(lanes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_hash_kernel_matches_host_for_every_tail),
        cmocka_unit_test(test_content_hash_kernel_adds_into_the_lanes),
    };
    return cmocka_run_group_tests_name("simcuda vramshim_content_hash", tests, setup, NULL);
}

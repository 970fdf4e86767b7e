/* test_sim_clock.c: simcuda's virtual clock (SIMCUDA_CLOCK=virtual), checked
 * to the nanosecond: copies at the configured bandwidths, one engine per
 * direction, kernels on the compute engine overlapping copies, event waits
 * and host waits, kernels of high-priority streams overtaking queued work,
 * and event timing in modeled milliseconds.
 *
 * Sets SIMCUDA_CLOCK=virtual, SIMCUDA_HOST_COSTS=off (these are the figures
 * of the model without host costs, which `off` must keep exactly),
 * SIMCUDA_DEVICE_MEM=2G and SIMCUDA_TIMELINE (a temporary file, checked by
 * the last test) itself (before cuInit) and keeps the default bandwidths:
 * 50 GB/s each way (50e9 bytes/s), 2000 GB/s on the device.
 */
#include <cuda.h>

#include <setjmp.h>
#include <stdio.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "simcuda.h"

#define GB 1000000000ull /* 1e9 bytes, as bandwidths count */
#define MS 1000000ull    /* ns */

static CUcontext ctx;
static CUmodule module;
static CUfunction fn_spin, fn_fill;
static CUstream s1, s2;
static CUdeviceptr dev_small;
static void *host_small;
#define SMALL 10000000ull /* 1e7 bytes: 200 us at 50 GB/s */

static int setup(void **state)
{
    (void)state;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoadData(&module, "image") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_spin, module, "sim_spin") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_fill, module, "sim_fill_u32") != CUDA_SUCCESS ||
        cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
        cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
        cuMemAlloc_v2(&dev_small, 2 * SMALL) != CUDA_SUCCESS ||
        cuMemAllocHost_v2(&host_small, 2 * SMALL) != CUDA_SUCCESS)
        return -1;
    return 0;
}

/* Settles all work and returns the host clock: the start of a scenario. */
static uint64_t quiesce(void)
{
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    return simcuda_clock_now_ns();
}

static void spin(CUstream s, uint64_t ns)
{
    void *params[] = {&ns};
    assert_int_equal(cuLaunchKernel(fn_spin, 1, 1, 1, 1, 1, 1, 0, s, params, NULL), CUDA_SUCCESS);
}

static void test_clock_is_virtual_when_configured(void **state)
{
    (void)state;
    assert_int_equal(simcuda_clock_is_virtual(), 1);
}

/* Two 1 GB (1e9 bytes) H2D copies back to back at 50 GB/s take 40 ms. */
static void test_two_1gb_h2d_copies_take_40ms(void **state)
{
    (void)state;
    void *host = malloc(GB);
    CUdeviceptr dev;
    assert_non_null(host);
    memset(host, 0x5a, GB);
    assert_int_equal(cuMemAlloc_v2(&dev, GB), CUDA_SUCCESS);
    CUevent start, end;
    assert_int_equal(cuEventCreate(&start, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&end, 0), CUDA_SUCCESS);
    uint64_t t0 = quiesce();
    assert_int_equal(cuEventRecord(start, s1), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev, host, GB, s1), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev, host, GB, s1), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(end, s1), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(end), CUDA_SUCCESS);
    float ms = 0;
    assert_int_equal(cuEventElapsedTime_v2(&ms, start, end), CUDA_SUCCESS);
    assert_true(ms == 40.0f);
    assert_int_equal(simcuda_clock_now_ns() - t0, 40 * MS);
    assert_int_equal(simcuda_clock_end_ns(), simcuda_clock_now_ns());
    unsigned char probe = 0;
    assert_int_equal(cuMemcpyDtoH_v2(&probe, dev + GB - 1, 1), CUDA_SUCCESS);
    assert_int_equal(probe, 0x5a);
    cuEventDestroy_v2(start);
    cuEventDestroy_v2(end);
    cuMemFree_v2(dev);
    free(host);
}

/* Copies in one direction share one engine even from different streams. */
static void test_same_direction_copies_serialize_across_streams(void **state)
{
    (void)state;
    uint64_t t0 = quiesce();
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small, host_small, SMALL, s1), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small + SMALL, host_small, SMALL, s2), CUDA_SUCCESS);
    assert_int_equal(quiesce() - t0, 400000);
}

static void test_h2d_and_d2h_copies_overlap(void **state)
{
    (void)state;
    uint64_t t0 = quiesce();
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small, host_small, SMALL, s1), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoHAsync_v2((char *)host_small + SMALL, dev_small + SMALL, SMALL, s2), CUDA_SUCCESS);
    assert_int_equal(quiesce() - t0, 200000);
}

/* An H2D copy overlapping a kernel takes the longer of the two. */
static void test_h2d_copy_overlapping_kernel_takes_the_max(void **state)
{
    (void)state;
    uint64_t t0 = quiesce();
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small, host_small, SMALL, s1), CUDA_SUCCESS);
    spin(s2, 300000);
    assert_int_equal(quiesce() - t0, 300000);

    t0 = quiesce();
    spin(s1, 50000);
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small, host_small, SMALL, s2), CUDA_SUCCESS);
    assert_int_equal(quiesce() - t0, 200000);

    /* On one stream they are ordered: the sum. */
    t0 = quiesce();
    spin(s1, 50000);
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small, host_small, SMALL, s1), CUDA_SUCCESS);
    assert_int_equal(quiesce() - t0, 250000);
}

/* Kernels share the compute engine; a waited event delays the waiter. */
static void test_event_wait_delays_consumer_to_producer_end(void **state)
{
    (void)state;
    CUevent produced;
    assert_int_equal(cuEventCreate(&produced, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    uint64_t t0 = quiesce();
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small, host_small, SMALL, s1), CUDA_SUCCESS); /* 200 us */
    assert_int_equal(cuEventRecord(produced, s1), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(s2, produced, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoHAsync_v2(host_small, dev_small, SMALL, s2), CUDA_SUCCESS); /* 200 us after */
    assert_int_equal(cuStreamSynchronize(s2), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, 400000);

    t0 = quiesce();
    spin(s1, 70000);
    spin(s2, 30000); /* same compute engine: after the first */
    assert_int_equal(quiesce() - t0, 100000);
    cuEventDestroy_v2(produced);
}

/* A kernel from a stream of a priority above the least starts when it is
 * ready, ahead of kernels queued from a default-priority stream; those keep
 * their times, and the engine's busy stretch ends its cost later, pushing the
 * stretch it reaches; copies ignore priorities; at the least priority it
 * queues as before. */
static void test_priority_kernel_overtakes_queued_work(void **state)
{
    (void)state;
    int least = 0, greatest = 0;
    assert_int_equal(cuCtxGetStreamPriorityRange(&least, &greatest), CUDA_SUCCESS);
    assert_true(greatest < least);
    CUstream urgent, plain;
    assert_int_equal(cuStreamCreateWithPriority(&urgent, CU_STREAM_NON_BLOCKING, greatest), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreateWithPriority(&plain, CU_STREAM_NON_BLOCKING, least), CUDA_SUCCESS);
    CUevent first_done, queued_done, urgent_done, urgent_start;
    assert_int_equal(cuEventCreate(&first_done, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&queued_done, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&urgent_done, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&urgent_start, 0), CUDA_SUCCESS);

    /* s1: 100 us, then 200 us queued; the urgent 10 us waits for the first
     * only: it runs at 100 us, before the queued one (which keeps 100-300),
     * and the next kernel on s1 starts at 310, not 300. */
    uint64_t t0 = quiesce();
    spin(s1, 100000);
    assert_int_equal(cuEventRecord(first_done, s1), CUDA_SUCCESS);
    spin(s1, 200000);
    assert_int_equal(cuEventRecord(queued_done, s1), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(urgent, first_done, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(urgent_start, urgent), CUDA_SUCCESS);
    spin(urgent, 10000);
    assert_int_equal(cuEventRecord(urgent_done, urgent), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(urgent_done), CUDA_SUCCESS);
    float ms = 0;
    assert_int_equal(cuEventElapsedTime_v2(&ms, urgent_start, urgent_done), CUDA_SUCCESS);
    assert_true(ms == 0.01f);
    assert_int_equal(cuEventElapsedTime_v2(&ms, first_done, urgent_done), CUDA_SUCCESS);
    assert_true(ms == 0.01f);
    assert_int_equal(cuEventElapsedTime_v2(&ms, first_done, queued_done), CUDA_SUCCESS);
    assert_true(ms == 0.2f);
    spin(s2, 50000);
    assert_int_equal(quiesce() - t0, 360000);

    /* The stretch pushed into the next one: 100 busy, 5 idle, 100 busy; an
     * urgent 20 us ready at 50 (after a 50 us copy out) ends the first
     * stretch at 120, which reaches the second: together they end at 220. */
    t0 = quiesce();
    spin(s1, 100000);
    CUevent gate;
    assert_int_equal(cuEventCreate(&gate, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small, host_small, SMALL / 40 * 21, s2), CUDA_SUCCESS); /* 105 us */
    assert_int_equal(cuEventRecord(gate, s2), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(s2, gate, 0), CUDA_SUCCESS);
    spin(s2, 100000); /* 105-205 */
    assert_int_equal(cuMemcpyDtoHAsync_v2((char *)host_small + SMALL, dev_small + SMALL, SMALL / 4, plain), CUDA_SUCCESS); /* 50 us, apart from the copy in */
    CUevent half;
    assert_int_equal(cuEventCreate(&half, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(half, plain), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(urgent, half, 0), CUDA_SUCCESS);
    spin(urgent, 20000);
    spin(plain, 1000); /* after everything: 220-221 */
    assert_int_equal(quiesce() - t0, 221000);

    /* Copies from the urgent stream queue behind other copies. */
    t0 = quiesce();
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small, host_small, SMALL, s1), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small + SMALL, host_small, SMALL, urgent), CUDA_SUCCESS);
    assert_int_equal(quiesce() - t0, 400000);

    /* At the least priority: behind the queued kernel. */
    t0 = quiesce();
    spin(s1, 100000);
    spin(plain, 10000);
    assert_int_equal(quiesce() - t0, 110000);

    cuEventDestroy_v2(half);
    cuEventDestroy_v2(gate);
    cuEventDestroy_v2(first_done);
    cuEventDestroy_v2(queued_done);
    cuEventDestroy_v2(urgent_done);
    cuEventDestroy_v2(urgent_start);
    cuStreamDestroy_v2(urgent);
    cuStreamDestroy_v2(plain);
}

static void test_elapsed_time_reports_modeled_milliseconds(void **state)
{
    (void)state;
    CUevent a, b;
    assert_int_equal(cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&b, 0), CUDA_SUCCESS);
    quiesce();
    assert_int_equal(cuEventRecord(a, s1), CUDA_SUCCESS);
    spin(s1, 5 * MS);
    /* Built-ins cost bytes touched at the device bandwidth: 4e6 bytes at
     * 2000 GB/s = 2 us. */
    CUdeviceptr d = dev_small;
    uint64_t n = 1000000;
    uint32_t seed = 1;
    void *params[] = {&d, &n, &seed};
    assert_int_equal(cuLaunchKernel(fn_fill, 1, 1, 1, 1, 1, 1, 0, s1, params, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(b, s1), CUDA_SUCCESS);
    float ms = 0;
    assert_int_equal(cuEventSynchronize(b), CUDA_SUCCESS);
    assert_int_equal(cuEventElapsedTime_v2(&ms, a, b), CUDA_SUCCESS);
    assert_float_equal(ms, 5.002f, 1e-6f);
    cuEventDestroy_v2(a);
    cuEventDestroy_v2(b);
}

/* Synchronous copies advance the host clock by their duration; work
 * submitted later cannot start before the host submitted it. */
static void test_sync_copy_advances_host_clock(void **state)
{
    (void)state;
    uint64_t t0 = quiesce();
    assert_int_equal(cuMemcpyHtoD_v2(dev_small, host_small, SMALL), CUDA_SUCCESS);
    uint64_t t1 = simcuda_clock_now_ns();
    assert_int_equal(t1 - t0, 200000);
    spin(s1, 1000);
    assert_int_equal(quiesce() - t1, 1000);
}

static char timeline_path[] = "/tmp/test_sim_clock_timeline.XXXXXX";

/* SIMCUDA_TIMELINE lists each operation with its engine, modeled start and
 * end, and what it was. */
static void test_timeline_lists_operations_with_modeled_times(void **state)
{
    (void)state;
    uint64_t t0 = quiesce();
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small, host_small, SMALL, s1), CUDA_SUCCESS);
    spin(s2, 50000);
    quiesce();
    FILE *f = fopen(timeline_path, "r");
    assert_non_null(f);
    char line[256], copy[256] = "", kernel[256] = "";
    assert_non_null(fgets(line, sizeof line, f));
    assert_true(strncmp(line, "# device engine start_ns end_ns host_ns what", 44) == 0);
    while (fgets(line, sizeof line, f) != NULL) {
        if (strstr(line, " h2d ") != NULL)
            strcpy(copy, line);
        if (strstr(line, " compute ") != NULL)
            strcpy(kernel, line);
    }
    fclose(f);
    char expect[256];
    snprintf(expect, sizeof expect, "0 h2d %llu %llu %llu copy\n", (unsigned long long)t0,
             (unsigned long long)(t0 + 200000), (unsigned long long)t0);
    assert_string_equal(copy, expect);
    snprintf(expect, sizeof expect, "0 compute %llu %llu %llu sim_spin\n", (unsigned long long)t0,
             (unsigned long long)(t0 + 50000), (unsigned long long)t0);
    assert_string_equal(kernel, expect);
}

int main(void)
{
    int fd = mkstemp(timeline_path);
    if (fd < 0)
        return 1;
    close(fd);
    setenv("SIMCUDA_TIMELINE", timeline_path, 1);
    setenv("SIMCUDA_CLOCK", "virtual", 1);
    /* The engines' model alone: the host is free (host costs are
     * test_sim_host_costs.c's), so every figure is the pre-host-cost one. */
    setenv("SIMCUDA_HOST_COSTS", "off", 1);
    setenv("SIMCUDA_DEVICE_MEM", "2G", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clock_is_virtual_when_configured),
        cmocka_unit_test(test_two_1gb_h2d_copies_take_40ms),
        cmocka_unit_test(test_same_direction_copies_serialize_across_streams),
        cmocka_unit_test(test_h2d_and_d2h_copies_overlap),
        cmocka_unit_test(test_h2d_copy_overlapping_kernel_takes_the_max),
        cmocka_unit_test(test_event_wait_delays_consumer_to_producer_end),
        cmocka_unit_test(test_priority_kernel_overtakes_queued_work),
        cmocka_unit_test(test_elapsed_time_reports_modeled_milliseconds),
        cmocka_unit_test(test_sync_copy_advances_host_clock),
        cmocka_unit_test(test_timeline_lists_operations_with_modeled_times),
    };
    int failed = cmocka_run_group_tests_name("simcuda virtual clock", tests, setup, NULL);
    unlink(timeline_path);
    return failed;
}

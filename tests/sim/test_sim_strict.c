/* test_sim_strict.c: the switches that make simcuda as strict as a real GPU
 * where the default simulation is kinder:
 *
 *   test_sim_strict lag        (SIMCUDA_LAG=100000) every piece of stream
 *                              work starts 100 ms after its submission, the
 *                              synchronous calls and event ordering still hold;
 *   test_sim_strict version    (SIMCUDA_DRIVER_VERSION=12020, with
 *                              tests/simcuda/driver_12020 first on
 *                              LD_LIBRARY_PATH) a CUDA 12.2 driver: no
 *                              parameter info, in cuGetProcAddress or dlsym;
 *   test_sim_strict novmm      (SIMCUDA_VMM=0) a device without virtual
 *                              memory management;
 *   test_sim_strict malformed  runs itself with malformed values and reads
 *                              the one line each gives.
 *
 * Each mode first checks that its variable is set as meson sets it, so a
 * test run without it fails instead of passing on the default driver.
 */
#include <cuda.h>

#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "simcuda.h"

#define LAG_US 100000ull
#define LAG_NS (LAG_US * 1000ull)

static CUcontext ctx;
static CUmodule module;
static CUfunction fn_fill, fn_copy;
static const char *self_path;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int setup(void **state)
{
    (void)state;
    static const char image[] = "any image";
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoadData(&module, image) != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_fill, module, "sim_fill_u32") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_copy, module, "sim_copy") != CUDA_SUCCESS)
        return -1;
    return 0;
}

static uint32_t fill_value(uint32_t seed, uint64_t i)
{
    return seed ^ (uint32_t)(i * 2654435761u);
}

static void launch_fill(CUstream stream, CUdeviceptr dst, uint64_t n, uint32_t seed)
{
    void *args[] = {&dst, &n, &seed};
    assert_int_equal(cuLaunchKernel(fn_fill, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL), CUDA_SUCCESS);
}

static void launch_copy(CUstream stream, CUdeviceptr dst, CUdeviceptr src, uint64_t bytes)
{
    void *args[] = {&dst, &src, &bytes};
    assert_int_equal(cuLaunchKernel(fn_copy, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL), CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------
 * SIMCUDA_LAG
 * ------------------------------------------------------------------------ */

static void record_time(void *arg)
{
    __atomic_store_n((uint64_t *)arg, now_ns(), __ATOMIC_SEQ_CST);
}

static void test_lag_is_configured(void **state)
{
    (void)state;
    const char *lag = getenv("SIMCUDA_LAG");
    assert_non_null(lag);
    assert_int_equal(strtoull(lag, NULL, 10), LAG_US);
}

/* Reads a word the simulated device may be writing right now: the test
 * looks while the work is pending, on purpose (that it has not run yet is
 * the point), so ThreadSanitizer is told not to count this read. */
__attribute__((no_sanitize("thread"))) static uint32_t peek32(const void *base, uint64_t index)
{
    return ((const volatile uint32_t *)base)[index];
}

/* A host function, a kernel, a memset, both copy engines and an event
 * record: none has started right after submission, each is done after a
 * stream synchronisation, and none started before the lag had passed. */
static void test_lag_delays_every_kind_of_work(void **state)
{
    (void)state;
    const uint64_t n = 1024;
    CUstream stream;
    CUdeviceptr dev, dev2;
    uint32_t *pinned;
    CUevent event;
    assert_int_equal(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&dev, n * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&dev2, n * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocHost_v2((void **)&pinned, n * 4), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&event, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    memset((void *)(uintptr_t)dev, 0, n * 4); /* simcuda's device memory is host-addressable */
    memset((void *)(uintptr_t)dev2, 0, n * 4);

    uint64_t ran_at = 0;
    uint64_t submitted = now_ns();
    assert_int_equal(cuLaunchHostFunc(stream, record_time, &ran_at), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(stream), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_true(ran_at >= submitted + LAG_NS);

    /* Kernel. */
    launch_fill(stream, dev, n, 7);
    assert_int_equal(peek32((const void *)(uintptr_t)dev, n - 1), 0);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(((uint32_t *)(uintptr_t)dev)[n - 1], fill_value(7, n - 1));

    /* Memset (compute engine). */
    assert_int_equal(cuMemsetD32Async(dev2, 0x5a5a5a5a, n, stream), CUDA_SUCCESS);
    assert_int_equal(peek32((const void *)(uintptr_t)dev2, 0), 0);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(((uint32_t *)(uintptr_t)dev2)[0], 0x5a5a5a5a);

    /* Device to host, pinned (D2H engine). */
    memset(pinned, 0, n * 4);
    assert_int_equal(cuMemcpyDtoHAsync_v2(pinned, dev, n * 4, stream), CUDA_SUCCESS);
    assert_int_equal(peek32(pinned, n - 1), 0);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(pinned[n - 1], fill_value(7, n - 1));

    /* Host to device, pinned (H2D engine). */
    for (uint64_t i = 0; i < n; i++)
        pinned[i] = (uint32_t)i * 3u;
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev2, pinned, n * 4, stream), CUDA_SUCCESS);
    assert_int_equal(peek32((const void *)(uintptr_t)dev2, 1), 0x5a5a5a5a);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(((uint32_t *)(uintptr_t)dev2)[1], 3);

    /* Event record. */
    submitted = now_ns();
    assert_int_equal(cuEventRecord(event, stream), CUDA_SUCCESS);
    assert_int_equal(cuEventQuery(event), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuEventSynchronize(event), CUDA_SUCCESS);
    assert_true(now_ns() >= submitted + LAG_NS);

    assert_int_equal(cuEventDestroy_v2(event), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeHost(pinned), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(dev), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(dev2), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(stream), CUDA_SUCCESS);
}

/* Synchronous calls keep their meaning: a synchronous copy's bytes are
 * there when it returns, and an asynchronous copy from or to pageable host
 * memory returns once the host buffer may be reused (the real driver
 * stages it synchronously), so overwriting the source at once is safe. */
static void test_lag_keeps_synchronous_semantics(void **state)
{
    (void)state;
    const uint64_t n = 4096;
    CUstream stream;
    CUdeviceptr dev;
    uint32_t *pageable = malloc(n * 4), *back = malloc(n * 4);
    assert_non_null(pageable);
    assert_non_null(back);
    assert_int_equal(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&dev, n * 4), CUDA_SUCCESS);

    for (uint64_t i = 0; i < n; i++)
        pageable[i] = (uint32_t)i + 11u;
    uint64_t start = now_ns();
    assert_int_equal(cuMemcpyHtoD_v2(dev, pageable, n * 4), CUDA_SUCCESS);
    assert_true(now_ns() >= start + LAG_NS);
    assert_int_equal(((uint32_t *)(uintptr_t)dev)[n - 1], (uint32_t)(n - 1) + 11u);
    memset(back, 0, n * 4);
    assert_int_equal(cuMemcpyDtoH_v2(back, dev, n * 4), CUDA_SUCCESS);
    assert_memory_equal(back, pageable, n * 4);

    for (uint64_t i = 0; i < n; i++)
        pageable[i] = (uint32_t)i * 5u;
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev, pageable, n * 4, stream), CUDA_SUCCESS);
    memset(pageable, 0xff, n * 4); /* reused at once, as a program may */
    memset(back, 0, n * 4);
    assert_int_equal(cuMemcpyDtoHAsync_v2(back, dev, n * 4, stream), CUDA_SUCCESS);
    assert_int_equal(back[n - 1], (uint32_t)(n - 1) * 5u); /* there on return */

    assert_int_equal(cuMemFree_v2(dev), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(stream), CUDA_SUCCESS);
    free(pageable);
    free(back);
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

/* Stream B waits for an event stream A records after filling a buffer;
 * A is held back far past B's own lag: B's copy still runs only after A's
 * fill, and copies its bytes exactly. */
static void test_lag_keeps_event_ordering_across_streams(void **state)
{
    (void)state;
    const uint64_t n = 1 << 16;
    CUstream a, b;
    CUevent filled;
    CUdeviceptr src, dst;
    gate_t gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    assert_int_equal(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&filled, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&src, n * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&dst, n * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(dst, 0, n), CUDA_SUCCESS);

    assert_int_equal(cuLaunchHostFunc(a, gate_pass, &gate), CUDA_SUCCESS);
    launch_fill(a, src, n, 42);
    assert_int_equal(cuEventRecord(filled, a), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(b, filled, 0), CUDA_SUCCESS);
    launch_copy(b, dst, src, n * 4);

    struct timespec pause = {.tv_sec = 0, .tv_nsec = (long)(3 * LAG_NS)};
    nanosleep(&pause, NULL); /* B's lag is long over; A is still held */
    assert_int_equal(cuStreamQuery(b), CUDA_ERROR_NOT_READY);
    assert_int_equal(peek32((const void *)(uintptr_t)dst, 0), 0);

    pthread_mutex_lock(&gate.lock);
    gate.open = true;
    pthread_cond_broadcast(&gate.cond);
    pthread_mutex_unlock(&gate.lock);
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);
    const uint32_t *out = (const uint32_t *)(uintptr_t)dst;
    for (uint64_t i = 0; i < n; i++)
        if (out[i] != fill_value(42, i))
            fail_msg("word %llu is %u, expected %u", (unsigned long long)i, out[i], fill_value(42, i));

    assert_int_equal(cuStreamSynchronize(a), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(src), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(dst), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy_v2(filled), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(b), CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------
 * SIMCUDA_DRIVER_VERSION=12020 with the 12.2 export list
 * ------------------------------------------------------------------------ */

static void test_version_reports_12020(void **state)
{
    (void)state;
    int version = 0;
    assert_int_equal(cuDriverGetVersion(&version), CUDA_SUCCESS);
    assert_int_equal(version, 12020);
}

static void test_version_newer_symbols_absent_from_dlsym(void **state)
{
    (void)state;
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(driver);
    assert_null(dlsym(driver, "cuFuncGetParamInfo"));
    assert_null(dlsym(driver, "cuKernelGetParamInfo"));
    assert_null(dlsym(driver, "cuCtxSynchronize_v2"));
    assert_null(dlsym(driver, "cuStreamGetCaptureInfo_v3"));
    assert_non_null(dlsym(driver, "cuLibraryLoadData")); /* 12.0 */
    assert_non_null(dlsym(driver, "cuGetProcAddress_v2"));
    assert_non_null(dlsym(driver, "cuCtxSynchronize"));
    assert_null(simcuda_entry_point("cuFuncGetParamInfo"));
    assert_non_null(simcuda_entry_point("cuKernelGetFunction"));
    dlclose(driver);
}

static void test_version_newer_symbols_absent_from_procaddr(void **state)
{
    (void)state;
    void *pfn = (void *)1;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    /* A symbol this driver predates is not found at all. */
    assert_int_equal(cuGetProcAddress_v2("cuFuncGetParamInfo", &pfn, 12020, 0, &status), CUDA_ERROR_NOT_FOUND);
    assert_null(pfn);
    assert_int_equal(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_int_equal(cuGetProcAddress_v2("cuKernelGetParamInfo", &pfn, 12020, 0, &status), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    /* One it has, asked below its introduction. */
    assert_int_equal(cuGetProcAddress_v2("cuLibraryLoadData", &pfn, 11080, 0, &status), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_int_equal(cuGetProcAddress_v2("cuLibraryLoadData", &pfn, 12020, 0, &status), CUDA_SUCCESS);
    assert_int_equal(status, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_equal(pfn, (void *)(uintptr_t)&cuLibraryLoadData);
    /* The newest form it has, not 13.0's. */
    assert_int_equal(cuGetProcAddress_v2("cuCtxSynchronize", &pfn, 12020, 0, &status), CUDA_SUCCESS);
    assert_ptr_equal(pfn, (void *)(uintptr_t)&cuCtxSynchronize);
    /* A version above the driver's (cuda.h): CUDA_ERROR_INVALID_VALUE. */
    assert_int_equal(cuGetProcAddress_v2("cuMemAlloc", &pfn, 12040, 0, &status), CUDA_ERROR_INVALID_VALUE);
}

/* ------------------------------------------------------------------------
 * SIMCUDA_VMM=0
 * ------------------------------------------------------------------------ */

static void test_novmm_attributes_read_zero(void **state)
{
    (void)state;
    int value = -1;
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
                     CUDA_SUCCESS);
    assert_int_equal(value, 0);
    value = -1;
    assert_int_equal(
        cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0),
        CUDA_SUCCESS);
    assert_int_equal(value, 0);
    value = -1;
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0), CUDA_SUCCESS);
    assert_int_equal(value, 0);
    /* Nor host-located memory, which is virtual memory management too. */
    value = -1;
    assert_int_equal(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
                     CUDA_SUCCESS);
    assert_int_equal(value, 0);
}

static void test_novmm_create_and_reserve_not_supported(void **state)
{
    (void)state;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle handle = 0;
    assert_int_equal(cuMemCreate(&handle, 2u << 20, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    assert_int_equal(cuMemCreate(&handle, 2u << 20, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
    CUdeviceptr va = 0;
    assert_int_equal(cuMemAddressReserve(&va, 2u << 20, 0, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(va, 0);
    size_t free_before, free_after, total;
    assert_int_equal(cuMemGetInfo_v2(&free_before, &total), CUDA_SUCCESS);
    assert_int_equal(free_before, total); /* nothing was charged */

    /* Ordinary allocations keep working, large ones included. */
    CUdeviceptr dev;
    assert_int_equal(cuMemAlloc_v2(&dev, 64u << 20), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(dev, 0x01020304, (64u << 20) / 4), CUDA_SUCCESS);
    assert_int_equal(((uint32_t *)(uintptr_t)dev)[(64u << 20) / 4 - 1], 0x01020304);
    assert_int_equal(cuMemGetInfo_v2(&free_after, &total), CUDA_SUCCESS);
    assert_int_equal(free_before - free_after, 64u << 20);
    assert_int_equal(cuMemFree_v2(dev), CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------
 * Malformed values: one line each, naming the variable, the value and the
 * accepted forms; the default is used.
 * ------------------------------------------------------------------------ */

/* Runs this program's `child` mode with `assignment` in its environment
 * and returns what it wrote on stderr. */
static char *run_child(const char *assignment)
{
    char command[1024];
    snprintf(command, sizeof command, "env %s '%s' child 2>&1 >/dev/null", assignment, self_path);
    FILE *pipe = popen(command, "r");
    assert_non_null(pipe);
    static char text[4096];
    size_t got = fread(text, 1, sizeof text - 1, pipe);
    text[got] = '\0';
    assert_int_equal(pclose(pipe), 0);
    return text;
}

static int count_lines(const char *text)
{
    int lines = 0;
    for (; *text != '\0'; text++)
        lines += *text == '\n';
    return lines;
}

static void test_malformed_values_are_one_line_each(void **state)
{
    (void)state;
    static const struct {
        const char *assignment, *expected;
    } cases[] = {
        {"SIMCUDA_LAG=2ms", "simcuda: SIMCUDA_LAG=\"2ms\" is not a lag (accepted: microseconds"},
        {"SIMCUDA_LAG=-5", "simcuda: SIMCUDA_LAG=\"-5\" is not a lag"},
        {"SIMCUDA_DRIVER_VERSION=12.2", "simcuda: SIMCUDA_DRIVER_VERSION=\"12.2\" is not a driver version (accepted: "
                                        "1000 * major + 10 * minor"},
        {"SIMCUDA_DRIVER_VERSION=12025", "SIMCUDA_DRIVER_VERSION=\"12025\" is not a driver version"},
        {"SIMCUDA_DRIVER_VERSION=99000", "SIMCUDA_DRIVER_VERSION=\"99000\" is not a driver version"},
        {"SIMCUDA_VMM=no", "simcuda: SIMCUDA_VMM=\"no\" is not a switch (accepted: 0 or 1); using 1"},
        {"SIMCUDA_HOST_VMM=off", "simcuda: SIMCUDA_HOST_VMM=\"off\" is not a switch (accepted: 0 or 1); using 1"},
        {"SIMCUDA_HOST_VMM=2", "simcuda: SIMCUDA_HOST_VMM=\"2\" is not a switch (accepted: 0 or 1); using 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *text = run_child(cases[i].assignment);
        if (strstr(text, cases[i].expected) == NULL || count_lines(text) != 1)
            fail_msg("%s: expected one line with \"%s\", got \"%s\"", cases[i].assignment, cases[i].expected, text);
    }
    /* Well-formed values say nothing. */
    assert_string_equal(run_child("SIMCUDA_LAG=0 SIMCUDA_DRIVER_VERSION=12040 SIMCUDA_VMM=1 SIMCUDA_HOST_VMM=1"), "");
    assert_string_equal(run_child("SIMCUDA_HOST_VMM=0"), "");
}

/* The child: reads every switch once (as a program would) and reports
 * what it got on stdout. */
static int child_main(void)
{
    int version = 0, vmm = -1;
    CUcontext child_ctx;
    CUstream stream;
    CUevent event;
    if (cuInit(0) != CUDA_SUCCESS || cuDriverGetVersion(&version) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&child_ctx, 0) != CUDA_SUCCESS || cuCtxSetCurrent(child_ctx) != CUDA_SUCCESS ||
        cuStreamCreate(&stream, 0) != CUDA_SUCCESS || cuEventCreate(&event, 0) != CUDA_SUCCESS ||
        cuEventRecord(event, stream) != CUDA_SUCCESS || cuStreamSynchronize(stream) != CUDA_SUCCESS)
        return 1;
    printf("version %d vmm %d\n", version, vmm);
    return 0;
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "child") == 0)
        return child_main();
    if (strcmp(mode, "lag") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_lag_is_configured),
            cmocka_unit_test(test_lag_delays_every_kind_of_work),
            cmocka_unit_test(test_lag_keeps_synchronous_semantics),
            cmocka_unit_test(test_lag_keeps_event_ordering_across_streams),
        };
        return cmocka_run_group_tests_name("simcuda SIMCUDA_LAG", tests, setup, NULL);
    }
    if (strcmp(mode, "version") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_version_reports_12020),
            cmocka_unit_test(test_version_newer_symbols_absent_from_dlsym),
            cmocka_unit_test(test_version_newer_symbols_absent_from_procaddr),
        };
        return cmocka_run_group_tests_name("simcuda SIMCUDA_DRIVER_VERSION", tests, setup, NULL);
    }
    if (strcmp(mode, "novmm") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_novmm_attributes_read_zero),
            cmocka_unit_test(test_novmm_create_and_reserve_not_supported),
        };
        return cmocka_run_group_tests_name("simcuda SIMCUDA_VMM=0", tests, setup, NULL);
    }
    if (strcmp(mode, "malformed") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_malformed_values_are_one_line_each),
        };
        return cmocka_run_group_tests_name("simcuda malformed switches", tests, NULL, NULL);
    }
    fprintf(stderr, "usage: %s lag|version|novmm|malformed\n", argv[0]);
    return 2;
}

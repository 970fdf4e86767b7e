/* test_sim_fault.c: SIMCUDA_FAIL fault injection (Nth call, every Nth,
 * after N, error override, request names matching every variant) and the
 * SIMCUDA_REPORT exit report.
 *
 * The variables are read at a process's first driver call, so each case
 * runs in a forked child that sets them first; the parent never calls the
 * driver. A child exits 0 on success or with the line of its first failed
 * check.
 */
#include <cuda.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "vs_test.h"

static CUcontext child_init(void)
{
    CUcontext ctx;
    VS_CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    return ctx;
}

/* Runs `body` in a child with SIMCUDA_FAIL=fail and returns its exit code,
 * or -signal. */
static int run_child(const char *fail, const char *report, void (*body)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (fail != NULL)
            setenv("SIMCUDA_FAIL", fail, 1);
        if (report != NULL)
            setenv("SIMCUDA_REPORT", report, 1);
        body();
        exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

static void nth_body(void)
{
    child_init();
    CUdeviceptr d[4];
    VS_CHILD_CHECK(cuMemAlloc_v2(&d[0], 4096) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemAlloc_v2(&d[1], 4096) == CUDA_SUCCESS);
    d[2] = 0;
    VS_CHILD_CHECK(cuMemAlloc_v2(&d[2], 4096) == CUDA_ERROR_OUT_OF_MEMORY);
    VS_CHILD_CHECK(d[2] == 0); /* no side effect */
    VS_CHILD_CHECK(cuMemAlloc_v2(&d[3], 4096) == CUDA_SUCCESS);
    size_t free_now, total;
    VS_CHILD_CHECK(cuMemGetInfo_v2(&free_now, &total) == CUDA_SUCCESS);
    VS_CHILD_CHECK(total - free_now == 3 * 4096);
}

static void test_nth_call_fails_once(void **state)
{
    (void)state;
    assert_int_equal(run_child("cuMemAlloc_v2:3", NULL, nth_body), 0);
}

static void every_body(void)
{
    child_init();
    void *p;
    for (int call = 1; call <= 9; call++) {
        CUresult result = cuMemHostAlloc(&p, 100, 0);
        VS_CHILD_CHECK(result == (call % 3 == 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS));
    }
}

static void test_every_nth_call_fails(void **state)
{
    (void)state;
    assert_int_equal(run_child("cuMemHostAlloc:every=3", NULL, every_body), 0);
}

static void after_body(void)
{
    child_init();
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle handle;
    VS_CHILD_CHECK(cuMemCreate(&handle, 2 << 20, &prop, 0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemCreate(&handle, 2 << 20, &prop, 0) == CUDA_SUCCESS);
    for (int i = 0; i < 5; i++)
        VS_CHILD_CHECK(cuMemCreate(&handle, 2 << 20, &prop, 0) == CUDA_ERROR_UNKNOWN);
}

static void test_after_n_calls_every_call_fails_with_override(void **state)
{
    (void)state;
    assert_int_equal(run_child("cuMemCreate:after=2:err=CUDA_ERROR_UNKNOWN", NULL, after_body), 0);
}

static void request_body(void)
{
    child_init();
    CUdeviceptr d;
    /* "cuMemAllocAsync" covers both variants, counted together. */
    VS_CHILD_CHECK(cuMemAllocAsync(&d, 4096, NULL) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemAllocAsync_ptsz(&d, 4096, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    VS_CHILD_CHECK(cuMemAllocAsync(&d, 4096, NULL) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemAllocAsync_ptsz(&d, 4096, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    /* Other functions are untouched. */
    VS_CHILD_CHECK(cuMemAlloc_v2(&d, 4096) == CUDA_SUCCESS);
}

static void test_request_name_matches_every_variant(void **state)
{
    (void)state;
    assert_int_equal(run_child("cuMemAllocAsync:every=2", NULL, request_body), 0);
}

static void init_body(void)
{
    (void)cuInit(0);
}

static void test_malformed_configuration_exits_two_at_init(void **state)
{
    (void)state;
    assert_int_equal(run_child("cuMemAlloc_v2:0", NULL, init_body), 2);
    assert_int_equal(run_child("cuMemAlloc_v2", NULL, init_body), 2);
    assert_int_equal(run_child("cuNoSuchFunction:1", NULL, init_body), 2);
    assert_int_equal(run_child("cuMemAlloc:every=x", NULL, init_body), 2);
    assert_int_equal(run_child("cuMemAlloc:1:err=CUDA_ERROR_BOGUS", NULL, init_body), 2);
    assert_int_equal(run_child("cuMemAlloc:1,cuMemFree:every=2", NULL, init_body), 0);
}

static void report_body(void)
{
    child_init();
    CUdeviceptr a, b;
    VS_CHILD_CHECK(cuMemAlloc_v2(&a, 3 << 20) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemAlloc_v2(&b, 1 << 20) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemFree_v2(a) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemHostAlloc((void **)&a, 10, 0) == CUDA_ERROR_OUT_OF_MEMORY);
}

/* The number after `"key": ` in `json`, searched from `from`. */
static unsigned long long json_number(const char *json, const char *from, const char *key)
{
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *start = strstr(from != NULL ? from : json, pattern);
    assert_non_null(start);
    return strtoull(start + strlen(pattern), NULL, 10);
}

static void test_report_lists_memory_calls_and_faults(void **state)
{
    (void)state;
    char path[] = "/tmp/simcuda-report-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(run_child("cuMemHostAlloc:1", path, report_body), 0);
    FILE *file = fopen(path, "r");
    assert_non_null(file);
    static char json[65536];
    size_t length = fread(json, 1, sizeof json - 1, file);
    fclose(file);
    json[length] = '\0';
    unlink(path);

    const char *devices = strstr(json, "\"devices\": [");
    assert_non_null(devices);
    assert_int_equal(json_number(json, devices, "total_bytes"), 1ull << 30);
    assert_int_equal(json_number(json, devices, "peak_bytes"), 4ull << 20);
    assert_int_equal(json_number(json, devices, "used_bytes"), 1ull << 20);
    const char *calls = strstr(json, "\"calls\": {");
    assert_non_null(calls);
    assert_int_equal(json_number(json, calls, "cuMemAlloc_v2"), 2);
    assert_int_equal(json_number(json, calls, "cuMemFree_v2"), 1);
    assert_int_equal(json_number(json, calls, "cuMemHostAlloc"), 1);
    assert_null(strstr(calls, "\"cuMemCreate\"")); /* never called: not listed */
    assert_int_equal(json_number(json, NULL, "faults_injected"), 1);
    assert_non_null(strstr(json, "\"copied\": {\"htod\": 0"));
    assert_non_null(strstr(json, "\"kernels\": 0"));
    assert_non_null(strstr(json, "\"modeled_ns\": "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nth_call_fails_once),
        cmocka_unit_test(test_every_nth_call_fails),
        cmocka_unit_test(test_after_n_calls_every_call_fails_with_override),
        cmocka_unit_test(test_request_name_matches_every_variant),
        cmocka_unit_test(test_malformed_configuration_exits_two_at_init),
        cmocka_unit_test(test_report_lists_memory_calls_and_faults),
    };
    return cmocka_run_group_tests_name("simcuda fault injection and report", tests, NULL, NULL);
}

/* test_sim_stream.c: simcuda's streams and events under real concurrency:
 * in-order execution, cross-stream event waits, the legacy NULL stream
 * against blocking and non-blocking streams, per-thread default streams,
 * destruction with pending work and event timing.
 *
 * "Gates" are host functions that block a stream's worker until the test
 * opens them, so ordering is checked deterministically, not by timing.
 */
#include <cuda.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

static CUcontext ctx;
static CUmodule module;
static CUfunction fn_fill, fn_copy, fn_spin;

static int setup(void **state)
{
    (void)state;
    static const char image[] = "any image";
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoadData(&module, image) != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_fill, module, "sim_fill_u32") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_copy, module, "sim_copy") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_spin, module, "sim_spin") != CUDA_SUCCESS)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

typedef struct gate_s {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool open;
} gate_t;

static void gate_init(gate_t *gate)
{
    pthread_mutex_init(&gate->lock, NULL);
    pthread_cond_init(&gate->cond, NULL);
    gate->open = false;
}

static void gate_pass(void *arg)
{
    gate_t *gate = arg;
    pthread_mutex_lock(&gate->lock);
    while (!gate->open)
        pthread_cond_wait(&gate->cond, &gate->lock);
    pthread_mutex_unlock(&gate->lock);
}

static void gate_open(gate_t *gate)
{
    pthread_mutex_lock(&gate->lock);
    gate->open = true;
    pthread_cond_broadcast(&gate->cond);
    pthread_mutex_unlock(&gate->lock);
}

static void set_flag(void *arg)
{
    __atomic_store_n((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static int get_flag(const int *flag)
{
    return __atomic_load_n(flag, __ATOMIC_SEQ_CST);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void launch_fill(CUstream stream, CUdeviceptr dst, uint64_t n, uint32_t seed)
{
    void *params[] = {&dst, &n, &seed};
    assert_int_equal(cuLaunchKernel(fn_fill, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL), CUDA_SUCCESS);
}

static void launch_copy(CUstream stream, CUdeviceptr dst, CUdeviceptr src, uint64_t bytes)
{
    void *params[] = {&dst, &src, &bytes};
    assert_int_equal(cuLaunchKernel(fn_copy, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL), CUDA_SUCCESS);
}

static void launch_spin(CUstream stream, uint64_t ns)
{
    void *params[] = {&ns};
    assert_int_equal(cuLaunchKernel(fn_spin, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL), CUDA_SUCCESS);
}

static uint32_t fill_value(uint64_t i, uint32_t seed)
{
    return seed ^ (uint32_t)(i * 2654435761u);
}

/* ------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------ */

/* Many dependent operations on one stream: each memset must land before
 * the copy that snapshots it, and before the next memset overwrites it. */
static void test_stream_many_ops_run_in_submission_order(void **state)
{
    (void)state;
    enum { ROUNDS = 300 };
    CUstream stream;
    CUdeviceptr scratch, snapshots;
    assert_int_equal(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&scratch, 4096), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&snapshots, ROUNDS * 4096), CUDA_SUCCESS);
    for (uint32_t r = 0; r < ROUNDS; r++) {
        assert_int_equal(cuMemsetD32Async(scratch, r * 7 + 1, 1024, stream), CUDA_SUCCESS);
        if (r % 2)
            launch_copy(stream, snapshots + r * 4096, scratch, 4096);
        else
            assert_int_equal(cuMemcpyDtoDAsync_v2(snapshots + r * 4096, scratch, 4096, stream), CUDA_SUCCESS);
    }
    uint32_t *host = malloc(ROUNDS * 4096);
    assert_non_null(host);
    assert_int_equal(cuMemcpyDtoHAsync_v2(host, snapshots, ROUNDS * 4096, stream), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
    for (uint32_t r = 0; r < ROUNDS; r++)
        for (uint32_t i = 0; i < 1024; i += 97)
            assert_int_equal(host[r * 1024 + i], r * 7 + 1);
    free(host);
    assert_int_equal(cuStreamQuery(stream), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(scratch), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(snapshots), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(stream), CUDA_SUCCESS);
}

/* A slow kernel on A, record, wait on B: B's read sees A's result. */
static void test_event_wait_orders_slow_producer_before_consumer(void **state)
{
    (void)state;
    enum { N = 4096 };
    CUstream a, b;
    CUevent done;
    CUdeviceptr produced, consumed;
    assert_int_equal(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&produced, N * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&consumed, N * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(produced, 0, N), CUDA_SUCCESS);

    launch_spin(a, 100 * 1000 * 1000); /* 100 ms busy */
    launch_fill(a, produced, N, 0xabcd);
    assert_int_equal(cuEventRecord(done, a), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(b, done, 0), CUDA_SUCCESS);
    launch_copy(b, consumed, produced, N * 4);
    assert_int_equal(cuEventQuery(done), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);
    assert_int_equal(cuEventQuery(done), CUDA_SUCCESS);

    uint32_t *host = malloc(N * 4);
    assert_int_equal(cuMemcpyDtoH_v2(host, consumed, N * 4), CUDA_SUCCESS);
    for (uint64_t i = 0; i < N; i++)
        assert_int_equal(host[i], fill_value(i, 0xabcd));
    free(host);
    assert_int_equal(cuEventDestroy_v2(done), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(b), CUDA_SUCCESS);
    cuMemFree_v2(produced);
    cuMemFree_v2(consumed);
}

/* A wait binds to the record current at the call: re-recording the event
 * afterwards on an idle stream does not release the waiter. */
static void test_stream_wait_event_uses_record_at_call_time(void **state)
{
    (void)state;
    gate_t gate;
    gate_init(&gate);
    int ran = 0;
    CUstream a, b, idle;
    CUevent event;
    assert_int_equal(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&idle, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&event, 0), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(a, gate_pass, &gate), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(event, a), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(b, event, 0), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(b, set_flag, &ran), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(event, idle), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(event), CUDA_SUCCESS);
    sleep_ms(30);
    assert_int_equal(get_flag(&ran), 0);
    assert_int_equal(cuStreamQuery(b), CUDA_ERROR_NOT_READY);
    gate_open(&gate);
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);
    assert_int_equal(get_flag(&ran), 1);
    cuEventDestroy_v2(event);
    cuStreamDestroy_v2(a);
    cuStreamDestroy_v2(b);
    cuStreamDestroy_v2(idle);
}

static void test_stream_wait_on_unrecorded_event_is_noop(void **state)
{
    (void)state;
    CUstream s;
    CUevent event;
    int ran = 0;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&event, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventQuery(event), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(s, event, 0), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(s, set_flag, &ran), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(get_flag(&ran), 1);
    cuEventDestroy_v2(event);
    cuStreamDestroy_v2(s);
}

/* Legacy NULL stream work waits for earlier work of blocking streams. */
static void test_legacy_stream_waits_for_blocking_stream(void **state)
{
    (void)state;
    gate_t gate;
    gate_init(&gate);
    int legacy_ran = 0, later_ran = 0;
    CUstream blocking;
    assert_int_equal(cuStreamCreate(&blocking, CU_STREAM_DEFAULT), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(blocking, gate_pass, &gate), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(NULL, set_flag, &legacy_ran), CUDA_SUCCESS);
    sleep_ms(30);
    assert_int_equal(get_flag(&legacy_ran), 0);
    assert_int_equal(cuStreamQuery(CU_STREAM_LEGACY), CUDA_ERROR_NOT_READY);
    gate_open(&gate);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(get_flag(&legacy_ran), 1);

    /* And the blocking stream's later work waits for the legacy stream. */
    gate_t gate2;
    gate_init(&gate2);
    legacy_ran = 0;
    assert_int_equal(cuLaunchHostFunc(CU_STREAM_LEGACY, gate_pass, &gate2), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(blocking, set_flag, &later_ran), CUDA_SUCCESS);
    sleep_ms(30);
    assert_int_equal(get_flag(&later_ran), 0);
    gate_open(&gate2);
    assert_int_equal(cuStreamSynchronize(blocking), CUDA_SUCCESS);
    assert_int_equal(get_flag(&later_ran), 1);
    cuStreamDestroy_v2(blocking);
}

/* ... but not for a non-blocking stream, in either direction. */
static void test_legacy_stream_ignores_non_blocking_stream(void **state)
{
    (void)state;
    gate_t gate;
    gate_init(&gate);
    int legacy_ran = 0;
    CUstream nonblocking;
    unsigned flags = 0;
    assert_int_equal(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamGetFlags(nonblocking, &flags), CUDA_SUCCESS);
    assert_int_equal(flags, CU_STREAM_NON_BLOCKING);
    assert_int_equal(cuLaunchHostFunc(nonblocking, gate_pass, &gate), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(NULL, set_flag, &legacy_ran), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS); /* returns with the gate still shut */
    assert_int_equal(get_flag(&legacy_ran), 1);
    assert_int_equal(cuStreamQuery(nonblocking), CUDA_ERROR_NOT_READY);
    gate_open(&gate);
    assert_int_equal(cuStreamSynchronize(nonblocking), CUDA_SUCCESS);
    cuStreamDestroy_v2(nonblocking);
}

typedef struct thread_probe_s {
    CUcontext ctx;
    unsigned long long id;
    int ran;
} thread_probe_t;

static void *per_thread_probe(void *arg)
{
    thread_probe_t *probe = arg;
    if (cuCtxSetCurrent(probe->ctx) != CUDA_SUCCESS)
        return NULL;
    /* NULL in a _ptsz call and CU_STREAM_PER_THREAD name the same stream. */
    unsigned long long id_null = 0, id_named = 1;
    cuStreamGetId_ptsz(NULL, &id_null);
    cuStreamGetId(CU_STREAM_PER_THREAD, &id_named);
    if (id_null == id_named)
        probe->id = id_null;
    cuLaunchHostFunc_ptsz(NULL, set_flag, &probe->ran);
    cuStreamSynchronize_ptsz(NULL);
    return NULL;
}

static void test_per_thread_stream_is_distinct_per_thread(void **state)
{
    (void)state;
    thread_probe_t probes[2] = {{.ctx = ctx}, {.ctx = ctx}};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, per_thread_probe, &probes[i]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    unsigned long long mine = 0, legacy = 0;
    assert_int_equal(cuStreamGetId(CU_STREAM_PER_THREAD, &mine), CUDA_SUCCESS);
    assert_int_equal(cuStreamGetId(NULL, &legacy), CUDA_SUCCESS);
    assert_true(probes[0].id != 0 && probes[1].id != 0);
    assert_true(probes[0].id != probes[1].id);
    assert_true(mine != probes[0].id && mine != probes[1].id && mine != legacy);
    assert_int_equal(probes[0].ran, 1);
    assert_int_equal(probes[1].ran, 1);
}

/* The per-thread stream is blocking: it waits for the legacy stream. */
static void test_per_thread_stream_syncs_with_legacy_stream(void **state)
{
    (void)state;
    gate_t gate;
    gate_init(&gate);
    int ran = 0;
    assert_int_equal(cuLaunchHostFunc(CU_STREAM_LEGACY, gate_pass, &gate), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc_ptsz(NULL, set_flag, &ran), CUDA_SUCCESS);
    sleep_ms(30);
    assert_int_equal(get_flag(&ran), 0);
    assert_int_equal(cuStreamQuery_ptsz(NULL), CUDA_ERROR_NOT_READY);
    gate_open(&gate);
    assert_int_equal(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS);
    assert_int_equal(get_flag(&ran), 1);

    /* A synchronous _ptds copy runs on the per-thread stream. */
    uint32_t in = 0x1234, out = 0;
    CUdeviceptr d;
    assert_int_equal(cuMemAlloc_v2(&d, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoD_v2_ptds(d, &in, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2_ptds(&out, d, 4), CUDA_SUCCESS);
    assert_int_equal(out, 0x1234);
    cuMemFree_v2(d);
}

static void test_stream_destroy_with_pending_work_completes_it(void **state)
{
    (void)state;
    gate_t gate;
    gate_init(&gate);
    int ran = 0;
    CUstream s;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(s, gate_pass, &gate), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(s, set_flag, &ran), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    assert_int_equal(get_flag(&ran), 0);
    gate_open(&gate);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    for (int i = 0; i < 200 && !get_flag(&ran); i++)
        sleep_ms(5);
    assert_int_equal(get_flag(&ran), 1);
}

static void test_ctx_synchronize_waits_for_every_stream(void **state)
{
    (void)state;
    int ran[3] = {0};
    CUstream s[2];
    assert_int_equal(cuStreamCreate(&s[0], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&s[1], CU_STREAM_DEFAULT), CUDA_SUCCESS);
    launch_spin(s[0], 20 * 1000 * 1000);
    launch_spin(s[1], 20 * 1000 * 1000);
    assert_int_equal(cuLaunchHostFunc(s[0], set_flag, &ran[0]), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(s[1], set_flag, &ran[1]), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(NULL, set_flag, &ran[2]), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        assert_int_equal(get_flag(&ran[i]), 1);
    cuStreamDestroy_v2(s[0]);
    cuStreamDestroy_v2(s[1]);
}

static void test_stream_getters_report_creation_values(void **state)
{
    (void)state;
    CUstream s;
    int priority = 1;
    CUcontext owner = NULL;
    unsigned long long id1 = 0, id2 = 0;
    assert_int_equal(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -3), CUDA_SUCCESS);
    assert_int_equal(cuStreamGetPriority(s, &priority), CUDA_SUCCESS);
    assert_int_equal(priority, -3);
    assert_int_equal(cuStreamGetCtx(s, &owner), CUDA_SUCCESS);
    assert_ptr_equal(owner, ctx);
    assert_int_equal(cuStreamGetId(s, &id1), CUDA_SUCCESS);
    assert_int_equal(cuStreamGetId(NULL, &id2), CUDA_SUCCESS);
    assert_true(id1 != id2);
    assert_int_equal(cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamCreate(&s, 0x10), CUDA_ERROR_INVALID_VALUE);
    cuStreamDestroy_v2(s);
}

typedef struct callback_probe_s {
    CUstream stream;
    CUresult status;
    int calls;
} callback_probe_t;

static void record_callback(CUstream stream, CUresult status, void *user)
{
    callback_probe_t *probe = user;
    probe->stream = stream;
    probe->status = status;
    probe->calls++;
}

static void test_stream_add_callback_passes_stream_and_status(void **state)
{
    (void)state;
    CUstream s;
    callback_probe_t probe = {.status = CUDA_ERROR_UNKNOWN};
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamAddCallback(s, record_callback, &probe, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamAddCallback(s, record_callback, &probe, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(probe.calls, 1);
    assert_ptr_equal(probe.stream, s);
    assert_int_equal(probe.status, CUDA_SUCCESS);
    cuStreamDestroy_v2(s);
}

static void test_event_elapsed_time_measures_wall_time(void **state)
{
    (void)state;
    CUstream s;
    CUevent start, end, untimed;
    float ms = -1;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&start, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&end, CU_EVENT_BLOCKING_SYNC), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuEventElapsedTime_v2(&ms, start, end), CUDA_ERROR_INVALID_HANDLE); /* not recorded */
    assert_int_equal(cuEventRecord(start, s), CUDA_SUCCESS);
    launch_spin(s, 30 * 1000 * 1000);
    assert_int_equal(cuEventRecord(end, s), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(untimed, s), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(end), CUDA_SUCCESS);
    assert_int_equal(cuEventElapsedTime_v2(&ms, start, end), CUDA_SUCCESS);
    assert_true(ms >= 29.0f);
    assert_int_equal(cuEventElapsedTime(&ms, start, untimed), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventDestroy_v2(start), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy_v2(end), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy_v2(untimed), CUDA_SUCCESS);
    cuStreamDestroy_v2(s);
}

static void test_event_destroyed_while_waited_on_keeps_wait(void **state)
{
    (void)state;
    gate_t gate;
    gate_init(&gate);
    int ran = 0;
    CUstream a, b;
    CUevent event;
    assert_int_equal(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(a, gate_pass, &gate), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(event, a), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(b, event, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy_v2(event), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(b, set_flag, &ran), CUDA_SUCCESS);
    sleep_ms(20);
    assert_int_equal(get_flag(&ran), 0);
    gate_open(&gate);
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);
    assert_int_equal(get_flag(&ran), 1);
    cuStreamDestroy_v2(a);
    cuStreamDestroy_v2(b);
}

static void test_stream_invalid_handles_are_rejected(void **state)
{
    (void)state;
    CUstream s;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(NULL), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuStreamDestroy_v2(CU_STREAM_LEGACY), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventRecord(NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_many_ops_run_in_submission_order),
        cmocka_unit_test(test_event_wait_orders_slow_producer_before_consumer),
        cmocka_unit_test(test_stream_wait_event_uses_record_at_call_time),
        cmocka_unit_test(test_stream_wait_on_unrecorded_event_is_noop),
        cmocka_unit_test(test_legacy_stream_waits_for_blocking_stream),
        cmocka_unit_test(test_legacy_stream_ignores_non_blocking_stream),
        cmocka_unit_test(test_per_thread_stream_is_distinct_per_thread),
        cmocka_unit_test(test_per_thread_stream_syncs_with_legacy_stream),
        cmocka_unit_test(test_stream_destroy_with_pending_work_completes_it),
        cmocka_unit_test(test_ctx_synchronize_waits_for_every_stream),
        cmocka_unit_test(test_stream_getters_report_creation_values),
        cmocka_unit_test(test_stream_add_callback_passes_stream_and_status),
        cmocka_unit_test(test_event_elapsed_time_measures_wall_time),
        cmocka_unit_test(test_event_destroyed_while_waited_on_keeps_wait),
        cmocka_unit_test(test_stream_invalid_handles_are_rejected),
    };
    return cmocka_run_group_tests_name("simcuda streams and events", tests, setup, NULL);
}

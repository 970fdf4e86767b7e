/* test_sim_host_costs.c: host costs in simcuda's virtual clock
 * (SIMCUDA_HOST_COSTS), checked to the nanosecond against the default table
 * (tests/simcuda/README.md): each call charges the calling thread, sized
 * calls per GiB, a host wait that waits adds the wake-up, polls answer on
 * modeled time, every thread has its own host clock, the timeline shows
 * host calls, and the report the GPU idle fraction; a costs file's `busy`
 * rows apply while the GPU has work under way.
 *
 * The main process runs with SIMCUDA_CLOCK=virtual and SIMCUDA_HOST_COSTS
 * unset (the default table). Configurations that need a process of their
 * own (a costs file, malformed files, off, the exit report) run this
 * program again as a child (`--child NAME`) with their environment and
 * check its exit status, output and report.
 */
#include <cuda.h>

#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "simcuda.h"

#define MIB (1ull << 20)
#define GRAN (2 * MIB)

/* The default table in ns (tests/simcuda/README.md). */
#define LAUNCH 2690
#define RECORD 170
#define QUERY 1300
#define WAIT_EVENT 140
#define OTHER 200
#define WAKEUP 820

static CUcontext ctx;
static CUmodule module;
static CUfunction fn_spin;
static CUstream s1, s2;
static CUdeviceptr dev_small;
static void *host_small;
#define SMALL 10000000ull /* 1e7 bytes: 200 us at 50 GB/s */
static char timeline_path[] = "/tmp/test_sim_host_costs_timeline.XXXXXX";
static const char *self_path;

static int setup(void **state)
{
    (void)state;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoadData(&module, "image") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_spin, module, "sim_spin") != CUDA_SUCCESS ||
        cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
        cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
        cuMemAlloc_v2(&dev_small, SMALL) != CUDA_SUCCESS || cuMemAllocHost_v2(&host_small, SMALL) != CUDA_SUCCESS)
        return -1;
    return 0;
}

/* Settles all work and returns the calling thread's host clock: the host
 * is then past the end of every engine's work. */
/* Pinned device memory of device 0, for cuMemCreate. */
static CUmemAllocationProp device_memory(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return prop;
}

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

/* A launch costs the host 2.69 us and the kernel starts when the launch
 * returns; the synchronisation that waits ends a wake-up after the kernel,
 * the one that finds it done costs only its call. */
static void test_launch_charges_host_and_sync_adds_wakeup(void **state)
{
    (void)state;
    uint64_t t0 = quiesce();
    spin(s1, 1000);
    assert_int_equal(simcuda_clock_now_ns() - t0, LAUNCH);
    assert_int_equal(cuStreamSynchronize(s1), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, LAUNCH + 1000 + WAKEUP);
    assert_int_equal(cuStreamSynchronize(s1), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, LAUNCH + 1000 + WAKEUP + OTHER);

    /* The timeline has the launch as a host call and the kernel starting
     * at its end. */
    FILE *f = fopen(timeline_path, "r");
    assert_non_null(f);
    char line[256], want_call[128], want_kernel[128];
    snprintf(want_call, sizeof want_call, "host t1 %llu %llu - cuLaunchKernel\n", (unsigned long long)t0,
             (unsigned long long)(t0 + LAUNCH));
    snprintf(want_kernel, sizeof want_kernel, "0 compute %llu %llu %llu sim_spin\n",
             (unsigned long long)(t0 + LAUNCH), (unsigned long long)(t0 + LAUNCH + 1000),
             (unsigned long long)(t0 + LAUNCH));
    char want_wait[128];
    snprintf(want_wait, sizeof want_wait, "host t1 %llu %llu - wait\n", (unsigned long long)(t0 + LAUNCH + OTHER),
             (unsigned long long)(t0 + LAUNCH + 1000 + WAKEUP));
    bool call = false, kernel = false, wait = false, header = false;
    while (fgets(line, sizeof line, f) != NULL) {
        header |= strncmp(line, "# host tTHREAD start_ns end_ns - call|wait", 42) == 0;
        call |= strcmp(line, want_call) == 0;
        kernel |= strcmp(line, want_kernel) == 0;
        wait |= strcmp(line, want_wait) == 0;
    }
    fclose(f);
    assert_true(header);
    assert_true(call);
    assert_true(kernel);
    assert_true(wait);
}

static void test_event_calls_and_other_calls_charge_their_cost(void **state)
{
    (void)state;
    CUevent ev;
    assert_int_equal(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    uint64_t t0 = quiesce();
    assert_int_equal(cuEventRecord(ev, s1), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, RECORD);
    assert_int_equal(cuStreamWaitEvent(s2, ev, 0), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, RECORD + WAIT_EVENT);
    /* Done on the modeled clock already: no wait, no wake-up (and the
     * record has really run, for the query below). */
    assert_int_equal(cuEventSynchronize(ev), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, RECORD + WAIT_EVENT + OTHER);
    assert_int_equal(cuEventQuery(ev), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, RECORD + WAIT_EVENT + OTHER + QUERY);
    CUdevice device;
    assert_int_equal(cuCtxGetDevice(&device), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, RECORD + WAIT_EVENT + QUERY + 2 * OTHER);
    /* A failing call costs its time too. */
    assert_int_equal(cuCtxGetDevice(NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(simcuda_clock_now_ns() - t0, RECORD + WAIT_EVENT + QUERY + 3 * OTHER);
    cuEventDestroy_v2(ev);
}

/* The VMM cycle at 2 MiB and pinned memory at 128 MiB, per the table:
 * cuMemRelease 23 us + 300 us per GiB, cuMemHostAlloc 395,099 us per GiB,
 * cuMemFreeHost 90,225 us per GiB. */
static void test_sized_calls_charge_per_gib(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_memory();
    CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va;
    uint64_t t = quiesce(), now;
#define EXPECT_COST(call, ns)                                                                                         \
    do {                                                                                                               \
        assert_int_equal((call), CUDA_SUCCESS);                                                                        \
        now = simcuda_clock_now_ns();                                                                                  \
        assert_int_equal(now - t, (ns));                                                                               \
        t = now;                                                                                                       \
    } while (0)
    EXPECT_COST(cuMemAddressReserve(&va, GRAN, 0, 0, 0), OTHER);
    EXPECT_COST(cuMemCreate(&handle, GRAN, &prop, 0), 13200);
    EXPECT_COST(cuMemMap(va, GRAN, 0, handle, 0), 1040);
    EXPECT_COST(cuMemSetAccess(va, GRAN, &access, 1), 41900);
    EXPECT_COST(cuMemUnmap(va, GRAN), 24900);
    EXPECT_COST(cuMemRelease(handle), 23000 + 586); /* 300 us x 2/1024 = 585.9 ns */
    EXPECT_COST(cuMemAddressFree(va, GRAN), OTHER);
    void *pinned;
    EXPECT_COST(cuMemHostAlloc(&pinned, 128 * MIB, 0), 395099000ull / 8);
    EXPECT_COST(cuMemFreeHost(pinned), 90225000ull / 8);
#undef EXPECT_COST
}

/* One grant and one unmap over a range that three mappings tile cost three
 * times one over a single mapping, as on an H200, where such calls cost
 * their mappings' sum (bench/gpu/host_costs: 4M+4M grant 52.6 us against
 * 25.6 us for one 2 MiB mapping). */
static void test_calls_over_several_mappings_charge_each_mapping(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_memory();
    CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle handles[3];
    CUdeviceptr va;
    assert_int_equal(cuMemAddressReserve(&va, 3 * GRAN, 0, 0, 0), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cuMemCreate(&handles[i], GRAN, &prop, 0), CUDA_SUCCESS);
        assert_int_equal(cuMemMap(va + (CUdeviceptr)i * GRAN, GRAN, 0, handles[i], 0), CUDA_SUCCESS);
    }
    uint64_t t = quiesce();
    assert_int_equal(cuMemSetAccess(va, 3 * GRAN, &access, 1), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t, 3 * 41900);
    t = simcuda_clock_now_ns();
    assert_int_equal(cuMemUnmap(va, 3 * GRAN), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t, 3 * 24900);
    /* A refused call over them (not tiled: one granule short) costs one. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(cuMemMap(va + (CUdeviceptr)i * GRAN, GRAN, 0, handles[i], 0), CUDA_SUCCESS);
    t = simcuda_clock_now_ns();
    assert_int_equal(cuMemSetAccess(va, 2 * GRAN + MIB, &access, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(simcuda_clock_now_ns() - t, 41900);
    assert_int_equal(cuMemUnmap(va, 3 * GRAN), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cuMemRelease(handles[i]), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(va, 3 * GRAN), CUDA_SUCCESS);
}

/* A release of a handle still mapped returns at once (0.1 us) and the
 * unmap that frees its memory pays for it, as on an H200 (host_costs:
 * release 0.08-0.10 us, then the unmap 34.4 us at 8 MiB against about 20 +
 * 15 apart). */
static void test_release_while_mapped_is_paid_by_the_unmap(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_memory();
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va;
    assert_int_equal(cuMemAddressReserve(&va, GRAN, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va, GRAN, 0, handle, 0), CUDA_SUCCESS);
    uint64_t t = quiesce();
    assert_int_equal(cuMemRelease(handle), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t, 100);
    t = simcuda_clock_now_ns();
    assert_int_equal(cuMemUnmap(va, GRAN), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t, 24900 + 23000 + 586);
    /* Released once unmapped: the release pays, the unmap does not. */
    assert_int_equal(cuMemCreate(&handle, GRAN, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va, GRAN, 0, handle, 0), CUDA_SUCCESS);
    t = simcuda_clock_now_ns();
    assert_int_equal(cuMemUnmap(va, GRAN), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t, 24900);
    t = simcuda_clock_now_ns();
    assert_int_equal(cuMemRelease(handle), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t, 23000 + 586);
    t = simcuda_clock_now_ns();
    assert_int_equal(cuMemRelease(handle), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(simcuda_clock_now_ns() - t, 23000);
    assert_int_equal(cuMemAddressFree(va, GRAN), CUDA_SUCCESS);
}

/* A handle maps whole: a mapping of its first granule alone is refused with
 * CUDA_ERROR_NOT_SUPPORTED, as an H200 refuses it (driver_facts:
 * mem_map.part_of_handle 801), and so is one larger than it. */
static void test_a_handle_maps_whole_or_not_at_all(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_memory();
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va;
    assert_int_equal(cuMemAddressReserve(&va, 4 * GRAN, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&handle, 2 * GRAN, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va, GRAN, 0, handle, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuMemMap(va, 3 * GRAN, 0, handle, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuMemMap(va, 2 * GRAN, 0, handle, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemUnmap(va, 2 * GRAN), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(handle), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(va, 4 * GRAN), CUDA_SUCCESS);
}

/* cuCtxSynchronize waits for both streams at once: one wake-up after the
 * later of the two. */
static void test_one_wakeup_for_a_wait_on_several_streams(void **state)
{
    (void)state;
    uint64_t t0 = quiesce();
    assert_int_equal(cuMemcpyHtoDAsync_v2(dev_small, host_small, SMALL, s1), CUDA_SUCCESS); /* ends t0+2690+200 us */
    spin(s2, 200500);                                                                         /* ends t0+5380+200.5 us */
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, 2 * LAUNCH + 200500 + WAKEUP);
}

/* A poll answers on modeled time: not ready until the polling thread's
 * clock reaches the work's end, so a polling loop advances by 1.3 us a
 * poll until then. */
static void test_event_query_answers_on_modeled_time(void **state)
{
    (void)state;
    CUevent ev;
    assert_int_equal(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    uint64_t t0 = quiesce();
    spin(s1, 10000);
    assert_int_equal(cuEventRecord(ev, s1), CUDA_SUCCESS);
    uint64_t end = t0 + LAUNCH + 10000;
    int polls = 1;
    assert_int_equal(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    CUresult rc;
    while ((rc = cuEventQuery(ev)) == CUDA_ERROR_NOT_READY)
        polls++;
    assert_int_equal(rc, CUDA_SUCCESS);
    assert_true(simcuda_clock_now_ns() >= end);
    /* From t0 + 2.86 us it takes 8 polls to reach t0 + 12.69 us: 7 answer
     * not ready, however far the stream's worker has really got. */
    assert_int_equal(polls, 7);
    assert_int_equal(simcuda_clock_now_ns() - t0, LAUNCH + RECORD + (uint64_t)(polls + 1) * QUERY);
    assert_int_equal(cuStreamQuery(s1), CUDA_SUCCESS);
    cuEventDestroy_v2(ev);
}

/* A kernel the model ends 1 us after it starts and the worker runs for
 * 50 ms of real time: a worker that lags far behind the modeled clock, as
 * one does on a loaded machine. */
#define SLOW_REAL_NS 50000000L
#define SLOW_MODELED_NS 1000

static void slow_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)args;
    (void)launch;
    (void)user;
    struct timespec pause = {.tv_sec = 0, .tv_nsec = SLOW_REAL_NS};
    while (nanosleep(&pause, &pause) != 0)
        continue;
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A poll answers from the model whatever the worker's real progress: the
 * host has passed the slow kernel's modeled end at its first poll, which
 * answers done (it waits the 50 ms for the worker), for an event as for the
 * stream. Without that wait the answer would depend on this machine's
 * speed, and so would every figure of a benchmark that polls. */
static void test_poll_answers_done_behind_a_lagging_worker(void **state)
{
    (void)state;
    CUfunction slow;
    CUevent ev;
    assert_int_equal(cuModuleGetFunction(&slow, module, "test_slow_in_real_time"), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    uint64_t t0 = quiesce();
    uint64_t wall0 = wall_ns();
    assert_int_equal(cuLaunchKernel(slow, 1, 1, 1, 1, 1, 1, 0, s1, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(ev, s1), CUDA_SUCCESS);
    /* Ends at t0 + 3.69 us; the poll is at t0 + 4.16 us. */
    assert_int_equal(cuEventQuery(ev), CUDA_SUCCESS);
    assert_true(wall_ns() - wall0 >= (uint64_t)SLOW_REAL_NS);
    assert_int_equal(simcuda_clock_now_ns() - t0, LAUNCH + RECORD + QUERY);

    t0 = quiesce();
    assert_int_equal(cuLaunchKernel(slow, 1, 1, 1, 1, 1, 1, 0, s1, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(s1), CUDA_SUCCESS);
    assert_int_equal(simcuda_clock_now_ns() - t0, LAUNCH + QUERY);

    /* An elapsed time is there when a poll would say done: a timed span
     * around the slow kernel, asked for until the host passes its end
     * (0.2 us a call: from t + 3.03 us to t + 3.86 us, 5 calls). */
    CUevent from, to;
    assert_int_equal(cuEventCreate(&from, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&to, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    quiesce();
    assert_int_equal(cuEventRecord(from, s1), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernel(slow, 1, 1, 1, 1, 1, 1, 0, s1, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(to, s1), CUDA_SUCCESS);
    float ms = 0;
    int calls = 1;
    while (cuEventElapsedTime(&ms, from, to) == CUDA_ERROR_NOT_READY)
        calls++;
    assert_int_equal(calls, 5);
    /* From the record to the kernel's end: the launch's 2.69 us (the
     * kernel starts when it returns) and the kernel's 1 us. */
    assert_true(fabs(ms * 1e6 - (double)(LAUNCH + SLOW_MODELED_NS)) < 1.0);
    cuEventDestroy_v2(from);
    cuEventDestroy_v2(to);
    cuEventDestroy_v2(ev);
}

static sem_t gate_entered, gate_release;

static void CUDA_CB gate(void *arg)
{
    (void)arg;
    sem_post(&gate_entered);
    while (sem_wait(&gate_release) != 0)
        continue;
}

/* A host function may wait for the thread that polls (here it does): while
 * one runs, a poll answers from real progress instead of waiting, even past
 * the modeled end of what it asks about. */
static void test_poll_does_not_wait_for_a_host_function(void **state)
{
    (void)state;
    CUevent ev;
    assert_int_equal(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(sem_init(&gate_entered, 0, 0), 0);
    assert_int_equal(sem_init(&gate_release, 0, 0), 0);
    quiesce();
    assert_int_equal(cuLaunchHostFunc(s1, gate, NULL), CUDA_SUCCESS);
    spin(s1, 1000);
    assert_int_equal(cuEventRecord(ev, s1), CUDA_SUCCESS);
    while (sem_wait(&gate_entered) != 0)
        continue;
    uint64_t wall0 = wall_ns();
    for (int i = 0; i < 10; i++)
        assert_int_equal(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    /* Far less than the 5 s a poll would wait for a worker. */
    assert_true(wall_ns() - wall0 < 1000000000ull);
    sem_post(&gate_release);
    assert_int_equal(cuEventSynchronize(ev), CUDA_SUCCESS);
    assert_int_equal(cuEventQuery(ev), CUDA_SUCCESS);
    sem_destroy(&gate_entered);
    sem_destroy(&gate_release);
    cuEventDestroy_v2(ev);
}

typedef struct worker_s {
    uint64_t start_ns, end_ns;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return NULL;
    w->start_ns = simcuda_clock_now_ns() - OTHER; /* less its own cuCtxSetCurrent */
    CUevent ev;
    cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    for (int i = 0; i < 100; i++)
        cuEventRecord(ev, s2);
    spin(s2, 1000);
    cuStreamSynchronize(s2);
    cuEventDestroy_v2(ev);
    w->end_ns = simcuda_clock_now_ns();
    return NULL;
}

/* Each thread has its own host clock: a new thread's starts at the latest
 * host time reached, its calls and waits advance only its own, and its
 * submissions start no earlier than its clock. */
static void test_threads_have_their_own_host_clock(void **state)
{
    (void)state;
    uint64_t m0 = quiesce();
    worker_t b = {0}, c = {0};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, worker_main, &b), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
    /* B: set current, create, 100 records, launch (kernel from its own
     * clock), a sync that waits, destroy. */
    assert_int_equal(b.start_ns, m0);
    uint64_t launched = b.start_ns + 2 * OTHER + 100 * RECORD + LAUNCH;
    assert_int_equal(b.end_ns, launched + 1000 + WAKEUP + OTHER);
    /* The main thread's clock did not move. */
    assert_int_equal(simcuda_clock_now_ns(), m0);
    /* A later thread starts at the latest host time, B's end. */
    assert_int_equal(pthread_create(&thread, NULL, worker_main, &c), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(c.start_ns, b.end_ns);
    assert_int_equal(simcuda_clock_now_ns(), m0);
    /* The main thread's work queues behind B's and C's on the engine, not
     * behind their host time. */
    spin(s1, 1000);
    assert_int_equal(simcuda_clock_now_ns(), m0 + LAUNCH);
}

/* ---- children: configurations of their own process ---- */

static int child_fail(const char *what)
{
    fprintf(stderr, "child: %s\n", what);
    return 1;
}

#define CHILD_CHECK(cond)                                                                                             \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            return child_fail(#cond);                                                                                  \
    } while (0)

static int child_setup(void)
{
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CHILD_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHILD_CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    CHILD_CHECK(cuModuleLoadData(&module, "image") == CUDA_SUCCESS);
    CHILD_CHECK(cuModuleGetFunction(&fn_spin, module, "sim_spin") == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    return 0;
}

static CUresult child_spin(CUstream s, uint64_t ns)
{
    void *params[] = {&ns};
    return cuLaunchKernel(fn_spin, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
}

/* The file (see test_costs_file_overrides_the_named_calls). */
static int child_file(void)
{
    if (child_setup() != 0)
        return 1;
    CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    uint64_t t0 = simcuda_clock_now_ns();
    CHILD_CHECK(child_spin(s1, 1000) == CUDA_SUCCESS);
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 10000); /* the file's launch */
    CHILD_CHECK(cuStreamSynchronize(s1) == CUDA_SUCCESS);
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 10000 + 1000 + 1000); /* wake-up 1 us */
    t0 = simcuda_clock_now_ns();
    CUevent ev;
    CHILD_CHECK(cuEventCreate(&ev, 0) == CUDA_SUCCESS); /* not named: the file's default */
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 500);
    CHILD_CHECK(cuEventRecord(ev, s1) == CUDA_SUCCESS); /* not in the file: the default table's */
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 500 + RECORD);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle handle;
    CHILD_CHECK(cuMemCreate(&handle, 2 * GRAN, &prop, 0) == CUDA_SUCCESS);
    t0 = simcuda_clock_now_ns();
    CHILD_CHECK(cuMemRelease(handle) == CUDA_SUCCESS); /* 1 us + 1024 us per GiB of 4 MiB */
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 1000 + 4000);
    return 0;
}

/* The busy file (see test_busy_rows_charge_while_the_gpu_works): a VMM
 * cycle with the GPU idle, then under a 1 ms kernel, then idle again. */
static int child_busy(void)
{
    if (child_setup() != 0)
        return 1;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va;
    CHILD_CHECK(cuMemAddressReserve(&va, GRAN, 0, 0, 0) == CUDA_SUCCESS);
    CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    uint64_t t0 = simcuda_clock_now_ns();
    CHILD_CHECK(cuMemCreate(&handle, GRAN, &prop, 0) == CUDA_SUCCESS);
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 13200); /* idle: the default table's */
    CHILD_CHECK(cuMemRelease(handle) == CUDA_SUCCESS);
    CHILD_CHECK(child_spin(s1, 1000000) == CUDA_SUCCESS);
    t0 = simcuda_clock_now_ns();
    CHILD_CHECK(cuMemCreate(&handle, GRAN, &prop, 0) == CUDA_SUCCESS);
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 100000); /* the busy row */
    t0 = simcuda_clock_now_ns();
    CHILD_CHECK(cuMemMap(va, GRAN, 0, handle, 0) == CUDA_SUCCESS);
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 1040); /* no busy row: the table's */
    t0 = simcuda_clock_now_ns();
    CHILD_CHECK(cuMemSetAccess(va, GRAN, &access, 1) == CUDA_SUCCESS);
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 200000 + 2000); /* 200 us + 1024 us per GiB of 2 MiB */
    t0 = simcuda_clock_now_ns();
    CHILD_CHECK(cuMemUnmap(va, GRAN) == CUDA_SUCCESS);
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 50000); /* the busy row */
    CHILD_CHECK(cuStreamSynchronize(s1) == CUDA_SUCCESS);
    t0 = simcuda_clock_now_ns();
    CHILD_CHECK(cuMemMap(va, GRAN, 0, handle, 0) == CUDA_SUCCESS);
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 1040);
    t0 = simcuda_clock_now_ns();
    CHILD_CHECK(cuMemUnmap(va, GRAN) == CUDA_SUCCESS);
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 24900); /* idle again */
    CHILD_CHECK(cuMemRelease(handle) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemAddressFree(va, GRAN) == CUDA_SUCCESS);
    return 0;
}

/* Costs off: the host is free and all threads share one host clock, the
 * model as it was before host costs. */
static void *off_worker(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(ctx);
    child_spin(s1, 50000);
    cuStreamSynchronize(s1);
    return NULL;
}

static int child_off(void)
{
    if (child_setup() != 0)
        return 1;
    CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    uint64_t t0 = simcuda_clock_now_ns();
    CHILD_CHECK(child_spin(s1, 1000) == CUDA_SUCCESS);
    CHILD_CHECK(simcuda_clock_now_ns() == t0);
    CHILD_CHECK(cuStreamSynchronize(s1) == CUDA_SUCCESS);
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 1000);
    pthread_t thread;
    CHILD_CHECK(pthread_create(&thread, NULL, off_worker, NULL) == 0);
    CHILD_CHECK(pthread_join(thread, NULL) == 0);
    CHILD_CHECK(simcuda_clock_now_ns() - t0 == 51000); /* the other thread's wait moved it */
    return 0;
}

/* Two 1 ms kernels, a host wait and some polling; prints the end of the
 * clock for the parent to check the report against. */
static int child_report(void)
{
    if (child_setup() != 0)
        return 1;
    CHILD_CHECK(child_spin(s1, 1000000) == CUDA_SUCCESS);
    CHILD_CHECK(child_spin(s1, 1000000) == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamSynchronize(s1) == CUDA_SUCCESS);
    for (int i = 0; i < 100; i++)
        CHILD_CHECK(cuStreamQuery(s1) == CUDA_SUCCESS);
    printf("end_ns %llu now_ns %llu\n", (unsigned long long)simcuda_clock_end_ns(),
           (unsigned long long)simcuda_clock_now_ns());
    return 0;
}

/* Runs this program as `--child NAME` with SIMCUDA_HOST_COSTS=costs (and
 * SIMCUDA_REPORT=report when not NULL); returns its exit status and its
 * stdout and stderr. */
static int run_child(const char *name, const char *costs, const char *report, char *out, size_t out_cap, char *err,
                     size_t err_cap)
{
    char out_path[] = "/tmp/test_sim_host_costs_out.XXXXXX", err_path[] = "/tmp/test_sim_host_costs_err.XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    assert_true(out_fd >= 0 && err_fd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        setenv("SIMCUDA_CLOCK", "virtual", 1);
        unsetenv("SIMCUDA_TIMELINE");
        if (costs != NULL)
            setenv("SIMCUDA_HOST_COSTS", costs, 1);
        else
            unsetenv("SIMCUDA_HOST_COSTS");
        if (report != NULL)
            setenv("SIMCUDA_REPORT", report, 1);
        execl(self_path, self_path, "--child", name, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    ssize_t n = pread(out_fd, out, out_cap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    n = pread(err_fd, err, err_cap - 1, 0);
    err[n > 0 ? n : 0] = '\0';
    close(out_fd);
    close(err_fd);
    unlink(out_path);
    unlink(err_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A file overrides the calls it names; `default` sets every call neither
 * the default table nor the file names; comments and blank lines pass. */
/* Runs child `name` with a costs file of `text`; it must exit 0. */
static void run_child_with_costs(const char *name, const char *text)
{
    char path[] = "/tmp/test_sim_host_costs_file.XXXXXX";
    close(mkstemp(path));
    write_file(path, text);
    char out[4096], err[4096];
    int status = run_child(name, path, NULL, out, sizeof out, err, sizeof err);
    if (status != 0)
        print_error("%s", err);
    unlink(path);
    assert_int_equal(status, 0);
}

static void test_costs_file_overrides_the_named_calls(void **state)
{
    (void)state;
    run_child_with_costs("file", "# host costs for a test\n\ncuLaunchKernel 10\nwakeup 1   # us\ndefault 0.5\n"
                                 "cuMemRelease\t1 1024\n");
}

/* A `busy` row is charged instead of the call's own while some engine has
 * work under way at the call's start, and only then; its per-GiB part goes
 * with it. */
static void test_busy_rows_charge_while_the_gpu_works(void **state)
{
    (void)state;
    run_child_with_costs("busy", "busy cuMemCreate 100\nbusy cuMemSetAccess 200 1024   # per GiB too\n"
                                 "busy cuMemUnmap 50\n");
}

/* Each malformed file: exit 2 at cuInit with one line naming the variable,
 * the file, the line and the accepted forms. */
static void test_malformed_costs_file_is_one_line_and_exit_2(void **state)
{
    (void)state;
    static const struct {
        const char *text, *reason;
    } cases[] = {
        {"cuLaunchKernel\n", "a name without a cost"},
        {"cuLaunchKernel abc\n", "not a non-negative number"},
        {"cuLaunchKernel -1\n", "not a non-negative number"},
        {"cuLaunchKernel 1.5us\n", "not a non-negative number"},
        {"cuNoSuchCall 1\n", "a name simcuda does not implement"},
        {"cuLaunchKernel 1 5\n", "a per-GiB cost for a call that has no size"},
        {"wakeup 1 2\n", "a per-GiB cost for a call that has no size"},
        {"cuMemRelease 1 2 3\n", "too many fields"},
        {"busy\n", "'busy' without a name"},
        {"busy cuMemCreate\n", "a name without a cost"},
        {"busy wakeup 1\n", "a busy cost for 'wakeup' or 'default'"},
        {"busy cuLaunchKernel 1 5\n", "a per-GiB cost for a call that has no size"},
        {"busy cuMemRelease 1 2 3\n", "too many fields"},
    };
    char path[] = "/tmp/test_sim_host_costs_bad.XXXXXX";
    close(mkstemp(path));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "cuEventRecord 0.1\n%s", cases[i].text);
        write_file(path, text);
        char out[4096], err[4096];
        assert_int_equal(run_child("file", path, NULL, out, sizeof out, err, sizeof err), 2);
        char where[512];
        snprintf(where, sizeof where, "simcuda: SIMCUDA_HOST_COSTS=%s line 2 '", path);
        if (strncmp(err, where, strlen(where)) != 0 || strstr(err, cases[i].reason) == NULL ||
            strstr(err, "accepted: lines '[busy] NAME MICROSECONDS [MICROSECONDS_PER_GIB]'") == NULL ||
            strchr(err, '\n') != err + strlen(err) - 1)
            fail_msg("case %zu: stderr was: %s", i, err);
    }
    unlink(path);
    char out[4096], err[4096];
    assert_int_equal(run_child("file", "/nonexistent/host-costs", NULL, out, sizeof out, err, sizeof err), 2);
    assert_non_null(strstr(err, "SIMCUDA_HOST_COSTS=/nonexistent/host-costs cannot be read"));
}

static void test_costs_off_keeps_the_free_shared_host_clock(void **state)
{
    (void)state;
    char out[4096], err[4096];
    int status = run_child("off", "off", NULL, out, sizeof out, err, sizeof err);
    if (status != 0)
        print_error("%s", err);
    assert_int_equal(status, 0);
}

static uint64_t json_u64(const char *json, const char *key)
{
    const char *at = strstr(json, key);
    assert_non_null(at);
    return strtoull(at + strlen(key), NULL, 10);
}

/* The report's clock: the compute engine was busy 2 ms of the modeled run,
 * and the idle fraction is the rest. */
static void test_report_gives_gpu_idle_fraction(void **state)
{
    (void)state;
    char report[] = "/tmp/test_sim_host_costs_report.XXXXXX";
    close(mkstemp(report));
    char out[4096], err[4096];
    int status = run_child("report", NULL, report, out, sizeof out, err, sizeof err);
    if (status != 0)
        print_error("%s", err);
    assert_int_equal(status, 0);
    unsigned long long end_ns = 0, now_ns = 0;
    assert_int_equal(sscanf(out, "end_ns %llu now_ns %llu", &end_ns, &now_ns), 2);
    FILE *f = fopen(report, "r");
    assert_non_null(f);
    static char json[1 << 16];
    size_t n = fread(json, 1, sizeof json - 1, f);
    json[n] = '\0';
    fclose(f);
    unlink(report);
    assert_non_null(strstr(json, "\"clock\": {\"virtual\": true, \"host_costs\": \"default\""));
    assert_int_equal(json_u64(json, "\"compute_busy_ns\": "), 2000000);
    assert_int_equal(json_u64(json, "\"modeled_ns\": "), end_ns);
    assert_int_equal(end_ns, now_ns); /* the host finished last */
    const char *fraction = strstr(json, "\"gpu_idle_fraction\": ");
    assert_non_null(fraction);
    double idle = strtod(fraction + strlen("\"gpu_idle_fraction\": "), NULL);
    assert_float_equal(idle, 1.0 - 2e6 / (double)end_ns, 1e-6);
    /* Polling 100 times after the wait cost the host 130 us. */
    assert_true(json_u64(json, "\"charged_ns\": ") >= 100 * QUERY + 2 * LAUNCH);
    /* The host waited for the 2 ms of work less what its launches took
     * after the work had started, plus the wake-up. */
    assert_true(json_u64(json, "\"waited_ns\": ") >= 2000000 - 2 * LAUNCH + WAKEUP);
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        if (strcmp(argv[2], "file") == 0)
            return child_file();
        if (strcmp(argv[2], "off") == 0)
            return child_off();
        if (strcmp(argv[2], "busy") == 0)
            return child_busy();
        if (strcmp(argv[2], "report") == 0)
            return child_report();
        return 3;
    }
    simcuda_kernel_desc_t slow = {.name = "test_slow_in_real_time", .fn = slow_kernel, .cost_ns = SLOW_MODELED_NS};
    if (simcuda_register_kernel(&slow) != 0)
        return 1;
    int fd = mkstemp(timeline_path);
    if (fd < 0)
        return 1;
    close(fd);
    setenv("SIMCUDA_TIMELINE", timeline_path, 1);
    setenv("SIMCUDA_CLOCK", "virtual", 1);
    unsetenv("SIMCUDA_HOST_COSTS");
    unsetenv("SIMCUDA_REPORT");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launch_charges_host_and_sync_adds_wakeup),
        cmocka_unit_test(test_event_calls_and_other_calls_charge_their_cost),
        cmocka_unit_test(test_sized_calls_charge_per_gib),
        cmocka_unit_test(test_calls_over_several_mappings_charge_each_mapping),
        cmocka_unit_test(test_a_handle_maps_whole_or_not_at_all),
        cmocka_unit_test(test_release_while_mapped_is_paid_by_the_unmap),
        cmocka_unit_test(test_one_wakeup_for_a_wait_on_several_streams),
        cmocka_unit_test(test_event_query_answers_on_modeled_time),
        cmocka_unit_test(test_poll_answers_done_behind_a_lagging_worker),
        cmocka_unit_test(test_poll_does_not_wait_for_a_host_function),
        cmocka_unit_test(test_threads_have_their_own_host_clock),
        cmocka_unit_test(test_costs_file_overrides_the_named_calls),
        cmocka_unit_test(test_busy_rows_charge_while_the_gpu_works),
        cmocka_unit_test(test_malformed_costs_file_is_one_line_and_exit_2),
        cmocka_unit_test(test_costs_off_keeps_the_free_shared_host_clock),
        cmocka_unit_test(test_report_gives_gpu_idle_fraction),
    };
    int failed = cmocka_run_group_tests_name("simcuda host costs", tests, setup, NULL);
    unlink(timeline_path);
    return failed;
}

/* host_costs.c: what the driver calls the shim makes cost the host on a
 * real GPU, measured rather than assumed.
 *
 * The offload engine's critical path is made of driver calls: launches,
 * event records and queries, stream waits, and the virtual-memory calls
 * that give an allocation its physical backing and take it away
 * (`cuMemCreate`, `cuMemMap`, `cuMemSetAccess`, `cuMemUnmap`,
 * `cuMemRelease`). This program times each on the host, as the median of
 * many calls, for the sizes the shim uses, and prints one line per figure:
 *
 *     host_cost NAME SIZE median_us p90_us calls
 *
 * plus the round trip of an empty kernel on an idle GPU (submission to the
 * host seeing it done), the wake-up of a host wait, handles mapped side by
 * side (two: an allocation's head and tail; 4 and 16 granule-sized
 * pieces) with their maps, one grant and one unmap over all of them, and
 * their releases, and a release made while the handle is still mapped
 * followed by the unmap; then the virtual-memory cycle again while a
 * kernel and a 1 GiB host-to-device copy are in flight (NAME_busy, and
 * whether the calls returned before that work ended), and the copy's rate
 * alone and with cycles run through it (`host_fact` lines); and the swap
 * the engine runs for each streamed allocation (map, grant, unmap of a
 * handle it holds) from one thread and from two at once, which tells
 * whether a second host thread adds virtual-memory throughput or only
 * queues behind the first in the driver (`vmm_swap_threads`).
 * The figures are the measured defaults for the simulated driver's
 * host-cost table. The driver is opened with dlopen, never linked. Exits 77
 * where no GPU answers.
 *
 *     build/bench/gpu/host_costs [--quick]
 */
#include <cuda.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VS_TEST_DRIVER_OPENED
#include "vs_test.h"

#define VS_SKIP 77

/* The driver entry points this program uses, opened by name. */
#define HOST_COSTS_DRIVER(X)                                                                       \
    X(cuInit)                                                                                      \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetName)                                                                             \
    X(cuDriverGetVersion)                                                                          \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuCtxSetCurrent)                                                                             \
    X(cuCtxSynchronize)                                                                            \
    X(cuModuleLoadData)                                                                            \
    X(cuModuleGetFunction)                                                                         \
    X(cuLaunchKernel)                                                                              \
    X(cuStreamCreate)                                                                              \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamWaitEvent)                                                                           \
    X(cuEventCreate)                                                                               \
    X(cuEventRecord)                                                                               \
    X(cuEventQuery)                                                                                \
    X(cuEventSynchronize)                                                                          \
    X(cuEventElapsedTime)                                                                          \
    X(cuMemGetAllocationGranularity)                                                               \
    X(cuMemAddressReserve)                                                                         \
    X(cuMemAddressFree)                                                                            \
    X(cuMemCreate)                                                                                 \
    X(cuMemRelease)                                                                                \
    X(cuMemMap)                                                                                    \
    X(cuMemUnmap)                                                                                  \
    X(cuMemSetAccess)                                                                              \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemFreeHost)                                                                               \
    X(cuMemcpyHtoDAsync)                                                                           \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)

typedef struct host_costs_driver_s {
#define HOST_COSTS_FIELD(name) void (*name)(void);
    HOST_COSTS_DRIVER(HOST_COSTS_FIELD)
#undef HOST_COSTS_FIELD
} host_costs_driver_t;

static host_costs_driver_t drv;

/* Typed calls through the table. */
#define CALL(name, type, args) (((type)drv.name) args)

/* A spin kernel: `spin(uint64 ns)` busy-waits on %globaltimer; with 0 it
 * is an empty kernel. PTX text, JIT-compiled by the driver. */
static const char spin_ptx[] = ".version 6.3\n"
                               ".target sm_75\n"
                               ".address_size 64\n"
                               ".visible .entry spin(.param .u64 ns)\n"
                               "{\n"
                               "  .reg .pred %p;\n"
                               "  .reg .b64 %t<4>;\n"
                               "  ld.param.u64 %t0, [ns];\n"
                               "  mov.u64 %t1, %globaltimer;\n"
                               "LOOP:\n"
                               "  mov.u64 %t2, %globaltimer;\n"
                               "  sub.u64 %t3, %t2, %t1;\n"
                               "  setp.lt.u64 %p, %t3, %t0;\n"
                               "  @%p bra LOOP;\n"
                               "  ret;\n"
                               "}\n";

/* dlsym's object pointer into a function pointer, as POSIX allows. */
static int open_symbol(void *lib, const char *name, void (**out)(void))
{
    void *found = dlsym(lib, name);
    if (found == NULL)
        return 0;
    memcpy(out, &found, sizeof found);
    return 1;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *name, const char *size, double *samples, int count)
{
    qsort(samples, (size_t)count, sizeof *samples, compare_double);
    printf("host_cost %-26s %-7s %10.2f %10.2f %6d\n", name, size, samples[count / 2], samples[count * 9 / 10], count);
}

typedef CUresult (*mem_create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                                  unsigned long long);
typedef CUresult (*mem_map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*mem_unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*mem_release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*mem_set_access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
typedef CUresult (*event_record_fn)(CUevent, CUstream);
typedef CUresult (*event_fn)(CUevent);
typedef CUresult (*stream_wait_fn)(CUstream, CUevent, unsigned);
typedef CUresult (*stream_fn)(CUstream);

/* What the measurements below share: device memory's properties, its
 * owner's access, and a reservation of `bytes` (the caller frees it). */
static CUdeviceptr vmm_setup(CUdevice device, size_t bytes, CUmemAllocationProp *prop, CUmemAccessDesc *access)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = device;
    *access = (CUmemAccessDesc){{CU_MEM_LOCATION_TYPE_DEVICE, device}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUdeviceptr va;
    VS_CHECK(CALL(cuMemAddressReserve, CUresult(*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long),
               (&va, bytes, 0, 0, 0)));
    return va;
}

/* One measurement: device memory's properties and its owner's access, a
 * reservation of `bytes`, and per-round samples of `kinds` figures. */
#define VMM_MAX_KINDS 5
typedef struct vmm_bench_s {
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUdeviceptr va;
    size_t bytes;
    int kinds, rounds;
    double *t[VMM_MAX_KINDS];
} vmm_bench_t;

static void vmm_begin(vmm_bench_t *b, CUdevice device, size_t bytes, int kinds, int rounds)
{
    b->va = vmm_setup(device, bytes, &b->prop, &b->access);
    b->bytes = bytes;
    b->kinds = kinds;
    b->rounds = rounds;
    for (int k = 0; k < kinds; k++) {
        b->t[k] = calloc((size_t)rounds, sizeof(double));
        VS_CHECK(b->t[k] != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
    }
}

/* Reports figure k as `names[k]`, then frees the samples and the
 * reservation. */
static void vmm_end(vmm_bench_t *b, const char *const *names, const char *size)
{
    for (int k = 0; k < b->kinds; k++) {
        report(names[k], size, b->t[k], b->rounds);
        free(b->t[k]);
    }
    VS_CHECK(CALL(cuMemAddressFree, CUresult(*)(CUdeviceptr, size_t), (b->va, b->bytes)));
}

/* One create, map, grant, unmap, release of `bytes` at `va`, each call's
 * microseconds in t[0..5). */
static void vmm_cycle(vmm_bench_t *b, double *t)
{
    CUmemGenericAllocationHandle handle;
    double at[6];
    at[0] = now_us();
    VS_CHECK(CALL(cuMemCreate, mem_create_fn, (&handle, b->bytes, &b->prop, 0)));
    at[1] = now_us();
    VS_CHECK(CALL(cuMemMap, mem_map_fn, (b->va, b->bytes, 0, handle, 0)));
    at[2] = now_us();
    VS_CHECK(CALL(cuMemSetAccess, mem_set_access_fn, (b->va, b->bytes, &b->access, 1)));
    at[3] = now_us();
    VS_CHECK(CALL(cuMemUnmap, mem_unmap_fn, (b->va, b->bytes)));
    at[4] = now_us();
    VS_CHECK(CALL(cuMemRelease, mem_release_fn, (handle)));
    at[5] = now_us();
    for (int k = 0; k < 5; k++)
        t[k] = at[k + 1] - at[k];
}

/* The virtual-memory cycle the shim runs for an allocation of `bytes`:
 * create, map, set access, unmap, release; each timed alone. */
static void measure_vmm(CUdevice device, size_t bytes, const char *size, int rounds)
{
    vmm_bench_t b;
    vmm_begin(&b, device, bytes, 5, rounds);
    for (int i = 0; i < rounds; i++) {
        double t[5];
        vmm_cycle(&b, t);
        for (int k = 0; k < 5; k++)
            b.t[k][i] = t[k];
    }
    static const char *const names[] = {"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease"};
    vmm_end(&b, names, size);
}

/* Handles of `sizes[0..count)` bytes mapped side by side over one range:
 * their maps (one call each), the grant and the unmap with one call over
 * all of them, and their releases, reported as cuMemMap_SUFFIX,
 * cuMemSetAccess_SUFFIX, cuMemUnmap_SUFFIX and cuMemRelease_SUFFIX. The
 * simulated driver charges the grant and the unmap as one call of the
 * table; these lines say what they cost on the GPU. Two pieces are the
 * offload engine's head and tail; many pieces of one granule are physical
 * memory in pieces of one size (any departing piece could then be mapped
 * ahead for any restore), which pays only if the grant and the unmap cost
 * about as one call there. */
#define VMM_MAX_PIECES 16
static void measure_vmm_pieces(CUdevice device, const size_t *sizes, int count, const char *suffix,
                               const char *size, int rounds)
{
    vmm_bench_t b;
    CUmemGenericAllocationHandle handles[VMM_MAX_PIECES];
    size_t offsets[VMM_MAX_PIECES + 1] = {0};
    VS_CHECK(count >= 1 && count <= VMM_MAX_PIECES ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
    for (int p = 0; p < count; p++)
        offsets[p + 1] = offsets[p] + sizes[p];
    size_t bytes = offsets[count];
    vmm_begin(&b, device, bytes, 4, rounds);
    for (int i = 0; i < rounds; i++) {
        for (int p = 0; p < count; p++)
            VS_CHECK(CALL(cuMemCreate, mem_create_fn, (&handles[p], sizes[p], &b.prop, 0)));
        double at[5];
        at[0] = now_us();
        for (int p = 0; p < count; p++)
            VS_CHECK(CALL(cuMemMap, mem_map_fn, (b.va + offsets[p], sizes[p], 0, handles[p], 0)));
        at[1] = now_us();
        VS_CHECK(CALL(cuMemSetAccess, mem_set_access_fn, (b.va, bytes, &b.access, 1)));
        at[2] = now_us();
        VS_CHECK(CALL(cuMemUnmap, mem_unmap_fn, (b.va, bytes)));
        at[3] = now_us();
        for (int p = 0; p < count; p++)
            VS_CHECK(CALL(cuMemRelease, mem_release_fn, (handles[p])));
        at[4] = now_us();
        for (int k = 0; k < 4; k++)
            b.t[k][i] = at[k + 1] - at[k];
    }
    static const char *const calls[] = {"cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease"};
    char name_text[4][48];
    const char *names[4];
    for (int k = 0; k < 4; k++) {
        snprintf(name_text[k], sizeof name_text[k], "%s_%s", calls[k], suffix);
        names[k] = name_text[k];
    }
    vmm_end(&b, names, size);
}

/* A handle released while still mapped (cuda.h: its memory is freed once
 * the last mapping goes), then its range unmapped: whether the release
 * is then cheap and the unmap pays for the freeing, or the other way
 * round. The shim could release a departing allocation's memory during
 * the wait for its copy out, if the release is what costs. */
static void measure_vmm_release_mapped(CUdevice device, size_t bytes, const char *size, int rounds)
{
    vmm_bench_t b;
    vmm_begin(&b, device, bytes, 2, rounds);
    for (int i = 0; i < rounds; i++) {
        CUmemGenericAllocationHandle handle;
        VS_CHECK(CALL(cuMemCreate, mem_create_fn, (&handle, bytes, &b.prop, 0)));
        VS_CHECK(CALL(cuMemMap, mem_map_fn, (b.va, bytes, 0, handle, 0)));
        VS_CHECK(CALL(cuMemSetAccess, mem_set_access_fn, (b.va, bytes, &b.access, 1)));
        double at = now_us();
        VS_CHECK(CALL(cuMemRelease, mem_release_fn, (handle)));
        double released = now_us();
        VS_CHECK(CALL(cuMemUnmap, mem_unmap_fn, (b.va, bytes)));
        b.t[0][i] = released - at;
        b.t[1][i] = now_us() - released;
    }
    static const char *const names[] = {"cuMemRelease_mapped", "cuMemUnmap_released"};
    vmm_end(&b, names, size);
}

/* The virtual-memory cycle while the GPU is busy: a kernel spinning on one
 * stream and a large host-to-device copy on another, as when the offload
 * engine maps a restore or unmaps a departure during a pass. The figures
 * above were taken on an idle GPU; mapping changes involve synchronous
 * work on the GPU (CUDA-NOTES), so a call may wait for work in flight, or
 * stall the copy engine. Reports each call's cost while busy
 * (NAME_busy), how many cycles returned with the kernel and the copy still
 * running (a call that waited for the GPU would not), and the copy's rate
 * alone and with cycles running through it (host_fact lines). */
typedef struct busy_gpu_s {
    CUfunction spin;
    CUstream compute, copy;
    CUevent kernel_end, copy_start, copy_end;
    CUdeviceptr device_buffer;
    void *host_buffer;
    size_t copy_bytes;
} busy_gpu_t;

static void busy_start(busy_gpu_t *g, unsigned long long spin_ns, bool with_kernel)
{
    VS_CHECK(CALL(cuEventRecord, event_record_fn, (g->copy_start, g->copy)));
    VS_CHECK(CALL(cuMemcpyHtoDAsync, CUresult(*)(CUdeviceptr, const void *, size_t, CUstream),
                  (g->device_buffer, g->host_buffer, g->copy_bytes, g->copy)));
    VS_CHECK(CALL(cuEventRecord, event_record_fn, (g->copy_end, g->copy)));
    if (with_kernel) {
        void *params[] = {&spin_ns};
        VS_CHECK(CALL(cuLaunchKernel, launch_fn, (g->spin, 1, 1, 1, 32, 1, 1, 0, g->compute, params, NULL)));
        VS_CHECK(CALL(cuEventRecord, event_record_fn, (g->kernel_end, g->compute)));
    }
    double until = now_us() + 100.0; /* both under way */
    while (now_us() < until)
        ;
}

static bool busy_still(CUevent ev)
{
    return CALL(cuEventQuery, event_fn, (ev)) == CUDA_ERROR_NOT_READY;
}

static void measure_vmm_busy(CUdevice device, busy_gpu_t *g, size_t bytes, const char *size, int rounds)
{
    vmm_bench_t b;
    vmm_begin(&b, device, bytes, 5, rounds);
    int kernel_running = 0, copy_running = 0;
    for (int i = 0; i < rounds; i++) {
        busy_start(g, 30000000ull, true); /* 30 ms: longer than the 1 GiB copy */
        double t[5];
        vmm_cycle(&b, t);
        kernel_running += busy_still(g->kernel_end);
        copy_running += busy_still(g->copy_end);
        for (int k = 0; k < 5; k++)
            b.t[k][i] = t[k];
        VS_CHECK(CALL(cuCtxSynchronize, CUresult(*)(void), ()));
    }
    printf("host_fact vmm_cycle_busy %-7s returned with the kernel running %d of %d, the copy running %d of %d\n",
           size, kernel_running, rounds, copy_running, rounds);
    static const char *const names[] = {"cuMemCreate_busy", "cuMemMap_busy", "cuMemSetAccess_busy",
                                        "cuMemUnmap_busy", "cuMemRelease_busy"};
    vmm_end(&b, names, size);
}

/* The copy's rate alone and with VMM cycles of `bytes` run back to back
 * through it (no kernel): whether mapping changes stall the copy engine. */
static void measure_copy_with_vmm(CUdevice device, busy_gpu_t *g, size_t bytes, const char *size, int rounds)
{
    vmm_bench_t b;
    vmm_begin(&b, device, bytes, 0, rounds);
    double alone = 0, with = 0;
    int cycles = 0;
    for (int i = 0; i < 2 * rounds; i++) {
        bool vmm = i % 2 == 1;
        busy_start(g, 0, false);
        while (vmm && busy_still(g->copy_end)) {
            double t[5];
            vmm_cycle(&b, t);
            cycles++;
        }
        VS_CHECK(CALL(cuEventSynchronize, event_fn, (g->copy_end)));
        float ms = 0;
        VS_CHECK(CALL(cuEventElapsedTime, CUresult(*)(float *, CUevent, CUevent), (&ms, g->copy_start, g->copy_end)));
        *(vmm ? &with : &alone) += (double)ms;
    }
    double gb = (double)g->copy_bytes * rounds / 1e9;
    printf("host_fact h2d_with_vmm_cycles %-7s %.1f GB/s alone, %.1f GB/s with %d cycles run through the copies\n",
           size, gb / (alone / 1e3), gb / (with / 1e3), cycles);
    vmm_end(&b, NULL, size);
}

/* One thread's share of `measure_vmm_threads`: `swaps` maps, grants and
 * unmaps of its own handle at its own reservation, timed as a whole. */
typedef struct vmm_swapper_s {
    CUcontext ctx;
    CUdevice device;
    size_t bytes;
    int swaps;
    pthread_barrier_t *start;
    double elapsed_us;
} vmm_swapper_t;

static void *vmm_swapper_main(void *arg)
{
    vmm_swapper_t *w = arg;
    VS_CHECK(CALL(cuCtxSetCurrent, CUresult(*)(CUcontext), (w->ctx)));
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUdeviceptr va = vmm_setup(w->device, w->bytes, &prop, &access);
    CUmemGenericAllocationHandle handle;
    VS_CHECK(CALL(cuMemCreate, mem_create_fn, (&handle, w->bytes, &prop, 0)));
    pthread_barrier_wait(w->start);
    double a = now_us();
    for (int i = 0; i < w->swaps; i++) {
        VS_CHECK(CALL(cuMemMap, mem_map_fn, (va, w->bytes, 0, handle, 0)));
        VS_CHECK(CALL(cuMemSetAccess, mem_set_access_fn, (va, w->bytes, &access, 1)));
        VS_CHECK(CALL(cuMemUnmap, mem_unmap_fn, (va, w->bytes)));
    }
    w->elapsed_us = now_us() - a;
    VS_CHECK(CALL(cuMemRelease, mem_release_fn, (handle)));
    VS_CHECK(CALL(cuMemAddressFree, CUresult(*)(CUdeviceptr, size_t), (va, w->bytes)));
    return NULL;
}

/* The engine's swap of an allocation of `bytes` (map, grant, unmap), from
 * one thread, then from two at once, each doing `swaps`: microseconds a
 * swap on one thread, on each of two, and the throughput of two over one
 * (2.0: the driver runs them side by side; 1.0: one after the other). */
static void measure_vmm_threads(CUcontext ctx, CUdevice device, size_t bytes, const char *size, int swaps)
{
    double per_swap[2];
    for (int threads = 1; threads <= 2; threads++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)threads);
        vmm_swapper_t w[2];
        pthread_t tid[2];
        for (int k = 0; k < threads; k++) {
            w[k] = (vmm_swapper_t){.ctx = ctx, .device = device, .bytes = bytes, .swaps = swaps, .start = &start};
            VS_CHECK(pthread_create(&tid[k], NULL, vmm_swapper_main, &w[k]) == 0 ? CUDA_SUCCESS
                                                                                : CUDA_ERROR_OPERATING_SYSTEM);
        }
        double slowest = 0;
        for (int k = 0; k < threads; k++) {
            pthread_join(tid[k], NULL);
            slowest = w[k].elapsed_us > slowest ? w[k].elapsed_us : slowest;
        }
        pthread_barrier_destroy(&start);
        per_swap[threads - 1] = slowest / swaps;
    }
    printf("host_fact vmm_swap_threads %-7s map+grant+unmap %.1f us a swap on one thread, %.1f on each of two at "
           "once: two threads give %.2f x one's swaps a second\n",
           size, per_swap[0], per_swap[1], 2.0 * per_swap[0] / per_swap[1]);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        printf("host_costs: no libcuda.so.1: skipped\n");
        return VS_SKIP;
    }
#define HOST_COSTS_OPEN(name)                                                                      \
    if (!open_symbol(lib, #name, &drv.name) && !open_symbol(lib, #name "_v2", &drv.name)) {       \
        printf("host_costs: the driver has no %s: skipped\n", #name);                             \
        return VS_SKIP;                                                                            \
    }
    HOST_COSTS_DRIVER(HOST_COSTS_OPEN)
#undef HOST_COSTS_OPEN
    /* The _v2 forms where the ABI changed. */
    (void)open_symbol(lib, "cuEventElapsedTime_v2", &drv.cuEventElapsedTime);
    (void)open_symbol(lib, "cuMemcpyHtoDAsync_v2", &drv.cuMemcpyHtoDAsync);
    (void)open_symbol(lib, "cuMemAlloc_v2", &drv.cuMemAlloc);
    (void)open_symbol(lib, "cuMemFree_v2", &drv.cuMemFree);

    CUdevice device;
    CUcontext ctx;
    if (CALL(cuInit, CUresult(*)(unsigned), (0)) != CUDA_SUCCESS
        || CALL(cuDeviceGet, CUresult(*)(CUdevice *, int), (&device, 0)) != CUDA_SUCCESS) {
        printf("host_costs: no GPU answers: skipped\n");
        return VS_SKIP;
    }
    VS_CHECK(CALL(cuDevicePrimaryCtxRetain, CUresult(*)(CUcontext *, CUdevice), (&ctx, device)));
    VS_CHECK(CALL(cuCtxSetCurrent, CUresult(*)(CUcontext), (ctx)));
    char name[128] = "";
    int version = 0;
    VS_CHECK(CALL(cuDeviceGetName, CUresult(*)(char *, int, CUdevice), (name, sizeof name, device)));
    VS_CHECK(CALL(cuDriverGetVersion, CUresult(*)(int *), (&version)));
    printf("host_costs: %s, driver %d; microseconds on the host: median, 90th percentile, calls\n", name, version);

    CUmodule module;
    CUfunction spin;
    if (CALL(cuModuleLoadData, CUresult(*)(CUmodule *, const void *), (&module, spin_ptx)) != CUDA_SUCCESS
        || CALL(cuModuleGetFunction, CUresult(*)(CUfunction *, CUmodule, const char *), (&spin, module, "spin"))
               != CUDA_SUCCESS) {
        printf("host_costs: the driver cannot run the spin kernel's PTX: skipped\n");
        return VS_SKIP;
    }
    CUstream stream, other;
    VS_CHECK(CALL(cuStreamCreate, CUresult(*)(CUstream *, unsigned), (&stream, CU_STREAM_NON_BLOCKING)));
    VS_CHECK(CALL(cuStreamCreate, CUresult(*)(CUstream *, unsigned), (&other, CU_STREAM_NON_BLOCKING)));
    CUevent ev, start, stop;
    VS_CHECK(CALL(cuEventCreate, CUresult(*)(CUevent *, unsigned), (&ev, CU_EVENT_DISABLE_TIMING)));
    VS_CHECK(CALL(cuEventCreate, CUresult(*)(CUevent *, unsigned), (&start, CU_EVENT_DEFAULT)));
    VS_CHECK(CALL(cuEventCreate, CUresult(*)(CUevent *, unsigned), (&stop, CU_EVENT_DEFAULT)));

    int n = quick ? 2000 : 20000;
    double *t = calloc((size_t)n, sizeof(double));
    unsigned long long zero = 0;
    void *params[] = {&zero};

    /* Warm the JIT and the queues. */
    for (int i = 0; i < 100; i++)
        VS_CHECK(CALL(cuLaunchKernel, launch_fn, (spin, 1, 1, 1, 32, 1, 1, 0, stream, params, NULL)));
    VS_CHECK(CALL(cuStreamSynchronize, stream_fn, (stream)));

    /* Launch submission: the queue kept from filling by a sync every 512. */
    for (int i = 0; i < n; i++) {
        double a = now_us();
        VS_CHECK(CALL(cuLaunchKernel, launch_fn, (spin, 1, 1, 1, 32, 1, 1, 0, stream, params, NULL)));
        t[i] = now_us() - a;
        if (i % 512 == 511)
            VS_CHECK(CALL(cuStreamSynchronize, stream_fn, (stream)));
    }
    VS_CHECK(CALL(cuStreamSynchronize, stream_fn, (stream)));
    report("cuLaunchKernel", "-", t, n);

    for (int i = 0; i < n; i++) {
        double a = now_us();
        VS_CHECK(CALL(cuEventRecord, event_record_fn, (ev, stream)));
        t[i] = now_us() - a;
    }
    report("cuEventRecord", "-", t, n);
    VS_CHECK(CALL(cuStreamSynchronize, stream_fn, (stream)));
    for (int i = 0; i < n; i++) {
        double a = now_us();
        (void)CALL(cuEventQuery, event_fn, (ev));
        t[i] = now_us() - a;
    }
    report("cuEventQuery", "-", t, n);
    for (int i = 0; i < n; i++) {
        double a = now_us();
        VS_CHECK(CALL(cuStreamWaitEvent, stream_wait_fn, (other, ev, 0)));
        t[i] = now_us() - a;
    }
    report("cuStreamWaitEvent", "-", t, n);
    VS_CHECK(CALL(cuStreamSynchronize, stream_fn, (other)));

    /* An empty kernel on an idle GPU, submitted and waited for: the round
     * trip a host wait puts on the critical path. */
    int r = quick ? 200 : 2000;
    for (int i = 0; i < r; i++) {
        double a = now_us();
        VS_CHECK(CALL(cuLaunchKernel, launch_fn, (spin, 1, 1, 1, 32, 1, 1, 0, stream, params, NULL)));
        VS_CHECK(CALL(cuStreamSynchronize, stream_fn, (stream)));
        t[i] = now_us() - a;
    }
    report("idle_launch_round_trip", "-", t, r);

    /* The wake-up after a host wait: what a blocking wait costs over a
     * spinning poll. The same 200 us kernel between two events, waited for
     * once with cuEventSynchronize and once by querying the stop event
     * until it is done; each pass is timed on the host from before the
     * first record to the wait's return, less the GPU time between the
     * events. Both passes pay the same submissions and the same latency
     * from submission to the GPU, so their difference is the wait's own
     * wake-up (a poll notices the end within one query, 1.3 to 1.5 us).
     * Taking the GPU time from the wait alone, as this did first, left the
     * submissions after the first event in the figure: 0.82 us on an H100,
     * clamped to 0 on an H200, whose launch costs 4.1 us. */
    unsigned long long spin_ns = 200000;
    void *spin_params[] = {&spin_ns};
    int w = r / 4;
    double *waited = t, *polled = t + w, *wakeup = t + 2 * w;
    for (int i = 0; i < 2 * w; i++) {
        bool poll = i % 2 == 1;
        double a = now_us();
        VS_CHECK(CALL(cuEventRecord, event_record_fn, (start, stream)));
        VS_CHECK(CALL(cuLaunchKernel, launch_fn, (spin, 1, 1, 1, 32, 1, 1, 0, stream, spin_params, NULL)));
        VS_CHECK(CALL(cuEventRecord, event_record_fn, (stop, stream)));
        if (poll) {
            CUresult q;
            while ((q = CALL(cuEventQuery, event_fn, (stop))) == CUDA_ERROR_NOT_READY)
                ;
            VS_CHECK(q);
        } else {
            VS_CHECK(CALL(cuEventSynchronize, event_fn, (stop)));
        }
        double host = now_us() - a;
        float gpu_ms = 0;
        VS_CHECK(CALL(cuEventElapsedTime, CUresult(*)(float *, CUevent, CUevent), (&gpu_ms, start, stop)));
        (poll ? polled : waited)[i / 2] = host - (double)gpu_ms * 1000.0;
    }
    for (int i = 0; i < w; i++)
        wakeup[i] = waited[i] - polled[i];
    report("host_wait_over_gpu", "-", waited, w);
    report("host_poll_over_gpu", "-", polled, w);
    report("host_wait_wakeup", "-", wakeup, w);

    /* The virtual-memory cycle at the sizes the shim maps: the minimum
     * granule, a 32 MiB layer, a 360 MiB DiT block. */
    int vr = quick ? 20 : 100;
    measure_vmm(device, 2ull << 20, "2M", vr);
    measure_vmm(device, 32ull << 20, "32M", vr);
    measure_vmm(device, 360ull << 20, "360M", vr / 4 > 4 ? vr / 4 : 4);
    /* A head and a tail: the DiT's 8 MiB tensor kept in halves, a 32 MiB
     * layer restored as 30 MiB ahead of its last 2. */
    static const size_t halves[] = {4ull << 20, 4ull << 20}, layer_ahead[] = {30ull << 20, 2ull << 20};
    measure_vmm_pieces(device, halves, 2, "two_maps", "4M+4M", vr);
    measure_vmm_pieces(device, layer_ahead, 2, "two_maps", "30M+2M", vr);
    /* Granule-sized pieces: an 8 MiB tensor as four, a 32 MiB layer as
     * sixteen; and a release before the unmap, at 8 and 32 MiB. */
    size_t granules[VMM_MAX_PIECES];
    for (int p = 0; p < VMM_MAX_PIECES; p++)
        granules[p] = 2ull << 20;
    measure_vmm_pieces(device, granules, 4, "pieces", "4x2M", vr);
    measure_vmm_pieces(device, granules, 16, "pieces", "16x2M", vr);
    measure_vmm_release_mapped(device, 8ull << 20, "8M", vr);
    measure_vmm_release_mapped(device, 32ull << 20, "32M", vr);
    /* Swaps from two threads at once: the DiT's 8 MiB tensor, a layer. */
    measure_vmm_threads(ctx, device, 8ull << 20, "8M", vr * 2);
    measure_vmm_threads(ctx, device, 32ull << 20, "32M", vr * 2);

    /* The cycle again with the GPU busy, and the copy engine's rate with
     * cycles running through its copies. */
    busy_gpu_t g = {.spin = spin, .compute = stream, .copy = other, .copy_bytes = quick ? 64ull << 20 : 1ull << 30};
    VS_CHECK(CALL(cuEventCreate, CUresult(*)(CUevent *, unsigned), (&g.kernel_end, CU_EVENT_DISABLE_TIMING)));
    VS_CHECK(CALL(cuEventCreate, CUresult(*)(CUevent *, unsigned), (&g.copy_start, CU_EVENT_DEFAULT)));
    VS_CHECK(CALL(cuEventCreate, CUresult(*)(CUevent *, unsigned), (&g.copy_end, CU_EVENT_DEFAULT)));
    VS_CHECK(CALL(cuMemAlloc, CUresult(*)(CUdeviceptr *, size_t), (&g.device_buffer, g.copy_bytes)));
    VS_CHECK(CALL(cuMemHostAlloc, CUresult(*)(void **, size_t, unsigned), (&g.host_buffer, g.copy_bytes, 0)));
    int br = quick ? 4 : 20;
    measure_vmm_busy(device, &g, 2ull << 20, "2M", br);
    measure_vmm_busy(device, &g, 32ull << 20, "32M", br);
    measure_vmm_busy(device, &g, 360ull << 20, "360M", br);
    measure_copy_with_vmm(device, &g, 2ull << 20, "2M", quick ? 2 : 5);
    measure_copy_with_vmm(device, &g, 360ull << 20, "360M", quick ? 2 : 5);
    VS_CHECK(CALL(cuMemFreeHost, CUresult(*)(void *), (g.host_buffer)));
    VS_CHECK(CALL(cuMemFree, CUresult(*)(CUdeviceptr), (g.device_buffer)));

    /* Pinned host memory, per GiB. */
    int hr = quick ? 2 : 4;
    for (int i = 0; i < hr; i++) {
        void *host;
        double a = now_us();
        VS_CHECK(CALL(cuMemHostAlloc, CUresult(*)(void **, size_t, unsigned), (&host, 1ull << 30, CU_MEMHOSTALLOC_PORTABLE)));
        double b = now_us();
        VS_CHECK(CALL(cuMemFreeHost, CUresult(*)(void *), (host)));
        double c = now_us();
        t[i] = b - a;
        t[hr + i] = c - b;
    }
    report("cuMemHostAlloc", "1G", t, hr);
    report("cuMemFreeHost", "1G", t + hr, hr);
    free(t);
    return 0;
}

/* preload_ctx_destroy.c: a program that destroys or resets a context while
 * the shim holds evicted allocations, under a VRAM_LIMIT far below what it
 * allocates.
 *
 *   preload_ctx_destroy reset|destroy|release BUFFERS
 *
 * Each case allocates BUFFERS buffers of 8 MiB, fills them with kernels and
 * checksums each one on the device (so that, in offload mode, they are
 * evicted and restored: host copies exist), then:
 *
 * - `reset`: `cuDevicePrimaryCtxReset` (what cudaDeviceReset does) while its
 *   stream and event are live; then retains the primary context again and
 *   does the same work with new buffers, byte-exact.
 * - `release`: the same through the last `cuDevicePrimaryCtxRelease`.
 * - `destroy`: the buffers of the primary context A are filled first; then
 *   a context B of the same device (`cuCtxCreate`) allocates and uses its
 *   own, which evicts A's while B is current (so the host pool's memory is
 *   first pinned in B); B is destroyed, and A's buffers must still hold
 *   their bytes; A then allocates and uses new buffers.
 *
 * Its stream and event die with the context and are never used again: the
 * simulated driver frees them, so a use by the shim afterwards is a
 * use-after-free that the ASan build reports.
 *
 * After each, the simulated device's own count of used memory (asked of
 * simcuda, not through the shim) must be within VRAM_LIMIT plus the 8 MiB
 * an operation may need beside it: the allocations of the destroyed context
 * must be gone from the device and from the shim's count. The cap mode
 * (VRAMSHIM_MODE=cap, BUFFERS small enough to fit the limit once) checks the
 * second: the second round of allocations fits only once the first round's
 * charge went with its context.
 *
 * Exit status: 0 when every check holds, 1 otherwise, 2 on a usage error.
 */
#include "preload_util.h"
#include "simcuda.h"

#define MiB (1ull << 20)
#define BUFFER_BYTES (8 * MiB)
#define MAX_BUFFERS 32

static CUfunction fn_fill, fn_checksum;

static void load_kernels(void)
{
    CUmodule module;
    VS_CHECK(cuModuleLoadData(&module, "preload_ctx_destroy kernels"));
    VS_CHECK(cuModuleGetFunction(&fn_fill, module, "sim_fill_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_checksum, module, "sim_checksum_u32"));
}

static uint64_t fill_checksum(uint32_t seed, uint64_t words)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < words; i++)
        sum += (uint64_t)(seed ^ (uint32_t)(i * 2654435761u)) * (i + 1);
    return sum;
}

static void launch_fill(CUdeviceptr dst, uint32_t seed, CUstream stream)
{
    uint64_t words = BUFFER_BYTES / 4;
    void *args[] = {&dst, &words, &seed};
    VS_CHECK(cuLaunchKernel(fn_fill, 1, 1, 1, 64, 1, 1, 0, stream, args, NULL));
}

static uint64_t device_checksum(CUdeviceptr src, CUdeviceptr result, CUstream stream)
{
    uint64_t words = BUFFER_BYTES / 4, sum = 0;
    void *args[] = {&src, &words, &result};
    VS_CHECK(cuLaunchKernel(fn_checksum, 1, 1, 1, 64, 1, 1, 0, stream, args, NULL));
    VS_CHECK(cuStreamSynchronize(stream));
    VS_CHECK(cuMemcpyDtoH(&sum, result, sizeof sum));
    return sum;
}

/* A round of work in the current context: `count` new buffers, filled with
 * seeds from `seed` on `stream`, then each checksummed twice in turn. */
static void allocate_and_fill(CUdeviceptr *buffers, int count, uint32_t seed, CUstream stream)
{
    for (int i = 0; i < count; i++) {
        VS_CHECK(cuMemAlloc_v2(&buffers[i], BUFFER_BYTES));
        launch_fill(buffers[i], seed + (uint32_t)i, stream);
    }
    VS_CHECK(cuStreamSynchronize(stream));
}

static void check_buffers(const CUdeviceptr *buffers, int count, uint32_t seed, CUstream stream, const char *what)
{
    CUdeviceptr result;
    VS_CHECK(cuMemAlloc_v2(&result, sizeof(uint64_t)));
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < count; i++) {
            uint64_t sum = device_checksum(buffers[i], result, stream);
            if (sum != fill_checksum(seed + (uint32_t)i, BUFFER_BYTES / 4))
                VS_EXPECT(false, "%s: buffer %d (pass %d) lost its bytes", what, i, pass);
        }
    }
    VS_CHECK(cuMemFree_v2(result));
}

/* The simulated device's used bytes, asked of simcuda itself. */
typedef CUresult mem_get_info_fn_t(size_t *, size_t *);

static uint64_t device_used(void)
{
    mem_get_info_fn_t *driver_mem_get_info = __extension__(mem_get_info_fn_t *) simcuda_entry_point("cuMemGetInfo_v2");
    size_t free_bytes = 0, total = 0;
    if (driver_mem_get_info == NULL || driver_mem_get_info(&free_bytes, &total) != CUDA_SUCCESS) {
        VS_EXPECT(false, "cannot ask simcuda for its memory figures");
        return 0;
    }
    return total - free_bytes;
}

static void check_device_within_limit(const char *when)
{
    const char *text = getenv("VRAM_LIMIT");
    uint64_t limit = text != NULL ? strtoull(text, NULL, 10) * MiB : 0;
    uint64_t used = device_used();
    printf("preload_ctx_destroy: %s: %llu MiB used on the device\n", when, (unsigned long long)(used / MiB));
    if (limit > 0 && used > limit + BUFFER_BYTES)
        VS_EXPECT(false, "%s: %llu bytes used on the device, past VRAM_LIMIT %llu and one buffer", when,
                (unsigned long long)used, (unsigned long long)limit);
}

/* Retains the primary context of device 0 again (after its reset or last
 * release), makes it current and loads the kernels there. */
static void start_again(CUdevice dev)
{
    CUcontext ctx;
    VS_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    VS_CHECK(cuCtxSetCurrent(ctx));
    load_kernels();
}

static void case_primary_ends(int count, bool reset)
{
    CUdevice dev;
    CUdeviceptr first[MAX_BUFFERS], second[MAX_BUFFERS];
    preload_context();
    VS_CHECK(cuDeviceGet(&dev, 0));
    load_kernels();
    CUstream stream;
    CUevent done;
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    allocate_and_fill(first, count, 100, stream);
    check_buffers(first, count, 100, stream, "before the context ends");
    VS_CHECK(cuEventRecord(done, stream));
    if (reset)
        VS_CHECK(cuDevicePrimaryCtxReset(dev));
    else
        VS_CHECK(cuDevicePrimaryCtxRelease(dev));
    check_device_within_limit("after the context ended");
    start_again(dev);
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    allocate_and_fill(second, count, 500, stream);
    check_buffers(second, count, 500, stream, "in the new context");
    allocate_and_fill(first, 1, 900, NULL);
    check_buffers(first, 1, 900, NULL, "on its legacy stream");
    check_device_within_limit("at the end");
}

static void case_destroy(int count)
{
    CUdevice dev;
    CUdeviceptr kept[MAX_BUFFERS], doomed[MAX_BUFFERS], later[MAX_BUFFERS];
    CUcontext primary = preload_context();
    VS_CHECK(cuDeviceGet(&dev, 0));
    load_kernels();
    /* Within the limit: nothing is evicted before B exists. */
    int kept_count = 1;
    allocate_and_fill(kept, kept_count, 100, NULL);
    CUcontext other;
    VS_CHECK(cuCtxCreate(&other, NULL, 0, dev));
    load_kernels();
    CUstream stream;
    CUevent done;
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    allocate_and_fill(doomed, count, 300, stream);
    check_buffers(doomed, count, 300, stream, "in the second context");
    /* A's buffers are used from B too: same device, unified addressing. */
    check_buffers(kept, kept_count, 100, stream, "the first context's, from the second");
    VS_CHECK(cuEventRecord(done, stream));
    VS_CHECK(cuCtxDestroy_v2(other));
    CUcontext current = NULL;
    VS_CHECK(cuCtxGetCurrent(&current));
    if (current != primary)
        VS_EXPECT(false, "the destroyed context was not popped");
    VS_CHECK(cuCtxSetCurrent(primary));
    load_kernels();
    check_device_within_limit("after the second context was destroyed");
    check_buffers(kept, kept_count, 100, NULL, "the first context's, after the second's destruction");
    allocate_and_fill(later, count, 700, NULL);
    check_buffers(later, count, 700, NULL, "new in the first context");
    check_buffers(kept, kept_count, 100, NULL, "the first context's, at the end");
    check_device_within_limit("at the end");
}

int main(int argc, char **argv)
{
    int count = argc == 3 ? atoi(argv[2]) : 0;
    if (argc != 3 || count <= 0 || count > MAX_BUFFERS) {
        fprintf(stderr, "usage: preload_ctx_destroy reset|destroy|release BUFFERS (1 to %d)\n", MAX_BUFFERS);
        return 2;
    }
    vs_test_set_phase(argv[1]);
    if (strcmp(argv[1], "reset") == 0) {
        case_primary_ends(count, true);
    } else if (strcmp(argv[1], "release") == 0) {
        case_primary_ends(count, false);
    } else if (strcmp(argv[1], "destroy") == 0) {
        case_destroy(count);
    } else {
        fprintf(stderr, "preload_ctx_destroy: unknown case %s\n", argv[1]);
        return 2;
    }
    unsigned long failed = vs_test_failure_count();
    printf("preload_ctx_destroy %s: %s (%lu failures)\n", argv[1], failed == 0 ? "ok" : "FAILED", failed);
    return failed == 0 ? 0 : 1;
}

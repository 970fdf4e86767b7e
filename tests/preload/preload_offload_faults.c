/* preload_offload_faults.c: the offload mode under injected driver faults
 * (SIMCUDA_FAIL), one Meson test per driver call the shim makes.
 *
 *   SIMCUDA_FAIL=cuMemCreate:every=3 VRAM_LIMIT=16M preload_offload_faults [ROUNDS]
 *
 * Several 8 MiB buffers (more than the limit holds, so every round evicts
 * and restores) are filled with known patterns; then, while the driver
 * fails the calls SIMCUDA_FAIL names, the program keeps filling buffers
 * with kernels and synchronous copies, copying one buffer into another,
 * checksumming them on the device and allocating new ones, on two streams
 * and the legacy stream (each operation is waited for before the next,
 * since these streams are not ordered with each other; the shim's own
 * copy streams still run beside them). An operation may fail, but only with a CUDA error:
 * a crash or a hang (the watchdog, SIGALRM) fails the test. For each buffer
 * the program keeps the set of patterns it may hold: the last one written
 * by an operation that succeeded, plus the one an operation that returned
 * an error tried to write (which may or may not have happened). Every
 * checksum that was launched successfully must match one of them, and at
 * the end every buffer must read back exactly one of them (reads are
 * retried while the fault rule keeps failing calls: `every=N` rules never
 * stop, so a single read may still hit one).
 *
 * Exit status: 0 when every check holds, 1 otherwise (each failure printed),
 * 3 when the watchdog fired.
 */
#include <signal.h>
#include <unistd.h>

#include "preload_util.h"

#define MiB (1ull << 20)
#define BUFFER_BYTES (8 * MiB)
#define BUFFER_WORDS (BUFFER_BYTES / 4)
#define MAX_BUFFERS 8
#define INITIAL_BUFFERS 4
#define WATCHDOG_SECONDS 90
#define READ_ATTEMPTS 64

static vs_tracked_t buffers[MAX_BUFFERS];
static unsigned buffer_count;
static unsigned long op_errors, op_successes;
static CUfunction fn_fill, fn_checksum;
static CUstream streams[3]; /* two of the program's and the legacy stream */
static CUdeviceptr sums;    /* small: never evicted */
static uint32_t *host_pattern;

static uint32_t pattern_word(uint32_t seed, uint64_t i)
{
    return seed ^ (uint32_t)(i * 2654435761u);
}

static void pattern_fill(uint32_t *dst, uint32_t seed)
{
    for (uint64_t i = 0; i < BUFFER_WORDS; i++)
        dst[i] = pattern_word(seed, i);
}

static uint64_t pattern_checksum(uint32_t seed)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < BUFFER_WORDS; i++)
        sum += (uint64_t)pattern_word(seed, i) * (i + 1);
    return sum;
}

static void note_result(const char *what, unsigned index, CUresult rc)
{
    if (rc == CUDA_SUCCESS) {
        op_successes++;
        return;
    }
    op_errors++;
    const char *name = NULL;
    (void)cuGetErrorName(rc, &name);
    fprintf(stderr, "preload_offload_faults: %s on buffer %u returned %s (%d)\n", what, index,
            name != NULL ? name : "an unknown error", (int)rc);
}

static CUresult launch_fill(unsigned index, uint32_t seed, CUstream stream)
{
    CUdeviceptr dst = buffers[index].ptr;
    uint64_t n = BUFFER_WORDS;
    void *args[] = {&dst, &n, &seed};
    return cuLaunchKernel(fn_fill, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL);
}

static CUresult launch_checksum(unsigned index, CUstream stream)
{
    CUdeviceptr src = buffers[index].ptr, out = sums + 8 * index;
    uint64_t n = BUFFER_WORDS;
    void *args[] = {&src, &n, &out};
    return cuLaunchKernel(fn_checksum, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL);
}

/* Retries a synchronous call while the fault rule fails it. */
#define RETRY(rc, call)                                                                            \
    do {                                                                                           \
        for (int attempt_ = 0; attempt_ < READ_ATTEMPTS; attempt_++) {                             \
            (rc) = (call);                                                                         \
            if ((rc) == CUDA_SUCCESS)                                                              \
                break;                                                                             \
        }                                                                                          \
    } while (0)

static bool allocate_buffer(void)
{
    if (buffer_count == MAX_BUFFERS)
        return false;
    CUdeviceptr ptr = 0;
    vs_test_set_phase("cuMemAlloc_v2");
    CUresult rc = cuMemAlloc_v2(&ptr, BUFFER_BYTES);
    note_result("cuMemAlloc_v2", buffer_count, rc);
    if (rc != CUDA_SUCCESS)
        return false;
    VS_EXPECT(ptr != 0, "cuMemAlloc_v2 succeeded with a NULL pointer");
    buffers[buffer_count++] = (vs_tracked_t){.ptr = ptr};
    return true;
}

/* One round of work on every buffer; `phase` varies the seeds. */
static void run_round(unsigned round)
{
    for (unsigned i = 0; i < buffer_count; i++) {
        CUstream stream = streams[(i + round) % 3];
        uint32_t seed = 0x1000u * (round + 1) + i;
        CUresult rc;
        switch ((i + round) % 4) {
        case 0:
            vs_test_set_phase("fill kernel");
            rc = launch_fill(i, seed, stream);
            note_result("fill kernel", i, rc);
            vs_tracked_write(&buffers[i], seed, rc);
            break;
        case 1:
            vs_test_set_phase("cuMemcpyHtoD_v2");
            pattern_fill(host_pattern, seed);
            rc = cuMemcpyHtoD_v2(buffers[i].ptr, host_pattern, BUFFER_BYTES);
            note_result("cuMemcpyHtoD_v2", i, rc);
            vs_tracked_write(&buffers[i], seed, rc);
            break;
        case 2: {
            unsigned from = (i + 1) % buffer_count;
            vs_test_set_phase("cuMemcpyDtoDAsync_v2");
            rc = cuMemcpyDtoDAsync_v2(buffers[i].ptr, buffers[from].ptr, BUFFER_BYTES, stream);
            note_result("cuMemcpyDtoDAsync_v2", i, rc);
            vs_tracked_copy(&buffers[i], &buffers[from], rc);
            break;
        }
        default: {
            vs_test_set_phase("checksum kernel");
            vs_tracked_t before = buffers[i];
            rc = launch_checksum(i, stream);
            note_result("checksum kernel", i, rc);
            if (rc != CUDA_SUCCESS || !before.defined)
                break;
            vs_test_set_phase("cuStreamSynchronize after checksum");
            CUresult sync;
            RETRY(sync, cuStreamSynchronize(stream));
            VS_EXPECT(sync == CUDA_SUCCESS, "cuStreamSynchronize: %d", (int)sync);
            uint64_t sum = 0;
            vs_test_set_phase("cuMemcpyDtoH_v2 of a checksum");
            RETRY(sync, cuMemcpyDtoH_v2(&sum, sums + 8 * i, 8));
            VS_EXPECT(sync == CUDA_SUCCESS, "reading the checksum: %d", (int)sync);
            bool match = false;
            for (unsigned k = 0; k < before.count && !match; k++)
                match = sum == pattern_checksum(before.seeds[k]);
            VS_EXPECT(match, "buffer %u: checksum %#" PRIx64 " matches none of its %u possible patterns (first %#x)", i,
                   sum, before.count, before.seeds[0]);
            break;
        }
        }
        /* The program's streams are not ordered with each other: the next
         * operation, on another stream, may touch this buffer. */
        vs_test_set_phase("cuStreamSynchronize after an operation");
        CUresult sync;
        RETRY(sync, cuStreamSynchronize(stream));
        VS_EXPECT(sync == CUDA_SUCCESS, "cuStreamSynchronize: %d", (int)sync);
    }
    if (round % 3 == 2 && allocate_buffer()) {
        unsigned index = buffer_count - 1;
        vs_test_set_phase("fill kernel of a new buffer");
        CUresult rc = launch_fill(index, 0xabc000u + index, streams[round % 3]);
        note_result("fill kernel of a new buffer", index, rc);
        vs_tracked_write(&buffers[index], 0xabc000u + index, rc);
    }
}

static void verify_all(void)
{
    uint32_t *back = malloc(BUFFER_BYTES);
    if (back == NULL) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    vs_test_set_phase("cuCtxSynchronize before verifying");
    CUresult rc;
    RETRY(rc, cuCtxSynchronize());
    VS_EXPECT(rc == CUDA_SUCCESS, "cuCtxSynchronize: %d", (int)rc);
    for (unsigned i = 0; i < buffer_count; i++) {
        vs_test_set_phase("cuMemcpyDtoH_v2 of a buffer (verify)");
        RETRY(rc, cuMemcpyDtoH_v2(back, buffers[i].ptr, BUFFER_BYTES));
        VS_EXPECT(rc == CUDA_SUCCESS, "buffer %u: cannot be read back: %d", i, (int)rc);
        if (rc != CUDA_SUCCESS || !buffers[i].defined)
            continue;
        bool match = false;
        uint64_t first_bad = 0;
        for (unsigned k = 0; k < buffers[i].count && !match; k++) {
            uint64_t w = 0;
            while (w < BUFFER_WORDS && back[w] == pattern_word(buffers[i].seeds[k], w))
                w++;
            match = w == BUFFER_WORDS;
            if (k == 0)
                first_bad = w;
        }
        VS_EXPECT(match,
               "buffer %u: contents match none of its %u possible patterns (against seed %#x: word %" PRIu64
               " is %#x, expected %#x)",
               i, buffers[i].count, buffers[i].seeds[0], first_bad, back[first_bad],
               pattern_word(buffers[i].seeds[0], first_bad));
    }
    free(back);
}

int main(int argc, char **argv)
{
    unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 12;
    vs_test_set_phase("setup");
    vs_test_watchdog_start(WATCHDOG_SECONDS);
    setvbuf(stderr, NULL, _IOLBF, 0);
    host_pattern = malloc(BUFFER_BYTES);
    if (host_pattern == NULL)
        return 1;

    CUdevice device;
    CUcontext context;
    CUmodule module;
    VS_CHECK(cuInit(0));
    VS_CHECK(cuDeviceGet(&device, 0));
    VS_CHECK(cuDevicePrimaryCtxRetain(&context, device));
    VS_CHECK(cuCtxSetCurrent(context));
    VS_CHECK(cuModuleLoadData(&module, "preload_offload_faults kernels"));
    VS_CHECK(cuModuleGetFunction(&fn_fill, module, "sim_fill_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_checksum, module, "sim_checksum_u32"));
    VS_CHECK(cuStreamCreate(&streams[0], CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuStreamCreate(&streams[1], 0));
    streams[2] = NULL;
    VS_CHECK(cuMemAlloc_v2(&sums, 8 * MAX_BUFFERS));

    /* The initial buffers: faults may already hit here (the rule counts
     * from the first call), so allocations and fills may fail too. */
    for (unsigned i = 0; i < INITIAL_BUFFERS; i++) {
        if (!allocate_buffer())
            continue;
        unsigned index = buffer_count - 1;
        vs_test_set_phase("initial fill kernel");
        CUresult rc = launch_fill(index, 0x100u + index, streams[index % 3]);
        note_result("initial fill kernel", index, rc);
        vs_tracked_write(&buffers[index], 0x100u + index, rc);
    }
    for (unsigned round = 0; round < rounds; round++)
        run_round(round);
    verify_all();

    fprintf(stderr, "preload_offload_faults: %u buffers, %lu operations succeeded, %lu returned errors, %lu failures\n",
            buffer_count, op_successes, op_errors, vs_test_failure_count());
    alarm(0);
    return vs_test_failure_count() == 0 ? 0 : 1;
}

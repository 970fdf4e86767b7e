/* preload_offload_spill.c: the disk tier (VRAMSHIM_SPILL_DIR) from a
 * program's side, with and without injected I/O faults (VRAMSHIM_IO_FAULT).
 *
 *   VRAM_LIMIT=16M VRAMSHIM_HOST_LIMIT=16M VRAMSHIM_SPILL_DIR=DIR \
 *   VRAMSHIM_IO_FAULT=read:EIO:times=1 preload_offload_spill \
 *       [--buffers N] [--mib M] [--rounds R] [--watchdog S] [--expect-error CODE]...
 *
 * N buffers of M MiB (many times what the device limit and the host pool
 * hold together, so most of them live in the spill file) are filled with
 * known patterns; then each round, buffer by buffer, the program fills one
 * with a kernel, writes one from the host, copies one into another and
 * reads one back whole, comparing every byte. The shim must restore buffers
 * from disk for all of these and spill others to make room. An operation may
 * fail, but only with CUDA_ERROR_OUT_OF_MEMORY (a spill that could not be
 * written), CUDA_ERROR_OPERATING_SYSTEM (a read that failed) or
 * CUDA_ERROR_ECC_UNCORRECTABLE (a block that failed its checksum); anything
 * else, a crash or a hang (the watchdog, SIGALRM) fails the test. For each
 * buffer the program keeps the patterns it may hold (the last one written
 * by an operation that succeeded, plus those that operations that returned
 * an error tried to write); a read that succeeds must return one of them
 * exactly: corrupt data must never come back silently. A failed read is
 * retried at once and must then succeed (the faults the tests inject are
 * bounded), and at the end every buffer must read back one of its patterns.
 * `--expect-error CODE` (repeatable) fails the test unless some operation
 * returned CODE: the fault must have reached the program.
 *
 * `--max-alloc-wait-ms MS` runs a second thread that allocates and frees a
 * small buffer in a loop while the rounds run, and fails the test when one
 * such pair took longer than MS: with slow disk I/O injected
 * (`write:slow`, `read:slow`), that holds only if the shim lets its engine
 * lock go during the I/O (an allocation takes that lock).
 *
 * Exit status: 0 when every check holds, 1 otherwise (each failure printed),
 * 2 on a usage error, 3 when the watchdog fired.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "preload_util.h"

#define MiB (1ull << 20)
#define MAX_BUFFERS 64
#define MAX_CODES 8
#define READ_ATTEMPTS 16

/* The CUDA errors an operation may return here; anything else fails. */
static const CUresult allowed_errors[] = {CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OPERATING_SYSTEM,
                                          CUDA_ERROR_ECC_UNCORRECTABLE};

/* Every buffer is written before the rounds start, or dropped from the test. */
static vs_tracked_t buffers[MAX_BUFFERS];
static unsigned buffer_count;
static uint64_t buffer_bytes, buffer_words;
static unsigned long op_errors, op_successes, bytes_compared_mib;
static struct {
    CUresult code;
    unsigned long seen;
} codes[MAX_CODES];
static CUfunction fn_fill;
static CUstream streams[2]; /* one of the program's and the legacy stream */
static uint32_t *host_pattern, *readback;

static uint32_t pattern_word(uint32_t seed, uint64_t i)
{
    return seed ^ (uint32_t)(i * 2654435761u);
}

static void pattern_fill(uint32_t *dst, uint32_t seed)
{
    for (uint64_t i = 0; i < buffer_words; i++)
        dst[i] = pattern_word(seed, i);
}

/* Records an operation's result: successes, and each error by code (an
 * error outside allowed_errors is a failure). */
static void note_result(const char *what, unsigned index, CUresult rc)
{
    if (rc == CUDA_SUCCESS) {
        op_successes++;
        return;
    }
    op_errors++;
    const char *name = NULL;
    (void)cuGetErrorName(rc, &name);
    fprintf(stderr, "preload_offload_spill: %s on buffer %u returned %s (%d)\n", what, index,
            name != NULL ? name : "an unknown error", (int)rc);
    bool allowed = false;
    for (size_t k = 0; k < sizeof allowed_errors / sizeof allowed_errors[0]; k++)
        allowed = allowed || rc == allowed_errors[k];
    VS_EXPECT(allowed, "%s on buffer %u returned %d, not an error the disk tier may cause", what, index, (int)rc);
    for (unsigned k = 0; k < MAX_CODES; k++) {
        if (codes[k].seen == 0 || codes[k].code == rc) {
            codes[k].code = rc;
            codes[k].seen++;
            break;
        }
    }
}

static bool error_seen(CUresult rc)
{
    for (unsigned k = 0; k < MAX_CODES; k++)
        if (codes[k].seen != 0 && codes[k].code == rc)
            return true;
    return false;
}

static CUresult launch_fill(unsigned index, uint32_t seed, CUstream stream)
{
    CUdeviceptr dst = buffers[index].ptr;
    uint64_t n = buffer_words;
    void *args[] = {&dst, &n, &seed};
    return cuLaunchKernel(fn_fill, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL);
}

/* Retries a synchronous call while it fails (the injected faults are
 * bounded), noting each error. */
#define RETRY(rc, what, index, call)                                                               \
    do {                                                                                           \
        for (int attempt_ = 0; attempt_ < READ_ATTEMPTS; attempt_++) {                             \
            (rc) = (call);                                                                         \
            if ((rc) == CUDA_SUCCESS)                                                              \
                break;                                                                             \
            note_result((what), (index), (rc));                                                    \
        }                                                                                          \
    } while (0)

/* Reads buffer `i` back whole (retrying) and compares it with its
 * candidates; on a match the buffer is known to hold that pattern. */
static void read_and_compare(unsigned i, const char *what)
{
    vs_test_set_phase(what);
    CUresult rc;
    RETRY(rc, what, i, cuMemcpyDtoH_v2(readback, buffers[i].ptr, buffer_bytes));
    VS_EXPECT(rc == CUDA_SUCCESS, "buffer %u cannot be read back after %d attempts: %d", i, READ_ATTEMPTS, (int)rc);
    if (rc != CUDA_SUCCESS)
        return;
    op_successes++;
    if (!buffers[i].defined)
        return;
    bytes_compared_mib += buffer_bytes / MiB;
    uint64_t first_bad = 0;
    for (unsigned k = 0; k < buffers[i].count; k++) {
        uint64_t w = 0;
        while (w < buffer_words && readback[w] == pattern_word(buffers[i].seeds[k], w))
            w++;
        if (w == buffer_words) {
            buffers[i].seeds[0] = buffers[i].seeds[k];
            buffers[i].count = 1;
            return;
        }
        if (k == 0)
            first_bad = w;
    }
    VS_EXPECT(false,
           "buffer %u: contents match none of its %u possible patterns (against seed %#x: word %" PRIu64
           " is %#x, expected %#x)",
           i, buffers[i].count, buffers[i].seeds[0], first_bad, readback[first_bad],
           pattern_word(buffers[i].seeds[0], first_bad));
}

static void run_round(unsigned round)
{
    for (unsigned i = 0; i < buffer_count; i++) {
        CUstream stream = streams[(i + round) % 2];
        uint32_t seed = 0x10000u * (round + 1) + i;
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
            rc = cuMemcpyHtoD_v2(buffers[i].ptr, host_pattern, buffer_bytes);
            note_result("cuMemcpyHtoD_v2", i, rc);
            vs_tracked_write(&buffers[i], seed, rc);
            break;
        case 2: {
            unsigned from = (i + buffer_count / 2) % buffer_count;
            vs_test_set_phase("cuMemcpyDtoDAsync_v2");
            rc = cuMemcpyDtoDAsync_v2(buffers[i].ptr, buffers[from].ptr, buffer_bytes, stream);
            note_result("cuMemcpyDtoDAsync_v2", i, rc);
            vs_tracked_copy(&buffers[i], &buffers[from], rc);
            break;
        }
        default:
            read_and_compare(i, "cuMemcpyDtoH_v2 of a buffer");
            break;
        }
        /* The next operation, on the other stream, may touch this buffer. */
        vs_test_set_phase("cuStreamSynchronize after an operation");
        CUresult sync;
        RETRY(sync, "cuStreamSynchronize", i, cuStreamSynchronize(stream));
        VS_EXPECT(sync == CUDA_SUCCESS, "cuStreamSynchronize: %d", (int)sync);
    }
}

static unsigned parse_count(const char *option, const char *value, unsigned max)
{
    char *end = NULL;
    unsigned long n = value != NULL ? strtoul(value, &end, 10) : 0;
    if (value == NULL || *end != '\0' || n == 0 || n > max) {
        fprintf(stderr, "preload_offload_spill: %s needs a number from 1 to %u\n", option, max);
        exit(2);
    }
    return (unsigned)n;
}

/* The allocation probe (--max-alloc-wait-ms). */
static _Atomic bool probe_stop;
static _Atomic uint64_t probe_worst_ns, probe_pairs;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *probe_allocations(void *arg)
{
    CUcontext context = arg;
    if (cuCtxSetCurrent(context) != CUDA_SUCCESS)
        return NULL;
    while (!atomic_load(&probe_stop)) {
        CUdeviceptr ptr = 0;
        uint64_t start = now_ns();
        CUresult rc = cuMemAlloc_v2(&ptr, 2 * MiB);
        if (rc == CUDA_SUCCESS)
            rc = cuMemFree_v2(ptr);
        uint64_t took = now_ns() - start;
        VS_EXPECT(rc == CUDA_SUCCESS, "the probe's cuMemAlloc_v2/cuMemFree_v2: %d", (int)rc);
        if (took > atomic_load(&probe_worst_ns))
            atomic_store(&probe_worst_ns, took);
        atomic_fetch_add(&probe_pairs, 1);
        usleep(20000);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned count = 8, mib = 8, rounds = 4, watchdog_seconds = 120, max_alloc_wait_ms = 0;
    CUresult expected[MAX_CODES];
    unsigned expected_count = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--buffers") == 0)
            count = parse_count(argv[i], value, MAX_BUFFERS);
        else if (strcmp(argv[i], "--mib") == 0)
            mib = parse_count(argv[i], value, 1024);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = parse_count(argv[i], value, 1000);
        else if (strcmp(argv[i], "--watchdog") == 0)
            watchdog_seconds = parse_count(argv[i], value, 3600);
        else if (strcmp(argv[i], "--max-alloc-wait-ms") == 0)
            max_alloc_wait_ms = parse_count(argv[i], value, 600000);
        else if (strcmp(argv[i], "--expect-error") == 0 && expected_count < MAX_CODES)
            expected[expected_count++] = (CUresult)parse_count(argv[i], value, 100000);
        else {
            fprintf(stderr,
                    "usage: %s [--buffers N] [--mib M] [--rounds R] [--watchdog S] [--expect-error CODE]... "
                    "[--max-alloc-wait-ms MS]\n",
                    argv[0]);
            return 2;
        }
    }
    vs_test_set_phase("setup");
    vs_test_watchdog_start(watchdog_seconds);
    setvbuf(stderr, NULL, _IOLBF, 0);
    buffer_bytes = (uint64_t)mib * MiB;
    buffer_words = buffer_bytes / 4;
    host_pattern = malloc(buffer_bytes);
    readback = malloc(buffer_bytes);
    if (host_pattern == NULL || readback == NULL) {
        fprintf(stderr, "preload_offload_spill: out of host memory\n");
        return 1;
    }

    CUdevice device;
    CUcontext context;
    CUmodule module;
    VS_CHECK(cuInit(0));
    VS_CHECK(cuDeviceGet(&device, 0));
    VS_CHECK(cuDevicePrimaryCtxRetain(&context, device));
    VS_CHECK(cuCtxSetCurrent(context));
    VS_CHECK(cuModuleLoadData(&module, "preload_offload_spill kernels"));
    VS_CHECK(cuModuleGetFunction(&fn_fill, module, "sim_fill_u32"));
    VS_CHECK(cuStreamCreate(&streams[0], CU_STREAM_NON_BLOCKING));
    streams[1] = NULL;

    /* The working set, every buffer written from the host: the faults may
     * already hit here (spills start once the device and the pool are
     * full), and a buffer whose first write failed is written again. */
    for (unsigned i = 0; i < count; i++) {
        CUdeviceptr ptr = 0;
        vs_test_set_phase("cuMemAlloc_v2");
        CUresult rc;
        RETRY(rc, "cuMemAlloc_v2", i, cuMemAlloc_v2(&ptr, buffer_bytes));
        VS_EXPECT(rc == CUDA_SUCCESS, "cuMemAlloc_v2 of buffer %u: %d", i, (int)rc);
        if (rc != CUDA_SUCCESS)
            break;
        buffers[buffer_count++] = (vs_tracked_t){.ptr = ptr};
        vs_test_set_phase("initial cuMemcpyHtoD_v2");
        pattern_fill(host_pattern, 0x100u + i);
        RETRY(rc, "initial cuMemcpyHtoD_v2", i, cuMemcpyHtoD_v2(ptr, host_pattern, buffer_bytes));
        VS_EXPECT(rc == CUDA_SUCCESS, "the first write of buffer %u: %d", i, (int)rc);
        vs_tracked_write(&buffers[i], 0x100u + i, rc);
    }
    pthread_t probe;
    bool probing = max_alloc_wait_ms > 0 && pthread_create(&probe, NULL, probe_allocations, context) == 0;
    VS_EXPECT(probing || max_alloc_wait_ms == 0, "cannot start the allocation probe");
    for (unsigned round = 0; round < rounds && vs_test_failure_count() == 0; round++)
        run_round(round);
    if (probing) {
        atomic_store(&probe_stop, true);
        pthread_join(probe, NULL);
        double worst_ms = (double)atomic_load(&probe_worst_ns) / 1e6;
        fprintf(stderr, "preload_offload_spill: %lu allocate-and-free pairs beside the rounds, the slowest %.1f ms\n",
                (unsigned long)atomic_load(&probe_pairs), worst_ms);
        VS_EXPECT(atomic_load(&probe_pairs) >= 10, "only %lu probe pairs ran", (unsigned long)atomic_load(&probe_pairs));
        VS_EXPECT(worst_ms <= max_alloc_wait_ms,
                  "an allocate-and-free pair took %.1f ms (at most %u): it waited for disk I/O", worst_ms,
                  max_alloc_wait_ms);
    }

    vs_test_set_phase("cuCtxSynchronize before verifying");
    CUresult rc;
    RETRY(rc, "cuCtxSynchronize", 0, cuCtxSynchronize());
    VS_EXPECT(rc == CUDA_SUCCESS, "cuCtxSynchronize: %d", (int)rc);
    for (unsigned i = 0; i < buffer_count; i++)
        read_and_compare(i, "cuMemcpyDtoH_v2 of a buffer (verify)");
    for (unsigned k = 0; k < expected_count; k++)
        VS_EXPECT(error_seen(expected[k]), "no operation returned error %d, which the injected fault should cause",
               (int)expected[k]);
    for (unsigned i = 0; i < buffer_count; i++) {
        vs_test_set_phase("cuMemFree_v2");
        VS_EXPECT(cuMemFree_v2(buffers[i].ptr) == CUDA_SUCCESS, "cuMemFree_v2 of buffer %u", i);
    }

    fprintf(stderr,
            "preload_offload_spill: %u buffers of %u MiB, %lu operations succeeded, %lu returned errors, "
            "%lu MiB compared, %lu failures\n",
            buffer_count, mib, op_successes, op_errors, bytes_compared_mib, vs_test_failure_count());
    alarm(0);
    return vs_test_failure_count() == 0 ? 0 : 1;
}

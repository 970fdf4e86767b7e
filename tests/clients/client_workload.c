/* client_workload.c: the fill/checksum workload every test client runs.
 *
 * Entry point: `client_main`. It allocates buffers, fills them with
 * `sim_fill_u32`, checksums them with `sim_checksum_u32` after every other
 * buffer has been filled (so that under a memory limit each buffer is evicted
 * and restored in between), round-trips a host pattern through one buffer, and
 * compares every result with the value computed on the host. With
 * `--alloc-until-oom` it instead allocates until the driver refuses and
 * reports how many allocations succeeded and what `cuMemGetInfo` says.
 */
#include "client_driver.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct client_options_s {
    unsigned buffers;
    unsigned mib;
    unsigned rounds;
    unsigned streams;
    unsigned hold_ms; /* keep the buffers this long before freeing them */
    bool alloc_until_oom;
    long expect_count; /* -1: no expectation */
    unsigned long long expect_total_mib; /* 0: no expectation */
} client_options_t;

static void client_usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--buffers N] [--mib M] [--rounds R] [--streams S] [--hold-ms T]\n"
            "       %s --alloc-until-oom [--mib M] [--expect-count K] [--expect-total-mib T]\n",
            argv0, argv0);
}

static int client_parse(int argc, char **argv, client_options_t *opt)
{
    *opt = (client_options_t){.buffers = 8, .mib = 4, .rounds = 2, .streams = 2, .expect_count = -1};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--alloc-until-oom") == 0) {
            opt->alloc_until_oom = true;
            continue;
        }
        if (value == NULL)
            return -1;
        unsigned long long number = strtoull(value, NULL, 10);
        if (strcmp(arg, "--buffers") == 0)
            opt->buffers = (unsigned)number;
        else if (strcmp(arg, "--mib") == 0)
            opt->mib = (unsigned)number;
        else if (strcmp(arg, "--rounds") == 0)
            opt->rounds = (unsigned)number;
        else if (strcmp(arg, "--streams") == 0)
            opt->streams = (unsigned)number;
        else if (strcmp(arg, "--hold-ms") == 0)
            opt->hold_ms = (unsigned)number;
        else if (strcmp(arg, "--expect-count") == 0)
            opt->expect_count = (long)number;
        else if (strcmp(arg, "--expect-total-mib") == 0)
            opt->expect_total_mib = number;
        else
            return -1;
        i++;
    }
    if (opt->buffers == 0 || opt->mib == 0 || opt->streams == 0)
        return -1;
    return 0;
}

static const char *client_error_name(CUresult status)
{
    switch (status) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    default: return "another CUDA error";
    }
}

#define CLIENT_CHECK(call)                                                           \
    do {                                                                             \
        CUresult client_status_ = (call);                                            \
        if (client_status_ != CUDA_SUCCESS) {                                        \
            fprintf(stderr, "client[%s]: %s failed: %s (%d)\n", driver->entry_path,  \
                    #call, client_error_name(client_status_), (int)client_status_);  \
            goto out;                                                                \
        }                                                                            \
    } while (0)

static uint32_t client_fill_value(uint64_t index, uint32_t seed)
{
    return seed ^ (uint32_t)(index * 2654435761u);
}

static uint64_t client_expected_checksum(uint64_t count, uint32_t seed)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < count; i++)
        sum += (uint64_t)client_fill_value(i, seed) * (i + 1);
    return sum;
}

static uint32_t client_seed(unsigned round, unsigned buffer)
{
    return 0x9e3779b9u * (round + 1) + 0x85ebca6bu * (buffer + 1);
}

static int client_alloc_until_oom(const client_driver_t *driver, const client_options_t *opt)
{
    enum { MAX_BUFFERS = 4096 };
    static CUdeviceptr buffers[MAX_BUFFERS];
    size_t bytes = (size_t)opt->mib << 20;
    size_t free_bytes = 0, total_bytes = 0;
    long count = 0;
    int exit_status = 1;
    CUresult refusal = CUDA_SUCCESS;

    while (count < MAX_BUFFERS) {
        refusal = driver->cuMemAlloc(&buffers[count], bytes);
        if (refusal != CUDA_SUCCESS)
            break;
        count++;
    }
    CLIENT_CHECK(driver->cuMemGetInfo(&free_bytes, &total_bytes));
    printf("client[%s]: allocated %ld x %u MiB, then %s; cuMemGetInfo total %zu MiB, free %zu MiB\n",
           driver->entry_path, count, opt->mib, client_error_name(refusal), total_bytes >> 20,
           free_bytes >> 20);
    exit_status = 0;
    if (refusal != CUDA_ERROR_OUT_OF_MEMORY) {
        fprintf(stderr, "client[%s]: expected CUDA_ERROR_OUT_OF_MEMORY\n", driver->entry_path);
        exit_status = 1;
    }
    if (opt->expect_count >= 0 && count != opt->expect_count) {
        fprintf(stderr, "client[%s]: expected %ld allocations, got %ld\n", driver->entry_path,
                opt->expect_count, count);
        exit_status = 1;
    }
    if (opt->expect_total_mib != 0 && (total_bytes >> 20) != opt->expect_total_mib) {
        fprintf(stderr, "client[%s]: expected a total of %llu MiB\n", driver->entry_path,
                opt->expect_total_mib);
        exit_status = 1;
    }
out:
    for (long i = 0; i < count; i++)
        driver->cuMemFree(buffers[i]);
    return exit_status;
}

static int client_checksum_workload(const client_driver_t *driver, CUfunction fill, CUfunction checksum,
                                    const client_options_t *opt)
{
    size_t bytes = (size_t)opt->mib << 20;
    uint64_t count = bytes / sizeof(uint32_t);
    CUdeviceptr *buffers = calloc(opt->buffers, sizeof(*buffers));
    CUstream *streams = calloc(opt->streams, sizeof(*streams));
    CUevent *filled = calloc(opt->streams, sizeof(*filled));
    uint64_t *sums = calloc(opt->buffers, sizeof(*sums));
    uint32_t *pattern = malloc(bytes);
    uint32_t *readback = malloc(bytes);
    CUdeviceptr results = 0;
    unsigned mismatches = 0;
    int exit_status = 1;

    if (buffers == NULL || streams == NULL || filled == NULL || sums == NULL || pattern == NULL || readback == NULL)
        goto out;
    for (unsigned s = 0; s < opt->streams; s++) {
        CLIENT_CHECK(driver->cuStreamCreate(&streams[s], CU_STREAM_NON_BLOCKING));
        CLIENT_CHECK(driver->cuEventCreate(&filled[s], CU_EVENT_DISABLE_TIMING));
    }
    CLIENT_CHECK(driver->cuMemAlloc(&results, opt->buffers * sizeof(uint64_t)));
    for (unsigned b = 0; b < opt->buffers; b++)
        CLIENT_CHECK(driver->cuMemAlloc(&buffers[b], bytes));

    for (unsigned round = 0; round < opt->rounds; round++) {
        for (unsigned b = 0; b < opt->buffers; b++) {
            uint32_t seed = client_seed(round, b);
            void *args[] = {&buffers[b], &count, &seed};
            CLIENT_CHECK(driver->cuLaunchKernel(fill, 1, 1, 1, 256, 1, 1, 0, streams[b % opt->streams],
                                                args, NULL));
        }
        /* Each buffer is checksummed on another stream than the one that
         * filled it: the checksum streams wait for every fill. */
        for (unsigned s = 0; s < opt->streams; s++)
            CLIENT_CHECK(driver->cuEventRecord(filled[s], streams[s]));
        for (unsigned s = 0; s < opt->streams; s++)
            for (unsigned t = 0; t < opt->streams; t++)
                CLIENT_CHECK(driver->cuStreamWaitEvent(streams[s], filled[t], 0));
        for (unsigned b = 0; b < opt->buffers; b++) {
            CUdeviceptr out = results + b * sizeof(uint64_t);
            void *args[] = {&buffers[b], &count, &out};
            CLIENT_CHECK(driver->cuLaunchKernel(checksum, 1, 1, 1, 256, 1, 1, 0,
                                                streams[(b + 1) % opt->streams], args, NULL));
        }
        for (unsigned s = 0; s < opt->streams; s++)
            CLIENT_CHECK(driver->cuStreamSynchronize(streams[s]));
        CLIENT_CHECK(driver->cuMemcpyDtoH(sums, results, opt->buffers * sizeof(uint64_t)));
        for (unsigned b = 0; b < opt->buffers; b++) {
            uint64_t expected = client_expected_checksum(count, client_seed(round, b));
            if (sums[b] != expected) {
                fprintf(stderr, "client[%s]: round %u buffer %u checksum %#" PRIx64 ", expected %#" PRIx64 "\n",
                        driver->entry_path, round, b, sums[b], expected);
                mismatches++;
            }
        }
    }

    /* A host pattern through the first buffer, read back after every other
     * buffer has been written again. */
    for (uint64_t i = 0; i < count; i++)
        pattern[i] = (uint32_t)(i * 0x01000193u) ^ 0xa5a5a5a5u;
    CLIENT_CHECK(driver->cuMemcpyHtoD(buffers[0], pattern, bytes));
    for (unsigned b = 1; b < opt->buffers; b++) {
        uint32_t seed = client_seed(opt->rounds, b);
        void *args[] = {&buffers[b], &count, &seed};
        CLIENT_CHECK(driver->cuLaunchKernel(fill, 1, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    }
    CLIENT_CHECK(driver->cuCtxSynchronize());
    CLIENT_CHECK(driver->cuMemcpyDtoH(readback, buffers[0], bytes));
    if (memcmp(pattern, readback, bytes) != 0) {
        fprintf(stderr, "client[%s]: host pattern changed on its way through device memory\n",
                driver->entry_path);
        mismatches++;
    }

    printf("client[%s]: %u buffers x %u MiB, %u rounds, %u streams: %s\n", driver->entry_path, opt->buffers,
           opt->mib, opt->rounds, opt->streams, mismatches == 0 ? "checksums OK" : "MISMATCH");
    exit_status = mismatches == 0 ? 0 : 1;
    fflush(stdout);
    /* A program that keeps its memory for a while: what `vramshim dump`
     * attaches to. */
    if (opt->hold_ms > 0) {
        struct timespec hold = {.tv_sec = opt->hold_ms / 1000, .tv_nsec = (long)(opt->hold_ms % 1000) * 1000000L};
        while (nanosleep(&hold, &hold) != 0) {
        }
    }
out:
    if (buffers != NULL) {
        for (unsigned b = 0; b < opt->buffers; b++)
            if (buffers[b] != 0)
                driver->cuMemFree(buffers[b]);
    }
    if (results != 0)
        driver->cuMemFree(results);
    if (streams != NULL) {
        for (unsigned s = 0; s < opt->streams; s++) {
            if (streams[s] != NULL)
                driver->cuStreamDestroy(streams[s]);
            if (filled != NULL && filled[s] != NULL)
                driver->cuEventDestroy(filled[s]);
        }
    }
    free(buffers);
    free(streams);
    free(filled);
    free(sums);
    free(pattern);
    free(readback);
    return exit_status;
}

int client_main(const client_driver_t *driver, int argc, char **argv)
{
    static const char image[] = "simcuda test module";
    client_options_t opt;
    CUdevice device = 0;
    CUcontext context = NULL;
    CUmodule module = NULL;
    CUfunction fill = NULL, checksum = NULL;
    int version = 0;
    int exit_status = 2;

    if (client_parse(argc, argv, &opt) != 0) {
        client_usage(argv[0]);
        return 2;
    }
    exit_status = 1;
    CLIENT_CHECK(driver->cuInit(0));
    CLIENT_CHECK(driver->cuDriverGetVersion(&version));
    CLIENT_CHECK(driver->cuDeviceGet(&device, 0));
    CLIENT_CHECK(driver->cuDevicePrimaryCtxRetain(&context, device));
    CLIENT_CHECK(driver->cuCtxSetCurrent(context));
    if (opt.alloc_until_oom) {
        exit_status = client_alloc_until_oom(driver, &opt);
    } else {
        CLIENT_CHECK(driver->cuModuleLoadData(&module, image));
        CLIENT_CHECK(driver->cuModuleGetFunction(&fill, module, "sim_fill_u32"));
        CLIENT_CHECK(driver->cuModuleGetFunction(&checksum, module, "sim_checksum_u32"));
        exit_status = client_checksum_workload(driver, fill, checksum, &opt);
    }
    driver->cuDevicePrimaryCtxRelease(device);
out:
    return exit_status;
}

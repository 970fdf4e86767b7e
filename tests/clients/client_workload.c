/* client_workload.c: the fill/checksum workload every test client runs.
 *
 * Entry point: `client_main`. It allocates buffers, fills them with
 * `sim_fill_u32`, checksums them with `sim_checksum_u32` after every other
 * buffer has been filled (so that under a memory limit each buffer is evicted
 * and restored in between), round-trips a host pattern through one buffer, and
 * compares every result with the value computed on the host. With
 * `--alloc-until-oom` it instead allocates until the driver refuses and
 * reports how many allocations succeeded and what `cuMemGetInfo` says.
 *
 * With `--peer` it runs on two devices with peer access enabled both ways
 * (`client_peer_workload`): each device fills its own buffers, kernels on
 * each device overwrite half of the other's and checksum all of them, peer
 * copies (`cuMemcpyPeer`, `cuMemcpyPeerAsync`) move buffers across, and
 * every buffer is read back whole at the end and compared with what it must
 * hold. With `--peer-then-disable`, device 1 then disables its access to
 * device 0 and reads device 0's buffers again: that must fault (SIGSEGV on
 * the simulated driver), as it would without a shim; exit 1 if it does not.
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
    bool peer; /* the two-device workload with peer access both ways */
    bool peer_then_disable; /* ... then a read after disabling, which must fault */
    long expect_count; /* -1: no expectation */
    unsigned long long expect_total_mib; /* 0: no expectation */
} client_options_t;

static void client_usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--buffers N] [--mib M] [--rounds R] [--streams S] [--hold-ms T]\n"
            "       %s --alloc-until-oom [--mib M] [--expect-count K] [--expect-total-mib T]\n"
            "       %s --peer|--peer-then-disable [--buffers N] [--mib M] [--rounds R]\n",
            argv0, argv0, argv0);
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
        if (strcmp(arg, "--peer") == 0) {
            opt->peer = true;
            continue;
        }
        if (strcmp(arg, "--peer-then-disable") == 0) {
            opt->peer = opt->peer_then_disable = true;
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

/* ---- Two devices with peer access both ways ------------------------------ */

#define CLIENT_PEER_DEVICES 2

typedef struct client_peer_s {
    CUcontext ctx[CLIENT_PEER_DEVICES];
    CUfunction fill[CLIENT_PEER_DEVICES], checksum[CLIENT_PEER_DEVICES];
    CUstream stream[CLIENT_PEER_DEVICES];
    CUdeviceptr results[CLIENT_PEER_DEVICES]; /* 2 x buffers sums, on that device */
    CUdeviceptr *buffers[CLIENT_PEER_DEVICES];
    uint32_t *seed[CLIENT_PEER_DEVICES]; /* what each buffer must hold: client_fill_value(i, seed) */
} client_peer_t;

static uint32_t client_peer_seed(unsigned round, unsigned device, unsigned buffer, unsigned step)
{
    return client_seed(round * 4 + step, buffer) ^ (0x27d4eb2fu * (device + 1));
}

/* Fills buffers[owner][b] from `device` (its own or its peer's memory). */
static int client_peer_fill(const client_driver_t *driver, client_peer_t *p, unsigned device, unsigned owner,
                            unsigned b, uint64_t count, uint32_t seed)
{
    CLIENT_CHECK(driver->cuCtxSetCurrent(p->ctx[device]));
    void *args[] = {&p->buffers[owner][b], &count, &seed};
    CLIENT_CHECK(driver->cuLaunchKernel(p->fill[device], 1, 1, 1, 256, 1, 1, 0, p->stream[device], args, NULL));
    p->seed[owner][b] = seed;
    return 0;
out:
    return -1;
}

static int client_peer_sync(const client_driver_t *driver, client_peer_t *p)
{
    for (unsigned d = 0; d < CLIENT_PEER_DEVICES; d++) {
        CLIENT_CHECK(driver->cuCtxSetCurrent(p->ctx[d]));
        CLIENT_CHECK(driver->cuStreamSynchronize(p->stream[d]));
    }
    return 0;
out:
    return -1;
}

/* Kernels on each device checksum every buffer of both devices; the sums
 * are compared with the seeds. Returns the mismatches, or -1. */
static int client_peer_check_sums(const client_driver_t *driver, client_peer_t *p, const client_options_t *opt,
                                  uint64_t count, unsigned round, uint64_t *sums)
{
    int mismatches = 0;
    for (unsigned d = 0; d < CLIENT_PEER_DEVICES; d++) {
        CLIENT_CHECK(driver->cuCtxSetCurrent(p->ctx[d]));
        for (unsigned o = 0; o < CLIENT_PEER_DEVICES; o++) {
            for (unsigned b = 0; b < opt->buffers; b++) {
                CUdeviceptr out = p->results[d] + (o * opt->buffers + b) * sizeof(uint64_t);
                void *args[] = {&p->buffers[o][b], &count, &out};
                CLIENT_CHECK(driver->cuLaunchKernel(p->checksum[d], 1, 1, 1, 256, 1, 1, 0, p->stream[d], args, NULL));
            }
        }
    }
    if (client_peer_sync(driver, p) != 0)
        goto out;
    for (unsigned d = 0; d < CLIENT_PEER_DEVICES; d++) {
        CLIENT_CHECK(driver->cuMemcpyDtoH(sums, p->results[d], CLIENT_PEER_DEVICES * opt->buffers * sizeof(uint64_t)));
        for (unsigned o = 0; o < CLIENT_PEER_DEVICES; o++) {
            for (unsigned b = 0; b < opt->buffers; b++) {
                uint64_t got = sums[o * opt->buffers + b];
                uint64_t expected = client_expected_checksum(count, p->seed[o][b]);
                if (got != expected) {
                    fprintf(stderr,
                            "client[%s]: round %u: device %u's checksum of device %u buffer %u is %#" PRIx64
                            ", expected %#" PRIx64 "\n",
                            driver->entry_path, round, d, o, b, got, expected);
                    mismatches++;
                }
            }
        }
    }
    return mismatches;
out:
    return -1;
}

static int client_peer_workload(const client_driver_t *driver, const client_options_t *opt)
{
    static const char image[] = "simcuda test module";
    size_t bytes = (size_t)opt->mib << 20;
    uint64_t count = bytes / sizeof(uint32_t);
    client_peer_t p = {0};
    uint64_t *sums = calloc(CLIENT_PEER_DEVICES * opt->buffers, sizeof(*sums));
    uint32_t *readback = malloc(bytes);
    unsigned long mismatches = 0;
    unsigned long peer_copies = 0, peer_kernels = 0;
    int exit_status = 1, devices = 0;

    if (sums == NULL || readback == NULL)
        goto out;
    CLIENT_CHECK(driver->cuDeviceGetCount(&devices));
    if (devices < CLIENT_PEER_DEVICES) {
        fprintf(stderr, "client[%s]: --peer needs %d devices, the driver has %d\n", driver->entry_path,
                CLIENT_PEER_DEVICES, devices);
        goto out;
    }
    for (unsigned d = 0; d < CLIENT_PEER_DEVICES; d++) {
        CUmodule module;
        CUdevice device;
        CLIENT_CHECK(driver->cuDeviceGet(&device, (int)d));
        CLIENT_CHECK(driver->cuDevicePrimaryCtxRetain(&p.ctx[d], device));
        CLIENT_CHECK(driver->cuCtxSetCurrent(p.ctx[d]));
        CLIENT_CHECK(driver->cuModuleLoadData(&module, image));
        CLIENT_CHECK(driver->cuModuleGetFunction(&p.fill[d], module, "sim_fill_u32"));
        CLIENT_CHECK(driver->cuModuleGetFunction(&p.checksum[d], module, "sim_checksum_u32"));
        CLIENT_CHECK(driver->cuStreamCreate(&p.stream[d], CU_STREAM_NON_BLOCKING));
        CLIENT_CHECK(driver->cuMemAlloc(&p.results[d], CLIENT_PEER_DEVICES * opt->buffers * sizeof(uint64_t)));
        p.buffers[d] = calloc(opt->buffers, sizeof(CUdeviceptr));
        p.seed[d] = calloc(opt->buffers, sizeof(uint32_t));
        if (p.buffers[d] == NULL || p.seed[d] == NULL)
            goto out;
        for (unsigned b = 0; b < opt->buffers; b++)
            CLIENT_CHECK(driver->cuMemAlloc(&p.buffers[d][b], bytes));
    }
    /* Peer access both ways, after the buffers exist. */
    for (unsigned d = 0; d < CLIENT_PEER_DEVICES; d++) {
        int can = 0;
        CLIENT_CHECK(driver->cuDeviceCanAccessPeer(&can, (CUdevice)d, (CUdevice)(1 - d)));
        if (!can) {
            fprintf(stderr, "client[%s]: device %u cannot access device %u\n", driver->entry_path, d, 1 - d);
            goto out;
        }
        CLIENT_CHECK(driver->cuCtxSetCurrent(p.ctx[d]));
        CLIENT_CHECK(driver->cuCtxEnablePeerAccess(p.ctx[1 - d], 0));
    }
    /* At once, each device writes its peer's first buffer: under a memory
     * limit that one is still where its allocation put it, mapped before
     * peer access existed. */
    for (unsigned d = 0; d < CLIENT_PEER_DEVICES; d++) {
        if (client_peer_fill(driver, &p, d, 1 - d, 0, count, client_peer_seed(0, d, 0, 3)) != 0)
            goto out;
        peer_kernels++;
    }
    if (client_peer_sync(driver, &p) != 0)
        goto out;

    for (unsigned round = 0; round < opt->rounds; round++) {
        /* Each device fills its own buffers. */
        for (unsigned d = 0; d < CLIENT_PEER_DEVICES; d++)
            for (unsigned b = 0; b < opt->buffers; b++)
                if (client_peer_fill(driver, &p, d, d, b, count, client_peer_seed(round, d, b, 0)) != 0)
                    goto out;
        if (client_peer_sync(driver, &p) != 0)
            goto out;
        /* Each device overwrites every other buffer of its peer. */
        for (unsigned d = 0; d < CLIENT_PEER_DEVICES; d++) {
            for (unsigned b = (round + d) % 2; b < opt->buffers; b += 2) {
                if (client_peer_fill(driver, &p, d, 1 - d, b, count, client_peer_seed(round, d, b, 1)) != 0)
                    goto out;
                peer_kernels++;
            }
        }
        if (client_peer_sync(driver, &p) != 0)
            goto out;
        int bad = client_peer_check_sums(driver, &p, opt, count, round, sums);
        if (bad < 0)
            goto out;
        mismatches += (unsigned)bad;
        peer_kernels += opt->buffers * CLIENT_PEER_DEVICES;
        /* Peer copies: device 1's even buffers to device 0 (synchronous),
         * device 0's odd buffers to device 1 (on device 1's stream). */
        for (unsigned b = 0; b < opt->buffers; b++) {
            unsigned to = b % 2 == 0 ? 0 : 1, from = 1 - to;
            if (b % 2 == 0) {
                CLIENT_CHECK(driver->cuCtxSetCurrent(p.ctx[0]));
                CLIENT_CHECK(driver->cuMemcpyPeer(p.buffers[to][b], p.ctx[to], p.buffers[from][b], p.ctx[from], bytes));
            } else {
                CLIENT_CHECK(driver->cuCtxSetCurrent(p.ctx[1]));
                CLIENT_CHECK(driver->cuMemcpyPeerAsync(p.buffers[to][b], p.ctx[to], p.buffers[from][b], p.ctx[from],
                                                       bytes, p.stream[1]));
            }
            p.seed[to][b] = p.seed[from][b];
            peer_copies++;
        }
        if (client_peer_sync(driver, &p) != 0)
            goto out;
        bad = client_peer_check_sums(driver, &p, opt, count, round, sums);
        if (bad < 0)
            goto out;
        mismatches += (unsigned)bad;
        peer_kernels += opt->buffers * CLIENT_PEER_DEVICES;
    }

    /* Every byte of every buffer, read back from the host. */
    for (unsigned d = 0; d < CLIENT_PEER_DEVICES; d++) {
        CLIENT_CHECK(driver->cuCtxSetCurrent(p.ctx[d]));
        for (unsigned b = 0; b < opt->buffers; b++) {
            CLIENT_CHECK(driver->cuMemcpyDtoH(readback, p.buffers[d][b], bytes));
            for (uint64_t i = 0; i < count; i++) {
                if (readback[i] != client_fill_value(i, p.seed[d][b])) {
                    fprintf(stderr, "client[%s]: device %u buffer %u word %" PRIu64 " is %#x, expected %#x\n",
                            driver->entry_path, d, b, i, readback[i], client_fill_value(i, p.seed[d][b]));
                    mismatches++;
                    break;
                }
            }
        }
    }
    printf("client[%s]: peer, %d devices x %u buffers x %u MiB, %u rounds, %lu kernels across devices, "
           "%lu peer copies: %s\n",
           driver->entry_path, CLIENT_PEER_DEVICES, opt->buffers, opt->mib, opt->rounds, peer_kernels, peer_copies,
           mismatches == 0 ? "checksums OK" : "MISMATCH");
    exit_status = mismatches == 0 ? 0 : 1;
    if (opt->peer_then_disable && exit_status == 0) {
        fflush(stdout);
        exit_status = 1;
        CLIENT_CHECK(driver->cuCtxSetCurrent(p.ctx[1]));
        CLIENT_CHECK(driver->cuCtxDisablePeerAccess(p.ctx[0]));
        /* Device 0's last buffer, read back last of its buffers above, is
         * still resident under any limit that holds one: its mapping was
         * granted to device 1 and must have lost that grant now. */
        CUdeviceptr out = p.results[1];
        void *args[] = {&p.buffers[0][opt->buffers - 1], &count, &out};
        CLIENT_CHECK(driver->cuLaunchKernel(p.checksum[1], 1, 1, 1, 256, 1, 1, 0, p.stream[1], args, NULL));
        CLIENT_CHECK(driver->cuStreamSynchronize(p.stream[1]));
        fprintf(stderr, "client[%s]: device 1 read device 0's memory after disabling peer access\n",
                driver->entry_path);
    }
out:
    for (unsigned d = 0; d < CLIENT_PEER_DEVICES; d++) {
        if (p.ctx[d] == NULL)
            continue;
        driver->cuCtxSetCurrent(p.ctx[d]);
        for (unsigned b = 0; p.buffers[d] != NULL && b < opt->buffers; b++)
            if (p.buffers[d][b] != 0)
                driver->cuMemFree(p.buffers[d][b]);
        if (p.results[d] != 0)
            driver->cuMemFree(p.results[d]);
        if (p.stream[d] != NULL)
            driver->cuStreamDestroy(p.stream[d]);
        free(p.buffers[d]);
        free(p.seed[d]);
        driver->cuDevicePrimaryCtxRelease((CUdevice)d);
    }
    free(sums);
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
    if (opt.peer) {
        exit_status = client_peer_workload(driver, &opt);
    } else if (opt.alloc_until_oom) {
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

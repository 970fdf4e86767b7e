/* preload_offload_async_load.c: loading a model bigger than VRAM_LIMIT with
 * asynchronous copies, as PyTorch loads weights (cudaMemcpyAsync).
 *
 *   VRAM_LIMIT=32M preload_offload_async_load pageable|pinned [--buffers N] [--mib M]
 *
 * N buffers of M MiB (several times the limit) are allocated, then each is
 * written whole with cuMemcpyHtoDAsync on a created stream: from pageable
 * memory (refilled at once after each call, as the driver allows), or from
 * one pinned buffer (waited for with cuStreamSynchronize before it is
 * refilled, so the stream is idle at each copy). Then a kernel copies each
 * buffer into the next (from the last pair down, so that each source is
 * still the loaded one), and each buffer is read back whole and compared.
 *
 * Under the shim, a copy into an allocation that has no room on the device
 * lands in its host copy: the bytes cross the link once, when a kernel
 * first needs them. The Meson test checks that with simcuda's report (the
 * host-to-device bytes, tests/preload/meson.build).
 *
 * Exit status: 0 when every byte read back is right, 1 otherwise, 2 on a
 * usage error, 3 when the watchdog fired.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload_util.h"

#define MiB (1ull << 20)
#define MAX_BUFFERS 64

static uint32_t expected_word(unsigned buffer, uint64_t word)
{
    uint32_t x = (uint32_t)(buffer * 2654435761u) ^ (uint32_t)(word * 2246822519u);
    return x ^ (x >> 15);
}

int main(int argc, char **argv)
{
    unsigned count = 12, mib = 8;
    bool pinned = false;
    if (argc < 2 || (strcmp(argv[1], "pageable") != 0 && strcmp(argv[1], "pinned") != 0)) {
        fprintf(stderr, "usage: %s pageable|pinned [--buffers N] [--mib M]\n", argv[0]);
        return 2;
    }
    pinned = strcmp(argv[1], "pinned") == 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        unsigned long v = strtoul(argv[i + 1], NULL, 10);
        if (strcmp(argv[i], "--buffers") == 0 && v >= 2 && v <= MAX_BUFFERS)
            count = (unsigned)v;
        else if (strcmp(argv[i], "--mib") == 0 && v >= 1 && v <= 256)
            mib = (unsigned)v;
        else {
            fprintf(stderr, "usage: %s pageable|pinned [--buffers 2..64] [--mib 1..256]\n", argv[0]);
            return 2;
        }
    }
    vs_test_watchdog_start(240);
    uint64_t bytes = (uint64_t)mib * MiB, words = bytes / 4;

    CUdevice device;
    CUcontext context;
    CUmodule module;
    CUfunction copy;
    CUstream stream;
    VS_CHECK(cuInit(0));
    VS_CHECK(cuDeviceGet(&device, 0));
    VS_CHECK(cuDevicePrimaryCtxRetain(&context, device));
    VS_CHECK(cuCtxSetCurrent(context));
    VS_CHECK(cuModuleLoadData(&module, "preload_offload_async_load kernels"));
    VS_CHECK(cuModuleGetFunction(&copy, module, "sim_copy"));
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    uint32_t *source = NULL;
    if (pinned)
        VS_CHECK(cuMemHostAlloc((void **)&source, bytes, 0));
    else
        source = malloc(bytes);
    uint32_t *readback = malloc(bytes);
    if (source == NULL || readback == NULL) {
        fprintf(stderr, "preload_offload_async_load: out of host memory\n");
        return 1;
    }

    /* The load: every byte written by an asynchronous copy. */
    CUdeviceptr buffers[MAX_BUFFERS];
    for (unsigned b = 0; b < count; b++) {
        VS_CHECK(cuMemAlloc_v2(&buffers[b], bytes));
        for (uint64_t w = 0; w < words; w++)
            source[w] = expected_word(b, w);
        VS_CHECK(cuMemcpyHtoDAsync_v2(buffers[b], source, bytes, stream));
        if (pinned)
            VS_CHECK(cuStreamSynchronize(stream)); /* before the source is written again */
    }
    VS_CHECK(cuStreamSynchronize(stream));

    /* Use: buffer b gets buffer b - 1's bytes, from the last pair down. */
    for (unsigned b = count - 1; b >= 1; b--) {
        CUdeviceptr dst = buffers[b], src = buffers[b - 1];
        uint64_t n = bytes;
        void *params[] = {&dst, &src, &n};
        VS_CHECK(cuLaunchKernel(copy, 64, 1, 1, 256, 1, 1, 0, stream, params, NULL));
    }
    VS_CHECK(cuStreamSynchronize(stream));

    /* Every byte back. */
    unsigned long wrong_buffers = 0;
    for (unsigned b = 0; b < count; b++) {
        VS_CHECK(cuMemcpyDtoH_v2(readback, buffers[b], bytes));
        uint64_t wrong = 0, first = words;
        for (uint64_t w = 0; w < words; w++) {
            uint32_t want = expected_word(b == 0 ? 0 : b - 1, w);
            if (readback[w] != want && wrong++ == 0)
                first = w;
        }
        VS_EXPECT(wrong == 0, "buffer %u: %llu of %llu words wrong, the first at word %llu", b,
                  (unsigned long long)wrong, (unsigned long long)words, (unsigned long long)first);
        wrong_buffers += wrong != 0;
    }
    for (unsigned b = 0; b < count; b++)
        VS_CHECK(cuMemFree_v2(buffers[b]));
    fprintf(stderr, "preload_offload_async_load: %u buffers of %u MiB loaded with cuMemcpyHtoDAsync from %s memory, "
                    "%lu wrong\n",
            count, mib, pinned ? "pinned" : "pageable", wrong_buffers);
    return vs_test_failure_count() == 0 ? 0 : 1;
}

/* patch_client.c: a program whose allocator helper (libvs_patcher.so)
 * writes a jump over the `cuMemAlloc` that `cuGetProcAddress` gives it
 * (under the shim: the shim's wrapper), then allocates more than
 * VRAM_LIMIT holds and checks every byte.
 *
 *   patch_client trampoline|resolve
 *
 * Each allocation must reach the helper's function and, through it, the
 * shim: the buffers are evicted under the limit (asked of the simulated
 * driver itself, past the shim) and come back byte-exact. Exit status 0
 * when all of that holds, 1 otherwise.
 */
#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patcher.h"
#include "simcuda.h"

#define BUFFERS 8
#define BUF_BYTES ((size_t)2 << 20)

#define CHECK_CU(call)                                                                             \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "patch_client:%d: %s failed: %d\n", __LINE__, #call, (int)rc_);       \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* Whether the first byte of `ptr` is mapped, asked of the simulated driver. */
static bool mapped(CUdeviceptr ptr)
{
    __typeof__(cuPointerGetAttribute) *attribute;
    void *fn = simcuda_entry_point("cuPointerGetAttribute");
    int ordinal;
    memcpy(&attribute, &fn, sizeof fn);
    return attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr) == CUDA_SUCCESS;
}

int main(int argc, char **argv)
{
    patcher_mode_t mode;
    if (argc == 2 && strcmp(argv[1], "trampoline") == 0) {
        mode = PATCHER_TRAMPOLINE;
    } else if (argc == 2 && strcmp(argv[1], "resolve") == 0) {
        mode = PATCHER_RESOLVE;
    } else {
        fprintf(stderr, "usage: patch_client trampoline|resolve\n");
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_CU(cuCtxSetCurrent(ctx));
    if (patcher_install(mode) != 0)
        return 1;

    CUdeviceptr buffers[BUFFERS];
    uint32_t *host = malloc(BUF_BYTES), *back = malloc(BUF_BYTES);
    for (int i = 0; i < BUFFERS; i++) {
        CHECK_CU(cuMemAlloc(&buffers[i], BUF_BYTES));
        for (size_t w = 0; w < BUF_BYTES / 4; w++)
            host[w] = (uint32_t)i * 2654435761u ^ (uint32_t)w;
        CHECK_CU(cuMemcpyHtoD(buffers[i], host, BUF_BYTES));
    }
    int failures = 0;
    unsigned long calls = patcher_calls_seen();
    if (calls != BUFFERS) {
        fprintf(stderr, "FAIL: the patcher's function saw %lu of %d allocations\n", calls, BUFFERS);
        failures++;
    }
    int evicted = 0;
    for (int i = 0; i < BUFFERS; i++)
        evicted += !mapped(buffers[i]);
    if (evicted == 0) {
        fprintf(stderr, "FAIL: nothing was evicted: the allocations did not reach the shim\n");
        failures++;
    }
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < BUFFERS; i++) {
            CHECK_CU(cuMemcpyDtoH(back, buffers[i], BUF_BYTES));
            for (size_t w = 0; w < BUF_BYTES / 4; w++) {
                if (back[w] != ((uint32_t)i * 2654435761u ^ (uint32_t)w)) {
                    fprintf(stderr, "FAIL: buffer %d word %zu: 0x%08x\n", i, w, back[w]);
                    failures++;
                    break;
                }
            }
        }
    }
    for (int i = 0; i < BUFFERS; i++)
        CHECK_CU(cuMemFree(buffers[i]));
    free(host);
    free(back);
    if (failures == 0)
        printf("patched cuMemAlloc (%s): %lu calls reached the patcher, %d of %d buffers evicted, all byte-exact\n",
               argv[1], calls, evicted, BUFFERS);
    return failures == 0 ? 0 : 1;
}

/* gpu_device_hash.c: the embedded `vramshim_content_hash` PTX on a real
 * GPU, through shim/device_hash.c: the driver must accept the PTX, and the
 * device's hash must equal the host's for every tail length and for
 * buffers large enough that the grid is clamped and threads loop.
 *
 * Fills the shim's real-function table from the driver it opens, as shim.c
 * does. Exits 77 (skipped) where no driver or no GPU answers.
 */
#include <cuda.h>

#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_hash.h"
#include "driver.h"

vs_real_t vs_real;

static void fill_random(unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (unsigned char)(seed >> 56);
    }
}

int main(void)
{
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver == NULL) {
        printf("gpu_device_hash: no libcuda.so.1 (%s): skipped\n", dlerror());
        return 77;
    }
#define VS_HOOK(family, symbol)                                                                    \
    do {                                                                                           \
        void *found = dlsym(driver, #symbol);                                                      \
        memcpy(&vs_real.symbol, &found, sizeof found);                                             \
    } while (0);
#define VS_DRIVER(symbol) VS_HOOK(driver, symbol)
#include "hooks.def"
#include "driver.def"
#undef VS_DRIVER
#undef VS_HOOK
    CUdevice device;
    CUcontext ctx;
    if (vs_real.cuInit == NULL || vs_real.cuInit(0) != CUDA_SUCCESS || vs_real.cuDeviceGet(&device, 0) != CUDA_SUCCESS
        || vs_real.cuDevicePrimaryCtxRetain(&ctx, device) != CUDA_SUCCESS
        || vs_real.cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        printf("gpu_device_hash: no GPU answers: skipped\n");
        return 77;
    }

    vs_device_hasher_t *h = NULL;
    int err = vs_device_hasher_create(0, 2, &h);
    if (err != 0) {
        printf("FAIL: vs_device_hasher_create: %d (the driver refused the embedded PTX?)\n", err);
        return 1;
    }
    CUstream stream;
    if (vs_real.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return 1;

    /* Tails of every length; a buffer one block-load long; buffers past the
     * grid's 1024 blocks of 256 threads × 8 words, where threads loop. */
    static const uint64_t sizes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 4095, 16384, (2u << 20) + 3,
                                     (64u << 20) + 5, (256u << 20) + 8, (1u << 30) + 1};
    int failures = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        uint64_t bytes = sizes[s];
        unsigned char *host = malloc(bytes + 8);
        CUdeviceptr data;
        if (host == NULL || vs_real.cuMemAlloc_v2(&data, bytes + 8) != CUDA_SUCCESS) {
            printf("FAIL: cannot allocate %" PRIu64 " bytes\n", bytes);
            return 1;
        }
        fill_random(host, bytes + 8, 7 + s);
        /* The 8 bytes past the end are on the device too and must not count. */
        if (vs_real.cuMemcpyHtoD_v2(data, host, bytes + 8) != CUDA_SUCCESS)
            return 1;
        /* A copy from pageable memory returns once the bytes are staged,
         * not once the DMA has landed (cuda.h, "API synchronization
         * behavior"), and the hasher's stream is non-blocking: without
         * this wait, the kernel raced the upload's last chunk on an H100
         * and hashed stale bytes at 2 MiB + 3. */
        if (vs_real.cuCtxSynchronize() != CUDA_SUCCESS)
            return 1;
        unsigned slot = (unsigned)(s % 2);
        CUresult rc = vs_device_hash_enqueue(h, slot, data, bytes, stream);
        if (rc == CUDA_SUCCESS)
            rc = vs_real.cuStreamSynchronize(stream);
        if (rc != CUDA_SUCCESS) {
            printf("FAIL: %" PRIu64 " bytes: CUresult %d\n", bytes, (int)rc);
            return 1;
        }
        vs_content_hash_t device_hash = vs_device_hash_result(h, slot, bytes);
        vs_content_hash_t host_hash = vs_content_hash(host, bytes);
        if (!vs_content_hash_equal(device_hash, host_hash)) {
            printf("FAIL: %" PRIu64 " bytes: device %016" PRIx64 " %016" PRIx64 ", host %016" PRIx64
                   " %016" PRIx64 "\n",
                   bytes, device_hash.lane[0], device_hash.lane[1], host_hash.lane[0], host_hash.lane[1]);
            failures++;
        }
        free(host);
        (void)vs_real.cuMemFree_v2(data);
    }
    vs_device_hasher_destroy(h);
    if (failures == 0)
        printf("gpu_device_hash: %zu sizes, device hash equals host hash\n", sizeof sizes / sizeof sizes[0]);
    return failures == 0 ? 0 : 1;
}

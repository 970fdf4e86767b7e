/* client_libcudart.c: a program linked against the real libcudart.
 *
 * It reaches the driver the way every CUDA application does, through the
 * toolkit's own runtime library, so it proves end to end that the simulated
 * driver answers libcudart's start-up (its ~440 `cuGetProcAddress` look-ups)
 * and that a shim sees runtime-level work. It allocates buffers of `--mib`
 * MiB with `cudaMalloc` until the runtime refuses (or `--buffers` of them),
 * round-trips a pattern through each with `cudaMemcpy`/`cudaMemset`, and
 * prints what `cudaMemGetInfo` reports. Exits 77 (skipped) where no GPU and
 * driver are present: libcudart needs the driver's private export tables,
 * which the simulated driver does not provide, so this runs on real GPUs only.
 */
#include <cuda_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    size_t mib = 16;
    int max_buffers = 4;
    long expect_count = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mib") == 0)
            mib = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--buffers") == 0)
            max_buffers = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--expect-count") == 0)
            expect_count = atol(argv[i + 1]);
    }
    int runtime_version = 0, driver_version = 0, devices = 0;
    cudaError_t status = cudaRuntimeGetVersion(&runtime_version);
    if (status == cudaSuccess)
        status = cudaDriverGetVersion(&driver_version);
    if (status == cudaSuccess)
        status = cudaGetDeviceCount(&devices);
    if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver ||
        (status == cudaSuccess && devices < 1)) {
        fprintf(stderr, "client[libcudart]: no GPU (%s): skipped\n", cudaGetErrorName(status));
        return 77;
    }
    if (status != cudaSuccess) {
        fprintf(stderr, "client[libcudart]: runtime start-up failed: %s\n", cudaGetErrorName(status));
        return 1;
    }
    size_t bytes = mib << 20;
    void **buffers = calloc((size_t)max_buffers, sizeof(*buffers));
    unsigned char *pattern = malloc(bytes), *readback = malloc(bytes);
    int count = 0, failures = 0;
    cudaError_t refusal = cudaSuccess;
    if (buffers == NULL || pattern == NULL || readback == NULL)
        return 1;
    for (; count < max_buffers; count++) {
        refusal = cudaMalloc(&buffers[count], bytes);
        if (refusal != cudaSuccess)
            break;
        memset(pattern, 0x30 + count, bytes);
        if (cudaMemset(buffers[count], 0x30 + count, bytes) != cudaSuccess)
            failures++;
    }
    for (int b = 0; b < count; b++) {
        memset(pattern, 0x30 + b, bytes);
        if (cudaMemcpy(readback, buffers[b], bytes, cudaMemcpyDeviceToHost) != cudaSuccess ||
            memcmp(pattern, readback, bytes) != 0)
            failures++;
    }
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
        failures++;
    printf("client[libcudart]: runtime %d, driver %d: %d x %zu MiB allocated (then %s); total %zu MiB, free %zu MiB; %s\n",
           runtime_version, driver_version, count, mib, cudaGetErrorName(refusal), total_bytes >> 20,
           free_bytes >> 20, failures == 0 ? "contents OK" : "MISMATCH");
    for (int b = 0; b < count; b++)
        cudaFree(buffers[b]);
    if (expect_count >= 0 && count != expect_count) {
        fprintf(stderr, "client[libcudart]: expected %ld allocations\n", expect_count);
        failures++;
    }
    return failures == 0 ? 0 : 1;
}

/* preload_threads.c: many threads launching on many streams while another
 * thread allocates and frees, under the shim in cap mode (and in the TSan
 * build). Every thread checks its own checksums; at the end the shim's
 * counted usage must be back to what is still allocated, and its launch
 * counter must have seen every launch. */
#include <pthread.h>
#include <stdatomic.h>

#include "preload_util.h"

#define THREADS 8
#define STREAMS 4
#define ROUNDS 50
#define WORDS 4096u

static CUcontext ctx;
static CUfunction fill_fn, checksum_fn;
static _Atomic int failures;
static _Atomic bool churn_stop;

/* What `sim_fill_u32` then `sim_checksum_u32` must produce, on the host. */
static uint64_t expected_checksum(uint32_t seed)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < WORDS; i++)
        sum += (uint64_t)(seed ^ (uint32_t)(i * 2654435761u)) * (i + 1);
    return sum;
}

static void *launcher(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    CUstream streams[STREAMS];
    CUdeviceptr bufs[STREAMS], sums[STREAMS];

    VS_CHECK(cuCtxSetCurrent(ctx));
    for (int s = 0; s < STREAMS; s++) {
        VS_CHECK(cuStreamCreate(&streams[s], CU_STREAM_NON_BLOCKING));
        VS_CHECK(cuMemAlloc(&bufs[s], WORDS * sizeof(uint32_t)));
        VS_CHECK(cuMemAlloc(&sums[s], sizeof(uint64_t)));
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int s = 0; s < STREAMS; s++) {
            uint64_t n = WORDS;
            uint32_t seed = id * 1000 + (uint32_t)r * 10 + (uint32_t)s;
            void *fill_args[] = {&bufs[s], &n, &seed};
            void *sum_args[] = {&bufs[s], &n, &sums[s]};
            VS_CHECK(cuLaunchKernel(fill_fn, 1, 1, 1, 64, 1, 1, 0, streams[s], fill_args, NULL));
            VS_CHECK(cuLaunchKernel(checksum_fn, 1, 1, 1, 64, 1, 1, 0, streams[s], sum_args, NULL));
        }
        for (int s = 0; s < STREAMS; s++) {
            uint64_t device_sum = 0;
            uint32_t seed = id * 1000 + (uint32_t)r * 10 + (uint32_t)s;
            VS_CHECK(cuStreamSynchronize(streams[s]));
            VS_CHECK(cuMemcpyDtoH(&device_sum, sums[s], sizeof device_sum));
            if (device_sum != expected_checksum(seed))
                failures++;
        }
    }
    for (int s = 0; s < STREAMS; s++) {
        VS_CHECK(cuStreamDestroy(streams[s]));
        VS_CHECK(cuMemFree(bufs[s]));
        VS_CHECK(cuMemFree(sums[s]));
    }
    return NULL;
}

static void *churn(void *arg)
{
    (void)arg;
    VS_CHECK(cuCtxSetCurrent(ctx));
    while (!atomic_load(&churn_stop)) {
        CUdeviceptr p;
        CUresult rc = cuMemAlloc(&p, 1 << 20);
        if (rc == CUDA_SUCCESS)
            VS_CHECK(cuMemFree(p));
        else if (rc != CUDA_ERROR_OUT_OF_MEMORY)
            failures++;
    }
    return NULL;
}

int main(void)
{
    CUmodule module;
    pthread_t threads[THREADS], churner;

    ctx = preload_context();
    VS_CHECK(cuModuleLoadData(&module, "simcuda builtins"));
    VS_CHECK(cuModuleGetFunction(&fill_fn, module, "sim_fill_u32"));
    VS_CHECK(cuModuleGetFunction(&checksum_fn, module, "sim_checksum_u32"));
    preload_snapshot_t before = preload_snapshot();

    pthread_create(&churner, NULL, churn, NULL);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, launcher, (void *)(uintptr_t)t);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    atomic_store(&churn_stop, true);
    pthread_join(churner, NULL);

    preload_snapshot_t after = preload_snapshot();
    uint64_t launches = preload_stat(&after, "launches") - preload_stat(&before, "launches");
    uint64_t used = preload_device_used(&after);
    printf("preload_threads: %d failures, %llu launches seen, %llu bytes still counted\n", (int)failures,
           (unsigned long long)launches, (unsigned long long)used);
    if (failures != 0 || launches < (uint64_t)THREADS * ROUNDS * STREAMS * 2 || used != 0)
        return 1;
    preload_snapshot_free(&before);
    preload_snapshot_free(&after);
    return 0;
}

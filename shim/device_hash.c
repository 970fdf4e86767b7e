/* device_hash.c: hashing device memory where it lies, so that an allocation
 * whose bytes did not change since it was restored can be dropped without
 * copying it out (see device_hash.h).
 *
 * The kernel comes from shim/kernels/content_hash.cu as PTX text embedded
 * at build time; the driver compiles it for the GPU when it is loaded. All
 * driver calls go to the real driver through `VS_CALL`: none of this is the
 * application's work, so none of it may reach the shim's own hooks.
 */
#include "device_hash.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cap.h"
#include "driver.h"
#include "log.h"
#include "tunables.h"

/* The PTX text of `vramshim_content_hash`, NUL-terminated
 * (shim/kernels/meson.build generates its definition). */
extern const char vs_content_hash_ptx[];

/* Result slots: two lanes each, on the device and in pinned host memory. */
#define VS_DEVICE_HASH_SLOT_BYTES (2 * sizeof(uint64_t))

/* A launch: blocks of `VS_DEVICE_HASH_THREADS` threads, each thread given
 * at least `VS_DEVICE_HASH_WORDS_PER_THREAD` words, at most
 * `VS_DEVICE_HASH_BLOCKS` blocks: enough threads in flight to fill any
 * current GPU's memory bandwidth, few enough atomic adds that they cost
 * nothing. The kernel takes any block size that is a multiple of 32, up
 * to 1024. */
_Static_assert(VS_DEVICE_HASH_THREADS % 32 == 0 && VS_DEVICE_HASH_THREADS <= 1024,
               "the hash kernel's blocks are whole warps, at most 32 of them");

struct vs_device_hasher_s {
    CUcontext ctx;
    int device;
    CUmodule module;
    CUfunction kernel;
    unsigned slots;
    CUdeviceptr lanes;   /* slots × 2 lanes, device memory */
    uint64_t *host_lanes; /* slots × 2 lanes, pinned */
};

/* Only the first refusal is worth a line: later hashers would hit the same. */
static atomic_flag vs_device_hash_refusal_logged = ATOMIC_FLAG_INIT;

static void vs_device_hash_log_refusal(int device, const char *what, CUresult rc, const char *detail)
{
    if (atomic_flag_test_and_set(&vs_device_hash_refusal_logged))
        return;
    vs_log(VS_LOG_WARN,
           "device %d: %s failed (CUresult %d)%s%s; unchanged allocations are copied out on eviction "
           "instead of being recognised by their hash",
           device, what, (int)rc, detail[0] != '\0' ? ": " : "", detail);
}

static int vs_device_hash_errno(CUresult rc)
{
    return rc == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
}

/* Loads the module, keeping the JIT's explanation when it refuses. */
static int vs_device_hash_load(vs_device_hasher_t *h)
{
    char jit_log[512] = "";
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {jit_log, (void *)(uintptr_t)sizeof(jit_log)};
    CUresult rc = VS_CALL(cuModuleLoadDataEx, (&h->module, vs_content_hash_ptx, 2, options, values));
    if (rc != CUDA_SUCCESS) {
        h->module = NULL;
        jit_log[sizeof(jit_log) - 1] = '\0';
        for (char *c = jit_log; *c != '\0'; c++) /* one line in the log */
            if (*c == '\n' || *c == '\r')
                *c = ' ';
        vs_device_hash_log_refusal(h->device, "loading the content-hash kernel (PTX)", rc, jit_log);
        return rc == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -ENOTSUP;
    }
    rc = VS_CALL(cuModuleGetFunction, (&h->kernel, h->module, VS_CONTENT_HASH_KERNEL));
    if (rc != CUDA_SUCCESS) {
        vs_device_hash_log_refusal(h->device, "finding " VS_CONTENT_HASH_KERNEL " in its module", rc, "");
        return -ENOTSUP;
    }
    return 0;
}

/* Frees what `h` holds; its context is current. */
static void vs_device_hash_release(vs_device_hasher_t *h)
{
    if (h->host_lanes != NULL)
        (void)VS_CALL(cuMemFreeHost, (h->host_lanes));
    if (h->lanes != 0 && VS_CALL(cuMemFree_v2, (h->lanes)) == CUDA_SUCCESS)
        vs_cap_release(h->device, (uint64_t)h->slots * VS_DEVICE_HASH_SLOT_BYTES);
    if (h->module != NULL)
        (void)VS_CALL(cuModuleUnload, (h->module));
    free(h);
}

int vs_device_hasher_create(int device, unsigned slots, vs_device_hasher_t **out)
{
    *out = NULL;
    if (slots == 0)
        return -EINVAL;
    CUcontext ctx = NULL;
    CUdevice current = -1;
    if (VS_CALL(cuCtxGetCurrent, (&ctx)) != CUDA_SUCCESS || ctx == NULL
        || VS_CALL(cuCtxGetDevice, (&current)) != CUDA_SUCCESS || current != device)
        return -EINVAL;

    vs_device_hasher_t *h = calloc(1, sizeof *h);
    if (h == NULL)
        return -ENOMEM;
    h->ctx = ctx;
    h->device = device;
    h->slots = slots;
    int err = vs_device_hash_load(h);
    if (err != 0)
        goto fail;

    size_t bytes = (size_t)slots * VS_DEVICE_HASH_SLOT_BYTES;
    CUresult rc = VS_CALL(cuMemAlloc_v2, (&h->lanes, bytes));
    if (rc != CUDA_SUCCESS) {
        h->lanes = 0;
        err = vs_device_hash_errno(rc);
        goto fail;
    }
    /* The shim's own device bytes count against the limit too (2 KiB
     * took the soak's device 1,638 bytes past 256 MiB). */
    vs_cap_charge(device, bytes);
    void *host = NULL;
    rc = VS_CALL(cuMemHostAlloc, (&host, bytes, CU_MEMHOSTALLOC_PORTABLE));
    if (rc != CUDA_SUCCESS) {
        err = vs_device_hash_errno(rc);
        goto fail;
    }
    h->host_lanes = host;
    *out = h;
    return 0;

fail:
    vs_device_hash_release(h);
    return err;
}

void vs_device_hasher_destroy(vs_device_hasher_t *h)
{
    if (h == NULL)
        return;
    /* Module unloading acts on the current context: make it the hasher's. */
    bool pushed = VS_CALL(cuCtxPushCurrent_v2, (h->ctx)) == CUDA_SUCCESS;
    vs_device_hash_release(h);
    if (pushed) {
        CUcontext popped;
        (void)VS_CALL(cuCtxPopCurrent_v2, (&popped));
    }
}

void vs_device_hasher_forget(vs_device_hasher_t *h)
{
    if (h == NULL)
        return;
    /* The driver freed the lanes with the context: their charge goes too. */
    if (h->lanes != 0)
        vs_cap_release(h->device, (uint64_t)h->slots * VS_DEVICE_HASH_SLOT_BYTES);
    free(h);
}

unsigned vs_device_hasher_slots(const vs_device_hasher_t *h)
{
    return h->slots;
}

CUresult vs_device_hash_enqueue(vs_device_hasher_t *h, unsigned slot, CUdeviceptr base, uint64_t bytes,
                                CUstream stream)
{
    if (slot >= h->slots || base % 8 != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr lanes = h->lanes + (CUdeviceptr)slot * VS_DEVICE_HASH_SLOT_BYTES;
    CUresult rc = VS_CALL(cuMemsetD32Async, (lanes, 0, VS_DEVICE_HASH_SLOT_BYTES / 4, stream));
    if (rc != CUDA_SUCCESS)
        return rc;

    uint64_t words = bytes / 8;
    uint64_t per_block = (uint64_t)VS_DEVICE_HASH_THREADS * VS_DEVICE_HASH_WORDS_PER_THREAD;
    uint64_t blocks = (words + per_block - 1) / per_block;
    if (blocks == 0)
        blocks = 1; /* the tail, or nothing: the lanes stay zero */
    if (blocks > VS_DEVICE_HASH_BLOCKS)
        blocks = VS_DEVICE_HASH_BLOCKS;
    unsigned long long data = base, length = bytes, out = lanes;
    void *params[] = {&data, &length, &out};
    rc = VS_CALL(cuLaunchKernel,
                 (h->kernel, (unsigned)blocks, 1, 1, VS_DEVICE_HASH_THREADS, 1, 1, 0, stream, params, NULL));
    if (rc != CUDA_SUCCESS)
        return rc;
    return VS_CALL(cuMemcpyDtoHAsync_v2,
                   (h->host_lanes + (size_t)slot * 2, lanes, VS_DEVICE_HASH_SLOT_BYTES, stream));
}

vs_content_hash_t vs_device_hash_result(const vs_device_hasher_t *h, unsigned slot, uint64_t bytes)
{
    vs_content_hash_t lanes = {{h->host_lanes[(size_t)slot * 2], h->host_lanes[(size_t)slot * 2 + 1]}};
    return vs_content_hash_final(lanes, bytes);
}

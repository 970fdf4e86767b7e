/* fuzz_program.c: one random CUDA program per seed, for the differential
 * fuzzer (fuzz_run.py runs it on the simulated driver alone and under the
 * shim, and compares what it prints).
 *
 *   fuzz_program --seed N [--ops K] [--min-kib K] [--max-mib M] [--vmm 1]
 *
 * Buffers are 4 KiB to 8 MiB by default; a campaign after many evict and
 * restore cycles asks for evictable sizes only (`--min-kib 2048`) and
 * small ones (`--max-mib 3`), whose cycles cost little.
 *
 * The program is a function of the seed alone: every choice comes from a
 * generator seeded with N and from the state the choices built (which
 * buffers live), never from timing or from what a call returned. It mixes
 * allocations (`cuMemAlloc`, `cuMemAllocPitch`, `cuMemAllocAsync`, an
 * the device's pool, which keeps freed memory or not) of random sizes; frees (`cuMemFree`, `cuMemFreeAsync` of
 * every kind, while other work runs); the simulated driver's built-in
 * kernels (`sim_fill_u32`, `sim_copy`, `sim_axpy_f32`, `sim_checksum_u32`,
 * and `sim_add_u32_struct`, whose by-value struct holds three pointers);
 * copies in every direction and form (synchronous, asynchronous, 2-D,
 * peer, unified `cuMemcpy`) with pinned and pageable host memory; memsets
 * (8/16/32-bit, 2-D, asynchronous); and across streams, events and waits,
 * threads working on their own buffers, and stream capture replayed as a
 * graph. With `--vmm 1` the program's own virtual memory is a kind too:
 * a reservation of one to three `cuMemCreate` chunks, granted in one call
 * or chunk by chunk, their handles released at once (before or after the
 * grant) or at the free, which
 * unmaps them in one call once the buffer's last stream is done.
 *
 * The program is race-free by construction, so that its bytes are defined:
 * each buffer remembers the stream that touched it last, and an operation
 * on another stream first waits for an event recorded there. Every buffer
 * is written when it is made (`cuMemAlloc`'s contents are undefined).
 *
 * Output (stdout), what the runner compares: a `digest` line per live
 * buffer at each synchronisation point (a hash of all its bytes, and of
 * each host buffer's), `footprint BYTES` (the most bytes live at once) and
 * `done`. A call that fails prints `error op=I call=NAME rc=RC` and exits
 * 1; an allocation refused with CUDA_ERROR_OUT_OF_MEMORY prints
 * `oom op=I` and exits 0 (the cap mode's clean refusal; the runner decides
 * whether a variant may refuse).
 */
#include <cuda.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)
#define KiB (1ull << 10)
#define MAX_BUFFERS 64
#define HOST_BUFFERS 4
#define HOST_BYTES (4 * MiB)
#define STREAMS 4 /* 0 is the legacy NULL stream */
#define THREADS 2

/* ---- The generator ------------------------------------------------------- */

typedef struct rng_s {
    uint64_t state;
} rng_t;

static uint64_t rng_next(rng_t *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(rng_t *r, uint64_t n)
{
    return n == 0 ? 0 : rng_next(r) % n;
}

static bool rng_chance(rng_t *r, unsigned percent)
{
    return rng_below(r, 100) < percent;
}

/* ---- State ---------------------------------------------------------------- */

typedef enum { KIND_PLAIN, KIND_PITCH, KIND_ASYNC, KIND_POOL, KIND_VMM } buffer_kind_t;
static const char *const kind_names[] = {"plain", "pitch", "async", "pool", "vmm"};

/* KIND_VMM: the program's own virtual memory, one reservation holding one
 * to VMM_CHUNKS handles mapped side by side (an arena of chunks, as
 * PyTorch's expandable segments). */
#define VMM_CHUNKS 3

typedef struct buffer_s {
    bool live;
    buffer_kind_t kind;
    CUdeviceptr ptr;
    uint64_t bytes;
    uint64_t pitch, width, height; /* KIND_PITCH */
    CUmemGenericAllocationHandle chunks[VMM_CHUNKS]; /* KIND_VMM */
    unsigned chunk_count;
    uint64_t chunk_bytes;
    bool chunks_released; /* released right after mapping: the mappings keep the memory */
    int last;                      /* stream index that touched it last, -1: none since a sync */
    int owner;                     /* thread phase: which thread may touch it */
} buffer_t;

typedef struct host_s {
    unsigned char *ptr;
    bool pinned;
    int last;
} host_t;

static buffer_t buffers[MAX_BUFFERS];
static host_t hosts[HOST_BUFFERS];
static CUstream streams[STREAMS];
static CUcontext context;
static CUmemoryPool pool;
static CUfunction fn_fill, fn_copy, fn_axpy, fn_checksum, fn_add_struct;
static uint64_t live_bytes, footprint, min_bytes, max_bytes;
static bool with_vmm; /* --vmm 1: KIND_VMM among the kinds */
static uint64_t vmm_granularity;
static unsigned long op_index;
static unsigned sync_points;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail_call(const char *call, CUresult rc)
{
    pthread_mutex_lock(&out_lock);
    printf("error op=%lu call=%s rc=%d\n", op_index, call, (int)rc);
    fflush(stdout);
    exit(1);
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        CUresult check_rc_ = (call);                                                               \
        if (check_rc_ != CUDA_SUCCESS)                                                             \
            fail_call(#call, check_rc_);                                                           \
    } while (0)

/* An allocation's answer: out of memory ends the program cleanly. */
static void check_alloc(const char *call, CUresult rc)
{
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
        printf("oom op=%lu call=%s\n", op_index, call);
        fflush(stdout);
        exit(0);
    }
    if (rc != CUDA_SUCCESS)
        fail_call(call, rc);
}

/* ---- Ordering across streams ---------------------------------------------- */

/* Makes `stream` wait for the stream that last touched something (`*last`),
 * and makes it the last. */
static void order_after(int *last, int stream)
{
    if (*last >= 0 && *last != stream) {
        CUevent ev;
        CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        CHECK(cuEventRecord(ev, streams[*last]));
        CHECK(cuStreamWaitEvent(streams[stream], ev, 0));
        CHECK(cuEventDestroy(ev));
    }
    *last = stream;
}

static void forget_stream(int stream)
{
    for (int i = 0; i < MAX_BUFFERS; i++)
        if (buffers[i].last == stream)
            buffers[i].last = -1;
    for (int i = 0; i < HOST_BUFFERS; i++)
        if (hosts[i].last == stream)
            hosts[i].last = -1;
}

static void forget_all(void)
{
    for (int i = 0; i < MAX_BUFFERS; i++)
        buffers[i].last = -1;
    for (int i = 0; i < HOST_BUFFERS; i++)
        hosts[i].last = -1;
}

/* ---- Digests --------------------------------------------------------------- */

static uint64_t hash_bytes(const unsigned char *p, uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Synchronises the context and prints the hash of every live buffer. */
static void digest(void)
{
    static unsigned char *scratch;
    static uint64_t scratch_bytes;
    CHECK(cuCtxSynchronize());
    forget_all();
    sync_points++;
    for (int i = 0; i < MAX_BUFFERS; i++) {
        if (!buffers[i].live)
            continue;
        if (buffers[i].bytes > scratch_bytes) {
            free(scratch);
            scratch_bytes = buffers[i].bytes;
            if ((scratch = malloc(scratch_bytes)) == NULL)
                fail_call("malloc", CUDA_ERROR_OUT_OF_MEMORY);
        }
        CHECK(cuMemcpyDtoH(scratch, buffers[i].ptr, buffers[i].bytes));
        printf("digest %u buffer %d %s %" PRIu64 " %016" PRIx64 "\n", sync_points, i, kind_names[buffers[i].kind],
               buffers[i].bytes, hash_bytes(scratch, buffers[i].bytes));
    }
    for (int i = 0; i < HOST_BUFFERS; i++)
        printf("digest %u host %d %016" PRIx64 "\n", sync_points, i, hash_bytes(hosts[i].ptr, HOST_BYTES));
    fflush(stdout);
}

/* ---- Choices --------------------------------------------------------------- */

static int pick_buffer(rng_t *r, int owner, int not)
{
    int candidates[MAX_BUFFERS], count = 0;
    for (int i = 0; i < MAX_BUFFERS; i++)
        if (buffers[i].live && i != not && (owner < 0 || buffers[i].owner == owner))
            candidates[count++] = i;
    return count == 0 ? -1 : candidates[rng_below(r, (uint64_t)count)];
}

static int free_slot(void)
{
    for (int i = 0; i < MAX_BUFFERS; i++)
        if (!buffers[i].live)
            return i;
    return -1;
}

/* A size from `min_bytes` to `max_bytes`, log-uniform, 4-byte aligned;
 * some odd. */
static uint64_t pick_size(rng_t *r)
{
    unsigned low = 63u - (unsigned)__builtin_clzll(min_bytes), high = 63u - (unsigned)__builtin_clzll(max_bytes);
    unsigned bits = low + (unsigned)rng_below(r, high - low + 1);
    uint64_t size = (1ull << bits) + rng_below(r, 1ull << bits);
    if (size > max_bytes)
        size = max_bytes;
    if (size < min_bytes)
        size = min_bytes;
    return rng_chance(r, 20) ? size : size & ~3ull;
}

/* A range [*off, *off + *n) inside `bytes`, 4-byte aligned, at most `cap`. */
static void pick_range(rng_t *r, uint64_t bytes, uint64_t cap, uint64_t *off, uint64_t *n)
{
    uint64_t words = bytes / 4;
    uint64_t count = 1 + rng_below(r, words < cap / 4 ? words : cap / 4);
    if (rng_chance(r, 30))
        count = words < cap / 4 ? words : cap / 4; /* the whole, or as much as allowed */
    *off = 4 * rng_below(r, words - count + 1);
    *n = count * 4;
}

/* ---- Operations ------------------------------------------------------------- */

static void vmm_alloc(rng_t *r, buffer_t *b)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    b->chunk_count = 1 + (unsigned)rng_below(r, VMM_CHUNKS);
    b->chunk_bytes = (b->bytes / b->chunk_count + vmm_granularity - 1) / vmm_granularity * vmm_granularity;
    b->bytes = b->chunk_bytes * b->chunk_count;
    b->chunks_released = rng_chance(r, 30);
    bool before_grant = b->chunks_released && rng_chance(r, 50); /* released before the grant even */
    bool grant_once = rng_chance(r, 50);
    check_alloc("cuMemAddressReserve", cuMemAddressReserve(&b->ptr, b->bytes, 0, 0, 0));
    for (unsigned k = 0; k < b->chunk_count; k++) {
        check_alloc("cuMemCreate", cuMemCreate(&b->chunks[k], b->chunk_bytes, &prop, 0));
        CHECK(cuMemMap(b->ptr + k * b->chunk_bytes, b->chunk_bytes, 0, b->chunks[k], 0));
        if (before_grant)
            CHECK(cuMemRelease(b->chunks[k]));
        if (!grant_once)
            CHECK(cuMemSetAccess(b->ptr + k * b->chunk_bytes, b->chunk_bytes, &access, 1));
    }
    if (grant_once)
        CHECK(cuMemSetAccess(b->ptr, b->bytes, &access, 1));
    if (b->chunks_released && !before_grant)
        for (unsigned k = 0; k < b->chunk_count; k++)
            CHECK(cuMemRelease(b->chunks[k]));
}

/* Unmapping memory still in use is the program's error: its last stream is
 * waited for first (every earlier use is ordered before that one). */
static void vmm_free(rng_t *r, buffer_t *b)
{
    if (b->last >= 0) {
        CHECK(cuStreamSynchronize(streams[b->last]));
        forget_stream(b->last);
    }
    if (rng_chance(r, 50)) {
        CHECK(cuMemUnmap(b->ptr, b->bytes));
    } else {
        for (unsigned k = 0; k < b->chunk_count; k++)
            CHECK(cuMemUnmap(b->ptr + k * b->chunk_bytes, b->chunk_bytes));
    }
    if (!b->chunks_released)
        for (unsigned k = 0; k < b->chunk_count; k++)
            CHECK(cuMemRelease(b->chunks[k]));
    CHECK(cuMemAddressFree(b->ptr, b->bytes));
}

static void op_alloc(rng_t *r, int stream)
{
    int slot = free_slot();
    if (slot < 0)
        return;
    buffer_t *b = &buffers[slot];
    memset(b, 0, sizeof *b);
    b->kind = (buffer_kind_t)rng_below(r, with_vmm ? 5 : 4);
    b->bytes = pick_size(r);
    b->last = -1;
    b->owner = -1;
    switch (b->kind) {
    case KIND_PLAIN:
        check_alloc("cuMemAlloc", cuMemAlloc(&b->ptr, b->bytes));
        break;
    case KIND_PITCH: {
        static const unsigned elems[] = {4, 8, 16};
        b->width = 64 + rng_below(r, 8 * KiB);
        uint64_t row = (b->width + 511) / 512 * 512; /* about the driver's pitch */
        b->height = b->bytes / row > 0 ? b->bytes / row : 1;
        check_alloc("cuMemAllocPitch", cuMemAllocPitch(&b->ptr, &b->pitch, b->width, b->height,
                                                       elems[rng_below(r, 3)]));
        b->bytes = b->pitch * b->height;
        break;
    }
    case KIND_ASYNC:
        check_alloc("cuMemAllocAsync", cuMemAllocAsync(&b->ptr, b->bytes, streams[stream]));
        b->last = stream;
        break;
    case KIND_POOL:
        check_alloc("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync(&b->ptr, b->bytes, pool, streams[stream]));
        b->last = stream;
        break;
    case KIND_VMM:
        vmm_alloc(r, b);
        break;
    }
    b->live = true;
    live_bytes += b->bytes;
    if (live_bytes > footprint)
        footprint = live_bytes;
    /* Defined contents from the start. */
    order_after(&b->last, stream);
    CHECK(cuMemsetD8Async(b->ptr, (unsigned char)rng_next(r), b->bytes, streams[stream]));
}

static void op_free(rng_t *r, int stream)
{
    int i = pick_buffer(r, -1, -1);
    if (i < 0)
        return;
    buffer_t *b = &buffers[i];
    bool async = b->kind != KIND_VMM && (b->kind == KIND_ASYNC || b->kind == KIND_POOL || rng_chance(r, 40));
    if (b->kind == KIND_VMM) {
        vmm_free(r, b);
    } else if (async) {
        order_after(&b->last, stream);
        CHECK(cuMemFreeAsync(b->ptr, streams[stream]));
    } else {
        /* `cuMemFree` waits for the work that uses it; sometimes the
         * program waits itself first. */
        if (b->last >= 0 && rng_chance(r, 50)) {
            CHECK(cuStreamSynchronize(streams[b->last]));
            forget_stream(b->last);
        }
        CHECK(cuMemFree(b->ptr));
    }
    b->live = false;
    live_bytes -= b->bytes;
}

static void launch(CUfunction fn, void **args, int stream)
{
    unsigned threads = 32u << rng_below(&(rng_t){op_index}, 3);
    CHECK(cuLaunchKernel(fn, 1, 1, 1, threads, 1, 1, 0, streams[stream], args, NULL));
}

typedef struct add_args_s {
    uint64_t n;
    CUdeviceptr a;
    uint32_t tag;
    CUdeviceptr b;
    CUdeviceptr out;
} add_args_t;

static void op_kernel(rng_t *r, int stream, int owner)
{
    int d = pick_buffer(r, owner, -1);
    if (d < 0)
        return;
    buffer_t *dst = &buffers[d];
    uint64_t off, n;
    switch (rng_below(r, 5)) {
    case 0: { /* sim_fill_u32 */
        pick_range(r, dst->bytes, dst->bytes, &off, &n);
        order_after(&dst->last, stream);
        CUdeviceptr p = dst->ptr + off;
        uint64_t words = n / 4;
        uint32_t seed = (uint32_t)rng_next(r);
        void *args[] = {&p, &words, &seed};
        launch(fn_fill, args, stream);
        break;
    }
    case 1: { /* sim_copy between two buffers */
        int s = pick_buffer(r, owner, d);
        if (s < 0)
            return;
        buffer_t *src = &buffers[s];
        uint64_t cap = dst->bytes < src->bytes ? dst->bytes : src->bytes, so, don;
        pick_range(r, cap, cap, &so, &n);
        don = 4 * rng_below(r, (dst->bytes - n) / 4 + 1);
        so = 4 * rng_below(r, (src->bytes - n) / 4 + 1);
        order_after(&dst->last, stream);
        order_after(&src->last, stream);
        CUdeviceptr dp = dst->ptr + don, sp = src->ptr + so;
        void *args[] = {&dp, &sp, &n};
        launch(fn_copy, args, stream);
        break;
    }
    case 2: { /* sim_axpy_f32: y += a x */
        int s = pick_buffer(r, owner, d);
        if (s < 0)
            return;
        buffer_t *src = &buffers[s];
        uint64_t cap = dst->bytes < src->bytes ? dst->bytes : src->bytes;
        pick_range(r, cap, cap, &off, &n);
        order_after(&dst->last, stream);
        order_after(&src->last, stream);
        float a = (float)(int)rng_below(r, 7) - 3.0f;
        CUdeviceptr x = src->ptr + off, y = dst->ptr + off;
        uint64_t count = n / 4;
        void *args[] = {&a, &x, &y, &count};
        launch(fn_axpy, args, stream);
        break;
    }
    case 3: { /* sim_checksum_u32 of one buffer into another */
        int s = pick_buffer(r, owner, d);
        if (s < 0 || dst->bytes < 8)
            return;
        buffer_t *src = &buffers[s];
        pick_range(r, src->bytes, src->bytes, &off, &n);
        uint64_t at = 8 * rng_below(r, dst->bytes / 8);
        order_after(&dst->last, stream);
        order_after(&src->last, stream);
        CUdeviceptr sp = src->ptr + off, out = dst->ptr + at;
        uint64_t words = n / 4;
        void *args[] = {&sp, &words, &out};
        launch(fn_checksum, args, stream);
        break;
    }
    default: { /* sim_add_u32_struct: a by-value struct of three pointers */
        int a = pick_buffer(r, owner, -1), b = pick_buffer(r, owner, -1);
        if (a < 0 || b < 0)
            return;
        uint64_t cap = dst->bytes;
        if (buffers[a].bytes < cap)
            cap = buffers[a].bytes;
        if (buffers[b].bytes < cap)
            cap = buffers[b].bytes;
        pick_range(r, cap, cap, &off, &n);
        order_after(&dst->last, stream);
        order_after(&buffers[a].last, stream);
        order_after(&buffers[b].last, stream);
        /* The output must not overlap its inputs at another offset. */
        add_args_t args_struct = {.n = n / 4,
                                  .a = buffers[a].ptr + (a == d ? off : 0),
                                  .tag = (uint32_t)rng_next(r),
                                  .b = buffers[b].ptr + (b == d ? off : 0),
                                  .out = dst->ptr + off};
        void *args[] = {&args_struct};
        launch(fn_add_struct, args, stream);
        break;
    }
    }
}

static void op_memset(rng_t *r, int stream, int owner)
{
    int d = pick_buffer(r, owner, -1);
    if (d < 0)
        return;
    buffer_t *b = &buffers[d];
    uint64_t off, n;
    pick_range(r, b->bytes, b->bytes, &off, &n);
    bool async = rng_chance(r, 60);
    CUstream s = streams[stream];
    if (!async)
        stream = 0; /* the synchronous forms run on the NULL stream */
    order_after(&b->last, stream);
    uint32_t value = (uint32_t)rng_next(r);
    switch (rng_below(r, 4)) {
    case 0:
        CHECK(async ? cuMemsetD8Async(b->ptr + off, (unsigned char)value, n, s)
                    : cuMemsetD8(b->ptr + off, (unsigned char)value, n));
        break;
    case 1:
        CHECK(async ? cuMemsetD16Async(b->ptr + off, (unsigned short)value, n / 2, s)
                    : cuMemsetD16(b->ptr + off, (unsigned short)value, n / 2));
        break;
    case 2:
        CHECK(async ? cuMemsetD32Async(b->ptr + off, value, n / 4, s) : cuMemsetD32(b->ptr + off, value, n / 4));
        break;
    default: { /* 2-D: rows of a pitch */
        uint64_t pitch = b->kind == KIND_PITCH ? b->pitch : 256 + 4 * rng_below(r, 1024);
        if (pitch > b->bytes)
            pitch = b->bytes & ~3ull;
        uint64_t rows = b->bytes / pitch, width = 4 + 4 * rng_below(r, pitch / 4);
        uint64_t height = 1 + rng_below(r, rows);
        if (width > pitch)
            width = pitch;
        CHECK(async ? cuMemsetD2D32Async(b->ptr, pitch, value, width / 4, height, s)
                    : cuMemsetD2D8(b->ptr, pitch, (unsigned char)value, width, height));
        break;
    }
    }
}

/* One side of a copy: a device buffer or a host buffer, and where. */
typedef struct side_s {
    bool host;
    int index;
    CUdeviceptr device;
    unsigned char *host_ptr;
    uint64_t bytes; /* from the start of the buffer */
    int *last;
} side_t;

static bool pick_side(rng_t *r, bool host, int owner, int not, side_t *side, bool pinned_only)
{
    memset(side, 0, sizeof *side);
    side->host = host;
    if (host) {
        int i = (int)rng_below(r, HOST_BUFFERS);
        if (pinned_only && !hosts[i].pinned)
            i = 0; /* host buffer 0 is pinned */
        side->index = i;
        side->host_ptr = hosts[i].ptr;
        side->bytes = HOST_BYTES;
        side->last = &hosts[i].last;
        return true;
    }
    int i = pick_buffer(r, owner, not);
    if (i < 0)
        return false;
    side->index = i;
    side->device = buffers[i].ptr;
    side->bytes = buffers[i].bytes;
    side->last = &buffers[i].last;
    return true;
}

static void op_copy(rng_t *r, int stream, int owner)
{
    /* Directions: 0 HtoD, 1 DtoH, 2 DtoD. Threads keep to their buffers
     * (host buffers are shared, so they copy device to device). */
    unsigned direction = owner >= 0 ? 2 : (unsigned)rng_below(r, 3);
    unsigned form = (unsigned)rng_below(r, 5); /* typed, unified, peer, 2-D, typed again */
    bool async = rng_chance(r, 55);
    bool unified = form == 1;
    bool pinned_only = unified || form == 3;
    side_t dst, src;
    if (!pick_side(r, direction == 1, owner, -1, &dst, pinned_only)
        || !pick_side(r, direction == 0, owner, dst.host ? -1 : dst.index, &src, pinned_only))
        return;
    if (async && (dst.host || src.host) && !hosts[dst.host ? dst.index : src.index].pinned)
        async = rng_chance(r, 50); /* pageable: allowed, synchronous in effect */
    int run_on = async ? stream : 0;
    CUstream s = streams[stream];
    order_after(dst.last, run_on);
    order_after(src.last, run_on);
    if (dst.host && !async)
        *dst.last = -1; /* a synchronous copy to the host is complete on return */
    uint64_t cap = dst.bytes < src.bytes ? dst.bytes : src.bytes, off, n;
    pick_range(r, cap, 256 * KiB + rng_below(r, 4) * MiB, &off, &n);
    if (rng_chance(r, 25))
        n = 8 + 8 * rng_below(r, n / 8 > 1 ? n / 8 : 1); /* small copies: the pointer scan's */
    if (n > cap)
        n = cap;
    uint64_t doff = rng_below(r, dst.bytes - n + 1), soff = rng_below(r, src.bytes - n + 1);
    CUdeviceptr du = dst.host ? (CUdeviceptr)(uintptr_t)(dst.host_ptr + doff) : dst.device + doff;
    CUdeviceptr su = src.host ? (CUdeviceptr)(uintptr_t)(src.host_ptr + soff) : src.device + soff;
    if (form == 3) {
        /* 2-D: rows of `width` at each side's pitch. */
        uint64_t dpitch = 512 + 4 * rng_below(r, 2048), spitch = 512 + 4 * rng_below(r, 2048);
        if (!dst.host && buffers[dst.index].kind == KIND_PITCH)
            dpitch = buffers[dst.index].pitch;
        if (!src.host && buffers[src.index].kind == KIND_PITCH)
            spitch = buffers[src.index].pitch;
        uint64_t width = 1 + rng_below(r, dpitch < spitch ? dpitch : spitch);
        uint64_t dh = dst.bytes / dpitch, sh = src.bytes / spitch, h = dh < sh ? dh : sh;
        if (h == 0 || width > dst.bytes || width > src.bytes)
            return;
        h = 1 + rng_below(r, h < 512 ? h : 512);
        CUDA_MEMCPY2D c = {0};
        c.WidthInBytes = width;
        c.Height = h;
        c.dstPitch = dpitch;
        c.srcPitch = spitch;
        c.dstY = rng_below(r, dst.bytes / dpitch - h + 1);
        c.srcY = rng_below(r, src.bytes / spitch - h + 1);
        c.dstXInBytes = rng_below(r, dpitch - width + 1);
        c.srcXInBytes = rng_below(r, spitch - width + 1);
        bool as_unified = rng_chance(r, 30);
        if (dst.host) {
            c.dstMemoryType = as_unified ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
            c.dstHost = dst.host_ptr;
            c.dstDevice = (CUdeviceptr)(uintptr_t)dst.host_ptr;
        } else {
            c.dstMemoryType = as_unified ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_DEVICE;
            c.dstDevice = dst.device;
        }
        if (src.host) {
            c.srcMemoryType = as_unified ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
            c.srcHost = src.host_ptr;
            c.srcDevice = (CUdeviceptr)(uintptr_t)src.host_ptr;
        } else {
            c.srcMemoryType = as_unified ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_DEVICE;
            c.srcDevice = src.device;
        }
        CHECK(async ? cuMemcpy2DAsync(&c, s) : cuMemcpy2D(&c));
        return;
    }
    if (unified) {
        CHECK(async ? cuMemcpyAsync(du, su, n, s) : cuMemcpy(du, su, n));
        return;
    }
    if (form == 2 && !dst.host && !src.host) {
        CHECK(async ? cuMemcpyPeerAsync(du, context, su, context, n, s) : cuMemcpyPeer(du, context, su, context, n));
        return;
    }
    switch (direction) {
    case 0:
        CHECK(async ? cuMemcpyHtoDAsync(du, src.host_ptr + soff, n, s) : cuMemcpyHtoD(du, src.host_ptr + soff, n));
        break;
    case 1:
        CHECK(async ? cuMemcpyDtoHAsync(dst.host_ptr + doff, su, n, s) : cuMemcpyDtoH(dst.host_ptr + doff, su, n));
        break;
    default:
        CHECK(async ? cuMemcpyDtoDAsync(du, su, n, s) : cuMemcpyDtoD(du, su, n));
        break;
    }
}

/* Waits: a stream, an event, or the whole context. */
static void op_wait(rng_t *r)
{
    int stream = (int)rng_below(r, STREAMS);
    switch (rng_below(r, 3)) {
    case 0:
        CHECK(cuStreamSynchronize(streams[stream]));
        forget_stream(stream);
        break;
    case 1: {
        CUevent ev;
        CHECK(cuEventCreate(&ev, CU_EVENT_DEFAULT));
        CHECK(cuEventRecord(ev, streams[stream]));
        CHECK(cuEventSynchronize(ev));
        CHECK(cuEventDestroy(ev));
        forget_stream(stream);
        break;
    }
    default:
        CHECK(cuCtxSynchronize());
        forget_all();
        break;
    }
}

/* ---- Threads ---------------------------------------------------------------- */

typedef struct worker_s {
    int index;
    uint64_t seed;
    unsigned ops;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    rng_t r = {w->seed};
    CHECK(cuCtxSetCurrent(context));
    int stream = 1 + w->index; /* streams 1 and 2, one each */
    for (unsigned i = 0; i < w->ops; i++) {
        switch (rng_below(&r, 3)) {
        case 0:
            op_kernel(&r, stream, w->index);
            break;
        case 1:
            op_memset(&r, stream, w->index);
            break;
        default:
            op_copy(&r, stream, w->index);
            break;
        }
    }
    CHECK(cuStreamSynchronize(streams[stream]));
    return NULL;
}

/* Two threads, each on its own buffers and stream: what each writes is
 * defined whatever the interleaving. Synchronous operations go to the NULL
 * stream, which both share: ordered through `last`, which only the main
 * thread reads afterwards (the context is synchronised around the phase). */
static void phase_threads(rng_t *r)
{
    CHECK(cuCtxSynchronize());
    forget_all();
    int n = 0;
    for (int i = 0; i < MAX_BUFFERS; i++)
        if (buffers[i].live)
            buffers[i].owner = n++ % THREADS;
    if (n < 2 * THREADS)
        goto out;
    pthread_t threads[THREADS];
    worker_t workers[THREADS];
    for (int t = 0; t < THREADS; t++) {
        workers[t] = (worker_t){.index = t, .seed = rng_next(r), .ops = 4 + (unsigned)rng_below(r, 12)};
        if (pthread_create(&threads[t], NULL, worker_main, &workers[t]) != 0) {
            printf("error op=%lu call=pthread_create rc=0\n", op_index);
            exit(1);
        }
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
out:
    CHECK(cuCtxSynchronize());
    forget_all();
    for (int i = 0; i < MAX_BUFFERS; i++)
        buffers[i].owner = -1;
}

/* ---- Stream capture and graph replays --------------------------------------- */

/* Kernels and memsets captured on a stream of its own, the graph replayed
 * 1 to 3 times on another stream. */
static void phase_graph(rng_t *r)
{
    static const CUstreamCaptureMode modes[] = {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                CU_STREAM_CAPTURE_MODE_RELAXED};
    CHECK(cuCtxSynchronize());
    forget_all();
    CUstream capture;
    CHECK(cuStreamCreate(&capture, CU_STREAM_NON_BLOCKING));
    /* Captured work runs in the graph: the capture stream stands in for
     * stream index 3 while the generator records `last`. */
    CUstream saved = streams[3];
    streams[3] = capture;
    CHECK(cuStreamBeginCapture(capture, modes[rng_below(r, 3)]));
    unsigned ops = 1 + (unsigned)rng_below(r, 6);
    for (unsigned i = 0; i < ops; i++) {
        if (rng_chance(r, 70))
            op_kernel(r, 3, -1);
        else {
            int d = pick_buffer(r, -1, -1);
            if (d >= 0) {
                uint64_t off, n;
                pick_range(r, buffers[d].bytes, buffers[d].bytes, &off, &n);
                CHECK(cuMemsetD32Async(buffers[d].ptr + off, (unsigned)rng_next(r), n / 4, capture));
            }
        }
    }
    CUgraph graph;
    CUgraphExec exec;
    CHECK(cuStreamEndCapture(capture, &graph));
    streams[3] = saved;
    CHECK(cuGraphInstantiate(&exec, graph, 0));
    int run_on = 1 + (int)rng_below(r, STREAMS - 1);
    unsigned replays = 1 + (unsigned)rng_below(r, 3);
    for (unsigned i = 0; i < replays; i++)
        CHECK(cuGraphLaunch(exec, streams[run_on]));
    /* What the graph touched was last touched on `run_on`. */
    for (int i = 0; i < MAX_BUFFERS; i++)
        if (buffers[i].last == 3)
            buffers[i].last = run_on;
    CHECK(cuStreamSynchronize(streams[run_on]));
    forget_stream(run_on);
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(graph));
    CHECK(cuStreamDestroy(capture));
}

/* ---- main --------------------------------------------------------------------- */

static void setup(uint64_t seed)
{
    CUdevice dev;
    CUmodule module;
    rng_t r = {seed ^ 0x5eed};
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&context, dev));
    CHECK(cuCtxSetCurrent(context));
    CHECK(cuModuleLoadData(&module, "fuzz_program kernels"));
    CHECK(cuModuleGetFunction(&fn_fill, module, "sim_fill_u32"));
    CHECK(cuModuleGetFunction(&fn_copy, module, "sim_copy"));
    CHECK(cuModuleGetFunction(&fn_axpy, module, "sim_axpy_f32"));
    CHECK(cuModuleGetFunction(&fn_checksum, module, "sim_checksum_u32"));
    CHECK(cuModuleGetFunction(&fn_add_struct, module, "sim_add_u32_struct"));
    streams[0] = NULL;
    for (int i = 1; i < STREAMS; i++)
        CHECK(cuStreamCreate(&streams[i], rng_chance(&r, 50) ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT));
    CHECK(cuDeviceGetDefaultMemPool(&pool, dev));
    if (with_vmm) {
        CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
        size_t granularity = 0;
        CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        vmm_granularity = granularity;
    }
    cuuint64_t threshold = rng_chance(&r, 50) ? UINT64_MAX : 0;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    for (int i = 0; i < HOST_BUFFERS; i++) {
        hosts[i].pinned = i == 0 || rng_chance(&r, 50);
        if (hosts[i].pinned)
            CHECK(cuMemAllocHost((void **)&hosts[i].ptr, HOST_BYTES));
        else if ((hosts[i].ptr = malloc(HOST_BYTES)) == NULL)
            fail_call("malloc", CUDA_ERROR_OUT_OF_MEMORY);
        for (uint64_t k = 0; k < HOST_BYTES; k += 8) {
            uint64_t w = rng_next(&r);
            memcpy(hosts[i].ptr + k, &w, 8);
        }
        hosts[i].last = -1;
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = 0;
    unsigned ops = 160;
    bool have_seed = false;
    max_bytes = 8 * MiB;
    min_bytes = 4 * KiB;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seed") == 0) {
            seed = strtoull(argv[i + 1], NULL, 0);
            have_seed = true;
        } else if (strcmp(argv[i], "--ops") == 0) {
            ops = (unsigned)strtoul(argv[i + 1], NULL, 0);
        } else if (strcmp(argv[i], "--max-mib") == 0) {
            max_bytes = strtoull(argv[i + 1], NULL, 0) * MiB;
        } else if (strcmp(argv[i], "--min-kib") == 0) {
            min_bytes = strtoull(argv[i + 1], NULL, 0) * KiB;
        } else if (strcmp(argv[i], "--vmm") == 0) {
            with_vmm = strcmp(argv[i + 1], "1") == 0;
        } else {
            break;
        }
    }
    if (!have_seed || (argc - 1) % 2 != 0 || ops == 0 || min_bytes < 4 * KiB || max_bytes < min_bytes) {
        fprintf(stderr, "usage: fuzz_program --seed N [--ops K] [--min-kib K] [--max-mib M] [--vmm 1]\n");
        return 2;
    }
    setup(seed);
    rng_t r = {seed};
    forget_all();
    for (op_index = 0; op_index < ops; op_index++) {
        int stream = (int)rng_below(&r, STREAMS);
        unsigned roll = (unsigned)rng_below(&r, 100);
        int live = 0;
        for (int i = 0; i < MAX_BUFFERS; i++)
            live += buffers[i].live;
        if (live < 3 || (roll < 14 && live < 14))
            op_alloc(&r, stream);
        else if (roll < 22)
            op_free(&r, stream);
        else if (roll < 50)
            op_kernel(&r, stream, -1);
        else if (roll < 75)
            op_copy(&r, stream, -1);
        else if (roll < 84)
            op_memset(&r, stream, -1);
        else if (roll < 91)
            op_wait(&r);
        else if (roll < 94)
            phase_threads(&r);
        else if (roll < 97)
            phase_graph(&r);
        else
            digest();
    }
    digest();
    printf("footprint %" PRIu64 "\n", footprint);
    /* Everything goes, asynchronous frees included, before the exit. */
    for (int i = 0; i < MAX_BUFFERS; i++) {
        if (!buffers[i].live)
            continue;
        if (buffers[i].kind == KIND_VMM)
            vmm_free(&r, &buffers[i]);
        else if (buffers[i].kind == KIND_ASYNC || buffers[i].kind == KIND_POOL)
            CHECK(cuMemFreeAsync(buffers[i].ptr, streams[1]));
        else
            CHECK(cuMemFree(buffers[i].ptr));
        buffers[i].live = false;
    }
    CHECK(cuCtxSynchronize());
    cuuint64_t zero = 0;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
    CHECK(cuMemPoolTrimTo(pool, 0));
    for (int i = 0; i < HOST_BUFFERS; i++) {
        if (hosts[i].pinned)
            CHECK(cuMemFreeHost(hosts[i].ptr));
        else
            free(hosts[i].ptr);
    }
    printf("done\n");
    return 0;
}

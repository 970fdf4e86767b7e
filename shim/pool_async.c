/* pool_async.c: stream-ordered allocations served from evictable memory.
 *
 * In offload mode a `cuMemAllocAsync`/`cuMemAllocFromPoolAsync` of at
 * least VRAMSHIM_MIN_EVICT is an evictable region (`vs_offload_alloc`) that
 * the shim keeps for the pool, with the semantics the driver documents for
 * its own pools:
 *
 *   - `cuMemFreeAsync` records an event on the stream after the free. Until
 *     that event has completed the region keeps its memory (work queued
 *     before the free may still use it); once it has, the region's memory
 *     may go (`vs_offload_free`).
 *   - A freed region is reused by an allocation of a size it holds (no
 *     larger, the same 2 MiB multiple) on the stream it was freed on at
 *     once (stream order separates the uses), on another stream only once
 *     the free's event has completed and while the pool allows
 *     opportunistic reuse (CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC).
 *   - The pool keeps freed regions whose free has completed up to its
 *     release threshold (what it reserves, minus what is in use); the rest,
 *     and all of them on `cuMemPoolTrimTo` or when room is wanted, go.
 *   - The pool's attributes add what the shim holds for it to the driver's
 *     figures: RESERVED (regions kept, in use or freed), USED (in use),
 *     their high-water marks (the sum of the driver's mark and the shim's).
 *
 * Passed to the driver unchanged: allocations on a capturing stream (graph
 * memory nodes), pools created exportable (`handleTypes`) or host-located,
 * pools of a device other than the current one, and allocations below
 * VRAMSHIM_MIN_EVICT.
 *
 * Entry points: `vs_pool_async_alloc`, `_free`, `_free_now`, the pool
 * hooks. `vs_pool_async.lock` is a leaf: the engine is never called under
 * it, nor any driver call that waits or allocates (only queries: a pool's
 * attributes, an event's state); decisions are taken under it, the calls
 * after.
 */
#include "pool_async.h"

#include "cap.h"
#include "config.h"
#include "driver.h"
#include "internal.h"
#include "log.h"
#include "offload.h"
#include "tunables.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

/* Freed regions are reused for sizes of the same 2 MiB multiple. */
#define VS_POOL_ASYNC_CLASS ((uint64_t)2 << 20)

/* One pool the shim has seen. */
typedef struct vs_apool_s {
    CUmemoryPool pool; /* key */
    int device;        /* -1: not served here (passthrough) */
    bool destroyed;
    bool opportunistic;  /* REUSE_ALLOW_OPPORTUNISTIC, as last set */
    uint64_t threshold;  /* RELEASE_THRESHOLD, as last set */
    uint64_t reserved, used, reserved_high, used_high; /* the shim's part */
    UT_hash_handle hh;
} vs_apool_t;

/* One served allocation, live or freed. */
typedef struct vs_ablock_s {
    uintptr_t base; /* key */
    uint64_t size;  /* requested */
    uint64_t held;  /* rounded to the granularity: what the pool counts */
    int device;
    CUcontext ctx;
    vs_apool_t *pool;
    bool freed;
    /* While freed: the stream of the free (NULL for a per-thread default
     * stream, which is not one stream), the event recorded after it (NULL
     * once it has completed) and the order of the frees, oldest first. */
    CUstream free_stream;
    CUevent free_event;
    uint64_t freed_seq;
    UT_hash_handle hh;
} vs_ablock_t;

static struct {
    pthread_mutex_t lock;
    vs_apool_t *pools;
    vs_ablock_t *blocks;
    uint64_t freed_seq;
    uint64_t granularity[VS_MAX_DEVICES];
    _Atomic int64_t plain_live[VS_MAX_DEVICES]; /* driver-served, live bytes */
    _Atomic int64_t served_live[VS_MAX_DEVICES]; /* shim-served, live bytes */
} vs_pool_async = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A list of blocks to release once the lock is let go. */
typedef struct vs_ablock_list_s {
    vs_ablock_t **items;
    size_t count, capacity;
} vs_ablock_list_t;

static void vs_ablock_list_push(vs_ablock_list_t *list, vs_ablock_t *b)
{
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 16;
        vs_ablock_t **grown = realloc(list->items, capacity * sizeof *grown);
        if (grown == NULL)
            return; /* kept in the table (as it was unlinked: relinked by the caller) */
        list->items = grown;
        list->capacity = capacity;
    }
    list->items[list->count++] = b;
}

static uint64_t vs_pool_async_granularity(int device)
{
    uint64_t g = vs_pool_async.granularity[device];
    if (g != 0)
        return g;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t granularity = 0;
    if (VS_CALL(cuMemGetAllocationGranularity, (&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM))
            != CUDA_SUCCESS
        || granularity == 0)
        granularity = VS_POOL_ASYNC_CLASS;
    vs_pool_async.granularity[device] = granularity;
    return granularity;
}

static void vs_apool_note_highs(vs_apool_t *p)
{
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    if (p->used > p->used_high)
        p->used_high = p->used;
}

/* The record of `pool`, made on first sight (lock held). A pool the shim
 * did not see created is served when it is a device's default or current
 * pool, found by asking each device; otherwise passed through. NULL when
 * out of memory. */
static vs_apool_t *vs_apool_get_locked(CUmemoryPool pool)
{
    vs_apool_t *p;
    HASH_FIND_PTR(vs_pool_async.pools, &pool, p);
    if (p != NULL)
        return p;
    p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->pool = pool;
    p->device = -1;
    p->opportunistic = true;
    int count = 0;
    if (VS_CALL(cuDeviceGetCount, (&count)) != CUDA_SUCCESS)
        count = 0;
    for (int i = 0; i < count && i < VS_MAX_DEVICES && p->device < 0; i++) {
        CUmemoryPool seen = NULL;
        if ((VS_CALL(cuDeviceGetDefaultMemPool, (&seen, (CUdevice)i)) == CUDA_SUCCESS && seen == pool)
            || (VS_CALL(cuDeviceGetMemPool, (&seen, (CUdevice)i)) == CUDA_SUCCESS && seen == pool))
            p->device = i;
    }
    cuuint64_t threshold = 0;
    if (VS_CALL(cuMemPoolGetAttribute, (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold)) == CUDA_SUCCESS)
        p->threshold = threshold;
    int opportunistic = 1;
    if (VS_CALL(cuMemPoolGetAttribute, (pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &opportunistic))
        == CUDA_SUCCESS)
        p->opportunistic = opportunistic != 0;
    HASH_ADD_PTR(vs_pool_async.pools, pool, p);
    if (p->hh.tbl == NULL) {
        free(p);
        return NULL;
    }
    return p;
}

/* The stream a call names: the NULL handle is the legacy stream, or the
 * calling thread's per-thread stream in the `_ptsz` variant. */
static CUstream vs_pool_async_stream(CUstream stream, bool per_thread)
{
    if (stream == NULL)
        return per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    return stream;
}

/* The stream a freed block may be reused on at once: `named` itself,
 * except the per-thread default stream, which is one stream per thread
 * under one handle (NULL: reused only once the free has completed). */
static CUstream vs_pool_async_identity(CUstream named)
{
    return named == CU_STREAM_PER_THREAD ? NULL : named;
}

/* Marks the freed blocks whose free event has completed (lock held), at
 * most `done_cap` (VS_POOL_ASYNC_POLL): the rest at a later poll. The
 * events are destroyed after, by the caller: collected in *done. */
static void vs_pool_async_poll_locked(CUevent *done, size_t *done_count, size_t done_cap)
{
    vs_ablock_t *b, *tmp;
    HASH_ITER(hh, vs_pool_async.blocks, b, tmp)
    {
        if (!b->freed || b->free_event == NULL || *done_count == done_cap)
            continue;
        if (VS_CALL(cuEventQuery, (b->free_event)) != CUDA_SUCCESS)
            continue;
        done[(*done_count)++] = b->free_event;
        b->free_event = NULL;
    }
}

/* Unlinks freed blocks whose free has completed: of `pool` (NULL: any) on
 * `device` (-1: any), oldest first, while the pool keeps more than
 * `keep` beside what is in use (UINT64_MAX: the pool's own threshold).
 * Lock held. */
static void vs_pool_async_take_locked(vs_apool_t *only, int device, uint64_t keep, vs_ablock_list_t *out)
{
    for (;;) {
        vs_ablock_t *oldest = NULL, *b, *tmp;
        HASH_ITER(hh, vs_pool_async.blocks, b, tmp)
        {
            if (!b->freed || b->free_event != NULL || (only != NULL && b->pool != only)
                || (device >= 0 && b->device != device))
                continue;
            vs_apool_t *p = b->pool;
            uint64_t limit = keep == UINT64_MAX ? (p->destroyed ? 0 : p->threshold) : keep;
            if (p->reserved - p->used <= limit)
                continue;
            if (oldest == NULL || b->freed_seq < oldest->freed_seq)
                oldest = b;
        }
        if (oldest == NULL)
            return;
        size_t before = out->count;
        vs_ablock_list_push(out, oldest);
        if (out->count == before)
            return;
        HASH_DEL(vs_pool_async.blocks, oldest);
        oldest->pool->reserved -= oldest->held;
    }
}

/* The driver calls after a decision: events destroyed, regions released. */
static void vs_pool_async_finish(CUevent *done, size_t done_count, vs_ablock_list_t *released)
{
    for (size_t i = 0; i < done_count; i++)
        (void)VS_CALL(cuEventDestroy_v2, (done[i]));
    for (size_t i = 0; i < released->count; i++) {
        CUresult rc = CUDA_SUCCESS;
        vs_ablock_t *b = released->items[i];
        if (!vs_offload_free((CUdeviceptr)b->base, &rc) || rc != CUDA_SUCCESS)
            vs_log(VS_LOG_WARN, "cannot release the pool's freed allocation at 0x%" PRIxPTR ": error %d", b->base,
                   (int)rc);
        free(b);
    }
    free(released->items);
}

/* Notes completed frees and releases what the pools keep past their
 * thresholds. */
static void vs_pool_async_reap(void)
{
    CUevent done[VS_POOL_ASYNC_POLL];
    size_t done_count = 0;
    vs_ablock_list_t released = {0};
    pthread_mutex_lock(&vs_pool_async.lock);
    if (vs_pool_async.blocks == NULL) {
        pthread_mutex_unlock(&vs_pool_async.lock);
        return;
    }
    vs_pool_async_poll_locked(done, &done_count, VS_POOL_ASYNC_POLL);
    vs_pool_async_take_locked(NULL, -1, UINT64_MAX, &released);
    pthread_mutex_unlock(&vs_pool_async.lock);
    vs_pool_async_finish(done, done_count, &released);
}

/* A freed block of `p` that an allocation of `bytes` on `stream` may take
 * (lock held). */
static vs_ablock_t *vs_pool_async_reusable_locked(vs_apool_t *p, uint64_t bytes, CUstream stream, CUcontext ctx)
{
    vs_ablock_t *best = NULL, *b, *tmp;
    uint64_t cls = (bytes + VS_POOL_ASYNC_CLASS - 1) / VS_POOL_ASYNC_CLASS;
    HASH_ITER(hh, vs_pool_async.blocks, b, tmp)
    {
        if (!b->freed || b->pool != p || b->ctx != ctx || b->size < bytes
            || (b->size + VS_POOL_ASYNC_CLASS - 1) / VS_POOL_ASYNC_CLASS != cls)
            continue;
        bool same_stream = b->free_stream != NULL && b->free_stream == stream;
        bool passed = b->free_event == NULL && p->opportunistic;
        if (!same_stream && !passed)
            continue;
        if (best == NULL || b->freed_seq > best->freed_seq)
            best = b;
    }
    return best;
}

bool vs_pool_async_alloc(CUdeviceptr *dptr, uint64_t bytes, CUmemoryPool pool, CUstream stream, bool per_thread,
                         int device, vs_alloc_kind_t kind, CUresult *rc)
{
    if (device < 0 || device >= VS_MAX_DEVICES)
        return false;
    if (pool == NULL && VS_CALL(cuDeviceGetMemPool, (&pool, (CUdevice)device)) != CUDA_SUCCESS)
        return false;
    CUstream named = vs_pool_async_stream(stream, per_thread);
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    if (VS_CALL(cuStreamIsCapturing, (named, &capture)) != CUDA_SUCCESS || capture != CU_STREAM_CAPTURE_STATUS_NONE)
        return false; /* a graph memory node, or a stream the driver refuses */
    CUcontext ctx = NULL;
    if (VS_CALL(cuCtxGetCurrent, (&ctx)) != CUDA_SUCCESS || ctx == NULL)
        return false;
    if (dptr == NULL) {
        *rc = CUDA_ERROR_INVALID_VALUE;
        return true;
    }
    vs_pool_async_reap();

    pthread_mutex_lock(&vs_pool_async.lock);
    vs_apool_t *p = vs_apool_get_locked(pool);
    if (p == NULL || p->device != device || p->destroyed) {
        pthread_mutex_unlock(&vs_pool_async.lock);
        return false;
    }
    vs_ablock_t *b = vs_pool_async_reusable_locked(p, bytes, vs_pool_async_identity(named), ctx);
    CUevent pending = NULL;
    if (b != NULL) {
        /* Reused before its free has run on the same stream: the event is
         * no longer needed (stream order does the rest). */
        pending = b->free_event;
        b->freed = false;
        b->free_event = NULL;
        b->free_stream = NULL;
        p->used += b->held;
        vs_apool_note_highs(p);
        atomic_fetch_add(&vs_pool_async.served_live[device], (int64_t)b->size);
        *dptr = (CUdeviceptr)b->base;
    }
    pthread_mutex_unlock(&vs_pool_async.lock);
    if (b != NULL) {
        if (pending != NULL)
            (void)VS_CALL(cuEventDestroy_v2, (pending));
        *rc = CUDA_SUCCESS;
        return true;
    }

    /* A new region. What the pools keep freed goes first when the device
     * has no room beside it. */
    uint64_t granularity = vs_pool_async_granularity(device);
    uint64_t held = (bytes + granularity - 1) / granularity * granularity;
    if (vs_cap_used(device) + held > vs_cap_limit(device))
        (void)vs_pool_async_trim_device(device);
    b = calloc(1, sizeof *b);
    if (b == NULL) {
        *rc = CUDA_ERROR_OUT_OF_MEMORY;
        return true;
    }
    *rc = vs_offload_alloc(dptr, bytes, device, kind);
    if (*rc != CUDA_SUCCESS) {
        free(b);
        return true;
    }
    b->base = (uintptr_t)*dptr;
    b->size = bytes;
    b->held = held;
    b->device = device;
    b->ctx = ctx;
    pthread_mutex_lock(&vs_pool_async.lock);
    p = vs_apool_get_locked(pool);
    b->pool = p;
    if (p != NULL) {
        HASH_ADD_PTR(vs_pool_async.blocks, base, b);
        if (b->hh.tbl == NULL)
            p = NULL;
    }
    if (p != NULL) {
        p->reserved += held;
        p->used += held;
        vs_apool_note_highs(p);
        atomic_fetch_add(&vs_pool_async.served_live[device], (int64_t)bytes);
    }
    pthread_mutex_unlock(&vs_pool_async.lock);
    if (p == NULL) {
        /* Untracked: an ordinary evictable allocation from now on, which
         * cuMemFreeAsync frees at once after its stream (out of memory). */
        vs_log(VS_LOG_WARN, "out of memory tracking a stream-ordered allocation");
        free(b);
    }
    return true;
}

bool vs_pool_async_free(CUdeviceptr dptr, CUstream stream, bool per_thread, CUresult *rc)
{
    pthread_mutex_lock(&vs_pool_async.lock);
    vs_ablock_t *b;
    uintptr_t key = (uintptr_t)dptr;
    HASH_FIND_PTR(vs_pool_async.blocks, &key, b);
    bool freed = b != NULL && b->freed;
    pthread_mutex_unlock(&vs_pool_async.lock);
    if (b == NULL)
        return false;
    if (freed) { /* freed twice */
        *rc = CUDA_ERROR_INVALID_VALUE;
        return true;
    }
    CUstream named = vs_pool_async_stream(stream, per_thread);
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    if (VS_CALL(cuStreamIsCapturing, (named, &capture)) != CUDA_SUCCESS) {
        *rc = CUDA_ERROR_INVALID_HANDLE;
        return true;
    }
    if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        /* A free node needs a graph allocation: not one of these. */
        *rc = CUDA_ERROR_INVALID_VALUE;
        return true;
    }
    CUevent event = NULL;
    *rc = VS_CALL(cuEventCreate, (&event, CU_EVENT_DISABLE_TIMING));
    if (*rc != CUDA_SUCCESS)
        return true;
    *rc = VS_CALL(cuEventRecord, (event, named));
    if (*rc != CUDA_SUCCESS) {
        (void)VS_CALL(cuEventDestroy_v2, (event));
        return true;
    }
    pthread_mutex_lock(&vs_pool_async.lock);
    HASH_FIND_PTR(vs_pool_async.blocks, &key, b);
    bool ours = b != NULL && !b->freed;
    if (ours) {
        b->freed = true;
        b->free_event = event;
        b->free_stream = vs_pool_async_identity(named);
        b->freed_seq = ++vs_pool_async.freed_seq;
        b->pool->used -= b->held;
        atomic_fetch_sub(&vs_pool_async.served_live[b->device], (int64_t)b->size);
    }
    pthread_mutex_unlock(&vs_pool_async.lock);
    if (!ours) { /* freed by another thread meanwhile */
        (void)VS_CALL(cuEventDestroy_v2, (event));
        *rc = CUDA_ERROR_INVALID_VALUE;
        return true;
    }
    vs_pool_async_reap();
    return true;
}

bool vs_pool_async_free_now(CUdeviceptr dptr, CUresult *rc)
{
    pthread_mutex_lock(&vs_pool_async.lock);
    vs_ablock_t *b;
    uintptr_t key = (uintptr_t)dptr;
    HASH_FIND_PTR(vs_pool_async.blocks, &key, b);
    if (b == NULL) {
        pthread_mutex_unlock(&vs_pool_async.lock);
        return false;
    }
    if (b->freed) {
        pthread_mutex_unlock(&vs_pool_async.lock);
        *rc = CUDA_ERROR_INVALID_VALUE;
        return true;
    }
    HASH_DEL(vs_pool_async.blocks, b);
    b->pool->used -= b->held;
    b->pool->reserved -= b->held;
    atomic_fetch_sub(&vs_pool_async.served_live[b->device], (int64_t)b->size);
    pthread_mutex_unlock(&vs_pool_async.lock);
    /* Like cuMemFree: the memory goes once the work using it is done. */
    if (!vs_offload_free(dptr, rc))
        *rc = CUDA_ERROR_INVALID_VALUE;
    free(b);
    return true;
}

bool vs_pool_async_trim_device(int device)
{
    CUevent done[VS_POOL_ASYNC_POLL];
    size_t done_count = 0;
    vs_ablock_list_t released = {0};
    pthread_mutex_lock(&vs_pool_async.lock);
    vs_pool_async_poll_locked(done, &done_count, VS_POOL_ASYNC_POLL);
    vs_pool_async_take_locked(NULL, device, 0, &released);
    pthread_mutex_unlock(&vs_pool_async.lock);
    bool any = released.count > 0;
    vs_pool_async_finish(done, done_count, &released);
    return any;
}

/* ---- The pool hooks ------------------------------------------------------ */

CUresult vs_pool_async_create(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    CUresult rc = VS_CALL(cuMemPoolCreate, (pool, props));
    if (rc != CUDA_SUCCESS || pool == NULL || props == NULL)
        return rc;
    bool served = props->location.type == CU_MEM_LOCATION_TYPE_DEVICE && props->handleTypes == CU_MEM_HANDLE_TYPE_NONE
                  && props->location.id >= 0 && props->location.id < VS_MAX_DEVICES;
    pthread_mutex_lock(&vs_pool_async.lock);
    vs_apool_t *p;
    HASH_FIND_PTR(vs_pool_async.pools, pool, p);
    if (p == NULL && (p = calloc(1, sizeof *p)) != NULL) {
        p->pool = *pool;
        HASH_ADD_PTR(vs_pool_async.pools, pool, p);
        if (p->hh.tbl == NULL) {
            free(p);
            p = NULL;
        }
    }
    if (p != NULL) {
        /* A handle the driver handed out again is a new pool. */
        p->device = served ? props->location.id : -1;
        p->destroyed = false;
        p->opportunistic = true;
        p->threshold = 0;
        p->reserved_high = p->reserved;
        p->used_high = p->used;
    }
    pthread_mutex_unlock(&vs_pool_async.lock);
    if (!served)
        vs_log(VS_LOG_DEBUG, "pool %p is exportable or not on a device: its allocations stay the driver's",
               (void *)*pool);
    return rc;
}

CUresult vs_pool_async_destroy(CUmemoryPool pool)
{
    CUresult rc = VS_CALL(cuMemPoolDestroy, (pool));
    if (rc != CUDA_SUCCESS)
        return rc;
    /* Its allocations still in use go at their free, the freed ones now
     * (those whose free has completed). */
    pthread_mutex_lock(&vs_pool_async.lock);
    vs_apool_t *p;
    HASH_FIND_PTR(vs_pool_async.pools, &pool, p);
    if (p != NULL)
        p->destroyed = true;
    pthread_mutex_unlock(&vs_pool_async.lock);
    vs_pool_async_reap();
    return rc;
}

/* The shim's figure for `attr` of `p` (lock held); false for attributes
 * the driver answers alone. */
static bool vs_apool_figure_locked(const vs_apool_t *p, CUmemPool_attribute attr, uint64_t *out)
{
    switch (attr) {
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *out = p->reserved; return true;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *out = p->reserved_high; return true;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *out = p->used; return true;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *out = p->used_high; return true;
    default: return false;
    }
}

CUresult vs_pool_async_get_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    vs_pool_async_reap();
    CUresult rc = VS_CALL(cuMemPoolGetAttribute, (pool, attr, value));
    if (rc != CUDA_SUCCESS || value == NULL)
        return rc;
    pthread_mutex_lock(&vs_pool_async.lock);
    vs_apool_t *p;
    uint64_t figure = 0;
    HASH_FIND_PTR(vs_pool_async.pools, &pool, p);
    if (p != NULL && vs_apool_figure_locked(p, attr, &figure))
        *(cuuint64_t *)value += figure;
    pthread_mutex_unlock(&vs_pool_async.lock);
    return rc;
}

CUresult vs_pool_async_set_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    CUresult rc = VS_CALL(cuMemPoolSetAttribute, (pool, attr, value));
    if (rc != CUDA_SUCCESS || value == NULL)
        return rc;
    pthread_mutex_lock(&vs_pool_async.lock);
    vs_apool_t *p;
    HASH_FIND_PTR(vs_pool_async.pools, &pool, p);
    if (p != NULL) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = *(cuuint64_t *)value; break;
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: p->opportunistic = *(int *)value != 0; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: p->reserved_high = p->reserved; break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: p->used_high = p->used; break;
        default: break;
        }
    }
    pthread_mutex_unlock(&vs_pool_async.lock);
    if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
        vs_pool_async_reap(); /* a lower threshold releases now */
    return rc;
}

CUresult vs_pool_async_trim_to(CUmemoryPool pool, size_t keep)
{
    CUevent done[VS_POOL_ASYNC_POLL];
    size_t done_count = 0;
    vs_ablock_list_t released = {0};
    uint64_t kept = 0;
    pthread_mutex_lock(&vs_pool_async.lock);
    vs_apool_t *p;
    HASH_FIND_PTR(vs_pool_async.pools, &pool, p);
    if (p != NULL) {
        vs_pool_async_poll_locked(done, &done_count, VS_POOL_ASYNC_POLL);
        /* Down to `keep` reserved in all: what is in use counts. */
        uint64_t spare = keep > p->used ? keep - p->used : 0;
        vs_pool_async_take_locked(p, -1, spare, &released);
        kept = p->reserved;
    }
    pthread_mutex_unlock(&vs_pool_async.lock);
    vs_pool_async_finish(done, done_count, &released);
    /* The driver keeps what is left of `keep` beside the shim's part. */
    return VS_CALL(cuMemPoolTrimTo, (pool, keep > kept ? keep - kept : 0));
}

/* ---- cuMemGetInfo and contexts ------------------------------------------- */

void vs_pool_async_count_plain(int device, int64_t delta)
{
    if (device >= 0 && device < VS_MAX_DEVICES)
        atomic_fetch_add(&vs_pool_async.plain_live[device], delta);
}

void vs_pool_async_meminfo(int device, uint64_t *free_bytes, uint64_t *total)
{
    if (device < 0 || device >= VS_MAX_DEVICES)
        return;
    vs_pool_async_reap();
    int64_t live = atomic_load(&vs_pool_async.plain_live[device]) + atomic_load(&vs_pool_async.served_live[device]);
    uint64_t used = live > 0 ? (uint64_t)live : 0;
    if (*free_bytes + used <= *total)
        return;
    *free_bytes = *total > used ? *total - used : 0;
    if (used > *total)
        *total = used;
}

CUmemoryPool vs_pool_async_pool_of(uintptr_t base)
{
    CUmemoryPool pool = NULL;
    vs_ablock_t *b;
    pthread_mutex_lock(&vs_pool_async.lock);
    HASH_FIND_PTR(vs_pool_async.blocks, &base, b);
    if (b != NULL && !b->freed)
        pool = b->pool->pool;
    pthread_mutex_unlock(&vs_pool_async.lock);
    return pool;
}

void vs_pool_async_ctx_destroyed(CUcontext ctx)
{
    pthread_mutex_lock(&vs_pool_async.lock);
    vs_ablock_t *b, *tmp;
    HASH_ITER(hh, vs_pool_async.blocks, b, tmp)
    {
        if (b->ctx != ctx)
            continue;
        /* Its region and its event went with the context. */
        HASH_DEL(vs_pool_async.blocks, b);
        b->pool->reserved -= b->held;
        if (!b->freed) {
            b->pool->used -= b->held;
            atomic_fetch_sub(&vs_pool_async.served_live[b->device], (int64_t)b->size);
        }
        free(b);
    }
    pthread_mutex_unlock(&vs_pool_async.lock);
}

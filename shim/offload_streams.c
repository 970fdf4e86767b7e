/* offload_streams.c: the offload engine's stream table, marker rings, fences
 * and event pool (`vs_streams_bit`, `vs_streams_fence`).
 *
 * Which streams used a region comes from the launch path: each operation
 * sets its stream's bit in the allocation's mask (registry.c), numbered by
 * the stream table here. A per-thread default stream can be waited for only
 * from its own thread; any other case the table cannot express falls back
 * to `cuCtxSynchronize`.
 *
 * The table has its own lock, `vs_streams.lock` (a leaf: no driver call and
 * no other lock under it), so that an operation's fast path can number its
 * stream without the engine lock. The marker rings and the event pool are
 * the engine's: guarded by `vs_engine.lock`.
 *
 * Several devices: streams, events and markers belong to a context. The
 * legacy and per-thread default streams are one per context, so a table
 * entry for them names its context, and whatever the engine does on such a
 * stream (record, capture query) runs with that context pushed. An event is
 * recorded only on a stream of its own context (else the driver answers
 * CUDA_ERROR_INVALID_HANDLE): the pool keeps each event with its context.
 * Waiting on another context's event is legal and needs nothing.
 */
#include "offload_internal.h"
#include "offload_streams.h"

#include <errno.h>
#include <stdlib.h>

#include "driver.h"
#include "log.h"
#include "tunables.h"

typedef enum vs_stream_kind_e {
    VS_STREAM_EMPTY = 0,
    VS_STREAM_LEGACY,     /* the legacy default stream (NULL in plain variants) */
    VS_STREAM_PER_THREAD, /* one thread's per-thread default stream */
    VS_STREAM_HANDLE,     /* a created stream */
    VS_STREAM_RETIRING,   /* destroyed behind a pending stream memory wait: `retire` tells when it is done */
} vs_stream_kind_t;

typedef struct vs_stream_entry_s {
    vs_stream_kind_t kind;
    CUstream handle;
    pthread_t owner; /* VS_STREAM_PER_THREAD */
    CUcontext ctx;   /* default streams: their context (see vs_streams_entry_ctx) */
    CUevent retire;  /* VS_STREAM_RETIRING: recorded after its last work */
} vs_stream_entry_t;

/* The stream table: slot i is bit 1 << i of an allocation's stream mask.
 * `generation` moves whenever a slot is emptied, so that the threads'
 * caches of their last look-up go stale. */
static struct {
    vs_mutex_t lock;
    vs_stream_entry_t table[VS_STREAM_SLOTS];
    _Atomic uint64_t generation;
} vs_streams = {.lock = VS_MUTEX_INITIALIZER, .generation = 1};

/* Markers: events recorded on a stream when an operation on it starts a
 * restore, each closing a registry epoch (`vs_registry_epoch_close`). An
 * allocation last used in epoch e on that stream is done with once the
 * oldest marker closing an epoch >= e has completed: an eviction waits for
 * that marker instead of the stream's current tail, so the copy out of a
 * victim used long ago does not queue behind the copy in that the stream's
 * latest work waits for. A ring keeps the newest VS_MARKERS. Guarded by the
 * engine lock. */
typedef struct vs_marker_ring_s {
    uint64_t epoch[VS_MARKERS];
    CUevent event[VS_MARKERS];
    CUcontext ctx; /* the context of `event`: the slot's stream's */
    uint32_t next, count;
} vs_marker_ring_t;
static vs_marker_ring_t vs_streams_markers[VS_STREAM_SLOTS];

/* Gates: a stream that has a stream memory wait (`cuStreamWaitValue*`,
 * a wait in `cuStreamBatchMemOp`) submitted may not run past it until some
 * later operation of the program writes the value, perhaps one that needs
 * room first. Nothing may then wait on the host for that stream's work
 * submitted after the wait: `first_epoch` is the epoch the marker recorded
 * just before the oldest wait still pending closed, `event` is recorded
 * after the newest wait (the stream is past every wait once it completes).
 * Work of epochs up to `first_epoch` is waited for through markers, which
 * precede the wait. Guarded by the engine lock. */
typedef struct vs_gate_s {
    CUevent event;
    CUcontext ctx; /* the event's */
    uint64_t first_epoch;
    bool pending;
} vs_gate_t;
static vs_gate_t vs_streams_gates[VS_STREAM_SLOTS];
/* How many gates are pending: read without the engine lock, so that a
 * program without stream memory waits never takes it for them. */
static _Atomic int vs_streams_gates_pending;
/* How many slots are retiring (VS_STREAM_RETIRING). */
static _Atomic int vs_streams_retiring;

static bool vs_streams_any_gate_pending(void);
static bool vs_streams_gate_pending(int slot);

static __thread struct {
    CUstream stream;
    bool per_thread;
    CUcontext ctx;
    uint64_t generation;
    uint64_t bit;
} vs_streams_cache __attribute__((tls_model("initial-exec")));

/* Pushes `ctx` when it is not NULL; true when it did (pop with
 * `vs_streams_ctx_leave`). */
static bool vs_streams_ctx_enter(CUcontext ctx)
{
    return ctx != NULL && VS_CALL(cuCtxPushCurrent_v2, (ctx)) == CUDA_SUCCESS;
}

static void vs_streams_ctx_leave(bool pushed)
{
    CUcontext popped;
    if (pushed)
        (void)VS_CALL(cuCtxPopCurrent_v2, (&popped));
}

static void vs_streams_classify(CUstream stream, bool per_thread, vs_stream_kind_t *kind, CUstream *handle)
{
    if (stream == NULL)
        *kind = per_thread ? VS_STREAM_PER_THREAD : VS_STREAM_LEGACY;
    else if (stream == CU_STREAM_LEGACY)
        *kind = VS_STREAM_LEGACY;
    else if (stream == CU_STREAM_PER_THREAD)
        *kind = VS_STREAM_PER_THREAD;
    else
        *kind = VS_STREAM_HANDLE;
    *handle = *kind == VS_STREAM_HANDLE ? stream : NULL;
}

/* The stream the driver means by `stream` in the variant called: NULL is
 * the per-thread default stream in the `_ptsz`/`_ptds` variants. */
CUstream vs_streams_resolve(CUstream stream, bool per_thread)
{
    return stream == NULL && per_thread ? CU_STREAM_PER_THREAD : stream;
}

/* The context of an entry's stream: a default stream's is in the entry; a
 * created stream's is asked of the driver, off the fast path (NULL when it
 * cannot say: then the current context is meant). */
static CUcontext vs_streams_entry_ctx(const vs_stream_entry_t *e)
{
    CUcontext ctx = e->ctx;
    if (e->kind == VS_STREAM_HANDLE && VS_CALL(cuStreamGetCtx, (e->handle, &ctx)) != CUDA_SUCCESS)
        ctx = NULL;
    return ctx;
}

/* A copy of stream table entry `slot`. */
static vs_stream_entry_t vs_streams_entry_copy(int slot)
{
    vs_mutex_lock(&vs_streams.lock);
    vs_stream_entry_t e = vs_streams.table[slot];
    vs_mutex_unlock(&vs_streams.lock);
    return e;
}

/* The mask bit of the stream an operation runs on. */
VS_LAUNCH_PATH
uint64_t vs_streams_bit(CUstream stream, bool per_thread)
{
    uint64_t generation = atomic_load_explicit(&vs_streams.generation, memory_order_acquire);
    vs_stream_kind_t kind;
    CUstream handle;
    vs_streams_classify(stream, per_thread, &kind, &handle);
    /* The default streams are the current context's. */
    CUcontext ctx = NULL;
    if (kind != VS_STREAM_HANDLE && VS_CALL(cuCtxGetCurrent, (&ctx)) != CUDA_SUCCESS)
        ctx = NULL;
    if (vs_streams_cache.generation == generation && vs_streams_cache.stream == stream
        && vs_streams_cache.per_thread == per_thread && vs_streams_cache.ctx == ctx)
        return vs_streams_cache.bit;
    pthread_t self = pthread_self();
    uint64_t bit = VS_STREAM_BIT_OVERFLOW;
    int empty = -1;
    vs_mutex_lock(&vs_streams.lock);
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        vs_stream_entry_t *e = &vs_streams.table[i];
        if (e->kind == VS_STREAM_EMPTY) {
            if (empty < 0)
                empty = i;
            continue;
        }
        if (e->kind == kind && e->handle == handle && (kind == VS_STREAM_HANDLE || e->ctx == ctx)
            && (kind != VS_STREAM_PER_THREAD || pthread_equal(e->owner, self))) {
            bit = 1ull << i;
            break;
        }
    }
    if (bit == VS_STREAM_BIT_OVERFLOW && empty >= 0) {
        vs_streams.table[empty] = (vs_stream_entry_t){.kind = kind, .handle = handle, .owner = self, .ctx = ctx};
        bit = 1ull << empty;
    }
    vs_mutex_unlock(&vs_streams.lock);
    vs_streams_cache.stream = stream;
    vs_streams_cache.per_thread = per_thread;
    vs_streams_cache.ctx = kind == VS_STREAM_HANDLE ? NULL : ctx;
    vs_streams_cache.generation = generation;
    vs_streams_cache.bit = bit;
    return bit;
}

void vs_offload_stream_destroyed(CUstream stream)
{
    if (!vs_offload_enabled() || stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
        return;
    bool known = false;
    vs_mutex_lock(&vs_streams.lock);
    for (int i = 0; i < VS_STREAM_SLOTS; i++)
        known |= vs_streams.table[i].kind == VS_STREAM_HANDLE && vs_streams.table[i].handle == stream;
    vs_mutex_unlock(&vs_streams.lock);
    if (!known)
        return;
    /* Allocations may still name this stream's bit: its work must be over
     * before the bit can mean another stream. Behind a pending stream
     * memory wait, waiting here could wait for an operation the program
     * makes after this call: the slot retires instead, with an event after
     * the stream's last work, and is emptied once that event has passed. */
    CUevent retire = NULL;
    CUstreamCaptureMode mode;
    if (atomic_load_explicit(&vs_streams_gates_pending, memory_order_relaxed) == 0)
        goto synchronize;
    vs_engine_lock(&mode);
    int slot = -1;
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        vs_stream_entry_t e = vs_streams_entry_copy(i);
        if (e.kind == VS_STREAM_HANDLE && e.handle == stream)
            slot = i;
    }
    CUcontext retire_ctx = NULL;
    if (slot >= 0 && vs_streams_gate_pending(slot)
        && VS_CALL(cuStreamGetCtx, (stream, &retire_ctx)) == CUDA_SUCCESS) {
        retire = vs_engine_event_get(retire_ctx);
        if (retire != NULL && VS_CALL(cuEventRecord, (retire, stream)) != CUDA_SUCCESS) {
            vs_engine_event_put(retire_ctx, retire);
            retire = NULL;
        }
    }
    if (retire != NULL) {
        vs_mutex_lock(&vs_streams.lock);
        vs_streams.table[slot].kind = VS_STREAM_RETIRING;
        vs_streams.table[slot].retire = retire;
        vs_streams.table[slot].ctx = retire_ctx; /* its waits and its event are that context's */
        atomic_fetch_add_explicit(&vs_streams_retiring, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&vs_streams.generation, 1, memory_order_acq_rel);
        vs_mutex_unlock(&vs_streams.lock);
        vs_engine_unlock(mode);
        return;
    }
    vs_engine_unlock(mode);
synchronize:
    (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (stream));
    vs_mutex_lock(&vs_streams.lock);
    int cleared = -1;
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        if (vs_streams.table[i].kind == VS_STREAM_HANDLE && vs_streams.table[i].handle == stream) {
            vs_streams.table[i].kind = VS_STREAM_EMPTY;
            cleared = i;
        }
    }
    atomic_fetch_add_explicit(&vs_streams.generation, 1, memory_order_acq_rel);
    vs_mutex_unlock(&vs_streams.lock);
    if (cleared >= 0) {
        vs_mutex_lock(&vs_engine.lock);
        vs_streams_markers[cleared].count = 0; /* its events stay for the next stream */
        vs_mutex_unlock(&vs_engine.lock);
    }
}

/* ---- Events -------------------------------------------------------------- */

/* A new event of `ctx` with `flags`, or NULL. */
static CUevent vs_engine_event_create(CUcontext ctx, unsigned flags)
{
    CUevent ev = NULL;
    bool pushed = vs_streams_ctx_enter(ctx);
    if (VS_CALL(cuEventCreate, (&ev, flags)) != CUDA_SUCCESS)
        ev = NULL;
    vs_streams_ctx_leave(pushed);
    return ev;
}

CUevent vs_engine_event_get(CUcontext ctx)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    for (size_t i = vs_engine.event_count; i-- > 0;) {
        if (vs_engine.events[i].ctx != ctx)
            continue;
        CUevent ev = vs_engine.events[i].event;
        vs_engine.events[i] = vs_engine.events[--vs_engine.event_count];
        return ev;
    }
    return vs_engine_event_create(ctx, CU_EVENT_DISABLE_TIMING);
}

CUevent vs_engine_timing_event_create(CUcontext ctx)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    return vs_engine_event_create(ctx, CU_EVENT_DEFAULT);
}

void vs_engine_event_put(CUcontext ctx, CUevent ev)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (ev == NULL)
        return;
    if (vs_engine.event_count == vs_engine.event_capacity) {
        size_t capacity = vs_engine.event_capacity ? vs_engine.event_capacity * 2 : 16;
        struct vs_engine_event_s *grown = realloc(vs_engine.events, capacity * sizeof *grown);
        if (grown == NULL) {
            (void)VS_CALL(cuEventDestroy_v2, (ev));
            return;
        }
        vs_engine.events = grown;
        vs_engine.event_capacity = capacity;
    }
    vs_engine.events[vs_engine.event_count++] = (struct vs_engine_event_s){.ctx = ctx, .event = ev};
}

/* ---- Waiting for the users of an allocation -------------------------------- */

/* The oldest marker of stream `slot` closing an epoch >= `epoch`, or NULL. */
static CUevent vs_streams_marker_find(int slot, uint64_t epoch)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    const vs_marker_ring_t *ring = &vs_streams_markers[slot];
    for (uint32_t k = 0; k < ring->count; k++) {
        uint32_t at = (ring->next + VS_MARKERS - ring->count + k) % VS_MARKERS;
        if (ring->epoch[at] >= epoch)
            return ring->event[at];
    }
    return NULL;
}

/* Makes `waiter` wait for the work submitted on the streams of `mask` in
 * epochs up to `epoch` (0: all so far). Returns 0, -EIO when a context-wide
 * wait failed, or -EBUSY when one of them is capturing (its earlier work
 * cannot be waited for without joining the capture). */
int vs_streams_fence(uint64_t mask, CUstream waiter, uint64_t epoch)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    /* Streams the table cannot name (overflow) may be of any context: then
     * every context the engine knows is synchronised, and the current one. */
    bool sync_all = (mask & VS_STREAM_BIT_OVERFLOW) != 0;
    CUcontext sync_ctx[VS_STREAM_SLOTS];
    size_t sync_count = 0;
    pthread_t self = pthread_self();

    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        if ((mask & (1ull << i)) == 0)
            continue;
        vs_stream_entry_t e = vs_streams_entry_copy(i);
        e.ctx = vs_streams_entry_ctx(&e);
        CUstream target;
        bool fallback = false;
        switch (e.kind) {
        case VS_STREAM_LEGACY:
            target = CU_STREAM_LEGACY;
            break;
        case VS_STREAM_PER_THREAD:
            if (!pthread_equal(e.owner, self)) {
                /* Another thread's per-thread stream: only a marker it
                 * recorded can be waited for from here. */
                CUevent marker = epoch != 0 ? vs_streams_marker_find(i, epoch) : NULL;
                if (marker == NULL || VS_CALL(cuStreamWaitEvent, (waiter, marker, 0)) != CUDA_SUCCESS)
                    sync_ctx[sync_count++] = e.ctx;
                continue;
            }
            target = CU_STREAM_PER_THREAD;
            break;
        case VS_STREAM_HANDLE:
            target = e.handle;
            break;
        case VS_STREAM_RETIRING: {
            /* Destroyed: a marker covering the use if there is one (before
             * a pending wait), else its last work, which ends with its
             * retire event. */
            CUevent marker = epoch != 0 ? vs_streams_marker_find(i, epoch) : NULL;
            if (marker == NULL || VS_CALL(cuStreamWaitEvent, (waiter, marker, 0)) != CUDA_SUCCESS) {
                if (VS_CALL(cuStreamWaitEvent, (waiter, e.retire, 0)) != CUDA_SUCCESS)
                    sync_ctx[sync_count++] = e.ctx;
            }
            continue;
        }
        default:
            continue; /* destroyed: its work was waited for then */
        }
        CUevent marker = epoch != 0 ? vs_streams_marker_find(i, epoch) : NULL;
        if (marker != NULL && VS_CALL(cuStreamWaitEvent, (waiter, marker, 0)) == CUDA_SUCCESS)
            continue;
        /* A default stream means the current context's: enter the entry's. */
        bool pushed = e.kind != VS_STREAM_HANDLE && vs_streams_ctx_enter(e.ctx);
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        if (VS_CALL(cuStreamIsCapturing, (target, &status)) == CUDA_SUCCESS
            && status != CU_STREAM_CAPTURE_STATUS_NONE) {
            vs_streams_ctx_leave(pushed);
            return -EBUSY;
        }
        CUevent ev = vs_engine_event_get(e.ctx);
        vs_log(VS_LOG_DEBUG, "waiting for stream %p (bit %d) with event %p", (void *)target, i, (void *)ev);
        if (ev == NULL || VS_CALL(cuEventRecord, (ev, target)) != CUDA_SUCCESS
            || VS_CALL(cuStreamWaitEvent, (waiter, ev, 0)) != CUDA_SUCCESS) {
            fallback = true;
        }
        vs_streams_ctx_leave(pushed);
        vs_engine_event_put(e.ctx, ev);
        if (fallback)
            sync_ctx[sync_count++] = e.ctx;
    }
    if (sync_all) {
        CUcontext current = NULL;
        (void)VS_CALL(cuCtxGetCurrent, (&current));
        sync_count = 0;
        sync_ctx[sync_count++] = NULL; /* the current context */
        for (int device = 0; device < VS_MAX_DEVICES && sync_count < VS_STREAM_SLOTS; device++)
            if (vs_engine.devices[device].ready && vs_engine.devices[device].ctx != current)
                sync_ctx[sync_count++] = vs_engine.devices[device].ctx;
    }
    /* A context-wide wait would also wait behind every pending stream
     * memory wait. */
    if (sync_count > 0 && vs_streams_any_gate_pending())
        return -EBUSY;
    for (size_t k = 0; k < sync_count; k++) {
        bool pushed = vs_streams_ctx_enter(sync_ctx[k]);
        CUresult rc = VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuCtxSynchronize, ());
        vs_streams_ctx_leave(pushed);
        if (rc != CUDA_SUCCESS)
            return -EIO;
    }
    return 0;
}

/* Whether any stream of `mask` is capturing now. */
bool vs_streams_mask_capturing(uint64_t mask)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        if ((mask & (1ull << i)) == 0)
            continue;
        vs_stream_entry_t e = vs_streams_entry_copy(i);
        if (e.kind != VS_STREAM_HANDLE)
            continue;
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        if (VS_CALL(cuStreamIsCapturing, (e.handle, &status)) == CUDA_SUCCESS
            && status != CU_STREAM_CAPTURE_STATUS_NONE)
            return true;
    }
    return false;
}

bool vs_streams_may_be_capturing(CUstream stream)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    return VS_CALL(cuStreamIsCapturing, (stream, &status)) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

typedef struct vs_streams_marker_arg_s {
    CUstream stream;
    CUevent event;
    bool recorded;
} vs_streams_marker_arg_t;

static void vs_streams_marker_record_registry_wrlocked(void *arg)
{
    VS_ASSERT(vs_registry_write_held());
    vs_streams_marker_arg_t *m = arg;
    m->recorded = VS_CALL(cuEventRecord, (m->event, m->stream)) == CUDA_SUCCESS;
}

/* Records a marker on `stream` (numbered `bit`) before the operation
 * preparing on it submits anything. Engine lock held. */
uint64_t vs_streams_marker_record(CUstream stream, uint64_t bit)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (bit == 0 || bit == VS_STREAM_BIT_OVERFLOW)
        return 0;
    int slot = __builtin_ctzll(bit);
    vs_marker_ring_t *ring = &vs_streams_markers[slot];
    vs_stream_entry_t e = vs_streams_entry_copy(slot);
    e.ctx = vs_streams_entry_ctx(&e);
    if (ring->ctx != e.ctx) {
        /* The slot now numbers a stream of another context: its events
         * cannot be recorded there. Waits already made keep their records. */
        for (uint32_t k = 0; k < VS_MARKERS; k++) {
            if (ring->event[k] != NULL)
                (void)VS_CALL(cuEventDestroy_v2, (ring->event[k]));
            ring->event[k] = NULL;
        }
        ring->count = 0;
        ring->ctx = e.ctx;
    }
    uint32_t at = ring->next;
    if (ring->event[at] == NULL) {
        bool pushed = vs_streams_ctx_enter(e.ctx);
        if (VS_CALL(cuEventCreate, (&ring->event[at], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
            ring->event[at] = NULL;
        vs_streams_ctx_leave(pushed);
        if (ring->event[at] == NULL)
            return 0;
    }
    vs_streams_marker_arg_t m = {.stream = stream, .event = ring->event[at]};
    /* Re-recording an event a fence already waits for is safe: the wait
     * took the earlier record. But a marker still listed must not move:
     * drop it from the ring first. */
    if (ring->count == VS_MARKERS)
        ring->count--;
    uint64_t epoch = vs_registry_epoch_close(vs_streams_marker_record_registry_wrlocked, &m);
    if (!m.recorded)
        return 0;
    ring->epoch[at] = epoch;
    ring->next = (at + 1) % VS_MARKERS;
    ring->count++;
    return epoch;
}

/* ---- Gates: stream memory waits ------------------------------------------ */

/* Whether the gate of `slot` is still closed (its event not yet reached). */
static bool vs_streams_gate_pending(int slot)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_gate_t *g = &vs_streams_gates[slot];
    if (!g->pending)
        return false;
    if (VS_CALL(cuEventQuery, (g->event)) == CUDA_ERROR_NOT_READY)
        return true;
    g->pending = false; /* passed (or failed: nothing more will run there) */
    atomic_fetch_sub_explicit(&vs_streams_gates_pending, 1, memory_order_relaxed);
    return false;
}

/* Empties the slots of destroyed streams whose last work has completed.
 * Engine lock held (the streams lock is taken under it, as a leaf). */
static void vs_streams_reap_retired(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (atomic_load_explicit(&vs_streams_retiring, memory_order_relaxed) == 0)
        return;
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        vs_stream_entry_t e = vs_streams_entry_copy(i);
        if (e.kind != VS_STREAM_RETIRING || VS_CALL(cuEventQuery, (e.retire)) == CUDA_ERROR_NOT_READY)
            continue;
        vs_mutex_lock(&vs_streams.lock);
        vs_streams.table[i].kind = VS_STREAM_EMPTY;
        vs_streams.table[i].retire = NULL;
        atomic_fetch_add_explicit(&vs_streams.generation, 1, memory_order_acq_rel);
        vs_mutex_unlock(&vs_streams.lock);
        atomic_fetch_sub_explicit(&vs_streams_retiring, 1, memory_order_relaxed);
        vs_streams_markers[i].count = 0;
        if (vs_streams_gates[i].pending) {
            vs_streams_gates[i].pending = false;
            atomic_fetch_sub_explicit(&vs_streams_gates_pending, 1, memory_order_relaxed);
        }
        vs_engine_event_put(e.ctx, e.retire);
    }
}

static bool vs_streams_any_gate_pending(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    bool pending = false;
    for (int i = 0; i < VS_STREAM_SLOTS; i++)
        pending |= vs_streams_gate_pending(i);
    return pending;
}

bool vs_streams_gated(uint64_t mask, uint64_t epoch)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_streams_reap_retired();
    if (atomic_load_explicit(&vs_streams_gates_pending, memory_order_relaxed) == 0)
        return false;
    if ((mask & VS_STREAM_BIT_OVERFLOW) != 0)
        return vs_streams_any_gate_pending(); /* only a context-wide wait could cover it */
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        if ((mask & (1ull << i)) == 0 || !vs_streams_gate_pending(i))
            continue;
        const vs_gate_t *g = &vs_streams_gates[i];
        if (epoch == 0 || epoch > g->first_epoch)
            return true; /* used after the wait */
        /* Used before it: fine while a marker from before the wait covers
         * the use (the fence waits for the oldest marker at or after it). */
        const vs_marker_ring_t *ring = &vs_streams_markers[i];
        bool covered = false;
        for (uint32_t k = 0; k < ring->count && !covered; k++) {
            uint32_t at = (ring->next + VS_MARKERS - ring->count + k) % VS_MARKERS;
            if (ring->epoch[at] >= epoch) {
                covered = ring->epoch[at] <= g->first_epoch;
                break;
            }
        }
        if (!covered)
            return true;
    }
    return false;
}

uint64_t vs_offload_stream_wait_begin(CUstream stream, bool per_thread)
{
    CUstreamCaptureMode mode;
    if (!vs_offload_enabled())
        return 0;
    uint64_t bit = vs_streams_bit(stream, per_thread);
    CUstream resolved = vs_streams_resolve(stream, per_thread);
    vs_engine_lock(&mode);
    uint64_t epoch = 0;
    vs_streams_reap_retired();
    /* A captured wait runs at the graph's launches, not now. */
    if (!vs_streams_may_be_capturing(resolved))
        epoch = vs_streams_marker_record(resolved, bit);
    vs_engine_unlock(mode);
    return epoch;
}

void vs_offload_stream_wait_end(CUstream stream, bool per_thread, uint64_t epoch)
{
    CUstreamCaptureMode mode;
    if (!vs_offload_enabled() || epoch == 0)
        return;
    uint64_t bit = vs_streams_bit(stream, per_thread);
    if (bit == 0 || bit == VS_STREAM_BIT_OVERFLOW)
        return;
    int slot = __builtin_ctzll(bit);
    vs_engine_lock(&mode);
    vs_gate_t *g = &vs_streams_gates[slot];
    bool pending = vs_streams_gate_pending(slot);
    /* The gate's event must be of the stream's context: a slot may have
     * numbered a stream of another context before. */
    CUstream resolved = vs_streams_resolve(stream, per_thread);
    CUcontext ctx = NULL;
    (void)VS_CALL(cuStreamGetCtx, (resolved, &ctx));
    if (g->event != NULL && g->ctx != ctx && !pending) {
        (void)VS_CALL(cuEventDestroy_v2, (g->event));
        g->event = NULL;
    }
    if (g->event == NULL) {
        bool pushed = vs_streams_ctx_enter(ctx);
        if (VS_CALL(cuEventCreate, (&g->event, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
            g->event = NULL;
        vs_streams_ctx_leave(pushed);
        g->ctx = ctx;
    }
    if (g->event != NULL && VS_CALL(cuEventRecord, (g->event, resolved)) == CUDA_SUCCESS) {
        if (!pending) {
            g->first_epoch = epoch;
            atomic_fetch_add_explicit(&vs_streams_gates_pending, 1, memory_order_relaxed);
        }
        g->pending = true;
    } else if (pending) {
        /* The newest wait cannot be followed: keep the gate closed for
         * good rather than trust the older event. */
        g->first_epoch = g->first_epoch < epoch ? g->first_epoch : epoch;
    } else {
        vs_log(VS_LOG_WARN, "cannot follow a stream memory wait; evictions may wait for it");
    }
    vs_engine_unlock(mode);
}

/* ---- A context destroyed ----------------------------------------------- */

/* The slots of the stream table whose stream belongs to `ctx`. Asked while
 * `ctx` is alive: a created stream's context is the driver's answer, which
 * a destroyed stream can no longer give. */
uint64_t vs_streams_ctx_slots(CUcontext ctx)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    uint64_t slots = 0;
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        vs_stream_entry_t e = vs_streams_entry_copy(i);
        if (e.kind != VS_STREAM_EMPTY && vs_streams_entry_ctx(&e) == ctx)
            slots |= 1ull << i;
    }
    return slots;
}

/* Frees (with `alive`: destroys in the driver first) one of the engine's
 * events of `ctx`. */
static void vs_streams_event_end(CUevent *ev, bool alive)
{
    if (*ev != NULL && alive)
        (void)VS_CALL(cuEventDestroy_v2, (*ev));
    *ev = NULL;
}

/* `ctx` is destroyed (`alive`: about to be, its work already waited for):
 * empties the stream table's `slots` (its streams), and ends every event
 * the engine keeps in it: markers, gates, retiring slots' events and the
 * pool's. With `alive` false the driver destroyed them already and nothing
 * here calls it with their handles. */
void vs_streams_ctx_forget(CUcontext ctx, uint64_t slots, bool alive)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_mutex_lock(&vs_streams.lock);
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        vs_stream_entry_t *e = &vs_streams.table[i];
        if ((slots & (1ull << i)) == 0 && !(e->kind == VS_STREAM_RETIRING && e->ctx == ctx))
            continue;
        if (e->kind == VS_STREAM_RETIRING) {
            atomic_fetch_sub_explicit(&vs_streams_retiring, 1, memory_order_relaxed);
            vs_streams_event_end(&e->retire, alive);
        }
        *e = (vs_stream_entry_t){.kind = VS_STREAM_EMPTY};
    }
    atomic_fetch_add_explicit(&vs_streams.generation, 1, memory_order_acq_rel);
    vs_mutex_unlock(&vs_streams.lock);
    for (int i = 0; i < VS_STREAM_SLOTS; i++) {
        vs_marker_ring_t *ring = &vs_streams_markers[i];
        if (ring->ctx == ctx || (slots & (1ull << i)) != 0) {
            for (uint32_t k = 0; k < VS_MARKERS; k++)
                vs_streams_event_end(&ring->event[k], alive || ring->ctx != ctx);
            /* Events of another context (the slot's previous stream's)
             * cannot be left for a later stream of this slot either. */
            ring->count = 0;
            ring->next = 0;
            ring->ctx = NULL;
        }
        vs_gate_t *g = &vs_streams_gates[i];
        if (g->ctx == ctx || (slots & (1ull << i)) != 0) {
            if (g->pending)
                atomic_fetch_sub_explicit(&vs_streams_gates_pending, 1, memory_order_relaxed);
            g->pending = false;
            if (g->ctx == ctx)
                vs_streams_event_end(&g->event, alive);
        }
    }
    size_t kept = 0;
    for (size_t i = 0; i < vs_engine.event_count; i++) {
        if (vs_engine.events[i].ctx == ctx)
            vs_streams_event_end(&vs_engine.events[i].event, alive);
        else
            vs_engine.events[kept++] = vs_engine.events[i];
    }
    vs_engine.event_count = kept;
}

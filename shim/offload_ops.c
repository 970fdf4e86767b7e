/* offload_ops.c: operations through the offload engine (`VS_OPERATE`:
 * `vs_op_scan`, `vs_op_prepare`, `vs_op_end`) and the hooks' other entry
 * points that act on regions: hold, pin, range, charge, reclaim.
 *
 * Every operation that touches device memory (launch, copy, memset, graph
 * launch) is scanned under the registry's read lock; when everything it
 * touches is resident (the common case) it is submitted under that same
 * read lock, so no eviction can slip between the scan and the submission,
 * and the engine lock is never taken. Otherwise `vs_op_prepare` takes the
 * engine lock, holds everything the operation needs, restores what is
 * missing, and the scan runs again.
 */
#include "offload_internal.h"
#include "offload_streams.h"
#include "offload_prefetch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "driver.h"
#include "log.h"
#include "trace_writer.h"
#include "tunables.h"

CUresult vs_offload_charge(int device, uint64_t bytes)
{
    CUstreamCaptureMode mode;
    vs_engine_lock(&mode);
    int rc = vs_engine_charge_engine_locked(device, bytes, "an allocation that cannot be evicted", 0);
    vs_engine_unlock(mode);
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

bool vs_offload_reclaim(int device, uint64_t bytes)
{
    CUstreamCaptureMode mode;
    vs_engine_lock(&mode);
    int rc = vs_engine_make_room(device, bytes, true);
    vs_engine_policy_reset_skips();
    if (rc == 0)
        vs_cap_release(device, bytes); /* the caller counts its own allocation */
    vs_engine_unlock(mode);
    return rc == 0;
}


/* The region containing `addr`. */
bool vs_offload_range(uintptr_t addr, vs_offload_range_t *out)
{
    CUstreamCaptureMode mode;
    if (!vs_offload_enabled())
        return false;
    vs_engine_lock(&mode);
    vs_region_t *r = vs_engine_region_containing(addr);
    if (r != NULL)
        *out = (vs_offload_range_t){.base = r->base, .size = r->size, .device = r->device, .ctx = r->ctx, .id = r->id};
    vs_engine_unlock(mode);
    return r != NULL;
}

void vs_offload_hold(const uintptr_t *addrs, size_t count, int delta)
{
    CUstreamCaptureMode mode;
    if (!vs_offload_enabled() || count == 0)
        return;
    vs_engine_lock(&mode);
    for (size_t i = 0; i < count; i++) {
        vs_region_t *r = vs_engine_region_containing(addrs[i]);
        if (r == NULL)
            continue;
        if (delta > 0)
            r->holds++;
        else if (r->holds > 0)
            r->holds--;
        vs_engine_policy_refresh(r);
    }
    vs_engine_unlock(mode);
}

void vs_offload_pin(uintptr_t addr, const char *reason)
{
    CUstreamCaptureMode mode;
    if (!vs_offload_enabled())
        return;
    vs_engine_lock(&mode);
    vs_region_t *r = vs_engine_region_containing(addr);
    if (r != NULL) {
        r->pinned = true;
        vs_engine_policy_refresh(r);
        (void)vs_registry_pin(r->base, reason);
    }
    vs_engine_unlock(mode);
}

/* VRAMSHIM_PIN_DEVICE_POINTERS: the words of a small host-to-device copy
 * that point into an evictable allocation are pointers the program stores
 * in device memory, where no launch scan will see them: those allocations
 * are pinned for good. Only copies up to VS_PIN_SCAN_MAX_BYTES are scanned
 * (pointer tables and `__device__` variables are small). */
bool vs_offload_pin_scan_enabled(void)
{
    return vs_offload_enabled() && vs_config_get()->pin_device_pointers;
}

size_t vs_offload_pin_named(uintptr_t dst, const void *host, uint64_t bytes, void (*found)(uintptr_t word, void *arg),
                            void *arg)
{
    if (!vs_offload_enabled() || !vs_config_get()->pin_device_pointers || host == NULL || bytes < 8
        || bytes > VS_PIN_SCAN_MAX_BYTES)
        return 0;
    size_t pinned = 0;
    /* Words aligned in device memory: where a kernel would read a pointer. */
    uint64_t first = (8 - (dst & 7)) & 7;
    for (uint64_t off = first; off + 8 <= bytes; off += 8) {
        uint64_t word;
        memcpy(&word, (const unsigned char *)host + off, sizeof word);
        vs_alloc_info_t info;
        if (word == 0 || vs_registry_find((uintptr_t)word, &info) != 0 || !info.evictable
            || !vs_registry_kind_device_side(info.kind))
            continue;
        vs_log(VS_LOG_INFO, "pinning the allocation at 0x%" PRIxPTR ": its address is copied into device memory",
               info.base);
        vs_offload_pin((uintptr_t)word, "its address was copied into device memory");
        found((uintptr_t)word, arg);
        pinned++;
    }
    return pinned;
}

/* ---- Operations ---------------------------------------------------------- */

VS_LAUNCH_PATH
void vs_op_begin(vs_op_t *op, CUstream stream, bool per_thread)
{
    op->stream = stream;
    op->per_thread = per_thread;
    op->restore = true;
    op->locked = false;
    op->depart_after = false;
    op->attempts = 0;
    op->held = NULL;
    op->held_count = 0;
    op->touch.stream_bit = vs_offload_enabled() ? vs_streams_bit(stream, per_thread) : 0;
}

/* Whether everything the scan found missing is held by this operation:
 * then it is mapped (held regions are never evicted), and still arriving
 * only with this operation's stream already waiting for its copy. */
static bool vs_ops_bases_held(const vs_op_t *op, const uintptr_t *bases, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        /* Mapped, with this operation's stream waiting for its copy; an
         * allocation freed and made again at the same address is not. */
        if (vs_registry_residency_registry_locked(bases[i]) != VS_ARRIVING)
            return false;
        bool found = false;
        for (size_t j = 0; j < op->held_count && !found; j++)
            found = op->held[j] == bases[i];
        if (!found)
            return false;
    }
    return true;
}

/* Read lock held. */
static bool vs_op_all_held(const vs_op_t *op, const uintptr_t *words, size_t count)
{
    if (op->held_count == 0)
        return false;
    if (op->touch.missing_count <= op->touch.missing_cap)
        return vs_ops_bases_held(op, op->touch.missing, op->touch.missing_count);
    /* More missing than the operation's buffer lists: list them all. */
    size_t cap = op->touch.missing_count;
    uintptr_t *all = malloc(cap * sizeof *all);
    if (all == NULL)
        return false;
    vs_touch_t again = {.seq = op->touch.seq, .missing = all, .missing_cap = cap};
    vs_registry_touch_many_registry_locked(words, count, &again);
    bool held = again.missing_count <= cap && vs_ops_bases_held(op, all, again.missing_count);
    free(all);
    return held;
}

/* The stream an operation runs on, as VRAMSHIM_TRACE numbers streams. */
static uintptr_t vs_ops_trace_stream_key(const vs_op_t *op)
{
    return (uintptr_t)vs_streams_resolve(op->stream, op->per_thread);
}

/* The ids one operation usually touches, listed without a heap buffer. */
#define VS_OPS_TRACE_IDS 64

/* VRAMSHIM_TRACE: the uses of the operation about to be submitted, from
 * the ids its scan collected, under the read lock it is submitted under.
 * Only an operation touching more than VS_OPS_TRACE_IDS allocations walks
 * the words again, to list them all. */
static void vs_ops_trace_registry_locked(const vs_op_t *op, const uintptr_t *words, size_t count)
{
    VS_ASSERT(vs_registry_lock_held());
    if (op->touch.ids_count <= op->touch.ids_cap) {
        vs_trace_operation(op->name, vs_ops_trace_stream_key(op), op->touch.ids, op->touch.ids_count);
        return;
    }
    size_t cap = op->touch.ids_count;
    uint64_t *ids = malloc(cap * sizeof *ids);
    if (ids == NULL)
        return; /* a gap in the trace, not a failed operation */
    /* Sequence number 0 stamps nothing and stream bit 0 adds no stream:
     * the scan did both. */
    vs_touch_t all = {.seq = 0, .ids = ids, .ids_cap = cap};
    vs_registry_touch_many_registry_locked(words, count, &all);
    vs_trace_operation(op->name, vs_ops_trace_stream_key(op), ids, all.ids_count < cap ? all.ids_count : cap);
    free(ids);
}

VS_LAUNCH_PATH
bool vs_op_scan(vs_op_t *op, const uintptr_t *words, size_t count)
{
    /* One sequence number per operation, however many scans it takes: the
     * policy learns the order of operations, not of attempts. */
    if (op->attempts == 0) {
        op->touch.seq = vs_registry_next_seq();
        if (atomic_load_explicit(&vs_engine.prefetch_step_due, memory_order_relaxed))
            op->depart_after = vs_prefetch_step(op->stream, op->per_thread, words, count);
    }
    op->touch.watched = false;
    op->touch.missing = op->missing;
    op->touch.missing_cap = VS_OP_MISSING_CAP;
    op->touch.missing_count = 0;
    op->touch.collect_all = false;
    uint64_t trace_ids[VS_OPS_TRACE_IDS];
    bool tracing = vs_trace_enabled();
    op->touch.ids = tracing ? trace_ids : NULL;
    op->touch.ids_cap = tracing ? VS_OPS_TRACE_IDS : 0;
    op->touch.ids_count = 0;
    op->touch.settled = op->settled;
    op->touch.settled_cap = VS_SETTLED_MAX;
    op->touch.settled_count = 0;
    op->touch.logged = false;
    vs_registry_read_begin();
    if (count > 0)
        vs_registry_touch_many_registry_locked(words, count, &op->touch);
    if (op->touch.watched && !atomic_load_explicit(&vs_engine.prefetch_step_due, memory_order_relaxed))
        atomic_store_explicit(&vs_engine.prefetch_step_due, true, memory_order_relaxed);
    bool shrink = op->attempts == 0 && atomic_load_explicit(&vs_engine.over_limit, memory_order_relaxed);
    if ((op->touch.missing_count == 0 && !shrink) || !op->restore || vs_op_all_held(op, words, count)) {
        if (op->touch.missing_count > 0)
            vs_log(VS_LOG_DEBUG, "submitting with %zu not resident (restore %d, first 0x%" PRIxPTR ")",
                   op->touch.missing_count, op->restore, op->touch.missing[0]);
        op->locked = true;
        if (tracing)
            vs_ops_trace_registry_locked(op, words, count);
        op->touch.ids = NULL; /* trace_ids goes with this frame */
        return true;
    }
    vs_registry_stamp_settled_registry_locked(&op->touch);
    vs_registry_read_end();
    op->touch.ids = NULL;
    return false;
}

/* Every base `words` touch, resident or not (malloc'd; NULL on failure). */
static uintptr_t *vs_op_collect(const uintptr_t *words, size_t count, size_t *found)
{
    size_t cap = 16;
    for (;;) {
        uintptr_t *bases = malloc(cap * sizeof *bases);
        if (bases == NULL)
            return NULL;
        vs_touch_t all = {.seq = 0, .missing = bases, .missing_cap = cap, .collect_all = true};
        vs_registry_read_begin();
        vs_registry_touch_many_registry_locked(words, count, &all);
        vs_registry_read_end();
        if (all.missing_count <= cap) {
            *found = all.missing_count;
            return bases;
        }
        free(bases);
        cap = all.missing_count;
    }
}


/* Lets go of one hold on each region starting at `bases`. Engine lock
 * held. */
static void vs_ops_unhold(const uintptr_t *bases, size_t count)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    for (size_t i = 0; i < count; i++) {
        vs_region_t *r = vs_engine_region_at(bases[i]);
        if (r != NULL && r->holds > 0) {
            r->holds--;
            vs_engine_policy_refresh(r);
        }
    }
}

/* The chunks of an arena after each touched chunk, which the operation may
 * reach (`vs_region_t.run_next`): added to `bases` (`*count` of them; the
 * array is given back, grown, or NULL on failure), each run from its last
 * chunk to the touched one, so that the chunks resident in a run stay a
 * suffix of it while they are restored. Engine lock held. */
static uintptr_t *vs_ops_runs_extend(uintptr_t *bases, size_t *count)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    size_t extra = 0;
    for (size_t i = 0; i < *count; i++) {
        vs_region_t *r = vs_engine_region_at(bases[i]);
        for (r = r != NULL ? r->run_next : NULL; r != NULL; r = r->run_next)
            extra++;
    }
    if (extra == 0)
        return bases;
    uintptr_t *grown = malloc((*count + extra) * sizeof *grown);
    if (grown == NULL) {
        free(bases);
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < *count; i++) {
        vs_region_t *r = vs_engine_region_at(bases[i]);
        size_t first = n;
        for (; r != NULL; r = r->run_next)
            grown[n++] = r->base;
        if (n == first) {
            grown[n++] = bases[i];
            continue;
        }
        for (size_t a = first, b = n - 1; a < b; a++, b--) {
            uintptr_t t = grown[a];
            grown[a] = grown[b];
            grown[b] = t;
        }
    }
    free(bases);
    *count = n;
    return grown;
}

CUresult vs_op_prepare(vs_op_t *op, const uintptr_t *words, size_t count)
{
    CUstreamCaptureMode mode;
    CUresult rc = CUDA_SUCCESS;

    if (++op->attempts > VS_OP_MAX_ATTEMPTS) {
        vs_log(VS_LOG_WARN, "an operation keeps finding its memory evicted; giving up on it");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uint64_t start = vs_monotonic_ns();
    vs_engine_lock_light(&mode);
    /* Captured work does not run now: leave the capture alone (the graph's
     * launch restores what it needs). */
    CUstream resolved = vs_streams_resolve(op->stream, op->per_thread);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (VS_CALL(cuStreamIsCapturing, (resolved, &status)) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE) {
        op->restore = false;
        vs_engine_unlock(mode);
        return CUDA_SUCCESS;
    }
    vs_streams_marker_record(resolved, op->touch.stream_bit);
    size_t found = 0;
    uintptr_t *bases = vs_op_collect(words, count, &found);
    if (bases != NULL)
        bases = vs_ops_runs_extend(bases, &found);
    if (bases == NULL) {
        vs_engine_unlock(mode);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    vs_meter_arm(resolved, true);
    /* Hold all of them first, so restoring one never evicts another. */
    size_t held = 0;
    bool departing = false;
    for (size_t i = 0; i < found; i++) {
        vs_region_t *r = vs_engine_region_at(bases[i]);
        if (r == NULL)
            continue;
        r->holds++;
        vs_engine_policy_refresh(r);
        bases[held++] = r->base;
        departing = departing || r->evicting;
    }
    /* A region the prefetcher evicts ahead of need is needed after all:
     * its departure ends, and it is restored like any evicted region. */
    if (departing)
        vs_engine_departures_settle();
    vs_engine_deferred_reap(false);
    /* An earlier operation passed the limit: back under it, now that what
     * this operation needs is held (its own restores may pass it again,
     * for the next operation to undo). */
    if (atomic_exchange_explicit(&vs_engine.over_limit, false, memory_order_relaxed)) {
        for (int device = 0; device < VS_MAX_DEVICES; device++) {
            if (vs_engine.devices[device].ready && vs_cap_used(device) > vs_cap_limit(device))
                (void)vs_engine_make_room(device, 0, false);
        }
        vs_engine_policy_reset_skips();
    }
    for (size_t i = 0; i < held && rc == CUDA_SUCCESS; i++) {
        vs_region_t *r = vs_engine_region_at(bases[i]);
        if (r == NULL)
            continue;
        vs_prefetch_forget(r);
        if (r->where != VS_RESIDENT) {
            rc = vs_engine_restore(r, op->stream, op->per_thread, op->held_count > 0 ? 1 : 0);
        } else if (r->arriving != NULL) {
            /* Restored for another stream (a prefetch); this one waits
             * for the copy. */
            (void)vs_meter_wait_for_copy(&vs_engine.devices[r->device], resolved, r->arriving);
        }
    }
    /* While this operation's own restores are in flight, start the copies
     * of what comes next. */
    if (rc == CUDA_SUCCESS && held > 0) {
        vs_engine_policy_sync();
        vs_prefetch_all();
    }
    vs_meter_disarm();
    /* Holds taken by an earlier attempt are superseded. */
    vs_ops_unhold(op->held, op->held_count);
    if (op->held_count == 0 && held > 0)
        vs_engine.ops_holding++;
    else if (op->held_count > 0 && held == 0)
        vs_engine.ops_holding--;
    free(op->held);
    op->held = bases;
    op->held_count = held;
    vs_engine.stats.restore_wait_ns += vs_monotonic_ns() - start;
    vs_engine_unlock(mode);
    return rc;
}

VS_LAUNCH_PATH
void vs_op_end(vs_op_t *op)
{
    if (op->locked) {
        /* Submitted: the settled allocations' stamps, with what their
         * look-ups read fetched while the driver took the operation. */
        vs_registry_stamp_settled_registry_locked(&op->touch);
        vs_registry_read_end();
        op->locked = false;
    }
    if (op->depart_after) {
        op->depart_after = false;
        vs_prefetch_after_launch();
    }
    if (op->held_count > 0) {
        CUstreamCaptureMode mode;
        vs_engine_lock_light(&mode);
        vs_ops_unhold(op->held, op->held_count);
        vs_engine.ops_holding--;
        pthread_cond_broadcast(&vs_engine.released);
        vs_engine_unlock(mode);
    }
    if (op->held != NULL) {
        free(op->held);
        op->held = NULL;
    }
    op->held_count = 0;
}

CUresult vs_op_hold(vs_op_t *op, const uintptr_t *words, size_t count)
{
    op->touch.seq = vs_registry_next_seq();
    return vs_op_prepare(op, words, count);
}

void vs_op_stamp(vs_op_t *op, const uintptr_t *words, size_t count)
{
    /* Everything is held (or the stream captures): the scan finds nothing
     * to restore and takes the read lock only to stamp. A hold taken by
     * `vs_op_hold` that failed part-way is retried like any operation's. */
    while (!vs_op_scan(op, words, count)) {
        if (vs_op_prepare(op, words, count) != CUDA_SUCCESS)
            break;
    }
    vs_op_end(op);
}

/* offload_evict.c: eviction: batches that move victims off the device
 * (`vs_engine_evict`), departures (batches the prefetcher starts ahead of
 * need and finishes at a later step: `vs_engine_depart`), and room for an
 * allocation or a restore (`vs_engine_make_room`).
 *
 * Eviction: mark the victims moving (under the registry's write lock, so no
 * operation is between its scan and its submission), make the engine's
 * device-to-host stream wait for the streams that used each victim
 * (offload_streams.c: an event recorded on each, never a device-wide sync),
 * hash and copy out in chunks, then, once the copies are over, unmap and
 * release. Everything here runs under the engine lock.
 */
#include "offload_internal.h"
#include "offload_device.h"
#include "offload_streams.h"
#include "offload_tier.h"
#include "offload_prefetch.h"
#include "pool_usage.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "log.h"
#include "tunables.h"

/* Puts back on the device a victim whose eviction cannot finish: every
 * stream in `streams` may still use it. */
static void vs_engine_evict_undo(vs_region_t *r, bool had_copy, uint64_t streams)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (!had_copy) {
        vs_host_pool_give(&r->host);
        vs_engine_host_hash_forget(r);
    }
    r->evicting = false;
    /* Still arriving when the eviction stopped before waiting for the copy
     * in: operations must keep waiting for it. */
    (void)vs_registry_set_residency(r->base, r->arriving != NULL ? VS_ARRIVING : VS_RESIDENT, false, NULL);
    vs_registry_add_streams(r->base, streams);
}

/* Blind once VS_BLIND_AFTER verdicts in a row found the region changed,
 * for VS_BLIND_RECHECK evictions; then it is judged again (its restore
 * hashes what arrived, and the eviction after compares). A region written
 * at every use (the activations, an optimizer's state) so skips the hash
 * kernel and the wait for its verdict, on the critical path of every
 * eviction. */
bool vs_engine_evict_blind(const vs_region_t *r)
{
    return r->changed_streak >= VS_BLIND_AFTER && r->blind_evictions < VS_BLIND_RECHECK;
}

/* The hash of the host copy's bytes [from, size), when it is known. */
bool vs_engine_host_hash(const vs_region_t *r, uint64_t from, vs_content_hash_t *out)
{
    if (r->host.count == 0)
        return false;
    for (int i = 0; i < 2; i++) {
        if (r->host_hashes[i].known && r->host_hashes[i].from == from) {
            *out = r->host_hashes[i].hash;
            return true;
        }
    }
    return false;
}

void vs_engine_host_hash_note(vs_region_t *r, uint64_t from, vs_content_hash_t hash)
{
    int slot = -1;
    for (int i = 0; i < 2 && slot < 0; i++)
        if (r->host_hashes[i].known && r->host_hashes[i].from == from)
            slot = i;
    for (int i = 0; i < 2 && slot < 0; i++)
        if (!r->host_hashes[i].known)
            slot = i;
    if (slot < 0)
        slot = r->host_hashes[0].from == 0 ? 1 : 0;
    r->host_hashes[slot] = (struct vs_host_hash_s){.known = true, .from = from, .hash = hash};
}

void vs_engine_host_hash_forget(vs_region_t *r)
{
    r->host_hashes[0].known = false;
    r->host_hashes[1].known = false;
}

/* Whether victim `i` of `e` (region `r`) has a hash to judge its bytes
 * [from, size) by: its host copy's, or its arrival's, taken over. */
static bool vs_eviction_judgeable(const vs_eviction_t *e, size_t i, const vs_region_t *r, uint64_t from)
{
    vs_content_hash_t known;
    return vs_engine_host_hash(r, from, &known) || (e->arrival_slot[i] >= 0 && e->arrival_from[i] == from);
}

/* ---- One eviction batch ---------------------------------------------------
 *
 * An eviction batch goes through two phases: on the device-to-host stream,
 * the hashes (and the copies of the victims that need no verdict), then, on
 * `to_host_changed`, the copies of the victims whose verdict found them
 * changed. Each phase ends
 * with an event; `vs_eviction_advance` reads the verdicts once the first
 * has completed and finishes the batch (unmap, release, counts) once the
 * last has. A synchronous eviction waits for both at once; a departure
 * (below) lets the host go on and is advanced later. */

/* Takes a free slot of the eviction hasher, or -1. */
static int vs_eviction_hash_slot(vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (d->evict_slots_busy == ~0ull)
        return -1;
    int slot = __builtin_ctzll(~d->evict_slots_busy);
    if (d->evict_hasher == NULL || (unsigned)slot >= vs_device_hasher_slots(d->evict_hasher))
        return -1;
    d->evict_slots_busy |= 1ull << slot;
    return slot;
}

static void vs_eviction_hash_slot_put(vs_engine_device_t *d, vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (r->hash_slot >= 0)
        d->evict_slots_busy &= ~(1ull << r->hash_slot);
    r->hash_slot = -1;
}

/* Records the end of the phase just submitted on `stream` (to_host or
 * to_host_changed): an event, or, when none can be had, a wait for the
 * stream here (the phase is then over). */
static void vs_eviction_mark(vs_eviction_t *e, vs_engine_device_t *d, CUstream stream)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (e->done == NULL)
        e->done = vs_engine_event_get(d->ctx);
    e->mark = ++d->eviction_marks;
    e->mark_stream = stream;
    if (e->done != NULL && VS_CALL(cuEventRecord, (e->done, stream)) == CUDA_SUCCESS) {
        e->phase_over = false;
        return;
    }
    CUresult rc = VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (stream));
    if (e->rc == CUDA_SUCCESS)
        e->rc = rc; /* a copy that failed before stays the batch's error */
    e->phase_over = true;
}

/* Whether the phase under way is over; with `wait`, waits for it. Its
 * result goes to e->rc. */
static bool vs_eviction_phase_over(vs_eviction_t *e, bool wait)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (e->phase_over)
        return true;
    if (wait)
        vs_meter_may_stall(&vs_engine.devices[e->device]);
    CUresult rc = wait ? VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuEventSynchronize, (e->done)) : VS_CALL(cuEventQuery, (e->done));
    if (rc == CUDA_ERROR_NOT_READY)
        return false;
    if (e->rc == CUDA_SUCCESS)
        e->rc = rc;
    e->phase_over = true;
    return true;
}

/* Starts evicting the regions of `victims` (all resident, on device
 * e->device; at most VS_EVICT_BATCH) into `e`. Returns how many started;
 * *host_full is set when the host pool had no room.
 *
 * For each victim, once its users are done: the content-hash kernel runs
 * over it. A victim without a host copy is copied out at once (the hash
 * becomes its copy's). One with a host copy waits for the verdict: when the
 * device bytes hash to what the host copy hashes to, nothing is copied (a
 * clean eviction: inference weights); otherwise it is copied over its host
 * copy. Then the physical memory goes. */
static size_t vs_eviction_start(vs_eviction_t *e, vs_region_t **victims, size_t count, bool *host_full)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = &vs_engine.devices[e->device];
    vs_device_hasher_t *hasher = vs_engine_evict_hasher(d, e->device);
    size_t started = 0;

    if (count > VS_EVICT_BATCH)
        count = VS_EVICT_BATCH;
    e->count = count;
    e->rc = CUDA_SUCCESS;
    for (size_t i = 0; i < count; i++) {
        e->victims[i] = victims[i];
        e->arrival_slot[i] = -1;
    }
    for (size_t i = 0; i < count; i++) {
        vs_region_t *r = e->victims[i];
        uint64_t streams = 0;
        if (vs_registry_streams(r->base, &streams) == 0 && vs_streams_mask_capturing(streams)) {
            e->victims[i] = NULL; /* used by a capture in progress: not now */
            continue;
        }
        e->had_copy[i] = r->host.count > 0;
        if (!e->had_copy[i] && vs_tier_host_take(r->size, &r->host) != 0) {
            *host_full = true;
            for (size_t j = i; j < count; j++)
                e->victims[j] = NULL;
            break;
        }
        /* The last use is read once the region is moving: from then on an
         * operation that touches it takes the slow path and waits for the
         * engine lock, so no use the fence must cover can be stamped after
         * this read. Read before, it could miss a launch submitted in
         * between, and the copy out would race that launch's writes (and
         * the unmap its accesses). */
        (void)vs_registry_set_residency(r->base, VS_MOVING, false, &streams);
        vs_alloc_info_t last;
        uint64_t epoch = vs_registry_find(r->base, &last) == 0 ? last.last_use_epoch : 0;
        e->streams_of[i] = streams;
        r->evicting = true;
        if (vs_streams_gated(streams, epoch)) {
            /* Its users may be waiting behind a stream memory wait that a
             * later operation releases: not now. */
            vs_log(VS_LOG_DEBUG, "not evicting 0x%" PRIxPTR ": used behind a pending stream memory wait", r->base);
            vs_engine_evict_undo(r, e->had_copy[i], streams);
            e->victims[i] = NULL;
            continue;
        }
        vs_log(VS_LOG_DEBUG, "evicting 0x%" PRIxPTR " (%" PRIu64 " bytes), used by streams 0x%" PRIx64, r->base,
               r->size, streams);
        if (r->arriving != NULL) {
            e->arrival_slot[i] = vs_engine_arrival_hash_take(r, &e->arrival_from[i]);
            /* The copy out waits for the copy in. From here the region is
             * no longer arriving: the deferred entry that still owns the
             * event must not mark it resident while it moves. */
            (void)vs_engine_wait_for_copy(d->to_host, r->arriving); /* or waits here */
            r->arriving = NULL;
        }
        if (vs_streams_fence(streams, d->to_host, epoch) != 0) {
            vs_log(VS_LOG_WARN, "cannot evict the allocation at 0x%" PRIxPTR "; it stays on the device", r->base);
            (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (d->to_host)); /* covers the copy in */
            vs_engine_restore_hash_end(d, NULL, e->arrival_slot[i], 0, 0, false);
            vs_engine_evict_undo(r, e->had_copy[i], streams);
            e->victims[i] = NULL;
            continue;
        }
        r->hash_slot = -1;
        /* Partial residency: a region whose head the plan keeps moves only
         * its tail, [split, size); any other moves all of it. A head smaller
         * than the plan now asks stays (a new split would cost a whole
         * copy); one larger than it goes, so that the budget holds. */
        uint64_t from = r->split > 0 && r->split <= r->keep && r->size > r->split ? r->split : 0;
        e->from_of[i] = from;
        /* A head that stays is judged with its tail, the head being
         * mapped, when only the host copy's hash from 0 is known: the plan
         * moved the head here since the region left whole. */
        uint64_t hash_from = from;
        if (from > 0 && !vs_eviction_judgeable(e, i, r, from) && vs_eviction_judgeable(e, i, r, 0))
            hash_from = 0;
        e->blind[i] = e->had_copy[i] && vs_engine_evict_blind(r);
        if (e->blind[i]) {
            vs_engine_host_hash_forget(r); /* its host copy is about to change, unhashed */
        } else if (hasher != NULL && (r->hash_slot = vs_eviction_hash_slot(d)) >= 0
                   && vs_device_hash_enqueue(hasher, (unsigned)r->hash_slot, (CUdeviceptr)(r->base + hash_from),
                                             r->size - hash_from, d->to_host)
                          != CUDA_SUCCESS) {
            vs_eviction_hash_slot_put(d, r);
        }
        if (r->hash_slot < 0)
            hash_from = from; /* not hashed: only what moves is copied */
        e->hash_from[i] = hash_from;
        /* Without a host copy, or a hash to judge it by, the bytes go now. */
        e->copied[i] = !e->had_copy[i] || r->hash_slot < 0 || !vs_eviction_judgeable(e, i, r, hash_from);
        e->judged[i] = !e->copied[i];
        if (e->copied[i] && vs_tier_copy_region(r, hash_from, r->size, VS_COPY_OUT, d->to_host) != CUDA_SUCCESS) {
            vs_log(VS_LOG_WARN, "cannot evict the allocation at 0x%" PRIxPTR "; it stays on the device", r->base);
            (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (d->to_host));
            vs_engine_restore_hash_end(d, NULL, e->arrival_slot[i], 0, 0, false);
            vs_eviction_hash_slot_put(d, r);
            vs_engine_evict_undo(r, e->had_copy[i], streams);
            e->victims[i] = NULL;
            continue;
        }
        started++;
    }
    if (started == 0)
        return 0;
    e->verdicts_read = false;
    vs_eviction_mark(e, d, d->to_host);
    return started;
}

/* Once the first phase is over: the restore hashes of victims that were
 * arriving become their host copies' hash, and the verdicts are read;
 * copies of the changed victims start. Returns whether a second phase
 * started. */
static bool vs_eviction_verdicts(vs_eviction_t *e, vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    e->verdicts_read = true;
    for (size_t i = 0; i < e->count; i++) {
        vs_region_t *r = e->victims[i];
        vs_content_hash_t known;
        /* The hash of what arrived becomes the host copy's, unless it
         * covers other bytes than this eviction moves and the host copy's
         * hash of those is known: the plan dropped the head the restore
         * expected to keep, and the verdict below needs the hash from 0. */
        if (r != NULL && e->arrival_slot[i] >= 0) {
            bool useful = e->arrival_from[i] == e->hash_from[i] || !vs_engine_host_hash(r, e->hash_from[i], &known);
            vs_engine_restore_hash_end(d, e->rc == CUDA_SUCCESS && useful ? r : NULL, e->arrival_slot[i],
                                       e->arrival_from[i], r->size - e->arrival_from[i], e->rc == CUDA_SUCCESS);
        }
        if (r != NULL)
            e->arrival_slot[i] = -1;
    }
    bool second = false;
    for (size_t i = 0; i < e->count && e->rc == CUDA_SUCCESS; i++) {
        vs_region_t *r = e->victims[i];
        if (r == NULL || e->copied[i])
            continue;
        vs_content_hash_t on_device = vs_device_hash_result(d->evict_hasher, (unsigned)r->hash_slot,
                                                            r->size - e->hash_from[i]),
                          on_host;
        if (vs_engine_host_hash(r, e->hash_from[i], &on_host) && vs_content_hash_equal(on_device, on_host))
            continue;
        e->copied[i] = true;
        second = true;
        if (vs_tier_copy_region(r, e->hash_from[i], r->size, VS_COPY_OUT, d->to_host_changed) != CUDA_SUCCESS) {
            e->rc = CUDA_ERROR_UNKNOWN; /* handled at the end, for every victim of the batch */
            break;
        }
    }
    if (second)
        vs_eviction_mark(e, d, d->to_host_changed);
    return second;
}

/* Ends victim `i` of the batch once the batch's copies are over: it leaves
 * the device (or, when a copy failed, stays). Returns the bytes freed. */
static uint64_t vs_eviction_finish_victim(vs_eviction_t *e, vs_engine_device_t *d, size_t i)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_region_t *r = e->victims[i];
    if (r == NULL)
        return 0;
    if (e->rc != CUDA_SUCCESS) {
        /* Nothing is known to have been waited for: every stream may
         * still be using it. A host copy written in part is no longer
         * what its hash says. */
        vs_log(VS_LOG_WARN, "copying the allocation at 0x%" PRIxPTR " to the host failed (%d); it stays on the device",
               r->base, (int)e->rc);
        if (e->copied[i])
            vs_engine_host_hash_forget(r);
        vs_eviction_hash_slot_put(d, r);
        vs_engine_evict_undo(r, e->had_copy[i], e->streams_of[i] | VS_STREAM_BIT_OVERFLOW);
        return 0;
    }
    uint64_t from = e->from_of[i], moved = r->size - from, hash_from = e->hash_from[i];
    if (r->hash_slot >= 0) {
        /* The kernel hashed exactly the bytes the copy then took (or
         * that the host copy already held: its other hash holds too). */
        vs_content_hash_t hashed = vs_device_hash_result(d->evict_hasher, (unsigned)r->hash_slot, r->size - hash_from);
        if (e->copied[i])
            vs_engine_host_hash_forget(r);
        vs_engine_host_hash_note(r, hash_from, hashed);
    } else {
        vs_engine_host_hash_forget(r);
    }
    r->head_on_host = from > 0 && hash_from == 0;
    vs_eviction_hash_slot_put(d, r);
    /* The tail goes; the head too unless it is kept. */
    uint64_t released = r->reserved - (from > 0 ? r->split : 0);
    if (from > 0) {
        vs_engine_physical_unmap(r);
        d->kept_head_bytes += r->split;
        vs_engine.stats.partial_evictions++;
    } else {
        vs_engine_physical_unmap_whole(r);
    }
    /* The plan's fillers swap with one another: the memory of the one
     * that left stays charged for the next one's restore. */
    if (!vs_engine_filler_hold(d, r, released))
        vs_cap_release(r->device, released);
    r->where = VS_ON_HOST;
    r->evicting = false;
    (void)vs_registry_set_residency(r->base, VS_ON_HOST, true, NULL);
    if (d->policy != NULL)
        (void)vs_policy_set_resident(d->policy, r->id, false);
    if (r->run_next != NULL)
        vs_engine_policy_refresh(r->run_next); /* its turn to go */
    if (r->prefetched)
        vs_engine.stats.prefetch_unused++;
    vs_prefetch_forget(r);
    vs_engine.stats.evictions++;
    if (e->ahead)
        vs_engine.stats.evictions_ahead++;
    vs_log(VS_LOG_DEBUG, "evicted 0x%" PRIxPTR ": %s", r->base,
           !e->copied[i]  ? "clean, nothing copied"
           : !e->had_copy[i] ? "copied (no host copy)"
           : e->judged[i]    ? "copied (changed)"
           : e->blind[i]     ? "copied (changed at its last evictions, not hashed)"
                             : "copied (no hash of these bytes to judge by)");
    if (e->judged[i] && e->copied[i]) {
        if (r->changed_streak < UINT8_MAX)
            r->changed_streak++;
        r->blind_evictions = 0;
    } else if (e->judged[i]) {
        r->changed_streak = 0;
        r->blind_evictions = 0;
    } else if (e->blind[i]) {
        r->blind_evictions++;
    }
    /* What the recent evictions copied out, decayed by 1/16 per
     * eviction: whether departures need a slot of their own. */
    d->evicted_recent = d->evicted_recent - d->evicted_recent / 16 + moved;
    d->copied_recent = d->copied_recent - d->copied_recent / 16 + (e->copied[i] ? moved : 0);
    if (e->copied[i]) {
        vs_engine.stats.bytes_to_host += r->size - hash_from;
    } else {
        vs_engine.stats.clean_drops++;
        vs_engine.stats.bytes_not_copied += moved;
    }
    return released;
}

/* Ends the batch once its copies are over: every victim still in it leaves
 * the device (or, when a copy failed, stays). Returns the bytes freed. */
static uint64_t vs_eviction_finish(vs_eviction_t *e, vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    uint64_t freed = 0;
    if (e->done != NULL) {
        vs_engine_event_put(d->ctx, e->done);
        e->done = NULL;
    }
    for (size_t i = 0; i < e->count; i++)
        freed += vs_eviction_finish_victim(e, d, i);
    e->count = 0;
    return freed;
}

/* Moves the batch on as far as it can go (with `wait`, to its end).
 * Returns whether it ended; *freed is then the bytes it freed. */
static bool vs_eviction_advance(vs_eviction_t *e, bool wait, uint64_t *freed)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = &vs_engine.devices[e->device];
    *freed = 0;
    if (!vs_eviction_phase_over(e, wait))
        return false;
    if (!e->verdicts_read && vs_eviction_verdicts(e, d) && !vs_eviction_phase_over(e, wait))
        return false;
    *freed = vs_eviction_finish(e, d);
    return true;
}

uint64_t vs_engine_evict(vs_region_t **victims, size_t count, bool *host_full)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_eviction_t e = {.device = victims[0]->device};
    uint64_t freed = 0;
    if (vs_eviction_start(&e, victims, count, host_full) > 0)
        (void)vs_eviction_advance(&e, true, &freed);
    for (size_t i = 0; i < count && i < VS_EVICT_BATCH; i++)
        victims[i] = e.victims[i];
    return freed;
}

/* ---- Departures -----------------------------------------------------------
 *
 * The prefetcher evicts ahead of need: a departure is an eviction batch
 * started without waiting for it (its hashes, verdicts and copies run on the
 * device-to-host stream while the host goes on), finished at a later step,
 * once its copies are over. Its victims stay charged, mapped and moving
 * (every operation on them takes the slow path) until then. At most
 * VS_DEPARTURES per device are under way, finished in the order they
 * started.
 *
 * Every engine entry but the operations' own (`vs_engine_lock_light`:
 * prepare, end, prefetch step) first finishes them all, waiting: frees,
 * context ends, spills, charges and reclaims never meet a departing region.
 * An operation that needs a departing region, and every eviction for room
 * (`vs_engine_make_room`), waits for them too. */

size_t vs_engine_departures(const vs_engine_device_t *d, uint64_t *bytes)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    size_t count = 0;
    uint64_t total = 0;
    for (const vs_eviction_t *e = d->departures; e != NULL; e = e->next) {
        count++;
        for (size_t i = 0; i < e->count; i++)
            if (e->victims[i] != NULL)
                total += e->victims[i]->reserved - (e->from_of[i] > 0 ? e->victims[i]->split : 0);
    }
    if (bytes != NULL)
        *bytes = total;
    return count;
}

bool vs_engine_depart(vs_engine_device_t *d, int device, vs_region_t **victims, size_t count)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_eviction_t *e = calloc(1, sizeof *e);
    bool host_full = false;
    if (e == NULL) {
        /* No room to keep it: evict now. */
        return vs_engine_evict(victims, count, &host_full) > 0;
    }
    e->device = device;
    e->ahead = true;
    if (vs_eviction_start(e, victims, count, &host_full) == 0) {
        free(e);
        return false;
    }
    vs_eviction_t **tail = &d->departures;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = e;
    vs_engine.departing++;
    return true;
}

/* Reads the verdicts of the departures whose hashes are over: the copies of
 * their changed victims queue at once. With `before`, it waits for the
 * hashes marked on the same stream before that mark (a wait the wait for
 * `before` includes anyway); else it does not wait. */
static void vs_departures_judge(vs_engine_device_t *d, const vs_eviction_t *before)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    d->verdicts_deferred = false;
    for (vs_eviction_t *e = d->departures; e != NULL; e = e->next) {
        bool included = before != NULL && e->mark_stream == before->mark_stream && e->mark < before->mark;
        if (!e->verdicts_read && vs_eviction_phase_over(e, included))
            (void)vs_eviction_verdicts(e, d);
    }
}

void vs_engine_departures_judge(vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_departures_judge(d, NULL);
}

/* Whether the oldest departure `e` is over; with `wait`, waits for it. Its
 * verdicts first (waiting for its hashes), then, with `judge_younger`, the
 * younger ones' that are ready, before waiting for any copy: the copies
 * out stay back to back. A restore's wait leaves the younger ones for
 * after its copy (`vs_engine_departure_lend`). */
static bool vs_departure_over(vs_engine_device_t *d, vs_eviction_t *e, bool wait, bool judge_younger)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (!e->verdicts_read) {
        if (!vs_eviction_phase_over(e, wait))
            return false;
        (void)vs_eviction_verdicts(e, d);
    }
    if (judge_younger)
        vs_departures_judge(d, wait ? e : NULL);
    else if (e->next != NULL)
        d->verdicts_deferred = true;
    return vs_eviction_phase_over(e, wait);
}

/* Takes the oldest departure, ended, off the list. */
static void vs_departure_drop_oldest(vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_eviction_t *e = d->departures;
    d->departures = e->next;
    vs_engine.departing--;
    free(e);
}

static uint64_t vs_departures_advance(vs_engine_device_t *d, bool wait, bool oldest_only, bool judge_younger)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    uint64_t freed_total = 0;
    while (d->departures != NULL && vs_departure_over(d, d->departures, wait, judge_younger)) {
        freed_total += vs_eviction_finish(d->departures, d);
        vs_departure_drop_oldest(d);
        if (oldest_only)
            break;
    }
    return freed_total;
}

uint64_t vs_engine_departures_advance(vs_engine_device_t *d, bool wait, bool oldest_only)
{
    return vs_departures_advance(d, wait, oldest_only, true);
}

uint64_t vs_engine_departures_finish_lender(vs_engine_device_t *d, const vs_region_t *lender)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_eviction_t *e = d->departures;
    size_t at = SIZE_MAX;
    for (size_t i = 0; e != NULL && i < e->count; i++)
        if (e->victims[i] == lender)
            at = i;
    if (at == SIZE_MAX)
        return vs_departures_advance(d, true, true, false);
    (void)vs_departure_over(d, e, true, false);
    if (e->rc != CUDA_SUCCESS)
        return vs_departures_advance(d, true, true, false); /* every victim stays */
    uint64_t freed = vs_eviction_finish_victim(e, d, at);
    e->victims[at] = NULL; /* the batch's end skips it */
    bool left = false;
    for (size_t i = 0; i < e->count && !left; i++)
        left = e->victims[i] != NULL;
    if (!left) {
        (void)vs_eviction_finish(e, d);
        vs_departure_drop_oldest(d);
    }
    return freed;
}

/* The bytes of the one mapping `victim` departs with from `from` (its tail
 * alone, or all of it when it has no head); 0 when it departs with two. */
static uint64_t vs_departing_piece(const vs_region_t *victim, uint64_t from)
{
    if (from > 0)
        return from == victim->split ? victim->reserved - from : 0;
    return victim->split == 0 ? victim->reserved : 0;
}

/* The bytes of the one mapping a restore of `r` makes (its tail, its head
 * being mapped; or all of it, when it keeps no head); 0 when it makes two. */
static uint64_t vs_restoring_piece(const vs_region_t *r)
{
    if (r->split > 0)
        return r->reserved - r->split;
    return r->keep == 0 || r->keep >= r->reserved ? r->reserved : 0;
}

vs_region_t *vs_engine_departure_lender(const vs_engine_device_t *d, const vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    const vs_eviction_t *oldest = d->departures;
    uint64_t piece = vs_restoring_piece(r);
    for (size_t i = 0; oldest != NULL && i < oldest->count; i++) {
        vs_region_t *victim = oldest->victims[i];
        if (victim == NULL || victim->phys_lent)
            continue;
        /* A whole allocation maps onto a victim leaving whole; one that
         * keeps its head, onto a victim leaving its tail alone from a head
         * of the same size; and any one mapping onto any departing one of
         * its size (pieces: a tail onto a victim of the tail's size leaving
         * whole, a whole allocation onto a tail of its size). */
        if ((victim->reserved == r->reserved && oldest->from_of[i] == r->split
             && (r->split == 0 || victim->split == r->split))
            || (piece != 0 && vs_departing_piece(victim, oldest->from_of[i]) == piece))
            return victim;
    }
    return NULL;
}

bool vs_engine_departure_lend(vs_engine_device_t *d, int device, vs_region_t *r, vs_region_t *lender, uint64_t need,
                              uint64_t *freed)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    bool premapped = lender != NULL && vs_engine_premap(r, lender);
    /* The wait reads the oldest departure's verdicts alone: polling the
     * younger ones (1.3 us each) here puts them between the oldest's end
     * and the restore's map and copy (the sweep's DiT at 75%, ratio 1:
     * 1.0504 x the bound, 925 ns a pass over the goal). The restore reads
     * them once its copy is queued. */
    *freed = premapped ? vs_engine_departures_finish_lender(d, lender) : vs_departures_advance(d, true, true, false);
    if (!premapped)
        return false;
    /* Still the lender's when its departure was called off. */
    if (!lender->phys_lent && vs_cap_reserve(device, need) == 0)
        return true;
    vs_engine_premap_drop(r, lender);
    return false;
}

void vs_engine_departures_settle(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_engine.departing == 0)
        return;
    for (int device = 0; device < VS_MAX_DEVICES; device++)
        (void)vs_engine_departures_advance(&vs_engine.devices[device], true, false);
}

/* Evicts from `device` until `need` more bytes fit under its limit (or, with
 * `ignore_limit`, until `need` bytes were freed), then counts `need` as
 * used. 0; -ENOSPC when nothing more can be evicted (nothing was counted);
 * -ENOMEM when the host pool is full. */
int vs_engine_make_room(int device, uint64_t need, bool ignore_limit)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = vs_engine_device(device);
    uint64_t freed_total = 0;
    bool synced = false;

    if (!ignore_limit && d != NULL && vs_engine_filler_take(d, need))
        return 0;
    for (int round = 0;; round++) {
        if (!ignore_limit && vs_cap_reserve(device, need) == 0)
            return 0;
        if (ignore_limit && freed_total >= need) {
            vs_cap_charge(device, need);
            return 0;
        }
        /* Departures free room of their own: before anything else departs,
         * the oldest ends (one at a time: the younger ones may not be
         * needed). */
        if (d != NULL && d->departures != NULL) {
            freed_total += vs_engine_departures_advance(d, true, true);
            continue;
        }
        /* Memory pools give back what they keep freed before anything is
         * evicted (pool_usage.c). */
        if (round == 0 && !ignore_limit && vs_pool_usage_trim(device))
            continue;
        if (d == NULL || d->policy == NULL)
            return -ENOSPC;
        uint64_t deficit;
        if (ignore_limit) {
            deficit = need - freed_total;
        } else {
            uint64_t limit = vs_cap_limit(device), used = vs_cap_used(device);
            deficit = used + need > limit ? used + need - limit : need;
        }
        if (!synced) {
            vs_engine_policy_sync();
            vs_prefetch_budget_update(d, device);
            synced = true;
        }
        uint64_t ids[VS_EVICT_BATCH];
        size_t n = 0;
        int rc = vs_policy_victims(d->policy, deficit, NULL, 0, ids, VS_EVICT_BATCH, &n);
        vs_region_t *victims[VS_EVICT_BATCH], *chosen[VS_EVICT_BATCH];
        size_t count = 0;
        for (size_t i = 0; i < n && (rc == 0 || rc == -ENOBUFS || rc == -ENOSPC); i++) {
            vs_region_t *r;
            HASH_FIND(hh_id, vs_engine.by_id, &ids[i], sizeof ids[i], r);
            if (r != NULL && r->where == VS_RESIDENT && vs_engine_region_evictable(r))
                victims[count++] = r;
        }
        if (count == 0) {
            /* Nothing whole left to evict: the heads evicted regions keep
             * (partial residency) go before the limit is passed. */
            uint64_t heads = vs_engine_heads_release(device);
            freed_total += heads;
            if (heads > 0)
                continue;
            return -ENOSPC;
        }
        memcpy(chosen, victims, count * sizeof *chosen);
        bool host_full = false;
        uint64_t freed = vs_engine_evict(victims, count, &host_full);
        freed_total += freed;
        if (freed == 0) {
            if (host_full)
                return -ENOMEM;
            /* Chosen but not evictable now (captures): keep them out of the
             * next choice of this call. */
            for (size_t i = 0; i < count; i++)
                (void)vs_policy_set_evictable(d->policy, chosen[i]->id, false);
            if (round > 64)
                return -ENOSPC;
        }
    }
}

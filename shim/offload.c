/* offload.c: the core of the oversubscription engine: regions, the engine
 * lock, restores in flight, room charged, restore (`vs_engine_restore`),
 * statistics and exit. A region's allocation and free are in
 * offload_alloc.c; eviction, departures and room in offload_evict.c;
 * devices and their physical memory in offload_device.c.
 *
 * A region is one evictable allocation: an address range reserved with
 * `cuMemAddressReserve` for its whole life, backed by one physical
 * allocation (`cuMemCreate`, the eviction unit) while resident, and by a
 * copy in the pinned host pool while evicted (offload_tier.c).
 *
 * Restore (`vs_engine_restore`): make room, map new physical memory, copy
 * in on the host-to-device stream and make the application's stream wait
 * for that copy's event. The host copy is given back once the event has
 * completed.
 *
 * The engine lock serialises every decision and every driver call the
 * engine makes; the fast path of an operation (offload_ops.c) never takes
 * it. Locks and their order: internal.h; what the engine's files share:
 * offload_internal.h.
 */
#include "offload_internal.h"
#include "offload_device.h"
#include "offload_streams.h"
#include "offload_tier.h"
#include "offload_prefetch.h"
#include "pool_usage.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "driver.h"
#include "host_memory.h"
#include "log.h"
#include "tunables.h"

vs_engine_t vs_engine = {
    .lock = VS_MUTEX_INITIALIZER, .released = PTHREAD_COND_INITIALIZER, .disk_io_done = PTHREAD_COND_INITIALIZER};

static pthread_once_t vs_engine_once = PTHREAD_ONCE_INIT;

/* The region starting at `base`, or NULL. Engine lock held. */
vs_region_t *vs_engine_region_at(uintptr_t base)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_region_t *r;
    HASH_FIND(hh, vs_engine.by_base, &base, sizeof base, r);
    return r;
}


static void vs_engine_init(void)
{
    const vs_config_t *cfg = vs_config_get();

    vs_engine.enabled = cfg->mode == VS_MODE_OFFLOAD;
    vs_engine.min_evict = cfg->min_evict;
    /* Within the cgroup's memory limit too: the pool is pinned. */
    char why[256];
    uint64_t host_limit = vs_host_memory_pool_limit(cfg, "", why, sizeof why);
    if (why[0] != '\0')
        vs_log(VS_LOG_WARN, "%s", why);
    vs_host_pool_configure(host_limit, vs_engine_pin_host, vs_engine_unpin_host);
    vs_engine.initialised = true;
}

VS_LAUNCH_PATH
bool vs_offload_enabled(void)
{
    pthread_once(&vs_engine_once, vs_engine_init);
    return vs_engine.enabled;
}

/* ---- Capture safety ------------------------------------------------------
 * The engine's own calls must not count as "unsafe" calls in a capture
 * another thread is making (that would invalidate it): relaxed mode. */

static CUstreamCaptureMode vs_engine_relax(void)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (VS_CALL(cuThreadExchangeStreamCaptureMode, (&mode)) != CUDA_SUCCESS)
        return CU_STREAM_CAPTURE_MODE_RELAXED;
    return mode;
}

static void vs_engine_unrelax(CUstreamCaptureMode mode)
{
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        (void)VS_CALL(cuThreadExchangeStreamCaptureMode, (&mode));
}

void vs_engine_lock_light(CUstreamCaptureMode *mode)
{
    vs_mutex_lock(&vs_engine.lock);
    *mode = vs_engine_relax();
}

void vs_engine_lock(CUstreamCaptureMode *mode)
{
    vs_engine_lock_light(mode);
    vs_arrive_join_all();
    vs_engine_departures_settle();
}

void vs_engine_unlock(CUstreamCaptureMode mode)
{
    vs_engine_spares_release();
    vs_engine_unrelax(mode);
    vs_mutex_unlock(&vs_engine.lock);
}

/* ---- Restores in flight -------------------------------------------------- */

/* Ends restore hash `slot` (-1: none): when the copy of [from, from +
 * bytes) it followed succeeded and `r` still holds its host copy, the hash
 * of what arrived becomes that copy's; the slot is free again either way. */
void vs_engine_restore_hash_end(vs_engine_device_t *dev, vs_region_t *r, int slot, uint64_t from,
                                uint64_t bytes, bool copied)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (slot < 0)
        return;
    if (r != NULL && copied && r->host.count > 0)
        vs_engine_host_hash_note(r, from, vs_device_hash_result(dev->restore_hasher, (unsigned)slot, bytes));
    dev->restore_slots_busy &= ~(1ull << slot);
}

/* Ends the restores whose copy has finished (they become resident, and the
 * hash of what arrived becomes their host copy's); with `wait`, waits for
 * all of them. */
void vs_engine_deferred_reap(bool wait)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    while (vs_engine.deferred_head != NULL) {
        vs_deferred_t *d = vs_engine.deferred_head;
        /* A copy the arrival thread queues: joined first when waiting;
         * otherwise not over as far as the engine knows (its join comes
         * where its region is needed). */
        if (d->arrival != 0 && !vs_arrive_joined(d->arrival)) {
            if (!wait)
                return;
            vs_arrive_join(d->arrival);
        }
        if (wait)
            vs_meter_may_stall(&vs_engine.devices[d->device]);
        CUresult rc = wait ? VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuEventSynchronize, (d->done)) : VS_CALL(cuEventQuery, (d->done));
        if (rc == CUDA_ERROR_NOT_READY)
            return;
        /* Done, or failed: either way the copy no longer reads the host
         * memory, and every stream may use the region. */
        vs_engine.deferred_head = d->next;
        if (vs_engine.deferred_head == NULL)
            vs_engine.deferred_tail = NULL;
        vs_region_t *r = vs_engine_region_at(d->base);
        vs_engine_device_t *dev = &vs_engine.devices[d->device];
        bool current = r != NULL && r->arriving == d->done;
        if (current) {
            r->arriving = NULL;
            (void)vs_registry_set_residency(r->base, VS_RESIDENT, false, NULL);
        }
        vs_engine_restore_hash_end(dev, current ? r : NULL, d->hash_slot, d->from, d->bytes, rc == CUDA_SUCCESS);
        vs_engine_event_put(dev->ctx, d->done);
        free(d);
    }
}

/* A region about to be evicted while its restore copy may still run: the
 * restore hash of what arrives ([*from, size)), taken from the deferred
 * entry so that the eviction can judge the region by it once its copies are
 * waited for (the event the eviction waits for follows that hash). -1 when
 * the restore hashes nothing. The reap would find the region no longer
 * arriving and drop it, and the eviction would copy bytes that did not
 * change. */
int vs_engine_arrival_hash_take(vs_region_t *r, uint64_t *from)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    for (vs_deferred_t *d = vs_engine.deferred_head; d != NULL; d = d->next) {
        if (d->done != r->arriving || d->base != r->base)
            continue;
        int slot = d->hash_slot;
        *from = d->from;
        d->hash_slot = -1;
        return slot;
    }
    return -1;
}

/* Returns whether the region may be left arriving (false: the copy was
 * waited for here). */
static bool vs_engine_deferred_push(CUevent done, vs_region_t *r, int hash_slot, uint64_t from, uint64_t arrival)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_deferred_t *d = calloc(1, sizeof *d);
    if (d == NULL) {
        /* No room to defer: wait for the copy now. */
        vs_arrive_join(arrival);
        CUresult rc = VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuEventSynchronize, (done));
        vs_engine_restore_hash_end(&vs_engine.devices[r->device], r, hash_slot, from, r->size - from,
                                   rc == CUDA_SUCCESS);
        vs_engine_event_put(vs_engine.devices[r->device].ctx, done);
        return false;
    }
    d->done = done;
    d->base = r->base;
    d->device = r->device;
    d->arrival = arrival;
    d->hash_slot = hash_slot;
    d->from = from;
    d->bytes = r->size - from;
    if (vs_engine.deferred_tail != NULL)
        vs_engine.deferred_tail->next = d;
    else
        vs_engine.deferred_head = d;
    vs_engine.deferred_tail = d;
    return true;
}

/* Makes `waiter` wait for a restore copy's event, or, when it cannot (a
 * stream being destroyed), waits for the copy here. Engine lock held. */
CUresult vs_engine_wait_for_copy(CUstream waiter, CUevent copied)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_arrive_join_event(copied); /* recorded by the arrival thread */
    CUresult rc = VS_CALL(cuStreamWaitEvent, (waiter, copied, 0));
    return rc == CUDA_SUCCESS ? rc : VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuEventSynchronize, (copied));
}

/* Whether host memory may come free without this thread: another thread
 * writes a host copy to disk or reads one back, an eviction's copy is
 * under way, or other operations hold regions (`own_holding` are this
 * thread's). Engine lock held. */
static bool vs_engine_host_busy(uint32_t own_holding)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_engine.ops_holding > own_holding || atomic_load(&vs_engine.departing) > 0)
        return true;
    for (vs_region_t *r = vs_engine.by_base; r != NULL; r = r->hh.next)
        if (r->disk_io || r->evicting)
            return true;
    return false;
}

/* Waits up to VS_ROOM_WAIT_MS for a region to be released. Engine lock
 * held; let go meanwhile. */
static void vs_engine_room_wait(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += VS_ROOM_WAIT_MS * 1000000l;
    if (until.tv_nsec >= 1000000000l) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000l;
    }
    vs_engine_spares_release();
    vs_mutex_timedwait(&vs_engine.released, &vs_engine.lock, &until);
}

/* Counts `bytes` on `device` for something that must be resident: within
 * the limit when eviction allows, past it (with one warning) otherwise.
 * Engine lock held. 0 or -ENOMEM: the host pool is full, nothing more can
 * be spilled to disk, and no other thread is about to free any. */
int vs_engine_charge_engine_locked(int device, uint64_t bytes, const char *what, uint32_t own_holding)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    int rc, spills = 0, heads_given = 0;
    uint64_t host_wait_since = 0;
    uint64_t lowest_used = UINT64_MAX; /* the device's, at this charge's full pools */
    for (int waits = 0;; waits++) {
        rc = vs_engine_make_room(device, bytes, false);
        vs_engine_policy_reset_skips();
        if (rc == 0)
            return 0;
        if (rc == -ENOMEM) {
            /* The host pool is full: with a disk tier, the coldest host
             * copies go to disk (the lock is let go for the writes), and
             * eviction tries again, up to VS_SPILL_ROUNDS times. A round
             * whose evictions bring the device's use to a new low counts
             * none: the room went to this charge's victims (a device past
             * its limit may need more victims than the pool holds copies,
             * one poolful per round). */
            int failed = 0;
            uint64_t used = vs_cap_used(device), limit = vs_cap_limit(device);
            if (used < lowest_used) {
                if (lowest_used != UINT64_MAX)
                    spills = 0; /* the last spills' room took victims off the device */
                lowest_used = used;
            }
            /* Enough for every victim's copy: the room eviction must make
             * (more than `bytes` on a device past its limit, after an
             * operation that needed more than the limit at once), and the
             * largest victim's copy, which room for that alone may not
             * take, whole, into the pool. */
            const vs_engine_device_t *d = vs_engine_device(device);
            uint64_t deficit = used + bytes > limit ? used + bytes - limit : 0;
            uint64_t spill_need = (deficit > bytes ? deficit : bytes) + (d != NULL ? d->largest : 0);
            if (spills++ < VS_SPILL_ROUNDS && vs_tier_spill(spill_need, &failed) > 0) {
                waits--;
                continue;
            }
            /* Nothing left to spill: the heads evicted regions keep on the
             * device (partial residency) give way. Each holds its region's
             * host copy in the pool, where no spill takes it (a restore
             * from disk brings a region back whole), and the pool may hold
             * little else: a victim's copy then had nowhere to go while
             * the limit's room went to heads. Given back, their room is
             * the device's again and their copies, whole, may go to disk;
             * the spills count afresh. Bounded: only other threads'
             * prefetches make heads again. */
            if (failed == 0 && heads_given++ < VS_SPILL_ROUNDS && vs_engine_heads_release_all() > 0) {
                spills = 0;
                waits--;
                continue;
            }
            /* Nothing to spill now (other threads move or hold every host
             * copy) or others took what the spills freed: wait for them,
             * then spill again, VS_HOST_WAIT_MS in all (a bound even while
             * they make progress). A failed write ends it: the disk is
             * full or failing. */
            uint64_t now = vs_monotonic_ns();
            if (host_wait_since == 0)
                host_wait_since = now;
            if (failed != 0 || now - host_wait_since > VS_HOST_WAIT_MS * 1000000ull
                || !vs_engine_host_busy(own_holding)) {
                vs_log(vs_engine.warned_host_full ? VS_LOG_DEBUG : VS_LOG_WARN,
                       "device %d: %s needs %" PRIu64 " bytes, but the host pool (VRAMSHIM_HOST_LIMIT) is full and "
                       "%s: out of memory",
                       device, what, bytes,
                       !vs_spill_enabled() ? "no disk tier is set (VRAMSHIM_SPILL_DIR)"
                       : failed != 0       ? "writing to the disk tier failed"
                                           : "nothing more can be spilled to disk");
                vs_engine.warned_host_full = true;
                return rc;
            }
            spills = 0;
            waits--;
            vs_engine_room_wait();
            continue;
        }
        /* Other threads' operations hold memory only until they are
         * submitted: wait for them rather than pass the limit. Bounded
         * (VS_ROOM_WAITS waits of VS_ROOM_WAIT_MS), so that two operations
         * can never wait for each other for long. */
        if (vs_engine.ops_holding <= own_holding || waits >= VS_ROOM_WAITS)
            break;
        vs_engine_room_wait();
    }
    vs_cap_charge(device, bytes);
    vs_engine.stats.over_limit++;
    atomic_store_explicit(&vs_engine.over_limit, true, memory_order_relaxed);
    if (!vs_engine.warned_over_limit) {
        vs_engine.warned_over_limit = true;
        vs_log(VS_LOG_WARN,
               "device %d: %s needs more than VRAM_LIMIT leaves (%" PRIu64 " of %" PRIu64
               " bytes in use, nothing more can be evicted); going past the limit",
               device, what, vs_cap_used(device), vs_cap_limit(device));
    }
    return 0;
}

/* ---- Restore ------------------------------------------------------------- */

/* A free slot of the restore hasher, or -1. */
static int vs_engine_restore_hash_slot(vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (d->restore_hasher == NULL || d->restore_slots_busy == ~0ull)
        return -1;
    int slot = __builtin_ctzll(~d->restore_slots_busy);
    if ((unsigned)slot >= vs_device_hasher_slots(d->restore_hasher))
        return -1;
    d->restore_slots_busy |= 1ull << slot;
    return slot;
}

/* Copies bytes [from, size) of `r`'s host copy to its freshly mapped
 * memory on the host-to-device stream and leaves it arriving. When the
 * hash of the bytes its evictions will judge ([split, size), all of them
 * without a head) is not known for its host copy, the hash of what arrived
 * there becomes it. With `waiter` (an application stream), that stream
 * waits for the copy. Engine lock held. */
static CUresult vs_engine_restore_copy(vs_region_t *r, uint64_t from, vs_engine_device_t *d, CUstream waiter,
                                       bool wait)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    /* The job of a restore ahead of need records the calls below; without
     * one, they are made here, after the arrival thread's (one stream). */
    vs_arrival_t *job = vs_engine.arrival_for == r ? vs_engine.arrival_open : NULL;
    if (job == NULL)
        vs_arrive_join_all();
    /* Recorded on the device's copy stream: an event of its context. */
    CUevent done = vs_engine_event_get(d->ctx);
    CUresult rc = vs_tier_copy_region(r, from, r->size, VS_COPY_IN, d->to_device);
    if (rc == CUDA_SUCCESS)
        vs_meter_copied(d, r->device, r->size - from);
    int hash_slot = -1;
    vs_content_hash_t known;
    /* Where its evictions' hash will start: after a kept head, whose bytes
     * the host copy may not have; at 0 when there is none, or when a head
     * that came from the host copy is not one the plan keeps (its
     * evictions move it too: `from` in offload_evict.c). */
    uint64_t judged = r->split < r->size && (!r->head_from_host || r->split <= r->keep) ? r->split : 0;
    if (rc == CUDA_SUCCESS && !vs_engine_host_hash(r, judged, &known) && !vs_engine_evict_blind(r)
        && vs_engine_evict_hasher(d, r->device) != NULL
        && (hash_slot = vs_engine_restore_hash_slot(d)) >= 0
        && (job != NULL ? !vs_arrive_hash(job, d->restore_hasher, (unsigned)hash_slot, (CUdeviceptr)(r->base + judged),
                                          r->size - judged)
                        : vs_device_hash_enqueue(d->restore_hasher, (unsigned)hash_slot,
                                                 (CUdeviceptr)(r->base + judged), r->size - judged, d->to_device)
                              != CUDA_SUCCESS)) {
        vs_engine_restore_hash_end(d, NULL, hash_slot, 0, 0, false);
        hash_slot = -1;
    }
    if (hash_slot >= 0)
        vs_meter_other_work(d);
    if (rc == CUDA_SUCCESS)
        rc = done == NULL                         ? CUDA_ERROR_OUT_OF_MEMORY
             : job != NULL                        ? (vs_arrive_record(job, done) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY)
                                                  : VS_CALL(cuEventRecord, (done, d->to_device));
    /* Handed over now: from here the region is arriving, and whoever needs
     * the copy joins the job first. */
    uint64_t arrival = 0;
    if (job != NULL) {
        (void)vs_engine_arrival_take();
        if (rc == CUDA_SUCCESS) {
            arrival = vs_arrive_hand_over(job);
            vs_meter_catch_up(d, r->device, arrival);
        } else {
            vs_arrive_cancel(job);
        }
    }
    if (rc == CUDA_SUCCESS && wait)
        rc = vs_meter_wait_for_copy(d, waiter, done);
    if (rc != CUDA_SUCCESS) {
        vs_log(VS_LOG_WARN, "cannot copy the allocation at 0x%" PRIxPTR " back to the device (error %d)", r->base,
               (int)rc);
        (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (d->to_device));
        vs_engine_restore_hash_end(d, NULL, hash_slot, 0, 0, false);
        vs_engine_event_put(d->ctx, done);
        return rc;
    }
    /* Streams other than `waiter` must wait for the copy too, until it is
     * known to be over: the region arrives, then is resident. */
    bool arriving = vs_engine_deferred_push(done, r, hash_slot, judged, arrival);
    r->arriving = arriving ? done : NULL;
    r->where = VS_RESIDENT;
    (void)vs_registry_set_residency(r->base, arriving ? VS_ARRIVING : VS_RESIDENT, true, NULL);
    return CUDA_SUCCESS;
}

/* Maps `r` (already counted) and brings its bytes back; `stream` (of the
 * variant `per_thread`) waits for them unless this is a prefetch. Engine
 * lock held. */
CUresult vs_engine_restore_mapped(vs_region_t *r, vs_engine_device_t *d, CUstream stream, bool per_thread,
                                  bool prefetch)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    /* What is missing, counted already: the tail alone when the head stayed
     * (only the tail's bytes then come in), else all of it. */
    uint64_t missing = vs_engine_region_missing(r), from = r->split, kept = r->split;
    /* Ahead of need, the grant, the copies and the hash go to the arrival
     * thread: room for two grants (a head and a tail), the copies of every
     * extent in chunks (at most one more per extent than whole chunks), a
     * hash and two records (the meter's and the arrival's). */
    if (prefetch && vs_engine.arrival_open == NULL && r->where != VS_ON_DISK && r->host.count > 0) {
        size_t ops = 2 + (r->host.count + (size_t)(r->size / VS_COPY_CHUNK_BYTES)) + 1 + 2;
        vs_engine_arrival_begin(vs_arrive_open(d, r->base, r->reserved, ops), r);
    }
    CUresult rc = vs_engine_physical_map_evicting(r);
    if (rc == CUDA_ERROR_INVALID_VALUE && r->stale_mapping)
        rc = CUDA_ERROR_OUT_OF_MEMORY; /* its range still holds memory an unmap could not take back */
    if (rc != CUDA_SUCCESS) {
        if (vs_engine.arrival_for == r)
            vs_arrive_cancel(vs_engine_arrival_take()); /* nothing of it may be made */
        vs_cap_release(r->device, missing);
        vs_log(VS_LOG_WARN, "cannot map device memory to restore the allocation at 0x%" PRIxPTR " (error %d)",
               r->base, (int)rc);
        return rc;
    }
    vs_log(VS_LOG_DEBUG, "%s 0x%" PRIxPTR " (%" PRIu64 " bytes from %" PRIu64 "%s) for stream %p",
           prefetch ? "prefetching" : "restoring", r->base, r->size - from, from,
           r->host.count == 0 ? ", no data yet" : "", (void *)stream);
    if (r->where == VS_ON_DISK) {
        /* (Spilled regions keep no head: vs_tier_spill_choice.) */
        rc = vs_tier_restore_from_disk(r, d);
        if (rc != CUDA_SUCCESS) {
            vs_engine_physical_unmap_whole(r);
            vs_cap_release(r->device, missing);
            return rc;
        }
        r->where = VS_RESIDENT;
        (void)vs_registry_set_residency(r->base, VS_RESIDENT, true, NULL);
        vs_engine.stats.bytes_to_device += r->size;
    } else if (r->host.count == 0) {
        /* Placed on the host at allocation and never written: nothing to
         * copy (its contents are undefined, as cuMemAlloc's are). */
        r->where = VS_RESIDENT;
        (void)vs_registry_set_residency(r->base, VS_RESIDENT, true, NULL);
    } else {
        rc = vs_engine_restore_copy(r, from, d, vs_streams_resolve(stream, per_thread), !prefetch);
        if (rc != CUDA_SUCCESS) {
            if (kept == 0)
                vs_engine_physical_unmap_whole(r);
            else
                vs_engine_physical_unmap(r); /* the head, mapped before, stays */
            vs_cap_release(r->device, missing);
            return rc;
        }
        vs_engine.stats.bytes_to_device += r->size - from;
    }
    /* The younger departures' verdicts its wait left (`vs_engine_departure_lend`). */
    if (d->verdicts_deferred)
        vs_engine_departures_judge(d);
    d->kept_head_bytes -= kept; /* resident again: its head counts with the rest */
    r->head_from_host = false;   /* its tail's arrival covers the head's (one stream) */
    r->head_on_host = false;     /* resident: its head may be written */
    if (d->policy != NULL)
        (void)vs_policy_set_resident(d->policy, r->id, true);
    if (r->run_next != NULL)
        vs_engine_policy_refresh(r->run_next); /* stays while this one does */
    vs_engine.stats.restores++;
    /* Its use is news to the prefetcher when it was prefetched (the window
     * frees) or is streamed by the plan (it becomes the next victim). */
    bool watched = prefetch;
    if (!watched && d->policy != NULL) {
        vs_policy_stats_t ps;
        vs_policy_stats(d->policy, &ps);
        watched = ps.planned_streamed_bytes > 0 && !vs_policy_planned_resident(d->policy, r->id);
    }
    (void)vs_registry_set_watched(r->base, watched);
    if (prefetch) {
        /* What moves counts against the window: a tail alone, when the
         * region keeps its head (partial residency). */
        r->prefetched = true;
        r->prefetch_counted = missing;
        d->prefetched_bytes += missing;
        vs_engine.stats.prefetches++;
        vs_engine.stats.prefetch_bytes += r->size;
    }
    return CUDA_SUCCESS;
}

/* Brings `r` back and makes `stream` (of the variant `per_thread`) wait for
 * it. Engine lock held. */
CUresult vs_engine_restore(vs_region_t *r, CUstream stream, bool per_thread, uint32_t own_holding)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = vs_engine_device(r->device);
    uintptr_t base = r->base;
    int device = r->device;
    if (d == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    /* Another thread's restore from disk or spill moves it now: wait, then
     * see what is left to do. */
    if (r->disk_io) {
        r = vs_engine_disk_io_wait(base);
        if (r == NULL || r->where == VS_RESIDENT) {
            if (r != NULL && r->arriving != NULL)
                (void)vs_engine_wait_for_copy(vs_streams_resolve(stream, per_thread), r->arriving);
            return CUDA_SUCCESS;
        }
    }
    bool spilled_own = false;
    for (;;) {
        uint64_t missing = vs_engine_region_missing(r), freed;
        vs_region_t *lender = d->departures != NULL ? vs_engine_departure_lender(d, r) : NULL;
        /* No room now, and a region of its size departs: that region's
         * memory is mapped here and granted before the wait for its
         * departure, while its users still run, so that once it ends only
         * the copy is left to queue, as for a prefetch. The departure's
         * other regions, over too, leave once the copy is queued: the
         * operation's next restores need their room, which the usual
         * path's wait frees (without it, the sweep's LLM at 25%, ratio
         * 0.75 took 1.051 x the bound instead of 1.041). */
        if (lender != NULL
            && (vs_cap_reserve(device, missing) == 0
                || vs_engine_departure_lend(d, device, r, lender, missing, &freed))) {
            CUresult rc = vs_engine_restore_mapped(r, d, stream, per_thread, false);
            (void)vs_engine_departures_advance(d, false, true);
            return rc;
        }
        if (vs_engine_charge_engine_locked(device, missing, "an operation", own_holding) != 0) {
            /* The host pool is full, and nothing else could go to disk:
             * its copy may be what fills it (the pool then holds it while
             * the victims its room needs have nowhere to go). Once that
             * copy is on disk the victims fit in the pool, and `r` comes
             * back from disk through the staging buffers. */
            if (spilled_own || !vs_tier_spill_restoring(r))
                return CUDA_ERROR_OUT_OF_MEMORY;
            spilled_own = true;
            r = vs_engine_disk_io_wait(base);
            if (r == NULL || r->where == VS_RESIDENT) {
                if (r != NULL && r->arriving != NULL)
                    (void)vs_engine_wait_for_copy(vs_streams_resolve(stream, per_thread), r->arriving);
                return CUDA_SUCCESS;
            }
            continue;
        }
        /* Making room may have waited or spilled (and let go of the engine
         * lock): another thread may have restored or freed the region
         * meanwhile, or be moving it. */
        r = vs_engine_disk_io_wait(base);
        if (r == NULL || r->where == VS_RESIDENT) {
            vs_cap_release(device, missing);
            if (r != NULL && r->arriving != NULL)
                (void)vs_engine_wait_for_copy(vs_streams_resolve(stream, per_thread), r->arriving);
            return CUDA_SUCCESS;
        }
        if (vs_engine_region_missing(r) == missing)
            return vs_engine_restore_mapped(r, d, stream, per_thread, false);
        vs_cap_release(device, missing); /* its head went meanwhile: count again */
    }
}

/* ---- Prefetch ------------------------------------------------------------ */
vs_region_t *vs_engine_region_containing(uintptr_t addr)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_alloc_info_t info;
    if (vs_registry_find(addr, &info) != 0)
        return NULL;
    return vs_engine_region_at(info.base);
}

/* ---- Statistics and exit -------------------------------------------------- */

void vs_offload_settle(void)
{
    CUstreamCaptureMode mode;
    if (!vs_offload_enabled() || atomic_load_explicit(&vs_engine.departing, memory_order_relaxed) == 0)
        return;
    vs_engine_lock(&mode); /* finishes the departures */
    vs_engine_unlock(mode);
}

/* Apart from vs_engine, whose layout the launch path is sensitive to. */
static _Atomic uint64_t vs_engine_host_ns[VS_HOST_KINDS], vs_engine_host_calls[VS_HOST_KINDS];

void vs_engine_host_time(vs_host_kind_t kind, uint64_t start_ns)
{
    atomic_fetch_add_explicit(&vs_engine_host_ns[kind], vs_monotonic_ns() - start_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&vs_engine_host_calls[kind], 1, memory_order_relaxed);
}

void vs_offload_stats(vs_offload_stats_t *out)
{
    vs_mutex_lock(&vs_engine.lock);
    *out = vs_engine.stats;
    vs_mutex_unlock(&vs_engine.lock);
    out->host_gpu_wait_ns = atomic_load_explicit(&vs_engine_host_ns[VS_HOST_GPU_WAIT], memory_order_relaxed);
    out->host_gpu_waits = atomic_load_explicit(&vs_engine_host_calls[VS_HOST_GPU_WAIT], memory_order_relaxed);
    out->host_vmm_ns = atomic_load_explicit(&vs_engine_host_ns[VS_HOST_VMM], memory_order_relaxed);
    out->host_vmm_calls = atomic_load_explicit(&vs_engine_host_calls[VS_HOST_VMM], memory_order_relaxed);
}

void vs_offload_shutdown(void)
{
    if (!vs_engine.initialised || !vs_engine.enabled)
        return;
    vs_offload_retire_stop();
    vs_offload_arrive_stop();
    vs_offload_stats_t s;
    vs_host_pool_stats_t pool;
    vs_offload_stats(&s);
    vs_host_pool_stats(&pool);
    char to_host[32], to_device[32], pinned[32], pool_limit[32];
    vs_log(VS_LOG_INFO,
           "  evicted         %" PRIu64 " times, %s to the host (%" PRIu64 " bytes); %" PRIu64
           " unchanged since their host copy (%" PRIu64 " bytes not copied)",
           s.evictions, vs_log_bytes(to_host, sizeof to_host, s.bytes_to_host), s.bytes_to_host, s.clean_drops,
           s.bytes_not_copied);
    vs_log(VS_LOG_INFO,
           "  restored        %" PRIu64 " times, %s to the device (%" PRIu64 " bytes); %" PRIu64
           " brought in ahead of use (%" PRIu64 " never used)",
           s.restores, vs_log_bytes(to_device, sizeof to_device, s.bytes_to_device), s.bytes_to_device, s.prefetches,
           s.prefetch_unused);
    vs_log(VS_LOG_INFO, "  waited          %.3f ms for restores; over the limit %" PRIu64 " times",
           (double)s.restore_wait_ns / 1e6, s.over_limit);
    vs_log(VS_LOG_INFO,
           "  host memory     %s pinned of %s allowed (%" PRIu64 " of %" PRIu64 " bytes); %" PRIu64
           " allocations placed there",
           vs_log_bytes(pinned, sizeof pinned, pool.pinned), vs_log_bytes(pool_limit, sizeof pool_limit, pool.limit),
           pool.pinned, pool.limit, s.placed_on_host);
    if (vs_spill_enabled()) {
        vs_spill_stats_t disk;
        vs_spill_stats(&disk);
        vs_log(VS_LOG_INFO,
               "  disk            %" PRIu64 " spills (%" PRIu64 " bytes), %" PRIu64 " restores (%" PRIu64
               " bytes); spill file %" PRIu64 " bytes (%" PRIu64 " in use); %" PRIu64 " checksum failures, %" PRIu64
               " I/O errors; %s I/O",
               s.spills, s.bytes_to_disk, s.disk_reads, s.bytes_from_disk, disk.file_bytes, disk.used_bytes,
               disk.checksum_failures, disk.io_errors, disk.direct_io ? "direct" : "buffered");
    }
    /* The engine's mechanisms, for whoever tunes them. */
    vs_log(VS_LOG_DEBUG,
           "offload details: copies served from host copies %" PRIu64 " bytes, prefetched %" PRIu64
           " bytes, kept host copies dropped %" PRIu64 ", partial evictions %" PRIu64
           ", evictions ahead of need %" PRIu64 ", partial restores %" PRIu64 ", restores mapped ahead %" PRIu64
           ", restores onto held filler memory %" PRIu64 ", regime changes %" PRIu64
           ", host waits for the GPU %.3f ms (%" PRIu64 "), VMM calls %.3f ms (%" PRIu64 ")",
           s.bytes_served_on_host, s.prefetch_bytes, s.host_copies_dropped, s.partial_evictions, s.evictions_ahead,
           s.partial_restores, s.mapped_ahead, s.filler_maps, s.regime_changes, (double)s.host_gpu_wait_ns / 1e6,
           s.host_gpu_waits, (double)s.host_vmm_ns / 1e6, s.host_vmm_calls);
    /* The plan's own figures: how often it was built (each build may move
     * allocations between the kept and the streamed, a copy each) and the
     * cycle it learned, which a GPU run cannot see otherwise. */
    for (int device = 0; device < VS_MAX_DEVICES && vs_log_enabled(VS_LOG_DEBUG); device++) {
        vs_policy_stats_t ps;
        vs_mutex_lock(&vs_engine.lock);
        const vs_engine_device_t *d = &vs_engine.devices[device];
        bool planned = d->ready && d->policy != NULL;
        if (planned)
            vs_policy_stats(d->policy, &ps);
        uint64_t pieces = d->pieces_seen, fillers = d->fillers_seen;
        vs_mutex_unlock(&vs_engine.lock);
        if (!planned)
            continue;
        static const char *const cause_names[] = {
#define VS_POLICY_STALE_NAME(suffix, name) name,
            VS_POLICY_STALE_LIST(VS_POLICY_STALE_NAME)
#undef VS_POLICY_STALE_NAME
        };
        char causes[256];
        size_t used = 0;
        for (int cause = 0; cause < VS_POLICY_STALE_CAUSES && used < sizeof causes; cause++) {
            int n = snprintf(causes + used, sizeof causes - used, "%s%s %" PRIu64, cause ? ", " : "",
                             cause_names[cause], ps.plan_builds_for[cause]);
            used += n > 0 ? (size_t)n : 0;
        }
        /* Which pieces the plans in pieces streamed, when any did
         * (`vs_prefetch_piece`), with which fillers: the plan at exit is
         * often another. */
        char in_pieces[96] = "";
        if (pieces != 0)
            snprintf(in_pieces, sizeof in_pieces,
                     "; the last plan in pieces: pieces of %" PRIu64 " bytes, fillers of %" PRIu64 " bytes", pieces,
                     fillers);
        vs_log(VS_LOG_DEBUG,
               "offload details: device %d: plans built %" PRIu64 ", learned cycle %" PRIu64
               " operations, the plan streams %" PRIu64 " bytes a cycle; built for %s%s",
               device, ps.plan_builds, ps.period, ps.planned_streamed_bytes, causes, in_pieces);
    }
    /* The spill file has no name: it goes with the process. */
    /* The process is exiting: the pinned slabs go with it. Freeing them
     * here would race with threads still running. */
}

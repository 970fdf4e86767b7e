/* offload_prefetch.c: restores ahead of use, from the policy's learned
 * order (`vs_prefetch_all`, `vs_prefetch_step`).
 *
 * With prefetch on (VRAMSHIM_PREFETCH, a learned policy), the engine keeps
 * the copy engine busy: the policy plans a fixed resident set and streams
 * the rest over the cycle; prefetch steps, triggered by uses of watched
 * regions, restore the next allocations the policy predicts within a window
 * of twice the largest allocation. A wrong prediction costs bandwidth,
 * never correctness. Everything here runs under the engine lock.
 */
#include "offload_internal.h"

#include <errno.h>

#include "config.h"
#include "driver.h"


/* A prefetched region was used, evicted or freed: it no longer counts
 * against the prefetch window. */
void vs_prefetch_forget(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (r->prefetched) {
        r->prefetched = false;
        vs_engine.devices[r->device].prefetched_bytes -= r->prefetch_counted;
        r->prefetch_counted = 0;
    }
}


/* With prefetch, tells the policy what the allocations of its learned cycle
 * may keep resident: the limit, less what else is resident (allocations too
 * small to evict) and room for two of the largest (one arriving while the
 * one before is used). The policy then keeps a fixed set and spreads what it
 * streams over the cycle, so that every copy overlaps compute. Without
 * prefetch nothing overlaps: Belady's order alone moves the fewest bytes. */
void vs_prefetch_budget_update(vs_engine_device_t *d, int device)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (!vs_config_get()->prefetch || vs_policy_kind(d->policy) == VS_POLICY_LRU) {
        vs_policy_set_budget(d->policy, UINT64_MAX); /* no plan: no head kept either */
    } else {
        vs_policy_stats_t ps;
        vs_policy_stats(d->policy, &ps);
        /* The heads evicted regions keep are the plan's own (partial
         * residency), not something else resident. */
        uint64_t limit = vs_cap_limit(device), used = vs_cap_used(device);
        uint64_t mine = ps.resident_bytes + d->kept_head_bytes;
        uint64_t others = used > mine ? used - mine : 0;
        uint64_t taken = others + 2 * d->largest;
        vs_policy_set_budget(d->policy, limit > taken ? limit - taken : 0);
    }
    if (vs_config_get()->partial_residency)
        vs_engine_keep_update(d);
}

/* ---- Prefetch ------------------------------------------------------------ */


/* Room for `need` bytes on `device` for a prefetch whose use is predicted
 * at `next_use`: only by evicting allocations predicted to be used later
 * than that (a prefetch never evicts what is needed sooner) and that the
 * plan streams. A step run for an operation that names no evictable
 * allocation directly spares what the operation just before used: such an
 * operation may read, through a pointer table, the buffers its predecessor
 * wrote (preload_offload's pointer_table scenario), and without prefetch it
 * would evict nothing. Counts `need`
 * on success. 0 or -EAGAIN. Engine lock held. */
static int vs_prefetch_room(vs_engine_device_t *d, int device, uint64_t need, uint64_t next_use)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    for (int round = 0; round < 8; round++) {
        if (vs_cap_reserve(device, need) == 0)
            return 0;
        uint64_t limit = vs_cap_limit(device), used = vs_cap_used(device);
        uint64_t deficit = used + need > limit ? used + need - limit : need;
        uint64_t ids[VS_EVICT_BATCH];
        size_t n = 0;
        int rc = vs_policy_victims(d->policy, deficit, NULL, 0, ids, VS_EVICT_BATCH, &n);
        if ((rc != 0 && rc != -ENOBUFS) || n == 0)
            return -EAGAIN;
        vs_region_t *victims[VS_EVICT_BATCH];
        size_t count = 0;
        bool skipped = false;
        for (size_t i = 0; i < n; i++) {
            vs_region_t *r;
            uint64_t victim_next = 0;
            HASH_FIND(hh_id, vs_engine.by_id, &ids[i], sizeof ids[i], r);
            if (r == NULL || r->where != VS_RESIDENT || !vs_engine_region_evictable(r))
                return -EAGAIN;
            if (r->prefetched) {
                /* Brought in for a nearer use by an earlier prefetch. */
                (void)vs_policy_set_evictable(d->policy, r->id, false);
                skipped = true;
                continue;
            }
            if (vs_policy_predict(d->policy, r->id, &victim_next) != 0 || victim_next <= next_use
                || vs_policy_planned_resident(d->policy, r->id)
                || (vs_engine.prefetch_spares_recent && r->synced_seq + 1 >= vs_registry_current_seq()))
                return -EAGAIN; /* needed sooner than what would replace it, kept, or just used */
            victims[count++] = r;
        }
        if (skipped)
            continue; /* ask again without them (vs_prefetch resets the skips) */
        bool host_full = false;
        if (vs_engine_evict(victims, count, &host_full) == 0)
            return -EAGAIN;
    }
    return -EAGAIN;
}

/* Restores, on the host-to-device stream and without making anyone wait,
 * the allocations the policy predicts are needed next, within a window of
 * twice the largest allocation (double buffering: one arriving while the
 * one before is used): the copies run while the current work computes. A
 * wrong prediction costs bandwidth, never correctness: the region is simply
 * resident (arriving) earlier. Engine lock held. */
static void vs_prefetch(int device)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = &vs_engine.devices[device];
    /* LRU ranks a region prefetched a cycle after its last use first among
     * victims: it stays the baseline, without prefetch. */
    if (!d->ready || d->policy == NULL || vs_policy_kind(d->policy) == VS_POLICY_LRU || !vs_config_get()->prefetch)
        return;
    vs_prefetch_budget_update(d, device);
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    uint64_t window = 2 * d->largest;
    if (ps.period == 0 || d->prefetched_bytes >= window)
        return; /* nothing learned yet, or what was prefetched is not used yet */
    uint64_t ids[8];
    size_t n = 0;
    if (vs_policy_prefetch(d->policy, window - d->prefetched_bytes, ids, 8, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        vs_region_t *r;
        uint64_t next_use = 0;
        HASH_FIND(hh_id, vs_engine.by_id, &ids[i], sizeof ids[i], r);
        if (r == NULL || r->where == VS_RESIDENT || r->pinned || r->disk_io || (r->host.count == 0 && r->where != VS_ON_DISK)
            || vs_policy_predict(d->policy, r->id, &next_use) != 0 || next_use == VS_POLICY_NEVER)
            continue;
        if (vs_prefetch_room(d, device, vs_engine_region_missing(r), next_use) != 0)
            break; /* room comes once what is used now is done */
        if (vs_engine_restore_mapped(r, d, NULL, false, true) != CUDA_SUCCESS)
            break;
    }
    vs_engine_policy_reset_skips();
}

/* Prefetches on every device. Engine lock held. */
void vs_prefetch_all(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    /* The next step comes when an operation uses a watched region. */
    atomic_store_explicit(&vs_engine.prefetch_step_due, false, memory_order_relaxed);
    for (int device = 0; device < VS_MAX_DEVICES; device++)
        if (vs_engine.devices[device].ready)
            vs_prefetch(device);
}

/* A prefetch step, run by the operation after one that used a watched
 * region (prefetched, or streamed by the plan), before its own scan: that
 * use made room in the window and a victim of the region, and the copy
 * engine should take up the next one now rather than when something is
 * found missing. Running before the scan, the operation's own allocations
 * are the nearest uses, never victims. */
void vs_prefetch_step(const uintptr_t *words, size_t count)
{
    CUstreamCaptureMode mode;
    vs_engine_lock(&mode);
    bool direct = false;
    for (size_t i = 0; i < count && !direct; i++)
        direct = vs_engine_region_containing(words[i]) != NULL;
    vs_engine.prefetch_spares_recent = !direct;
    vs_engine_deferred_reap(false);
    vs_engine_policy_sync();
    vs_prefetch_all();
    vs_engine.prefetch_spares_recent = false;
    vs_engine_unlock(mode);
}

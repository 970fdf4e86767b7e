/* offload_prefetch.c: restores ahead of use, from the policy's learned
 * order (`vs_prefetch_all`, `vs_prefetch_step`), and evictions ahead of
 * need (departures, offload_evict.c).
 *
 * With prefetch on (VRAMSHIM_PREFETCH, a learned policy), the engine keeps
 * both copy engines busy: the policy plans a fixed resident set and streams
 * the rest over the cycle; prefetch steps, triggered by uses of watched
 * regions, restore the next allocations the policy predicts within a window
 * of twice the largest allocation, and start the departure of the next
 * victims once their last use is submitted, so that a restore finds its
 * room leaving, or gone, instead of waiting for an eviction it starts. A
 * wrong prediction costs bandwidth, never correctness. Everything here runs
 * under the engine lock.
 */
#include "offload_internal.h"
#include "offload_device.h"
#include "offload_streams.h"
#include "offload_prefetch.h"

#include <errno.h>
#include <inttypes.h>

#include "config.h"
#include "driver.h"
#include "tunables.h"

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


/* Whether regions of `d` may be partly resident (VRAMSHIM_PARTIAL): a head
 * kept between uses, or one brought in ahead of its tail. `auto`: where the
 * largest allocation is large, or the cycle is far from the balance point
 * (offload_meter.c), and evictions are clean (`vs_prefetch_budget_update`). */
static bool vs_prefetch_heads_wanted(const vs_engine_device_t *d)
{
    int partial = vs_config_get()->partial_residency;
    return partial == VS_PARTIAL_ON
           || (partial == VS_PARTIAL_AUTO && (d->largest >= VS_SMALL_STREAM_BYTES || vs_regime_lean(d->regime))
               && !d->departure_slot);
}

/* Near the balance point (the lean plan on trial there), pieces of half the
 * largest size, in whole granules, where that is finer than the second
 * largest and at least two granules. There every copy's time counts and
 * the plan's room sets how far the link may run ahead of the kernels; a
 * plan in pieces makes that room in pieces. In the sweep's DiT at 50%,
 * ratio 1, 6 MiB pieces make it in 6 MiB steps: 35 pieces with two of them
 * in the room took 1.082 x the bound (the link idle 345 us a pass, waiting
 * for the kernels whose pieces' memory the next restores map), and the
 * next step, 36, brings in 1.029 x F, over the goal. In 4 MiB pieces with
 * 2 MiB fillers, 212 to 214 MiB (1.010-1.019 x F) take 1.025 x, the floor
 * the pipeline model gives them (bench/offload/pipeline_floor.py --workload
 * dit --pieces 4). Where the fine pieces cannot carry the stream (the DiT
 * at 25%: 48 of 4 MiB and sixteen 2 MiB tensors hold 224 MiB of the 312
 * it streams) the policy refuses them and the second largest is asked
 * for. Their restores map ahead onto the departure under way
 * (`vs_prefetch_lend_single`): without that each 4 MiB restore mapped and
 * granted its memory after the wait, 42 us of the default table's host
 * costs against its 84 us copy, on the link's critical path (1.250 x).
 * Where the regime meter times them slower than the balanced plan, the
 * second largest's are tried in their place before the cycle goes back for
 * good (`vs_prefetch_fine_piece_slower`): with a busy GPU's host costs
 * (h200-busy.txt, a grant 110 us against a 4 MiB copy's 84) the DiT at 75%,
 * ratio 1.33 went back to whole allocations, 1.123 x F in, where 6 MiB
 * pieces bring in F. Far from the balance point the second largest stays: 4 MiB pieces took
 * the DiT at 50%, ratios 0.5 and 0.75 from 1.000 to 1.135 x (link-bound:
 * each swap's unmap, release and grant between copies), and 6 MiB pieces
 * mapped ahead there took the DiT at 25%, ratio 1 from 1.037 to 1.053. 0:
 * none. */
static uint64_t vs_prefetch_fine_piece(const vs_engine_device_t *d)
{
    if (d->regime != VS_REGIME_NEAR_LEAN || d->granularity == 0)
        return 0;
    uint64_t half = d->largest / 2 / d->granularity * d->granularity;
    return half >= 2 * d->granularity && half < d->second ? half : 0;
}

/* Whether `piece` is a fine one (`vs_prefetch_fine_piece`): finer than the
 * second largest size. */
static bool vs_prefetch_piece_fine(const vs_engine_device_t *d, uint64_t piece)
{
    return piece != 0 && piece < d->second;
}

/* Pieces of one size (partial residency, VRAMSHIM_PARTIAL auto or on): in
 * a lean plan among small allocations of mixed sizes whose evictions are
 * clean, the plan may stream pieces of the second largest size, the last of each
 * allocation it streams, the larger ones keeping the rest as a head
 * (`vs_policy_set_piece`; where too few allocations are that large, it
 * plans whole ones). Every swap is then of one size: each restore maps
 * ahead onto a departing piece's memory, where a swap of unlike sizes waits
 * for the departure, then releases, creates, maps and grants before its
 * copy; and the window holds two pieces, not two of the largest. The
 * sweep's DiT at 75%, ratio 1: 1.050 -> 1.025 x the bound, bringing in F
 * exactly (bench/offload/pipeline_floor.py --workload dit --pieces 6 models
 * it). 0: whole allocations. */
static uint64_t vs_prefetch_piece(const vs_engine_device_t *d)
{
    /* Asked for the lean plan only, which `vs_prefetch_lean_differs`
     * allows among small allocations with clean evictions. */
    if (vs_config_get()->partial_residency == VS_PARTIAL_OFF || d->second == 0 || d->granularity == 0
        || d->second % d->granularity != 0)
        return 0;
    uint64_t fine = vs_prefetch_fine_piece(d);
    return fine != 0 && fine != d->fine_piece_refused ? fine : d->second;
}

bool vs_prefetch_fine_piece_slower(vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (d->regime != VS_REGIME_NEAR_LEAN || !vs_prefetch_piece_fine(d, d->piece_asked)
        || d->piece_asked == d->fine_piece_refused)
        return false;
    d->fine_piece_refused = d->piece_asked;
    return true;
}

bool vs_prefetch_lean_differs(const vs_engine_device_t *d)
{
    return !d->departure_slot && d->largest < VS_SMALL_STREAM_BYTES;
}

/* With prefetch, tells the policy what the allocations of its learned cycle
 * may keep resident: the limit, less what else is resident (allocations too
 * small to evict) and room for two of the largest (the window: one arriving
 * while the one before is used), and room for the one departing:
 * - a third of the largest when recent evictions mostly copied their bytes
 *   out (written allocations: the copy out then takes as long as the restore
 *   it makes room for), with hysteresis (`departure_slot`);
 * - otherwise, when the largest is small (VS_SMALL_STREAM_BYTES), the
 *   second largest (the largest when all are alike): a clean departure only
 *   hashes, but the host work around it (the unmap, the restore's map and
 *   grant: about 70 us on an H100, docs/benchmarks.md, "On a real GPU")
 *   then costs about as much as the copy, and a restore whose room is
 *   the allocation used just before waits for all of it with the link idle
 *   (the sweep's DiT rows: 1.49 times the bound at the balance point, 1.12
 *   with this room), unless the cycle is compute-bound or link-bound
 *   (offload_meter.c): there that host work costs no time, and the room
 *   only bytes; near the balance point a plan without the room is tried,
 *   and kept when its cycle is no slower (the LLM's rows at ratio 1).
 * The policy then keeps a fixed set and spreads what it streams over the
 * cycle, so that every copy overlaps compute. Without prefetch nothing
 * overlaps: Belady's order alone moves the fewest bytes. */
void vs_prefetch_budget_update(vs_engine_device_t *d, int device)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    /* The plan built last: what follows only asks for the next one. */
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    if (ps.plan_builds != d->plans_logged) {
        /* When the plans are built, against the operations: a GPU run's
         * debug log shows whether its plan settles. */
        d->plans_logged = ps.plan_builds;
        vs_log(VS_LOG_DEBUG,
               "device %d: plan %" PRIu64 " built by operation %" PRIu64 ": learned cycle %" PRIu64
               " operations, streams %" PRIu64 " bytes a cycle, %" PRIu64 " resident",
               device, ps.plan_builds, ps.now, ps.period, ps.planned_streamed_bytes, ps.resident_bytes);
    }
    if (!vs_config_get()->prefetch || vs_policy_kind(d->policy) == VS_POLICY_LRU) {
        vs_policy_set_budget(d->policy, UINT64_MAX); /* no plan: no head kept either */
    } else {
        /* The heads evicted regions keep are the plan's own (partial
         * residency), not something else resident; so is the memory held
         * for its fillers (`vs_engine_filler_hold`). */
        uint64_t limit = vs_cap_limit(device), used = vs_cap_used(device);
        uint64_t mine = ps.resident_bytes + d->kept_head_bytes + vs_engine_filler_charged(d);
        uint64_t others = used > mine ? used - mine : 0;
        if (2 * d->copied_recent > d->evicted_recent)
            d->departure_slot = true;
        else if (3 * d->copied_recent < d->evicted_recent)
            d->departure_slot = false;
        uint64_t departure_room = 0;
        /* Small allocations in a cycle far from the balance point, or
         * near it on trial: no room, heads (offload_meter.c). The plan made
         * for the other regime is no guide to this one's order: a fresh one
         * is made. */
        bool lean = vs_prefetch_lean_differs(d) && vs_regime_lean(d->regime);
        if (lean != d->planned_lean) {
            d->planned_lean = lean;
            vs_policy_replan(d->policy);
        }
        if (d->departure_slot)
            departure_room = d->largest;
        else if (d->largest < VS_SMALL_STREAM_BYTES && !lean)
            departure_room = d->second != 0 ? d->second : d->largest;
        uint64_t taken = others + VS_PREFETCH_WINDOW * d->largest + departure_room;
        vs_policy_set_budget(d->policy, limit > taken ? limit - taken : 0);
        /* The coarse plan on trial or kept (offload_meter.c): fewer,
         * larger allocations streamed. */
        vs_policy_set_floor(d->policy, d->regime == VS_REGIME_COARSE ? d->meter.coarse_floor : 0);
        /* The plan built last: its pieces for the exit summary, and a
         * refusal of the fine pieces it was built in. */
        if (ps.planned_piece_bytes != 0 && (ps.planned_piece_bytes != d->pieces_seen || ps.planned_filler_bytes != 0)) {
            d->pieces_seen = ps.planned_piece_bytes;
            d->fillers_seen = ps.planned_filler_bytes;
        }
        if (ps.planned_pieces_refused && ps.plan_builds > d->piece_asked_builds
            && vs_prefetch_piece_fine(d, d->piece_asked))
            d->fine_piece_refused = d->piece_asked;
        /* The lean plan among small allocations of mixed sizes is in
         * pieces, when the policy can make it so: the streaming room is then
         * the window's two pieces alone. Tried and timed as the lean plan
         * is, so that where the host's calls for the pieces' swaps cost more
         * than the copies they save time (h200-busy.txt: the sweep's DiT at
         * 75%, ratio 1, 1.48 x the bound in pieces), the cycle goes back to
         * whole allocations for good (offload_meter.c). */
        uint64_t piece = lean ? vs_prefetch_piece(d) : 0;
        if (piece != d->piece_asked) {
            d->piece_asked = piece;
            d->piece_asked_builds = ps.plan_builds;
        }
        /* Fillers beside the pieces: the held one, and one of slack where
         * the pieces are of the second largest size (the sweep's DiT at
         * 25%, ratio 1: 1.063 x the bound without it, 1.037 with it,
         * bringing in 1.013 and 1.020 x F). Fine pieces, whose restores map
         * ahead, need none (the DiT at 50%, ratio 1: 1.025 x either way,
         * 1.019 x F with none, 1.029 with one). */
        uint64_t slack = piece != 0 && !vs_prefetch_piece_fine(d, piece) ? 1 : 0;
        vs_policy_set_piece(d->policy, piece,
                            piece != 0 ? VS_PREFETCH_WINDOW * (d->largest - piece) + departure_room : 0, slack);
        /* Were the largest allocations kept, the window would hold two of
         * the next size (`vs_prefetch_window_unit`). Offered among small
         * allocations only: where the largest is large, a kept head uses
         * the budget to the byte (partial residency), and keeping the
         * largest whole took the place of the heads brought in ahead
         * (preload_offload_clean_partial_auto_large under TSan: none). */
        bool offer = d->second != 0 && d->largest < VS_SMALL_STREAM_BYTES;
        vs_policy_set_largest_offer(d->policy, offer ? VS_PREFETCH_WINDOW * (d->largest - d->second) : 0);
    }
    /* Fillers in the plan built last: the memory of the one that leaves is
     * held for the next (`vs_engine_filler_hold`); none, or of another size,
     * and what is held goes. */
    if (ps.planned_filler_bytes != d->filler_bytes) {
        vs_engine_filler_release(d);
        d->filler_bytes = ps.planned_filler_bytes;
    }
    /* Partial residency: `auto` keeps a head where the largest allocation
     * is large and evictions are clean. There the budget whole allocations
     * leave unused is up to a whole layer that streams every pass (the
     * sweep's cycle rows: 1.09 to 1.2 times what double buffering must
     * move, 1.01 with a head). Among small allocations it is little, and the
     * head would take the slack their swaps run on (the sweep's DiT and LLM
     * rows at 50 and 75%: up to 7% slower with heads). Where evictions copy
     * out, the link idles after each short tail: the next restore's room is
     * the allocation used before the tail, whose departure (a copy out)
     * outlasts the tail's copy (offload_throughput, 64 MiB written buffers:
     * 95.2 to 93.4% of the link with heads). */
    bool heads = vs_prefetch_heads_wanted(d) || ps.planned_piece_bytes != 0;
    if (heads || d->keep_id != 0 || d->piece_keeps)
        vs_engine_keep_update(d, heads);
}

/* ---- Prefetch ------------------------------------------------------------ */

/* The largest allocation the stream moves, of which the window holds two:
 * the second largest size where the plan (`ps`, the policy's stats) keeps
 * every allocation of the largest (`vs_policy_set_largest_offer`). */
static uint64_t vs_prefetch_window_unit(const vs_engine_device_t *d, const vs_policy_stats_t *ps)
{
    if (ps->planned_piece_bytes != 0)
        return ps->planned_piece_bytes;
    return ps->planned_keeps_largest && d->second != 0 ? d->second : d->largest;
}


/* Chooses victims for `deficit` bytes among what the plan streams and is
 * predicted to be used later than `next_use` (a prefetch never evicts what
 * is needed sooner), and starts their departure. A step run for an
 * operation that names no evictable allocation directly spares what the
 * operation just before used: such an operation may read, through a pointer
 * table, the buffers its predecessor wrote (preload_offload's pointer_table
 * scenario), and without prefetch it would evict nothing. 1: started; 0:
 * ask again (victims were skipped); -EAGAIN: none. Engine lock held. */
static int vs_prefetch_depart(vs_engine_device_t *d, int device, uint64_t deficit, uint64_t next_use)
{
    VS_ASSERT_HELD(&vs_engine.lock);
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
        if (r->prefetched || r->evicting) {
            /* Brought in for a nearer use by an earlier prefetch, or
             * already departing. */
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
        return 0; /* ask again without them (vs_prefetch resets the skips) */
    return vs_engine_depart(d, device, victims, count) ? 1 : -EAGAIN;
}

/* Partial restore: when the room free now holds most of evicted `r` but
 * not all of it, its head comes in now, as many whole granules as fit, and
 * its tail once the departure under way has left (its next restore). The
 * link then goes on copying while the allocation used now finishes, instead
 * of idling until all of its room is free: with the limit's room taken by
 * whole allocations and a kept head, every restore's room is short by what
 * else is resident, and the link idled for the length of a kernel each pass
 * (the sweep's cycle rows). True when the head's copy started. Engine lock
 * held. */
static bool vs_prefetch_head(vs_engine_device_t *d, int device, vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    /* `auto` keeps heads of small allocations only in a cycle far from the
     * balance point, and brings none in ahead: there the second map and grant cost
     * more than the copy time they win (the DiT's 8 MiB tensors, each
     * restored half ahead and half on demand: 1.57 x the bound). */
    bool ahead = vs_config_get()->partial_residency == VS_PARTIAL_ON || d->largest >= VS_SMALL_STREAM_BYTES;
    if (!vs_prefetch_heads_wanted(d) || !ahead || r->where != VS_ON_HOST || r->split > 0 || d->keep_equal != 0
        || d->piece_keeps
        || r->disk_io || r->evicting || r->pinned || r->adopted || r->host.count == 0 || d->granularity == 0 || r->size <= 1)
        return false;
    uint64_t limit = vs_cap_limit(device), used = vs_cap_used(device);
    uint64_t head = (limit > used ? limit - used : 0) / d->granularity * d->granularity;
    uint64_t most = (r->size - 1) / d->granularity * d->granularity; /* a tail with data left */
    if (head > most)
        head = most;
    /* Worth a second map and grant only when most of it fits now. */
    if (head == 0 || 2 * head < r->reserved || vs_cap_reserve(device, head) != 0)
        return false;
    CUresult rc = vs_engine_restore_head(r, head);
    if (rc != CUDA_SUCCESS) {
        vs_cap_release(device, head);
        vs_log(VS_LOG_DEBUG, "cannot bring the head of 0x%" PRIxPTR " in ahead (error %d)", r->base, (int)rc);
        return false;
    }
    vs_engine.stats.partial_restores++;
    vs_log(VS_LOG_DEBUG, "prefetching the first %" PRIu64 " of %" PRIu64 " bytes of 0x%" PRIxPTR
           " while its room is leaving", head, r->size, r->base);
    return true;
}

/* Whether a restore on `d` takes its room from the one departure under
 * way, mapped ahead onto a victim's memory of its size, waiting for the
 * departure (`vs_engine_departure_lend`), instead of ending the step (the
 * step otherwise waits only with a younger departure queued behind the
 * oldest: `vs_prefetch_room`): in a link-bound cycle streamed in pieces of
 * one size, where such a victim is found. There the link's rate sets the
 * time, and the launch the wait holds back would wait for its copy anyway.
 * Where the host falls behind the GPU (a busy GPU's host costs,
 * h200-busy.txt: a grant 110 us, an unmap 59), the departure before has
 * always ended by the next step; a step that found only the one it had
 * just started left its restore to the next step, which unmapped the ended
 * victim, then mapped and granted the restore's memory with the link idle:
 * the sweep's DiT at 75%, ratio 0.75 took 1.48 x the bound in pieces, which
 * the meter gave up for the balanced plan (1.123 x the bound, bringing in
 * 1.123 x F), and takes 1.000 x so, bringing in F. Elsewhere the wait holds back a
 * launch the GPU needs: near the balance point and compute-bound, with the
 * default host costs, the DiT's cells at 75% took 1.025 -> 1.038 (ratio 1),
 * 1.019 -> 1.029 (1.33) and 1.013 -> 1.019 (2), and at 50%, ratio 1.33
 * the meter gave the pieces up (1.067 x F in), all in 6 MiB pieces. Near
 * the balance point in fine pieces (`vs_prefetch_fine_piece`) it maps
 * ahead too: there a piece's map and grant cost half its copy, and made
 * after the wait they idled the link (the DiT at 50%, ratio 1: 1.250 ->
 * 1.025 x). */
static bool vs_prefetch_lend_single(const vs_engine_device_t *d)
{
    if (d->regime != VS_REGIME_LINK_BOUND && d->regime != VS_REGIME_NEAR_LEAN)
        return false;
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    /* Near the balance point, fine pieces only (`vs_prefetch_fine_piece`). */
    return ps.planned_piece_bytes != 0
           && (d->regime == VS_REGIME_LINK_BOUND || vs_prefetch_piece_fine(d, ps.planned_piece_bytes));
}

/* Room for `need` bytes on `device` for a prefetch of `r`, whose use is
 * predicted at `next_use`, from departures (offload_evict.c): those that
 * are over free their room at once; what is still missing departs; when
 * the room free now holds most of `r`, its head comes in
 * (`vs_prefetch_head`); otherwise, with the most departures under way, the
 * step waits for the oldest. Counts `need` on success. 0 or -EAGAIN.
 * Engine lock held. */
static int vs_prefetch_room(vs_engine_device_t *d, int device, vs_region_t *r, uint64_t need, uint64_t next_use)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_engine_filler_take(d, need))
        return 0; /* the memory of the filler that left before it */
    for (int round = 0; round < VS_PREFETCH_ROOM_ROUNDS; round++) {
        if (vs_cap_reserve(device, need) == 0)
            return 0;
        if (d->departures != NULL && vs_engine_departures_advance(d, false, false) > 0)
            continue;
        uint64_t departing = 0;
        size_t departures = vs_engine_departures(d, &departing);
        uint64_t limit = vs_cap_limit(device), used = vs_cap_used(device);
        uint64_t deficit = used + need > limit ? used + need - limit : need;
        if (departures < VS_DEPARTURES && departing < deficit
            && vs_prefetch_depart(d, device, deficit - departing, next_use) >= 0)
            continue;
        /* Waits for the oldest only with a younger one queued behind it, so
         * that the copies out run back to back while the host waits. With
         * one, the step ends instead: the restore it would make waits for
         * nothing, the operation that needs it finishes the departure when
         * it comes (`vs_engine_make_room`), and the next step finds it over.
         * Waiting then, even for a departure that only hashes, held the
         * host behind the operations queued before the hash, and the copy
         * engines idled with it (the sweep's DiT and LLM rows, 1.3 to 1.8
         * times the bound). Except where the restore maps ahead onto it in a
         * link-bound cycle in pieces (`vs_prefetch_lend_single`). */
        if (vs_prefetch_head(d, device, r))
            return -EAGAIN;
        bool full = departures >= VS_DEPARTURES;
        if (!full && !vs_prefetch_lend_single(d))
            return -EAGAIN;
        vs_region_t *lender = vs_engine_departure_lender(d, r);
        if (!full && lender == NULL)
            return -EAGAIN;
        /* The host work of the restore (the map and the grant) is done
         * while the oldest departure's users still run: then, once it
         * ends, only the copy is left to queue, ahead of the unmaps and
         * releases of the departure's other victims. */
        uint64_t freed;
        if (vs_engine_departure_lend(d, device, r, lender, need, &freed))
            return 0;
        if (freed == 0)
            return -EAGAIN;
    }
    return -EAGAIN;
}

/* Before and after a step's restores: while what is free and departing
 * would not hold two more of the largest (the next restore and the one
 * after), the policy's next victim departs now, one restore's room per
 * departure. Its copy out then runs while the restores copy in, and when a
 * step waits for the oldest departure, a younger one is already queued
 * behind it: the device-to-host engine never idles while the host waits,
 * and no restore waits for an eviction it started itself. Engine lock
 * held. */
static void vs_prefetch_ahead(vs_engine_device_t *d, int device)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    uint64_t departing = 0;
    if (vs_engine_departures(d, &departing) >= VS_DEPARTURES)
        return;
    uint64_t limit = vs_cap_limit(device), used = vs_cap_used(device);
    uint64_t free_bytes = limit > used ? limit - used : 0;
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    uint64_t unit = vs_prefetch_window_unit(d, &ps);
    if (free_bytes + departing >= 2 * unit)
        return;
    /* The next restore: the nearest predicted use not resident. */
    uint64_t next = 0, next_use = 0;
    size_t n = 0;
    if (vs_policy_prefetch(d->policy, UINT64_MAX, &next, 1, &n) != 0 || n == 0
        || vs_policy_predict(d->policy, next, &next_use) != 0 || next_use == VS_POLICY_NEVER)
        return;
    /* One restore's room per departure: the oldest is then all a step
     * waits for. */
    uint64_t want = 2 * unit - free_bytes - departing;
    for (int round = 0; round < 4; round++)
        if (vs_prefetch_depart(d, device, want < unit ? want : unit, next_use) != 0)
            return;
}

/* Whether the prefetcher works on `d`: a ready device whose policy learns
 * the cycle, with prefetch on. LRU ranks a region prefetched a cycle after
 * its last use first among victims: it stays the baseline, without
 * prefetch. */
static bool vs_prefetch_applies(const vs_engine_device_t *d)
{
    return d->ready && d->policy != NULL && vs_policy_kind(d->policy) != VS_POLICY_LRU && vs_config_get()->prefetch;
}

/* Restores, on the host-to-device stream and without making anyone wait,
 * the allocations the policy predicts are needed next, within a window of
 * twice the largest allocation (double buffering: one arriving while the
 * one before is used): the copies run while the current work computes;
 * departures make their room ahead (`vs_prefetch_ahead`). A
 * wrong prediction costs bandwidth, never correctness: the region is simply
 * resident (arriving) earlier. Engine lock held. */
static void vs_prefetch(int device)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = &vs_engine.devices[device];
    if (!vs_prefetch_applies(d))
        return;
    vs_prefetch_budget_update(d, device);
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    uint64_t window = VS_PREFETCH_WINDOW * vs_prefetch_window_unit(d, &ps);
    if (ps.period == 0)
        return; /* nothing learned yet */
    uint64_t ids[8];
    size_t n = 0;
    /* With the window full, what was prefetched is not used yet. */
    if (d->prefetched_bytes < window
        && vs_policy_prefetch(d->policy, window - d->prefetched_bytes, ids, 8, &n) != 0)
        n = 0;
    vs_prefetch_ahead(d, device);
    /* A step makes at most VS_PREFETCH_STEP_RESTORES restores before its
     * operation is launched where the largest allocation is small
     * (VS_SMALL_STREAM_BYTES). Each restore costs the host a create, a map
     * and a grant, or an unmap and a release of a departed victim first
     * (about 80 us on an H100), and a step that waited for the oldest
     * departure runs them while the GPU has little left queued: the sweep's
     * LLM at 50%, ratio 1, made four such restores before one launch, and
     * the GPU idled 237 us a pass. The operations come faster than a small
     * allocation's swap, so one restore a step keeps up with the stream; the
     * next operation's step goes on. Where allocations are large, a copy
     * hides the host work of several and the cap would only delay them (the
     * sweep's cycle at 50%, ratio 1: 1.036 -> 1.054 x the bound). */
    size_t most = vs_engine.prefetch_before_launch && d->largest < VS_SMALL_STREAM_BYTES ? VS_PREFETCH_STEP_RESTORES : n;
    size_t restored = 0;
    for (size_t i = 0; i < n && restored < most; i++) {
        vs_region_t *r;
        uint64_t next_use = 0;
        HASH_FIND(hh_id, vs_engine.by_id, &ids[i], sizeof ids[i], r);
        if (r == NULL || r->where == VS_RESIDENT || r->pinned || r->disk_io || (r->host.count == 0 && r->where != VS_ON_DISK)
            || (r->run_next != NULL && r->run_next->where != VS_RESIDENT)
            || vs_policy_predict(d->policy, r->id, &next_use) != 0 || next_use == VS_POLICY_NEVER)
            continue;
        if (vs_prefetch_room(d, device, r, vs_engine_region_missing(r), next_use) != 0)
            break; /* room comes once what is used now is done */
        /* The room may have been made of the arena chunk after it. */
        if (r->run_next != NULL && r->run_next->where != VS_RESIDENT)
            continue;
        CUresult rc = vs_engine_restore_mapped(r, d, NULL, false, true);
        if (rc != CUDA_SUCCESS)
            break;
        restored++;
    }
    vs_prefetch_ahead(d, device);
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
bool vs_prefetch_step(CUstream stream, bool per_thread, const uintptr_t *words, size_t count)
{
    CUstreamCaptureMode mode;
    vs_engine_lock_light(&mode);
    CUstream resolved = vs_streams_resolve(stream, per_thread);
    vs_meter_arm(resolved, false);
    bool direct = false;
    for (size_t i = 0; i < count && !direct; i++)
        direct = vs_engine_region_containing(words[i]) != NULL;
    vs_engine.prefetch_spares_recent = !direct;
    vs_engine_deferred_reap(false);
    vs_engine_policy_sync();
    vs_engine.prefetch_before_launch = true;
    vs_prefetch_all();
    vs_engine.prefetch_before_launch = false;
    vs_engine.prefetch_spares_recent = false;
    for (int device = 0; device < VS_MAX_DEVICES; device++)
        if (vs_engine.devices[device].ready)
            vs_meter_mark(&vs_engine.devices[device], resolved);
    vs_meter_disarm();
    vs_engine_unlock(mode);
    return !direct;
}

/* The step before an operation that names no evictable allocation spares
 * what the operation before used: the operation may read it through a
 * pointer table. Once it is submitted, a departure fenced behind it is safe,
 * and starting it now, rather than at the next step, queues its content
 * hash before the application's next kernels: a departure's fence covers
 * everything its users' streams queued when it starts, and the DiT's
 * norm, a 64 KiB tensor after each block's MLP, held the MLP's departure
 * until after the next block's qkv and attention output (121 us) were
 * queued, while the next restore waited for its room (the sweep's DiT at
 * 50%, ratio 1.33: the lean plan took 1.058 x the bound and was given up
 * for a balanced one bringing in 1.067 x F; 1.031 and 1.010 x F now). */
void vs_prefetch_after_launch(void)
{
    CUstreamCaptureMode mode;
    vs_engine_lock_light(&mode);
    for (int device = 0; device < VS_MAX_DEVICES; device++)
        if (vs_prefetch_applies(&vs_engine.devices[device]))
            vs_prefetch_ahead(&vs_engine.devices[device], device);
    vs_engine_policy_reset_skips();
    vs_engine_unlock(mode);
}

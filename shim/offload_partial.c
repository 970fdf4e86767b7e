/* offload_partial.c: partial residency. Which region keeps a head of whole
 * granules resident while its tail streams (`vs_engine_keep_update`: one
 * head, equal heads on every streamed allocation, or pieces of one size, as
 * the plan says), and the heads given up when nothing whole is left to
 * evict (`vs_engine_heads_release`). Under the engine lock
 * (offload_internal.h).
 */
#include "offload_internal.h"
#include "offload_device.h"
#include "offload_tier.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "log.h"

uint64_t vs_engine_heads_release(int device)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = &vs_engine.devices[device];
    uint64_t released = vs_engine_filler_charged(d);
    if (released > 0)
        vs_engine_filler_release(d);
    if (d->kept_head_bytes == 0 || !d->ready)
        return released;
    for (vs_region_t *r = vs_engine.by_base; r != NULL; r = r->hh.next) {
        if (r->device != device || r->where == VS_RESIDENT || r->split == 0 || r->disk_io || r->mapping_tail)
            continue;
        /* Its head's bytes live only there: to the host copy first (its
         * users were waited for when its tail was evicted). A head that
         * came from the host copy is that copy already. */
        CUresult rc = CUDA_SUCCESS;
        bool on_host = r->head_from_host || r->head_on_host;
        if (!on_host) {
            rc = vs_tier_copy_region(r, 0, r->split, VS_COPY_OUT, d->to_host);
            if (rc == CUDA_SUCCESS)
                rc = VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (d->to_host));
        }
        if (rc != CUDA_SUCCESS) {
            vs_log(VS_LOG_WARN, "cannot copy the head of the allocation at 0x%" PRIxPTR " to the host (error %d); it "
                   "stays on the device", r->base, (int)rc);
            continue;
        }
        uint64_t head = r->split;
        if (!on_host)
            vs_engine.stats.bytes_to_host += head;
        vs_engine_physical_unmap_head(r);
        vs_cap_release(device, head);
        d->kept_head_bytes -= head;
        released += head;
    }
    if (released > 0)
        vs_log(VS_LOG_DEBUG, "device %d: %" PRIu64 " bytes of kept heads given back for room", device, released);
    return released;
}

uint64_t vs_engine_heads_release_all(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    uint64_t released = 0;
    for (int device = 0; device < VS_MAX_DEVICES; device++)
        if (vs_engine.devices[device].ready)
            released += vs_engine_heads_release(device);
    return released;
}

/* Whether `r` is one of the allocations the plan streams through the
 * cycle on device `device`. */
static bool vs_engine_streamed(const vs_engine_device_t *d, int device, const vs_region_t *r)
{
    uint64_t next = 0;
    return r->device == device && !r->pinned && !vs_policy_planned_resident(d->policy, r->id)
           && vs_policy_predict(d->policy, r->id, &next) == 0 && next != VS_POLICY_NEVER;
}

/* A fingerprint of the plan the heads were decided for (`keep_equal_plan`):
 * `seed`, then each of `parts` mixed in. */
static uint64_t vs_engine_plan_mark(uint64_t seed, const uint64_t *parts, size_t count)
{
    uint64_t mark = seed;
    for (size_t i = 0; i < count; i++)
        mark = (mark ^ parts[i]) * 0x100000001b3ull;
    return mark;
}

/* Every region of `d` keeps no head: their next evictions unmap their
 * heads too. The heads are decided again when wanted again. */
static void vs_engine_keeps_clear(vs_engine_device_t *d)
{
    int device = (int)(d - vs_engine.devices);
    for (vs_region_t *r = vs_engine.by_base; r != NULL; r = r->hh.next)
        if (r->device == device)
            r->keep = 0;
    d->keep_equal_plan = 0;
}

/* Equal heads: where the plan keeps no allocation of the cycle whole and
 * every one it streams has the largest size, the bytes it may keep of them
 * are spread as one head of equal size on each (whole granules) instead of
 * one head on one of them. With one head the budget holds it and two whole
 * layers, so the link can run one layer ahead at most, and in the slot of
 * the layer whose copy is only its short tail it idles for most of a
 * layer's compute: the sweep's cycle at 25%, ratio 1 waited 488 us a pass
 * for room (1.071 x the bound). With equal heads every copy is one tail,
 * about a layer's compute at the balance point (1.026 x, bringing in 1.020
 * x F where the rounding to granules keeps 24 of 30 MiB), and every tail
 * is mapped ahead onto a departing layer's tail (`vs_engine_premap_tail`).
 * Where the plan keeps layers whole, the link runs ahead through them and
 * one head moves fewer bytes (the cycle at 50% and 75%: 1.004-1.043 x F
 * the other way). */
static bool vs_engine_keep_equal(vs_engine_device_t *d, const vs_policy_stats_t *ps)
{
    /* Decided once per plan and set of allocations: the walks below visit
     * every allocation, and this runs at every prefetch step. */
    const uint64_t parts[] = {ps->period, ps->planned_streamed_bytes, ps->planned_partial_bytes,
                              ps->planned_partial_id, d->largest};
    uint64_t plan = vs_engine_plan_mark(ps->allocs, parts, sizeof parts / sizeof parts[0]);
    if (plan == d->keep_equal_plan)
        return d->keep_equal != 0;
    d->keep_equal_plan = plan;
    int device = (int)(d - vs_engine.devices);
    uint64_t n = 0;
    for (vs_region_t *r = vs_engine.by_base; r != NULL; r = r->hh.next) {
        if (r->device == device && r->reserved == d->largest && vs_policy_planned_resident(d->policy, r->id))
            return false; /* a layer kept whole: the link runs ahead through it */
        if (!vs_engine_streamed(d, device, r))
            continue;
        if (r->reserved != d->largest)
            return false;
        n++;
    }
    uint64_t head = n >= 2 && d->granularity != 0 ? ps->planned_partial_bytes / n / d->granularity * d->granularity : 0;
    uint64_t most = d->largest > d->granularity ? (d->largest - 1) / d->granularity * d->granularity : 0;
    if (head > most)
        head = most;
    if (head == 0)
        return false;
    for (vs_region_t *r = vs_engine.by_base; r != NULL; r = r->hh.next)
        if (r->device == device)
            r->keep = vs_engine_streamed(d, device, r) ? head : 0;
    if (d->keep_equal != head)
        vs_log(VS_LOG_DEBUG, "partial residency: each of the %" PRIu64 " streamed allocations keeps its first %" PRIu64
               " bytes between uses", n, head);
    d->keep_equal = head;
    d->keep_id = 0;
    return true;
}

/* Pieces (`vs_prefetch_piece`): every allocation the plan streams keeps
 * all but its last piece as its head, the others none. Decided once per
 * plan, as equal heads are. */
static void vs_engine_keep_pieces(vs_engine_device_t *d, const vs_policy_stats_t *ps)
{
    const uint64_t parts[] = {ps->period, ps->planned_streamed_bytes, ps->planned_piece_bytes, ps->plan_builds};
    uint64_t plan = vs_engine_plan_mark(ps->allocs ^ 0x9e3779b97f4a7c15ull, parts, sizeof parts / sizeof parts[0]);
    if (d->piece_keeps && plan == d->keep_equal_plan)
        return;
    d->keep_equal_plan = plan;
    int device = (int)(d - vs_engine.devices);
    uint64_t piece = ps->planned_piece_bytes, n = 0;
    for (vs_region_t *r = vs_engine.by_base; r != NULL; r = r->hh.next) {
        if (r->device != device)
            continue;
        bool streamed = vs_engine_streamed(d, device, r) && r->reserved >= piece;
        r->keep = streamed ? r->reserved - piece : 0;
        n += streamed;
    }
    if (!d->piece_keeps)
        vs_log(VS_LOG_DEBUG, "partial residency: each of the %" PRIu64 " streamed allocations streams its last %" PRIu64
               " bytes and keeps the rest between uses", n, piece);
    d->piece_keeps = true;
    d->keep_equal = 0;
    d->keep_id = 0;
}

void vs_engine_keep_update(vs_engine_device_t *d, bool wanted)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    if (wanted && ps.planned_piece_bytes != 0) {
        vs_engine_keep_pieces(d, &ps);
        return;
    }
    if (d->piece_keeps) {
        vs_engine_keeps_clear(d);
        d->piece_keeps = false;
    }
    if (wanted && ps.planned_partial_bytes > 0 && vs_engine_keep_equal(d, &ps))
        return;
    if (d->keep_equal != 0) {
        vs_engine_keeps_clear(d);
        d->keep_equal = 0;
    }
    uint64_t id = wanted && ps.planned_partial_bytes > 0 ? ps.planned_partial_id : 0, keep = 0;
    vs_region_t *r = NULL;
    if (id != 0) {
        HASH_FIND(hh_id, vs_engine.by_id, &id, sizeof id, r);
        if (r != NULL && !r->pinned) {
            /* Whole granules, and a tail with data left to stream. */
            uint64_t granules = ps.planned_partial_bytes / d->granularity;
            uint64_t most = r->size > d->granularity ? (r->size - 1) / d->granularity : 0;
            keep = (granules < most ? granules : most) * d->granularity;
        }
    }
    /* A plan rebuilt with less than a granule over leaves the allocation
     * chosen before its head while the plan still streams it: a noisy cycle
     * (threads interleaving, a buffer used twice in one pass) makes the
     * plan's room come and go between rebuilds, every change of choice
     * costs a whole copy, and a kept head is the first thing given back
     * when room runs short (`vs_engine_heads_release`). */
    if (wanted && keep == 0 && d->keep_id != 0 && ps.planned_streamed_bytes > 0
        && !vs_policy_planned_resident(d->policy, d->keep_id))
        return;
    if (d->keep_id != 0 && (d->keep_id != id || keep == 0)) {
        vs_region_t *old;
        HASH_FIND(hh_id, vs_engine.by_id, &d->keep_id, sizeof d->keep_id, old);
        if (old != NULL) {
            old->keep = 0; /* its next eviction unmaps its head too */
            vs_log(VS_LOG_DEBUG, "partial residency: 0x%" PRIxPTR " keeps no head any more (the plan keeps %" PRIu64
                   " bytes of allocation %" PRIu64 ", streams %" PRIu64 ")", old->base, ps.planned_partial_bytes, id,
                   ps.planned_streamed_bytes);
        }
        d->keep_id = 0;
    }
    if (r != NULL && keep > 0) {
        if (r->keep != keep)
            vs_log(VS_LOG_DEBUG, "partial residency: 0x%" PRIxPTR " keeps its first %" PRIu64 " of %" PRIu64
                   " bytes on the device between uses (streamed %" PRIu64 ", over %" PRIu64 ")", r->base, keep,
                   r->reserved, ps.planned_streamed_bytes, ps.planned_partial_bytes);
        r->keep = keep;
        d->keep_id = r->id;
    }
}

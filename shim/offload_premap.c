/* offload_premap.c: restores mapped ahead (`vs_engine_premap`): a region
 * about to be restored is mapped, and granted on the arrival thread, onto
 * the memory of the one departure under way of its size before that
 * departure ends, so that its copy in starts as soon as the copy out is
 * done; `vs_engine_premap_drop` undoes it. Under the engine lock
 * (offload_internal.h).
 */
#include "offload_internal.h"
#include "offload_device.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "log.h"

/* The grant of a mapping made ahead (`vs_engine_premap`): on the arrival
 * thread where it runs, which makes the restore's own calls after it. */
static CUresult vs_engine_grant_ahead(vs_region_t *r, CUdeviceptr at, uint64_t bytes)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_arrival_t *j = vs_engine.arrival_open == NULL
                          ? vs_arrive_open(&vs_engine.devices[r->device], r->base, r->reserved, 1)
                          : NULL;
    if (j == NULL)
        return vs_engine_grant(r, at, bytes);
    vs_engine_arrival_begin(j, r);
    CUresult rc = vs_engine_grant(r, at, bytes);
    (void)vs_arrive_hand_over(vs_engine_arrival_take());
    return rc;
}

/* Maps [split, reserved) of `r` (its tail, its head staying mapped; all of
 * it at 0) ahead onto the one departing mapping of `lender` of that size:
 * its tail (`lender_tail`) or all of its memory. One map and one grant, the
 * grant on the arrival thread where it runs; false, with nothing left
 * mapped, when either fails. */
static bool vs_engine_premap_piece(vs_region_t *r, uint64_t split, vs_region_t *lender, bool lender_tail)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    CUdeviceptr at = (CUdeviceptr)(r->base + split);
    uint64_t bytes = r->reserved - split;
    vs_engine_range_unmapped(r->base + split, bytes);
    if (VS_ENGINE_CALL(VS_HOST_VMM, cuMemMap, (at, bytes, 0, lender->phys, 0)) != CUDA_SUCCESS)
        return false;
    if (vs_engine_grant_ahead(r, at, bytes) != CUDA_SUCCESS) {
        (void)VS_ENGINE_CALL(VS_HOST_VMM, cuMemUnmap, (at, bytes));
        return false;
    }
    r->phys = lender->phys;
    r->premap_split = split;
    r->premap_head = split > 0 ? r->head_phys : 0;
    r->premapped = true;
    r->premap_tail = split > 0;
    lender->phys_lent = true;
    lender->lent_tail = lender_tail;
    return true;
}

/* `vs_engine_premap` for an allocation that keeps its head: its tail onto
 * the tail of a departing allocation that keeps a head of the same size
 * (and so departs with its tail alone). */
static bool vs_engine_premap_tail(vs_region_t *r, vs_region_t *lender)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    uint64_t split = r->split;
    /* The lender's one departing mapping, of the tail's size: its own
     * tail, leaving alone from its head, or all of it, having no head. */
    bool lender_tail = lender->split > 0;
    uint64_t lent_bytes = lender_tail ? lender->reserved - lender->split : lender->reserved;
    if (r->where != VS_ON_HOST || r->phys != 0 || r->head_phys == 0 || r->premapped || r->disk_io || r->evicting
        || r->mapping_tail || lender->where != VS_RESIDENT || lender->phys == 0 || lender->phys_lent
        || lender->head_from_host || (lender_tail && lender->keep < lender->split)
        || lent_bytes != r->reserved - split || lender->device != r->device || lender->ctx != r->ctx)
        return false;
    if (!vs_engine_premap_piece(r, split, lender, lender_tail))
        return false;
    vs_log(VS_LOG_DEBUG, "mapping the tail of 0x%" PRIxPTR " ahead onto the %s of departing 0x%" PRIxPTR
           " (it keeps %" PRIu64 " bytes, the lender %" PRIu64 ")", r->base, lender_tail ? "tail" : "memory",
           lender->base, split, lender->split);
    return true;
}

/* `vs_engine_premap` for a whole allocation mapped as one piece onto the
 * tail of a departing allocation that keeps its head (pieces of one size:
 * `vs_prefetch_piece`). */
static bool vs_engine_premap_onto_tail(vs_region_t *r, vs_region_t *lender)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (lender->split == 0 || lender->keep < lender->split || lender->reserved - lender->split != r->reserved)
        return false;
    if (!vs_engine_premap_piece(r, 0, lender, true))
        return false;
    vs_log(VS_LOG_DEBUG, "mapping 0x%" PRIxPTR " ahead onto the tail of departing 0x%" PRIxPTR " (it keeps %" PRIu64
           " bytes)", r->base, lender->base, lender->split);
    return true;
}

bool vs_engine_premap(vs_region_t *r, vs_region_t *lender)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (r->adopted || lender->adopted)
        return false;
    if (r->split > 0)
        return vs_engine_premap_tail(r, lender);
    if (r->where != VS_ON_HOST || r->phys != 0 || r->split != 0 || r->premapped || r->disk_io || r->evicting
        || (r->keep != 0 && r->keep < r->reserved) || lender->where != VS_RESIDENT || lender->phys == 0
        || lender->phys_lent || lender->head_from_host || lender->device != r->device || lender->ctx != r->ctx)
        return false;
    if (lender->reserved != r->reserved)
        return vs_engine_premap_onto_tail(r, lender);
    vs_engine_range_unmapped(r->base, r->reserved);
    /* The lender's pieces, at the same offsets: a head, when it has one,
     * and the tail; then one grant over both. */
    uint64_t split = lender->split;
    if (split > 0 && VS_ENGINE_CALL(VS_HOST_VMM, cuMemMap, ((CUdeviceptr)r->base, split, 0, lender->head_phys, 0)) != CUDA_SUCCESS)
        return false;
    if (VS_ENGINE_CALL(VS_HOST_VMM, cuMemMap, ((CUdeviceptr)(r->base + split), r->reserved - split, 0, lender->phys, 0)) != CUDA_SUCCESS) {
        if (split > 0)
            (void)VS_ENGINE_CALL(VS_HOST_VMM, cuMemUnmap, ((CUdeviceptr)r->base, split));
        return false;
    }
    if (vs_engine_grant_ahead(r, (CUdeviceptr)r->base, r->reserved) != CUDA_SUCCESS) {
        (void)vs_engine_unmap_pieces(r->base, split, r->reserved);
        return false;
    }
    r->phys = lender->phys;
    r->premap_split = split;
    r->premap_head = split > 0 ? lender->head_phys : 0;
    r->premapped = true;
    lender->phys_lent = true;
    vs_log(VS_LOG_DEBUG, "mapping 0x%" PRIxPTR " ahead onto the memory of departing 0x%" PRIxPTR " (head %" PRIu64
           " bytes)", r->base, lender->base, split);
    return true;
}

void vs_engine_premap_drop(vs_region_t *r, vs_region_t *lender)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (!r->premapped)
        return;
    vs_arrive_join_range(r->base, r->reserved); /* its grant, on the arrival thread */
    vs_engine_device_t *d = &vs_engine.devices[r->device];
    uint64_t split = r->premap_split;
    /* A tail mapped ahead alone: its own head stays, only the tail goes. */
    CUresult unmapped = r->premap_tail ? VS_ENGINE_CALL(VS_HOST_VMM, cuMemUnmap,
                                                        ((CUdeviceptr)(r->base + split), r->reserved - split))
                                       : vs_engine_unmap_pieces(r->base, split, r->reserved);
    if (unmapped != CUDA_SUCCESS)
        r->stale_mapping = true;
    if (lender->phys_lent && lender->phys == r->phys) {
        lender->phys_lent = false; /* its departure has not ended: still its memory */
        lender->lent_tail = false;
    } else {
        /* The lender's ranges are gone too: the memory is no one's, and
         * goes once they are unmapped, here. */
        for (size_t i = 0; i < sizeof vs_engine.lent / sizeof vs_engine.lent[0]; i++)
            vs_engine.lent[i].memory_lent = false;
        vs_engine_lent_unmap();
        if (split > 0 && !r->premap_tail)
            vs_engine_phys_release(r->premap_head);
        vs_engine_spare_keep(d, r->phys, r->reserved - split);
    }
    r->phys = 0;
    r->premapped = false;
    r->premap_tail = false;
    r->premap_split = 0;
    r->premap_head = 0;
}

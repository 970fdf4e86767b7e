/* offload_context.c: the end of a context the application destroys, resets
 * or releases for the last time. The real driver frees everything made in
 * it; the engine waits for its copies in flight, drops the allocations
 * made there, moves the host pool's pins to a context that lives on, and
 * ends its own streams, events and hashers there, so that a later context
 * on the device starts fresh. `vs_offload_ctx_ending` takes the engine
 * lock; the rest runs under it (offload_internal.h).
 */
#include "offload_internal.h"
#include "offload_device.h"
#include "offload_streams.h"
#include "offload_tier.h"
#include "offload_prefetch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "log.h"

/* ---- A context destroyed -------------------------------------------------
 * The application destroys a context (`cuCtxDestroy`), resets a primary
 * context (`cuDevicePrimaryCtxReset`, what cudaDeviceReset does) or
 * releases it for the last time. The real driver frees everything made in
 * it: the application's allocations, and the engine's streams, events,
 * content-hash modules and lanes, staging buffers and pinned memory made
 * there. The engine waits for every copy it has in flight, then ends what it
 * holds in that context (while the context lives when the destroy is
 * certain; after it, without a driver call on its handles, when it was not
 * known beforehand), so that a later context on the device starts fresh:
 * the engine re-creates what it needs there on first use. */

/* Frees `r`, an allocation of a destroyed context: its device pointer died
 * with the context, as a cuMemAlloc allocation's does. */
static void vs_engine_region_drop(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    (void)vs_registry_remove(r->base, ~0u, NULL);
    vs_engine_physical_end(r);
    r->arriving = NULL;
    (void)vs_engine_region_release(r);
}

typedef struct vs_engine_repin_s {
    bool dying_alive; /* the slab's registration may still be undone */
    CUcontext survivor; /* where to register it again; NULL: nowhere now */
} vs_engine_repin_t;

static void vs_engine_repin_slab(void *ptr, uint64_t bytes, void **owner, void *arg)
{
    const vs_engine_repin_t *repin = arg;
    if (*owner != NULL && repin->dying_alive) {
        bool pushed = VS_CALL(cuCtxPushCurrent_v2, ((CUcontext)*owner)) == CUDA_SUCCESS;
        (void)VS_CALL(cuMemHostUnregister, (ptr));
        CUcontext popped;
        if (pushed)
            (void)VS_CALL(cuCtxPopCurrent_v2, (&popped));
    }
    *owner = NULL;
    if (repin->survivor == NULL)
        return;
    bool pushed = VS_CALL(cuCtxPushCurrent_v2, (repin->survivor)) == CUDA_SUCCESS;
    CUresult rc = VS_CALL(cuMemHostRegister_v2, (ptr, bytes, CU_MEMHOSTREGISTER_PORTABLE));
    CUcontext popped;
    if (pushed)
        (void)VS_CALL(cuCtxPopCurrent_v2, (&popped));
    /* Already registered: a driver that kept the pin past its context. */
    if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        *owner = repin->survivor;
    else
        vs_log(VS_LOG_WARN, "cannot pin %" PRIu64 " bytes of the host pool again (error %d); copies from them are slower",
               bytes, (int)rc);
}

void vs_engine_host_repin_orphans(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_repin_t repin = {.dying_alive = false, .survivor = NULL};
    if (VS_CALL(cuCtxGetCurrent, (&repin.survivor)) == CUDA_SUCCESS && repin.survivor != NULL)
        (void)vs_host_pool_repin(NULL, vs_engine_repin_slab, &repin);
}

/* Moves the pins of the slabs registered in `ctx` to a context the engine
 * knows to live on: another device's engine context, or that of an
 * allocation of another context, or the caller's current one. */
static void vs_engine_ctx_repin_slabs(CUcontext ctx, bool alive)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_repin_t repin = {.dying_alive = alive, .survivor = NULL};
    for (int device = 0; device < VS_MAX_DEVICES && repin.survivor == NULL; device++)
        if (vs_engine.devices[device].ready && vs_engine.devices[device].ctx != ctx)
            repin.survivor = vs_engine.devices[device].ctx;
    for (vs_region_t *r = vs_engine.by_base; r != NULL && repin.survivor == NULL; r = r->hh.next)
        if (r->ctx != ctx)
            repin.survivor = r->ctx;
    CUcontext current = NULL;
    if (repin.survivor == NULL && VS_CALL(cuCtxGetCurrent, (&current)) == CUDA_SUCCESS && current != ctx)
        repin.survivor = current;
    size_t moved = vs_host_pool_repin(ctx, vs_engine_repin_slab, &repin);
    if (moved > 0)
        vs_log(VS_LOG_DEBUG, "%zu host pool slabs pinned in a destroyed context: pinned again %s", moved,
               repin.survivor != NULL ? "in another context" : "at the next eviction");
}

/* Ends everything the engine holds in `ctx` (see above). */
static void vs_engine_ctx_teardown(CUcontext ctx, uint64_t stream_slots, bool alive)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (alive) {
        /* The application's work in it may still use its allocations. */
        bool pushed = VS_CALL(cuCtxPushCurrent_v2, (ctx)) == CUDA_SUCCESS;
        (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuCtxSynchronize, ());
        CUcontext popped;
        if (pushed)
            (void)VS_CALL(cuCtxPopCurrent_v2, (&popped));
    }
    size_t dropped = 0;
    vs_region_t *r, *tmp;
    HASH_ITER(hh, vs_engine.by_base, r, tmp) {
        if (r->ctx == ctx) {
            vs_engine_region_drop(r);
            dropped++;
        }
    }
    vs_engine_spares_release(); /* nothing of the dying context is kept */
    for (int device = 0; device < VS_MAX_DEVICES; device++)
        vs_engine_filler_release(&vs_engine.devices[device]);
    vs_retire_wait_all();
    vs_arrive_join_all();
    for (int device = 0; device < VS_MAX_DEVICES; device++) {
        vs_engine_device_t *d = &vs_engine.devices[device];
        if (d->ctx != ctx || ctx == NULL)
            continue;
        if (alive) {
            vs_device_hasher_destroy(d->evict_hasher);
            vs_device_hasher_destroy(d->restore_hasher);
            if (d->to_host != NULL)
                (void)VS_CALL(cuStreamDestroy_v2, (d->to_host));
            if (d->to_device != NULL)
                (void)VS_CALL(cuStreamDestroy_v2, (d->to_device));
            if (d->to_host_changed != NULL)
                (void)VS_CALL(cuStreamDestroy_v2, (d->to_host_changed));
            if (d->retire != NULL)
                (void)VS_CALL(cuStreamDestroy_v2, (d->retire));
            if (d->arrive_handed != NULL)
                (void)VS_CALL(cuStreamDestroy_v2, (d->arrive_handed));
            if (d->arrive_recorded != NULL)
                (void)VS_CALL(cuStreamDestroy_v2, (d->arrive_recorded));
        } else {
            vs_device_hasher_forget(d->evict_hasher);
            vs_device_hasher_forget(d->restore_hasher);
        }
        vs_meter_forget(d, alive);
        d->evict_hasher = d->restore_hasher = NULL;
        d->hashers_tried = false;
        d->restore_slots_busy = 0;
        d->evict_slots_busy = 0;
        d->to_host = d->to_device = d->to_host_changed = d->retire = NULL;
        d->arrive_handed = d->arrive_recorded = NULL;
        d->ctx = NULL;
        d->ready = false; /* made again, in the next context, on first use */
    }
    vs_streams_ctx_forget(ctx, stream_slots, alive);
    vs_tier_ctx_forget(ctx, alive);
    vs_engine_ctx_repin_slabs(ctx, alive);
    vs_engine.stats.contexts_destroyed++;
    vs_log(VS_LOG_INFO, "context %p destroyed: %zu of its evictable allocations freed with it", (void *)ctx, dropped);
    pthread_cond_broadcast(&vs_engine.released);
}

void vs_offload_ctx_ending(CUcontext ctx, bool certain, vs_offload_ctx_end_t *end)
{
    memset(end, 0, sizeof *end);
    end->ctx = ctx;
    if (!vs_offload_enabled() || ctx == NULL)
        return;
    vs_engine_lock(&end->mode);
    end->locked = true;
    /* Disk I/O under way (with the engine lock let go) uses regions and
     * the staging buffers the teardown may free: it ends first. */
    vs_engine_disk_io_drain();
    vs_engine_spares_release();
    vs_retire_wait_all();
    vs_arrive_join_all();
    /* Restores in flight read host copies, evictions are waited for where
     * they start: once these are over, no copy of the engine's runs, and
     * none starts until the destroy is over (the lock is held across it). */
    vs_engine_deferred_reap(true);
    for (int device = 0; device < VS_MAX_DEVICES; device++) {
        vs_engine_device_t *d = &vs_engine.devices[device];
        if (!d->ready)
            continue;
        (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (d->to_host));
        (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (d->to_host_changed));
        (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (d->to_device));
    }
    end->stream_slots = vs_streams_ctx_slots(ctx);
    if (certain) {
        vs_engine_ctx_teardown(ctx, end->stream_slots, true);
        end->torn_down = true;
    }
}

void vs_offload_ctx_ended(vs_offload_ctx_end_t *end, bool destroyed)
{
    if (!end->locked)
        return;
    if (destroyed && !end->torn_down)
        vs_engine_ctx_teardown(end->ctx, end->stream_slots, false);
    end->locked = false;
    vs_engine_unlock(end->mode);
}

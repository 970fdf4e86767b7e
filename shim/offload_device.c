/* offload_device.c: the offload engine's devices and what it holds on
 * them: the engine's streams and content hashers per device (made in the
 * current context on first use), physical memory (mapped, granted to peer
 * devices, unmapped and kept for the next map of its size), the pinned
 * host pool's slabs (`cuMemHostRegister`). Partial residency's heads are
 * offload_partial.c's, restores mapped ahead offload_premap.c's, the end of
 * a context offload_context.c's.
 *
 * Everything here runs under the engine lock (offload_internal.h), except
 * the hooks' entry points `vs_offload_peer_changed` and
 * `vs_offload_ctx_ending`, which take it.
 */
#include "offload_internal.h"
#include "offload_device.h"
#include "offload_tier.h"
#include "offload_prefetch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "driver.h"
#include "log.h"

/* The host pool's slabs are the shim's own anonymous memory, registered
 * with the driver (`cuMemHostRegister`, portable), not memory the driver
 * allocates (`cuMemHostAlloc`): pinned memory belongs to the context
 * current when it was made, even portable, and dies with it. The
 * application may destroy that context (`cuCtxDestroy`, a reset) while the
 * slab holds the host copies of other contexts' allocations; a
 * registration that dies takes only the pin, never the bytes. The engine
 * then moves the registration to a context that lives on
 * (`vs_engine_ctx_repin_slabs`), or, when there is none, leaves the slab
 * unpinned (copies from it are still correct, only slower) until the next
 * take pins it in the current context. Moving the copies into new slabs
 * instead would need room for a second copy of each, and a pin of
 * hundreds of MiB on the application's context destroy. */
int vs_engine_pin_host(void **ptr, uint64_t bytes, void **owner)
{
    CUcontext ctx = NULL;
    if (VS_CALL(cuCtxGetCurrent, (&ctx)) != CUDA_SUCCESS || ctx == NULL)
        return -ENOMEM;
    void *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED)
        return -ENOMEM;
    if (VS_CALL(cuMemHostRegister_v2, (memory, bytes, CU_MEMHOSTREGISTER_PORTABLE)) != CUDA_SUCCESS) {
        munmap(memory, bytes);
        return -ENOMEM;
    }
    *ptr = memory;
    *owner = ctx;
    return 0;
}

void vs_engine_unpin_host(void *ptr, uint64_t bytes, void *owner)
{
    if (owner != NULL)
        (void)VS_CALL(cuMemHostUnregister, (ptr));
    munmap(ptr, bytes);
}

/* Per device: 0 not asked yet, 1 VMM supported, 2 not supported (warned). */
static _Atomic int vs_engine_vmm[VS_MAX_DEVICES];

bool vs_offload_device_has_vmm(int device)
{
    if (device < 0 || device >= VS_MAX_DEVICES)
        return true;
    int known = atomic_load_explicit(&vs_engine_vmm[device], memory_order_acquire);
    if (known != 0)
        return known == 1;
    CUdevice dev;
    int supported = 0;
    if (VS_CALL(cuDeviceGet, (&dev, device)) != CUDA_SUCCESS
        || VS_CALL(cuDeviceGetAttribute, (&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev))
               != CUDA_SUCCESS)
        return true; /* asked again later; the engine's own calls give the driver's error */
    int expected = 0;
    if (!atomic_compare_exchange_strong(&vs_engine_vmm[device], &expected, supported ? 1 : 2))
        return expected == 1; /* another thread answered (and warned) first */
    if (!supported) {
        char name[128] = "";
        if (VS_CALL(cuDeviceGetName, (name, (int)sizeof name, dev)) != CUDA_SUCCESS)
            name[0] = '\0';
        vs_log(VS_LOG_WARN,
               "device %d (%s) does not support virtual memory management "
               "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0), which offload needs: VRAM_LIMIT is "
               "enforced there as a hard cap, without offload",
               device, name[0] != '\0' ? name : "unnamed");
    }
    return supported != 0;
}

/* ---- Devices ------------------------------------------------------------- */

/* One of the engine's streams, in the current context, at the context's
 * greatest priority: an eviction's content hash and a restore's arrival
 * hash are short kernels that a copy, and so the next restore, waits for,
 * and the GPU then runs them as soon as what they are fenced behind is
 * done instead of behind kernels queued meanwhile on other streams. A
 * driver that does not tell the range gets a stream of the default
 * priority. */
static CUresult vs_device_stream_create(CUstream *stream)
{
    int least = 0, greatest = 0;
    if (VS_CALL(cuCtxGetStreamPriorityRange, (&least, &greatest)) == CUDA_SUCCESS && greatest != least
        && VS_CALL(cuStreamCreateWithPriority, (stream, CU_STREAM_NON_BLOCKING, greatest)) == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    return VS_CALL(cuStreamCreate, (stream, CU_STREAM_NON_BLOCKING));
}

/* The engine's streams and granularity on `device`, created in the current
 * context the first time. NULL when the driver refuses. */
vs_engine_device_t *vs_engine_device(int device)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (device < 0 || device >= VS_MAX_DEVICES)
        return NULL;
    vs_engine_device_t *d = &vs_engine.devices[device];
    if (d->ready)
        return d;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t granularity = 0;
    if (VS_CALL(cuCtxGetCurrent, (&d->ctx)) != CUDA_SUCCESS || d->ctx == NULL
        || VS_CALL(cuMemGetAllocationGranularity, (&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM))
               != CUDA_SUCCESS
        || granularity == 0)
        return NULL;
    if (d->to_host == NULL && vs_device_stream_create(&d->to_host) != CUDA_SUCCESS)
        return NULL;
    if (d->to_device == NULL && vs_device_stream_create(&d->to_device) != CUDA_SUCCESS)
        return NULL;
    if (d->to_host_changed == NULL && vs_device_stream_create(&d->to_host_changed) != CUDA_SUCCESS)
        return NULL;
    /* Without it the engine makes its unmaps and releases itself. */
    if (d->retire == NULL && VS_CALL(cuStreamCreate, (&d->retire, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        d->retire = NULL;
    /* Without them, the calls of restores ahead of need. */
    if (d->arrive_handed == NULL && VS_CALL(cuStreamCreate, (&d->arrive_handed, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        d->arrive_handed = NULL;
    if (d->arrive_recorded == NULL
        && VS_CALL(cuStreamCreate, (&d->arrive_recorded, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        d->arrive_recorded = NULL;
    if (d->policy == NULL
        && vs_policy_create((vs_policy_kind_t)vs_config_get()->policy, &d->policy) != 0)
        return NULL;
    d->granularity = granularity;
    d->ready = true;
    return d;
}

/* The device's hashers, created the first time they are wanted. NULL when
 * the kernel cannot be loaded (then evictions copy, as without hashing). */
vs_device_hasher_t *vs_engine_evict_hasher(vs_engine_device_t *d, int device)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (!d->hashers_tried) {
        d->hashers_tried = true;
        /* In the device's own context: the first eviction on a device may
         * come from an operation of another device (a peer's kernel). */
        CUcontext popped;
        bool pushed = VS_CALL(cuCtxPushCurrent_v2, (d->ctx)) == CUDA_SUCCESS;
        int created = vs_device_hasher_create(device, VS_EVICT_BATCH, &d->evict_hasher);
        if (created == 0)
            created = vs_device_hasher_create(device, VS_RESTORE_HASH_SLOTS, &d->restore_hasher);
        if (pushed)
            (void)VS_CALL(cuCtxPopCurrent_v2, (&popped));
        if (created != 0) {
            vs_device_hasher_destroy(d->evict_hasher);
            d->evict_hasher = NULL;
            d->restore_hasher = NULL;
            vs_log(VS_LOG_WARN, "device %d: the content-hash kernel is not available; every eviction copies", device);
        }
    }
    return d->evict_hasher;
}

/* ---- Physical memory ----------------------------------------------------- */

/* Releases `phys`, once no range the engine's thread is still to unmap
 * maps it: the memory goes now, as its charge to the limit did. */
void vs_engine_phys_release(CUmemGenericAllocationHandle phys)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_retire_wait_phys(phys);
    (void)VS_ENGINE_CALL(VS_HOST_VMM, cuMemRelease, (phys));
}

static void vs_engine_spare_release(vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (d->spare != 0)
        vs_engine_phys_release(d->spare);
    if (d->spare_head != 0)
        vs_engine_phys_release(d->spare_head);
    d->spare = 0;
    d->spare_bytes = 0;
    d->spare_head = 0;
    d->spare_head_bytes = 0;
}

/* Keeps `phys` (unmapped, `bytes` long) as `d`'s spare, in place of the one
 * kept before, until the engine lock is let go. */
void vs_engine_spare_keep(vs_engine_device_t *d, CUmemGenericAllocationHandle phys, uint64_t bytes)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_spare_release(d);
    d->spare = phys;
    d->spare_bytes = bytes;
    vs_engine.spares_held = true;
}

/* Unmaps [base, base + bytes), which one mapping or two adjacent ones
 * tile: one call (cuda.h forbids only a sub-range of a mapping; NVIDIA's
 * multi-device samples unmap the stripes of several handles so), or one
 * call per piece (`split` > 0: the first ends at `base + split`) should
 * the driver refuse it. */
CUresult vs_engine_unmap_pieces(uintptr_t base, uint64_t split, uint64_t bytes)
{
    CUresult rc = VS_ENGINE_CALL(VS_HOST_VMM, cuMemUnmap, ((CUdeviceptr)base, bytes));
    if (rc == CUDA_SUCCESS || split == 0 || split >= bytes)
        return rc;
    rc = VS_ENGINE_CALL(VS_HOST_VMM, cuMemUnmap, ((CUdeviceptr)base, split));
    CUresult tail = VS_ENGINE_CALL(VS_HOST_VMM, cuMemUnmap, ((CUdeviceptr)(base + split), bytes - split));
    return rc != CUDA_SUCCESS ? rc : tail;
}

void vs_engine_lent_unmap(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    struct vs_lent_range_s *tail = &vs_engine.lent[0], *head = &vs_engine.lent[1];
    /* A head and its tail, left apart: one range. */
    if (head->bytes != 0 && tail->bytes != 0 && head->base + head->bytes == tail->base) {
        tail->split = head->bytes;
        tail->base = head->base;
        tail->bytes += head->bytes;
        tail->memory_lent = tail->memory_lent && head->memory_lent;
        tail->phys[1] = head->phys[0];
        head->bytes = 0;
        head->base = 0;
    }
    for (size_t i = 0; i < sizeof vs_engine.lent / sizeof vs_engine.lent[0]; i++) {
        struct vs_lent_range_s *range = &vs_engine.lent[i];
        if (range->bytes == 0)
            continue;
        /* Memory that another range owns now: unmapping here frees none,
         * and nothing waits for it but a map at this range (on the
         * engine's thread where it runs). The device's spare, unmapped
         * here: its memory is released next. */
        CUresult rc = CUDA_SUCCESS;
        if (!range->memory_lent || !vs_retire_unmap(range->device, range->base, range->split, range->bytes, range->phys))
            rc = vs_engine_unmap_pieces(range->base, range->split, range->bytes);
        if (rc != CUDA_SUCCESS) {
            vs_log(VS_LOG_WARN, "cannot unmap the evicted allocation at 0x%" PRIxPTR " (error %d)", range->base,
                   (int)rc);
            vs_region_t *owner = vs_engine_region_containing(range->base);
            if (owner != NULL)
                owner->stale_mapping = true;
        }
        range->base = 0;
        range->bytes = 0;
        range->split = 0;
        range->phys[0] = range->phys[1] = 0;
    }
}

/* Whether a range left for `vs_engine_lent_unmap` overlaps [base, base +
 * bytes). */
static bool vs_engine_lent_overlaps(uintptr_t base, uint64_t bytes)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    for (size_t i = 0; i < sizeof vs_engine.lent / sizeof vs_engine.lent[0]; i++) {
        const struct vs_lent_range_s *range = &vs_engine.lent[i];
        if (range->bytes != 0 && range->base < base + bytes && base < range->base + range->bytes)
            return true;
    }
    return false;
}

/* Makes sure nothing is mapped at [base, base + bytes) that the engine let
 * go of: a range its departure left mapped, here or on the way to the
 * engine's thread, is unmapped first. */
void vs_engine_range_unmapped(uintptr_t base, uint64_t bytes)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_engine_lent_overlaps(base, bytes))
        vs_engine_lent_unmap();
    vs_retire_wait_range(base, bytes);
    vs_arrive_join_range(base, bytes);
}

/* Leaves [base, base + bytes) of `r`, one mapping onto memory that another
 * range now owns (`memory_lent`: unmapped on the engine's thread) or that
 * is the device's spare, for `vs_engine_lent_unmap` (which joins a head and
 * its tail). */
static void vs_engine_lent_leave(size_t slot, const vs_region_t *r, uintptr_t base, uint64_t bytes, bool memory_lent,
                                 CUmemGenericAllocationHandle phys)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_engine.lent[slot].bytes != 0)
        vs_engine_lent_unmap();
    vs_engine.lent[slot].device = r->device;
    vs_engine.lent[slot].memory_lent = memory_lent;
    vs_engine.lent[slot].base = base;
    vs_engine.lent[slot].split = 0;
    vs_engine.lent[slot].bytes = bytes;
    vs_engine.lent[slot].phys[0] = phys;
    vs_engine.lent[slot].phys[1] = 0;
    vs_engine.spares_held = true; /* unmapped at the latest when the lock is let go */
}

void vs_engine_spares_release(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_engine.spares_held) {
        for (int device = 0; device < VS_MAX_DEVICES; device++) {
            vs_engine_device_t *d = &vs_engine.devices[device];
            vs_engine_spare_release(d);
            /* A restore took the held filler memory's charge and mapped
             * other memory (or failed): uncharged now, it goes too. */
            if (d->filler_given)
                vs_engine_filler_release(d);
        }
        vs_engine_lent_unmap();
        vs_engine.spares_held = false;
    }
    vs_retire_hand_over();
}

/* ---- The fillers' memory -------------------------------------------------- */

bool vs_engine_filler_hold(vs_engine_device_t *d, const vs_region_t *r, uint64_t released)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (d->filler_bytes == 0 || d->filler_phys != 0 || released != d->filler_bytes || r->reserved != released
        || d->spare == 0 || d->spare_bytes != released)
        return false;
    d->filler_phys = d->spare;
    d->filler_given = false;
    d->spare = 0;
    d->spare_bytes = 0;
    return true;
}

bool vs_engine_filler_take(vs_engine_device_t *d, uint64_t need)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (d->filler_phys == 0 || d->filler_given || need != d->filler_bytes)
        return false;
    d->filler_given = true;
    vs_engine.spares_held = true; /* let go with the spares unless mapped */
    return true;
}

/* Ends the hold of the filler memory on `d` (held: not 0) and returns it:
 * its charge given back unless a restore took it as its own. */
static CUmemGenericAllocationHandle vs_engine_filler_let_go(vs_engine_device_t *d)
{
    CUmemGenericAllocationHandle phys = d->filler_phys;
    vs_cap_release((int)(d - vs_engine.devices), vs_engine_filler_charged(d));
    d->filler_phys = 0;
    d->filler_given = false;
    return phys;
}

void vs_engine_filler_release(vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (d->filler_phys != 0)
        vs_engine_phys_release(vs_engine_filler_let_go(d));
}

/* The held filler memory for a map of `bytes` on `d`, if it is of that
 * size (0 otherwise): the restore's charge stands for it, its own given
 * back where the restore counted its bytes afresh. */
static CUmemGenericAllocationHandle vs_engine_filler_map(vs_engine_device_t *d, uint64_t bytes)
{
    if (d->filler_phys == 0 || d->filler_bytes != bytes)
        return 0;
    vs_engine.stats.filler_maps++;
    return vs_engine_filler_let_go(d);
}

/* Grants [at, at + bytes) of `r`'s range, mapped whole by one mapping or
 * several, to the owner and to every device with peer access to it: a new
 * mapping has no access at all, and peer access does not apply to it. One
 * call over several mappings, as cuda.h allows ("a contiguous mapped VA
 * range"). */
CUresult vs_engine_grant(const vs_region_t *r, CUdeviceptr at, uint64_t bytes)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    CUmemAccessDesc access[VS_MAX_DEVICES];
    size_t grants = 0;
    if (r->adopted) {
        /* The application's own grants, as it made them. */
        grants = r->grant_count;
        memcpy(access, r->grants, grants * sizeof access[0]);
    }
    for (int device = 0; device < VS_MAX_DEVICES && !r->adopted; device++) {
        if (device != r->device && vs_engine.peer_refs[r->device][device] == 0)
            continue;
        memset(&access[grants], 0, sizeof access[grants]);
        access[grants].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access[grants].location.id = device;
        access[grants].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        grants++;
    }
    /* A restore ahead of need: made on the arrival thread. */
    if (vs_engine.arrival_open != NULL && vs_engine.arrival_for == r
        && vs_arrive_grant(vs_engine.arrival_open, at, bytes, access, grants))
        return CUDA_SUCCESS;
    return VS_ENGINE_CALL(VS_HOST_VMM, cuMemSetAccess, (at, bytes, access, grants));
}

/* Maps [offset, offset + bytes) of `r` to physical memory of its device
 * (the spare when its size matches), granted as `vs_engine_grant` grants
 * unless `grant` is false (the caller grants it with the rest of the
 * range); the handle in *out. On failure nothing of it stays mapped. */
static CUresult vs_engine_physical_map_range(vs_region_t *r, uint64_t offset, uint64_t bytes, bool grant,
                                             CUmemGenericAllocationHandle *out)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = &vs_engine.devices[r->device];
    CUmemGenericAllocationHandle phys = 0;
    CUresult rc = CUDA_SUCCESS;
    CUdeviceptr at = (CUdeviceptr)(r->base + offset);
    vs_engine_range_unmapped(r->base, r->reserved);
    if (r->prop != NULL) {
        /* Made with the program's properties, for it alone. */
        vs_engine_spare_release(d);
        vs_engine_lent_unmap();
        rc = VS_ENGINE_CALL(VS_HOST_VMM, cuMemCreate, (&phys, bytes, r->prop, 0));
        if (rc != CUDA_SUCCESS)
            return rc;
    } else if (d->spare != 0 && d->spare_bytes == bytes) {
        phys = d->spare; /* what an eviction just unmapped: no release, no create */
        d->spare = 0;
        d->spare_bytes = 0;
    } else if (d->spare_head != 0 && d->spare_head_bytes == bytes) {
        phys = d->spare_head;
        d->spare_head = 0;
        d->spare_head_bytes = 0;
    } else if ((phys = vs_engine_filler_map(d, bytes)) != 0) {
        /* The memory of the filler that departed last. */
    } else {
        /* The device's memory for this one: the spares are released, and
         * a departed range still mapped (`lent`) is unmapped, first. */
        vs_engine_spare_release(d);
        vs_engine_lent_unmap();
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = r->device;
        rc = VS_ENGINE_CALL(VS_HOST_VMM, cuMemCreate, (&phys, bytes, &prop, 0));
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    rc = VS_ENGINE_CALL(VS_HOST_VMM, cuMemMap, (at, bytes, 0, phys, 0));
    if (rc == CUDA_ERROR_INVALID_VALUE && r->stale_mapping) {
        /* Still mapped: an unmap the driver refused left memory there
         * that was let go of (released, so freed with the mapping; nothing
         * uses it, its users were waited for). Unmapped again, the range
         * takes its new memory. */
        CUdeviceptr from = (CUdeviceptr)(r->base + offset);
        if (VS_ENGINE_CALL(VS_HOST_VMM, cuMemUnmap, (from, r->reserved - offset)) == CUDA_SUCCESS) {
            vs_log(VS_LOG_DEBUG, "unmapped 0x%" PRIxPTR " again, left mapped by a refused unmap", (uintptr_t)from);
            r->stale_mapping = false;
            rc = VS_ENGINE_CALL(VS_HOST_VMM, cuMemMap, (at, bytes, 0, phys, 0));
        }
    }
    if (rc == CUDA_SUCCESS && grant && (rc = vs_engine_grant(r, at, bytes)) != CUDA_SUCCESS)
        (void)VS_ENGINE_CALL(VS_HOST_VMM, cuMemUnmap, (at, bytes));
    if (rc != CUDA_SUCCESS) {
        vs_engine_phys_release(phys);
        return rc;
    }
    *out = phys;
    return CUDA_SUCCESS;
}

/* Maps what `r` is missing: its tail when its head is still mapped; else
 * the whole range, as a head and a tail when the plan asks it to keep one
 * (`keep`). */
static CUresult vs_engine_physical_map(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (r->premapped) {
        /* Mapped and granted ahead, onto what is now its memory (a tail
         * mapped ahead alone leaves its own head as it was). A restore made
         * here, not on the arrival thread, needs that grant made first. */
        if (vs_engine.arrival_for != r)
            vs_arrive_join_range(r->base, r->reserved);
        r->premapped = false;
        r->split = r->premap_split;
        r->head_phys = r->premap_head;
        /* A head the restore fills from the host copy, as a partial
         * restore's: its evictions judge [0, size) (`vs_engine_restore_copy`). */
        if (!r->premap_tail)
            r->head_from_host = r->split > 0;
        r->premap_tail = false;
        r->premap_split = 0;
        r->premap_head = 0;
        vs_engine.stats.mapped_ahead++;
        return CUDA_SUCCESS;
    }
    if (r->split > 0)
        return vs_engine_physical_map_range(r, r->split, r->reserved - r->split, true, &r->phys);
    if (r->keep == 0 || r->keep >= r->reserved || r->adopted)
        return vs_engine_physical_map_range(r, 0, r->reserved, true, &r->phys);
    /* A head and a tail, granted together. */
    CUresult rc = vs_engine_physical_map_range(r, 0, r->keep, false, &r->head_phys);
    if (rc != CUDA_SUCCESS)
        return rc;
    r->split = r->keep;
    rc = vs_engine_physical_map_range(r, r->split, r->reserved - r->split, false, &r->phys);
    if (rc == CUDA_SUCCESS && (rc = vs_engine_grant(r, (CUdeviceptr)r->base, r->reserved)) != CUDA_SUCCESS)
        vs_engine_physical_unmap(r);
    if (rc != CUDA_SUCCESS)
        vs_engine_physical_unmap_head(r);
    return rc;
}

CUresult vs_engine_restore_head(vs_region_t *r, uint64_t bytes)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = &vs_engine.devices[r->device];
    VS_ASSERT(r->where == VS_ON_HOST && r->split == 0 && bytes > 0 && bytes < r->reserved && bytes < r->size);
    CUresult rc = vs_engine_physical_map_range(r, 0, bytes, true, &r->head_phys);
    if (rc != CUDA_SUCCESS)
        return rc;
    r->split = bytes;
    vs_arrive_join_all(); /* the host-to-device stream's order */
    rc = vs_tier_copy_region(r, 0, bytes, VS_COPY_IN, d->to_device);
    if (rc != CUDA_SUCCESS) {
        (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (d->to_device)); /* what was queued of it */
        vs_engine_physical_unmap_head(r);
        return rc;
    }
    vs_meter_copied(d, r->device, bytes);
    r->head_from_host = true;
    d->kept_head_bytes += bytes;
    vs_engine.stats.bytes_to_device += bytes;
    return CUDA_SUCCESS;
}

/* Peer access from a context on `accessor` to one on `owner` was enabled
 * (`enabled`) or disabled by the application. The mappings already on the
 * owner's device get the accessor's grant now (or lose it when no context
 * pair is left); later maps grant it in `vs_engine_physical_map`. */
void vs_offload_peer_changed(int accessor, int owner, bool enabled)
{
    if (!vs_offload_enabled() || accessor < 0 || accessor >= VS_MAX_DEVICES || owner < 0
        || owner >= VS_MAX_DEVICES || accessor == owner)
        return;
    CUstreamCaptureMode mode;
    vs_engine_lock(&mode);
    uint16_t *refs = &vs_engine.peer_refs[owner][accessor];
    bool was = *refs > 0;
    if (enabled)
        (*refs)++;
    else if (*refs > 0)
        (*refs)--;
    if (was != (*refs > 0)) {
        CUmemAccessDesc access;
        memset(&access, 0, sizeof access);
        access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id = accessor;
        access.flags = *refs > 0 ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
        size_t regranted = 0;
        for (vs_region_t *r = vs_engine.by_base; r != NULL; r = r->hh.next) {
            /* What is mapped: all of it, or the head an evicted one keeps. */
            uint64_t mapped = r->phys != 0 ? r->reserved : r->split;
            /* The application grants its own mappings itself. */
            if (r->device != owner || mapped == 0 || r->adopted)
                continue;
            CUresult rc = VS_ENGINE_CALL(VS_HOST_VMM, cuMemSetAccess, ((CUdeviceptr)r->base, mapped, &access, 1));
            if (rc != CUDA_SUCCESS)
                vs_log(VS_LOG_WARN, "cannot %s device %d access to the allocation at 0x%" PRIxPTR " (error %d)",
                       *refs > 0 ? "grant" : "revoke", accessor, r->base, (int)rc);
            else
                regranted++;
        }
        vs_log(VS_LOG_DEBUG, "peer access from device %d to device %d %s: %zu mapped allocations changed", accessor,
               owner, *refs > 0 ? "enabled" : "disabled", regranted);
    }
    vs_engine_unlock(mode);
}

/* Maps physical memory for `r`, whose bytes are already counted; when the
 * device itself is full (other processes, a limit above its size), evicts
 * whatever it takes and tries again. */
CUresult vs_engine_physical_map_evicting(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    CUresult rc;
    while ((rc = vs_engine_physical_map(r)) == CUDA_ERROR_OUT_OF_MEMORY) {
        uint64_t missing = r->reserved - r->split;
        r->mapping_tail = r->split > 0;
        int room = vs_engine_make_room(r->device, missing, true);
        r->mapping_tail = false;
        vs_engine_policy_reset_skips();
        if (room != 0)
            break;
        vs_cap_release(r->device, missing); /* counted twice by the reclaim */
    }
    return rc;
}

/* `r`'s tail memory (the whole range's when it keeps no head) once the
 * unmap of its range answered `unmapped`: the device's spare, or, where
 * the unmap was refused, released (freed with the mapping the range may
 * still hold: `stale_mapping`). */
static void vs_engine_tail_let_go(vs_region_t *r, CUresult unmapped)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (unmapped != CUDA_SUCCESS) {
        r->stale_mapping = true;
        vs_engine_phys_release(r->phys);
    } else {
        vs_engine_spare_keep(&vs_engine.devices[r->device], r->phys, r->reserved - r->split);
    }
    r->phys = 0;
}

/* `r`'s head memory once the unmap of its range answered `unmapped`:
 * released (`split` becomes 0). */
static void vs_engine_head_let_go(vs_region_t *r, CUresult unmapped)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (unmapped != CUDA_SUCCESS)
        r->stale_mapping = true;
    vs_engine_phys_release(r->head_phys);
    r->head_phys = 0;
    r->split = 0;
}

/* A head that came from the host copy (`head_from_host`): its copy in may
 * still be writing there, and is waited for before the head is unmapped. */
static void vs_engine_head_settle(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (r->head_from_host) {
        vs_arrive_join_all(); /* what the arrival thread queues there too */
        (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuStreamSynchronize, (vs_engine.devices[r->device].to_device));
        r->head_from_host = false;
    }
}

/* Unmaps `r`'s tail (the whole range when it keeps no head); that physical
 * memory becomes the device's spare (the one kept before is released), for
 * a map of the same size before the engine lock is let go. Its bytes are
 * undefined then, as a fresh cuMemCreate's are: every map is followed by a
 * restore copy or holds no data yet. */
void vs_engine_physical_unmap(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    uint64_t bytes = r->reserved - r->split;
    if (r->phys_lent) {
        /* Mapped ahead at another range (`vs_engine_premap`): the memory is
         * that allocation's now. This range is unmapped once its copy is
         * queued, within this hold of the lock; so is the head's, which
         * goes the same way (`vs_engine_physical_unmap_head`). */
        vs_engine_lent_leave(0, r, r->base + r->split, bytes, true, r->phys);
        if (r->split == 0 || r->lent_tail)
            r->phys_lent = false; /* lent whole, or its head stays its own */
        r->lent_tail = false;
        r->phys = 0;
        return;
    }
    vs_engine_lent_unmap(); /* before this memory can be mapped again */
    vs_engine_tail_let_go(r, VS_ENGINE_CALL(VS_HOST_VMM, cuMemUnmap, ((CUdeviceptr)(r->base + r->split), bytes)));
}

void vs_engine_physical_unmap_head(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (r->split == 0)
        return;
    r->head_on_host = false;
    if (r->phys_lent && r->phys == 0) {
        /* Its tail went to a mapping ahead (`vs_engine_physical_unmap`):
         * the head goes with it. */
        vs_engine_lent_leave(1, r, r->base, r->split, true, r->head_phys);
        r->phys_lent = false;
        r->head_phys = 0;
        r->split = 0;
        return;
    }
    vs_engine_head_settle(r);
    vs_engine_head_let_go(r, VS_ENGINE_CALL(VS_HOST_VMM, cuMemUnmap, ((CUdeviceptr)r->base, r->split)));
}

void vs_engine_physical_unmap_whole(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (r->split == 0 || r->phys == 0 || r->phys_lent) {
        /* One piece mapped; or both lent, and left as one range to unmap
         * (`vs_engine_lent_unmap`). */
        if (r->phys != 0)
            vs_engine_physical_unmap(r);
        vs_engine_physical_unmap_head(r);
        return;
    }
    vs_engine_head_settle(r);
    vs_engine_lent_unmap(); /* one departure's range left mapped at a time */
    /* Both pieces go, unmapped behind the copy this hold of the lock queues
     * next (`vs_engine_lent_unmap`; at the latest when the lock is let go),
     * not before it: two mappings cost two unmaps (on an H200 one call
     * over both costs as much). Its users are done. Its tail's and its
     * head's memory are the device's spares meanwhile, which restores of
     * those sizes map at their own ranges, no create and no release (one
     * memory at two addresses, as a mapping ahead does); a create frees
     * them, and the range, first. */
    vs_engine_device_t *d = &vs_engine.devices[r->device];
    vs_engine_lent_leave(1, r, r->base, r->split, false, r->head_phys); /* joined with the tail into one range */
    vs_engine_lent_leave(0, r, r->base + r->split, r->reserved - r->split, false, r->phys);
    vs_engine_spare_keep(d, r->phys, r->reserved - r->split);
    d->spare_head = r->head_phys;
    d->spare_head_bytes = r->split;
    r->phys = 0;
    r->head_phys = 0;
    r->split = 0;
}

void vs_engine_physical_end(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = &vs_engine.devices[r->device];
    vs_cap_release(r->device, vs_engine_region_charged(r));
    if (r->where != VS_RESIDENT)
        d->kept_head_bytes -= r->split;
    vs_engine_physical_unmap_whole(r);
    vs_engine_lent_unmap(); /* its range is freed next */
    if (d->keep_id == r->id)
        d->keep_id = 0;
}


/* offload_device.h: the engine's devices and physical memory
 * (offload_device.c), partial residency's heads (offload_partial.c),
 * restores mapped ahead (offload_premap.c), the end of a context
 * (offload_context.c), and the engine's two threads: the arrival thread
 * (offload_arrive.c) and the retire thread (offload_retire.c). Engine lock
 * held unless said (offload_internal.h).
 */
#ifndef VS_OFFLOAD_DEVICE_H
#define VS_OFFLOAD_DEVICE_H

#include "offload_internal.h"

/* The engine's streams and granularity on `device`, created in the current
 * context the first time. NULL when the driver refuses. */
vs_engine_device_t *vs_engine_device(int device);

/* Physical memory (offload_device.c): `phys` released once no range the
 * retire thread is still to unmap maps it; `phys` kept as `d`'s spare for
 * the next map of its size; `bytes` of `r` at `at` granted to its device
 * and to every device with peer access to it, in one call. */
void vs_engine_phys_release(CUmemGenericAllocationHandle phys);
void vs_engine_spare_keep(vs_engine_device_t *d, CUmemGenericAllocationHandle phys, uint64_t bytes);
CUresult vs_engine_grant(const vs_region_t *r, CUdeviceptr at, uint64_t bytes);

/* The device's eviction hasher, created (with the restore hasher) the first
 * time it is wanted; NULL when the kernel cannot be loaded. */
vs_device_hasher_t *vs_engine_evict_hasher(vs_engine_device_t *d, int device);

/* Maps physical memory for `r` (counted already), granted to the owner and
 * its peers; when the device itself is full, evicts and tries again. */
CUresult vs_engine_physical_map_evicting(vs_region_t *r);

/* Unmaps `r`'s tail (all of it when no head is mapped); its memory is kept
 * as the device's spare until the engine lock is let go, or, when it was
 * mapped ahead at another range (`phys_lent`), is that range's, and this
 * range's unmap waits for `vs_engine_lent_unmap`. */
void vs_engine_physical_unmap(vs_region_t *r);

/* Mapping ahead: while `lender` (resident, of `r`'s size and context,
 * leaving whole) departs, maps `r`'s whole range (evicted, nothing mapped) onto
 * `lender`'s physical memory and grants access, so that the restore of `r`
 * that the departure makes room for starts with its copy. Nothing more is
 * charged: it is the same memory. When `lender`'s departure ends, its
 * memory becomes `r`'s (`vs_engine_physical_unmap`). False: not possible
 * (nothing changed). */
bool vs_engine_premap(vs_region_t *r, vs_region_t *lender);

/* Ends a mapping ahead that the restore will not use: `r`'s range is
 * unmapped, and the memory stays `lender`'s when its departure did not end
 * (or was called off), else becomes the device's spare. */
void vs_engine_premap_drop(vs_region_t *r, vs_region_t *lender);

/* Unmaps the ranges an ended departure left mapped (vs_engine_t.lent: for
 * a mapping ahead, or a head and a tail unmapped behind the next copy), if
 * any. */
void vs_engine_lent_unmap(void);
/* Unmaps [base, base + bytes), one mapping or two (the first `split`
 * bytes long): one call, or one per piece should the driver refuse it.
 * Needs no lock: the engine's thread makes it too. */
CUresult vs_engine_unmap_pieces(uintptr_t base, uint64_t split, uint64_t bytes);
/* Before mapping at [base, base + bytes) or freeing it: whatever the
 * engine let go of there is unmapped (`vs_engine_lent_unmap`,
 * `vs_retire_wait_range`). */
void vs_engine_range_unmapped(uintptr_t base, uint64_t bytes);

/* Unmaps and releases `r`'s head (`split` becomes 0). */
void vs_engine_physical_unmap_head(vs_region_t *r);

/* Unmaps all that is mapped of `r`, its head and its tail; where both are,
 * in one call left for `vs_engine_lent_unmap` (behind the next copy, within
 * this hold of the lock), the tail's and the head's memory the device's
 * spares at once (`spare`, `spare_head`; `split` becomes 0). */
void vs_engine_physical_unmap_whole(vs_region_t *r);

/* Partial restore: while evicted `r` (on the host, no head) waits for the
 * room its whole needs, maps the first `bytes` (a granule multiple, counted
 * already) as its head and copies them in on the host-to-device stream; its
 * restore then moves only the tail. 0 or a driver error (nothing mapped). */
CUresult vs_engine_restore_head(vs_region_t *r, uint64_t bytes);

/* Unmaps everything of `r` that is mapped and gives back its charge: for a
 * region that ends (freed, or its context destroyed). */
void vs_engine_physical_end(vs_region_t *r);

/* Gives back the heads evicted regions of `device` keep (each copied to its
 * host copy first): what the limit needs when nothing else can go.
 * Returns the bytes given back. */
uint64_t vs_engine_heads_release(int device);

/* `vs_engine_heads_release` on every device: the host pool is theirs
 * together, and a region keeping a head holds its host copy there, where
 * no spill takes it. */
uint64_t vs_engine_heads_release_all(void);

/* Sets, from the plan, which region of `device` keeps a head resident and
 * how much (vs_policy_stats_t.planned_partial_*): a granule multiple,
 * leaving the region a tail to stream. Not `wanted`: none does (the head
 * kept is unmapped at its region's next eviction). */
void vs_engine_keep_update(vs_engine_device_t *d, bool wanted);

/* Releases the physical memory kept for reuse (vs_engine_device_t.spare)
 * on every device: before the engine lock is let go. */
void vs_engine_spares_release(void);

/* The fillers' memory (vs_engine_device_t.filler_phys).
 * `vs_engine_filler_hold`: at the end of the departure of `r`, whose
 * `released` bytes (all of it) its unmap left as the device's spare, holds
 * that memory instead, still charged, where `r` is one of the plan's
 * fillers and none is held: true, and the caller keeps the charge.
 * `vs_engine_filler_take`: a restore needing `need` bytes takes the held
 * memory's charge as its own, where its size is `need`: true, counted.
 * `vs_engine_filler_release`: gives the held memory and its charge back
 * (the plan has no fillers any more, the limit needs room, a context ends,
 * an allocation is freed). */
bool vs_engine_filler_hold(vs_engine_device_t *d, const vs_region_t *r, uint64_t released);
/* What the held filler memory charges to the limit: its bytes while held,
 * 0 when none is held or a restore took its charge. Pure. */
static inline uint64_t vs_engine_filler_charged(const vs_engine_device_t *d)
{
    return d->filler_phys != 0 && !d->filler_given ? d->filler_bytes : 0;
}
bool vs_engine_filler_take(vs_engine_device_t *d, uint64_t need);
void vs_engine_filler_release(vs_engine_device_t *d);

/* The engine's threads (offload_retire.c, offload_arrive.c) start, fork
 * check and stop as worker.h says. */

/* ---- The arrival thread (offload_arrive.c) --------------------------------
 *
 * A restore ahead of need records its grant, copies in, content hash and
 * events in a job (`vs_arrive_open`, the engine's `arrival_open` while it
 * restores) instead of making them, and hands it over: the thread makes
 * them, in the order handed over, on the host-to-device stream. Tickets
 * count jobs from 1. Before anything needs what a job does, the engine
 * joins it: `vs_arrive_join_event` (a wait for, or a read of, an event it
 * records), `vs_arrive_join_range` (an unmap or free of its range),
 * `vs_arrive_join_all` (a copy or wait the engine makes on the
 * host-to-device stream itself, a context's end, any full engine lock).
 * `vs_arrive_open` returns NULL when no thread or job can be had: the
 * caller makes the calls; a job has room for `ops` calls, and recording
 * more is a bug. `vs_arrive_cancel` drops a job whose calls must not be
 * made (the restore failed before its hand-over). */
vs_arrival_t *vs_arrive_open(vs_engine_device_t *d, uintptr_t base, uint64_t bytes, size_t ops);
bool vs_arrive_grant(vs_arrival_t *j, CUdeviceptr at, uint64_t bytes, const CUmemAccessDesc *access, size_t count);
bool vs_arrive_copy(vs_arrival_t *j, CUdeviceptr at, const void *host, uint64_t bytes);
bool vs_arrive_hash(vs_arrival_t *j, vs_device_hasher_t *hasher, unsigned slot, CUdeviceptr at, uint64_t bytes);
bool vs_arrive_record(vs_arrival_t *j, CUevent event);
void vs_arrive_cancel(vs_arrival_t *j);
/* The engine's job under way: `vs_engine_arrival_begin` makes `j` the job
 * that records the calls of the restore of `r`; `vs_engine_arrival_take`
 * ends that (the calls are all recorded) and returns the job, for its
 * hand-over or its cancel (NULL when none was open). Engine lock held. */
static inline void vs_engine_arrival_begin(vs_arrival_t *j, const vs_region_t *r)
{
    vs_engine.arrival_open = j;
    vs_engine.arrival_for = j != NULL ? r : NULL;
}

static inline vs_arrival_t *vs_engine_arrival_take(void)
{
    vs_arrival_t *j = vs_engine.arrival_open;
    vs_engine.arrival_open = NULL;
    vs_engine.arrival_for = NULL;
    return j;
}
/* Returns the job's ticket (made here instead when no hand-off can be had). */
uint64_t vs_arrive_hand_over(vs_arrival_t *j);
uint64_t vs_arrive_ticket(const vs_arrival_t *j);
bool vs_arrive_joined(uint64_t ticket);
void vs_arrive_join(uint64_t ticket);
void vs_arrive_join_event(CUevent event);
void vs_arrive_join_range(uintptr_t base, uint64_t bytes);
void vs_arrive_join_all(void);
/* At exit, without the engine lock: as `vs_offload_retire_stop`. */
void vs_offload_arrive_stop(void);

/* ---- The engine's thread (offload_retire.c) -------------------------------
 *
 * The unmaps of ranges whose memory another range owns now (mapped ahead
 * onto a departing allocation's, `vs_engine_premap`) are made there, off
 * the application's thread: they free no memory, and nothing waits for
 * them but a map at the same range. `vs_retire_unmap` adds one to the batch
 * of this hold of the engine lock, handed over when the lock is let go
 * (`vs_retire_hand_over`, from `vs_engine_spares_release`); false when no
 * thread can be had: the caller unmaps itself. Before mapping at a range,
 * or freeing it, `vs_retire_wait_range` waits for the unmaps there;
 * `vs_retire_wait_all` for every one handed over (a context's end). */
bool vs_retire_unmap(int device, uintptr_t base, uint64_t split, uint64_t bytes,
                     const CUmemGenericAllocationHandle phys[2]);
void vs_retire_hand_over(void);
void vs_retire_wait_range(uintptr_t base, uint64_t bytes);
/* Waits for the unmaps of ranges mapped onto `phys`: a release before them
 * would leave the memory alive past its charge to the limit. */
void vs_retire_wait_phys(CUmemGenericAllocationHandle phys);
void vs_retire_wait_all(void);
/* At exit, without the engine lock: lets the thread end what it was
 * handed (for a second at most), and starts no other. */
void vs_offload_retire_stop(void);

/* The host pool's slab memory, pinned in the current context: the pin and
 * unpin the pool calls (`vs_host_pool_configure`), from a take or a give
 * the engine makes with its lock held. */
int vs_engine_pin_host(void **ptr, uint64_t bytes, void **owner);
void vs_engine_unpin_host(void *ptr, uint64_t bytes, void *owner);

/* Pins again, in the current context, the pool's slabs whose context was
 * destroyed while no other context could take them over. */
void vs_engine_host_repin_orphans(void);

#endif /* VS_OFFLOAD_DEVICE_H */

/* offload_tier.h: where an evicted region's bytes live (offload_tier.c):
 * the pinned host tier and the disk tier, copies between them and the
 * device, and copies served from host copies. Engine lock held unless said
 * (offload_internal.h).
 */
#ifndef VS_OFFLOAD_TIER_H
#define VS_OFFLOAD_TIER_H

#include "offload_internal.h"

typedef enum vs_copy_direction_e {
    VS_COPY_OUT, /* device to host copy (eviction) */
    VS_COPY_IN,  /* host copy to device (restore) */
} vs_copy_direction_t;

/* Copies bytes [from, to) of the region (to at most its size) between the
 * device and its host copy (same offsets), asynchronously on `stream`, in
 * chunks of VS_COPY_CHUNK_BYTES. */
CUresult vs_tier_copy_region(const vs_region_t *r, uint64_t from, uint64_t to, vs_copy_direction_t direction,
                             CUstream stream);

/* Room in the host pool for `bytes`, giving back kept copies when it is
 * full. 0 or -ENOSPC. */
int vs_tier_host_take(uint64_t bytes, vs_host_copy_t *out);

/* With VRAMSHIM_SPILL_DIR, moves the host copies of the evicted regions
 * predicted to be used last to disk until `need` bytes of the pool went
 * back. Returns the bytes given back; *failed is the first I/O error.
 * Lets go of the engine lock during each write: the caller must look its
 * regions up again afterwards. */
uint64_t vs_tier_spill(uint64_t need, int *failed);

/* With VRAMSHIM_SPILL_DIR, moves the host copy of `r`, which an operation
 * is about to restore, to disk: when the host pool holds little more than
 * that copy, the victims its restore needs evicted find room there, and
 * `r` comes back through the staging buffers. True when it moved. Lets go
 * of the engine lock during the write; `r` stays valid. */
bool vs_tier_spill_restoring(vs_region_t *r);

/* Ends the staging buffers when they were pinned in `ctx`, which is
 * destroyed (`alive`: about to be); they are pinned again when next needed. */
void vs_tier_ctx_forget(CUcontext ctx, bool alive);

/* Copies `r`, on disk, into its freshly mapped memory (complete on return).
 * Lets go of the engine lock during the reads; `r` stays valid (marked
 * `disk_io`), anything else must be looked up again. */
CUresult vs_tier_restore_from_disk(vs_region_t *r, vs_engine_device_t *d);

/* The region at `base` once no disk I/O moves it (waiting on
 * `vs_engine.disk_io_done`, which lets go of the engine lock), or NULL when
 * there is none (any more); and the wait until no region's disk I/O is
 * under way. */
vs_region_t *vs_engine_disk_io_wait(uintptr_t base);
void vs_engine_disk_io_drain(void);

#endif /* VS_OFFLOAD_TIER_H */

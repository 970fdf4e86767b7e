/* host_pool.h: the pinned host memory evicted allocations live in.
 *
 * Pinning is slow (about half a second per GB) and must never happen on the
 * eviction path, so the pool pins large slabs once, as it grows, and hands
 * out runs of 2 MiB blocks. An allocation's host copy is a list of extents:
 * one contiguous run when the pool is not fragmented, several otherwise.
 * The pool never pins more than its limit (`VRAMSHIM_HOST_LIMIT`).
 *
 * The pin and unpin functions are injected (the shim passes the driver's
 * `cuMemHostAlloc` and `cuMemFreeHost`; unit tests pass malloc). All calls
 * are thread-safe.
 */
#ifndef VS_HOST_POOL_H
#define VS_HOST_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "tunables.h" /* VS_HOST_SLAB_BYTES: what the pool pins at once */

#define VS_HOST_BLOCK_BYTES (2ull << 20)

typedef struct vs_host_extent_s {
    void *ptr;
    uint64_t bytes;
} vs_host_extent_t;

/* A host copy: `count` extents whose sizes add up to at least the bytes
 * asked for (whole blocks). */
typedef struct vs_host_copy_s {
    vs_host_extent_t *extents;
    uint32_t count;
    uint64_t bytes;
} vs_host_copy_t;

/* Pins `bytes` of host memory: 0 or -ENOMEM. *owner receives what the pin
 * depends on (the shim: the CUDA context it was registered in), NULL for
 * nothing; unpin gets it back with the slab. */
typedef int (*vs_host_pin_fn)(void **ptr, uint64_t bytes, void **owner);
typedef void (*vs_host_unpin_fn)(void *ptr, uint64_t bytes, void *owner);

/* Moves the pin of one slab elsewhere: its memory, and every copy in it,
 * stays where it is; *owner is updated (NULL: left unpinned for now). */
typedef void (*vs_host_repin_fn)(void *ptr, uint64_t bytes, void **owner, void *arg);

/* Sets the limit (bytes, rounded down to blocks) and the pinning functions.
 * Called once, before any take. */
void vs_host_pool_configure(uint64_t limit, vs_host_pin_fn pin, vs_host_unpin_fn unpin);

/* Takes room for `bytes`. 0, -ENOSPC (the limit would be passed), -ENOMEM
 * (pinning or bookkeeping failed). */
int vs_host_pool_take(uint64_t bytes, vs_host_copy_t *out);

/* Gives a copy's blocks back (the slabs stay pinned). Empties *copy. */
void vs_host_pool_give(vs_host_copy_t *copy);

typedef struct vs_host_pool_stats_s {
    uint64_t limit;
    uint64_t pinned; /* bytes of slabs pinned */
    uint64_t used;   /* bytes handed out */
    uint64_t slabs;
} vs_host_pool_stats_t;

void vs_host_pool_stats(vs_host_pool_stats_t *out);

/* Calls `repin` for every slab whose pin belongs to `owner` (NULL: every
 * slab left unpinned), under the pool's lock: no take or give runs
 * meanwhile. Returns how many slabs it was called for. */
size_t vs_host_pool_repin(void *owner, vs_host_repin_fn repin, void *arg);

/* How many slabs are unpinned now (cheap: no lock). */
uint64_t vs_host_pool_unpinned(void);

/* Unpins every slab (at exit, or between unit tests). Outstanding copies
 * become invalid. */
void vs_host_pool_destroy(void);

#endif /* VS_HOST_POOL_H */

/* pool_usage.h: the device memory the driver's memory pools hold, charged
 * to VRAM_LIMIT (pool_usage.c). */
#ifndef VS_POOL_USAGE_H
#define VS_POOL_USAGE_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

/* The pool an allocation on `device` comes from: `pool` itself, or the
 * device's current pool when NULL. NULL when the driver cannot say. */
CUmemoryPool vs_pool_usage_resolve(int device, CUmemoryPool pool);

/* Whether `pool`'s reserve can be read: its allocations are then charged
 * through it; otherwise each is charged its own size. */
bool vs_pool_usage_tracked(CUmemoryPool pool);

/* The bytes an allocation of `bytes` adds to what `pool` reserves: what it
 * cannot take from the memory the pool keeps freed. */
uint64_t vs_pool_usage_growth(CUmemoryPool pool, uint64_t bytes);

/* Reads what `pool` reserves and charges (or releases) the difference from
 * what was charged for it on `device`. */
void vs_pool_usage_settle(int device, CUmemoryPool pool);

/* Settles every pool seen, on every device: after a synchronization, when
 * the frees queued before it have happened. */
void vs_pool_usage_settle_all(void);

/* Gives back to the device the memory every pool seen on `device` keeps
 * freed (cuMemPoolTrimTo to 0), and settles them. True when the charge
 * went down. */
bool vs_pool_usage_trim(int device);

#endif /* VS_POOL_USAGE_H */

/* cap.h: per-device usage counters and the hard cap (`VRAMSHIM_MODE=cap`).
 *
 * Usage is everything that takes device memory: plain, pitch, async and
 * pool allocations and the physical memory behind the application's own
 * `cuMemCreate` handles. An allocation first reserves its bytes here with a
 * compare-and-swap, so concurrent allocations can never jointly pass the
 * limit; a reservation the driver then refuses is given back.
 * Managed and pinned host memory are counted apart and never capped.
 */
#ifndef VS_CAP_H
#define VS_CAP_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"

/* Supplies a device's physical memory (for percentage limits) and is
 * replaced by unit tests. Returns 0 or -errno. */
typedef int (*vs_cap_total_fn)(int device, uint64_t *bytes);

/* Installs the limits and the physical-size source. */
void vs_cap_configure(const vs_limit_t limits[VS_MAX_DEVICES], vs_cap_total_fn total_fn);

/* The device's limit in bytes (UINT64_MAX: unlimited), resolving a
 * percentage on first use. */
uint64_t vs_cap_limit(int device);

/* Takes `bytes` of `device`'s budget. 0, or -ENOMEM when that would pass the
 * limit (nothing is taken), or -EINVAL for a device out of range. */
int vs_cap_reserve(int device, uint64_t bytes);

/* Counts bytes that exist whatever the limit says (a free the driver
 * refused after the shim had already given its bytes back). */
void vs_cap_charge(int device, uint64_t bytes);

/* Gives back bytes taken by `vs_cap_reserve`. */
void vs_cap_release(int device, uint64_t bytes);

/* Counted bytes on `device` now and at peak. */
uint64_t vs_cap_used(int device);
uint64_t vs_cap_peak(int device);

/* The virtual `cuMemGetInfo`: total = min(limit, physical total),
 * free = min(total - used, physical free). */
void vs_cap_meminfo(int device, uint64_t physical_free, uint64_t physical_total, uint64_t *free_out,
                    uint64_t *total_out);

/* Managed memory and pinned host memory, counted apart. */
void vs_cap_count_managed(int64_t delta);
void vs_cap_count_host(int64_t delta);
uint64_t vs_cap_managed_bytes(void);
uint64_t vs_cap_host_bytes(void);

#endif /* VS_CAP_H */

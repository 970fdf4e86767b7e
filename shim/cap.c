/* cap.c: the hard cap (`vs_cap_reserve`) and the virtual memory figures.
 *
 * One slot per device with atomic counters: the allocation path takes no
 * lock. A percentage limit is resolved the first time the device is asked
 * about, when the driver is initialised (a device cannot be allocated on
 * before `cuInit`).
 */
#include "cap.h"

#include <errno.h>
#include <stdatomic.h>

typedef struct vs_cap_device_s {
    _Atomic uint64_t used;
    _Atomic uint64_t peak;
    /* 0 = not resolved yet; otherwise limit + 1 (UINT64_MAX stays
     * UINT64_MAX: unlimited). */
    _Atomic uint64_t resolved_limit;
} vs_cap_device_t;

static vs_cap_device_t vs_cap_devices[VS_MAX_DEVICES];
static vs_limit_t vs_cap_limits[VS_MAX_DEVICES];
static vs_cap_total_fn vs_cap_total;
static _Atomic uint64_t vs_cap_managed;
static _Atomic uint64_t vs_cap_host;

void vs_cap_configure(const vs_limit_t limits[VS_MAX_DEVICES], vs_cap_total_fn total_fn)
{
    for (int d = 0; d < VS_MAX_DEVICES; d++) {
        vs_cap_limits[d] = limits[d];
        atomic_store(&vs_cap_devices[d].resolved_limit, 0);
    }
    vs_cap_total = total_fn;
}

static uint64_t vs_cap_encode(uint64_t limit)
{
    return limit == UINT64_MAX ? UINT64_MAX : limit + 1;
}

uint64_t vs_cap_limit(int device)
{
    if (device < 0 || device >= VS_MAX_DEVICES)
        return UINT64_MAX;
    uint64_t stored = atomic_load_explicit(&vs_cap_devices[device].resolved_limit, memory_order_acquire);
    if (stored != 0)
        return stored == UINT64_MAX ? UINT64_MAX : stored - 1;

    const vs_limit_t *limit = &vs_cap_limits[device];
    uint64_t physical = 0;
    if (limit->kind == VS_LIMIT_PERCENT) {
        /* Without the device's size a percentage cannot be honoured; refuse
         * rather than run unlimited. Retried on the next call. */
        if (vs_cap_total == NULL || vs_cap_total(device, &physical) != 0)
            return 0;
    }
    uint64_t bytes = vs_config_limit_bytes(limit, physical);
    atomic_store_explicit(&vs_cap_devices[device].resolved_limit, vs_cap_encode(bytes), memory_order_release);
    return bytes;
}

int vs_cap_reserve(int device, uint64_t bytes)
{
    if (device < 0 || device >= VS_MAX_DEVICES)
        return -EINVAL;
    vs_cap_device_t *d = &vs_cap_devices[device];
    uint64_t limit = vs_cap_limit(device);
    uint64_t used = atomic_load_explicit(&d->used, memory_order_relaxed);
    do {
        if (bytes > limit || used > limit - bytes)
            return -ENOMEM;
    } while (!atomic_compare_exchange_weak_explicit(&d->used, &used, used + bytes, memory_order_relaxed,
                                                    memory_order_relaxed));
    uint64_t now = used + bytes;
    uint64_t peak = atomic_load_explicit(&d->peak, memory_order_relaxed);
    while (peak < now
           && !atomic_compare_exchange_weak_explicit(&d->peak, &peak, now, memory_order_relaxed,
                                                     memory_order_relaxed)) {
    }
    return 0;
}

void vs_cap_charge(int device, uint64_t bytes)
{
    if (device < 0 || device >= VS_MAX_DEVICES)
        return;
    atomic_fetch_add_explicit(&vs_cap_devices[device].used, bytes, memory_order_relaxed);
}

void vs_cap_release(int device, uint64_t bytes)
{
    if (device < 0 || device >= VS_MAX_DEVICES)
        return;
    vs_cap_device_t *d = &vs_cap_devices[device];
    uint64_t used = atomic_load_explicit(&d->used, memory_order_relaxed);
    /* Never wrap below zero (a peer showed "17 TB used" after one). */
    uint64_t next;
    do {
        next = used > bytes ? used - bytes : 0;
    } while (!atomic_compare_exchange_weak_explicit(&d->used, &used, next, memory_order_relaxed,
                                                    memory_order_relaxed));
}

uint64_t vs_cap_used(int device)
{
    if (device < 0 || device >= VS_MAX_DEVICES)
        return 0;
    return atomic_load_explicit(&vs_cap_devices[device].used, memory_order_relaxed);
}

uint64_t vs_cap_peak(int device)
{
    if (device < 0 || device >= VS_MAX_DEVICES)
        return 0;
    return atomic_load_explicit(&vs_cap_devices[device].peak, memory_order_relaxed);
}

void vs_cap_meminfo(int device, uint64_t physical_free, uint64_t physical_total, uint64_t *free_out,
                    uint64_t *total_out)
{
    uint64_t limit = vs_cap_limit(device);
    uint64_t total = limit < physical_total ? limit : physical_total;
    uint64_t used = vs_cap_used(device);
    uint64_t free_bytes = used < total ? total - used : 0;

    /* Never promise more than the device really has free (other processes,
     * driver overhead): what is reported is what an allocation can get. */
    if (free_bytes > physical_free)
        free_bytes = physical_free;
    *free_out = free_bytes;
    *total_out = total;
}

void vs_cap_count_managed(int64_t delta)
{
    atomic_fetch_add_explicit(&vs_cap_managed, (uint64_t)delta, memory_order_relaxed);
}

void vs_cap_count_host(int64_t delta)
{
    atomic_fetch_add_explicit(&vs_cap_host, (uint64_t)delta, memory_order_relaxed);
}

uint64_t vs_cap_managed_bytes(void)
{
    return atomic_load_explicit(&vs_cap_managed, memory_order_relaxed);
}

uint64_t vs_cap_host_bytes(void)
{
    return atomic_load_explicit(&vs_cap_host, memory_order_relaxed);
}

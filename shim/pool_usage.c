/* pool_usage.c: what the driver's memory pools hold, charged to VRAM_LIMIT.
 *
 * A pool (`cudaMallocAsync`, `cuMemAllocAsync`, `cuMemAllocFromPoolAsync`)
 * keeps freed memory mapped up to its release threshold, and reuses it;
 * PyTorch's cudaMallocAsync backend sets that threshold to the maximum. The
 * device then holds bytes the application has freed, which a count of live
 * allocations misses. So a pool's allocations are not charged one by one:
 * each device is charged what its pools reserve
 * (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`), read again after each of their
 * allocations, and before the limit refuses an allocation (or evicts for
 * it) the pools give back what they keep (`cuMemPoolTrimTo`) and are read
 * again. A free changes nothing at once: the pool may keep the memory; a
 * context synchronization (after which queued frees have run) settles
 * every pool.
 * Where the driver cannot report a pool's reserve, its allocations are
 * charged their own size, as before.
 *
 * Entry points: `vs_pool_usage_resolve`, `_tracked`, `_growth`, `_settle`,
 * `_trim`. The table is guarded by its own leaf lock.
 */
#include "pool_usage.h"

#include "cap.h"
#include "config.h"
#include "driver.h"
#include "internal.h"

#include <errno.h>
#include <pthread.h>

#define VS_POOLS_PER_DEVICE 16

typedef struct vs_pool_charge_s {
    CUmemoryPool pool;
    uint64_t charged; /* the reserve last read, charged to the device */
} vs_pool_charge_t;

static struct {
    pthread_mutex_t lock;
    vs_pool_charge_t pools[VS_MAX_DEVICES][VS_POOLS_PER_DEVICE];
} vs_pool_usage = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int vs_pool_read(CUmemoryPool pool, CUmemPool_attribute attribute, uint64_t *out)
{
    cuuint64_t value = 0;
    if (pool == NULL || VS_CALL(cuMemPoolGetAttribute, (pool, attribute, &value)) != CUDA_SUCCESS)
        return -ENOTSUP;
    *out = value;
    return 0;
}

CUmemoryPool vs_pool_usage_resolve(int device, CUmemoryPool pool)
{
    CUmemoryPool current = NULL;
    if (pool != NULL || device < 0)
        return pool;
    if (VS_CALL(cuDeviceGetMemPool, (&current, (CUdevice)device)) != CUDA_SUCCESS)
        return NULL;
    return current;
}

bool vs_pool_usage_tracked(CUmemoryPool pool)
{
    uint64_t reserved;
    return vs_pool_read(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) == 0;
}

uint64_t vs_pool_usage_growth(CUmemoryPool pool, uint64_t bytes)
{
    uint64_t reserved, used;
    if (vs_pool_read(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != 0 ||
        vs_pool_read(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) != 0)
        return bytes;
    uint64_t kept = reserved > used ? reserved - used : 0;
    return bytes > kept ? bytes - kept : 0;
}

/* The entry for `pool` on `device`, made on first sight; NULL when the
 * table is full (its pool is then not charged through here). Lock held. */
static vs_pool_charge_t *vs_pool_entry_locked(int device, CUmemoryPool pool)
{
    vs_pool_charge_t *free_slot = NULL;
    for (int i = 0; i < VS_POOLS_PER_DEVICE; i++) {
        vs_pool_charge_t *entry = &vs_pool_usage.pools[device][i];
        if (entry->pool == pool)
            return entry;
        if (entry->pool == NULL && free_slot == NULL)
            free_slot = entry;
    }
    if (free_slot != NULL) {
        free_slot->pool = pool;
        free_slot->charged = 0;
    }
    return free_slot;
}

/* Charges the change of one pool's reserve. Lock held. */
static bool vs_pool_settle_locked(int device, vs_pool_charge_t *entry)
{
    uint64_t reserved;
    if (vs_pool_read(entry->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != 0)
        return false;
    bool lower = reserved < entry->charged;
    if (reserved > entry->charged)
        vs_cap_charge(device, reserved - entry->charged);
    else if (lower)
        vs_cap_release(device, entry->charged - reserved);
    entry->charged = reserved;
    return lower;
}

void vs_pool_usage_settle(int device, CUmemoryPool pool)
{
    if (device < 0 || device >= VS_MAX_DEVICES || pool == NULL)
        return;
    pthread_mutex_lock(&vs_pool_usage.lock);
    vs_pool_charge_t *entry = vs_pool_entry_locked(device, pool);
    if (entry != NULL)
        (void)vs_pool_settle_locked(device, entry);
    pthread_mutex_unlock(&vs_pool_usage.lock);
}

void vs_pool_usage_settle_all(void)
{
    pthread_mutex_lock(&vs_pool_usage.lock);
    for (int device = 0; device < VS_MAX_DEVICES; device++)
        for (int i = 0; i < VS_POOLS_PER_DEVICE; i++)
            if (vs_pool_usage.pools[device][i].pool != NULL)
                (void)vs_pool_settle_locked(device, &vs_pool_usage.pools[device][i]);
    pthread_mutex_unlock(&vs_pool_usage.lock);
}

bool vs_pool_usage_trim(int device)
{
    bool lower = false;
    if (device < 0 || device >= VS_MAX_DEVICES)
        return false;
    pthread_mutex_lock(&vs_pool_usage.lock);
    for (int i = 0; i < VS_POOLS_PER_DEVICE; i++) {
        vs_pool_charge_t *entry = &vs_pool_usage.pools[device][i];
        if (entry->pool == NULL || entry->charged == 0)
            continue;
        (void)VS_CALL(cuMemPoolTrimTo, (entry->pool, 0));
        lower |= vs_pool_settle_locked(device, entry);
    }
    pthread_mutex_unlock(&vs_pool_usage.lock);
    return lower;
}

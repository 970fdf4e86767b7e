/* sim_memory.c: every kind of memory of the simulated driver.
 *
 * Device memory lives at real addresses: `sim_memory_init` (called by
 * `cuInit`) reserves one PROT_NONE range per device (`SIMCUDA_VA_SIZE`,
 * default 64G). Allocations take address space from their device's range and
 * map real pages there; freeing maps PROT_NONE back over the hole, so a
 * touch of freed or unmapped device memory faults as a bad GPU access
 * would. Address space is handed out by a bump pointer and reused only once
 * the range is exhausted, so use-after-free keeps faulting.
 *
 *   cuMemAlloc*, pools, managed   anonymous MAP_SHARED pages, read-write
 *   cuMemCreate                   a memfd per handle; cuMemMap maps it
 *                                 PROT_NONE, cuMemSetAccess grants access
 *   cuMemCreate, host location    the same, but host memory: charged to no
 *                                 device, classified as pinned host memory
 *   cuMemHostAlloc/Register       ordinary host pages, listed as pinned
 *
 * Every kind of device allocation is charged against the device's
 * `total_bytes` (`sim_device_charge`), so `CUDA_ERROR_OUT_OF_MEMORY` and
 * `cuMemGetInfo` agree with what is live. Main entry points: the `cuMem*`
 * functions, `sim_mem_classify` (for copies) and
 * `sim_mem_host_located_bytes` (for the kernels' modeled cost).
 *
 * Locking: one rwlock, `mem_lock`, guards the three block maps, the handle
 * table and the address-space allocators. Lookups take it shared; mmap calls
 * that change what an address means are made under it held exclusively, so
 * a reader never sees a block whose pages are not there yet.
 */
#include "sim_internal.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#define SIM_GRANULARITY ((size_t)2 << 20) /* VMM granularity, as on H100 */
/* cuMemRelease of a handle still mapped: it returns at once (0.08-0.10 us
 * on an H200, bench/gpu/host_costs) and the unmap that frees the memory
 * pays for the release. */
#define SIM_RELEASE_MAPPED_NS 100
#define SIM_PITCH_ALIGNMENT 512
#define SIM_DEFAULT_VA_SIZE (64ull << 30)
/* The host's only NUMA node, as CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID reports. */
#define SIM_HOST_NUMA_NODE 0

/* Whether host-located memory was ever made: until it is, a launch's
 * arguments are not searched for it. */
static atomic_bool host_located_made;

/* ------------------------------------------------------------------------
 * Data structures
 * ------------------------------------------------------------------------ */

typedef enum mem_kind_e {
    MEM_DEVICE,          /* cuMemAlloc, cuMemAllocPitch */
    MEM_POOL,            /* cuMemAllocAsync, cuMemAllocFromPoolAsync */
    MEM_MANAGED,         /* cuMemAllocManaged */
    MEM_RESERVATION,     /* cuMemAddressReserve */
    MEM_MAPPING,         /* cuMemMap of a handle into a reservation */
    MEM_HOST_ALLOC,      /* cuMemHostAlloc, cuMemAllocHost */
    MEM_HOST_REGISTERED, /* cuMemHostRegister */
} mem_kind_t;

/* Physical memory of one `cuMemCreate`. It lives while the user holds a
 * handle reference or a mapping uses it (`cuMemRelease` of a mapped handle
 * is legal). Host-located memory (`CU_MEM_LOCATION_TYPE_HOST`,
 * `..._HOST_NUMA`) has no device and is charged to none. */
typedef struct mem_phys_s {
    UT_hash_handle hh;
    CUmemGenericAllocationHandle handle; /* key: the struct's address */
    int fd;
    size_t size;
    sim_device_t *device; /* NULL when host-located */
    bool host_located;
    CUmemAllocationProp prop;
    int handle_refs;
    int map_refs;
    bool release_owed; /* released while mapped: the last unmap pays for the release */
    unsigned long long block_id;
} mem_phys_t;

typedef struct mem_block_s {
    uintptr_t base;
    size_t size;   /* what the caller asked for */
    size_t span;   /* pages really mapped (or reserved) from `base` */
    size_t va_len; /* address space taken: span plus a guard page */
    mem_kind_t kind;
    sim_device_t *device; /* NULL for host memory */
    CUcontext ctx;        /* NULL for VMM memory */
    unsigned long long buffer_id;
    unsigned host_flags;
    struct CUmemPoolHandle_st *pool;
    bool free_pending; /* cuMemFreeAsync queued, not yet run */
    size_t charged;    /* bytes charged to the device: `size` when made */
    struct mem_block_s *next_cached; /* a freed pool block kept by its pool */
    /* A freed pool block: the stream its free was queued on (a reference),
     * whether the stream has passed the free, and the allocation's
     * generation, which a reuse before the free ran moves on so that the
     * queued free step knows it no longer applies. */
    struct CUstream_st *free_stream;
    bool free_done;
    unsigned generation;
    /* MEM_MAPPING */
    mem_phys_t *phys;
    size_t offset;
    struct mem_block_s *reservation;
    unsigned char access[SIM_MAX_DEVICES]; /* CUmemAccess_flags per device */
    unsigned char host_access; /* the CPU's, host-located memory only (HOST_NUMA grants) */
    /* MEM_RESERVATION */
    size_t mapping_count;
} mem_block_t;

/* Blocks sorted by base, not overlapping: lookup of the block owning any
 * interior address is a binary search. */
typedef struct mem_map_s {
    mem_block_t **items;
    size_t count, capacity;
} mem_map_t;

typedef struct va_hole_s {
    uintptr_t start, end;
} va_hole_t;

/* One device's address range: [base, base+next) has been handed out at
 * least once; `holes` are freed ranges (sorted, coalesced), reused only when
 * the bump pointer reaches the end. */
typedef struct va_space_s {
    uintptr_t base, size, next;
    va_hole_t *holes;
    size_t hole_count, hole_capacity;
} va_space_t;

/* A memory pool keeps freed blocks mapped (and counted as used device
 * memory) up to its release threshold, and reuses them for its later
 * allocations, as the stream-ordered allocator documents: a block freed on
 * a stream is reused by that stream's next allocations at once, before the
 * stream has reached the free (stream order keeps them apart); by another
 * stream only once the free has run, and only while
 * CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC is set. (The real allocator may
 * also follow event dependencies or insert them; simcuda never does, which
 * the documentation allows: reuse is the allocator's choice.) Only blocks
 * whose free has run are released (threshold, cuMemPoolTrimTo). Guarded by
 * mem_lock. */
struct CUmemPoolHandle_st {
    sim_device_t *device;
    CUmemPoolProps props;
    bool is_default;
    bool destroyed; /* cuMemPoolDestroy called: gone once nothing is outstanding */
    cuuint64_t release_threshold;
    int reuse_follow_event_dependencies, reuse_allow_opportunistic, reuse_allow_internal_dependencies;
    cuuint64_t reserved, reserved_high, used, used_high; /* in mapped bytes (spans) */
    mem_block_t *cached; /* freed blocks (free queued or run), newest first */
    struct CUmemPoolHandle_st *next_created; /* the list of created pools */
};

static pthread_rwlock_t mem_lock = PTHREAD_RWLOCK_INITIALIZER;
static mem_map_t device_blocks; /* device, pool, managed, reservations */
static mem_map_t mappings;      /* VMM mappings inside reservations */
static mem_map_t host_blocks;   /* pinned and registered host memory */
static mem_phys_t *phys_table;
static va_space_t va_spaces[SIM_MAX_DEVICES];
static struct CUmemPoolHandle_st default_pools[SIM_MAX_DEVICES];
static struct CUmemPoolHandle_st *current_pools[SIM_MAX_DEVICES]; /* cuDeviceSetMemPool */
static struct CUmemPoolHandle_st *created_pools;                  /* cuMemPoolCreate, live */
static _Atomic unsigned long long next_buffer_id = 1;
static size_t page_size;

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

static uintptr_t align_up(uintptr_t value, uintptr_t alignment)
{
    return (value + alignment - 1) & ~(alignment - 1);
}

static uintptr_t block_end(const mem_block_t *block)
{
    return block->base + block->span;
}

/* Index of the last block whose base is <= address, or -1. */
static ptrdiff_t map_floor(const mem_map_t *map, uintptr_t address)
{
    ptrdiff_t low = 0, high = (ptrdiff_t)map->count - 1, found = -1;
    while (low <= high) {
        ptrdiff_t middle = low + (high - low) / 2;
        if (map->items[middle]->base <= address) {
            found = middle;
            low = middle + 1;
        } else {
            high = middle - 1;
        }
    }
    return found;
}

static mem_block_t *map_find(const mem_map_t *map, uintptr_t address)
{
    ptrdiff_t index = map_floor(map, address);
    if (index < 0)
        return NULL;
    mem_block_t *block = map->items[index];
    return address < block_end(block) ? block : NULL;
}

/* True when some block overlaps [start, end). */
static bool map_overlaps(const mem_map_t *map, uintptr_t start, uintptr_t end)
{
    ptrdiff_t index = map_floor(map, end - 1);
    return index >= 0 && block_end(map->items[index]) > start;
}

static int map_insert(mem_map_t *map, mem_block_t *block)
{
    if (map->count == map->capacity) {
        size_t capacity = map->capacity ? map->capacity * 2 : 64;
        mem_block_t **grown = realloc(map->items, capacity * sizeof *grown);
        if (grown == NULL)
            return -ENOMEM;
        map->items = grown;
        map->capacity = capacity;
    }
    size_t index = (size_t)(map_floor(map, block->base) + 1);
    memmove(&map->items[index + 1], &map->items[index], (map->count - index) * sizeof *map->items);
    map->items[index] = block;
    map->count++;
    return 0;
}

static void map_remove(mem_map_t *map, mem_block_t *block)
{
    /* Whatever a kernel cached about this range is stale now. */
    atomic_fetch_add_explicit(&sim_access_generation, 1, memory_order_release);
    ptrdiff_t index = map_floor(map, block->base);
    if (index < 0 || map->items[index] != block)
        return;
    memmove(&map->items[index], &map->items[index + 1], (map->count - (size_t)index - 1) * sizeof *map->items);
    map->count--;
}

/* ------------------------------------------------------------------------
 * Address space
 * ------------------------------------------------------------------------ */

static int va_add_hole(va_space_t *space, uintptr_t start, uintptr_t end)
{
    if (start >= end)
        return 0;
    size_t index = 0;
    while (index < space->hole_count && space->holes[index].start < start)
        index++;
    /* Coalesce with the neighbours. */
    bool merge_left = index > 0 && space->holes[index - 1].end == start;
    bool merge_right = index < space->hole_count && space->holes[index].start == end;
    if (merge_left && merge_right) {
        space->holes[index - 1].end = space->holes[index].end;
        memmove(&space->holes[index], &space->holes[index + 1], (space->hole_count - index - 1) * sizeof(va_hole_t));
        space->hole_count--;
        return 0;
    }
    if (merge_left) {
        space->holes[index - 1].end = end;
        return 0;
    }
    if (merge_right) {
        space->holes[index].start = start;
        return 0;
    }
    if (space->hole_count == space->hole_capacity) {
        size_t capacity = space->hole_capacity ? space->hole_capacity * 2 : 64;
        va_hole_t *grown = realloc(space->holes, capacity * sizeof *grown);
        if (grown == NULL)
            return -ENOMEM;
        space->holes = grown;
        space->hole_capacity = capacity;
    }
    memmove(&space->holes[index + 1], &space->holes[index], (space->hole_count - index) * sizeof(va_hole_t));
    space->holes[index] = (va_hole_t){start, end};
    space->hole_count++;
    return 0;
}

/* Carves [start, start+len) out of hole `index`. */
static int va_take_from_hole(va_space_t *space, size_t index, uintptr_t start, size_t len)
{
    va_hole_t hole = space->holes[index];
    memmove(&space->holes[index], &space->holes[index + 1], (space->hole_count - index - 1) * sizeof(va_hole_t));
    space->hole_count--;
    if (va_add_hole(space, hole.start, start) != 0 || va_add_hole(space, start + len, hole.end) != 0)
        return -ENOMEM;
    return 0;
}

/* Hands out `len` bytes aligned to `alignment`, at `hint` when that range
 * is free. Caller holds `mem_lock` exclusively. */
static int va_alloc(va_space_t *space, size_t len, size_t alignment, uintptr_t hint, uintptr_t *out)
{
    uintptr_t limit = space->base + space->size;
    uintptr_t frontier = space->base + space->next;
    if (hint != 0 && hint % alignment == 0 && hint >= space->base && hint + len <= limit && hint + len > hint) {
        if (hint >= frontier) {
            if (va_add_hole(space, frontier, hint) != 0)
                return -ENOMEM;
            space->next = hint + len - space->base;
            *out = hint;
            return 0;
        }
        for (size_t i = 0; i < space->hole_count; i++) {
            if (space->holes[i].start <= hint && hint + len <= space->holes[i].end) {
                *out = hint;
                return va_take_from_hole(space, i, hint, len);
            }
        }
    }
    uintptr_t start = align_up(frontier, alignment);
    if (start + len <= limit && start + len > start) {
        if (va_add_hole(space, frontier, start) != 0)
            return -ENOMEM;
        space->next = start + len - space->base;
        *out = start;
        return 0;
    }
    /* The range is exhausted: reuse freed address space, first fit. */
    for (size_t i = 0; i < space->hole_count; i++) {
        start = align_up(space->holes[i].start, alignment);
        if (start + len <= space->holes[i].end && start + len > start) {
            *out = start;
            return va_take_from_hole(space, i, start, len);
        }
    }
    return -ENOMEM;
}

static void va_free(va_space_t *space, uintptr_t start, size_t len)
{
    /* On allocation failure the range is simply never reused. */
    (void)va_add_hole(space, start, start + len);
}

static va_space_t *va_space_of(uintptr_t address)
{
    for (int i = 0; i < sim_device_count; i++) {
        va_space_t *space = &va_spaces[i];
        if (address >= space->base && address - space->base < space->size)
            return space;
    }
    return NULL;
}

/* Maps inaccessible, unbacked pages over [base, base+len): the range stays
 * reserved, touching it faults, and the pages that were there are gone. */
static void map_reserved(uintptr_t base, size_t len)
{
    void *result = mmap((void *)base, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (result == MAP_FAILED)
        fprintf(stderr, "simcuda: cannot re-reserve %#lx+%zu: %s\n", (unsigned long)base, len, strerror(errno));
}

int sim_memory_init(void)
{
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < SIM_MAX_DEVICES; i++) {
        default_pools[i].device = i < sim_device_count ? &sim_devices[i] : NULL;
        default_pools[i].is_default = true;
        default_pools[i].props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        default_pools[i].props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        default_pools[i].props.location.id = i;
        current_pools[i] = &default_pools[i];
        default_pools[i].reuse_follow_event_dependencies = 1;
        default_pools[i].reuse_allow_opportunistic = 1;
        default_pools[i].reuse_allow_internal_dependencies = 1;
    }
    if (sim_device_count == 0)
        return 0;
    uint64_t per_device = align_up(sim_env_size("SIMCUDA_VA_SIZE", SIM_DEFAULT_VA_SIZE), SIM_GRANULARITY);
    if (per_device < SIM_GRANULARITY)
        per_device = SIM_GRANULARITY;
    size_t total = (size_t)per_device * (size_t)sim_device_count + SIM_GRANULARITY;
    void *range = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (range == MAP_FAILED) {
        fprintf(stderr, "simcuda: cannot reserve %zu bytes of address space for device memory (SIMCUDA_VA_SIZE): %s\n",
                total, strerror(errno));
        return -ENOMEM;
    }
    uintptr_t base = align_up((uintptr_t)range, SIM_GRANULARITY);
    for (int i = 0; i < sim_device_count; i++) {
        sim_devices[i].va_base = base + (uintptr_t)per_device * (uintptr_t)i;
        sim_devices[i].va_size = (uintptr_t)per_device;
        va_spaces[i] = (va_space_t){.base = sim_devices[i].va_base, .size = sim_devices[i].va_size};
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Capacity accounting
 * ------------------------------------------------------------------------ */

static void peak_update(sim_device_t *device, uint64_t used)
{
    uint64_t peak = atomic_load_explicit(&device->peak_bytes, memory_order_relaxed);
    while (used > peak && !atomic_compare_exchange_weak(&device->peak_bytes, &peak, used))
        ;
}

void sim_device_account(sim_device_t *device, int64_t delta_bytes)
{
    uint64_t used = atomic_fetch_add(&device->used_bytes, (uint64_t)delta_bytes) + (uint64_t)delta_bytes;
    if (delta_bytes > 0)
        peak_update(device, used);
}

int sim_device_charge(sim_device_t *device, uint64_t bytes)
{
    uint64_t used = atomic_load(&device->used_bytes);
    do {
        if (bytes > device->total_bytes || used > device->total_bytes - bytes)
            return -ENOMEM;
    } while (!atomic_compare_exchange_weak(&device->used_bytes, &used, used + bytes));
    peak_update(device, used + bytes);
    return 0;
}

/* ------------------------------------------------------------------------
 * Device allocations (cuMemAlloc, pitch, pools, managed)
 * ------------------------------------------------------------------------ */

static void pool_note_highs(struct CUmemPoolHandle_st *pool)
{
    if (pool->reserved > pool->reserved_high)
        pool->reserved_high = pool->reserved;
    if (pool->used > pool->used_high)
        pool->used_high = pool->used;
}

/* Whether an allocation on `stream` may take `block`, freed into its pool
 * (the rules above the pool's struct). */
static bool pool_block_reusable(const struct CUmemPoolHandle_st *pool, const mem_block_t *block,
                                const struct CUstream_st *stream)
{
    return block->free_stream == stream || (block->free_done && pool->reuse_allow_opportunistic);
}

/* A freed block the pool keeps that fits `size` without wasting more than
 * its own size and that `stream` may reuse: taken out of the cache and made
 * live again (mem_lock held for writing). NULL when none fits. The stream
 * reference the block held is handed back in *drop, for the caller to let
 * go once the lock is. */
static mem_block_t *pool_reuse_locked(struct CUmemPoolHandle_st *pool, size_t size, CUcontext ctx,
                                      const struct CUstream_st *stream, struct CUstream_st **drop)
{
    size_t span = align_up(size, page_size);
    *drop = NULL;
    for (mem_block_t **at = &pool->cached; *at != NULL; at = &(*at)->next_cached) {
        mem_block_t *block = *at;
        if (block->span < span || block->span / 2 > span || !pool_block_reusable(pool, block, stream))
            continue;
        /* A block whose free has not run is still in the map: its queued
         * free step sees the new generation and leaves it alone. */
        if (block->free_done && map_insert(&device_blocks, block) != 0)
            return NULL;
        *at = block->next_cached;
        block->next_cached = NULL;
        block->size = size;
        block->ctx = ctx;
        block->free_pending = false;
        block->free_done = false;
        block->generation++;
        *drop = block->free_stream;
        block->free_stream = NULL;
        block->buffer_id = atomic_fetch_add(&next_buffer_id, 1);
        pool->used += block->span;
        pool_note_highs(pool);
        return block;
    }
    return NULL;
}

/* Takes the oldest cached blocks whose free has run out of the pool until
 * what it reserves is at most `keep` (mem_lock held for writing); returns
 * them, linked, for release_all once the lock is let go. */
static mem_block_t *pool_trim_locked(struct CUmemPoolHandle_st *pool, cuuint64_t keep)
{
    mem_block_t *released = NULL;
    while (pool->reserved > keep) {
        /* The oldest is the last. */
        mem_block_t **oldest = NULL;
        for (mem_block_t **at = &pool->cached; *at != NULL; at = &(*at)->next_cached)
            if ((*at)->free_done)
                oldest = at;
        if (oldest == NULL)
            break;
        mem_block_t *block = *oldest;
        *oldest = block->next_cached;
        pool->reserved -= block->span;
        block->next_cached = released;
        released = block;
    }
    return released;
}

/* A destroyed pool goes once it has nothing outstanding: no allocation in
 * use, no free still queued. Returns it unlinked (for free() once the lock
 * is let go, after release_all of what it kept) or NULL. mem_lock held for
 * writing. */
static struct CUmemPoolHandle_st *pool_retire_locked(struct CUmemPoolHandle_st *pool, mem_block_t **released)
{
    if (!pool->destroyed || pool->used != 0)
        return NULL;
    for (mem_block_t *block = pool->cached; block != NULL; block = block->next_cached)
        if (!block->free_done)
            return NULL;
    mem_block_t *rest = pool_trim_locked(pool, 0);
    mem_block_t **tail = released;
    while (*tail != NULL)
        tail = &(*tail)->next_cached;
    *tail = rest;
    return pool;
}

static void device_release(mem_block_t *block);

static void release_all(mem_block_t *list)
{
    while (list != NULL) {
        mem_block_t *next = list->next_cached;
        list->next_cached = NULL;
        if (list->free_stream != NULL)
            sim_stream_unref(list->free_stream);
        list->free_stream = NULL;
        device_release(list);
        list = next;
    }
}

/* Releases the oldest blocks `pool` keeps until it reserves at most `keep`;
 * true when any went. */
static bool pool_trim(struct CUmemPoolHandle_st *pool, cuuint64_t keep)
{
    pthread_rwlock_wrlock(&mem_lock);
    mem_block_t *released = pool_trim_locked(pool, keep);
    pthread_rwlock_unlock(&mem_lock);
    release_all(released);
    return released != NULL;
}

/* A pool allocation freed at once (`cuMemFree`, already out of
 * device_blocks): the pool keeps it up to its release threshold. */
static void pool_give_back(mem_block_t *block)
{
    struct CUmemPoolHandle_st *pool = block->pool;
    pthread_rwlock_wrlock(&mem_lock);
    pool->used -= block->span;
    block->free_done = true;
    block->next_cached = pool->cached;
    pool->cached = block;
    mem_block_t *released = pool_trim_locked(pool, pool->release_threshold);
    struct CUmemPoolHandle_st *gone = pool_retire_locked(pool, &released);
    pthread_rwlock_unlock(&mem_lock);
    release_all(released);
    free(gone);
}

static CUresult device_alloc(sim_device_t *device, CUcontext ctx, size_t size, mem_kind_t kind,
                             struct CUmemPoolHandle_st *pool, const struct CUstream_st *stream, CUdeviceptr *out)
{
    if (pool != NULL && out != NULL && size != 0) {
        struct CUstream_st *drop = NULL;
        pthread_rwlock_wrlock(&mem_lock);
        mem_block_t *reused = pool_reuse_locked(pool, size, ctx, stream, &drop);
        bool over_max = reused == NULL && pool->props.maxSize != 0
                        && pool->reserved + align_up(size, page_size) > pool->props.maxSize;
        pthread_rwlock_unlock(&mem_lock);
        if (drop != NULL)
            sim_stream_unref(drop);
        if (reused != NULL) {
            *out = (CUdeviceptr)reused->base;
            return CUDA_SUCCESS;
        }
        if (over_max) /* the pool's CUmemPoolProps::maxSize */
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (out == NULL || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_device_charge(device, size) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    mem_block_t *block = calloc(1, sizeof *block);
    if (block == NULL)
        goto fail_uncharge;
    block->size = size;
    block->charged = size;
    block->span = align_up(size, page_size);
    if (block->span < size)
        goto fail_free;
    /* A guard page after each allocation makes overruns fault. */
    block->va_len = block->span + page_size;
    block->kind = kind;
    block->device = device;
    block->ctx = ctx;
    block->pool = pool;
    block->buffer_id = atomic_fetch_add(&next_buffer_id, 1);
    size_t alignment = size >= SIM_GRANULARITY ? SIM_GRANULARITY : page_size;

    pthread_rwlock_wrlock(&mem_lock);
    va_space_t *space = &va_spaces[device->ordinal];
    if (va_alloc(space, block->va_len, alignment, 0, &block->base) != 0)
        goto fail_unlock;
    void *pages = mmap((void *)block->base, block->span, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED,
                       -1, 0);
    if (pages == MAP_FAILED) {
        va_free(space, block->base, block->va_len);
        goto fail_unlock;
    }
    if (map_insert(&device_blocks, block) != 0) {
        map_reserved(block->base, block->span);
        va_free(space, block->base, block->va_len);
        goto fail_unlock;
    }
    if (pool != NULL) {
        pool->reserved += block->span;
        pool->used += block->span;
        pool_note_highs(pool);
    }
    pthread_rwlock_unlock(&mem_lock);
    *out = (CUdeviceptr)block->base;
    return CUDA_SUCCESS;

fail_unlock:
    pthread_rwlock_unlock(&mem_lock);
fail_free:
    free(block);
fail_uncharge:
    sim_device_account(device, -(int64_t)size);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Unmaps a block already removed from its map, returns its address space
 * and capacity, frees it. */
static void device_release(mem_block_t *block)
{
    pthread_rwlock_wrlock(&mem_lock);
    map_reserved(block->base, block->span);
    va_free(&va_spaces[block->device->ordinal], block->base, block->va_len);
    pthread_rwlock_unlock(&mem_lock);
    sim_device_account(block->device, -(int64_t)block->charged);
    free(block);
}

static bool is_device_allocation(const mem_block_t *block)
{
    return block->kind == MEM_DEVICE || block->kind == MEM_POOL || block->kind == MEM_MANAGED;
}

/* Removes and returns the allocation starting exactly at `address`. */
static mem_block_t *device_detach(uintptr_t address)
{
    pthread_rwlock_wrlock(&mem_lock);
    mem_block_t *block = map_find(&device_blocks, address);
    if (block == NULL || block->base != address || !is_device_allocation(block) || block->free_pending)
        block = NULL;
    else
        map_remove(&device_blocks, block);
    pthread_rwlock_unlock(&mem_lock);
    return block;
}

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    CUresult entry = SIM_ENTER(cuMemAlloc_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    result = sim_capture_check_unsafe_call();
    if (result != CUDA_SUCCESS)
        return result;
    return device_alloc(ctx->device, ctx, bytesize, MEM_DEVICE, NULL, NULL, dptr);
}

SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                       unsigned int ElementSizeBytes)
{
    CUresult entry = SIM_ENTER(cuMemAllocPitch_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    if (dptr == NULL || pPitch == NULL || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = align_up(WidthInBytes, SIM_PITCH_ALIGNMENT);
    if (pitch < WidthInBytes || Height > SIZE_MAX / pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    result = sim_capture_check_unsafe_call();
    if (result != CUDA_SUCCESS)
        return result;
    result = device_alloc(ctx->device, ctx, pitch * Height, MEM_DEVICE, NULL, NULL, dptr);
    if (result == CUDA_SUCCESS)
        *pPitch = pitch;
    return result;
}

SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuMemAllocManaged, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    result = sim_capture_check_unsafe_call();
    if (result != CUDA_SUCCESS)
        return result;
    return device_alloc(ctx->device, ctx, bytesize, MEM_MANAGED, NULL, NULL, dptr);
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult entry = SIM_ENTER(cuMemFree_v2, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (dptr == 0)
        return CUDA_SUCCESS;
    CUresult result = sim_capture_check_unsafe_call();
    if (result != CUDA_SUCCESS)
        return result;
    pthread_rwlock_rdlock(&mem_lock);
    mem_block_t *block = map_find(&device_blocks, (uintptr_t)dptr);
    CUcontext ctx = block != NULL && block->base == dptr && is_device_allocation(block) ? block->ctx : NULL;
    pthread_rwlock_unlock(&mem_lock);
    if (ctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    /* Like the real driver, freeing waits for the context's work, which may
     * still be using the memory. */
    (void)sim_exec_ctx_synchronize(ctx);
    block = device_detach((uintptr_t)dptr);
    if (block == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (block->pool != NULL)
        pool_give_back(block);
    else
        device_release(block);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    CUresult entry = SIM_ENTER(cuMemGetInfo_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    if (free_bytes == NULL || total_bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    sim_device_t *device = ctx->device;
    uint64_t used = atomic_load(&device->used_bytes);
    *total_bytes = (size_t)device->total_bytes;
    *free_bytes = (size_t)(used < device->total_bytes ? device->total_bytes - used : 0);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Stream-ordered allocation
 * ------------------------------------------------------------------------ */

struct CUmemPoolHandle_st *sim_memory_default_pool(sim_device_t *device)
{
    return &default_pools[device->ordinal];
}

/* A default pool, or a created pool not destroyed. */
static bool pool_valid(CUmemoryPool pool)
{
    for (int i = 0; i < sim_device_count; i++)
        if (pool == &default_pools[i])
            return true;
    bool found = false;
    pthread_rwlock_rdlock(&mem_lock);
    for (struct CUmemPoolHandle_st *p = created_pools; p != NULL && !found; p = p->next_created)
        found = p == pool && !p->destroyed;
    pthread_rwlock_unlock(&mem_lock);
    return found;
}

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDeviceGetDefaultMemPool, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    if (pool_out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pool_out = sim_memory_default_pool(device);
    return CUDA_SUCCESS;
}

/* The pool last given to cuDeviceSetMemPool, or the default one. */
SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CUresult entry = SIM_ENTER(cuDeviceGetMemPool, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return result;
    if (pool == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_rdlock(&mem_lock);
    *pool = current_pools[device->ordinal];
    pthread_rwlock_unlock(&mem_lock);
    return CUDA_SUCCESS;
}

/* The pool must be local to the device (cuda.h): CUDA_ERROR_INVALID_VALUE
 * otherwise. */
SIM_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    CUresult entry = SIM_ENTER(cuDeviceSetMemPool, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_device_t *device;
    CUresult result = sim_device_get(dev, &device);
    if (result != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    if (!pool_valid(pool) || pool->device != device)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_wrlock(&mem_lock);
    current_pools[device->ordinal] = pool;
    pthread_rwlock_unlock(&mem_lock);
    return CUDA_SUCCESS;
}

static bool bytes_all_zero(const unsigned char *bytes, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (bytes[i] != 0)
            return false;
    return true;
}

/* Device-located pools, with or without POSIX file descriptor export. A
 * host-located pool is CUDA_ERROR_NOT_SUPPORTED, as on a device that
 * reports no CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED (simcuda
 * reports none); the checks cuda.h documents for them come first. */
SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool_out, const CUmemPoolProps *props)
{
    CUresult entry = SIM_ENTER(cuMemPoolCreate, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pool_out == NULL || props == NULL || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED
        || props->win32SecurityAttributes != NULL || !bytes_all_zero(props->reserved, sizeof props->reserved))
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned known_handles = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_WIN32
                                   | CU_MEM_HANDLE_TYPE_WIN32_KMT | CU_MEM_HANDLE_TYPE_FABRIC;
    if ((props->handleTypes & ~known_handles) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    switch (props->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        break;
    case CU_MEM_LOCATION_TYPE_HOST:
        return props->handleTypes != CU_MEM_HANDLE_TYPE_NONE ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        return CUDA_ERROR_NOT_SUPPORTED;
    default: /* CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT and unknown types */
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (props->location.id < 0 || props->location.id >= sim_device_count)
        return CUDA_ERROR_INVALID_VALUE;
    /* What CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES reports. */
    if ((props->handleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct CUmemPoolHandle_st *pool = calloc(1, sizeof *pool);
    if (pool == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pool->device = &sim_devices[props->location.id];
    pool->props = *props;
    /* A created pool starts with the default pool's reuse policy. */
    pool->reuse_follow_event_dependencies = 1;
    pool->reuse_allow_opportunistic = 1;
    pool->reuse_allow_internal_dependencies = 1;
    pthread_rwlock_wrlock(&mem_lock);
    pool->next_created = created_pools;
    created_pools = pool;
    pthread_rwlock_unlock(&mem_lock);
    *pool_out = pool;
    return CUDA_SUCCESS;
}

/* A default pool cannot be destroyed. A created one stops being a valid
 * handle at once; its memory goes once nothing from it is outstanding. */
SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    CUresult entry = SIM_ENTER(cuMemPoolDestroy, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!pool_valid(pool) || pool->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    mem_block_t *released = NULL;
    pthread_rwlock_wrlock(&mem_lock);
    for (struct CUmemPoolHandle_st **at = &created_pools; *at != NULL; at = &(*at)->next_created)
        if (*at == pool) {
            *at = pool->next_created;
            break;
        }
    pool->destroyed = true;
    int ordinal = pool->device->ordinal;
    if (current_pools[ordinal] == pool)
        current_pools[ordinal] = &default_pools[ordinal];
    released = pool_trim_locked(pool, 0);
    struct CUmemPoolHandle_st *gone = pool_retire_locked(pool, &released);
    pthread_rwlock_unlock(&mem_lock);
    release_all(released);
    free(gone);
    return CUDA_SUCCESS;
}

/* Releases what the pool keeps freed until it reserves at most
 * `minBytesToKeep`; memory in use stays. */
SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    CUresult entry = SIM_ENTER(cuMemPoolTrimTo, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!pool_valid(pool))
        return CUDA_ERROR_INVALID_VALUE;
    (void)pool_trim(pool, minBytesToKeep);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    CUresult entry = SIM_ENTER(cuMemPoolSetAttribute, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!pool_valid(pool) || value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result = CUDA_SUCCESS;
    pthread_rwlock_wrlock(&mem_lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        pool->reuse_follow_event_dependencies = *(int *)value != 0;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        pool->reuse_allow_opportunistic = *(int *)value != 0;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        pool->reuse_allow_internal_dependencies = *(int *)value != 0;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        /* Takes effect at the next release: the memory is kept until then. */
        pool->release_threshold = *(cuuint64_t *)value;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        /* Only a reset to zero is allowed: the mark drops to the current. */
        if (*(cuuint64_t *)value != 0)
            result = CUDA_ERROR_INVALID_VALUE;
        else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
            pool->reserved_high = pool->reserved;
        else
            pool->used_high = pool->used;
        break;
    default: /* the current figures are read-only */
        result = CUDA_ERROR_INVALID_VALUE;
        break;
    }
    pthread_rwlock_unlock(&mem_lock);
    return result;
}

SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    CUresult entry = SIM_ENTER(cuMemPoolGetAttribute, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!pool_valid(pool) || value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result = CUDA_SUCCESS;
    pthread_rwlock_rdlock(&mem_lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        *(int *)value = pool->reuse_follow_event_dependencies;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        *(int *)value = pool->reuse_allow_opportunistic;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = pool->reuse_allow_internal_dependencies;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        *(cuuint64_t *)value = pool->release_threshold;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
        *(cuuint64_t *)value = pool->reserved;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        *(cuuint64_t *)value = pool->reserved_high;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        *(cuuint64_t *)value = pool->used;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        *(cuuint64_t *)value = pool->used_high;
        break;
    default:
        result = CUDA_ERROR_INVALID_VALUE;
        break;
    }
    pthread_rwlock_unlock(&mem_lock);
    return result;
}

/* Allocation is immediate (the address is valid at once, the memory usable
 * in stream order as the real driver promises). Without a pool, from the
 * current pool of the stream's device. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream, bool per_thread)
{
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    struct CUstream_st *stream = sim_stream_resolve(hStream, per_thread, &result);
    if (stream == NULL)
        return result;
    if (pool == NULL) {
        pthread_rwlock_rdlock(&mem_lock);
        pool = current_pools[sim_stream_ctx(stream)->device->ordinal];
        pthread_rwlock_unlock(&mem_lock);
    } else if (!pool_valid(pool)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    result = device_alloc(pool->device, ctx, bytesize, MEM_POOL, pool, stream, dptr);
    if (result == CUDA_ERROR_OUT_OF_MEMORY && bytesize != 0) {
        /* The pool gives back what it keeps before the device says no. */
        if (pool_trim(pool, 0))
            result = device_alloc(pool->device, ctx, bytesize, MEM_POOL, pool, stream, dptr);
    }
    return result;
}

SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuMemAllocAsync, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return alloc_async(dptr, bytesize, NULL, hStream, false);
}

SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuMemAllocAsync_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return alloc_async(dptr, bytesize, NULL, hStream, true);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuMemAllocFromPoolAsync, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pool == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream, false);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                 CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuMemAllocFromPoolAsync_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pool == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream, true);
}

typedef struct free_step_s {
    mem_block_t *block;
    unsigned generation; /* the block's when the free was queued */
} free_step_t;

/* The host step `cuMemFreeAsync` queues: runs when the stream reaches it.
 * A pool block was handed to its pool when the free was queued; unless the
 * same stream has reused it since, its free is now done: it leaves the map
 * and may go back to the device. */
static void free_async_step(void *arg)
{
    free_step_t *step = arg;
    mem_block_t *block = step->block;
    if (block->pool == NULL) {
        pthread_rwlock_wrlock(&mem_lock);
        map_remove(&device_blocks, block);
        pthread_rwlock_unlock(&mem_lock);
        device_release(block);
        free(step);
        return;
    }
    struct CUmemPoolHandle_st *pool = block->pool, *gone = NULL;
    mem_block_t *released = NULL;
    pthread_rwlock_wrlock(&mem_lock);
    if (block->generation == step->generation) {
        map_remove(&device_blocks, block);
        block->free_done = true;
        released = pool_trim_locked(pool, pool->release_threshold);
        gone = pool_retire_locked(pool, &released);
    }
    pthread_rwlock_unlock(&mem_lock);
    release_all(released);
    free(gone);
    free(step);
}

static CUresult free_async(CUdeviceptr dptr, CUstream hStream, bool per_thread)
{
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    struct CUstream_st *stream = sim_stream_resolve(hStream, per_thread, &result);
    if (stream == NULL)
        return result;
    free_step_t *step = malloc(sizeof *step);
    if (step == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_rwlock_wrlock(&mem_lock);
    mem_block_t *block = map_find(&device_blocks, (uintptr_t)dptr);
    bool valid = block != NULL && block->base == dptr && is_device_allocation(block) && !block->free_pending;
    if (valid) {
        block->free_pending = true;
        step->block = block;
        step->generation = block->generation;
        if (block->pool != NULL) {
            /* The pool has it back at once, for this stream's next
             * allocations (pool_block_reusable). */
            sim_stream_ref(stream);
            block->free_stream = stream;
            block->free_done = false;
            block->pool->used -= block->span;
            block->next_cached = block->pool->cached;
            block->pool->cached = block;
        }
    }
    pthread_rwlock_unlock(&mem_lock);
    if (!valid) {
        free(step);
        return CUDA_ERROR_INVALID_VALUE;
    }
    result = sim_stream_enqueue_host(stream, free_async_step, step);
    if (result != CUDA_SUCCESS) {
        pthread_rwlock_wrlock(&mem_lock);
        block->free_pending = false;
        if (block->pool != NULL && block->generation == step->generation) {
            for (mem_block_t **at = &block->pool->cached; *at != NULL; at = &(*at)->next_cached)
                if (*at == block) {
                    *at = block->next_cached;
                    break;
                }
            block->next_cached = NULL;
            block->pool->used += block->span;
            block->free_stream = NULL;
        }
        pthread_rwlock_unlock(&mem_lock);
        if (block->pool != NULL)
            sim_stream_unref(stream);
        free(step);
    }
    return result;
}

SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuMemFreeAsync, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return free_async(dptr, hStream, false);
}

SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuMemFreeAsync_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return free_async(dptr, hStream, true);
}

/* Frees what a destroyed (or reset primary) context allocated, as the real
 * driver does. Frees already queued on a stream are left to their step. */
void sim_memory_ctx_destroying(CUcontext ctx)
{
    /* What the device's pool keeps freed goes with the context's memory. */
    if (ctx->device != NULL)
        (void)pool_trim(&default_pools[ctx->device->ordinal], 0);
    for (;;) {
        mem_block_t *victim = NULL;
        pthread_rwlock_wrlock(&mem_lock);
        for (size_t i = 0; i < device_blocks.count && victim == NULL; i++) {
            mem_block_t *block = device_blocks.items[i];
            if (block->ctx == ctx && is_device_allocation(block) && !block->free_pending)
                victim = block;
        }
        if (victim != NULL)
            map_remove(&device_blocks, victim);
        for (size_t i = 0; i < host_blocks.count && victim == NULL; i++) {
            mem_block_t *block = host_blocks.items[i];
            if (block->ctx == ctx) {
                map_remove(&host_blocks, block);
                if (block->kind == MEM_HOST_ALLOC)
                    munmap((void *)block->base, block->span);
                free(block);
                i--;
            }
        }
        pthread_rwlock_unlock(&mem_lock);
        if (victim == NULL)
            return;
        device_release(victim);
    }
}

/* ------------------------------------------------------------------------
 * Virtual memory management
 * ------------------------------------------------------------------------ */

static bool location_is_device(const CUmemLocation *location)
{
    return location->type == CU_MEM_LOCATION_TYPE_DEVICE && location->id >= 0 && location->id < sim_device_count;
}

/* A host location `cuMemCreate` accepts (cuda.h): `HOST`, whose id is
 * ignored, or `HOST_NUMA` naming a node of the host, which has node 0 only
 * (SIM_HOST_NUMA_NODE; "on systems where NUMA is not available" the id
 * "must be set to 0"). `HOST_NUMA_CURRENT` is refused ("will result in
 * CUDA_ERROR_INVALID_VALUE"). */
static bool location_is_host(const CUmemLocation *location)
{
    return location->type == CU_MEM_LOCATION_TYPE_HOST
           || (location->type == CU_MEM_LOCATION_TYPE_HOST_NUMA && location->id == SIM_HOST_NUMA_NODE);
}

static mem_phys_t *phys_find(CUmemGenericAllocationHandle handle)
{
    mem_phys_t *phys = NULL;
    HASH_FIND(hh, phys_table, &handle, sizeof handle, phys);
    return phys;
}

/* Drops a reference; the last one closes the memfd and returns capacity.
 * Caller holds `mem_lock` exclusively. */
static void phys_unref(mem_phys_t *phys)
{
    if (phys->handle_refs > 0 || phys->map_refs > 0)
        return;
    close(phys->fd);
    if (phys->device != NULL)
        sim_device_account(phys->device, -(int64_t)phys->size);
    free(phys);
}

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                  CUmemAllocationGranularity_flags option)
{
    CUresult entry = SIM_ENTER(cuMemGetAllocationGranularity, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (granularity == NULL || prop == NULL ||
        (!location_is_device(&prop->location) && !location_is_host(&prop->location)) ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    /* Host-located memory maps into the same reservations in the same
     * granules: the device's granularity (cuda.h gives no other). */
    *granularity = SIM_GRANULARITY;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                        unsigned long long flags)
{
    CUresult entry = SIM_ENTER(cuMemAddressReserve, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (ptr == NULL || size == 0 || size % SIM_GRANULARITY != 0 || flags != 0 ||
        (alignment & (alignment - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_vmm_supported()) /* SIMCUDA_VMM=0: a device without virtual memory management */
        return CUDA_ERROR_NOT_SUPPORTED;
    if (sim_device_count == 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (alignment < SIM_GRANULARITY)
        alignment = SIM_GRANULARITY;
    /* Reserve where the hint points, else in the current device's range. */
    va_space_t *space = addr != 0 ? va_space_of((uintptr_t)addr) : NULL;
    if (space == NULL) {
        CUcontext ctx = sim_ctx_current();
        space = &va_spaces[ctx != NULL ? ctx->device->ordinal : 0];
    }
    mem_block_t *block = calloc(1, sizeof *block);
    if (block == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    block->size = block->span = block->va_len = size;
    block->kind = MEM_RESERVATION;
    block->device = &sim_devices[space - va_spaces];
    block->buffer_id = atomic_fetch_add(&next_buffer_id, 1);
    pthread_rwlock_wrlock(&mem_lock);
    int rc = va_alloc(space, size, alignment, (uintptr_t)addr, &block->base);
    if (rc == 0 && map_insert(&device_blocks, block) != 0) {
        va_free(space, block->base, size);
        rc = -ENOMEM;
    }
    pthread_rwlock_unlock(&mem_lock);
    if (rc != 0) {
        free(block);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)block->base;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult entry = SIM_ENTER(cuMemAddressFree, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_wrlock(&mem_lock);
    mem_block_t *block = map_find(&device_blocks, (uintptr_t)ptr);
    /* The whole reservation, with nothing still mapped in it. */
    if (block != NULL && block->kind == MEM_RESERVATION && block->base == ptr && block->size == size &&
        block->mapping_count == 0) {
        map_remove(&device_blocks, block);
        va_free(&va_spaces[block->device->ordinal], block->base, block->va_len);
        free(block);
        result = CUDA_SUCCESS;
    }
    pthread_rwlock_unlock(&mem_lock);
    return result;
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                                unsigned long long flags)
{
    CUresult entry = SIM_ENTER(cuMemCreate, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_clock_host_sized(SIM_ID(cuMemCreate), size);
    if (handle == NULL || prop == NULL || flags != 0 || size == 0 || size % SIM_GRANULARITY != 0 ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    bool host_located = false;
    switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        if (prop->location.id < 0 || prop->location.id >= sim_device_count)
            return CUDA_ERROR_INVALID_DEVICE;
        break;
    case CU_MEM_LOCATION_TYPE_HOST:
        /* cuda.h: "HOST allocations are not IPC capable and
         * requestedHandleTypes must be 0, any other value will result in
         * CUDA_ERROR_INVALID_VALUE". */
        if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE)
            return CUDA_ERROR_INVALID_VALUE;
        host_located = true;
        break;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        /* The id is a host NUMA node, not a device ordinal: a node the
         * host lacks is an invalid value, not an invalid device. */
        if (!location_is_host(&prop->location))
            return CUDA_ERROR_INVALID_VALUE;
        host_located = true;
        break;
    default: /* HOST_NUMA_CURRENT (cuda.h: CUDA_ERROR_INVALID_VALUE), unknown types */
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!sim_vmm_supported()) /* SIMCUDA_VMM=0 */
        return CUDA_ERROR_NOT_SUPPORTED;
    /* SIMCUDA_HOST_VMM=0: valid arguments the device cannot honour, as on
     * a device reporting CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
     * 0. cuda.h lists CUDA_ERROR_NOT_SUPPORTED for cuMemCreate and keeps
     * CUDA_ERROR_INVALID_VALUE for malformed properties (checked above);
     * NOT_SUPPORTED is also what a device without VMM (SIMCUDA_VMM=0) and
     * one without host memory pools (cuMemPoolCreate) answer here. */
    if (host_located && !sim_host_vmm_supported())
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    /* Host-located memory is host memory: no device's capacity pays. */
    sim_device_t *device = host_located ? NULL : &sim_devices[prop->location.id];
    if (device != NULL && sim_device_charge(device, size) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    mem_phys_t *phys = calloc(1, sizeof *phys);
    int fd = memfd_create("simcuda-vmm", MFD_CLOEXEC);
    if (phys == NULL || fd < 0 || ftruncate(fd, (off_t)size) != 0)
        goto fail;
    phys->fd = fd;
    phys->size = size;
    phys->device = device;
    phys->host_located = host_located;
    if (host_located)
        atomic_store_explicit(&host_located_made, true, memory_order_relaxed);
    phys->prop = *prop;
    phys->handle_refs = 1;
    phys->handle = (CUmemGenericAllocationHandle)(uintptr_t)phys;
    phys->block_id = atomic_fetch_add(&next_buffer_id, 1);
    pthread_rwlock_wrlock(&mem_lock);
    HASH_ADD(hh, phys_table, handle, sizeof phys->handle, phys);
    bool added = phys_find(phys->handle) == phys;
    pthread_rwlock_unlock(&mem_lock);
    if (!added)
        goto fail;
    *handle = phys->handle;
    return CUDA_SUCCESS;

fail:
    if (fd >= 0)
        close(fd);
    free(phys);
    if (device != NULL)
        sim_device_account(device, -(int64_t)size);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult entry = SIM_ENTER(cuMemRelease, SIM_NEED_INIT_PRICED_BY_CALL);
    if (entry != CUDA_SUCCESS)
        return entry;
    pthread_rwlock_wrlock(&mem_lock);
    mem_phys_t *phys = phys_find(handle);
    uint64_t released_bytes = phys != NULL ? phys->size : 0;
    bool still_mapped = false;
    if (phys != NULL) {
        if (--phys->handle_refs == 0) {
            HASH_DELETE(hh, phys_table, phys);
            /* Still mapped: freed by the last unmap, which pays for it. */
            still_mapped = phys->map_refs > 0;
            phys->release_owed = still_mapped;
            phys_unref(phys);
        }
    }
    pthread_rwlock_unlock(&mem_lock);
    if (still_mapped) {
        sim_clock_host_call_priced(SIM_ID(cuMemRelease), SIM_RELEASE_MAPPED_NS);
        released_bytes = 0;
    } else {
        sim_clock_host_call(SIM_ID(cuMemRelease));
    }
    sim_clock_host_sized(SIM_ID(cuMemRelease), released_bytes);
    return phys != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                             unsigned long long flags)
{
    CUresult entry = SIM_ENTER(cuMemMap, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_clock_host_sized(SIM_ID(cuMemMap), size);
    if (flags != 0 || size == 0 || ptr % SIM_GRANULARITY != 0 || size % SIM_GRANULARITY != 0 ||
        offset % SIM_GRANULARITY != 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* cuda.h: the offset "currently must be zero"; an H100 answers
     * CUDA_ERROR_NOT_SUPPORTED to any other, and to a mapping larger than
     * the handle; an H200 answers it to a mapping smaller than the handle
     * too, its first granule of two (`mem_map.part_of_handle`,
     * tests/gpu/driver_facts.recorded.txt): a handle maps whole or not at
     * all. */
    if (offset != 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    mem_block_t *mapping = calloc(1, sizeof *mapping);
    if (mapping == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_wrlock(&mem_lock);
    mem_phys_t *phys = phys_find(handle);
    mem_block_t *reservation = map_find(&device_blocks, (uintptr_t)ptr);
    if (phys == NULL)
        result = CUDA_ERROR_INVALID_HANDLE;
    if (phys != NULL && size != phys->size)
        result = CUDA_ERROR_NOT_SUPPORTED;
    if (phys == NULL || reservation == NULL || reservation->kind != MEM_RESERVATION ||
        ptr + size > block_end(reservation) || size != phys->size ||
        map_overlaps(&mappings, (uintptr_t)ptr, (uintptr_t)(ptr + size)))
        goto out;
    /* A new mapping has no access until cuMemSetAccess. */
    void *pages = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, phys->fd, (off_t)offset);
    if (pages == MAP_FAILED) {
        result = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    mapping->base = (uintptr_t)ptr;
    mapping->size = mapping->span = mapping->va_len = size;
    mapping->kind = MEM_MAPPING;
    mapping->device = phys->device; /* NULL for host-located memory */
    mapping->phys = phys;
    mapping->offset = offset;
    mapping->reservation = reservation;
    mapping->buffer_id = atomic_fetch_add(&next_buffer_id, 1);
    if (map_insert(&mappings, mapping) != 0) {
        map_reserved(mapping->base, size);
        result = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    phys->map_refs++;
    reservation->mapping_count++;
    mapping = NULL;
    result = CUDA_SUCCESS;
out:
    pthread_rwlock_unlock(&mem_lock);
    free(mapping);
    return result;
}

/* Collects the mappings that exactly tile [ptr, ptr+size): the first index
 * in `mappings`, and their number. Caller holds `mem_lock`. */
static int mappings_tiling(uintptr_t ptr, size_t size, size_t *first_out, size_t *count_out)
{
    ptrdiff_t index = map_floor(&mappings, ptr);
    if (size == 0 || index < 0 || mappings.items[index]->base != ptr)
        return -EINVAL;
    uintptr_t cursor = ptr, end = ptr + size;
    size_t count = 0;
    for (size_t i = (size_t)index; i < mappings.count && cursor < end; i++) {
        mem_block_t *mapping = mappings.items[i];
        if (mapping->base != cursor || block_end(mapping) > end)
            return -EINVAL;
        cursor = block_end(mapping);
        count++;
    }
    if (cursor != end)
        return -EINVAL;
    *first_out = (size_t)index;
    *count_out = count;
    return 0;
}

SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult entry = SIM_ENTER(cuMemUnmap, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    size_t first = 0, count = 0, owed = 0;
    uint64_t owed_bytes = 0;
    pthread_rwlock_wrlock(&mem_lock);
    int rc = mappings_tiling((uintptr_t)ptr, size, &first, &count);
    /* A reserved range with nothing mapped in it unmaps successfully, as
     * on an H100 (tests/gpu/driver_facts.recorded.txt: mem_unmap.unmapped). */
    mem_block_t *reservation = rc == 0 ? NULL : map_find(&device_blocks, (uintptr_t)ptr);
    if (reservation != NULL && reservation->kind == MEM_RESERVATION && size != 0 && size % SIM_GRANULARITY == 0
        && ptr % SIM_GRANULARITY == 0 && ptr + size <= block_end(reservation)
        && !map_overlaps(&mappings, (uintptr_t)ptr, (uintptr_t)(ptr + size))) {
        rc = 0;
        count = 0;
        first = 0;
    }
    if (rc == 0) {
        for (size_t i = 0; i < count; i++) {
            mem_block_t *mapping = mappings.items[first];
            map_reserved(mapping->base, mapping->span);
            map_remove(&mappings, mapping);
            mapping->reservation->mapping_count--;
            mem_phys_t *phys = mapping->phys;
            if (--phys->map_refs == 0 && phys->handle_refs == 0 && phys->release_owed) {
                owed++;
                owed_bytes += phys->size;
            }
            phys_unref(phys);
            free(mapping);
        }
    }
    pthread_rwlock_unlock(&mem_lock);
    if (rc == 0 && count > 1)
        sim_clock_host_more(SIM_ID(cuMemUnmap), SIM_ID(cuMemUnmap), count - 1, 0);
    sim_clock_host_more(SIM_ID(cuMemUnmap), SIM_ID(cuMemRelease), owed, owed_bytes);
    sim_clock_host_sized(SIM_ID(cuMemUnmap), size);
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The host can do what the most privileged device may, or what a
 * `HOST_NUMA` grant gave it on host-located memory: the simulated devices
 * all run on the host. */
static int host_protection(const mem_block_t *mapping)
{
    int protection = PROT_NONE;
    if (mapping->host_access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        return PROT_READ | PROT_WRITE;
    if (mapping->host_access == CU_MEM_ACCESS_FLAGS_PROT_READ)
        protection = PROT_READ;
    for (int i = 0; i < sim_device_count; i++) {
        if (mapping->access[i] == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return PROT_READ | PROT_WRITE;
        if (mapping->access[i] == CU_MEM_ACCESS_FLAGS_PROT_READ)
            protection = PROT_READ;
    }
    return protection;
}

/* What cuMemSetAccess answers to its descriptors alone. A `HOST_NUMA`
 * descriptor (the CPU; cuda.h: its id "is ignored") is accepted here and
 * sets `*host_grant`; whether the range may take it depends on its
 * mappings. */
static CUresult access_descriptors_check(const CUmemAccessDesc *desc, size_t count, bool *host_grant)
{
    *host_grant = false;
    if (desc == NULL || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
            *host_grant = true;
        else if (!location_is_device(&desc[i].location))
            return desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE ? CUDA_ERROR_INVALID_DEVICE
                                                                       : CUDA_ERROR_INVALID_VALUE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CUresult entry = SIM_ENTER(cuMemSetAccess, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    bool host_grant = false;
    CUresult result = access_descriptors_check(desc, count, &host_grant);
    if (result != CUDA_SUCCESS) {
        sim_clock_host_sized(SIM_ID(cuMemSetAccess), size);
        return result;
    }
    size_t first = 0, mapping_count = 0;
    pthread_rwlock_wrlock(&mem_lock);
    if (mappings_tiling((uintptr_t)ptr, size, &first, &mapping_count) != 0) {
        result = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    /* cuda.h: "Users cannot specify CU_MEM_LOCATION_TYPE_HOST_NUMA
     * accessibility for allocations created on with other location types"
     * than the host's: nothing changes when one such mapping is in the
     * range. */
    for (size_t m = first; host_grant && m < first + mapping_count; m++) {
        if (!mappings.items[m]->phys->host_located) {
            result = CUDA_ERROR_INVALID_VALUE;
            goto out;
        }
    }
    for (size_t m = first; m < first + mapping_count; m++) {
        mem_block_t *mapping = mappings.items[m];
        for (size_t i = 0; i < count; i++) {
            if (desc[i].location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
                mapping->host_access = (unsigned char)desc[i].flags;
            else
                mapping->access[desc[i].location.id] = (unsigned char)desc[i].flags;
        }
        atomic_fetch_add_explicit(&sim_access_generation, 1, memory_order_release);
        if (mprotect((void *)mapping->base, mapping->span, host_protection(mapping)) != 0)
            result = CUDA_ERROR_OUT_OF_MEMORY;
    }
out:
    pthread_rwlock_unlock(&mem_lock);
    if (result == CUDA_SUCCESS && mapping_count > 1)
        sim_clock_host_more(SIM_ID(cuMemSetAccess), SIM_ID(cuMemSetAccess), mapping_count - 1, 0);
    sim_clock_host_sized(SIM_ID(cuMemSetAccess), size);
    return result;
}

SIM_EXPORT CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    CUresult entry = SIM_ENTER(cuMemGetAccess, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    bool host = location != NULL && location->type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
    if (flags == NULL || location == NULL || (!host && !location_is_device(location)))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_rdlock(&mem_lock);
    mem_block_t *mapping = map_find(&mappings, (uintptr_t)ptr);
    /* The CPU's access is a property of host-located memory only, as its
     * grant is (cuMemSetAccess). */
    if (mapping != NULL && host && !mapping->phys->host_located)
        mapping = NULL;
    if (mapping != NULL)
        *flags = host ? mapping->host_access : mapping->access[location->id];
    pthread_rwlock_unlock(&mem_lock);
    return mapping != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    CUresult entry = SIM_ENTER(cuMemRetainAllocationHandle, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (handle == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_wrlock(&mem_lock);
    mem_block_t *mapping = map_find(&mappings, (uintptr_t)addr);
    if (mapping != NULL) {
        mem_phys_t *phys = mapping->phys;
        /* A released-but-mapped handle becomes valid again. */
        if (phys->handle_refs++ == 0) {
            HASH_ADD(hh, phys_table, handle, sizeof phys->handle, phys);
            phys->release_owed = false; /* its next release pays */
        }
        *handle = phys->handle;
    }
    pthread_rwlock_unlock(&mem_lock);
    return mapping != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                           CUmemGenericAllocationHandle handle)
{
    CUresult entry = SIM_ENTER(cuMemGetAllocationPropertiesFromHandle, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (prop == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_rdlock(&mem_lock);
    mem_phys_t *phys = phys_find(handle);
    if (phys != NULL)
        *prop = phys->prop;
    pthread_rwlock_unlock(&mem_lock);
    return phys != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                                 CUmemAllocationHandleType handleType, unsigned long long flags)
{
    CUresult entry = SIM_ENTER(cuMemExportToShareableHandle, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (shareableHandle == NULL || flags != 0 || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result = CUDA_SUCCESS;
    pthread_rwlock_rdlock(&mem_lock);
    mem_phys_t *phys = phys_find(handle);
    /* Exportable only if it was created asking for this handle type. */
    if (phys == NULL || (phys->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
        result = CUDA_ERROR_INVALID_VALUE;
    } else {
        int fd = fcntl(phys->fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
            result = CUDA_ERROR_OUT_OF_MEMORY;
        else
            *(int *)shareableHandle = fd;
    }
    pthread_rwlock_unlock(&mem_lock);
    return result;
}

/* Legacy IPC: only `cuMemAlloc` memory qualifies (not VMM, not pools, as on
 * the real driver). The handle identifies the allocation in this process;
 * simcuda has no `cuIpcOpenMemHandle`. */
SIM_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    CUresult entry = SIM_ENTER(cuIpcGetMemHandle, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pHandle == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_rdlock(&mem_lock);
    mem_block_t *block = map_find(&device_blocks, (uintptr_t)dptr);
    if (block != NULL && block->kind == MEM_DEVICE && (uintptr_t)dptr < block->base + block->size) {
        struct {
            char magic[8];
            uint64_t pid, base, size, buffer_id;
        } content = {"simcuda", (uint64_t)getpid(), block->base, block->size, block->buffer_id};
        memset(pHandle, 0, sizeof *pHandle);
        memcpy(pHandle->reserved, &content, sizeof content);
        result = CUDA_SUCCESS;
    }
    pthread_rwlock_unlock(&mem_lock);
    return result;
}

/* ------------------------------------------------------------------------
 * Pinned host memory
 * ------------------------------------------------------------------------ */

static CUresult host_alloc(void **pp, size_t bytesize, unsigned flags)
{
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    if (pp == NULL || bytesize == 0 ||
        (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    mem_block_t *block = calloc(1, sizeof *block);
    if (block == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    block->size = bytesize;
    block->span = block->va_len = align_up(bytesize, page_size);
    block->kind = MEM_HOST_ALLOC;
    block->ctx = ctx;
    block->host_flags = flags;
    block->buffer_id = atomic_fetch_add(&next_buffer_id, 1);
    void *pages = block->span < bytesize ? MAP_FAILED
                                         : mmap(NULL, block->span, PROT_READ | PROT_WRITE,
                                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) {
        free(block);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    block->base = (uintptr_t)pages;
    pthread_rwlock_wrlock(&mem_lock);
    int rc = map_insert(&host_blocks, block);
    pthread_rwlock_unlock(&mem_lock);
    if (rc != 0) {
        munmap(pages, block->span);
        free(block);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = pages;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    CUresult entry = SIM_ENTER(cuMemHostAlloc, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = host_alloc(pp, bytesize, Flags);
    sim_clock_host_sized(SIM_ID(cuMemHostAlloc), result == CUDA_SUCCESS ? bytesize : 0);
    return result;
}

SIM_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    CUresult entry = SIM_ENTER(cuMemAllocHost_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = host_alloc(pp, bytesize, 0);
    sim_clock_host_sized(SIM_ID(cuMemAllocHost_v2), result == CUDA_SUCCESS ? bytesize : 0);
    return result;
}

SIM_EXPORT CUresult cuMemFreeHost(void *p)
{
    CUresult entry = SIM_ENTER(cuMemFreeHost, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    pthread_rwlock_wrlock(&mem_lock);
    mem_block_t *block = map_find(&host_blocks, (uintptr_t)p);
    if (block != NULL && (block->base != (uintptr_t)p || block->kind != MEM_HOST_ALLOC))
        block = NULL;
    if (block != NULL)
        map_remove(&host_blocks, block);
    pthread_rwlock_unlock(&mem_lock);
    sim_clock_host_sized(SIM_ID(cuMemFreeHost), block != NULL ? block->size : 0);
    if (block == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)block->base, block->span);
    free(block);
    return CUDA_SUCCESS;
}

static CUresult host_register(void *p, size_t bytesize, unsigned flags)
{
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY |
                     CU_MEMHOSTREGISTER_READ_ONLY;
    if (p == NULL || bytesize == 0 || (flags & ~known) != 0 || (uintptr_t)p + bytesize < (uintptr_t)p)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CU_MEMHOSTREGISTER_IOMEMORY)
        return CUDA_ERROR_NOT_SUPPORTED;
    /* The range must be mapped memory: msync fails with ENOMEM on holes. */
    uintptr_t first_page = (uintptr_t)p & ~(uintptr_t)(page_size - 1);
    if (msync((void *)first_page, (uintptr_t)p + bytesize - first_page, MS_ASYNC) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    mem_block_t *block = calloc(1, sizeof *block);
    if (block == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    block->base = (uintptr_t)p;
    block->size = block->span = block->va_len = bytesize;
    block->kind = MEM_HOST_REGISTERED;
    block->ctx = ctx;
    block->host_flags = flags;
    block->buffer_id = atomic_fetch_add(&next_buffer_id, 1);
    pthread_rwlock_wrlock(&mem_lock);
    if (map_overlaps(&host_blocks, block->base, block->base + bytesize))
        result = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    else if (map_insert(&host_blocks, block) != 0)
        result = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_rwlock_unlock(&mem_lock);
    if (result != CUDA_SUCCESS)
        free(block);
    return result;
}

SIM_EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    CUresult entry = SIM_ENTER(cuMemHostRegister, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = host_register(p, bytesize, Flags);
    sim_clock_host_sized(SIM_ID(cuMemHostRegister), result == CUDA_SUCCESS ? bytesize : 0);
    return result;
}

SIM_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    CUresult entry = SIM_ENTER(cuMemHostRegister_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = host_register(p, bytesize, Flags);
    sim_clock_host_sized(SIM_ID(cuMemHostRegister_v2), result == CUDA_SUCCESS ? bytesize : 0);
    return result;
}

SIM_EXPORT CUresult cuMemHostUnregister(void *p)
{
    CUresult entry = SIM_ENTER(cuMemHostUnregister, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    pthread_rwlock_wrlock(&mem_lock);
    mem_block_t *block = map_find(&host_blocks, (uintptr_t)p);
    if (block != NULL && (block->base != (uintptr_t)p || block->kind != MEM_HOST_REGISTERED))
        block = NULL;
    if (block != NULL)
        map_remove(&host_blocks, block);
    pthread_rwlock_unlock(&mem_lock);
    sim_clock_host_sized(SIM_ID(cuMemHostUnregister), block != NULL ? block->size : 0);
    if (block == NULL)
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    free(block);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    CUresult entry = SIM_ENTER(cuMemHostGetDevicePointer_v2, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pdptr == NULL || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_rdlock(&mem_lock);
    bool pinned = map_find(&host_blocks, (uintptr_t)p) != NULL;
    pthread_rwlock_unlock(&mem_lock);
    if (!pinned)
        return CUDA_ERROR_INVALID_VALUE;
    /* Unified addressing: the device sees pinned memory at its host address. */
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    CUresult entry = SIM_ENTER(cuMemHostGetFlags, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pFlags == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_rdlock(&mem_lock);
    mem_block_t *block = map_find(&host_blocks, (uintptr_t)p);
    if (block != NULL)
        *pFlags = block->host_flags;
    pthread_rwlock_unlock(&mem_lock);
    return block != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ------------------------------------------------------------------------
 * Pointer queries
 * ------------------------------------------------------------------------ */

/* Everything the pointer queries report about one address, copied out
 * under the lock. */
typedef struct ptr_info_s {
    bool valid;
    bool host_located; /* a mapping of host-located memory */
    mem_kind_t kind;
    CUcontext ctx;
    int device;
    uintptr_t range_base, range_size;     /* allocation or reservation */
    uintptr_t mapping_base, mapping_size; /* what is really mapped */
    unsigned long long buffer_id, block_id;
    unsigned long long handle_types;
    CUmemoryPool pool;
    unsigned access;
} ptr_info_t;

static ptr_info_t ptr_info(uintptr_t address)
{
    ptr_info_t info = {0};
    CUcontext current = sim_ctx_current();
    pthread_rwlock_rdlock(&mem_lock);
    mem_block_t *block = map_find(&device_blocks, address);
    if (block != NULL && block->kind == MEM_RESERVATION) {
        mem_block_t *mapping = map_find(&mappings, address);
        if (mapping != NULL) {
            info.valid = true;
            info.kind = MEM_MAPPING;
            info.host_located = mapping->phys->host_located;
            /* Host-located memory was allocated against no device: the
             * device whose address range holds the reservation. */
            info.device = mapping->device != NULL ? mapping->device->ordinal : block->device->ordinal;
            info.range_base = block->base;
            info.range_size = block->size;
            info.mapping_base = mapping->base;
            info.mapping_size = mapping->size;
            info.buffer_id = mapping->buffer_id;
            info.block_id = mapping->phys->block_id;
            info.handle_types = (unsigned long long)mapping->phys->prop.requestedHandleTypes;
            int viewer = current != NULL ? current->device->ordinal : info.device;
            info.access = mapping->access[viewer];
        }
    } else if (block != NULL && address < block->base + block->size) {
        info.valid = true;
        info.kind = block->kind;
        info.ctx = block->ctx;
        info.device = block->device->ordinal;
        info.range_base = info.mapping_base = block->base;
        info.range_size = info.mapping_size = block->size;
        info.buffer_id = info.block_id = block->buffer_id;
        info.pool = block->pool;
        info.access = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
    } else if (block == NULL) {
        block = map_find(&host_blocks, address);
        if (block != NULL && address < block->base + block->size) {
            info.valid = true;
            info.kind = block->kind;
            info.ctx = block->ctx;
            info.device = block->ctx->device->ordinal;
            info.range_base = info.mapping_base = block->base;
            info.range_size = info.mapping_size = block->size;
            info.buffer_id = info.block_id = block->buffer_id;
            info.access = (block->host_flags & CU_MEMHOSTREGISTER_READ_ONLY) && block->kind == MEM_HOST_REGISTERED
                              ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ
                              : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
        }
    }
    pthread_rwlock_unlock(&mem_lock);
    return info;
}

static bool is_host_kind(mem_kind_t kind)
{
    return kind == MEM_HOST_ALLOC || kind == MEM_HOST_REGISTERED;
}

/* Host memory, pinned or mapped from a host-located handle: its physical
 * location (CU_POINTER_ATTRIBUTE_MEMORY_TYPE) is the host. */
static bool info_is_host(const ptr_info_t *info)
{
    return is_host_kind(info->kind) || info->host_located;
}

/* Writes one attribute of a valid pointer. Returns CUDA_ERROR_INVALID_VALUE
 * for attributes that do not apply (a host pointer of device memory) or
 * that simcuda does not know. */
static CUresult write_attribute(const ptr_info_t *info, CUpointer_attribute attribute, void *data, uintptr_t address)
{
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = info->ctx;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = info_is_host(info) ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = (CUdeviceptr)address;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (!info_is_host(info) && info->kind != MEM_MANAGED)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)address;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(bool *)data = false;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = info->buffer_id;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(bool *)data = info->kind == MEM_MANAGED;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = info->device;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(bool *)data = info->kind == MEM_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)info->range_base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = info->range_size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(bool *)data = true;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data = info->handle_types;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        *(bool *)data = false;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned int *)data = info->access;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(CUmemoryPool *)data = info->pool;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = info->mapping_size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(void **)data = (void *)info->mapping_base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *(unsigned long long *)data = info->block_id;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        *(bool *)data = false;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

SIM_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult entry = SIM_ENTER(cuPointerGetAttribute, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (data == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    ptr_info_t info = ptr_info((uintptr_t)ptr);
    if (!info.valid)
        return CUDA_ERROR_INVALID_VALUE;
    return write_attribute(&info, attribute, data, (uintptr_t)ptr);
}

/* The size of each attribute's value, to clear it for pointers the driver
 * does not know (cuPointerGetAttributes reports those as zero/NULL). */
static size_t attribute_size(CUpointer_attribute attribute)
{
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: return sizeof(CUcontext);
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: return sizeof(unsigned int);
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: return sizeof(CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: return sizeof(void *);
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: return sizeof(unsigned long long);
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: return sizeof(int);
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: return sizeof(CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: return sizeof(size_t);
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: return sizeof(unsigned long long);
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: return sizeof(unsigned int);
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: return sizeof(CUmemoryPool);
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: return sizeof(size_t);
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: return sizeof(void *);
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: return sizeof(unsigned long long);
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE: return sizeof(bool);
    default: return 0;
    }
}

/* Unlike cuPointerGetAttribute, an unknown pointer is not an error: every
 * attribute reads as zero/NULL (cuda.h documents this), and attributes that
 * do not apply to a known pointer read as zero too. */
SIM_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                           CUdeviceptr ptr)
{
    CUresult entry = SIM_ENTER(cuPointerGetAttributes, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (numAttributes == 0 || attributes == NULL || data == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numAttributes; i++)
        if (data[i] == NULL || attribute_size(attributes[i]) == 0)
            return CUDA_ERROR_INVALID_VALUE;
    ptr_info_t info = ptr_info((uintptr_t)ptr);
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!info.valid || write_attribute(&info, attributes[i], data[i], (uintptr_t)ptr) != CUDA_SUCCESS)
            memset(data[i], 0, attribute_size(attributes[i]));
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CUresult entry = SIM_ENTER(cuMemGetAddressRange_v2, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    ptr_info_t info = ptr_info((uintptr_t)dptr);
    if (!info.valid)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase != NULL)
        *pbase = (CUdeviceptr)info.mapping_base;
    if (psize != NULL)
        *psize = info.mapping_size;
    return CUDA_SUCCESS;
}

int sim_mem_range(uintptr_t address, uintptr_t *base_out, size_t *size_out)
{
    ptr_info_t info = ptr_info(address);
    if (!info.valid || info_is_host(&info))
        return -ENOENT;
    *base_out = info.mapping_base;
    *size_out = info.mapping_size;
    return 0;
}

sim_mem_kind_t sim_mem_classify(uintptr_t address, int *device_out)
{
    va_space_t *space = va_space_of(address);
    if (space != NULL) {
        int device = (int)(space - va_spaces);
        sim_mem_kind_t kind = SIM_MEM_DEVICE;
        pthread_rwlock_rdlock(&mem_lock);
        mem_block_t *block = map_find(&device_blocks, address);
        if (block != NULL && block->kind == MEM_MANAGED) {
            kind = SIM_MEM_MANAGED;
        } else if (block != NULL && block->kind == MEM_RESERVATION) {
            /* Memory of another device, or of the host, may be mapped in
             * this range. Host-located memory is pinned host memory to a
             * copy (a device-accessible host side). */
            mem_block_t *mapping = map_find(&mappings, address);
            if (mapping != NULL && mapping->phys->host_located)
                kind = SIM_MEM_PINNED;
            else if (mapping != NULL)
                device = mapping->device->ordinal;
        }
        pthread_rwlock_unlock(&mem_lock);
        if (device_out != NULL && kind != SIM_MEM_PINNED)
            *device_out = device;
        return kind;
    }
    pthread_rwlock_rdlock(&mem_lock);
    bool pinned = map_find(&host_blocks, address) != NULL;
    pthread_rwlock_unlock(&mem_lock);
    return pinned ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE;
}

/* How many distinct host-located mappings `sim_mem_host_located_bytes`
 * tells apart on the stack; more take a heap array. */
#define HOST_LOCATED_SEEN 16

uint64_t sim_mem_host_located_bytes(const void *args, size_t size)
{
    const unsigned char *bytes = args;
    const mem_block_t *stack_seen[HOST_LOCATED_SEEN];
    const mem_block_t **seen = stack_seen;
    size_t seen_count = 0, seen_capacity = HOST_LOCATED_SEEN;
    uint64_t total = 0;
    bool locked = false;
    if (!atomic_load_explicit(&host_located_made, memory_order_relaxed))
        return 0;
    for (size_t offset = 0; offset + sizeof(uint64_t) <= size; offset += sizeof(uint64_t)) {
        uint64_t word;
        memcpy(&word, bytes + offset, sizeof word);
        if (va_space_of((uintptr_t)word) == NULL)
            continue; /* not a pointer into any device's address range */
        if (!locked) {
            pthread_rwlock_rdlock(&mem_lock);
            locked = true;
        }
        const mem_block_t *mapping = map_find(&mappings, (uintptr_t)word);
        if (mapping == NULL || !mapping->phys->host_located)
            continue;
        bool counted = false;
        for (size_t i = 0; i < seen_count && !counted; i++)
            counted = seen[i] == mapping;
        if (counted)
            continue;
        total += mapping->size;
        if (seen_count == seen_capacity) {
            /* Without room to remember it, a later word into the same
             * mapping would be counted twice: grow, or stop counting. */
            const mem_block_t **grown = malloc(2 * seen_capacity * sizeof *grown);
            if (grown == NULL)
                break;
            memcpy(grown, seen, seen_count * sizeof *seen);
            if (seen != stack_seen)
                free(seen);
            seen = grown;
            seen_capacity *= 2;
        }
        seen[seen_count++] = mapping;
    }
    if (locked)
        pthread_rwlock_unlock(&mem_lock);
    if (seen != stack_seen)
        free(seen);
    return total;
}

/* ------------------------------------------------------------------------
 * Kernels' access rules (see sim_internal.h)
 * ------------------------------------------------------------------------ */

_Atomic uint64_t sim_access_generation = 1;
_Thread_local sim_kernel_view_t sim_kernel_view;

/* Whether the kernel of `view` may touch `block` (and write it), and which
 * device owns it. Called with `mem_lock` held. */
static bool kernel_may_touch(const sim_kernel_view_t *view, const mem_block_t *block, bool *writable, int *owner)
{
    int device = view->ctx->device->ordinal;
    *owner = block->device != NULL ? block->device->ordinal : device;
    *writable = true;
    switch (block->kind) {
    case MEM_MANAGED:
        return true;
    case MEM_MAPPING:
        /* Only cuMemSetAccess decides; peer access does not apply. */
        if (block->phys->host_located)
            *owner = -1; /* the host's */
        *writable = block->access[device] == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        return block->access[device] != CU_MEM_ACCESS_FLAGS_PROT_NONE;
    case MEM_DEVICE:
        return *owner == device || (block->ctx != NULL && sim_ctx_has_peer(view->ctx, block->ctx));
    case MEM_POOL:
        /* Pool memory is reached through cuMemPoolSetAccess, which simcuda
         * does not offer: its own device only. */
        return *owner == device;
    default:
        return true;
    }
}

void sim_kernel_touch_check(uintptr_t address, size_t bytes, bool is_write)
{
    sim_kernel_view_t *view = &sim_kernel_view;
    uint64_t generation = atomic_load_explicit(&sim_access_generation, memory_order_acquire);
    if (va_space_of(address) == NULL)
        return; /* host memory, shared or local windows: the MMU decides */
    pthread_rwlock_rdlock(&mem_lock);
    mem_block_t *block = map_find(&device_blocks, address);
    if (block != NULL && block->kind == MEM_RESERVATION)
        block = map_find(&mappings, address);
    bool allowed = true, writable = true;
    int owner = -1;
    uintptr_t lo = 0, hi = 0;
    if (block != NULL) {
        allowed = kernel_may_touch(view, block, &writable, &owner);
        lo = block->base;
        hi = block_end(block);
    }
    pthread_rwlock_unlock(&mem_lock);
    if (block == NULL)
        return; /* unmapped or freed: the access itself faults */
    if (allowed && (writable || !is_write)) {
        view->lo = lo;
        view->hi = hi;
        view->writable = writable;
        view->generation = generation;
        if (address + bytes <= hi)
            return;
        /* A range over several blocks: check the rest too. */
        sim_kernel_touch_check(hi, address + bytes - hi, is_write);
        return;
    }
    char line[256], whose[32];
    if (owner < 0)
        snprintf(whose, sizeof whose, "host-located memory");
    else
        snprintf(whose, sizeof whose, "memory of device %d", owner);
    int n = snprintf(line, sizeof line, "simcuda: kernel %s on device %d %s 0x%lx, %s it has no %s to: illegal address\n",
                     view->kernel != NULL ? view->kernel : "?", view->ctx->device->ordinal,
                     is_write ? "wrote" : "read", (unsigned long)address, whose,
                     allowed ? "write access" : "peer access or cuMemSetAccess grant");
    if (n > 0)
        (void)write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    raise(SIGSEGV);
    /* A handler that returns does not make the access legal. */
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
}

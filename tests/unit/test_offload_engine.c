/* test_offload_engine.c: the offload engine (shim/offload*.c) on the
 * simulated driver, without the preload library: this program links the
 * driver layer and the engine directly (`vramshim_engine`), does the
 * start-up shim.c's constructor would do (the cap), and runs allocation,
 * eviction and restore through `VS_OPERATE`, as the hooks do; states no
 * application can steer into on purpose (heads brought in ahead, a device
 * full of other memory, a departure under way) are set up through the
 * engine's own calls (offload_internal.h). The bytes that come back from
 * the host and from other regions' evictions must be exactly the bytes
 * written.
 *
 * Needs the simulated libcuda.so.1 on LD_LIBRARY_PATH (meson's test_env).
 */
#include <cuda.h>
#include <dlfcn.h>

#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cap.h"
#include "config.h"
#include "driver.h"
#include "offload.h"
#include "offload_internal.h"
#include "offload_device.h"
#include "registry.h"

#define REGION_BYTES (8ull << 20)
#define REGIONS 6

/* The driver and a context, as an application would have them. */
static int setup_driver(void **state)
{
    (void)state;
    CUdevice dev;
    CUcontext ctx;
    if (vs_driver_ready() != 0 || VS_CALL(cuInit, (0)) != CUDA_SUCCESS || VS_CALL(cuDeviceGet, (&dev, 0)) != CUDA_SUCCESS
        || VS_CALL(cuDevicePrimaryCtxRetain, (&ctx, dev)) != CUDA_SUCCESS
        || VS_CALL(cuCtxSetCurrent, (ctx)) != CUDA_SUCCESS)
        return -1;
    /* What shim.c's constructor does: the limit from VRAM_LIMIT. */
    vs_cap_configure(vs_config_get()->limit, vs_driver_device_total);
    return 0;
}

/* Copies `bytes` from `host` to `dptr` through the engine (a hook's path). */
static CUresult copy_to_device(CUdeviceptr dptr, const void *host, size_t bytes)
{
    CUresult rc = CUDA_SUCCESS;
    uintptr_t words[1] = {(uintptr_t)dptr};
    VS_OPERATE(rc, "copy", NULL, false, words, 1, VS_CALL(cuMemcpyHtoD_v2, (dptr, host, bytes)));
    return rc;
}

static CUresult copy_to_host(void *host, CUdeviceptr dptr, size_t bytes)
{
    CUresult rc = CUDA_SUCCESS;
    uintptr_t words[1] = {(uintptr_t)dptr};
    VS_OPERATE(rc, "copy", NULL, false, words, 1, VS_CALL(cuMemcpyDtoH_v2, (host, dptr, bytes)));
    return rc;
}

static void fill(unsigned char *buffer, size_t bytes, unsigned seed)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (size_t i = 0; i < bytes; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buffer[i] = (unsigned char)x;
    }
}

/* Six regions of 8 MiB under a 20 MiB limit: at most two are resident at a
 * time, so writing them all and reading them all back evicts and restores
 * every one, and what comes back is what was written, byte for byte. */
static void test_offload_engine_evict_restore_is_byte_exact(void **state)
{
    (void)state;
    CUdeviceptr regions[REGIONS];
    unsigned char *expected = malloc(REGION_BYTES), *seen = malloc(REGION_BYTES);
    assert_non_null(expected);
    assert_non_null(seen);
    assert_true(vs_offload_enabled());

    for (int i = 0; i < REGIONS; i++) {
        assert_int_equal(vs_offload_alloc(&regions[i], REGION_BYTES, 0, VS_ALLOC_DEVICE), CUDA_SUCCESS);
        fill(expected, REGION_BYTES, (unsigned)i);
        assert_int_equal(copy_to_device(regions[i], expected, REGION_BYTES), CUDA_SUCCESS);
    }
    assert_true(vs_cap_used(0) <= vs_cap_limit(0));
    for (int pass = 0; pass < 2; pass++) {
        for (int i = REGIONS - 1; i >= 0; i--) {
            fill(expected, REGION_BYTES, (unsigned)i);
            memset(seen, 0, REGION_BYTES);
            assert_int_equal(copy_to_host(seen, regions[i], REGION_BYTES), CUDA_SUCCESS);
            assert_memory_equal(seen, expected, REGION_BYTES);
        }
    }

    vs_offload_stats_t stats;
    vs_offload_stats(&stats);
    assert_true(stats.evictions >= REGIONS);
    assert_true(stats.restores >= REGIONS);
    assert_true(stats.bytes_to_device >= REGIONS * REGION_BYTES);
    /* The engine's host time by kind: every restore maps and grants, and
     * every eviction of a region waits for its copy out. */
    assert_true(stats.host_vmm_calls >= 2 * (uint64_t)stats.restores);
    assert_true(stats.host_vmm_ns > 0);
    assert_true(stats.host_gpu_waits > 0);
    assert_true(stats.restore_wait_ns > 0);

    for (int i = 0; i < REGIONS; i++) {
        CUresult rc = CUDA_ERROR_UNKNOWN;
        assert_true(vs_offload_free(regions[i], &rc));
        assert_int_equal(rc, CUDA_SUCCESS);
    }
    /* Every region's bytes are back; what stays charged is the engine's
     * own device memory (the content hashers' lanes, 2 KiB), which lives
     * as long as the engine. */
    assert_true(vs_cap_used(0) <= 4096);
    free(expected);
    free(seen);
}

/* An address the engine did not allocate is not its to free. */
static void test_offload_engine_free_of_foreign_pointer_declines(void **state)
{
    (void)state;
    CUresult rc = CUDA_SUCCESS;
    assert_false(vs_offload_free((CUdeviceptr)0x1000, &rc));
}

/* The device itself full (memory outside the limit's count: another
 * process, a limit above the device), while evicted regions keep heads:
 * a restore that maps its tail finds no physical memory, and with nothing
 * whole left to evict the room comes from the heads given back. The head
 * of the region being restored must not be among them: its restore copies
 * in only the tail, so a head given back would come back mapped but never
 * filled. Two evicted regions each get a head from their host copies (as a
 * partial restore brings one in); the device is then filled from outside
 * the engine until less than a tail is free, but a whole region would fit
 * if both heads went. The restore must take the other region's head and
 * bring back every byte. */
static void test_offload_engine_device_full_restore_keeps_its_head(void **state)
{
    (void)state;
    enum { PAIR = 2 };
    const uint64_t head = REGION_BYTES / 2;
    CUdeviceptr regions[PAIR];
    vs_region_t *r[PAIR];
    unsigned char *expected = malloc(REGION_BYTES), *seen = malloc(REGION_BYTES);
    assert_non_null(expected);
    assert_non_null(seen);

    for (int i = 0; i < PAIR; i++) {
        assert_int_equal(vs_offload_alloc(&regions[i], REGION_BYTES, 0, VS_ALLOC_DEVICE), CUDA_SUCCESS);
        fill(expected, REGION_BYTES, (unsigned)(100 + i));
        assert_int_equal(copy_to_device(regions[i], expected, REGION_BYTES), CUDA_SUCCESS);
    }
    /* Both to the host, then the first half of each back as a head. */
    CUstreamCaptureMode mode;
    vs_engine_lock(&mode);
    for (int i = 0; i < PAIR; i++) {
        r[i] = vs_engine_region_at((uintptr_t)regions[i]);
        assert_non_null(r[i]);
    }
    bool host_full = false;
    assert_int_equal(vs_engine_evict(r, PAIR, &host_full), PAIR * REGION_BYTES);
    for (int i = 0; i < PAIR; i++) {
        assert_int_equal(r[i]->where, VS_ON_HOST);
        assert_int_equal(vs_cap_reserve(0, head), 0);
        assert_int_equal(vs_engine_restore_head(r[i], head), CUDA_SUCCESS);
        assert_int_equal(r[i]->split, head);
    }
    vs_engine_unlock(mode);
    assert_int_equal(VS_CALL(cuCtxSynchronize, ()), CUDA_SUCCESS);

    /* Fill the device from outside the engine: a quarter of a region stays
     * free, less than a tail, and a whole region would fit with both heads
     * given back. */
    size_t free_bytes = 0, total_bytes = 0;
    assert_int_equal(VS_CALL(cuMemGetInfo_v2, (&free_bytes, &total_bytes)), CUDA_SUCCESS);
    assert_true(free_bytes > REGION_BYTES / 4);
    CUdeviceptr filler = 0;
    assert_int_equal(VS_CALL(cuMemAlloc_v2, (&filler, free_bytes - REGION_BYTES / 4)), CUDA_SUCCESS);

    fill(expected, REGION_BYTES, 100);
    memset(seen, 0, REGION_BYTES);
    assert_int_equal(copy_to_host(seen, regions[0], REGION_BYTES), CUDA_SUCCESS);
    assert_memory_equal(seen, expected, REGION_BYTES);
    /* The room came from the other region's head. */
    vs_engine_lock(&mode);
    assert_int_equal(r[0]->where, VS_RESIDENT);
    assert_int_equal(r[1]->where, VS_ON_HOST);
    assert_int_equal(r[1]->split, 0);
    vs_engine_unlock(mode);

    assert_int_equal(VS_CALL(cuMemFree_v2, (filler)), CUDA_SUCCESS);
    fill(expected, REGION_BYTES, 101);
    memset(seen, 0, REGION_BYTES);
    assert_int_equal(copy_to_host(seen, regions[1], REGION_BYTES), CUDA_SUCCESS);
    assert_memory_equal(seen, expected, REGION_BYTES);
    for (int i = 0; i < PAIR; i++) {
        CUresult rc = CUDA_ERROR_UNKNOWN;
        assert_true(vs_offload_free(regions[i], &rc));
        assert_int_equal(rc, CUDA_SUCCESS);
    }
    free(expected);
    free(seen);
}

/* A region of `bytes` holding fill(seed), allocated through the engine. */
static CUdeviceptr alloc_sized(uint64_t bytes, unsigned seed)
{
    CUdeviceptr dptr = 0;
    unsigned char *host = malloc(bytes);
    assert_non_null(host);
    assert_int_equal(vs_offload_alloc(&dptr, bytes, 0, VS_ALLOC_DEVICE), CUDA_SUCCESS);
    fill(host, bytes, seed);
    assert_int_equal(copy_to_device(dptr, host, bytes), CUDA_SUCCESS);
    free(host);
    return dptr;
}

/* Reads `bytes` at `dptr` through the engine and compares them with
 * fill(seed). */
static void expect_sized(CUdeviceptr dptr, uint64_t bytes, unsigned seed)
{
    unsigned char *expected = malloc(bytes), *seen = calloc(1, bytes);
    assert_non_null(expected);
    assert_non_null(seen);
    fill(expected, bytes, seed);
    assert_int_equal(copy_to_host(seen, dptr, bytes), CUDA_SUCCESS);
    assert_memory_equal(seen, expected, bytes);
    free(expected);
    free(seen);
}

/* The same for a region of REGION_BYTES. */
static void expect_region(CUdeviceptr dptr, unsigned seed)
{
    expect_sized(dptr, REGION_BYTES, seed);
}

/* Allocates `count` regions through the engine; region i holds
 * fill(first_seed + i). */
static void alloc_filled(CUdeviceptr *regions, int count, unsigned first_seed)
{
    for (int i = 0; i < count; i++)
        regions[i] = alloc_sized(REGION_BYTES, first_seed + (unsigned)i);
}

/* Frees `count` regions allocated through the engine. */
static void free_regions(const CUdeviceptr *regions, int count)
{
    for (int i = 0; i < count; i++) {
        CUresult rc = CUDA_ERROR_UNKNOWN;
        assert_true(vs_offload_free(regions[i], &rc));
        assert_int_equal(rc, CUDA_SUCCESS);
    }
}

/* The three regions of a mapping ahead: the lender and another resident
 * (16 of the 20 MiB), the borrower on the host; region i holds
 * fill(first_seed + i). Returns with the engine lock held (`*mode`), the
 * regions in `r`, nothing departing. */
enum { TRIO_LENDER, TRIO_OTHER, TRIO_BORROWER, TRIO };
static vs_engine_device_t *trio_setup(CUdeviceptr regions[TRIO], vs_region_t *r[TRIO], unsigned first_seed,
                                      CUstreamCaptureMode *mode)
{
    alloc_filled(regions, TRIO, first_seed);
    expect_region(regions[TRIO_LENDER], first_seed + TRIO_LENDER);
    expect_region(regions[TRIO_OTHER], first_seed + TRIO_OTHER);
    vs_engine_lock(mode);
    for (int i = 0; i < TRIO; i++)
        r[i] = vs_engine_region_at((uintptr_t)regions[i]);
    vs_engine_device_t *d = vs_engine_device(0);
    assert_non_null(d);
    assert_int_equal(r[TRIO_BORROWER]->where, VS_ON_HOST);
    assert_int_equal(r[TRIO_LENDER]->where, VS_RESIDENT);
    assert_int_equal(r[TRIO_OTHER]->where, VS_RESIDENT);
    return d;
}

/* `trio_setup`, then the lender and the other depart together. */
static vs_engine_device_t *lend_setup(CUdeviceptr regions[TRIO], vs_region_t *r[TRIO], unsigned first_seed,
                                      CUstreamCaptureMode *mode)
{
    vs_engine_device_t *d = trio_setup(regions, r, first_seed, mode);
    vs_region_t *victims[2] = {r[TRIO_LENDER], r[TRIO_OTHER]};
    assert_true(vs_engine_depart(d, 0, victims, 2));
    return d;
}

/* Brings evicted `r` back as two physical allocations, a head of `head`
 * bytes from its host copy and then the rest, as a partial restore does;
 * its bytes must be fill(seed). Engine lock held (let go meanwhile). */
static void in_two_pieces(vs_region_t *r, uint64_t head, unsigned seed, CUstreamCaptureMode *mode)
{
    assert_int_equal(r->where, VS_ON_HOST);
    assert_int_equal(vs_cap_reserve(0, head), 0);
    assert_int_equal(vs_engine_restore_head(r, head), CUDA_SUCCESS);
    vs_engine_unlock(*mode);
    expect_region((CUdeviceptr)r->base, seed);
    vs_engine_lock(mode);
    assert_int_equal(r->where, VS_RESIDENT);
    assert_int_equal(r->split, head);
}

/* Two regions filled from `seed` (the first with seed, the second with
 * seed + 1), both evicted, then the first restored as a head of `head`
 * bytes and a tail; returns with the engine lock held. */
static void two_regions_the_first_in_two_pieces(CUdeviceptr regions[2], vs_region_t *r[2], uint64_t head,
                                                unsigned seed, CUstreamCaptureMode *mode)
{
    alloc_filled(regions, 2, seed);
    vs_engine_lock(mode);
    for (int i = 0; i < 2; i++)
        r[i] = vs_engine_region_at((uintptr_t)regions[i]);
    bool host_full = false;
    assert_int_equal(vs_engine_evict(r, 2, &host_full), 2 * REGION_BYTES);
    in_two_pieces(r[0], head, seed, mode);
}

/* `name` in the simulated driver this process loaded (NULL when it has
 * none): driver calls the engine does not make, and simcuda's own. The
 * driver stays loaded after the dlclose: the driver layer holds it. */
static void *driver_symbol(const char *name)
{
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (driver == NULL)
        return NULL;
    void *symbol = dlsym(driver, name);
    dlclose(driver);
    return symbol;
}

/* How many times the simulated driver was called at `symbol` so far
 * (`simcuda_calls`); UINT64_MAX when it cannot be asked. Asserts nothing:
 * it is read with the engine lock held. */
static uint64_t driver_calls(const char *symbol)
{
    uint64_t (*calls)(const char *);
    /* POSIX's way to a function from dlsym (ISO C has no object-to-function
     * pointer conversion). */
    *(void **)&calls = driver_symbol("simcuda_calls");
    return calls != NULL ? calls(symbol) : UINT64_MAX;
}

/* Lets the engine's thread (offload_retire.c) make what the engine handed
 * it when it let the lock go: the unmaps and releases counted next are
 * then all made. */
static void retire_finish(void)
{
    CUstreamCaptureMode mode;
    vs_engine_lock(&mode);
    vs_retire_wait_all();
    vs_engine_unlock(mode);
}

/* A region with a head and a tail that is evicted whole leaves its range
 * mapped until the next copy is queued or the engine lock is let go, then
 * goes with one unmap: the eviction itself unmaps and releases nothing and
 * keeps the tail's and the head's memory as the device's spares, released
 * when the lock is let go (on the engine's thread). Its bytes come back intact, and the other
 * region's are untouched. */
static void test_offload_engine_head_and_tail_unmapped_behind_the_next_copy(void **state)
{
    (void)state;
    enum { SPLIT, OTHER, COUNT };
    const uint64_t head = REGION_BYTES / 2;
    CUdeviceptr regions[COUNT];
    vs_region_t *r[COUNT];
    CUstreamCaptureMode mode;
    two_regions_the_first_in_two_pieces(regions, r, head, 300, &mode);
    bool host_full = false;
    vs_engine_device_t *d = vs_engine_device(0);
    assert_non_null(d);
    CUmemGenericAllocationHandle tail = r[SPLIT]->phys, head_memory = r[SPLIT]->head_phys;
    uint64_t unmaps = driver_calls("cuMemUnmap"), releases = driver_calls("cuMemRelease");
    vs_region_t *split = r[SPLIT];
    uint64_t evicted = vs_engine_evict(&split, 1, &host_full);
    uint64_t unmaps_evicting = driver_calls("cuMemUnmap") - unmaps;
    uint64_t releases_evicting = driver_calls("cuMemRelease") - releases;
    CUmemGenericAllocationHandle spare = d->spare, spare_head = d->spare_head;
    uint64_t spare_bytes = d->spare_bytes, spare_head_bytes = d->spare_head_bytes, left_split = r[SPLIT]->split;
    vs_engine_unlock(mode);
    retire_finish();
    unmaps = driver_calls("cuMemUnmap") - unmaps;
    releases = driver_calls("cuMemRelease") - releases;
    assert_int_equal(evicted, REGION_BYTES);
    assert_int_equal(unmaps_evicting, 0);
    assert_int_equal(releases_evicting, 0);
    assert_int_equal(spare, tail);
    assert_int_equal(spare_bytes, REGION_BYTES - head);
    assert_int_equal(spare_head, head_memory);
    assert_int_equal(spare_head_bytes, head);
    assert_int_equal(releases, 2);
    assert_int_equal(left_split, 0);
    assert_int_equal(unmaps, 1);
    expect_region(regions[SPLIT], 300 + SPLIT);
    expect_region(regions[OTHER], 300 + OTHER);
    free_regions(regions, COUNT);
}

/* Mapping ahead (`vs_engine_premap`) onto a departing region that has a
 * head and a tail (a partial restore's two physical allocations): the
 * restore mapped ahead gets both, at the same offsets, and brings back
 * every byte; the departed region's bytes are intact on the host. And a
 * mapping ahead dropped before the departure ends leaves the departing
 * region its memory and its bytes. Each range of two pieces is granted
 * with one call and unmapped with one call, never one per piece (about 42
 * and 25 us of host time saved on an H100, where the second call would
 * delay the restore's copy). */
static void test_offload_engine_mapping_ahead_onto_head_and_tail(void **state)
{
    (void)state;
    enum { LENDER, BORROWER, COUNT };
    const uint64_t head = REGION_BYTES / 2;
    CUdeviceptr regions[COUNT];
    vs_region_t *r[COUNT];
    CUstreamCaptureMode mode;
    two_regions_the_first_in_two_pieces(regions, r, head, 200, &mode);
    bool host_full = false;

    /* Dropped before the departure ends: the lender keeps its memory. */
    vs_engine_device_t *d = vs_engine_device(0);
    assert_non_null(d);
    vs_region_t *lender = r[LENDER];
    assert_true(vs_engine_depart(d, 0, &lender, 1));
    uint64_t maps = driver_calls("cuMemMap"), grants = driver_calls("cuMemSetAccess");
    bool premapped = vs_engine_premap(r[BORROWER], r[LENDER]);
    vs_arrive_join_all(); /* its grant, made on the arrival thread */
    maps = driver_calls("cuMemMap") - maps;
    grants = driver_calls("cuMemSetAccess") - grants;
    /* The borrower's two pieces, then the lender's once it has left (at
     * the latest when the lock is let go). */
    uint64_t unmaps = driver_calls("cuMemUnmap");
    vs_engine_premap_drop(r[BORROWER], r[LENDER]);
    bool lent = r[LENDER]->phys_lent;
    CUmemGenericAllocationHandle borrowed = r[BORROWER]->phys;
    vs_engine_departures_settle();
    vs_residency_t where = r[LENDER]->where;
    vs_engine_unlock(mode);
    retire_finish();
    unmaps = driver_calls("cuMemUnmap") - unmaps;
    assert_true(premapped);
    assert_int_equal(maps, 2);
    assert_int_equal(grants, 1);
    assert_false(lent);
    assert_int_equal(borrowed, 0);
    assert_int_equal(unmaps, 2);
    assert_int_equal(where, VS_ON_HOST);
    expect_region(regions[LENDER], 200 + LENDER);

    /* Taken: the borrower maps ahead onto the lender's head and tail. */
    vs_engine_lock(&mode);
    assert_int_equal(r[LENDER]->where, VS_RESIDENT); /* restored whole by the read */
    lender = r[LENDER];
    assert_int_equal(vs_engine_evict(&lender, 1, &host_full), REGION_BYTES);
    in_two_pieces(r[LENDER], head, 200 + LENDER, &mode);
    assert_true(vs_engine_depart(d, 0, &lender, 1));
    assert_true(vs_engine_premap(r[BORROWER], r[LENDER]));
    /* The lender's range, left mapped onto what is now the borrower's
     * memory, goes with one call once the copy is queued. */
    unmaps = driver_calls("cuMemUnmap");
    assert_true(vs_engine_departures_advance(d, true, true) > 0);
    assert_int_equal(r[LENDER]->where, VS_ON_HOST);
    assert_false(r[LENDER]->phys_lent);
    assert_int_equal(vs_cap_reserve(0, r[BORROWER]->reserved), 0);
    uint64_t mapped_ahead = vs_engine.stats.mapped_ahead;
    assert_int_equal(vs_engine_restore_mapped(r[BORROWER], d, NULL, false, true), CUDA_SUCCESS);
    vs_engine_lent_unmap();
    vs_retire_wait_all();
    unmaps = driver_calls("cuMemUnmap") - unmaps;
    assert_int_equal(vs_engine.stats.mapped_ahead, mapped_ahead + 1);
    assert_int_equal(r[BORROWER]->split, head);
    vs_engine_unlock(mode);
    assert_int_equal(unmaps, 1);
    expect_region(regions[BORROWER], 200 + BORROWER);
    expect_region(regions[LENDER], 200 + LENDER);
    expect_region(regions[BORROWER], 200 + BORROWER);

    free_regions(regions, COUNT);
}

/* Equal heads (`vs_engine_keep_equal`): two regions that keep heads of one
 * size. The one departing leaves its tail alone, and the other's tail is
 * mapped ahead onto it (`vs_engine_premap_tail`: one map, one grant), while
 * both keep their own heads: the restore only copies the tail, and every
 * byte of both comes back. A mapping ahead dropped before the departure
 * ends unmaps the borrower's tail only and leaves the lender its memory. */
static void test_offload_engine_tail_mapped_ahead_onto_a_departing_tail(void **state)
{
    (void)state;
    enum { LENDER, BORROWER, COUNT };
    const uint64_t head = REGION_BYTES / 2;
    CUdeviceptr regions[COUNT];
    vs_region_t *r[COUNT];
    CUstreamCaptureMode mode;
    alloc_filled(regions, COUNT, 500);
    vs_engine_lock(&mode);
    bool host_full = false;
    for (int i = 0; i < COUNT; i++) {
        r[i] = vs_engine_region_at((uintptr_t)regions[i]);
        r[i]->keep = head;
    }
    assert_int_equal(vs_engine_evict(r, COUNT, &host_full), COUNT * REGION_BYTES);
    vs_engine_unlock(mode);
    for (int i = 0; i < COUNT; i++)
        expect_region(regions[i], 500 + (unsigned)i); /* restored as a head and a tail */
    vs_engine_lock(&mode);
    vs_engine_device_t *d = vs_engine_device(0);
    assert_non_null(d);
    vs_region_t *lender = r[LENDER], *borrower = r[BORROWER];
    assert_int_equal(lender->split, head);
    assert_int_equal(vs_engine_evict(&borrower, 1, &host_full), REGION_BYTES - head);
    CUmemGenericAllocationHandle own_head = borrower->head_phys, lender_head = lender->head_phys;
    assert_int_equal(borrower->split, head);

    /* Dropped before the departure ends: the lender keeps its tail. */
    assert_true(vs_engine_depart(d, 0, &lender, 1));
    assert_ptr_equal(vs_engine_departure_lender(d, borrower), lender);
    uint64_t maps = driver_calls("cuMemMap"), grants = driver_calls("cuMemSetAccess");
    bool premapped = vs_engine_premap(borrower, lender);
    vs_arrive_join_all(); /* its grant, made on the arrival thread */
    maps = driver_calls("cuMemMap") - maps;
    grants = driver_calls("cuMemSetAccess") - grants;
    vs_engine_premap_drop(borrower, lender);
    bool lent = lender->phys_lent;
    uint64_t borrower_split = borrower->split;
    CUmemGenericAllocationHandle borrower_head = borrower->head_phys, borrowed = borrower->phys;
    vs_engine_departures_settle();
    vs_residency_t where = lender->where;
    uint64_t lender_split = lender->split;
    vs_engine_unlock(mode);
    assert_true(premapped);
    assert_int_equal(maps, 1);
    assert_int_equal(grants, 1);
    assert_false(lent);
    assert_int_equal(borrowed, 0);
    assert_int_equal(borrower_split, head);
    assert_int_equal(borrower_head, own_head);
    assert_int_equal(where, VS_ON_HOST);
    assert_int_equal(lender_split, head); /* its head stays */
    expect_region(regions[LENDER], 500 + LENDER);
    expect_region(regions[BORROWER], 500 + BORROWER);

    /* Taken: the borrower's tail maps onto the lender's, heads stay. */
    vs_engine_lock(&mode);
    assert_int_equal(lender->where, VS_RESIDENT);
    assert_int_equal(borrower->where, VS_RESIDENT);
    assert_int_equal(vs_engine_evict(&borrower, 1, &host_full), REGION_BYTES - head);
    assert_true(vs_engine_depart(d, 0, &lender, 1));
    assert_true(vs_engine_premap(borrower, lender));
    assert_true(vs_engine_departures_advance(d, true, true) > 0);
    assert_int_equal(lender->where, VS_ON_HOST);
    assert_false(lender->phys_lent);
    assert_int_equal(lender->split, head);
    assert_int_equal(lender->head_phys, lender_head);
    assert_int_equal(vs_cap_reserve(0, REGION_BYTES - head), 0);
    uint64_t mapped_ahead = vs_engine.stats.mapped_ahead;
    assert_int_equal(vs_engine_restore_mapped(borrower, d, NULL, false, true), CUDA_SUCCESS);
    assert_int_equal(vs_engine.stats.mapped_ahead, mapped_ahead + 1);
    assert_int_equal(borrower->split, head);
    assert_int_equal(borrower->head_phys, own_head);
    assert_false(borrower->head_from_host);
    vs_engine_unlock(mode);
    expect_region(regions[BORROWER], 500 + BORROWER);
    expect_region(regions[LENDER], 500 + LENDER);
    free_regions(regions, COUNT);
}

/* Evicts `borrower`'s `piece` bytes (its tail, or all of it), lets
 * `lender` depart, maps the borrower ahead onto the departing lender's
 * piece, ends the departure and restores the borrower onto that memory:
 * one map and one grant, the lender gone to the host with its memory no
 * longer lent, the restore counted as mapped ahead. Engine lock held. */
static void swap_mapped_ahead(vs_engine_device_t *d, vs_region_t *borrower, vs_region_t *lender, uint64_t piece)
{
    bool host_full = false;
    assert_int_equal(borrower->where, VS_RESIDENT);
    assert_int_equal(lender->where, VS_RESIDENT);
    assert_int_equal(vs_engine_evict(&borrower, 1, &host_full), piece);
    assert_true(vs_engine_depart(d, 0, &lender, 1));
    assert_ptr_equal(vs_engine_departure_lender(d, borrower), lender);
    uint64_t maps = driver_calls("cuMemMap"), grants = driver_calls("cuMemSetAccess");
    assert_true(vs_engine_premap(borrower, lender));
    vs_arrive_join_all(); /* its grant, made on the arrival thread */
    assert_int_equal(driver_calls("cuMemMap") - maps, 1);
    assert_int_equal(driver_calls("cuMemSetAccess") - grants, 1);
    assert_true(vs_engine_departures_advance(d, true, true) > 0);
    assert_int_equal(lender->where, VS_ON_HOST);
    assert_false(lender->phys_lent);
    assert_int_equal(vs_cap_reserve(0, piece), 0);
    uint64_t mapped_ahead = vs_engine.stats.mapped_ahead;
    assert_int_equal(vs_engine_restore_mapped(borrower, d, NULL, false, true), CUDA_SUCCESS);
    assert_int_equal(vs_engine.stats.mapped_ahead, mapped_ahead + 1);
}

/* Pieces of one size (`vs_prefetch_piece`): an 8 MiB region that keeps a
 * 2 MiB head streams a 6 MiB tail, the size of a whole 6 MiB region. The
 * tail maps ahead onto the memory of the 6 MiB region departing whole
 * (`vs_engine_premap_tail`, a lender with no head), and the 6 MiB region
 * onto the tail of the 8 MiB one departing alone
 * (`vs_engine_premap_onto_tail`): one map and one grant each, the heads
 * stay, and every byte of both comes back each time. */
static void test_offload_engine_pieces_lend_across_sizes(void **state)
{
    (void)state;
    const uint64_t piece = 6ull << 20, big_bytes = 8ull << 20, head = big_bytes - piece;
    CUstreamCaptureMode mode;
    bool host_full = false;
    CUdeviceptr big_ptr = alloc_sized(big_bytes, 800), small_ptr = alloc_sized(piece, 801);
    vs_engine_lock(&mode);
    vs_engine_device_t *d = vs_engine_device(0);
    assert_non_null(d);
    vs_region_t *big = vs_engine_region_at((uintptr_t)big_ptr), *small = vs_engine_region_at((uintptr_t)small_ptr);
    big->keep = head;
    vs_region_t *both[] = {big, small};
    assert_int_equal(vs_engine_evict(both, 2, &host_full), big_bytes + piece);
    vs_engine_unlock(mode);
    expect_sized(big_ptr, big_bytes, 800); /* restored as a head and a tail */
    expect_sized(small_ptr, piece, 801);

    /* The big one's tail onto the small one's memory. */
    vs_engine_lock(&mode);
    assert_int_equal(big->split, head);
    CUmemGenericAllocationHandle own_head = big->head_phys;
    swap_mapped_ahead(d, big, small, piece);
    assert_int_equal(big->split, head);
    assert_int_equal(big->head_phys, own_head);
    vs_engine_unlock(mode);
    expect_sized(big_ptr, big_bytes, 800);
    expect_sized(small_ptr, piece, 801);

    /* The small one onto the big one's tail, which leaves alone. */
    vs_engine_lock(&mode);
    swap_mapped_ahead(d, small, big, piece);
    assert_int_equal(big->split, head); /* its head stays */
    assert_int_equal(small->split, 0);
    vs_engine_unlock(mode);
    expect_sized(small_ptr, piece, 801);
    expect_sized(big_ptr, big_bytes, 800);
    free_regions((const CUdeviceptr[]){big_ptr, small_ptr}, 2);
}

/* Fine pieces (`vs_prefetch_fine_piece`): 4 MiB pieces of a 6 MiB region
 * that keeps a 2 MiB head and of an 8 MiB one that keeps 4 MiB. Each one's
 * tail maps ahead onto the other's departing tail, heads of unlike sizes
 * staying where they are (`vs_engine_premap_tail`): one map and one grant
 * each, and every byte of both comes back each time. */
static void test_offload_engine_fine_pieces_swap_tails_under_unlike_heads(void **state)
{
    (void)state;
    const uint64_t piece = 4ull << 20, six = 6ull << 20, eight = 8ull << 20;
    CUstreamCaptureMode mode;
    bool host_full = false;
    CUdeviceptr six_ptr = alloc_sized(six, 850), eight_ptr = alloc_sized(eight, 851);
    vs_engine_lock(&mode);
    vs_engine_device_t *d = vs_engine_device(0);
    assert_non_null(d);
    vs_region_t *r6 = vs_engine_region_at((uintptr_t)six_ptr), *r8 = vs_engine_region_at((uintptr_t)eight_ptr);
    r6->keep = six - piece;
    r8->keep = eight - piece;
    vs_region_t *both[] = {r6, r8};
    assert_int_equal(vs_engine_evict(both, 2, &host_full), six + eight);
    vs_engine_unlock(mode);
    expect_sized(six_ptr, six, 850); /* restored as a head and a tail */
    expect_sized(eight_ptr, eight, 851);

    vs_region_t *pairs[2][2] = {{r6, r8}, {r8, r6}}; /* borrower, lender */
    for (int round = 0; round < 4; round++) {
        vs_region_t *borrower = pairs[round % 2][0], *lender = pairs[round % 2][1];
        vs_engine_lock(&mode);
        uint64_t head = borrower->reserved - piece, lender_head = lender->reserved - piece;
        assert_int_equal(borrower->split, head);
        assert_int_equal(lender->split, lender_head);
        CUmemGenericAllocationHandle own_head = borrower->head_phys, lenders_head = lender->head_phys;
        swap_mapped_ahead(d, borrower, lender, piece); /* its tail alone, onto the lender's */
        assert_int_equal(lender->split, lender_head); /* its head stays */
        assert_int_equal(lender->head_phys, lenders_head);
        assert_int_equal(borrower->split, head);
        assert_int_equal(borrower->head_phys, own_head);
        vs_engine_unlock(mode);
        expect_sized(six_ptr, six, 850);
        expect_sized(eight_ptr, eight, 851); /* the lender's tail comes back for the read */
    }
    free_regions((const CUdeviceptr[]){six_ptr, eight_ptr}, 2);
}

/* The plan's fillers (vs_policy_stats_t.planned_filler_bytes, set here as
 * the prefetcher sets it): the memory of the filler that leaves first is
 * held, still charged, past the engine lock's holds; the second leaves as
 * any region does. The first's restore takes the held memory's charge (`vs_engine_filler_take`) and maps
 * it: no create, one filler map, the cap where it was. Held again after a
 * later eviction, it goes back when the limit needs room
 * (`vs_engine_heads_release`), charge and all. Every byte of both comes
 * back each time. */
static void test_offload_engine_filler_memory_is_held_for_the_next_filler(void **state)
{
    (void)state;
    const uint64_t bytes = 2ull << 20;
    CUstreamCaptureMode mode;
    bool host_full = false;
    CUdeviceptr first_ptr = alloc_sized(bytes, 900), second_ptr = alloc_sized(bytes, 901);
    vs_engine_lock(&mode);
    vs_engine_device_t *d = vs_engine_device(0);
    assert_non_null(d);
    d->filler_bytes = bytes;
    vs_region_t *first = vs_engine_region_at((uintptr_t)first_ptr), *second = vs_engine_region_at((uintptr_t)second_ptr);
    uint64_t used = vs_cap_used(0);
    assert_int_equal(vs_engine_evict(&first, 1, &host_full), bytes);
    assert_true(d->filler_phys != 0);
    assert_int_equal(vs_cap_used(0), used); /* held, charged */
    assert_int_equal(vs_engine_evict(&second, 1, &host_full), bytes);
    assert_int_equal(vs_cap_used(0), used - bytes); /* one held at a time */
    /* The second's memory, the device's spare for this hold of the lock,
     * goes when it is let go; the held memory stays. */
    vs_engine_unlock(mode);
    vs_engine_lock(&mode);
    assert_true(d->filler_phys != 0);

    uint64_t creates = driver_calls("cuMemCreate"), filler_maps = vs_engine.stats.filler_maps;
    assert_true(vs_engine_filler_take(d, bytes));
    assert_int_equal(vs_engine_restore_mapped(first, d, NULL, false, true), CUDA_SUCCESS);
    vs_arrive_join_all();
    assert_int_equal(driver_calls("cuMemCreate"), creates);
    assert_int_equal(vs_engine.stats.filler_maps, filler_maps + 1);
    assert_int_equal(d->filler_phys, 0);
    assert_int_equal(vs_cap_used(0), used - bytes);
    vs_engine_unlock(mode);
    expect_sized(first_ptr, bytes, 900);
    expect_sized(second_ptr, bytes, 901);

    vs_engine_lock(&mode);
    used = vs_cap_used(0);
    assert_int_equal(vs_engine_evict(&first, 1, &host_full), bytes);
    assert_true(d->filler_phys != 0);
    assert_true(vs_engine_heads_release(0) >= bytes);
    assert_int_equal(d->filler_phys, 0);
    assert_int_equal(vs_cap_used(0), used - bytes);
    d->filler_bytes = 0;
    vs_engine_unlock(mode);
    expect_sized(first_ptr, bytes, 900);
    expect_sized(second_ptr, bytes, 901);
    free_regions((const CUdeviceptr[]){first_ptr, second_ptr}, 2);
}

/* A departure of two victims, one of which lends its memory to a restore
 * mapped ahead (`vs_engine_departures_finish_lender`): once the departure
 * is over, the lender alone leaves, and the restore's copy queues while the
 * other victim is still mapped, charged and moving; the next advance
 * finishes it without waiting. Every byte of all three comes back. */
static void test_offload_engine_lender_leaves_before_the_rest_of_its_departure(void **state)
{
    (void)state;
    CUdeviceptr regions[TRIO];
    vs_region_t *r[TRIO];
    CUstreamCaptureMode mode;
    vs_engine_device_t *d = lend_setup(regions, r, 400, &mode);
    assert_true(vs_engine_premap(r[TRIO_BORROWER], r[TRIO_LENDER]));
    uint64_t used = vs_cap_used(0);
    assert_int_equal(vs_engine_departures_finish_lender(d, r[TRIO_LENDER]), REGION_BYTES);
    assert_int_equal(vs_cap_used(0), used - REGION_BYTES);
    assert_int_equal(r[TRIO_LENDER]->where, VS_ON_HOST);
    /* The other victim has not left: still mapped, charged and moving. */
    uint64_t departing = 0;
    assert_int_equal(vs_engine_departures(d, &departing), 1);
    assert_int_equal(departing, REGION_BYTES);
    assert_true(r[TRIO_OTHER]->evicting);
    assert_int_not_equal(r[TRIO_OTHER]->phys, 0);
    assert_int_equal(vs_cap_reserve(0, r[TRIO_BORROWER]->reserved), 0);
    assert_int_equal(vs_engine_restore_mapped(r[TRIO_BORROWER], d, NULL, false, true), CUDA_SUCCESS);
    vs_engine_lent_unmap();
    /* Over already: finished without a wait. */
    assert_int_equal(vs_engine_departures_advance(d, false, false), REGION_BYTES);
    assert_int_equal(vs_engine_departures(d, NULL), 0);
    assert_int_equal(r[TRIO_OTHER]->where, VS_ON_HOST);
    assert_int_equal(r[TRIO_OTHER]->phys, 0);
    assert_int_equal(vs_cap_used(0), used - REGION_BYTES);
    vs_engine_unlock(mode);
    for (int i = TRIO - 1; i >= 0; i--)
        expect_region(regions[i], 400 + (unsigned)i);
    free_regions(regions, TRIO);
}

/* An operation that needs an evicted region while two regions depart, one
 * of its size (a restore on demand, not a prefetch): the restore maps
 * ahead onto that region's memory before it waits for the departure, so
 * that once the departure is over only its copy is left to queue; then
 * the departure's other region leaves too, as the usual path's wait lets
 * it. Both departed regions are on the host, and every byte of the three
 * comes back. */
static void test_offload_engine_restore_on_demand_maps_ahead(void **state)
{
    (void)state;
    CUdeviceptr regions[TRIO];
    vs_region_t *r[TRIO];
    CUstreamCaptureMode mode;
    vs_engine_device_t *d = lend_setup(regions, r, 500, &mode);
    uint64_t mapped_ahead = vs_engine.stats.mapped_ahead;

    /* The restore an operation makes (offload_ops.c): no room until the
     * departure ends. What it left is read under the lock and checked
     * after it (a failed check must not leave the lock held for the tests
     * after this one). */
    CUresult rc = vs_engine_restore(r[TRIO_BORROWER], NULL, false, 0);
    uint64_t mapped_after = vs_engine.stats.mapped_ahead;
    size_t departures = vs_engine_departures(d, NULL);
    vs_residency_t lender_where = r[TRIO_LENDER]->where, other_where = r[TRIO_OTHER]->where,
                   borrower_where = r[TRIO_BORROWER]->where;
    bool under_limit = vs_cap_used(0) <= vs_cap_limit(0);
    vs_engine_unlock(mode);
    assert_int_equal(rc, CUDA_SUCCESS);
    assert_int_equal(mapped_after, mapped_ahead + 1);
    assert_int_equal(departures, 0);
    assert_int_equal(lender_where, VS_ON_HOST);
    assert_int_equal(other_where, VS_ON_HOST);
    assert_int_equal(borrower_where, VS_RESIDENT);
    assert_true(under_limit);
    for (int i = TRIO - 1; i >= 0; i--)
        expect_region(regions[i], 500 + (unsigned)i);
    free_regions(regions, TRIO);
}

/* A restore that maps ahead onto the oldest departure's region, with a
 * younger departure queued behind it whose hash is over: the restore's wait
 * reads the oldest departure's verdicts alone, and the younger one's only
 * once the restore's copy is queued, so that no poll of it (1.3 us each on
 * an H100) lies between the oldest's end and that copy. Every byte of the
 * three comes back. */
static void test_offload_engine_restore_reads_younger_verdicts_after_its_copy(void **state)
{
    (void)state;
    CUdeviceptr regions[TRIO];
    vs_region_t *r[TRIO];
    CUstreamCaptureMode mode;
    vs_engine_device_t *d = trio_setup(regions, r, 600, &mode);
    /* Two departures, the lender's first; both hashes over (the driver's
     * own synchronisation: the engine's hooks are not in this path). */
    assert_true(vs_engine_depart(d, 0, &r[TRIO_LENDER], 1));
    assert_true(vs_engine_depart(d, 0, &r[TRIO_OTHER], 1));
    assert_int_equal(VS_CALL(cuCtxSynchronize, ()), CUDA_SUCCESS);
    assert_ptr_equal(vs_engine_departure_lender(d, r[TRIO_BORROWER]), r[TRIO_LENDER]);

    uint64_t freed = 0;
    bool lent = vs_engine_departure_lend(d, 0, r[TRIO_BORROWER], r[TRIO_LENDER], r[TRIO_BORROWER]->reserved, &freed);
    const vs_eviction_t *younger = d->departures;
    bool younger_left = younger != NULL, younger_read_at_wait = younger_left && younger->verdicts_read;
    bool deferred = d->verdicts_deferred;
    CUresult rc = lent ? vs_engine_restore_mapped(r[TRIO_BORROWER], d, NULL, false, true) : CUDA_ERROR_UNKNOWN;
    bool younger_read_after_copy = d->departures == younger && younger != NULL && younger->verdicts_read;
    bool deferred_after = d->verdicts_deferred;
    vs_engine_lent_unmap();
    vs_engine_departures_settle();
    size_t departures = vs_engine_departures(d, NULL);
    vs_residency_t other_where = r[TRIO_OTHER]->where;
    vs_engine_unlock(mode);

    assert_true(lent);
    assert_int_equal(freed, REGION_BYTES);
    assert_true(younger_left);
    assert_false(younger_read_at_wait);
    assert_true(deferred);
    assert_int_equal(rc, CUDA_SUCCESS);
    assert_true(younger_read_after_copy);
    assert_false(deferred_after);
    assert_int_equal(departures, 0);
    assert_int_equal(other_where, VS_ON_HOST);
    for (int i = TRIO - 1; i >= 0; i--)
        expect_region(regions[i], 600 + (unsigned)i);
    free_regions(regions, TRIO);
}

/* The host function that holds a stream until the test lets it go. */
static void hold_stream(void *flag)
{
    while (!atomic_load((_Atomic bool *)flag))
        usleep(1000);
}

/* Two departures: the older one's victim was written since its host copy
 * was made (its verdict finds it changed), the younger one's is used by an
 * application stream held by a host function, so the younger departure's
 * fence and hash wait for the application. The older one's copy out,
 * queued once its verdict is read, must not wait behind them: it runs on
 * the engine's stream for changed victims (`to_host_changed`), and the
 * departure ends while the application's stream is still held (on the
 * device-to-host stream, behind the younger fence, it never would: the
 * offload_throughput benchmark lost 1.4 ms a run to that wait). Every byte
 * of both comes back. */
static void test_offload_engine_changed_copy_out_does_not_wait_behind_a_younger_fence(void **state)
{
    (void)state;
    CUdeviceptr regions[TRIO];
    vs_region_t *r[TRIO];
    CUstreamCaptureMode mode;
    vs_engine_device_t *d = trio_setup(regions, r, 700, &mode);
    /* The lender gets a host copy, comes back, and is then written anew. */
    bool host_full = false;
    assert_int_equal(vs_engine_evict(&r[TRIO_LENDER], 1, &host_full), REGION_BYTES);
    assert_int_equal(vs_cap_reserve(0, vs_engine_region_missing(r[TRIO_LENDER])), 0);
    assert_int_equal(vs_engine_restore_mapped(r[TRIO_LENDER], d, NULL, false, false), CUDA_SUCCESS);
    vs_engine_deferred_reap(true);
    vs_engine_unlock(mode);
    unsigned char *bytes = malloc(REGION_BYTES);
    assert_non_null(bytes);
    fill(bytes, REGION_BYTES, 777);
    assert_int_equal(copy_to_device(regions[TRIO_LENDER], bytes, REGION_BYTES), CUDA_SUCCESS);

    /* The other region is read on a stream the host function holds. */
    CUstream app;
    assert_int_equal(VS_CALL(cuStreamCreate, (&app, CU_STREAM_NON_BLOCKING)), CUDA_SUCCESS);
    static _Atomic bool release;
    atomic_store(&release, false);
    CUresult (*launch_host_func)(CUstream, CUhostFn, void *);
    *(void **)&launch_host_func = driver_symbol("cuLaunchHostFunc");
    assert_non_null(launch_host_func);
    assert_int_equal(launch_host_func(app, hold_stream, (void *)&release), CUDA_SUCCESS);
    void *pinned = NULL; /* a copy into pageable memory would not return before the host function */
    assert_int_equal(VS_CALL(cuMemAllocHost_v2, (&pinned, REGION_BYTES)), CUDA_SUCCESS);
    CUresult rc = CUDA_SUCCESS;
    uintptr_t words[1] = {(uintptr_t)regions[TRIO_OTHER]};
    VS_OPERATE(rc, "copy", app, false, words, 1,
               VS_CALL(cuMemcpyDtoHAsync_v2, (pinned, regions[TRIO_OTHER], REGION_BYTES, app)));
    assert_int_equal(rc, CUDA_SUCCESS);

    vs_engine_lock(&mode);
    vs_region_t *lender = r[TRIO_LENDER], *other = r[TRIO_OTHER];
    bool departed = vs_engine_depart(d, 0, &lender, 1);
    /* Its hash is over before the younger departure starts. */
    CUresult synced = VS_CALL(cuStreamSynchronize, (d->to_host));
    departed = departed && synced == CUDA_SUCCESS && vs_engine_depart(d, 0, &other, 1);
    /* Its verdict, and its copy out, without waiting for anything. */
    bool lender_left = false;
    for (int tries = 0; departed && tries < 5000 && !lender_left; tries++) {
        (void)vs_engine_departures_advance(d, false, true);
        lender_left = lender->where == VS_ON_HOST;
        if (!lender_left) {
            vs_engine_unlock(mode);
            usleep(1000);
            vs_engine_lock_light(&mode); /* vs_engine_lock would wait for every departure */
        }
    }
    bool other_waits = other->evicting && other->where == VS_RESIDENT;
    uint64_t changed = vs_engine.stats.bytes_to_host;
    vs_engine_unlock(mode);
    atomic_store(&release, true);
    assert_int_equal(VS_CALL(cuStreamSynchronize, (app)), CUDA_SUCCESS);
    vs_engine_lock(&mode);
    vs_engine_departures_settle();
    vs_residency_t other_where = other->where;
    vs_engine_unlock(mode);

    assert_true(departed);
    assert_true(lender_left);
    assert_true(other_waits);
    assert_true(changed >= REGION_BYTES);
    assert_int_equal(other_where, VS_ON_HOST);
    assert_int_equal(VS_CALL(cuStreamDestroy_v2, (app)), CUDA_SUCCESS);
    assert_int_equal(VS_CALL(cuMemFreeHost, (pinned)), CUDA_SUCCESS);
    free(bytes);
    expect_region(regions[TRIO_LENDER], 777);
    expect_region(regions[TRIO_OTHER], 700 + TRIO_OTHER);
    free_regions(regions, TRIO);
}

/* Allocates a region filled from `seed` at *dptr, takes the engine lock
 * and evicts the region whole, which leaves the hash of its whole host
 * copy known (in *whole, when given). */
static vs_region_t *filled_and_evicted_whole(unsigned seed, CUdeviceptr *dptr, CUstreamCaptureMode *mode,
                                             vs_engine_device_t **d, vs_content_hash_t *whole)
{
    alloc_filled(dptr, 1, seed);
    vs_engine_lock(mode);
    vs_region_t *r = vs_engine_region_at((uintptr_t)*dptr);
    assert_non_null(r);
    *d = vs_engine_device(0);
    assert_non_null(*d);
    bool host_full = false;
    assert_int_equal(vs_engine_evict(&r, 1, &host_full), REGION_BYTES);
    vs_content_hash_t known;
    assert_true(vs_engine_host_hash(r, 0, whole != NULL ? whole : &known));
    return r;
}

/* The plan keeps no head of `r` (resident, at `dptr`, filled from `seed`):
 * its eviction moves everything, judged clean (nothing copied, no change
 * counted); then the lock is let go, every byte checked, and it is freed. */
static void evict_whole_clean_unlock_and_free(vs_region_t *r, CUdeviceptr dptr, unsigned seed,
                                              CUstreamCaptureMode mode)
{
    r->keep = 0;
    vs_offload_stats_t before = vs_engine.stats;
    bool host_full = false;
    assert_int_equal(vs_engine_evict(&r, 1, &host_full), REGION_BYTES);
    assert_int_equal(r->where, VS_ON_HOST);
    assert_int_equal(r->split, 0);
    assert_int_equal(vs_engine.stats.clean_drops, before.clean_drops + 1);
    assert_int_equal(vs_engine.stats.bytes_to_host, before.bytes_to_host);
    assert_int_equal(r->changed_streak, 0);
    vs_engine_unlock(mode);
    expect_region(dptr, seed);
    CUresult rc = CUDA_ERROR_UNKNOWN;
    assert_true(vs_offload_free(dptr, &rc));
    assert_int_equal(rc, CUDA_SUCCESS);
}

/* A restore whose head the plan keeps hashes only its tail as it arrives
 * (its evictions will move only the tail). When the plan drops the head
 * before the next eviction, that eviction moves all the bytes, and the host
 * copy's hash of all of them, known from before, must still judge it: a
 * region nobody wrote leaves clean, nothing copied, and is not taken for
 * one written at every use (whose evictions then copy without a verdict). */
static void test_offload_engine_dropped_head_still_judged_clean(void **state)
{
    (void)state;
    const uint64_t head = REGION_BYTES / 2;
    const unsigned seed = 300;
    CUdeviceptr dptr;
    CUstreamCaptureMode mode;
    vs_engine_device_t *d;
    vs_region_t *r = filled_and_evicted_whole(seed, &dptr, &mode, &d, NULL);

    /* Back in two pieces, the plan keeping the head: the tail's restore
     * hashes the tail, and is still arriving. */
    r->keep = head;
    assert_int_equal(vs_cap_reserve(0, head), 0);
    assert_int_equal(vs_engine_restore_head(r, head), CUDA_SUCCESS);
    assert_int_equal(vs_cap_reserve(0, vs_engine_region_missing(r)), 0);
    assert_int_equal(vs_engine_restore_mapped(r, d, NULL, false, true), CUDA_SUCCESS);
    assert_int_equal(r->split, head);
    assert_non_null(r->arriving);

    /* The plan no longer keeps it: the eviction moves everything. */
    evict_whole_clean_unlock_and_free(r, dptr, seed, mode);
}

/* A head kept across evictions that judge the tail alone: the host copy's
 * hash of the whole, known from before, outlives them (they leave the host
 * copy as it was), so that when the plan gives the head to another
 * allocation, the eviction that moves everything is judged by it and drops
 * a region nobody wrote clean, instead of copying all of it out for want
 * of a hash (the DiT on an H200: 255-290 MiB a pass copied out). */
static void test_offload_engine_whole_hash_outlives_tail_evictions(void **state)
{
    (void)state;
    const uint64_t head = REGION_BYTES / 2;
    const unsigned seed = 310;
    CUdeviceptr dptr;
    CUstreamCaptureMode mode;
    vs_engine_device_t *d;
    vs_content_hash_t whole, tail;
    vs_region_t *r = filled_and_evicted_whole(seed, &dptr, &mode, &d, &whole);
    bool host_full = false;

    /* Twice: back with the head kept, then the tail leaves (judged by
     * the tail's hash). */
    r->keep = head;
    for (int round = 0; round < 2; round++) {
        assert_int_equal(vs_cap_reserve(0, vs_engine_region_missing(r)), 0);
        assert_int_equal(vs_engine_restore_mapped(r, d, NULL, false, false), CUDA_SUCCESS);
        assert_int_equal(r->split, head);
        vs_engine_deferred_reap(true);
        vs_offload_stats_t before = vs_engine.stats;
        assert_int_equal(vs_engine_evict(&r, 1, &host_full), REGION_BYTES - head);
        assert_int_equal(vs_engine.stats.clean_drops, before.clean_drops + 1);
        assert_int_equal(r->split, head);
        assert_true(vs_engine_host_hash(r, head, &tail));
        vs_content_hash_t still;
        assert_true(vs_engine_host_hash(r, 0, &still));
        assert_true(vs_content_hash_equal(still, whole));
    }

    /* The plan gives the head away: back, then everything leaves. */
    assert_int_equal(vs_cap_reserve(0, vs_engine_region_missing(r)), 0);
    assert_int_equal(vs_engine_restore_mapped(r, d, NULL, false, false), CUDA_SUCCESS);
    vs_engine_deferred_reap(true);
    evict_whole_clean_unlock_and_free(r, dptr, seed, mode);
}

/* The engine's streams run at the context's greatest priority, so that its
 * content hashes are not queued behind the application's kernels. */
static void test_offload_engine_streams_have_the_greatest_priority(void **state)
{
    (void)state;
    CUdeviceptr region;
    alloc_filled(&region, 1, 71);
    CUstreamCaptureMode mode;
    vs_engine_lock(&mode);
    vs_engine_device_t *d = vs_engine_device(0);
    CUstream to_host = d != NULL ? d->to_host : NULL, to_device = d != NULL ? d->to_device : NULL;
    CUstream to_host_changed = d != NULL ? d->to_host_changed : NULL;
    vs_engine_unlock(mode);
    assert_non_null(to_host);
    assert_non_null(to_device);
    assert_non_null(to_host_changed);
    CUresult (*range)(int *, int *);
    CUresult (*priority_of)(CUstream, int *);
    *(void **)&range = driver_symbol("cuCtxGetStreamPriorityRange");
    *(void **)&priority_of = driver_symbol("cuStreamGetPriority");
    assert_non_null(range);
    assert_non_null(priority_of);
    int least = 0, greatest = 0, host_side = 0, device_side = 0, changed_side = 0;
    assert_int_equal(range(&least, &greatest), CUDA_SUCCESS);
    assert_true(greatest < least);
    assert_int_equal(priority_of(to_host, &host_side), CUDA_SUCCESS);
    assert_int_equal(priority_of(to_device, &device_side), CUDA_SUCCESS);
    assert_int_equal(priority_of(to_host_changed, &changed_side), CUDA_SUCCESS);
    assert_int_equal(host_side, greatest);
    assert_int_equal(device_side, greatest);
    assert_int_equal(changed_side, greatest);
    free_regions(&region, 1);
}

int main(void)
{
    /* Before the first configuration read: offload mode, a limit of two
     * and a half regions, the learned policy without prefetch (no
     * prediction decides what the test sees). */
    setenv("VRAM_LIMIT", "20M", 1);
    setenv("VRAMSHIM_MODE", "offload", 1);
    setenv("VRAMSHIM_PREFETCH", "off", 1);
    /* A device that memory from outside the engine can fill quickly. */
    setenv("SIMCUDA_DEVICE_MEM", "256M", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offload_engine_evict_restore_is_byte_exact),
        cmocka_unit_test(test_offload_engine_free_of_foreign_pointer_declines),
        cmocka_unit_test(test_offload_engine_device_full_restore_keeps_its_head),
        cmocka_unit_test(test_offload_engine_head_and_tail_unmapped_behind_the_next_copy),
        cmocka_unit_test(test_offload_engine_mapping_ahead_onto_head_and_tail),
        cmocka_unit_test(test_offload_engine_tail_mapped_ahead_onto_a_departing_tail),
        cmocka_unit_test(test_offload_engine_pieces_lend_across_sizes),
        cmocka_unit_test(test_offload_engine_fine_pieces_swap_tails_under_unlike_heads),
        cmocka_unit_test(test_offload_engine_filler_memory_is_held_for_the_next_filler),
        cmocka_unit_test(test_offload_engine_lender_leaves_before_the_rest_of_its_departure),
        cmocka_unit_test(test_offload_engine_restore_on_demand_maps_ahead),
        cmocka_unit_test(test_offload_engine_restore_reads_younger_verdicts_after_its_copy),
        cmocka_unit_test(test_offload_engine_changed_copy_out_does_not_wait_behind_a_younger_fence),
        cmocka_unit_test(test_offload_engine_dropped_head_still_judged_clean),
        cmocka_unit_test(test_offload_engine_whole_hash_outlives_tail_evictions),
        cmocka_unit_test(test_offload_engine_streams_have_the_greatest_priority),
    };
    return cmocka_run_group_tests_name("offload engine", tests, setup_driver, NULL);
}

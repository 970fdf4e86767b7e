/* test_host_pool.c: unit tests of shim/host_pool.c, the pinned host memory
 * evicted allocations are copied to: takes within and past the limit,
 * rounding to 2 MiB blocks, one extent while the pool is not fragmented and
 * several once it is, slab growth bounded by the limit, stats, destroy, pin
 * failures, and concurrent takes that must never share memory.
 *
 * Pinning is faked with anonymous mappings (`fake_pin`, installed per test
 * through `vs_host_pool_configure`): slabs of hundreds of MiB cost nothing
 * until touched, whatever MALLOC_PERTURB_ says. The fake records every slab
 * so the tests can check that extents lie inside pinned slabs and that
 * destroy unpins each slab exactly once. Every test ends with
 * `vs_host_pool_destroy`. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "host_pool.h"

#define MiB (1ull << 20)
#define BLOCK VS_HOST_BLOCK_BYTES
#define SLAB VS_HOST_SLAB_BYTES

/* ---- The fake pinning functions ----------------------------------------- */

#define FAKE_MAX_SLABS 64

typedef struct fake_slab_s {
    unsigned char *base;
    uint64_t bytes;
    int unpins; /* times unpinned: must end at exactly 1 */
} fake_slab_t;

/* Touched only from inside the pool's lock (pin and unpin are called with it
 * held) or from the test's main thread while no other thread runs. */
static struct {
    fake_slab_t slabs[FAKE_MAX_SLABS];
    int slab_count;
    int pin_calls;
    int unpin_calls;
    int unknown_unpins; /* unpin of a pointer never pinned */
    bool fail_pins;     /* every pin fails with -ENOMEM */
} fake;

/* The owner every pin reports: what the shim's pins depend on (a context). */
static char fake_owner_a, fake_owner_b;

static int fake_pin(void **ptr, uint64_t bytes, void **owner)
{
    *owner = &fake_owner_a;
    fake.pin_calls++;
    if (fake.fail_pins || fake.slab_count == FAKE_MAX_SLABS)
        return -ENOMEM;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    fake.slabs[fake.slab_count++] = (fake_slab_t){.base = p, .bytes = bytes};
    *ptr = p;
    return 0;
}

static void fake_unpin(void *ptr, uint64_t bytes, void *owner)
{
    (void)bytes;
    (void)owner;
    fake.unpin_calls++;
    /* Newest first: mmap may hand a freed slab's address to a later one. */
    for (int i = fake.slab_count - 1; i >= 0; i--) {
        if (fake.slabs[i].base == ptr) {
            if (fake.slabs[i].unpins++ == 0)
                munmap(ptr, fake.slabs[i].bytes);
            return;
        }
    }
    fake.unknown_unpins++;
}

static int setup_pool(void **state)
{
    (void)state;
    memset(&fake, 0, sizeof fake);
    return 0;
}

/* Destroys the pool; every slab pinned must have been unpinned once. */
static int teardown_pool(void **state)
{
    (void)state;
    vs_host_pool_destroy();
    for (int i = 0; i < fake.slab_count; i++) {
        if (fake.slabs[i].unpins != 1)
            return -1;
    }
    return fake.unknown_unpins == 0 ? 0 : -1;
}

static void configure(uint64_t limit)
{
    vs_host_pool_configure(limit, fake_pin, fake_unpin);
}

static vs_host_pool_stats_t stats(void)
{
    vs_host_pool_stats_t s;
    vs_host_pool_stats(&s);
    return s;
}

static uint64_t round_to_blocks(uint64_t bytes)
{
    return (bytes + BLOCK - 1) / BLOCK * BLOCK;
}

/* ---- Checks on copies ----------------------------------------------------- */

/* The fake slab that holds [ptr, ptr + bytes) at a block boundary, or -1. */
static int slab_holding(const void *ptr, uint64_t bytes)
{
    const unsigned char *p = ptr;
    for (int i = 0; i < fake.slab_count; i++) {
        const fake_slab_t *s = &fake.slabs[i];
        if (s->unpins == 0 && p >= s->base && p + bytes <= s->base + s->bytes && (uint64_t)(p - s->base) % BLOCK == 0)
            return i;
    }
    return -1;
}

/* A copy for `asked` bytes: whole blocks adding up to `asked` rounded up,
 * each extent inside one pinned slab at a block boundary. */
static void assert_copy_well_formed(const vs_host_copy_t *copy, uint64_t asked)
{
    uint64_t sum = 0;
    assert_int_equal(copy->bytes, round_to_blocks(asked));
    assert_true(copy->count >= 1);
    assert_non_null(copy->extents);
    for (uint32_t i = 0; i < copy->count; i++) {
        const vs_host_extent_t *e = &copy->extents[i];
        assert_true(e->bytes > 0);
        assert_int_equal(e->bytes % BLOCK, 0);
        if (slab_holding(e->ptr, e->bytes) < 0)
            fail_msg("extent %u (%p, %llu bytes) is not inside a pinned slab at a block boundary", i, e->ptr,
                     (unsigned long long)e->bytes);
        sum += e->bytes;
    }
    assert_int_equal(sum, copy->bytes);
}

static bool extents_overlap(const vs_host_extent_t *a, const vs_host_extent_t *b)
{
    const unsigned char *pa = a->ptr, *pb = b->ptr;
    return pa < pb + b->bytes && pb < pa + a->bytes;
}

/* No extent of any copy overlaps another extent, of the same copy or not. */
static void assert_copies_disjoint(const vs_host_copy_t *copies, size_t count)
{
    for (size_t i = 0; i < count; i++)
        for (uint32_t x = 0; x < copies[i].count; x++)
            for (size_t j = i; j < count; j++)
                for (uint32_t y = (j == i ? x + 1 : 0); y < copies[j].count; y++)
                    if (extents_overlap(&copies[i].extents[x], &copies[j].extents[y]))
                        fail_msg("copy %zu extent %u overlaps copy %zu extent %u", i, x, j, y);
}

static void take_ok(uint64_t bytes, vs_host_copy_t *copy)
{
    assert_int_equal(vs_host_pool_take(bytes, copy), 0);
    assert_copy_well_formed(copy, bytes);
}

/* ---- Limits and rounding -------------------------------------------------- */

static void test_host_pool_take_within_limit_is_one_extent(void **state)
{
    vs_host_copy_t copy;
    (void)state;
    configure(64 * MiB);
    take_ok(10 * MiB, &copy);
    assert_int_equal(copy.count, 1);
    assert_int_equal(copy.extents[0].bytes, 10 * MiB);
    assert_int_equal(stats().used, 10 * MiB);
    vs_host_pool_give(&copy);
    assert_int_equal(copy.count, 0);
    assert_null(copy.extents);
    assert_int_equal(stats().used, 0);
}

static void test_host_pool_take_rounds_up_to_whole_2mib_blocks(void **state)
{
    vs_host_copy_t one_byte, exact, one_over, odd;
    (void)state;
    configure(64 * MiB);
    take_ok(1, &one_byte);
    assert_int_equal(one_byte.bytes, 2 * MiB);
    take_ok(2 * MiB, &exact);
    assert_int_equal(exact.bytes, 2 * MiB);
    take_ok(2 * MiB + 1, &one_over);
    assert_int_equal(one_over.bytes, 4 * MiB);
    take_ok(3 * MiB + 123, &odd);
    assert_int_equal(odd.bytes, 4 * MiB);
    assert_int_equal(stats().used, 12 * MiB);
    vs_host_copy_t all[] = {one_byte, exact, one_over, odd};
    assert_copies_disjoint(all, 4);
    vs_host_pool_give(&one_byte);
    vs_host_pool_give(&exact);
    vs_host_pool_give(&one_over);
    vs_host_pool_give(&odd);
    assert_int_equal(stats().used, 0);
}

static void test_host_pool_take_of_zero_bytes_is_empty_and_pins_nothing(void **state)
{
    vs_host_copy_t copy;
    (void)state;
    configure(64 * MiB);
    assert_int_equal(vs_host_pool_take(0, &copy), 0);
    assert_int_equal(copy.count, 0);
    assert_int_equal(copy.bytes, 0);
    assert_int_equal(fake.pin_calls, 0);
    vs_host_pool_give(&copy); /* giving an empty copy back is harmless */
    assert_int_equal(stats().used, 0);
}

static void test_host_pool_take_past_the_limit_is_enospc_and_pins_nothing(void **state)
{
    vs_host_copy_t copy, whole;
    (void)state;
    configure(16 * MiB);
    assert_int_equal(vs_host_pool_take(16 * MiB + 1, &copy), -ENOSPC);
    assert_int_equal(copy.count, 0);
    assert_int_equal(fake.pin_calls, 0);
    assert_int_equal(stats().pinned, 0);
    take_ok(16 * MiB, &whole);
    assert_int_equal(vs_host_pool_take(1, &copy), -ENOSPC);
    assert_int_equal(copy.count, 0);
    assert_int_equal(stats().used, 16 * MiB);
    assert_int_equal(stats().pinned, 16 * MiB);
    vs_host_pool_give(&whole);
}

static void test_host_pool_limit_is_rounded_down_to_whole_blocks(void **state)
{
    vs_host_copy_t copy;
    (void)state;
    configure(17 * MiB);
    assert_int_equal(stats().limit, 16 * MiB);
    assert_int_equal(vs_host_pool_take(17 * MiB, &copy), -ENOSPC);
    take_ok(16 * MiB, &copy);
    assert_int_equal(stats().pinned, 16 * MiB);
    vs_host_pool_give(&copy);
}

/* A size whose block count does not fit 32 bits must not wrap to a small
 * (or empty) copy: it is past any limit. */
static void test_host_pool_take_of_a_huge_size_is_enospc(void **state)
{
    vs_host_copy_t copy;
    (void)state;
    configure(64 * MiB);
    assert_int_equal(vs_host_pool_take(1ull << 53, &copy), -ENOSPC); /* 2^32 blocks */
    assert_int_equal(copy.count, 0);
    assert_int_equal(vs_host_pool_take((1ull << 53) + 2 * MiB, &copy), -ENOSPC); /* 2^32 + 1 blocks */
    assert_int_equal(copy.count, 0);
    assert_int_equal(vs_host_pool_take(UINT64_MAX, &copy), -ENOSPC);
    assert_int_equal(copy.count, 0);
    assert_int_equal(stats().used, 0);
}

/* ---- Extents: contiguous, then gathered ---------------------------------- */

static void test_host_pool_unfragmented_takes_are_single_contiguous_extents(void **state)
{
    static const uint64_t sizes[] = {2 * MiB, 6 * MiB + 1, 1, 10 * MiB, 4 * MiB, 3 * MiB};
    vs_host_copy_t copies[6];
    (void)state;
    configure(64 * MiB);
    for (size_t i = 0; i < 6; i++) {
        take_ok(sizes[i], &copies[i]);
        assert_int_equal(copies[i].count, 1);
    }
    assert_copies_disjoint(copies, 6);
    assert_int_equal(fake.pin_calls, 1);
    for (size_t i = 0; i < 6; i++)
        vs_host_pool_give(&copies[i]);
    /* All given back: the pool is one free run again, so the largest copy
     * the limit allows is still one extent. */
    take_ok(64 * MiB, &copies[0]);
    assert_int_equal(copies[0].count, 1);
    vs_host_pool_give(&copies[0]);
}

/* Fills a 16 MiB pool with eight 2 MiB copies. */
static void fill_eight_blocks(vs_host_copy_t blocks[8])
{
    configure(16 * MiB);
    for (int i = 0; i < 8; i++) {
        take_ok(2 * MiB, &blocks[i]);
        assert_int_equal(blocks[i].count, 1);
    }
    assert_int_equal(stats().used, 16 * MiB);
}

static void test_host_pool_fragmented_take_gathers_from_several_runs(void **state)
{
    vs_host_copy_t blocks[8], gathered;
    static const int freed[] = {0, 2, 4, 6};
    vs_host_extent_t freed_extents[4];
    (void)state;
    fill_eight_blocks(blocks);
    for (int i = 0; i < 4; i++) {
        freed_extents[i] = blocks[freed[i]].extents[0];
        vs_host_pool_give(&blocks[freed[i]]);
    }
    /* Four free blocks, no two adjacent: 8 MiB fits only as four runs. */
    take_ok(8 * MiB, &gathered);
    assert_int_equal(gathered.count, 4);
    bool seen[4] = {false, false, false, false};
    for (uint32_t e = 0; e < gathered.count; e++) {
        assert_int_equal(gathered.extents[e].bytes, 2 * MiB);
        int hit = -1;
        for (int i = 0; i < 4; i++)
            if (freed_extents[i].ptr == gathered.extents[e].ptr)
                hit = i;
        if (hit < 0 || seen[hit])
            fail_msg("extent %u is not one of the freed blocks, or repeats one", e);
        seen[hit] = true;
    }
    assert_int_equal(stats().used, 16 * MiB);
    assert_int_equal(stats().pinned, 16 * MiB);
    assert_int_equal(fake.pin_calls, 1);
    vs_host_copy_t live[] = {blocks[1], blocks[3], blocks[5], blocks[7], gathered};
    assert_copies_disjoint(live, 5);
    vs_host_pool_give(&gathered);
    for (int i = 1; i < 8; i += 2)
        vs_host_pool_give(&blocks[i]);
    assert_int_equal(stats().used, 0);
}

static void test_host_pool_take_prefers_one_free_run_to_gathering(void **state)
{
    vs_host_copy_t blocks[8], three, four;
    static const int freed[] = {1, 3, 4, 5};
    (void)state;
    fill_eight_blocks(blocks);
    vs_host_extent_t single = blocks[1].extents[0], run_start = blocks[3].extents[0];
    for (int i = 0; i < 4; i++)
        vs_host_pool_give(&blocks[freed[i]]);
    /* Free runs: block 1 alone, blocks 3-5 together. Three blocks fit the
     * longer run whole. */
    take_ok(6 * MiB, &three);
    assert_int_equal(three.count, 1);
    assert_ptr_equal(three.extents[0].ptr, run_start.ptr);
    vs_host_pool_give(&three);
    /* Four blocks need both runs: two extents, 6 MiB and 2 MiB. */
    take_ok(8 * MiB, &four);
    assert_int_equal(four.count, 2);
    uint64_t a = four.extents[0].bytes, b = four.extents[1].bytes;
    assert_true((a == 6 * MiB && b == 2 * MiB) || (a == 2 * MiB && b == 6 * MiB));
    const vs_host_extent_t *small = a == 2 * MiB ? &four.extents[0] : &four.extents[1];
    const vs_host_extent_t *large = a == 2 * MiB ? &four.extents[1] : &four.extents[0];
    assert_ptr_equal(small->ptr, single.ptr);
    assert_ptr_equal(large->ptr, run_start.ptr);
    static const int kept[] = {0, 2, 6, 7};
    vs_host_copy_t live[] = {blocks[0], blocks[2], blocks[6], blocks[7], four};
    assert_copies_disjoint(live, 5);
    assert_int_equal(fake.pin_calls, 1);
    vs_host_pool_give(&four);
    for (int i = 0; i < 4; i++)
        vs_host_pool_give(&blocks[kept[i]]);
}

/* ---- Growth ---------------------------------------------------------------- */

static void test_host_pool_small_takes_fill_a_slab_before_pinning_another(void **state)
{
    enum { LIMIT_BLOCKS = 150 }; /* 300 MiB: one full slab, then 44 MiB */
    vs_host_copy_t copies[LIMIT_BLOCKS], refused;
    (void)state;
    configure(LIMIT_BLOCKS * BLOCK);
    uint64_t blocks_per_slab = SLAB / BLOCK;
    for (int i = 0; i < LIMIT_BLOCKS; i++) {
        take_ok(BLOCK, &copies[i]);
        assert_int_equal(copies[i].count, 1);
        assert_int_equal(fake.pin_calls, (uint64_t)i < blocks_per_slab ? 1 : 2);
    }
    assert_int_equal(fake.slabs[0].bytes, SLAB);
    assert_int_equal(fake.slabs[1].bytes, LIMIT_BLOCKS * BLOCK - SLAB);
    assert_int_equal(stats().pinned, LIMIT_BLOCKS * BLOCK);
    assert_int_equal(stats().slabs, 2);
    assert_int_equal(vs_host_pool_take(1, &refused), -ENOSPC);
    assert_int_equal(fake.pin_calls, 2);
    for (int i = 0; i < LIMIT_BLOCKS; i++)
        vs_host_pool_give(&copies[i]);
}

/* Three 200 MiB copies under a 600 MiB limit: the third finds no 200 MiB run
 * and the limit allows no full slab, so it is gathered from the tails of the
 * first two slabs and a last slab of exactly what the limit leaves. */
static void test_host_pool_slab_growth_stops_at_a_limit_not_multiple_of_the_slab(void **state)
{
    vs_host_copy_t copies[3], refused;
    (void)state;
    configure(600 * MiB);
    take_ok(200 * MiB, &copies[0]);
    assert_int_equal(copies[0].count, 1);
    assert_int_equal(stats().pinned, SLAB);
    assert_int_equal(stats().slabs, 1);
    take_ok(200 * MiB, &copies[1]);
    assert_int_equal(copies[1].count, 1);
    assert_int_equal(stats().pinned, 2 * SLAB);
    assert_int_equal(stats().slabs, 2);
    take_ok(200 * MiB, &copies[2]);
    assert_true(copies[2].count >= 2);
    assert_int_equal(stats().pinned, 600 * MiB);
    assert_int_equal(stats().slabs, 3);
    assert_int_equal(fake.slabs[2].bytes, 600 * MiB - 2 * SLAB);
    assert_int_equal(stats().used, 600 * MiB);
    assert_copies_disjoint(copies, 3);
    assert_int_equal(vs_host_pool_take(1, &refused), -ENOSPC);
    assert_int_equal(fake.pin_calls, 3);
    for (int i = 0; i < 3; i++)
        vs_host_pool_give(&copies[i]);
    assert_int_equal(stats().used, 0);
    assert_int_equal(stats().pinned, 600 * MiB); /* slabs stay pinned */
}

static void test_host_pool_give_makes_room_again_without_pinning_more(void **state)
{
    vs_host_copy_t first, refused, again;
    (void)state;
    configure(8 * MiB);
    take_ok(8 * MiB, &first);
    void *memory = first.extents[0].ptr;
    assert_int_equal(vs_host_pool_take(2 * MiB, &refused), -ENOSPC);
    vs_host_pool_give(&first);
    assert_int_equal(stats().used, 0);
    take_ok(8 * MiB, &again);
    assert_int_equal(again.count, 1);
    assert_ptr_equal(again.extents[0].ptr, memory);
    assert_int_equal(fake.pin_calls, 1);
    assert_int_equal(stats().pinned, 8 * MiB);
    vs_host_pool_give(&again);
}

static void test_host_pool_stats_count_limit_pinned_used_and_slabs(void **state)
{
    vs_host_copy_t a, b;
    (void)state;
    configure(300 * MiB);
    vs_host_pool_stats_t s = stats();
    assert_int_equal(s.limit, 300 * MiB);
    assert_int_equal(s.pinned, 0);
    assert_int_equal(s.used, 0);
    assert_int_equal(s.slabs, 0);
    take_ok(5 * MiB, &a);
    s = stats();
    assert_int_equal(s.pinned, SLAB);
    assert_int_equal(s.used, 6 * MiB);
    assert_int_equal(s.slabs, 1);
    take_ok(SLAB - 6 * MiB + 2 * MiB, &b); /* does not fit the first slab whole */
    s = stats();
    assert_int_equal(s.pinned, 300 * MiB);
    assert_int_equal(s.used, SLAB + 2 * MiB);
    assert_int_equal(s.slabs, 2);
    vs_host_pool_give(&a);
    s = stats();
    assert_int_equal(s.used, SLAB - 4 * MiB);
    assert_int_equal(s.pinned, 300 * MiB);
    vs_host_pool_give(&b);
    assert_int_equal(stats().used, 0);
}

/* ---- Destroy and failures ------------------------------------------------- */

static void test_host_pool_destroy_unpins_every_slab_once(void **state)
{
    vs_host_copy_t copies[3], after;
    (void)state;
    configure(600 * MiB);
    for (int i = 0; i < 3; i++)
        take_ok(200 * MiB, &copies[i]);
    assert_int_equal(fake.slab_count, 3);
    vs_host_pool_destroy();
    assert_int_equal(fake.unpin_calls, 3);
    assert_int_equal(fake.unknown_unpins, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(fake.slabs[i].unpins, 1);
    vs_host_pool_stats_t s = stats();
    assert_int_equal(s.pinned, 0);
    assert_int_equal(s.used, 0);
    assert_int_equal(s.slabs, 0);
    for (int i = 0; i < 3; i++)
        free(copies[i].extents); /* invalid after destroy: only the list is ours */
    /* The pool keeps its limit and functions: it pins anew. */
    take_ok(2 * MiB, &after);
    assert_int_equal(fake.pin_calls, 4);
    vs_host_pool_give(&after);
}

static void test_host_pool_pin_failure_is_enomem_and_takes_nothing(void **state)
{
    vs_host_copy_t copy;
    (void)state;
    configure(64 * MiB);
    fake.fail_pins = true;
    assert_int_equal(vs_host_pool_take(2 * MiB, &copy), -ENOMEM);
    assert_int_equal(copy.count, 0);
    assert_null(copy.extents);
    vs_host_pool_stats_t s = stats();
    assert_int_equal(s.pinned, 0);
    assert_int_equal(s.used, 0);
    assert_int_equal(s.slabs, 0);
    fake.fail_pins = false;
    take_ok(2 * MiB, &copy);
    vs_host_pool_give(&copy);
}

static void test_host_pool_pin_failure_while_gathering_gives_back_what_was_gathered(void **state)
{
    vs_host_copy_t copies[3], failed;
    (void)state;
    configure(600 * MiB);
    take_ok(200 * MiB, &copies[0]);
    take_ok(200 * MiB, &copies[1]);
    /* The third copy would gather 56 + 56 MiB from the two slabs, then
     * needs a slab the fake refuses to pin. */
    fake.fail_pins = true;
    assert_int_equal(vs_host_pool_take(200 * MiB, &failed), -ENOMEM);
    assert_int_equal(failed.count, 0);
    assert_int_equal(stats().used, 400 * MiB);
    assert_int_equal(stats().pinned, 2 * SLAB);
    fake.fail_pins = false;
    take_ok(200 * MiB, &copies[2]);
    assert_int_equal(stats().used, 600 * MiB);
    assert_copies_disjoint(copies, 3);
    for (int i = 0; i < 3; i++)
        vs_host_pool_give(&copies[i]);
}

/* ---- Threads ---------------------------------------------------------------- */

#define STRESS_THREADS 8
#define STRESS_ITERATIONS 1500
#define STRESS_LIVE 2                 /* copies each thread holds at once */
#define STRESS_STRIDE (64ull << 10)   /* one pattern word every 64 KiB */

static _Atomic unsigned long stress_corrupted, stress_errors, stress_refused, stress_taken;

typedef struct stress_copy_s {
    vs_host_copy_t copy;
    uint64_t tag;
} stress_copy_t;

/* Calls `visit` for every pattern word of `copy`: one every STRESS_STRIDE
 * bytes and the last word of each extent (copies are 2 MiB blocks, so a
 * shared block always shares pattern words). */
static void stress_write(const stress_copy_t *c)
{
    uint64_t global = 0;
    for (uint32_t e = 0; e < c->copy.count; e++) {
        unsigned char *p = c->copy.extents[e].ptr;
        uint64_t bytes = c->copy.extents[e].bytes;
        for (uint64_t off = 0; off < bytes; off += STRESS_STRIDE)
            *(volatile uint64_t *)(p + off) = c->tag ^ (global + off);
        *(volatile uint64_t *)(p + bytes - 8) = c->tag ^ (global + bytes - 8);
        global += bytes;
    }
}

static bool stress_verify(const stress_copy_t *c)
{
    uint64_t global = 0;
    for (uint32_t e = 0; e < c->copy.count; e++) {
        unsigned char *p = c->copy.extents[e].ptr;
        uint64_t bytes = c->copy.extents[e].bytes;
        for (uint64_t off = 0; off < bytes; off += STRESS_STRIDE)
            if (*(volatile uint64_t *)(p + off) != (c->tag ^ (global + off)))
                return false;
        if (*(volatile uint64_t *)(p + bytes - 8) != (c->tag ^ (global + bytes - 8)))
            return false;
        global += bytes;
    }
    return true;
}

static void stress_release(stress_copy_t *c)
{
    if (c->copy.count == 0)
        return;
    if (!stress_verify(c))
        stress_corrupted++;
    vs_host_pool_give(&c->copy);
}

static void *stress_thread(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (id + 1);
    stress_copy_t live[STRESS_LIVE];
    memset(live, 0, sizeof live);

    for (unsigned i = 0; i < STRESS_ITERATIONS; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        stress_copy_t *slot = &live[i % STRESS_LIVE];
        stress_release(slot);
        /* 1 byte to 10 MiB: one to five blocks. */
        uint64_t bytes = (rng % 5) * BLOCK + (rng >> 8) % BLOCK + 1;
        int rc = vs_host_pool_take(bytes, &slot->copy);
        if (rc == -ENOSPC) {
            stress_refused++;
            sched_yield();
            continue;
        }
        if (rc != 0 || slot->copy.bytes != round_to_blocks(bytes)) {
            stress_errors++;
            continue;
        }
        stress_taken++;
        slot->tag = (id << 48) ^ ((uint64_t)i << 16) ^ 0x5A5A;
        stress_write(slot);
        sched_yield();
        if (!stress_verify(slot))
            stress_corrupted++;
    }
    for (int s = 0; s < STRESS_LIVE; s++)
        stress_release(&live[s]);
    return NULL;
}

static void test_host_pool_concurrent_takes_never_share_memory(void **state)
{
    pthread_t threads[STRESS_THREADS];
    (void)state;
    configure(64 * MiB); /* 32 blocks for up to 80 wanted at once: full often */
    for (uintptr_t t = 0; t < STRESS_THREADS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, stress_thread, (void *)t), 0);
    for (int t = 0; t < STRESS_THREADS; t++)
        pthread_join(threads[t], NULL);
    print_message("stress: %lu copies taken, %lu refused (pool full)\n", (unsigned long)stress_taken,
                  (unsigned long)stress_refused);
    assert_int_equal(stress_errors, 0);
    assert_int_equal(stress_corrupted, 0);
    assert_true(stress_taken > STRESS_THREADS * STRESS_ITERATIONS / 4);
    vs_host_pool_stats_t s = stats();
    assert_int_equal(s.used, 0);
    assert_true(s.pinned <= 64 * MiB);
    assert_int_equal(fake.pin_calls, 1);
}

/* Moves a slab's pin to fake_owner_b, or (arg non-NULL) leaves it unpinned. */
static void fake_repin(void *ptr, uint64_t bytes, void **owner, void *arg)
{
    (void)ptr;
    (void)bytes;
    *owner = arg != NULL ? NULL : &fake_owner_b;
}

/* The context a slab was pinned in is destroyed: its pin moves, and the
 * bytes of the copies in it stay where they are, unchanged. */
static void test_host_pool_repin_moves_the_owner_and_keeps_the_copies(void **state)
{
    (void)state;
    configure(64 * MiB);
    vs_host_copy_t copy;
    assert_int_equal(vs_host_pool_take(3 * MiB, &copy), 0);
    memset(copy.extents[0].ptr, 0x5a, 3 * MiB);
    void *where = copy.extents[0].ptr;
    assert_int_equal(vs_host_pool_repin(&fake_owner_b, fake_repin, NULL), 0); /* nothing pinned there */
    assert_int_equal(vs_host_pool_repin(&fake_owner_a, fake_repin, (void *)1), 1);
    assert_int_equal(vs_host_pool_unpinned(), 1);
    assert_int_equal(vs_host_pool_repin(NULL, fake_repin, NULL), 1);
    assert_int_equal(vs_host_pool_unpinned(), 0);
    assert_int_equal(vs_host_pool_repin(&fake_owner_b, fake_repin, (void *)1), 1);
    assert_ptr_equal(copy.extents[0].ptr, where);
    for (uint64_t i = 0; i < 3 * MiB; i += 4093)
        assert_int_equal(((unsigned char *)where)[i], 0x5a);
    vs_host_pool_give(&copy);
    assert_int_equal(fake.unpin_calls, 0);
}

int main(void)
{
#define POOL_TEST(name) cmocka_unit_test_setup_teardown(name, setup_pool, teardown_pool)
    const struct CMUnitTest tests[] = {
        POOL_TEST(test_host_pool_take_within_limit_is_one_extent),
        POOL_TEST(test_host_pool_take_rounds_up_to_whole_2mib_blocks),
        POOL_TEST(test_host_pool_take_of_zero_bytes_is_empty_and_pins_nothing),
        POOL_TEST(test_host_pool_take_past_the_limit_is_enospc_and_pins_nothing),
        POOL_TEST(test_host_pool_limit_is_rounded_down_to_whole_blocks),
        POOL_TEST(test_host_pool_take_of_a_huge_size_is_enospc),
        POOL_TEST(test_host_pool_unfragmented_takes_are_single_contiguous_extents),
        POOL_TEST(test_host_pool_fragmented_take_gathers_from_several_runs),
        POOL_TEST(test_host_pool_take_prefers_one_free_run_to_gathering),
        POOL_TEST(test_host_pool_small_takes_fill_a_slab_before_pinning_another),
        POOL_TEST(test_host_pool_slab_growth_stops_at_a_limit_not_multiple_of_the_slab),
        POOL_TEST(test_host_pool_give_makes_room_again_without_pinning_more),
        POOL_TEST(test_host_pool_stats_count_limit_pinned_used_and_slabs),
        POOL_TEST(test_host_pool_destroy_unpins_every_slab_once),
        POOL_TEST(test_host_pool_pin_failure_is_enomem_and_takes_nothing),
        POOL_TEST(test_host_pool_pin_failure_while_gathering_gives_back_what_was_gathered),
        POOL_TEST(test_host_pool_concurrent_takes_never_share_memory),
        POOL_TEST(test_host_pool_repin_moves_the_owner_and_keeps_the_copies),
    };
#undef POOL_TEST
    return cmocka_run_group_tests_name("host_pool.c", tests, NULL, NULL);
}

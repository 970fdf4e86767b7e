/* test_registry.c: unit tests of shim/registry.c: interior look-ups, page
 * boundaries, removal, last-use stamps and the statistics. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "registry.h"

#define MiB (1ull << 20)
#define BASE ((uintptr_t)0x7f0000000000ull)

static int clear(void **state)
{
    (void)state;
    vs_registry_clear();
    return 0;
}

static uint64_t add(uintptr_t base, uint64_t size, vs_alloc_kind_t kind)
{
    vs_alloc_desc_t desc = {.base = base, .size = size, .device = 0, .kind = kind};
    uint64_t id = 0;
    assert_int_equal(vs_registry_add(&desc, &id), 0);
    return id;
}

static void test_registry_interior_pointer_finds_owner(void **state)
{
    vs_alloc_info_t info;
    (void)state;
    uint64_t id = add(BASE + 3 * MiB, 5 * MiB, VS_ALLOC_DEVICE);
    assert_int_equal(vs_registry_find(BASE + 3 * MiB, &info), 0);
    assert_int_equal(info.id, id);
    assert_int_equal(vs_registry_find(BASE + 3 * MiB + 4321, &info), 0);
    assert_int_equal(info.id, id);
    /* The last byte, across two page boundaries from the base. */
    assert_int_equal(vs_registry_find(BASE + 8 * MiB - 1, &info), 0);
    assert_int_equal(info.id, id);
    assert_int_equal(info.size, 5 * MiB);
    assert_int_equal(info.kind, VS_ALLOC_DEVICE);
}

static void test_registry_address_past_end_or_before_base_is_not_found(void **state)
{
    (void)state;
    add(BASE + 3 * MiB, 5 * MiB, VS_ALLOC_DEVICE);
    assert_int_equal(vs_registry_find(BASE + 8 * MiB, NULL), -ENOENT);
    assert_int_equal(vs_registry_find(BASE + 3 * MiB - 1, NULL), -ENOENT);
    assert_int_equal(vs_registry_find(0, NULL), -ENOENT);
    assert_int_equal(vs_registry_find(UINTPTR_MAX, NULL), -ENOENT);
}

static void test_registry_many_small_allocations_in_one_page_resolve_each(void **state)
{
    vs_alloc_info_t info;
    uint64_t ids[512];
    (void)state;
    /* 512 allocations of 4 KiB share one 2 MiB page; added out of order. */
    for (int i = 0; i < 512; i++) {
        int slot = (i * 7) % 512;
        ids[slot] = add(BASE + (uintptr_t)slot * 4096, 4096, VS_ALLOC_DEVICE);
    }
    for (int slot = 0; slot < 512; slot++) {
        assert_int_equal(vs_registry_find(BASE + (uintptr_t)slot * 4096 + 100, &info), 0);
        assert_int_equal(info.id, ids[slot]);
    }
}

static void test_registry_gap_between_allocations_is_not_found(void **state)
{
    (void)state;
    add(BASE, 4096, VS_ALLOC_DEVICE);
    add(BASE + 16384, 4096, VS_ALLOC_DEVICE);
    assert_int_equal(vs_registry_find(BASE + 8192, NULL), -ENOENT);
}

/* What a layout of `n` allocations says about `addr`: the index of the one
 * containing it, or -1. */
static int owner_of(const uintptr_t *bases, const uint64_t *sizes, const bool *live, int n, uintptr_t addr)
{
    for (int i = 0; i < n; i++)
        if (live[i] && addr >= bases[i] && addr - bases[i] < sizes[i])
            return i;
    return -1;
}

/* Every address of the layout, at a 1536-byte step and on each side of every
 * boundary, through the single look-up and the launch scan alike. */
static void check_layout(const uintptr_t *bases, const uint64_t *sizes, const uint64_t *ids, const bool *live, int n,
                         uintptr_t from, uintptr_t to)
{
    uintptr_t probes[4096 + 4 * 64];
    assert_true(n <= 64 && (to - from) / 1536 <= 4096);
    size_t count = 0;
    for (uintptr_t a = from; a < to; a += 1536)
        probes[count++] = a;
    for (int i = 0; i < n; i++) {
        probes[count++] = bases[i] - 1;
        probes[count++] = bases[i];
        probes[count++] = bases[i] + sizes[i] - 1;
        probes[count++] = bases[i] + sizes[i];
    }
    size_t expected_hits = 0;
    for (size_t k = 0; k < count; k++) {
        int owner = owner_of(bases, sizes, live, n, probes[k]);
        vs_alloc_info_t info;
        if (owner < 0) {
            assert_int_equal(vs_registry_find(probes[k], &info), -ENOENT);
            continue;
        }
        expected_hits++;
        assert_int_equal(vs_registry_find(probes[k], &info), 0);
        assert_int_equal(info.id, ids[owner]);
    }
    vs_touch_t touch = {.seq = 0};
    vs_registry_read_begin();
    size_t hits = vs_registry_touch_many_registry_locked(probes, count, &touch);
    vs_registry_read_end();
    assert_int_equal(hits, expected_hits);
}

static void test_registry_shared_pages_resolve_every_address(void **state)
{
    enum { N = 40 };
    uintptr_t bases[N];
    uint64_t sizes[N], ids[N];
    bool live[N];
    int n = 0;
    (void)state;
    /* One allocation ending inside the second page; then 64 KiB ones with a
     * 4 KiB gap between them (a 32 KiB piece overlapped by one or two);
     * then 3 KiB ones packed (pieces overlapped by more than two); the last
     * runs into the third page. */
    uintptr_t at = BASE;
    bases[n] = at, sizes[n] = 2 * MiB + 100 * 1024, n++;
    at += 2 * MiB + 104 * 1024;
    while (n < 20) {
        bases[n] = at, sizes[n] = 64 * 1024, n++;
        at += 68 * 1024;
    }
    while (n < N - 1) {
        bases[n] = at, sizes[n] = 3 * 1024, n++;
        at += 3 * 1024 + 512;
    }
    bases[n] = BASE + 4 * MiB - 8192, sizes[n] = 3 * MiB, n++;
    for (int i = 0; i < n; i++) {
        int k = (i * 17) % n; /* out of order */
        ids[k] = add(bases[k], sizes[k], VS_ALLOC_DEVICE);
        live[k] = true;
    }
    check_layout(bases, sizes, ids, live, n, BASE, BASE + 6 * MiB);
    /* Removals reindex the pieces: every other one goes. */
    for (int i = 1; i < n; i += 2) {
        assert_int_equal(vs_registry_remove(bases[i], 1u << VS_ALLOC_DEVICE, NULL), 0);
        live[i] = false;
    }
    check_layout(bases, sizes, ids, live, n, BASE, BASE + 6 * MiB);
}

static void test_registry_remove_forgets_every_page(void **state)
{
    vs_alloc_info_t info;
    (void)state;
    add(BASE, 9 * MiB, VS_ALLOC_DEVICE);
    assert_int_equal(vs_registry_remove(BASE, 1u << VS_ALLOC_DEVICE, &info), 0);
    assert_int_equal(info.size, 9 * MiB);
    for (uint64_t off = 0; off < 9 * MiB; off += MiB)
        assert_int_equal(vs_registry_find(BASE + off, NULL), -ENOENT);
    assert_int_equal(vs_registry_remove(BASE, 1u << VS_ALLOC_DEVICE, NULL), -ENOENT);
}

static void test_registry_remove_of_other_kind_is_refused(void **state)
{
    (void)state;
    add(BASE, MiB, VS_ALLOC_HOST_PINNED);
    assert_int_equal(vs_registry_remove(BASE, 1u << VS_ALLOC_DEVICE, NULL), -ENOENT);
    assert_int_equal(vs_registry_remove(BASE, 1u << VS_ALLOC_HOST_PINNED, NULL), 0);
}

static void test_registry_duplicate_base_is_eexist_and_zero_size_einval(void **state)
{
    vs_alloc_desc_t dup = {.base = BASE, .size = MiB, .kind = VS_ALLOC_DEVICE};
    vs_alloc_desc_t empty = {.base = BASE + 8 * MiB, .size = 0, .kind = VS_ALLOC_DEVICE};
    (void)state;
    add(BASE, MiB, VS_ALLOC_DEVICE);
    assert_int_equal(vs_registry_add(&dup, NULL), -EEXIST);
    assert_int_equal(vs_registry_add(&empty, NULL), -EINVAL);
}

static void test_registry_host_allocation_found_by_base_only(void **state)
{
    vs_alloc_info_t info;
    (void)state;
    add(BASE, MiB, VS_ALLOC_HOST_PINNED);
    assert_int_equal(vs_registry_find(BASE, &info), 0);
    assert_int_equal(info.kind, VS_ALLOC_HOST_PINNED);
    assert_false(info.evictable);
    /* Host memory is not in the interior index, so launches never stamp it. */
    assert_int_equal(vs_registry_find(BASE + 10, NULL), -ENOENT);
    assert_false(vs_registry_touch(BASE, vs_registry_next_seq()));
}

static void test_registry_touch_stamps_last_use_once_per_event(void **state)
{
    vs_alloc_info_t info;
    (void)state;
    add(BASE, 4 * MiB, VS_ALLOC_DEVICE);
    add(BASE + 4 * MiB, 4 * MiB, VS_ALLOC_DEVICE);
    uint64_t seq = vs_registry_next_seq();
    vs_registry_read_begin();
    assert_true(vs_registry_touch_registry_locked(BASE + 16, seq));
    assert_true(vs_registry_touch_registry_locked(BASE + 1000, seq)); /* same event, same allocation */
    assert_false(vs_registry_touch_registry_locked(BASE + 64 * MiB, seq));
    vs_registry_read_end();
    assert_int_equal(vs_registry_find(BASE, &info), 0);
    assert_int_equal(info.last_use_seq, seq);
    assert_int_equal(info.use_count, 1);
    assert_true(info.created_seq < seq);
    assert_int_equal(vs_registry_find(BASE + 4 * MiB, &info), 0);
    assert_int_equal(info.last_use_seq, 0);
    assert_int_equal(info.use_count, 0);
}

static uint64_t uses_of(uintptr_t base)
{
    vs_alloc_info_t info;
    assert_int_equal(vs_registry_find(base, &info), 0);
    return info.use_count;
}

/* A touch given room leaves what it finds of allocations registered not
 * evictable (settled: under 2 MiB, or pinned from the start) for
 * `vs_registry_stamp_settled_registry_locked`, whether their page holds
 * only such allocations or not, and stamps the rest itself; each is counted
 * once per event, and what the room cannot hold is stamped at once. */
static void test_registry_settled_uses_wait_for_the_stamp_after_submission(void **state)
{
    (void)state;
    /* A page of small allocations only. */
    const uintptr_t small = BASE;
    for (int i = 0; i < 3; i++)
        add(small + (uintptr_t)i * 64 * 1024, 64 * 1024, VS_ALLOC_DEVICE);
    /* An evictable allocation running 64 KiB into the next page, with a
     * small one after it there: a page mixing the two. */
    const uintptr_t evictable = BASE + 4 * MiB, mixed_small = evictable + 2 * MiB + 64 * 1024;
    add(evictable, 2 * MiB + 64 * 1024, VS_ALLOC_DEVICE);
    add(mixed_small, 64 * 1024, VS_ALLOC_DEVICE);
    /* Pinned from the start: a page of its own, settled. */
    const uintptr_t pinned = BASE + 16 * MiB;
    vs_alloc_desc_t desc = {.base = pinned, .size = 4 * MiB, .kind = VS_ALLOC_DEVICE, .pinned_reason = "test"};
    assert_int_equal(vs_registry_add(&desc, NULL), 0);

    const uintptr_t words[] = {small + 16, small + 40 * 1024, small + 64 * 1024 + 8, evictable + 8,
                               mixed_small + 100, pinned + MiB, small + 3 * 64 * 1024 + 8 /* a gap */};
    uintptr_t settled[VS_SETTLED_MAX];
    vs_touch_t touch = {.seq = vs_registry_next_seq(), .settled = settled, .settled_cap = VS_SETTLED_MAX};
    vs_registry_read_begin();
    vs_registry_touch_many_registry_locked(words, sizeof words / sizeof words[0], &touch);
    size_t left = touch.settled_count;
    uint64_t before[3] = {uses_of(evictable), uses_of(small), uses_of(pinned)};
    vs_registry_stamp_settled_registry_locked(&touch);
    vs_registry_read_end();
    /* The evictable one at once; the rest wait: two words of the first small
     * one, one of the second, the gap's (words in a page of settled ones are
     * looked up further only then), the mixed page's, the pinned one's. */
    assert_int_equal(left, 6);
    assert_int_equal(before[0], 1);
    assert_int_equal(before[1], 0);
    assert_int_equal(before[2], 0);
    assert_int_equal(touch.settled_count, 0);
    assert_int_equal(uses_of(small), 1); /* two words, one event */
    assert_int_equal(uses_of(small + 64 * 1024), 1);
    assert_int_equal(uses_of(small + 128 * 1024), 0);
    assert_int_equal(uses_of(mixed_small), 1);
    assert_int_equal(uses_of(pinned), 1);
    vs_alloc_info_t info;
    assert_int_equal(vs_registry_find(small, &info), 0);
    assert_int_equal(info.last_use_seq, touch.seq);

    /* An evictable allocation joins the small ones' page: it is no longer
     * settled, its small ones still are; with room for one, the rest are
     * stamped at once. A later pin does not make an allocation settled. */
    const uintptr_t joining = small + 3 * 64 * 1024;
    add(joining, 2 * MiB, VS_ALLOC_DEVICE);
    assert_int_equal(vs_registry_pin(evictable, "later"), 0);
    const uintptr_t again[] = {small + 8, small + 64 * 1024 + 8, joining + 8, evictable + 8};
    touch = (vs_touch_t){.seq = vs_registry_next_seq(), .settled = settled, .settled_cap = 1};
    vs_registry_read_begin();
    vs_registry_touch_many_registry_locked(again, sizeof again / sizeof again[0], &touch);
    left = touch.settled_count;
    uint64_t during[3] = {uses_of(small) + uses_of(small + 64 * 1024), uses_of(joining), uses_of(evictable)};
    vs_registry_stamp_settled_registry_locked(&touch);
    vs_registry_read_end();
    assert_int_equal(left, 1);
    assert_int_equal(during[0], 3);
    assert_int_equal(during[1], 1);
    assert_int_equal(during[2], 2);
    assert_int_equal(uses_of(small), 2);
    assert_int_equal(uses_of(small + 64 * 1024), 2);
}

static void test_registry_small_allocation_is_not_evictable_with_reason(void **state)
{
    vs_alloc_info_t info;
    (void)state;
    add(BASE, 64 * 1024, VS_ALLOC_DEVICE);
    add(BASE + 64 * MiB, 64 * MiB, VS_ALLOC_DEVICE);
    add(BASE + 256 * MiB, 64 * MiB, VS_ALLOC_MANAGED);
    assert_int_equal(vs_registry_find(BASE, &info), 0);
    assert_false(info.evictable);
    assert_non_null(strstr(info.pinned_reason, "2 MiB"));
    assert_int_equal(vs_registry_find(BASE + 64 * MiB, &info), 0);
    assert_true(info.evictable);
    assert_null(info.pinned_reason);
    assert_int_equal(vs_registry_find(BASE + 256 * MiB, &info), 0);
    assert_false(info.evictable);
    assert_non_null(info.pinned_reason);
}

static void test_registry_ids_are_stable_and_never_reused(void **state)
{
    (void)state;
    uint64_t first = add(BASE, MiB, VS_ALLOC_DEVICE);
    assert_int_equal(vs_registry_remove(BASE, ~0u, NULL), 0);
    uint64_t second = add(BASE, MiB, VS_ALLOC_DEVICE);
    assert_true(second > first);
}

static void count_alloc(const vs_alloc_info_t *info, void *arg)
{
    (void)info;
    (*(int *)arg)++;
}

static void test_registry_remove_range_takes_only_covered_vmm_mappings(void **state)
{
    int seen = 0;
    (void)state;
    add(BASE, 2 * MiB, VS_ALLOC_VMM);
    add(BASE + 2 * MiB, 2 * MiB, VS_ALLOC_VMM);
    add(BASE + 4 * MiB, 2 * MiB, VS_ALLOC_VMM);
    add(BASE + 6 * MiB, 2 * MiB, VS_ALLOC_DEVICE);
    assert_int_equal(vs_registry_remove_range(BASE + 2 * MiB, 6 * MiB, VS_ALLOC_VMM, count_alloc, &seen), 2);
    assert_int_equal(seen, 2);
    assert_int_equal(vs_registry_find(BASE, NULL), 0);
    assert_int_equal(vs_registry_find(BASE + 3 * MiB, NULL), -ENOENT);
    assert_int_equal(vs_registry_find(BASE + 6 * MiB, NULL), 0);
}

static void test_registry_stats_count_live_total_and_peak(void **state)
{
    vs_registry_stats_t stats;
    (void)state;
    add(BASE, 4 * MiB, VS_ALLOC_DEVICE);
    add(BASE + 4 * MiB, 8 * MiB, VS_ALLOC_ASYNC);
    assert_int_equal(vs_registry_remove(BASE, ~0u, NULL), 0);
    vs_registry_stats(&stats);
    assert_int_equal(stats.live_count[VS_ALLOC_DEVICE], 0);
    assert_int_equal(stats.total_count[VS_ALLOC_DEVICE], 1);
    assert_int_equal(stats.live_bytes[VS_ALLOC_ASYNC], 8 * MiB);
    assert_int_equal(stats.peak_device_bytes, 12 * MiB);
}

static void *touch_loop(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++)
        vs_registry_touch(BASE + (uintptr_t)(i % 64) * MiB + 8, vs_registry_next_seq());
    return NULL;
}

static void test_registry_concurrent_touches_and_churn_stay_consistent(void **state)
{
    pthread_t threads[4];
    vs_alloc_info_t info;
    (void)state;
    for (int i = 0; i < 64; i++)
        add(BASE + (uintptr_t)i * MiB, MiB, VS_ALLOC_DEVICE);
    for (int t = 0; t < 4; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, touch_loop, NULL), 0);
    /* Allocations come and go beside the touching threads. */
    for (int i = 0; i < 2000; i++) {
        uintptr_t base = BASE + 512 * MiB + (uintptr_t)(i % 8) * MiB;
        vs_alloc_desc_t desc = {.base = base, .size = MiB, .kind = VS_ALLOC_DEVICE};
        assert_int_equal(vs_registry_add(&desc, NULL), 0);
        assert_int_equal(vs_registry_remove(base, ~0u, NULL), 0);
    }
    for (int t = 0; t < 4; t++)
        pthread_join(threads[t], NULL);
    /* Each of 4 threads touched allocation 0 in 313 events. The stamps are
     * plain stores (see vs_registry_touch_registry_locked): racing threads may lose
     * an increment, never invent one, and the last use is one of the
     * events' sequence numbers. */
    assert_int_equal(vs_registry_find(BASE, &info), 0);
    assert_true(info.use_count > 0 && info.use_count <= 4 * 313);
    assert_true(info.last_use_seq > info.created_seq);
    assert_true(info.last_use_seq < vs_registry_next_seq());
    /* Nothing was left behind by the churn. */
    for (int i = 0; i < 8; i++)
        assert_int_equal(vs_registry_find(BASE + 512 * MiB + (uintptr_t)i * MiB, NULL), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_registry_interior_pointer_finds_owner, clear),
        cmocka_unit_test_setup(test_registry_address_past_end_or_before_base_is_not_found, clear),
        cmocka_unit_test_setup(test_registry_many_small_allocations_in_one_page_resolve_each, clear),
        cmocka_unit_test_setup(test_registry_gap_between_allocations_is_not_found, clear),
        cmocka_unit_test_setup(test_registry_shared_pages_resolve_every_address, clear),
        cmocka_unit_test_setup(test_registry_remove_forgets_every_page, clear),
        cmocka_unit_test_setup(test_registry_remove_of_other_kind_is_refused, clear),
        cmocka_unit_test_setup(test_registry_duplicate_base_is_eexist_and_zero_size_einval, clear),
        cmocka_unit_test_setup(test_registry_host_allocation_found_by_base_only, clear),
        cmocka_unit_test_setup(test_registry_touch_stamps_last_use_once_per_event, clear),
        cmocka_unit_test_setup(test_registry_settled_uses_wait_for_the_stamp_after_submission, clear),
        cmocka_unit_test_setup(test_registry_small_allocation_is_not_evictable_with_reason, clear),
        cmocka_unit_test_setup(test_registry_ids_are_stable_and_never_reused, clear),
        cmocka_unit_test_setup(test_registry_remove_range_takes_only_covered_vmm_mappings, clear),
        cmocka_unit_test_setup(test_registry_stats_count_live_total_and_peak, clear),
        cmocka_unit_test_setup(test_registry_concurrent_touches_and_churn_stay_consistent, clear),
    };
    return cmocka_run_group_tests_name("registry.c", tests, NULL, NULL);
}

/*
 * test_policy_schedule.c: evictions and prefetches from a predicted stream
 * (policy/schedule.c): Belady's order with write-backs counted, and the
 * aggressive, conservative and forestall prefetch strategies, which never
 * evict what is used before the fetch.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "schedule.h"

#define MIB (1ULL << 20)

/* A resident, evictable allocation used `accesses` accesses (and as many
 * MiB of traffic) from now; 0: no use predicted. */
static vs_schedule_item_t item(uint64_t id, uint64_t size, uint64_t accesses, bool dirty)
{
    vs_schedule_item_t it = {.id = id, .size = size, .resident = true, .evictable = true, .dirty = dirty};
    if (accesses == 0) {
        it.next = (vs_predict_distance_t){VS_PREDICT_NEVER, VS_PREDICT_NEVER, VS_PREDICT_NEVER, false, false};
    } else {
        it.next = (vs_predict_distance_t){.accesses = accesses, .bytes = accesses * MIB, .ns = accesses * 1000,
                                          .periodic = true};
    }
    return it;
}

static void expect_victims(const vs_schedule_item_t *items, size_t n, uint64_t need, const uint64_t *ids,
                           size_t n_ids)
{
    size_t order[16], got = 0;
    assert_int_equal(vs_schedule_victims(items, n, NULL, need, order, 16, &got), 0);
    assert_int_equal(got, n_ids);
    for (size_t i = 0; i < n_ids; i++)
        assert_int_equal(items[order[i]].id, ids[i]);
}

static void test_schedule_victims_farthest_use_first(void **state)
{
    (void)state;
    vs_schedule_item_t items[] = {item(1, 8 * MIB, 30, false), item(2, 8 * MIB, 90, false),
                                  item(3, 8 * MIB, 60, false), item(4, 8 * MIB, 10, false)};
    expect_victims(items, 4, 16 * MIB, (uint64_t[]){2, 3}, 2);
    expect_victims(items, 4, 1, (uint64_t[]){2}, 1);
    size_t order[4], got = 0;
    assert_int_equal(vs_schedule_victims(items, 4, NULL, 0, order, 4, &got), 0);
    assert_int_equal(got, 0);
}

static void test_schedule_victims_clean_before_dirty_where_no_dearer(void **state)
{
    (void)state;
    /* Dirty 2 is used 200 MiB of traffic away, clean 1 80 MiB: writing
     * 2's 32 MiB back, worth four times its bytes (a certain copy now
     * against a possible one later), costs more than the 120 MiB it is
     * farther. */
    vs_schedule_item_t near[] = {item(1, 32 * MIB, 80, false), item(2, 32 * MIB, 200, true)};
    expect_victims(near, 2, 1, (uint64_t[]){1}, 1);
    /* Clean 1 at 60: 2 is farther by more than its write-back. */
    vs_schedule_item_t far[] = {item(1, 32 * MIB, 60, false), item(2, 32 * MIB, 200, true)};
    expect_victims(far, 2, 1, (uint64_t[]){2}, 1);
    /* With a device-to-host link twice as fast, the write-back is worth
     * half: 2 is farther by more than 64 MiB. */
    vs_schedule_links_t links = {.h2d_bytes_per_s = 10, .d2h_bytes_per_s = 20};
    size_t order[2], got = 0;
    assert_int_equal(vs_schedule_victims(near, 2, &links, 1, order, 2, &got), 0);
    assert_int_equal(near[order[0]].id, 2);
}

static void test_schedule_victims_unused_first_clean_then_dirty(void **state)
{
    (void)state;
    vs_schedule_item_t items[] = {item(1, 8 * MIB, 500, false), item(2, 8 * MIB, 0, true),
                                  item(3, 8 * MIB, 0, false), item(4, 8 * MIB, 900, true)};
    expect_victims(items, 4, 32 * MIB, (uint64_t[]){3, 2, 4, 1}, 4);
    /* Among the unused, the most recently used first. */
    vs_schedule_item_t unused[] = {item(1, 8 * MIB, 0, false), item(2, 8 * MIB, 0, false)};
    unused[0].last_use = 5;
    unused[1].last_use = 9;
    expect_victims(unused, 2, 1, (uint64_t[]){2}, 1);
}

static void test_schedule_victims_skip_protected_missing_pinned(void **state)
{
    (void)state;
    vs_schedule_item_t items[] = {item(1, 8 * MIB, 90, false), item(2, 8 * MIB, 80, false),
                                  item(3, 8 * MIB, 70, false), item(4, 8 * MIB, 60, false)};
    items[0].protect = true;
    items[1].resident = false;
    items[2].evictable = false;
    expect_victims(items, 4, 1, (uint64_t[]){4}, 1);
    size_t order[4], got = 0;
    assert_int_equal(vs_schedule_victims(items, 4, NULL, 16 * MIB, order, 4, &got), -ENOSPC);
    assert_int_equal(got, 1);
    vs_schedule_item_t all[] = {item(1, 8 * MIB, 90, false), item(2, 8 * MIB, 80, false)};
    assert_int_equal(vs_schedule_victims(all, 2, NULL, 16 * MIB, order, 1, &got), -ENOBUFS);
    assert_int_equal(got, 1);
}

/* Four resident allocations (ids 1-4) and two missing ones (5, 6), the
 * budget full; the predicted stream: 5 (next), 1, 6, 2, 3, 4. */
typedef struct fixture_s {
    vs_schedule_item_t items[6];
    vs_predict_access_t ahead[6];
} fixture_t;

static void fixture(fixture_t *f, uint64_t ns_per_access)
{
    static const uint64_t stream[6] = {5, 1, 6, 2, 3, 4};
    f->items[0] = item(1, 8 * MIB, 2, false);
    f->items[1] = item(2, 8 * MIB, 4, false);
    f->items[2] = item(3, 8 * MIB, 5, true);
    f->items[3] = item(4, 8 * MIB, 0, false); /* no use predicted */
    f->items[4] = item(5, 8 * MIB, 1, false);
    f->items[5] = item(6, 8 * MIB, 3, false);
    f->items[4].resident = f->items[5].resident = false;
    /* 64 MiB a step: a write-back of 8 MiB (worth four times its bytes)
     * is worth half a step. */
    for (size_t i = 0; i < 6; i++)
        if (f->items[i].next.accesses != VS_PREDICT_NEVER)
            f->items[i].next.bytes = f->items[i].next.accesses * 64 * MIB;
    for (size_t s = 0; s < 6; s++)
        f->ahead[s] = (vs_predict_access_t){.id = stream[s], .bytes = 8 * MIB, .ns = (s + 1) * ns_per_access};
}

static void test_schedule_prefetch_aggressive_never_evicts_a_nearer_use(void **state)
{
    (void)state;
    fixture_t f;
    fixture(&f, 1000);
    vs_schedule_fetch_t fetches[4];
    size_t victims[8], n_fetches = 0, n_victims = 0;
    assert_int_equal(vs_schedule_prefetch(f.items, 6, f.ahead, 6, NULL, VS_SCHEDULE_AGGRESSIVE, 32 * MIB, fetches,
                                          4, &n_fetches, victims, 8, &n_victims),
                     0);
    /* 5 over 4 (no use), 6 over 3 (used after it); not further. */
    assert_int_equal(n_fetches, 2);
    assert_int_equal(f.items[fetches[0].item].id, 5);
    assert_int_equal(fetches[0].n_victims, 1);
    assert_int_equal(f.items[victims[fetches[0].first_victim]].id, 4);
    assert_int_equal(f.items[fetches[1].item].id, 6);
    assert_int_equal(fetches[1].n_victims, 1);
    assert_int_equal(f.items[victims[fetches[1].first_victim]].id, 3);
    assert_int_equal(n_victims, 2);
}

static void test_schedule_prefetch_conservative_only_over_free_or_unused(void **state)
{
    (void)state;
    fixture_t f;
    fixture(&f, 1000);
    vs_schedule_fetch_t fetches[4];
    size_t victims[8], n_fetches = 0, n_victims = 0;
    assert_int_equal(vs_schedule_prefetch(f.items, 6, f.ahead, 6, NULL, VS_SCHEDULE_CONSERVATIVE, 32 * MIB,
                                          fetches, 4, &n_fetches, victims, 8, &n_victims),
                     0);
    assert_int_equal(n_fetches, 1);
    assert_int_equal(f.items[fetches[0].item].id, 5);
    assert_int_equal(f.items[victims[0]].id, 4);
    /* With 8 MiB of free room, 6 comes into it too. */
    assert_int_equal(vs_schedule_prefetch(f.items, 6, f.ahead, 6, NULL, VS_SCHEDULE_CONSERVATIVE, 40 * MIB,
                                          fetches, 4, &n_fetches, victims, 8, &n_victims),
                     0);
    assert_int_equal(n_fetches, 2);
    assert_int_equal(n_victims, 1);
}

static void test_schedule_prefetch_forestall_evicts_live_only_when_late(void **state)
{
    (void)state;
    /* 8 MiB at 8 MiB/ms takes 1 ms. With 10 ms of compute per access, 6
     * (three accesses ahead) is not late: forestall waits. With 0.5 ms per
     * access, it is: forestall fetches it as the aggressive would. */
    vs_schedule_links_t links = {.h2d_bytes_per_s = 8 * MIB * 1000, .d2h_bytes_per_s = 8 * MIB * 1000};
    fixture_t f;
    vs_schedule_fetch_t fetches[4];
    size_t victims[8], n_fetches = 0, n_victims = 0;
    fixture(&f, 10 * 1000 * 1000);
    assert_int_equal(vs_schedule_prefetch(f.items, 6, f.ahead, 6, &links, VS_SCHEDULE_FORESTALL, 32 * MIB, fetches,
                                          4, &n_fetches, victims, 8, &n_victims),
                     0);
    assert_int_equal(n_fetches, 1);
    fixture(&f, 500 * 1000);
    assert_int_equal(vs_schedule_prefetch(f.items, 6, f.ahead, 6, &links, VS_SCHEDULE_FORESTALL, 32 * MIB, fetches,
                                          4, &n_fetches, victims, 8, &n_victims),
                     0);
    assert_int_equal(n_fetches, 2);
    assert_int_equal(f.items[fetches[1].item].id, 6);
}

static void test_schedule_prefetch_skips_resident_unknown_and_repeats(void **state)
{
    (void)state;
    fixture_t f;
    fixture(&f, 1000);
    vs_predict_access_t ahead[] = {{.id = 1}, {.id = 77}, {.id = 5}, {.id = 5}, {.id = 6}};
    vs_schedule_fetch_t fetches[4];
    size_t victims[8], n_fetches = 0, n_victims = 0;
    assert_int_equal(vs_schedule_prefetch(f.items, 6, ahead, 5, NULL, VS_SCHEDULE_AGGRESSIVE, 48 * MIB, fetches,
                                          4, &n_fetches, victims, 8, &n_victims),
                     0);
    assert_int_equal(n_fetches, 2);
    assert_int_equal(f.items[fetches[0].item].id, 5);
    assert_int_equal(f.items[fetches[1].item].id, 6);
    assert_int_equal(n_victims, 0); /* 16 MiB free */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedule_victims_farthest_use_first),
        cmocka_unit_test(test_schedule_victims_clean_before_dirty_where_no_dearer),
        cmocka_unit_test(test_schedule_victims_unused_first_clean_then_dirty),
        cmocka_unit_test(test_schedule_victims_skip_protected_missing_pinned),
        cmocka_unit_test(test_schedule_prefetch_aggressive_never_evicts_a_nearer_use),
        cmocka_unit_test(test_schedule_prefetch_conservative_only_over_free_or_unused),
        cmocka_unit_test(test_schedule_prefetch_forestall_evicts_live_only_when_late),
        cmocka_unit_test(test_schedule_prefetch_skips_resident_unknown_and_repeats),
    };
    return cmocka_run_group_tests_name("schedule.c", tests, NULL, NULL);
}

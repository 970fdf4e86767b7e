/*
 * test_optimum.c: optimum.c on tiny traces whose costs were worked out by
 * hand (the working is in each test's comment). Sizes in units of 2 MiB.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "optimum.h"

#define U2 (2ull << 20)
#define ALL ((vs_optimum_window_t){0, UINT64_MAX})
#define MAX_EVENTS 64

/* The events of a trace written in the VRAMSHIM_TRACE format. */
static size_t parse(const char *text, vs_trace_event_t *ev)
{
    vs_trace_reader_t reader;
    size_t n = 0;
    vs_trace_reader_init(&reader, text, strlen(text));
    int rc;
    while ((rc = vs_trace_reader_next(&reader, &ev[n])) == 1) {
        assert_true(n < MAX_EVENTS - 1);
        n++;
    }
    assert_int_equal(rc, 0);
    return n;
}

/* Three 2 MiB allocations written once, then read in a cycle 1 2 3 1 2 3
 * with room for two. seq 3 evicts 2 (next use 5, farther than 1's 4):
 * dirty, 2 MiB out. seq 5: 1 (next 7) goes before 3 (next 6): out; 2 in.
 * seq 7: 3 (next 9) before 2 (next 8): out; 1 in. seq 9: 1 and 2 are never
 * used again and both clean: 1 (the older) goes for nothing; 3 in. */
static const char cycle_trace[] = "A 1 0x200000 e\nA 2 0x200000 e\nA 3 0x200000 e\n"
                                  "U 1 1 k 0 0 w\nU 2 2 k 0 0 w\nU 3 3 k 0 0 w\n"
                                  "U 4 1 k 0 0 r\nU 5 2 k 0 0 r\nU 6 3 k 0 0 r\n"
                                  "U 7 1 k 0 0 r\nU 8 2 k 0 0 r\nU 9 3 k 0 0 r\n";

static void test_optimum_min_cycle_counts_restores_and_dirty_evictions(void **state)
{
    (void)state;
    vs_trace_event_t ev[MAX_EVENTS];
    size_t n = parse(cycle_trace, ev);
    vs_optimum_cost_t c;
    assert_int_equal(vs_optimum_min(ev, n, 2 * U2, ALL, &c), 0);
    assert_int_equal(c.in, 3 * U2);
    assert_int_equal(c.restores, 3);
    assert_int_equal(c.out, 3 * U2);
    assert_int_equal(c.writebacks, 3);
}

/* The same with only seq 4 to 9 counted: seq 3's write-back is not. */
static void test_optimum_min_window_counts_only_its_operations(void **state)
{
    (void)state;
    vs_trace_event_t ev[MAX_EVENTS];
    size_t n = parse(cycle_trace, ev);
    vs_optimum_cost_t c;
    assert_int_equal(vs_optimum_min(ev, n, 2 * U2, (vs_optimum_window_t){4, 10}, &c), 0);
    assert_int_equal(c.in, 3 * U2);
    assert_int_equal(c.out, 2 * U2);
}

/* Room for one. seq 2 evicts 1 (written: 2 MiB out); 2 is new, nothing in.
 * seq 3 evicts 2, never written: nothing out, and 1 comes in (2 MiB). seq 4
 * evicts 1, clean now that the host holds its copy: nothing out; 2 has no
 * contents to bring back: nothing in. */
static void test_optimum_min_clean_and_empty_allocations_move_nothing(void **state)
{
    (void)state;
    vs_trace_event_t ev[MAX_EVENTS];
    size_t n = parse("A 1 0x200000 e\nA 2 0x200000 e\n"
                     "U 1 1 k 0 0 w\nU 2 2 k 0 0 r\nU 3 1 k 0 0 r\nU 4 2 k 0 0 r\n",
                     ev);
    vs_optimum_cost_t c;
    assert_int_equal(vs_optimum_min(ev, n, U2, ALL, &c), 0);
    assert_int_equal(c.in, U2);
    assert_int_equal(c.out, U2);
}

/* A 1 MiB allocation that is never evicted takes its share of 4 MiB: the
 * two 2 MiB ones cannot both stay. seq 2 evicts 2 (dirty); seq 3 evicts 3
 * (dirty) and brings 2 in; seq 4 evicts 2 (clean) and brings 3 in. */
static void test_optimum_min_unevictable_allocations_take_room(void **state)
{
    (void)state;
    vs_trace_event_t ev[MAX_EVENTS];
    size_t n = parse("A 9 0x100000 n\nA 2 0x200000 e\nA 3 0x200000 e\n"
                     "U 1 2 k 0 0 w\nU 2 3 k 0 0 w\nU 3 2 k 0 0 r\nU 4 3 k 0 0 r\n",
                     ev);
    vs_optimum_cost_t c;
    assert_int_equal(vs_optimum_min(ev, n, 2 * U2, ALL, &c), 0);
    assert_int_equal(c.in, 2 * U2);
    assert_int_equal(c.out, 2 * U2);
    /* With room for all three, nothing moves. */
    assert_int_equal(vs_optimum_min(ev, n, 3 * U2, ALL, &c), 0);
    assert_int_equal(c.in + c.out, 0);
}

/* An operation that uses one allocation twice needs its room once; a
 * freed allocation gives its room back, and its id may come back new
 * (no contents: nothing to bring in). seq 3 evicts the new 1, never
 * written (free); seq 4 evicts 2, written: 2 MiB out, nothing in. */
static void test_optimum_min_duplicate_use_and_reused_id(void **state)
{
    (void)state;
    vs_trace_event_t ev[MAX_EVENTS];
    size_t n = parse("A 1 0x200000 e\nU 1 1 k 0 0 w\nU 1 1 k 0 0 r\nF 1\n"
                     "A 1 0x200000 e\nA 2 0x200000 e\nU 2 1 k 0 0 r\nU 3 2 k 0 0 w\nU 4 1 k 0 0 r\n",
                     ev);
    vs_optimum_cost_t c;
    assert_int_equal(vs_optimum_min(ev, n, U2, ALL, &c), 0);
    assert_int_equal(c.in, 0);
    assert_int_equal(c.out, U2);
}

/* Two allocations used by one operation do not fit in room for one. */
static void test_optimum_min_operation_larger_than_capacity_is_enospc(void **state)
{
    (void)state;
    vs_trace_event_t ev[MAX_EVENTS];
    size_t n = parse("A 1 0x200000 e\nA 2 0x200000 e\nU 1 1 k 0 0 r\nU 1 2 k 0 0 r\n", ev);
    vs_optimum_cost_t c;
    assert_int_equal(vs_optimum_min(ev, n, U2, ALL, &c), -ENOSPC);
    assert_int_equal(vs_optimum_fixed_set(ev, n, U2, ALL, &c, NULL), -ENOSPC);
}

static void test_optimum_min_malformed_traces_are_einval(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "U 1 7 k 0 0 r\n",                                             /* unknown id */
        "A 1 0x200000 e\nA 1 0x200000 e\n",                            /* live id allocated */
        "F 1\n",                                                       /* unknown free */
        "A 1 0x200000 e\nA 2 0x200000 e\nU 1 1 k 0 0 r\nA 3 0x200000 e\nU 1 2 k 0 0 r\n", /* split op */
        "A 1 0x200000 e\nU 2 1 k 0 0 r\nU 1 1 k 0 0 r\n",              /* seq going back */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        vs_trace_event_t ev[MAX_EVENTS];
        size_t n = parse(bad[i], ev);
        vs_optimum_cost_t c;
        assert_int_equal(vs_optimum_min(ev, n, 4 * U2, ALL, &c), -EINVAL);
    }
}

/* A skewed stream: 1 is read every other operation, 2 and 3 in turn
 * between (window seq 4 to 11: 1 2 1 3 1 2 1 3), room for two.
 * Keeping {1}: 2 and 3 share the other slot; seq 5 writes 3 back (dirty
 * from its first write), and each of the 4 uses of 2 or 3 brings one in:
 * 8 MiB in, 2 MiB out. Keeping nothing (LRU): seq 4 and 5 each write one
 * back and bring one in, then 7, 9, 11 bring 3 more in: 10 in, 4 out.
 * Keeping {1, 2} leaves no room for 3: not a candidate. */
static const char skewed_trace[] = "A 1 0x200000 e\nA 2 0x200000 e\nA 3 0x200000 e\n"
                                   "U 1 1 k 0 0 w\nU 2 2 k 0 0 w\nU 3 3 k 0 0 w\n"
                                   "U 4 1 k 0 0 r\nU 5 2 k 0 0 r\nU 6 1 k 0 0 r\nU 7 3 k 0 0 r\n"
                                   "U 8 1 k 0 0 r\nU 9 2 k 0 0 r\nU 10 1 k 0 0 r\nU 11 3 k 0 0 r\n";

static void test_optimum_fixed_set_keeps_the_most_used(void **state)
{
    (void)state;
    vs_trace_event_t ev[MAX_EVENTS];
    size_t n = parse(skewed_trace, ev);
    vs_optimum_cost_t c;
    size_t members = 99;
    assert_int_equal(vs_optimum_fixed_set(ev, n, 2 * U2, (vs_optimum_window_t){4, 12}, &c, &members), 0);
    assert_int_equal(members, 1);
    assert_int_equal(c.in, 4 * U2);
    assert_int_equal(c.out, U2);
}

/* MIN on the same stream: seq 5 writes 3 back, then 2 and 3 come in at
 * 5, 7, 9 and 11 (1 is always needed sooner): as much as the fixed set. */
static void test_optimum_min_skewed_stream_matches_fixed_set(void **state)
{
    (void)state;
    vs_trace_event_t ev[MAX_EVENTS];
    size_t n = parse(skewed_trace, ev);
    vs_optimum_cost_t c;
    assert_int_equal(vs_optimum_min(ev, n, 2 * U2, (vs_optimum_window_t){4, 12}, &c), 0);
    assert_int_equal(c.in, 4 * U2);
    assert_int_equal(c.out, U2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optimum_min_cycle_counts_restores_and_dirty_evictions),
        cmocka_unit_test(test_optimum_min_window_counts_only_its_operations),
        cmocka_unit_test(test_optimum_min_clean_and_empty_allocations_move_nothing),
        cmocka_unit_test(test_optimum_min_unevictable_allocations_take_room),
        cmocka_unit_test(test_optimum_min_duplicate_use_and_reused_id),
        cmocka_unit_test(test_optimum_min_operation_larger_than_capacity_is_enospc),
        cmocka_unit_test(test_optimum_min_malformed_traces_are_einval),
        cmocka_unit_test(test_optimum_fixed_set_keeps_the_most_used),
        cmocka_unit_test(test_optimum_min_skewed_stream_matches_fixed_set),
    };
    return cmocka_run_group_tests_name("optimum.c", tests, NULL, NULL);
}

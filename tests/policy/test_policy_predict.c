/*
 * test_policy_predict.c: the reference-stream predictor (policy/predict.c):
 * nested loops, phase changes, several uses per period, distances in bytes
 * and time, writes, frequencies for streams with no period.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "predict.h"

#define MAX_STREAM 4096

typedef struct stream_s {
    uint64_t id[MAX_STREAM];
    size_t len;
} stream_t;

static void push(stream_t *s, uint64_t id)
{
    assert_true(s->len < MAX_STREAM);
    s->id[s->len++] = id;
}

/* Feeds the first `n` accesses, 1 byte each, 10 ns apart, each its own
 * operation. */
static vs_predict_t *feed(const stream_t *s, size_t n)
{
    vs_predict_t *p = NULL;
    assert_int_equal(vs_predict_create(1024, &p), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(vs_predict_access(p, s->id[i], 1, false, 10, false), 0);
    return p;
}

/* The next `k` predicted accesses are the stream's own from `n` on. */
static void expect_continuation(const stream_t *s, size_t n, size_t k)
{
    vs_predict_t *p = feed(s, n);
    vs_predict_access_t *next = calloc(k, sizeof(*next));
    assert_non_null(next);
    size_t got = 0;
    vs_predict_next(p, next, k, &got);
    assert_int_equal(got, k);
    for (size_t i = 0; i < k; i++) {
        if (next[i].id != s->id[n + i])
            fail_msg("after %zu accesses, predicted access %zu is %llu, the stream has %llu", n, i,
                     (unsigned long long)next[i].id, (unsigned long long)s->id[n + i]);
    }
    free(next);
    vs_predict_destroy(p);
}

static void test_predict_loop_inside_loop_continues_the_stream(void **state)
{
    (void)state;
    /* Outer: A, inner (B C) three times, D; the outer loop five times. */
    stream_t s = {0};
    for (int outer = 0; outer < 5; outer++) {
        push(&s, 1);
        for (int inner = 0; inner < 3; inner++) {
            push(&s, 2);
            push(&s, 3);
        }
        push(&s, 4);
    }
    /* From the middle of the third outer pass (inside the inner loop, where
     * a per-allocation gap cannot tell the third inner pass from the
     * first): the rest of the stream. */
    for (size_t n = 16 + 3; n < 16 + 8; n++)
        expect_continuation(&s, n, s.len - n);
}

static void test_predict_phase_change_follows_the_last_step(void **state)
{
    (void)state;
    /* Per prompt: an encoder (10, 11), a denoiser (20, 21, 22) for four
     * steps, a decoder (30, 31). */
    stream_t s = {0};
    for (int prompt = 0; prompt < 4; prompt++) {
        push(&s, 10);
        push(&s, 11);
        for (int step = 0; step < 4; step++) {
            push(&s, 20);
            push(&s, 21);
            push(&s, 22);
        }
        push(&s, 30);
        push(&s, 31);
    }
    const size_t prompt = 2 + 12 + 2;
    /* After the third prompt's third step: one step more, then the decoder. */
    size_t n = 2 * prompt + 2 + 9;
    expect_continuation(&s, n, s.len - n);
    /* After its fourth step: the decoder, not a fifth step. */
    expect_continuation(&s, n + 3, s.len - n - 3);

    vs_predict_t *p = feed(&s, n);
    vs_predict_distance_t d;
    assert_int_equal(vs_predict_next_use(p, 30, &d), 0);
    assert_int_equal(d.accesses, 4); /* after 20, 21, 22 */
    assert_true(d.periodic);
    assert_int_equal(vs_predict_next_use(p, 10, &d), 0);
    assert_int_equal(d.accesses, 6); /* after those and 30, 31 */
    vs_predict_destroy(p);
}

static void test_predict_several_uses_per_period(void **state)
{
    (void)state;
    /* A is used three times a period, at unequal gaps. */
    static const uint64_t period[] = {1, 2, 1, 3, 4, 1, 5};
    stream_t s = {0};
    for (int rep = 0; rep < 6; rep++)
        for (size_t i = 0; i < sizeof(period) / sizeof(period[0]); i++)
            push(&s, period[i]);
    for (size_t n = 14; n < 21; n++) {
        vs_predict_t *p = feed(&s, n);
        size_t next_a = n;
        while (s.id[next_a] != 1)
            next_a++;
        vs_predict_distance_t d;
        assert_int_equal(vs_predict_next_use(p, 1, &d), 0);
        assert_int_equal(d.accesses, next_a - n + 1);
        vs_predict_destroy(p);
    }
}

static void test_predict_distance_in_bytes_time_and_writes(void **state)
{
    (void)state;
    /* A (10 bytes, read), B (20, written), C (30, read), one operation
     * each, 100, 200, 300 ns of compute before them. */
    vs_predict_t *p = NULL;
    assert_int_equal(vs_predict_create(256, &p), 0);
    for (int rep = 0; rep < 3; rep++) {
        assert_int_equal(vs_predict_access(p, 'A', 10, false, 100, false), 0);
        assert_int_equal(vs_predict_access(p, 'B', 20, true, 200, false), 0);
        assert_int_equal(vs_predict_access(p, 'C', 30, false, 300, false), 0);
    }
    vs_predict_distance_t d;
    assert_int_equal(vs_predict_next_use(p, 'B', &d), 0);
    assert_int_equal(d.accesses, 2);
    assert_int_equal(d.bytes, 10);  /* A in between */
    assert_int_equal(d.ns, 300);    /* before A, then before B */
    assert_true(d.write);
    assert_int_equal(vs_predict_next_use(p, 'C', &d), 0);
    assert_int_equal(d.accesses, 3);
    assert_int_equal(d.bytes, 30);
    assert_int_equal(d.ns, 600);
    assert_false(d.write);
    vs_predict_access_t next[4];
    size_t n = 0;
    vs_predict_next(p, next, 4, &n);
    assert_int_equal(n, 4);
    assert_int_equal(next[0].id, 'A');
    assert_int_equal(next[0].ns, 100);
    assert_int_equal(next[1].id, 'B');
    assert_true(next[1].write);
    assert_int_equal(next[3].id, 'A');
    assert_int_equal(next[3].ns, 700);
    vs_predict_destroy(p);
}

static void test_predict_operation_accesses_share_one_distance(void **state)
{
    (void)state;
    /* Operations: (A B C) then (D), repeated: B and C are used with A. */
    vs_predict_t *p = NULL;
    assert_int_equal(vs_predict_create(256, &p), 0);
    for (int rep = 0; rep < 3; rep++) {
        assert_int_equal(vs_predict_access(p, 'A', 8, false, 50, false), 0);
        assert_int_equal(vs_predict_access(p, 'B', 8, false, 0, true), 0);
        assert_int_equal(vs_predict_access(p, 'C', 8, true, 0, true), 0);
        assert_int_equal(vs_predict_access(p, 'D', 8, false, 50, false), 0);
    }
    vs_predict_distance_t a, c;
    assert_int_equal(vs_predict_next_use(p, 'A', &a), 0);
    assert_int_equal(vs_predict_next_use(p, 'C', &c), 0);
    assert_int_equal(c.accesses, a.accesses);
    assert_int_equal(c.bytes, a.bytes);
    assert_int_equal(c.ns, a.ns);
    assert_true(c.write);
    vs_predict_destroy(p);
}

static uint64_t rng = 0x2545f4914f6cdd1dULL;

static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_predict_no_period_ranks_the_preferred_nearer(void **state)
{
    (void)state;
    /* Attention (1) then a router's choice among 10..17, the lower the
     * more likely, 400 times: the choices are predicted from their
     * frequency, the attention from the context. */
    static const unsigned weight[8] = {40, 20, 12, 9, 7, 5, 4, 3};
    vs_predict_t *p = NULL;
    assert_int_equal(vs_predict_create(1024, &p), 0);
    for (int tok = 0; tok < 400; tok++) {
        assert_int_equal(vs_predict_access(p, 1, 4, false, 10, false), 0);
        unsigned r = (unsigned)(next_random() % 100), e = 0;
        while (r >= weight[e])
            r -= weight[e++];
        assert_int_equal(vs_predict_access(p, 10 + e, 4, false, 10, false), 0);
    }
    vs_predict_distance_t d[8], attention;
    assert_int_equal(vs_predict_next_use(p, 1, &attention), 0);
    assert_true(attention.periodic);
    assert_true(attention.accesses <= 2);
    for (int e = 0; e < 8; e++) {
        assert_int_equal(vs_predict_next_use(p, 10 + e, &d[e]), 0);
        assert_true(d[e].accesses != VS_PREDICT_NEVER);
    }
    /* The two most preferred rank nearer than the three least. */
    for (int hot = 0; hot < 2; hot++)
        for (int cold = 5; cold < 8; cold++)
            assert_true(d[hot].bytes < d[cold].bytes);
    vs_predict_destroy(p);
}

static void test_predict_one_off_is_never_after_a_period(void **state)
{
    (void)state;
    vs_predict_t *p = NULL;
    assert_int_equal(vs_predict_create(256, &p), 0);
    for (int rep = 0; rep < 6; rep++) {
        for (uint64_t id = 1; id <= 4; id++)
            assert_int_equal(vs_predict_access(p, id, 1, false, 0, false), 0);
        if (rep == 1)
            assert_int_equal(vs_predict_access(p, 99, 1, true, 0, false), 0);
    }
    vs_predict_distance_t d;
    assert_int_equal(vs_predict_next_use(p, 99, &d), 0);
    assert_int_equal(d.accesses, VS_PREDICT_NEVER);
    assert_int_equal(d.bytes, VS_PREDICT_NEVER);
    assert_int_equal(vs_predict_next_use(p, 2, &d), 0);
    assert_int_equal(d.accesses, 2);
    vs_predict_destroy(p);
}

static void test_predict_unknown_and_forgotten_ids(void **state)
{
    (void)state;
    vs_predict_t *p = NULL;
    assert_int_equal(vs_predict_create(0, &p), -EINVAL);
    assert_int_equal(vs_predict_create(64, &p), 0);
    vs_predict_distance_t d;
    assert_int_equal(vs_predict_next_use(p, 7, &d), -ENOENT);
    assert_int_equal(d.accesses, VS_PREDICT_NEVER);
    vs_predict_access_t next[2];
    size_t n = 5;
    vs_predict_next(p, next, 2, &n);
    assert_int_equal(n, 0);
    for (int rep = 0; rep < 3; rep++) {
        assert_int_equal(vs_predict_access(p, 7, 1, false, 0, false), 0);
        assert_int_equal(vs_predict_access(p, 8, 1, false, 0, false), 0);
    }
    assert_int_equal(vs_predict_next_use(p, 7, &d), 0);
    assert_int_equal(d.accesses, 1);
    vs_predict_forget(p, 7);
    assert_int_equal(vs_predict_next_use(p, 7, &d), -ENOENT);
    vs_predict_stats_t st;
    vs_predict_stats(p, &st);
    assert_int_equal(st.accesses, 6);
    assert_int_equal(st.allocations, 1);
    assert_int_equal(st.period, 2);
    vs_predict_destroy(p);
}

static void test_predict_long_stream_wraps_the_history(void **state)
{
    (void)state;
    /* A period of 40 in a history of 128 accesses, 100 periods long: the
     * ring wraps many times and the prediction stays exact. */
    vs_predict_t *p = NULL;
    assert_int_equal(vs_predict_create(128, &p), 0);
    for (int rep = 0; rep < 100; rep++)
        for (uint64_t id = 0; id < 40; id++)
            assert_int_equal(vs_predict_access(p, id, 1, false, 0, false), 0);
    vs_predict_access_t next[80];
    size_t n = 0;
    vs_predict_next(p, next, 80, &n);
    assert_int_equal(n, 80);
    for (size_t i = 0; i < 80; i++)
        assert_int_equal(next[i].id, i % 40);
    vs_predict_distance_t d;
    assert_int_equal(vs_predict_next_use(p, 39, &d), 0);
    assert_int_equal(d.accesses, 40);
    vs_predict_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_predict_loop_inside_loop_continues_the_stream),
        cmocka_unit_test(test_predict_phase_change_follows_the_last_step),
        cmocka_unit_test(test_predict_several_uses_per_period),
        cmocka_unit_test(test_predict_distance_in_bytes_time_and_writes),
        cmocka_unit_test(test_predict_operation_accesses_share_one_distance),
        cmocka_unit_test(test_predict_no_period_ranks_the_preferred_nearer),
        cmocka_unit_test(test_predict_one_off_is_never_after_a_period),
        cmocka_unit_test(test_predict_unknown_and_forgotten_ids),
        cmocka_unit_test(test_predict_long_stream_wraps_the_history),
    };
    return cmocka_run_group_tests_name("predict.c", tests, NULL, NULL);
}

/*
 * test_policy_replay.c: the `predict` kind (predict.c, schedule.c behind
 * policy.c) replayed offline on the suite's shapes (bench/policy/synth.c):
 * a training step, a mixture of experts with a skewed router, a
 * multi-phase pipeline, an LLM decode whose KV cache grows, the plain
 * cycle. Bytes moved (H2D + D2H) against Belady's MIN with write-back
 * (bench/workloads/optimum.h; or, for the router's
 * stream, the best fixed resident set's) and against LRU's, at 25, 50 and
 * 75% of each trace's peak, counted over the passes after each trace's
 * warm-up (the steady state, as the workload suite measures it). The
 * bound is the suite's goal, VS_BENCH_SUITE_GOAL x the reference
 * (bench/policy's `policy_replay --suite` prints the figures).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "replay.h"
#include "synth.h"

static const unsigned limit_pct[] = {25, 50, 75};

static uint64_t moved(const vs_bench_result_t *r)
{
    return r->h2d + r->d2h;
}

/* Replays `fn`'s trace at every limit; predict's bytes must stay within
 * the goal and under LRU's. */
static void check_shape(int (*fn)(vs_bench_trace_t *), bool fixed_reference)
{
    vs_bench_trace_t t;
    memset(&t, 0, sizeof(t));
    assert_int_equal(fn(&t), 0);
    uint64_t peak = vs_bench_peak_bytes(&t);
    for (size_t l = 0; l < sizeof(limit_pct) / sizeof(limit_pct[0]); l++) {
        uint64_t limit = peak * limit_pct[l] / 100;
        vs_bench_result_t predict, lru, ref;
        assert_int_equal(vs_bench_replay(&t, VS_BENCH_PREDICT, limit, false, &predict), 0);
        assert_int_equal(vs_bench_replay(&t, VS_BENCH_LRU, limit, false, &lru), 0);
        assert_int_equal(vs_bench_optimum(&t, limit, fixed_reference, &ref), 0);
        double ratio = (double)moved(&predict) / (double)moved(&ref);
        if (ratio > VS_BENCH_SUITE_GOAL || moved(&predict) >= moved(&lru))
            fail_msg("%s at %u%%: predict moves %.3f x the reference (bound %.2f), lru %.3f x", t.name,
                     limit_pct[l], ratio, VS_BENCH_SUITE_GOAL, (double)moved(&lru) / (double)moved(&ref));
    }
    vs_bench_trace_fini(&t);
}

static void test_replay_predict_training_step(void **state)
{
    (void)state;
    check_shape(vs_bench_synth_train, false);
}

static void test_replay_predict_moe_skewed_router(void **state)
{
    (void)state;
    check_shape(vs_bench_synth_moe, true);
}

static void test_replay_predict_pipeline_per_prompt(void **state)
{
    (void)state;
    check_shape(vs_bench_synth_pipeline, false);
}

static void test_replay_predict_decode_growing_kv(void **state)
{
    (void)state;
    check_shape(vs_bench_synth_decode, false);
}

static void test_replay_predict_plain_cycle(void **state)
{
    (void)state;
    check_shape(vs_bench_synth_cycle, false);
}

/* The reference the router's stream is held against: a fixed set of the
 * most used beats streaming everything through the same room. */
static void test_replay_fixed_set_keeps_the_most_used(void **state)
{
    (void)state;
    vs_bench_trace_t t;
    memset(&t, 0, sizeof(t));
    assert_int_equal(vs_bench_synth_moe(&t), 0);
    uint64_t limit = vs_bench_peak_bytes(&t) / 2;
    vs_bench_result_t lru, best;
    assert_int_equal(vs_bench_replay(&t, VS_BENCH_LRU, limit, false, &lru), 0);
    assert_int_equal(vs_bench_optimum(&t, limit, true, &best), 0);
    assert_true(moved(&best) < moved(&lru));
    vs_bench_trace_fini(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_predict_training_step),
        cmocka_unit_test(test_replay_predict_moe_skewed_router),
        cmocka_unit_test(test_replay_predict_pipeline_per_prompt),
        cmocka_unit_test(test_replay_predict_decode_growing_kv),
        cmocka_unit_test(test_replay_predict_plain_cycle),
        cmocka_unit_test(test_replay_fixed_set_keeps_the_most_used),
    };
    return cmocka_run_group_tests_name("replay (predict)", tests, NULL, NULL);
}

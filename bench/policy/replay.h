/*
 * replay.h: replays a trace against a device memory limit under one
 * eviction order and counts the bytes moved.
 */
#ifndef VS_BENCH_REPLAY_H
#define VS_BENCH_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "synth.h"
#include "timeline_svg.h"

/* The policies the benchmark compares: the two of policy/, the learned one
 * also with the plan the shim gives it when it prefetches (a fixed resident
 * set, the streamed bytes spread over the cycle; it trades some bytes for
 * copies that overlap compute), Belady's farthest next use (drawn in the
 * SVG timeline only: the figures come from `vs_bench_optimum`), and
 * `predict` (the predictor and scheduler of predict.h and schedule.h). */
#define VS_BENCH_ORDER_LIST(X) \
    X(LRU, "lru")              \
    X(LEARNED, "learned")      \
    X(PLANNED, "planned")      \
    X(BELADY, "belady")        \
    X(PREDICT, "predict")

typedef enum vs_bench_order_e {
#define VS_BENCH_ORDER_ENUM(suffix, name) VS_BENCH_##suffix,
    VS_BENCH_ORDER_LIST(VS_BENCH_ORDER_ENUM)
#undef VS_BENCH_ORDER_ENUM
    VS_BENCH_ORDER_COUNT
} vs_bench_order_t;

/* The orders of the original table and its SVG panels: lru to belady. */
#define VS_BENCH_CLASSIC_ORDERS (VS_BENCH_BELADY + 1)

/* One sample per operation, for the SVG timeline (tools/timeline_svg.h).
 * The replay has no disk tier: `disk_bytes` is always 0. */
typedef vs_timeline_sample_t vs_bench_sample_t;

typedef struct vs_bench_result_s {
    uint64_t h2d;
    uint64_t d2h;
    uint64_t restores;
    uint64_t evictions;
    uint64_t ops;
    vs_bench_sample_t *timeline; /* `ops` samples when asked for, else NULL */
} vs_bench_result_t;

/* The suite's goal: predict moves at most this many times the
 * reference's bytes (Belady's MIN with write-back, or the best fixed set),
 * at every limit, over the measured passes. */
#define VS_BENCH_SUITE_GOAL 1.10

/* Bytes of the largest set of live allocations over the trace. */
uint64_t vs_bench_peak_bytes(const vs_bench_trace_t *t);

/* Replays the whole trace; `res` counts bytes, restores and evictions of
 * the operations from the trace's `measure_from` to before its
 * `measure_to` (the timeline's samples too). Returns 0,
 * -EINVAL (the trace uses an unknown id, allocates a live one, or an
 * operation does not fit in `limit`) or -ENOMEM. */
int vs_bench_replay(const vs_bench_trace_t *t, vs_bench_order_t order, uint64_t limit,
                    bool want_timeline, vs_bench_result_t *res);
/* The offline reference (bench/workloads/optimum.h), counted over the
 * same operations, the future read to the trace's end:
 * Belady's MIN with write-back, or with `fixed_set` the best fixed resident
 * set (for a stream with no repeating structure). Fills h2d, d2h, restores
 * and ops. Returns 0, -EINVAL (the trace is inconsistent or an operation
 * does not fit in `limit`) or -ENOMEM. */
int vs_bench_optimum(const vs_bench_trace_t *t, uint64_t limit, bool fixed_set, vs_bench_result_t *res);

#endif

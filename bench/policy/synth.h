/*
 * synth.h: synthetic traces for the policy replay benchmark, and the growable
 * event list every trace (synthetic or read from a file) is replayed from.
 */
#ifndef VS_BENCH_SYNTH_H
#define VS_BENCH_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

typedef struct vs_bench_trace_s {
    const char *name;
    vs_trace_event_t *ev;
    size_t len;
    size_t cap;
    uint64_t passes; /* repeats of the main loop: steps, tokens, tiles */
    /* The first `warmup` passes are not measured: bytes are counted from
     * the operation `measure_from` on (0: the whole trace) and before
     * `measure_to`, as the workload suite counts a steady state after its
     * warm-up. */
    uint64_t warmup;
    uint64_t measure_from;
    uint64_t measure_to; /* the first operation not measured; 0: none */
    uint64_t seq;    /* last operation number handed out */
} vs_bench_trace_t;

int vs_bench_trace_push(vs_bench_trace_t *t, const vs_trace_event_t *ev);
void vs_bench_trace_fini(vs_bench_trace_t *t);

/* X(name, generator, description) */
#define VS_BENCH_SYNTH_LIST(X)                                                              \
    X(dit, vs_bench_synth_dit, "60-block DiT (Qwen-Image-like), weight load + 20 steps")     \
    X(llm, vs_bench_synth_llm, "32-layer LLM decode, 128 tokens, growing paged KV cache")    \
    X(vae, vs_bench_synth_vae, "VAE decode, 4 stages of varied conv blocks, 3 tiled passes")

/* The suite's shapes (issue 54), which the `predict` policy is measured
 * on: X(name, generator, description, reference), the reference being
 * what its bytes are held against: `belady` (Belady's farthest next use,
 * reading the future) or `fixed` (the best fixed resident set, for a
 * stream with no period). */
#define VS_BENCH_SUITE_LIST(X)                                                                       \
    X(train, vs_bench_synth_train, "training step: forward, backward in reverse, optimizer", belady)  \
    X(moe, vs_bench_synth_moe, "mixture of experts, host dispatch, skewed top-2 router", fixed)     \
    X(pipeline, vs_bench_synth_pipeline, "per prompt: encoder once, denoiser 8 steps, decoder", belady) \
    X(decode, vs_bench_synth_decode, "LLM decode, KV cache growing by new allocations", belady)       \
    X(cycle, vs_bench_synth_cycle, "the plain cycle: one size, read in turn", belady)

#define VS_BENCH_SYNTH_DECL(name, fn, desc) int fn(vs_bench_trace_t *t);
#define VS_BENCH_SUITE_DECL(name, fn, desc, reference) int fn(vs_bench_trace_t *t);
VS_BENCH_SYNTH_LIST(VS_BENCH_SYNTH_DECL)
VS_BENCH_SUITE_LIST(VS_BENCH_SUITE_DECL)
#undef VS_BENCH_SYNTH_DECL
#undef VS_BENCH_SUITE_DECL

#endif

/* suite.c: the workload suite (issue 54), the yardstick of the offload
 * policy: access shapes beyond the read-only loop, each measured on
 * simcuda's virtual clock against the offline optimum of its own trace.
 *
 * Run as `workload_suite SHIM [--svg FILE] [--only WORKLOAD] [--limit PCT]
 * [--ratio R] [--policy KIND] [--prefetch on|off]` (one workload, limit
 * or ratio; the shim's column with VRAMSHIM_POLICY=KIND, or
 * VRAMSHIM_PREFETCH set). Like
 * bench/offload/offload_cycle.c, the program is a parent (not preloaded)
 * that runs every measurement in a child preloaded with SHIM, with
 * SIMCUDA_CLOCK=virtual, simcuda's default host costs and a link of
 * SIMCUDA_H2D_GBPS / SIMCUDA_D2H_GBPS (50 GB/s each by default).
 *
 * A workload is a script (generated, deterministic): allocations, frees
 * and operations, each operation a kernel that uses up to
 * SUITE_OPERANDS allocations, reading or writing each, and computes for a
 * time proportional to the bytes it uses. The script runs `warmup` passes
 * (steps, prompts, sequences) and then `measured` ones; the parent turns
 * the same script into an access trace (policy/trace.h, with every use's
 * direction) and computes from it, at each limit, the bytes Belady's MIN
 * with write-back moves in the measured passes (optimum.h), and for the
 * mixture of experts the best fixed resident set's. Per pass, with B the
 * link:
 *   T = max(MIN's bytes in, MIN's bytes out) / B (the links are separate);
 *   C = ratio x T (the ratio is the cell's compute-to-transfer ratio);
 *   bound = max(C, T).
 * Each cell runs twice: the shim's default (VRAMSHIM_POLICY and
 * VRAMSHIM_PREFETCH unset) and LRU without prefetch
 * (VRAMSHIM_POLICY=lru VRAMSHIM_PREFETCH=off). It reports per pass: time
 * over the bound, bytes moved (in + out, from the shim's live counters)
 * over the reference's, and the shim's time over LRU's. Goals: at most
 * 1.10 x the bound (training: 1.20), at most 1.10 x the reference's bytes,
 * never slower than LRU; a cell that misses one prints MISSED.
 *
 * Every kernel checks the words it uses (both ends, and the word the
 * script writes, against what was last written there) and the children
 * compare every byte of every live allocation at the end: an eviction or
 * restore that loses a byte fails the run (exit 1).
 *
 * `workload_suite SHIM --traces DIR` writes each workload's trace to
 * DIR/<workload>.trace and runs nothing. It exits 0 whether goals are met
 * or not (a benchmark reports); 1 when something is broken.
 */
#include <cuda.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "optimum.h"
#include "policy.h"
#include "shim_counters.h"
#include "simcuda.h"
#include "trace.h"
#include "vs_test.h"

#define MIB ((uint64_t)1 << 20)
#define SUITE_OPERANDS 6
#define DEFAULT_GBPS "50"
#define CHILD_MARK "VS_WORKLOAD_SUITE_CHILD"
/* The smallest evictable allocation (VRAMSHIM_MIN_EVICT's default). */
#define EVICTABLE_BYTES (2 * MIB)
/* The words a kernel checks at each end of an allocation. */
#define END_WORDS 8
/* The trace's times: compute at this many ns per byte used (an operation
 * computes as long as its bytes take on a 50 GB/s link). */
#define TRACE_NS_PER_BYTE (1.0 / 50.0)
#define MAX_TIME_OVER_BOUND 1.10
#define MAX_TIME_OVER_BOUND_TRAINING 1.20
#define MAX_BYTES_OVER_OPTIMUM 1.10

/* ---- Scripts ------------------------------------------------------------- */

typedef enum step_kind_e { STEP_ALLOC, STEP_FREE, STEP_OP, STEP_MARK } step_kind_t;

typedef struct step_s {
    step_kind_t kind;
    int count;                    /* OP: operands */
    uint32_t id[SUITE_OPERANDS];  /* ALLOC, FREE: id[0] */
    unsigned written;             /* OP: bit i, operand i is written */
    uint64_t bytes;               /* ALLOC: size */
    const char *name;             /* OP: the kernel's name in the trace */
} step_t;

typedef struct script_s {
    step_t *steps;
    size_t len, cap;
    uint64_t *sizes; /* per id */
    uint32_t ids, ids_cap;
    int warmup, measured;
    int marks;
} script_t;

static int script_push(script_t *s, const step_t *st)
{
    if (s->len == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        step_t *steps = realloc(s->steps, cap * sizeof(*steps));
        if (!steps)
            return -ENOMEM;
        s->steps = steps;
        s->cap = cap;
    }
    s->steps[s->len++] = *st;
    return 0;
}

/* A new allocation of `bytes`, filled (an operation that writes it all:
 * cuMemsetD32Async); its id. UINT32_MAX when out of memory. */
static uint32_t script_alloc(script_t *s, uint64_t bytes)
{
    if (s->ids == s->ids_cap) {
        uint32_t cap = s->ids_cap ? 2 * s->ids_cap : 256;
        uint64_t *sizes = realloc(s->sizes, cap * sizeof(*sizes));
        if (!sizes)
            return UINT32_MAX;
        s->sizes = sizes;
        s->ids_cap = cap;
    }
    uint32_t id = s->ids++;
    s->sizes[id] = bytes;
    step_t alloc = {.kind = STEP_ALLOC, .id = {id}, .bytes = bytes};
    step_t fill = {.kind = STEP_OP, .count = 1, .id = {id}, .written = 1, .name = "fill"};
    if (script_push(s, &alloc) != 0 || script_push(s, &fill) != 0)
        return UINT32_MAX;
    return id;
}

static int script_free(script_t *s, uint32_t id)
{
    step_t st = {.kind = STEP_FREE, .id = {id}};
    return script_push(s, &st);
}

/* An operation: `reads` then `writes` (UINT32_MAX ends each list). */
static int script_op(script_t *s, const char *name, const uint32_t *reads, const uint32_t *writes)
{
    step_t st = {.kind = STEP_OP, .name = name};
    for (int w = 0; w < 2; w++) {
        for (const uint32_t *p = w ? writes : reads; p && *p != UINT32_MAX; p++) {
            if (st.count == SUITE_OPERANDS)
                return -E2BIG;
            st.written |= (unsigned)w << st.count;
            st.id[st.count++] = *p;
        }
    }
    return script_push(s, &st);
}

#define R(...) ((const uint32_t[]){__VA_ARGS__, UINT32_MAX})
#define NONE ((const uint32_t[]){UINT32_MAX})

/* The passes a script holds: the warm-up, the measured ones, and one
 * more that no child runs: the future the optimum reads past the last
 * measured pass (without it, the last measured pass would be the end of
 * the run to MIN, every allocation never used again, and its choices
 * there no steady state's). */
static int script_passes(const script_t *s)
{
    return s->warmup + s->measured + 1;
}

/* Marks the start of pass `p` when it is the first measured one or the
 * one after the last. */
static int script_pass(script_t *s, int p)
{
    if (p != s->warmup && p != s->warmup + s->measured)
        return 0;
    step_t st = {.kind = STEP_MARK};
    s->marks++;
    return script_push(s, &st);
}

static void script_fini(script_t *s)
{
    free(s->steps);
    free(s->sizes);
    memset(s, 0, sizeof(*s));
}

/* ---- Workloads ----------------------------------------------------------- */

/* A small deterministic generator (xorshift64*), for the router. */
static uint64_t rng_next(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545f4914f6cdd1dull;
}

/* Training step: per layer weights, gradients, optimizer state (Adam's
 * two moments: twice the weights) and saved activations; forward in
 * order, backward in reverse (each layer's gradient written, the
 * activation below overwritten with its gradient), then the optimizer
 * (weights and state written). Every allocation is written every step. */
#define TRAIN_LAYERS 6
static int gen_training(script_t *s)
{
    uint32_t x = script_alloc(s, 2 * MIB), w[TRAIN_LAYERS], g[TRAIN_LAYERS], m[TRAIN_LAYERS], a[TRAIN_LAYERS];
    for (int l = 0; l < TRAIN_LAYERS; l++) {
        w[l] = script_alloc(s, 4 * MIB);
        g[l] = script_alloc(s, 4 * MIB);
        m[l] = script_alloc(s, 8 * MIB);
        a[l] = script_alloc(s, 4 * MIB);
    }
    int rc = 0;
    for (int p = 0; p < script_passes(s) && rc == 0; p++) {
        if ((rc = script_pass(s, p)) != 0)
            break;
        rc |= script_op(s, "batch", NONE, R(x));
        for (int l = 0; l < TRAIN_LAYERS; l++)
            rc |= script_op(s, "forward", R(w[l], l ? a[l - 1] : x), R(a[l]));
        for (int l = TRAIN_LAYERS; l-- > 0;)
            rc |= script_op(s, "backward", R(w[l], a[l]), R(g[l], l ? a[l - 1] : x));
        for (int l = 0; l < TRAIN_LAYERS; l++)
            rc |= script_op(s, "optimizer", R(g[l]), R(w[l], m[l]));
    }
    return rc;
}

/* Mixture of experts: per layer a shared part (attention) and eight
 * experts; the host routes each step's tokens to two experts a layer,
 * drawn from a Zipf-like distribution (weight 1/rank) over a per-layer
 * order of the experts, and launches one kernel per expert. */
#define MOE_LAYERS 4
#define MOE_EXPERTS 8
static int gen_moe(script_t *s)
{
    uint32_t h = script_alloc(s, 2 * MIB), shared[MOE_LAYERS], expert[MOE_LAYERS][MOE_EXPERTS];
    int order[MOE_LAYERS][MOE_EXPERTS];
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int l = 0; l < MOE_LAYERS; l++) {
        shared[l] = script_alloc(s, 4 * MIB);
        for (int e = 0; e < MOE_EXPERTS; e++) {
            expert[l][e] = script_alloc(s, 4 * MIB);
            order[l][e] = e;
        }
        for (int e = MOE_EXPERTS - 1; e > 0; e--) {
            int j = (int)(rng_next(&rng) % (uint64_t)(e + 1)), t = order[l][e];
            order[l][e] = order[l][j];
            order[l][j] = t;
        }
    }
    double weight[MOE_EXPERTS], total = 0;
    for (int r = 0; r < MOE_EXPERTS; r++)
        total += weight[r] = 1.0 / (r + 1);
    int rc = 0;
    for (int p = 0; p < script_passes(s) && rc == 0; p++) {
        if ((rc = script_pass(s, p)) != 0)
            break;
        for (int l = 0; l < MOE_LAYERS; l++) {
            rc |= script_op(s, "attention", R(shared[l]), R(h));
            int first = -1;
            for (int k = 0; k < 2; k++) {
                double left = total - (first >= 0 ? weight[first] : 0);
                double u = (double)(rng_next(&rng) >> 11) / 9007199254740992.0 * left;
                int r = -1;
                for (int c = 0; c < MOE_EXPERTS; c++) {
                    if (c == first)
                        continue;
                    r = c; /* the last one left, should rounding leave u over */
                    if (u < weight[c])
                        break;
                    u -= weight[c];
                }
                first = r;
                rc |= script_op(s, "expert", R(expert[l][order[l][r]]), R(h));
            }
        }
    }
    return rc;
}

/* A diffusion pipeline per prompt: a text encoder once (its embedding
 * written), a denoiser of several blocks for DENOISE_STEPS steps (each
 * block reads the embedding and writes the latent, a small tensor), a VAE
 * once (reads the latent, writes the image). */
#define PIPE_ENCODER 4
#define PIPE_BLOCKS 6
#define PIPE_STEPS 8
#define PIPE_VAE 3
static int gen_pipeline(script_t *s)
{
    uint32_t enc[PIPE_ENCODER], den[PIPE_BLOCKS], vae[PIPE_VAE];
    for (int i = 0; i < PIPE_ENCODER; i++)
        enc[i] = script_alloc(s, 4 * MIB);
    for (int i = 0; i < PIPE_BLOCKS; i++)
        den[i] = script_alloc(s, 8 * MIB);
    for (int i = 0; i < PIPE_VAE; i++)
        vae[i] = script_alloc(s, 4 * MIB);
    uint32_t emb = script_alloc(s, 2 * MIB), latent = script_alloc(s, 2 * MIB), image = script_alloc(s, 2 * MIB);
    int rc = 0;
    for (int p = 0; p < script_passes(s) && rc == 0; p++) {
        if ((rc = script_pass(s, p)) != 0)
            break;
        for (int i = 0; i < PIPE_ENCODER; i++)
            rc |= script_op(s, "encoder", R(enc[i]), R(emb));
        for (int t = 0; t < PIPE_STEPS; t++)
            for (int i = 0; i < PIPE_BLOCKS; i++)
                rc |= script_op(s, "denoiser", R(den[i], emb), R(latent));
        for (int i = 0; i < PIPE_VAE; i++)
            rc |= script_op(s, "vae", R(vae[i], latent), R(image));
    }
    return rc;
}

/* LLM decode whose KV cache grows: per layer weights; each sequence's
 * cache is made of 2 MiB blocks, a new allocation per layer every
 * KV_TOKENS tokens (the last block written by every token, all read),
 * freed when the sequence ends; the LM head after the last layer. */
#define KV_LAYERS 6
#define KV_TOKENS 4
#define KV_SEQUENCE 16
static int gen_kvgrow(script_t *s)
{
    uint32_t w[KV_LAYERS], head, h = script_alloc(s, 1 * MIB);
    for (int l = 0; l < KV_LAYERS; l++)
        w[l] = script_alloc(s, 8 * MIB);
    head = script_alloc(s, 8 * MIB);
    int rc = 0;
    for (int p = 0; p < script_passes(s) && rc == 0; p++) {
        if ((rc = script_pass(s, p)) != 0)
            break;
        uint32_t kv[KV_LAYERS][KV_SEQUENCE / KV_TOKENS];
        int blocks = 0;
        for (int t = 0; t < KV_SEQUENCE; t++) {
            if (t % KV_TOKENS == 0) {
                for (int l = 0; l < KV_LAYERS; l++)
                    kv[l][blocks] = script_alloc(s, 2 * MIB);
                blocks++;
            }
            for (int l = 0; l < KV_LAYERS; l++) {
                step_t st = {.kind = STEP_OP, .name = "layer", .count = 2 + blocks, .id = {w[l], h},
                             .written = 2u | 1u << (1 + blocks)};
                for (int b = 0; b < blocks; b++)
                    st.id[2 + b] = kv[l][b];
                rc |= script_push(s, &st);
            }
            rc |= script_op(s, "head", R(head), R(h));
        }
        for (int b = 0; b < blocks; b++)
            for (int l = 0; l < KV_LAYERS; l++)
                rc |= script_free(s, kv[l][b]);
    }
    return rc;
}

/* bench/offload/offload_cycle.c's sweep shapes, fewer blocks: a cycle of
 * equal 16 MiB layers (the sweep's are 32 MiB); a DiT block (qkv 6, attention out 2, MLP 8 and 8
 * MiB, a 64 KiB norm never evicted); an LLM layer (the DiT's four and a 4
 * MiB KV cache written every token, then a 16 MiB head). Each kernel also
 * writes a 1 MiB activation buffer (never evicted). */
static int gen_layers(script_t *s, int blocks, const uint64_t *sizes, int tensors, unsigned written,
                      uint64_t head_bytes)
{
    uint32_t act = script_alloc(s, 1 * MIB), ids[64], head = UINT32_MAX;
    int count = blocks * tensors;
    for (int k = 0; k < count; k++)
        ids[k] = script_alloc(s, sizes[k % tensors]);
    if (head_bytes)
        head = script_alloc(s, head_bytes);
    int rc = 0;
    for (int p = 0; p < script_passes(s) && rc == 0; p++) {
        if ((rc = script_pass(s, p)) != 0)
            break;
        for (int k = 0; k < count; k++) {
            if (written >> (k % tensors) & 1u)
                rc |= script_op(s, "block", NONE, R(ids[k], act));
            else
                rc |= script_op(s, "block", R(ids[k]), R(act));
        }
        if (head != UINT32_MAX)
            rc |= script_op(s, "head", R(head), R(act));
    }
    return rc;
}

static int gen_cycle(script_t *s)
{
    static const uint64_t sizes[] = {16 * MIB};
    return gen_layers(s, 8, sizes, 1, 0, 0);
}

static int gen_dit(script_t *s)
{
    static const uint64_t sizes[] = {6 * MIB, 2 * MIB, 8 * MIB, 8 * MIB, 64 << 10};
    return gen_layers(s, 8, sizes, 5, 0, 0);
}

static int gen_llm(script_t *s)
{
    static const uint64_t sizes[] = {6 * MIB, 2 * MIB, 8 * MIB, 8 * MIB, 4 * MIB};
    return gen_layers(s, 6, sizes, 5, 1u << 4, 16 * MIB);
}

typedef struct workload_s {
    const char *name;
    int (*generate)(script_t *s);
    int warmup, measured;
    bool fixed_set;      /* bytes measured against the best fixed set */
    double max_time;     /* goal: time over the bound */
    const char *summary;
} workload_t;

/* X(name, generator, warm-up passes, measured passes, fixed set, time goal, summary) */
#define SUITE_WORKLOADS(X)                                                                                    \
    X(training, gen_training, 8, 2, false, MAX_TIME_OVER_BOUND_TRAINING,                                     \
      "training step: 6 layers (weights 4, gradients 4, Adam state 8, activations 4 MiB); all written")       \
    X(moe, gen_moe, 96, 128, true, MAX_TIME_OVER_BOUND,                                                       \
      "mixture of experts: 4 layers x 8 experts of 4 MiB, top-2 by a Zipf-like router, host dispatch")       \
    X(pipeline, gen_pipeline, 6, 2, false, MAX_TIME_OVER_BOUND,                                              \
      "diffusion pipeline per prompt: encoder 16 MiB once, denoiser 48 MiB x 8 steps, VAE 12 MiB once")       \
    X(kvgrow, gen_kvgrow, 4, 2, false, MAX_TIME_OVER_BOUND,                                                  \
      "LLM decode, 16-token sequences: 6 layers of 8 MiB, a new 2 MiB KV block per layer every 4 tokens")     \
    X(cycle, gen_cycle, 8, 2, false, MAX_TIME_OVER_BOUND, "the sweep's cycle: 8 layers of 16 MiB, read-only")  \
    X(dit, gen_dit, 8, 2, false, MAX_TIME_OVER_BOUND, "the sweep's DiT: 8 blocks of 6+2+8+8 MiB, read-only")   \
    X(llm, gen_llm, 8, 2, false, MAX_TIME_OVER_BOUND,                                                        \
      "the sweep's LLM: 6 layers of 6+2+8+8 MiB and a 4 MiB KV cache written per token, 16 MiB head")

static const workload_t workloads[] = {
#define SUITE_WORKLOAD_ENTRY(n, g, w, m, f, t, d) {#n, g, w, m, f, t, d},
    SUITE_WORKLOADS(SUITE_WORKLOAD_ENTRY)
#undef SUITE_WORKLOAD_ENTRY
};
#define WORKLOAD_COUNT (sizeof(workloads) / sizeof(workloads[0]))

static const int limit_percents[] = {25, 50, 75};
#define LIMITS (sizeof(limit_percents) / sizeof(limit_percents[0]))
static const double ratios[] = {0.5, 2.0};
#define RATIOS (sizeof(ratios) / sizeof(ratios[0]))

static int script_build(const workload_t *w, script_t *s)
{
    memset(s, 0, sizeof(*s));
    s->warmup = w->warmup;
    s->measured = w->measured;
    int rc = w->generate(s);
    if (rc == 0 && s->marks != 2)
        rc = -EINVAL;
    if (rc != 0)
        script_fini(s);
    return rc < 0 ? rc : rc != 0 ? -ENOMEM : 0;
}

/* The bytes an operation computes on: every operand's size. */
static uint64_t op_weight(const script_t *s, const step_t *st)
{
    uint64_t bytes = 0;
    for (int i = 0; i < st->count; i++)
        bytes += s->sizes[st->id[i]];
    return st->name && strcmp(st->name, "fill") == 0 ? 0 : bytes;
}

/* ---- The trace ----------------------------------------------------------- */

typedef struct trace_s {
    vs_trace_event_t *ev;
    size_t len;
    vs_optimum_window_t window;
    uint64_t peak;            /* the most bytes live at once */
    uint64_t measured_weight; /* op_weight summed over the measured passes */
} trace_t;

/* The script as the trace the shim would write with every use's
 * direction known: ids as the script's, seq from 1, one stream, times at
 * TRACE_NS_PER_BYTE. */
static int trace_build(const script_t *s, trace_t *t)
{
    size_t n = 0;
    for (size_t k = 0; k < s->len; k++)
        n += s->steps[k].kind == STEP_OP ? (size_t)s->steps[k].count : 1;
    memset(t, 0, sizeof(*t));
    t->ev = calloc(n ? n : 1, sizeof(*t->ev));
    if (!t->ev)
        return -ENOMEM;
    uint64_t seq = 0, live = 0, weight = 0;
    int marks = 0;
    double time_ns = 0;
    for (size_t k = 0; k < s->len; k++) {
        const step_t *st = &s->steps[k];
        vs_trace_event_t *e = &t->ev[t->len];
        switch (st->kind) {
        case STEP_ALLOC:
            *e = (vs_trace_event_t){.kind = VS_TRACE_ALLOC, .id = st->id[0], .size = st->bytes,
                                    .evictable = st->bytes >= EVICTABLE_BYTES};
            t->len++;
            live += st->bytes;
            t->peak = live > t->peak ? live : t->peak;
            break;
        case STEP_FREE:
            *e = (vs_trace_event_t){.kind = VS_TRACE_FREE, .id = st->id[0]};
            t->len++;
            live -= s->sizes[st->id[0]];
            break;
        case STEP_MARK:
            if (marks++ == 0)
                t->window.seq_from = seq + 1;
            else
                t->window.seq_to = seq + 1;
            break;
        case STEP_OP:
            seq++;
            for (int i = 0; i < st->count; i++) {
                e = &t->ev[t->len++];
                *e = (vs_trace_event_t){.kind = VS_TRACE_USE, .id = st->id[i], .seq = seq,
                                        .time_ns = (uint64_t)time_ns,
                                        .rw = st->written >> i & 1u ? VS_TRACE_WRITE : VS_TRACE_READ};
                snprintf(e->op, sizeof(e->op), "%s", st->name);
            }
            time_ns += (double)op_weight(s, st) * TRACE_NS_PER_BYTE;
            if (marks == 1)
                weight += op_weight(s, st);
            break;
        }
    }
    t->measured_weight = weight;
    return 0;
}

static int trace_write(const trace_t *t, const workload_t *w, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "workload_suite: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "# vramshim trace v1\n# workload_suite %s: %s\n", w->name, w->summary);
    fprintf(f, "# passes: %d warm-up, %d measured (seq %" PRIu64 " to %" PRIu64 ", excluded), 1 not run (the "
            "optimum's lookahead)\n", w->warmup, w->measured, t->window.seq_from, t->window.seq_to);
    fprintf(f, "# peak live bytes %" PRIu64 "; time_ns: compute at %.3f ns per byte an operation uses\n", t->peak,
            TRACE_NS_PER_BYTE);
    char line[VS_TRACE_LINE_MAX + 2];
    int rc = 0;
    for (size_t k = 0; k < t->len && rc == 0; k++) {
        int n = vs_trace_format(&t->ev[k], line, sizeof(line));
        if (n < 0 || fputs(line, f) == EOF)
            rc = -1;
    }
    if (fclose(f) != 0 || rc != 0) {
        fprintf(stderr, "workload_suite: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

/* ---- The child ----------------------------------------------------------- */

static atomic_uint_fast64_t check_errors;

static uint32_t fill_word(uint32_t id)
{
    return (id + 1) * 2654435761u;
}

static uint32_t written_word(uint32_t id, uint64_t writes)
{
    return (uint32_t)((id + 1) * 0x9e3779b1u) ^ (uint32_t)(writes * 40503u + 1);
}

/* Where the script's writes to an allocation of `words` words land. */
static uint64_t written_index(uint32_t id, uint64_t words)
{
    return END_WORDS + ((uint64_t)id * 7919u) % (words - 2 * END_WORDS);
}

/* Per operand: pointer, words, fill word | written << 32, index,
 * expected word | new word << 32; then the compute in ns. */
#define PARAMS_PER_OPERAND 5
#define KERNEL_PARAMS (SUITE_OPERANDS * PARAMS_PER_OPERAND + 1)

static void suite_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)launch;
    (void)user;
    for (int i = 0; i < SUITE_OPERANDS; i++) {
        uint32_t *p = *(uint32_t **)args[i * PARAMS_PER_OPERAND];
        if (!p)
            continue;
        uint64_t words = *(const uint64_t *)args[i * PARAMS_PER_OPERAND + 1];
        uint64_t fill = *(const uint64_t *)args[i * PARAMS_PER_OPERAND + 2];
        uint64_t index = *(const uint64_t *)args[i * PARAMS_PER_OPERAND + 3];
        uint64_t values = *(const uint64_t *)args[i * PARAMS_PER_OPERAND + 4];
        uint64_t bad = 0;
        for (uint64_t j = 0; j < END_WORDS; j++)
            bad += (p[j] != (uint32_t)fill) + (p[words - 1 - j] != (uint32_t)fill);
        bad += p[index] != (uint32_t)values;
        if (bad)
            atomic_fetch_add(&check_errors, bad);
        if (fill >> 32)
            p[index] = (uint32_t)(values >> 32);
    }
}

static uint64_t suite_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)launch;
    (void)user;
    return *(const uint64_t *)args[KERNEL_PARAMS - 1];
}

typedef struct child_result_s {
    uint64_t modeled_ns, in, out, errors;
} child_result_t;

static int child_run(const workload_t *w, double ns_per_byte, const char *result_path)
{
    static size_t sizes[KERNEL_PARAMS];
    for (int i = 0; i < KERNEL_PARAMS; i++)
        sizes[i] = sizeof(uint64_t);
    simcuda_kernel_desc_t desc = {.name = "suite_op", .param_count = KERNEL_PARAMS, .param_sizes = sizes,
                                  .fn = suite_kernel, .cost = suite_cost};
    script_t s;
    if (script_build(w, &s) != 0 || simcuda_register_kernel(&desc) != 0) {
        fprintf(stderr, "workload_suite: cannot set up the child\n");
        return 1;
    }
    CUdeviceptr *ptr = calloc(s.ids, sizeof(*ptr));
    uint64_t *writes = calloc(s.ids, sizeof(*writes)); /* writes so far, per id */
    uint32_t *staging = malloc(64 * MIB);
    if (!ptr || !writes || !staging)
        return 1;
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    CUfunction fn;
    CUstream stream;
    CUevent marks[2];
    VS_CHECK(cuInit(0));
    VS_CHECK(cuDeviceGet(&dev, 0));
    VS_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    VS_CHECK(cuCtxSetCurrent(ctx));
    VS_CHECK(cuModuleLoadData(&module, "benchmark"));
    VS_CHECK(cuModuleGetFunction(&fn, module, "suite_op"));
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuEventCreate(&marks[0], CU_EVENT_DEFAULT));
    VS_CHECK(cuEventCreate(&marks[1], CU_EVENT_DEFAULT));
    const vs_snapshot_header_t *snapshot = NULL;
    shim_counters_t counters[2];
    int mark = 0;
    for (size_t k = 0; k < s.len; k++) {
        const step_t *st = &s.steps[k];
        if (st->kind == STEP_ALLOC) {
            VS_CHECK(cuMemAlloc(&ptr[st->id[0]], st->bytes));
        } else if (st->kind == STEP_FREE) {
            VS_CHECK(cuMemFree(ptr[st->id[0]]));
            ptr[st->id[0]] = 0;
        } else if (st->kind == STEP_MARK) {
            /* As offload_cycle: an event on the stream, no wait, so the
             * shim's pipeline runs on; the counters as of now. */
            VS_CHECK(cuEventRecord(marks[mark], stream));
            if (!snapshot && !(snapshot = shim_counters_open()))
                return 1;
            if (shim_counters_read(snapshot, &counters[mark]) != 0)
                return 1;
            if (++mark == 2)
                break; /* the rest is the optimum's lookahead */
        } else if (strcmp(st->name, "fill") == 0) {
            uint32_t id = st->id[0];
            VS_CHECK(cuMemsetD32Async(ptr[id], fill_word(id), s.sizes[id] / 4, stream));
        } else {
            uint64_t params[KERNEL_PARAMS] = {0};
            void *args[KERNEL_PARAMS];
            for (int i = 0; i < st->count; i++) {
                uint32_t id = st->id[i];
                uint64_t words = s.sizes[id] / 4, *q = &params[i * PARAMS_PER_OPERAND];
                bool written = st->written >> i & 1u;
                uint32_t now = writes[id] ? written_word(id, writes[id]) : fill_word(id);
                q[0] = ptr[id];
                q[1] = words;
                q[2] = fill_word(id) | (uint64_t)written << 32;
                q[3] = written_index(id, words);
                if (written)
                    writes[id]++;
                q[4] = now | (uint64_t)(written ? written_word(id, writes[id]) : 0) << 32;
            }
            params[KERNEL_PARAMS - 1] = (uint64_t)((double)op_weight(&s, st) * ns_per_byte);
            for (int i = 0; i < KERNEL_PARAMS; i++)
                args[i] = &params[i];
            VS_CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL));
        }
    }
    VS_CHECK(cuStreamSynchronize(stream));
    float ms = 0;
    VS_CHECK(cuEventElapsedTime(&ms, marks[0], marks[1]));
    /* Every byte of every live allocation. */
    uint64_t mismatched = 0;
    for (uint32_t id = 0; id < s.ids; id++) {
        if (!ptr[id])
            continue;
        uint64_t words = s.sizes[id] / 4, index = written_index(id, words);
        VS_CHECK(cuMemcpyDtoH(staging, ptr[id], s.sizes[id]));
        for (uint64_t i = 0; i < words; i++) {
            uint32_t expect = i == index && writes[id] ? written_word(id, writes[id]) : fill_word(id);
            mismatched += staging[i] != expect;
        }
        VS_CHECK(cuMemFree(ptr[id]));
    }
    FILE *out = fopen(result_path, "w");
    if (!out)
        return 1;
    uint64_t m = (uint64_t)s.measured;
    fprintf(out, "modeled_ns %" PRIu64 " in %" PRIu64 " out %" PRIu64 " errors %" PRIu64 "\n",
            (uint64_t)((double)ms * 1e6 + 0.5) / m, (counters[1].bytes_to_device - counters[0].bytes_to_device) / m,
            (counters[1].bytes_to_host - counters[0].bytes_to_host) / m,
            (uint64_t)atomic_load(&check_errors) + mismatched);
    fclose(out);
    free(ptr);
    free(writes);
    free(staging);
    script_fini(&s);
    return 0;
}

/* ---- The parent ---------------------------------------------------------- */

typedef struct config_s {
    const char *name;
    const char *policy;   /* NULL: the shim's default */
    const char *prefetch; /* NULL: the shim's default */
} config_t;

/* The first is the shim as configured (`--policy` sets its
 * VRAMSHIM_POLICY); the second is the baseline. */
static config_t configs[] = {
    {"shim", NULL, NULL},
    {"lru", "lru", "off"},
};

static int run_child(const char *shim, const char *dir, size_t workload, double ns_per_byte, uint64_t limit,
                     const config_t *config, child_result_t *r)
{
    char result_path[4096], log_path[4096], workload_arg[16], limit_arg[32], compute_arg[32];
    snprintf(result_path, sizeof(result_path), "%s/result", dir);
    snprintf(log_path, sizeof(log_path), "%s/shim.log", dir);
    snprintf(workload_arg, sizeof(workload_arg), "%zu", workload);
    snprintf(limit_arg, sizeof(limit_arg), "%" PRIu64, limit);
    snprintf(compute_arg, sizeof(compute_arg), "%.17g", ns_per_byte);
    unlink(result_path);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("workload_suite: fork");
        return -1;
    }
    if (pid == 0) {
        setenv("LD_PRELOAD", shim, 1);
        setenv(CHILD_MARK, "1", 1);
        setenv("VRAM_LIMIT", limit_arg, 1);
        if (config->policy)
            setenv("VRAMSHIM_POLICY", config->policy, 1);
        if (config->prefetch)
            setenv("VRAMSHIM_PREFETCH", config->prefetch, 1);
        setenv("VRAMSHIM_LOG_FILE", log_path, 1);
        char *argv[] = {(char *)shim, (char *)shim, "--child", workload_arg, compute_arg, result_path, NULL};
        execv("/proc/self/exe", argv);
        perror("workload_suite: execv");
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("workload_suite: waitpid");
            return -1;
        }
    }
    FILE *in = fopen(result_path, "r");
    int got = in ? fscanf(in, "modeled_ns %" SCNu64 " in %" SCNu64 " out %" SCNu64 " errors %" SCNu64,
                          &r->modeled_ns, &r->in, &r->out, &r->errors)
                 : 0;
    if (in)
        fclose(in);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != 4) {
        fprintf(stderr, "workload_suite: the child failed (status 0x%x); the shim's log is %s\n", status,
                log_path);
        return -1;
    }
    unlink(log_path);
    return 0;
}

typedef struct cell_s {
    bool run;
    double c_ms, bound_ms, ref_mib;
    double time[2], bytes[2]; /* per config: over the bound, over the reference */
    double over_lru;
    bool met;
} cell_t;

static cell_t cells[WORKLOAD_COUNT][LIMITS][RATIOS];

static void cell_colour(const cell_t *c, char *out, size_t size)
{
    if (c->met) {
        snprintf(out, size, "#5cb85c");
        return;
    }
    double t = (c->time[0] - 1.10) / (2.0 - 1.10);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    snprintf(out, size, "#%02x%02x%02x", 240, (int)(200 - 150 * t), (int)(80 - 40 * t));
}

/* The table as a heat map: a panel per workload, limits down, ratios
 * across; in each cell the shim's time over the bound, its bytes over the
 * reference's and its time over LRU's. */
static int write_svg(const char *path, double gbps)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    const int cell_w = 92, cell_h = 52, left = 70, top = 76, gap = 30;
    int panel_w = cell_w * (int)RATIOS;
    int width = left + (int)WORKLOAD_COUNT * (panel_w + gap) + 20, height = top + (int)LIMITS * cell_h + 80;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">vramshim workload suite: the shim's "
            "default against the offline optimum (simcuda virtual clock, %.0f GB/s link)</text>\n"
            "<text x=\"%d\" y=\"40\" fill=\"#555\">per cell: time / max(C, MIN bytes / B); bytes / MIN's (moe: "
            "the best fixed set's); time / LRU's without prefetch. Goals %.2f (training %.2f), %.2f, 1.00</text>\n",
            width, height, left, gbps, left, MAX_TIME_OVER_BOUND, MAX_TIME_OVER_BOUND_TRAINING,
            MAX_BYTES_OVER_OPTIMUM);
    for (size_t wi = 0; wi < WORKLOAD_COUNT; wi++) {
        int x0 = left + (int)wi * (panel_w + gap);
        fprintf(f, "<g class=\"panel\" data-workload=\"%s\">\n", workloads[wi].name);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-weight=\"bold\">%s</text>\n",
                x0 + panel_w / 2, top - 10, workloads[wi].name);
        for (size_t li = 0; li < LIMITS; li++) {
            if (wi == 0)
                fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">L = %d%%</text>\n", left - 8,
                        top + (int)li * cell_h + cell_h / 2 + 4, limit_percents[li]);
            for (size_t ri = 0; ri < RATIOS; ri++) {
                const cell_t *c = &cells[wi][li][ri];
                int x = x0 + (int)ri * cell_w, y = top + (int)li * cell_h;
                if (!c->run) {
                    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#ddd\" "
                               "stroke=\"white\"/>\n", x, y, cell_w, cell_h);
                    continue;
                }
                char colour[16];
                cell_colour(c, colour, sizeof(colour));
                fprintf(f,
                        "<g class=\"cell\" data-limit-percent=\"%d\" data-ratio=\"%.2f\" "
                        "data-time-over-bound=\"%.4f\" data-bytes-over-optimum=\"%.4f\" data-over-lru=\"%.4f\" "
                        "data-met=\"%d\"><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
                        "stroke=\"white\"/><text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
                        "font-weight=\"bold\">%.2f</text><text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
                        "font-size=\"10\">bytes %.2f, /LRU %.2f</text></g>\n",
                        limit_percents[li], ratios[ri], c->time[0], c->bytes[0], c->over_lru, c->met, x, y, cell_w,
                        cell_h, colour, x + cell_w / 2, y + 22, c->time[0], x + cell_w / 2, y + 40, c->bytes[0],
                        c->over_lru);
            }
        }
        for (size_t ri = 0; ri < RATIOS; ri++)
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%.2f</text>\n",
                    x0 + (int)ri * cell_w + cell_w / 2, top + (int)LIMITS * cell_h + 16, ratios[ri]);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">C / T</text>\n</g>\n",
                x0 + panel_w / 2, top + (int)LIMITS * cell_h + 32);
    }
    fprintf(f, "</svg>\n");
    int failed = ferror(f);
    if (fclose(f) != 0 || failed) {
        fprintf(stderr, "workload_suite: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

static double env_gbps(const char *name)
{
    const char *value = getenv(name);
    char *end;
    double gbps = value ? strtod(value, &end) : 0.0;
    return value && end != value && gbps > 0.0 ? gbps : 0.0;
}

/* Reads `path` back and checks that it holds `t`'s events exactly. */
static int trace_read_back(const trace_t *t, const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = -EIO;
    if (!f)
        return rc;
    for (;;) {
        if (len == cap) {
            char *more = realloc(buf, cap = cap ? 2 * cap : 1 << 20);
            if (!more)
                goto out;
            buf = more;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    vs_trace_reader_t reader;
    vs_trace_event_t ev;
    size_t k = 0;
    vs_trace_reader_init(&reader, buf, len);
    while ((rc = vs_trace_reader_next(&reader, &ev)) == 1) {
        const vs_trace_event_t *want = &t->ev[k];
        if (k == t->len || ev.kind != want->kind || ev.id != want->id || ev.size != want->size
            || ev.evictable != want->evictable || ev.seq != want->seq || ev.rw != want->rw
            || ev.time_ns != want->time_ns || strcmp(ev.op, want->op) != 0) {
            rc = -EINVAL;
            break;
        }
        k++;
    }
    if (rc == 0 && k != t->len)
        rc = -EINVAL;
out:
    free(buf);
    fclose(f);
    return rc;
}

/* `--traces DIR`: each workload's trace, read back and checked, and the
 * references at each limit (what a replay should compare against). */
static int write_traces(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "workload_suite: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    for (size_t wi = 0; wi < WORKLOAD_COUNT; wi++) {
        const workload_t *w = &workloads[wi];
        script_t s;
        trace_t t;
        char path[4096];
        if (script_build(w, &s) != 0 || trace_build(&s, &t) != 0)
            return 1;
        snprintf(path, sizeof(path), "%s/%s.trace", dir, w->name);
        int rc = trace_write(&t, w, path);
        if (rc == 0 && (rc = trace_read_back(&t, path)) != 0)
            fprintf(stderr, "workload_suite: %s does not read back as written\n", path);
        if (rc == 0)
            printf("%s: %s\n", path, w->summary);
        for (size_t li = 0; li < LIMITS && rc == 0; li++) {
            uint64_t limit = t.peak * (uint64_t)limit_percents[li] / 100 / (2 * MIB) * (2 * MIB);
            vs_optimum_cost_t opt, fixed;
            rc = vs_optimum_min(t.ev, t.len, limit, t.window, &opt);
            if (rc == 0 && w->fixed_set)
                rc = vs_optimum_fixed_set(t.ev, t.len, limit, t.window, &fixed, NULL);
            if (rc != 0) {
                fprintf(stderr, "workload_suite: %s at %d%%: no optimum (%s)\n", w->name, limit_percents[li],
                        strerror(-rc));
                break;
            }
            printf("  limit %d%% = %" PRIu64 " bytes: MIN per measured pass %.1f MiB in, %.1f MiB out",
                   limit_percents[li], limit, (double)opt.in / w->measured / MIB,
                   (double)opt.out / w->measured / MIB);
            if (w->fixed_set)
                printf("; best fixed set %.1f MiB in, %.1f MiB out", (double)fixed.in / w->measured / MIB,
                       (double)fixed.out / w->measured / MIB);
            printf("\n");
        }
        free(t.ev);
        script_fini(&s);
        if (rc != 0)
            return 1;
    }
    return 0;
}

/* Which cells run: every one unless `--only`, `--limit` or `--ratio`
 * names one value. */
typedef struct selection_s {
    const char *workload;
    int limit_percent; /* 0: every limit */
    double ratio;      /* 0: every ratio */
} selection_t;

static int suite_run(const char *shim, const char *svg_path, const selection_t *only)
{
    setenv("SIMCUDA_CLOCK", "virtual", 1);
    setenv("SIMCUDA_DEVICE_MEM", "4G", 1);
    setenv("VRAMSHIM_MODE", "offload", 1);
    setenv("VRAMSHIM_LOG", "info", 0);
    setenv("SIMCUDA_H2D_GBPS", DEFAULT_GBPS, 0);
    setenv("SIMCUDA_D2H_GBPS", DEFAULT_GBPS, 0);
    unsetenv("SIMCUDA_FAIL");
    unsetenv("VRAMSHIM_POLICY");
    unsetenv("VRAMSHIM_PREFETCH");
    double h2d = env_gbps("SIMCUDA_H2D_GBPS"), d2h = env_gbps("SIMCUDA_D2H_GBPS");
    if (h2d == 0.0 || d2h == 0.0) {
        fprintf(stderr, "workload_suite: SIMCUDA_H2D_GBPS and SIMCUDA_D2H_GBPS must be positive numbers\n");
        return 2;
    }
    char dir[] = "/tmp/workload_suite.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("workload_suite: mkdtemp");
        return 1;
    }
    const char *costs = getenv("SIMCUDA_HOST_COSTS");
    printf("workload_suite: virtual clock, SIMCUDA_HOST_COSTS=%s, links %.1f GB/s in, %.1f out; per pass: "
           "T = max(MIN in, MIN out) / B, C = ratio x T, bound = max(C, T); MIN = Belady with write-back, "
           "offline (moe's bytes: against the best fixed resident set); shim = %s%s%s%s, lru = "
           "VRAMSHIM_POLICY=lru VRAMSHIM_PREFETCH=off\n",
           costs && costs[0] ? costs : "default", h2d, d2h,
           configs[0].policy ? "VRAMSHIM_POLICY=" : "default policy",
           configs[0].policy ? configs[0].policy : "",
           configs[0].prefetch ? ", VRAMSHIM_PREFETCH=" : "", configs[0].prefetch ? configs[0].prefetch : "");
    printf("%-9s %5s %5s %8s %8s %9s %8s %8s %8s %8s %8s  %s\n", "workload", "limit", "ratio", "C ms", "bound",
           "ref MiB", "shim/bd", "shim/ref", "lru/bd", "lru/ref", "shim/lru", "goal");
    int rc = 0, met = 0, total = 0;
    for (size_t wi = 0; wi < WORKLOAD_COUNT && rc == 0; wi++) {
        const workload_t *w = &workloads[wi];
        if (only->workload && strcmp(only->workload, w->name) != 0)
            continue;
        script_t s;
        trace_t t;
        if (script_build(w, &s) != 0 || trace_build(&s, &t) != 0) {
            rc = 1;
            break;
        }
        for (size_t li = 0; li < LIMITS && rc == 0; li++) {
            if (only->limit_percent && only->limit_percent != limit_percents[li])
                continue;
            uint64_t limit = t.peak * (uint64_t)limit_percents[li] / 100 / (2 * MIB) * (2 * MIB);
            vs_optimum_cost_t opt, ref;
            int orc = vs_optimum_min(t.ev, t.len, limit, t.window, &opt);
            if (orc == 0)
                ref = opt;
            if (orc == 0 && w->fixed_set)
                orc = vs_optimum_fixed_set(t.ev, t.len, limit, t.window, &ref, NULL);
            if (orc != 0) {
                fprintf(stderr, "workload_suite: %s at %d%%: no optimum (%s)\n", w->name, limit_percents[li],
                        strerror(-orc));
                rc = 1;
                break;
            }
            double m = (double)w->measured;
            double t_in = (double)opt.in / m / (h2d * 1e9), t_out = (double)opt.out / m / (d2h * 1e9);
            double transfer_s = t_in > t_out ? t_in : t_out;
            double ref_bytes = (double)(ref.in + ref.out) / m;
            for (size_t ri = 0; ri < RATIOS && rc == 0; ri++) {
                if (only->ratio != 0.0 && only->ratio != ratios[ri])
                    continue;
                cell_t *c = &cells[wi][li][ri];
                double compute_s = ratios[ri] * transfer_s;
                double ns_per_byte = compute_s * 1e9 / ((double)t.measured_weight / m);
                child_result_t r[2];
                for (size_t ci = 0; ci < 2 && rc == 0; ci++) {
                    if (run_child(shim, dir, wi, ns_per_byte, limit, &configs[ci], &r[ci]) != 0)
                        rc = 1;
                    else if (r[ci].errors != 0) {
                        printf("workload_suite: [%s %d%% %.2f %s] BROKEN: %" PRIu64 " words came back "
                               "different\n", w->name, limit_percents[li], ratios[ri], configs[ci].name,
                               r[ci].errors);
                        rc = 1;
                    }
                }
                if (rc != 0)
                    break;
                double bound_s = compute_s > transfer_s ? compute_s : transfer_s;
                c->run = true;
                c->c_ms = compute_s * 1e3;
                c->bound_ms = bound_s * 1e3;
                c->ref_mib = ref_bytes / MIB;
                for (int ci = 0; ci < 2; ci++) {
                    c->time[ci] = (double)r[ci].modeled_ns / 1e9 / bound_s;
                    c->bytes[ci] = ref_bytes > 0 ? (double)(r[ci].in + r[ci].out) / ref_bytes : 0;
                }
                c->over_lru = (double)r[0].modeled_ns / (double)r[1].modeled_ns;
                c->met = c->time[0] <= w->max_time && c->bytes[0] <= MAX_BYTES_OVER_OPTIMUM && c->over_lru <= 1.0;
                met += c->met;
                total++;
                printf("%-9s %4d%% %5.2f %8.3f %8.3f %9.1f %8.3f %8.3f %8.3f %8.3f %8.3f  %s\n", w->name,
                       limit_percents[li], ratios[ri], c->c_ms, c->bound_ms, c->ref_mib, c->time[0], c->bytes[0],
                       c->time[1], c->bytes[1], c->over_lru, c->met ? "met" : "MISSED");
                fflush(stdout);
            }
        }
        free(t.ev);
        script_fini(&s);
    }
    rmdir(dir);
    if (rc != 0)
        return rc;
    if (svg_path) {
        if (write_svg(svg_path, h2d) != 0)
            return 1;
        printf("workload_suite: heat map written to %s\n", svg_path);
    }
    printf("workload_suite: %d of %d cells met (time <= %.2f x the bound, training %.2f; bytes <= %.2f x the "
           "reference; no slower than LRU): %s\n",
           met, total, MAX_TIME_OVER_BOUND, MAX_TIME_OVER_BOUND_TRAINING, MAX_BYTES_OVER_OPTIMUM,
           met == total ? "met" : "MISSED");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[2], "--child") == 0) {
        void *direct = simcuda_entry_point("cuLaunchKernel");
        if (!getenv(CHILD_MARK) || !direct || __extension__(void *) cuLaunchKernel == direct) {
            fprintf(stderr, "workload_suite: LD_PRELOAD=%s did not interpose cuLaunchKernel\n", argv[1]);
            return 1;
        }
        char *end;
        unsigned long workload = strtoul(argv[3], &end, 10);
        double ns_per_byte = strtod(argv[4], NULL);
        if (*end != '\0' || workload >= WORKLOAD_COUNT || !(ns_per_byte >= 0.0))
            return 2;
        return child_run(&workloads[workload], ns_per_byte, argv[5]);
    }
    if (argc == 4 && strcmp(argv[2], "--traces") == 0)
        return write_traces(argv[3]);
    const char *svg = NULL;
    selection_t only = {0};
    int i = 2;
    bool valid = true;
    for (; argc >= 2 && i + 1 < argc && valid; i += 2) {
        char *end = NULL;
        if (strcmp(argv[i], "--svg") == 0) {
            svg = argv[i + 1];
        } else if (strcmp(argv[i], "--only") == 0) {
            only.workload = argv[i + 1];
        } else if (strcmp(argv[i], "--policy") == 0) {
            vs_policy_kind_t kind;
            configs[0].policy = argv[i + 1];
            valid = vs_policy_kind_from_name(argv[i + 1], &kind) == 0;
        } else if (strcmp(argv[i], "--prefetch") == 0) {
            configs[0].prefetch = argv[i + 1];
            valid = strcmp(argv[i + 1], "on") == 0 || strcmp(argv[i + 1], "off") == 0;
        } else if (strcmp(argv[i], "--limit") == 0) {
            long pct = strtol(argv[i + 1], &end, 10);
            only.limit_percent = (int)pct;
            valid = *end == '\0' && (pct == 25 || pct == 50 || pct == 75);
        } else if (strcmp(argv[i], "--ratio") == 0) {
            only.ratio = strtod(argv[i + 1], &end);
            valid = *end == '\0' && (only.ratio == ratios[0] || only.ratio == ratios[1]);
        } else {
            break;
        }
    }
    bool known = only.workload == NULL;
    for (size_t wi = 0; wi < WORKLOAD_COUNT && !known; wi++)
        known = strcmp(only.workload, workloads[wi].name) == 0;
    if (argc < 2 || i != argc || !known || !valid) {
        fprintf(stderr,
                "usage: %s /path/to/libvramshim.so [--svg FILE] [--only WORKLOAD] [--limit 25|50|75]\n"
                "       [--ratio 0.5|2] [--policy KIND] [--prefetch on|off] | --traces DIR\n"
                "  workloads: training, moe, pipeline, kvgrow, cycle, dit, llm; kinds: %s\n",
                argv[0], vs_policy_kind_accepted());
        return 2;
    }
    return suite_run(argv[1], svg, &only);
}

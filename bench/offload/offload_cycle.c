/* offload_cycle.c: the time a pass over a model larger than VRAM_LIMIT takes
 * under the shim, against the physical bound, on simcuda's virtual clock.
 *
 * Run as `offload_cycle SHIM`. Like offload_throughput, the program is a
 * parent (not preloaded) that runs each configuration in a child process
 * preloaded with SHIM, SIMCUDA_CLOCK=virtual and a link of SIMCUDA_H2D_GBPS /
 * SIMCUDA_D2H_GBPS (50 GB/s each by default, an H100's PCIe Gen5 link).
 *
 * The child loads a model's weights with cuMemcpyHtoD, then makes passes
 * over it the way an inference loop does: every block's kernels, in order,
 * read that block's weights (read-only) and write a small activation
 * buffer. Each kernel's modeled cost is proportional to its weights, so a
 * pass computes for C in total. It measures the passes after the warm-up
 * (the policy learns the cycle in the first ones): modeled time between
 * events recorded after the warm-up's last kernel and after the last
 * measured one (nothing waits in between, so the passes run as in a loop,
 * in steady state), and bytes in and out from the shim's live counters.
 * After the last pass it reads every weight back and compares it with what
 * it loaded: clean evictions (nothing copied back) must never lose a byte.
 *
 * Per pass, with W the working set (the weights and the activation buffer:
 * every byte a pass touches), L the limit and B the link:
 *   bound  = max(C, streamed / B), streamed = the bytes the shim brought in;
 *   ideal  = max(C, (W - L) / B), what no policy can beat.
 *
 * Workloads:
 *   - `cycle`: 40 layers of 32 MiB under 512M (issue 6's done-when): at most
 *     1.15 x (W - L) brought in per pass, nothing copied back, at most
 *     1.10 x the bound.
 *   - `dit`: a 60-block DiT with Qwen-Image's proportions scaled down (per
 *     block: qkv 6 MiB, attention out 2 MiB, MLP up and down 8 MiB each, a
 *     64 KiB norm that is never evicted; 1.4 GiB) and its compute-to-weights
 *     ratio (0.6 s of compute for 40.9 GB on a 50 GB/s link), at limits of
 *     25%, 50% and 75% of W: at most 1.05 x the bound.
 * Configurations beside each: the shim's default (learned cycle, prefetch),
 * no prefetch (VRAMSHIM_PREFETCH=off) and LRU without prefetch. The DiT
 * runs 20 passes before the 3 it measures: at 50% and 75% its cycle reads
 * compute-bound, at 25% near the balance point, and the shim's trial of a
 * lean plan (shim/offload_meter.c) is over by then (at 25% and 50% it goes
 * back: the lean plan took 2.3 times and 2.3% longer); the passes of a
 * change cost up to 2.5 times the bound.
 *
 * `offload_cycle SHIM sweep [--svg FILE]` runs the shim's default over a
 * grid instead (issue 15's done-when): three workloads (a cycle of equal
 * layers, a DiT, an LLM decode loop whose KV caches are written every
 * token and whose LM head is read after the last layer), limits of 25, 50
 * and 75% of the weights, and compute-to-transfer ratios of 0.5, 0.75, 1,
 * 1.33 and 2, where transfer is F / B and F = W - L + 2 x the largest
 * allocation, what double buffering must stream. Goals per cell: time per
 * pass at most 1.05 x max(C, F/B), bytes in at most 1.02 x F, nothing
 * copied back but written allocations (the KV caches). It prints a table
 * and, with --svg, writes it as a heat map (time over the bound). Each cell
 * runs 48 passes before the 2 it measures: the shim times a settled plan
 * and measures two cycles of it before it may try a plan for a
 * compute-bound or link-bound cycle, times that one in turn, and goes back
 * when it is slower (shim/offload_meter.c): a trial that goes back takes
 * about ten passes, and the plan it returns to settles too: with 24 passes
 * the LLM at 25%, ratio 1.33 was measured in the first cycles of the plan
 * its trial went back to (1.134 x the bound; 1.072 with 48 and with 72).
 * `offload_cycle SHIM sweep --cell WORKLOAD PERCENT RATIO LOG [--warmup N]`
 * runs one cell, N warm-up passes instead of 48, and keeps the shim's log
 * in LOG. One workload runs only so: `churn`, sixteen 36 MiB layers beside
 * eight 1 MiB allocations made every other pass and freed halfway through
 * it, a budget that moves (check_moving_budget.py); and `framework`, the
 * GPU's DiT as PyTorch runs it (bench/gpu/dit_offload.py) scaled by 1/10:
 * sixteen 36 MiB blocks, each one allocation that five of a block's twenty
 * kernels read views of, as the GPU's block launches them, beside six
 * activations of 2 to 12 MiB that every block writes (check_framework.py).
 *
 * It exits 0 whether goals are met or not (a benchmark reports); 1 when
 * something is broken (a child failed, data came back wrong).
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
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim_counters.h"
#include "simcuda.h"
#include "vs_test.h"

#define MIB ((uint64_t)1 << 20)
#define MEASURED_PASSES 3
/* The sweep's: fewer measured, more warm-up passes, so that every weight
 * loaded while resident has had its one copy back and the regime meter's
 * trials of a lean plan are over before they start. */
#define SWEEP_WARMUP_PASSES 48
#define SWEEP_MEASURED_PASSES 2
#define DEFAULT_GBPS "50"
#define CHILD_MARK "VS_OFFLOAD_CYCLE_CHILD"
#define ACTIVATION_BYTES (1ull << 20)
/* The most small allocations a workload's scratch makes in a pass
 * (workload_t.churn_allocations), and the size of each. */
#define CHURN_MAX 8
#define CHURN_BYTES MIB
/* Words each kernel checks at both ends and in the middle of its weights. */
#define CHECK_WORDS 8

/* ---- Workloads ----------------------------------------------------------- */

typedef struct workload_s {
    const char *name;
    int blocks;
    int tensors;                 /* per block */
    uint64_t tensor_bytes[5];
    unsigned written_tensors;    /* bit t: tensor t of each block is written every pass (a KV cache) */
    uint64_t head_bytes;         /* read once after the last block (an LM head); 0: none */
    double compute_per_byte_ns;  /* kernel cost per weight byte; in the sweep, set per cell */
    uint64_t limits_mib[3];      /* 0: percentages below */
    int limit_percent[3];
    int limit_count;
    int warmup_passes;           /* before the measured ones */
    int measured_passes;         /* 0: MEASURED_PASSES */
    bool sweep;                  /* one of the sweep's workloads */
    bool cell_only;              /* not in the sweep, but run by `sweep --cell` */
    /* Small allocations (CHURN_BYTES each, never evicted; at most
     * CHURN_MAX) made at the start of every other pass and freed halfway
     * through it, as a framework's scratch comes and goes: what the plan
     * may keep moves with them. */
    int churn_allocations;
    /* A framework's activations (FRAMEWORK_SEGMENTS of them, these sizes):
     * each block is one allocation of weights, read through views by the
     * operations of framework_ops, which read and write the activations
     * as a framework's caching allocator hands them out; 0: none, one
     * kernel per tensor. */
    uint64_t segment_bytes[6];
    double max_in_over_ideal;    /* goal: bytes in per pass / (W - L); 0 = none */
    double max_time_over_bound;  /* goal: modeled / bound */
} workload_t;

/* The activations of the framework workload, as PyTorch's caching
 * allocator held them for bench/gpu/dit_offload.py's DiT on an H200
 * (hidden 3072, 4096 tokens, MLP x5, bf16: the residual stream and a
 * normed copy 24 MiB each, qkv 72, attention out 24, a projection 24,
 * the MLP's hidden 120; weight blocks of 360 MiB), scaled by 1/10 (the
 * blocks large, 32 MiB or more, as on the GPU) and rounded to granules. */
enum { SEG_X, SEG_H, SEG_QKV, SEG_O, SEG_T, SEG_M, FRAMEWORK_SEGMENTS };

/* One operation of a framework's block: reads `in` and, with a
 * `weight_share` (in hundredths of the block), a view of the weights at
 * `weight_at` (hundredths), writes `out` (`accumulate`: adds to it), and
 * takes `cost_share` hundredths of the block's compute. */
typedef struct framework_op_s {
    int in, out;
    int weight_at, weight_share;
    int cost_share;
    bool accumulate;
} framework_op_t;
#define FRAMEWORK_SHARES 100

/* bench/gpu/dit_offload.py's block as PyTorch launches it: the modulation
 * (a linear of the time embedding: 30% of the weights, little compute),
 * norm and modulate, qkv, attention (13% of the compute, no weights), the
 * heads' transpose, the output projection, gate and residual add, norm and
 * modulate, MLP up, GELU, down, gate and residual add: twenty kernels, five
 * of them reading views of the block's weights (gaps of 5, 3, 7 and 2
 * kernels), the elementwise ones 1% of the compute each. */
static const framework_op_t framework_ops[] = {
    {SEG_X, SEG_T, 0, 30, 1, false},   {SEG_X, SEG_H, 0, 0, 1, false},     {SEG_H, SEG_H, 0, 0, 1, false},
    {SEG_H, SEG_H, 0, 0, 1, false},    {SEG_H, SEG_H, 0, 0, 1, false},     {SEG_H, SEG_QKV, 30, 15, 15, false},
    {SEG_QKV, SEG_O, 0, 0, 13, false}, {SEG_O, SEG_H, 0, 0, 1, false},     {SEG_H, SEG_T, 45, 5, 5, false},
    {SEG_T, SEG_T, 0, 0, 1, false},    {SEG_T, SEG_X, 0, 0, 1, true},      {SEG_X, SEG_H, 0, 0, 1, false},
    {SEG_H, SEG_H, 0, 0, 1, false},    {SEG_H, SEG_H, 0, 0, 1, false},     {SEG_H, SEG_H, 0, 0, 1, false},
    {SEG_H, SEG_M, 50, 25, 27, false}, {SEG_M, SEG_M, 0, 0, 1, false},     {SEG_M, SEG_T, 75, 25, 25, false},
    {SEG_T, SEG_T, 0, 0, 1, false},    {SEG_T, SEG_X, 0, 0, 1, true},
};
#define FRAMEWORK_OPS (sizeof framework_ops / sizeof framework_ops[0])
/* The words of an activation each operation writes (and the host
 * mirrors); the rest of it keeps the pattern it was filled with. */
#define FRAMEWORK_WORDS 4
#define FRAMEWORK_FILL 0xa5

/* Qwen-Image: 0.6 s of compute per forward for 40.9 GB of weights. */
#define DIT_NS_PER_BYTE (0.6e9 / 40.9e9)

static const workload_t workloads[] = {
    {.name = "cycle", .blocks = 40, .tensors = 1, .tensor_bytes = {32 * MIB},
     /* Balanced: a layer's compute equals its copy at 50 GB/s. */
     .compute_per_byte_ns = 1.0 / 50.0, .limits_mib = {512}, .limit_count = 1, .warmup_passes = 20,
     .max_in_over_ideal = 1.15, .max_time_over_bound = 1.10},
    {.name = "dit", .blocks = 60, .tensors = 5,
     .tensor_bytes = {6 * MIB, 2 * MIB, 8 * MIB, 8 * MIB, 64 << 10},
     .compute_per_byte_ns = DIT_NS_PER_BYTE, .limit_percent = {25, 50, 75}, .limit_count = 3, .warmup_passes = 20,
     .max_in_over_ideal = 0, .max_time_over_bound = 1.05},
    /* The sweep's workloads: the layer sizes of the two above (allocations
     * under 2 MiB are never evicted, so the sizes cannot shrink), fewer
     * blocks, so that 45 cells run in minutes. */
    {.name = "cycle", .blocks = 12, .tensors = 1, .tensor_bytes = {32 * MIB}, .limit_percent = {25, 50, 75},
     .limit_count = 3, .warmup_passes = SWEEP_WARMUP_PASSES, .measured_passes = SWEEP_MEASURED_PASSES, .sweep = true},
    {.name = "dit", .blocks = 16, .tensors = 5, .tensor_bytes = {6 * MIB, 2 * MIB, 8 * MIB, 8 * MIB, 64 << 10},
     .limit_percent = {25, 50, 75}, .limit_count = 3, .warmup_passes = SWEEP_WARMUP_PASSES,
     .measured_passes = SWEEP_MEASURED_PASSES, .sweep = true},
    /* Per layer: qkv, attention out, MLP up and down, and the layer's KV
     * cache, which every token appends to; then the LM head. */
    {.name = "llm", .blocks = 12, .tensors = 5, .tensor_bytes = {6 * MIB, 2 * MIB, 8 * MIB, 8 * MIB, 4 * MIB},
     .written_tensors = 1u << 4, .head_bytes = 16 * MIB, .limit_percent = {25, 50, 75}, .limit_count = 3,
     .warmup_passes = SWEEP_WARMUP_PASSES, .measured_passes = SWEEP_MEASURED_PASSES, .sweep = true},
    /* A budget that moves: large layers (each can keep a head) beside
     * scratch that comes and goes; not in the sweep's table, run as a
     * cell by the test of what a moving plan copies out
     * (check_moving_budget.py). */
    {.name = "churn", .blocks = 16, .tensors = 1, .tensor_bytes = {36 * MIB}, .limit_percent = {25, 50, 75},
     .limit_count = 3, .warmup_passes = SWEEP_WARMUP_PASSES, .measured_passes = SWEEP_MEASURED_PASSES,
     .cell_only = true, .churn_allocations = 8},
    /* The GPU's DiT as PyTorch runs it (bench/gpu/dit_offload.py),
     * scaled by 1/10: a block of weights per allocation, twenty operations
     * a block, large activations written by every block. Run as a cell. */
    {.name = "framework", .blocks = 16, .tensors = 1, .tensor_bytes = {36 * MIB},
     .segment_bytes = {2 * MIB, 2 * MIB, 8 * MIB, 2 * MIB, 2 * MIB, 12 * MIB}, .limit_percent = {25, 50, 75},
     .limit_count = 3, .warmup_passes = SWEEP_WARMUP_PASSES, .measured_passes = SWEEP_MEASURED_PASSES,
     .cell_only = true},
};
#define WORKLOAD_COUNT (sizeof workloads / sizeof workloads[0])

typedef struct config_s {
    const char *name;
    const char *policy;
    const char *prefetch;
    bool goal; /* the goals apply to this one */
} config_t;

static const config_t configs[] = {
    {"learned+prefetch", "cyclic", "on", true},
    {"no prefetch", "cyclic", "off", false},
    {"LRU", "lru", "off", false},
};
#define CONFIG_COUNT (sizeof configs / sizeof configs[0])

/* The sweep's compute-to-transfer ratios, C / (F / B). */
static const double sweep_ratios[] = {0.5, 0.75, 1.0, 1.33, 2.0};
#define SWEEP_RATIOS (sizeof sweep_ratios / sizeof sweep_ratios[0])
#define SWEEP_MAX_TIME 1.05
#define SWEEP_MAX_IN 1.02

static int workload_count(const workload_t *w)
{
    return w->blocks * w->tensors + (w->head_bytes != 0);
}

/* The bytes of allocation k (blocks' tensors in order, then the head). */
static uint64_t workload_tensor_bytes(const workload_t *w, int k)
{
    return k == w->blocks * w->tensors ? w->head_bytes : w->tensor_bytes[k % w->tensors];
}

static bool workload_tensor_written(const workload_t *w, int k)
{
    return k < w->blocks * w->tensors && (w->written_tensors >> (k % w->tensors) & 1u) != 0;
}

static uint64_t workload_bytes(const workload_t *w)
{
    uint64_t total = 0;
    for (int k = 0; k < workload_count(w); k++)
        total += workload_tensor_bytes(w, k);
    return total;
}

/* W: every byte a pass touches, the activation buffer with the weights.
 * The activation is resident all along and takes its share of the limit,
 * so what must stream is W - L, not the weights less L (which the sweep's
 * first tables used: F then missed the activation's 1 MiB, and the DiT at
 * 75%, whose F is 113 MiB, read 0.9% too many bytes). */
static uint64_t workload_segments_bytes(const workload_t *w)
{
    uint64_t total = 0;
    for (int s = 0; s < FRAMEWORK_SEGMENTS; s++)
        total += w->segment_bytes[s];
    return total;
}

static uint64_t workload_working_set(const workload_t *w)
{
    return workload_bytes(w) + ACTIVATION_BYTES + workload_segments_bytes(w);
}

static uint64_t workload_written_bytes(const workload_t *w)
{
    uint64_t total = 0;
    for (int k = 0; k < workload_count(w); k++)
        total += workload_tensor_written(w, k) ? workload_tensor_bytes(w, k) : 0;
    return total;
}

static uint64_t workload_largest(const workload_t *w)
{
    uint64_t largest = 0;
    for (int k = 0; k < workload_count(w); k++)
        largest = workload_tensor_bytes(w, k) > largest ? workload_tensor_bytes(w, k) : largest;
    return largest;
}

static uint64_t workload_limit(const workload_t *w, int i)
{
    if (w->limits_mib[i] != 0)
        return w->limits_mib[i] * MIB;
    return workload_bytes(w) * (uint64_t)w->limit_percent[i] / 100 / MIB * MIB;
}

/* ---- The child ----------------------------------------------------------- */

static atomic_uint_fast64_t check_errors;

/* The word at index i of tensor k, as loaded. */
static uint32_t weight_word(uint64_t k, uint64_t i)
{
    return (uint32_t)((k + 1) * 2654435761u) ^ (uint32_t)(i * 40503u + 7);
}

/* What pass `pass` writes into written tensor k, and where. */
static uint64_t written_index(uint64_t k, int pass, uint64_t words)
{
    return ((uint64_t)pass * 7919u + k * 31u) % words;
}

static uint32_t written_word(uint64_t k, int pass)
{
    return (uint32_t)((k + 1) * 0x9e3779b1u) ^ (uint32_t)pass;
}

#define NO_WRITE UINT64_MAX

/* Checks the words at both ends and in the middle of `words` words of
 * tensor k's weights from word `offset` (a view), as loaded. */
static void weights_check(const uint32_t *weights, uint64_t words, uint64_t k, uint64_t offset)
{
    for (uint64_t j = 0; j < 3 * CHECK_WORDS && j < words; j++) {
        uint64_t i = j < CHECK_WORDS       ? j
                     : j < 2 * CHECK_WORDS ? words / 2 + j - CHECK_WORDS
                                           : words - 3 * CHECK_WORDS + j;
        if (i < words && weights[i] != weight_word(k, offset + i))
            atomic_fetch_add(&check_errors, 1);
    }
}

/* block(uint32_t *weights, uint64_t words, uint64_t tensor, float *act,
 *       uint64_t write_index, uint32_t write_word):
 * a read-only tensor (write_index NO_WRITE) has words at both ends and in
 * the middle checked; a written one (a KV cache) gets one word written.
 * Either way the activations are written. */
static void block_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    uint32_t *weights = *(uint32_t **)args[0];
    uint64_t words = *(const uint64_t *)args[1], k = *(const uint64_t *)args[2];
    float *act = *(float **)args[3];
    uint64_t write_index = *(const uint64_t *)args[4];
    (void)launch;
    (void)user;
    if (write_index != NO_WRITE)
        weights[write_index] = *(const uint32_t *)args[5];
    else
        weights_check(weights, words, k, 0);
    act[k % (ACTIVATION_BYTES / sizeof(float))] += 1.0f;
}

static uint64_t block_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)launch;
    return (uint64_t)(*(const uint64_t *)args[1] * 4 * *(const double *)user);
}

static uint32_t framework_mix(uint32_t in, uint32_t tag, uint32_t weight)
{
    return ((in << 5) | (in >> 27)) ^ tag ^ weight;
}

static uint32_t framework_tag(int pass, int block, size_t op)
{
    return (uint32_t)pass * 0x9e3779b1u ^ (uint32_t)(block * 16 + (int)op);
}

/* op(uint32_t *in, uint32_t *out, uint32_t *weights or NULL, uint64_t
 * words, uint64_t block, uint64_t offset_words, uint32_t tag, uint32_t
 * accumulate, uint64_t cost_words): one operation of framework_ops on the first
 * FRAMEWORK_WORDS words of its activations; a view of weights has words
 * at both ends and in the middle checked. */
static void framework_op_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    const uint32_t *in = *(uint32_t **)args[0];
    uint32_t *out = *(uint32_t **)args[1];
    const uint32_t *weights = *(uint32_t **)args[2];
    uint64_t words = *(const uint64_t *)args[3], k = *(const uint64_t *)args[4];
    uint64_t offset = *(const uint64_t *)args[5];
    uint32_t tag = *(const uint32_t *)args[6], accumulate = *(const uint32_t *)args[7];
    (void)launch;
    (void)user;
    uint32_t weight = 0;
    if (weights != NULL) {
        weights_check(weights, words, k, offset);
        weight = weights[0];
    }
    uint32_t read[FRAMEWORK_WORDS];
    for (int i = 0; i < FRAMEWORK_WORDS; i++)
        read[i] = in[i];
    for (int i = 0; i < FRAMEWORK_WORDS; i++)
        out[i] = (accumulate ? out[i] : 0u) + framework_mix(read[i], tag, weight);
}

/* Its compute: `cost_words` words of weights' worth. */
static uint64_t framework_op_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)launch;
    return (uint64_t)(*(const uint64_t *)args[8] * 4 * *(const double *)user);
}

static int child_run(const workload_t *w, double ns_per_byte, int warmup_passes, const char *result_path)
{
    static const size_t sizes[] = {sizeof(CUdeviceptr), sizeof(uint64_t), sizeof(uint64_t),
                                   sizeof(CUdeviceptr), sizeof(uint64_t),   sizeof(uint32_t)};
    simcuda_kernel_desc_t desc = {.name = "bench_cycle_block", .param_count = 6, .param_sizes = sizes,
                                  .fn = block_kernel, .cost = block_cost, .user = &ns_per_byte};
    static const size_t op_sizes[] = {sizeof(CUdeviceptr), sizeof(CUdeviceptr), sizeof(CUdeviceptr),
                                      sizeof(uint64_t),    sizeof(uint64_t),    sizeof(uint64_t),
                                      sizeof(uint32_t),    sizeof(uint32_t),    sizeof(uint64_t)};
    simcuda_kernel_desc_t op_desc = {.name = "bench_framework_op", .param_count = 9, .param_sizes = op_sizes,
                                     .fn = framework_op_kernel, .cost = framework_op_cost, .user = &ns_per_byte};
    bool framework = w->segment_bytes[0] != 0;
    CUfunction op_fn = NULL;
    CUdeviceptr segments[FRAMEWORK_SEGMENTS] = {0};
    uint32_t segment_mirror[FRAMEWORK_SEGMENTS][FRAMEWORK_WORDS];
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    CUfunction block;
    CUstream stream;
    CUdeviceptr act;
    int count = workload_count(w);
    CUdeviceptr *weights = calloc((size_t)count, sizeof *weights);
    uint32_t **mirrors = calloc((size_t)count, sizeof *mirrors); /* written tensors' expected bytes */
    uint64_t max_bytes = workload_largest(w), compute_ns = 0;
    uint32_t *staging = malloc(max_bytes);
    if (weights == NULL || mirrors == NULL || staging == NULL || simcuda_register_kernel(&desc) != 0
        || (framework && simcuda_register_kernel(&op_desc) != 0)) {
        fprintf(stderr, "offload_cycle: cannot set up the child\n");
        return 1;
    }
    VS_CHECK(cuInit(0));
    VS_CHECK(cuDeviceGet(&dev, 0));
    VS_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    VS_CHECK(cuCtxSetCurrent(ctx));
    VS_CHECK(cuModuleLoadData(&module, "benchmark"));
    VS_CHECK(cuModuleGetFunction(&block, module, "bench_cycle_block"));
    if (framework)
        VS_CHECK(cuModuleGetFunction(&op_fn, module, "bench_framework_op"));
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuMemAlloc(&act, ACTIVATION_BYTES));
    VS_CHECK(cuMemsetD8(act, 0, ACTIVATION_BYTES));

    /* Load: the way a framework does, one allocation and one copy per
     * tensor. */
    for (int k = 0; k < count; k++) {
        uint64_t bytes = workload_tensor_bytes(w, k);
        for (uint64_t i = 0; i < bytes / 4; i++)
            staging[i] = weight_word((uint64_t)k, i);
        if (workload_tensor_written(w, k)) {
            if ((mirrors[k] = malloc(bytes)) == NULL)
                return 1;
            memcpy(mirrors[k], staging, bytes);
        }
        VS_CHECK(cuMemAlloc(&weights[k], bytes));
        VS_CHECK(cuMemcpyHtoD(weights[k], staging, bytes));
        compute_ns += (uint64_t)((double)bytes * ns_per_byte);
    }
    /* The activations, as a framework's first pass makes them: after the
     * weights, filled with a pattern but for the words the operations
     * write. */
    for (int a = 0; framework && a < FRAMEWORK_SEGMENTS; a++) {
        VS_CHECK(cuMemAlloc(&segments[a], w->segment_bytes[a]));
        VS_CHECK(cuMemsetD8(segments[a], FRAMEWORK_FILL, w->segment_bytes[a]));
        for (int i = 0; i < FRAMEWORK_WORDS; i++)
            segment_mirror[a][i] = 0x01010101u * FRAMEWORK_FILL;
    }

    /* The measured passes run from the end of the warm-up's last kernel to
     * the end of their own last kernel, events on the stream: no host wait
     * between the warm-up and them, so the shim's pipeline runs on as it
     * does in a loop (a wait there would drain it, and the passes measured
     * would pay for filling it again). The counters are read where the
     * events are recorded, on the host: what the shim started in between. */
    const vs_snapshot_header_t *snapshot = NULL;
    shim_counters_t at_start, at_end;
    CUevent at_start_event, at_end_event;
    VS_CHECK(cuEventCreate(&at_start_event, CU_EVENT_DEFAULT));
    VS_CHECK(cuEventCreate(&at_end_event, CU_EVENT_DEFAULT));
    int measured = w->measured_passes != 0 ? w->measured_passes : MEASURED_PASSES;
    for (int pass = 0; pass <= warmup_passes + measured; pass++) {
        if (pass == warmup_passes || pass == warmup_passes + measured) {
            bool start = pass == warmup_passes;
            VS_CHECK(cuEventRecord(start ? at_start_event : at_end_event, stream));
            if (snapshot == NULL && (snapshot = shim_counters_open()) == NULL)
                return 1;
            if (shim_counters_read(snapshot, start ? &at_start : &at_end) != 0)
                return 1;
            if (!start)
                break;
        }
        CUdeviceptr scratch[CHURN_MAX] = {0};
        int scratch_count = pass % 2 == 1 ? w->churn_allocations : 0;
        for (int q = 0; q < scratch_count; q++) {
            VS_CHECK(cuMemAlloc(&scratch[q], CHURN_BYTES));
            VS_CHECK(cuMemsetD8Async(scratch[q], 1, CHURN_BYTES, stream));
        }
        for (int k = 0; k < count; k++) {
            if (k == count / 2 && scratch_count > 0) {
                VS_CHECK(cuStreamSynchronize(stream));
                for (int q = 0; q < scratch_count; q++)
                    VS_CHECK(cuMemFree(scratch[q]));
                scratch_count = 0;
            }
            uint64_t words = workload_tensor_bytes(w, k) / 4, tensor = (uint64_t)k, write_index = NO_WRITE;
            uint32_t write_word = 0;
            if (mirrors[k] != NULL) {
                write_index = written_index(tensor, pass, words);
                write_word = written_word(tensor, pass);
                mirrors[k][write_index] = write_word;
            }
            if (framework) {
                for (size_t o = 0; o < FRAMEWORK_OPS; o++) {
                    const framework_op_t *op = &framework_ops[o];
                    uint64_t share = workload_tensor_bytes(w, k) / FRAMEWORK_SHARES / 4; /* words in a hundredth */
                    uint64_t offset = share * (uint64_t)op->weight_at, view_words = share * (uint64_t)op->weight_share;
                    uint64_t cost_words = share * (uint64_t)op->cost_share;
                    CUdeviceptr view = op->weight_share != 0 ? weights[k] + offset * 4 : 0;
                    uint32_t tag = framework_tag(pass, k, o), accumulate = op->accumulate;
                    uint32_t weight = op->weight_share != 0 ? weight_word(tensor, offset) : 0, read[FRAMEWORK_WORDS];
                    memcpy(read, segment_mirror[op->in], sizeof read);
                    for (int i = 0; i < FRAMEWORK_WORDS; i++)
                        segment_mirror[op->out][i] = (accumulate ? segment_mirror[op->out][i] : 0u)
                                                     + framework_mix(read[i], tag, weight);
                    void *op_params[] = {&segments[op->in], &segments[op->out], &view, &view_words, &tensor,
                                         &offset,           &tag,               &accumulate, &cost_words};
                    VS_CHECK(cuLaunchKernel(op_fn, 1, 1, 1, 1, 1, 1, 0, stream, op_params, NULL));
                }
                continue;
            }
            void *params[] = {&weights[k], &words, &tensor, &act, &write_index, &write_word};
            VS_CHECK(cuLaunchKernel(block, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL));
        }
    }

    VS_CHECK(cuStreamSynchronize(stream));
    float measured_ms = 0.0f;
    VS_CHECK(cuEventElapsedTime(&measured_ms, at_start_event, at_end_event));
    uint64_t measured_ns = (uint64_t)((double)measured_ms * 1e6 + 0.5);
    VS_CHECK(cuEventDestroy(at_start_event));
    VS_CHECK(cuEventDestroy(at_end_event));

    /* Every byte of every tensor, as loaded (or as written). */
    uint64_t mismatched = 0;
    for (int k = 0; k < count; k++) {
        uint64_t bytes = workload_tensor_bytes(w, k);
        VS_CHECK(cuMemcpyDtoH(staging, weights[k], bytes));
        for (uint64_t i = 0; i < bytes / 4; i++)
            mismatched += staging[i] != (mirrors[k] != NULL ? mirrors[k][i] : weight_word((uint64_t)k, i));
        VS_CHECK(cuMemFree(weights[k]));
        free(mirrors[k]);
    }
    /* The activations: the words the operations wrote, the pattern in the
     * rest of every byte. */
    for (int a = 0; framework && a < FRAMEWORK_SEGMENTS; a++) {
        uint64_t bytes = w->segment_bytes[a];
        VS_CHECK(cuMemcpyDtoH(staging, segments[a], bytes));
        for (int i = 0; i < FRAMEWORK_WORDS; i++)
            mismatched += staging[i] != segment_mirror[a][i];
        for (uint64_t i = FRAMEWORK_WORDS; i < bytes / 4; i++)
            mismatched += staging[i] != 0x01010101u * FRAMEWORK_FILL;
        VS_CHECK(cuMemFree(segments[a]));
    }
    FILE *out = fopen(result_path, "w");
    if (out == NULL) {
        perror(result_path);
        return 1;
    }
    fprintf(out, "modeled_ns %" PRIu64 " compute_ns %" PRIu64 " errors %" PRIu64 " in %" PRIu64 " out %" PRIu64 "\n",
            measured_ns / (uint64_t)measured, compute_ns,
            (uint64_t)atomic_load(&check_errors) + mismatched,
            (at_end.bytes_to_device - at_start.bytes_to_device) / (uint64_t)measured,
            (at_end.bytes_to_host - at_start.bytes_to_host) / (uint64_t)measured);
    fclose(out);
    free(mirrors);
    free(weights);
    free(staging);
    return 0;
}

/* ---- The parent ---------------------------------------------------------- */

typedef struct result_s {
    uint64_t modeled_ns, compute_ns, errors, in, out;
} result_t;

/* Runs one configuration in a child; its shim log is removed once it
 * succeeds, or moved to `keep_log` (not NULL). */
static int run_child(const char *self, const char *shim, const char *dir, int workload, double ns_per_byte,
                     int warmup_passes, uint64_t limit, const config_t *config, result_t *result,
                     const char *keep_log)
{
    char result_path[4096], log_path[4096], workload_arg[16], limit_arg[32], compute_arg[32], warmup_arg[16];
    snprintf(result_path, sizeof result_path, "%s/result", dir);
    snprintf(log_path, sizeof log_path, "%s/shim.log", dir);
    snprintf(workload_arg, sizeof workload_arg, "%d", workload);
    snprintf(limit_arg, sizeof limit_arg, "%" PRIu64, limit);
    snprintf(compute_arg, sizeof compute_arg, "%.17g", ns_per_byte);
    snprintf(warmup_arg, sizeof warmup_arg, "%d", warmup_passes);
    unlink(result_path);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("offload_cycle: fork");
        return -1;
    }
    if (pid == 0) {
        setenv("LD_PRELOAD", shim, 1);
        setenv(CHILD_MARK, "1", 1);
        setenv("VRAM_LIMIT", limit_arg, 1);
        setenv("VRAMSHIM_POLICY", config->policy, 1);
        setenv("VRAMSHIM_PREFETCH", config->prefetch, 1);
        setenv("VRAMSHIM_LOG_FILE", log_path, 1);
        char *argv[] = {(char *)self, (char *)shim, "--child", workload_arg, compute_arg, warmup_arg, result_path,
                        NULL};
        execv("/proc/self/exe", argv);
        perror("offload_cycle: execv");
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("offload_cycle: waitpid");
            return -1;
        }
    }
    FILE *in = fopen(result_path, "r");
    int got = in != NULL ? fscanf(in,
                                  "modeled_ns %" SCNu64 " compute_ns %" SCNu64 " errors %" SCNu64 " in %" SCNu64
                                  " out %" SCNu64,
                                  &result->modeled_ns, &result->compute_ns, &result->errors, &result->in, &result->out)
                         : 0;
    if (in != NULL)
        fclose(in);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != 5) {
        fprintf(stderr, "offload_cycle: the child failed (status 0x%x); the shim's log is %s\n", status, log_path);
        return -1;
    }
    if (keep_log == NULL || rename(log_path, keep_log) != 0)
        unlink(log_path);
    return 0;
}

static double env_gbps(const char *name)
{
    const char *value = getenv(name);
    char *end;
    double gbps = value != NULL ? strtod(value, &end) : 0.0;
    return value != NULL && end != value && gbps > 0.0 ? gbps : 0.0;
}

/* The host-cost model the children run with, as the headers name it. */
static const char *host_costs_name(void)
{
    const char *costs = getenv("SIMCUDA_HOST_COSTS");
    return costs != NULL && costs[0] != '\0' ? costs : "default";
}

/* The environment every child runs in, and `dir` (a mkdtemp template)
 * made for their files; the link's GB/s, or 0 (said why). */
static double parent_setup(char *dir)
{
    setenv("SIMCUDA_CLOCK", "virtual", 1);
    setenv("SIMCUDA_DEVICE_MEM", "4G", 1);
    setenv("VRAMSHIM_MODE", "offload", 1);
    setenv("VRAMSHIM_LOG", "info", 0); /* debug when asked for, with a kept log */
    setenv("SIMCUDA_H2D_GBPS", DEFAULT_GBPS, 0);
    setenv("SIMCUDA_D2H_GBPS", DEFAULT_GBPS, 0);
    unsetenv("SIMCUDA_FAIL");
    double gbps = env_gbps("SIMCUDA_H2D_GBPS");
    if (gbps == 0.0) {
        fprintf(stderr, "offload_cycle: SIMCUDA_H2D_GBPS must be a positive number\n");
        return 0.0;
    }
    if (mkdtemp(dir) == NULL) {
        perror("offload_cycle: mkdtemp");
        return 0.0;
    }
    return gbps;
}

static void parent_cleanup(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/result", dir);
    unlink(path);
    rmdir(dir);
}

static int parent_run(const char *self, const char *shim, const char *only)
{
    char dir[] = "/tmp/offload_cycle.XXXXXX";
    double gbps = parent_setup(dir);
    if (gbps == 0.0)
        return 2;
    printf("offload_cycle: virtual clock, SIMCUDA_HOST_COSTS=%s, H2D link %.1f GB/s; %d measured passes after the "
           "warm-up (cycle: 20, so that every weight loaded while resident has had its one copy back; dit: 20, so "
           "that the regime meter's trial of a lean plan is over), "
           "timed in steady state (events, no wait before them); per "
           "pass: in/out = bytes brought in / copied back, bound = max(C, in/B), ideal = max(C, (W-L)/B), "
           "idle = 1 - C / (ms/pass), the share of a pass the GPU does not run the model's kernels\n",
           host_costs_name(), gbps, MEASURED_PASSES);
    printf("%-6s %8s %-17s %9s %9s %9s %9s %9s %9s %8s %8s %6s\n", "model", "limit", "configuration", "C ms",
           "in MiB", "out MiB", "in/(W-L)", "ms/pass", "bound ms", "/bound", "/ideal", "idle");
    int rc = 0;
    for (size_t wi = 0; wi < WORKLOAD_COUNT && rc == 0; wi++) {
        const workload_t *w = &workloads[wi];
        if (w->sweep || w->cell_only || (only != NULL && strcmp(only, w->name) != 0))
            continue;
        uint64_t total = workload_working_set(w);
        for (int li = 0; li < w->limit_count && rc == 0; li++) {
            uint64_t limit = workload_limit(w, li);
            for (size_t ci = 0; ci < CONFIG_COUNT && rc == 0; ci++) {
                const config_t *c = &configs[ci];
                result_t r;
                if (run_child(self, shim, dir, (int)wi, w->compute_per_byte_ns, w->warmup_passes, limit, c, &r, NULL)
                    != 0) {
                    rc = 1;
                    break;
                }
                if (r.errors != 0) {
                    printf("offload_cycle: [%s %s] BROKEN: %" PRIu64 " words came back different\n", w->name,
                           c->name, r.errors);
                    rc = 1;
                    break;
                }
                double c_ms = (double)r.compute_ns / 1e6, in_ms = (double)r.in / (gbps * 1e9) * 1e3;
                double ideal_in = (double)(total - limit);
                double bound = c_ms > in_ms ? c_ms : in_ms;
                double ideal_ms = ideal_in / (gbps * 1e9) * 1e3;
                double ideal = c_ms > ideal_ms ? c_ms : ideal_ms, ms = (double)r.modeled_ns / 1e6;
                printf("%-6s %7" PRIu64 "M %-17s %9.2f %9.1f %9.1f %9.3f %9.2f %9.2f %8.3f %8.3f %6.3f\n", w->name,
                       limit / MIB, c->name, c_ms, (double)r.in / MIB, (double)r.out / MIB, (double)r.in / ideal_in, ms,
                       bound, ms / bound, ms / ideal, ms > 0 ? 1.0 - c_ms / ms : 0.0);
                if (c->goal) {
                    bool in_ok = w->max_in_over_ideal == 0 || (double)r.in <= w->max_in_over_ideal * ideal_in;
                    bool out_ok = w->max_in_over_ideal == 0 || r.out == 0;
                    bool time_ok = ms <= w->max_time_over_bound * bound;
                    printf("offload_cycle: [%s %" PRIu64 "M] goal%s%s time <= %.2f x bound: %s\n", w->name,
                           limit / MIB,
                           w->max_in_over_ideal != 0 ? " in <= 1.15 x (W-L), nothing copied back," : "",
                           "", w->max_time_over_bound, in_ok && out_ok && time_ok ? "met" : "MISSED");
                }
            }
        }
    }
    parent_cleanup(dir);
    return rc;
}

/* ---- The sweep ----------------------------------------------------------- */

typedef struct sweep_cell_s {
    double time_over_bound; /* ms per pass / max(C, F/B) */
    double in_over_f;       /* bytes in per pass / F */
    double idle;            /* 1 - C / (ms per pass) */
    uint64_t clean_out;     /* bytes copied back beyond the written tensors' */
    bool met;
} sweep_cell_t;

/* Green at or under the goal, then yellow to red by 1.5 x the bound. */
static void sweep_cell_colour(const sweep_cell_t *c, char *out, size_t size)
{
    if (c->met) {
        snprintf(out, size, "#5cb85c");
        return;
    }
    double t = (c->time_over_bound - SWEEP_MAX_TIME) / (1.5 - SWEEP_MAX_TIME);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    snprintf(out, size, "#%02x%02x%02x", 240, (int)(200 - 150 * t), (int)(80 - 40 * t));
}

/* The sweep as an SVG heat map: a panel per workload, limits down, ratios
 * across, each cell's time over the bound written in it. */
static int sweep_write_svg(const char *path, const sweep_cell_t cells[][3][SWEEP_RATIOS],
                           const workload_t *const sweep_workloads[], size_t workload_total, double gbps)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    const int cell_w = 78, cell_h = 44, left = 70, top = 70, panel_gap = 40;
    int panel_w = cell_w * (int)SWEEP_RATIOS;
    int width = left + (int)workload_total * (panel_w + panel_gap) + 20, height = top + 3 * cell_h + 110;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">vramshim offload sweep: time per pass / "
            "max(C, F/B) (learned policy, prefetch; simcuda virtual clock, host costs, %.0f GB/s link)</text>\n"
            "<text x=\"%d\" y=\"40\" fill=\"#555\">F = W - L + 2 x the largest allocation; goal per cell: at most "
            "%.2f x the bound, bytes in at most %.2f x F, nothing clean copied back</text>\n",
            width, height, left, gbps, left, SWEEP_MAX_TIME, SWEEP_MAX_IN);
    for (size_t wi = 0; wi < workload_total; wi++) {
        int x0 = left + (int)wi * (panel_w + panel_gap);
        fprintf(f, "<g class=\"panel\" data-workload=\"%s\">\n", sweep_workloads[wi]->name);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-weight=\"bold\">%s (%.0f MiB)</text>\n",
                x0 + panel_w / 2, top - 10, sweep_workloads[wi]->name,
                (double)workload_bytes(sweep_workloads[wi]) / MIB);
        for (int li = 0; li < 3; li++) {
            if (wi == 0)
                fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">L = %d%%</text>\n", left - 8,
                        top + li * cell_h + cell_h / 2 + 4, sweep_workloads[wi]->limit_percent[li]);
            for (size_t ri = 0; ri < SWEEP_RATIOS; ri++) {
                const sweep_cell_t *c = &cells[wi][li][ri];
                char colour[16];
                sweep_cell_colour(c, colour, sizeof colour);
                int x = x0 + (int)ri * cell_w, y = top + li * cell_h;
                fprintf(f,
                        "<g class=\"cell\" data-limit-percent=\"%d\" data-ratio=\"%.2f\" data-time-over-bound=\"%.4f\" "
                        "data-in-over-f=\"%.4f\" data-met=\"%d\">"
                        "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"white\"/>"
                        "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-weight=\"bold\">%.3f</text>"
                        "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">in %.2f F</text></g>\n",
                        sweep_workloads[wi]->limit_percent[li], sweep_ratios[ri], c->time_over_bound, c->in_over_f,
                        c->met, x, y, cell_w, cell_h, colour, x + cell_w / 2, y + 19, c->time_over_bound,
                        x + cell_w / 2, y + 34, c->in_over_f);
            }
        }
        for (size_t ri = 0; ri < SWEEP_RATIOS; ri++)
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%.2f</text>\n",
                    x0 + (int)ri * cell_w + cell_w / 2, top + 3 * cell_h + 16, sweep_ratios[ri]);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">C / (F/B)</text>\n</g>\n",
                x0 + panel_w / 2, top + 3 * cell_h + 32);
    }
    /* Legend. */
    int ly = top + 3 * cell_h + 56;
    const struct {
        double time;
        const char *label;
    } legend[] = {{1.0, "met (&lt;= 1.05)"}, {1.10, "1.10"}, {1.25, "1.25"}, {1.5, "&gt;= 1.50"}};
    for (size_t i = 0; i < sizeof legend / sizeof legend[0]; i++) {
        sweep_cell_t c = {.time_over_bound = legend[i].time, .met = i == 0};
        char colour[16];
        sweep_cell_colour(&c, colour, sizeof colour);
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"18\" height=\"14\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                left + (int)i * 130, ly, colour, left + (int)i * 130 + 24, ly + 12, legend[i].label);
    }
    fprintf(f, "</svg>\n");
    int failed = ferror(f);
    if (fclose(f) != 0 || failed) {
        fprintf(stderr, "offload_cycle: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

/* The sweep's workloads, in table order (an index into `workloads` is
 * `out[i] - workloads`). Returns how many. */
static size_t sweep_workloads_list(const workload_t *out[WORKLOAD_COUNT], bool one_cell)
{
    size_t n = 0;
    for (size_t wi = 0; wi < WORKLOAD_COUNT; wi++)
        if (workloads[wi].sweep || (one_cell && workloads[wi].cell_only))
            out[n++] = &workloads[wi];
    return n;
}

/* `sweep --svg FILE --demo`: the heat map of made-up cells, no child run
 * (for the test that checks the document). */
static int sweep_demo(const char *svg_path)
{
    static sweep_cell_t cells[WORKLOAD_COUNT][3][SWEEP_RATIOS];
    const workload_t *sweep_workloads[WORKLOAD_COUNT];
    size_t workload_total = sweep_workloads_list(sweep_workloads, false);
    for (size_t wi = 0; wi < workload_total; wi++)
        for (int li = 0; li < 3; li++)
            for (size_t ri = 0; ri < SWEEP_RATIOS; ri++) {
                sweep_cell_t *c = &cells[wi][li][ri];
                c->time_over_bound = 1.0 + 0.05 * (double)(wi * 15 + (size_t)li * 5 + ri) / 4.0;
                c->in_over_f = 1.01;
                c->met = c->time_over_bound <= SWEEP_MAX_TIME;
            }
    return sweep_write_svg(svg_path, (const sweep_cell_t(*)[3][SWEEP_RATIOS])cells, sweep_workloads, workload_total,
                           50.0)
                   == 0
               ? 0
               : 1;
}

/* One cell of the sweep alone (`sweep --cell`), its shim log kept. */
typedef struct sweep_only_s {
    const char *workload;
    int limit_percent;
    double ratio;
    const char *log_path;
    int warmup_passes; /* 0: the sweep's */
} sweep_only_t;

static bool sweep_only_skips(const sweep_only_t *only, const workload_t *w, int limit_percent, double ratio)
{
    return only != NULL
           && (strcmp(only->workload, w->name) != 0 || only->limit_percent != limit_percent
               || only->ratio < ratio - 1e-9 || only->ratio > ratio + 1e-9);
}

static int sweep_run(const char *self, const char *shim, const char *svg_path, const sweep_only_t *only)
{
    char dir[] = "/tmp/offload_sweep.XXXXXX";
    double gbps = parent_setup(dir);
    if (gbps == 0.0)
        return 2;
    const workload_t *sweep_workloads[WORKLOAD_COUNT];
    size_t workload_total = sweep_workloads_list(sweep_workloads, only != NULL);
    static sweep_cell_t cells[WORKLOAD_COUNT][3][SWEEP_RATIOS];
    int warmup_given = only != NULL ? only->warmup_passes : 0; /* 0: each workload's */
    /* OFFLOAD_SWEEP_POLICY names another VRAMSHIM_POLICY for the grid (the
     * shim's default is `cyclic`), prefetch on: to compare a policy with
     * the default cell by cell. */
    config_t config = configs[0];
    const char *policy = getenv("OFFLOAD_SWEEP_POLICY");
    if (policy != NULL && policy[0] != '\0')
        config.policy = policy;
    printf("offload_sweep: virtual clock, SIMCUDA_HOST_COSTS=%s, H2D link %.1f GB/s; VRAMSHIM_POLICY=%s, prefetch; %d measured passes after %d warm-up passes, timed in steady state (events, no wait "
           "before them); per pass: F = W - L + 2 x largest, "
           "bound = max(C, F/B), C = ratio x F/B; out = bytes copied back, dirty = the written tensors' bytes; "
           "idle = 1 - C / (ms/pass)\n",
           host_costs_name(), gbps, config.policy, SWEEP_MEASURED_PASSES, warmup_given > 0 ? warmup_given : SWEEP_WARMUP_PASSES);
    printf("%-6s %5s %6s %9s %9s %8s %9s %9s %9s %8s %6s %s\n", "model", "limit", "ratio", "C ms", "in MiB", "in/F",
           "out MiB", "ms/pass", "bound ms", "/bound", "idle", "goal");
    int rc = 0, met = 0, total = 0;
    double worst = 0.0;
    for (size_t wi = 0; wi < workload_total && rc == 0; wi++) {
        const workload_t *w = sweep_workloads[wi];
        uint64_t bytes = workload_bytes(w), dirty = workload_written_bytes(w);
        for (int li = 0; li < w->limit_count && rc == 0; li++) {
            uint64_t limit = workload_limit(w, li);
            double f_bytes = (double)(workload_working_set(w) - limit + 2 * workload_largest(w));
            double transfer_ms = f_bytes / (gbps * 1e9) * 1e3;
            for (size_t ri = 0; ri < SWEEP_RATIOS && rc == 0; ri++) {
                /* C = ratio x F/B, spread over the weights' bytes. */
                if (sweep_only_skips(only, w, w->limit_percent[li], sweep_ratios[ri]))
                    continue;
                double ns_per_byte = sweep_ratios[ri] * transfer_ms * 1e6 / (double)bytes;
                result_t r;
                int warmup = warmup_given > 0 ? warmup_given : w->warmup_passes;
                if (run_child(self, shim, dir, (int)(w - workloads), ns_per_byte, warmup, limit, &config, &r,
                              only != NULL ? only->log_path : NULL)
                    != 0) {
                    rc = 1;
                    break;
                }
                if (r.errors != 0) {
                    printf("offload_sweep: [%s %d%% %.2f] BROKEN: %" PRIu64 " words came back different\n", w->name,
                           w->limit_percent[li], sweep_ratios[ri], r.errors);
                    rc = 1;
                    break;
                }
                double c_ms = (double)r.compute_ns / 1e6, ms = (double)r.modeled_ns / 1e6;
                double bound = c_ms > transfer_ms ? c_ms : transfer_ms;
                sweep_cell_t *cell = &cells[wi][li][ri];
                cell->time_over_bound = ms / bound;
                cell->in_over_f = (double)r.in / f_bytes;
                cell->idle = ms > 0 ? 1.0 - c_ms / ms : 0.0;
                cell->clean_out = r.out > dirty ? r.out - dirty : 0;
                cell->met = cell->time_over_bound <= SWEEP_MAX_TIME && cell->in_over_f <= SWEEP_MAX_IN
                            && cell->clean_out == 0;
                met += cell->met;
                total++;
                worst = cell->time_over_bound > worst ? cell->time_over_bound : worst;
                printf("%-6s %4d%% %6.2f %9.2f %9.1f %8.3f %9.1f %9.2f %9.2f %8.3f %6.3f %s\n", w->name,
                       w->limit_percent[li], sweep_ratios[ri], c_ms, (double)r.in / MIB, cell->in_over_f,
                       (double)r.out / MIB, ms, bound, cell->time_over_bound, cell->idle,
                       cell->met ? "met" : "MISSED");
                fflush(stdout);
            }
        }
    }
    parent_cleanup(dir);
    if (rc != 0)
        return rc;
    if (only != NULL && total == 0) {
        fprintf(stderr, "offload_sweep: no cell %s %d%% %.2f (workloads cycle, dit, llm, churn, framework; limits 25, 50, 75; ratios "
                "0.5, 0.75, 1, 1.33, 2)\n", only->workload, only->limit_percent, only->ratio);
        return 2;
    }
    if (svg_path != NULL) {
        if (sweep_write_svg(svg_path, (const sweep_cell_t(*)[3][SWEEP_RATIOS])cells, sweep_workloads,
                            workload_total, gbps)
            != 0)
            return 1;
        printf("offload_sweep: heat map written to %s\n", svg_path);
    }
    printf("offload_sweep: %d of %d cells met (time <= %.2f x max(C, F/B), in <= %.2f x F, nothing clean copied "
           "back); worst %.3f x the bound: %s\n",
           met, total, SWEEP_MAX_TIME, SWEEP_MAX_IN, worst, met == total ? "met" : "MISSED");
    return 0;
}

/* A count of warm-up passes, 1 to 1000, written as a decimal number and
 * nothing else; 0 when it is not one. */
static int parse_warmup_passes(const char *text)
{
    char *end;
    errno = 0;
    long passes = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || passes < 1 || passes > 1000)
        return 0;
    return (int)passes;
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[2], "--child") == 0) {
        void *direct = simcuda_entry_point("cuLaunchKernel");
        if (getenv(CHILD_MARK) == NULL || direct == NULL || __extension__(void *) cuLaunchKernel == direct) {
            fprintf(stderr, "offload_cycle: LD_PRELOAD=%s did not interpose cuLaunchKernel\n", argv[1]);
            return 1;
        }
        int workload = atoi(argv[3]);
        if (workload < 0 || (size_t)workload >= WORKLOAD_COUNT)
            return 2;
        char *end;
        double ns_per_byte = strtod(argv[4], &end);
        if (end == argv[4] || ns_per_byte < 0.0)
            return 2;
        int warmup = parse_warmup_passes(argv[5]);
        if (warmup == 0)
            return 2;
        return child_run(&workloads[workload], ns_per_byte, warmup, argv[6]);
    }
    if (argc >= 3 && strcmp(argv[2], "sweep") == 0) {
        if (argc == 3 || (argc == 5 && strcmp(argv[3], "--svg") == 0))
            return sweep_run(argv[0], argv[1], argc == 5 ? argv[4] : NULL, NULL);
        bool warmup_given = argc == 10 && strcmp(argv[8], "--warmup") == 0;
        if ((argc == 8 || warmup_given) && strcmp(argv[3], "--cell") == 0) {
            sweep_only_t only = {.workload = argv[4], .limit_percent = atoi(argv[5]), .ratio = atof(argv[6]),
                                 .log_path = argv[7], .warmup_passes = warmup_given ? parse_warmup_passes(argv[9]) : 0};
            if (warmup_given && only.warmup_passes == 0) {
                fprintf(stderr, "offload_sweep: --warmup %s: a number of passes from 1 to 1000\n", argv[9]);
                return 2;
            }
            return sweep_run(argv[0], argv[1], NULL, &only);
        }
        if (argc == 6 && strcmp(argv[3], "--svg") == 0 && strcmp(argv[5], "--demo") == 0)
            return sweep_demo(argv[4]);
    } else if (argc == 2 || argc == 3) {
        return parent_run(argv[0], argv[1], argc == 3 ? argv[2] : NULL);
    }
    fprintf(stderr,
            "usage: %s /path/to/libvramshim.so [cycle|dit|sweep [--svg FILE]|sweep --cell WORKLOAD PERCENT RATIO "
            "LOG [--warmup N]]\n",
            argv[0]);
    return 2;
}

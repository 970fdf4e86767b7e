/* preload_offload.c: a CUDA program whose working set is many times the
 * device memory it is given, and which checks every byte it wrote.
 *
 * It is an ordinary driver-API program and knows nothing of vramshim. Run
 * under the shim in offload mode, with `VRAM_LIMIT` far below its working
 * set, it makes the shim evict and restore buffers around every kind of
 * operation: kernel launches in every form (`kernelParams`, the packed
 * `extra` buffer, `cuLaunchKernelEx`, pointers inside a by-value struct,
 * interior pointers), synchronous and asynchronous copies and memsets of
 * partial ranges, captured and hand-built graphs, and a device-side pointer
 * table. Each buffer has a host mirror of what the device must hold:
 * checksums computed on the device are compared with the mirror while the
 * program runs, and every buffer is read back whole at the end of each
 * scenario.
 *
 *   preload_offload [--scenario kernels|copies|graph|pointer_table|departures|all]
 *                   [--buffers N] [--mib M] [--threads T] [--streams S]
 *                   [--rounds R] [--seed X]
 *
 * Entry point: `main`, which runs `scenario_kernels`, `scenario_copies`,
 * `scenario_graph`, `scenario_pointer_table` and `scenario_departures` (all
 * of them by default).
 * Exit status: 0 when everything matched, 1 on any mismatch (each one names
 * the scenario, the check, the buffer, the byte offset, what was expected
 * and what was read) or driver error, 2 on a usage error. Given `--seed`,
 * every operation and every buffer's content is the same from run to run,
 * whatever the thread timing: each thread owns its buffers, and operations
 * on one buffer from different streams are ordered with events.
 */
#include <cuda.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "simcuda.h"
#include "vs_test.h"

#define OFFLOAD_MAX_THREADS 64
#define OFFLOAD_MAX_STREAMS 16
/* Checksums in flight per thread; their results buffer is 512 bytes, far
 * under the 2 MiB below which an allocation is never evicted. */
#define OFFLOAD_RESULT_SLOTS 64
/* Mismatch lines printed at most (all are counted). */
#define OFFLOAD_MAX_REPORTS 40

/* ------------------------------------------------------------------------
 * Options, counters, failure reporting
 * ------------------------------------------------------------------------ */

typedef struct offload_options_s {
    const char *scenario;
    unsigned buffers;
    unsigned mib;
    unsigned threads;
    unsigned streams;
    unsigned rounds;
    uint64_t seed;
} offload_options_t;

static offload_options_t options = {
    .scenario = "all", .buffers = 24, .mib = 16, .threads = 4, .streams = 3, .rounds = 3, .seed = 1,
};

static CUcontext context;

static _Atomic unsigned long mismatches;
static _Atomic unsigned reports_printed;
static _Atomic unsigned long launches_done, copies_done, memsets_done, graph_launches_done, checksums_checked;
static _Atomic unsigned long long bytes_verified;

static bool report_allowed(void)
{
    unsigned printed = atomic_fetch_add(&reports_printed, 1);
    if (printed == OFFLOAD_MAX_REPORTS)
        fprintf(stderr, "preload_offload: more mismatches follow; only the first %d are printed\n",
                OFFLOAD_MAX_REPORTS);
    return printed < OFFLOAD_MAX_REPORTS;
}

/* ------------------------------------------------------------------------
 * Deterministic randomness (splitmix64)
 * ------------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *state, uint64_t bound)
{
    return bound == 0 ? 0 : rng_next(state) % bound;
}

static void rng_bytes(uint64_t *state, void *dst, size_t bytes)
{
    unsigned char *out = dst;
    while (bytes >= 8) {
        uint64_t word = rng_next(state);
        memcpy(out, &word, 8);
        out += 8;
        bytes -= 8;
    }
    if (bytes > 0) {
        uint64_t word = rng_next(state);
        memcpy(out, &word, bytes);
    }
}

/* ------------------------------------------------------------------------
 * Kernels and what they compute, on the host
 * ------------------------------------------------------------------------ */

static CUfunction fn_fill, fn_checksum, fn_axpy, fn_add_struct, fn_gather, fn_xor, fn_fill_f32;

/* The by-value parameter of `sim_add_u32_struct`: pointers at 8, 24, 32.
 * The padding after `tag` is a named member so that every initialiser
 * zeroes it: stack garbage there can look like a device pointer to a
 * launch-time scan, which would then restore a buffer the launch does not
 * use, differently from run to run. */
typedef struct offload_add_args_s {
    uint64_t n;
    CUdeviceptr a;
    uint32_t tag;
    uint32_t tag_padding;
    CUdeviceptr b;
    CUdeviceptr out;
} offload_add_args_t;

_Static_assert(sizeof(offload_add_args_t) == 40, "sim_add_u32_struct takes a 40-byte struct");

/* sim_fill_u32: dst[i] = seed ^ (i * 2654435761). */
static uint32_t fill_word(uint32_t seed, uint64_t i)
{
    return seed ^ (uint32_t)(i * 2654435761u);
}

/* offload_xor_u32 (registered below): dst[i] ^= xor_word(seed, i). */
static uint32_t xor_word(uint32_t seed, uint64_t i)
{
    return (seed * 0x9E3779B1u) ^ (uint32_t)(i * 0x85EBCA77u + seed);
}

/* offload_fill_f32 (registered below): small integers, so that axpy with
 * the factors used here is exact and the host computes the same bits. */
static float fill_float(uint32_t seed, uint64_t i)
{
    return (float)((seed + (uint32_t)i * 7u) & 1023u);
}

/* sim_checksum_u32 and sim_gather_checksum: sum of src[i] * (i + 1). */
static uint64_t checksum_words(const uint32_t *src, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (uint64_t)src[i] * (i + 1);
    return sum;
}

static void xor_u32_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)launch;
    (void)user;
    uint32_t *dst = *(uint32_t **)args[0];
    uint64_t n = *(const uint64_t *)args[1];
    uint32_t seed = *(const uint32_t *)args[2];
    for (uint64_t i = 0; i < n; i++)
        dst[i] ^= xor_word(seed, i);
}

static void fill_f32_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)launch;
    (void)user;
    float *dst = *(float **)args[0];
    uint64_t n = *(const uint64_t *)args[1];
    uint32_t seed = *(const uint32_t *)args[2];
    for (uint64_t i = 0; i < n; i++)
        dst[i] = fill_float(seed, i);
}

static void register_kernels(void)
{
    static const size_t sizes[] = {sizeof(void *), sizeof(uint64_t), sizeof(uint32_t)};
    const simcuda_kernel_desc_t descs[] = {
        {.name = "offload_xor_u32", .param_count = 3, .param_sizes = sizes, .fn = xor_u32_kernel, .cost_ns = 1000},
        {.name = "offload_fill_f32", .param_count = 3, .param_sizes = sizes, .fn = fill_f32_kernel, .cost_ns = 1000},
    };
    for (size_t i = 0; i < sizeof descs / sizeof descs[0]; i++) {
        if (simcuda_register_kernel(&descs[i]) != 0) {
            fprintf(stderr, "preload_offload: cannot register the kernel %s\n", descs[i].name);
            exit(1);
        }
    }
}

/* ------------------------------------------------------------------------
 * Launching in every form
 * ------------------------------------------------------------------------ */

/* One launch's arguments, kept both as the pointer array `kernelParams`
 * wants and as the packed buffer `extra` wants. Never copied: `params`
 * points into `packed`. */
typedef struct offload_args_s {
    _Alignas(8) unsigned char packed[64];
    size_t packed_size;
    void *params[8];
    unsigned count;
} offload_args_t;

static void args_push(offload_args_t *args, const void *value, size_t size, size_t align)
{
    size_t offset = (args->packed_size + align - 1) & ~(align - 1);
    memcpy(args->packed + offset, value, size);
    args->params[args->count++] = args->packed + offset;
    args->packed_size = offset + size;
}

/* (dst, n, seed): sim_fill_u32, offload_xor_u32, offload_fill_f32. */
static void args_dst_n_seed(offload_args_t *args, CUdeviceptr dst, uint64_t n, uint32_t seed)
{
    *args = (offload_args_t){0};
    args_push(args, &dst, sizeof dst, 8);
    args_push(args, &n, sizeof n, 8);
    args_push(args, &seed, sizeof seed, 4);
}

typedef enum offload_launch_form_e {
    LAUNCH_WITH_PARAMS,    /* cuLaunchKernel, kernelParams */
    LAUNCH_WITH_EXTRA,     /* cuLaunchKernel, extra: CU_LAUNCH_PARAM_BUFFER_POINTER */
    LAUNCH_EX_WITH_PARAMS, /* cuLaunchKernelEx, kernelParams */
    LAUNCH_EX_WITH_EXTRA,  /* cuLaunchKernelEx, extra */
    LAUNCH_FORM_COUNT
} offload_launch_form_t;

static void launch(CUfunction fn, offload_args_t *args, CUstream stream, offload_launch_form_t form)
{
    size_t packed_size = (args->packed_size + 7) & ~(size_t)7;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args->packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                     CU_LAUNCH_PARAM_END};
    CUlaunchConfig config = {
        .gridDimX = 4, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128, .blockDimY = 1, .blockDimZ = 1,
        .hStream = stream,
    };
    switch (form) {
    case LAUNCH_WITH_PARAMS:
        VS_CHECK(cuLaunchKernel(fn, 4, 1, 1, 128, 1, 1, 0, stream, args->params, NULL));
        break;
    case LAUNCH_WITH_EXTRA:
        VS_CHECK(cuLaunchKernel(fn, 4, 1, 1, 128, 1, 1, 0, stream, NULL, extra));
        break;
    case LAUNCH_EX_WITH_PARAMS:
        VS_CHECK(cuLaunchKernelEx(&config, fn, args->params, NULL));
        break;
    default:
        VS_CHECK(cuLaunchKernelEx(&config, fn, NULL, extra));
        break;
    }
    atomic_fetch_add(&launches_done, 1);
}

/* ------------------------------------------------------------------------
 * Buffers and their host mirrors
 * ------------------------------------------------------------------------ */

/* A device buffer and what it must hold. Only its owning thread touches
 * it. Every operation on it records `last_use` on its stream; an operation
 * on another stream waits for that event first, so operations on one
 * buffer run in program order whatever streams they use. */
typedef struct offload_buffer_s {
    unsigned index;
    CUdeviceptr base;
    size_t bytes;
    size_t words;
    uint32_t *mirror;
    CUevent last_use;
    CUstream last_stream;
    bool used;
} offload_buffer_t;

/* The scenario's buffers; the fault handler reads them too. */
static offload_buffer_t *buffers;
static unsigned buffer_count;

static void buffers_create(unsigned count, size_t bytes)
{
    buffers = calloc(count, sizeof *buffers);
    if (buffers == NULL) {
        fprintf(stderr, "preload_offload: out of host memory\n");
        exit(1);
    }
    for (unsigned i = 0; i < count; i++) {
        offload_buffer_t *b = &buffers[i];
        b->index = i;
        b->bytes = bytes;
        b->words = bytes / 4;
        b->mirror = malloc(bytes);
        if (b->mirror == NULL) {
            fprintf(stderr, "preload_offload: out of host memory for the mirror of buffer %u\n", i);
            exit(1);
        }
        VS_CHECK(cuMemAlloc_v2(&b->base, bytes));
        VS_CHECK(cuEventCreate(&b->last_use, CU_EVENT_DISABLE_TIMING));
    }
    buffer_count = count;
}

static void buffers_destroy(void)
{
    VS_CHECK(cuCtxSynchronize());
    for (unsigned i = 0; i < buffer_count; i++) {
        VS_CHECK(cuMemFree_v2(buffers[i].base));
        VS_CHECK(cuEventDestroy_v2(buffers[i].last_use));
        free(buffers[i].mirror);
    }
    buffer_count = 0;
    free(buffers);
    buffers = NULL;
}

/* Makes `stream`'s next operation wait for the buffer's last one. */
static void order_after_last_use(offload_buffer_t *b, CUstream stream)
{
    if (b->used && b->last_stream != stream)
        VS_CHECK(cuStreamWaitEvent(stream, b->last_use, 0));
}

static void note_use(offload_buffer_t *b, CUstream stream)
{
    VS_CHECK(cuEventRecord(b->last_use, stream));
    b->last_stream = stream;
    b->used = true;
}

/* Compares `bytes` read from the buffer at byte `offset` with the mirror.
 * On a difference, prints the first differing positions: as 32-bit words
 * when the range is word-aligned, else as bytes. */
static bool compare_with_mirror(const offload_buffer_t *b, size_t offset, const void *got, size_t bytes,
                                const char *check)
{
    const unsigned char *want = (const unsigned char *)b->mirror + offset;
    const unsigned char *seen = got;
    if (memcmp(want, seen, bytes) == 0) {
        atomic_fetch_add(&bytes_verified, bytes);
        return true;
    }
    atomic_fetch_add(&mismatches, 1);
    size_t differing = 0, first = bytes;
    for (size_t i = 0; i < bytes; i++) {
        if (want[i] != seen[i]) {
            differing++;
            if (first == bytes)
                first = i;
        }
    }
    bool words = offset % 4 == 0 && bytes % 4 == 0;
    size_t unit = words ? 4 : 1;
    unsigned shown = 0;
    for (size_t i = first - first % unit; i < bytes && shown < 4; i += unit) {
        if (memcmp(want + i, seen + i, unit) == 0)
            continue;
        if (!report_allowed())
            return false;
        shown++;
        uint32_t want_value = 0, seen_value = 0;
        memcpy(&want_value, want + i, unit);
        memcpy(&seen_value, seen + i, unit);
        fprintf(stderr,
                "preload_offload: MISMATCH scenario=%s check=%s buffer=%u (0x%llx) offset=%zu expected=0x%0*x "
                "got=0x%0*x (%zu of %zu bytes differ in [%zu, %zu))\n",
                vs_test_phase(), check, b->index, (unsigned long long)b->base, offset + i, (int)unit * 2,
                want_value, (int)unit * 2, seen_value, differing, bytes, offset, offset + bytes);
    }
    return false;
}

/* A random range of words: the whole buffer half the time, else an interior
 * range (the launch then gets an interior pointer). */
static void pick_word_range(uint64_t *rng, size_t words, size_t *first, size_t *count)
{
    if (rng_below(rng, 2) == 0) {
        *first = 0;
        *count = words;
        return;
    }
    *first = rng_below(rng, words / 2);
    *count = 1 + rng_below(rng, words - *first);
}

/* A random byte range of any alignment. */
static void pick_byte_range(uint64_t *rng, size_t bytes, size_t *first, size_t *count)
{
    *first = rng_below(rng, bytes);
    *count = 1 + rng_below(rng, bytes - *first);
}

/* ------------------------------------------------------------------------
 * Worker threads
 * ------------------------------------------------------------------------ */

typedef struct offload_pending_check_s {
    offload_buffer_t *buffer;
    size_t first_word;
    size_t words;
    uint64_t expected;
} offload_pending_check_t;

/* One thread: its buffers (every `threads`-th one), its streams, a small
 * device buffer its checksums land in, and host staging buffers. */
typedef struct offload_worker_s {
    unsigned id;
    uint64_t rng;
    pthread_t thread;
    CUstream streams[OFFLOAD_MAX_STREAMS];
    unsigned stream_count;
    offload_buffer_t **owned;
    unsigned owned_count;
    CUdeviceptr results;
    offload_pending_check_t pending[OFFLOAD_RESULT_SLOTS];
    unsigned pending_count;
    unsigned char *scratch; /* pageable, one buffer's size */
    unsigned char *pinned;  /* cuMemAllocHost, one buffer's size */
    CUevent pinned_free;    /* recorded after the last asynchronous copy using `pinned` */
    bool pinned_in_use;
    void (*body)(struct offload_worker_s *);
} offload_worker_t;

static void worker_setup(offload_worker_t *w, unsigned id, unsigned threads, unsigned first_buffer)
{
    *w = (offload_worker_t){.id = id, .rng = options.seed * 1000003u + id * 7919u + 17u};
    w->stream_count = options.streams;
    for (unsigned s = 0; s < w->stream_count; s++)
        VS_CHECK(cuStreamCreate(&w->streams[s], CU_STREAM_NON_BLOCKING));
    w->owned = calloc(buffer_count, sizeof *w->owned);
    for (unsigned i = first_buffer + id; i < buffer_count; i += threads)
        w->owned[w->owned_count++] = &buffers[i];
    VS_CHECK(cuMemAlloc_v2(&w->results, OFFLOAD_RESULT_SLOTS * sizeof(uint64_t)));
    size_t bytes = (size_t)options.mib << 20;
    w->scratch = malloc(bytes);
    if (w->scratch == NULL) {
        fprintf(stderr, "preload_offload: out of host memory\n");
        exit(1);
    }
    VS_CHECK(cuMemAllocHost_v2((void **)&w->pinned, bytes));
    VS_CHECK(cuEventCreate(&w->pinned_free, CU_EVENT_DISABLE_TIMING));
}

static void worker_teardown(offload_worker_t *w)
{
    for (unsigned s = 0; s < w->stream_count; s++) {
        VS_CHECK(cuStreamSynchronize(w->streams[s]));
        VS_CHECK(cuStreamDestroy_v2(w->streams[s]));
    }
    VS_CHECK(cuMemFree_v2(w->results));
    VS_CHECK(cuMemFreeHost(w->pinned));
    VS_CHECK(cuEventDestroy_v2(w->pinned_free));
    free(w->scratch);
    free(w->owned);
}

/* One operation in eight goes to the legacy NULL stream. */
static CUstream pick_stream(offload_worker_t *w)
{
    if (rng_below(&w->rng, 8) == 0)
        return NULL;
    return w->streams[rng_below(&w->rng, w->stream_count)];
}

static offload_launch_form_t pick_form(offload_worker_t *w)
{
    return (offload_launch_form_t)rng_below(&w->rng, LAUNCH_FORM_COUNT);
}

/* Another buffer of the same thread, or NULL when it owns only one. */
static offload_buffer_t *pick_other(offload_worker_t *w, const offload_buffer_t *not_this)
{
    if (w->owned_count < 2)
        return NULL;
    for (;;) {
        offload_buffer_t *other = w->owned[rng_below(&w->rng, w->owned_count)];
        if (other != not_this)
            return other;
    }
}

static void shuffle(offload_worker_t *w, offload_buffer_t **order, unsigned count)
{
    for (unsigned i = count; i > 1; i--) {
        unsigned j = (unsigned)rng_below(&w->rng, i);
        offload_buffer_t *t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

static void sync_worker_streams(offload_worker_t *w)
{
    for (unsigned s = 0; s < w->stream_count; s++)
        VS_CHECK(cuStreamSynchronize(w->streams[s]));
    VS_CHECK(cuStreamSynchronize(NULL));
}

/* Waits for the pending checksums, reads them back and compares. A wrong
 * checksum also reads the whole buffer back, to say which bytes differ. */
static void flush_checksums(offload_worker_t *w)
{
    if (w->pending_count == 0)
        return;
    uint64_t got[OFFLOAD_RESULT_SLOTS];
    sync_worker_streams(w);
    VS_CHECK(cuMemcpyDtoH_v2(got, w->results, w->pending_count * sizeof(uint64_t)));
    atomic_fetch_add(&copies_done, 1);
    for (unsigned i = 0; i < w->pending_count; i++) {
        const offload_pending_check_t *c = &w->pending[i];
        atomic_fetch_add(&checksums_checked, 1);
        if (got[i] == c->expected)
            continue;
        atomic_fetch_add(&mismatches, 1);
        if (report_allowed())
            fprintf(stderr,
                    "preload_offload: MISMATCH scenario=%s check=checksum buffer=%u (0x%llx) offset=%zu words=%zu "
                    "expected=0x%016" PRIx64 " got=0x%016" PRIx64 "\n",
                    vs_test_phase(), c->buffer->index, (unsigned long long)c->buffer->base, c->first_word * 4,
                    c->words, c->expected, got[i]);
        /* Every operation of this thread has completed: the buffer must
         * hold what the mirror holds now. */
        VS_CHECK(cuMemcpyDtoH_v2(w->scratch, c->buffer->base, c->buffer->bytes));
        compare_with_mirror(c->buffer, 0, w->scratch, c->buffer->bytes, "readback-after-bad-checksum");
    }
    w->pending_count = 0;
}

/* Reads the whole buffer back, synchronously or through pinned memory on a
 * stream, and compares every byte with the mirror. */
static void verify_buffer(offload_worker_t *w, offload_buffer_t *b, const char *check)
{
    if (rng_below(&w->rng, 2) == 0) {
        order_after_last_use(b, NULL);
        VS_CHECK(cuMemcpyDtoH_v2(w->scratch, b->base, b->bytes));
        note_use(b, NULL);
        compare_with_mirror(b, 0, w->scratch, b->bytes, check);
    } else {
        CUstream stream = w->streams[rng_below(&w->rng, w->stream_count)];
        if (w->pinned_in_use)
            VS_CHECK(cuEventSynchronize(w->pinned_free));
        order_after_last_use(b, stream);
        VS_CHECK(cuMemcpyDtoHAsync_v2(w->pinned, b->base, b->bytes, stream));
        note_use(b, stream);
        VS_CHECK(cuStreamSynchronize(stream));
        w->pinned_in_use = false;
        compare_with_mirror(b, 0, w->pinned, b->bytes, check);
    }
    atomic_fetch_add(&copies_done, 1);
}

static void verify_owned(offload_worker_t *w, const char *check)
{
    flush_checksums(w);
    for (unsigned i = 0; i < w->owned_count; i++)
        verify_buffer(w, w->owned[i], check);
}

static void *worker_main(void *arg)
{
    offload_worker_t *w = arg;
    VS_CHECK(cuCtxSetCurrent(context));
    w->body(w);
    return NULL;
}

/* Runs `body` on `threads` workers sharing buffers `first_buffer`.. between
 * them, then releases their streams and staging memory. */
static void run_workers(unsigned threads, unsigned first_buffer, void (*body)(offload_worker_t *))
{
    offload_worker_t *workers = calloc(threads, sizeof *workers);
    for (unsigned t = 0; t < threads; t++) {
        worker_setup(&workers[t], t, threads, first_buffer);
        workers[t].body = body;
    }
    for (unsigned t = 0; t < threads; t++) {
        if (pthread_create(&workers[t].thread, NULL, worker_main, &workers[t]) != 0) {
            fprintf(stderr, "preload_offload: cannot start thread %u\n", t);
            exit(1);
        }
    }
    for (unsigned t = 0; t < threads; t++)
        pthread_join(workers[t].thread, NULL);
    for (unsigned t = 0; t < threads; t++)
        worker_teardown(&workers[t]);
    free(workers);
}

/* ------------------------------------------------------------------------
 * Kernel operations on one buffer, with their mirror updates
 * ------------------------------------------------------------------------ */

static void op_fill(offload_worker_t *w, offload_buffer_t *b, CUstream stream, offload_launch_form_t form,
                    size_t first, size_t count)
{
    uint32_t seed = (uint32_t)rng_next(&w->rng);
    offload_args_t args;
    args_dst_n_seed(&args, b->base + first * 4, count, seed);
    order_after_last_use(b, stream);
    launch(fn_fill, &args, stream, form);
    note_use(b, stream);
    for (size_t i = 0; i < count; i++)
        b->mirror[first + i] = fill_word(seed, i);
}

static void op_xor(offload_worker_t *w, offload_buffer_t *b, CUstream stream, offload_launch_form_t form,
                   size_t first, size_t count)
{
    uint32_t seed = (uint32_t)rng_next(&w->rng);
    offload_args_t args;
    args_dst_n_seed(&args, b->base + first * 4, count, seed);
    order_after_last_use(b, stream);
    launch(fn_xor, &args, stream, form);
    note_use(b, stream);
    for (size_t i = 0; i < count; i++)
        b->mirror[first + i] ^= xor_word(seed, i);
}

/* b[first..) += other[first..) through sim_add_u32_struct: the three
 * pointers (two of them the same buffer) are inside a by-value struct. */
static void op_add_struct(offload_worker_t *w, offload_buffer_t *b, offload_buffer_t *other, CUstream stream,
                          offload_launch_form_t form, size_t first, size_t count)
{
    offload_add_args_t value = {
        .n = count,
        .a = b->base + first * 4,
        .tag = (uint32_t)rng_next(&w->rng),
        .b = other->base + first * 4,
        .out = b->base + first * 4,
    };
    offload_args_t args = {0};
    args_push(&args, &value, sizeof value, 8);
    order_after_last_use(b, stream);
    order_after_last_use(other, stream);
    launch(fn_add_struct, &args, stream, form);
    note_use(b, stream);
    note_use(other, stream);
    for (size_t i = 0; i < count; i++)
        b->mirror[first + i] += other->mirror[first + i];
}

/* Both buffers filled with small floats, then y = alpha * x + y over a
 * range with sim_axpy_f32: exact, so the host gets the same bits. */
static void op_axpy(offload_worker_t *w, offload_buffer_t *y, offload_buffer_t *x, CUstream stream,
                    offload_launch_form_t form, size_t first, size_t count)
{
    static const float alphas[] = {2.0f, 0.5f, 3.0f, -1.0f};
    uint32_t seed_y = (uint32_t)rng_next(&w->rng), seed_x = (uint32_t)rng_next(&w->rng);
    float alpha = alphas[rng_below(&w->rng, 4)];
    offload_args_t args;

    order_after_last_use(y, stream);
    order_after_last_use(x, stream);
    args_dst_n_seed(&args, y->base, y->words, seed_y);
    launch(fn_fill_f32, &args, stream, form);
    args_dst_n_seed(&args, x->base, x->words, seed_x);
    launch(fn_fill_f32, &args, stream, (offload_launch_form_t)((form + 1) % LAUNCH_FORM_COUNT));

    CUdeviceptr x_ptr = x->base + first * 4, y_ptr = y->base + first * 4;
    uint64_t n = count;
    args = (offload_args_t){0};
    args_push(&args, &alpha, sizeof alpha, 4);
    args_push(&args, &x_ptr, sizeof x_ptr, 8);
    args_push(&args, &y_ptr, sizeof y_ptr, 8);
    args_push(&args, &n, sizeof n, 8);
    launch(fn_axpy, &args, stream, (offload_launch_form_t)((form + 2) % LAUNCH_FORM_COUNT));
    note_use(y, stream);
    note_use(x, stream);

    for (size_t i = 0; i < y->words; i++) {
        float fy = fill_float(seed_y, i), fx = fill_float(seed_x, i);
        memcpy(&x->mirror[i], &fx, 4);
        if (i >= first && i < first + count)
            fy = alpha * fx + fy;
        memcpy(&y->mirror[i], &fy, 4);
    }
}

/* Queues a checksum of a range into the thread's results buffer; compared
 * at the next flush against the mirror as it is now. */
static void op_checksum(offload_worker_t *w, offload_buffer_t *b, CUstream stream, offload_launch_form_t form,
                        size_t first, size_t count)
{
    if (w->pending_count == OFFLOAD_RESULT_SLOTS)
        flush_checksums(w);
    unsigned slot = w->pending_count++;
    CUdeviceptr src = b->base + first * 4, out = w->results + slot * sizeof(uint64_t);
    uint64_t n = count;
    offload_args_t args = {0};
    args_push(&args, &src, sizeof src, 8);
    args_push(&args, &n, sizeof n, 8);
    args_push(&args, &out, sizeof out, 8);
    order_after_last_use(b, stream);
    launch(fn_checksum, &args, stream, form);
    note_use(b, stream);
    w->pending[slot] = (offload_pending_check_t){
        .buffer = b, .first_word = first, .words = count, .expected = checksum_words(b->mirror + first, count),
    };
}

/* One random kernel operation on `b`, sometimes followed by a checksum. */
static void random_kernel_op(offload_worker_t *w, offload_buffer_t *b)
{
    CUstream stream = pick_stream(w);
    offload_launch_form_t form = pick_form(w);
    offload_buffer_t *other = pick_other(w, b);
    size_t first, count;
    pick_word_range(&w->rng, b->words, &first, &count);
    switch (rng_below(&w->rng, other != NULL ? 6 : 3)) {
    case 0:
        op_fill(w, b, stream, form, first, count);
        break;
    case 1:
    case 2:
        op_xor(w, b, stream, form, first, count);
        break;
    case 3:
    case 4:
        op_add_struct(w, b, other, stream, form, first, count);
        break;
    default:
        op_axpy(w, b, other, stream, form, first, count);
        break;
    }
    if (rng_below(&w->rng, 3) == 0) {
        pick_word_range(&w->rng, b->words, &first, &count);
        op_checksum(w, b, pick_stream(w), pick_form(w), first, count);
    }
}

static void fill_owned(offload_worker_t *w)
{
    for (unsigned i = 0; i < w->owned_count; i++)
        op_fill(w, w->owned[i], pick_stream(w), pick_form(w), 0, w->owned[i]->words);
}

/* ------------------------------------------------------------------------
 * Scenario `kernels`
 * ------------------------------------------------------------------------ */

/* Each round visits the thread's buffers in a new random order and runs a
 * kernel on each (fill, xor, add through a struct, axpy), on a random
 * stream in a random launch form, with checksums along the way; every
 * buffer is read back whole at the end. */
static void kernels_body(offload_worker_t *w)
{
    offload_buffer_t **order = malloc((w->owned_count + 1) * sizeof *order);
    fill_owned(w);
    for (unsigned r = 0; r < options.rounds; r++) {
        memcpy(order, w->owned, w->owned_count * sizeof *order);
        shuffle(w, order, w->owned_count);
        for (unsigned i = 0; i < w->owned_count; i++)
            random_kernel_op(w, order[i]);
        flush_checksums(w);
    }
    verify_owned(w, "final-readback");
    free(order);
}

static void scenario_kernels(void)
{
    buffers_create(options.buffers, (size_t)options.mib << 20);
    run_workers(options.threads, 0, kernels_body);
    buffers_destroy();
}

/* ------------------------------------------------------------------------
 * Scenario `departures`
 * ------------------------------------------------------------------------ */

/* Each round xors the thread's buffers in one fixed order on its first
 * stream, so that the shim learns the cycle and its prefetcher evicts the
 * buffer just used ahead of need (a departure) while the next ones arrive.
 * From the third round on, the order breaks at the end of every round: the
 * buffer just used, the one departing, is used again at once; the one used
 * just before it (departing too) is used from another stream, or, every
 * other round, freed and allocated again (new contents) while it departs. Every
 * buffer is checked by checksum each round and read back whole at the end. */
static void departures_body(offload_worker_t *w)
{
    CUstream cycle = w->streams[0], other = w->streams[w->stream_count > 1 ? 1 : 0];
    fill_owned(w);
    for (unsigned r = 0; r < options.rounds; r++) {
        for (unsigned i = 0; i < w->owned_count; i++)
            op_xor(w, w->owned[i], cycle, pick_form(w), 0, w->owned[i]->words);
        if (r >= 2 && w->owned_count >= 3) {
            offload_buffer_t *last = w->owned[w->owned_count - 1], *before = w->owned[w->owned_count - 2];
            op_xor(w, last, cycle, pick_form(w), 0, last->words);
            if (r % 2 == 1) {
                /* cuMemFree waits for the buffer's work, as the driver's
                 * does; the mirror follows the new allocation's fill. */
                VS_CHECK(cuMemFree_v2(before->base));
                VS_CHECK(cuMemAlloc_v2(&before->base, before->bytes));
                before->used = false;
                op_fill(w, before, other, pick_form(w), 0, before->words);
            } else {
                op_xor(w, before, other, pick_form(w), 0, before->words);
            }
        }
        for (unsigned i = 0; i < w->owned_count; i++)
            op_checksum(w, w->owned[i], cycle, pick_form(w), 0, w->owned[i]->words);
        flush_checksums(w);
    }
    verify_owned(w, "final-readback");
}

static void scenario_departures(void)
{
    buffers_create(options.buffers, (size_t)options.mib << 20);
    run_workers(options.threads, 0, departures_body);
    buffers_destroy();
}

/* ------------------------------------------------------------------------
 * Scenario `copies`
 * ------------------------------------------------------------------------ */

/* Waits until the pinned staging buffer is no longer read or written by
 * an asynchronous copy. */
static void pinned_acquire(offload_worker_t *w)
{
    if (w->pinned_in_use)
        VS_CHECK(cuEventSynchronize(w->pinned_free));
    w->pinned_in_use = false;
}

static void pinned_release(offload_worker_t *w, CUstream stream)
{
    VS_CHECK(cuEventRecord(w->pinned_free, stream));
    w->pinned_in_use = true;
}

/* One random copy or memset on `b`, over a random range, most likely while
 * `b` is evicted (it was last used a whole pass over the buffers ago). */
static void random_copy_op(offload_worker_t *w, offload_buffer_t *b)
{
    offload_buffer_t *other = pick_other(w, b);
    size_t first, count;
    pick_byte_range(&w->rng, b->bytes, &first, &count);
    unsigned char *mirror = (unsigned char *)b->mirror;
    CUstream stream = pick_stream(w);
    unsigned kind = (unsigned)rng_below(&w->rng, other != NULL ? 9 : 7);
    switch (kind) {
    case 0: /* pageable host to device, synchronous */
        rng_bytes(&w->rng, w->scratch, count);
        order_after_last_use(b, NULL);
        VS_CHECK(cuMemcpyHtoD_v2(b->base + first, w->scratch, count));
        note_use(b, NULL);
        memcpy(mirror + first, w->scratch, count);
        break;
    case 1: /* pinned host to device, asynchronous */
        pinned_acquire(w);
        rng_bytes(&w->rng, w->pinned, count);
        memcpy(mirror + first, w->pinned, count);
        order_after_last_use(b, stream);
        VS_CHECK(cuMemcpyHtoDAsync_v2(b->base + first, w->pinned, count, stream));
        note_use(b, stream);
        pinned_release(w, stream);
        break;
    case 2: /* device to pageable host, synchronous */
        order_after_last_use(b, NULL);
        VS_CHECK(cuMemcpyDtoH_v2(w->scratch, b->base + first, count));
        note_use(b, NULL);
        compare_with_mirror(b, first, w->scratch, count, "dtoh-partial");
        break;
    case 3: /* device to pinned host, asynchronous */
        pinned_acquire(w);
        order_after_last_use(b, stream);
        VS_CHECK(cuMemcpyDtoHAsync_v2(w->pinned, b->base + first, count, stream));
        note_use(b, stream);
        VS_CHECK(cuStreamSynchronize(stream));
        compare_with_mirror(b, first, w->pinned, count, "dtoh-async-partial");
        break;
    case 4: { /* 32-bit memset of a word range, synchronous */
        size_t word = first / 4, words = (count + 3) / 4;
        if (word + words > b->words)
            words = b->words - word;
        uint32_t value = (uint32_t)rng_next(&w->rng);
        order_after_last_use(b, NULL);
        VS_CHECK(cuMemsetD32_v2(b->base + word * 4, value, words));
        note_use(b, NULL);
        for (size_t i = 0; i < words; i++)
            b->mirror[word + i] = value;
        atomic_fetch_add(&memsets_done, 1);
        return;
    }
    case 5: { /* 32-bit memset of a word range, asynchronous */
        size_t word = first / 4, words = (count + 3) / 4;
        if (word + words > b->words)
            words = b->words - word;
        uint32_t value = (uint32_t)rng_next(&w->rng);
        order_after_last_use(b, stream);
        VS_CHECK(cuMemsetD32Async(b->base + word * 4, value, words, stream));
        note_use(b, stream);
        for (size_t i = 0; i < words; i++)
            b->mirror[word + i] = value;
        atomic_fetch_add(&memsets_done, 1);
        return;
    }
    case 6: { /* byte memset, synchronous */
        unsigned char value = (unsigned char)rng_next(&w->rng);
        order_after_last_use(b, NULL);
        VS_CHECK(cuMemsetD8_v2(b->base + first, value, count));
        note_use(b, NULL);
        memset(mirror + first, value, count);
        atomic_fetch_add(&memsets_done, 1);
        return;
    }
    default: { /* device to device between two buffers, either form */
        size_t src_first = rng_below(&w->rng, other->bytes - count + 1);
        CUstream where = kind == 7 ? NULL : stream;
        order_after_last_use(b, where);
        order_after_last_use(other, where);
        if (kind == 7)
            VS_CHECK(cuMemcpyDtoD_v2(b->base + first, other->base + src_first, count));
        else
            VS_CHECK(cuMemcpyDtoDAsync_v2(b->base + first, other->base + src_first, count, stream));
        note_use(b, where);
        note_use(other, where);
        memcpy(mirror + first, (unsigned char *)other->mirror + src_first, count);
        break;
    }
    }
    atomic_fetch_add(&copies_done, 1);
}

/* Every buffer starts with random bytes copied in; then each round visits
 * the buffers in a new random order with a random copy or memset, and
 * every buffer is read back whole at the end. */
static void copies_body(offload_worker_t *w)
{
    offload_buffer_t **order = malloc((w->owned_count + 1) * sizeof *order);
    for (unsigned i = 0; i < w->owned_count; i++) {
        offload_buffer_t *b = w->owned[i];
        rng_bytes(&w->rng, b->mirror, b->bytes);
        VS_CHECK(cuMemcpyHtoD_v2(b->base, b->mirror, b->bytes));
        note_use(b, NULL);
        atomic_fetch_add(&copies_done, 1);
    }
    for (unsigned r = 0; r < options.rounds; r++) {
        memcpy(order, w->owned, w->owned_count * sizeof *order);
        shuffle(w, order, w->owned_count);
        for (unsigned i = 0; i < w->owned_count; i++)
            random_copy_op(w, order[i]);
        /* Twice per round, so that copies also meet buffers evicted half a
         * pass ago. */
        shuffle(w, order, w->owned_count);
        for (unsigned i = 0; i < w->owned_count; i++)
            random_copy_op(w, order[i]);
    }
    pinned_acquire(w);
    verify_owned(w, "final-readback");
    free(order);
}

static void scenario_copies(void)
{
    buffers_create(options.buffers, (size_t)options.mib << 20);
    run_workers(options.threads, 0, copies_body);
    buffers_destroy();
}

/* ------------------------------------------------------------------------
 * Scenario `graph`
 * ------------------------------------------------------------------------ */

/* The first GRAPH_BUFFERS buffers are touched only by two graphs launched
 * on one stream; the others are pressure for the other work. */
#define GRAPH_BUFFERS 3
#define GRAPH_LAUNCHES_PER_ROUND 6

typedef struct offload_graphs_s {
    CUstream stream;        /* every graph launch */
    CUstream fork_stream;   /* the captured graph's second branch */
    CUdeviceptr results;    /* slots 0 and 1: captured graph; 2: hand-built */
    CUgraphExec captured;
    CUgraphExec hand_built;
    /* What the captured graph does (see `graph_capture`). */
    uint32_t xor_g0_seed, xor_g2_seed, memset_value;
    size_t add_first, add_count;     /* words of g1 += g0 */
    size_t memset_first, memset_count; /* words of g2 */
    size_t copy_dst, copy_src, copy_bytes; /* g2 bytes from g0 bytes */
    /* What the hand-built graph does. */
    uint32_t hand_xor_seed;
} offload_graphs_t;

static offload_graphs_t graphs;

/* Captures, in global mode on a non-blocking stream, a graph that touches
 * the three graph buffers through kernels (with a forked branch), a memset
 * and a copy, and checksums two of them; then builds by hand a chain of
 * three kernel nodes. Both are instantiated; the captured graph itself is
 * destroyed at once (the executable graph must keep working). */
static void graph_build(uint64_t *rng)
{
    offload_buffer_t *g0 = &buffers[0], *g1 = &buffers[1], *g2 = &buffers[2];
    size_t words = g0->words;
    offload_args_t args;
    CUgraph graph;
    CUevent fork_event, join_event;

    VS_CHECK(cuStreamCreate(&graphs.stream, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuStreamCreate(&graphs.fork_stream, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuMemAlloc_v2(&graphs.results, 3 * sizeof(uint64_t)));
    VS_CHECK(cuEventCreate(&fork_event, CU_EVENT_DISABLE_TIMING));
    VS_CHECK(cuEventCreate(&join_event, CU_EVENT_DISABLE_TIMING));
    graphs.xor_g0_seed = (uint32_t)rng_next(rng);
    graphs.xor_g2_seed = (uint32_t)rng_next(rng);
    graphs.memset_value = (uint32_t)rng_next(rng);
    graphs.add_first = rng_below(rng, words / 2);
    graphs.add_count = words - graphs.add_first - rng_below(rng, words / 4);
    graphs.memset_first = rng_below(rng, words / 2);
    graphs.memset_count = 1 + rng_below(rng, words / 4);
    graphs.copy_bytes = 1 + rng_below(rng, g0->bytes / 2);
    graphs.copy_dst = rng_below(rng, g0->bytes - graphs.copy_bytes);
    graphs.copy_src = rng_below(rng, g0->bytes - graphs.copy_bytes);
    graphs.hand_xor_seed = (uint32_t)rng_next(rng);

    /* Every buffer filled before the capture, on the graph stream. */
    for (unsigned i = 0; i < GRAPH_BUFFERS; i++) {
        uint32_t seed = (uint32_t)rng_next(rng);
        args_dst_n_seed(&args, buffers[i].base, words, seed);
        launch(fn_fill, &args, graphs.stream, LAUNCH_WITH_PARAMS);
        for (size_t k = 0; k < words; k++)
            buffers[i].mirror[k] = fill_word(seed, k);
    }
    VS_CHECK(cuStreamSynchronize(graphs.stream));

    VS_CHECK(cuStreamBeginCapture_v2(graphs.stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    args_dst_n_seed(&args, g0->base, words, graphs.xor_g0_seed);
    launch(fn_xor, &args, graphs.stream, LAUNCH_WITH_PARAMS);
    /* fork: g2 ^= ... on the second stream while g1 += g0 on the first */
    VS_CHECK(cuEventRecord(fork_event, graphs.stream));
    VS_CHECK(cuStreamWaitEvent(graphs.fork_stream, fork_event, 0));
    args_dst_n_seed(&args, g2->base, words, graphs.xor_g2_seed);
    launch(fn_xor, &args, graphs.fork_stream, LAUNCH_EX_WITH_PARAMS);
    offload_add_args_t add = {
        .n = graphs.add_count,
        .a = g1->base + graphs.add_first * 4,
        .tag = 7,
        .b = g0->base + graphs.add_first * 4,
        .out = g1->base + graphs.add_first * 4,
    };
    args = (offload_args_t){0};
    args_push(&args, &add, sizeof add, 8);
    launch(fn_add_struct, &args, graphs.stream, LAUNCH_WITH_EXTRA);
    VS_CHECK(cuEventRecord(join_event, graphs.fork_stream));
    VS_CHECK(cuStreamWaitEvent(graphs.stream, join_event, 0));
    VS_CHECK(cuMemsetD32Async(g2->base + graphs.memset_first * 4, graphs.memset_value, graphs.memset_count,
                                   graphs.stream));
    VS_CHECK(cuMemcpyDtoDAsync_v2(g2->base + graphs.copy_dst, g0->base + graphs.copy_src, graphs.copy_bytes,
                                       graphs.stream));
    for (unsigned slot = 0; slot < 2; slot++) {
        CUdeviceptr src = buffers[1 + slot].base, out = graphs.results + slot * sizeof(uint64_t);
        uint64_t n = words;
        args = (offload_args_t){0};
        args_push(&args, &src, sizeof src, 8);
        args_push(&args, &n, sizeof n, 8);
        args_push(&args, &out, sizeof out, 8);
        launch(fn_checksum, &args, graphs.stream, slot == 0 ? LAUNCH_WITH_PARAMS : LAUNCH_EX_WITH_EXTRA);
    }
    VS_CHECK(cuStreamEndCapture(graphs.stream, &graph));
    VS_CHECK(cuGraphInstantiateWithFlags(&graphs.captured, graph, 0));
    VS_CHECK(cuGraphDestroy(graph));
    /* The five launches above were captured, not run. */
    atomic_fetch_sub(&launches_done, 5);

    /* By hand: g2 ^= ..., then g0 += g2, then checksum(g0) into slot 2. */
    CUgraphNode nodes[3];
    VS_CHECK(cuGraphCreate(&graph, 0));
    offload_args_t xor_args, add_args = {0}, sum_args = {0};
    args_dst_n_seed(&xor_args, g2->base, words, graphs.hand_xor_seed);
    offload_add_args_t hand_add = {.n = words, .a = g0->base, .tag = 9, .b = g2->base, .out = g0->base};
    args_push(&add_args, &hand_add, sizeof hand_add, 8);
    CUdeviceptr sum_src = g0->base, sum_out = graphs.results + 2 * sizeof(uint64_t);
    uint64_t sum_n = words;
    args_push(&sum_args, &sum_src, sizeof sum_src, 8);
    args_push(&sum_args, &sum_n, sizeof sum_n, 8);
    args_push(&sum_args, &sum_out, sizeof sum_out, 8);
    const struct {
        CUfunction fn;
        offload_args_t *args;
    } chain[3] = {{fn_xor, &xor_args}, {fn_add_struct, &add_args}, {fn_checksum, &sum_args}};
    for (unsigned i = 0; i < 3; i++) {
        CUDA_KERNEL_NODE_PARAMS params = {
            .func = chain[i].fn, .gridDimX = 4, .gridDimY = 1, .gridDimZ = 1,
            .blockDimX = 128, .blockDimY = 1, .blockDimZ = 1, .kernelParams = chain[i].args->params,
        };
        VS_CHECK(cuGraphAddKernelNode_v2(&nodes[i], graph, i == 0 ? NULL : &nodes[i - 1], i == 0 ? 0 : 1,
                                              &params));
    }
    VS_CHECK(cuGraphInstantiateWithFlags(&graphs.hand_built, graph, 0));
    VS_CHECK(cuGraphDestroy(graph));
    VS_CHECK(cuEventDestroy_v2(fork_event));
    VS_CHECK(cuEventDestroy_v2(join_event));
    for (unsigned i = 0; i < GRAPH_BUFFERS; i++)
        note_use(&buffers[i], graphs.stream);
}

/* The mirror after one launch of the captured graph; its two checksums. */
static void graph_apply_captured(uint64_t expected[2])
{
    offload_buffer_t *g0 = &buffers[0], *g1 = &buffers[1], *g2 = &buffers[2];
    for (size_t i = 0; i < g0->words; i++) {
        g0->mirror[i] ^= xor_word(graphs.xor_g0_seed, i);
        g2->mirror[i] ^= xor_word(graphs.xor_g2_seed, i);
    }
    for (size_t i = 0; i < graphs.add_count; i++)
        g1->mirror[graphs.add_first + i] += g0->mirror[graphs.add_first + i];
    for (size_t i = 0; i < graphs.memset_count; i++)
        g2->mirror[graphs.memset_first + i] = graphs.memset_value;
    memcpy((unsigned char *)g2->mirror + graphs.copy_dst, (unsigned char *)g0->mirror + graphs.copy_src,
           graphs.copy_bytes);
    expected[0] = checksum_words(g1->mirror, g1->words);
    expected[1] = checksum_words(g2->mirror, g2->words);
}

static uint64_t graph_apply_hand_built(void)
{
    offload_buffer_t *g0 = &buffers[0], *g2 = &buffers[2];
    for (size_t i = 0; i < g0->words; i++) {
        g2->mirror[i] ^= xor_word(graphs.hand_xor_seed, i);
        g0->mirror[i] += g2->mirror[i];
    }
    return checksum_words(g0->mirror, g0->words);
}

/* Thread 0 launches the graphs, each launch followed by a kernel on each of
 * its pressure buffers (other threads do the same concurrently), so the
 * graph buffers are evicted between launches. After every launch the
 * graph's checksums are compared; the graph buffers are read back whole at
 * the end. */
static void graph_body(offload_worker_t *w)
{
    fill_owned(w);
    unsigned launches = options.rounds * GRAPH_LAUNCHES_PER_ROUND;
    for (unsigned l = 0; l < launches; l++) {
        if (w->id == 0) {
            bool hand_built = rng_below(&w->rng, 3) == 0;
            uint64_t expected[2], got[3];
            unsigned first_slot = hand_built ? 2 : 0, slots = hand_built ? 1 : 2;
            VS_CHECK(cuGraphLaunch(hand_built ? graphs.hand_built : graphs.captured, graphs.stream));
            atomic_fetch_add(&graph_launches_done, 1);
            for (unsigned i = 0; i < GRAPH_BUFFERS; i++)
                note_use(&buffers[i], graphs.stream);
            if (hand_built)
                expected[0] = graph_apply_hand_built();
            else
                graph_apply_captured(expected);
            VS_CHECK(cuStreamSynchronize(graphs.stream));
            VS_CHECK(cuMemcpyDtoH_v2(got, graphs.results, sizeof got));
            for (unsigned s = 0; s < slots; s++) {
                atomic_fetch_add(&checksums_checked, 1);
                if (got[first_slot + s] == expected[s])
                    continue;
                atomic_fetch_add(&mismatches, 1);
                unsigned index = hand_built ? 0 : 1 + s;
                if (report_allowed())
                    fprintf(stderr,
                            "preload_offload: MISMATCH scenario=graph check=%s-graph-checksum launch=%u buffer=%u "
                            "(0x%llx) expected=0x%016" PRIx64 " got=0x%016" PRIx64 "\n",
                            hand_built ? "hand-built" : "captured", l, index,
                            (unsigned long long)buffers[index].base, expected[s], got[first_slot + s]);
            }
        }
        for (unsigned i = 0; i < w->owned_count; i++)
            random_kernel_op(w, w->owned[i]);
        flush_checksums(w);
    }
    verify_owned(w, "final-readback");
    if (w->id == 0) {
        for (unsigned i = 0; i < GRAPH_BUFFERS; i++) {
            offload_buffer_t *g = &buffers[i];
            order_after_last_use(g, NULL);
            VS_CHECK(cuMemcpyDtoH_v2(w->scratch, g->base, g->bytes));
            compare_with_mirror(g, 0, w->scratch, g->bytes, "graph-buffer-final-readback");
        }
    }
}

static void scenario_graph(void)
{
    uint64_t rng = options.seed * 31u + 5u;
    buffers_create(options.buffers, (size_t)options.mib << 20);
    graph_build(&rng);
    run_workers(options.threads, GRAPH_BUFFERS, graph_body);
    VS_CHECK(cuGraphExecDestroy(graphs.captured));
    VS_CHECK(cuGraphExecDestroy(graphs.hand_built));
    VS_CHECK(cuStreamDestroy_v2(graphs.stream));
    VS_CHECK(cuStreamDestroy_v2(graphs.fork_stream));
    VS_CHECK(cuMemFree_v2(graphs.results));
    buffers_destroy();
}

/* ------------------------------------------------------------------------
 * Scenario `pointer_table`
 * ------------------------------------------------------------------------ */

#define TABLE_ENTRIES 8

/* A device-side table of pointers into big buffers, read by
 * sim_gather_checksum. The launch passes only the table and the output
 * (both small allocations); the big buffers are reached through pointers in
 * device memory, which no launch-time scan can see.
 *
 * What a pass proves, under an offloading interposer:
 * - The table (512 bytes, like a batched GEMM's pointer array) stays on the
 *   device and intact while many times the limit of big buffers is evicted
 *   and restored around it: it is rewritten by a small copy each round,
 *   read back, and dereferenced by the gather (simcuda faults on a
 *   non-resident table).
 * - The two big buffers the table points to in a round were touched
 *   directly, by one `sim_add_u32_struct` launch (t0 += t1, both pointers
 *   inside its by-value struct) on the same stream just before the gather.
 *   That launch needs both resident at once; the gather that follows needs
 *   no room (its visible operands are small), so nothing should evict them
 *   in between, and the gather reads, through the table at interior
 *   offsets, exactly what the add left there: the checksums prove that
 *   those buffers were restored with the right contents and stayed put.
 *   Their total size (2 x --mib) must fit under the limit.
 * - The stream is synchronised right after the gather, before any other
 *   work: an interposer that knows only the add's use of t0 and t1 may
 *   evict them as soon as the add has completed, gather or not.
 * It does not prove, and no interposer can promise, that a gather through
 * a table to buffers not touched directly just before works: those may be
 * evicted, and then the gather faults. The scenario runs on one thread:
 * another thread's launch could evict t0 or t1 between the add and the
 * gather, legitimately. */
static void scenario_pointer_table(void)
{
    uint64_t rng = options.seed * 131u + 3u;
    size_t bytes = (size_t)options.mib << 20, words = bytes / 4;
    uint64_t gather_n = words / 2;
    CUstream streams[OFFLOAD_MAX_STREAMS];
    CUdeviceptr table, out, host_table[TABLE_ENTRIES], table_readback[TABLE_ENTRIES];
    uint64_t got[TABLE_ENTRIES];
    offload_args_t args;

    buffers_create(options.buffers, bytes);
    for (unsigned s = 0; s < options.streams; s++)
        VS_CHECK(cuStreamCreate(&streams[s], CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuMemAlloc_v2(&table, sizeof host_table));
    VS_CHECK(cuMemAlloc_v2(&out, sizeof got));
    for (unsigned i = 0; i < buffer_count; i++) {
        offload_buffer_t *b = &buffers[i];
        CUstream stream = streams[rng_below(&rng, options.streams)];
        uint32_t seed = (uint32_t)rng_next(&rng);
        args_dst_n_seed(&args, b->base, b->words, seed);
        launch(fn_fill, &args, stream, (offload_launch_form_t)rng_below(&rng, LAUNCH_FORM_COUNT));
        note_use(b, stream);
        for (size_t k = 0; k < b->words; k++)
            b->mirror[k] = fill_word(seed, k);
    }

    for (unsigned r = 0; r < options.rounds * 2; r++) {
        unsigned t0 = (unsigned)rng_below(&rng, buffer_count), t1;
        do
            t1 = (unsigned)rng_below(&rng, buffer_count);
        while (t1 == t0);
        offload_buffer_t *target[2] = {&buffers[t0], &buffers[t1]};

        /* Pressure: every other buffer, on any stream. */
        for (unsigned i = 0; i < buffer_count; i++) {
            offload_buffer_t *b = &buffers[i];
            if (i == t0 || i == t1)
                continue;
            CUstream stream = streams[rng_below(&rng, options.streams)];
            uint32_t seed = (uint32_t)rng_next(&rng);
            args_dst_n_seed(&args, b->base, b->words, seed);
            order_after_last_use(b, stream);
            launch(fn_xor, &args, stream, (offload_launch_form_t)rng_below(&rng, LAUNCH_FORM_COUNT));
            note_use(b, stream);
            for (size_t k = 0; k < b->words; k++)
                b->mirror[k] ^= xor_word(seed, k);
        }

        /* The table: entry k points into t(k % 2) at word (k / 2) * words / 8. */
        for (unsigned k = 0; k < TABLE_ENTRIES; k++)
            host_table[k] = target[k % 2]->base + (k / 2) * (words / 8) * 4;
        VS_CHECK(cuMemcpyHtoD_v2(table, host_table, sizeof host_table));
        atomic_fetch_add(&copies_done, 1);

        /* t0 += t1 in one launch, then the gather, on the same stream. */
        CUstream stream = streams[rng_below(&rng, options.streams)];
        offload_add_args_t add = {.n = words, .a = target[0]->base, .tag = r, .b = target[1]->base,
                                  .out = target[0]->base};
        args = (offload_args_t){0};
        args_push(&args, &add, sizeof add, 8);
        order_after_last_use(target[0], stream);
        order_after_last_use(target[1], stream);
        launch(fn_add_struct, &args, stream, (offload_launch_form_t)rng_below(&rng, LAUNCH_FORM_COUNT));
        for (size_t k = 0; k < words; k++)
            target[0]->mirror[k] += target[1]->mirror[k];

        uint64_t count = TABLE_ENTRIES;
        args = (offload_args_t){0};
        args_push(&args, &table, sizeof table, 8);
        args_push(&args, &count, sizeof count, 8);
        args_push(&args, &gather_n, sizeof gather_n, 8);
        args_push(&args, &out, sizeof out, 8);
        launch(fn_gather, &args, stream, (offload_launch_form_t)rng_below(&rng, LAUNCH_FORM_COUNT));
        note_use(target[0], stream);
        note_use(target[1], stream);
        VS_CHECK(cuStreamSynchronize(stream));

        VS_CHECK(cuMemcpyDtoH_v2(got, out, sizeof got));
        VS_CHECK(cuMemcpyDtoH_v2(table_readback, table, sizeof table_readback));
        atomic_fetch_add(&copies_done, 2);
        for (unsigned k = 0; k < TABLE_ENTRIES; k++) {
            const offload_buffer_t *t = target[k % 2];
            size_t first = (k / 2) * (words / 8);
            uint64_t expected = checksum_words(t->mirror + first, gather_n);
            atomic_fetch_add(&checksums_checked, 1);
            if (got[k] != expected) {
                atomic_fetch_add(&mismatches, 1);
                if (report_allowed())
                    fprintf(stderr,
                            "preload_offload: MISMATCH scenario=pointer_table check=gather-checksum round=%u "
                            "entry=%u buffer=%u (0x%llx) offset=%zu words=%" PRIu64 " expected=0x%016" PRIx64
                            " got=0x%016" PRIx64 "\n",
                            r, k, t->index, (unsigned long long)t->base, first * 4, gather_n, expected, got[k]);
            }
            if (table_readback[k] != host_table[k]) {
                atomic_fetch_add(&mismatches, 1);
                if (report_allowed())
                    fprintf(stderr,
                            "preload_offload: MISMATCH scenario=pointer_table check=table-readback round=%u "
                            "offset=%u expected=0x%llx got=0x%llx\n",
                            r, k * 8, (unsigned long long)host_table[k], (unsigned long long)table_readback[k]);
            }
        }
    }

    unsigned char *scratch = malloc(bytes);
    for (unsigned i = 0; i < buffer_count; i++) {
        offload_buffer_t *b = &buffers[i];
        order_after_last_use(b, NULL);
        VS_CHECK(cuMemcpyDtoH_v2(scratch, b->base, b->bytes));
        atomic_fetch_add(&copies_done, 1);
        compare_with_mirror(b, 0, scratch, b->bytes, "final-readback");
    }
    free(scratch);
    for (unsigned s = 0; s < options.streams; s++)
        VS_CHECK(cuStreamDestroy_v2(streams[s]));
    VS_CHECK(cuMemFree_v2(table));
    VS_CHECK(cuMemFree_v2(out));
    buffers_destroy();
}

/* ------------------------------------------------------------------------
 * Faults, options, main
 * ------------------------------------------------------------------------ */

/* Names the buffer a fault hit (vs_test.h's fault reporter). */
static int describe_address(uintptr_t address, char *line, size_t cap, int length)
{
    for (unsigned i = 0; buffers != NULL && i < buffer_count; i++) {
        if (address >= buffers[i].base && address < buffers[i].base + buffers[i].bytes)
            length += snprintf(line + length, cap - (size_t)length, ", inside buffer %u at offset %llu", i,
                               (unsigned long long)(address - buffers[i].base));
    }
    return length;
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--scenario kernels|copies|graph|pointer_table|departures|all] [--buffers N] [--mib M]\n"
            "          [--threads T] [--streams S] [--rounds R] [--seed X]\n",
            argv0);
    exit(2);
}

static unsigned parse_number(const char *argv0, const char *name, const char *value, unsigned long long low,
                             unsigned long long high, unsigned long long *out)
{
    char *end = NULL;
    unsigned long long number = value != NULL ? strtoull(value, &end, 0) : 0;
    if (value == NULL || *value == '\0' || *end != '\0' || number < low || number > high) {
        fprintf(stderr, "%s: %s needs a number from %llu to %llu, got %s\n", argv0, name, low, high,
                value != NULL ? value : "nothing");
        usage(argv0);
    }
    *out = number;
    return (unsigned)number;
}

static void parse_options(int argc, char **argv)
{
    for (int i = 1; i < argc; i += 2) {
        const char *name = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long long number;
        if (strcmp(name, "--scenario") == 0 && value != NULL)
            options.scenario = value;
        else if (strcmp(name, "--buffers") == 0)
            options.buffers = parse_number(argv[0], name, value, GRAPH_BUFFERS + 1, 100000, &number);
        else if (strcmp(name, "--mib") == 0)
            options.mib = parse_number(argv[0], name, value, 1, 4096, &number);
        else if (strcmp(name, "--threads") == 0)
            options.threads = parse_number(argv[0], name, value, 1, OFFLOAD_MAX_THREADS, &number);
        else if (strcmp(name, "--streams") == 0)
            options.streams = parse_number(argv[0], name, value, 1, OFFLOAD_MAX_STREAMS, &number);
        else if (strcmp(name, "--rounds") == 0)
            options.rounds = parse_number(argv[0], name, value, 1, 1000000, &number);
        else if (strcmp(name, "--seed") == 0) {
            parse_number(argv[0], name, value, 0, UINT64_MAX, &number);
            options.seed = number;
        }
        else
            usage(argv[0]);
    }
}

typedef struct offload_scenario_s {
    const char *name;
    void (*run)(void);
} offload_scenario_t;

static const offload_scenario_t scenarios[] = {
    {"kernels", scenario_kernels},
    {"copies", scenario_copies},
    {"graph", scenario_graph},
    {"pointer_table", scenario_pointer_table},
    {"departures", scenario_departures},
};

int main(int argc, char **argv)
{
    CUdevice device;
    CUmodule module;
    size_t scenario_count = sizeof scenarios / sizeof scenarios[0];

    parse_options(argc, argv);
    bool known = strcmp(options.scenario, "all") == 0;
    for (size_t i = 0; i < scenario_count; i++)
        known = known || strcmp(options.scenario, scenarios[i].name) == 0;
    if (!known) {
        fprintf(stderr, "%s: unknown scenario %s\n", argv[0], options.scenario);
        usage(argv[0]);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    vs_test_set_phase("setup");
    vs_test_fault_reporter_install(describe_address);

    VS_CHECK(cuInit(0));
    VS_CHECK(cuDeviceGet(&device, 0));
    VS_CHECK(cuDevicePrimaryCtxRetain(&context, device));
    VS_CHECK(cuCtxSetCurrent(context));
    register_kernels();
    VS_CHECK(cuModuleLoadData(&module, "preload_offload kernels"));
    VS_CHECK(cuModuleGetFunction(&fn_fill, module, "sim_fill_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_checksum, module, "sim_checksum_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_axpy, module, "sim_axpy_f32"));
    VS_CHECK(cuModuleGetFunction(&fn_add_struct, module, "sim_add_u32_struct"));
    VS_CHECK(cuModuleGetFunction(&fn_gather, module, "sim_gather_checksum"));
    VS_CHECK(cuModuleGetFunction(&fn_xor, module, "offload_xor_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_fill_f32, module, "offload_fill_f32"));

    for (size_t i = 0; i < scenario_count; i++) {
        if (strcmp(options.scenario, "all") != 0 && strcmp(options.scenario, scenarios[i].name) != 0)
            continue;
        unsigned long before = atomic_load(&mismatches);
        vs_test_set_phase(scenarios[i].name);
        scenarios[i].run();
        printf("preload_offload: scenario %s: %s\n", scenarios[i].name,
               atomic_load(&mismatches) == before ? "ok" : "MISMATCHES");
    }
    vs_test_set_phase("exit");
    VS_CHECK(cuModuleUnload(module));

    unsigned long failed = atomic_load(&mismatches);
    printf("preload_offload: %s: scenario %s, %u buffers x %u MiB, %u threads, %u streams, %u rounds, seed %" PRIu64
           ": %lu launches, %lu graph launches, %lu copies, %lu memsets, %lu checksums, %llu bytes read back "
           "and compared, %lu mismatches\n",
           failed == 0 ? "PASS" : "FAIL", options.scenario, options.buffers, options.mib, options.threads,
           options.streams, options.rounds, options.seed, atomic_load(&launches_done),
           atomic_load(&graph_launches_done), atomic_load(&copies_done), atomic_load(&memsets_done),
           atomic_load(&checksums_checked), atomic_load(&bytes_verified), failed);
    return failed == 0 ? 0 : 1;
}

/* preload_offload_clean.c: clean eviction never loses a write.
 *
 * At eviction the offload engine hashes an allocation's device bytes and,
 * when the hash equals that of the host copy it kept at the last restore,
 * drops the device memory without copying it back. A wrong "clean" verdict
 * silently loses every write made since that restore. This program makes
 * the writes such a verdict would miss, the smallest ones: one byte or one
 * word, at the first byte, the middle, the last byte, inside the last
 * (partial) 8-byte word and across a 2 MiB granule edge, through every way
 * a program writes device memory:
 *
 * - one-element memsets of each width, synchronous and asynchronous, and
 *   1 x 1 2-D memsets;
 * - 1- to 4-byte copies: `cuMemcpyHtoD`(`Async`), `cuMemcpy`(`Async`),
 *   `cuMemcpyDtoD`(`Async`) and `cuMemcpyPeerAsync` from another big
 *   buffer or from a small one,
 *   `cuMemcpy2D`(`Async`) of one row (host or device source), `cuMemcpy3D`;
 * - kernels: `sim_fill_u32` with n=1 at an interior pointer, `sim_copy` of
 *   1 to 4 bytes, `sim_add_u32_struct` with n=1 (its pointers inside a
 *   by-value struct), in every launch form;
 * - graphs, captured (`sim_fill_u32`) or built by hand (`sim_copy`), each
 *   launched twice.
 *
 * Besides writes that change a byte, some write exactly what is there (an
 * eviction after them may be clean), some change a word and then write the
 * original back (net unchanged), and some write the same bytes at the same
 * offset of two buffers. A change made before a buffer's read is undone
 * after it: the change, often a synchronous copy that lands in the host
 * copy of the evicted buffer, reaches the device with the restore, and the
 * undo makes the device bytes hash as the host copy did before the change,
 * which only a host copy's hash forgotten at that copy tells apart.
 *
 * Each round visits every buffer in a new order: a checksum kernel reads it
 * (so it is restored, and its host copy kept), and about half of the
 * buffers are written just before or just after that read. The limit is a
 * fraction of the working set, so each buffer is evicted a few buffers
 * later: cleanly when it was only read, with a copy when it was written.
 * Some asynchronous writes queue behind a busy kernel, so that the eviction
 * comes while they are still pending. At the end of each round every
 * buffer is read back whole and compared, byte for byte, with a host mirror
 * of what the program wrote; once all threads are done, the main thread
 * reads every buffer back once more.
 *
 *   preload_offload_clean [--buffers N] [--mib M] [--threads T] [--streams S]
 *                         [--rounds R] [--seed X] [--order random|cyclic]
 *                         [--write-every K]
 *
 * With `--order cyclic` every round visits the buffers in the same order,
 * and each buffer's write comes on the same side of its read (odd buffers
 * after it), so that its uses repeat every round: the learned policy then
 * plans the cycle, and one streamed buffer keeps a head of whole granules
 * on the device between uses (partial residency), so that the writes at
 * granule edges fall on both sides of its split.
 *
 * With `--write-every K` each buffer is written in one round of every K
 * (default 1: every round), so that most evictions are clean; the run then
 * checks every byte as always, but does not require every write path and
 * position to have been taken (too few writes for that).
 *
 * Each thread owns every T-th buffer and uses S non-blocking streams and
 * the legacy default stream; operations on one buffer are ordered with an
 * event, whatever stream they use, so the mirror is exact. Buffer sizes
 * cycle through M MiB, M MiB + 1, M MiB - 3, M MiB - 1 MiB + 12, M MiB +
 * 4102, 2 MiB + 7 and 2M MiB - 5.
 *
 * Entry point: `main`. Exit status: 0 when every byte matched; 1 at the
 * first mismatch (the round, the buffer, the offset, the expected and read
 * bytes, and the buffer's last writes are printed), a driver error, or a
 * write path that was never taken; 2 on a usage error.
 * check_clean_eviction.py runs it and checks the shim's exit summary.
 */
#include <cuda.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload_util.h"

#define CLEAN_MAX_THREADS 16
#define CLEAN_MAX_STREAMS 8
/* Checksums in flight per thread (the results buffer is small, never
 * evicted). */
#define CLEAN_RESULT_SLOTS 64
/* 8-byte slots of pinned and of small device staging memory per thread,
 * reused once the thread's streams are idle. */
#define CLEAN_STAGING_SLOTS 512
/* Writes remembered per buffer, printed with a mismatch. */
#define CLEAN_HISTORY 16
#define CLEAN_GRANULE ((size_t)2 << 20)

/* ------------------------------------------------------------------------
 * Write paths, modes and positions
 * ------------------------------------------------------------------------ */

/* name, what it is, bytes written (fewest, most), alignment of the offset */
#define CLEAN_PATHS(X)                                                                          \
    X(MEMSET_D8, "cuMemsetD8 1 element", 1, 1, 1)                                               \
    X(MEMSET_D8_ASYNC, "cuMemsetD8Async 1 element", 1, 1, 1)                                    \
    X(MEMSET_D16, "cuMemsetD16 1 element", 2, 2, 2)                                             \
    X(MEMSET_D16_ASYNC, "cuMemsetD16Async 1 element", 2, 2, 2)                                  \
    X(MEMSET_D32, "cuMemsetD32 1 element", 4, 4, 4)                                             \
    X(MEMSET_D32_ASYNC, "cuMemsetD32Async 1 element", 4, 4, 4)                                  \
    X(MEMSET_2D8, "cuMemsetD2D8 1 x 1", 1, 1, 1)                                                \
    X(MEMSET_2D32_ASYNC, "cuMemsetD2D32Async 1 x 1", 4, 4, 4)                                   \
    X(HTOD, "cuMemcpyHtoD", 1, 4, 1)                                                            \
    X(HTOD_ASYNC, "cuMemcpyHtoDAsync", 1, 4, 1)                                                 \
    X(MEMCPY, "cuMemcpy host to device", 1, 4, 1)                                               \
    X(MEMCPY_ASYNC, "cuMemcpyAsync host to device", 1, 4, 1)                                    \
    X(DTOD, "cuMemcpyDtoD", 1, 4, 1)                                                            \
    X(DTOD_ASYNC, "cuMemcpyDtoDAsync", 1, 4, 1)                                                 \
    X(PEER_ASYNC, "cuMemcpyPeerAsync within the context", 1, 4, 1)                              \
    X(COPY_2D, "cuMemcpy2D one row from the host", 1, 4, 1)                                     \
    X(COPY_2D_ASYNC, "cuMemcpy2DAsync one row from the host", 1, 4, 1)                          \
    X(COPY_2D_DTOD, "cuMemcpy2D one row device to device", 1, 4, 1)                             \
    X(COPY_3D, "cuMemcpy3D one row from the host", 1, 4, 1)                                     \
    X(KERNEL_WORD, "kernel sim_fill_u32 n=1", 4, 4, 4)                                          \
    X(KERNEL_BYTES, "kernel sim_copy", 1, 4, 1)                                                 \
    X(KERNEL_STRUCT, "kernel sim_add_u32_struct n=1", 4, 4, 4)                                  \
    X(GRAPH_CAPTURED, "captured graph (sim_fill_u32 n=1) launched twice", 4, 4, 4)              \
    X(GRAPH_BUILT, "hand-built graph (sim_copy) launched twice", 1, 4, 1)

typedef enum clean_path_e {
#define CLEAN_PATH_ENUM(id, text, fewest, most, align) PATH_##id,
    CLEAN_PATHS(CLEAN_PATH_ENUM)
#undef CLEAN_PATH_ENUM
        PATH_COUNT
} clean_path_t;

typedef struct clean_path_info_s {
    const char *name;
    const char *text;
    unsigned fewest, most, align;
} clean_path_info_t;

static const clean_path_info_t path_info[PATH_COUNT] = {
#define CLEAN_PATH_INFO(id, text_, fewest_, most_, align_) \
    {.name = #id, .text = text_, .fewest = fewest_, .most = most_, .align = align_},
    CLEAN_PATHS(CLEAN_PATH_INFO)
#undef CLEAN_PATH_INFO
};

/* Why a write was made. */
typedef enum clean_mode_e {
    MODE_CHANGE, /* new bytes */
    MODE_SAME,   /* the bytes already there */
    MODE_UNDO,   /* the bytes a change just replaced */
    MODE_TWIN,   /* the bytes and offset of a change just made to another buffer */
    MODE_COUNT
} clean_mode_t;

static const char *const mode_names[MODE_COUNT] = {"change", "same", "undo", "twin"};

typedef enum clean_position_e {
    POS_START,
    POS_MIDDLE,
    POS_LAST_BYTE,
    POS_LAST_PARTIAL_WORD, /* the last 8-byte word, partial unless the size is a multiple of 8 */
    POS_GRANULE_EDGE,
    POS_ANYWHERE,
    POS_COUNT
} clean_position_t;

static const char *const position_names[POS_COUNT] = {"start", "middle", "last byte", "last 8-byte word",
                                                      "2 MiB edge", "anywhere"};

/* ------------------------------------------------------------------------
 * Options, failure
 * ------------------------------------------------------------------------ */

typedef struct clean_options_s {
    unsigned buffers;
    unsigned mib;
    unsigned threads;
    unsigned streams;
    unsigned rounds;
    unsigned write_every; /* a buffer is written in one round of every write_every */
    uint64_t seed;
    bool cyclic; /* --order cyclic: the same order every round */
} clean_options_t;

static clean_options_t options = {
    .buffers = 24, .mib = 8, .threads = 4, .streams = 2, .rounds = 6, .seed = 1, .write_every = 1};

static CUcontext context;
static CUfunction fn_fill, fn_checksum, fn_add_struct, fn_copy, fn_spin;

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

static void rng_bytes(uint64_t *state, unsigned char *out, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++)
        out[i] = (unsigned char)rng_next(state);
}

/* ------------------------------------------------------------------------
 * Buffers and their mirrors
 * ------------------------------------------------------------------------ */

typedef struct clean_write_s {
    unsigned round;
    clean_path_t path;
    clean_mode_t mode;
    bool after_read;
    bool from_other_buffer;
    size_t offset;
    unsigned len;
    unsigned char before[4], after[4];
} clean_write_t;

/* A big (evictable) buffer and what it must hold. Only its owning thread
 * touches it until the threads are joined. Every operation records
 * `last_use` on its stream; an operation on another stream waits for that
 * first, so operations on one buffer run in program order. */
typedef struct clean_buffer_s {
    unsigned index;
    CUdeviceptr base;
    size_t bytes;
    unsigned char *mirror;
    CUevent last_use;
    CUstream last_stream;
    bool used;
    clean_write_t history[CLEAN_HISTORY];
    unsigned writes; /* made so far; the last CLEAN_HISTORY are in `history` */
} clean_buffer_t;

static clean_buffer_t *buffers;

/* Sizes not multiples of 2 MiB, of 8 or of 4, and a small and a large one
 * among them, so that one restore sometimes evicts several buffers at
 * once. */
#define CLEAN_SIZE_KINDS 7

static size_t buffer_size(unsigned index)
{
    size_t mib = (size_t)options.mib << 20;
    switch (index % CLEAN_SIZE_KINDS) {
    case 0:
        return mib;
    case 1:
        return mib + 1; /* one byte alone in the last granule */
    case 2:
        return mib - 3;
    case 3:
        return mib - ((size_t)1 << 20) + 12;
    case 4:
        return mib + 4096 + 6;
    case 5:
        return CLEAN_GRANULE + 7; /* the smallest evictable size is one granule */
    default:
        return 2 * mib - 5;
    }
}

static size_t largest_buffer_size(void)
{
    size_t largest = 0;
    for (unsigned i = 0; i < CLEAN_SIZE_KINDS; i++)
        largest = buffer_size(i) > largest ? buffer_size(i) : largest;
    return largest;
}

static void order_after_last_use(clean_buffer_t *b, CUstream stream)
{
    if (b->used && b->last_stream != stream)
        VS_CHECK(cuStreamWaitEvent(stream, b->last_use, 0));
}

static void note_use(clean_buffer_t *b, CUstream stream)
{
    VS_CHECK(cuEventRecord(b->last_use, stream));
    b->last_stream = stream;
    b->used = true;
}

static void print_history(const clean_buffer_t *b, size_t near)
{
    unsigned first = b->writes > CLEAN_HISTORY ? b->writes - CLEAN_HISTORY : 0;
    fprintf(stderr, "preload_offload_clean:   buffer %u's last %u writes (of %u), oldest first:\n", b->index,
            b->writes - first, b->writes);
    for (unsigned i = first; i < b->writes; i++) {
        const clean_write_t *h = &b->history[i % CLEAN_HISTORY];
        char before[16] = "", after[16] = "";
        for (unsigned k = 0; k < h->len; k++) {
            snprintf(before + 2 * k, sizeof before - 2 * k, "%02x", h->before[k]);
            snprintf(after + 2 * k, sizeof after - 2 * k, "%02x", h->after[k]);
        }
        bool hit = near >= h->offset && near < h->offset + h->len;
        fprintf(stderr,
                "preload_offload_clean:   %s round %u: %s (%s, %s the read%s) at offset %zu, %u bytes: %s -> %s\n",
                hit ? "*" : " ", h->round, path_info[h->path].text, mode_names[h->mode],
                h->after_read ? "after" : "before", h->from_other_buffer ? ", source another big buffer" : "",
                h->offset, h->len, before, after);
    }
}

/* Compares what was read back with the mirror; at the first difference,
 * prints it with the buffer's last writes and ends the process. */
static void compare_with_mirror(const clean_buffer_t *b, const unsigned char *got, const char *check, int round)
{
    if (memcmp(got, b->mirror, b->bytes) == 0)
        return;
    size_t first = 0, differing = 0;
    while (got[first] == b->mirror[first])
        first++;
    for (size_t i = first; i < b->bytes; i++)
        differing += got[i] != b->mirror[i];
    fprintf(stderr,
            "preload_offload_clean: MISMATCH check=%s round=%d buffer=%u (0x%llx, %zu bytes) offset=%zu "
            "expected=0x%02x got=0x%02x (%zu bytes differ)\n",
            check, round, b->index, (unsigned long long)b->base, b->bytes, first, b->mirror[first], got[first],
            differing);
    print_history(b, first);
    vs_test_exit_failed();
}

/* sim_checksum_u32 over the buffer's whole 32-bit words: sum of w[i] * (i + 1). */
static uint64_t mirror_checksum(const clean_buffer_t *b)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < b->bytes / 4; i++) {
        uint32_t word;
        memcpy(&word, b->mirror + 4 * i, 4);
        sum += (uint64_t)word * (i + 1);
    }
    return sum;
}

/* ------------------------------------------------------------------------
 * Launching
 * ------------------------------------------------------------------------ */

/* One launch's arguments, as the pointer array `kernelParams` wants and as
 * the packed buffer `extra` wants. `params` points into `packed`. */
typedef struct clean_args_s {
    _Alignas(8) unsigned char packed[64];
    size_t packed_size;
    void *params[6];
    unsigned count;
} clean_args_t;

static void args_push(clean_args_t *args, const void *value, size_t size, size_t align)
{
    size_t offset = (args->packed_size + align - 1) & ~(align - 1);
    memcpy(args->packed + offset, value, size);
    args->params[args->count++] = args->packed + offset;
    args->packed_size = offset + size;
}

typedef enum clean_launch_form_e {
    FORM_PARAMS,    /* cuLaunchKernel, kernelParams */
    FORM_EXTRA,     /* cuLaunchKernel, extra */
    FORM_EX_PARAMS, /* cuLaunchKernelEx, kernelParams */
    FORM_COUNT
} clean_launch_form_t;

static void launch(CUfunction fn, clean_args_t *args, CUstream stream, clean_launch_form_t form)
{
    size_t packed_size = (args->packed_size + 7) & ~(size_t)7;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args->packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                     CU_LAUNCH_PARAM_END};
    CUlaunchConfig config = {
        .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
        .hStream = stream,
    };
    switch (form) {
    case FORM_PARAMS:
        VS_CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, args->params, NULL));
        break;
    case FORM_EXTRA:
        VS_CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, NULL, extra));
        break;
    default:
        VS_CHECK(cuLaunchKernelEx(&config, fn, args->params, NULL));
        break;
    }
}

/* The by-value parameter of `sim_add_u32_struct` (out[i] = a[i] + b[i]):
 * pointers at 8, 24 and 32; the padding is a named member so that it is
 * zeroed (stack garbage there could look like a pointer to a launch-time
 * scan). */
typedef struct clean_add_args_s {
    uint64_t n;
    CUdeviceptr a;
    uint32_t tag;
    uint32_t tag_padding;
    CUdeviceptr b;
    CUdeviceptr out;
} clean_add_args_t;

_Static_assert(sizeof(clean_add_args_t) == 40, "sim_add_u32_struct takes a 40-byte struct");

/* ------------------------------------------------------------------------
 * Workers
 * ------------------------------------------------------------------------ */

/* What `write_one` did: where, through which path, the bytes before and
 * after. */
typedef struct clean_done_s {
    clean_path_t path;
    size_t offset;
    unsigned len;
    unsigned char original[4], written[4];
} clean_done_t;

typedef struct clean_pending_s {
    clean_buffer_t *buffer;
    uint64_t expected;
} clean_pending_t;

typedef struct clean_worker_s {
    unsigned id;
    uint64_t rng;
    pthread_t thread;
    CUstream streams[CLEAN_MAX_STREAMS];
    clean_buffer_t **owned;
    unsigned owned_count;
    unsigned round;
    CUdeviceptr results; /* CLEAN_RESULT_SLOTS checksums */
    clean_pending_t pending[CLEAN_RESULT_SLOTS];
    unsigned pending_count;
    CUdeviceptr staging;   /* small device memory: source bytes of device-side writes */
    unsigned char *pinned; /* pinned host memory: source bytes of asynchronous copies */
    unsigned staging_used, pinned_used;
    unsigned char *scratch; /* pageable, the largest buffer's size */
    unsigned path_cursor;
    /* A change made before a read, undone after it. */
    clean_buffer_t *undo_buffer;
    clean_done_t undo;
    /* What was done, summed by `main` after the join. */
    unsigned long writes[PATH_COUNT][MODE_COUNT];
    unsigned long unchanged_writes, partial_word_writes, granule_edge_writes, from_other_buffer;
    unsigned long positions[POS_COUNT];
    unsigned long checksums, delayed, bytes_compared;
} clean_worker_t;

static void sync_worker(clean_worker_t *w)
{
    for (unsigned s = 0; s < options.streams; s++)
        VS_CHECK(cuStreamSynchronize(w->streams[s]));
    VS_CHECK(cuStreamSynchronize(NULL));
}

/* Waits for the pending checksums and compares them; a wrong one has the
 * whole buffer read back, to name the bytes. */
static void flush_checksums(clean_worker_t *w)
{
    uint64_t got[CLEAN_RESULT_SLOTS];
    if (w->pending_count == 0)
        return;
    sync_worker(w);
    VS_CHECK(cuMemcpyDtoH_v2(got, w->results, w->pending_count * sizeof(uint64_t)));
    for (unsigned i = 0; i < w->pending_count; i++) {
        clean_buffer_t *b = w->pending[i].buffer;
        w->checksums++;
        if (got[i] == w->pending[i].expected)
            continue;
        fprintf(stderr,
                "preload_offload_clean: MISMATCH check=checksum round=%u buffer=%u (0x%llx, %zu bytes) "
                "expected=0x%016" PRIx64 " got=0x%016" PRIx64 "\n",
                w->round, b->index, (unsigned long long)b->base, b->bytes, w->pending[i].expected, got[i]);
        VS_CHECK(cuMemcpyDtoH_v2(w->scratch, b->base, b->bytes));
        compare_with_mirror(b, w->scratch, "readback-after-bad-checksum", (int)w->round);
        print_history(b, SIZE_MAX);
        vs_test_exit_failed();
    }
    w->pending_count = 0;
}

/* Staging slots are reused only once every stream of the thread is idle. */
static void staging_reserve(clean_worker_t *w)
{
    if (w->staging_used < CLEAN_STAGING_SLOTS && w->pinned_used < CLEAN_STAGING_SLOTS)
        return;
    flush_checksums(w);
    sync_worker(w);
    w->staging_used = w->pinned_used = 0;
}

static unsigned char *pinned_slot(clean_worker_t *w, const unsigned char *value, unsigned len)
{
    staging_reserve(w);
    unsigned char *slot = w->pinned + 8 * w->pinned_used++;
    memcpy(slot, value, len);
    return slot;
}

/* A slot of the thread's small device buffer holding `value`, written by a
 * synchronous copy (done when it returns, whatever stream reads it). */
static CUdeviceptr staging_slot(clean_worker_t *w, const unsigned char *value, unsigned len)
{
    staging_reserve(w);
    CUdeviceptr slot = w->staging + 8 * w->staging_used++;
    VS_CHECK(cuMemcpyHtoD_v2(slot, value, len));
    return slot;
}

static CUstream pick_worker_stream(clean_worker_t *w)
{
    return w->streams[rng_below(&w->rng, options.streams)];
}

/* One operation in four on the legacy default stream. */
static CUstream pick_any_stream(clean_worker_t *w)
{
    return rng_below(&w->rng, 4) == 0 ? NULL : pick_worker_stream(w);
}

/* Sometimes queues a busy kernel first, so that the write after it is
 * still pending when another buffer's restore evicts this one. */
static void maybe_delay(clean_worker_t *w, CUstream stream)
{
    if (stream == NULL || rng_below(&w->rng, 5) != 0)
        return;
    uint64_t ns = 20000 + rng_below(&w->rng, 80000);
    clean_args_t args = {0};
    args_push(&args, &ns, sizeof ns, 8);
    launch(fn_spin, &args, stream, FORM_PARAMS);
    w->delayed++;
}

/* Reads the buffer with a checksum kernel, compared at the next flush. */
static void read_checksum(clean_worker_t *w, clean_buffer_t *b)
{
    if (w->pending_count == CLEAN_RESULT_SLOTS)
        flush_checksums(w);
    unsigned slot = w->pending_count++;
    CUstream stream = pick_any_stream(w);
    CUdeviceptr src = b->base, out = w->results + slot * sizeof(uint64_t);
    uint64_t n = b->bytes / 4;
    clean_args_t args = {0};
    args_push(&args, &src, sizeof src, 8);
    args_push(&args, &n, sizeof n, 8);
    args_push(&args, &out, sizeof out, 8);
    order_after_last_use(b, stream);
    launch(fn_checksum, &args, stream, (clean_launch_form_t)rng_below(&w->rng, FORM_COUNT));
    note_use(b, stream);
    w->pending[slot] = (clean_pending_t){.buffer = b, .expected = mirror_checksum(b)};
}

/* A graph writing `len` bytes at `dst`: captured (sim_fill_u32, n=1,
 * `len` 4) or built by hand (sim_copy from a staging slot). Launched twice
 * (the second launch writes the same bytes again), then destroyed once it
 * has run, which lets go of the buffer it kept resident. */
static void write_with_graph(clean_worker_t *w, clean_buffer_t *b, CUdeviceptr dst, const unsigned char *value,
                             unsigned len, bool captured)
{
    CUstream stream = pick_worker_stream(w);
    CUgraph graph;
    CUgraphExec exec;
    clean_args_t args = {0};

    if (captured) {
        uint32_t word;
        uint64_t n = 1;
        memcpy(&word, value, 4);
        args_push(&args, &dst, sizeof dst, 8);
        args_push(&args, &n, sizeof n, 8);
        args_push(&args, &word, sizeof word, 4);
        order_after_last_use(b, stream); /* outside the capture: no outside event inside it */
        VS_CHECK(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        launch(fn_fill, &args, stream, (clean_launch_form_t)rng_below(&w->rng, FORM_COUNT));
        VS_CHECK(cuStreamEndCapture(stream, &graph));
    } else {
        CUdeviceptr src = staging_slot(w, value, len);
        uint64_t bytes = len;
        CUgraphNode node;
        args_push(&args, &dst, sizeof dst, 8);
        args_push(&args, &src, sizeof src, 8);
        args_push(&args, &bytes, sizeof bytes, 8);
        CUDA_KERNEL_NODE_PARAMS params = {
            .func = fn_copy, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
            .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1, .kernelParams = args.params,
        };
        VS_CHECK(cuGraphCreate(&graph, 0));
        VS_CHECK(cuGraphAddKernelNode_v2(&node, graph, NULL, 0, &params));
        order_after_last_use(b, stream);
    }
    VS_CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    VS_CHECK(cuGraphDestroy(graph));
    maybe_delay(w, stream);
    VS_CHECK(cuGraphLaunch(exec, stream));
    VS_CHECK(cuGraphLaunch(exec, stream));
    note_use(b, stream);
    VS_CHECK(cuStreamSynchronize(stream));
    VS_CHECK(cuGraphExecDestroy(exec));
}

/* Writes `value` (`len` bytes) at `offset` of `b` through `path`; the
 * device-to-device paths and the struct kernel read from `source` at
 * `source_offset` when it is not NULL (the caller computed `value` from its
 * mirror), else from a staging slot. Updates the mirror and the history. */
static void write_bytes(clean_worker_t *w, clean_buffer_t *b, clean_path_t path, size_t offset, unsigned len,
                        const unsigned char *value, clean_buffer_t *source, size_t source_offset, clean_mode_t mode,
                        bool after_read)
{
    CUdeviceptr dst = b->base + offset;
    CUstream stream = NULL;
    clean_args_t args = {0};
    uint16_t u16 = 0;
    uint32_t u32 = 0;
    memcpy(&u16, value, len >= 2 ? 2 : 1);
    memcpy(&u32, value, len >= 4 ? 4 : len);

    switch (path) {
    case PATH_MEMSET_D8:
    case PATH_MEMSET_D16:
    case PATH_MEMSET_D32:
    case PATH_MEMSET_2D8:
    case PATH_HTOD:
    case PATH_MEMCPY:
    case PATH_DTOD:
    case PATH_COPY_2D:
    case PATH_COPY_2D_DTOD:
    case PATH_COPY_3D:
        stream = NULL; /* synchronous: the legacy default stream */
        break;
    case PATH_GRAPH_CAPTURED:
    case PATH_GRAPH_BUILT:
        break; /* write_with_graph orders itself */
    case PATH_KERNEL_WORD:
    case PATH_KERNEL_BYTES:
    case PATH_KERNEL_STRUCT:
        stream = pick_any_stream(w);
        break;
    default:
        stream = pick_worker_stream(w);
        break;
    }
    if (path != PATH_GRAPH_CAPTURED && path != PATH_GRAPH_BUILT) {
        if (source != NULL)
            order_after_last_use(source, stream);
        order_after_last_use(b, stream);
        maybe_delay(w, stream);
    }

    switch (path) {
    case PATH_MEMSET_D8:
        VS_CHECK(cuMemsetD8_v2(dst, value[0], 1));
        break;
    case PATH_MEMSET_D8_ASYNC:
        VS_CHECK(cuMemsetD8Async(dst, value[0], 1, stream));
        break;
    case PATH_MEMSET_D16:
        VS_CHECK(cuMemsetD16_v2(dst, u16, 1));
        break;
    case PATH_MEMSET_D16_ASYNC:
        VS_CHECK(cuMemsetD16Async(dst, u16, 1, stream));
        break;
    case PATH_MEMSET_D32:
        VS_CHECK(cuMemsetD32_v2(dst, u32, 1));
        break;
    case PATH_MEMSET_D32_ASYNC:
        VS_CHECK(cuMemsetD32Async(dst, u32, 1, stream));
        break;
    case PATH_MEMSET_2D8:
        VS_CHECK(cuMemsetD2D8_v2(dst, 64, value[0], 1, 1));
        break;
    case PATH_MEMSET_2D32_ASYNC:
        VS_CHECK(cuMemsetD2D32Async(dst, 64, u32, 1, 1, stream));
        break;
    case PATH_HTOD:
        VS_CHECK(cuMemcpyHtoD_v2(dst, value, len));
        break;
    case PATH_HTOD_ASYNC:
        VS_CHECK(cuMemcpyHtoDAsync_v2(dst, pinned_slot(w, value, len), len, stream));
        break;
    case PATH_MEMCPY:
        VS_CHECK(cuMemcpy(dst, (CUdeviceptr)(uintptr_t)value, len));
        break;
    case PATH_MEMCPY_ASYNC:
        VS_CHECK(cuMemcpyAsync(dst, (CUdeviceptr)(uintptr_t)pinned_slot(w, value, len), len, stream));
        break;
    case PATH_DTOD:
    case PATH_DTOD_ASYNC:
    case PATH_PEER_ASYNC:
    case PATH_COPY_2D_DTOD: {
        CUdeviceptr src = source != NULL ? source->base + source_offset : staging_slot(w, value, len);
        if (path == PATH_DTOD) {
            VS_CHECK(cuMemcpyDtoD_v2(dst, src, len));
        } else if (path == PATH_DTOD_ASYNC) {
            VS_CHECK(cuMemcpyDtoDAsync_v2(dst, src, len, stream));
        } else if (path == PATH_PEER_ASYNC) {
            VS_CHECK(cuMemcpyPeerAsync(dst, context, src, context, len, stream));
        } else {
            CUDA_MEMCPY2D copy = {
                .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = src, .srcPitch = 64,
                .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dst, .dstPitch = 64,
                .WidthInBytes = len, .Height = 1,
            };
            VS_CHECK(cuMemcpy2D_v2(&copy));
        }
        break;
    }
    case PATH_COPY_2D:
    case PATH_COPY_2D_ASYNC: {
        /* Half of them address the byte by row and column from the base. */
        bool by_row = rng_below(&w->rng, 2) == 0;
        CUDA_MEMCPY2D copy = {
            .srcMemoryType = CU_MEMORYTYPE_HOST,
            .srcHost = path == PATH_COPY_2D ? (const void *)value : pinned_slot(w, value, len),
            .srcPitch = 64,
            .dstMemoryType = CU_MEMORYTYPE_DEVICE,
            .dstDevice = by_row ? b->base : dst,
            .dstXInBytes = by_row ? offset % 512 : 0,
            .dstY = by_row ? offset / 512 : 0,
            .dstPitch = 512,
            .WidthInBytes = len,
            .Height = 1,
        };
        if (path == PATH_COPY_2D)
            VS_CHECK(cuMemcpy2D_v2(&copy));
        else
            VS_CHECK(cuMemcpy2DAsync_v2(&copy, stream));
        break;
    }
    case PATH_COPY_3D: {
        CUDA_MEMCPY3D copy = {
            .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = value, .srcPitch = 64, .srcHeight = 1,
            .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = b->base, .dstXInBytes = offset % 4096,
            .dstY = offset / 4096, .dstPitch = 4096, .dstHeight = (b->bytes + 4095) / 4096,
            .WidthInBytes = len, .Height = 1, .Depth = 1,
        };
        VS_CHECK(cuMemcpy3D_v2(&copy));
        break;
    }
    case PATH_KERNEL_WORD: {
        uint64_t n = 1;
        args_push(&args, &dst, sizeof dst, 8);
        args_push(&args, &n, sizeof n, 8);
        args_push(&args, &u32, sizeof u32, 4);
        launch(fn_fill, &args, stream, (clean_launch_form_t)rng_below(&w->rng, FORM_COUNT));
        break;
    }
    case PATH_KERNEL_BYTES: {
        CUdeviceptr src = staging_slot(w, value, len);
        uint64_t bytes = len;
        args_push(&args, &dst, sizeof dst, 8);
        args_push(&args, &src, sizeof src, 8);
        args_push(&args, &bytes, sizeof bytes, 8);
        launch(fn_copy, &args, stream, (clean_launch_form_t)rng_below(&w->rng, FORM_COUNT));
        break;
    }
    case PATH_KERNEL_STRUCT: {
        /* out = a + b with a = out = the word; b is the other buffer's word,
         * or a staging word holding the difference to the wanted value. */
        CUdeviceptr addend;
        if (source != NULL) {
            addend = source->base + source_offset;
        } else {
            uint32_t current, delta;
            memcpy(&current, b->mirror + offset, 4);
            delta = u32 - current;
            addend = staging_slot(w, (const unsigned char *)&delta, 4);
        }
        clean_add_args_t add = {.n = 1, .a = dst, .tag = (uint32_t)rng_next(&w->rng), .b = addend, .out = dst};
        args_push(&args, &add, sizeof add, 8);
        launch(fn_add_struct, &args, stream, (clean_launch_form_t)rng_below(&w->rng, FORM_COUNT));
        break;
    }
    case PATH_GRAPH_CAPTURED:
    case PATH_GRAPH_BUILT:
        write_with_graph(w, b, dst, value, len, path == PATH_GRAPH_CAPTURED);
        break;
    default:
        fprintf(stderr, "preload_offload_clean: unknown write path %d\n", (int)path);
        vs_test_exit_failed();
    }
    if (path != PATH_GRAPH_CAPTURED && path != PATH_GRAPH_BUILT) {
        note_use(b, stream);
        if (source != NULL)
            note_use(source, stream);
    }

    clean_write_t *h = &b->history[b->writes++ % CLEAN_HISTORY];
    *h = (clean_write_t){.round = w->round, .path = path, .mode = mode, .after_read = after_read,
                         .from_other_buffer = source != NULL, .offset = offset, .len = len};
    memcpy(h->before, b->mirror + offset, len);
    memcpy(h->after, value, len);
    if (memcmp(b->mirror + offset, value, len) == 0)
        w->unchanged_writes++;
    memcpy(b->mirror + offset, value, len);
    w->writes[path][mode]++;
    w->from_other_buffer += source != NULL;
    if (b->bytes % 8 != 0 && offset + len > (b->bytes & ~(size_t)7))
        w->partial_word_writes++;
    /* Next to an edge between two 2 MiB granules: across it, or ending or
     * starting at it. */
    size_t end = offset + len;
    if (offset / CLEAN_GRANULE != (end - 1) / CLEAN_GRANULE || (end % CLEAN_GRANULE == 0 && end < b->bytes)
        || (offset % CLEAN_GRANULE == 0 && offset > 0))
        w->granule_edge_writes++;
}

/* Where a write of `len` bytes aligned to `align` goes in a buffer of
 * `size` bytes. */
static size_t place(uint64_t *rng, size_t size, clean_position_t position, unsigned len, unsigned align)
{
    size_t last = (size - len) & ~(size_t)(align - 1);
    size_t at;
    switch (position) {
    case POS_START:
        at = 0;
        break;
    case POS_MIDDLE:
        at = size / 2;
        break;
    case POS_LAST_BYTE:
        at = size - len;
        break;
    case POS_LAST_PARTIAL_WORD: {
        size_t word = size % 8 != 0 ? size & ~(size_t)7 : size - 8;
        size_t tail = size - word;
        at = tail >= len ? word + rng_below(rng, tail - len + 1) : size - len;
        break;
    }
    case POS_GRANULE_EDGE: {
        size_t edge = CLEAN_GRANULE * (1 + rng_below(rng, (size - 1) / CLEAN_GRANULE));
        at = edge - rng_below(rng, len + 1); /* ends at, straddles or starts at the edge */
        break;
    }
    default:
        at = rng_below(rng, size - len + 1);
        break;
    }
    at &= ~(size_t)(align - 1);
    return at > last ? last : at;
}

/* Another buffer of the thread, or NULL when it owns only one. */
static clean_buffer_t *pick_other(clean_worker_t *w, const clean_buffer_t *not_this)
{
    if (w->owned_count < 2)
        return NULL;
    for (;;) {
        clean_buffer_t *other = w->owned[rng_below(&w->rng, w->owned_count)];
        if (other != not_this)
            return other;
    }
}

static bool path_reads_source(clean_path_t path)
{
    return path == PATH_DTOD || path == PATH_DTOD_ASYNC || path == PATH_PEER_ASYNC || path == PATH_COPY_2D_DTOD
           || path == PATH_KERNEL_STRUCT;
}

/* One write of `mode` through the next path (or `forced`, when not
 * PATH_COUNT) at the next position: new bytes (MODE_CHANGE, sometimes taken
 * from another big buffer) or those already there (MODE_SAME). */
static clean_done_t write_one(clean_worker_t *w, clean_buffer_t *b, clean_mode_t mode, bool after_read,
                              clean_path_t forced)
{
    /* Each pass over the paths starts one position further, so that every
     * path meets every position. */
    unsigned cursor = w->path_cursor++;
    clean_path_t path = forced != PATH_COUNT ? forced : (clean_path_t)(cursor % PATH_COUNT);
    clean_position_t position = (clean_position_t)((cursor + cursor / PATH_COUNT) % POS_COUNT);
    const clean_path_info_t *info = &path_info[path];
    unsigned len = info->fewest + (unsigned)rng_below(&w->rng, info->most - info->fewest + 1);
    clean_done_t done = {.path = path, .offset = place(&w->rng, b->bytes, position, len, info->align), .len = len};
    clean_buffer_t *source = NULL;
    size_t source_offset = 0;

    memcpy(done.original, b->mirror + done.offset, len);
    memcpy(done.written, done.original, len);
    if (mode == MODE_CHANGE) {
        clean_buffer_t *other = path_reads_source(path) ? pick_other(w, b) : NULL;
        if (other != NULL && rng_below(&w->rng, 2) == 0) {
            source = other;
            source_offset = place(&w->rng, other->bytes, POS_ANYWHERE, len, info->align);
            if (path == PATH_KERNEL_STRUCT) {
                uint32_t word, addend;
                memcpy(&word, done.original, 4);
                memcpy(&addend, other->mirror + source_offset, 4);
                word += addend;
                memcpy(done.written, &word, 4);
            } else {
                memcpy(done.written, other->mirror + source_offset, len);
            }
        } else {
            rng_bytes(&w->rng, done.written, len);
            if (memcmp(done.written, done.original, len) == 0)
                done.written[0] ^= 0xA5;
        }
    }
    w->positions[position]++;
    write_bytes(w, b, path, done.offset, len, done.written, source, source_offset, mode, after_read);
    return done;
}

/* Paths that write any 1 to 4 bytes at any offset: those an undo may take
 * besides the change's own. */
static const clean_path_t undo_paths[] = {
    PATH_HTOD, PATH_HTOD_ASYNC, PATH_MEMCPY_ASYNC, PATH_DTOD, PATH_DTOD_ASYNC, PATH_COPY_2D,
    PATH_COPY_2D_ASYNC, PATH_COPY_3D, PATH_KERNEL_BYTES, PATH_GRAPH_BUILT,
};

/* Writes back the bytes a change replaced, through its path or another. */
static void write_undo(clean_worker_t *w, clean_buffer_t *b, const clean_done_t *change, bool after_read)
{
    clean_path_t path = change->path;
    if (rng_below(&w->rng, 2) == 0)
        path = undo_paths[rng_below(&w->rng, sizeof undo_paths / sizeof undo_paths[0])];
    write_bytes(w, b, path, change->offset, change->len, change->original, NULL, 0, MODE_UNDO, after_read);
}

/* What happens to one buffer before or after its read in a round. */
static void write_plan(clean_worker_t *w, clean_buffer_t *b, bool after_read)
{
    clean_done_t done;

    switch (rng_below(&w->rng, 10)) {
    case 0:
    case 1:
    case 2:
    case 3:
        return; /* only read: its eviction may be clean */
    case 4:
    case 5:
        write_one(w, b, MODE_CHANGE, after_read, PATH_COUNT);
        return;
    case 6:
        write_one(w, b, MODE_SAME, after_read, PATH_COUNT);
        return;
    case 7:
        /* A change, then the original bytes back: net unchanged. Before the
         * read, the undo waits for it: the change (often a synchronous copy,
         * which lands in the host copy of a buffer evicted since its last
         * read) then goes to the device with the restore, and the undo
         * brings the device bytes back to what they were when the host copy
         * was last hashed. */
        if (after_read) {
            done = write_one(w, b, MODE_CHANGE, after_read, PATH_COUNT);
            write_undo(w, b, &done, after_read);
        } else {
            w->undo_buffer = b;
            w->undo = write_one(w, b, MODE_CHANGE, after_read, rng_below(&w->rng, 2) == 0 ? PATH_HTOD : PATH_COUNT);
        }
        return;
    case 8: {
        /* The same bytes at the same offset of another buffer. */
        clean_buffer_t *other = pick_other(w, b);
        done = write_one(w, b, MODE_CHANGE, after_read, PATH_COUNT);
        if (other != NULL) {
            size_t at = done.offset + done.len <= other->bytes
                            ? done.offset
                            : place(&w->rng, other->bytes, POS_LAST_BYTE, done.len, path_info[done.path].align);
            write_bytes(w, other, done.path, at, done.len, done.written, NULL, 0, MODE_TWIN, after_read);
        }
        return;
    }
    default:
        /* Two changes through two paths. */
        write_one(w, b, MODE_CHANGE, after_read, PATH_COUNT);
        write_one(w, b, MODE_CHANGE, after_read, PATH_COUNT);
        return;
    }
}

static void verify_owned(clean_worker_t *w)
{
    flush_checksums(w);
    sync_worker(w);
    for (unsigned i = 0; i < w->owned_count; i++) {
        clean_buffer_t *b = w->owned[i];
        VS_CHECK(cuMemcpyDtoH_v2(w->scratch, b->base, b->bytes));
        compare_with_mirror(b, w->scratch, "round-readback", (int)w->round);
        w->bytes_compared += b->bytes;
    }
    w->staging_used = w->pinned_used = 0;
}

static void shuffle(clean_worker_t *w, clean_buffer_t **order, unsigned count)
{
    for (unsigned i = count; i > 1; i--) {
        unsigned j = (unsigned)rng_below(&w->rng, i);
        clean_buffer_t *t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

static void *worker_main(void *arg)
{
    clean_worker_t *w = arg;
    clean_buffer_t **order = malloc(w->owned_count * sizeof *order);
    if (order == NULL) {
        fprintf(stderr, "preload_offload_clean: out of host memory\n");
        vs_test_exit_failed();
    }
    VS_CHECK(cuCtxSetCurrent(context));
    for (w->round = 0; w->round < options.rounds; w->round++) {
        memcpy(order, w->owned, w->owned_count * sizeof *order);
        if (!options.cyclic)
            shuffle(w, order, w->owned_count);
        for (unsigned i = 0; i < w->owned_count; i++) {
            bool after_read = options.cyclic ? (order[i]->index & 1) != 0 : rng_below(&w->rng, 2) == 0;
            bool writes = (w->round + order[i]->index) % options.write_every == 0;
            if (writes && !after_read)
                write_plan(w, order[i], false);
            read_checksum(w, order[i]);
            if (w->undo_buffer != NULL) {
                write_undo(w, w->undo_buffer, &w->undo, true);
                w->undo_buffer = NULL;
            }
            if (writes && after_read)
                write_plan(w, order[i], true);
        }
        verify_owned(w);
    }
    free(order);
    return NULL;
}

/* ------------------------------------------------------------------------
 * Setup, the final check, main
 * ------------------------------------------------------------------------ */

/* Fills every buffer once: random bytes by a whole-buffer copy, or the fill
 * kernel over its words and a copy of its last few bytes. */
static void buffers_create(void)
{
    uint64_t rng = options.seed * 7919u + 11u;
    buffers = calloc(options.buffers, sizeof *buffers);
    if (buffers == NULL) {
        fprintf(stderr, "preload_offload_clean: out of host memory\n");
        exit(1);
    }
    for (unsigned i = 0; i < options.buffers; i++) {
        clean_buffer_t *b = &buffers[i];
        b->index = i;
        b->bytes = buffer_size(i);
        b->mirror = malloc(b->bytes);
        if (b->mirror == NULL) {
            fprintf(stderr, "preload_offload_clean: out of host memory for buffer %u's mirror\n", i);
            exit(1);
        }
        VS_CHECK(cuMemAlloc_v2(&b->base, b->bytes));
        VS_CHECK(cuEventCreate(&b->last_use, CU_EVENT_DISABLE_TIMING));
        if (i % 2 == 0) {
            rng_bytes(&rng, b->mirror, b->bytes);
            VS_CHECK(cuMemcpyHtoD_v2(b->base, b->mirror, b->bytes));
        } else {
            uint32_t seed = (uint32_t)rng_next(&rng);
            uint64_t words = b->bytes / 4;
            clean_args_t args = {0};
            args_push(&args, &b->base, sizeof b->base, 8);
            args_push(&args, &words, sizeof words, 8);
            args_push(&args, &seed, sizeof seed, 4);
            launch(fn_fill, &args, NULL, FORM_PARAMS);
            for (uint64_t k = 0; k < words; k++) {
                uint32_t word = seed ^ (uint32_t)(k * 2654435761u);
                memcpy(b->mirror + 4 * k, &word, 4);
            }
            size_t tail = b->bytes - 4 * words;
            if (tail > 0) {
                rng_bytes(&rng, b->mirror + 4 * words, tail);
                VS_CHECK(cuMemcpyHtoD_v2(b->base + 4 * words, b->mirror + 4 * words, tail));
            }
        }
        note_use(b, NULL);
    }
}

static void worker_setup(clean_worker_t *w, unsigned id)
{
    *w = (clean_worker_t){.id = id, .rng = options.seed * 1000003u + id * 7919u + 17u, .path_cursor = id * 5};
    for (unsigned s = 0; s < options.streams; s++)
        VS_CHECK(cuStreamCreate(&w->streams[s], CU_STREAM_NON_BLOCKING));
    w->owned = calloc(options.buffers, sizeof *w->owned);
    w->scratch = malloc(largest_buffer_size());
    if (w->owned == NULL || w->scratch == NULL) {
        fprintf(stderr, "preload_offload_clean: out of host memory\n");
        exit(1);
    }
    for (unsigned i = id; i < options.buffers; i += options.threads)
        w->owned[w->owned_count++] = &buffers[i];
    VS_CHECK(cuMemAlloc_v2(&w->results, CLEAN_RESULT_SLOTS * sizeof(uint64_t)));
    VS_CHECK(cuMemAlloc_v2(&w->staging, CLEAN_STAGING_SLOTS * 8));
    VS_CHECK(cuMemAllocHost_v2((void **)&w->pinned, CLEAN_STAGING_SLOTS * 8));
}

static void worker_teardown(clean_worker_t *w)
{
    for (unsigned s = 0; s < options.streams; s++)
        VS_CHECK(cuStreamDestroy_v2(w->streams[s]));
    VS_CHECK(cuMemFree_v2(w->results));
    VS_CHECK(cuMemFree_v2(w->staging));
    VS_CHECK(cuMemFreeHost(w->pinned));
    free(w->scratch);
    free(w->owned);
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--buffers N] [--mib M] [--threads T] [--streams S] [--rounds R] [--seed X]\n"
            "          [--order random|cyclic] [--write-every K]\n"
            "  M is at least 4 (every buffer must be evictable: 2 MiB or more)\n",
            argv0);
    exit(2);
}

static uint64_t parse_number(const char *argv0, const char *name, const char *value, uint64_t low, uint64_t high)
{
    char *end = NULL;
    unsigned long long number = value != NULL ? strtoull(value, &end, 0) : 0;
    if (value == NULL || *value == '\0' || *end != '\0' || number < low || number > high) {
        fprintf(stderr, "%s: %s needs a number from %" PRIu64 " to %" PRIu64 ", got %s\n", argv0, name, low, high,
                value != NULL ? value : "nothing");
        usage(argv0);
    }
    return number;
}

static void parse_options(int argc, char **argv)
{
    for (int i = 1; i < argc; i += 2) {
        const char *name = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(name, "--buffers") == 0)
            options.buffers = (unsigned)parse_number(argv[0], name, value, 2, 100000);
        else if (strcmp(name, "--mib") == 0)
            options.mib = (unsigned)parse_number(argv[0], name, value, 4, 1024);
        else if (strcmp(name, "--threads") == 0)
            options.threads = (unsigned)parse_number(argv[0], name, value, 1, CLEAN_MAX_THREADS);
        else if (strcmp(name, "--streams") == 0)
            options.streams = (unsigned)parse_number(argv[0], name, value, 1, CLEAN_MAX_STREAMS);
        else if (strcmp(name, "--rounds") == 0)
            options.rounds = (unsigned)parse_number(argv[0], name, value, 1, 100000);
        else if (strcmp(name, "--write-every") == 0)
            options.write_every = (unsigned)parse_number(argv[0], name, value, 1, 100000);
        else if (strcmp(name, "--seed") == 0)
            options.seed = parse_number(argv[0], name, value, 0, UINT64_MAX);
        else if (strcmp(name, "--order") == 0 && value != NULL
                 && (strcmp(value, "random") == 0 || strcmp(value, "cyclic") == 0))
            options.cyclic = strcmp(value, "cyclic") == 0;
        else
            usage(argv[0]);
    }
    if (options.threads > options.buffers) {
        fprintf(stderr, "%s: --threads %u is more than --buffers %u\n", argv[0], options.threads, options.buffers);
        usage(argv[0]);
    }
}

int main(int argc, char **argv)
{
    CUmodule module;
    clean_worker_t *workers;
    clean_worker_t total = {0};

    parse_options(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    context = preload_context();
    VS_CHECK(cuModuleLoadData(&module, "preload_offload_clean kernels"));
    VS_CHECK(cuModuleGetFunction(&fn_fill, module, "sim_fill_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_checksum, module, "sim_checksum_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_add_struct, module, "sim_add_u32_struct"));
    VS_CHECK(cuModuleGetFunction(&fn_copy, module, "sim_copy"));
    VS_CHECK(cuModuleGetFunction(&fn_spin, module, "sim_spin"));

    buffers_create();
    workers = calloc(options.threads, sizeof *workers);
    if (workers == NULL) {
        fprintf(stderr, "preload_offload_clean: out of host memory\n");
        return 1;
    }
    for (unsigned t = 0; t < options.threads; t++)
        worker_setup(&workers[t], t);
    for (unsigned t = 0; t < options.threads; t++) {
        if (pthread_create(&workers[t].thread, NULL, worker_main, &workers[t]) != 0) {
            fprintf(stderr, "preload_offload_clean: cannot start thread %u\n", t);
            return 1;
        }
    }
    for (unsigned t = 0; t < options.threads; t++)
        pthread_join(workers[t].thread, NULL);

    /* Once more from one thread, in the reverse order: every buffer evicted
     * and restored by other buffers' reads since its last write. */
    VS_CHECK(cuCtxSynchronize());
    unsigned char *scratch = malloc(largest_buffer_size());
    if (scratch == NULL) {
        fprintf(stderr, "preload_offload_clean: out of host memory\n");
        return 1;
    }
    for (unsigned i = options.buffers; i-- > 0;) {
        VS_CHECK(cuMemcpyDtoH_v2(scratch, buffers[i].base, buffers[i].bytes));
        compare_with_mirror(&buffers[i], scratch, "final-readback", -1);
        total.bytes_compared += buffers[i].bytes;
    }
    free(scratch);

    for (unsigned t = 0; t < options.threads; t++) {
        clean_worker_t *w = &workers[t];
        for (unsigned p = 0; p < PATH_COUNT; p++)
            for (unsigned m = 0; m < MODE_COUNT; m++)
                total.writes[p][m] += w->writes[p][m];
        for (unsigned p = 0; p < POS_COUNT; p++)
            total.positions[p] += w->positions[p];
        total.unchanged_writes += w->unchanged_writes;
        total.partial_word_writes += w->partial_word_writes;
        total.granule_edge_writes += w->granule_edge_writes;
        total.from_other_buffer += w->from_other_buffer;
        total.checksums += w->checksums;
        total.delayed += w->delayed;
        total.bytes_compared += w->bytes_compared;
        worker_teardown(w);
    }
    free(workers);
    for (unsigned i = 0; i < options.buffers; i++) {
        VS_CHECK(cuMemFree_v2(buffers[i].base));
        VS_CHECK(cuEventDestroy_v2(buffers[i].last_use));
        free(buffers[i].mirror);
    }
    free(buffers);
    VS_CHECK(cuModuleUnload(module));

    /* Every path must have been taken with a change, or the run proved
     * less than it claims. */
    unsigned long writes = 0;
    bool covered = total.unchanged_writes > 0 && total.partial_word_writes > 0 && total.granule_edge_writes > 0
                   && total.from_other_buffer > 0;
    for (unsigned m = 0; m < MODE_COUNT; m++) {
        unsigned long in_mode = 0;
        for (unsigned p = 0; p < PATH_COUNT; p++)
            in_mode += total.writes[p][m];
        covered = covered && in_mode > 0;
        writes += in_mode;
    }
    for (unsigned p = 0; p < PATH_COUNT; p++) {
        printf("preload_offload_clean: path %-16s change %4lu same %4lu undo %4lu twin %4lu  (%s)\n",
               path_info[p].name, total.writes[p][MODE_CHANGE], total.writes[p][MODE_SAME],
               total.writes[p][MODE_UNDO], total.writes[p][MODE_TWIN], path_info[p].text);
        if (total.writes[p][MODE_CHANGE] == 0) {
            fprintf(stderr, "preload_offload_clean: COVERAGE: path %s never wrote a change\n", path_info[p].name);
            covered = false;
        }
    }
    for (unsigned p = 0; p < POS_COUNT; p++) {
        printf("preload_offload_clean: position %-16s %lu writes\n", position_names[p], total.positions[p]);
        covered = covered && total.positions[p] > 0;
    }
    printf("preload_offload_clean: %s: %u buffers (%u MiB and odd sizes), %u threads x %u streams, %u rounds, seed "
           "%" PRIu64 ": %lu writes (%lu left the bytes as they were, %lu in a partial last 8-byte word, %lu at a "
           "2 MiB edge, %lu from another big buffer, %lu behind a busy kernel), %lu checksums, %lu bytes read back "
           "and compared\n",
           covered ? "PASS" : options.write_every > 1 ? "PASS (not every path: --write-every)" : "FAIL (coverage)",
           options.buffers, options.mib, options.threads, options.streams,
           options.rounds, options.seed, writes, total.unchanged_writes, total.partial_word_writes,
           total.granule_edge_writes, total.from_other_buffer, total.delayed, total.checksums,
           total.bytes_compared);
    return covered || options.write_every > 1 ? 0 : 1;
}

/* preload_offload_soak.c: many threads, many streams and thousands of live
 * allocations, allocated, freed and handed between threads while they run,
 * under a device limit far below the working set; every byte checked.
 *
 * An ordinary driver-API program that knows nothing of vramshim. Run under
 * the shim in offload mode it keeps hundreds of evictable allocations (at
 * least VRAMSHIM_MIN_EVICT, several sizes, some not a multiple of 2 MiB or
 * even of 4 bytes) and thousands of small ones (never evicted, but counted
 * against the limit) busy from every thread at once: kernels that write
 * (`sim_fill_u32`) and read (`sim_checksum_u32`, `sim_copy`), synchronous
 * and asynchronous copies in every direction and memsets of whole buffers
 * and of ranges of any alignment, on the thread's created streams (blocking
 * and non-blocking), on the legacy default stream and on the per-thread
 * default stream. Meanwhile each thread frees some of its buffers and
 * allocates them again, recreates its streams, and at every round hands a
 * few buffers to another thread.
 *
 * No buffer has a host mirror: each carries a model of its contents, a few
 * segments each filled by a generator (the fill kernel's formula with its
 * seed, a hash stream with its seed, a constant), shifted to where a copy
 * put it. Checksums computed on the device, partial and whole read-backs
 * are compared with what the model renders; at the end every buffer is read
 * back whole. Every buffer has one owner at a time, and operations on it
 * from different streams (or threads, after a hand-over) are ordered with
 * its last-use event: any difference is the shim's.
 *
 *   preload_offload_soak [--threads T] [--streams S] [--evictable N] [--small N]
 *                        [--rounds R] [--seed X] [--deadline SECONDS] [--check-spill-dir]
 *
 * `--check-spill-dir` (for the disk tier) checks that the directory
 * VRAMSHIM_SPILL_DIR names exists and that no file ever shows in it, during
 * the run and after every buffer was freed: spill files are created
 * unlinked. `--deadline` makes a hang print what
 * every thread was doing and fail, before the test runner kills it.
 *
 * Entry point: `main`. Exit status: 0 when everything matched, 1 on any
 * mismatch (each names the buffer, the check, the byte offset, what was
 * expected and read, and the buffer's last operations), driver error or
 * missed deadline, 2 on a usage error. Given `--seed`, every operation and
 * every byte written is the same from run to run, whatever the thread
 * timing: threads meet at a barrier between rounds, where buffers change
 * hands.
 */
#include <cuda.h>
#include <dirent.h>
#include <errno.h>
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vs_test.h"

#define SOAK_MAX_THREADS 64
#define SOAK_MAX_STREAMS 8
/* Segments of one buffer's model; an operation that would need more is
 * replaced by a write of the whole buffer. */
#define SOAK_MAX_SEGMENTS 8
/* Checksums in flight per thread (a 512-byte results buffer). */
#define SOAK_RESULT_SLOTS 64
/* Operations remembered per buffer, printed with a mismatch. */
#define SOAK_HISTORY 8
/* Mismatch lines printed at most (all are counted). */
#define SOAK_MAX_REPORTS 40
/* `sim_copy` copies byte by byte: keep its ranges short. */
#define SOAK_KERNEL_COPY_MAX (256u << 10)

/* The stream that NULL means in the calls this program makes. */
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define SOAK_DEFAULT_STREAM CU_STREAM_PER_THREAD
#else
#define SOAK_DEFAULT_STREAM CU_STREAM_LEGACY
#endif

/* ------------------------------------------------------------------------
 * Options, counters, failure reporting
 * ------------------------------------------------------------------------ */

typedef struct soak_options_s {
    unsigned threads;
    unsigned streams;
    unsigned evictable;
    unsigned small;
    unsigned rounds;
    uint64_t seed;
    unsigned deadline_s;
    const char *spill_dir; /* VRAMSHIM_SPILL_DIR, with --check-spill-dir */
} soak_options_t;

static soak_options_t options = {
    .threads = 16, .streams = 4, .evictable = 512, .small = 2000, .rounds = 6, .seed = 1,
};

static CUcontext context;
static CUfunction fn_fill, fn_checksum, fn_copy;

static _Atomic unsigned long mismatches;
static _Atomic unsigned reports_printed;
static _Atomic unsigned long launches_done, copies_done, memsets_done, checksums_checked, reallocations_done,
    handovers_done, streams_recreated;
static _Atomic unsigned long long bytes_verified;
static _Atomic bool finished;

static bool report_allowed(void)
{
    unsigned printed = atomic_fetch_add(&reports_printed, 1);
    if (printed == SOAK_MAX_REPORTS)
        fprintf(stderr, "preload_offload_soak: more mismatches follow; only the first %d are printed\n",
                SOAK_MAX_REPORTS);
    return printed < SOAK_MAX_REPORTS;
}

/* ------------------------------------------------------------------------
 * Deterministic randomness (splitmix64)
 * ------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rng_next(uint64_t *state)
{
    return mix64(*state += 0x9E3779B97F4A7C15ull);
}

static uint64_t rng_below(uint64_t *state, uint64_t bound)
{
    return bound == 0 ? 0 : rng_next(state) % bound;
}

/* ------------------------------------------------------------------------
 * The model of a buffer's contents
 * ------------------------------------------------------------------------ */

/* A generator is an endless stream of 32-bit words, little-endian. */
typedef enum soak_generator_e {
    GEN_FILL,  /* what sim_fill_u32 writes: seed ^ (k * 2654435761) */
    GEN_HASH,  /* what this program copies in from the host */
    GEN_CONST, /* a memset: `seed` in every word */
} soak_generator_t;

/* Bytes [first, end) of the buffer hold the generator's stream from its
 * byte `first - origin` on. A copy between buffers moves a segment and its
 * origin by the same distance; `first - origin` is never negative. */
typedef struct soak_segment_s {
    uint64_t first, end;
    int64_t origin;
    uint32_t seed;
    soak_generator_t generator;
} soak_segment_t;

static uint32_t generator_word(soak_generator_t generator, uint32_t seed, uint64_t k)
{
    switch (generator) {
    case GEN_FILL:
        return seed ^ (uint32_t)(k * 2654435761u);
    case GEN_HASH:
        return (uint32_t)mix64(((uint64_t)seed << 32) ^ k ^ 0xD1B54A32D192ED03ull);
    default:
        return seed;
    }
}

/* Writes `bytes` of the stream from stream byte `start` to `out`. */
static void generator_render(soak_generator_t generator, uint32_t seed, uint64_t start, size_t bytes,
                             unsigned char *out)
{
    uint32_t words[1024];
    uint64_t k = start / 4;
    size_t skip = start % 4;
    while (bytes > 0) {
        size_t count = (skip + bytes + 3) / 4;
        if (count > 1024)
            count = 1024;
        for (size_t i = 0; i < count; i++)
            words[i] = generator_word(generator, seed, k + i);
        size_t n = count * 4 - skip;
        if (n > bytes)
            n = bytes;
        memcpy(out, (unsigned char *)words + skip, n);
        out += n;
        bytes -= n;
        k += count;
        skip = 0;
    }
}

/* Two segments that continue one another become one. A constant's origin
 * matters only modulo 4. */
static bool segments_continue(const soak_segment_t *a, const soak_segment_t *b)
{
    if (a->end != b->first || a->generator != b->generator || a->seed != b->seed)
        return false;
    if (a->generator == GEN_CONST)
        return ((a->origin - b->origin) & 3) == 0;
    return a->origin == b->origin;
}

/* ------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------ */

/* One operation, remembered for mismatch reports. */
typedef struct soak_history_s {
    const char *op;
    unsigned thread, round;
    int stream; /* index in the thread's streams, or one of STREAM_TAG_* */
    uint64_t first, bytes;
    uint32_t seed;
} soak_history_t;

#define STREAM_TAG_NULL (-1)
#define STREAM_TAG_LEGACY (-2)
#define STREAM_TAG_PER_THREAD (-3)
#define STREAM_TAG_NONE (-4)

static const char *stream_name(int tag, char *buffer, size_t size)
{
    switch (tag) {
    case STREAM_TAG_NULL:
        return "NULL";
    case STREAM_TAG_LEGACY:
        return "CU_STREAM_LEGACY";
    case STREAM_TAG_PER_THREAD:
        return "CU_STREAM_PER_THREAD";
    case STREAM_TAG_NONE:
        return "none";
    default:
        snprintf(buffer, size, "created %d", tag);
        return buffer;
    }
}

/* A device buffer: one slot, reallocated (same class) during the run. Only
 * its owner touches it. Every operation records `last_use` on its stream;
 * an operation on another stream waits for that event first (always, after
 * a hand-over or when the stream was destroyed: `last_stream` then means
 * nothing to the new owner). */
typedef struct soak_buffer_s {
    unsigned index;
    bool evictable;
    unsigned generation; /* times reallocated */
    CUdeviceptr base;
    size_t bytes;
    soak_segment_t segments[SOAK_MAX_SEGMENTS];
    unsigned segment_count;
    CUevent last_use;
    CUstream last_stream;
    bool used;
    bool foreign;
    soak_history_t history[SOAK_HISTORY];
    unsigned history_next;
} soak_buffer_t;

static soak_buffer_t *buffers;
static unsigned buffer_count;
static size_t largest_buffer;

/* Evictable sizes: at the 2 MiB floor, just past it (odd: the tail is not
 * a whole word), 3 MiB and a few bytes, 4 MiB. Reserved: 2, 4, 4, 4 MiB. */
static const size_t evictable_sizes[] = {2u << 20, (2u << 20) + 4097, (3u << 20) + 12, 4u << 20};

static size_t pick_evictable_size(uint64_t *rng)
{
    return evictable_sizes[rng_below(rng, sizeof evictable_sizes / sizeof evictable_sizes[0])];
}

/* Small sizes: mostly under 64 KiB, a few up to 256 KiB, one in two
 * hundred just under the 2 MiB floor; any byte count. */
static size_t pick_small_size(uint64_t *rng)
{
    uint64_t roll = rng_below(rng, 200);
    if (roll == 0)
        return (2u << 20) - 1 - rng_below(rng, 64);
    if (roll < 17)
        return (64u << 10) + rng_below(rng, 192u << 10);
    if (roll < 100)
        return (4u << 10) + rng_below(rng, 60u << 10);
    return 1 + rng_below(rng, 4096);
}

static void history_push(soak_buffer_t *b, const char *op, unsigned thread, unsigned round, int stream,
                         uint64_t first, uint64_t bytes, uint32_t seed)
{
    b->history[b->history_next % SOAK_HISTORY] = (soak_history_t){
        .op = op, .thread = thread, .round = round, .stream = stream, .first = first, .bytes = bytes, .seed = seed,
    };
    b->history_next++;
}

static void history_print(const soak_buffer_t *b)
{
    unsigned count = b->history_next < SOAK_HISTORY ? b->history_next : SOAK_HISTORY;
    for (unsigned i = 0; i < count; i++) {
        const soak_history_t *h = &b->history[(b->history_next - count + i) % SOAK_HISTORY];
        char name[32];
        fprintf(stderr,
                "preload_offload_soak:   buffer %u op -%u: %s by thread %u in round %u on stream %s, bytes [%" PRIu64
                ", %" PRIu64 "), seed/other 0x%08x\n",
                b->index, count - i, h->op, h->thread, h->round, stream_name(h->stream, name, sizeof name), h->first,
                h->first + h->bytes, h->seed);
    }
    for (unsigned i = 0; i < b->segment_count; i++) {
        const soak_segment_t *s = &b->segments[i];
        fprintf(stderr,
                "preload_offload_soak:   buffer %u model: [%" PRIu64 ", %" PRIu64 ") generator %d seed 0x%08x origin "
                "%" PRId64 "\n",
                b->index, s->first, s->end, (int)s->generator, s->seed, s->origin);
    }
}

/* Writes the model's bytes [offset, offset + bytes) to `out`. */
static void model_render(const soak_buffer_t *b, uint64_t offset, size_t bytes, unsigned char *out)
{
    uint64_t end = offset + bytes;
    for (unsigned i = 0; i < b->segment_count; i++) {
        const soak_segment_t *s = &b->segments[i];
        uint64_t lo = s->first > offset ? s->first : offset, hi = s->end < end ? s->end : end;
        if (lo >= hi)
            continue;
        generator_render(s->generator, s->seed, (uint64_t)((int64_t)lo - s->origin), hi - lo, out + (lo - offset));
    }
}

/* Replaces bytes [first, end) of the model with `with` (segments already
 * inside that range, in order). False, with the model unchanged, when the
 * result would need more than SOAK_MAX_SEGMENTS. */
static bool model_write(soak_buffer_t *b, uint64_t first, uint64_t end, const soak_segment_t *with,
                        unsigned with_count)
{
    soak_segment_t next[2 * SOAK_MAX_SEGMENTS + 2];
    unsigned count = 0;
    bool placed = false;

    for (unsigned i = 0; i <= b->segment_count; i++) {
        const soak_segment_t *s = i < b->segment_count ? &b->segments[i] : NULL;
        if (!placed && (s == NULL || s->end > first)) {
            /* What is left of `s` before the range, then the new ones. */
            if (s != NULL && s->first < first) {
                next[count] = *s;
                next[count++].end = first;
            }
            for (unsigned k = 0; k < with_count; k++)
                next[count++] = with[k];
            placed = true;
        }
        if (s == NULL)
            break;
        if (s->end <= first)
            next[count++] = *s;
        else if (s->end > end) {
            next[count] = *s;
            if (next[count].first < end)
                next[count].first = end;
            count++;
        }
    }
    /* Merge what continues. */
    unsigned merged = 0;
    for (unsigned i = 0; i < count; i++) {
        if (next[i].first >= next[i].end)
            continue;
        if (merged > 0 && segments_continue(&next[merged - 1], &next[i]))
            next[merged - 1].end = next[i].end;
        else
            next[merged++] = next[i];
    }
    if (merged > SOAK_MAX_SEGMENTS)
        return false;
    memcpy(b->segments, next, merged * sizeof *next);
    b->segment_count = merged;
    return true;
}

/* The segments of `src` over [src_first, src_first + bytes), moved to
 * start at `dst_first`. Returns how many. */
static unsigned model_slice(const soak_buffer_t *src, uint64_t src_first, uint64_t bytes, uint64_t dst_first,
                            soak_segment_t *out)
{
    unsigned count = 0;
    int64_t shift = (int64_t)dst_first - (int64_t)src_first;
    for (unsigned i = 0; i < src->segment_count; i++) {
        const soak_segment_t *s = &src->segments[i];
        uint64_t lo = s->first > src_first ? s->first : src_first;
        uint64_t hi = s->end < src_first + bytes ? s->end : src_first + bytes;
        if (lo >= hi)
            continue;
        out[count++] = (soak_segment_t){
            .first = (uint64_t)((int64_t)lo + shift),
            .end = (uint64_t)((int64_t)hi + shift),
            .origin = s->origin + shift,
            .seed = s->seed,
            .generator = s->generator,
        };
    }
    return count;
}

/* Whether the model covers every byte (a fresh allocation covers none). */
static bool model_complete(const soak_buffer_t *b)
{
    uint64_t at = 0;
    for (unsigned i = 0; i < b->segment_count; i++) {
        if (b->segments[i].first != at)
            return false;
        at = b->segments[i].end;
    }
    return at == b->bytes;
}

/* ------------------------------------------------------------------------
 * Launches
 * ------------------------------------------------------------------------ */

/* One launch's arguments, as the pointer array `kernelParams` wants and as
 * the packed buffer `extra` wants. Never copied: `params` points into
 * `packed`. */
typedef struct soak_args_s {
    _Alignas(8) unsigned char packed[32];
    size_t packed_size;
    void *params[4];
    unsigned count;
} soak_args_t;

static void args_push(soak_args_t *args, const void *value, size_t size)
{
    size_t offset = (args->packed_size + size - 1) & ~(size - 1);
    memcpy(args->packed + offset, value, size);
    args->params[args->count++] = args->packed + offset;
    args->packed_size = offset + size;
}

/* cuLaunchKernel with kernelParams, with extra, or cuLaunchKernelEx. */
static void launch(CUfunction fn, soak_args_t *args, CUstream stream, unsigned form)
{
    size_t packed_size = (args->packed_size + 7) & ~(size_t)7;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args->packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                     CU_LAUNCH_PARAM_END};
    CUlaunchConfig config = {
        .gridDimX = 8, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 256, .blockDimY = 1, .blockDimZ = 1,
        .hStream = stream,
    };
    switch (form % 3) {
    case 0:
        VS_CHECK(cuLaunchKernel(fn, 8, 1, 1, 256, 1, 1, 0, stream, args->params, NULL));
        break;
    case 1:
        VS_CHECK(cuLaunchKernel(fn, 8, 1, 1, 256, 1, 1, 0, stream, NULL, extra));
        break;
    default:
        VS_CHECK(cuLaunchKernelEx(&config, fn, args->params, NULL));
        break;
    }
    atomic_fetch_add(&launches_done, 1);
}

/* ------------------------------------------------------------------------
 * Worker threads
 * ------------------------------------------------------------------------ */

typedef struct soak_pending_check_s {
    soak_buffer_t *buffer;
    unsigned generation;
    uint64_t first_word, words;
    uint64_t expected;
} soak_pending_check_t;

/* One thread: its streams, the buffers it owns now, a small device buffer
 * its checksums land in, host staging, and the buffers handed to it. */
typedef struct soak_worker_s {
    unsigned id;
    uint64_t rng;
    pthread_t thread;
    CUstream streams[SOAK_MAX_STREAMS];
    soak_buffer_t **owned;
    unsigned owned_count;
    CUdeviceptr results;
    soak_pending_check_t pending[SOAK_RESULT_SLOTS];
    unsigned pending_count;
    unsigned char *staging;  /* pageable: synchronous copies */
    unsigned char *expected; /* pageable: what the model renders */
    unsigned char *pinned;   /* cuMemAllocHost: asynchronous copies */
    CUevent pinned_free;     /* recorded after the last asynchronous copy reading `pinned` */
    bool pinned_busy;
    unsigned round;
    /* Handed to this thread in round r, in inbox[r % 2], taken at the start
     * of round r + 1 (under inbox_lock). Two, because a fast thread may hand
     * over in round r + 1 before this one has taken what round r brought. */
    pthread_mutex_t inbox_lock;
    soak_buffer_t **inbox[2];
    unsigned inbox_count[2];
    /* For the watchdog. */
    _Atomic(const char *) doing;
    _Atomic unsigned progress_round;
    _Atomic unsigned long operations;
} soak_worker_t;

static soak_worker_t *workers;
static pthread_barrier_t round_barrier;

/* Picks the stream for an operation: mostly the thread's own streams, now
 * and then the legacy stream (as NULL or by name) or the thread's
 * per-thread default stream. */
static CUstream pick_stream(soak_worker_t *w, int *tag)
{
    uint64_t roll = rng_below(&w->rng, 16);
    if (roll == 0) {
        *tag = STREAM_TAG_NULL;
        return NULL;
    }
    if (roll == 1) {
        *tag = STREAM_TAG_LEGACY;
        return CU_STREAM_LEGACY;
    }
    if (roll == 2) {
        *tag = STREAM_TAG_PER_THREAD;
        return CU_STREAM_PER_THREAD;
    }
    *tag = (int)rng_below(&w->rng, options.streams);
    return w->streams[*tag];
}

static CUstream stream_canonical(CUstream stream)
{
    return stream == NULL ? SOAK_DEFAULT_STREAM : stream;
}

/* Makes `stream`'s next operation wait for the buffer's last one. */
static void order_after_last_use(soak_buffer_t *b, CUstream stream)
{
    if (b->used && (b->foreign || stream_canonical(b->last_stream) != stream_canonical(stream)))
        VS_CHECK(cuStreamWaitEvent(stream, b->last_use, 0));
}

static void note_use(soak_buffer_t *b, CUstream stream)
{
    VS_CHECK(cuEventRecord(b->last_use, stream));
    b->last_stream = stream;
    b->used = true;
    b->foreign = false;
}

/* `pinned` may be written (or read) again once the copies reading it are
 * over. */
static void pinned_acquire(soak_worker_t *w)
{
    if (w->pinned_busy)
        VS_CHECK(cuEventSynchronize(w->pinned_free));
    w->pinned_busy = false;
}

static void sync_worker_streams(soak_worker_t *w)
{
    for (unsigned s = 0; s < options.streams; s++)
        VS_CHECK(cuStreamSynchronize(w->streams[s]));
    VS_CHECK(cuStreamSynchronize(CU_STREAM_LEGACY));
    VS_CHECK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
}

static void buffer_write_whole(soak_worker_t *w, soak_buffer_t *b);

/* Compares `got` (bytes [offset, offset + bytes) of `b`) with the model.
 * On a difference, reports the first differing bytes and the buffer's
 * history, then rewrites the buffer whole so that later checks mean
 * something again. */
static bool compare_with_model(soak_worker_t *w, soak_buffer_t *b, uint64_t offset, const unsigned char *got,
                               size_t bytes, const char *check)
{
    model_render(b, offset, bytes, w->expected);
    if (memcmp(w->expected, got, bytes) == 0) {
        atomic_fetch_add(&bytes_verified, bytes);
        return true;
    }
    atomic_fetch_add(&mismatches, 1);
    size_t differing = 0, first = bytes;
    for (size_t i = 0; i < bytes; i++) {
        if (w->expected[i] != got[i]) {
            differing++;
            if (first == bytes)
                first = i;
        }
    }
    if (report_allowed()) {
        size_t shown = bytes - first < 8 ? bytes - first : 8;
        char want_hex[17] = "", seen_hex[17] = "";
        for (size_t i = 0; i < shown; i++) {
            snprintf(want_hex + 2 * i, 3, "%02x", w->expected[first + i]);
            snprintf(seen_hex + 2 * i, 3, "%02x", got[first + i]);
        }
        fprintf(stderr,
                "preload_offload_soak: MISMATCH check=%s thread=%u round=%u buffer=%u (%s, %zu bytes, generation %u, "
                "0x%llx) offset=%" PRIu64 " expected=%s got=%s (%zu of %zu bytes differ in [%" PRIu64 ", %" PRIu64
                "))\n",
                check, w->id, w->round, b->index, b->evictable ? "evictable" : "small", b->bytes, b->generation,
                (unsigned long long)b->base, offset + first, want_hex, seen_hex, differing, bytes, offset,
                offset + bytes);
        history_print(b);
    }
    buffer_write_whole(w, b);
    return false;
}

/* Reads the whole buffer back, synchronously or through pinned memory on a
 * stream, and compares it with the model. */
static void verify_buffer(soak_worker_t *w, soak_buffer_t *b, const char *check)
{
    if (rng_below(&w->rng, 2) == 0) {
        order_after_last_use(b, NULL);
        VS_CHECK(cuMemcpyDtoH(w->staging, b->base, b->bytes));
        note_use(b, NULL);
        history_push(b, "verify-dtoh", w->id, w->round, STREAM_TAG_NULL, 0, b->bytes, 0);
        compare_with_model(w, b, 0, w->staging, b->bytes, check);
    } else {
        int tag = (int)rng_below(&w->rng, options.streams);
        CUstream stream = w->streams[tag];
        pinned_acquire(w);
        order_after_last_use(b, stream);
        VS_CHECK(cuMemcpyDtoHAsync(w->pinned, b->base, b->bytes, stream));
        note_use(b, stream);
        history_push(b, "verify-dtoh-async", w->id, w->round, tag, 0, b->bytes, 0);
        VS_CHECK(cuStreamSynchronize(stream));
        compare_with_model(w, b, 0, w->pinned, b->bytes, check);
    }
    atomic_fetch_add(&copies_done, 1);
}

/* Waits for the pending checksums, reads them back and compares. A wrong
 * checksum also reads the whole buffer back, to say which bytes differ. */
static void flush_checksums(soak_worker_t *w)
{
    if (w->pending_count == 0)
        return;
    uint64_t got[SOAK_RESULT_SLOTS];
    atomic_store(&w->doing, "flush-checksums");
    sync_worker_streams(w);
    VS_CHECK(cuMemcpyDtoH(got, w->results, w->pending_count * sizeof(uint64_t)));
    atomic_fetch_add(&copies_done, 1);
    unsigned count = w->pending_count;
    w->pending_count = 0;
    for (unsigned i = 0; i < count; i++) {
        const soak_pending_check_t *c = &w->pending[i];
        atomic_fetch_add(&checksums_checked, 1);
        if (got[i] == c->expected)
            continue;
        atomic_fetch_add(&mismatches, 1);
        soak_buffer_t *b = c->buffer;
        if (report_allowed())
            fprintf(stderr,
                    "preload_offload_soak: MISMATCH check=checksum thread=%u round=%u buffer=%u (%s, %zu bytes, "
                    "generation %u of %u, 0x%llx) words [%" PRIu64 ", %" PRIu64 ") expected=0x%016" PRIx64
                    " got=0x%016" PRIx64 "\n",
                    w->id, w->round, b->index, b->evictable ? "evictable" : "small", b->bytes, c->generation,
                    b->generation, (unsigned long long)b->base, c->first_word, c->first_word + c->words, c->expected,
                    got[i]);
        /* Reallocated since: nothing more to learn from it. */
        if (c->generation == b->generation)
            verify_buffer(w, b, "readback-after-bad-checksum");
    }
}

/* ------------------------------------------------------------------------
 * Operations on one buffer, each with its model update
 * ------------------------------------------------------------------------ */

/* A random word range: the whole buffer half the time. */
static void pick_word_range(soak_worker_t *w, const soak_buffer_t *b, uint64_t *first, uint64_t *count)
{
    uint64_t words = b->bytes / 4;
    if (words == 0 || rng_below(&w->rng, 2) == 0) {
        *first = 0;
        *count = words;
        return;
    }
    *first = rng_below(&w->rng, words);
    *count = 1 + rng_below(&w->rng, words - *first);
}

/* A random byte range of any alignment: the whole buffer a third of the
 * time. */
static void pick_byte_range(soak_worker_t *w, uint64_t bytes, uint64_t *first, uint64_t *count)
{
    if (rng_below(&w->rng, 3) == 0) {
        *first = 0;
        *count = bytes;
        return;
    }
    *first = rng_below(&w->rng, bytes);
    *count = 1 + rng_below(&w->rng, bytes - *first);
}

/* sim_fill_u32 over words [first, first + count). */
static bool op_fill(soak_worker_t *w, soak_buffer_t *b, CUstream stream, int tag, uint64_t first, uint64_t count)
{
    uint32_t seed = (uint32_t)rng_next(&w->rng);
    soak_segment_t s = {.first = first * 4, .end = (first + count) * 4, .origin = (int64_t)first * 4, .seed = seed,
                        .generator = GEN_FILL};
    if (count == 0 || !model_write(b, s.first, s.end, &s, 1))
        return false;
    CUdeviceptr dst = b->base + first * 4;
    soak_args_t args = {0};
    args_push(&args, &dst, sizeof dst);
    args_push(&args, &count, sizeof count);
    args_push(&args, &seed, sizeof seed);
    order_after_last_use(b, stream);
    launch(fn_fill, &args, stream, (unsigned)rng_below(&w->rng, 3));
    note_use(b, stream);
    history_push(b, "fill", w->id, w->round, tag, s.first, s.end - s.first, seed);
    return true;
}

/* Bytes [first, first + count) from the host, synchronously from pageable
 * memory or asynchronously from pinned memory. */
static bool op_copy_in(soak_worker_t *w, soak_buffer_t *b, CUstream stream, int tag, uint64_t first, uint64_t count,
                       bool async)
{
    uint32_t seed = (uint32_t)rng_next(&w->rng);
    soak_segment_t s = {.first = first, .end = first + count, .origin = (int64_t)first, .seed = seed,
                        .generator = GEN_HASH};
    if (count == 0 || !model_write(b, s.first, s.end, &s, 1))
        return false;
    if (!async) {
        generator_render(GEN_HASH, seed, 0, count, w->staging);
        order_after_last_use(b, NULL);
        VS_CHECK(cuMemcpyHtoD(b->base + first, w->staging, count));
        note_use(b, NULL);
        history_push(b, "htod", w->id, w->round, STREAM_TAG_NULL, first, count, seed);
    } else {
        pinned_acquire(w);
        generator_render(GEN_HASH, seed, 0, count, w->pinned);
        order_after_last_use(b, stream);
        VS_CHECK(cuMemcpyHtoDAsync(b->base + first, w->pinned, count, stream));
        note_use(b, stream);
        VS_CHECK(cuEventRecord(w->pinned_free, stream));
        w->pinned_busy = true;
        history_push(b, "htod-async", w->id, w->round, tag, first, count, seed);
    }
    atomic_fetch_add(&copies_done, 1);
    return true;
}

/* Bytes [first, first + count) to the host, compared with the model. */
static void op_copy_out(soak_worker_t *w, soak_buffer_t *b, CUstream stream, int tag, uint64_t first,
                        uint64_t count, bool async)
{
    if (!async) {
        order_after_last_use(b, NULL);
        VS_CHECK(cuMemcpyDtoH(w->staging, b->base + first, count));
        note_use(b, NULL);
        history_push(b, "dtoh", w->id, w->round, STREAM_TAG_NULL, first, count, 0);
        atomic_fetch_add(&copies_done, 1);
        compare_with_model(w, b, first, w->staging, count, "dtoh");
    } else {
        pinned_acquire(w);
        order_after_last_use(b, stream);
        VS_CHECK(cuMemcpyDtoHAsync(w->pinned, b->base + first, count, stream));
        note_use(b, stream);
        history_push(b, "dtoh-async", w->id, w->round, tag, first, count, 0);
        VS_CHECK(cuStreamSynchronize(stream));
        atomic_fetch_add(&copies_done, 1);
        compare_with_model(w, b, first, w->pinned, count, "dtoh-async");
    }
}

/* Bytes from `src` to `dst` (another buffer of this thread): a copy,
 * synchronous or asynchronous, or `sim_copy`, a kernel with both pointers
 * in its parameters. */
static bool op_copy_between(soak_worker_t *w, soak_buffer_t *dst, soak_buffer_t *src, CUstream stream, int tag,
                            unsigned how)
{
    uint64_t dst_first, count;
    pick_byte_range(w, dst->bytes, &dst_first, &count);
    if (count > src->bytes)
        count = src->bytes;
    if (how == 2 && count > SOAK_KERNEL_COPY_MAX)
        count = SOAK_KERNEL_COPY_MAX;
    uint64_t src_first = rng_below(&w->rng, src->bytes - count + 1);
    soak_segment_t slice[SOAK_MAX_SEGMENTS];
    unsigned slice_count = model_slice(src, src_first, count, dst_first, slice);
    if (!model_write(dst, dst_first, dst_first + count, slice, slice_count))
        return false;
    static const char *const names[] = {"dtod-from", "dtod-async-from", "kernel-copy-from"};
    static const char *const source_names[] = {"dtod-to", "dtod-async-to", "kernel-copy-to"};
    CUstream where = how == 0 ? NULL : stream;
    int where_tag = how == 0 ? STREAM_TAG_NULL : tag;
    order_after_last_use(dst, where);
    order_after_last_use(src, where);
    if (how == 0) {
        VS_CHECK(cuMemcpyDtoD(dst->base + dst_first, src->base + src_first, count));
        atomic_fetch_add(&copies_done, 1);
    } else if (how == 1) {
        VS_CHECK(cuMemcpyDtoDAsync(dst->base + dst_first, src->base + src_first, count, stream));
        atomic_fetch_add(&copies_done, 1);
    } else {
        CUdeviceptr d = dst->base + dst_first, s = src->base + src_first;
        soak_args_t args = {0};
        args_push(&args, &d, sizeof d);
        args_push(&args, &s, sizeof s);
        args_push(&args, &count, sizeof count);
        launch(fn_copy, &args, stream, (unsigned)rng_below(&w->rng, 3));
    }
    note_use(dst, where);
    note_use(src, where);
    history_push(dst, names[how], w->id, w->round, where_tag, dst_first, count, src->index);
    history_push(src, source_names[how], w->id, w->round, where_tag, src_first, count, dst->index);
    return true;
}

/* A 32-bit memset of a word range or an 8-bit memset of a byte range,
 * synchronous or asynchronous. */
static bool op_memset(soak_worker_t *w, soak_buffer_t *b, CUstream stream, int tag, bool wide, bool async)
{
    uint64_t first, count;
    uint32_t value = (uint32_t)rng_next(&w->rng);
    soak_segment_t s = {.generator = GEN_CONST};
    if (wide) {
        pick_word_range(w, b, &first, &count);
        s.first = first * 4;
        s.end = (first + count) * 4;
        s.origin = 0;
        s.seed = value;
    } else {
        pick_byte_range(w, b->bytes, &first, &count);
        value &= 0xff;
        s.first = first;
        s.end = first + count;
        s.origin = 0;
        s.seed = value * 0x01010101u;
    }
    if (count == 0 || !model_write(b, s.first, s.end, &s, 1))
        return false;
    CUstream where = async ? stream : NULL;
    order_after_last_use(b, where);
    if (wide && async)
        VS_CHECK(cuMemsetD32Async(b->base + first * 4, value, count, stream));
    else if (wide)
        VS_CHECK(cuMemsetD32(b->base + first * 4, value, count));
    else if (async)
        VS_CHECK(cuMemsetD8Async(b->base + first, (unsigned char)value, count, stream));
    else
        VS_CHECK(cuMemsetD8(b->base + first, (unsigned char)value, count));
    note_use(b, where);
    history_push(b, wide ? (async ? "memset32-async" : "memset32") : (async ? "memset8-async" : "memset8"), w->id,
                 w->round, async ? tag : STREAM_TAG_NULL, s.first, s.end - s.first, value);
    atomic_fetch_add(&memsets_done, 1);
    return true;
}

/* Queues a checksum of a word range into the thread's results buffer,
 * compared at the next flush with what the model holds now. */
static void op_checksum(soak_worker_t *w, soak_buffer_t *b, CUstream stream, int tag)
{
    uint64_t first, count;
    pick_word_range(w, b, &first, &count);
    if (count == 0)
        return;
    if (w->pending_count == SOAK_RESULT_SLOTS)
        flush_checksums(w);
    unsigned slot = w->pending_count++;
    CUdeviceptr src = b->base + first * 4, out = w->results + slot * sizeof(uint64_t);
    soak_args_t args = {0};
    args_push(&args, &src, sizeof src);
    args_push(&args, &count, sizeof count);
    args_push(&args, &out, sizeof out);
    order_after_last_use(b, stream);
    launch(fn_checksum, &args, stream, (unsigned)rng_below(&w->rng, 3));
    note_use(b, stream);
    history_push(b, "checksum", w->id, w->round, tag, first * 4, count * 4, slot);
    model_render(b, first * 4, count * 4, w->expected);
    const uint32_t *words = (const uint32_t *)(const void *)w->expected;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < count; i++)
        sum += (uint64_t)words[i] * (i + 1);
    w->pending[slot] = (soak_pending_check_t){
        .buffer = b, .generation = b->generation, .first_word = first, .words = count, .expected = sum,
    };
}

/* Gives the whole buffer known contents: a fill kernel (and a memset of
 * the odd tail), a copy from the host, or a memset. Every fresh allocation
 * starts with one, on a random stream. */
static void buffer_write_whole(soak_worker_t *w, soak_buffer_t *b)
{
    int tag;
    CUstream stream = pick_stream(w, &tag);
    uint64_t words = b->bytes / 4;
    switch (rng_below(&w->rng, 4)) {
    case 0:
        if (words > 0)
            op_fill(w, b, stream, tag, 0, words);
        if (b->bytes % 4 != 0 || words == 0) {
            uint32_t value = (uint32_t)rng_next(&w->rng) & 0xff;
            soak_segment_t s = {.first = words * 4, .end = b->bytes, .seed = value * 0x01010101u,
                                .generator = GEN_CONST};
            (void)model_write(b, s.first, s.end, &s, 1);
            order_after_last_use(b, stream);
            VS_CHECK(cuMemsetD8Async(b->base + words * 4, (unsigned char)value, b->bytes - words * 4, stream));
            note_use(b, stream);
            history_push(b, "memset8-tail-async", w->id, w->round, tag, s.first, s.end - s.first, value);
            atomic_fetch_add(&memsets_done, 1);
        }
        break;
    case 1:
        (void)op_copy_in(w, b, stream, tag, 0, b->bytes, false);
        break;
    case 2:
        (void)op_copy_in(w, b, stream, tag, 0, b->bytes, true);
        break;
    default: {
        uint32_t value = (uint32_t)rng_next(&w->rng) & 0xff;
        soak_segment_t s = {.first = 0, .end = b->bytes, .seed = value * 0x01010101u, .generator = GEN_CONST};
        (void)model_write(b, 0, b->bytes, &s, 1);
        order_after_last_use(b, stream);
        VS_CHECK(cuMemsetD8Async(b->base, (unsigned char)value, b->bytes, stream));
        note_use(b, stream);
        history_push(b, "memset8-whole-async", w->id, w->round, tag, 0, b->bytes, value);
        atomic_fetch_add(&memsets_done, 1);
        break;
    }
    }
    if (!model_complete(b)) {
        fprintf(stderr, "preload_offload_soak: internal error: buffer %u not covered after a whole write\n",
                b->index);
        exit(1);
    }
}

static void buffer_allocate(soak_worker_t *w, soak_buffer_t *b)
{
    b->bytes = b->evictable ? pick_evictable_size(&w->rng) : pick_small_size(&w->rng);
    VS_CHECK(cuMemAlloc_v2(&b->base, b->bytes));
    b->segment_count = 0;
    b->used = false;
    b->foreign = false;
    history_push(b, "alloc", w->id, w->round, STREAM_TAG_NONE, 0, b->bytes, b->generation);
    buffer_write_whole(w, b);
}

/* Frees the buffer while its last operations may still run, and allocates
 * it again (same class, maybe another size). */
static void buffer_reallocate(soak_worker_t *w, soak_buffer_t *b)
{
    VS_CHECK(cuMemFree_v2(b->base));
    b->generation++;
    buffer_allocate(w, b);
    atomic_fetch_add(&reallocations_done, 1);
}

/* Another buffer of this thread, or NULL. */
static soak_buffer_t *pick_other(soak_worker_t *w, const soak_buffer_t *not_this)
{
    if (w->owned_count < 2)
        return NULL;
    for (;;) {
        soak_buffer_t *other = w->owned[rng_below(&w->rng, w->owned_count)];
        if (other != not_this)
            return other;
    }
}

/* One random operation on `b`; one that the model cannot follow is
 * replaced by a whole write. */
static void random_op(soak_worker_t *w, soak_buffer_t *b)
{
    int tag;
    CUstream stream = pick_stream(w, &tag);
    uint64_t first, count;
    bool done = true;
    soak_buffer_t *other;

    switch (rng_below(&w->rng, 14)) {
    case 0:
    case 1:
        pick_word_range(w, b, &first, &count);
        done = op_fill(w, b, stream, tag, first, count);
        break;
    case 2:
    case 3:
        op_checksum(w, b, stream, tag);
        break;
    case 4:
        pick_byte_range(w, b->bytes, &first, &count);
        done = op_copy_in(w, b, stream, tag, first, count, false);
        break;
    case 5:
        pick_byte_range(w, b->bytes, &first, &count);
        done = op_copy_in(w, b, stream, tag, first, count, true);
        break;
    case 6:
        pick_byte_range(w, b->bytes, &first, &count);
        op_copy_out(w, b, stream, tag, first, count, false);
        break;
    case 7:
        pick_byte_range(w, b->bytes, &first, &count);
        op_copy_out(w, b, stream, tag, first, count, true);
        break;
    case 8:
    case 9:
    case 10:
        other = pick_other(w, b);
        done = other == NULL || op_copy_between(w, b, other, stream, tag, (unsigned)rng_below(&w->rng, 3));
        break;
    case 11:
    case 12:
        done = op_memset(w, b, stream, tag, rng_below(&w->rng, 2) == 0, rng_below(&w->rng, 2) == 0);
        break;
    default:
        op_checksum(w, b, stream, tag);
        pick_word_range(w, b, &first, &count);
        done = op_fill(w, b, stream, tag, first, count);
        break;
    }
    if (!done)
        buffer_write_whole(w, b);
    atomic_fetch_add(&w->operations, 1);
}

/* ------------------------------------------------------------------------
 * Rounds
 * ------------------------------------------------------------------------ */

static void shuffle(soak_worker_t *w, soak_buffer_t **order, unsigned count)
{
    for (unsigned i = count; i > 1; i--) {
        unsigned j = (unsigned)rng_below(&w->rng, i);
        soak_buffer_t *t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

/* Destroys one of the thread's streams (its work may still be running)
 * and creates another in its place, blocking or not. */
static void recreate_stream(soak_worker_t *w)
{
    unsigned s = (unsigned)rng_below(&w->rng, options.streams);
    CUstream old = w->streams[s];
    VS_CHECK(cuStreamDestroy_v2(old));
    VS_CHECK(cuStreamCreate(&w->streams[s], rng_below(&w->rng, 2) == 0 ? CU_STREAM_NON_BLOCKING
                                                                            : CU_STREAM_DEFAULT));
    /* The new stream may have the old one's handle: a buffer last used on
     * the old one must still wait for its event. */
    for (unsigned i = 0; i < w->owned_count; i++) {
        if (w->owned[i]->last_stream == old)
            w->owned[i]->foreign = true;
    }
    atomic_fetch_add(&streams_recreated, 1);
}

/* Hands `count` random buffers to thread `to`, which takes them after the
 * round barrier. Their last-use events go with them. */
static void hand_over(soak_worker_t *w, unsigned to, unsigned count)
{
    soak_worker_t *receiver = &workers[to];
    for (unsigned k = 0; k < count && w->owned_count > 2; k++) {
        unsigned i = (unsigned)rng_below(&w->rng, w->owned_count);
        soak_buffer_t *b = w->owned[i];
        w->owned[i] = w->owned[--w->owned_count];
        history_push(b, "hand-over", w->id, w->round, STREAM_TAG_NONE, 0, 0, to);
        unsigned parity = w->round % 2;
        pthread_mutex_lock(&receiver->inbox_lock);
        receiver->inbox[parity][receiver->inbox_count[parity]++] = b;
        pthread_mutex_unlock(&receiver->inbox_lock);
        atomic_fetch_add(&handovers_done, 1);
    }
}

/* Takes what was handed over in round `round`. */
static void take_inbox(soak_worker_t *w, unsigned round)
{
    unsigned parity = round % 2;
    pthread_mutex_lock(&w->inbox_lock);
    for (unsigned i = 0; i < w->inbox_count[parity]; i++) {
        soak_buffer_t *b = w->inbox[parity][i];
        b->foreign = true;
        w->owned[w->owned_count++] = b;
    }
    w->inbox_count[parity] = 0;
    pthread_mutex_unlock(&w->inbox_lock);
}

/* No file may show in the spill directory: spill files are created
 * unlinked. */
static void check_spill_dir(const char *when)
{
    if (options.spill_dir == NULL)
        return;
    DIR *dir = opendir(options.spill_dir);
    if (dir == NULL) {
        fprintf(stderr, "preload_offload_soak: cannot open the spill directory %s %s: %s\n", options.spill_dir, when,
                strerror(errno));
        atomic_fetch_add(&mismatches, 1);
        return;
    }
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        fprintf(stderr, "preload_offload_soak: FILE LEFT in the spill directory %s %s: %s\n", options.spill_dir,
                when, entry->d_name);
        atomic_fetch_add(&mismatches, 1);
    }
    closedir(dir);
}

static void worker_setup(soak_worker_t *w)
{
    for (unsigned s = 0; s < options.streams; s++)
        VS_CHECK(cuStreamCreate(&w->streams[s], s % 2 == 0 ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT));
    VS_CHECK(cuMemAlloc_v2(&w->results, SOAK_RESULT_SLOTS * sizeof(uint64_t)));
    w->staging = malloc(largest_buffer);
    w->expected = malloc(largest_buffer);
    if (w->staging == NULL || w->expected == NULL) {
        fprintf(stderr, "preload_offload_soak: out of host memory\n");
        exit(1);
    }
    VS_CHECK(cuMemAllocHost_v2((void **)&w->pinned, largest_buffer));
    VS_CHECK(cuEventCreate(&w->pinned_free, CU_EVENT_DISABLE_TIMING));
}

static void worker_teardown(soak_worker_t *w)
{
    for (unsigned s = 0; s < options.streams; s++)
        VS_CHECK(cuStreamDestroy_v2(w->streams[s]));
    VS_CHECK(cuMemFree_v2(w->results));
    VS_CHECK(cuMemFreeHost(w->pinned));
    VS_CHECK(cuEventDestroy_v2(w->pinned_free));
    free(w->staging);
    free(w->expected);
}

/* One thread's run: allocate its share of the buffers (while the others
 * allocate theirs and already work), then rounds of one random operation
 * per owned buffer in a random order, with reallocations along the way;
 * at each round's end, checksums compared, some buffers read back, maybe
 * a stream recreated, a few buffers handed to another thread. At the end,
 * every buffer it owns is read back whole and freed. */
static void *worker_main(void *arg)
{
    soak_worker_t *w = arg;
    VS_CHECK(cuCtxSetCurrent(context));
    atomic_store(&w->doing, "setup");
    worker_setup(w);

    atomic_store(&w->doing, "allocate");
    for (unsigned i = w->id; i < buffer_count; i += options.threads) {
        soak_buffer_t *b = &buffers[i];
        buffer_allocate(w, b);
        w->owned[w->owned_count++] = b;
        if (rng_below(&w->rng, 4) == 0)
            random_op(w, w->owned[rng_below(&w->rng, w->owned_count)]);
    }

    soak_buffer_t **order = malloc(buffer_count * sizeof *order);
    for (unsigned r = 0; r < options.rounds; r++) {
        w->round = r;
        atomic_store(&w->progress_round, r);
        if (r > 0)
            take_inbox(w, r - 1);
        atomic_store(&w->doing, "operations");
        memcpy(order, w->owned, w->owned_count * sizeof *order);
        unsigned count = w->owned_count;
        shuffle(w, order, count);
        for (unsigned i = 0; i < count; i++) {
            random_op(w, order[i]);
            /* Churn: about 3% of the buffers each round. */
            if (rng_below(&w->rng, 32) == 0) {
                atomic_store(&w->doing, "reallocate");
                buffer_reallocate(w, order[i]);
                atomic_store(&w->doing, "operations");
            }
        }
        flush_checksums(w);
        atomic_store(&w->doing, "verify-some");
        for (unsigned i = 0; i < w->owned_count; i++) {
            if (rng_below(&w->rng, 8) == 0)
                verify_buffer(w, w->owned[i], "round-readback");
        }
        if (rng_below(&w->rng, 2) == 0) {
            atomic_store(&w->doing, "recreate-stream");
            recreate_stream(w);
        }
        if (options.threads > 1) {
            unsigned to = (w->id + 1 + r % (options.threads - 1)) % options.threads;
            hand_over(w, to, 1 + (unsigned)rng_below(&w->rng, 3));
        }
        atomic_store(&w->doing, "barrier");
        pthread_barrier_wait(&round_barrier);
        if (w->id == 0)
            check_spill_dir("during the run");
    }
    take_inbox(w, options.rounds - 1);
    w->round = options.rounds;

    atomic_store(&w->doing, "final-readback");
    flush_checksums(w);
    pinned_acquire(w);
    for (unsigned i = 0; i < w->owned_count; i++)
        verify_buffer(w, w->owned[i], "final-readback");
    atomic_store(&w->doing, "free");
    for (unsigned i = 0; i < w->owned_count; i++) {
        VS_CHECK(cuMemFree_v2(w->owned[i]->base));
        w->owned[i]->base = 0;
    }
    free(order);
    worker_teardown(w);
    atomic_store(&w->doing, "done");
    return NULL;
}

/* ------------------------------------------------------------------------
 * Watchdog, faults, options, main
 * ------------------------------------------------------------------------ */

static struct timespec started;

static double seconds_since_start(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - started.tv_sec) + (double)(now.tv_nsec - started.tv_nsec) / 1e9;
}

/* Past the deadline: says what every thread is doing, then fails the run
 * (a hang in the shim is a failure, reported before the runner's kill). */
static void *watchdog_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&finished)) {
        if (seconds_since_start() > options.deadline_s) {
            fprintf(stderr, "preload_offload_soak: DEADLINE: still running after %u s\n", options.deadline_s);
            for (unsigned t = 0; t < options.threads; t++)
                fprintf(stderr, "preload_offload_soak:   thread %u: round %u, %lu operations, now %s\n", t,
                        atomic_load(&workers[t].progress_round), atomic_load(&workers[t].operations),
                        atomic_load(&workers[t].doing));
            _exit(1);
        }
        struct timespec pause_for = {.tv_sec = 0, .tv_nsec = 200000000};
        nanosleep(&pause_for, NULL);
    }
    return NULL;
}

/* Names the buffer a fault hit (vs_test.h's fault reporter). */
static int describe_address(uintptr_t address, char *line, size_t cap, int length)
{
    for (unsigned i = 0; buffers != NULL && i < buffer_count; i++) {
        if (address >= buffers[i].base && address < buffers[i].base + buffers[i].bytes)
            length += snprintf(line + length, cap - (size_t)length, ", inside buffer %u (%zu bytes) at offset %llu",
                               i, buffers[i].bytes, (unsigned long long)(address - buffers[i].base));
    }
    return length;
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--threads T] [--streams S] [--evictable N] [--small N] [--rounds R] [--seed X]\n"
            "          [--deadline SECONDS] [--check-spill-dir]\n",
            argv0);
    exit(2);
}

static unsigned long long parse_number(const char *argv0, const char *name, const char *value,
                                       unsigned long long low, unsigned long long high)
{
    char *end = NULL;
    errno = 0;
    unsigned long long number = value != NULL ? strtoull(value, &end, 0) : 0;
    if (value == NULL || *value == '\0' || *end != '\0' || errno != 0 || number < low || number > high) {
        fprintf(stderr, "%s: %s needs a number from %llu to %llu, got %s\n", argv0, name, low, high,
                value != NULL ? value : "nothing");
        usage(argv0);
    }
    return number;
}

static void parse_options(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i];
        if (strcmp(name, "--check-spill-dir") == 0) {
            options.spill_dir = getenv("VRAMSHIM_SPILL_DIR");
            if (options.spill_dir == NULL) {
                fprintf(stderr, "%s: --check-spill-dir needs VRAMSHIM_SPILL_DIR in the environment\n", argv[0]);
                exit(2);
            }
            continue;
        }
        const char *value = i + 1 < argc ? argv[++i] : NULL;
        if (strcmp(name, "--threads") == 0)
            options.threads = (unsigned)parse_number(argv[0], name, value, 1, SOAK_MAX_THREADS);
        else if (strcmp(name, "--streams") == 0)
            options.streams = (unsigned)parse_number(argv[0], name, value, 1, SOAK_MAX_STREAMS);
        else if (strcmp(name, "--evictable") == 0)
            options.evictable = (unsigned)parse_number(argv[0], name, value, 0, 100000);
        else if (strcmp(name, "--small") == 0)
            options.small = (unsigned)parse_number(argv[0], name, value, 0, 100000);
        else if (strcmp(name, "--rounds") == 0)
            options.rounds = (unsigned)parse_number(argv[0], name, value, 1, 100000);
        else if (strcmp(name, "--seed") == 0)
            options.seed = parse_number(argv[0], name, value, 0, UINT64_MAX);
        else if (strcmp(name, "--deadline") == 0)
            options.deadline_s = (unsigned)parse_number(argv[0], name, value, 0, 86400);
        else
            usage(argv[0]);
    }
    if (options.evictable + options.small < 2 * options.threads) {
        fprintf(stderr, "%s: needs at least two buffers per thread\n", argv[0]);
        usage(argv[0]);
    }
    struct stat st;
    if (options.spill_dir != NULL && (stat(options.spill_dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        fprintf(stderr, "%s: VRAMSHIM_SPILL_DIR=%s is not a directory\n", argv[0], options.spill_dir);
        exit(2);
    }
}

/* The buffer slots: evictable first, then small, each slot given to thread
 * `index % threads` first. Sizes are drawn again at each allocation. */
static void buffers_create(void)
{
    buffer_count = options.evictable + options.small;
    buffers = calloc(buffer_count, sizeof *buffers);
    if (buffers == NULL) {
        fprintf(stderr, "preload_offload_soak: out of host memory\n");
        exit(1);
    }
    largest_buffer = 2u << 20;
    for (size_t i = 0; i < sizeof evictable_sizes / sizeof evictable_sizes[0]; i++)
        largest_buffer = evictable_sizes[i] > largest_buffer ? evictable_sizes[i] : largest_buffer;
    for (unsigned i = 0; i < buffer_count; i++) {
        buffers[i].index = i;
        buffers[i].evictable = i < options.evictable;
        VS_CHECK(cuEventCreate(&buffers[i].last_use, CU_EVENT_DISABLE_TIMING));
    }
}

int main(int argc, char **argv)
{
    CUdevice device;
    CUmodule module;

    parse_options(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    vs_test_fault_reporter_install(describe_address);
    clock_gettime(CLOCK_MONOTONIC, &started);
    check_spill_dir("before the run");

    VS_CHECK(cuInit(0));
    VS_CHECK(cuDeviceGet(&device, 0));
    VS_CHECK(cuDevicePrimaryCtxRetain(&context, device));
    VS_CHECK(cuCtxSetCurrent(context));
    VS_CHECK(cuModuleLoadData(&module, "preload_offload_soak kernels"));
    VS_CHECK(cuModuleGetFunction(&fn_fill, module, "sim_fill_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_checksum, module, "sim_checksum_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_copy, module, "sim_copy"));
    buffers_create();

    workers = calloc(options.threads, sizeof *workers);
    if (workers == NULL || pthread_barrier_init(&round_barrier, NULL, options.threads) != 0) {
        fprintf(stderr, "preload_offload_soak: cannot set up the threads\n");
        return 1;
    }
    for (unsigned t = 0; t < options.threads; t++) {
        soak_worker_t *w = &workers[t];
        w->id = t;
        w->rng = options.seed * 1000003u + t * 7919u + 17u;
        w->owned = calloc(buffer_count, sizeof *w->owned);
        w->inbox[0] = calloc(buffer_count, sizeof *w->inbox[0]);
        w->inbox[1] = calloc(buffer_count, sizeof *w->inbox[1]);
        atomic_init(&w->doing, "not started");
        if (w->owned == NULL || w->inbox[0] == NULL || w->inbox[1] == NULL
            || pthread_mutex_init(&w->inbox_lock, NULL) != 0) {
            fprintf(stderr, "preload_offload_soak: out of host memory\n");
            return 1;
        }
    }
    pthread_t watchdog;
    if (options.deadline_s > 0 && pthread_create(&watchdog, NULL, watchdog_main, NULL) != 0) {
        fprintf(stderr, "preload_offload_soak: cannot start the watchdog\n");
        return 1;
    }
    for (unsigned t = 0; t < options.threads; t++) {
        if (pthread_create(&workers[t].thread, NULL, worker_main, &workers[t]) != 0) {
            fprintf(stderr, "preload_offload_soak: cannot start thread %u\n", t);
            return 1;
        }
    }
    for (unsigned t = 0; t < options.threads; t++)
        pthread_join(workers[t].thread, NULL);
    atomic_store(&finished, true);
    if (options.deadline_s > 0)
        pthread_join(watchdog, NULL);

    VS_CHECK(cuCtxSynchronize());
    check_spill_dir("after every buffer was freed");
    for (unsigned i = 0; i < buffer_count; i++)
        VS_CHECK(cuEventDestroy_v2(buffers[i].last_use));
    VS_CHECK(cuModuleUnload(module));
    for (unsigned t = 0; t < options.threads; t++) {
        pthread_mutex_destroy(&workers[t].inbox_lock);
        free(workers[t].owned);
        free(workers[t].inbox[0]);
        free(workers[t].inbox[1]);
    }
    pthread_barrier_destroy(&round_barrier);

    unsigned long failed = atomic_load(&mismatches);
    printf("preload_offload_soak: %s: %u threads x %u streams, %u evictable + %u small buffers, %u rounds, seed "
           "%" PRIu64 ": %lu launches, %lu copies, %lu memsets, %lu checksums, %lu reallocations, %lu hand-overs, "
           "%lu streams recreated, %llu bytes read back and compared, %lu mismatches, %.1f s\n",
           failed == 0 ? "PASS" : "FAIL", options.threads, options.streams, options.evictable, options.small,
           options.rounds, options.seed, atomic_load(&launches_done), atomic_load(&copies_done),
           atomic_load(&memsets_done), atomic_load(&checksums_checked), atomic_load(&reallocations_done),
           atomic_load(&handovers_done), atomic_load(&streams_recreated), atomic_load(&bytes_verified), failed,
           seconds_since_start());
    free(workers);
    free(buffers);
    return failed == 0 ? 0 : 1;
}

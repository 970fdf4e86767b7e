/* internal.h: the rules every file of the shim follows: the locks and their
 * order, the error conventions, and the assertions that check both.
 *
 * Lock ordering (indentation is the order: a lock is taken only while
 * holding the locks it is indented under, never one below it; a "leaf"
 * takes nothing under it), in the manner of Linux's mm/rmap.c:
 *
 *   vs_driver.ready_lock          (driver.c)      driver loading, once
 *     publisher lock              (snapshot_writer.c) the live snapshot: leaf
 *   vs_execs_lock                 (hooks_graph.c) graph executables
 *     vs_engine.lock              (offload.c)     the offload engine
 *       vs_streams.lock           (offload_streams.c) the stream table: leaf
 *       vs_pool.lock              (host_pool.c)   pinned host pool: leaf
 *       vs_spill.lock             (spill.c)       the spill file: leaf
 *       vs_retire.lock            (offload_retire.c) the engine thread's batches: leaf
 *       vs_arrive.lock            (offload_arrive.c) the arrival thread's jobs: leaf
 *       registry lock             (registry_lock.c) read-mostly: allocations
 *         vs_trace.lock           (trace_writer.c) VRAMSHIM_TRACE: leaf
 *         vs_stamps.worker.lock   (stamp_log.c)   the stamp thread's start: leaf
 *   vs_layouts_lock               (launch.c)      kernel parameter layouts
 *     registry lock               (as above)
 *   vs_stamps.drain               (stamp_log.c)   the stamp logs' one drainer; never
 *                                                   under another shim lock
 *     registry lock               (as above)
 *   vs_physical_lock              (hooks_memory.c) the application's VMM handles: leaf
 *   vs_runtime_lock               (runtime.c)     the runtime's primary context: leaf
 *   vs_pool_usage.lock            (pool_usage.c)  memory pools' charged reserve: leaf
 *   vs_pool_async.lock            (pool_async.c)  stream-ordered allocations served
 *                                                   from evictable memory: leaf
 *   vs_tier_staging.lock          (offload_tier.c) staging of restores from disk; never
 *                                                   under the engine lock (let go for the I/O)
 *     vs_spill.lock               (as above)
 *
 * (The publisher is started under the ready lock, by the callback the top
 * layer registers; a graph's executable lock is held while its holds are
 * taken, which take the engine lock; the engine takes the registry lock for
 * residency changes and epochs, never the reverse.)
 *
 * What each guards:
 *
 *   lock               guards                                  held while
 *   ------------------ --------------------------------------- ------------------------------
 *   driver ready_lock  `vs_real`, the driver handle            the first entry loads libcuda
 *   engine lock        regions, devices, events, deferred      every engine decision and every
 *                      restores, departures, marker rings,     driver call the engine makes;
 *                      stats, the policy objects (policy.h     never on an operation's fast
 *                      is not thread-safe: the engine lock     path (scan + submit)
 *                      serialises every call into it)
 *   streams lock       the stream table (kinds, handles,       a look-up or an update of it;
 *                      owners) and its generation              no driver call under it
 *   execs lock         graph executables and what they hold    graph instantiate/launch/destroy
 *   layouts lock       cached kernel parameter layouts         a look-up or an insert
 *   registry lock      every allocation record, the page       read: from an operation's scan
 *                      index, residency, epochs                to its submission (the driver
 *                                                              call itself runs under it);
 *                                                              write: add, remove, residency
 *                                                              changes, closing an epoch
 *   trace lock         the VRAMSHIM_TRACE buffer and file      appending lines, flushing
 *   pool lock          the pinned host pool's slabs            take/give of host copies
 *   spill lock         the spill file's block map              writing/reading a spill
 *   retire lock        the batches handed to the engine's      a hand-over, a look for a range,
 *                      thread, their `finished` flags          a wait; no driver call under it
 *   arrival lock       the jobs handed to the arrival thread,  a hand-over, a look for an event
 *                      their `finished` flags and answers      or a range, a join; no driver
 *                                                              call under it
 *   physical lock      the application's cuMemCreate handles   create/map/unmap/release
 *   runtime lock       the runtime's primary context           its first retain
 *   pool usage lock    each memory pool's charged reserve      reading a reserve and charging it
 *   publisher lock     the live snapshot's thread state        start/stop/wake
 *   stamp drain lock   who drains the stamp logs (stamp_log.c: a stamping of what the logs
 *                      each log is written by its own thread   hold, by the stamp thread or a
 *                      without a lock)                         listing's flush)
 *   stamp worker lock  the stamp thread's state                its start, its sleep, its stop
 *
 * The fast path of an operation takes only the registry's read lock and
 * never the engine lock while holding it; the engine takes the registry
 * lock under its own (residency changes), never the reverse.
 *
 * Names say which lock a function expects: `_engine_locked`,
 * `_streams_locked`, `_registry_locked` (read or write),
 * `_registry_wrlocked`, `_trace_locked`, `_spill_locked`. Inside the engine
 * (offload*.c) the engine lock is the rule rather than the exception: every
 * function declared in offload_internal.h (or a part header) and not named `vs_offload_*` or
 * `vs_op_*` runs with it held and says so with
 * `VS_ASSERT_HELD(&vs_engine.lock)` on entry; the few that do not (taking
 * it themselves, or pure) say so in that header. A bare `_locked` is not
 * used.
 *
 * Error conventions, one per layer:
 *
 *   hooks (hooks_*.c, runtime.c)  the CUDA error type of the API they stand
 *                                 in for (CUresult, cudaError_t), with the
 *                                 code the real driver would use
 *   engine API (offload.h)        the hook boundary: CUresult (a driver
 *                                 call's own code passes through); bool only
 *                                 for predicates ("is it mine", "worth a
 *                                 retry"), with the CUresult in *rc
 *   everything inside (registry, cap, host pool, spill, trace, policy,
 *   driver loading, engine bookkeeping)
 *                                 0 or a negative errno; internal engine steps
 *                                 that end in a driver call return its
 *                                 CUresult, since the operation returns it
 *
 * Assertions: `VS_ASSERT` and `VS_ASSERT_HELD` are checked when the shim is
 * built with `-Dbuildtype=debug` (CI's sanitizer builds): a failure logs the
 * condition, file and line, and aborts (a loud failure, in a debug build
 * only). In every other build type they compile to nothing: the shim never
 * aborts inside the host process.
 */
#ifndef VS_INTERNAL_H
#define VS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#ifndef VS_DEBUG
#define VS_DEBUG 0
#endif

/* CLOCK_MONOTONIC in nanoseconds: every time the shim records or waits by. */
static inline uint64_t vs_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The functions every kernel launch runs through when what it touches is
 * resident (the hook, the parameter scan, the registry's look-ups, the
 * submission): grouped in `.text.hot`, each on a cache-line boundary, so
 * that their layout, and what a launch costs, do not move when code
 * elsewhere changes. A fix in the eviction verdicts that made one function
 * 80 bytes longer moved these by as much, and cost the offload-mode launch
 * about 6 ns (launch_overhead, interleaved against the tree before). */
#define VS_LAUNCH_PATH __attribute__((hot, aligned(64)))

/* Logs "assertion failed" with the condition and where, then aborts. Only
 * called from debug builds (see above). */
void vs_assert_fail(const char *condition, const char *file, int line, const char *function)
    __attribute__((noreturn, cold));

#if VS_DEBUG
#define VS_ASSERT(condition)                                                                       \
    do {                                                                                           \
        if (!(condition))                                                                          \
            vs_assert_fail(#condition, __FILE__, __LINE__, __func__);                              \
    } while (0)
#else
#define VS_ASSERT(condition)                                                                       \
    do {                                                                                           \
        (void)sizeof(condition);                                                                   \
    } while (0)
#endif

/* A mutex that knows its owner (in debug builds), so that a function's
 * "lock held" precondition is an assertion rather than a comment. */
typedef struct vs_mutex_s {
    pthread_mutex_t mutex;
    _Atomic uintptr_t owner; /* the holder's pthread_self(), 0 when free; debug builds only */
} vs_mutex_t;

#define VS_MUTEX_INITIALIZER {.mutex = PTHREAD_MUTEX_INITIALIZER, .owner = 0}

static inline uintptr_t vs_thread_self(void)
{
    return (uintptr_t)pthread_self();
}

static inline void vs_mutex_lock(vs_mutex_t *m)
{
    pthread_mutex_lock(&m->mutex);
#if VS_DEBUG
    atomic_store_explicit(&m->owner, vs_thread_self(), memory_order_relaxed);
#endif
}

static inline void vs_mutex_unlock(vs_mutex_t *m)
{
#if VS_DEBUG
    VS_ASSERT(atomic_load_explicit(&m->owner, memory_order_relaxed) == vs_thread_self());
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
#endif
    pthread_mutex_unlock(&m->mutex);
}

/* Whether the calling thread holds `m` (always true in release builds,
 * where nothing is recorded). */
static inline bool vs_mutex_held(vs_mutex_t *m)
{
#if VS_DEBUG
    return atomic_load_explicit(&m->owner, memory_order_relaxed) == vs_thread_self();
#else
    (void)m;
    return true;
#endif
}

/* pthread_cond_timedwait on `m`, keeping the owner right across the wait. */
static inline int vs_mutex_timedwait(pthread_cond_t *cond, vs_mutex_t *m, const struct timespec *until)
{
#if VS_DEBUG
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
#endif
    int rc = pthread_cond_timedwait(cond, &m->mutex, until);
#if VS_DEBUG
    atomic_store_explicit(&m->owner, vs_thread_self(), memory_order_relaxed);
#endif
    return rc;
}

/* pthread_cond_wait on `m`, keeping the owner right across the wait. */
static inline void vs_mutex_wait(pthread_cond_t *cond, vs_mutex_t *m)
{
#if VS_DEBUG
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
#endif
    pthread_cond_wait(cond, &m->mutex);
#if VS_DEBUG
    atomic_store_explicit(&m->owner, vs_thread_self(), memory_order_relaxed);
#endif
}

/* Re-initialises `m` in a child after fork (the parent's holder is gone). */
static inline void vs_mutex_reinit(vs_mutex_t *m)
{
    pthread_mutex_init(&m->mutex, NULL);
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
}

#define VS_ASSERT_HELD(m) VS_ASSERT(vs_mutex_held(m))

#endif /* VS_INTERNAL_H */

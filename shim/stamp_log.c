/* stamp_log.c: the settled uses each thread logs, and the thread that
 * stamps them (stamp_log.h).
 *
 * A thread's log is a ring of words with one writer, that thread: per
 * operation a header (its sequence number, and how many words follow in
 * the top byte) and the words. The writer publishes with a release store of
 * `head`; whoever drains (the stamp thread, or a thread flushing for a
 * listing, one at a time under the drain lock) reads up to `head`, stamps
 * under the registry's read lock, and hands the room back with a release
 * store of `tail`. The writer reads `tail` only when its own copy says the
 * ring is full, so that its launches do not pull the drainer's cache line
 * each time.
 *
 * The stamp thread drains when a log passes a quarter full (the writer
 * signals it as its head crosses each quarter) and at least every 100 ms.
 * Logs are taken by threads as the registry lock's reader records are
 * (registry_lock.c): pushed on a list, never popped, given back at a
 * thread's exit and taken again by a later thread; what an exited thread
 * logged is stamped all the same.
 *
 * In a forked child only the forking thread lives, and no stamp thread:
 * its launches stamp at once; what was logged before the fork is stamped by
 * the child's flushes.
 */
#include "stamp_log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "registry_lock.h"
#include "tunables.h"
#include "worker.h"

/* A log's words are indexed modulo VS_STAMP_LOG_WORDS, a power of two. */
#define VS_STAMP_LOG_MASK (VS_STAMP_LOG_WORDS - 1)
/* The header's count sits in its top byte, the sequence number below. */
#define VS_STAMP_LOG_COUNT_SHIFT 56
#define VS_STAMP_LOG_SEQ_MASK ((UINT64_C(1) << VS_STAMP_LOG_COUNT_SHIFT) - 1)

_Static_assert((VS_STAMP_LOG_WORDS & VS_STAMP_LOG_MASK) == 0, "a log's size is a power of two");
_Static_assert(VS_SETTLED_MAX < 256, "a header counts its words in one byte");

typedef struct vs_stamp_ring_s {
    /* The writer's line: what it has put, and its copy of `tail`. */
    _Alignas(64) _Atomic uint64_t head;
    uint64_t tail_seen;
    /* The drainer's line. */
    _Alignas(64) _Atomic uint64_t tail;
    _Alignas(64) _Atomic uint32_t owned; /* 1 while a live thread writes it */
    struct vs_stamp_ring_s *next;        /* set once, before it is published */
    uintptr_t words[VS_STAMP_LOG_WORDS];
} vs_stamp_ring_t;

static struct {
    _Atomic bool enabled;
    _Atomic bool forked; /* in a forked child: nothing is logged any more */
    _Atomic(vs_stamp_ring_t *) rings;
    pthread_mutex_t drain; /* one drainer at a time; before the registry lock */
    pthread_once_t once;
    pthread_key_t key;
    bool key_made;
    vs_worker_t worker;
} vs_stamps = {
    .drain = PTHREAD_MUTEX_INITIALIZER,
    .once = PTHREAD_ONCE_INIT,
    .worker = VS_WORKER_INIT,
};

static __thread struct {
    vs_stamp_ring_t *ring;
    bool exited; /* its log went back (thread exit): stamps are made at once */
} vs_my_log __attribute__((tls_model("initial-exec")));

static void vs_stamp_log_give_back(void *arg)
{
    vs_stamp_ring_t *r = arg;
    vs_my_log.ring = NULL;
    vs_my_log.exited = true;
    atomic_store_explicit(&r->owned, 0, memory_order_release);
}

static void vs_stamp_log_prepare_fork(void)
{
    pthread_mutex_lock(&vs_stamps.drain);
}

static void vs_stamp_log_parent_fork(void)
{
    pthread_mutex_unlock(&vs_stamps.drain);
}

static void vs_stamp_log_child_fork(void)
{
    atomic_store_explicit(&vs_stamps.forked, true, memory_order_relaxed);
    pthread_mutex_unlock(&vs_stamps.drain);
}

static void vs_stamp_log_init_once(void)
{
    vs_stamps.key_made = pthread_key_create(&vs_stamps.key, vs_stamp_log_give_back) == 0;
    (void)pthread_atfork(vs_stamp_log_prepare_fork, vs_stamp_log_parent_fork, vs_stamp_log_child_fork);
}

void vs_stamp_log_enable(void)
{
    (void)pthread_once(&vs_stamps.once, vs_stamp_log_init_once);
    atomic_store_explicit(&vs_stamps.enabled, vs_stamps.key_made, memory_order_relaxed);
}

/* Stamps what `r` holds, a bounded batch per hold of the read lock. Drain
 * lock held. */
static void vs_stamp_log_drain(vs_stamp_ring_t *r)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    while (tail != head) {
        uintptr_t words[VS_SETTLED_MAX];
        size_t stamped = 0;
        vs_registry_lock_read();
        while (tail != head && stamped < VS_STAMP_LOG_HOLD_WORDS) {
            uint64_t header = r->words[tail & VS_STAMP_LOG_MASK];
            size_t count = (size_t)(header >> VS_STAMP_LOG_COUNT_SHIFT);
            for (size_t i = 0; i < count; i++)
                words[i] = r->words[(tail + 1 + i) & VS_STAMP_LOG_MASK];
            vs_registry_stamp_logged_registry_locked(words, count, header & VS_STAMP_LOG_SEQ_MASK);
            tail += 1 + count;
            stamped += 1 + count;
        }
        vs_registry_lock_release();
        atomic_store_explicit(&r->tail, tail, memory_order_release);
    }
}

void vs_stamp_log_flush(void)
{
    if (atomic_load_explicit(&vs_stamps.rings, memory_order_acquire) == NULL)
        return;
    VS_ASSERT(!vs_registry_lock_reading() && !vs_registry_lock_writing());
    int saved_errno = errno;
    pthread_mutex_lock(&vs_stamps.drain);
    for (vs_stamp_ring_t *r = atomic_load_explicit(&vs_stamps.rings, memory_order_acquire); r != NULL; r = r->next)
        vs_stamp_log_drain(r);
    pthread_mutex_unlock(&vs_stamps.drain);
    errno = saved_errno;
}

uint64_t vs_stamp_log_pending(void)
{
    uint64_t pending = 0;
    for (vs_stamp_ring_t *r = atomic_load_explicit(&vs_stamps.rings, memory_order_acquire); r != NULL; r = r->next)
        pending += atomic_load_explicit(&r->head, memory_order_acquire)
                   - atomic_load_explicit(&r->tail, memory_order_acquire);
    return pending;
}

static void *vs_stamp_log_main(void *arg)
{
    (void)arg;
    vs_worker_t *w = &vs_stamps.worker;
    pthread_mutex_lock(&w->lock);
    vs_worker_started(w);
    while (!w->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + VS_STAMP_LOG_PERIOD_NS;
        until.tv_sec += (time_t)(ns / 1000000000ull);
        until.tv_nsec = (long)(ns % 1000000000ull);
        (void)pthread_cond_timedwait(&w->work, &w->lock, &until);
        pthread_mutex_unlock(&w->lock);
        vs_stamp_log_flush();
        pthread_mutex_lock(&w->lock);
    }
    vs_worker_ended(w);
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* This thread's log, with the stamp thread running: a free log, or a new
 * one. NULL without them. */
static vs_stamp_ring_t *vs_stamp_log_take(void)
{
    if (vs_my_log.exited || !atomic_load_explicit(&vs_stamps.enabled, memory_order_relaxed)
        || atomic_load_explicit(&vs_stamps.forked, memory_order_relaxed))
        return NULL;
    int saved_errno = errno;
    pthread_mutex_lock(&vs_stamps.worker.lock);
    bool running = vs_worker_start(&vs_stamps.worker, vs_stamp_log_main, "vramshim-stamps",
                                   "uses of small allocations are stamped at each launch");
    pthread_mutex_unlock(&vs_stamps.worker.lock);
    vs_stamp_ring_t *r = NULL;
    if (running) {
        for (r = atomic_load_explicit(&vs_stamps.rings, memory_order_acquire); r != NULL; r = r->next) {
            uint32_t free_log = 0;
            if (atomic_load_explicit(&r->owned, memory_order_relaxed) == 0
                && atomic_compare_exchange_strong_explicit(&r->owned, &free_log, 1, memory_order_acquire,
                                                           memory_order_relaxed))
                break;
        }
        if (r == NULL && (r = aligned_alloc(64, sizeof *r)) != NULL) {
            atomic_init(&r->head, 0);
            atomic_init(&r->tail, 0);
            atomic_init(&r->owned, 1);
            r->tail_seen = 0;
            r->next = atomic_load_explicit(&vs_stamps.rings, memory_order_relaxed);
            while (!atomic_compare_exchange_weak_explicit(&vs_stamps.rings, &r->next, r, memory_order_release,
                                                          memory_order_relaxed))
                continue;
        }
        if (r != NULL && pthread_setspecific(vs_stamps.key, r) != 0) {
            atomic_store_explicit(&r->owned, 0, memory_order_release);
            r = NULL;
        }
    }
    errno = saved_errno;
    /* Without a log, this thread stamps at once from now on. */
    vs_my_log.exited = r == NULL;
    vs_my_log.ring = r;
    return r;
}

VS_LAUNCH_PATH
bool vs_stamp_log_put(const uintptr_t *words, size_t count, uint64_t seq)
{
    vs_stamp_ring_t *r = vs_my_log.ring;
    if (__builtin_expect(r == NULL, 0) && (r = vs_stamp_log_take()) == NULL)
        return false;
    if (__builtin_expect(atomic_load_explicit(&vs_stamps.forked, memory_order_relaxed), 0))
        return false;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t end = head + 1 + count;
    if (end - r->tail_seen > VS_STAMP_LOG_WORDS) {
        r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (end - r->tail_seen > VS_STAMP_LOG_WORDS)
            return false; /* full: the stamp thread is behind */
    }
    r->words[head & VS_STAMP_LOG_MASK] = (uintptr_t)count << VS_STAMP_LOG_COUNT_SHIFT | (seq & VS_STAMP_LOG_SEQ_MASK);
    for (size_t i = 0; i < count; i++)
        r->words[(head + 1 + i) & VS_STAMP_LOG_MASK] = words[i];
    atomic_store_explicit(&r->head, end, memory_order_release);
    if (head / VS_STAMP_LOG_WAKE != end / VS_STAMP_LOG_WAKE)
        pthread_cond_signal(&vs_stamps.worker.work);
    return true;
}

void vs_stamp_log_stop(void)
{
    vs_worker_stop(&vs_stamps.worker);
    vs_stamp_log_flush();
}

/* registry_lock.c: the registry's reader-writer lock (`vs_registry_lock_read`,
 * `vs_registry_lock_write`).
 *
 * Every thread that reads has a record of its own, on its own cache line,
 * with one flag: `active`, set while the thread holds a read. A read sets
 * it, then checks the lock-wide `writer` flag; a writer sets `writer`, then
 * waits until every record's `active` is clear. Both sides store first and
 * load second, sequentially consistent, so at least one of them sees the
 * other (the Dekker pattern): a reader that saw no writer is waited for, and
 * a writer that saw no reader keeps out every reader that comes after. Such
 * a read costs a locked store to the thread's own line and a load of the
 * writer flag's line, which only writers write; its release, a plain store.
 *
 * A reader that finds `writer` set clears its flag and reads through a
 * pthread rwlock (`fallback`) instead. Writers hold that rwlock's write side
 * the whole time, so the reader waits there for the write to end, and
 * writers exclude each other there.
 *
 * Reads may wait on other reads (a read held across a driver call that
 * waits for another thread's launch). glibc's rwlock prefers readers for
 * that reason, and so does this lock: a writer that has waited
 * `VS_WRITER_PATIENCE_NS` for an old read steps back (clears `writer`, lets
 * go of the rwlock, so the readers it kept out come in), sleeps a little
 * (a nap that doubles up to `VS_WRITER_NAP_MAX_NS`) and tries again. A
 * writer can therefore wait as long as reads overlap without a gap, as it
 * could with glibc's rwlock; nothing waits for ever.
 *
 * Records are never freed: a thread's record goes back to the list when the
 * thread exits (a key destructor) for the next new thread to take. A thread
 * whose record went back, or that could not get one (no memory), reads
 * through the rwlock.
 */
#include "registry_lock.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "tunables.h"

typedef struct vs_reader_s {
    _Alignas(64) _Atomic uint32_t active; /* 1 while its thread holds a read through it */
    _Atomic uint32_t owned;               /* 1 while a live thread owns the record */
    struct vs_reader_s *next;             /* set once, before the record is published */
} vs_reader_t;

static struct {
    _Alignas(64) _Atomic uint32_t writer; /* a writer holds the lock or waits for readers */
    pthread_rwlock_t fallback;
    _Atomic(vs_reader_t *) readers; /* every record: pushed, never popped */
    _Atomic unsigned records;
    _Atomic unsigned long retreats;
    pthread_once_t once;
    pthread_key_t key;
    bool key_made;
} vs_lock = {
    .fallback = PTHREAD_RWLOCK_INITIALIZER,
    .once = PTHREAD_ONCE_INIT,
};

static __thread struct {
    vs_reader_t *reader;
    unsigned depth;   /* reads this thread holds, nested */
    bool through_fallback; /* the outermost of them holds the rwlock's read side */
    bool exited;      /* the record went back (thread exit): the rwlock from now on */
    bool writing;
} vs_mine __attribute__((tls_model("initial-exec"))); /* no __tls_get_addr call on the launch path */

/* Sleeps `ns`, signals or not; the application's errno is kept. */
static void vs_lock_nap(uint64_t ns)
{
    int saved_errno = errno;
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        continue;
    errno = saved_errno;
}

static void vs_reader_give_back(void *arg)
{
    vs_reader_t *r = arg;
    vs_mine.reader = NULL;
    vs_mine.exited = true;
    atomic_store_explicit(&r->owned, 0, memory_order_release);
}

/* In a forked child only the forking thread lives: the others' reads never
 * end, and their records are free. */
static void vs_lock_atfork_child(void)
{
    for (vs_reader_t *r = atomic_load_explicit(&vs_lock.readers, memory_order_acquire); r != NULL; r = r->next) {
        if (r == vs_mine.reader)
            continue;
        atomic_store_explicit(&r->active, 0, memory_order_relaxed);
        atomic_store_explicit(&r->owned, 0, memory_order_relaxed);
    }
}

static void vs_lock_init_once(void)
{
    vs_lock.key_made = pthread_key_create(&vs_lock.key, vs_reader_give_back) == 0;
    (void)pthread_atfork(NULL, NULL, vs_lock_atfork_child);
}

/* This thread's record: a free one, or a new one. NULL without one (no
 * memory, no key, or the thread is exiting). */
static vs_reader_t *vs_reader_take(void)
{
    if (vs_mine.exited)
        return NULL;
    (void)pthread_once(&vs_lock.once, vs_lock_init_once);
    if (!vs_lock.key_made)
        return NULL;
    vs_reader_t *r;
    for (r = atomic_load_explicit(&vs_lock.readers, memory_order_acquire); r != NULL; r = r->next) {
        uint32_t free_record = 0;
        if (atomic_load_explicit(&r->owned, memory_order_relaxed) == 0
            && atomic_compare_exchange_strong_explicit(&r->owned, &free_record, 1, memory_order_acquire,
                                                       memory_order_relaxed))
            break;
    }
    if (r == NULL) {
        int saved_errno = errno;
        r = aligned_alloc(64, sizeof *r);
        if (r == NULL) {
            errno = saved_errno; /* reads go through the rwlock instead */
            return NULL;
        }
        atomic_init(&r->active, 0);
        atomic_init(&r->owned, 1);
        r->next = atomic_load_explicit(&vs_lock.readers, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&vs_lock.readers, &r->next, r, memory_order_release,
                                                      memory_order_relaxed))
            continue;
        atomic_fetch_add_explicit(&vs_lock.records, 1, memory_order_relaxed);
    }
    if (pthread_setspecific(vs_lock.key, r) != 0) {
        atomic_store_explicit(&r->owned, 0, memory_order_release);
        return NULL;
    }
    vs_mine.reader = r;
    return r;
}

VS_LAUNCH_PATH
void vs_registry_lock_read(void)
{
    VS_ASSERT(!vs_mine.writing);
    if (vs_mine.depth++ > 0)
        return;
    vs_reader_t *r = vs_mine.reader;
    if (__builtin_expect(r == NULL, 0))
        r = vs_reader_take();
    if (r != NULL) {
        atomic_store_explicit(&r->active, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&vs_lock.writer, memory_order_seq_cst) == 0)
            return;
        atomic_store_explicit(&r->active, 0, memory_order_release);
    }
    pthread_rwlock_rdlock(&vs_lock.fallback);
    vs_mine.through_fallback = true;
}

/* Waits until no record is active, for at most VS_WRITER_PATIENCE_NS past
 * the first wait. False when a read outlasted it. */
static bool vs_lock_readers_drain(void)
{
    uint64_t deadline = 0;
    for (vs_reader_t *r = atomic_load_explicit(&vs_lock.readers, memory_order_acquire); r != NULL; r = r->next) {
        for (unsigned spins = 0; atomic_load_explicit(&r->active, memory_order_seq_cst) != 0; spins++) {
            if (spins < VS_WRITER_SPINS)
                continue;
            uint64_t now = vs_monotonic_ns();
            if (deadline == 0)
                deadline = now + VS_WRITER_PATIENCE_NS;
            else if (now >= deadline)
                return false;
            /* A read lasts a launch's submission (about a microsecond)
             * unless it spans a synchronous copy: a few yields, then
             * naps that leave the core to the reader. */
            if (spins < VS_WRITER_SPINS + VS_WRITER_YIELDS)
                sched_yield();
            else
                vs_lock_nap(VS_WRITER_DRAIN_NAP_NS);
        }
    }
    return true;
}

void vs_registry_lock_write(void)
{
    VS_ASSERT(vs_mine.depth == 0 && !vs_mine.writing);
    uint64_t nap = VS_WRITER_NAP_FIRST_NS;
    for (;;) {
        pthread_rwlock_wrlock(&vs_lock.fallback);
        atomic_store_explicit(&vs_lock.writer, 1, memory_order_seq_cst);
        if (vs_lock_readers_drain())
            break;
        /* An old read goes on: let the readers kept out in, in case it
         * waits for one of them. */
        atomic_store_explicit(&vs_lock.writer, 0, memory_order_seq_cst);
        pthread_rwlock_unlock(&vs_lock.fallback);
        atomic_fetch_add_explicit(&vs_lock.retreats, 1, memory_order_relaxed);
        vs_lock_nap(nap);
        nap = nap * 2 < VS_WRITER_NAP_MAX_NS ? nap * 2 : VS_WRITER_NAP_MAX_NS;
    }
    vs_mine.writing = true;
}

VS_LAUNCH_PATH
void vs_registry_lock_release(void)
{
    if (vs_mine.writing) {
        vs_mine.writing = false;
        atomic_store_explicit(&vs_lock.writer, 0, memory_order_release);
        pthread_rwlock_unlock(&vs_lock.fallback);
        return;
    }
    VS_ASSERT(vs_mine.depth > 0);
    if (--vs_mine.depth > 0)
        return;
    if (vs_mine.through_fallback) {
        vs_mine.through_fallback = false;
        pthread_rwlock_unlock(&vs_lock.fallback);
        return;
    }
    atomic_store_explicit(&vs_mine.reader->active, 0, memory_order_release);
}

bool vs_registry_lock_reading(void)
{
    return vs_mine.depth > 0;
}

bool vs_registry_lock_writing(void)
{
    return vs_mine.writing;
}

unsigned vs_registry_lock_reader_records(void)
{
    return atomic_load_explicit(&vs_lock.records, memory_order_relaxed);
}

unsigned long vs_registry_lock_write_retreats(void)
{
    return atomic_load_explicit(&vs_lock.retreats, memory_order_relaxed);
}

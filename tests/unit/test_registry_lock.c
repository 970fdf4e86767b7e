/* test_registry_lock.c: unit tests of shim/registry_lock.c, the registry's
 * reader-writer lock: readers and writers exclude each other (plain fields
 * a torn write would show, and that TSan watches), reads nest, a writer
 * waiting for a read that waits on another thread's read steps back
 * instead of deadlocking, per-thread records are reused after a thread
 * exits, and a forked child can write although the parent's other threads
 * were reading at the fork.
 *
 * Threads report failures through counters the main thread asserts on:
 * cmocka's asserts belong to the main thread. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "registry_lock.h"

static void sleep_us(unsigned us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        continue;
}

/* Joins `t`, failing the test when it has not ended within `seconds` (a
 * deadlock). */
static void join_within(pthread_t t, int seconds)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += seconds;
    int rc = pthread_timedjoin_np(t, NULL, &deadline);
    if (rc != 0)
        fail_msg("a thread did not end within %d s (rc %d): deadlock", seconds, rc);
}

/* ---- Exclusion ----------------------------------------------------------- */

#define EXCLUSION_READERS 4
#define EXCLUSION_WRITERS 2
#define EXCLUSION_WRITES 3000

/* Written only under the write lock, read under either: never atomic, so
 * that a read overlapping a write is a data race TSan reports, besides the
 * torn pair the readers check. */
static struct {
    uint64_t first, second;
} guarded;
static _Atomic int writers_inside;
static _Atomic int torn_reads, readers_beside_writer, writers_beside_writer;
static _Atomic bool writers_done;
static _Atomic uint64_t reads_done;
/* Readers that have started: the writers begin only once every reader
 * runs, since on a loaded machine the writers' 6000 writes could otherwise
 * all end before a reader is first scheduled, and nothing would overlap. */
static _Atomic int readers_started;

static void *exclusion_reader(void *arg)
{
    (void)arg;
    atomic_fetch_add(&readers_started, 1);
    do {
        vs_registry_lock_read();
        if (atomic_load(&writers_inside) != 0)
            atomic_fetch_add(&readers_beside_writer, 1);
        uint64_t first = guarded.first;
        if ((reads_done & 7) == 0)
            sched_yield(); /* a read that lasts: a writer waits for it */
        if (guarded.second != first)
            atomic_fetch_add(&torn_reads, 1);
        vs_registry_lock_release();
        atomic_fetch_add(&reads_done, 1);
    } while (!atomic_load(&writers_done));
    return NULL;
}

static void *exclusion_writer(void *arg)
{
    (void)arg;
    while (atomic_load(&readers_started) < EXCLUSION_READERS)
        sched_yield();
    for (int i = 0; i < EXCLUSION_WRITES; i++) {
        vs_registry_lock_write();
        if (atomic_fetch_add(&writers_inside, 1) != 0)
            atomic_fetch_add(&writers_beside_writer, 1);
        guarded.first++;
        if ((i & 63) == 0)
            sched_yield(); /* a write that lasts: readers come and wait */
        guarded.second++;
        atomic_fetch_sub(&writers_inside, 1);
        vs_registry_lock_release();
    }
    return NULL;
}

static void test_readers_and_writers_exclude_each_other(void **state)
{
    (void)state;
    pthread_t readers[EXCLUSION_READERS], writers[EXCLUSION_WRITERS];
    for (int i = 0; i < EXCLUSION_READERS; i++)
        assert_int_equal(pthread_create(&readers[i], NULL, exclusion_reader, NULL), 0);
    for (int i = 0; i < EXCLUSION_WRITERS; i++)
        assert_int_equal(pthread_create(&writers[i], NULL, exclusion_writer, NULL), 0);
    for (int i = 0; i < EXCLUSION_WRITERS; i++)
        join_within(writers[i], 120);
    atomic_store(&writers_done, true);
    for (int i = 0; i < EXCLUSION_READERS; i++)
        join_within(readers[i], 30);
    assert_int_equal(atomic_load(&torn_reads), 0);
    assert_int_equal(atomic_load(&readers_beside_writer), 0);
    assert_int_equal(atomic_load(&writers_beside_writer), 0);
    assert_int_equal(guarded.first, (uint64_t)EXCLUSION_WRITERS * EXCLUSION_WRITES);
    assert_int_equal(guarded.second, guarded.first);
    assert_true(atomic_load(&reads_done) >= EXCLUSION_READERS);
}

/* ---- Nesting ------------------------------------------------------------- */

static void *write_once(void *arg)
{
    vs_registry_lock_write();
    atomic_store((_Atomic bool *)arg, true);
    vs_registry_lock_release();
    return NULL;
}

static void test_reads_nest(void **state)
{
    (void)state;
    _Atomic bool written = false;
    pthread_t writer;

    vs_registry_lock_read();
    vs_registry_lock_read();
    assert_true(vs_registry_lock_reading());
    vs_registry_lock_release();
    assert_true(vs_registry_lock_reading());
    /* The outer read still holds: a writer waits. */
    assert_int_equal(pthread_create(&writer, NULL, write_once, (void *)&written), 0);
    sleep_us(20000);
    assert_false(atomic_load(&written));
    vs_registry_lock_release();
    assert_false(vs_registry_lock_reading());
    join_within(writer, 10);
    assert_true(atomic_load(&written));

    vs_registry_lock_write();
    assert_true(vs_registry_lock_writing());
    vs_registry_lock_release();
    assert_false(vs_registry_lock_writing());
}

/* ---- A read waiting on another thread's read ---------------------------- */

static _Atomic int chain_stage; /* 1: the first read holds; 2: the writer is on its way; 3: the second read happened */
static _Atomic unsigned chain_delay_us; /* how long the second reader gives the writer to start waiting */

static void *chain_first_reader(void *arg)
{
    (void)arg;
    vs_registry_lock_read();
    atomic_store(&chain_stage, 1);
    /* Held until the other thread's read happened: with a lock that
     * queued that read behind the waiting writer, this never ends. */
    while (atomic_load(&chain_stage) != 3)
        sleep_us(100);
    vs_registry_lock_release();
    return NULL;
}

static void *chain_writer(void *arg)
{
    while (atomic_load(&chain_stage) != 1)
        sleep_us(100);
    atomic_store(&chain_stage, 2);
    vs_registry_lock_write();
    atomic_store((_Atomic bool *)arg, true);
    vs_registry_lock_release();
    return NULL;
}

static void *chain_second_reader(void *arg)
{
    (void)arg;
    while (atomic_load(&chain_stage) != 2)
        sleep_us(100);
    sleep_us(atomic_load(&chain_delay_us)); /* the writer now waits for the first read */
    vs_registry_lock_read();
    atomic_store(&chain_stage, 3);
    vs_registry_lock_release();
    return NULL;
}

/* One run of the chain; whether the writer stepped back in it. */
static bool chain_run(unsigned delay_us)
{
    _Atomic bool written = false;
    pthread_t first, writer, second;
    unsigned long retreats = vs_registry_lock_write_retreats();

    atomic_store(&chain_stage, 0);
    atomic_store(&chain_delay_us, delay_us);
    assert_int_equal(pthread_create(&first, NULL, chain_first_reader, NULL), 0);
    assert_int_equal(pthread_create(&writer, NULL, chain_writer, (void *)&written), 0);
    assert_int_equal(pthread_create(&second, NULL, chain_second_reader, NULL), 0);
    join_within(second, 20);
    join_within(first, 20);
    join_within(writer, 20);
    assert_true(atomic_load(&written));
    return vs_registry_lock_write_retreats() > retreats;
}

static void test_writer_steps_back_for_a_read_that_waits_on_another(void **state)
{
    (void)state;
    /* Every run must end (no deadlock). The second read must come while
     * the writer waits, or the writer never has to step back: on a loaded
     * machine the writer may start late, so the delay grows until one run
     * shows the step back. */
    bool stepped_back = false;
    for (unsigned delay_us = 5000; delay_us <= 320000 && !stepped_back; delay_us *= 4)
        stepped_back = chain_run(delay_us);
    assert_true(stepped_back);
}

/* ---- Records ------------------------------------------------------------- */

static void *read_once(void *arg)
{
    (void)arg;
    vs_registry_lock_read();
    vs_registry_lock_release();
    return NULL;
}

static void test_records_are_reused_after_threads_exit(void **state)
{
    (void)state;
    read_once(NULL); /* this thread's own record */
    unsigned before = vs_registry_lock_reader_records();
    for (int i = 0; i < 50; i++) {
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, read_once, NULL), 0);
        join_within(t, 10);
    }
    /* Each thread ended before the next began: one record served them all
     * (none at all when an earlier test's exited threads left records). */
    assert_true(vs_registry_lock_reader_records() <= before + 1);
    /* And the lock still works for everyone. */
    vs_registry_lock_write();
    vs_registry_lock_release();
}

/* ---- fork ---------------------------------------------------------------- */

static _Atomic bool fork_reader_holds, fork_done;

static void *fork_reader(void *arg)
{
    (void)arg;
    vs_registry_lock_read();
    atomic_store(&fork_reader_holds, true);
    while (!atomic_load(&fork_done))
        sleep_us(1000);
    vs_registry_lock_release();
    return NULL;
}

static void test_forked_child_writes_although_a_parent_thread_read(void **state)
{
    (void)state;
    pthread_t reader;
    assert_int_equal(pthread_create(&reader, NULL, fork_reader, NULL), 0);
    while (!atomic_load(&fork_reader_holds))
        sleep_us(100);
    unsigned long retreats = vs_registry_lock_write_retreats();
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        /* The reading thread does not exist here: its read is over. */
        alarm(10);
        vs_registry_lock_write();
        vs_registry_lock_release();
        _exit(vs_registry_lock_write_retreats() == retreats ? 0 : 3);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    atomic_store(&fork_done, true);
    join_within(reader, 10);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readers_and_writers_exclude_each_other),
        cmocka_unit_test(test_reads_nest),
        cmocka_unit_test(test_writer_steps_back_for_a_read_that_waits_on_another),
        cmocka_unit_test(test_records_are_reused_after_threads_exit),
        cmocka_unit_test(test_forked_child_writes_although_a_parent_thread_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

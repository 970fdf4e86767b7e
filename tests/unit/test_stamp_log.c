/* test_stamp_log.c: unit tests of shim/stamp_log.c with the registry: the
 * uses of settled allocations logged by operations on several threads are
 * all counted, once per operation, once a flush has stamped them, whatever
 * order the logs are stamped in; the stamp thread stamps them by itself;
 * a logged use of an address freed meanwhile does no harm. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "registry.h"
#include "stamp_log.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define BASE ((uintptr_t)0x7f0000000000ull)
#define THREADS 4
#define OPERATIONS 3000

static int clear(void **state)
{
    (void)state;
    vs_stamp_log_flush(); /* nothing logged outlives its test */
    vs_registry_clear();
    return 0;
}

static void add(uintptr_t base, uint64_t size)
{
    vs_alloc_desc_t desc = {.base = base, .size = size, .device = 0, .kind = VS_ALLOC_DEVICE};
    assert_int_equal(vs_registry_add(&desc, NULL), 0);
}

static vs_alloc_info_t info_of(uintptr_t base)
{
    vs_alloc_info_t info;
    assert_int_equal(vs_registry_find(base, &info), 0);
    return info;
}

/* One operation, as the launch path makes it: the touch, the settled uses
 * left for after the submission, then logged. Returns its sequence number. */
static uint64_t operate(const uintptr_t *words, size_t count)
{
    uintptr_t settled[VS_SETTLED_MAX];
    vs_touch_t touch = {.seq = vs_registry_next_seq(), .settled = settled, .settled_cap = VS_SETTLED_MAX};
    vs_registry_read_begin();
    vs_registry_touch_many_registry_locked(words, count, &touch);
    vs_registry_stamp_settled_registry_locked(&touch);
    vs_registry_read_end();
    return touch.seq;
}

/* Two small allocations sharing a page (settled), a small one alone in a
 * page of its own, and an evictable one. */
static const uintptr_t shared_a = BASE, shared_b = BASE + 64 * KiB, alone = BASE + 8 * MiB,
                       evictable = BASE + 16 * MiB;

static void add_all(void)
{
    add(shared_a, 64 * KiB);
    add(shared_b, 64 * KiB);
    add(alone, 64 * KiB);
    add(evictable, 4 * MiB);
}

static _Atomic uint64_t latest_seq;

static void *operate_many(void *arg)
{
    (void)arg;
    /* Two words into the first, one into each other: one use each. */
    const uintptr_t words[] = {shared_a + 8, shared_a + 32 * KiB, shared_b + 100, alone + 4 * KiB, evictable + MiB};
    for (int i = 0; i < OPERATIONS; i++) {
        uint64_t seq = operate(words, sizeof words / sizeof words[0]);
        uint64_t seen = atomic_load(&latest_seq);
        while (seen < seq && !atomic_compare_exchange_weak(&latest_seq, &seen, seq))
            continue;
    }
    return NULL;
}

static void test_stamp_log_counts_every_logged_use_once_per_operation(void **state)
{
    (void)state;
    add_all();
    atomic_store(&latest_seq, 0);
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, operate_many, NULL), 0);
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    /* The threads are gone; what they logged is still stamped, and
     * nothing more than they logged. */
    assert_true(info_of(shared_a).use_count <= THREADS * OPERATIONS);
    vs_stamp_log_flush();
    assert_int_equal(vs_stamp_log_pending(), 0);
    /* One stamper at a time: nothing lost, nothing counted twice. */
    const uintptr_t settled[] = {shared_a, shared_b, alone};
    for (size_t i = 0; i < sizeof settled / sizeof settled[0]; i++) {
        vs_alloc_info_t info = info_of(settled[i]);
        assert_int_equal(info.use_count, THREADS * OPERATIONS);
        assert_int_equal(info.last_use_seq, atomic_load(&latest_seq));
    }
    /* The evictable one was stamped at each operation by its own thread
     * (racing stamps may lose a use there, never add one). */
    vs_alloc_info_t info = info_of(evictable);
    assert_true(info.use_count > 0 && info.use_count <= THREADS * OPERATIONS);
}

static void test_stamp_log_thread_stamps_without_a_flush(void **state)
{
    (void)state;
    add_all();
    const uintptr_t words[] = {alone + 16};
    uint64_t seq = operate(words, 1);
    /* The stamp thread drains at least every 100 ms. */
    for (int waited = 0; vs_stamp_log_pending() != 0 && waited < 100; waited++)
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    assert_int_equal(vs_stamp_log_pending(), 0);
    assert_int_equal(info_of(alone).use_count, 1);
    assert_int_equal(info_of(alone).last_use_seq, seq);
}

static void test_stamp_log_use_of_an_address_freed_meanwhile_does_no_harm(void **state)
{
    (void)state;
    add_all();
    /* Uses of two are logged; both go before they are stamped: an
     * evictable allocation takes the first one's address (it is not
     * stamped: the use was not its own), nothing takes the second's (its
     * use finds nothing). */
    const uintptr_t words[] = {shared_b + 8, alone + 8};
    (void)operate(words, 2);
    assert_int_equal(vs_registry_remove(alone, 1u << VS_ALLOC_DEVICE, NULL), 0);
    add(alone, 4 * MiB);
    assert_int_equal(vs_registry_remove(shared_b, 1u << VS_ALLOC_DEVICE, NULL), 0);
    vs_stamp_log_flush();
    assert_int_equal(vs_stamp_log_pending(), 0);
    assert_int_equal(info_of(alone).use_count, 0);
    assert_int_equal(info_of(shared_a).use_count, 0);
    assert_int_equal(vs_registry_find(shared_b, NULL), -ENOENT);
}

int main(void)
{
    vs_stamp_log_enable();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_stamp_log_counts_every_logged_use_once_per_operation, clear),
        cmocka_unit_test_setup(test_stamp_log_thread_stamps_without_a_flush, clear),
        cmocka_unit_test_setup(test_stamp_log_use_of_an_address_freed_meanwhile_does_no_harm, clear),
    };
    int failed = cmocka_run_group_tests_name("stamp_log.c", tests, NULL, NULL);
    vs_stamp_log_stop();
    return failed;
}

/* test_cap.c: unit tests of shim/cap.c: exact refusals at the limit,
 * percentage limits, the virtual memory figures, concurrent reservations. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cap.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static int fake_total(int device, uint64_t *bytes)
{
    *bytes = (uint64_t)(device + 1) * 8 * GiB;
    return 0;
}

static void configure(const char *limit)
{
    vs_limit_t limits[VS_MAX_DEVICES];
    memset(limits, 0, sizeof limits);
    if (limit != NULL)
        assert_int_equal(vs_config_parse_limit(limit, limits), 0);
    vs_cap_configure(limits, fake_total);
    for (int d = 0; d < 4; d++)
        vs_cap_release(d, UINT64_MAX / 2); /* back to zero: release never wraps */
}

static void test_cap_four_64mib_fit_in_256mib_and_the_fifth_is_refused(void **state)
{
    (void)state;
    configure("256M");
    for (int i = 0; i < 4; i++)
        assert_int_equal(vs_cap_reserve(0, 64 * MiB), 0);
    assert_int_equal(vs_cap_reserve(0, 64 * MiB), -ENOMEM);
    assert_int_equal(vs_cap_reserve(0, 1), -ENOMEM);
    assert_int_equal(vs_cap_used(0), 256 * MiB);
    vs_cap_release(0, 64 * MiB);
    assert_int_equal(vs_cap_reserve(0, 64 * MiB), 0);
}

static void test_cap_refusal_leaves_usage_untouched(void **state)
{
    (void)state;
    configure("100M");
    assert_int_equal(vs_cap_reserve(0, 60 * MiB), 0);
    assert_int_equal(vs_cap_reserve(0, 41 * MiB), -ENOMEM);
    assert_int_equal(vs_cap_used(0), 60 * MiB);
    assert_int_equal(vs_cap_reserve(0, 40 * MiB), 0);
}

static void test_cap_unset_limit_counts_without_refusing(void **state)
{
    (void)state;
    configure(NULL);
    assert_int_equal(vs_cap_limit(0), UINT64_MAX);
    assert_int_equal(vs_cap_reserve(0, 1ull << 50), 0);
    assert_int_equal(vs_cap_used(0), 1ull << 50);
}

static void test_cap_zero_limit_refuses_everything(void **state)
{
    (void)state;
    configure("0");
    assert_int_equal(vs_cap_reserve(0, 1), -ENOMEM);
    assert_int_equal(vs_cap_used(0), 0);
}

static void test_cap_percentage_resolves_per_device(void **state)
{
    (void)state;
    configure("50%");
    assert_int_equal(vs_cap_limit(0), 4 * GiB);
    assert_int_equal(vs_cap_limit(1), 8 * GiB);
}

static void test_cap_device_list_limits_each_device_apart(void **state)
{
    (void)state;
    configure("0:1G,2:2G");
    assert_int_equal(vs_cap_reserve(0, GiB), 0);
    assert_int_equal(vs_cap_reserve(0, 1), -ENOMEM);
    assert_int_equal(vs_cap_reserve(1, 100 * GiB), 0);
    assert_int_equal(vs_cap_reserve(2, 2 * GiB + 1), -ENOMEM);
}

static void test_cap_meminfo_total_is_min_of_limit_and_physical(void **state)
{
    uint64_t free_bytes, total;
    (void)state;
    configure("256M");
    assert_int_equal(vs_cap_reserve(0, 64 * MiB), 0);
    vs_cap_meminfo(0, 1 * GiB, 1 * GiB, &free_bytes, &total);
    assert_int_equal(total, 256 * MiB);
    assert_int_equal(free_bytes, 192 * MiB);
    /* A limit above the device: the device's own figures. */
    configure("64G");
    vs_cap_meminfo(0, 6 * GiB, 8 * GiB, &free_bytes, &total);
    assert_int_equal(total, 8 * GiB);
    assert_int_equal(free_bytes, 6 * GiB);
    /* Never more free than the device really has. */
    configure("4G");
    vs_cap_meminfo(0, 1 * GiB, 8 * GiB, &free_bytes, &total);
    assert_int_equal(total, 4 * GiB);
    assert_int_equal(free_bytes, 1 * GiB);
}

static void test_cap_release_never_wraps_below_zero(void **state)
{
    (void)state;
    configure("1G");
    assert_int_equal(vs_cap_reserve(0, MiB), 0);
    vs_cap_release(0, 2 * MiB);
    assert_int_equal(vs_cap_used(0), 0);
}

static _Atomic int granted;

static void *reserve_loop(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        if (vs_cap_reserve(0, MiB) == 0)
            granted++;
    }
    return NULL;
}

static void test_cap_concurrent_reservations_never_pass_the_limit(void **state)
{
    pthread_t threads[8];
    (void)state;
    configure("1000M");
    granted = 0;
    for (int t = 0; t < 8; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, reserve_loop, NULL), 0);
    for (int t = 0; t < 8; t++)
        pthread_join(threads[t], NULL);
    assert_int_equal(granted, 1000);
    assert_int_equal(vs_cap_used(0), 1000 * MiB);
    assert_int_equal(vs_cap_peak(0) >= 1000 * MiB, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap_four_64mib_fit_in_256mib_and_the_fifth_is_refused),
        cmocka_unit_test(test_cap_refusal_leaves_usage_untouched),
        cmocka_unit_test(test_cap_unset_limit_counts_without_refusing),
        cmocka_unit_test(test_cap_zero_limit_refuses_everything),
        cmocka_unit_test(test_cap_percentage_resolves_per_device),
        cmocka_unit_test(test_cap_device_list_limits_each_device_apart),
        cmocka_unit_test(test_cap_meminfo_total_is_min_of_limit_and_physical),
        cmocka_unit_test(test_cap_release_never_wraps_below_zero),
        cmocka_unit_test(test_cap_concurrent_reservations_never_pass_the_limit),
    };
    return cmocka_run_group_tests_name("cap.c", tests, NULL, NULL);
}

/* test_host_memory.c: unit tests of shim/host_memory.c against fake
 * /proc/self/cgroup and /sys/fs/cgroup trees: the tightest limit of a v2
 * cgroup and its ancestors, v1's memory controller and its "unlimited"
 * value, no limit at all, and the host pool's limit that follows
 * (a percentage, the default half, an explicit size above what the cgroup
 * allows). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "host_memory.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static char root[64];

/* Writes `text` at root/relative, creating the directories on the way. */
static void put(const char *relative, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, relative);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(path, 0700);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int make_root(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/vramshim-host-memory-XXXXXX");
    return mkdtemp(root) != NULL ? 0 : -1;
}

static int remove_root(void **state)
{
    char command[128];
    (void)state;
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    return system(command) == 0 ? 0 : -1;
}

static void test_cgroup_v2_tightest_of_the_cgroup_and_its_ancestors(void **state)
{
    uint64_t bytes = 0;
    (void)state;
    put("proc/self/cgroup", "0::/pod/container\n");
    put("sys/fs/cgroup/pod/memory.max", "1073741824\n");
    put("sys/fs/cgroup/pod/container/memory.max", "max\n");
    assert_int_equal(vs_host_memory_cgroup_limit(root, &bytes), 0);
    assert_int_equal(bytes, GiB);
    put("sys/fs/cgroup/pod/container/memory.max", "268435456\n");
    assert_int_equal(vs_host_memory_cgroup_limit(root, &bytes), 0);
    assert_int_equal(bytes, 256 * MiB);
}

static void test_cgroup_v2_namespace_root_reads_the_mount_root(void **state)
{
    uint64_t bytes = 0;
    (void)state;
    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/memory.max", "536870912\n");
    assert_int_equal(vs_host_memory_cgroup_limit(root, &bytes), 0);
    assert_int_equal(bytes, 512 * MiB);
}

static void test_cgroup_v1_memory_controller_and_unlimited(void **state)
{
    uint64_t bytes = 0;
    (void)state;
    put("proc/self/cgroup", "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n");
    put("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
    assert_int_equal(vs_host_memory_cgroup_limit(root, &bytes), 0);
    assert_int_equal(bytes, UINT64_MAX);
    put("sys/fs/cgroup/memory/docker/memory.limit_in_bytes", "2147483648\n");
    assert_int_equal(vs_host_memory_cgroup_limit(root, &bytes), 0);
    assert_int_equal(bytes, 2 * GiB);
}

static void test_cgroup_none_means_physical_memory(void **state)
{
    uint64_t bytes = 0;
    (void)state;
    put("proc/self/cgroup", "0::/user.slice\n");
    assert_int_equal(vs_host_memory_cgroup_limit(root, &bytes), 0);
    assert_int_equal(bytes, UINT64_MAX);
    uint64_t physical = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    assert_int_equal(vs_host_memory_available(root), physical);
}

static void test_pool_limit_follows_the_cgroup(void **state)
{
    vs_config_t cfg;
    char why[256];
    (void)state;
    put("proc/self/cgroup", "0::/small\n");
    put("sys/fs/cgroup/small/memory.max", "1073741824\n");
    memset(&cfg, 0, sizeof cfg);
    /* Default: half of what the cgroup allows, not of the machine. */
    assert_int_equal(vs_host_memory_pool_limit(&cfg, root, why, sizeof why), 512 * MiB);
    assert_string_equal(why, "");
    cfg.host_limit_ppm = 250000; /* 25% */
    assert_int_equal(vs_host_memory_pool_limit(&cfg, root, why, sizeof why), 256 * MiB);
    cfg.host_limit_ppm = 0;
    cfg.host_limit = 768 * MiB;
    assert_int_equal(vs_host_memory_pool_limit(&cfg, root, why, sizeof why), 768 * MiB);
    cfg.host_limit = 4 * GiB; /* more than the cgroup allows: lowered, said */
    assert_int_equal(vs_host_memory_pool_limit(&cfg, root, why, sizeof why), 512 * MiB);
    assert_non_null(strstr(why, "VRAMSHIM_HOST_LIMIT"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cgroup_v2_tightest_of_the_cgroup_and_its_ancestors, make_root, remove_root),
        cmocka_unit_test_setup_teardown(test_cgroup_v2_namespace_root_reads_the_mount_root, make_root, remove_root),
        cmocka_unit_test_setup_teardown(test_cgroup_v1_memory_controller_and_unlimited, make_root, remove_root),
        cmocka_unit_test_setup_teardown(test_cgroup_none_means_physical_memory, make_root, remove_root),
        cmocka_unit_test_setup_teardown(test_pool_limit_follows_the_cgroup, make_root, remove_root),
    };
    return cmocka_run_group_tests_name("host_memory.c", tests, NULL, NULL);
}

/* test_snapshot_writer.c: the writer (shim/snapshot_writer.c) as the shim
 * uses it, checked through the reader the command uses
 * (tools/snapshot_reader.c): the object's name, mode and size, stale
 * objects, unlinking, capacity, the publisher thread, and the reader's
 * errors for dead and recycled pids.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "snapshot_reader.h"
#include "snapshot_writer.h"

#include "snapshot_pattern.h"

static void shm_path(char *buf, size_t len, pid_t pid)
{
    snprintf(buf, len, "/dev/shm/vramshim-%u-%llu-%d", (unsigned)geteuid(), vs_snapshot_pid_namespace(),
             (int)pid);
}

static vs_snapshot_t *open_own(uint32_t capacity)
{
    vs_snapshot_identity_t id = {.row_capacity = capacity, .mode = VS_SNAPSHOT_MODE_CAP,
                                 .program = "writer-test"};
    int err = 0;
    vs_snapshot_t *snap = vs_snapshot_open(&id, &err);
    assert_non_null(snap);
    return snap;
}

static void test_writer_open_creates_owner_only_object_of_fixed_size(void **state)
{
    (void)state;
    vs_snapshot_t *snap = open_own(100);
    char path[128];
    struct stat st;
    shm_path(path, sizeof(path), getpid());
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    assert_int_equal((size_t)st.st_size,
                     sizeof(vs_snapshot_header_t) + 100 * sizeof(vs_snapshot_row_t));

    vs_snapshot_copy_t copy;
    char msg[256];
    assert_int_equal(vs_snapshot_read_pid(getpid(), &copy, msg, sizeof(msg)), 0);
    assert_string_equal(copy.view.header->program, "writer-test");
    assert_int_equal(copy.view.header->pid, getpid());
    assert_int_equal(copy.view.header->mode, VS_SNAPSHOT_MODE_CAP);
    assert_int_equal(copy.view.row_count, 0);
    assert_true(copy.view.header->start_ticks != 0);
    vs_snapshot_copy_free(&copy);

    vs_snapshot_close(snap, true);
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(errno, ENOENT);
}

static void test_writer_open_replaces_stale_object_with_same_pid(void **state)
{
    (void)state;
    char name[VS_SNAPSHOT_NAME_MAX];
    vs_snapshot_name(name, sizeof(name), (unsigned)geteuid(), getpid());
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "garbage", 7), 7);
    close(fd);

    vs_snapshot_t *snap = open_own(16);
    vs_snapshot_copy_t copy;
    char msg[256];
    assert_int_equal(vs_snapshot_read_pid(getpid(), &copy, msg, sizeof(msg)), 0);
    vs_snapshot_copy_free(&copy);
    vs_snapshot_close(snap, true);
}

static void test_writer_close_without_unlink_leaves_object(void **state)
{
    (void)state;
    vs_snapshot_t *snap = open_own(16);
    vs_snapshot_close(snap, false);
    char path[128], name[VS_SNAPSHOT_NAME_MAX];
    struct stat st;
    shm_path(path, sizeof(path), getpid());
    assert_int_equal(stat(path, &st), 0);
    vs_snapshot_name(name, sizeof(name), (unsigned)geteuid(), getpid());
    assert_int_equal(shm_unlink(name), 0);
}

static void test_writer_close_in_forked_child_keeps_parent_snapshot(void **state)
{
    (void)state;
    vs_snapshot_t *snap = open_own(16);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        vs_snapshot_close(snap, true); /* what an inherited atexit handler does */
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    vs_snapshot_copy_t copy;
    char msg[256];
    assert_int_equal(vs_snapshot_read_pid(getpid(), &copy, msg, sizeof(msg)), 0);
    vs_snapshot_copy_free(&copy);
    vs_snapshot_close(snap, true);
}

static void test_writer_rows_beyond_capacity_are_counted_as_dropped(void **state)
{
    (void)state;
    vs_snapshot_t *snap = open_own(4);
    vs_snapshot_row_t row = {.alloc_id = 1, .size = 4096};
    vs_snapshot_begin(snap);
    for (uint32_t i = 0; i < 4; i++) {
        row.alloc_id = i + 1;
        assert_int_equal(vs_snapshot_put_row(snap, i, &row), 0);
    }
    assert_int_equal(vs_snapshot_put_row(snap, 4, &row), -ENOSPC);
    vs_snapshot_set_row_count(snap, 9);
    vs_snapshot_end(snap);

    vs_snapshot_copy_t copy;
    char msg[256];
    assert_int_equal(vs_snapshot_read_pid(getpid(), &copy, msg, sizeof(msg)), 0);
    assert_int_equal(copy.view.row_count, 4);
    assert_int_equal(copy.view.header->rows_dropped, 5);
    assert_int_equal(copy.view.rows[3].alloc_id, 4);
    vs_snapshot_copy_free(&copy);
    vs_snapshot_close(snap, true);
}

static void test_writer_capacity_comes_from_environment(void **state)
{
    (void)state;
    setenv("VRAMSHIM_SNAPSHOT_ROWS", "10", 1);
    vs_snapshot_t *snap = open_own(0);
    assert_int_equal(vs_snapshot_capacity(snap), 10);
    vs_snapshot_close(snap, true);

    setenv("VRAMSHIM_SNAPSHOT_ROWS", "ten", 1);
    vs_snapshot_identity_t id = {0};
    int err = 0;
    assert_null(vs_snapshot_open(&id, &err));
    assert_int_equal(err, -EINVAL);
    unsetenv("VRAMSHIM_SNAPSHOT_ROWS");
}

typedef struct fill_state_s {
    uint64_t gen;
} fill_state_t;

static void fill_pattern(vs_snapshot_t *snap, void *ctx)
{
    fill_state_t *fs = ctx;
    vs_pattern_fill(snap, ++fs->gen);
}

static void test_publisher_publishes_periodically_and_on_flush(void **state)
{
    (void)state;
    vs_snapshot_t *snap = open_own(128);
    fill_state_t fs = {0};
    assert_int_equal(vs_snapshot_publisher_flush(snap), -ESRCH);
    assert_int_equal(vs_snapshot_publisher_start(snap, fill_pattern, &fs, 10), 0);
    assert_int_equal(vs_snapshot_publisher_flush(snap), 0);

    vs_snapshot_copy_t copy;
    char msg[256], why[256];
    assert_int_equal(vs_snapshot_read_pid(getpid(), &copy, msg, sizeof(msg)), 0);
    uint64_t first = copy.view.header->event_seq;
    assert_true(first >= 1);
    assert_int_equal(vs_pattern_check(copy.view.header, copy.view.rows, why, sizeof(why)), 0);
    vs_snapshot_copy_free(&copy);

    /* Without a flush, the period alone brings new publications. */
    uint64_t seen = first;
    for (int i = 0; i < 200 && seen < first + 3; i++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
        assert_int_equal(vs_snapshot_read_pid(getpid(), &copy, msg, sizeof(msg)), 0);
        seen = copy.view.header->event_seq;
        vs_snapshot_copy_free(&copy);
    }
    assert_true(seen >= first + 3);
    vs_snapshot_publisher_stop(snap);
    vs_snapshot_publisher_stop(snap); /* idempotent */
    vs_snapshot_close(snap, true);
}

static void test_reader_dead_pid_is_no_process_and_snapshot_removed(void **state)
{
    (void)state;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(0);
    assert_int_equal(waitpid(child, NULL, 0), child);

    /* A snapshot left behind by the dead child (as after SIGKILL). */
    vs_snapshot_identity_t id = {.pid = child, .row_capacity = 4, .program = "dead"};
    int err = 0;
    vs_snapshot_t *snap = vs_snapshot_open(&id, &err);
    assert_non_null(snap);
    vs_snapshot_close(snap, false);

    vs_snapshot_copy_t copy;
    char msg[256], path[128], expected[256];
    struct stat st;
    assert_int_equal(vs_snapshot_read_pid(child, &copy, msg, sizeof(msg)), -VS_READ_ERR_NO_PROCESS);
    shm_path(path, sizeof(path), child);
    snprintf(expected, sizeof(expected), "no process %d (removed its stale snapshot %s)",
             (int)child, path);
    assert_string_equal(msg, expected);
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(vs_snapshot_read_pid(child, &copy, msg, sizeof(msg)), -VS_READ_ERR_NO_PROCESS);
    snprintf(expected, sizeof(expected), "no process %d", (int)child);
    assert_string_equal(msg, expected);
}

static void test_reader_recycled_pid_is_not_under_shim_and_removed(void **state)
{
    (void)state;
    vs_snapshot_t *snap = open_own(4);
    /* Pretend the snapshot was written by an earlier process with our pid. */
    char name[VS_SNAPSHOT_NAME_MAX];
    vs_snapshot_name(name, sizeof(name), (unsigned)geteuid(), getpid());
    int fd = shm_open(name, O_RDWR, 0);
    assert_true(fd >= 0);
    vs_snapshot_header_t *h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(h != MAP_FAILED);
    __atomic_add_fetch(&h->start_ticks, 1, __ATOMIC_RELAXED);
    munmap(h, sizeof(*h));
    close(fd);

    vs_snapshot_copy_t copy;
    char msg[256];
    assert_int_equal(vs_snapshot_read_pid(getpid(), &copy, msg, sizeof(msg)),
                     -VS_READ_ERR_NOT_UNDER_SHIM);
    assert_non_null(strstr(msg, "removed the stale snapshot"));
    assert_int_equal(shm_unlink(name), -1);
    vs_snapshot_close(snap, false);
}

static void test_reader_live_process_without_snapshot_is_not_under_shim(void **state)
{
    (void)state;
    vs_snapshot_copy_t copy;
    char msg[256], path[128], expected[320];
    shm_path(path, sizeof(path), getpid());
    assert_int_equal(vs_snapshot_read_pid(getpid(), &copy, msg, sizeof(msg)),
                     -VS_READ_ERR_NOT_UNDER_SHIM);
    snprintf(expected, sizeof(expected),
             "process %d is not running under vramshim (no snapshot %s)", (int)getpid(), path);
    assert_string_equal(msg, expected);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writer_open_creates_owner_only_object_of_fixed_size),
        cmocka_unit_test(test_writer_open_replaces_stale_object_with_same_pid),
        cmocka_unit_test(test_writer_close_without_unlink_leaves_object),
        cmocka_unit_test(test_writer_close_in_forked_child_keeps_parent_snapshot),
        cmocka_unit_test(test_writer_rows_beyond_capacity_are_counted_as_dropped),
        cmocka_unit_test(test_writer_capacity_comes_from_environment),
        cmocka_unit_test(test_publisher_publishes_periodically_and_on_flush),
        cmocka_unit_test(test_reader_dead_pid_is_no_process_and_snapshot_removed),
        cmocka_unit_test(test_reader_recycled_pid_is_not_under_shim_and_removed),
        cmocka_unit_test(test_reader_live_process_without_snapshot_is_not_under_shim),
    };
    return cmocka_run_group_tests_name("snapshot_writer.c", tests, NULL, NULL);
}

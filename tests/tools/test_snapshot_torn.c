/* test_snapshot_torn.c: the seqlock. A thousand reads (more on a loaded
 * machine, until the writer has published ten times) while a writer
 * publishes as fast as it can never return a copy that mixes two
 * publications (snapshot_pattern.h derives every field from one
 * generation): once with the writer on a thread of this process (where
 * TSan checks the memory ordering), once from another process (the
 * fixture, as `vramshim` reads a running program).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "snapshot_reader.h"
#include "snapshot_writer.h"

#include "snapshot_pattern.h"

#define READS 1000

extern char **environ;
static const char *fixture_path;

/* Reads `pid` READS times, and on while fewer than DISTINCT generations
 * were seen (for at most READ_MORE_NS: on a loaded machine the writer may
 * not run during the first thousand reads); every copy must match one
 * generation, and the generations seen must change (the writer really was
 * writing). */
#define DISTINCT 10
#define READ_MORE_NS (10 * 1000000000ull)

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void read_many(pid_t pid)
{
    uint64_t first = 0, last = 0, distinct = 0, start = monotonic_ns();
    int i;
    for (i = 0; i < READS || (distinct < DISTINCT && monotonic_ns() - start < READ_MORE_NS); i++) {
        vs_snapshot_copy_t copy;
        char msg[256], why[256];
        int rc = vs_snapshot_read_pid(pid, &copy, msg, sizeof(msg));
        if (rc < 0)
            fail_msg("read %d: %s", i, msg);
        if (vs_pattern_check(copy.view.header, copy.view.rows, why, sizeof(why)) != 0)
            fail_msg("read %d: %s", i, why);
        uint64_t gen = copy.view.header->event_seq;
        if (i == 0)
            first = gen;
        if (gen != last)
            distinct++;
        last = gen;
        vs_snapshot_copy_free(&copy);
    }
    print_message("generations %llu..%llu, %llu distinct in %d reads\n",
                  (unsigned long long)first, (unsigned long long)last,
                  (unsigned long long)distinct, i);
    assert_true(distinct >= DISTINCT);
}

typedef struct churn_s {
    vs_snapshot_t *snap;
    bool stop;
} churn_t;

static void *churn_thread(void *arg)
{
    churn_t *c = arg;
    for (uint64_t gen = 2; !__atomic_load_n(&c->stop, __ATOMIC_RELAXED); gen++) {
        vs_snapshot_begin(c->snap);
        vs_pattern_fill(c->snap, gen);
        vs_snapshot_end(c->snap);
        /* Tens of thousands of publications a second (the shim makes a few):
         * a seqlock writer that never pauses starves its readers. */
        struct timespec ts = {0, 20000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void test_seqlock_reads_during_updates_in_process_never_torn(void **state)
{
    (void)state;
    vs_snapshot_identity_t id = {.row_capacity = 128, .program = "torn-thread"};
    int err = 0;
    churn_t c = {0};
    c.snap = vs_snapshot_open(&id, &err);
    assert_non_null(c.snap);
    vs_snapshot_begin(c.snap);
    vs_pattern_fill(c.snap, 1);
    vs_snapshot_end(c.snap);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, churn_thread, &c), 0);
    read_many(getpid());
    __atomic_store_n(&c.stop, true, __ATOMIC_RELAXED);
    pthread_join(thread, NULL);
    vs_snapshot_close(c.snap, true);
}

static void test_seqlock_reads_of_another_process_never_torn(void **state)
{
    (void)state;
    int to_child[2], from_child[2];
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(from_child), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to_child[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, to_child[1]);
    posix_spawn_file_actions_addclose(&fa, from_child[0]);
    char *argv[] = {(char *)fixture_path, "churn", "60", NULL};
    pid_t child;
    assert_int_equal(posix_spawn(&child, fixture_path, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(to_child[0]);
    close(from_child[1]);

    char line[64] = "";
    FILE *out = fdopen(from_child[0], "r");
    assert_non_null(fgets(line, sizeof(line), out));
    assert_int_equal(atoi(line + strlen("ready ")), child);

    read_many(child);

    close(to_child[1]); /* the fixture stops when its stdin closes */
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    fclose(out);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-OF-snapshot_fixture\n", argv[0]);
        return 2;
    }
    fixture_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seqlock_reads_during_updates_in_process_never_torn),
        cmocka_unit_test(test_seqlock_reads_of_another_process_never_torn),
    };
    return cmocka_run_group_tests_name("snapshot seqlock", tests, NULL, NULL);
}

/* test_spill.c: unit tests of shim/spill.c (the disk tier's store) and
 * shim/spill_io.c (its I/O seam and the `VRAMSHIM_IO_FAULT` layer).
 *
 * The store: byte-exact round trips of several sizes and source layouts,
 * fragmented files (a write gathers holes, then grows the file), space
 * given back and reused, every fault the seam injects (ENOSPC at reserve,
 * EIO on write and read, short transfers, corruption caught by the
 * checksums), the O_TMPFILE and O_DIRECT fallbacks, a directory that stays
 * empty while spills happen and after a SIGKILL in the middle of them, the
 * start-up checks of `vs_spill_configure`
 * and writers on several threads. The seam: the fault parser's accepted
 * and rejected forms and which calls `after`, `every` and `times` hit.
 *
 * Pinned memory is `aligned_alloc`. Each test gets a fresh directory under
 * the working directory (the build tree, on disk) and leaves it empty; a
 * fake base table of I/O functions (`watch_io`) counts calls and scans the
 * directory on every reserve and write. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "spill.h"
#include "spill_io.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define BLOCK VS_SPILL_BLOCK_BYTES

static char test_dir[256];
static char log_path[PATH_MAX + 32];

/* ---- Helpers ------------------------------------------------------------ */

/* Entries of `dir` other than . and .. */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (d == NULL)
        return -1;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static bool on_tmpfs(const char *dir)
{
    struct statfs fs;
    return statfs(dir, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

static uint64_t round_up(uint64_t n, uint64_t to)
{
    return (n + to - 1) / to * to;
}

/* `bytes` (a multiple of 4096) of pinned-like memory filled from `seed`. */
static unsigned char *pattern_buffer(uint64_t bytes, uint32_t seed)
{
    unsigned char *p = aligned_alloc(4096, bytes);
    assert_non_null(p);
    uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (uint64_t i = 0; i < bytes; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    return p;
}

static void *zeroed_buffer(uint64_t bytes)
{
    void *p = aligned_alloc(4096, bytes);
    assert_non_null(p);
    memset(p, 0, bytes);
    return p;
}

/* Spills `bytes` of `src` (one extent) and checks the copy's shape. */
static vs_spill_copy_t spill_one(unsigned char *src, uint64_t bytes)
{
    vs_host_extent_t extent = {src, round_up(bytes, 4096)};
    vs_spill_copy_t copy;
    assert_int_equal(vs_spill_write(&extent, 1, bytes, &copy), 0);
    assert_int_equal(copy.bytes, round_up(bytes, BLOCK));
    assert_non_null(copy.checksums);
    uint64_t total = 0;
    for (uint32_t i = 0; i < copy.count; i++) {
        assert_int_equal(copy.extents[i].offset % BLOCK, 0);
        assert_int_equal(copy.extents[i].bytes % BLOCK, 0);
        total += copy.extents[i].bytes;
    }
    assert_int_equal(total, copy.bytes);
    return copy;
}

/* Reads the whole copy back: the first `bytes` equal `expected`, the rest
 * of the last 4 KiB page is the source's too, the padding after it zeros. */
static void check_copy(const vs_spill_copy_t *copy, const unsigned char *expected, uint64_t bytes)
{
    unsigned char *back = aligned_alloc(4096, copy->bytes);
    assert_non_null(back);
    memset(back, 0xa5, copy->bytes);
    assert_int_equal(vs_spill_read(copy, 0, copy->bytes / BLOCK, back), 0);
    assert_memory_equal(back, expected, round_up(bytes, 4096));
    for (uint64_t i = round_up(bytes, 4096); i < copy->bytes; i++)
        if (back[i] != 0)
            fail_msg("padding byte %llu is %u, not 0", (unsigned long long)i, back[i]);
    free(back);
}

static size_t log_size(void)
{
    struct stat st;
    return stat(log_path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* What was logged since `from` (a size from `log_size`). */
static char *log_since(size_t from)
{
    static char text[8192];
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    fseek(f, (long)from, SEEK_SET);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static void set_faults(const char *text)
{
    vs_spill_io_faults_t faults;
    assert_int_equal(vs_spill_io_parse_faults(text, &faults), 0);
    vs_spill_io_set_faults(&faults);
}

/* ---- A watching base table ---------------------------------------------- */

/* Counts calls, remembers the spill file's descriptor and checks, on every
 * reserve and write, that the directory holds no entry: the file has no
 * name at any time a spill can be interrupted. */
static struct {
    atomic_int open_temps, reserves, punches, truncates, writes, reads, closes;
    atomic_int named_entries_seen;
    atomic_int last_fd;
    int open_errno; /* nonzero: open_temp fails with it */
} watch;

static int watch_open_temp(const char *dir, bool *direct_io)
{
    atomic_fetch_add(&watch.open_temps, 1);
    if (watch.open_errno != 0) {
        errno = watch.open_errno;
        return -1;
    }
    int fd = vs_spill_io_posix.open_temp(dir, direct_io);
    if (fd >= 0)
        atomic_store(&watch.last_fd, fd);
    return fd;
}

static void watch_scan(void)
{
    if (dir_entries(test_dir) != 0)
        atomic_fetch_add(&watch.named_entries_seen, 1);
}

static int watch_reserve(int fd, uint64_t offset, uint64_t bytes)
{
    atomic_fetch_add(&watch.reserves, 1);
    watch_scan();
    return vs_spill_io_posix.reserve(fd, offset, bytes);
}

static int watch_punch(int fd, uint64_t offset, uint64_t bytes)
{
    atomic_fetch_add(&watch.punches, 1);
    return vs_spill_io_posix.punch(fd, offset, bytes);
}

static int watch_truncate(int fd, uint64_t bytes)
{
    atomic_fetch_add(&watch.truncates, 1);
    return vs_spill_io_posix.truncate(fd, bytes);
}

static ssize_t watch_write_at(int fd, const void *buf, size_t bytes, uint64_t offset)
{
    atomic_fetch_add(&watch.writes, 1);
    watch_scan();
    return vs_spill_io_posix.write_at(fd, buf, bytes, offset);
}

static ssize_t watch_read_at(int fd, void *buf, size_t bytes, uint64_t offset)
{
    atomic_fetch_add(&watch.reads, 1);
    return vs_spill_io_posix.read_at(fd, buf, bytes, offset);
}

static int watch_close(int fd)
{
    atomic_fetch_add(&watch.closes, 1);
    return vs_spill_io_posix.close(fd);
}

static const vs_spill_io_t watch_io = {
    .open_temp = watch_open_temp,
    .reserve = watch_reserve,
    .punch = watch_punch,
    .truncate = watch_truncate,
    .write_at = watch_write_at,
    .read_at = watch_read_at,
    .close = watch_close,
};

/* ---- Fixtures ----------------------------------------------------------- */

static int setup_dir(void **state)
{
    (void)state;
    snprintf(test_dir, sizeof test_dir, "spill-test-XXXXXX");
    if (mkdtemp(test_dir) == NULL)
        return -1;
    memset(&watch, 0, sizeof watch);
    atomic_store(&watch.last_fd, -1);
    vs_spill_io_set_base(&watch_io);
    return 0;
}

/* The store configured on the test directory. */
static int setup_store(void **state)
{
    char err[512];
    if (setup_dir(state) != 0)
        return -1;
    return vs_spill_configure(test_dir, err, sizeof err) == 0 ? 0 : -1;
}

static int teardown_store(void **state)
{
    (void)state;
    vs_spill_shutdown();
    vs_spill_io_set_faults(NULL);
    vs_spill_io_set_sys(NULL);
    vs_spill_io_set_base(NULL);
    /* Whatever happened, nothing is left in the directory. */
    int left = dir_entries(test_dir);
    int named = atomic_load(&watch.named_entries_seen);
    rmdir(test_dir);
    return left == 0 && named == 0 ? 0 : -1;
}

/* ---- Round trips -------------------------------------------------------- */

static void test_spill_round_trips_of_several_sizes_are_byte_exact(void **state)
{
    (void)state;
    /* A page, a partial block, one block, several, and more than one
     * 32 MiB chunk of I/O. */
    const uint64_t sizes[] = {4 * KiB, 1 * MiB + 4 * KiB, BLOCK, 3 * BLOCK + 12 * KiB, 20 * BLOCK, 4 * KiB + 17};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *src = pattern_buffer(round_up(sizes[i], 4096), (uint32_t)i);
        vs_spill_copy_t copy = spill_one(src, sizes[i]);
        check_copy(&copy, src, sizes[i]);
        vs_spill_release(&copy);
        free(src);
    }
    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_int_equal(s.writes, 6);
    assert_int_equal(s.reads, 6);
    assert_int_equal(s.used_bytes, 0);
    assert_int_equal(s.io_errors, 0);
    assert_int_equal(s.checksum_failures, 0);
}

static void test_spill_partial_reads_return_the_blocks_asked_for(void **state)
{
    (void)state;
    uint64_t bytes = 5 * BLOCK;
    unsigned char *src = pattern_buffer(bytes, 7);
    vs_spill_copy_t copy = spill_one(src, bytes);
    unsigned char *back = zeroed_buffer(2 * BLOCK);
    assert_int_equal(vs_spill_read(&copy, 2, 2, back), 0);
    assert_memory_equal(back, src + 2 * BLOCK, 2 * BLOCK);
    assert_int_equal(vs_spill_read(&copy, 4, 1, back), 0);
    assert_memory_equal(back, src + 4 * BLOCK, BLOCK);
    vs_spill_release(&copy);
    free(back);
    free(src);
}

static void test_spill_source_of_several_extents_round_trips(void **state)
{
    (void)state;
    /* A fragmented host copy: 2 MiB, 4 MiB, then a last extent of 1 MiB. */
    unsigned char *a = pattern_buffer(BLOCK, 1), *b = pattern_buffer(2 * BLOCK, 2), *c = pattern_buffer(MiB, 3);
    vs_host_extent_t src[] = {{a, BLOCK}, {b, 2 * BLOCK}, {c, MiB}};
    vs_spill_copy_t copy;
    assert_int_equal(vs_spill_write(src, 3, 3 * BLOCK + MiB, &copy), 0);
    unsigned char *back = zeroed_buffer(copy.bytes);
    assert_int_equal(vs_spill_read(&copy, 0, copy.bytes / BLOCK, back), 0);
    assert_memory_equal(back, a, BLOCK);
    assert_memory_equal(back + BLOCK, b, 2 * BLOCK);
    assert_memory_equal(back + 3 * BLOCK, c, MiB);
    vs_spill_release(&copy);
    free(back);
    free(a);
    free(b);
    free(c);
}

static void test_spill_fragmented_file_gives_several_extents(void **state)
{
    (void)state;
    unsigned char *a = pattern_buffer(2 * BLOCK, 1), *b = pattern_buffer(2 * BLOCK, 2);
    unsigned char *c = pattern_buffer(2 * BLOCK, 3), *d = pattern_buffer(3 * BLOCK, 4);
    vs_spill_copy_t ca = spill_one(a, 2 * BLOCK), cb = spill_one(b, 2 * BLOCK), cc = spill_one(c, 2 * BLOCK);
    assert_int_equal(ca.count, 1);
    assert_int_equal(cb.extents[0].offset, 2 * BLOCK);
    assert_int_equal(cc.extents[0].offset, 4 * BLOCK);
    vs_spill_release(&cb);
    assert_null(cb.extents);
    assert_int_equal(cb.count, 0);

    /* D is bigger than B's hole: the hole first, then the end of the file. */
    vs_spill_copy_t cd = spill_one(d, 3 * BLOCK);
    assert_int_equal(cd.count, 2);
    assert_int_equal(cd.extents[0].offset, 2 * BLOCK);
    assert_int_equal(cd.extents[0].bytes, 2 * BLOCK);
    assert_int_equal(cd.extents[1].offset, 6 * BLOCK);
    assert_int_equal(cd.extents[1].bytes, BLOCK);
    check_copy(&cd, d, 3 * BLOCK);
    check_copy(&ca, a, 2 * BLOCK);
    check_copy(&cc, c, 2 * BLOCK);
    /* Reads across the extent boundary. */
    unsigned char *back = zeroed_buffer(2 * BLOCK);
    assert_int_equal(vs_spill_read(&cd, 1, 2, back), 0);
    assert_memory_equal(back, d + BLOCK, 2 * BLOCK);

    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_int_equal(s.file_bytes, 7 * BLOCK);
    assert_int_equal(s.used_bytes, 7 * BLOCK);
    vs_spill_release(&ca);
    vs_spill_release(&cc);
    vs_spill_release(&cd);
    vs_spill_stats(&s);
    assert_int_equal(s.used_bytes, 0);
    assert_int_equal(s.file_bytes, 0);
    free(back);
    free(a);
    free(b);
    free(c);
    free(d);
}

static void test_spill_first_fit_reuses_a_hole_without_growing_the_file(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(3 * BLOCK, 5);
    vs_spill_copy_t a = spill_one(src, 3 * BLOCK), b = spill_one(src, BLOCK), c = spill_one(src, BLOCK);
    vs_spill_release(&a);
    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_int_equal(s.file_bytes, 5 * BLOCK);
    vs_spill_copy_t d = spill_one(src, 2 * BLOCK);
    assert_int_equal(d.count, 1);
    assert_int_equal(d.extents[0].offset, 0);
    vs_spill_stats(&s);
    assert_int_equal(s.file_bytes, 5 * BLOCK);
    assert_int_equal(s.used_bytes, 4 * BLOCK);
    check_copy(&d, src, 2 * BLOCK);
    check_copy(&c, src, BLOCK);
    vs_spill_release(&b);
    vs_spill_release(&c);
    vs_spill_release(&d);
    free(src);
}

static void test_spill_release_punches_space_and_cuts_the_file(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(4 * BLOCK, 6);
    vs_spill_copy_t a = spill_one(src, 4 * BLOCK), b = spill_one(src, 4 * BLOCK);
    int fd = atomic_load(&watch.last_fd);
    struct stat before, after;
    assert_int_equal(fstat(fd, &before), 0);
    assert_int_equal((uint64_t)before.st_size, 8 * BLOCK);

    /* A copy in the middle: its disk space goes back, the size stays. */
    vs_spill_release(&a);
    assert_int_equal(atomic_load(&watch.punches), 1);
    assert_int_equal(fstat(fd, &after), 0);
    assert_int_equal((uint64_t)after.st_size, 8 * BLOCK);
    assert_true((uint64_t)after.st_blocks * 512 <= (uint64_t)before.st_blocks * 512 - 4 * BLOCK);

    /* The last copy: the file is cut to nothing. */
    vs_spill_release(&b);
    assert_int_equal(fstat(fd, &after), 0);
    assert_int_equal(after.st_size, 0);
    assert_true(atomic_load(&watch.truncates) >= 1);
    free(src);
}

static void test_spill_file_is_created_at_the_first_write_only(void **state)
{
    (void)state;
    /* Configuring probed the directory once, with a file it closed. */
    assert_int_equal(atomic_load(&watch.open_temps), 1);
    assert_int_equal(atomic_load(&watch.closes), 1);
    unsigned char *src = pattern_buffer(BLOCK, 8);
    vs_spill_copy_t a = spill_one(src, BLOCK), b = spill_one(src, BLOCK);
    assert_int_equal(atomic_load(&watch.open_temps), 2);
    vs_spill_release(&a);
    vs_spill_release(&b);
    vs_spill_shutdown();
    assert_int_equal(atomic_load(&watch.closes), 2);
    free(src);
}

static void test_spill_file_never_has_a_name_in_the_directory(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(6 * BLOCK, 9);
    vs_spill_copy_t copies[4];
    for (int i = 0; i < 4; i++)
        copies[i] = spill_one(src, (uint64_t)(i + 1) * BLOCK + 4096);
    assert_int_equal(dir_entries(test_dir), 0);
    for (int i = 0; i < 4; i++) {
        check_copy(&copies[i], src, (uint64_t)(i + 1) * BLOCK + 4096);
        vs_spill_release(&copies[i]);
    }
    /* Every reserve and write scanned the directory and found it empty. */
    assert_true(atomic_load(&watch.writes) >= 4);
    assert_int_equal(atomic_load(&watch.named_entries_seen), 0);
    /* /proc shows the open file without a name. */
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", atomic_load(&watch.last_fd));
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) {
        target[n] = '\0';
        assert_non_null(strstr(target, "(deleted)"));
    }
    free(src);
}

/* A process killed while it spills leaves nothing in the directory: the
 * child spills without end, the parent kills it after its first spill. */
static void test_spill_sigkill_while_spilling_leaves_nothing(void **state)
{
    (void)state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        unsigned char *src = pattern_buffer(2 * BLOCK, 40);
        vs_host_extent_t extent = {src, 2 * BLOCK};
        close(ready[0]);
        for (int n = 0;; n++) {
            vs_spill_copy_t copy;
            if (vs_spill_write(&extent, 1, 2 * BLOCK, &copy) != 0)
                _exit(3);
            if (n == 0 && write(ready[1], "x", 1) != 1)
                _exit(4);
            vs_spill_release(&copy); /* the file stays small however late the kill */
        }
    }
    char byte;
    close(ready[1]);
    assert_int_equal(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    assert_int_equal(kill(child, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(dir_entries(test_dir), 0);
}

static void test_spill_shutdown_leaves_nothing_and_turns_the_tier_off(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(BLOCK, 10);
    vs_spill_copy_t copy = spill_one(src, BLOCK);
    vs_spill_shutdown();
    assert_false(vs_spill_enabled());
    assert_int_equal(dir_entries(test_dir), 0);
    unsigned char *back = zeroed_buffer(BLOCK);
    assert_int_equal(vs_spill_read(&copy, 0, 1, back), -ENODEV);
    vs_host_extent_t extent = {src, BLOCK};
    vs_spill_copy_t other;
    assert_int_equal(vs_spill_write(&extent, 1, BLOCK, &other), -ENODEV);
    vs_spill_release(&copy); /* still fine after shutdown */
    assert_null(copy.extents);
    free(back);
    free(src);
}

static void test_spill_without_a_directory_is_off_and_writes_are_enodev(void **state)
{
    (void)state;
    char err[256] = "";
    unsigned char *src = pattern_buffer(BLOCK, 11);
    vs_host_extent_t extent = {src, BLOCK};
    vs_spill_copy_t copy;
    assert_int_equal(vs_spill_configure(NULL, err, sizeof err), 0);
    assert_false(vs_spill_enabled());
    assert_int_equal(vs_spill_write(&extent, 1, BLOCK, &copy), -ENODEV);
    assert_int_equal(copy.count, 0);
    assert_int_equal(vs_spill_configure("", err, sizeof err), 0);
    assert_false(vs_spill_enabled());
    assert_string_equal(err, "");
    free(src);
}

static void test_spill_bad_arguments_are_einval(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(3 * BLOCK, 12);
    vs_spill_copy_t copy;
    /* Misaligned pointer, misaligned length, a short non-last extent, too
     * little source for the bytes. */
    vs_host_extent_t misaligned = {src + 512, BLOCK};
    assert_int_equal(vs_spill_write(&misaligned, 1, BLOCK, &copy), -EINVAL);
    vs_host_extent_t odd_length = {src, BLOCK - 512};
    assert_int_equal(vs_spill_write(&odd_length, 1, BLOCK - 512, &copy), -EINVAL);
    vs_host_extent_t short_first[] = {{src, MiB}, {src + BLOCK, BLOCK}};
    assert_int_equal(vs_spill_write(short_first, 2, MiB + BLOCK, &copy), -EINVAL);
    vs_host_extent_t too_small = {src, BLOCK};
    assert_int_equal(vs_spill_write(&too_small, 1, BLOCK + 1, &copy), -EINVAL);
    /* An empty write is an empty copy. */
    assert_int_equal(vs_spill_write(&too_small, 1, 0, &copy), 0);
    assert_int_equal(copy.count, 0);

    copy = spill_one(src, 2 * BLOCK);
    unsigned char *back = zeroed_buffer(3 * BLOCK);
    assert_int_equal(vs_spill_read(&copy, 2, 1, back), -EINVAL);
    assert_int_equal(vs_spill_read(&copy, 1, 2, back), -EINVAL);
    assert_int_equal(vs_spill_read(&copy, 0, 1, back + 8), -EINVAL);
    assert_int_equal(vs_spill_read(&copy, 0, 0, back), 0);
    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_int_equal(s.used_bytes, 2 * BLOCK);
    vs_spill_release(&copy);
    free(back);
    free(src);
}

static void test_spill_keeps_errno(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(BLOCK, 13);
    vs_host_extent_t extent = {src, BLOCK};
    vs_spill_copy_t copy;
    set_faults("write:EIO");
    errno = 4242;
    assert_int_equal(vs_spill_write(&extent, 1, BLOCK, &copy), -EIO);
    assert_int_equal(errno, 4242);
    vs_spill_io_set_faults(NULL);
    copy = spill_one(src, BLOCK);
    errno = 4343;
    unsigned char *back = zeroed_buffer(BLOCK);
    assert_int_equal(vs_spill_read(&copy, 0, 1, back), 0);
    vs_spill_release(&copy);
    assert_int_equal(errno, 4343);
    free(back);
    free(src);
}

/* ---- Faults ------------------------------------------------------------- */

static void test_spill_corrupt_read_is_ebadmsg_and_logged(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(3 * BLOCK, 14);
    vs_spill_copy_t copy = spill_one(src, 3 * BLOCK);
    unsigned char *back = zeroed_buffer(3 * BLOCK);
    size_t log_from = log_size();
    set_faults("read:corrupt");
    assert_int_equal(vs_spill_read(&copy, 0, 3, back), -EBADMSG);
    assert_non_null(strstr(log_since(log_from), "corrupt"));
    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_int_equal(s.checksum_failures, 1);
    assert_int_equal(s.reads, 0);

    /* One corrupt read among many: caught in whichever block it hits. */
    set_faults("read:corrupt:after=1");
    assert_int_equal(vs_spill_read(&copy, 0, 1, back), 0);
    assert_int_equal(vs_spill_read(&copy, 2, 1, back), -EBADMSG);

    /* The bytes on disk were never damaged. */
    vs_spill_io_set_faults(NULL);
    check_copy(&copy, src, 3 * BLOCK);
    vs_spill_release(&copy);
    free(back);
    free(src);
}

static void test_spill_corruption_on_disk_is_caught(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(2 * BLOCK, 15);
    vs_spill_copy_t copy = spill_one(src, 2 * BLOCK);
    /* Damage one byte of the second block behind the store's back. */
    int fd = atomic_load(&watch.last_fd);
    unsigned char *page = zeroed_buffer(4096);
    uint64_t at = copy.extents[0].offset + BLOCK + 8192;
    assert_int_equal(pread(fd, page, 4096, (off_t)at), 4096);
    page[100] ^= 1;
    assert_int_equal(pwrite(fd, page, 4096, (off_t)at), 4096);
    unsigned char *back = zeroed_buffer(2 * BLOCK);
    assert_int_equal(vs_spill_read(&copy, 0, 1, back), 0);
    assert_int_equal(vs_spill_read(&copy, 1, 1, back), -EBADMSG);
    vs_spill_release(&copy);
    free(page);
    free(back);
    free(src);
}

static void test_spill_enospc_at_reserve_keeps_nothing_and_leaves_the_source(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(3 * BLOCK, 16);
    unsigned char *before = pattern_buffer(3 * BLOCK, 16);
    vs_host_extent_t extent = {src, 3 * BLOCK};
    vs_spill_copy_t copy;
    set_faults("reserve:ENOSPC");
    assert_int_equal(vs_spill_write(&extent, 1, 3 * BLOCK, &copy), -ENOSPC);
    assert_null(copy.extents);
    assert_null(copy.checksums);
    assert_int_equal(copy.count, 0);
    assert_memory_equal(src, before, 3 * BLOCK);
    assert_int_equal(atomic_load(&watch.writes), 0); /* nothing written */
    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_int_equal(s.used_bytes, 0);
    assert_int_equal(s.file_bytes, 0);
    assert_int_equal(s.io_errors, 1);
    struct stat st;
    assert_int_equal(fstat(atomic_load(&watch.last_fd), &st), 0);
    assert_int_equal(st.st_size, 0);
    assert_int_equal(st.st_blocks, 0);
    free(before);
    free(src);
}

static void test_spill_enospc_on_a_later_extent_gives_back_the_earlier_ones(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(3 * BLOCK, 17);
    vs_spill_copy_t a = spill_one(src, BLOCK), b = spill_one(src, BLOCK), c = spill_one(src, BLOCK);
    vs_spill_release(&b);
    /* The next write gathers B's hole (reserved) and grows the file (the
     * reserve that fails). */
    set_faults("reserve:ENOSPC:after=1");
    vs_host_extent_t extent = {src, 3 * BLOCK};
    vs_spill_copy_t d;
    assert_int_equal(vs_spill_write(&extent, 1, 3 * BLOCK, &d), -ENOSPC);
    assert_int_equal(d.count, 0);
    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_int_equal(s.used_bytes, 2 * BLOCK);
    assert_int_equal(s.file_bytes, 3 * BLOCK);
    vs_spill_io_set_faults(NULL);
    check_copy(&a, src, BLOCK);
    check_copy(&c, src, BLOCK);
    vs_spill_release(&a);
    vs_spill_release(&c);
    free(src);
}

static void test_spill_write_errors_keep_nothing(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(20 * BLOCK, 18);
    vs_host_extent_t extent = {src, 20 * BLOCK};
    vs_spill_copy_t copy;
    const char *faults[] = {"write:EIO", "write:ENOSPC", "write:EIO:after=1"};
    const int expected[] = {-EIO, -ENOSPC, -EIO};
    for (int i = 0; i < 3; i++) {
        set_faults(faults[i]);
        /* 40 MiB: two chunks, so after=1 fails half-way. */
        assert_int_equal(vs_spill_write(&extent, 1, 20 * BLOCK, &copy), expected[i]);
        assert_int_equal(copy.count, 0);
        vs_spill_stats_t s;
        vs_spill_stats(&s);
        assert_int_equal(s.used_bytes, 0);
        assert_int_equal(s.file_bytes, 0);
    }
    vs_spill_io_set_faults(NULL);
    copy = spill_one(src, 20 * BLOCK);
    check_copy(&copy, src, 20 * BLOCK);
    vs_spill_release(&copy);
    free(src);
}

static void test_spill_read_error_is_eio_and_the_copy_stays_readable(void **state)
{
    (void)state;
    unsigned char *src = pattern_buffer(2 * BLOCK, 19);
    vs_spill_copy_t copy = spill_one(src, 2 * BLOCK);
    unsigned char *back = zeroed_buffer(2 * BLOCK);
    set_faults("read:EIO");
    assert_int_equal(vs_spill_read(&copy, 0, 2, back), -EIO);
    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_int_equal(s.io_errors, 1);
    assert_int_equal(s.checksum_failures, 0);
    vs_spill_io_set_faults(NULL);
    check_copy(&copy, src, 2 * BLOCK);
    vs_spill_release(&copy);
    free(back);
    free(src);
}

static void test_spill_short_transfers_complete(void **state)
{
    (void)state;
    const uint64_t sizes[] = {20 * BLOCK, 3 * BLOCK + 8 * KiB, 4 * KiB};
    set_faults("write:short,read:short");
    for (size_t i = 0; i < 3; i++) {
        unsigned char *src = pattern_buffer(round_up(sizes[i], 4096), (uint32_t)(20 + i));
        vs_spill_copy_t copy = spill_one(src, sizes[i]);
        check_copy(&copy, src, sizes[i]);
        vs_spill_release(&copy);
        free(src);
    }
    assert_true(vs_spill_io_faults_injected() > 10);
    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_int_equal(s.io_errors, 0);
}

static void test_spill_short_transfers_now_and_then_complete(void **state)
{
    (void)state;
    set_faults("write:short:every=2,read:short:after=1");
    unsigned char *src = pattern_buffer(20 * BLOCK, 23);
    vs_spill_copy_t copy = spill_one(src, 20 * BLOCK);
    check_copy(&copy, src, 20 * BLOCK);
    vs_spill_release(&copy);
    assert_true(vs_spill_io_faults_injected() >= 2);
    free(src);
}

/* ---- Filesystems and fallbacks ------------------------------------------ */

/* Whether `dir` takes O_DIRECT, asked directly. */
static bool direct_io_allowed(const char *dir)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC | O_DIRECT, 0600);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

static void round_trip_and_check_direct(const char *dir)
{
    char err[512];
    assert_int_equal(vs_spill_configure(dir, err, sizeof err), 0);
    unsigned char *src = pattern_buffer(3 * BLOCK, 30);
    vs_spill_copy_t copy = spill_one(src, 3 * BLOCK - 4096);
    check_copy(&copy, src, 3 * BLOCK - 4096);
    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_int_equal(s.direct_io, direct_io_allowed(dir));
    assert_int_equal(dir_entries(dir), 0);
    vs_spill_release(&copy);
    free(src);
}

static void test_spill_on_disk_uses_direct_io_where_allowed(void **state)
{
    (void)state;
    round_trip_and_check_direct(test_dir);
}

static void test_spill_on_tmpfs_round_trips(void **state)
{
    (void)state;
    char dir[] = "/dev/shm/vramshim-spill-test-XXXXXX";
    if (!on_tmpfs("/dev/shm") || mkdtemp(dir) == NULL)
        skip();
    round_trip_and_check_direct(dir);
    vs_spill_shutdown();
    assert_int_equal(dir_entries(dir), 0);
    rmdir(dir);
}

/* System calls that refuse O_DIRECT (at open and by fcntl) and, when asked,
 * O_TMPFILE; `make_temp` checks the named file it creates is 0600. */
static struct {
    int tmpfile_errno;
    atomic_int make_temps;
    char named[PATH_MAX];
    mode_t named_mode;
} sys;

static int refusing_open(const char *path, int flags, mode_t mode)
{
    if ((flags & O_TMPFILE) == O_TMPFILE && sys.tmpfile_errno != 0) {
        errno = sys.tmpfile_errno;
        return -1;
    }
    if (flags & O_DIRECT) {
        errno = EINVAL;
        return -1;
    }
    return open(path, flags, mode);
}

static int refusing_set_flags(int fd, int flags)
{
    if (flags & O_DIRECT) {
        errno = EINVAL;
        return -1;
    }
    return fcntl(fd, F_SETFL, flags);
}

static int recording_make_temp(char *path_template, int flags)
{
    int fd = mkostemp(path_template, flags);
    struct stat st;
    atomic_fetch_add(&sys.make_temps, 1);
    if (fd >= 0 && fstat(fd, &st) == 0)
        sys.named_mode = st.st_mode & 07777;
    snprintf(sys.named, sizeof sys.named, "%s", path_template);
    return fd;
}

static const vs_spill_io_sys_t refusing_sys = {
    .open_file = refusing_open,
    .set_flags = refusing_set_flags,
    .make_temp = recording_make_temp,
};

static void test_spill_falls_back_to_buffered_io_when_o_direct_is_refused(void **state)
{
    (void)state;
    char err[512];
    memset(&sys, 0, sizeof sys);
    vs_spill_io_set_sys(&refusing_sys);
    assert_int_equal(vs_spill_configure(test_dir, err, sizeof err), 0);
    unsigned char *src = pattern_buffer(5 * BLOCK, 31);
    vs_spill_copy_t copy = spill_one(src, 5 * BLOCK);
    check_copy(&copy, src, 5 * BLOCK);
    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_false(s.direct_io);
    int flags = fcntl(atomic_load(&watch.last_fd), F_GETFL);
    assert_int_equal(flags & O_DIRECT, 0);
    assert_int_equal(atomic_load(&sys.make_temps), 0); /* O_TMPFILE still used */
    vs_spill_release(&copy);
    free(src);
}

static void check_named_fallback(int tmpfile_errno)
{
    bool direct_io = true;
    struct stat st;
    memset(&sys, 0, sizeof sys);
    sys.tmpfile_errno = tmpfile_errno;
    vs_spill_io_set_sys(&refusing_sys);
    int fd = vs_spill_io_posix.open_temp(test_dir, &direct_io);
    assert_true(fd >= 0);
    assert_int_equal(atomic_load(&sys.make_temps), 1);
    /* Created owner-only, in the directory asked for, and unlinked at once. */
    assert_int_equal(sys.named_mode, 0600);
    assert_int_equal(strncmp(sys.named, test_dir, strlen(test_dir)), 0);
    assert_int_equal(access(sys.named, F_OK), -1);
    assert_int_equal(dir_entries(test_dir), 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_nlink, 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_false(direct_io); /* refused by fcntl */
    close(fd);
}

static void test_spill_falls_back_to_an_unlinked_named_file_without_o_tmpfile(void **state)
{
    (void)state;
    check_named_fallback(EOPNOTSUPP);
    check_named_fallback(EISDIR);
    /* The store works on it. */
    char err[512];
    assert_int_equal(vs_spill_configure(test_dir, err, sizeof err), 0);
    unsigned char *src = pattern_buffer(2 * BLOCK, 32);
    vs_spill_copy_t copy = spill_one(src, 2 * BLOCK);
    check_copy(&copy, src, 2 * BLOCK);
    vs_spill_release(&copy);
    assert_int_equal(atomic_load(&sys.make_temps), 3); /* the probe and the file */
    free(src);
}

static void test_spill_open_fails_when_o_tmpfile_fails_otherwise(void **state)
{
    (void)state;
    bool direct_io;
    memset(&sys, 0, sizeof sys);
    sys.tmpfile_errno = EACCES;
    vs_spill_io_set_sys(&refusing_sys);
    errno = 0;
    assert_int_equal(vs_spill_io_posix.open_temp(test_dir, &direct_io), -1);
    assert_int_equal(errno, EACCES);
    assert_int_equal(atomic_load(&sys.make_temps), 0);
}

/* ---- Start-up checks ---------------------------------------------------- */

static void check_config_message(const char *err, const char *dir)
{
    char named[PATH_MAX + 64];
    snprintf(named, sizeof named, "VRAMSHIM_SPILL_DIR=\"%s\"", dir);
    assert_non_null(strstr(err, named));
    assert_non_null(strstr(err, "accepted: an existing writable directory"));
    assert_null(strchr(err, '\n'));
    assert_false(vs_spill_enabled());
}

static void test_spill_configure_missing_directory_is_enoent(void **state)
{
    (void)state;
    char err[512] = "", dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/missing", test_dir);
    assert_int_equal(vs_spill_configure(dir, err, sizeof err), -ENOENT);
    check_config_message(err, dir);
    assert_non_null(strstr(err, "No such file or directory"));
}

static void test_spill_configure_file_is_enotdir(void **state)
{
    (void)state;
    char err[512] = "", file[PATH_MAX];
    snprintf(file, sizeof file, "%s/file", test_dir);
    int fd = open(file, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(vs_spill_configure(file, err, sizeof err), -ENOTDIR);
    check_config_message(err, file);
    assert_non_null(strstr(err, "not a directory"));
    unlink(file);
}

static void test_spill_configure_unwritable_directory_is_eacces(void **state)
{
    (void)state;
    char err[512] = "", dir[PATH_MAX];
    if (geteuid() == 0)
        skip(); /* root writes anywhere */
    snprintf(dir, sizeof dir, "%s/readonly", test_dir);
    assert_int_equal(mkdir(dir, 0500), 0);
    assert_int_equal(vs_spill_configure(dir, err, sizeof err), -EACCES);
    check_config_message(err, dir);
    assert_non_null(strstr(err, "cannot create a file in it"));
    rmdir(dir);
}

static void test_spill_configure_directory_refusing_files_is_an_error(void **state)
{
    (void)state;
    char err[512] = "";
    watch.open_errno = EROFS;
    assert_int_equal(vs_spill_configure(test_dir, err, sizeof err), -EROFS);
    check_config_message(err, test_dir);
    assert_non_null(strstr(err, "cannot create a file in it"));
}

static void test_spill_configure_escapes_the_value(void **state)
{
    (void)state;
    char err[512] = "";
    assert_int_equal(vs_spill_configure("/no/such\ndir\"", err, sizeof err), -ENOENT);
    assert_null(strchr(err, '\n'));
    assert_non_null(strstr(err, "VRAMSHIM_SPILL_DIR=\"/no/such\\x0adir\\x22\""));
}

static void test_spill_configure_on_tmpfs_warns(void **state)
{
    (void)state;
    char err[512], dir[] = "/dev/shm/vramshim-spill-test-XXXXXX";
    if (!on_tmpfs("/dev/shm") || mkdtemp(dir) == NULL)
        skip();
    size_t from = log_size();
    assert_int_equal(vs_spill_configure(dir, err, sizeof err), 0);
    assert_true(vs_spill_enabled());
    const char *logged = log_since(from);
    assert_non_null(strstr(logged, "tmpfs"));
    assert_non_null(strstr(logged, "spilling to memory defeats the disk tier"));
    assert_non_null(strstr(logged, dir));
    vs_spill_shutdown();
    rmdir(dir);
}

static void test_spill_configure_on_disk_does_not_warn(void **state)
{
    (void)state;
    char err[512];
    if (on_tmpfs(test_dir))
        skip();
    size_t from = log_size();
    assert_int_equal(vs_spill_configure(test_dir, err, sizeof err), 0);
    assert_true(vs_spill_enabled());
    assert_null(strstr(log_since(from), "defeats"));
}

/* ---- Threads ------------------------------------------------------------ */

static void *spill_worker(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg;
    unsigned char *back = aligned_alloc(4096, 3 * BLOCK);
    int failures = 0;
    for (int round = 0; round < 12; round++) {
        uint64_t bytes = (uint64_t)(round % 3 + 1) * BLOCK - (round % 2) * 4096;
        unsigned char *src = pattern_buffer(round_up(bytes, 4096), seed * 100 + (uint32_t)round);
        vs_host_extent_t extent = {src, round_up(bytes, 4096)};
        vs_spill_copy_t copy;
        if (vs_spill_write(&extent, 1, bytes, &copy) != 0
            || vs_spill_read(&copy, 0, copy.bytes / BLOCK, back) != 0 || memcmp(back, src, bytes) != 0)
            failures++;
        vs_spill_release(&copy);
        free(src);
    }
    free(back);
    return (void *)(intptr_t)failures;
}

static void test_spill_concurrent_writers_never_share_blocks(void **state)
{
    (void)state;
    pthread_t threads[4];
    for (uintptr_t i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, spill_worker, (void *)(i + 1)), 0);
    for (int i = 0; i < 4; i++) {
        void *failures;
        pthread_join(threads[i], &failures);
        assert_int_equal((intptr_t)failures, 0);
    }
    vs_spill_stats_t s;
    vs_spill_stats(&s);
    assert_int_equal(s.used_bytes, 0);
    assert_int_equal(s.file_bytes, 0);
    assert_int_equal(s.writes, 48);
}

/* ---- The fault parser and layer ----------------------------------------- */

static void test_io_fault_parser_accepts_the_documented_forms(void **state)
{
    (void)state;
    vs_spill_io_faults_t f;
    assert_int_equal(vs_spill_io_parse_faults("reserve:ENOSPC", &f), 0);
    assert_int_equal(f.count, 1);
    assert_int_equal(f.fault[0].op, VS_SPILL_IO_RESERVE);
    assert_int_equal(f.fault[0].kind, VS_SPILL_IO_FAULT_ENOSPC);
    assert_int_equal(f.fault[0].after, 0);
    assert_int_equal(f.fault[0].every, 1);
    assert_int_equal(f.fault[0].times, 0);

    assert_int_equal(vs_spill_io_parse_faults("write:short:every=3:after=2:times=5,read:corrupt,read:EIO:after=0", &f), 0);
    assert_int_equal(f.count, 3);
    assert_int_equal(f.fault[0].op, VS_SPILL_IO_WRITE);
    assert_int_equal(f.fault[0].kind, VS_SPILL_IO_FAULT_SHORT);
    assert_int_equal(f.fault[0].after, 2);
    assert_int_equal(f.fault[0].every, 3);
    assert_int_equal(f.fault[0].times, 5);
    assert_int_equal(f.fault[1].op, VS_SPILL_IO_READ);
    assert_int_equal(f.fault[1].kind, VS_SPILL_IO_FAULT_CORRUPT);
    assert_int_equal(f.fault[2].kind, VS_SPILL_IO_FAULT_EIO);

    assert_int_equal(vs_spill_io_parse_faults("write:slow,read:slow:ms=250:times=2", &f), 0);
    assert_int_equal(f.count, 2);
    assert_int_equal(f.fault[0].kind, VS_SPILL_IO_FAULT_SLOW);
    assert_int_equal(f.fault[0].ms, 100);
    assert_int_equal(f.fault[1].op, VS_SPILL_IO_READ);
    assert_int_equal(f.fault[1].ms, 250);
    assert_int_equal(f.fault[1].times, 2);

    const char *accepted[] = {"reserve:EIO", "write:ENOSPC", "write:EIO", "write:short", "read:EIO", "read:short",
                              "read:corrupt", "write:slow:ms=1", "read:slow:ms=60000",
                              "write:EIO:after=18446744073709551615",
                              "read:short,read:short,read:short,read:short,read:short,read:short,read:short,read:short"};
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++)
        if (vs_spill_io_parse_faults(accepted[i], &f) != 0)
            fail_msg("refused \"%s\"", accepted[i]);
}

static void test_io_fault_parser_rejects_malformed_forms(void **state)
{
    (void)state;
    const char *rejected[] = {
        "", ",", "write", "write:", ":EIO", "write:EIO,", ",write:EIO", "disk:EIO", "WRITE:EIO", "write:eio",
        "write:enospc", "read:ENOSPC", "reserve:short", "write:corrupt", "reserve:corrupt", "write:EIO:after",
        "write:EIO:after=", "write:EIO:after=-1", "write:EIO:after=+1", "write:EIO:after=1x", "write:EIO:after= 1",
        "write:EIO:every=0", "write:EIO:times=0", "write:EIO:after=1:after=2", "write:EIO:often=2", "write:EIO::",
        " write:EIO", "write:EIO ", "write:EIO;read:EIO", "write:EIO:1", "reserve:slow", "write:EIO:ms=5",
        "write:slow:ms=0", "write:slow:ms=60001", "write:slow:ms=1:ms=2", "write:SLOW",
        "read:short,read:short,read:short,read:short,read:short,read:short,read:short,read:short,read:short",
    };
    vs_spill_io_faults_t f = {.count = 77};
    for (size_t i = 0; i < sizeof rejected / sizeof rejected[0]; i++)
        if (vs_spill_io_parse_faults(rejected[i], &f) != -EINVAL)
            fail_msg("accepted \"%s\"", rejected[i]);
    assert_int_equal(vs_spill_io_parse_faults("write:EIO:after=18446744073709551616", &f), -ERANGE);
    assert_int_equal(vs_spill_io_parse_faults(NULL, &f), -EINVAL);
    assert_int_equal(f.count, 77); /* untouched on failure */
}

/* A file in the test directory, for calling the layer directly. */
static int scratch_file(int extra_flags)
{
    int fd = open(test_dir, O_TMPFILE | O_RDWR | O_CLOEXEC | extra_flags, 0600);
    assert_true(fd >= 0 || extra_flags != 0);
    return fd;
}

static void test_io_fault_after_every_and_times_pick_the_calls(void **state)
{
    (void)state;
    int fd = scratch_file(0);
    char byte = 'x';
    set_faults("write:EIO:after=2:every=3:times=2");
    const vs_spill_io_t *io = vs_spill_io();
    char failed[13] = "";
    for (int call = 1; call <= 12; call++) {
        errno = 0;
        ssize_t n = io->write_at(fd, &byte, 1, 0);
        failed[call - 1] = n < 0 ? 'F' : '.';
        if (n < 0)
            assert_int_equal(errno, EIO);
    }
    /* Calls 5 and 8 (3rd and 6th after the first two); 11 would be the
     * third hit. */
    assert_string_equal(failed, "....F..F....");
    assert_int_equal(vs_spill_io_faults_injected(), 2);
    /* Other operations are not counted against a write entry. */
    char in;
    assert_int_equal(io->read_at(fd, &in, 1, 0), 1);
    close(fd);
}

static void test_io_fault_first_listed_entry_applies(void **state)
{
    (void)state;
    int fd = scratch_file(0);
    char buf[8] = "abcdefg";
    assert_int_equal(pwrite(fd, buf, 8, 0), 8);
    set_faults("read:EIO,read:corrupt");
    errno = 0;
    assert_int_equal(vs_spill_io()->read_at(fd, buf, 8, 0), -1);
    assert_int_equal(errno, EIO);
    set_faults("read:corrupt:after=1,read:EIO:after=1");
    assert_int_equal(vs_spill_io()->read_at(fd, buf, 8, 0), 8);
    assert_string_equal(buf, "abcdefg");
    assert_int_equal(vs_spill_io()->read_at(fd, buf, 8, 0), 8);
    assert_int_equal(buf[4], 'e' ^ 0x10); /* one bit flipped, in the middle */
    assert_int_equal(memcmp(buf, "abcd", 4), 0);
    set_faults("reserve:ENOSPC");
    errno = 0;
    assert_int_equal(vs_spill_io()->reserve(fd, 0, 4096), -1);
    assert_int_equal(errno, ENOSPC);
    close(fd);
}

static void test_io_fault_short_moves_half_or_whole_pages(void **state)
{
    (void)state;
    int fd = scratch_file(0);
    unsigned char *buf = zeroed_buffer(16384);
    set_faults("write:short,read:short");
    const vs_spill_io_t *io = vs_spill_io();
    assert_int_equal(io->write_at(fd, buf, 10, 0), 5);
    assert_int_equal(io->write_at(fd, buf, 1, 0), 1);
    assert_int_equal(io->read_at(fd, buf, 4, 0), 2);
    close(fd);
    /* With O_DIRECT the kernel moves whole pages: half, rounded down to a
     * page, and a single page whole. */
    fd = scratch_file(O_DIRECT);
    if (fd >= 0) {
        assert_int_equal(io->write_at(fd, buf, 16384, 0), 8192);
        assert_int_equal(io->write_at(fd, buf, 12288, 0), 4096);
        assert_int_equal(io->write_at(fd, buf, 4096, 0), 4096);
        assert_int_equal(io->read_at(fd, buf, 8192, 0), 4096);
        close(fd);
    }
    free(buf);
}

int main(void)
{
    /* Every test's log lines go to one file the tests read back. */
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL)
        return 1;
    snprintf(log_path, sizeof log_path, "%s/test_spill.log", cwd);
    unlink(log_path);
    vs_log_configure(VS_LOG_INFO, log_path);

#define STORE_TEST(name) cmocka_unit_test_setup_teardown(name, setup_store, teardown_store)
#define DIR_TEST(name) cmocka_unit_test_setup_teardown(name, setup_dir, teardown_store)
    const struct CMUnitTest tests[] = {
        STORE_TEST(test_spill_round_trips_of_several_sizes_are_byte_exact),
        STORE_TEST(test_spill_partial_reads_return_the_blocks_asked_for),
        STORE_TEST(test_spill_source_of_several_extents_round_trips),
        STORE_TEST(test_spill_fragmented_file_gives_several_extents),
        STORE_TEST(test_spill_first_fit_reuses_a_hole_without_growing_the_file),
        STORE_TEST(test_spill_release_punches_space_and_cuts_the_file),
        STORE_TEST(test_spill_file_is_created_at_the_first_write_only),
        STORE_TEST(test_spill_file_never_has_a_name_in_the_directory),
        STORE_TEST(test_spill_sigkill_while_spilling_leaves_nothing),
        STORE_TEST(test_spill_shutdown_leaves_nothing_and_turns_the_tier_off),
        DIR_TEST(test_spill_without_a_directory_is_off_and_writes_are_enodev),
        STORE_TEST(test_spill_bad_arguments_are_einval),
        STORE_TEST(test_spill_keeps_errno),
        STORE_TEST(test_spill_corrupt_read_is_ebadmsg_and_logged),
        STORE_TEST(test_spill_corruption_on_disk_is_caught),
        STORE_TEST(test_spill_enospc_at_reserve_keeps_nothing_and_leaves_the_source),
        STORE_TEST(test_spill_enospc_on_a_later_extent_gives_back_the_earlier_ones),
        STORE_TEST(test_spill_write_errors_keep_nothing),
        STORE_TEST(test_spill_read_error_is_eio_and_the_copy_stays_readable),
        STORE_TEST(test_spill_short_transfers_complete),
        STORE_TEST(test_spill_short_transfers_now_and_then_complete),
        DIR_TEST(test_spill_on_disk_uses_direct_io_where_allowed),
        DIR_TEST(test_spill_on_tmpfs_round_trips),
        DIR_TEST(test_spill_falls_back_to_buffered_io_when_o_direct_is_refused),
        DIR_TEST(test_spill_falls_back_to_an_unlinked_named_file_without_o_tmpfile),
        DIR_TEST(test_spill_open_fails_when_o_tmpfile_fails_otherwise),
        DIR_TEST(test_spill_configure_missing_directory_is_enoent),
        DIR_TEST(test_spill_configure_file_is_enotdir),
        DIR_TEST(test_spill_configure_unwritable_directory_is_eacces),
        DIR_TEST(test_spill_configure_directory_refusing_files_is_an_error),
        DIR_TEST(test_spill_configure_escapes_the_value),
        DIR_TEST(test_spill_configure_on_tmpfs_warns),
        DIR_TEST(test_spill_configure_on_disk_does_not_warn),
        STORE_TEST(test_spill_concurrent_writers_never_share_blocks),
        DIR_TEST(test_io_fault_parser_accepts_the_documented_forms),
        DIR_TEST(test_io_fault_parser_rejects_malformed_forms),
        DIR_TEST(test_io_fault_after_every_and_times_pick_the_calls),
        DIR_TEST(test_io_fault_first_listed_entry_applies),
        DIR_TEST(test_io_fault_short_moves_half_or_whole_pages),
    };
#undef STORE_TEST
#undef DIR_TEST
    return cmocka_run_group_tests_name("spill.c", tests, NULL, NULL);
}

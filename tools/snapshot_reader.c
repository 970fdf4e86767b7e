/* snapshot_reader.c: validates and copies live-state snapshots for the
 * `vramshim` command.
 *
 * Main entry points: `vs_snapshot_parse` (pure: bytes in, verdict out; the
 * fuzz target calls it), `vs_snapshot_read_pid` (the seqlock copy) and
 * `vs_snapshot_list` (for `ps`).
 *
 * Everything in the object is untrusted: another program of the same user
 * could have written anything there, and a process killed mid-update
 * leaves an odd sequence behind. Sizes are checked against the object's
 * length before any row is touched, and a SIGBUS (the object truncated
 * under us) turns into a "truncated" error instead of a crash.
 */
#include "snapshot_reader.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long a reader keeps trying to get a copy while the writer is busy
 * (publications take microseconds; a writer killed mid-update never ends). */
#define VS_READ_ATTEMPTS 2000
#define VS_READ_PAUSE_NS 100000L

static const char *const vs_read_error_names[] = {
    "ok",
#define VS_READ_X(suffix, what) what,
    VS_READ_ERRORS(VS_READ_X)
#undef VS_READ_X
};

const char *vs_read_error_name(int err)
{
    if (err < 0)
        err = -err;
    if ((size_t)err >= sizeof(vs_read_error_names) / sizeof(vs_read_error_names[0]))
        return "unknown error";
    return vs_read_error_names[err];
}

#define VS_NAME_TABLE(table, list)                                                                 \
    static const char *const table[] = {list(VS_NAME_ENTRY)};
#define VS_NAME_ENTRY(suffix, name) name,
VS_NAME_TABLE(vs_mode_names, VS_SNAPSHOT_MODES)
VS_NAME_TABLE(vs_place_names, VS_SNAPSHOT_PLACES)
VS_NAME_TABLE(vs_kind_names, VS_SNAPSHOT_KINDS)
VS_NAME_TABLE(vs_keep_names, VS_SNAPSHOT_KEEPS)
#undef VS_NAME_ENTRY
#undef VS_NAME_TABLE

#define VS_NAME_OF(table, value)                                                                   \
    ((value) < sizeof(table) / sizeof(table[0]) ? table[value] : "?")

const char *vs_snapshot_mode_name(uint32_t mode)
{
    return VS_NAME_OF(vs_mode_names, mode);
}

const char *vs_snapshot_place_name(uint32_t place)
{
    return VS_NAME_OF(vs_place_names, place);
}

const char *vs_snapshot_kind_name(uint32_t kind)
{
    return VS_NAME_OF(vs_kind_names, kind);
}

const char *vs_snapshot_keep_name(uint32_t keep)
{
    return VS_NAME_OF(vs_keep_names, keep);
}

__attribute__((format(printf, 4, 5))) static int vs_read_fail(int err, char *msg, size_t msg_len,
                                                               const char *fmt, ...)
{
    if (msg && msg_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msg_len, fmt, ap);
        va_end(ap);
    }
    return -err;
}

/* The header checks that need only the header's own bytes. On success
 * *need is the length of the header plus its published rows. */
static int vs_snapshot_parse_header(const void *buf, size_t len, size_t *need, char *msg,
                                    size_t msg_len)
{
    const vs_snapshot_header_t *h = buf;

    if ((uintptr_t)buf % 8 != 0)
        return vs_read_fail(VS_READ_ERR_SYSTEM, msg, msg_len, "snapshot buffer is misaligned");
    if (len < sizeof(h->magic))
        return vs_read_fail(VS_READ_ERR_TRUNCATED, msg, msg_len,
                            "truncated snapshot: %zu bytes, too short for its magic number", len);
    if (h->magic != VS_SNAPSHOT_MAGIC)
        return vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                            "corrupt snapshot: bad magic number 0x%016llx",
                            (unsigned long long)h->magic);
    if (len < offsetof(vs_snapshot_header_t, header_bytes))
        return vs_read_fail(VS_READ_ERR_TRUNCATED, msg, msg_len,
                            "truncated snapshot: %zu bytes, too short for its version", len);
    if (h->abi_version != VS_SNAPSHOT_ABI_VERSION)
        return vs_read_fail(VS_READ_ERR_VERSION, msg, msg_len,
                            "incompatible snapshot version %u (this vramshim reads %u)",
                            h->abi_version, VS_SNAPSHOT_ABI_VERSION);
    if (len < sizeof(*h))
        return vs_read_fail(VS_READ_ERR_TRUNCATED, msg, msg_len,
                            "truncated snapshot: %zu bytes, shorter than its %zu-byte header", len,
                            sizeof(*h));
    if (h->header_bytes != sizeof(*h) || h->row_bytes != sizeof(vs_snapshot_row_t))
        return vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                            "corrupt snapshot: header of %u bytes and rows of %u bytes "
                            "(version %u has %zu and %zu)",
                            h->header_bytes, h->row_bytes, VS_SNAPSHOT_ABI_VERSION, sizeof(*h),
                            sizeof(vs_snapshot_row_t));
    if (h->row_capacity == 0 || h->row_capacity > VS_SNAPSHOT_MAX_ROWS)
        return vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                            "corrupt snapshot: row capacity %u out of range (1 to %u)",
                            h->row_capacity, VS_SNAPSHOT_MAX_ROWS);
    if (h->sequence % 2 != 0)
        return vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                            "corrupt snapshot: left in the middle of an update (sequence %llu)",
                            (unsigned long long)h->sequence);
    if (h->pid <= 0 || h->pid > INT_MAX)
        return vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len, "corrupt snapshot: pid %lld",
                            (long long)h->pid);
    if (h->mode >= VS_SNAPSHOT_MODE_COUNT)
        return vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                            "corrupt snapshot: mode %u out of range", h->mode);
    if (h->device_count > VS_SNAPSHOT_MAX_DEVICES)
        return vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                            "corrupt snapshot: %u devices (at most %u)", h->device_count,
                            VS_SNAPSHOT_MAX_DEVICES);
    if (h->row_count > h->row_capacity)
        return vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                            "corrupt snapshot: %u rows in a capacity of %u", h->row_count,
                            h->row_capacity);
    if (!memchr(h->program, '\0', sizeof(h->program)))
        return vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                            "corrupt snapshot: program name not terminated");
    *need = sizeof(*h) + (size_t)h->row_count * sizeof(vs_snapshot_row_t);
    return 0;
}

int vs_snapshot_parse(const void *buf, size_t len, vs_snapshot_view_t *view, char *msg,
                      size_t msg_len)
{
    size_t need;
    int rc = vs_snapshot_parse_header(buf, len, &need, msg, msg_len);
    if (rc < 0)
        return rc;
    const vs_snapshot_header_t *h = buf;
    if (len < need)
        return vs_read_fail(VS_READ_ERR_TRUNCATED, msg, msg_len,
                            "truncated snapshot: %zu bytes, %u rows need %zu", len, h->row_count,
                            need);
    const vs_snapshot_row_t *rows = (const vs_snapshot_row_t *)((const char *)buf + sizeof(*h));
    for (uint32_t i = 0; i < h->row_count; i++) {
        const vs_snapshot_row_t *r = &rows[i];
        if (r->kind >= VS_SNAPSHOT_KIND_COUNT || r->place >= VS_SNAPSHOT_PLACE_COUNT ||
            r->keep >= VS_SNAPSHOT_KEEP_COUNT || r->device < -1 ||
            (r->device == -1 && r->kind != VS_SNAPSHOT_KIND_HOST_PINNED &&
             r->kind != VS_SNAPSHOT_KIND_HOST_REGISTERED) ||
            r->device >= VS_SNAPSHOT_MAX_DEVICES)
            return vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                                "corrupt snapshot: row %u (id %llu) has kind %u, place %u, "
                                "keep %u, device %lld",
                                i, (unsigned long long)r->alloc_id, r->kind, r->place, r->keep,
                                (long long)r->device);
    }
    view->header = h;
    view->rows = rows;
    view->row_count = h->row_count;
    return 0;
}

/* SIGBUS while copying: the object shrank under the mapping. */
static sigjmp_buf vs_read_bus_jump;

static void vs_read_on_sigbus(int sig)
{
    (void)sig;
    siglongjmp(vs_read_bus_jump, 1);
}

/* Sends SIGBUS to `vs_read_on_sigbus` until the caller puts `old` back. */
static void vs_read_catch_sigbus(struct sigaction *old)
{
    struct sigaction bus = {0};
    bus.sa_handler = vs_read_on_sigbus;
    sigemptyset(&bus.sa_mask);
    sigaction(SIGBUS, &bus, old);
}

/* Whether the mapped header's magic number is set; false as well when the
 * object was truncated below the header after it was measured (the load
 * would raise SIGBUS). */
static bool vs_read_initialised(const void *map)
{
    struct sigaction old_bus;
    vs_read_catch_sigbus(&old_bus);
    volatile bool initialised = false;
    if (sigsetjmp(vs_read_bus_jump, 1) == 0)
        initialised = __atomic_load_n(&((const vs_snapshot_header_t *)map)->magic, __ATOMIC_ACQUIRE) != 0;
    sigaction(SIGBUS, &old_bus, NULL);
    return initialised;
}

/* Acquire loads: if any word comes from a publication that began after
 * `before` was read, the sequence load that follows sees that begin's odd
 * value or later (the words are release stores, see snapshot_writer.c).
 * On x86 these are plain loads; no fence is needed, and TSan models them. */
static void vs_read_words(void *dst, const void *src, size_t bytes)
{
    uint64_t *d = dst;
    const uint64_t *s = src;
    for (size_t i = 0; i < bytes / 8; i++)
        d[i] = __atomic_load_n(&s[i], __ATOMIC_ACQUIRE);
}

static void vs_read_pause(int attempt)
{
    if (attempt < 100) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, VS_READ_PAUSE_NS};
    nanosleep(&ts, NULL);
}

/* /proc/<pid>/stat field 22 (see snapshot_writer.c); 0 when unknown. */
static uint64_t vs_read_start_ticks(pid_t pid)
{
    char path[64], stat[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, stat, sizeof(stat) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    stat[n] = '\0';
    return vs_snapshot_stat_start_ticks(stat);
}

bool vs_snapshot_pid_alive(pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    return stat(path, &st) == 0;
}

static void vs_read_shm_name(char *buf, size_t len, unsigned uid, pid_t pid)
{
    snprintf(buf, len, VS_SNAPSHOT_NAME_FORMAT, uid, vs_snapshot_pid_namespace(), (int)pid);
}

static void vs_read_shm_path(char *buf, size_t len, unsigned uid, pid_t pid)
{
    char name[VS_SNAPSHOT_NAME_MAX];
    vs_read_shm_name(name, sizeof(name), uid, pid);
    snprintf(buf, len, VS_SNAPSHOT_SHM_DIR "%s", name);
}

/* Removes a snapshot left by a process that is gone: only a regular file
 * of ours (a file another user planted under our name is never touched).
 * 0, or -errno: -EPERM when it is not ours, what shm_unlink said. */
static int vs_read_remove_stale(unsigned uid, pid_t pid)
{
    char name[VS_SNAPSHOT_NAME_MAX];
    struct stat st;
    vs_read_shm_name(name, sizeof(name), uid, pid);
    int fd = shm_open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = fstat(fd, &st) < 0 ? -errno : 0;
    close(fd);
    if (rc == 0 && (!S_ISREG(st.st_mode) || st.st_uid != uid))
        rc = -EPERM;
    if (rc == 0 && shm_unlink(name) < 0)
        rc = -errno;
    return rc;
}

/* The seqlock copy. `map` is `map_len` bytes, validated to hold at least
 * the header. */
static int vs_read_copy(const char *map, size_t map_len, vs_snapshot_copy_t *copy, char *msg,
                        size_t msg_len)
{
    const vs_snapshot_header_t *shared = (const vs_snapshot_header_t *)map;
    size_t cap = sizeof(vs_snapshot_header_t);
    char *buf = malloc(cap);
    if (!buf)
        return vs_read_fail(VS_READ_ERR_SYSTEM, msg, msg_len, "out of memory");

    for (int attempt = 0; attempt < VS_READ_ATTEMPTS; attempt++) {
        uint64_t before = __atomic_load_n(&shared->sequence, __ATOMIC_ACQUIRE);
        if (before % 2 != 0) {
            vs_read_pause(attempt);
            continue;
        }
        vs_read_words(buf, map, sizeof(vs_snapshot_header_t));
        size_t need;
        int rc = vs_snapshot_parse_header(buf, sizeof(vs_snapshot_header_t), &need, msg, msg_len);
        if (rc == 0) {
            const vs_snapshot_header_t *h = (const vs_snapshot_header_t *)buf;
            size_t declared = sizeof(*h) + (size_t)h->row_capacity * sizeof(vs_snapshot_row_t);
            if (declared > map_len)
                rc = vs_read_fail(VS_READ_ERR_TRUNCATED, msg, msg_len,
                                  "truncated snapshot: %zu bytes, its header declares %zu",
                                  map_len, declared);
        }
        if (rc == 0 && need > cap) {
            char *bigger = realloc(buf, need);
            if (!bigger) {
                free(buf);
                return vs_read_fail(VS_READ_ERR_SYSTEM, msg, msg_len, "out of memory");
            }
            buf = bigger;
            cap = need;
        }
        if (rc == 0)
            vs_read_words(buf + sizeof(vs_snapshot_header_t), map + sizeof(vs_snapshot_header_t),
                          need - sizeof(vs_snapshot_header_t));
        uint64_t after = __atomic_load_n(&shared->sequence, __ATOMIC_RELAXED);
        if (after != before) {
            vs_read_pause(attempt);
            continue;
        }
        /* A stable copy: its verdict stands, good or bad. */
        if (rc == 0)
            rc = vs_snapshot_parse(buf, need, &copy->view, msg, msg_len);
        if (rc < 0) {
            free(buf);
            return rc;
        }
        copy->buf = buf;
        copy->len = need;
        return 0;
    }
    free(buf);
    return vs_read_fail(VS_READ_ERR_BUSY, msg, msg_len,
                        "snapshot kept changing or was left mid-update (%d attempts)",
                        VS_READ_ATTEMPTS);
}

int vs_snapshot_read_pid(pid_t pid, vs_snapshot_copy_t *copy, char *msg, size_t msg_len)
{
    unsigned uid = (unsigned)geteuid();
    char proc[64], path[128], name[VS_SNAPSHOT_NAME_MAX];
    struct stat st;
    int rc;

    memset(copy, 0, sizeof(*copy));
    if (pid <= 0)
        return vs_read_fail(VS_READ_ERR_NO_PROCESS, msg, msg_len, "no process %d", (int)pid);
    vs_read_shm_path(path, sizeof(path), uid, pid);
    vs_read_shm_name(name, sizeof(name), uid, pid);
    snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
    if (stat(proc, &st) < 0) {
        if (errno != ENOENT)
            return vs_read_fail(VS_READ_ERR_SYSTEM, msg, msg_len, "cannot inspect %s: %s", proc,
                                strerror(errno));
        if (vs_read_remove_stale(uid, pid) == 0)
            return vs_read_fail(VS_READ_ERR_NO_PROCESS, msg, msg_len,
                                "no process %d (removed its stale snapshot %s)", (int)pid, path);
        return vs_read_fail(VS_READ_ERR_NO_PROCESS, msg, msg_len, "no process %d", (int)pid);
    }
    if (st.st_uid != uid)
        return vs_read_fail(VS_READ_ERR_OTHER_USER, msg, msg_len,
                            "process %d belongs to another user (uid %u); vramshim reads only "
                            "your own processes",
                            (int)pid, (unsigned)st.st_uid);

    int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        if (errno == ENOENT)
            return vs_read_fail(VS_READ_ERR_NOT_UNDER_SHIM, msg, msg_len,
                                "process %d is not running under vramshim (no snapshot %s)",
                                (int)pid, path);
        if (errno == EACCES)
            return vs_read_fail(VS_READ_ERR_OTHER_USER, msg, msg_len,
                                "snapshot %s belongs to another user", path);
        return vs_read_fail(VS_READ_ERR_SYSTEM, msg, msg_len, "cannot open %s: %s", path,
                            strerror(errno));
    }

    /* A process that was just created may not have finished its first
     * publication: give it a moment to size the object and set the magic. */
    const char *map = MAP_FAILED;
    size_t map_len = 0;
    for (int attempt = 0;; attempt++) {
        if (fstat(fd, &st) < 0) {
            rc = vs_read_fail(VS_READ_ERR_SYSTEM, msg, msg_len, "cannot stat %s: %s", path,
                              strerror(errno));
            goto out;
        }
        if (st.st_uid != uid) {
            rc = vs_read_fail(VS_READ_ERR_OTHER_USER, msg, msg_len,
                              "snapshot %s is owned by another user (uid %u); refusing it", path,
                              (unsigned)st.st_uid);
            goto out;
        }
        if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0) {
            rc = vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                              "corrupt snapshot %s: mode %04o, expected a file of mode 0600; "
                              "refusing it",
                              path, (unsigned)(st.st_mode & 07777));
            goto out;
        }
        map_len = (size_t)st.st_size;
        bool initialised = false;
        if (map_len >= sizeof(vs_snapshot_header_t)) {
            if (map_len > sizeof(vs_snapshot_header_t) +
                              (size_t)VS_SNAPSHOT_MAX_ROWS * sizeof(vs_snapshot_row_t)) {
                rc = vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                                  "corrupt snapshot %s: %zu bytes is larger than any snapshot",
                                  path, map_len);
                goto out;
            }
            map = mmap(NULL, map_len, PROT_READ, MAP_SHARED, fd, 0);
            if (map == MAP_FAILED) {
                rc = vs_read_fail(VS_READ_ERR_SYSTEM, msg, msg_len, "cannot map %s: %s", path,
                                  strerror(errno));
                goto out;
            }
            initialised = vs_read_initialised(map);
        }
        if (initialised)
            break;
        if (map != MAP_FAILED) {
            munmap((void *)map, map_len);
            map = MAP_FAILED;
        }
        if (attempt == 50) {
            rc = vs_read_fail(map_len < sizeof(vs_snapshot_header_t) ? VS_READ_ERR_TRUNCATED
                                                                     : VS_READ_ERR_CORRUPT,
                              msg, msg_len,
                              map_len < sizeof(vs_snapshot_header_t)
                                  ? "truncated snapshot %s: %zu bytes, shorter than a header"
                                  : "corrupt snapshot %s: never initialised (no magic number, "
                                    "%zu bytes)",
                              path, map_len);
            goto out;
        }
        struct timespec ts = {0, 2000000L};
        nanosleep(&ts, NULL);
    }

    struct sigaction old_bus;
    vs_read_catch_sigbus(&old_bus);
    if (sigsetjmp(vs_read_bus_jump, 1) == 0) {
        rc = vs_read_copy(map, map_len, copy, msg, msg_len);
    } else {
        vs_snapshot_copy_free(copy);
        rc = vs_read_fail(VS_READ_ERR_TRUNCATED, msg, msg_len,
                          "truncated snapshot %s: it shrank while being read", path);
    }
    sigaction(SIGBUS, &old_bus, NULL);
    if (rc < 0)
        goto out;

    const vs_snapshot_header_t *h = copy->view.header;
    if (h->pid != pid || h->uid != uid) {
        vs_snapshot_copy_free(copy);
        rc = vs_read_fail(VS_READ_ERR_CORRUPT, msg, msg_len,
                          "corrupt snapshot %s: it names pid %lld of uid %llu", path,
                          (long long)h->pid, (unsigned long long)h->uid);
        goto out;
    }
    /* Same pid, different start time: the writer died and its pid was
     * given to a process that does not run under the shim. */
    uint64_t ticks = vs_read_start_ticks(pid);
    if (h->start_ticks && ticks && h->start_ticks != ticks) {
        vs_snapshot_copy_free(copy);
        int removed = vs_read_remove_stale(uid, pid);
        if (removed == 0)
            rc = vs_read_fail(VS_READ_ERR_NOT_UNDER_SHIM, msg, msg_len,
                              "process %d is not running under vramshim (removed the stale "
                              "snapshot %s of an earlier process with that pid)",
                              (int)pid, path);
        else
            rc = vs_read_fail(VS_READ_ERR_NOT_UNDER_SHIM, msg, msg_len,
                              "process %d is not running under vramshim (the stale snapshot %s "
                              "of an earlier process with that pid could not be removed: %s)",
                              (int)pid, path, strerror(-removed));
        goto out;
    }
    rc = 0;

out:
    if (map != MAP_FAILED)
        munmap((void *)map, map_len);
    close(fd);
    return rc;
}

void vs_snapshot_copy_free(vs_snapshot_copy_t *copy)
{
    free(copy->buf);
    memset(copy, 0, sizeof(*copy));
}

static int vs_read_pid_compare(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

int vs_snapshot_list(void (*fn)(pid_t pid, void *arg), void *arg,
                     void (*removed)(pid_t pid, int err, void *arg))
{
    unsigned uid = (unsigned)geteuid();
    char prefix[64];
    /* Our uid and our PID namespace: names from other namespaces carry
     * pids this process cannot check (another container's), and are
     * neither listed nor removed. */
    int prefix_len = snprintf(prefix, sizeof(prefix), "vramshim-%u-%llu-", uid,
                              vs_snapshot_pid_namespace());
    DIR *dir = opendir(VS_SNAPSHOT_SHM_DIR);
    if (!dir)
        return -errno;

    pid_t *pids = NULL;
    size_t count = 0, cap = 0;
    int rc = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (strncmp(entry->d_name, prefix, (size_t)prefix_len) != 0)
            continue;
        const char *digits = entry->d_name + prefix_len;
        char *end;
        errno = 0;
        long value = strtol(digits, &end, 10);
        if (errno || end == digits || *end || value <= 0 || value > INT_MAX)
            continue;
        pid_t pid = (pid_t)value;
        /* A name of ours that another user created is not a snapshot of
         * ours: not listed, not removed. */
        struct stat st;
        if (fstatat(dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode) || st.st_uid != uid)
            continue;
        if (!vs_snapshot_pid_alive(pid)) {
            int err = vs_read_remove_stale(uid, pid);
            if (removed && err != -ENOENT)
                removed(pid, err, arg);
            continue;
        }
        if (count == cap) {
            size_t bigger = cap ? cap * 2 : 16;
            pid_t *grown = realloc(pids, bigger * sizeof(*pids));
            if (!grown) {
                rc = -ENOMEM;
                goto out;
            }
            pids = grown;
            cap = bigger;
        }
        pids[count++] = pid;
    }
    if (count)
        qsort(pids, count, sizeof(*pids), vs_read_pid_compare);
    for (size_t i = 0; i < count; i++)
        fn(pids[i], arg);
    rc = (int)count;
out:
    free(pids);
    closedir(dir);
    return rc;
}

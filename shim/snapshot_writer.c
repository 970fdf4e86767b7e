/* snapshot_writer.c: the writer side of the live-state snapshot
 * (snapshot_abi.h), and the background thread that publishes it.
 *
 * Main entry points: `vs_snapshot_open`, then either
 * `vs_snapshot_publisher_start` with a fill callback or the
 * `vs_snapshot_begin` ... `vs_snapshot_end` sequence; `vs_snapshot_close`.
 *
 * The object is written with pwrite(2), never stored into through a shared
 * mapping: another process of the same user can truncate it, and /dev/shm
 * can be full, and a store into a mapping past the end of its object
 * raises SIGBUS in the program under the shim. A write that fails returns
 * an error instead (kept for `vs_snapshot_write_error`); one past a
 * truncation re-extends the object, and each publication restores its
 * size and fixed fields, so the live view recovers.
 *
 * Seqlock over pwrite: the sequence word is written alone, before and
 * after the data. Separate system calls reach the page in program order
 * (x86-TSO; the kernel's copy is ordinary stores), so a reader whose
 * acquire loads see a data word of a later publication then sees at least
 * that publication's odd sequence. The kernel may copy the sequence word
 * byte by byte: going odd never carries out of the low byte, and a torn
 * value read while it goes even again only exists after all that
 * publication's data is in place, so a reader that keeps a copy between
 * two equal even reads still has one publication.
 */
#include "snapshot_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Publisher state. Lock order: `lock` is a leaf; the fill callback runs
 * without it. */
typedef struct vs_snapshot_publisher_s {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* CLOCK_MONOTONIC */
    pthread_cond_t done;
    bool running;
    bool stop;
    uint64_t requested; /* flushes asked for */
    uint64_t completed; /* the `requested` value the last finished publication saw */
    unsigned period_ms;
    vs_snapshot_fill_fn fill;
    void *ctx;
} vs_snapshot_publisher_t;

/* Rows are gathered here and written in runs of consecutive indexes: one
 * pwrite per run, not per row. */
#define VS_SNAPSHOT_STAGE_ROWS 256

struct vs_snapshot_s {
    int fd;           /* the object, O_RDWR */
    size_t map_bytes; /* its size */
    uint32_t capacity;
    vs_snapshot_header_t draft; /* the header, assembled privately */
    uint64_t sequence;          /* last value written to the object's `sequence` */
    int write_error;            /* the first failed write's -errno; 0: none */
    bool odd_pending;           /* begun, the odd sequence not yet written */
    uint32_t stage_first;       /* index of stage[0] */
    uint32_t stage_count;
    vs_snapshot_row_t stage[VS_SNAPSHOT_STAGE_ROWS];
    pid_t creator; /* getpid() at open: only it unlinks */
    char name[VS_SNAPSHOT_NAME_MAX];
    vs_snapshot_publisher_t pub;
};

static uint64_t vs_snapshot_now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int vs_snapshot_name(char *buf, size_t len, unsigned uid, pid_t pid)
{
    int n = snprintf(buf, len, VS_SNAPSHOT_NAME_FORMAT, uid, vs_snapshot_pid_namespace(), (int)pid);
    return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* Reads /proc/<pid>/<file> into buf (NUL-terminated). */
static int vs_snapshot_read_proc(pid_t pid, const char *file, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, len - 1);
    int err = n < 0 ? -errno : 0;
    close(fd);
    if (err)
        return err;
    buf[n] = '\0';
    return 0;
}

/* Field 22 of /proc/<pid>/stat: the start time in clock ticks since boot.
 * With the pid it names one process for the lifetime of the machine. The
 * command name (field 2) may hold spaces and parentheses: count from the
 * last ')'. Returns 0 when unknown. */
static uint64_t vs_snapshot_start_ticks(pid_t pid)
{
    char stat[1024];
    if (vs_snapshot_read_proc(pid, "stat", stat, sizeof(stat)) < 0)
        return 0;
    return vs_snapshot_stat_start_ticks(stat);
}

static int vs_snapshot_capacity_from_env(uint32_t *out)
{
    const char *value = getenv("VRAMSHIM_SNAPSHOT_ROWS");
    if (!value || !*value) {
        *out = VS_SNAPSHOT_DEFAULT_ROWS;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long rows = strtoull(value, &end, 10);
    if (errno || *end || rows == 0 || rows > VS_SNAPSHOT_MAX_ROWS)
        return -EINVAL;
    *out = (uint32_t)rows;
    return 0;
}

/* Writes `bytes` at `offset` of the object. A failure is remembered (the
 * first one) and otherwise ignored: the publication goes on, readers may
 * see a damaged or missing snapshot, the program never notices. */
static void vs_snapshot_write(vs_snapshot_t *snap, const void *buf, size_t bytes, size_t offset)
{
    const char *p = buf;
    while (bytes > 0) {
        ssize_t n = pwrite(snap->fd, p, bytes, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (snap->write_error == 0)
                snap->write_error = n < 0 ? -errno : -EIO;
            return;
        }
        p += n;
        bytes -= (size_t)n;
        offset += (size_t)n;
    }
}

static void vs_snapshot_write_sequence(vs_snapshot_t *snap)
{
    vs_snapshot_write(snap, &snap->sequence, sizeof(snap->sequence),
                      offsetof(vs_snapshot_header_t, sequence));
}

/* The odd sequence goes out just before the first data write of an
 * update, not at `vs_snapshot_begin`: whatever the fill callback waits for
 * before it writes (a lock held through disk I/O) does not keep readers
 * retrying on an odd sequence. */
static void vs_snapshot_write_odd(vs_snapshot_t *snap)
{
    if (!snap->odd_pending)
        return;
    snap->odd_pending = false;
    vs_snapshot_write_sequence(snap);
}

static void vs_snapshot_flush_rows(vs_snapshot_t *snap)
{
    if (snap->stage_count == 0)
        return;
    vs_snapshot_write_odd(snap);
    vs_snapshot_write(snap, snap->stage, snap->stage_count * sizeof(vs_snapshot_row_t),
                      sizeof(vs_snapshot_header_t) + (size_t)snap->stage_first * sizeof(vs_snapshot_row_t));
    snap->stage_count = 0;
}

/* Someone truncated the object (or it never got its size): give it its
 * size back, its space reserved again. */
static void vs_snapshot_restore_size(vs_snapshot_t *snap)
{
    struct stat st;
    if (fstat(snap->fd, &st) != 0 || (size_t)st.st_size >= snap->map_bytes)
        return;
    int rc = posix_fallocate(snap->fd, 0, (off_t)snap->map_bytes);
    if (rc != 0 && snap->write_error == 0)
        snap->write_error = -rc;
}

void vs_snapshot_begin(vs_snapshot_t *snap)
{
    vs_snapshot_restore_size(snap);
    snap->sequence++;
    snap->odd_pending = true;
    snap->stage_count = 0;
}

void vs_snapshot_set_totals(vs_snapshot_t *snap, const vs_snapshot_totals_t *totals)
{
    snap->draft.totals = *totals;
}

void vs_snapshot_set_devices(vs_snapshot_t *snap, const vs_snapshot_device_t *devices,
                             uint32_t count)
{
    if (count > VS_SNAPSHOT_MAX_DEVICES)
        count = VS_SNAPSHOT_MAX_DEVICES;
    memset(snap->draft.devices, 0, sizeof(snap->draft.devices));
    memcpy(snap->draft.devices, devices, count * sizeof(*devices));
    snap->draft.device_count = count;
}

void vs_snapshot_set_mode(vs_snapshot_t *snap, uint32_t mode)
{
    snap->draft.mode = mode;
}

void vs_snapshot_set_event_seq(vs_snapshot_t *snap, uint64_t event_seq)
{
    snap->draft.event_seq = event_seq;
}

int vs_snapshot_put_row(vs_snapshot_t *snap, uint32_t index, const vs_snapshot_row_t *row)
{
    if (index >= snap->capacity)
        return -ENOSPC;
    if (snap->stage_count == VS_SNAPSHOT_STAGE_ROWS
        || (snap->stage_count > 0 && index != snap->stage_first + snap->stage_count))
        vs_snapshot_flush_rows(snap);
    if (snap->stage_count == 0)
        snap->stage_first = index;
    snap->stage[snap->stage_count++] = *row;
    return 0;
}

void vs_snapshot_set_row_count(vs_snapshot_t *snap, uint64_t count)
{
    if (count > snap->capacity) {
        snap->draft.row_count = snap->capacity;
        snap->draft.rows_dropped = count - snap->capacity;
    } else {
        snap->draft.row_count = (uint32_t)count;
        snap->draft.rows_dropped = 0;
    }
}

void vs_snapshot_end(vs_snapshot_t *snap)
{
    vs_snapshot_flush_rows(snap);
    vs_snapshot_write_odd(snap);
    snap->draft.update_ns = vs_snapshot_now_ns(CLOCK_MONOTONIC);
    snap->draft.publish_count++;
    /* The whole header but its sequence: the fixed fields too, so that a
     * truncated object is whole again after one publication. `magic` was
     * set in the draft once the object was initialised. */
    snap->draft.sequence = snap->sequence; /* odd: rewritten just after */
    vs_snapshot_write(snap, &snap->draft, sizeof(snap->draft), 0);
    snap->sequence++;
    vs_snapshot_write_sequence(snap);
}

int vs_snapshot_write_error(const vs_snapshot_t *snap)
{
    return snap->write_error;
}

uint32_t vs_snapshot_capacity(const vs_snapshot_t *snap)
{
    return snap->capacity;
}

/* Whether the object `name` is one a process of ours left: a regular file
 * of our uid. Anything else (another user's file planted under our name)
 * is never removed. */
static bool vs_snapshot_stale_is_ours(const char *name)
{
    struct stat st;
    int fd = shm_open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool ours = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
    close(fd);
    return ours;
}

/* Creates the object exclusively. The name holds our uid, PID namespace
 * and pid, so an existing one of ours was left by an earlier process with
 * this pid (killed before its exit handler ran, or a program that
 * exec'd): nobody else can be writing it. Remove it and try again. One that
 * is not ours is refused (-EEXIST): the program runs without a live view. */
static int vs_snapshot_create(const char *name)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -errno;
        if (!vs_snapshot_stale_is_ours(name))
            return -EEXIST;
        if (shm_unlink(name) < 0 && errno != ENOENT)
            return -errno;
    }
    return -EEXIST;
}

vs_snapshot_t *vs_snapshot_open(const vs_snapshot_identity_t *identity, int *err)
{
    vs_snapshot_t *snap = NULL;
    int fd = -1;
    int rc;
    uint32_t capacity = identity->row_capacity;

    if (!capacity && (rc = vs_snapshot_capacity_from_env(&capacity)) < 0)
        goto fail;
    if (capacity > VS_SNAPSHOT_MAX_ROWS) {
        rc = -EINVAL;
        goto fail;
    }
    snap = calloc(1, sizeof(*snap));
    if (!snap) {
        rc = -ENOMEM;
        goto fail;
    }
    snap->fd = -1;
    pid_t pid = identity->pid ? identity->pid : getpid();
    unsigned uid = (unsigned)geteuid();
    if ((rc = vs_snapshot_name(snap->name, sizeof(snap->name), uid, pid)) < 0)
        goto fail;
    snap->capacity = capacity;
    snap->creator = getpid();
    snap->map_bytes = sizeof(vs_snapshot_header_t) + (size_t)capacity * sizeof(vs_snapshot_row_t);

    fd = vs_snapshot_create(snap->name);
    if (fd < 0) {
        rc = fd;
        goto fail;
    }
    /* The umask may only have removed bits; make the mode exact anyway.
     * The whole size is reserved now: a /dev/shm too full for it refuses
     * the snapshot here (one warning) rather than failing a write later. */
    if (fchmod(fd, 0600) < 0) {
        rc = -errno;
        goto fail_unlink;
    }
    rc = posix_fallocate(fd, 0, (off_t)snap->map_bytes);
    if (rc != 0) {
        rc = -rc;
        goto fail_unlink;
    }
    snap->fd = fd;
    fd = -1;

    /* The fixed fields and one empty publication, then the magic last: a
     * reader that sees the magic sees a complete header. */
    vs_snapshot_header_t *d = &snap->draft;
    d->abi_version = VS_SNAPSHOT_ABI_VERSION;
    d->header_bytes = (uint32_t)sizeof(vs_snapshot_header_t);
    d->row_bytes = (uint32_t)sizeof(vs_snapshot_row_t);
    d->row_capacity = capacity;
    d->pid = pid;
    d->uid = uid;
    d->start_ticks = vs_snapshot_start_ticks(pid);
    d->start_realtime_ns = vs_snapshot_now_ns(CLOCK_REALTIME);
    d->mode = identity->mode;
    d->host_limit_bytes = identity->host_limit_bytes;
    if (identity->program) {
        snprintf(d->program, sizeof(d->program), "%s", identity->program);
    } else if (vs_snapshot_read_proc(pid, "comm", d->program, sizeof(d->program)) == 0) {
        d->program[strcspn(d->program, "\n")] = '\0';
    }
    vs_snapshot_begin(snap);
    vs_snapshot_end(snap);
    d->magic = VS_SNAPSHOT_MAGIC;
    vs_snapshot_write(snap, &d->magic, sizeof(d->magic), 0);
    if (snap->write_error != 0) {
        rc = snap->write_error;
        goto fail_unlink;
    }
    return snap;

fail_unlink:
    shm_unlink(snap->name);
fail:
    if (fd >= 0)
        close(fd);
    if (snap != NULL && snap->fd >= 0)
        close(snap->fd);
    free(snap);
    if (err)
        *err = rc;
    return NULL;
}

static void *vs_snapshot_publisher_main(void *arg)
{
    vs_snapshot_t *snap = arg;
    vs_snapshot_publisher_t *pub = &snap->pub;

    pthread_mutex_lock(&pub->lock);
    while (!pub->stop) {
        uint64_t serving = pub->requested;
        pthread_mutex_unlock(&pub->lock);

        vs_snapshot_begin(snap);
        pub->fill(snap, pub->ctx);
        vs_snapshot_end(snap);

        pthread_mutex_lock(&pub->lock);
        pub->completed = serving;
        pthread_cond_broadcast(&pub->done);

        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        uint64_t ns = (uint64_t)deadline.tv_nsec + (uint64_t)pub->period_ms * 1000000u;
        deadline.tv_sec += (time_t)(ns / 1000000000u);
        deadline.tv_nsec = (long)(ns % 1000000000u);
        while (!pub->stop && pub->requested == serving) {
            if (pthread_cond_timedwait(&pub->wake, &pub->lock, &deadline) == ETIMEDOUT)
                break;
        }
    }
    pthread_mutex_unlock(&pub->lock);
    return NULL;
}

int vs_snapshot_publisher_start(vs_snapshot_t *snap, vs_snapshot_fill_fn fill, void *ctx,
                                unsigned period_ms)
{
    vs_snapshot_publisher_t *pub = &snap->pub;
    pthread_condattr_t attr;
    sigset_t all, old;
    int rc;

    if (pub->running)
        return -EBUSY;
    if (!fill || period_ms == 0)
        return -EINVAL;
    pub->fill = fill;
    pub->ctx = ctx;
    pub->period_ms = period_ms;
    pub->stop = false;
    pub->requested = pub->completed = 0;
    if ((rc = pthread_mutex_init(&pub->lock, NULL)) != 0)
        return -rc;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&pub->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0)
        goto fail_mutex;
    if ((rc = pthread_cond_init(&pub->done, NULL)) != 0)
        goto fail_wake;

    /* The thread inherits a full signal mask: the program's signals must
     * never be delivered to a thread it does not know about. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&pub->thread, NULL, vs_snapshot_publisher_main, snap);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        goto fail_done;
    pthread_setname_np(pub->thread, "vramshim-snap");
    pub->running = true;
    return 0;

fail_done:
    pthread_cond_destroy(&pub->done);
fail_wake:
    pthread_cond_destroy(&pub->wake);
fail_mutex:
    pthread_mutex_destroy(&pub->lock);
    return -rc;
}

int vs_snapshot_publisher_flush(vs_snapshot_t *snap)
{
    vs_snapshot_publisher_t *pub = &snap->pub;
    if (!pub->running)
        return -ESRCH;
    pthread_mutex_lock(&pub->lock);
    uint64_t target = ++pub->requested;
    pthread_cond_signal(&pub->wake);
    while (pub->completed < target && !pub->stop)
        pthread_cond_wait(&pub->done, &pub->lock);
    pthread_mutex_unlock(&pub->lock);
    return 0;
}

bool vs_snapshot_owned(const vs_snapshot_t *snap)
{
    return snap != NULL && getpid() == snap->creator;
}

void vs_snapshot_publisher_stop(vs_snapshot_t *snap)
{
    vs_snapshot_publisher_t *pub = &snap->pub;
    /* In a forked child the thread does not exist: joining it would wait
     * forever. */
    if (!pub->running || !vs_snapshot_owned(snap))
        return;
    pthread_mutex_lock(&pub->lock);
    pub->stop = true;
    pthread_cond_broadcast(&pub->wake);
    pthread_cond_broadcast(&pub->done);
    pthread_mutex_unlock(&pub->lock);
    pthread_join(pub->thread, NULL);
    pthread_cond_destroy(&pub->done);
    pthread_cond_destroy(&pub->wake);
    pthread_mutex_destroy(&pub->lock);
    pub->running = false;
}

void vs_snapshot_close(vs_snapshot_t *snap, bool unlink)
{
    if (!snap)
        return;
    /* In a forked child the publisher thread does not exist (only the
     * forking thread survives fork): never join it there. */
    if (getpid() == snap->creator)
        vs_snapshot_publisher_stop(snap);
    if (unlink && getpid() == snap->creator)
        shm_unlink(snap->name);
    close(snap->fd);
    free(snap);
}

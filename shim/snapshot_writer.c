/* snapshot_writer.c: the writer side of the live-state snapshot
 * (snapshot_abi.h), and the background thread that publishes it.
 *
 * Main entry points: `vs_snapshot_open`, then either
 * `vs_snapshot_publisher_start` with a fill callback or the
 * `vs_snapshot_begin` ... `vs_snapshot_end` sequence; `vs_snapshot_close`.
 *
 * The object is written only through atomic 64-bit stores, ordered by the
 * seqlock (see snapshot_abi.h). A reader in another process can see
 * any interleaving of those stores, and the sequence tells it whether what
 * it copied is one publication; in the same process (tests) the accesses
 * are atomics, so there is no data race for TSan to report.
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

struct vs_snapshot_s {
    vs_snapshot_header_t *shared; /* the mapping */
    vs_snapshot_row_t *rows;      /* inside the mapping, at header_bytes */
    size_t map_bytes;
    uint32_t capacity;
    vs_snapshot_header_t draft; /* the guarded header, assembled privately */
    uint64_t sequence;          /* last value stored in shared->sequence */
    pid_t creator;              /* getpid() at open: only it unlinks */
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
    int n = snprintf(buf, len, VS_SNAPSHOT_NAME_FORMAT, uid, (int)pid);
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

/* Word-wise atomic copy into the mapping. Both sides are 8-byte aligned and
 * `bytes` is a multiple of 8 (static-asserted in the ABI). Release stores:
 * a reader whose acquire load sees one of these words also sees the odd
 * sequence stored before it, so its final sequence check fails. (The
 * fence-free form of the seqlock: release/acquire cost nothing on x86,
 * and TSan, which does not model fences, understands them.) */
static void vs_snapshot_store_words(void *dst, const void *src, size_t bytes)
{
    uint64_t *d = dst;
    const uint64_t *s = src;
    for (size_t i = 0; i < bytes / 8; i++)
        __atomic_store_n(&d[i], s[i], __ATOMIC_RELEASE);
}

void vs_snapshot_begin(vs_snapshot_t *snap)
{
    snap->sequence++;
    /* Every data store that follows is a release store, which orders
     * this odd value before it (see vs_snapshot_store_words). */
    __atomic_store_n(&snap->shared->sequence, snap->sequence, __ATOMIC_RELAXED);
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
    vs_snapshot_store_words(&snap->rows[index], row, sizeof(*row));
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
    snap->draft.update_ns = vs_snapshot_now_ns(CLOCK_MONOTONIC);
    snap->draft.publish_count++;
    vs_snapshot_store_words((char *)snap->shared + VS_SNAPSHOT_GUARDED_OFFSET,
                            (const char *)&snap->draft + VS_SNAPSHOT_GUARDED_OFFSET,
                            sizeof(vs_snapshot_header_t) - VS_SNAPSHOT_GUARDED_OFFSET);
    snap->sequence++;
    __atomic_store_n(&snap->shared->sequence, snap->sequence, __ATOMIC_RELEASE);
}

uint32_t vs_snapshot_capacity(const vs_snapshot_t *snap)
{
    return snap->capacity;
}

/* Creates the object exclusively. The name holds our uid and pid, so an
 * existing one was left by an earlier process with this pid (killed before
 * its exit handler ran, or a program that exec'd): nobody else can be
 * writing it. Remove it and try again. */
static int vs_snapshot_create(const char *name)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -errno;
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
    /* The umask may only have removed bits; make the mode exact anyway. */
    if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)snap->map_bytes) < 0) {
        rc = -errno;
        goto fail_unlink;
    }
    void *map = mmap(NULL, snap->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        rc = -errno;
        goto fail_unlink;
    }
    close(fd);
    fd = -1;
    snap->shared = map;
    snap->rows = (vs_snapshot_row_t *)((char *)map + sizeof(vs_snapshot_header_t));

    /* The fixed fields, then one empty publication, then the magic last
     * (release): a reader that sees the magic sees a complete header. */
    vs_snapshot_header_t *h = snap->shared;
    __atomic_store_n(&h->abi_version, VS_SNAPSHOT_ABI_VERSION, __ATOMIC_RELAXED);
    __atomic_store_n(&h->header_bytes, (uint32_t)sizeof(vs_snapshot_header_t), __ATOMIC_RELAXED);
    __atomic_store_n(&h->row_bytes, (uint32_t)sizeof(vs_snapshot_row_t), __ATOMIC_RELAXED);
    __atomic_store_n(&h->row_capacity, capacity, __ATOMIC_RELAXED);

    vs_snapshot_header_t *d = &snap->draft;
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
    __atomic_store_n(&h->magic, VS_SNAPSHOT_MAGIC, __ATOMIC_RELEASE);
    return snap;

fail_unlink:
    shm_unlink(snap->name);
fail:
    if (fd >= 0)
        close(fd);
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
    munmap(snap->shared, snap->map_bytes);
    free(snap);
}

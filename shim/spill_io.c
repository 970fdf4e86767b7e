/* spill_io.c: the disk tier's file operations (`vs_spill_io`): the POSIX
 * implementation and the fault-injecting layer of `VRAMSHIM_IO_FAULT`.
 *
 * The spill file never has a name: it is opened with O_TMPFILE, so a process
 * killed at any moment leaves nothing on disk. Filesystems without O_TMPFILE
 * get a mkostemp(3) file that is unlinked before any byte is written (the
 * name exists for the two system calls in between). O_DIRECT is asked for
 * first, because spilled bytes are read once and must not push the
 * program's own files out of the page cache; a filesystem that refuses it
 * gets buffered I/O, and the caller is told which one it got.
 */
#include "spill_io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- System calls (replaceable by tests) ------------------------------- */

static int vs_spill_io_sys_open(const char *path, int flags, mode_t mode)
{
    return open(path, flags, mode);
}

static int vs_spill_io_sys_set_flags(int fd, int flags)
{
    return fcntl(fd, F_SETFL, flags);
}

static int vs_spill_io_sys_make_temp(char *path_template, int flags)
{
    return mkostemp(path_template, flags);
}

static const vs_spill_io_sys_t vs_spill_io_sys_real = {
    .open_file = vs_spill_io_sys_open,
    .set_flags = vs_spill_io_sys_set_flags,
    .make_temp = vs_spill_io_sys_make_temp,
};

static _Atomic(const vs_spill_io_sys_t *) vs_spill_io_sys_now = &vs_spill_io_sys_real;

void vs_spill_io_set_sys(const vs_spill_io_sys_t *sys)
{
    atomic_store(&vs_spill_io_sys_now, sys != NULL ? sys : &vs_spill_io_sys_real);
}

/* ---- POSIX ------------------------------------------------------------- */

/* Adds O_DIRECT to an open file; false (buffered I/O) when the filesystem
 * refuses it. */
static bool vs_spill_io_try_direct(const vs_spill_io_sys_t *sys, int fd)
{
    int flags = fcntl(fd, F_GETFL);
    return flags >= 0 && sys->set_flags(fd, flags | O_DIRECT) == 0;
}

/* The fallback for filesystems without O_TMPFILE: a named file, unlinked at
 * once. mkostemp creates it 0600. */
static int vs_spill_io_open_named(const vs_spill_io_sys_t *sys, const char *dir, bool *direct_io)
{
    char path[PATH_MAX];
    int len = snprintf(path, sizeof path, "%s/.vramshim-spill-XXXXXX", dir);
    if (len < 0 || (size_t)len >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = sys->make_temp(path, O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (unlink(path) != 0) {
        /* A file that would outlive the process is worse than no disk tier. */
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    *direct_io = vs_spill_io_try_direct(sys, fd);
    return fd;
}

static int vs_spill_io_posix_open_temp(const char *dir, bool *direct_io)
{
    const vs_spill_io_sys_t *sys = atomic_load(&vs_spill_io_sys_now);
    const int flags = O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC;

    int fd = sys->open_file(dir, flags | O_DIRECT, 0600);
    if (fd >= 0) {
        *direct_io = true;
        return fd;
    }
    /* EINVAL is how a filesystem refuses O_DIRECT at open. */
    if (errno == EINVAL) {
        fd = sys->open_file(dir, flags, 0600);
        if (fd >= 0) {
            *direct_io = vs_spill_io_try_direct(sys, fd);
            return fd;
        }
    }
    /* No O_TMPFILE: EOPNOTSUPP from the filesystem, EISDIR from kernels that
     * read the flag as O_DIRECTORY, EINVAL from some others. */
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
        return -1;
    return vs_spill_io_open_named(sys, dir, direct_io);
}

static int vs_spill_io_posix_reserve(int fd, uint64_t offset, uint64_t bytes)
{
    int rc;
    do
        rc = fallocate(fd, 0, (off_t)offset, (off_t)bytes);
    while (rc != 0 && errno == EINTR);
    if (rc == 0 || errno != EOPNOTSUPP)
        return rc;
    /* A filesystem without fallocate: the C library writes the range. */
    rc = posix_fallocate(fd, (off_t)offset, (off_t)bytes);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return 0;
}

static int vs_spill_io_posix_punch(int fd, uint64_t offset, uint64_t bytes)
{
    int rc;
    do
        rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)bytes);
    while (rc != 0 && errno == EINTR);
    return rc;
}

static int vs_spill_io_posix_truncate(int fd, uint64_t bytes)
{
    int rc;
    do
        rc = ftruncate(fd, (off_t)bytes);
    while (rc != 0 && errno == EINTR);
    return rc;
}

static ssize_t vs_spill_io_posix_write_at(int fd, const void *buf, size_t bytes, uint64_t offset)
{
    return pwrite(fd, buf, bytes, (off_t)offset);
}

static ssize_t vs_spill_io_posix_read_at(int fd, void *buf, size_t bytes, uint64_t offset)
{
    return pread(fd, buf, bytes, (off_t)offset);
}

static int vs_spill_io_posix_close(int fd)
{
    return close(fd);
}

const vs_spill_io_t vs_spill_io_posix = {
    .open_temp = vs_spill_io_posix_open_temp,
    .reserve = vs_spill_io_posix_reserve,
    .punch = vs_spill_io_posix_punch,
    .truncate = vs_spill_io_posix_truncate,
    .write_at = vs_spill_io_posix_write_at,
    .read_at = vs_spill_io_posix_read_at,
    .close = vs_spill_io_posix_close,
};

static _Atomic(const vs_spill_io_t *) vs_spill_io_base = &vs_spill_io_posix;

void vs_spill_io_set_base(const vs_spill_io_t *io)
{
    atomic_store(&vs_spill_io_base, io != NULL ? io : &vs_spill_io_posix);
}

/* ---- Fault layer ------------------------------------------------------- */

/* The plan is written only while no I/O runs (start-up, between tests); the
 * counters are atomic because spills run on many threads. */
static vs_spill_io_faults_t vs_spill_io_plan;
static _Atomic uint64_t vs_spill_io_calls[VS_SPILL_IO_FAULTS_MAX];
static _Atomic uint64_t vs_spill_io_hits[VS_SPILL_IO_FAULTS_MAX];
static _Atomic uint64_t vs_spill_io_injected;
static _Atomic bool vs_spill_io_faulting;

/* Counts one call of `op` in every entry for it; returns the fault that hits
 * this call (the first listed), or NULL. */
static const vs_spill_io_fault_t *vs_spill_io_fault_for(vs_spill_io_op_t op)
{
    const vs_spill_io_fault_t *hit = NULL;

    for (uint32_t i = 0; i < vs_spill_io_plan.count; i++) {
        const vs_spill_io_fault_t *f = &vs_spill_io_plan.fault[i];
        if (f->op != op)
            continue;
        uint64_t call = atomic_fetch_add(&vs_spill_io_calls[i], 1) + 1;
        if (hit != NULL || call <= f->after || (call - f->after) % f->every != 0)
            continue;
        if (f->times != 0 && atomic_fetch_add(&vs_spill_io_hits[i], 1) >= f->times)
            continue;
        hit = f;
    }
    if (hit != NULL)
        atomic_fetch_add(&vs_spill_io_injected, 1);
    return hit;
}

/* Half of `bytes` (at least 1); with O_DIRECT a whole number of pages,
 * since the kernel moves nothing smaller (a single page goes whole). */
static size_t vs_spill_io_short_length(int fd, size_t bytes)
{
    size_t half = bytes / 2;
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0 && (flags & O_DIRECT) != 0) {
        half &= ~(size_t)4095;
        return half != 0 ? half : bytes;
    }
    return half != 0 ? half : bytes;
}

static int vs_spill_io_fault_errno(const vs_spill_io_fault_t *f)
{
    return f->kind == VS_SPILL_IO_FAULT_ENOSPC ? ENOSPC : EIO;
}

static int vs_spill_io_fault_open_temp(const char *dir, bool *direct_io)
{
    return atomic_load(&vs_spill_io_base)->open_temp(dir, direct_io);
}

static int vs_spill_io_fault_reserve(int fd, uint64_t offset, uint64_t bytes)
{
    const vs_spill_io_fault_t *f = vs_spill_io_fault_for(VS_SPILL_IO_RESERVE);
    if (f != NULL) {
        errno = vs_spill_io_fault_errno(f);
        return -1;
    }
    return atomic_load(&vs_spill_io_base)->reserve(fd, offset, bytes);
}

static int vs_spill_io_fault_punch(int fd, uint64_t offset, uint64_t bytes)
{
    return atomic_load(&vs_spill_io_base)->punch(fd, offset, bytes);
}

static int vs_spill_io_fault_truncate(int fd, uint64_t bytes)
{
    return atomic_load(&vs_spill_io_base)->truncate(fd, bytes);
}

/* A slow call: its delay, then the real call. */
static void vs_spill_io_delay(const vs_spill_io_fault_t *f)
{
    struct timespec delay = {.tv_sec = (time_t)(f->ms / 1000), .tv_nsec = (long)(f->ms % 1000) * 1000000l};
    int saved = errno;
    while (nanosleep(&delay, &delay) != 0 && errno == EINTR)
        ;
    errno = saved;
}

static ssize_t vs_spill_io_fault_write_at(int fd, const void *buf, size_t bytes, uint64_t offset)
{
    const vs_spill_io_t *base = atomic_load(&vs_spill_io_base);
    const vs_spill_io_fault_t *f = vs_spill_io_fault_for(VS_SPILL_IO_WRITE);
    if (f != NULL && f->kind == VS_SPILL_IO_FAULT_SLOW)
        vs_spill_io_delay(f);
    if (f == NULL || f->kind == VS_SPILL_IO_FAULT_SLOW)
        return base->write_at(fd, buf, bytes, offset);
    if (f->kind == VS_SPILL_IO_FAULT_SHORT)
        return base->write_at(fd, buf, vs_spill_io_short_length(fd, bytes), offset);
    errno = vs_spill_io_fault_errno(f);
    return -1;
}

static ssize_t vs_spill_io_fault_read_at(int fd, void *buf, size_t bytes, uint64_t offset)
{
    const vs_spill_io_t *base = atomic_load(&vs_spill_io_base);
    const vs_spill_io_fault_t *f = vs_spill_io_fault_for(VS_SPILL_IO_READ);
    if (f != NULL && f->kind == VS_SPILL_IO_FAULT_SLOW)
        vs_spill_io_delay(f);
    if (f == NULL || f->kind == VS_SPILL_IO_FAULT_SLOW)
        return base->read_at(fd, buf, bytes, offset);
    if (f->kind == VS_SPILL_IO_FAULT_SHORT)
        return base->read_at(fd, buf, vs_spill_io_short_length(fd, bytes), offset);
    if (f->kind == VS_SPILL_IO_FAULT_CORRUPT) {
        ssize_t got = base->read_at(fd, buf, bytes, offset);
        if (got > 0)
            ((unsigned char *)buf)[got / 2] ^= 0x10;
        return got;
    }
    errno = EIO;
    return -1;
}

static int vs_spill_io_fault_close(int fd)
{
    return atomic_load(&vs_spill_io_base)->close(fd);
}

static const vs_spill_io_t vs_spill_io_faulty = {
    .open_temp = vs_spill_io_fault_open_temp,
    .reserve = vs_spill_io_fault_reserve,
    .punch = vs_spill_io_fault_punch,
    .truncate = vs_spill_io_fault_truncate,
    .write_at = vs_spill_io_fault_write_at,
    .read_at = vs_spill_io_fault_read_at,
    .close = vs_spill_io_fault_close,
};

const vs_spill_io_t *vs_spill_io(void)
{
    return atomic_load(&vs_spill_io_faulting) ? &vs_spill_io_faulty : atomic_load(&vs_spill_io_base);
}

void vs_spill_io_set_faults(const vs_spill_io_faults_t *faults)
{
    atomic_store(&vs_spill_io_faulting, false);
    memset(&vs_spill_io_plan, 0, sizeof vs_spill_io_plan);
    for (uint32_t i = 0; i < VS_SPILL_IO_FAULTS_MAX; i++) {
        atomic_store(&vs_spill_io_calls[i], 0);
        atomic_store(&vs_spill_io_hits[i], 0);
    }
    atomic_store(&vs_spill_io_injected, 0);
    if (faults == NULL || faults->count == 0)
        return;
    vs_spill_io_plan = *faults;
    if (vs_spill_io_plan.count > VS_SPILL_IO_FAULTS_MAX)
        vs_spill_io_plan.count = VS_SPILL_IO_FAULTS_MAX;
    atomic_store(&vs_spill_io_faulting, true);
}

uint64_t vs_spill_io_faults_injected(void)
{
    return atomic_load(&vs_spill_io_injected);
}

/* ---- Parser ------------------------------------------------------------ */

/* True when [text, text + len) is exactly `word`. */
static bool vs_spill_io_is(const char *text, size_t len, const char *word)
{
    return strlen(word) == len && memcmp(text, word, len) == 0;
}

/* A decimal count: digits only. */
static int vs_spill_io_parse_count(const char *text, size_t len, uint64_t *out)
{
    uint64_t value = 0;
    if (len == 0)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -EINVAL;
        unsigned digit = (unsigned)(text[i] - '0');
        if (value > (UINT64_MAX - digit) / 10)
            return -ERANGE;
        value = value * 10 + digit;
    }
    *out = value;
    return 0;
}

/* One `OP:FAULT[:key=value]...` entry of `len` bytes. */
static int vs_spill_io_parse_entry(const char *text, size_t len, vs_spill_io_fault_t *out)
{
    const char *end = text + len;
    const char *field = text;
    bool seen_after = false, seen_every = false, seen_times = false, seen_ms = false;
    int index = 0;

    *out = (vs_spill_io_fault_t){.every = 1, .ms = 100};
    for (;;) {
        const char *colon = memchr(field, ':', (size_t)(end - field));
        const char *field_end = colon != NULL ? colon : end;
        size_t field_len = (size_t)(field_end - field);

        if (index == 0) {
            if (vs_spill_io_is(field, field_len, "reserve"))
                out->op = VS_SPILL_IO_RESERVE;
            else if (vs_spill_io_is(field, field_len, "write"))
                out->op = VS_SPILL_IO_WRITE;
            else if (vs_spill_io_is(field, field_len, "read"))
                out->op = VS_SPILL_IO_READ;
            else
                return -EINVAL;
        } else if (index == 1) {
            if (vs_spill_io_is(field, field_len, "ENOSPC"))
                out->kind = VS_SPILL_IO_FAULT_ENOSPC;
            else if (vs_spill_io_is(field, field_len, "EIO"))
                out->kind = VS_SPILL_IO_FAULT_EIO;
            else if (vs_spill_io_is(field, field_len, "short"))
                out->kind = VS_SPILL_IO_FAULT_SHORT;
            else if (vs_spill_io_is(field, field_len, "corrupt"))
                out->kind = VS_SPILL_IO_FAULT_CORRUPT;
            else if (vs_spill_io_is(field, field_len, "slow"))
                out->kind = VS_SPILL_IO_FAULT_SLOW;
            else
                return -EINVAL;
        } else {
            const char *equals = memchr(field, '=', field_len);
            if (equals == NULL)
                return -EINVAL;
            size_t key_len = (size_t)(equals - field);
            const char *value = equals + 1;
            size_t value_len = (size_t)(field_end - value);
            uint64_t *slot;
            bool *seen;
            if (vs_spill_io_is(field, key_len, "after"))
                slot = &out->after, seen = &seen_after;
            else if (vs_spill_io_is(field, key_len, "every"))
                slot = &out->every, seen = &seen_every;
            else if (vs_spill_io_is(field, key_len, "times"))
                slot = &out->times, seen = &seen_times;
            else if (vs_spill_io_is(field, key_len, "ms"))
                slot = &out->ms, seen = &seen_ms;
            else
                return -EINVAL;
            if (*seen)
                return -EINVAL;
            *seen = true;
            int rc = vs_spill_io_parse_count(value, value_len, slot);
            if (rc != 0)
                return rc;
            /* Every 0th call and at most 0 times mean nothing: refused
             * rather than read as "never". */
            if (*slot == 0 && slot != &out->after)
                return -EINVAL;
        }
        index++;
        if (colon == NULL)
            break;
        field = colon + 1;
    }
    if (index < 2)
        return -EINVAL;
    /* A delay means something only to a slow call, and longer than a
     * minute is a typo. */
    if (seen_ms && (out->kind != VS_SPILL_IO_FAULT_SLOW || out->ms > 60000))
        return -EINVAL;
    /* The faults each operation can have. */
    switch (out->kind) {
    case VS_SPILL_IO_FAULT_ENOSPC:
        return out->op != VS_SPILL_IO_READ ? 0 : -EINVAL;
    case VS_SPILL_IO_FAULT_SHORT:
        return out->op != VS_SPILL_IO_RESERVE ? 0 : -EINVAL;
    case VS_SPILL_IO_FAULT_CORRUPT:
        return out->op == VS_SPILL_IO_READ ? 0 : -EINVAL;
    case VS_SPILL_IO_FAULT_SLOW:
        return out->op != VS_SPILL_IO_RESERVE ? 0 : -EINVAL;
    case VS_SPILL_IO_FAULT_EIO:
    default:
        return 0;
    }
}

int vs_spill_io_parse_faults(const char *text, vs_spill_io_faults_t *out)
{
    vs_spill_io_faults_t parsed;
    const char *entry = text;

    if (text == NULL || text[0] == '\0')
        return -EINVAL;
    memset(&parsed, 0, sizeof parsed);
    for (;;) {
        const char *comma = strchr(entry, ',');
        size_t len = comma != NULL ? (size_t)(comma - entry) : strlen(entry);
        if (parsed.count == VS_SPILL_IO_FAULTS_MAX)
            return -EINVAL;
        int rc = vs_spill_io_parse_entry(entry, len, &parsed.fault[parsed.count]);
        if (rc != 0)
            return rc;
        parsed.count++;
        if (comma == NULL)
            break;
        entry = comma + 1;
    }
    *out = parsed;
    return 0;
}

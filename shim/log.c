/* log.c: leveled logging for the shim (`vs_log`).
 *
 * The shim lives inside someone else's process and is entered from any
 * thread, from inside the driver's own callbacks and before `main`. So a
 * message is formatted into a stack buffer and written with one `write(2)`
 * (lines from different threads never interleave), nothing here allocates,
 * and `errno` is restored before returning.
 */
#include "log.h"

#include "internal.h"
#include "output_file.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static _Atomic int vs_log_threshold = VS_LOG_WARN;
static _Atomic int vs_log_fd = STDERR_FILENO;

static const char *const vs_log_names[] = {"error", "warn", "info", "debug"};

int vs_log_configure(vs_log_level_t level, const char *path)
{
    int saved_errno = errno;
    int rc = 0;

    atomic_store(&vs_log_threshold, (int)level);
    if (path != NULL && path[0] != '\0') {
        /* Created 0600 (the log shows the allocation map), never through
         * a symlink, and never a FIFO: a log must not block the program or
         * kill it with SIGPIPE (output_file.h). */
        int fd = vs_output_open(path, VS_OUTPUT_APPEND);
        if (fd < 0)
            rc = fd;
        else
            atomic_store(&vs_log_fd, fd);
    }
    errno = saved_errno;
    return rc;
}

int vs_log_enabled(vs_log_level_t level)
{
    return (int)level <= atomic_load_explicit(&vs_log_threshold, memory_order_relaxed);
}

void vs_log(vs_log_level_t level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int saved_errno = errno;
    int used;

    if (!vs_log_enabled(level))
        return;
    used = snprintf(line, sizeof line, "vramshim[%d] %s: ", (int)getpid(), vs_log_names[level]);
    if (used < 0)
        goto out;
    va_start(ap, fmt);
    int body = vsnprintf(line + used, sizeof line - (size_t)used, fmt, ap);
    va_end(ap);
    if (body < 0)
        goto out;
    used += body;
    if ((size_t)used >= sizeof line - 1)
        used = (int)sizeof line - 2;
    line[used++] = '\n';
    /* One write per line; a short write to a log is not worth retrying. */
    ssize_t ignored = write(atomic_load(&vs_log_fd), line, (size_t)used);
    (void)ignored;
out:
    errno = saved_errno;
}

/* internal.h: a failed VS_ASSERT. Only debug builds call it (elsewhere the
 * assertions compile to nothing): a loud failure, then abort. */
const char *vs_log_bytes(char *buf, size_t len, uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double value = (double)bytes;
    unsigned unit = 0;
    while (value >= 1024.0 && unit + 1 < sizeof units / sizeof units[0]) {
        value /= 1024.0;
        unit++;
    }
    if (unit == 0)
        snprintf(buf, len, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, len, value < 100.0 ? "%.1f %s" : "%.0f %s", value, units[unit]);
    return buf;
}

void vs_assert_fail(const char *condition, const char *file, int line, const char *function)
{
    vs_log(VS_LOG_ERROR, "assertion failed: %s (%s:%d, %s)", condition, file, line, function);
    abort();
}

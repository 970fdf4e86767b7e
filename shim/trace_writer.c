/* trace_writer.c: the `VRAMSHIM_TRACE` recorder (`vs_trace_open`,
 * `vs_trace_operation`).
 *
 * A leaf: it includes and calls nothing of the shim but logging. The ids
 * of an operation's uses come from the operation's own scan
 * (`vs_touch_t.ids`), never from a look-up of its own.
 *
 * Every line is formatted by `vs_trace_format` (policy/trace.h) into one
 * 64 KiB buffer under `vs_trace.lock` and written with write(2) when the
 * buffer fills and at exit. Operations get their `seq` here, under the
 * lock, rather than the registry's sequence number: two threads scanning at
 * once may take registry numbers in one order and reach the file in the
 * other, and the format wants `seq` non-decreasing with each operation's
 * uses consecutive.
 *
 * The file is created at the first event, not at load: `LD_PRELOAD` loads
 * the shim into every process of a run (shells, `python` wrappers), and
 * those that never touch the GPU must not truncate the trace of the one
 * that does.
 */
#include "trace_writer.h"

#include "internal.h"
#include "log.h"
#include "output_file.h"
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VS_TRACE_BUFFER_BYTES (64u << 10)
/* Stream handles numbered one by one; later ones share the last number. */
#define VS_TRACE_STREAMS 256
_Atomic bool vs_trace_active;

/* Lock order: a leaf below the registry lock (internal.h). */
static struct {
    vs_mutex_t lock;
    int fd;
    const char *path; /* set by `vs_trace_open`; the file is created at the first event */
    uint64_t next_seq;
    size_t used;
    uintptr_t streams[VS_TRACE_STREAMS]; /* [0] is the legacy stream, NULL */
    size_t stream_count;
    char buffer[VS_TRACE_BUFFER_BYTES];
} vs_trace = {
    .lock = VS_MUTEX_INITIALIZER,
    .fd = -1,
    .stream_count = 1,
};

/* Writes the buffer out; on failure warns once and turns tracing off. Lock
 * held. */
static void vs_trace_flush_trace_locked(void)
{
    VS_ASSERT_HELD(&vs_trace.lock);
    size_t done = 0;

    while (done < vs_trace.used && vs_trace.fd >= 0) {
        ssize_t n = write(vs_trace.fd, vs_trace.buffer + done, vs_trace.used - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            vs_log(VS_LOG_WARN, "VRAMSHIM_TRACE: write failed (%s); tracing stops here",
                   n < 0 ? strerror(errno) : "no progress");
            atomic_store_explicit(&vs_trace_active, false, memory_order_relaxed);
            close(vs_trace.fd);
            vs_trace.fd = -1;
            break;
        }
        done += (size_t)n;
    }
    vs_trace.used = 0;
}

/* Creates the file at the first event; false (after one warning, tracing
 * off) when it cannot be. Lock held. */
static bool vs_trace_ready_trace_locked(void)
{
    VS_ASSERT_HELD(&vs_trace.lock);
    static const char header[] = "# vramshim trace v1\n";

    if (vs_trace.fd >= 0)
        return true;
    if (vs_trace.path == NULL)
        return false;
    /* 0600, no symlink followed, no FIFO, never another user's file
     * (output_file.h); an earlier trace of ours is started over. */
    int fd = vs_output_open(vs_trace.path, VS_OUTPUT_REPLACE);
    if (fd < 0) {
        vs_log(VS_LOG_WARN, "cannot open VRAMSHIM_TRACE=%s (%s; it must be a regular file of yours or a "
               "new name); not tracing", vs_trace.path, strerror(-fd));
        vs_trace.path = NULL;
        atomic_store_explicit(&vs_trace_active, false, memory_order_relaxed);
        return false;
    }
    vs_trace.fd = fd;
    memcpy(vs_trace.buffer, header, sizeof header - 1);
    vs_trace.used = sizeof header - 1;
    return true;
}

/* Appends one event. Lock held. */
static void vs_trace_put_trace_locked(const vs_trace_event_t *ev)
{
    VS_ASSERT_HELD(&vs_trace.lock);
    if (!vs_trace_ready_trace_locked())
        return;
    if (VS_TRACE_BUFFER_BYTES - vs_trace.used < VS_TRACE_LINE_MAX + 2)
        vs_trace_flush_trace_locked();
    int n = vs_trace_format(ev, vs_trace.buffer + vs_trace.used, VS_TRACE_BUFFER_BYTES - vs_trace.used);
    if (n > 0)
        vs_trace.used += (size_t)n;
}

static void vs_trace_put(const vs_trace_event_t *ev)
{
    vs_mutex_lock(&vs_trace.lock);
    vs_trace_put_trace_locked(ev);
    vs_mutex_unlock(&vs_trace.lock);
}

/* The small number of a stream handle, in first-seen order. Lock held. */
static uint64_t vs_trace_stream_trace_locked(uintptr_t key)
{
    VS_ASSERT_HELD(&vs_trace.lock);
    for (size_t i = 0; i < vs_trace.stream_count; i++) {
        if (vs_trace.streams[i] == key)
            return i;
    }
    if (vs_trace.stream_count == VS_TRACE_STREAMS)
        return VS_TRACE_STREAMS - 1;
    vs_trace.streams[vs_trace.stream_count] = key;
    return vs_trace.stream_count++;
}

/* A forked child shares the file offset but not the parent's later lines:
 * it drops what it inherited and records nothing. */
static void vs_trace_atfork_child(void)
{
    vs_mutex_reinit(&vs_trace.lock);
    vs_trace.used = 0;
    if (vs_trace.fd >= 0)
        close(vs_trace.fd);
    vs_trace.fd = -1;
    vs_trace.path = NULL;
    atomic_store_explicit(&vs_trace_active, false, memory_order_relaxed);
}

void vs_trace_open(const char *path)
{
    vs_mutex_lock(&vs_trace.lock);
    vs_trace.path = path;
    vs_mutex_unlock(&vs_trace.lock);
    (void)pthread_atfork(NULL, NULL, vs_trace_atfork_child);
    atomic_store_explicit(&vs_trace_active, true, memory_order_relaxed);
}

void vs_trace_close(void)
{
    vs_mutex_lock(&vs_trace.lock);
    atomic_store_explicit(&vs_trace_active, false, memory_order_relaxed);
    vs_trace_flush_trace_locked();
    if (vs_trace.fd >= 0)
        close(vs_trace.fd);
    vs_trace.fd = -1;
    vs_trace.path = NULL;
    vs_mutex_unlock(&vs_trace.lock);
}

void vs_trace_alloc(uint64_t id, uint64_t size, bool evictable)
{
    vs_trace_event_t ev = {.kind = VS_TRACE_ALLOC, .id = id, .size = size, .evictable = evictable};
    vs_trace_put(&ev);
}

void vs_trace_free(uint64_t id)
{
    vs_trace_event_t ev = {.kind = VS_TRACE_FREE, .id = id};
    vs_trace_put(&ev);
}

void vs_trace_residency(uint64_t id, bool on_device)
{
    vs_trace_event_t ev = {.kind = VS_TRACE_RESIDENCY, .id = id, .resident = on_device};
    vs_trace_put(&ev);
}

/* Writes one `U` line per id, all with one new `seq`. */
static void vs_trace_uses(const char *op, uintptr_t stream_key, const uint64_t *ids, size_t count)
{
    vs_trace_event_t ev = {.kind = VS_TRACE_USE, .rw = VS_TRACE_RW_UNKNOWN};
    size_t len = strlen(op);

    memcpy(ev.op, op, len < VS_TRACE_OP_MAX ? len : VS_TRACE_OP_MAX);
    vs_mutex_lock(&vs_trace.lock);
    if (!vs_trace_ready_trace_locked()) {
        vs_mutex_unlock(&vs_trace.lock);
        return;
    }
    /* Both taken under the lock, so both are non-decreasing in the file. */
    ev.seq = ++vs_trace.next_seq;
    ev.time_ns = vs_monotonic_ns();
    ev.stream = vs_trace_stream_trace_locked(stream_key);
    for (size_t i = 0; i < count; i++) {
        ev.id = ids[i];
        vs_trace_put_trace_locked(&ev);
    }
    vs_mutex_unlock(&vs_trace.lock);
}

void vs_trace_operation(const char *op, uintptr_t stream_key, const uint64_t *ids, size_t count)
{
    if (count > 0)
        vs_trace_uses(op, stream_key, ids, count);
}

void vs_trace_operation_one(const char *op, uintptr_t stream_key, uint64_t id)
{
    vs_trace_uses(op, stream_key, &id, 1);
}

/* snapshot_writer.h: publishes the live-state snapshot (snapshot_abi.h)
 * that `vramshim ps|dump|top` read. Pure POSIX, no CUDA: the shim fills it
 * from its registry through a callback run by a background publisher
 * thread, so the hot path (launches, copies, allocations) pays nothing.
 *
 * Use from the shim:
 *
 *     vs_snapshot_identity_t id = { .mode = VS_SNAPSHOT_MODE_CAP };
 *     vs_snapshot_t *snap = vs_snapshot_open(&id, &err);   // NULL: log -err, carry on
 *     vs_snapshot_publisher_start(snap, fill, NULL, 200);   // fill() calls the setters
 *     ...
 *     vs_snapshot_publisher_stop(snap);                     // at exit
 *     vs_snapshot_close(snap, true);                        // unlinks the object
 *
 * Or by hand, from one thread at a time:
 *
 *     vs_snapshot_begin(snap);
 *     vs_snapshot_set_totals(snap, &totals);
 *     for (...) vs_snapshot_put_row(snap, i, &row);
 *     vs_snapshot_set_row_count(snap, n);
 *     vs_snapshot_end(snap);
 *
 * Only one thread may write at a time (the publisher thread, when started,
 * is that thread). Functions return 0 or a negative errno.
 */
#ifndef VS_SNAPSHOT_WRITER_H
#define VS_SNAPSHOT_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "snapshot_abi.h"

typedef struct vs_snapshot_s vs_snapshot_t;

/* Who publishes. Zero fields take defaults. */
typedef struct vs_snapshot_identity_s {
    pid_t pid;             /* 0: getpid() (tests may name another) */
    uint32_t row_capacity; /* 0: $VRAMSHIM_SNAPSHOT_ROWS, else VS_SNAPSHOT_DEFAULT_ROWS */
    uint32_t mode;         /* vs_snapshot_mode_t */
    uint64_t host_limit_bytes;
    const char *program; /* NULL: /proc/self/comm */
} vs_snapshot_identity_t;

/* Creates "/vramshim-<uid>-<pidns>-<pid>" (O_EXCL, 0600, its whole size
 * reserved), replacing a stale object of ours left by an earlier process
 * with the same pid, and publishes an empty snapshot. Returns NULL with
 * *err = -errno on failure (never fatal to the caller: the program runs on
 * without a snapshot); -ENOSPC when /dev/shm cannot hold it. */
vs_snapshot_t *vs_snapshot_open(const vs_snapshot_identity_t *identity, int *err);

/* The shared-memory name ("/vramshim-<uid>-<pidns>-<pid>", the caller's PID
 * namespace) into buf. */
int vs_snapshot_name(char *buf, size_t len, unsigned uid, pid_t pid);

/* The first error a write to the object returned since it was opened (0:
 * none). The object is written with pwrite(2), never through a mapping, so
 * an object truncated or shrunk by someone else costs a failed or
 * re-extended write, not a SIGBUS in the program. */
int vs_snapshot_write_error(const vs_snapshot_t *snap);

/* Starts an update: readers retry until vs_snapshot_end. */
void vs_snapshot_begin(vs_snapshot_t *snap);
/* Between begin and end. */
void vs_snapshot_set_totals(vs_snapshot_t *snap, const vs_snapshot_totals_t *totals);
/* count <= VS_SNAPSHOT_MAX_DEVICES (more are cut off). */
void vs_snapshot_set_devices(vs_snapshot_t *snap, const vs_snapshot_device_t *devices,
                             uint32_t count);
void vs_snapshot_set_mode(vs_snapshot_t *snap, uint32_t mode);
/* The shim's event counter now (what `last_use_seq` compares against). */
void vs_snapshot_set_event_seq(vs_snapshot_t *snap, uint64_t event_seq);
/* Writes row `index`. -ENOSPC when index >= capacity (the row is dropped;
 * report the full count with vs_snapshot_set_row_count). */
int vs_snapshot_put_row(vs_snapshot_t *snap, uint32_t index, const vs_snapshot_row_t *row);
/* How many rows the process has: rows beyond the capacity are counted in
 * `rows_dropped`. */
void vs_snapshot_set_row_count(vs_snapshot_t *snap, uint64_t count);
/* Publishes: stamps `update_ns`, makes `sequence` even. */
void vs_snapshot_end(vs_snapshot_t *snap);

uint32_t vs_snapshot_capacity(const vs_snapshot_t *snap);

/* The publisher thread: every `period_ms` it calls begin, fill(snap, ctx),
 * end. `fill` runs on that thread and calls the setters above. The thread
 * blocks every signal. */
typedef void (*vs_snapshot_fill_fn)(vs_snapshot_t *snap, void *ctx);
int vs_snapshot_publisher_start(vs_snapshot_t *snap, vs_snapshot_fill_fn fill, void *ctx,
                                unsigned period_ms);
/* Wakes the publisher and waits until a publication that began after this
 * call has completed (tests; a final publication before exit). -ESRCH when
 * no publisher runs. */
int vs_snapshot_publisher_flush(vs_snapshot_t *snap);
/* Stops and joins the publisher; no-op when none runs. */
void vs_snapshot_publisher_stop(vs_snapshot_t *snap);

/* Whether the calling process created `snap` (false in a forked child,
 * which must neither join the publisher, absent there, nor unlink). */
bool vs_snapshot_owned(const vs_snapshot_t *snap);

/* Stops the publisher, unmaps, and with `unlink` removes the object — but
 * only in the process that created it, so an `atexit` handler inherited by
 * a forked child never removes its parent's snapshot. */
void vs_snapshot_close(vs_snapshot_t *snap, bool unlink);

#endif /* VS_SNAPSHOT_WRITER_H */

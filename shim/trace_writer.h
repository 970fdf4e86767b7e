/* trace_writer.h: records the access stream under `VRAMSHIM_TRACE=path`.
 *
 * The file is in the text format of `policy/trace.h` (written with
 * `vs_trace_format`), so `bench/policy/policy_replay` replays it:
 *
 *   A <id> <size> <e|n>       at every registered allocation, of every kind
 *   F <id>                    when it is forgotten
 *   U <seq> <id> <op> <stream> <time_ns> u
 *                             for each allocation an operation touches; `seq`
 *                             numbers operations in the order they were
 *                             written, `op` is "launch", "copy", "memset" or
 *                             "graph", `stream` a small number per stream
 *                             handle (0 the legacy stream, in first-seen
 *                             order), `time_ns` CLOCK_MONOTONIC
 *   R <id> <0|1>              when an evictable allocation is really evicted
 *                             (0) or restored (1)
 *
 * Lines go to one buffer under one mutex, written out when it fills and at
 * exit (`vs_trace_close`, from the shim's destructor). The mutex is a leaf
 * (internal.h): it is taken under the registry lock (so that `A`/`F`/`R`
 * lines are ordered against the `U` lines of concurrent operations) and
 * nothing is taken under it. The writer is a leaf module too: it is handed
 * ids, and never calls the registry. Nothing here aborts: an unwritable path, or a later write
 * error, gives one warning and turns tracing off. One process per path: a
 * second process that allocates device memory replaces the file.
 *
 * Without `VRAMSHIM_TRACE` callers pay one load and one predictable branch:
 * every hook site tests `vs_trace_enabled()` first.
 */
#ifndef VS_TRACE_WRITER_H
#define VS_TRACE_WRITER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Set once at load when tracing is on; cleared if the file fails. */
extern _Atomic bool vs_trace_active;

/* A relaxed load: a plain `mov` on x86-64 and arm64, no locked instruction. */
static inline bool vs_trace_enabled(void)
{
    return __builtin_expect(atomic_load_explicit(&vs_trace_active, memory_order_relaxed), 0);
}

/* Turns tracing on into `path` (which must outlive the process's use of
 * it: the configuration's copy). The file is created, or truncated, at the
 * first event, so processes that never touch the GPU leave it alone; when
 * it cannot be, one warning and tracing goes off. */
void vs_trace_open(const char *path);

/* Writes out what is buffered and closes the file; tracing is off after. */
void vs_trace_close(void);

void vs_trace_alloc(uint64_t id, uint64_t size, bool evictable);
void vs_trace_free(uint64_t id);
void vs_trace_residency(uint64_t id, bool on_device);

/* One operation named `op` on the stream `stream_key` (the stream handle as
 * an integer, after resolving the per-thread default stream) that touches
 * the allocations `ids[0..count)`, which its scan collected. The caller
 * holds the registry's read lock from that scan to here, so no `F` line can
 * come between the scan and these `U` lines; this function itself asks the
 * registry nothing. */
void vs_trace_operation(const char *op, uintptr_t stream_key, const uint64_t *ids, size_t count);

/* One operation touching the single allocation `id` (copies the shim
 * serves on a host copy). */
void vs_trace_operation_one(const char *op, uintptr_t stream_key, uint64_t id);

#endif /* VS_TRACE_WRITER_H */

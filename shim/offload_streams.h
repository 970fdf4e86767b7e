/* offload_streams.h: the engine's view of the application's streams
 * (offload_streams.c): the stream table, marker rings, gates of stream
 * memory waits, fences and events. Engine lock held unless said
 * (offload_internal.h).
 */
#ifndef VS_OFFLOAD_STREAMS_H
#define VS_OFFLOAD_STREAMS_H

#include "offload_internal.h"

/* Slots of the stream table: one bit each of an allocation's stream mask. */
#define VS_STREAM_SLOTS (VS_STREAM_BITS - 1)

/* The stream the driver means by `stream` in the variant called: NULL is
 * the per-thread default stream in the `_ptsz`/`_ptds` variants. Pure: no
 * lock. */
CUstream vs_streams_resolve(CUstream stream, bool per_thread);

/* The mask bit of the stream an operation runs on (takes the streams lock
 * on a miss of the thread's cache; any lock may be held). */
uint64_t vs_streams_bit(CUstream stream, bool per_thread);

/* Makes `waiter` wait for the work the streams of `mask` submitted in
 * epochs up to `epoch` (0: all so far). 0, -EBUSY (a capturing stream) or
 * -EIO. */
int vs_streams_fence(uint64_t mask, CUstream waiter, uint64_t epoch);

/* Whether any stream of `mask` is capturing now. */
bool vs_streams_mask_capturing(uint64_t mask);

/* Whether work queued on `stream` now may be captured into a graph rather
 * than run: it is capturing, or the driver cannot say. */
bool vs_streams_may_be_capturing(CUstream stream);

/* Records a marker on `stream` (numbered `bit`), closing a registry epoch.
 * Returns that epoch, 0 when no marker was recorded. */
uint64_t vs_streams_marker_record(CUstream stream, uint64_t bit);

/* Whether an allocation last used in `epoch` by the streams of `mask` may
 * sit behind a stream memory wait that has not passed yet (a gate): then
 * waiting for its users on the host could wait for work that depends on a
 * later operation of the program, and it must not be evicted now. */
bool vs_streams_gated(uint64_t mask, uint64_t epoch);

/* The engine's pool of events, per context: `vs_engine_event_get(ctx)`
 * gives an event of `ctx` (created there when the pool has none), to be
 * recorded on a stream of `ctx` only and put back with the same `ctx`. */
CUevent vs_engine_event_get(CUcontext ctx);
void vs_engine_event_put(CUcontext ctx, CUevent ev);
/* An event of `ctx` that keeps time (the pool's do not), its caller's to
 * destroy. NULL when the driver refuses. */
CUevent vs_engine_timing_event_create(CUcontext ctx);

/* The stream table's slots whose stream belongs to `ctx` (asked while it
 * lives), and the end of everything the table and the event pool hold in
 * `ctx` once it is destroyed (`alive`: about to be; else already, and
 * nothing is asked of the driver about its handles). */
uint64_t vs_streams_ctx_slots(CUcontext ctx);
void vs_streams_ctx_forget(CUcontext ctx, uint64_t slots, bool alive);

#endif /* VS_OFFLOAD_STREAMS_H */

/* offload_prefetch.h: restores ahead of use and departures ahead of need
 * (offload_prefetch.c), and the cycle's regime (offload_meter.c). Engine
 * lock held unless said (offload_internal.h).
 */
#ifndef VS_OFFLOAD_PREFETCH_H
#define VS_OFFLOAD_PREFETCH_H

#include "offload_internal.h"

/* A prefetched region was used, evicted or freed. */
void vs_prefetch_forget(vs_region_t *r);

/* Tells the policy what its learned cycle may keep resident. */
void vs_prefetch_budget_update(vs_engine_device_t *d, int device);

/* Whether a regime other than the balanced one would plan differently for
 * `d` (no room for a departure, heads): where its allocations are small
 * and its evictions clean. */
bool vs_prefetch_lean_differs(const vs_engine_device_t *d);

/* The lean plan near the balance point was timed slower than the balanced
 * one: when it was in fine pieces (`vs_prefetch_fine_piece`), they are not
 * asked for again, and true (the pieces of the second largest are tried
 * in their place); false otherwise. Engine lock held. */
bool vs_prefetch_fine_piece_slower(vs_engine_device_t *d);

/* Prefetches on every device. */
void vs_prefetch_all(void);

/* A prefetch step before an operation's scan (takes the engine lock: called
 * without it). True when the operation names no evictable allocation: the
 * step then spared what the operation before used, and
 * `vs_prefetch_after_launch` is due once the operation is submitted. */
bool vs_prefetch_step(CUstream stream, bool per_thread, const uintptr_t *words, size_t count);

/* After the submission of an operation whose step spared what the one
 * before used: departures start for what the plan evicts next (takes the
 * engine lock: called without it). */
void vs_prefetch_after_launch(void);
/* The regime meter (offload_meter.c). `vs_meter_copied` follows each copy
 * of `bytes` queued on `d->to_device` over the link: it reads what is done
 * of what it measured before, and updates `d->regime`;
 * `vs_meter_other_work` follows other work queued there;
 * `vs_meter_wait_for_copy` makes an application stream wait for a copy
 * (`vs_engine_wait_for_copy`) and measures its stall. Between
 * `vs_meter_arm` and `vs_meter_disarm` (an operation's preparation, a
 * prefetch step: this thread), `stream` is the application's
 * (`not_capturing`: the caller has asked the driver already), and its
 * stall is measured from the first `vs_meter_may_stall` (the host is about
 * to wait for `d`'s GPU) or wait for a copy on it. `vs_meter_mark` times
 * the cycle on `stream`, once a cycle. `vs_meter_forget` ends the meter
 * with `d`'s context (`alive`: about to be destroyed, its events are
 * destroyed; else already gone). Engine lock held. */
void vs_meter_copied(vs_engine_device_t *d, int device, uint64_t bytes);
/* After the hand-over of job `handed` (offload_arrive.c): the read
 * `vs_meter_copied` leaves while a job is open, up to that job's slot. */
void vs_meter_catch_up(vs_engine_device_t *d, int device, uint64_t handed);
void vs_meter_other_work(vs_engine_device_t *d);
CUresult vs_meter_wait_for_copy(vs_engine_device_t *d, CUstream waiter, CUevent copied);
void vs_meter_arm(CUstream stream, bool not_capturing);
void vs_meter_mark(vs_engine_device_t *d, CUstream stream);
void vs_meter_may_stall(vs_engine_device_t *d);
void vs_meter_disarm(void);
void vs_meter_forget(vs_engine_device_t *d, bool alive);

#endif /* VS_OFFLOAD_PREFETCH_H */

/* offload.h: the oversubscription engine (`VRAMSHIM_MODE=offload`).
 *
 * Evictable allocations are CUDA virtual-memory reservations whose physical
 * backing the engine maps while they are resident and releases when they
 * are evicted to pinned host memory; the device pointer never changes.
 *
 * Every operation that touches device memory (launch, copy, memset, graph
 * launch) goes through `VS_OPERATE`: the scan stamps what it touches and,
 * when everything is resident (the common case), submits the operation
 * under the registry's read lock, so no eviction can slip between the scan
 * and the submission. Otherwise the engine restores what is missing (and
 * holds everything the operation needs), then the scan runs again.
 *
 * Locks: internal.h (the engine lock, then the registry lock; the fast
 * path takes only the registry's read lock). Errors: this is the hook
 * boundary: CUresult, the driver's own code passed through; a bool answers
 * a question ("is it mine", "worth a retry") and then carries the CUresult
 * in *rc. The engine's files share offload_internal.h.
 */
#ifndef VS_OFFLOAD_H
#define VS_OFFLOAD_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "registry.h"

/* Whether the offload mode is on (VRAM_LIMIT set, mode offload). */
bool vs_offload_enabled(void);

/* Whether `device` can hold evictable allocations: true unless the driver
 * says the device has no virtual memory management (some vGPU and WSL
 * setups), where every `cuMemAddressReserve`/`cuMemCreate` would fail.
 * Such a device keeps VRAM_LIMIT as a hard cap (the cap mode's accounting,
 * CUDA_ERROR_OUT_OF_MEMORY over it), with one warning the first time it is
 * asked. Answered once per device; true while the driver cannot tell. */
bool vs_offload_device_has_vmm(int device);

/* An evictable allocation of `bytes` (at least VRAMSHIM_MIN_EVICT) of
 * `kind` (DEVICE or PITCH) on `device`: reserves the address range, makes
 * room under the limit and maps physical memory. CUDA_SUCCESS or the
 * driver's error (CUDA_ERROR_OUT_OF_MEMORY when neither the device nor the
 * host budget can hold it). */
CUresult vs_offload_alloc(CUdeviceptr *dptr, uint64_t bytes, int device, vs_alloc_kind_t kind);

/* Frees an allocation made by `vs_offload_alloc`, wherever it lives.
 * Returns false when `dptr` is not one (the caller frees it as usual). */
bool vs_offload_free(CUdeviceptr dptr, CUresult *rc);

/* `cuMemFreeAsync` of an allocation made by `vs_offload_alloc`: freed in
 * `stream`'s order (of the variant `per_thread`), after the work queued
 * there before the call. Returns false when `dptr` is not one, or when
 * `stream` is capturing (the caller hands the call to the driver). */
bool vs_offload_free_async(CUdeviceptr dptr, CUstream stream, bool per_thread, CUresult *rc);

/* The application's own VMM memory (hooks_vmm.c). `vs_offload_adopt`
 * makes the mapping of `bytes` at `base` (one handle, mapped whole,
 * resident, its bytes already counted under the limit) an evictable
 * region: from then on `phys` (one reference and the mapping) is the
 * engine's, released at an eviction and made anew at the restore, mapped
 * at `base` again and granted `grants` (copied). The registry entry at
 * `base` carries `handle`, the application's name for it. Mappings side by
 * side within one `reservation` (its base; 0: unknown, none) form an
 * arena (`vs_region_t.run_next`). Its memory is made anew with `prop`
 * (the program's `cuMemCreate` properties) at every restore. CUDA_SUCCESS,
 * or an error with nothing changed (the caller keeps the mapping as it
 * is): CUDA_ERROR_INVALID_VALUE for a size or grants the engine cannot
 * take. */
CUresult vs_offload_adopt(uintptr_t base, uint64_t bytes, int device, CUmemGenericAllocationHandle phys,
                          uint64_t handle, const CUmemAccessDesc *grants, size_t grant_count, uintptr_t reservation,
                          const CUmemAllocationProp *prop);

/* Hands the adopted mapping at `base` back: restores it when evicted,
 * waits for its bytes to be in place and forgets it, leaving it mapped,
 * granted and counted; its handle (one reference) in *phys. Returns false
 * when `base` is no adopted mapping; otherwise *rc is CUDA_SUCCESS, or the
 * restore's error (the mapping then stays the engine's). */
bool vs_offload_detach(uintptr_t base, CUmemGenericAllocationHandle *phys, CUresult *rc);

/* `cuMemGetAccess` of an address in an adopted mapping: the application's
 * grants, whether it is resident or not. False when `addr` is in none. */
bool vs_offload_grants(uintptr_t addr, const CUmemLocation *location, unsigned long long *flags);

/* Makes room for `bytes` of a resident-only allocation (small, async,
 * pool, the application's own VMM memory) and counts them on `device`:
 * evicts what it must and, when nothing more can go, passes the limit and
 * warns once. CUDA_SUCCESS, or CUDA_ERROR_OUT_OF_MEMORY when the host
 * budget is exhausted. */
CUresult vs_offload_charge(int device, uint64_t bytes);

/* A copy between `host` and device memory at `dptr` (`bytes`, towards the
 * device when `to_device`) that lies in an allocation now on the host: done
 * on its host copy, without bringing it back. A synchronous copy (`async`
 * false) first waits for the work queued on the default stream, as the
 * driver's would. An asynchronous one on `stream` is served when that
 * stream is idle (it would run at once), or when `host` is pageable memory
 * (the driver's copy is then synchronous with the host too) after waiting
 * for the stream; otherwise, and on a capturing stream, it is not served.
 * Returns false when the copy is not served (the caller forwards it);
 * otherwise *rc is its result. */
bool vs_offload_copy_host(CUdeviceptr dptr, void *host, uint64_t bytes, bool to_device, CUstream stream, bool async,
                          bool per_thread, CUresult *rc);

/* The driver ran out of physical memory: evict `bytes` whatever the limit
 * says. Returns true when something was evicted (worth retrying). */
bool vs_offload_reclaim(int device, uint64_t bytes);

/* What the application expects to be told about the evictable allocation
 * containing an address, whatever its residency. */
typedef struct vs_offload_range_s {
    uintptr_t base;
    uint64_t size; /* requested */
    int device;
    CUcontext ctx; /* current when it was allocated */
    uint64_t id;   /* the registry's id: stable for the allocation's life */
} vs_offload_range_t;

/* Fills *out for the evictable allocation containing `addr`; false when
 * there is none. */
bool vs_offload_range(uintptr_t addr, vs_offload_range_t *out);

/* Adds `delta` (+1/-1) holds on the allocations containing `addrs`: held
 * allocations are never evicted and are restored when taken (graphs keep
 * what they reference resident while they live). */
void vs_offload_hold(const uintptr_t *addrs, size_t count, int delta);

/* `VRAMSHIM_PIN_DEVICE_POINTERS=on`: scans a small host-to-device copy of
 * `bytes` from `host` to `dst` for 8-byte words (aligned in device memory)
 * that point into evictable allocations, pins each such allocation for
 * good and calls `found` with the word, so that the copy restores it
 * first. Returns how many words were found (0 when off). */
size_t vs_offload_pin_named(uintptr_t dst, const void *host, uint64_t bytes, void (*found)(uintptr_t word, void *arg),
                            void *arg);
/* Whether that scan is on (a cheap check for the hooks). */
bool vs_offload_pin_scan_enabled(void);

/* Marks the allocation containing `addr` never evictable (IPC export). */
void vs_offload_pin(uintptr_t addr, const char *reason);

/* The peer-access hooks: a context on device `accessor` may reach the
 * allocations of a context on device `owner` (`enabled`), or no longer. */
void vs_offload_peer_changed(int accessor, int owner, bool enabled);

/* Around a driver call that destroys a context: `cuCtxDestroy`,
 * `cuDevicePrimaryCtxReset` (`certain`), or the primary context's release,
 * which destroys it only when it is the last. `ending` takes the engine lock
 * and waits for the engine's copies in flight; when `certain`, it ends what
 * the engine holds in `ctx` while the context still lives (its
 * allocations, streams, events, hashers, staging and pinned slabs). `ended`
 * does it after the call when `destroyed` says the context went and it was
 * not done before, then lets go of the lock. Nothing happens outside
 * offload mode. */
typedef struct vs_offload_ctx_end_s {
    CUcontext ctx;
    uint64_t stream_slots; /* the stream table's slots of ctx's streams */
    bool locked, torn_down;
    CUstreamCaptureMode mode;
} vs_offload_ctx_end_t;

void vs_offload_ctx_ending(CUcontext ctx, bool certain, vs_offload_ctx_end_t *end);
void vs_offload_ctx_ended(vs_offload_ctx_end_t *end, bool destroyed);

/* The stream-destruction hook: work on `stream` must be complete before its
 * number in the stream table may go to another stream. */
void vs_offload_stream_destroyed(CUstream stream);

/* Around the submission of a stream memory wait on `stream`: `begin`
 * records a marker before it (returns its epoch, 0 when none) so that
 * evictions can wait for the work before the wait without waiting for the
 * wait; `end` records, after it, the event that tells when the stream is
 * past it. Until then nothing used on that stream after the marker is
 * evicted, and no context-wide wait is made: a host wait there could wait
 * for work that depends on a later operation of the program. */
uint64_t vs_offload_stream_wait_begin(CUstream stream, bool per_thread);
void vs_offload_stream_wait_end(CUstream stream, bool per_thread, uint64_t epoch);

/* One operation being submitted. */
#define VS_OP_MISSING_CAP 64
typedef struct vs_op_s {
    CUstream stream;
    bool per_thread;     /* the `_ptsz`/`_ptds` variant: NULL is the per-thread stream */
    bool restore;        /* false: go ahead even with allocations missing */
    bool locked;         /* the registry read lock is held */
    bool depart_after;   /* its prefetch step spared what the operation before used */
    const char *name;    /* "launch", "copy", "memset", "graph": the VRAMSHIM_TRACE `op` */
    int attempts;
    vs_touch_t touch;
    uintptr_t missing[VS_OP_MISSING_CAP];
    uintptr_t settled[VS_SETTLED_MAX]; /* settled uses left for after the submission */
    uintptr_t *held;     /* bases held by `vs_op_prepare`, released by `vs_op_end` */
    size_t held_count;
} vs_op_t;

void vs_op_begin(vs_op_t *op, CUstream stream, bool per_thread);
/* Scans `words`; true when the operation may be submitted now (the read
 * lock is then held until `vs_op_end`). */
bool vs_op_scan(vs_op_t *op, const uintptr_t *words, size_t count);
/* Restores what the last scan found missing. CUDA_SUCCESS or the error the
 * operation must return. */
CUresult vs_op_prepare(vs_op_t *op, const uintptr_t *words, size_t count);
void vs_op_end(vs_op_t *op);

/* An operation submitted with no lock held: a library call that allocates,
 * launches and records events of its own (NCCL), which must not run under
 * the registry's read lock. `vs_op_hold` holds every allocation `words`
 * touch and restores the evicted ones on the operation's stream (nothing is
 * held on a capturing stream: captured work does not run now). The caller
 * submits, then `vs_op_stamp` records the uses on the stream, as a scan
 * does, and lets the holds go: from then on an eviction waits for the
 * stream to pass the operation. Between the two nothing it touches can be
 * evicted, however long (a group of calls submitted at its end). */
CUresult vs_op_hold(vs_op_t *op, const uintptr_t *words, size_t count);
void vs_op_stamp(vs_op_t *op, const uintptr_t *words, size_t count);

/* Runs `call` (an expression giving a CUresult) once everything in
 * `words[0..count)` is resident, and stores its result in `rc`. `op_name` is
 * what VRAMSHIM_TRACE records the operation as. */
#define VS_OPERATE(rc, op_name, stream, per_thread, words, count, call)                            \
    do {                                                                                           \
        vs_op_t vs_op_;                                                                            \
        vs_op_begin(&vs_op_, (stream), (per_thread));                                              \
        vs_op_.name = (op_name);                                                                   \
        for (;;) {                                                                                 \
            if (vs_op_scan(&vs_op_, (words), (count))) {                                           \
                (rc) = (call);                                                                     \
                vs_op_end(&vs_op_);                                                                \
                break;                                                                             \
            }                                                                                      \
            CUresult vs_prepared_ = vs_op_prepare(&vs_op_, (words), (count));                      \
            if (vs_prepared_ != CUDA_SUCCESS) {                                                    \
                vs_op_end(&vs_op_);                                                                \
                (rc) = vs_prepared_;                                                               \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* After a context-wide synchronisation: the evictions the prefetcher
 * started ahead of need (departures) are over, and end now, so that the
 * counters and the snapshot read there count them. */
void vs_offload_settle(void);

/* Counters for the exit summary and the snapshot. */
typedef struct vs_offload_stats_s {
    uint64_t evictions, restores;
    uint64_t bytes_to_host, bytes_to_device;
    uint64_t restore_wait_ns; /* host time spent making room and restoring */
    uint64_t over_limit;      /* times the limit was passed because nothing could go */
    uint64_t placed_on_host;  /* allocations that started on the host (no room at allocation) */
    uint64_t bytes_served_on_host; /* synchronous copies done on host copies, not over the link */
    uint64_t clean_drops;     /* evictions that copied nothing: the host copy still matched */
    uint64_t bytes_not_copied; /* their bytes */
    uint64_t prefetches;      /* restores started ahead of use from the learned order */
    uint64_t prefetch_bytes;
    uint64_t prefetch_unused; /* prefetched allocations evicted before any use */
    uint64_t host_copies_dropped; /* kept host copies given back for room */
    uint64_t spills, bytes_to_disk;     /* host copies moved to VRAMSHIM_SPILL_DIR */
    uint64_t disk_reads, bytes_from_disk; /* allocations restored from it */
    uint64_t contexts_destroyed; /* contexts the engine held something in, destroyed or reset */
    uint64_t partial_evictions;  /* evictions that left the region's head on the device (partial residency) */
    uint64_t evictions_ahead;    /* evictions the prefetcher started ahead of need (departures) */
    uint64_t partial_restores;   /* prefetches that brought a head in ahead of its tail (room still leaving) */
    uint64_t mapped_ahead;       /* restores whose map and grant were done while their room was departing */
    uint64_t filler_maps;        /* restores that mapped the memory held since a filler's departure */
    uint64_t regime_changes;     /* times a cycle was found compute-bound or no longer (offload_meter.c) */
    uint64_t host_gpu_wait_ns, host_gpu_waits; /* the engine's host waits for the GPU, everywhere */
    uint64_t host_vmm_ns, host_vmm_calls;      /* the engine's virtual-memory calls, everywhere */
} vs_offload_stats_t;

void vs_offload_stats(vs_offload_stats_t *out);

/* The exit summary line (VRAMSHIM_LOG=info) and the release of pinned
 * memory. */
void vs_offload_shutdown(void);

#endif /* VS_OFFLOAD_H */

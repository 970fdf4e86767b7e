/* offload_internal.h: what every file of the offload engine shares: the
 * types (a region, an eviction, the link meter, a device, the engine), the
 * engine lock's calls and the core's (offload.c, offload_policy.c). The
 * rest is declared per part, each header included by the files that call
 * it:
 *
 *   offload_device.h    devices and physical memory (offload_device.c),
 *                       partial residency's heads (offload_partial.c),
 *                       restores mapped ahead (offload_premap.c), contexts
 *                       ending (offload_context.c), the arrival and retire
 *                       threads (offload_arrive.c, offload_retire.c)
 *   offload_streams.h   the stream table, marker rings, fences, the event
 *                       pool (offload_streams.c)
 *   offload_tier.h      the host and disk tiers, copies served from host
 *                       copies (offload_tier.c)
 *   offload_prefetch.h  prefetch and departures ahead of need
 *                       (offload_prefetch.c), the regime meter
 *                       (offload_meter.c)
 *
 * Allocation and free are offload_alloc.c's, eviction and room
 * offload_evict.c's, operations (scan, hold, restore, submit: VS_OPERATE)
 * offload_ops.c's. Nothing outside the engine's files includes these.
 *
 * Locks (the table and the order are in internal.h): `vs_engine.lock`
 * guards everything in these headers except the stream table, which has
 * its own lock (offload_streams.c). Every `vs_engine_*`, `vs_tier_*`,
 * `vs_prefetch_*` and `vs_streams_*` function declared in them runs with the
 * engine lock held (`VS_ASSERT_HELD(&vs_engine.lock)`), except those whose
 * name ends in `_streams_locked` or says otherwise below.
 *
 * Errors: steps that end in a driver call return its CUresult (the
 * operation returns it to the application); the rest return 0 or -errno.
 */
#ifndef VS_OFFLOAD_INTERNAL_H
#define VS_OFFLOAD_INTERNAL_H

#include <cuda.h>
#include <pthread.h>
#include <sys/types.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "cap.h"
#include "content_hash.h"
#include "device_hash.h"
#include "host_pool.h"
#include "internal.h"
#include "offload.h"
#include "policy.h"
#include "registry.h"
#include "spill.h"
#include "tunables.h"
#include "worker.h"

/* ==== offload.c: regions, the engine ===================================== */

typedef struct vs_region_s {
    uintptr_t base;
    uint64_t size;     /* requested by the application */
    uint64_t reserved; /* rounded to the granularity: address range and physical size */
    uint64_t id;       /* the registry's id, also the policy's */
    int device;
    CUcontext ctx;
    vs_residency_t where; /* VS_RESIDENT, VS_ON_HOST or VS_ON_DISK */
    /* The physical memory mapped at [split, reserved) (the whole range when
     * `split` is 0) while resident; 0 while evicted. */
    CUmemGenericAllocationHandle phys;
    /* Partial residency: the plan asks it to keep its first `keep` bytes
     * on the device between uses (0: none). A restore then maps them as a
     * head of their own, `head_phys` at [0, split), which an eviction with
     * `split <= keep` leaves mapped and charged: only the tail moves. Any
     * other eviction unmaps both. `split` is 0 while no head is mapped. */
    uint64_t keep, split;
    CUmemGenericAllocationHandle head_phys;
    /* Its head came in from the host copy ahead of its tail, while it was
     * evicted (`vs_engine_restore_head`): those bytes are the host copy's,
     * and the copy may still be under way on the host-to-device stream.
     * False again once the region is resident. */
    bool head_from_host;
    /* Its kept head's bytes are its host copy's: its last eviction judged
     * (or copied) all of it, head included, and nothing can write the head
     * until the region is restored. A head given back for room then needs
     * no copy out (`vs_engine_heads_release`). */
    bool head_on_host;
    /* Its restore is mapping its tail (`vs_engine_physical_map_evicting`):
     * room made meanwhile must not take its head, which the restore copies
     * nothing into. */
    bool mapping_tail;
    /* Mapping ahead (`vs_engine_premap`): `premapped`, its whole range is
     * mapped and granted, before its restore, onto the physical memory of
     * an allocation still departing (its `phys` is that memory's tail part;
     * a head part, when that allocation had one, is `premap_head` at
     * [0, premap_split)), so the restore only copies; `phys_lent`, its own
     * physical memory (head and tail) is mapped ahead like that at another
     * allocation's range, and goes to that allocation when this one's
     * departure unmaps it. */
    bool premapped;
    bool phys_lent;
    /* Mapping ahead of a tail alone: `premap_tail`, its tail is mapped onto
     * a departing allocation's tail while its own head stays where it is;
     * `lent_tail`, only its tail is lent so, and it keeps its head. Both
     * need heads of one size (`vs_engine_keep_update`'s equal heads). */
    bool premap_tail, lent_tail;
    /* An unmap of its range was refused: memory it let go of may still be
     * mapped there, and its next map unmaps the range first. */
    bool stale_mapping;
    uint64_t premap_split;
    CUmemGenericAllocationHandle premap_head;
    /* The host copy: the data while evicted. While resident it is kept as
     * long as the pool has room: when the device bytes still hash to
     * one of `host_hashes`, an eviction drops them without copying. */
    vs_host_copy_t host;
    /* Content hashes of the host copy's bytes [from, size), for up to two
     * `from`s: the whole (0) and a tail after a kept head. Each holds until
     * the host copy changes, so that the whole's outlives evictions that
     * judge the tail alone, and judges the eviction that moves the whole
     * once the plan gives the head to another allocation
     * (`vs_engine_host_hash`, `_note`, `_forget`). */
    struct vs_host_hash_s {
        bool known;
        uint64_t from;
        vs_content_hash_t hash;
    } host_hashes[2];
    vs_spill_copy_t disk; /* VS_ON_DISK: the bytes, in the spill file */
    CUevent arriving; /* the restore copy's event until it is known complete */
    uint32_t holds;
    bool pinned;         /* never evictable (IPC export) */
    /* The application's own VMM mapping, adopted (`vs_offload_adopt`): the
     * address range is the application's and is never freed here; every
     * map grants `grants` (the application's cuMemSetAccess descriptors)
     * instead of the engine's own; and it is always mapped whole by one
     * handle (no head, never mapped ahead or lent), so that
     * `vs_offload_detach` can hand it back as one handle. */
    bool adopted;
    size_t grant_count;
    CUmemAccessDesc *grants;
    /* Adopted mappings side by side in the address space (an arena of
     * chunks): the one ending where this one starts, and the one starting
     * where it ends (NULL: none). A kernel may reach past the chunk its
     * pointer lands in (a tensor across chunks), never before it, and the
     * scan sees only the pointer: so the chunks resident in a run are
     * always a suffix of it. An operation that touches a chunk restores
     * every chunk after it, only the first resident chunk of a run is
     * evictable, and a prefetch restores a chunk only when the next one
     * is resident. */
    struct vs_region_s *run_prev, *run_next;
    uintptr_t reservation; /* adopted: the application's reservation holding it (0: unknown) */
    /* Adopted: the properties its physical memory is made with when they
     * are not the engine's own (handle types the program may export it
     * as, RDMA); such memory is made for it alone, never a spare or a
     * filler's. NULL: the engine's. */
    CUmemAllocationProp *prop;
    bool evicting;       /* in an eviction batch: its host copy is being written */
    /* Its bytes are moving between its host copy or the disk and the device
     * with the engine lock let go (offload_tier.c): until `disk_io_done`
     * says otherwise it is not freed, restored, spilled or written. */
    bool disk_io;
    /* Clean eviction's verdicts on this region: how many in a row found its
     * bytes changed, and evictions since then that copied without asking
     * (`vs_engine_evict_blind`). */
    uint8_t changed_streak;
    uint8_t blind_evictions;
    bool prefetched;     /* restored ahead of its use, not used since */
    uint64_t prefetch_counted; /* what that restore moved, counted in the prefetch window */
    int hash_slot;       /* the eviction batch's hash slot, -1 for none */
    uint64_t synced_seq; /* last use already told to the policy */
    UT_hash_handle hh;    /* by base */
    UT_hash_handle hh_id; /* by id */
} vs_region_t;

/* A restore copy not yet known to be complete: until it is, the region is
 * arriving (every stream that uses it waits for `done`) and its host copy
 * must not change. */
/* A job of the arrival thread (offload_arrive.c). */
typedef struct vs_arrival_s vs_arrival_t;

typedef struct vs_deferred_s {
    CUevent done;
    uintptr_t base; /* the region restored */
    int device;
    int hash_slot; /* the restore hasher's slot hashing what arrived, -1 for none */
    uint64_t from, bytes; /* what the restore hasher hashed: [from, from + bytes) */
    uint64_t arrival; /* the arrival thread's job that records `done` (offload_arrive.c), 0 for none */
    struct vs_deferred_s *next;
} vs_deferred_t;

/* Hash slots: one per victim of the eviction batches under way (a batch
 * moves at most VS_EVICT_BATCH), and one per restore in flight (the hash of
 * what arrived becomes the host copy's); as many as a busy mask holds
 * (`evict_slots_busy`, `restore_slots_busy`: one bit a slot). */
#define VS_EVICT_BATCH 64
#define VS_RESTORE_HASH_SLOTS 64

/* An eviction batch under way (offload_evict.c): its victims (NULL where
 * one dropped out), what each had and will move, and the event that ends
 * the phase on the device-to-host stream. */
typedef struct vs_eviction_s {
    int device;
    size_t count;
    vs_region_t *victims[VS_EVICT_BATCH];
    bool had_copy[VS_EVICT_BATCH], copied[VS_EVICT_BATCH], blind[VS_EVICT_BATCH], judged[VS_EVICT_BATCH];
    uint64_t streams_of[VS_EVICT_BATCH], from_of[VS_EVICT_BATCH], arrival_from[VS_EVICT_BATCH];
    /* Where each victim's hash (and its copy out, when changed) starts: at
     * `from_of`, or at 0 while a head stays when the host copy's hash is
     * known from 0 (the whole is judged, the head stays unchanged). */
    uint64_t hash_from[VS_EVICT_BATCH];
    int arrival_slot[VS_EVICT_BATCH]; /* a restore hash taken over from the victim's arrival, -1 */
    CUevent done;
    uint64_t mark;      /* the order of `done`'s record among the device's marks */
    CUstream mark_stream; /* where `done` was recorded: to_host (first phase) or to_host_changed */
    bool phase_over;    /* the phase's work is over (or was waited for without an event) */
    bool verdicts_read; /* the second phase (copies of changed victims) has started or was not needed */
    bool ahead;         /* a departure (the prefetcher's), not an eviction waited for where it starts */
    CUresult rc;
    struct vs_eviction_s *next;
} vs_eviction_t;

/* The cycle's regime, measured on the GPU's clock (offload_meter.c). */
typedef enum vs_regime_e {
    VS_REGIME_BALANCED = 0, /* compute and transfer near each other: the plan keeps room for a departure */
    VS_REGIME_COMPUTE_BOUND, /* the link idles much of each pass */
    VS_REGIME_LINK_BOUND,    /* the application waits for copies much of each pass */
    VS_REGIME_NEAR_LEAN,     /* near the balance point, a plan without the room tried against it */
    VS_REGIME_COARSE,        /* the balanced plan streaming fewer, larger allocations, tried against it */
} vs_regime_t;

/* What the meter reads: a timing event after each copy in (the time
 * between two copies' ends is the second copy's when the link ran them
 * back to back, and more when it idled between them; the link's rate is
 * the fastest seen), and two around each wait of an application stream for
 * a copy (the time between them is the stream's stall). Its rings hold
 * VS_METER_SLOTS, VS_METER_WAITS and VS_METER_MARKS (tunables.h). */
#define VS_REGIME_COUNT 5
/* Whether `regime`'s plan leaves no room for a departure and keeps heads
 * (the balanced plan and its coarse variant keep the room). */
static inline bool vs_regime_lean(vs_regime_t regime)
{
    return regime != VS_REGIME_BALANCED && regime != VS_REGIME_COARSE;
}
typedef struct vs_link_meter_s {
    CUevent events[VS_METER_SLOTS]; /* created on first use */
    uint64_t bytes[VS_METER_SLOTS]; /* of the copies each one ends */
    uint64_t arrival[VS_METER_SLOTS]; /* the arrival thread's job that records it, 0 for none */
    uint64_t unmetered; /* copied since the last event recorded */
    /* The stream ran other work (a hash kernel, which waits for the
     * compute engine) between the copy a slot ends and the one before: its
     * interval says nothing of the link. */
    bool after_other_work[VS_METER_SLOTS];
    bool other_work;
    /* The slot read last (`have_last`: its end starts the next interval),
     * and the `pending` slots after it, oldest first. */
    unsigned last, pending;
    bool have_last;
    /* Stalls: [0] before, [1] after; `waits_pending` from `waits_first`,
     * the newest still open while its operation is prepared (the engine
     * lock may be let go meanwhile); failed: its second event could not be
     * recorded. */
    CUevent waits[VS_METER_WAITS][2];
    bool wait_open[VS_METER_WAITS], wait_failed[VS_METER_WAITS];
    unsigned waits_first, waits_pending;
    double bytes_per_ns; /* the link's rate: the fastest interval seen */
    double window_ns, window_bytes, window_stall_ns;
    unsigned window_intervals;
    uint64_t window_from; /* the operation the window started at */
    double busy, stalled; /* shares of the last whole window; 0 before the first */
    vs_regime_t toward;   /* where the last window pointed */
    bool off;             /* its events could not be made in this context */
    uint64_t settled_at;  /* the operation from which the plan is measured; 0: none yet */
    /* The cycle's clock: an event on an application stream once a cycle
     * (`vs_meter_mark`), with the operation it follows and the plan it
     * measures (`plan`, counted from 1; 0: a plan not settled yet);
     * `marks_pending` from `marks_first`. */
    CUevent marks[VS_METER_MARKS];
    uint64_t mark_op[VS_METER_MARKS], mark_plan[VS_METER_MARKS];
    unsigned marks_first, marks_pending;
    uint64_t next_mark; /* the operation from which the next mark goes */
    uint64_t plan;      /* the regime's plan: one more at each change */
    /* Per regime: the ns per operation its last plan measured, cycle by
     * cycle (the sum and how many). The lean regimes share one plan: once
     * found slower than the balanced one under any of them, it is not
     * tried again. */
    double cycle_ns_per_op[VS_REGIME_COUNT];
    unsigned cycles_timed[VS_REGIME_COUNT];
    bool lean_refused;
    /* The coarse plan's floor (`vs_policy_set_floor`) while it is tried or
     * kept, and whether it was found slower (never tried again). */
    uint64_t coarse_floor;
    bool coarse_refused;
} vs_link_meter_t;

typedef struct vs_engine_device_s {
    bool ready;
    CUcontext ctx;
    CUstream to_host, to_device;
    /* The copies out of departing victims whose verdict found them
     * changed: queued once their hashes are over, they need no fence, and
     * on a stream of their own they never wait behind a younger
     * departure's fence and hash on `to_host` (which waits for the
     * application's work). */
    CUstream to_host_changed;
    /* Runs nothing: the events of the hand-offs to the engine's thread
     * (offload_retire.c) complete on it at once. */
    CUstream retire;
    /* Run nothing either: the arrival thread's hand-offs
     * (offload_arrive.c), the engine's records on the first, the thread's
     * on the second (one stream each, so that neither's events wait for
     * the other's). */
    CUstream arrive_handed, arrive_recorded;
    uint64_t granularity;
    vs_policy_t *policy;
    /* Content hashing (clean eviction); NULL when the kernel cannot be
     * loaded: then every eviction copies. */
    bool hashers_tried;
    vs_device_hasher_t *evict_hasher, *restore_hasher;
    uint64_t restore_slots_busy; /* bit per restore_hasher slot */
    uint64_t evict_slots_busy;   /* bit per evict_hasher slot */
    /* Eviction batches started ahead of need, oldest first. */
    vs_eviction_t *departures;
    /* A restore's wait for the oldest departure (`vs_engine_departure_lend`)
     * left the younger ones' verdicts unread: the restore reads them once
     * its copy is queued (`vs_engine_restore_mapped`), off the path from
     * the departure's end to that copy. Any later wait reads them anyway. */
    bool verdicts_deferred;
    uint64_t eviction_marks; /* phase ends recorded so far (on to_host or to_host_changed) */
    /* The bytes recent evictions moved off the device and those they
     * copied out (each decayed by 1/16 per eviction): when most were
     * copied, a departure's copy out takes as long as the restore it makes
     * room for, and the plan leaves it a slot of its own. */
    uint64_t evicted_recent, copied_recent;
    /* The plan leaves the departing allocation a slot: set once more than
     * half the recent bytes were copied out, cleared below a third, so that
     * the plan's budget does not move with every eviction. */
    bool departure_slot;
    /* Prefetch: the window is the largest evictable allocation, plus the
     * largest smaller one when sizes differ (a block's tensors). */
    uint64_t largest, second;
    uint64_t prefetched_bytes; /* restored ahead, not used yet */
    /* The physical memory of the region unmapped last, kept for the next
     * map of the same size within this hold of the engine lock: an
     * eviction followed by the restore it made room for skips a release
     * and a create (cuMemRelease and cuMemCreate of 64 MiB: about 55 us on
     * an H100). Released before the lock is let go (`vs_engine_spares_release`),
     * so it never holds memory the limit does not count past that. */
    CUmemGenericAllocationHandle spare;
    uint64_t spare_bytes;
    /* A second one: the head of a region that left with a head and a tail
     * (`vs_engine_physical_unmap_whole`), whose tail is `spare`; kept and
     * released with it. */
    CUmemGenericAllocationHandle spare_head;
    uint64_t spare_head_bytes;
    /* Partial residency: the heads mapped while their regions are evicted
     * (the sum of their `split`), and the region the plan asks to keep a
     * head (its id; 0: none). */
    uint64_t kept_head_bytes;
    uint64_t keep_id;
    uint64_t keep_equal; /* every streamed allocation keeps a head of this size (0: one head, `keep_id`) */
    uint64_t keep_equal_plan; /* the plan `keep_equal` was decided for (`vs_engine_keep_equal`) */
    uint64_t plans_logged; /* the policy's plan builds the debug log has told */
    /* The regions' `keep` were set for a plan in pieces (`vs_prefetch_piece`,
     * `vs_engine_keep_update`): each streamed one keeps all but its last
     * piece. */
    bool piece_keeps;
    /* The piece the policy was asked for last (`vs_prefetch_piece`) and
     * its plan builds then: a plan built after that was built in it. A fine
     * piece (`vs_prefetch_fine_piece`) whose plan was refused, because its
     * pieces could not carry the stream, is not asked for again while the
     * largest allocation's size stays (`fine_piece_refused`, that piece). */
    uint64_t piece_asked, piece_asked_builds, fine_piece_refused;
    /* The pieces of the last plan in pieces seen and the fillers of the
     * last one of them with fillers (the plans of a program's last passes
     * stream less, and often need none), for the exit summary (0: none). */
    uint64_t pieces_seen, fillers_seen;
    /* The plan's fillers (vs_policy_stats_t.planned_filler_bytes: the
     * allocations of that size it streams whole beside its pieces where
     * the pieces alone cannot carry the stream); 0: none. `filler_phys` is
     * the memory of the filler that departed last, held and charged to the
     * limit (the plan's budget holds it) until the next filler's restore
     * maps it: the fillers' swaps are then of their own size, with no
     * create and no release, as the pieces' are (`vs_engine_filler_hold`,
     * `_take`, `_release`). `filler_given`: a restore counted its bytes as
     * its own charge (`vs_engine_filler_take`); the memory goes with the
     * spares when the lock is let go unless that restore maps it. */
    uint64_t filler_bytes;
    CUmemGenericAllocationHandle filler_phys;
    bool filler_given;
    /* The cycle's regime (offload_meter.c). Far from the balance point,
     * either side, and near it when a trial shows the cycle no slower, the
     * plan needs neither a departure's room nor whole allocations
     * (vs_prefetch_budget_update). */
    vs_link_meter_t meter;
    vs_regime_t regime;
    bool planned_lean; /* the plan was made for it (vs_prefetch_budget_update) */
} vs_engine_device_t;

/* The engine. Every field is guarded by `lock` except the atomics. */
typedef struct vs_engine_s {
    vs_mutex_t lock;
    pthread_cond_t released; /* an operation let go of what it held, or memory was freed */
    pthread_cond_t disk_io_done; /* a region's disk I/O ended (vs_region_t.disk_io) */
    bool spares_held;            /* some device keeps a spare (vs_engine_device_t.spare), or `lent` is set */
    uint32_t ops_holding;    /* operations between their restore and their submission */
    /* The limit was passed for an operation that needed it: the next
     * operation evicts back under it. */
    _Atomic bool over_limit;
    /* An operation used a watched region: the next one runs a prefetch
     * step before its scan. */
    _Atomic bool prefetch_step_due;
    /* The prefetch under way is for an operation that names no evictable
     * allocation: it spares what the operation before used. */
    bool prefetch_spares_recent;
    /* The prefetch under way runs in an operation's step, before the
     * operation is launched (`vs_prefetch_step`). */
    bool prefetch_before_launch;
    bool initialised;
    bool enabled;
    uint64_t min_evict;
    vs_region_t *by_base;
    vs_region_t *by_id;
    vs_engine_device_t devices[VS_MAX_DEVICES];
    /* Peer access the application enabled (cuCtxEnablePeerAccess):
     * peer_refs[owner][accessor] counts the context pairs by which a context
     * on `accessor` may reach the allocations of one on `owner`. Peer access
     * does not reach the engine's VMM mappings: every map grants each such
     * accessor with cuMemSetAccess, as PyTorch's expandable segments do. */
    uint16_t peer_refs[VS_MAX_DEVICES][VS_MAX_DEVICES];
    /* Free events, each with the context it was created in: an event can
     * be recorded only on a stream of its own context. */
    struct vs_engine_event_s {
        CUcontext ctx;
        CUevent event;
    } *events;
    size_t event_count, event_capacity;
    vs_deferred_t *deferred_head, *deferred_tail;
    /* The job of the restore under way, which records its calls instead of
     * making them (offload_arrive.c); NULL: they are made. */
    vs_arrival_t *arrival_open;
    const vs_region_t *arrival_for; /* the region it restores */
    _Atomic size_t departing; /* departures under way, on every device (written under the lock) */
    vs_offload_stats_t stats;
    /* The ranges of an allocation whose physical memory was mapped ahead
     * at another's (`vs_engine_premap`), or that left with a head and a
     * tail (`vs_engine_physical_unmap_whole`): left mapped when its
     * departure ended, so that the unmap runs once the next copy is queued
     * (`vs_engine_lent_unmap`), never past this hold of the engine lock
     * (one departure's at a time). 0 bytes: none. */
    struct vs_lent_range_s {
        int device;
        bool memory_lent; /* its memory is another range's now, not the device's spare */
        uintptr_t base;
        uint64_t split; /* > 0: a head of that many bytes, then a tail */
        uint64_t bytes;
        /* The memory mapped there: the range's one handle, or its head's
         * and its tail's. Whoever releases one waits for this unmap first
         * (`vs_retire_wait_phys`): until then the memory lives on. */
        CUmemGenericAllocationHandle phys[2];
    } lent[2]; /* a tail, or a whole range, and a head */
    bool warned_over_limit;
    bool warned_host_full; /* a charge failed: the host pool full, nothing to spill */
} vs_engine_t;

extern vs_engine_t vs_engine;

/* The engine's host time by kind, for the exit summary and the snapshot:
 * its waits for the GPU (event, stream and context synchronisations) and
 * its virtual-memory calls (create, map, grant, unmap, release), wherever
 * the engine makes them. On a GPU these are what a pass's host time goes
 * to; a benchmark takes their difference over timed passes. */
typedef enum {
    VS_HOST_GPU_WAIT,
    VS_HOST_VMM,
    VS_HOST_KINDS,
} vs_host_kind_t;

/* Adds the time since `start_ns` (vs_monotonic_ns) to `kind`. Lock-free. */
void vs_engine_host_time(vs_host_kind_t kind, uint64_t start_ns);

/* VS_CALL, timed as `kind`. */
#define VS_ENGINE_CALL(kind, symbol, args)                                                                   \
    __extension__({                                                                                          \
        uint64_t vs_call_start_ = vs_monotonic_ns();                                                         \
        CUresult vs_call_rc_ = VS_CALL(symbol, args);                                                        \
        vs_engine_host_time((kind), vs_call_start_);                                                         \
        vs_call_rc_;                                                                                         \
    })

/* Takes and lets go of the engine lock; the engine's own driver calls run
 * in relaxed capture mode so that they never invalidate another thread's
 * capture. */
void vs_engine_lock(CUstreamCaptureMode *mode);
void vs_engine_unlock(CUstreamCaptureMode mode);
/* The engine lock for an operation's own steps (prepare, end, prefetch
 * step): departures stay under way. `vs_engine_lock` finishes them first. */
void vs_engine_lock_light(CUstreamCaptureMode *mode);

/* The region starting at `base`, or containing `addr`; NULL when none. */
vs_region_t *vs_engine_region_at(uintptr_t base);

/* Whether an eviction of `r` copies without hashing (and its restore does
 * not hash what arrived): its bytes were found changed at its last
 * evictions, so the hash would only delay the copy; every
 * VS_BLIND_RECHECK evictions it is judged again. */
bool vs_engine_evict_blind(const vs_region_t *r);

vs_region_t *vs_engine_region_containing(uintptr_t addr);

/* What `r` holds of the limit: all of it while resident, its kept head
 * while evicted; and what a restore must map and count. Pure. */
static inline uint64_t vs_engine_region_charged(const vs_region_t *r)
{
    return r->where == VS_RESIDENT ? r->reserved : r->split;
}

static inline uint64_t vs_engine_region_missing(const vs_region_t *r)
{
    return r->where == VS_RESIDENT ? 0 : r->reserved - r->split;
}

/* The end of a region whose device memory is already unmapped (or never
 * was): its host copy, spilled bytes, prefetch and policy entries, records
 * and address range go. Returns cuMemAddressFree's result. */
CUresult vs_engine_region_release(vs_region_t *r);

/* Ends the restores whose copy has finished; with `wait`, all of them. */
void vs_engine_deferred_reap(bool wait);

/* Makes `waiter` wait for a restore copy's event, or waits for it here. */
CUresult vs_engine_wait_for_copy(CUstream waiter, CUevent copied);

/* Evicts `victims` (resident, one device, at most VS_EVICT_BATCH); returns
 * the bytes evicted, *host_full when the host pool had no room. */
uint64_t vs_engine_evict(vs_region_t **victims, size_t count, bool *host_full);

/* Departures (offload_evict.c). `vs_engine_depart` starts evicting
 * `victims` of `device` without waiting (false: none started);
 * `vs_engine_departures` counts those under way on `d` and the bytes they
 * will free; `vs_engine_departures_advance` finishes those that are over, in
 * order (with `wait`, waiting for them; with `oldest_only`, at most one)
 * and returns the bytes freed; `vs_engine_departures_finish_lender` waits
 * for the oldest, which holds `lender` (a victim whose memory a restore has
 * mapped ahead, `vs_engine_premap`), and finishes that victim alone: the
 * restore's copy can then queue before the unmaps and releases of the
 * other victims, which the next advance finishes without waiting (without
 * `lender` in the oldest, it is `vs_engine_departures_advance(d, true,
 * true)`); it leaves the younger departures' verdicts to be read after the
 * restore's copy (`verdicts_deferred`); `vs_engine_departures_judge` reads
 * those that are ready, without waiting;
 * `vs_engine_departures_settle` finishes every one, waiting. */
bool vs_engine_depart(vs_engine_device_t *d, int device, vs_region_t **victims, size_t count);
size_t vs_engine_departures(const vs_engine_device_t *d, uint64_t *bytes);
uint64_t vs_engine_departures_advance(vs_engine_device_t *d, bool wait, bool oldest_only);
uint64_t vs_engine_departures_finish_lender(vs_engine_device_t *d, const vs_region_t *lender);
void vs_engine_departures_judge(vs_engine_device_t *d);
void vs_engine_departures_settle(void);

/* Room for the restore of `r` (`need` bytes) from the oldest departure on
 * `d`, with the restore's host work (the map and the grant) done while the
 * departure's users still run: `vs_engine_departure_lender` is a victim of
 * the oldest departure whose memory `r` can map ahead (`vs_engine_premap`:
 * of its size, leaving whole), or NULL; `vs_engine_departure_lend` maps `r`
 * onto `lender` (that victim, or NULL: none), waits for the departure,
 * finishes that victim alone and counts `need`: true, `r` mapped and
 * counted, its restore left to copy. False
 * otherwise, with nothing mapped and the oldest departure waited for and
 * finished as `vs_engine_departures_advance(d, true, true)` would; *freed:
 * the bytes the departure freed either way. Either way the younger
 * departures' verdicts are left for after the restore's copy
 * (`verdicts_deferred`). */
vs_region_t *vs_engine_departure_lender(const vs_engine_device_t *d, const vs_region_t *r);
bool vs_engine_departure_lend(vs_engine_device_t *d, int device, vs_region_t *r, vs_region_t *lender, uint64_t need,
                              uint64_t *freed);

/* The hash of the host copy's bytes [from, size), when it is known. */
bool vs_engine_host_hash(const vs_region_t *r, uint64_t from, vs_content_hash_t *out);

/* `hash` is that of the host copy's bytes [from, size): kept beside the
 * other one known, unless both are known for other `from`s (the whole's is
 * the one kept then). */
void vs_engine_host_hash_note(vs_region_t *r, uint64_t from, vs_content_hash_t hash);

/* The host copy changed (or went): no hash of it is known. */
void vs_engine_host_hash_forget(vs_region_t *r);

/* Restore hashes (offload.c): ends slot `slot` of the restore hasher (-1:
 * none), making the hash of [from, from + bytes) `r`'s host copy's when the
 * copy succeeded; takes the slot of a region still arriving, for its
 * eviction to judge it by (-1: none). */
void vs_engine_restore_hash_end(vs_engine_device_t *dev, vs_region_t *r, int slot, uint64_t from, uint64_t bytes,
                                bool copied);
int vs_engine_arrival_hash_take(vs_region_t *r, uint64_t *from);

/* Evicts until `need` more bytes fit under the limit, then counts them.
 * 0, -ENOSPC or -ENOMEM. */
int vs_engine_make_room(int device, uint64_t need, bool ignore_limit);

/* Counts `bytes` for something that must be resident: within the limit
 * when eviction allows, past it (one warning) otherwise. 0 or -ENOMEM. */
int vs_engine_charge_engine_locked(int device, uint64_t bytes, const char *what, uint32_t own_holding);

/* Brings `r` back (counted already for the mapped form); `stream` waits
 * for it unless `prefetch`. */
CUresult vs_engine_restore(vs_region_t *r, CUstream stream, bool per_thread, uint32_t own_holding);
CUresult vs_engine_restore_mapped(vs_region_t *r, vs_engine_device_t *d, CUstream stream, bool per_thread,
                                  bool prefetch);

/* ==== offload_policy.c: what the policy hears =========================== */

/* Whether the policy may choose `r` now (not held, not pinned). Pure. */
bool vs_engine_region_evictable(const vs_region_t *r);

/* Tells the policy, in order, the uses stamped since the last call; keeps
 * its evictable flags in step with holds and pins. */
void vs_engine_policy_sync(void);
void vs_engine_policy_refresh(vs_region_t *r);
void vs_engine_policy_reset_skips(void);

#endif /* VS_OFFLOAD_INTERNAL_H */

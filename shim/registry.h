/* registry.h: every live allocation the shim has seen, from every allocator.
 *
 * The registry answers two questions fast: "which allocation owns this
 * address?" (any interior pointer, O(1): an open-addressing table of 2 MiB
 * pages, each holding the bounds of the allocations that overlap it) and
 * "which allocation starts here?" (a uthash table by base address, for
 * frees). Each allocation carries a
 * stable id, its creation and last-use sequence numbers and whether it
 * could be evicted, which is what the eviction policy of the
 * oversubscription mode will consume.
 *
 * Locking: one reader-writer lock (internal.h: below the engine lock, above
 * the trace writer's). Adds and removes take it for writing; launch scans
 * take it once for reading around all their look-ups and update the
 * last-use fields with relaxed atomics (kept in a dense array apart from
 * the records, so stamping is cache-friendly). Functions named
 * `_registry_locked` expect it held (for reading at least), and assert it
 * in debug builds. Errors: 0 or -errno.
 */
#ifndef VS_REGISTRY_H
#define VS_REGISTRY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Allocation kinds: X(enum suffix, name, device_side, evictable, reason it is
 * not evictable). `device_side` kinds are indexed for interior look-ups;
 * host kinds are tracked apart (by base only). */
#define VS_ALLOC_KINDS(X)                                                                          \
    X(DEVICE, "device", true, true, NULL)                                                          \
    X(PITCH, "pitch", true, true, NULL)                                                            \
    X(ASYNC, "async", true, false, "stream-ordered allocation: its pool owns the address")        \
    X(POOL, "pool", true, false, "allocated from an explicit memory pool that owns the address")  \
    X(MANAGED, "managed", true, false, "managed memory: the driver migrates it itself")            \
    X(VMM, "vmm", true, false, "the application's own cuMemMap mapping")                          \
    X(HOST_PINNED, "host-pinned", false, false, "pinned host memory")                              \
    X(HOST_REGISTERED, "host-registered", false, false, "registered host memory")

typedef enum vs_alloc_kind_e {
#define VS_KIND_ENUM(suffix, name, device_side, evictable, reason) VS_ALLOC_##suffix,
    VS_ALLOC_KINDS(VS_KIND_ENUM)
#undef VS_KIND_ENUM
    VS_ALLOC_KIND_COUNT
} vs_alloc_kind_t;

/* Where an allocation's bytes are. Only the offload engine moves them;
 * anything but VS_RESIDENT makes an operation that touches the allocation
 * take the slow path. VS_MOVING: an eviction is in flight. VS_ARRIVING:
 * mapped, but its restore copy may still be running: an operation on a
 * stream that has not waited for that copy must wait first. */
typedef enum vs_residency_e {
    VS_RESIDENT = 0,
    VS_ON_HOST,
    VS_ON_DISK,
    VS_MOVING,
    VS_ARRIVING,
} vs_residency_t;

/* Bits of the per-allocation stream mask (`vs_touch_t.stream_bit`): the
 * streams that have used the allocation since it last became resident, as
 * numbered by the offload engine's stream table. The top bit stands for
 * "a stream the table could not number". */
#define VS_STREAM_BITS 64
#define VS_STREAM_BIT_OVERFLOW (1ull << 63)

/* Allocations below the VMM granularity cannot be evicted one by one, and
 * small buffers are the ones most likely to hold device-side pointer tables
 * a launch scan cannot see: they stay resident. */
#define VS_EVICT_MIN_BYTES (2ull << 20)

/* The page size of the interior-pointer index. */
#define VS_REGISTRY_PAGE_SHIFT 21

typedef struct vs_alloc_desc_s {
    uintptr_t base;
    uint64_t size; /* the size the application asked for */
    int device;
    vs_alloc_kind_t kind;
    uint64_t handle; /* VMM: the physical allocation mapped here */
    /* Not NULL: never evicted, for this reason (overrides the kind's). */
    const char *pinned_reason;
    /* An offload engine region whatever its kind (a stream-ordered
     * allocation served from evictable memory): evictable. */
    bool engine_region;
    /* The same allocation registered anew (the application's VMM mapping
     * adopted by the offload engine, or handed back): not counted again in
     * `total_count`. */
    bool registered_before;
} vs_alloc_desc_t;

/* A copy of one allocation's state, for callers outside the lock. */
typedef struct vs_alloc_info_s {
    uint64_t id;
    uintptr_t base;
    uint64_t size;
    int device;
    vs_alloc_kind_t kind;
    vs_residency_t residency;
    uint64_t handle;
    uint64_t created_seq;
    uint64_t created_ns; /* CLOCK_MONOTONIC */
    uint64_t last_use_seq;
    uint64_t last_use_epoch; /* see vs_registry_epoch_close */
    uint64_t use_count;
    uint64_t evictions;
    uint64_t restores;
    bool evictable;
    const char *pinned_reason; /* why not evictable; NULL when evictable */
} vs_alloc_info_t;

typedef struct vs_registry_stats_s {
    uint64_t live_count[VS_ALLOC_KIND_COUNT];
    uint64_t live_bytes[VS_ALLOC_KIND_COUNT];
    uint64_t total_count[VS_ALLOC_KIND_COUNT];
    uint64_t peak_device_bytes; /* peak of live bytes over device-side kinds */
} vs_registry_stats_t;

const char *vs_registry_kind_name(vs_alloc_kind_t kind);
bool vs_registry_kind_device_side(vs_alloc_kind_t kind);

/* A new event number: creation, launch, copy. Strictly increasing. */
uint64_t vs_registry_next_seq(void);
/* The latest event number handed out, taking none: observers (the
 * snapshot publisher) must not consume numbers, or the gaps the policy
 * learns cycles from would vary with wall-clock time. */
uint64_t vs_registry_current_seq(void);

/* Records a new allocation. 0, -EINVAL (size 0, bad kind), -EEXIST (an
 * allocation already starts there) or -ENOMEM. */
int vs_registry_add(const vs_alloc_desc_t *desc, uint64_t *id_out);

/* Forgets the allocation that starts exactly at `base` of one of the
 * `kinds` (a bit mask of 1u << kind); copies it to *out. 0 or -ENOENT. */
int vs_registry_remove(uintptr_t base, unsigned kinds, vs_alloc_info_t *out);

/* Forgets every device-side allocation of `kind` lying inside
 * [start, start + size), calling `fn` on each first. Returns how many. */
size_t vs_registry_remove_range(uintptr_t start, uint64_t size, vs_alloc_kind_t kind,
                                void (*fn)(const vs_alloc_info_t *info, void *arg), void *arg);

/* The allocation owning `addr`: any interior address of a device-side
 * allocation, or the exact base of a host one. 0 or -ENOENT. */
int vs_registry_find(uintptr_t addr, vs_alloc_info_t *out);

/* The scan path: take the read lock once, then stamp each word that lands
 * in an allocation. `vs_registry_touch_registry_locked` returns true when
 * `addr` belongs to a device-side allocation. */
void vs_registry_read_begin(void);
void vs_registry_read_end(void);
bool vs_registry_touch_registry_locked(uintptr_t addr, uint64_t seq);

/* The most a touch leaves for after the submission (`settled_cap`). */
#define VS_SETTLED_MAX 32

/* What one operation does to the allocations it touches: stamp them with
 * `seq`, add `stream_bit` to their stream masks, and list in `missing`
 * (deduplicated, up to `missing_cap`) the bases of those that are not
 * resident. `missing_count` may exceed `missing_cap`: the rest were not
 * listed. */
typedef struct vs_touch_s {
    uint64_t seq;
    uint64_t epoch; /* filled by the touch: the epoch the operation ran in */
    uint64_t stream_bit; /* 0: the operation's stream is not tracked */
    uintptr_t *missing;
    size_t missing_cap;
    size_t missing_count;
    bool collect_all; /* list every allocation touched, resident or not */
    bool watched;     /* set by the touch: it used a watched allocation */
    /* Not NULL: the touch also lists (deduplicated, in the order first
     * touched, up to `ids_cap`) the ids of every allocation it touches, for
     * VRAMSHIM_TRACE. `ids_count` may exceed `ids_cap`. */
    uint64_t *ids;
    size_t ids_cap;
    size_t ids_count;
    /* Not NULL: the touch leaves here (up to `settled_cap`) the words that
     * point into allocations resident for good (registered not evictable,
     * settled), for `vs_registry_stamp_settled_registry_locked` to log or
     * stamp once the operation is submitted; the rest it stamps itself.
     * Nothing decides on them before the submission, and their look-ups
     * are then the stamp thread's (stamp_log.h), or at least overlap the
     * driver's work instead of preceding it. A word in a page of settled
     * allocations is left at the page, before it is known to hit. */
    uintptr_t *settled;
    size_t settled_cap;
    size_t settled_count;
    /* The stamp log's stamping (stamp_log.h): the touch stamps settled
     * allocations alone, each once, and counts its use even when a later
     * operation's stamp is there already. */
    bool logged;
} vs_touch_t;

/* Applies `touch` to every word of `words` that lands in a device-side
 * allocation; the look-ups are interleaved so their cache misses overlap.
 * Read lock held. Returns how many words hit, not counting those left in
 * `settled` (a word in a page of settled allocations is left there before
 * it is known to hit). */
size_t vs_registry_touch_many_registry_locked(const uintptr_t *words, size_t count, vs_touch_t *touch);
/* Logs the settled uses the touch left, with its sequence number, for the
 * stamp thread (stamp_log.h), or stamps them now where the log cannot take
 * them, and empties its list. Read lock held (the same read as the touch). */
void vs_registry_stamp_settled_registry_locked(vs_touch_t *touch);
/* The stamp log's stamping (stamp_log.c): the settled allocations `words`
 * (one operation's, numbered `seq`) point into, each counted once. Read
 * lock held. */
void vs_registry_stamp_logged_registry_locked(const uintptr_t *words, size_t count, uint64_t seq);

/* Moves the allocation starting at `base` to `residency`, taking the write
 * lock so that no operation is between its scan and its submission. When
 * it leaves VS_RESIDENT, *streams_out (may be NULL) receives the streams
 * that used it, and the mask is cleared. `moved` counts an eviction (to a
 * non-resident place) or a restore (back to resident). 0 or -ENOENT. */
int vs_registry_set_residency(uintptr_t base, vs_residency_t residency, bool moved, uint64_t *streams_out);

/* Marks the allocation starting at `base` as one whose use the offload
 * engine wants to hear of (an operation that touches it sets its touch's
 * `watched`). Read lock taken. 0 or -ENOENT. */
int vs_registry_set_watched(uintptr_t base, bool watched);

/* The residency of the allocation starting at `base`; VS_ON_HOST when there
 * is none. Read lock held. */
vs_residency_t vs_registry_residency_registry_locked(uintptr_t base);

/* The streams that used the allocation at `base` since it became
 * resident (read lock taken). 0 or -ENOENT. */
int vs_registry_streams(uintptr_t base, uint64_t *streams_out);

/* Adds `streams` back to the mask of the allocation at `base` (an eviction
 * that did not happen). */
void vs_registry_add_streams(uintptr_t base, uint64_t streams);

/* Epochs order operations against events the offload engine records.
 * Operations stamp the current epoch on what they touch while they hold the
 * read lock (from scan to submission); `vs_registry_epoch_close` takes the
 * write lock, calls `fn` (which records an event on a stream), then starts
 * the next epoch. Every operation stamped with an epoch up to the returned
 * one was submitted before that event. Stamps of different epochs are
 * always separated by a write section, so a later one is never lost to an
 * earlier one. */
uint64_t vs_registry_epoch_close(void (*fn)(void *arg), void *arg);

/* Marks the allocation at `base` as never evicted, for `reason`. */
int vs_registry_pin(uintptr_t base, const char *reason);

/* Convenience for single operands (copies, memsets). */
bool vs_registry_touch(uintptr_t addr, uint64_t seq);

/* Calls `fn` on every live allocation, under the read lock (`fn` must not
 * call back into the registry). */
void vs_registry_foreach(void (*fn)(const vs_alloc_info_t *info, void *arg), void *arg);

void vs_registry_stats(vs_registry_stats_t *out);

/* Whether the calling thread holds the registry lock: for reading or
 * writing, or for writing (debug builds track it; elsewhere both answer
 * true). For `VS_ASSERT` only. */
bool vs_registry_lock_held(void);
bool vs_registry_write_held(void);

/* Frees every record (unit tests, between cases). */
void vs_registry_clear(void);

#endif /* VS_REGISTRY_H */

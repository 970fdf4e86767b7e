/*
 * policy.h: vramshim's eviction policy engine.
 *
 * Pure C, no CUDA, no I/O: the shim reports allocations, accesses, frees and
 * residency changes, and asks two questions: which resident allocations to
 * evict to make room (`vs_policy_victims`), and which non-resident ones will be
 * needed next (`vs_policy_prefetch`). Not thread-safe: the caller serialises
 * every call (the shim makes every call under its offload engine's lock,
 * `vs_engine.lock`; see shim/internal.h).
 *
 * Costs: O(log n) per access, residency change and returned victim, with n
 * the number of live allocations; O(1) hash lookups by id.
 */
#ifndef VS_POLICY_H
#define VS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(enum suffix, name accepted in VRAMSHIM_POLICY, description). The first
 * entry is the default. `learned` is accepted as an alias of `cyclic`. */
#define VS_POLICY_KIND_LIST(X)                                                     \
    X(LRU, "lru", "least recently used allocation first (baseline)")               \
    X(CYCLIC, "cyclic", "learned access cycle: farthest predicted next use first")   \
    X(PREDICT, "predict", "predicted reference stream (predict.h, schedule.h): farthest next use first, write-backs counted")

typedef enum vs_policy_kind_e {
#define VS_POLICY_KIND_ENUM(suffix, name, desc) VS_POLICY_##suffix,
    VS_POLICY_KIND_LIST(VS_POLICY_KIND_ENUM)
#undef VS_POLICY_KIND_ENUM
    VS_POLICY_KIND_COUNT
} vs_policy_kind_t;

/* Whether an access writes the allocation, when the shim knows it. */
typedef enum vs_policy_rw_e {
    VS_POLICY_RW_UNKNOWN = 0,
    VS_POLICY_RW_READ,
    VS_POLICY_RW_WRITE,
} vs_policy_rw_t;

/* Predicted next use of an allocation believed never to be used again. */
#define VS_POLICY_NEVER UINT64_MAX

typedef struct vs_policy_s vs_policy_t;

/* What makes a plan stale, and is counted per build (`plan_builds_for`):
 * X(enum suffix, name in the shim's exit summary). */
#define VS_POLICY_STALE_LIST(X)                                                   \
    X(CYCLE, "the cycle")          /* the learned cycle length changed */        \
    X(MEMBERS, "members")          /* an allocation joined the cycle or left */  \
    X(RHYTHM, "a rhythm")          /* a (would-be) member's longest gap changed */\
    X(BUDGET, "the budget")        /* the budget moved by over 1/32 */            \
    X(SETTINGS, "the settings")    /* offer, pieces, or a re-plan asked for */

typedef enum vs_policy_stale_e {
#define VS_POLICY_STALE_ENUM(suffix, name) VS_POLICY_STALE_##suffix,
    VS_POLICY_STALE_LIST(VS_POLICY_STALE_ENUM)
#undef VS_POLICY_STALE_ENUM
    VS_POLICY_STALE_CAUSES
} vs_policy_stale_t;

typedef struct vs_policy_stats_s {
    uint64_t allocs;          /* live allocations */
    uint64_t resident;        /* of which resident */
    uint64_t resident_bytes;  /* bytes of resident allocations */
    uint64_t evictable_bytes; /* bytes of resident, evictable allocations */
    uint64_t period;          /* learned cycle length in operations, 0 while unknown */
    uint64_t now;             /* latest operation sequence number seen */
    uint64_t planned_streamed_bytes; /* per cycle, by the plan; 0: no plan */
    /* Partial residency: the streamed allocations add up to more than must
     * stream, and allocation `planned_partial_id` (one of them) may keep its
     * first `planned_partial_bytes` resident between its uses (the caller
     * rounds down to what it can map). 0 bytes: none. */
    uint64_t planned_partial_id, planned_partial_bytes;
    /* The plan took the offer of `vs_policy_set_largest_offer`: every
     * member of the largest size stays resident, and none streams. */
    bool planned_keeps_largest;
    /* The plan is in pieces (`vs_policy_set_piece`): each streamed
     * allocation streams its last `planned_piece_bytes` and keeps the rest
     * resident. 0: whole allocations (and at most one head, above). */
    uint64_t planned_piece_bytes;
    /* Where the pieces alone cannot carry the stream, the members of this
     * size, the next below a piece, fill it, streamed whole beside them;
     * the budget holds more of them: one for the caller to keep the
     * memory of between their uses (their swaps are then of their own size
     * too), and the slack `vs_policy_set_piece` asks for. 0: none. */
    uint64_t planned_filler_bytes;
    /* Pieces were asked for and the last plan could not be made in them. */
    bool planned_pieces_refused;
    /* The plan's floor (`vs_policy_set_floor`): the smallest size it may
     * stream; and the next size above it whose members, with the larger
     * ones, hold all the plan streams (fewer, larger allocations could
     * carry the stream); 0: none. Whole plans only. */
    uint64_t planned_floor, planned_coarser_floor;
    /* Plans built so far: a change says the members' classes may have
     * changed. */
    uint64_t plan_builds;
    /* Of those, the builds each cause made stale (a build may count under
     * several): what tells a plan rebuilt by a cycle still being learned
     * from one rebuilt by a rhythm that keeps changing. */
    uint64_t plan_builds_for[VS_POLICY_STALE_CAUSES];
} vs_policy_stats_t;

/* Parses a VRAMSHIM_POLICY value ("lru", "cyclic", "learned" or
 * "predict", case sensitive). Returns 0 or -EINVAL. */
int vs_policy_kind_from_name(const char *name, vs_policy_kind_t *kind);
/* The canonical name of `kind`, or NULL when it is out of range. */
const char *vs_policy_kind_name(vs_policy_kind_t kind);
/* The accepted names, for error messages. */
const char *vs_policy_kind_accepted(void);

/* Returns 0, -EINVAL (unknown kind) or -ENOMEM. */
int vs_policy_create(vs_policy_kind_t kind, vs_policy_t **out);
void vs_policy_destroy(vs_policy_t *policy);
vs_policy_kind_t vs_policy_kind(const vs_policy_t *policy);

/* A new allocation, `resident` when it starts on the device. Non-evictable
 * allocations are never returned as victims. Returns 0, -EEXIST (the id is
 * live), -EINVAL (size 0) or -ENOMEM. */
int vs_policy_alloc(vs_policy_t *policy, uint64_t id, uint64_t size, bool evictable,
                    bool resident);
/* Returns 0 or -ENOENT. */
int vs_policy_free(vs_policy_t *policy, uint64_t id);
int vs_policy_set_evictable(vs_policy_t *policy, uint64_t id, bool evictable);
int vs_policy_set_resident(vs_policy_t *policy, uint64_t id, bool resident);

/* Operation `seq` (the shim's global, increasing operation counter) uses
 * allocation `id`. Several accesses may share one `seq` (one kernel, several
 * arguments); a `seq` lower than one already seen is taken as the latest, so a
 * racing caller cannot move time backwards. Returns 0 or -ENOENT. */
int vs_policy_access(vs_policy_t *policy, uint64_t id, uint64_t seq, vs_policy_rw_t rw);

/* Compute time measured since the last access reported: the `predict`
 * kind counts it towards the next access (its distances in time); the
 * others ignore it. */
void vs_policy_elapsed(vs_policy_t *policy, uint64_t ns);

/* To bring in `need` bytes while the current operation uses the allocations
 * in `protect` (unknown ids there are ignored), which resident allocations
 * should be evicted? Writes up to `cap` ids, best victim first, to `victims`
 * and their count to `*n_victims`; their sizes add up to at least `need`
 * unless the call fails. Nothing changes until the caller reports the
 * evictions with `vs_policy_set_resident`. Returns 0, -ENOSPC (every
 * candidate is listed and they are not enough), -ENOBUFS (`cap` ids were not
 * enough to reach `need`) or -ENOMEM. */
int vs_policy_victims(vs_policy_t *policy, uint64_t need, const uint64_t *protect,
                      size_t n_protect, uint64_t *victims, size_t cap, size_t *n_victims);

/* Which non-resident allocations will be needed next? Writes, nearest
 * predicted use first, the ids of those that fit together in `budget` bytes
 * (stopping at the first that does not fit, so the order is kept), at most
 * `cap`. Allocations believed dead are skipped. Returns 0 or -ENOMEM. Works
 * for every kind: prediction runs whatever the eviction order. */
int vs_policy_prefetch(vs_policy_t *policy, uint64_t budget, uint64_t *ids, size_t cap,
                       size_t *n_ids);

/* The bytes the allocations of the learned cycle may keep resident between
 * their uses: the limit, less what else is resident and the room streaming
 * needs (for prefetch, double buffering). With a cycle larger than that, the
 * `cyclic` kind plans a fixed resident set that fits and streams the rest,
 * spread evenly over the cycle so that copies overlap compute; victims then
 * come from the streamed allocations first, and Belady's rule orders within
 * each class. UINT64_MAX (the default) disables the plan. */
void vs_policy_set_budget(vs_policy_t *policy, uint64_t bytes);
/* What the budget would gain were the largest members of the cycle never
 * streamed: a caller whose streaming room holds two of the largest
 * allocations needs room for two of the next size only. The plan takes the
 * offer when every member of the largest size fits in the budget grown by
 * it, and the others can carry the stream without streaming smaller
 * members than the plan would stream with them (`plan_stream_floor`):
 * fewer bytes stream, and no swap gets smaller. The sweep's LLM, whose one
 * 16 MiB LM head is twice any other tensor, then keeps the head and
 * streams 16 MiB less a pass. 0 (the default): no offer. */
void vs_policy_set_largest_offer(vs_policy_t *policy, uint64_t bytes);
/* Plans in pieces of `bytes` (0: whole allocations, the default): every
 * member it streams streams its last `bytes` and keeps the rest resident
 * between its uses; members smaller than a piece stay resident. Every swap
 * is then of one size, so that a restore can always be mapped onto the
 * memory of a departing piece. A plan in pieces has `extra` bytes of budget
 * more than one of whole allocations (the caller's streaming room is
 * smaller). Where fewer members than the stream needs are as large as a
 * piece, the members of the next size below one fill the rest, streamed
 * whole (`planned_filler_bytes`), in the budget alone, one of them more
 * (the memory the caller holds between their uses) and `filler_slack` more
 * (room the pieces' swaps run on); where even they fall short, the plan is
 * of whole allocations (`planned_piece_bytes` 0, `planned_pieces_refused`),
 * in the budget alone. */
void vs_policy_set_piece(vs_policy_t *policy, uint64_t bytes, uint64_t extra, uint64_t filler_slack);
/* Members smaller than `bytes` stay resident wherever the larger ones hold
 * all the plan streams (0, the default: the plan's own floor, the largest
 * size whose members hold what it streams and an eighth more, as room for
 * the spread). A caller that times plans tries `planned_coarser_floor` so:
 * near the balance point every streamed allocation's swap costs the host
 * the same work, whatever its size. */
void vs_policy_set_floor(vs_policy_t *policy, uint64_t bytes);
/* Plans again from scratch at the next use: the classes the plan gave keep
 * no weight (a rebuild otherwise keeps each member's class while the spread
 * allows it). For a change of regime, after which the old plan's order is
 * no guide. */
void vs_policy_replan(vs_policy_t *policy);
/* Whether the plan keeps `id` resident between its uses (false without a
 * plan). A prefetch must not evict what the plan keeps. */
bool vs_policy_planned_resident(const vs_policy_t *policy, uint64_t id);

/* Predicted next use of `id` (an operation sequence number), VS_POLICY_NEVER
 * when it is believed dead. Returns 0 or -ENOENT. For tests and diagnostics. */
int vs_policy_predict(const vs_policy_t *policy, uint64_t id, uint64_t *next_use);
void vs_policy_stats(const vs_policy_t *policy, vs_policy_stats_t *stats);

#endif

/*
 * policy_internal.h: what policy.c (the kinds, learning, victims and
 * prefetch) and plan.c (the cyclic kind's plan) share: an allocation's state,
 * the policy's, and the few rules both apply. Not installed, not seen by the
 * shim.
 */
#ifndef VS_POLICY_INTERNAL_H
#define VS_POLICY_INTERNAL_H

#include "policy.h"

#include "heap.h"
#include "predict.h"
#include "schedule.h"

#include <stdbool.h>
#include <stdint.h>

/* uthash must not exit the host process on allocation failure: the add is
 * dropped and the local `add_failed`, declared at each HASH_ADD site, is set. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) (add_failed = true)
#include <uthash.h>

/* Accesses remembered per allocation: patterns of up to HISTORY-1 gaps, so
 * up to 7 accesses per cycle are recognised with one repeat to confirm. */
#define VS_POLICY_HISTORY 16

typedef struct vs_policy_alloc_s {
    uint64_t id;
    uint64_t size;
    uint64_t serial;    /* creation order: ties break the same way every run */
    uint64_t last_use;  /* seq of the latest access, or `now` at creation */
    uint64_t next_use;  /* predicted seq of the next access */
    /* The longest gap between its uses over the latest cycle (its latest
     * gaps, back until they add up to the learned period), what the plan
     * tells members by: the stretch it could spend off the device. Neither
     * the gap predicted next, which swings with a pattern of unequal gaps
     * (scratch allocated every other pass shifts the uses of that pass),
     * nor the pattern's mean gap, which a weight read by several kernels
     * in a row divides by their number, and which jitter in those short
     * gaps moves (PyTorch's DiT on an H200, bench/gpu/dit_offload.py: four
     * kernels read each block, and the plan took blocks whose mean read
     * 49 to 64 operations where the others read 40 for allocations used
     * more than once a cycle, kept them all, and streamed 1 to 5 of 16;
     * the engine tells the latest use since it last asked, so a burst's
     * uses reach the policy as a sample). */
    uint64_t gap_longest;
    uint64_t deadline;  /* dead once `now` passes this without an access */
    uint64_t history[VS_POLICY_HISTORY]; /* ring of access seqs */
    uint64_t protect_mark; /* equals the query stamp while protected */
    uint64_t chosen_mark;  /* equals the query stamp once chosen */
    uint8_t hist_len;
    uint8_t hist_head;  /* slot the next access is written to */
    bool evictable;
    bool resident;
    bool dirty;         /* written since it last became resident (`predict` kind) */
    bool written;       /* `write_seq` holds its latest writing access */
    uint64_t write_seq;
    /* The `predict` kind: its predicted next use as the scheduler ranks it
     * (schedule.h), distances measured from the predictor's origin, not
     * from now, so that keys computed at different times compare. */
    vs_schedule_item_t sched;
    bool born_late;     /* created after the cycle length was known */
    bool streamed;      /* the plan streams it: evicted before anything it keeps */
    size_t pos_evict;   /* position in `evict` (resident and evictable) */
    size_t pos_dead;    /* position in `dead` (same members, cyclic only) */
    size_t pos_next;    /* position in `next` (non-resident, not dead) */
    UT_hash_handle hh;
} vs_policy_alloc_t;

/* Invariant: an allocation is in `evict` iff resident and evictable, in
 * `dead` iff that and the kind is cyclic, and in `next` only when non-resident
 * (dead ones are dropped from `next` lazily, when a prefetch meets them). All
 * three heaps have room for every live allocation, so re-queueing cannot
 * fail. */
struct vs_policy_s {
    vs_policy_kind_t kind;
    vs_policy_alloc_t *by_id;
    vs_heap_t evict;
    vs_heap_t dead;
    vs_heap_t next;
    uint64_t now;
    uint64_t period; /* longest cycle confirmed so far; 0 while learning */
    uint64_t serial;
    uint64_t stamp;
    uint64_t count;
    uint64_t resident_count;
    uint64_t resident_bytes;
    uint64_t evictable_bytes;
    vs_policy_alloc_t **scratch; /* items popped during a query */
    size_t scratch_len;
    size_t scratch_cap;
    /* The plan (cyclic kind): with a cycle larger than `budget`, which
     * allocations stay resident between their uses and which are streamed. */
    uint64_t budget;        /* UINT64_MAX: no budget set, no plan */
    unsigned plan_stale;    /* why the plan is stale: VS_POLICY_STALE_* bits */
    uint64_t plan_built_at; /* `now` when it was last built */
    uint64_t plan_cycle;    /* the cycle the plan was built for; 0: none */
    uint64_t planned_streamed_bytes;
    /* What the streamed allocations take past what must stream (whole
     * allocations rarely add up to it): one of them, `partial_id`, may keep
     * that many of its bytes resident (partial residency). 0: none. */
    uint64_t partial_id, partial_bytes;
    /* `vs_policy_set_largest_offer`, and whether the plan took it. */
    uint64_t largest_offer;
    bool keeps_largest;
    /* `vs_policy_set_floor`, and the plan's floors (`vs_policy_stats`). */
    uint64_t floor_asked, floor, coarser_floor;
    /* `vs_policy_set_piece`, whether the plan is in pieces, and the size
     * of the members filling it whole (0: none). */
    uint64_t piece, piece_extra, filler_slack, filler;
    bool in_pieces, pieces_refused;
    uint64_t plan_builds;
    uint64_t plan_builds_for[VS_POLICY_STALE_CAUSES];
    vs_policy_alloc_t **members; /* scratch for building the plan */
    size_t members_cap;
    /* The `predict` kind: the reference-stream predictor, the compute time
     * reported since the last access, and scratch for its questions. */
    vs_predict_t *pred;
    uint64_t elapsed_ns;
    uint64_t pred_seq; /* the operation of the last access told the predictor */
    bool pred_seq_valid;
    uint64_t rekeyed_at; /* predictor accesses at the last refresh of every key */
    vs_predict_access_t *ahead;
};

/* Accesses remembered by the `predict` kind's predictor: periods up to
 * about half of it are learned. */
#define VS_POLICY_PREDICT_HISTORY 16384
/* Predicted accesses a prefetch question reads ahead. */
#define VS_POLICY_PREDICT_AHEAD 1024

static inline bool is_dead(const vs_policy_t *policy, const vs_policy_alloc_t *a)
{
    return a->deadline < policy->now;
}

/* A member of a plan whose cycle is `cycle`: its longest gap is about a
 * cycle (a burst of uses counting once). */
static inline bool plan_member_gap(uint64_t cycle, uint64_t gap_longest)
{
    return gap_longest >= cycle - cycle / 4;
}

static inline void plan_make_stale(vs_policy_t *policy, vs_policy_stale_t cause)
{
    policy->plan_stale |= 1u << cause;
}

/* The allocation `id`, or NULL. */
vs_policy_alloc_t *vs_policy_find_alloc(const vs_policy_t *policy, uint64_t id);
/* Puts `a` back in the heaps its state says (after its keys changed). */
void vs_policy_requeue(vs_policy_t *policy, vs_policy_alloc_t *a);
/* Rebuilds a stale plan (plan.c), at most once per eighth of a cycle. */
void vs_policy_plan_refresh(vs_policy_t *policy);

/* Queries pop candidates into the scratch list and put them back after. */
int vs_policy_scratch_push(vs_policy_t *policy, vs_policy_alloc_t *a);
void vs_policy_scratch_restore(vs_policy_t *policy, vs_heap_t *heap, size_t base);

/* The `predict` kind (predict_kind.c): an allocation's key in the
 * scheduler's order, refreshed from the predictor; the missing allocations
 * to fetch in the predicted order; every key refreshed once enough
 * accesses went by. */
void vs_policy_predict_rekey(vs_policy_t *policy, vs_policy_alloc_t *a);
int vs_policy_predict_prefetch(vs_policy_t *policy, uint64_t budget, uint64_t *ids, size_t cap, size_t *n_ids);
void vs_policy_predict_refresh(vs_policy_t *policy);

#endif /* VS_POLICY_INTERNAL_H */

/*
 * policy.c: eviction and prefetch decisions for vramshim.
 * Main entry points: `vs_policy_access` (learn), `vs_policy_victims` (evict),
 * `vs_policy_prefetch` (restore ahead of use).
 *
 * Every allocation carries a prediction of its next use, learned from its
 * own recent accesses: the gaps between its last accesses are searched for
 * the shortest repeating pattern (one access per diffusion step gives the
 * pattern "P", two accesses per step give "a, P-a", ...), and the next gap is
 * taken to repeat the gap one pattern-length back. This needs no global
 * notion of a pass, tolerates one-off allocations mixed into the cycle, and
 * costs O(H^2) with H the fixed history length, i.e. O(1), per access.
 *
 * The `cyclic` kind evicts, in order:
 *   1. dead allocations: those whose predicted use went by (with a
 *      tolerance) without an access, oldest deadline first, which is where
 *      one-off allocations end up;
 *   2. then the allocation whose predicted next use is farthest (Belady's
 *      rule applied to predictions). On a cycle larger than the limit this
 *      keeps a resident set and streams the rest (MRU on a scan).
 * With a budget (`vs_policy_set_budget`, the shim's when it prefetches), it
 * plans that resident set: fixed, with the streamed allocations spread
 * evenly over the cycle, and evicts what the plan streams first (see "The
 * plan" below).
 * The `lru` kind evicts the least recently used allocation. Both share the
 * predictor, so prefetch works whatever the kind.
 *
 * Before any allocation has been used twice no cycle length is known
 * ("learning phase"); allocations then rank most recently used first, which is
 * what Belady does when the first pass replays the load order. The cycle
 * length is the longest one confirmed so far; whenever it grows, every
 * allocation used at most once is re-ranked as "used again one cycle after
 * its last use". Allocations created once a cycle is known and used once
 * are presumed temporaries: dead unless reused within a tolerance of one
 * eighth of a cycle.
 */
#include "policy.h"

#include "heap.h"
#include "predict.h"
#include "schedule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

static const char *const kind_names[] = {
#define VS_POLICY_KIND_NAME(suffix, name, desc) name,
    VS_POLICY_KIND_LIST(VS_POLICY_KIND_NAME)
#undef VS_POLICY_KIND_NAME
};

int vs_policy_kind_from_name(const char *name, vs_policy_kind_t *kind)
{
    if (!name || !kind)
        return -EINVAL;
    for (int k = 0; k < VS_POLICY_KIND_COUNT; k++) {
        if (strcmp(name, kind_names[k]) == 0) {
            *kind = (vs_policy_kind_t)k;
            return 0;
        }
    }
    if (strcmp(name, "learned") == 0) {
        *kind = VS_POLICY_CYCLIC;
        return 0;
    }
    return -EINVAL;
}

const char *vs_policy_kind_name(vs_policy_kind_t kind)
{
    if ((int)kind < 0 || kind >= VS_POLICY_KIND_COUNT)
        return NULL;
    return kind_names[kind];
}

const char *vs_policy_kind_accepted(void)
{
    return "lru, cyclic, learned (alias of cyclic), predict";
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* How late an access may come and still count as the predicted one. */
static uint64_t tolerance(uint64_t gap)
{
    return gap / 8 + 1;
}

static bool gaps_match(uint64_t a, uint64_t b)
{
    uint64_t hi = a > b ? a : b, lo = a > b ? b : a;
    return hi - lo <= tolerance(hi);
}

static bool is_dead(const vs_policy_t *policy, const vs_policy_alloc_t *a)
{
    return a->deadline < policy->now;
}

/* A member of a plan whose cycle is `cycle`: its longest gap is about a
 * cycle (a burst of uses counting once). */
static bool plan_member_gap(uint64_t cycle, uint64_t gap_longest)
{
    return gap_longest >= cycle - cycle / 4;
}

/* Whether an allocation whose longest gap went from `before` to `after` can
 * change the plan: not while both stay well short of the plan's cycle, as
 * an activation's do, which every operation of a pass uses and whose
 * longest gap is that of the few uses its history holds (a pass's boundary
 * in it or not). Those would rebuild the plan as often as `plan_refresh`
 * allows, once per eighth of a cycle: without this check, PyTorch's DiT on
 * an H200 built 67 to 100 plans in 26 passes, 65 to 99 of them for a
 * rhythm. */
static bool rhythm_moves_plan(const vs_policy_t *policy, uint64_t before, uint64_t after)
{
    return policy->plan_cycle == 0 || plan_member_gap(policy->plan_cycle, before > after ? before : after);
}

static void plan_make_stale(vs_policy_t *policy, vs_policy_stale_t cause)
{
    policy->plan_stale |= 1u << cause;
}

/* The `predict` kind's eviction order: the scheduler's (schedule.h). */
static bool predict_before(const void *x, const void *y)
{
    const vs_policy_alloc_t *a = x, *b = y;
    return vs_schedule_evict_before(&a->sched, &b->sched, NULL);
}

static bool lru_before(const void *x, const void *y)
{
    const vs_policy_alloc_t *a = x, *b = y;
    if (a->last_use != b->last_use)
        return a->last_use < b->last_use;
    return a->serial < b->serial;
}

static bool farthest_before(const void *x, const void *y)
{
    const vs_policy_alloc_t *a = x, *b = y;
    if (a->next_use != b->next_use)
        return a->next_use > b->next_use;
    return a->serial < b->serial;
}

/* Streamed by the plan and done for the cycle: its next gap is not a short
 * one inside a burst of uses (a weight read by several kernels in a row,
 * between two of them), which would bring it straight back. */
static bool streamed_away(const vs_policy_alloc_t *a)
{
    return a->streamed && a->next_use - a->last_use + tolerance(a->gap_longest) >= a->gap_longest;
}

/* The cyclic kind's eviction order: what the plan streams and is done
 * with first, then the farthest predicted next use. */
static bool planned_farthest_before(const void *x, const void *y)
{
    const vs_policy_alloc_t *a = x, *b = y;
    bool a_away = streamed_away(a), b_away = streamed_away(b);
    if (a_away != b_away)
        return a_away;
    return farthest_before(x, y);
}

static bool deadline_before(const void *x, const void *y)
{
    const vs_policy_alloc_t *a = x, *b = y;
    if (a->deadline != b->deadline)
        return a->deadline < b->deadline;
    return a->serial < b->serial;
}

static bool nearest_before(const void *x, const void *y)
{
    const vs_policy_alloc_t *a = x, *b = y;
    if (a->next_use != b->next_use)
        return a->next_use < b->next_use;
    return a->serial < b->serial;
}

int vs_policy_create(vs_policy_kind_t kind, vs_policy_t **out)
{
    if (!out || (int)kind < 0 || kind >= VS_POLICY_KIND_COUNT)
        return -EINVAL;
    vs_policy_t *policy = calloc(1, sizeof(*policy));
    if (!policy)
        return -ENOMEM;
    policy->kind = kind;
    policy->budget = UINT64_MAX;
    vs_heap_init(&policy->evict, offsetof(vs_policy_alloc_t, pos_evict),
                 kind == VS_POLICY_LRU       ? lru_before
                 : kind == VS_POLICY_PREDICT ? predict_before
                                             : planned_farthest_before);
    vs_heap_init(&policy->dead, offsetof(vs_policy_alloc_t, pos_dead), deadline_before);
    vs_heap_init(&policy->next, offsetof(vs_policy_alloc_t, pos_next), nearest_before);
    if (kind == VS_POLICY_PREDICT) {
        int rc = vs_predict_create(VS_POLICY_PREDICT_HISTORY, &policy->pred);
        policy->ahead = calloc(VS_POLICY_PREDICT_AHEAD, sizeof(*policy->ahead));
        if (rc < 0 || !policy->ahead) {
            vs_policy_destroy(policy);
            return -ENOMEM;
        }
    }
    *out = policy;
    return 0;
}

void vs_policy_destroy(vs_policy_t *policy)
{
    if (!policy)
        return;
    vs_heap_fini(&policy->evict);
    vs_heap_fini(&policy->dead);
    vs_heap_fini(&policy->next);
    vs_policy_alloc_t *a, *tmp;
    HASH_ITER(hh, policy->by_id, a, tmp) {
        HASH_DEL(policy->by_id, a);
        free(a);
    }
    free(policy->scratch);
    free(policy->members);
    vs_predict_destroy(policy->pred);
    free(policy->ahead);
    free(policy);
}

vs_policy_kind_t vs_policy_kind(const vs_policy_t *policy)
{
    return policy->kind;
}

static vs_policy_alloc_t *find(const vs_policy_t *policy, uint64_t id)
{
    vs_policy_alloc_t *a = NULL;
    HASH_FIND(hh, policy->by_id, &id, sizeof(id), a);
    return a;
}

static void dequeue(vs_policy_t *policy, vs_policy_alloc_t *a)
{
    vs_heap_remove(&policy->evict, a);
    vs_heap_remove(&policy->dead, a);
    vs_heap_remove(&policy->next, a);
}

/* The `predict` kind: `a`'s key in `evict`, from the predictor's latest
 * word on it. Keys are refreshed when the allocation is used or changes
 * residency; between those, an allocation's predicted use stays where it
 * was predicted. */
static void predict_rekey(vs_policy_t *policy, vs_policy_alloc_t *a)
{
    if (!policy->pred)
        return;
    vs_predict_stats_t origin;
    vs_predict_stats(policy->pred, &origin);
    vs_schedule_item_t *it = &a->sched;
    *it = (vs_schedule_item_t){.id = a->id, .size = a->size, .last_use = a->last_use, .resident = a->resident,
                               .evictable = a->evictable, .dirty = a->dirty};
    if (a->hist_len == 0) {
        /* Never used yet: its first use is ahead, the farthest of those
         * with a use predicted. */
        it->next.accesses = it->next.bytes = it->next.ns = VS_PREDICT_NEVER - 1;
        return;
    }
    (void)vs_predict_next_use(policy->pred, a->id, &it->next);
    if (it->next.accesses == VS_PREDICT_NEVER)
        return;
    it->next.accesses = sat_add(origin.accesses, it->next.accesses);
    it->next.bytes = sat_add(origin.bytes, it->next.bytes);
}

/* Puts `a` back where its state says it belongs, with its current keys.
 * Cannot fail: every heap was reserved for all live allocations. */
static void requeue(vs_policy_t *policy, vs_policy_alloc_t *a)
{
    dequeue(policy, a);
    predict_rekey(policy, a);
    if (a->resident && a->evictable) {
        (void)vs_heap_push(&policy->evict, a);
        if (policy->kind == VS_POLICY_CYCLIC)
            (void)vs_heap_push(&policy->dead, a);
    } else if (!a->resident && !is_dead(policy, a)) {
        (void)vs_heap_push(&policy->next, a);
    }
}

/* Prediction for an allocation used at most once (see the file comment). */
static void predict_single(const vs_policy_t *policy, vs_policy_alloc_t *a)
{
    uint64_t t = a->last_use;
    if (policy->period == 0) {
        a->next_use = t;
        a->deadline = UINT64_MAX;
    } else if (a->born_late) {
        a->next_use = sat_add(t, policy->period);
        a->deadline = sat_add(t, tolerance(policy->period));
    } else {
        a->next_use = sat_add(t, policy->period);
        a->deadline = sat_add(a->next_use, tolerance(policy->period));
    }
    a->gap_longest = a->next_use - t;
}

/* A longer cycle re-ranks every allocation used at most once: their
 * predictions were made with the old length, and a first estimate is often
 * short (a buffer reused by the next operation). The length only grows, and
 * only a growth beyond the tolerance re-ranks, so this O(n log n) walk runs a
 * logarithmic number of times over a policy's life. */
static void learn_period(vs_policy_t *policy, uint64_t cycle)
{
    bool rerank = policy->period == 0 || cycle > policy->period + tolerance(policy->period);
    if (cycle != policy->period)
        plan_make_stale(policy, VS_POLICY_STALE_CYCLE);
    policy->period = cycle;
    if (!rerank)
        return;
    vs_policy_alloc_t *a, *tmp;
    HASH_ITER(hh, policy->by_id, a, tmp) {
        if (a->hist_len <= 1) {
            predict_single(policy, a);
            requeue(policy, a);
        }
    }
}

static void predict_after_access(vs_policy_t *policy, vs_policy_alloc_t *a)
{
    size_t n = a->hist_len > 0 ? (size_t)a->hist_len - 1 : 0; /* gaps */
    if (n == 0) {
        predict_single(policy, a);
        return;
    }
    /* gaps[0] is the oldest, gaps[n - 1] the one that just ended. */
    uint64_t gaps[VS_POLICY_HISTORY - 1];
    size_t oldest = (a->hist_head + VS_POLICY_HISTORY - a->hist_len) % VS_POLICY_HISTORY;
    for (size_t i = 0; i < n; i++) {
        uint64_t from = a->history[(oldest + i) % VS_POLICY_HISTORY];
        uint64_t to = a->history[(oldest + i + 1) % VS_POLICY_HISTORY];
        gaps[i] = to - from;
    }
    /* The shortest pattern length m such that each recent gap equals the
     * one m before it; m = n always matches (no repeat seen yet). Only the
     * latest max(2m, 4) gaps are compared: older history (a load phase, a
     * warm-up that ran differently) must not hide a pattern that has since
     * repeated, while two repeats keep a short pattern from matching a
     * coincidence (gaps 5, 5, 30 must not read as "every 5"). */
    size_t m = 1;
    for (; m < n; m++) {
        size_t recent = 2 * m > 4 ? 2 * m : 4;
        size_t j = n > recent + m ? n - recent : m;
        while (j < n && gaps_match(gaps[j], gaps[j - m]))
            j++;
        if (j == n)
            break;
    }
    /* No pattern over the whole history, but the last two gaps agree: a
     * steady loop after an irregular start (a load, a first pass). */
    if (m == n && n >= 3 && gaps_match(gaps[n - 1], gaps[n - 2]))
        m = 1;
    uint64_t gap = gaps[n - m];
    uint64_t cycle = 0;
    for (size_t i = n - m; i < n; i++)
        cycle = sat_add(cycle, gaps[i]);
    a->next_use = sat_add(a->last_use, gap);
    a->deadline = sat_add(a->next_use, tolerance(gap));
    /* A pattern confirmed by a repeat, or the very first reuse, tells the
     * cycle length; an unconfirmed long history does not. */
    if ((m < n || n == 1) && cycle > policy->period)
        learn_period(policy, cycle);
    /* The longest gap of the latest cycle: a load phase older than a
     * period does not count, and a weight read by several kernels in a row
     * still shows the stretch between its bursts. */
    uint64_t span = 0, longest = 0;
    for (size_t i = n; i-- > 0;) {
        longest = gaps[i] > longest ? gaps[i] : longest;
        span = sat_add(span, gaps[i]);
        if (policy->period != 0 && span >= policy->period)
            break;
    }
    a->gap_longest = longest;
}

int vs_policy_alloc(vs_policy_t *policy, uint64_t id, uint64_t size, bool evictable,
                    bool resident)
{
    if (size == 0)
        return -EINVAL;
    if (find(policy, id))
        return -EEXIST;
    size_t want = (size_t)policy->count + 1;
    if (vs_heap_reserve(&policy->evict, want) < 0 || vs_heap_reserve(&policy->dead, want) < 0 ||
        vs_heap_reserve(&policy->next, want) < 0)
        return -ENOMEM;
    vs_policy_alloc_t *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->id = id;
    a->size = size;
    a->serial = policy->serial++;
    a->last_use = policy->now;
    a->evictable = evictable;
    a->resident = resident;
    a->born_late = policy->period != 0;
    a->pos_evict = a->pos_dead = a->pos_next = VS_HEAP_ABSENT;
    predict_single(policy, a);
    bool add_failed = false;
    HASH_ADD(hh, policy->by_id, id, sizeof(a->id), a);
    if (add_failed) {
        free(a);
        return -ENOMEM;
    }
    policy->count++;
    if (resident) {
        policy->resident_count++;
        policy->resident_bytes += size;
        if (evictable)
            policy->evictable_bytes += size;
    }
    requeue(policy, a);
    return 0;
}

static void account(vs_policy_t *policy, const vs_policy_alloc_t *a, int sign)
{
    if (!a->resident)
        return;
    if (sign > 0) {
        policy->resident_count++;
        policy->resident_bytes += a->size;
        if (a->evictable)
            policy->evictable_bytes += a->size;
    } else {
        policy->resident_count--;
        policy->resident_bytes -= a->size;
        if (a->evictable)
            policy->evictable_bytes -= a->size;
    }
}

int vs_policy_free(vs_policy_t *policy, uint64_t id)
{
    vs_policy_alloc_t *a = find(policy, id);
    if (!a)
        return -ENOENT;
    dequeue(policy, a);
    account(policy, a, -1);
    if (policy->pred)
        vs_predict_forget(policy->pred, id);
    HASH_DEL(policy->by_id, a);
    policy->count--;
    if (a->hist_len >= 2)
        plan_make_stale(policy, VS_POLICY_STALE_MEMBERS);
    if (policy->partial_bytes > 0 && policy->partial_id == id)
        policy->partial_bytes = 0;
    free(a);
    return 0;
}

int vs_policy_set_evictable(vs_policy_t *policy, uint64_t id, bool evictable)
{
    vs_policy_alloc_t *a = find(policy, id);
    if (!a)
        return -ENOENT;
    account(policy, a, -1);
    a->evictable = evictable;
    account(policy, a, +1);
    requeue(policy, a);
    return 0;
}

int vs_policy_set_resident(vs_policy_t *policy, uint64_t id, bool resident)
{
    vs_policy_alloc_t *a = find(policy, id);
    if (!a)
        return -ENOENT;
    account(policy, a, -1);
    /* Restored from, or written back to, the host's copy: clean, unless
     * it becomes resident for the operation whose writing access was just
     * reported (the caller tells the access before making room for it). */
    if (a->resident != resident)
        a->dirty = resident && a->written && a->write_seq == policy->now;
    a->resident = resident;
    account(policy, a, +1);
    requeue(policy, a);
    return 0;
}

void vs_policy_elapsed(vs_policy_t *policy, uint64_t ns)
{
    policy->elapsed_ns += ns;
}

int vs_policy_access(vs_policy_t *policy, uint64_t id, uint64_t seq, vs_policy_rw_t rw)
{
    vs_policy_alloc_t *a = find(policy, id);
    if (!a)
        return -ENOENT;
    if (seq < policy->now)
        seq = policy->now;
    policy->now = seq;
    /* A use whose direction is unknown may write. */
    if (rw != VS_POLICY_RW_READ) {
        a->dirty = true;
        a->written = true;
        a->write_seq = seq;
    }
    if (a->hist_len > 0 &&
        a->history[(a->hist_head + VS_POLICY_HISTORY - 1) % VS_POLICY_HISTORY] == seq)
        return 0; /* a second argument of the same operation */
    if (policy->pred) {
        /* Out of memory, the predictor misses one access: a worse
         * prediction, never a wrong answer. */
        bool same_op = policy->pred_seq_valid && policy->pred_seq == seq;
        (void)vs_predict_access(policy->pred, id, a->size, rw != VS_POLICY_RW_READ, policy->elapsed_ns, same_op);
        policy->elapsed_ns = 0;
        policy->pred_seq = seq;
        policy->pred_seq_valid = true;
    }
    a->history[a->hist_head] = seq;
    a->hist_head = (uint8_t)((a->hist_head + 1) % VS_POLICY_HISTORY);
    if (a->hist_len < VS_POLICY_HISTORY)
        a->hist_len++;
    if (a->hist_len == 2)
        plan_make_stale(policy, VS_POLICY_STALE_MEMBERS); /* used again: a member of the cycle */
    uint64_t gap_before = a->gap_longest;
    a->last_use = seq;
    predict_after_access(policy, a);
    /* A member's rhythm changed (a load phase ended): the plan is stale.
     * Its longest gap, not the next one: a pattern of unequal gaps is one
     * rhythm. */
    if (a->hist_len >= 2 && !gaps_match(gap_before, a->gap_longest) && rhythm_moves_plan(policy, gap_before, a->gap_longest))
        plan_make_stale(policy, VS_POLICY_STALE_RHYTHM);
    requeue(policy, a);
    return 0;
}

/* ---- The plan -------------------------------------------------------------
 *
 * Belady's rule alone minimises bytes moved, but on a cycle larger than the
 * limit it lets the resident set drift into one contiguous run: the copy
 * engine then idles while the resident run computes and cannot keep up while
 * the streamed run does. The plan fixes the resident set instead and spreads
 * the streamed bytes evenly over the cycle, so that each streamed
 * allocation's copy overlaps the compute of the kept ones before it; it moves
 * the same bytes per pass (what does not fit in `budget`).
 *
 * Members are the allocations used about once per cycle (a burst of uses
 * counting once: their longest gap is about a cycle); those used more often
 * are kept first. The cycle is the longest gap of the allocations that
 * hold a quarter of the bytes, not of all: one allocation used every other
 * cycle (scratch) would otherwise set it at two, and keep every member.
 * Walking the members in the order of their next use,
 * an allocation is streamed while the bytes streamed so far stay within half
 * its size of the even share (error diffusion over cumulative bytes, a proxy
 * for compute time: a layer's work scales with its weights). */

static int plan_gap_descending(const void *x, const void *y)
{
    const vs_policy_alloc_t *a = *(vs_policy_alloc_t *const *)x, *b = *(vs_policy_alloc_t *const *)y;
    if (a->gap_longest != b->gap_longest)
        return a->gap_longest > b->gap_longest ? -1 : 1;
    return a->serial < b->serial ? -1 : a->serial > b->serial;
}

static int plan_member_order(const void *x, const void *y)
{
    const vs_policy_alloc_t *a = *(vs_policy_alloc_t *const *)x, *b = *(vs_policy_alloc_t *const *)y;
    if (a->next_use != b->next_use)
        return a->next_use < b->next_use ? -1 : 1;
    return a->serial < b->serial ? -1 : a->serial > b->serial;
}

/* Used again at least once, with a prediction that still holds or that
 * went by lately: within twice its longest gap of its last use, an
 * allocation of the cycle is late, not gone. A plan that left it out would
 * count its bytes nowhere, neither streamed nor kept, and plan to keep
 * more than the budget holds: the framework cell (bench/offload), whose
 * uses reach the policy a few operations late, built plans with one or two
 * of its sixteen blocks dead for a moment that streamed 36 or 72 MiB a pass
 * too little; the blocks then left on demand until a later build found
 * none late (1.070 / 1.108 / 1.063 x the bound at 25 / 50 / 75%, 1.064 /
 * 1.066 / 1.025 counted). One that is gone leaves the plan at its next
 * build past that. */
static bool plan_candidate(const vs_policy_t *policy, const vs_policy_alloc_t *a)
{
    bool late = policy->now - a->last_use <= 2 * a->gap_longest;
    return a->hist_len >= 2 && (!is_dead(policy, a) || late) && a->next_use != UINT64_MAX && a->next_use > a->last_use;
}

static void plan_set(vs_policy_t *policy, vs_policy_alloc_t *a, bool streamed)
{
    if (a->streamed == streamed)
        return;
    a->streamed = streamed;
    if (a->pos_evict != VS_HEAP_ABSENT)
        requeue(policy, a);
}

static int plan_size_descending(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a > b ? -1 : a < b;
}

/* The smallest size a member of the plan must have to stream: the largest
 * size whose members, with the larger ones, hold `stream` bytes and an
 * eighth more (room for the spread to round to whole members). Every
 * streamed allocation costs the host the same work whatever its size (an
 * unmap, a map and an access grant: about 70 us on an H100, which a 2 MiB
 * copy at 50 GB/s does not hide), so the plan streams few large
 * allocations rather than many small ones; written allocations, small in a
 * decoder (KV caches), then stay resident and are not copied out either.
 * On the virtual clock this took the sweep's DiT and LLM cells at 75% and
 * the balance point from 1.38 to 1.14 and 1.15 times the bound. 0 when
 * all of them are needed. A floor `asked` for (`vs_policy_set_floor`; 0:
 * none) replaces it where the members at or above it hold the stream.
 * Members of the plan in `policy->members[0, n)`, whose bytes are
 * `cycle_bytes`; *floor_bytes receives those of the members at or above
 * the floor, and *coarser (unless NULL) the coarser floor
 * (`planned_coarser_floor`), 0 when there is none. */
static uint64_t plan_stream_floor(const vs_policy_t *policy, size_t n, uint64_t stream, uint64_t cycle_bytes,
                                  uint64_t asked, uint64_t *floor_bytes, uint64_t *coarser)
{
    *floor_bytes = cycle_bytes;
    if (coarser != NULL)
        *coarser = 0;
    uint64_t *sizes = malloc(n * sizeof *sizes);
    if (sizes == NULL)
        return 0; /* out of memory: any member may stream */
    for (size_t i = 0; i < n; i++)
        sizes[i] = policy->members[i]->size;
    qsort(sizes, n, sizeof *sizes, plan_size_descending);
    /* Walking down the sizes, with every member of each (a floor is a
     * size, not a member): the first whose members with the larger ones
     * hold the stream and an eighth more is the floor; the first that
     * holds the stream alone, `holding`, is the largest any floor may be. */
    uint64_t want = stream + stream / 8, bytes = 0, floor_size = 0, holding = 0, asked_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        bytes += sizes[i];
        if (i + 1 < n && sizes[i + 1] == sizes[i])
            continue;
        if (sizes[i] >= asked)
            asked_bytes = bytes;
        if (holding == 0 && bytes >= stream)
            holding = sizes[i];
        if (floor_size == 0 && bytes >= want) {
            floor_size = sizes[i];
            *floor_bytes = bytes;
        }
    }
    /* A floor asked for (`vs_policy_set_floor`), where the members at or
     * above it hold the stream. */
    if (asked > floor_size && holding != 0 && asked <= holding) {
        floor_size = asked;
        *floor_bytes = asked_bytes;
    }
    /* Fewer, larger members could carry the stream: a coarser floor, above
     * this one and above the smallest member (a floor of 0 lets every
     * member stream). */
    if (coarser != NULL && holding > floor_size && n > 0 && holding > sizes[n - 1])
        *coarser = holding;
    free(sizes);
    return floor_size;
}

/* Evening out the stream. Walking the members in the order of their next
 * use, the bytes streamed so far run ahead of or behind the even share of
 * `stream` (by member bytes, the proxy for compute). The copy engine idles
 * where they run ahead (the window is full) and the GPU waits where they run
 * behind, so a plan wants the least swing between the two extremes: the
 * largest lead minus the smallest (a rotation of the cycle does not change
 * it). On the sweep's cycle at 50% and the balance point, a model of the
 * pipeline with a free host (bench/offload/pipeline_floor.py) takes 1.082 x
 * the bound with the head next to a kept layer, 1.048 with it in the middle
 * of the longest streamed run, and 1.007 with the kept layers spaced evenly
 * too; the swing orders every placement as the model's time does.
 *
 * Two moves are judged: a streamed member keeping a head of `extra` bytes
 * (the lead of it and of every member after it falls by `extra`), and a
 * kept member streamed after all (the leads rise by its size). Either move
 * goes to one of the largest members of its class, as it did before the
 * swing was judged (a swap costs the host the same whatever its size, and
 * the LLM's rows at 25% lose 4-8% with smaller ones); the swing chooses
 * among those. With the leads' prefix extremes and the suffix's extremes
 * walking back, each candidate costs O(1). */
typedef enum { PLAN_MOVE_HEAD, PLAN_MOVE_STREAM } plan_move_t;

/* The candidate whose move leaves the least swing, NULL when none may move
 * or memory runs out; a head stays on `previous` unless another is better
 * by a sixteenth of `largest_member` (every change of choice costs a whole
 * copy), and goes only where it leaves a tail to stream. */
static vs_policy_alloc_t *plan_least_swing(vs_policy_t *policy, size_t n, uint64_t stream, uint64_t cycle_bytes,
                                           plan_move_t move, uint64_t extra, uint64_t largest_member,
                                           uint64_t previous)
{
    double *lead = cycle_bytes > 0 ? malloc(3 * n * sizeof *lead) : NULL;
    if (lead == NULL)
        return NULL;
    double *prefix_max = lead + n, *prefix_min = lead + 2 * n;
    uint64_t seen = 0, streamed = 0, largest_streamed = 0, largest_kept = 0;
    for (size_t i = 0; i < n; i++) {
        const vs_policy_alloc_t *m = policy->members[i];
        if (m->streamed && m->size > largest_streamed)
            largest_streamed = m->size;
        if (!m->streamed && m->size > largest_kept)
            largest_kept = m->size;
        seen += m->size;
        streamed += m->streamed ? m->size : 0;
        lead[i] = (double)streamed - (double)stream * (double)seen / (double)cycle_bytes;
        prefix_max[i] = i > 0 && prefix_max[i - 1] > lead[i] ? prefix_max[i - 1] : lead[i];
        prefix_min[i] = i > 0 && prefix_min[i - 1] < lead[i] ? prefix_min[i - 1] : lead[i];
    }
    vs_policy_alloc_t *chosen = NULL, *kept_previous = NULL;
    /* Walking back, `high` and `low` are the extremes of the leads from
     * member k on. */
    double best = 0.0, previous_swing = 0.0, high = 0.0, low = 0.0;
    for (size_t k = n; k-- > 0;) {
        high = k + 1 == n || lead[k] > high ? lead[k] : high;
        low = k + 1 == n || lead[k] < low ? lead[k] : low;
        vs_policy_alloc_t *m = policy->members[k];
        double shift;
        if (move == PLAN_MOVE_HEAD) {
            if (!m->streamed || m->size <= extra || m->size != largest_streamed)
                continue;
            shift = -(double)extra;
        } else {
            if (m->streamed || m->size != largest_kept)
                continue;
            shift = (double)m->size;
        }
        double top = k > 0 && prefix_max[k - 1] > high + shift ? prefix_max[k - 1] : high + shift;
        double bottom = k > 0 && prefix_min[k - 1] < low + shift ? prefix_min[k - 1] : low + shift;
        double swing = top - bottom;
        if (previous != 0 && m->id == previous) {
            kept_previous = m;
            previous_swing = swing;
        }
        if (chosen == NULL || swing <= best) {
            chosen = m;
            best = swing;
        }
    }
    free(lead);
    if (kept_previous != NULL && previous_swing <= best + (double)largest_member / 16.0)
        return kept_previous;
    return chosen;
}

/* One streamed member may keep `extra` bytes resident, so that the budget
 * is used to the byte: where the swing says, else the largest streamed one,
 * which keeps all it can. */
static void plan_place_head(vs_policy_t *policy, size_t n, uint64_t stream, uint64_t extra, uint64_t cycle_bytes,
                            uint64_t largest_member, uint64_t previous)
{
    vs_policy_alloc_t *partial =
        plan_least_swing(policy, n, stream, cycle_bytes, PLAN_MOVE_HEAD, extra, largest_member, previous);
    bool judged = partial != NULL;
    for (size_t i = 0; i < n && !judged; i++) {
        vs_policy_alloc_t *m = policy->members[i];
        if (m->streamed
            && (partial == NULL || m->size > partial->size || (m->size == partial->size && m->id == previous)))
            partial = m;
    }
    if (partial != NULL) {
        policy->partial_id = partial->id;
        policy->partial_bytes = extra < partial->size ? extra : partial->size;
    }
}

/* `vs_policy_set_largest_offer`: with the members in `policy->members[0,
 * *n)` (`*cycle_bytes` of them), `room` for them and `stream` bytes to
 * stream, whether the plan keeps every member of the largest size instead,
 * in a budget grown by the offer. Where it does, they are kept and leave
 * the members (*n and *cycle_bytes shrink by them), and *room becomes what
 * the others may keep: the grown budget less their bytes. */
static bool plan_take_largest_offer(vs_policy_t *policy, size_t *n, uint64_t *room, uint64_t stream,
                                    uint64_t *cycle_bytes)
{
    uint64_t largest = 0, largest_bytes = 0;
    for (size_t i = 0; i < *n; i++)
        if (policy->members[i]->size > largest)
            largest = policy->members[i]->size;
    /* The others first, those of the largest size after them. */
    size_t others = 0;
    for (size_t i = 0; i < *n; i++) {
        vs_policy_alloc_t *m = policy->members[i];
        if (m->size == largest) {
            largest_bytes += m->size;
            continue;
        }
        policy->members[i] = policy->members[others];
        policy->members[others++] = m;
    }
    uint64_t grown = *room + policy->largest_offer;
    if (others == 0 || largest_bytes > grown)
        return false;
    uint64_t stream_without = *cycle_bytes > grown ? *cycle_bytes - grown : 0;
    uint64_t unused;
    uint64_t floor_with = plan_stream_floor(policy, *n, stream, *cycle_bytes, 0, &unused, NULL);
    uint64_t floor_without =
        stream_without == 0 ? floor_with : plan_stream_floor(policy, others, stream_without, *cycle_bytes - largest_bytes, 0, &unused,
                                                         NULL);
    /* A floor may not fall below the plan's (0, every member streams, is
     * the lowest). */
    if (floor_without < floor_with)
        return false;
    for (size_t i = others; i < *n; i++)
        plan_set(policy, policy->members[i], false);
    *n = others;
    *cycle_bytes -= largest_bytes;
    *room = grown - largest_bytes;
    policy->keeps_largest = true;
    return true;
}

/* Whether member `m` belongs to the class of sizes [lo, hi]. */
static bool plan_in_class(const vs_policy_alloc_t *m, uint64_t lo, uint64_t hi)
{
    return m->size >= lo && m->size <= hi;
}

/* Streams `want` of the `able` members of `policy->members[0, n)` whose
 * sizes are in [lo, hi], spread evenly over the cycle in the order of their
 * next use (each keeps its class while within half a member of even, as the
 * whole plan's spread does: every change of class costs a copy), the rest
 * of that class kept. Returns how many stream (`want`). */
static uint64_t plan_spread_class(vs_policy_t *policy, size_t n, uint64_t lo, uint64_t hi, uint64_t want,
                                  size_t able)
{
    uint64_t seen = 0, streamed = 0;
    for (size_t i = 0; i < n; i++) {
        vs_policy_alloc_t *m = policy->members[i];
        if (!plan_in_class(m, lo, hi))
            continue;
        seen++;
        double share = (double)want * (double)seen / (double)able;
        double slack = m->streamed ? 0.5 : -0.5;
        bool streams = streamed < want && (double)streamed + 0.5 <= share + slack;
        plan_set(policy, m, streams);
        streamed += streams;
    }
    /* The hysteresis may leave a few short: the kept ones furthest behind
     * their even share stream. */
    while (streamed < want) {
        vs_policy_alloc_t *behind = NULL;
        double most = 0.0;
        uint64_t at = 0, count = 0;
        for (size_t i = 0; i < n; i++) {
            vs_policy_alloc_t *m = policy->members[i];
            if (!plan_in_class(m, lo, hi))
                continue;
            at++;
            count += m->streamed;
            double lag = (double)want * (double)at / (double)able - (double)count;
            if (!m->streamed && (behind == NULL || lag > most)) {
                behind = m;
                most = lag;
            }
        }
        plan_set(policy, behind, true);
        streamed++;
    }
    return streamed;
}

/* `vs_policy_set_piece`: with the members in `policy->members[0, n)` and
 * `stream` bytes to stream, streams the last piece of as many members as
 * make it up, spread evenly over the cycle (`plan_spread_class`). Where too
 * few members are as large as a piece, the members of the next size below
 * a piece fill the rest, streamed whole beside the pieces (`filler`): with
 * the room of the whole plan's window (the pieces' `piece_extra` given
 * back, where the pieces' swaps at the balance point run), one filler more
 * whose memory the caller holds between the fillers' uses so that their
 * swaps are of their own size too (vs_policy_stats_t.planned_filler_bytes),
 * and `filler_slack` more as slack for the pieces' swaps.
 * False, with nothing set, when even they fall short. */
static bool plan_pieces(vs_policy_t *policy, size_t n, uint64_t stream, uint64_t room)
{
    uint64_t piece = policy->piece, filler = 0;
    size_t able = 0, fillers_able = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t size = policy->members[i]->size;
        able += size >= piece;
        if (size < piece && size > filler)
            filler = size;
    }
    uint64_t want = (stream + piece - 1) / piece, fill = 0;
    if (want > able) {
        for (size_t i = 0; i < n; i++)
            fillers_able += policy->members[i]->size == filler;
        fill = stream + policy->piece_extra + (1 + policy->filler_slack) * filler - able * piece;
        want = able;
        if (filler == 0 || fill > fillers_able * filler)
            return false;
    }
    uint64_t fillers_want = fill == 0 ? 0 : (fill + filler - 1) / filler;
    /* Nor while the cycle is still being learned when, once every
     * evictable allocation is a member, too few would be large enough: a
     * plan that changes its kind when the last members join moves heads and
     * classes for nothing. */
    uint64_t evictable = 0, carried = 0;
    vs_policy_alloc_t *a, *tmp;
    HASH_ITER(hh, policy->by_id, a, tmp) {
        if (!a->evictable || is_dead(policy, a))
            continue;
        evictable += a->size;
        carried += a->size >= piece ? piece : (fillers_want > 0 && a->size == filler ? filler : 0);
    }
    if (evictable > room && evictable - room > carried)
        return false;
    qsort(policy->members, n, sizeof *policy->members, plan_member_order);
    for (size_t i = 0; i < n; i++) {
        vs_policy_alloc_t *m = policy->members[i];
        if (m->size < piece && (fillers_want == 0 || m->size != filler))
            plan_set(policy, m, false);
    }
    uint64_t streamed = plan_spread_class(policy, n, piece, UINT64_MAX, want, able);
    uint64_t fillers = fillers_want > 0 ? plan_spread_class(policy, n, filler, filler, fillers_want, fillers_able) : 0;
    policy->planned_streamed_bytes = streamed * piece + fillers * filler;
    policy->filler = fillers > 0 ? filler : 0;
    policy->in_pieces = true;
    return true;
}

/* Walking the members in `policy->members[0, n)` (in the order of their
 * next use), streams each while the bytes streamed so far stay within half
 * its size of its even share of `stream`, give or take `hysteresis` bytes
 * that keep a member's class (members under `floor_size` are kept). Returns
 * the bytes streamed; *swing receives the range of the streamed bytes'
 * lead over the even share along the walk: about one member when spread
 * evenly. */
static uint64_t plan_spread(vs_policy_t *policy, size_t n, uint64_t stream, uint64_t spread_bytes, uint64_t floor_size,
                            double hysteresis, double *swing)
{
    uint64_t seen = 0, streamed = 0;
    double high = 0.0, low = 0.0;
    for (size_t i = 0; i < n; i++) {
        vs_policy_alloc_t *m = policy->members[i];
        if (m->size < floor_size) {
            plan_set(policy, m, false);
            continue;
        }
        seen += m->size;
        double share = (double)stream * (double)seen / (double)spread_bytes;
        double slack = m->streamed ? hysteresis : -hysteresis;
        bool streams = (double)streamed + (double)m->size / 2.0 <= share + slack;
        plan_set(policy, m, streams);
        streamed += streams ? m->size : 0;
        double lead = (double)streamed - share;
        high = lead > high ? lead : high;
        low = lead < low ? lead : low;
    }
    *swing = high - low;
    return streamed;
}

/* Builds the plan; without a cycle or a budget, or when everything fits,
 * nothing is streamed. O(n log n). */
static void plan_build(vs_policy_t *policy)
{
    for (int cause = 0; cause < VS_POLICY_STALE_CAUSES; cause++)
        if (policy->plan_stale & (1u << cause))
            policy->plan_builds_for[cause]++;
    policy->plan_stale = 0;
    policy->plan_built_at = policy->now;
    policy->planned_streamed_bytes = 0;
    policy->keeps_largest = false;
    policy->floor = 0;
    policy->coarser_floor = 0;
    policy->in_pieces = false;
    policy->filler = 0;
    policy->pieces_refused = false;
    policy->plan_builds++;
    uint64_t previous = policy->partial_bytes > 0 ? policy->partial_id : 0;
    policy->partial_id = 0;
    policy->partial_bytes = 0;
    bool planning = policy->kind == VS_POLICY_CYCLIC && policy->period != 0 && policy->budget != UINT64_MAX;
    if (planning && policy->members_cap < policy->count) {
        vs_policy_alloc_t **grown = realloc(policy->members, policy->count * sizeof *grown);
        planning = grown != NULL;
        if (grown != NULL) {
            policy->members = grown;
            policy->members_cap = policy->count;
        }
    }
    /* The cycle, for the plan: the longest gap that allocations holding a
     * quarter of the candidates' bytes reach (the learned period may still
     * count a load phase). */
    uint64_t cycle = 0, candidate_bytes = 0;
    size_t n = 0;
    vs_policy_alloc_t *a, *tmp;
    HASH_ITER(hh, policy->by_id, a, tmp) {
        if (planning && plan_candidate(policy, a)) {
            policy->members[n++] = a;
            candidate_bytes += a->size;
        }
    }
    if (n > 1)
        qsort(policy->members, n, sizeof *policy->members, plan_gap_descending);
    for (uint64_t seen = 0, i = 0; i < n && seen < candidate_bytes - candidate_bytes * 3 / 4; i++) {
        cycle = policy->members[i]->gap_longest;
        seen += policy->members[i]->size;
    }
    policy->plan_cycle = cycle;
    n = 0;
    uint64_t kept = 0, cycle_bytes = 0;
    HASH_ITER(hh, policy->by_id, a, tmp) {
        bool candidate = planning && plan_candidate(policy, a);
        if (candidate && plan_member_gap(cycle, a->gap_longest)) {
            policy->members[n++] = a;
            cycle_bytes += a->size;
        } else {
            plan_set(policy, a, false);
            if (candidate)
                kept += a->size; /* used more than once per cycle */
        }
    }
    uint64_t room = policy->budget > kept ? policy->budget - kept : 0;
    uint64_t stream = cycle_bytes > room ? cycle_bytes - room : 0;
    if (stream > 0 && policy->piece > 0) {
        uint64_t room_in_pieces = room + policy->piece_extra;
        uint64_t stream_in_pieces = cycle_bytes > room_in_pieces ? cycle_bytes - room_in_pieces : 0;
        if (stream_in_pieces > 0 && plan_pieces(policy, n, stream_in_pieces, room_in_pieces))
            return;
        policy->pieces_refused = stream_in_pieces > 0;
    }
    if (stream > 0 && policy->largest_offer > 0 && plan_take_largest_offer(policy, &n, &room, stream, &cycle_bytes))
        stream = cycle_bytes > room ? cycle_bytes - room : 0;
    if (stream == 0) {
        for (size_t i = 0; i < n; i++)
            plan_set(policy, policy->members[i], false);
        return;
    }
    qsort(policy->members, n, sizeof *policy->members, plan_member_order);
    /* A rebuild keeps each member's class while the spread stays within
     * half the largest member of even: every change of class costs a copy. */
    uint64_t largest_member = 0;
    for (size_t i = 0; i < n; i++)
        if (policy->members[i]->size > largest_member)
            largest_member = policy->members[i]->size;
    double hysteresis = (double)largest_member / 2.0;
    /* The largest members stream first (`plan_stream_floor`); the spread
     * is over the bytes of those that may. */
    uint64_t spread_bytes;
    uint64_t floor_size =
        plan_stream_floor(policy, n, stream, cycle_bytes, policy->floor_asked, &spread_bytes, &policy->coarser_floor);
    policy->floor = floor_size;
    /* Kept classes may bunch what streams (two streamed members in a row
     * where an even spread has one in two: the framework cell at 75% took
     * 1.085 x the bound so, 1.025 spread evenly); past a swing of a member
     * and a quarter the plan is spread afresh, every class given up. Where
     * the members that may stream are of one size: among mixed sizes the
     * swing of bytes tells little of the pipeline (the 60-block DiT at 25%,
     * spread afresh from a swing of 1.7 of its largest tensor, kept its
     * copy engine 84% busy instead of 99% and took 1.197 x the bound instead
     * of 1.000). */
    double swing = 0.0;
    uint64_t streamed = plan_spread(policy, n, stream, spread_bytes, floor_size, hysteresis, &swing);
    bool one_size = true;
    for (size_t i = 0; i < n && one_size; i++)
        one_size = policy->members[i]->size < floor_size || policy->members[i]->size == largest_member;
    if (one_size && swing > 1.25 * (double)largest_member)
        streamed = plan_spread(policy, n, stream, spread_bytes, floor_size, 0.0, &swing);
    /* Rounding may leave the kept members a little over: stream kept ones
     * until they fit, each where it evens the stream out most (else the
     * largest). */
    while (streamed < stream) {
        vs_policy_alloc_t *more =
            plan_least_swing(policy, n, stream, cycle_bytes, PLAN_MOVE_STREAM, 0, largest_member, 0);
        bool judged = more != NULL;
        for (size_t i = 0; i < n && !judged; i++) {
            vs_policy_alloc_t *m = policy->members[i];
            if (!m->streamed && (more == NULL || m->size > more->size))
                more = m;
        }
        if (more == NULL)
            break;
        plan_set(policy, more, true);
        streamed += more->size;
    }
    policy->planned_streamed_bytes = streamed;
    /* Whole allocations stream more than must: one streamed allocation may
     * keep the difference resident, so that the budget is used to the byte
     * (`plan_place_head`). */
    if (streamed > stream)
        plan_place_head(policy, n, stream, streamed - stream, cycle_bytes, largest_member, previous);
}

/* Rebuilds a stale plan, at most once per eighth of a cycle: members join
 * one by one while a cycle is being learned. */
static void plan_refresh(vs_policy_t *policy)
{
    if (policy->plan_stale == 0)
        return;
    uint64_t spacing = policy->period / 8 + 1;
    if (policy->plan_built_at != 0 && policy->now - policy->plan_built_at < spacing)
        return;
    plan_build(policy);
}

void vs_policy_set_budget(vs_policy_t *policy, uint64_t bytes)
{
    uint64_t old = policy->budget;
    if (bytes == old)
        return;
    policy->budget = bytes;
    /* Small drifts (another allocation, a temporary) do not re-plan. */
    uint64_t diff = bytes > old ? bytes - old : old - bytes;
    if (old == UINT64_MAX || bytes == UINT64_MAX || diff > old / 32)
        plan_make_stale(policy, VS_POLICY_STALE_BUDGET);
}

void vs_policy_set_largest_offer(vs_policy_t *policy, uint64_t bytes)
{
    if (bytes == policy->largest_offer)
        return;
    policy->largest_offer = bytes;
    plan_make_stale(policy, VS_POLICY_STALE_SETTINGS);
}

void vs_policy_set_floor(vs_policy_t *policy, uint64_t bytes)
{
    if (bytes == policy->floor_asked)
        return;
    policy->floor_asked = bytes;
    plan_make_stale(policy, VS_POLICY_STALE_SETTINGS);
}

void vs_policy_set_piece(vs_policy_t *policy, uint64_t bytes, uint64_t extra, uint64_t filler_slack)
{
    if (bytes == policy->piece && extra == policy->piece_extra && filler_slack == policy->filler_slack)
        return;
    policy->piece = bytes;
    policy->piece_extra = bytes != 0 ? extra : 0;
    policy->filler_slack = bytes != 0 ? filler_slack : 0;
    plan_make_stale(policy, VS_POLICY_STALE_SETTINGS);
}

void vs_policy_replan(vs_policy_t *policy)
{
    vs_policy_alloc_t *a, *tmp;
    HASH_ITER(hh, policy->by_id, a, tmp) {
        plan_set(policy, a, false);
    }
    plan_make_stale(policy, VS_POLICY_STALE_SETTINGS);
}

bool vs_policy_planned_resident(const vs_policy_t *policy, uint64_t id)
{
    const vs_policy_alloc_t *a = find(policy, id);
    return a != NULL && !a->streamed && policy->planned_streamed_bytes > 0 && a->hist_len >= 2;
}

static int scratch_push(vs_policy_t *policy, vs_policy_alloc_t *a)
{
    if (policy->scratch_len == policy->scratch_cap) {
        size_t cap = policy->scratch_cap ? policy->scratch_cap * 2 : 64;
        vs_policy_alloc_t **s = realloc(policy->scratch, cap * sizeof(*s));
        if (!s)
            return -ENOMEM;
        policy->scratch = s;
        policy->scratch_cap = cap;
    }
    policy->scratch[policy->scratch_len++] = a;
    return 0;
}

/* Pops `heap` into the scratch list until `take` says stop; `take` returns
 * 1 to consume the item, 0 to skip it (it goes back afterwards), -1 to stop
 * (the item is pushed back unconsumed). */
typedef struct victim_query_s {
    vs_policy_t *policy;
    uint64_t need;
    uint64_t total;
    uint64_t *out;
    size_t cap;
    size_t n;
    int rc;
} victim_query_t;

static bool victim_take(victim_query_t *q, vs_policy_alloc_t *a)
{
    if (a->protect_mark == q->policy->stamp || a->chosen_mark == q->policy->stamp)
        return true; /* skipped, keep going */
    if (q->n == q->cap) {
        q->rc = -ENOBUFS;
        return false;
    }
    a->chosen_mark = q->policy->stamp;
    q->out[q->n++] = a->id;
    q->total += a->size;
    return true;
}

/* Pops candidates from `heap` while the query wants more; `dead_only` stops
 * at the first allocation that is not dead. Popped items are remembered in
 * the scratch list starting at `base` and pushed back by the caller. */
static int victims_from(victim_query_t *q, vs_heap_t *heap, bool dead_only)
{
    vs_policy_t *policy = q->policy;
    while (q->total < q->need && q->rc == 0) {
        vs_policy_alloc_t *a = vs_heap_top(heap);
        if (!a || (dead_only && !is_dead(policy, a)))
            break;
        int rc = scratch_push(policy, a);
        if (rc < 0)
            return rc;
        vs_heap_pop(heap);
        if (!victim_take(q, a))
            break;
    }
    return 0;
}

static void restore_scratch(vs_policy_t *policy, vs_heap_t *heap, size_t base)
{
    for (size_t i = base; i < policy->scratch_len; i++)
        (void)vs_heap_push(heap, policy->scratch[i]);
    policy->scratch_len = base;
}

/* Whether the fetch of `ahead[s]` may take `v`, the victim the caller
 * takes next. Never when `v` is used first (do no harm). For the nearest
 * predicted operation the fetch is due: a later one would leave the copy
 * for the operation to wait on, so doing no harm is enough (Kimbrel and
 * Karlin's forestall: conservative until a fetch is due, aggressive then;
 * measured in operations, as the caller reports no compute time). Further
 * ahead, only when `v` is the one Belady's rule would evict when
 * `ahead[s]` needs room: no other candidate left in `evict` used later
 * after it (or never used again while `v` is). */
static bool predict_may_evict_for(vs_policy_t *policy, const vs_policy_alloc_t *v, size_t s, size_t n)
{
    for (size_t k = 0; k < s; k++)
        if (policy->ahead[k].id == v->id)
            return false; /* used first: evicting it now would harm */
    if (policy->ahead[s].ops == 0)
        return true;
    uint64_t mark = ++policy->stamp;
    size_t others = policy->evict.len - 1, seen = 0; /* `v` is in it */
    for (size_t k = s + 1; k < n; k++) {
        if (policy->ahead[k].id == v->id)
            return seen == others; /* every other candidate is used before it */
        vs_policy_alloc_t *w = find(policy, policy->ahead[k].id);
        if (w && w != v && w->resident && w->evictable && vs_heap_contains(&policy->evict, w)
            && w->chosen_mark != mark) {
            w->chosen_mark = mark;
            seen++;
        }
    }
    return true; /* not used again within the prediction */
}

/* The `predict` kind's prefetch: the missing allocations in the order of
 * the predicted accesses, each offered only while the victim the caller
 * will take for its room (the top of `evict`, then the next) may go for it
 * (`predict_may_evict_for`): beyond the nearest operation, only the victim
 * Belady's rule would take when the fetched allocation is used (Cao,
 * Felten, Karlin and Li's conservative strategy). Fetching far ahead over
 * the farthest use now (in a loop, the allocation just used, which may be
 * one the loop keeps) would evict, pass after pass, every allocation after
 * its use: a loop would stream whole. */
static int predict_prefetch(vs_policy_t *policy, uint64_t budget, uint64_t *ids, size_t cap, size_t *n_ids)
{
    size_t n = 0;
    vs_predict_next(policy->pred, policy->ahead, VS_POLICY_PREDICT_AHEAD, &n);
    uint64_t considered = ++policy->stamp;
    uint64_t left = budget;
    int rc = 0;
    policy->scratch_len = 0;
    for (size_t s = 0; s < n && *n_ids < cap; s++) {
        vs_policy_alloc_t *a = find(policy, policy->ahead[s].id);
        if (!a || a->chosen_mark == considered || a->protect_mark == considered)
            continue;
        a->protect_mark = considered; /* chosen_mark is the scans' */
        if (a->resident)
            continue;
        if (a->size > left)
            break;
        vs_policy_alloc_t *v = vs_heap_top(&policy->evict);
        if (v && !predict_may_evict_for(policy, v, s, n))
            break;
        if (v) {
            rc = scratch_push(policy, v);
            if (rc < 0)
                break;
            vs_heap_pop(&policy->evict);
        }
        ids[(*n_ids)++] = a->id;
        left -= a->size;
    }
    restore_scratch(policy, &policy->evict, 0);
    return rc;
}

/* The `predict` kind: every candidate's key afresh, once a quarter as many
 * accesses as there are candidates went by since the last time (O(log n)
 * per access amortised). A key otherwise dates from the allocation's last
 * use, and the predictor may have learned since (a phase's period found, a
 * router's choice cooling). */




static void predict_refresh(vs_policy_t *policy)
{
    vs_predict_stats_t st;
    vs_predict_stats(policy->pred, &st);
    size_t n = policy->evict.len;
    if (st.accesses - policy->rekeyed_at < n / 4 + 1)
        return;
    policy->rekeyed_at = st.accesses;
    policy->scratch_len = 0;
    while (policy->evict.len > 0) {
        vs_policy_alloc_t *a = vs_heap_pop(&policy->evict);
        if (scratch_push(policy, a) < 0) {
            (void)vs_heap_push(&policy->evict, a);
            break;
        }
    }
    for (size_t i = 0; i < policy->scratch_len; i++) {
        predict_rekey(policy, policy->scratch[i]);
        (void)vs_heap_push(&policy->evict, policy->scratch[i]);
    }
    policy->scratch_len = 0;
}

int vs_policy_victims(vs_policy_t *policy, uint64_t need, const uint64_t *protect,
                      size_t n_protect, uint64_t *victims, size_t cap, size_t *n_victims)
{
    *n_victims = 0;
    if (need == 0)
        return 0;
    policy->stamp++;
    for (size_t i = 0; i < n_protect; i++) {
        vs_policy_alloc_t *a = find(policy, protect[i]);
        if (a)
            a->protect_mark = policy->stamp;
    }
    plan_refresh(policy);
    if (policy->pred)
        predict_refresh(policy);
    victim_query_t q = {policy, need, 0, victims, cap, 0, 0};
    int rc = 0;
    policy->scratch_len = 0;
    if (policy->kind == VS_POLICY_CYCLIC) { /* `predict` ranks the dead first in `evict` */
        rc = victims_from(&q, &policy->dead, true);
        restore_scratch(policy, &policy->dead, 0);
    }
    if (rc == 0) {
        rc = victims_from(&q, &policy->evict, false);
        restore_scratch(policy, &policy->evict, 0);
    }
    *n_victims = q.n;
    if (rc < 0)
        return rc;
    if (q.rc < 0)
        return q.rc;
    return q.total >= need ? 0 : -ENOSPC;
}

int vs_policy_prefetch(vs_policy_t *policy, uint64_t budget, uint64_t *ids, size_t cap,
                       size_t *n_ids)
{
    *n_ids = 0;
    if (policy->kind == VS_POLICY_PREDICT)
        return predict_prefetch(policy, budget, ids, cap, n_ids);
    plan_refresh(policy);
    policy->scratch_len = 0;
    int rc = 0;
    uint64_t left = budget;
    while (*n_ids < cap) {
        vs_policy_alloc_t *a = vs_heap_top(&policy->next);
        if (!a)
            break;
        if (is_dead(policy, a)) {
            /* Dead stays dead until its next access re-queues it. */
            vs_heap_pop(&policy->next);
            continue;
        }
        if (a->size > left)
            break;
        rc = scratch_push(policy, a);
        if (rc < 0)
            break;
        vs_heap_pop(&policy->next);
        ids[(*n_ids)++] = a->id;
        left -= a->size;
    }
    restore_scratch(policy, &policy->next, 0);
    return rc;
}

int vs_policy_predict(const vs_policy_t *policy, uint64_t id, uint64_t *next_use)
{
    const vs_policy_alloc_t *a = find(policy, id);
    if (!a)
        return -ENOENT;
    if (policy->kind == VS_POLICY_PREDICT) {
        /* In the predictor's unit (accesses from now), which orders
         * allocations the same way as operations would. */
        vs_predict_distance_t d;
        (void)vs_predict_next_use(policy->pred, id, &d);
        if (d.accesses == VS_PREDICT_NEVER && a->hist_len == 0)
            d.accesses = VS_POLICY_NEVER - 1 - policy->now; /* not used yet: ahead */
        *next_use = d.accesses == VS_PREDICT_NEVER ? VS_POLICY_NEVER
                    : d.accesses > VS_POLICY_NEVER - 1 - policy->now ? VS_POLICY_NEVER - 1
                                                                       : policy->now + d.accesses;
        return 0;
    }
    *next_use = is_dead(policy, a) ? VS_POLICY_NEVER : a->next_use;
    return 0;
}

void vs_policy_stats(const vs_policy_t *policy, vs_policy_stats_t *stats)
{
    stats->allocs = policy->count;
    stats->resident = policy->resident_count;
    stats->resident_bytes = policy->resident_bytes;
    stats->evictable_bytes = policy->evictable_bytes;
    stats->period = policy->period;
    stats->now = policy->now;
    stats->planned_streamed_bytes = policy->planned_streamed_bytes;
    stats->planned_partial_id = policy->partial_id;
    stats->planned_partial_bytes = policy->partial_bytes;
    stats->planned_keeps_largest = policy->keeps_largest && policy->planned_streamed_bytes > 0;
    stats->planned_piece_bytes = policy->in_pieces && policy->planned_streamed_bytes > 0 ? policy->piece : 0;
    stats->planned_filler_bytes = stats->planned_piece_bytes != 0 ? policy->filler : 0;
    stats->planned_pieces_refused = policy->pieces_refused;
    stats->planned_floor = policy->planned_streamed_bytes > 0 ? policy->floor : 0;
    stats->planned_coarser_floor = policy->planned_streamed_bytes > 0 ? policy->coarser_floor : 0;
    stats->plan_builds = policy->plan_builds;
    memcpy(stats->plan_builds_for, policy->plan_builds_for, sizeof stats->plan_builds_for);
}

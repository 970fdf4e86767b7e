/*
 * policy.c: eviction and prefetch decisions for vramshim.
 * Main entry points: `vs_policy_access` (learn), `vs_policy_victims` (evict),
 * `vs_policy_prefetch` (restore ahead of use); what they share with plan.c
 * and predict_kind.c is in policy_internal.h.
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
 * evenly over the cycle, and evicts what the plan streams first (plan.c).
 * The `predict` kind's prefetch is in predict_kind.c.
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
#include "policy_internal.h"

#include "heap.h"
#include "predict.h"
#include "schedule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>


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

vs_policy_alloc_t *vs_policy_find_alloc(const vs_policy_t *policy, uint64_t id)
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
void vs_policy_predict_rekey(vs_policy_t *policy, vs_policy_alloc_t *a)
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
void vs_policy_requeue(vs_policy_t *policy, vs_policy_alloc_t *a)
{
    dequeue(policy, a);
    vs_policy_predict_rekey(policy, a);
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
            vs_policy_requeue(policy, a);
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
    if (vs_policy_find_alloc(policy, id))
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
    vs_policy_requeue(policy, a);
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
    vs_policy_alloc_t *a = vs_policy_find_alloc(policy, id);
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
    vs_policy_alloc_t *a = vs_policy_find_alloc(policy, id);
    if (!a)
        return -ENOENT;
    account(policy, a, -1);
    a->evictable = evictable;
    account(policy, a, +1);
    vs_policy_requeue(policy, a);
    return 0;
}

int vs_policy_set_resident(vs_policy_t *policy, uint64_t id, bool resident)
{
    vs_policy_alloc_t *a = vs_policy_find_alloc(policy, id);
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
    vs_policy_requeue(policy, a);
    return 0;
}

void vs_policy_elapsed(vs_policy_t *policy, uint64_t ns)
{
    policy->elapsed_ns += ns;
}

int vs_policy_access(vs_policy_t *policy, uint64_t id, uint64_t seq, vs_policy_rw_t rw)
{
    vs_policy_alloc_t *a = vs_policy_find_alloc(policy, id);
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
    vs_policy_requeue(policy, a);
    return 0;
}

int vs_policy_scratch_push(vs_policy_t *policy, vs_policy_alloc_t *a)
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
        int rc = vs_policy_scratch_push(policy, a);
        if (rc < 0)
            return rc;
        vs_heap_pop(heap);
        if (!victim_take(q, a))
            break;
    }
    return 0;
}

void vs_policy_scratch_restore(vs_policy_t *policy, vs_heap_t *heap, size_t base)
{
    for (size_t i = base; i < policy->scratch_len; i++)
        (void)vs_heap_push(heap, policy->scratch[i]);
    policy->scratch_len = base;
}

int vs_policy_victims(vs_policy_t *policy, uint64_t need, const uint64_t *protect,
                      size_t n_protect, uint64_t *victims, size_t cap, size_t *n_victims)
{
    *n_victims = 0;
    if (need == 0)
        return 0;
    policy->stamp++;
    for (size_t i = 0; i < n_protect; i++) {
        vs_policy_alloc_t *a = vs_policy_find_alloc(policy, protect[i]);
        if (a)
            a->protect_mark = policy->stamp;
    }
    vs_policy_plan_refresh(policy);
    if (policy->pred)
        vs_policy_predict_refresh(policy);
    victim_query_t q = {policy, need, 0, victims, cap, 0, 0};
    int rc = 0;
    policy->scratch_len = 0;
    if (policy->kind == VS_POLICY_CYCLIC) { /* `predict` ranks the dead first in `evict` */
        rc = victims_from(&q, &policy->dead, true);
        vs_policy_scratch_restore(policy, &policy->dead, 0);
    }
    if (rc == 0) {
        rc = victims_from(&q, &policy->evict, false);
        vs_policy_scratch_restore(policy, &policy->evict, 0);
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
        return vs_policy_predict_prefetch(policy, budget, ids, cap, n_ids);
    vs_policy_plan_refresh(policy);
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
        rc = vs_policy_scratch_push(policy, a);
        if (rc < 0)
            break;
        vs_heap_pop(&policy->next);
        ids[(*n_ids)++] = a->id;
        left -= a->size;
    }
    vs_policy_scratch_restore(policy, &policy->next, 0);
    return rc;
}

int vs_policy_predict(const vs_policy_t *policy, uint64_t id, uint64_t *next_use)
{
    const vs_policy_alloc_t *a = vs_policy_find_alloc(policy, id);
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

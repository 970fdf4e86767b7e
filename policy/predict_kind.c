/*
 * predict_kind.c: the `predict` kind's prefetch, in the order of the
 * predicted accesses (predict.h) with the scheduler's rules (schedule.h):
 * which missing allocation may take the room of the victim the caller takes
 * next (forestall), and the refresh of every candidate's key. docs/policy.md,
 * "The predict kind", describes it.
 */
#include "policy_internal.h"

#include <errno.h>

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
        vs_policy_alloc_t *w = vs_policy_find_alloc(policy, policy->ahead[k].id);
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
int vs_policy_predict_prefetch(vs_policy_t *policy, uint64_t budget, uint64_t *ids, size_t cap, size_t *n_ids)
{
    size_t n = 0;
    vs_predict_next(policy->pred, policy->ahead, VS_POLICY_PREDICT_AHEAD, &n);
    uint64_t considered = ++policy->stamp;
    uint64_t left = budget;
    int rc = 0;
    policy->scratch_len = 0;
    for (size_t s = 0; s < n && *n_ids < cap; s++) {
        vs_policy_alloc_t *a = vs_policy_find_alloc(policy, policy->ahead[s].id);
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
            rc = vs_policy_scratch_push(policy, v);
            if (rc < 0)
                break;
            vs_heap_pop(&policy->evict);
        }
        ids[(*n_ids)++] = a->id;
        left -= a->size;
    }
    vs_policy_scratch_restore(policy, &policy->evict, 0);
    return rc;
}

/* The `predict` kind: every candidate's key afresh, once a quarter as many
 * accesses as there are candidates went by since the last time (O(log n)
 * per access amortised). A key otherwise dates from the allocation's last
 * use, and the predictor may have learned since (a phase's period found, a
 * router's choice cooling). */




void vs_policy_predict_refresh(vs_policy_t *policy)
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
        if (vs_policy_scratch_push(policy, a) < 0) {
            (void)vs_heap_push(&policy->evict, a);
            break;
        }
    }
    for (size_t i = 0; i < policy->scratch_len; i++) {
        vs_policy_predict_rekey(policy, policy->scratch[i]);
        (void)vs_heap_push(&policy->evict, policy->scratch[i]);
    }
    policy->scratch_len = 0;
}

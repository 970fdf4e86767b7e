/*
 * plan.c: the `cyclic` kind's plan. Given a budget (`vs_policy_set_budget`),
 * it fixes which allocations of the learned cycle stay resident between
 * their uses and which are streamed, spread evenly over the cycle; victims
 * then come from the streamed ones first (policy.c). docs/policy.md, "The
 * plan", describes it.
 */
#include "policy_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
        vs_policy_requeue(policy, a);
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
void vs_policy_plan_refresh(vs_policy_t *policy)
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
    const vs_policy_alloc_t *a = vs_policy_find_alloc(policy, id);
    return a != NULL && !a->streamed && policy->planned_streamed_bytes > 0 && a->hist_len >= 2;
}


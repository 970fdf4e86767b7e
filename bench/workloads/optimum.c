/*
 * optimum.c: Belady's MIN with write-back, and the best fixed resident set,
 * over an access trace (optimum.h). Main entry points: `vs_optimum_min`,
 * `vs_optimum_fixed_set`.
 *
 * The trace is resolved once into instances (an allocation from its `A`
 * line to its `F` line: an id may come back after a free) and, for every
 * use, the `seq` of the same instance's next use. One simulator then walks
 * the events under an eviction rule: farthest next use (MIN) or least
 * recent use (the room a fixed set leaves), with some instances pinned.
 * Victims are found by a scan of the instances: the suite's traces hold
 * hundreds of them, and the simplicity keeps the reference easy to check.
 */
#include "optimum.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NEVER UINT64_MAX

typedef struct instance_s {
    uint64_t id;
    uint64_t size;
    uint64_t first_use;  /* seq, or NEVER */
    uint64_t window_uses; /* operations of the window that use it */
    bool evictable;
} instance_t;

typedef struct resolved_s {
    const vs_trace_event_t *ev;
    size_t n;
    instance_t *inst;
    size_t inst_count;
    size_t *of_event;   /* per event: its instance (A, F, U); unused for R */
    uint64_t *next_use; /* per U event: the seq of the instance's next use */
} resolved_t;

typedef enum rule_e { RULE_FARTHEST, RULE_LEAST_RECENT } rule_t;

typedef struct state_s {
    bool alive, resident, content, dirty, pinned;
    uint64_t next_use;
    uint64_t last_use; /* serial of the last operation that used it */
    uint64_t mark;     /* the operation under way uses it */
} state_t;

static void resolved_fini(resolved_t *r)
{
    free(r->inst);
    free(r->of_event);
    free(r->next_use);
    memset(r, 0, sizeof(*r));
}

/* The live instance of `id`, or -1. Latest first: ids are often reused. */
static long live_find(const resolved_t *r, const bool *live, uint64_t id)
{
    for (size_t i = r->inst_count; i-- > 0;) {
        if (live[i] && r->inst[i].id == id)
            return (long)i;
    }
    return -1;
}

static int resolve(const vs_trace_event_t *ev, size_t n, vs_optimum_window_t window, resolved_t *r)
{
    memset(r, 0, sizeof(*r));
    r->ev = ev;
    r->n = n;
    size_t allocs = 0;
    for (size_t k = 0; k < n; k++)
        allocs += ev[k].kind == VS_TRACE_ALLOC;
    r->inst = calloc(allocs ? allocs : 1, sizeof(*r->inst));
    r->of_event = calloc(n ? n : 1, sizeof(*r->of_event));
    r->next_use = calloc(n ? n : 1, sizeof(*r->next_use));
    bool *live = calloc(allocs ? allocs : 1, sizeof(*live));
    uint64_t *upcoming = NULL;
    int rc = -ENOMEM;
    if (!r->inst || !r->of_event || !r->next_use || !live)
        goto out;

    /* Forwards: instances, and the checks of the format's order. */
    rc = -EINVAL;
    uint64_t last_seq = 0;
    bool any_use = false;
    for (size_t k = 0; k < n; k++) {
        const vs_trace_event_t *e = &ev[k];
        long i;
        switch (e->kind) {
        case VS_TRACE_ALLOC:
            if (live_find(r, live, e->id) >= 0)
                goto out;
            i = (long)r->inst_count++;
            r->inst[i] = (instance_t){.id = e->id, .size = e->size, .first_use = NEVER, .evictable = e->evictable};
            live[i] = true;
            break;
        case VS_TRACE_FREE:
            if ((i = live_find(r, live, e->id)) < 0)
                goto out;
            live[i] = false;
            break;
        case VS_TRACE_USE:
            if ((i = live_find(r, live, e->id)) < 0)
                goto out;
            /* One operation's uses are consecutive; seq only grows. */
            if (any_use && e->seq < last_seq)
                goto out;
            if (any_use && e->seq == last_seq && (k == 0 || ev[k - 1].kind != VS_TRACE_USE))
                goto out;
            bool same_op = any_use && e->seq == last_seq;
            any_use = true;
            last_seq = e->seq;
            if (e->seq >= window.seq_from && e->seq < window.seq_to) {
                /* Counted once per operation that uses it. */
                bool seen = false;
                for (size_t j = k; same_op && j-- > 0 && ev[j].kind == VS_TRACE_USE && ev[j].seq == e->seq;)
                    seen |= r->of_event[j] == (size_t)i;
                r->inst[i].window_uses += !seen;
            }
            break;
        default:
            continue;
        }
        r->of_event[k] = (size_t)i;
    }

    /* Backwards: each use's next use, each instance's first. `upcoming`:
     * the nearest use at or after the point; `after`: the one after it (an
     * operation may name an allocation twice). */
    rc = -ENOMEM;
    size_t count = r->inst_count ? r->inst_count : 1;
    upcoming = malloc(2 * count * sizeof(*upcoming));
    if (!upcoming)
        goto out;
    uint64_t *after = upcoming + count;
    for (size_t i = 0; i < count; i++)
        upcoming[i] = after[i] = NEVER;
    for (size_t k = n; k-- > 0;) {
        size_t i = r->of_event[k];
        if (ev[k].kind == VS_TRACE_ALLOC) {
            r->inst[i].first_use = upcoming[i];
        } else if (ev[k].kind == VS_TRACE_USE) {
            if (upcoming[i] != ev[k].seq) {
                after[i] = upcoming[i];
                upcoming[i] = ev[k].seq;
            }
            r->next_use[k] = after[i];
        }
    }
    rc = 0;
out:
    free(live);
    free(upcoming);
    if (rc != 0)
        resolved_fini(r);
    return rc;
}

/* The resident allocation to evict under `rule`, not used by the operation
 * under way (`mark`), nor pinned; -1 when there is none. */
static long victim_find(const resolved_t *r, const state_t *st, rule_t rule, uint64_t mark)
{
    long best = -1;
    for (size_t i = 0; i < r->inst_count; i++) {
        const state_t *s = &st[i];
        if (!s->alive || !s->resident || s->pinned || s->mark == mark || !r->inst[i].evictable)
            continue;
        if (best < 0) {
            best = (long)i;
            continue;
        }
        const state_t *b = &st[best];
        bool better;
        if (rule == RULE_LEAST_RECENT)
            better = s->last_use < b->last_use;
        else if (s->next_use != b->next_use)
            better = s->next_use > b->next_use;
        else if (s->dirty != b->dirty)
            better = !s->dirty;
        else
            better = r->inst[i].size > r->inst[best].size;
        if (better)
            best = (long)i;
    }
    return best;
}

typedef struct sim_s {
    const resolved_t *r;
    state_t *st;
    rule_t rule;
    uint64_t capacity;
    uint64_t resident_bytes;
    bool counting;
    vs_optimum_cost_t cost;
} sim_t;

/* Evicts until `need` more bytes fit. */
static int make_room(sim_t *s, uint64_t need, uint64_t mark)
{
    while (s->resident_bytes + need > s->capacity) {
        long v = victim_find(s->r, s->st, s->rule, mark);
        if (v < 0)
            return -ENOSPC;
        state_t *st = &s->st[v];
        uint64_t size = s->r->inst[v].size;
        if (st->dirty && s->counting) {
            s->cost.out += size;
            s->cost.writebacks++;
        }
        st->dirty = false;
        st->resident = false;
        s->resident_bytes -= size;
    }
    return 0;
}

/* Walks the whole trace; `pinned` (NULL: none) marks instances that are
 * never evicted once resident. */
static int simulate(const resolved_t *r, uint64_t capacity, vs_optimum_window_t window, rule_t rule,
                    const bool *pinned, vs_optimum_cost_t *cost)
{
    state_t *st = calloc(r->inst_count ? r->inst_count : 1, sizeof(*st));
    if (!st)
        return -ENOMEM;
    sim_t s = {.r = r, .st = st, .rule = rule, .capacity = capacity};
    const vs_trace_event_t *ev = r->ev;
    uint64_t serial = 0;
    int rc = 0;
    for (size_t k = 0; k < r->n && rc == 0;) {
        size_t i = r->of_event[k];
        const instance_t *in = &r->inst[i];
        switch (ev[k].kind) {
        case VS_TRACE_ALLOC:
            st[i] = (state_t){.alive = true, .next_use = in->first_use, .pinned = pinned && pinned[i]};
            if (!in->evictable) {
                if ((rc = make_room(&s, in->size, NEVER)) != 0)
                    break;
                st[i].resident = true;
                s.resident_bytes += in->size;
            }
            k++;
            break;
        case VS_TRACE_FREE:
            if (st[i].resident)
                s.resident_bytes -= in->size;
            st[i].alive = st[i].resident = false;
            k++;
            break;
        case VS_TRACE_USE: {
            uint64_t seq = ev[k].seq, mark = ++serial, need = 0;
            size_t end = k;
            while (end < r->n && ev[end].kind == VS_TRACE_USE && ev[end].seq == seq)
                end++;
            s.counting = seq >= window.seq_from && seq < window.seq_to;
            for (size_t j = k; j < end; j++) {
                state_t *o = &st[r->of_event[j]];
                if (!o->resident && o->mark != mark)
                    need += r->inst[r->of_event[j]].size;
                o->mark = mark;
            }
            if ((rc = make_room(&s, need, mark)) != 0)
                break;
            for (size_t j = k; j < end; j++) {
                size_t o = r->of_event[j];
                if (!st[o].resident) {
                    if (st[o].content && s.counting) {
                        s.cost.in += r->inst[o].size;
                        s.cost.restores++;
                    }
                    st[o].resident = true;
                    s.resident_bytes += r->inst[o].size;
                }
                st[o].next_use = r->next_use[j];
                st[o].last_use = mark;
                if (ev[j].rw != VS_TRACE_READ)
                    st[o].content = st[o].dirty = true;
            }
            k = end;
            break;
        }
        default:
            k++;
            break;
        }
    }
    free(st);
    if (rc == 0)
        *cost = s.cost;
    return rc;
}

int vs_optimum_min(const vs_trace_event_t *ev, size_t n, uint64_t capacity, vs_optimum_window_t window,
                   vs_optimum_cost_t *cost)
{
    resolved_t r;
    int rc = resolve(ev, n, window, &r);
    if (rc != 0)
        return rc;
    rc = simulate(&r, capacity, window, RULE_FARTHEST, NULL, cost);
    resolved_fini(&r);
    return rc;
}

/* Whether instance a ranks before b: more uses in the window, then
 * larger, then older. */
static bool ranks_before(const resolved_t *r, size_t a, size_t b)
{
    const instance_t *x = &r->inst[a], *y = &r->inst[b];
    if (x->window_uses != y->window_uses)
        return x->window_uses > y->window_uses;
    if (x->size != y->size)
        return x->size > y->size;
    return a < b;
}

int vs_optimum_fixed_set(const vs_trace_event_t *ev, size_t n, uint64_t capacity, vs_optimum_window_t window,
                         vs_optimum_cost_t *cost, size_t *members)
{
    resolved_t r;
    int rc = resolve(ev, n, window, &r);
    if (rc != 0)
        return rc;
    size_t count = r.inst_count ? r.inst_count : 1, ranked_count = 0;
    size_t *ranked = malloc(count * sizeof(*ranked));
    bool *pinned = calloc(count, sizeof(*pinned));
    rc = -ENOMEM;
    if (!ranked || !pinned)
        goto out;
    for (size_t i = 0; i < r.inst_count; i++) {
        if (r.inst[i].evictable && r.inst[i].window_uses > 0)
            ranked[ranked_count++] = i;
    }
    /* Insertion sort: the candidates are few (experts, layers). */
    for (size_t k = 1; k < ranked_count; k++) {
        size_t v = ranked[k], j = k;
        for (; j > 0 && ranks_before(&r, v, ranked[j - 1]); j--)
            ranked[j] = ranked[j - 1];
        ranked[j] = v;
    }
    bool found = false;
    vs_optimum_cost_t best = {0};
    size_t best_members = 0;
    rc = 0;
    for (size_t k = 0; k <= ranked_count; k++) {
        if (k > 0)
            pinned[ranked[k - 1]] = true;
        vs_optimum_cost_t c;
        int one = simulate(&r, capacity, window, RULE_LEAST_RECENT, pinned, &c);
        if (one == -ENOSPC)
            continue;
        if (one != 0) {
            rc = one;
            goto out;
        }
        if (!found || c.in + c.out < best.in + best.out) {
            best = c;
            best_members = k;
            found = true;
        }
    }
    if (!found) {
        rc = -ENOSPC;
        goto out;
    }
    *cost = best;
    if (members)
        *members = best_members;
out:
    free(ranked);
    free(pinned);
    resolved_fini(&r);
    return rc;
}

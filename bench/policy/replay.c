/*
 * replay.c: the offline simulator behind the policy benchmark.
 * Main entry point: `vs_bench_replay`.
 *
 * The model is the shim's: an allocation is created without contents; the
 * operation that first uses it makes it resident without a copy; a write
 * (or a use whose direction is unknown) makes it dirty. Evicting a dirty
 * allocation copies it to the host (D2H) and keeps that copy, so evicting
 * it again while clean costs nothing; bringing back an allocation with
 * contents copies it in (H2D). Before each operation, everything it uses is
 * made resident; room is made by asking the eviction order for victims while
 * the operation's own allocations are protected. The planned order gets the
 * budget the shim gives the policy when it prefetches.
 *
 * The offline reference every figure is held against is
 * bench/workloads/optimum.h's (`vs_bench_optimum`): Belady's MIN with
 * write-back, or the best fixed resident set. The `belady` order here
 * replays the farthest-next-use rule only to draw its SVG panel (a
 * timeline the optimum does not record).
 */
#include "replay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "heap.h"
#include "optimum.h"
#include "policy.h"

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) (add_failed = true)
#include <uthash.h>

#define NEVER UINT64_MAX

typedef struct obj_s {
    uint64_t id;
    uint64_t size;
    uint64_t next_use; /* Belady only */
    uint64_t serial;
    uint64_t protect_mark;
    size_t pos;
    bool evictable;
    bool resident;
    bool content;   /* has been written: its bytes matter */
    bool dirty;     /* the device copy is newer than the host's */
    bool host_copy; /* the host holds a copy */
    uint64_t last_use;
    UT_hash_handle hh;
} obj_t;

typedef struct upcoming_s {
    uint64_t id;
    uint64_t seq;  /* next use at or after the current point */
    uint64_t next; /* the use after `seq` */
    UT_hash_handle hh;
} upcoming_t;

typedef struct replay_s {
    const vs_bench_trace_t *t;
    vs_bench_order_t order;
    uint64_t limit;
    uint64_t largest; /* evictable allocation seen so far */
    obj_t *objs;
    vs_policy_t *policy;
    vs_heap_t farthest;
    uint64_t *next_after; /* per event: the next use after it (USE), the first use (ALLOC) */
    uint64_t *victims;
    size_t victims_cap;
    uint64_t resident_bytes;
    uint64_t host_bytes;      /* evicted allocations whose contents the host holds */
    uint64_t host_copy_bytes; /* every host copy, resident or not */
    uint64_t serial;
    uint64_t stamp;
    uint64_t last_time;   /* the previous operation's time, for `vs_policy_elapsed` */
    vs_bench_result_t *res;
    /* Bytes and counts go to `res` only from the trace's `measure_from`
     * on; before it, to `warmup` (the learning passes). */
    vs_bench_result_t warmup;
    vs_bench_result_t *count;
} replay_t;

static bool farthest_before(const void *x, const void *y)
{
    const obj_t *a = x, *b = y;
    if (a->next_use != b->next_use)
        return a->next_use > b->next_use;
    return a->serial < b->serial;
}

/* Walks the trace backwards once to learn, for every use, when the same
 * allocation is used next; ids reused after a free start afresh. */
static int compute_next_uses(replay_t *r)
{
    const vs_bench_trace_t *t = r->t;
    upcoming_t *map = NULL, *u, *tmp;
    int rc = 0;
    r->next_after = calloc(t->len ? t->len : 1, sizeof(uint64_t));
    if (!r->next_after)
        return -ENOMEM;
    for (size_t k = t->len; k-- > 0;) {
        const vs_trace_event_t *ev = &t->ev[k];
        if (ev->kind == VS_TRACE_RESIDENCY)
            continue;
        HASH_FIND(hh, map, &ev->id, sizeof(ev->id), u);
        if (!u) {
            bool add_failed = false;
            u = calloc(1, sizeof(*u));
            if (!u) {
                rc = -ENOMEM;
                break;
            }
            u->id = ev->id;
            u->seq = u->next = NEVER;
            HASH_ADD(hh, map, id, sizeof(u->id), u);
            if (add_failed) {
                free(u);
                rc = -ENOMEM;
                break;
            }
        }
        switch (ev->kind) {
        case VS_TRACE_USE:
            if (u->seq != ev->seq) {
                u->next = u->seq;
                u->seq = ev->seq;
            }
            r->next_after[k] = u->next;
            break;
        case VS_TRACE_ALLOC:
            r->next_after[k] = u->seq;
            u->seq = u->next = NEVER;
            break;
        case VS_TRACE_FREE:
            u->seq = u->next = NEVER;
            break;
        default:
            break;
        }
    }
    HASH_ITER(hh, map, u, tmp) {
        HASH_DEL(map, u);
        free(u);
    }
    return rc;
}

static obj_t *find(const replay_t *r, uint64_t id)
{
    obj_t *o = NULL;
    HASH_FIND(hh, r->objs, &id, sizeof(id), o);
    return o;
}

static void evict(replay_t *r, obj_t *o)
{
    o->resident = false;
    r->resident_bytes -= o->size;
    r->count->evictions++;
    if (o->dirty) {
        r->count->d2h += o->size;
        o->dirty = false;
    }
    if (o->content && !o->host_copy) {
        o->host_copy = true;
        r->host_copy_bytes += o->size;
    }
    if (o->host_copy)
        r->host_bytes += o->size;
    vs_heap_remove(&r->farthest, o);
    if (r->policy)
        (void)vs_policy_set_resident(r->policy, o->id, false);
}

static int make_room(replay_t *r, uint64_t need, const uint64_t *protect, size_t n_protect)
{
    if (need == 0)
        return 0;
    if (r->order != VS_BENCH_BELADY) {
        /* As the shim with prefetch: the cycle may keep the limit less
         * room for two of the largest allocation (one arriving while the
         * one before is used). */
        if (r->order == VS_BENCH_PLANNED)
            vs_policy_set_budget(r->policy, r->limit > 2 * r->largest ? r->limit - 2 * r->largest : 0);
        size_t nv = 0;
        int rc = vs_policy_victims(r->policy, need, protect, n_protect, r->victims,
                                   r->victims_cap, &nv);
        if (rc < 0)
            return rc == -ENOMEM ? rc : -EINVAL;
        for (size_t v = 0; v < nv; v++) {
            obj_t *o = find(r, r->victims[v]);
            if (!o || !o->resident || !o->evictable)
                return -EINVAL; /* the policy broke its contract */
            evict(r, o);
        }
        return 0;
    }
    r->stamp++;
    for (size_t i = 0; i < n_protect; i++) {
        obj_t *o = find(r, protect[i]);
        if (o)
            o->protect_mark = r->stamp;
    }
    size_t aside = 0;
    uint64_t freed = 0;
    int rc = 0;
    while (freed < need) {
        obj_t *o = vs_heap_pop(&r->farthest);
        if (!o) {
            rc = -EINVAL;
            break;
        }
        if (o->protect_mark == r->stamp) {
            r->victims[aside++] = o->id; /* reuse the array to remember them */
            continue;
        }
        freed += o->size;
        evict(r, o);
    }
    for (size_t i = 0; i < aside; i++)
        (void)vs_heap_push(&r->farthest, find(r, r->victims[i]));
    return rc;
}

static void sample(replay_t *r, const vs_trace_event_t *first_use)
{
    vs_bench_result_t *res = r->res;
    if (res->timeline) {
        vs_bench_sample_t *s = &res->timeline[res->ops];
        s->seq = first_use->seq;
        s->time_ns = first_use->time_ns;
        s->device_bytes = r->resident_bytes;
        s->host_bytes = r->host_bytes;
        s->disk_bytes = 0;
        s->host_copy_bytes = r->host_copy_bytes;
        s->h2d = res->h2d;
        s->d2h = res->d2h;
        s->restores = res->restores;
        s->evictions = res->evictions;
    }
    res->ops++;
}

static int make_resident(replay_t *r, obj_t *o, const uint64_t *protect, size_t n_protect)
{
    uint64_t need = r->resident_bytes + o->size > r->limit ? r->resident_bytes + o->size - r->limit
                                                           : 0;
    int rc = make_room(r, need, protect, n_protect);
    if (rc < 0)
        return rc;
    o->resident = true;
    r->resident_bytes += o->size;
    if (o->host_copy)
        r->host_bytes -= o->size;
    if (o->content) {
        r->count->h2d += o->size;
        r->count->restores++;
    }
    if (o->evictable && r->order == VS_BENCH_BELADY)
        (void)vs_heap_push(&r->farthest, o);
    if (r->policy)
        (void)vs_policy_set_resident(r->policy, o->id, true);
    return 0;
}

static int do_alloc(replay_t *r, size_t k)
{
    const vs_trace_event_t *ev = &r->t->ev[k];
    if (find(r, ev->id))
        return -EINVAL;
    obj_t *o = calloc(1, sizeof(*o));
    if (!o)
        return -ENOMEM;
    o->id = ev->id;
    o->size = ev->size;
    o->evictable = ev->evictable;
    if (o->evictable && ev->size > r->largest)
        r->largest = ev->size;
    o->serial = r->serial++;
    o->next_use = r->next_after[k];
    o->pos = VS_HEAP_ABSENT;
    bool add_failed = false;
    HASH_ADD(hh, r->objs, id, sizeof(o->id), o);
    if (add_failed) {
        free(o);
        return -ENOMEM;
    }
    if (r->order == VS_BENCH_BELADY && vs_heap_reserve(&r->farthest, HASH_COUNT(r->objs)) < 0)
        return -ENOMEM;
    if (r->policy) {
        int rc = vs_policy_alloc(r->policy, o->id, o->size, o->evictable, false);
        if (rc < 0)
            return rc;
    }
    /* Memory nobody may evict is on the device from the start. */
    return o->evictable ? 0 : make_resident(r, o, NULL, 0);
}

static int do_free(replay_t *r, uint64_t id)
{
    obj_t *o = find(r, id);
    if (!o)
        return -EINVAL;
    if (o->resident)
        r->resident_bytes -= o->size;
    if (o->host_copy)
        r->host_copy_bytes -= o->size;
    if (o->host_copy && !o->resident)
        r->host_bytes -= o->size;
    vs_heap_remove(&r->farthest, o);
    if (r->policy)
        (void)vs_policy_free(r->policy, id);
    HASH_DEL(r->objs, o);
    free(o);
    return 0;
}

/* Events [k, end) are the uses of one operation. */
static int do_op(replay_t *r, size_t k, size_t end)
{
    const vs_trace_event_t *ev = r->t->ev;
    uint64_t seq = ev[k].seq;
    size_t n = 0;
    bool measured = seq >= r->t->measure_from && (r->t->measure_to == 0 || seq < r->t->measure_to);
    r->count = measured ? r->res : &r->warmup;
    if (r->policy && ev[k].time_ns > r->last_time) {
        vs_policy_elapsed(r->policy, ev[k].time_ns - r->last_time);
        r->last_time = ev[k].time_ns;
    }
    for (size_t i = k; i < end; i++) {
        obj_t *o = find(r, ev[i].id);
        if (!o)
            return -EINVAL;
        o->last_use = seq;
        if (r->policy) {
            vs_policy_rw_t rw = ev[i].rw == VS_TRACE_READ    ? VS_POLICY_RW_READ
                                : ev[i].rw == VS_TRACE_WRITE ? VS_POLICY_RW_WRITE
                                                             : VS_POLICY_RW_UNKNOWN;
            int rc = vs_policy_access(r->policy, o->id, seq, rw);
            if (rc < 0)
                return rc;
        }
        if (r->order == VS_BENCH_BELADY && o->next_use != r->next_after[i]) {
            bool queued = vs_heap_contains(&r->farthest, o);
            vs_heap_remove(&r->farthest, o);
            o->next_use = r->next_after[i];
            if (queued)
                (void)vs_heap_push(&r->farthest, o);
        }
        n++;
    }
    /* The operation's ids, protected while its missing allocations come in.
     * They sit after the victims' working room in the same array. */
    uint64_t *protect = malloc(n * sizeof(*protect));
    if (!protect)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        protect[i] = ev[k + i].id;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        obj_t *o = find(r, protect[i]);
        if (!o->resident)
            rc = make_resident(r, o, protect, n);
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (ev[k + i].rw != VS_TRACE_READ) {
            obj_t *o = find(r, protect[i]);
            o->content = true;
            o->dirty = true;
        }
    }
    free(protect);
    if (rc == 0)
        sample(r, &ev[k]);
    return rc;
}

static size_t count_ops(const vs_bench_trace_t *t)
{
    size_t ops = 0;
    for (size_t k = 0; k < t->len; k++)
        if (t->ev[k].kind == VS_TRACE_USE && (k == 0 || t->ev[k - 1].kind != VS_TRACE_USE ||
                                             t->ev[k - 1].seq != t->ev[k].seq))
            ops++;
    return ops;
}

static int replay_run(const vs_bench_trace_t *t, vs_bench_order_t order, uint64_t limit, bool want_timeline,
                      vs_bench_result_t *res);

int vs_bench_replay(const vs_bench_trace_t *t, vs_bench_order_t order, uint64_t limit,
                    bool want_timeline, vs_bench_result_t *res)
{
    return replay_run(t, order, limit, want_timeline, res);
}

int vs_bench_optimum(const vs_bench_trace_t *t, uint64_t limit, bool fixed_set, vs_bench_result_t *res)
{
    vs_optimum_window_t all = {.seq_from = t->measure_from, .seq_to = t->measure_to ? t->measure_to : UINT64_MAX};
    vs_optimum_cost_t cost;
    memset(res, 0, sizeof(*res));
    int rc = fixed_set ? vs_optimum_fixed_set(t->ev, t->len, limit, all, &cost, NULL)
                       : vs_optimum_min(t->ev, t->len, limit, all, &cost);
    if (rc < 0)
        return rc == -ENOSPC ? -EINVAL : rc;
    res->h2d = cost.in;
    res->d2h = cost.out;
    res->restores = cost.restores;
    res->ops = count_ops(t);
    return 0;
}

static int replay_run(const vs_bench_trace_t *t, vs_bench_order_t order, uint64_t limit, bool want_timeline,
                      vs_bench_result_t *res)
{
    replay_t r = {.t = t, .order = order, .limit = limit, .res = res};
    memset(res, 0, sizeof(*res));
    r.count = t->measure_from ? &r.warmup : res;
    vs_heap_init(&r.farthest, offsetof(obj_t, pos), farthest_before);
    int rc = compute_next_uses(&r);
    if (rc < 0)
        goto out;
    r.victims_cap = t->len ? t->len : 1;
    r.victims = calloc(r.victims_cap, sizeof(*r.victims));
    if (!r.victims) {
        rc = -ENOMEM;
        goto out;
    }
    if (want_timeline) {
        res->timeline = calloc(count_ops(t) + 1, sizeof(*res->timeline));
        if (!res->timeline) {
            rc = -ENOMEM;
            goto out;
        }
    }
    if (order != VS_BENCH_BELADY) {
        vs_policy_kind_t kind = order == VS_BENCH_LRU       ? VS_POLICY_LRU
                                : order == VS_BENCH_PREDICT ? VS_POLICY_PREDICT
                                                            : VS_POLICY_CYCLIC;
        rc = vs_policy_create(kind, &r.policy);
        if (rc < 0)
            goto out;
    }
    for (size_t k = 0; k < t->len && rc == 0;) {
        const vs_trace_event_t *ev = &t->ev[k];
        if (ev->kind == VS_TRACE_USE) {
            size_t end = k + 1;
            while (end < t->len && t->ev[end].kind == VS_TRACE_USE && t->ev[end].seq == ev->seq)
                end++;
            rc = do_op(&r, k, end);
            k = end;
            continue;
        }
        if (ev->kind == VS_TRACE_ALLOC)
            rc = do_alloc(&r, k);
        else if (ev->kind == VS_TRACE_FREE)
            rc = do_free(&r, ev->id);
        k++; /* residency events record what the shim did; the replay decides anew */
    }
out:;
    obj_t *o, *tmp;
    vs_heap_fini(&r.farthest);
    HASH_ITER(hh, r.objs, o, tmp) {
        HASH_DEL(r.objs, o);
        free(o);
    }
    vs_policy_destroy(r.policy);
    free(r.victims);
    free(r.next_after);
    return rc;
}

uint64_t vs_bench_peak_bytes(const vs_bench_trace_t *t)
{
    /* Sizes are looked up by id on free; the trace is small enough for a
     * hash of its live set. */
    upcoming_t *map = NULL, *u, *tmp;
    uint64_t live = 0, peak = 0;
    for (size_t k = 0; k < t->len; k++) {
        const vs_trace_event_t *ev = &t->ev[k];
        if (ev->kind == VS_TRACE_ALLOC) {
            bool add_failed = false;
            u = calloc(1, sizeof(*u));
            if (!u)
                break;
            u->id = ev->id;
            u->seq = ev->size;
            HASH_ADD(hh, map, id, sizeof(u->id), u);
            if (add_failed) {
                free(u);
                break;
            }
            live += ev->size;
            peak = live > peak ? live : peak;
        } else if (ev->kind == VS_TRACE_FREE) {
            HASH_FIND(hh, map, &ev->id, sizeof(ev->id), u);
            if (u) {
                live -= u->seq;
                HASH_DEL(map, u);
                free(u);
            }
        }
    }
    HASH_ITER(hh, map, u, tmp) {
        HASH_DEL(map, u);
        free(u);
    }
    return peak;
}

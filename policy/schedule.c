/*
 * schedule.c: evictions and prefetches from a predicted reference stream
 * (schedule.h). Main entry points: `vs_schedule_victims`,
 * `vs_schedule_prefetch`. O(n log n) per call in the items passed.
 */
#include "schedule.h"

#include <errno.h>
#include <stdlib.h>

typedef struct vs_schedule_rank_s {
    size_t item;
    unsigned cls;      /* 0: no use predicted, clean; 1: none, dirty; 2: used again */
    uint64_t distance; /* bytes of traffic to the next use, less the write-back's */
    uint64_t accesses;
    uint64_t last_use;
    uint64_t id;
    bool dirty;
} vs_schedule_rank_t;

/* How many times its own bytes of traffic a write-back moves a dirty
 * victim's next use nearer. More than once: the write-back is certain and
 * paid now, while the restore that evicting a clean allocation instead may
 * cost is only possible (it may be evicted again, free, before its use)
 * and later; and once written back the allocation is clean for good, so
 * the dirty ones a demand policy would keep are kept and the clean ones
 * carry the stream. */
#define VS_SCHEDULE_WRITEBACK_WEIGHT 4

/* Bytes of host-to-device traffic a write-back of `size` bytes is worth. */
static uint64_t writeback_worth(const vs_schedule_links_t *links, uint64_t size)
{
    uint64_t bytes = VS_SCHEDULE_WRITEBACK_WEIGHT * size;
    if (!links || links->h2d_bytes_per_s == 0 || links->d2h_bytes_per_s == 0)
        return bytes;
    return (uint64_t)((double)bytes * (double)links->h2d_bytes_per_s / (double)links->d2h_bytes_per_s);
}

static vs_schedule_rank_t rank_of(const vs_schedule_item_t *items, size_t i, const vs_schedule_links_t *links)
{
    const vs_schedule_item_t *it = &items[i];
    vs_schedule_rank_t r = {.item = i, .id = it->id, .accesses = it->next.accesses, .last_use = it->last_use,
                            .dirty = it->dirty};
    if (it->next.accesses == VS_PREDICT_NEVER) {
        r.cls = it->dirty ? 1 : 0;
        r.distance = VS_PREDICT_NEVER;
        return r;
    }
    r.cls = 2;
    uint64_t penalty = it->dirty ? writeback_worth(links, it->size) : 0;
    r.distance = it->next.bytes > penalty ? it->next.bytes - penalty : 0;
    return r;
}

/* Best victim first. */
static int rank_order(const void *x, const void *y)
{
    const vs_schedule_rank_t *a = x, *b = y;
    if (a->cls != b->cls)
        return a->cls < b->cls ? -1 : 1;
    if (a->distance != b->distance)
        return a->distance > b->distance ? -1 : 1;
    if (a->dirty != b->dirty) /* as far, counting the write-back: the clean one */
        return a->dirty ? 1 : -1;
    if (a->accesses != b->accesses)
        return a->accesses > b->accesses ? -1 : 1;
    if (a->last_use != b->last_use)
        return a->last_use > b->last_use ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

bool vs_schedule_evict_before(const vs_schedule_item_t *a, const vs_schedule_item_t *b,
                              const vs_schedule_links_t *links)
{
    vs_schedule_rank_t x = rank_of(a, 0, links), y = rank_of(b, 0, links);
    return rank_order(&x, &y) < 0;
}

static bool candidate(const vs_schedule_item_t *it)
{
    return it->resident && it->evictable && !it->protect;
}

/* The candidates, best victim first. Returns their count or -ENOMEM. */
static ptrdiff_t ranked(const vs_schedule_item_t *items, size_t n_items, const vs_schedule_links_t *links,
                        vs_schedule_rank_t **out)
{
    *out = malloc((n_items ? n_items : 1) * sizeof(**out));
    if (!*out)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < n_items; i++)
        if (candidate(&items[i]))
            (*out)[n++] = rank_of(items, i, links);
    qsort(*out, n, sizeof(**out), rank_order);
    return (ptrdiff_t)n;
}

int vs_schedule_victims(const vs_schedule_item_t *items, size_t n_items, const vs_schedule_links_t *links,
                        uint64_t need, size_t *order, size_t cap, size_t *n)
{
    *n = 0;
    if (need == 0)
        return 0;
    vs_schedule_rank_t *rank;
    ptrdiff_t count = ranked(items, n_items, links, &rank);
    if (count < 0)
        return (int)count;
    uint64_t freed = 0;
    int rc = -ENOSPC;
    for (ptrdiff_t k = 0; k < count; k++) {
        if (*n == cap) {
            rc = -ENOBUFS;
            break;
        }
        order[(*n)++] = rank[k].item;
        freed += items[rank[k].item].size;
        if (freed >= need) {
            rc = 0;
            break;
        }
    }
    free(rank);
    return rc;
}

typedef struct vs_schedule_byid_s {
    uint64_t id;
    size_t item;
} vs_schedule_byid_t;

static int byid_order(const void *x, const void *y)
{
    const vs_schedule_byid_t *a = x, *b = y;
    return a->id < b->id ? -1 : a->id > b->id;
}

static ptrdiff_t lookup(const vs_schedule_byid_t *byid, size_t n, uint64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (byid[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && byid[lo].id == id ? (ptrdiff_t)byid[lo].item : -1;
}

static uint64_t transfer_ns(uint64_t bytes, uint64_t bytes_per_s)
{
    return bytes_per_s ? (uint64_t)((double)bytes * 1e9 / (double)bytes_per_s) : 0;
}

int vs_schedule_prefetch(const vs_schedule_item_t *items, size_t n_items, const vs_predict_access_t *ahead,
                         size_t n_ahead, const vs_schedule_links_t *links, vs_schedule_strategy_t strategy,
                         uint64_t budget, vs_schedule_fetch_t *fetches, size_t cap, size_t *n_fetches,
                         size_t *victims, size_t victims_cap, size_t *n_victims)
{
    *n_fetches = *n_victims = 0;
    vs_schedule_rank_t *rank = NULL;
    vs_schedule_byid_t *byid = malloc((n_items ? n_items : 1) * sizeof(*byid));
    bool *seen = calloc(n_items ? n_items : 1, sizeof(*seen));
    ptrdiff_t n_rank = byid && seen ? ranked(items, n_items, links, &rank) : -ENOMEM;
    int rc = 0;
    if (n_rank < 0) {
        rc = -ENOMEM;
        goto out;
    }
    uint64_t resident = 0;
    for (size_t i = 0; i < n_items; i++) {
        byid[i] = (vs_schedule_byid_t){items[i].id, i};
        if (items[i].resident)
            resident += items[i].size;
    }
    qsort(byid, n_items, sizeof(*byid), byid_order);
    uint64_t room = budget > resident ? budget - resident : 0;
    uint64_t h2d = links ? links->h2d_bytes_per_s : 0, d2h = links ? links->d2h_bytes_per_s : 0;
    uint64_t queued_ns = 0; /* the link's work for the fetches so far */
    ptrdiff_t next_victim = 0;
    for (size_t s = 0; s < n_ahead && *n_fetches < cap; s++) {
        ptrdiff_t i = lookup(byid, n_items, ahead[s].id);
        if (i < 0 || seen[i])
            continue;
        seen[i] = true;
        const vs_schedule_item_t *it = &items[i];
        if (it->resident)
            continue;
        uint64_t use_in = s + 1; /* accesses ahead */
        uint64_t fetch_ns = transfer_ns(it->size, h2d);
        bool late = queued_ns + fetch_ns >= ahead[s].ns;
        bool may_evict_live = strategy == VS_SCHEDULE_AGGRESSIVE || (strategy == VS_SCHEDULE_FORESTALL && late);
        ptrdiff_t v = next_victim;
        uint64_t freed = 0, writeback = 0;
        while (room + freed < it->size && v < n_rank) {
            const vs_schedule_rank_t *r = &rank[v];
            bool dead = r->cls < 2;
            /* Do no harm: never evict what is used before the fetched one. */
            if (!dead && (!may_evict_live || r->accesses <= use_in))
                break;
            freed += items[r->item].size;
            if (items[r->item].dirty)
                writeback += items[r->item].size;
            v++;
        }
        if (room + freed < it->size)
            break;
        if (*n_victims + (size_t)(v - next_victim) > victims_cap)
            break;
        fetches[*n_fetches] = (vs_schedule_fetch_t){.item = (size_t)i, .first_victim = *n_victims,
                                                    .n_victims = (size_t)(v - next_victim)};
        for (ptrdiff_t k = next_victim; k < v; k++)
            victims[(*n_victims)++] = rank[k].item;
        (*n_fetches)++;
        next_victim = v;
        room = room + freed - it->size;
        uint64_t wb_ns = transfer_ns(writeback, d2h);
        queued_ns += fetch_ns > wb_ns ? fetch_ns : wb_ns;
    }
out:
    free(rank);
    free(byid);
    free(seen);
    return rc;
}

/*
 * schedule.h: evictions and prefetches from a predicted reference stream.
 *
 * Pure C, no CUDA, no I/O, no state: the caller passes what is resident,
 * the predicted next use of each allocation (predict.h) and the links, and
 * gets decisions back. A wrong prediction costs bandwidth, never
 * correctness: the caller still restores on demand whatever a use finds
 * missing.
 *
 * Evictions follow Belady's rule (the farthest next use first) with the
 * cost of a write-back counted: a dirty allocation's eviction copies it out
 * before its memory is free, so it ranks as if used sooner by four times
 * those bytes of traffic (scaled by the ratio of the links' bandwidths;
 * schedule.c says why four). A clean allocation is therefore chosen over a
 * dirty one used somewhat later, and
 * a dirty one only where it is used later by more than its write-back
 * costs. Allocations with no predicted use go first, clean before dirty.
 *
 * Prefetches follow the integrated prefetching and caching rules of Cao,
 * Felten, Karlin and Li: fetch the next missing allocation in the order of
 * predicted use, evicting only allocations whose next use is after its own
 * ("do no harm"), the farthest first. `aggressive` fetches as early as room
 * allows; `conservative` fetches only into free room or over allocations with
 * no predicted use, so that no eviction a demand policy would not make is
 * made early; `forestall` (Kimbrel and Karlin) is conservative until the
 * fetches already queued on the host-to-device link would finish after the
 * compute time left before a use, and aggressive from there on.
 */
#ifndef VS_POLICY_SCHEDULE_H
#define VS_POLICY_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "predict.h"

typedef enum vs_schedule_strategy_e {
    VS_SCHEDULE_AGGRESSIVE,
    VS_SCHEDULE_CONSERVATIVE,
    VS_SCHEDULE_FORESTALL,
} vs_schedule_strategy_t;

/* One allocation as the scheduler sees it. `next` is its predicted next
 * use (predict.h; every field VS_PREDICT_NEVER for none). */
typedef struct vs_schedule_item_s {
    uint64_t id;
    uint64_t size;
    vs_predict_distance_t next;
    /* When it was last used, in any increasing unit: among allocations with
     * no predicted use, the most recently used goes first (a first pass
     * over a loop, or a load ahead of one, as Belady would). */
    uint64_t last_use;
    bool resident;
    bool evictable;
    bool dirty;   /* the device copy is newer than the host's */
    bool protect; /* used by the current operation: never a victim */
} vs_schedule_item_t;

typedef struct vs_schedule_links_s {
    uint64_t h2d_bytes_per_s; /* 0: unknown, taken equal to the other */
    uint64_t d2h_bytes_per_s;
} vs_schedule_links_t;

/* Whether `a` is a better victim than `b` (the order `vs_schedule_victims`
 * takes them in). Only differences of distances count, so a caller keeping
 * its items in a heap may measure every `next.bytes` from one fixed origin
 * instead of from now. */
bool vs_schedule_evict_before(const vs_schedule_item_t *a, const vs_schedule_item_t *b,
                              const vs_schedule_links_t *links);

/* To free `need` bytes, which resident, evictable, unprotected items go?
 * Writes up to `cap` indices into `items`, best victim first, to `order`
 * and their count to `*n`. Returns 0, -ENOSPC (all candidates are listed
 * and not enough), -ENOBUFS (`cap` too small) or -ENOMEM. */
int vs_schedule_victims(const vs_schedule_item_t *items, size_t n_items, const vs_schedule_links_t *links,
                        uint64_t need, size_t *order, size_t cap, size_t *n);

/* A prefetch decided: bring `item` in, after evicting `victims` (indices
 * into the items) to make its room. */
typedef struct vs_schedule_fetch_s {
    size_t item;
    size_t first_victim; /* into the `victims` array passed */
    size_t n_victims;
} vs_schedule_fetch_t;

/* Prefetches for the predicted accesses `ahead` (nearest first; ids not
 * among the items, resident ones and repeats are skipped) within `budget`
 * device bytes (resident items count against it). Stops at the first
 * missing allocation that cannot be fetched, so fetches keep the predicted
 * order. Writes up to `cap` fetches and the victims they need (at most
 * `victims_cap`). Returns 0 or -ENOMEM. */
int vs_schedule_prefetch(const vs_schedule_item_t *items, size_t n_items, const vs_predict_access_t *ahead,
                         size_t n_ahead, const vs_schedule_links_t *links, vs_schedule_strategy_t strategy,
                         uint64_t budget, vs_schedule_fetch_t *fetches, size_t cap, size_t *n_fetches,
                         size_t *victims, size_t victims_cap, size_t *n_victims);

#endif

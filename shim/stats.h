/* stats.h: the shim's event counters (`VS_COUNT`) for the exit summary and
 * the snapshot, and the `VRAMSHIM_DEBUG_SNAPSHOT` file.
 *
 * Counters are per thread (each thread adds to its own block with plain
 * loads and stores: no locked instruction on the launch path) and summed
 * when read. Blocks are never freed: a thread's counts outlive it. No lock.
 */
#ifndef VS_STATS_H
#define VS_STATS_H

#include <stdatomic.h>
#include <stdint.h>

/* Event counters for the exit summary: X(name, description). */
#define VS_STATS(X)                                                                                \
    X(launches, "kernel launches seen")                                                            \
    X(launches_unscanned, "launches whose parameters could not be scanned")                        \
    X(graph_launches, "graph launches seen")                                                       \
    X(copies, "copies seen")                                                                       \
    X(memsets, "memsets seen")                                                                     \
    X(memops, "stream memory operations seen")                                                     \
    X(refused, "allocations refused by the cap")

typedef struct vs_stats_s {
#define VS_STAT_FIELD(name, description) _Atomic uint64_t name;
    VS_STATS(VS_STAT_FIELD)
#undef VS_STAT_FIELD
    struct vs_stats_s *next;
} vs_stats_t;

/* The calling thread's block (created on first use; NULL if out of memory). */
vs_stats_t *vs_stats_mine(void);

/* Totals over every thread. */
void vs_stats_sum(vs_stats_t *out);

static inline void vs_stats_bump(_Atomic uint64_t *counter)
{
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + 1, memory_order_relaxed);
}

#define VS_COUNT(name)                                                                             \
    do {                                                                                           \
        vs_stats_t *vs_mine_ = vs_stats_mine();                                                    \
        if (vs_mine_ != NULL)                                                                      \
            vs_stats_bump(&vs_mine_->name);                                                        \
    } while (0)

/* Writes the registry to `VRAMSHIM_DEBUG_SNAPSHOT` (when set): the
 * documented debugging hook tests read last-use stamps from. */
void vs_stats_debug_snapshot(void);

#endif /* VS_STATS_H */

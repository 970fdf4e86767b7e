/*
 * optimum.h: the offline references the workload suite measures the shim
 * against, computed from an access trace (policy/trace.h events): Belady's
 * MIN with write-back of dirty data, and the best fixed resident set.
 *
 * The model is the shim's (and bench/policy/replay.c's): an allocation is
 * created without contents; the operation that first uses it makes it
 * resident without a copy; a write (or a use of unknown direction) makes it
 * dirty. Evicting a dirty allocation copies it to the host (`out`) and keeps
 * that copy, so evicting it again while clean costs nothing; bringing back
 * an allocation with contents copies it in (`in`). Allocations not
 * evictable (`A <id> <size> n`) are resident from their `A` line to their
 * `F` line. Every allocation an operation uses is resident while it runs,
 * and the resident bytes never exceed the capacity.
 *
 * Only the bytes moved for the operations whose `seq` lies in the window
 * [seq_from, seq_to) are counted (a steady state after a warm-up), but the
 * whole trace is simulated, and the future is read to its end.
 *
 * Pure: no I/O, no CUDA; `vs_optimum_*` returns 0 or a negative errno.
 */
#ifndef VS_BENCH_OPTIMUM_H
#define VS_BENCH_OPTIMUM_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

typedef struct vs_optimum_cost_s {
    uint64_t in;         /* bytes restored (host to device) */
    uint64_t out;        /* bytes written back (device to host) */
    uint64_t restores;   /* allocations brought back */
    uint64_t writebacks; /* dirty evictions */
} vs_optimum_cost_t;

/* The window of operations counted: seq_from <= seq < seq_to. */
typedef struct vs_optimum_window_s {
    uint64_t seq_from;
    uint64_t seq_to;
} vs_optimum_window_t;

/* Belady's MIN with write-back: before each operation, room is made by
 * evicting the resident allocation whose next use is farthest (never used
 * again first; among equals, a clean one before a dirty one, then the
 * larger). With allocations of different sizes the exact optimum is
 * NP-hard; this is the usual reference, not a proven lower bound.
 * Returns 0, -EINVAL (a use or free of an unknown id, an allocation of a
 * live id, uses of one operation not consecutive, or seq decreasing),
 * -ENOSPC (an operation, or the allocations not evictable, do not fit in
 * `capacity`) or -ENOMEM. */
int vs_optimum_min(const vs_trace_event_t *ev, size_t n, uint64_t capacity, vs_optimum_window_t window,
                   vs_optimum_cost_t *cost);

/* The best fixed resident set, the reference for a stream without
 * repeating structure (a router's choice of experts), where no online
 * policy can know the next use: a set of evictable allocations kept
 * resident from their first use on, and the rest streamed through the room
 * left, least recently used evicted first (an online rule: the reference
 * is what a policy that knew only the frequencies could do). The
 * candidates are ranked by how often the window uses them (then by size,
 * larger first); every prefix of that ranking is tried, from the empty set
 * (plain LRU) up, and the cheapest (fewest bytes in and out) is returned,
 * with its size in `members` (may be NULL). Errors as `vs_optimum_min`;
 * -ENOSPC only when not even the empty set fits. */
int vs_optimum_fixed_set(const vs_trace_event_t *ev, size_t n, uint64_t capacity, vs_optimum_window_t window,
                         vs_optimum_cost_t *cost, size_t *members);

#endif

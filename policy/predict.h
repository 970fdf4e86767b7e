/*
 * predict.h: a predictor of the future reference stream, learned from the
 * past one.
 *
 * Pure C, no CUDA, no I/O, not thread-safe (the caller serialises calls).
 * The caller reports every access in order: which allocation, its bytes,
 * whether it writes, and the compute time measured since the access before.
 * The predictor answers, for any allocation, how far away its next use is
 * (in accesses, bytes of traffic and nanoseconds of compute), and what the
 * next K accesses will be.
 *
 * Model. The access history is a string of allocation ids. At each access
 * the predictor looks for the latest earlier point whose preceding accesses
 * match the latest ones over the longest window it can find (lengths 1, 2,
 * 4, ... up to half the history, by rolling hashes), and assumes the future
 * repeats what followed that point, period after period. A loop inside a
 * loop, several uses per period and phase changes need nothing special: the
 * longest matching context tells the second denoising step from the last
 * one, since only the last one was followed by the decoder before. When no
 * context matches, the previous alignment advances by one access (a random
 * choice inside a periodic stream does not lose the period).
 *
 * Each allocation also keeps how often it is used (a moving average of its
 * gaps) and how well the context predicted it. An allocation whose uses the
 * context keeps missing (a router's choice of expert) is predicted from its
 * frequency instead: memoryless, its next use is one average gap away, so
 * the allocations a router prefers rank nearer than those it rarely picks.
 */
#ifndef VS_POLICY_PREDICT_H
#define VS_POLICY_PREDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A distance for an allocation believed never to be used again. */
#define VS_PREDICT_NEVER UINT64_MAX

typedef struct vs_predict_s vs_predict_t;

/* How far away a next use is: in accesses (1: the very next access), in
 * bytes of the accesses in between, and in compute nanoseconds until it.
 * All VS_PREDICT_NEVER when none is predicted. `write`: the use predicted
 * writes; `periodic`: predicted from the repeating context, not from the
 * allocation's frequency. */
typedef struct vs_predict_distance_s {
    uint64_t accesses;
    uint64_t bytes;
    uint64_t ns;
    bool write;
    bool periodic;
} vs_predict_distance_t;

/* One predicted access. */
typedef struct vs_predict_access_s {
    uint64_t id;
    uint64_t bytes;
    uint64_t ns;  /* compute nanoseconds from now until it */
    uint64_t ops; /* operations that begin before it: 0 for the next one's */
    bool write;
} vs_predict_access_t;

typedef struct vs_predict_stats_s {
    uint64_t accesses;   /* reported so far */
    uint64_t bytes;      /* their bytes, all together */
    uint64_t period;     /* accesses from the matched point to now; 0: no match */
    uint64_t context;    /* length of the matched context; 0: an alignment carried on */
    uint64_t hits;       /* accesses the previous prediction named */
    uint64_t allocations;
} vs_predict_stats_t;

/* `history` accesses are remembered (rounded up to a power of two, at least
 * 64); a period longer than about half of it is not learned. Returns 0,
 * -EINVAL or -ENOMEM. */
int vs_predict_create(size_t history, vs_predict_t **out);
void vs_predict_destroy(vs_predict_t *p);

/* Allocation `id` is accessed: `bytes` (its size), whether the access
 * writes, the compute nanoseconds since the previous access, and whether
 * it belongs to the same operation as the previous access (the accesses of
 * one operation happen together: a distance to any of them is a distance
 * to the operation). Returns 0 or -ENOMEM. */
int vs_predict_access(vs_predict_t *p, uint64_t id, uint64_t bytes, bool write, uint64_t compute_ns,
                      bool same_op);
/* Allocation `id` was freed: it has no next use, and its state goes. The
 * history keeps its accesses, which still match contexts; an id reused
 * later starts afresh. */
void vs_predict_forget(vs_predict_t *p, uint64_t id);

/* The next use of `id` from now. Returns 0 (with NEVER in every field when
 * none is predicted: an allocation used once and not in the current period)
 * or -ENOENT (with NEVER too) for an id never accessed, or forgotten. */
int vs_predict_next_use(const vs_predict_t *p, uint64_t id, vs_predict_distance_t *d);
/* The next `k` accesses predicted by the context, nearest first; writes
 * their count (0 while nothing matched) to `*n`. */
void vs_predict_next(const vs_predict_t *p, vs_predict_access_t *out, size_t k, size_t *n);
void vs_predict_stats(const vs_predict_t *p, vs_predict_stats_t *stats);

#endif

/* host_pool.c: pinned slabs carved into 2 MiB blocks (`vs_host_pool_take`).
 *
 * Each slab keeps a bitmap of its blocks. A take first looks for one run
 * long enough for the whole copy (first fit over the slabs, so a copy is
 * usually one extent and one DMA), then pins a new slab if the limit
 * allows, and only then gathers the copy from several shorter runs.
 */
#include "host_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tunables.h"

typedef struct vs_slab_s {
    unsigned char *base;
    uint64_t bytes;
    void *owner; /* what its pin depends on; NULL once unpinned */
    uint32_t blocks;
    uint32_t free_blocks;
    uint64_t *used; /* bitmap, one bit per block */
    struct vs_slab_s *next;
} vs_slab_t;

static struct {
    pthread_mutex_t lock;
    uint64_t limit;
    uint64_t pinned;
    uint64_t used;
    uint64_t slab_count;
    vs_host_pin_fn pin;
    vs_host_unpin_fn unpin;
    vs_slab_t *slabs;
    _Atomic uint64_t unpinned; /* slabs whose owner is NULL */
} vs_pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

void vs_host_pool_configure(uint64_t limit, vs_host_pin_fn pin, vs_host_unpin_fn unpin)
{
    pthread_mutex_lock(&vs_pool.lock);
    vs_pool.limit = limit / VS_HOST_BLOCK_BYTES * VS_HOST_BLOCK_BYTES;
    vs_pool.pin = pin;
    vs_pool.unpin = unpin;
    pthread_mutex_unlock(&vs_pool.lock);
}

static bool vs_block_used(const vs_slab_t *s, uint32_t i)
{
    return (s->used[i / 64] >> (i % 64)) & 1u;
}

static void vs_block_mark(vs_slab_t *s, uint32_t first, uint32_t count, bool used)
{
    for (uint32_t i = first; i < first + count; i++) {
        if (used)
            s->used[i / 64] |= 1ull << (i % 64);
        else
            s->used[i / 64] &= ~(1ull << (i % 64));
    }
    if (used)
        s->free_blocks -= count;
    else
        s->free_blocks += count;
}

/* The first free run of at least `want` blocks in `s` (or, with `want` 0,
 * the longest run). Returns its length (0: none) and its start. */
static uint32_t vs_slab_find_run(const vs_slab_t *s, uint32_t want, uint32_t *start)
{
    uint32_t best = 0, best_start = 0;
    for (uint32_t i = 0; i < s->blocks;) {
        if (vs_block_used(s, i)) {
            i++;
            continue;
        }
        uint32_t j = i;
        while (j < s->blocks && !vs_block_used(s, j))
            j++;
        if (want != 0 && j - i >= want) {
            *start = i;
            return j - i;
        }
        if (j - i > best) {
            best = j - i;
            best_start = i;
        }
        i = j;
    }
    *start = best_start;
    return want != 0 ? 0 : best;
}

/* Pins a new slab of up to VS_HOST_SLAB_BYTES within the limit. Lock held. */
static vs_slab_t *vs_slab_grow(uint64_t at_least)
{
    uint64_t room = vs_pool.limit - vs_pool.pinned;
    uint64_t bytes = at_least > VS_HOST_SLAB_BYTES ? at_least : VS_HOST_SLAB_BYTES;
    if (bytes > room)
        bytes = room;
    bytes = bytes / VS_HOST_BLOCK_BYTES * VS_HOST_BLOCK_BYTES;
    if (bytes == 0 || vs_pool.pin == NULL)
        return NULL;
    vs_slab_t *s = calloc(1, sizeof *s);
    uint32_t blocks = (uint32_t)(bytes / VS_HOST_BLOCK_BYTES);
    if (s == NULL || (s->used = calloc((blocks + 63) / 64, sizeof *s->used)) == NULL) {
        free(s);
        return NULL;
    }
    void *base = NULL, *owner = NULL;
    if (vs_pool.pin(&base, bytes, &owner) != 0 || base == NULL) {
        free(s->used);
        free(s);
        return NULL;
    }
    s->base = base;
    s->bytes = bytes;
    s->owner = owner;
    if (owner == NULL)
        atomic_fetch_add(&vs_pool.unpinned, 1);
    s->blocks = s->free_blocks = blocks;
    s->next = vs_pool.slabs;
    vs_pool.slabs = s;
    vs_pool.pinned += bytes;
    vs_pool.slab_count++;
    return s;
}

static int vs_copy_append(vs_host_copy_t *out, uint32_t *capacity, void *ptr, uint64_t bytes)
{
    if (out->count == *capacity) {
        uint32_t grown_capacity = *capacity ? *capacity * 2 : 4;
        vs_host_extent_t *grown = realloc(out->extents, grown_capacity * sizeof *grown);
        if (grown == NULL)
            return -ENOMEM;
        out->extents = grown;
        *capacity = grown_capacity;
    }
    out->extents[out->count++] = (vs_host_extent_t){.ptr = ptr, .bytes = bytes};
    out->bytes += bytes;
    return 0;
}

/* Gives back what a failed take had gathered. Lock held. */
static void vs_copy_undo(vs_host_copy_t *copy);

int vs_host_pool_take(uint64_t bytes, vs_host_copy_t *out)
{
    uint32_t capacity = 0, start = 0;
    int rc = 0;

    memset(out, 0, sizeof *out);
    if (bytes == 0)
        return 0;
    uint64_t blocks = bytes / VS_HOST_BLOCK_BYTES + (bytes % VS_HOST_BLOCK_BYTES != 0);
    if (blocks > UINT32_MAX)
        return -ENOSPC; /* more than any pool can hold */
    uint32_t want = (uint32_t)blocks;
    pthread_mutex_lock(&vs_pool.lock);
    uint64_t free_pinned = vs_pool.pinned - vs_pool.used;
    uint64_t need = (uint64_t)want * VS_HOST_BLOCK_BYTES;
    if (need > free_pinned + (vs_pool.limit - vs_pool.pinned)) {
        rc = -ENOSPC;
        goto out;
    }
    /* One run for the whole copy. */
    for (vs_slab_t *s = vs_pool.slabs; s != NULL; s = s->next) {
        if (s->free_blocks >= want && vs_slab_find_run(s, want, &start) != 0) {
            vs_block_mark(s, start, want, true);
            rc = vs_copy_append(out, &capacity, s->base + (uint64_t)start * VS_HOST_BLOCK_BYTES, need);
            if (rc != 0)
                vs_block_mark(s, start, want, false);
            goto out;
        }
    }
    /* A new slab big enough for all of it, when the limit allows. */
    if (need <= vs_pool.limit - vs_pool.pinned) {
        vs_slab_t *s = vs_slab_grow(need);
        if (s != NULL && s->blocks >= want) {
            vs_block_mark(s, 0, want, true);
            rc = vs_copy_append(out, &capacity, s->base, need);
            if (rc != 0)
                vs_block_mark(s, 0, want, false);
            goto out;
        }
    }
    /* Gather from shorter runs, growing the pool while it may. */
    uint32_t left = want;
    while (left > 0) {
        vs_slab_t *best_slab = NULL;
        uint32_t best_len = 0, best_start = 0;
        for (vs_slab_t *s = vs_pool.slabs; s != NULL; s = s->next) {
            if (s->free_blocks == 0)
                continue;
            uint32_t len = vs_slab_find_run(s, 0, &start);
            if (len > best_len) {
                best_len = len;
                best_start = start;
                best_slab = s;
            }
        }
        if (best_slab == NULL) {
            best_slab = vs_slab_grow((uint64_t)left * VS_HOST_BLOCK_BYTES);
            if (best_slab == NULL) {
                rc = vs_pool.pinned >= vs_pool.limit ? -ENOSPC : -ENOMEM;
                break;
            }
            best_start = 0;
            best_len = best_slab->blocks;
        }
        uint32_t take = best_len < left ? best_len : left;
        vs_block_mark(best_slab, best_start, take, true);
        rc = vs_copy_append(out, &capacity, best_slab->base + (uint64_t)best_start * VS_HOST_BLOCK_BYTES,
                            (uint64_t)take * VS_HOST_BLOCK_BYTES);
        if (rc != 0) {
            vs_block_mark(best_slab, best_start, take, false);
            break;
        }
        left -= take;
    }
    if (rc != 0)
        vs_copy_undo(out);
out:
    if (rc == 0)
        vs_pool.used += out->bytes;
    pthread_mutex_unlock(&vs_pool.lock);
    return rc;
}

/* Returns one extent's blocks to their slab. Lock held. */
static void vs_extent_release(const vs_host_extent_t *e)
{
    for (vs_slab_t *s = vs_pool.slabs; s != NULL; s = s->next) {
        unsigned char *p = e->ptr;
        if (p >= s->base && p < s->base + (uint64_t)s->blocks * VS_HOST_BLOCK_BYTES) {
            uint32_t first = (uint32_t)((uint64_t)(p - s->base) / VS_HOST_BLOCK_BYTES);
            vs_block_mark(s, first, (uint32_t)(e->bytes / VS_HOST_BLOCK_BYTES), false);
            return;
        }
    }
}

static void vs_copy_undo(vs_host_copy_t *copy)
{
    for (uint32_t i = 0; i < copy->count; i++)
        vs_extent_release(&copy->extents[i]);
    free(copy->extents);
    memset(copy, 0, sizeof *copy);
}

void vs_host_pool_give(vs_host_copy_t *copy)
{
    if (copy->count == 0) {
        free(copy->extents);
        memset(copy, 0, sizeof *copy);
        return;
    }
    pthread_mutex_lock(&vs_pool.lock);
    vs_pool.used -= copy->bytes;
    vs_copy_undo(copy);
    pthread_mutex_unlock(&vs_pool.lock);
}

void vs_host_pool_stats(vs_host_pool_stats_t *out)
{
    pthread_mutex_lock(&vs_pool.lock);
    out->limit = vs_pool.limit;
    out->pinned = vs_pool.pinned;
    out->used = vs_pool.used;
    out->slabs = vs_pool.slab_count;
    pthread_mutex_unlock(&vs_pool.lock);
}

size_t vs_host_pool_repin(void *owner, vs_host_repin_fn repin, void *arg)
{
    size_t called = 0;
    pthread_mutex_lock(&vs_pool.lock);
    for (vs_slab_t *s = vs_pool.slabs; s != NULL; s = s->next) {
        if (s->owner != owner)
            continue;
        repin(s->base, s->bytes, &s->owner, arg);
        called++;
        if ((owner == NULL) != (s->owner == NULL))
            atomic_fetch_add(&vs_pool.unpinned, s->owner == NULL ? 1 : (uint64_t)-1);
    }
    pthread_mutex_unlock(&vs_pool.lock);
    return called;
}

uint64_t vs_host_pool_unpinned(void)
{
    return atomic_load_explicit(&vs_pool.unpinned, memory_order_relaxed);
}

void vs_host_pool_destroy(void)
{
    pthread_mutex_lock(&vs_pool.lock);
    while (vs_pool.slabs != NULL) {
        vs_slab_t *s = vs_pool.slabs;
        vs_pool.slabs = s->next;
        if (vs_pool.unpin != NULL)
            vs_pool.unpin(s->base, s->bytes, s->owner);
        free(s->used);
        free(s);
    }
    vs_pool.pinned = vs_pool.used = vs_pool.slab_count = 0;
    atomic_store(&vs_pool.unpinned, 0);
    pthread_mutex_unlock(&vs_pool.lock);
}

/* registry.c: the table of live allocations (`vs_registry_add`,
 * `vs_registry_touch_registry_locked`).
 *
 * Two tables share the records: `by_base` (uthash; every allocation, keyed
 * by its base, for frees) and the page index (device-side allocations only,
 * keyed by `address >> 21`; each page keeps the bounds of the allocations
 * overlapping it, sorted by base). An interior look-up is one range check
 * against the lowest and highest device address ever registered, one probe
 * of a flat open-addressing table and, only where several allocations share
 * a 2 MiB page, one read of that page's index of 32 KiB pieces, which names
 * the one or two allocations overlapping the piece (its entries, in the same
 * heap block, only where more share it): O(1) in the number of live
 * allocations and one cache miss before the allocation's hot slot,
 * which is what keeps the per-launch scan cheap. An allocation registered
 * not evictable (settled, VS_HOT_SETTLED) needs nothing before the launch
 * goes: a scan may leave its word for after the submission
 * (`vs_registry_stamp_settled_registry_locked`), which logs it for the stamp
 * thread (stamp_log.h; `vs_registry_stamp_logged_registry_locked` stamps
 * it there). The page index is not a
 * uthash table because uthash's chained buckets cost a dependent load per
 * link on this, the hottest path of the shim.
 *
 * Lock order (internal.h): the registry lock (registry_lock.c) is taken before the trace
 * writer's lock (`VRAMSHIM_TRACE`, trace_writer.h) and nothing else is
 * taken under it. The trace writer never calls back: the scan hands it the
 * ids it collected (`vs_touch_t.ids`).
 */
#include "registry.h"

#include "internal.h"
#include "registry_index.h"
#include "registry_lock.h"
#include "stamp_log.h"
#include "trace_writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct {
    const char *name;
    bool device_side;
    bool evictable;
    const char *reason;
} vs_kind_table[VS_ALLOC_KIND_COUNT] = {
#define VS_KIND_ROW(suffix, name, device_side, evictable, reason) {name, device_side, evictable, reason},
    VS_ALLOC_KINDS(VS_KIND_ROW)
#undef VS_KIND_ROW
};

vs_registry_tables_t vs_registry = {
    .lo = UINTPTR_MAX,
    .hi = 0,
    .hot_free = UINT32_MAX,
};

static _Atomic uint64_t vs_registry_seq;
static _Atomic uint64_t vs_registry_epoch = 1;
static _Atomic uint64_t vs_registry_ids;

bool vs_registry_write_held(void)
{
#if VS_DEBUG
    return vs_registry_lock_writing();
#else
    return true;
#endif
}

bool vs_registry_lock_held(void)
{
#if VS_DEBUG
    return vs_registry_lock_reading() || vs_registry_lock_writing();
#else
    return true;
#endif
}

const char *vs_registry_kind_name(vs_alloc_kind_t kind)
{
    return (unsigned)kind < VS_ALLOC_KIND_COUNT ? vs_kind_table[kind].name : "?";
}

bool vs_registry_kind_device_side(vs_alloc_kind_t kind)
{
    return (unsigned)kind < VS_ALLOC_KIND_COUNT && vs_kind_table[kind].device_side;
}

VS_LAUNCH_PATH
uint64_t vs_registry_next_seq(void)
{
    return atomic_fetch_add_explicit(&vs_registry_seq, 1, memory_order_relaxed) + 1;
}

uint64_t vs_registry_current_seq(void)
{
    return atomic_load_explicit(&vs_registry_seq, memory_order_relaxed);
}

static void vs_alloc_copy(const vs_alloc_t *a, vs_alloc_info_t *out)
{
    out->id = a->id;
    out->base = a->base;
    out->size = a->size;
    out->device = a->device;
    out->kind = a->kind;
    out->residency = a->residency;
    out->handle = a->handle;
    out->created_seq = a->created_seq;
    out->created_ns = a->created_ns;
    out->last_use_seq = atomic_load_explicit(&vs_registry.hot[a->hot].last_use_seq, memory_order_relaxed);
    out->use_count = atomic_load_explicit(&vs_registry.hot[a->hot].use_count, memory_order_relaxed);
    out->last_use_epoch = atomic_load_explicit(&vs_registry.hot[a->hot].epoch, memory_order_relaxed);
    out->evictions = a->evictions;
    out->restores = a->restores;
    out->evictable = a->evictable;
    out->pinned_reason = a->pinned_reason;
}

/* Unlinks `a` from both tables and the statistics; the caller frees it. */
static void vs_registry_unlink(vs_alloc_t *a)
{
    HASH_DEL(vs_registry.by_base, a);
    if (vs_kind_table[a->kind].device_side) {
        for (uintptr_t p = vs_first_page(a); p <= vs_last_page(a); p++)
            vs_registry_page_erase(p, a);
        vs_registry.live_device_bytes -= a->size;
    }
    vs_registry.stats.live_count[a->kind]--;
    vs_registry.stats.live_bytes[a->kind] -= a->size;
}

int vs_registry_add(const vs_alloc_desc_t *desc, uint64_t *id_out)
{
    vs_alloc_t *a, *existing;
    int rc = 0;

    if (desc->size == 0 || (unsigned)desc->kind >= VS_ALLOC_KIND_COUNT
        || desc->base + desc->size < desc->base)
        return -EINVAL;
    a = calloc(1, sizeof *a);
    if (a == NULL)
        return -ENOMEM;
    a->id = atomic_fetch_add_explicit(&vs_registry_ids, 1, memory_order_relaxed) + 1;
    a->base = desc->base;
    a->size = desc->size;
    a->device = desc->device;
    a->kind = desc->kind;
    a->residency = VS_RESIDENT;
    a->handle = desc->handle;
    a->created_seq = vs_registry_next_seq();
    a->created_ns = vs_monotonic_ns();
    a->evictable = vs_kind_table[desc->kind].evictable;
    a->pinned_reason = vs_kind_table[desc->kind].reason;
    if (desc->engine_region) {
        a->evictable = true;
        a->pinned_reason = NULL;
    }
    if (a->evictable && desc->size < VS_EVICT_MIN_BYTES) {
        a->evictable = false;
        a->pinned_reason = "smaller than the 2 MiB eviction unit; kept resident";
    }
    if (desc->pinned_reason != NULL) {
        a->evictable = false;
        a->pinned_reason = desc->pinned_reason;
    }
    a->settled = !a->evictable;

    vs_registry_lock_write();
    HASH_FIND(hh, vs_registry.by_base, &a->base, sizeof a->base, existing);
    if (existing != NULL) {
        rc = -EEXIST;
        goto out_unlock;
    }
    rc = vs_registry_hot_take(&a->hot);
    if (rc != 0)
        goto out_unlock;
    vs_registry.hot_alloc[a->hot] = a;
    vs_registry.oom = false;
    HASH_ADD(hh, vs_registry.by_base, base, sizeof a->base, a);
    if (vs_registry.oom) {
        vs_registry_hot_give(a->hot);
        rc = -ENOMEM;
        goto out_unlock;
    }
    if (vs_kind_table[a->kind].device_side) {
        for (uintptr_t p = vs_first_page(a); p <= vs_last_page(a); p++) {
            rc = vs_registry_page_insert(p, a);
            if (rc != 0) {
                for (uintptr_t q = vs_first_page(a); q < p; q++)
                    vs_registry_page_erase(q, a);
                HASH_DEL(vs_registry.by_base, a);
                vs_registry_hot_give(a->hot);
                goto out_unlock;
            }
        }
        if (a->base < vs_registry.lo)
            vs_registry.lo = a->base;
        if (a->base + a->size > vs_registry.hi)
            vs_registry.hi = a->base + a->size;
        vs_registry.live_device_bytes += a->size;
        if (vs_registry.live_device_bytes > vs_registry.stats.peak_device_bytes)
            vs_registry.stats.peak_device_bytes = vs_registry.live_device_bytes;
    }
    vs_registry.stats.live_count[a->kind]++;
    vs_registry.stats.live_bytes[a->kind] += a->size;
    if (!desc->registered_before)
        vs_registry.stats.total_count[a->kind]++;
    if (id_out != NULL)
        *id_out = a->id;
    /* VRAMSHIM_TRACE: under the lock, so the `A` line precedes any `U`. */
    if (vs_trace_enabled())
        vs_trace_alloc(a->id, a->size, a->evictable);
out_unlock:
    vs_registry_lock_release();
    if (rc != 0)
        free(a);
    return rc;
}

int vs_registry_remove(uintptr_t base, unsigned kinds, vs_alloc_info_t *out)
{
    vs_alloc_t *a;

    vs_registry_lock_write();
    HASH_FIND(hh, vs_registry.by_base, &base, sizeof base, a);
    if (a == NULL || !(kinds & (1u << a->kind))) {
        vs_registry_lock_release();
        return -ENOENT;
    }
    vs_registry_unlink(a);
    /* VRAMSHIM_TRACE: under the lock, so the `F` line follows every `U`. */
    if (vs_trace_enabled())
        vs_trace_free(a->id);
    if (out != NULL)
        vs_alloc_copy(a, out);
    vs_registry_hot_give(a->hot);
    vs_registry_lock_release();
    free(a);
    return 0;
}

size_t vs_registry_remove_range(uintptr_t start, uint64_t size, vs_alloc_kind_t kind,
                                void (*fn)(const vs_alloc_info_t *info, void *arg), void *arg)
{
    vs_alloc_t *a, *tmp;
    size_t removed = 0;

    /* Unmaps are rare and cover few allocations: a walk over the table is
     * simpler than walking pages and fine at that rate. */
    vs_registry_lock_write();
    HASH_ITER(hh, vs_registry.by_base, a, tmp) {
        if (a->kind != kind || a->base < start || a->base - start >= size)
            continue;
        vs_registry_unlink(a);
        if (vs_trace_enabled()) /* VRAMSHIM_TRACE */
            vs_trace_free(a->id);
        if (fn != NULL) {
            vs_alloc_info_t info;
            vs_alloc_copy(a, &info);
            fn(&info, arg);
        }
        vs_registry_hot_give(a->hot);
        free(a);
        removed++;
    }
    vs_registry_lock_release();
    return removed;
}

/* The device-side allocation containing addr, and its hot index; read lock
 * held. */
static inline vs_alloc_t *vs_registry_lookup_registry_locked(uintptr_t addr, uint32_t *hot)
{
    if (addr < vs_registry.lo || addr >= vs_registry.hi)
        return NULL;
    const vs_page_slot_t *slot = vs_slot_find((addr >> VS_REGISTRY_PAGE_SHIFT) + 1);
    if (slot == NULL)
        return NULL;
    if (slot->base != 0) {
        if (addr < slot->base || addr >= slot->end)
            return NULL;
        *hot = vs_hot_index(slot->u.hot);
        return vs_registry.hot_alloc[*hot];
    }
    if (!vs_page_find(slot->u.page, addr, hot))
        return NULL;
    *hot = vs_hot_index(*hot);
    return vs_registry.hot_alloc[*hot];
}

int vs_registry_find(uintptr_t addr, vs_alloc_info_t *out)
{
    vs_alloc_t *a;
    int rc = -ENOENT;

    uint32_t hot;
    vs_registry_lock_read();
    a = vs_registry_lookup_registry_locked(addr, &hot);
    if (a == NULL)
        HASH_FIND(hh, vs_registry.by_base, &addr, sizeof addr, a);
    if (a != NULL) {
        if (out != NULL)
            vs_alloc_copy(a, out);
        rc = 0;
    }
    vs_registry_lock_release();
    return rc;
}

VS_LAUNCH_PATH
void vs_registry_read_begin(void)
{
    vs_registry_lock_read();
}

VS_LAUNCH_PATH
void vs_registry_read_end(void)
{
    vs_registry_lock_release();
}

/* One use per event, however many words of it point into the allocation.
 * Plain (relaxed, not read-modify-write) updates: a locked instruction per
 * word would cost more than the whole look-up, and these fields are the
 * eviction policy's recency and frequency hints, not correctness state. Two
 * launches racing on one allocation may lose one increment or leave the
 * older of their two sequence numbers. */
static inline void vs_hot_stamp(vs_hot_t *hot, uint64_t seq)
{
    uint64_t last = atomic_load_explicit(&hot->last_use_seq, memory_order_relaxed);
    if (last < seq) {
        atomic_store_explicit(&hot->last_use_seq, seq, memory_order_relaxed);
        uint32_t uses = atomic_load_explicit(&hot->use_count, memory_order_relaxed);
        if (uses != UINT32_MAX)
            atomic_store_explicit(&hot->use_count, uses + 1, memory_order_relaxed);
    }
}

/* A logged use (stamp_log.h): counted whatever the slot's sequence number,
 * which stays the latest. The caller counts it once per operation. */
static inline void vs_hot_count(vs_hot_t *hot, uint64_t seq)
{
    if (atomic_load_explicit(&hot->last_use_seq, memory_order_relaxed) < seq)
        atomic_store_explicit(&hot->last_use_seq, seq, memory_order_relaxed);
    uint32_t uses = atomic_load_explicit(&hot->use_count, memory_order_relaxed);
    if (uses != UINT32_MAX)
        atomic_store_explicit(&hot->use_count, uses + 1, memory_order_relaxed);
}

bool vs_registry_touch_registry_locked(uintptr_t addr, uint64_t seq)
{
    uint32_t index;

    VS_ASSERT(vs_registry_lock_held());
    if (vs_registry_lookup_registry_locked(addr, &index) == NULL)
        return false;
    vs_hot_stamp(&vs_registry.hot[index], seq);
    return true;
}

/* The lists a touch may keep: the ids of everything touched (for
 * VRAMSHIM_TRACE) and the bases of what is not resident, or of everything
 * with `collect_all`. Out of the common path: a launch that finds
 * everything resident, untraced, lists nothing. */
static void vs_hot_list(uint32_t index, bool resident, vs_touch_t *touch)
{
    if (touch->ids != NULL) {
        uint64_t id = vs_registry.hot_alloc[index]->id;
        bool listed = false;
        for (size_t k = 0; k < touch->ids_count && k < touch->ids_cap && !listed; k++)
            listed = touch->ids[k] == id;
        if (!listed) {
            if (touch->ids_count < touch->ids_cap)
                touch->ids[touch->ids_count] = id;
            touch->ids_count++;
        }
    }
    if (touch->collect_all || !resident) {
        uintptr_t base = vs_registry.hot_alloc[index]->base;
        for (size_t k = 0; k < touch->missing_count && k < touch->missing_cap; k++) {
            if (touch->missing[k] == base)
                return;
        }
        if (touch->missing_count < touch->missing_cap)
            touch->missing[touch->missing_count] = base;
        touch->missing_count++;
    }
}

VS_LAUNCH_PATH
size_t vs_registry_touch_many_registry_locked(const uintptr_t *words, size_t count, vs_touch_t *touch)
{
    /* The look-ups of a launch are independent. Done in stages over all the
     * words, each stage prefetching what the next one reads (slot, piece,
     * entries where a piece says to walk them, hot slot), their cache misses
     * overlap instead of queueing behind one another. */
    enum { BATCH = 64 };
    uintptr_t key[BATCH]; /* the page's key in the index; 0: outside [lo, hi) */
    size_t probe[BATCH];  /* where its probe starts */
    const vs_page_t *pages[BATCH]; /* a shared page... */
    const vs_page_piece_t *piece_at[BATCH]; /* ...and the word's piece of it */
    uint32_t hot[BATCH];
    size_t touched = 0;

    VS_ASSERT(vs_registry_lock_held());
    VS_ASSERT(touch->settled_cap <= VS_SETTLED_MAX);
    touch->epoch = atomic_load_explicit(&vs_registry_epoch, memory_order_relaxed);
    if (vs_registry.slots == NULL)
        return 0;
    /* Read once: only writers change them, and the read lock keeps them
     * out, but the stores of the touch below would make the compiler load
     * them again for every word. */
    const vs_page_slot_t *const slots = vs_registry.slots;
    const size_t slot_mask = vs_registry.slot_mask;
    const uintptr_t lo = vs_registry.lo, hi = vs_registry.hi;
    vs_hot_t *const hots = vs_registry.hot;
    const uint64_t seq = touch->seq, epoch = touch->epoch, stream_bit = touch->stream_bit;
    /* Whether a touch may have to list something whatever the residency. */
    const bool listing = touch->ids != NULL || touch->collect_all;
    bool watched = false;

    for (size_t first = 0; first < count; first += BATCH) {
        size_t n = count - first < BATCH ? count - first : BATCH;
        const uintptr_t *w = words + first;
        bool walking = false;

        for (size_t i = 0; i < n; i++) {
            key[i] = 0;
            if (w[i] >= lo && w[i] < hi) {
                key[i] = (w[i] >> VS_REGISTRY_PAGE_SHIFT) + 1;
                probe[i] = vs_slot_hash(key[i], slot_mask);
                __builtin_prefetch(&slots[probe[i]]);
            }
        }
        /* The slot: a page's single allocation is found here; a shared
         * page's piece is prefetched. */
        for (size_t i = 0; i < n; i++) {
            hot[i] = UINT32_MAX;
            pages[i] = NULL;
            if (key[i] == 0)
                continue;
            const vs_page_slot_t *slot = &slots[probe[i]];
            while (slot->key != key[i] && slot->key != 0)
                slot = &slots[(size_t)(slot - slots + 1) & slot_mask];
            if (slot->key == 0)
                continue;
            if (slot->base != 0) {
                if (w[i] >= slot->base && w[i] < slot->end) {
                    hot[i] = slot->u.hot;
                    __builtin_prefetch(&hots[vs_hot_index(hot[i])], 1);
                }
            } else {
                pages[i] = slot->u.page;
                piece_at[i] = &pages[i]->pieces[(w[i] >> VS_PIECE_SHIFT) & (VS_PIECES - 1)];
                __builtin_prefetch(piece_at[i]);
                if (slot->end == VS_SLOT_SETTLED && !listing && touch->settled_count < touch->settled_cap) {
                    touch->settled[touch->settled_count++] = w[i];
                    pages[i] = NULL;
                }
            }
        }
        /* The piece: one allocation, none, or a walk over the entries. */
        for (size_t i = 0; i < n; i++) {
            if (pages[i] == NULL)
                continue;
            const vs_page_piece_t *piece = piece_at[i];
            if (vs_page_piece_find(piece, w[i], &hot[i])) {
                __builtin_prefetch(&hots[vs_hot_index(hot[i])], 1);
                pages[i] = NULL;
                continue;
            }
            if (piece->lo[0] != VS_PIECE_WALK) {
                pages[i] = NULL;
                continue;
            }
            __builtin_prefetch(&pages[i]->count);
            __builtin_prefetch(&pages[i]->entries[piece->hot[0]]);
            __builtin_prefetch(&pages[i]->entries[piece->hot[0] + 1]);
            walking = true;
        }
        for (size_t i = 0; walking && i < n; i++) {
            if (pages[i] == NULL)
                continue;
            const vs_page_entry_t *e = vs_page_walk(pages[i], piece_at[i]->hot[0], w[i]);
            if (e != NULL) {
                hot[i] = e->hot;
                __builtin_prefetch(&hots[vs_hot_index(hot[i])], 1);
            }
        }
        /* The touch: stamp, epoch, stream, then the lists (rarely). A
         * settled allocation is only stamped, and later when the caller
         * takes the stamps: its hot slot arrives while the operation is
         * submitted, instead of before. */
        for (size_t i = 0; i < n; i++) {
            if (hot[i] == UINT32_MAX)
                continue;
            uint32_t index = vs_hot_index(hot[i]);
            vs_hot_t *h = &hots[index];
            if (touch->logged) {
                /* Settled ones only (an address freed and registered again
                 * may be evictable now: its use was not this one), once. */
                bool again = false;
                for (size_t j = 0; j < i && !again; j++)
                    again = hot[j] == hot[i];
                if ((hot[i] & VS_HOT_SETTLED) != 0 && !again) {
                    vs_hot_count(h, seq);
                    touched++;
                }
                continue;
            }
            if ((hot[i] & VS_HOT_SETTLED) != 0 && !listing) {
                if (touch->settled_count < touch->settled_cap)
                    touch->settled[touch->settled_count++] = w[i];
                else
                    vs_hot_stamp(h, seq);
                touched++;
                continue;
            }
            vs_hot_stamp(h, seq);
            if (atomic_load_explicit(&h->epoch, memory_order_relaxed) != epoch)
                atomic_store_explicit(&h->epoch, epoch, memory_order_relaxed);
            /* Read first: the bit is almost always set already, and only a
             * real change pays for the locked instruction (a lost bit would
             * let an eviction skip waiting for this stream). */
            if (stream_bit != 0 && (atomic_load_explicit(&h->streams, memory_order_relaxed) & stream_bit) == 0)
                atomic_fetch_or_explicit(&h->streams, stream_bit, memory_order_relaxed);
            watched |= atomic_load_explicit(&h->watched, memory_order_relaxed) != 0;
            bool resident = atomic_load_explicit(&h->residency, memory_order_relaxed) == VS_RESIDENT;
            if (listing || !resident)
                vs_hot_list(index, resident, touch);
            touched++;
        }
    }
    if (watched)
        touch->watched = true;
    return touched;
}

VS_LAUNCH_PATH
void vs_registry_stamp_settled_registry_locked(vs_touch_t *touch)
{
    const size_t n = touch->settled_count;

    VS_ASSERT(vs_registry_lock_held());
    VS_ASSERT(n <= VS_SETTLED_MAX);
    touch->settled_count = 0;
    /* Logged, for the stamp thread; else stamped now, as the stamp thread
     * would (the touch stamped the others: none of these yet). */
    if (n > 0 && !vs_stamp_log_put(touch->settled, n, touch->seq))
        vs_registry_stamp_logged_registry_locked(touch->settled, n, touch->seq);
}

void vs_registry_stamp_logged_registry_locked(const uintptr_t *words, size_t count, uint64_t seq)
{
    vs_touch_t touch = {.seq = seq, .logged = true};
    VS_ASSERT(count <= VS_SETTLED_MAX);
    (void)vs_registry_touch_many_registry_locked(words, count, &touch);
}

int vs_registry_set_residency(uintptr_t base, vs_residency_t residency, bool moved, uint64_t *streams_out)
{
    vs_alloc_t *a;

    vs_registry_lock_write();
    HASH_FIND(hh, vs_registry.by_base, &base, sizeof base, a);
    if (a == NULL) {
        vs_registry_lock_release();
        return -ENOENT;
    }
    vs_hot_t *hot = &vs_registry.hot[a->hot];
    bool was_on_device = a->residency == VS_RESIDENT || a->residency == VS_ARRIVING;
    bool leaves_device = residency != VS_RESIDENT && residency != VS_ARRIVING;
    if (was_on_device && leaves_device) {
        uint64_t streams = atomic_exchange_explicit(&hot->streams, 0, memory_order_relaxed);
        if (streams_out != NULL)
            *streams_out = streams;
    } else if (streams_out != NULL) {
        *streams_out = 0;
    }
    if (moved && !leaves_device)
        a->restores++;
    else if (moved)
        a->evictions++;
    if (moved && vs_trace_enabled()) /* VRAMSHIM_TRACE: real evictions and restores only */
        vs_trace_residency(a->id, !leaves_device);
    a->residency = residency;
    atomic_store_explicit(&hot->residency, (uint16_t)residency, memory_order_relaxed);
    vs_registry_lock_release();
    return 0;
}

int vs_registry_set_watched(uintptr_t base, bool watched)
{
    vs_alloc_t *a;
    vs_registry_lock_read();
    HASH_FIND(hh, vs_registry.by_base, &base, sizeof base, a);
    if (a != NULL)
        atomic_store_explicit(&vs_registry.hot[a->hot].watched, watched ? 1u : 0u, memory_order_relaxed);
    vs_registry_lock_release();
    return a != NULL ? 0 : -ENOENT;
}

uint64_t vs_registry_epoch_close(void (*fn)(void *arg), void *arg)
{
    vs_registry_lock_write();
    uint64_t closed = atomic_load_explicit(&vs_registry_epoch, memory_order_relaxed);
    fn(arg);
    atomic_store_explicit(&vs_registry_epoch, closed + 1, memory_order_relaxed);
    vs_registry_lock_release();
    return closed;
}

vs_residency_t vs_registry_residency_registry_locked(uintptr_t base)
{
    vs_alloc_t *a;
    VS_ASSERT(vs_registry_lock_held());
    HASH_FIND(hh, vs_registry.by_base, &base, sizeof base, a);
    return a != NULL ? a->residency : VS_ON_HOST;
}

int vs_registry_streams(uintptr_t base, uint64_t *streams_out)
{
    vs_alloc_t *a;

    vs_registry_lock_read();
    HASH_FIND(hh, vs_registry.by_base, &base, sizeof base, a);
    if (a != NULL)
        *streams_out = atomic_load_explicit(&vs_registry.hot[a->hot].streams, memory_order_relaxed);
    vs_registry_lock_release();
    return a != NULL ? 0 : -ENOENT;
}

void vs_registry_add_streams(uintptr_t base, uint64_t streams)
{
    vs_alloc_t *a;

    vs_registry_lock_read();
    HASH_FIND(hh, vs_registry.by_base, &base, sizeof base, a);
    if (a != NULL)
        atomic_fetch_or_explicit(&vs_registry.hot[a->hot].streams, streams, memory_order_relaxed);
    vs_registry_lock_release();
}

int vs_registry_pin(uintptr_t base, const char *reason)
{
    vs_alloc_t *a;

    vs_registry_lock_write();
    HASH_FIND(hh, vs_registry.by_base, &base, sizeof base, a);
    if (a != NULL) {
        a->evictable = false;
        a->pinned_reason = reason;
    }
    vs_registry_lock_release();
    return a != NULL ? 0 : -ENOENT;
}

bool vs_registry_touch(uintptr_t addr, uint64_t seq)
{
    bool found;

    vs_registry_lock_read();
    found = vs_registry_touch_registry_locked(addr, seq);
    vs_registry_lock_release();
    return found;
}

void vs_registry_foreach(void (*fn)(const vs_alloc_info_t *info, void *arg), void *arg)
{
    vs_alloc_t *a, *tmp;

    vs_registry_lock_read();
    HASH_ITER(hh, vs_registry.by_base, a, tmp) {
        vs_alloc_info_t info;
        vs_alloc_copy(a, &info);
        fn(&info, arg);
    }
    vs_registry_lock_release();
}

void vs_registry_stats(vs_registry_stats_t *out)
{
    vs_registry_lock_read();
    *out = vs_registry.stats;
    vs_registry_lock_release();
}

void vs_registry_clear(void)
{
    vs_alloc_t *a, *tmp;

    vs_registry_lock_write();
    HASH_ITER(hh, vs_registry.by_base, a, tmp) {
        HASH_DEL(vs_registry.by_base, a);
        free(a);
    }
    if (vs_registry.slots != NULL) {
        for (size_t i = 0; i <= vs_registry.slot_mask; i++) {
            vs_page_slot_t *slot = &vs_registry.slots[i];
            if (slot->key != 0 && slot->key != VS_SLOT_DELETED && slot->base == 0) {
                free(slot->u.page);
            }
        }
        free(vs_registry.slots);
        vs_registry.slots = NULL;
        vs_registry.slot_mask = 0;
        vs_registry.slots_used = 0;
    }
    free(vs_registry.hot);
    vs_registry.hot = NULL;
    free(vs_registry.hot_alloc);
    vs_registry.hot_alloc = NULL;
    vs_registry.hot_capacity = vs_registry.hot_top = 0;
    vs_registry.hot_free = UINT32_MAX;
    memset(&vs_registry.stats, 0, sizeof vs_registry.stats);
    vs_registry.live_device_bytes = 0;
    vs_registry.lo = UINTPTR_MAX;
    vs_registry.hi = 0;
    vs_registry_lock_release();
}

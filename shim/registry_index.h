/* registry_index.h: the registry's records and its page index, shared by
 * registry.c (the API) and registry_index.c (the index's upkeep: hot slots,
 * pages, the slot table). Internal to the registry; registry.c's header
 * comment describes the structure. The look-ups here are inline: they are
 * the launch path's.
 */
#ifndef VS_REGISTRY_INDEX_H
#define VS_REGISTRY_INDEX_H

#include "registry.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Keys are addresses or page numbers: a multiplicative hash spreads them in
 * a few cycles, where uthash's default hashes byte by byte. The high half of
 * the product goes to the low bits uthash uses to pick a bucket. */
#define HASH_FUNCTION(keyptr, keylen, hashv)                                                       \
    do {                                                                                           \
        uint64_t vs_key_;                                                                          \
        memcpy(&vs_key_, (keyptr), sizeof vs_key_);                                                \
        (hashv) = (unsigned)((vs_key_ * 0x9E3779B97F4A7C15ull) >> 32);                             \
    } while (0)
/* uthash must not exit the host process when malloc fails. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) (vs_registry.oom = true)
#include <uthash.h>

typedef struct vs_alloc_s {
    uint64_t id;
    uintptr_t base;
    uint64_t size;
    int device;
    vs_alloc_kind_t kind;
    vs_residency_t residency;
    uint64_t handle;
    uint64_t created_seq;
    uint64_t created_ns;
    uint32_t hot; /* index of its recency and frequency in `vs_registry.hot` */
    uint64_t evictions, restores;
    bool evictable;
    bool settled; /* registered not evictable: resident for good (VS_HOT_SETTLED) */
    const char *pinned_reason;
    UT_hash_handle hh; /* in `by_base` */
} vs_alloc_t;

/* What pages, slots and pieces store for an allocation: the index of its
 * hot slot, with VS_HOT_SETTLED set when the allocation was registered not
 * evictable. Such an allocation stays resident for good, no engine reads its
 * streams or epochs, and its stamp is news to no one before the operation
 * is submitted: a touch may leave it for `vs_registry_stamp_settled_registry_locked`,
 * after the submission, which logs it for the stamp thread. */
#define VS_HOT_SETTLED (UINT32_C(1) << 31)
/* At most this many hot slots: an index never reaches the bit, and no name
 * is UINT32_MAX, which a touch uses for "none". */
#define VS_HOT_MAX (VS_HOT_SETTLED - 1)

static inline uint32_t vs_hot_index(uint32_t name)
{
    return name & ~VS_HOT_SETTLED;
}

/* One allocation as seen from a page: its bounds are copied here so that a
 * look-up compares addresses without touching the allocation itself (the
 * record is `vs_registry.hot_alloc[vs_hot_index(hot)]`). 32 bytes, aligned: no entry
 * straddles two cache lines, which would cost a look-up a second miss. */
typedef struct vs_page_entry_s {
    _Alignas(32) uintptr_t base;
    uintptr_t end;
    uint32_t hot; /* a hot name: index and VS_HOT_SETTLED */
} vs_page_entry_t;

/* What a launch writes: kept apart from the records, in one dense array,
 * so that stamping ten thousand allocations touches half a cache line each
 * instead of a whole one scattered somewhere in the heap. A free slot holds
 * the index of the next free one in `last_use_seq`. */
typedef struct vs_hot_s {
    _Alignas(32) _Atomic uint64_t last_use_seq;
    _Atomic uint64_t streams;   /* streams that used it since it became resident */
    _Atomic uint64_t epoch;     /* the epoch of its last use */
    _Atomic uint32_t use_count; /* stops at UINT32_MAX */
    _Atomic uint16_t residency; /* a vs_residency_t; changed under the write lock */
    _Atomic uint16_t watched;   /* its use is news to the prefetcher (vs_registry_set_watched) */
} vs_hot_t;
/* Two to a cache line in an array on a line boundary (`vs_lines_alloc`):
 * a touch misses once, where a slot straddling two lines missed twice. */
_Static_assert(sizeof(vs_hot_t) == 32, "a hot slot is half a cache line");

/* A page shared by several allocations, with an index of its 32 KiB
 * pieces (`pieces`). A piece names the one or two allocations that overlap it:
 * their hot slots and bounds as offsets in the piece, so a look-up there
 * needs neither the entries nor the records, and prefetches the hot slot one
 * stage earlier. An unused name has `lo` == `hi` (every address misses it).
 * A piece that more than two allocations overlap names none and says
 * VS_PIECE_WALK in `lo[0]`, with `hot[0]` the index of the last entry
 * starting at or before the piece (0 when none), from which a look-up steps
 * over the few entries that start inside it. The entries follow in the same
 * block, found at a fixed offset instead of through a pointer, one heap block
 * per page. */
#define VS_PIECE_SHIFT 15
#define VS_PIECE_BYTES ((uintptr_t)1 << VS_PIECE_SHIFT)
#define VS_PIECES (1u << (VS_REGISTRY_PAGE_SHIFT - VS_PIECE_SHIFT))
#define VS_PIECE_WALK UINT16_MAX
typedef struct vs_page_piece_s {
    _Alignas(16) uint16_t lo[2]; /* [lo, hi): offsets in the piece, hi up to VS_PIECE_BYTES */
    uint16_t hi[2];
    uint32_t hot[2]; /* hot names; with VS_PIECE_WALK, hot[0] is an entry's index */
} vs_page_piece_t;
_Static_assert(sizeof(vs_page_piece_t) == 16, "a piece's index is a quarter of a cache line");
_Static_assert(VS_PIECE_BYTES < VS_PIECE_WALK, "piece offsets fit in 16 bits");

typedef struct vs_page_s {
    uint32_t count, capacity;
    vs_page_piece_t pieces[VS_PIECES];
    vs_page_entry_t entries[]; /* `capacity` of them, sorted by base, non-overlapping */
} vs_page_t;

/* The page index: open addressing with linear probing, keyed by page
 * number + 1 (0 = empty slot, VS_SLOT_DELETED = tombstone). A page with one
 * allocation, the common case for buffers of 2 MiB and more, is held in the
 * slot itself, so a look-up is one probe and one compare. 32 bytes, in a
 * table on a line boundary: a probe reads one cache line. */
#define VS_SLOT_DELETED UINTPTR_MAX
/* A shared page's `end` when every allocation in it is settled. */
#define VS_SLOT_SETTLED ((uintptr_t)1)
typedef struct vs_page_slot_s {
    uintptr_t key;
    uintptr_t base, end; /* the single allocation when base != 0; else end may say VS_SLOT_SETTLED */
    union {
        uint32_t hot;    /* base != 0: the single allocation's hot name */
        vs_page_t *page; /* base == 0: several allocations */
    } u;
} vs_page_slot_t;
_Static_assert(sizeof(vs_page_slot_t) == 32, "a page slot is half a cache line");

/* The registry's tables: every record by base, the page index, the hot
 * slots. Written under the registry's write lock, read under its read lock
 * (registry_lock.h). */
typedef struct vs_registry_tables_s {
    vs_alloc_t *by_base;
    vs_page_slot_t *slots;
    size_t slot_mask; /* capacity - 1; capacity is a power of two */
    size_t slots_used; /* live + tombstones */
    vs_hot_t *hot;
    vs_alloc_t **hot_alloc; /* the allocation of each hot slot */
    uint32_t hot_capacity, hot_top, hot_free; /* hot_free: UINT32_MAX = none */
    /* Every device-side allocation lies in [lo, hi): a word outside is not a
     * pointer into one (most scalars fail here). Only ever widened. */
    uintptr_t lo, hi;
    bool oom;
    vs_registry_stats_t stats;
    uint64_t live_device_bytes;
} vs_registry_tables_t;

extern vs_registry_tables_t vs_registry;

/* From entry `i` of `page`, the last entry starting at or before addr (`i`
 * itself when none after it does): a step over the few entries that start
 * inside one piece. */
static inline uint32_t vs_page_step(const vs_page_t *page, uint32_t i, uintptr_t addr)
{
    while (i + 1 < page->count && page->entries[i + 1].base <= addr)
        i++;
    return i;
}

/* The hot slot of the allocation containing `addr` among those `piece` names:
 * true when found, false when none of them holds it (then the entries
 * decide when the piece says VS_PIECE_WALK, otherwise nothing does). */
static inline bool vs_page_piece_find(const vs_page_piece_t *piece, uintptr_t addr, uint32_t *hot)
{
    uint32_t offset = (uint32_t)(addr & (VS_PIECE_BYTES - 1));
    for (int k = 0; k < 2; k++) {
        if (offset >= piece->lo[k] && offset < piece->hi[k]) {
            *hot = piece->hot[k];
            return true;
        }
    }
    return false;
}

/* The entry of `page` containing addr, from entry `first` on; NULL when
 * none does. */
static inline const vs_page_entry_t *vs_page_walk(const vs_page_t *page, uint32_t first, uintptr_t addr)
{
    const vs_page_entry_t *e = &page->entries[vs_page_step(page, first, addr)];
    return addr >= e->base && addr < e->end ? e : NULL;
}

/* The hot name of the allocation of shared `page` containing `addr`: from
 * its piece, or from the entries where the piece says to walk them. False
 * when none contains it. */
static inline bool vs_page_find(const vs_page_t *page, uintptr_t addr, uint32_t *name)
{
    const vs_page_piece_t *piece = &page->pieces[(addr >> VS_PIECE_SHIFT) & (VS_PIECES - 1)];
    if (vs_page_piece_find(piece, addr, name))
        return true;
    if (piece->lo[0] != VS_PIECE_WALK)
        return false;
    const vs_page_entry_t *e = vs_page_walk(page, piece->hot[0], addr);
    if (e == NULL)
        return false;
    *name = e->hot;
    return true;
}

static inline size_t vs_slot_hash(uintptr_t key, size_t mask)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

/* The slot holding page `key`, or NULL. */
static inline vs_page_slot_t *vs_slot_find(uintptr_t key)
{
    if (vs_registry.slots == NULL)
        return NULL;
    for (size_t i = vs_slot_hash(key, vs_registry.slot_mask);; i = (i + 1) & vs_registry.slot_mask) {
        vs_page_slot_t *slot = &vs_registry.slots[i];
        if (slot->key == key)
            return slot;
        if (slot->key == 0)
            return NULL;
    }
}

static inline uintptr_t vs_first_page(const vs_alloc_t *a)
{
    return a->base >> VS_REGISTRY_PAGE_SHIFT;
}

static inline uintptr_t vs_last_page(const vs_alloc_t *a)
{
    return (a->base + a->size - 1) >> VS_REGISTRY_PAGE_SHIFT;
}

/* A zeroed hot slot; write lock held. 0 or -ENOMEM. */
int vs_registry_hot_take(uint32_t *index);
/* Gives a hot slot back; write lock held. */
void vs_registry_hot_give(uint32_t index);
/* Adds `a` to page `page_no`'s index; write lock held. 0 or -ENOMEM. */
int vs_registry_page_insert(uintptr_t page_no, vs_alloc_t *a);
/* Removes `a` from page `page_no`'s index; write lock held. */
void vs_registry_page_erase(uintptr_t page_no, const vs_alloc_t *a);

#endif /* VS_REGISTRY_INDEX_H */

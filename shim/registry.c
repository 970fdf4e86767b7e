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
#include "registry_lock.h"
#include "stamp_log.h"
#include "trace_writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static struct {
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
} vs_registry = {
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

/* `bytes` (a multiple of 64) zeroed, starting on a cache line: the tables
 * the launch path reads keep their slots within one line each. */
static void *vs_lines_alloc(size_t bytes)
{
    void *p = aligned_alloc(64, bytes);
    if (p != NULL)
        memset(p, 0, bytes);
    return p;
}

/* `vs_lines_alloc`'s realloc: the first `keep` bytes of `old` (NULL: none)
 * in a new block of `bytes`, the rest zeroed; frees `old` on success only. */
static void *vs_lines_realloc(void *old, size_t keep, size_t bytes)
{
    void *p = vs_lines_alloc(bytes);
    if (p != NULL && old != NULL) {
        memcpy(p, old, keep);
        free(old);
    }
    return p;
}

/* A zeroed hot slot; write lock held. 0 or -ENOMEM. */
static int vs_hot_take(uint32_t *index)
{
    if (vs_registry.hot_free != UINT32_MAX) {
        *index = vs_registry.hot_free;
        vs_registry.hot_free = (uint32_t)atomic_load(&vs_registry.hot[*index].last_use_seq);
    } else {
        if (vs_registry.hot_top == vs_registry.hot_capacity) {
            if (vs_registry.hot_capacity >= VS_HOT_MAX)
                return -ENOMEM;
            uint32_t capacity = vs_registry.hot_capacity ? vs_registry.hot_capacity * 2 : 1024;
            vs_alloc_t **allocs = realloc(vs_registry.hot_alloc, capacity * sizeof *allocs);
            if (allocs == NULL)
                return -ENOMEM;
            vs_registry.hot_alloc = allocs;
            vs_hot_t *grown = vs_lines_realloc((void *)vs_registry.hot, vs_registry.hot_top * sizeof *grown,
                                               capacity * sizeof *grown);
            if (grown == NULL)
                return -ENOMEM;
            vs_registry.hot = grown;
            vs_registry.hot_capacity = capacity;
        }
        *index = vs_registry.hot_top++;
    }
    atomic_init(&vs_registry.hot[*index].last_use_seq, 0);
    atomic_init(&vs_registry.hot[*index].use_count, 0);
    atomic_init(&vs_registry.hot[*index].streams, 0);
    atomic_init(&vs_registry.hot[*index].epoch, 0);
    atomic_init(&vs_registry.hot[*index].residency, VS_RESIDENT);
    atomic_init(&vs_registry.hot[*index].watched, 0);
    return 0;
}

static void vs_hot_give(uint32_t index)
{
    atomic_store(&vs_registry.hot[index].last_use_seq, vs_registry.hot_free);
    vs_registry.hot_free = index;
}

/* Index of the first entry of `page` whose base is greater than addr. */
static inline uint32_t vs_page_upper_bound(const vs_page_t *page, uintptr_t addr)
{
    uint32_t lo = 0, hi = page->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (page->entries[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* From entry `i` of `page`, the last entry starting at or before addr (`i`
 * itself when none after it does): a step over the few entries that start
 * inside one piece. */
static inline uint32_t vs_page_step(const vs_page_t *page, uint32_t i, uintptr_t addr)
{
    while (i + 1 < page->count && page->entries[i + 1].base <= addr)
        i++;
    return i;
}

/* Recomputes `page->pieces` after a change; `page_base` is the page's first
 * address. */
static void vs_page_reindex(vs_page_t *page, uintptr_t page_base)
{
    uint32_t i = 0;

    for (uint32_t k = 0; k < VS_PIECES; k++) {
        uintptr_t start = page_base + (uintptr_t)k * VS_PIECE_BYTES, end = start + VS_PIECE_BYTES;
        i = vs_page_step(page, i, start);
        vs_page_piece_t *piece = &page->pieces[k];
        *piece = (vs_page_piece_t){0};
        /* The entries overlapping [start, end): entry i when it reaches past
         * start, then those that start before end. */
        uint32_t overlapping = 0;
        for (uint32_t j = i; j < page->count && page->entries[j].base < end; j++) {
            const vs_page_entry_t *e = &page->entries[j];
            if (e->end <= start)
                continue;
            if (overlapping == 2) {
                *piece = (vs_page_piece_t){.lo = {VS_PIECE_WALK, 0}, .hot = {i, 0}};
                break;
            }
            piece->lo[overlapping] = (uint16_t)((e->base > start ? e->base : start) - start);
            piece->hi[overlapping] = (uint16_t)((e->end < end ? e->end : end) - start);
            piece->hot[overlapping] = e->hot;
            overlapping++;
        }
    }
}

/* Whether every allocation in `page` is settled. */
static bool vs_page_settled(const vs_page_t *page)
{
    for (uint32_t i = 0; i < page->count; i++) {
        if ((page->entries[i].hot & VS_HOT_SETTLED) == 0)
            return false;
    }
    return true;
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

static int vs_slots_grow(void)
{
    size_t capacity = vs_registry.slots ? (vs_registry.slot_mask + 1) * 2 : 1024;
    vs_page_slot_t *slots = vs_lines_alloc(capacity * sizeof *slots);
    if (slots == NULL)
        return -ENOMEM;
    size_t mask = capacity - 1, used = 0;
    if (vs_registry.slots != NULL) {
        for (size_t i = 0; i <= vs_registry.slot_mask; i++) {
            vs_page_slot_t *old = &vs_registry.slots[i];
            if (old->key == 0 || old->key == VS_SLOT_DELETED)
                continue;
            size_t j = vs_slot_hash(old->key, mask);
            while (slots[j].key != 0)
                j = (j + 1) & mask;
            slots[j] = *old;
            used++;
        }
        free(vs_registry.slots);
    }
    vs_registry.slots = slots;
    vs_registry.slot_mask = mask;
    vs_registry.slots_used = used;
    return 0;
}

/* A free slot for page `key` (known absent), growing the table first when
 * it is three-quarters full. */
static vs_page_slot_t *vs_slot_claim(uintptr_t key)
{
    if ((vs_registry.slots == NULL || (vs_registry.slots_used + 1) * 4 > (vs_registry.slot_mask + 1) * 3)
        && vs_slots_grow() != 0)
        return NULL;
    size_t i = vs_slot_hash(key, vs_registry.slot_mask);
    while (vs_registry.slots[i].key != 0 && vs_registry.slots[i].key != VS_SLOT_DELETED)
        i = (i + 1) & vs_registry.slot_mask;
    if (vs_registry.slots[i].key == 0)
        vs_registry.slots_used++;
    vs_registry.slots[i].key = key;
    return &vs_registry.slots[i];
}

/* `page` (NULL: a new one) with room for `capacity` entries, on a cache
 * line like the other tables; frees the old block on success only. */
static vs_page_t *vs_page_block(vs_page_t *page, uint32_t capacity)
{
    size_t bytes = (sizeof(vs_page_t) + capacity * sizeof(vs_page_entry_t) + 63) & ~(size_t)63;
    size_t keep = page != NULL ? sizeof *page + page->count * sizeof page->entries[0] : 0;
    vs_page_t *grown = vs_lines_realloc(page, keep, bytes);
    if (grown != NULL)
        grown->capacity = capacity;
    return grown;
}

/* What the pages store for `a`: settled when registered not evictable (a
 * later pin leaves the bit off: the allocation may have been evicted). */
static uint32_t vs_hot_name(const vs_alloc_t *a)
{
    return a->hot | (a->settled ? VS_HOT_SETTLED : 0);
}

static int vs_page_insert(uintptr_t page_no, vs_alloc_t *a)
{
    uintptr_t key = page_no + 1;
    vs_page_slot_t *slot = vs_slot_find(key);
    vs_page_entry_t entry = {.base = a->base, .end = a->base + a->size, .hot = vs_hot_name(a)};

    if (slot == NULL) {
        slot = vs_slot_claim(key);
        if (slot == NULL)
            return -ENOMEM;
        slot->base = entry.base;
        slot->end = entry.end;
        slot->u.hot = entry.hot;
        return 0;
    }
    if (slot->base != 0) {
        /* A second allocation in this page: move to a page array. */
        vs_page_t *page = vs_page_block(NULL, 4);
        if (page == NULL)
            return -ENOMEM;
        page->entries[0] = (vs_page_entry_t){.base = slot->base, .end = slot->end, .hot = slot->u.hot};
        page->count = 1;
        slot->base = slot->end = 0;
        slot->u.page = page;
    }
    vs_page_t *page = slot->u.page;
    if (page->count == page->capacity) {
        vs_page_t *grown = vs_page_block(page, page->capacity * 2);
        if (grown == NULL)
            return -ENOMEM;
        page = slot->u.page = grown;
    }
    uint32_t at = vs_page_upper_bound(page, a->base);
    memmove(&page->entries[at + 1], &page->entries[at], (page->count - at) * sizeof *page->entries);
    page->entries[at] = entry;
    page->count++;
    vs_page_reindex(page, page_no << VS_REGISTRY_PAGE_SHIFT);
    slot->end = vs_page_settled(page) ? VS_SLOT_SETTLED : 0;
    return 0;
}

static void vs_page_erase(uintptr_t page_no, const vs_alloc_t *a)
{
    vs_page_slot_t *slot = vs_slot_find(page_no + 1);

    if (slot == NULL)
        return;
    if (slot->base != 0) {
        if (slot->base == a->base) {
            slot->key = VS_SLOT_DELETED;
            slot->base = slot->end = 0;
            slot->u.page = NULL;
        }
        return;
    }
    vs_page_t *page = slot->u.page;
    for (uint32_t i = 0; i < page->count; i++) {
        if (page->entries[i].base == a->base) {
            memmove(&page->entries[i], &page->entries[i + 1], (page->count - i - 1) * sizeof *page->entries);
            page->count--;
            break;
        }
    }
    vs_page_reindex(page, page_no << VS_REGISTRY_PAGE_SHIFT);
    slot->end = vs_page_settled(page) ? VS_SLOT_SETTLED : 0;
    if (page->count == 1) {
        /* Back to the single form. */
        slot->base = page->entries[0].base;
        slot->end = page->entries[0].end;
        slot->u.hot = page->entries[0].hot;
        free(page);
    } else if (page->count == 0) {
        slot->key = VS_SLOT_DELETED;
        slot->u.page = NULL;
        free(page);
    }
}

static uintptr_t vs_first_page(const vs_alloc_t *a)
{
    return a->base >> VS_REGISTRY_PAGE_SHIFT;
}

static uintptr_t vs_last_page(const vs_alloc_t *a)
{
    return (a->base + a->size - 1) >> VS_REGISTRY_PAGE_SHIFT;
}

/* Unlinks `a` from both tables and the statistics; the caller frees it. */
static void vs_registry_unlink(vs_alloc_t *a)
{
    HASH_DEL(vs_registry.by_base, a);
    if (vs_kind_table[a->kind].device_side) {
        for (uintptr_t p = vs_first_page(a); p <= vs_last_page(a); p++)
            vs_page_erase(p, a);
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
    rc = vs_hot_take(&a->hot);
    if (rc != 0)
        goto out_unlock;
    vs_registry.hot_alloc[a->hot] = a;
    vs_registry.oom = false;
    HASH_ADD(hh, vs_registry.by_base, base, sizeof a->base, a);
    if (vs_registry.oom) {
        vs_hot_give(a->hot);
        rc = -ENOMEM;
        goto out_unlock;
    }
    if (vs_kind_table[a->kind].device_side) {
        for (uintptr_t p = vs_first_page(a); p <= vs_last_page(a); p++) {
            rc = vs_page_insert(p, a);
            if (rc != 0) {
                for (uintptr_t q = vs_first_page(a); q < p; q++)
                    vs_page_erase(q, a);
                HASH_DEL(vs_registry.by_base, a);
                vs_hot_give(a->hot);
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
    vs_hot_give(a->hot);
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
        vs_hot_give(a->hot);
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

/* registry_index.c: the upkeep of the registry's page index and hot slots
 * (registry_index.h): slots taken and given back, allocations inserted in
 * and erased from the pages they overlap, a shared page's index of pieces
 * recomputed, the slot table grown. Write lock held throughout.
 */
#include "registry_index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
int vs_registry_hot_take(uint32_t *index)
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

void vs_registry_hot_give(uint32_t index)
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

int vs_registry_page_insert(uintptr_t page_no, vs_alloc_t *a)
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

void vs_registry_page_erase(uintptr_t page_no, const vs_alloc_t *a)
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

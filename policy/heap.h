/*
 * heap.h: an intrusive, indexed binary heap.
 *
 * Each item keeps its own position (a `size_t` at `pos_offset`), so an item
 * can be removed or re-keyed in O(log n) without searching. The policy keeps
 * one heap per question it must answer quickly (who to evict, who is dead,
 * who to prefetch); the replay benchmark reuses it for its Belady oracle.
 */
#ifndef VS_POLICY_HEAP_H
#define VS_POLICY_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VS_HEAP_ABSENT SIZE_MAX

/* True when `a` must come out of the heap before `b`. */
typedef bool (*vs_heap_before_fn)(const void *a, const void *b);

typedef struct vs_heap_s {
    void **items;
    size_t len;
    size_t cap;
    size_t pos_offset;
    vs_heap_before_fn before;
} vs_heap_t;

void vs_heap_init(vs_heap_t *heap, size_t pos_offset, vs_heap_before_fn before);
void vs_heap_fini(vs_heap_t *heap);
/* Grows the storage so that `n` items fit: a push after a successful reserve
 * cannot fail. Returns 0 or -ENOMEM. */
int vs_heap_reserve(vs_heap_t *heap, size_t n);
/* Returns 0, -EEXIST when the item is already in this heap, or -ENOMEM. */
int vs_heap_push(vs_heap_t *heap, void *item);
void *vs_heap_top(const vs_heap_t *heap);
void *vs_heap_pop(vs_heap_t *heap);
/* Removing an item that is not in the heap does nothing. */
void vs_heap_remove(vs_heap_t *heap, void *item);
bool vs_heap_contains(const vs_heap_t *heap, const void *item);

#endif

/*
 * heap.c: the indexed binary heap behind every ordered question the policy
 * answers. Main entry points: `vs_heap_push`, `vs_heap_pop`, `vs_heap_remove`.
 *
 * The position of each item is written into the item itself so that removal
 * of an arbitrary item (an allocation freed, made resident, re-keyed after an
 * access) costs O(log n) instead of a linear search.
 */
#include "heap.h"

#include <errno.h>
#include <stdlib.h>

static size_t *heap_pos(const vs_heap_t *heap, const void *item)
{
    return (size_t *)((char *)(uintptr_t)item + heap->pos_offset);
}

static void heap_place(vs_heap_t *heap, size_t i, void *item)
{
    heap->items[i] = item;
    *heap_pos(heap, item) = i;
}

static void heap_sift_up(vs_heap_t *heap, size_t i)
{
    void *item = heap->items[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap->before(item, heap->items[parent]))
            break;
        heap_place(heap, i, heap->items[parent]);
        i = parent;
    }
    heap_place(heap, i, item);
}

static void heap_sift_down(vs_heap_t *heap, size_t i)
{
    void *item = heap->items[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= heap->len)
            break;
        if (child + 1 < heap->len && heap->before(heap->items[child + 1], heap->items[child]))
            child++;
        if (!heap->before(heap->items[child], item))
            break;
        heap_place(heap, i, heap->items[child]);
        i = child;
    }
    heap_place(heap, i, item);
}

void vs_heap_init(vs_heap_t *heap, size_t pos_offset, vs_heap_before_fn before)
{
    heap->items = NULL;
    heap->len = 0;
    heap->cap = 0;
    heap->pos_offset = pos_offset;
    heap->before = before;
}

void vs_heap_fini(vs_heap_t *heap)
{
    for (size_t i = 0; i < heap->len; i++)
        *heap_pos(heap, heap->items[i]) = VS_HEAP_ABSENT;
    free(heap->items);
    heap->items = NULL;
    heap->len = 0;
    heap->cap = 0;
}

int vs_heap_reserve(vs_heap_t *heap, size_t n)
{
    if (n <= heap->cap)
        return 0;
    size_t cap = heap->cap ? heap->cap : 16;
    while (cap < n) {
        if (cap > SIZE_MAX / 2 / sizeof(void *))
            return -ENOMEM;
        cap *= 2;
    }
    void **items = realloc(heap->items, cap * sizeof(void *));
    if (!items)
        return -ENOMEM;
    heap->items = items;
    heap->cap = cap;
    return 0;
}

int vs_heap_push(vs_heap_t *heap, void *item)
{
    if (*heap_pos(heap, item) != VS_HEAP_ABSENT)
        return -EEXIST;
    if (heap->len == heap->cap) {
        int rc = vs_heap_reserve(heap, heap->len + 1);
        if (rc < 0)
            return rc;
    }
    heap->items[heap->len] = item;
    *heap_pos(heap, item) = heap->len;
    heap->len++;
    heap_sift_up(heap, heap->len - 1);
    return 0;
}

void *vs_heap_top(const vs_heap_t *heap)
{
    return heap->len ? heap->items[0] : NULL;
}

void vs_heap_remove(vs_heap_t *heap, void *item)
{
    size_t i = *heap_pos(heap, item);
    if (i == VS_HEAP_ABSENT || i >= heap->len || heap->items[i] != item)
        return;
    *heap_pos(heap, item) = VS_HEAP_ABSENT;
    heap->len--;
    if (i == heap->len)
        return;
    /* The last item fills the hole; it may belong above or below it. */
    void *last = heap->items[heap->len];
    heap_place(heap, i, last);
    if (i > 0 && heap->before(last, heap->items[(i - 1) / 2]))
        heap_sift_up(heap, i);
    else
        heap_sift_down(heap, i);
}

void *vs_heap_pop(vs_heap_t *heap)
{
    void *top = vs_heap_top(heap);
    if (top)
        vs_heap_remove(heap, top);
    return top;
}

bool vs_heap_contains(const vs_heap_t *heap, const void *item)
{
    size_t i = *heap_pos(heap, item);
    return i != VS_HEAP_ABSENT && i < heap->len && heap->items[i] == item;
}

/*
 * test_policy_heap.c: unit tests of the indexed heap (policy/heap.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "heap.h"

typedef struct item_s {
    uint64_t key;
    size_t pos;
} item_t;

static bool key_before(const void *a, const void *b)
{
    return ((const item_t *)a)->key < ((const item_t *)b)->key;
}

static void test_heap_random_removals_pop_in_key_order(void **state)
{
    (void)state;
    enum { N = 2000 };
    static item_t items[N];
    vs_heap_t heap;
    vs_heap_init(&heap, offsetof(item_t, pos), key_before);
    uint64_t x = 12345;
    for (size_t i = 0; i < N; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        items[i].key = x >> 33;
        items[i].pos = VS_HEAP_ABSENT;
        assert_int_equal(vs_heap_push(&heap, &items[i]), 0);
    }
    assert_int_equal(vs_heap_push(&heap, &items[0]), -EEXIST);
    /* Remove every third item from the middle of the heap. */
    for (size_t i = 0; i < N; i += 3) {
        vs_heap_remove(&heap, &items[i]);
        assert_false(vs_heap_contains(&heap, &items[i]));
    }
    vs_heap_remove(&heap, &items[0]); /* absent: no effect */
    size_t popped = 0;
    uint64_t last = 0;
    item_t *it;
    while ((it = vs_heap_pop(&heap)) != NULL) {
        assert_true(it->key >= last);
        last = it->key;
        popped++;
    }
    assert_int_equal(popped, N - (N + 2) / 3);
    vs_heap_fini(&heap);
}

static void test_heap_rekeyed_item_moves_to_new_rank(void **state)
{
    (void)state;
    item_t items[5];
    vs_heap_t heap;
    vs_heap_init(&heap, offsetof(item_t, pos), key_before);
    for (size_t i = 0; i < 5; i++) {
        items[i] = (item_t){.key = 10 * (i + 1), .pos = VS_HEAP_ABSENT};
        assert_int_equal(vs_heap_push(&heap, &items[i]), 0);
    }
    vs_heap_remove(&heap, &items[4]);
    items[4].key = 1;
    assert_int_equal(vs_heap_push(&heap, &items[4]), 0);
    assert_ptr_equal(vs_heap_top(&heap), &items[4]);
    vs_heap_fini(&heap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_random_removals_pop_in_key_order),
        cmocka_unit_test(test_heap_rekeyed_item_moves_to_new_rank),
    };
    return cmocka_run_group_tests_name("heap.c", tests, NULL, NULL);
}

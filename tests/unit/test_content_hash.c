/* test_content_hash.c: content_hash.h, the hash that lets an unchanged
 * allocation be dropped without a copy: pinned known answers (checked
 * against an independent implementation of the definition in the header's
 * comment when they were recorded), pieces hashed by offset equal the
 * whole, and no single changed byte or appended zero goes unnoticed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "content_hash.h"

/* A fixed pseudo-random fill (splitmix64), so failures reproduce. */
static void fill_random(unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        p[i] = (unsigned char)(z ^ (z >> 31));
    }
}

static void assert_hash(vs_content_hash_t h, uint64_t lane0, uint64_t lane1)
{
    assert_int_equal(h.lane[0], lane0);
    assert_int_equal(h.lane[1], lane1);
}

/* Changing these answers changes what every stored hash means: only on
 * purpose, with the kernel's PTX rebuilt. */
static void test_content_hash_known_answers_are_stable(void **state)
{
    (void)state;
    static const unsigned char one[1] = {0x01}, zeros[8] = {0};
    static unsigned char pattern[4096];
    for (size_t i = 0; i < sizeof pattern; i++)
        pattern[i] = (unsigned char)(i * 31 + 7);

    assert_hash(vs_content_hash("", 0), 0x0000000000000000ull, 0xf7a7dff3b3802b07ull);
    assert_hash(vs_content_hash(one, 1), 0x83ec686c1600460aull, 0x0a128d4b4231bf83ull);
    assert_hash(vs_content_hash("01234567", 8), 0x1db445b567bbb447ull, 0xd3753a9aef450d97ull);
    assert_hash(vs_content_hash("vramshim hash", 13), 0x4ddef451aa7d7bd5ull, 0xd57683d4282242cfull);
    assert_hash(vs_content_hash(zeros, 8), 0xd56b1fbb9ceba9e8ull, 0xf1b05ab06f887c6full);
    assert_hash(vs_content_hash(pattern, 4096), 0x3f0873dd69b6c467ull, 0x201bb1dbb696cf20ull);
    assert_hash(vs_content_hash(pattern, 4093), 0x42402ed706c1a5a4ull, 0x06a50963c64dd040ull);
}

/* The host hashes a spilled copy extent by extent, in any order. */
static void test_content_hash_extents_in_any_order_equal_one_shot(void **state)
{
    (void)state;
    enum { N = 10000 + 1 }; /* a padded last word */
    unsigned char *data = malloc(N);
    assert_non_null(data);
    fill_random(data, N, 1);
    vs_content_hash_t whole = vs_content_hash(data, N);

    static const uint64_t cuts[][4] = {
        {8, 16, 4096, 9992},   /* small and page-sized pieces, a 9-byte last one */
        {0, 0, 8, 10000},      /* empty pieces count for nothing; a 1-byte last one */
        {4000, 4008, 8000, N}, /* an empty last piece */
    };
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        uint64_t edges[6] = {0, cuts[c][0], cuts[c][1], cuts[c][2], cuts[c][3], N};
        vs_content_hash_t forward = {{0, 0}}, backward = {{0, 0}};
        for (int i = 0; i < 5; i++)
            vs_content_hash_update(&forward, edges[i], data + edges[i], edges[i + 1] - edges[i]);
        for (int i = 4; i >= 0; i--)
            vs_content_hash_update(&backward, edges[i], data + edges[i], edges[i + 1] - edges[i]);
        assert_true(vs_content_hash_equal(vs_content_hash_final(forward, N), whole));
        assert_true(vs_content_hash_equal(vs_content_hash_final(backward, N), whole));
    }
    free(data);
}

/* Every value of every byte at a position changes both lanes, before and
 * after the final fold: a single write is never missed. */
static void assert_every_byte_value_changes_both_lanes(unsigned char *data, size_t n, size_t at)
{
    vs_content_hash_t original = vs_content_hash(data, n);
    unsigned char kept = data[at];
    for (unsigned delta = 1; delta < 256; delta++) {
        data[at] = (unsigned char)(kept ^ delta);
        vs_content_hash_t changed = vs_content_hash(data, n);
        if (changed.lane[0] == original.lane[0] || changed.lane[1] == original.lane[1])
            fail_msg("byte %zu of %zu xor 0x%02x left a lane unchanged", at, n, delta);
    }
    data[at] = kept;
    assert_true(vs_content_hash_equal(vs_content_hash(data, n), original));
}

static void test_content_hash_any_single_byte_change_changes_both_lanes(void **state)
{
    (void)state;
    /* Every byte of a buffer whose last word is padded (37 = 4·8 + 5). */
    unsigned char small[37];
    fill_random(small, sizeof small, 2);
    for (size_t at = 0; at < sizeof small; at++)
        assert_every_byte_value_changes_both_lanes(small, sizeof small, at);

    /* A buffer of zeros, the commonest content there is. */
    unsigned char zeros[24] = {0};
    for (size_t at = 0; at < sizeof zeros; at++)
        assert_every_byte_value_changes_both_lanes(zeros, sizeof zeros, at);

    /* Start, middle, last whole word, padded tail of a larger buffer. */
    enum { N = (1 << 16) + 3 };
    unsigned char *big = malloc(N);
    assert_non_null(big);
    fill_random(big, N, 3);
    static const size_t positions[] = {0, 1, 7, 8, N / 2, N / 2 + 1, N - 4, N - 3 - 1, N - 3, N - 1};
    for (size_t i = 0; i < sizeof positions / sizeof positions[0]; i++)
        assert_every_byte_value_changes_both_lanes(big, N, positions[i]);
    free(big);
}

/* Two words swapped: a word's position is part of what it adds. */
static void test_content_hash_swapped_words_change_the_hash(void **state)
{
    (void)state;
    uint64_t words[4] = {1, 2, 3, 4}, swapped[4] = {2, 1, 3, 4};
    vs_content_hash_t a = vs_content_hash(words, sizeof words), b = vs_content_hash(swapped, sizeof swapped);
    assert_true(a.lane[0] != b.lane[0] && a.lane[1] != b.lane[1]);
}

/* Zero bytes appended, to a partial or a whole last word, change both
 * lanes: the padding of the last word does not hide them. */
static void test_content_hash_appended_zero_bytes_change_the_hash(void **state)
{
    (void)state;
    unsigned char data[64] = {0};
    fill_random(data, 21, 4);
    for (size_t n = 0; n < 40; n++) {
        vs_content_hash_t shorter = vs_content_hash(data, n);
        for (size_t extra = 1; extra <= 16; extra++) {
            vs_content_hash_t longer = vs_content_hash(data, n + extra);
            if (shorter.lane[0] == longer.lane[0] || shorter.lane[1] == longer.lane[1])
                fail_msg("%zu zero bytes appended to %zu bytes left a lane unchanged", extra, n);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_hash_known_answers_are_stable),
        cmocka_unit_test(test_content_hash_extents_in_any_order_equal_one_shot),
        cmocka_unit_test(test_content_hash_any_single_byte_change_changes_both_lanes),
        cmocka_unit_test(test_content_hash_swapped_words_change_the_hash),
        cmocka_unit_test(test_content_hash_appended_zero_bytes_change_the_hash),
    };
    return cmocka_run_group_tests_name("content_hash.h", tests, NULL, NULL);
}

/* test_snapshot_parse.c: `vs_snapshot_parse` (tools/snapshot_reader.c) on
 * valid and damaged images, and the dump renderer (tools/dump.c) on what
 * it accepts. Pure: no shared memory, no processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dump.h"
#include "snapshot_pattern.h"
#include "snapshot_reader.h"

typedef struct image_s {
    void *buf;
    size_t len;
    vs_snapshot_header_t *h;
    vs_snapshot_row_t *rows;
} image_t;

static int image_setup(void **state)
{
    image_t *img = calloc(1, sizeof(*img));
    img->buf = vs_pattern_image(11, &img->len);
    img->h = img->buf;
    img->rows = (vs_snapshot_row_t *)(img->h + 1);
    *state = img;
    return img->buf ? 0 : -1;
}

static int image_teardown(void **state)
{
    image_t *img = *state;
    free(img->buf);
    free(img);
    return 0;
}

static int parse(image_t *img, size_t len, char *msg)
{
    vs_snapshot_view_t view;
    return vs_snapshot_parse(img->buf, len, &view, msg, 256);
}

static void test_parse_valid_image_gives_header_and_rows(void **state)
{
    image_t *img = *state;
    vs_snapshot_view_t view;
    char msg[256];
    assert_int_equal(vs_snapshot_parse(img->buf, img->len, &view, msg, sizeof(msg)), 0);
    assert_int_equal(view.row_count, vs_pattern_rows(11));
    assert_ptr_equal(view.rows, img->rows);
    char why[256] = "";
    assert_int_equal(vs_pattern_check(view.header, view.rows, why, sizeof(why)), 0);
}

static void test_parse_every_short_length_is_truncated(void **state)
{
    image_t *img = *state;
    char msg[256];
    for (size_t len = 0; len < img->len; len++) {
        int rc = parse(img, len, msg);
        assert_int_equal(rc, -VS_READ_ERR_TRUNCATED);
        assert_non_null(strstr(msg, "truncated snapshot"));
    }
}

static void test_parse_bad_magic_is_corrupt(void **state)
{
    image_t *img = *state;
    char msg[256];
    img->h->magic ^= 1;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    assert_non_null(strstr(msg, "bad magic"));
}

static void test_parse_other_version_is_incompatible(void **state)
{
    image_t *img = *state;
    char msg[256];
    img->h->abi_version = 7;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_VERSION);
    assert_string_equal(msg, "incompatible snapshot version 7 (this vramshim reads 1)");
}

static void test_parse_wrong_sizes_are_corrupt(void **state)
{
    image_t *img = *state;
    char msg[256];
    img->h->row_bytes = 64;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    img->h->row_bytes = sizeof(vs_snapshot_row_t);
    img->h->header_bytes = 4096;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
}

static void test_parse_counts_beyond_capacity_are_corrupt(void **state)
{
    image_t *img = *state;
    char msg[256];
    img->h->row_count = img->h->row_capacity + 1;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    assert_non_null(strstr(msg, "rows in a capacity"));
    img->h->row_count = vs_pattern_rows(11);
    img->h->row_capacity = VS_SNAPSHOT_MAX_ROWS + 1;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    img->h->row_capacity = 0;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
}

static void test_parse_enums_out_of_range_are_corrupt(void **state)
{
    image_t *img = *state;
    char msg[256];
    img->rows[3].place = VS_SNAPSHOT_PLACE_COUNT;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    assert_non_null(strstr(msg, "row 3"));
    img->rows[3].place = 0;
    img->rows[4].kind = 1000;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    img->rows[4].kind = 0;
    img->rows[5].keep = VS_SNAPSHOT_KEEP_COUNT;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    img->rows[5].keep = 0;
    /* -1 means "not on a device": valid for the application's own pinned
     * host memory only. */
    uint32_t kind6 = img->rows[6].kind;
    img->rows[6].kind = VS_SNAPSHOT_KIND_DEVICE;
    img->rows[6].device = -1;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    img->rows[6].kind = VS_SNAPSHOT_KIND_HOST_PINNED;
    assert_int_equal(parse(img, img->len, msg), 0);
    img->rows[6].device = -2;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    img->rows[6].kind = kind6;
    img->rows[6].device = 0;
    img->h->mode = VS_SNAPSHOT_MODE_COUNT;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    img->h->mode = 0;
    img->h->device_count = VS_SNAPSHOT_MAX_DEVICES + 1;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    img->h->device_count = 0;
    assert_int_equal(parse(img, img->len, msg), 0);
}

static void test_parse_unterminated_program_is_corrupt(void **state)
{
    image_t *img = *state;
    char msg[256];
    memset(img->h->program, 'x', sizeof(img->h->program));
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    assert_non_null(strstr(msg, "program name"));
}

static void test_parse_odd_sequence_is_corrupt(void **state)
{
    image_t *img = *state;
    char msg[256];
    img->h->sequence |= 1;
    assert_int_equal(parse(img, img->len, msg), -VS_READ_ERR_CORRUPT);
    assert_non_null(strstr(msg, "middle of an update"));
}

static void test_dump_select_sorts_and_filters(void **state)
{
    image_t *img = *state;
    vs_snapshot_view_t view;
    assert_int_equal(vs_snapshot_parse(img->buf, img->len, &view, NULL, 0), 0);

    vs_dump_options_t opts = {.sort = VS_DUMP_SORT_SIZE, .place = -1};
    uint32_t count;
    uint32_t *order = vs_dump_select(&view, &opts, &count);
    assert_int_equal(count, view.row_count);
    for (uint32_t k = 1; k < count; k++)
        assert_true(view.rows[order[k - 1]].size >= view.rows[order[k]].size);
    free(order);

    opts = (vs_dump_options_t){.sort = VS_DUMP_SORT_ID, .place = VS_SNAPSHOT_PLACE_HOST};
    order = vs_dump_select(&view, &opts, &count);
    uint32_t hosts = 0;
    for (uint32_t i = 0; i < view.row_count; i++)
        hosts += view.rows[i].place == VS_SNAPSHOT_PLACE_HOST;
    assert_int_equal(count, hosts);
    assert_true(count > 0);
    for (uint32_t k = 0; k < count; k++)
        assert_int_equal(view.rows[order[k]].place, VS_SNAPSHOT_PLACE_HOST);
    free(order);
}

static void test_dump_json_escapes_program_name(void **state)
{
    image_t *img = *state;
    vs_snapshot_view_t view;
    snprintf(img->h->program, sizeof(img->h->program), "a\"b\\c\n\xff");
    assert_int_equal(vs_snapshot_parse(img->buf, img->len, &view, NULL, 0), 0);
    char *text = NULL;
    size_t text_len = 0;
    FILE *out = open_memstream(&text, &text_len);
    vs_dump_options_t opts = {.json = true, .place = -1};
    assert_int_equal(vs_dump_write(out, &view, &opts), 0);
    fclose(out);
    assert_non_null(strstr(text, "\"program\":\"a\\\"b\\\\c\\u000a\\u00ff\""));
    free(text);
}

static void test_format_size_is_human_unless_bytes(void **state)
{
    (void)state;
    char buf[32];
    vs_format_size(buf, sizeof(buf), 512, false);
    assert_string_equal(buf, "512 B");
    vs_format_size(buf, sizeof(buf), 1536, false);
    assert_string_equal(buf, "1.50 KiB");
    vs_format_size(buf, sizeof(buf), 3ull << 30, false);
    assert_string_equal(buf, "3.00 GiB");
    vs_format_size(buf, sizeof(buf), 1536, true);
    assert_string_equal(buf, "1536");
    vs_format_duration(buf, sizeof(buf), 65ull * 1000000000u);
    assert_string_equal(buf, "1m05s");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, image_setup, image_teardown)
    const struct CMUnitTest tests[] = {
        T(test_parse_valid_image_gives_header_and_rows),
        T(test_parse_every_short_length_is_truncated),
        T(test_parse_bad_magic_is_corrupt),
        T(test_parse_other_version_is_incompatible),
        T(test_parse_wrong_sizes_are_corrupt),
        T(test_parse_counts_beyond_capacity_are_corrupt),
        T(test_parse_enums_out_of_range_are_corrupt),
        T(test_parse_unterminated_program_is_corrupt),
        T(test_parse_odd_sequence_is_corrupt),
        T(test_dump_select_sorts_and_filters),
        T(test_dump_json_escapes_program_name),
        cmocka_unit_test(test_format_size_is_human_unless_bytes),
    };
#undef T
    return cmocka_run_group_tests_name("snapshot_reader.c (parse)", tests, NULL, NULL);
}

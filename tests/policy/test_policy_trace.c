/*
 * test_policy_trace.c: unit tests of the trace parser and formatter
 * (policy/trace.c).
 *
 * Inputs are copied into exactly-sized heap buffers without a NUL so that a
 * read past the line shows up under AddressSanitizer.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trace.h"

static int parse(const char *text, vs_trace_event_t *ev)
{
    size_t len = strlen(text);
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, text, len);
    int rc = vs_trace_parse_line(copy, len, ev);
    free(copy);
    return rc;
}

static void test_trace_parse_valid_lines_fill_every_field(void **state)
{
    (void)state;
    vs_trace_event_t ev;
    assert_int_equal(parse("A 42 1048576 e", &ev), 1);
    assert_int_equal(ev.kind, VS_TRACE_ALLOC);
    assert_int_equal(ev.id, 42);
    assert_int_equal(ev.size, 1048576);
    assert_true(ev.evictable);
    assert_int_equal(parse("A 0x10 4096 n\r", &ev), 1);
    assert_int_equal(ev.id, 16);
    assert_false(ev.evictable);
    assert_int_equal(parse("F 18446744073709551615", &ev), 1);
    assert_int_equal(ev.kind, VS_TRACE_FREE);
    assert_true(ev.id == UINT64_MAX);
    assert_int_equal(parse("  U\t7 42 cuLaunchKernel 0x7f00aa 123456789 w  ", &ev), 1);
    assert_int_equal(ev.kind, VS_TRACE_USE);
    assert_int_equal(ev.seq, 7);
    assert_int_equal(ev.id, 42);
    assert_string_equal(ev.op, "cuLaunchKernel");
    assert_int_equal(ev.stream, 0x7f00aa);
    assert_int_equal(ev.time_ns, 123456789);
    assert_int_equal(ev.rw, VS_TRACE_WRITE);
    assert_int_equal(parse("U 8 42 memcpy.htod 0 0 r", &ev), 1);
    assert_int_equal(ev.rw, VS_TRACE_READ);
    assert_int_equal(parse("U 8 42 k 0 0 u", &ev), 1);
    assert_int_equal(ev.rw, VS_TRACE_RW_UNKNOWN);
    assert_int_equal(parse("R 42 0", &ev), 1);
    assert_int_equal(ev.kind, VS_TRACE_RESIDENCY);
    assert_false(ev.resident);
    assert_int_equal(parse("R 42 1", &ev), 1);
    assert_true(ev.resident);
}

static void test_trace_parse_blank_and_comment_lines_give_no_event(void **state)
{
    (void)state;
    vs_trace_event_t ev;
    assert_int_equal(parse("", &ev), 0);
    assert_int_equal(parse(" \t ", &ev), 0);
    assert_int_equal(parse("# vramshim trace v1", &ev), 0);
    assert_int_equal(parse("\r", &ev), 0);
}

static void test_trace_parse_each_malformed_shape_rejected(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "X 1 2 e",                     /* unknown tag */
        "AA 1 2 e",                    /* tag longer than one letter */
        "A 1 2",                       /* missing field */
        "A 1 2 e extra",               /* extra field */
        "A 1 0 e",                     /* zero size */
        "A 1 2 x",                     /* bad evictable flag */
        "A 1 2 ee",                    /* flag longer than one letter */
        "A -1 2 e",                    /* sign */
        "A 1x 2 e",                    /* junk in a number */
        "A 0x 2 e",                    /* hex prefix without digits */
        "A 0xg 2 e",                   /* bad hex digit */
        "A 18446744073709551616 2 e",  /* 2^64 overflows */
        "A 0x10000000000000000 2 e",   /* 2^64 in hex */
        "F",                           /* free without id */
        "F 1 2",                       /* free with extra field */
        "U 1 2 op 0 0",                /* use without rw */
        "U 1 2 op 0 0 x",              /* bad rw */
        "U 1 2 op-x 0 0 r",            /* bad character in op */
        "U 1 2 abcdefghijklmnopqrstuvwxyz0123456 0 0 r", /* op too long */
        "U 1 2 op 0 0 r r",            /* extra field */
        "R 1 2",                       /* residency not 0/1 */
        "R 1",                         /* residency missing */
        "A\x01 1 2 e",                 /* control byte in the tag */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        vs_trace_event_t ev;
        int rc = parse(bad[i], &ev);
        if (rc != -EINVAL)
            fail_msg("accepted \"%s\" (rc %d)", bad[i], rc);
    }
    /* An over-long line is rejected even when every field is valid. */
    char line[VS_TRACE_LINE_MAX + 16];
    memset(line, ' ', sizeof(line) - 1);
    line[sizeof(line) - 1] = '\0';
    memcpy(line, "F 1", 3);
    vs_trace_event_t ev;
    assert_int_equal(parse(line, &ev), -EINVAL);
    assert_int_equal(vs_trace_parse_line("F 1\0 2", 6, &ev), -EINVAL); /* embedded NUL */
}

static void test_trace_reader_walks_buffer_and_names_bad_line(void **state)
{
    (void)state;
    const char text[] = "# header\nA 1 100 e\n\nU 1 1 k 0 5 w\nZ\nF 1";
    size_t len = sizeof(text) - 1;
    char *buf = malloc(len);
    assert_non_null(buf);
    memcpy(buf, text, len); /* no NUL, no final newline */
    vs_trace_reader_t r;
    vs_trace_event_t ev;
    vs_trace_reader_init(&r, buf, len);
    assert_int_equal(vs_trace_reader_next(&r, &ev), 1);
    assert_int_equal(ev.kind, VS_TRACE_ALLOC);
    assert_int_equal(r.line_no, 2);
    assert_int_equal(vs_trace_reader_next(&r, &ev), 1);
    assert_int_equal(ev.kind, VS_TRACE_USE);
    assert_int_equal(r.line_no, 4);
    assert_int_equal(vs_trace_reader_next(&r, &ev), -EINVAL);
    assert_int_equal(r.line_no, 5);
    assert_int_equal(vs_trace_reader_next(&r, &ev), 1);
    assert_int_equal(ev.kind, VS_TRACE_FREE);
    assert_int_equal(vs_trace_reader_next(&r, &ev), 0);
    free(buf);
}

static void test_trace_format_round_trips_through_parser(void **state)
{
    (void)state;
    static const vs_trace_event_t in[4] = {
        {.kind = VS_TRACE_ALLOC, .id = 9, .size = 77, .evictable = true},
        {.kind = VS_TRACE_FREE, .id = UINT64_MAX},
        {.kind = VS_TRACE_USE, .seq = 5, .id = 9, .stream = 0xabc, .time_ns = 99,
         .rw = VS_TRACE_WRITE, .op = "cuMemcpyHtoDAsync"},
        {.kind = VS_TRACE_RESIDENCY, .id = 9, .resident = true},
    };
    for (size_t i = 0; i < 4; i++) {
        char buf[VS_TRACE_LINE_MAX];
        int n = vs_trace_format(&in[i], buf, sizeof(buf));
        assert_true(n > 0);
        assert_int_equal(buf[n - 1], '\n');
        vs_trace_event_t out;
        assert_int_equal(vs_trace_parse_line(buf, (size_t)n - 1, &out), 1);
        assert_memory_equal(&in[i], &out, sizeof(out));
    }
    char small[4];
    assert_int_equal(vs_trace_format(&in[0], small, sizeof(small)), -ENOSPC);
    vs_trace_event_t bad = {.kind = VS_TRACE_USE, .op = "bad op"};
    char buf[64];
    assert_int_equal(vs_trace_format(&bad, buf, sizeof(buf)), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_parse_valid_lines_fill_every_field),
        cmocka_unit_test(test_trace_parse_blank_and_comment_lines_give_no_event),
        cmocka_unit_test(test_trace_parse_each_malformed_shape_rejected),
        cmocka_unit_test(test_trace_reader_walks_buffer_and_names_bad_line),
        cmocka_unit_test(test_trace_format_round_trips_through_parser),
    };
    return cmocka_run_group_tests_name("trace.c", tests, NULL, NULL);
}

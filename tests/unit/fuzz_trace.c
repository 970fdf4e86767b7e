/* fuzz_trace.c: the fuzz target for the VRAMSHIM_TRACE parser
 * (policy/trace.c). The bytes are parsed as one line by
 * `vs_trace_parse_line` and as a whole trace by `vs_trace_reader_next`,
 * both from an exactly sized heap buffer with no NUL after it, so that a
 * read past the given length is caught by ASan. Besides never crashing:
 * - every result is 1 (an event), 0 (blank, comment, end) or -EINVAL;
 * - the reader advances: at most one result per line, line numbers grow;
 * - every event parsed formats (`vs_trace_format`) into a line that parses
 *   back into the same event.
 *
 * Entry point: `LLVMFuzzerTestOneInput`, run by libFuzzer (clang builds)
 * or by fuzz_driver.c (every build).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "trace.h"

static bool vs_fuzz_same_event(const vs_trace_event_t *a, const vs_trace_event_t *b)
{
    if (a->kind != b->kind || a->id != b->id)
        return false;
    switch (a->kind) {
    case VS_TRACE_ALLOC:
        return a->size == b->size && a->evictable == b->evictable;
    case VS_TRACE_FREE:
        return true;
    case VS_TRACE_USE:
        return a->seq == b->seq && a->stream == b->stream && a->time_ns == b->time_ns &&
               a->rw == b->rw && strcmp(a->op, b->op) == 0;
    case VS_TRACE_RESIDENCY:
        return a->resident == b->resident;
    }
    return false;
}

/* Formats `ev` and parses the line back (from an exactly sized copy,
 * without its newline). */
static void vs_fuzz_check_round_trip(const vs_trace_event_t *ev)
{
    char line[VS_TRACE_LINE_MAX + 2];
    int len = vs_trace_format(ev, line, sizeof line);
    VS_FUZZ_CHECK(len > 0 && line[len - 1] == '\n');
    char *copy = malloc((size_t)len - 1 ? (size_t)len - 1 : 1);
    VS_FUZZ_CHECK(copy != NULL);
    memcpy(copy, line, (size_t)len - 1);
    vs_trace_event_t again;
    VS_FUZZ_CHECK(vs_trace_parse_line(copy, (size_t)len - 1, &again) == 1);
    VS_FUZZ_CHECK(vs_fuzz_same_event(ev, &again));
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);

    vs_trace_event_t ev;
    int rc = vs_trace_parse_line(buf, size, &ev);
    VS_FUZZ_CHECK(rc == 1 || rc == 0 || rc == -EINVAL);
    if (rc == 1)
        vs_fuzz_check_round_trip(&ev);

    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += buf[i] == '\n';
    vs_trace_reader_t reader;
    vs_trace_reader_init(&reader, buf, size);
    size_t calls = 0, last_line = 0;
    for (;;) {
        rc = vs_trace_reader_next(&reader, &ev);
        VS_FUZZ_CHECK(rc == 1 || rc == 0 || rc == -EINVAL);
        VS_FUZZ_CHECK(reader.pos <= size && reader.line_no <= lines);
        if (rc == 0)
            break;
        VS_FUZZ_CHECK(reader.line_no > last_line);
        last_line = reader.line_no;
        VS_FUZZ_CHECK(++calls <= lines);
        if (rc == 1)
            vs_fuzz_check_round_trip(&ev);
    }
    free(buf);
    return 0;
}

static const char *const vs_fuzz_trace_seeds[] = {
    "A 42 1048576 e",
    "A 0x10 4096 n\r",
    "F 42",
    "U 7 42 gemm 0x0 123456 r",
    "U 18446744073709551615 0xffffffffffffffff op_name.v2 0x7f00 0 w",
    "R 42 1",
    "R 42 0",
    "# a comment",
    "",
    "   \t ",
    "A 1 0 e",
    "A 1 2 x",
    "U 1 2 bad-op 0 0 r",
    "U 1 2 abcdefghijklmnopqrstuvwxyz01234567 0 0 u",
    "F 18446744073709551616",
    "F 0x",
    "R 1 1 extra",
    "A 1 4096 e\nU 1 1 k 0 10 w\nR 1 0\nF 1\n",
    "# header\n\nA 2 2097152 n\r\nU 2 2 copy 0x1 20 u\r\nbad line\nF 2",
};

static const char *const vs_fuzz_trace_tokens[] = {
    "A ", "F ", "U ", "R ", " e", " n", " r", " w", " u", " 0", " 1", "0x", "0X", "ff",
    "18446744073709551615", "18446744073709551616", "\n", "\r", "\r\n", "\t", " ", "#", "\n#",
    "A 1 1 e\n", "U 1 1 op 0 0 r\n",
};

const vs_fuzz_corpus_t vs_fuzz_corpus = {
    .name = "trace",
    .seeds = vs_fuzz_trace_seeds,
    .seed_count = sizeof vs_fuzz_trace_seeds / sizeof vs_fuzz_trace_seeds[0],
    .tokens = vs_fuzz_trace_tokens,
    .token_count = sizeof vs_fuzz_trace_tokens / sizeof vs_fuzz_trace_tokens[0],
};

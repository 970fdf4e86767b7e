/*
 * trace.c: parser and formatter of the VRAMSHIM_TRACE text format (see
 * trace.h). Main entry points: `vs_trace_reader_next`, `vs_trace_format`.
 *
 * The input is untrusted (a file anyone can hand to the replay benchmark,
 * and a fuzzing target): every read is checked against the line's length,
 * numbers are checked for overflow, and nothing is accepted that the
 * formatter would not write.
 */
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct cursor_s {
    const char *p;
    const char *end;
} cursor_t;

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static void skip_blanks(cursor_t *c)
{
    while (c->p < c->end && is_blank(*c->p))
        c->p++;
}

/* The next field: a maximal run of non-blank bytes; false when none is left. */
static bool next_field(cursor_t *c, const char **start, size_t *len)
{
    skip_blanks(c);
    if (c->p == c->end)
        return false;
    *start = c->p;
    while (c->p < c->end && !is_blank(*c->p))
        c->p++;
    *len = (size_t)(c->p - *start);
    return true;
}

static int digit_value(char ch, unsigned base)
{
    int v;
    if (ch >= '0' && ch <= '9')
        v = ch - '0';
    else if (ch >= 'a' && ch <= 'f')
        v = ch - 'a' + 10;
    else if (ch >= 'A' && ch <= 'F')
        v = ch - 'A' + 10;
    else
        return -1;
    return (unsigned)v < base ? v : -1;
}

static int parse_u64(cursor_t *c, uint64_t *out)
{
    const char *s;
    size_t len;
    if (!next_field(c, &s, &len))
        return -EINVAL;
    unsigned base = 10;
    if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
        len -= 2;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        int d = digit_value(s[i], base);
        if (d < 0)
            return -EINVAL;
        if (v > (UINT64_MAX - (uint64_t)d) / base)
            return -EINVAL;
        v = v * base + (uint64_t)d;
    }
    *out = v;
    return 0;
}

/* A one-character field from `accepted`; returns its index there. */
static int parse_choice(cursor_t *c, const char *accepted)
{
    const char *s;
    size_t len;
    if (!next_field(c, &s, &len) || len != 1)
        return -EINVAL;
    const char *hit = memchr(accepted, s[0], strlen(accepted));
    return hit ? (int)(hit - accepted) : -EINVAL;
}

static bool is_op_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.';
}

static int parse_op(cursor_t *c, char *op)
{
    const char *s;
    size_t len;
    if (!next_field(c, &s, &len) || len > VS_TRACE_OP_MAX)
        return -EINVAL;
    for (size_t i = 0; i < len; i++)
        if (!is_op_char(s[i]))
            return -EINVAL;
    memcpy(op, s, len);
    op[len] = '\0';
    return 0;
}

static int parse_end(cursor_t *c)
{
    skip_blanks(c);
    return c->p == c->end ? 0 : -EINVAL;
}

int vs_trace_parse_line(const char *line, size_t len, vs_trace_event_t *ev)
{
    if (len > VS_TRACE_LINE_MAX + 1)
        return -EINVAL;
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (len > VS_TRACE_LINE_MAX)
        return -EINVAL;
    cursor_t c = {line, line + len};
    const char *tag;
    size_t tag_len;
    if (!next_field(&c, &tag, &tag_len))
        return 0;
    if (tag[0] == '#')
        return 0;
    if (tag_len != 1)
        return -EINVAL;
    memset(ev, 0, sizeof(*ev));
    int choice;
    switch (tag[0]) {
    case 'A':
        ev->kind = VS_TRACE_ALLOC;
        if (parse_u64(&c, &ev->id) < 0 || parse_u64(&c, &ev->size) < 0 || ev->size == 0)
            return -EINVAL;
        if ((choice = parse_choice(&c, "ne")) < 0)
            return -EINVAL;
        ev->evictable = choice == 1;
        break;
    case 'F':
        ev->kind = VS_TRACE_FREE;
        if (parse_u64(&c, &ev->id) < 0)
            return -EINVAL;
        break;
    case 'U':
        ev->kind = VS_TRACE_USE;
        if (parse_u64(&c, &ev->seq) < 0 || parse_u64(&c, &ev->id) < 0 ||
            parse_op(&c, ev->op) < 0 || parse_u64(&c, &ev->stream) < 0 ||
            parse_u64(&c, &ev->time_ns) < 0)
            return -EINVAL;
        if ((choice = parse_choice(&c, "urw")) < 0)
            return -EINVAL;
        ev->rw = (vs_trace_rw_t)choice;
        break;
    case 'R':
        ev->kind = VS_TRACE_RESIDENCY;
        if (parse_u64(&c, &ev->id) < 0)
            return -EINVAL;
        if ((choice = parse_choice(&c, "01")) < 0)
            return -EINVAL;
        ev->resident = choice == 1;
        break;
    default:
        return -EINVAL;
    }
    return parse_end(&c) < 0 ? -EINVAL : 1;
}

void vs_trace_reader_init(vs_trace_reader_t *reader, const char *buf, size_t len)
{
    reader->buf = buf;
    reader->len = buf ? len : 0;
    reader->pos = 0;
    reader->line_no = 0;
}

int vs_trace_reader_next(vs_trace_reader_t *reader, vs_trace_event_t *ev)
{
    while (reader->pos < reader->len) {
        const char *line = reader->buf + reader->pos;
        size_t left = reader->len - reader->pos;
        const char *nl = memchr(line, '\n', left);
        size_t len = nl ? (size_t)(nl - line) : left;
        reader->line_no++;
        int rc = vs_trace_parse_line(line, len, ev);
        reader->pos += nl ? len + 1 : len;
        if (rc != 0)
            return rc;
    }
    return 0;
}

int vs_trace_format(const vs_trace_event_t *ev, char *buf, size_t cap)
{
    int n;
    switch (ev->kind) {
    case VS_TRACE_ALLOC:
        if (ev->size == 0)
            return -EINVAL;
        n = snprintf(buf, cap, "A %" PRIu64 " %" PRIu64 " %c\n", ev->id, ev->size,
                     ev->evictable ? 'e' : 'n');
        break;
    case VS_TRACE_FREE:
        n = snprintf(buf, cap, "F %" PRIu64 "\n", ev->id);
        break;
    case VS_TRACE_USE: {
        size_t op_len = strnlen(ev->op, sizeof(ev->op));
        if (op_len == 0 || op_len > VS_TRACE_OP_MAX)
            return -EINVAL;
        for (size_t i = 0; i < op_len; i++)
            if (!is_op_char(ev->op[i]))
                return -EINVAL;
        if ((unsigned)ev->rw > VS_TRACE_WRITE)
            return -EINVAL;
        n = snprintf(buf, cap, "U %" PRIu64 " %" PRIu64 " %s 0x%" PRIx64 " %" PRIu64 " %c\n",
                     ev->seq, ev->id, ev->op, ev->stream, ev->time_ns, "urw"[ev->rw]);
        break;
    }
    case VS_TRACE_RESIDENCY:
        n = snprintf(buf, cap, "R %" PRIu64 " %c\n", ev->id, ev->resident ? '1' : '0');
        break;
    default:
        return -EINVAL;
    }
    if (n < 0)
        return -EINVAL;
    if ((size_t)n >= cap)
        return -ENOSPC;
    return n;
}

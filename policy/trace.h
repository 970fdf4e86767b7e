/*
 * trace.h: the VRAMSHIM_TRACE text format, its parser and its formatter.
 *
 * One event per line, fields separated by spaces or tabs; blank lines and
 * lines starting with '#' are ignored; numbers are decimal or 0x-hex and fit
 * in 64 bits; a line is at most VS_TRACE_LINE_MAX bytes (newline excluded).
 *
 *   A <id> <size> <e|n>                             allocation (evictable or not)
 *   F <id>                                          free
 *   U <seq> <id> <op> <stream> <time_ns> <r|w|u>    operation <seq> uses <id>
 *                                                   (read, write, unknown)
 *   R <id> <0|1>                                    residency change (1 = on device)
 *
 * <op> is 1 to VS_TRACE_OP_MAX characters from [A-Za-z0-9_.]. The parser
 * reads untrusted bytes from a buffer that need not be NUL-terminated: every
 * malformed line is rejected with -EINVAL, never read past.
 */
#ifndef VS_POLICY_TRACE_H
#define VS_POLICY_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VS_TRACE_LINE_MAX 512
#define VS_TRACE_OP_MAX 31

typedef enum vs_trace_kind_e {
    VS_TRACE_ALLOC,
    VS_TRACE_FREE,
    VS_TRACE_USE,
    VS_TRACE_RESIDENCY,
} vs_trace_kind_t;

typedef enum vs_trace_rw_e {
    VS_TRACE_RW_UNKNOWN,
    VS_TRACE_READ,
    VS_TRACE_WRITE,
} vs_trace_rw_t;

typedef struct vs_trace_event_s {
    vs_trace_kind_t kind;
    uint64_t id;
    uint64_t size;      /* ALLOC */
    bool evictable;     /* ALLOC */
    bool resident;      /* RESIDENCY */
    uint64_t seq;       /* USE */
    uint64_t stream;    /* USE */
    uint64_t time_ns;   /* USE */
    vs_trace_rw_t rw;   /* USE */
    char op[VS_TRACE_OP_MAX + 1]; /* USE, NUL-terminated */
} vs_trace_event_t;

/* Parses one line (without its newline; a trailing '\r' is allowed).
 * Returns 1 and fills `ev` for an event, 0 for a blank or comment line,
 * -EINVAL for anything else. */
int vs_trace_parse_line(const char *line, size_t len, vs_trace_event_t *ev);

typedef struct vs_trace_reader_s {
    const char *buf;
    size_t len;
    size_t pos;
    size_t line_no; /* 1-based number of the line last read */
} vs_trace_reader_t;

void vs_trace_reader_init(vs_trace_reader_t *reader, const char *buf, size_t len);
/* Returns 1 with the next event, 0 at the end, -EINVAL on a malformed line
 * (`reader->line_no` names it; a further call goes on after it). */
int vs_trace_reader_next(vs_trace_reader_t *reader, vs_trace_event_t *ev);

/* Writes `ev` as one line with its '\n' and a NUL into `buf`. Returns the
 * length without the NUL, -EINVAL for an event that would not parse back, or
 * -ENOSPC when `cap` is too small. */
int vs_trace_format(const vs_trace_event_t *ev, char *buf, size_t cap);

#endif

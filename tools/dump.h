/* dump.h: rendering a snapshot for people (`vramshim dump`, `ps`, `top`)
 * and for programs (`vramshim dump --json`, schema in tools/dump.schema.json).
 */
#ifndef VS_DUMP_H
#define VS_DUMP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "snapshot_reader.h"

#define VS_DUMP_JSON_SCHEMA_ID "vramshim-dump/1"

/* X(enum suffix, option value) */
#define VS_DUMP_SORTS(X)                                                                           \
    X(ID, "id")                                                                                    \
    X(SIZE, "size")                                                                                \
    X(LAST_USE, "last-use")                                                                        \
    X(AGE, "age")                                                                                  \
    X(STATE, "state")

typedef enum vs_dump_sort_e {
#define VS_DUMP_X(suffix, name) VS_DUMP_SORT_##suffix,
    VS_DUMP_SORTS(VS_DUMP_X)
#undef VS_DUMP_X
    VS_DUMP_SORT_COUNT
} vs_dump_sort_t;

typedef struct vs_dump_options_s {
    vs_dump_sort_t sort;
    int place;   /* vs_snapshot_place_t to keep only that place; -1 for all */
    bool bytes;  /* sizes as exact byte counts */
    bool json;
    uint64_t now_ns; /* CLOCK_MONOTONIC "now" for ages */
} vs_dump_options_t;

/* Parses an option value; -1 when unknown. */
int vs_dump_sort_parse(const char *name);
int vs_dump_place_parse(const char *name);

/* The rows of `view` that pass the filter, in the requested order: an
 * array of indexes (free() it), its length in *count. NULL on ENOMEM. */
uint32_t *vs_dump_select(const vs_snapshot_view_t *view, const vs_dump_options_t *opts,
                         uint32_t *count);

/* Writes the whole dump (text or JSON). 0 or -errno. */
int vs_dump_write(FILE *out, const vs_snapshot_view_t *view, const vs_dump_options_t *opts);

/* "1.50 GiB" (or "1610612736" when raw), "512 B". */
void vs_format_size(char *buf, size_t len, uint64_t bytes, bool raw);
/* "850ms", "12.3s", "4m05s", "2h03m", "3d04h". */
void vs_format_duration(char *buf, size_t len, uint64_t ns);
/* Where a row lives: "host", "device", "device, kept: small". */
void vs_format_place(char *buf, size_t len, const vs_snapshot_row_t *row);
/* The sum of the devices' limits; 0 when none is limited. */
uint64_t vs_dump_total_limit(const vs_snapshot_header_t *h);
/* The snapshot's program name as text output shows it: every byte that is
 * not printable ASCII (control characters, escape sequences, bytes a
 * terminal may take for C1 controls) becomes '?'. The name is whatever the
 * process called itself: printed raw, it could drive the reader's
 * terminal. */
void vs_format_program(char *buf, size_t len, const vs_snapshot_header_t *h);

uint64_t vs_dump_now_ns(void);

/* `s` as a JSON string, quotes included: bytes outside printable ASCII are
 * escaped, so the output is valid JSON whatever `s` holds. */
void vs_json_string(FILE *out, const char *s);

#endif /* VS_DUMP_H */

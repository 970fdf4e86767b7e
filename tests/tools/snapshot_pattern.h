/* snapshot_pattern.h: a snapshot whose every field derives from one
 * generation number, so that a copy mixing two publications (a torn row, or
 * rows from one publication and totals from another) is detectable.
 * Shared by the fixture process and the tests that read it.
 */
#ifndef VS_SNAPSHOT_PATTERN_H
#define VS_SNAPSHOT_PATTERN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot_abi.h"

#define VS_PATTERN_BASE_ADDRESS UINT64_C(0x7f0000000000)

static inline uint32_t vs_pattern_rows(uint64_t gen)
{
    return 8 + (uint32_t)(gen % 57);
}

static inline void vs_pattern_row(uint64_t gen, uint32_t i, vs_snapshot_row_t *r)
{
    memset(r, 0, sizeof(*r));
    r->alloc_id = i + 1;
    r->address = VS_PATTERN_BASE_ADDRESS + (uint64_t)i * 0x200000u;
    r->size = (uint64_t)(i + 1) * 4096u + gen;
    r->device = i % 2;
    r->kind = i % VS_SNAPSHOT_KIND_COUNT;
    r->place = (uint32_t)((gen + i) % VS_SNAPSHOT_PLACE_COUNT);
    r->keep = VS_SNAPSHOT_KEEP_NONE;
    r->created_ns = 1000u + i;
    r->last_use_ns = gen * 1000u + i;
    r->last_use_seq = gen;
    r->uses = gen + i;
    r->evictions = gen * 2u + i;
    r->restores = gen * 3u + i;
    for (int k = 0; k < 4; k++)
        r->reserved[k] = 0;
}

static inline void vs_pattern_totals(uint64_t gen, vs_snapshot_totals_t *t)
{
    memset(t, 0, sizeof(*t));
    uint32_t n = vs_pattern_rows(gen);
    for (uint32_t i = 0; i < n; i++) {
        vs_snapshot_row_t r;
        vs_pattern_row(gen, i, &r);
        if (r.place == VS_SNAPSHOT_PLACE_DEVICE)
            t->device_bytes += r.size;
        else if (r.place == VS_SNAPSHOT_PLACE_HOST)
            t->host_bytes += r.size;
        else
            t->disk_bytes += r.size;
    }
    t->allocations = n;
    t->evictions = gen;
    t->restores = gen;
    t->launches = gen * 7u;
    t->copies = gen * 5u;
}

/* Checks a whole published snapshot against the pattern of the
 * generation it names (`event_seq`). 0 when consistent; otherwise writes
 * what differs into `why`. */
static inline int vs_pattern_check(const vs_snapshot_header_t *h, const vs_snapshot_row_t *rows,
                                   char *why, size_t why_len)
{
    uint64_t gen = h->event_seq;
    if (h->row_count != vs_pattern_rows(gen)) {
        snprintf(why, why_len, "generation %llu: %u rows, expected %u", (unsigned long long)gen,
                 h->row_count, vs_pattern_rows(gen));
        return -1;
    }
    vs_snapshot_totals_t t;
    vs_pattern_totals(gen, &t);
    if (memcmp(&t, &h->totals, sizeof(t)) != 0) {
        snprintf(why, why_len, "generation %llu: totals from another publication",
                 (unsigned long long)gen);
        return -1;
    }
    for (uint32_t i = 0; i < h->row_count; i++) {
        vs_snapshot_row_t r;
        vs_pattern_row(gen, i, &r);
        if (memcmp(&r, &rows[i], sizeof(r)) != 0) {
            snprintf(why, why_len,
                     "generation %llu: row %u torn (size %llu, uses %llu, last_use_seq %llu)",
                     (unsigned long long)gen, i, (unsigned long long)rows[i].size,
                     (unsigned long long)rows[i].uses, (unsigned long long)rows[i].last_use_seq);
            return -1;
        }
    }
    return 0;
}

/* A complete, valid snapshot image of generation `gen` built in memory
 * the way the writer lays it out (for parsers and fuzzers, which need no
 * shared memory): header and published rows, 8-byte aligned, malloc'ed.
 * NULL on ENOMEM. */
static inline void *vs_pattern_image(uint64_t gen, size_t *len)
{
    uint32_t n = vs_pattern_rows(gen);
    *len = sizeof(vs_snapshot_header_t) + (size_t)n * sizeof(vs_snapshot_row_t);
    vs_snapshot_header_t *h = calloc(1, *len);
    if (!h)
        return NULL;
    h->magic = VS_SNAPSHOT_MAGIC;
    h->abi_version = VS_SNAPSHOT_ABI_VERSION;
    h->header_bytes = sizeof(vs_snapshot_header_t);
    h->row_bytes = sizeof(vs_snapshot_row_t);
    h->row_capacity = 128;
    h->sequence = gen * 2;
    h->pid = 4242;
    h->uid = 1000;
    h->start_ticks = 77;
    h->update_ns = gen * 1000u + 500u;
    h->publish_count = gen;
    h->event_seq = gen;
    h->mode = VS_SNAPSHOT_MODE_OFFLOAD;
    h->device_count = 2;
    h->row_count = n;
    for (uint32_t d = 0; d < 2; d++) {
        h->devices[d].ordinal = d;
        h->devices[d].limit_bytes = 1ull << 30;
        h->devices[d].physical_bytes = 80ull << 30;
    }
    vs_pattern_totals(gen, &h->totals);
    snprintf(h->program, sizeof(h->program), "pattern-%llu", (unsigned long long)gen);
    vs_snapshot_row_t *rows = (vs_snapshot_row_t *)(h + 1);
    for (uint32_t i = 0; i < n; i++)
        vs_pattern_row(gen, i, &rows[i]);
    return h;
}

#ifdef VS_SNAPSHOT_WRITER_H
/* Fills one publication of generation `gen` (between begin and end). */
static inline void vs_pattern_fill(vs_snapshot_t *snap, uint64_t gen)
{
    vs_snapshot_totals_t t;
    vs_pattern_totals(gen, &t);
    vs_snapshot_set_totals(snap, &t);
    vs_snapshot_set_event_seq(snap, gen);
    uint32_t n = vs_pattern_rows(gen);
    for (uint32_t i = 0; i < n; i++) {
        vs_snapshot_row_t r;
        vs_pattern_row(gen, i, &r);
        vs_snapshot_put_row(snap, i, &r);
    }
    vs_snapshot_set_row_count(snap, n);
}
#endif

#endif /* VS_SNAPSHOT_PATTERN_H */

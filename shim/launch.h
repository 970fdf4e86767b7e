/* launch.h: the launch-time parameter scan (launch.c): which 8-byte words a
 * kernel launch passes, for the registry to look up. Locks: the layouts
 * lock (internal.h), taken and let go inside; errors: bool "layout known".
 */
#ifndef VS_LAUNCH_H
#define VS_LAUNCH_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable list of words to look up, starting in the caller's buffer. */
typedef struct vs_words_s {
    uintptr_t *words;
    size_t count, capacity;
    uintptr_t *heap; /* set once the list outgrew the caller's buffer */
} vs_words_t;

#define VS_WORDS_INIT(buffer) {.words = (buffer), .count = 0, .capacity = sizeof(buffer) / sizeof((buffer)[0]), .heap = NULL}

/* Appends a word. */
void vs_words_add(vs_words_t *w, uintptr_t word);

/* Visits the words that find every evictable allocation overlapping
 * [addr, addr + bytes): the first and last byte and one word every
 * `VS_EVICT_MIN_BYTES` (no evictable allocation is smaller, so each one
 * the range overlaps holds one of them). Nothing for addr 0. */
void vs_range_visit(uintptr_t addr, uint64_t bytes, void (*visit)(uintptr_t word, void *arg), void *arg);
/* The same, appended to `w`. */
void vs_words_add_range(vs_words_t *w, uintptr_t addr, uint64_t bytes);
/* The bytes a strided operand spans from its first byte: `depth` slices of
 * `rows` rows, `height` of them used, `pitch` apart, `width` bytes each. */
uint64_t vs_strided_extent(uint64_t width, uint64_t height, uint64_t depth, uint64_t pitch, uint64_t rows);
/* Visits the device ranges of both sides of a 3-D copy, and of a memset. */
void vs_copy3d_visit(const CUDA_MEMCPY3D *p, void (*visit)(uintptr_t word, void *arg), void *arg);
void vs_memset_visit(const CUDA_MEMSET_NODE_PARAMS *p, void (*visit)(uintptr_t word, void *arg), void *arg);

/* The parameter scan. Gathers every 8-byte word of the parameters (layout
 * from the driver) and of the `extra` buffer into `w`. */
void vs_launch_gather(CUfunction f, void **kernel_params, void **extra, vs_words_t *w);
/* Visits every 8-byte word of the parameters (layout from the driver) and
 * of the `extra` buffer. Returns false when the layout is unknown. */
bool vs_launch_visit_words(CUfunction f, void **kernel_params, void **extra,
                           void (*visit)(uintptr_t word, void *arg), void *arg);
void vs_launch_remember_kernel(CUkernel kernel);
void vs_launch_forget_layouts(void);

#endif /* VS_LAUNCH_H */

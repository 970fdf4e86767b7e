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

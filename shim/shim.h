/* shim.h: what the interposition files share: the real-function table, the
 * export macro, lazy driver loading and the event counters.
 *
 * Compiled with `__CUDA_API_VERSION_INTERNAL` so that cuda.h declares every
 * versioned symbol under its real name and each wrapper is checked against
 * the toolkit's prototype.
 */
#ifndef VS_SHIM_H
#define VS_SHIM_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define VS_EXPORT __attribute__((visibility("default")))

/* For code on the `dlsym` path: a sanitizer runtime resolves its own
 * interceptors with `dlsym(RTLD_NEXT, ...)` before it is initialised, and
 * instrumented code must not run then. */
#define VS_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

/* Exported declarations: a wrapper defined in hooks_*.c becomes visible
 * because it was declared here, and nothing else does. */
#define VS_HOOK(family, symbol) VS_EXPORT __typeof__(symbol) symbol;
#include "hooks.def"
#undef VS_HOOK

/* The driver's own entry points, typed from cuda.h. Filled once by
 * `vs_shim_ready`; a symbol the driver lacks stays NULL. */
typedef struct vs_real_s {
#define VS_HOOK(family, symbol) __typeof__(symbol) *symbol;
#define VS_DRIVER(symbol) __typeof__(symbol) *symbol;
#include "hooks.def"
#include "driver.def"
#undef VS_DRIVER
#undef VS_HOOK
} vs_real_t;

extern vs_real_t vs_real;

/* Calls the real function, or answers CUDA_ERROR_NOT_FOUND when the loaded
 * driver does not have it (a program linked against a newer libcuda). */
#define VS_CALL(symbol, args) (vs_real.symbol != NULL ? vs_real.symbol args : CUDA_ERROR_NOT_FOUND)

/* Loads the driver and fills `vs_real` on first use, from any entry path and
 * before `cuInit`. Returns 0, or -EDEADLK when called again from inside the
 * loading itself on this thread (the driver's constructors), or -ENOENT
 * when the driver could not be opened. Cheap once loaded. */
int vs_shim_ready(void);

/* The handle of the driver the shim opened (NULL before `vs_shim_ready`). */
void *vs_shim_driver_handle(void);

/* The real `dlsym` of the C library. */
void *vs_shim_real_dlsym(void *handle, const char *name);

/* The physical memory of `device`: 0, or -ENOSYS/-EIO before the driver can
 * tell (before `cuInit`). */
int vs_shim_device_total(int device, uint64_t *bytes);

/* publish.c: the live snapshot for `vramshim ps/dump/top`, published from a
 * thread of its own once the driver is loaded, removed at exit. */
void vs_publish_start(void);
void vs_publish_stop(void);
/* In a forked child: drops the parent's snapshot without touching it. */
void vs_publish_forget(void);

/* The ordinal of the current context's device, or -1 without one. */
int vs_shim_current_device(void);

/* Whether the driver can describe kernel parameters (12.4+). */
bool vs_shim_has_param_info(void);

/* Event counters for the exit summary: X(name, description). */
#define VS_STATS(X)                                                                                \
    X(launches, "kernel launches seen")                                                            \
    X(launches_unscanned, "launches whose parameters could not be scanned")                        \
    X(graph_launches, "graph launches seen")                                                       \
    X(copies, "copies seen")                                                                       \
    X(memsets, "memsets seen")                                                                     \
    X(refused, "allocations refused by the cap")

/* Counters are per thread (each thread adds to its own block with plain
 * loads and stores: no locked instruction on the launch path) and summed
 * when read. Blocks are never freed: a thread's counts outlive it. */
typedef struct vs_stats_s {
#define VS_STAT_FIELD(name, description) _Atomic uint64_t name;
    VS_STATS(VS_STAT_FIELD)
#undef VS_STAT_FIELD
    struct vs_stats_s *next;
} vs_stats_t;

/* The calling thread's block (created on first use; NULL if out of memory). */
vs_stats_t *vs_stats_mine(void);

/* Totals over every thread. */
void vs_stats_sum(vs_stats_t *out);

static inline void vs_stats_bump(_Atomic uint64_t *counter)
{
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + 1, memory_order_relaxed);
}

#define VS_COUNT(name)                                                                             \
    do {                                                                                           \
        vs_stats_t *vs_mine_ = vs_stats_mine();                                                    \
        if (vs_mine_ != NULL)                                                                      \
            vs_stats_bump(&vs_mine_->name);                                                        \
    } while (0)

/* Writes the registry to `VRAMSHIM_DEBUG_SNAPSHOT` (when set): the
 * documented debugging hook tests read last-use stamps from. */
void vs_shim_debug_snapshot(void);

/* resolve.c: the wrapper standing in for a real driver function, or NULL. */
void *vs_resolve_wrapper_for_real(const void *real_function);
/* resolve.c: builds the pointer table once `vs_real` is filled. */
void vs_resolve_driver_loaded(void);

/* A growable list of words to look up, starting in the caller's buffer. */
typedef struct vs_words_s {
    uintptr_t *words;
    size_t count, capacity;
    uintptr_t *heap; /* set once the list outgrew the caller's buffer */
} vs_words_t;

#define VS_WORDS_INIT(buffer) {.words = (buffer), .count = 0, .capacity = sizeof(buffer) / sizeof((buffer)[0]), .heap = NULL}

/* Appends a word (launch.c). */
void vs_words_add(vs_words_t *w, uintptr_t word);

/* launch.c: the parameter scan. Gathers every 8-byte word of the
 * parameters (layout from the driver) and of the `extra` buffer into `w`. */
void vs_launch_gather(CUfunction f, void **kernel_params, void **extra, vs_words_t *w);
/* Visits every 8-byte word of the parameters (layout from the driver) and
 * of the `extra` buffer. Returns false when the layout is unknown. */
bool vs_launch_visit_words(CUfunction f, void **kernel_params, void **extra,
                           void (*visit)(uintptr_t word, void *arg), void *arg);
void vs_launch_remember_kernel(CUkernel kernel);
void vs_launch_forget_layouts(void);

/* Whether a versioned symbol is a per-thread-default-stream variant
 * (`_ptds`/`_ptsz`): folded to a constant at compile time. */
#define VS_PER_THREAD_SYMBOL(symbol)                                                               \
    (sizeof(#symbol) > 6 && (#symbol)[sizeof(#symbol) - 6] == '_' && (#symbol)[sizeof(#symbol) - 5] == 'p' \
     && (#symbol)[sizeof(#symbol) - 4] == 't')

#endif /* VS_SHIM_H */

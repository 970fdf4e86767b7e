/* hooks.h: what the interposition files (hooks_*.c, runtime.c, resolve.c)
 * share: the export macro and the exported declarations of every row of
 * hooks.def. They reach the driver through driver.h and count events with
 * stats.h, both included here.
 *
 * Compiled with `__CUDA_API_VERSION_INTERNAL` so that cuda.h declares every
 * versioned symbol under its real name and each wrapper is checked against
 * the toolkit's prototype.
 *
 * Errors: a hook returns the CUDA error type of the API it stands in for,
 * with the code the real driver would use (internal.h).
 */
#ifndef VS_HOOKS_H
#define VS_HOOKS_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "driver.h"
#include "stats.h"

#define VS_EXPORT __attribute__((visibility("default")))

/* Exported declarations: a wrapper defined in hooks_*.c becomes visible
 * because it was declared here, and nothing else does. */
#define VS_HOOK(family, symbol) VS_EXPORT __typeof__(symbol) symbol;
#include "hooks.def"
#undef VS_HOOK

/* Whether a versioned symbol is a per-thread-default-stream variant
 * (`_ptds`/`_ptsz`): folded to a constant at compile time. */
#define VS_PER_THREAD_SYMBOL(symbol)                                                               \
    (sizeof(#symbol) > 6 && (#symbol)[sizeof(#symbol) - 6] == '_' && (#symbol)[sizeof(#symbol) - 5] == 'p' \
     && (#symbol)[sizeof(#symbol) - 4] == 't')

#endif /* VS_HOOKS_H */

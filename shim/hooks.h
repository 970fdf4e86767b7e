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
#include "registry.h"
#include "stats.h"

#define VS_EXPORT __attribute__((visibility("default")))

/* Each wrapper starts with VS_ENTRY_PAD bytes of no-ops (after `endbr64`
 * where the build has control-flow protection): a library that patches the
 * functions `cuGetProcAddress` gave it writes its jump over them, and the
 * body after them stays whole, reachable at `vs_resolve_entry_body`
 * (resolve.c). */
#if defined(__x86_64__)
#define VS_ENTRY_PAD_COUNT 16 /* one-byte `nop`s */
#define VS_ENTRY_PAD 16
#elif defined(__aarch64__)
#define VS_ENTRY_PAD_COUNT 4 /* four-byte `nop`s */
#define VS_ENTRY_PAD 16
#endif
#ifdef VS_ENTRY_PAD
#define VS_PATCHABLE __attribute__((patchable_function_entry(VS_ENTRY_PAD_COUNT, 0)))
#else
#define VS_PATCHABLE
#endif

/* Exported declarations: a wrapper defined in hooks_*.c becomes visible
 * because it was declared here, and nothing else does. */
#define VS_HOOK(family, symbol) VS_EXPORT VS_PATCHABLE __typeof__(symbol) symbol;
#include "hooks.def"
#undef VS_HOOK

/* Whether a versioned symbol is a per-thread-default-stream variant
 * (`_ptds`/`_ptsz`): folded to a constant at compile time. */
#define VS_PER_THREAD_SYMBOL(symbol)                                                               \
    (sizeof(#symbol) > 6 && (#symbol)[sizeof(#symbol) - 6] == '_' && (#symbol)[sizeof(#symbol) - 5] == 'p' \
     && (#symbol)[sizeof(#symbol) - 4] == 't')

/* hooks_nccl.c: whether this thread is inside an NCCL call (what NCCL
 * allocates for itself stays plain device memory), and the `dlsym`
 * override's answer for an NCCL symbol `name` that resolved to `result`:
 * the wrapper, with the real function recorded. */
bool vs_nccl_inside(void);
void *vs_nccl_dlsym(void *handle, const char *name, void *result);

/* hooks_memory.c: takes `bytes` on `device` under the limit (evicting in
 * offload mode), or refuses with CUDA_ERROR_OUT_OF_MEMORY. *device_out is
 * -1 when nothing was taken (no device: the driver fails the call itself). */
CUresult vs_memory_reserve(int device, uint64_t bytes, int *device_out);
/* hooks_memory.c: forgets the device allocation at `dptr` before the
 * driver frees it (its record; true with it in *info when known), and,
 * once the driver has, takes its bytes off the count. */
bool vs_memory_forget(CUdeviceptr dptr, vs_alloc_info_t *info);
void vs_memory_uncharge(const vs_alloc_info_t *info);

/* hooks_graph.c: a call on capturing `stream` reaches the allocations at
 * `words` through memory of its own: the graph being captured holds them
 * and its launches restore them. */
void vs_graph_capture_names(CUstream stream, const uintptr_t *words, size_t count);

#endif /* VS_HOOKS_H */

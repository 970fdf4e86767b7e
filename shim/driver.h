/* driver.h: the bottom layer of the shim: the real driver's entry points
 * (`vs_real`, `VS_CALL`), loading them, and what the shim asks the driver
 * about itself (device totals, the current device, capability probes).
 *
 * Everything else in the shim reaches the driver through here, and this
 * layer includes nothing above it (only cuda.h, the two symbol lists, and
 * the configuration and logging utilities). It calls nothing above it
 * either: what must happen once the driver is loaded (the live snapshot)
 * is handed to it as a callback by the top layer (`vs_driver_on_load`).
 *
 * Compiled with `__CUDA_API_VERSION_INTERNAL` so that cuda.h declares every
 * versioned symbol under its real name and each pointer is typed from the
 * toolkit's prototype.
 *
 * Errors: the real driver's entry points return CUresult; the functions
 * declared here return 0 or -errno.
 */
#ifndef VS_DRIVER_H
#define VS_DRIVER_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* For code on the `dlsym` path: a sanitizer runtime resolves its own
 * interceptors with `dlsym(RTLD_NEXT, ...)` before it is initialised, and
 * instrumented code must not run then. */
#define VS_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

/* The driver's own entry points, typed from cuda.h. Filled once by
 * `vs_driver_ready`; a symbol the driver lacks stays NULL. */
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
int vs_driver_ready(void);

/* Registers `fn` to run once, right after the driver is loaded (at most
 * four). When it is loaded already, `fn` runs now. The top layer's
 * start-up registers what must follow loading; nothing here calls up. */
void vs_driver_on_load(void (*fn)(void));

/* Checks `VRAMSHIM_DRIVER`'s library at load, so that a wrong one stops the
 * program there (exit 2, one line) instead of failing every hooked call
 * later: it must open, export the driver's entry points (`cuInit`,
 * `cuGetProcAddress_v2`) and not be this library (which would call itself
 * forever). 0, or -errno with `why` (one line, no newline) filled. The
 * library stays loaded: the driver layer opens it again on first use. */
int vs_driver_check(const char *path, char *why, size_t why_len);

/* The CUDA version the offload mode needs: kernel parameter layouts
 * (`cuFuncGetParamInfo`, `cuKernelGetParamInfo`) came in 12.4. */
#define VS_DRIVER_PARAM_INFO_VERSION 12040

/* Probes the driver library `path` at load, in the offload mode, for what
 * the launch scan needs: a version of 12.4 or newer and
 * `cuFuncGetParamInfo`. 0 when it has both or when no such library opens
 * (no CUDA in this process: nothing to refuse); -ENOTSUP otherwise, with
 * `why` (one line, no newline) saying what the driver lacks and
 * *version its version (0: it did not report one). The library stays
 * loaded, as for `vs_driver_check`. */
int vs_driver_probe_param_info(const char *path, int *version, char *why, size_t why_len);

/* The handle of the driver the shim opened (NULL before it is loaded). */
void *vs_driver_handle(void);

/* Finds the C library's `dlsym` now (the constructor calls it; later
 * callers find it already known). */
void vs_driver_find_dlsym(void);

/* The real `dlsym` of the C library. */
void *vs_driver_real_dlsym(void *handle, const char *name);

/* The physical memory of `device`: 0, or -ENOSYS/-EIO before the driver can
 * tell (before `cuInit`). */
int vs_driver_device_total(int device, uint64_t *bytes);

/* The ordinal of the current context's device, or -1 without one. */
int vs_driver_current_device(void);

/* Whether the driver can describe kernel parameters (12.4+). */
bool vs_driver_has_param_info(void);

#endif /* VS_DRIVER_H */

/* simcuda.h: the public C API of the simulated driver for tests.
 *
 * Tests link `libcuda.so.1` from tests/simcuda (or dlopen it) and use these
 * exported `simcuda_*` functions to register their own kernels and to read
 * the clock. A registered kernel is found by name by `cuModuleGetFunction`
 * and `cuLibraryGetKernel` in any module or library, like the built-ins.
 *
 * A kernel is a host function run on the worker thread of the stream it was
 * launched on, after all earlier work of that stream. It receives one
 * pointer per parameter (into the driver's own copy of the arguments, made
 * at launch) and dereferences device pointers directly: device memory is
 * host memory in the simulator.
 */
#ifndef SIMCUDA_SIMCUDA_H
#define SIMCUDA_SIMCUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Launch geometry, for kernels that care. */
typedef struct simcuda_launch_s {
    unsigned grid[3];
    unsigned block[3];
    unsigned shared_bytes;
} simcuda_launch_t;

/* The kernel body: `args[i]` points at parameter i. */
typedef void (*simcuda_kernel_fn)(void **args, const simcuda_launch_t *launch, void *user);
/* Modeled duration in ns of one launch with these arguments (virtual clock). */
typedef uint64_t (*simcuda_cost_fn)(void **args, const simcuda_launch_t *launch, void *user);

typedef struct simcuda_kernel_desc_s {
    const char *name;            /* looked up by cuModuleGetFunction & co. */
    unsigned param_count;
    const size_t *param_sizes;   /* param_count entries */
    /* Either explicit offsets, or alignments from which offsets follow the
     * C ABI (each parameter at the next multiple of its alignment). With
     * both NULL each parameter is aligned to its size rounded up to a
     * power of two, at most 8. */
    const size_t *param_offsets;
    const size_t *param_aligns;
    simcuda_kernel_fn fn;
    void *user;
    /* Modeled cost: `cost` if set, else `cost_ns` for every launch. */
    simcuda_cost_fn cost;
    uint64_t cost_ns;
} simcuda_kernel_desc_t;

/* Registers a kernel. Returns 0, -EINVAL for a malformed description or a
 * layout with overlapping parameters, -EEXIST when the name is taken, or
 * -ENOMEM. */
int simcuda_register_kernel(const simcuda_kernel_desc_t *desc);

/* 1 when SIMCUDA_CLOCK=virtual, else 0. */
int simcuda_clock_is_virtual(void);
/* Host time: the calling thread's modeled host clock (virtual; one clock
 * for all threads with SIMCUDA_HOST_COSTS=off), or CLOCK_MONOTONIC ns
 * (real). Not a driver call: reading it costs no modeled time. */
uint64_t simcuda_clock_now_ns(void);
/* End of the virtual clock: the latest modeled time of any work or of any
 * thread's host clock so far (0 with the real clock). */
uint64_t simcuda_clock_end_ns(void);

/* Lane-instructions the PTX interpreter has executed in this process (one
 * per active lane per instruction), for speed measurements. */
uint64_t simcuda_lane_instructions(void);

/* How many times the exported driver function `symbol` (e.g.
 * "cuMemUnmap") was called in this process so far, by every thread, failed
 * calls included: the report's `calls`, for a test to read as it runs. 0
 * for a name the driver does not export. */
uint64_t simcuda_calls(const char *symbol);

/* The simulated driver's own implementation of the exported driver function
 * `symbol` (e.g. "cuLaunchKernel", "cuLaunchKernel_ptsz"), or NULL when it
 * exports no such function. Unlike `dlsym` or `cuGetProcAddress`, which an
 * LD_PRELOAD interposer answers, this reaches the driver itself: benchmarks
 * time a call with and without the interposer in one process. Cast the
 * result to the function's type from cuda.h. */
void *simcuda_entry_point(const char *symbol);

#ifdef __cplusplus
}
#endif

#endif /* SIMCUDA_SIMCUDA_H */

/* sim_internal.h: the contract between the files of the simulated driver.
 *
 * simcuda is split in two halves that meet only through this header:
 *   - the platform half (`sim_core.c`, `sim_memory.c`, `sim_procaddr.c`,
 *     `sim_fault.c`, `sim_report.c`): initialisation, devices, contexts and the
 *     current-context stack, every kind of memory, `cuGetProcAddress`, fault
 *     injection, the exit report;
 *   - the execution half (`sim_stream.c`, `sim_event.c`, `sim_copy.c`,
 *     `sim_kernel.c`, `sim_builtin.c`, `sim_graph.c`, `sim_clock.c`): streams and
 *     their worker threads, events, copies and memsets, modules and kernels,
 *     capture and graphs, the virtual clock.
 *
 * Every exported driver function is one row of `api_platform.def` or
 * `api_exec.def`. The rows expand into the call counters of the report, the
 * fault-injection targets and the `cuGetProcAddress` table, so a function
 * that is not listed cannot be reached through `cuGetProcAddress`.
 *
 * The whole library is compiled with `__CUDA_API_VERSION_INTERNAL` so that
 * `cuda.h` declares every versioned symbol (`cuMemAlloc` and `cuMemAlloc_v2`,
 * `cuMemcpyHtoD_v2` and `cuMemcpyHtoD_v2_ptds`, ...) under its real name and
 * the compiler checks each definition against the toolkit's prototype.
 */
#ifndef SIMCUDA_SIM_INTERNAL_H
#define SIMCUDA_SIM_INTERNAL_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_EXPORT __attribute__((visibility("default")))
#define SIM_HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------------------
 * The API table.
 *
 * SIM_API(symbol, request, version, variant, fault_error)
 *   symbol      the exported C symbol (`cuMemAlloc_v2`)
 *   request     the name callers pass to `cuGetProcAddress` (`cuMemAlloc`)
 *   version     the lowest CUDA version (as in `CUDA_VERSION`) at which that
 *               request resolves to this symbol (3020 for `cuMemAlloc_v2`)
 *   variant     SIM_PLAIN, or SIM_PER_THREAD for the `_ptsz`/`_ptds` forms
 *               returned when flags ask for the per-thread default stream
 *   fault_error what an injected failure of this call returns: the error the
 *               real driver would give at that point
 * ------------------------------------------------------------------------ */
#define SIM_PLAIN 0
#define SIM_PER_THREAD 1

typedef enum sim_api_id_e {
#define SIM_API(symbol, request, version, variant, fault_error) SIM_ID_##symbol,
#include "api_platform.def"
#include "api_exec.def"
#undef SIM_API
    SIM_API_COUNT
} sim_api_id_t;

#define SIM_ID(symbol) SIM_ID_##symbol

typedef struct sim_api_entry_s {
    const char *symbol;
    const char *request;
    int version;
    int variant;
    CUresult fault_error;
    void *function;
} sim_api_entry_t;

/* Indexed by `sim_api_id_t`. Defined in `sim_procaddr.c`. */
SIM_HIDDEN extern const sim_api_entry_t sim_api_table[SIM_API_COUNT];

/* What an exported function needs before its own checks: nothing, or a
 * driver that `cuInit` has initialised. */
typedef enum sim_need_e {
    SIM_NEED_NOTHING,
    SIM_NEED_INIT,
    /* As SIM_NEED_INIT, but the call charges its host cost itself, once it
     * knows what it costs (`cuMemRelease`: a handle still mapped). */
    SIM_NEED_INIT_PRICED_BY_CALL,
} sim_need_t;

/* The entry preamble, the first statement of every exported function:
 *     CUresult entry = SIM_ENTER(cuMemCreate, SIM_NEED_INIT);
 *     if (entry != CUDA_SUCCESS)
 *         return entry;
 * Counts the call for the report, returns the injected error when
 * `SIMCUDA_FAIL` selects this call, then CUDA_ERROR_NOT_INITIALIZED when
 * `need` is SIM_NEED_INIT and `cuInit` has not run; CUDA_SUCCESS otherwise.
 * The fault comes first, so an injected failure is seen before any other
 * error, as the real driver's would be. Lock-free on the common path.
 * `sim_api_enter` is defined in `sim_fault.c`. */
#define SIM_ENTER(symbol, need) sim_api_enter(SIM_ID(symbol), (need))

/* The priority range reported for streams (and by
 * cuCtxGetStreamPriorityRange): 0 (least) to -5 (greatest), as on current
 * GPUs. */
#define SIM_PRIORITY_LEAST 0
#define SIM_PRIORITY_GREATEST (-5)
SIM_HIDDEN CUresult sim_api_enter(sim_api_id_t id, sim_need_t need);

/* ------------------------------------------------------------------------
 * Configuration helpers (sim_core.c)
 * ------------------------------------------------------------------------ */

/* Parses a size such as "1G", "512M", "4096", "1.5G" (K/M/G/T ×1024).
 * Returns 0 on success, -EINVAL on malformed input. */
SIM_HIDDEN int sim_parse_size(const char *text, uint64_t *out);

/* Reads an environment variable as a size; a malformed value is reported on
 * stderr naming the variable and the default is used. */
SIM_HIDDEN uint64_t sim_env_size(const char *name, uint64_t fallback);
SIM_HIDDEN double sim_env_double(const char *name, double fallback);

/* `SIMCUDA_DRIVER_VERSION`: the CUDA version this driver claims to be
 * (`cuDriverGetVersion`); entry points introduced later are unknown to
 * `cuGetProcAddress`. Read once, from whichever call comes first (it is
 * asked before `cuInit`); `CUDA_VERSION` when unset or malformed. */
SIM_HIDDEN int sim_driver_version(void);

/* `SIMCUDA_VMM=0`: the devices have no virtual memory management
 * (`cuMemCreate` and `cuMemAddressReserve` answer
 * CUDA_ERROR_NOT_SUPPORTED, the attribute reads 0). Read once. */
SIM_HIDDEN bool sim_vmm_supported(void);

/* `SIMCUDA_HOST_VMM=0`: the devices cannot create host-located memory with
 * `cuMemCreate` (`CU_MEM_LOCATION_TYPE_HOST`, `..._HOST_NUMA`): the two
 * attributes read 0 and such a `cuMemCreate` answers
 * CUDA_ERROR_NOT_SUPPORTED. Also false under `SIMCUDA_VMM=0`. Read once. */
SIM_HIDDEN bool sim_host_vmm_supported(void);

/* ------------------------------------------------------------------------
 * Devices and contexts (sim_core.c)
 * ------------------------------------------------------------------------ */

typedef struct sim_device_s {
    int ordinal;
    char name[64];
    CUuuid uuid;
    uint64_t total_bytes;        /* SIMCUDA_DEVICE_MEM */
    _Atomic uint64_t used_bytes; /* device memory physically in use, every kind */
    _Atomic uint64_t peak_bytes;
    uintptr_t va_base;           /* this device's slice of the reserved range */
    uintptr_t va_size;
    pthread_mutex_t lock;        /* guards primary-context state */
    struct CUctx_st *primary;    /* created on first retain, kept until exit */
    int primary_refcount;
    unsigned primary_flags;
} sim_device_t;

struct CUstream_st;

/* Peer contexts one context may enable at once; one more is
 * CUDA_ERROR_TOO_MANY_PEERS (real GPUs allow about 8 per device). */
#define SIM_MAX_PEERS 16

struct CUctx_st {
    sim_device_t *device;
    bool is_primary;
    unsigned flags;
    /* `cuCtxGetId`: unique for the life of the process (never reused, as
     * addresses of destroyed contexts may be). */
    unsigned long long id;
    /* The legacy NULL stream of this context: created with the context,
     * never destroyed while the context lives. Owned by the execution half. */
    struct CUstream_st *legacy_stream;
    /* Live streams of this context, for legacy-stream and context-wide
     * synchronisation. Guarded by `streams_lock`. */
    pthread_mutex_t streams_lock;
    struct CUstream_st **streams;
    size_t stream_count, stream_capacity;
    /* Destroyed streams whose work had not completed (referenced): a
     * context-wide or legacy-stream host wait still covers their work, as
     * on the real driver. Pruned once drained. Guarded by `streams_lock`. */
    struct CUstream_st **retired;
    size_t retired_count, retired_capacity;
    /* Default memory pool of `cuMemAllocAsync`. Owned by the platform half. */
    struct CUmemPoolHandle_st *default_pool;
    /* Contexts whose ordinary allocations this context's kernels may touch
     * (`cuCtxEnablePeerAccess`); NULL slots are free. Written under the
     * peer lock of `sim_peer.c`, read lock-free by kernels' access checks. */
    _Atomic(struct CUctx_st *) peers[SIM_MAX_PEERS];
};

/* At most this many simulated devices (`SIMCUDA_DEVICES`). */
#define SIM_MAX_DEVICES 16

SIM_HIDDEN extern int sim_device_count;
SIM_HIDDEN extern sim_device_t *sim_devices;

/* True once `cuInit` has succeeded. */
SIM_HIDDEN bool sim_initialized(void);

/* The calling thread's current context, or NULL. */
SIM_HIDDEN CUcontext sim_ctx_current(void);

/* The current context for an API call: CUDA_ERROR_NOT_INITIALIZED before
 * `cuInit`, CUDA_ERROR_INVALID_CONTEXT when none is current. */
SIM_HIDDEN CUresult sim_ctx_require(CUcontext *out);

/* Hooks the execution half provides so contexts own their streams:
 * called when a context is created and destroyed. */
SIM_HIDDEN CUresult sim_exec_ctx_created(CUcontext ctx);
SIM_HIDDEN void sim_exec_ctx_destroying(CUcontext ctx);

/* Waits for all work of every stream of the context (`cuCtxSynchronize`). */
SIM_HIDDEN CUresult sim_exec_ctx_synchronize(CUcontext ctx);

/* ------------------------------------------------------------------------
 * Memory classification (sim_memory.c), used by copies
 * ------------------------------------------------------------------------ */

typedef enum sim_mem_kind_e {
    SIM_MEM_PAGEABLE = 0, /* ordinary host memory */
    SIM_MEM_PINNED,       /* cuMemHostAlloc / cuMemAllocHost / registered */
    SIM_MEM_DEVICE,       /* inside a device's reserved range */
    SIM_MEM_MANAGED,      /* cuMemAllocManaged */
} sim_mem_kind_t;

/* What kind of memory `address` points into; for device memory also which
 * device (else *device_out is left alone). Safe from any thread. */
SIM_HIDDEN sim_mem_kind_t sim_mem_classify(uintptr_t address, int *device_out);

/* The bytes of host-located memory (`cuMemCreate` with a host location,
 * mapped) that a kernel's packed arguments `args[0..size)` reach: every
 * 8-byte-aligned word is taken for a pointer (types are unknown, and
 * by-value structs hold pointers too), and each distinct mapping one
 * points into counts whole, once. For the virtual clock, which charges
 * those bytes at the host-to-device link's bandwidth. Safe from any
 * thread. */
SIM_HIDDEN uint64_t sim_mem_host_located_bytes(const void *args, size_t size);

/* ------------------------------------------------------------------------
 * Execution services used by the platform half (sim_stream.c)
 * ------------------------------------------------------------------------ */

/* Resolves a stream handle as given by the application (NULL,
 * CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a created stream) for the current
 * context. `per_thread_variant` is true for `_ptsz`/`_ptds` entry points, where
 * NULL means the per-thread default stream. Returns NULL (and sets *error)
 * for an invalid handle. */
SIM_HIDDEN struct CUstream_st *sim_stream_resolve(CUstream handle, bool per_thread_variant, CUresult *error);

/* A reference on a stream, kept past its destruction (the pool remembers
 * the stream a block was freed on), and its context. */
SIM_HIDDEN void sim_stream_ref(struct CUstream_st *stream);
SIM_HIDDEN void sim_stream_unref(struct CUstream_st *stream);
SIM_HIDDEN CUcontext sim_stream_ctx(const struct CUstream_st *stream);

/* Enqueues a host-side step on a stream, ordered with its other work (used by
 * `cuMemFreeAsync` and `cuMemAllocAsync`). During capture it is recorded into
 * the graph instead. */
SIM_HIDDEN CUresult sim_stream_enqueue_host(struct CUstream_st *stream, void (*fn)(void *), void *arg);

/* A call that is illegal during global-mode capture on this thread (a
 * synchronous allocation, a context-wide sync): invalidates the capture and
 * returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; else CUDA_SUCCESS. */
SIM_HIDDEN CUresult sim_capture_check_unsafe_call(void);

/* ------------------------------------------------------------------------
 * Statistics for the report (sim_report.c reads, everyone writes)
 * ------------------------------------------------------------------------ */

typedef struct sim_stats_s {
    _Atomic uint64_t copied_htod;
    _Atomic uint64_t copied_dtoh;
    _Atomic uint64_t copied_dtod;
    _Atomic uint64_t copied_htoh;
    _Atomic uint64_t kernels;
    _Atomic uint64_t faults_injected;
    _Atomic uint64_t calls[SIM_API_COUNT];
} sim_stats_t;

SIM_HIDDEN extern sim_stats_t sim_stats;

/* End of the virtual clock in ns: the latest time of every timeline and of
 * the host clocks (0 with the real clock). Defined in `sim_clock.c`. */
SIM_HIDDEN uint64_t sim_clock_modeled_ns(void);

/* Host costs of the virtual clock (`SIMCUDA_HOST_COSTS`), in `sim_clock.c`.
 * `sim_clock_host_call` charges the calling thread the fixed cost of call
 * `id` (from `sim_api_enter`, so every call pays); a call whose cost grows
 * with a size adds `sim_clock_host_sized` once it knows the bytes. Both do
 * nothing with the real clock or with costs off. */
SIM_HIDDEN void sim_clock_host_call(sim_api_id_t id);
SIM_HIDDEN void sim_clock_host_sized(sim_api_id_t id, uint64_t bytes);
/* A call entered with SIM_NEED_INIT_PRICED_BY_CALL: charges `cost_ns` as
 * its fixed cost (`sim_clock_host_call` charges the table's), then
 * `sim_clock_host_sized` as usual. */
SIM_HIDDEN void sim_clock_host_call_priced(sim_api_id_t id, uint64_t cost_ns);
/* More of call `id`'s cost, before its size part: `count` times
 * `priced_as`'s fixed cost and `priced_as`'s cost per GiB of `bytes`, as part
 * of that call. As on an H200 (`bench/gpu/host_costs`): a call over a range
 * that several mappings tile (`cuMemSetAccess`, `cuMemUnmap`) costs its own
 * fixed cost once per mapping (a grant over 4 MiB + 4 MiB mappings 52.6 us,
 * one over a 2 MiB mapping 25.6; sixteen 2 MiB pieces 458 us), and an unmap
 * that frees handles released while mapped pays their releases (a release
 * of a mapped handle 0.08-0.10 us, the unmap after it 34.4 us at 8 MiB
 * against about 20 + 15 apart). */
SIM_HIDDEN void sim_clock_host_more(sim_api_id_t id, sim_api_id_t priced_as, size_t count, uint64_t bytes);
/* Reports a malformed SIMCUDA_HOST_COSTS and exits with status 2 (from
 * cuInit: the harness asked for a model it would not get). */
SIM_HIDDEN void sim_clock_check_config(void);
/* Writes the "clock" member of the exit report: the host-cost setting, per
 * device each engine's busy time and the GPU idle fraction, per thread its
 * host figures. */
SIM_HIDDEN void sim_clock_report(FILE *out);

/* Records device memory that became physically used (+) or free (-), and the
 * peak. Defined in `sim_memory.c`. */
SIM_HIDDEN void sim_device_account(sim_device_t *device, int64_t delta_bytes);

/* ------------------------------------------------------------------------
 * Platform-half services added for both halves
 * ------------------------------------------------------------------------ */

/* Looks up a `CUDA_ERROR_*` (or `CUDA_SUCCESS`) name as spelled in cuda.h.
 * Returns 0, or -ENOENT for an unknown name. Defined in `sim_core.c`. */
SIM_HIDDEN int sim_error_from_name(const char *name, CUresult *out);

/* The device of an ordinal: CUDA_ERROR_NOT_INITIALIZED before `cuInit`,
 * CUDA_ERROR_INVALID_DEVICE for an ordinal out of range. */
SIM_HIDDEN CUresult sim_device_get(CUdevice ordinal, sim_device_t **out);

/* True when `ctx` is a live context (primary or created). */
SIM_HIDDEN bool sim_ctx_valid(CUcontext ctx);

/* Charges `bytes` of device memory against the device's capacity: 0, or
 * -ENOMEM (nothing charged) when it would exceed `total_bytes`. Undo with
 * `sim_device_account(device, -(int64_t)bytes)`. Defined in `sim_memory.c`. */
SIM_HIDDEN int sim_device_charge(sim_device_t *device, uint64_t bytes);

/* The live device allocation (cuMemAlloc*, pool, managed, or one VMM
 * mapping) containing `address`: 0 with its base and size, or -ENOENT.
 * Defined in `sim_memory.c`. */
SIM_HIDDEN int sim_mem_range(uintptr_t address, uintptr_t *base_out, size_t *size_out);

/* Internal to the platform half (sim_core.c calls sim_memory.c and
 * sim_fault.c). */
SIM_HIDDEN int sim_memory_init(void);
SIM_HIDDEN void sim_memory_ctx_destroying(CUcontext ctx);
SIM_HIDDEN struct CUmemPoolHandle_st *sim_memory_default_pool(sim_device_t *device);
SIM_HIDDEN void sim_fault_check_config(void);

/* ------------------------------------------------------------------------
 * Which device may touch which memory (sim_peer.c, sim_memory.c)
 *
 * A kernel runs on its stream's context. It may touch: its own device's
 * ordinary, pool and module memory; managed memory anywhere; another
 * device's ordinary (`cuMemAlloc`) memory only when its context has
 * enabled peer access to the owning context; a VMM mapping only when
 * `cuMemSetAccess` granted its device (writes need READWRITE). Peer access
 * does not apply to VMM or pool memory. Copies are not checked: the copy
 * engines reach every device's memory, with or without peer access.
 * ------------------------------------------------------------------------ */

/* True when `ctx` has enabled peer access to `owner`'s allocations. */
SIM_HIDDEN bool sim_ctx_has_peer(CUcontext ctx, CUcontext owner);
/* Drops `gone` from every context's peers (it is being destroyed), and
 * every peer of its own. Defined in `sim_core.c`. */
SIM_HIDDEN void sim_ctx_forget_peers(CUcontext gone);

/* Bumped whenever an access answer may change (peer access enabled or
 * disabled, `cuMemSetAccess`, memory freed or unmapped): kernels' cached
 * answers older than it are asked again. */
SIM_HIDDEN extern _Atomic uint64_t sim_access_generation;

/* What the calling thread's running kernel may touch: `ctx` is NULL outside
 * kernels; [lo, hi) is the last range found accessible (writable or not)
 * at `generation`. */
typedef struct sim_kernel_view_s {
    CUcontext ctx;
    const char *kernel;
    uintptr_t lo, hi;
    bool writable;
    uint64_t generation;
} sim_kernel_view_t;
SIM_HIDDEN extern _Thread_local sim_kernel_view_t sim_kernel_view;

/* The slow path of `sim_kernel_touch`: looks the range up; when the
 * kernel's device may not touch it, prints one line naming the kernel, the
 * devices and the address, and raises SIGSEGV, as an illegal address stops a
 * simulated program everywhere else. Defined in `sim_memory.c`. */
SIM_HIDDEN void sim_kernel_touch_check(uintptr_t address, size_t bytes, bool write);

/* Every access a kernel makes to global memory passes here first. */
static inline void sim_kernel_touch(const void *pointer, size_t bytes, bool is_write)
{
    sim_kernel_view_t *v = &sim_kernel_view;
    uintptr_t a = (uintptr_t)pointer;
    if (v->ctx == NULL)
        return;
    if (a >= v->lo && a + bytes <= v->hi && (v->writable || !is_write) &&
        v->generation == atomic_load_explicit(&sim_access_generation, memory_order_acquire))
        return;
    sim_kernel_touch_check(a, bytes, is_write);
}

/* Loads a module from any image the driver accepts (fatbin wrapper, fatbin
 * container, ELF cubin, PTX text) for the current context. Shared by
 * `cuModuleLoadData` and the runtime's export table. Defined in
 * `sim_module.c`. */
SIM_HIDDEN CUresult sim_module_load_image(CUmodule *module, const void *image);

#endif /* SIMCUDA_SIM_INTERNAL_H */

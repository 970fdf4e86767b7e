/* sim_exec.h: internal interfaces of the execution half of simcuda.
 *
 * Only the execution files (`sim_stream.c`, `sim_event.c`, `sim_copy.c`,
 * `sim_kernel.c`, `sim_builtin.c`, `sim_graph.c`, `sim_clock.c`) include this
 * header; the platform half sees the execution half only through
 * `sim_internal.h`.
 *
 * The model: every piece of device work is a command (`sim_cmd_t`). Submitting
 * a command to a stream either queues it as an operation for the stream's
 * worker thread, or, while the stream is being captured, records it as a node
 * of the capture's graph. A graph launch submits copies of its nodes'
 * commands in a topological order.
 *
 * Locking: `sim_submit_lock` serialises every submission, stream creation and
 * destruction, event record/wait and all capture state. It is never taken by
 * worker threads, which only take the lock of one stream at a time to pop
 * work, publish completion or wait for a dependency. Lock order:
 * `sim_submit_lock` -> `ctx->streams_lock` -> stream `lock` -> clock lock.
 */
#ifndef SIMCUDA_SIM_EXEC_H
#define SIMCUDA_SIM_EXEC_H

#include "sim_internal.h"
#include "simcuda.h"

/* ------------------------------------------------------------------------
 * Kernels (sim_kernel.c)
 * ------------------------------------------------------------------------ */

#define SIM_KERNEL_MAGIC 0x4b45524eu /* "KERN" */

/* One registered kernel. `CUfunction` and `CUkernel` handles both point at
 * it, which is how a `CUkernel` cast to `CUfunction` keeps working.
 * Registered kernels live until the process exits. */
typedef struct sim_kernel_s {
    uint32_t magic;
    char *name;
    unsigned param_count;
    size_t *param_offsets;
    size_t *param_sizes;
    size_t args_size; /* end of the last parameter */
    simcuda_kernel_fn fn;
    simcuda_cost_fn cost;
    uint64_t cost_ns;
    void *user;
    struct sim_kernel_s *next;
    /* A kernel of a loaded module: its PTX entry (sim_module.c), run by the
     * interpreter instead of `fn`. */
    const struct ptx_module_s *ptx_module;
    const struct ptx_func_s *ptx_func;
    struct CUmod_st *module;
} sim_kernel_t;

/* Looks up a kernel by name (built-ins are registered on first use). */
SIM_HIDDEN sim_kernel_t *sim_kernel_find(const char *name);
/* The kernel behind a `CUfunction`/`CUkernel` handle, or NULL. */
SIM_HIDDEN sim_kernel_t *sim_kernel_from_handle(const void *handle);
/* Runs a module kernel with the PTX interpreter (sim_module.c). */
SIM_HIDDEN void sim_module_execute(const sim_kernel_t *kernel, const unsigned char *args, const unsigned grid[3],
                                   const unsigned block[3], unsigned shared_bytes);
/* Attributes a module kernel knows from its PTX (shared and local sizes,
 * PTX version); false for the others. */
SIM_HIDDEN bool sim_module_attribute(const sim_kernel_t *kernel, CUfunction_attribute attribute, int *value);
/* Registers the built-in kernels (sim_builtin.c). */
SIM_HIDDEN void sim_builtin_register_all(void);

/* ------------------------------------------------------------------------
 * Commands
 * ------------------------------------------------------------------------ */

typedef enum sim_cmd_kind_e {
    SIM_CMD_EMPTY = 0,
    SIM_CMD_KERNEL,
    SIM_CMD_COPY,
    SIM_CMD_SET,
    SIM_CMD_HOST,
    SIM_CMD_EVENT_RECORD,
    SIM_CMD_EVENT_WAIT,
    SIM_CMD_MEMOP,
    SIM_CMD_GRAPH,      /* a child graph: its body runs inline on the worker */
    SIM_CMD_COND,       /* a conditional node: which body runs is decided there */
    SIM_CMD_COND_RESET, /* the start of a graph launch: defaults of its handles */
} sim_cmd_kind_t;

struct sim_cmd_s;
struct sim_cond_handle_s;

/* The commands of a child graph or a conditional node's body, in creation
 * (topological) order, run one after the other on the worker. */
typedef struct sim_body_s {
    struct sim_cmd_s *cmds;
    size_t count;
} sim_body_t;

/* A conditional handle (`cuGraphConditionalHandleCreate`): the value
 * device code sets and conditional nodes read. Handles live until the
 * process exits (an executable graph may outlive its graph). */
typedef struct sim_cond_handle_s {
    uint32_t magic;
    void *graph; /* the CUgraph it was created for */
    unsigned default_value;
    unsigned flags;
    _Atomic unsigned value;
} sim_cond_handle_t;

/* Sets a handle's value from device code (the built-in kernel
 * `sim_set_conditional`); false for an unknown handle. */
SIM_HIDDEN bool sim_cond_set(uint64_t handle, unsigned value);

/* A 3-D strided copy; a linear copy is width = bytes, height = depth = 1. */
typedef struct sim_copy_desc_s {
    uintptr_t dst, src;
    size_t dst_pitch, dst_height; /* bytes per row, rows per slice */
    size_t src_pitch, src_height;
    size_t width, height, depth;  /* bytes per row, rows, slices */
} sim_copy_desc_t;

typedef struct sim_set_desc_s {
    uintptr_t dst;
    size_t pitch;      /* bytes between rows */
    size_t width;      /* elements per row */
    size_t height;     /* rows */
    unsigned elem_size;/* 1, 2 or 4 */
    uint32_t value;
} sim_set_desc_t;

/* A batch of stream memory operations (`cuStreamWriteValue*`,
 * `cuStreamWaitValue*`, `cuStreamBatchMemOp`), validated at submission;
 * `ops` is owned. */
typedef struct sim_memop_desc_s {
    CUstreamBatchMemOpParams *ops;
    unsigned count;
} sim_memop_desc_t;

typedef struct sim_launch_desc_s {
    sim_kernel_t *kernel;
    unsigned grid[3], block[3], shared_bytes;
    unsigned char *args;  /* owned copy of the argument buffer */
    size_t args_size;
    void **param_ptrs;    /* owned; param_ptrs[i] = args + offset[i] */
} sim_launch_desc_t;

typedef struct sim_cmd_s {
    sim_cmd_kind_t kind;
    union {
        sim_launch_desc_t launch;
        sim_copy_desc_t copy;
        sim_set_desc_t set;
        sim_memop_desc_t memop;
        sim_body_t graph; /* SIM_CMD_GRAPH */
        struct {
            sim_cond_handle_t *handle;
            CUgraphConditionalNodeType type;
            unsigned size;
            sim_body_t *bodies; /* `size` of them, owned */
        } cond;
        struct {
            sim_cond_handle_t **handles; /* owned array */
            size_t count;
        } reset;
        struct { void (*fn)(void *); void *arg; } host;
        struct CUevent_st *event; /* RECORD and WAIT hold a reference */
    } u;
} sim_cmd_t;

/* Frees and deep-copies a body. */
SIM_HIDDEN void sim_body_release(sim_body_t *body);
SIM_HIDDEN CUresult sim_body_clone(sim_body_t *dst, const sim_body_t *src);

/* Frees what a command owns (argument copies, event references). */
SIM_HIDDEN void sim_cmd_release(sim_cmd_t *cmd);
/* Deep copy. Returns CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY. */
SIM_HIDDEN CUresult sim_cmd_clone(sim_cmd_t *dst, const sim_cmd_t *src);
/* Runs the command's work on the calling (worker) thread. */
SIM_HIDDEN void sim_cmd_execute(const sim_cmd_t *cmd, uint64_t event_gen);
/* Builds the owned argument copy of a launch from `kernelParams` or `extra`. */
SIM_HIDDEN CUresult sim_launch_build(sim_launch_desc_t *out, sim_kernel_t *kernel, void **kernel_params, void **extra);
SIM_HIDDEN void sim_launch_execute(const sim_launch_desc_t *launch);
SIM_HIDDEN uint64_t sim_launch_cost_ns(const sim_launch_desc_t *launch);
SIM_HIDDEN void sim_copy_execute(const sim_copy_desc_t *copy);
SIM_HIDDEN void sim_set_execute(const sim_set_desc_t *set);
SIM_HIDDEN uint64_t sim_copy_bytes(const sim_copy_desc_t *copy);
/* The command of a 3-D copy, checked as `cuMemcpy3D` checks it; *empty
 * when it copies nothing (then `*copy` is untouched). */
SIM_HIDDEN CUresult sim_copy_desc_from_3d(const CUDA_MEMCPY3D *params, sim_copy_desc_t *copy, bool *empty);
/* The command of a memset, checked as `cuMemsetD2D*` check it. */
SIM_HIDDEN CUresult sim_set_desc_build(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned elem_size, size_t width,
                                       size_t height, sim_set_desc_t *set, bool *empty);
/* Runs a batch of stream memory operations on the worker (sim_memop.c):
 * waits poll the memory until their condition holds. */
SIM_HIDDEN void sim_memop_execute(const sim_memop_desc_t *memop);

/* ------------------------------------------------------------------------
 * Streams (sim_stream.c)
 * ------------------------------------------------------------------------ */

#define SIM_STREAM_MAGIC 0x5354524du /* "STRM" */
#define SIM_STREAM_DEAD 0x44454144u  /* "DEAD" */

typedef struct sim_op_s sim_op_t;
struct sim_capture_s;

/* A point in a stream's queue: done once the stream has completed `seq`.
 * Holds a reference on the stream. `vt_ns` is its modeled time. */
typedef struct sim_dep_s {
    struct CUstream_st *stream;
    uint64_t seq;
    uint64_t vt_ns;
} sim_dep_t;

struct CUstream_st {
    uint32_t magic;
    _Atomic int refs;
    CUcontext ctx;
    unsigned flags;
    int priority;
    unsigned long long id;
    bool is_legacy, is_per_thread;
    bool destroyed; /* handle released; the worker exits once drained */

    /* Queue and progress: `lock` guards these, `cond` announces a pop-able
     * operation and every completion. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    sim_op_t *head, *tail;
    uint64_t completed_seq;
    bool worker_started;

    /* Guarded by `sim_submit_lock`. */
    uint64_t enqueued_seq;
    uint64_t vt_tail_ns; /* modeled end of the last enqueued operation */
    struct sim_capture_s *capture;
    CUgraphNode *frontier; /* capture: what the next node depends on */
    size_t frontier_count, frontier_cap;
};

SIM_HIDDEN extern pthread_mutex_t sim_submit_lock;

SIM_HIDDEN void sim_stream_ref(struct CUstream_st *stream);
SIM_HIDDEN void sim_stream_unref(struct CUstream_st *stream);
SIM_HIDDEN bool sim_stream_is_blocking(const struct CUstream_st *stream);
/* Submits `cmd` (ownership passes, also on failure). Caller holds
 * `sim_submit_lock`. */
SIM_HIDDEN CUresult sim_submit_locked(struct CUstream_st *stream, sim_cmd_t *cmd);
SIM_HIDDEN CUresult sim_submit(struct CUstream_st *stream, sim_cmd_t *cmd);
/* The dependency "everything enqueued on `stream` so far". Caller holds
 * `sim_submit_lock`; releases with `sim_dep_release`. */
SIM_HIDDEN sim_dep_t sim_stream_tail_dep(struct CUstream_st *stream);
SIM_HIDDEN void sim_dep_release(sim_dep_t *dep);
SIM_HIDDEN bool sim_dep_done(const sim_dep_t *dep);
/* What a poll made by call `id` (`cuEventQuery`, `cuStreamQuery`,
 * `cuEventElapsedTime`) sees of `dep`. On the virtual clock with host costs:
 * done when the calling thread's host clock has reached `dep`'s modeled
 * end, waiting in real time for a worker that lags behind; from real
 * progress (`sim_dep_done`) while a worker runs a host function or a memory
 * wait, which may wait for the polling thread. Otherwise `sim_dep_done`. */
SIM_HIDDEN bool sim_dep_polled_done(const sim_dep_t *dep, sim_api_id_t id);
SIM_HIDDEN void sim_dep_wait(const sim_dep_t *dep);
/* Host-side wait for all work submitted so far on the stream (for the legacy
 * stream also the blocking streams); advances the host clock. */
SIM_HIDDEN void sim_stream_host_wait(struct CUstream_st *stream);
/* `SIMCUDA_LAG` in nanoseconds (0: none): no operation starts earlier than
 * that after its submission. */
SIM_HIDDEN uint64_t sim_stream_lag_ns(void);
/* Resolves the stream of a synchronous call (legacy or per-thread default)
 * and checks that it may synchronise now. */
SIM_HIDDEN CUresult sim_sync_stream(bool per_thread_variant, struct CUstream_st **out);

/* ------------------------------------------------------------------------
 * Events (sim_event.c)
 * ------------------------------------------------------------------------ */

#define SIM_EVENT_MAGIC 0x45564e54u /* "EVNT" */

struct CUevent_st {
    uint32_t magic;
    _Atomic int refs;
    unsigned flags;
    CUcontext ctx;
    /* Guarded by `sim_submit_lock`. */
    bool recorded;          /* recorded at least once outside capture */
    sim_dep_t record;       /* the most recent record */
    uint64_t gen;           /* bumped by each record */
    uint64_t capture_id;    /* non-zero: last recorded inside that capture */
    CUgraphNode *capture_nodes;
    size_t capture_node_count;
    /* Written by the worker that executes the record. */
    _Atomic uint64_t stamped_gen;
    _Atomic uint64_t wall_ns;
};

SIM_HIDDEN void sim_event_ref(struct CUevent_st *event);
SIM_HIDDEN void sim_event_unref(struct CUevent_st *event);
SIM_HIDDEN struct CUevent_st *sim_event_from_handle(CUevent handle);
/* Destroys every event of `ctx` (its context is being destroyed or reset):
 * their handles become invalid, pending records and waits keep theirs. */
SIM_HIDDEN void sim_events_ctx_destroying(CUcontext ctx);
/* Worker side of a record: stamps the wall time for generation `gen`. */
SIM_HIDDEN void sim_event_stamp(struct CUevent_st *event, uint64_t gen);
/* Caller holds `sim_submit_lock`. */
SIM_HIDDEN CUresult sim_event_record_locked(struct CUevent_st *event, struct CUstream_st *stream);
SIM_HIDDEN CUresult sim_stream_wait_event_locked(struct CUstream_st *stream, struct CUevent_st *event, unsigned flags);

/* ------------------------------------------------------------------------
 * Capture and graphs (sim_graph.c). All under `sim_submit_lock`.
 * ------------------------------------------------------------------------ */

/* Records `cmd` as a node of the stream's capture (ownership passes). */
SIM_HIDDEN CUresult sim_capture_record_locked(struct CUstream_st *stream, sim_cmd_t *cmd);
/* Invalidates the capture `stream` takes part in (no-op when none). */
SIM_HIDDEN void sim_capture_invalidate_locked(struct CUstream_st *stream);
/* Whether the capture with this id is still in progress. */
SIM_HIDDEN struct sim_capture_s *sim_capture_find_locked(uint64_t id);
SIM_HIDDEN uint64_t sim_capture_id(const struct sim_capture_s *capture);
/* Adds `nodes` to the stream's frontier, joining it to `capture` if needed. */
SIM_HIDDEN CUresult sim_capture_join_locked(struct CUstream_st *stream, struct sim_capture_s *capture, const CUgraphNode *nodes, size_t count);
/* Any blocking stream of the context capturing? (implicit legacy sync) */
SIM_HIDDEN struct CUstream_st *sim_capture_blocking_stream_locked(CUcontext ctx);
/* Removes a stream that is being destroyed from its capture. */
SIM_HIDDEN void sim_capture_forget_stream_locked(struct CUstream_st *stream);

/* ------------------------------------------------------------------------
 * Virtual clock (sim_clock.c)
 * ------------------------------------------------------------------------ */

typedef enum sim_engine_e {
    SIM_ENGINE_NONE = 0, /* host-side work: no engine, no cost */
    SIM_ENGINE_H2D,
    SIM_ENGINE_D2H,
    SIM_ENGINE_COMPUTE,
    SIM_ENGINE_COUNT,
} sim_engine_t;

SIM_HIDDEN bool sim_clock_is_virtual(void);
/* Schedules an operation ready at `ready_ns` (stream tail and waited
 * events) on `engine` of `device`: returns its modeled end. `overtakes`:
 * it comes from a stream of a priority above the least, and starts when
 * ready, ahead of work queued on the engine (sim_clock.c). `what` names the
 * operation in SIMCUDA_TIMELINE (a kernel's name, "copy", "memset"). */
SIM_HIDDEN uint64_t sim_clock_schedule(int device, sim_engine_t engine, uint64_t ready_ns, uint64_t cost_ns,
                                       bool overtakes, const char *what);
/* A host wait for work that ends at `until_ns`. */
/* A host wait for work that ends at `until_ns`: the calling thread's clock
 * moves there, plus the wake-up when it had to wait. */
SIM_HIDDEN void sim_clock_host_wait(uint64_t until_ns);
/* The calling thread's host clock. */
SIM_HIDDEN uint64_t sim_clock_host_now(void);
/* Whether a poll (`cuEventQuery`, `cuStreamQuery`) answers on modeled time:
 * with host costs on and a poll that costs something, work counts as done
 * only once the polling thread's clock has reached its end, so a polling
 * loop advances by the poll's cost until it does. */
SIM_HIDDEN bool sim_clock_host_polls_virtually(sim_api_id_t id);
SIM_HIDDEN bool sim_clock_host_reached(uint64_t at_ns);
/* Modeled nanoseconds to move `bytes` on `engine`. */
SIM_HIDDEN uint64_t sim_clock_transfer_ns(sim_engine_t engine, uint64_t bytes);
SIM_HIDDEN uint64_t sim_clock_wall_ns(void);

#endif /* SIMCUDA_SIM_EXEC_H */

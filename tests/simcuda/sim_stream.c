/* sim_stream.c: streams, their worker threads and submission.
 *
 * Every stream runs its queue in order on its own worker thread, started on
 * the first submission. Cross-stream ordering is expressed as dependencies
 * (`sim_dep_t`: "stream S has completed operation N") attached to an
 * operation at submission; the worker waits for them before running it.
 * That one mechanism gives event waits, the legacy NULL stream (its work
 * depends on the tails of all blocking streams of the context; their later
 * work depends on its tail) and graph launches.
 *
 * `SIMCUDA_LAG=US` holds every operation back until US microseconds of wall
 * time after its submission (`due_ns`), on the worker, after its
 * dependencies: work that a missing fence or wait would let run too early
 * then runs too late every time, and the test sees a fault or a wrong byte.
 *
 * Entry points: `sim_submit_locked` (everything that queues work ends here),
 * `sim_stream_resolve`, the `cuStream*` functions and the context hooks.
 */
#include "sim_exec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

pthread_mutex_t sim_submit_lock = PTHREAD_MUTEX_INITIALIZER;

struct sim_op_s {
    sim_op_t *next;
    uint64_t seq;
    sim_dep_t *deps;
    size_t dep_count;
    uint64_t event_gen; /* for SIM_CMD_EVENT_RECORD */
    uint64_t due_ns;    /* wall time before which it must not start (SIMCUDA_LAG) */
    sim_cmd_t cmd;
};

/* ------------------------------------------------------------------------
 * SIMCUDA_LAG
 * ------------------------------------------------------------------------ */

/* The longest lag accepted: 10 s, far above anything a test needs. */
#define SIM_LAG_MAX_US 10000000ull

static pthread_once_t lag_once = PTHREAD_ONCE_INIT;
static uint64_t lag_ns;

static void lag_configure(void)
{
    const char *text = getenv("SIMCUDA_LAG");
    if (text == NULL || *text == '\0')
        return;
    uint64_t us = 0;
    const char *p = text;
    for (; *p >= '0' && *p <= '9' && us <= SIM_LAG_MAX_US; p++)
        us = us * 10 + (uint64_t)(*p - '0');
    if (*p != '\0' || us > SIM_LAG_MAX_US) {
        fprintf(stderr,
                "simcuda: SIMCUDA_LAG=\"%s\" is not a lag (accepted: microseconds as digits, 0 to %llu, e.g. "
                "2000); using 0\n",
                text, SIM_LAG_MAX_US);
        return;
    }
    lag_ns = us * 1000;
}

uint64_t sim_stream_lag_ns(void)
{
    pthread_once(&lag_once, lag_configure);
    return lag_ns;
}

/* Sleeps until the wall clock reaches `due_ns` (a worker, never the host). */
static void lag_until(uint64_t due_ns)
{
    for (;;) {
        uint64_t now = sim_clock_wall_ns();
        if (now >= due_ns)
            return;
        uint64_t left = due_ns - now;
        struct timespec pause = {.tv_sec = (time_t)(left / 1000000000u), .tv_nsec = (long)(left % 1000000000u)};
        nanosleep(&pause, NULL);
    }
}

static _Atomic unsigned long long next_stream_id = 1;


/* ------------------------------------------------------------------------
 * Lifetime
 * ------------------------------------------------------------------------ */

static struct CUstream_st *stream_new(CUcontext ctx, unsigned flags, int priority)
{
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->magic = SIM_STREAM_MAGIC;
    atomic_init(&s->refs, 1);
    s->ctx = ctx;
    s->flags = flags;
    s->priority = priority;
    s->id = atomic_fetch_add(&next_stream_id, 1);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    return s;
}

void sim_stream_ref(struct CUstream_st *stream)
{
    atomic_fetch_add(&stream->refs, 1);
}

void sim_stream_unref(struct CUstream_st *stream)
{
    if (atomic_fetch_sub(&stream->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&stream->lock);
    pthread_cond_destroy(&stream->cond);
    free(stream->frontier);
    free(stream);
}

CUcontext sim_stream_ctx(const struct CUstream_st *stream)
{
    return stream->ctx;
}

bool sim_stream_is_blocking(const struct CUstream_st *stream)
{
    return !stream->is_legacy && (stream->flags & CU_STREAM_NON_BLOCKING) == 0;
}

/* Adds a live stream to its context's list. Caller holds `sim_submit_lock`. */
static int ctx_add_stream_locked(CUcontext ctx, struct CUstream_st *s)
{
    int rc = 0;
    pthread_mutex_lock(&ctx->streams_lock);
    if (ctx->stream_count == ctx->stream_capacity) {
        size_t capacity = ctx->stream_capacity ? ctx->stream_capacity * 2 : 8;
        struct CUstream_st **grown = realloc(ctx->streams, capacity * sizeof(*grown));
        if (grown == NULL) {
            rc = -ENOMEM;
            goto out;
        }
        ctx->streams = grown;
        ctx->stream_capacity = capacity;
    }
    ctx->streams[ctx->stream_count++] = s;
out:
    pthread_mutex_unlock(&ctx->streams_lock);
    return rc;
}

static void ctx_remove_stream_locked(CUcontext ctx, struct CUstream_st *s)
{
    pthread_mutex_lock(&ctx->streams_lock);
    for (size_t i = 0; i < ctx->stream_count; i++) {
        if (ctx->streams[i] == s) {
            ctx->streams[i] = ctx->streams[--ctx->stream_count];
            break;
        }
    }
    pthread_mutex_unlock(&ctx->streams_lock);
}

/* Whether `s` has work not yet completed. Caller holds `sim_submit_lock`. */
static bool stream_pending_locked(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->lock);
    bool pending = s->completed_seq < s->enqueued_seq;
    pthread_mutex_unlock(&s->lock);
    return pending;
}

/* Keeps a destroyed stream with pending work in its context's retired
 * list (with a reference). Caller holds `sim_submit_lock`. */
static void ctx_add_retired_locked(CUcontext ctx, struct CUstream_st *s)
{
    pthread_mutex_lock(&ctx->streams_lock);
    if (ctx->retired_count == ctx->retired_capacity) {
        size_t capacity = ctx->retired_capacity ? ctx->retired_capacity * 2 : 8;
        struct CUstream_st **grown = realloc(ctx->retired, capacity * sizeof(*grown));
        if (grown == NULL) {
            pthread_mutex_unlock(&ctx->streams_lock);
            return; /* a host wait then misses its work: out of memory */
        }
        ctx->retired = grown;
        ctx->retired_capacity = capacity;
    }
    sim_stream_ref(s);
    ctx->retired[ctx->retired_count++] = s;
    pthread_mutex_unlock(&ctx->streams_lock);
}

/* Drops the retired streams that have drained (all of them with `all`).
 * Caller holds `sim_submit_lock`; the references are dropped after. */
static void ctx_prune_retired(CUcontext ctx, bool all)
{
    struct CUstream_st *drop[16];
    size_t n = 0;
    pthread_mutex_lock(&sim_submit_lock);
    pthread_mutex_lock(&ctx->streams_lock);
    for (size_t i = 0; i < ctx->retired_count && n < 16;) {
        struct CUstream_st *r = ctx->retired[i];
        if (all || !stream_pending_locked(r)) {
            drop[n++] = r;
            ctx->retired[i] = ctx->retired[--ctx->retired_count];
        } else {
            i++;
        }
    }
    if (all && ctx->retired_count == 0) {
        free(ctx->retired);
        ctx->retired = NULL;
        ctx->retired_capacity = 0;
    }
    pthread_mutex_unlock(&ctx->streams_lock);
    pthread_mutex_unlock(&sim_submit_lock);
    for (size_t i = 0; i < n; i++)
        sim_stream_unref(drop[i]);
}

/* Makes the handle invalid and lets the worker exit once its queue is
 * drained: pending work still completes, as with the real driver (and
 * context-wide waits still cover it). Caller holds `sim_submit_lock`; the
 * caller's reference is still to be dropped. */
static void stream_retire_locked(struct CUstream_st *s)
{
    if (s->capture != NULL)
        sim_capture_forget_stream_locked(s);
    if (!s->is_legacy) {
        ctx_remove_stream_locked(s->ctx, s);
        if (!s->is_per_thread && s->ctx->legacy_stream != NULL && stream_pending_locked(s))
            ctx_add_retired_locked(s->ctx, s);
    }
    s->magic = SIM_STREAM_DEAD;
    pthread_mutex_lock(&s->lock);
    s->destroyed = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------------------
 * Dependencies
 * ------------------------------------------------------------------------ */

sim_dep_t sim_stream_tail_dep(struct CUstream_st *stream)
{
    sim_stream_ref(stream);
    return (sim_dep_t){.stream = stream, .seq = stream->enqueued_seq, .vt_ns = stream->vt_tail_ns};
}

void sim_dep_release(sim_dep_t *dep)
{
    if (dep->stream != NULL)
        sim_stream_unref(dep->stream);
    dep->stream = NULL;
}

bool sim_dep_done(const sim_dep_t *dep)
{
    pthread_mutex_lock(&dep->stream->lock);
    bool done = dep->stream->completed_seq >= dep->seq;
    pthread_mutex_unlock(&dep->stream->lock);
    return done;
}

/* Workers now running a command whose end the modeled clock does not know:
 * a host function or a wait on a memory value may wait for the very thread
 * that polls (`sim_dep_polled_done`). */
static _Atomic unsigned outside_model;

/* How long a poll waits for a worker that lags behind the modeled clock
 * before it answers from real progress after all: a guard against a kernel
 * that waits for the host, which no kernel of the simulator's own does. */
#define SIM_POLL_LAG_LIMIT_NS (5ull * 1000000000ull)

static bool dep_done_at_host_time(const sim_dep_t *dep)
{
    if (!sim_clock_host_reached(dep->vt_ns))
        return false;
    /* Done on the model. The worker may not have got there yet in real
     * time (it runs kernels and copies as fast as this machine lets it):
     * wait for it, so that the answer depends on the program's order only,
     * never on how far a worker has got. */
    struct CUstream_st *s = dep->stream;
    uint64_t give_up = sim_clock_wall_ns() + SIM_POLL_LAG_LIMIT_NS;
    pthread_mutex_lock(&s->lock);
    while (s->completed_seq < dep->seq && atomic_load(&outside_model) == 0 && sim_clock_wall_ns() < give_up) {
        /* Woken by each completion; the timeout notices a host function
         * or a memory wait that started meanwhile. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->cond, &s->lock, &until);
    }
    bool done = s->completed_seq >= dep->seq;
    pthread_mutex_unlock(&s->lock);
    return done;
}

bool sim_dep_polled_done(const sim_dep_t *dep, sim_api_id_t id)
{
    return sim_clock_host_polls_virtually(id) ? dep_done_at_host_time(dep) : sim_dep_done(dep);
}

void sim_dep_wait(const sim_dep_t *dep)
{
    struct CUstream_st *s = dep->stream;
    pthread_mutex_lock(&s->lock);
    while (s->completed_seq < dep->seq)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

/* The work a host wait on `s` covers: its own tail and, for the legacy
 * stream, the tails of every blocking stream. Caller holds the submit lock. */
static int collect_wait_deps_locked(struct CUstream_st *s, sim_dep_t **out, size_t *count)
{
    size_t n = 1, cap = 1;
    if (s->is_legacy) {
        pthread_mutex_lock(&s->ctx->streams_lock);
        cap += s->ctx->stream_count + s->ctx->retired_count;
        pthread_mutex_unlock(&s->ctx->streams_lock);
    }
    sim_dep_t *deps = calloc(cap, sizeof(*deps));
    if (deps == NULL)
        return -ENOMEM;
    deps[0] = sim_stream_tail_dep(s);
    if (s->is_legacy) {
        pthread_mutex_lock(&s->ctx->streams_lock);
        for (size_t i = 0; i < s->ctx->stream_count && n < cap; i++)
            if (sim_stream_is_blocking(s->ctx->streams[i]))
                deps[n++] = sim_stream_tail_dep(s->ctx->streams[i]);
        for (size_t i = 0; i < s->ctx->retired_count && n < cap; i++)
            if (sim_stream_is_blocking(s->ctx->retired[i]))
                deps[n++] = sim_stream_tail_dep(s->ctx->retired[i]);
        pthread_mutex_unlock(&s->ctx->streams_lock);
    }
    *out = deps;
    *count = n;
    return 0;
}

/* One host wait for all of `deps`: the host wakes up once, after the last. */
static void wait_and_release_deps(sim_dep_t *deps, size_t count)
{
    uint64_t until_ns = 0;
    for (size_t i = 0; i < count; i++) {
        sim_dep_wait(&deps[i]);
        if (deps[i].vt_ns > until_ns)
            until_ns = deps[i].vt_ns;
        sim_dep_release(&deps[i]);
    }
    free(deps);
    sim_clock_host_wait(until_ns);
}

void sim_stream_host_wait(struct CUstream_st *stream)
{
    sim_dep_t *deps;
    size_t count;
    pthread_mutex_lock(&sim_submit_lock);
    int rc = collect_wait_deps_locked(stream, &deps, &count);
    pthread_mutex_unlock(&sim_submit_lock);
    if (rc == 0) {
        wait_and_release_deps(deps, count);
        return;
    }
    /* Out of memory for the list: wait on the stream's own tail. */
    pthread_mutex_lock(&stream->lock);
    while (stream->head != NULL)
        pthread_cond_wait(&stream->cond, &stream->lock);
    pthread_mutex_unlock(&stream->lock);
}

/* ------------------------------------------------------------------------
 * Commands
 * ------------------------------------------------------------------------ */

void sim_body_release(sim_body_t *body)
{
    for (size_t i = 0; i < body->count; i++)
        sim_cmd_release(&body->cmds[i]);
    free(body->cmds);
    body->cmds = NULL;
    body->count = 0;
}

CUresult sim_body_clone(sim_body_t *dst, const sim_body_t *src)
{
    dst->count = 0;
    dst->cmds = calloc(src->count ? src->count : 1, sizeof(*dst->cmds));
    if (dst->cmds == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < src->count; i++) {
        if (sim_cmd_clone(&dst->cmds[i], &src->cmds[i]) != CUDA_SUCCESS) {
            sim_body_release(dst);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        dst->count++;
    }
    return CUDA_SUCCESS;
}

void sim_cmd_release(sim_cmd_t *cmd)
{
    switch (cmd->kind) {
    case SIM_CMD_GRAPH:
        sim_body_release(&cmd->u.graph);
        break;
    case SIM_CMD_COND:
        for (unsigned i = 0; cmd->u.cond.bodies != NULL && i < cmd->u.cond.size; i++)
            sim_body_release(&cmd->u.cond.bodies[i]);
        free(cmd->u.cond.bodies);
        break;
    case SIM_CMD_COND_RESET:
        free(cmd->u.reset.handles);
        break;
    case SIM_CMD_KERNEL:
        free(cmd->u.launch.args);
        free(cmd->u.launch.param_ptrs);
        break;
    case SIM_CMD_MEMOP:
        free(cmd->u.memop.ops);
        break;
    case SIM_CMD_EVENT_RECORD:
    case SIM_CMD_EVENT_WAIT:
        if (cmd->u.event != NULL)
            sim_event_unref(cmd->u.event);
        break;
    default:
        break;
    }
    memset(cmd, 0, sizeof(*cmd));
}

CUresult sim_cmd_clone(sim_cmd_t *dst, const sim_cmd_t *src)
{
    *dst = *src;
    switch (src->kind) {
    case SIM_CMD_KERNEL: {
        const sim_launch_desc_t *from = &src->u.launch;
        sim_launch_desc_t *to = &dst->u.launch;
        unsigned count = from->kernel->param_count;
        to->args = malloc(from->args_size ? from->args_size : 1);
        to->param_ptrs = calloc(count ? count : 1, sizeof(void *));
        if (to->args == NULL || to->param_ptrs == NULL) {
            free(to->args);
            free(to->param_ptrs);
            memset(dst, 0, sizeof(*dst));
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(to->args, from->args, from->args_size);
        for (unsigned i = 0; i < count; i++)
            to->param_ptrs[i] = to->args + from->kernel->param_offsets[i];
        break;
    }
    case SIM_CMD_GRAPH:
        if (sim_body_clone(&dst->u.graph, &src->u.graph) != CUDA_SUCCESS) {
            memset(dst, 0, sizeof(*dst));
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        break;
    case SIM_CMD_COND: {
        unsigned size = src->u.cond.size;
        if (src->u.cond.bodies == NULL)
            break; /* a graph's node: its bodies are graphs until instantiation */
        dst->u.cond.bodies = calloc(size ? size : 1, sizeof(sim_body_t));
        bool ok = dst->u.cond.bodies != NULL;
        unsigned done = 0;
        for (; ok && done < size; done++)
            ok = sim_body_clone(&dst->u.cond.bodies[done], &src->u.cond.bodies[done]) == CUDA_SUCCESS;
        if (!ok) {
            for (unsigned i = 0; dst->u.cond.bodies != NULL && i + 1 < done; i++)
                sim_body_release(&dst->u.cond.bodies[i]);
            free(dst->u.cond.bodies);
            memset(dst, 0, sizeof(*dst));
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        break;
    }
    case SIM_CMD_COND_RESET: {
        size_t bytes = src->u.reset.count * sizeof(*src->u.reset.handles);
        dst->u.reset.handles = malloc(bytes ? bytes : 1);
        if (dst->u.reset.handles == NULL) {
            memset(dst, 0, sizeof(*dst));
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(dst->u.reset.handles, src->u.reset.handles, bytes);
        break;
    }
    case SIM_CMD_MEMOP: {
        size_t bytes = src->u.memop.count * sizeof(*src->u.memop.ops);
        dst->u.memop.ops = malloc(bytes ? bytes : 1);
        if (dst->u.memop.ops == NULL) {
            memset(dst, 0, sizeof(*dst));
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(dst->u.memop.ops, src->u.memop.ops, bytes);
        break;
    }
    case SIM_CMD_EVENT_RECORD:
    case SIM_CMD_EVENT_WAIT:
        sim_event_ref(src->u.event);
        break;
    default:
        break;
    }
    return CUDA_SUCCESS;
}

void sim_cmd_execute(const sim_cmd_t *cmd, uint64_t event_gen)
{
    switch (cmd->kind) {
    case SIM_CMD_KERNEL:
        sim_launch_execute(&cmd->u.launch);
        break;
    case SIM_CMD_COPY:
        sim_copy_execute(&cmd->u.copy);
        break;
    case SIM_CMD_SET:
        sim_set_execute(&cmd->u.set);
        break;
    case SIM_CMD_HOST:
        atomic_fetch_add(&outside_model, 1);
        cmd->u.host.fn(cmd->u.host.arg);
        atomic_fetch_sub(&outside_model, 1);
        break;
    case SIM_CMD_MEMOP:
        atomic_fetch_add(&outside_model, 1);
        sim_memop_execute(&cmd->u.memop);
        atomic_fetch_sub(&outside_model, 1);
        break;
    case SIM_CMD_GRAPH:
        for (size_t i = 0; i < cmd->u.graph.count; i++)
            sim_cmd_execute(&cmd->u.graph.cmds[i], event_gen);
        break;
    case SIM_CMD_COND: {
        /* The value the handle holds when the node runs (device code
         * before it, or the launch's default). */
        const sim_cond_handle_t *h = cmd->u.cond.handle;
        unsigned value = atomic_load(&h->value);
        const sim_body_t *run = NULL;
        switch (cmd->u.cond.type) {
        case CU_GRAPH_COND_TYPE_IF:
            run = value != 0 ? &cmd->u.cond.bodies[0] : cmd->u.cond.size == 2 ? &cmd->u.cond.bodies[1] : NULL;
            break;
        case CU_GRAPH_COND_TYPE_SWITCH:
            run = value < cmd->u.cond.size ? &cmd->u.cond.bodies[value] : NULL;
            break;
        case CU_GRAPH_COND_TYPE_WHILE:
            /* The body runs while the value is non-zero, read again after
             * each pass. */
            while (atomic_load(&h->value) != 0)
                for (size_t i = 0; i < cmd->u.cond.bodies[0].count; i++)
                    sim_cmd_execute(&cmd->u.cond.bodies[0].cmds[i], event_gen);
            break;
        }
        for (size_t i = 0; run != NULL && i < run->count; i++)
            sim_cmd_execute(&run->cmds[i], event_gen);
        break;
    }
    case SIM_CMD_COND_RESET:
        for (size_t i = 0; i < cmd->u.reset.count; i++)
            atomic_store(&cmd->u.reset.handles[i]->value, cmd->u.reset.handles[i]->default_value);
        break;
    case SIM_CMD_EVENT_RECORD:
        sim_event_stamp(cmd->u.event, event_gen);
        break;
    case SIM_CMD_EVENT_WAIT: /* the dependency did the waiting */
    case SIM_CMD_EMPTY:
        break;
    }
}

/* ------------------------------------------------------------------------
 * Worker
 * ------------------------------------------------------------------------ */

static void op_free(sim_op_t *op)
{
    for (size_t i = 0; i < op->dep_count; i++)
        sim_dep_release(&op->deps[i]);
    free(op->deps);
    sim_cmd_release(&op->cmd);
    free(op);
}

static void *stream_worker(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->head == NULL && !s->destroyed)
            pthread_cond_wait(&s->cond, &s->lock);
        sim_op_t *op = s->head;
        if (op == NULL)
            break; /* destroyed and drained */
        s->head = op->next;
        if (s->head == NULL)
            s->tail = NULL;
        pthread_mutex_unlock(&s->lock);

        for (size_t i = 0; i < op->dep_count; i++)
            sim_dep_wait(&op->deps[i]);
        if (op->due_ns != 0)
            lag_until(op->due_ns);
        /* A kernel touches memory as its context's device may (peer access,
         * VMM grants): `sim_kernel_touch` asks this view. */
        if (op->cmd.kind == SIM_CMD_KERNEL)
            sim_kernel_view = (sim_kernel_view_t){.ctx = s->ctx, .kernel = op->cmd.u.launch.kernel->name};
        sim_cmd_execute(&op->cmd, op->event_gen);
        sim_kernel_view.ctx = NULL;

        pthread_mutex_lock(&s->lock);
        s->completed_seq = op->seq;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        /* Outside the lock: releasing dependencies may free other streams. */
        op_free(op);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    sim_stream_unref(s);
    return NULL;
}

static int stream_start_worker(struct CUstream_st *s)
{
    if (s->worker_started)
        return 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    sim_stream_ref(s); /* the worker's reference */
    int rc = pthread_create(&thread, &attr, stream_worker, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        sim_stream_unref(s);
        return -rc;
    }
    s->worker_started = true;
    return 0;
}

/* ------------------------------------------------------------------------
 * Submission
 * ------------------------------------------------------------------------ */

static bool is_device_side(sim_mem_kind_t kind)
{
    return kind == SIM_MEM_DEVICE || kind == SIM_MEM_MANAGED;
}

/* Which engine runs `cmd`, what it costs, and the statistics it adds. */
static sim_engine_t cmd_schedule_info(const sim_cmd_t *cmd, uint64_t *cost_ns)
{
    *cost_ns = 0;
    switch (cmd->kind) {
    case SIM_CMD_KERNEL:
        atomic_fetch_add(&sim_stats.kernels, 1);
        *cost_ns = sim_launch_cost_ns(&cmd->u.launch);
        return SIM_ENGINE_COMPUTE;
    case SIM_CMD_COPY: {
        uint64_t bytes = sim_copy_bytes(&cmd->u.copy);
        bool dst_dev = is_device_side(sim_mem_classify(cmd->u.copy.dst, NULL));
        bool src_dev = is_device_side(sim_mem_classify(cmd->u.copy.src, NULL));
        sim_engine_t engine;
        if (src_dev && dst_dev) {
            atomic_fetch_add(&sim_stats.copied_dtod, bytes);
            engine = SIM_ENGINE_COMPUTE;
        } else if (dst_dev) {
            atomic_fetch_add(&sim_stats.copied_htod, bytes);
            engine = SIM_ENGINE_H2D;
        } else if (src_dev) {
            atomic_fetch_add(&sim_stats.copied_dtoh, bytes);
            engine = SIM_ENGINE_D2H;
        } else {
            atomic_fetch_add(&sim_stats.copied_htoh, bytes);
            engine = SIM_ENGINE_NONE;
        }
        *cost_ns = sim_clock_transfer_ns(engine, bytes);
        return engine;
    }
    case SIM_CMD_SET: {
        const sim_set_desc_t *set = &cmd->u.set;
        uint64_t bytes = (uint64_t)set->width * set->elem_size * set->height;
        sim_engine_t engine = is_device_side(sim_mem_classify(set->dst, NULL)) ? SIM_ENGINE_COMPUTE : SIM_ENGINE_NONE;
        *cost_ns = sim_clock_transfer_ns(engine, bytes);
        return engine;
    }
    default:
        return SIM_ENGINE_NONE;
    }
}

static int op_add_dep(sim_op_t *op, size_t *cap, sim_dep_t dep)
{
    if (op->dep_count == *cap) {
        size_t grown_cap = *cap ? *cap * 2 : 4;
        sim_dep_t *grown = realloc(op->deps, grown_cap * sizeof(*grown));
        if (grown == NULL) {
            sim_dep_release(&dep);
            return -ENOMEM;
        }
        op->deps = grown;
        *cap = grown_cap;
    }
    op->deps[op->dep_count++] = dep;
    return 0;
}

/* Submits with an optional extra dependency (an event wait); `extra` keeps
 * its reference (the operation takes its own). */
static CUresult submit_locked(struct CUstream_st *s, sim_cmd_t *cmd, const sim_dep_t *extra)
{
    CUresult result = CUDA_SUCCESS;
    if (s->capture != NULL)
        return sim_capture_record_locked(s, cmd);
    if (s->is_legacy) {
        struct CUstream_st *capturing = sim_capture_blocking_stream_locked(s->ctx);
        if (capturing != NULL) {
            /* Legacy work would synchronise with a capturing stream. */
            sim_capture_invalidate_locked(capturing);
            sim_cmd_release(cmd);
            return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
    }
    sim_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        sim_cmd_release(cmd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->cmd = *cmd;
    memset(cmd, 0, sizeof(*cmd));
    size_t cap = 0;
    uint64_t ready_ns = s->vt_tail_ns;
    int rc = 0;

    if (s->is_legacy) {
        pthread_mutex_lock(&s->ctx->streams_lock);
        /* Destroyed blocking streams' pending work counts too. */
        size_t total = s->ctx->stream_count + s->ctx->retired_count;
        for (size_t i = 0; i < total && rc == 0; i++) {
            struct CUstream_st *t = i < s->ctx->stream_count ? s->ctx->streams[i]
                                                             : s->ctx->retired[i - s->ctx->stream_count];
            if (sim_stream_is_blocking(t) && t->enqueued_seq > 0) {
                if (t->vt_tail_ns > ready_ns)
                    ready_ns = t->vt_tail_ns;
                rc = op_add_dep(op, &cap, sim_stream_tail_dep(t));
            }
        }
        pthread_mutex_unlock(&s->ctx->streams_lock);
    } else if (sim_stream_is_blocking(s) && s->ctx->legacy_stream != NULL) {
        struct CUstream_st *legacy = s->ctx->legacy_stream;
        if (legacy->enqueued_seq > 0) {
            if (legacy->vt_tail_ns > ready_ns)
                ready_ns = legacy->vt_tail_ns;
            rc = op_add_dep(op, &cap, sim_stream_tail_dep(legacy));
        }
    }
    if (rc == 0 && extra != NULL && extra->stream != NULL) {
        if (extra->vt_ns > ready_ns)
            ready_ns = extra->vt_ns;
        sim_stream_ref(extra->stream);
        rc = op_add_dep(op, &cap, *extra);
    }
    if (rc == 0)
        rc = stream_start_worker(s);
    if (rc != 0) {
        op_free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }

    uint64_t cost_ns;
    sim_engine_t engine = cmd_schedule_info(&op->cmd, &cost_ns);
    const char *what = op->cmd.kind == SIM_CMD_KERNEL ? op->cmd.u.launch.kernel->name
                       : op->cmd.kind == SIM_CMD_COPY ? "copy"
                                                       : "memset";
    /* Stream priorities order the SMs' work only: copy engines take their
     * queue in order. */
    bool overtakes = engine == SIM_ENGINE_COMPUTE && s->priority < SIM_PRIORITY_LEAST;
    s->vt_tail_ns = sim_clock_schedule(s->ctx->device->ordinal, engine, ready_ns, cost_ns, overtakes, what);
    if (op->cmd.kind == SIM_CMD_EVENT_RECORD)
        op->event_gen = op->cmd.u.event->gen;
    if (sim_stream_lag_ns() != 0)
        op->due_ns = sim_clock_wall_ns() + sim_stream_lag_ns();
    op->seq = ++s->enqueued_seq;

    pthread_mutex_lock(&s->lock);
    if (s->tail != NULL)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return result;
}

CUresult sim_submit_locked(struct CUstream_st *stream, sim_cmd_t *cmd)
{
    if (cmd->kind == SIM_CMD_EVENT_WAIT && stream->capture == NULL) {
        /* A wait op is only its dependency; see `sim_stream_wait_event_locked`. */
        struct CUevent_st *event = cmd->u.event;
        sim_dep_t dep = event->recorded ? event->record : (sim_dep_t){0};
        return submit_locked(stream, cmd, &dep);
    }
    return submit_locked(stream, cmd, NULL);
}

CUresult sim_submit(struct CUstream_st *stream, sim_cmd_t *cmd)
{
    pthread_mutex_lock(&sim_submit_lock);
    CUresult result = sim_submit_locked(stream, cmd);
    pthread_mutex_unlock(&sim_submit_lock);
    return result;
}

CUresult sim_stream_enqueue_host(struct CUstream_st *stream, void (*fn)(void *), void *arg)
{
    sim_cmd_t cmd = {.kind = SIM_CMD_HOST, .u.host = {.fn = fn, .arg = arg}};
    return sim_submit(stream, &cmd);
}

/* ------------------------------------------------------------------------
 * Per-thread default streams: one per thread and context, released when
 * the thread exits.
 * ------------------------------------------------------------------------ */

typedef struct pts_table_s {
    size_t count, capacity;
    struct { CUcontext ctx; struct CUstream_st *stream; } *entries;
} pts_table_t;

static pthread_key_t pts_key;
static pthread_once_t pts_once = PTHREAD_ONCE_INIT;

static void pts_thread_exit(void *arg)
{
    pts_table_t *table = arg;
    for (size_t i = 0; i < table->count; i++) {
        struct CUstream_st *s = table->entries[i].stream;
        pthread_mutex_lock(&sim_submit_lock);
        if (!s->destroyed)
            stream_retire_locked(s);
        pthread_mutex_unlock(&sim_submit_lock);
        sim_stream_unref(s);
    }
    free(table->entries);
    free(table);
}

static void pts_init(void)
{
    pthread_key_create(&pts_key, pts_thread_exit);
}

static struct CUstream_st *per_thread_stream(CUcontext ctx, CUresult *error)
{
    pthread_once(&pts_once, pts_init);
    pts_table_t *table = pthread_getspecific(pts_key);
    if (table == NULL) {
        table = calloc(1, sizeof(*table));
        if (table == NULL || pthread_setspecific(pts_key, table) != 0) {
            free(table);
            *error = CUDA_ERROR_OUT_OF_MEMORY;
            return NULL;
        }
    }
    for (size_t i = 0; i < table->count; i++) {
        struct CUstream_st *s = table->entries[i].stream;
        if (table->entries[i].ctx != ctx)
            continue;
        if (!s->destroyed)
            return s;
        /* Its context was destroyed (and this address reused): replace. */
        sim_stream_unref(s);
        table->entries[i] = table->entries[--table->count];
        break;
    }
    if (table->count == table->capacity) {
        size_t capacity = table->capacity ? table->capacity * 2 : 4;
        void *grown = realloc(table->entries, capacity * sizeof(*table->entries));
        if (grown == NULL) {
            *error = CUDA_ERROR_OUT_OF_MEMORY;
            return NULL;
        }
        table->entries = grown;
        table->capacity = capacity;
    }
    struct CUstream_st *s = stream_new(ctx, CU_STREAM_DEFAULT, SIM_PRIORITY_LEAST);
    if (s == NULL) {
        *error = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    s->is_per_thread = true;
    pthread_mutex_lock(&sim_submit_lock);
    int rc = ctx_add_stream_locked(ctx, s);
    pthread_mutex_unlock(&sim_submit_lock);
    if (rc != 0) {
        sim_stream_unref(s);
        *error = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    table->entries[table->count].ctx = ctx;
    table->entries[table->count].stream = s;
    table->count++;
    return s;
}

struct CUstream_st *sim_stream_resolve(CUstream handle, bool per_thread_variant, CUresult *error)
{
    CUresult ignored;
    if (error == NULL)
        error = &ignored;
    if (handle == NULL)
        handle = per_thread_variant ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    if (handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
        CUcontext ctx;
        CUresult result = sim_ctx_require(&ctx);
        if (result != CUDA_SUCCESS) {
            *error = result;
            return NULL;
        }
        if (ctx->legacy_stream == NULL) {
            *error = CUDA_ERROR_INVALID_CONTEXT;
            return NULL;
        }
        if (handle == CU_STREAM_LEGACY)
            return ctx->legacy_stream;
        return per_thread_stream(ctx, error);
    }
    if (!sim_initialized()) {
        *error = CUDA_ERROR_NOT_INITIALIZED;
        return NULL;
    }
    struct CUstream_st *s = handle;
    if (s->magic != SIM_STREAM_MAGIC) {
        *error = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    return s;
}

/* ------------------------------------------------------------------------
 * Context hooks
 * ------------------------------------------------------------------------ */

CUresult sim_exec_ctx_created(CUcontext ctx)
{
    struct CUstream_st *legacy = stream_new(ctx, CU_STREAM_DEFAULT, SIM_PRIORITY_LEAST);
    if (legacy == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    legacy->is_legacy = true;
    ctx->legacy_stream = legacy;
    return CUDA_SUCCESS;
}

void sim_exec_ctx_destroying(CUcontext ctx)
{
    /* Real semantics: the context's work completes, its streams go away. */
    sim_exec_ctx_synchronize(ctx);
    pthread_mutex_lock(&sim_submit_lock);
    for (;;) {
        pthread_mutex_lock(&ctx->streams_lock);
        struct CUstream_st *s = ctx->stream_count ? ctx->streams[ctx->stream_count - 1] : NULL;
        pthread_mutex_unlock(&ctx->streams_lock);
        if (s == NULL)
            break;
        stream_retire_locked(s);
        /* Per-thread streams stay referenced by their thread's table. */
        if (!s->is_per_thread)
            sim_stream_unref(s);
    }
    struct CUstream_st *legacy = ctx->legacy_stream;
    ctx->legacy_stream = NULL;
    if (legacy != NULL)
        stream_retire_locked(legacy);
    pthread_mutex_unlock(&sim_submit_lock);
    if (legacy != NULL)
        sim_stream_unref(legacy);
    pthread_mutex_lock(&ctx->streams_lock);
    free(ctx->streams);
    ctx->streams = NULL;
    ctx->stream_capacity = 0;
    pthread_mutex_unlock(&ctx->streams_lock);
    while (ctx->retired_count > 0)
        ctx_prune_retired(ctx, true);
    sim_events_ctx_destroying(ctx);
}

CUresult sim_exec_ctx_synchronize(CUcontext ctx)
{
    CUresult result = sim_capture_check_unsafe_call();
    if (result != CUDA_SUCCESS)
        return result;
    if (ctx == NULL || ctx->legacy_stream == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_dep_t *deps;
    size_t count;
    pthread_mutex_lock(&sim_submit_lock);
    /* The legacy stream's wait set is every blocking stream; add the
     * non-blocking ones. */
    int rc = collect_wait_deps_locked(ctx->legacy_stream, &deps, &count);
    sim_dep_t *all = NULL;
    size_t extra = 0;
    if (rc == 0) {
        pthread_mutex_lock(&ctx->streams_lock);
        all = realloc(deps, (count + ctx->stream_count + ctx->retired_count) * sizeof(*all));
        if (all != NULL) {
            deps = all;
            for (size_t i = 0; i < ctx->stream_count; i++)
                if (!sim_stream_is_blocking(ctx->streams[i]))
                    deps[count + extra++] = sim_stream_tail_dep(ctx->streams[i]);
            for (size_t i = 0; i < ctx->retired_count; i++)
                if (!sim_stream_is_blocking(ctx->retired[i]))
                    deps[count + extra++] = sim_stream_tail_dep(ctx->retired[i]);
        }
        pthread_mutex_unlock(&ctx->streams_lock);
    }
    pthread_mutex_unlock(&sim_submit_lock);
    if (rc != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    wait_and_release_deps(deps, count + extra);
    ctx_prune_retired(ctx, false);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Synchronous calls
 * ------------------------------------------------------------------------ */

CUresult sim_sync_stream(bool per_thread_variant, struct CUstream_st **out)
{
    CUresult result = sim_capture_check_unsafe_call();
    if (result != CUDA_SUCCESS)
        return result;
    struct CUstream_st *s = sim_stream_resolve(NULL, per_thread_variant, &result);
    if (s == NULL)
        return result;
    pthread_mutex_lock(&sim_submit_lock);
    if (s->capture != NULL) {
        sim_capture_invalidate_locked(s);
        result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_unlock(&sim_submit_lock);
    *out = s;
    return result;
}

/* ------------------------------------------------------------------------
 * The cuStream* API
 * ------------------------------------------------------------------------ */

static CUresult stream_create(CUstream *out, unsigned flags, int priority)
{
    if (out == NULL || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    /* Out-of-range priorities are clamped, as documented. */
    if (priority > SIM_PRIORITY_LEAST)
        priority = SIM_PRIORITY_LEAST;
    if (priority < SIM_PRIORITY_GREATEST)
        priority = SIM_PRIORITY_GREATEST;
    struct CUstream_st *s = stream_new(ctx, flags, priority);
    if (s == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&sim_submit_lock);
    int rc = ctx_add_stream_locked(ctx, s);
    pthread_mutex_unlock(&sim_submit_lock);
    if (rc != 0) {
        sim_stream_unref(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = s;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    CUresult entry = SIM_ENTER(cuStreamCreate, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_create(phStream, Flags, SIM_PRIORITY_LEAST);
}

SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    CUresult entry = SIM_ENTER(cuStreamCreateWithPriority, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_create(phStream, flags, priority);
}

static CUresult stream_destroy(CUstream handle)
{
    if (handle == NULL || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(handle, false, &result);
    if (s == NULL)
        return result;
    pthread_mutex_lock(&sim_submit_lock);
    stream_retire_locked(s);
    pthread_mutex_unlock(&sim_submit_lock);
    sim_stream_unref(s);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuStreamDestroy_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_destroy(hStream);
}

SIM_EXPORT CUresult cuStreamDestroy(CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuStreamDestroy, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_destroy(hStream);
}

static CUresult stream_synchronize(CUstream handle, bool per_thread)
{
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(handle, per_thread, &result);
    if (s == NULL)
        return result;
    pthread_mutex_lock(&sim_submit_lock);
    struct CUstream_st *capturing = s->capture != NULL ? s : NULL;
    if (capturing == NULL && s->is_legacy)
        capturing = sim_capture_blocking_stream_locked(s->ctx);
    if (capturing != NULL) {
        sim_capture_invalidate_locked(capturing);
        result = capturing == s ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    pthread_mutex_unlock(&sim_submit_lock);
    if (capturing != NULL)
        return result;
    sim_stream_host_wait(s);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuStreamSynchronize, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_synchronize(hStream, false);
}

SIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuStreamSynchronize_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_synchronize(hStream, true);
}

static CUresult stream_query(CUstream handle, bool per_thread, sim_api_id_t id)
{
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(handle, per_thread, &result);
    if (s == NULL)
        return result;
    sim_dep_t *deps = NULL;
    size_t count = 0;
    result = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_submit_lock);
    if (s->capture != NULL) {
        sim_capture_invalidate_locked(s);
        result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (collect_wait_deps_locked(s, &deps, &count) != 0) {
        result = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&sim_submit_lock);
    for (size_t i = 0; i < count; i++) {
        if (result == CUDA_SUCCESS && !sim_dep_polled_done(&deps[i], id))
            result = CUDA_ERROR_NOT_READY;
        sim_dep_release(&deps[i]);
    }
    free(deps);
    return result;
}

SIM_EXPORT CUresult cuStreamQuery(CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuStreamQuery, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_query(hStream, false, SIM_ID(cuStreamQuery));
}

SIM_EXPORT CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuStreamQuery_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_query(hStream, true, SIM_ID(cuStreamQuery_ptsz));
}

/* `cuStreamAddCallback` hands the callback the stream and a status. */
typedef struct stream_callback_s {
    CUstreamCallback callback;
    CUstream handle;
    void *user;
} stream_callback_t;

static void stream_callback_run(void *arg)
{
    stream_callback_t *cb = arg;
    cb->callback(cb->handle, CUDA_SUCCESS, cb->user);
    free(cb);
}

static CUresult stream_add_callback(CUstream handle, CUstreamCallback callback, void *user, unsigned flags, bool per_thread)
{
    if (callback == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(handle, per_thread, &result);
    if (s == NULL)
        return result;
    stream_callback_t *cb = malloc(sizeof(*cb));
    if (cb == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *cb = (stream_callback_t){.callback = callback, .handle = handle, .user = user};
    sim_cmd_t cmd = {.kind = SIM_CMD_HOST, .u.host = {.fn = stream_callback_run, .arg = cb}};
    pthread_mutex_lock(&sim_submit_lock);
    if (s->capture != NULL) {
        /* Not capturable: use cuLaunchHostFunc. */
        sim_capture_invalidate_locked(s);
        result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else {
        result = sim_submit_locked(s, &cmd);
    }
    pthread_mutex_unlock(&sim_submit_lock);
    if (result != CUDA_SUCCESS && cmd.kind == SIM_CMD_HOST)
        free(cb);
    return result;
}

SIM_EXPORT CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuStreamAddCallback, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_add_callback(hStream, callback, userData, flags, false);
}

SIM_EXPORT CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuStreamAddCallback_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_add_callback(hStream, callback, userData, flags, true);
}

static CUresult launch_host_func(CUstream handle, CUhostFn fn, void *user, bool per_thread)
{
    if (fn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(handle, per_thread, &result);
    if (s == NULL)
        return result;
    return sim_stream_enqueue_host(s, fn, user);
}

SIM_EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    CUresult entry = SIM_ENTER(cuLaunchHostFunc, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return launch_host_func(hStream, fn, userData, false);
}

SIM_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    CUresult entry = SIM_ENTER(cuLaunchHostFunc_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return launch_host_func(hStream, fn, userData, true);
}

/* The getters share one resolver; `what` selects the field. */
typedef enum stream_field_e { FIELD_FLAGS, FIELD_PRIORITY, FIELD_CTX, FIELD_ID, FIELD_DEVICE } stream_field_t;

static CUresult stream_get(CUstream handle, bool per_thread, stream_field_t what, void *out)
{
    if (out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(handle, per_thread, &result);
    if (s == NULL)
        return result;
    switch (what) {
    case FIELD_FLAGS:
        *(unsigned *)out = s->flags;
        break;
    case FIELD_PRIORITY:
        *(int *)out = s->priority;
        break;
    case FIELD_CTX:
        *(CUcontext *)out = s->ctx;
        break;
    case FIELD_ID:
        *(unsigned long long *)out = s->id;
        break;
    case FIELD_DEVICE:
        *(CUdevice *)out = s->ctx->device->ordinal;
        break;
    }
    return CUDA_SUCCESS;
}

#define SIM_STREAM_GETTER(symbol, type, field, per_thread)                       \
    SIM_EXPORT CUresult symbol(CUstream hStream, type *out)                      \
    {                                                                            \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                    \
        if (entry != CUDA_SUCCESS)                                               \
            return entry;                                                        \
        return stream_get(hStream, per_thread, field, out);                      \
    }

SIM_STREAM_GETTER(cuStreamGetFlags, unsigned int, FIELD_FLAGS, false)
SIM_STREAM_GETTER(cuStreamGetFlags_ptsz, unsigned int, FIELD_FLAGS, true)
SIM_STREAM_GETTER(cuStreamGetPriority, int, FIELD_PRIORITY, false)
SIM_STREAM_GETTER(cuStreamGetPriority_ptsz, int, FIELD_PRIORITY, true)
SIM_STREAM_GETTER(cuStreamGetCtx, CUcontext, FIELD_CTX, false)
SIM_STREAM_GETTER(cuStreamGetCtx_ptsz, CUcontext, FIELD_CTX, true)
SIM_STREAM_GETTER(cuStreamGetId, unsigned long long, FIELD_ID, false)
SIM_STREAM_GETTER(cuStreamGetId_ptsz, unsigned long long, FIELD_ID, true)
SIM_STREAM_GETTER(cuStreamGetDevice, CUdevice, FIELD_DEVICE, false)
SIM_STREAM_GETTER(cuStreamGetDevice_ptsz, CUdevice, FIELD_DEVICE, true)

/* fake_nccl.c: libnccl.so.2 for the simulated driver: NCCL's collectives
 * and point-to-point calls between the devices of one process
 * (`ncclCommInitAll`), done the way NCCL does them, so that the shim meets
 * what it meets under the real library.
 *
 * - Each rank has a channel buffer of its own (4 MiB of device memory,
 *   allocated inside `ncclCommInitAll`), through which its peers' data
 *   passes, and a ring of work descriptors in pinned host memory (NCCL's
 *   work FIFO).
 * - A collective is chunked through the channel buffers: a first kernel on
 *   each rank's stream copies its part of the user's buffer into its
 *   channel, every stream waits for every other (events), a second kernel
 *   reads the peers' channels and reduces or copies into the user's buffer,
 *   and the streams wait for each other again. The kernels' only argument
 *   is the address of their descriptor: the user's buffers and the peers'
 *   channels are reached through pointers in host memory, which no launch
 *   scan sees. A buffer that is not mapped faults (SIGSEGV), as on a GPU.
 * - Several devices in one thread need a group: the calls between
 *   `ncclGroupStart` and the outermost `ncclGroupEnd` are only recorded,
 *   and run at the end (collectives matched by their order on each rank,
 *   each send with its peer's receive). A communicator of one rank runs a
 *   call outside a group at once; one of several answers ncclInvalidUsage
 *   there (NCCL would wait for the peers forever).
 * - `ncclCommRegister` checks the buffer is device memory and returns a
 *   handle; deregistration checks the handle.
 * - A call on a capturing stream is captured (kernels and events), with
 *   descriptors of its own that live as long as the process.
 * - `ncclGetUniqueId` + `ncclCommInitRankConfig` make a communicator rank by
 *   rank (the ranks of one id, from the current context's device, in one
 *   thread or several: no rank waits for its peers here). With
 *   `config->blocking = 0` it is non-blocking, as in NCCL: its init and its
 *   calls answer ncclInProgress, and the work is only recorded; the program
 *   polls `ncclCommGetAsyncError` until the state is no longer
 *   ncclInProgress, and the FAKE_POLLS-th poll does the work (makes the
 *   rank's channel, or launches the recorded calls on their streams, the
 *   peers' with them). A grouped call of a non-blocking communicator
 *   answers ncclSuccess and the group's end ncclInProgress; one outside a
 *   group needs a communicator of one rank, as for blocking ones. A call on
 *   a communicator still in progress: ncclInvalidUsage.
 * - `ncclCommDestroy` first submits what is still recorded (NCCL finalizes
 *   the communicator inside it); `ncclCommAbort` drops it (the peers'
 *   states become ncclRemoteError).
 *
 * Types: the integer and floating types of 1, 4 and 8 bytes; operators
 * sum, prod, max, min. Others: ncclInvalidArgument.
 */
#include <cuda.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_api.h"
#include "simcuda.h"

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_MAX_RANKS 8
#define FAKE_CHANNEL_BYTES (4u << 20)
#define FAKE_SLOTS 256
#define FAKE_POLLS 3 /* ncclCommGetAsyncError calls until an operation in progress is done */

typedef struct fake_task_s {
    void *dst;
    const void *src[FAKE_MAX_RANKS];
    uint32_t nsrc; /* 1: a copy; more: a reduction of them all */
    uint64_t bytes;
} fake_task_t;

/* One kernel's work, in pinned host memory. */
typedef struct fake_work_s {
    _Atomic uint32_t done;
    uint32_t ntasks;
    ncclDataType_t type;
    ncclRedOp_t op;
    fake_task_t task[FAKE_MAX_RANKS];
} fake_work_t;

typedef enum { FAKE_ALLREDUCE, FAKE_REDUCE, FAKE_BROADCAST, FAKE_ALLGATHER, FAKE_REDUCESCATTER, FAKE_SEND, FAKE_RECV } fake_kind_t;

typedef struct fake_call_s {
    fake_kind_t kind;
    const char *send;
    char *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root; /* the peer, for send and receive */
    CUstream stream;
    bool matched;
} fake_call_t;

typedef struct fake_clique_s fake_clique_t;

struct ncclComm {
    fake_clique_t *clique;
    int rank, device;
    CUcontext ctx;
    CUfunction step;
    CUdeviceptr channel;
    CUevent event;
    fake_work_t *slots;
    unsigned next_slot;
    fake_call_t *calls;
    size_t ncalls, capacity;
    unsigned registered;
    bool blocking; /* false: made with `config->blocking = 0` */
    bool ready;    /* `fake_rank_init` done (a non-blocking init defers it) */
    ncclResult_t state; /* what `ncclCommGetAsyncError` answers */
    int polls;          /* polls left while `state` is ncclInProgress */
};

struct fake_clique_s {
    int nranks;
    struct ncclComm *rank[FAKE_MAX_RANKS];
    bool pending;
    bool deferred; /* the recorded calls wait for a poll of a non-blocking rank */
    int joined;    /* ranks made so far (`ncclCommInitRankConfig`) */
    uint64_t id;   /* its unique id's serial; 0 for `ncclCommInitAll` */
    fake_clique_t *next; /* in `fake_joining` until every rank joined */
};

/* Elementwise `dst = dst op src` over `bytes`. */
#define FAKE_REDUCE_AS(T)                                                                          \
    do {                                                                                           \
        T *d = dst;                                                                                \
        const T *s = src;                                                                          \
        for (uint64_t i = 0; i < bytes / sizeof(T); i++) {                                         \
            switch (op) {                                                                          \
            case ncclProd: d[i] = (T)(d[i] * s[i]); break;                                         \
            case ncclMax: d[i] = d[i] > s[i] ? d[i] : s[i]; break;                                 \
            case ncclMin: d[i] = d[i] < s[i] ? d[i] : s[i]; break;                                 \
            default: d[i] = (T)(d[i] + s[i]); break;                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void fake_reduce(void *dst, const void *src, uint64_t bytes, ncclDataType_t type, ncclRedOp_t op)
{
    switch (type) {
    case ncclInt8: FAKE_REDUCE_AS(int8_t); break;
    case ncclUint8: FAKE_REDUCE_AS(uint8_t); break;
    case ncclInt32: FAKE_REDUCE_AS(int32_t); break;
    case ncclUint32: FAKE_REDUCE_AS(uint32_t); break;
    case ncclInt64: FAKE_REDUCE_AS(int64_t); break;
    case ncclUint64: FAKE_REDUCE_AS(uint64_t); break;
    case ncclFloat32: FAKE_REDUCE_AS(float); break;
    case ncclFloat64: FAKE_REDUCE_AS(double); break;
    default: break;
    }
}

/* The kernel: runs on the stream's worker, reads its descriptor. */
static void fake_step(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)launch;
    (void)user;
    fake_work_t *w = *(fake_work_t **)args[0];
    for (uint32_t t = 0; t < w->ntasks; t++) {
        fake_task_t *task = &w->task[t];
        memmove(task->dst, task->src[0], task->bytes);
        for (uint32_t k = 1; k < task->nsrc; k++)
            fake_reduce(task->dst, task->src[k], task->bytes, w->type, w->op);
    }
    atomic_store_explicit(&w->done, 1, memory_order_release);
}

static uint64_t fake_step_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)launch;
    (void)user;
    fake_work_t *w = *(fake_work_t **)args[0];
    uint64_t bytes = 0;
    for (uint32_t t = 0; t < w->ntasks; t++)
        bytes += w->task[t].bytes * (w->task[t].nsrc + 1);
    return 2000 + bytes / 2; /* 2 µs, then 2 GB/s... of the simulated clock: small */
}

static pthread_once_t fake_once = PTHREAD_ONCE_INIT;
static int fake_registered;

static void fake_register(void)
{
    static const size_t sizes[1] = {sizeof(void *)};
    simcuda_kernel_desc_t desc = {.name = "fake_nccl_step", .param_count = 1, .param_sizes = sizes,
                                  .fn = fake_step, .cost = fake_step_cost};
    fake_registered = simcuda_register_kernel(&desc);
}

/* This thread's groups. */
static __thread int fake_group_depth;
static __thread fake_clique_t *fake_group_cliques[16];
static __thread int fake_group_nclique;

static ncclResult_t fake_cu(CUresult rc)
{
    return rc == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

static ncclResult_t fake_rank_init(struct ncclComm *c)
{
    static const char placeholder[] = "fake_nccl: kernels are registered by name";
    CUdevice dev;
    CUmodule module;
    ncclResult_t rc = fake_cu(cuDeviceGet(&dev, c->device));
    if (rc == ncclSuccess)
        rc = fake_cu(cuDevicePrimaryCtxRetain(&c->ctx, dev));
    if (rc != ncclSuccess)
        return rc;
    cuCtxPushCurrent(c->ctx);
    rc = fake_cu(cuModuleLoadData(&module, placeholder));
    if (rc == ncclSuccess)
        rc = fake_cu(cuModuleGetFunction(&c->step, module, "fake_nccl_step"));
    if (rc == ncclSuccess)
        rc = fake_cu(cuMemAlloc(&c->channel, FAKE_CHANNEL_BYTES));
    if (rc == ncclSuccess)
        rc = fake_cu(cuEventCreate(&c->event, CU_EVENT_DISABLE_TIMING));
    void *slots = NULL;
    if (rc == ncclSuccess)
        rc = fake_cu(cuMemHostAlloc(&slots, FAKE_SLOTS * sizeof(fake_work_t), CU_MEMHOSTALLOC_DEVICEMAP));
    c->slots = slots;
    for (unsigned i = 0; rc == ncclSuccess && i < FAKE_SLOTS; i++)
        atomic_store(&c->slots[i].done, 1);
    CUcontext popped;
    cuCtxPopCurrent(&popped);
    return rc;
}

FAKE_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    if (comms == NULL || ndev < 1 || ndev > FAKE_MAX_RANKS)
        return ncclInvalidArgument;
    pthread_once(&fake_once, fake_register);
    if (fake_registered != 0)
        return ncclInternalError;
    fake_clique_t *clique = calloc(1, sizeof *clique);
    if (clique == NULL)
        return ncclSystemError;
    clique->nranks = ndev;
    for (int r = 0; r < ndev; r++) {
        struct ncclComm *c = calloc(1, sizeof *c);
        if (c == NULL)
            return ncclSystemError;
        c->clique = clique;
        c->rank = r;
        c->device = devlist != NULL ? devlist[r] : r;
        c->blocking = true;
        c->state = ncclSuccess;
        clique->rank[r] = c;
        clique->joined++;
        ncclResult_t rc = fake_rank_init(c);
        if (rc != ncclSuccess)
            return rc;
        c->ready = true;
        comms[r] = c;
    }
    return ncclSuccess;
}

/* Cliques made by `ncclCommInitRankConfig` whose ranks have not all joined,
 * found by the serial in their unique id. */
static pthread_mutex_t fake_joining_lock = PTHREAD_MUTEX_INITIALIZER;
static fake_clique_t *fake_joining;
static _Atomic uint64_t fake_next_id = 1;

static void fake_joining_unlink(fake_clique_t *clique)
{
    for (fake_clique_t **at = &fake_joining; *at != NULL; at = &(*at)->next) {
        if (*at == clique) {
            *at = clique->next;
            break;
        }
    }
}

FAKE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (uniqueId == NULL)
        return ncclInvalidArgument;
    uint64_t id = atomic_fetch_add(&fake_next_id, 1);
    memset(uniqueId, 0, sizeof *uniqueId);
    memcpy(uniqueId->internal, &id, sizeof id);
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                                ncclConfig_t *config)
{
    uint64_t id;
    memcpy(&id, commId.internal, sizeof id);
    if (comm == NULL || nranks < 1 || nranks > FAKE_MAX_RANKS || rank < 0 || rank >= nranks || id == 0)
        return ncclInvalidArgument;
    if (config != NULL && config->magic != NCCL_CONFIG_MAGIC)
        return ncclInvalidArgument;
    pthread_once(&fake_once, fake_register);
    if (fake_registered != 0)
        return ncclInternalError;
    /* NCCL's rank is on the calling thread's current device. */
    CUdevice dev = 0;
    if (cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        dev = 0;
    struct ncclComm *c = calloc(1, sizeof *c);
    if (c == NULL)
        return ncclSystemError;
    c->rank = rank;
    c->device = (int)dev;
    c->blocking = config == NULL || config->blocking != 0; /* NCCL_CONFIG_UNDEF_INT: blocking */
    c->state = ncclSuccess;
    pthread_mutex_lock(&fake_joining_lock);
    fake_clique_t *clique = fake_joining;
    while (clique != NULL && clique->id != id)
        clique = clique->next;
    if (clique == NULL && (clique = calloc(1, sizeof *clique)) != NULL) {
        clique->nranks = nranks;
        clique->id = id;
        clique->next = fake_joining;
        fake_joining = clique;
    }
    ncclResult_t rc = ncclSuccess;
    if (clique == NULL)
        rc = ncclSystemError;
    else if (clique->nranks != nranks || clique->rank[rank] != NULL)
        rc = ncclInvalidUsage;
    if (rc == ncclSuccess) {
        c->clique = clique;
        clique->rank[rank] = c;
        if (++clique->joined == nranks)
            fake_joining_unlink(clique);
    }
    pthread_mutex_unlock(&fake_joining_lock);
    if (rc != ncclSuccess) {
        free(c);
        return rc;
    }
    *comm = c;
    if (!c->blocking) {
        /* Made at the FAKE_POLLS-th `ncclCommGetAsyncError`. */
        c->state = ncclInProgress;
        c->polls = FAKE_POLLS;
        return ncclInProgress;
    }
    rc = fake_rank_init(c);
    c->ready = rc == ncclSuccess;
    return rc;
}

FAKE_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (comm == NULL || count == NULL)
        return ncclInvalidArgument;
    *count = comm->clique->nranks;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (comm == NULL || rank == NULL)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    CUdeviceptr base;
    size_t range;
    if (comm == NULL || buff == NULL || handle == NULL || size == 0)
        return ncclInvalidArgument;
    cuCtxPushCurrent(comm->ctx);
    CUresult rc = cuMemGetAddressRange(&base, &range, (CUdeviceptr)buff);
    CUcontext popped;
    cuCtxPopCurrent(&popped);
    if (rc != CUDA_SUCCESS || (uintptr_t)buff + size > base + range)
        return ncclInvalidArgument;
    comm->registered++;
    *handle = buff;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    if (comm == NULL || handle == NULL || comm->registered == 0)
        return ncclInvalidArgument;
    comm->registered--;
    return ncclSuccess;
}

/* ---- Running calls -------------------------------------------------------- */

/* A descriptor for `c`'s next kernel on `stream`: from the ring, or for a
 * capture one of its own (the graph may run it any number of times). */
static fake_work_t *fake_work(struct ncclComm *c, CUstream stream)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE) {
        void *own = NULL;
        if (cuMemHostAlloc(&own, sizeof(fake_work_t), CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS)
            return NULL;
        memset(own, 0, sizeof(fake_work_t));
        return own;
    }
    fake_work_t *w = &c->slots[c->next_slot++ % FAKE_SLOTS];
    while (atomic_load_explicit(&w->done, memory_order_acquire) == 0)
        sched_yield();
    atomic_store_explicit(&w->done, 0, memory_order_relaxed);
    w->ntasks = 0;
    return w;
}

static void fake_task(fake_work_t *w, void *dst, const void *src, uint64_t bytes)
{
    fake_task_t *t = &w->task[w->ntasks++];
    t->dst = dst;
    t->src[0] = src;
    t->nsrc = 1;
    t->bytes = bytes;
}

static ncclResult_t fake_launch(struct ncclComm *c, CUstream stream, fake_work_t *w)
{
    void *params[1] = {&w};
    if (w->ntasks == 0) {
        atomic_store(&w->done, 1);
        return ncclSuccess;
    }
    cuCtxPushCurrent(c->ctx);
    CUresult rc = cuLaunchKernel(c->step, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
    CUcontext popped;
    cuCtxPopCurrent(&popped);
    return fake_cu(rc);
}

/* Every stream of `calls` waits for every other's work so far. */
static ncclResult_t fake_barrier(fake_clique_t *q, fake_call_t **calls)
{
    CUcontext popped;
    if (q->nranks == 1)
        return ncclSuccess;
    for (int r = 0; r < q->nranks; r++) {
        cuCtxPushCurrent(q->rank[r]->ctx);
        CUresult rc = cuEventRecord(q->rank[r]->event, calls[r]->stream);
        cuCtxPopCurrent(&popped);
        if (rc != CUDA_SUCCESS)
            return ncclUnhandledCudaError;
    }
    for (int r = 0; r < q->nranks; r++) {
        cuCtxPushCurrent(q->rank[r]->ctx);
        for (int j = 0; j < q->nranks; j++) {
            if (j != r && cuStreamWaitEvent(calls[r]->stream, q->rank[j]->event, 0) != CUDA_SUCCESS) {
                cuCtxPopCurrent(&popped);
                return ncclUnhandledCudaError;
            }
        }
        cuCtxPopCurrent(&popped);
    }
    return ncclSuccess;
}

/* One collective, the call of each rank in `calls`. */
static ncclResult_t fake_collective(fake_clique_t *q, fake_call_t **calls)
{
    int n = q->nranks;
    fake_call_t *first = calls[0];
    size_t esize = vs_nccl_type_size(first->type);
    for (int r = 1; r < n; r++)
        if (calls[r]->kind != first->kind || calls[r]->count != first->count || calls[r]->type != first->type
            || calls[r]->root != first->root)
            return ncclInvalidUsage;
    /* Elements per chunk: what a channel holds (a reduce-scatter's stage
     * holds one slice per rank). */
    size_t per_chunk = FAKE_CHANNEL_BYTES / esize / (first->kind == FAKE_REDUCESCATTER ? (size_t)n : 1);
    size_t total = first->count;
    ncclResult_t rc = ncclSuccess;
    for (size_t o = 0; o < total && rc == ncclSuccess; o += per_chunk) {
        size_t k = total - o < per_chunk ? total - o : per_chunk;
        uint64_t bytes = (uint64_t)k * esize, at = (uint64_t)o * esize;
        /* Stage: into the channels. */
        for (int r = 0; r < n && rc == ncclSuccess; r++) {
            struct ncclComm *c = q->rank[r];
            fake_call_t *call = calls[r];
            fake_work_t *w = fake_work(c, call->stream);
            if (w == NULL)
                return ncclSystemError;
            char *channel = (char *)(uintptr_t)c->channel;
            if (first->kind == FAKE_REDUCESCATTER) {
                for (int j = 0; j < n; j++)
                    fake_task(w, channel + (uint64_t)j * bytes, call->send + ((uint64_t)j * total * esize + at),
                              bytes);
            } else if (first->kind != FAKE_BROADCAST || r == first->root) {
                fake_task(w, channel, call->send + at, bytes);
            }
            rc = fake_launch(c, call->stream, w);
        }
        if (rc == ncclSuccess)
            rc = fake_barrier(q, calls);
        /* Gather: from the channels into the user's buffers. */
        for (int r = 0; r < n && rc == ncclSuccess; r++) {
            struct ncclComm *c = q->rank[r];
            fake_call_t *call = calls[r];
            fake_work_t *w = fake_work(c, call->stream);
            if (w == NULL)
                return ncclSystemError;
            w->type = first->type;
            w->op = first->op;
            switch (first->kind) {
            case FAKE_ALLREDUCE:
            case FAKE_REDUCE:
                if (first->kind == FAKE_REDUCE && r != first->root)
                    break;
                fake_task(w, call->recv + at, NULL, bytes);
                for (int j = 0; j < n; j++)
                    w->task[0].src[j] = (const void *)(uintptr_t)q->rank[j]->channel;
                w->task[0].nsrc = (uint32_t)n;
                break;
            case FAKE_BROADCAST:
                fake_task(w, call->recv + at, (const void *)(uintptr_t)q->rank[first->root]->channel, bytes);
                break;
            case FAKE_ALLGATHER:
                for (int j = 0; j < n; j++)
                    fake_task(w, call->recv + ((uint64_t)j * total * esize + at),
                              (const void *)(uintptr_t)q->rank[j]->channel, bytes);
                break;
            case FAKE_REDUCESCATTER:
                fake_task(w, call->recv + at, NULL, bytes);
                for (int j = 0; j < n; j++)
                    w->task[0].src[j] = (const char *)(uintptr_t)q->rank[j]->channel + (uint64_t)r * bytes;
                w->task[0].nsrc = (uint32_t)n;
                break;
            default:
                break;
            }
            rc = fake_launch(c, call->stream, w);
        }
        if (rc == ncclSuccess)
            rc = fake_barrier(q, calls);
    }
    return rc;
}

/* Stream `waiter` (rank `w`) waits for the work so far of stream `on`
 * (rank `o`). */
static ncclResult_t fake_wait(fake_clique_t *q, int w, CUstream waiter, int o, CUstream on)
{
    CUcontext popped;
    cuCtxPushCurrent(q->rank[o]->ctx);
    CUresult rc = cuEventRecord(q->rank[o]->event, on);
    cuCtxPopCurrent(&popped);
    if (rc == CUDA_SUCCESS) {
        cuCtxPushCurrent(q->rank[w]->ctx);
        rc = cuStreamWaitEvent(waiter, q->rank[o]->event, 0);
        cuCtxPopCurrent(&popped);
    }
    return fake_cu(rc);
}

/* One send and its receive: through the sender's channel. */
static ncclResult_t fake_p2p(fake_clique_t *q, fake_call_t *send, int from, fake_call_t *recv, int to)
{
    size_t esize = vs_nccl_type_size(send->type);
    size_t per_chunk = FAKE_CHANNEL_BYTES / esize;
    ncclResult_t rc = ncclSuccess;
    for (size_t o = 0; o < send->count && rc == ncclSuccess; o += per_chunk) {
        size_t k = send->count - o < per_chunk ? send->count - o : per_chunk;
        uint64_t bytes = (uint64_t)k * esize, at = (uint64_t)o * esize;
        /* The sender's channel is free once the receiver read the last
         * chunk out of it. */
        if (from != to && (rc = fake_wait(q, from, send->stream, to, recv->stream)) != ncclSuccess)
            break;
        fake_work_t *w = fake_work(q->rank[from], send->stream);
        if (w == NULL)
            return ncclSystemError;
        fake_task(w, (void *)(uintptr_t)q->rank[from]->channel, send->send + at, bytes);
        if ((rc = fake_launch(q->rank[from], send->stream, w)) != ncclSuccess)
            break;
        if (from != to && (rc = fake_wait(q, to, recv->stream, from, send->stream)) != ncclSuccess)
            break;
        w = fake_work(q->rank[to], recv->stream);
        if (w == NULL)
            return ncclSystemError;
        fake_task(w, recv->recv + at, (const void *)(uintptr_t)q->rank[from]->channel, bytes);
        rc = fake_launch(q->rank[to], recv->stream, w);
    }
    /* The sender's stream passes the call once the receiver has read it. */
    if (rc == ncclSuccess && from != to)
        rc = fake_wait(q, from, send->stream, to, recv->stream);
    return rc;
}

/* Runs what the ranks of `q` recorded, then forgets it. */
static ncclResult_t fake_run(fake_clique_t *q)
{
    ncclResult_t rc = ncclSuccess;
    size_t collectives[FAKE_MAX_RANKS] = {0};
    int n = q->nranks;
    /* Collectives in order on each rank. */
    for (;;) {
        fake_call_t *calls[FAKE_MAX_RANKS];
        int found = 0;
        for (int r = 0; r < n; r++) {
            struct ncclComm *c = q->rank[r];
            while (collectives[r] < c->ncalls
                   && (c->calls[collectives[r]].kind == FAKE_SEND || c->calls[collectives[r]].kind == FAKE_RECV))
                collectives[r]++;
            if (collectives[r] < c->ncalls) {
                calls[r] = &c->calls[collectives[r]++];
                found++;
            }
        }
        if (found == 0)
            break;
        if (found != n) {
            rc = ncclInvalidUsage;
            break;
        }
        if ((rc = fake_collective(q, calls)) != ncclSuccess)
            break;
    }
    /* Each send with the first unmatched receive of its peer from it. */
    for (int from = 0; from < n && rc == ncclSuccess; from++) {
        struct ncclComm *c = q->rank[from];
        for (size_t i = 0; i < c->ncalls && rc == ncclSuccess; i++) {
            fake_call_t *send = &c->calls[i];
            if (send->kind != FAKE_SEND)
                continue;
            int to = send->root;
            fake_call_t *recv = NULL;
            for (size_t j = 0; j < q->rank[to]->ncalls && recv == NULL; j++) {
                fake_call_t *cand = &q->rank[to]->calls[j];
                if (cand->kind == FAKE_RECV && !cand->matched && cand->root == from)
                    recv = cand;
            }
            if (recv == NULL || recv->count != send->count || recv->type != send->type) {
                rc = ncclInvalidUsage;
                break;
            }
            recv->matched = true;
            rc = fake_p2p(q, send, from, recv, to);
        }
    }
    for (int r = 0; r < n; r++)
        q->rank[r]->ncalls = 0;
    q->pending = false;
    return rc;
}

/* Whether every rank of `q` is blocking. */
static bool fake_blocking(const fake_clique_t *q)
{
    for (int r = 0; r < q->nranks; r++)
        if (q->rank[r] != NULL && !q->rank[r]->blocking)
            return false;
    return true;
}

/* The calls `q` recorded wait for its ranks' polls: each rank is in
 * progress until its FAKE_POLLS-th, and the first rank done submits them
 * all (as NCCL's thread for the group would). */
static ncclResult_t fake_defer(fake_clique_t *q)
{
    q->deferred = true;
    q->pending = false;
    for (int r = 0; r < q->nranks; r++) {
        if (q->rank[r] == NULL)
            continue;
        q->rank[r]->state = ncclInProgress;
        q->rank[r]->polls = FAKE_POLLS;
    }
    return ncclInProgress;
}

static ncclResult_t fake_post(ncclComm_t comm, fake_call_t call)
{
    if (comm == NULL)
        return ncclInvalidArgument;
    if (comm->state == ncclInProgress || comm->clique->joined < comm->clique->nranks)
        return ncclInvalidUsage;
    if (vs_nccl_type_size(call.type) == 0 || vs_nccl_type_size(call.type) == 2 || call.op >= ncclAvg)
        return ncclInvalidArgument;
    if ((call.kind == FAKE_SEND || call.kind == FAKE_RECV || call.kind == FAKE_BROADCAST || call.kind == FAKE_REDUCE)
        && (call.root < 0 || call.root >= comm->clique->nranks))
        return ncclInvalidArgument;
    if (fake_group_depth == 0 && comm->clique->nranks > 1)
        return ncclInvalidUsage;
    if (comm->ncalls == comm->capacity) {
        size_t capacity = comm->capacity ? comm->capacity * 2 : 8;
        fake_call_t *grown = realloc(comm->calls, capacity * sizeof *grown);
        if (grown == NULL)
            return ncclSystemError;
        comm->calls = grown;
        comm->capacity = capacity;
    }
    comm->calls[comm->ncalls++] = call;
    if (fake_group_depth == 0)
        return fake_blocking(comm->clique) ? fake_run(comm->clique) : fake_defer(comm->clique);
    if (!comm->clique->pending) {
        if (fake_group_nclique == 16)
            return ncclInvalidUsage;
        comm->clique->pending = true;
        fake_group_cliques[fake_group_nclique++] = comm->clique;
    }
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclGroupStart(void)
{
    fake_group_depth++;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclGroupEnd(void)
{
    if (fake_group_depth == 0)
        return ncclInvalidUsage;
    if (--fake_group_depth > 0)
        return ncclSuccess;
    ncclResult_t rc = ncclSuccess;
    for (int i = 0; i < fake_group_nclique; i++) {
        fake_clique_t *q = fake_group_cliques[i];
        ncclResult_t one = fake_blocking(q) ? fake_run(q) : fake_defer(q);
        if (rc == ncclSuccess || rc == ncclInProgress)
            rc = one == ncclSuccess ? rc : one;
    }
    fake_group_nclique = 0;
    return rc;
}

FAKE_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t_nccl stream)
{
    return fake_post(comm, (fake_call_t){.kind = FAKE_ALLREDUCE, .send = sendbuff, .recv = recvbuff, .count = count,
                                         .type = datatype, .op = op, .stream = stream});
}

FAKE_EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t_nccl stream)
{
    return fake_post(comm, (fake_call_t){.kind = FAKE_REDUCE, .send = sendbuff, .recv = recvbuff, .count = count,
                                         .type = datatype, .op = op, .root = root, .stream = stream});
}

FAKE_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t_nccl stream)
{
    return fake_post(comm, (fake_call_t){.kind = FAKE_BROADCAST, .send = sendbuff, .recv = recvbuff, .count = count,
                                         .type = datatype, .root = root, .stream = stream});
}

FAKE_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                       ncclDataType_t datatype, ncclComm_t comm, cudaStream_t_nccl stream)
{
    return fake_post(comm, (fake_call_t){.kind = FAKE_ALLGATHER, .send = sendbuff, .recv = recvbuff,
                                         .count = sendcount, .type = datatype, .stream = stream});
}

FAKE_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t_nccl stream)
{
    return fake_post(comm, (fake_call_t){.kind = FAKE_REDUCESCATTER, .send = sendbuff, .recv = recvbuff,
                                         .count = recvcount, .type = datatype, .op = op, .stream = stream});
}

FAKE_EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t_nccl stream)
{
    return fake_post(comm, (fake_call_t){.kind = FAKE_SEND, .send = sendbuff, .count = count, .type = datatype,
                                         .root = peer, .stream = stream});
}

FAKE_EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                  cudaStream_t_nccl stream)
{
    return fake_post(comm, (fake_call_t){.kind = FAKE_RECV, .recv = recvbuff, .count = count, .type = datatype,
                                         .root = peer, .stream = stream});
}

/* ---- Progress and teardown ----------------------------------------------- */

FAKE_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (comm == NULL || asyncError == NULL)
        return ncclInvalidArgument;
    if (comm->state == ncclInProgress && --comm->polls == 0) {
        /* Done now: what was deferred is made or launched. */
        ncclResult_t rc = ncclSuccess;
        if (!comm->ready) {
            rc = fake_rank_init(comm);
            comm->ready = rc == ncclSuccess;
        }
        if (rc == ncclSuccess && comm->clique->deferred) {
            comm->clique->deferred = false;
            rc = fake_run(comm->clique);
        }
        comm->state = rc;
    }
    *asyncError = comm->state;
    return ncclSuccess;
}

/* Frees `comm`; what its clique still has recorded is submitted first
 * (`submit`) or dropped. */
static ncclResult_t fake_comm_free(ncclComm_t comm, bool submit)
{
    if (comm == NULL)
        return ncclInvalidArgument;
    fake_clique_t *clique = comm->clique;
    ncclResult_t rc = ncclSuccess;
    if (clique->deferred) {
        clique->deferred = false;
        if (submit) {
            rc = fake_run(clique);
        } else {
            for (int r = 0; r < clique->nranks; r++) {
                struct ncclComm *peer = clique->rank[r];
                if (peer == NULL)
                    continue;
                peer->ncalls = 0;
                if (peer != comm && peer->state == ncclInProgress)
                    peer->state = ncclRemoteError;
            }
        }
    }
    if (comm->ready) {
        cuCtxPushCurrent(comm->ctx);
        cuCtxSynchronize();
        cuMemFree(comm->channel);
        cuEventDestroy(comm->event);
        cuMemFreeHost(comm->slots);
        CUcontext popped;
        cuCtxPopCurrent(&popped);
    }
    free(comm->calls);
    pthread_mutex_lock(&fake_joining_lock);
    clique->rank[comm->rank] = NULL;
    bool last = true;
    for (int r = 0; r < clique->nranks; r++)
        last = last && clique->rank[r] == NULL;
    if (last) {
        fake_joining_unlink(clique);
        free(clique);
    }
    pthread_mutex_unlock(&fake_joining_lock);
    free(comm);
    return rc;
}

FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    return fake_comm_free(comm, true);
}

FAKE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    return fake_comm_free(comm, false);
}

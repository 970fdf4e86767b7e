/* hooks_nccl.c: NCCL's collectives and point-to-point calls under offload
 * (nccl.def; `vs_nccl_inside` for the allocators).
 *
 * NCCL reaches the user's buffers from its own kernels through work
 * descriptors in its own memory, where no launch scan sees them. So each
 * call names its buffers here, with their extents from the count and the
 * type (times the communicator's size where the call says so: an
 * all-gather's receive buffer, a reduce-scatter's send buffer), and goes
 * through `vs_op_hold`/`vs_op_stamp` (offload.h): what it touches is
 * restored on the call's stream and held while NCCL runs, then stamped as
 * used on that stream, so an eviction waits for the stream to pass the
 * call. The real call runs with no shim lock held: NCCL allocates, launches
 * and records events inside it.
 *
 * Between `ncclGroupStart` and `ncclGroupEnd` NCCL only records the calls
 * and submits them at the outermost end: their holds are kept on this
 * thread until then. A call on a capturing stream runs when the graph is
 * launched: its buffers join the captured graph's set (hooks_graph.c),
 * held while an executable graph made from it lives and restored at each of
 * its launches. `ncclCommRegister` holds its buffer until
 * `ncclCommDeregister`: NCCL may map it for its peers at registration.
 * A non-blocking communicator's call that answers `ncclInProgress` (or a
 * group whose end does) keeps its holds until `ncclCommGetAsyncError` says
 * the communicator is done: NCCL enqueues the work on the stream from its
 * own thread meanwhile. `ncclCommDestroy` (which finalizes first: the work
 * is enqueued) and `ncclCommAbort` (which drops it) let them go.
 *
 * While a thread is inside any NCCL call, `vs_nccl_inside` is true: the
 * memory NCCL allocates for itself stays plain device memory (its peers
 * reach it through pointers the shim never sees).
 *
 * The real functions: `dlsym(RTLD_NEXT)` from here finds the libnccl the
 * program linked (the shim is preloaded in front of it); a program that
 * opened NCCL itself (ctypes, RTLD_LOCAL) resolves it with `dlsym` on its
 * handle, and the override (resolve.c) hands out the wrapper and records
 * the real function and the handle here (`vs_nccl_dlsym`).
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hooks.h"
#include "launch.h"
#include "log.h"
#include "nccl_api.h"
#include "offload.h"

/* Exported declarations, as hooks.h does for the driver's rows. */
#define VS_NCCL(symbol) VS_EXPORT __typeof__(symbol) symbol;
#define VS_NCCL_USES(symbol)
#include "nccl.def"
#undef VS_NCCL_USES
#undef VS_NCCL

/* One slot per row: the real function, once found. */
enum {
#define VS_NCCL(symbol) VS_NCCL_SLOT_##symbol,
#define VS_NCCL_USES(symbol) VS_NCCL(symbol)
#include "nccl.def"
#undef VS_NCCL_USES
#undef VS_NCCL
    VS_NCCL_SLOTS
};

typedef void (*vs_nccl_fn_t)(void);

static const struct {
    const char *name;
    vs_nccl_fn_t wrapper; /* NULL: resolved, not wrapped */
} vs_nccl_rows[VS_NCCL_SLOTS] = {
#define VS_NCCL(symbol) {#symbol, (vs_nccl_fn_t)&symbol},
#define VS_NCCL_USES(symbol) {#symbol, NULL},
#include "nccl.def"
#undef VS_NCCL_USES
#undef VS_NCCL
};

static _Atomic(void *) vs_nccl_real[VS_NCCL_SLOTS];
/* The handle a program passed to `dlsym` for an NCCL symbol: where the
 * rows it did not ask for yet are found. */
static _Atomic(void *) vs_nccl_handle;

static __thread int vs_nccl_depth;

bool vs_nccl_inside(void)
{
    return vs_nccl_depth > 0;
}

static bool vs_nccl_is_wrapper(const void *fn)
{
    for (int i = 0; i < VS_NCCL_SLOTS; i++) {
        void *wrapper;
        memcpy(&wrapper, &vs_nccl_rows[i].wrapper, sizeof wrapper);
        if (wrapper != NULL && wrapper == fn)
            return true;
    }
    return false;
}

VS_NO_SANITIZE void *vs_nccl_dlsym(void *handle, const char *name, void *result)
{
    for (int i = 0; i < VS_NCCL_SLOTS; i++) {
        if (strcmp(vs_nccl_rows[i].name, name) != 0)
            continue;
        if (vs_nccl_is_wrapper(result))
            return result; /* the program's look-up found the shim's export */
        void *expected = NULL;
        atomic_compare_exchange_strong(&vs_nccl_real[i], &expected, result);
        if (handle != RTLD_DEFAULT && handle != RTLD_NEXT)
            atomic_store(&vs_nccl_handle, handle);
        if (vs_nccl_rows[i].wrapper == NULL)
            return result;
        void *wrapper;
        memcpy(&wrapper, &vs_nccl_rows[i].wrapper, sizeof wrapper);
        return wrapper;
    }
    return result;
}

/* The real function of `slot`, found now if it was not yet; NULL when no
 * NCCL is loaded (then the program cannot have called it: it came through
 * the shim's export of a library that is not there). */
static void *vs_nccl_find(int slot)
{
    void *fn = atomic_load_explicit(&vs_nccl_real[slot], memory_order_acquire);
    if (fn != NULL)
        return fn;
    const char *name = vs_nccl_rows[slot].name;
    fn = vs_driver_real_dlsym(RTLD_NEXT, name);
    void *handle = atomic_load(&vs_nccl_handle);
    if ((fn == NULL || vs_nccl_is_wrapper(fn)) && handle != NULL)
        fn = vs_driver_real_dlsym(handle, name);
    if (fn == NULL || vs_nccl_is_wrapper(fn)) {
        vs_log(VS_LOG_WARN, "%s: no NCCL library defines it", name);
        return NULL;
    }
    atomic_store_explicit(&vs_nccl_real[slot], fn, memory_order_release);
    return fn;
}

/* Calls the real `symbol` with `args` inside the depth flag; its result in
 * `rc` (ncclInternalError when no NCCL defines it). */
#define VS_NCCL_REAL(rc, symbol, args)                                                             \
    do {                                                                                           \
        __typeof__(symbol) *vs_fn_;                                                                \
        void *vs_found_ = vs_nccl_find(VS_NCCL_SLOT_##symbol);                                     \
        memcpy(&vs_fn_, &vs_found_, sizeof vs_fn_);                                                \
        if (vs_fn_ == NULL) {                                                                      \
            (rc) = ncclInternalError;                                                              \
            break;                                                                                 \
        }                                                                                          \
        vs_nccl_depth++;                                                                           \
        (rc) = vs_fn_ args;                                                                        \
        vs_nccl_depth--;                                                                           \
    } while (0)

/* ---- Holds --------------------------------------------------------------- */

/* One call's buffers and holds, from the call until its work is submitted
 * (at once, at the group's end, or when a non-blocking communicator is done
 * with it). */
typedef struct vs_nccl_call_s {
    vs_op_t op;
    ncclComm_t comm;
    uintptr_t buffer[8];
    vs_words_t words;
    struct vs_nccl_call_s *next;
} vs_nccl_call_t;

/* This thread's open groups: how deep, and the calls made in them. */
static __thread int vs_nccl_group_depth;
static __thread vs_nccl_call_t *vs_nccl_group_calls;

/* Calls of non-blocking communicators still in progress, all threads. */
static pthread_mutex_t vs_nccl_pending_lock = PTHREAD_MUTEX_INITIALIZER;
static vs_nccl_call_t *vs_nccl_pending;

static void vs_nccl_call_free(vs_nccl_call_t *call)
{
    free(call->words.heap);
    free(call);
}

/* Records the uses and lets the holds go (the work is submitted). */
static void vs_nccl_call_finish(vs_nccl_call_t *call)
{
    vs_op_stamp(&call->op, call->words.words, call->words.count);
    vs_nccl_call_free(call);
}

static void vs_nccl_finish_list(vs_nccl_call_t *list)
{
    while (list != NULL) {
        vs_nccl_call_t *next = list->next;
        vs_nccl_call_finish(list);
        list = next;
    }
}

/* Takes `comm`'s calls off the in-progress list. */
static vs_nccl_call_t *vs_nccl_pending_take(ncclComm_t comm)
{
    vs_nccl_call_t *taken = NULL;
    pthread_mutex_lock(&vs_nccl_pending_lock);
    for (vs_nccl_call_t **at = &vs_nccl_pending; *at != NULL;) {
        vs_nccl_call_t *call = *at;
        if (call->comm == comm) {
            *at = call->next;
            call->next = taken;
            taken = call;
        } else {
            at = &call->next;
        }
    }
    pthread_mutex_unlock(&vs_nccl_pending_lock);
    return taken;
}

/* What a call touches: two ranges at most (0 bytes or NULL: none). Holds
 * them on `stream`; NULL when there is nothing to do (offload off, nothing
 * evictable named), and `*rc` is ncclUnhandledCudaError when the room for
 * them could not be made. */
static vs_nccl_call_t *vs_nccl_call_begin(ncclComm_t comm, CUstream stream, const void *first, uint64_t first_bytes,
                                          const void *second, uint64_t second_bytes, ncclResult_t *rc)
{
    *rc = ncclSuccess;
    if (!vs_offload_enabled())
        return NULL;
    vs_nccl_call_t *call = malloc(sizeof *call);
    if (call == NULL) {
        *rc = ncclSystemError; /* as NCCL answers a failed host allocation */
        return NULL;
    }
    call->comm = comm;
    call->next = NULL;
    call->words = (vs_words_t)VS_WORDS_INIT(call->buffer);
    if (first != NULL && first_bytes > 0)
        vs_words_add_range(&call->words, (uintptr_t)first, first_bytes);
    if (second != NULL && second_bytes > 0)
        vs_words_add_range(&call->words, (uintptr_t)second, second_bytes);
    if (call->words.count == 0) {
        vs_nccl_call_free(call);
        return NULL;
    }
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (VS_CALL(cuStreamIsCapturing, (stream, &status)) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE) {
        vs_graph_capture_names(stream, call->words.words, call->words.count);
        vs_nccl_call_free(call);
        return NULL;
    }
    vs_op_begin(&call->op, stream, false);
    call->op.name = "nccl";
    if (vs_op_hold(&call->op, call->words.words, call->words.count) != CUDA_SUCCESS) {
        vs_op_end(&call->op);
        vs_nccl_call_free(call);
        *rc = ncclUnhandledCudaError;
        return NULL;
    }
    return call;
}

/* After the real call answered `rc`: finish now, at the group's end, or when
 * the communicator is done. */
static void vs_nccl_call_end(vs_nccl_call_t *call, ncclResult_t rc)
{
    if (call == NULL)
        return;
    if (rc == ncclInProgress) {
        pthread_mutex_lock(&vs_nccl_pending_lock);
        call->next = vs_nccl_pending;
        vs_nccl_pending = call;
        pthread_mutex_unlock(&vs_nccl_pending_lock);
    } else if (vs_nccl_group_depth > 0 && rc == ncclSuccess) {
        call->next = vs_nccl_group_calls;
        vs_nccl_group_calls = call;
    } else {
        vs_nccl_call_finish(call);
    }
}

/* The number of ranks of `comm` (1 when NCCL cannot tell: a call with a bad
 * communicator fails in NCCL before touching anything). */
static uint64_t vs_nccl_ranks(ncclComm_t comm)
{
    int count = 1;
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclCommCount, (comm, &count));
    return rc == ncclSuccess && count > 0 ? (uint64_t)count : 1;
}

static int vs_nccl_rank(ncclComm_t comm)
{
    int rank = -1;
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclCommUserRank, (comm, &rank));
    return rc == ncclSuccess ? rank : -1;
}

/* Runs the real `symbol` on `stream` holding what it touches. */
#define VS_NCCL_OPERATE(symbol, comm, stream, first, first_bytes, second, second_bytes, args)       \
    do {                                                                                           \
        ncclResult_t vs_rc_;                                                                       \
        vs_nccl_call_t *vs_call_ = vs_nccl_call_begin((comm), (CUstream)(stream), (first), (first_bytes), \
                                                      (second), (second_bytes), &vs_rc_);          \
        if (vs_rc_ != ncclSuccess)                                                                 \
            return vs_rc_;                                                                         \
        VS_NCCL_REAL(vs_rc_, symbol, args);                                                        \
        vs_nccl_call_end(vs_call_, vs_rc_);                                                        \
        return vs_rc_;                                                                             \
    } while (0)

/* ---- Collectives and point-to-point -------------------------------------- */

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t_nccl stream)
{
    uint64_t bytes = (uint64_t)count * vs_nccl_type_size(datatype);
    VS_NCCL_OPERATE(ncclAllReduce, comm, stream, sendbuff, bytes, recvbuff, bytes,
                    (sendbuff, recvbuff, count, datatype, op, comm, stream));
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t_nccl stream)
{
    uint64_t bytes = (uint64_t)count * vs_nccl_type_size(datatype);
    /* Only the root's send buffer is read; reading a non-root's would be
     * harmless, but it may be any pointer there. */
    const void *send = vs_nccl_rank(comm) == root ? sendbuff : NULL;
    VS_NCCL_OPERATE(ncclBroadcast, comm, stream, send, bytes, recvbuff, bytes,
                    (sendbuff, recvbuff, count, datatype, root, comm, stream));
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t_nccl stream)
{
    uint64_t bytes = (uint64_t)count * vs_nccl_type_size(datatype);
    VS_NCCL_OPERATE(ncclBcast, comm, stream, buff, bytes, NULL, 0, (buff, count, datatype, root, comm, stream));
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t_nccl stream)
{
    uint64_t bytes = (uint64_t)count * vs_nccl_type_size(datatype);
    const void *recv = vs_nccl_rank(comm) == root ? recvbuff : NULL;
    VS_NCCL_OPERATE(ncclReduce, comm, stream, sendbuff, bytes, recv, bytes,
                    (sendbuff, recvbuff, count, datatype, op, root, comm, stream));
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t_nccl stream)
{
    uint64_t bytes = (uint64_t)sendcount * vs_nccl_type_size(datatype);
    VS_NCCL_OPERATE(ncclAllGather, comm, stream, sendbuff, bytes, recvbuff, bytes * vs_nccl_ranks(comm),
                    (sendbuff, recvbuff, sendcount, datatype, comm, stream));
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t_nccl stream)
{
    uint64_t bytes = (uint64_t)recvcount * vs_nccl_type_size(datatype);
    VS_NCCL_OPERATE(ncclReduceScatter, comm, stream, sendbuff, bytes * vs_nccl_ranks(comm), recvbuff, bytes,
                    (sendbuff, recvbuff, recvcount, datatype, op, comm, stream));
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t_nccl stream)
{
    uint64_t bytes = (uint64_t)count * vs_nccl_type_size(datatype) * vs_nccl_ranks(comm);
    VS_NCCL_OPERATE(ncclAlltoAll, comm, stream, sendbuff, bytes, recvbuff, bytes,
                    (sendbuff, recvbuff, count, datatype, comm, stream));
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t_nccl stream)
{
    uint64_t bytes = (uint64_t)count * vs_nccl_type_size(datatype);
    const void *recv = vs_nccl_rank(comm) == root ? recvbuff : NULL;
    VS_NCCL_OPERATE(ncclGather, comm, stream, sendbuff, bytes, recv, bytes * vs_nccl_ranks(comm),
                    (sendbuff, recvbuff, count, datatype, root, comm, stream));
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t_nccl stream)
{
    uint64_t bytes = (uint64_t)count * vs_nccl_type_size(datatype);
    const void *send = vs_nccl_rank(comm) == root ? sendbuff : NULL;
    VS_NCCL_OPERATE(ncclScatter, comm, stream, send, bytes * vs_nccl_ranks(comm), recvbuff, bytes,
                    (sendbuff, recvbuff, count, datatype, root, comm, stream));
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t_nccl stream)
{
    uint64_t bytes = (uint64_t)count * vs_nccl_type_size(datatype);
    VS_NCCL_OPERATE(ncclSend, comm, stream, sendbuff, bytes, NULL, 0, (sendbuff, count, datatype, peer, comm, stream));
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t_nccl stream)
{
    uint64_t bytes = (uint64_t)count * vs_nccl_type_size(datatype);
    VS_NCCL_OPERATE(ncclRecv, comm, stream, recvbuff, bytes, NULL, 0, (recvbuff, count, datatype, peer, comm, stream));
}

ncclResult_t ncclGroupStart(void)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclGroupStart, ());
    if (rc == ncclSuccess)
        vs_nccl_group_depth++;
    return rc;
}

ncclResult_t ncclGroupEnd(void)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclGroupEnd, ());
    if (vs_nccl_group_depth > 0 && --vs_nccl_group_depth == 0) {
        vs_nccl_call_t *calls = vs_nccl_group_calls;
        vs_nccl_group_calls = NULL;
        if (rc == ncclInProgress) {
            /* Submitted by NCCL's own thread later: until the
             * communicators say they are done. */
            while (calls != NULL) {
                vs_nccl_call_t *next = calls->next;
                vs_nccl_call_end(calls, rc);
                calls = next;
            }
        } else {
            vs_nccl_finish_list(calls);
        }
    }
    return rc;
}

/* ---- Registration -------------------------------------------------------- */

/* A registered buffer's holds, until its handle is deregistered. */
typedef struct vs_nccl_reg_s {
    ncclComm_t comm;
    void *handle;
    uintptr_t buffer[4];
    vs_words_t words;
    struct vs_nccl_reg_s *next;
} vs_nccl_reg_t;

static pthread_mutex_t vs_nccl_regs_lock = PTHREAD_MUTEX_INITIALIZER;
static vs_nccl_reg_t *vs_nccl_regs;

ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    ncclResult_t rc;
    /* Restored (on the legacy stream, which NCCL's own mapping calls wait
     * for) and held across the real call, then held on for good. */
    vs_nccl_call_t *call = vs_nccl_call_begin(comm, NULL, buff, size, NULL, 0, &rc);
    if (rc != ncclSuccess)
        return rc;
    VS_NCCL_REAL(rc, ncclCommRegister, (comm, buff, size, handle));
    vs_nccl_reg_t *reg = NULL;
    if (call != NULL && rc == ncclSuccess && handle != NULL && (reg = malloc(sizeof *reg)) != NULL) {
        reg->comm = comm;
        reg->handle = *handle;
        reg->words = (vs_words_t)VS_WORDS_INIT(reg->buffer);
        vs_words_add_range(&reg->words, (uintptr_t)buff, size);
        vs_offload_hold(reg->words.words, reg->words.count, +1);
        pthread_mutex_lock(&vs_nccl_regs_lock);
        reg->next = vs_nccl_regs;
        vs_nccl_regs = reg;
        pthread_mutex_unlock(&vs_nccl_regs_lock);
    } else if (call != NULL && rc == ncclSuccess) {
        vs_log(VS_LOG_WARN, "ncclCommRegister: cannot record the buffer at %p; it stays resident for good", buff);
        vs_offload_pin((uintptr_t)buff, "registered with NCCL");
    }
    if (call != NULL)
        vs_nccl_call_finish(call);
    return rc;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclCommDeregister, (comm, handle));
    if (rc != ncclSuccess)
        return rc;
    pthread_mutex_lock(&vs_nccl_regs_lock);
    vs_nccl_reg_t **at = &vs_nccl_regs, *reg = NULL;
    for (; *at != NULL; at = &(*at)->next) {
        if ((*at)->comm == comm && (*at)->handle == handle) {
            reg = *at;
            *at = reg->next;
            break;
        }
    }
    pthread_mutex_unlock(&vs_nccl_regs_lock);
    if (reg != NULL) {
        vs_offload_hold(reg->words.words, reg->words.count, -1);
        free(reg->words.heap);
        free(reg);
    }
    return rc;
}

/* ---- Communicators: only the depth flag ----------------------------------- */

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclCommInitRank, (comm, nranks, commId, rank));
    return rc;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclCommInitRankConfig, (comm, nranks, commId, rank, config));
    return rc;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclCommInitAll, (comm, ndev, devlist));
    return rc;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclCommSplit, (comm, color, key, newcomm, config));
    return rc;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclCommFinalize, (comm));
    return rc;
}

/* Lets go of what `comm` still holds: the calls in progress (NCCL has
 * stopped them) and its registrations. */
static void vs_nccl_comm_gone(ncclComm_t comm)
{
    vs_nccl_finish_list(vs_nccl_pending_take(comm));
    pthread_mutex_lock(&vs_nccl_regs_lock);
    for (vs_nccl_reg_t **at = &vs_nccl_regs; *at != NULL;) {
        vs_nccl_reg_t *reg = *at;
        if (reg->comm == comm) {
            *at = reg->next;
            vs_offload_hold(reg->words.words, reg->words.count, -1);
            free(reg->words.heap);
            free(reg);
        } else {
            at = &reg->next;
        }
    }
    pthread_mutex_unlock(&vs_nccl_regs_lock);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclCommDestroy, (comm));
    if (rc == ncclSuccess)
        vs_nccl_comm_gone(comm);
    return rc;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclCommAbort, (comm));
    if (rc == ncclSuccess)
        vs_nccl_comm_gone(comm);
    return rc;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclCommGetAsyncError, (comm, asyncError));
    /* Done with what was in progress (or failed): it is submitted. */
    if (rc == ncclSuccess && asyncError != NULL && *asyncError != ncclInProgress)
        vs_nccl_finish_list(vs_nccl_pending_take(comm));
    return rc;
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    ncclResult_t rc;
    VS_NCCL_REAL(rc, ncclMemAlloc, (ptr, size));
    return rc;
}

/* sim_memop.c: stream memory operations (`cuStreamWriteValue32_v2`/
 * `64_v2`, `cuStreamWaitValue32_v2`/`64_v2`, `cuStreamBatchMemOp_v2`, each
 * with `_ptsz`).
 *
 * A call is validated whole at submission, as the real driver does (the
 * address must be device memory or pinned host memory, aligned to the
 * operand's size, never managed memory; flags must be known), then becomes
 * one `SIM_CMD_MEMOP` command: on a stream's worker, a write is an atomic
 * store after a full fence, a wait polls the memory until its condition
 * holds (so work queued behind it waits, and other streams run on), and a
 * barrier is a fence. Captured, it is one `CU_GRAPH_NODE_TYPE_BATCH_MEM_OP`
 * node. The simulated devices report `CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES`
 * 0, so `CU_STREAM_WAIT_VALUE_FLUSH` and `CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES`
 * are `CUDA_ERROR_NOT_SUPPORTED`, as on an H100 in an x86 host.
 *
 * Entry points: the five exported functions and `sim_memop_execute`.
 */
#include "sim_exec.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* cuda.h: "Must be less than 256." */
#define SIM_MEMOP_MAX 256u

/* The operand of an operation on `address` of `size` bytes. */
static CUresult check_address(CUdeviceptr address, unsigned size)
{
    if (address == 0 || (address & (size - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    switch (sim_mem_classify((uintptr_t)address, NULL)) {
    case SIM_MEM_DEVICE: {
        uintptr_t base;
        size_t bytes;
        if (sim_mem_range((uintptr_t)address, &base, &bytes) != 0 || address + size > base + bytes)
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    case SIM_MEM_PINNED:
        return CUDA_SUCCESS;
    default: /* pageable host memory, managed memory (cuda.h: never accepted) */
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult check_op(const CUstreamBatchMemOpParams *op)
{
    switch (op->operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
        unsigned flags = op->waitValue.flags;
        if ((flags & ~(0x3u | CU_STREAM_WAIT_VALUE_FLUSH)) != 0)
            return CUDA_ERROR_INVALID_VALUE;
        CUresult result = check_address(op->waitValue.address, op->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 ? 4 : 8);
        if (result != CUDA_SUCCESS)
            return result;
        return (flags & CU_STREAM_WAIT_VALUE_FLUSH) != 0 ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
    }
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        /* CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER "is not supported in the
         * v2 API". */
        if (op->writeValue.flags != CU_STREAM_WRITE_VALUE_DEFAULT)
            return CUDA_ERROR_INVALID_VALUE;
        return check_address(op->writeValue.address, op->operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 ? 4 : 8);
    case CU_STREAM_MEM_OP_BARRIER:
        if (op->memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_SYS &&
            op->memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_GPU)
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        if (op->flushRemoteWrites.flags != 0)
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult submit_ops(CUstream handle, bool per_thread, const CUstreamBatchMemOpParams *ops, unsigned count)
{
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(handle, per_thread, &result);
    if (s == NULL)
        return result;
    for (unsigned i = 0; i < count; i++)
        if ((result = check_op(&ops[i])) != CUDA_SUCCESS)
            return result;
    sim_cmd_t cmd = {.kind = SIM_CMD_MEMOP};
    cmd.u.memop.ops = malloc(count * sizeof(*ops));
    if (cmd.u.memop.ops == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(cmd.u.memop.ops, ops, count * sizeof(*ops));
    cmd.u.memop.count = count;
    return sim_submit(s, &cmd);
}

/* ------------------------------------------------------------------------
 * Execution (stream worker)
 * ------------------------------------------------------------------------ */

/* The word a wait polls is device memory that other streams' work writes
 * with no ordering to this stream, as on a GPU: ThreadSanitizer is told not
 * to count these reads (the writers are copies and kernels, not atomics). */
__attribute__((no_sanitize("thread"))) static bool wait_satisfied(const CUstreamBatchMemOpParams *op)
{
    unsigned type = op->waitValue.flags & 0x3u;
    if (op->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32) {
        uint32_t now = __atomic_load_n((const uint32_t *)(uintptr_t)op->waitValue.address, __ATOMIC_ACQUIRE);
        uint32_t value = op->waitValue.value;
        switch (type) {
        case CU_STREAM_WAIT_VALUE_GEQ:
            return (int32_t)(now - value) >= 0;
        case CU_STREAM_WAIT_VALUE_EQ:
            return now == value;
        case CU_STREAM_WAIT_VALUE_AND:
            return (now & value) != 0;
        default:
            return ~(now | value) != 0;
        }
    }
    uint64_t now = __atomic_load_n((const uint64_t *)(uintptr_t)op->waitValue.address, __ATOMIC_ACQUIRE);
    uint64_t value = op->waitValue.value64;
    switch (type) {
    case CU_STREAM_WAIT_VALUE_GEQ:
        return (int64_t)(now - value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
        return now == value;
    case CU_STREAM_WAIT_VALUE_AND:
        return (now & value) != 0;
    default:
        return ~(now | value) != 0;
    }
}

/* Polls: a few yields, then sleeps growing to 1 ms, so that a long wait
 * costs no CPU the other streams' workers need. */
static void wait_until(const CUstreamBatchMemOpParams *op)
{
    long sleep_ns = 1000;
    for (unsigned spins = 0; !wait_satisfied(op); spins++) {
        if (spins < 64) {
            sched_yield();
            continue;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000)
            sleep_ns *= 2;
    }
}

/* The default write is ordered after the stream's earlier work (which ran
 * on this thread): a sequentially consistent store (not a fence, which
 * ThreadSanitizer cannot follow). Other streams' copies and kernels read
 * and write the same device memory with no ordering to it, as on a GPU, so
 * ThreadSanitizer is told not to count it, like the reads of a wait. */
__attribute__((no_sanitize("thread"))) static void write_value(const CUstreamBatchMemOpParams *op)
{
    if (op->operation == CU_STREAM_MEM_OP_WRITE_VALUE_32)
        __atomic_store_n((uint32_t *)(uintptr_t)op->writeValue.address, op->writeValue.value, __ATOMIC_SEQ_CST);
    else
        __atomic_store_n((uint64_t *)(uintptr_t)op->writeValue.address, op->writeValue.value64, __ATOMIC_SEQ_CST);
}

/* What a barrier operation's read-modify-write touches. */
static unsigned long memop_barrier_word;

void sim_memop_execute(const sim_memop_desc_t *memop)
{
    for (unsigned i = 0; i < memop->count; i++) {
        const CUstreamBatchMemOpParams *op = &memop->ops[i];
        switch (op->operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        case CU_STREAM_MEM_OP_WAIT_VALUE_64:
            wait_until(op);
            break;
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        case CU_STREAM_MEM_OP_WRITE_VALUE_64:
            write_value(op);
            break;
        default: /* a barrier: a full one, as a read-modify-write */
            (void)__atomic_fetch_add(&memop_barrier_word, 1, __ATOMIC_SEQ_CST);
            break;
        }
    }
}

/* ------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------ */

static CUresult one_op(CUstream stream, bool per_thread, CUstreamBatchMemOpType type, CUdeviceptr addr,
                       uint64_t value, unsigned flags)
{
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof(op));
    op.operation = type;
    if (type == CU_STREAM_MEM_OP_WAIT_VALUE_32 || type == CU_STREAM_MEM_OP_WAIT_VALUE_64) {
        op.waitValue.address = addr;
        op.waitValue.flags = flags;
        if (type == CU_STREAM_MEM_OP_WAIT_VALUE_32)
            op.waitValue.value = (cuuint32_t)value;
        else
            op.waitValue.value64 = value;
    } else {
        op.writeValue.address = addr;
        op.writeValue.flags = flags;
        if (type == CU_STREAM_MEM_OP_WRITE_VALUE_32)
            op.writeValue.value = (cuuint32_t)value;
        else
            op.writeValue.value64 = value;
    }
    return submit_ops(stream, per_thread, &op, 1);
}

#define SIM_MEMOP_ENTRY(symbol, value_type, type, per_thread)                                      \
    SIM_EXPORT CUresult symbol(CUstream stream, CUdeviceptr addr, value_type value, unsigned int flags) \
    {                                                                                              \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                                      \
        if (entry != CUDA_SUCCESS)                                                                 \
            return entry;                                                                          \
        return one_op(stream, per_thread, type, addr, value, flags);                               \
    }

SIM_MEMOP_ENTRY(cuStreamWriteValue32_v2, cuuint32_t, CU_STREAM_MEM_OP_WRITE_VALUE_32, false)
SIM_MEMOP_ENTRY(cuStreamWriteValue32_v2_ptsz, cuuint32_t, CU_STREAM_MEM_OP_WRITE_VALUE_32, true)
SIM_MEMOP_ENTRY(cuStreamWriteValue64_v2, cuuint64_t, CU_STREAM_MEM_OP_WRITE_VALUE_64, false)
SIM_MEMOP_ENTRY(cuStreamWriteValue64_v2_ptsz, cuuint64_t, CU_STREAM_MEM_OP_WRITE_VALUE_64, true)
SIM_MEMOP_ENTRY(cuStreamWaitValue32_v2, cuuint32_t, CU_STREAM_MEM_OP_WAIT_VALUE_32, false)
SIM_MEMOP_ENTRY(cuStreamWaitValue32_v2_ptsz, cuuint32_t, CU_STREAM_MEM_OP_WAIT_VALUE_32, true)
SIM_MEMOP_ENTRY(cuStreamWaitValue64_v2, cuuint64_t, CU_STREAM_MEM_OP_WAIT_VALUE_64, false)
SIM_MEMOP_ENTRY(cuStreamWaitValue64_v2_ptsz, cuuint64_t, CU_STREAM_MEM_OP_WAIT_VALUE_64, true)

static CUresult batch(CUstream stream, bool per_thread, unsigned count, CUstreamBatchMemOpParams *ops, unsigned flags)
{
    if (flags != 0 || count == 0 || count >= SIM_MEMOP_MAX || ops == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return submit_ops(stream, per_thread, ops, count);
}

SIM_EXPORT CUresult cuStreamBatchMemOp_v2(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
                                          unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuStreamBatchMemOp_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return batch(stream, false, count, paramArray, flags);
}

SIM_EXPORT CUresult cuStreamBatchMemOp_v2_ptsz(CUstream stream, unsigned int count,
                                               CUstreamBatchMemOpParams *paramArray, unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuStreamBatchMemOp_v2_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return batch(stream, true, count, paramArray, flags);
}

/* The CUDA 8/9 forms. An H100 reports
 * CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 = 0 (tests/gpu/
 * device_attributes.h100.txt), and its driver answers these with
 * CUDA_ERROR_NOT_SUPPORTED; libraries still look them up by name. */
#define SIM_MEMOP_V1_ENTRY(symbol, value_type)                                                     \
    SIM_EXPORT CUresult symbol(CUstream stream, CUdeviceptr addr, value_type value, unsigned int flags) \
    {                                                                                              \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                                      \
        if (entry != CUDA_SUCCESS)                                                                 \
            return entry;                                                                          \
        (void)stream;                                                                              \
        (void)addr;                                                                                \
        (void)value;                                                                               \
        (void)flags;                                                                               \
        return CUDA_ERROR_NOT_SUPPORTED;                                                           \
    }

SIM_MEMOP_V1_ENTRY(cuStreamWriteValue32, cuuint32_t)
SIM_MEMOP_V1_ENTRY(cuStreamWriteValue64, cuuint64_t)
SIM_MEMOP_V1_ENTRY(cuStreamWaitValue32, cuuint32_t)
SIM_MEMOP_V1_ENTRY(cuStreamWaitValue64, cuuint64_t)

SIM_EXPORT CUresult cuStreamBatchMemOp(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
                                       unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuStreamBatchMemOp, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    (void)stream;
    (void)count;
    (void)paramArray;
    (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED;
}

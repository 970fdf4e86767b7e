/* hooks_memop.c: stream memory operations (`cuStreamWriteValue32_v2`,
 * `...64_v2`, `cuStreamWaitValue32_v2`, `...64_v2`, `cuStreamBatchMemOp_v2`,
 * each with `_ptsz`).
 *
 * The GPU reads or writes the operand's address when the operation runs,
 * so each goes through `VS_OPERATE` with the bytes it touches, like a
 * copy: restored first, and stamped as used by its stream, so an eviction
 * waits for it. A wait may hold its stream back until a later operation of
 * the program writes the value: it is bracketed by
 * `vs_offload_stream_wait_begin`/`_end`, so that no eviction ever waits on
 * the host for work queued behind it (offload.h).
 */
#include <stdlib.h>
#include <string.h>

#include "offload.h"
#include "hooks.h"
#include "launch.h"

/* The bytes operation `op` touches, and whether it waits. */
static void vs_memop_words(const CUstreamBatchMemOpParams *op, vs_words_t *w, bool *waits)
{
    switch (op->operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        *waits = true;
        vs_words_add(w, (uintptr_t)op->waitValue.address);
        break;
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        vs_words_add(w, (uintptr_t)op->writeValue.address);
        break;
    default: /* barriers and flushes name no memory */
        break;
    }
}

/* Forwards `call` once the operands of `ops[0..count)` are resident. */
#define VS_MEMOP(symbol, stream, ops, op_count, call)                                                 \
    do {                                                                                           \
        uintptr_t vs_buffer_[16];                                                                  \
        vs_words_t vs_w_ = VS_WORDS_INIT(vs_buffer_);                                              \
        bool vs_waits_ = false;                                                                    \
        CUresult vs_rc_;                                                                           \
        vs_driver_ready();                                                                         \
        VS_COUNT(memops);                                                                          \
        for (size_t vs_i_ = 0; (ops) != NULL && vs_i_ < (size_t)(op_count); vs_i_++)                  \
            vs_memop_words(&(ops)[vs_i_], &vs_w_, &vs_waits_);                                     \
        bool vs_per_thread_ = VS_PER_THREAD_SYMBOL(symbol);                                        \
        uint64_t vs_epoch_ = vs_waits_ ? vs_offload_stream_wait_begin((stream), vs_per_thread_) : 0; \
        VS_OPERATE(vs_rc_, "memop", (stream), vs_per_thread_, vs_w_.words, vs_w_.count, (call));   \
        if (vs_rc_ == CUDA_SUCCESS && vs_waits_)                                                   \
            vs_offload_stream_wait_end((stream), vs_per_thread_, vs_epoch_);                       \
        free(vs_w_.heap);                                                                          \
        return vs_rc_;                                                                             \
    } while (0)

#define VS_MEMOP_ONE(symbol, value_type, type, field, value_field)                                 \
    CUresult CUDAAPI symbol(CUstream stream, CUdeviceptr addr, value_type value, unsigned int flags) \
    {                                                                                              \
        CUstreamBatchMemOpParams vs_one_;                                                           \
        memset(&vs_one_, 0, sizeof vs_one_);                                                         \
        vs_one_.operation = (type);                                                                 \
        vs_one_.field.address = addr;                                                               \
        vs_one_.field.value_field = value;                                                          \
        VS_MEMOP(symbol, stream, &vs_one_, 1, VS_CALL(symbol, (stream, addr, value, flags)));       \
    }

VS_MEMOP_ONE(cuStreamWriteValue32_v2, cuuint32_t, CU_STREAM_MEM_OP_WRITE_VALUE_32, writeValue, value)
VS_MEMOP_ONE(cuStreamWriteValue32_v2_ptsz, cuuint32_t, CU_STREAM_MEM_OP_WRITE_VALUE_32, writeValue, value)
VS_MEMOP_ONE(cuStreamWriteValue64_v2, cuuint64_t, CU_STREAM_MEM_OP_WRITE_VALUE_64, writeValue, value64)
VS_MEMOP_ONE(cuStreamWriteValue64_v2_ptsz, cuuint64_t, CU_STREAM_MEM_OP_WRITE_VALUE_64, writeValue, value64)
VS_MEMOP_ONE(cuStreamWaitValue32_v2, cuuint32_t, CU_STREAM_MEM_OP_WAIT_VALUE_32, waitValue, value)
VS_MEMOP_ONE(cuStreamWaitValue32_v2_ptsz, cuuint32_t, CU_STREAM_MEM_OP_WAIT_VALUE_32, waitValue, value)
VS_MEMOP_ONE(cuStreamWaitValue64_v2, cuuint64_t, CU_STREAM_MEM_OP_WAIT_VALUE_64, waitValue, value64)
VS_MEMOP_ONE(cuStreamWaitValue64_v2_ptsz, cuuint64_t, CU_STREAM_MEM_OP_WAIT_VALUE_64, waitValue, value64)

CUresult CUDAAPI cuStreamBatchMemOp_v2(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
                                       unsigned int flags)
{
    VS_MEMOP(cuStreamBatchMemOp_v2, stream, paramArray, count,
             VS_CALL(cuStreamBatchMemOp_v2, (stream, count, paramArray, flags)));
}

CUresult CUDAAPI cuStreamBatchMemOp_v2_ptsz(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
                                            unsigned int flags)
{
    VS_MEMOP(cuStreamBatchMemOp_v2_ptsz, stream, paramArray, count,
             VS_CALL(cuStreamBatchMemOp_v2_ptsz, (stream, count, paramArray, flags)));
}

/* hooks_copy.c: copies and memsets of every family and variant
 * (`VS_COPY_HOOK`).
 *
 * Each goes through `VS_OPERATE` with its device operands, like a launch:
 * they are marked as used and restored first when evicted. An operand
 * given as a host pointer, an array or a pointer outside every registered
 * allocation is simply not found in the registry. Arrays are not tracked.
 */
#include <stddef.h>
#include <stdlib.h>

#include "offload.h"
#include "registry.h"
#include "hooks.h"
#include "launch.h"

/* The device-side address of a 2-D/3-D operand: device and unified
 * operands carry it in the `*Device` field. */
#define VS_OPERAND(p, side)                                                                        \
    ((p) != NULL && ((p)->side##MemoryType == CU_MEMORYTYPE_DEVICE || (p)->side##MemoryType == CU_MEMORYTYPE_UNIFIED) \
         ? (uintptr_t)(p)->side##Device                                                            \
         : (uintptr_t)0)

/* What VRAMSHIM_TRACE records a wrapper counted under `stat` as. */
#define VS_OP_NAME_copies "copy"
#define VS_OP_NAME_memsets "memset"

/* Defines one wrapper: count it under `stat`, then forward once the
 * allocations holding `first` and `second` (expressions over the
 * parameters; 0 for none) are resident. `stream` is the stream it runs on
 * (NULL for the synchronous forms). */
#define VS_COPY_HOOK(stat, symbol, params, args, first, second, stream)                            \
    CUresult CUDAAPI symbol params                                                                 \
    {                                                                                              \
        uintptr_t vs_words_[2] = {(uintptr_t)(first), (uintptr_t)(second)};                       \
        CUresult vs_rc_;                                                                           \
        vs_driver_ready();                                                                           \
        VS_COUNT(stat);                                                                            \
        VS_OPERATE(vs_rc_, VS_OP_NAME_##stat, (stream), VS_PER_THREAD_SYMBOL(symbol), vs_words_, 2, VS_CALL(symbol, args)); \
        return vs_rc_;                                                                             \
    }

/* Synchronous copies between the host and an allocation that is on the
 * host side are done on its host copy (`vs_offload_copy_host`): loading
 * weights into memory the limit has no room for moves each byte once. */
#define VS_HOST_COPY_HOOK(symbol, params, args, device, host, to_device)                           \
    CUresult CUDAAPI symbol params                                                                 \
    {                                                                                              \
        uintptr_t vs_words_[2] = {(uintptr_t)(device), 0};                                         \
        CUresult vs_rc_;                                                                           \
        vs_driver_ready();                                                                           \
        VS_COUNT(copies);                                                                          \
        if (vs_offload_copy_host((device), (void *)(uintptr_t)(host), ByteCount, (to_device),      \
                                 VS_PER_THREAD_SYMBOL(symbol), &vs_rc_))                           \
            return vs_rc_;                                                                         \
        VS_OPERATE(vs_rc_, "copy", NULL, VS_PER_THREAD_SYMBOL(symbol), vs_words_, 2, VS_CALL(symbol, args)); \
        return vs_rc_;                                                                             \
    }

/* Unified-addressing copies: either side may be device memory. */
VS_COPY_HOOK(copies, cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount), (dst, src, ByteCount), dst, src, NULL)
VS_COPY_HOOK(copies, cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount), (dst, src, ByteCount), dst,
             src, NULL)
VS_COPY_HOOK(copies, cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream),
             (dst, src, ByteCount, hStream), dst, src, hStream)
VS_COPY_HOOK(copies, cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream),
             (dst, src, ByteCount, hStream), dst, src, hStream)

#define VS_PEER_PARAMS                                                                             \
    (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount)
#define VS_PEER_ASYNC_PARAMS                                                                       \
    (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, \
     CUstream hStream)
VS_COPY_HOOK(copies, cuMemcpyPeer, VS_PEER_PARAMS, (dstDevice, dstContext, srcDevice, srcContext, ByteCount),
             dstDevice, srcDevice, NULL)
VS_COPY_HOOK(copies, cuMemcpyPeer_ptds, VS_PEER_PARAMS, (dstDevice, dstContext, srcDevice, srcContext, ByteCount),
             dstDevice, srcDevice, NULL)
VS_COPY_HOOK(copies, cuMemcpyPeerAsync, VS_PEER_ASYNC_PARAMS,
             (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream), dstDevice, srcDevice, hStream)
VS_COPY_HOOK(copies, cuMemcpyPeerAsync_ptsz, VS_PEER_ASYNC_PARAMS,
             (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream), dstDevice, srcDevice, hStream)

/* Typed 1-D copies. */
VS_HOST_COPY_HOOK(cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), (dstDevice, srcHost, ByteCount), dstDevice, srcHost, true)
VS_HOST_COPY_HOOK(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), (dstDevice, srcHost, ByteCount), dstDevice, srcHost, true)
VS_HOST_COPY_HOOK(cuMemcpyDtoH_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), (dstHost, srcDevice, ByteCount), srcDevice, dstHost, false)
VS_HOST_COPY_HOOK(cuMemcpyDtoH_v2_ptds, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), (dstHost, srcDevice, ByteCount), srcDevice, dstHost, false)
VS_COPY_HOOK(copies, cuMemcpyDtoD_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
             (dstDevice, srcDevice, ByteCount), dstDevice, srcDevice, NULL)
VS_COPY_HOOK(copies, cuMemcpyDtoD_v2_ptds, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
             (dstDevice, srcDevice, ByteCount), dstDevice, srcDevice, NULL)
VS_COPY_HOOK(copies, cuMemcpyDtoA_v2, (CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount),
             (dstArray, dstOffset, srcDevice, ByteCount), srcDevice, 0, NULL)
VS_COPY_HOOK(copies, cuMemcpyDtoA_v2_ptds,
             (CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount),
             (dstArray, dstOffset, srcDevice, ByteCount), srcDevice, 0, NULL)
VS_COPY_HOOK(copies, cuMemcpyAtoD_v2, (CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount),
             (dstDevice, srcArray, srcOffset, ByteCount), dstDevice, 0, NULL)
VS_COPY_HOOK(copies, cuMemcpyAtoD_v2_ptds,
             (CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount),
             (dstDevice, srcArray, srcOffset, ByteCount), dstDevice, 0, NULL)
VS_COPY_HOOK(copies, cuMemcpyHtoDAsync_v2,
             (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),
             (dstDevice, srcHost, ByteCount, hStream), dstDevice, 0, hStream)
VS_COPY_HOOK(copies, cuMemcpyHtoDAsync_v2_ptsz,
             (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),
             (dstDevice, srcHost, ByteCount, hStream), dstDevice, 0, hStream)
VS_COPY_HOOK(copies, cuMemcpyDtoHAsync_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
             (dstHost, srcDevice, ByteCount, hStream), srcDevice, 0, hStream)
VS_COPY_HOOK(copies, cuMemcpyDtoHAsync_v2_ptsz,
             (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
             (dstHost, srcDevice, ByteCount, hStream), srcDevice, 0, hStream)
VS_COPY_HOOK(copies, cuMemcpyDtoDAsync_v2,
             (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
             (dstDevice, srcDevice, ByteCount, hStream), dstDevice, srcDevice, hStream)
VS_COPY_HOOK(copies, cuMemcpyDtoDAsync_v2_ptsz,
             (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
             (dstDevice, srcDevice, ByteCount, hStream), dstDevice, srcDevice, hStream)

/* 2-D and 3-D copies described by a struct. */
VS_COPY_HOOK(copies, cuMemcpy2D_v2, (const CUDA_MEMCPY2D *pCopy), (pCopy), VS_OPERAND(pCopy, dst),
             VS_OPERAND(pCopy, src), NULL)
VS_COPY_HOOK(copies, cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *pCopy), (pCopy), VS_OPERAND(pCopy, dst),
             VS_OPERAND(pCopy, src), NULL)
VS_COPY_HOOK(copies, cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *pCopy), (pCopy), VS_OPERAND(pCopy, dst),
             VS_OPERAND(pCopy, src), NULL)
VS_COPY_HOOK(copies, cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D *pCopy), (pCopy), VS_OPERAND(pCopy, dst),
             VS_OPERAND(pCopy, src), NULL)
VS_COPY_HOOK(copies, cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *pCopy, CUstream hStream), (pCopy, hStream),
             VS_OPERAND(pCopy, dst), VS_OPERAND(pCopy, src), hStream)
VS_COPY_HOOK(copies, cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *pCopy, CUstream hStream), (pCopy, hStream),
             VS_OPERAND(pCopy, dst), VS_OPERAND(pCopy, src), hStream)
VS_COPY_HOOK(copies, cuMemcpy3D_v2, (const CUDA_MEMCPY3D *pCopy), (pCopy), VS_OPERAND(pCopy, dst),
             VS_OPERAND(pCopy, src), NULL)
VS_COPY_HOOK(copies, cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D *pCopy), (pCopy), VS_OPERAND(pCopy, dst),
             VS_OPERAND(pCopy, src), NULL)
VS_COPY_HOOK(copies, cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *pCopy, CUstream hStream), (pCopy, hStream),
             VS_OPERAND(pCopy, dst), VS_OPERAND(pCopy, src), hStream)
VS_COPY_HOOK(copies, cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *pCopy, CUstream hStream), (pCopy, hStream),
             VS_OPERAND(pCopy, dst), VS_OPERAND(pCopy, src), hStream)
VS_COPY_HOOK(copies, cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy), VS_OPERAND(pCopy, dst),
             VS_OPERAND(pCopy, src), NULL)
VS_COPY_HOOK(copies, cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy), VS_OPERAND(pCopy, dst),
             VS_OPERAND(pCopy, src), NULL)
VS_COPY_HOOK(copies, cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), (pCopy, hStream),
             VS_OPERAND(pCopy, dst), VS_OPERAND(pCopy, src), hStream)
VS_COPY_HOOK(copies, cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream),
             (pCopy, hStream), VS_OPERAND(pCopy, dst), VS_OPERAND(pCopy, src), hStream)

/* Batches: every pair of every operation. */
static void vs_copy_batch_words(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t count, vs_words_t *w)
{
    VS_COUNT(copies);
    for (size_t i = 0; i < count; i++) {
        if (dsts != NULL)
            vs_words_add(w, (uintptr_t)dsts[i]);
        if (srcs != NULL)
            vs_words_add(w, (uintptr_t)srcs[i]);
    }
}

static void vs_copy_batch3d_words(size_t count, const CUDA_MEMCPY3D_BATCH_OP *ops, vs_words_t *w)
{
    VS_COUNT(copies);
    if (ops == NULL)
        return;
    for (size_t i = 0; i < count; i++) {
        if (ops[i].src.type == CU_MEMCPY_OPERAND_TYPE_POINTER)
            vs_words_add(w, (uintptr_t)ops[i].src.op.ptr.ptr);
        if (ops[i].dst.type == CU_MEMCPY_OPERAND_TYPE_POINTER)
            vs_words_add(w, (uintptr_t)ops[i].dst.op.ptr.ptr);
    }
}

/* Gathers a batch's operands with `gather`, then forwards `call`. */
#define VS_BATCH(symbol, gather, call)                                                             \
    do {                                                                                           \
        uintptr_t vs_buffer_[64];                                                                  \
        vs_words_t vs_words_ = VS_WORDS_INIT(vs_buffer_);                                          \
        CUresult vs_rc_;                                                                           \
        vs_driver_ready();                                                                           \
        gather;                                                                                    \
        VS_OPERATE(vs_rc_, "copy", hStream, VS_PER_THREAD_SYMBOL(symbol), vs_words_.words, vs_words_.count, (call)); \
        free(vs_words_.heap);                                                                      \
        return vs_rc_;                                                                             \
    } while (0)

CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                    CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                    CUstream hStream)
{
    VS_BATCH(cuMemcpyBatchAsync, vs_copy_batch_words(dsts, srcs, count, &vs_words_),
             VS_CALL(cuMemcpyBatchAsync, (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream)));
}

CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                         CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                         size_t *failIdx, CUstream hStream)
{
    VS_BATCH(cuMemcpyBatchAsync_ptsz, vs_copy_batch_words(dsts, srcs, count, &vs_words_),
             VS_CALL(cuMemcpyBatchAsync_ptsz,
                   (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream)));
}

CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                       CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                       CUstream hStream)
{
    VS_BATCH(cuMemcpyBatchAsync_v2, vs_copy_batch_words(dsts, srcs, count, &vs_words_),
             VS_CALL(cuMemcpyBatchAsync_v2, (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream)));
}

CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                            CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                            CUstream hStream)
{
    VS_BATCH(cuMemcpyBatchAsync_v2_ptsz, vs_copy_batch_words(dsts, srcs, count, &vs_words_),
             VS_CALL(cuMemcpyBatchAsync_v2_ptsz, (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream)));
}

CUresult CUDAAPI cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,
                                      unsigned long long flags, CUstream hStream)
{
    VS_BATCH(cuMemcpy3DBatchAsync, vs_copy_batch3d_words(numOps, opList, &vs_words_),
             VS_CALL(cuMemcpy3DBatchAsync, (numOps, opList, failIdx, flags, hStream)));
}

CUresult CUDAAPI cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,
                                           unsigned long long flags, CUstream hStream)
{
    VS_BATCH(cuMemcpy3DBatchAsync_ptsz, vs_copy_batch3d_words(numOps, opList, &vs_words_),
             VS_CALL(cuMemcpy3DBatchAsync_ptsz, (numOps, opList, failIdx, flags, hStream)));
}

CUresult CUDAAPI cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags,
                                         CUstream hStream)
{
    VS_BATCH(cuMemcpy3DBatchAsync_v2, vs_copy_batch3d_words(numOps, opList, &vs_words_),
             VS_CALL(cuMemcpy3DBatchAsync_v2, (numOps, opList, flags, hStream)));
}

CUresult CUDAAPI cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                              unsigned long long flags, CUstream hStream)
{
    VS_BATCH(cuMemcpy3DBatchAsync_v2_ptsz, vs_copy_batch3d_words(numOps, opList, &vs_words_),
             VS_CALL(cuMemcpy3DBatchAsync_v2_ptsz, (numOps, opList, flags, hStream)));
}

/* Memsets: one device operand. */
#define VS_MEMSET_HOOK(symbol, value_type)                                                         \
    VS_COPY_HOOK(memsets, symbol, (CUdeviceptr dstDevice, value_type value, size_t N), (dstDevice, value, N), \
                 dstDevice, 0, NULL)
#define VS_MEMSET_ASYNC_HOOK(symbol, value_type)                                                   \
    VS_COPY_HOOK(memsets, symbol, (CUdeviceptr dstDevice, value_type value, size_t N, CUstream hStream), \
                 (dstDevice, value, N, hStream), dstDevice, 0, hStream)
#define VS_MEMSET2D_HOOK(symbol, value_type)                                                       \
    VS_COPY_HOOK(memsets, symbol,                                                                  \
                 (CUdeviceptr dstDevice, size_t dstPitch, value_type value, size_t Width, size_t Height), \
                 (dstDevice, dstPitch, value, Width, Height), dstDevice, 0, NULL)
#define VS_MEMSET2D_ASYNC_HOOK(symbol, value_type)                                                 \
    VS_COPY_HOOK(memsets, symbol,                                                                  \
                 (CUdeviceptr dstDevice, size_t dstPitch, value_type value, size_t Width, size_t Height, \
                  CUstream hStream),                                                               \
                 (dstDevice, dstPitch, value, Width, Height, hStream), dstDevice, 0, hStream)

VS_MEMSET_HOOK(cuMemsetD8_v2, unsigned char)
VS_MEMSET_HOOK(cuMemsetD8_v2_ptds, unsigned char)
VS_MEMSET_HOOK(cuMemsetD16_v2, unsigned short)
VS_MEMSET_HOOK(cuMemsetD16_v2_ptds, unsigned short)
VS_MEMSET_HOOK(cuMemsetD32_v2, unsigned int)
VS_MEMSET_HOOK(cuMemsetD32_v2_ptds, unsigned int)
VS_MEMSET2D_HOOK(cuMemsetD2D8_v2, unsigned char)
VS_MEMSET2D_HOOK(cuMemsetD2D8_v2_ptds, unsigned char)
VS_MEMSET2D_HOOK(cuMemsetD2D16_v2, unsigned short)
VS_MEMSET2D_HOOK(cuMemsetD2D16_v2_ptds, unsigned short)
VS_MEMSET2D_HOOK(cuMemsetD2D32_v2, unsigned int)
VS_MEMSET2D_HOOK(cuMemsetD2D32_v2_ptds, unsigned int)
VS_MEMSET_ASYNC_HOOK(cuMemsetD8Async, unsigned char)
VS_MEMSET_ASYNC_HOOK(cuMemsetD8Async_ptsz, unsigned char)
VS_MEMSET_ASYNC_HOOK(cuMemsetD16Async, unsigned short)
VS_MEMSET_ASYNC_HOOK(cuMemsetD16Async_ptsz, unsigned short)
VS_MEMSET_ASYNC_HOOK(cuMemsetD32Async, unsigned int)
VS_MEMSET_ASYNC_HOOK(cuMemsetD32Async_ptsz, unsigned int)
VS_MEMSET2D_ASYNC_HOOK(cuMemsetD2D8Async, unsigned char)
VS_MEMSET2D_ASYNC_HOOK(cuMemsetD2D8Async_ptsz, unsigned char)
VS_MEMSET2D_ASYNC_HOOK(cuMemsetD2D16Async, unsigned short)
VS_MEMSET2D_ASYNC_HOOK(cuMemsetD2D16Async_ptsz, unsigned short)
VS_MEMSET2D_ASYNC_HOOK(cuMemsetD2D32Async, unsigned int)
VS_MEMSET2D_ASYNC_HOOK(cuMemsetD2D32Async_ptsz, unsigned int)

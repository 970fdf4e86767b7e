/* hooks_copy.c: copies and memsets of every family and variant
 * (`VS_COPY_HOOK`).
 *
 * Each goes through `VS_OPERATE` with the whole byte range of each device
 * operand, like a launch: every allocation the range touches is marked as
 * used and restored first when evicted (a copy may span two allocations; a
 * 2-D copy touches base .. base + pitch * (height - 1) + width). A range is
 * given to the registry as the words `vs_words_add_range` (launch.c) picks. An operand given as a
 * host pointer, an array or a pointer outside every registered allocation
 * is simply not found in the registry. Arrays are not tracked.
 */
#include <stddef.h>
#include <stdlib.h>

#include "offload.h"
#include "registry.h"
#include "hooks.h"
#include "launch.h"

/* One side of a 2-D/3-D copy: device and unified operands carry their
 * address in the `*Device` field. */
#define VS_SIDE_3D(w, p, side, rows)                                                               \
    do {                                                                                           \
        if ((p)->side##MemoryType == CU_MEMORYTYPE_DEVICE || (p)->side##MemoryType == CU_MEMORYTYPE_UNIFIED) { \
            uint64_t vs_depth_ = (p)->Depth ? (p)->Depth : 1;                                      \
            uintptr_t vs_first_ = (uintptr_t)(p)->side##Device +                                   \
                                  ((p)->side##Z * (uint64_t)(rows) + (p)->side##Y) * (p)->side##Pitch + (p)->side##XInBytes; \
            vs_words_add_range((w), vs_first_,                                                          \
                          vs_strided_extent((p)->WidthInBytes, (p)->Height, vs_depth_, (p)->side##Pitch, (rows))); \
        }                                                                                          \
    } while (0)

static void vs_copy2d_words(vs_words_t *w, const CUDA_MEMCPY2D *p)
{
    if (p == NULL)
        return;
    if (p->dstMemoryType == CU_MEMORYTYPE_DEVICE || p->dstMemoryType == CU_MEMORYTYPE_UNIFIED)
        vs_words_add_range(w, (uintptr_t)p->dstDevice + p->dstY * p->dstPitch + p->dstXInBytes,
                      vs_strided_extent(p->WidthInBytes, p->Height, 1, p->dstPitch, p->Height));
    if (p->srcMemoryType == CU_MEMORYTYPE_DEVICE || p->srcMemoryType == CU_MEMORYTYPE_UNIFIED)
        vs_words_add_range(w, (uintptr_t)p->srcDevice + p->srcY * p->srcPitch + p->srcXInBytes,
                      vs_strided_extent(p->WidthInBytes, p->Height, 1, p->srcPitch, p->Height));
}

static void vs_copy3d_words(vs_words_t *w, const CUDA_MEMCPY3D *p)
{
    if (p == NULL)
        return;
    VS_SIDE_3D(w, p, dst, p->dstHeight);
    VS_SIDE_3D(w, p, src, p->srcHeight);
}

static void vs_copy3d_peer_words(vs_words_t *w, const CUDA_MEMCPY3D_PEER *p)
{
    if (p == NULL)
        return;
    VS_SIDE_3D(w, p, dst, p->dstHeight);
    VS_SIDE_3D(w, p, src, p->srcHeight);
}

/* What VRAMSHIM_TRACE records a wrapper counted under `stat` as. */
#define VS_OP_NAME_copies "copy"
#define VS_OP_NAME_memsets "memset"

/* Defines one wrapper: count it under `stat`, gather the words of its
 * device ranges with `gather` (statements over the parameters and `vs_w_`),
 * then forward once everything they touch is resident. `stream` is the
 * stream it runs on (NULL for the synchronous forms). */
#define VS_COPY_HOOK(stat, symbol, params, args, gather, stream)                                   \
    CUresult CUDAAPI symbol params                                                                 \
    {                                                                                              \
        uintptr_t vs_buffer_[32];                                                                  \
        vs_words_t vs_w_ = VS_WORDS_INIT(vs_buffer_);                                              \
        CUresult vs_rc_;                                                                           \
        vs_driver_ready();                                                                           \
        VS_COUNT(stat);                                                                            \
        gather;                                                                                    \
        VS_OPERATE(vs_rc_, VS_OP_NAME_##stat, (stream), VS_PER_THREAD_SYMBOL(symbol), vs_w_.words, vs_w_.count, \
                   VS_CALL(symbol, args));                                                         \
        free(vs_w_.heap);                                                                          \
        return vs_rc_;                                                                             \
    }

/* Two linear ranges of `ByteCount` bytes (0: none). */
#define VS_LINEAR(first, second)                                                                   \
    do {                                                                                           \
        vs_words_add_range(&vs_w_, (uintptr_t)(first), ByteCount);                                      \
        vs_words_add_range(&vs_w_, (uintptr_t)(second), ByteCount);                                     \
    } while (0)

static void vs_copy_found_word(uintptr_t word, void *arg)
{
    vs_words_add(arg, word);
}

/* VRAMSHIM_PIN_DEVICE_POINTERS: what a host-to-device copy names (offload.h);
 * the found words join the copy's, so it restores them before it runs. */
static size_t vs_copy_pin_scan(vs_words_t *w, CUdeviceptr dst, const void *host, uint64_t bytes)
{
    return vs_offload_pin_named((uintptr_t)dst, host, bytes, vs_copy_found_word, w);
}

/* The same for a unified-addressing copy: only when the source is host
 * memory (asked of the driver, only for copies small enough to scan). A
 * source the registry knows is device memory, whatever the driver says: an
 * evicted allocation's range is unmapped, and the driver knows nothing of
 * it (CUDA_ERROR_INVALID_VALUE, as for pageable memory), but reading it
 * from the host faults. */
static void vs_copy_pin_scan_unified(vs_words_t *w, CUdeviceptr dst, CUdeviceptr src, uint64_t bytes)
{
    if (bytes < 8 || bytes > (64u << 10) || !vs_offload_pin_scan_enabled())
        return;
    vs_alloc_info_t info;
    if (vs_registry_find((uintptr_t)src, &info) == 0 && vs_registry_kind_device_side(info.kind))
        return;
    unsigned int type = 0;
    CUresult rc = VS_CALL(cuPointerGetAttribute, (&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, src));
    /* Pageable memory is unknown to the driver (CUDA_ERROR_INVALID_VALUE). */
    if (rc == CUDA_ERROR_INVALID_VALUE || (rc == CUDA_SUCCESS && type == CU_MEMORYTYPE_HOST))
        (void)vs_copy_pin_scan(w, dst, (const void *)(uintptr_t)src, bytes);
}

/* Copies between the host and an allocation that is on the host side are
 * done on its host copy (`vs_offload_copy_host`; asynchronous ones when
 * their stream is idle or the host memory is pageable): loading weights
 * into memory the limit has no room for moves each byte once. */
#define VS_HOST_COPY_HOOK(symbol, params, args, device, host, to_device, stream, async)           \
    CUresult CUDAAPI symbol params                                                                 \
    {                                                                                              \
        uintptr_t vs_buffer_[32];                                                                  \
        vs_words_t vs_w_ = VS_WORDS_INIT(vs_buffer_);                                              \
        CUresult vs_rc_;                                                                           \
        vs_driver_ready();                                                                           \
        VS_COUNT(copies);                                                                          \
        size_t vs_named_ = (to_device) ? vs_copy_pin_scan(&vs_w_, (device), (const void *)(uintptr_t)(host), ByteCount) : 0; \
        /* A copy that names pinned allocations goes to the device: it restores them. */           \
        if (vs_named_ == 0 && vs_offload_copy_host((device), (void *)(uintptr_t)(host), ByteCount, (to_device), \
                                                   (stream), (async), VS_PER_THREAD_SYMBOL(symbol), &vs_rc_)) { \
            free(vs_w_.heap);                                                                      \
            return vs_rc_;                                                                         \
        }                                                                                          \
        vs_words_add_range(&vs_w_, (uintptr_t)(device), ByteCount);                                     \
        VS_OPERATE(vs_rc_, "copy", (stream), VS_PER_THREAD_SYMBOL(symbol), vs_w_.words, vs_w_.count, VS_CALL(symbol, args)); \
        free(vs_w_.heap);                                                                          \
        return vs_rc_;                                                                             \
    }

#define VS_HTOD_ASYNC(dst, src)                                                                    \
    do {                                                                                           \
        VS_LINEAR(dst, 0);                                                                         \
        (void)vs_copy_pin_scan(&vs_w_, (dst), (src), ByteCount);                                   \
    } while (0)
#define VS_UNIFIED(dst, src)                                                                       \
    do {                                                                                           \
        VS_LINEAR(dst, src);                                                                       \
        vs_copy_pin_scan_unified(&vs_w_, (dst), (src), ByteCount);                                 \
    } while (0)

/* Unified-addressing copies: either side may be device memory. */
VS_COPY_HOOK(copies, cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount),
             (dst, src, ByteCount), VS_UNIFIED(dst, src), NULL)
VS_COPY_HOOK(copies, cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount),
             (dst, src, ByteCount), VS_UNIFIED(dst, src), NULL)
VS_COPY_HOOK(copies, cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream),
             (dst, src, ByteCount, hStream), VS_UNIFIED(dst, src), hStream)
VS_COPY_HOOK(copies, cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream),
             (dst, src, ByteCount, hStream), VS_UNIFIED(dst, src), hStream)

#define VS_PEER_PARAMS                                                                             \
    (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount)
#define VS_PEER_ASYNC_PARAMS                                                                       \
    (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, \
     CUstream hStream)
VS_COPY_HOOK(copies, cuMemcpyPeer, VS_PEER_PARAMS,
             (dstDevice, dstContext, srcDevice, srcContext, ByteCount), VS_LINEAR(dstDevice, srcDevice), NULL)
VS_COPY_HOOK(copies, cuMemcpyPeer_ptds, VS_PEER_PARAMS,
             (dstDevice, dstContext, srcDevice, srcContext, ByteCount), VS_LINEAR(dstDevice, srcDevice), NULL)
VS_COPY_HOOK(copies, cuMemcpyPeerAsync, VS_PEER_ASYNC_PARAMS,
             (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream), VS_LINEAR(dstDevice, srcDevice), hStream)
VS_COPY_HOOK(copies, cuMemcpyPeerAsync_ptsz, VS_PEER_ASYNC_PARAMS,
             (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream), VS_LINEAR(dstDevice, srcDevice), hStream)

/* Typed 1-D copies. */
VS_HOST_COPY_HOOK(cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), (dstDevice, srcHost, ByteCount), dstDevice, srcHost, true, NULL, false)
VS_HOST_COPY_HOOK(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), (dstDevice, srcHost, ByteCount), dstDevice, srcHost, true, NULL, false)
VS_HOST_COPY_HOOK(cuMemcpyDtoH_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), (dstHost, srcDevice, ByteCount), srcDevice, dstHost, false, NULL, false)
VS_HOST_COPY_HOOK(cuMemcpyDtoH_v2_ptds, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), (dstHost, srcDevice, ByteCount), srcDevice, dstHost, false, NULL, false)
VS_COPY_HOOK(copies, cuMemcpyDtoD_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
             (dstDevice, srcDevice, ByteCount), VS_LINEAR(dstDevice, srcDevice), NULL)
VS_COPY_HOOK(copies, cuMemcpyDtoD_v2_ptds, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
             (dstDevice, srcDevice, ByteCount), VS_LINEAR(dstDevice, srcDevice), NULL)
VS_COPY_HOOK(copies, cuMemcpyDtoA_v2, (CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount),
             (dstArray, dstOffset, srcDevice, ByteCount), VS_LINEAR(srcDevice, 0), NULL)
VS_COPY_HOOK(copies, cuMemcpyDtoA_v2_ptds, (CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount),
             (dstArray, dstOffset, srcDevice, ByteCount), VS_LINEAR(srcDevice, 0), NULL)
VS_COPY_HOOK(copies, cuMemcpyAtoD_v2, (CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount),
             (dstDevice, srcArray, srcOffset, ByteCount), VS_LINEAR(dstDevice, 0), NULL)
VS_COPY_HOOK(copies, cuMemcpyAtoD_v2_ptds, (CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount),
             (dstDevice, srcArray, srcOffset, ByteCount), VS_LINEAR(dstDevice, 0), NULL)
VS_HOST_COPY_HOOK(cuMemcpyHtoDAsync_v2, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),
                  (dstDevice, srcHost, ByteCount, hStream), dstDevice, srcHost, true, hStream, true)
VS_HOST_COPY_HOOK(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),
                  (dstDevice, srcHost, ByteCount, hStream), dstDevice, srcHost, true, hStream, true)
VS_COPY_HOOK(copies, cuMemcpyDtoHAsync_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
             (dstHost, srcDevice, ByteCount, hStream), VS_LINEAR(srcDevice, 0), hStream)
VS_COPY_HOOK(copies, cuMemcpyDtoHAsync_v2_ptsz, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
             (dstHost, srcDevice, ByteCount, hStream), VS_LINEAR(srcDevice, 0), hStream)
VS_COPY_HOOK(copies, cuMemcpyDtoDAsync_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
             (dstDevice, srcDevice, ByteCount, hStream), VS_LINEAR(dstDevice, srcDevice), hStream)
VS_COPY_HOOK(copies, cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
             (dstDevice, srcDevice, ByteCount, hStream), VS_LINEAR(dstDevice, srcDevice), hStream)

/* 2-D and 3-D copies described by a struct. */
VS_COPY_HOOK(copies, cuMemcpy2D_v2, (const CUDA_MEMCPY2D *pCopy),
             (pCopy), vs_copy2d_words(&vs_w_, pCopy), NULL)
VS_COPY_HOOK(copies, cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *pCopy),
             (pCopy), vs_copy2d_words(&vs_w_, pCopy), NULL)
VS_COPY_HOOK(copies, cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *pCopy),
             (pCopy), vs_copy2d_words(&vs_w_, pCopy), NULL)
VS_COPY_HOOK(copies, cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D *pCopy),
             (pCopy), vs_copy2d_words(&vs_w_, pCopy), NULL)
VS_COPY_HOOK(copies, cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *pCopy, CUstream hStream),
             (pCopy, hStream), vs_copy2d_words(&vs_w_, pCopy), hStream)
VS_COPY_HOOK(copies, cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *pCopy, CUstream hStream),
             (pCopy, hStream), vs_copy2d_words(&vs_w_, pCopy), hStream)
VS_COPY_HOOK(copies, cuMemcpy3D_v2, (const CUDA_MEMCPY3D *pCopy),
             (pCopy), vs_copy3d_words(&vs_w_, pCopy), NULL)
VS_COPY_HOOK(copies, cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D *pCopy),
             (pCopy), vs_copy3d_words(&vs_w_, pCopy), NULL)
VS_COPY_HOOK(copies, cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *pCopy, CUstream hStream),
             (pCopy, hStream), vs_copy3d_words(&vs_w_, pCopy), hStream)
VS_COPY_HOOK(copies, cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *pCopy, CUstream hStream),
             (pCopy, hStream), vs_copy3d_words(&vs_w_, pCopy), hStream)
VS_COPY_HOOK(copies, cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER *pCopy),
             (pCopy), vs_copy3d_peer_words(&vs_w_, pCopy), NULL)
VS_COPY_HOOK(copies, cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER *pCopy),
             (pCopy), vs_copy3d_peer_words(&vs_w_, pCopy), NULL)
VS_COPY_HOOK(copies, cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream),
             (pCopy, hStream), vs_copy3d_peer_words(&vs_w_, pCopy), hStream)
VS_COPY_HOOK(copies, cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream),
             (pCopy, hStream), vs_copy3d_peer_words(&vs_w_, pCopy), hStream)

/* Batches: every pair of every operation. */
static void vs_copy_batch_words(CUdeviceptr *dsts, CUdeviceptr *srcs, const size_t *sizes, size_t count,
                                vs_words_t *w)
{
    VS_COUNT(copies);
    for (size_t i = 0; i < count; i++) {
        uint64_t bytes = sizes != NULL ? sizes[i] : 1;
        if (dsts != NULL)
            vs_words_add_range(w, (uintptr_t)dsts[i], bytes);
        if (srcs != NULL)
            vs_words_add_range(w, (uintptr_t)srcs[i], bytes);
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
    VS_BATCH(cuMemcpyBatchAsync, vs_copy_batch_words(dsts, srcs, sizes, count, &vs_words_),
             VS_CALL(cuMemcpyBatchAsync, (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream)));
}

CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                         CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                         size_t *failIdx, CUstream hStream)
{
    VS_BATCH(cuMemcpyBatchAsync_ptsz, vs_copy_batch_words(dsts, srcs, sizes, count, &vs_words_),
             VS_CALL(cuMemcpyBatchAsync_ptsz,
                   (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream)));
}

CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                       CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                       CUstream hStream)
{
    VS_BATCH(cuMemcpyBatchAsync_v2, vs_copy_batch_words(dsts, srcs, sizes, count, &vs_words_),
             VS_CALL(cuMemcpyBatchAsync_v2, (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream)));
}

CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                            CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                            CUstream hStream)
{
    VS_BATCH(cuMemcpyBatchAsync_v2_ptsz, vs_copy_batch_words(dsts, srcs, sizes, count, &vs_words_),
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
                 vs_words_add_range(&vs_w_, (uintptr_t)dstDevice, (uint64_t)N * sizeof(value_type)), NULL)
#define VS_MEMSET_ASYNC_HOOK(symbol, value_type)                                                   \
    VS_COPY_HOOK(memsets, symbol, (CUdeviceptr dstDevice, value_type value, size_t N, CUstream hStream), \
                 (dstDevice, value, N, hStream),                                                   \
                 vs_words_add_range(&vs_w_, (uintptr_t)dstDevice, (uint64_t)N * sizeof(value_type)), hStream)
#define VS_MEMSET2D_RANGE(value_type)                                                              \
    vs_words_add_range(&vs_w_, (uintptr_t)dstDevice,                                                    \
                  vs_strided_extent((uint64_t)Width * sizeof(value_type), Height, 1, dstPitch, Height))
#define VS_MEMSET2D_HOOK(symbol, value_type)                                                       \
    VS_COPY_HOOK(memsets, symbol,                                                                  \
                 (CUdeviceptr dstDevice, size_t dstPitch, value_type value, size_t Width, size_t Height), \
                 (dstDevice, dstPitch, value, Width, Height), VS_MEMSET2D_RANGE(value_type), NULL)
#define VS_MEMSET2D_ASYNC_HOOK(symbol, value_type)                                                 \
    VS_COPY_HOOK(memsets, symbol,                                                                  \
                 (CUdeviceptr dstDevice, size_t dstPitch, value_type value, size_t Width, size_t Height, \
                  CUstream hStream),                                                               \
                 (dstDevice, dstPitch, value, Width, Height, hStream), VS_MEMSET2D_RANGE(value_type), hStream)

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

/* sim_copy.c: copies and memsets, synchronous and asynchronous.
 *
 * Every copy, linear, 2-D or 3-D, becomes one strided `sim_copy_desc_t`
 * command executed with `memcpy` on the stream's worker: touching unmapped
 * device memory faults there, loudly, as an illegal address would on a GPU.
 * The direction (and the statistics and engine it counts against) is found
 * by classifying both sides at submission, as unified addressing does.
 *
 * Synchronous forms run on the legacy or per-thread default stream and
 * return once the work is done (for every kind of memory: waiting longer
 * than a real driver might is always a legal behaviour).
 * Entry points: the `cuMemcpy*` and `cuMemset*` functions.
 */
#include "sim_exec.h"

#include <string.h>

/* ------------------------------------------------------------------------
 * Execution (worker side)
 * ------------------------------------------------------------------------ */

uint64_t sim_copy_bytes(const sim_copy_desc_t *copy)
{
    return (uint64_t)copy->width * copy->height * copy->depth;
}

void sim_copy_execute(const sim_copy_desc_t *c)
{
    if (c->height == 1 && c->depth == 1) {
        memmove((void *)c->dst, (const void *)c->src, c->width);
        return;
    }
    for (size_t z = 0; z < c->depth; z++) {
        for (size_t y = 0; y < c->height; y++) {
            uintptr_t dst = c->dst + (z * c->dst_height + y) * c->dst_pitch;
            uintptr_t src = c->src + (z * c->src_height + y) * c->src_pitch;
            memmove((void *)dst, (const void *)src, c->width);
        }
    }
}

void sim_set_execute(const sim_set_desc_t *set)
{
    for (size_t y = 0; y < set->height; y++) {
        uintptr_t row = set->dst + y * set->pitch;
        switch (set->elem_size) {
        case 1:
            memset((void *)row, (int)(set->value & 0xff), set->width);
            break;
        case 2: {
            uint16_t *p = (uint16_t *)row, v = (uint16_t)set->value;
            for (size_t i = 0; i < set->width; i++)
                p[i] = v;
            break;
        }
        default: {
            uint32_t *p = (uint32_t *)row;
            for (size_t i = 0; i < set->width; i++)
                p[i] = set->value;
            break;
        }
        }
    }
}

/* ------------------------------------------------------------------------
 * Submission
 * ------------------------------------------------------------------------ */

/* Which side must be device-accessible memory for the typed copies. */
typedef enum copy_check_e { CHECK_NONE = 0, CHECK_DST = 1, CHECK_SRC = 2, CHECK_BOTH = 3 } copy_check_t;

static bool device_accessible(uintptr_t address)
{
    /* Pinned host memory is device-accessible at the same address (UVA). */
    return sim_mem_classify(address, NULL) != SIM_MEM_PAGEABLE;
}

/* Whether an asynchronous copy returns only once it is done, as with the
 * real driver: pageable host memory is staged through the driver's pinned
 * buffers synchronously with the host (cuda.h: "might be synchronous"),
 * and host-to-host copies are "fully synchronous". The caller may then
 * reuse or free its pageable buffer at once, under any SIMCUDA_LAG. */
static bool copy_waits_for_host(const sim_cmd_t *cmd)
{
    if (cmd->kind != SIM_CMD_COPY)
        return false;
    sim_mem_kind_t dst = sim_mem_classify(cmd->u.copy.dst, NULL);
    sim_mem_kind_t src = sim_mem_classify(cmd->u.copy.src, NULL);
    bool dst_host = dst == SIM_MEM_PAGEABLE || dst == SIM_MEM_PINNED;
    bool src_host = src == SIM_MEM_PAGEABLE || src == SIM_MEM_PINNED;
    return dst == SIM_MEM_PAGEABLE || src == SIM_MEM_PAGEABLE || (dst_host && src_host);
}

/* Submits `cmd` on `hStream` (async) or on the default stream and waits
 * (sync, and the async copies `copy_waits_for_host` names). `per_thread`
 * selects the `_ptsz`/`_ptds` meaning of NULL. */
static CUresult submit_work(sim_cmd_t *cmd, CUstream hStream, bool async, bool per_thread)
{
    CUresult result;
    struct CUstream_st *s;
    bool wait = !async || copy_waits_for_host(cmd);
    if (async) {
        s = sim_stream_resolve(hStream, per_thread, &result);
        if (s == NULL)
            return result;
    } else {
        result = sim_sync_stream(per_thread, &s);
        if (result != CUDA_SUCCESS)
            return result;
    }
    /* A capturing stream records the copy: nothing runs, nothing to wait for. */
    pthread_mutex_lock(&sim_submit_lock);
    bool capturing = s->capture != NULL;
    result = sim_submit_locked(s, cmd);
    pthread_mutex_unlock(&sim_submit_lock);
    if (result == CUDA_SUCCESS && wait && !capturing)
        sim_stream_host_wait(s);
    return result;
}

static CUresult copy_linear(CUdeviceptr dst, CUdeviceptr src, size_t bytes, copy_check_t check, CUstream hStream,
                            bool async, bool per_thread)
{
    if (bytes == 0)
        return CUDA_SUCCESS;
    if (dst == 0 || src == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (((check & CHECK_DST) && !device_accessible(dst)) || ((check & CHECK_SRC) && !device_accessible(src)))
        return CUDA_ERROR_INVALID_VALUE;
    sim_cmd_t cmd = {.kind = SIM_CMD_COPY};
    cmd.u.copy = (sim_copy_desc_t){
        .dst = dst, .src = src, .dst_pitch = bytes, .src_pitch = bytes,
        .dst_height = 1, .src_height = 1, .width = bytes, .height = 1, .depth = 1,
    };
    return submit_work(&cmd, hStream, async, per_thread);
}

/* The address of one side of a 2-D/3-D copy, or 0 when unsupported. */
static CUresult side_address(CUmemorytype type, const void *host, CUdeviceptr device, size_t x, size_t y, size_t z,
                             size_t pitch, size_t height, uintptr_t *out)
{
    uintptr_t base;
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        base = (uintptr_t)host;
        break;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        base = (uintptr_t)device;
        break;
    case CU_MEMORYTYPE_ARRAY:
        return CUDA_ERROR_NOT_SUPPORTED; /* arrays are not simulated */
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (base == 0)
        return CUDA_ERROR_INVALID_VALUE;
    *out = base + (z * height + y) * pitch + x;
    return CUDA_SUCCESS;
}

CUresult sim_copy_desc_from_3d(const CUDA_MEMCPY3D *p, sim_copy_desc_t *c, bool *empty)
{
    *empty = false;
    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    size_t depth = p->Depth ? p->Depth : 1, height = p->Height ? p->Height : 1;
    if (p->WidthInBytes == 0 || p->Height == 0 || p->Depth == 0) {
        *empty = true;
        return CUDA_SUCCESS;
    }
    if ((height > 1 || depth > 1) && (p->srcPitch < p->WidthInBytes || p->dstPitch < p->WidthInBytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (depth > 1 && (p->srcHeight < height || p->dstHeight < height))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result = side_address(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcZ,
                                   p->srcPitch, p->srcHeight, &c->src);
    if (result != CUDA_SUCCESS)
        return result;
    result = side_address(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch,
                          p->dstHeight, &c->dst);
    if (result != CUDA_SUCCESS)
        return result;
    c->src_pitch = p->srcPitch;
    c->src_height = p->srcHeight;
    c->dst_pitch = p->dstPitch;
    c->dst_height = p->dstHeight;
    c->width = p->WidthInBytes;
    c->height = height;
    c->depth = depth;
    return CUDA_SUCCESS;
}

static CUresult copy_3d(const CUDA_MEMCPY3D *p, CUstream hStream, bool async, bool per_thread)
{
    sim_cmd_t cmd = {.kind = SIM_CMD_COPY};
    bool empty;
    CUresult result = sim_copy_desc_from_3d(p, &cmd.u.copy, &empty);
    if (result != CUDA_SUCCESS || empty)
        return result;
    return submit_work(&cmd, hStream, async, per_thread);
}

static CUresult copy_2d(const CUDA_MEMCPY2D *p, CUstream hStream, bool async, bool per_thread)
{
    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D p3 = {
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcMemoryType = p->srcMemoryType,
        .srcHost = p->srcHost, .srcDevice = p->srcDevice, .srcArray = p->srcArray,
        .srcPitch = p->srcPitch, .srcHeight = p->Height,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstMemoryType = p->dstMemoryType,
        .dstHost = p->dstHost, .dstDevice = p->dstDevice, .dstArray = p->dstArray,
        .dstPitch = p->dstPitch, .dstHeight = p->Height,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = 1,
    };
    return copy_3d(&p3, hStream, async, per_thread);
}

CUresult sim_set_desc_build(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned elem_size, size_t width,
                            size_t height, sim_set_desc_t *out, bool *empty)
{
    *empty = width == 0 || height == 0;
    if (*empty)
        return CUDA_SUCCESS;
    if ((elem_size != 1 && elem_size != 2 && elem_size != 4) || dst == 0 || dst % elem_size != 0 ||
        (height > 1 && pitch < width * elem_size))
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_accessible(dst))
        return CUDA_ERROR_INVALID_VALUE;
    *out = (sim_set_desc_t){
        .dst = dst, .pitch = height > 1 ? pitch : width * elem_size, .width = width, .height = height,
        .elem_size = elem_size, .value = value,
    };
    return CUDA_SUCCESS;
}

static CUresult memset_2d(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned elem_size, size_t width,
                          size_t height, CUstream hStream, bool async, bool per_thread)
{
    sim_cmd_t cmd = {.kind = SIM_CMD_SET};
    bool empty;
    CUresult result = sim_set_desc_build(dst, pitch, value, elem_size, width, height, &cmd.u.set, &empty);
    if (result != CUDA_SUCCESS || empty)
        return result;
    return submit_work(&cmd, hStream, async, per_thread);
}

/* ------------------------------------------------------------------------
 * Exported functions. Each is its fault-injection point, then one call.
 * ------------------------------------------------------------------------ */

/* Linear copies: symbol, parameters, destination, source, check, stream,
 * async, per-thread. */
#define SIM_COPY_FN(symbol, params, dst, src, check, stream, async, per_thread)                           \
    SIM_EXPORT CUresult symbol params                                                                     \
    {                                                                                                     \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                                             \
        if (entry != CUDA_SUCCESS)                                                                        \
            return entry;                                                                                 \
        return copy_linear((CUdeviceptr)(dst), (CUdeviceptr)(src), ByteCount, check, stream, async,       \
                           per_thread);                                                                   \
    }

#define HTOD_PARAMS (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
#define DTOH_PARAMS (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
#define DTOD_PARAMS (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
#define HTOD_ASYNC_PARAMS (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
#define DTOH_ASYNC_PARAMS (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
#define DTOD_ASYNC_PARAMS (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
#define ANY_PARAMS (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
#define ANY_ASYNC_PARAMS (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)

SIM_COPY_FN(cuMemcpyHtoD_v2, HTOD_PARAMS, dstDevice, (uintptr_t)srcHost, CHECK_DST, NULL, false, false)
SIM_COPY_FN(cuMemcpyHtoD_v2_ptds, HTOD_PARAMS, dstDevice, (uintptr_t)srcHost, CHECK_DST, NULL, false, true)
SIM_COPY_FN(cuMemcpyDtoH_v2, DTOH_PARAMS, (uintptr_t)dstHost, srcDevice, CHECK_SRC, NULL, false, false)
SIM_COPY_FN(cuMemcpyDtoH_v2_ptds, DTOH_PARAMS, (uintptr_t)dstHost, srcDevice, CHECK_SRC, NULL, false, true)
SIM_COPY_FN(cuMemcpyDtoD_v2, DTOD_PARAMS, dstDevice, srcDevice, CHECK_BOTH, NULL, false, false)
SIM_COPY_FN(cuMemcpyDtoD_v2_ptds, DTOD_PARAMS, dstDevice, srcDevice, CHECK_BOTH, NULL, false, true)
SIM_COPY_FN(cuMemcpyHtoDAsync_v2, HTOD_ASYNC_PARAMS, dstDevice, (uintptr_t)srcHost, CHECK_DST, hStream, true, false)
SIM_COPY_FN(cuMemcpyHtoDAsync_v2_ptsz, HTOD_ASYNC_PARAMS, dstDevice, (uintptr_t)srcHost, CHECK_DST, hStream, true, true)
SIM_COPY_FN(cuMemcpyDtoHAsync_v2, DTOH_ASYNC_PARAMS, (uintptr_t)dstHost, srcDevice, CHECK_SRC, hStream, true, false)
SIM_COPY_FN(cuMemcpyDtoHAsync_v2_ptsz, DTOH_ASYNC_PARAMS, (uintptr_t)dstHost, srcDevice, CHECK_SRC, hStream, true, true)
SIM_COPY_FN(cuMemcpyDtoDAsync_v2, DTOD_ASYNC_PARAMS, dstDevice, srcDevice, CHECK_BOTH, hStream, true, false)
SIM_COPY_FN(cuMemcpyDtoDAsync_v2_ptsz, DTOD_ASYNC_PARAMS, dstDevice, srcDevice, CHECK_BOTH, hStream, true, true)
SIM_COPY_FN(cuMemcpy, ANY_PARAMS, dst, src, CHECK_NONE, NULL, false, false)
SIM_COPY_FN(cuMemcpy_ptds, ANY_PARAMS, dst, src, CHECK_NONE, NULL, false, true)
SIM_COPY_FN(cuMemcpyAsync, ANY_ASYNC_PARAMS, dst, src, CHECK_NONE, hStream, true, false)
SIM_COPY_FN(cuMemcpyAsync_ptsz, ANY_ASYNC_PARAMS, dst, src, CHECK_NONE, hStream, true, true)

static CUresult copy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t bytes,
                          CUstream hStream, bool async, bool per_thread)
{
    /* Peer copies run whether or not peer access is enabled: the copy
     * engines reach both devices. */
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!sim_ctx_valid(dst_ctx) || !sim_ctx_valid(src_ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return copy_linear(dst, src, bytes, CHECK_BOTH, hStream, async, per_thread);
}

#define PEER_PARAMS                                                                                        \
    (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount)
#define PEER_ASYNC_PARAMS                                                                                  \
    (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, \
     CUstream hStream)
#define SIM_PEER_FN(symbol, params, stream, async, per_thread)                                             \
    SIM_EXPORT CUresult symbol params                                                                     \
    {                                                                                                     \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                                             \
        if (entry != CUDA_SUCCESS)                                                                        \
            return entry;                                                                                 \
        return copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, stream, async, per_thread); \
    }

SIM_PEER_FN(cuMemcpyPeer, PEER_PARAMS, NULL, false, false)
SIM_PEER_FN(cuMemcpyPeer_ptds, PEER_PARAMS, NULL, false, true)
SIM_PEER_FN(cuMemcpyPeerAsync, PEER_ASYNC_PARAMS, hStream, true, false)
SIM_PEER_FN(cuMemcpyPeerAsync_ptsz, PEER_ASYNC_PARAMS, hStream, true, true)

#define SIM_COPY2D_FN(symbol, impl, type, async, per_thread)                                               \
    SIM_EXPORT CUresult symbol(const type *pCopy)                                                         \
    {                                                                                                     \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                                             \
        if (entry != CUDA_SUCCESS)                                                                        \
            return entry;                                                                                 \
        return impl(pCopy, NULL, async, per_thread);                                                      \
    }
#define SIM_COPY2D_ASYNC_FN(symbol, impl, type, per_thread)                                                \
    SIM_EXPORT CUresult symbol(const type *pCopy, CUstream hStream)                                       \
    {                                                                                                     \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                                             \
        if (entry != CUDA_SUCCESS)                                                                        \
            return entry;                                                                                 \
        return impl(pCopy, hStream, true, per_thread);                                                    \
    }

SIM_COPY2D_FN(cuMemcpy2D_v2, copy_2d, CUDA_MEMCPY2D, false, false)
SIM_COPY2D_FN(cuMemcpy2D_v2_ptds, copy_2d, CUDA_MEMCPY2D, false, true)
SIM_COPY2D_FN(cuMemcpy2DUnaligned_v2, copy_2d, CUDA_MEMCPY2D, false, false)
SIM_COPY2D_FN(cuMemcpy2DUnaligned_v2_ptds, copy_2d, CUDA_MEMCPY2D, false, true)
SIM_COPY2D_FN(cuMemcpy3D_v2, copy_3d, CUDA_MEMCPY3D, false, false)
SIM_COPY2D_FN(cuMemcpy3D_v2_ptds, copy_3d, CUDA_MEMCPY3D, false, true)
SIM_COPY2D_ASYNC_FN(cuMemcpy2DAsync_v2, copy_2d, CUDA_MEMCPY2D, false)
SIM_COPY2D_ASYNC_FN(cuMemcpy2DAsync_v2_ptsz, copy_2d, CUDA_MEMCPY2D, true)
SIM_COPY2D_ASYNC_FN(cuMemcpy3DAsync_v2, copy_3d, CUDA_MEMCPY3D, false)
SIM_COPY2D_ASYNC_FN(cuMemcpy3DAsync_v2_ptsz, copy_3d, CUDA_MEMCPY3D, true)

/* Memsets: symbol, value type, element size, stream, async, per-thread. */
#define SIM_MEMSET_FN(symbol, vtype, size, per_thread)                                                     \
    SIM_EXPORT CUresult symbol(CUdeviceptr dstDevice, vtype value, size_t N)                              \
    {                                                                                                     \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                                             \
        if (entry != CUDA_SUCCESS)                                                                        \
            return entry;                                                                                 \
        return memset_2d(dstDevice, 0, value, size, N, 1, NULL, false, per_thread);                       \
    }
#define SIM_MEMSET_ASYNC_FN(symbol, vtype, size, per_thread)                                               \
    SIM_EXPORT CUresult symbol(CUdeviceptr dstDevice, vtype value, size_t N, CUstream hStream)            \
    {                                                                                                     \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                                             \
        if (entry != CUDA_SUCCESS)                                                                        \
            return entry;                                                                                 \
        return memset_2d(dstDevice, 0, value, size, N, 1, hStream, true, per_thread);                     \
    }
#define SIM_MEMSET2D_FN(symbol, vtype, size, per_thread)                                                   \
    SIM_EXPORT CUresult symbol(CUdeviceptr dstDevice, size_t dstPitch, vtype value, size_t Width, size_t Height) \
    {                                                                                                     \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                                             \
        if (entry != CUDA_SUCCESS)                                                                        \
            return entry;                                                                                 \
        return memset_2d(dstDevice, dstPitch, value, size, Width, Height, NULL, false, per_thread);       \
    }
#define SIM_MEMSET2D_ASYNC_FN(symbol, vtype, size, per_thread)                                             \
    SIM_EXPORT CUresult symbol(CUdeviceptr dstDevice, size_t dstPitch, vtype value, size_t Width, size_t Height, \
                               CUstream hStream)                                                          \
    {                                                                                                     \
        CUresult entry = SIM_ENTER(symbol, SIM_NEED_NOTHING);                                             \
        if (entry != CUDA_SUCCESS)                                                                        \
            return entry;                                                                                 \
        return memset_2d(dstDevice, dstPitch, value, size, Width, Height, hStream, true, per_thread);     \
    }

SIM_MEMSET_FN(cuMemsetD8_v2, unsigned char, 1, false)
SIM_MEMSET_FN(cuMemsetD8_v2_ptds, unsigned char, 1, true)
SIM_MEMSET_FN(cuMemsetD16_v2, unsigned short, 2, false)
SIM_MEMSET_FN(cuMemsetD16_v2_ptds, unsigned short, 2, true)
SIM_MEMSET_FN(cuMemsetD32_v2, unsigned int, 4, false)
SIM_MEMSET_FN(cuMemsetD32_v2_ptds, unsigned int, 4, true)
SIM_MEMSET_ASYNC_FN(cuMemsetD8Async, unsigned char, 1, false)
SIM_MEMSET_ASYNC_FN(cuMemsetD8Async_ptsz, unsigned char, 1, true)
SIM_MEMSET_ASYNC_FN(cuMemsetD16Async, unsigned short, 2, false)
SIM_MEMSET_ASYNC_FN(cuMemsetD16Async_ptsz, unsigned short, 2, true)
SIM_MEMSET_ASYNC_FN(cuMemsetD32Async, unsigned int, 4, false)
SIM_MEMSET_ASYNC_FN(cuMemsetD32Async_ptsz, unsigned int, 4, true)
SIM_MEMSET2D_FN(cuMemsetD2D8_v2, unsigned char, 1, false)
SIM_MEMSET2D_FN(cuMemsetD2D8_v2_ptds, unsigned char, 1, true)
SIM_MEMSET2D_FN(cuMemsetD2D16_v2, unsigned short, 2, false)
SIM_MEMSET2D_FN(cuMemsetD2D16_v2_ptds, unsigned short, 2, true)
SIM_MEMSET2D_FN(cuMemsetD2D32_v2, unsigned int, 4, false)
SIM_MEMSET2D_FN(cuMemsetD2D32_v2_ptds, unsigned int, 4, true)
SIM_MEMSET2D_ASYNC_FN(cuMemsetD2D8Async, unsigned char, 1, false)
SIM_MEMSET2D_ASYNC_FN(cuMemsetD2D8Async_ptsz, unsigned char, 1, true)
SIM_MEMSET2D_ASYNC_FN(cuMemsetD2D16Async, unsigned short, 2, false)
SIM_MEMSET2D_ASYNC_FN(cuMemsetD2D16Async_ptsz, unsigned short, 2, true)
SIM_MEMSET2D_ASYNC_FN(cuMemsetD2D32Async, unsigned int, 4, false)
SIM_MEMSET2D_ASYNC_FN(cuMemsetD2D32Async_ptsz, unsigned int, 4, true)

/* pool_async.h: stream-ordered allocations served from evictable memory
 * (pool_async.c). */
#ifndef VS_POOL_ASYNC_H
#define VS_POOL_ASYNC_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

#include "registry.h"

/* `cuMemAllocAsync` (`pool` NULL) or `cuMemAllocFromPoolAsync` of `bytes`
 * on `stream` (`per_thread`: the `_ptsz` variant), on `device`, which takes
 * evictable allocations of that size. Returns false when the allocation is
 * not served here (a pool that is exportable, host-located, of another
 * device or unknown; a capturing stream): the caller passes it to the
 * driver. Otherwise *rc is the result and *dptr the address. */
bool vs_pool_async_alloc(CUdeviceptr *dptr, uint64_t bytes, CUmemoryPool pool, CUstream stream, bool per_thread,
                         int device, vs_alloc_kind_t kind, CUresult *rc);

/* `cuMemFreeAsync` of `dptr` on `stream`: false when it is not a served
 * allocation (the caller passes the call on), otherwise *rc. */
bool vs_pool_async_free(CUdeviceptr dptr, CUstream stream, bool per_thread, CUresult *rc);

/* `cuMemFree` of `dptr`: false when it is not a served allocation. */
bool vs_pool_async_free_now(CUdeviceptr dptr, CUresult *rc);

/* The pool hooks: the driver's answer for what it holds itself, joined
 * with what the shim served from the pool. */
CUresult vs_pool_async_create(CUmemoryPool *pool, const CUmemPoolProps *props);
CUresult vs_pool_async_destroy(CUmemoryPool pool);
CUresult vs_pool_async_get_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
CUresult vs_pool_async_set_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
CUresult vs_pool_async_trim_to(CUmemoryPool pool, size_t keep);

/* Releases every served allocation on `device` whose free the stream has
 * passed (room wanted). True when any went. */
bool vs_pool_async_trim_device(int device);

/* Counts a stream-ordered allocation the driver served itself (+bytes at
 * its allocation, -bytes at its free), for `vs_pool_async_meminfo`. */
void vs_pool_async_count_plain(int device, int64_t delta);

/* Lowers `*free_bytes` (and raises `*total` if it must) so that free
 * memory plus the live stream-ordered allocations on `device` never exceed
 * the total: PyTorch's cudaMallocAsync backend asserts it. */
void vs_pool_async_meminfo(int device, uint64_t *free_bytes, uint64_t *total);

/* The pool a live served allocation starting at `base` came from, or
 * NULL when `base` is not one. */
CUmemoryPool vs_pool_async_pool_of(uintptr_t base);

/* `ctx` was destroyed: its served allocations went with it. */
void vs_pool_async_ctx_destroyed(CUcontext ctx);

#endif /* VS_POOL_ASYNC_H */

/* hooks_vmm.c: the application's own VMM memory (`cuMemCreate`, `cuMemMap`,
 * `cuMemSetAccess` and every call that takes their handles), counted where
 * it is physical and, in offload mode, made evictable.
 *
 * Counting: a handle's bytes are counted at `cuMemCreate` (a handle may be
 * mapped several times, or not at all) and given back once the application
 * holds no reference to it and it is mapped nowhere. Its mappings are
 * registered so that the operations that use them are seen.
 *
 * Offload: a handle of device memory that cannot be shared (no handle
 * types requested, no compression, no RDMA or other usage flags, made
 * outside NCCL's calls) of at least VRAMSHIM_MIN_EVICT is virtualised. The
 * application gets a handle of the shim's own (`VS_VMM_HANDLE_TAG`); the
 * shim keeps the driver's. Once the handle is mapped whole at one address
 * and granted there (`cuMemSetAccess`), the offload engine adopts that
 * mapping as an evictable region (`vs_offload_adopt`): evicted, its
 * physical memory goes; restored, new memory is mapped at the same address
 * and granted as the application granted it. One object mapped at one
 * address (vLLM's sleep mode, torch_memory_saver) is one region; an arena
 * of chunks (PyTorch's expandable segments, ComfyUI's pages) is one region
 * per chunk, evicted chunk by chunk.
 *
 * The application's handle stays valid throughout: every call that takes
 * it is translated. A call that needs the driver's handle in place first
 * hands the mapping back (`vs_offload_detach`: restored, resident, one
 * driver handle again): unmapping it while the handle lives on, changing
 * its grants, a second mapping or one in part, an export, a multicast
 * binding, a sparse-array binding, a dma-buf of its range. The last four
 * fix the handle: it is never adopted again, as the memory of handles
 * requested shareable, imported handles, multicast-bound memory and memory
 * registered with NCCL (pinned there) never is.
 *
 * References: the driver counts references to a handle (`cuMemCreate` and
 * each `cuMemRetainAllocationHandle` add one, `cuMemRelease` takes one, a
 * mapping keeps the memory alive). While the engine holds an adopted
 * mapping, the driver's handle has exactly one reference, the engine's,
 * and the application's are counted here (`refs`); handed back, the
 * driver's count is made the application's again.
 *
 * Locks: `vs_vmm_lock` is a leaf guarding the table: never held across a
 * call into the engine or the registry, only across the driver's own
 * calls on handles (which call nothing back).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "cap.h"
#include "config.h"
#include "log.h"
#include "offload.h"
#include "registry.h"
#include "hooks.h"

/* The shim's own handles: a tag in the top bits that the driver's handles
 * (small numbers or user-space addresses) never carry, and a counter. */
#define VS_VMM_HANDLE_TAG 0x7673000000000000ull
#define VS_VMM_HANDLE_TAG_MASK 0xffff000000000000ull

/* Grants a virtualised handle can carry: one per device that may reach it. */
#define VS_VMM_GRANTS 8

/* Mappings handled at once by one call over a range (more are handled in
 * further passes). */
#define VS_VMM_BATCH 64

/* The application's reservations, sorted by base: an arena is the mappings
 * side by side within one of them (two reservations may be adjacent). */
typedef struct vs_vmm_reservation_s {
    uintptr_t base;
    uint64_t size;
} vs_vmm_reservation_t;

static vs_vmm_reservation_t *vs_vmm_reservations;
static size_t vs_vmm_reservation_count, vs_vmm_reservation_cap;
static pthread_mutex_t vs_vmm_reservation_lock = PTHREAD_MUTEX_INITIALIZER;

/* The index of the first reservation whose base is above `addr`. Lock held. */
static size_t vs_vmm_reservation_after(uintptr_t addr)
{
    size_t lo = 0, hi = vs_vmm_reservation_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (vs_vmm_reservations[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The base of the application's reservation holding `addr`; 0 for none. */
static uintptr_t vs_vmm_reservation_of(uintptr_t addr)
{
    uintptr_t base = 0;
    pthread_mutex_lock(&vs_vmm_reservation_lock);
    size_t i = vs_vmm_reservation_after(addr);
    if (i > 0 && addr - vs_vmm_reservations[i - 1].base < vs_vmm_reservations[i - 1].size)
        base = vs_vmm_reservations[i - 1].base;
    pthread_mutex_unlock(&vs_vmm_reservation_lock);
    return base;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags)
{
    vs_driver_ready();
    CUresult rc = VS_CALL(cuMemAddressReserve, (ptr, size, alignment, addr, flags));
    if (rc != CUDA_SUCCESS || ptr == NULL || !vs_offload_enabled())
        return rc;
    pthread_mutex_lock(&vs_vmm_reservation_lock);
    if (vs_vmm_reservation_count == vs_vmm_reservation_cap) {
        size_t cap = vs_vmm_reservation_cap ? 2 * vs_vmm_reservation_cap : 64;
        vs_vmm_reservation_t *grown = realloc(vs_vmm_reservations, cap * sizeof *grown);
        if (grown != NULL) {
            vs_vmm_reservations = grown;
            vs_vmm_reservation_cap = cap;
        }
    }
    /* Untracked when out of memory: its mappings then form no arena with
     * their neighbours, and are restored one by one like objects. */
    if (vs_vmm_reservation_count < vs_vmm_reservation_cap) {
        size_t i = vs_vmm_reservation_after((uintptr_t)*ptr);
        memmove(&vs_vmm_reservations[i + 1], &vs_vmm_reservations[i],
                (vs_vmm_reservation_count - i) * sizeof *vs_vmm_reservations);
        vs_vmm_reservations[i] = (vs_vmm_reservation_t){.base = (uintptr_t)*ptr, .size = size};
        vs_vmm_reservation_count++;
    }
    pthread_mutex_unlock(&vs_vmm_reservation_lock);
    return rc;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    vs_driver_ready();
    CUresult rc = VS_CALL(cuMemAddressFree, (ptr, size));
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&vs_vmm_reservation_lock);
    size_t i = vs_vmm_reservation_after((uintptr_t)ptr);
    if (i > 0 && vs_vmm_reservations[i - 1].base == (uintptr_t)ptr) {
        memmove(&vs_vmm_reservations[i - 1], &vs_vmm_reservations[i],
                (vs_vmm_reservation_count - i) * sizeof *vs_vmm_reservations);
        vs_vmm_reservation_count--;
    }
    pthread_mutex_unlock(&vs_vmm_reservation_lock);
    return rc;
}

typedef struct vs_vmm_handle_s {
    uint64_t handle;                   /* the application's: the driver's, or the shim's own */
    CUmemGenericAllocationHandle real; /* the driver's; 0 while the engine holds the memory */
    uint64_t size;
    int device;          /* -1: not device memory (counted apart) */
    uint32_t refs;       /* the application's references */
    uint32_t mapped;     /* live mappings */
    bool counted;        /* its bytes are counted here, not by the engine */
    bool virtualised;    /* the application holds a handle of the shim's */
    bool fixed;          /* never adopted (again) */
    uintptr_t mapped_at; /* its one whole mapping; 0: none, or not one whole */
    uintptr_t adopted_at; /* that mapping, while the engine holds it; 0: not adopted */
    CUmemAllocationProp prop;
    size_t grant_count; /* the application's grants at `mapped_at`, one per location */
    CUmemAccessDesc grants[VS_VMM_GRANTS];
    UT_hash_handle hh;
} vs_vmm_handle_t;

static vs_vmm_handle_t *vs_vmm_handles;
static pthread_mutex_t vs_vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t vs_vmm_next = 1;

static vs_vmm_handle_t *vs_vmm_find(uint64_t handle)
{
    vs_vmm_handle_t *p;
    HASH_FIND(hh, vs_vmm_handles, &handle, sizeof handle, p);
    return p;
}

/* Gives back the bytes of a handle that nothing references or maps any
 * more. Called with the lock held. */
static void vs_vmm_settle(vs_vmm_handle_t *p)
{
    if (p->refs != 0 || p->mapped != 0)
        return;
    if (p->counted && p->device >= 0)
        vs_cap_release(p->device, p->size);
    else if (p->counted)
        vs_cap_count_host(-(int64_t)p->size);
    HASH_DEL(vs_vmm_handles, p);
    free(p);
}

/* Whether a handle of `size` made with `prop` and `flags` on `device` is
 * virtualised: pinned device memory, neither compressible nor made for a
 * special use. Handle types requested for export (PyTorch's expandable
 * segments ask for POSIX file descriptors by default) and RDMA capability
 * do not keep it resident: the engine makes its memory anew with the same
 * properties, and an export hands it back for good first (no other process
 * can reach memory it was not exported to). */
static bool vs_vmm_virtualisable(const CUmemAllocationProp *prop, unsigned long long flags, uint64_t size, int device)
{
    return device >= 0 && vs_offload_enabled() && vs_offload_device_has_vmm(device) && !vs_nccl_inside()
           && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && prop->win32HandleMetaData == NULL
           && prop->allocFlags.compressionType == 0 && prop->allocFlags.usage == 0 && flags == 0
           && size >= vs_config_get()->min_evict;
}

/* Sets the driver's references to `real`, mapped at `at`, from `from` to
 * `to` (retains or releases; the mapping keeps the memory alive). */
static void vs_vmm_driver_refs(CUmemGenericAllocationHandle real, uintptr_t at, uint32_t from, uint32_t to)
{
    for (; from < to; from++) {
        CUmemGenericAllocationHandle again;
        if (VS_CALL(cuMemRetainAllocationHandle, (&again, (void *)at)) != CUDA_SUCCESS)
            vs_log(VS_LOG_WARN, "cannot retain the mapping at 0x%" PRIxPTR, at);
    }
    for (; from > to; from--)
        (void)VS_CALL(cuMemRelease, (real));
}

static void vs_vmm_register(uintptr_t base, uint64_t size, int device, uint64_t handle, bool before)
{
    vs_alloc_desc_t desc = {
        .base = base, .size = size, .device = device, .kind = VS_ALLOC_VMM, .handle = handle, .registered_before = before};
    if (vs_registry_add(&desc, NULL) != 0)
        vs_log(VS_LOG_WARN, "cannot register the mapping at 0x%" PRIxPTR, base);
}

/* Hands the adopted mapping of `handle` at `at` back from the engine:
 * resident, mapped, its driver handle again the application's. With `fix`,
 * it is never adopted again. CUDA_SUCCESS, or the restore's error. */
static CUresult vs_vmm_hand_back(uint64_t handle, uintptr_t at, bool fix)
{
    CUmemGenericAllocationHandle real = 0;
    CUresult rc;

    if (!vs_offload_detach(at, &real, &rc)) {
        /* Handed back or freed by another thread meanwhile. */
        pthread_mutex_lock(&vs_vmm_lock);
        vs_vmm_handle_t *p = vs_vmm_find(handle);
        if (p != NULL && fix)
            p->fixed = true;
        pthread_mutex_unlock(&vs_vmm_lock);
        return CUDA_SUCCESS;
    }
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&vs_vmm_lock);
    vs_vmm_handle_t *p = vs_vmm_find(handle);
    uint64_t size = 0;
    int device = -1;
    if (p != NULL) {
        p->real = real;
        p->adopted_at = 0;
        p->counted = true;
        p->fixed = p->fixed || fix;
        vs_vmm_driver_refs(real, at, 1, p->refs);
        size = p->size;
        device = p->device;
    }
    pthread_mutex_unlock(&vs_vmm_lock);
    if (size != 0)
        vs_vmm_register(at, size, device, handle, true);
    return CUDA_SUCCESS;
}

/* The mappings that lie in [start, start + size): their bases, sizes and
 * the handles the registry names for them, at most `cap`; `*next` is where
 * a further pass starts (the end when all were found). */
static size_t vs_vmm_mappings_in(uintptr_t start, uint64_t size, uintptr_t *bases, uint64_t *handles, size_t cap,
                                 uintptr_t *next)
{
    size_t count = 0;
    uintptr_t end = start + size, at = start;
    while (at < end && count < cap) {
        vs_alloc_info_t info;
        if (vs_registry_find(at, &info) != 0 || info.kind != VS_ALLOC_VMM || info.size == 0) {
            at = (at | ((1ull << VS_REGISTRY_PAGE_SHIFT) - 1)) + 1; /* a hole: the next page */
            continue;
        }
        bases[count] = info.base;
        handles[count] = info.handle;
        count++;
        at = info.base + info.size;
    }
    *next = at;
    return count;
}

/* Hands back every adopted mapping in [start, start + size) (`fix`: for
 * good). CUDA_SUCCESS, or the first restore's error. */
static CUresult vs_vmm_hand_back_range(uintptr_t start, uint64_t size, bool fix)
{
    uintptr_t bases[VS_VMM_BATCH], end = start + size, from = start;
    uint64_t handles[VS_VMM_BATCH];
    while (from < end) {
        size_t count = vs_vmm_mappings_in(from, end - from, bases, handles, VS_VMM_BATCH, &from);
        for (size_t i = 0; i < count; i++) {
            pthread_mutex_lock(&vs_vmm_lock);
            vs_vmm_handle_t *p = vs_vmm_find(handles[i]);
            bool adopted = p != NULL && p->adopted_at == bases[i];
            if (p != NULL && fix && !adopted)
                p->fixed = true;
            pthread_mutex_unlock(&vs_vmm_lock);
            CUresult rc = adopted ? vs_vmm_hand_back(handles[i], bases[i], fix) : CUDA_SUCCESS;
            if (rc != CUDA_SUCCESS)
                return rc;
        }
    }
    return CUDA_SUCCESS;
}

/* The driver's handle behind the application's `handle`, in the driver's
 * hands for good (handed back first when adopted); `handle` itself when it
 * is not one of the shim's. */
static CUresult vs_vmm_real_fixed(uint64_t handle, CUmemGenericAllocationHandle *real)
{
    pthread_mutex_lock(&vs_vmm_lock);
    vs_vmm_handle_t *p = vs_vmm_find(handle);
    if (p == NULL || !p->virtualised) {
        if (p != NULL)
            p->fixed = true;
        pthread_mutex_unlock(&vs_vmm_lock);
        *real = (CUmemGenericAllocationHandle)handle;
        return CUDA_SUCCESS;
    }
    uintptr_t adopted = p->adopted_at;
    p->fixed = true;
    pthread_mutex_unlock(&vs_vmm_lock);
    if (adopted != 0) {
        CUresult rc = vs_vmm_hand_back(handle, adopted, true);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    pthread_mutex_lock(&vs_vmm_lock);
    p = vs_vmm_find(handle);
    /* Released meanwhile: the driver's answer to a handle it no longer has. */
    *real = p != NULL && p->real != 0 ? p->real : (CUmemGenericAllocationHandle)handle;
    pthread_mutex_unlock(&vs_vmm_lock);
    return CUDA_SUCCESS;
}

/* Records `desc` (`count` grants) on the whole mappings in
 * [start, start + size) and gives the engine those now adoptable. */
static void vs_vmm_adopt_range(uintptr_t start, uint64_t size, const CUmemAccessDesc *desc, size_t count)
{
    uintptr_t bases[VS_VMM_BATCH], end = start + size, from = start;
    uint64_t handles[VS_VMM_BATCH];
    while (from < end) {
        size_t found = vs_vmm_mappings_in(from, end - from, bases, handles, VS_VMM_BATCH, &from);
        for (size_t i = 0; i < found; i++) {
            pthread_mutex_lock(&vs_vmm_lock);
            vs_vmm_handle_t *p = vs_vmm_find(handles[i]);
            if (p == NULL || !p->virtualised || p->fixed || p->mapped != 1 || p->mapped_at != bases[i]
                || p->adopted_at != 0 || bases[i] < start || bases[i] + p->size > end) {
                pthread_mutex_unlock(&vs_vmm_lock);
                continue;
            }
            /* A grant replaces the one for its location and keeps the others,
             * as cuMemSetAccess does. */
            for (size_t g = 0; g < count && !p->fixed; g++) {
                size_t k = 0;
                while (k < p->grant_count && (p->grants[k].location.type != desc[g].location.type
                                              || p->grants[k].location.id != desc[g].location.id))
                    k++;
                if (k == VS_VMM_GRANTS)
                    p->fixed = true;
                else
                    p->grants[k] = desc[g];
                if (k == p->grant_count && !p->fixed)
                    p->grant_count++;
            }
            /* Reachable by its own device, or it is no memory the engine can
             * restore for the application. */
            bool own = false;
            for (size_t g = 0; g < p->grant_count; g++)
                own = own || (p->grants[g].location.type == CU_MEM_LOCATION_TYPE_DEVICE
                              && p->grants[g].location.id == p->device
                              && p->grants[g].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE);
            if (p->fixed || !own) {
                pthread_mutex_unlock(&vs_vmm_lock);
                continue;
            }
            CUmemAccessDesc grants[VS_VMM_GRANTS];
            size_t grant_count = p->grant_count;
            memcpy(grants, p->grants, grant_count * sizeof grants[0]);
            CUmemGenericAllocationHandle real = p->real;
            uint64_t bytes = p->size;
            int device = p->device;
            uint32_t refs = p->refs;
            CUmemAllocationProp prop = p->prop;
            /* The engine holds the one reference from now on: a handle the
             * program released already is retained through its mapping. */
            if (refs == 0 && VS_CALL(cuMemRetainAllocationHandle, (&real, (void *)bases[i])) != CUDA_SUCCESS) {
                p->fixed = true;
                pthread_mutex_unlock(&vs_vmm_lock);
                continue;
            }
            vs_vmm_driver_refs(real, bases[i], refs > 0 ? refs : 1, 1);
            p->adopted_at = bases[i];
            p->real = 0;
            p->counted = false;
            pthread_mutex_unlock(&vs_vmm_lock);
            (void)vs_registry_remove(bases[i], 1u << VS_ALLOC_VMM, NULL);
            CUresult rc = vs_offload_adopt(bases[i], bytes, device, real, handles[i], grants, grant_count,
                                           vs_vmm_reservation_of(bases[i]), &prop);
            if (rc == CUDA_SUCCESS)
                continue;
            /* Not the engine's: it stays the application's, as it was. */
            vs_log(VS_LOG_DEBUG, "the mapping at 0x%" PRIxPTR " stays resident (error %d)", bases[i], (int)rc);
            pthread_mutex_lock(&vs_vmm_lock);
            p = vs_vmm_find(handles[i]);
            if (p != NULL) {
                p->adopted_at = 0;
                p->real = real;
                p->counted = true;
                p->fixed = true;
                vs_vmm_driver_refs(real, bases[i], 1, p->refs);
            }
            pthread_mutex_unlock(&vs_vmm_lock);
            vs_vmm_register(bases[i], bytes, device, handles[i], true);
        }
    }
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags)
{
    int device = -1;
    CUresult rc;
    bool on_device = prop != NULL && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;

    vs_driver_ready();
    if (on_device) {
        rc = vs_memory_reserve(prop->location.id, size, &device);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    rc = VS_CALL(cuMemCreate, (handle, size, prop, flags));
    if (rc != CUDA_SUCCESS || handle == NULL) {
        if (device >= 0)
            vs_cap_release(device, size);
        return rc;
    }
    vs_vmm_handle_t *p = calloc(1, sizeof *p);
    if (p == NULL) {
        /* Untracked: give the reservation back so the counter stays exact
         * for what the shim knows about. */
        if (device >= 0)
            vs_cap_release(device, size);
        vs_log(VS_LOG_WARN, "out of memory tracking a cuMemCreate handle");
        return rc;
    }
    p->real = *handle;
    p->size = size;
    p->device = device;
    p->refs = 1;
    p->counted = true;
    p->prop = *prop;
    p->virtualised = vs_vmm_virtualisable(prop, flags, size, device);
    p->handle = p->virtualised ? VS_VMM_HANDLE_TAG | atomic_fetch_add(&vs_vmm_next, 1) : (uint64_t)*handle;
    if (!on_device)
        vs_cap_count_host((int64_t)size);
    pthread_mutex_lock(&vs_vmm_lock);
    HASH_ADD(hh, vs_vmm_handles, handle, sizeof p->handle, p);
    bool added = p->hh.tbl != NULL;
    pthread_mutex_unlock(&vs_vmm_lock);
    if (!added) {
        if (device >= 0)
            vs_cap_release(device, size);
        else
            vs_cap_count_host(-(int64_t)size);
        free(p);
        return rc;
    }
    *handle = (CUmemGenericAllocationHandle)p->handle;
    return rc;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult rc = CUDA_SUCCESS;

    vs_driver_ready();
    pthread_mutex_lock(&vs_vmm_lock);
    vs_vmm_handle_t *p = vs_vmm_find((uint64_t)handle);
    if (p == NULL || (p->refs == 0 && !p->virtualised)) {
        pthread_mutex_unlock(&vs_vmm_lock);
        return VS_CALL(cuMemRelease, (handle));
    }
    if (p->refs == 0) {
        rc = CUDA_ERROR_INVALID_VALUE; /* released already: the driver's answer */
    } else if (p->adopted_at != 0 || (rc = VS_CALL(cuMemRelease, (p->real))) == CUDA_SUCCESS) {
        /* Adopted: the engine's reference stands for the mapping. */
        p->refs--;
        vs_vmm_settle(p);
    }
    pthread_mutex_unlock(&vs_vmm_lock);
    return rc;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags)
{
    uint64_t key = (uint64_t)handle;

    vs_driver_ready();
    pthread_mutex_lock(&vs_vmm_lock);
    vs_vmm_handle_t *p = vs_vmm_find(key);
    uintptr_t adopted = p != NULL ? p->adopted_at : 0;
    bool released = p != NULL && p->virtualised && p->refs == 0;
    pthread_mutex_unlock(&vs_vmm_lock);
    if (released)
        return CUDA_ERROR_INVALID_VALUE;
    /* Mapped a second time: the one mapping the engine holds is handed
     * back, and the handle stays the driver's. */
    if (adopted != 0) {
        CUresult rc = vs_vmm_hand_back(key, adopted, true);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    pthread_mutex_lock(&vs_vmm_lock);
    p = vs_vmm_find(key);
    CUmemGenericAllocationHandle real = p != NULL && p->real != 0 ? p->real : handle;
    CUresult rc = VS_CALL(cuMemMap, (ptr, size, offset, real, flags));
    int device = -1;
    if (rc == CUDA_SUCCESS && p != NULL) {
        device = p->device;
        p->mapped++;
        if (p->mapped == 1 && offset == 0 && size == p->size && !p->fixed) {
            p->mapped_at = (uintptr_t)ptr;
            p->grant_count = 0;
        } else {
            p->mapped_at = 0;
            p->fixed = p->fixed || p->virtualised;
        }
    }
    pthread_mutex_unlock(&vs_vmm_lock);
    if (rc == CUDA_SUCCESS)
        vs_vmm_register((uintptr_t)ptr, size, device, key, false);
    return rc;
}

static void vs_vmm_unmapped(const vs_alloc_info_t *info, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&vs_vmm_lock);
    vs_vmm_handle_t *p = vs_vmm_find(info->handle);
    if (p != NULL && p->mapped > 0) {
        p->mapped--;
        if (p->mapped_at == info->base)
            p->mapped_at = 0;
        vs_vmm_settle(p);
    }
    pthread_mutex_unlock(&vs_vmm_lock);
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    uintptr_t start = (uintptr_t)ptr;

    vs_driver_ready();
    /* One adopted mapping, unmapped whole once the application let go of
     * its handle: its memory goes wherever it is, with nothing to bring
     * back. */
    uintptr_t bases[1], next;
    uint64_t handles[1];
    if (vs_offload_enabled() && vs_vmm_mappings_in(start, size, bases, handles, 1, &next) == 1 && bases[0] == start
        && next == start + size) {
        pthread_mutex_lock(&vs_vmm_lock);
        vs_vmm_handle_t *p = vs_vmm_find(handles[0]);
        bool drop = p != NULL && p->adopted_at == start && p->refs == 0 && p->size == size;
        pthread_mutex_unlock(&vs_vmm_lock);
        CUresult rc;
        if (drop && vs_offload_free(ptr, &rc)) {
            pthread_mutex_lock(&vs_vmm_lock);
            p = vs_vmm_find(handles[0]);
            if (p != NULL && p->mapped > 0) {
                p->mapped--;
                p->mapped_at = 0;
                p->adopted_at = 0;
                vs_vmm_settle(p); /* the engine gave its bytes back */
            }
            pthread_mutex_unlock(&vs_vmm_lock);
            return rc;
        }
    }
    /* Otherwise the handles live on: their bytes must be in place. */
    CUresult rc = vs_vmm_hand_back_range(start, size, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = VS_CALL(cuMemUnmap, (ptr, size));
    if (rc == CUDA_SUCCESS)
        vs_registry_remove_range(start, size, VS_ALLOC_VMM, vs_vmm_unmapped, NULL);
    return rc;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    vs_driver_ready();
    if (!vs_offload_enabled())
        return VS_CALL(cuMemSetAccess, (ptr, size, desc, count));
    /* The driver changes what is mapped: adopted mappings are mapped again
     * first, and adopted again with their new grants after. */
    CUresult rc = vs_vmm_hand_back_range((uintptr_t)ptr, size, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = VS_CALL(cuMemSetAccess, (ptr, size, desc, count));
    if (rc == CUDA_SUCCESS && desc != NULL && count > 0)
        vs_vmm_adopt_range((uintptr_t)ptr, size, desc, count);
    return rc;
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    vs_driver_ready();
    if (flags != NULL && vs_offload_grants((uintptr_t)ptr, location, flags))
        return CUDA_SUCCESS;
    return VS_CALL(cuMemGetAccess, (flags, location, ptr));
}

/* The program asks for the physical handle behind an address: for its own
 * mapping, the handle it was given, whatever the mapping's residency.
 * Evictable allocations are `cuMemAlloc` memory to the program (the shim's
 * own VMM mapping behind it is an implementation detail, and changes at
 * every eviction): the real driver refuses `cuMemAlloc` memory, and so
 * does the shim, whether the allocation is resident or not. */
CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    vs_alloc_info_t info;
    vs_offload_range_t range;

    vs_driver_ready();
    if (handle != NULL && vs_registry_find((uintptr_t)addr, &info) == 0 && info.kind == VS_ALLOC_VMM) {
        pthread_mutex_lock(&vs_vmm_lock);
        vs_vmm_handle_t *p = vs_vmm_find(info.handle);
        CUresult rc = CUDA_ERROR_INVALID_VALUE;
        if (p != NULL) {
            CUmemGenericAllocationHandle again;
            if (p->adopted_at != 0 || (rc = VS_CALL(cuMemRetainAllocationHandle, (&again, addr))) == CUDA_SUCCESS) {
                p->refs++;
                *handle = (CUmemGenericAllocationHandle)p->handle;
                rc = CUDA_SUCCESS;
            }
        }
        pthread_mutex_unlock(&vs_vmm_lock);
        if (p != NULL)
            return rc;
    } else if (handle != NULL && vs_offload_range((uintptr_t)addr, &range)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return VS_CALL(cuMemRetainAllocationHandle, (handle, addr));
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                        CUmemGenericAllocationHandle handle)
{
    vs_driver_ready();
    if (((uint64_t)handle & VS_VMM_HANDLE_TAG_MASK) == VS_VMM_HANDLE_TAG) {
        pthread_mutex_lock(&vs_vmm_lock);
        vs_vmm_handle_t *p = vs_vmm_find((uint64_t)handle);
        bool known = p != NULL && p->virtualised && p->refs > 0;
        if (known && prop != NULL)
            *prop = p->prop;
        pthread_mutex_unlock(&vs_vmm_lock);
        if (known)
            return prop != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    return VS_CALL(cuMemGetAllocationPropertiesFromHandle, (prop, handle));
}

CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType, unsigned long long flags)
{
    CUmemGenericAllocationHandle real;
    vs_driver_ready();
    CUresult rc = vs_vmm_real_fixed((uint64_t)handle, &real);
    return rc != CUDA_SUCCESS ? rc : VS_CALL(cuMemExportToShareableHandle, (shareableHandle, real, handleType, flags));
}

CUresult CUDAAPI cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                    CUmemGenericAllocationHandle memHandle, size_t memOffset, size_t size,
                                    unsigned long long flags)
{
    CUmemGenericAllocationHandle real;
    vs_driver_ready();
    CUresult rc = vs_vmm_real_fixed((uint64_t)memHandle, &real);
    return rc != CUDA_SUCCESS ? rc : VS_CALL(cuMulticastBindMem, (mcHandle, mcOffset, real, memOffset, size, flags));
}

CUresult CUDAAPI cuMulticastBindAddr(CUmemGenericAllocationHandle mcHandle, size_t mcOffset, CUdeviceptr memptr,
                                     size_t size, unsigned long long flags)
{
    vs_driver_ready();
    CUresult rc = vs_vmm_hand_back_range((uintptr_t)memptr, size, true);
    return rc != CUDA_SUCCESS ? rc : VS_CALL(cuMulticastBindAddr, (mcHandle, mcOffset, memptr, size, flags));
}

CUresult CUDAAPI cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
                                               CUmemRangeHandleType handleType, unsigned long long flags)
{
    vs_driver_ready();
    CUresult rc = vs_vmm_hand_back_range((uintptr_t)dptr, size, true);
    return rc != CUDA_SUCCESS ? rc : VS_CALL(cuMemGetHandleForAddressRange, (handle, dptr, size, handleType, flags));
}

/* A sparse or mipmapped array bound to memory of a handle of the shim's:
 * the driver's handle takes its place, in the driver's hands for good. */
CUresult CUDAAPI cuMemMapArrayAsync(CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream)
{
    vs_driver_ready();
    if (mapInfoList == NULL || count == 0)
        return VS_CALL(cuMemMapArrayAsync, (mapInfoList, count, hStream));
    CUarrayMapInfo *list = malloc((size_t)count * sizeof *list);
    if (list == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(list, mapInfoList, (size_t)count * sizeof *list);
    CUresult rc = CUDA_SUCCESS;
    for (unsigned i = 0; i < count && rc == CUDA_SUCCESS; i++)
        if (list[i].memHandleType == CU_MEM_HANDLE_TYPE_GENERIC)
            rc = vs_vmm_real_fixed((uint64_t)list[i].memHandle.memHandle, &list[i].memHandle.memHandle);
    if (rc == CUDA_SUCCESS)
        rc = VS_CALL(cuMemMapArrayAsync, (list, count, hStream));
    free(list);
    return rc;
}

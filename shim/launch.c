/* launch.c: what a kernel launch touches (`vs_launch_gather`).
 *
 * The driver describes a kernel's parameters (12.4+: `cuFuncGetParamInfo`,
 * `cuKernelGetParamInfo`) by offset and size only, not by type, so every
 * 8-byte-aligned word of every parameter is looked up in the registry:
 * pointers inside by-value structs are found as well as plain pointer
 * arguments. The `extra` form hands over one packed buffer, scanned whole.
 *
 * Layouts are cached per function handle. The launch path first checks a
 * one-entry per-thread cache (no lock: most threads launch the same few
 * kernels in a row), then the shared table under a read lock. Module and
 * library unloads may recycle handle addresses, so they bump a generation
 * that invalidates every cache; old layouts are retired, not freed, because
 * another thread may still be reading one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "log.h"
#include "registry.h"
#include "driver.h"
#include "internal.h"
#include "launch.h"
#include "stats.h"

typedef struct vs_layout_s {
    const void *function; /* CUfunction or CUkernel */
    bool known;           /* false: the driver could not describe it */
    /* Every parameter is one word (8 to 15 bytes, the common case of
     * pointer and 64-bit scalar arguments): the launch copies one word per
     * parameter, without the per-parameter loop over offsets. */
    bool one_word_each;
    uint32_t count;
    uint32_t *sizes;      /* bytes of each parameter */
    struct vs_layout_s *retired_next;
    UT_hash_handle hh;
} vs_layout_t;

/* Lock order: `vs_layouts_lock` before the registry lock, never the
 * reverse; neither is held while calling the driver except the real
 * param-info functions, which do not call back. */
static pthread_rwlock_t vs_layouts_lock = PTHREAD_RWLOCK_INITIALIZER;
static vs_layout_t *vs_layouts;
static vs_layout_t *vs_layouts_retired;
static _Atomic uint64_t vs_layouts_generation = 1;

/* CUkernel handles seen from `cuLibraryGetKernel`: a launch that passes one
 * cast to CUfunction (as cudart does) needs `cuKernelGetParamInfo`. */
typedef struct vs_kernel_handle_s {
    const void *kernel;
    UT_hash_handle hh;
} vs_kernel_handle_t;
static vs_kernel_handle_t *vs_kernel_handles;

static __thread struct {
    const void *function;
    uint64_t generation;
    const vs_layout_t *layout;
} vs_layout_tls __attribute__((tls_model("initial-exec")));

static CUresult vs_param_info(const void *handle, bool as_kernel, size_t index, size_t *offset, size_t *size)
{
    if (as_kernel)
        return VS_CALL(cuKernelGetParamInfo, ((CUkernel)(uintptr_t)handle, index, offset, size));
    return VS_CALL(cuFuncGetParamInfo, ((CUfunction)(uintptr_t)handle, index, offset, size));
}

/* Asks the driver for the sizes; parameters are counted by querying until
 * CUDA_ERROR_INVALID_VALUE (13.0 has no count call). */
static int vs_layout_query(const void *handle, bool as_kernel, uint32_t *count_out, uint32_t **sizes_out)
{
    uint32_t count = 0, capacity = 0;
    uint32_t *sizes = NULL;

    for (size_t i = 0;; i++) {
        size_t offset = 0, size = 0;
        CUresult rc = vs_param_info(handle, as_kernel, i, &offset, &size);
        if (rc == CUDA_ERROR_INVALID_VALUE)
            break;
        if (rc != CUDA_SUCCESS) {
            free(sizes);
            return -EINVAL;
        }
        if (count == capacity) {
            capacity = capacity ? capacity * 2 : 8;
            uint32_t *grown = realloc(sizes, capacity * sizeof *grown);
            if (grown == NULL) {
                free(sizes);
                return -ENOMEM;
            }
            sizes = grown;
        }
        sizes[count++] = (uint32_t)size;
    }
    *count_out = count;
    *sizes_out = sizes;
    return 0;
}

static vs_layout_t *vs_layout_build(const void *handle)
{
    vs_layout_t *layout = calloc(1, sizeof *layout);
    vs_kernel_handle_t *known_kernel;

    if (layout == NULL)
        return NULL;
    layout->function = handle;
    if (!vs_driver_has_param_info())
        return layout;
    pthread_rwlock_rdlock(&vs_layouts_lock);
    HASH_FIND_PTR(vs_kernel_handles, &handle, known_kernel);
    pthread_rwlock_unlock(&vs_layouts_lock);
    bool as_kernel = known_kernel != NULL;
    /* A handle not seen from `cuLibraryGetKernel` is most likely a
     * CUfunction; if the driver says otherwise, try it as a CUkernel. */
    if (vs_layout_query(handle, as_kernel, &layout->count, &layout->sizes) == 0
        || vs_layout_query(handle, !as_kernel, &layout->count, &layout->sizes) == 0) {
        layout->known = true;
        layout->one_word_each = true;
        for (uint32_t i = 0; i < layout->count; i++)
            layout->one_word_each &= layout->sizes[i] / 8 == 1;
    } else {
        vs_log(VS_LOG_WARN, "the driver cannot describe the parameters of function %p: its launches are not scanned",
               handle);
    }
    return layout;
}

/* The layout of `f` from the shared table, building it on first use, and
 * remembered in the thread's one-entry cache. */
static const vs_layout_t *vs_layout_lookup(const void *f, uint64_t generation)
{
    vs_layout_t *layout;

    pthread_rwlock_rdlock(&vs_layouts_lock);
    HASH_FIND_PTR(vs_layouts, &f, layout);
    pthread_rwlock_unlock(&vs_layouts_lock);
    if (layout == NULL) {
        vs_layout_t *built = vs_layout_build(f);
        if (built == NULL)
            return NULL;
        pthread_rwlock_wrlock(&vs_layouts_lock);
        HASH_FIND_PTR(vs_layouts, &f, layout);
        if (layout == NULL) {
            HASH_ADD_PTR(vs_layouts, function, built);
            /* With HASH_NONFATAL_OOM an add that ran out of memory leaves
             * `hh.tbl` NULL: use the layout once, uncached. */
            layout = built;
            built = NULL;
        }
        pthread_rwlock_unlock(&vs_layouts_lock);
        if (built != NULL) {
            free(built->sizes);
            free(built);
        }
    }
    vs_layout_tls.function = f;
    vs_layout_tls.generation = generation;
    vs_layout_tls.layout = layout;
    return layout;
}

/* The cached layout of `f`: the thread's last one when it is still valid
 * (inlined into the launch path), otherwise the shared table's. */
static inline const vs_layout_t *vs_layout_get(const void *f)
{
    uint64_t generation = atomic_load_explicit(&vs_layouts_generation, memory_order_acquire);

    if (vs_layout_tls.function == f && vs_layout_tls.generation == generation)
        return vs_layout_tls.layout;
    return vs_layout_lookup(f, generation);
}

void vs_launch_remember_kernel(CUkernel kernel)
{
    vs_kernel_handle_t *entry;
    const void *key = kernel;

    pthread_rwlock_wrlock(&vs_layouts_lock);
    HASH_FIND_PTR(vs_kernel_handles, &key, entry);
    if (entry == NULL) {
        entry = calloc(1, sizeof *entry);
        if (entry != NULL) {
            entry->kernel = key;
            HASH_ADD_PTR(vs_kernel_handles, kernel, entry);
        }
    }
    pthread_rwlock_unlock(&vs_layouts_lock);
}

void vs_launch_forget_layouts(void)
{
    vs_layout_t *layout, *tmp;
    vs_kernel_handle_t *k, *ktmp;

    pthread_rwlock_wrlock(&vs_layouts_lock);
    HASH_ITER(hh, vs_layouts, layout, tmp) {
        HASH_DEL(vs_layouts, layout);
        layout->retired_next = vs_layouts_retired;
        vs_layouts_retired = layout;
    }
    HASH_ITER(hh, vs_kernel_handles, k, ktmp) {
        HASH_DEL(vs_kernel_handles, k);
        free(k);
    }
    atomic_fetch_add_explicit(&vs_layouts_generation, 1, memory_order_acq_rel);
    pthread_rwlock_unlock(&vs_layouts_lock);
}

/* Finds the packed buffer of the `extra` form. */
static bool vs_extra_buffer(void **extra, const unsigned char **buffer, size_t *size)
{
    const unsigned char *buf = NULL;
    size_t len = 0;
    bool have_size = false;

    /* A well-formed list is a few pairs; the bound stops a malformed one
     * from being read on forever. */
    for (size_t i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
            buf = extra[i + 1];
        } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != NULL) {
            memcpy(&len, extra[i + 1], sizeof len);
            have_size = true;
        }
    }
    if (buf == NULL || !have_size)
        return false;
    *buffer = buf;
    *size = len;
    return true;
}

/* The scan itself, shared by launches (stamp) and graphs (collect); written
 * once as a macro so that each user gets its word action inlined. */
#define VS_SCAN_WORDS(layout, kernel_params, extra, WORD_ACTION)                                   \
    do {                                                                                           \
        if ((kernel_params) != NULL && (layout)->known) {                                          \
            for (uint32_t i_ = 0; i_ < (layout)->count; i_++) {                                    \
                const unsigned char *p_ = (kernel_params)[i_];                                     \
                if (p_ == NULL)                                                                    \
                    continue;                                                                      \
                for (uint32_t off_ = 0; off_ + 8 <= (layout)->sizes[i_]; off_ += 8) {              \
                    uintptr_t w_;                                                                  \
                    memcpy(&w_, p_ + off_, sizeof w_);                                             \
                    WORD_ACTION(w_);                                                               \
                }                                                                                  \
            }                                                                                      \
        } else if ((extra) != NULL) {                                                              \
            const unsigned char *b_;                                                               \
            size_t n_;                                                                             \
            if (vs_extra_buffer((extra), &b_, &n_)) {                                              \
                for (size_t off_ = 0; off_ + 8 <= n_; off_ += 8) {                                 \
                    uintptr_t w_;                                                                  \
                    memcpy(&w_, b_ + off_, sizeof w_);                                             \
                    WORD_ACTION(w_);                                                               \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Appends one word, moving to the heap when the caller's buffer is full
 * (a word that cannot be stored is dropped: the scan sees less, never
 * something wrong). */
void vs_words_add(vs_words_t *w, uintptr_t word)
{
    if (w->count == w->capacity) {
        size_t capacity = w->capacity * 2;
        uintptr_t *grown = malloc(capacity * sizeof *grown);
        if (grown == NULL)
            return;
        memcpy(grown, w->words, w->count * sizeof *grown);
        free(w->heap);
        w->heap = w->words = grown;
        w->capacity = capacity;
    }
    w->words[w->count++] = word;
}

void vs_range_visit(uintptr_t addr, uint64_t bytes, void (*visit)(uintptr_t word, void *arg), void *arg)
{
    if (addr == 0)
        return;
    visit(addr, arg);
    if (bytes <= 1)
        return;
    uintptr_t last = addr + bytes - 1;
    if (last < addr)
        last = UINTPTR_MAX; /* a range past the end of the address space */
    for (uintptr_t p = addr + VS_EVICT_MIN_BYTES; p < last && p > addr; p += VS_EVICT_MIN_BYTES)
        visit(p, arg);
    visit(last, arg);
}

static void vs_words_visit(uintptr_t word, void *arg)
{
    vs_words_add(arg, word);
}

void vs_words_add_range(vs_words_t *w, uintptr_t addr, uint64_t bytes)
{
    vs_range_visit(addr, bytes, vs_words_visit, w);
}

uint64_t vs_strided_extent(uint64_t width, uint64_t height, uint64_t depth, uint64_t pitch, uint64_t rows)
{
    if (width == 0 || height == 0 || depth == 0)
        return 0;
    if (height == 1 && depth == 1)
        return width;
    return ((depth - 1) * rows + (height - 1)) * pitch + width;
}

void vs_copy3d_visit(const CUDA_MEMCPY3D *p, void (*visit)(uintptr_t word, void *arg), void *arg)
{
    if (p == NULL)
        return;
    uint64_t depth = p->Depth ? p->Depth : 1;
    if (p->dstMemoryType == CU_MEMORYTYPE_DEVICE || p->dstMemoryType == CU_MEMORYTYPE_UNIFIED)
        vs_range_visit((uintptr_t)p->dstDevice + (p->dstZ * p->dstHeight + p->dstY) * p->dstPitch + p->dstXInBytes,
                       vs_strided_extent(p->WidthInBytes, p->Height, depth, p->dstPitch, p->dstHeight), visit, arg);
    if (p->srcMemoryType == CU_MEMORYTYPE_DEVICE || p->srcMemoryType == CU_MEMORYTYPE_UNIFIED)
        vs_range_visit((uintptr_t)p->srcDevice + (p->srcZ * p->srcHeight + p->srcY) * p->srcPitch + p->srcXInBytes,
                       vs_strided_extent(p->WidthInBytes, p->Height, depth, p->srcPitch, p->srcHeight), visit, arg);
}

void vs_memset_visit(const CUDA_MEMSET_NODE_PARAMS *p, void (*visit)(uintptr_t word, void *arg), void *arg)
{
    if (p == NULL)
        return;
    uint64_t height = p->height ? p->height : 1;
    vs_range_visit((uintptr_t)p->dst,
                   vs_strided_extent((uint64_t)p->width * p->elementSize, height, 1, p->pitch, height), visit, arg);
}

VS_LAUNCH_PATH
void vs_launch_gather(CUfunction f, void **kernel_params, void **extra, vs_words_t *w)
{
    const vs_layout_t *layout;

    VS_COUNT(launches);
    if (kernel_params == NULL && extra == NULL)
        return;
    layout = vs_layout_get(f);
    if (layout == NULL || (kernel_params != NULL && !layout->known)) {
        VS_COUNT(launches_unscanned);
        return;
    }
    /* The common case: one word per parameter, all fitting in the
     * caller's buffer. The same words as the scan below, in the same
     * order, without a capacity check per word. */
    const uint32_t params = layout->count; /* read once: the stores below could alias it */
    if (kernel_params != NULL && layout->one_word_each && w->capacity - w->count >= params) {
        uintptr_t *out = w->words + w->count;
        size_t gathered = 0;
        for (uint32_t i = 0; i < params; i++) {
            const void *p = kernel_params[i];
            if (p != NULL)
                memcpy(&out[gathered++], p, sizeof *out);
        }
        w->count += gathered;
        return;
    }
#define VS_GATHER(word) vs_words_add(w, (word))
    VS_SCAN_WORDS(layout, kernel_params, extra, VS_GATHER);
#undef VS_GATHER
}

bool vs_launch_visit_words(CUfunction f, void **kernel_params, void **extra,
                           void (*visit)(uintptr_t word, void *arg), void *arg)
{
    const vs_layout_t *layout = vs_layout_get(f);

    if (layout == NULL || (kernel_params != NULL && !layout->known))
        return false;
#define VS_VISIT(word) visit((word), arg)
    VS_SCAN_WORDS(layout, kernel_params, extra, VS_VISIT);
#undef VS_VISIT
    return true;
}

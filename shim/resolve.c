/* resolve.c: the two ways a program looks the driver up at run time: the
 * `dlsym` override and the `cuGetProcAddress`/`_v2` wrappers.
 *
 * Both ask the real resolver first, with exactly the caller's arguments,
 * and only then decide: when the answer is a driver function the shim
 * wraps (pointer-equal to what the real `dlsym` gave for that row of
 * hooks.def), the wrapper is handed out instead; anything else passes
 * through untouched. The wrapper is chosen by what the driver actually
 * returned, never by guessing `_v2`/`_v3` suffixes from the requested name
 * and version, so a driver that maps a request to a symbol the shim does
 * not know simply bypasses the shim for that function.
 *
 * `dlsym(RTLD_NEXT, ...)` depends on who calls it. The exported `dlsym` is
 * a few instructions of assembly that jump (not call) to the real one for
 * RTLD_NEXT, so the C library still sees the caller's return address; every
 * other handle goes to `vs_dlsym_c`. NCCL's symbols are answered the same
 * way, with hooks_nccl.c's wrappers (nccl.def). On architectures without that stub
 * RTLD_NEXT is answered relative to the shim (documented limitation).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "hooks.h"
#include "resolve.h"

typedef void (*vs_fn_t)(void);

typedef struct vs_wrapper_row_s {
    const char *name;
    vs_fn_t wrapper;
    size_t real_offset; /* of the slot in `vs_real` */
} vs_wrapper_row_t;

static vs_wrapper_row_t vs_rows[] = {
#define VS_HOOK(family, symbol) {#symbol, (vs_fn_t)&symbol, offsetof(vs_real_t, symbol)},
#include "hooks.def"
#undef VS_HOOK
};
#define VS_ROW_COUNT (sizeof vs_rows / sizeof vs_rows[0])

/* Real function -> wrapper, sorted by the real address. `patched_said`:
 * the line saying another library wrote over the wrapper was written. */
typedef struct vs_real_map_s {
    const void *real;
    void *wrapper;
    const char *name;
    atomic_bool patched_said;
} vs_real_map_t;
static vs_real_map_t vs_real_map[VS_ROW_COUNT];
static size_t vs_real_map_count;

static int vs_row_compare(const void *a, const void *b)
{
    return strcmp(((const vs_wrapper_row_t *)a)->name, ((const vs_wrapper_row_t *)b)->name);
}

static int vs_map_compare(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const vs_real_map_t *)a)->real, y = (uintptr_t)((const vs_real_map_t *)b)->real;
    return x < y ? -1 : x > y;
}

static pthread_once_t vs_rows_once = PTHREAD_ONCE_INIT;

static void vs_rows_sort(void)
{
    qsort(vs_rows, VS_ROW_COUNT, sizeof vs_rows[0], vs_row_compare);
}

static const vs_wrapper_row_t *vs_row_by_name(const char *name)
{
    vs_wrapper_row_t key = {.name = name};
    pthread_once(&vs_rows_once, vs_rows_sort);
    return bsearch(&key, vs_rows, VS_ROW_COUNT, sizeof vs_rows[0], vs_row_compare);
}

static void *vs_row_real(const vs_wrapper_row_t *row)
{
    void *real;
    memcpy(&real, (const char *)&vs_real + row->real_offset, sizeof real);
    return real;
}

/* Builds the real-to-wrapper table, once `vs_real` is filled. */
static pthread_once_t vs_real_map_once = PTHREAD_ONCE_INIT;

static void vs_resolve_build_map(void)
{
    size_t n = 0;
    for (size_t i = 0; i < VS_ROW_COUNT; i++) {
        void *real = vs_row_real(&vs_rows[i]);
        if (real == NULL)
            continue;
        vs_real_map[n].real = real;
        /* ISO C has no cast between function and object pointers; the
         * platforms dlsym exists on store both the same way. */
        memcpy(&vs_real_map[n].wrapper, &vs_rows[i].wrapper, sizeof vs_real_map[n].wrapper);
        vs_real_map[n].name = vs_rows[i].name;
        n++;
    }
    qsort(vs_real_map, n, sizeof vs_real_map[0], vs_map_compare);
    vs_real_map_count = n;
}

/* ---- Wrappers another library writes over --------------------------------
 *
 * A library that changes what an allocator does (ComfyUI's) may resolve
 * `cuMemAlloc_v2` through `cuGetProcAddress`, get the shim's wrapper, and
 * write a jump to its own function over the wrapper's first bytes. Its
 * function then calls on either through a trampoline (the overwritten
 * instructions copied elsewhere, then a jump back behind them) or through
 * `cuGetProcAddress` again. Each wrapper starts with a pad of no-ops
 * (hooks.h, VS_PATCHABLE), so both keep working: copied no-ops relocate
 * anywhere, and a look-up that meets a wrapper whose pad was written over
 * answers the entry behind the pad, whose body is whole, instead of the
 * jump back into the library's own function. That is said once per
 * wrapper, naming the library the jump leads to. */

#ifdef VS_ENTRY_PAD
#if defined(__x86_64__) && defined(__CET__)
#define VS_ENTRY_LEAD 4 /* `endbr64`, before the pad */
#else
#define VS_ENTRY_LEAD 0
#endif

/* Laid out as the wrappers are and never patched: whether this compiler
 * gave the pad (checked once, before the first answer that relies on it). */
__attribute__((visibility("hidden"), noinline)) VS_PATCHABLE int vs_resolve_probe(int x);
VS_PATCHABLE int vs_resolve_probe(int x)
{
    return x + 1;
}

VS_NO_SANITIZE static bool vs_entry_pristine(const void *function)
{
    const unsigned char *entry = function;
#if VS_ENTRY_LEAD
    static const unsigned char endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
    for (int i = 0; i < 4; i++)
        if (entry[i] != endbr64[i])
            return false;
#endif
    entry += VS_ENTRY_LEAD;
#if defined(__x86_64__)
    for (int i = 0; i < VS_ENTRY_PAD; i++)
        if (entry[i] != 0x90)
            return false;
#else
    for (int i = 0; i < VS_ENTRY_PAD; i += 4) {
        uint32_t insn = (uint32_t)entry[i] | (uint32_t)entry[i + 1] << 8 | (uint32_t)entry[i + 2] << 16
                        | (uint32_t)entry[i + 3] << 24;
        if (insn != 0xd503201fu) /* nop */
            return false;
    }
#endif
    return true;
}

static bool vs_entry_layout_ok;
static pthread_once_t vs_entry_layout_once = PTHREAD_ONCE_INIT;

static void vs_entry_layout_check(void)
{
    int (*probe)(int) = vs_resolve_probe;
    void *entry;
    memcpy(&entry, &probe, sizeof entry);
    vs_entry_layout_ok = vs_entry_pristine(entry);
}

/* Where the jump written at `function` leads, for the common forms
 * (x86-64: `jmp rel32`, `jmp [rip+0]` with the address after it,
 * `movabs rax/r11, imm64; jmp reg`); NULL when not recognised. */
/* The little-endian word of `bytes` bytes at `p`, read byte by byte: no
 * `memcpy`, which a sanitizer would check against shadow that text lacks. */
VS_NO_SANITIZE static uint64_t vs_entry_word(const unsigned char *p, int bytes)
{
    uint64_t word = 0;
    for (int i = bytes - 1; i >= 0; i--)
        word = word << 8 | p[i];
    return word;
}

VS_NO_SANITIZE static const void *vs_entry_jump_target(const void *function)
{
#if defined(__x86_64__)
    const unsigned char *p = function;
    for (int lead = 0; lead < 2; lead++, p += 4) {
        if (p[0] == 0xe9)
            return p + 5 + (int32_t)(uint32_t)vs_entry_word(p + 1, 4);
        if (p[0] == 0xff && p[1] == 0x25 && p[2] == 0 && p[3] == 0 && p[4] == 0 && p[5] == 0)
            return (const void *)(uintptr_t)vs_entry_word(p + 6, 8);
        if ((p[0] == 0x48 && p[1] == 0xb8 && p[10] == 0xff && p[11] == 0xe0)
            || (p[0] == 0x49 && p[1] == 0xbb && p[10] == 0x41 && p[11] == 0xff && p[12] == 0xe3))
            return (const void *)(uintptr_t)vs_entry_word(p + 2, 8);
        if (!(p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa))
            break; /* a jump may follow an `endbr64` left in place */
    }
#else
    (void)function;
#endif
    return NULL;
}

/* Says once that `hit`'s wrapper was written over. */
static void vs_entry_say_patched(vs_real_map_t *hit)
{
    if (atomic_exchange(&hit->patched_said, true))
        return;
    const void *target = vs_entry_jump_target(hit->wrapper);
    Dl_info info;
    const char *library = target != NULL && dladdr(target, &info) != 0 && info.dli_fname != NULL
                              ? info.dli_fname
                              : "a library";
    vs_log(VS_LOG_WARN,
           "%s: %s wrote a jump over the start of the shim's wrapper; calls through it reach that library first, "
           "and look-ups of %s now answer the wrapper's body past the overwritten bytes",
           hit->name, library, hit->name);
}

/* The entry to hand out for `hit`: the wrapper, or its body when another
 * library wrote over the wrapper's start. */
static void *vs_entry_usable(vs_real_map_t *hit)
{
    pthread_once(&vs_entry_layout_once, vs_entry_layout_check);
    if (!vs_entry_layout_ok || vs_entry_pristine(hit->wrapper))
        return hit->wrapper;
    vs_entry_say_patched(hit);
    return (char *)hit->wrapper + VS_ENTRY_LEAD + VS_ENTRY_PAD;
}

void vs_resolve_report_patched(void)
{
    if (vs_driver_handle() == NULL)
        return;
    pthread_once(&vs_real_map_once, vs_resolve_build_map);
    for (size_t i = 0; i < vs_real_map_count; i++)
        if (!vs_entry_pristine(vs_real_map[i].wrapper))
            vs_entry_say_patched(&vs_real_map[i]);
}
#else
static void *vs_entry_usable(vs_real_map_t *hit)
{
    return hit->wrapper;
}

void vs_resolve_report_patched(void)
{
}
#endif

void *vs_resolve_wrapper_for_real(const void *real_function)
{
    vs_real_map_t key = {.real = real_function};
    vs_real_map_t *hit;

    if (real_function == NULL || vs_driver_ready() != 0)
        return NULL;
    pthread_once(&vs_real_map_once, vs_resolve_build_map);
    hit = bsearch(&key, vs_real_map, vs_real_map_count, sizeof vs_real_map[0], vs_map_compare);
    return hit != NULL ? vs_entry_usable(hit) : NULL;
}

/* Every handle but RTLD_NEXT (and RTLD_NEXT where there is no trampoline). */
__attribute__((visibility("hidden"))) void *vs_dlsym_c(void *handle, const char *name);
VS_NO_SANITIZE void *vs_dlsym_c(void *handle, const char *name)
{
    void *result = vs_driver_real_dlsym(handle, name);

    /* Most look-ups in a process are not for the driver: leave them after
     * two character compares, without loading anything. */
    if (result == NULL || name == NULL)
        return result;
    if (name[0] == 'n' && strncmp(name, "nccl", 4) == 0)
        return vs_nccl_dlsym(handle, name, result);
    if (name[0] != 'c' || name[1] != 'u')
        return result;
    if (vs_row_by_name(name) == NULL)
        return result;
    void *wrapper = vs_resolve_wrapper_for_real(result);
    if (wrapper != NULL)
        vs_log(VS_LOG_DEBUG, "dlsym(%p, \"%s\") -> wrapper", handle, name);
    return wrapper != NULL ? wrapper : result;
}

#if defined(__x86_64__)
/* dlsym(handle, name): RTLD_NEXT is ((void *)-1). The real `dlsym` reads
 * its caller from the return address on the stack, which a `jmp` leaves
 * untouched. When the pointer is not known yet (a library constructor
 * running before the shim's) it is fetched first, preserving the argument
 * registers and the stack alignment. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    cmpq $-1, %rdi\n"
        "    jne vs_dlsym_c\n"
        "    movq vs_real_dlsym_ptr(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    jz 1f\n"
        "    jmp *%rax\n"
        "1:  pushq %rdi\n"
        "    pushq %rsi\n"
        "    subq $8, %rsp\n"
        "    call vs_driver_init_real_dlsym\n"
        "    addq $8, %rsp\n"
        "    popq %rsi\n"
        "    popq %rdi\n"
        "    testq %rax, %rax\n"
        "    jz 2f\n"
        "    jmp *%rax\n"
        "2:  ret\n"
        ".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        "dlsym:\n"
        "    cmn x0, #1\n"
        "    b.ne vs_dlsym_c\n"
        "    adrp x16, vs_real_dlsym_ptr\n"
        "    ldr x16, [x16, :lo12:vs_real_dlsym_ptr]\n"
        "    cbz x16, 1f\n"
        "    br x16\n"
        "1:  stp x0, x1, [sp, #-32]!\n"
        "    str x30, [sp, #16]\n"
        "    bl vs_driver_init_real_dlsym\n"
        "    mov x16, x0\n"
        "    ldr x30, [sp, #16]\n"
        "    ldp x0, x1, [sp], #32\n"
        "    cbz x16, 2f\n"
        "    br x16\n"
        "2:  mov x0, #0\n"
        "    ret\n"
        ".size dlsym, .-dlsym\n");
#else
VS_EXPORT void *dlsym(void *handle, const char *name)
{
    return vs_dlsym_c(handle, name);
}
#endif

/* The result of a successful look-up: the wrapper if the driver returned a
 * function the shim wraps. */
static void vs_procaddr_substitute(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    void *wrapper;

    if (pfn == NULL || *pfn == NULL)
        return;
    wrapper = vs_resolve_wrapper_for_real(*pfn);
    if (wrapper != NULL) {
        vs_log(VS_LOG_DEBUG, "cuGetProcAddress(\"%s\", %d, %llu) -> wrapper", symbol ? symbol : "(null)", version,
               (unsigned long long)flags);
        *pfn = wrapper;
    }
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *symbolStatus)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGetProcAddress_v2, (symbol, pfn, cudaVersion, flags, symbolStatus));
    if (rc == CUDA_SUCCESS)
        vs_procaddr_substitute(symbol, pfn, cudaVersion, flags);
    return rc;
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGetProcAddress, (symbol, pfn, cudaVersion, flags));
    if (rc == CUDA_SUCCESS)
        vs_procaddr_substitute(symbol, pfn, cudaVersion, flags);
    return rc;
}

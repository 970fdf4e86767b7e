/* patcher.c: libvs_patcher.so, a library that takes over `cuMemAlloc` the
 * way allocator helpers do (ComfyUI's): it resolves the function through
 * `cuGetProcAddress`, makes its page writable, and writes a jump to its
 * own function over the function's first bytes. Its function counts the
 * call and goes on to the original, either
 *
 *   PATCHER_TRAMPOLINE: through a trampoline: the whole instructions the
 *     jump overwrote, copied to executable memory of its own (it knows only
 *     the position-independent prologue forms below and refuses anything
 *     else), then a jump back behind them; or
 *   PATCHER_RESOLVE: through `cuGetProcAddress` again, at every call.
 *
 * x86-64 only (the jump is `movabs r11, imm64; jmp r11`, 13 bytes).
 */
#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "patcher.h"

#define PATCHER_JUMP_BYTES 13

/* For the functions that read or write code: sanitizers keep no shadow
 * for a library's text, so their accesses stay uninstrumented, byte by
 * byte (no `memcpy`, which they intercept). */
#define PATCHER_RAW __attribute__((no_sanitize("address", "thread", "undefined"), noinline))

PATCHER_RAW static void patcher_copy(volatile unsigned char *to, const volatile unsigned char *from, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++)
        to[i] = from[i];
}

static patcher_mode_t patcher_mode;
static void *patcher_trampoline;
static atomic_ulong patcher_calls;

typedef CUresult (*patcher_alloc_fn)(CUdeviceptr *, size_t);

static CUresult patcher_hook(CUdeviceptr *dptr, size_t bytes)
{
    patcher_alloc_fn original = NULL;
    atomic_fetch_add(&patcher_calls, 1);
    if (patcher_mode == PATCHER_TRAMPOLINE) {
        memcpy(&original, &patcher_trampoline, sizeof original);
    } else {
        void *fn = NULL;
        CUdriverProcAddressQueryResult status;
        if (cuGetProcAddress("cuMemAlloc", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS
            || fn == NULL)
            return CUDA_ERROR_NOT_FOUND;
        memcpy(&original, &fn, sizeof original);
    }
    return original(dptr, bytes);
}

/* The length of the instruction at `p` among the few prologue forms this
 * patcher relocates (all position-independent); 0 for anything else. */
PATCHER_RAW static size_t patcher_insn_length(const volatile unsigned char *p)
{
    if (p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa)
        return 4; /* endbr64 */
    if (p[0] == 0x90 || (p[0] >= 0x50 && p[0] <= 0x57))
        return 1; /* nop, push reg */
    if (p[0] == 0x41 && p[1] >= 0x50 && p[1] <= 0x57)
        return 2; /* push r8..r15 */
    return 0;
}

/* movabs r11, target; jmp r11 */
static void patcher_write_jump(unsigned char *at, const void *target)
{
    uint64_t address = (uint64_t)(uintptr_t)target;
    unsigned char jump[PATCHER_JUMP_BYTES] = {0x49, 0xbb};
    memcpy(jump + 2, &address, sizeof address);
    jump[10] = 0x41;
    jump[11] = 0xff;
    jump[12] = 0xe3;
    patcher_copy(at, jump, sizeof jump);
}

static int patcher_protect(void *at, size_t bytes, int prot)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t first = (uintptr_t)at & ~(uintptr_t)(page - 1);
    uintptr_t end = ((uintptr_t)at + bytes + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
    return mprotect((void *)first, end - first, prot);
}

int patcher_install(patcher_mode_t mode)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    patcher_mode = mode;
    if (cuGetProcAddress("cuMemAlloc", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS
        || fn == NULL) {
        fprintf(stderr, "patcher: cuGetProcAddress(cuMemAlloc) failed\n");
        return -1;
    }
    unsigned char *entry = fn;
    if (mode == PATCHER_TRAMPOLINE) {
        size_t copied = 0;
        while (copied < PATCHER_JUMP_BYTES) {
            size_t length = patcher_insn_length(entry + copied);
            if (length == 0) {
                fprintf(stderr, "patcher: cannot relocate the instruction at %p+%zu (byte 0x%02x)\n", fn, copied,
                        entry[copied]);
                return -1;
            }
            copied += length;
        }
        unsigned char *trampoline = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (trampoline == MAP_FAILED)
            return -1;
        patcher_copy(trampoline, entry, copied);
        patcher_write_jump(trampoline + copied, entry + copied);
        if (mprotect(trampoline, 4096, PROT_READ | PROT_EXEC) != 0)
            return -1;
        patcher_trampoline = trampoline;
    }
    if (patcher_protect(entry, PATCHER_JUMP_BYTES, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
        perror("patcher: mprotect");
        return -1;
    }
    patcher_alloc_fn hook = patcher_hook;
    void *target;
    memcpy(&target, &hook, sizeof target);
    patcher_write_jump(entry, target);
    __builtin___clear_cache((char *)entry, (char *)entry + PATCHER_JUMP_BYTES);
    if (patcher_protect(entry, PATCHER_JUMP_BYTES, PROT_READ | PROT_EXEC) != 0) {
        perror("patcher: mprotect");
        return -1;
    }
    return 0;
}

unsigned long patcher_calls_seen(void)
{
    return atomic_load(&patcher_calls);
}

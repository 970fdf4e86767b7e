/* sim_procaddr.c: the API table and `cuGetProcAddress`.
 *
 * `sim_api_table` is expanded from api_platform.def and api_exec.def; each
 * row's `function` is the address of the exported symbol itself, so a row
 * naming a function that does not exist fails to compile. Main entry points:
 * `cuGetProcAddress_v2` (what libcudart looks up with dlsym) and its 4-argument
 * predecessor `cuGetProcAddress`. Both work before `cuInit`. Tests get the
 * driver's own functions, past any preloaded interposer, from
 * `simcuda_entry_point`.
 */
#include "sim_internal.h"
#include "simcuda.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `__extension__`: ISO C has no function-to-object pointer conversion, but
 * `cuGetProcAddress` hands out `void *` by definition (POSIX guarantees it). */
const sim_api_entry_t sim_api_table[SIM_API_COUNT] = {
#define SIM_API(symbol, request, version, variant, fault_error) \
    [SIM_ID_##symbol] = {#symbol, #request, version, variant, fault_error, __extension__(void *) & symbol},
#include "api_platform.def"
#include "api_exec.def"
#undef SIM_API
};

static bool log_enabled(void)
{
    static int enabled = -1;
    if (enabled < 0) {
        const char *text = getenv("SIMCUDA_LOG_PROCADDR");
        enabled = text != NULL && strcmp(text, "1") == 0;
    }
    return enabled;
}

/* Resolution, as cuda.h documents it: among the rows of `symbol`, the one
 * with the highest introduction version not above `cudaVersion`; with the
 * per-thread flag a SIM_PER_THREAD row of that version is preferred, with
 * any other flags it is never returned. Not-found answers set *pfn to NULL. */
static CUresult proc_address(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    CUdriverProcAddressQueryResult ignored;
    if (status == NULL)
        status = &ignored;
    if (symbol == NULL || pfn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const cuuint64_t known_flags = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if ((flags & ~known_flags) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;

    /* Rows newer than the driver (`SIMCUDA_DRIVER_VERSION`) do not exist
     * for it: a symbol with only such rows is unknown, not "version not
     * sufficient", as for a real driver that predates it. */
    int driver_version = sim_driver_version();
    const sim_api_entry_t *best = NULL;
    bool known = false;
    for (int i = 0; i < SIM_API_COUNT; i++) {
        const sim_api_entry_t *row = &sim_api_table[i];
        if (row->version > driver_version || strcmp(row->request, symbol) != 0)
            continue;
        known = true;
        if (row->version > cudaVersion)
            continue;
        if (row->variant == SIM_PER_THREAD && !per_thread)
            continue;
        if (best == NULL || row->version > best->version ||
            (row->version == best->version && row->variant == SIM_PER_THREAD))
            best = row;
    }
    if (!known) {
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    if (best == NULL) {
        *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return CUDA_ERROR_NOT_FOUND;
    }
    /* A version newer than this driver is a caller built for a later CUDA
     * (cuda.h: CUDA_ERROR_INVALID_VALUE). */
    if (cudaVersion > driver_version)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = best->function;
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

/* `SIMCUDA_LOG_PROCADDR=1` prints every look-up the simulated driver cannot
 * answer: how to find what a new client (a new libcudart) asks for. */
static void log_miss(const char *symbol, int cudaVersion, cuuint64_t flags, CUresult result)
{
    if (log_enabled() && result != CUDA_SUCCESS)
        fprintf(stderr, "simcuda: cuGetProcAddress(\"%s\", %d, %llu) -> %d\n", symbol != NULL ? symbol : "(null)",
                cudaVersion, (unsigned long long)flags, (int)result);
}

SIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *symbolStatus)
{
    CUresult entry = SIM_ENTER(cuGetProcAddress_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
    log_miss(symbol, cudaVersion, flags, result);
    return result;
}

SIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    CUresult entry = SIM_ENTER(cuGetProcAddress, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUresult result = proc_address(symbol, pfn, cudaVersion, flags, NULL);
    log_miss(symbol, cudaVersion, flags, result);
    return result;
}

/* By exported name, not by request: a test that runs under an interposer
 * (the shim) compares a call through it with the same call made directly.
 * `simcuda_*` names are never interposed, so this pointer is the driver's. */
SIM_EXPORT void *simcuda_entry_point(const char *symbol)
{
    if (symbol == NULL)
        return NULL;
    /* The symbol's oldest row is when it appeared: a driver older than
     * that (`SIMCUDA_DRIVER_VERSION`) does not have it. */
    void *function = NULL;
    int introduced = 0;
    for (int i = 0; i < SIM_API_COUNT; i++) {
        if (strcmp(sim_api_table[i].symbol, symbol) == 0 && (function == NULL || sim_api_table[i].version < introduced)) {
            function = sim_api_table[i].function;
            introduced = sim_api_table[i].version;
        }
    }
    return function != NULL && introduced <= sim_driver_version() ? function : NULL;
}

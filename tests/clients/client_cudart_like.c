/* client_cudart_like.c: the workload reaching the driver exactly as
 * libcudart 12/13 does.
 *
 * `dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)`, one `dlsym` of
 * `cuGetProcAddress_v2`, then a look-up of "cuGetProcAddress" itself at
 * version 11030 and at 12000, keeping the pointer returned for 12000 for every
 * further look-up (each with the version cudart 13 asks and, with
 * `--per-thread`, flags 2 for the calls that have per-thread forms). */
#include "client_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    client_driver_t driver = {.entry_path = "cudart-like"};
    cuuint64_t per_thread_flags = CU_GET_PROC_ADDRESS_DEFAULT;
    if (argc > 1 && strcmp(argv[1], "--per-thread") == 0) {
        per_thread_flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        driver.entry_path = "cudart-like-ptds";
        argv[1] = argv[0];
        argc--;
        argv++;
    }

    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (libcuda == NULL) {
        fprintf(stderr, "client[cudart-like]: dlopen(libcuda.so.1): %s\n", dlerror());
        return 1;
    }
    /* ISO C has no cast from `void *` to a function pointer: the bits are
     * copied, as POSIX guarantees they are the same. */
    PFN_cuGetProcAddress_v12000 bootstrap = NULL;
    void *bootstrap_symbol = dlsym(libcuda, "cuGetProcAddress_v2");
    memcpy(&bootstrap, &bootstrap_symbol, sizeof(bootstrap_symbol));
    if (bootstrap == NULL) {
        fprintf(stderr, "client[cudart-like]: dlsym(cuGetProcAddress_v2): %s\n", dlerror());
        return 1;
    }

    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *legacy_self = NULL, *self = NULL;
    if (bootstrap("cuGetProcAddress", &legacy_self, 11030, 0, &status) != CUDA_SUCCESS || legacy_self == NULL ||
        bootstrap("cuGetProcAddress", &self, 12000, 0, &status) != CUDA_SUCCESS || self == NULL) {
        fprintf(stderr, "client[cudart-like]: the self look-up of cuGetProcAddress failed\n");
        return 1;
    }
    PFN_cuGetProcAddress_v12000 resolve = NULL;
    memcpy(&resolve, &self, sizeof(self));

#define CLIENT_DRIVER_RESOLVE(name, version, per_thread, type)                                           \
    do {                                                                                                 \
        void *pfn = NULL;                                                                                \
        cuuint64_t flags = (per_thread) ? per_thread_flags : CU_GET_PROC_ADDRESS_DEFAULT;               \
        int asked = (per_thread) && flags != 0 && (version) < 7000 ? 7000 : (version);                  \
        CUresult found = resolve(#name, &pfn, asked, flags, &status);                                    \
        if (found != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || pfn == NULL) {             \
            fprintf(stderr, "client[cudart-like]: cuGetProcAddress(%s, %d, %llu) failed: %d/%d\n", #name, \
                    asked, (unsigned long long)flags, (int)found, (int)status);                         \
            return 1;                                                                                    \
        }                                                                                                \
        memcpy(&driver.name, &pfn, sizeof(pfn));                                                                       \
    } while (0);
    /* `#name` inside the macro body stringifies the parameter before
     * expansion, so the request names are the unversioned ones cudart asks
     * for ("cuMemAlloc", "cuStreamDestroy"). */
    CLIENT_DRIVER_ENTRIES(CLIENT_DRIVER_RESOLVE)
#undef CLIENT_DRIVER_RESOLVE
    return client_main(&driver, argc, argv);
}

/* client_dlsym.c: the workload through `dlsym` on a `dlopen`ed libcuda.
 *
 * Opens the driver `RTLD_LOCAL`, as loaders such as Triton's and ATen's do,
 * and looks each entry point up by its real exported name (`cuMemAlloc_v2`). */
#include "client_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    client_driver_t driver = {.entry_path = "dlsym"};
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (libcuda == NULL) {
        fprintf(stderr, "client[dlsym]: dlopen(libcuda.so.1): %s\n", dlerror());
        return 1;
    }
    void *symbol = NULL;
    /* ISO C has no cast from `void *` to a function pointer: copy the bits,
     * as POSIX guarantees they are the same. `#name` expands after cuda.h's renaming macros, so it is the exported
     * symbol: "cuMemAlloc_v2", "cuStreamDestroy_v2", ... */
#define CLIENT_STRINGIFY(x) #x
#define CLIENT_SYMBOL(x) CLIENT_STRINGIFY(x)
#define CLIENT_DRIVER_DLSYM(name, version, per_thread, type)                                  \
    symbol = dlsym(libcuda, CLIENT_SYMBOL(name));                                             \
    if (symbol == NULL) {                                                                     \
        fprintf(stderr, "client[dlsym]: dlsym(%s) failed: %s\n", CLIENT_SYMBOL(name), dlerror()); \
        return 1;                                                                             \
    }                                                                                         \
    memcpy(&driver.name, &symbol, sizeof(symbol));
    CLIENT_DRIVER_ENTRIES(CLIENT_DRIVER_DLSYM)
#undef CLIENT_DRIVER_DLSYM
    return client_main(&driver, argc, argv);
}

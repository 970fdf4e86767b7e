/* client_direct.c: the workload through direct calls into a linked libcuda.
 *
 * Built twice: plain, and with `CUDA_API_PER_THREAD_DEFAULT_STREAM`, in which
 * case `cuda.h` turns the calls into their `_ptsz`/`_ptds` symbols exactly as
 * in a user's program compiled that way. */
#include "client_driver.h"

int main(int argc, char **argv)
{
    client_driver_t driver = {
#define CLIENT_DRIVER_DIRECT(name, version, per_thread, type) .name = name,
        CLIENT_DRIVER_ENTRIES(CLIENT_DRIVER_DIRECT)
#undef CLIENT_DRIVER_DIRECT
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
        .entry_path = "direct-ptds",
#else
        .entry_path = "direct",
#endif
    };
    return client_main(&driver, argc, argv);
}

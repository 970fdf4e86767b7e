/* driver.c: the bottom layer: loading the real driver (`vs_driver_ready`).
 *
 * The driver is opened lazily, by whichever entry path comes first (an
 * exported wrapper, the `dlsym` override, `cuGetProcAddress`), because
 * libcudart resolves the whole driver before calling `cuInit` and some
 * programs never touch CUDA. The shim opens `libcuda.so.1` itself with
 * RTLD_LOCAL: `dlsym(RTLD_NEXT)` cannot see a driver the program opened
 * locally. Each real entry point comes from the real `dlsym` on that
 * handle, so a wrapper's own driver calls never reach a wrapper.
 *
 * Lock: `vs_driver.ready_lock`, the first in the order of internal.h,
 * held while the driver loads (once per process).
 */
#include "driver.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "internal.h"
#include "log.h"

vs_real_t vs_real;

typedef void *(*vs_dlsym_fn)(void *, const char *);

/* Read by the `dlsym` trampoline (resolve.c): the C library's `dlsym`. */
__attribute__((visibility("hidden"))) _Atomic(vs_dlsym_fn) vs_real_dlsym_ptr;

#define VS_ON_LOAD_MAX 4

static struct {
    void *handle;
    bool param_info;
    /* 2 once the driver is loaded (or failed to load for good). */
    _Atomic int ready;
    pthread_mutex_t ready_lock;
    void (*on_load[VS_ON_LOAD_MAX])(void);
    int on_load_count;
} vs_driver = {.ready_lock = PTHREAD_MUTEX_INITIALIZER};

/* Set while this thread is loading the driver: the driver's constructors may
 * call `dlsym`, which must not wait for the loading they are part of. */
static __thread int vs_driver_loading;

VS_NO_SANITIZE static vs_dlsym_fn vs_driver_find_real_dlsym(void)
{
    vs_dlsym_fn fn = atomic_load(&vs_real_dlsym_ptr);
    if (fn != NULL)
        return fn;
    /* `dlvsym` is not overridden, so this cannot recurse. glibc 2.34 moved
     * `dlsym` into libc under a new version; older ones only have 2.2.5. */
    void *found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (found == NULL)
        found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    /* ISO C has no cast from an object to a function pointer. */
    memcpy(&fn, &found, sizeof fn);
    atomic_store(&vs_real_dlsym_ptr, fn);
    return fn;
}

/* Called from the trampoline when the pointer is not known yet. */
__attribute__((visibility("hidden"))) vs_dlsym_fn vs_driver_init_real_dlsym(void);
VS_NO_SANITIZE vs_dlsym_fn vs_driver_init_real_dlsym(void)
{
    return vs_driver_find_real_dlsym();
}

VS_NO_SANITIZE void vs_driver_find_dlsym(void)
{
    (void)vs_driver_find_real_dlsym();
}

VS_NO_SANITIZE void *vs_driver_real_dlsym(void *handle, const char *name)
{
    vs_dlsym_fn fn = vs_driver_find_real_dlsym();
    return fn != NULL ? fn(handle, name) : NULL;
}

int vs_driver_device_total(int device, uint64_t *bytes)
{
    CUdevice dev;
    size_t total = 0;

    if (vs_real.cuDeviceGet == NULL || vs_real.cuDeviceTotalMem_v2 == NULL)
        return -ENOSYS;
    if (vs_real.cuDeviceGet(&dev, device) != CUDA_SUCCESS
        || vs_real.cuDeviceTotalMem_v2(&total, dev) != CUDA_SUCCESS)
        return -EIO;
    *bytes = total;
    return 0;
}

int vs_driver_check(const char *path, char *why, size_t why_len)
{
    int saved_errno = errno;
    int rc = 0;
    void *handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL);

    if (handle == NULL) {
        const char *err = dlerror();
        snprintf(why, why_len, "%s", err != NULL ? err : "it cannot be opened");
        why[strcspn(why, "\n")] = '\0';
        rc = -ENOENT;
        goto out;
    }
    void *init = vs_driver_real_dlsym(handle, "cuInit");
    void *resolver = vs_driver_real_dlsym(handle, "cuGetProcAddress_v2");
    /* This library under any name (a symlink or a second path to it is
     * the same object): what it exports is ours. */
    Dl_info mine, theirs;
    void *self = (void *)(uintptr_t)vs_driver_check;
    void *any = resolver != NULL ? resolver : init;
    /* A copy of it under another name: a driver never defines `dlsym`. */
    void *their_dlsym = vs_driver_real_dlsym(handle, "dlsym");
    Dl_info defines;
    bool overrides_dlsym = any != NULL && their_dlsym != NULL && dladdr(any, &theirs) != 0
                           && dladdr(their_dlsym, &defines) != 0 && defines.dli_fbase == theirs.dli_fbase;
    if (overrides_dlsym
        || (any != NULL && dladdr(self, &mine) != 0 && dladdr(any, &theirs) != 0 && mine.dli_fbase == theirs.dli_fbase)) {
        snprintf(why, why_len, "it is libvramshim.so itself, not the driver");
        rc = -ELOOP;
        goto out;
    }
    if (init == NULL || resolver == NULL) {
        snprintf(why, why_len, "it does not export %s: not a CUDA driver",
                 init == NULL ? "cuInit" : "cuGetProcAddress_v2");
        rc = -ENOEXEC;
        goto out;
    }
out:
    errno = saved_errno;
    return rc;
}

int vs_driver_probe_param_info(const char *path, int *version, char *why, size_t why_len)
{
    int saved_errno = errno;
    int rc = 0;
    *version = 0;
    why[0] = '\0';
    void *handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    if (handle == NULL) {
        (void)dlerror(); /* no driver: this process has no CUDA to offload */
        goto out;
    }
    void *get_version = vs_driver_real_dlsym(handle, "cuDriverGetVersion");
    void *param_info = vs_driver_real_dlsym(handle, "cuFuncGetParamInfo");
    __typeof__(cuDriverGetVersion) *get_version_fn;
    memcpy(&get_version_fn, &get_version, sizeof get_version);
    if (get_version_fn == NULL || get_version_fn(version) != CUDA_SUCCESS)
        *version = 0;
    if (*version == 0) {
        snprintf(why, why_len, "does not report its version");
        rc = -ENOTSUP;
    } else if (*version < VS_DRIVER_PARAM_INFO_VERSION) {
        snprintf(why, why_len, "is %d.%d", *version / 1000, *version % 1000 / 10);
        rc = -ENOTSUP;
    } else if (param_info == NULL) {
        snprintf(why, why_len, "is %d.%d but does not export cuFuncGetParamInfo", *version / 1000,
                 *version % 1000 / 10);
        rc = -ENOTSUP;
    }
out:
    errno = saved_errno;
    return rc;
}

/* Loads the driver; ready_lock held. Returns the callbacks to run once the
 * lock is let go (how many are in `run`). */
static int vs_driver_load(void (*run[VS_ON_LOAD_MAX])(void))
{
    const vs_config_t *cfg = vs_config_get();
    const char *path = cfg->driver[0] != '\0' ? cfg->driver : "libcuda.so.1";

    vs_driver.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (vs_driver.handle == NULL) {
        vs_log(VS_LOG_WARN, "cannot open the CUDA driver %s: %s", path, dlerror());
        return 0;
    }
#define VS_HOOK(family, symbol)                                                                    \
    do {                                                                                           \
        void *found = vs_driver_real_dlsym(vs_driver.handle, #symbol);                             \
        memcpy(&vs_real.symbol, &found, sizeof found);                                             \
    } while (0);
#define VS_DRIVER(symbol) VS_HOOK(driver, symbol)
#include "hooks.def"
#include "driver.def"
#undef VS_DRIVER
#undef VS_HOOK

    int version = 0;
    if (vs_real.cuDriverGetVersion != NULL)
        vs_real.cuDriverGetVersion(&version);
    vs_driver.param_info = version >= VS_DRIVER_PARAM_INFO_VERSION && vs_real.cuFuncGetParamInfo != NULL;
    if (!vs_driver.param_info)
        vs_log(VS_LOG_WARN,
               "the CUDA driver (%s) reports version %d.%d; kernel parameter layouts need 12.4 or "
               "newer (cuFuncGetParamInfo): launches are counted but their pointer arguments are "
               "not seen, only the `extra` buffer form is scanned",
               path, version / 1000, version % 1000 / 10);
    vs_log(VS_LOG_DEBUG, "driver %s loaded, version %d", path, version);
    memcpy(run, vs_driver.on_load, sizeof vs_driver.on_load);
    return vs_driver.on_load_count;
}

VS_LAUNCH_PATH
int vs_driver_ready(void)
{
    if (atomic_load_explicit(&vs_driver.ready, memory_order_acquire) == 2)
        return vs_driver.handle != NULL ? 0 : -ENOENT;
    if (vs_driver_loading)
        return -EDEADLK;
    int saved_errno = errno;
    void (*run[VS_ON_LOAD_MAX])(void);
    int count = 0;
    pthread_mutex_lock(&vs_driver.ready_lock);
    if (atomic_load_explicit(&vs_driver.ready, memory_order_relaxed) != 2) {
        vs_driver_loading = 1;
        count = vs_driver_load(run);
        /* The callbacks run while this thread still counts as loading:
         * as before the split, a driver entry they reach from this thread
         * gets -EDEADLK rather than waiting for itself. */
        for (int i = 0; i < count; i++)
            run[i]();
        vs_driver_loading = 0;
        atomic_store_explicit(&vs_driver.ready, 2, memory_order_release);
    }
    pthread_mutex_unlock(&vs_driver.ready_lock);
    errno = saved_errno;
    return vs_driver.handle != NULL ? 0 : -ENOENT;
}

void vs_driver_on_load(void (*fn)(void))
{
    bool now = false;
    pthread_mutex_lock(&vs_driver.ready_lock);
    if (atomic_load_explicit(&vs_driver.ready, memory_order_relaxed) == 2)
        now = vs_driver.handle != NULL;
    else if (vs_driver.on_load_count < VS_ON_LOAD_MAX)
        vs_driver.on_load[vs_driver.on_load_count++] = fn;
    pthread_mutex_unlock(&vs_driver.ready_lock);
    if (now)
        fn();
}

void *vs_driver_handle(void)
{
    return atomic_load_explicit(&vs_driver.ready, memory_order_acquire) == 2 ? vs_driver.handle : NULL;
}

bool vs_driver_has_param_info(void)
{
    return vs_driver.param_info;
}

int vs_driver_current_device(void)
{
    CUdevice dev;

    if (vs_real.cuCtxGetDevice == NULL || vs_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return -1;
    return (int)dev;
}

/* preload_resolve.c: how the shim answers the run-time look-ups, checked
 * under LD_PRELOAD=libvramshim.so on the simulated driver. The program does
 * not link libcuda: it opens it with RTLD_LOCAL like libcudart and asks
 * `dlsym` and `cuGetProcAddress`, before `cuInit`.
 *
 * Which object a pointer belongs to is read with `dladdr`: a wrapper lies in
 * libvramshim.so, a passed-through function in libcuda.so.1.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdbool.h>

static void *driver;
static PFN_cuGetProcAddress_v12000 get_proc;

static const char *object_of(const void *p)
{
    Dl_info info;
    if (p == NULL || dladdr(p, &info) == 0 || info.dli_fname == NULL)
        return "";
    return info.dli_fname;
}

static const char *symbol_of(const void *p)
{
    Dl_info info;
    if (p == NULL || dladdr(p, &info) == 0 || info.dli_sname == NULL)
        return "";
    return info.dli_sname;
}

static bool in_shim(const void *p)
{
    return strstr(object_of(p), "libvramshim") != NULL;
}

static bool in_driver(const void *p)
{
    return strstr(object_of(p), "libcuda") != NULL;
}

static int setup(void **state)
{
    (void)state;
    driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    assert_non_null(driver);
    void *found = dlsym(driver, "cuGetProcAddress_v2");
    assert_non_null(found);
    memcpy(&get_proc, &found, sizeof found);
    return 0;
}

static void *proc(const char *name, int version, cuuint64_t flags)
{
    void *pfn = NULL;
    CUdriverProcAddressQueryResult status;
    assert_int_equal(get_proc(name, &pfn, version, flags, &status), CUDA_SUCCESS);
    assert_int_equal(status, CU_GET_PROC_ADDRESS_SUCCESS);
    return pfn;
}

static void test_dlsym_on_local_handle_returns_wrappers_for_hooked_symbols(void **state)
{
    (void)state;
    assert_true(in_shim(dlsym(driver, "cuGetProcAddress_v2")));
    assert_true(in_shim(dlsym(driver, "cuMemAlloc_v2")));
    assert_true(in_shim(dlsym(driver, "cuLaunchKernel")));
    assert_true(in_shim(dlsym(driver, "cuLaunchKernel_ptsz")));
    assert_string_equal(symbol_of(dlsym(driver, "cuLaunchKernel_ptsz")), "cuLaunchKernel_ptsz");
}

static void test_dlsym_passes_unknown_and_unhooked_symbols_through(void **state)
{
    (void)state;
    assert_true(in_driver(dlsym(driver, "cuDeviceGetName")));
    assert_true(in_driver(dlsym(driver, "cuInit")));
    assert_null(dlsym(driver, "cuNoSuchFunction"));
    assert_non_null(dlsym(RTLD_DEFAULT, "printf"));
}

static void test_dlsym_rtld_next_is_relative_to_the_caller(void **state)
{
    (void)state;
    /* From the program, the next definition is the preloaded shim's; had
     * the override made the shim the caller, it would be the driver's. */
    void *next = dlsym(RTLD_NEXT, "cuMemAlloc_v2");
    assert_true(in_shim(next));
    assert_ptr_equal(next, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    /* And an ordinary libc symbol is found as usual. */
    assert_non_null(dlsym(RTLD_NEXT, "malloc"));
}

static void test_procaddr_before_cuinit_returns_wrappers(void **state)
{
    (void)state;
    assert_true(in_shim(proc("cuMemAlloc", 3020, 0)));
    assert_string_equal(symbol_of(proc("cuMemAlloc", 3020, 0)), "cuMemAlloc_v2");
    assert_true(in_shim(proc("cuLaunchKernel", 4000, 0)));
    assert_true(in_shim(proc("cuLaunchKernelEx", 11060, 0)));
    assert_true(in_shim(proc("cuGraphLaunch", 10000, 0)));
}

static void test_procaddr_per_thread_flag_returns_ptsz_wrappers(void **state)
{
    (void)state;
    assert_string_equal(symbol_of(proc("cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)),
                        "cuLaunchKernel_ptsz");
    assert_true(in_shim(proc("cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)));
    assert_string_equal(symbol_of(proc("cuMemcpyHtoD", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)),
                        "cuMemcpyHtoD_v2_ptds");
    assert_string_equal(symbol_of(proc("cuGraphLaunch", 10000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)),
                        "cuGraphLaunch_ptsz");
}

static void test_procaddr_self_lookup_returns_the_shims_resolver(void **state)
{
    (void)state;
    void *v11 = proc("cuGetProcAddress", 11030, 0);
    void *v12 = proc("cuGetProcAddress", 12000, 0);
    assert_true(in_shim(v11));
    assert_true(in_shim(v12));
    assert_string_equal(symbol_of(v12), "cuGetProcAddress_v2");
    /* Through the re-fetched resolver, the answers are still wrappers. */
    PFN_cuGetProcAddress_v12000 again;
    memcpy(&again, &v12, sizeof v12);
    void *pfn = NULL;
    assert_int_equal(again("cuMemFree", &pfn, 3020, 0, NULL), CUDA_SUCCESS);
    assert_true(in_shim(pfn));
}

static void test_procaddr_unhooked_symbol_passes_through(void **state)
{
    (void)state;
    assert_true(in_driver(proc("cuDeviceGet", 2000, 0)));
    assert_true(in_driver(proc("cuInit", 2000, 0)));
    void *pfn = (void *)&pfn;
    CUdriverProcAddressQueryResult status;
    CUresult rc = get_proc("cuNoSuchFunction", &pfn, 12000, 0, &status);
    assert_int_not_equal(status, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_true(rc != CUDA_SUCCESS || pfn == NULL);
}

static void test_runtime_symbols_are_exported(void **state)
{
    (void)state;
    assert_true(in_shim(dlsym(RTLD_DEFAULT, "cudaMalloc")));
    assert_true(in_shim(dlsym(RTLD_DEFAULT, "cudaFree")));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_procaddr_before_cuinit_returns_wrappers),
        cmocka_unit_test(test_dlsym_on_local_handle_returns_wrappers_for_hooked_symbols),
        cmocka_unit_test(test_dlsym_passes_unknown_and_unhooked_symbols_through),
        cmocka_unit_test(test_dlsym_rtld_next_is_relative_to_the_caller),
        cmocka_unit_test(test_procaddr_per_thread_flag_returns_ptsz_wrappers),
        cmocka_unit_test(test_procaddr_self_lookup_returns_the_shims_resolver),
        cmocka_unit_test(test_procaddr_unhooked_symbol_passes_through),
        cmocka_unit_test(test_runtime_symbols_are_exported),
    };
    return cmocka_run_group_tests_name("preload_resolve", tests, setup, NULL);
}

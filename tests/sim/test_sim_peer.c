/* test_sim_peer.c: two simulated devices and peer access: the answers and
 * errors of cuDeviceCanAccessPeer, cuCtxEnable/DisablePeerAccess,
 * cuDeviceGetP2PAttribute and cuMemcpyPeer as cuda.h documents them (and an
 * H100 measured them), which memory a kernel on one device may touch on the
 * other (the rest faults, as an illegal address does), copies across devices
 * with and without peer access, and each context's own legacy stream.
 *
 * Every case runs in a forked child with SIMCUDA_DEVICES=2 set first (a
 * fault must kill only the child); the parent never calls the driver. A
 * child exits 0 on success or with the line of its first failed check.
 */
#include <cuda.h>

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "vs_test.h"

#define N 4096 /* u32 elements of each buffer */
#define GRAN ((size_t)2 << 20)

static const char image[] = "\x7f" "ELF any bytes: the simulator does not parse images";

/* A PTX kernel, so the interpreter's loads are checked too: dst[0] = src[0]. */
static const char ptx_image[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                                ".visible .entry first(.param .u64 src, .param .u64 dst)\n{\n"
                                ".reg .b64 %rd<3>;\n.reg .b32 %r<2>;\n"
                                "ld.param.u64 %rd1, [src];\nld.param.u64 %rd2, [dst];\n"
                                "ld.global.u32 %r1, [%rd1];\nst.global.u32 [%rd2], %r1;\nret;\n}\n";

static CUcontext ctx0, ctx1;

/* Both primary contexts, ctx0 current. */
static void child_init(void)
{
    VS_CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuDevicePrimaryCtxRetain(&ctx0, 0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuDevicePrimaryCtxRetain(&ctx1, 1) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx0) == CUDA_SUCCESS);
}

/* Runs `body` in a child; returns its exit code, or -signal. */
static int run_child(void (*body)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("SIMCUDA_DEVICES", "2", 1);
        signal(SIGSEGV, SIG_DFL);
        body();
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

/* Runs `body`, which must die of the simulated illegal address: SIGSEGV,
 * after simcuda's line saying which kernel touched what. */
static void expect_kernel_fault(void (*body)(void))
{
    char path[] = "/tmp/test_sim_peer.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd, STDERR_FILENO);
        setenv("SIMCUDA_DEVICES", "2", 1);
        signal(SIGSEGV, SIG_DFL);
        body();
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char text[4096] = {0};
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
        fail_msg("child ended with status %d, not SIGSEGV; stderr: %s", status, got > 0 ? text : "");
    assert_non_null(strstr(text, "illegal address"));
}

static uint64_t checksum_host(const uint32_t *data, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (uint64_t)data[i] * (i + 1);
    return sum;
}

/* A buffer of N u32 in the current context, filled with a pattern. */
static CUdeviceptr filled_buffer(uint32_t seed, uint32_t *host)
{
    CUdeviceptr d;
    VS_CHILD_CHECK(cuMemAlloc_v2(&d, N * 4) == CUDA_SUCCESS);
    for (uint32_t i = 0; i < N; i++)
        host[i] = seed ^ (i * 2654435761u);
    VS_CHILD_CHECK(cuMemcpyHtoD_v2(d, host, N * 4) == CUDA_SUCCESS);
    return d;
}

/* Launches sim_checksum_u32(src, N, out) in the current context and
 * returns the sum, read back through `out` (the current context's memory). */
static uint64_t device_checksum(CUdeviceptr src)
{
    CUmodule module;
    CUfunction f;
    CUdeviceptr out;
    uint64_t n = N, sum = 0;
    VS_CHILD_CHECK(cuModuleLoadData(&module, image) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuModuleGetFunction(&f, module, "sim_checksum_u32") == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemAlloc_v2(&out, 8) == CUDA_SUCCESS);
    void *params[] = {&src, &n, &out};
    VS_CHILD_CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemcpyDtoH_v2(&sum, out, 8) == CUDA_SUCCESS);
    return sum;
}

/* ------------------------------------------------------------------------ */

static void can_access_body(void)
{
    child_init();
    int can = -1;
    VS_CHILD_CHECK(cuDeviceCanAccessPeer(&can, 0, 1) == CUDA_SUCCESS && can == 1);
    VS_CHILD_CHECK(cuDeviceCanAccessPeer(&can, 1, 0) == CUDA_SUCCESS && can == 1);
    /* Measured on an H100: success, and a device is not its own peer. */
    VS_CHILD_CHECK(cuDeviceCanAccessPeer(&can, 1, 1) == CUDA_SUCCESS && can == 0);
    VS_CHILD_CHECK(cuDeviceCanAccessPeer(&can, 0, 2) == CUDA_ERROR_INVALID_DEVICE);
    VS_CHILD_CHECK(cuDeviceCanAccessPeer(&can, -1, 0) == CUDA_ERROR_INVALID_DEVICE);
    VS_CHILD_CHECK(cuDeviceCanAccessPeer(NULL, 0, 1) == CUDA_ERROR_INVALID_VALUE);
}

static void test_can_access_peer_answers_other_devices_only(void **state)
{
    (void)state;
    assert_int_equal(run_child(can_access_body), 0);
}

static void before_init_body(void)
{
    int can = -1;
    VS_CHILD_CHECK(cuDeviceCanAccessPeer(&can, 0, 1) == CUDA_ERROR_NOT_INITIALIZED);
    VS_CHILD_CHECK(cuCtxEnablePeerAccess(NULL, 0) == CUDA_ERROR_NOT_INITIALIZED);
    VS_CHILD_CHECK(cuCtxDisablePeerAccess(NULL) == CUDA_ERROR_NOT_INITIALIZED);
    VS_CHILD_CHECK(cuDeviceGetP2PAttribute(&can, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1) ==
                   CUDA_ERROR_NOT_INITIALIZED);
}

static void test_peer_calls_before_init_are_not_initialized(void **state)
{
    (void)state;
    assert_int_equal(run_child(before_init_body), 0);
}

static void enable_errors_body(void)
{
    child_init();
    /* Flags are reserved: 0 only. */
    VS_CHILD_CHECK(cuCtxEnablePeerAccess(ctx1, 1) == CUDA_ERROR_INVALID_VALUE);
    /* The context itself, and another context of the same device:
     * CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (217), as an H100 answers. */
    VS_CHILD_CHECK(cuCtxEnablePeerAccess(ctx0, 0) == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    CUcontext second;
    VS_CHILD_CHECK(cuCtxCreate_v2(&second, 0, 0) == CUDA_SUCCESS); /* pushed: current */
    VS_CHILD_CHECK(cuCtxEnablePeerAccess(ctx0, 0) == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    VS_CHILD_CHECK(cuCtxDestroy_v2(second) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx0) == CUDA_SUCCESS);
    /* Not a context. */
    static int not_a_context;
    VS_CHILD_CHECK(cuCtxEnablePeerAccess((CUcontext)(void *)&not_a_context, 0) == CUDA_ERROR_INVALID_CONTEXT);
    VS_CHILD_CHECK(cuCtxDisablePeerAccess((CUcontext)(void *)&not_a_context) == CUDA_ERROR_INVALID_CONTEXT);
    VS_CHILD_CHECK(cuCtxEnablePeerAccess(NULL, 0) == CUDA_ERROR_INVALID_CONTEXT);
    /* Disabling what was never enabled. */
    VS_CHILD_CHECK(cuCtxDisablePeerAccess(ctx1) == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    /* Enable once; twice is ALREADY_ENABLED; disable once; twice NOT_ENABLED. */
    VS_CHILD_CHECK(cuCtxEnablePeerAccess(ctx1, 0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxEnablePeerAccess(ctx1, 0) == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    /* One way only: ctx1 has not enabled ctx0. */
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx1) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxDisablePeerAccess(ctx0) == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxDisablePeerAccess(ctx1) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxDisablePeerAccess(ctx1) == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    /* No current context. */
    VS_CHILD_CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxEnablePeerAccess(ctx1, 0) == CUDA_ERROR_INVALID_CONTEXT);
    VS_CHILD_CHECK(cuCtxDisablePeerAccess(ctx1) == CUDA_ERROR_INVALID_CONTEXT);
}

static void test_enable_and_disable_peer_access_give_documented_errors(void **state)
{
    (void)state;
    assert_int_equal(run_child(enable_errors_body), 0);
}

static void p2p_attribute_body(void)
{
    child_init();
    int value = -1;
    VS_CHILD_CHECK(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1) == CUDA_SUCCESS);
    VS_CHILD_CHECK(value == 1);
    VS_CHILD_CHECK(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, 1, 0) ==
                   CUDA_SUCCESS);
    VS_CHILD_CHECK(value == 1);
    VS_CHILD_CHECK(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, 1, 0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(value == 0);
    /* The same device on both ends, or one out of range: INVALID_DEVICE. */
    VS_CHILD_CHECK(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1, 1) ==
                   CUDA_ERROR_INVALID_DEVICE);
    VS_CHILD_CHECK(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 2) ==
                   CUDA_ERROR_INVALID_DEVICE);
    VS_CHILD_CHECK(cuDeviceGetP2PAttribute(&value, (CUdevice_P2PAttribute)0x77, 0, 1) == CUDA_ERROR_INVALID_VALUE);
    VS_CHILD_CHECK(cuDeviceGetP2PAttribute(NULL, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1) ==
                   CUDA_ERROR_INVALID_VALUE);
}

static void test_p2p_attributes_describe_a_link_between_two_devices(void **state)
{
    (void)state;
    assert_int_equal(run_child(p2p_attribute_body), 0);
}

/* ------------------------------------------------------------------------
 * Kernels across devices
 * ------------------------------------------------------------------------ */

static void peer_read_without_access_body(void)
{
    child_init();
    static uint32_t host[N];
    CUdeviceptr on0 = filled_buffer(7, host);
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx1) == CUDA_SUCCESS);
    (void)device_checksum(on0); /* faults: no peer access */
    VS_CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
}

static void test_kernel_reading_other_device_without_peer_access_faults(void **state)
{
    (void)state;
    expect_kernel_fault(peer_read_without_access_body);
}

static void peer_read_wrong_direction_body(void)
{
    child_init();
    static uint32_t host[N];
    CUdeviceptr on0 = filled_buffer(7, host);
    /* ctx0 may reach ctx1: that does not let ctx1 reach ctx0. */
    VS_CHILD_CHECK(cuCtxEnablePeerAccess(ctx1, 0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx1) == CUDA_SUCCESS);
    (void)device_checksum(on0);
    VS_CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
}

static void test_peer_access_is_one_way(void **state)
{
    (void)state;
    expect_kernel_fault(peer_read_wrong_direction_body);
}

static void peer_read_with_access_body(void)
{
    child_init();
    static uint32_t host[N];
    CUdeviceptr on0 = filled_buffer(7, host);
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx1) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxEnablePeerAccess(ctx0, 0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(device_checksum(on0) == checksum_host(host, N));
    /* The PTX interpreter's loads follow the same rule. */
    CUmodule module;
    CUfunction first;
    CUdeviceptr out;
    uint32_t got = 0;
    VS_CHILD_CHECK(cuModuleLoadData(&module, ptx_image) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuModuleGetFunction(&first, module, "first") == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemAlloc_v2(&out, 4) == CUDA_SUCCESS);
    void *params[] = {&on0, &out};
    VS_CHILD_CHECK(cuLaunchKernel(first, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemcpyDtoH_v2(&got, out, 4) == CUDA_SUCCESS);
    VS_CHILD_CHECK(got == host[0]);
    /* Disabled again: the next touch faults. */
    VS_CHILD_CHECK(cuCtxDisablePeerAccess(ctx0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuLaunchKernel(first, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    _exit(100); /* not reached */
}

static void test_kernel_reads_other_device_once_peer_access_is_enabled(void **state)
{
    (void)state;
    expect_kernel_fault(peer_read_with_access_body);
}

/* A VMM mapping on device 0, granted to `grant_to` with `flags`. */
static CUdeviceptr vmm_buffer(int grant_to, CUmemAccess_flags flags, const uint32_t *host)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va;
    VS_CHILD_CHECK(cuMemAddressReserve(&va, GRAN, 0, 0, 0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemCreate(&handle, GRAN, &prop, 0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemMap(va, GRAN, 0, handle, 0) == CUDA_SUCCESS);
    CUmemAccessDesc owner = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                             .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    VS_CHILD_CHECK(cuMemSetAccess(va, GRAN, &owner, 1) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemcpyHtoD_v2(va, host, N * 4) == CUDA_SUCCESS);
    if (grant_to >= 0) {
        CUmemAccessDesc peer = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = grant_to}, .flags = flags};
        VS_CHILD_CHECK(cuMemSetAccess(va, GRAN, &peer, 1) == CUDA_SUCCESS);
    }
    return va;
}

static void vmm_peer_access_body(void)
{
    child_init();
    static uint32_t host[N];
    for (uint32_t i = 0; i < N; i++)
        host[i] = i * 3u + 1;
    CUdeviceptr va = vmm_buffer(-1, CU_MEM_ACCESS_FLAGS_PROT_NONE, host);
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx1) == CUDA_SUCCESS);
    /* Peer access does not apply to VMM memory: still faults. */
    VS_CHILD_CHECK(cuCtxEnablePeerAccess(ctx0, 0) == CUDA_SUCCESS);
    (void)device_checksum(va);
    VS_CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
}

static void test_peer_access_does_not_reach_vmm_mappings(void **state)
{
    (void)state;
    expect_kernel_fault(vmm_peer_access_body);
}

static void vmm_granted_body(void)
{
    child_init();
    static uint32_t host[N];
    for (uint32_t i = 0; i < N; i++)
        host[i] = i * 5u + 2;
    CUdeviceptr va = vmm_buffer(1, CU_MEM_ACCESS_FLAGS_PROT_READ, host);
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx1) == CUDA_SUCCESS);
    /* Granted read access, no peer access: reads work. */
    VS_CHILD_CHECK(device_checksum(va) == checksum_host(host, N));
    /* Writing needs READWRITE: sim_fill_u32 into it faults. */
    CUmodule module;
    CUfunction fill;
    uint64_t n = N;
    uint32_t seed = 1;
    VS_CHILD_CHECK(cuModuleLoadData(&module, image) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuModuleGetFunction(&fill, module, "sim_fill_u32") == CUDA_SUCCESS);
    void *params[] = {&va, &n, &seed};
    VS_CHILD_CHECK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    _exit(100); /* not reached */
}

static void test_vmm_mapping_is_reached_as_cuMemSetAccess_grants(void **state)
{
    (void)state;
    expect_kernel_fault(vmm_granted_body);
}

/* ------------------------------------------------------------------------
 * Copies and streams
 * ------------------------------------------------------------------------ */

static void copies_body(void)
{
    child_init();
    static uint32_t host[N], back[N];
    CUdeviceptr on0 = filled_buffer(11, host);
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx1) == CUDA_SUCCESS);
    CUdeviceptr on1a, on1b;
    VS_CHILD_CHECK(cuMemAlloc_v2(&on1a, N * 4) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemAlloc_v2(&on1b, N * 4) == CUDA_SUCCESS);
    /* No peer access anywhere: copies still run. */
    VS_CHILD_CHECK(cuMemcpyPeer(on1a, ctx1, on0, ctx0, N * 4) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemcpy(on1b, on0, N * 4) == CUDA_SUCCESS);
    CUstream stream;
    VS_CHILD_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemsetD32_v2(on0, 0, N) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemcpyPeerAsync(on0, ctx0, on1a, ctx1, N * 4, stream) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuStreamSynchronize(stream) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuMemcpyDtoH_v2(back, on0, N * 4) == CUDA_SUCCESS);
    VS_CHILD_CHECK(memcmp(back, host, N * 4) == 0);
    VS_CHILD_CHECK(cuMemcpyDtoH_v2(back, on1b, N * 4) == CUDA_SUCCESS);
    VS_CHILD_CHECK(memcmp(back, host, N * 4) == 0);
    /* A context that is not one. */
    static int not_a_context;
    VS_CHILD_CHECK(cuMemcpyPeer(on1a, (CUcontext)(void *)&not_a_context, on0, ctx0, N * 4) ==
                   CUDA_ERROR_INVALID_CONTEXT);
    VS_CHILD_CHECK(cuMemcpyPeer(on1a, ctx1, on0, NULL, N * 4) == CUDA_ERROR_INVALID_CONTEXT);
}

static void test_copies_between_devices_need_no_peer_access(void **state)
{
    (void)state;
    assert_int_equal(run_child(copies_body), 0);
}

static void legacy_streams_body(void)
{
    child_init();
    CUmodule module;
    CUfunction spin;
    uint64_t ns = 400 * 1000 * 1000ull;
    VS_CHILD_CHECK(cuModuleLoadData(&module, image) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuModuleGetFunction(&spin, module, "sim_spin") == CUDA_SUCCESS);
    void *params[] = {&ns};
    VS_CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuStreamQuery(NULL) == CUDA_ERROR_NOT_READY);
    /* Device 1's legacy stream is its own: idle while device 0's spins. */
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx1) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuStreamQuery(NULL) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuStreamQuery(CU_STREAM_LEGACY) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuCtxSetCurrent(ctx0) == CUDA_SUCCESS);
    VS_CHILD_CHECK(cuStreamSynchronize(NULL) == CUDA_SUCCESS);
}

static void test_each_context_has_its_own_legacy_stream(void **state)
{
    (void)state;
    assert_int_equal(run_child(legacy_streams_body), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_can_access_peer_answers_other_devices_only),
        cmocka_unit_test(test_peer_calls_before_init_are_not_initialized),
        cmocka_unit_test(test_enable_and_disable_peer_access_give_documented_errors),
        cmocka_unit_test(test_p2p_attributes_describe_a_link_between_two_devices),
        cmocka_unit_test(test_kernel_reading_other_device_without_peer_access_faults),
        cmocka_unit_test(test_peer_access_is_one_way),
        cmocka_unit_test(test_kernel_reads_other_device_once_peer_access_is_enabled),
        cmocka_unit_test(test_peer_access_does_not_reach_vmm_mappings),
        cmocka_unit_test(test_vmm_mapping_is_reached_as_cuMemSetAccess_grants),
        cmocka_unit_test(test_copies_between_devices_need_no_peer_access),
        cmocka_unit_test(test_each_context_has_its_own_legacy_stream),
    };
    return cmocka_run_group_tests_name("simcuda peer access", tests, NULL, NULL);
}

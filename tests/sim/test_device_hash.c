/* test_device_hash.c: shim/device_hash.c on the simulated driver: the
 * hash of device memory equals the host's, in every slot, with hashes in
 * flight on several streams; bad arguments and the driver's refusals give
 * the documented errors, and a refusal is logged once.
 *
 * device_hash.c reaches the driver through the shim's `vs_real` table; this
 * program fills that table itself, from the simulated libcuda it links, as
 * shim.c fills it from the driver it opens (so nothing else of the shim is
 * needed). Run with `--refused` (and SIMCUDA_FAIL set by meson) for the
 * refusal tests.
 */
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "device_hash.h"
#include "driver.h"

vs_real_t vs_real;

static CUcontext ctx;

static int setup(void **state)
{
    (void)state;
#define VS_HOOK(family, symbol)                                                                    \
    do {                                                                                           \
        void *found = dlsym(RTLD_DEFAULT, #symbol);                                                \
        memcpy(&vs_real.symbol, &found, sizeof found);                                             \
    } while (0);
#define VS_DRIVER(symbol) VS_HOOK(driver, symbol)
#include "hooks.def"
#include "driver.def"
#undef VS_DRIVER
#undef VS_HOOK
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS
        || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static void fill_random(unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (unsigned char)(seed >> 56);
    }
}

typedef struct device_buffer_s {
    unsigned char *host;
    CUdeviceptr device;
    uint64_t bytes;
} device_buffer_t;

static device_buffer_t upload_random(uint64_t bytes, uint64_t seed)
{
    device_buffer_t b = {.host = malloc(bytes + 1), .bytes = bytes};
    assert_non_null(b.host);
    fill_random(b.host, bytes, seed);
    assert_int_equal(cuMemAlloc_v2(&b.device, bytes + 1), CUDA_SUCCESS);
    if (bytes > 0)
        assert_int_equal(cuMemcpyHtoD_v2(b.device, b.host, bytes), CUDA_SUCCESS);
    return b;
}

static void free_buffer(device_buffer_t *b)
{
    free(b->host);
    assert_int_equal(cuMemFree_v2(b->device), CUDA_SUCCESS);
}

static void assert_hash_matches_host(const vs_device_hasher_t *h, unsigned slot, const device_buffer_t *b)
{
    vs_content_hash_t device = vs_device_hash_result(h, slot, b->bytes);
    vs_content_hash_t expected = vs_content_hash(b->host, b->bytes);
    if (!vs_content_hash_equal(device, expected))
        fail_msg("slot %u, %llu bytes: device %016llx %016llx, host %016llx %016llx", slot,
                 (unsigned long long)b->bytes, (unsigned long long)device.lane[0],
                 (unsigned long long)device.lane[1], (unsigned long long)expected.lane[0],
                 (unsigned long long)expected.lane[1]);
}

static void test_device_hash_equals_host_hash_in_every_slot(void **state)
{
    (void)state;
    vs_device_hasher_t *h = NULL;
    assert_int_equal(vs_device_hasher_create(0, 3, &h), 0);
    assert_non_null(h);
    assert_int_equal(vs_device_hasher_slots(h), 3);
    CUstream stream;
    assert_int_equal(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);

    static const uint64_t sizes[] = {0, 1, 7, 8, 9, 4095, (2u << 20) + 3};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        device_buffer_t b = upload_random(sizes[s], 50 + s);
        unsigned slot = (unsigned)(s % 3);
        /* A slot reused: its previous lanes must not add in. */
        assert_int_equal(vs_device_hash_enqueue(h, slot, b.device, b.bytes, stream), CUDA_SUCCESS);
        assert_int_equal(cuStreamSynchronize(stream), CUDA_SUCCESS);
        assert_hash_matches_host(h, slot, &b);
        free_buffer(&b);
    }
    assert_int_equal(cuStreamDestroy_v2(stream), CUDA_SUCCESS);
    vs_device_hasher_destroy(h);
}

/* Hashes of different buffers in flight at once on different streams land
 * in their own slots. */
static void test_device_hash_slots_in_flight_on_several_streams_stay_apart(void **state)
{
    (void)state;
    enum { SLOTS = 4 };
    vs_device_hasher_t *h = NULL;
    assert_int_equal(vs_device_hasher_create(0, SLOTS, &h), 0);
    CUstream streams[SLOTS];
    device_buffer_t buffers[SLOTS];
    for (unsigned i = 0; i < SLOTS; i++) {
        assert_int_equal(cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        buffers[i] = upload_random(100000 + 3 * i, 90 + i);
    }
    for (unsigned i = 0; i < SLOTS; i++)
        assert_int_equal(vs_device_hash_enqueue(h, i, buffers[i].device, buffers[i].bytes, streams[i]),
                         CUDA_SUCCESS);
    for (unsigned i = 0; i < SLOTS; i++) {
        assert_int_equal(cuStreamSynchronize(streams[i]), CUDA_SUCCESS);
        assert_hash_matches_host(h, i, &buffers[i]);
        free_buffer(&buffers[i]);
        assert_int_equal(cuStreamDestroy_v2(streams[i]), CUDA_SUCCESS);
    }
    vs_device_hasher_destroy(h);
}

/* One changed byte on the device: the hash differs from the one before. */
static void test_device_hash_sees_one_changed_byte(void **state)
{
    (void)state;
    vs_device_hasher_t *h = NULL;
    assert_int_equal(vs_device_hasher_create(0, 1, &h), 0);
    device_buffer_t b = upload_random(65536 + 5, 7);
    assert_int_equal(vs_device_hash_enqueue(h, 0, b.device, b.bytes, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    vs_content_hash_t before = vs_device_hash_result(h, 0, b.bytes);

    static const uint64_t positions[] = {0, 32768, 65536 + 4};
    for (size_t i = 0; i < sizeof positions / sizeof positions[0]; i++) {
        unsigned char flipped = (unsigned char)(b.host[positions[i]] ^ 0x10);
        assert_int_equal(cuMemcpyHtoD_v2(b.device + positions[i], &flipped, 1), CUDA_SUCCESS);
        assert_int_equal(vs_device_hash_enqueue(h, 0, b.device, b.bytes, NULL), CUDA_SUCCESS);
        assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
        vs_content_hash_t after = vs_device_hash_result(h, 0, b.bytes);
        assert_true(after.lane[0] != before.lane[0] && after.lane[1] != before.lane[1]);
        assert_int_equal(cuMemcpyHtoD_v2(b.device + positions[i], &b.host[positions[i]], 1), CUDA_SUCCESS);
    }
    free_buffer(&b);
    vs_device_hasher_destroy(h);
}

static void test_device_hash_enqueue_refuses_bad_slot_and_unaligned_base(void **state)
{
    (void)state;
    vs_device_hasher_t *h = NULL;
    assert_int_equal(vs_device_hasher_create(0, 2, &h), 0);
    device_buffer_t b = upload_random(64, 3);
    assert_int_equal(vs_device_hash_enqueue(h, 2, b.device, b.bytes, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(vs_device_hash_enqueue(h, 0, b.device + 4, 8, NULL), CUDA_ERROR_INVALID_VALUE);
    free_buffer(&b);
    vs_device_hasher_destroy(h);
}

static void test_device_hasher_create_needs_slots_and_the_device_current(void **state)
{
    (void)state;
    vs_device_hasher_t *h = (vs_device_hasher_t *)&h;
    assert_int_equal(vs_device_hasher_create(0, 0, &h), -EINVAL);
    assert_null(h);
    assert_int_equal(vs_device_hasher_create(1, 1, &h), -EINVAL); /* the current context is device 0 */
    assert_null(h);
    assert_int_equal(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(vs_device_hasher_create(0, 1, &h), -EINVAL);
    assert_null(h);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    vs_device_hasher_destroy(NULL);
}

/* Destroying from another context (or none) still frees in the hasher's. */
static void test_device_hasher_destroy_without_a_current_context(void **state)
{
    (void)state;
    vs_device_hasher_t *h = NULL;
    assert_int_equal(vs_device_hasher_create(0, 1, &h), 0);
    assert_int_equal(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    vs_device_hasher_destroy(h);
    CUcontext current = (CUcontext)&current;
    assert_int_equal(cuCtxGetCurrent(&current), CUDA_SUCCESS);
    assert_null(current);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

/* ---- Run with SIMCUDA_FAIL (see meson.build) ------------------------------ */

/* cuModuleLoadDataEx fails every time: -ENOTSUP, and one line of log for
 * any number of refusals. */
static void test_device_hasher_refused_module_is_enotsup_and_logged_once(void **state)
{
    (void)state;
    char path[] = "/tmp/test_device_hash_log_XXXXXX";
    int log_fd = mkstemp(path);
    assert_true(log_fd >= 0);
    unlink(path);
    int saved_stderr = dup(STDERR_FILENO);
    assert_true(saved_stderr >= 0);
    assert_true(dup2(log_fd, STDERR_FILENO) >= 0);

    vs_device_hasher_t *h = NULL;
    int first = vs_device_hasher_create(0, 1, &h);
    int second = vs_device_hasher_create(0, 1, &h);

    assert_true(dup2(saved_stderr, STDERR_FILENO) >= 0);
    close(saved_stderr);
    assert_int_equal(first, -ENOTSUP);
    assert_int_equal(second, -ENOTSUP);
    assert_null(h);

    char log[4096] = "";
    ssize_t n = pread(log_fd, log, sizeof log - 1, 0);
    close(log_fd);
    assert_true(n > 0);
    log[n] = '\0';
    int lines = 0;
    for (const char *p = log; (p = strstr(p, "content-hash kernel")) != NULL; p++)
        lines++;
    if (lines != 1)
        fail_msg("expected one line about the refusal, log:\n%s", log);
    assert_non_null(strstr(log, "device 0"));
}

/* The slots' device memory is refused (the module loads): -ENOMEM. */
static void test_device_hasher_create_out_of_memory_is_enomem(void **state)
{
    (void)state;
    vs_device_hasher_t *h = NULL;
    assert_int_equal(vs_device_hasher_create(0, 1, &h), -ENOMEM);
    assert_null(h);
}

/* A launch the driver refuses comes back as the driver's error. */
static void test_device_hash_enqueue_returns_the_launch_error(void **state)
{
    (void)state;
    vs_device_hasher_t *h = NULL;
    assert_int_equal(vs_device_hasher_create(0, 1, &h), 0);
    device_buffer_t b = upload_random(64, 5);
    assert_int_equal(vs_device_hash_enqueue(h, 0, b.device, b.bytes, NULL), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    free_buffer(&b);
    vs_device_hasher_destroy(h);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--refused-module") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_device_hasher_refused_module_is_enotsup_and_logged_once),
        };
        return cmocka_run_group_tests_name("device_hash.c, module refused", tests, setup, NULL);
    }
    if (argc > 1 && strcmp(argv[1], "--refused-memory") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_device_hasher_create_out_of_memory_is_enomem),
        };
        return cmocka_run_group_tests_name("device_hash.c, memory refused", tests, setup, NULL);
    }
    if (argc > 1 && strcmp(argv[1], "--refused-launch") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_device_hash_enqueue_returns_the_launch_error),
        };
        return cmocka_run_group_tests_name("device_hash.c, launch refused", tests, setup, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_hash_equals_host_hash_in_every_slot),
        cmocka_unit_test(test_device_hash_slots_in_flight_on_several_streams_stay_apart),
        cmocka_unit_test(test_device_hash_sees_one_changed_byte),
        cmocka_unit_test(test_device_hash_enqueue_refuses_bad_slot_and_unaligned_base),
        cmocka_unit_test(test_device_hasher_create_needs_slots_and_the_device_current),
        cmocka_unit_test(test_device_hasher_destroy_without_a_current_context),
    };
    return cmocka_run_group_tests_name("device_hash.c", tests, setup, NULL);
}

/* preload_offload_api.c: what a program asks the driver about its own
 * memory, and the allocation calls around the edges of the offload mode,
 * under the shim with `VRAM_LIMIT` far below what the program allocates.
 *
 *   preload_offload_api CASE [ARG]
 *
 * The cases (one Meson test each, see tests/preload/meson.build):
 *
 * - `range`: `cuMemGetAddressRange_v2`, `cuPointerGetAttribute` and
 *   `cuPointerGetAttributes` on interior pointers of a 3 MiB + 123 byte
 *   allocation answer its base and its requested size, while it is resident
 *   and while it is evicted (the shim keeps it in a 4 MiB reservation that
 *   is unmapped while evicted); the bytes survive.
 * - `context`: `CU_POINTER_ATTRIBUTE_CONTEXT` of an evictable allocation is
 *   the context that allocated it, resident or evicted, as for any
 *   `cuMemAlloc` pointer.
 * - `pitch`: `cuMemAllocPitch_v2` of a large 2-D buffer: the pitch covers
 *   the width at the device's pitch alignment, and the data survives
 *   evictions through `cuMemcpy2D_v2` (whole and sub-rectangles, sync and
 *   async), `cuMemsetD2D8_v2` and a kernel that walks the rows.
 * - `limit_zero [data-only]` (`VRAM_LIMIT=0`): several 8 MiB buffers, each
 *   used alone by kernels (and two at a time by a copy kernel), stay
 *   byte-exact, and after each operation only the buffers it used are on
 *   the device (not checked with `data-only`, which the tests of the
 *   device peak and of the exit summary run).
 * - `free ROUNDS` (`VRAM_LIMIT=14M`): freeing an evicted allocation, then a
 *   resident one that a running kernel still writes (the free waits for it,
 *   like `cuMemFree`), while another thread keeps launching on its own
 *   4 MiB buffer and stream; the freed addresses are unknown afterwards, a
 *   second free fails, and new allocations, used in turn for ROUNDS
 *   rounds beside the other thread, stay byte-exact. At 14M most evictions
 *   take two victims, the first often the other thread's buffer with its
 *   restore copy just finished: a kernel submitted against a buffer being
 *   evicted faults (SIGSEGV) instead of waiting for it.
 * - `free_async`: `cuMemFreeAsync` of `cuMemAlloc` allocations, one while
 *   a kernel before it on the stream still writes it, others evicted: each
 *   is freed in stream order and its room reused byte-exact.
 * - `pin_unified` (`VRAMSHIM_PIN_DEVICE_POINTERS=on`, `VRAM_LIMIT=8M`):
 *   small `cuMemcpy`/`cuMemcpyAsync` from an evicted allocation to host
 *   memory read its bytes (the pointer scan leaves device sources alone).
 * - `restore_spill ROUNDS` (the disk tier, `VRAMSHIM_HOST_LIMIT=34M`): 10
 *   and 26 MiB allocations under `VRAM_LIMIT=30M`, each read back with
 *   `cuMemcpyDtoHAsync` in turn: no restore fails for the host pool.
 * - `pool LIMIT_MIB`: a memory pool that keeps freed memory (release
 *   threshold at its maximum) never takes the device past the limit: what
 *   it keeps is charged and given back when needed; with VRAMSHIM_MODE=cap
 *   a pool allocation that cannot fit is refused, in offload mode it
 *   evicts.
 * - `meminfo EXPECTED_TOTAL_MIB [EACH_MIB]`: `cuMemGetInfo_v2` reports the
 *   limit as the total (the device's with `VRAMSHIM_MEMINFO=device`),
 *   before and after allocating three buffers of EACH_MIB (half the total
 *   by default), more than the limit.
 *
 * Whether an allocation is evicted is asked of the simulated driver itself
 * (`simcuda_entry_point`, which the shim does not interpose): its own
 * `cuMemGetAddressRange_v2` does not know an unmapped reservation.
 *
 * Exit status: 0 when every check holds, 1 otherwise (each failure printed
 * with the case and the line), 2 on a usage error.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "preload_util.h"
#include "simcuda.h"

#define MiB (1ull << 20)

static CUcontext context;
static CUfunction fn_fill, fn_checksum, fn_copy, fn_pitch_xor, fn_slow_fill;

/* ---- Kernels of this program --------------------------------------------- */

/* api_pitch_xor(uint8_t *base, uint64_t pitch, uint64_t width, uint64_t height,
 * uint32_t key): XORs each byte of each row's first `width` bytes with
 * `pitch_key_byte(key, row, column)`; the padding is left alone. */
static uint8_t pitch_key_byte(uint32_t key, uint64_t row, uint64_t column)
{
    return (uint8_t)(key ^ (row * 31u) ^ (column * 7u));
}

static void pitch_xor_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)launch;
    (void)user;
    uint8_t *base = *(uint8_t **)args[0];
    uint64_t pitch = *(const uint64_t *)args[1], width = *(const uint64_t *)args[2];
    uint64_t height = *(const uint64_t *)args[3];
    uint32_t key = *(const uint32_t *)args[4];
    for (uint64_t row = 0; row < height; row++)
        for (uint64_t column = 0; column < width; column++)
            base[row * pitch + column] ^= pitch_key_byte(key, row, column);
}

/* api_slow_fill(uint32_t *dst, uint64_t n, uint64_t sleep_ns): sleeps, then
 * writes `dst` (the `sim_fill_u32` pattern, seed 7) and says it finished. */
static atomic_bool slow_fill_finished;

static void slow_fill_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)launch;
    (void)user;
    uint32_t *dst = *(uint32_t **)args[0];
    uint64_t n = *(const uint64_t *)args[1], sleep_ns = *(const uint64_t *)args[2];
    struct timespec pause = {.tv_sec = (time_t)(sleep_ns / 1000000000u), .tv_nsec = (long)(sleep_ns % 1000000000u)};
    nanosleep(&pause, NULL);
    for (uint64_t i = 0; i < n; i++)
        dst[i] = 7u ^ (uint32_t)(i * 2654435761u);
    atomic_store(&slow_fill_finished, true);
}

static void setup(void)
{
    static const size_t pitch_sizes[] = {sizeof(void *), 8, 8, 8, 4};
    static const size_t slow_sizes[] = {sizeof(void *), 8, 8};
    const simcuda_kernel_desc_t kernels[] = {
        {.name = "api_pitch_xor", .param_count = 5, .param_sizes = pitch_sizes, .fn = pitch_xor_kernel, .cost_ns = 1000},
        {.name = "api_slow_fill", .param_count = 3, .param_sizes = slow_sizes, .fn = slow_fill_kernel, .cost_ns = 1000},
    };
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        if (simcuda_register_kernel(&kernels[i]) != 0) {
            fprintf(stderr, "preload_offload_api: cannot register %s\n", kernels[i].name);
            exit(1);
        }
    }
    CUmodule module;
    context = preload_context();
    VS_CHECK(cuModuleLoadData(&module, "preload_offload_api kernels"));
    VS_CHECK(cuModuleGetFunction(&fn_fill, module, "sim_fill_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_checksum, module, "sim_checksum_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_copy, module, "sim_copy"));
    VS_CHECK(cuModuleGetFunction(&fn_pitch_xor, module, "api_pitch_xor"));
    VS_CHECK(cuModuleGetFunction(&fn_slow_fill, module, "api_slow_fill"));
}

/* ---- Helpers ---------------------------------------------------------------- */

static uint32_t fill_word(uint32_t seed, uint64_t i)
{
    return seed ^ (uint32_t)(i * 2654435761u);
}

static uint64_t fill_checksum(uint32_t seed, uint64_t words)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < words; i++)
        sum += (uint64_t)fill_word(seed, i) * (i + 1);
    return sum;
}

static void launch_fill(CUdeviceptr dst, uint64_t bytes, uint32_t seed, CUstream stream)
{
    uint64_t words = bytes / 4;
    void *args[] = {&dst, &words, &seed};
    VS_CHECK(cuLaunchKernel(fn_fill, 1, 1, 1, 64, 1, 1, 0, stream, args, NULL));
}

/* Checksums `bytes` of `src` on the device into `result` (device, 8 bytes)
 * and returns it (synchronises `stream`). */
static uint64_t device_checksum(CUdeviceptr src, uint64_t bytes, CUdeviceptr result, CUstream stream)
{
    uint64_t words = bytes / 4, sum = 0;
    void *args[] = {&src, &words, &result};
    VS_CHECK(cuLaunchKernel(fn_checksum, 1, 1, 1, 64, 1, 1, 0, stream, args, NULL));
    VS_CHECK(cuStreamSynchronize(stream));
    VS_CHECK(cuMemcpyDtoH(&sum, result, sizeof sum));
    return sum;
}

/* Whether the simulated driver has memory mapped at `ptr`: false while the
 * shim keeps the allocation evicted (its reservation unmapped). */
typedef CUresult address_range_fn_t(CUdeviceptr *, size_t *, CUdeviceptr);

static bool driver_maps(CUdeviceptr ptr)
{
    static address_range_fn_t *driver_address_range;
    if (driver_address_range == NULL)
        driver_address_range = __extension__(address_range_fn_t *) simcuda_entry_point("cuMemGetAddressRange_v2");
    if (driver_address_range == NULL) {
        fprintf(stderr, "preload_offload_api: simcuda has no cuMemGetAddressRange_v2\n");
        exit(1);
    }
    CUdeviceptr base;
    size_t size;
    return driver_address_range(&base, &size, ptr) == CUDA_SUCCESS;
}

/* Fills each of `others` (their sizes in `other_bytes`) until `target` is
 * evicted; true when it is. */
static bool evict_by_using_others(CUdeviceptr target, const CUdeviceptr *others, const uint64_t *other_bytes,
                                  size_t count)
{
    for (int round = 0; round < 16 && driver_maps(target); round++) {
        for (size_t i = 0; i < count; i++)
            launch_fill(others[i], other_bytes[i], 1000u + (uint32_t)round * 10u + (uint32_t)i, NULL);
        VS_CHECK(cuCtxSynchronize());
    }
    return !driver_maps(target);
}

static void fill_pattern(unsigned char *bytes, size_t n, uint32_t seed)
{
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        bytes[i] = (unsigned char)(state >> 56);
    }
}

/* The first differing byte of two buffers, or -1. */
static long long first_difference(const unsigned char *a, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (long long)i;
    return -1;
}

/* ---- range ------------------------------------------------------------------ */

/* Every way of asking where `ptr` lies answers `base` and `size`. */
static void expect_range(const char *when, CUdeviceptr base, uint64_t size, CUdeviceptr ptr)
{
    CUdeviceptr got_base = 0;
    size_t got_size = 0;
    CUresult rc = cuMemGetAddressRange_v2(&got_base, &got_size, ptr);
    VS_EXPECT(rc == CUDA_SUCCESS && got_base == base && got_size == size,
           "%s: cuMemGetAddressRange_v2(base+%llu) = %d, base 0x%llx size %zu; expected base 0x%llx size %llu", when,
           (unsigned long long)(ptr - base), (int)rc, (unsigned long long)got_base, got_size,
           (unsigned long long)base, (unsigned long long)size);
    got_base = 0;
    got_size = 0;
    VS_EXPECT(cuMemGetAddressRange_v2(&got_base, NULL, ptr) == CUDA_SUCCESS && got_base == base,
           "%s: cuMemGetAddressRange_v2 with psize NULL", when);
    VS_EXPECT(cuMemGetAddressRange_v2(NULL, &got_size, ptr) == CUDA_SUCCESS && got_size == size,
           "%s: cuMemGetAddressRange_v2 with pbase NULL", when);

    CUdeviceptr start = 0, device_pointer = 0;
    size_t range_size = 0;
    unsigned int memory_type = 0;
    int ordinal = -1;
    rc = cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr);
    VS_EXPECT(rc == CUDA_SUCCESS && start == base, "%s: RANGE_START_ADDR = %d, 0x%llx", when, (int)rc,
           (unsigned long long)start);
    rc = cuPointerGetAttribute(&range_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr);
    VS_EXPECT(rc == CUDA_SUCCESS && range_size == size, "%s: RANGE_SIZE = %d, %zu", when, (int)rc, range_size);
    rc = cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr);
    VS_EXPECT(rc == CUDA_SUCCESS && memory_type == CU_MEMORYTYPE_DEVICE, "%s: MEMORY_TYPE = %d, %u", when, (int)rc,
           memory_type);
    rc = cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr);
    VS_EXPECT(rc == CUDA_SUCCESS && ordinal == 0, "%s: DEVICE_ORDINAL = %d, %d", when, (int)rc, ordinal);
    rc = cuPointerGetAttribute(&device_pointer, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, ptr);
    VS_EXPECT(rc == CUDA_SUCCESS && device_pointer == ptr, "%s: DEVICE_POINTER = %d, 0x%llx", when, (int)rc,
           (unsigned long long)device_pointer);

    CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                        CU_POINTER_ATTRIBUTE_DEVICE_POINTER};
    start = device_pointer = 0;
    range_size = 0;
    memory_type = 0;
    ordinal = -1;
    void *data[] = {&start, &range_size, &memory_type, &ordinal, &device_pointer};
    rc = cuPointerGetAttributes(5, attributes, data, ptr);
    VS_EXPECT(rc == CUDA_SUCCESS && start == base && range_size == size && memory_type == CU_MEMORYTYPE_DEVICE
               && ordinal == 0 && device_pointer == ptr,
           "%s: cuPointerGetAttributes = %d: start 0x%llx size %zu type %u ordinal %d pointer 0x%llx", when, (int)rc,
           (unsigned long long)start, range_size, memory_type, ordinal, (unsigned long long)device_pointer);
}

static void expect_range_everywhere(const char *when, CUdeviceptr base, uint64_t size)
{
    const uint64_t offsets[] = {0, 1, MiB + 7, 2 * MiB, size - 1};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++)
        expect_range(when, base, size, base + offsets[i]);
}

static void case_range(void)
{
    const uint64_t size = 3 * MiB + 123;
    CUdeviceptr buffer, others[2];
    const uint64_t other_bytes[2] = {8 * MiB, 8 * MiB};
    unsigned char *image = malloc(size), *back = malloc(size);

    VS_CHECK(cuMemAlloc(&buffer, size));
    fill_pattern(image, size, 3);
    VS_CHECK(cuMemcpyHtoD(buffer, image, size));
    VS_EXPECT(driver_maps(buffer), "the new allocation is not resident");
    expect_range_everywhere("resident", buffer, size);

    for (int i = 0; i < 2; i++)
        VS_CHECK(cuMemAlloc(&others[i], other_bytes[i]));
    VS_EXPECT(evict_by_using_others(buffer, others, other_bytes, 2), "the allocation was never evicted");
    expect_range_everywhere("evicted", buffer, size);
    VS_EXPECT(!driver_maps(buffer), "asking about the allocation brought it back");

    VS_CHECK(cuMemcpyDtoH(back, buffer, size));
    long long at = first_difference(image, back, size);
    VS_EXPECT(at < 0, "after eviction byte %lld reads 0x%02x, expected 0x%02x", at, at < 0 ? 0 : back[at],
           at < 0 ? 0 : image[at]);
    expect_range_everywhere("restored", buffer, size);

    VS_CHECK(cuMemFree(buffer));
    for (int i = 0; i < 2; i++)
        VS_CHECK(cuMemFree(others[i]));
    free(image);
    free(back);
}

/* ---- context ------------------------------------------------------------- */

static void expect_context(const char *when, CUdeviceptr ptr)
{
    CUcontext owner = NULL;
    CUresult rc = cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, ptr);
    VS_EXPECT(rc == CUDA_SUCCESS && owner == context, "%s: cuPointerGetAttribute(CONTEXT) = %d, %p; expected %p", when,
           (int)rc, (void *)owner, (void *)context);
    CUpointer_attribute attribute = CU_POINTER_ATTRIBUTE_CONTEXT;
    void *data[] = {&owner};
    owner = NULL;
    rc = cuPointerGetAttributes(1, &attribute, data, ptr);
    VS_EXPECT(rc == CUDA_SUCCESS && owner == context, "%s: cuPointerGetAttributes(CONTEXT) = %d, %p; expected %p",
           when, (int)rc, (void *)owner, (void *)context);
}

static void case_context(void)
{
    CUdeviceptr small, buffer, others[2];
    const uint64_t other_bytes[2] = {8 * MiB, 8 * MiB};

    /* What the driver answers for memory the shim leaves alone. */
    VS_CHECK(cuMemAlloc(&small, 4096));
    expect_context("small (not evictable)", small);
    VS_CHECK(cuMemAlloc(&buffer, 3 * MiB + 123));
    VS_CHECK(cuMemsetD8(buffer, 0x5a, 3 * MiB + 123));
    expect_context("resident", buffer + MiB);
    for (int i = 0; i < 2; i++)
        VS_CHECK(cuMemAlloc(&others[i], other_bytes[i]));
    VS_EXPECT(evict_by_using_others(buffer, others, other_bytes, 2), "the allocation was never evicted");
    expect_context("evicted", buffer + MiB);
    VS_CHECK(cuMemFree(buffer));
    VS_CHECK(cuMemFree(small));
    for (int i = 0; i < 2; i++)
        VS_CHECK(cuMemFree(others[i]));
}

/* ---- pitch ------------------------------------------------------------------ */

static void copy_2d(CUdeviceptr device, size_t pitch, void *host, size_t host_pitch, size_t x, size_t y,
                    size_t width, size_t height, bool to_device, CUstream stream)
{
    CUDA_MEMCPY2D copy;
    memset(&copy, 0, sizeof copy);
    copy.WidthInBytes = width;
    copy.Height = height;
    if (to_device) {
        copy.srcMemoryType = CU_MEMORYTYPE_HOST;
        copy.srcHost = host;
        copy.srcPitch = host_pitch;
        copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        copy.dstDevice = device;
        copy.dstPitch = pitch;
        copy.dstXInBytes = x;
        copy.dstY = y;
    } else {
        copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        copy.srcDevice = device;
        copy.srcPitch = pitch;
        copy.srcXInBytes = x;
        copy.srcY = y;
        copy.dstMemoryType = CU_MEMORYTYPE_HOST;
        copy.dstHost = host;
        copy.dstPitch = host_pitch;
    }
    if (stream == NULL) {
        VS_CHECK(cuMemcpy2D_v2(&copy));
    } else {
        VS_CHECK(cuMemcpy2DAsync_v2(&copy, stream));
        VS_CHECK(cuStreamSynchronize(stream));
    }
}

/* Compares the `width` x `height` rectangle at (x, y) of the image (rows of
 * `image_width` bytes) with `got` (rows of `width` bytes). */
static void expect_rectangle(const char *when, const unsigned char *image, size_t image_width, size_t x, size_t y,
                             size_t width, size_t height, const unsigned char *got)
{
    for (size_t row = 0; row < height; row++) {
        long long at = first_difference(image + (y + row) * image_width + x, got + row * width, width);
        if (at >= 0) {
            VS_EXPECT(false, "%s: row %zu column %lld reads 0x%02x, expected 0x%02x", when, y + row, x + at,
                   got[row * width + (size_t)at], image[(y + row) * image_width + x + (size_t)at]);
            return;
        }
    }
}

static void case_pitch(void)
{
    const size_t width = 3000, height = 4000;
    CUdeviceptr buffer, others[2];
    const uint64_t other_bytes[2] = {8 * MiB, 8 * MiB};
    size_t pitch = 0;
    CUdevice device;
    int alignment = 0;
    CUstream stream;
    unsigned char *image = malloc(width * height), *back = malloc(width * height);

    VS_CHECK(cuCtxGetDevice(&device));
    VS_CHECK(cuDeviceGetAttribute(&alignment, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, device));
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuMemAllocPitch_v2(&buffer, &pitch, width, height, 4));
    VS_EXPECT(pitch >= width, "pitch %zu is narrower than the width %zu", pitch, width);
    VS_EXPECT(alignment > 0 && pitch % (size_t)alignment == 0, "pitch %zu is not a multiple of the pitch alignment %d",
           pitch, alignment);
    VS_EXPECT(pitch < width + 512, "pitch %zu pads the width %zu by more than 512 bytes", pitch, width);
    CUdeviceptr base = 0;
    size_t size = 0;
    VS_CHECK(cuMemGetAddressRange_v2(&base, &size, buffer + pitch * 17 + 5));
    VS_EXPECT(base == buffer && size == pitch * height, "address range of a row: base 0x%llx size %zu, expected %zu",
           (unsigned long long)base, size, pitch * height);

    fill_pattern(image, width * height, 11);
    copy_2d(buffer, pitch, image, width, 0, 0, width, height, true, NULL);
    for (int i = 0; i < 2; i++)
        VS_CHECK(cuMemAlloc(&others[i], other_bytes[i]));

    /* A kernel walks the rows of the evicted buffer. */
    VS_EXPECT(evict_by_using_others(buffer, others, other_bytes, 2), "the pitched buffer was never evicted (1)");
    uint64_t pitch64 = pitch, width64 = width, height64 = height;
    uint32_t key = 0x3c;
    void *args[] = {&buffer, &pitch64, &width64, &height64, &key};
    VS_CHECK(cuLaunchKernel(fn_pitch_xor, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    VS_CHECK(cuCtxSynchronize());
    for (size_t row = 0; row < height; row++)
        for (size_t column = 0; column < width; column++)
            image[row * width + column] ^= pitch_key_byte(key, row, column);

    /* A 2-D memset of a rectangle inside it, evicted again. */
    VS_EXPECT(evict_by_using_others(buffer, others, other_bytes, 2), "the pitched buffer was never evicted (2)");
    const size_t set_x = 64, set_y = 1000, set_width = 700, set_height = 40;
    VS_CHECK(cuMemsetD2D8_v2(buffer + set_y * pitch + set_x, pitch, 0xab, set_width, set_height));
    for (size_t row = set_y; row < set_y + set_height; row++)
        memset(image + row * width + set_x, 0xab, set_width);

    /* A sub-rectangle read back while evicted, synchronously then on a
     * stream. */
    VS_EXPECT(evict_by_using_others(buffer, others, other_bytes, 2), "the pitched buffer was never evicted (3)");
    copy_2d(buffer, pitch, back, 1000, 100, 990, 1000, 300, false, NULL);
    expect_rectangle("sub-rectangle, synchronous", image, width, 100, 990, 1000, 300, back);
    VS_EXPECT(evict_by_using_others(buffer, others, other_bytes, 2), "the pitched buffer was never evicted (4)");
    copy_2d(buffer, pitch, back, 1001, 1999, 3000, 1001, 700, false, stream);
    expect_rectangle("sub-rectangle, on a stream", image, width, 1999, 3000, 1001, 700, back);

    /* The whole buffer. */
    VS_EXPECT(evict_by_using_others(buffer, others, other_bytes, 2), "the pitched buffer was never evicted (5)");
    copy_2d(buffer, pitch, back, width, 0, 0, width, height, false, NULL);
    expect_rectangle("whole buffer", image, width, 0, 0, width, height, back);

    VS_CHECK(cuStreamDestroy(stream));
    VS_CHECK(cuMemFree(buffer));
    for (int i = 0; i < 2; i++)
        VS_CHECK(cuMemFree(others[i]));
    free(image);
    free(back);
}

/* ---- limit_zero ------------------------------------------------------------ */

#define ZERO_BUFFERS 6
#define ZERO_BYTES (8 * MiB)
#define ZERO_ROUNDS 3

/* Only the buffers in `used` (a bit per buffer) are on the device. */
static void expect_only_resident(const CUdeviceptr *buffers, unsigned used, const char *after, int round)
{
    for (int i = 0; i < ZERO_BUFFERS; i++) {
        bool resident = driver_maps(buffers[i]);
        bool expected = (used >> i) & 1u;
        VS_EXPECT(resident == expected, "round %d, after %s (buffers 0x%x): buffer %d is %s", round, after, used, i,
               resident ? "resident but the operation did not use it" : "not resident though just used");
    }
}

static void case_limit_zero(bool check_residency)
{
    CUdeviceptr buffers[ZERO_BUFFERS], result;
    uint32_t seeds[ZERO_BUFFERS];
    const uint64_t words = ZERO_BYTES / 4;
    uint32_t *back = malloc(ZERO_BYTES);

    VS_CHECK(cuMemAlloc(&result, sizeof(uint64_t)));
    for (int i = 0; i < ZERO_BUFFERS; i++)
        VS_CHECK(cuMemAlloc(&buffers[i], ZERO_BYTES));
    for (int round = 0; round < ZERO_ROUNDS; round++) {
        /* Each buffer alone: filled, then checksummed. */
        for (int i = 0; i < ZERO_BUFFERS; i++) {
            seeds[i] = (uint32_t)(round * 100 + i + 1);
            launch_fill(buffers[i], ZERO_BYTES, seeds[i], NULL);
            VS_CHECK(cuCtxSynchronize());
            if (check_residency)
                expect_only_resident(buffers, 1u << i, "a fill", round);
            uint64_t sum = device_checksum(buffers[i], ZERO_BYTES, result, NULL);
            VS_EXPECT(sum == fill_checksum(seeds[i], words), "round %d: buffer %d checksum %llu, expected %llu", round, i,
                   (unsigned long long)sum, (unsigned long long)fill_checksum(seeds[i], words));
        }
        /* Two at a time: buffer i copied into buffer i + 1 (the last one's
         * contents move down the ring, every other seed shifts). */
        int from = round % ZERO_BUFFERS, to = (round + 1) % ZERO_BUFFERS;
        uint64_t bytes = ZERO_BYTES;
        void *args[] = {&buffers[to], &buffers[from], &bytes};
        VS_CHECK(cuLaunchKernel(fn_copy, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
        VS_CHECK(cuCtxSynchronize());
        if (check_residency)
            expect_only_resident(buffers, (1u << from) | (1u << to), "a copy", round);
        seeds[to] = seeds[from];
        /* Every byte of every buffer, each read back alone. */
        for (int i = 0; i < ZERO_BUFFERS; i++) {
            VS_CHECK(cuMemcpyDtoH(back, buffers[i], ZERO_BYTES));
            for (uint64_t w = 0; w < words; w++) {
                if (back[w] != fill_word(seeds[i], w)) {
                    VS_EXPECT(false, "round %d: buffer %d word %llu reads 0x%08x, expected 0x%08x", round, i,
                           (unsigned long long)w, back[w], fill_word(seeds[i], w));
                    break;
                }
            }
        }
    }
    for (int i = 0; i < ZERO_BUFFERS; i++)
        VS_CHECK(cuMemFree(buffers[i]));
    VS_CHECK(cuMemFree(result));
    free(back);
}

/* ---- free ------------------------------------------------------------------- */

#define WORKER_BYTES (4 * MiB)

static atomic_bool worker_stop;
static _Atomic unsigned long worker_rounds;

/* Fills and checksums its own buffer on its own stream until told to stop. */
static void *worker(void *arg)
{
    (void)arg;
    CUstream stream;
    CUdeviceptr buffer, result;
    VS_CHECK(cuCtxSetCurrent(context));
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuMemAlloc(&buffer, WORKER_BYTES));
    VS_CHECK(cuMemAlloc(&result, sizeof(uint64_t)));
    for (uint32_t round = 0; !atomic_load(&worker_stop); round++) {
        uint32_t seed = 5000u + round;
        launch_fill(buffer, WORKER_BYTES, seed, stream);
        uint64_t sum = device_checksum(buffer, WORKER_BYTES, result, stream);
        VS_EXPECT(sum == fill_checksum(seed, WORKER_BYTES / 4), "the other thread's checksum %llu in round %u",
                  (unsigned long long)sum, round);
        worker_rounds++;
    }
    VS_CHECK(cuStreamDestroy(stream));
    VS_CHECK(cuMemFree(buffer));
    VS_CHECK(cuMemFree(result));
    return NULL;
}

static void expect_unknown(const char *what, CUdeviceptr ptr)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult rc = cuMemGetAddressRange_v2(&base, &size, ptr);
    VS_EXPECT(rc != CUDA_SUCCESS, "%s: cuMemGetAddressRange_v2 still answers base 0x%llx size %zu after the free", what,
           (unsigned long long)base, size);
    rc = cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr);
    VS_EXPECT(rc != CUDA_SUCCESS, "%s: RANGE_SIZE still answers %zu after the free", what, size);
}

static void case_free(int rounds)
{
    CUdeviceptr evicted, resident, other, result;
    const uint64_t bytes = 8 * MiB;
    uint32_t *back = malloc(bytes);
    pthread_t thread;

    VS_CHECK(cuMemAlloc(&result, sizeof(uint64_t)));
    VS_CHECK(cuMemAlloc(&evicted, bytes));
    VS_CHECK(cuMemAlloc(&resident, bytes));
    VS_CHECK(cuMemAlloc(&other, bytes));
    launch_fill(evicted, bytes, 1, NULL);
    pthread_create(&thread, NULL, worker, NULL);

    /* `evicted` goes to the host as `other` and `resident` are used. */
    const CUdeviceptr users[] = {other, resident};
    const uint64_t user_bytes[] = {bytes, bytes};
    VS_EXPECT(evict_by_using_others(evicted, users, user_bytes, 2), "the first allocation was never evicted");
    /* Freeing `other` leaves room for `resident` and the worker's buffer:
     * nothing is evicted from here on until the new allocations. */
    VS_CHECK(cuMemFree(other));
    expect_unknown("other", other);
    VS_EXPECT(!driver_maps(evicted), "the first allocation came back by itself");
    VS_CHECK(cuMemFree(evicted));
    expect_unknown("evicted", evicted);
    VS_EXPECT(cuMemFree(evicted) != CUDA_SUCCESS, "a second free of the evicted allocation succeeded");

    /* `resident` is freed while a kernel still writes it: the free waits. */
    launch_fill(resident, bytes, 2, NULL);
    VS_CHECK(cuCtxSynchronize());
    VS_EXPECT(driver_maps(resident), "the second allocation is not resident before its free");
    CUstream stream;
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    uint64_t words = bytes / 4, sleep_ns = 50000000;
    void *args[] = {&resident, &words, &sleep_ns};
    atomic_store(&slow_fill_finished, false);
    VS_CHECK(cuLaunchKernel(fn_slow_fill, 1, 1, 1, 64, 1, 1, 0, stream, args, NULL));
    VS_CHECK(cuMemFree(resident));
    VS_EXPECT(atomic_load(&slow_fill_finished), "cuMemFree returned before the kernel writing the memory finished");
    expect_unknown("resident", resident);
    VS_EXPECT(cuMemFree(resident) != CUDA_SUCCESS, "a second free of the resident allocation succeeded");

    /* New allocations, more than the limit holds, used in turn while the
     * other thread keeps going: each eviction here takes two victims, one
     * of them often the other thread's buffer, just restored. */
    CUdeviceptr fresh[3];
    for (int i = 0; i < 3; i++)
        VS_CHECK(cuMemAlloc(&fresh[i], bytes));
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < 3; i++)
            launch_fill(fresh[i], bytes, 300u + (uint32_t)(round * 3 + i), stream);
        for (int i = 0; i < 3; i++) {
            uint32_t seed = 300u + (uint32_t)(round * 3 + i);
            uint64_t sum = device_checksum(fresh[i], bytes, result, stream);
            VS_EXPECT(sum == fill_checksum(seed, words), "round %d, new allocation %d: checksum %llu", round, i,
                   (unsigned long long)sum);
            VS_CHECK(cuMemcpyDtoH(back, fresh[i], bytes));
            for (uint64_t w = 0; w < words; w++) {
                if (back[w] != fill_word(seed, w)) {
                    VS_EXPECT(false, "round %d, new allocation %d: word %llu reads 0x%08x", round, i,
                           (unsigned long long)w, back[w]);
                    break;
                }
            }
        }
    }
    atomic_store(&worker_stop, true);
    pthread_join(thread, NULL);
    VS_EXPECT(worker_rounds > 0, "the other thread never ran");
    for (int i = 0; i < 3; i++)
        VS_CHECK(cuMemFree(fresh[i]));
    VS_CHECK(cuStreamDestroy(stream));
    VS_CHECK(cuMemFree(result));
    free(back);
}

/* ---- free_async ------------------------------------------------------------- */

/* `cuMemFreeAsync` of an ordinary `cuMemAlloc` allocation, as the driver
 * accepts it: freed in stream order, after the work before it on the
 * stream (a slow kernel still writing it), resident or evicted; the memory
 * goes (the address is unknown, a second free fails) and the freed room is
 * usable byte-exact. */
static void case_free_async(void)
{
    const uint64_t bytes = 8 * MiB, words = bytes / 4;
    CUdeviceptr first, buffers[8], result;
    CUstream stream;
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuMemAlloc(&result, sizeof(uint64_t)));

    /* Resident, with a kernel still writing it on the freeing stream. */
    VS_CHECK(cuMemAlloc(&first, bytes));
    uint64_t sleep_ns = 50000000;
    void *args[] = {&first, (void *)&words, &sleep_ns};
    atomic_store(&slow_fill_finished, false);
    VS_CHECK(cuLaunchKernel(fn_slow_fill, 1, 1, 1, 64, 1, 1, 0, stream, args, NULL));
    CUresult rc = cuMemFreeAsync(first, stream);
    VS_EXPECT(rc == CUDA_SUCCESS, "cuMemFreeAsync of a resident cuMemAlloc allocation answered %d", (int)rc);
    VS_CHECK(cuStreamSynchronize(stream));
    VS_EXPECT(atomic_load(&slow_fill_finished), "the kernel before the free never finished");
    expect_unknown("freed asynchronously while written", first);
    VS_EXPECT(cuMemFree(first) != CUDA_SUCCESS, "a second free of the asynchronously freed allocation succeeded");

    /* More than the limit holds: the first ones are evicted when freed. */
    for (int i = 0; i < 8; i++) {
        VS_CHECK(cuMemAlloc(&buffers[i], bytes));
        launch_fill(buffers[i], bytes, 40u + (uint32_t)i, stream);
    }
    VS_CHECK(cuStreamSynchronize(stream));
    bool evicted_seen = false;
    for (int i = 0; i < 4; i++) {
        evicted_seen |= !driver_maps(buffers[i]);
        rc = cuMemFreeAsync(buffers[i], i % 2 == 0 ? stream : NULL);
        VS_EXPECT(rc == CUDA_SUCCESS, "cuMemFreeAsync of buffer %d answered %d", i, (int)rc);
    }
    VS_EXPECT(evicted_seen, "no buffer was evicted when freed");
    VS_CHECK(cuStreamSynchronize(stream));
    VS_CHECK(cuCtxSynchronize());
    for (int i = 0; i < 4; i++)
        expect_unknown("freed asynchronously", buffers[i]);
    /* The freed room holds new allocations beside the rest, byte-exact. */
    for (int i = 0; i < 4; i++) {
        VS_CHECK(cuMemAlloc(&buffers[i], bytes));
        launch_fill(buffers[i], bytes, 80u + (uint32_t)i, stream);
    }
    for (int i = 0; i < 8; i++) {
        uint32_t seed = i < 4 ? 80u + (uint32_t)i : 40u + (uint32_t)i;
        VS_EXPECT(device_checksum(buffers[i], bytes, result, stream) == fill_checksum(seed, words), "buffer %d", i);
        VS_CHECK(cuMemFreeAsync(buffers[i], stream));
    }
    VS_CHECK(cuStreamSynchronize(stream));
    size_t free_bytes = 0, total = 0;
    VS_CHECK(cuMemGetInfo(&free_bytes, &total));
    VS_EXPECT(total - free_bytes < bytes, "%llu bytes still used after every buffer was freed",
              (unsigned long long)(total - free_bytes));
    VS_CHECK(cuStreamDestroy(stream));
    VS_CHECK(cuMemFree(result));
}

/* ---- pin_unified ------------------------------------------------------------ */

/* VRAMSHIM_PIN_DEVICE_POINTERS=on and small unified-addressing copies
 * (`cuMemcpy`, `cuMemcpyAsync`) whose source is an evicted allocation: the
 * source is device memory, not host memory to scan; the copies read the
 * allocation's bytes. Two 8 MiB buffers under an 8 MiB limit, the second
 * written after the first. */
static void case_pin_unified(void)
{
    const uint64_t bytes = 8 * MiB;
    CUdeviceptr first, second;
    CUstream stream;
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuMemAlloc(&first, bytes));
    VS_CHECK(cuMemAlloc(&second, bytes));
    static const uint64_t sizes[] = {8, 4096, 64 << 10};
    uint32_t back[(64 << 10) / 4];
    for (size_t k = 0; k < 2 * (sizeof sizes / sizeof sizes[0]); k++) {
        uint64_t n = sizes[k % 3];
        launch_fill(first, bytes, 21u + (uint32_t)k, NULL);
        launch_fill(second, bytes, 61u + (uint32_t)k, NULL);
        VS_CHECK(cuCtxSynchronize());
        VS_EXPECT(!driver_maps(first), "copy %zu: the first buffer is not evicted", k);
        memset(back, 0, sizeof back);
        /* From 4 bytes in: the source's words are not aligned either. */
        if (k < 3) {
            VS_CHECK(cuMemcpy((CUdeviceptr)(uintptr_t)back, first + 4, n));
        } else {
            VS_CHECK(cuMemcpyAsync((CUdeviceptr)(uintptr_t)back, first + 4, n, stream));
            VS_CHECK(cuStreamSynchronize(stream));
        }
        for (uint64_t w = 0; w < n / 4; w++) {
            if (back[w] != fill_word(21u + (uint32_t)k, w + 1)) {
                VS_EXPECT(false, "copy %zu of %llu bytes: word %llu reads 0x%08x", k, (unsigned long long)n,
                          (unsigned long long)w, back[w]);
                break;
            }
        }
    }
    VS_CHECK(cuMemFree(first));
    VS_CHECK(cuMemFree(second));
    VS_CHECK(cuStreamDestroy(stream));
}

/* ---- restore_spill ---------------------------------------------------------- */

/* The disk tier with a host pool smaller than two allocations together
 * (VRAM_LIMIT=30M, VRAMSHIM_HOST_LIMIT=34M, a spill directory): allocations
 * of 10 and 26 MiB used in turn, each read back by `cuMemcpyDtoHAsync`
 * while the other is resident. Restoring one needs the other evicted while
 * the pool still holds the restored one's copy: the shim spills or streams
 * instead of answering CUDA_ERROR_OUT_OF_MEMORY, and every byte comes back. */
static void case_restore_spill(int rounds)
{
    const uint64_t sizes[2] = {10 * MiB, 26 * MiB};
    CUdeviceptr buffers[2];
    CUstream stream;
    uint32_t *back = malloc(sizes[1]);
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 2; i++)
        VS_CHECK(cuMemAlloc(&buffers[i], sizes[i]));
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < 2; i++)
            launch_fill(buffers[i], sizes[i], 500u + (uint32_t)(round * 2 + i), stream);
        VS_CHECK(cuStreamSynchronize(stream));
        for (int k = 0; k < 2; k++) {
            int i = (round + k) % 2;
            uint32_t seed = 500u + (uint32_t)(round * 2 + i);
            CUresult rc = cuMemcpyDtoHAsync(back, buffers[i], sizes[i], stream);
            VS_EXPECT(rc == CUDA_SUCCESS, "round %d: reading back the %llu MiB buffer answered %d", round,
                      (unsigned long long)(sizes[i] / MiB), (int)rc);
            if (rc != CUDA_SUCCESS)
                continue;
            VS_CHECK(cuStreamSynchronize(stream));
            for (uint64_t w = 0; w < sizes[i] / 4; w++) {
                if (back[w] != fill_word(seed, w)) {
                    VS_EXPECT(false, "round %d, the %llu MiB buffer: word %llu reads 0x%08x", round,
                              (unsigned long long)(sizes[i] / MiB), (unsigned long long)w, back[w]);
                    break;
                }
            }
        }
    }
    for (int i = 0; i < 2; i++)
        VS_CHECK(cuMemFree(buffers[i]));
    VS_CHECK(cuStreamDestroy(stream));
    free(back);
}

/* ---- meminfo ---------------------------------------------------------------- */

static void expect_meminfo(const char *when, uint64_t expected_total)
{
    size_t free_bytes = 0, total = 0;
    VS_CHECK(cuMemGetInfo_v2(&free_bytes, &total));
    VS_EXPECT(total == expected_total, "%s: cuMemGetInfo total %zu, expected the limit %llu", when, total,
           (unsigned long long)expected_total);
    VS_EXPECT(free_bytes <= total, "%s: cuMemGetInfo free %zu is more than the total %zu", when, free_bytes, total);
    total = 0;
    VS_CHECK(cuMemGetInfo_v2(NULL, &total));
    VS_EXPECT(total == expected_total, "%s: cuMemGetInfo(NULL, &total) total %zu", when, total);
}

static void case_meminfo(uint64_t expected_total, uint64_t each)
{
    CUdeviceptr buffers[3];
    expect_meminfo("at start", expected_total);
    /* Half the limit each: the third does not fit beside the other two,
     * and offload mode evicts rather than refuses. */
    for (int i = 0; i < 3; i++) {
        VS_CHECK(cuMemAlloc(&buffers[i], each));
        launch_fill(buffers[i], each, (uint32_t)i, NULL);
        VS_CHECK(cuCtxSynchronize());
        expect_meminfo(i == 0 ? "after one allocation" : "after more than the limit", expected_total);
    }
    for (int i = 0; i < 3; i++)
        VS_CHECK(cuMemFree(buffers[i]));
    expect_meminfo("after the frees", expected_total);
}

/* ---- pool ------------------------------------------------------------------- */

/* What the simulated device really holds, asked of simcuda itself. */
typedef CUresult mem_get_info_fn_t(size_t *, size_t *);

static uint64_t device_used(void)
{
    static mem_get_info_fn_t *driver_mem_get_info;
    if (driver_mem_get_info == NULL)
        driver_mem_get_info = __extension__(mem_get_info_fn_t *) simcuda_entry_point("cuMemGetInfo_v2");
    size_t free_bytes = 0, total = 0;
    VS_CHECK(driver_mem_get_info(&free_bytes, &total));
    return total - free_bytes;
}

static void expect_within(const char *when, uint64_t limit)
{
    uint64_t used = device_used();
    VS_EXPECT(used <= limit, "%s: the device holds %llu MiB, over the %llu MiB limit", when,
              (unsigned long long)(used / MiB), (unsigned long long)(limit / MiB));
}

/* A memory pool that keeps what is freed (release threshold at its maximum,
 * as PyTorch's cudaMallocAsync backend sets it): the memory it keeps counts
 * against the limit, it is given back when another allocation needs the
 * room, and the device never holds more than the limit. With `cap` the
 * allocation that cannot fit beside live ones is refused; in offload mode
 * it evicts them. */
static void case_pool(uint64_t limit, bool cap)
{
    CUmemoryPool pool;
    CUstream stream;
    CUdeviceptr kept, plain, again, result;
    cuuint64_t keep_all = UINT64_MAX;
    VS_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    VS_CHECK(cuMemAlloc(&result, 8));
    VS_CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
    VS_CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all));

    /* Three quarters of the limit, freed: the pool keeps it. */
    uint64_t big = limit / 4 * 3;
    VS_CHECK(cuMemAllocAsync(&kept, big, stream));
    launch_fill(kept, big, 11, stream);
    VS_EXPECT(device_checksum(kept, big, result, stream) == fill_checksum(11, big / 4), "pool buffer");
    VS_CHECK(cuMemFreeAsync(kept, stream));
    VS_CHECK(cuStreamSynchronize(stream));
    expect_within("after the pool kept its buffer", limit);

    /* Half the limit, plain: fits only once the pool gives back. */
    VS_CHECK(cuMemAlloc(&plain, limit / 2));
    launch_fill(plain, limit / 2, 12, stream);
    VS_EXPECT(device_checksum(plain, limit / 2, result, stream) == fill_checksum(12, limit / 8), "plain buffer");
    expect_within("after a plain allocation beside the pool", limit);

    /* The pool's buffer again, beside the plain one. */
    CUresult rc = cuMemAllocAsync(&again, big, stream);
    if (cap) {
        VS_EXPECT(rc == CUDA_ERROR_OUT_OF_MEMORY, "cap: a pool allocation past the limit answered %d", (int)rc);
    } else {
        VS_EXPECT(rc == CUDA_SUCCESS, "offload: a pool allocation past the limit answered %d", (int)rc);
        if (rc == CUDA_SUCCESS) {
            launch_fill(again, big, 13, stream);
            VS_EXPECT(device_checksum(again, big, result, stream) == fill_checksum(13, big / 4), "pool again");
            VS_CHECK(cuMemFreeAsync(again, stream));
        }
    }
    expect_within("after the second pool allocation", limit);
    VS_CHECK(cuStreamSynchronize(stream));
    VS_EXPECT(device_checksum(plain, limit / 2, result, stream) == fill_checksum(12, limit / 8), "plain kept");
    VS_CHECK(cuMemFree(plain));

    /* Kept memory is reused: a smaller pool allocation takes no more room. */
    VS_CHECK(cuMemAllocAsync(&again, big, stream));
    VS_CHECK(cuMemFreeAsync(again, stream));
    /* (The shim cannot see a pool reuse memory freed earlier on the same
     * stream: it waits for the free to have happened.) */
    VS_CHECK(cuStreamSynchronize(stream));
    VS_CHECK(cuMemAllocAsync(&again, big / 3 * 2, stream));
    launch_fill(again, big / 3 * 2, 14, stream);
    VS_EXPECT(device_checksum(again, big / 3 * 2, result, stream) == fill_checksum(14, big / 3 * 2 / 4), "reused");
    expect_within("after reusing kept memory", limit);
    VS_CHECK(cuMemFreeAsync(again, stream));
    VS_CHECK(cuStreamSynchronize(stream));
    cuuint64_t zero = 0;
    VS_CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
    VS_CHECK(cuMemPoolTrimTo(pool, 0));
    VS_CHECK(cuStreamDestroy(stream));
    VS_CHECK(cuMemFree(result));
}

/* ---- main --------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: preload_offload_api range|context|pitch|limit_zero [data-only]|free ROUNDS|free_async|pin_unified|restore_spill ROUNDS|pool MIB|meminfo MIB\n");
        return 2;
    }
    vs_test_set_phase(argv[1]);
    setup();
    if (strcmp(argv[1], "range") == 0) {
        case_range();
    } else if (strcmp(argv[1], "context") == 0) {
        case_context();
    } else if (strcmp(argv[1], "pitch") == 0) {
        case_pitch();
    } else if (strcmp(argv[1], "limit_zero") == 0 && argc == 2) {
        case_limit_zero(true);
    } else if (strcmp(argv[1], "limit_zero") == 0 && argc == 3 && strcmp(argv[2], "data-only") == 0) {
        case_limit_zero(false);
    } else if (strcmp(argv[1], "free") == 0 && argc == 3 && atoi(argv[2]) > 0) {
        case_free(atoi(argv[2]));
    } else if (strcmp(argv[1], "free_async") == 0 && argc == 2) {
        case_free_async();
    } else if (strcmp(argv[1], "pin_unified") == 0 && argc == 2) {
        case_pin_unified();
    } else if (strcmp(argv[1], "restore_spill") == 0 && argc == 3 && atoi(argv[2]) > 0) {
        case_restore_spill(atoi(argv[2]));
    } else if (strcmp(argv[1], "pool") == 0 && argc == 3) {
        const char *mode = getenv("VRAMSHIM_MODE");
        case_pool(strtoull(argv[2], NULL, 10) * MiB, mode != NULL && strcmp(mode, "cap") == 0);
    } else if (strcmp(argv[1], "meminfo") == 0 && (argc == 3 || argc == 4)) {
        uint64_t total = strtoull(argv[2], NULL, 10) * MiB;
        case_meminfo(total, argc == 4 ? strtoull(argv[3], NULL, 10) * MiB : total / 2);
    } else {
        fprintf(stderr, "preload_offload_api: unknown case %s\n", argv[1]);
        return 2;
    }
    unsigned long failed = vs_test_failure_count();
    printf("preload_offload_api %s: %s (%lu failures)\n", argv[1], failed == 0 ? "ok" : "FAILED", failed);
    return failed == 0 ? 0 : 1;
}

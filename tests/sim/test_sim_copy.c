/* test_sim_copy.c: simcuda's copies and memsets: typed and unified linear
 * copies, 2-D/3-D strided copies, peer copies, memsets of every width, the
 * per-thread variants, and the errors real programs can hit.
 */
#include <cuda.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static CUcontext ctx;

static int setup(void **state)
{
    (void)state;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static void test_linear_copies_round_trip_every_direction(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    unsigned char *src = malloc(N), *dst = malloc(N);
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    CUdeviceptr a, b;
    CUstream s;
    assert_int_equal(cuMemAlloc_v2(&a, N), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&b, N), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);

    assert_int_equal(cuMemcpyHtoD_v2(a, src, N), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoD_v2(b, a, N), CUDA_SUCCESS);
    memset(dst, 0, N);
    assert_int_equal(cuMemcpyDtoH_v2(dst, b, N), CUDA_SUCCESS);
    assert_memory_equal(dst, src, N);

    /* Unified addressing: cuMemcpy infers the direction. */
    assert_int_equal(cuMemsetD8_v2(b, 0, N), CUDA_SUCCESS);
    assert_int_equal(cuMemcpy(b, (CUdeviceptr)src, N), CUDA_SUCCESS);
    memset(dst, 0, N);
    assert_int_equal(cuMemcpy((CUdeviceptr)dst, b, N), CUDA_SUCCESS);
    assert_memory_equal(dst, src, N);

    /* Asynchronous forms on a stream, and their per-thread variants. */
    memset(dst, 0, N);
    assert_int_equal(cuMemsetD8Async(a, 0, N, s), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoDAsync_v2(a, src, N, s), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoDAsync_v2(b, a, N, s), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyAsync((CUdeviceptr)dst, b, N / 2, s), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoHAsync_v2(dst + N / 2, b + N / 2, N / 2, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_memory_equal(dst, src, N);

    memset(dst, 0, N);
    assert_int_equal(cuMemcpyHtoDAsync_v2_ptsz(a, src, N, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoDAsync_v2_ptsz(b, a, N, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoHAsync_v2_ptsz(dst, b, N, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS);
    assert_memory_equal(dst, src, N);
    memset(dst, 0, N);
    assert_int_equal(cuMemcpyDtoD_v2_ptds(a, b, N), CUDA_SUCCESS);
    assert_int_equal(cuMemcpy_ptds((CUdeviceptr)dst, a, N), CUDA_SUCCESS);
    assert_memory_equal(dst, src, N);

    cuStreamDestroy_v2(s);
    cuMemFree_v2(a);
    cuMemFree_v2(b);
    free(src);
    free(dst);
}

static void test_typed_copy_rejects_pageable_memory_on_device_side(void **state)
{
    (void)state;
    char host[16] = {0}, other[16] = {0};
    CUdeviceptr d;
    assert_int_equal(cuMemAlloc_v2(&d, 16), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoD_v2((CUdeviceptr)other, host, 16), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemcpyDtoH_v2(host, (CUdeviceptr)other, 16), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemcpyHtoD_v2(0, host, 16), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemcpyHtoD_v2(d, host, 0), CUDA_SUCCESS);
    /* Pinned host memory is device-accessible at the same address. */
    void *pinned;
    assert_int_equal(cuMemAllocHost_v2(&pinned, 16), CUDA_SUCCESS);
    memset(pinned, 9, 16);
    assert_int_equal(cuMemcpyDtoD_v2(d, (CUdeviceptr)pinned, 16), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(host, d, 16), CUDA_SUCCESS);
    assert_int_equal(host[15], 9);
    cuMemFreeHost(pinned);
    cuMemFree_v2(d);
}

static void test_memset_widths_write_exact_patterns(void **state)
{
    (void)state;
    CUdeviceptr d;
    uint32_t out[8];
    assert_int_equal(cuMemAlloc_v2(&d, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(d, 0xdeadbeef, 8), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD16_v2(d, 0x1234, 2), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8_v2(d + 31, 0x77, 1), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(out, d, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(out[0], 0x12341234);
    assert_int_equal(out[1], 0xdeadbeef);
    assert_int_equal(out[7], 0x77adbeef);
    assert_int_equal(cuMemsetD32_v2(d + 2, 0, 1), CUDA_ERROR_INVALID_VALUE); /* misaligned */
    assert_int_equal(cuMemsetD16_v2(d + 1, 0, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemsetD32_v2_ptds(d, 5, 8), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD16Async_ptsz(d, 6, 2, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(d + 4, 7, 4, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(out, d, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(out[0], 0x00060006);
    assert_int_equal(out[1], 0x07070707);
    assert_int_equal(out[2], 5);
    cuMemFree_v2(d);
}

/* A 2-D memset touches only Width elements of each of Height rows. */
static void test_memset_2d_respects_pitch(void **state)
{
    (void)state;
    enum { PITCH = 64, ROWS = 4 };
    CUdeviceptr d;
    uint8_t out[PITCH * ROWS];
    assert_int_equal(cuMemAlloc_v2(&d, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8_v2(d, 0, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD2D32_v2(d, PITCH, 0x01010101, 3, ROWS), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD2D16Async(d + 12, PITCH, 0x0202, 2, ROWS, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD2D8_v2(d + 16, PITCH, 3, 1, ROWS - 1), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(out, d, sizeof(out)), CUDA_SUCCESS);
    for (int r = 0; r < ROWS; r++) {
        for (int c = 0; c < PITCH; c++) {
            int expected = c < 12 ? 1 : c < 16 ? 2 : (c == 16 && r < ROWS - 1) ? 3 : 0;
            assert_int_equal(out[r * PITCH + c], expected);
        }
    }
    assert_int_equal(cuMemsetD2D8_v2(d, 2, 0, 4, 2), CUDA_ERROR_INVALID_VALUE); /* pitch < width */
    cuMemFree_v2(d);
}

/* Copy a 3x4 window out of a 16-wide host image into a pitched device
 * buffer and back into a fresh host buffer. */
static void test_2d_copy_moves_a_window(void **state)
{
    (void)state;
    uint8_t image[8][16], back[8][16];
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 16; x++)
            image[y][x] = (uint8_t)(y * 16 + x);
    memset(back, 0xff, sizeof(back));
    CUdeviceptr d;
    assert_int_equal(cuMemAlloc_v2(&d, 32 * 8), CUDA_SUCCESS);
    CUDA_MEMCPY2D up = {
        .srcXInBytes = 2, .srcY = 1, .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = image, .srcPitch = 16,
        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = 32,
        .WidthInBytes = 3, .Height = 4,
    };
    assert_int_equal(cuMemcpy2D_v2(&up), CUDA_SUCCESS);
    CUDA_MEMCPY2D down = {
        .srcMemoryType = CU_MEMORYTYPE_UNIFIED, .srcDevice = d, .srcPitch = 32,
        .dstXInBytes = 5, .dstY = 2, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back, .dstPitch = 16,
        .WidthInBytes = 3, .Height = 4,
    };
    assert_int_equal(cuMemcpy2DAsync_v2(&down, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 16; x++) {
            bool inside = y >= 2 && y < 6 && x >= 5 && x < 8;
            assert_int_equal(back[y][x], inside ? image[y - 1][x - 3] : 0xff);
        }
    up.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    assert_int_equal(cuMemcpy2DUnaligned_v2(&up), CUDA_ERROR_NOT_SUPPORTED);
    up.srcMemoryType = CU_MEMORYTYPE_HOST;
    up.dstPitch = 2; /* narrower than the width */
    assert_int_equal(cuMemcpy2D_v2(&up), CUDA_ERROR_INVALID_VALUE);
    cuMemFree_v2(d);
}

static void test_3d_copy_moves_a_box(void **state)
{
    (void)state;
    enum { X = 8, Y = 4, Z = 3 };
    uint8_t volume[Z][Y][X], back[Z][Y][X];
    for (int z = 0; z < Z; z++)
        for (int y = 0; y < Y; y++)
            for (int x = 0; x < X; x++)
                volume[z][y][x] = (uint8_t)(z * 50 + y * 10 + x);
    memset(back, 0, sizeof(back));
    CUdeviceptr d;
    assert_int_equal(cuMemAlloc_v2(&d, sizeof(volume)), CUDA_SUCCESS);
    CUDA_MEMCPY3D up = {
        .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = volume, .srcPitch = X, .srcHeight = Y,
        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = X, .dstHeight = Y,
        .WidthInBytes = X, .Height = Y, .Depth = Z,
    };
    assert_int_equal(cuMemcpy3D_v2(&up), CUDA_SUCCESS);
    /* Copy back only the box x 1..3, y 1..2, z 1..2. */
    CUDA_MEMCPY3D down = {
        .srcXInBytes = 1, .srcY = 1, .srcZ = 1, .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d,
        .srcPitch = X, .srcHeight = Y,
        .dstXInBytes = 1, .dstY = 1, .dstZ = 1, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back,
        .dstPitch = X, .dstHeight = Y,
        .WidthInBytes = 3, .Height = 2, .Depth = 2,
    };
    assert_int_equal(cuMemcpy3DAsync_v2_ptsz(&down, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS);
    for (int z = 0; z < Z; z++)
        for (int y = 0; y < Y; y++)
            for (int x = 0; x < X; x++) {
                bool inside = z >= 1 && y >= 1 && y < 3 && x >= 1 && x < 4;
                assert_int_equal(back[z][y][x], inside ? volume[z][y][x] : 0);
            }
    cuMemFree_v2(d);
}

static void test_peer_copy_between_contexts(void **state)
{
    (void)state;
    CUdeviceptr a, b;
    uint32_t in[4] = {1, 2, 3, 4}, out[4] = {0};
    assert_int_equal(cuMemAlloc_v2(&a, 16), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&b, 16), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoD_v2(a, in, 16), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyPeer(b, ctx, a, ctx, 16), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(out, b, 16), CUDA_SUCCESS);
    assert_memory_equal(out, in, 16);
    assert_int_equal(cuMemsetD32_v2(b, 0, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyPeerAsync_ptsz(b, ctx, a, ctx, 16, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2_ptds(out, b, 16), CUDA_SUCCESS);
    assert_memory_equal(out, in, 16);
    assert_int_equal(cuMemcpyPeer(b, NULL, a, ctx, 16), CUDA_ERROR_INVALID_CONTEXT);
    cuMemFree_v2(a);
    cuMemFree_v2(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_copies_round_trip_every_direction),
        cmocka_unit_test(test_typed_copy_rejects_pageable_memory_on_device_side),
        cmocka_unit_test(test_memset_widths_write_exact_patterns),
        cmocka_unit_test(test_memset_2d_respects_pitch),
        cmocka_unit_test(test_2d_copy_moves_a_window),
        cmocka_unit_test(test_3d_copy_moves_a_box),
        cmocka_unit_test(test_peer_copy_between_contexts),
    };
    return cmocka_run_group_tests_name("simcuda copies and memsets", tests, setup, NULL);
}

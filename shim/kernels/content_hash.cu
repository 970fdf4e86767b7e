/* content_hash.cu: the device side of `content_hash.h`.
 *
 * `vramshim_content_hash` adds `vs_content_hash_update(h, 0, data, bytes)`
 * into `lanes[0..1]`: the caller zeroes them, launches, and applies
 * `vs_content_hash_final` on the host. Each thread sums the words of a
 * grid-stride loop, each block reduces its threads' sums and adds them with
 * one atomic add per lane; the sum does not depend on the order of the
 * words, so any grid gives the same lanes.
 *
 * Compiled to PTX for the oldest architecture the toolkit targets and
 * embedded in the shim (shim/kernels/meson.build); the driver compiles it
 * for the GPU at load time.
 */
#include "content_hash.h"

/* A warp's sum, in lane 0. */
__device__ static unsigned long long vs_warp_sum(unsigned long long v)
{
    for (int delta = 16; delta > 0; delta /= 2)
        v += __shfl_down_sync(0xffffffffu, v, delta);
    return v;
}

/* `data` is 8-byte aligned (device allocations are); `bytes` may be any
 * length: the last, partial word is read byte by byte and padded with
 * zeros, as the host does. Any block size that is a multiple of 32, up to
 * 1024. */
extern "C" __global__ void vramshim_content_hash(const unsigned long long *data, unsigned long long bytes,
                                                 unsigned long long *lanes)
{
    __shared__ unsigned long long warp_sums[2][32];
    unsigned long long words = bytes / 8;
    unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long l0 = 0, l1 = 0;

    for (unsigned long long i = first; i < words; i += stride) {
        unsigned long long w = data[i];
        l0 += vs_content_hash_mix0(w, i);
        l1 += vs_content_hash_mix1(w, i);
    }
    if (bytes % 8 != 0 && first == 0) {
        const unsigned char *tail = (const unsigned char *)(data + words);
        unsigned long long w = 0;
        for (unsigned k = 0; k < bytes % 8; k++)
            w |= (unsigned long long)tail[k] << (8 * k);
        l0 += vs_content_hash_mix0(w, words);
        l1 += vs_content_hash_mix1(w, words);
    }

    l0 = vs_warp_sum(l0);
    l1 = vs_warp_sum(l1);
    unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) {
        warp_sums[0][warp] = l0;
        warp_sums[1][warp] = l1;
    }
    __syncthreads();
    if (warp == 0) {
        l0 = lane < warps ? warp_sums[0][lane] : 0;
        l1 = lane < warps ? warp_sums[1][lane] : 0;
        l0 = vs_warp_sum(l0);
        l1 = vs_warp_sum(l1);
        if (lane == 0) {
            atomicAdd(&lanes[0], l0);
            atomicAdd(&lanes[1], l1);
        }
    }
}

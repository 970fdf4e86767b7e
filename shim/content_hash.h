/* content_hash.h: the content hash that decides whether an allocation's
 * bytes changed, and that checks spilled extents on read-back.
 *
 * A verdict of "unchanged" lets the engine drop an allocation without
 * copying it back, so the hash must catch every change that matters:
 *
 * - The bytes are read as little-endian 64-bit words, the last one padded
 *   with zeros; word i with value w adds mix(w, i) to each of two 64-bit
 *   lanes (sums mod 2^64), with a different mix per lane. The length is
 *   folded in at the end.
 * - For a fixed position, mix is a bijection of w, so changing any one word
 *   always changes both lanes: a single changed word (any single write) is
 *   never missed. Several changed words collide only if their differences
 *   cancel in both lanes at once, which for data that is not built to
 *   attack the hash has a probability of about 2^-128.
 * - The sum does not depend on the order the words are added in, so a GPU
 *   computes it with one atomic add per lane per thread block; the host
 *   computes it over a copy made of several extents by passing each
 *   extent's offset.
 *
 * `shim/kernels/content_hash.cu` is the device version (the shim loads it
 * as PTX), and simcuda's built-in kernel of the same name computes it with
 * this header; tests compare the three.
 */
#ifndef VS_CONTENT_HASH_H
#define VS_CONTENT_HASH_H

#include <stdint.h>
#include <string.h>

/* The mixes compile for the device too: the kernel includes this header,
 * so the constants exist once. */
#ifdef __CUDACC__
#define VS_HD __host__ __device__
#else
#define VS_HD
#endif

/* The kernel's name, in the PTX module and in simcuda:
 * vramshim_content_hash(const void *data, uint64_t bytes, uint64_t *lanes) */
#define VS_CONTENT_HASH_KERNEL "vramshim_content_hash"

typedef struct vs_content_hash_s {
    uint64_t lane[2];
} vs_content_hash_t;

#define VS_CONTENT_HASH_K0 0x9e3779b97f4a7c15ull
#define VS_CONTENT_HASH_K1 0xc2b2ae3d27d4eb4full

/* The two bijective mixes (xor-shift-multiply finalizers). */
VS_HD static inline uint64_t vs_content_hash_mix0(uint64_t w, uint64_t index)
{
    uint64_t x = w ^ (index * VS_CONTENT_HASH_K0);
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

VS_HD static inline uint64_t vs_content_hash_mix1(uint64_t w, uint64_t index)
{
    uint64_t x = w + (index + 1) * VS_CONTENT_HASH_K1;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Adds `bytes` of `data`, found at byte `offset` of the whole (a multiple
 * of 8 unless this is the last piece), to the lanes of `h`. Start from
 * {0, 0}; call `vs_content_hash_final` once every piece is in. */
static inline void vs_content_hash_update(vs_content_hash_t *h, uint64_t offset, const void *data, uint64_t bytes)
{
    const unsigned char *p = (const unsigned char *)data;
    uint64_t index = offset / 8;
    uint64_t l0 = h->lane[0], l1 = h->lane[1];
    uint64_t whole = bytes / 8;
    for (uint64_t i = 0; i < whole; i++, index++) {
        uint64_t w;
        memcpy(&w, p + i * 8, 8);
        l0 += vs_content_hash_mix0(w, index);
        l1 += vs_content_hash_mix1(w, index);
    }
    if (bytes % 8 != 0) {
        uint64_t w = 0;
        for (uint64_t k = 0; k < bytes % 8; k++)
            w |= (uint64_t)p[whole * 8 + k] << (8 * k);
        l0 += vs_content_hash_mix0(w, index);
        l1 += vs_content_hash_mix1(w, index);
    }
    h->lane[0] = l0;
    h->lane[1] = l1;
}

/* Folds the total length in (so that zero bytes appended to a multiple of
 * 8 change the hash too). */
static inline vs_content_hash_t vs_content_hash_final(vs_content_hash_t h, uint64_t total_bytes)
{
    h.lane[0] = vs_content_hash_mix0(h.lane[0] ^ total_bytes, 0);
    h.lane[1] = vs_content_hash_mix1(h.lane[1] ^ total_bytes, 1);
    return h;
}

/* The hash of one contiguous buffer. */
static inline vs_content_hash_t vs_content_hash(const void *data, uint64_t bytes)
{
    vs_content_hash_t h = {{0, 0}};
    vs_content_hash_update(&h, 0, data, bytes);
    return vs_content_hash_final(h, bytes);
}

static inline int vs_content_hash_equal(vs_content_hash_t a, vs_content_hash_t b)
{
    return a.lane[0] == b.lane[0] && a.lane[1] == b.lane[1];
}

#endif /* VS_CONTENT_HASH_H */

/* fuzz_snapshot_corpus.c: the snapshot fuzz target's corpus for the
 * portable driver (tests/common/fuzz_driver.c): valid images of several
 * generations from snapshot_pattern.h as seeds, and a mutator for a binary
 * layout (bit flips, interesting values in aligned header and row fields,
 * truncation, extension, random bytes in the header).
 *
 * usage: fuzz_snapshot_driver [--seconds S] [--seed N] [FILE...]
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_target.h"
#include "snapshot_abi.h"
#include "snapshot_pattern.h"

static const uint64_t interesting[] = {
    0, 1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 65, 127, 128, 255, 256, 4095, 4096, 65535, 65536,
    VS_SNAPSHOT_MAX_ROWS, VS_SNAPSHOT_MAX_ROWS + 1, 0x7fffffff, 0x80000000, 0xffffffff,
    UINT64_C(0x100000000), INT64_MAX, UINT64_MAX, VS_SNAPSHOT_MAGIC, VS_SNAPSHOT_ABI_VERSION,
    sizeof(vs_snapshot_header_t), sizeof(vs_snapshot_row_t),
};

/* Valid snapshots of several generations (row counts 8..64). */
static void *snapshot_seed(size_t index, size_t *size)
{
    return vs_pattern_image((uint64_t)index * 7 + 1, size);
}

static void snapshot_mutate(uint8_t *buf, size_t *len, size_t cap)
{
    int rounds = 1 + (int)(vs_fuzz_rng() % 4);
    for (int r = 0; r < rounds; r++) {
        switch (vs_fuzz_rng() % 6) {
        case 0: /* flip bits */
            if (*len)
                buf[vs_fuzz_rng() % *len] ^= (uint8_t)(1u << (vs_fuzz_rng() % 8));
            break;
        case 1: /* an interesting value in an aligned 32-bit field */
            if (*len >= 4) {
                uint32_t v = (uint32_t)interesting[vs_fuzz_rng() % (sizeof(interesting) / 8)];
                memcpy(buf + (vs_fuzz_rng() % (*len / 4)) * 4, &v, 4);
            }
            break;
        case 2: /* an interesting value in an aligned 64-bit field */
            if (*len >= 8) {
                uint64_t v = interesting[vs_fuzz_rng() % (sizeof(interesting) / 8)];
                memcpy(buf + (vs_fuzz_rng() % (*len / 8)) * 8, &v, 8);
            }
            break;
        case 3: /* truncate */
            if (*len)
                *len = vs_fuzz_rng() % *len;
            break;
        case 4: /* extend with random bytes */
            while (*len < cap && vs_fuzz_rng() % 64)
                buf[(*len)++] = (uint8_t)vs_fuzz_rng();
            break;
        case 5: /* random bytes anywhere in the header */
            for (int i = 0; i < 8 && *len; i++)
                buf[vs_fuzz_rng() % (*len < 1024 ? *len : 1024)] = (uint8_t)vs_fuzz_rng();
            break;
        }
    }
}

const vs_fuzz_corpus_t vs_fuzz_corpus = {
    .name = "snapshot",
    .seed_count = 8,
    .seed_image = snapshot_seed,
    .mutate = snapshot_mutate,
};

/* fuzz_snapshot_driver.c: runs the snapshot fuzz target (fuzz_snapshot.c)
 * without libFuzzer, so that gcc builds (and their ASan/UBSan variants)
 * exercise it too: valid images from snapshot_pattern.h, then mutations of
 * them (bit flips, interesting values in header and row fields, truncation,
 * extension) for a bounded time. Deterministic for a given --seed.
 *
 * usage: fuzz_snapshot_driver [--seconds S] [--seed N] [FILE...]
 * FILEs (e.g. libFuzzer crash reproducers) are run once each first.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snapshot_abi.h"
#include "snapshot_pattern.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng_state;

static uint64_t rng(void)
{
    /* xorshift64*: fast, deterministic, good enough to pick mutations. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const uint64_t interesting[] = {
    0, 1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 65, 127, 128, 255, 256, 4095, 4096, 65535, 65536,
    VS_SNAPSHOT_MAX_ROWS, VS_SNAPSHOT_MAX_ROWS + 1, 0x7fffffff, 0x80000000, 0xffffffff,
    UINT64_C(0x100000000), INT64_MAX, UINT64_MAX, VS_SNAPSHOT_MAGIC, VS_SNAPSHOT_ABI_VERSION,
    sizeof(vs_snapshot_header_t), sizeof(vs_snapshot_row_t),
};

static void mutate(uint8_t *buf, size_t *len, size_t cap)
{
    int rounds = 1 + (int)(rng() % 4);
    for (int r = 0; r < rounds; r++) {
        switch (rng() % 6) {
        case 0: /* flip bits */
            if (*len)
                buf[rng() % *len] ^= (uint8_t)(1u << (rng() % 8));
            break;
        case 1: /* an interesting value in an aligned 32-bit field */
            if (*len >= 4) {
                uint32_t v = (uint32_t)interesting[rng() % (sizeof(interesting) / 8)];
                memcpy(buf + (rng() % (*len / 4)) * 4, &v, 4);
            }
            break;
        case 2: /* an interesting value in an aligned 64-bit field */
            if (*len >= 8) {
                uint64_t v = interesting[rng() % (sizeof(interesting) / 8)];
                memcpy(buf + (rng() % (*len / 8)) * 8, &v, 8);
            }
            break;
        case 3: /* truncate */
            if (*len)
                *len = rng() % *len;
            break;
        case 4: /* extend with random bytes */
            while (*len < cap && rng() % 64)
                buf[(*len)++] = (uint8_t)rng();
            break;
        case 5: /* random bytes anywhere in the header */
            for (int i = 0; i < 8 && *len; i++)
                buf[rng() % (*len < 1024 ? *len : 1024)] = (uint8_t)rng();
            break;
        }
    }
}

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    static uint8_t data[1 << 20];
    size_t n = fread(data, 1, sizeof(data), f);
    fclose(f);
    LLVMFuzzerTestOneInput(data, n);
    return 0;
}

int main(int argc, char **argv)
{
    double seconds = 3.0;
    rng_state = UINT64_C(0x9e3779b97f4a7c15);
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
        {
            /* Mixed (splitmix64), not forced odd: N and N|1 are different
             * seeds, and none leaves xorshift at 0. */
            uint64_t z = strtoull(argv[++i], NULL, 0) + UINT64_C(0x9e3779b97f4a7c15);
            z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
            z ^= z >> 31;
            rng_state = z != 0 ? z : UINT64_C(0x9e3779b97f4a7c15);
        }
        else
            break;
    }
    for (; i < argc; i++)
        if (run_file(argv[i]) < 0)
            return 1;

    /* Seeds: valid snapshots of several generations (row counts 8..64). */
    enum { SEEDS = 8 };
    void *seed[SEEDS];
    size_t seed_len[SEEDS], cap = 0;
    for (int s = 0; s < SEEDS; s++) {
        seed[s] = vs_pattern_image((uint64_t)s * 7 + 1, &seed_len[s]);
        if (!seed[s])
            return 1;
        LLVMFuzzerTestOneInput(seed[s], seed_len[s]);
        if (seed_len[s] > cap)
            cap = seed_len[s];
    }
    cap += 4096;
    uint8_t *work = malloc(cap);
    if (!work)
        return 1;

    double end = now_s() + seconds;
    unsigned long runs = 0;
    while (runs % 256 != 0 || now_s() < end) {
        int s = (int)(rng() % SEEDS);
        size_t len = seed_len[s];
        memcpy(work, seed[s], len);
        mutate(work, &len, cap);
        LLVMFuzzerTestOneInput(work, len);
        runs++;
    }
    printf("fuzz_snapshot_driver: %lu inputs in %.1f s, no crash\n", runs, seconds);
    free(work);
    for (int s = 0; s < SEEDS; s++)
        free(seed[s]);
    return 0;
}

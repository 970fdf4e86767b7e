/* fuzz_driver.c: runs a fuzz target (fuzz_target.h) without libFuzzer, so
 * that gcc builds and their ASan/UBSan variants exercise it too: the
 * target's seeds as they are, then mutations of them for a bounded time,
 * each run on an exactly sized copy. Text targets take the mutator here
 * (byte flips, token insertions, deletions, duplications, splices, long runs
 * of one byte, truncation); a target with its own (the snapshot's: bit
 * flips, interesting values in fields, truncation, extension) sets the
 * corpus's `mutate` hook. Deterministic for a given --seed.
 *
 * usage: fuzz_<target>_driver [--seconds S | --runs N] [--seed N] [FILE...]
 * Every seed value is its own sequence (it is mixed, not forced odd), and
 * the last line names the seed and a digest of every input generated, so
 * two runs can be compared.
 * FILEs (regression inputs, libFuzzer crash reproducers) are run once each
 * first. When a generated input aborts or crashes the target, it is written
 * to `crash-<target>` in the working directory, to be replayed as a FILE.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_target.h"

/* Text inputs grow up to this: past the longest limits the targets check
 * (4096-byte paths, 512-byte trace lines). */
#define VS_FUZZ_INPUT_CAP 8192

static uint64_t rng_state;

uint64_t vs_fuzz_rng(void)
{
    /* xorshift64*: fast, deterministic, good enough to pick mutations. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

/* splitmix64's finaliser: distinct seeds give distinct, non-zero states
 * (xorshift must not start at 0). */
static uint64_t rng_seed_state(uint64_t seed)
{
    uint64_t z = seed + UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return z != 0 ? z : UINT64_C(0x9e3779b97f4a7c15);
}

static size_t rng_below(size_t n)
{
    return n ? (size_t)(vs_fuzz_rng() % n) : 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Inserts `len` bytes at `at`, as many as fit. */
static void insert_bytes(uint8_t *buf, size_t *size, size_t at, const void *bytes, size_t len)
{
    if (len > VS_FUZZ_INPUT_CAP - *size)
        len = VS_FUZZ_INPUT_CAP - *size;
    memmove(buf + at + len, buf + at, *size - at);
    memcpy(buf + at, bytes, len);
    *size += len;
}

/* Run lengths around the limits the parsers check. */
static const size_t vs_fuzz_run_lengths[] = {1, 2, 17, 20, 21, 63, 64, 65, 511, 512, 513, 4095, 4096};

static void mutate_text(uint8_t *buf, size_t *size, size_t cap)
{
    (void)cap; /* at least VS_FUZZ_INPUT_CAP */
    const vs_fuzz_corpus_t *corpus = &vs_fuzz_corpus;
    int rounds = 1 + (int)rng_below(4);
    for (int r = 0; r < rounds; r++) {
        switch (vs_fuzz_rng() % 8) {
        case 0: /* flip a bit */
            if (*size)
                buf[rng_below(*size)] ^= (uint8_t)(1u << rng_below(8));
            break;
        case 1: /* a random byte, often a delimiter or a control character */
            if (*size) {
                static const char specials[] = "0123456789.%:,-+ \t\r\n#xXeE\x7f\x80\xff";
                buf[rng_below(*size)] = vs_fuzz_rng() % 2 ? (uint8_t)specials[rng_below(sizeof specials - 1)]
                                                  : (uint8_t)vs_fuzz_rng();
            }
            break;
        case 2: { /* insert a token */
            const char *token = corpus->tokens[rng_below(corpus->token_count)];
            insert_bytes(buf, size, rng_below(*size + 1), token, strlen(token));
            break;
        }
        case 3: /* delete a range */
            if (*size) {
                size_t at = rng_below(*size), len = 1 + rng_below(*size - at);
                memmove(buf + at, buf + at + len, *size - at - len);
                *size -= len;
            }
            break;
        case 4: /* duplicate a range */
            if (*size) {
                uint8_t copy[VS_FUZZ_INPUT_CAP];
                size_t at = rng_below(*size), len = 1 + rng_below(*size - at);
                memcpy(copy, buf + at, len);
                insert_bytes(buf, size, rng_below(*size + 1), copy, len);
            }
            break;
        case 5: /* truncate */
            if (*size)
                *size = rng_below(*size);
            break;
        case 6: { /* splice: the tail of another seed */
            const char *other = corpus->seeds[rng_below(corpus->seed_count)];
            size_t other_len = strlen(other), from = rng_below(other_len + 1);
            size_t at = rng_below(*size + 1);
            *size = at;
            insert_bytes(buf, size, at, other + from, other_len - from);
            break;
        }
        case 7: { /* a long run of one byte */
            static uint8_t run[4096];
            size_t len = vs_fuzz_run_lengths[rng_below(sizeof vs_fuzz_run_lengths /
                                                       sizeof vs_fuzz_run_lengths[0])];
            memset(run, *size && vs_fuzz_rng() % 2 ? buf[rng_below(*size)] : (uint8_t)"09aG/ "[rng_below(6)],
                   len);
            insert_bytes(buf, size, rng_below(*size + 1), run, len);
            break;
        }
        }
    }
}

/* The generated input being run, for the crash handler. */
static const uint8_t *vs_fuzz_current;
static size_t vs_fuzz_current_size;

static void vs_fuzz_save_crash(int sig)
{
    char path[64] = "crash-";
    strncat(path, vs_fuzz_corpus.name, sizeof path - sizeof "crash-");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0 && vs_fuzz_current) {
        ssize_t ignored = write(fd, vs_fuzz_current, vs_fuzz_current_size);
        (void)ignored;
        static const char note[] = "fuzz driver: the input is saved as crash-<target>\n";
        ignored = write(STDERR_FILENO, note, sizeof note - 1);
        (void)ignored;
    }
    if (fd >= 0)
        close(fd);
    signal(sig, SIG_DFL);
    raise(sig);
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
    const vs_fuzz_corpus_t *corpus = &vs_fuzz_corpus;
    void (*mutate)(uint8_t *, size_t *, size_t) = corpus->mutate ? corpus->mutate : mutate_text;
    double seconds = 3.0;
    unsigned long long rng_seed = 0, max_runs = 0;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            max_runs = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            rng_seed = strtoull(argv[++i], NULL, 0);
        else
            break;
    }
    rng_state = rng_seed_state(rng_seed);
    for (; i < argc; i++)
        if (run_file(argv[i]) < 0)
            return 1;

    /* The seeds, run as they are; the work buffer leaves room to grow. */
    const uint8_t **seed = calloc(corpus->seed_count, sizeof *seed);
    size_t *seed_size = calloc(corpus->seed_count, sizeof *seed_size);
    if (!seed || !seed_size)
        return 1;
    size_t cap = 0;
    for (size_t s = 0; s < corpus->seed_count; s++) {
        if (corpus->seed_image) {
            seed[s] = corpus->seed_image(s, &seed_size[s]);
            if (!seed[s])
                return 1;
        } else {
            seed[s] = (const uint8_t *)corpus->seeds[s];
            seed_size[s] = strlen(corpus->seeds[s]);
        }
        LLVMFuzzerTestOneInput(seed[s], seed_size[s]);
        if (seed_size[s] > cap)
            cap = seed_size[s];
    }
    cap += 4096;
    if (cap < VS_FUZZ_INPUT_CAP)
        cap = VS_FUZZ_INPUT_CAP;
    uint8_t *work = malloc(cap);
    if (!work)
        return 1;

    signal(SIGABRT, vs_fuzz_save_crash);
    signal(SIGSEGV, vs_fuzz_save_crash);
    double end = now_s() + seconds;
    unsigned long runs = 0;
    uint64_t digest = UINT64_C(0xcbf29ce484222325); /* FNV-1a over every input */
    while (max_runs ? runs < max_runs : (runs % 256 != 0 || now_s() < end)) {
        size_t s = rng_below(corpus->seed_count);
        size_t size = seed_size[s];
        memcpy(work, seed[s], size);
        mutate(work, &size, cap);
        /* The target gets an exactly sized copy, so that ASan sees a read
         * past `size`. */
        uint8_t *input = malloc(size ? size : 1);
        if (!input)
            return 1;
        memcpy(input, work, size);
        for (size_t b = 0; b < size; b++)
            digest = (digest ^ work[b]) * UINT64_C(0x100000001b3);
        digest = (digest ^ 0xff) * UINT64_C(0x100000001b3);
        vs_fuzz_current = input;
        vs_fuzz_current_size = size;
        LLVMFuzzerTestOneInput(input, size);
        vs_fuzz_current = NULL;
        free(input);
        runs++;
    }
    printf("fuzz %s driver: %lu inputs (seed %llu, digest %016llx), no crash\n", corpus->name, runs, rng_seed,
           (unsigned long long)digest);
    free(work);
    if (corpus->seed_image)
        for (size_t s = 0; s < corpus->seed_count; s++)
            free((void *)seed[s]);
    free(seed);
    free(seed_size);
    return 0;
}

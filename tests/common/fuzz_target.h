/* fuzz_target.h: what a fuzz target gives the portable driver
 * (tests/common/fuzz_driver.c): its entry point, as libFuzzer calls it, and
 * its corpus, which the driver mutates for a bounded time in builds without
 * libFuzzer. Text targets (tests/unit/fuzz_config.c, fuzz_trace.c) give
 * seeds and tokens and take the driver's text mutator; a binary target
 * (tests/tools/fuzz_snapshot_corpus.c) builds its seeds and brings its own
 * mutator through the hook.
 */
#ifndef VS_FUZZ_TARGET_H
#define VS_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct vs_fuzz_corpus_s {
    const char *name;                /* printed by the driver, names crash-<name> */
    const char *const *seeds;        /* valid and nearly valid inputs, as text */
    size_t seed_count;               /* of `seeds`, or of `seed_image`'s */
    const char *const *tokens;       /* fragments the text mutator splices into inputs */
    size_t token_count;
    /* Binary seeds instead of `seeds`: seed `index` (< seed_count),
     * malloc'ed, its length in *size; NULL when out of memory. */
    void *(*seed_image)(size_t index, size_t *size);
    /* The mutator hook: changes buf[0..*size) in place, growing it up to
     * `cap` bytes at most; NULL takes the driver's text mutator. */
    void (*mutate)(uint8_t *buf, size_t *size, size_t cap);
} vs_fuzz_corpus_t;

/* Defined by each target beside its entry point; unused by its libFuzzer
 * build. */
extern const vs_fuzz_corpus_t vs_fuzz_corpus;

/* The driver's random numbers, for mutators: deterministic for a --seed. */
uint64_t vs_fuzz_rng(void);

/* Invariant broken: stop with a report ASan/libFuzzer can point at. */
#define VS_FUZZ_CHECK(cond)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz: invariant broken at %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif /* VS_FUZZ_TARGET_H */

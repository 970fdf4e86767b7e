/* fuzz_target.h: what a text fuzz target in tests/unit/ gives the portable
 * driver (fuzz_driver.c): its entry point, as libFuzzer calls it, and its
 * seed corpus and tokens, which the driver mutates for a bounded time in
 * builds without libFuzzer.
 */
#ifndef VS_FUZZ_TARGET_H
#define VS_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct vs_fuzz_corpus_s {
    const char *name;                /* printed by the driver */
    const char *const *seeds;        /* valid and nearly valid inputs, as text */
    size_t seed_count;
    const char *const *tokens;       /* fragments the driver splices into inputs */
    size_t token_count;
} vs_fuzz_corpus_t;

/* Defined by each target; unused by its libFuzzer build. */
extern const vs_fuzz_corpus_t vs_fuzz_corpus;

#endif /* VS_FUZZ_TARGET_H */

/* app_check.h: the checks the cuda suite's program shares (runtime.cu,
 * thrust_cub.cu): a failed runtime call ends the program, a wrong result is
 * counted in the translation unit's `failures` and printed, and the program
 * fails at its end. The runtime-level twin of tests/common/vs_test.h, whose
 * checks speak the driver API. */
#ifndef VRAMSHIM_TESTS_CUDA_APP_CHECK_H
#define VRAMSHIM_TESTS_CUDA_APP_CHECK_H

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                                       \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess) {                                                                          \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
            exit(1);                                                                                      \
        }                                                                                                 \
    } while (0)

static int failures;

#define EXPECT(cond, ...)                                                                                 \
    do {                                                                                                  \
        if (!(cond)) {                                                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                          \
            fprintf(stderr, __VA_ARGS__);                                                                 \
            fprintf(stderr, "\n");                                                                        \
            failures++;                                                                                   \
        }                                                                                                 \
    } while (0)

#endif /* VRAMSHIM_TESTS_CUDA_APP_CHECK_H */

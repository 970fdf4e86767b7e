/* cublas_sass.cu: a program whose kernels are SASS only, as cuBLAS's are,
 * run on the simulated driver (built with `-gencode arch=compute_90,code=sm_90`
 * and linked with cuBLAS). simcuda runs only PTX, so each launch must fail
 * with the error a real driver gives for a missing kernel image, and stderr
 * must say so once per kernel, naming it: never something else run in its
 * place, never a silent failure.
 *
 * - its own SASS-only kernel: the launch fails with
 *   cudaErrorNoKernelImageForDevice;
 * - cuBLAS: `cublasCreate` succeeds, a 64x64 `cublasSgemm` gets past
 *   cuBLASLt's heuristics to its kernel lookups and fails with
 *   CUBLAS_STATUS_EXECUTION_FAILED; the device stays usable.
 *
 * The program captures its own stderr (fd 2) in a temporary file to check
 * the lines, then copies them to the real stderr for the test log. */
#include "app_check.h"

#include <cublas_v2.h>

#include <string>
#include <unistd.h>

__global__ void sass_only_kernel(int *out)
{
    *out = 42;
}

/* What simcuda prints for a kernel without PTX, up to the kernel's name. */
static const char refusal_prefix[] = "simcuda: kernel ";
static const char refusal_suffix[] = " has no PTX (only SASS for sm_90): simcuda runs only PTX and cannot run it";

static std::string read_all(FILE *f)
{
    std::string text;
    char buf[4096];
    rewind(f);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        text.append(buf, n);
    return text;
}

/* How many lines of `text` are exactly `line`. */
static int count_line(const std::string &text, const std::string &line)
{
    int count = 0;
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos)
            end = text.size();
        if (text.compare(at, end - at, line) == 0)
            count++;
        at = end + 1;
    }
    return count;
}

int main()
{
    FILE *captured = tmpfile();
    int real_stderr = dup(2);
    if (captured == NULL || real_stderr < 0 || dup2(fileno(captured), 2) < 0) {
        perror("capturing stderr");
        return 1;
    }

    int *d_out;
    CHECK(cudaMalloc(&d_out, sizeof(int)));
    sass_only_kernel<<<1, 1>>>(d_out);
    cudaError_t launch = cudaGetLastError();

    cublasHandle_t handle;
    cublasStatus_t created = cublasCreate(&handle);
    cublasStatus_t gemm = CUBLAS_STATUS_NOT_INITIALIZED;
    if (created == CUBLAS_STATUS_SUCCESS) {
        const int n = 64;
        float *a, *b, *c;
        CHECK(cudaMalloc(&a, n * n * sizeof(float)));
        CHECK(cudaMalloc(&b, n * n * sizeof(float)));
        CHECK(cudaMalloc(&c, n * n * sizeof(float)));
        const float one = 1, zero = 0;
        gemm = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
        cublasDestroy(handle);
    }
    cudaError_t synced = cudaDeviceSynchronize();

    fflush(stderr);
    dup2(real_stderr, 2);
    std::string text = read_all(captured);
    fputs(text.c_str(), stderr);

    EXPECT(launch == cudaErrorNoKernelImageForDevice, "own kernel launch: %s, expected cudaErrorNoKernelImageForDevice",
           cudaGetErrorName(launch));
    EXPECT(count_line(text, std::string(refusal_prefix) + "_Z16sass_only_kernelPi" + refusal_suffix) == 1,
           "the refusal naming _Z16sass_only_kernelPi is not on stderr exactly once");
    EXPECT(created == CUBLAS_STATUS_SUCCESS, "cublasCreate: %d", (int)created);
    EXPECT(gemm == CUBLAS_STATUS_EXECUTION_FAILED, "cublasSgemm: %d, expected CUBLAS_STATUS_EXECUTION_FAILED (%d)",
           (int)gemm, (int)CUBLAS_STATUS_EXECUTION_FAILED);
    EXPECT(synced == cudaSuccess, "cudaDeviceSynchronize: %s", cudaGetErrorName(synced));

    /* Every line simcuda printed is a refusal, each for its own kernel, and
     * cuBLAS's lookups produced at least one. */
    int cublas_refusals = 0;
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos)
            end = text.size();
        std::string line = text.substr(at, end - at);
        at = end + 1;
        if (line.compare(0, 8, "simcuda:") != 0)
            continue;
        bool refusal = line.size() > sizeof refusal_prefix + sizeof refusal_suffix &&
                       line.compare(0, sizeof refusal_prefix - 1, refusal_prefix) == 0 &&
                       line.compare(line.size() - (sizeof refusal_suffix - 1), std::string::npos, refusal_suffix) == 0;
        EXPECT(refusal, "unexpected simcuda line: %s", line.c_str());
        EXPECT(count_line(text, line) == 1, "repeated: %s", line.c_str());
        if (refusal && line.find("sass_only_kernel") == std::string::npos)
            cublas_refusals++;
    }
    EXPECT(cublas_refusals > 0, "no refusal names a cuBLAS kernel");

    if (failures != 0) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("cuBLAS and the SASS-only kernel were refused, naming %d cuBLAS kernel(s)\n", cublas_refusals);
    return 0;
}

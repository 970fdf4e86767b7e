// main.cu: the test program of the cuda suite, an ordinary CUDA C++
// application of three translation units (each registers its own fatbin
// with the runtime): runtime.cu (launches, streams, events, symbols, pitched
// copies, cudaMallocAsync, a captured and updated graph, warp primitives,
// conversions, a 48 MiB working set) and thrust_cub.cu (Thrust and CUB).
//
//   app                 everything; exit 0 when every check passed
//   app --runtime       runtime.cu's checks only
//   app --thrust [N]    Thrust and CUB on N elements (default 20000)
//   app --sort N        times thrust::sort of N uint32 keys (the benchmark)
#include <cstdio>
#include <cstdlib>
#include <cstring>

int runtime_main();
int thrust_cub_main(size_t n);
int thrust_cub_sort_bench(size_t n);

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--sort") == 0)
        return thrust_cub_sort_bench(argc >= 3 ? (size_t)strtoull(argv[2], nullptr, 0) : (size_t)1 << 20);
    if (argc >= 2 && strcmp(argv[1], "--runtime") == 0)
        return runtime_main();
    if (argc >= 2 && strcmp(argv[1], "--thrust") == 0)
        return thrust_cub_main(argc >= 3 ? (size_t)strtoull(argv[2], nullptr, 0) : 20000);
    int rc = runtime_main();
    rc |= thrust_cub_main(20000);
    return rc;
}

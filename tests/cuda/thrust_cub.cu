// thrust_cub.cu: the toolkit's Thrust and CUB device algorithms on the
// simulated driver, each result checked on the host: Thrust sort,
// sort_by_key, reduce, inclusive_scan, transform, copy_if; CUB radix sort,
// reduce, scan, select and histogram. `thrust_cub_sort_bench` times Thrust's
// sort of N uint32 keys (the benchmark) and checks it. Both return 0 when
// every check passed, 1 otherwise (main.cu).
#include <cub/cub.cuh>
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "app_check.h"

static std::vector<uint32_t> keys(size_t n, uint32_t seed)
{
    std::vector<uint32_t> v(n);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v[i] = (uint32_t)x;
    }
    return v;
}

struct is_odd {
    __host__ __device__ bool operator()(uint32_t x) const { return x & 1; }
};

struct saxpy {
    float a;
    __host__ __device__ float operator()(float x, float y) const { return a * x + y; }
};

static void test_thrust(size_t n)
{
    std::vector<uint32_t> h = keys(n, 1);
    thrust::device_vector<uint32_t> d(h.begin(), h.end());
    thrust::sort(d.begin(), d.end());
    std::vector<uint32_t> sorted = h;
    std::sort(sorted.begin(), sorted.end());
    thrust::host_vector<uint32_t> back = d;
    EXPECT(std::equal(sorted.begin(), sorted.end(), back.begin()), "thrust::sort");

    std::vector<uint32_t> vals(n);
    std::iota(vals.begin(), vals.end(), 0u);
    thrust::device_vector<uint32_t> dk(h.begin(), h.end()), dv(vals.begin(), vals.end());
    thrust::sort_by_key(dk.begin(), dk.end(), dv.begin());
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return h[a] < h[b]; });
    thrust::host_vector<uint32_t> bk = dk, bv = dv;
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += bk[i] != h[order[i]] || bv[i] != (uint32_t)order[i];
    EXPECT(bad == 0, "thrust::sort_by_key: %d wrong", bad);

    uint64_t expect_sum = 0;
    for (uint32_t x : h)
        expect_sum += x;
    thrust::device_vector<uint64_t> wide(h.begin(), h.end());
    uint64_t sum = thrust::reduce(wide.begin(), wide.end(), (uint64_t)0);
    EXPECT(sum == expect_sum, "thrust::reduce %llu vs %llu", (unsigned long long)sum, (unsigned long long)expect_sum);

    thrust::device_vector<uint32_t> scanned(n);
    thrust::inclusive_scan(d.begin(), d.end(), scanned.begin());
    thrust::host_vector<uint32_t> bs = scanned;
    uint32_t run = 0;
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        run += sorted[i];
        bad += bs[i] != run;
    }
    EXPECT(bad == 0, "thrust::inclusive_scan: %d wrong", bad);

    std::vector<float> x(n), y(n);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(h[i] % 1000) * 0.5f;
        y[i] = (float)i;
    }
    thrust::device_vector<float> dx(x.begin(), x.end()), dy(y.begin(), y.end());
    thrust::transform(dx.begin(), dx.end(), dy.begin(), dy.begin(), saxpy{3.0f});
    thrust::host_vector<float> by = dy;
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += by[i] != 3.0f * x[i] + y[i];
    EXPECT(bad == 0, "thrust::transform: %d wrong", bad);

    thrust::device_vector<uint32_t> odd(n);
    auto end = thrust::copy_if(thrust::device_vector<uint32_t>(h.begin(), h.end()).begin(),
                               thrust::device_vector<uint32_t>(h.begin(), h.end()).end(), odd.begin(), is_odd());
    (void)end;
    thrust::device_vector<uint32_t> src(h.begin(), h.end());
    auto last = thrust::copy_if(src.begin(), src.end(), odd.begin(), is_odd());
    size_t count = last - odd.begin();
    std::vector<uint32_t> expect_odd;
    for (uint32_t v : h)
        if (v & 1)
            expect_odd.push_back(v);
    thrust::host_vector<uint32_t> bo(odd.begin(), odd.begin() + count);
    EXPECT(count == expect_odd.size() && std::equal(expect_odd.begin(), expect_odd.end(), bo.begin()),
           "thrust::copy_if: %zu vs %zu", count, expect_odd.size());
}

static void test_cub(size_t n)
{
    std::vector<uint32_t> h = keys(n, 2);
    uint32_t *din, *dout, *dvals_in, *dvals_out;
    CHECK(cudaMalloc(&din, n * 4));
    CHECK(cudaMalloc(&dout, n * 4));
    CHECK(cudaMalloc(&dvals_in, n * 4));
    CHECK(cudaMalloc(&dvals_out, n * 4));
    CHECK(cudaMemcpy(din, h.data(), n * 4, cudaMemcpyHostToDevice));
    std::vector<uint32_t> vals(n);
    std::iota(vals.begin(), vals.end(), 0u);
    CHECK(cudaMemcpy(dvals_in, vals.data(), n * 4, cudaMemcpyHostToDevice));
    void *temp = nullptr;
    size_t temp_bytes = 0, need = 0;
    auto ensure = [&](size_t bytes) {
        if (bytes > temp_bytes) {
            if (temp)
                CHECK(cudaFree(temp));
            CHECK(cudaMalloc(&temp, bytes));
            temp_bytes = bytes;
        }
    };
    std::vector<uint32_t> back(n), back_vals(n);

    // radix sort pairs
    CHECK(cub::DeviceRadixSort::SortPairs(nullptr, need, din, dout, dvals_in, dvals_out, (int)n));
    ensure(need);
    CHECK(cub::DeviceRadixSort::SortPairs(temp, need, din, dout, dvals_in, dvals_out, (int)n));
    CHECK(cudaMemcpy(back.data(), dout, n * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(back_vals.data(), dvals_out, n * 4, cudaMemcpyDeviceToHost));
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return h[a] < h[b]; });
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += back[i] != h[order[i]] || back_vals[i] != (uint32_t)order[i];
    EXPECT(bad == 0, "cub::DeviceRadixSort::SortPairs: %d wrong", bad);

    // reduce (max) and sum
    uint32_t *dres;
    CHECK(cudaMalloc(&dres, 8));
    CHECK(cub::DeviceReduce::Max(nullptr, need, din, dres, (int)n));
    ensure(need);
    CHECK(cub::DeviceReduce::Max(temp, need, din, dres, (int)n));
    uint32_t mx = 0;
    CHECK(cudaMemcpy(&mx, dres, 4, cudaMemcpyDeviceToHost));
    EXPECT(mx == *std::max_element(h.begin(), h.end()), "cub::DeviceReduce::Max");

    // exclusive scan
    CHECK(cub::DeviceScan::ExclusiveSum(nullptr, need, din, dout, (int)n));
    ensure(need);
    CHECK(cub::DeviceScan::ExclusiveSum(temp, need, din, dout, (int)n));
    CHECK(cudaMemcpy(back.data(), dout, n * 4, cudaMemcpyDeviceToHost));
    uint32_t run = 0;
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad += back[i] != run;
        run += h[i];
    }
    EXPECT(bad == 0, "cub::DeviceScan::ExclusiveSum: %d wrong", bad);

    // select
    int *dnum;
    CHECK(cudaMalloc(&dnum, 4));
    CHECK(cub::DeviceSelect::If(nullptr, need, din, dout, dnum, (int)n, is_odd()));
    ensure(need);
    CHECK(cub::DeviceSelect::If(temp, need, din, dout, dnum, (int)n, is_odd()));
    int num = 0;
    CHECK(cudaMemcpy(&num, dnum, 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(back.data(), dout, n * 4, cudaMemcpyDeviceToHost));
    std::vector<uint32_t> expect_odd;
    for (uint32_t v : h)
        if (v & 1)
            expect_odd.push_back(v);
    EXPECT((size_t)num == expect_odd.size() && std::equal(expect_odd.begin(), expect_odd.end(), back.begin()),
           "cub::DeviceSelect::If: %d vs %zu", num, expect_odd.size());

    // histogram of the top byte
    const int bins = 16;
    int *dhist;
    CHECK(cudaMalloc(&dhist, bins * 4));
    std::vector<uint32_t> small(n);
    for (size_t i = 0; i < n; i++)
        small[i] = h[i] % 1000;
    CHECK(cudaMemcpy(din, small.data(), n * 4, cudaMemcpyHostToDevice));
    CHECK(cub::DeviceHistogram::HistogramEven(nullptr, need, din, dhist, bins + 1, 0u, 1000u, (int)n));
    ensure(need);
    CHECK(cub::DeviceHistogram::HistogramEven(temp, need, din, dhist, bins + 1, 0u, 1000u, (int)n));
    std::vector<int> hist(bins), expect_hist(bins, 0);
    CHECK(cudaMemcpy(hist.data(), dhist, bins * 4, cudaMemcpyDeviceToHost));
    for (uint32_t v : small)
        expect_hist[(size_t)v * bins / 1000]++;
    EXPECT(hist == expect_hist, "cub::DeviceHistogram::HistogramEven");

    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    CHECK(cudaFree(dvals_in));
    CHECK(cudaFree(dvals_out));
    CHECK(cudaFree(dres));
    CHECK(cudaFree(dnum));
    CHECK(cudaFree(dhist));
    if (temp)
        CHECK(cudaFree(temp));
}

// Lane-instructions the simulated driver has interpreted so far, or 0 on a
// real driver (which has no such counter).
static uint64_t lane_instructions()
{
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (driver == nullptr)
        return 0;
    auto counter = (uint64_t(*)())dlsym(driver, "simcuda_lane_instructions");
    uint64_t n = counter != nullptr ? counter() : 0;
    dlclose(driver);
    return n;
}

static int bench_sort(size_t n)
{
    std::vector<uint32_t> h = keys(n, 3);
    thrust::device_vector<uint32_t> d(h.begin(), h.end());
    // A first small sort loads (and parses) the module outside the timing.
    thrust::device_vector<uint32_t> warm(h.begin(), h.begin() + 1024);
    thrust::sort(warm.begin(), warm.end());
    CHECK(cudaDeviceSynchronize());
    uint64_t before = lane_instructions();
    std::clock_t cpu_start = std::clock();
    auto start = std::chrono::steady_clock::now();
    thrust::sort(d.begin(), d.end());
    CHECK(cudaDeviceSynchronize());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double cpu = (double)(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    uint64_t lanes = lane_instructions() - before;
    thrust::host_vector<uint32_t> back = d;
    std::sort(h.begin(), h.end());
    bool ok = std::equal(h.begin(), h.end(), back.begin());
    printf("thrust::sort of %zu uint32 keys: %.3f s (%.3f s of CPU), %s\n", n, s, cpu, ok ? "sorted" : "WRONG");
    if (lanes)
        printf("interpreted: %llu lane-instructions, %.1f M lane-instructions/s (%.1f M per CPU second)\n",
               (unsigned long long)lanes, lanes / s / 1e6, cpu > 0 ? lanes / cpu / 1e6 : 0.0);
    return ok ? 0 : 1;
}

int thrust_cub_sort_bench(size_t n)
{
    return bench_sort(n);
}

int thrust_cub_main(size_t n)
{
    test_thrust(n);
    test_cub(n);
    if (failures) {
        printf("thrust_cub: %d check(s) failed\n", failures);
        return 1;
    }
    printf("thrust_cub: all checks passed (%zu elements)\n", n);
    return 0;
}

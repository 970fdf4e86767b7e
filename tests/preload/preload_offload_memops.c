/* preload_offload_memops.c: the driver paths that make the GPU touch an
 * allocation without a launch or a plain copy, under the shim with
 * `VRAM_LIMIT` far below the working set (8 MiB buffers, a 24 MiB limit).
 *
 *   preload_offload_memops CASE
 *
 * - `memops`: `cuStreamWriteValue32/64_v2` and `cuStreamBatchMemOp_v2`
 *   into evicted buffers, and `cuStreamWaitValue32_v2` on one, restore them
 *   first: the values land, every buffer stays byte-exact.
 * - `no_deadlock`: stream A (this thread) fills buffers, then waits
 *   (`cuStreamWaitValue32_v2`) on a flag that thread B writes
 *   (`cuStreamWriteValue32_v2`) only after B's own next launches, which
 *   need room: evictions must not wait on the host for A's work behind the
 *   wait (a hang, caught by the watchdog), nor may destroying A while it
 *   waits (odd rounds). Everything completes and checksums exactly.
 * - `ranges`: 2-D copies, a 2-D memset and a 1-D copy whose bytes span
 *   two adjacent evicted allocations: both are restored (a fault
 *   otherwise), and the bytes land exactly.
 * - `graph_update`: a graph's memcpy and memset nodes re-pointed with
 *   `cuGraphExecMemcpyNodeSetParams`/`cuGraphExecMemsetNodeSetParams` to
 *   buffers that are evicted when the graph launches: restored first, the
 *   bytes exact; the buffers the graph no longer references are evictable
 *   again.
 * - `graph_bodies`: a WHILE node whose body checksums an evicted buffer,
 *   and a child graph node whose memset fills another, re-pointed with
 *   `cuGraphExecChildGraphNodeSetParams`: the bodies' pointers count for
 *   the graph and are restored before each launch.
 * - `device_pointers` (`VRAMSHIM_PIN_DEVICE_POINTERS=on`): a kernel follows
 *   a table of pointers it reads from device memory (written with a small
 *   `cuMemcpyHtoD_v2`, as `cudaMemcpyToSymbol` does); the pointed-to
 *   buffers are pinned by the shim, so the kernel stays byte-exact under
 *   the limit.
 *
 * Exit status: 0 when every check holds, 1 otherwise, 2 on a usage error,
 * 3 when the watchdog fires (a hang).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "preload_util.h"
#include "simcuda.h"

#define MiB (1ull << 20)
#define BUF_BYTES (8 * MiB)
#define BUF_WORDS (BUF_BYTES / 4)

static CUcontext context;
static CUfunction fn_fill, fn_checksum, fn_gather;

static void load_kernels(void)
{
    CUmodule module;
    VS_CHECK(cuModuleLoadData(&module, "image"));
    VS_CHECK(cuModuleGetFunction(&fn_fill, module, "sim_fill_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_checksum, module, "sim_checksum_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_gather, module, "sim_gather_checksum"));
}

static uint32_t fill_value(uint32_t seed, uint64_t i)
{
    return seed ^ (uint32_t)(i * 2654435761u);
}

static void fill(CUdeviceptr dst, uint64_t words, uint32_t seed, CUstream stream)
{
    void *args[] = {&dst, &words, &seed};
    VS_CHECK(cuLaunchKernel(fn_fill, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL));
}

/* Launches the device checksum of `words` words at `src` into `out`. */
static void checksum(CUdeviceptr src, uint64_t words, CUdeviceptr out, CUstream stream)
{
    void *args[] = {&src, &words, &out};
    VS_CHECK(cuLaunchKernel(fn_checksum, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL));
}

static uint64_t host_checksum(const uint32_t *data, uint64_t words)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < words; i++)
        sum += (uint64_t)data[i] * (i + 1);
    return sum;
}

static uint64_t fill_checksum(uint32_t seed, uint64_t words)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < words; i++)
        sum += (uint64_t)fill_value(seed, i) * (i + 1);
    return sum;
}

static uint64_t read_u64(CUdeviceptr p)
{
    uint64_t v = 0;
    VS_CHECK(cuMemcpyDtoH_v2(&v, p, sizeof v));
    return v;
}

static uint32_t read_u32(CUdeviceptr p)
{
    uint32_t v = 0;
    VS_CHECK(cuMemcpyDtoH_v2(&v, p, sizeof v));
    return v;
}

/* Whether the simulated driver itself (not the shim) knows `p` as mapped. */
static bool mapped(CUdeviceptr p)
{
    typedef CUresult range_fn_t(CUdeviceptr *, size_t *, CUdeviceptr);
    range_fn_t *range = __extension__(range_fn_t *) simcuda_entry_point("cuMemGetAddressRange_v2");
    CUdeviceptr base;
    size_t size;
    return range != NULL && range(&base, &size, p) == CUDA_SUCCESS;
}

/* ---- memops --------------------------------------------------------------- */

static int case_memops(void)
{
    enum { N = 6 };
    CUdeviceptr buf[N];
    CUstream s;
    VS_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < N; i++) {
        VS_CHECK(cuMemAlloc_v2(&buf[i], BUF_BYTES));
        fill(buf[i], BUF_WORDS, 100 + i, s);
    }
    VS_CHECK(cuStreamSynchronize(s));
    /* Each write goes to a buffer that is evicted at that moment. */
    int target[4];
    for (int k = 0; k < 4; k++) {
        target[k] = -1;
        for (int i = 0; i < N && target[k] < 0; i++) {
            bool used = false;
            for (int j = 0; j < k; j++)
                used |= target[j] == i;
            if (!used && !mapped(buf[i]))
                target[k] = i;
        }
        VS_EXPECT(target[k] >= 0, "write %d: no evicted buffer to write into", k);
        if (target[k] < 0)
            return 0;
        CUdeviceptr b = buf[target[k]];
        if (k == 0) {
            VS_CHECK(cuStreamWriteValue32_v2(s, b + 4 * 10, 0xabcd0001u, 0));
        } else if (k == 1) {
            VS_CHECK(cuStreamWriteValue64_v2(s, b + 8 * 7, 0x1122334455667788ull, 0));
        } else if (k == 2) {
            CUstreamBatchMemOpParams op;
            memset(&op, 0, sizeof op);
            op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
            op.writeValue.address = b + 4 * 3;
            op.writeValue.value = 0x5a5a5a5au;
            VS_CHECK(cuStreamBatchMemOp_v2(s, 1, &op, 0));
        } else {
            /* A wait on a value already there, in an evicted buffer. */
            VS_CHECK(cuStreamWaitValue32_v2(s, b + 4 * 20, fill_value(100 + target[k], 20), CU_STREAM_WAIT_VALUE_EQ));
        }
        VS_CHECK(cuStreamSynchronize(s));
        /* Push the others out again. */
        for (int i = 0; i < N; i++)
            if (i != target[k])
                fill(buf[i], 1, 100 + i, s);
        VS_CHECK(cuStreamSynchronize(s));
    }

    uint32_t *host = malloc(BUF_BYTES);
    CUdeviceptr out;
    VS_CHECK(cuMemAlloc_v2(&out, 8));
    for (int i = 0; i < N; i++) {
        for (uint64_t w = 0; w < BUF_WORDS; w++)
            host[w] = fill_value(100 + i, w);
        if (i == target[0])
            host[10] = 0xabcd0001u;
        if (i == target[1]) {
            host[14] = 0x55667788u;
            host[15] = 0x11223344u;
        }
        if (i == target[2])
            host[3] = 0x5a5a5a5au;
        checksum(buf[i], BUF_WORDS, out, s);
        VS_CHECK(cuStreamSynchronize(s));
        uint64_t want = host_checksum(host, BUF_WORDS), got = read_u64(out);
        VS_EXPECT(got == want, "buffer %d: checksum %llx, expected %llx", i, (unsigned long long)got,
                  (unsigned long long)want);
    }
    free(host);
    /* cuMemAlloc memory has no VMM handle to the program, evicted or not
     * (the shim's mapping behind it is its own). */
    CUmemGenericAllocationHandle phys;
    VS_EXPECT(cuMemRetainAllocationHandle(&phys, (void *)(uintptr_t)(buf[0] + 100)) == CUDA_ERROR_INVALID_VALUE,
              "cuMemRetainAllocationHandle of cuMemAlloc memory should be CUDA_ERROR_INVALID_VALUE");
    return 0;
}

/* ---- no_deadlock ---------------------------------------------------------- */

typedef struct peer_s {
    CUdeviceptr flag;
    CUdeviceptr *bufs;
    int count;
    pthread_barrier_t *barrier;
} peer_t;

static void *peer_thread(void *arg)
{
    peer_t *p = arg;
    CUstream b;
    VS_CHECK(cuCtxSetCurrent(context));
    VS_CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    pthread_barrier_wait(p->barrier); /* A's wait is submitted */
    for (int i = 0; i < p->count; i++)
        fill(p->bufs[i], BUF_WORDS, 200 + i, b);
    VS_CHECK(cuStreamWriteValue32_v2(b, p->flag, 1, 0));
    VS_CHECK(cuStreamSynchronize(b));
    VS_CHECK(cuStreamDestroy_v2(b));
    return NULL;
}

static int case_no_deadlock(void)
{
    enum { A_BUFS = 3, B_BUFS = 3, ROUNDS = 4 };
    vs_test_watchdog_start(60);
    for (int round = 0; round < ROUNDS; round++) {
        CUdeviceptr a_bufs[A_BUFS], b_bufs[B_BUFS], flag, sums;
        VS_CHECK(cuMemAlloc_v2(&flag, 4));
        VS_CHECK(cuMemAlloc_v2(&sums, 8 * A_BUFS));
        VS_CHECK(cuMemsetD32_v2(flag, 0, 1));
        for (int i = 0; i < A_BUFS; i++)
            VS_CHECK(cuMemAlloc_v2(&a_bufs[i], BUF_BYTES));
        for (int i = 0; i < B_BUFS; i++)
            VS_CHECK(cuMemAlloc_v2(&b_bufs[i], BUF_BYTES));
        CUstream a;
        VS_CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
        pthread_barrier_t barrier;
        pthread_barrier_init(&barrier, NULL, 2);
        peer_t peer = {.flag = flag, .bufs = b_bufs, .count = B_BUFS, .barrier = &barrier};
        pthread_t thread;
        /* A's work before the wait, the wait, and work behind it. */
        for (int i = 0; i < A_BUFS; i++)
            fill(a_bufs[i], BUF_WORDS, 300 + i, a);
        VS_CHECK(cuStreamWaitValue32_v2(a, flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
        checksum(a_bufs[round % A_BUFS], BUF_WORDS, sums + 8 * (round % A_BUFS), a);
        /* Odd rounds destroy the waiting stream at once (legal: its work
         * completes later); the destroy must not wait for it either. */
        if (round % 2 == 1) {
            VS_CHECK(cuStreamDestroy_v2(a));
            VS_CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
        }
        pthread_create(&thread, NULL, peer_thread, &peer);
        pthread_barrier_wait(&barrier);
        pthread_join(thread, NULL);
        VS_CHECK(cuCtxSynchronize());
        uint64_t want = fill_checksum(300 + round % A_BUFS, BUF_WORDS);
        uint64_t got = read_u64(sums + 8 * (round % A_BUFS));
        VS_EXPECT(got == want, "round %d: checksum behind the wait %llx, expected %llx", round,
                  (unsigned long long)got, (unsigned long long)want);
        for (int i = 0; i < A_BUFS + B_BUFS; i++) {
            CUdeviceptr p = i < A_BUFS ? a_bufs[i] : b_bufs[i - A_BUFS];
            uint32_t seed = i < A_BUFS ? 300 + i : 200 + (i - A_BUFS);
            checksum(p, BUF_WORDS, sums, a);
            VS_CHECK(cuStreamSynchronize(a));
            got = read_u64(sums);
            want = fill_checksum(seed, BUF_WORDS);
            VS_EXPECT(got == want, "round %d buffer %d: checksum %llx, expected %llx", round, i,
                      (unsigned long long)got, (unsigned long long)want);
        }
        pthread_barrier_destroy(&barrier);
        VS_CHECK(cuStreamDestroy_v2(a));
        for (int i = 0; i < A_BUFS; i++)
            VS_CHECK(cuMemFree_v2(a_bufs[i]));
        for (int i = 0; i < B_BUFS; i++)
            VS_CHECK(cuMemFree_v2(b_bufs[i]));
        VS_CHECK(cuMemFree_v2(flag));
        VS_CHECK(cuMemFree_v2(sums));
    }
    return 0;
}

/* ---- ranges --------------------------------------------------------------- */

/* Two allocations of `bytes` whose ranges touch (the second starts where
 * the first ends); the others made while looking are kept in `spare`. */
static bool adjacent_pair(uint64_t bytes, CUdeviceptr *lo, CUdeviceptr *hi, CUdeviceptr *spare, int *spare_count)
{
    CUdeviceptr got[8];
    for (int i = 0; i < 8; i++) {
        VS_CHECK(cuMemAlloc_v2(&got[i], bytes));
        for (int j = 0; j < i; j++) {
            if (got[j] + bytes == got[i] || got[i] + bytes == got[j]) {
                *lo = got[j] < got[i] ? got[j] : got[i];
                *hi = got[j] < got[i] ? got[i] : got[j];
                for (int k = 0; k <= i; k++)
                    if (k != j && k != i)
                        spare[(*spare_count)++] = got[k];
                return true;
            }
        }
    }
    for (int k = 0; k < 8; k++)
        spare[(*spare_count)++] = got[k];
    return false;
}

static void evict_all_but(CUdeviceptr *others, int count, CUstream s)
{
    for (int i = 0; i < count; i++)
        fill(others[i], BUF_WORDS, 900 + i, s);
    VS_CHECK(cuStreamSynchronize(s));
}

static int case_ranges(void)
{
    CUdeviceptr lo, hi, spare[8];
    int spare_count = 0;
    CUstream s;
    VS_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (!adjacent_pair(BUF_BYTES, &lo, &hi, spare, &spare_count)) {
        fprintf(stderr, "preload_offload_memops: no two adjacent allocations; the case cannot run\n");
        return 77;
    }
    /* Enough others to push both out (the limit holds three buffers). */
    while (spare_count < 4)
        VS_CHECK(cuMemAlloc_v2(&spare[spare_count++], BUF_BYTES));
    /* `lo` and `hi` are one 16 MiB range of device memory in two
     * allocations. The host mirror of it: */
    uint8_t *mirror = malloc(2 * BUF_BYTES), *back = malloc(2 * BUF_BYTES);
    memset(mirror, 0, 2 * BUF_BYTES);
    VS_CHECK(cuMemsetD8_v2(lo, 0, BUF_BYTES));
    VS_CHECK(cuMemsetD8_v2(hi, 0, BUF_BYTES));

    /* 1. A 2-D copy from the host: 10 rows of 1000 bytes, 1 MiB apart,
     * starting 5 MiB into `lo`: rows 3.. land in `hi`, the last 14 MiB in
     * (12 rows ran past `hi`'s end). */
    evict_all_but(spare, spare_count, s);
    VS_EXPECT(!mapped(lo) && !mapped(hi), "both halves should be evicted before the 2-D copy");
    uint8_t *rows = malloc(10 * 1000);
    for (int i = 0; i < 10 * 1000; i++)
        rows[i] = (uint8_t)(i * 7 + 1);
    CUDA_MEMCPY2D c2;
    memset(&c2, 0, sizeof c2);
    c2.srcMemoryType = CU_MEMORYTYPE_HOST;
    c2.srcHost = rows;
    c2.srcPitch = 1000;
    c2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c2.dstDevice = lo + 5 * MiB;
    c2.dstPitch = MiB;
    c2.WidthInBytes = 1000;
    c2.Height = 10;
    VS_CHECK(cuMemcpy2DAsync_v2(&c2, s));
    for (int r = 0; r < 10; r++)
        memcpy(mirror + 5 * MiB + r * MiB, rows + r * 1000, 1000);

    /* 2. A 2-D memset across the boundary. */
    evict_all_but(spare, spare_count, s);
    VS_CHECK(cuMemsetD2D8Async(lo + 7 * MiB + 100, MiB / 2, 0xee, 300, 5, s));
    for (int r = 0; r < 5; r++)
        memset(mirror + 7 * MiB + 100 + r * (MiB / 2), 0xee, 300);

    /* 3. A 1-D device-to-device copy from the end of `lo` into `hi`, and a
     * 3-D copy to the host reading across the boundary. */
    evict_all_but(spare, spare_count, s);
    VS_CHECK(cuMemcpyDtoDAsync_v2(hi + 3 * MiB, lo + 7 * MiB, 2 * MiB, s));
    memmove(mirror + BUF_BYTES + 3 * MiB, mirror + 7 * MiB, 2 * MiB);
    evict_all_but(spare, spare_count, s);
    CUDA_MEMCPY3D c3;
    memset(&c3, 0, sizeof c3);
    c3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c3.srcDevice = lo;
    c3.srcXInBytes = 4 * MiB;
    c3.srcPitch = MiB;
    c3.srcHeight = 4;
    c3.dstMemoryType = CU_MEMORYTYPE_HOST;
    c3.dstHost = back;
    c3.dstPitch = 1000;
    c3.dstHeight = 4;
    c3.WidthInBytes = 1000;
    c3.Height = 4;
    c3.Depth = 3;
    VS_CHECK(cuMemcpy3DAsync_v2(&c3, s));
    VS_CHECK(cuStreamSynchronize(s));
    for (int z = 0; z < 3; z++)
        for (int y = 0; y < 4; y++) {
            const uint8_t *want = mirror + 4 * MiB + (z * 4 + y) * MiB;
            VS_EXPECT(memcmp(back + (z * 4 + y) * 1000, want, 1000) == 0, "3-D copy slice %d row %d differs", z, y);
        }

    /* Everything, read back whole. */
    VS_CHECK(cuMemcpyDtoH_v2(back, lo, BUF_BYTES));
    VS_CHECK(cuMemcpyDtoH_v2(back + BUF_BYTES, hi, BUF_BYTES));
    for (uint64_t i = 0; i < 2 * BUF_BYTES; i += 4096)
        if (memcmp(back + i, mirror + i, 4096) != 0) {
            VS_EXPECT(false, "byte range at offset %llu differs", (unsigned long long)i);
            break;
        }
    free(rows);
    free(mirror);
    free(back);
    return 0;
}

/* ---- graph_update --------------------------------------------------------- */

static int case_graph_update(void)
{
    enum { N = 6 };
    CUdeviceptr buf[N];
    CUstream s;
    VS_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < N; i++) {
        VS_CHECK(cuMemAlloc_v2(&buf[i], BUF_BYTES));
        fill(buf[i], BUF_WORDS, 500 + i, s);
    }
    VS_CHECK(cuStreamSynchronize(s));
    /* memset buf0 (value 7), then copy buf0 -> buf1. */
    CUgraph graph;
    CUgraphNode set_node, copy_node;
    VS_CHECK(cuGraphCreate(&graph, 0));
    CUDA_MEMSET_NODE_PARAMS set = {.dst = buf[0], .value = 7, .elementSize = 4, .width = BUF_WORDS, .height = 1};
    VS_CHECK(cuGraphAddMemsetNode(&set_node, graph, NULL, 0, &set, context));
    CUDA_MEMCPY3D copy;
    memset(&copy, 0, sizeof copy);
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = buf[0];
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = buf[1];
    copy.WidthInBytes = BUF_BYTES;
    copy.Height = 1;
    copy.Depth = 1;
    VS_CHECK(cuGraphAddMemcpyNode(&copy_node, graph, &set_node, 1, &copy, context));
    CUgraphExec exec;
    VS_CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    VS_CHECK(cuGraphLaunch(exec, s));
    VS_CHECK(cuStreamSynchronize(s));
    VS_EXPECT(read_u32(buf[1] + BUF_BYTES - 4) == 7, "first launch: buf1 should hold 7");

    /* Re-point: memset buf2 (value 9), copy buf2 -> buf3; both evicted. */
    CUDA_MEMSET_NODE_PARAMS set2 = set;
    set2.dst = buf[2];
    set2.value = 9;
    VS_CHECK(cuGraphExecMemsetNodeSetParams(exec, set_node, &set2, context));
    CUDA_MEMCPY3D copy2 = copy;
    copy2.srcDevice = buf[2];
    copy2.dstDevice = buf[3];
    VS_CHECK(cuGraphExecMemcpyNodeSetParams(exec, copy_node, &copy2, context));
    /* buf0 and buf1 are no longer the graph's: they can be evicted. */
    for (int i = 4; i < N; i++)
        fill(buf[i], BUF_WORDS, 600 + i, s);
    VS_CHECK(cuStreamSynchronize(s));
    preload_snapshot_t snap = preload_snapshot();
    preload_alloc_t a0 = preload_find(&snap, buf[0]);
    VS_EXPECT(a0.found && a0.evictable == 1, "buf0 should be evictable once the graph let it go");
    preload_snapshot_free(&snap);
    VS_CHECK(cuGraphLaunch(exec, s));
    VS_CHECK(cuStreamSynchronize(s));
    CUdeviceptr out;
    VS_CHECK(cuMemAlloc_v2(&out, 8));
    uint32_t *host = malloc(BUF_BYTES);
    for (uint64_t w = 0; w < BUF_WORDS; w++)
        host[w] = 9;
    uint64_t nines = host_checksum(host, BUF_WORDS);
    for (int i = 4; i < N + 4; i++) {
        int which = i % N;
        checksum(buf[which], BUF_WORDS, out, s);
        VS_CHECK(cuStreamSynchronize(s));
        uint64_t want = which == 0 || which == 1 ? 0 : which <= 3 ? nines : fill_checksum(600 + which, BUF_WORDS);
        if (which <= 1) {
            for (uint64_t w = 0; w < BUF_WORDS; w++)
                host[w] = 7;
            want = host_checksum(host, BUF_WORDS);
            for (uint64_t w = 0; w < BUF_WORDS; w++)
                host[w] = 9;
        }
        uint64_t got = read_u64(out);
        VS_EXPECT(got == want, "buffer %d: checksum %llx, expected %llx", which, (unsigned long long)got,
                  (unsigned long long)want);
    }
    free(host);
    VS_CHECK(cuGraphExecDestroy(exec));
    VS_CHECK(cuGraphDestroy(graph));
    return 0;
}

/* ---- graph_bodies --------------------------------------------------------- */

/* A WHILE node whose body checksums a buffer (twice), and a child graph
 * node whose memset fills another, then re-pointed to a third with
 * cuGraphExecChildGraphNodeSetParams: what the bodies reference is
 * restored before each launch. */
static int case_graph_bodies(void)
{
    enum { N = 6 };
    CUdeviceptr buf[N], sums, counter;
    CUstream s;
    CUmodule module;
    CUfunction fn_countdown;
    VS_CHECK(cuModuleLoadData(&module, "image"));
    VS_CHECK(cuModuleGetFunction(&fn_countdown, module, "sim_while_countdown"));
    VS_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < N; i++) {
        VS_CHECK(cuMemAlloc_v2(&buf[i], BUF_BYTES));
        fill(buf[i], BUF_WORDS, 800 + i, s);
    }
    VS_CHECK(cuMemAlloc_v2(&sums, 8));
    VS_CHECK(cuMemAlloc_v2(&counter, 4));
    CUgraph graph, child, child2;
    CUgraphConditionalHandle h;
    VS_CHECK(cuGraphCreate(&graph, 0));
    VS_CHECK(cuGraphConditionalHandleCreate(&h, graph, context, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUDA_MEMSET_NODE_PARAMS reset = {.dst = counter, .value = 2, .elementSize = 4, .width = 1, .height = 1};
    CUgraphNode reset_node, while_node, child_node;
    VS_CHECK(cuGraphAddMemsetNode(&reset_node, graph, NULL, 0, &reset, context));
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h;
    p.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    p.conditional.size = 1;
    p.conditional.ctx = context;
    VS_CHECK(cuGraphAddNode(&while_node, graph, &reset_node, NULL, 1, &p));
    CUgraph body = p.conditional.phGraph_out[0];
    uint64_t handle_arg = h, words = BUF_WORDS;
    void *countdown_args[] = {&handle_arg, &counter};
    void *checksum_args[] = {&buf[0], &words, &sums};
    CUgraphNodeParams k;
    memset(&k, 0, sizeof k);
    k.type = CU_GRAPH_NODE_TYPE_KERNEL;
    k.kernel.gridDimX = k.kernel.gridDimY = k.kernel.gridDimZ = 1;
    k.kernel.blockDimX = k.kernel.blockDimY = k.kernel.blockDimZ = 1;
    CUgraphNode countdown_node, checksum_node;
    k.kernel.func = fn_countdown;
    k.kernel.kernelParams = countdown_args;
    VS_CHECK(cuGraphAddNode(&countdown_node, body, NULL, NULL, 0, &k));
    k.kernel.func = fn_checksum;
    k.kernel.kernelParams = checksum_args;
    VS_CHECK(cuGraphAddNode(&checksum_node, body, &countdown_node, NULL, 1, &k));
    VS_CHECK(cuGraphCreate(&child, 0));
    CUgraphNode m;
    CUDA_MEMSET_NODE_PARAMS set = {.dst = buf[1], .value = 3, .elementSize = 4, .width = BUF_WORDS, .height = 1};
    VS_CHECK(cuGraphAddMemsetNode(&m, child, NULL, 0, &set, context));
    VS_CHECK(cuGraphAddChildGraphNode(&child_node, graph, &while_node, 1, child));
    CUgraphExec exec;
    VS_CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    /* Push everything out, then launch. */
    for (int round = 0; round < 2; round++) {
        for (int i = 2; i < N; i++)
            fill(buf[i], BUF_WORDS, 800 + i, s);
        VS_CHECK(cuGraphLaunch(exec, s));
        VS_CHECK(cuStreamSynchronize(s));
        uint64_t got = read_u64(sums), want = fill_checksum(800, BUF_WORDS);
        VS_EXPECT(got == want, "round %d: checksum in the WHILE body %llx, expected %llx", round,
                  (unsigned long long)got, (unsigned long long)want);
        VS_EXPECT(read_u32(buf[1] + BUF_BYTES - 4) == 3, "round %d: the child graph's memset did not land", round);
    }
    /* The child graph now sets buf5. */
    VS_CHECK(cuGraphCreate(&child2, 0));
    set.dst = buf[5];
    set.value = 4;
    VS_CHECK(cuGraphAddMemsetNode(&m, child2, NULL, 0, &set, context));
    VS_CHECK(cuGraphExecChildGraphNodeSetParams(exec, child_node, child2));
    for (int i = 1; i < 5; i++)
        fill(buf[i], BUF_WORDS, 800 + i, s);
    VS_CHECK(cuGraphLaunch(exec, s));
    VS_CHECK(cuStreamSynchronize(s));
    VS_EXPECT(read_u32(buf[5]) == 4 && read_u32(buf[5] + BUF_BYTES - 4) == 4,
              "the re-pointed child graph's memset did not land");
    VS_CHECK(cuGraphExecDestroy(exec));
    VS_CHECK(cuGraphDestroy(graph));
    VS_CHECK(cuGraphDestroy(child));
    VS_CHECK(cuGraphDestroy(child2));
    return 0;
}

/* ---- device_pointers ------------------------------------------------------ */

static int case_device_pointers(void)
{
    enum { N = 5 };
    CUdeviceptr buf[N], table, sums;
    CUstream s;
    VS_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < N; i++) {
        VS_CHECK(cuMemAlloc_v2(&buf[i], BUF_BYTES));
        fill(buf[i], BUF_WORDS, 700 + i, s);
    }
    /* The table of pointers, in device memory, written by a small copy
     * (what cudaMemcpyToSymbol of a `__device__` array does). */
    VS_CHECK(cuMemAlloc_v2(&table, 8 * 2));
    VS_CHECK(cuMemAlloc_v2(&sums, 8 * 2));
    CUdeviceptr ptrs[2] = {buf[0], buf[1]};
    VS_CHECK(cuMemcpyHtoD_v2(table, ptrs, sizeof ptrs));
    /* Other buffers push everything unpinned out. */
    for (int round = 0; round < 3; round++) {
        for (int i = 2; i < N; i++)
            fill(buf[i], BUF_WORDS, 700 + i, s);
        /* The kernel only sees `table`: buf0 and buf1 must be there. */
        uint64_t count = 2, words = BUF_WORDS;
        void *args[] = {&table, &count, &words, &sums};
        VS_CHECK(cuLaunchKernel(fn_gather, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        VS_CHECK(cuStreamSynchronize(s));
        for (int k = 0; k < 2; k++) {
            uint64_t got = read_u64(sums + 8 * k), want = fill_checksum(700 + k, BUF_WORDS);
            VS_EXPECT(got == want, "round %d table entry %d: checksum %llx, expected %llx", round, k,
                      (unsigned long long)got, (unsigned long long)want);
        }
    }
    preload_snapshot_t snap = preload_snapshot();
    preload_alloc_t a0 = preload_find(&snap, buf[0]), a2 = preload_find(&snap, buf[2]);
    VS_EXPECT(a0.found && a0.evictable == 0, "buf0 (named in device memory) should be pinned");
    VS_EXPECT(a2.found && a2.evictable == 1, "buf2 (never named in device memory) should stay evictable");
    preload_snapshot_free(&snap);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: preload_offload_memops memops|no_deadlock|ranges|graph_update|graph_bodies|device_pointers\n");
        return 2;
    }
    vs_test_watchdog_start(100);
    context = preload_context();
    load_kernels();
    int rc;
    if (strcmp(argv[1], "memops") == 0)
        rc = case_memops();
    else if (strcmp(argv[1], "no_deadlock") == 0)
        rc = case_no_deadlock();
    else if (strcmp(argv[1], "ranges") == 0)
        rc = case_ranges();
    else if (strcmp(argv[1], "graph_update") == 0)
        rc = case_graph_update();
    else if (strcmp(argv[1], "graph_bodies") == 0)
        rc = case_graph_bodies();
    else if (strcmp(argv[1], "device_pointers") == 0)
        rc = case_device_pointers();
    else {
        fprintf(stderr, "preload_offload_memops: unknown case %s\n", argv[1]);
        return 2;
    }
    if (rc != 0)
        return rc;
    return vs_test_failure_count() == 0 ? 0 : 1;
}

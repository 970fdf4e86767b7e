/* nccl_client.c: an NCCL program of one process and two devices, run under
 * the shim's offload mode on the simulated driver with the test NCCL
 * (fake_nccl.c): each collective's buffers are evicted before the call and
 * must be restored for it; NCCL's own memory must stay where its peers
 * reach it.
 *
 *   nccl_client [--dlsym] collectives   every collective and a send/receive
 *                                       pair, grouped over both devices,
 *                                       each after its buffers were evicted
 *                                       (once with other work between the
 *                                       calls of the group)
 *   nccl_client [--dlsym] register      a registered buffer stays resident
 *                                       under pressure until deregistered
 *   nccl_client [--dlsym] capture       an all-reduce of a one-rank
 *                                       communicator captured into a graph,
 *                                       launched after its buffers were
 *                                       evicted
 *   nccl_client [--dlsym] nonblocking   non-blocking communicators
 *                                       (`config.blocking = 0`): calls that
 *                                       answer ncclInProgress (a group of
 *                                       both devices, then one rank outside
 *                                       a group) keep their evicted-before
 *                                       buffers resident under pressure
 *                                       until `ncclCommGetAsyncError` says
 *                                       done, byte-exact, evictable after;
 *                                       `ncclCommDestroy` and
 *                                       `ncclCommAbort` while in progress
 *                                       let them go
 *
 * `--dlsym` reaches NCCL as ctypes does: `dlopen(RTLD_LOCAL)` and `dlsym`
 * on the handle. Whether a buffer is mapped is asked of the simulated
 * driver itself (`simcuda_entry_point`), past the shim. Buffers are
 * BUF_MIB MiB (2: the smallest evictable size); VRAM_LIMIT must leave room
 * for about six of them per device.
 *
 * Exit status: 0 when every result is byte-exact and every expected
 * eviction happened; 1 otherwise (each failure printed).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_api.h"
#include "simcuda.h"

#define BUF_BYTES ((size_t)2 << 20)
#define FILLERS 6
#define RANKS 2

#define CHECK_CU(call)                                                                             \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "nccl_client:%d: %s failed: %d\n", __LINE__, #call, (int)rc_);        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CHECK_NCCL(call)                                                                           \
    do {                                                                                           \
        ncclResult_t rc_ = (call);                                                                 \
        if (rc_ != ncclSuccess) {                                                                  \
            fprintf(stderr, "nccl_client:%d: %s failed: %d\n", __LINE__, #call, (int)rc_);        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* NCCL, linked or looked up. */
static struct {
#define NCCL_FN(name) __typeof__(name) *name;
#include "nccl_fns.h"
#undef NCCL_FN
} nccl;

static void nccl_bind(bool use_dlsym)
{
    void *handle = NULL;
    if (use_dlsym) {
        handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) {
            fprintf(stderr, "nccl_client: dlopen(libnccl.so.2): %s\n", dlerror());
            exit(1);
        }
    }
#define NCCL_FN(name)                                                                              \
    do {                                                                                           \
        void *fn = use_dlsym ? dlsym(handle, #name) : (void *)(uintptr_t)&name;                    \
        if (fn == NULL) {                                                                          \
            fprintf(stderr, "nccl_client: no %s\n", #name);                                       \
            exit(1);                                                                               \
        }                                                                                          \
        memcpy(&nccl.name, &fn, sizeof fn);                                                        \
    } while (0);
#include "nccl_fns.h"
#undef NCCL_FN
}

static int failures;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL: " __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Whether every 64 KiB of [ptr, ptr + bytes) is mapped, asked of the
 * simulated driver (an evicted allocation's reservation is not). */
static bool mapped(CUdeviceptr ptr, size_t bytes)
{
    static __typeof__(cuPointerGetAttribute) *attribute;
    if (attribute == NULL) {
        void *fn = simcuda_entry_point("cuPointerGetAttribute");
        memcpy(&attribute, &fn, sizeof fn);
    }
    for (size_t off = 0; off < bytes; off += 64 << 10) {
        int ordinal;
        size_t at = off + (64 << 10) > bytes ? bytes - 1 : off;
        if (attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr + at) != CUDA_SUCCESS)
            return false;
    }
    return true;
}

typedef struct rank_s {
    CUcontext ctx;
    CUstream stream;
    CUdeviceptr fillers[FILLERS];
} rank_t;

static rank_t ranks[RANKS];

static void rank_setup(int r)
{
    CUdevice dev;
    CHECK_CU(cuDeviceGet(&dev, r));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ranks[r].ctx, dev));
    CHECK_CU(cuCtxSetCurrent(ranks[r].ctx));
    CHECK_CU(cuStreamCreate(&ranks[r].stream, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < FILLERS; i++)
        CHECK_CU(cuMemAlloc(&ranks[r].fillers[i], BUF_BYTES));
}

/* Fills `bytes` at `ptr` (on the current context's device) with words of
 * `seed`, and returns them in `host` when not NULL. */
static void fill(CUdeviceptr ptr, size_t bytes, uint32_t seed, uint32_t *host)
{
    uint32_t *words = host != NULL ? host : malloc(bytes);
    for (size_t i = 0; i < bytes / 4; i++)
        words[i] = seed * 2654435761u + (uint32_t)i * 40503u;
    CHECK_CU(cuMemcpyHtoD(ptr, words, bytes));
    if (host == NULL)
        free(words);
}

/* Uses every filler of rank `r`, twice: the least recently used memory of
 * that device (the collectives' buffers) is evicted to make room. */
static void pressure(int r)
{
    CHECK_CU(cuCtxSetCurrent(ranks[r].ctx));
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < FILLERS; i++)
            CHECK_CU(cuMemsetD32(ranks[r].fillers[i], (unsigned)(round * 16 + i), BUF_BYTES / 4));
    CHECK_CU(cuCtxSynchronize());
}

static void read_back(int r, CUdeviceptr ptr, void *host, size_t bytes)
{
    CHECK_CU(cuCtxSetCurrent(ranks[r].ctx));
    CHECK_CU(cuStreamSynchronize(ranks[r].stream));
    CHECK_CU(cuMemcpyDtoH(host, ptr, bytes));
}

/* ---- collectives ----------------------------------------------------------- */

typedef struct bufs_s {
    CUdeviceptr send[RANKS], recv[RANKS];
    uint32_t *host_send[RANKS];
    size_t send_bytes, recv_bytes;
} bufs_t;

static void bufs_make(bufs_t *b, size_t send_bytes, size_t recv_bytes, uint32_t seed)
{
    b->send_bytes = send_bytes;
    b->recv_bytes = recv_bytes;
    for (int r = 0; r < RANKS; r++) {
        CHECK_CU(cuCtxSetCurrent(ranks[r].ctx));
        CHECK_CU(cuMemAlloc(&b->send[r], send_bytes));
        CHECK_CU(cuMemAlloc(&b->recv[r], recv_bytes));
        b->host_send[r] = malloc(send_bytes);
        fill(b->send[r], send_bytes, seed + (uint32_t)r, b->host_send[r]);
        fill(b->recv[r], recv_bytes, 0xdead0000u + (uint32_t)r, NULL);
    }
}

static void bufs_free(bufs_t *b)
{
    for (int r = 0; r < RANKS; r++) {
        CHECK_CU(cuCtxSetCurrent(ranks[r].ctx));
        CHECK_CU(cuMemFree(b->send[r]));
        CHECK_CU(cuMemFree(b->recv[r]));
        free(b->host_send[r]);
    }
}

/* Evicts the buffers of the first `nranks` ranks and checks they are gone
 * from their devices. The prefetcher may learn that the buffers follow the
 * pressure and bring one back ahead of its call: the pressure is made again
 * then, a few times at most. */
static void bufs_evict_ranks(const bufs_t *b, int nranks, const char *what)
{
    for (int attempt = 0; attempt < 4; attempt++) {
        for (int r = 0; r < nranks; r++)
            pressure(r);
        bool gone = true;
        for (int r = 0; r < nranks; r++)
            gone = gone && !mapped(b->send[r], b->send_bytes) && !mapped(b->recv[r], b->recv_bytes);
        if (gone)
            break;
    }
    for (int r = 0; r < nranks; r++) {
        EXPECT(!mapped(b->send[r], b->send_bytes), "%s: rank %d's send buffer was not evicted before the call", what, r);
        EXPECT(!mapped(b->recv[r], b->recv_bytes), "%s: rank %d's receive buffer was not evicted before the call", what,
               r);
    }
}

static void bufs_evict(const bufs_t *b, const char *what)
{
    bufs_evict_ranks(b, RANKS, what);
}

static void expect_words(int r, CUdeviceptr ptr, const uint32_t *expected, size_t bytes, const char *what)
{
    uint32_t *got = malloc(bytes);
    read_back(r, ptr, got, bytes);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < bytes / 4; i++)
        if (got[i] != expected[i] && bad++ == 0)
            first = i;
    EXPECT(bad == 0, "%s: rank %d: %zu of %zu words differ (first at %zu: 0x%08x, expected 0x%08x)", what, r, bad,
           bytes / 4, first, got[first], expected[first]);
    free(got);
}

static void run_collectives(ncclComm_t *comms)
{
    size_t n = BUF_BYTES / 4;
    uint32_t *expected = malloc(BUF_BYTES * RANKS);
    bufs_t b;

    /* All-reduce (sum of uint32: exact whatever the order). */
    bufs_make(&b, BUF_BYTES, BUF_BYTES, 100);
    bufs_evict(&b, "all-reduce");
    CHECK_NCCL(nccl.ncclGroupStart());
    for (int r = 0; r < RANKS; r++)
        CHECK_NCCL(nccl.ncclAllReduce((void *)b.send[r], (void *)b.recv[r], n, ncclUint32, ncclSum, comms[r],
                                      ranks[r].stream));
    CHECK_NCCL(nccl.ncclGroupEnd());
    for (size_t i = 0; i < n; i++)
        expected[i] = b.host_send[0][i] + b.host_send[1][i];
    for (int r = 0; r < RANKS; r++)
        expect_words(r, b.recv[r], expected, BUF_BYTES, "all-reduce");
    bufs_free(&b);

    /* All-reduce in place, with other work on each device between the
     * calls of the group (NCCL runs them only at its end). */
    bufs_make(&b, BUF_BYTES, BUF_BYTES, 150);
    bufs_evict(&b, "grouped all-reduce with work between");
    CHECK_NCCL(nccl.ncclGroupStart());
    for (int r = 0; r < RANKS; r++) {
        CHECK_NCCL(nccl.ncclAllReduce((void *)b.send[r], (void *)b.send[r], n, ncclUint32, ncclSum, comms[r],
                                      ranks[r].stream));
        pressure(r);
    }
    CHECK_NCCL(nccl.ncclGroupEnd());
    for (size_t i = 0; i < n; i++)
        expected[i] = b.host_send[0][i] + b.host_send[1][i];
    for (int r = 0; r < RANKS; r++)
        expect_words(r, b.send[r], expected, BUF_BYTES, "grouped all-reduce with work between");
    bufs_free(&b);

    /* Broadcast from rank 1. */
    bufs_make(&b, BUF_BYTES, BUF_BYTES, 200);
    bufs_evict(&b, "broadcast");
    CHECK_NCCL(nccl.ncclGroupStart());
    for (int r = 0; r < RANKS; r++)
        CHECK_NCCL(nccl.ncclBroadcast((void *)b.send[r], (void *)b.recv[r], n, ncclUint32, 1, comms[r],
                                      ranks[r].stream));
    CHECK_NCCL(nccl.ncclGroupEnd());
    for (int r = 0; r < RANKS; r++)
        expect_words(r, b.recv[r], b.host_send[1], BUF_BYTES, "broadcast");
    bufs_free(&b);

    /* Reduce (max) to rank 0. */
    bufs_make(&b, BUF_BYTES, BUF_BYTES, 300);
    bufs_evict(&b, "reduce");
    CHECK_NCCL(nccl.ncclGroupStart());
    for (int r = 0; r < RANKS; r++)
        CHECK_NCCL(nccl.ncclReduce((void *)b.send[r], (void *)b.recv[r], n, ncclUint32, ncclMax, 0, comms[r],
                                   ranks[r].stream));
    CHECK_NCCL(nccl.ncclGroupEnd());
    for (size_t i = 0; i < n; i++)
        expected[i] = b.host_send[0][i] > b.host_send[1][i] ? b.host_send[0][i] : b.host_send[1][i];
    expect_words(0, b.recv[0], expected, BUF_BYTES, "reduce");
    bufs_free(&b);

    /* All-gather: the receive buffer is the communicator's size times the
     * send count. */
    bufs_make(&b, BUF_BYTES, BUF_BYTES * RANKS, 400);
    bufs_evict(&b, "all-gather");
    CHECK_NCCL(nccl.ncclGroupStart());
    for (int r = 0; r < RANKS; r++)
        CHECK_NCCL(nccl.ncclAllGather((void *)b.send[r], (void *)b.recv[r], n, ncclUint32, comms[r], ranks[r].stream));
    CHECK_NCCL(nccl.ncclGroupEnd());
    for (int j = 0; j < RANKS; j++)
        memcpy(expected + j * n, b.host_send[j], BUF_BYTES);
    for (int r = 0; r < RANKS; r++)
        expect_words(r, b.recv[r], expected, BUF_BYTES * RANKS, "all-gather");
    bufs_free(&b);

    /* Reduce-scatter: the send buffer is the communicator's size times the
     * receive count. */
    bufs_make(&b, BUF_BYTES * RANKS, BUF_BYTES, 500);
    bufs_evict(&b, "reduce-scatter");
    CHECK_NCCL(nccl.ncclGroupStart());
    for (int r = 0; r < RANKS; r++)
        CHECK_NCCL(nccl.ncclReduceScatter((void *)b.send[r], (void *)b.recv[r], n, ncclUint32, ncclSum, comms[r],
                                          ranks[r].stream));
    CHECK_NCCL(nccl.ncclGroupEnd());
    for (int r = 0; r < RANKS; r++) {
        for (size_t i = 0; i < n; i++)
            expected[i] = b.host_send[0][r * n + i] + b.host_send[1][r * n + i];
        expect_words(r, b.recv[r], expected, BUF_BYTES, "reduce-scatter");
    }
    bufs_free(&b);

    /* Send and receive both ways, in one group. */
    bufs_make(&b, BUF_BYTES, BUF_BYTES, 600);
    bufs_evict(&b, "send/receive");
    CHECK_NCCL(nccl.ncclGroupStart());
    for (int r = 0; r < RANKS; r++) {
        CHECK_NCCL(nccl.ncclSend((void *)b.send[r], n, ncclUint32, 1 - r, comms[r], ranks[r].stream));
        CHECK_NCCL(nccl.ncclRecv((void *)b.recv[r], n, ncclUint32, 1 - r, comms[r], ranks[r].stream));
    }
    CHECK_NCCL(nccl.ncclGroupEnd());
    for (int r = 0; r < RANKS; r++)
        expect_words(r, b.recv[r], b.host_send[1 - r], BUF_BYTES, "send/receive");
    bufs_free(&b);
    free(expected);
    printf("collectives: all-reduce (also in place with work inside the group), broadcast, reduce, all-gather, reduce-scatter, send/receive "
           "restored after eviction and byte-exact\n");
}

/* ---- registration ---------------------------------------------------------- */

/* One allocation as large as the room the limit leaves beside NCCL's
 * channel (VRAM_LIMIT=14M: 10 MiB), used once: everything evictable on
 * device 0 must make way for it. */
static void squeeze(void)
{
    CUdeviceptr big;
    size_t bytes = (size_t)10 << 20;
    CHECK_CU(cuCtxSetCurrent(ranks[0].ctx));
    CHECK_CU(cuMemAlloc(&big, bytes));
    CHECK_CU(cuMemsetD32(big, 7, bytes / 4));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemFree(big));
}

static void run_register(ncclComm_t *comms)
{
    CUdeviceptr buf;
    void *handle = NULL;
    CHECK_CU(cuCtxSetCurrent(ranks[0].ctx));
    CHECK_CU(cuMemAlloc(&buf, BUF_BYTES));
    fill(buf, BUF_BYTES, 700, NULL);
    pressure(0);
    EXPECT(!mapped(buf, BUF_BYTES), "register: the buffer was not evicted by the pressure before registration");
    CHECK_NCCL(nccl.ncclCommRegister(comms[0], (void *)buf, BUF_BYTES, &handle));
    EXPECT(mapped(buf, BUF_BYTES), "register: the buffer is not resident after ncclCommRegister");
    pressure(0);
    squeeze();
    EXPECT(mapped(buf, BUF_BYTES), "register: the registered buffer was evicted");
    CHECK_NCCL(nccl.ncclCommDeregister(comms[0], handle));
    squeeze();
    EXPECT(!mapped(buf, BUF_BYTES), "register: the buffer stayed resident after ncclCommDeregister");
    CHECK_CU(cuMemFree(buf));
    printf("register: resident from registration to deregistration, evictable before and after\n");
}

/* ---- non-blocking communicators ------------------------------------------ */

/* Polls `comm` until its state is no longer ncclInProgress; that state. */
static ncclResult_t wait_comm(ncclComm_t comm)
{
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress)
        CHECK_NCCL(nccl.ncclCommGetAsyncError(comm, &state));
    return state;
}

/* Makes pressure on the first `nranks` ranks, then checks their buffers of
 * `b` stayed resident (held) or went (evictable). Once a communicator is
 * gone the limit leaves room for all the fillers and more: the buffers go
 * only because the pressure while they were held left them the least
 * recently used (a call's use counts from its hold). */
static void expect_resident(const bufs_t *b, int nranks, bool resident, const char *what)
{
    for (int r = 0; r < nranks; r++)
        pressure(r);
    for (int r = 0; r < nranks; r++) {
        bool send = mapped(b->send[r], b->send_bytes), recv = mapped(b->recv[r], b->recv_bytes);
        if (resident)
            EXPECT(send && recv, "%s: rank %d's buffers were evicted while its call was in progress", what, r);
        else
            EXPECT(!send && !recv, "%s: rank %d's buffers stayed resident (a hold was not let go)", what, r);
    }
}

static void run_nonblocking(void)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    ncclComm_t comms[RANKS], one;
    size_t n = BUF_BYTES / 4;
    uint32_t *expected = malloc(BUF_BYTES);
    bufs_t b;
    config.blocking = 0;

    /* Both devices, ranks made from this thread: the init answers
     * ncclInProgress until polled done. */
    CHECK_NCCL(nccl.ncclGetUniqueId(&id));
    for (int r = 0; r < RANKS; r++) {
        CHECK_CU(cuCtxSetCurrent(ranks[r].ctx));
        ncclResult_t rc = nccl.ncclCommInitRankConfig(&comms[r], RANKS, id, r, &config);
        if (rc != ncclInProgress && rc != ncclSuccess) {
            fprintf(stderr, "nccl_client: ncclCommInitRankConfig(rank %d) failed: %d\n", r, (int)rc);
            exit(1);
        }
    }
    for (int r = 0; r < RANKS; r++)
        EXPECT(wait_comm(comms[r]) == ncclSuccess, "non-blocking init: rank %d failed", r);

    /* A group: the calls answer ncclSuccess, its end ncclInProgress; the
     * kernels are launched at a later poll, after the pressure. */
    bufs_make(&b, BUF_BYTES, BUF_BYTES, 1000);
    bufs_evict(&b, "non-blocking grouped all-reduce");
    CHECK_NCCL(nccl.ncclGroupStart());
    for (int r = 0; r < RANKS; r++)
        CHECK_NCCL(nccl.ncclAllReduce((void *)b.send[r], (void *)b.recv[r], n, ncclUint32, ncclSum, comms[r],
                                      ranks[r].stream));
    ncclResult_t rc = nccl.ncclGroupEnd();
    EXPECT(rc == ncclInProgress, "non-blocking grouped all-reduce: ncclGroupEnd answered %d, not ncclInProgress",
           (int)rc);
    expect_resident(&b, RANKS, true, "non-blocking grouped all-reduce");
    for (int r = 0; r < RANKS; r++)
        EXPECT(wait_comm(comms[r]) == ncclSuccess, "non-blocking grouped all-reduce: rank %d failed", r);
    for (size_t i = 0; i < n; i++)
        expected[i] = b.host_send[0][i] + b.host_send[1][i];
    for (int r = 0; r < RANKS; r++)
        expect_words(r, b.recv[r], expected, BUF_BYTES, "non-blocking grouped all-reduce");
    expect_resident(&b, RANKS, false, "non-blocking grouped all-reduce, done");
    bufs_free(&b);

    /* Destroyed while in progress: NCCL finalizes the communicator first
     * (the work is submitted), then its holds must go. */
    bufs_make(&b, BUF_BYTES, BUF_BYTES, 1100);
    bufs_evict(&b, "ncclCommDestroy in progress");
    CHECK_NCCL(nccl.ncclGroupStart());
    for (int r = 0; r < RANKS; r++)
        CHECK_NCCL(nccl.ncclAllReduce((void *)b.send[r], (void *)b.recv[r], n, ncclUint32, ncclSum, comms[r],
                                      ranks[r].stream));
    rc = nccl.ncclGroupEnd();
    EXPECT(rc == ncclInProgress, "ncclCommDestroy in progress: ncclGroupEnd answered %d, not ncclInProgress", (int)rc);
    expect_resident(&b, RANKS, true, "ncclCommDestroy in progress");
    for (int r = 0; r < RANKS; r++)
        CHECK_NCCL(nccl.ncclCommDestroy(comms[r]));
    for (size_t i = 0; i < n; i++)
        expected[i] = b.host_send[0][i] + b.host_send[1][i];
    for (int r = 0; r < RANKS; r++)
        expect_words(r, b.recv[r], expected, BUF_BYTES, "all-reduce finalized by ncclCommDestroy");
    expect_resident(&b, RANKS, false, "ncclCommDestroy in progress");
    bufs_free(&b);

    /* One rank outside a group: the call itself answers ncclInProgress. */
    CHECK_CU(cuCtxSetCurrent(ranks[0].ctx));
    CHECK_NCCL(nccl.ncclGetUniqueId(&id));
    rc = nccl.ncclCommInitRankConfig(&one, 1, id, 0, &config);
    EXPECT(rc == ncclInProgress, "one-rank non-blocking init answered %d, not ncclInProgress", (int)rc);
    EXPECT(wait_comm(one) == ncclSuccess, "one-rank non-blocking init failed");
    bufs_make(&b, BUF_BYTES, BUF_BYTES, 1200);
    bufs_evict_ranks(&b, 1, "non-blocking all-reduce");
    rc = nccl.ncclAllReduce((void *)b.send[0], (void *)b.recv[0], n, ncclUint32, ncclSum, one, ranks[0].stream);
    EXPECT(rc == ncclInProgress, "non-blocking all-reduce answered %d, not ncclInProgress", (int)rc);
    expect_resident(&b, 1, true, "non-blocking all-reduce");
    EXPECT(wait_comm(one) == ncclSuccess, "non-blocking all-reduce failed");
    expect_words(0, b.recv[0], b.host_send[0], BUF_BYTES, "non-blocking all-reduce");
    expect_resident(&b, 1, false, "non-blocking all-reduce, done");
    bufs_free(&b);

    /* Aborted while in progress: NCCL drops the work; the holds must go. */
    bufs_make(&b, BUF_BYTES, BUF_BYTES, 1300);
    bufs_evict_ranks(&b, 1, "ncclCommAbort in progress");
    rc = nccl.ncclAllReduce((void *)b.send[0], (void *)b.recv[0], n, ncclUint32, ncclSum, one, ranks[0].stream);
    EXPECT(rc == ncclInProgress, "ncclCommAbort in progress: the all-reduce answered %d, not ncclInProgress", (int)rc);
    expect_resident(&b, 1, true, "ncclCommAbort in progress");
    CHECK_NCCL(nccl.ncclCommAbort(one));
    expect_resident(&b, 1, false, "ncclCommAbort in progress");
    bufs_free(&b);
    free(expected);
    printf("nonblocking: a grouped all-reduce of two ranks and an all-reduce of one answering ncclInProgress held "
           "through pressure until done, byte-exact, evictable after; holds let go by ncclCommDestroy and "
           "ncclCommAbort in progress\n");
}

/* ---- capture ----------------------------------------------------------------- */

static void run_capture(void)
{
    ncclComm_t one;
    int dev0 = 0;
    size_t n = BUF_BYTES / 4;
    CUdeviceptr send, recv;
    uint32_t *host = malloc(BUF_BYTES);
    CUgraph graph;
    CUgraphExec exec;

    CHECK_CU(cuCtxSetCurrent(ranks[0].ctx));
    CHECK_NCCL(nccl.ncclCommInitAll(&one, 1, &dev0));
    CHECK_CU(cuMemAlloc(&send, BUF_BYTES));
    CHECK_CU(cuMemAlloc(&recv, BUF_BYTES));
    /* Outside a group: a one-rank communicator runs the call at once. */
    fill(send, BUF_BYTES, 800, host);
    pressure(0);
    EXPECT(!mapped(send, BUF_BYTES), "ungrouped: the send buffer was not evicted before the call");
    CHECK_NCCL(nccl.ncclAllReduce((void *)send, (void *)recv, n, ncclUint32, ncclSum, one, ranks[0].stream));
    expect_words(0, recv, host, BUF_BYTES, "ungrouped all-reduce");

    CHECK_CU(cuCtxSetCurrent(ranks[0].ctx));
    CHECK_CU(cuStreamBeginCapture(ranks[0].stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CHECK_NCCL(nccl.ncclAllReduce((void *)send, (void *)recv, n, ncclUint32, ncclSum, one, ranks[0].stream));
    CHECK_CU(cuStreamEndCapture(ranks[0].stream, &graph));
    /* Evicted before the executable graph exists; from its instantiation
     * it holds them, its launches restore them; once it is gone they are
     * evictable again. */
    for (int round = 0; round < 2; round++) {
        CHECK_CU(cuCtxSetCurrent(ranks[0].ctx));
        fill(send, BUF_BYTES, 900 + (uint32_t)round, host);
        fill(recv, BUF_BYTES, 0xbad, NULL);
        pressure(0);
        if (round == 0) {
            EXPECT(!mapped(send, BUF_BYTES) && !mapped(recv, BUF_BYTES),
                   "capture: the buffers were not evicted before the graph's instantiation");
            CHECK_CU(cuGraphInstantiate(&exec, graph, 0));
        } else {
            EXPECT(mapped(send, BUF_BYTES) && mapped(recv, BUF_BYTES),
                   "capture: the executable graph does not hold the buffers its NCCL call named");
        }
        CHECK_CU(cuCtxSetCurrent(ranks[0].ctx));
        CHECK_CU(cuGraphLaunch(exec, ranks[0].stream));
        expect_words(0, recv, host, BUF_BYTES, "captured all-reduce");
    }
    CHECK_CU(cuGraphExecDestroy(exec));
    pressure(0);
    EXPECT(!mapped(send, BUF_BYTES) || !mapped(recv, BUF_BYTES),
           "capture: the buffers stayed resident after the executable graph was destroyed");
    CHECK_CU(cuGraphDestroy(graph));
    CHECK_CU(cuCtxSetCurrent(ranks[0].ctx));
    CHECK_CU(cuMemFree(send));
    CHECK_CU(cuMemFree(recv));
    CHECK_NCCL(nccl.ncclCommDestroy(one));
    free(host);
    printf("capture: a one-rank all-reduce outside a group and captured into a graph, byte-exact after eviction\n");
}

int main(int argc, char **argv)
{
    bool use_dlsym = argc > 1 && strcmp(argv[1], "--dlsym") == 0;
    const char *scenario = argc > 1 + use_dlsym ? argv[1 + use_dlsym] : "";
    if (strcmp(scenario, "collectives") != 0 && strcmp(scenario, "register") != 0 && strcmp(scenario, "capture") != 0
        && strcmp(scenario, "nonblocking") != 0) {
        fprintf(stderr, "usage: nccl_client [--dlsym] collectives|register|capture|nonblocking\n");
        return 2;
    }
    nccl_bind(use_dlsym);
    CHECK_CU(cuInit(0));
    int count = 0;
    CHECK_CU(cuDeviceGetCount(&count));
    if (count < RANKS) {
        fprintf(stderr, "nccl_client: %d devices, %d needed (SIMCUDA_DEVICES)\n", count, RANKS);
        return 1;
    }
    for (int r = 0; r < RANKS; r++)
        rank_setup(r);
    ncclComm_t comms[RANKS];
    int devs[RANKS] = {0, 1};
    if (strcmp(scenario, "capture") == 0) {
        run_capture();
    } else if (strcmp(scenario, "nonblocking") == 0) {
        run_nonblocking();
    } else {
        CHECK_NCCL(nccl.ncclCommInitAll(comms, RANKS, devs));
        if (strcmp(scenario, "collectives") == 0)
            run_collectives(comms);
        else
            run_register(comms);
        for (int r = 0; r < RANKS; r++)
            CHECK_NCCL(nccl.ncclCommDestroy(comms[r]));
    }
    if (failures > 0) {
        fprintf(stderr, "nccl_client %s: %d failures\n", scenario, failures);
        return 1;
    }
    return 0;
}

/* test_sim_memop.c: simcuda's stream memory operations against cuda.h:
 * writes land in stream order, waits hold back the work queued behind them
 * (and only that stream's), every wait condition (GEQ cyclic, EQ, AND, NOR)
 * at 32 and 64 bits, batches, capture into a batch-mem-op node, the
 * documented errors, and `cuGetProcAddress`.
 */
#include <cuda.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static CUcontext ctx;

static int setup(void **state)
{
    (void)state;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static uint32_t read32(CUdeviceptr p)
{
    uint32_t v = 0;
    assert_int_equal(cuMemcpyDtoH_v2(&v, p, sizeof v), CUDA_SUCCESS);
    return v;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_write_value_lands_in_stream_order(void **state)
{
    (void)state;
    CUstream s;
    CUdeviceptr p;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&p, 64), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32Async(p, 1, 16, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamWriteValue32_v2(s, p, 7, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamWriteValue64_v2(s, p + 8, 0x1122334455667788ull, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(read32(p), 7);
    assert_int_equal(read32(p + 4), 1);
    uint64_t v64 = 0;
    assert_int_equal(cuMemcpyDtoH_v2(&v64, p + 8, 8), CUDA_SUCCESS);
    assert_true(v64 == 0x1122334455667788ull);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

/* A wait holds back its stream's later work until another stream writes;
 * the writing stream is not held back. */
static void test_wait_value_blocks_until_other_stream_writes(void **state)
{
    (void)state;
    CUstream a, b;
    CUdeviceptr flag, out;
    assert_int_equal(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&flag, 8), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&out, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(flag, 0, 2), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(out, 0, 1), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitValue32_v2(a, flag, 5, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
    assert_int_equal(cuStreamWriteValue32_v2(a, out, 1, 0), CUDA_SUCCESS);
    sleep_ms(20);
    assert_int_equal(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    assert_int_equal(read32(out), 0);
    /* 4 is not >= 5: still waiting. */
    assert_int_equal(cuStreamWriteValue32_v2(b, flag, 4, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);
    sleep_ms(20);
    assert_int_equal(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuStreamWriteValue32_v2(b, flag, 5, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(a), CUDA_SUCCESS);
    assert_int_equal(read32(out), 1);
    assert_int_equal(cuMemFree_v2(flag), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(out), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(b), CUDA_SUCCESS);
}

/* Each condition, checked by whether a wait on a value already in memory
 * completes (satisfied) or stays pending (not), then released. */
typedef struct cond_case_s {
    unsigned flags;
    uint64_t memory, value;
    bool satisfied;
    bool is64;
} cond_case_t;

static void test_wait_conditions_follow_cuda_h(void **state)
{
    (void)state;
    static const cond_case_t cases[] = {
        {CU_STREAM_WAIT_VALUE_GEQ, 5, 5, true, false},
        {CU_STREAM_WAIT_VALUE_GEQ, 4, 5, false, false},
        /* cyclic: 0x00000001 - 0xfffffff0 = 0x11 >= 0 */
        {CU_STREAM_WAIT_VALUE_GEQ, 1, 0xfffffff0u, true, false},
        {CU_STREAM_WAIT_VALUE_GEQ, 0xfffffff0u, 1, false, false},
        {CU_STREAM_WAIT_VALUE_EQ, 9, 9, true, false},
        {CU_STREAM_WAIT_VALUE_EQ, 9, 8, false, false},
        {CU_STREAM_WAIT_VALUE_AND, 6, 2, true, false},
        {CU_STREAM_WAIT_VALUE_AND, 6, 1, false, false},
        {CU_STREAM_WAIT_VALUE_NOR, 0xfffffffeu, 0, true, false},
        {CU_STREAM_WAIT_VALUE_NOR, 0xffff0000u, 0x0000ffffu, false, false},
        {CU_STREAM_WAIT_VALUE_GEQ, 1, 0xfffffffffffffff0ull, true, true},
        {CU_STREAM_WAIT_VALUE_GEQ, 0x100000000ull, 0x100000001ull, false, true},
        {CU_STREAM_WAIT_VALUE_EQ, 0x500000000ull, 0x500000000ull, true, true},
        {CU_STREAM_WAIT_VALUE_AND, 0x100000000ull, 0x100000000ull, true, true},
        {CU_STREAM_WAIT_VALUE_NOR, 0xffffffffffffffffull, 0, false, true},
    };
    CUstream s;
    CUdeviceptr p;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&p, 8), CUDA_SUCCESS);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const cond_case_t *c = &cases[i];
        if (c->is64) {
            assert_int_equal(cuMemcpyHtoD_v2(p, &c->memory, 8), CUDA_SUCCESS);
            assert_int_equal(cuStreamWaitValue64_v2(s, p, c->value, c->flags), CUDA_SUCCESS);
        } else {
            uint32_t m = (uint32_t)c->memory;
            assert_int_equal(cuMemcpyHtoD_v2(p, &m, 4), CUDA_SUCCESS);
            assert_int_equal(cuStreamWaitValue32_v2(s, p, (cuuint32_t)c->value, c->flags), CUDA_SUCCESS);
        }
        if (c->satisfied) {
            assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
            continue;
        }
        sleep_ms(10);
        if (cuStreamQuery(s) != CUDA_ERROR_NOT_READY)
            fail_msg("case %zu: a wait whose condition does not hold completed", i);
        /* Release it: a value that satisfies every pending case. */
        uint64_t release = c->flags == CU_STREAM_WAIT_VALUE_NOR ? 0 : c->value;
        if (c->flags == CU_STREAM_WAIT_VALUE_AND)
            release = c->value;
        if (c->is64)
            assert_int_equal(cuMemcpyHtoD_v2(p, &release, 8), CUDA_SUCCESS);
        else {
            uint32_t r = (uint32_t)release;
            assert_int_equal(cuMemcpyHtoD_v2(p, &r, 4), CUDA_SUCCESS);
        }
        assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    }
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

static void test_batch_runs_in_order(void **state)
{
    (void)state;
    CUstream s;
    CUdeviceptr p;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&p, 16), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(p, 0, 4), CUDA_SUCCESS);
    CUstreamBatchMemOpParams ops[4];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = p;
    ops[0].writeValue.value = 3;
    ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[1].waitValue.address = p;
    ops[1].waitValue.value = 3;
    ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    ops[2].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
    ops[2].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_GPU;
    ops[3].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[3].writeValue.address = p + 8;
    ops[3].writeValue.value64 = 42;
    assert_int_equal(cuStreamBatchMemOp_v2(s, 4, ops, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(read32(p), 3);
    assert_int_equal(read32(p + 8), 42);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

/* Pinned host memory is accepted (its device pointer is its address). */
static void test_pinned_host_memory_is_accepted(void **state)
{
    (void)state;
    uint32_t *host = NULL;
    assert_int_equal(cuMemHostAlloc((void **)&host, 64, 0), CUDA_SUCCESS);
    host[0] = 0;
    assert_int_equal(cuStreamWriteValue32_v2(NULL, (CUdeviceptr)(uintptr_t)host, 11, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(__atomic_load_n(&host[0], __ATOMIC_SEQ_CST), 11);
    assert_int_equal(cuMemFreeHost(host), CUDA_SUCCESS);
}

static void test_errors_are_the_documented_ones(void **state)
{
    (void)state;
    CUdeviceptr p, managed;
    uint32_t pageable[4];
    assert_int_equal(cuMemAlloc_v2(&p, 64), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocManaged(&managed, 64, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    /* Misaligned, null, pageable, managed, past the allocation. */
    assert_int_equal(cuStreamWriteValue32_v2(NULL, p + 2, 1, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamWriteValue64_v2(NULL, p + 4, 1, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamWaitValue32_v2(NULL, 0, 1, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamWriteValue32_v2(NULL, (CUdeviceptr)(uintptr_t)pageable, 1, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamWriteValue32_v2(NULL, managed, 1, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamWriteValue64_v2(NULL, p + 64, 1, 0), CUDA_ERROR_INVALID_VALUE);
    /* Flags: unknown wait type bits, NO_MEMORY_BARRIER (not in v2), FLUSH
     * (the device cannot flush remote writes). */
    assert_int_equal(cuStreamWaitValue32_v2(NULL, p, 1, 0x4), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamWriteValue32_v2(NULL, p, 1, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER), CUDA_ERROR_INVALID_VALUE);
    int can_flush = -1;
    assert_int_equal(cuDeviceGetAttribute(&can_flush, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, 0), CUDA_SUCCESS);
    assert_int_equal(can_flush, 0);
    assert_int_equal(cuStreamWaitValue32_v2(NULL, p, 0, CU_STREAM_WAIT_VALUE_FLUSH), CUDA_ERROR_NOT_SUPPORTED);
    /* Batches: flags, count, unknown operation; nothing of a refused batch
     * runs. */
    CUstreamBatchMemOpParams ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = p;
    ops[0].writeValue.value = 77;
    ops[1].operation = (CUstreamBatchMemOpType)99;
    assert_int_equal(cuMemsetD32_v2(p, 0, 1), CUDA_SUCCESS);
    assert_int_equal(cuStreamBatchMemOp_v2(NULL, 2, ops, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamBatchMemOp_v2(NULL, 1, ops, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamBatchMemOp_v2(NULL, 256, ops, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamBatchMemOp_v2(NULL, 0, ops, 0), CUDA_ERROR_INVALID_VALUE);
    ops[1].operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
    assert_int_equal(cuStreamBatchMemOp_v2(NULL, 2, ops, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(read32(p), 0);
    /* A handle that is no stream (a destroyed one is undefined behaviour,
     * on the real driver as here). */
    static uint64_t not_a_stream[32];
    assert_int_equal(cuStreamWriteValue32_v2((CUstream)(void *)not_a_stream, p, 1, 0), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(managed), CUDA_SUCCESS);
}

/* Captured, a memory operation is one batch-mem-op node that runs at each
 * launch of the graph. */
static void test_capture_records_a_batch_mem_op_node(void **state)
{
    (void)state;
    CUstream s;
    CUdeviceptr p;
    CUgraph graph;
    CUgraphExec exec;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&p, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(p, 0, 1), CUDA_SUCCESS);
    assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cuStreamWriteValue32_v2(s, p, 9, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
    assert_int_equal(read32(p), 0);
    size_t count = 0;
    CUgraphNode node;
    CUgraphNodeType type;
    assert_int_equal(cuGraphGetNodes(graph, NULL, &count), CUDA_SUCCESS);
    assert_int_equal(count, 1);
    assert_int_equal(cuGraphGetNodes(graph, &node, &count), CUDA_SUCCESS);
    assert_int_equal(cuGraphNodeGetType(node, &type), CUDA_SUCCESS);
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
    assert_int_equal(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(read32(p), 9);
    assert_int_equal(cuGraphExecDestroy(exec), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(graph), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

/* A stream destroyed while it waits keeps its work: cuCtxSynchronize
 * (and the legacy stream) still wait for it, as on the real driver. */
static void test_destroyed_waiting_stream_is_covered_by_context_sync(void **state)
{
    (void)state;
    CUstream a, b;
    CUdeviceptr flag, out;
    /* Non-blocking: the legacy stream's copies below do not wait for it. */
    assert_int_equal(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&flag, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&out, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(flag, 0, 1), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(out, 0, 1), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitValue32_v2(a, flag, 1, CU_STREAM_WAIT_VALUE_EQ), CUDA_SUCCESS);
    assert_int_equal(cuStreamWriteValue32_v2(a, out, 5, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(a), CUDA_SUCCESS);
    sleep_ms(20);
    assert_int_equal(read32(out), 0);
    assert_int_equal(cuStreamWriteValue32_v2(b, flag, 1, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(read32(out), 5);
    assert_int_equal(cuMemFree_v2(flag), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(out), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(b), CUDA_SUCCESS);
}

static void test_procaddr_resolves_the_v2_symbols(void **state)
{
    (void)state;
    static const char *const names[] = {"cuStreamWriteValue32", "cuStreamWriteValue64", "cuStreamWaitValue32",
                                        "cuStreamWaitValue64", "cuStreamBatchMemOp"};
    static const char *const symbols[] = {"cuStreamWriteValue32_v2", "cuStreamWriteValue64_v2",
                                          "cuStreamWaitValue32_v2", "cuStreamWaitValue64_v2",
                                          "cuStreamBatchMemOp_v2"};
    for (size_t i = 0; i < 5; i++) {
        void *pfn = NULL, *ptsz = NULL;
        CUdriverProcAddressQueryResult status;
        assert_int_equal(cuGetProcAddress_v2(names[i], &pfn, 12000, 0, &status), CUDA_SUCCESS);
        char want[64];
        snprintf(want, sizeof want, "%s", symbols[i]);
        assert_ptr_equal(pfn, dlsym(RTLD_DEFAULT, want));
        assert_int_equal(cuGetProcAddress_v2(names[i], &ptsz, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                                             &status), CUDA_SUCCESS);
        snprintf(want, sizeof want, "%s_ptsz", symbols[i]);
        assert_ptr_equal(ptsz, dlsym(RTLD_DEFAULT, want));
    }
}

/* The CUDA 8/9 forms: found by cuGetProcAddress at their own versions and by
 * name, and refused as an H100 refuses them (it reports
 * CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 = 0). */
static void test_v1_forms_are_not_supported_as_on_an_h100(void **state)
{
    (void)state;
    int v1 = -1;
    assert_int_equal(cuDeviceGetAttribute(&v1, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0), CUDA_SUCCESS);
    assert_int_equal(v1, 0);
    static const char *const names[] = {"cuStreamWriteValue32", "cuStreamWriteValue64", "cuStreamWaitValue32",
                                        "cuStreamWaitValue64", "cuStreamBatchMemOp"};
    static const int versions[] = {8000, 9000, 8000, 9000, 8000};
    for (size_t i = 0; i < 5; i++) {
        void *pfn = NULL;
        CUdriverProcAddressQueryResult status;
        assert_int_equal(cuGetProcAddress_v2(names[i], &pfn, versions[i], 0, &status), CUDA_SUCCESS);
        assert_ptr_equal(pfn, dlsym(RTLD_DEFAULT, names[i]));
    }
    CUdeviceptr word;
    assert_int_equal(cuMemAlloc_v2(&word, 8), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8_v2(word, 0, 8), CUDA_SUCCESS);
    assert_int_equal(cuStreamWriteValue32(NULL, word, 7, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuStreamWriteValue64(NULL, word, 7, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuStreamWaitValue32(NULL, word, 0, CU_STREAM_WAIT_VALUE_GEQ), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuStreamWaitValue64(NULL, word, 0, CU_STREAM_WAIT_VALUE_GEQ), CUDA_ERROR_NOT_SUPPORTED);
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof op);
    op.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = word;
    op.writeValue.value = 9;
    assert_int_equal(cuStreamBatchMemOp(NULL, 1, &op, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(read32(word), 0); /* nothing was written */
    assert_int_equal(cuMemFree_v2(word), CUDA_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_value_lands_in_stream_order),
        cmocka_unit_test(test_wait_value_blocks_until_other_stream_writes),
        cmocka_unit_test(test_wait_conditions_follow_cuda_h),
        cmocka_unit_test(test_batch_runs_in_order),
        cmocka_unit_test(test_pinned_host_memory_is_accepted),
        cmocka_unit_test(test_errors_are_the_documented_ones),
        cmocka_unit_test(test_capture_records_a_batch_mem_op_node),
        cmocka_unit_test(test_destroyed_waiting_stream_is_covered_by_context_sync),
        cmocka_unit_test(test_procaddr_resolves_the_v2_symbols),
        cmocka_unit_test(test_v1_forms_are_not_supported_as_on_an_h100),
    };
    return cmocka_run_group_tests_name("simcuda stream memory operations", tests, setup, NULL);
}

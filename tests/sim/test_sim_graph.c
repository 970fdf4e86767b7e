/* test_sim_graph.c: simcuda's stream capture and graphs: captured work is
 * recorded, not run; replays re-execute it; cross-stream fork/join; node
 * queries; and the capture errors real programs hit (synchronising during a
 * global capture, isolation, unjoined forks, legacy-stream implicit sync).
 */
#include <cuda.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static CUcontext ctx;
static CUmodule module;
static CUfunction fn_fill, fn_axpy;

static int setup(void **state)
{
    (void)state;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoadData(&module, "image") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_fill, module, "sim_fill_u32") != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn_axpy, module, "sim_axpy_f32") != CUDA_SUCCESS)
        return -1;
    return 0;
}

static void add_one(void *arg)
{
    (*(int *)arg)++;
}

static float read_float(CUdeviceptr d, size_t index)
{
    float v;
    assert_int_equal(cuMemcpyDtoH_v2(&v, d + index * 4, 4), CUDA_SUCCESS);
    return v;
}

/* y = 2x + y captured once; each replay applies it again. */
static void test_captured_work_runs_only_on_replay(void **state)
{
    (void)state;
    enum { N = 32 };
    CUstream s;
    CUdeviceptr x, y;
    CUgraph graph;
    CUgraphExec exec;
    int host_calls = 0;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&x, N * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&y, N * 4), CUDA_SUCCESS);
    float ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    assert_int_equal(cuMemcpyHtoD_v2(x, ones, sizeof(ones)), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(y, 0, N), CUDA_SUCCESS);

    assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CUstreamCaptureStatus status;
    assert_int_equal(cuStreamIsCapturing(s, &status), CUDA_SUCCESS);
    assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    float a = 2.0f;
    uint64_t n = N;
    void *params[] = {&a, &x, &y, &n};
    assert_int_equal(cuLaunchKernel(fn_axpy, 1, 1, 1, 32, 1, 1, 0, s, params, NULL), CUDA_SUCCESS);
    a = 100.0f; /* the graph keeps its own copy of the arguments */
    assert_int_equal(cuMemsetD32Async(x + 4 * (N - 1), 0, 1, s), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(s, add_one, &host_calls), CUDA_SUCCESS);
    assert_int_equal(cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
    assert_non_null(graph);
    assert_int_equal(cuStreamIsCapturing(s, &status), CUDA_SUCCESS);
    assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_NONE);

    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_true(read_float(y, 0) == 0.0f); /* nothing ran */
    assert_int_equal(host_calls, 0);

    size_t count = 0;
    assert_int_equal(cuGraphGetNodes(graph, NULL, &count), CUDA_SUCCESS);
    assert_int_equal(count, 3);
    CUgraphNode nodes[3];
    assert_int_equal(cuGraphGetNodes(graph, nodes, &count), CUDA_SUCCESS);
    CUgraphNodeType type;
    assert_int_equal(cuGraphNodeGetType(nodes[0], &type), CUDA_SUCCESS);
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_KERNEL);
    assert_int_equal(cuGraphNodeGetType(nodes[1], &type), CUDA_SUCCESS);
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_MEMSET);
    assert_int_equal(cuGraphNodeGetType(nodes[2], &type), CUDA_SUCCESS);
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_HOST);
    CUDA_KERNEL_NODE_PARAMS kp;
    assert_int_equal(cuGraphKernelNodeGetParams_v2(nodes[0], &kp), CUDA_SUCCESS);
    assert_ptr_equal(kp.func, fn_axpy);
    assert_int_equal(kp.blockDimX, 32);
    assert_true(*(float *)kp.kernelParams[0] == 2.0f);
    assert_int_equal(*(CUdeviceptr *)kp.kernelParams[2], y);
    assert_ptr_not_equal(kp.kernelParams[0], &a);

    assert_int_equal(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(graph), CUDA_SUCCESS); /* the executable is independent */
    assert_int_equal(cuGraphLaunch(exec, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_true(read_float(y, 0) == 2.0f);
    assert_true(read_float(y, N - 1) == 2.0f);
    assert_int_equal(host_calls, 1);
    /* Second replay: x[N-1] is now 0, so y[N-1] stays. */
    assert_int_equal(cuGraphLaunch_ptsz(exec, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_true(read_float(y, 0) == 4.0f);
    assert_true(read_float(y, N - 1) == 2.0f);
    assert_int_equal(host_calls, 2);
    assert_int_equal(cuGraphExecDestroy(exec), CUDA_SUCCESS);
    cuMemFree_v2(x);
    cuMemFree_v2(y);
    cuStreamDestroy_v2(s);
}

/* Fork onto a second stream with an event, join back: both branches are in
 * the graph and the replay runs both. */
static void test_cross_stream_fork_join_is_captured(void **state)
{
    (void)state;
    CUstream origin, side;
    CUevent fork, join;
    CUgraph graph;
    CUgraphExec exec;
    CUdeviceptr a, b;
    assert_int_equal(cuStreamCreate(&origin, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&a, 64), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&b, 64), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(a, 0, 16), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32_v2(b, 0, 16), CUDA_SUCCESS);

    assert_int_equal(cuStreamBeginCapture_v2(origin, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32Async(a, 11, 16, origin), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(fork, origin), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(side, fork, 0), CUDA_SUCCESS);
    CUstreamCaptureStatus status;
    cuuint64_t id_origin = 0, id_side = 1;
    const CUgraphNode *deps = NULL;
    size_t dep_count = 0;
    assert_int_equal(cuStreamGetCaptureInfo_v3(side, &status, &id_side, NULL, &deps, NULL, &dep_count), CUDA_SUCCESS);
    assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_int_equal(dep_count, 1);
    assert_int_equal(cuStreamGetCaptureInfo_v3(origin, &status, &id_origin, NULL, NULL, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(id_origin, id_side);
    assert_int_equal(cuMemcpyDtoDAsync_v2(b, a, 64, side), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(join, side), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(origin, join, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamEndCapture(origin, &graph), CUDA_SUCCESS);
    assert_int_equal(cuStreamIsCapturing(side, &status), CUDA_SUCCESS);
    assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_NONE);

    assert_int_equal(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, origin), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(origin), CUDA_SUCCESS);
    uint32_t out[16];
    assert_int_equal(cuMemcpyDtoH_v2(out, b, 64), CUDA_SUCCESS);
    for (int i = 0; i < 16; i++)
        assert_int_equal(out[i], 11);
    cuGraphExecDestroy(exec);
    cuGraphDestroy(graph);
    cuEventDestroy_v2(fork);
    cuEventDestroy_v2(join);
    cuStreamDestroy_v2(origin);
    cuStreamDestroy_v2(side);
    cuMemFree_v2(a);
    cuMemFree_v2(b);
}

static void test_fork_without_join_fails_unjoined(void **state)
{
    (void)state;
    CUstream origin, side;
    CUevent fork;
    CUgraph graph = (CUgraph)1;
    CUdeviceptr a;
    assert_int_equal(cuStreamCreate(&origin, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&a, 64), CUDA_SUCCESS);
    assert_int_equal(cuStreamBeginCapture_v2(origin, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(fork, origin), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(side, fork, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(a, 1, 64, side), CUDA_SUCCESS);
    assert_int_equal(cuStreamEndCapture(side, &graph), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    assert_int_equal(cuStreamEndCapture(origin, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_null(graph);

    assert_int_equal(cuStreamBeginCapture_v2(origin, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(fork, origin), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(side, fork, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(a, 1, 64, side), CUDA_SUCCESS);
    assert_int_equal(cuStreamEndCapture(origin, &graph), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    cuEventDestroy_v2(fork);
    cuStreamDestroy_v2(origin);
    cuStreamDestroy_v2(side);
    cuMemFree_v2(a);
}

/* Synchronising calls during a global capture are refused and invalidate
 * the capture; the stream works normally afterwards. */
static void test_sync_during_global_capture_invalidates_it(void **state)
{
    (void)state;
    CUstream s;
    CUgraph graph = (CUgraph)1;
    CUdeviceptr d;
    uint32_t host = 0;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&d, 4), CUDA_SUCCESS);

    for (int which = 0; which < 4; which++) {
        assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
        assert_int_equal(cuMemsetD32Async(d, 5, 1, s), CUDA_SUCCESS);
        switch (which) {
        case 0:
            assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
            break;
        case 1:
            assert_int_equal(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
            break;
        case 2:
            assert_int_equal(cuMemcpyDtoH_v2(&host, d, 4), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
            break;
        case 3: {
            CUdeviceptr extra;
            assert_int_equal(cuMemAlloc_v2(&extra, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
            break;
        }
        }
        CUstreamCaptureStatus status;
        assert_int_equal(cuStreamIsCapturing(s, &status), CUDA_SUCCESS);
        assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
        assert_int_equal(cuMemsetD32Async(d, 6, 1, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        assert_int_equal(cuStreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        assert_null(graph);
    }
    /* Nothing captured ever ran, and the stream is usable again. */
    assert_int_equal(cuMemcpyDtoH_v2(&host, d, 4), CUDA_SUCCESS);
    assert_int_not_equal(host, 5);
    assert_int_equal(cuMemsetD32Async(d, 7, 1, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    cuMemFree_v2(d);
    cuStreamDestroy_v2(s);
}

/* Relaxed mode (as PyTorch uses for its allocator) permits cuMemAlloc. */
static void test_relaxed_thread_mode_permits_allocation(void **state)
{
    (void)state;
    CUstream s;
    CUgraph graph;
    CUdeviceptr d;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    assert_int_equal(cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
    assert_int_equal(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    assert_int_equal(cuMemAlloc_v2(&d, 64), CUDA_SUCCESS);
    assert_int_equal(cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(d, 1, 64, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
    cuGraphDestroy(graph);
    cuMemFree_v2(d);
    cuStreamDestroy_v2(s);
}

static void test_wait_on_outside_event_breaks_isolation(void **state)
{
    (void)state;
    CUstream s, other;
    CUevent outside;
    CUgraph graph;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&outside, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(outside, other), CUDA_SUCCESS);

    /* With CU_EVENT_WAIT_EXTERNAL the wait becomes an event-wait node. */
    assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(s, outside, CU_EVENT_WAIT_EXTERNAL), CUDA_SUCCESS);
    assert_int_equal(cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
    CUgraphNode node;
    size_t count = 1;
    CUgraphNodeType type;
    assert_int_equal(cuGraphGetNodes(graph, &node, &count), CUDA_SUCCESS);
    assert_int_equal(cuGraphNodeGetType(node, &type), CUDA_SUCCESS);
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
    cuGraphDestroy(graph);

    assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(s, outside, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    assert_int_equal(cuStreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cuEventDestroy_v2(outside);
    cuStreamDestroy_v2(s);
    cuStreamDestroy_v2(other);
}

/* A blocking stream's capture forbids legacy-stream work (implicit sync),
 * and the legacy stream itself cannot be captured. */
static void test_legacy_stream_work_during_blocking_capture_is_implicit_sync(void **state)
{
    (void)state;
    CUstream blocking;
    CUgraph graph;
    CUdeviceptr d;
    assert_int_equal(cuMemAlloc_v2(&d, 64), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&blocking, CU_STREAM_DEFAULT), CUDA_SUCCESS);
    assert_int_equal(cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(cuStreamBeginCapture_v2(blocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CUstreamCaptureStatus status;
    assert_int_equal(cuStreamIsCapturing(NULL, &status), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    assert_int_equal(cuMemsetD8Async(d, 1, 64, NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    assert_int_equal(cuStreamEndCapture(blocking, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cuStreamDestroy_v2(blocking);
    cuMemFree_v2(d);
}

/* Graphs built by hand replay like captured ones. */
static void test_added_kernel_node_replays(void **state)
{
    (void)state;
    CUgraph graph;
    CUgraphNode first, second;
    CUgraphExec exec;
    CUdeviceptr d;
    assert_int_equal(cuMemAlloc_v2(&d, 4 * 4), CUDA_SUCCESS);
    assert_int_equal(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
    uint64_t n = 4;
    uint32_t seed = 3;
    void *params[] = {&d, &n, &seed};
    CUDA_KERNEL_NODE_PARAMS kp = {.func = fn_fill, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                  .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1, .kernelParams = params};
    assert_int_equal(cuGraphAddKernelNode_v2(&first, graph, NULL, 0, &kp), CUDA_SUCCESS);
    seed = 4;
    assert_int_equal(cuGraphAddKernelNode_v2(&second, graph, &first, 1, &kp), CUDA_SUCCESS);
    assert_int_equal(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, NULL), CUDA_SUCCESS);
    uint32_t out[4];
    assert_int_equal(cuMemcpyDtoH_v2(out, d, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(out[1], 4u ^ 2654435761u); /* the second node ran last */

    /* The CUDA 10 forms read and change the same node, without the kernel
     * and context fields of CUDA 12's parameters. */
    CUDA_KERNEL_NODE_PARAMS_v1 old;
    assert_int_equal(cuGraphKernelNodeGetParams(second, &old), CUDA_SUCCESS);
    assert_ptr_equal(old.func, fn_fill);
    assert_int_equal(old.gridDimX, 1);
    assert_int_equal(old.blockDimX, 1);
    assert_int_equal(*(uint32_t *)old.kernelParams[2], 4u);
    assert_int_equal(cuGraphKernelNodeGetParams(second, NULL), CUDA_ERROR_INVALID_VALUE);
    seed = 5;
    old.kernelParams = params;
    assert_int_equal(cuGraphExecKernelNodeSetParams(exec, second, &old), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(out, d, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(out[1], 5u ^ 2654435761u);
    assert_int_equal(cuGraphExecKernelNodeSetParams(exec, second, NULL), CUDA_ERROR_INVALID_VALUE);
    cuGraphExecDestroy(exec);
    cuGraphDestroy(graph);
    cuMemFree_v2(d);
}

static uint32_t read_u32(CUdeviceptr d)
{
    uint32_t v;
    assert_int_equal(cuMemcpyDtoH_v2(&v, d, 4), CUDA_SUCCESS);
    return v;
}

/* Memcpy and memset nodes: built, read back, replayed, and re-pointed in
 * the executable graph only (the template and earlier launches keep
 * theirs); what cuda.h says must be refused is refused. */
static void test_memcpy_and_memset_nodes_set_params_in_exec(void **state)
{
    (void)state;
    enum { N = 64 };
    CUstream s;
    CUdeviceptr a, b, c, d, managed;
    CUgraph graph;
    CUgraphExec exec;
    CUgraphNode set_node, copy_node;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&a, N * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&b, N * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&c, N * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&d, N * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocManaged(&managed, N * 4, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS set = {.dst = a, .value = 5, .elementSize = 4, .width = N, .height = 1};
    assert_int_equal(cuGraphAddMemsetNode(&set_node, graph, NULL, 0, &set, ctx), CUDA_SUCCESS);
    CUDA_MEMCPY3D copy;
    memset(&copy, 0, sizeof copy);
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = a;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = b;
    copy.WidthInBytes = N * 4;
    copy.Height = 1;
    copy.Depth = 1;
    assert_int_equal(cuGraphAddMemcpyNode(&copy_node, graph, &set_node, 1, &copy, ctx), CUDA_SUCCESS);

    /* Read back. */
    CUDA_MEMSET_NODE_PARAMS got_set;
    CUDA_MEMCPY3D got_copy;
    assert_int_equal(cuGraphMemsetNodeGetParams(set_node, &got_set), CUDA_SUCCESS);
    assert_true(got_set.dst == a && got_set.value == 5 && got_set.elementSize == 4 && got_set.width == N &&
                got_set.height == 1);
    assert_int_equal(cuGraphMemcpyNodeGetParams(copy_node, &got_copy), CUDA_SUCCESS);
    assert_true(got_copy.srcMemoryType == CU_MEMORYTYPE_DEVICE && got_copy.srcDevice == a &&
                got_copy.dstMemoryType == CU_MEMORYTYPE_DEVICE && got_copy.dstDevice == b &&
                got_copy.WidthInBytes == N * 4 && got_copy.Height == 1 && got_copy.Depth == 1);
    assert_int_equal(cuGraphMemsetNodeGetParams(copy_node, &got_set), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGraphMemcpyNodeGetParams(set_node, &got_copy), CUDA_ERROR_INVALID_VALUE);

    assert_int_equal(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(read_u32(b + 4 * (N - 1)), 5);

    /* Re-point both nodes at c and d with another value. */
    CUDA_MEMSET_NODE_PARAMS set2 = set;
    set2.dst = c;
    set2.value = 9;
    assert_int_equal(cuGraphExecMemsetNodeSetParams(exec, set_node, &set2, ctx), CUDA_SUCCESS);
    CUDA_MEMCPY3D copy2 = copy;
    copy2.srcDevice = c;
    copy2.dstDevice = d;
    assert_int_equal(cuGraphExecMemcpyNodeSetParams(exec, copy_node, &copy2, ctx), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(read_u32(d), 9);
    assert_int_equal(read_u32(b), 5);
    /* The template is untouched. */
    assert_int_equal(cuGraphMemsetNodeGetParams(set_node, &got_set), CUDA_SUCCESS);
    assert_true(got_set.dst == a && got_set.value == 5);

    /* Refused: the wrong node type, a multidimensional or empty copy, a
     * changed memory type (device to managed), a changed height. */
    assert_int_equal(cuGraphExecMemsetNodeSetParams(exec, copy_node, &set2, ctx), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGraphExecMemcpyNodeSetParams(exec, set_node, &copy2, ctx), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY3D bad = copy2;
    bad.Height = 2;
    bad.srcPitch = bad.dstPitch = N * 2;
    bad.WidthInBytes = N * 2;
    assert_int_equal(cuGraphExecMemcpyNodeSetParams(exec, copy_node, &bad, ctx), CUDA_ERROR_INVALID_VALUE);
    bad = copy2;
    bad.WidthInBytes = 0;
    assert_int_equal(cuGraphExecMemcpyNodeSetParams(exec, copy_node, &bad, ctx), CUDA_ERROR_INVALID_VALUE);
    bad = copy2;
    bad.dstDevice = managed;
    assert_int_equal(cuGraphExecMemcpyNodeSetParams(exec, copy_node, &bad, ctx), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMSET_NODE_PARAMS bad_set = set2;
    bad_set.height = 2;
    bad_set.pitch = N * 4;
    bad_set.width = N / 2;
    assert_int_equal(cuGraphExecMemsetNodeSetParams(exec, set_node, &bad_set, ctx), CUDA_ERROR_INVALID_VALUE);
    bad_set = set2;
    bad_set.elementSize = 3;
    assert_int_equal(cuGraphExecMemsetNodeSetParams(exec, set_node, &bad_set, ctx), CUDA_ERROR_INVALID_VALUE);

    assert_int_equal(cuGraphExecDestroy(exec), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(graph), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(b), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(c), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(d), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(managed), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

/* cuGraphExecUpdate refuses a changed topology (same node count and kinds,
 * other edges) and a memcpy whose operand changed memory type. */
static void test_exec_update_checks_topology_and_operands(void **state)
{
    (void)state;
    CUdeviceptr a, b, managed;
    assert_int_equal(cuMemAlloc_v2(&a, 256), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&b, 256), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocManaged(&managed, 256, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS set = {.dst = a, .value = 1, .elementSize = 4, .width = 64, .height = 1};
    CUgraph g1, g2, g3;
    CUgraphNode n1a, n1b, n2a, n2b, n3a, n3b;
    assert_int_equal(cuGraphCreate(&g1, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphAddMemsetNode(&n1a, g1, NULL, 0, &set, ctx), CUDA_SUCCESS);
    assert_int_equal(cuGraphAddMemsetNode(&n1b, g1, &n1a, 1, &set, ctx), CUDA_SUCCESS);
    assert_int_equal(cuGraphCreate(&g2, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphAddMemsetNode(&n2a, g2, NULL, 0, &set, ctx), CUDA_SUCCESS);
    assert_int_equal(cuGraphAddMemsetNode(&n2b, g2, NULL, 0, &set, ctx), CUDA_SUCCESS);
    CUgraphExec exec;
    assert_int_equal(cuGraphInstantiateWithFlags(&exec, g1, 0), CUDA_SUCCESS);
    CUgraphExecUpdateResultInfo info;
    assert_int_equal(cuGraphExecUpdate_v2(exec, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    /* Same topology, the second memset now on managed memory. */
    assert_int_equal(cuGraphCreate(&g3, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphAddMemsetNode(&n3a, g3, NULL, 0, &set, ctx), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS moved = set;
    moved.dst = managed;
    assert_int_equal(cuGraphAddMemsetNode(&n3b, g3, &n3a, 1, &moved, ctx), CUDA_SUCCESS);
    assert_int_equal(cuGraphExecUpdate_v2(exec, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    assert_ptr_equal(info.errorNode, n3b);
    /* A legal update: another device address and value. */
    CUDA_MEMSET_NODE_PARAMS other = set;
    other.dst = b;
    other.value = 7;
    CUgraph g4;
    CUgraphNode n4a, n4b;
    assert_int_equal(cuGraphCreate(&g4, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphAddMemsetNode(&n4a, g4, NULL, 0, &set, ctx), CUDA_SUCCESS);
    assert_int_equal(cuGraphAddMemsetNode(&n4b, g4, &n4a, 1, &other, ctx), CUDA_SUCCESS);
    assert_int_equal(cuGraphExecUpdate_v2(exec, g4, &info), CUDA_SUCCESS);
    assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(read_u32(b + 252), 7);
    assert_int_equal(cuGraphExecDestroy(exec), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(g1), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(g2), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(g3), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(g4), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(b), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(managed), CUDA_SUCCESS);
}

static CUgraphNode add_memset(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr dst, unsigned value, size_t words)
{
    CUgraphNode node;
    CUDA_MEMSET_NODE_PARAMS m = {.dst = dst, .value = value, .elementSize = 4, .width = words, .height = 1};
    assert_int_equal(cuGraphAddMemsetNode(&node, g, deps, n, &m, ctx), CUDA_SUCCESS);
    return node;
}

static CUgraphNode add_kernel(CUgraph g, const CUgraphNode *deps, size_t n, CUfunction f, void **args)
{
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_KERNEL;
    p.kernel.func = f;
    p.kernel.gridDimX = p.kernel.gridDimY = p.kernel.gridDimZ = 1;
    p.kernel.blockDimX = p.kernel.blockDimY = p.kernel.blockDimZ = 1;
    p.kernel.kernelParams = args;
    CUgraphNode node;
    assert_int_equal(cuGraphAddNode_v2(&node, g, deps, NULL, n, &p), CUDA_SUCCESS);
    return node;
}

static CUgraph *add_conditional(CUgraph g, const CUgraphNode *deps, size_t n, CUgraphConditionalHandle h,
                                CUgraphConditionalNodeType type, unsigned size, CUgraphNode *out)
{
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h;
    p.conditional.type = type;
    p.conditional.size = size;
    p.conditional.ctx = ctx;
    assert_int_equal(cuGraphAddNode_v2(out, g, deps, NULL, n, &p), CUDA_SUCCESS);
    assert_non_null(p.conditional.phGraph_out);
    return p.conditional.phGraph_out;
}

/* IF/ELSE, WHILE and SWITCH nodes run their bodies as the handle's value
 * says when they run: set by a kernel before them, or the launch default
 * (CU_GRAPH_COND_ASSIGN_DEFAULT) applied at the start of every launch. */
static void test_conditional_nodes_run_bodies_by_value(void **state)
{
    (void)state;
    CUmodule m;
    CUfunction fn_set, fn_countdown;
    assert_int_equal(cuModuleLoadData(&m, "image"), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&fn_set, m, "sim_set_conditional"), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&fn_countdown, m, "sim_while_countdown"), CUDA_SUCCESS);
    CUdeviceptr out, counter, x, y;
    assert_int_equal(cuMemAlloc_v2(&out, 16), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&counter, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&x, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&y, 4), CUDA_SUCCESS);
    float one = 1.0f, zero = 0.0f;
    assert_int_equal(cuMemcpyHtoD_v2(x, &one, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoD_v2(y, &zero, 4), CUDA_SUCCESS);

    /* IF/ELSE: a kernel sets the value, then the node picks a body. */
    CUgraph g;
    CUgraphConditionalHandle h;
    assert_int_equal(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphConditionalHandleCreate(&h, g, ctx, 0, 0), CUDA_SUCCESS);
    uint64_t handle_arg = h;
    uint32_t value = 1;
    void *set_args[] = {&handle_arg, &value};
    CUgraphNode set_node = add_kernel(g, NULL, 0, fn_set, set_args), if_node;
    CUgraph *bodies = add_conditional(g, &set_node, 1, h, CU_GRAPH_COND_TYPE_IF, 2, &if_node);
    add_memset(bodies[0], NULL, 0, out, 11, 1);
    add_memset(bodies[1], NULL, 0, out, 22, 1);
    CUgraphNodeType type;
    assert_int_equal(cuGraphNodeGetType(if_node, &type), CUDA_SUCCESS);
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_CONDITIONAL);
    CUgraphExec exec;
    assert_int_equal(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(read_u32(out), 11);
    value = 0;
    CUDA_KERNEL_NODE_PARAMS kp;
    assert_int_equal(cuGraphKernelNodeGetParams_v2(set_node, &kp), CUDA_SUCCESS);
    kp.kernelParams = set_args;
    assert_int_equal(cuGraphExecKernelNodeSetParams_v2(exec, set_node, &kp), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(read_u32(out), 22);
    assert_int_equal(cuGraphExecDestroy(exec), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);

    /* WHILE: the body counts a device counter down from 4 and adds 1 to y
     * each pass; the default (1, assigned at each launch) enters the loop. */
    assert_int_equal(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphConditionalHandleCreate(&h, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT), CUDA_SUCCESS);
    handle_arg = h;
    CUgraphNode reset = add_memset(g, NULL, 0, counter, 4, 1), while_node;
    bodies = add_conditional(g, &reset, 1, h, CU_GRAPH_COND_TYPE_WHILE, 1, &while_node);
    void *countdown_args[] = {&handle_arg, &counter};
    CUgraphNode countdown = add_kernel(bodies[0], NULL, 0, fn_countdown, countdown_args);
    float a = 1.0f;
    uint64_t n = 1;
    void *axpy_args[] = {&a, &x, &y, &n};
    add_kernel(bodies[0], &countdown, 1, fn_axpy, axpy_args);
    assert_int_equal(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, NULL), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_true(read_float(y, 0) == 8.0f);
    assert_int_equal(cuGraphExecDestroy(exec), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);

    /* SWITCH: body n for value n, none past the end. */
    assert_int_equal(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphConditionalHandleCreate(&h, g, ctx, 2, CU_GRAPH_COND_ASSIGN_DEFAULT), CUDA_SUCCESS);
    CUgraphNode switch_node;
    bodies = add_conditional(g, NULL, 0, h, CU_GRAPH_COND_TYPE_SWITCH, 3, &switch_node);
    for (unsigned b = 0; b < 3; b++)
        add_memset(bodies[b], NULL, 0, out + 4, 100 + b, 1);
    assert_int_equal(cuMemsetD32_v2(out + 4, 0, 1), CUDA_SUCCESS);
    assert_int_equal(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(read_u32(out + 4), 102);
    assert_int_equal(cuGraphExecDestroy(exec), CUDA_SUCCESS);

    /* Refused: sizes outside what each type allows, a handle of another
     * graph, unknown handle flags. */
    CUgraph other;
    CUgraphConditionalHandle foreign;
    CUgraphNode bad;
    assert_int_equal(cuGraphCreate(&other, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphConditionalHandleCreate(&foreign, other, ctx, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphConditionalHandleCreate(&foreign, other, ctx, 0, 2), CUDA_ERROR_INVALID_VALUE);
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h;
    p.conditional.ctx = ctx;
    p.conditional.type = CU_GRAPH_COND_TYPE_IF;
    p.conditional.size = 3;
    assert_int_equal(cuGraphAddNode_v2(&bad, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    p.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    p.conditional.size = 2;
    assert_int_equal(cuGraphAddNode_v2(&bad, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    p.conditional.size = 1;
    p.conditional.handle = foreign;
    assert_int_equal(cuGraphAddNode_v2(&bad, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGraphDestroy(other), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(out), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(counter), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(x), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(y), CUDA_SUCCESS);
}

/* A child graph node runs its own clone of the child graph; the executable
 * graph's copy can be re-pointed with cuGraphExecChildGraphNodeSetParams
 * (same topology only). */
static void test_child_graph_node_clones_and_updates(void **state)
{
    (void)state;
    CUdeviceptr a, b;
    assert_int_equal(cuMemAlloc_v2(&a, 64), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&b, 64), CUDA_SUCCESS);
    CUgraph child, parent, child2, child3;
    assert_int_equal(cuGraphCreate(&child, 0), CUDA_SUCCESS);
    add_memset(child, NULL, 0, a, 5, 16);
    assert_int_equal(cuGraphCreate(&parent, 0), CUDA_SUCCESS);
    CUgraphNode node, got_set;
    assert_int_equal(cuGraphAddChildGraphNode(&node, parent, NULL, 0, child), CUDA_SUCCESS);
    CUgraph embedded;
    assert_int_equal(cuGraphChildGraphNodeGetGraph(node, &embedded), CUDA_SUCCESS);
    assert_ptr_not_equal(embedded, child);
    size_t count = 1;
    assert_int_equal(cuGraphGetNodes(embedded, &got_set, &count), CUDA_SUCCESS);
    assert_int_equal(count, 1);
    /* The clone is independent: destroying the original changes nothing. */
    assert_int_equal(cuGraphDestroy(child), CUDA_SUCCESS);
    CUgraphExec exec;
    assert_int_equal(cuGraphInstantiateWithFlags(&exec, parent, 0), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(read_u32(a + 60), 5);
    assert_int_equal(cuGraphCreate(&child2, 0), CUDA_SUCCESS);
    add_memset(child2, NULL, 0, b, 6, 16);
    assert_int_equal(cuGraphExecChildGraphNodeSetParams(exec, node, child2), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(exec, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(read_u32(b + 60), 6);
    /* Another topology: refused. */
    assert_int_equal(cuGraphCreate(&child3, 0), CUDA_SUCCESS);
    CUgraphNode first = add_memset(child3, NULL, 0, b, 7, 16);
    add_memset(child3, &first, 1, a, 7, 16);
    assert_int_equal(cuGraphExecChildGraphNodeSetParams(exec, node, child3), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGraphChildGraphNodeGetGraph(got_set, &embedded), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGraphExecDestroy(exec), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(parent), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(child2), CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(child3), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(b), CUDA_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_captured_work_runs_only_on_replay),
        cmocka_unit_test(test_cross_stream_fork_join_is_captured),
        cmocka_unit_test(test_fork_without_join_fails_unjoined),
        cmocka_unit_test(test_sync_during_global_capture_invalidates_it),
        cmocka_unit_test(test_relaxed_thread_mode_permits_allocation),
        cmocka_unit_test(test_wait_on_outside_event_breaks_isolation),
        cmocka_unit_test(test_legacy_stream_work_during_blocking_capture_is_implicit_sync),
        cmocka_unit_test(test_added_kernel_node_replays),
        cmocka_unit_test(test_memcpy_and_memset_nodes_set_params_in_exec),
        cmocka_unit_test(test_exec_update_checks_topology_and_operands),
        cmocka_unit_test(test_conditional_nodes_run_bodies_by_value),
        cmocka_unit_test(test_child_graph_node_clones_and_updates),
    };
    return cmocka_run_group_tests_name("simcuda capture and graphs", tests, setup, NULL);
}

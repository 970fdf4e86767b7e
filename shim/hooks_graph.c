/* hooks_graph.c: CUDA graphs (`cuGraphLaunch`).
 *
 * Replaying a graph never goes through `cuLaunchKernel`, so what a graph
 * touches is learned when it is instantiated: the shim walks the template
 * (kernel nodes through their parameter layouts, memcpy and memset nodes,
 * child graphs) and keeps, per executable graph, the addresses that fell in
 * registered allocations. Each `cuGraphLaunch` stamps all of them.
 * `cuGraphExecUpdate` re-walks; `cuGraphExecKernelNodeSetParams` adds.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "log.h"
#include "offload.h"
#include "registry.h"
#include "hooks.h"
#include "launch.h"

typedef struct vs_exec_s {
    const void *exec;
    size_t count, capacity;
    uintptr_t *addrs; /* words that pointed into allocations */
    UT_hash_handle hh;
} vs_exec_t;

/* Guards `vs_execs`; taken before the registry lock, never after. */
static pthread_rwlock_t vs_execs_lock = PTHREAD_RWLOCK_INITIALIZER;
static vs_exec_t *vs_execs;

/* Collects into a growable array; `failed` notes an allocation failure. */
typedef struct vs_collect_s {
    uintptr_t *addrs;
    size_t count, capacity;
    bool failed;
} vs_collect_t;

static void vs_collect_add(vs_collect_t *c, uintptr_t addr)
{
    if (addr == 0 || vs_registry_find(addr, NULL) != 0)
        return;
    if (c->count == c->capacity) {
        size_t capacity = c->capacity ? c->capacity * 2 : 16;
        uintptr_t *grown = realloc(c->addrs, capacity * sizeof *grown);
        if (grown == NULL) {
            c->failed = true;
            return;
        }
        c->addrs = grown;
        c->capacity = capacity;
    }
    c->addrs[c->count++] = addr;
}

static void vs_collect_word(uintptr_t word, void *arg)
{
    vs_collect_add(arg, word);
}

static void vs_collect_kernel(vs_collect_t *c, const CUDA_KERNEL_NODE_PARAMS *p)
{
    CUfunction f = p->func != NULL ? p->func : (CUfunction)(void *)p->kern;
    if (f == NULL || !vs_launch_visit_words(f, p->kernelParams, p->extra, vs_collect_word, c))
        vs_log(VS_LOG_WARN, "a kernel node's parameters cannot be scanned; its pointers are not tracked");
}

static void vs_collect_graph(vs_collect_t *c, CUgraph graph, int depth)
{
    size_t count = 0;
    CUgraphNode *nodes = NULL;

    if (depth > 16 || VS_CALL(cuGraphGetNodes, (graph, NULL, &count)) != CUDA_SUCCESS || count == 0)
        return;
    nodes = calloc(count, sizeof *nodes);
    if (nodes == NULL) {
        c->failed = true;
        return;
    }
    if (VS_CALL(cuGraphGetNodes, (graph, nodes, &count)) != CUDA_SUCCESS)
        goto out;
    for (size_t i = 0; i < count; i++) {
        CUgraphNodeType type;
        if (VS_CALL(cuGraphNodeGetType, (nodes[i], &type)) != CUDA_SUCCESS)
            continue;
        switch (type) {
        case CU_GRAPH_NODE_TYPE_KERNEL: {
            CUDA_KERNEL_NODE_PARAMS p;
            memset(&p, 0, sizeof p);
            if (VS_CALL(cuGraphKernelNodeGetParams_v2, (nodes[i], &p)) == CUDA_SUCCESS)
                vs_collect_kernel(c, &p);
            break;
        }
        case CU_GRAPH_NODE_TYPE_MEMCPY: {
            CUDA_MEMCPY3D p;
            memset(&p, 0, sizeof p);
            if (VS_CALL(cuGraphMemcpyNodeGetParams, (nodes[i], &p)) == CUDA_SUCCESS) {
                vs_collect_add(c, (uintptr_t)p.srcDevice);
                vs_collect_add(c, (uintptr_t)p.dstDevice);
            }
            break;
        }
        case CU_GRAPH_NODE_TYPE_MEMSET: {
            CUDA_MEMSET_NODE_PARAMS p;
            memset(&p, 0, sizeof p);
            if (VS_CALL(cuGraphMemsetNodeGetParams, (nodes[i], &p)) == CUDA_SUCCESS)
                vs_collect_add(c, (uintptr_t)p.dst);
            break;
        }
        case CU_GRAPH_NODE_TYPE_GRAPH: {
            CUgraph child;
            if (VS_CALL(cuGraphChildGraphNodeGetGraph, (nodes[i], &child)) == CUDA_SUCCESS)
                vs_collect_graph(c, child, depth + 1);
            break;
        }
        default:
            break;
        }
    }
out:
    free(nodes);
}

/* Stores (replace) or extends (append) the set of an executable graph. */
static void vs_exec_store(CUgraphExec exec, vs_collect_t *c, bool append)
{
    const void *key = exec;
    vs_exec_t *e;

    pthread_rwlock_wrlock(&vs_execs_lock);
    HASH_FIND_PTR(vs_execs, &key, e);
    if (e == NULL) {
        e = calloc(1, sizeof *e);
        if (e == NULL)
            goto out;
        e->exec = key;
        HASH_ADD_PTR(vs_execs, exec, e);
        if (e->hh.tbl == NULL) {
            free(e);
            goto out;
        }
    }
    /* What a live graph references stays resident while it lives. */
    vs_offload_hold(c->addrs, c->count, +1);
    if (!append || e->addrs == NULL) {
        vs_offload_hold(e->addrs, e->count, -1);
        free(e->addrs);
        e->addrs = c->addrs;
        e->count = c->count;
        e->capacity = c->capacity;
        c->addrs = NULL;
    } else {
        for (size_t i = 0; i < c->count; i++) {
            if (e->count == e->capacity) {
                size_t capacity = e->capacity ? e->capacity * 2 : 16;
                uintptr_t *grown = realloc(e->addrs, capacity * sizeof *grown);
                if (grown == NULL)
                    break;
                e->addrs = grown;
                e->capacity = capacity;
            }
            e->addrs[e->count++] = c->addrs[i];
        }
    }
out:
    pthread_rwlock_unlock(&vs_execs_lock);
    free(c->addrs);
    c->addrs = NULL;
}

static void vs_exec_learn(CUgraphExec exec, CUgraph graph)
{
    vs_collect_t c = {0};

    vs_collect_graph(&c, graph, 0);
    if (c.failed)
        vs_log(VS_LOG_WARN, "out of memory while scanning graph %p: some of its pointers are not tracked", (void *)graph);
    vs_exec_store(exec, &c, false);
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                    char *logBuffer, size_t bufferSize)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGraphInstantiate, (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
    if (rc == CUDA_SUCCESS && phGraphExec != NULL)
        vs_exec_learn(*phGraphExec, hGraph);
    return rc;
}

CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGraphInstantiate_v2, (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
    if (rc == CUDA_SUCCESS && phGraphExec != NULL)
        vs_exec_learn(*phGraphExec, hGraph);
    return rc;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGraphInstantiateWithFlags, (phGraphExec, hGraph, flags));
    if (rc == CUDA_SUCCESS && phGraphExec != NULL)
        vs_exec_learn(*phGraphExec, hGraph);
    return rc;
}

CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGraphInstantiateWithParams, (phGraphExec, hGraph, instantiateParams));
    if (rc == CUDA_SUCCESS && phGraphExec != NULL)
        vs_exec_learn(*phGraphExec, hGraph);
    return rc;
}

CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGraphInstantiateWithParams_ptsz, (phGraphExec, hGraph, instantiateParams));
    if (rc == CUDA_SUCCESS && phGraphExec != NULL)
        vs_exec_learn(*phGraphExec, hGraph);
    return rc;
}

CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGraphExecUpdate_v2, (hGraphExec, hGraph, resultInfo));
    if (rc == CUDA_SUCCESS)
        vs_exec_learn(hGraphExec, hGraph);
    return rc;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGraphExecKernelNodeSetParams_v2, (hGraphExec, hNode, nodeParams));
    if (rc == CUDA_SUCCESS && nodeParams != NULL) {
        /* The old parameters stay in the set: a superset only makes the
         * graph's allocations look used, never unused. */
        vs_collect_t c = {0};
        vs_collect_kernel(&c, nodeParams);
        vs_exec_store(hGraphExec, &c, true);
    }
    return rc;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CUresult rc;
    const void *key = hGraphExec;
    vs_exec_t *e;

    vs_driver_ready();
    rc = VS_CALL(cuGraphExecDestroy, (hGraphExec));
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_rwlock_wrlock(&vs_execs_lock);
    HASH_FIND_PTR(vs_execs, &key, e);
    if (e != NULL)
        HASH_DEL(vs_execs, e);
    pthread_rwlock_unlock(&vs_execs_lock);
    if (e != NULL) {
        vs_offload_hold(e->addrs, e->count, -1);
        free(e->addrs);
        free(e);
    }
    return rc;
}

/* Copies the addresses an executable graph references into `w`. */
static void vs_graph_words(CUgraphExec exec, vs_words_t *w)
{
    const void *key = exec;
    vs_exec_t *e;

    VS_COUNT(graph_launches);
    pthread_rwlock_rdlock(&vs_execs_lock);
    HASH_FIND_PTR(vs_execs, &key, e);
    if (e != NULL) {
        for (size_t i = 0; i < e->count; i++)
            vs_words_add(w, e->addrs[i]);
    }
    pthread_rwlock_unlock(&vs_execs_lock);
}

/* A replay never calls cuLaunchKernel: everything the graph references is
 * restored before it is submitted. */
#define VS_GRAPH_LAUNCH(symbol)                                                                    \
    CUresult CUDAAPI symbol(CUgraphExec hGraphExec, CUstream hStream)                              \
    {                                                                                              \
        uintptr_t vs_buffer_[256];                                                                 \
        vs_words_t vs_words_ = VS_WORDS_INIT(vs_buffer_);                                          \
        CUresult vs_rc_;                                                                           \
        vs_driver_ready();                                                                           \
        vs_graph_words(hGraphExec, &vs_words_);                                                    \
        VS_OPERATE(vs_rc_, "graph", hStream, VS_PER_THREAD_SYMBOL(symbol), vs_words_.words, vs_words_.count, \
                   VS_CALL(symbol, (hGraphExec, hStream)));                                        \
        free(vs_words_.heap);                                                                      \
        return vs_rc_;                                                                             \
    }

VS_GRAPH_LAUNCH(cuGraphLaunch)
VS_GRAPH_LAUNCH(cuGraphLaunch_ptsz)

/* hooks_graph.c: CUDA graphs (`cuGraphLaunch`).
 *
 * Replaying a graph never goes through `cuLaunchKernel`, so what a graph
 * touches is learned when it is instantiated: the shim walks the template
 * (kernel nodes through their parameter layouts, memcpy and memset nodes,
 * child graphs, conditional nodes' bodies, stream memory operations) and
 * keeps, per executable graph and per node, the addresses that fell in
 * registered allocations. Each `cuGraphLaunch` stamps all of them, and the
 * union is held (never evicted) while the executable graph lives.
 * `cuGraphExecUpdate` re-walks the new graph; each `cuGraphExec*SetParams`
 * replaces its node's set, and the union is recomputed (what the graph no
 * longer references is let go). A graph with a stream memory wait is
 * launched like a wait (hooks_memop.c).
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

/* What one node of the instantiated graph references: its words that fell
 * in registered allocations (a child graph's or a conditional node's body
 * counted in). `node` is the node of the graph the executable graph was
 * instantiated from, the handle the `cuGraphExec*SetParams` calls name. */
typedef struct vs_exec_node_s {
    CUgraphNode node;
    uintptr_t *addrs;
    size_t count;
} vs_exec_node_t;

/* One executable graph: its nodes (in `cuGraphGetNodes` order), the union
 * of their words, which holds one hold on each allocation it names, and
 * whether it contains a stream memory wait. */
typedef struct vs_exec_s {
    const void *exec;
    vs_exec_node_t *nodes;
    size_t node_count;
    uintptr_t *addrs;
    size_t count;
    bool waits;
    UT_hash_handle hh;
} vs_exec_t;

/* Guards `vs_execs`; taken before the registry lock, never after. */
static pthread_rwlock_t vs_execs_lock = PTHREAD_RWLOCK_INITIALIZER;
static vs_exec_t *vs_execs;

/* Collects into a growable array; `failed` notes an allocation failure,
 * `waits` a stream memory wait. */
typedef struct vs_collect_s {
    uintptr_t *addrs;
    size_t count, capacity;
    bool failed;
    bool waits;
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

static void vs_collect_memops(vs_collect_t *c, const CUstreamBatchMemOpParams *ops, unsigned count)
{
    for (unsigned i = 0; ops != NULL && i < count; i++) {
        switch (ops[i].operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        case CU_STREAM_MEM_OP_WAIT_VALUE_64:
            c->waits = true;
            vs_collect_add(c, (uintptr_t)ops[i].waitValue.address);
            break;
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        case CU_STREAM_MEM_OP_WRITE_VALUE_64:
            vs_collect_add(c, (uintptr_t)ops[i].writeValue.address);
            break;
        default:
            break;
        }
    }
}

static void vs_collect_graph(vs_collect_t *c, CUgraph graph, int depth);

/* Conditional nodes' bodies, as `cuGraphAddNode` returned them (the driver
 * has no call that tells them later). Entries live as long as the process:
 * a node handle is not reused while its graph lives, and a stale entry
 * only makes a later node's set larger. Guarded by `vs_execs_lock`. */
#define VS_COND_MAX_BODIES 64
typedef struct vs_cond_s {
    const void *node;
    CUgraph bodies[VS_COND_MAX_BODIES];
    size_t count;
    UT_hash_handle hh;
} vs_cond_t;
static vs_cond_t *vs_conds;

static void vs_cond_remember(CUgraphNode node, const CUgraphNodeParams *p)
{
    if (p == NULL || p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL || p->conditional.phGraph_out == NULL)
        return;
    vs_cond_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return;
    c->node = node;
    c->count = p->conditional.size < VS_COND_MAX_BODIES ? p->conditional.size : VS_COND_MAX_BODIES;
    memcpy(c->bodies, p->conditional.phGraph_out, c->count * sizeof *c->bodies);
    pthread_rwlock_wrlock(&vs_execs_lock);
    vs_cond_t *old;
    HASH_FIND_PTR(vs_conds, &c->node, old);
    if (old != NULL) {
        HASH_DEL(vs_conds, old);
        free(old);
    }
    HASH_ADD_PTR(vs_conds, node, c);
    if (c->hh.tbl == NULL)
        free(c);
    pthread_rwlock_unlock(&vs_execs_lock);
}

/* Copies the bodies of conditional node `node` to `out`; how many. Takes
 * `vs_execs_lock` for reading: not called with it held for writing. */
static size_t vs_cond_bodies(CUgraphNode node, CUgraph *out, size_t cap)
{
    const void *key = node;
    vs_cond_t *c;
    size_t n = 0;
    pthread_rwlock_rdlock(&vs_execs_lock);
    HASH_FIND_PTR(vs_conds, &key, c);
    if (c != NULL) {
        n = c->count < cap ? c->count : cap;
        memcpy(out, c->bodies, n * sizeof *out);
    }
    pthread_rwlock_unlock(&vs_execs_lock);
    return n;
}

/* What library calls captured into a graph touch through memory of their
 * own, where no node's parameters name it (NCCL's buffers, hooks_nccl.c),
 * keyed by the graph the capture builds: added to the set of every
 * executable graph made from that graph, or from one holding it as a child.
 * Entries live as long as the process, like `vs_conds`. Guarded by
 * `vs_captured_lock`, a leaf. */
typedef struct vs_captured_s {
    const void *graph;
    uintptr_t *addrs;
    size_t count, capacity;
    UT_hash_handle hh;
} vs_captured_t;
static pthread_mutex_t vs_captured_lock = PTHREAD_MUTEX_INITIALIZER;
static vs_captured_t *vs_captured;

void vs_graph_capture_names(CUstream stream, const uintptr_t *words, size_t count)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUgraph graph = NULL;
    bool kept = false;
    uintptr_t *found = malloc((count ? count : 1) * sizeof *found);
    size_t n = 0;
    for (size_t i = 0; found != NULL && i < count; i++)
        if (words[i] != 0 && vs_registry_find(words[i], NULL) == 0)
            found[n++] = words[i];
    if (found != NULL && n > 0
        && VS_CALL(cuStreamGetCaptureInfo_v2, (stream, &status, &id, &graph, NULL, NULL)) == CUDA_SUCCESS
        && status == CU_STREAM_CAPTURE_STATUS_ACTIVE && graph != NULL) {
        const void *key = graph;
        vs_captured_t *c;
        pthread_mutex_lock(&vs_captured_lock);
        HASH_FIND_PTR(vs_captured, &key, c);
        if (c == NULL && (c = calloc(1, sizeof *c)) != NULL) {
            c->graph = key;
            HASH_ADD_PTR(vs_captured, graph, c);
            if (c->hh.tbl == NULL) {
                free(c);
                c = NULL;
            }
        }
        if (c != NULL && c->count + n > c->capacity) {
            size_t capacity = (c->count + n) * 2;
            uintptr_t *grown = realloc(c->addrs, capacity * sizeof *grown);
            if (grown != NULL) {
                c->addrs = grown;
                c->capacity = capacity;
            }
        }
        if (c != NULL && c->count + n <= c->capacity) {
            memcpy(c->addrs + c->count, found, n * sizeof *found);
            c->count += n;
            kept = true;
        }
        pthread_mutex_unlock(&vs_captured_lock);
    }
    /* Not kept (out of memory, or the driver would not tell the graph):
     * resident for good rather than missing at the graph's launch. */
    for (size_t i = 0; !kept && i < n; i++)
        vs_offload_pin(found[i], "named by a call captured into a graph");
    free(found);
}

/* Adds what calls captured into `graph` named to `c`. */
static void vs_captured_collect(vs_collect_t *c, CUgraph graph)
{
    const void *key = graph;
    vs_captured_t *captured;
    pthread_mutex_lock(&vs_captured_lock);
    HASH_FIND_PTR(vs_captured, &key, captured);
    size_t n = captured != NULL ? captured->count : 0;
    uintptr_t *copy = n > 0 ? malloc(n * sizeof *copy) : NULL;
    if (copy != NULL)
        memcpy(copy, captured->addrs, n * sizeof *copy);
    pthread_mutex_unlock(&vs_captured_lock);
    if (n > 0 && copy == NULL)
        c->failed = true;
    for (size_t i = 0; copy != NULL && i < n; i++)
        vs_collect_add(c, copy[i]);
    free(copy);
}

CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    vs_driver_ready();
    CUresult rc = VS_CALL(cuGraphAddNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
    if (rc == CUDA_SUCCESS && phGraphNode != NULL)
        vs_cond_remember(*phGraphNode, nodeParams);
    return rc;
}

CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                   CUgraphNodeParams *nodeParams)
{
    vs_driver_ready();
    CUresult rc =
        VS_CALL(cuGraphAddNode_v2, (phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams));
    if (rc == CUDA_SUCCESS && phGraphNode != NULL)
        vs_cond_remember(*phGraphNode, nodeParams);
    return rc;
}

/* What node `node` references, into `c`. */
static void vs_collect_node(vs_collect_t *c, CUgraphNode node, int depth)
{
    CUgraphNodeType type;
    if (VS_CALL(cuGraphNodeGetType, (node, &type)) != CUDA_SUCCESS)
        return;
    switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        if (VS_CALL(cuGraphKernelNodeGetParams_v2, (node, &p)) == CUDA_SUCCESS)
            vs_collect_kernel(c, &p);
        break;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUDA_MEMCPY3D p;
        memset(&p, 0, sizeof p);
        if (VS_CALL(cuGraphMemcpyNodeGetParams, (node, &p)) == CUDA_SUCCESS)
            vs_copy3d_visit(&p, vs_collect_word, c);
        break;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        if (VS_CALL(cuGraphMemsetNodeGetParams, (node, &p)) == CUDA_SUCCESS)
            vs_memset_visit(&p, vs_collect_word, c);
        break;
    }
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: {
        CUDA_BATCH_MEM_OP_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        if (VS_CALL(cuGraphBatchMemOpNodeGetParams, (node, &p)) == CUDA_SUCCESS)
            vs_collect_memops(c, p.paramArray, p.count);
        else
            c->waits = true; /* unknown operations: assume they may wait */
        break;
    }
    case CU_GRAPH_NODE_TYPE_GRAPH: {
        CUgraph child;
        if (VS_CALL(cuGraphChildGraphNodeGetGraph, (node, &child)) == CUDA_SUCCESS)
            vs_collect_graph(c, child, depth + 1);
        break;
    }
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
        /* Every body may run at a launch: all of them count. The driver
         * tells a conditional node's bodies only when it is added
         * (`cuGraphAddNode`), where the shim recorded them. */
        CUgraph bodies[VS_COND_MAX_BODIES];
        size_t n = vs_cond_bodies(node, bodies, VS_COND_MAX_BODIES);
        if (n == 0)
            vs_log(VS_LOG_WARN, "a conditional node's bodies are unknown; their pointers are not tracked");
        for (size_t i = 0; i < n; i++)
            vs_collect_graph(c, bodies[i], depth + 1);
        break;
    }
    default:
        break;
    }
}

/* The nodes of `graph` (malloc'd, *count of them), or NULL. */
static CUgraphNode *vs_graph_nodes(CUgraph graph, size_t *count)
{
    *count = 0;
    if (VS_CALL(cuGraphGetNodes, (graph, NULL, count)) != CUDA_SUCCESS || *count == 0)
        return NULL;
    CUgraphNode *nodes = calloc(*count, sizeof *nodes);
    if (nodes != NULL && VS_CALL(cuGraphGetNodes, (graph, nodes, count)) != CUDA_SUCCESS) {
        free(nodes);
        nodes = NULL;
    }
    if (nodes == NULL)
        *count = 0;
    return nodes;
}

static void vs_collect_graph(vs_collect_t *c, CUgraph graph, int depth)
{
    size_t count = 0;
    if (depth > 16)
        return;
    CUgraphNode *nodes = vs_graph_nodes(graph, &count);
    for (size_t i = 0; i < count; i++)
        vs_collect_node(c, nodes[i], depth);
    free(nodes);
    vs_captured_collect(c, graph);
}

/* Rebuilds the union of `e`'s nodes and moves the holds to it: the new set
 * is held before the old one is let go, so nothing both reference can be
 * evicted in between. Write lock held. */
static void vs_exec_rehold(vs_exec_t *e)
{
    size_t total = 0;
    for (size_t i = 0; i < e->node_count; i++)
        total += e->nodes[i].count;
    uintptr_t *addrs = malloc((total ? total : 1) * sizeof *addrs);
    if (addrs == NULL) {
        vs_log(VS_LOG_WARN, "out of memory while tracking a graph; it keeps its old pointer set");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < e->node_count; i++)
        for (size_t j = 0; j < e->nodes[i].count; j++)
            addrs[n++] = e->nodes[i].addrs[j];
    vs_offload_hold(addrs, n, +1);
    vs_offload_hold(e->addrs, e->count, -1);
    free(e->addrs);
    e->addrs = addrs;
    e->count = n;
}

static void vs_exec_nodes_free(vs_exec_node_t *nodes, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(nodes[i].addrs);
    free(nodes);
}

/* (Re)learns what an executable graph references from `graph`: at
 * instantiation and after `cuGraphExecUpdate` (where `graph`'s nodes stand
 * in position for the original nodes, whose handles the set-params calls
 * keep using). */
static void vs_exec_learn(CUgraphExec exec, CUgraph graph)
{
    const void *key = exec;
    size_t count = 0;
    CUgraphNode *nodes = vs_graph_nodes(graph, &count);
    /* One more entry, with no node: what calls captured into `graph`
     * named (no set-params call can change it). */
    vs_exec_node_t *learned = calloc(count + 1, sizeof *learned);
    bool waits = false, failed = learned == NULL;
    for (size_t i = 0; learned != NULL && i < count; i++) {
        vs_collect_t c = {0};
        vs_collect_node(&c, nodes[i], 0);
        learned[i] = (vs_exec_node_t){.node = nodes[i], .addrs = c.addrs, .count = c.count};
        waits |= c.waits;
        failed |= c.failed;
    }
    free(nodes);
    if (learned != NULL) {
        vs_collect_t c = {0};
        vs_captured_collect(&c, graph);
        learned[count] = (vs_exec_node_t){.node = NULL, .addrs = c.addrs, .count = c.count};
        failed |= c.failed;
        count++;
    }
    if (failed)
        vs_log(VS_LOG_WARN, "out of memory while scanning graph %p: some of its pointers are not tracked", (void *)graph);
    if (learned == NULL)
        return;

    vs_exec_t *e;
    pthread_rwlock_wrlock(&vs_execs_lock);
    HASH_FIND_PTR(vs_execs, &key, e);
    if (e == NULL) {
        e = calloc(1, sizeof *e);
        if (e != NULL) {
            e->exec = key;
            HASH_ADD_PTR(vs_execs, exec, e);
            if (e->hh.tbl == NULL) {
                free(e);
                e = NULL;
            }
        }
    } else if (e->node_count == count) {
        for (size_t i = 0; i < count; i++)
            learned[i].node = e->nodes[i].node; /* an update: same topology */
    }
    if (e != NULL) {
        vs_exec_node_t *old = e->nodes;
        size_t old_count = e->node_count;
        e->nodes = learned;
        e->node_count = count;
        e->waits = waits;
        vs_exec_rehold(e);
        learned = NULL;
        vs_exec_nodes_free(old, old_count);
    }
    pthread_rwlock_unlock(&vs_execs_lock);
    if (learned != NULL)
        vs_exec_nodes_free(learned, count);
}

/* A `cuGraphExec*SetParams` changed what `node` references in `exec` to
 * what `c` holds: the graph's set is recomputed. */
static void vs_exec_set_node(CUgraphExec exec, CUgraphNode node, vs_collect_t *c)
{
    const void *key = exec;
    vs_exec_t *e;
    pthread_rwlock_wrlock(&vs_execs_lock);
    HASH_FIND_PTR(vs_execs, &key, e);
    if (e != NULL) {
        vs_exec_node_t *slot = NULL;
        for (size_t i = 0; i < e->node_count && slot == NULL; i++)
            if (e->nodes[i].node == node)
                slot = &e->nodes[i];
        if (slot == NULL) {
            /* Not a node we know (it cannot be, for a live graph): keep the
             * words as one more node, a superset. */
            vs_exec_node_t *grown = realloc(e->nodes, (e->node_count + 1) * sizeof *grown);
            if (grown != NULL) {
                e->nodes = grown;
                slot = &e->nodes[e->node_count++];
                *slot = (vs_exec_node_t){.node = node};
            }
        }
        if (slot != NULL) {
            free(slot->addrs);
            slot->addrs = c->addrs;
            slot->count = c->count;
            c->addrs = NULL;
            e->waits |= c->waits;
            vs_exec_rehold(e);
        }
    }
    pthread_rwlock_unlock(&vs_execs_lock);
    free(c->addrs);
    c->addrs = NULL;
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
        vs_collect_t c = {0};
        vs_collect_kernel(&c, nodeParams);
        vs_exec_set_node(hGraphExec, hNode, &c);
    }
    return rc;
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGraphExecMemcpyNodeSetParams, (hGraphExec, hNode, copyParams, ctx));
    if (rc == CUDA_SUCCESS && copyParams != NULL) {
        vs_collect_t c = {0};
        vs_copy3d_visit(copyParams, vs_collect_word, &c);
        vs_exec_set_node(hGraphExec, hNode, &c);
    }
    return rc;
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGraphExecMemsetNodeSetParams, (hGraphExec, hNode, memsetParams, ctx));
    if (rc == CUDA_SUCCESS && memsetParams != NULL) {
        vs_collect_t c = {0};
        vs_memset_visit(memsetParams, vs_collect_word, &c);
        vs_exec_set_node(hGraphExec, hNode, &c);
    }
    return rc;
}

CUresult CUDAAPI cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraph childGraph)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGraphExecChildGraphNodeSetParams, (hGraphExec, hNode, childGraph));
    if (rc == CUDA_SUCCESS) {
        vs_collect_t c = {0};
        vs_collect_graph(&c, childGraph, 1);
        vs_exec_set_node(hGraphExec, hNode, &c);
    }
    return rc;
}

CUresult CUDAAPI cuGraphExecBatchMemOpNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    CUresult rc;

    vs_driver_ready();
    rc = VS_CALL(cuGraphExecBatchMemOpNodeSetParams, (hGraphExec, hNode, nodeParams));
    if (rc == CUDA_SUCCESS && nodeParams != NULL) {
        vs_collect_t c = {0};
        vs_collect_memops(&c, nodeParams->paramArray, nodeParams->count);
        vs_exec_set_node(hGraphExec, hNode, &c);
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
        vs_exec_nodes_free(e->nodes, e->node_count);
        free(e);
    }
    return rc;
}

/* Copies the addresses an executable graph references into `w`; returns
 * whether it holds a stream memory wait. */
static bool vs_graph_words(CUgraphExec exec, vs_words_t *w)
{
    const void *key = exec;
    vs_exec_t *e;
    bool waits = false;

    VS_COUNT(graph_launches);
    pthread_rwlock_rdlock(&vs_execs_lock);
    HASH_FIND_PTR(vs_execs, &key, e);
    if (e != NULL) {
        for (size_t i = 0; i < e->count; i++)
            vs_words_add(w, e->addrs[i]);
        waits = e->waits;
    }
    pthread_rwlock_unlock(&vs_execs_lock);
    return waits;
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
        bool vs_waits_ = vs_graph_words(hGraphExec, &vs_words_);                                   \
        bool vs_per_thread_ = VS_PER_THREAD_SYMBOL(symbol);                                        \
        uint64_t vs_epoch_ = vs_waits_ ? vs_offload_stream_wait_begin(hStream, vs_per_thread_) : 0; \
        VS_OPERATE(vs_rc_, "graph", hStream, vs_per_thread_, vs_words_.words, vs_words_.count,     \
                   VS_CALL(symbol, (hGraphExec, hStream)));                                        \
        if (vs_rc_ == CUDA_SUCCESS && vs_waits_)                                                   \
            vs_offload_stream_wait_end(hStream, vs_per_thread_, vs_epoch_);                        \
        free(vs_words_.heap);                                                                      \
        return vs_rc_;                                                                             \
    }

VS_GRAPH_LAUNCH(cuGraphLaunch)
VS_GRAPH_LAUNCH(cuGraphLaunch_ptsz)

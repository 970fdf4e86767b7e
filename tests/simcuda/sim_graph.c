/* sim_graph.c: stream capture and graphs.
 *
 * While a stream captures, each submission becomes a graph node depending
 * on the stream's frontier (the nodes the next one must follow), and the
 * frontier becomes that node. Recording an event inside a capture remembers
 * the frontier; waiting on that event from another stream joins it to the
 * capture (fork), and waiting on the forked stream's event from the origin
 * merges the frontiers (join). `cuStreamEndCapture` requires every node to
 * lead to the origin's frontier.
 *
 * Graph nodes are only added after the nodes they depend on, so creation
 * order is a topological order: an executable graph is its nodes' commands
 * in creation order, and a launch submits copies of them to one stream.
 *
 * All capture state is guarded by `sim_submit_lock`.
 * Entry points: `cuStreamBeginCapture*`, `cuStreamEndCapture*`,
 * `sim_capture_record_locked`, `sim_capture_check_unsafe_call`, `cuGraph*`.
 */
#include "sim_exec.h"

#include <stdlib.h>
#include <string.h>

#define SIM_GRAPH_MAGIC 0x47525048u      /* "GRPH" */
#define SIM_GRAPH_NODE_MAGIC 0x474e4f44u /* "GNOD" */
#define SIM_GRAPH_EXEC_MAGIC 0x47455843u /* "GEXC" */

struct CUgraphNode_st {
    uint32_t magic;
    CUgraph graph;
    size_t index; /* position in the graph, a topological order */
    sim_cmd_t cmd;
    CUgraphNode *deps;
    size_t dep_count;
    /* A child graph node (one: its clone of the child graph) or a
     * conditional node (its bodies, created with it); owned. The node's
     * command gets its bodies from these at instantiation. */
    CUgraph *graphs;
    unsigned graph_count;
};

struct CUgraph_st {
    uint32_t magic;
    CUgraphNode *nodes;
    size_t count, capacity;
    CUgraph parent; /* a conditional body: the graph of its node */
};

/* The dependencies of one node, as indices: what `cuGraphExecUpdate`
 * compares the new graph's topology against. */
typedef struct sim_exec_deps_s {
    size_t *index;
    size_t count;
} sim_exec_deps_t;

struct CUgraphExec_st {
    uint32_t magic;
    sim_cmd_t *cmds;
    sim_exec_deps_t *deps; /* one per command */
    size_t count;
    sim_cmd_t reset; /* SIM_CMD_COND_RESET, submitted first; EMPTY when none */
};

typedef struct sim_capture_s {
    uint64_t id;
    CUstreamCaptureMode mode;
    pthread_t thread; /* the thread that began it */
    bool invalidated;
    CUgraph graph;
    struct CUstream_st *origin;
    struct CUstream_st **streams; /* every stream taking part (referenced) */
    size_t stream_count, stream_capacity;
    CUgraphEdgeData *edge_data; /* all-default edges for GetCaptureInfo */
    size_t edge_data_capacity;
    struct sim_capture_s *next;
} sim_capture_t;

static sim_capture_t *captures;         /* in progress */
static _Atomic int capture_count;       /* read without the lock */
static uint64_t next_capture_id = 1;
static _Thread_local CUstreamCaptureMode thread_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* ------------------------------------------------------------------------
 * Graphs
 * ------------------------------------------------------------------------ */

static CUgraph graph_new(void)
{
    CUgraph graph = calloc(1, sizeof(*graph));
    if (graph != NULL)
        graph->magic = SIM_GRAPH_MAGIC;
    return graph;
}

static void graph_free(CUgraph graph)
{
    for (size_t i = 0; i < graph->count; i++) {
        CUgraphNode node = graph->nodes[i];
        sim_cmd_release(&node->cmd);
        for (unsigned g = 0; g < node->graph_count; g++)
            graph_free(node->graphs[g]);
        free(node->graphs);
        free(node->deps);
        node->magic = 0;
        free(node);
    }
    graph->magic = 0;
    free(graph->nodes);
    free(graph);
}

/* Adds a node; takes `cmd` on success only. */
static CUgraphNode graph_add(CUgraph graph, sim_cmd_t *cmd, const CUgraphNode *deps, size_t dep_count)
{
    if (graph->count == graph->capacity) {
        size_t capacity = graph->capacity ? graph->capacity * 2 : 16;
        CUgraphNode *grown = realloc(graph->nodes, capacity * sizeof(*grown));
        if (grown == NULL)
            return NULL;
        graph->nodes = grown;
        graph->capacity = capacity;
    }
    CUgraphNode node = calloc(1, sizeof(*node));
    if (node == NULL)
        return NULL;
    if (dep_count > 0) {
        node->deps = malloc(dep_count * sizeof(*deps));
        if (node->deps == NULL) {
            free(node);
            return NULL;
        }
        memcpy(node->deps, deps, dep_count * sizeof(*deps));
    }
    node->magic = SIM_GRAPH_NODE_MAGIC;
    node->graph = graph;
    node->index = graph->count;
    node->dep_count = dep_count;
    node->cmd = *cmd;
    memset(cmd, 0, sizeof(*cmd));
    graph->nodes[graph->count++] = node;
    return node;
}

/* ------------------------------------------------------------------------
 * Capture bookkeeping
 * ------------------------------------------------------------------------ */

static int frontier_reserve(struct CUstream_st *s, size_t count)
{
    if (count <= s->frontier_cap)
        return 0;
    CUgraphNode *grown = realloc(s->frontier, count * sizeof(*grown));
    if (grown == NULL)
        return -1;
    s->frontier = grown;
    s->frontier_cap = count;
    return 0;
}

/* Adds nodes to the frontier, skipping duplicates. */
static int frontier_merge(struct CUstream_st *s, const CUgraphNode *nodes, size_t count)
{
    if (frontier_reserve(s, s->frontier_count + count) != 0)
        return -1;
    for (size_t i = 0; i < count; i++) {
        bool present = false;
        for (size_t j = 0; j < s->frontier_count && !present; j++)
            present = s->frontier[j] == nodes[i];
        if (!present)
            s->frontier[s->frontier_count++] = nodes[i];
    }
    return 0;
}

static int capture_add_stream(sim_capture_t *c, struct CUstream_st *s)
{
    if (c->stream_count == c->stream_capacity) {
        size_t capacity = c->stream_capacity ? c->stream_capacity * 2 : 4;
        struct CUstream_st **grown = realloc(c->streams, capacity * sizeof(*grown));
        if (grown == NULL)
            return -1;
        c->streams = grown;
        c->stream_capacity = capacity;
    }
    sim_stream_ref(s);
    c->streams[c->stream_count++] = s;
    s->capture = c;
    s->frontier_count = 0;
    return 0;
}

static void capture_detach_stream(sim_capture_t *c, size_t i)
{
    struct CUstream_st *s = c->streams[i];
    s->capture = NULL;
    s->frontier_count = 0;
    c->streams[i] = c->streams[--c->stream_count];
    sim_stream_unref(s);
}

uint64_t sim_capture_id(const sim_capture_t *capture)
{
    return capture->id;
}

sim_capture_t *sim_capture_find_locked(uint64_t id)
{
    for (sim_capture_t *c = captures; c != NULL; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

void sim_capture_invalidate_locked(struct CUstream_st *stream)
{
    if (stream->capture != NULL)
        stream->capture->invalidated = true;
}

CUresult sim_capture_record_locked(struct CUstream_st *stream, sim_cmd_t *cmd)
{
    sim_capture_t *c = stream->capture;
    if (c->invalidated) {
        sim_cmd_release(cmd);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    if (frontier_reserve(stream, 1) != 0) {
        sim_cmd_release(cmd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUgraphNode node = graph_add(c->graph, cmd, stream->frontier, stream->frontier_count);
    if (node == NULL) {
        sim_cmd_release(cmd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    stream->frontier[0] = node;
    stream->frontier_count = 1;
    return CUDA_SUCCESS;
}

CUresult sim_capture_join_locked(struct CUstream_st *stream, sim_capture_t *capture, const CUgraphNode *nodes,
                                 size_t count)
{
    if (stream->capture == NULL) {
        if (stream->is_legacy) {
            /* The legacy stream cannot take part in a capture. */
            capture->invalidated = true;
            return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
        if (capture_add_stream(capture, stream) != 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (frontier_merge(stream, nodes, count) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

struct CUstream_st *sim_capture_blocking_stream_locked(CUcontext ctx)
{
    for (sim_capture_t *c = captures; c != NULL; c = c->next)
        for (size_t i = 0; i < c->stream_count; i++)
            if (c->streams[i]->ctx == ctx && sim_stream_is_blocking(c->streams[i]))
                return c->streams[i];
    return NULL;
}

void sim_capture_forget_stream_locked(struct CUstream_st *stream)
{
    sim_capture_t *c = stream->capture;
    if (c == NULL)
        return;
    /* Destroying a stream that takes part in a capture breaks it. */
    c->invalidated = true;
    if (c->origin == stream)
        c->origin = NULL;
    for (size_t i = 0; i < c->stream_count; i++) {
        if (c->streams[i] == stream) {
            capture_detach_stream(c, i);
            break;
        }
    }
}

CUresult sim_capture_check_unsafe_call(void)
{
    if (atomic_load(&capture_count) == 0 || thread_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    bool prohibited = false;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&sim_submit_lock);
    for (sim_capture_t *c = captures; c != NULL; c = c->next) {
        bool mine = pthread_equal(c->thread, self);
        /* This thread's own non-relaxed capture, or (in global mode) any
         * other thread's global capture, forbids the call. */
        if ((mine && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!mine && thread_capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            c->invalidated = true;
            prohibited = true;
        }
    }
    pthread_mutex_unlock(&sim_submit_lock);
    return prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Begin / end / query
 * ------------------------------------------------------------------------ */

static CUresult begin_capture(CUstream handle, CUstreamCaptureMode mode, bool per_thread)
{
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(handle, per_thread, &result);
    if (s == NULL)
        return result;
    if (s->is_legacy)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    sim_capture_t *c = calloc(1, sizeof(*c));
    CUgraph graph = graph_new();
    if (c == NULL || graph == NULL) {
        free(c);
        free(graph);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->mode = mode;
    c->thread = pthread_self();
    c->graph = graph;
    c->origin = s;
    pthread_mutex_lock(&sim_submit_lock);
    if (s->capture != NULL) {
        result = CUDA_ERROR_ILLEGAL_STATE;
    } else if (capture_add_stream(c, s) != 0) {
        result = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        c->id = next_capture_id++;
        c->next = captures;
        captures = c;
        atomic_fetch_add(&capture_count, 1);
        result = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_submit_lock);
    if (result != CUDA_SUCCESS) {
        graph_free(graph);
        free(c->streams);
        free(c);
    }
    return result;
}

/* Every node must be an ancestor of (or in) the origin's frontier. */
static bool capture_is_joined(const sim_capture_t *c)
{
    CUgraph graph = c->graph;
    if (graph->count == 0)
        return true;
    bool *reached = calloc(graph->count, sizeof(*reached));
    CUgraphNode *stack = malloc(graph->count * sizeof(*stack));
    bool joined = false;
    if (reached == NULL || stack == NULL)
        goto out;
    size_t top = 0;
    for (size_t i = 0; i < c->origin->frontier_count; i++) {
        CUgraphNode node = c->origin->frontier[i];
        if (!reached[node->index]) {
            reached[node->index] = true;
            stack[top++] = node;
        }
    }
    while (top > 0) {
        CUgraphNode node = stack[--top];
        for (size_t i = 0; i < node->dep_count; i++) {
            CUgraphNode dep = node->deps[i];
            if (!reached[dep->index]) {
                reached[dep->index] = true;
                stack[top++] = dep;
            }
        }
    }
    joined = true;
    for (size_t i = 0; i < graph->count; i++)
        joined = joined && reached[i];
out:
    free(reached);
    free(stack);
    return joined;
}

static CUresult end_capture(CUstream handle, CUgraph *out, bool per_thread)
{
    if (out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(handle, per_thread, &result);
    if (s == NULL)
        return result;
    pthread_mutex_lock(&sim_submit_lock);
    sim_capture_t *c = s->capture;
    if (c == NULL) {
        pthread_mutex_unlock(&sim_submit_lock);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    if (c->origin != s) {
        c->invalidated = true;
        pthread_mutex_unlock(&sim_submit_lock);
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
        pthread_mutex_unlock(&sim_submit_lock);
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    if (c->invalidated)
        result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (!capture_is_joined(c))
        result = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    else
        result = CUDA_SUCCESS;
    /* The capture ends on every stream either way. */
    while (c->stream_count > 0)
        capture_detach_stream(c, c->stream_count - 1);
    for (sim_capture_t **p = &captures; *p != NULL; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    atomic_fetch_sub(&capture_count, 1);
    pthread_mutex_unlock(&sim_submit_lock);

    if (result == CUDA_SUCCESS) {
        *out = c->graph;
    } else {
        graph_free(c->graph);
        *out = NULL;
    }
    free(c->streams);
    free(c->edge_data);
    free(c);
    return result;
}

SIM_EXPORT CUresult cuStreamBeginCapture(CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuStreamBeginCapture, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, false);
}

SIM_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuStreamBeginCapture_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, true);
}

SIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    CUresult entry = SIM_ENTER(cuStreamBeginCapture_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return begin_capture(hStream, mode, false);
}

SIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    CUresult entry = SIM_ENTER(cuStreamBeginCapture_v2_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return begin_capture(hStream, mode, true);
}

SIM_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    CUresult entry = SIM_ENTER(cuStreamEndCapture, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return end_capture(hStream, phGraph, false);
}

SIM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    CUresult entry = SIM_ENTER(cuStreamEndCapture_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return end_capture(hStream, phGraph, true);
}

SIM_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CUresult entry = SIM_ENTER(cuThreadExchangeStreamCaptureMode, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (mode == NULL || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                         *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode previous = thread_capture_mode;
    thread_capture_mode = *mode;
    *mode = previous;
    return CUDA_SUCCESS;
}

/* Everything the GetCaptureInfo versions report. */
typedef struct capture_info_s {
    CUstreamCaptureStatus status;
    cuuint64_t id;
    CUgraph graph;
    const CUgraphNode *deps;
    const CUgraphEdgeData *edges;
    size_t dep_count;
} capture_info_t;

static CUresult capture_info(CUstream handle, bool per_thread, capture_info_t *info)
{
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(handle, per_thread, &result);
    if (s == NULL)
        return result;
    memset(info, 0, sizeof(*info));
    info->status = CU_STREAM_CAPTURE_STATUS_NONE;
    result = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_submit_lock);
    if (s->is_legacy && sim_capture_blocking_stream_locked(s->ctx) != NULL) {
        result = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else if (s->capture != NULL) {
        sim_capture_t *c = s->capture;
        info->status = c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
        info->id = c->id;
        info->graph = c->graph;
        info->deps = s->frontier;
        info->dep_count = s->frontier_count;
        if (s->frontier_count > c->edge_data_capacity) {
            CUgraphEdgeData *edges = calloc(s->frontier_count, sizeof(*edges));
            if (edges != NULL) {
                free(c->edge_data);
                c->edge_data = edges;
                c->edge_data_capacity = s->frontier_count;
            }
        }
        info->edges = s->frontier_count <= c->edge_data_capacity ? c->edge_data : NULL;
    }
    pthread_mutex_unlock(&sim_submit_lock);
    return result;
}

static CUresult is_capturing(CUstream handle, CUstreamCaptureStatus *status, bool per_thread)
{
    if (status == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    capture_info_t info;
    CUresult result = capture_info(handle, per_thread, &info);
    if (result == CUDA_SUCCESS)
        *status = info.status;
    return result;
}

SIM_EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    CUresult entry = SIM_ENTER(cuStreamIsCapturing, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return is_capturing(hStream, captureStatus, false);
}

SIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    CUresult entry = SIM_ENTER(cuStreamIsCapturing_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return is_capturing(hStream, captureStatus, true);
}

static CUresult get_capture_info(CUstream handle, bool per_thread, CUstreamCaptureStatus *status, cuuint64_t *id,
                                 CUgraph *graph, const CUgraphNode **deps, const CUgraphEdgeData **edges,
                                 size_t *dep_count)
{
    if (status == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    capture_info_t info;
    CUresult result = capture_info(handle, per_thread, &info);
    if (result != CUDA_SUCCESS)
        return result;
    *status = info.status;
    if (info.status == CU_STREAM_CAPTURE_STATUS_NONE)
        return CUDA_SUCCESS;
    if (id != NULL)
        *id = info.id;
    if (graph != NULL)
        *graph = info.graph;
    if (deps != NULL)
        *deps = info.deps;
    if (edges != NULL)
        *edges = info.edges;
    if (dep_count != NULL)
        *dep_count = info.dep_count;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out)
{
    CUresult entry = SIM_ENTER(cuStreamGetCaptureInfo, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return get_capture_info(hStream, false, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                cuuint64_t *id_out)
{
    CUresult entry = SIM_ENTER(cuStreamGetCaptureInfo_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return get_capture_info(hStream, true, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                              cuuint64_t *id_out, CUgraph *graph_out,
                                              const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    CUresult entry = SIM_ENTER(cuStreamGetCaptureInfo_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return get_capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                            numDependencies_out);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                   cuuint64_t *id_out, CUgraph *graph_out,
                                                   const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    CUresult entry = SIM_ENTER(cuStreamGetCaptureInfo_v2_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return get_capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                            numDependencies_out);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                              cuuint64_t *id_out, CUgraph *graph_out,
                                              const CUgraphNode **dependencies_out,
                                              const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    CUresult entry = SIM_ENTER(cuStreamGetCaptureInfo_v3, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return get_capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                            numDependencies_out);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                   cuuint64_t *id_out, CUgraph *graph_out,
                                                   const CUgraphNode **dependencies_out,
                                                   const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    CUresult entry = SIM_ENTER(cuStreamGetCaptureInfo_v3_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return get_capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                            numDependencies_out);
}

/* ------------------------------------------------------------------------
 * Graph API
 * ------------------------------------------------------------------------ */

static CUgraph graph_from_handle(CUgraph graph)
{
    return graph != NULL && graph->magic == SIM_GRAPH_MAGIC ? graph : NULL;
}

static CUgraphNode node_from_handle(CUgraphNode node)
{
    return node != NULL && node->magic == SIM_GRAPH_NODE_MAGIC ? node : NULL;
}

SIM_EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuGraphCreate, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (phGraph == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    CUgraph graph = graph_new();
    if (graph == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = graph;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    CUresult entry = SIM_ENTER(cuGraphDestroy, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraph graph = graph_from_handle(hGraph);
    if (graph == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    graph_free(graph);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    CUresult entry = SIM_ENTER(cuGraphGetNodes, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraph graph = graph_from_handle(hGraph);
    if (graph == NULL || numNodes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (nodes != NULL) {
        for (size_t i = 0; i < *numNodes; i++)
            nodes[i] = i < graph->count ? graph->nodes[i] : NULL;
        if (*numNodes < graph->count)
            return CUDA_SUCCESS;
    }
    *numNodes = graph->count;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    CUresult entry = SIM_ENTER(cuGraphNodeGetType, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraphNode node = node_from_handle(hNode);
    if (node == NULL || type == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    switch (node->cmd.kind) {
    case SIM_CMD_KERNEL:
        *type = CU_GRAPH_NODE_TYPE_KERNEL;
        break;
    case SIM_CMD_COPY:
        *type = CU_GRAPH_NODE_TYPE_MEMCPY;
        break;
    case SIM_CMD_SET:
        *type = CU_GRAPH_NODE_TYPE_MEMSET;
        break;
    case SIM_CMD_HOST:
        *type = CU_GRAPH_NODE_TYPE_HOST;
        break;
    case SIM_CMD_EVENT_RECORD:
        *type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
        break;
    case SIM_CMD_EVENT_WAIT:
        *type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
        break;
    case SIM_CMD_MEMOP:
        *type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
        break;
    case SIM_CMD_GRAPH:
        *type = CU_GRAPH_NODE_TYPE_GRAPH;
        break;
    case SIM_CMD_COND:
        *type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        break;
    case SIM_CMD_COND_RESET:
        *type = CU_GRAPH_NODE_TYPE_EMPTY;
        break;
    case SIM_CMD_EMPTY:
        *type = CU_GRAPH_NODE_TYPE_EMPTY;
        break;
    }
    return CUDA_SUCCESS;
}

static CUresult kernel_node_get_params(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    CUgraphNode node = node_from_handle(hNode);
    if (node == NULL || nodeParams == NULL || node->cmd.kind != SIM_CMD_KERNEL)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_launch_desc_t *launch = &node->cmd.u.launch;
    memset(nodeParams, 0, sizeof(*nodeParams));
    nodeParams->func = (CUfunction)(void *)launch->kernel;
    nodeParams->gridDimX = launch->grid[0];
    nodeParams->gridDimY = launch->grid[1];
    nodeParams->gridDimZ = launch->grid[2];
    nodeParams->blockDimX = launch->block[0];
    nodeParams->blockDimY = launch->block[1];
    nodeParams->blockDimZ = launch->block[2];
    nodeParams->sharedMemBytes = launch->shared_bytes;
    /* The graph's own copies of the arguments, as the real driver gives. */
    nodeParams->kernelParams = launch->param_ptrs;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    CUresult entry = SIM_ENTER(cuGraphKernelNodeGetParams_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return kernel_node_get_params(hNode, nodeParams);
}

SIM_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                            size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    CUresult entry = SIM_ENTER(cuGraphAddKernelNode_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraph graph = graph_from_handle(hGraph);
    if (phGraphNode == NULL || graph == NULL || nodeParams == NULL || (numDependencies > 0 && dependencies == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numDependencies; i++)
        if (node_from_handle(dependencies[i]) == NULL || dependencies[i]->graph != graph)
            return CUDA_ERROR_INVALID_VALUE;
    const void *handle = nodeParams->func != NULL ? (const void *)nodeParams->func : (const void *)nodeParams->kern;
    sim_kernel_t *kernel = sim_kernel_from_handle(handle);
    if (kernel == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned dims[6] = {nodeParams->gridDimX, nodeParams->gridDimY, nodeParams->gridDimZ,
                              nodeParams->blockDimX, nodeParams->blockDimY, nodeParams->blockDimZ};
    for (int d = 0; d < 6; d++)
        if (dims[d] == 0)
            return CUDA_ERROR_INVALID_VALUE;
    sim_cmd_t cmd = {.kind = SIM_CMD_KERNEL};
    CUresult result = sim_launch_build(&cmd.u.launch, kernel, nodeParams->kernelParams, nodeParams->extra);
    if (result != CUDA_SUCCESS)
        return result;
    memcpy(cmd.u.launch.grid, dims, sizeof(cmd.u.launch.grid));
    memcpy(cmd.u.launch.block, dims + 3, sizeof(cmd.u.launch.block));
    cmd.u.launch.shared_bytes = nodeParams->sharedMemBytes;
    pthread_mutex_lock(&sim_submit_lock);
    CUgraphNode node = graph_add(graph, &cmd, dependencies, numDependencies);
    pthread_mutex_unlock(&sim_submit_lock);
    if (node == NULL) {
        sim_cmd_release(&cmd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phGraphNode = node;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Executable graphs
 * ------------------------------------------------------------------------ */

static void exec_free(CUgraphExec exec)
{
    for (size_t i = 0; i < exec->count; i++) {
        sim_cmd_release(&exec->cmds[i]);
        free(exec->deps[i].index);
    }
    sim_cmd_release(&exec->reset);
    exec->magic = 0;
    free(exec->deps);
    free(exec->cmds);
    free(exec);
}

static CUresult node_build_cmd(CUgraphNode node, sim_cmd_t *out, sim_cmd_t *reset);

static CUresult instantiate(CUgraphExec *out, CUgraph handle)
{
    CUgraph graph = graph_from_handle(handle);
    if (out == NULL || graph == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphExec exec = calloc(1, sizeof(*exec));
    if (exec == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    exec->magic = SIM_GRAPH_EXEC_MAGIC;
    exec->cmds = calloc(graph->count ? graph->count : 1, sizeof(*exec->cmds));
    exec->deps = calloc(graph->count ? graph->count : 1, sizeof(*exec->deps));
    if (exec->cmds == NULL || exec->deps == NULL) {
        free(exec->cmds);
        free(exec->deps);
        free(exec);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* Creation order is topological (see the top of this file). The
     * executable owns copies, so the graph may be destroyed after. */
    for (size_t i = 0; i < graph->count; i++) {
        CUgraphNode node = graph->nodes[i];
        sim_exec_deps_t *deps = &exec->deps[i];
        deps->index = malloc((node->dep_count ? node->dep_count : 1) * sizeof(*deps->index));
        CUresult built = deps->index == NULL ? CUDA_ERROR_OUT_OF_MEMORY : node_build_cmd(node, &exec->cmds[i], &exec->reset);
        if (built != CUDA_SUCCESS) {
            free(deps->index);
            deps->index = NULL;
            exec_free(exec);
            return built;
        }
        for (size_t d = 0; d < node->dep_count; d++)
            deps->index[d] = node->deps[d]->index;
        deps->count = node->dep_count;
        exec->count++;
    }
    *out = exec;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    CUresult entry = SIM_ENTER(cuGraphInstantiateWithFlags, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    const unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
                                     CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
                                     CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    if ((flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return instantiate(phGraphExec, hGraph);
}

SIM_EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize)
{
    CUresult entry = SIM_ENTER(cuGraphInstantiate, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (logBuffer != NULL && bufferSize > 0)
        logBuffer[0] = '\0';
    return instantiate(phGraphExec, hGraph);
}

SIM_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                          char *logBuffer, size_t bufferSize)
{
    CUresult entry = SIM_ENTER(cuGraphInstantiate_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (logBuffer != NULL && bufferSize > 0)
        logBuffer[0] = '\0';
    return instantiate(phGraphExec, hGraph);
}

SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CUresult entry = SIM_ENTER(cuGraphExecDestroy, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (hGraphExec == NULL || hGraphExec->magic != SIM_GRAPH_EXEC_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    /* Launches submitted copies; nothing in flight refers to these. */
    exec_free(hGraphExec);
    return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec exec, CUstream handle, bool per_thread)
{
    if (exec == NULL || exec->magic != SIM_GRAPH_EXEC_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result;
    struct CUstream_st *s = sim_stream_resolve(handle, per_thread, &result);
    if (s == NULL)
        return result;
    result = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_submit_lock);
    if (exec->reset.kind == SIM_CMD_COND_RESET) {
        /* CU_GRAPH_COND_ASSIGN_DEFAULT: "applied at the beginning of each
         * graph execution". */
        sim_cmd_t reset;
        result = sim_cmd_clone(&reset, &exec->reset);
        if (result == CUDA_SUCCESS)
            result = sim_submit_locked(s, &reset);
    }
    for (size_t i = 0; i < exec->count && result == CUDA_SUCCESS; i++) {
        sim_cmd_t cmd;
        result = sim_cmd_clone(&cmd, &exec->cmds[i]);
        if (result != CUDA_SUCCESS)
            break;
        if (cmd.kind == SIM_CMD_EVENT_RECORD) {
            result = sim_event_record_locked(cmd.u.event, s);
            sim_cmd_release(&cmd);
        } else if (cmd.kind == SIM_CMD_EVENT_WAIT) {
            result = sim_stream_wait_event_locked(s, cmd.u.event, 0);
            sim_cmd_release(&cmd);
        } else {
            result = sim_submit_locked(s, &cmd);
        }
    }
    pthread_mutex_unlock(&sim_submit_lock);
    return result;
}

SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuGraphLaunch, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return graph_launch(hGraphExec, hStream, false);
}

SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuGraphLaunch_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return graph_launch(hGraphExec, hStream, true);
}

/* ------------------------------------------------------------------------
 * Updating an executable graph: its commands are replaced by new copies;
 * launches already submitted keep theirs.
 * ------------------------------------------------------------------------ */

/* Whether `node` depends on exactly the nodes at `deps` (in any order). */
static bool same_dependencies(CUgraphNode node, const sim_exec_deps_t *deps)
{
    if (node->dep_count != deps->count)
        return false;
    for (size_t a = 0; a < node->dep_count; a++) {
        bool found = false;
        for (size_t b = 0; b < deps->count && !found; b++)
            found = node->deps[a]->index == deps->index[b];
        if (!found)
            return false;
    }
    return true;
}

static bool update_allowed(const sim_cmd_t *old, const sim_cmd_t *next);

SIM_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
    CUresult entry = SIM_ENTER(cuGraphExecUpdate_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (hGraphExec == NULL || hGraphExec->magic != SIM_GRAPH_EXEC_MAGIC || hGraph == NULL ||
        hGraph->magic != SIM_GRAPH_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    if (resultInfo != NULL)
        memset(resultInfo, 0, sizeof(*resultInfo));
    pthread_mutex_lock(&sim_submit_lock);
    CUresult result = CUDA_SUCCESS;
    if (hGraph->count != hGraphExec->count) {
        result = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
        if (resultInfo != NULL)
            resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        goto out;
    }
    for (size_t i = 0; i < hGraph->count; i++) {
        CUgraphExecUpdateResult why = CU_GRAPH_EXEC_UPDATE_SUCCESS;
        if (!same_dependencies(hGraph->nodes[i], &hGraphExec->deps[i]))
            why = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        else if (hGraph->nodes[i]->cmd.kind != hGraphExec->cmds[i].kind)
            why = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        else if (hGraph->nodes[i]->graph_count == 0 && !update_allowed(&hGraphExec->cmds[i], &hGraph->nodes[i]->cmd))
            why = CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        if (why != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
            result = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
            if (resultInfo != NULL) {
                resultInfo->result = why;
                resultInfo->errorNode = hGraph->nodes[i];
            }
            goto out;
        }
    }
    sim_cmd_t *built = calloc(hGraph->count ? hGraph->count : 1, sizeof(*built));
    sim_cmd_t reset = {.kind = SIM_CMD_EMPTY};
    if (built == NULL) {
        result = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    size_t made = 0;
    for (; made < hGraph->count && result == CUDA_SUCCESS; made++) {
        result = node_build_cmd(hGraph->nodes[made], &built[made], &reset);
        if (result == CUDA_SUCCESS && !update_allowed(&hGraphExec->cmds[made], &built[made])) {
            result = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
            if (resultInfo != NULL) {
                resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
                resultInfo->errorNode = hGraph->nodes[made];
            }
            made++;
            break;
        }
    }
    if (result != CUDA_SUCCESS) {
        for (size_t i = 0; i < made; i++)
            sim_cmd_release(&built[i]);
        sim_cmd_release(&reset);
        free(built);
        goto out;
    }
    for (size_t i = 0; i < hGraph->count; i++) {
        sim_cmd_release(&hGraphExec->cmds[i]);
        hGraphExec->cmds[i] = built[i];
    }
    free(built);
    sim_cmd_release(&hGraphExec->reset);
    hGraphExec->reset = reset;
    if (resultInfo != NULL)
        resultInfo->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
out:
    pthread_mutex_unlock(&sim_submit_lock);
    return result;
}

static CUresult exec_kernel_node_set_params(CUgraphExec hGraphExec, CUgraphNode hNode,
                                            const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    if (hGraphExec == NULL || hGraphExec->magic != SIM_GRAPH_EXEC_MAGIC || hNode == NULL ||
        hNode->magic != SIM_GRAPH_NODE_MAGIC || nodeParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_submit_lock);
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    size_t i = hNode->index;
    sim_kernel_t *kernel = sim_kernel_from_handle(nodeParams->func != NULL ? (const void *)nodeParams->func
                                                                           : (const void *)nodeParams->kern);
    bool dims_ok = nodeParams->gridDimX && nodeParams->gridDimY && nodeParams->gridDimZ && nodeParams->blockDimX &&
                   nodeParams->blockDimY && nodeParams->blockDimZ;
    if (i < hGraphExec->count && hGraphExec->cmds[i].kind == SIM_CMD_KERNEL && kernel != NULL && dims_ok &&
        hGraphExec->count > 0 && hNode->graph != NULL) {
        sim_cmd_t cmd = {.kind = SIM_CMD_KERNEL};
        result = sim_launch_build(&cmd.u.launch, kernel, nodeParams->kernelParams, nodeParams->extra);
        if (result == CUDA_SUCCESS) {
            cmd.u.launch.grid[0] = nodeParams->gridDimX;
            cmd.u.launch.grid[1] = nodeParams->gridDimY;
            cmd.u.launch.grid[2] = nodeParams->gridDimZ;
            cmd.u.launch.block[0] = nodeParams->blockDimX;
            cmd.u.launch.block[1] = nodeParams->blockDimY;
            cmd.u.launch.block[2] = nodeParams->blockDimZ;
            cmd.u.launch.shared_bytes = nodeParams->sharedMemBytes;
            sim_cmd_release(&hGraphExec->cmds[i]);
            hGraphExec->cmds[i] = cmd;
        }
    }
    pthread_mutex_unlock(&sim_submit_lock);
    return result;
}

SIM_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                      const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    CUresult entry = SIM_ENTER(cuGraphExecKernelNodeSetParams_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return exec_kernel_node_set_params(hGraphExec, hNode, nodeParams);
}

/* ------------------------------------------------------------------------
 * Memcpy and memset nodes: built, read back and replaced in an executable
 * graph. A node keeps the command, so reading it back gives an equivalent
 * description (positions folded into the addresses, each side typed by the
 * memory it points into).
 * ------------------------------------------------------------------------ */

static void copy_side(uintptr_t address, CUmemorytype *type, const void **host, CUdeviceptr *device)
{
    sim_mem_kind_t kind = sim_mem_classify(address, NULL);
    if (kind == SIM_MEM_DEVICE || kind == SIM_MEM_MANAGED) {
        *type = CU_MEMORYTYPE_DEVICE;
        *device = (CUdeviceptr)address;
    } else {
        *type = CU_MEMORYTYPE_HOST;
        *host = (const void *)address;
    }
}

SIM_EXPORT CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    CUresult entry = SIM_ENTER(cuGraphMemcpyNodeGetParams, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraphNode node = node_from_handle(hNode);
    if (node == NULL || nodeParams == NULL || node->cmd.kind != SIM_CMD_COPY)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_copy_desc_t *c = &node->cmd.u.copy;
    memset(nodeParams, 0, sizeof(*nodeParams));
    copy_side(c->src, &nodeParams->srcMemoryType, &nodeParams->srcHost, &nodeParams->srcDevice);
    void *dst_host = NULL;
    copy_side(c->dst, &nodeParams->dstMemoryType, (const void **)&dst_host, &nodeParams->dstDevice);
    nodeParams->dstHost = dst_host;
    nodeParams->srcPitch = c->src_pitch;
    nodeParams->srcHeight = c->src_height;
    nodeParams->dstPitch = c->dst_pitch;
    nodeParams->dstHeight = c->dst_height;
    nodeParams->WidthInBytes = c->width;
    nodeParams->Height = c->height;
    nodeParams->Depth = c->depth;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    CUresult entry = SIM_ENTER(cuGraphMemsetNodeGetParams, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraphNode node = node_from_handle(hNode);
    if (node == NULL || nodeParams == NULL || node->cmd.kind != SIM_CMD_SET)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_set_desc_t *set = &node->cmd.u.set;
    memset(nodeParams, 0, sizeof(*nodeParams));
    nodeParams->dst = (CUdeviceptr)set->dst;
    nodeParams->pitch = set->pitch;
    nodeParams->value = set->value;
    nodeParams->elementSize = set->elem_size;
    nodeParams->width = set->width;
    nodeParams->height = set->height;
    return CUDA_SUCCESS;
}

static CUresult check_deps(CUgraph graph, const CUgraphNode *dependencies, size_t count)
{
    if (count > 0 && dependencies == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++)
        if (node_from_handle(dependencies[i]) == NULL || dependencies[i]->graph != graph)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult add_cmd_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *dependencies, size_t count,
                             sim_cmd_t *cmd)
{
    pthread_mutex_lock(&sim_submit_lock);
    CUgraphNode node = graph_add(graph, cmd, dependencies, count);
    pthread_mutex_unlock(&sim_submit_lock);
    if (node == NULL) {
        sim_cmd_release(cmd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = node;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    CUresult entry = SIM_ENTER(cuGraphAddMemcpyNode, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraph graph = graph_from_handle(hGraph);
    if (phGraphNode == NULL || graph == NULL || copyParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult result = check_deps(graph, dependencies, numDependencies);
    if (result != CUDA_SUCCESS)
        return result;
    sim_cmd_t cmd = {.kind = SIM_CMD_COPY};
    bool empty;
    result = sim_copy_desc_from_3d(copyParams, &cmd.u.copy, &empty);
    if (result != CUDA_SUCCESS)
        return result;
    if (empty) /* "Zero-length operations are not supported." */
        return CUDA_ERROR_INVALID_VALUE;
    return add_cmd_node(phGraphNode, graph, dependencies, numDependencies, &cmd);
}

SIM_EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                         CUcontext ctx)
{
    CUresult entry = SIM_ENTER(cuGraphAddMemsetNode, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraph graph = graph_from_handle(hGraph);
    if (phGraphNode == NULL || graph == NULL || memsetParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult result = check_deps(graph, dependencies, numDependencies);
    if (result != CUDA_SUCCESS)
        return result;
    const CUDA_MEMSET_NODE_PARAMS *p = memsetParams;
    sim_cmd_t cmd = {.kind = SIM_CMD_SET};
    bool empty;
    result = sim_set_desc_build(p->dst, p->pitch, p->value, p->elementSize, p->width, p->height, &cmd.u.set, &empty);
    if (result != CUDA_SUCCESS)
        return result;
    if (empty)
        return CUDA_ERROR_INVALID_VALUE;
    return add_cmd_node(phGraphNode, graph, dependencies, numDependencies, &cmd);
}

/* The device an address's memory lives on (-1 for host memory). */
static int side_device(uintptr_t address, sim_mem_kind_t *kind)
{
    int device = -1;
    *kind = sim_mem_classify(address, &device);
    return *kind == SIM_MEM_DEVICE ? device : -1;
}

/* The command `hNode` became in `exec`, when it is of `kind`. Caller holds
 * `sim_submit_lock`. */
static sim_cmd_t *exec_cmd_of(CUgraphExec exec, CUgraphNode node, sim_cmd_kind_t kind)
{
    if (exec == NULL || exec->magic != SIM_GRAPH_EXEC_MAGIC || node_from_handle(node) == NULL)
        return NULL;
    if (node->index >= exec->count || exec->cmds[node->index].kind != kind)
        return NULL;
    return &exec->cmds[node->index];
}

/* For a 2-D memset only the address and the value may change; for a 1-D
 * one the height may not (the width and the element size may: simcuda
 * has no per-node work resources they could fail to fit). */
static bool set_shape_allowed(const sim_set_desc_t *old, const sim_set_desc_t *next)
{
    if (old->height != next->height)
        return false;
    return old->height == 1 ||
           (old->width == next->width && old->elem_size == next->elem_size && old->pitch == next->pitch);
}

static bool copy_mapping_same(const sim_copy_desc_t *old, const sim_copy_desc_t *next)
{
    sim_mem_kind_t old_src, old_dst, new_src, new_dst;
    int old_src_dev = side_device(old->src, &old_src), old_dst_dev = side_device(old->dst, &old_dst);
    int new_src_dev = side_device(next->src, &new_src), new_dst_dev = side_device(next->dst, &new_dst);
    return old_src == new_src && old_dst == new_dst && old_src_dev == new_src_dev && old_dst_dev == new_dst_dev;
}

static bool body_update_allowed(const sim_body_t *old, const sim_body_t *next);

/* cuGraphExecUpdate's limits on memcpy, memset and conditional nodes
 * (cuda.h). */
static bool update_allowed(const sim_cmd_t *old, const sim_cmd_t *next)
{
    sim_mem_kind_t old_kind, new_kind;
    switch (old->kind) {
    case SIM_CMD_COPY:
        return copy_mapping_same(&old->u.copy, &next->u.copy);
    case SIM_CMD_SET:
        return side_device(old->u.set.dst, &old_kind) == side_device(next->u.set.dst, &new_kind) &&
               old_kind == new_kind && set_shape_allowed(&old->u.set, &next->u.set);
    case SIM_CMD_COND:
        /* "Changing node parameters is not supported"; the bodies follow
         * the rules above, node by node. */
        if (old->u.cond.handle != next->u.cond.handle || old->u.cond.type != next->u.cond.type ||
            old->u.cond.size != next->u.cond.size)
            return false;
        for (unsigned b = 0; b < old->u.cond.size; b++)
            if (!body_update_allowed(&old->u.cond.bodies[b], &next->u.cond.bodies[b]))
                return false;
        return true;
    case SIM_CMD_GRAPH:
        return body_update_allowed(&old->u.graph, &next->u.graph);
    default:
        return true;
    }
}

/* Same nodes in the same order, each updatable (edges inside bodies are
 * not compared). */
static bool body_update_allowed(const sim_body_t *old, const sim_body_t *next)
{
    if (old->count != next->count)
        return false;
    for (size_t i = 0; i < old->count; i++)
        if (old->cmds[i].kind != next->cmds[i].kind || !update_allowed(&old->cmds[i], &next->cmds[i]))
            return false;
    return true;
}

SIM_EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    CUresult entry = SIM_ENTER(cuGraphExecMemcpyNodeSetParams, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (copyParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_copy_desc_t copy;
    bool empty;
    CUresult result = sim_copy_desc_from_3d(copyParams, &copy, &empty);
    if (result != CUDA_SUCCESS)
        return result;
    /* Zero-length and multidimensional operations are refused. */
    if (empty || copy.height != 1 || copy.depth != 1)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_submit_lock);
    sim_cmd_t *cmd = exec_cmd_of(hGraphExec, hNode, SIM_CMD_COPY);
    result = CUDA_ERROR_INVALID_VALUE;
    if (cmd != NULL && cmd->u.copy.height == 1 && cmd->u.copy.depth == 1) {
        /* The operands' mappings may not change: same kind of memory on
         * the same device on each side. */
        if (copy_mapping_same(&cmd->u.copy, &copy)) {
            cmd->u.copy = copy;
            result = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&sim_submit_lock);
    return result;
}

SIM_EXPORT CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    CUresult entry = SIM_ENTER(cuGraphExecMemsetNodeSetParams, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (memsetParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    const CUDA_MEMSET_NODE_PARAMS *p = memsetParams;
    sim_set_desc_t set;
    bool empty;
    CUresult result = sim_set_desc_build(p->dst, p->pitch, p->value, p->elementSize, p->width, p->height, &set, &empty);
    if (result != CUDA_SUCCESS)
        return result;
    if (empty)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_submit_lock);
    sim_cmd_t *cmd = exec_cmd_of(hGraphExec, hNode, SIM_CMD_SET);
    result = CUDA_ERROR_INVALID_VALUE;
    if (cmd != NULL) {
        const sim_set_desc_t *old = &cmd->u.set;
        sim_mem_kind_t old_kind, new_kind;
        bool same_mapping = side_device(old->dst, &old_kind) == side_device(set.dst, &new_kind) && old_kind == new_kind;
        if (same_mapping && set_shape_allowed(old, &set)) {
            cmd->u.set = set;
            result = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&sim_submit_lock);
    return result;
}

/* A batch-mem-op node (captured `cuStreamWriteValue*`/`WaitValue*`/
 * `BatchMemOp`): its operations, in the node's own array. */
SIM_EXPORT CUresult cuGraphBatchMemOpNodeGetParams(CUgraphNode hNode, CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams_out)
{
    CUresult entry = SIM_ENTER(cuGraphBatchMemOpNodeGetParams, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraphNode node = node_from_handle(hNode);
    if (node == NULL || nodeParams_out == NULL || node->cmd.kind != SIM_CMD_MEMOP)
        return CUDA_ERROR_INVALID_VALUE;
    memset(nodeParams_out, 0, sizeof(*nodeParams_out));
    nodeParams_out->count = node->cmd.u.memop.count;
    nodeParams_out->paramArray = node->cmd.u.memop.ops;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Child graph and conditional nodes.
 *
 * A child graph node owns a clone of the child graph; a conditional node
 * owns the body graphs the driver creates with it (empty, for the program
 * to fill). At instantiation each becomes one command whose bodies are
 * the graphs' commands in creation order, run inline on the stream's
 * worker: a child graph's every time, a conditional node's as its handle's
 * value says when it runs (IF: body 0 when non-zero, else body 1 if any;
 * WHILE: body 0 again and again while non-zero; SWITCH: body n for value
 * n). The value is set by device code (the built-in `sim_set_conditional`
 * or `sim_while_countdown`, standing for `cudaGraphSetConditional`), and
 * with CU_GRAPH_COND_ASSIGN_DEFAULT reset to the default at the start of
 * every launch.
 * ------------------------------------------------------------------------ */

#define SIM_COND_HANDLE_MAGIC 0x434f4e44u /* "COND" */

bool sim_cond_set(uint64_t handle, unsigned value)
{
    sim_cond_handle_t *h = (sim_cond_handle_t *)(uintptr_t)handle;
    if (h == NULL || h->magic != SIM_COND_HANDLE_MAGIC)
        return false;
    atomic_store(&h->value, value);
    return true;
}

static sim_cond_handle_t *cond_handle_from(CUgraphConditionalHandle handle)
{
    sim_cond_handle_t *h = (sim_cond_handle_t *)(uintptr_t)handle;
    return h != NULL && h->magic == SIM_COND_HANDLE_MAGIC ? h : NULL;
}

SIM_EXPORT CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out, CUgraph hGraph, CUcontext ctx,
                                                   unsigned int defaultLaunchValue, unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuGraphConditionalHandleCreate, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pHandle_out == NULL || graph_from_handle(hGraph) == NULL || (flags & ~CU_GRAPH_COND_ASSIGN_DEFAULT) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_cond_handle_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    h->magic = SIM_COND_HANDLE_MAGIC;
    h->graph = hGraph;
    h->default_value = defaultLaunchValue;
    h->flags = flags;
    atomic_store(&h->value, defaultLaunchValue);
    *pHandle_out = (CUgraphConditionalHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

/* A deep copy of `graph` (edges by position; bodies of its own child and
 * conditional nodes copied too). Caller holds `sim_submit_lock`. */
static CUgraph graph_clone(CUgraph graph)
{
    CUgraph copy = graph_new();
    if (copy == NULL)
        return NULL;
    copy->parent = graph->parent;
    for (size_t i = 0; i < graph->count; i++) {
        CUgraphNode from = graph->nodes[i];
        sim_cmd_t cmd;
        CUgraphNode deps[from->dep_count ? from->dep_count : 1];
        for (size_t d = 0; d < from->dep_count; d++)
            deps[d] = copy->nodes[from->deps[d]->index];
        if (sim_cmd_clone(&cmd, &from->cmd) != CUDA_SUCCESS)
            goto fail;
        CUgraphNode node = graph_add(copy, &cmd, deps, from->dep_count);
        if (node == NULL) {
            sim_cmd_release(&cmd);
            goto fail;
        }
        if (from->graph_count > 0) {
            node->graphs = calloc(from->graph_count, sizeof(CUgraph));
            if (node->graphs == NULL)
                goto fail;
            for (unsigned g = 0; g < from->graph_count; g++) {
                node->graphs[g] = graph_clone(from->graphs[g]);
                if (node->graphs[g] == NULL)
                    goto fail;
                node->graph_count++;
            }
        }
    }
    return copy;
fail:
    graph_free(copy);
    return NULL;
}

/* Whether `graph` holds only what a conditional body may (kernel, empty,
 * memset, memcpy, child graph and conditional nodes, recursively). */
static bool body_kinds_allowed(CUgraph graph, bool conditional)
{
    for (size_t i = 0; i < graph->count; i++) {
        CUgraphNode node = graph->nodes[i];
        switch (node->cmd.kind) {
        case SIM_CMD_KERNEL:
        case SIM_CMD_EMPTY:
        case SIM_CMD_SET:
        case SIM_CMD_COPY:
            break;
        case SIM_CMD_HOST:
        case SIM_CMD_MEMOP:
            if (conditional)
                return false;
            break;
        case SIM_CMD_GRAPH:
        case SIM_CMD_COND:
            for (unsigned g = 0; g < node->graph_count; g++)
                if (!body_kinds_allowed(node->graphs[g], conditional))
                    return false;
            break;
        default: /* event nodes cannot run inline on a worker */
            return false;
        }
    }
    return true;
}

static CUresult graph_build_body(CUgraph graph, sim_body_t *body, sim_cmd_t *reset)
{
    body->count = 0;
    body->cmds = calloc(graph->count ? graph->count : 1, sizeof(*body->cmds));
    if (body->cmds == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < graph->count; i++) {
        CUresult result = node_build_cmd(graph->nodes[i], &body->cmds[i], reset);
        if (result != CUDA_SUCCESS) {
            sim_body_release(body);
            return result;
        }
        body->count++;
    }
    return CUDA_SUCCESS;
}

/* Adds a handle to the launch-start reset (no duplicates). */
static CUresult reset_add(sim_cmd_t *reset, sim_cond_handle_t *h)
{
    if ((h->flags & CU_GRAPH_COND_ASSIGN_DEFAULT) == 0)
        return CUDA_SUCCESS;
    if (reset->kind != SIM_CMD_COND_RESET) {
        memset(reset, 0, sizeof(*reset));
        reset->kind = SIM_CMD_COND_RESET;
    }
    for (size_t i = 0; i < reset->u.reset.count; i++)
        if (reset->u.reset.handles[i] == h)
            return CUDA_SUCCESS;
    sim_cond_handle_t **grown =
        realloc(reset->u.reset.handles, (reset->u.reset.count + 1) * sizeof(*reset->u.reset.handles));
    if (grown == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    grown[reset->u.reset.count++] = h;
    reset->u.reset.handles = grown;
    return CUDA_SUCCESS;
}

/* The command an executable graph runs for `node`: a copy of its command,
 * with the bodies of a child graph or conditional node built in. */
static CUresult node_build_cmd(CUgraphNode node, sim_cmd_t *out, sim_cmd_t *reset)
{
    if (node->cmd.kind == SIM_CMD_GRAPH) {
        if (!body_kinds_allowed(node->graphs[0], false))
            return CUDA_ERROR_NOT_SUPPORTED; /* event nodes inside a child graph */
        memset(out, 0, sizeof(*out));
        out->kind = SIM_CMD_GRAPH;
        return graph_build_body(node->graphs[0], &out->u.graph, reset);
    }
    if (node->cmd.kind == SIM_CMD_COND) {
        for (unsigned g = 0; g < node->graph_count; g++)
            if (!body_kinds_allowed(node->graphs[g], true))
                return CUDA_ERROR_INVALID_VALUE;
        CUresult result = reset_add(reset, node->cmd.u.cond.handle);
        if (result != CUDA_SUCCESS)
            return result;
        *out = node->cmd;
        out->u.cond.bodies = calloc(node->graph_count, sizeof(sim_body_t));
        if (out->u.cond.bodies == NULL) {
            memset(out, 0, sizeof(*out));
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        for (unsigned g = 0; g < node->graph_count; g++) {
            result = graph_build_body(node->graphs[g], &out->u.cond.bodies[g], reset);
            if (result != CUDA_SUCCESS) {
                out->u.cond.size = g;
                sim_cmd_release(out);
                return result;
            }
        }
        return CUDA_SUCCESS;
    }
    return sim_cmd_clone(out, &node->cmd);
}

/* Whether `handle` was created for `graph` or a graph it is a body of. */
static bool handle_belongs(const sim_cond_handle_t *h, CUgraph graph)
{
    for (CUgraph g = graph; g != NULL; g = g->parent)
        if (h->graph == g)
            return true;
    return false;
}

static CUresult add_graph_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *dependencies, size_t count,
                               sim_cmd_t *cmd, CUgraph *graphs, unsigned graph_count)
{
    pthread_mutex_lock(&sim_submit_lock);
    CUgraphNode node = graph_add(graph, cmd, dependencies, count);
    if (node != NULL) {
        node->graphs = graphs;
        node->graph_count = graph_count;
    }
    pthread_mutex_unlock(&sim_submit_lock);
    if (node == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = node;
    return CUDA_SUCCESS;
}

static CUresult add_child_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *dependencies, size_t count,
                               CUgraph child)
{
    CUgraph from = graph_from_handle(child);
    if (from == NULL || from == graph)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraph *graphs = malloc(sizeof(*graphs));
    if (graphs == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&sim_submit_lock);
    graphs[0] = graph_clone(from);
    pthread_mutex_unlock(&sim_submit_lock);
    if (graphs[0] == NULL) {
        free(graphs);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    graphs[0]->parent = graph;
    sim_cmd_t cmd = {.kind = SIM_CMD_GRAPH};
    CUresult result = add_graph_node(out, graph, dependencies, count, &cmd, graphs, 1);
    if (result != CUDA_SUCCESS) {
        graph_free(graphs[0]);
        free(graphs);
    }
    return result;
}

static CUresult add_conditional_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *dependencies, size_t count,
                                     CUDA_CONDITIONAL_NODE_PARAMS *p)
{
    sim_cond_handle_t *h = cond_handle_from(p->handle);
    if (h == NULL || !handle_belongs(h, graph))
        return CUDA_ERROR_INVALID_VALUE;
    bool size_ok = (p->type == CU_GRAPH_COND_TYPE_IF && (p->size == 1 || p->size == 2)) ||
                   (p->type == CU_GRAPH_COND_TYPE_WHILE && p->size == 1) ||
                   (p->type == CU_GRAPH_COND_TYPE_SWITCH && p->size >= 1);
    if (!size_ok)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_ctx_valid(p->ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    CUgraph *graphs = calloc(p->size, sizeof(*graphs));
    if (graphs == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned g = 0; g < p->size; g++) {
        graphs[g] = graph_new();
        if (graphs[g] == NULL) {
            for (unsigned k = 0; k < g; k++)
                graph_free(graphs[k]);
            free(graphs);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        graphs[g]->parent = graph;
    }
    sim_cmd_t cmd = {.kind = SIM_CMD_COND};
    cmd.u.cond.handle = h;
    cmd.u.cond.type = p->type;
    cmd.u.cond.size = p->size;
    CUresult result = add_graph_node(out, graph, dependencies, count, &cmd, graphs, p->size);
    if (result != CUDA_SUCCESS) {
        for (unsigned g = 0; g < p->size; g++)
            graph_free(graphs[g]);
        free(graphs);
        return result;
    }
    /* "CUDA-owned array populated with conditional node child graphs". */
    p->phGraph_out = (*out)->graphs;
    return CUDA_SUCCESS;
}

static CUresult add_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                         size_t numDependencies, CUgraphNodeParams *p)
{
    CUgraph graph = graph_from_handle(hGraph);
    if (phGraphNode == NULL || graph == NULL || p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result = check_deps(graph, dependencies, numDependencies);
    if (result != CUDA_SUCCESS)
        return result;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS k;
        memset(&k, 0, sizeof(k));
        k.func = p->kernel.func;
        k.kern = p->kernel.kern;
        k.gridDimX = p->kernel.gridDimX;
        k.gridDimY = p->kernel.gridDimY;
        k.gridDimZ = p->kernel.gridDimZ;
        k.blockDimX = p->kernel.blockDimX;
        k.blockDimY = p->kernel.blockDimY;
        k.blockDimZ = p->kernel.blockDimZ;
        k.sharedMemBytes = p->kernel.sharedMemBytes;
        k.kernelParams = p->kernel.kernelParams;
        k.extra = p->kernel.extra;
        return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &k);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return cuGraphAddMemcpyNode(phGraphNode, hGraph, dependencies, numDependencies, &p->memcpy.copyParams,
                                    p->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m = {.dst = p->memset.dst, .pitch = p->memset.pitch, .value = p->memset.value,
                                     .elementSize = p->memset.elementSize, .width = p->memset.width,
                                     .height = p->memset.height};
        return cuGraphAddMemsetNode(phGraphNode, hGraph, dependencies, numDependencies, &m, p->memset.ctx);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY: {
        sim_cmd_t cmd = {.kind = SIM_CMD_EMPTY};
        return add_graph_node(phGraphNode, graph, dependencies, numDependencies, &cmd, NULL, 0);
    }
    case CU_GRAPH_NODE_TYPE_GRAPH:
        return add_child_node(phGraphNode, graph, dependencies, numDependencies, p->graph.graph);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return add_conditional_node(phGraphNode, graph, dependencies, numDependencies, &p->conditional);
    default:
        /* Host, event, semaphore, allocation and mem-op nodes are made by
         * capture or their own calls in simcuda. */
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

SIM_EXPORT CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    CUresult entry = SIM_ENTER(cuGraphAddNode, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

SIM_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                      const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                      CUgraphNodeParams *nodeParams)
{
    CUresult entry = SIM_ENTER(cuGraphAddNode_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    /* Only default edges: simcuda runs a graph in creation order. */
    for (size_t i = 0; dependencyData != NULL && i < numDependencies; i++)
        if (dependencyData[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || dependencyData[i].from_port != 0 ||
            dependencyData[i].to_port != 0)
            return CUDA_ERROR_NOT_SUPPORTED;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

SIM_EXPORT CUresult cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                             size_t numDependencies, CUgraph childGraph)
{
    CUresult entry = SIM_ENTER(cuGraphAddChildGraphNode, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraph graph = graph_from_handle(hGraph);
    if (phGraphNode == NULL || graph == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result = check_deps(graph, dependencies, numDependencies);
    if (result != CUDA_SUCCESS)
        return result;
    return add_child_node(phGraphNode, graph, dependencies, numDependencies, childGraph);
}

SIM_EXPORT CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
    CUresult entry = SIM_ENTER(cuGraphChildGraphNodeGetGraph, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraphNode node = node_from_handle(hNode);
    if (node == NULL || phGraph == NULL || node->cmd.kind != SIM_CMD_GRAPH)
        return CUDA_ERROR_INVALID_VALUE;
    *phGraph = node->graphs[0]; /* the node's own clone, as documented */
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraph childGraph)
{
    CUresult entry = SIM_ENTER(cuGraphExecChildGraphNodeSetParams, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    CUgraph child = graph_from_handle(childGraph);
    if (child == NULL || !body_kinds_allowed(child, false))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_submit_lock);
    sim_cmd_t *cmd = exec_cmd_of(hGraphExec, hNode, SIM_CMD_GRAPH);
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    sim_cmd_t next = {.kind = SIM_CMD_GRAPH};
    sim_cmd_t reset = {.kind = SIM_CMD_EMPTY};
    if (cmd != NULL && graph_build_body(child, &next.u.graph, &reset) == CUDA_SUCCESS) {
        /* The topology (node count, kinds, order) must match; the update
         * rules apply node by node. */
        if (update_allowed(cmd, &next) && reset.kind == SIM_CMD_EMPTY) {
            sim_cmd_release(cmd);
            *cmd = next;
            next.kind = SIM_CMD_EMPTY;
            result = CUDA_SUCCESS;
        }
        sim_cmd_release(&next);
        sim_cmd_release(&reset);
    }
    pthread_mutex_unlock(&sim_submit_lock);
    return result;
}

/* The CUDA 10 forms, whose parameters lack the kernel and context fields
 * of CUDA 12's: libraries built against old headers (cuBLASLt) look them
 * up by name. */
SIM_EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    CUresult entry = SIM_ENTER(cuGraphKernelNodeGetParams, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (nodeParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS full;
    CUresult result = kernel_node_get_params(hNode, &full);
    if (result != CUDA_SUCCESS)
        return result;
    nodeParams->func = full.func;
    nodeParams->gridDimX = full.gridDimX;
    nodeParams->gridDimY = full.gridDimY;
    nodeParams->gridDimZ = full.gridDimZ;
    nodeParams->blockDimX = full.blockDimX;
    nodeParams->blockDimY = full.blockDimY;
    nodeParams->blockDimZ = full.blockDimZ;
    nodeParams->sharedMemBytes = full.sharedMemBytes;
    nodeParams->kernelParams = full.kernelParams;
    nodeParams->extra = full.extra;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    CUresult entry = SIM_ENTER(cuGraphExecKernelNodeSetParams, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (nodeParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS full = {
        .func = nodeParams->func,
        .gridDimX = nodeParams->gridDimX,
        .gridDimY = nodeParams->gridDimY,
        .gridDimZ = nodeParams->gridDimZ,
        .blockDimX = nodeParams->blockDimX,
        .blockDimY = nodeParams->blockDimY,
        .blockDimZ = nodeParams->blockDimZ,
        .sharedMemBytes = nodeParams->sharedMemBytes,
        .kernelParams = nodeParams->kernelParams,
        .extra = nodeParams->extra,
    };
    return exec_kernel_node_set_params(hGraphExec, hNode, &full);
}

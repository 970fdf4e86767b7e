/* sim_event.c: events and cross-stream waits.
 *
 * An event remembers its most recent record as a dependency ("stream S has
 * completed operation N", with the modeled time of that point). Querying,
 * synchronising and waiting all refer to that record; `cuStreamWaitEvent`
 * copies it at the time of the call, so a later re-record does not affect
 * an earlier wait. During capture a record remembers the capture's nodes
 * instead, and a wait on it joins the waiting stream into the capture.
 * Entry points: `sim_event_record_locked`, `sim_stream_wait_event_locked`
 * and the `cuEvent*` functions.
 */
#include "sim_exec.h"

#include <stdlib.h>
#include <string.h>

void sim_event_ref(struct CUevent_st *event)
{
    atomic_fetch_add(&event->refs, 1);
}

void sim_event_unref(struct CUevent_st *event)
{
    if (atomic_fetch_sub(&event->refs, 1) != 1)
        return;
    sim_dep_release(&event->record);
    free(event->capture_nodes);
    free(event);
}

/* Live events, so that destroying a context can destroy its events as the
 * real driver does (a later use of one is CUDA_ERROR_INVALID_HANDLE, never
 * a silent success). Guarded by `live_events_lock`, a leaf. */
static pthread_mutex_t live_events_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUevent_st **live_events;
static size_t live_event_count, live_event_capacity;

static int live_events_add(struct CUevent_st *event)
{
    int rc = 0;
    pthread_mutex_lock(&live_events_lock);
    if (live_event_count == live_event_capacity) {
        size_t capacity = live_event_capacity ? live_event_capacity * 2 : 64;
        struct CUevent_st **grown = realloc(live_events, capacity * sizeof(*grown));
        if (grown == NULL) {
            rc = -1;
            goto out;
        }
        live_events = grown;
        live_event_capacity = capacity;
    }
    live_events[live_event_count++] = event;
out:
    pthread_mutex_unlock(&live_events_lock);
    return rc;
}

/* Takes `event` off the live list; false when it was not there (destroyed
 * already, with its context). */
static bool live_events_remove(struct CUevent_st *event)
{
    bool found = false;
    pthread_mutex_lock(&live_events_lock);
    for (size_t i = 0; i < live_event_count && !found; i++) {
        if (live_events[i] == event) {
            live_events[i] = live_events[--live_event_count];
            found = true;
        }
    }
    pthread_mutex_unlock(&live_events_lock);
    return found;
}

void sim_events_ctx_destroying(CUcontext ctx)
{
    for (;;) {
        struct CUevent_st *victim = NULL;
        pthread_mutex_lock(&live_events_lock);
        for (size_t i = 0; i < live_event_count && victim == NULL; i++) {
            if (live_events[i]->ctx == ctx) {
                victim = live_events[i];
                live_events[i] = live_events[--live_event_count];
            }
        }
        pthread_mutex_unlock(&live_events_lock);
        if (victim == NULL)
            return;
        pthread_mutex_lock(&sim_submit_lock);
        victim->magic = 0;
        pthread_mutex_unlock(&sim_submit_lock);
        sim_event_unref(victim);
    }
}

struct CUevent_st *sim_event_from_handle(CUevent handle)
{
    if (handle == NULL || handle->magic != SIM_EVENT_MAGIC)
        return NULL;
    return handle;
}

void sim_event_stamp(struct CUevent_st *event, uint64_t gen)
{
    atomic_store(&event->wall_ns, sim_clock_wall_ns());
    atomic_store(&event->stamped_gen, gen);
}

CUresult sim_event_record_locked(struct CUevent_st *event, struct CUstream_st *stream)
{
    if (stream->capture != NULL) {
        /* Captured: later waits depend on the capture's current nodes. */
        CUgraphNode *nodes = NULL;
        if (stream->frontier_count > 0) {
            nodes = malloc(stream->frontier_count * sizeof(*nodes));
            if (nodes == NULL)
                return CUDA_ERROR_OUT_OF_MEMORY;
            memcpy(nodes, stream->frontier, stream->frontier_count * sizeof(*nodes));
        }
        free(event->capture_nodes);
        event->capture_nodes = nodes;
        event->capture_node_count = stream->frontier_count;
        event->capture_id = sim_capture_id(stream->capture);
        return CUDA_SUCCESS;
    }
    sim_event_ref(event);
    event->gen++;
    sim_cmd_t cmd = {.kind = SIM_CMD_EVENT_RECORD, .u.event = event};
    CUresult result = sim_submit_locked(stream, &cmd);
    if (result != CUDA_SUCCESS)
        return result;
    sim_dep_release(&event->record);
    event->record = sim_stream_tail_dep(stream);
    event->recorded = true;
    event->capture_id = 0;
    return CUDA_SUCCESS;
}

CUresult sim_stream_wait_event_locked(struct CUstream_st *stream, struct CUevent_st *event, unsigned flags)
{
    if (event->capture_id != 0) {
        struct sim_capture_s *capture = sim_capture_find_locked(event->capture_id);
        if (capture != NULL) {
            if (stream->capture != NULL && stream->capture != capture) {
                sim_capture_invalidate_locked(stream);
                return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
            }
            return sim_capture_join_locked(stream, capture, event->capture_nodes, event->capture_node_count);
        }
        /* Recorded in a capture that has ended: nothing to wait for. */
        return CUDA_SUCCESS;
    }
    if (stream->capture != NULL) {
        if (!event->recorded)
            return CUDA_SUCCESS;
        if ((flags & CU_EVENT_WAIT_EXTERNAL) == 0) {
            /* Depending on work outside the capture breaks its isolation. */
            sim_capture_invalidate_locked(stream);
            return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        }
        sim_event_ref(event);
        sim_cmd_t cmd = {.kind = SIM_CMD_EVENT_WAIT, .u.event = event};
        return sim_capture_record_locked(stream, &cmd);
    }
    if (!event->recorded)
        return CUDA_SUCCESS; /* never recorded: a no-op, as documented */
    sim_event_ref(event);
    sim_cmd_t cmd = {.kind = SIM_CMD_EVENT_WAIT, .u.event = event};
    return sim_submit_locked(stream, &cmd);
}

/* ------------------------------------------------------------------------
 * The cuEvent* API
 * ------------------------------------------------------------------------ */

SIM_EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    CUresult entry = SIM_ENTER(cuEventCreate, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    const unsigned valid = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (phEvent == NULL || (Flags & ~valid) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* Interprocess events must also disable timing. */
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    struct CUevent_st *event = calloc(1, sizeof(*event));
    if (event == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    event->magic = SIM_EVENT_MAGIC;
    atomic_init(&event->refs, 1);
    event->flags = Flags;
    event->ctx = ctx;
    if (live_events_add(event) != 0) {
        free(event);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phEvent = event;
    return CUDA_SUCCESS;
}

static CUresult event_destroy(CUevent handle)
{
    struct CUevent_st *event = sim_event_from_handle(handle);
    if (event == NULL || !live_events_remove(event))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sim_submit_lock);
    event->magic = 0;
    pthread_mutex_unlock(&sim_submit_lock);
    /* Pending records and waits hold their own references. */
    sim_event_unref(event);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
    CUresult entry = SIM_ENTER(cuEventDestroy_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return event_destroy(hEvent);
}

SIM_EXPORT CUresult cuEventDestroy(CUevent hEvent)
{
    CUresult entry = SIM_ENTER(cuEventDestroy, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return event_destroy(hEvent);
}

static CUresult event_record(CUevent handle, CUstream stream_handle, unsigned flags, bool per_thread)
{
    if ((flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *event = sim_event_from_handle(handle);
    if (event == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult result;
    struct CUstream_st *stream = sim_stream_resolve(stream_handle, per_thread, &result);
    if (stream == NULL)
        return result;
    /* cuda.h: "If hStream ... and hEvent belong to different contexts,
     * CUDA_ERROR_INVALID_HANDLE is returned" (an H100 answers 400 too). */
    if (event->ctx != stream->ctx)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sim_submit_lock);
    if ((flags & CU_EVENT_RECORD_EXTERNAL) && stream->capture != NULL) {
        /* An external record node: replays record the event for real. */
        sim_event_ref(event);
        sim_cmd_t cmd = {.kind = SIM_CMD_EVENT_RECORD, .u.event = event};
        result = sim_capture_record_locked(stream, &cmd);
    } else {
        result = sim_event_record_locked(event, stream);
    }
    pthread_mutex_unlock(&sim_submit_lock);
    return result;
}

SIM_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuEventRecord, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return event_record(hEvent, hStream, 0, false);
}

SIM_EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuEventRecord_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return event_record(hEvent, hStream, 0, true);
}

SIM_EXPORT CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuEventRecordWithFlags, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return event_record(hEvent, hStream, flags, false);
}

SIM_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuEventRecordWithFlags_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return event_record(hEvent, hStream, flags, true);
}

/* Copies the event's latest record (with its own reference), or reports
 * that there is none. */
static bool event_snapshot(struct CUevent_st *event, sim_dep_t *out, uint64_t *gen)
{
    pthread_mutex_lock(&sim_submit_lock);
    bool recorded = event->recorded;
    if (recorded) {
        *out = event->record;
        sim_stream_ref(out->stream);
        *gen = event->gen;
    }
    pthread_mutex_unlock(&sim_submit_lock);
    return recorded;
}

SIM_EXPORT CUresult cuEventQuery(CUevent hEvent)
{
    CUresult entry = SIM_ENTER(cuEventQuery, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    struct CUevent_st *event = sim_event_from_handle(hEvent);
    if (event == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_dep_t dep;
    uint64_t gen;
    if (!event_snapshot(event, &dep, &gen))
        return CUDA_SUCCESS; /* never recorded: complete */
    /* With host costs, on the modeled clock: a GPU would not yet answer
     * done to a host that has not reached the work's end, and would to one
     * that has, however far behind the simulator's worker runs. */
    bool done = sim_dep_polled_done(&dep, SIM_ID(cuEventQuery));
    sim_dep_release(&dep);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    CUresult entry = SIM_ENTER(cuEventSynchronize, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    struct CUevent_st *event = sim_event_from_handle(hEvent);
    if (event == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_dep_t dep;
    uint64_t gen;
    if (!event_snapshot(event, &dep, &gen))
        return CUDA_SUCCESS;
    sim_dep_wait(&dep);
    sim_clock_host_wait(dep.vt_ns);
    sim_dep_release(&dep);
    return CUDA_SUCCESS;
}

static CUresult event_elapsed(float *ms, CUevent start_handle, CUevent end_handle, sim_api_id_t id)
{
    if (ms == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *start = sim_event_from_handle(start_handle);
    struct CUevent_st *end = sim_event_from_handle(end_handle);
    if (start == NULL || end == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_dep_t start_dep, end_dep;
    uint64_t start_gen, end_gen;
    if (!event_snapshot(start, &start_dep, &start_gen))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!event_snapshot(end, &end_dep, &end_gen)) {
        sim_dep_release(&start_dep);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    CUresult result = CUDA_SUCCESS;
    /* Done as a poll says (`cuEventQuery`): on the modeled clock with host
     * costs, once the caller's clock has passed both. */
    if (!sim_dep_polled_done(&start_dep, id) || !sim_dep_polled_done(&end_dep, id)) {
        result = CUDA_ERROR_NOT_READY;
    } else if (sim_clock_is_virtual()) {
        *ms = (float)(((double)end_dep.vt_ns - (double)start_dep.vt_ns) / 1e6);
    } else if (atomic_load(&start->stamped_gen) != start_gen || atomic_load(&end->stamped_gen) != end_gen) {
        /* Re-recorded while we looked: the newer record is not done. */
        result = CUDA_ERROR_NOT_READY;
    } else {
        double diff = (double)atomic_load(&end->wall_ns) - (double)atomic_load(&start->wall_ns);
        *ms = (float)(diff / 1e6);
    }
    sim_dep_release(&start_dep);
    sim_dep_release(&end_dep);
    return result;
}

SIM_EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    CUresult entry = SIM_ENTER(cuEventElapsedTime, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return event_elapsed(pMilliseconds, hStart, hEnd, SIM_ID(cuEventElapsedTime));
}

SIM_EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    CUresult entry = SIM_ENTER(cuEventElapsedTime_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return event_elapsed(pMilliseconds, hStart, hEnd, SIM_ID(cuEventElapsedTime_v2));
}

static CUresult stream_wait_event(CUstream stream_handle, CUevent event_handle, unsigned flags, bool per_thread)
{
    if ((flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *event = sim_event_from_handle(event_handle);
    if (event == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult result;
    struct CUstream_st *stream = sim_stream_resolve(stream_handle, per_thread, &result);
    if (stream == NULL)
        return result;
    pthread_mutex_lock(&sim_submit_lock);
    result = sim_stream_wait_event_locked(stream, event, flags);
    pthread_mutex_unlock(&sim_submit_lock);
    return result;
}

SIM_EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    CUresult entry = SIM_ENTER(cuStreamWaitEvent, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_wait_event(hStream, hEvent, Flags, false);
}

SIM_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    CUresult entry = SIM_ENTER(cuStreamWaitEvent_ptsz, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return stream_wait_event(hStream, hEvent, Flags, true);
}

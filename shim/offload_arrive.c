/* offload_arrive.c: the engine's arrival thread, which makes the driver
 * calls of a restore started ahead of need (a prefetch) off the
 * application's thread: the access grant of its new mapping, its copies in,
 * its content hash, and the events that say it arrived.
 *
 * A grant (cuMemSetAccess) costs the host 42 us on an H100 whatever the
 * size, and every restore needs one after its map. Made on the thread that
 * launches, the grants of a pass were half of that thread's own work in the
 * sweep's LLM at 25%, ratio 1 (46 a pass, 1.9 ms of 6.7): the launches came
 * late and the GPU ran out of queued work. With the grants free, the cell
 * took 1.030 x the bound instead of 1.080 (simcuda's virtual clock).
 *
 * The engine fills a job under its lock while it restores (`vs_arrive_open`,
 * then the calls the restore would make, recorded instead of made) and
 * hands it over (`vs_arrive_hand_over`); the thread makes the calls in
 * order, on the device's host-to-device stream, so that the copies queue
 * there in the order the engine handed them over. The engine treats the
 * region as arriving at once. Whoever needs what a job does waits for it
 * first (`vs_arrive_join`): the stream waits for its copy, the reading of
 * its events, an unmap or a free of its range, and any copy the engine
 * queues on the host-to-device stream itself (`vs_arrive_join_all`, so that
 * the stream's order never depends on the two threads' timing). A job that
 * failed is finished by the join, on the joining thread.
 *
 * The hand-offs are events, as for the retire thread (offload_retire.c):
 * the engine records `handed` on a stream that runs nothing else, the
 * thread waits for it before its calls and records `recorded` on another
 * when it is done, and a join waits for `recorded`. On the simulated
 * driver's virtual clock each thread keeps its own time: the thread never
 * calls before the hand-over, a join never ends before the thread's calls,
 * and the joins happen where the engine decides, never where a race does.
 * (The restore hashes it launches share the compute engine with the
 * application's kernels, where the simulated driver places work in the
 * order the threads submit it: one sweep cell moves between two plans run
 * to run; docs/benchmarks.md, "The sweep's table".) On a GPU the hand-offs cost a
 * record and a few microseconds of the thread's time.
 *
 * Where no thread can be had (pthread_create fails, a forked child) or no
 * job can be made (memory, events), the engine makes the calls itself.
 *
 * Locks: the arrival lock is a leaf, taken under the engine lock or alone
 * by the thread; no driver call is made under it.
 */
#include "offload_internal.h"
#include "offload_device.h"
#include "offload_streams.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "log.h"
#include "tunables.h"

typedef enum vs_arrive_op_kind_e {
    VS_ARRIVE_GRANT,
    VS_ARRIVE_COPY,
    VS_ARRIVE_HASH,
    VS_ARRIVE_RECORD,
} vs_arrive_op_kind_t;

typedef struct vs_arrive_op_s {
    vs_arrive_op_kind_t kind;
    CUdeviceptr at;
    uint64_t bytes;
    union {
        struct {
            CUmemAccessDesc access[VS_MAX_DEVICES];
            size_t count;
        } grant;
        const void *host; /* COPY: the source, pinned */
        struct {
            vs_device_hasher_t *hasher;
            unsigned slot;
        } hash;
        CUevent event; /* RECORD */
    } u;
} vs_arrive_op_t;

struct vs_arrival_s {
    struct vs_arrival_s *next;
    uint64_t ticket; /* handed over in this order, from 1 */
    CUcontext ctx;
    CUstream stream;          /* the device's host-to-device stream */
    CUstream handed_stream;   /* records `handed` alone */
    CUstream recorded_stream; /* records `recorded` alone */
    CUevent handed, recorded;
    bool recorded_ok; /* false: the thread could not record `recorded` */
    uintptr_t base;   /* the region's range: what the job grants and fills */
    uint64_t bytes;
    vs_arrive_op_t *ops;
    size_t count, capacity;
    size_t made;     /* ops the thread made; < count when one failed */
    CUresult rc;     /* the failed op's answer */
    bool finished;   /* the thread is done with it */
};

static struct {
    vs_worker_t worker;
    /* Handed over, oldest first; the thread works on the first not
     * finished. */
    vs_arrival_t *head, *tail;
    size_t count;
    uint64_t next_ticket;  /* engine lock */
    uint64_t joined_up_to; /* every job up to this ticket is joined (engine lock) */
} vs_arrive = {
    .worker = VS_WORKER_INIT,
};

/* Makes ops [from, count) of `j` with the current thread's calls; the
 * first failure stops them (a copy into a range not granted would fault).
 * Returns how many were made. `VS_ENGINE_CALL` on the engine's side, so
 * that the host's time is counted there. */
static size_t vs_arrive_make(vs_arrival_t *j, size_t from, CUresult *rc_out, bool engine)
{
    CUresult rc = CUDA_SUCCESS;
    size_t i = from;
    for (; i < j->count; i++) {
        vs_arrive_op_t *op = &j->ops[i];
        switch (op->kind) {
        case VS_ARRIVE_GRANT:
            rc = engine ? VS_ENGINE_CALL(VS_HOST_VMM, cuMemSetAccess, (op->at, op->bytes, op->u.grant.access, op->u.grant.count))
                        : VS_CALL(cuMemSetAccess, (op->at, op->bytes, op->u.grant.access, op->u.grant.count));
            break;
        case VS_ARRIVE_COPY:
            rc = VS_CALL(cuMemcpyHtoDAsync_v2, (op->at, op->u.host, op->bytes, j->stream));
            break;
        case VS_ARRIVE_HASH:
            rc = vs_device_hash_enqueue(op->u.hash.hasher, op->u.hash.slot, op->at, op->bytes, j->stream);
            break;
        case VS_ARRIVE_RECORD:
            rc = VS_CALL(cuEventRecord, (op->u.event, j->stream));
            break;
        }
        if (rc != CUDA_SUCCESS)
            break;
    }
    *rc_out = rc;
    return i;
}

static void *vs_arrive_main(void *arg)
{
    (void)arg;
    /* The first driver call starts this thread's clock on the simulated
     * driver: made while the engine waits for it (`vs_arrive_start`). */
    CUcontext none = NULL;
    (void)VS_CALL(cuCtxGetCurrent, (&none));
    pthread_mutex_lock(&vs_arrive.worker.lock);
    vs_worker_started(&vs_arrive.worker);
    for (;;) {
        vs_arrival_t *j = vs_arrive.head;
        while (j != NULL && j->finished)
            j = j->next;
        if (j == NULL) {
            if (vs_arrive.worker.stop)
                break;
            pthread_cond_wait(&vs_arrive.worker.work, &vs_arrive.worker.lock);
            continue;
        }
        pthread_mutex_unlock(&vs_arrive.worker.lock);
        /* Not before the engine handed it over (its own time, not a wait
         * of the engine's). */
        (void)VS_CALL(cuEventSynchronize, (j->handed));
        CUresult rc = VS_CALL(cuCtxSetCurrent, (j->ctx));
        size_t made = rc == CUDA_SUCCESS ? vs_arrive_make(j, 0, &rc, false) : 0;
        j->recorded_ok = VS_CALL(cuEventRecord, (j->recorded, j->recorded_stream)) == CUDA_SUCCESS;
        pthread_mutex_lock(&vs_arrive.worker.lock);
        j->made = made;
        j->rc = rc;
        j->finished = true;
        pthread_cond_broadcast(&vs_arrive.worker.finished);
    }
    vs_worker_ended(&vs_arrive.worker);
    pthread_mutex_unlock(&vs_arrive.worker.lock);
    return NULL;
}

/* In a forked child the thread is not there: what was handed to it is
 * dropped (the child's driver state is not the parent's). Arrival lock
 * held. */
static bool vs_arrive_owned(void)
{
    if (vs_worker_owned(&vs_arrive.worker))
        return true;
    vs_arrive.head = vs_arrive.tail = NULL;
    vs_arrive.count = 0;
    return false;
}

/* Starts the thread the first time; whether it runs. Arrival lock held. */
static bool vs_arrive_start(void)
{
    return vs_arrive_owned()
           && vs_worker_start(&vs_arrive.worker, vs_arrive_main, "vramshim-arrive",
                              "restores ahead of need are made on the calling thread");
}

static void vs_arrive_free(vs_arrival_t *j)
{
    if (j->handed != NULL)
        vs_engine_event_put(j->ctx, j->handed);
    if (j->recorded != NULL)
        vs_engine_event_put(j->ctx, j->recorded);
    free(j->ops);
    free(j);
}

vs_arrival_t *vs_arrive_open(vs_engine_device_t *d, uintptr_t base, uint64_t bytes, size_t ops)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (!d->ready || d->arrive_handed == NULL || d->arrive_recorded == NULL)
        return NULL;
    pthread_mutex_lock(&vs_arrive.worker.lock);
    bool running = vs_arrive_start();
    pthread_mutex_unlock(&vs_arrive.worker.lock);
    if (!running)
        return NULL;
    vs_arrival_t *j = calloc(1, sizeof *j);
    if (j == NULL)
        return NULL;
    j->ctx = d->ctx;
    j->stream = d->to_device;
    j->handed_stream = d->arrive_handed;
    j->recorded_stream = d->arrive_recorded;
    j->base = base;
    j->bytes = bytes;
    j->ops = calloc(ops, sizeof *j->ops);
    j->capacity = ops;
    j->handed = vs_engine_event_get(d->ctx);
    j->recorded = vs_engine_event_get(d->ctx);
    if (j->ops == NULL || j->handed == NULL || j->recorded == NULL) {
        vs_arrive_free(j);
        return NULL;
    }
    j->ticket = ++vs_arrive.next_ticket;
    return j;
}

/* The next op of `j` (the job was opened with room for all of them). */
static vs_arrive_op_t *vs_arrive_op(vs_arrival_t *j, vs_arrive_op_kind_t kind, CUdeviceptr at, uint64_t bytes)
{
    VS_ASSERT(j->count < j->capacity);
    if (j->count == j->capacity)
        return NULL;
    vs_arrive_op_t *op = &j->ops[j->count++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->at = at;
    op->bytes = bytes;
    return op;
}

bool vs_arrive_grant(vs_arrival_t *j, CUdeviceptr at, uint64_t bytes, const CUmemAccessDesc *access, size_t count)
{
    VS_ASSERT(count <= VS_MAX_DEVICES);
    vs_arrive_op_t *op = vs_arrive_op(j, VS_ARRIVE_GRANT, at, bytes);
    if (op == NULL)
        return false;
    memcpy(op->u.grant.access, access, count * sizeof *access);
    op->u.grant.count = count;
    return true;
}

bool vs_arrive_copy(vs_arrival_t *j, CUdeviceptr at, const void *host, uint64_t bytes)
{
    vs_arrive_op_t *op = vs_arrive_op(j, VS_ARRIVE_COPY, at, bytes);
    if (op == NULL)
        return false;
    op->u.host = host;
    return true;
}

bool vs_arrive_hash(vs_arrival_t *j, vs_device_hasher_t *hasher, unsigned slot, CUdeviceptr at, uint64_t bytes)
{
    vs_arrive_op_t *op = vs_arrive_op(j, VS_ARRIVE_HASH, at, bytes);
    if (op == NULL)
        return false;
    op->u.hash.hasher = hasher;
    op->u.hash.slot = slot;
    return true;
}

bool vs_arrive_record(vs_arrival_t *j, CUevent event)
{
    vs_arrive_op_t *op = vs_arrive_op(j, VS_ARRIVE_RECORD, 0, 0);
    if (op == NULL)
        return false;
    op->u.event = event;
    return true;
}

void vs_arrive_cancel(vs_arrival_t *j)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (j != NULL)
        vs_arrive_free(j); /* its ticket is never joined: nothing waits for it */
}

/* Takes back the oldest job, finished: what its thread could not make is
 * made here, its `recorded` is waited for (on the simulated driver's clock,
 * the engine has then passed the thread's calls), and it is freed. */
static void vs_arrive_take_back(vs_arrival_t *j)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (j->recorded_ok)
        (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuEventSynchronize, (j->recorded));
    if (j->made < j->count) {
        vs_log(VS_LOG_DEBUG, "the arrival thread's call %zu of %zu for 0x%" PRIxPTR " failed (error %d): made here",
               j->made + 1, j->count, j->base, (int)j->rc);
        CUresult rc;
        size_t made = vs_arrive_make(j, j->made, &rc, true);
        /* A call that fails here too: the copies after it are not made,
         * but the events are recorded, so that no one waits for ever; the
         * region's bytes stay in its host copy. */
        if (made < j->count) {
            vs_log(VS_LOG_WARN, "cannot restore the allocation at 0x%" PRIxPTR " (error %d)", j->base, (int)rc);
            for (size_t i = made; i < j->count; i++)
                if (j->ops[i].kind == VS_ARRIVE_RECORD)
                    (void)VS_CALL(cuEventRecord, (j->ops[i].u.event, j->stream));
        }
    }
    vs_arrive.joined_up_to = j->ticket;
    vs_arrive_free(j);
}

/* Joins the jobs up to and including ticket `last` (UINT64_MAX: every
 * one). */
static void vs_arrive_join_until(uint64_t last)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    for (;;) {
        pthread_mutex_lock(&vs_arrive.worker.lock);
        vs_arrival_t *j = vs_arrive.head;
        if (j == NULL || j->ticket > last || !vs_arrive_owned()) {
            pthread_mutex_unlock(&vs_arrive.worker.lock);
            return;
        }
        while (!j->finished)
            pthread_cond_wait(&vs_arrive.worker.finished, &vs_arrive.worker.lock);
        vs_arrive.head = j->next;
        if (vs_arrive.head == NULL)
            vs_arrive.tail = NULL;
        vs_arrive.count--;
        pthread_mutex_unlock(&vs_arrive.worker.lock);
        vs_arrive_take_back(j);
    }
}

uint64_t vs_arrive_hand_over(vs_arrival_t *j)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (VS_CALL(cuEventRecord, (j->handed, j->handed_stream)) != CUDA_SUCCESS) {
        /* No hand-off to be had: the calls are made here. */
        j->made = 0;
        j->rc = CUDA_ERROR_NOT_READY;
        j->recorded_ok = false;
        vs_arrive_join_until(j->ticket - 1); /* the stream's order */
        vs_arrive_take_back(j);
        return 0;
    }
    pthread_mutex_lock(&vs_arrive.worker.lock);
    if (vs_arrive.tail != NULL)
        vs_arrive.tail->next = j;
    else
        vs_arrive.head = j;
    vs_arrive.tail = j;
    uint64_t ticket = j->ticket;
    size_t count = ++vs_arrive.count;
    pthread_cond_signal(&vs_arrive.worker.work);
    pthread_mutex_unlock(&vs_arrive.worker.lock);
    if (count > VS_ARRIVE_KEEP)
        vs_arrive_join_until(ticket - VS_ARRIVE_KEEP);
    return ticket;
}

uint64_t vs_arrive_ticket(const vs_arrival_t *j)
{
    return j->ticket;
}

bool vs_arrive_joined(uint64_t ticket)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    return ticket <= vs_arrive.joined_up_to;
}

void vs_arrive_join(uint64_t ticket)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (ticket > vs_arrive.joined_up_to)
        vs_arrive_join_until(ticket);
}

void vs_arrive_join_all(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_arrive.joined_up_to < vs_arrive.next_ticket)
        vs_arrive_join_until(UINT64_MAX);
}

/* What a join looks for in the jobs handed over: a record of `event`, or
 * calls on [base, base + bytes). */
typedef struct vs_arrive_need_s {
    CUevent event;
    uintptr_t base;
    uint64_t bytes;
} vs_arrive_need_t;

static bool vs_arrive_records(const vs_arrival_t *j, const vs_arrive_need_t *need)
{
    for (size_t i = 0; i < j->count; i++)
        if (j->ops[i].kind == VS_ARRIVE_RECORD && j->ops[i].u.event == need->event)
            return true;
    return false;
}

static bool vs_arrive_overlaps(const vs_arrival_t *j, const vs_arrive_need_t *need)
{
    return j->base < need->base + need->bytes && need->base < j->base + j->bytes;
}

/* Joins up to the last job handed over that `matches` `need`. */
static void vs_arrive_join_matching(bool (*matches)(const vs_arrival_t *, const vs_arrive_need_t *),
                                    const vs_arrive_need_t *need)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_arrive.joined_up_to == vs_arrive.next_ticket)
        return;
    uint64_t last = 0;
    pthread_mutex_lock(&vs_arrive.worker.lock);
    for (const vs_arrival_t *j = vs_arrive.head; j != NULL; j = j->next)
        if (matches(j, need))
            last = j->ticket;
    pthread_mutex_unlock(&vs_arrive.worker.lock);
    if (last != 0)
        vs_arrive_join_until(last);
}

void vs_arrive_join_event(CUevent event)
{
    if (event != NULL)
        vs_arrive_join_matching(vs_arrive_records, &(vs_arrive_need_t){.event = event});
}

void vs_arrive_join_range(uintptr_t base, uint64_t bytes)
{
    vs_arrive_join_matching(vs_arrive_overlaps, &(vs_arrive_need_t){.base = base, .bytes = bytes});
}

void vs_offload_arrive_stop(void)
{
    vs_worker_stop(&vs_arrive.worker);
}

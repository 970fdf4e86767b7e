/* offload_retire.c: the engine's own thread, which unmaps the ranges whose
 * memory another range owns now (`vs_retire_unmap`), off the application's
 * thread.
 *
 * A restore mapped ahead onto a departing allocation's memory
 * (`vs_engine_premap`) leaves the departed range mapped onto what is now the
 * restored allocation's (`vs_engine_lent_leave`). Its unmap frees nothing:
 * it only clears an address range, and nothing waits for it but a map at
 * that range when its allocation comes back. Made on the thread that
 * launches, it ran between a wait for a departure and the next launch, on
 * an H100 25 us (59 on a busy H200) while the GPU ran out of queued work.
 * Unmaps that free memory stay where they are: the limit counts the
 * device's memory, and the create that follows them needs it gone (with
 * them and the releases left to this thread as well, the device's memory
 * passed the limit: preload_offload_kernels_partial peaked at 78 MiB under
 * 64, its allowance 4).
 *
 * The engine fills a batch under its lock and hands it over when it lets
 * the lock go (`vs_retire_hand_over`). Whoever maps at a range, frees it,
 * or ends its context first waits for the batches that unmap there
 * (`vs_retire_wait_range`, `vs_retire_wait_all`).
 *
 * The hand-offs are events, not a lock: the engine records `handed` on a
 * stream of its own that runs nothing else, the thread waits for it before
 * its calls, and records `done` after them; a wait for a batch ends with a
 * wait for `done`. On a GPU that costs a record and a few microseconds of
 * the thread's time. On the simulated driver's virtual clock, where each
 * thread has its own host clock, it carries each side's time to the other:
 * the thread never makes a call before the engine handed it over, and an
 * engine that needs the result waits until the thread made it, so the
 * sweep's figures are what a GPU would show, and repeat run to run. The
 * thread holds no lock while it calls the driver.
 *
 * Where no thread can be had (pthread_create fails, or in a forked child,
 * whose driver state is not the parent's) the engine makes the calls
 * itself, as before: `vs_retire_unmap` returns false.
 *
 * Locks: the retire lock is a leaf, taken under the engine lock or alone by
 * the thread; no driver call is made under it.
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

typedef struct vs_retire_batch_s {
    struct vs_retire_batch_s *next;
    int device;
    CUcontext ctx;
    CUstream stream; /* the device's `retire` stream, which runs nothing else */
    CUevent handed, done;
    bool done_recorded; /* false: the thread could not record `done` */
    size_t ranges;
    struct {
        uintptr_t base;
        uint64_t split; /* > 0: two mappings, the first `split` bytes long */
        uint64_t bytes;
        CUmemGenericAllocationHandle phys[2]; /* the memory mapped there */
        CUresult rc; /* the unmap's answer, set by the thread */
    } range[VS_RETIRE_BATCH];
    bool finished; /* the thread made its calls and recorded `done` */
} vs_retire_batch_t;

static struct {
    vs_worker_t worker;
    /* Handed over, oldest first; the thread works on the first one not
     * finished. */
    vs_retire_batch_t *head, *tail;
    size_t count;
    /* Being filled in this hold of the engine lock (engine lock). */
    vs_retire_batch_t *open;
} vs_retire = {
    .worker = VS_WORKER_INIT,
};

static void *vs_retire_main(void *arg)
{
    (void)arg;
    /* The first driver call starts this thread's clock on the simulated
     * driver: made while the engine waits for it (`vs_retire_start`). */
    CUcontext none = NULL;
    (void)VS_CALL(cuCtxGetCurrent, (&none));
    pthread_mutex_lock(&vs_retire.worker.lock);
    vs_worker_started(&vs_retire.worker);
    for (;;) {
        vs_retire_batch_t *b = vs_retire.head;
        while (b != NULL && b->finished)
            b = b->next;
        if (b == NULL) {
            if (vs_retire.worker.stop)
                break;
            pthread_cond_wait(&vs_retire.worker.work, &vs_retire.worker.lock);
            continue;
        }
        pthread_mutex_unlock(&vs_retire.worker.lock);
        /* Not before the engine let go of it. Its own time, not the
         * engine's wait: not counted as a host wait for the GPU. */
        (void)VS_CALL(cuEventSynchronize, (b->handed));
        for (size_t i = 0; i < b->ranges; i++)
            b->range[i].rc = vs_engine_unmap_pieces(b->range[i].base, b->range[i].split, b->range[i].bytes);
        if (VS_CALL(cuCtxSetCurrent, (b->ctx)) != CUDA_SUCCESS || VS_CALL(cuEventRecord, (b->done, b->stream)) != CUDA_SUCCESS)
            b->done_recorded = false; /* waited for by the flag alone */
        pthread_mutex_lock(&vs_retire.worker.lock);
        b->finished = true;
        pthread_cond_broadcast(&vs_retire.worker.finished);
    }
    vs_worker_ended(&vs_retire.worker);
    pthread_mutex_unlock(&vs_retire.worker.lock);
    return NULL;
}

/* In a forked child the thread is not there, and the batches handed to it
 * never end: they are dropped (the child's driver state is not the
 * parent's). Retire lock held. */
static bool vs_retire_owned(void)
{
    if (vs_worker_owned(&vs_retire.worker))
        return true;
    vs_retire.head = vs_retire.tail = NULL;
    vs_retire.count = 0;
    return false;
}

/* Starts the thread the first time; whether it runs. Retire lock held. */
static bool vs_retire_start(void)
{
    return vs_retire_owned()
           && vs_worker_start(&vs_retire.worker, vs_retire_main, "vramshim-retire",
                              "its unmaps are made on the calling thread");
}

/* The batch being filled for `device`, opened the first time in this hold
 * of the engine lock (one for another device is handed over first); NULL
 * where the thread or the events cannot be had. */
static vs_retire_batch_t *vs_retire_batch(int device)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = &vs_engine.devices[device];
    vs_retire_batch_t *b = vs_retire.open;
    if (b != NULL && (b->device != device || b->ranges == VS_RETIRE_BATCH)) {
        vs_retire_hand_over();
        b = NULL;
    }
    if (b != NULL)
        return b;
    if (!d->ready || d->retire == NULL)
        return NULL;
    pthread_mutex_lock(&vs_retire.worker.lock);
    bool running = vs_retire_start();
    pthread_mutex_unlock(&vs_retire.worker.lock);
    if (!running)
        return NULL;
    b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->device = device;
    b->ctx = d->ctx;
    b->stream = d->retire;
    b->done_recorded = true;
    b->handed = vs_engine_event_get(d->ctx);
    b->done = vs_engine_event_get(d->ctx);
    if (b->handed == NULL || b->done == NULL) {
        if (b->handed != NULL)
            vs_engine_event_put(d->ctx, b->handed);
        if (b->done != NULL)
            vs_engine_event_put(d->ctx, b->done);
        free(b);
        return NULL;
    }
    vs_retire.open = b;
    return b;
}

bool vs_retire_unmap(int device, uintptr_t base, uint64_t split, uint64_t bytes,
                     const CUmemGenericAllocationHandle phys[2])
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_retire_batch_t *b = vs_retire_batch(device);
    if (b == NULL)
        return false;
    b->range[b->ranges].base = base;
    b->range[b->ranges].split = split;
    b->range[b->ranges].bytes = bytes;
    b->range[b->ranges].phys[0] = phys[0];
    b->range[b->ranges].phys[1] = phys[1];
    b->ranges++;
    return true;
}

/* Takes back the oldest batch, ended: its events go back to the pool, and
 * a range whose unmap was refused is marked on its allocation. Its `done`
 * is waited for first (on the simulated driver's clock, the engine has
 * then passed the thread's calls). Retire lock not held. */
static void vs_retire_take_back(vs_retire_batch_t *b)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (b->done_recorded)
        (void)VS_ENGINE_CALL(VS_HOST_GPU_WAIT, cuEventSynchronize, (b->done));
    vs_engine_event_put(b->ctx, b->done);
    vs_engine_event_put(b->ctx, b->handed);
    for (size_t i = 0; i < b->ranges; i++) {
        if (b->range[i].rc == CUDA_SUCCESS)
            continue;
        vs_log(VS_LOG_WARN, "cannot unmap the evicted allocation at 0x%" PRIxPTR " (error %d)", b->range[i].base,
               (int)b->range[i].rc);
        vs_region_t *owner = vs_engine_region_containing(b->range[i].base);
        if (owner != NULL)
            owner->stale_mapping = true;
    }
    free(b);
}

/* Waits for the batches up to and including `last` (NULL: every one) and
 * takes them back. */
static void vs_retire_wait_until(const vs_retire_batch_t *last)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    for (;;) {
        pthread_mutex_lock(&vs_retire.worker.lock);
        vs_retire_batch_t *b = vs_retire.head;
        if (b == NULL || !vs_retire_owned()) {
            pthread_mutex_unlock(&vs_retire.worker.lock);
            return;
        }
        while (!b->finished)
            pthread_cond_wait(&vs_retire.worker.finished, &vs_retire.worker.lock);
        vs_retire.head = b->next;
        if (vs_retire.head == NULL)
            vs_retire.tail = NULL;
        vs_retire.count--;
        pthread_mutex_unlock(&vs_retire.worker.lock);
        bool was_last = b == last;
        vs_retire_take_back(b);
        if (was_last)
            return;
    }
}

void vs_retire_hand_over(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_retire_batch_t *b = vs_retire.open;
    if (b == NULL)
        return;
    vs_retire.open = NULL;
    if (VS_CALL(cuEventRecord, (b->handed, b->stream)) != CUDA_SUCCESS) {
        /* No hand-off to be had: the calls are made here. */
        for (size_t i = 0; i < b->ranges; i++)
            b->range[i].rc = vs_engine_unmap_pieces(b->range[i].base, b->range[i].split, b->range[i].bytes);
        b->done_recorded = false;
        vs_retire_take_back(b);
        return;
    }
    pthread_mutex_lock(&vs_retire.worker.lock);
    if (vs_retire.tail != NULL)
        vs_retire.tail->next = b;
    else
        vs_retire.head = b;
    vs_retire.tail = b;
    size_t count = ++vs_retire.count;
    pthread_cond_signal(&vs_retire.worker.work);
    pthread_mutex_unlock(&vs_retire.worker.lock);
    /* The oldest are long over: taken back, so the list stays short. */
    if (count > VS_RETIRE_KEEP)
        vs_retire_wait_until(vs_retire.head);
}

/* What a wait looks for in the batches: unmaps of anything of [base, base +
 * bytes), or of a range mapped onto `phys`. */
typedef struct vs_retire_need_s {
    uintptr_t base;
    uint64_t bytes;
    CUmemGenericAllocationHandle phys;
} vs_retire_need_t;

static bool vs_retire_overlaps(const vs_retire_batch_t *b, const vs_retire_need_t *need)
{
    for (size_t i = 0; i < b->ranges; i++)
        if (b->range[i].base < need->base + need->bytes && need->base < b->range[i].base + b->range[i].bytes)
            return true;
    return false;
}

static bool vs_retire_maps(const vs_retire_batch_t *b, const vs_retire_need_t *need)
{
    for (size_t i = 0; i < b->ranges; i++)
        if (b->range[i].phys[0] == need->phys || b->range[i].phys[1] == need->phys)
            return true;
    return false;
}

/* Hands over the open batch when it `matches` `need`, then waits up to the
 * last batch that does (`unfinished`: among those not finished). */
static void vs_retire_wait_matching(bool (*matches)(const vs_retire_batch_t *, const vs_retire_need_t *),
                                    const vs_retire_need_t *need, bool unfinished)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_retire.open != NULL && matches(vs_retire.open, need))
        vs_retire_hand_over();
    pthread_mutex_lock(&vs_retire.worker.lock);
    const vs_retire_batch_t *last = NULL;
    for (const vs_retire_batch_t *b = vs_retire.head; b != NULL; b = b->next)
        if (!(unfinished && b->finished) && matches(b, need))
            last = b;
    pthread_mutex_unlock(&vs_retire.worker.lock);
    if (last != NULL)
        vs_retire_wait_until(last);
}

void vs_retire_wait_range(uintptr_t base, uint64_t bytes)
{
    vs_retire_wait_matching(vs_retire_overlaps, &(vs_retire_need_t){.base = base, .bytes = bytes}, false);
}

void vs_retire_wait_phys(CUmemGenericAllocationHandle phys)
{
    if (phys != 0)
        vs_retire_wait_matching(vs_retire_maps, &(vs_retire_need_t){.phys = phys}, true);
}

void vs_retire_wait_all(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_retire_hand_over();
    vs_retire_wait_until(NULL);
}

void vs_offload_retire_stop(void)
{
    vs_worker_stop(&vs_retire.worker);
}

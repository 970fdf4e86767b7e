/* offload_meter.c: the learned cycle's regime (bound by its compute, by
 * the link, or near the balance point), measured on the GPU's clock.
 *
 * Two measures, neither of which waits (its events are read at later
 * copies, once done):
 * - The link's busy share. After each copy the engine queues on a device's
 *   host-to-device stream a timing event is recorded there
 *   (`vs_meter_copied`); the time from the end of the copy before is the
 *   copy's own when the link ran the two back to back, and longer when it
 *   idled in between; the link's rate is the fastest interval seen. An
 *   interval with other work between its copies (a hash kernel, which waits
 *   for the compute engine) is not counted.
 * - The application's stall share. An application stream's wait for a
 *   copy in (`vs_meter_wait_for_copy`) is bracketed by two timing events on
 *   that stream: the time between them is how long it stalled.
 * Per window (a cycle, or VS_METER_MAX_INTERVALS copies of a long one) of a
 * plan that has run VS_METER_SETTLE_CYCLES: the bytes copied at the link's
 * rate over the time the window spans, and the stalls over that time.
 *
 * Two windows in a row that point to another regime move the cycle there:
 * compute-bound under VS_METER_IDLE_ENTER busy (back over
 * VS_METER_IDLE_LEAVE), link-bound over VS_METER_STALL_ENTER stalled (back
 * under VS_METER_STALL_LEAVE). Compute-bound, the copies wait for room,
 * never the GPU for its copies, and the host work of a swap (an unmap, a
 * map, a grant) hides in the link's idle time; link-bound, the link's rate
 * sets the time whatever that work does. Either way the plan leaves no room
 * for a departure and keeps heads (vs_prefetch_budget_update), and streams
 * fewer bytes a pass in the same time. Near the balance point the room is
 * what keeps that host work off the link's critical path. On the sweep's
 * workloads (docs/benchmarks.md, "The regime meter"): at twice the
 * transfer's time the link is busy 48-65% of the time, at 1.33 times
 * 69-80%, at the balance point 92-99%; at half of it the application
 * waits for copies about half of the time, at 0.75 about a quarter.
 */
#include "offload_internal.h"

#include "driver.h"

/* A window: a cycle of at least VS_METER_MIN_INTERVALS intervals, or
 * VS_METER_MAX_INTERVALS of a longer cycle. */
#define VS_METER_MIN_INTERVALS 8
#define VS_METER_MAX_INTERVALS 32
/* Cycles a plan runs before it is measured: in its first passes what it
 * keeps comes in and what the plan before kept leaves, on demand. */
#define VS_METER_SETTLE_CYCLES 2
#define VS_METER_IDLE_ENTER 0.66
#define VS_METER_IDLE_LEAVE 0.76
#define VS_METER_STALL_ENTER 0.40
#define VS_METER_STALL_LEAVE 0.30

static const char *const vs_regime_names[] = {
    [VS_REGIME_BALANCED] = "near the balance point; room for departures, whole allocations",
    [VS_REGIME_COMPUTE_BOUND] = "compute-bound; no room for departures, heads kept",
    [VS_REGIME_LINK_BOUND] = "link-bound; no room for departures, heads kept",
};

/* Starts a new window at operation `from`. */
static void vs_meter_window_start(vs_link_meter_t *m, uint64_t from)
{
    m->window_ns = 0;
    m->window_bytes = 0;
    m->window_stall_ns = 0;
    m->window_intervals = 0;
    m->window_from = from;
}

/* Where the last window points from `now`. */
static vs_regime_t vs_meter_points(const vs_link_meter_t *m, vs_regime_t now)
{
    switch (now) {
    case VS_REGIME_COMPUTE_BOUND:
        return m->busy > VS_METER_IDLE_LEAVE ? VS_REGIME_BALANCED : now;
    case VS_REGIME_LINK_BOUND:
        return m->stalled < VS_METER_STALL_LEAVE ? VS_REGIME_BALANCED : now;
    case VS_REGIME_BALANCED:
        break;
    }
    if (m->busy < VS_METER_IDLE_ENTER)
        return VS_REGIME_COMPUTE_BOUND;
    return m->stalled > VS_METER_STALL_ENTER ? VS_REGIME_LINK_BOUND : VS_REGIME_BALANCED;
}

/* Ends the current window (the next starts at operation `now`); the
 * regime changes after two in a row that point to the same other one (one
 * may span the passes where a plan settles). */
static void vs_meter_window_end(vs_engine_device_t *d, int device, uint64_t now)
{
    vs_link_meter_t *m = &d->meter;
    m->busy = m->window_bytes / m->bytes_per_ns / m->window_ns;
    m->stalled = m->window_stall_ns / m->window_ns;
    m->busy = m->busy > 1.0 ? 1.0 : m->busy;
    m->stalled = m->stalled > 1.0 ? 1.0 : m->stalled;
    vs_regime_t points = vs_meter_points(m, d->regime);
    if (points != d->regime && points == m->toward) {
        d->regime = points;
        m->settled_at = 0; /* a new plan follows (vs_prefetch_budget_update) */
        vs_engine.stats.regime_changes++;
        vs_log(VS_LOG_INFO,
               "device %d: over the last %u copies in (%.1f GB/s) the link was busy %.0f%% of the time and the "
               "application waited for copies %.0f%%: the cycle is %s",
               device, m->window_intervals, m->bytes_per_ns, 100.0 * m->busy, 100.0 * m->stalled,
               vs_regime_names[points]);
        m->toward = d->regime; /* a new plan: two windows again */
    } else {
        m->toward = points;
    }
    vs_meter_window_start(m, now);
}

/* Reads the waits measured that are done, oldest first, into the window
 * when it counts (`counting`). */
static void vs_meter_read_waits(vs_link_meter_t *m, bool counting)
{
    while (m->waits_pending > 0) {
        CUevent *w = m->waits[m->waits_first];
        float ms = 0;
        CUresult rc = VS_CALL(cuEventElapsedTime, (&ms, w[0], w[1]));
        if (rc == CUDA_ERROR_NOT_READY)
            return;
        if (rc == CUDA_SUCCESS && counting && ms > 0)
            m->window_stall_ns += (double)ms * 1e6;
        m->waits_first = (m->waits_first + 1) % VS_METER_WAITS;
        m->waits_pending--;
    }
}

/* Reads what is done of the waits and copies measured, oldest first: a
 * copy's time from the copy before (CUDA_ERROR_NOT_READY while either is
 * not done: one call, where a poll and then a read would be two). */
static void vs_meter_read(vs_engine_device_t *d, int device)
{
    vs_link_meter_t *m = &d->meter;
    /* Only a pass that streams what the plan says is measured, from
     * VS_METER_SETTLE_CYCLES after the plan: while the cycle is learned and
     * a plan settles, restores wait for the operations that need them, and
     * the link idles whatever the regime. */
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    bool planned = ps.period != 0 && ps.planned_streamed_bytes > 0;
    if (!planned)
        m->settled_at = 0;
    else if (m->settled_at == 0)
        m->settled_at = ps.now + VS_METER_SETTLE_CYCLES * ps.period;
    bool counting = planned && ps.now >= m->settled_at;
    vs_meter_read_waits(m, counting);
    if (!counting)
        vs_meter_window_start(m, ps.now);
    while (m->pending > 0) {
        unsigned at = (m->last + 1) % VS_METER_SLOTS;
        float ms = 0;
        CUresult rc = m->have_last ? VS_CALL(cuEventElapsedTime, (&ms, m->events[m->last], m->events[at]))
                                   : VS_CALL(cuEventQuery, (m->events[at]));
        if (rc == CUDA_ERROR_NOT_READY)
            return;
        if (counting && rc == CUDA_SUCCESS && m->have_last && !m->after_other_work[at] && ms > 0) {
            double ns = (double)ms * 1e6, bytes = (double)m->bytes[at];
            if (bytes / ns > m->bytes_per_ns)
                m->bytes_per_ns = bytes / ns;
            m->window_ns += ns;
            m->window_bytes += bytes;
            m->window_intervals++;
            if (m->window_intervals >= VS_METER_MAX_INTERVALS
                || (m->window_intervals >= VS_METER_MIN_INTERVALS && ps.now - m->window_from >= ps.period))
                vs_meter_window_end(d, device, ps.now);
        }
        m->last = at;
        m->have_last = rc == CUDA_SUCCESS;
        m->pending--;
    }
}

/* The meter's events, made on first use; false when the driver refuses
 * them (then the regime stays as it is in this context). */
static bool vs_meter_ready(vs_engine_device_t *d)
{
    vs_link_meter_t *m = &d->meter;
    if (m->off || d->policy == NULL)
        return false;
    if (m->events[0] != NULL)
        return true;
    CUevent *all[VS_METER_SLOTS + 2 * VS_METER_WAITS];
    size_t n = 0;
    for (unsigned i = 0; i < VS_METER_SLOTS; i++)
        all[n++] = &m->events[i];
    for (unsigned i = 0; i < VS_METER_WAITS; i++) {
        all[n++] = &m->waits[i][0];
        all[n++] = &m->waits[i][1];
    }
    for (size_t i = 0; i < n; i++) {
        *all[i] = vs_engine_timing_event_create(d->ctx);
        if (*all[i] == NULL) {
            vs_meter_forget(d, true);
            m->off = true;
            return false;
        }
    }
    return true;
}

void vs_meter_copied(vs_engine_device_t *d, int device, uint64_t bytes)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_link_meter_t *m = &d->meter;
    if (!vs_meter_ready(d))
        return;
    vs_meter_read(d, device);
    /* A copy that finds every slot pending goes unmetered; its bytes go
     * with the next one, whose interval spans both. */
    m->unmetered += bytes;
    if (m->pending == VS_METER_SLOTS - 1)
        return;
    unsigned at = (m->last + 1 + m->pending) % VS_METER_SLOTS;
    if (VS_CALL(cuEventRecord, (m->events[at], d->to_device)) != CUDA_SUCCESS)
        return;
    m->bytes[at] = m->unmetered;
    m->unmetered = 0;
    m->after_other_work[at] = m->other_work;
    m->other_work = false;
    m->pending++;
}

void vs_meter_other_work(vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    d->meter.other_work = true;
}

CUresult vs_meter_wait_for_copy(vs_engine_device_t *d, CUstream waiter, CUevent copied)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_link_meter_t *m = &d->meter;
    /* A stream of another context cannot record the meter's events: its
     * wait goes unmeasured. */
    CUevent *w = NULL;
    if (vs_meter_ready(d) && m->waits_pending < VS_METER_WAITS) {
        w = m->waits[(m->waits_first + m->waits_pending) % VS_METER_WAITS];
        if (VS_CALL(cuEventRecord, (w[0], waiter)) != CUDA_SUCCESS)
            w = NULL;
    }
    CUresult rc = vs_engine_wait_for_copy(waiter, copied);
    if (w != NULL && VS_CALL(cuEventRecord, (w[1], waiter)) == CUDA_SUCCESS)
        m->waits_pending++;
    return rc;
}

void vs_meter_forget(vs_engine_device_t *d, bool alive)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_link_meter_t *m = &d->meter;
    for (unsigned i = 0; i < VS_METER_SLOTS && alive; i++)
        if (m->events[i] != NULL)
            (void)VS_CALL(cuEventDestroy_v2, (m->events[i]));
    for (unsigned i = 0; i < VS_METER_WAITS && alive; i++)
        for (int k = 0; k < 2; k++)
            if (m->waits[i][k] != NULL)
                (void)VS_CALL(cuEventDestroy_v2, (m->waits[i][k]));
    *m = (vs_link_meter_t){0};
    d->regime = VS_REGIME_BALANCED;
}

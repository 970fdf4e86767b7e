/* offload_meter.c: whether the learned cycle is bound by its compute or by
 * the link, measured on the GPU's clock from the engine's own copies in.
 *
 * After each copy the engine queues on a device's host-to-device stream, a
 * timing event is recorded there (`vs_meter_copied`). Once it is done (read
 * at a later copy: the meter never waits), the time from the end of the
 * copy before is read. That interval is the copy's own when the link ran
 * the two back to back, and longer when it idled in between; the link's
 * rate is the fastest interval seen. Over a window (a cycle, or
 * VS_METER_MAX_INTERVALS copies of a long one), the bytes copied, at that
 * rate, over the time the window spans is the share of the time the link
 * was busy. Only a plan that has run VS_METER_SETTLE_CYCLES is measured,
 * and an interval with other work between its copies (a hash kernel, which
 * waits for the compute engine) is not counted.
 *
 * Two windows in a row under VS_METER_ENTER make the cycle compute-bound,
 * two over VS_METER_LEAVE end it. There the copies wait for room, never the
 * GPU for its copies, and the host work of a swap (an unmap, a map, a
 * grant) hides in the link's idle time: the plan leaves no room for a
 * departure and keeps heads (vs_prefetch_budget_update), and streams fewer
 * bytes a pass in the same time. Near the balance point the room is what
 * keeps that host work off the link's critical path, and on the link's side
 * the room costs bytes but not time. On the sweep's workloads a cycle at
 * twice the transfer's time keeps the link busy 50-65% of the time, one at
 * 1.33 times 70-80%, at the balance point 93-99% (docs/benchmarks.md, "The
 * link meter").
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
#define VS_METER_ENTER 0.66
#define VS_METER_LEAVE 0.76

/* Ends the current window; the regime changes after two in a row that
 * point to the other one (one may span the passes where a plan settles). */
static void vs_meter_window_end(vs_engine_device_t *d, int device)
{
    vs_link_meter_t *m = &d->meter;
    m->busy = m->window_bytes / m->bytes_per_ns / m->window_ns;
    if (m->busy > 1.0)
        m->busy = 1.0;
    bool was = d->compute_bound;
    bool toward = was ? m->busy > VS_METER_LEAVE : m->busy < VS_METER_ENTER;
    if (toward && m->toward)
        d->compute_bound = !was;
    m->toward = toward && d->compute_bound == was;
    if (d->compute_bound != was) {
        m->settled_at = 0; /* a new plan follows (vs_prefetch_budget_update) */
        vs_engine.stats.regime_changes++;
        vs_log(VS_LOG_INFO,
               "device %d: the link was busy %.0f%% of the time over the last %u copies in (%.1f GB/s): %s", device,
               100.0 * m->busy, m->window_intervals, m->bytes_per_ns,
               d->compute_bound ? "the cycle is compute-bound; no room for departures, heads kept"
                                : "the cycle is no longer compute-bound");
    }
    m->window_ns = 0;
    m->window_bytes = 0;
    m->window_intervals = 0;
}

/* Reads the pending copies that are done, oldest first: the time from the
 * copy before (CUDA_ERROR_NOT_READY while either is not done: one call,
 * where a poll and then a read would be two). */
static void vs_meter_read(vs_engine_device_t *d, int device)
{
    vs_link_meter_t *m = &d->meter;
    while (m->pending > 0) {
        unsigned at = (m->last + 1) % VS_METER_SLOTS;
        float ms = 0;
        CUresult rc = m->have_last ? VS_CALL(cuEventElapsedTime, (&ms, m->events[m->last], m->events[at]))
                                   : VS_CALL(cuEventQuery, (m->events[at]));
        if (rc == CUDA_ERROR_NOT_READY)
            return;
        /* Only a pass that streams what the plan says is measured, from
         * VS_METER_SETTLE_CYCLES after the plan: while the cycle is learned
         * and a plan settles, restores wait for the operations that need
         * them, and the link idles whatever the regime. */
        vs_policy_stats_t ps;
        vs_policy_stats(d->policy, &ps);
        bool planned = ps.period != 0 && ps.planned_streamed_bytes > 0;
        if (!planned)
            m->settled_at = 0;
        else if (m->settled_at == 0)
            m->settled_at = ps.now + VS_METER_SETTLE_CYCLES * ps.period;
        if (!planned || ps.now < m->settled_at) {
            m->window_ns = 0;
            m->window_bytes = 0;
            m->window_intervals = 0;
            m->window_from = ps.now;
        } else if (rc == CUDA_SUCCESS && m->have_last && !m->after_other_work[at] && ms > 0) {
            double ns = (double)ms * 1e6, bytes = (double)m->bytes[at];
            if (bytes / ns > m->bytes_per_ns)
                m->bytes_per_ns = bytes / ns;
            m->window_ns += ns;
            m->window_bytes += bytes;
            m->window_intervals++;
            if (m->window_intervals >= VS_METER_MAX_INTERVALS
                || (m->window_intervals >= VS_METER_MIN_INTERVALS && ps.now - m->window_from >= ps.period)) {
                vs_meter_window_end(d, device);
                m->window_from = ps.now;
            }
        }
        m->last = at;
        m->have_last = rc == CUDA_SUCCESS;
        m->pending--;
    }
}

void vs_meter_copied(vs_engine_device_t *d, int device, uint64_t bytes)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_link_meter_t *m = &d->meter;
    if (m->off || d->policy == NULL)
        return;
    if (m->events[0] == NULL) {
        for (unsigned i = 0; i < VS_METER_SLOTS; i++) {
            m->events[i] = vs_engine_timing_event_create(d->ctx);
            if (m->events[i] == NULL) {
                /* No meter in this context: the regime stays as it is. */
                vs_meter_forget(d, true);
                m->off = true;
                return;
            }
        }
    }
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

void vs_meter_forget(vs_engine_device_t *d, bool alive)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_link_meter_t *m = &d->meter;
    for (unsigned i = 0; i < VS_METER_SLOTS; i++)
        if (alive && m->events[i] != NULL)
            (void)VS_CALL(cuEventDestroy_v2, (m->events[i]));
    *m = (vs_link_meter_t){0};
    d->compute_bound = false;
}

/* offload_meter.c: the learned cycle's regime (bound by its compute, by
 * the link, or near the balance point), measured on the GPU's clock, and
 * the plan kept for it only while it pays.
 *
 * Three measures, none of which waits (their events are read at later
 * copies, once done):
 * - The link's busy share. After each copy the engine queues on a device's
 *   host-to-device stream a timing event is recorded there
 *   (`vs_meter_copied`); the time from the end of the copy before is the
 *   copy's own when the link ran the two back to back, and longer when it
 *   idled in between; the link's rate is the fastest interval seen. An
 *   interval with other work between its copies (a hash kernel, which waits
 *   for the compute engine) is not counted.
 * - The application's stall share. An application stream that may have to
 *   wait for the engine gets a timing event at the first point where it
 *   may: a wait for a copy in (`vs_meter_wait_for_copy`), or, while an
 *   operation is prepared or a prefetch step runs for it (`vs_meter_arm`),
 *   the first time the host waits for the GPU (`vs_meter_may_stall`: a
 *   departure's hash, a restore's copy). A second event goes on the stream
 *   when its next work is queued (`vs_meter_disarm`): the time between them
 *   is how long the stream had nothing to run, its own wait on the GPU and
 *   the host's together. Counting only the waits on the GPU read 0.04-0.19
 *   for the sweep's LLM at 25%, ratio 0.5, whose application in fact
 *   waits about half of the time.
 * - The cycle's time. An event on an application stream once a cycle
 *   (`vs_meter_mark`): between two of them, the ns per operation of the
 *   plan that ran.
 * Per window (a cycle, or VS_METER_MAX_INTERVALS copies of a long one) of a
 * plan that has run VS_METER_SETTLE_CYCLES: the bytes copied at the link's
 * rate over the time the window spans, and the stalls over that time.
 *
 * Two windows in a row that point to another regime move the cycle there:
 * compute-bound under VS_METER_IDLE_ENTER busy (back over
 * VS_METER_IDLE_LEAVE), link-bound over VS_METER_STALL_ENTER stalled (back
 * under VS_METER_STALL_LEAVE). Compute-bound, the copies wait for room,
 * never the GPU for its copies, and the host work of a swap (an unmap, a
 * map, a grant) may hide in the link's idle time; link-bound, the link's
 * rate sets the time and fewer bytes take less of it. Either way the plan
 * leaves no room for a departure and keeps heads (vs_prefetch_budget_update):
 * it streams fewer bytes a pass. Near the balance point the room is what
 * keeps that host work off the link's critical path, and the shares alone
 * cannot tell how near: at 0.75 and 1.33 times the transfer's time the
 * sweep's DiT and LLM read alike (busy 0.75-0.85, or stalled 0.26-0.34),
 * and without the room the DiT takes 3-10% longer, the LLM 8-10% less at
 * 0.75 and 2% more at 1.33. So a lean plan is a trial (`vs_meter_judge`):
 * it starts only once the balanced plan's cycle is timed, and when, over
 * two cycles or more, it takes more than VS_METER_LEAN_TOLERANCE longer an
 * operation, the cycle goes back for good. A trial takes about eight
 * cycles (two windows, two cycles for the new plan to settle, two timed,
 * two more for the plan it returns to). With the trial to catch a plan
 * that is slower, link-bound starts low: the LLM at 25%, ratio 0.75 reads
 * 0.13-0.15 stalled and takes 1.048 x the bound lean, 1.199 with the room.
 *
 * Near the balance point itself (neither share past its threshold) the
 * lean plan is tried as well (VS_REGIME_NEAR_LEAN), wherever it differs
 * from the balanced one (`vs_prefetch_lean_differs`), and only its time
 * ends the trial. At ratio 1 the LLM at 75% took 1.025 x the bound lean,
 * 1.138 with the room; with the room and the LM head kept resident
 * (`vs_policy_set_largest_offer`) it takes 1.025, the lean plan is timed
 * slower and the cycle goes back. The DiT at 25% takes 19% longer a cycle
 * lean, and goes back. A lean plan found slower under any of the three names is not
 * tried again: it is the same plan. Among small allocations of mixed sizes
 * the lean plan streams pieces of one size where it can (vs_prefetch_piece):
 * the DiT at 75%, ratio 1 takes 1.025 x the bound so, and keeps it; under
 * a busy GPU's host costs (h200-busy.txt) the pieces' swaps cost 1.48 x,
 * and the cycle goes back.
 */
#include "offload_internal.h"
#include "offload_device.h"
#include "offload_streams.h"
#include "offload_prefetch.h"

#include "driver.h"
#include "tunables.h"

static const char *const vs_regime_names[] = {
    [VS_REGIME_BALANCED] = "near the balance point; room for departures, whole allocations",
    [VS_REGIME_COMPUTE_BOUND] = "compute-bound; no room for departures, heads kept",
    [VS_REGIME_LINK_BOUND] = "link-bound; no room for departures, heads kept",
    [VS_REGIME_NEAR_LEAN] = "near the balance point, on trial without room for departures; heads kept",
    [VS_REGIME_COARSE] = "near the balance point, fewer and larger allocations streamed; room for departures",
};

/* What a lean regime is called where it is tried and judged. */
static const char *const vs_regime_short_names[] = {
    [VS_REGIME_BALANCED] = "near the balance point",
    [VS_REGIME_COMPUTE_BOUND] = "compute-bound",
    [VS_REGIME_LINK_BOUND] = "link-bound",
    [VS_REGIME_NEAR_LEAN] = "lean near the balance point",
    [VS_REGIME_COARSE] = "coarse near the balance point",
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

/* Where the last window points from `d`'s regime. */
static vs_regime_t vs_meter_points(const vs_engine_device_t *d)
{
    const vs_link_meter_t *m = &d->meter;
    switch (d->regime) {
    case VS_REGIME_COMPUTE_BOUND:
        return m->busy > VS_METER_IDLE_LEAVE ? VS_REGIME_BALANCED : d->regime;
    case VS_REGIME_LINK_BOUND:
        return m->stalled < VS_METER_STALL_LEAVE ? VS_REGIME_BALANCED : d->regime;
    case VS_REGIME_NEAR_LEAN:
    case VS_REGIME_COARSE:
        return d->regime; /* its time alone ends it (`vs_meter_judge`) */
    case VS_REGIME_BALANCED:
        break;
    }
    /* A lean plan is tried once the balanced one is timed, to compare;
     * once found slower, under any name (it is the same plan), never again. */
    if (m->cycles_timed[VS_REGIME_BALANCED] == 0)
        return VS_REGIME_BALANCED;
    if (!m->lean_refused) {
        if (m->busy < VS_METER_IDLE_ENTER)
            return VS_REGIME_COMPUTE_BOUND;
        if (m->stalled > VS_METER_STALL_ENTER)
            return VS_REGIME_LINK_BOUND;
        /* Near the balance point the shares cannot tell whether the swaps'
         * host work needs the room: the cycle's time does. */
        if (vs_prefetch_lean_differs(d))
            return VS_REGIME_NEAR_LEAN;
    }
    /* The balanced plan stays: the coarse one is tried against it, once. */
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    return !m->coarse_refused && ps.planned_coarser_floor != 0 && ps.planned_piece_bytes == 0 ? VS_REGIME_COARSE
                                                                                               : VS_REGIME_BALANCED;
}

/* `regime` has a new plan: it is timed afresh once settled, the marks of
 * the plan before left out. */
static void vs_meter_time_afresh(vs_link_meter_t *m, vs_regime_t regime)
{
    m->settled_at = 0;
    m->plan++;
    m->cycle_ns_per_op[regime] = 0;
    m->cycles_timed[regime] = 0;
}

/* Moves the cycle to `regime`: a new plan follows (vs_prefetch_budget_update),
 * measured from two cycles on. */
static void vs_meter_regime_set(vs_engine_device_t *d, vs_regime_t regime)
{
    vs_link_meter_t *m = &d->meter;
    if (regime == VS_REGIME_COARSE) {
        vs_policy_stats_t ps;
        vs_policy_stats(d->policy, &ps);
        m->coarse_floor = ps.planned_coarser_floor;
    } else {
        m->coarse_floor = 0;
    }
    d->regime = regime;
    vs_meter_time_afresh(m, regime);
    m->toward = regime; /* two windows again */
    vs_engine.stats.regime_changes++;
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
    vs_regime_t points = vs_meter_points(d);
    vs_log(VS_LOG_DEBUG, "meter window: %u copies, busy %.3f stalled %.3f", m->window_intervals, m->busy, m->stalled);
    if (points != d->regime && points == m->toward) {
        vs_log(VS_LOG_INFO,
               "device %d: over the last %u copies in (%.1f GB/s) the link was busy %.0f%% of the time and the "
               "application waited for copies %.0f%%: the cycle is %s",
               device, m->window_intervals, m->bytes_per_ns, 100.0 * m->busy, 100.0 * m->stalled,
               vs_regime_names[points]);
        vs_meter_regime_set(d, points);
    } else {
        m->toward = points;
    }
    vs_meter_window_start(m, now);
}

/* Reads the stalls measured that are done, oldest first, into the window
 * when it counts (`counting`); one still open stops the reading. */
static void vs_meter_read_waits(vs_link_meter_t *m, bool counting)
{
    while (m->waits_pending > 0) {
        unsigned at = m->waits_first;
        if (m->wait_open[at])
            return;
        CUevent *w = m->waits[at];
        float ms = 0;
        CUresult rc = m->wait_failed[at] ? CUDA_ERROR_INVALID_VALUE : VS_CALL(cuEventElapsedTime, (&ms, w[0], w[1]));
        if (rc == CUDA_ERROR_NOT_READY)
            return;
        if (rc == CUDA_SUCCESS && counting && ms > 0)
            m->window_stall_ns += (double)ms * 1e6;
        m->waits_first = (m->waits_first + 1) % VS_METER_WAITS;
        m->waits_pending--;
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
    CUevent *all[VS_METER_SLOTS + 2 * VS_METER_WAITS + VS_METER_MARKS];
    size_t n = 0;
    for (unsigned i = 0; i < VS_METER_SLOTS; i++)
        all[n++] = &m->events[i];
    for (unsigned i = 0; i < VS_METER_MARKS; i++)
        all[n++] = &m->marks[i];
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

/* Whether the plan has settled (VS_METER_SETTLE_CYCLES after it appeared):
 * only a pass that streams what the plan says is measured; while the cycle
 * is learned and a plan settles, restores wait for the operations that
 * need them, and the link idles whatever the regime. */
static bool vs_meter_counting(vs_link_meter_t *m, const vs_policy_stats_t *ps)
{
    bool planned = ps->period != 0 && ps->planned_streamed_bytes > 0;
    if (!planned)
        m->settled_at = 0;
    else if (m->settled_at == 0)
        m->settled_at = ps->now + VS_METER_SETTLE_CYCLES * ps->period;
    return planned && ps->now >= m->settled_at;
}

/* The mean ns per operation of `regime`'s plan over the cycles timed. */
static double vs_meter_ns_per_op(const vs_link_meter_t *m, vs_regime_t regime)
{
    return m->cycles_timed[regime] > 0 ? m->cycle_ns_per_op[regime] / m->cycles_timed[regime] : 0;
}

/* A settled plan took `ns_per_op` over a cycle. A lean regime's plan (no
 * room for departures) slower on average, over two cycles or more, by more
 * than VS_METER_LEAN_TOLERANCE than the balanced one timed before (or over
 * one, by more than VS_METER_LEAN_ABORT): the host work of its swaps is on
 * the critical path after all, and the cycle goes back for good. Within
 * the tolerance the lean plan stays: it moves fewer bytes (measured on the
 * sweep: one cycle's time varies by about 1.5% from the mean of a plan's,
 * and a mean over two cycles by less). Under 2%: with restores ahead of
 * need on the arrival thread, the sweep's LLM at 25%, ratio 2 times its
 * lean plan 1.6% slower than the balanced one over its first cycles; a
 * tolerance of 2% keeps the lean plan, and the cell takes 1.046 x the bound
 * instead of 1.013. */
static void vs_meter_judge(vs_engine_device_t *d, int device, double ns_per_op)
{
    vs_link_meter_t *m = &d->meter;
    m->cycle_ns_per_op[d->regime] += ns_per_op;
    m->cycles_timed[d->regime]++;
    vs_log(VS_LOG_DEBUG, "device %d: a cycle took %.0f ns an operation (%s)", device, ns_per_op,
           vs_regime_names[d->regime]);
    double lean = vs_meter_ns_per_op(m, d->regime), balanced = vs_meter_ns_per_op(m, VS_REGIME_BALANCED);
    /* Far slower: the first timed cycle says enough. */
    bool far_slower = lean > balanced * (1.0 + VS_METER_LEAN_ABORT);
    /* The coarse plan moves as many bytes: it stays only where it is no
     * slower. */
    double tolerance = d->regime == VS_REGIME_COARSE ? 0.0 : VS_METER_LEAN_TOLERANCE;
    if (d->regime == VS_REGIME_BALANCED || (m->cycles_timed[d->regime] < 2 && !far_slower) || balanced == 0
        || lean <= balanced * (1.0 + tolerance))
        return;
    /* Fine pieces first: the pieces of the second largest are timed in
     * their place, afresh, before the cycle goes back. */
    if (vs_prefetch_fine_piece_slower(d)) {
        vs_log(VS_LOG_INFO,
               "device %d: planned %s in fine pieces, the cycle takes %.0f ns an operation, %.0f near the balance "
               "point: pieces of the second largest size instead",
               device, vs_regime_short_names[d->regime], lean, balanced);
        vs_meter_time_afresh(m, d->regime);
        return;
    }
    vs_log(VS_LOG_INFO,
           "device %d: planned %s, the cycle takes %.0f ns an operation, %.0f near the balance point: back to %s",
           device, vs_regime_short_names[d->regime], lean, balanced, vs_regime_names[VS_REGIME_BALANCED]);
    if (d->regime == VS_REGIME_COARSE)
        m->coarse_refused = true;
    else
        m->lean_refused = true;
    vs_meter_regime_set(d, VS_REGIME_BALANCED);
}

/* Reads the cycle's marks that are done, oldest first: two of one settled
 * plan measure it. */
static void vs_meter_read_marks(vs_engine_device_t *d, int device)
{
    vs_link_meter_t *m = &d->meter;
    while (m->marks_pending >= 2) {
        unsigned a = m->marks_first, b = (a + 1) % VS_METER_MARKS;
        float ms = 0;
        CUresult rc = VS_CALL(cuEventElapsedTime, (&ms, m->marks[a], m->marks[b]));
        if (rc == CUDA_ERROR_NOT_READY)
            return;
        if (rc == CUDA_SUCCESS && ms > 0 && m->mark_plan[a] != 0 && m->mark_plan[a] == m->mark_plan[b]
            && m->mark_plan[a] == m->plan + 1 && m->mark_op[b] > m->mark_op[a])
            vs_meter_judge(d, device, (double)ms * 1e6 / (double)(m->mark_op[b] - m->mark_op[a]));
        m->marks_first = b;
        m->marks_pending--;
    }
}

void vs_meter_mark(vs_engine_device_t *d, CUstream stream)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_link_meter_t *m = &d->meter;
    if (!vs_meter_ready(d))
        return;
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    if (ps.period == 0 || ps.now < m->next_mark || m->marks_pending == VS_METER_MARKS)
        return;
    bool counting = vs_meter_counting(m, &ps);
    unsigned at = (m->marks_first + m->marks_pending) % VS_METER_MARKS;
    m->next_mark = ps.now + ps.period;
    /* A stream of another context cannot record the meter's events; on one
     * being captured, they would become part of the application's graph
     * and time nothing now. */
    if (vs_streams_may_be_capturing(stream) || VS_CALL(cuEventRecord, (m->marks[at], stream)) != CUDA_SUCCESS)
        return;
    m->mark_op[at] = ps.now;
    m->mark_plan[at] = counting ? m->plan + 1 : 0;
    m->marks_pending++;
}

/* Reads what is done of the waits and copies measured, oldest first: a
 * copy's time from the copy before (CUDA_ERROR_NOT_READY while either is
 * not done: one call, where a poll and then a read would be two). */
static void vs_meter_read(vs_engine_device_t *d, int device, uint64_t before_ticket)
{
    vs_link_meter_t *m = &d->meter;
    vs_meter_read_marks(d, device); /* first: it may end the plan */
    vs_policy_stats_t ps;
    vs_policy_stats(d->policy, &ps);
    bool counting = vs_meter_counting(m, &ps);
    vs_meter_read_waits(m, counting);
    if (!counting)
        vs_meter_window_start(m, ps.now);
    while (m->pending > 0) {
        unsigned at = (m->last + 1) % VS_METER_SLOTS;
        /* Its event is the arrival thread's: the job is long over by now
         * (half the slots were filled since), unless it is the one just
         * handed over, which is left for the next read. */
        if (m->arrival[at] != 0 && before_ticket != 0 && m->arrival[at] >= before_ticket)
            return;
        if (m->arrival[at] != 0)
            vs_arrive_join(m->arrival[at]);
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
            /* A window is a whole cycle, of at least VS_METER_MIN_INTERVALS
             * intervals, or VS_METER_MAX_INTERVALS of a longer one: the
             * sweep's LLM at 50%, ratio 1.33 (about 45 copies a cycle) read
             * 0.77-0.91 busy in windows of 32 copies, as their start moved
             * along the cycle, and 0.79-0.85 in whole cycles. */
            if (m->window_intervals >= VS_METER_MAX_INTERVALS
                || (m->window_intervals >= VS_METER_MIN_INTERVALS && ps.now - m->window_from >= ps.period))
                vs_meter_window_end(d, device, ps.now);
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
    if (!vs_meter_ready(d))
        return;
    /* Read in batches: each read of an event not done yet is a driver call
     * spent on the launching thread for nothing (about three a copy when
     * read at every copy). The meter costs the 60-block DiT at 360M 28 us
     * a pass read at every copy, 15 read in batches. */
    /* With a restore's job open, after its hand-over instead
     * (`vs_meter_catch_up`): no driver call between its map and the
     * arrival thread's grant. */
    if (vs_engine.arrival_open == NULL
        && (m->pending >= VS_METER_SLOTS / 2 || m->waits_pending >= VS_METER_WAITS / 2))
        vs_meter_read(d, device, 0);
    /* A copy that finds every slot pending goes unmetered; its bytes go
     * with the next one, whose interval spans both. */
    m->unmetered += bytes;
    if (m->pending == VS_METER_SLOTS - 1)
        return;
    unsigned at = (m->last + 1 + m->pending) % VS_METER_SLOTS;
    /* After a copy ahead of need: recorded by the arrival thread, read
     * once its job is joined. */
    vs_arrival_t *job = vs_engine.arrival_open;
    if (job != NULL ? !vs_arrive_record(job, m->events[at])
                    : VS_CALL(cuEventRecord, (m->events[at], d->to_device)) != CUDA_SUCCESS)
        return;
    m->arrival[at] = job != NULL ? vs_arrive_ticket(job) : 0;
    m->bytes[at] = m->unmetered;
    m->unmetered = 0;
    m->after_other_work[at] = m->other_work;
    m->other_work = false;
    m->pending++;
}

void vs_meter_catch_up(vs_engine_device_t *d, int device, uint64_t handed)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_link_meter_t *m = &d->meter;
    if (vs_meter_ready(d) && (m->pending >= VS_METER_SLOTS / 2 || m->waits_pending >= VS_METER_WAITS / 2))
        vs_meter_read(d, device, handed);
}

void vs_meter_other_work(vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    d->meter.other_work = true;
}

/* The stall of an application stream, from the event recorded on it when
 * it may start to wait (`vs_meter_stall_open`) to the one recorded when its
 * next work is queued (`vs_meter_stall_close`): the time between them is
 * how long the stream had nothing to run. Slot of the ring, or -1 (not
 * measured: the ring is full, or the stream is of another context). */
static int vs_meter_stall_open(vs_engine_device_t *d, CUstream waiter)
{
    vs_link_meter_t *m = &d->meter;
    if (!vs_meter_ready(d) || m->waits_pending >= VS_METER_WAITS)
        return -1;
    unsigned at = (m->waits_first + m->waits_pending) % VS_METER_WAITS;
    if (VS_CALL(cuEventRecord, (m->waits[at][0], waiter)) != CUDA_SUCCESS)
        return -1;
    m->wait_open[at] = true;
    m->wait_failed[at] = false;
    m->waits_pending++;
    return (int)at;
}

static void vs_meter_stall_close(vs_engine_device_t *d, int at, CUstream waiter)
{
    vs_link_meter_t *m = &d->meter;
    if (at < 0 || m->waits[at][1] == NULL) /* the context went meanwhile (vs_meter_forget) */
        return;
    m->wait_failed[at] = VS_CALL(cuEventRecord, (m->waits[at][1], waiter)) != CUDA_SUCCESS;
    m->wait_open[at] = false;
}

/* The operation this thread prepares (`vs_meter_arm`): its stream, and the
 * stall measured on it once opened. */
static __thread struct vs_meter_armed_s {
    bool armed;
    bool not_capturing; /* known already: no query needed */
    CUstream stream;
    vs_engine_device_t *device;
    int slot;
} vs_meter_armed;

void vs_meter_arm(CUstream stream, bool not_capturing)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_meter_armed =
        (struct vs_meter_armed_s){.armed = true, .not_capturing = not_capturing, .stream = stream, .slot = -1};
}

void vs_meter_may_stall(vs_engine_device_t *d)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (!vs_meter_armed.armed || vs_meter_armed.device != NULL)
        return;
    vs_meter_armed.device = d;
    /* A prefetch step may run for a launch being captured (a preparation
     * has asked already). */
    CUstream stream = vs_meter_armed.stream;
    bool capturing = !vs_meter_armed.not_capturing && vs_streams_may_be_capturing(stream);
    vs_meter_armed.slot = capturing ? -1 : vs_meter_stall_open(d, stream);
}

void vs_meter_disarm(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_meter_armed.device != NULL)
        vs_meter_stall_close(vs_meter_armed.device, vs_meter_armed.slot, vs_meter_armed.stream);
    vs_meter_armed = (struct vs_meter_armed_s){.slot = -1};
}

CUresult vs_meter_wait_for_copy(vs_engine_device_t *d, CUstream waiter, CUevent copied)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    if (vs_meter_armed.armed && vs_meter_armed.stream == waiter) {
        vs_meter_may_stall(d); /* closed with the operation's preparation */
        return vs_engine_wait_for_copy(waiter, copied);
    }
    int at = vs_meter_stall_open(d, waiter);
    CUresult rc = vs_engine_wait_for_copy(waiter, copied);
    vs_meter_stall_close(d, at, waiter);
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
    for (unsigned i = 0; i < VS_METER_MARKS && alive; i++)
        if (m->marks[i] != NULL)
            (void)VS_CALL(cuEventDestroy_v2, (m->marks[i]));
    *m = (vs_link_meter_t){0};
    d->regime = VS_REGIME_BALANCED;
}

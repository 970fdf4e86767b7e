/* sim_clock.c: the virtual clock (SIMCUDA_CLOCK=virtual).
 *
 * Modeled times are computed when work is submitted, so they depend only on
 * program order, never on thread timing. Each device has three engines: one
 * host-to-device copy engine, one device-to-host copy engine and one compute
 * engine (kernels, device-to-device copies, memsets). An operation is ready
 * at the latest of its stream's tail, the waited events and the submitting
 * thread's host clock; it starts in its engine's earliest idle gap at or
 * after that (`engine_reserve_locked`) and ends `cost` later; compute work
 * from a stream of a priority above the least starts when ready, ahead of
 * queued work (`engine_overtake_locked`). Host waits move the host clock
 * forward to the awaited time.
 *
 * Host costs (SIMCUDA_HOST_COSTS, on by default with the virtual clock):
 * every driver call advances the calling thread's own host clock by its cost
 * from a table (`sim_clock_host_call`, from `SIM_ENTER`; the per-GiB part of
 * sized calls through `sim_clock_host_sized`), and a host wait that waits
 * ends a wake-up after the awaited work. A costs file may give a call a
 * second cost, charged while the GPU is busy (`busy` lines). With costs off all threads share
 * one free host clock, as before host costs existed. Entry points:
 * `sim_clock_schedule`, `sim_clock_host_wait`, `sim_clock_host_call`.
 */
#include "sim_exec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_CLOCK_MAX_DEVICES 16

static pthread_once_t clock_once = PTHREAD_ONCE_INIT;
static bool clock_virtual;
static double bytes_per_s[SIM_ENGINE_COUNT];

/* ------------------------------------------------------------------------
 * Host costs (SIMCUDA_HOST_COSTS)
 *
 * With costs on, every driver call advances the calling thread's host clock
 * by its cost, a host wait that actually waits adds the wake-up, and each
 * thread has its own host clock. With costs off the host is free and all
 * threads share one host clock, which is the model as it was before host
 * costs existed.
 * ------------------------------------------------------------------------ */

typedef struct host_cost_s {
    uint64_t base_ns;
    uint64_t per_gib_ns;
} host_cost_t;

static bool costs_on;
static char costs_source[256] = "off"; /* "off", "default" or the file's path */
static host_cost_t cost_of[SIM_API_COUNT];
/* Rows the default table or the file named (the others cost `default`). */
static bool cost_named[SIM_API_COUNT];
/* A file's `busy` rows: what the call costs when some engine of some
 * device has work under way at the call's start on the calling thread's
 * host clock (`busy_named`); otherwise `cost_of`. */
static host_cost_t busy_cost_of[SIM_API_COUNT];
static bool busy_named[SIM_API_COUNT];
static uint64_t wakeup_ns;
/* The configuration error, reported by `sim_clock_check_config` at cuInit. */
static char costs_error[2048];

/* The requests whose cost may depend on a size (per GiB): the memory
 * calls that create, map, grant, unmap or release device memory and those
 * that pin or unpin host memory. */
static const char *const sized_requests[] = {
    "cuMemCreate",   "cuMemMap",          "cuMemSetAccess",    "cuMemUnmap",         "cuMemRelease",
    "cuMemHostAlloc", "cuMemAllocHost",   "cuMemFreeHost",     "cuMemHostRegister", "cuMemHostUnregister",
};

/* The default table, in microseconds. Measured on an NVIDIA H100 80GB HBM3,
 * driver 580.159.04 (CUDA 13.0), by bench/gpu/host_costs.c (medians;
 * docs/benchmarks.md, "On a real GPU"), unless marked as assumed or derived.
 * A name ending in `*` covers every request that starts with it. */
static const struct {
    const char *name;
    double base_us, per_gib_us;
} default_costs[] = {
    {"cuLaunchKernel", 2.69, 0},            /* measured */
    {"cuLaunchKernelEx", 2.69, 0},          /* assumed: the launch path */
    {"cuLaunchCooperativeKernel", 2.69, 0}, /* assumed: the launch path */
    {"cuGraphLaunch", 2.69, 0},             /* assumed: one submission */
    {"cuMemcpy*", 2.69, 0},                 /* assumed: a submission like a launch */
    {"cuMemset*", 2.69, 0},                 /* assumed: a submission like a launch */
    {"cuEventRecord", 0.17, 0},             /* measured */
    {"cuEventRecordWithFlags", 0.17, 0},    /* assumed: as cuEventRecord */
    {"cuEventQuery", 1.30, 0},              /* measured */
    {"cuStreamQuery", 1.30, 0},             /* assumed: as cuEventQuery */
    {"cuStreamWaitEvent", 0.14, 0},         /* measured */
    /* VMM at 2M / 32M / 360M: the largest median where the cost is flat,
     * a line above all three where it grows (cuMemRelease). */
    {"cuMemCreate", 13.2, 0},
    {"cuMemMap", 1.04, 0},
    {"cuMemSetAccess", 41.9, 0},
    {"cuMemUnmap", 24.9, 0},
    {"cuMemRelease", 23.0, 300.0},
    /* derived: create + map + grant, and unmap + release, of one region */
    {"cuMemAlloc", 56.1, 0},
    {"cuMemFree", 47.9, 0},
    {"cuMemHostAlloc", 0, 395099.0},        /* measured at 1 GiB */
    {"cuMemAllocHost", 0, 395099.0},        /* assumed: as cuMemHostAlloc */
    {"cuMemHostRegister", 0, 395099.0},     /* assumed: pinning, as cuMemHostAlloc */
    {"cuMemFreeHost", 0, 90225.0},          /* measured at 1 GiB */
    {"cuMemHostUnregister", 0, 90225.0},    /* assumed: as cuMemFreeHost */
};
/* measured: bench/gpu/host_costs.c's host_wait_wakeup on the H100 (the
 * host's cuEventSynchronize less the GPU time between events around a
 * 200 us kernel; median 0.82 us, 90th percentile 1.81). */
#define DEFAULT_WAKEUP_US 0.82
/* assumed: any other call; the cheapest measured calls, which do submit
 * work, cost 0.14 and 0.17 us, and a query of host-side state is no dearer. */
#define DEFAULT_OTHER_US 0.2

static uint64_t us_to_ns(double us)
{
    return (uint64_t)(us * 1000.0 + 0.5);
}

static bool request_is_sized(const char *request)
{
    for (size_t i = 0; i < sizeof sized_requests / sizeof sized_requests[0]; i++)
        if (strcmp(request, sized_requests[i]) == 0)
            return true;
    return false;
}

/* Sets the cost of every row `name` names: an exported symbol, a request
 * name, or a prefix ending in `*`; with `busy`, the cost while the GPU is
 * busy. Returns the number of rows set, or -EINVAL when a per-GiB cost is
 * given for a call that has no size. */
static int costs_set(const char *name, uint64_t base_ns, uint64_t per_gib_ns, bool busy)
{
    size_t length = strlen(name);
    bool prefix = length > 1 && name[length - 1] == '*';
    int matched = 0;
    for (int i = 0; i < SIM_API_COUNT; i++) {
        const sim_api_entry_t *row = &sim_api_table[i];
        bool match = prefix ? strncmp(row->request, name, length - 1) == 0
                            : strcmp(row->symbol, name) == 0 || strcmp(row->request, name) == 0;
        if (!match)
            continue;
        if (per_gib_ns != 0 && !request_is_sized(row->request))
            return -EINVAL;
        if (busy) {
            busy_cost_of[i] = (host_cost_t){base_ns, per_gib_ns};
            busy_named[i] = true;
        } else {
            cost_of[i] = (host_cost_t){base_ns, per_gib_ns};
            cost_named[i] = true;
        }
        matched++;
    }
    return matched;
}

static void costs_load_default(void)
{
    for (int i = 0; i < SIM_API_COUNT; i++) {
        cost_of[i] = (host_cost_t){us_to_ns(DEFAULT_OTHER_US), 0};
        cost_named[i] = false;
        busy_named[i] = false;
    }
    for (size_t i = 0; i < sizeof default_costs / sizeof default_costs[0]; i++)
        (void)costs_set(default_costs[i].name, us_to_ns(default_costs[i].base_us),
                        us_to_ns(default_costs[i].per_gib_us), false);
    wakeup_ns = us_to_ns(DEFAULT_WAKEUP_US);
}

/* A cost in microseconds: a plain non-negative decimal number. */
static int parse_us(const char *text, uint64_t *out)
{
    if (!((text[0] >= '0' && text[0] <= '9') || text[0] == '.'))
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    double us = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(us >= 0.0) || us > 1e12)
        return -EINVAL;
    *out = us_to_ns(us);
    return 0;
}

#define COSTS_FORMS                                                                                                   \
    "accepted: lines '[busy] NAME MICROSECONDS [MICROSECONDS_PER_GIB]', NAME a driver symbol or request name "       \
    "simcuda implements, a prefix ending in '*', 'wakeup' or 'default' (not after 'busy', which gives the cost "     \
    "while the GPU is busy); the per-GiB figure only for "                                                            \
    "cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease, cuMemHostAlloc, cuMemAllocHost, "              \
    "cuMemFreeHost, cuMemHostRegister, cuMemHostUnregister; '#' starts a comment"

/* Applies one line of a costs file. 0, or -EINVAL with `why` set. */
static int costs_apply_line(char *line, const char **why)
{
    char *comment = strchr(line, '#');
    if (comment != NULL)
        *comment = '\0';
    char *fields[4];
    int count = 0;
    char *save = NULL;
    for (char *f = strtok_r(line, " \t\r\n", &save); f != NULL; f = strtok_r(NULL, " \t\r\n", &save)) {
        if (count == 4) {
            *why = "too many fields";
            return -EINVAL;
        }
        fields[count++] = f;
    }
    if (count == 0)
        return 0;
    /* `busy NAME ...`: the same line, for the cost while the GPU is busy. */
    bool busy = strcmp(fields[0], "busy") == 0;
    if (busy) {
        for (int i = 1; i < count; i++)
            fields[i - 1] = fields[i];
        count--;
        if (count == 0) {
            *why = "'busy' without a name";
            return -EINVAL;
        }
    }
    if (count == 1) {
        *why = "a name without a cost";
        return -EINVAL;
    }
    if (count > 3) {
        *why = "too many fields";
        return -EINVAL;
    }
    uint64_t base_ns = 0, per_gib_ns = 0;
    if (parse_us(fields[1], &base_ns) != 0 || (count == 3 && parse_us(fields[2], &per_gib_ns) != 0)) {
        *why = "a cost that is not a non-negative number of microseconds";
        return -EINVAL;
    }
    if (strcmp(fields[0], "wakeup") == 0 || strcmp(fields[0], "default") == 0) {
        if (busy) {
            *why = "a busy cost for 'wakeup' or 'default'";
            return -EINVAL;
        }
        if (count == 3) {
            *why = "a per-GiB cost for a call that has no size";
            return -EINVAL;
        }
        if (strcmp(fields[0], "wakeup") == 0) {
            wakeup_ns = base_ns;
        } else {
            for (int i = 0; i < SIM_API_COUNT; i++)
                if (!cost_named[i])
                    cost_of[i].base_ns = base_ns;
        }
        return 0;
    }
    int matched = costs_set(fields[0], base_ns, per_gib_ns, busy);
    if (matched == -EINVAL) {
        *why = "a per-GiB cost for a call that has no size";
        return -EINVAL;
    }
    if (matched == 0) {
        *why = "a name simcuda does not implement";
        return -EINVAL;
    }
    return 0;
}

static void costs_load_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        snprintf(costs_error, sizeof costs_error,
                 "simcuda: SIMCUDA_HOST_COSTS=%.256s cannot be read (%s) (accepted: off, default, or a file whose %s)",
                 path, strerror(errno), COSTS_FORMS + strlen("accepted: "));
        return;
    }
    char line[512], copy[512];
    int number = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        number++;
        size_t length = strlen(line);
        if (length == sizeof line - 1 && line[length - 1] != '\n') {
            snprintf(costs_error, sizeof costs_error, "simcuda: SIMCUDA_HOST_COSTS=%.256s line %d: line too long (%s)",
                     path, number, COSTS_FORMS);
            break;
        }
        if (length > 0 && line[length - 1] == '\n')
            line[--length] = '\0';
        snprintf(copy, sizeof copy, "%s", line);
        const char *why = NULL;
        if (costs_apply_line(line, &why) != 0) {
            snprintf(costs_error, sizeof costs_error, "simcuda: SIMCUDA_HOST_COSTS=%.256s line %d '%.80s': %s (%s)",
                     path, number, copy, why, COSTS_FORMS);
            break;
        }
    }
    fclose(f);
}

static void costs_configure(void)
{
    const char *value = getenv("SIMCUDA_HOST_COSTS");
    if (!clock_virtual)
        return;
    if (value == NULL || value[0] == '\0' || strcmp(value, "default") == 0) {
        costs_load_default();
        costs_on = true;
        snprintf(costs_source, sizeof costs_source, "default");
    } else if (strcmp(value, "off") == 0) {
        costs_on = false;
    } else {
        costs_load_default();
        costs_load_file(value);
        if (costs_error[0] != '\0') {
            costs_on = false;
            return;
        }
        costs_on = true;
        snprintf(costs_source, sizeof costs_source, "%s", value);
    }
}

/* ------------------------------------------------------------------------
 * The clock's state
 * ------------------------------------------------------------------------ */

/* One thread's host clock. With costs on, `now_ns` is written only by its
 * own thread (relaxed atomics let the report read it); with costs off every
 * thread uses `shared_host`, under `clock_lock`. Thread records are kept
 * until exit (a thread that ends leaves its record to the next new thread,
 * its totals folded into `retired`). */
typedef struct host_thread_s {
    _Atomic uint64_t now_ns;
    _Atomic uint64_t charged_ns; /* call costs */
    _Atomic uint64_t waited_ns;  /* host waits, wake-ups included */
    _Atomic uint64_t calls;
    unsigned id;
    bool live;
    /* The line of a sized call waiting for its size (SIMCUDA_TIMELINE). */
    int pending_id;
    uint64_t pending_start, pending_end;
    /* The last call charged its busy cost: so is its size part. */
    bool priced_busy;
    struct host_thread_s *next;
} host_thread_t;

/* Guards everything below, and the thread list. */
static pthread_mutex_t clock_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t end_ns;
/* The busy intervals of one engine, sorted by start. An operation takes the
 * earliest gap at or after its ready time that is long enough, so work a
 * stream submits later but that is ready sooner runs in a gap before work
 * still waiting on its stream or events, as on a GPU whose streams feed
 * separate hardware queues. The oldest intervals are dropped when the list
 * is full; nothing then starts before the end of the last one dropped. */
#define ENGINE_INTERVALS 512
typedef struct engine_busy_s {
    uint64_t floor_ns;
    unsigned count;
    struct {
        uint64_t start, end;
    } interval[ENGINE_INTERVALS];
} engine_busy_t;
static engine_busy_t engine_busy[SIM_CLOCK_MAX_DEVICES][SIM_ENGINE_COUNT];
static uint64_t engine_busy_ns[SIM_CLOCK_MAX_DEVICES][SIM_ENGINE_COUNT];
static host_thread_t shared_host = {.id = 0, .live = true, .pending_id = -1};
static host_thread_t *host_threads;
static unsigned host_thread_count;
static uint64_t retired_charged_ns, retired_waited_ns, retired_calls;
static pthread_key_t host_thread_key;
/* The latest host time of any thread: where a new thread's clock starts. */
static _Atomic uint64_t host_latest_ns;
static _Thread_local host_thread_t *this_host;
/* SIMCUDA_TIMELINE: one line per scheduled operation and, with costs on,
 * per host call and host wait, for reading where an engine idled. */
static FILE *timeline;

static void host_thread_exit(void *arg);

static void clock_configure(void)
{
    const char *mode = getenv("SIMCUDA_CLOCK");
    if (mode != NULL && strcmp(mode, "virtual") == 0) {
        clock_virtual = true;
    } else if (mode != NULL && mode[0] != '\0' && strcmp(mode, "real") != 0) {
        fprintf(stderr, "simcuda: SIMCUDA_CLOCK=%s is not understood (use 'real' or 'virtual'); using real\n", mode);
    }
    bytes_per_s[SIM_ENGINE_H2D] = sim_env_double("SIMCUDA_H2D_GBPS", 50.0) * 1e9;
    bytes_per_s[SIM_ENGINE_D2H] = sim_env_double("SIMCUDA_D2H_GBPS", 50.0) * 1e9;
    bytes_per_s[SIM_ENGINE_COMPUTE] = sim_env_double("SIMCUDA_DEVICE_GBPS", 2000.0) * 1e9;
    bytes_per_s[SIM_ENGINE_NONE] = bytes_per_s[SIM_ENGINE_COMPUTE];
    costs_configure();
    if (costs_on && pthread_key_create(&host_thread_key, host_thread_exit) != 0)
        costs_on = false; /* no way to see threads end: the shared clock */
    const char *timeline_path = getenv("SIMCUDA_TIMELINE");
    if (clock_virtual && timeline_path != NULL && timeline_path[0] != '\0') {
        timeline = fopen(timeline_path, "we");
        if (timeline == NULL)
            fprintf(stderr, "simcuda: cannot write SIMCUDA_TIMELINE=%s; no timeline\n", timeline_path);
        else {
            setvbuf(timeline, NULL, _IOLBF, 0); /* readable while the program runs */
            fputs("# device engine start_ns end_ns host_ns what\n", timeline);
            if (costs_on)
                fprintf(timeline, "# host tTHREAD start_ns end_ns - call|wait (SIMCUDA_HOST_COSTS=%s)\n",
                        costs_source);
        }
    }
    for (int e = 0; e < SIM_ENGINE_COUNT; e++) {
        if (!(bytes_per_s[e] > 0.0)) {
            fprintf(stderr, "simcuda: bandwidths must be positive; using the defaults\n");
            bytes_per_s[e] = e == SIM_ENGINE_H2D || e == SIM_ENGINE_D2H ? 50e9 : 2000e9;
        }
    }
}

bool sim_clock_is_virtual(void)
{
    pthread_once(&clock_once, clock_configure);
    return clock_virtual;
}

void sim_clock_check_config(void)
{
    pthread_once(&clock_once, clock_configure);
    if (costs_error[0] == '\0')
        return;
    fprintf(stderr, "%s\n", costs_error);
    exit(2);
}

static void latest_advance(uint64_t ns)
{
    uint64_t seen = atomic_load_explicit(&host_latest_ns, memory_order_relaxed);
    while (ns > seen &&
           !atomic_compare_exchange_weak_explicit(&host_latest_ns, &seen, ns, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

/* Writes the pending line of a sized call. Caller holds `clock_lock`. */
static void pending_flush_locked(host_thread_t *t)
{
    if (t->pending_id < 0)
        return;
    if (timeline != NULL)
        fprintf(timeline, "host t%u %" PRIu64 " %" PRIu64 " - %s\n", t->id, t->pending_start, t->pending_end,
                sim_api_table[t->pending_id].symbol);
    t->pending_id = -1;
}

static void host_thread_exit(void *arg)
{
    host_thread_t *t = arg;
    pthread_mutex_lock(&clock_lock);
    pending_flush_locked(t);
    retired_charged_ns += atomic_load_explicit(&t->charged_ns, memory_order_relaxed);
    retired_waited_ns += atomic_load_explicit(&t->waited_ns, memory_order_relaxed);
    retired_calls += atomic_load_explicit(&t->calls, memory_order_relaxed);
    atomic_store_explicit(&t->charged_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&t->waited_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&t->calls, 0, memory_order_relaxed);
    t->live = false;
    pthread_mutex_unlock(&clock_lock);
}

/* The calling thread's host clock. A thread's first call starts its clock
 * at the latest host time any thread has reached. */
static host_thread_t *host_thread(void)
{
    if (!costs_on)
        return &shared_host;
    if (this_host != NULL)
        return this_host;
    pthread_mutex_lock(&clock_lock);
    host_thread_t *t = NULL;
    for (host_thread_t *u = host_threads; u != NULL && t == NULL; u = u->next)
        if (!u->live)
            t = u;
    if (t == NULL) {
        t = calloc(1, sizeof *t);
        if (t == NULL) {
            pthread_mutex_unlock(&clock_lock);
            return &shared_host; /* out of memory: share the fallback clock */
        }
        t->id = ++host_thread_count;
        t->next = host_threads;
        host_threads = t;
    }
    t->live = true;
    t->pending_id = -1;
    atomic_store_explicit(&t->now_ns, atomic_load_explicit(&host_latest_ns, memory_order_relaxed),
                          memory_order_relaxed);
    pthread_mutex_unlock(&clock_lock);
    this_host = t;
    (void)pthread_setspecific(host_thread_key, t);
    return t;
}

/* Advances the thread's clock by `cost_ns` of call `id`. */
typedef enum {
    HOST_CHARGE_FIXED, /* a call's fixed cost: starts its timeline entry */
    HOST_CHARGE_SIZED, /* its size part, last: ends the entry */
    HOST_CHARGE_MORE,  /* more of its fixed cost, before the size part */
} host_charge_t;

static void host_charge(sim_api_id_t id, uint64_t cost_ns, host_charge_t part)
{
    host_thread_t *t = host_thread();
    if (t == &shared_host)
        return; /* costs off (or no record): the host is free */
    uint64_t start = atomic_load_explicit(&t->now_ns, memory_order_relaxed), end = start + cost_ns;
    atomic_store_explicit(&t->now_ns, end, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->charged_ns, cost_ns, memory_order_relaxed);
    latest_advance(end);
    if (timeline == NULL)
        return;
    pthread_mutex_lock(&clock_lock);
    if (part != HOST_CHARGE_FIXED) {
        /* The size part, or more of the fixed cost, of the call that is
         * pending. */
        if (t->pending_id == (int)id)
            t->pending_end = end;
        if (part == HOST_CHARGE_SIZED)
            pending_flush_locked(t);
    } else {
        pending_flush_locked(t);
        if (request_is_sized(sim_api_table[id].request)) {
            t->pending_id = (int)id;
            t->pending_start = start;
            t->pending_end = end;
        } else {
            fprintf(timeline, "host t%u %" PRIu64 " %" PRIu64 " - %s\n", t->id, start, end, sim_api_table[id].symbol);
        }
    }
    pthread_mutex_unlock(&clock_lock);
}

void sim_clock_host_call_priced(sim_api_id_t id, uint64_t cost_ns)
{
    if (!sim_clock_is_virtual() || !costs_on)
        return;
    atomic_fetch_add_explicit(&host_thread()->calls, 1, memory_order_relaxed);
    host_charge(id, cost_ns, HOST_CHARGE_FIXED);
}

static unsigned engine_first_ending_after(const engine_busy_t *busy, uint64_t at_ns);

/* Whether some engine of some device has work under way at `at_ns`. */
static bool gpu_busy_at(uint64_t at_ns)
{
    bool busy = false;
    pthread_mutex_lock(&clock_lock);
    for (int device = 0; device < SIM_CLOCK_MAX_DEVICES && !busy; device++)
        for (int engine = 0; engine < SIM_ENGINE_COUNT && !busy; engine++) {
            const engine_busy_t *b = &engine_busy[device][engine];
            unsigned at = engine_first_ending_after(b, at_ns);
            busy = at < b->count && b->interval[at].start <= at_ns;
        }
    pthread_mutex_unlock(&clock_lock);
    return busy;
}

/* The costs of `id` for the calling thread's call starting now: its busy
 * row when it has one and the GPU is busy then. */
static const host_cost_t *host_cost_now(sim_api_id_t id)
{
    host_thread_t *t = host_thread();
    t->priced_busy = busy_named[id] && gpu_busy_at(atomic_load_explicit(&t->now_ns, memory_order_relaxed));
    return t->priced_busy ? &busy_cost_of[id] : &cost_of[id];
}

/* The costs of `id` for the rest of the call just charged. */
static const host_cost_t *host_cost_same(sim_api_id_t id)
{
    return host_thread()->priced_busy && busy_named[id] ? &busy_cost_of[id] : &cost_of[id];
}

void sim_clock_host_call(sim_api_id_t id)
{
    if (!sim_clock_is_virtual() || !costs_on)
        return;
    sim_clock_host_call_priced(id, host_cost_now(id)->base_ns);
}

void sim_clock_host_sized(sim_api_id_t id, uint64_t bytes)
{
    if (!sim_clock_is_virtual() || !costs_on)
        return;
    uint64_t per_gib = host_cost_same(id)->per_gib_ns;
    host_charge(id, (uint64_t)((double)per_gib * (double)bytes / (double)(1ull << 30) + 0.5), HOST_CHARGE_SIZED);
}

void sim_clock_host_more(sim_api_id_t id, sim_api_id_t priced_as, size_t count, uint64_t bytes)
{
    if (!sim_clock_is_virtual() || !costs_on || count == 0)
        return;
    const host_cost_t *c = host_cost_same(priced_as);
    uint64_t per_gib = c->per_gib_ns;
    uint64_t cost = c->base_ns * (uint64_t)count +
                    (uint64_t)((double)per_gib * (double)bytes / (double)(1ull << 30) + 0.5);
    host_charge(id, cost, HOST_CHARGE_MORE);
}

bool sim_clock_host_polls_virtually(sim_api_id_t id)
{
    return sim_clock_is_virtual() && costs_on && cost_of[id].base_ns > 0;
}

bool sim_clock_host_reached(uint64_t at_ns)
{
    return atomic_load_explicit(&host_thread()->now_ns, memory_order_relaxed) >= at_ns;
}

uint64_t sim_clock_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t sim_clock_transfer_ns(sim_engine_t engine, uint64_t bytes)
{
    pthread_once(&clock_once, clock_configure);
    /* Rounded to the nearest ns so that 1e9 bytes at 50 GB/s is exactly
     * 20 ms. */
    return (uint64_t)((double)bytes * 1e9 / bytes_per_s[engine] + 0.5);
}

/* The first of `busy`'s intervals that ends after `at_ns` (`count` when
 * none): they are sorted and disjoint, so their ends rise and a binary
 * search finds it. */
static unsigned engine_first_ending_after(const engine_busy_t *busy, uint64_t at_ns)
{
    unsigned at = 0, past = busy->count;
    while (at < past) {
        unsigned mid = at + (past - at) / 2;
        if (busy->interval[mid].end <= at_ns)
            at = mid + 1;
        else
            past = mid;
    }
    return at;
}

/* Places `cost_ns` of work on engine `busy` in its earliest gap at or after
 * `ready_ns` and returns its start. Caller holds `clock_lock`. */
static uint64_t engine_reserve_locked(engine_busy_t *busy, uint64_t ready_ns, uint64_t cost_ns)
{
    uint64_t start = ready_ns > busy->floor_ns ? ready_ns : busy->floor_ns;
    /* From the first interval ending after `start`, the gaps are tried in
     * order. */
    unsigned at = engine_first_ending_after(busy, start);
    for (; at < busy->count; at++) {
        if (start + cost_ns <= busy->interval[at].start)
            break;
        start = busy->interval[at].end;
    }
    if (cost_ns == 0)
        return start;
    if (busy->count == ENGINE_INTERVALS) {
        /* Full: the oldest interval becomes the floor. */
        if (busy->interval[0].end > busy->floor_ns)
            busy->floor_ns = busy->interval[0].end;
        memmove(&busy->interval[0], &busy->interval[1], (busy->count - 1) * sizeof busy->interval[0]);
        busy->count--;
        if (at > 0)
            at--;
        if (start < busy->floor_ns)
            return engine_reserve_locked(busy, start, cost_ns);
    }
    /* Merge with a neighbour it touches, else insert at `at`. */
    if (at > 0 && busy->interval[at - 1].end == start) {
        busy->interval[at - 1].end = start + cost_ns;
        if (at < busy->count && busy->interval[at].start == start + cost_ns) {
            busy->interval[at - 1].end = busy->interval[at].end;
            memmove(&busy->interval[at], &busy->interval[at + 1], (busy->count - at - 1) * sizeof busy->interval[0]);
            busy->count--;
        }
        return start;
    }
    if (at < busy->count && busy->interval[at].start == start + cost_ns) {
        busy->interval[at].start = start;
        return start;
    }
    memmove(&busy->interval[at + 1], &busy->interval[at], (busy->count - at) * sizeof busy->interval[0]);
    busy->interval[at].start = start;
    busy->interval[at].end = start + cost_ns;
    busy->count++;
    return start;
}

/* Places `cost_ns` of work from a stream of a priority above the least on
 * engine `busy`: the GPU's scheduler gives it the SMs as it becomes ready,
 * ahead of work queued from lower-priority streams (compute preemption at
 * thread-block boundaries), so it starts at `ready_ns` even inside a busy
 * stretch. The queued work it overtakes keeps the times fixed at its
 * submission, but the stretch ends `cost_ns` later, pushing the stretches it
 * then reaches, so that the engine's time is not given twice and work
 * submitted afterwards starts as late as it would have. Ready in an idle
 * gap, it is placed as any other work. Returns its start. Caller holds
 * `clock_lock`. */
static uint64_t engine_overtake_locked(engine_busy_t *busy, uint64_t ready_ns, uint64_t cost_ns)
{
    uint64_t start = ready_ns > busy->floor_ns ? ready_ns : busy->floor_ns;
    unsigned at = engine_first_ending_after(busy, start);
    if (cost_ns == 0 || at == busy->count || busy->interval[at].start > start)
        return engine_reserve_locked(busy, start, cost_ns);
    uint64_t end = busy->interval[at].end + cost_ns;
    unsigned next = at + 1;
    while (next < busy->count && busy->interval[next].start <= end) {
        end += busy->interval[next].end - busy->interval[next].start;
        next++;
    }
    busy->interval[at].end = end;
    memmove(&busy->interval[at + 1], &busy->interval[next], (busy->count - next) * sizeof busy->interval[0]);
    busy->count -= next - at - 1;
    return start;
}

uint64_t sim_clock_schedule(int device, sim_engine_t engine, uint64_t ready_ns, uint64_t cost_ns, bool overtakes,
                            const char *what)
{
    if (!sim_clock_is_virtual())
        return 0;
    int slot = device < 0 ? 0 : device % SIM_CLOCK_MAX_DEVICES;
    host_thread_t *t = host_thread();
    pthread_mutex_lock(&clock_lock);
    uint64_t host_now = atomic_load_explicit(&t->now_ns, memory_order_relaxed);
    uint64_t start = ready_ns > host_now ? ready_ns : host_now;
    if (engine != SIM_ENGINE_NONE)
        start = overtakes ? engine_overtake_locked(&engine_busy[slot][engine], start, cost_ns)
                          : engine_reserve_locked(&engine_busy[slot][engine], start, cost_ns);
    uint64_t end = start + cost_ns;
    if (engine != SIM_ENGINE_NONE)
        engine_busy_ns[slot][engine] += cost_ns;
    if (end > end_ns)
        end_ns = end;
    if (timeline != NULL && engine != SIM_ENGINE_NONE) {
        static const char *const names[SIM_ENGINE_COUNT] = {"none", "h2d", "d2h", "compute"};
        fprintf(timeline, "%d %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %s\n", slot, names[engine], start, end, host_now,
                what);
    }
    pthread_mutex_unlock(&clock_lock);
    return end;
}

void sim_clock_host_wait(uint64_t until_ns)
{
    if (!sim_clock_is_virtual())
        return;
    host_thread_t *t = host_thread();
    pthread_mutex_lock(&clock_lock);
    uint64_t now = atomic_load_explicit(&t->now_ns, memory_order_relaxed);
    if (until_ns > now) {
        /* The host sleeps until the work ends, then wakes up. */
        uint64_t woke = until_ns + (t == &shared_host ? 0 : wakeup_ns);
        atomic_store_explicit(&t->now_ns, woke, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->waited_ns, woke - now, memory_order_relaxed);
        latest_advance(woke);
        if (timeline != NULL && t != &shared_host) {
            pending_flush_locked(t);
            fprintf(timeline, "host t%u %" PRIu64 " %" PRIu64 " - wait\n", t->id, now, woke);
        }
        now = woke;
    }
    if (now > end_ns)
        end_ns = now;
    pthread_mutex_unlock(&clock_lock);
}

uint64_t sim_clock_host_now(void)
{
    host_thread_t *t = host_thread();
    pthread_mutex_lock(&clock_lock);
    uint64_t now = atomic_load_explicit(&t->now_ns, memory_order_relaxed);
    pthread_mutex_unlock(&clock_lock);
    return now;
}

uint64_t sim_clock_modeled_ns(void)
{
    if (!sim_clock_is_virtual())
        return 0;
    pthread_mutex_lock(&clock_lock);
    uint64_t end = end_ns;
    uint64_t latest = atomic_load_explicit(&host_latest_ns, memory_order_relaxed);
    pthread_mutex_unlock(&clock_lock);
    return latest > end ? latest : end;
}

void sim_clock_report(FILE *out)
{
    if (!sim_clock_is_virtual()) {
        fprintf(out, "  \"clock\": {\"virtual\": false},\n");
        return;
    }
    uint64_t modeled = sim_clock_modeled_ns();
    pthread_mutex_lock(&clock_lock);
    fprintf(out, "  \"clock\": {\"virtual\": true, \"host_costs\": \"");
    for (const char *c = costs_on ? costs_source : "off"; *c != '\0'; c++)
        fprintf(out, *c == '"' || *c == '\\' ? "\\%c" : (unsigned char)*c < 0x20 ? "?" : "%c", *c);
    fprintf(out, "\", \"modeled_ns\": %" PRIu64 ",\n    \"engines\": [", modeled);
    int devices = sim_device_count < SIM_CLOCK_MAX_DEVICES ? sim_device_count : SIM_CLOCK_MAX_DEVICES;
    for (int d = 0; d < devices; d++) {
        uint64_t busy = engine_busy_ns[d][SIM_ENGINE_COMPUTE];
        double idle = modeled > 0 ? 1.0 - (double)busy / (double)modeled : 0.0;
        fprintf(out,
                "%s\n      {\"ordinal\": %d, \"compute_busy_ns\": %" PRIu64 ", \"h2d_busy_ns\": %" PRIu64
                ", \"d2h_busy_ns\": %" PRIu64 ", \"gpu_idle_fraction\": %.6f}",
                d ? "," : "", d, busy, engine_busy_ns[d][SIM_ENGINE_H2D], engine_busy_ns[d][SIM_ENGINE_D2H],
                idle < 0.0 ? 0.0 : idle);
    }
    fprintf(out, "%s],\n    \"host_threads\": [", devices ? "\n    " : "");
    bool first = true;
    for (host_thread_t *t = host_threads; t != NULL; t = t->next) {
        if (!t->live)
            continue;
        fprintf(out,
                "%s\n      {\"thread\": %u, \"calls\": %" PRIu64 ", \"charged_ns\": %" PRIu64 ", \"waited_ns\": %" PRIu64
                ", \"now_ns\": %" PRIu64 "}",
                first ? "" : ",", t->id, (uint64_t)atomic_load(&t->calls), (uint64_t)atomic_load(&t->charged_ns),
                (uint64_t)atomic_load(&t->waited_ns), (uint64_t)atomic_load(&t->now_ns));
        first = false;
    }
    fprintf(out,
            "%s],\n    \"ended_threads\": {\"calls\": %" PRIu64 ", \"charged_ns\": %" PRIu64 ", \"waited_ns\": %" PRIu64
            "}\n  },\n",
            first ? "" : "\n    ", retired_calls, retired_charged_ns, retired_waited_ns);
    pthread_mutex_unlock(&clock_lock);
}

/* At exit: the calling thread's pending line and, in the timeline, the
 * summary (per device, how long each engine was busy and the compute
 * engine's idle fraction over the whole modeled run). */
__attribute__((destructor)) static void sim_clock_at_exit(void)
{
    if (!clock_virtual || timeline == NULL)
        return;
    uint64_t modeled = sim_clock_modeled_ns();
    pthread_mutex_lock(&clock_lock);
    if (this_host != NULL)
        pending_flush_locked(this_host);
    int devices = sim_device_count < SIM_CLOCK_MAX_DEVICES ? sim_device_count : SIM_CLOCK_MAX_DEVICES;
    for (int d = 0; d < devices; d++) {
        uint64_t busy = engine_busy_ns[d][SIM_ENGINE_COMPUTE];
        fprintf(timeline,
                "# summary device %d: modeled %" PRIu64 " ns, compute busy %" PRIu64 " ns, gpu idle fraction %.4f, "
                "h2d busy %" PRIu64 " ns, d2h busy %" PRIu64 " ns\n",
                d, modeled, busy, modeled > 0 ? 1.0 - (double)busy / (double)modeled : 0.0,
                engine_busy_ns[d][SIM_ENGINE_H2D], engine_busy_ns[d][SIM_ENGINE_D2H]);
    }
    for (host_thread_t *t = host_threads; t != NULL; t = t->next)
        if (t->live)
            fprintf(timeline,
                    "# summary host t%u: %" PRIu64 " calls charged %" PRIu64 " ns, waited %" PRIu64 " ns, at %" PRIu64
                    " ns\n",
                    t->id, (uint64_t)atomic_load(&t->calls), (uint64_t)atomic_load(&t->charged_ns),
                    (uint64_t)atomic_load(&t->waited_ns), (uint64_t)atomic_load(&t->now_ns));
    fflush(timeline);
    pthread_mutex_unlock(&clock_lock);
}

SIM_EXPORT int simcuda_clock_is_virtual(void)
{
    return sim_clock_is_virtual() ? 1 : 0;
}

SIM_EXPORT uint64_t simcuda_clock_now_ns(void)
{
    return sim_clock_is_virtual() ? sim_clock_host_now() : sim_clock_wall_ns();
}

SIM_EXPORT uint64_t simcuda_clock_end_ns(void)
{
    return sim_clock_modeled_ns();
}

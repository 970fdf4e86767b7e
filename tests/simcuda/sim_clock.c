/* sim_clock.c: the virtual clock (SIMCUDA_CLOCK=virtual).
 *
 * Modeled times are computed when work is submitted, so they depend only on
 * program order, never on thread timing. Each device has three engines: one
 * host-to-device copy engine, one device-to-host copy engine and one compute
 * engine (kernels, device-to-device copies, memsets). An operation starts at
 * the latest of its stream's tail, the waited events, its engine's free time
 * and the host clock; it ends `cost` later. Host waits move the host clock
 * forward to the awaited time. Entry points: `sim_clock_schedule`,
 * `sim_clock_host_wait`.
 */
#include "sim_exec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_CLOCK_MAX_DEVICES 16

static pthread_once_t clock_once = PTHREAD_ONCE_INIT;
static bool clock_virtual;
static double bytes_per_s[SIM_ENGINE_COUNT];

/* Guards everything below. */
static pthread_mutex_t clock_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t host_now_ns;
static uint64_t end_ns;
static uint64_t engine_free_ns[SIM_CLOCK_MAX_DEVICES][SIM_ENGINE_COUNT];
/* SIMCUDA_TIMELINE: one line per scheduled operation, for reading where an
 * engine idled. */
static FILE *timeline;

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
    const char *timeline_path = getenv("SIMCUDA_TIMELINE");
    if (clock_virtual && timeline_path != NULL && timeline_path[0] != '\0') {
        timeline = fopen(timeline_path, "we");
        if (timeline == NULL)
            fprintf(stderr, "simcuda: cannot write SIMCUDA_TIMELINE=%s; no timeline\n", timeline_path);
        else {
            setvbuf(timeline, NULL, _IOLBF, 0); /* readable while the program runs */
            fputs("# device engine start_ns end_ns host_ns what\n", timeline);
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

uint64_t sim_clock_schedule(int device, sim_engine_t engine, uint64_t ready_ns, uint64_t cost_ns, const char *what)
{
    if (!sim_clock_is_virtual())
        return 0;
    int slot = device < 0 ? 0 : device % SIM_CLOCK_MAX_DEVICES;
    pthread_mutex_lock(&clock_lock);
    uint64_t start = ready_ns > host_now_ns ? ready_ns : host_now_ns;
    if (engine != SIM_ENGINE_NONE && engine_free_ns[slot][engine] > start)
        start = engine_free_ns[slot][engine];
    uint64_t end = start + cost_ns;
    if (engine != SIM_ENGINE_NONE)
        engine_free_ns[slot][engine] = end;
    if (end > end_ns)
        end_ns = end;
    if (timeline != NULL && engine != SIM_ENGINE_NONE) {
        static const char *const names[SIM_ENGINE_COUNT] = {"none", "h2d", "d2h", "compute"};
        fprintf(timeline, "%d %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %s\n", slot, names[engine], start, end, host_now_ns,
                what);
    }
    pthread_mutex_unlock(&clock_lock);
    return end;
}

void sim_clock_host_wait(uint64_t until_ns)
{
    if (!sim_clock_is_virtual())
        return;
    pthread_mutex_lock(&clock_lock);
    if (until_ns > host_now_ns)
        host_now_ns = until_ns;
    if (host_now_ns > end_ns)
        end_ns = host_now_ns;
    pthread_mutex_unlock(&clock_lock);
}

uint64_t sim_clock_host_now(void)
{
    pthread_mutex_lock(&clock_lock);
    uint64_t now = host_now_ns;
    pthread_mutex_unlock(&clock_lock);
    return now;
}

uint64_t sim_clock_modeled_ns(void)
{
    if (!sim_clock_is_virtual())
        return 0;
    pthread_mutex_lock(&clock_lock);
    uint64_t end = end_ns;
    pthread_mutex_unlock(&clock_lock);
    return end;
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

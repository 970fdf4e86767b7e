/* offload_throughput.c: how much of the modeled host link the offload mode's
 * eviction and restore traffic uses, on simcuda's virtual clock.
 *
 * Run as `offload_throughput SHIM`. The program is two programs in one:
 *
 * - The parent (not preloaded) runs the workload in one child process per
 *   scenario, with LD_PRELOAD=SHIM, SIMCUDA_CLOCK=virtual, a 1 GiB simulated
 *   device, VRAM_LIMIT=256M (offload mode) and the link of SIMCUDA_H2D_GBPS /
 *   SIMCUDA_D2H_GBPS (default 50 each, about an H100's PCIe Gen5 link). It
 *   prints the achieved bandwidth per direction against the link, the ideal
 *   time against the modeled one, and the met/MISSED line of the goal (at
 *   least 95% of the link each way). It exits 0 either way: a benchmark
 *   reports, it does not gate. It exits 1 only when something is broken (a
 *   child failed, data came back wrong, nothing moved, an output is missing).
 * - The child (`--child`) allocates 16 buffers of 64 MiB, then makes passes
 *   over them, touching each in turn with a kernel whose modeled cost is
 *   1 us (it checks and rewrites a few words at both ends of the buffer, so
 *   both 32 MiB copy chunks of every restore are verified).
 *
 * The measured window is the passes after the first (the steady state). At
 * its two ends the child synchronises, reads the end of the virtual clock,
 * and reads the shim's counters (evictions, restores, bytes each way) from
 * its own live snapshot (shim_counters.h): nothing moves while it waits for
 * a publication, so the counts are exact. They are the shim's own figures:
 * the parent checks them against the driver's, comparing the shim's exit
 * summary with simcuda's report (`copied.htod`, `copied.dtoh`) over the
 * whole run, and says so when they differ.
 *
 * Two scenarios:
 * - one stream: every touch on one application stream, as most programs
 *   do. This is the figure the goal applies to.
 * - a stream per buffer: buffer j is only ever touched on stream j. It
 *   separates the two ordering constraints an eviction has (the shim makes
 *   its copy-out wait for the streams that used the victim, and it waits for
 *   the copy-out before restoring): with a stream per buffer the first no
 *   longer includes the restore issued just before.
 */
#include <cuda.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim_counters.h"
#include "simcuda.h"
#include "vs_test.h"

#define BUFFERS 16
#define BUFFER_BYTES (64ull << 20)
#define DEVICE_MEM "1G"
#define LIMIT "256M"
#define WARMUP_PASSES 1
#define MEASURED_PASSES 4
/* Modeled cost of one touch: small against the 1.34 ms a 64 MiB copy takes
 * at 50 GB/s, so the copies decide the time. */
#define TOUCH_COST_NS 1000
/* Words checked and rewritten at each end of a buffer. */
#define TOUCH_WORDS 16
#define GOAL_FRACTION 0.95
#define DEFAULT_GBPS "50"
/* Set in the children: they must find the shim in front. */
#define CHILD_MARK "VS_OFFLOAD_THROUGHPUT_CHILD"

typedef enum scenario_e {
    SCENARIO_ONE_STREAM,
    SCENARIO_STREAM_PER_BUFFER,
    SCENARIO_COUNT
} scenario_t;

static const char *const scenario_names[SCENARIO_COUNT] = {"one stream", "a stream per buffer"};

/* ---- The child: the workload under the shim ------------------------------ */

/* Words that came back different from what the previous touch wrote. */
static atomic_uint_fast64_t touch_errors;

/* touch(uint32_t *buffer, uint32_t expect, uint32_t next): checks that the
 * words at both ends hold `expect + i` (unless `expect` is 0: first touch),
 * then writes `next + i`. */
static void touch_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    uint32_t *words = *(uint32_t **)args[0];
    uint32_t expect = *(const uint32_t *)args[1], next = *(const uint32_t *)args[2];
    const uint64_t count = BUFFER_BYTES / sizeof(uint32_t);
    (void)launch;
    (void)user;
    for (uint64_t i = 0; i < 2 * TOUCH_WORDS; i++) {
        uint64_t at = i < TOUCH_WORDS ? i : count - 2 * TOUCH_WORDS + i;
        if (expect != 0 && words[at] != expect + (uint32_t)at)
            atomic_fetch_add(&touch_errors, 1);
        words[at] = next + (uint32_t)at;
    }
}

/* What pass `pass` writes into buffer `buffer`: never 0. */
static uint32_t touch_seed(int pass, int buffer)
{
    return (uint32_t)(pass * BUFFERS + buffer + 1) * 2654435761u | 1u;
}

static int child_run(scenario_t scenario, const char *result_path)
{
    static const size_t sizes[] = {sizeof(CUdeviceptr), sizeof(uint32_t), sizeof(uint32_t)};
    simcuda_kernel_desc_t desc = {.name = "bench_offload_touch", .param_count = 3, .param_sizes = sizes,
                                  .fn = touch_kernel, .cost_ns = TOUCH_COST_NS};
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    CUfunction touch;
    CUstream streams[BUFFERS];
    CUdeviceptr buffers[BUFFERS];
    int stream_count = scenario == SCENARIO_ONE_STREAM ? 1 : BUFFERS;
    shim_counters_t moved_at_start, moved_at_end;
    uint64_t start_ns = 0, end_ns = 0;
    const vs_snapshot_header_t *snapshot = NULL;

    if (simcuda_register_kernel(&desc) != 0) {
        fprintf(stderr, "offload_throughput: cannot register the touch kernel\n");
        return 1;
    }
    VS_CHECK(cuInit(0));
    VS_CHECK(cuDeviceGet(&dev, 0));
    VS_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    VS_CHECK(cuCtxSetCurrent(ctx));
    VS_CHECK(cuModuleLoadData(&module, "benchmark"));
    VS_CHECK(cuModuleGetFunction(&touch, module, "bench_offload_touch"));
    for (int s = 0; s < stream_count; s++)
        VS_CHECK(cuStreamCreate(&streams[s], CU_STREAM_NON_BLOCKING));
    for (int j = 0; j < BUFFERS; j++)
        VS_CHECK(cuMemAlloc(&buffers[j], BUFFER_BYTES));

    for (int pass = 0; pass <= WARMUP_PASSES + MEASURED_PASSES; pass++) {
        if (pass == WARMUP_PASSES || pass == WARMUP_PASSES + MEASURED_PASSES) {
            VS_CHECK(cuCtxSynchronize());
            bool start = pass == WARMUP_PASSES;
            /* The shim publishes once it has loaded the driver, at its
             * first hooked call: open it now. */
            if (snapshot == NULL && (snapshot = shim_counters_open()) == NULL)
                return 1;
            *(start ? &start_ns : &end_ns) = simcuda_clock_end_ns();
            if (shim_counters_read(snapshot, start ? &moved_at_start : &moved_at_end) != 0)
                return 1;
            if (!start)
                break;
        }
        for (int j = 0; j < BUFFERS; j++) {
            uint32_t expect = pass == 0 ? 0 : touch_seed(pass - 1, j), next = touch_seed(pass, j);
            void *params[] = {&buffers[j], &expect, &next};
            VS_CHECK(cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, streams[j % stream_count], params, NULL));
        }
    }

    FILE *out = fopen(result_path, "w");
    if (out == NULL) {
        perror(result_path);
        return 1;
    }
    fprintf(out,
            "modeled_ns %" PRIu64 " errors %" PRIu64 " evictions %" PRIu64 " restores %" PRIu64 " to_host %" PRIu64
            " to_device %" PRIu64 "\n",
            end_ns - start_ns, (uint64_t)atomic_load(&touch_errors), moved_at_end.evictions - moved_at_start.evictions,
            moved_at_end.restores - moved_at_start.restores,
            moved_at_end.bytes_to_host - moved_at_start.bytes_to_host,
            moved_at_end.bytes_to_device - moved_at_start.bytes_to_device);
    if (fclose(out) != 0) {
        perror(result_path);
        return 1;
    }
    for (int j = 0; j < BUFFERS; j++)
        VS_CHECK(cuMemFree(buffers[j]));
    return 0;
}

/* ---- The parent: running the children and reading what they moved -------- */

typedef struct run_result_s {
    uint64_t modeled_ns, errors;
    shim_counters_t window; /* the measured passes, from the snapshot */
    shim_counters_t whole;  /* the whole run, from the shim's exit summary */
    uint64_t htod, dtoh;    /* the whole run, from simcuda's report */
    double gpu_idle;        /* the whole run's compute-engine idle fraction, from simcuda's report */
} run_result_t;

/* The whole of a small file, NUL-terminated (malloc'd), or NULL. */
static char *read_file(const char *path)
{
    FILE *in = fopen(path, "r");
    if (in == NULL)
        return NULL;
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    while (text != NULL) {
        len += fread(text + len, 1, cap - len - 1, in);
        if (len < cap - 1)
            break;
        char *grown = realloc(text, cap * 2);
        if (grown == NULL) {
            free(text);
            text = NULL;
            break;
        }
        text = grown;
        cap *= 2;
    }
    fclose(in);
    if (text != NULL)
        text[len] = '\0';
    return text;
}

/* The number after `"key": ` in the report's text. */
static bool json_number(const char *text, const char *key, uint64_t *value)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *at = strstr(text, pattern);
    if (at == NULL)
        return false;
    char *end;
    *value = strtoull(at + strlen(pattern), &end, 10);
    return end != at + strlen(pattern);
}

/* Runs the child of `scenario`; 0 or -1 (said why). */
static int run_child(const char *self, const char *shim, const char *dir, scenario_t scenario, run_result_t *result)
{
    char result_path[4096], report_path[4096], log_path[4096], scenario_arg[16];
    snprintf(result_path, sizeof result_path, "%s/result-%d", dir, (int)scenario);
    snprintf(report_path, sizeof report_path, "%s/report-%d.json", dir, (int)scenario);
    snprintf(log_path, sizeof log_path, "%s/shim-%d.log", dir, (int)scenario);
    snprintf(scenario_arg, sizeof scenario_arg, "%d", (int)scenario);

    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("offload_throughput: fork");
        return -1;
    }
    if (pid == 0) {
        setenv("LD_PRELOAD", shim, 1);
        setenv(CHILD_MARK, "1", 1);
        setenv("SIMCUDA_REPORT", report_path, 1);
        setenv("VRAMSHIM_LOG_FILE", log_path, 1);
        char *argv[] = {(char *)self, (char *)shim, "--child", scenario_arg, result_path, NULL};
        execv("/proc/self/exe", argv);
        perror("offload_throughput: execv");
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("offload_throughput: waitpid");
            return -1;
        }
    }

    int rc = -1;
    char *text = read_file(result_path), *report = read_file(report_path), *log = read_file(log_path);
    /* The exit summary's lines (shim/offload.c): evictions and bytes to
     * the host, then restores and bytes to the device. */
    const char *evicted = log != NULL ? strstr(log, "info:   evicted ") : NULL;
    const char *restored = evicted != NULL ? strstr(evicted, "info:   restored ") : NULL;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "offload_throughput: the %s child failed (status 0x%x); the shim's log:\n%s",
                scenario_names[scenario], status, log != NULL ? log : "(none)\n");
    } else if (text == NULL
               || sscanf(text,
                         "modeled_ns %" SCNu64 " errors %" SCNu64 " evictions %" SCNu64 " restores %" SCNu64
                         " to_host %" SCNu64 " to_device %" SCNu64,
                         &result->modeled_ns, &result->errors, &result->window.evictions, &result->window.restores,
                         &result->window.bytes_to_host, &result->window.bytes_to_device)
                      != 6) {
        fprintf(stderr, "offload_throughput: no result from the child in %s\n", result_path);
    } else if (report == NULL || !json_number(report, "htod", &result->htod)
               || !json_number(report, "dtoh", &result->dtoh) || strstr(report, "\"gpu_idle_fraction\": ") == NULL) {
        fprintf(stderr, "offload_throughput: no simcuda report in %s\n", report_path);
    } else if (restored == NULL
               || sscanf(evicted, "info: evicted %" SCNu64 " times, %*s %*s to the host (%" SCNu64 " bytes)",
                         &result->whole.evictions, &result->whole.bytes_to_host)
                      != 2
               || sscanf(restored, "info: restored %" SCNu64 " times, %*s %*s to the device (%" SCNu64 " bytes)",
                         &result->whole.restores, &result->whole.bytes_to_device)
                      != 2) {
        fprintf(stderr, "offload_throughput: no offload summary from the shim in %s\n", log_path);
    } else {
        result->gpu_idle = strtod(strstr(report, "\"gpu_idle_fraction\": ") + strlen("\"gpu_idle_fraction\": "), NULL);
        rc = 0;
    }
    free(text);
    free(report);
    free(log);
    unlink(result_path);
    unlink(report_path);
    unlink(log_path);
    return rc;
}

static double env_gbps(const char *name)
{
    const char *value = getenv(name);
    char *end;
    double gbps = value != NULL ? strtod(value, &end) : 0.0;
    return value != NULL && end != value && gbps > 0.0 ? gbps : 0.0;
}

/* Measures one scenario and prints its lines. 0, or 1 when broken. */
static int measure(const char *self, const char *shim, const char *dir, scenario_t scenario, double h2d_gbps,
                   double d2h_gbps)
{
    const char *name = scenario_names[scenario];
    run_result_t run;
    if (run_child(self, shim, dir, scenario, &run) != 0)
        return 1;
    if (run.errors != 0) {
        printf("offload_throughput: [%s] BROKEN: %" PRIu64 " words came back different from what was written\n",
               name, run.errors);
        return 1;
    }
    /* The shim's counters against what the driver copied (the program
     * itself copies nothing). */
    if (run.whole.bytes_to_device != run.htod || run.whole.bytes_to_host != run.dtoh)
        printf("offload_throughput: [%s] note: over the whole run the shim counts %" PRIu64
               " B to the device and %" PRIu64 " B to the host; the driver copied %" PRIu64 " B H2D and %" PRIu64
               " B D2H\n",
               name, run.whole.bytes_to_device, run.whole.bytes_to_host, run.htod, run.dtoh);

    uint64_t htod = run.window.bytes_to_device, dtoh = run.window.bytes_to_host;
    double seconds = (double)run.modeled_ns / 1e9;
    if (run.window.restores == 0 || htod == 0 || dtoh == 0 || seconds <= 0.0) {
        printf("offload_throughput: [%s] BROKEN: nothing moved in the measured passes (restores %" PRIu64
               ", H2D %" PRIu64 " B, D2H %" PRIu64 " B)\n",
               name, run.window.restores, htod, dtoh);
        return 1;
    }
    double h2d_ideal = (double)htod / (h2d_gbps * 1e9), d2h_ideal = (double)dtoh / (d2h_gbps * 1e9);
    double overlapped = h2d_ideal > d2h_ideal ? h2d_ideal : d2h_ideal, in_turn = h2d_ideal + d2h_ideal;
    double h2d_achieved = (double)htod / seconds / 1e9, d2h_achieved = (double)dtoh / seconds / 1e9;
    double h2d_fraction = h2d_achieved / h2d_gbps, d2h_fraction = d2h_achieved / d2h_gbps;
    bool met = h2d_fraction >= GOAL_FRACTION && d2h_fraction >= GOAL_FRACTION;

    printf("offload_throughput: [%s] %d passes: %" PRIu64 " restores, %" PRIu64 " evictions; H2D %" PRIu64
           " B (%.1f MiB/pass), D2H %" PRIu64 " B (%.1f MiB/pass); modeled %.3f ms\n",
           name, MEASURED_PASSES, run.window.restores, run.window.evictions, htod,
           (double)htod / MEASURED_PASSES / 1048576.0, dtoh, (double)dtoh / MEASURED_PASSES / 1048576.0,
           seconds * 1e3);
    printf("offload_throughput: [%s] H2D %.2f GB/s = %.1f%% of %.1f, D2H %.2f GB/s = %.1f%% of %.1f; ideal %.3f ms "
           "with the directions overlapped, %.3f ms taking turns; modeled/ideal %.3f; %.3f ms per restore; "
           "GPU idle %.1f%% of the whole run\n",
           name, h2d_achieved, 100.0 * h2d_fraction, h2d_gbps, d2h_achieved, 100.0 * d2h_fraction, d2h_gbps,
           overlapped * 1e3, in_turn * 1e3, seconds / overlapped, seconds * 1e3 / (double)run.window.restores,
           100.0 * run.gpu_idle);
    printf("offload_throughput: [%s] goal >= %.0f%% of the link each way: %s\n", name, 100.0 * GOAL_FRACTION,
           met ? "met" : "MISSED");
    return 0;
}

static int parent_run(const char *self, const char *shim)
{
    /* The scenario: forced. The link: the caller's, else an H100's. */
    setenv("SIMCUDA_CLOCK", "virtual", 1);
    setenv("SIMCUDA_DEVICE_MEM", DEVICE_MEM, 1);
    setenv("VRAM_LIMIT", LIMIT, 1);
    setenv("VRAMSHIM_MODE", "offload", 1);
    setenv("VRAMSHIM_LOG", "info", 1);
    setenv("SIMCUDA_H2D_GBPS", DEFAULT_GBPS, 0);
    setenv("SIMCUDA_D2H_GBPS", DEFAULT_GBPS, 0);
    unsetenv("SIMCUDA_FAIL");
    double h2d_gbps = env_gbps("SIMCUDA_H2D_GBPS"), d2h_gbps = env_gbps("SIMCUDA_D2H_GBPS");
    if (h2d_gbps == 0.0 || d2h_gbps == 0.0) {
        fprintf(stderr, "offload_throughput: SIMCUDA_H2D_GBPS and SIMCUDA_D2H_GBPS must be positive numbers\n");
        return 2;
    }
    const char *policy = getenv("VRAMSHIM_POLICY");

    char dir[] = "/tmp/offload_throughput.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("offload_throughput: mkdtemp");
        return 1;
    }
    const char *costs = getenv("SIMCUDA_HOST_COSTS");
    printf("offload_throughput: %d buffers of %llu MiB, VRAM_LIMIT=%s on a %s simulated device, offload mode, "
           "VRAMSHIM_POLICY=%s; virtual clock, SIMCUDA_HOST_COSTS=%s, link H2D %.1f GB/s, D2H %.1f GB/s (one copy "
           "engine each way); "
           "%d warm-up and %d measured passes, each touching every buffer once in order with a %d ns kernel\n",
           BUFFERS, BUFFER_BYTES >> 20, LIMIT, DEVICE_MEM, policy != NULL ? policy : "(unset: the shim's default)",
           costs != NULL && costs[0] != '\0' ? costs : "default", h2d_gbps, d2h_gbps, WARMUP_PASSES, MEASURED_PASSES, TOUCH_COST_NS);
    int rc = 0;
    for (int s = 0; s < SCENARIO_COUNT && rc == 0; s++)
        rc = measure(self, shim, dir, (scenario_t)s, h2d_gbps, d2h_gbps);
    rmdir(dir);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[2], "--child") == 0) {
        /* `void *` to function pointer: POSIX allows it, ISO C does not say. */
        void *direct = simcuda_entry_point("cuLaunchKernel");
        if (getenv(CHILD_MARK) == NULL || direct == NULL || __extension__(void *) cuLaunchKernel == direct) {
            fprintf(stderr, "offload_throughput: LD_PRELOAD=%s did not interpose cuLaunchKernel\n", argv[1]);
            return 1;
        }
        int scenario = atoi(argv[3]);
        if (scenario < 0 || scenario >= SCENARIO_COUNT) {
            fprintf(stderr, "offload_throughput: bad child arguments\n");
            return 2;
        }
        return child_run((scenario_t)scenario, argv[4]);
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s /path/to/libvramshim.so\n", argv[0]);
        return 2;
    }
    return parent_run(argv[0], argv[1]);
}

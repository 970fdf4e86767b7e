/* launch_overhead.c: what the shim adds to the host side of one
 * `cuLaunchKernel` on its fast path (everything the launch touches is
 * resident), with tracking only and with the offload engine active, side by
 * side in one run.
 *
 * Run as `launch_overhead SHIM`. The parent (not preloaded) runs the same
 * workload in children with LD_PRELOAD=SHIM: with no VRAM_LIMIT (tracking
 * only) and in offload mode with VRAM_LIMIT=1G, five of each in the order
 * track, offload, offload, track, track, offload, ..., so that a drift in
 * machine load between children cancels too; it prints every child's
 * figures, then per mode side by side the median and the lowest of the
 * children's figures (the lowest is the one least disturbed by other work
 * on the machine: on a busy machine whole children run 1.5-2x slower,
 * direct launches included), and the differences between the modes. The
 * goal is judged on the undisturbed children: those whose direct launches,
 * the same code in every child, took at most 1.15 x the lowest child's.
 * With fewer than three such children of a mode after five pairs, more
 * pairs run, ten at most (a busy machine otherwise fails the goal with the
 * shim's own cost unchanged: a run whose direct launches take 60% longer
 * can read 138.8 ns added).
 * `launch_overhead SHIM --mode track|offload` runs only one mode.
 *
 * The workload: 10,000 live allocations of 64 KiB (never evictable: under
 * the 2 MiB VMM granularity) and 64 of 8 MiB (evictable). Together they take
 * 1137 MiB, so under the offload child's 1 GiB limit the last 8 MiB ones
 * evict the first ones as they are allocated; a sweep then launches a
 * kernel on each 8 MiB allocation in turn, which restores those it finds
 * evicted and evicts others in their place; then the last 32 swept (625 +
 * 256 MiB fit under the limit) are touched twice more, which leaves them
 * resident.
 * The offload child reads the shim's counters from its own snapshot
 * (bench/offload/shim_counters.h): it stops, as broken, unless evictions
 * and restores happened before the timed part, and unless none happened
 * during it (a restore inside a timed batch would in fact wait for the
 * gated stream below for ever: the setup makes sure none is needed). The
 * timed launches take 8 pointer parameters, each a different allocation: 6
 * of the small ones and 2 of those 32 resident evictable ones.
 *
 * Each child times, in one process and side by side, batches of launches
 * made through the shim (hooked) and batches made straight into the
 * simulated driver through `simcuda_entry_point("cuLaunchKernel")`
 * (direct), alternating direct/hooked/hooked/direct over many rounds so
 * that both modes see the same machine load, and hands the parent the
 * median batch of each mode per launch and the difference. Real clock: the
 * launch path is timed, not modeled.
 *
 * Streams are asynchronous in simcuda: a launch returns once enqueued. Each
 * timed batch is queued behind a host function that blocks the stream's
 * worker on a semaphore, so the worker sleeps through the batch instead of
 * competing for a core or for the queue's lock; it is released and the
 * stream drained between batches, outside the timing.
 */
#include <cuda.h>
#include <errno.h>
#include <inttypes.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shim_counters.h"
#include "simcuda.h"
#include "vs_test.h"

#define SMALL_ALLOCATIONS 10000
#define SMALL_BYTES (64u * 1024u)
#define LARGE_ALLOCATIONS 64
#define LARGE_BYTES (8ull << 20)
/* The last LARGE_HOT of the sweep: resident when the timing starts. */
#define LARGE_HOT 32
#define OFFLOAD_LIMIT "1G"
#define PARAMS 8
/* The goal: at most this many ns added per launch (median of the runs). */
#define GOAL_ADDED_NS 100.0
/* Of the PARAMS, how many point into the resident evictable allocations. */
#define LARGE_PARAMS 2
#define BATCH 1000
/* Batches per mode; a round is one direct and one hooked batch. */
#define ROUNDS 300
#define WARMUP_ROUNDS 10
/* Children per mode; up to MAX_RUNS when too few of them were undisturbed. */
#define RUNS 5
#define MAX_RUNS 10
/* A child whose direct launches took more than this times the lowest
 * child's was disturbed (the machine was busy: the direct path is the same
 * code in every child, and on a busy machine whole children run 1.5-2x
 * slower, the shim's added time with them); the verdict is the median of
 * the undisturbed ones, at least MIN_CLEAN_RUNS of them. */
#define DISTURBED_DIRECT 1.15
#define MIN_CLEAN_RUNS 3
/* Set in the children: they must find the shim in front. */
#define CHILD_MARK "VS_LAUNCH_OVERHEAD_PRELOADED"

typedef __typeof__(cuLaunchKernel) launch_fn_t;

typedef enum shim_mode_e {
    MODE_TRACK,
    MODE_OFFLOAD,
    MODE_COUNT
} shim_mode_t;

static const char *const mode_args[MODE_COUNT] = {"track", "offload"};
static const char *const mode_names[MODE_COUNT] = {"tracking only", "offload, VRAM_LIMIT=" OFFLOAD_LIMIT};

/* One child's figures: ns per launch (medians over its batches), and in
 * offload mode the shim's counts before the timed part. */
typedef struct figures_s {
    double direct, hooked, added, added_per_round;
    double direct_q1, direct_q3, hooked_q1, hooked_q3;
    uint64_t evictions, restores;
} figures_t;

#define FIGURES_FORMAT "%lf %lf %lf %lf %lf %lf %lf %lf %" SCNu64 " %" SCNu64

typedef struct bench_s {
    CUfunction fn;
    CUstream stream;
    CUdeviceptr small[SMALL_ALLOCATIONS];
    CUdeviceptr large[LARGE_ALLOCATIONS];
    CUdeviceptr args[PARAMS];
    void *params[PARAMS];
    unsigned next_small, next_large;
    /* The gate: a host function holding the stream's worker. */
    sem_t entered, release;
} bench_t;

static void noop_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)args;
    (void)launch;
    (void)user;
}

static void CUDA_CB gate(void *arg)
{
    bench_t *b = arg;
    sem_post(&b->entered);
    while (sem_wait(&b->release) != 0 && errno == EINTR)
        continue;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *values, size_t count)
{
    qsort(values, count, sizeof values[0], compare_double);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

/* The next launch's arguments: different allocations and interior
 * addresses every launch, so that no look-up is served by a cache the
 * benchmark made warm. */
static void pick_arguments(bench_t *b)
{
    for (int i = 0; i < PARAMS - LARGE_PARAMS; i++) {
        b->next_small = (b->next_small + 7919) % SMALL_ALLOCATIONS;
        b->args[i] = b->small[b->next_small] + (CUdeviceptr)(b->next_small % 64) * 1024;
    }
    for (int i = PARAMS - LARGE_PARAMS; i < PARAMS; i++) {
        b->next_large = (b->next_large + 7) % LARGE_HOT;
        b->args[i] = b->large[LARGE_ALLOCATIONS - LARGE_HOT + b->next_large]
                     + (CUdeviceptr)(b->next_small % 64) * (LARGE_BYTES / 64);
    }
}

/* One timed batch through `launch`: ns per launch. */
static double run_batch(bench_t *b, launch_fn_t *launch)
{
    VS_CHECK(cuLaunchHostFunc(b->stream, gate, b));
    while (sem_wait(&b->entered) != 0 && errno == EINTR)
        continue;
    uint64_t start = now_ns();
    for (int k = 0; k < BATCH; k++) {
        pick_arguments(b);
        VS_CHECK(launch(b->fn, 1, 1, 1, 32, 1, 1, 0, b->stream, b->params, NULL));
    }
    uint64_t elapsed = now_ns() - start;
    sem_post(&b->release);
    VS_CHECK(cuStreamSynchronize(b->stream));
    return (double)elapsed / BATCH;
}

/* Launches (through the shim) a kernel on each of `large[first..last)` in
 * turn: in offload mode, what is not resident is restored. */
static void sweep(bench_t *b, int first, int last)
{
    for (int k = first; k < last; k++) {
        pick_arguments(b);
        b->args[0] = b->large[k];
        VS_CHECK(cuLaunchKernel(b->fn, 1, 1, 1, 32, 1, 1, 0, b->stream, b->params, NULL));
    }
    VS_CHECK(cuStreamSynchronize(b->stream));
}

/* The child: sets up, times, and writes its figures to `result`. */
static int child_run(shim_mode_t mode, launch_fn_t *direct, launch_fn_t *hooked, FILE *result)
{
    static bench_t b;
    static double direct_ns[ROUNDS], hooked_ns[ROUNDS], added_ns[ROUNDS];
    const char *name = mode_args[mode];
    size_t sizes[PARAMS];
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;

    if (result == NULL) {
        perror("launch_overhead: the result pipe");
        return 1;
    }
    for (int i = 0; i < PARAMS; i++)
        sizes[i] = sizeof(void *);
    simcuda_kernel_desc_t desc = {.name = "bench_noop_8_pointers", .param_count = PARAMS, .param_sizes = sizes,
                                  .fn = noop_kernel};
    if (simcuda_register_kernel(&desc) != 0) {
        fprintf(stderr, "launch_overhead: cannot register the benchmark kernel\n");
        return 1;
    }
    if (sem_init(&b.entered, 0, 0) != 0 || sem_init(&b.release, 0, 0) != 0) {
        perror("sem_init");
        return 1;
    }
    VS_CHECK(cuInit(0));
    VS_CHECK(cuDeviceGet(&dev, 0));
    VS_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    VS_CHECK(cuCtxSetCurrent(ctx));
    VS_CHECK(cuModuleLoadData(&module, "benchmark"));
    VS_CHECK(cuModuleGetFunction(&b.fn, module, "bench_noop_8_pointers"));
    VS_CHECK(cuStreamCreate(&b.stream, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < SMALL_ALLOCATIONS; i++)
        VS_CHECK(cuMemAlloc(&b.small[i], SMALL_BYTES));
    for (int i = 0; i < LARGE_ALLOCATIONS; i++)
        VS_CHECK(cuMemAlloc(&b.large[i], LARGE_BYTES));
    for (int i = 0; i < PARAMS; i++)
        b.params[i] = &b.args[i];

    /* Every large allocation used once, then the hot ones twice more (the
     * second time finds every restore complete). */
    sweep(&b, 0, LARGE_ALLOCATIONS);
    sweep(&b, LARGE_ALLOCATIONS - LARGE_HOT, LARGE_ALLOCATIONS);
    sweep(&b, LARGE_ALLOCATIONS - LARGE_HOT, LARGE_ALLOCATIONS);

    const vs_snapshot_header_t *snapshot = NULL;
    shim_counters_t before = {0}, after;
    if (mode == MODE_OFFLOAD) {
        if ((snapshot = shim_counters_open()) == NULL || shim_counters_read(snapshot, &before) != 0)
            return 1;
        if (before.evictions == 0 || before.restores == 0) {
            fprintf(stderr,
                    "launch_overhead[%s]: BROKEN: the setup should evict and restore, but the shim counts %" PRIu64
                    " evictions and %" PRIu64 " restores\n",
                    name, before.evictions, before.restores);
            return 1;
        }
    }

    for (int r = -WARMUP_ROUNDS; r < ROUNDS; r++) {
        /* direct, hooked, hooked, direct, ...: a drift in machine load
         * between the two batches of a round cancels over two rounds. */
        double d, h;
        if (r % 2 == 0) {
            d = run_batch(&b, direct);
            h = run_batch(&b, hooked);
        } else {
            h = run_batch(&b, hooked);
            d = run_batch(&b, direct);
        }
        if (r < 0)
            continue;
        direct_ns[r] = d;
        hooked_ns[r] = h;
        added_ns[r] = h - d;
    }

    if (mode == MODE_OFFLOAD) {
        if (shim_counters_read(snapshot, &after) != 0)
            return 1;
        if (after.evictions != before.evictions || after.restores != before.restores) {
            fprintf(stderr,
                    "launch_overhead[%s]: BROKEN: %" PRIu64 " evictions and %" PRIu64
                    " restores during the timed part, which should touch only resident memory\n",
                    name, after.evictions - before.evictions, after.restores - before.restores);
            return 1;
        }
    }
    VS_CHECK(cuStreamDestroy(b.stream));
    for (int i = 0; i < SMALL_ALLOCATIONS; i++)
        VS_CHECK(cuMemFree(b.small[i]));
    for (int i = 0; i < LARGE_ALLOCATIONS; i++)
        VS_CHECK(cuMemFree(b.large[i]));

    figures_t f = {.evictions = before.evictions, .restores = before.restores};
    f.added_per_round = median(added_ns, ROUNDS);
    f.direct = median(direct_ns, ROUNDS); /* sorts: the quartiles follow */
    f.hooked = median(hooked_ns, ROUNDS);
    f.added = f.hooked - f.direct;
    f.direct_q1 = direct_ns[ROUNDS / 4];
    f.direct_q3 = direct_ns[3 * ROUNDS / 4];
    f.hooked_q1 = hooked_ns[ROUNDS / 4];
    f.hooked_q3 = hooked_ns[3 * ROUNDS / 4];
    fprintf(result, "%.3f %.3f %.3f %.3f %.3f %.3f %.3f %.3f %" PRIu64 " %" PRIu64 "\n", f.direct, f.hooked, f.added,
            f.added_per_round, f.direct_q1, f.direct_q3, f.hooked_q1, f.hooked_q3, f.evictions, f.restores);
    return 0;
}

/* Runs the child of `mode` with the shim preloaded; 0 and its figures, or
 * -1 (said why). */
static int run_child(const char *self, const char *shim, shim_mode_t mode, figures_t *figures)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("launch_overhead: pipe");
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("launch_overhead: fork");
        return -1;
    }
    if (pid == 0) {
        char fd_arg[16];
        close(fds[0]);
        snprintf(fd_arg, sizeof fd_arg, "%d", fds[1]);
        setenv("LD_PRELOAD", shim, 1);
        setenv(CHILD_MARK, "1", 1);
        if (mode == MODE_OFFLOAD) {
            setenv("VRAM_LIMIT", OFFLOAD_LIMIT, 1);
            setenv("VRAMSHIM_MODE", "offload", 1);
        } else {
            unsetenv("VRAM_LIMIT");
            unsetenv("VRAMSHIM_MODE");
        }
        char *argv[] = {(char *)self, (char *)shim, "--child", (char *)mode_args[mode], fd_arg, NULL};
        execv("/proc/self/exe", argv);
        perror("launch_overhead: execv");
        _exit(127);
    }
    close(fds[1]);
    char text[512];
    size_t len = 0;
    while (len < sizeof text - 1) {
        ssize_t n = read(fds[0], text + len, sizeof text - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    text[len] = '\0';
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("launch_overhead: waitpid");
            return -1;
        }
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "launch_overhead: the %s child failed (status 0x%x)\n", mode_args[mode], status);
        return -1;
    }
    if (sscanf(text, FIGURES_FORMAT, &figures->direct, &figures->hooked, &figures->added, &figures->added_per_round,
               &figures->direct_q1, &figures->direct_q3, &figures->hooked_q1, &figures->hooked_q3,
               &figures->evictions, &figures->restores)
        != 10) {
        fprintf(stderr, "launch_overhead: no figures from the %s child\n", mode_args[mode]);
        return -1;
    }
    return 0;
}

static int usage(const char *self)
{
    fprintf(stderr, "usage: %s /path/to/libvramshim.so [--mode track|offload]\n", self);
    return 2;
}

/* The lowest direct figure among the first `runs` children of the modes
 * run. */
static double lowest_direct_of(figures_t figures[MODE_COUNT][MAX_RUNS], const bool *run, int runs)
{
    double lowest = 0.0;
    for (int m = 0; m < MODE_COUNT; m++)
        for (int k = 0; k < runs && run[m]; k++)
            if (lowest == 0.0 || figures[m][k].direct < lowest)
                lowest = figures[m][k].direct;
    return lowest;
}

/* Whether every mode run has MIN_CLEAN_RUNS undisturbed children among the
 * first `runs` (DISTURBED_DIRECT). */
static bool clean_runs_enough(figures_t figures[MODE_COUNT][MAX_RUNS], const bool *run, int runs)
{
    double lowest = lowest_direct_of(figures, run, runs);
    for (int m = 0; m < MODE_COUNT; m++) {
        int clean = 0;
        for (int k = 0; k < runs && run[m]; k++)
            clean += figures[m][k].direct <= DISTURBED_DIRECT * lowest;
        if (run[m] && clean < MIN_CLEAN_RUNS)
            return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[2], "--child") == 0) {
        launch_fn_t *direct, *hooked;
        /* `void *` to function pointer: POSIX allows it, ISO C does not say. */
        direct = __extension__(launch_fn_t *) simcuda_entry_point("cuLaunchKernel");
        /* The linked name: the shim's once it is preloaded. */
        hooked = cuLaunchKernel;
        if (getenv(CHILD_MARK) == NULL || direct == NULL || hooked == direct) {
            fprintf(stderr, "launch_overhead: LD_PRELOAD=%s did not interpose cuLaunchKernel\n", argv[1]);
            return 1;
        }
        shim_mode_t mode = strcmp(argv[3], mode_args[MODE_OFFLOAD]) == 0 ? MODE_OFFLOAD : MODE_TRACK;
        FILE *result = fdopen(atoi(argv[4]), "w");
        int rc = child_run(mode, direct, hooked, result);
        if (result != NULL && fclose(result) != 0)
            rc = 1;
        return rc;
    }

    bool run[MODE_COUNT] = {true, true};
    if (argc == 4 && strcmp(argv[2], "--mode") == 0) {
        for (int m = 0; m < MODE_COUNT; m++)
            run[m] = strcmp(argv[3], mode_args[m]) == 0;
        if (!run[MODE_TRACK] && !run[MODE_OFFLOAD])
            return usage(argv[0]);
    } else if (argc != 2) {
        return usage(argv[0]);
    }
    printf("launch_overhead: %d + %d live allocations (%u KiB, %llu MiB), %d pointer parameters per launch, each a "
           "different allocation (%d into resident %llu MiB ones), %d interleaved rounds of one direct and one hooked "
           "batch of %d launches per child; medians over batches\n",
           SMALL_ALLOCATIONS, LARGE_ALLOCATIONS, SMALL_BYTES / 1024, LARGE_BYTES >> 20, PARAMS, LARGE_PARAMS,
           LARGE_BYTES >> 20, ROUNDS, BATCH);
    /* Pair k runs its two modes in the order k % 2 == 0 ? (track, offload)
     * : (offload, track). */
    figures_t figures[MODE_COUNT][MAX_RUNS];
    double pair_difference[MAX_RUNS];
    int runs = 0;
    while (runs < MAX_RUNS) {
        int k = runs++;
        for (int i = 0; i < MODE_COUNT; i++) {
            shim_mode_t m = (shim_mode_t)(k % 2 == 0 ? i : MODE_COUNT - 1 - i);
            if (!run[m])
                continue;
            figures_t *f = &figures[m][k];
            if (run_child(argv[0], argv[1], m, f) != 0)
                return 1;
            printf("launch_overhead: [%s] run %d: direct %.1f, hooked %.1f, added %.1f ns/launch (per-round "
                   "differences %.1f; quartiles direct %.1f-%.1f, hooked %.1f-%.1f)",
                   mode_names[m], k + 1, f->direct, f->hooked, f->added, f->added_per_round, f->direct_q1,
                   f->direct_q3, f->hooked_q1, f->hooked_q3);
            if (m == MODE_OFFLOAD)
                printf("; %" PRIu64 " evictions and %" PRIu64 " restores before the timed part, none during it",
                       f->evictions, f->restores);
            printf("\n");
            fflush(stdout);
        }
        if (run[MODE_TRACK] && run[MODE_OFFLOAD])
            pair_difference[k] = figures[MODE_OFFLOAD][k].added - figures[MODE_TRACK][k].added;
        if (runs >= RUNS && clean_runs_enough(figures, run, runs))
            break;
    }
    double lowest_direct = lowest_direct_of(figures, run, runs);
    double lowest[MODE_COUNT], middle[MODE_COUNT]; /* of each mode's added figures */
    for (int m = 0; m < MODE_COUNT; m++) {
        if (!run[m])
            continue;
        double direct[MAX_RUNS], hooked[MAX_RUNS], added[MAX_RUNS], clean[MAX_RUNS];
        int clean_count = 0;
        for (int k = 0; k < runs; k++) {
            direct[k] = figures[m][k].direct;
            hooked[k] = figures[m][k].hooked;
            added[k] = figures[m][k].added;
            if (figures[m][k].direct <= DISTURBED_DIRECT * lowest_direct)
                clean[clean_count++] = figures[m][k].added;
        }
        middle[m] = median(added, (size_t)runs); /* sorts: added[0] is the lowest */
        lowest[m] = added[0];
        double clean_added = clean_count > 0 ? median(clean, (size_t)clean_count) : 0.0;
        bool met = clean_count >= MIN_CLEAN_RUNS && clean_added <= GOAL_ADDED_NS;
        printf("launch_overhead: %-30s direct %6.1f ns/launch, hooked %6.1f ns/launch, added %6.1f ns, lowest %6.1f ns "
               "(medians of %d runs); undisturbed runs (direct within %.2f x the lowest child's, %.1f ns): %d, "
               "added %.1f ns (goal <= %.0f ns: %s)\n",
               mode_names[m], median(direct, (size_t)runs), median(hooked, (size_t)runs), middle[m], lowest[m],
               runs, DISTURBED_DIRECT, lowest_direct, clean_count, clean_added, GOAL_ADDED_NS,
               met                               ? "met"
               : clean_count < MIN_CLEAN_RUNS ? "MISSED, too few undisturbed runs"
                                                 : "MISSED");
    }
    if (run[MODE_TRACK] && run[MODE_OFFLOAD])
        printf("launch_overhead: offload minus tracking only: %+.1f ns per launch between the lowest, %+.1f between "
               "the medians, %+.1f the median of the %d pairs' differences\n",
               lowest[MODE_OFFLOAD] - lowest[MODE_TRACK], middle[MODE_OFFLOAD] - middle[MODE_TRACK],
               median(pair_difference, (size_t)runs), runs);
    return 0;
}

/* vs_test.h: the harness shared by the test programs (tests/) and the
 * benchmarks (bench/): checked driver calls, the fault reporter and tracked
 * writes. Header only, so that a program includes it and links nothing
 * more; each program is its own process (one process per test).
 *
 *   VS_CHECK(cuMemAlloc_v2(&ptr, bytes));     driver error: message, exit(1)
 *   VS_EXPECT(sum == want, "sum %llu", sum);   wrong result: counted, printed
 *   vs_test_watchdog_start(90);                a hang: message, exit(3)
 *   VS_CHILD_CHECK(rc == CUDA_SUCCESS);        in a forked child: _exit(line)
 *   vs_test_set_phase("graph");                named by the failure messages
 *   vs_test_fault_reporter_install(describe);  SIGSEGV/SIGBUS say where
 *   vs_tracked_write(&t, seed, rc);            what a buffer may hold now
 *
 * Failure messages start with the program's name. The fuzz driver is
 * tests/common/fuzz_driver.c (targets: tests/common/fuzz_target.h).
 */
#ifndef VRAMSHIM_TESTS_COMMON_VS_TEST_H
#define VRAMSHIM_TESTS_COMMON_VS_TEST_H

#include <cuda.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------
 * Phase and exit
 * ------------------------------------------------------------------------ */

/* Volatile: the watchdog and the fault reporter read it in a handler. */
static inline const char *volatile *vs_test_phase_slot(void)
{
    static const char *volatile phase;
    return &phase;
}

/* What the program is doing now (a scenario, an operation), or NULL where
 * it has no phases. Set by the main thread, or before workers start. */
static inline const char *vs_test_phase(void)
{
    return *vs_test_phase_slot();
}

static inline void vs_test_set_phase(const char *phase)
{
    *vs_test_phase_slot() = phase;
}

/* Ends a failed program with status 1. Only the first thread to fail runs
 * exit() (and with it the driver's report at exit); any other that fails
 * meanwhile waits for that, since exit() must not run twice at once. */
static inline _Noreturn void vs_test_exit_failed(void)
{
    static atomic_flag exiting = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&exiting))
        for (;;)
            pause();
    exit(1);
}

/* ------------------------------------------------------------------------
 * Expectations and the watchdog
 * ------------------------------------------------------------------------ */

static inline _Atomic unsigned long *vs_test_failures_slot(void)
{
    static _Atomic unsigned long failures;
    return &failures;
}

/* Failed `VS_EXPECT`s so far, in every thread. */
static inline unsigned long vs_test_failure_count(void)
{
    return atomic_load(vs_test_failures_slot());
}

/* A wrong result that does not stop the program: counted, and printed with
 * the line and the phase; the program fails at its end. */
#define VS_EXPECT(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            atomic_fetch_add(vs_test_failures_slot(), 1);                                          \
            const char *vs_phase_ = vs_test_phase();                                               \
            fprintf(stderr, "%s: FAIL at line %d (%s): ", program_invocation_short_name, __LINE__, \
                    vs_phase_ != NULL ? vs_phase_ : "");                                           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static inline void vs_test_watchdog_fired(int sig)
{
    (void)sig;
    const char *name = program_invocation_short_name;
    static const char head[] = ": HANG: the watchdog fired during ";
    const char *phase = vs_test_phase();
    (void)!write(STDERR_FILENO, name, strlen(name));
    (void)!write(STDERR_FILENO, head, sizeof head - 1);
    if (phase != NULL)
        (void)!write(STDERR_FILENO, phase, strlen(phase));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(3);
}

/* A hang fails the program: after `seconds`, one line naming the phase,
 * then exit status 3. */
static inline void vs_test_watchdog_start(unsigned seconds)
{
    signal(SIGALRM, vs_test_watchdog_fired);
    alarm(seconds);
}

/* ------------------------------------------------------------------------
 * Checked driver calls
 * ------------------------------------------------------------------------ */

/* A driver error fails the program like a wrong result: under the shim,
 * every call a program makes must succeed. A program that opens the driver
 * with dlopen instead of linking it defines `VS_TEST_DRIVER_OPENED` before
 * including this header: its errors are reported by number alone. */
#define VS_CHECK(call) vs_test_check((call), #call, __FILE__, __LINE__)

static inline void vs_test_check(CUresult rc, const char *call, const char *file, int line)
{
    if (rc == CUDA_SUCCESS)
        return;
    const char *name = NULL;
#ifndef VS_TEST_DRIVER_OPENED
    if (cuGetErrorName(rc, &name) != CUDA_SUCCESS || name == NULL)
#endif
        name = "unknown error";
    const char *phase = vs_test_phase();
    fprintf(stderr, "%s: DRIVER ERROR%s%s at %s:%d: %s returned %d (%s)\n", program_invocation_short_name,
            phase != NULL ? " during " : "", phase != NULL ? phase : "", file, line, call, (int)rc, name);
    vs_test_exit_failed();
}

/* In a forked child whose parent checks the exit status: a failed
 * condition exits at once (no handlers, no report) with a status that
 * names the line. */
#define VS_CHILD_CHECK(condition)                                                                  \
    do {                                                                                           \
        if (!(condition))                                                                          \
            _exit(__LINE__ % 250 + 1);                                                             \
    } while (0)

/* ------------------------------------------------------------------------
 * Fault reporter
 * ------------------------------------------------------------------------ */

/* Appends to `line` (of `cap` bytes, `length` used) what the program knows
 * of `address`, such as the buffer it falls in; returns the new length. */
typedef int (*vs_test_fault_describe_fn)(uintptr_t address, char *line, size_t cap, int length);

typedef struct vs_test_fault_reporter_s {
    struct sigaction previous_segv;
    struct sigaction previous_bus;
    vs_test_fault_describe_fn describe;
} vs_test_fault_reporter_t;

static inline vs_test_fault_reporter_t *vs_test_fault_reporter(void)
{
    static vs_test_fault_reporter_t reporter;
    return &reporter;
}

/* Says where a fault hit (an evicted buffer touched by the device faults in
 * simcuda), then puts the previous action back: returning re-runs the
 * access, which then takes the default action. */
static inline void vs_test_on_fault(int signal_number, siginfo_t *info, void *ucontext)
{
    (void)ucontext;
    vs_test_fault_reporter_t *reporter = vs_test_fault_reporter();
    char line[256];
    uintptr_t address = (uintptr_t)info->si_addr;
    const char *phase = vs_test_phase();
    int length = snprintf(line, sizeof line, "%s: %s at 0x%llx%s%s", program_invocation_short_name,
                          signal_number == SIGSEGV ? "SIGSEGV" : "SIGBUS", (unsigned long long)address,
                          phase != NULL ? " during " : "", phase != NULL ? phase : "");
    if (reporter->describe != NULL)
        length = reporter->describe(address, line, sizeof line, length);
    if (length > (int)sizeof line - 2)
        length = (int)sizeof line - 2;
    length += snprintf(line + length, sizeof line - (size_t)length, "\n");
    if (write(STDERR_FILENO, line, (size_t)length) < 0)
        (void)0;
    sigaction(signal_number, signal_number == SIGSEGV ? &reporter->previous_segv : &reporter->previous_bus, NULL);
}

/* Reports SIGSEGV and SIGBUS, only where nobody handles them already (a
 * sanitizer, the shim). `describe` may be NULL. */
static inline void vs_test_fault_reporter_install(vs_test_fault_describe_fn describe)
{
    vs_test_fault_reporter_t *reporter = vs_test_fault_reporter();
    reporter->describe = describe;
    struct sigaction action = {.sa_sigaction = vs_test_on_fault, .sa_flags = SA_SIGINFO};
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, NULL, &reporter->previous_segv) == 0 && reporter->previous_segv.sa_handler == SIG_DFL)
        sigaction(SIGSEGV, &action, NULL);
    if (sigaction(SIGBUS, NULL, &reporter->previous_bus) == 0 && reporter->previous_bus.sa_handler == SIG_DFL)
        sigaction(SIGBUS, &action, NULL);
}

/* ------------------------------------------------------------------------
 * Tracked writes
 * ------------------------------------------------------------------------ */

#define VS_TRACKED_CANDIDATES 8

/* What a device buffer may hold when writes to it can fail (injected
 * faults): one of `seeds` (a sim_fill_u32 pattern), or anything while
 * `defined` is false (allocated, never written). A failed write may or may
 * not have landed, so it adds a candidate instead of replacing them. */
typedef struct vs_tracked_s {
    CUdeviceptr ptr;
    bool defined;
    unsigned count;
    uint32_t seeds[VS_TRACKED_CANDIDATES];
} vs_tracked_t;

/* The buffer now holds `seed` (rc success) or maybe `seed` (an error). */
static inline void vs_tracked_write(vs_tracked_t *t, uint32_t seed, CUresult rc)
{
    if (rc == CUDA_SUCCESS) {
        t->defined = true;
        t->count = 1;
        t->seeds[0] = seed;
    } else if (t->defined && t->count < VS_TRACKED_CANDIDATES) {
        t->seeds[t->count++] = seed;
    }
    /* An error on a never-written buffer leaves it undefined either way. */
}

/* `dst` now holds what `src` held (rc success) or maybe that. */
static inline void vs_tracked_copy(vs_tracked_t *dst, const vs_tracked_t *src, CUresult rc)
{
    if (!src->defined) {
        if (rc == CUDA_SUCCESS)
            dst->defined = false;
        return;
    }
    if (rc == CUDA_SUCCESS) {
        *dst = (vs_tracked_t){.ptr = dst->ptr, .defined = true, .count = src->count};
        memcpy(dst->seeds, src->seeds, sizeof src->seeds);
        return;
    }
    for (unsigned k = 0; k < src->count && dst->defined && dst->count < VS_TRACKED_CANDIDATES; k++)
        dst->seeds[dst->count++] = src->seeds[k];
}

/* ------------------------------------------------------------------------
 * Faults in a child
 * ------------------------------------------------------------------------ */

/* Runs `touch(address)` in a forked child with SIGSEGV's default action:
 * the signal that ended the child, 0 when it exited, -1 when the fork or
 * the wait failed. What an access to unmapped device memory does, seen
 * from outside. */
static inline int vs_test_child_signal(void (*touch)(uintptr_t), uintptr_t address)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        touch(address);
        _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

/* The touches `vs_test_child_signal` makes: one byte read or written. */
static inline void vs_test_read_byte(uintptr_t address)
{
    (void)*(volatile char *)address;
}

static inline void vs_test_write_byte(uintptr_t address)
{
    *(volatile char *)address = 1;
}

#endif /* VRAMSHIM_TESTS_COMMON_VS_TEST_H */

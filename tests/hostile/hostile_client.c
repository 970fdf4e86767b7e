/* hostile_client.c: the program under the shim in the hostile-environment
 * tests (check_hostile.py). It is an ordinary CUDA program: what it checks
 * is that it keeps running and loses nothing, whatever the environment
 * does to the shim's files.
 *
 *   hostile_client fork-exit      cuInit, cuMemAlloc, fork(); the child
 *                                 calls exit(0) and must be gone within 10 s
 *   hostile_client work MS [MIB]  allocates buffers (MIB MiB each, default
 *                                 4), prints "ready", then for MS ms (or
 *                                 until SIGUSR1) writes a pattern into each
 *                                 buffer and reads it back, comparing every
 *                                 byte
 *
 * Exit status: 0 when every check holds, 1 otherwise (each failure printed).
 */
#include <cuda.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HOSTILE_BUFFERS 4

#define HOSTILE_CHECK(call)                                                                        \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "hostile_client: %s failed: %d\n", #call, (int)rc_);                  \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static uint64_t hostile_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int hostile_context(CUcontext *ctx)
{
    CUdevice dev;
    HOSTILE_CHECK(cuInit(0));
    HOSTILE_CHECK(cuDeviceGet(&dev, 0));
    HOSTILE_CHECK(cuDevicePrimaryCtxRetain(ctx, dev));
    HOSTILE_CHECK(cuCtxSetCurrent(*ctx));
    return 0;
}

static int hostile_fork_exit(void)
{
    CUcontext ctx;
    CUdeviceptr ptr;
    if (hostile_context(&ctx) != 0)
        return 1;
    HOSTILE_CHECK(cuMemAlloc(&ptr, 4u << 20));
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        perror("hostile_client: fork");
        return 1;
    }
    if (child == 0)
        exit(0); /* atexit handlers and destructors run here */
    for (int waited_ms = 0; waited_ms < 10000; waited_ms += 10) {
        int status;
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child) {
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "hostile_client: the child ended with status 0x%x\n", status);
                return 1;
            }
            HOSTILE_CHECK(cuMemFree(ptr));
            printf("the forked child exited after %d ms\n", waited_ms);
            return 0;
        }
        usleep(10000);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    fprintf(stderr, "hostile_client: the forked child did not exit within 10 s\n");
    return 1;
}

/* Set by SIGUSR1: the work loop ends after its round, as at its deadline
 * (a test that must observe the program while it runs, however loaded the
 * machine, gives it a long deadline and stops it so). */
static volatile sig_atomic_t hostile_stop;

static void hostile_on_stop(int signo)
{
    (void)signo;
    hostile_stop = 1;
}

static int hostile_work(unsigned ms, unsigned mib)
{
    CUcontext ctx;
    CUdeviceptr buffers[HOSTILE_BUFFERS];
    size_t bytes = (size_t)mib << 20;
    uint32_t *pattern = malloc(bytes), *back = malloc(bytes);
    unsigned long rounds = 0;

    if (pattern == NULL || back == NULL || hostile_context(&ctx) != 0)
        return 1;
    for (int i = 0; i < HOSTILE_BUFFERS; i++)
        HOSTILE_CHECK(cuMemAlloc(&buffers[i], bytes));
    struct sigaction stop = {.sa_handler = hostile_on_stop};
    sigemptyset(&stop.sa_mask);
    if (sigaction(SIGUSR1, &stop, NULL) != 0)
        return 1;
    printf("ready\n");
    fflush(stdout);
    uint64_t end = hostile_now_ms() + ms;
    do {
        for (int i = 0; i < HOSTILE_BUFFERS; i++) {
            uint32_t seed = (uint32_t)(rounds * HOSTILE_BUFFERS + (unsigned long)i) * 2654435761u;
            for (size_t w = 0; w < bytes / 4; w += 1024)
                pattern[w] = seed ^ (uint32_t)w;
            HOSTILE_CHECK(cuMemcpyHtoD(buffers[i], pattern, bytes));
        }
        for (int i = 0; i < HOSTILE_BUFFERS; i++) {
            uint32_t seed = (uint32_t)(rounds * HOSTILE_BUFFERS + (unsigned long)i) * 2654435761u;
            for (size_t w = 0; w < bytes / 4; w += 1024)
                pattern[w] = seed ^ (uint32_t)w;
            HOSTILE_CHECK(cuMemcpyDtoH(back, buffers[i], bytes));
            if (memcmp(back, pattern, bytes) != 0) {
                fprintf(stderr, "hostile_client: buffer %d lost its contents in round %lu\n", i, rounds);
                return 1;
            }
        }
        rounds++;
        usleep(1000);
    } while (!hostile_stop && hostile_now_ms() < end);
    for (int i = 0; i < HOSTILE_BUFFERS; i++)
        HOSTILE_CHECK(cuMemFree(buffers[i]));
    free(pattern);
    free(back);
    printf("%lu rounds, every byte read back\n", rounds);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "fork-exit") == 0)
        return hostile_fork_exit();
    if (argc >= 3 && strcmp(argv[1], "work") == 0)
        return hostile_work((unsigned)strtoul(argv[2], NULL, 10),
                            argc >= 4 ? (unsigned)strtoul(argv[3], NULL, 10) : 4);
    fprintf(stderr, "usage: %s fork-exit | work MS [MIB]\n", argv[0]);
    return 2;
}

/* shim_counters.h: the offload counters of the shim running in this very
 * process, read from its live snapshot (shim/snapshot_abi.h), for
 * benchmarks that must know what moved between two points of their run.
 *
 * `shim_counters_open` maps the header of "/vramshim-<uid>-<pid>" (the shim
 * creates it when it loads the driver, at its first hooked call), and
 * `shim_counters_read` copies the counters with the seqlock read the ABI
 * header describes, waiting until a publication that began after the call
 * has completed (the shim publishes every ~200 ms). Callers synchronise
 * first, so that nothing moves while they wait: the figures are then exact.
 * Header-only: used by bench/offload and bench/launch.
 */
#ifndef BENCH_SHIM_COUNTERS_H
#define BENCH_SHIM_COUNTERS_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "snapshot_abi.h"

/* How long `shim_counters_read` waits for a publication. */
#define SHIM_COUNTERS_WAIT_NS (5ull * 1000000000ull)

typedef struct shim_counters_s {
    uint64_t evictions, restores, bytes_to_host, bytes_to_device;
} shim_counters_t;

/* This process's snapshot header, mapped read-only, or NULL (said why on
 * stderr). */
static inline const vs_snapshot_header_t *shim_counters_open(void)
{
    char name[VS_SNAPSHOT_NAME_MAX];
    snprintf(name, sizeof name, VS_SNAPSHOT_NAME_FORMAT, (unsigned)geteuid(), vs_snapshot_pid_namespace(),
             (int)getpid());
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd < 0) {
        fprintf(stderr, "no shim snapshot %s: %s\n", name, strerror(errno));
        return NULL;
    }
    void *map = mmap(NULL, sizeof(vs_snapshot_header_t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        fprintf(stderr, "cannot map the shim snapshot %s: %s\n", name, strerror(errno));
        return NULL;
    }
    const vs_snapshot_header_t *h = map;
    if (h->magic != VS_SNAPSHOT_MAGIC || h->abi_version != VS_SNAPSHOT_ABI_VERSION) {
        fprintf(stderr, "the shim snapshot %s is not version %u\n", name, VS_SNAPSHOT_ABI_VERSION);
        munmap(map, sizeof(vs_snapshot_header_t));
        return NULL;
    }
    return h;
}

static inline uint64_t shim_counters_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t shim_counters_load(const uint64_t *word)
{
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

/* The counters as of this call. 0, or -1 when the shim published nothing
 * for SHIM_COUNTERS_WAIT_NS (said on stderr). */
static inline int shim_counters_read(const vs_snapshot_header_t *h, shim_counters_t *out)
{
    uint64_t deadline = shim_counters_now_ns() + SHIM_COUNTERS_WAIT_NS, first = UINT64_MAX;
    while (shim_counters_now_ns() < deadline) {
        uint64_t before = shim_counters_load(&h->sequence);
        uint64_t published = shim_counters_load(&h->publish_count);
        shim_counters_t copy = {
            .evictions = shim_counters_load(&h->totals.evictions),
            .restores = shim_counters_load(&h->totals.restores),
            .bytes_to_host = shim_counters_load(&h->totals.bytes_evicted),
            .bytes_to_device = shim_counters_load(&h->totals.bytes_restored),
        };
        uint64_t after = shim_counters_load(&h->sequence);
        if (before % 2 == 0 && before == after) {
            if (first == UINT64_MAX)
                first = published;
            /* Publication first+1 may have begun before this call;
             * first+2 began after it. */
            if (published >= first + 2) {
                *out = copy;
                return 0;
            }
        }
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000}, NULL);
    }
    fprintf(stderr, "the shim published no snapshot for %.0f s\n", SHIM_COUNTERS_WAIT_NS / 1e9);
    return -1;
}

#endif /* BENCH_SHIM_COUNTERS_H */

/* preload_util.h: helpers for the preload tests: the reader of the shim's
 * debugging snapshot (VRAMSHIM_DEBUG_SNAPSHOT), through which the tests see
 * the registry's last-use stamps. Checked driver calls are vs_test.h's.
 *
 * The snapshot is rewritten by the shim at every `cuCtxSynchronize`; one
 * line per live allocation ("alloc id=... base=0x... last_use_seq=...").
 */
#ifndef VRAMSHIM_TESTS_PRELOAD_UTIL_H
#define VRAMSHIM_TESTS_PRELOAD_UTIL_H

#include <cuda.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vs_test.h"

typedef struct preload_alloc_s {
    bool found;
    uint64_t id;
    uint64_t size;
    char kind[32];
    uint64_t last_use_seq;
    uint64_t use_count;
    int evictable;
} preload_alloc_t;

typedef struct preload_snapshot_s {
    char *text;
    uint64_t seq;
} preload_snapshot_t;

/* Synchronises the context (the shim writes the snapshot then) and reads
 * the file. Exits when there is none: the test is not running under the
 * shim. */
static inline preload_snapshot_t preload_snapshot(void)
{
    preload_snapshot_t snap = {0};
    const char *path = getenv("VRAMSHIM_DEBUG_SNAPSHOT");
    if (path == NULL) {
        fprintf(stderr, "VRAMSHIM_DEBUG_SNAPSHOT is not set\n");
        exit(1);
    }
    remove(path);
    VS_CHECK(cuCtxSynchronize());
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "no snapshot at %s: is libvramshim.so preloaded?\n", path);
        exit(1);
    }
    size_t cap = 1 << 16, len = 0;
    snap.text = malloc(cap);
    for (;;) {
        size_t n = fread(snap.text + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
        if (len + 1 == cap)
            snap.text = realloc(snap.text, cap *= 2);
    }
    snap.text[len] = '\0';
    fclose(f);
    sscanf(snap.text, "seq %" SCNu64, &snap.seq);
    return snap;
}

static inline preload_alloc_t preload_find(const preload_snapshot_t *snap, CUdeviceptr base)
{
    preload_alloc_t a = {0};
    char needle[64];
    snprintf(needle, sizeof needle, " base=0x%llx ", (unsigned long long)base);
    const char *line = strstr(snap->text, needle);
    if (line == NULL)
        return a;
    while (line > snap->text && line[-1] != '\n')
        line--;
    a.found = sscanf(line,
                     "alloc id=%" SCNu64 " base=%*s size=%" SCNu64 " device=%*d kind=%31s created_seq=%*u "
                     "created_ns=%*u last_use_seq=%" SCNu64 " use_count=%" SCNu64 " evictable=%d",
                     &a.id, &a.size, a.kind, &a.last_use_seq, &a.use_count, &a.evictable)
              == 6;
    return a;
}

/* The counted usage of device 0 ("device 0 used=N"), 0 when absent. */
static inline uint64_t preload_device_used(const preload_snapshot_t *snap)
{
    const char *line = strstr(snap->text, "device 0 used=");
    uint64_t used = 0;
    if (line != NULL)
        sscanf(line, "device 0 used=%" SCNu64, &used);
    return used;
}

static inline uint64_t preload_stat(const preload_snapshot_t *snap, const char *name)
{
    char needle[64];
    uint64_t value = 0;
    snprintf(needle, sizeof needle, "stat %s=", name);
    const char *line = strstr(snap->text, needle);
    if (line != NULL)
        sscanf(line + strlen(needle), "%" SCNu64, &value);
    return value;
}

static inline void preload_snapshot_free(preload_snapshot_t *snap)
{
    free(snap->text);
    snap->text = NULL;
}

/* A context on device 0, current on this thread. */
static inline CUcontext preload_context(void)
{
    CUdevice dev;
    CUcontext ctx;
    VS_CHECK(cuInit(0));
    VS_CHECK(cuDeviceGet(&dev, 0));
    VS_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    VS_CHECK(cuCtxSetCurrent(ctx));
    return ctx;
}

#endif

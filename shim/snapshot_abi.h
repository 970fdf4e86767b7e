/* snapshot_abi.h: the layout of the live-state snapshot that the shim
 * publishes and `vramshim` (tools/) reads. The only header shared by shim/
 * and tools/.
 *
 * Where: a POSIX shared-memory object named "/vramshim-<uid>-<pidns>-<pid>"
 * (`/dev/shm/vramshim-<uid>-<pidns>-<pid>` on Linux), mode 0600, created by
 * the process it describes and unlinked when that process exits. Its size
 * is fixed at creation, `header_bytes + row_capacity * row_bytes`, and its
 * space reserved then (a full /dev/shm refuses the snapshot, never a later
 * write).
 *
 * Consistency: a seqlock. `sequence` is odd while the writer updates the
 * object; a reader copies what it needs, then re-reads `sequence` and keeps
 * the copy only if it is even and unchanged. Every field after `sequence`
 * (the rest of the header and the rows) is made of naturally aligned 64-bit
 * words, written with release stores and read with acquire loads, one word
 * at a time. Writer: sequence := odd (relaxed), data (release stores),
 * sequence := even (release). Reader: s1 := sequence (acquire), copy
 * (acquire loads), s2 := sequence; the copy is good if s1 == s2 and even.
 * A data word from a later update carries the odd sequence with it, so the
 * reader's s2 cannot still equal s1. No fences (TSan does not model them);
 * release/acquire are plain moves on x86.
 *
 * Compatibility: integers are in the byte order of the machine (reader and
 * writer share it). Any change to the layout or to the meaning of a field
 * or enum value bumps `VS_SNAPSHOT_ABI_VERSION`; a reader refuses versions
 * other than its own. New enum values are a layout change.
 *
 * Times: `*_ns` fields are CLOCK_MONOTONIC nanoseconds (one clock for the
 * whole machine, so another process can compute ages), except
 * `start_realtime_ns` (CLOCK_REALTIME, for display).
 */
#ifndef VS_SNAPSHOT_ABI_H
#define VS_SNAPSHOT_ABI_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define VS_SNAPSHOT_MAGIC UINT64_C(0x50414e534d415256) /* "VRAMSNAP" read little-endian */
#define VS_SNAPSHOT_ABI_VERSION 1u

/* The shared-memory name: "/vramshim-<uid>-<pidns>-<pid>", where <pidns>
 * is the inode of the writer's PID namespace (/proc/self/ns/pid; 0 when it
 * cannot be read). Containers with PID namespaces of their own often share
 * one /dev/shm, and their pids repeat: the namespace keeps their names
 * apart, and a reader only ever looks at names of its own namespace (the
 * pids it can check). */
#define VS_SNAPSHOT_NAME_PREFIX "/vramshim-"
#define VS_SNAPSHOT_NAME_FORMAT "/vramshim-%u-%llu-%d"
#define VS_SNAPSHOT_NAME_MAX 80

#define VS_SNAPSHOT_MAX_DEVICES 16
#define VS_SNAPSHOT_PROGRAM_BYTES 64
/* Row capacity bounds: the writer's default and the most a reader accepts
 * (a corrupt capacity must not make the reader map gigabytes). */
#define VS_SNAPSHOT_DEFAULT_ROWS 65536u
#define VS_SNAPSHOT_MAX_ROWS (1u << 22)

/* X(enum suffix, name). One list per table; names are what `vramshim dump`
 * prints and what its JSON carries. */
#define VS_SNAPSHOT_MODES(X)                                                                       \
    X(TRACK, "track")                                                                              \
    X(CAP, "cap")                                                                                  \
    X(OFFLOAD, "offload")

#define VS_SNAPSHOT_PLACES(X)                                                                      \
    X(DEVICE, "device")                                                                            \
    X(HOST, "host")                                                                                \
    X(DISK, "disk")

#define VS_SNAPSHOT_KINDS(X)                                                                       \
    X(DEVICE, "device")                                                                            \
    X(PITCH, "pitch")                                                                              \
    X(ASYNC, "async")                                                                              \
    X(POOL, "pool")                                                                                \
    X(MANAGED, "managed")                                                                          \
    X(VMM, "vmm")                                                                                  \
    X(HOST_PINNED, "host-pinned")                                                                  \
    X(HOST_REGISTERED, "host-registered")                                                          \
    X(OTHER, "other")

/* Why an allocation is kept on the device whatever the policy says. */
#define VS_SNAPSHOT_KEEPS(X)                                                                       \
    X(NONE, "none")                                                                                \
    X(SMALL, "small")                                                                              \
    X(EXPORTED, "exported")                                                                        \
    X(MANAGED, "managed")                                                                          \
    X(APP_VMM, "app-vmm")                                                                          \
    X(POOL, "pool")                                                                                \
    X(GRAPH, "graph")                                                                              \
    X(CAPTURE, "capture")                                                                          \
    X(IN_USE, "in-use")                                                                            \
    X(HOST_MEMORY, "host-memory")

typedef enum vs_snapshot_mode_e {
#define VS_SNAPSHOT_X(suffix, name) VS_SNAPSHOT_MODE_##suffix,
    VS_SNAPSHOT_MODES(VS_SNAPSHOT_X)
#undef VS_SNAPSHOT_X
    VS_SNAPSHOT_MODE_COUNT
} vs_snapshot_mode_t;

typedef enum vs_snapshot_place_e {
#define VS_SNAPSHOT_X(suffix, name) VS_SNAPSHOT_PLACE_##suffix,
    VS_SNAPSHOT_PLACES(VS_SNAPSHOT_X)
#undef VS_SNAPSHOT_X
    VS_SNAPSHOT_PLACE_COUNT
} vs_snapshot_place_t;

typedef enum vs_snapshot_kind_e {
#define VS_SNAPSHOT_X(suffix, name) VS_SNAPSHOT_KIND_##suffix,
    VS_SNAPSHOT_KINDS(VS_SNAPSHOT_X)
#undef VS_SNAPSHOT_X
    VS_SNAPSHOT_KIND_COUNT
} vs_snapshot_kind_t;

typedef enum vs_snapshot_keep_e {
#define VS_SNAPSHOT_X(suffix, name) VS_SNAPSHOT_KEEP_##suffix,
    VS_SNAPSHOT_KEEPS(VS_SNAPSHOT_X)
#undef VS_SNAPSHOT_X
    VS_SNAPSHOT_KEEP_COUNT
} vs_snapshot_keep_t;

/* One GPU as the shim sees it. `limit_bytes` 0: no limit. */
typedef struct vs_snapshot_device_s {
    uint64_t ordinal;
    uint64_t limit_bytes;
    uint64_t physical_bytes; /* the device's total memory; 0 when unknown */
    uint64_t resident_bytes; /* bytes of tracked allocations on this device now */
} vs_snapshot_device_t;

/* Process-wide counters, cumulative since start unless named `*_bytes`
 * (which are current amounts). */
typedef struct vs_snapshot_totals_s {
    uint64_t allocations;  /* live tracked allocations (may exceed the rows published) */
    uint64_t device_bytes; /* live bytes whose place is the device */
    uint64_t host_bytes;   /* live bytes evicted to host memory */
    uint64_t disk_bytes;   /* live bytes spilled to disk */
    uint64_t evictions;
    uint64_t restores;
    uint64_t bytes_evicted;
    uint64_t bytes_restored;
    uint64_t launches;
    uint64_t copies;
    uint64_t failed_allocations; /* allocations refused (out of memory) */
    /* The offload engine's host time, ns: making room and restoring for
     * operations, its waits for the GPU and its virtual-memory calls
     * (vs_offload_stats_t; 0 in the cap mode and from older shims). */
    uint64_t restore_wait_ns;
    uint64_t host_gpu_wait_ns;
    uint64_t host_vmm_ns;
    uint64_t reserved[2];
} vs_snapshot_totals_t;

/* One allocation. */
typedef struct vs_snapshot_row_s {
    uint64_t alloc_id;
    uint64_t address;
    uint64_t size; /* as requested by the application */
    int64_t device;
    uint32_t kind;  /* vs_snapshot_kind_t */
    uint32_t place; /* vs_snapshot_place_t */
    uint32_t keep;  /* vs_snapshot_keep_t */
    uint32_t flags; /* reserved, 0 */
    uint64_t created_ns;
    uint64_t last_use_ns; /* 0: not used since creation or unknown */
    uint64_t last_use_seq;
    uint64_t uses;
    uint64_t evictions;
    uint64_t restores;
    uint64_t reserved[4];
} vs_snapshot_row_t;

/* The object starts with this header; the rows follow at `header_bytes`.
 * The first five fields are written once, before `magic` is published,
 * and never change; everything from `pid` on is guarded by `sequence`. */
typedef struct vs_snapshot_header_s {
    uint64_t magic; /* VS_SNAPSHOT_MAGIC; 0 until the object is initialised */
    uint32_t abi_version;
    uint32_t header_bytes; /* sizeof(vs_snapshot_header_t) */
    uint32_t row_bytes;    /* sizeof(vs_snapshot_row_t) */
    uint32_t row_capacity;
    uint64_t sequence; /* seqlock: odd while the writer updates */

    int64_t pid;
    uint64_t uid;
    uint64_t start_ticks;       /* /proc/<pid>/stat field 22: tells a recycled pid apart */
    uint64_t start_realtime_ns; /* when the snapshot was created */
    uint64_t update_ns;         /* when it was last published */
    uint64_t publish_count;
    uint64_t event_seq; /* the shim's event counter at publication (compare `last_use_seq`) */
    uint32_t mode;      /* vs_snapshot_mode_t */
    uint32_t device_count;
    uint32_t row_count; /* rows published, <= row_capacity */
    uint32_t reserved0;
    uint64_t rows_dropped; /* allocations left out because the capacity was full */
    uint64_t host_limit_bytes; /* 0: no limit */
    uint64_t reserved[8];
    vs_snapshot_totals_t totals;
    vs_snapshot_device_t devices[VS_SNAPSHOT_MAX_DEVICES];
    char program[VS_SNAPSHOT_PROGRAM_BYTES]; /* NUL-terminated */
} vs_snapshot_header_t;

/* The ABI is its sizes: a change here is a version bump. */
_Static_assert(sizeof(vs_snapshot_device_t) == 32, "vs_snapshot_device_t is 32 bytes");
_Static_assert(sizeof(vs_snapshot_totals_t) == 128, "vs_snapshot_totals_t is 128 bytes");
_Static_assert(sizeof(vs_snapshot_row_t) == 128, "vs_snapshot_row_t is 128 bytes");
_Static_assert(sizeof(vs_snapshot_header_t) == 888, "vs_snapshot_header_t is 888 bytes");
_Static_assert(sizeof(vs_snapshot_header_t) % 8 == 0, "the header is whole words");
_Static_assert(__builtin_offsetof(vs_snapshot_header_t, sequence) == 24, "sequence at 24");
_Static_assert(__builtin_offsetof(vs_snapshot_header_t, pid) == 32, "guarded fields start at 32");

/* The guarded part of the header, in bytes from its start. */
#define VS_SNAPSHOT_GUARDED_OFFSET 32u

/* The start time of a process (field 22 of the text of /proc/<pid>/stat,
 * NUL-terminated), which tells a recycled pid apart from the process that
 * wrote a snapshot: writer and reader must read it the same way. 0 when the
 * text is not what the kernel writes. */
static inline uint64_t vs_snapshot_stat_start_ticks(const char *stat)
{
    const char *p = strrchr(stat, ')'); /* the command may contain spaces and ')' */
    if (p == NULL)
        return 0;
    p++;
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (p == NULL)
            return 0;
    }
    return strtoull(p + 1, NULL, 10);
}

/* The inode of the calling process's PID namespace, as the snapshot's name
 * carries it; 0 when /proc does not say (writer and reader then agree on
 * 0 as long as both run where /proc is missing). */
static inline unsigned long long vs_snapshot_pid_namespace(void)
{
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) != 0)
        return 0;
    return (unsigned long long)st.st_ino;
}

#endif /* VS_SNAPSHOT_ABI_H */

/* snapshot_reader.h: reading a process's live-state snapshot
 * (shim/snapshot_abi.h) from outside it: validation of untrusted bytes
 * (`vs_snapshot_parse`, also the fuzz target's entry), a consistent copy
 * by pid (`vs_snapshot_read_pid`), and the listing that `vramshim ps` uses,
 * which removes the snapshots of processes that are gone.
 */
#ifndef VS_SNAPSHOT_READER_H
#define VS_SNAPSHOT_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "snapshot_abi.h"

/* Where the shared-memory objects live (glibc's shm_open directory). */
#define VS_SNAPSHOT_SHM_DIR "/dev/shm"

/* X(enum suffix, what it means). Functions return 0 or -VS_READ_ERR_*;
 * the message buffer then holds the full sentence for the user. */
#define VS_READ_ERRORS(X)                                                                          \
    X(NO_PROCESS, "no such process")                                                               \
    X(NOT_UNDER_SHIM, "process not running under vramshim")                                        \
    X(OTHER_USER, "another user's process")                                                        \
    X(VERSION, "incompatible snapshot version")                                                    \
    X(TRUNCATED, "truncated snapshot")                                                             \
    X(CORRUPT, "corrupt snapshot")                                                                 \
    X(BUSY, "snapshot kept changing")                                                              \
    X(SYSTEM, "system error")

typedef enum vs_read_error_e {
    VS_READ_OK = 0,
#define VS_READ_X(suffix, what) VS_READ_ERR_##suffix,
    VS_READ_ERRORS(VS_READ_X)
#undef VS_READ_X
} vs_read_error_t;

const char *vs_read_error_name(int err);

/* A validated snapshot: pointers into the buffer that was parsed. */
typedef struct vs_snapshot_view_s {
    const vs_snapshot_header_t *header;
    const vs_snapshot_row_t *rows;
    uint32_t row_count;
} vs_snapshot_view_t;

/* Validates a snapshot image of `len` bytes (the header and `row_count`
 * rows; the capacity beyond them is not needed). `buf` must be 8-byte
 * aligned. Never reads outside [buf, buf + len). Returns 0 and fills
 * *view, or -VS_READ_ERR_{TRUNCATED,VERSION,CORRUPT} with a message. */
int vs_snapshot_parse(const void *buf, size_t len, vs_snapshot_view_t *view, char *msg,
                      size_t msg_len);

/* A private, consistent copy of one process's snapshot. */
typedef struct vs_snapshot_copy_s {
    void *buf;
    size_t len;
    vs_snapshot_view_t view;
} vs_snapshot_copy_t;

/* Checks the process (exists, is ours), opens its snapshot, checks the
 * object (owner, mode, size) and copies it under the seqlock. A snapshot
 * left by a dead process, or by an earlier process with the same pid, is
 * removed. 0 or -VS_READ_ERR_*. */
int vs_snapshot_read_pid(pid_t pid, vs_snapshot_copy_t *copy, char *msg, size_t msg_len);
void vs_snapshot_copy_free(vs_snapshot_copy_t *copy);

/* Calls fn on every pid that has a snapshot of the calling user in the
 * caller's PID namespace, in pid order, after removing those whose process
 * is gone (each attempt is reported through `removed` when not NULL: err 0
 * when the snapshot was removed, else why not). Files under our names that
 * are not ours (another user's, not regular files) are skipped. Returns
 * the number of pids or a negative errno. */
int vs_snapshot_list(void (*fn)(pid_t pid, void *arg), void *arg,
                     void (*removed)(pid_t pid, int err, void *arg));

/* "process is alive and is the same process as the snapshot's writer". */
bool vs_snapshot_pid_alive(pid_t pid);

/* Names for the ABI enums ("?" when out of range). */
const char *vs_snapshot_mode_name(uint32_t mode);
const char *vs_snapshot_place_name(uint32_t place);
const char *vs_snapshot_kind_name(uint32_t kind);
const char *vs_snapshot_keep_name(uint32_t keep);

#endif /* VS_SNAPSHOT_READER_H */

/* output_file.h: how the shim creates the files it writes
 * (`VRAMSHIM_LOG_FILE`, `VRAMSHIM_TRACE`, `VRAMSHIM_DEBUG_SNAPSHOT`).
 *
 * Their paths are often in a shared directory (/tmp), where another local
 * user can plant a symlink or a FIFO at the name, or at a predictable name
 * beside it. So a file is created with O_EXCL|O_NOFOLLOW and mode 0600;
 * an existing name is used only when it is a regular file of ours with a
 * single link (an earlier run's output); a symlink, a FIFO, a device or
 * another user's file is refused (-ELOOP, -EPERM, -ENXIO), and the caller
 * warns once and runs on without that output. Opening never blocks
 * (O_NONBLOCK: a FIFO without a reader is refused, not waited for), so a
 * write can neither block on nor raise SIGPIPE from a pipe.
 */
#ifndef VS_OUTPUT_FILE_H
#define VS_OUTPUT_FILE_H

typedef enum vs_output_mode_e {
    VS_OUTPUT_APPEND,  /* keep what an existing file of ours holds (a log) */
    VS_OUTPUT_REPLACE, /* start an existing file of ours from empty (a trace) */
} vs_output_mode_t;

/* Opens `path` for writing as above. Returns the descriptor (O_CLOEXEC)
 * or -errno. */
int vs_output_open(const char *path, vs_output_mode_t mode);

/* Whether `path` may be replaced by a rename: 0 when nothing is there or
 * it is a regular file of ours with one link, else -EPERM (-errno when it
 * cannot be inspected). */
int vs_output_replaceable(const char *path);

#endif /* VS_OUTPUT_FILE_H */

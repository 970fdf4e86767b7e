/* log.h: the shim's one logging entry point (`vs_log`).
 *
 * Messages go to stderr or `VRAMSHIM_LOG_FILE` with `write(2)`, never through
 * stdio or malloc, so logging is safe from inside any hook and never changes
 * `errno`.
 */
#ifndef VS_LOG_H
#define VS_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef enum vs_log_level_e {
    VS_LOG_ERROR = 0,
    VS_LOG_WARN = 1,
    VS_LOG_INFO = 2,
    VS_LOG_DEBUG = 3,
} vs_log_level_t;

/* Sets the threshold and the destination (NULL or "" for stderr). Called
 * once the configuration is parsed; before that, warnings and errors go to
 * stderr. Returns 0 or -errno when the file cannot be opened (stderr is kept). */
int vs_log_configure(vs_log_level_t level, const char *path);

/* True when messages at `level` are written: callers check it before
 * assembling expensive arguments. */
int vs_log_enabled(vs_log_level_t level);

void vs_log(vs_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes `bytes` for a reader into `buf`: "512 B", "3.5 MiB", "122 GiB".
 * Returns `buf`. */
const char *vs_log_bytes(char *buf, size_t len, uint64_t bytes);

#endif /* VS_LOG_H */

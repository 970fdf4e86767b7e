/* tool.h: what the `vramshim` command's files share.
 *
 * Exit statuses: 0 success; 1 an error about the target process or its
 * snapshot (no such process, not under the shim, another user's process,
 * incompatible version, truncated or corrupt snapshot); 2 a usage error;
 * `run` exits with the program's own status, 126 when the program cannot
 * be executed and 127 when it is not found.
 */
#ifndef VS_TOOL_H
#define VS_TOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define VS_TOOL_EXIT_OK 0
#define VS_TOOL_EXIT_ERROR 1
#define VS_TOOL_EXIT_USAGE 2

/* "vramshim: <message>" on stderr. */
void vs_tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A pid from the command line; -1 (after printing why) when malformed. */
pid_t vs_tool_parse_pid(const char *text);

/* A size the way VRAM_LIMIT spells it (the shim has the full parser;
 * this rejects what is obviously wrong). `per_device` also accepts
 * "0:10G,1:20G". */
bool vs_tool_size_valid(const char *text, bool per_device);

/* An absolute size ("10G", "1.5GiB", "256MB", "1073741824"; no '%') into
 * bytes. 0 or -EINVAL. */
int vs_tool_parse_size(const char *text, uint64_t *bytes);

int vs_tool_run(int argc, char **argv);
int vs_tool_ps(int argc, char **argv);
int vs_tool_dump(int argc, char **argv);
int vs_tool_top(int argc, char **argv);
int vs_tool_plot(int argc, char **argv);
int vs_tool_metrics(int argc, char **argv);

#endif /* VS_TOOL_H */

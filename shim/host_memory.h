/* host_memory.h: the host memory this process may use, and the limit of
 * the pinned host pool that follows from it (`vs_host_memory_pool_limit`).
 *
 * The pool is pinned: it cannot be swapped, and inside a container its
 * pages count against the cgroup's memory limit. Half of the machine's RAM
 * in a container allowed a quarter of it is an OOM kill, so "available"
 * is the smaller of physical memory and the cgroup limit (v2 `memory.max`,
 * v1 `memory.limit_in_bytes`, the tightest of the cgroup and its
 * ancestors). Pure file reading: the unit test points `root` at a fake
 * tree.
 */
#ifndef VS_HOST_MEMORY_H
#define VS_HOST_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* The memory limit of the calling process's cgroup, read under `root`
 * ("" for the real /proc and /sys). 0 and *bytes (UINT64_MAX when no
 * limit is set), or -errno when /proc/self/cgroup cannot be read. */
int vs_host_memory_cgroup_limit(const char *root, uint64_t *bytes);

/* min(physical memory, cgroup limit) under `root`. */
uint64_t vs_host_memory_available(const char *root);

/* The host pool's limit: VRAMSHIM_HOST_LIMIT in bytes, or its percentage
 * of the available memory, or half of it when not given. A size above
 * the available memory is lowered to half of it and `why` says so (one
 * line for a warning); otherwise `why` is "". */
uint64_t vs_host_memory_pool_limit(const vs_config_t *cfg, const char *root, char *why, size_t why_len);

#endif /* VS_HOST_MEMORY_H */

/* host_memory.c: physical memory, cgroup limits and the host pool's limit
 * (`vs_host_memory_pool_limit`); see host_memory.h. */
#include "host_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* v1 reports "no limit" as a huge page-rounded number. */
#define VS_HOST_MEMORY_V1_UNLIMITED (UINT64_C(1) << 62)

static int vs_host_memory_read(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, len - 1);
    int rc = n < 0 ? -errno : 0;
    close(fd);
    if (rc == 0)
        buf[n] = '\0';
    return rc;
}

/* The tightest `file` limit in `dir` and its ancestors down to `top`. */
static uint64_t vs_host_memory_walk(char *dir, size_t top_len, const char *file, bool v1)
{
    uint64_t limit = UINT64_MAX;
    for (;;) {
        char path[4300], text[64];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (vs_host_memory_read(path, text, sizeof text) == 0 && text[0] >= '0' && text[0] <= '9') {
            uint64_t value = strtoull(text, NULL, 10);
            if (!(v1 && value >= VS_HOST_MEMORY_V1_UNLIMITED) && value < limit)
                limit = value; /* "max" (v2) starts with no digit: no limit */
        }
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= top_len || slash == NULL || (size_t)(slash - dir) < top_len)
            break;
        *slash = '\0';
    }
    return limit;
}

int vs_host_memory_cgroup_limit(const char *root, uint64_t *bytes)
{
    char path[4200], text[4096];
    int rc;

    *bytes = UINT64_MAX;
    snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
    if ((rc = vs_host_memory_read(path, text, sizeof text)) != 0)
        return rc;
    for (char *line = text, *next; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        /* "id:controllers:path"; v2 is "0::path", v1 lists "memory". */
        char *first = strchr(line, ':');
        char *second = first != NULL ? strchr(first + 1, ':') : NULL;
        if (second == NULL || second[1] != '/')
            continue;
        *first = '\0';
        *second = '\0';
        const char *controllers = first + 1, *cgroup = second + 1;
        bool v2 = strcmp(line, "0") == 0 && controllers[0] == '\0';
        bool v1 = false;
        for (const char *c = controllers; *c != '\0';) {
            size_t n = strcspn(c, ",");
            if (n == 6 && strncmp(c, "memory", 6) == 0)
                v1 = true;
            c += n + (c[n] == ',');
        }
        if (!v1 && !v2)
            continue;
        char dir[4200];
        int top = snprintf(dir, sizeof dir, "%s/sys/fs/cgroup%s", root, v1 ? "/memory" : "");
        if (top < 0 || (size_t)top >= sizeof dir)
            continue;
        snprintf(dir + top, sizeof dir - (size_t)top, "%s", strcmp(cgroup, "/") == 0 ? "" : cgroup);
        uint64_t limit = vs_host_memory_walk(dir, (size_t)top, v1 ? "memory.limit_in_bytes" : "memory.max", v1);
        if (limit < *bytes)
            *bytes = limit;
    }
    return 0;
}

uint64_t vs_host_memory_available(const char *root)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t physical = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 16ull << 30;
    uint64_t cgroup;
    if (vs_host_memory_cgroup_limit(root, &cgroup) == 0 && cgroup < physical)
        return cgroup;
    return physical;
}

uint64_t vs_host_memory_pool_limit(const vs_config_t *cfg, const char *root, char *why, size_t why_len)
{
    uint64_t available = vs_host_memory_available(root);

    if (why_len > 0)
        why[0] = '\0';
    if (cfg->host_limit_ppm != 0)
        return vs_config_limit_bytes(&(vs_limit_t){.kind = VS_LIMIT_PERCENT, .ppm = cfg->host_limit_ppm}, available);
    if (cfg->host_limit == 0)
        return available / 2;
    if (cfg->host_limit > available) {
        snprintf(why, why_len,
                 "VRAMSHIM_HOST_LIMIT=%" PRIu64 " bytes is more than the %" PRIu64 " bytes this process may "
                 "use (physical memory or its cgroup's limit); the pinned pool is held to half of that",
                 cfg->host_limit, available);
        return available / 2;
    }
    return cfg->host_limit;
}

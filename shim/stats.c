/* stats.c: per-thread event counters (`VS_COUNT`) and the
 * `VRAMSHIM_DEBUG_SNAPSHOT` file (`vs_stats_debug_snapshot`).
 */
#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cap.h"
#include "config.h"
#include "log.h"
#include "output_file.h"
#include "registry.h"
#include "stamp_log.h"

static _Atomic(vs_stats_t *) vs_stats_blocks;
static __thread vs_stats_t *vs_stats_local __attribute__((tls_model("initial-exec")));

vs_stats_t *vs_stats_mine(void)
{
    vs_stats_t *mine = vs_stats_local;
    if (mine != NULL)
        return mine;
    mine = calloc(1, sizeof *mine);
    if (mine == NULL)
        return NULL;
    mine->next = atomic_load(&vs_stats_blocks);
    while (!atomic_compare_exchange_weak(&vs_stats_blocks, &mine->next, mine)) {
    }
    vs_stats_local = mine;
    return mine;
}

void vs_stats_sum(vs_stats_t *out)
{
    memset(out, 0, sizeof *out);
    for (vs_stats_t *b = atomic_load(&vs_stats_blocks); b != NULL; b = b->next) {
#define VS_STAT_ADD(name, description)                                                             \
    atomic_store_explicit(&out->name,                                                              \
                          atomic_load_explicit(&out->name, memory_order_relaxed)                   \
                              + atomic_load_explicit(&b->name, memory_order_relaxed),              \
                          memory_order_relaxed);
        VS_STATS(VS_STAT_ADD)
#undef VS_STAT_ADD
    }
}

/* One line per allocation, for tests and for people debugging a run. */
static void vs_stats_snapshot_line(const vs_alloc_info_t *a, void *arg)
{
    FILE *f = arg;
    fprintf(f,
            "alloc id=%" PRIu64 " base=0x%" PRIxPTR " size=%" PRIu64 " device=%d kind=%s created_seq=%" PRIu64
            " created_ns=%" PRIu64 " last_use_seq=%" PRIu64 " use_count=%" PRIu64 " evictable=%d reason=\"%s\"\n",
            a->id, a->base, a->size, a->device, vs_registry_kind_name(a->kind), a->created_seq, a->created_ns,
            a->last_use_seq, a->use_count, a->evictable ? 1 : 0, a->pinned_reason ? a->pinned_reason : "");
}

void vs_stats_debug_snapshot(void)
{
    const vs_config_t *cfg = vs_config_get();
    char tmp[VS_CONFIG_PATH_MAX + 32];
    int saved_errno = errno;

    if (cfg->debug_snapshot[0] == '\0')
        return;
    vs_stamp_log_flush(); /* every use made so far shows */
    /* The temporary name is predictable: it is created exclusively, 0600,
     * never through a symlink planted there (output_file.h). */
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", cfg->debug_snapshot, (int)getpid());
    int fd = vs_output_open(tmp, VS_OUTPUT_REPLACE);
    int rc = fd < 0 ? fd : vs_output_replaceable(cfg->debug_snapshot);
    FILE *f = rc == 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        if (rc == 0)
            rc = -errno;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        static _Atomic bool warned; /* rewritten at every synchronisation: said once */
        if (!atomic_exchange(&warned, true))
            vs_log(VS_LOG_WARN, "cannot write VRAMSHIM_DEBUG_SNAPSHOT=%s: %s (it must be a regular file of "
                   "yours or a new name)", cfg->debug_snapshot, strerror(-rc));
        goto out;
    }
    fprintf(f, "seq %" PRIu64 "\n", vs_registry_next_seq());
    for (int d = 0; d < VS_MAX_DEVICES; d++) {
        if (vs_cap_used(d) != 0 || vs_cap_peak(d) != 0)
            fprintf(f, "device %d used=%" PRIu64 " peak=%" PRIu64 "\n", d, vs_cap_used(d), vs_cap_peak(d));
    }
    vs_stats_t totals;
    vs_stats_sum(&totals);
#define VS_STAT_LINE(name, description) fprintf(f, "stat " #name "=%" PRIu64 "\n", atomic_load(&totals.name));
    VS_STATS(VS_STAT_LINE)
#undef VS_STAT_LINE
    vs_registry_foreach(vs_stats_snapshot_line, f);
    fclose(f);
    /* Readers see the old snapshot or the new one, never half of one. */
    /* A rename never follows a symlink at the destination: at worst it
     * replaces the link, never what it points to. */
    if (rename(tmp, cfg->debug_snapshot) != 0)
        unlink(tmp);
out:
    errno = saved_errno;
}

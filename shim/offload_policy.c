/* offload_policy.c: what the eviction policy (policy/) hears from the
 * engine: the uses the launch path stamped in the registry, told in the
 * order they happened (`vs_engine_policy_sync`), and which regions it may
 * choose as victims now (`vs_engine_policy_refresh`: not while held or
 * pinned; `vs_engine_policy_reset_skips`). The policy is pure and not
 * thread-safe: every call into it is made here and in the engine's other
 * files with the engine lock held.
 */
#include "offload_internal.h"
#include "offload_prefetch.h"

#include <stdlib.h>

bool vs_engine_region_evictable(const vs_region_t *r)
{
    /* An arena's chunk goes only when the chunk before it is gone. */
    return !r->pinned && r->holds == 0 && (r->run_prev == NULL || r->run_prev->where != VS_RESIDENT);
}

void vs_engine_policy_refresh(vs_region_t *r)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_engine_device_t *d = &vs_engine.devices[r->device];
    if (d->policy != NULL)
        (void)vs_policy_set_evictable(d->policy, r->id, vs_engine_region_evictable(r));
}

/* The last uses the launch path stamped since the policy last heard of
 * them, gathered from the registry: the policy must hear them in the order
 * they happened (it takes a use older than one it has seen as happening
 * now, which would blur the gaps it learns the cycle from). */
typedef struct vs_use_s {
    uint64_t seq;
    vs_region_t *region;
} vs_use_t;

typedef struct vs_uses_s {
    vs_use_t *uses;
    size_t count, capacity;
} vs_uses_t;


static void vs_engine_policy_gather_one(const vs_alloc_info_t *info, void *arg)
{
    vs_uses_t *uses = arg;
    vs_region_t *r = vs_engine_region_at(info->base);
    if (r == NULL || info->last_use_seq <= r->synced_seq)
        return;
    if (uses->count == uses->capacity) {
        size_t capacity = uses->capacity ? uses->capacity * 2 : 64;
        vs_use_t *grown = realloc(uses->uses, capacity * sizeof *grown);
        if (grown == NULL)
            return; /* told next time */
        uses->uses = grown;
        uses->capacity = capacity;
    }
    uses->uses[uses->count++] = (vs_use_t){.seq = info->last_use_seq, .region = r};
}

static int vs_engine_use_order(const void *a, const void *b)
{
    uint64_t x = ((const vs_use_t *)a)->seq, y = ((const vs_use_t *)b)->seq;
    return x < y ? -1 : x > y;
}

/* Tells the policy, in order, the uses stamped since the last call. Engine
 * lock held. */
void vs_engine_policy_sync(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    static vs_uses_t uses; /* reused: engine lock held */
    uses.count = 0;
    vs_registry_foreach(vs_engine_policy_gather_one, &uses);
    if (uses.count > 1)
        qsort(uses.uses, uses.count, sizeof *uses.uses, vs_engine_use_order);
    for (size_t i = 0; i < uses.count; i++) {
        vs_region_t *r = uses.uses[i].region;
        r->synced_seq = uses.uses[i].seq;
        vs_prefetch_forget(r); /* used since it was prefetched */
        vs_engine_device_t *d = &vs_engine.devices[r->device];
        if (d->policy != NULL)
            (void)vs_policy_access(d->policy, r->id, r->synced_seq, VS_POLICY_RW_UNKNOWN);
    }
}

/* Re-allows the policy to choose every region it was told to skip. */
void vs_engine_policy_reset_skips(void)
{
    VS_ASSERT_HELD(&vs_engine.lock);
    vs_region_t *r, *tmp;
    HASH_ITER(hh, vs_engine.by_base, r, tmp) {
        if (r->where == VS_RESIDENT)
            vs_engine_policy_refresh(r);
    }
}

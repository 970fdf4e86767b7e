/*
 * predict.c: the reference-stream predictor (predict.h). Main entry points:
 * `vs_predict_access`, `vs_predict_next_use`, `vs_predict_next`.
 *
 * The history is a ring of the latest accesses, each with the running sums
 * of bytes and compute time up to it and a prefix hash of the id string, so
 * that the hash of any window ending at an access is two ring reads. One
 * direct-mapped table maps (window length, window hash) to the latest
 * access that ended such a window; a collision overwrites, which costs a
 * prediction, never an answer outside the history. Per access: one probe
 * and one store per window length (log2 of the history), and O(1) work on
 * the accessed allocation. Per question: a binary search in the accessed
 * allocation's ring of recent positions.
 */
#include "predict.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) (add_failed = true)
#include <uthash.h>

/* Positions remembered per allocation: enough to find its first use in a
 * period where it is used up to this many times; past that the first use
 * is taken one average gap away. */
#define VS_PREDICT_POSITIONS 32
#define VS_PREDICT_LEVELS_MAX 30
/* A matched context this long or longer wins over carrying the previous
 * alignment on; a shorter one only where the alignment failed. */
#define VS_PREDICT_TRUSTED_CONTEXT 4
/* How often the context predicted an allocation's next use within an
 * eighth of its gap: a moving average out of HIT_ONE, moving by a quarter,
 * starting at HIT_ONE. Below half, its next use is read from its frequency
 * (a router's choices), not from the context. */
#define VS_PREDICT_HIT_ONE 256
#define VS_PREDICT_HASH_BASE 0x100000001b3ULL

typedef struct vs_predict_hist_s {
    uint64_t id;
    uint64_t bytes;
    uint64_t cum_bytes; /* bytes of every access up to this one, included */
    uint64_t cum_ns;    /* compute time up to this access, included */
    uint64_t prefix;    /* hash of the id string up to this access */
    uint32_t in_op;     /* accesses of its operation before it */
    bool write;
} vs_predict_hist_t;

typedef struct vs_predict_slot_s {
    uint64_t key;
    uint64_t pos; /* access index + 1; 0: empty */
} vs_predict_slot_t;

typedef struct vs_predict_item_s {
    uint64_t id;
    uint64_t pos[VS_PREDICT_POSITIONS]; /* ring of access indices, oldest first from `head` */
    unsigned npos;
    unsigned head;
    uint64_t uses;
    uint64_t last;           /* access index of the latest use */
    uint64_t last_cum_bytes; /* running sums at the latest use */
    uint64_t last_cum_ns;
    /* Moving averages of the gaps between uses, x16: accesses, bytes, ns. */
    uint64_t gap16, gap_bytes16, gap_ns16;
    /* Where its rhythm of uses starts: its first access, or its second
     * when the first wrote it (contents loaded ahead of a loop, which says
     * nothing about how often the loop uses it). The mean gap since then
     * is its frequency. */
    uint64_t from, from_cum_bytes, from_cum_ns, from_uses;
    bool first_write;
    uint64_t expected; /* access index the context predicted at the latest use; NEVER: none */
    uint64_t hit_rate; /* out of VS_PREDICT_HIT_ONE */
    bool last_write;
    UT_hash_handle hh;
} vs_predict_item_t;

struct vs_predict_s {
    vs_predict_hist_t *hist;
    uint64_t cap; /* power of two */
    uint64_t n;   /* accesses so far; the latest is n - 1 */
    vs_predict_slot_t *table;
    uint64_t table_mask;
    unsigned levels;
    uint64_t power[VS_PREDICT_LEVELS_MAX]; /* BASE^(2^k) */
    uint64_t cum_bytes, cum_ns;
    /* The alignment: the latest access corresponds to access `j`, and the
     * future repeats hist[j + 1 .. n - 1]. */
    bool matched;
    uint64_t j;
    uint64_t context;
    uint64_t hits;
    uint64_t allocations;
    vs_predict_item_t *items;
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

int vs_predict_create(size_t history, vs_predict_t **out)
{
    if (!out || history == 0 || history > (1ULL << 28))
        return -EINVAL;
    uint64_t cap = 64;
    while (cap < history)
        cap *= 2;
    vs_predict_t *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->cap = cap;
    p->hist = calloc(cap, sizeof(*p->hist));
    /* Every level keeps up to `cap` windows live; four slots per live
     * window at the deepest levels keeps collisions rare. */
    uint64_t slots = cap * 8;
    p->table = calloc(slots, sizeof(*p->table));
    if (!p->hist || !p->table) {
        vs_predict_destroy(p);
        return -ENOMEM;
    }
    p->table_mask = slots - 1;
    uint64_t power = VS_PREDICT_HASH_BASE;
    for (uint64_t len = 1; len <= cap / 2 && p->levels < VS_PREDICT_LEVELS_MAX; len *= 2) {
        p->power[p->levels++] = power;
        power *= power;
    }
    *out = p;
    return 0;
}

void vs_predict_destroy(vs_predict_t *p)
{
    if (!p)
        return;
    vs_predict_item_t *it, *tmp;
    HASH_ITER(hh, p->items, it, tmp) {
        HASH_DEL(p->items, it);
        free(it);
    }
    free(p->hist);
    free(p->table);
    free(p);
}

static const vs_predict_hist_t *at(const vs_predict_t *p, uint64_t index)
{
    return &p->hist[index & (p->cap - 1)];
}

/* Hash of the `level`-th window length ending at access `end`. */
static uint64_t window_key(const vs_predict_t *p, uint64_t end, unsigned level)
{
    uint64_t len = 1ULL << level;
    uint64_t before = end + 1 >= len + 1 ? at(p, end - len)->prefix : 0;
    uint64_t h = at(p, end)->prefix - before * p->power[level];
    return mix64(h + (uint64_t)(level + 1) * 0x9e3779b97f4a7c15ULL) | 1;
}

/* The latest earlier access whose preceding window matches the one ending
 * at `end`, the longest window first. */
static bool find_context(const vs_predict_t *p, uint64_t end, uint64_t *pos, uint64_t *len)
{
    for (unsigned level = p->levels; level-- > 0;) {
        uint64_t l = 1ULL << level;
        if (l > end)
            continue;
        uint64_t key = window_key(p, end, level);
        const vs_predict_slot_t *s = &p->table[key & p->table_mask];
        if (s->pos == 0 || s->key != key)
            continue;
        uint64_t q = s->pos - 1;
        if (q >= end || end - q >= p->cap / 2 || at(p, q)->id != at(p, end)->id)
            continue;
        *pos = q;
        *len = l;
        return true;
    }
    return false;
}

static void remember_windows(vs_predict_t *p, uint64_t end)
{
    for (unsigned level = 0; level < p->levels; level++) {
        if ((1ULL << level) > end + 1)
            break;
        uint64_t key = window_key(p, end, level);
        p->table[key & p->table_mask] = (vs_predict_slot_t){.key = key, .pos = end + 1};
    }
}

static vs_predict_item_t *find_item(const vs_predict_t *p, uint64_t id)
{
    vs_predict_item_t *it = NULL;
    HASH_FIND(hh, p->items, &id, sizeof(id), it);
    return it;
}

/* The item's first remembered position after `after`, within the history;
 * false when it has none. `*exact` is false when older positions were
 * forgotten and an earlier one may exist. */
static bool first_after(const vs_predict_t *p, const vs_predict_item_t *it, uint64_t after, uint64_t *pos,
                        bool *exact)
{
    uint64_t oldest_kept = p->n > p->cap ? p->n - p->cap : 0;
    unsigned lo = 0, hi = it->npos;
    while (lo < hi) { /* positions increase along the ring */
        unsigned mid = (lo + hi) / 2;
        if (it->pos[(it->head + mid) % VS_PREDICT_POSITIONS] > after)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo == it->npos)
        return false;
    *pos = it->pos[(it->head + lo) % VS_PREDICT_POSITIONS];
    if (*pos < oldest_kept)
        return false;
    *exact = lo > 0 || it->npos < VS_PREDICT_POSITIONS;
    return true;
}

/* Steps ahead (1: the next access) at which the context predicts the
 * item's next use; 0 when it does not. */
static uint64_t periodic_steps(const vs_predict_t *p, const vs_predict_item_t *it)
{
    if (!p->matched)
        return 0;
    uint64_t pos;
    bool exact;
    if (!first_after(p, it, p->j, &pos, &exact))
        return 0;
    uint64_t steps = pos - p->j;
    if (!exact && it->gap16 / 16 < steps)
        steps = it->gap16 / 16 ? it->gap16 / 16 : 1;
    return steps;
}

/* Sum over the predicted steps 1..`steps` of `field` (running sums in the
 * history), the future repeating hist[j + 1 .. n - 1]. */
static uint64_t ahead_sum(const vs_predict_t *p, uint64_t steps, bool bytes)
{
    uint64_t period = p->n - 1 - p->j;
    const vs_predict_hist_t *from = at(p, p->j), *last = at(p, p->n - 1);
    uint64_t whole = bytes ? last->cum_bytes - from->cum_bytes : last->cum_ns - from->cum_ns;
    uint64_t rounds = steps / period, rest = steps % period;
    const vs_predict_hist_t *to = at(p, p->j + rest);
    uint64_t part = bytes ? to->cum_bytes - from->cum_bytes : to->cum_ns - from->cum_ns;
    return rounds * whole + part;
}

static bool periodic(const vs_predict_item_t *it)
{
    return it->hit_rate >= VS_PREDICT_HIT_ONE / 2;
}

static void item_push(vs_predict_item_t *it, uint64_t index)
{
    if (it->npos < VS_PREDICT_POSITIONS) {
        it->pos[(it->head + it->npos) % VS_PREDICT_POSITIONS] = index;
        it->npos++;
    } else {
        it->pos[it->head] = index;
        it->head = (it->head + 1) % VS_PREDICT_POSITIONS;
    }
}

/* The mean of the latest samples, x16: the running mean of the first
 * eight, then an average moving by an eighth (a router's preference shows
 * over many uses, not the latest few). `count` includes this sample. */
static uint64_t average16(uint64_t avg16, uint64_t sample, uint64_t count)
{
    uint64_t k = count < 8 ? count : 8;
    return ((k - 1) * avg16 + sample * 16) / k;
}

int vs_predict_access(vs_predict_t *p, uint64_t id, uint64_t bytes, bool write, uint64_t compute_ns,
                      bool same_op)
{
    vs_predict_item_t *it = find_item(p, id);
    if (!it) {
        bool add_failed = false;
        it = calloc(1, sizeof(*it));
        if (!it)
            return -ENOMEM;
        it->id = id;
        it->expected = VS_PREDICT_NEVER;
        it->hit_rate = VS_PREDICT_HIT_ONE;
        HASH_ADD(hh, p->items, id, sizeof(it->id), it);
        if (add_failed) {
            free(it);
            return -ENOMEM;
        }
        p->allocations++;
    }
    uint64_t i = p->n;
    if (p->matched && at(p, p->j + 1)->id == id)
        p->hits++;
    p->cum_bytes += bytes;
    p->cum_ns += compute_ns;
    vs_predict_hist_t *h = &p->hist[i & (p->cap - 1)];
    uint64_t prev = i ? at(p, i - 1)->prefix : 0;
    uint32_t in_op = same_op && i > 0 ? at(p, i - 1)->in_op + 1 : 0;
    *h = (vs_predict_hist_t){.id = id, .bytes = bytes, .cum_bytes = p->cum_bytes, .cum_ns = p->cum_ns,
                             .prefix = prev * VS_PREDICT_HASH_BASE + mix64(id + 1), .in_op = in_op,
                             .write = write};
    p->n = i + 1;

    uint64_t found = 0, len = 0;
    bool have = find_context(p, i, &found, &len);
    bool carry = p->matched && p->j + 1 < i && i - (p->j + 1) < p->cap / 2;
    if (have && (len >= VS_PREDICT_TRUSTED_CONTEXT || !carry || at(p, p->j + 1)->id != id)) {
        p->j = found;
        p->context = len;
        p->matched = true;
    } else if (carry) {
        p->j++;
        p->context = at(p, p->j)->id == id ? p->context + 1 : 0;
    } else {
        p->matched = false;
        p->context = 0;
    }
    remember_windows(p, i);

    bool first = it->uses == 0;
    if (!first) {
        uint64_t gap = i - it->last;
        if (it->expected != VS_PREDICT_NEVER) {
            uint64_t err = it->expected > i ? it->expected - i : i - it->expected;
            bool hit = err <= gap / 8 + 1;
            it->hit_rate = (3 * it->hit_rate + (hit ? VS_PREDICT_HIT_ONE : 0)) / 4;
        }
        it->gap16 = average16(it->gap16, gap, it->uses);
        it->gap_bytes16 = average16(it->gap_bytes16, p->cum_bytes - bytes - it->last_cum_bytes, it->uses);
        it->gap_ns16 = average16(it->gap_ns16, p->cum_ns - it->last_cum_ns, it->uses);
    }
    it->uses++;
    if (it->uses == 1 || (it->uses == 2 && it->first_write)) {
        it->from = i;
        it->from_cum_bytes = p->cum_bytes;
        it->from_cum_ns = p->cum_ns;
        it->from_uses = it->uses;
        it->first_write = write && it->uses == 1;
    }
    it->last = i;
    it->last_cum_bytes = p->cum_bytes;
    it->last_cum_ns = p->cum_ns;
    it->last_write = write;
    item_push(it, i);
    uint64_t steps = periodic_steps(p, it);
    it->expected = steps ? i + steps : VS_PREDICT_NEVER;
    return 0;
}

void vs_predict_forget(vs_predict_t *p, uint64_t id)
{
    vs_predict_item_t *it = find_item(p, id);
    if (!it)
        return;
    HASH_DEL(p->items, it);
    free(it);
    p->allocations--;
}

/* Rounds a mean gap up to the next step of a geometric grid (ratios of
 * about 1.19): allocations whose frequencies differ by less than the noise
 * of their estimates rank equal, and the caller's tie-break (the most
 * recently used first) then streams newcomers through the room and keeps
 * the incumbents, as a fixed resident set of the most used would, instead
 * of trading places on every fluctuation. */
static uint64_t quantize(uint64_t x)
{
    uint64_t step = 1;
    while (step < x && step < (1ULL << 60))
        step = step + (step + 4) / 5;
    return step;
}

/* The frequency's prediction: memoryless, one mean gap from now, the gap
 * measured from the start of its rhythm to now (the stretch since its last
 * use counts: what the router stopped choosing cools). With one use since
 * that start, the gap before it stands in where longer. */
static void frequency_distance(const vs_predict_t *p, const vs_predict_item_t *it, vs_predict_distance_t *d)
{
    uint64_t span = p->n - it->from, count = it->uses - it->from_uses + 1;
    uint64_t mean = span / count;
    if (count == 1 && it->gap16 / 16 > mean)
        mean = it->gap16 / 16;
    mean = quantize(mean ? mean : 1);
    d->accesses = mean;
    d->bytes = (uint64_t)((double)(p->cum_bytes - it->from_cum_bytes) * (double)mean / (double)span);
    d->ns = (uint64_t)((double)(p->cum_ns - it->from_cum_ns) * (double)mean / (double)span);
    d->write = it->last_write;
    d->periodic = false;
}

static uint64_t blend(uint64_t context, uint64_t frequency, uint64_t weight)
{
    return (uint64_t)(((double)context * (double)weight + (double)frequency * (double)(VS_PREDICT_HIT_ONE - weight)) /
                      VS_PREDICT_HIT_ONE);
}

int vs_predict_next_use(const vs_predict_t *p, uint64_t id, vs_predict_distance_t *d)
{
    const vs_predict_item_t *it = find_item(p, id);
    *d = (vs_predict_distance_t){VS_PREDICT_NEVER, VS_PREDICT_NEVER, VS_PREDICT_NEVER, false, false};
    if (!it)
        return -ENOENT;
    uint64_t steps = periodic_steps(p, it);
    vs_predict_distance_t context = *d;
    if (steps) {
        /* Every access of one operation happens at once: the distance is
         * to the operation's first access. */
        const vs_predict_hist_t *h = at(p, p->j + 1 + (steps - 1) % (p->n - 1 - p->j));
        uint64_t start = steps > h->in_op ? steps - h->in_op : 1;
        context = (vs_predict_distance_t){.accesses = start, .bytes = ahead_sum(p, start - 1, true),
                                          .ns = ahead_sum(p, start, false), .write = h->write,
                                          .periodic = true};
    }
    if (it->uses < 2) {
        *d = context; /* NEVER outside the period: a temporary */
        return 0;
    }
    frequency_distance(p, it, d);
    if (!steps || it->hit_rate < VS_PREDICT_HIT_ONE / 8)
        return 0;
    if (periodic(it)) {
        *d = context;
        return 0;
    }
    /* Mostly missed by the context, not always: the expected distance,
     * each prediction weighted by how often it was right (the context's
     * share growing from none at an eighth of hits to all at half). */
    uint64_t weight = (it->hit_rate - VS_PREDICT_HIT_ONE / 8) * VS_PREDICT_HIT_ONE / (VS_PREDICT_HIT_ONE * 3 / 8);
    d->accesses = blend(context.accesses, d->accesses, weight);
    d->bytes = blend(context.bytes, d->bytes, weight);
    d->ns = blend(context.ns, d->ns, weight);
    d->accesses = d->accesses ? d->accesses : 1;
    return 0;
}

void vs_predict_next(const vs_predict_t *p, vs_predict_access_t *out, size_t k, size_t *n)
{
    *n = 0;
    if (!p->matched)
        return;
    uint64_t period = p->n - 1 - p->j;
    uint64_t ns = 0, ops = 0;
    for (size_t s = 0; s < k; s++) {
        const vs_predict_hist_t *h = at(p, p->j + 1 + s % period);
        const vs_predict_hist_t *before = at(p, p->j + s % period);
        ns += h->cum_ns - before->cum_ns;
        ops += s > 0 && h->in_op == 0;
        out[s] = (vs_predict_access_t){.id = h->id, .bytes = h->bytes, .ns = ns, .ops = ops, .write = h->write};
        (*n)++;
    }
}

void vs_predict_stats(const vs_predict_t *p, vs_predict_stats_t *stats)
{
    *stats = (vs_predict_stats_t){
        .accesses = p->n,
        .bytes = p->cum_bytes,
        .period = p->matched ? p->n - 1 - p->j : 0,
        .context = p->matched ? p->context : 0,
        .hits = p->hits,
        .allocations = p->allocations,
    };
}

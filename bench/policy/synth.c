/*
 * synth.c: generators of the synthetic workloads the replay benchmark runs
 * the policies on. Main entry points: `vs_bench_synth_dit`, `_llm`, `_vae`.
 *
 * Proportions follow the real models (Qwen-Image's 60 transformer blocks of
 * ~650 MiB in bf16, a 7B-class LLM, an SD-style VAE decoder); absolute sizes
 * matter only relative to the limit. Each workload loads its weights first
 * (one write per tensor, as `cuMemcpyHtoD` would), then repeats its main
 * loop, with one-off allocations mixed in: some freed, some leaked.
 */
#include "synth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ULL << 20)

int vs_bench_trace_push(vs_bench_trace_t *t, const vs_trace_event_t *ev)
{
    if (t->len == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        vs_trace_event_t *n = realloc(t->ev, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        t->ev = n;
        t->cap = cap;
    }
    t->ev[t->len++] = *ev;
    return 0;
}

void vs_bench_trace_fini(vs_bench_trace_t *t)
{
    free(t->ev);
    memset(t, 0, sizeof(*t));
}

/* A small deterministic generator: the same traces on every machine. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* `base` varied by up to +-`pct` percent. */
static uint64_t jitter(uint64_t base, unsigned pct)
{
    uint64_t span = base * pct / 100;
    return span ? base - span + rng_next() % (2 * span + 1) : base;
}

typedef struct gen_s {
    vs_bench_trace_t *t;
    uint64_t next_id;
    int rc;
} gen_t;

static void gen_event(gen_t *g, const vs_trace_event_t *ev)
{
    if (g->rc == 0)
        g->rc = vs_bench_trace_push(g->t, ev);
}

static uint64_t gen_alloc(gen_t *g, uint64_t size, bool evictable)
{
    uint64_t id = g->next_id++;
    vs_trace_event_t ev = {.kind = VS_TRACE_ALLOC, .id = id, .size = size, .evictable = evictable};
    gen_event(g, &ev);
    return id;
}

static void gen_free(gen_t *g, uint64_t id)
{
    vs_trace_event_t ev = {.kind = VS_TRACE_FREE, .id = id};
    gen_event(g, &ev);
}

/* One operation: `n` uses, `writes` a bit mask over them. */
static void gen_op(gen_t *g, const char *op, const uint64_t *ids, size_t n, uint64_t writes)
{
    uint64_t seq = ++g->t->seq;
    for (size_t i = 0; i < n; i++) {
        vs_trace_event_t ev = {.kind = VS_TRACE_USE, .seq = seq, .id = ids[i],
                               .time_ns = seq * 1000,
                               .rw = (writes >> i) & 1 ? VS_TRACE_WRITE : VS_TRACE_READ};
        strncpy(ev.op, op, VS_TRACE_OP_MAX);
        gen_event(g, &ev);
    }
}

/* Pass `pass` begins: the measured ones start after `warmup` passes. */
static void gen_pass(gen_t *g, int pass, int warmup)
{
    if (pass == warmup) {
        g->t->warmup = (uint64_t)warmup;
        g->t->measure_from = g->t->seq + 1;
    }
}

static void gen_load(gen_t *g, uint64_t id)
{
    gen_op(g, "cuMemcpyHtoD", &id, 1, 1);
}

int vs_bench_synth_dit(vs_bench_trace_t *t)
{
    enum { BLOCKS = 60, STEPS = 20 };
    gen_t g = {t, 1, 0};
    t->name = "dit";
    t->passes = STEPS;
    uint64_t block[BLOCKS];
    for (int b = 0; b < BLOCKS; b++) {
        block[b] = gen_alloc(&g, jitter(640 * MIB, 3), true);
        gen_load(&g, block[b]);
    }
    uint64_t img_in = gen_alloc(&g, 12 * MIB, true), txt_in = gen_alloc(&g, 14 * MIB, true);
    uint64_t time_emb = gen_alloc(&g, 50 * MIB, true), norm_out = gen_alloc(&g, 40 * MIB, true);
    uint64_t weights[] = {img_in, txt_in, time_emb, norm_out};
    for (size_t i = 0; i < 4; i++)
        gen_load(&g, weights[i]);
    uint64_t workspace = gen_alloc(&g, 32 * MIB, false);
    uint64_t hid[2] = {gen_alloc(&g, 64 * MIB, true), gen_alloc(&g, 64 * MIB, true)};
    uint64_t txt = gen_alloc(&g, 16 * MIB, true), temb = gen_alloc(&g, 1 * MIB, true);
    uint64_t latents = gen_alloc(&g, 32 * MIB, true);
    gen_load(&g, latents);
    for (int step = 0; step < STEPS; step++) {
        /* One-offs: a scheduler temporary living through the step, and a
         * guidance buffer used twice at once and never again (leaked). */
        uint64_t sched_tmp = gen_alloc(&g, 32 * MIB, true);
        gen_op(&g, "scheduler_scale", (uint64_t[]){latents, sched_tmp}, 2, 2);
        gen_op(&g, "time_embed", (uint64_t[]){time_emb, temb, workspace}, 3, 2);
        gen_op(&g, "img_in", (uint64_t[]){img_in, sched_tmp, hid[0]}, 3, 4);
        gen_op(&g, "txt_in", (uint64_t[]){txt_in, txt}, 2, 2);
        for (int b = 0; b < BLOCKS; b++) {
            uint64_t in = hid[b % 2], out = hid[(b + 1) % 2];
            gen_op(&g, "dit_block", (uint64_t[]){block[b], in, out, txt, temb, workspace}, 6,
                   (1u << 2) | (1u << 3));
        }
        uint64_t guide = gen_alloc(&g, 24 * MIB, true);
        gen_op(&g, "norm_out", (uint64_t[]){norm_out, hid[BLOCKS % 2], guide}, 3, 4);
        gen_op(&g, "cfg_combine", (uint64_t[]){guide, sched_tmp}, 2, 2);
        gen_op(&g, "scheduler_step", (uint64_t[]){latents, sched_tmp}, 2, 1);
        gen_free(&g, sched_tmp);
    }
    return g.rc;
}

int vs_bench_synth_llm(vs_bench_trace_t *t)
{
    enum { LAYERS = 32, TOKENS = 128, PROMPT = 64, PAGE_TOKENS = 16, MAX_PAGES = 16 };
    gen_t g = {t, 1, 0};
    t->name = "llm";
    t->passes = TOKENS;
    uint64_t layer[LAYERS], kv[LAYERS][MAX_PAGES];
    size_t pages = 0;
    for (int l = 0; l < LAYERS; l++) {
        layer[l] = gen_alloc(&g, jitter(400 * MIB, 1), true);
        gen_load(&g, layer[l]);
    }
    uint64_t embed = gen_alloc(&g, 500 * MIB, true), lm_head = gen_alloc(&g, 500 * MIB, true);
    gen_load(&g, embed);
    gen_load(&g, lm_head);
    uint64_t act = gen_alloc(&g, 8 * MIB, true), logits = gen_alloc(&g, 2 * MIB, true);
    uint64_t workspace = gen_alloc(&g, 16 * MIB, false);
    /* Prefill writes the prompt's pages. */
    for (; pages < PROMPT / PAGE_TOKENS; pages++)
        for (int l = 0; l < LAYERS; l++)
            kv[l][pages] = gen_alloc(&g, 8 * MIB, true);
    gen_op(&g, "embed", (uint64_t[]){embed, act}, 2, 2);
    for (int l = 0; l < LAYERS; l++) {
        uint64_t ids[3 + MAX_PAGES] = {layer[l], act, workspace};
        for (size_t p = 0; p < pages; p++)
            ids[3 + p] = kv[l][p];
        gen_op(&g, "prefill_layer", ids, 3 + pages, ~0ULL << 3 | 2);
    }
    for (int tok = 0; tok < TOKENS; tok++) {
        size_t used = PROMPT + (size_t)tok;
        if (used % PAGE_TOKENS == 0 && pages < MAX_PAGES) {
            for (int l = 0; l < LAYERS; l++)
                kv[l][pages] = gen_alloc(&g, 8 * MIB, true);
            pages++;
        }
        gen_op(&g, "embed", (uint64_t[]){embed, act}, 2, 2);
        for (int l = 0; l < LAYERS; l++) {
            uint64_t ids[3 + MAX_PAGES] = {layer[l], act, workspace};
            for (size_t p = 0; p < pages; p++)
                ids[3 + p] = kv[l][p];
            /* The token's K and V land in the newest page. */
            gen_op(&g, "decode_layer", ids, 3 + pages, 2ULL | 1ULL << (2 + pages));
        }
        gen_op(&g, "lm_head", (uint64_t[]){lm_head, act, logits}, 3, 4);
        /* One-offs: the sampler's scratch, freed at once; every 32 tokens a
         * stop-criteria buffer that is never touched again (leaked). */
        uint64_t sample = gen_alloc(&g, 1 * MIB, true);
        gen_op(&g, "sample", (uint64_t[]){logits, sample}, 2, 2);
        gen_free(&g, sample);
        if (tok % 32 == 0) {
            uint64_t stop = gen_alloc(&g, 64 * MIB, true);
            gen_op(&g, "stop_check", (uint64_t[]){stop, logits}, 2, 1);
        }
    }
    return g.rc;
}

int vs_bench_synth_vae(vs_bench_trace_t *t)
{
    enum { STAGES = 4, BLOCKS = 6, TILES = 3 };
    static const uint64_t weight_mib[STAGES] = {160, 120, 80, 40};
    static const uint64_t act_mib[STAGES] = {4, 8, 16, 32};
    gen_t g = {t, 1, 0};
    t->name = "vae";
    t->passes = TILES;
    uint64_t conv[STAGES][BLOCKS], act[STAGES][2], up[STAGES];
    for (int s = 0; s < STAGES; s++) {
        for (int b = 0; b < BLOCKS; b++) {
            conv[s][b] = gen_alloc(&g, jitter(weight_mib[s] * MIB, 40), true);
            gen_load(&g, conv[s][b]);
        }
        up[s] = gen_alloc(&g, weight_mib[s] * MIB / 4, true);
        gen_load(&g, up[s]);
    }
    for (int s = 0; s < STAGES; s++) {
        act[s][0] = gen_alloc(&g, act_mib[s] * MIB, true);
        act[s][1] = gen_alloc(&g, act_mib[s] * MIB, true);
    }
    uint64_t latent = gen_alloc(&g, 2 * MIB, true), image = gen_alloc(&g, 24 * MIB, true);
    for (int tile = 0; tile < TILES; tile++) {
        gen_op(&g, "latent_in", (uint64_t[]){latent, act[0][0]}, 2, 3);
        for (int s = 0; s < STAGES; s++) {
            for (int b = 0; b < BLOCKS; b++)
                gen_op(&g, "conv", (uint64_t[]){conv[s][b], act[s][b % 2], act[s][(b + 1) % 2]}, 3,
                       4);
            if (s + 1 < STAGES)
                gen_op(&g, "upsample", (uint64_t[]){up[s], act[s][BLOCKS % 2], act[s + 1][0]}, 3,
                       4);
        }
        /* One-off: the tile's blend mask, used once then freed. */
        uint64_t mask = gen_alloc(&g, 16 * MIB, true);
        gen_op(&g, "blend", (uint64_t[]){up[STAGES - 1], act[STAGES - 1][0], mask, image}, 4, 12);
        gen_free(&g, mask);
    }
    return g.rc;
}

/* ---- The suite's shapes (issue 54) ---------------------------------------
 *
 * Smaller than the models above: what matters is the shape of the reference
 * stream, and the unit tests replay these too. */

/* A training step: forward through the layers, backward in reverse order,
 * then the optimizer; everything it touches is written. */
int vs_bench_synth_train(vs_bench_trace_t *t)
{
    enum { LAYERS = 12, STEPS = 8, WARMUP = 2 };
    gen_t g = {t, 1, 0};
    t->name = "train";
    rng_state = 0x9e3779b97f4a7c15ULL; /* the same trace whatever ran before */
    t->passes = STEPS;
    uint64_t w[LAYERS], grad[LAYERS], m[LAYERS], v[LAYERS], act[LAYERS + 1];
    for (int l = 0; l < LAYERS; l++) {
        w[l] = gen_alloc(&g, jitter(32 * MIB, 20), true);
        gen_load(&g, w[l]);
        grad[l] = gen_alloc(&g, 32 * MIB, true);
        m[l] = gen_alloc(&g, 32 * MIB, true);
        v[l] = gen_alloc(&g, 32 * MIB, true);
    }
    for (int l = 0; l <= LAYERS; l++)
        act[l] = gen_alloc(&g, 12 * MIB, true);
    uint64_t loss = gen_alloc(&g, 1 * MIB, true);
    for (int step = 0; step < STEPS; step++) {
        gen_pass(&g, step, WARMUP);
        gen_op(&g, "batch_in", &act[0], 1, 1);
        for (int l = 0; l < LAYERS; l++)
            gen_op(&g, "forward", (uint64_t[]){w[l], act[l], act[l + 1]}, 3, 4);
        gen_op(&g, "loss", (uint64_t[]){act[LAYERS], loss}, 2, 3);
        for (int l = LAYERS; l-- > 0;)
            gen_op(&g, "backward", (uint64_t[]){w[l], act[l], act[l + 1], grad[l]}, 4, 2 | 8);
        for (int l = 0; l < LAYERS; l++)
            gen_op(&g, "adam", (uint64_t[]){w[l], grad[l], m[l], v[l]}, 4, 1 | 2 | 4 | 8);
    }
    return g.rc;
}

/* A mixture of experts dispatched from the host: per token and layer, the
 * attention, then the two experts a skewed router picks, one operation
 * each. The router's preference (a Zipf-like law over each layer's own
 * order of experts) is what the best fixed resident set exploits. */
int vs_bench_synth_moe(vs_bench_trace_t *t)
{
    enum { LAYERS = 6, EXPERTS = 8, TOKENS = 480, WARMUP = 96 };
    /* Router weights, out of 1000: top-2 draws without replacement. */
    static const unsigned weight[EXPERTS] = {400, 220, 140, 90, 60, 40, 30, 20};
    gen_t g = {t, 1, 0};
    t->name = "moe";
    rng_state = 0x9e3779b97f4a7c15ULL; /* the same trace whatever ran before */
    t->passes = TOKENS;
    uint64_t attn[LAYERS], expert[LAYERS][EXPERTS];
    unsigned perm[LAYERS][EXPERTS];
    for (int l = 0; l < LAYERS; l++) {
        attn[l] = gen_alloc(&g, 16 * MIB, true);
        gen_load(&g, attn[l]);
        for (int e = 0; e < EXPERTS; e++) {
            expert[l][e] = gen_alloc(&g, 24 * MIB, true);
            gen_load(&g, expert[l][e]);
            perm[l][e] = (unsigned)e;
        }
        for (int e = EXPERTS - 1; e > 0; e--) {
            unsigned k = (unsigned)(rng_next() % (uint64_t)(e + 1)), tmp = perm[l][e];
            perm[l][e] = perm[l][k];
            perm[l][k] = tmp;
        }
    }
    uint64_t hidden = gen_alloc(&g, 2 * MIB, true);
    for (int tok = 0; tok < TOKENS; tok++) {
        gen_pass(&g, tok, WARMUP);
        for (int l = 0; l < LAYERS; l++) {
            gen_op(&g, "attention", (uint64_t[]){attn[l], hidden}, 2, 2);
            unsigned first = EXPERTS;
            for (int pick = 0; pick < 2; pick++) {
                unsigned total = 0;
                for (unsigned e = 0; e < EXPERTS; e++)
                    total += e == first ? 0 : weight[e];
                unsigned r = (unsigned)(rng_next() % total), e = 0;
                for (;; e++) {
                    if (e == first)
                        continue;
                    if (r < weight[e])
                        break;
                    r -= weight[e];
                }
                first = pick == 0 ? e : first;
                gen_op(&g, "expert", (uint64_t[]){expert[l][perm[l][e]], hidden}, 2, 2);
            }
        }
    }
    return g.rc;
}

/* A multi-phase pipeline per prompt: a text encoder once, a denoiser for
 * several steps (a loop inside the prompt's loop), a decoder once; a small
 * latent written every step. */
int vs_bench_synth_pipeline(vs_bench_trace_t *t)
{
    enum { PROMPTS = 4, WARMUP = 1, ENCODER = 6, DENOISER = 12, DECODER = 4, STEPS = 8 };
    gen_t g = {t, 1, 0};
    t->name = "pipeline";
    rng_state = 0x9e3779b97f4a7c15ULL; /* the same trace whatever ran before */
    t->passes = PROMPTS;
    uint64_t enc[ENCODER], den[DENOISER], dec[DECODER];
    for (int i = 0; i < ENCODER; i++) {
        enc[i] = gen_alloc(&g, 24 * MIB, true);
        gen_load(&g, enc[i]);
    }
    for (int i = 0; i < DENOISER; i++) {
        den[i] = gen_alloc(&g, jitter(32 * MIB, 10), true);
        gen_load(&g, den[i]);
    }
    for (int i = 0; i < DECODER; i++) {
        dec[i] = gen_alloc(&g, 20 * MIB, true);
        gen_load(&g, dec[i]);
    }
    uint64_t emb = gen_alloc(&g, 4 * MIB, true), latent = gen_alloc(&g, 1 * MIB, true);
    uint64_t hid = gen_alloc(&g, 8 * MIB, true), image = gen_alloc(&g, 12 * MIB, true);
    for (int p = 0; p < PROMPTS; p++) {
        gen_pass(&g, p, WARMUP);
        for (int i = 0; i < ENCODER; i++)
            gen_op(&g, "encoder", (uint64_t[]){enc[i], emb}, 2, 2);
        gen_op(&g, "noise", &latent, 1, 1);
        for (int s = 0; s < STEPS; s++) {
            for (int i = 0; i < DENOISER; i++)
                gen_op(&g, "denoiser", (uint64_t[]){den[i], emb, hid}, 3, 4);
            gen_op(&g, "scheduler_step", (uint64_t[]){hid, latent}, 2, 2);
        }
        for (int i = 0; i < DECODER; i++)
            gen_op(&g, "decoder", (uint64_t[]){dec[i], latent, image}, 3, 4);
    }
    return g.rc;
}

/* An LLM decode whose KV cache grows by new allocations: a page per layer
 * every few tokens, each token reading every page of its layer and writing
 * the newest. */
int vs_bench_synth_decode(vs_bench_trace_t *t)
{
    enum { LAYERS = 12, TOKENS = 64, WARMUP = 8, PAGE_TOKENS = 8, MAX_PAGES = TOKENS / PAGE_TOKENS };
    gen_t g = {t, 1, 0};
    t->name = "decode";
    t->passes = TOKENS;
    uint64_t w[LAYERS], kv[LAYERS][MAX_PAGES];
    for (int l = 0; l < LAYERS; l++) {
        w[l] = gen_alloc(&g, 24 * MIB, true);
        gen_load(&g, w[l]);
    }
    uint64_t head = gen_alloc(&g, 32 * MIB, true), act = gen_alloc(&g, 1 * MIB, true);
    gen_load(&g, head);
    size_t pages = 0;
    for (int tok = 0; tok < TOKENS; tok++) {
        gen_pass(&g, tok, WARMUP);
        if (tok % PAGE_TOKENS == 0) {
            for (int l = 0; l < LAYERS; l++)
                kv[l][pages] = gen_alloc(&g, 4 * MIB, true);
            pages++;
        }
        for (int l = 0; l < LAYERS; l++) {
            uint64_t ids[2 + MAX_PAGES] = {w[l], act};
            for (size_t p = 0; p < pages; p++)
                ids[2 + p] = kv[l][p];
            gen_op(&g, "decode_layer", ids, 2 + pages, 2ULL | 1ULL << (1 + pages));
        }
        gen_op(&g, "lm_head", (uint64_t[]){head, act}, 2, 2);
    }
    return g.rc;
}

/* The plain cycle: allocations of one size read in turn, pass after pass. */
int vs_bench_synth_cycle(vs_bench_trace_t *t)
{
    enum { BLOCKS = 24, PASSES = 10, WARMUP = 2 };
    gen_t g = {t, 1, 0};
    t->name = "cycle";
    t->passes = PASSES;
    uint64_t block[BLOCKS];
    for (int b = 0; b < BLOCKS; b++) {
        block[b] = gen_alloc(&g, 32 * MIB, true);
        gen_load(&g, block[b]);
    }
    uint64_t act = gen_alloc(&g, 4 * MIB, true);
    for (int p = 0; p < PASSES; p++) {
        gen_pass(&g, p, WARMUP);
        for (int b = 0; b < BLOCKS; b++)
            gen_op(&g, "block", (uint64_t[]){block[b], act}, 2, 2);
    }
    return g.rc;
}

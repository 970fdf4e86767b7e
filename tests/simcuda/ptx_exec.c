/* ptx_exec.c: executes a PTX entry as a GPU would, slowly but exactly.
 *
 * Blocks run one after another in index order (CUB's decoupled look-back
 * only waits on predecessors). A block's warps are scheduled cooperatively:
 * each runs until all its live lanes wait at a barrier or have exited, and
 * the barrier opens once every warp got there. Inside a warp the lanes with
 * the lowest program counter execute together (divergent paths run one
 * after the other and reconverge where their counters meet), so warp-wide
 * operations (`shfl.sync`, `vote.sync`, ...) see the lanes that arrived
 * together.
 *
 * Addresses: global, const and generic addresses are host addresses (device
 * memory is host memory in simcuda), so touching evicted or freed memory
 * faults. Shared memory is one buffer per block, local memory one frame per
 * thread; `cvta` turns their window offsets into host addresses and back.
 * An instruction form the interpreter does not implement stops the launch
 * with a message naming it.
 * Entry point: `ptx_execute`.
 */
#include "ptx_ops.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Atomic uint64_t lane_instructions;

uint64_t ptx_lane_instructions(void)
{
    return atomic_load(&lane_instructions);
}

#define MAX_CALL_DEPTH 16

typedef struct warp_s {
    uint64_t *regs;           /* regs_total x 32, register-major */
    uint32_t pc[32];          /* per lane, valid while !uniform */
    bool uniform;             /* every ready lane is at `upc` */
    uint32_t upc;
    uint32_t live;            /* lanes that exist and have not exited */
    uint32_t arrived;         /* lanes waiting at the block barrier */
    uint8_t carry[32];
    uint8_t depth[32];
    uint32_t ret_pc[32][MAX_CALL_DEPTH];
    uint32_t call_pc[32][MAX_CALL_DEPTH];
    unsigned id;
    /* bar.red: destination register and predicate of each arrived lane */
    int red_dst;
    uint32_t red_pred;
    int red_op;
} warp_t;

typedef struct block_s {
    const ptx_launch_t *L;
    const ptx_module_t *m;
    unsigned ctaid[3];
    unsigned nthreads, nwarps;
    unsigned char *shared;
    size_t shared_size;
    unsigned char *local; /* local_total bytes per thread */
    unsigned char *pmem;  /* pframe_total bytes per thread */
    size_t pstride;
    warp_t *warps;
    unsigned regs_total;
    char *err;
    size_t errlen;
    bool failed;
} block_t;

static int fail_insn(block_t *b, const ptx_insn_t *in, const char *what)
{
    if (!b->failed) {
        snprintf(b->err, b->errlen, "PTX line %d: %s '%s' (type %d) in '%s'", in->line, what,
                 ptx_op_names[in->op], in->type, b->m->funcs[in->func].name);
        b->failed = true;
    }
    return -1;
}

#define REG(w, r) ((w)->regs + (size_t)(r) * 32)

static inline unsigned thread_index(const block_t *b, const warp_t *w, int lane)
{
    return w->id * 32 + (unsigned)lane;
}

static inline unsigned char *lane_local(const block_t *b, const warp_t *w, int lane)
{
    return b->local + (size_t)thread_index(b, w, lane) * b->m->local_total;
}

static inline unsigned char *lane_pmem(const block_t *b, const warp_t *w, int lane)
{
    return b->pmem + (size_t)thread_index(b, w, lane) * b->pstride;
}

static uint64_t sreg_value(const block_t *b, const warp_t *w, int lane, unsigned sreg)
{
    unsigned t = thread_index(b, w, lane);
    const unsigned *bd = b->L->block, *gd = b->L->grid;
    switch (sreg) {
    case SR_TID_X: return t % bd[0];
    case SR_TID_Y: return (t / bd[0]) % bd[1];
    case SR_TID_Z: return t / (bd[0] * bd[1]);
    case SR_NTID_X: return bd[0];
    case SR_NTID_Y: return bd[1];
    case SR_NTID_Z: return bd[2];
    case SR_CTAID_X: return b->ctaid[0];
    case SR_CTAID_Y: return b->ctaid[1];
    case SR_CTAID_Z: return b->ctaid[2];
    case SR_NCTAID_X: return gd[0];
    case SR_NCTAID_Y: return gd[1];
    case SR_NCTAID_Z: return gd[2];
    case SR_LANEID: return (uint64_t)lane;
    case SR_WARPID: return w->id;
    case SR_NWARPID: return b->nwarps;
    case SR_SMID: return 0;
    case SR_NSMID: return 132;
    case SR_GRIDID: return 1;
    case SR_LANEMASK_EQ: return 1u << lane;
    case SR_LANEMASK_LE: return (uint32_t)((2ull << lane) - 1);
    case SR_LANEMASK_LT: return (1u << lane) - 1;
    case SR_LANEMASK_GE: return ~((1u << lane) - 1) & 0xffffffffu;
    case SR_LANEMASK_GT: return ~(uint32_t)((2ull << lane) - 1) & 0xffffffffu;
    case SR_CLOCK: case SR_CLOCK64: case SR_GLOBALTIMER: case SR_GLOBALTIMER_LO: {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        return sreg == SR_CLOCK || sreg == SR_GLOBALTIMER_LO ? (uint32_t)ns : ns;
    }
    case SR_DYN_SMEM: return b->L->dyn_shared;
    case SR_TOTAL_SMEM: return b->shared_size;
    case SR_CLUSTERID_X: return b->ctaid[0];
    case SR_CLUSTERID_Y: return b->ctaid[1];
    case SR_CLUSTERID_Z: return b->ctaid[2];
    case SR_NCLUSTERID_X: return gd[0];
    case SR_NCLUSTERID_Y: return gd[1];
    case SR_NCLUSTERID_Z: return gd[2];
    case SR_CLUSTER_NCTAID_X: case SR_CLUSTER_NCTAID_Y: case SR_CLUSTER_NCTAID_Z: case SR_CLUSTER_NCTARANK:
        return 1;
    default: return 0;
    }
}

/* The value a symbol operand stands for: a host address for globals and
 * constants, a window offset for shared, local and parameter symbols. */
static uint64_t sym_value(const block_t *b, const ptx_insn_t *in, int sym)
{
    const ptx_func_t *f = &b->m->funcs[in->func];
    const ptx_sym_t *s = &f->syms[sym];
    if (s->global_index >= 0)
        return b->m->global_addrs[s->global_index];
    switch (s->global_index) {
    case PTX_SYM_MODULE_SHARED:
        return s->is_extern_shared ? b->m->shared_dynamic_base : s->offset;
    case PTX_SYM_BODY_SHARED:
        return ((b->m->shared_module + 15) & ~15ull) + s->offset;
    case PTX_SYM_LOCAL:
        return f->lbase + s->offset;
    case PTX_SYM_ENTRY_PARAM:
        return s->offset;
    default: /* .func and call parameters: offset in the lane's parameter memory */
        return f->pbase + s->offset;
    }
}

static inline uint64_t src(const block_t *b, const warp_t *w, const ptx_insn_t *in, const ptx_opnd_t *o, int lane)
{
    switch (o->kind) {
    case PK_REG: return REG(w, o->reg)[lane];
    case PK_IMM: return o->imm;
    case PK_SREG: return sreg_value(b, w, lane, o->sreg);
    case PK_SYM: return sym_value(b, in, o->sym) + o->imm;
    default: return 0;
    }
}

/* Host address of a memory operand for one lane. */
static unsigned char *address(const block_t *b, const warp_t *w, const ptx_insn_t *in, const ptx_opnd_t *o,
                              int lane)
{
    uint64_t v = o->imm;
    const ptx_sym_t *s = NULL;
    if (o->reg >= 0)
        v += REG(w, o->reg)[lane];
    if (o->sym >= 0) {
        s = &b->m->funcs[in->func].syms[o->sym];
        v += sym_value(b, in, o->sym);
    }
    switch (in->space) {
    case PS_SHARED: return b->shared + v;
    case PS_LOCAL: return lane_local(b, w, lane) + v;
    case PS_PARAM:
        if (s == NULL || s->global_index == PTX_SYM_ENTRY_PARAM)
            return (unsigned char *)b->L->params + v;
        return lane_pmem(b, w, lane) + v;
    default: return (unsigned char *)(uintptr_t)v;
    }
}

static inline void put(warp_t *w, const ptx_opnd_t *o, int lane, uint64_t v)
{
    if (o->kind == PK_REG)
        REG(w, o->reg)[lane] = v;
}

static inline bool pred_of(const block_t *b, const warp_t *w, const ptx_insn_t *in, const ptx_opnd_t *o, int lane)
{
    bool v = (src(b, w, in, o, lane) & 1) != 0;
    return o->neg ? !v : v;
}

static uint64_t load_value(const unsigned char *p, ptx_type_t t)
{
    switch (t) {
    case PT_U8: case PT_B8: return *(const uint8_t *)p;
    case PT_S8: return (uint64_t)(int64_t) * (const int8_t *)p;
    case PT_U16: case PT_B16: case PT_F16: case PT_BF16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case PT_S16: { int16_t v; memcpy(&v, p, 2); return (uint64_t)(int64_t)v; }
    case PT_S32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v; }
    case PT_U32: case PT_B32: case PT_F32: case PT_F16X2: case PT_BF16X2: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

static void store_value(unsigned char *p, ptx_type_t t, uint64_t v)
{
    unsigned bytes = ptx_type_bits(t) / 8;
    memcpy(p, &v, bytes ? bytes : 1);
}

/* ------------------------------------------------------------------------
 * Memory instructions
 * ------------------------------------------------------------------------ */

static int exec_ld_st(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    bool is_st = in->op == PO_st;
    const ptx_opnd_t *addr = is_st ? &in->o[0] : &in->o[1];
    const ptx_opnd_t *val = is_st ? &in->o[1] : &in->o[0];
    if (addr->kind != PK_ADDR)
        return fail_insn(b, in, "memory operand expected by");
    ptx_type_t t = in->type;
    unsigned size = ptx_type_bits(t) / 8;
    if (t == PT_B128)
        return fail_insn(b, in, "128-bit access not supported by");
    unsigned n = val->kind == PK_VEC ? (unsigned)val->vec_count : 1;
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        unsigned char *p = address(b, w, in, addr, lane);
        for (unsigned k = 0; k < n; k++) {
            unsigned char *q = p + k * size;
            if (val->kind == PK_VEC) {
                int r = val->vec[k];
                if (is_st) {
                    store_value(q, t, r >= 0 ? REG(w, r)[lane] : 0);
                } else if (r >= 0) {
                    REG(w, r)[lane] = load_value(q, t);
                }
            } else if (is_st) {
                store_value(q, t, src(b, w, in, val, lane));
            } else {
                put(w, val, lane, load_value(q, t));
            }
        }
    }
    return 0;
}

static uint64_t atomic_apply(const ptx_insn_t *in, unsigned char *p, uint64_t v, uint64_t c, bool *ok)
{
    ptx_type_t t = in->type;
    unsigned bits = ptx_type_bits(t);
    *ok = true;
    if (bits == 32) {
        _Atomic uint32_t *a = (_Atomic uint32_t *)(void *)p;
        uint32_t x = (uint32_t)v;
        switch (in->sub) {
        case PSUB_ADD:
            if (t == PT_F32) {
                uint32_t old = atomic_load(a), nw;
                do {
                    float f, g;
                    memcpy(&f, &old, 4);
                    memcpy(&g, &x, 4);
                    f += g;
                    memcpy(&nw, &f, 4);
                } while (!atomic_compare_exchange_weak(a, &old, nw));
                return old;
            }
            return atomic_fetch_add(a, x);
        case PSUB_AND: return atomic_fetch_and(a, x);
        case PSUB_OR: return atomic_fetch_or(a, x);
        case PSUB_XOR: return atomic_fetch_xor(a, x);
        case PSUB_EXCH: return atomic_exchange(a, x);
        case PSUB_CAS: {
            uint32_t expected = x;
            atomic_compare_exchange_strong(a, &expected, (uint32_t)c);
            return expected;
        }
        case PSUB_MIN: case PSUB_MAX: case PSUB_INC: case PSUB_DEC: {
            uint32_t old = atomic_load(a), nw;
            do {
                if (in->sub == PSUB_INC)
                    nw = old >= x ? 0 : old + 1;
                else if (in->sub == PSUB_DEC)
                    nw = (old == 0 || old > x) ? x : old - 1;
                else if (t == PT_S32)
                    nw = ((int32_t)x < (int32_t)old) == (in->sub == PSUB_MIN) ? x : old;
                else if (t == PT_F32) {
                    float f, g;
                    memcpy(&f, &old, 4);
                    memcpy(&g, &x, 4);
                    nw = (g < f) == (in->sub == PSUB_MIN) ? x : old;
                } else
                    nw = (x < old) == (in->sub == PSUB_MIN) ? x : old;
            } while (!atomic_compare_exchange_weak(a, &old, nw));
            return old;
        }
        default: break;
        }
    } else if (bits == 64) {
        _Atomic uint64_t *a = (_Atomic uint64_t *)(void *)p;
        switch (in->sub) {
        case PSUB_ADD:
            if (t == PT_F64) {
                uint64_t old = atomic_load(a), nw;
                do {
                    double f, g;
                    memcpy(&f, &old, 8);
                    memcpy(&g, &v, 8);
                    f += g;
                    memcpy(&nw, &f, 8);
                } while (!atomic_compare_exchange_weak(a, &old, nw));
                return old;
            }
            return atomic_fetch_add(a, v);
        case PSUB_AND: return atomic_fetch_and(a, v);
        case PSUB_OR: return atomic_fetch_or(a, v);
        case PSUB_XOR: return atomic_fetch_xor(a, v);
        case PSUB_EXCH: return atomic_exchange(a, v);
        case PSUB_CAS: {
            uint64_t expected = v;
            atomic_compare_exchange_strong(a, &expected, c);
            return expected;
        }
        case PSUB_MIN: case PSUB_MAX: {
            uint64_t old = atomic_load(a), nw;
            do {
                if (t == PT_S64)
                    nw = ((int64_t)v < (int64_t)old) == (in->sub == PSUB_MIN) ? v : old;
                else
                    nw = (v < old) == (in->sub == PSUB_MIN) ? v : old;
            } while (!atomic_compare_exchange_weak(a, &old, nw));
            return old;
        }
        default: break;
        }
    }
    *ok = false;
    return 0;
}

static int exec_atom(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    bool red = in->op == PO_red;
    const ptx_opnd_t *addr = &in->o[red ? 0 : 1];
    const ptx_opnd_t *val = &in->o[red ? 1 : 2];
    const ptx_opnd_t *cmpv = in->nopnd > (red ? 2 : 3) ? &in->o[red ? 2 : 3] : NULL;
    if (addr->kind != PK_ADDR)
        return fail_insn(b, in, "memory operand expected by");
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        unsigned char *p = address(b, w, in, addr, lane);
        bool ok;
        uint64_t old = atomic_apply(in, p, src(b, w, in, val, lane), cmpv ? src(b, w, in, cmpv, lane) : 0, &ok);
        if (!ok)
            return fail_insn(b, in, "atomic form not supported");
        if (!red)
            put(w, &in->o[0], lane, old);
    }
    return 0;
}

static int exec_cvta(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    bool to = (in->mods & PM_TO) != 0;
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        uint64_t v = src(b, w, in, &in->o[1], lane);
        uint64_t base;
        switch (in->space) {
        case PS_SHARED: base = (uint64_t)(uintptr_t)b->shared; break;
        case PS_LOCAL: base = (uint64_t)(uintptr_t)lane_local(b, w, lane); break;
        case PS_PARAM: base = (uint64_t)(uintptr_t)b->L->params; break;
        default: base = 0; break;
        }
        put(w, &in->o[0], lane, to ? v - base : v + base);
    }
    return 0;
}

static int exec_isspacep(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        uintptr_t v = (uintptr_t)src(b, w, in, &in->o[1], lane);
        uintptr_t sh = (uintptr_t)b->shared, lo = (uintptr_t)b->local;
        bool in_shared = v >= sh && v < sh + b->shared_size;
        bool in_local = v >= lo && v < lo + (size_t)b->nthreads * b->m->local_total;
        bool r;
        switch (in->space) {
        case PS_SHARED: r = in_shared; break;
        case PS_LOCAL: r = in_local; break;
        case PS_GLOBAL: r = !in_shared && !in_local; break;
        default: r = false; break;
        }
        put(w, &in->o[0], lane, r);
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Warp-wide instructions: `mask` is the set of lanes executing together.
 * ------------------------------------------------------------------------ */

static int exec_shfl(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    int k = (in->mods & PM_ALL) ? 2 : 1; /* d|p */
    uint64_t val[32];
    for (int lane = 0; lane < 32; lane++)
        val[lane] = in->o[k].kind == PK_REG ? REG(w, in->o[k].reg)[lane] : src(b, w, in, &in->o[k], lane);
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        uint32_t bval = (uint32_t)src(b, w, in, &in->o[k + 1], lane) & 0x1f;
        uint32_t c = (uint32_t)src(b, w, in, &in->o[k + 2], lane);
        uint32_t cval = c & 0x1f, segmask = (c >> 8) & 0x1f;
        int max_lane = (int)(((uint32_t)lane & segmask) | (cval & ~segmask));
        int min_lane = (int)((uint32_t)lane & segmask);
        int j;
        bool pval;
        switch (in->sub) {
        case PSUB_UP: j = lane - (int)bval; pval = j >= max_lane; break;
        case PSUB_DOWN: j = lane + (int)bval; pval = j <= max_lane; break;
        case PSUB_BFLY: j = lane ^ (int)bval; pval = j <= max_lane; break;
        case PSUB_IDX: j = min_lane | (int)(bval & ~segmask); pval = j <= max_lane; break;
        default: return fail_insn(b, in, "shfl mode not supported");
        }
        if (!pval || j < 0 || j > 31)
            j = lane;
        put(w, &in->o[0], lane, val[j] & 0xffffffffu);
        if (k == 2)
            put(w, &in->o[1], lane, pval);
    }
    return 0;
}

static int exec_vote(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    uint32_t ballot = 0;
    for (int lane = 0; lane < 32; lane++)
        if ((mask & (1u << lane)) && pred_of(b, w, in, &in->o[1], lane))
            ballot |= 1u << lane;
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        uint64_t r;
        switch (in->sub) {
        case PSUB_VALL: r = ballot == mask; break;
        case PSUB_VANY: r = ballot != 0; break;
        case PSUB_VUNI: r = ballot == 0 || ballot == mask; break;
        case PSUB_VBALLOT: r = ballot; break;
        default: return fail_insn(b, in, "vote mode not supported");
        }
        put(w, &in->o[0], lane, r);
    }
    return 0;
}

static int exec_match(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    int k = (in->mods & PM_ALL) ? 2 : 1;
    unsigned bits = ptx_type_bits(in->type);
    uint64_t m = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    uint64_t v[32];
    for (int lane = 0; lane < 32; lane++)
        if (mask & (1u << lane))
            v[lane] = src(b, w, in, &in->o[k], lane) & m;
    bool all = in->sub == PSUB_VALL;
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        uint32_t same = 0;
        for (int o = 0; o < 32; o++)
            if ((mask & (1u << o)) && v[o] == v[lane])
                same |= 1u << o;
        if (all) {
            put(w, &in->o[0], lane, same == mask ? mask : 0);
            if (k == 2)
                put(w, &in->o[1], lane, same == mask);
        } else {
            put(w, &in->o[0], lane, same);
        }
    }
    return 0;
}

static int exec_redux(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    bool sgn = in->type == PT_S32;
    uint64_t acc = 0;
    bool first = true;
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        uint32_t x = (uint32_t)src(b, w, in, &in->o[1], lane);
        if (first) {
            acc = x;
            first = false;
            continue;
        }
        switch (in->sub) {
        case PSUB_ADD: acc = (uint32_t)(acc + x); break;
        case PSUB_AND: acc &= x; break;
        case PSUB_OR: acc |= x; break;
        case PSUB_XOR: acc ^= x; break;
        case PSUB_MIN: acc = sgn ? ((int32_t)x < (int32_t)acc ? x : acc) : (x < acc ? x : acc); break;
        case PSUB_MAX: acc = sgn ? ((int32_t)x > (int32_t)acc ? x : acc) : (x > acc ? x : acc); break;
        default: return fail_insn(b, in, "redux operation not supported");
        }
    }
    for (int lane = 0; lane < 32; lane++)
        if (mask & (1u << lane))
            put(w, &in->o[0], lane, acc);
    return 0;
}

/* ------------------------------------------------------------------------
 * Everything else that works lane by lane
 * ------------------------------------------------------------------------ */

static int exec_mov(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    const ptx_opnd_t *d = &in->o[0], *a = &in->o[1];
    unsigned bits = ptx_type_bits(in->type);
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        if (d->kind == PK_VEC) { /* unpack */
            uint64_t v = src(b, w, in, a, lane);
            unsigned part = bits / (unsigned)d->vec_count;
            for (int k = 0; k < d->vec_count; k++)
                if (d->vec[k] >= 0)
                    REG(w, d->vec[k])[lane] = (v >> (part * (unsigned)k)) & ((part >= 64) ? ~0ull : (1ull << part) - 1);
        } else if (a->kind == PK_VEC) { /* pack */
            unsigned part = bits / (unsigned)a->vec_count;
            uint64_t v = 0;
            for (int k = 0; k < a->vec_count; k++)
                if (a->vec[k] >= 0)
                    v |= (REG(w, a->vec[k])[lane] & ((part >= 64) ? ~0ull : (1ull << part) - 1)) << (part * (unsigned)k);
            put(w, d, lane, v);
        } else {
            uint64_t v = src(b, w, in, a, lane);
            if (in->type == PT_PRED)
                v &= 1;
            put(w, d, lane, v);
        }
    }
    return 0;
}

static int exec_setp(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    bool two = (in->mods & PM_ALL) != 0;
    int k = two ? 2 : 1;
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        bool r = ptx_compare(in->cmp, in->type, src(b, w, in, &in->o[k], lane), src(b, w, in, &in->o[k + 1], lane));
        bool q = !r;
        if (in->boolop != PSUB_NONE) {
            bool c = pred_of(b, w, in, &in->o[k + 2], lane);
            switch (in->boolop) {
            case PSUB_AND: r = r && c; q = q && c; break;
            case PSUB_OR: r = r || c; q = q || c; break;
            default: r = r != c; q = q != c; break;
            }
        }
        if (in->op == PO_set) {
            uint64_t t = in->type2; /* set.cmp.dtype.stype: type is dtype */
            (void)t;
            bool fl = in->type == PT_F32;
            r = ptx_compare(in->cmp, (ptx_type_t)in->type2, src(b, w, in, &in->o[1], lane), src(b, w, in, &in->o[2], lane));
            put(w, &in->o[0], lane, r ? (fl ? 0x3f800000u : 0xffffffffu) : 0);
            continue;
        }
        put(w, &in->o[0], lane, r);
        if (two)
            put(w, &in->o[1], lane, q);
    }
    return 0;
}

static int exec_alu(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    const ptx_opnd_t *d = &in->o[0];
    int n = in->nopnd;
    unsigned bits = ptx_type_bits(in->type);
    bool keep_width = in->op == PO_cvt || (in->mods & PM_WIDE) || in->type == PT_F64 ||
                      (in->op == PO_mul && (in->mods & PM_HI)) || bits >= 64;
    uint64_t m = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        uint64_t a = n > 1 ? src(b, w, in, &in->o[1], lane) : 0;
        uint64_t bb = n > 2 ? src(b, w, in, &in->o[2], lane) : 0;
        uint64_t c = n > 3 ? src(b, w, in, &in->o[3], lane) : 0;
        uint64_t r;
        if (ptx_alu(in, a, bb, c, &r, &w->carry[lane]) != 0)
            return fail_insn(b, in, "instruction form not supported:");
        if (!keep_width)
            r &= m;
        put(w, d, lane, r);
    }
    return 0;
}

static int exec_misc(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        uint64_t a = in->nopnd > 1 ? src(b, w, in, &in->o[1], lane) : 0;
        uint64_t bb = in->nopnd > 2 ? src(b, w, in, &in->o[2], lane) : 0;
        uint64_t c = in->nopnd > 3 ? src(b, w, in, &in->o[3], lane) : 0;
        uint64_t r;
        switch (in->op) {
        case PO_selp:
            r = pred_of(b, w, in, &in->o[3], lane) ? a : bb;
            break;
        case PO_slct:
            if (in->type2 == PT_F32) {
                float f;
                uint32_t x = (uint32_t)c;
                memcpy(&f, &x, 4);
                r = f >= 0.0f ? a : bb;
            } else {
                r = (int32_t)c >= 0 ? a : bb;
            }
            break;
        case PO_lop3: {
            uint32_t lut = (uint32_t)src(b, w, in, &in->o[4], lane), x = (uint32_t)a, y = (uint32_t)bb,
                     z = (uint32_t)c, out = 0;
            for (int bit = 0; bit < 32; bit++) {
                unsigned idx = (((x >> bit) & 1) << 2) | (((y >> bit) & 1) << 1) | ((z >> bit) & 1);
                out |= ((lut >> idx) & 1u) << bit;
            }
            r = out;
            break;
        }
        case PO_bfi: {
            unsigned bits = ptx_type_bits(in->type);
            unsigned pos = (unsigned)c & 0xff, len = (unsigned)src(b, w, in, &in->o[4], lane) & 0xff;
            uint64_t res = bb;
            for (unsigned i = 0; i < len && pos + i < bits; i++) {
                uint64_t bit = 1ull << (pos + i);
                res = (res & ~bit) | (((a >> i) & 1) << (pos + i));
            }
            r = bits >= 64 ? res : res & ((1ull << bits) - 1);
            break;
        }
        case PO_testp: {
            double v;
            if (in->type == PT_F32) {
                float f;
                uint32_t x = (uint32_t)a;
                memcpy(&f, &x, 4);
                v = f;
            } else {
                memcpy(&v, &a, 8);
            }
            switch (in->cmp) {
            case 1: r = isfinite(v); break;
            case 2: r = isinf(v); break;
            case 3: r = !isnan(v); break;
            case 4: r = isnan(v); break;
            case 5: r = in->type == PT_F32 ? isnormal((float)v) : isnormal(v); break;
            default: r = in->type == PT_F32 ? fpclassify((float)v) == FP_SUBNORMAL : fpclassify(v) == FP_SUBNORMAL; break;
            }
            break;
        }
        case PO_activemask:
            r = mask;
            break;
        case PO_createpolicy:
            r = 0;
            break;
        default:
            return fail_insn(b, in, "instruction not supported:");
        }
        put(w, &in->o[0], lane, r);
    }
    return 0;
}

/* cvt.rn.f16x2.f32 d, a, b and friends: two sources packed, a in the upper half. */
static int exec_cvt_pack(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        uint64_t hi = src(b, w, in, &in->o[1], lane), lo = src(b, w, in, &in->o[2], lane);
        float fh, fl;
        uint32_t x = (uint32_t)hi, y = (uint32_t)lo;
        memcpy(&fh, &x, 4);
        memcpy(&fl, &y, 4);
        uint32_t r;
        if (in->type == PT_F16X2)
            r = ptx_float_to_half(fl, in->round) | ((uint32_t)ptx_float_to_half(fh, in->round) << 16);
        else
            r = ptx_float_to_bf16(fl, in->round) | ((uint32_t)ptx_float_to_bf16(fh, in->round) << 16);
        put(w, &in->o[0], lane, r);
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Control flow and scheduling
 * ------------------------------------------------------------------------ */

enum { RUN_BARRIER = 1, RUN_DONE = 2 };

static void do_call(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t pc, uint32_t mask)
{
    /* call{.uni} [(ret),] func, [(args)] */
    const ptx_opnd_t *fn = NULL, *args = NULL;
    for (int k = 0; k < in->nopnd; k++) {
        if (in->o[k].kind == PK_FUNC)
            fn = &in->o[k];
        else if (in->o[k].kind == PK_LIST && fn != NULL)
            args = &in->o[k];
    }
    const ptx_func_t *caller = &b->m->funcs[in->func];
    const ptx_func_t *callee = &b->m->funcs[fn->reg];
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        unsigned char *pm = lane_pmem(b, w, lane);
        for (int a = 0; args != NULL && a < args->vec_count && (unsigned)a < callee->nparams; a++) {
            const ptx_sym_t *s = &caller->syms[args->vec[a]];
            memcpy(pm + callee->pbase + callee->params[a].offset, pm + caller->pbase + s->offset,
                   callee->params[a].size);
        }
        w->ret_pc[lane][w->depth[lane]] = pc + 1;
        w->call_pc[lane][w->depth[lane]] = pc;
        w->depth[lane]++;
        w->pc[lane] = (uint32_t)fn->imm;
    }
}

static void do_ret(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    const ptx_func_t *callee = &b->m->funcs[in->func];
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        if (w->depth[lane] == 0) {
            w->live &= ~(1u << lane);
            continue;
        }
        int dpt = --w->depth[lane];
        const ptx_insn_t *call = &b->m->code[w->call_pc[lane][dpt]];
        const ptx_func_t *caller = &b->m->funcs[call->func];
        unsigned char *pm = lane_pmem(b, w, lane);
        if (call->o[0].kind == PK_LIST && call->o[0].vec_count > 0 && callee->nret) {
            const ptx_sym_t *rs = &caller->syms[call->o[0].vec[0]];
            memcpy(pm + caller->pbase + rs->offset, pm + callee->pbase + ((callee->params_size + 7) & ~7ull),
                   callee->ret_size < rs->size ? callee->ret_size : rs->size);
        }
        w->pc[lane] = w->ret_pc[lane][dpt];
    }
}

static int check_calls(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    for (int lane = 0; lane < 32; lane++)
        if ((mask & (1u << lane)) && w->depth[lane] >= MAX_CALL_DEPTH)
            return fail_insn(b, in, "calls nested too deeply at");
    for (int k = 0; k < in->nopnd; k++)
        if (in->o[k].kind == PK_FUNC)
            return 0;
    return fail_insn(b, in, "indirect call not supported:");
}

/* ------------------------------------------------------------------------
 * Fast paths for the most frequent forms: whole-warp loops without
 * per-lane dispatch. Returns -1 when the form is not one of them (the
 * general path then runs it).
 * ------------------------------------------------------------------------ */

static inline const uint64_t *operand_row(const warp_t *w, const ptx_opnd_t *o, uint64_t *tmp)
{
    if (o->kind == PK_REG)
        return REG(w, o->reg);
    if (o->kind == PK_IMM) {
        for (int l = 0; l < 32; l++)
            tmp[l] = o->imm;
        return tmp;
    }
    return NULL;
}

#define LANES(expr)                                                                                        \
    do {                                                                                                   \
        if (mask == 0xffffffffu) {                                                                         \
            for (int l = 0; l < 32; l++) {                                                                 \
                uint64_t x = A[l], y = B[l], z = C[l];                                                     \
                (void)y, (void)z;                                                                          \
                D[l] = (expr) & m;                                                                         \
            }                                                                                              \
        } else {                                                                                           \
            for (int l = 0; l < 32; l++) {                                                                 \
                if (!(mask & (1u << l)))                                                                   \
                    continue;                                                                              \
                uint64_t x = A[l], y = B[l], z = C[l];                                                     \
                (void)y, (void)z;                                                                          \
                D[l] = (expr) & m;                                                                         \
            }                                                                                              \
        }                                                                                                  \
    } while (0)

static int fast_op(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    unsigned bits;
    switch (in->type) {
    case PT_U32: case PT_S32: case PT_B32: bits = 32; break;
    case PT_U64: case PT_S64: case PT_B64: bits = 64; break;
    case PT_PRED: bits = 1; break;
    default: return -1;
    }
    uint64_t m = bits == 64 ? ~0ull : bits == 32 ? 0xffffffffull : 1;
    uint64_t ta[32], tb[32], tc[32];
    const ptx_opnd_t *o = in->o;
    if (in->op == PO_ld || in->op == PO_st) {
        bool st = in->op == PO_st;
        const ptx_opnd_t *ad = st ? &o[0] : &o[1], *v = st ? &o[1] : &o[0];
        if ((in->space != PS_GLOBAL && in->space != PS_GENERIC) || ad->reg < 0 || ad->sym >= 0 ||
            v->kind != PK_REG || bits == 1)
            return -1;
        const uint64_t *base = REG(w, ad->reg);
        uint64_t *val = REG(w, v->reg);
        uint64_t off = ad->imm;
        bool sgn = in->type == PT_S32;
        for (int l = 0; l < 32; l++) {
            if (!(mask & (1u << l)))
                continue;
            unsigned char *p = (unsigned char *)(uintptr_t)(base[l] + off);
            if (bits == 32) {
                uint32_t x;
                if (st) {
                    x = (uint32_t)val[l];
                    memcpy(p, &x, 4);
                } else {
                    memcpy(&x, p, 4);
                    val[l] = sgn ? (uint64_t)(int64_t)(int32_t)x : x;
                }
            } else if (st) {
                memcpy(p, &val[l], 8);
            } else {
                memcpy(&val[l], p, 8);
            }
        }
        return 0;
    }
    if (in->nopnd < 2 || o[0].kind != PK_REG)
        return -1;
    uint64_t *D = REG(w, o[0].reg);
    const uint64_t *A = operand_row(w, &o[1], ta);
    const uint64_t *B = in->nopnd > 2 ? operand_row(w, &o[2], tb) : ta;
    const uint64_t *C = in->nopnd > 3 ? operand_row(w, &o[3], tc) : ta;
    if (A == NULL || B == NULL || C == NULL)
        return -1;
    bool sgn = in->type == PT_S32 || in->type == PT_S64;
    switch (in->op) {
    case PO_mov:
        if (in->nopnd != 2 || o[1].kind == PK_VEC || bits == 1)
            return -1;
        LANES(x);
        return 0;
    case PO_add:
        if (in->mods & (PM_CC | PM_SAT))
            return -1;
        LANES(x + y);
        return 0;
    case PO_sub:
        if (in->mods & (PM_CC | PM_SAT))
            return -1;
        LANES(x - y);
        return 0;
    case PO_mul:
        if (in->mods & (PM_HI | PM_WIDE))
            return -1;
        LANES(x * y);
        return 0;
    case PO_mad:
        if (in->mods & (PM_HI | PM_WIDE | PM_CC | PM_SAT))
            return -1;
        LANES(x * y + z);
        return 0;
    case PO_and: LANES(x & y); return 0;
    case PO_or: LANES(x | y); return 0;
    case PO_xor: LANES(x ^ y); return 0;
    case PO_not: LANES(~x); return 0;
    case PO_shl: LANES((y & 0xffffffffu) >= bits ? 0 : x << (y & 0xffffffffu)); return 0;
    case PO_shr:
        if (sgn)
            return -1;
        LANES((y & 0xffffffffu) >= bits ? 0 : (x & m) >> (y & 0xffffffffu));
        return 0;
    case PO_selp: {
        if (o[3].kind != PK_REG || o[3].neg || bits == 1)
            return -1;
        LANES((z & 1) ? x : y);
        return 0;
    }
    case PO_setp: {
        if (in->boolop != PSUB_NONE || (in->mods & PM_ALL) || bits == 1)
            return -1;
        m = 1;
        uint64_t mm = bits == 64 ? ~0ull : 0xffffffffull;
        int64_t sh = 64 - (int)bits;
        switch (in->cmp) {
        case PC_EQ: LANES((x & mm) == (y & mm)); return 0;
        case PC_NE: LANES((x & mm) != (y & mm)); return 0;
        case PC_LT: if (sgn) LANES((int64_t)(x << sh) < (int64_t)(y << sh)); else LANES((x & mm) < (y & mm)); return 0;
        case PC_LE: if (sgn) LANES((int64_t)(x << sh) <= (int64_t)(y << sh)); else LANES((x & mm) <= (y & mm)); return 0;
        case PC_GT: if (sgn) LANES((int64_t)(x << sh) > (int64_t)(y << sh)); else LANES((x & mm) > (y & mm)); return 0;
        case PC_GE: if (sgn) LANES((int64_t)(x << sh) >= (int64_t)(y << sh)); else LANES((x & mm) >= (y & mm)); return 0;
        case PC_LO: LANES((x & mm) < (y & mm)); return 0;
        case PC_LS: LANES((x & mm) <= (y & mm)); return 0;
        case PC_HI: LANES((x & mm) > (y & mm)); return 0;
        case PC_HS: LANES((x & mm) >= (y & mm)); return 0;
        default: return -1;
        }
    }
    default:
        return -1;
    }
}

static int run_warp(block_t *b, warp_t *w)
{
    const ptx_insn_t *code = b->m->code;
    uint64_t executed = 0;
    for (;;) {
        uint32_t ready = w->live & ~w->arrived;
        if (ready == 0) {
            atomic_fetch_add(&lane_instructions, executed);
            return w->live ? RUN_BARRIER : RUN_DONE;
        }
        uint32_t pc = UINT32_MAX, mask = 0;
        if (w->uniform) {
            pc = w->upc;
            mask = ready;
        } else {
            for (int lane = 0; lane < 32; lane++) {
                if (!(ready & (1u << lane)))
                    continue;
                if (w->pc[lane] < pc) {
                    pc = w->pc[lane];
                    mask = 1u << lane;
                } else if (w->pc[lane] == pc) {
                    mask |= 1u << lane;
                }
            }
            if (mask == ready) {
                w->uniform = true;
                w->upc = pc;
            }
        }
        const ptx_insn_t *in = &code[pc];
        uint32_t exec = mask;
        if (in->guard >= 0) {
            const uint64_t *g = REG(w, in->guard);
            exec = 0;
            for (int lane = 0; lane < 32; lane++)
                if ((mask & (1u << lane)) && (((g[lane] & 1) != 0) != in->guard_neg))
                    exec |= 1u << lane;
        }
        /* Control flow other than a branch taken or not by all works lane
         * by lane. */
        if (w->uniform && (in->op == PO_ret || in->op == PO_call || in->op == PO_bar || in->op == PO_barrier ||
                           (in->op == PO_bra && exec != 0 && exec != mask))) {
            for (int lane = 0; lane < 32; lane++)
                if (ready & (1u << lane))
                    w->pc[lane] = pc;
            w->uniform = false;
        }
        if (w->uniform) {
            executed += (uint64_t)__builtin_popcount(exec);
            if (in->op == PO_bra) {
                w->upc = exec ? (uint32_t)in->o[0].imm : pc + 1;
                continue;
            }
            if (in->op == PO_exit) {
                w->live &= ~exec;
                w->upc = pc + 1;
                continue;
            }
            if (fast_op(b, w, in, exec) == 0) {
                w->upc = pc + 1;
                continue;
            }
            executed -= (uint64_t)__builtin_popcount(exec);
        }
        executed += (uint64_t)__builtin_popcount(exec);
        int rc = 0;
        bool advance = true;
        switch (in->op) {
        case PO_bra:
            for (int lane = 0; lane < 32; lane++)
                if (mask & (1u << lane))
                    w->pc[lane] = (exec & (1u << lane)) ? (uint32_t)in->o[0].imm : pc + 1;
            advance = false;
            break;
        case PO_exit:
            w->live &= ~exec;
            break;
        case PO_ret:
            for (int lane = 0; lane < 32; lane++)
                if (mask & (1u << lane))
                    w->pc[lane] = pc + 1;
            do_ret(b, w, in, exec);
            advance = false;
            break;
        case PO_call:
            if ((rc = check_calls(b, w, in, exec)) != 0)
                break;
            for (int lane = 0; lane < 32; lane++)
                if (mask & (1u << lane))
                    w->pc[lane] = pc + 1;
            do_call(b, w, in, pc, exec);
            advance = false;
            break;
        case PO_bar: case PO_barrier:
            if (in->mods & PM_WRAP) /* bar.warp.sync */
                break;
            if (in->nopnd > 1 && in->o[1].kind == PK_IMM && in->o[1].imm != b->nthreads && !(in->mods & PM_RED)) {
                rc = fail_insn(b, in, "barrier with a thread count not supported:");
                break;
            }
            if (in->mods & PM_ARRIVE) {
                rc = fail_insn(b, in, "barrier arrive not supported:");
                break;
            }
            if (in->mods & PM_RED) {
                /* bar.red.op.pred/u32 d, 0, {!}p  */
                const ptx_opnd_t *p = &in->o[in->nopnd - 1];
                w->red_dst = in->o[0].reg;
                w->red_op = in->sub;
                for (int lane = 0; lane < 32; lane++)
                    if ((exec & (1u << lane)) && pred_of(b, w, in, p, lane))
                        w->red_pred |= 1u << lane;
            }
            w->arrived |= exec;
            break;
        case PO_ld: case PO_ldu: case PO_st:
            rc = exec_ld_st(b, w, in, exec);
            break;
        case PO_atom: case PO_red:
            rc = exec_atom(b, w, in, exec);
            break;
        case PO_cvta:
            rc = exec_cvta(b, w, in, exec);
            break;
        case PO_isspacep:
            rc = exec_isspacep(b, w, in, exec);
            break;
        case PO_mov:
            rc = exec_mov(b, w, in, exec);
            break;
        case PO_setp: case PO_set:
            rc = exec_setp(b, w, in, exec);
            break;
        case PO_shfl:
            rc = exec_shfl(b, w, in, exec);
            break;
        case PO_vote:
            rc = exec_vote(b, w, in, exec);
            break;
        case PO_match:
            rc = exec_match(b, w, in, exec);
            break;
        case PO_redux:
            rc = exec_redux(b, w, in, exec);
            break;
        case PO_elect: {
            uint32_t first = exec & (~exec + 1);
            for (int lane = 0; lane < 32; lane++)
                if (exec & (1u << lane)) {
                    put(w, &in->o[0], lane, (uint64_t)__builtin_ctz(first));
                    if (in->nopnd > 2)
                        put(w, &in->o[1], lane, (first >> lane) & 1);
                }
            break;
        }
        case PO_membar: case PO_fence:
            atomic_thread_fence(memory_order_seq_cst);
            break;
        case PO_nanosleep: case PO_prefetch: case PO_prefetchu: case PO_applypriority: case PO_discard:
        case PO_pmevent: case PO_griddepcontrol:
            break;
        case PO_trap: case PO_brkpt:
            rc = fail_insn(b, in, "kernel executed");
            break;
        case PO_selp: case PO_slct: case PO_lop3: case PO_bfi: case PO_testp: case PO_activemask:
        case PO_createpolicy:
            rc = exec_misc(b, w, in, exec);
            break;
        case PO_cvt:
            if ((in->type == PT_F16X2 || in->type == PT_BF16X2) && in->nopnd == 3)
                rc = exec_cvt_pack(b, w, in, exec);
            else
                rc = exec_alu(b, w, in, exec);
            break;
        case PO_fns: case PO_stacksave: case PO_stackrestore: case PO_getctarank: case PO_mapa:
        case PO_dp2a:
            rc = fail_insn(b, in, "instruction not supported:");
            break;
        default:
            rc = exec_alu(b, w, in, exec);
            break;
        }
        if (rc != 0) {
            atomic_fetch_add(&lane_instructions, executed);
            return -1;
        }
        if (advance) {
            if (w->uniform)
                w->upc = pc + 1;
            else
                for (int lane = 0; lane < 32; lane++)
                    if (mask & (1u << lane))
                        w->pc[lane] = pc + 1;
        }
    }
}

/* Opens the barrier: delivers bar.red results, lets every warp go on. */
static void release_barrier(block_t *b)
{
    uint32_t count = 0, any = 0, all = 1;
    bool red = false;
    for (unsigned i = 0; i < b->nwarps; i++) {
        warp_t *w = &b->warps[i];
        if (w->red_dst >= 0) {
            red = true;
            count += (uint32_t)__builtin_popcount(w->red_pred);
            any |= w->red_pred != 0;
            if ((w->red_pred & w->live) != w->live)
                all = 0;
        }
    }
    for (unsigned i = 0; i < b->nwarps; i++) {
        warp_t *w = &b->warps[i];
        if (red && w->red_dst >= 0) {
            uint64_t v = w->red_op == PSUB_ADD ? count : w->red_op == PSUB_AND ? all : any;
            for (int lane = 0; lane < 32; lane++)
                if (w->live & (1u << lane))
                    REG(w, w->red_dst)[lane] = v;
        }
        w->red_dst = -1;
        w->red_pred = 0;
        w->arrived = 0;
    }
}

static int run_block(block_t *b, uint32_t entry_pc)
{
    for (unsigned i = 0; i < b->nwarps; i++) {
        warp_t *w = &b->warps[i];
        unsigned first = i * 32, lanes = b->nthreads - first < 32 ? b->nthreads - first : 32;
        w->id = i;
        w->live = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
        w->arrived = 0;
        w->red_dst = -1;
        w->red_pred = 0;
        w->uniform = true;
        w->upc = entry_pc;
        for (int lane = 0; lane < 32; lane++) {
            w->pc[lane] = entry_pc;
            w->depth[lane] = 0;
            w->carry[lane] = 0;
        }
    }
    for (;;) {
        bool all_done = true;
        for (unsigned i = 0; i < b->nwarps; i++) {
            warp_t *w = &b->warps[i];
            if (w->live == 0 || (w->arrived == w->live))
                continue;
            int rc = run_warp(b, w);
            if (rc < 0)
                return -1;
        }
        for (unsigned i = 0; i < b->nwarps; i++)
            if (b->warps[i].live != 0)
                all_done = false;
        if (all_done)
            return 0;
        release_barrier(b);
    }
}

static _Thread_local struct {
    void *ptr;
    size_t size;
} scratch_buffers[5];

static void *scratch(int which, size_t size)
{
    if (size == 0)
        size = 1;
    if (scratch_buffers[which].size < size) {
        free(scratch_buffers[which].ptr);
        scratch_buffers[which].ptr = malloc(size);
        scratch_buffers[which].size = scratch_buffers[which].ptr != NULL ? size : 0;
    }
    return scratch_buffers[which].ptr;
}

int ptx_execute(const ptx_launch_t *L, char *err, size_t errlen)
{
    const ptx_module_t *m = L->module;
    const ptx_func_t *f = L->func;
    block_t b;
    memset(&b, 0, sizeof(b));
    b.L = L;
    b.m = m;
    b.err = err;
    b.errlen = errlen;
    b.nthreads = L->block[0] * L->block[1] * L->block[2];
    b.nwarps = (b.nthreads + 31) / 32;
    b.regs_total = f->regs_total ? f->regs_total : 1;
    b.shared_size = m->shared_dynamic_base + L->dyn_shared;
    b.pstride = (f->pframe_total + 15) & ~15ull;
    /* Per-thread scratch, reused by every launch on this worker: a GPU
     * leaves registers, shared and local memory uninitialised too. */
    b.shared = scratch(0, b.shared_size);
    b.local = scratch(1, (size_t)b.nwarps * 32 * (m->local_total ? m->local_total : 1));
    b.pmem = scratch(2, (size_t)b.nwarps * 32 * (b.pstride ? b.pstride : 1));
    b.warps = scratch(3, b.nwarps * sizeof(warp_t));
    uint64_t *regs = scratch(4, (size_t)b.nwarps * b.regs_total * 32 * sizeof(uint64_t));
    int rc = 0;
    if (b.shared == NULL || b.local == NULL || b.pmem == NULL || b.warps == NULL || regs == NULL) {
        snprintf(err, errlen, "out of host memory for a block of %u threads", b.nthreads);
        rc = -1;
        goto out;
    }
    for (unsigned i = 0; i < b.nwarps; i++)
        b.warps[i].regs = regs + (size_t)i * b.regs_total * 32;
    uint32_t entry_pc = (uint32_t)m->func_start[f - m->funcs];
    for (unsigned z = 0; z < L->grid[2] && rc == 0; z++)
        for (unsigned y = 0; y < L->grid[1] && rc == 0; y++)
            for (unsigned x = 0; x < L->grid[0] && rc == 0; x++) {
                b.ctaid[0] = x;
                b.ctaid[1] = y;
                b.ctaid[2] = z;
                rc = run_block(&b, entry_pc);
            }
out:
    return rc;
}

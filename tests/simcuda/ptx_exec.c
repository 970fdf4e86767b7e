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
#include "ptx_exec.h"
#include "sim_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Atomic uint64_t lane_instructions;

/* SIMCUDA_PTX_PROFILE=1: warp-instructions per opcode and path (fast,
 * general), printed at exit, to see what the fast paths miss. */
static _Atomic int profile_enabled = -1;
static _Atomic uint64_t profile_counts[PO_COUNT][2];

static void profile_print(void)
{
    for (int op = 0; op < PO_COUNT; op++)
        if (profile_counts[op][0] || profile_counts[op][1])
            fprintf(stderr, "simcuda: ptx %-12s fast %12llu general %12llu\n", ptx_op_names[op],
                    (unsigned long long)profile_counts[op][0], (unsigned long long)profile_counts[op][1]);
}

static bool profiling(void)
{
    if (profile_enabled < 0) {
        const char *v = getenv("SIMCUDA_PTX_PROFILE");
        profile_enabled = v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
        if (profile_enabled)
            atexit(profile_print);
    }
    return profile_enabled;
}

uint64_t ptx_lane_instructions(void)
{
    return atomic_load(&lane_instructions);
}

int ptx_fail_insn(block_t *b, const ptx_insn_t *in, const char *what)
{
    if (!b->failed) {
        snprintf(b->err, b->errlen, "PTX line %d: %s '%s' (type %d) in '%s'", in->line, what,
                 ptx_op_names[in->op], in->type, b->m->funcs[in->func].name);
        b->failed = true;
    }
    return -1;
}

uint64_t ptx_sreg_value(const block_t *b, const warp_t *w, int lane, unsigned sreg)
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

uint64_t ptx_sym_value(const block_t *b, const ptx_insn_t *in, int sym)
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

unsigned char *ptx_address(const block_t *b, const warp_t *w, const ptx_insn_t *in, const ptx_opnd_t *o,
                              int lane)
{
    uint64_t v = o->imm;
    const ptx_sym_t *s = NULL;
    if (o->reg >= 0)
        v += REG(w, o->reg)[lane];
    if (o->sym >= 0) {
        s = &b->m->funcs[in->func].syms[o->sym];
        v += ptx_sym_value(b, in, o->sym);
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

uint64_t ptx_load_value(const unsigned char *p, ptx_type_t t)
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

void ptx_store_value(unsigned char *p, ptx_type_t t, uint64_t v)
{
    unsigned bytes = ptx_type_bits(t) / 8;
    memcpy(p, &v, bytes ? bytes : 1);
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
            return ptx_fail_insn(b, in, "calls nested too deeply at");
    for (int k = 0; k < in->nopnd; k++)
        if (in->o[k].kind == PK_FUNC)
            return 0;
    return ptx_fail_insn(b, in, "indirect call not supported:");
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
            sim_kernel_touch(p, bits / 8, st);
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
                if (profiling())
                    profile_counts[in->op][0]++;
                w->upc = pc + 1;
                continue;
            }
            executed -= (uint64_t)__builtin_popcount(exec);
        }
        executed += (uint64_t)__builtin_popcount(exec);
        if (profiling())
            profile_counts[in->op][1]++;
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
                rc = ptx_fail_insn(b, in, "barrier with a thread count not supported:");
                break;
            }
            if (in->mods & PM_ARRIVE) {
                rc = ptx_fail_insn(b, in, "barrier arrive not supported:");
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
            rc = ptx_exec_ld_st(b, w, in, exec);
            break;
        case PO_atom: case PO_red:
            rc = ptx_exec_atom(b, w, in, exec);
            break;
        case PO_cvta:
            rc = ptx_exec_cvta(b, w, in, exec);
            break;
        case PO_isspacep:
            rc = ptx_exec_isspacep(b, w, in, exec);
            break;
        case PO_mov:
            rc = ptx_exec_mov(b, w, in, exec);
            break;
        case PO_setp: case PO_set:
            rc = ptx_exec_setp(b, w, in, exec);
            break;
        case PO_shfl:
            rc = ptx_exec_shfl(b, w, in, exec);
            break;
        case PO_vote:
            rc = ptx_exec_vote(b, w, in, exec);
            break;
        case PO_match:
            rc = ptx_exec_match(b, w, in, exec);
            break;
        case PO_redux:
            rc = ptx_exec_redux(b, w, in, exec);
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
            rc = ptx_fail_insn(b, in, "kernel executed");
            break;
        case PO_selp: case PO_slct: case PO_lop3: case PO_bfi: case PO_testp: case PO_activemask:
        case PO_createpolicy:
            rc = ptx_exec_misc(b, w, in, exec);
            break;
        case PO_cvt:
            if ((in->type == PT_F16X2 || in->type == PT_BF16X2) && in->nopnd == 3)
                rc = ptx_exec_cvt_pack(b, w, in, exec);
            else
                rc = ptx_exec_alu(b, w, in, exec);
            break;
        case PO_fns: case PO_stacksave: case PO_stackrestore: case PO_getctarank: case PO_mapa:
        case PO_dp2a:
            rc = ptx_fail_insn(b, in, "instruction not supported:");
            break;
        default:
            rc = ptx_exec_alu(b, w, in, exec);
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

/* ptx_lanes.c: the PTX instructions the interpreter executes lane by lane:
 * memory (ld/st with every state space and vector width, atomics and
 * reductions, cvta, isspacep), warp-wide (shfl, vote, match, redux) and
 * the rest (mov with vectors, setp/set, arithmetic through ptx_alu, selp,
 * slct, lop3, bfi, testp, activemask).
 * Entry points: the `ptx_exec_*` functions of ptx_exec.h.
 */
#include "ptx_exec.h"
#include "sim_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Memory instructions
 * ------------------------------------------------------------------------ */

int ptx_exec_ld_st(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    bool is_st = in->op == PO_st;
    const ptx_opnd_t *addr = is_st ? &in->o[0] : &in->o[1];
    const ptx_opnd_t *val = is_st ? &in->o[1] : &in->o[0];
    if (addr->kind != PK_ADDR)
        return ptx_fail_insn(b, in, "memory operand expected by");
    ptx_type_t t = in->type;
    unsigned size = ptx_type_bits(t) / 8;
    if (t == PT_B128)
        return ptx_fail_insn(b, in, "128-bit access not supported by");
    unsigned n = val->kind == PK_VEC ? (unsigned)val->vec_count : 1;
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        unsigned char *p = ptx_address(b, w, in, addr, lane);
        if (in->space == PS_GLOBAL || in->space == PS_GENERIC)
            sim_kernel_touch(p, (size_t)n * size, is_st);
        for (unsigned k = 0; k < n; k++) {
            unsigned char *q = p + k * size;
            if (val->kind == PK_VEC) {
                int r = val->vec[k];
                if (is_st) {
                    ptx_store_value(q, t, r >= 0 ? REG(w, r)[lane] : 0);
                } else if (r >= 0) {
                    REG(w, r)[lane] = ptx_load_value(q, t);
                }
            } else if (is_st) {
                ptx_store_value(q, t, src(b, w, in, val, lane));
            } else {
                put(w, val, lane, ptx_load_value(q, t));
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

int ptx_exec_atom(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
{
    bool red = in->op == PO_red;
    const ptx_opnd_t *addr = &in->o[red ? 0 : 1];
    const ptx_opnd_t *val = &in->o[red ? 1 : 2];
    const ptx_opnd_t *cmpv = in->nopnd > (red ? 2 : 3) ? &in->o[red ? 2 : 3] : NULL;
    if (addr->kind != PK_ADDR)
        return ptx_fail_insn(b, in, "memory operand expected by");
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane)))
            continue;
        unsigned char *p = ptx_address(b, w, in, addr, lane);
        if (in->space == PS_GLOBAL || in->space == PS_GENERIC)
            sim_kernel_touch(p, ptx_type_bits(in->type) / 8, true);
        bool ok;
        uint64_t old = atomic_apply(in, p, src(b, w, in, val, lane), cmpv ? src(b, w, in, cmpv, lane) : 0, &ok);
        if (!ok)
            return ptx_fail_insn(b, in, "atomic form not supported");
        if (!red)
            put(w, &in->o[0], lane, old);
    }
    return 0;
}

int ptx_exec_cvta(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
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

int ptx_exec_isspacep(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
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

int ptx_exec_shfl(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
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
        default: return ptx_fail_insn(b, in, "shfl mode not supported");
        }
        if (!pval || j < 0 || j > 31)
            j = lane;
        put(w, &in->o[0], lane, val[j] & 0xffffffffu);
        if (k == 2)
            put(w, &in->o[1], lane, pval);
    }
    return 0;
}

int ptx_exec_vote(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
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
        default: return ptx_fail_insn(b, in, "vote mode not supported");
        }
        put(w, &in->o[0], lane, r);
    }
    return 0;
}

int ptx_exec_match(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
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

int ptx_exec_redux(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
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
        default: return ptx_fail_insn(b, in, "redux operation not supported");
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

int ptx_exec_mov(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
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

int ptx_exec_setp(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
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

int ptx_exec_alu(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
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
            return ptx_fail_insn(b, in, "instruction form not supported:");
        if (!keep_width)
            r &= m;
        put(w, d, lane, r);
    }
    return 0;
}

int ptx_exec_misc(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
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
            return ptx_fail_insn(b, in, "instruction not supported:");
        }
        put(w, &in->o[0], lane, r);
    }
    return 0;
}

/* cvt.rn.f16x2.f32 d, a, b and friends: two sources packed, a in the upper half. */
int ptx_exec_cvt_pack(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask)
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


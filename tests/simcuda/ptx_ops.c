/* ptx_ops.c: the per-lane arithmetic of the PTX interpreter.
 *
 * `ptx_alu` computes one instruction for the lanes of `mask` from operand
 * values already gathered per lane (`a`, `b`, `c`, as bit patterns of the
 * instruction's type) into `d`. Integer, bit, floating-point (with PTX's
 * rounding modifiers, saturation and flush-to-zero), f16/bf16 and every
 * `cvt`. It returns -1 for a form it does not implement, so the caller can
 * fail loudly.
 * Entry point: `ptx_alu`.
 */
#include "ptx_ops.h"

#include <fenv.h>
#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Bit patterns
 * ------------------------------------------------------------------------ */

static inline float f32(uint64_t v)
{
    uint32_t b = (uint32_t)v;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static inline uint64_t bits32(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static inline double f64(uint64_t v)
{
    double d;
    memcpy(&d, &v, 8);
    return d;
}

static inline uint64_t bits64(double d)
{
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
}

unsigned ptx_type_bits(ptx_type_t t)
{
    switch (t) {
    case PT_U8: case PT_S8: case PT_B8: return 8;
    case PT_U16: case PT_S16: case PT_B16: case PT_F16: case PT_BF16: return 16;
    case PT_U32: case PT_S32: case PT_B32: case PT_F32: case PT_F16X2: case PT_BF16X2: return 32;
    case PT_PRED: return 1;
    default: return 64;
    }
}

static inline bool is_signed(ptx_type_t t)
{
    return t == PT_S8 || t == PT_S16 || t == PT_S32 || t == PT_S64;
}

static inline bool is_float(ptx_type_t t)
{
    return t == PT_F32 || t == PT_F64 || t == PT_F16 || t == PT_BF16 || t == PT_F16X2 || t == PT_BF16X2;
}

static inline uint64_t mask_bits(unsigned bits)
{
    return bits >= 64 ? ~0ull : (1ull << bits) - 1;
}

static inline int64_t sext(uint64_t v, unsigned bits)
{
    if (bits >= 64)
        return (int64_t)v;
    uint64_t m = 1ull << (bits - 1);
    v &= mask_bits(bits);
    return (int64_t)((v ^ m) - m);
}

/* ------------------------------------------------------------------------
 * Half precision
 * ------------------------------------------------------------------------ */

float ptx_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, out;
    if (exp == 0) {
        if (man == 0) {
            out = sign;
        } else { /* subnormal */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while ((man & 0x400) == 0);
            out = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        out = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0);
    } else {
        out = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &out, 4);
    return f;
}

/* Rounds `f` to half: `round` PR_RN (ties to even) or PR_RZ, PR_RM, PR_RP. */
uint16_t ptx_float_to_half(double d, int round)
{
    float f = (float)d;
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    if (isnan(f))
        return (uint16_t)(sign | 0x7e00);
    double a = fabs(d);
    bool neg = sign != 0;
    if (isinf(f))
        return (uint16_t)(sign | 0x7c00);
    /* scale to an integer number of units in the last place */
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5,1) */
    int exp = e - 1;  /* a = 1.x * 2^exp */
    if (exp < -14)
        exp = -14;  /* subnormal range: ulp 2^-24 */
    double ulp = ldexp(1.0, exp - 10);
    double q = a / ulp;
    double fl = floor(q);
    double rem = q - fl;
    double r;
    switch (round) {
    case PR_RZ: r = fl; break;
    case PR_RM: r = neg ? (rem > 0 ? fl + 1 : fl) : fl; break;
    case PR_RP: r = neg ? fl : (rem > 0 ? fl + 1 : fl); break;
    default:
        if (rem > 0.5 || (rem == 0.5 && fmod(fl, 2.0) != 0))
            r = fl + 1;
        else
            r = fl;
    }
    double v = r * ulp;
    if (v >= 65536.0 || (v > 65504.0)) {
        if (round == PR_RZ || (round == PR_RM && !neg) || (round == PR_RP && neg))
            return (uint16_t)(sign | 0x7bff);
        return (uint16_t)(sign | 0x7c00);
    }
    if (v == 0)
        return sign;
    int ve;
    double vm = frexp(v, &ve);
    int hexp = ve - 1;
    if (hexp < -14) { /* subnormal */
        return (uint16_t)(sign | (uint16_t)(v / ldexp(1.0, -24)));
    }
    uint16_t man = (uint16_t)((vm * 2.0 - 1.0) * 1024.0);
    return (uint16_t)(sign | ((hexp + 15) << 10) | man);
}

float ptx_bf16_to_float(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t ptx_float_to_bf16(double d, int round)
{
    float f = (float)d;
    uint32_t x;
    memcpy(&x, &f, 4);
    if (isnan(f))
        return (uint16_t)((x >> 16) | 0x40);
    uint32_t low = x & 0xffff, up = x >> 16;
    bool neg = (x >> 31) != 0;
    switch (round) {
    case PR_RZ: return (uint16_t)up;
    case PR_RM: return (uint16_t)(neg && low ? up + 1 : up);
    case PR_RP: return (uint16_t)(!neg && low ? up + 1 : up);
    default:
        if (low > 0x8000 || (low == 0x8000 && (up & 1)))
            up++;
        return (uint16_t)up;
    }
}

/* ------------------------------------------------------------------------
 * Rounding helpers
 * ------------------------------------------------------------------------ */

static inline float ftz32(float f, bool ftz)
{
    if (ftz && fpclassify(f) == FP_SUBNORMAL)
        return copysignf(0.0f, f);
    return f;
}

static int fe_mode(int round)
{
    switch (round) {
    case PR_RZ: case PR_RZI: return FE_TOWARDZERO;
    case PR_RM: case PR_RMI: return FE_DOWNWARD;
    case PR_RP: case PR_RPI: return FE_UPWARD;
    default: return FE_TONEAREST;
    }
}

/* Float to integer with PTX's saturation (NaN is 0). */
static uint64_t f_to_int(double v, int round, ptx_type_t dt)
{
    if (isnan(v))
        return 0;
    switch (round) {
    case PR_RNI: case PR_RN: v = nearbyint(v); break; /* default mode: ties to even */
    case PR_RMI: case PR_RM: v = floor(v); break;
    case PR_RPI: case PR_RP: v = ceil(v); break;
    default: v = trunc(v); break;
    }
    unsigned bits = ptx_type_bits(dt);
    if (is_signed(dt)) {
        double lo = -ldexp(1.0, (int)bits - 1), hi = ldexp(1.0, (int)bits - 1) - 1;
        if (v <= lo)
            return (uint64_t)(int64_t)lo & mask_bits(bits);
        if (v >= hi)
            return bits == 64 ? (uint64_t)INT64_MAX : (uint64_t)(int64_t)hi & mask_bits(bits);
        return (uint64_t)(int64_t)v & mask_bits(bits);
    }
    if (v <= 0)
        return 0;
    if (v >= ldexp(1.0, (int)bits))
        return mask_bits(bits);
    return (uint64_t)v;
}

static double load_float(ptx_type_t t, uint64_t v)
{
    switch (t) {
    case PT_F32: return f32(v);
    case PT_F64: return f64(v);
    case PT_F16: return ptx_half_to_float((uint16_t)v);
    case PT_BF16: return ptx_bf16_to_float((uint16_t)v);
    default: return 0;
    }
}

static uint64_t store_float(ptx_type_t t, double v, int round)
{
    switch (t) {
    case PT_F32: {
        if (round == PR_NONE || round == PR_RN)
            return bits32((float)v);
        int old = fegetround();
        fesetround(fe_mode(round));
        volatile double vv = v;
        float r = (float)vv;
        fesetround(old);
        return bits32(r);
    }
    case PT_F64: return bits64(v);
    case PT_F16: return ptx_float_to_half(v, round);
    case PT_BF16: return ptx_float_to_bf16(v, round);
    default: return 0;
    }
}

/* ------------------------------------------------------------------------
 * cvt
 * ------------------------------------------------------------------------ */

static int do_cvt(const ptx_insn_t *in, uint64_t a, uint64_t *d)
{
    ptx_type_t dt = in->type, st = in->type2;
    unsigned dbits = ptx_type_bits(dt), sbits = ptx_type_bits(st);
    bool ftz = (in->mods & PM_FTZ) != 0;
    if (is_float(dt) && is_float(st)) {
        if (dt == PT_F16X2 || dt == PT_BF16X2) {
            /* cvt.rn.f16x2.f32 d, a, b: a goes to the upper half */
            return -1;
        }
        double v = load_float(st, a);
        if (st == PT_F32)
            v = ftz32((float)v, ftz);
        if (in->round >= PR_RNI) { /* round to an integral value in the same type */
            switch (in->round) {
            case PR_RNI: v = nearbyint(v); break;
            case PR_RZI: v = trunc(v); break;
            case PR_RMI: v = floor(v); break;
            default: v = ceil(v); break;
            }
        }
        if (in->mods & PM_SAT)
            v = isnan(v) ? 0.0 : v < 0 ? 0.0 : v > 1 ? 1.0 : v;
        uint64_t r = store_float(dt, v, in->round >= PR_RNI ? PR_RN : in->round);
        if (dt == PT_F32 && ftz)
            r = bits32(ftz32(f32(r), true));
        *d = r;
        return 0;
    }
    if (is_float(st)) { /* float to int */
        double v = load_float(st, a);
        if (st == PT_F32)
            v = ftz32((float)v, ftz);
        *d = f_to_int(v, in->round, dt);
        return 0;
    }
    if (is_float(dt)) { /* int to float */
        double v;
        int old = -1;
        if (in->round != PR_NONE && in->round != PR_RN) {
            old = fegetround();
            fesetround(fe_mode(in->round));
        }
        if (is_signed(st)) {
            int64_t s = sext(a, sbits);
            if (dt == PT_F32) {
                volatile int64_t vs = s;
                *d = bits32((float)vs);
            } else if (dt == PT_F64) {
                volatile int64_t vs = s;
                *d = bits64((double)vs);
            } else {
                v = (double)s;
                *d = store_float(dt, v, in->round);
            }
        } else {
            uint64_t u = a & mask_bits(sbits);
            if (dt == PT_F32) {
                volatile uint64_t vu = u;
                *d = bits32((float)vu);
            } else if (dt == PT_F64) {
                volatile uint64_t vu = u;
                *d = bits64((double)vu);
            } else {
                v = (double)u;
                *d = store_float(dt, v, in->round);
            }
        }
        if (old >= 0)
            fesetround(old);
        if (in->mods & PM_SAT) {
            double r = load_float(dt, *d);
            r = r < 0 ? 0 : r > 1 ? 1 : r;
            *d = store_float(dt, r, PR_RN);
        }
        return 0;
    }
    /* int to int: extend from the source, then saturate or truncate */
    int64_t sv = is_signed(st) ? sext(a, sbits) : (int64_t)(a & mask_bits(sbits));
    bool src_neg = is_signed(st) && sv < 0;
    if (in->mods & PM_SAT) {
        if (is_signed(dt)) {
            int64_t lo = dbits >= 64 ? INT64_MIN : -(1ll << (dbits - 1));
            int64_t hi = dbits >= 64 ? INT64_MAX : (1ll << (dbits - 1)) - 1;
            if (!is_signed(st) && (uint64_t)sv > (uint64_t)hi)
                sv = hi;
            else if (is_signed(st) && sv < lo)
                sv = lo;
            else if (is_signed(st) && sv > hi)
                sv = hi;
        } else {
            uint64_t hi = mask_bits(dbits);
            if (src_neg)
                sv = 0;
            else if ((uint64_t)sv > hi)
                sv = (int64_t)hi;
        }
    }
    uint64_t r = (uint64_t)sv & mask_bits(dbits);
    *d = r;
    return 0;
}

/* ------------------------------------------------------------------------
 * Comparisons
 * ------------------------------------------------------------------------ */

bool ptx_compare(int cmp, ptx_type_t t, uint64_t a, uint64_t b)
{
    if (is_float(t)) {
        double x = load_float(t, a), y = load_float(t, b);
        bool unord = isnan(x) || isnan(y);
        switch (cmp) {
        case PC_EQ: return !unord && x == y;
        case PC_NE: return !unord && x != y;
        case PC_LT: return !unord && x < y;
        case PC_LE: return !unord && x <= y;
        case PC_GT: return !unord && x > y;
        case PC_GE: return !unord && x >= y;
        case PC_EQU: return unord || x == y;
        case PC_NEU: return unord || x != y;
        case PC_LTU: return unord || x < y;
        case PC_LEU: return unord || x <= y;
        case PC_GTU: return unord || x > y;
        case PC_GEU: return unord || x >= y;
        case PC_NUM: return !unord;
        case PC_NAN: return unord;
        default: return false;
        }
    }
    unsigned bits = ptx_type_bits(t);
    if (is_signed(t)) {
        int64_t x = sext(a, bits), y = sext(b, bits);
        switch (cmp) {
        case PC_EQ: return x == y;
        case PC_NE: return x != y;
        case PC_LT: return x < y;
        case PC_LE: return x <= y;
        case PC_GT: return x > y;
        case PC_GE: return x >= y;
        default: break;
        }
    }
    uint64_t x = a & mask_bits(bits), y = b & mask_bits(bits);
    switch (cmp) {
    case PC_EQ: return x == y;
    case PC_NE: return x != y;
    case PC_LT: case PC_LO: return x < y;
    case PC_LE: case PC_LS: return x <= y;
    case PC_GT: case PC_HI: return x > y;
    case PC_GE: case PC_HS: return x >= y;
    default: return false;
    }
}

/* ------------------------------------------------------------------------
 * Floating point
 * ------------------------------------------------------------------------ */

static int float_op(const ptx_insn_t *in, uint64_t a, uint64_t b, uint64_t c, uint64_t *d)
{
    ptx_type_t t = in->type;
    bool ftz = (in->mods & PM_FTZ) != 0;
    if (t == PT_F16X2 || t == PT_BF16X2) {
        ptx_insn_t half = *in;
        half.type = t == PT_F16X2 ? PT_F16 : PT_BF16;
        uint64_t lo, hi;
        if (float_op(&half, a & 0xffff, b & 0xffff, c & 0xffff, &lo) != 0 ||
            float_op(&half, (a >> 16) & 0xffff, (b >> 16) & 0xffff, (c >> 16) & 0xffff, &hi) != 0)
            return -1;
        *d = (lo & 0xffff) | ((hi & 0xffff) << 16);
        return 0;
    }
    if (t == PT_F32) {
        float x = ftz32(f32(a), ftz), y = ftz32(f32(b), ftz), z = ftz32(f32(c), ftz), r;
        int old = -1;
        if (in->round > PR_RN && in->round <= PR_RP && in->op != PO_cvt) {
            old = fegetround();
            fesetround(fe_mode(in->round));
        }
        switch (in->op) {
        case PO_add: r = x + y; break;
        case PO_sub: r = x - y; break;
        case PO_mul: r = x * y; break;
        case PO_fma: case PO_mad: r = fmaf(x, y, z); break;
        case PO_div:
            if ((in->mods & PM_APPROX) || (in->mods & PM_FULL))
                r = x / y;
            else
                r = x / y;
            break;
        case PO_min:
            r = isnan(x) ? y : isnan(y) ? x : (x < y || (x == y && signbit(x))) ? x : y;
            if ((in->mods & PM_NAN) && (isnan(x) || isnan(y)))
                r = NAN;
            break;
        case PO_max:
            r = isnan(x) ? y : isnan(y) ? x : (x > y || (x == y && !signbit(x))) ? x : y;
            if ((in->mods & PM_NAN) && (isnan(x) || isnan(y)))
                r = NAN;
            break;
        case PO_abs: r = fabsf(x); break;
        case PO_neg: r = -x; break;
        case PO_sqrt: r = sqrtf(x); break;
        case PO_rsqrt: r = 1.0f / sqrtf(x); break;
        case PO_rcp: r = 1.0f / x; break;
        case PO_ex2: r = exp2f(x); break;
        case PO_lg2: r = log2f(x); break;
        case PO_sin: r = sinf(x); break;
        case PO_cos: r = cosf(x); break;
        case PO_copysign: r = copysignf(y, x); break;
        default:
            if (old >= 0)
                fesetround(old);
            return -1;
        }
        if (old >= 0)
            fesetround(old);
        if (in->mods & PM_SAT)
            r = isnan(r) ? 0.0f : r < 0 ? 0.0f : r > 1 ? 1.0f : r;
        *d = bits32(ftz32(r, ftz));
        return 0;
    }
    if (t == PT_F64) {
        double x = f64(a), y = f64(b), z = f64(c), r;
        int old = -1;
        if (in->round > PR_RN && in->round <= PR_RP) {
            old = fegetround();
            fesetround(fe_mode(in->round));
        }
        switch (in->op) {
        case PO_add: r = x + y; break;
        case PO_sub: r = x - y; break;
        case PO_mul: r = x * y; break;
        case PO_fma: case PO_mad: r = fma(x, y, z); break;
        case PO_div: r = x / y; break;
        case PO_min: r = isnan(x) ? y : isnan(y) ? x : (x < y || (x == y && signbit(x))) ? x : y; break;
        case PO_max: r = isnan(x) ? y : isnan(y) ? x : (x > y || (x == y && !signbit(x))) ? x : y; break;
        case PO_abs: r = fabs(x); break;
        case PO_neg: r = -x; break;
        case PO_sqrt: r = sqrt(x); break;
        case PO_rsqrt: r = 1.0 / sqrt(x); break;
        case PO_rcp: r = 1.0 / x; break;
        case PO_copysign: r = copysign(y, x); break;
        default:
            if (old >= 0)
                fesetround(old);
            return -1;
        }
        if (old >= 0)
            fesetround(old);
        *d = bits64(r);
        return 0;
    }
    if (t == PT_F16 || t == PT_BF16) {
        /* computed in float (exact for add/sub/mul of halves) and rounded once */
        double x = load_float(t, a), y = load_float(t, b), z = load_float(t, c), r;
        switch (in->op) {
        case PO_add: r = x + y; break;
        case PO_sub: r = x - y; break;
        case PO_mul: r = x * y; break;
        case PO_fma: case PO_mad: r = x * y + z; break;
        case PO_min: r = isnan(x) ? y : isnan(y) ? x : x < y ? x : y; break;
        case PO_max: r = isnan(x) ? y : isnan(y) ? x : x > y ? x : y; break;
        case PO_abs: r = fabs(x); break;
        case PO_neg: r = -x; break;
        default: return -1;
        }
        if (in->mods & PM_SAT)
            r = isnan(r) ? 0 : r < 0 ? 0 : r > 1 ? 1 : r;
        *d = store_float(t, r, in->round == PR_NONE ? PR_RN : in->round);
        return 0;
    }
    return -1;
}

/* ------------------------------------------------------------------------
 * Integers and bits
 * ------------------------------------------------------------------------ */

static uint64_t mulhi_u64(uint64_t x, uint64_t y)
{
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)x * y) >> 64);
}

static int64_t mulhi_s64(int64_t x, int64_t y)
{
    __extension__ typedef __int128 s128;
    return (int64_t)(((s128)x * y) >> 64);
}

static uint64_t int_mul(const ptx_insn_t *in, uint64_t a, uint64_t b, unsigned bits, bool sgn)
{
    if (in->mods & PM_WIDE) {
        if (sgn)
            return (uint64_t)(sext(a, bits) * sext(b, bits));
        return (a & mask_bits(bits)) * (b & mask_bits(bits));
    }
    if (in->mods & PM_HI) {
        if (bits == 64)
            return sgn ? (uint64_t)mulhi_s64((int64_t)a, (int64_t)b) : mulhi_u64(a, b);
        if (sgn)
            return (uint64_t)((sext(a, bits) * sext(b, bits)) >> bits);
        return ((a & mask_bits(bits)) * (b & mask_bits(bits))) >> bits;
    }
    return a * b;
}

static uint64_t sat_s32(int64_t v)
{
    if (v > INT32_MAX)
        v = INT32_MAX;
    if (v < INT32_MIN)
        v = INT32_MIN;
    return (uint64_t)v;
}

static int bit_op(const ptx_insn_t *in, uint64_t a, uint64_t b, uint64_t c, uint64_t *d, unsigned bits)
{
    uint64_t m = mask_bits(bits);
    switch (in->op) {
    case PO_and: *d = a & b; return 0;
    case PO_or: *d = a | b; return 0;
    case PO_xor: *d = a ^ b; return 0;
    case PO_not: *d = ~a; return 0;
    case PO_cnot: *d = (a & m) == 0; return 0;
    case PO_popc: *d = (uint64_t)__builtin_popcountll(a & m); return 0;
    case PO_clz: *d = (a & m) == 0 ? bits : (uint64_t)(__builtin_clzll(a & m) - (64 - bits)); return 0;
    case PO_brev: {
        uint64_t r = 0;
        for (unsigned i = 0; i < bits; i++)
            if (a & (1ull << i))
                r |= 1ull << (bits - 1 - i);
        *d = r;
        return 0;
    }
    case PO_bfind: {
        uint64_t v = a & m;
        if (is_signed(in->type) && sext(a, bits) < 0)
            v = ~v & m;
        if (v == 0) {
            *d = 0xffffffffu;
            return 0;
        }
        unsigned pos = 63 - (unsigned)__builtin_clzll(v);
        *d = (in->mods & PM_SHIFTAMT) ? bits - 1 - pos : pos;
        return 0;
    }
    case PO_shl: {
        uint64_t s = b & 0xffffffffu;
        *d = s >= bits ? 0 : a << s;
        return 0;
    }
    case PO_shr: {
        uint64_t s = b & 0xffffffffu;
        if (is_signed(in->type)) {
            int64_t v = sext(a, bits);
            *d = (uint64_t)(s >= bits ? (v < 0 ? -1 : 0) : v >> s);
        } else {
            *d = s >= bits ? 0 : (a & m) >> s;
        }
        return 0;
    }
    case PO_bfe: {
        unsigned pos = (unsigned)(b & 0xff), len = (unsigned)(c & 0xff);
        bool sgn = is_signed(in->type);
        uint64_t v = a & m;
        uint64_t r = 0;
        bool sbit;
        if (len == 0) {
            *d = 0;
            return 0;
        }
        if (sgn)
            sbit = pos + len - 1 >= bits ? (v >> (bits - 1)) & 1 : (v >> (pos + len - 1)) & 1;
        else
            sbit = false;
        for (unsigned i = 0; i < bits; i++) {
            uint64_t bit = i < len ? (pos + i < bits ? (v >> (pos + i)) & 1 : (uint64_t)sbit) : (uint64_t)sbit;
            r |= bit << i;
        }
        *d = r;
        return 0;
    }
    case PO_bmsk: {
        unsigned pos = (unsigned)(a & 0xffffffffu), len = (unsigned)(b & 0xffffffffu);
        if (in->mods & PM_CLAMP) {
            if (pos > 32) pos = 32;
            if (len > 32) len = 32;
        } else {
            pos &= 0x1f;
            len &= 0x1f;
        }
        uint64_t hi = pos + len >= 32 ? 0xffffffffull : (1ull << (pos + len)) - 1;
        uint64_t lo = pos >= 32 ? 0xffffffffull : (1ull << pos) - 1;
        *d = (hi & ~lo) & 0xffffffffu;
        return 0;
    }
    default: return -1;
    }
}

int ptx_alu(const ptx_insn_t *in, uint64_t a, uint64_t b, uint64_t c, uint64_t *d, uint8_t *carry)
{
    ptx_type_t t = in->type;
    if (in->op == PO_cvt)
        return do_cvt(in, a, d);
    if (is_float(t))
        return float_op(in, a, b, c, d);
    unsigned bits = ptx_type_bits(t);
    bool sgn = is_signed(t);
    uint64_t m = mask_bits(bits);
    switch (in->op) {
    case PO_add:
        if (in->mods & PM_SAT) {
            *d = sat_s32(sext(a, 32) + sext(b, 32));
            return 0;
        }
        if (in->mods & PM_CC) {
            uint64_t r = (a & m) + (b & m);
            *carry = (r >> bits) & 1 ? 1 : ((bits == 64 && r < (a & m)) ? 1 : 0);
            if (bits == 64)
                *carry = r < a;
            *d = r;
            return 0;
        }
        *d = a + b;
        return 0;
    case PO_addc: {
        uint64_t r = (a & m) + (b & m) + *carry;
        if (in->mods & PM_CC)
            *carry = bits == 64 ? (r < a || (r == a && *carry)) : (uint8_t)((r >> bits) & 1);
        *d = r;
        return 0;
    }
    case PO_sub:
        if (in->mods & PM_SAT) {
            *d = sat_s32(sext(a, 32) - sext(b, 32));
            return 0;
        }
        if (in->mods & PM_CC) {
            *carry = (a & m) < (b & m); /* borrow */
            *d = a - b;
            return 0;
        }
        *d = a - b;
        return 0;
    case PO_subc: {
        uint64_t r = (a & m) - (b & m) - *carry;
        if (in->mods & PM_CC)
            *carry = (a & m) < (b & m) + *carry || ((b & m) + *carry < (b & m));
        *d = r;
        return 0;
    }
    case PO_mul:
        *d = int_mul(in, a, b, bits, sgn);
        return 0;
    case PO_mad: {
        uint64_t p = int_mul(in, a, b, bits, sgn);
        if ((in->mods & PM_SAT) && (in->mods & PM_HI)) {
            *d = sat_s32(sext(p, 32) + sext(c, 32));
            return 0;
        }
        if (in->mods & PM_CC) {
            unsigned wb = (in->mods & PM_WIDE) ? 64 : bits;
            uint64_t mm = mask_bits(wb), r = (p & mm) + (c & mm);
            *carry = wb == 64 ? r < (p & mm) : (uint8_t)((r >> wb) & 1);
            *d = r;
            return 0;
        }
        *d = p + c;
        return 0;
    }
    case PO_mul24: case PO_mad24: {
        int64_t x = sgn ? sext(a, 24) : (int64_t)(a & 0xffffff), y = sgn ? sext(b, 24) : (int64_t)(b & 0xffffff);
        int64_t p = x * y;
        uint64_t r = (in->mods & PM_HI) ? (uint64_t)p >> 16 : (uint64_t)p;
        *d = r + (in->op == PO_mad24 ? c : 0);
        return 0;
    }
    case PO_sad: {
        int64_t x = sgn ? sext(a, bits) : (int64_t)(a & m), y = sgn ? sext(b, bits) : (int64_t)(b & m);
        *d = (uint64_t)(x > y ? x - y : y - x) + c;
        return 0;
    }
    case PO_div:
        if ((b & m) == 0) {
            *d = m; /* undefined on a GPU; all ones, as sm_70+ gives for unsigned */
            return 0;
        }
        if (sgn) {
            int64_t x = sext(a, bits), y = sext(b, bits);
            *d = (y == -1) ? (uint64_t)(-x) : (uint64_t)(x / y);
        } else {
            *d = (a & m) / (b & m);
        }
        return 0;
    case PO_rem:
        if ((b & m) == 0) {
            *d = a;
            return 0;
        }
        if (sgn) {
            int64_t x = sext(a, bits), y = sext(b, bits);
            *d = y == -1 ? 0 : (uint64_t)(x % y);
        } else {
            *d = (a & m) % (b & m);
        }
        return 0;
    case PO_min: case PO_max: {
        bool less = sgn ? sext(a, bits) < sext(b, bits) : (a & m) < (b & m);
        *d = (in->op == PO_min) == less ? a : b;
        if (in->mods & PM_RELU && sgn && sext(*d, bits) < 0)
            *d = 0;
        return 0;
    }
    case PO_abs: {
        int64_t v = sext(a, bits);
        *d = (uint64_t)(v < 0 ? -v : v);
        return 0;
    }
    case PO_neg:
        *d = (uint64_t)(-(int64_t)a);
        return 0;
    case PO_bfi: {
        /* bfi d, a(insert), b(base), c(pos), e(len): e is passed in *d */
        return -1;
    }
    case PO_prmt: {
        uint64_t bytes = (a & 0xffffffffu) | ((b & 0xffffffffu) << 32);
        uint32_t sel = (uint32_t)c, r = 0;
        if (in->sub == PSUB_NONE) {
            for (int i = 0; i < 4; i++) {
                unsigned s = (sel >> (4 * i)) & 0xf;
                uint8_t byte = (uint8_t)(bytes >> (8 * (s & 7)));
                if (s & 8)
                    byte = (byte & 0x80) ? 0xff : 0;
                r |= (uint32_t)byte << (8 * i);
            }
        } else {
            static const uint16_t modes[6][4] = {
                /* f4e */ {0, 0, 0, 0}, /* computed below */
            };
            (void)modes;
            unsigned s = sel & 3;
            unsigned idx[4];
            switch (in->sub) {
            case PSUB_F4E: for (int i = 0; i < 4; i++) idx[i] = (s + i) & 7; break;
            case PSUB_B4E: for (int i = 0; i < 4; i++) idx[i] = (s - i + 8) & 7; break;
            case PSUB_RC8: for (int i = 0; i < 4; i++) idx[i] = s; break;
            case PSUB_ECL: for (int i = 0; i < 4; i++) idx[i] = (unsigned)i > s ? (unsigned)i : s; break;
            case PSUB_ECR: for (int i = 0; i < 4; i++) idx[i] = (unsigned)i < s ? (unsigned)i : s; break;
            case PSUB_RC16: for (int i = 0; i < 4; i++) idx[i] = (s & 1) * 2 + (i & 1); break;
            default: return -1;
            }
            for (int i = 0; i < 4; i++)
                r |= (uint32_t)(uint8_t)(bytes >> (8 * idx[i])) << (8 * i);
        }
        *d = r;
        return 0;
    }
    case PO_shf: {
        uint32_t lo = (uint32_t)a, hi = (uint32_t)b, n = (uint32_t)c;
        n = (in->mods & PM_CLAMP) ? (n > 32 ? 32 : n) : (n & 31);
        uint64_t both = ((uint64_t)hi << 32) | lo;
        if (in->mods & PM_L)
            *d = (uint32_t)((both << n) >> 32);
        else
            *d = (uint32_t)(both >> n);
        return 0;
    }
    case PO_dp4a: {
        int32_t acc = (int32_t)c;
        bool sa = in->type == PT_S32, sb = in->type2 == PT_S32;
        for (int i = 0; i < 4; i++) {
            int32_t x = sa ? (int8_t)(a >> (8 * i)) : (uint8_t)(a >> (8 * i));
            int32_t y = sb ? (int8_t)(b >> (8 * i)) : (uint8_t)(b >> (8 * i));
            acc += x * y;
        }
        *d = (uint32_t)acc;
        return 0;
    }
    default:
        return bit_op(in, a, b, c, d, bits);
    }
}

/* test_sim_ptx.c: per-instruction conformance of simcuda's PTX interpreter.
 *
 * Each scalar case is one PTX instruction (or a short sequence) wrapped in a
 * kernel that reads three 64-bit inputs per thread and writes one 64-bit
 * result; the expected value is computed on the host from PTX ISA's
 * definition of the instruction, over edge values and pseudo-random ones.
 * Further tests cover warp-wide instructions, shared memory with barriers,
 * atomics, local memory through generic addresses, calls to .func, the
 * parameter layouts `cuFuncGetParamInfo` reports and loads that must fail
 * with CUDA_ERROR_INVALID_PTX.
 */
#include <cuda.h>

#include <fenv.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define LANES 96 /* three warps, the last one partly out of range */

static CUcontext ctx;

static int setup(void **state)
{
    (void)state;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------------
 * Host references
 * ------------------------------------------------------------------------ */

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint64_t u)
{
    uint32_t v = (uint32_t)u;
    float f;
    memcpy(&f, &v, 4);
    return f;
}

static uint64_t d2u(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static double u2d(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static float with_round(int mode, float (*op)(float, float, float), float a, float b, float c)
{
    /* The host's own rounding modes: an independent reference. */
    int old = fegetround();
    fesetround(mode);
    volatile float r = op(a, b, c);
    fesetround(old);
    return r;
}

#define FE_TONEAREST_ FE_TONEAREST
#define FE_DOWNWARD_ FE_DOWNWARD
#define FE_UPWARD_ FE_UPWARD
#define FE_TOWARDZERO_ FE_TOWARDZERO

static float op_add(float a, float b, float c) { (void)c; return a + b; }
static float op_mul(float a, float b, float c) { (void)c; return a * b; }
static float op_fma(float a, float b, float c) { return fmaf(a, b, c); }
static float op_div(float a, float b, float c) { (void)c; return a / b; }

static uint32_t bf16_rn(float f)
{
    uint32_t x = f2u(f);
    if (isnan(f))
        return (x >> 16) | 0x40;
    return (x + 0x7fff + ((x >> 16) & 1)) >> 16;
}

static uint64_t sat_int(double v, int bits, int is_signed)
{
    if (isnan(v))
        return 0;
    uint64_t m = bits == 64 ? ~0ull : (1ull << bits) - 1;
    if (is_signed) {
        /* compared in double, converted only when in range: 2^63 - 1 has
         * no double */
        if (v >= ldexp(1, bits - 1))
            return (uint64_t)(bits == 64 ? INT64_MAX : (int64_t)((1ull << (bits - 1)) - 1)) & m;
        if (v <= -ldexp(1, bits - 1))
            return (uint64_t)(bits == 64 ? INT64_MIN : -(int64_t)(1ull << (bits - 1))) & m;
        return (uint64_t)(int64_t)v & m;
    }
    if (v <= 0)
        return 0;
    if (v >= ldexp(1, bits))
        return m;
    return (uint64_t)v & m;
}

/* ------------------------------------------------------------------------
 * Scalar cases
 * ------------------------------------------------------------------------ */

typedef uint64_t (*ref_fn)(uint64_t a, uint64_t b, uint64_t c);

typedef struct scalar_case_s {
    const char *name;
    const char *body; /* inputs %rd7 %rd8 %rd9, result %rd10 */
    ref_fn ref;
    int inputs;       /* which input set: 0 integers, 1 floats, 2 doubles, 3 nonzero divisors */
} scalar_case_t;

#define U32(x) ((uint32_t)(x))
#define S32(x) ((int32_t)(uint32_t)(x))

#define LO32 "cvt.u32.u64 %r1, %rd7; cvt.u32.u64 %r2, %rd8; cvt.u32.u64 %r3, %rd9; "
#define OUT32 " cvt.u64.u32 %rd10, %r4;"

static uint64_t r_add(uint64_t a, uint64_t b, uint64_t c) { (void)c; return U32(a + b); }
static uint64_t r_sub(uint64_t a, uint64_t b, uint64_t c) { (void)c; return U32(a - b); }
static uint64_t r_mullo(uint64_t a, uint64_t b, uint64_t c) { (void)c; return U32(U32(a) * U32(b)); }
static uint64_t r_mulhi_u(uint64_t a, uint64_t b, uint64_t c) { (void)c; return U32(((uint64_t)U32(a) * U32(b)) >> 32); }
static uint64_t r_mulhi_s(uint64_t a, uint64_t b, uint64_t c) { (void)c; return U32((uint64_t)(((int64_t)S32(a) * S32(b)) >> 32)); }
static uint64_t r_mulwide_s(uint64_t a, uint64_t b, uint64_t c) { (void)c; return (uint64_t)((int64_t)S32(a) * S32(b)); }
static uint64_t r_mulwide_u(uint64_t a, uint64_t b, uint64_t c) { (void)c; return (uint64_t)U32(a) * U32(b); }
static uint64_t r_madlo(uint64_t a, uint64_t b, uint64_t c) { return U32(U32(a) * U32(b) + U32(c)); }
static uint64_t r_div_u(uint64_t a, uint64_t b, uint64_t c) { (void)c; return U32(a) / U32(b); }
static uint64_t r_div_s(uint64_t a, uint64_t b, uint64_t c) { (void)c; return U32((uint32_t)(S32(a) / S32(b))); }
static uint64_t r_rem_s(uint64_t a, uint64_t b, uint64_t c) { (void)c; return U32((uint32_t)(S32(a) % S32(b))); }
static uint64_t r_min_s(uint64_t a, uint64_t b, uint64_t c) { (void)c; return U32(S32(a) < S32(b) ? a : b); }
static uint64_t r_max_u(uint64_t a, uint64_t b, uint64_t c) { (void)c; return U32(a) > U32(b) ? U32(a) : U32(b); }
static uint64_t r_abs_s(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return U32(S32(a) < 0 ? -(uint32_t)a : a); }
static uint64_t r_shl(uint64_t a, uint64_t b, uint64_t c) { (void)c; unsigned s = U32(b) & 63; return s >= 32 ? 0 : U32(U32(a) << s); }
static uint64_t r_shr_u(uint64_t a, uint64_t b, uint64_t c) { (void)c; unsigned s = U32(b) & 63; return s >= 32 ? 0 : U32(a) >> s; }
static uint64_t r_shr_s(uint64_t a, uint64_t b, uint64_t c) { (void)c; unsigned s = U32(b) & 63; return U32(s >= 32 ? (S32(a) < 0 ? -1 : 0) : S32(a) >> s); }
static uint64_t r_lop3_96(uint64_t a, uint64_t b, uint64_t c) { return U32(a ^ b ^ c); }
static uint64_t r_lop3_e8(uint64_t a, uint64_t b, uint64_t c) { return U32((a & b) | (a & c) | (b & c)); }
static uint64_t r_brev(uint64_t a, uint64_t b, uint64_t c)
{
    (void)b, (void)c;
    uint32_t r = 0;
    for (int i = 0; i < 32; i++)
        r |= ((U32(a) >> i) & 1u) << (31 - i);
    return r;
}
static uint64_t r_clz(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return U32(a) ? (uint64_t)__builtin_clz(U32(a)) : 32; }
static uint64_t r_popc64(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return (uint64_t)__builtin_popcountll(a); }
static uint64_t r_bfind_s(uint64_t a, uint64_t b, uint64_t c)
{
    (void)b, (void)c;
    uint32_t v = S32(a) < 0 ? ~U32(a) : U32(a);
    return v ? 31u - (uint32_t)__builtin_clz(v) : 0xffffffffu;
}
static uint64_t r_bfe(uint64_t a, uint64_t b, uint64_t c, int sgn)
{
    unsigned pos = U32(b) & 0xff, len = U32(c) & 0xff, msb = 31;
    uint32_t x = U32(a), sbit = 0, d = 0;
    if (sgn && len > 0)
        sbit = (x >> (pos + len - 1 > msb ? msb : pos + len - 1)) & 1;
    for (unsigned i = 0; i <= msb; i++)
        d |= (i < len && pos + i <= msb ? (x >> (pos + i)) & 1 : sbit) << i;
    return d;
}
static uint64_t r_bfe_u(uint64_t a, uint64_t b, uint64_t c) { return r_bfe(a, b & 0x3f, c & 0x3f, 0); }
static uint64_t r_bfe_s(uint64_t a, uint64_t b, uint64_t c) { return r_bfe(a, b & 0x3f, c & 0x3f, 1); }
static uint64_t r_prmt(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t bytes = U32(a) | ((uint64_t)U32(b) << 32);
    uint32_t d = 0;
    for (int i = 0; i < 4; i++) {
        unsigned sel = (U32(c) >> (4 * i)) & 0xf;
        uint32_t byte = (bytes >> (8 * (sel & 7))) & 0xff;
        if (sel & 8)
            byte = (byte & 0x80) ? 0xff : 0;
        d |= byte << (8 * i);
    }
    return d;
}
static uint64_t r_shf_l_wrap(uint64_t a, uint64_t b, uint64_t c)
{
    unsigned n = U32(c) & 31;
    uint64_t both = ((uint64_t)U32(b) << 32) | U32(a);
    return U32((both << n) >> 32);
}
static uint64_t r_shf_r_clamp(uint64_t a, uint64_t b, uint64_t c)
{
    unsigned n = (U32(c) & 63) > 32 ? 32 : (U32(c) & 63);
    uint64_t both = ((uint64_t)U32(b) << 32) | U32(a);
    return U32(both >> n);
}
static uint64_t r_setp_lt_s(uint64_t a, uint64_t b, uint64_t c) { (void)c; return S32(a) < S32(b) ? 7 : 9; }
static uint64_t r_setp_hs_u(uint64_t a, uint64_t b, uint64_t c) { (void)c; return U32(a) >= U32(b) ? 7 : 9; }
static uint64_t r_setp_ltu_f(uint64_t a, uint64_t b, uint64_t c)
{
    (void)c;
    float x = u2f(a), y = u2f(b);
    return (isnan(x) || isnan(y) || x < y) ? 7 : 9;
}
static uint64_t r_setp_gt_and(uint64_t a, uint64_t b, uint64_t c)
{
    float x = u2f(a), y = u2f(b);
    bool q = (c & 1) != 0, gt = !isnan(x) && !isnan(y) && x > y;
    bool ngt = !gt; /* the second destination: the negated comparison, combined too */
    return (uint64_t)((gt && q) ? 1 : 0) | (uint64_t)((ngt && q) ? 2 : 0);
}
static uint64_t r_cvt_s32_s8(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return U32((int32_t)(int8_t)a); }
static uint64_t r_cvt_u8_u32(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return a & 0xff; }
static uint64_t r_cvt_sat_s8_s32(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return U32(sat_int(S32(a), 8, 1)) & 0xff; }
static uint64_t r_cvt_sat_u16_s32(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return sat_int(S32(a), 16, 0); }
static uint64_t r_cvt_rni_s32_f32(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return U32(sat_int(nearbyint(u2f(a)), 32, 1)); }
static uint64_t r_cvt_rzi_s32_f32(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return U32(sat_int(trunc(u2f(a)), 32, 1)); }
static uint64_t r_cvt_rmi_s32_f32(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return U32(sat_int(floor(u2f(a)), 32, 1)); }
static uint64_t r_cvt_rpi_u32_f32(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return sat_int(ceil(u2f(a)), 32, 0); }
static uint64_t r_cvt_rzi_s64_f64(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return sat_int(trunc(u2d(a)), 64, 1); }
static uint64_t r_cvt_rn_f32_s32(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return f2u((float)S32(a)); }
static uint64_t r_cvt_rn_f32_f64(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return f2u((float)u2d(a)); }
static uint64_t r_cvt_f64_f32(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return d2u((double)u2f(a)); }
static uint64_t r_cvt_rn_bf16_f32(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return bf16_rn(u2f(a)); }
static uint64_t r_cvt_rn_f16_f32(uint64_t a, uint64_t b, uint64_t c)
{
    (void)b, (void)c;
    __extension__ _Float16 h = (_Float16)u2f(a);
    uint16_t u;
    memcpy(&u, &h, 2);
    if (isnan(u2f(a)))
        return 0x7fff; /* canonical NaN: compared after masking below */
    return u;
}
static uint64_t r_cvt_f32_f16(uint64_t a, uint64_t b, uint64_t c)
{
    (void)b, (void)c;
    uint16_t u = (uint16_t)a;
    __extension__ _Float16 h;
    memcpy(&h, &u, 2);
    if ((u & 0x7c00) == 0x7c00 && (u & 0x3ff))
        return 0x7fffffff;
    return f2u((float)h);
}
static uint64_t r_pack_zero(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return (a & 0xffff) << 16; }
static uint64_t r_unpack_hi(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return U32(a) >> 16; }
static uint64_t r_add_rz(uint64_t a, uint64_t b, uint64_t c) { return f2u(with_round(FE_TOWARDZERO_, op_add, u2f(a), u2f(b), u2f(c))); }
static uint64_t r_mul_rm(uint64_t a, uint64_t b, uint64_t c) { return f2u(with_round(FE_DOWNWARD_, op_mul, u2f(a), u2f(b), u2f(c))); }
static uint64_t r_fma_rn(uint64_t a, uint64_t b, uint64_t c) { return f2u(with_round(FE_TONEAREST_, op_fma, u2f(a), u2f(b), u2f(c))); }
static uint64_t r_fma_rp(uint64_t a, uint64_t b, uint64_t c) { return f2u(with_round(FE_UPWARD_, op_fma, u2f(a), u2f(b), u2f(c))); }
static uint64_t r_div_rn(uint64_t a, uint64_t b, uint64_t c) { return f2u(with_round(FE_TONEAREST_, op_div, u2f(a), u2f(b), u2f(c))); }
static uint64_t r_sqrt_rn(uint64_t a, uint64_t b, uint64_t c) { (void)b, (void)c; return f2u(sqrtf(u2f(a))); }
static uint64_t r_min_f(uint64_t a, uint64_t b, uint64_t c)
{
    (void)c;
    float x = u2f(a), y = u2f(b);
    if (isnan(x) && isnan(y))
        return 0x7fffffff;
    return f2u(isnan(x) ? y : isnan(y) ? x : (x < y || (x == y && signbit(x))) ? x : y);
}
static uint64_t r_add_sat(uint64_t a, uint64_t b, uint64_t c)
{
    (void)c;
    float r = u2f(a) + u2f(b);
    return f2u(isnan(r) ? 0.0f : r < 0 ? 0.0f : r > 1 ? 1.0f : r);
}
static uint64_t r_fma_f64(uint64_t a, uint64_t b, uint64_t c) { return d2u(fma(u2d(a), u2d(b), u2d(c))); }

static const scalar_case_t scalar_cases[] = {
    {"add.u32", LO32 "add.u32 %r4, %r1, %r2;" OUT32, r_add, 0},
    {"sub.s32", LO32 "sub.s32 %r4, %r1, %r2;" OUT32, r_sub, 0},
    {"mul.lo.u32", LO32 "mul.lo.u32 %r4, %r1, %r2;" OUT32, r_mullo, 0},
    {"mul.hi.u32", LO32 "mul.hi.u32 %r4, %r1, %r2;" OUT32, r_mulhi_u, 0},
    {"mul.hi.s32", LO32 "mul.hi.s32 %r4, %r1, %r2;" OUT32, r_mulhi_s, 0},
    {"mul.wide.s32", LO32 "mul.wide.s32 %rd10, %r1, %r2;", r_mulwide_s, 0},
    {"mul.wide.u32", LO32 "mul.wide.u32 %rd10, %r1, %r2;", r_mulwide_u, 0},
    {"mad.lo.s32", LO32 "mad.lo.s32 %r4, %r1, %r2, %r3;" OUT32, r_madlo, 0},
    {"div.u32", LO32 "div.u32 %r4, %r1, %r2;" OUT32, r_div_u, 3},
    {"div.s32", LO32 "div.s32 %r4, %r1, %r2;" OUT32, r_div_s, 3},
    {"rem.s32", LO32 "rem.s32 %r4, %r1, %r2;" OUT32, r_rem_s, 3},
    {"min.s32", LO32 "min.s32 %r4, %r1, %r2;" OUT32, r_min_s, 0},
    {"max.u32", LO32 "max.u32 %r4, %r1, %r2;" OUT32, r_max_u, 0},
    {"abs.s32", LO32 "abs.s32 %r4, %r1;" OUT32, r_abs_s, 0},
    {"shl.b32", LO32 "and.b32 %r2, %r2, 63; shl.b32 %r4, %r1, %r2;" OUT32, r_shl, 0},
    {"shr.u32", LO32 "and.b32 %r2, %r2, 63; shr.u32 %r4, %r1, %r2;" OUT32, r_shr_u, 0},
    {"shr.s32", LO32 "and.b32 %r2, %r2, 63; shr.s32 %r4, %r1, %r2;" OUT32, r_shr_s, 0},
    {"lop3.b32 0x96", LO32 "lop3.b32 %r4, %r1, %r2, %r3, 0x96;" OUT32, r_lop3_96, 0},
    {"lop3.b32 0xe8", LO32 "lop3.b32 %r4, %r1, %r2, %r3, 232;" OUT32, r_lop3_e8, 0},
    {"brev.b32", LO32 "brev.b32 %r4, %r1;" OUT32, r_brev, 0},
    {"clz.b32", LO32 "clz.b32 %r4, %r1;" OUT32, r_clz, 0},
    {"popc.b64", "popc.b64 %r4, %rd7;" OUT32, r_popc64, 0},
    {"bfind.s32", LO32 "bfind.s32 %r4, %r1;" OUT32, r_bfind_s, 0},
    {"bfe.u32", LO32 "and.b32 %r2, %r2, 63; and.b32 %r3, %r3, 63; bfe.u32 %r4, %r1, %r2, %r3;" OUT32, r_bfe_u, 0},
    {"bfe.s32", LO32 "and.b32 %r2, %r2, 63; and.b32 %r3, %r3, 63; bfe.s32 %r4, %r1, %r2, %r3;" OUT32, r_bfe_s, 0},
    {"prmt.b32", LO32 "prmt.b32 %r4, %r1, %r2, %r3;" OUT32, r_prmt, 0},
    {"shf.l.wrap.b32", LO32 "shf.l.wrap.b32 %r4, %r1, %r2, %r3;" OUT32, r_shf_l_wrap, 0},
    {"shf.r.clamp.b32", LO32 "and.b32 %r3, %r3, 63; shf.r.clamp.b32 %r4, %r1, %r2, %r3;" OUT32, r_shf_r_clamp, 0},
    {"setp.lt.s32+selp", LO32 "setp.lt.s32 %p1, %r1, %r2; selp.u32 %r4, 7, 9, %p1;" OUT32, r_setp_lt_s, 0},
    {"setp.hs.u32", LO32 "setp.hs.u32 %p1, %r1, %r2; selp.u32 %r4, 7, 9, %p1;" OUT32, r_setp_hs_u, 0},
    {"setp.ltu.f32", LO32 "setp.ltu.f32 %p1, %r1, %r2; selp.u32 %r4, 7, 9, %p1;" OUT32, r_setp_ltu_f, 1},
    {"setp.gt.and.f32 p|q", LO32 "and.b32 %r3, %r3, 1; setp.ne.u32 %p3, %r3, 0; setp.gt.and.f32 %p1|%p2, %r1, %r2, %p3; "
     "selp.u32 %r5, 1, 0, %p1; selp.u32 %r6, 2, 0, %p2; or.b32 %r4, %r5, %r6;" OUT32, r_setp_gt_and, 1},
    {"cvt.s32.s8", LO32 "cvt.s32.s8 %r4, %r1;" OUT32, r_cvt_s32_s8, 0},
    {"cvt.u8.u32", LO32 "cvt.u8.u32 %r4, %r1;" OUT32, r_cvt_u8_u32, 0},
    {"cvt.sat.s8.s32", LO32 "cvt.sat.s8.s32 %r4, %r1; and.b32 %r4, %r4, 255;" OUT32, r_cvt_sat_s8_s32, 0},
    {"cvt.sat.u16.s32", LO32 "cvt.sat.u16.s32 %r4, %r1;" OUT32, r_cvt_sat_u16_s32, 0},
    {"cvt.rni.s32.f32", LO32 "cvt.rni.s32.f32 %r4, %r1;" OUT32, r_cvt_rni_s32_f32, 1},
    {"cvt.rzi.s32.f32", LO32 "cvt.rzi.s32.f32 %r4, %r1;" OUT32, r_cvt_rzi_s32_f32, 1},
    {"cvt.rmi.s32.f32", LO32 "cvt.rmi.s32.f32 %r4, %r1;" OUT32, r_cvt_rmi_s32_f32, 1},
    {"cvt.rpi.u32.f32", LO32 "cvt.rpi.u32.f32 %r4, %r1;" OUT32, r_cvt_rpi_u32_f32, 1},
    {"cvt.rzi.s64.f64", "cvt.rzi.s64.f64 %rd10, %rd7;", r_cvt_rzi_s64_f64, 2},
    {"cvt.rn.f32.s32", LO32 "cvt.rn.f32.s32 %r4, %r1;" OUT32, r_cvt_rn_f32_s32, 0},
    {"cvt.rn.f32.f64", "cvt.rn.f32.f64 %r4, %rd7;" OUT32, r_cvt_rn_f32_f64, 2},
    {"cvt.f64.f32", LO32 "cvt.f64.f32 %rd10, %r1;", r_cvt_f64_f32, 1},
    {"cvt.rn.bf16.f32", LO32 "cvt.rn.bf16.f32 %h1, %r1; cvt.u32.u16 %r4, %h1;" OUT32, r_cvt_rn_bf16_f32, 1},
    {"cvt.rn.f16.f32", LO32 "cvt.rn.f16.f32 %h1, %r1; cvt.u32.u16 %r4, %h1;" OUT32, r_cvt_rn_f16_f32, 1},
    {"cvt.f32.f16", LO32 "cvt.u16.u32 %h1, %r1; cvt.f32.f16 %r4, %h1;" OUT32, r_cvt_f32_f16, 0},
    {"mov.b32 {0, h}", LO32 "cvt.u16.u32 %h1, %r1; mov.b32 %r4, {0, %h1};" OUT32, r_pack_zero, 0},
    {"mov.b32 {_, h}", LO32 "mov.b32 {_, %h1}, %r1; cvt.u32.u16 %r4, %h1;" OUT32, r_unpack_hi, 0},
    {"add.rz.f32", LO32 "add.rz.f32 %r4, %r1, %r2;" OUT32, r_add_rz, 1},
    {"mul.rm.f32", LO32 "mul.rm.f32 %r4, %r1, %r2;" OUT32, r_mul_rm, 1},
    {"fma.rn.f32", LO32 "fma.rn.f32 %r4, %r1, %r2, %r3;" OUT32, r_fma_rn, 1},
    {"fma.rp.f32", LO32 "fma.rp.f32 %r4, %r1, %r2, %r3;" OUT32, r_fma_rp, 1},
    {"div.rn.f32", LO32 "div.rn.f32 %r4, %r1, %r2;" OUT32, r_div_rn, 1},
    {"sqrt.rn.f32", LO32 "sqrt.rn.f32 %r4, %r1;" OUT32, r_sqrt_rn, 1},
    {"min.f32", LO32 "min.f32 %r4, %r1, %r2;" OUT32, r_min_f, 1},
    {"add.sat.f32", LO32 "add.sat.f32 %r4, %r1, %r2;" OUT32, r_add_sat, 1},
    {"fma.rn.f64", "fma.rn.f64 %rd10, %rd7, %rd8, %rd9;", r_fma_f64, 2},
};

static const uint32_t int_edges[] = {0, 1, 2, 3, 7, 31, 32, 33, 63, 64, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff,
                                     0x10000, 0x7fffffff, 0x80000000u, 0x80000001u, 0xfffffffeu, 0xffffffffu, 12345678};
static const float float_edges[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1.5f, 2.5f, -2.5f, 3.49999f, 1e-40f, -1e-40f,
                                    1e30f, -1e30f, 3e9f, -3e9f, 65504.0f, 65520.0f, 1.0009765625f, 0.1f, 1.0f / 3.0f,
                                    INFINITY, -INFINITY, NAN, 16777217.0f};

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint64_t input(int set, int lane, int which)
{
    int k = (lane + which * 7) % 24;
    bool edge = lane < 48;
    switch (set) {
    case 1: {
        float f = edge ? float_edges[k] : (float)((int64_t)(rng() % 2000001) - 1000000) / (float)(1 + rng() % 1000);
        if (!edge && rng() % 4 == 0)
            f = u2f(rng());
        return f2u(f);
    }
    case 2: {
        double d = edge ? (double)float_edges[k] * (k % 2 ? 1e10 : 1.0) : u2d(rng() % 2 ? rng() : d2u((double)(int64_t)rng() / 3.0));
        return d2u(d);
    }
    case 3: {
        uint32_t v = edge ? int_edges[k] : (uint32_t)rng();
        if (which == 1) {
            if (v == 0)
                v = 3;
            if (v == 0xffffffffu)
                v = 5; /* avoid INT_MIN / -1, undefined in PTX */
        }
        return v;
    }
    default:
        return edge ? int_edges[k] | (which == 2 ? 0 : (uint64_t)int_edges[(k + 5) % 24] << 32) : rng();
    }
}

static char *scalar_ptx(const char *body)
{
    static const char head[] =
        ".version 8.0\n.target sm_80\n.address_size 64\n"
        ".visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd, .param .u32 n)\n{\n"
        ".reg .b64 %rd<16>; .reg .b32 %r<16>; .reg .pred %p<8>; .reg .b16 %h<4>;\n"
        "ld.param.u64 %rd1, [pa]; ld.param.u64 %rd2, [pb]; ld.param.u64 %rd3, [pc]; ld.param.u64 %rd4, [pd];\n"
        "mov.u32 %r10, %tid.x; mov.u32 %r11, %ctaid.x; mov.u32 %r12, %ntid.x; mad.lo.s32 %r10, %r11, %r12, %r10;\n"
        "ld.param.u32 %r11, [n]; setp.ge.u32 %p7, %r10, %r11; @%p7 bra $DONE;\n"
        "mul.wide.u32 %rd5, %r10, 8;\n"
        "add.s64 %rd6, %rd1, %rd5; ld.global.u64 %rd7, [%rd6];\n"
        "add.s64 %rd6, %rd2, %rd5; ld.global.u64 %rd8, [%rd6];\n"
        "add.s64 %rd6, %rd3, %rd5; ld.global.u64 %rd9, [%rd6];\n";
    static const char tail[] = "\nadd.s64 %rd6, %rd4, %rd5; st.global.u64 [%rd6], %rd10;\n$DONE:\nret;\n}\n";
    char *text = malloc(strlen(head) + strlen(body) + strlen(tail) + 1);
    strcpy(text, head);
    strcat(text, body);
    strcat(text, tail);
    return text;
}

static void test_ptx_scalar_instructions_match_host_reference(void **state)
{
    (void)state;
    const int n = LANES - 10;
    CUdeviceptr da, db, dc, dd;
    assert_int_equal(cuMemAlloc_v2(&da, LANES * 8), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&db, LANES * 8), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&dc, LANES * 8), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&dd, LANES * 8), CUDA_SUCCESS);
    int failed = 0;
    for (size_t i = 0; i < sizeof(scalar_cases) / sizeof(scalar_cases[0]); i++) {
        const scalar_case_t *t = &scalar_cases[i];
        uint64_t a[LANES], b[LANES], c[LANES], d[LANES];
        for (int lane = 0; lane < LANES; lane++) {
            a[lane] = input(t->inputs, lane, 0);
            b[lane] = input(t->inputs, lane, 1);
            c[lane] = input(t->inputs, lane, 2);
            d[lane] = 0xdeadbeefdeadbeefull;
        }
        char *ptx = scalar_ptx(t->body);
        CUmodule mod;
        CUresult rc = cuModuleLoadData(&mod, ptx);
        free(ptx);
        if (rc != CUDA_SUCCESS) {
            fprintf(stderr, "%s: load failed: %d\n", t->name, rc);
            failed++;
            continue;
        }
        CUfunction f;
        assert_int_equal(cuModuleGetFunction(&f, mod, "k"), CUDA_SUCCESS);
        assert_int_equal(cuMemcpyHtoD_v2(da, a, sizeof(a)), CUDA_SUCCESS);
        assert_int_equal(cuMemcpyHtoD_v2(db, b, sizeof(b)), CUDA_SUCCESS);
        assert_int_equal(cuMemcpyHtoD_v2(dc, c, sizeof(c)), CUDA_SUCCESS);
        assert_int_equal(cuMemcpyHtoD_v2(dd, d, sizeof(d)), CUDA_SUCCESS);
        unsigned nn = (unsigned)n;
        void *params[] = {&da, &db, &dc, &dd, &nn};
        assert_int_equal(cuLaunchKernel(f, 2, 1, 1, 48, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
        assert_int_equal(cuMemcpyDtoH_v2(d, dd, sizeof(d)), CUDA_SUCCESS);
        for (int lane = 0; lane < LANES; lane++) {
            uint64_t expect = lane < n ? t->ref(a[lane], b[lane], c[lane]) : 0xdeadbeefdeadbeefull;
            uint64_t got = d[lane];
            /* NaN results: any NaN of the right width */
            if (lane < n && (expect == 0x7fffffff || expect == 0x7fff)) {
                if (expect == 0x7fff && (got & 0x7c00) == 0x7c00 && (got & 0x3ff))
                    continue;
                if (expect == 0x7fffffff && isnan(u2f(got)))
                    continue;
            }
            if (lane < n && isnan(u2f(expect)) && t->inputs == 1 && isnan(u2f(got)) && (expect >> 32) == 0 &&
                (got >> 32) == 0)
                continue;
            if (lane < n && t->inputs == 2 && isnan(u2d(expect)) && isnan(u2d(got)))
                continue;
            if (got != expect) {
                fprintf(stderr, "%s lane %d: a=%#llx b=%#llx c=%#llx: got %#llx, expected %#llx\n", t->name, lane,
                        (unsigned long long)a[lane], (unsigned long long)b[lane], (unsigned long long)c[lane],
                        (unsigned long long)got, (unsigned long long)expect);
                failed++;
                break;
            }
        }
        assert_int_equal(cuModuleUnload(mod), CUDA_SUCCESS);
    }
    assert_int_equal(failed, 0);
    cuMemFree_v2(da);
    cuMemFree_v2(db);
    cuMemFree_v2(dc);
    cuMemFree_v2(dd);
}

/* ------------------------------------------------------------------------
 * Whole kernels
 * ------------------------------------------------------------------------ */

static CUfunction load_kernel(const char *ptx, const char *name, CUmodule *mod)
{
    CUfunction f = NULL;
    assert_int_equal(cuModuleLoadData(mod, ptx), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&f, *mod, name), CUDA_SUCCESS);
    return f;
}

/* Warp-wide: out[t*6 + k] for shfl idx with width 8 (c = 0x1807), shfl up
 * 1, shfl bfly 3, vote.ballot of odd values, match.any of v%4, redux add. */
static const char warp_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry warp(.param .u64 in, .param .u64 out)\n{\n"
    ".reg .b64 %rd<8>; .reg .b32 %r<20>; .reg .pred %p<4>;\n"
    "ld.param.u64 %rd1, [in]; ld.param.u64 %rd2, [out];\n"
    "mov.u32 %r1, %tid.x; mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd1, %rd3; ld.global.u32 %r2, [%rd4];\n"
    "mul.lo.u32 %r3, %r1, 24; cvt.u64.u32 %rd5, %r3; add.s64 %rd5, %rd2, %rd5;\n"
    "shfl.sync.idx.b32 %r4, %r2, 5, 0x1807, -1; st.global.u32 [%rd5], %r4;\n"
    "shfl.sync.up.b32 %r4|%p1, %r2, 1, 0, -1; selp.u32 %r5, 1000000, 0, %p1; add.u32 %r4, %r4, %r5; st.global.u32 [%rd5+4], %r4;\n"
    "shfl.sync.bfly.b32 %r4, %r2, 3, 31, -1; st.global.u32 [%rd5+8], %r4;\n"
    "and.b32 %r6, %r2, 1; setp.ne.u32 %p2, %r6, 0; vote.sync.ballot.b32 %r4, %p2, -1; st.global.u32 [%rd5+12], %r4;\n"
    "and.b32 %r7, %r2, 3; match.any.sync.b32 %r4, %r7, -1; st.global.u32 [%rd5+16], %r4;\n"
    "redux.sync.add.u32 %r4, %r2, -1; st.global.u32 [%rd5+20], %r4;\n"
    "ret;\n}\n";

static void test_ptx_warp_instructions(void **state)
{
    (void)state;
    CUmodule mod;
    CUfunction f = load_kernel(warp_ptx, "warp", &mod);
    uint32_t in[32], out[32 * 6];
    for (int i = 0; i < 32; i++)
        in[i] = (uint32_t)(rng() % 1000);
    CUdeviceptr din, dout;
    assert_int_equal(cuMemAlloc_v2(&din, sizeof(in)), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&dout, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoD_v2(din, in, sizeof(in)), CUDA_SUCCESS);
    void *params[] = {&din, &dout};
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(out, dout, sizeof(out)), CUDA_SUCCESS);
    uint32_t ballot = 0, sum = 0;
    for (int i = 0; i < 32; i++) {
        ballot |= (in[i] & 1) << i;
        sum += in[i];
    }
    for (int lane = 0; lane < 32; lane++) {
        /* idx, c = 0x1807: segment mask 0x18, clamp 7: segments of 8 lanes */
        int seg = 0x18, clamp = 7, max_lane = (lane & seg) | (clamp & ~seg), min_lane = lane & seg;
        int j = min_lane | (5 & ~seg);
        assert_int_equal(out[lane * 6 + 0], in[j <= max_lane ? j : lane]);
        assert_int_equal(out[lane * 6 + 1], lane >= 1 ? in[lane - 1] + 1000000 : in[lane]);
        assert_int_equal(out[lane * 6 + 2], in[lane ^ 3]);
        assert_int_equal(out[lane * 6 + 3], ballot);
        uint32_t match = 0;
        for (int k = 0; k < 32; k++)
            match |= (uint32_t)((in[k] & 3) == (in[lane] & 3)) << k;
        assert_int_equal(out[lane * 6 + 4], match);
        assert_int_equal(out[lane * 6 + 5], sum);
    }
    cuMemFree_v2(din);
    cuMemFree_v2(dout);
    cuModuleUnload(mod);
}

/* Shared memory, atomics and a barrier reached on divergent paths: every
 * thread adds tid+1 to a shared counter and atomically to a global one,
 * threads loop a tid-dependent number of times before the barrier, then
 * each writes the shared total; thread 0 also exchanges and CASes. */
static const char shared_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".shared .align 4 .u32 total;\n"
    ".visible .entry shared_atoms(.param .u64 out, .param .u64 g)\n{\n"
    ".reg .b64 %rd<8>; .reg .b32 %r<20>; .reg .pred %p<4>;\n"
    "ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [g];\n"
    "mov.u32 %r1, %tid.x; setp.ne.u32 %p1, %r1, 0; @%p1 bra $L1;\n"
    "st.shared.u32 [total], 0;\n"
    "$L1:\n bar.sync 0;\n"
    "add.u32 %r2, %r1, 1; atom.shared.add.u32 %r3, [total], %r2; red.global.add.u32 [%rd2], %r2;\n"
    "and.b32 %r4, %r1, 7; mov.u32 %r5, 0;\n"
    "$LOOP:\n setp.ge.u32 %p2, %r5, %r4; @%p2 bra $OUT; add.u32 %r5, %r5, 1; bra $LOOP;\n"
    "$OUT:\n bar.sync 0;\n"
    "ld.shared.u32 %r6, [total]; add.u32 %r6, %r6, %r5; sub.u32 %r6, %r6, %r4;\n"
    "mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd1, %rd3; st.global.u32 [%rd4], %r6;\n"
    "@%p1 bra $END;\n"
    "atom.global.exch.b32 %r7, [%rd2+4], 77; atom.global.cas.b32 %r8, [%rd2+8], 5, 9;\n"
    "atom.global.max.s32 %r9, [%rd2+12], -3; atom.global.inc.u32 %r10, [%rd2+16], 2;\n"
    "$END:\n ret;\n}\n";

static void test_ptx_shared_memory_barriers_and_atomics(void **state)
{
    (void)state;
    CUmodule mod;
    CUfunction f = load_kernel(shared_ptx, "shared_atoms", &mod);
    const unsigned threads = 200;
    uint32_t out[200], g[5] = {0, 1, 5, (uint32_t)-7, 2};
    CUdeviceptr dout, dg;
    assert_int_equal(cuMemAlloc_v2(&dout, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&dg, sizeof(g)), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyHtoD_v2(dg, g, sizeof(g)), CUDA_SUCCESS);
    void *params[] = {&dout, &dg};
    assert_int_equal(cuLaunchKernel(f, 3, 1, 1, threads, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(out, dout, sizeof(out)), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(g, dg, sizeof(g)), CUDA_SUCCESS);
    for (unsigned t = 0; t < threads; t++)
        assert_int_equal(out[t], threads * (threads + 1) / 2);
    assert_int_equal(g[0], 3 * threads * (threads + 1) / 2);
    assert_int_equal(g[1], 77);
    assert_int_equal(g[2], 9);
    assert_int_equal((int32_t)g[3], -3);
    assert_int_equal(g[4], 2); /* inc with limit 2, three times: 2 -> 0 -> 1 -> 2 */
    cuMemFree_v2(dout);
    cuMemFree_v2(dg);
    cuModuleUnload(mod);
}

/* A .func with two parameters and a return value, a .local array used
 * through a generic address, and a divergent call. */
static const char call_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".func (.param .b32 ret) combine(.param .b32 x, .param .b64 y)\n{\n"
    ".reg .b32 %r<4>; .reg .b64 %rd<3>;\n"
    "ld.param.b32 %r1, [x]; ld.param.b64 %rd1, [y]; cvt.u32.u64 %r2, %rd1; mad.lo.u32 %r3, %r1, 3, %r2;\n"
    "st.param.b32 [ret], %r3; ret;\n}\n"
    ".visible .entry calls(.param .u64 out)\n{\n"
    ".local .align 4 .b8 depot[32];\n"
    ".reg .b64 %rd<10>; .reg .b32 %r<10>; .reg .pred %p<2>;\n"
    "ld.param.u64 %rd1, [out]; mov.u32 %r1, %tid.x;\n"
    "mov.u64 %rd2, depot; cvta.local.u64 %rd3, %rd2;\n"
    "st.u32 [%rd3+12], %r1; ld.local.u32 %r2, [depot+12];\n"
    "and.b32 %r3, %r1, 1; setp.eq.u32 %p1, %r3, 0; mov.u32 %r5, 0;\n"
    "@%p1 bra $SKIP;\n"
    "{\n .param .b32 param0; st.param.b32 [param0], %r2;\n .param .b64 param1; cvt.u64.u32 %rd4, %r1; "
    "add.u64 %rd4, %rd4, 100; st.param.b64 [param1], %rd4;\n .param .b32 retval0;\n"
    " call.uni (retval0), combine, (param0, param1);\n ld.param.b32 %r5, [retval0];\n}\n"
    "$SKIP:\n mul.wide.u32 %rd5, %r1, 4; add.s64 %rd6, %rd1, %rd5; st.global.u32 [%rd6], %r5;\n ret;\n}\n";

static void test_ptx_calls_and_local_memory(void **state)
{
    (void)state;
    CUmodule mod;
    CUfunction f = load_kernel(call_ptx, "calls", &mod);
    uint32_t out[64];
    CUdeviceptr dout;
    assert_int_equal(cuMemAlloc_v2(&dout, sizeof(out)), CUDA_SUCCESS);
    void *params[] = {&dout};
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(out, dout, sizeof(out)), CUDA_SUCCESS);
    for (uint32_t t = 0; t < 64; t++)
        assert_int_equal(out[t], (t & 1) ? t * 3 + t + 100 : 0);
    cuMemFree_v2(dout);
    cuModuleUnload(mod);
}

/* cuFuncGetParamInfo reports the PTX list's layout, as the real driver. */
static void test_ptx_param_info_follows_entry_list(void **state)
{
    (void)state;
    static const char ptx[] = ".version 8.0\n.target sm_80\n.address_size 64\n"
                              ".visible .entry layout(.param .u32 a, .param .align 8 .b8 s[48], .param .u64 p,\n"
                              "  .param .align 16 .b8 v[16], .param .u8 c, .param .f64 d)\n{\nret;\n}\n";
    CUmodule mod;
    CUfunction f = load_kernel(ptx, "layout", &mod);
    const size_t offsets[] = {0, 8, 56, 64, 80, 88}, sizes[] = {4, 48, 8, 16, 1, 8};
    for (size_t i = 0; i < 6; i++) {
        size_t off = 0, size = 0;
        assert_int_equal(cuFuncGetParamInfo(f, i, &off, &size), CUDA_SUCCESS);
        assert_int_equal(off, offsets[i]);
        assert_int_equal(size, sizes[i]);
    }
    size_t off, size;
    assert_int_equal(cuFuncGetParamInfo(f, 6, &off, &size), CUDA_ERROR_INVALID_VALUE);
    const char *name = NULL;
    assert_int_equal(cuFuncGetName(&name, f), CUDA_SUCCESS);
    assert_string_equal(name, "layout");
    cuModuleUnload(mod);
}

/* An instruction or modifier the interpreter does not know fails the load,
 * never runs. */
static void test_ptx_unknown_instruction_fails_load(void **state)
{
    (void)state;
    static const char unknown_op[] = ".version 8.0\n.target sm_80\n.address_size 64\n"
                                     ".visible .entry k()\n{\n.reg .b32 %r<2>;\nfrobnicate.u32 %r1, 3;\nret;\n}\n";
    static const char unknown_mod[] = ".version 8.0\n.target sm_80\n.address_size 64\n"
                                      ".visible .entry k()\n{\n.reg .b32 %r<2>;\nadd.weird.u32 %r1, %r1, 3;\nret;\n}\n";
    CUmodule mod;
    assert_int_equal(cuModuleLoadData(&mod, unknown_op), CUDA_ERROR_INVALID_PTX);
    assert_int_equal(cuModuleLoadData(&mod, unknown_mod), CUDA_ERROR_INVALID_PTX);
}

/* Module variables: a .global with an initializer and a .const, found by
 * cuModuleGetGlobal and used by a kernel. */
static void test_ptx_module_globals(void **state)
{
    (void)state;
    static const char ptx[] = ".version 8.0\n.target sm_80\n.address_size 64\n"
                              ".global .align 4 .u32 table[4] = {10, 20, 30, 40};\n"
                              ".const .align 8 .u64 scale;\n"
                              ".visible .entry k(.param .u64 out)\n{\n.reg .b64 %rd<6>; .reg .b32 %r<4>;\n"
                              "ld.param.u64 %rd1, [out]; ld.global.u32 %r1, [table+8]; ld.const.u64 %rd2, [scale];\n"
                              "cvt.u64.u32 %rd3, %r1; mul.lo.u64 %rd4, %rd3, %rd2; st.global.u64 [%rd1], %rd4;\nret;\n}\n";
    CUmodule mod;
    CUfunction f = load_kernel(ptx, "k", &mod);
    CUdeviceptr dtable, dscale, dout;
    size_t bytes = 0;
    assert_int_equal(cuModuleGetGlobal_v2(&dtable, &bytes, mod, "table"), CUDA_SUCCESS);
    assert_int_equal(bytes, 16);
    assert_int_equal(cuModuleGetGlobal_v2(&dscale, &bytes, mod, "scale"), CUDA_SUCCESS);
    assert_int_equal(bytes, 8);
    assert_int_equal(cuModuleGetGlobal_v2(&dscale, &bytes, mod, "missing"), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(cuModuleGetGlobal_v2(&dscale, &bytes, mod, "scale"), CUDA_SUCCESS);
    uint64_t scale = 7, out = 0;
    assert_int_equal(cuMemcpyHtoD_v2(dscale, &scale, 8), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&dout, 8), CUDA_SUCCESS);
    void *params[] = {&dout};
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(&out, dout, 8), CUDA_SUCCESS);
    assert_int_equal(out, 30 * 7);
    cuMemFree_v2(dout);
    cuModuleUnload(mod);
}

/* Attributes and occupancy follow the PTX: 40 KiB of static shared memory
 * leaves room for 5 blocks of 256 threads per multiprocessor (228 KiB,
 * 1 KiB reserved per block), clusters of 2 fit 8 GPCs of 16. The largest
 * opt-in block (227 KiB of dynamic shared memory plus the reserved 1 KiB)
 * fits exactly once, as cuBLAS's cluster discovery expects. */
static void test_ptx_attributes_and_occupancy(void **state)
{
    (void)state;
    static const char ptx[] = ".version 8.0\n.target sm_86\n.address_size 64\n"
                              ".shared .align 4 .b8 tile[40960];\n"
                              ".visible .entry k(.param .u64 p)\n.reqntid 256, 1, 1\n{\n.reg .b32 %r<2>;\n"
                              "st.shared.u32 [tile], 1;\nret;\n}\n";
    CUmodule mod;
    CUfunction f = load_kernel(ptx, "k", &mod);
    int value = 0;
    assert_int_equal(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f), CUDA_SUCCESS);
    assert_int_equal(value, 40960);
    assert_int_equal(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_PTX_VERSION, f), CUDA_SUCCESS);
    assert_int_equal(value, 86);
    assert_int_equal(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f), CUDA_SUCCESS);
    assert_int_equal(value, 256);
    int blocks = 0;
    assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0), CUDA_SUCCESS);
    assert_int_equal(blocks, 233472 / (40960 + 1024));
    size_t available = 0;
    assert_int_equal(cuOccupancyAvailableDynamicSMemPerBlock(&available, f, 1, 256), CUDA_SUCCESS);
    int largest = 0;
    assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessor(&largest, f, 256, available), CUDA_SUCCESS);
    assert_int_equal(largest, 1);
    assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessor(&largest, f, 256, available + 1), CUDA_SUCCESS);
    assert_int_equal(largest, 0);
    CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
    attr.value.clusterDim.x = 2;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    CUlaunchConfig config = {.gridDimX = 8, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 256, .blockDimY = 1,
                             .blockDimZ = 1, .attrs = &attr, .numAttrs = 1};
    int clusters = 0;
    assert_int_equal(cuOccupancyMaxActiveClusters(&clusters, f, &config), CUDA_SUCCESS);
    assert_int_equal(clusters, 8 * (16 * blocks / 2));
    cuModuleUnload(mod);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ptx_scalar_instructions_match_host_reference),
        cmocka_unit_test(test_ptx_warp_instructions),
        cmocka_unit_test(test_ptx_shared_memory_barriers_and_atomics),
        cmocka_unit_test(test_ptx_calls_and_local_memory),
        cmocka_unit_test(test_ptx_param_info_follows_entry_list),
        cmocka_unit_test(test_ptx_unknown_instruction_fails_load),
        cmocka_unit_test(test_ptx_module_globals),
        cmocka_unit_test(test_ptx_attributes_and_occupancy),
    };
    return cmocka_run_group_tests_name("simcuda PTX interpreter", tests, setup, NULL);
}

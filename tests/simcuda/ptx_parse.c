/* ptx_parse.c: PTX text to `ptx_module_t`.
 *
 * Handles what nvcc and NVRTC emit: module directives, .global/.const/
 * .shared variables with numeric initialisers, .entry and .func with their
 * parameter lists, .reg/.local/.shared/.param declarations in bodies (also
 * inside `{ }` scopes, as call sequences and inline asm use them), labels,
 * guarded instructions and every operand form. Registers are numbered per
 * function on first use; `ptx_link` then gives each function a fixed base
 * from the call graph so a call needs no register save.
 * Entry point: `ptx_parse`.
 */
#include "ptx.h"

int ptx_link(ptx_module_t *m, char *err, size_t errlen);

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ptx_op_names[PO_COUNT] = {
    [PO_INVALID] = "?",
#define PTX_OP_NAME(name) [PO_##name] = #name,
    PTX_OPCODES(PTX_OP_NAME)
#undef PTX_OP_NAME
};

typedef struct parser_s {
    const char *p, *end;
    int line;
    ptx_module_t *m;
    char *err;
    size_t errlen;
    bool failed;
    /* per function */
    ptx_func_t *f;
    char **regs; /* names of this function's registers */
    size_t nregs, cap_regs;
    int *reg_hash;  /* open addressing over `regs`: index + 1, 0 empty */
    size_t reg_hash_size;
    size_t scope_mark[64];
    int depth;
    /* labels to resolve */
    struct { char *name; size_t insn; int opnd; int line; } *fix;
    size_t nfix, cap_fix;
    struct { char *name; size_t at; } *labels;
    size_t nlabels, cap_labels;
    /* calls to resolve after the whole module is read */
} parser_t;

static void fail(parser_t *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(parser_t *ps, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = true;
    int n = snprintf(ps->err, ps->errlen, "PTX line %d: ", ps->line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < ps->errlen)
        vsnprintf(ps->err + n, ps->errlen - n, fmt, ap);
    va_end(ap);
}

#define GROW(arr, count, cap)                                                                              \
    do {                                                                                                   \
        if ((count) == (cap)) {                                                                            \
            size_t ncap_ = (cap) ? (cap) * 2 : 16;                                                         \
            void *np_ = realloc((arr), ncap_ * sizeof(*(arr)));                                            \
            if (np_ == NULL)                                                                               \
                abort();                                                                                   \
            memset((char *)np_ + (cap) * sizeof(*(arr)), 0, (ncap_ - (cap)) * sizeof(*(arr)));            \
            (arr) = np_;                                                                                   \
            (cap) = ncap_;                                                                                 \
        }                                                                                                  \
    } while (0)

/* ------------------------------------------------------------------------
 * Lexing
 * ------------------------------------------------------------------------ */

static void skip_space(parser_t *ps)
{
    for (;;) {
        while (ps->p < ps->end && isspace((unsigned char)*ps->p)) {
            if (*ps->p == '\n')
                ps->line++;
            ps->p++;
        }
        if (ps->p + 1 < ps->end && ps->p[0] == '/' && ps->p[1] == '/') {
            while (ps->p < ps->end && *ps->p != '\n')
                ps->p++;
            continue;
        }
        if (ps->p + 1 < ps->end && ps->p[0] == '/' && ps->p[1] == '*') {
            ps->p += 2;
            while (ps->p + 1 < ps->end && !(ps->p[0] == '*' && ps->p[1] == '/')) {
                if (*ps->p == '\n')
                    ps->line++;
                ps->p++;
            }
            ps->p += 2;
            continue;
        }
        break;
    }
}

static bool is_ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '%' || c == '.' || c == ':';
}

/* A word: identifier, directive, register, number (no whitespace inside). */
static size_t word(parser_t *ps, char *out, size_t cap)
{
    skip_space(ps);
    size_t n = 0;
    while (ps->p < ps->end && is_ident_char(*ps->p)) {
        if (n + 1 < cap)
            out[n++] = *ps->p;
        ps->p++;
    }
    out[n] = '\0';
    return n;
}

static bool accept(parser_t *ps, char c)
{
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    return false;
}

static void expect(parser_t *ps, char c)
{
    if (!accept(ps, c))
        fail(ps, "expected '%c'", c);
}

static void skip_line(parser_t *ps)
{
    while (ps->p < ps->end && *ps->p != '\n')
        ps->p++;
}

/* Skips to just past the next ';' at this nesting level. */
static void skip_statement(parser_t *ps)
{
    while (ps->p < ps->end && *ps->p != ';') {
        if (*ps->p == '\n')
            ps->line++;
        ps->p++;
    }
    if (ps->p < ps->end)
        ps->p++;
}

static ptx_type_t type_from(const char *s)
{
    static const struct { const char *n; ptx_type_t t; } types[] = {
        {"u8", PT_U8}, {"u16", PT_U16}, {"u32", PT_U32}, {"u64", PT_U64}, {"s8", PT_S8}, {"s16", PT_S16},
        {"s32", PT_S32}, {"s64", PT_S64}, {"b8", PT_B8}, {"b16", PT_B16}, {"b32", PT_B32}, {"b64", PT_B64},
        {"b128", PT_B128}, {"f16", PT_F16}, {"f16x2", PT_F16X2}, {"bf16", PT_BF16}, {"bf16x2", PT_BF16X2},
        {"f32", PT_F32}, {"f64", PT_F64}, {"pred", PT_PRED},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(s, types[i].n) == 0)
            return types[i].t;
    return PT_NONE;
}

static unsigned type_size(ptx_type_t t)
{
    switch (t) {
    case PT_U8: case PT_S8: case PT_B8: return 1;
    case PT_U16: case PT_S16: case PT_B16: case PT_F16: case PT_BF16: return 2;
    case PT_U32: case PT_S32: case PT_B32: case PT_F32: case PT_F16X2: case PT_BF16X2: return 4;
    case PT_U64: case PT_S64: case PT_B64: case PT_F64: return 8;
    case PT_B128: return 16;
    default: return 1;
    }
}

/* ------------------------------------------------------------------------
 * Symbols and registers
 * ------------------------------------------------------------------------ */

static int add_sym(parser_t *ps, const char *name, ptx_space_t space, uint64_t offset, uint64_t size,
                   uint64_t align, int global_index)
{
    ptx_func_t *f = ps->f;
    GROW(f->syms, f->nsyms, f->cap_syms);
    ptx_sym_t *s = &f->syms[f->nsyms];
    s->name = strdup(name);
    s->space = space;
    s->offset = offset;
    s->size = size;
    s->align = align;
    s->global_index = global_index;
    return (int)f->nsyms++;
}

static int find_sym(parser_t *ps, const char *name)
{
    ptx_func_t *f = ps->f;
    for (size_t i = f->nsyms; i-- > 0;)
        if (f->syms[i].name != NULL && strcmp(f->syms[i].name, name) == 0)
            return (int)i;
    /* module-level: globals, then shared */
    for (size_t i = 0; i < ps->m->nglobals; i++)
        if (strcmp(ps->m->globals[i].name, name) == 0)
            return add_sym(ps, name, ps->m->globals[i].space, 0, ps->m->globals[i].size, ps->m->globals[i].align,
                           (int)i);
    for (size_t i = 0; i < ps->m->nshared; i++) {
        ptx_sym_t *s = &ps->m->shared_syms[i];
        if (strcmp(s->name, name) == 0) {
            int idx = add_sym(ps, name, PS_SHARED, s->offset, s->size, s->align, PTX_SYM_MODULE_SHARED);
            f->syms[idx].is_extern_shared = s->is_extern_shared;
            return idx;
        }
    }
    return -1;
}

static size_t name_hash(const char *name)
{
    size_t h = 1469598103934665603ull;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h;
}

static void reg_hash_insert(parser_t *ps, size_t index)
{
    size_t mask = ps->reg_hash_size - 1, h = name_hash(ps->regs[index]) & mask;
    while (ps->reg_hash[h] != 0)
        h = (h + 1) & mask;
    ps->reg_hash[h] = (int)index + 1;
}

/* -1 when the function has no register of that name. */
static int reg_lookup(parser_t *ps, const char *name)
{
    if (ps->reg_hash_size == 0)
        return -1;
    size_t mask = ps->reg_hash_size - 1, h = name_hash(name) & mask;
    while (ps->reg_hash[h] != 0) {
        int i = ps->reg_hash[h] - 1;
        if (strcmp(ps->regs[i], name) == 0)
            return i;
        h = (h + 1) & mask;
    }
    return -1;
}

static int reg_index(parser_t *ps, const char *name)
{
    int found = reg_lookup(ps, name);
    if (found >= 0)
        return found;
    GROW(ps->regs, ps->nregs, ps->cap_regs);
    ps->regs[ps->nregs] = strdup(name);
    if ((ps->nregs + 1) * 2 > ps->reg_hash_size) {
        size_t size = ps->reg_hash_size ? ps->reg_hash_size * 2 : 256;
        free(ps->reg_hash);
        ps->reg_hash = calloc(size, sizeof(int));
        if (ps->reg_hash == NULL)
            abort();
        ps->reg_hash_size = size;
        for (size_t i = 0; i < ps->nregs; i++)
            reg_hash_insert(ps, i);
    }
    reg_hash_insert(ps, ps->nregs);
    return (int)ps->nregs++;
}

static bool is_declared_reg(parser_t *ps, const char *name)
{
    return reg_lookup(ps, name) >= 0;
}

static const struct { const char *n; ptx_sreg_t r; } sregs[] = {
    {"%tid.x", SR_TID_X}, {"%tid.y", SR_TID_Y}, {"%tid.z", SR_TID_Z},
    {"%ntid.x", SR_NTID_X}, {"%ntid.y", SR_NTID_Y}, {"%ntid.z", SR_NTID_Z},
    {"%ctaid.x", SR_CTAID_X}, {"%ctaid.y", SR_CTAID_Y}, {"%ctaid.z", SR_CTAID_Z},
    {"%nctaid.x", SR_NCTAID_X}, {"%nctaid.y", SR_NCTAID_Y}, {"%nctaid.z", SR_NCTAID_Z},
    {"%laneid", SR_LANEID}, {"%warpid", SR_WARPID}, {"%nwarpid", SR_NWARPID}, {"%smid", SR_SMID},
    {"%nsmid", SR_NSMID}, {"%gridid", SR_GRIDID}, {"%lanemask_eq", SR_LANEMASK_EQ},
    {"%lanemask_le", SR_LANEMASK_LE}, {"%lanemask_lt", SR_LANEMASK_LT}, {"%lanemask_ge", SR_LANEMASK_GE},
    {"%lanemask_gt", SR_LANEMASK_GT}, {"%clock", SR_CLOCK}, {"%clock64", SR_CLOCK64},
    {"%globaltimer", SR_GLOBALTIMER}, {"%globaltimer_lo", SR_GLOBALTIMER_LO},
    {"%dynamic_smem_size", SR_DYN_SMEM}, {"%total_smem_size", SR_TOTAL_SMEM},
    {"%clusterid.x", SR_CLUSTERID_X}, {"%clusterid.y", SR_CLUSTERID_Y}, {"%clusterid.z", SR_CLUSTERID_Z},
    {"%nclusterid.x", SR_NCLUSTERID_X}, {"%nclusterid.y", SR_NCLUSTERID_Y}, {"%nclusterid.z", SR_NCLUSTERID_Z},
    {"%cluster_ctaid.x", SR_CLUSTER_CTAID_X}, {"%cluster_ctaid.y", SR_CLUSTER_CTAID_Y},
    {"%cluster_ctaid.z", SR_CLUSTER_CTAID_Z}, {"%cluster_nctaid.x", SR_CLUSTER_NCTAID_X},
    {"%cluster_nctaid.y", SR_CLUSTER_NCTAID_Y}, {"%cluster_nctaid.z", SR_CLUSTER_NCTAID_Z},
    {"%cluster_ctarank", SR_CLUSTER_CTARANK}, {"%cluster_nctarank", SR_CLUSTER_NCTARANK},
    {"%is_explicit_cluster", SR_IS_EXPLICIT_CLUSTER},
};

/* ------------------------------------------------------------------------
 * Numbers
 * ------------------------------------------------------------------------ */

static bool parse_number(const char *s, uint64_t *out)
{
    char *endp;
    bool neg = false;
    if (*s == '-') {
        neg = true;
        s++;
    }
    if ((s[0] == '0') && (s[1] == 'f' || s[1] == 'F') && strlen(s) == 10) {
        *out = strtoull(s + 2, &endp, 16);
        if (neg)
            *out ^= 0x80000000u;
        return *endp == '\0';
    }
    if ((s[0] == '0') && (s[1] == 'd' || s[1] == 'D') && strlen(s) == 18) {
        *out = strtoull(s + 2, &endp, 16);
        if (neg)
            *out ^= 0x8000000000000000ull;
        return *endp == '\0';
    }
    if (!isdigit((unsigned char)s[0]))
        return false;
    if (strchr(s, '.') != NULL || ((strchr(s, 'e') || strchr(s, 'E')) && !(s[0] == '0' && (s[1] == 'x' || s[1] == 'X')))) {
        double d = strtod(s, &endp);
        if (neg)
            d = -d;
        memcpy(out, &d, sizeof(d));
        return *endp == '\0';
    }
    errno = 0;
    uint64_t v;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        v = strtoull(s + 2, &endp, 16);
    else if (s[0] == '0' && (s[1] == 'b' || s[1] == 'B'))
        v = strtoull(s + 2, &endp, 2);
    else if (s[0] == '0' && s[1] != '\0' && isdigit((unsigned char)s[1]))
        v = strtoull(s + 1, &endp, 8);
    else
        v = strtoull(s, &endp, 10);
    if (*endp == 'U' || *endp == 'u')
        endp++;
    *out = neg ? (uint64_t)(-(int64_t)v) : v;
    return *endp == '\0';
}

/* ------------------------------------------------------------------------
 * Operands
 * ------------------------------------------------------------------------ */

/* `sym+off`, `sym`, `%r+off`, `off` inside brackets, or a plain term. */
static void parse_address(parser_t *ps, ptx_opnd_t *o)
{
    char w[1024];
    o->kind = PK_ADDR;
    o->reg = -1;
    o->sym = -1;
    o->imm = 0;
    skip_space(ps);
    if (ps->p < ps->end && (isdigit((unsigned char)*ps->p) || *ps->p == '-')) {
        char num[64];
        size_t n = 0;
        if (*ps->p == '-')
            num[n++] = *ps->p++;
        while (ps->p < ps->end && isalnum((unsigned char)*ps->p) && n < 63)
            num[n++] = *ps->p++;
        num[n] = '\0';
        if (!parse_number(num, &o->imm))
            fail(ps, "bad address '%s'", num);
        expect(ps, ']');
        return;
    }
    word(ps, w, sizeof(w));
    if (w[0] == '%' || is_declared_reg(ps, w)) {
        o->reg = reg_index(ps, w);
    } else {
        o->sym = find_sym(ps, w);
        if (o->sym < 0)
            fail(ps, "unknown symbol '%s'", w);
    }
    skip_space(ps);
    if (accept(ps, '+')) {
        char num[64];
        bool negative = accept(ps, '-');
        word(ps, num, sizeof(num));
        if (!parse_number(num, &o->imm))
            fail(ps, "bad offset '%s'", num);
        if (negative)
            o->imm = (uint64_t)(-(int64_t)o->imm);
    } else if (ps->p < ps->end && *ps->p == '-') {
        ps->p++;
        char num[64];
        word(ps, num, sizeof(num));
        uint64_t v;
        if (!parse_number(num, &v))
            fail(ps, "bad offset '%s'", num);
        o->imm = (uint64_t)(-(int64_t)v);
    }
    expect(ps, ']');
}

static void parse_operand(parser_t *ps, ptx_insn_t *in, ptx_opnd_t *o)
{
    char w[1024];
    memset(o, 0, sizeof(*o));
    o->reg = -1;
    o->sym = -1;
    skip_space(ps);
    if (accept(ps, '[')) {
        parse_address(ps, o);
        return;
    }
    if (accept(ps, '{')) {
        o->kind = PK_VEC;
        do {
            word(ps, w, sizeof(w));
            if (o->vec_count >= 8) {
                fail(ps, "vector too long");
                return;
            }
            o->vec[o->vec_count++] = strcmp(w, "_") == 0 ? -1 : reg_index(ps, w);
        } while (accept(ps, ','));
        expect(ps, '}');
        return;
    }
    if (accept(ps, '(')) { /* call lists */
        o->kind = PK_LIST;
        if (accept(ps, ')'))
            return;
        do {
            word(ps, w, sizeof(w));
            if (o->vec_count >= 8) {
                fail(ps, "too many call arguments");
                return;
            }
            int s = find_sym(ps, w);
            if (s < 0)
                fail(ps, "unknown call parameter '%s'", w);
            o->vec[o->vec_count++] = s;
        } while (accept(ps, ','));
        expect(ps, ')');
        return;
    }
    if (accept(ps, '!'))
        o->neg = 1;
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == '-' && ps->p + 1 < ps->end && !isdigit((unsigned char)ps->p[1])) {
        fail(ps, "negated operand not supported");
        return;
    }
    size_t n = 0;
    if (ps->p < ps->end && *ps->p == '-')
        w[n++] = *ps->p++;
    while (ps->p < ps->end && (is_ident_char(*ps->p) || *ps->p == '+') && n + 1 < sizeof(w)) {
        if (*ps->p == '+' && !(n > 0 && (w[n - 1] == 'e' || w[n - 1] == 'E') && isdigit((unsigned char)w[0])))
            break;
        w[n++] = *ps->p++;
    }
    w[n] = '\0';
    if (strcmp(w, "_") == 0) {
        o->kind = PK_SINK;
        return;
    }
    if (w[0] == '%') {
        for (size_t i = 0; i < sizeof(sregs) / sizeof(sregs[0]); i++) {
            if (strcmp(w, sregs[i].n) == 0) {
                o->kind = PK_SREG;
                o->sreg = sregs[i].r;
                return;
            }
        }
        /* %envregN and other unknown specials */
        if (strncmp(w, "%envreg", 7) == 0 || strncmp(w, "%pm", 3) == 0) {
            fail(ps, "special register '%s' not supported", w);
            return;
        }
        o->kind = PK_REG;
        o->reg = reg_index(ps, w);
        /* setp's second destination: %p|%q */
        return;
    }
    if (w[0] != '\0' && !isdigit((unsigned char)w[0]) && w[0] != '-' && is_declared_reg(ps, w)) {
        o->kind = PK_REG;
        o->reg = reg_index(ps, w);
        return;
    }
    uint64_t v;
    if (parse_number(w, &v)) {
        o->kind = PK_IMM;
        o->imm = v;
        /* decimal float literals are doubles; f32 users convert */
        if (strchr(w, '.') != NULL && in->type == PT_F32) {
            double d;
            memcpy(&d, &v, sizeof(d));
            float fl = (float)d;
            uint32_t b;
            memcpy(&b, &fl, 4);
            o->imm = b;
        }
        return;
    }
    /* a symbol or a label */
    int s = find_sym(ps, w);
    if (s >= 0) {
        o->kind = PK_SYM;
        o->sym = s;
        skip_space(ps);
        if (accept(ps, '+')) {
            char num[64];
            word(ps, num, sizeof(num));
            parse_number(num, &o->imm);
        }
        return;
    }
    if (w[0] == '\0') {
        fail(ps, "missing operand");
        return;
    }
    o->kind = PK_LABEL; /* resolved later: label or function */
    GROW(ps->fix, ps->nfix, ps->cap_fix);
    ps->fix[ps->nfix].name = strdup(w);
    ps->fix[ps->nfix].insn = ps->f->ninsns;
    ps->fix[ps->nfix].opnd = (int)(o - in->o);
    ps->fix[ps->nfix].line = ps->line;
    ps->nfix++;
}

/* ------------------------------------------------------------------------
 * Instructions
 * ------------------------------------------------------------------------ */

static bool apply_modifier(parser_t *ps, ptx_insn_t *in, const char *mod, int *ntypes)
{
    static const struct { const char *n; uint32_t flag; } flags[] = {
        {"wide", PM_WIDE}, {"sat", PM_SAT}, {"ftz", PM_FTZ}, {"approx", PM_APPROX}, {"to", PM_TO},
        {"cc", PM_CC}, {"uni", PM_UNI}, {"sync", PM_SYNC}, {"shiftamt", PM_SHIFTAMT}, {"clamp", PM_CLAMP},
        {"wrap", PM_WRAP}, {"l", PM_L}, {"r", PM_R}, {"full", PM_FULL}, {"relu", PM_RELU},
        {"arrive", PM_ARRIVE}, {"red", PM_RED}, {"NaN", PM_NAN}, {"xorsign", PM_XORSIGN}, {"abs", PM_ABS},
        {"noinc", PM_NOINC},
    };
    static const char *const ignored[] = {
        "ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "volatile", "relaxed", "acquire", "release",
        "acq_rel", "sc", "cta", "gpu", "sys", "cluster", "aligned", "weak", "mmio", "L1", "L2", "unified",
        "noftz", "v8", "trunc", "mask", "global_mask",
    };
    static const struct { const char *n; ptx_space_t s; } spaces[] = {
        {"global", PS_GLOBAL}, {"shared", PS_SHARED}, {"local", PS_LOCAL}, {"const", PS_CONST},
        {"param", PS_PARAM}, {"generic", PS_GENERIC},
    };
    static const struct { const char *n; ptx_round_t r; } rounds[] = {
        {"rn", PR_RN}, {"rz", PR_RZ}, {"rm", PR_RM}, {"rp", PR_RP}, {"rna", PR_RNA}, {"rni", PR_RNI},
        {"rzi", PR_RZI}, {"rmi", PR_RMI}, {"rpi", PR_RPI},
    };
    static const struct { const char *n; ptx_cmp_t c; } cmps[] = {
        {"eq", PC_EQ}, {"ne", PC_NE}, {"lt", PC_LT}, {"le", PC_LE}, {"gt", PC_GT}, {"ge", PC_GE},
        {"ls", PC_LS}, {"hs", PC_HS}, {"equ", PC_EQU}, {"neu", PC_NEU}, {"ltu", PC_LTU}, {"leu", PC_LEU},
        {"gtu", PC_GTU}, {"geu", PC_GEU}, {"num", PC_NUM}, {"nan", PC_NAN},
    };
    static const struct { const char *n; ptx_sub_t s; } subs[] = {
        {"add", PSUB_ADD}, {"min", PSUB_MIN}, {"max", PSUB_MAX}, {"inc", PSUB_INC}, {"dec", PSUB_DEC},
        {"cas", PSUB_CAS}, {"exch", PSUB_EXCH}, {"and", PSUB_AND}, {"or", PSUB_OR}, {"xor", PSUB_XOR},
        {"up", PSUB_UP}, {"down", PSUB_DOWN}, {"bfly", PSUB_BFLY}, {"idx", PSUB_IDX}, {"all", PSUB_VALL},
        {"any", PSUB_VANY}, {"ballot", PSUB_VBALLOT}, {"f4e", PSUB_F4E}, {"b4e", PSUB_B4E},
        {"rc8", PSUB_RC8}, {"ecl", PSUB_ECL}, {"ecr", PSUB_ECR}, {"rc16", PSUB_RC16},
    };
    ptx_op_t op = in->op;
    ptx_type_t t = type_from(mod);
    if (t != PT_NONE) {
        if (*ntypes == 0)
            in->type = t;
        else
            in->type2 = t;
        (*ntypes)++;
        return true;
    }
    /* lo/hi: comparison for setp/set, half selection elsewhere */
    if (strcmp(mod, "lo") == 0 || strcmp(mod, "hi") == 0) {
        if (op == PO_setp || op == PO_set)
            in->cmp = mod[0] == 'l' ? PC_LO : PC_HI;
        else
            in->mods |= mod[0] == 'l' ? PM_LO : PM_HI;
        return true;
    }
    if ((op == PO_setp || op == PO_set) && in->cmp != PC_NONE &&
        (strcmp(mod, "and") == 0 || strcmp(mod, "or") == 0 || strcmp(mod, "xor") == 0)) {
        in->boolop = mod[0] == 'a' ? PSUB_AND : mod[0] == 'o' ? PSUB_OR : PSUB_XOR;
        return true;
    }
    if (op == PO_vote && strcmp(mod, "uni") == 0) {
        in->sub = PSUB_VUNI;
        return true;
    }
    if (op == PO_setp || op == PO_set || op == PO_testp) {
        for (size_t i = 0; i < sizeof(cmps) / sizeof(cmps[0]); i++)
            if (strcmp(mod, cmps[i].n) == 0) {
                in->cmp = cmps[i].c;
                return true;
            }
        if (op == PO_testp) {
            static const char *const props[] = {"finite", "infinite", "number", "notanumber", "normal", "subnormal"};
            for (size_t i = 0; i < 6; i++)
                if (strcmp(mod, props[i]) == 0) {
                    in->cmp = (uint8_t)(i + 1);
                    return true;
                }
        }
    }
    if (op == PO_bar || op == PO_barrier) {
        if (strcmp(mod, "sync") == 0 || strcmp(mod, "arrive") == 0 || strcmp(mod, "red") == 0 ||
            strcmp(mod, "warp") == 0) {
            if (strcmp(mod, "arrive") == 0)
                in->mods |= PM_ARRIVE;
            else if (strcmp(mod, "red") == 0)
                in->mods |= PM_RED;
            else if (strcmp(mod, "warp") == 0)
                in->mods |= PM_WRAP; /* bar.warp.sync */
            return true;
        }
        if (strcmp(mod, "popc") == 0) {
            in->sub = PSUB_ADD;
            return true;
        }
        if (strcmp(mod, "and") == 0 || strcmp(mod, "or") == 0) {
            in->sub = mod[0] == 'a' ? PSUB_AND : PSUB_OR;
            return true;
        }
    }
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        if (strcmp(mod, subs[i].n) == 0) {
            in->sub = subs[i].s;
            return true;
        }
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        if (strcmp(mod, flags[i].n) == 0) {
            in->mods |= flags[i].flag;
            return true;
        }
    for (size_t i = 0; i < sizeof(spaces) / sizeof(spaces[0]); i++)
        if (strcmp(mod, spaces[i].n) == 0) {
            in->space = spaces[i].s;
            return true;
        }
    if (strncmp(mod, "shared::", 8) == 0) {
        in->space = PS_SHARED;
        if (strcmp(mod + 8, "cta") != 0) {
            fail(ps, "state space '%s' not supported", mod);
            return false;
        }
        return true;
    }
    for (size_t i = 0; i < sizeof(rounds) / sizeof(rounds[0]); i++)
        if (strcmp(mod, rounds[i].n) == 0) {
            in->round = rounds[i].r;
            return true;
        }
    if (strcmp(mod, "v2") == 0 || strcmp(mod, "v4") == 0) {
        in->vec = (uint8_t)(mod[1] - '0');
        return true;
    }
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        if (strcmp(mod, ignored[i]) == 0)
            return true;
    /* cache hints and eviction priorities: L1::no_allocate, L2::128B, ... */
    if (strncmp(mod, "L1::", 4) == 0 || strncmp(mod, "L2::", 4) == 0 || strncmp(mod, "level::", 7) == 0)
        return true;
    fail(ps, "modifier '.%s' of '%s' not supported", mod, ptx_op_names[op]);
    return false;
}

static void parse_instruction(parser_t *ps, const char *first)
{
    ptx_func_t *f = ps->f;
    GROW(f->insns, f->ninsns, f->cap_insns);
    ptx_insn_t *in = &f->insns[f->ninsns];
    memset(in, 0, sizeof(*in));
    in->guard = -1;
    in->vec = 1;
    in->line = ps->line;
    char opword[1024];
    if (first[0] == '@') {
        const char *g = first + 1;
        if (*g == '!') {
            in->guard_neg = true;
            g++;
        }
        in->guard = reg_index(ps, g);
        word(ps, opword, sizeof(opword));
    } else {
        snprintf(opword, sizeof(opword), "%s", first);
    }
    /* opcode, then modifiers split on '.'; "::" stays inside a modifier */
    char *save = opword;
    char *dot = strchr(opword, '.');
    if (dot)
        *dot = '\0';
    in->op = PO_INVALID;
    for (int i = 1; i < PO_COUNT; i++)
        if (strcmp(save, ptx_op_names[i]) == 0) {
            in->op = (uint16_t)i;
            break;
        }
    if (in->op == PO_INVALID) {
        fail(ps, "instruction '%s' not supported", save);
        return;
    }
    int ntypes = 0;
    char *mod = dot ? dot + 1 : NULL;
    while (mod != NULL && !ps->failed) {
        char *next = mod;
        for (;;) {
            next = strchr(next, '.');
            if (next == NULL || !(next > mod && next[-1] == ':'))
                break;
            next++;
        }
        if (next)
            *next = '\0';
        if (*mod)
            apply_modifier(ps, in, mod, &ntypes);
        mod = next ? next + 1 : NULL;
    }
    if (in->op == PO_cvt && ntypes == 2) {
        /* cvt.dtype.atype: keep type = destination, type2 = source */
    }
    /* operands */
    skip_space(ps);
    while (!ps->failed && ps->p < ps->end && *ps->p != ';') {
        if (in->nopnd >= PTX_MAX_OPNDS) {
            fail(ps, "too many operands");
            return;
        }
        ptx_opnd_t *o = &in->o[in->nopnd++];
        parse_operand(ps, in, o);
        skip_space(ps);
        if (ps->p < ps->end && *ps->p == '|') { /* setp p|q */
            ps->p++;
            ptx_opnd_t *q = &in->o[in->nopnd++];
            parse_operand(ps, in, q);
            in->mods |= PM_ALL; /* marks the second destination */
        }
        if (!accept(ps, ','))
            break;
    }
    expect(ps, ';');
    f->ninsns++;
}

/* ------------------------------------------------------------------------
 * Declarations
 * ------------------------------------------------------------------------ */

typedef struct decl_s {
    ptx_space_t space;
    uint64_t align;
    ptx_type_t type;
    char name[1024];
    uint64_t count; /* array elements (1 for scalars), 0 for [] */
    bool is_array, is_extern;
} decl_t;

/* After the space word: [.align N] [.v2/.v4] .type name[N][= init]. */
static void parse_decl(parser_t *ps, decl_t *d)
{
    char w[1024];
    d->align = 0;
    d->type = PT_NONE;
    unsigned vec = 1;
    for (;;) {
        word(ps, w, sizeof(w));
        if (strcmp(w, ".align") == 0) {
            char num[32];
            word(ps, num, sizeof(num));
            d->align = strtoull(num, NULL, 10);
            continue;
        }
        if (strcmp(w, ".v2") == 0 || strcmp(w, ".v4") == 0) {
            vec = (unsigned)(w[2] - '0');
            continue;
        }
        if (strcmp(w, ".ptr") == 0 || strcmp(w, ".global") == 0 || strcmp(w, ".shared") == 0 ||
            strcmp(w, ".const") == 0 || strcmp(w, ".local") == 0 || strcmp(w, ".attribute") == 0)
            continue;
        if (w[0] == '.' && type_from(w + 1) != PT_NONE) {
            d->type = type_from(w + 1);
            continue;
        }
        break;
    }
    snprintf(d->name, sizeof(d->name), "%s", w);
    uint64_t esize = type_size(d->type) * vec;
    if (d->align == 0)
        d->align = esize;
    d->count = 1;
    d->is_array = false;
    while (accept(ps, '[')) {
        d->is_array = true;
        char num[32];
        word(ps, num, sizeof(num));
        if (num[0] == '\0')
            d->count = 0;
        else
            d->count *= strtoull(num, NULL, 10);
        expect(ps, ']');
    }
    d->count *= esize; /* now in bytes */
    if (d->type == PT_NONE)
        fail(ps, "declaration of '%s' without a type", d->name);
}

static void parse_initializer(parser_t *ps, ptx_global_t *g, ptx_type_t type)
{
    unsigned esize = type_size(type);
    g->init = calloc(1, g->size ? g->size : 1);
    size_t at = 0;
    bool braced = accept(ps, '{');
    do {
        if (accept(ps, '{')) { /* nested arrays */
            continue;
        }
        char w[128];
        word(ps, w, sizeof(w));
        uint64_t v;
        if (!parse_number(w, &v)) {
            fail(ps, "initializer '%s' of '%s' not supported", w, g->name);
            return;
        }
        if (type == PT_F32 && strchr(w, '.') != NULL) {
            double dd;
            memcpy(&dd, &v, 8);
            float fl = (float)dd;
            uint32_t b;
            memcpy(&b, &fl, 4);
            v = b;
        }
        if (at + esize <= g->size)
            memcpy(g->init + at, &v, esize);
        at += esize;
        while (accept(ps, '}'))
            ;
    } while (accept(ps, ','));
    (void)braced;
    while (accept(ps, '}'))
        ;
}

static void module_variable(parser_t *ps, ptx_space_t space, bool is_extern)
{
    decl_t d = {.space = space};
    parse_decl(ps, &d);
    if (space == PS_SHARED) {
        GROW(ps->m->shared_syms, ps->m->nshared, ps->m->cap_shared);
        ptx_sym_t *s = &ps->m->shared_syms[ps->m->nshared++];
        s->name = strdup(d.name);
        s->space = PS_SHARED;
        s->size = d.count;
        s->align = d.align ? d.align : 1;
        s->is_extern_shared = is_extern || (d.is_array && d.count == 0);
        if (!s->is_extern_shared) {
            s->offset = (ps->m->shared_module + s->align - 1) & ~(s->align - 1);
            ps->m->shared_module = s->offset + s->size;
        }
        skip_statement(ps);
        return;
    }
    GROW(ps->m->globals, ps->m->nglobals, ps->m->cap_globals);
    ptx_global_t *g = &ps->m->globals[ps->m->nglobals++];
    g->name = strdup(d.name);
    g->space = space;
    g->size = d.count;
    g->align = d.align ? d.align : 1;
    g->is_extern = is_extern;
    if (accept(ps, '='))
        parse_initializer(ps, g, d.type);
    expect(ps, ';');
}

/* Parameter list of an .entry or .func: `( .param .b64 name, ... )`. */
static void parse_params(parser_t *ps, bool entry, bool retval)
{
    ptx_func_t *f = ps->f;
    expect(ps, '(');
    if (accept(ps, ')'))
        return;
    do {
        char w[64];
        word(ps, w, sizeof(w));
        if (strcmp(w, ".param") != 0 && strcmp(w, ".reg") != 0) {
            fail(ps, "parameter space '%s' not supported", w);
            return;
        }
        decl_t d = {.space = PS_PARAM};
        parse_decl(ps, &d);
        uint64_t align = d.align ? d.align : 1;
        if (retval) {
            uint64_t off = 0;
            int s = add_sym(ps, d.name, PS_PARAM, off, d.count, align, -1);
            f->syms[s].global_index = PTX_SYM_FUNC_RET;
            f->nret = 1;
            f->ret_size = d.count;
            continue;
        }
        uint64_t off = (f->params_size + align - 1) & ~(align - 1);
        f->params = realloc(f->params, (f->nparams + 1) * sizeof(*f->params));
        f->params[f->nparams].offset = off;
        f->params[f->nparams].size = d.count;
        f->params[f->nparams].align = align;
        f->nparams++;
        f->params_size = off + d.count;
        int s = add_sym(ps, d.name, PS_PARAM, off, d.count, align, -1);
        f->syms[s].global_index = entry ? PTX_SYM_ENTRY_PARAM : PTX_SYM_FUNC_PARAM;
    } while (accept(ps, ','));
    expect(ps, ')');
}

/* ------------------------------------------------------------------------
 * Function bodies
 * ------------------------------------------------------------------------ */

static void close_scope(parser_t *ps)
{
    if (ps->depth <= 0) {
        fail(ps, "unbalanced '}'");
        return;
    }
    ps->depth--;
    /* symbols declared in the scope stay in the table (operands refer to
     * them) but are hidden from later lookups */
    for (size_t i = ps->scope_mark[ps->depth]; i < ps->f->nsyms; i++) {
        if (ps->f->syms[i].name != NULL && (ps->f->syms[i].global_index == PTX_SYM_CALL_PARAM ||
                                            ps->f->syms[i].global_index == PTX_SYM_LOCAL)) {
            char *n = ps->f->syms[i].name;
            size_t len = strlen(n);
            char *hidden = malloc(len + 2);
            hidden[0] = ' ';
            memcpy(hidden + 1, n, len + 1);
            free(n);
            ps->f->syms[i].name = hidden;
        }
    }
}

static void body_decl(parser_t *ps, const char *space)
{
    ptx_func_t *f = ps->f;
    if (strcmp(space, ".reg") == 0) {
        /* `%`-names are numbered on first use; plain names (inline asm's
         * `.reg .s32 r0;`) must be known to tell them from symbols. */
        char w[1024];
        do
            word(ps, w, sizeof(w));
        while (w[0] == '.');
        while (w[0] != '\0') {
            if (w[0] != '%') {
                char *lt = strchr(w, '<');
                if (lt)
                    *lt = '\0';
                reg_index(ps, w);
            }
            skip_space(ps);
            if (ps->p < ps->end && *ps->p == '<') {
                while (ps->p < ps->end && *ps->p != '>')
                    ps->p++;
                ps->p++;
            }
            if (!accept(ps, ','))
                break;
            word(ps, w, sizeof(w));
        }
        skip_statement(ps);
        return;
    }
    decl_t d;
    memset(&d, 0, sizeof(d));
    parse_decl(ps, &d);
    uint64_t align = d.align ? d.align : 1;
    if (strcmp(space, ".local") == 0) {
        uint64_t off = (f->local_size + align - 1) & ~(align - 1);
        add_sym(ps, d.name, PS_LOCAL, off, d.count, align, PTX_SYM_LOCAL);
        f->local_size = off + d.count;
    } else if (strcmp(space, ".shared") == 0) {
        uint64_t off = (f->shared_size + align - 1) & ~(align - 1);
        add_sym(ps, d.name, PS_SHARED, off, d.count, align, PTX_SYM_BODY_SHARED);
        f->shared_size = off + d.count;
    } else if (strcmp(space, ".param") == 0) {
        uint64_t off = (f->pframe_size + align - 1) & ~(align - 1);
        int s = add_sym(ps, d.name, PS_PARAM, off, d.count, align, -1);
        f->syms[s].global_index = PTX_SYM_CALL_PARAM;
        f->pframe_size = off + d.count;
    } else {
        fail(ps, "declaration '%s' in a function body not supported", space);
    }
    skip_statement(ps);
}

static void parse_body(parser_t *ps)
{
    char w[1024];
    ps->depth = 1;
    ps->scope_mark[0] = ps->f->nsyms;
    while (!ps->failed && ps->depth > 0) {
        skip_space(ps);
        if (ps->p >= ps->end) {
            fail(ps, "unexpected end of PTX in a function body");
            return;
        }
        if (accept(ps, '{')) {
            if (ps->depth >= 63) {
                fail(ps, "scopes nested too deeply");
                return;
            }
            ps->scope_mark[ps->depth++] = ps->f->nsyms;
            continue;
        }
        if (accept(ps, '}')) {
            close_scope(ps);
            continue;
        }
        const char *start = ps->p;
        int start_line = ps->line;
        word(ps, w, sizeof(w));
        if (w[0] == '\0' && ps->p < ps->end && *ps->p == '@') {
            ps->p++;
            char g[1024];
            word(ps, g + 1, sizeof(g) - 1);
            g[0] = '@';
            if (g[1] == '\0' && accept(ps, '!')) {
                word(ps, g + 2, sizeof(g) - 2);
                g[1] = '!';
            }
            parse_instruction(ps, g);
            continue;
        }
        if (w[0] == '\0') {
            fail(ps, "unexpected character '%c'", *ps->p);
            return;
        }
        skip_space(ps);
        size_t wl = strlen(w);
        bool colon_in_word = wl > 1 && w[wl - 1] == ':' && w[wl - 2] != ':';
        if (w[0] != '.' && (colon_in_word || (ps->p < ps->end && *ps->p == ':'))) {
            if (colon_in_word)
                w[wl - 1] = '\0';
            else
                ps->p++;
            GROW(ps->labels, ps->nlabels, ps->cap_labels);
            ps->labels[ps->nlabels].name = strdup(w);
            ps->labels[ps->nlabels].at = ps->f->ninsns;
            ps->nlabels++;
            continue;
        }
        if (w[0] == '.') {
            if (strcmp(w, ".loc") == 0 || strcmp(w, ".file") == 0) {
                skip_line(ps);
            } else if (strcmp(w, ".pragma") == 0) {
                skip_statement(ps);
            } else if (strcmp(w, ".reg") == 0 || strcmp(w, ".local") == 0 || strcmp(w, ".shared") == 0 ||
                       strcmp(w, ".param") == 0) {
                body_decl(ps, w);
            } else {
                ps->line = start_line;
                ps->p = start;
                fail(ps, "directive '%s' in a function body not supported", w);
            }
            continue;
        }
        parse_instruction(ps, w);
    }
}

static ptx_func_t *new_func(parser_t *ps)
{
    ptx_module_t *m = ps->m;
    GROW(m->funcs, m->nfuncs, m->cap_funcs);
    ptx_func_t *f = &m->funcs[m->nfuncs++];
    memset(f, 0, sizeof(*f));
    return f;
}

static void resolve_labels(parser_t *ps, size_t func_index)
{
    ptx_func_t *f = &ps->m->funcs[func_index];
    for (size_t i = 0; i < ps->nfix && !ps->failed; i++) {
        ptx_opnd_t *o = &f->insns[ps->fix[i].insn].o[ps->fix[i].opnd];
        bool found = false;
        for (size_t l = 0; l < ps->nlabels; l++) {
            if (strcmp(ps->labels[l].name, ps->fix[i].name) == 0) {
                o->kind = PK_LABEL;
                o->imm = ps->labels[l].at;
                found = true;
                break;
            }
        }
        if (!found) {
            /* a function: resolved by name once the module is read */
            o->kind = PK_FUNC;
            o->imm = UINT64_MAX;
            o->sym = -1;
            int idx = ptx_find_func(ps->m, ps->fix[i].name);
            if (idx >= 0) {
                o->imm = (uint64_t)idx;
            } else {
                ps->line = ps->fix[i].line;
                fail(ps, "unknown label or function '%s'", ps->fix[i].name);
            }
        }
    }
    for (size_t i = 0; i < ps->nfix; i++)
        free(ps->fix[i].name);
    for (size_t i = 0; i < ps->nlabels; i++)
        free(ps->labels[i].name);
    ps->nfix = ps->nlabels = 0;
}

static void parse_function(parser_t *ps, bool entry)
{
    char name[1024];
    ptx_func_t *f = NULL;
    ptx_func_t tmp;
    memset(&tmp, 0, sizeof(tmp));
    ps->f = &tmp;
    bool has_ret = false;
    skip_space(ps);
    if (!entry && ps->p < ps->end && *ps->p == '(') {
        parse_params(ps, false, true);
        has_ret = true;
    }
    word(ps, name, sizeof(name));
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == '(')
        parse_params(ps, entry, false);
    (void)has_ret;
    /* the return value follows the arguments in the frame */
    tmp.pframe_size = (tmp.params_size + 7) & ~7ull;
    for (size_t i = 0; i < tmp.nsyms; i++)
        if (tmp.syms[i].global_index == PTX_SYM_FUNC_RET) {
            tmp.syms[i].offset = tmp.pframe_size;
            tmp.pframe_size += tmp.syms[i].size;
        }
    /* performance directives, then a body or ';' */
    for (;;) {
        skip_space(ps);
        if (ps->p >= ps->end)
            break;
        if (*ps->p == ';') {
            ps->p++;
            break;
        }
        if (*ps->p == '{')
            break;
        char w[64];
        word(ps, w, sizeof(w));
        if (strcmp(w, ".reqntid") == 0 || strcmp(w, ".maxntid") == 0) {
            unsigned dims[3] = {1, 1, 1};
            for (int d = 0; d < 3; d++) {
                char num[32];
                word(ps, num, sizeof(num));
                dims[d] = (unsigned)strtoul(num, NULL, 10);
                if (!accept(ps, ','))
                    break;
            }
            if (w[2] == 'e')
                memcpy(tmp.reqntid, dims, sizeof(dims));
        } else if (strcmp(w, ".minnctapersm") == 0 || strcmp(w, ".maxnreg") == 0 ||
                   strcmp(w, ".maxnctapersm") == 0 || strcmp(w, ".maxclusterrank") == 0) {
            char num[32];
            word(ps, num, sizeof(num));
        } else if (strcmp(w, ".noreturn") == 0) {
        } else if (strcmp(w, ".pragma") == 0) {
            skip_statement(ps);
        } else if (strcmp(w, ".explicitcluster") == 0 || strcmp(w, ".reqnctapercluster") == 0) {
            fail(ps, "cluster launches not supported (%s)", w);
            return;
        } else {
            fail(ps, "function directive '%s' not supported", w);
            return;
        }
    }
    tmp.name = strdup(name);
    tmp.is_entry = entry;
    /* a definition after a declaration replaces it */
    int existing = ptx_find_func(ps->m, name);
    size_t index;
    if (existing >= 0 && !ps->m->funcs[existing].has_body) {
        index = (size_t)existing;
        f = &ps->m->funcs[index];
        free(f->name);
        free(f->params);
        *f = tmp;
    } else {
        f = new_func(ps);
        *f = tmp;
        index = ps->m->nfuncs - 1;
    }
    ps->f = f;
    if (ps->p < ps->end && *ps->p == '{') {
        ps->p++;
        f->has_body = true;
        ps->nregs = 0;
        parse_body(ps);
        ps->f = &ps->m->funcs[index];
        ps->f->nregs = (unsigned)ps->nregs;
        for (size_t i = 0; i < ps->nregs; i++)
            free(ps->regs[i]);
        ps->nregs = 0;
        if (ps->reg_hash != NULL)
            memset(ps->reg_hash, 0, ps->reg_hash_size * sizeof(int));
        resolve_labels(ps, index);
    }
    ps->f = NULL;
}

int ptx_find_func(const ptx_module_t *m, const char *name)
{
    for (size_t i = 0; i < m->nfuncs; i++)
        if (strcmp(m->funcs[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* ------------------------------------------------------------------------
 * Module
 * ------------------------------------------------------------------------ */

ptx_module_t *ptx_parse(const char *text, size_t len, char *err, size_t errlen)
{
    parser_t ps;
    memset(&ps, 0, sizeof(ps));
    ps.p = text;
    ps.end = text + len;
    ps.line = 1;
    ps.err = err;
    ps.errlen = errlen;
    ps.m = calloc(1, sizeof(ptx_module_t));
    if (ps.m == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    char w[1024];
    while (!ps.failed) {
        skip_space(&ps);
        if (ps.p >= ps.end || *ps.p == '\0')
            break;
        word(&ps, w, sizeof(w));
        if (strcmp(w, ".version") == 0) {
            char v[32];
            word(&ps, v, sizeof(v));
            ps.m->version_major = atoi(v);
            const char *dot = strchr(v, '.');
            ps.m->version_minor = dot ? atoi(dot + 1) : 0;
        } else if (strcmp(w, ".target") == 0) {
            char t[64];
            word(&ps, t, sizeof(t));
            if (strncmp(t, "sm_", 3) == 0)
                ps.m->target_sm = atoi(t + 3);
            skip_line(&ps);
        } else if (strcmp(w, ".address_size") == 0 || strcmp(w, ".file") == 0 ||
                   strcmp(w, ".loc") == 0) {
            skip_line(&ps);
        } else if (strcmp(w, ".section") == 0) {
            int depth = 0;
            while (ps.p < ps.end) {
                if (*ps.p == '\n')
                    ps.line++;
                if (*ps.p == '{')
                    depth++;
                if (*ps.p == '}' && --depth == 0) {
                    ps.p++;
                    break;
                }
                ps.p++;
            }
        } else if (strcmp(w, ".visible") == 0 || strcmp(w, ".weak") == 0 || strcmp(w, ".extern") == 0 ||
                   strcmp(w, ".common") == 0) {
            bool is_extern = strcmp(w, ".extern") == 0;
            char what[64];
            const char *save = ps.p;
            int save_line = ps.line;
            word(&ps, what, sizeof(what));
            if (strcmp(what, ".entry") == 0 || strcmp(what, ".func") == 0) {
                parse_function(&ps, what[1] == 'e');
            } else if (strcmp(what, ".global") == 0 || strcmp(what, ".const") == 0 ||
                       strcmp(what, ".shared") == 0) {
                module_variable(&ps, what[1] == 'g' ? PS_GLOBAL : what[1] == 'c' ? PS_CONST : PS_SHARED, is_extern);
            } else {
                ps.p = save;
                ps.line = save_line;
            }
        } else if (strcmp(w, ".entry") == 0 || strcmp(w, ".func") == 0) {
            parse_function(&ps, w[1] == 'e');
        } else if (strcmp(w, ".global") == 0 || strcmp(w, ".const") == 0 || strcmp(w, ".shared") == 0) {
            module_variable(&ps, w[1] == 'g' ? PS_GLOBAL : w[1] == 'c' ? PS_CONST : PS_SHARED, false);
        } else if (strcmp(w, ".alias") == 0 || strcmp(w, ".pragma") == 0) {
            skip_statement(&ps);
        } else if (w[0] == '\0' && ps.p < ps.end && *ps.p == ';') {
            ps.p++;
        } else {
            fail(&ps, "module directive '%s' not supported", w[0] ? w : "?");
        }
    }
    free(ps.regs);
    free(ps.reg_hash);
    free(ps.fix);
    free(ps.labels);
    if (!ps.failed && ptx_link(ps.m, err, errlen) != 0)
        ps.failed = true;
    if (ps.failed) {
        ptx_module_free(ps.m);
        return NULL;
    }
    return ps.m;
}


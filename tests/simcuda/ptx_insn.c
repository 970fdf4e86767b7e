/* ptx_insn.c: the lexer, symbol and register tables, operands, modifiers
 * and instructions of the PTX parser (see ptx_parse.c for declarations,
 * functions and the module).
 * Entry point: `ptx_parse_instruction`.
 */
#include "ptx_parser.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

void ptx_fail(parser_t *ps, const char *fmt, ...)
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

/* ------------------------------------------------------------------------
 * Lexing
 * ------------------------------------------------------------------------ */

void ptx_skip_space(parser_t *ps)
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
size_t ptx_word(parser_t *ps, char *out, size_t cap)
{
    ptx_skip_space(ps);
    size_t n = 0;
    while (ps->p < ps->end && is_ident_char(*ps->p)) {
        if (n + 1 < cap)
            out[n++] = *ps->p;
        ps->p++;
    }
    out[n] = '\0';
    return n;
}

bool ptx_accept(parser_t *ps, char c)
{
    ptx_skip_space(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    return false;
}

void ptx_expect(parser_t *ps, char c)
{
    if (!ptx_accept(ps, c))
        ptx_fail(ps, "expected '%c'", c);
}

void ptx_skip_line(parser_t *ps)
{
    while (ps->p < ps->end && *ps->p != '\n')
        ps->p++;
}

/* Skips to just past the next ';' at this nesting level. */
void ptx_skip_statement(parser_t *ps)
{
    while (ps->p < ps->end && *ps->p != ';') {
        if (*ps->p == '\n')
            ps->line++;
        ps->p++;
    }
    if (ps->p < ps->end)
        ps->p++;
}

ptx_type_t ptx_type_from(const char *s)
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

unsigned ptx_type_size(ptx_type_t t)
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

int ptx_add_sym(parser_t *ps, const char *name, ptx_space_t space, uint64_t offset, uint64_t size,
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

int ptx_find_sym(parser_t *ps, const char *name)
{
    ptx_func_t *f = ps->f;
    for (size_t i = f->nsyms; i-- > 0;)
        if (f->syms[i].name != NULL && strcmp(f->syms[i].name, name) == 0)
            return (int)i;
    /* module-level: globals, then shared */
    for (size_t i = 0; i < ps->m->nglobals; i++)
        if (strcmp(ps->m->globals[i].name, name) == 0)
            return ptx_add_sym(ps, name, ps->m->globals[i].space, 0, ps->m->globals[i].size, ps->m->globals[i].align,
                           (int)i);
    for (size_t i = 0; i < ps->m->nshared; i++) {
        ptx_sym_t *s = &ps->m->shared_syms[i];
        if (strcmp(s->name, name) == 0) {
            int idx = ptx_add_sym(ps, name, PS_SHARED, s->offset, s->size, s->align, PTX_SYM_MODULE_SHARED);
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

int ptx_reg_index(parser_t *ps, const char *name)
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

bool ptx_is_declared_reg(parser_t *ps, const char *name)
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

bool ptx_parse_number(const char *s, uint64_t *out)
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
    ptx_skip_space(ps);
    if (ps->p < ps->end && (isdigit((unsigned char)*ps->p) || *ps->p == '-')) {
        char num[64];
        size_t n = 0;
        if (*ps->p == '-')
            num[n++] = *ps->p++;
        while (ps->p < ps->end && isalnum((unsigned char)*ps->p) && n < 63)
            num[n++] = *ps->p++;
        num[n] = '\0';
        if (!ptx_parse_number(num, &o->imm))
            ptx_fail(ps, "bad address '%s'", num);
        ptx_expect(ps, ']');
        return;
    }
    ptx_word(ps, w, sizeof(w));
    if (w[0] == '%' || ptx_is_declared_reg(ps, w)) {
        o->reg = ptx_reg_index(ps, w);
    } else {
        o->sym = ptx_find_sym(ps, w);
        if (o->sym < 0)
            ptx_fail(ps, "unknown symbol '%s'", w);
    }
    ptx_skip_space(ps);
    if (ptx_accept(ps, '+')) {
        char num[64];
        bool negative = ptx_accept(ps, '-');
        ptx_word(ps, num, sizeof(num));
        if (!ptx_parse_number(num, &o->imm))
            ptx_fail(ps, "bad offset '%s'", num);
        if (negative)
            o->imm = (uint64_t)(-(int64_t)o->imm);
    } else if (ps->p < ps->end && *ps->p == '-') {
        ps->p++;
        char num[64];
        ptx_word(ps, num, sizeof(num));
        uint64_t v;
        if (!ptx_parse_number(num, &v))
            ptx_fail(ps, "bad offset '%s'", num);
        o->imm = (uint64_t)(-(int64_t)v);
    }
    ptx_expect(ps, ']');
}

static void parse_operand(parser_t *ps, ptx_insn_t *in, ptx_opnd_t *o)
{
    char w[1024];
    memset(o, 0, sizeof(*o));
    o->reg = -1;
    o->sym = -1;
    ptx_skip_space(ps);
    if (ptx_accept(ps, '[')) {
        parse_address(ps, o);
        return;
    }
    if (ptx_accept(ps, '{')) {
        o->kind = PK_VEC;
        do {
            ptx_word(ps, w, sizeof(w));
            if (o->vec_count >= 8) {
                ptx_fail(ps, "vector too long");
                return;
            }
            uint64_t value;
            if (strcmp(w, "_") == 0) {
                o->vec[o->vec_count++] = PTX_VEC_SINK;
            } else if (ptx_parse_number(w, &value)) {
                /* `mov.b32 %f4, {0, %rs2}` packs a constant half */
                if (value != 0) {
                    ptx_fail(ps, "vector element '%s' not supported", w);
                    return;
                }
                o->vec[o->vec_count++] = PTX_VEC_ZERO;
            } else {
                o->vec[o->vec_count++] = ptx_reg_index(ps, w);
            }
        } while (ptx_accept(ps, ','));
        ptx_expect(ps, '}');
        return;
    }
    if (ptx_accept(ps, '(')) { /* call lists */
        o->kind = PK_LIST;
        if (ptx_accept(ps, ')'))
            return;
        do {
            ptx_word(ps, w, sizeof(w));
            if (o->vec_count >= 8) {
                ptx_fail(ps, "too many call arguments");
                return;
            }
            int s = ptx_find_sym(ps, w);
            if (s < 0)
                ptx_fail(ps, "unknown call parameter '%s'", w);
            o->vec[o->vec_count++] = s;
        } while (ptx_accept(ps, ','));
        ptx_expect(ps, ')');
        return;
    }
    if (ptx_accept(ps, '!'))
        o->neg = 1;
    ptx_skip_space(ps);
    if (ps->p < ps->end && *ps->p == '-' && ps->p + 1 < ps->end && !isdigit((unsigned char)ps->p[1])) {
        ptx_fail(ps, "negated operand not supported");
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
            ptx_fail(ps, "special register '%s' not supported", w);
            return;
        }
        o->kind = PK_REG;
        o->reg = ptx_reg_index(ps, w);
        /* setp's second destination: %p|%q */
        return;
    }
    if (w[0] != '\0' && !isdigit((unsigned char)w[0]) && w[0] != '-' && ptx_is_declared_reg(ps, w)) {
        o->kind = PK_REG;
        o->reg = ptx_reg_index(ps, w);
        return;
    }
    uint64_t v;
    if (ptx_parse_number(w, &v)) {
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
    int s = ptx_find_sym(ps, w);
    if (s >= 0) {
        o->kind = PK_SYM;
        o->sym = s;
        ptx_skip_space(ps);
        if (ptx_accept(ps, '+')) {
            char num[64];
            ptx_word(ps, num, sizeof(num));
            ptx_parse_number(num, &o->imm);
        }
        return;
    }
    if (w[0] == '\0') {
        ptx_fail(ps, "missing operand");
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
    ptx_type_t t = ptx_type_from(mod);
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
            ptx_fail(ps, "state space '%s' not supported", mod);
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
    ptx_fail(ps, "modifier '.%s' of '%s' not supported", mod, ptx_op_names[op]);
    return false;
}

void ptx_parse_instruction(parser_t *ps, const char *first)
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
        in->guard = ptx_reg_index(ps, g);
        ptx_word(ps, opword, sizeof(opword));
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
        ptx_fail(ps, "instruction '%s' not supported", save);
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
    ptx_skip_space(ps);
    while (!ps->failed && ps->p < ps->end && *ps->p != ';') {
        if (in->nopnd >= PTX_MAX_OPNDS) {
            ptx_fail(ps, "too many operands");
            return;
        }
        ptx_opnd_t *o = &in->o[in->nopnd++];
        parse_operand(ps, in, o);
        ptx_skip_space(ps);
        if (ps->p < ps->end && *ps->p == '|') { /* setp p|q */
            ps->p++;
            ptx_opnd_t *q = &in->o[in->nopnd++];
            parse_operand(ps, in, q);
            in->mods |= PM_ALL; /* marks the second destination */
        }
        if (!ptx_accept(ps, ','))
            break;
    }
    ptx_expect(ps, ';');
    f->ninsns++;
}


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
#include "ptx_parser.h"

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
        ptx_word(ps, w, sizeof(w));
        if (strcmp(w, ".align") == 0) {
            char num[32];
            ptx_word(ps, num, sizeof(num));
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
        if (w[0] == '.' && ptx_type_from(w + 1) != PT_NONE) {
            d->type = ptx_type_from(w + 1);
            continue;
        }
        break;
    }
    snprintf(d->name, sizeof(d->name), "%s", w);
    uint64_t esize = ptx_type_size(d->type) * vec;
    if (d->align == 0)
        d->align = esize;
    d->count = 1;
    d->is_array = false;
    while (ptx_accept(ps, '[')) {
        d->is_array = true;
        char num[32];
        ptx_word(ps, num, sizeof(num));
        if (num[0] == '\0')
            d->count = 0;
        else
            d->count *= strtoull(num, NULL, 10);
        ptx_expect(ps, ']');
    }
    d->count *= esize; /* now in bytes */
    if (d->type == PT_NONE)
        ptx_fail(ps, "declaration of '%s' without a type", d->name);
}

static void parse_initializer(parser_t *ps, ptx_global_t *g, ptx_type_t type)
{
    unsigned esize = ptx_type_size(type);
    g->init = calloc(1, g->size ? g->size : 1);
    size_t at = 0;
    bool braced = ptx_accept(ps, '{');
    do {
        if (ptx_accept(ps, '{')) { /* nested arrays */
            continue;
        }
        char w[128];
        ptx_word(ps, w, sizeof(w));
        uint64_t v;
        if (!ptx_parse_number(w, &v)) {
            ptx_fail(ps, "initializer '%s' of '%s' not supported", w, g->name);
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
        while (ptx_accept(ps, '}'))
            ;
    } while (ptx_accept(ps, ','));
    (void)braced;
    while (ptx_accept(ps, '}'))
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
        ptx_skip_statement(ps);
        return;
    }
    GROW(ps->m->globals, ps->m->nglobals, ps->m->cap_globals);
    ptx_global_t *g = &ps->m->globals[ps->m->nglobals++];
    g->name = strdup(d.name);
    g->space = space;
    g->size = d.count;
    g->align = d.align ? d.align : 1;
    g->is_extern = is_extern;
    if (ptx_accept(ps, '='))
        parse_initializer(ps, g, d.type);
    ptx_expect(ps, ';');
}

/* Parameter list of an .entry or .func: `( .param .b64 name, ... )`. */
static void parse_params(parser_t *ps, bool entry, bool retval)
{
    ptx_func_t *f = ps->f;
    ptx_expect(ps, '(');
    if (ptx_accept(ps, ')'))
        return;
    do {
        char w[64];
        ptx_word(ps, w, sizeof(w));
        if (strcmp(w, ".param") != 0 && strcmp(w, ".reg") != 0) {
            ptx_fail(ps, "parameter space '%s' not supported", w);
            return;
        }
        decl_t d = {.space = PS_PARAM};
        parse_decl(ps, &d);
        uint64_t align = d.align ? d.align : 1;
        if (retval) {
            uint64_t off = 0;
            int s = ptx_add_sym(ps, d.name, PS_PARAM, off, d.count, align, -1);
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
        int s = ptx_add_sym(ps, d.name, PS_PARAM, off, d.count, align, -1);
        f->syms[s].global_index = entry ? PTX_SYM_ENTRY_PARAM : PTX_SYM_FUNC_PARAM;
    } while (ptx_accept(ps, ','));
    ptx_expect(ps, ')');
}

/* ------------------------------------------------------------------------
 * Function bodies
 * ------------------------------------------------------------------------ */

static void close_scope(parser_t *ps)
{
    if (ps->depth <= 0) {
        ptx_fail(ps, "unbalanced '}'");
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
            ptx_word(ps, w, sizeof(w));
        while (w[0] == '.');
        while (w[0] != '\0') {
            if (w[0] != '%') {
                char *lt = strchr(w, '<');
                if (lt)
                    *lt = '\0';
                ptx_reg_index(ps, w);
            }
            ptx_skip_space(ps);
            if (ps->p < ps->end && *ps->p == '<') {
                while (ps->p < ps->end && *ps->p != '>')
                    ps->p++;
                ps->p++;
            }
            if (!ptx_accept(ps, ','))
                break;
            ptx_word(ps, w, sizeof(w));
        }
        ptx_skip_statement(ps);
        return;
    }
    decl_t d;
    memset(&d, 0, sizeof(d));
    parse_decl(ps, &d);
    uint64_t align = d.align ? d.align : 1;
    if (strcmp(space, ".local") == 0) {
        uint64_t off = (f->local_size + align - 1) & ~(align - 1);
        ptx_add_sym(ps, d.name, PS_LOCAL, off, d.count, align, PTX_SYM_LOCAL);
        f->local_size = off + d.count;
    } else if (strcmp(space, ".shared") == 0) {
        uint64_t off = (f->shared_size + align - 1) & ~(align - 1);
        ptx_add_sym(ps, d.name, PS_SHARED, off, d.count, align, PTX_SYM_BODY_SHARED);
        f->shared_size = off + d.count;
    } else if (strcmp(space, ".param") == 0) {
        uint64_t off = (f->pframe_size + align - 1) & ~(align - 1);
        int s = ptx_add_sym(ps, d.name, PS_PARAM, off, d.count, align, -1);
        f->syms[s].global_index = PTX_SYM_CALL_PARAM;
        f->pframe_size = off + d.count;
    } else {
        ptx_fail(ps, "declaration '%s' in a function body not supported", space);
    }
    ptx_skip_statement(ps);
}

static void parse_body(parser_t *ps)
{
    char w[1024];
    ps->depth = 1;
    ps->scope_mark[0] = ps->f->nsyms;
    while (!ps->failed && ps->depth > 0) {
        ptx_skip_space(ps);
        if (ps->p >= ps->end) {
            ptx_fail(ps, "unexpected end of PTX in a function body");
            return;
        }
        if (ptx_accept(ps, '{')) {
            if (ps->depth >= 63) {
                ptx_fail(ps, "scopes nested too deeply");
                return;
            }
            ps->scope_mark[ps->depth++] = ps->f->nsyms;
            continue;
        }
        if (ptx_accept(ps, '}')) {
            close_scope(ps);
            continue;
        }
        const char *start = ps->p;
        int start_line = ps->line;
        ptx_word(ps, w, sizeof(w));
        if (w[0] == '\0' && ps->p < ps->end && *ps->p == '@') {
            ps->p++;
            char g[1024];
            ptx_word(ps, g + 1, sizeof(g) - 1);
            g[0] = '@';
            if (g[1] == '\0' && ptx_accept(ps, '!')) {
                ptx_word(ps, g + 2, sizeof(g) - 2);
                g[1] = '!';
            }
            ptx_parse_instruction(ps, g);
            continue;
        }
        if (w[0] == '\0') {
            ptx_fail(ps, "unexpected character '%c'", *ps->p);
            return;
        }
        ptx_skip_space(ps);
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
                ptx_skip_line(ps);
            } else if (strcmp(w, ".pragma") == 0) {
                ptx_skip_statement(ps);
            } else if (strcmp(w, ".reg") == 0 || strcmp(w, ".local") == 0 || strcmp(w, ".shared") == 0 ||
                       strcmp(w, ".param") == 0) {
                body_decl(ps, w);
            } else {
                ps->line = start_line;
                ps->p = start;
                ptx_fail(ps, "directive '%s' in a function body not supported", w);
            }
            continue;
        }
        ptx_parse_instruction(ps, w);
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
                ptx_fail(ps, "unknown label or function '%s'", ps->fix[i].name);
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
    ptx_skip_space(ps);
    if (!entry && ps->p < ps->end && *ps->p == '(') {
        parse_params(ps, false, true);
        has_ret = true;
    }
    ptx_word(ps, name, sizeof(name));
    ptx_skip_space(ps);
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
        ptx_skip_space(ps);
        if (ps->p >= ps->end)
            break;
        if (*ps->p == ';') {
            ps->p++;
            break;
        }
        if (*ps->p == '{')
            break;
        char w[64];
        ptx_word(ps, w, sizeof(w));
        if (strcmp(w, ".reqntid") == 0 || strcmp(w, ".maxntid") == 0) {
            unsigned dims[3] = {1, 1, 1};
            for (int d = 0; d < 3; d++) {
                char num[32];
                ptx_word(ps, num, sizeof(num));
                dims[d] = (unsigned)strtoul(num, NULL, 10);
                if (!ptx_accept(ps, ','))
                    break;
            }
            if (w[2] == 'e')
                memcpy(tmp.reqntid, dims, sizeof(dims));
        } else if (strcmp(w, ".minnctapersm") == 0 || strcmp(w, ".maxnreg") == 0 ||
                   strcmp(w, ".maxnctapersm") == 0 || strcmp(w, ".maxclusterrank") == 0) {
            char num[32];
            ptx_word(ps, num, sizeof(num));
        } else if (strcmp(w, ".noreturn") == 0) {
        } else if (strcmp(w, ".pragma") == 0) {
            ptx_skip_statement(ps);
        } else if (strcmp(w, ".explicitcluster") == 0 || strcmp(w, ".reqnctapercluster") == 0) {
            ptx_fail(ps, "cluster launches not supported (%s)", w);
            return;
        } else {
            ptx_fail(ps, "function directive '%s' not supported", w);
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
        ptx_skip_space(&ps);
        if (ps.p >= ps.end || *ps.p == '\0')
            break;
        ptx_word(&ps, w, sizeof(w));
        if (strcmp(w, ".version") == 0) {
            char v[32];
            ptx_word(&ps, v, sizeof(v));
            ps.m->version_major = atoi(v);
            const char *dot = strchr(v, '.');
            ps.m->version_minor = dot ? atoi(dot + 1) : 0;
        } else if (strcmp(w, ".target") == 0) {
            char t[64];
            ptx_word(&ps, t, sizeof(t));
            if (strncmp(t, "sm_", 3) == 0)
                ps.m->target_sm = atoi(t + 3);
            ptx_skip_line(&ps);
        } else if (strcmp(w, ".address_size") == 0 || strcmp(w, ".file") == 0 ||
                   strcmp(w, ".loc") == 0) {
            ptx_skip_line(&ps);
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
            ptx_word(&ps, what, sizeof(what));
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
            ptx_skip_statement(&ps);
        } else if (w[0] == '\0' && ps.p < ps.end && *ps.p == ';') {
            ps.p++;
        } else {
            ptx_fail(&ps, "module directive '%s' not supported", w[0] ? w : "?");
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


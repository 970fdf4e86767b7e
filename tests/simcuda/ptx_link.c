/* ptx_link.c: the last step of loading PTX: each function gets its
 * register and parameter-frame base from the call graph (so a call needs no
 * save), then all code is laid out in one array. Also frees modules.
 * Entry points: `ptx_link`, `ptx_module_free`.
 */
#include "ptx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ptx_link(ptx_module_t *m, char *err, size_t errlen);

/* One array of every function's code: labels become absolute indices, a
 * call operand keeps the callee in `reg` and its first instruction in `imm`. */
static int flatten(ptx_module_t *m, char *err, size_t errlen)
{
    size_t total = 0;
    m->func_start = calloc(m->nfuncs + 1, sizeof(size_t));
    if (m->func_start == NULL)
        return -1;
    for (size_t i = 0; i < m->nfuncs; i++) {
        m->func_start[i] = total;
        total += m->funcs[i].ninsns;
    }
    m->code = calloc(total ? total : 1, sizeof(ptx_insn_t));
    if (m->code == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    m->ncode = total;
    uint64_t local = 0, body_shared = 0;
    for (size_t i = 0; i < m->nfuncs; i++) {
        ptx_func_t *f = &m->funcs[i];
        f->lbase = (local + 15) & ~15ull;
        local = f->lbase + f->local_size;
        if (f->shared_size > body_shared)
            body_shared = f->shared_size;
    }
    m->local_total = (local + 15) & ~15ull;
    m->shared_dynamic_base = (((m->shared_module + 15) & ~15ull) + body_shared + 15) & ~15ull;
    for (size_t i = 0; i < m->nfuncs; i++) {
        ptx_func_t *f = &m->funcs[i];
        for (size_t k = 0; k < f->ninsns; k++) {
            ptx_insn_t *in = &m->code[m->func_start[i] + k];
            *in = f->insns[k];
            in->func = (uint16_t)i;
            for (int o = 0; o < in->nopnd; o++) {
                if (in->o[o].kind == PK_LABEL)
                    in->o[o].imm += m->func_start[i];
                else if (in->o[o].kind == PK_FUNC) {
                    in->o[o].reg = (int32_t)in->o[o].imm;
                    in->o[o].imm = m->func_start[in->o[o].imm];
                }
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Linking: register and parameter-frame bases from the call graph.
 * ------------------------------------------------------------------------ */

static int link_func(ptx_module_t *m, size_t index, unsigned reg_base, uint64_t pbase, char *err, size_t errlen)
{
    ptx_func_t *f = &m->funcs[index];
    if (f->visiting) {
        snprintf(err, errlen, "recursive call of '%s' not supported", f->name);
        return -1;
    }
    if (reg_base > f->reg_base)
        f->reg_base = reg_base;
    if (pbase > f->pbase)
        f->pbase = pbase;
    f->visiting = 1;
    for (size_t i = 0; i < f->ninsns; i++) {
        ptx_insn_t *in = &f->insns[i];
        if (in->op != PO_call)
            continue;
        for (int k = 0; k < in->nopnd; k++) {
            if (in->o[k].kind != PK_FUNC)
                continue;
            ptx_func_t *callee = &m->funcs[in->o[k].imm];
            if (!callee->has_body) {
                snprintf(err, errlen, "call of '%s', which has no body in this module", callee->name);
                f->visiting = 0;
                return -1;
            }
            if (link_func(m, in->o[k].imm, f->reg_base + f->nregs, f->pbase + f->pframe_size, err, errlen) != 0) {
                f->visiting = 0;
                return -1;
            }
        }
    }
    f->visiting = 0;
    return 0;
}

static void totals(ptx_module_t *m, size_t index, unsigned *regs, uint64_t *pframe)
{
    ptx_func_t *f = &m->funcs[index];
    if (f->reg_base + f->nregs > *regs)
        *regs = f->reg_base + f->nregs;
    if (f->pbase + f->pframe_size > *pframe)
        *pframe = f->pbase + f->pframe_size;
    for (size_t i = 0; i < f->ninsns; i++)
        if (f->insns[i].op == PO_call)
            for (int k = 0; k < f->insns[i].nopnd; k++)
                if (f->insns[i].o[k].kind == PK_FUNC)
                    totals(m, f->insns[i].o[k].imm, regs, pframe);
}

static void rebase(ptx_func_t *f)
{
    unsigned b = f->reg_base;
    for (size_t i = 0; i < f->ninsns; i++) {
        ptx_insn_t *in = &f->insns[i];
        if (in->guard >= 0)
            in->guard += (int)b;
        for (int k = 0; k < in->nopnd; k++) {
            ptx_opnd_t *o = &in->o[k];
            if ((o->kind == PK_REG || o->kind == PK_ADDR) && o->reg >= 0)
                o->reg += (int)b;
            if (o->kind == PK_VEC)
                for (int v = 0; v < o->vec_count; v++)
                    if (o->vec[v] >= 0)
                        o->vec[v] += (int)b;
        }
    }
}

int ptx_link(ptx_module_t *m, char *err, size_t errlen)
{
    for (size_t i = 0; i < m->nfuncs; i++)
        if (m->funcs[i].is_entry && m->funcs[i].has_body)
            if (link_func(m, i, 0, 0, err, errlen) != 0)
                return -1;
    for (size_t i = 0; i < m->nfuncs; i++)
        rebase(&m->funcs[i]);
    for (size_t i = 0; i < m->nfuncs; i++) {
        ptx_func_t *f = &m->funcs[i];
        if (!f->is_entry || !f->has_body)
            continue;
        unsigned regs = 0;
        uint64_t pframe = 0;
        totals(m, i, &regs, &pframe);
        f->regs_total = regs;
        f->pframe_total = pframe;
    }
    return flatten(m, err, errlen);
}

void ptx_module_free(ptx_module_t *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->nfuncs; i++) {
        ptx_func_t *f = &m->funcs[i];
        free(f->name);
        free(f->insns);
        free(f->params);
        for (size_t s = 0; s < f->nsyms; s++)
            free(f->syms[s].name);
        free(f->syms);
    }
    free(m->funcs);
    for (size_t i = 0; i < m->nglobals; i++) {
        free(m->globals[i].name);
        free(m->globals[i].init);
    }
    free(m->globals);
    for (size_t i = 0; i < m->nshared; i++)
        free(m->shared_syms[i].name);
    free(m->shared_syms);
    free(m->global_addrs);
    free(m->code);
    free(m->func_start);
    free(m);
}

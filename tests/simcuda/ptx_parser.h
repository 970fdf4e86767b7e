/* ptx_parser.h: what the two halves of the PTX parser share: the parser
 * state, the lexer and the symbol and register tables (ptx_insn.c), used by
 * the declaration, function and module level (ptx_parse.c).
 */
#ifndef SIMCUDA_PTX_PARSER_H
#define SIMCUDA_PTX_PARSER_H

#include "ptx.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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

void ptx_fail(parser_t *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ptx_skip_space(parser_t *ps);
size_t ptx_word(parser_t *ps, char *out, size_t cap);
bool ptx_accept(parser_t *ps, char c);
void ptx_expect(parser_t *ps, char c);
void ptx_skip_line(parser_t *ps);
/* Skips to just past the next ';' at this nesting level. */
void ptx_skip_statement(parser_t *ps);
ptx_type_t ptx_type_from(const char *s);
unsigned ptx_type_size(ptx_type_t t);
int ptx_add_sym(parser_t *ps, const char *name, ptx_space_t space, uint64_t offset, uint64_t size, uint64_t align,
                int global_index);
/* A symbol visible in the current function (module globals are added on
 * first use), or -1. */
int ptx_find_sym(parser_t *ps, const char *name);
/* The current function's register of that name, numbered on first use. */
int ptx_reg_index(parser_t *ps, const char *name);
bool ptx_is_declared_reg(parser_t *ps, const char *name);
bool ptx_parse_number(const char *s, uint64_t *out);
/* One instruction; `first` is its first word (opcode or `@guard`). */
void ptx_parse_instruction(parser_t *ps, const char *first);

#endif /* SIMCUDA_PTX_PARSER_H */

/* ptx_ops.h: per-lane arithmetic of the PTX interpreter (ptx_ops.c), used
 * by ptx_exec.c. */
#ifndef SIMCUDA_PTX_OPS_H
#define SIMCUDA_PTX_OPS_H

#include "ptx.h"

unsigned ptx_type_bits(ptx_type_t t);
float ptx_half_to_float(uint16_t h);
uint16_t ptx_float_to_half(double d, int round);
float ptx_bf16_to_float(uint16_t h);
uint16_t ptx_float_to_bf16(double d, int round);

/* Computes `in` for one lane: d = op(a, b, c). `carry` is the lane's carry
 * flag (add.cc, addc...). Returns 0, or -1 when the form is not
 * implemented. */
int ptx_alu(const ptx_insn_t *in, uint64_t a, uint64_t b, uint64_t c, uint64_t *d, uint8_t *carry);

/* setp/set comparison of a and b of `type`. */
bool ptx_compare(int cmp, ptx_type_t type, uint64_t a, uint64_t b);

#endif /* SIMCUDA_PTX_OPS_H */

/* ptx_exec.h: the state the PTX interpreter's files share: a block, its
 * warps, operand access. ptx_exec.c schedules and runs the fast paths,
 * ptx_lanes.c executes the other instructions lane by lane.
 */
#ifndef SIMCUDA_PTX_EXEC_H
#define SIMCUDA_PTX_EXEC_H

#include "ptx_ops.h"

#include <stdbool.h>
#include <stdint.h>

#define MAX_CALL_DEPTH 16

typedef struct warp_s {
    uint64_t *regs;           /* regs_total x 32, register-major */
    uint32_t pc[32];          /* per lane, valid while !uniform */
    bool uniform;             /* every ready lane is at `upc` */
    uint32_t upc;
    uint32_t live;            /* lanes that exist and have not exited */
    uint32_t arrived;         /* lanes waiting at the block barrier */
    uint8_t carry[32];
    uint8_t depth[32];
    uint32_t ret_pc[32][MAX_CALL_DEPTH];
    uint32_t call_pc[32][MAX_CALL_DEPTH];
    unsigned id;
    /* bar.red: destination register and predicate of each arrived lane */
    int red_dst;
    uint32_t red_pred;
    int red_op;
} warp_t;

typedef struct block_s {
    const ptx_launch_t *L;
    const ptx_module_t *m;
    unsigned ctaid[3];
    unsigned nthreads, nwarps;
    unsigned char *shared;
    size_t shared_size;
    unsigned char *local; /* local_total bytes per thread */
    unsigned char *pmem;  /* pframe_total bytes per thread */
    size_t pstride;
    warp_t *warps;
    unsigned regs_total;
    char *err;
    size_t errlen;
    bool failed;
} block_t;


#define REG(w, r) ((w)->regs + (size_t)(r) * 32)

static inline unsigned thread_index(const block_t *b, const warp_t *w, int lane)
{
    return w->id * 32 + (unsigned)lane;
}

static inline unsigned char *lane_local(const block_t *b, const warp_t *w, int lane)
{
    return b->local + (size_t)thread_index(b, w, lane) * b->m->local_total;
}

static inline unsigned char *lane_pmem(const block_t *b, const warp_t *w, int lane)
{
    return b->pmem + (size_t)thread_index(b, w, lane) * b->pstride;
}


/* The value a symbol operand stands for: a host address for globals and
 * constants, a window offset for shared, local and parameter symbols. */

int ptx_fail_insn(block_t *b, const ptx_insn_t *in, const char *what);
uint64_t ptx_sreg_value(const block_t *b, const warp_t *w, int lane, unsigned sreg);
/* The value a symbol operand stands for: a host address for globals and
 * constants, a window offset for shared, local and parameter symbols. */
uint64_t ptx_sym_value(const block_t *b, const ptx_insn_t *in, int sym);
/* Host address of a memory operand for one lane. */
unsigned char *ptx_address(const block_t *b, const warp_t *w, const ptx_insn_t *in, const ptx_opnd_t *o, int lane);
uint64_t ptx_load_value(const unsigned char *p, ptx_type_t t);
void ptx_store_value(unsigned char *p, ptx_type_t t, uint64_t v);

static inline uint64_t src(const block_t *b, const warp_t *w, const ptx_insn_t *in, const ptx_opnd_t *o, int lane)
{
    switch (o->kind) {
    case PK_REG: return REG(w, o->reg)[lane];
    case PK_IMM: return o->imm;
    case PK_SREG: return ptx_sreg_value(b, w, lane, o->sreg);
    case PK_SYM: return ptx_sym_value(b, in, o->sym) + o->imm;
    default: return 0;
    }
}

/* Host address of a memory operand for one lane. */

static inline void put(warp_t *w, const ptx_opnd_t *o, int lane, uint64_t v)
{
    if (o->kind == PK_REG)
        REG(w, o->reg)[lane] = v;
}

static inline bool pred_of(const block_t *b, const warp_t *w, const ptx_insn_t *in, const ptx_opnd_t *o, int lane)
{
    bool v = (src(b, w, in, o, lane) & 1) != 0;
    return o->neg ? !v : v;
}




/* ptx_lanes.c: instructions executed lane by lane over `mask`; 0 or -1
 * (with the message in the block). */
int ptx_exec_ld_st(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_atom(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_cvta(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_isspacep(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_shfl(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_vote(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_match(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_redux(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_mov(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_setp(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_alu(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_misc(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);
int ptx_exec_cvt_pack(block_t *b, warp_t *w, const ptx_insn_t *in, uint32_t mask);

#endif /* SIMCUDA_PTX_EXEC_H */

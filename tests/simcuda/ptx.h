/* ptx.h: the PTX module representation shared by the parser (`ptx_parse.c`)
 * and the interpreter (`ptx_exec.c`, `ptx_ops.c`).
 *
 * A module is parsed once, at load, into functions whose instructions are
 * decoded (opcode, types, modifiers, operands with registers numbered per
 * module). Anything the parser does not understand fails the load with a
 * message naming the line: the interpreter never guesses.
 *
 * Registers are untyped 64-bit slots holding the bit pattern of their
 * declared type, zero-extended. Every function of a module has its own
 * slots, so a call needs no register save (recursion is refused).
 */
#ifndef SIMCUDA_PTX_H
#define SIMCUDA_PTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ptx_type_e {
    PT_NONE = 0,
    PT_U8, PT_U16, PT_U32, PT_U64,
    PT_S8, PT_S16, PT_S32, PT_S64,
    PT_B8, PT_B16, PT_B32, PT_B64, PT_B128,
    PT_F16, PT_F16X2, PT_BF16, PT_BF16X2, PT_F32, PT_F64,
    PT_PRED,
} ptx_type_t;

/* Opcodes: one X-macro row each, so names and the enum stay aligned. */
#define PTX_OPCODES(X) \
    X(abs) X(activemask) X(add) X(addc) X(and) X(atom) X(bar) X(barrier) X(bfe) X(bfi) X(bfind) \
    X(bmsk) X(bra) X(brev) X(brkpt) X(call) X(clz) X(cnot) X(copysign) X(cos) X(cvt) X(cvta) X(div) \
    X(elect) X(ex2) X(exit) X(fence) X(fma) X(fns) X(isspacep) X(ld) X(ldu) X(lg2) X(lop3) X(mad) X(madc) \
    X(match) X(max) X(membar) X(min) X(mov) X(mul) X(mul24) X(mad24) X(nanosleep) X(neg) X(not) X(or) \
    X(popc) X(prefetch) X(prefetchu) X(prmt) X(rcp) X(red) X(redux) X(rem) X(ret) X(rsqrt) X(sad) \
    X(selp) X(set) X(setp) X(shf) X(shfl) X(shl) X(shr) X(sin) X(slct) X(sqrt) X(st) X(sub) X(subc) \
    X(testp) X(trap) X(vote) X(xor) X(dp4a) X(dp2a) X(applypriority) X(discard) X(createpolicy) X(pmevent) \
    X(griddepcontrol) X(getctarank) X(mapa) X(stackrestore) X(stacksave)

typedef enum ptx_op_e {
    PO_INVALID = 0,
#define PTX_OP_ENUM(name) PO_##name,
    PTX_OPCODES(PTX_OP_ENUM)
#undef PTX_OP_ENUM
    PO_COUNT
} ptx_op_t;

/* State spaces. */
typedef enum ptx_space_e {
    PS_GENERIC = 0, PS_GLOBAL, PS_SHARED, PS_LOCAL, PS_CONST, PS_PARAM,
} ptx_space_t;

/* Modifier flags (meaning depends on the opcode, see ptx_exec.c). */
enum {
    PM_LO = 1u << 0, PM_HI = 1u << 1, PM_WIDE = 1u << 2, PM_SAT = 1u << 3, PM_FTZ = 1u << 4,
    PM_APPROX = 1u << 5, PM_TO = 1u << 6, PM_CC = 1u << 7, PM_UNI = 1u << 8, PM_SYNC = 1u << 9,
    PM_SHIFTAMT = 1u << 10, PM_CLAMP = 1u << 11, PM_WRAP = 1u << 12, PM_L = 1u << 13, PM_R = 1u << 14,
    PM_FULL = 1u << 15, PM_RELU = 1u << 16, PM_ARRIVE = 1u << 17, PM_RED = 1u << 18, PM_ALL = 1u << 19,
    PM_NAN = 1u << 20, PM_XORSIGN = 1u << 21, PM_ABS = 1u << 22, PM_ANY = 1u << 23, PM_BALLOT = 1u << 24,
    PM_NOINC = 1u << 25,
};

/* Rounding of floating-point results and of float-to-int conversions. */
typedef enum ptx_round_e { PR_NONE = 0, PR_RN, PR_RZ, PR_RM, PR_RP, PR_RNA, PR_RNI, PR_RZI, PR_RMI, PR_RPI } ptx_round_t;

/* Comparison of setp/set, the boolean combine, sub-operation of atom/red
 * /redux/vote/shfl/bar/prmt/match: stored in `sub`. */
typedef enum ptx_cmp_e {
    PC_NONE = 0, PC_EQ, PC_NE, PC_LT, PC_LE, PC_GT, PC_GE, PC_LO, PC_LS, PC_HI, PC_HS,
    PC_EQU, PC_NEU, PC_LTU, PC_LEU, PC_GTU, PC_GEU, PC_NUM, PC_NAN,
} ptx_cmp_t;

typedef enum ptx_sub_e {
    PSUB_NONE = 0,
    /* atomics and reductions */
    PSUB_ADD, PSUB_MIN, PSUB_MAX, PSUB_INC, PSUB_DEC, PSUB_CAS, PSUB_EXCH, PSUB_AND, PSUB_OR, PSUB_XOR,
    /* shfl */
    PSUB_UP, PSUB_DOWN, PSUB_BFLY, PSUB_IDX,
    /* vote */
    PSUB_VALL, PSUB_VANY, PSUB_VUNI, PSUB_VBALLOT,
    /* prmt */
    PSUB_F4E, PSUB_B4E, PSUB_RC8, PSUB_ECL, PSUB_ECR, PSUB_RC16,
} ptx_sub_t;

typedef enum ptx_opnd_kind_e {
    PK_NONE = 0,
    PK_REG,    /* register `reg` */
    PK_IMM,    /* immediate bits `imm` */
    PK_SREG,   /* special register `sreg` */
    PK_ADDR,   /* [base + imm]: base is a register (reg >= 0) or a symbol address (`sym`) */
    PK_SYM,    /* a symbol's address (mov, cvta) */
    PK_LABEL,  /* branch target: instruction index in `imm` */
    PK_FUNC,   /* call target: function index in `imm` */
    PK_VEC,    /* {r, r, ...}: `vec` holds up to 8 register numbers, PTX_VEC_SINK, PTX_VEC_ZERO */
    PK_LIST,   /* call argument list: `vec` holds up to 8 parameter symbols */
    PK_SINK,   /* `_` */
} ptx_opnd_kind_t;

typedef enum ptx_sreg_e {
    SR_TID_X, SR_TID_Y, SR_TID_Z, SR_NTID_X, SR_NTID_Y, SR_NTID_Z,
    SR_CTAID_X, SR_CTAID_Y, SR_CTAID_Z, SR_NCTAID_X, SR_NCTAID_Y, SR_NCTAID_Z,
    SR_LANEID, SR_WARPID, SR_NWARPID, SR_SMID, SR_NSMID, SR_GRIDID,
    SR_LANEMASK_EQ, SR_LANEMASK_LE, SR_LANEMASK_LT, SR_LANEMASK_GE, SR_LANEMASK_GT,
    SR_CLOCK, SR_CLOCK64, SR_GLOBALTIMER, SR_GLOBALTIMER_LO, SR_DYN_SMEM, SR_TOTAL_SMEM,
    SR_CLUSTERID_X, SR_CLUSTERID_Y, SR_CLUSTERID_Z, SR_NCLUSTERID_X, SR_NCLUSTERID_Y, SR_NCLUSTERID_Z,
    SR_CLUSTER_CTAID_X, SR_CLUSTER_CTAID_Y, SR_CLUSTER_CTAID_Z, SR_CLUSTER_NCTAID_X, SR_CLUSTER_NCTAID_Y,
    SR_CLUSTER_NCTAID_Z, SR_CLUSTER_CTARANK, SR_CLUSTER_NCTARANK, SR_IS_EXPLICIT_CLUSTER,
} ptx_sreg_t;

/* Where a symbol lives; its address is resolved when used. */
typedef struct ptx_sym_s {
    char *name;
    ptx_space_t space;
    uint64_t offset;   /* PARAM: offset in the parameter buffer; SHARED: in the block's
                        * static shared memory; LOCAL: in the thread's frame */
    uint64_t size, align;
    int global_index;  /* GLOBAL/CONST: index into the module's globals; else one of PTX_SYM_* */
    bool is_extern_shared; /* dynamic shared memory: placed after the static part */
} ptx_sym_t;

typedef struct ptx_opnd_s {
    uint8_t kind;
    int8_t neg;        /* `!%p` */
    int16_t vec_count;
    int32_t reg;
    int32_t sym;       /* symbol index in the function's symbol table, -1 if none */
    uint32_t sreg;
    uint64_t imm;
    int32_t vec[8];
} ptx_opnd_t;

/* Vector elements that are not registers: `_` and the constant 0. */
#define PTX_VEC_SINK (-1)
#define PTX_VEC_ZERO (-2)

#define PTX_MAX_OPNDS 6

typedef struct ptx_insn_s {
    uint16_t op;       /* ptx_op_t */
    uint16_t func;     /* owning function */
    uint8_t type, type2; /* ptx_type_t: the instruction's type; cvt's source type */
    uint8_t space;     /* ptx_space_t */
    uint8_t round;     /* ptx_round_t */
    uint8_t cmp;       /* ptx_cmp_t (setp/set), or PC for testp's property */
    uint8_t sub;       /* ptx_sub_t */
    uint8_t boolop;    /* setp combine: 0, PSUB_AND, PSUB_OR, PSUB_XOR */
    uint8_t vec;       /* ld/st vector width: 1, 2, 4 */
    uint8_t nopnd;
    int32_t guard;     /* predicate register, -1 for none */
    bool guard_neg;
    uint32_t mods;     /* PM_* */
    int line;
    ptx_opnd_t o[PTX_MAX_OPNDS];
} ptx_insn_t;

/* `global_index` of symbols that are not module globals. */
enum {
    PTX_SYM_ENTRY_PARAM = -1, /* kernel argument: in the launch's parameter buffer */
    PTX_SYM_FUNC_RET = -2,    /* return value of a .func */
    PTX_SYM_FUNC_PARAM = -3,  /* argument of a .func */
    PTX_SYM_CALL_PARAM = -4,  /* parameter of a call made by this function */
    PTX_SYM_BODY_SHARED = -5, /* .shared declared in a function body */
    PTX_SYM_MODULE_SHARED = -6,
    PTX_SYM_LOCAL = -7,
};

/* A module-level .global/.const variable. */
typedef struct ptx_global_s {
    char *name;
    ptx_space_t space;
    uint64_t size, align;
    unsigned char *init; /* size bytes, NULL: zeros */
    bool is_extern;
} ptx_global_t;

typedef struct ptx_param_s {
    uint64_t offset, size, align;
} ptx_param_t;

typedef struct ptx_func_s {
    char *name;
    bool is_entry;
    bool has_body;
    ptx_insn_t *insns;
    size_t ninsns, cap_insns;
    ptx_param_t *params;     /* .entry parameters, or .func parameters */
    unsigned nparams;
    uint64_t params_size;
    int nret;                /* .func return parameters (0 or 1 symbol) */
    uint64_t ret_size;
    ptx_sym_t *syms;         /* symbols visible in this function (params, locals, shared, module globals) */
    size_t nsyms, cap_syms;
    uint64_t local_size;     /* per-thread frame: .local variables */
    uint64_t shared_size;    /* static shared memory (module-level .shared counted too) */
    unsigned reqntid[3];
    /* Per-lane parameter memory of a .func (its arguments, its return value,
     * the parameters of the calls it makes): `pframe_size` bytes at
     * `pbase`. Registers: `nregs` slots from `reg_base`. For an entry,
     * `regs_total` and `pframe_total` cover everything it can call. */
    uint64_t pframe_size, pbase, pframe_total;
    uint64_t lbase; /* this function's .local variables in the thread's frame */
    unsigned nregs, reg_base, regs_total;
    int visiting; /* call-graph walk */
} ptx_func_t;

typedef struct ptx_module_s {
    ptx_func_t *funcs;
    size_t nfuncs, cap_funcs;
    ptx_global_t *globals;
    size_t nglobals, cap_globals;
    ptx_sym_t *shared_syms;  /* module-level .shared variables */
    size_t nshared, cap_shared;
    /* Shared memory of a block: module-level variables at fixed offsets
     * (`shared_module`), then the largest function-level area, then the
     * dynamic part at `shared_dynamic_base`. Local memory of a thread:
     * every function's variables, `local_total` bytes. */
    uint64_t shared_module, shared_dynamic_base, local_total;
    /* Every function's instructions in one array (`insn->func` says whose);
     * labels and call targets are indices into it. */
    ptx_insn_t *code;
    size_t ncode;
    size_t *func_start;
    int version_major, version_minor;
    int target_sm; /* .target sm_XY: XY */
    /* Filled by the loader: the device address of each global. */
    uintptr_t *global_addrs;
} ptx_module_t;

/* Parses PTX text. Returns the module, or NULL with a one-line message
 * (naming the line and what was not understood) in `err`. */
ptx_module_t *ptx_parse(const char *text, size_t len, char *err, size_t errlen);
void ptx_module_free(ptx_module_t *m);
int ptx_find_func(const ptx_module_t *m, const char *name);

/* One launch of an entry: executes every block in index order. Returns 0, or
 * -1 with a message in `err` (an instruction the interpreter cannot execute,
 * a trap). Faults on device memory crash as on the built-in kernels. */
typedef struct ptx_launch_s {
    const ptx_module_t *module;
    const ptx_func_t *func;
    const unsigned char *params;
    unsigned grid[3], block[3];
    unsigned dyn_shared;
} ptx_launch_t;

int ptx_execute(const ptx_launch_t *launch, char *err, size_t errlen);

/* Lane-instructions executed by every launch so far (the benchmark reads it). */
uint64_t ptx_lane_instructions(void);

extern const char *const ptx_op_names[PO_COUNT];

#endif /* SIMCUDA_PTX_H */

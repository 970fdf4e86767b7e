/* sim_builtin.c: the built-in kernels, found by name in any module.
 *
 * Each kernel is a host function over device memory (host memory in the
 * simulator) with a fixed, documented signature and a modeled cost on the
 * virtual clock: the bytes it touches at SIMCUDA_DEVICE_GBPS, except
 * `sim_spin`, which takes exactly the nanoseconds it is given.
 * Entry point: `sim_builtin_register_all` (once, from the registry).
 */
#include "sim_exec.h"

#include <stdio.h>
#include <stdlib.h>

#include "content_hash.h"

#define ARG(type, args, i) (*(type *)(args)[i])

/* The by-value parameter of `sim_add_u32_struct`: 40 bytes with pointers at
 * offsets 8, 24 and 32, like the argument structs real kernels take. */
typedef struct sim_add_args_s {
    uint64_t n;
    const uint32_t *a;
    uint32_t tag;
    const uint32_t *b;
    uint32_t *out;
} sim_add_args_t;

_Static_assert(sizeof(sim_add_args_t) == 40, "sim_add_u32_struct takes a 40-byte struct");

static uint64_t checksum_u32(const uint32_t *src, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (uint64_t)src[i] * (i + 1);
    return sum;
}

/* sim_fill_u32(uint32_t *dst, uint64_t n, uint32_t seed) */
static void fill_u32(void **args, const simcuda_launch_t *launch, void *user)
{
    uint32_t *dst = ARG(uint32_t *, args, 0);
    uint64_t n = ARG(uint64_t, args, 1);
    uint32_t seed = ARG(uint32_t, args, 2);
    sim_kernel_touch(dst, n * 4, true);
    for (uint64_t i = 0; i < n; i++)
        dst[i] = seed ^ (uint32_t)(i * 2654435761u);
}

static uint64_t fill_u32_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    return sim_clock_transfer_ns(SIM_ENGINE_COMPUTE, ARG(uint64_t, args, 1) * 4);
}

/* sim_checksum_u32(const uint32_t *src, uint64_t n, uint64_t *out) */
static void checksum_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    const uint32_t *src = ARG(const uint32_t *, args, 0);
    uint64_t n = ARG(uint64_t, args, 1);
    sim_kernel_touch(src, n * 4, false);
    sim_kernel_touch(ARG(uint64_t *, args, 2), 8, true);
    ARG(uint64_t *, args, 2)[0] = checksum_u32(src, n);
}

static uint64_t checksum_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    return sim_clock_transfer_ns(SIM_ENGINE_COMPUTE, ARG(uint64_t, args, 1) * 4 + 8);
}

/* sim_axpy_f32(float a, const float *x, float *y, uint64_t n) */
static void axpy_f32(void **args, const simcuda_launch_t *launch, void *user)
{
    float a = ARG(float, args, 0);
    const float *x = ARG(const float *, args, 1);
    float *y = ARG(float *, args, 2);
    uint64_t n = ARG(uint64_t, args, 3);
    sim_kernel_touch(x, n * 4, false);
    sim_kernel_touch(y, n * 4, true);
    for (uint64_t i = 0; i < n; i++)
        y[i] = a * x[i] + y[i];
}

static uint64_t axpy_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    return sim_clock_transfer_ns(SIM_ENGINE_COMPUTE, ARG(uint64_t, args, 3) * 12);
}

/* sim_copy(void *dst, const void *src, uint64_t bytes) */
static void copy_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    unsigned char *dst = ARG(unsigned char *, args, 0);
    const unsigned char *src = ARG(const unsigned char *, args, 1);
    uint64_t bytes = ARG(uint64_t, args, 2);
    sim_kernel_touch(src, bytes, false);
    sim_kernel_touch(dst, bytes, true);
    for (uint64_t i = 0; i < bytes; i++)
        dst[i] = src[i];
}

static uint64_t copy_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    return sim_clock_transfer_ns(SIM_ENGINE_COMPUTE, ARG(uint64_t, args, 2) * 2);
}

/* sim_add_u32_struct(sim_add_args_t args) */
static void add_u32_struct(void **args, const simcuda_launch_t *launch, void *user)
{
    const sim_add_args_t *p = args[0];
    sim_kernel_touch(p->a, p->n * 4, false);
    sim_kernel_touch(p->b, p->n * 4, false);
    sim_kernel_touch(p->out, p->n * 4, true);
    for (uint64_t i = 0; i < p->n; i++)
        p->out[i] = p->a[i] + p->b[i];
}

static uint64_t add_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    const sim_add_args_t *p = args[0];
    return sim_clock_transfer_ns(SIM_ENGINE_COMPUTE, p->n * 12);
}

/* sim_gather_checksum(const uint32_t *const *ptrs, uint64_t count,
 *                     uint64_t n, uint64_t *out): the pointer table itself
 * lives in device memory, where a launch-time scan cannot see it. */
static void gather_checksum(void **args, const simcuda_launch_t *launch, void *user)
{
    const uint32_t *const *ptrs = ARG(const uint32_t *const *, args, 0);
    uint64_t count = ARG(uint64_t, args, 1), n = ARG(uint64_t, args, 2);
    uint64_t *out = ARG(uint64_t *, args, 3);
    sim_kernel_touch(ptrs, count * sizeof *ptrs, false);
    sim_kernel_touch(out, count * 8, true);
    for (uint64_t k = 0; k < count; k++) {
        sim_kernel_touch(ptrs[k], n * 4, false);
        out[k] = checksum_u32(ptrs[k], n);
    }
}

static uint64_t gather_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    uint64_t count = ARG(uint64_t, args, 1), n = ARG(uint64_t, args, 2);
    return sim_clock_transfer_ns(SIM_ENGINE_COMPUTE, count * (n * 4 + 16));
}

/* sim_spin(uint64_t ns): modeled time on the virtual clock, a busy wait on
 * the real one (so that it really is slow for concurrency tests). */
static void spin(void **args, const simcuda_launch_t *launch, void *user)
{
    if (sim_clock_is_virtual())
        return;
    uint64_t until = sim_clock_wall_ns() + ARG(uint64_t, args, 0);
    while (sim_clock_wall_ns() < until)
        ;
}

static uint64_t spin_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    return ARG(uint64_t, args, 0);
}

/* vramshim_content_hash(const void *data, uint64_t bytes, uint64_t *lanes):
 * the shim's device-side content hash, computed with the shim's own header.
 * It adds into the lanes, as the real kernel's atomic adds do: the caller
 * zeroes them first and applies `vs_content_hash_final` on the host. */
static void content_hash_kernel(void **args, const simcuda_launch_t *launch, void *user)
{
    const void *data = ARG(const void *, args, 0);
    uint64_t bytes = ARG(uint64_t, args, 1);
    uint64_t *lanes = ARG(uint64_t *, args, 2);
    sim_kernel_touch(data, bytes, false);
    sim_kernel_touch(lanes, 16, true);
    vs_content_hash_t h = {{0, 0}};
    vs_content_hash_update(&h, 0, data, bytes);
    lanes[0] += h.lane[0];
    lanes[1] += h.lane[1];
}

static uint64_t content_hash_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    return sim_clock_transfer_ns(SIM_ENGINE_COMPUTE, ARG(uint64_t, args, 1) + 16);
}

/* sim_set_conditional(uint64_t handle, uint32_t value): what
 * `cudaGraphSetConditional` does in a real kernel. An unknown handle is an
 * unrecoverable error of the kernel, as on a GPU. */
static void set_conditional(void **args, const simcuda_launch_t *launch, void *user)
{
    if (!sim_cond_set(ARG(uint64_t, args, 0), ARG(uint32_t, args, 1))) {
        fprintf(stderr, "simcuda: sim_set_conditional: not a conditional handle\n");
        abort();
    }
}

/* sim_while_countdown(uint64_t handle, uint32_t *counter): decrements
 * `*counter` and sets the condition to whether it is still non-zero: the
 * body of a WHILE node that runs `*counter` times. */
static void while_countdown(void **args, const simcuda_launch_t *launch, void *user)
{
    uint32_t *counter = ARG(uint32_t *, args, 1);
    uint32_t left = *counter > 0 ? *counter - 1 : 0;
    *counter = left;
    if (!sim_cond_set(ARG(uint64_t, args, 0), left != 0)) {
        fprintf(stderr, "simcuda: sim_while_countdown: not a conditional handle\n");
        abort();
    }
}

static uint64_t tiny_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    return sim_clock_transfer_ns(SIM_ENGINE_COMPUTE, 8);
}

/* name, parameter sizes, body, cost */
#define SIM_BUILTIN_LIST(X)                                                                               \
    X(sim_fill_u32, ((size_t[]){sizeof(uint32_t *), 8, 4}), fill_u32, fill_u32_cost)                     \
    X(sim_checksum_u32, ((size_t[]){sizeof(void *), 8, sizeof(void *)}), checksum_kernel, checksum_cost) \
    X(sim_axpy_f32, ((size_t[]){4, sizeof(void *), sizeof(void *), 8}), axpy_f32, axpy_cost)            \
    X(sim_copy, ((size_t[]){sizeof(void *), sizeof(void *), 8}), copy_kernel, copy_cost)                \
    X(sim_add_u32_struct, ((size_t[]){sizeof(sim_add_args_t)}), add_u32_struct, add_cost)               \
    X(sim_gather_checksum, ((size_t[]){sizeof(void *), 8, 8, sizeof(void *)}), gather_checksum, gather_cost) \
    X(sim_spin, ((size_t[]){8}), spin, spin_cost)                                                        \
    X(sim_set_conditional, ((size_t[]){8, 4}), set_conditional, tiny_cost)                              \
    X(sim_while_countdown, ((size_t[]){8, sizeof(void *)}), while_countdown, tiny_cost)                 \
    X(vramshim_content_hash, ((size_t[]){sizeof(void *), 8, sizeof(void *)}), content_hash_kernel, content_hash_cost)

void sim_builtin_register_all(void)
{
#define SIM_REGISTER_BUILTIN(kname, sizes, body, cost_fn)                                                  \
    {                                                                                                     \
        const size_t *param_sizes = sizes;                                                                \
        simcuda_kernel_desc_t desc = {                                                                    \
            .name = #kname,                                                                               \
            .param_count = (unsigned)(sizeof(sizes) / sizeof(size_t)),                                    \
            .param_sizes = param_sizes,                                                                   \
            .fn = body,                                                                                   \
            .cost = cost_fn,                                                                              \
        };                                                                                                \
        if (simcuda_register_kernel(&desc) != 0)                                                          \
            fprintf(stderr, "simcuda: cannot register the built-in kernel %s\n", #kname);                 \
    }
    SIM_BUILTIN_LIST(SIM_REGISTER_BUILTIN)
#undef SIM_REGISTER_BUILTIN
}

/* sim_link.c: the JIT linker (`cuLink*`), tensor-map encoding and managed
 * memory prefetch: entry points libraries such as cuBLASLt look up by name
 * at start-up and refuse to start without.
 *
 * The linker checks each input as the real driver does (PTX is parsed, a
 * cubin must be a CUDA ELF, a fatbin must carry the container magic) and
 * `cuLinkComplete` writes a fatbin container holding the inputs, which the
 * module loader (sim_module.c) reads like one nvcc wrote. simcuda's loader
 * runs one PTX module per image, so linking two PTX inputs (separate
 * compilation with `extern` references) is refused with a line saying so.
 * Host objects, libraries and LTO IR are refused the same way.
 *
 * `cuTensorMapEncodeTiled` validates every documented constraint and
 * records the description in the 128-byte map; the interpreter has no
 * tensor-memory-access instructions, so no kernel reads it.
 *
 * `cuMemPrefetchAsync` (both forms) accepts managed memory only, as the
 * driver does; the simulated device shares the host's pages, so the
 * migration itself has nothing to move and is a stream-ordered no-op.
 */
#include "ptx.h"
#include "sim_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_LINK_MAGIC 0x4c494e4bu /* "LINK" */

#define FATBIN_MAGIC 0xba55ed50u
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2

/* The container layout nvcc writes (and sim_module.c reads). */
typedef struct link_fatbin_header_s {
    uint32_t magic;
    uint16_t version, header_size;
    uint64_t files_size;
} link_fatbin_header_t;

typedef struct link_fatbin_entry_s {
    uint16_t kind, version;
    uint32_t header_size;
    uint64_t payload_size;
    uint32_t compressed_size, unknown1;
    uint32_t unknown2, sm_version;
    uint32_t bit_width, unknown3;
    uint64_t flags, unknown5, uncompressed_size;
} link_fatbin_entry_t;

typedef struct link_input_s {
    uint16_t kind;
    unsigned sm;
    unsigned char *data;
    size_t size;
} link_input_t;

struct CUlinkState_st {
    uint32_t magic;
    link_input_t *inputs;
    size_t ninputs;
    size_t nptx;
    char *error_log; /* CU_JIT_ERROR_LOG_BUFFER of cuLinkCreate */
    size_t error_log_size;
    unsigned char *output; /* valid until cuLinkDestroy */
};

/* Reads the options every linker call takes; only the error log is acted on. */
static CUresult link_options(unsigned int count, const CUjit_option *options, void **values, char **log,
                             size_t *log_size)
{
    if (count > 0 && (options == NULL || values == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < count; i++) {
        if ((int)options[i] < 0 || options[i] >= CU_JIT_NUM_OPTIONS)
            return CUDA_ERROR_INVALID_VALUE;
        if (options[i] == CU_JIT_ERROR_LOG_BUFFER && log != NULL)
            *log = values[i];
        else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES && log_size != NULL)
            *log_size = (size_t)(uintptr_t)values[i];
    }
    return CUDA_SUCCESS;
}

static void link_log(CUlinkState state, const char *message)
{
    fprintf(stderr, "simcuda: %s\n", message);
    if (state->error_log != NULL && state->error_log_size > 0)
        snprintf(state->error_log, state->error_log_size, "%s", message);
}

static bool link_valid(CUlinkState state)
{
    return state != NULL && state->magic == SIM_LINK_MAGIC;
}

SIM_EXPORT CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                    CUlinkState *stateOut)
{
    CUresult entry = SIM_ENTER(cuLinkCreate_v2, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (stateOut == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    struct CUlinkState_st *state = calloc(1, sizeof(*state));
    if (state == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    result = link_options(numOptions, options, optionValues, &state->error_log, &state->error_log_size);
    if (result != CUDA_SUCCESS) {
        free(state);
        return result;
    }
    state->magic = SIM_LINK_MAGIC;
    *stateOut = state;
    return CUDA_SUCCESS;
}

/* The `.target sm_NN` of a PTX text, 0 when it has none. */
static unsigned ptx_target(const char *text)
{
    const char *target = strstr(text, ".target");
    unsigned sm = 0;
    if (target != NULL)
        (void)sscanf(target, ".target sm_%u", &sm);
    return sm;
}

/* Checks one input and keeps a copy of it. */
static CUresult link_add(CUlinkState state, CUjitInputType type, const void *data, size_t size, const char *name)
{
    const char *label = name != NULL ? name : "(unnamed)";
    char message[600];
    link_input_t input = {0};
    switch (type) {
    case CU_JIT_INPUT_PTX: {
        /* PTX may be given with or without its terminating NUL. */
        size_t len = strnlen(data, size);
        char err[400] = "";
        ptx_module_t *m = ptx_parse(data, len, err, sizeof(err));
        if (m == NULL) {
            snprintf(message, sizeof(message), "cuLinkAddData: PTX input %s does not compile: %s", label, err);
            link_log(state, message);
            return CUDA_ERROR_INVALID_PTX;
        }
        ptx_module_free(m);
        input.kind = FATBIN_KIND_PTX;
        input.size = len;
        break;
    }
    case CU_JIT_INPUT_CUBIN: {
        const unsigned char *elf = data;
        uint16_t machine = 0;
        if (size < 64 || memcmp(elf, "\177ELF", 4) != 0 || elf[4] != 2)
            return CUDA_ERROR_INVALID_IMAGE;
        memcpy(&machine, elf + 18, 2);
        if (machine != 190)
            return CUDA_ERROR_INVALID_IMAGE;
        input.kind = FATBIN_KIND_ELF;
        input.size = size;
        break;
    }
    case CU_JIT_INPUT_FATBINARY: {
        link_fatbin_header_t header;
        if (size < sizeof(header))
            return CUDA_ERROR_INVALID_IMAGE;
        memcpy(&header, data, sizeof(header));
        if (header.magic != FATBIN_MAGIC || header.header_size < sizeof(header) ||
            header.header_size + header.files_size > size)
            return CUDA_ERROR_INVALID_IMAGE;
        input.kind = 0; /* entries copied whole */
        input.size = header.files_size;
        data = (const unsigned char *)data + header.header_size;
        break;
    }
    case CU_JIT_INPUT_OBJECT:
    case CU_JIT_INPUT_LIBRARY:
    case CU_JIT_INPUT_NVVM:
        snprintf(message, sizeof(message),
                 "cuLinkAddData: input %s is a host object, library or LTO IR, which simcuda cannot link "
                 "(it links PTX, cubins and fatbins)",
                 label);
        link_log(state, message);
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    input.data = malloc(input.size + 1);
    link_input_t *grown = realloc(state->inputs, (state->ninputs + 1) * sizeof(*grown));
    if (input.data == NULL || grown == NULL) {
        free(input.data);
        if (grown != NULL)
            state->inputs = grown;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(input.data, data, input.size);
    input.data[input.size] = '\0';
    if (input.kind == FATBIN_KIND_PTX) {
        input.sm = ptx_target((const char *)input.data);
        state->nptx++;
    }
    state->inputs = grown;
    state->inputs[state->ninputs++] = input;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                     const char *name, unsigned int numOptions, CUjit_option *options,
                                     void **optionValues)
{
    CUresult entry = SIM_ENTER(cuLinkAddData_v2, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!link_valid(state))
        return CUDA_ERROR_INVALID_HANDLE;
    if (data == NULL || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result = link_options(numOptions, options, optionValues, NULL, NULL);
    if (result != CUDA_SUCCESS)
        return result;
    return link_add(state, type, data, size, name);
}

SIM_EXPORT CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                                     unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    CUresult entry = SIM_ENTER(cuLinkAddFile_v2, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!link_valid(state))
        return CUDA_ERROR_INVALID_HANDLE;
    if (path == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result = link_options(numOptions, options, optionValues, NULL, NULL);
    if (result != CUDA_SUCCESS)
        return result;
    FILE *file = fopen(path, "rbe");
    if (file == NULL)
        return CUDA_ERROR_FILE_NOT_FOUND;
    size_t capacity = 1 << 16, size = 0;
    unsigned char *data = malloc(capacity);
    while (data != NULL) {
        size_t got = fread(data + size, 1, capacity - size, file);
        size += got;
        if (got == 0)
            break;
        if (size == capacity) {
            unsigned char *grown = realloc(data, capacity * 2);
            if (grown == NULL) {
                free(data);
                data = NULL;
                break;
            }
            data = grown;
            capacity *= 2;
        }
    }
    bool failed = ferror(file) != 0;
    fclose(file);
    if (data == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (failed || size == 0) {
        free(data);
        return CUDA_ERROR_FILE_NOT_FOUND;
    }
    result = link_add(state, type, data, size, path);
    free(data);
    return result;
}

SIM_EXPORT CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    CUresult entry = SIM_ENTER(cuLinkComplete, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!link_valid(state))
        return CUDA_ERROR_INVALID_HANDLE;
    if (cubinOut == NULL || sizeOut == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (state->ninputs == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (state->nptx > 1) {
        char message[200];
        snprintf(message, sizeof(message),
                 "cuLinkComplete: %zu PTX inputs; simcuda runs one PTX module per image and cannot resolve "
                 "references between them",
                 state->nptx);
        link_log(state, message);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    size_t files = 0;
    for (size_t i = 0; i < state->ninputs; i++)
        files += state->inputs[i].kind != 0 ? sizeof(link_fatbin_entry_t) + ((state->inputs[i].size + 8) & ~(size_t)7)
                                            : state->inputs[i].size;
    link_fatbin_header_t header = {FATBIN_MAGIC, 1, sizeof(header), files};
    unsigned char *out = calloc(1, sizeof(header) + files);
    if (out == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(out, &header, sizeof(header));
    unsigned char *p = out + sizeof(header);
    for (size_t i = 0; i < state->ninputs; i++) {
        const link_input_t *in = &state->inputs[i];
        if (in->kind == 0) {
            memcpy(p, in->data, in->size);
            p += in->size;
            continue;
        }
        size_t padded = (in->size + 8) & ~(size_t)7; /* PTX keeps a NUL */
        link_fatbin_entry_t e = {0};
        e.kind = in->kind;
        e.version = 0x0101;
        e.header_size = sizeof(e);
        e.payload_size = padded;
        e.sm_version = in->sm != 0 ? in->sm : 90;
        e.bit_width = 64;
        memcpy(p, &e, sizeof(e));
        memcpy(p + sizeof(e), in->data, in->size);
        p += sizeof(e) + padded;
    }
    free(state->output);
    state->output = out;
    *cubinOut = out;
    *sizeOut = sizeof(header) + files;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLinkDestroy(CUlinkState state)
{
    CUresult entry = SIM_ENTER(cuLinkDestroy, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!link_valid(state))
        return CUDA_ERROR_INVALID_HANDLE;
    for (size_t i = 0; i < state->ninputs; i++)
        free(state->inputs[i].data);
    free(state->inputs);
    free(state->output);
    state->magic = 0;
    free(state);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Tensor maps (cuda.h's documented constraints for the tiled form)
 * ------------------------------------------------------------------------ */

#define SIM_TENSOR_MAP_MAGIC 0x544d4150u /* "TMAP" */

typedef struct sim_tensor_map_s {
    uint32_t magic;
    uint32_t data_type, rank, interleave, swizzle, l2_promotion, oob_fill;
    uint32_t box_dim[5], element_strides[5];
    uint64_t global_address;
    uint64_t global_dim[5];
} sim_tensor_map_t;

_Static_assert(sizeof(sim_tensor_map_t) <= sizeof(CUtensorMap), "the description fits in a CUtensorMap");

static unsigned tensor_element_size(CUtensorMapDataType type)
{
    switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8:
        return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
        return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
        return 4;
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
        return 8;
    default:
        return 0; /* the packed sub-byte types: not on this device */
    }
}

SIM_EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                           cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                                           const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
                                           const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
                                           CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                           CUtensorMapFloatOOBfill oobFill)
{
    CUresult entry = SIM_ENTER(cuTensorMapEncodeTiled, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    unsigned element = tensor_element_size(tensorDataType);
    if (tensorMap == NULL || ((uintptr_t)tensorMap & 63) != 0 || element == 0)
        return CUDA_ERROR_INVALID_VALUE;
    bool interleaved = interleave != CU_TENSOR_MAP_INTERLEAVE_NONE;
    if ((int)interleave < 0 || interleave > CU_TENSOR_MAP_INTERLEAVE_32B || (int)swizzle < 0 ||
        swizzle > CU_TENSOR_MAP_SWIZZLE_128B || (int)l2Promotion < 0 || l2Promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
        (int)oobFill < 0 || oobFill > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
        return CUDA_ERROR_INVALID_VALUE;
    if (tensorRank < (interleaved ? 3u : 1u) || tensorRank > 5)
        return CUDA_ERROR_INVALID_VALUE;
    if (globalAddress == NULL || ((uintptr_t)globalAddress & (interleaved ? 31u : 15u)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (globalDim == NULL || boxDim == NULL || elementStrides == NULL || (tensorRank > 1 && globalStrides == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    /* Integer data may not ask for NaN fill. */
    if (oobFill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA &&
        tensorDataType <= CU_TENSOR_MAP_DATA_TYPE_UINT64)
        return CUDA_ERROR_INVALID_VALUE;
    sim_tensor_map_t map = {0};
    for (cuuint32_t i = 0; i < tensorRank; i++) {
        if (globalDim[i] == 0 || globalDim[i] > (1ull << 32))
            return CUDA_ERROR_INVALID_VALUE;
        if (boxDim[i] == 0 || boxDim[i] > 256)
            return CUDA_ERROR_INVALID_VALUE;
        if (elementStrides[i] == 0 || elementStrides[i] > 8)
            return CUDA_ERROR_INVALID_VALUE;
        map.global_dim[i] = globalDim[i];
        map.box_dim[i] = boxDim[i];
        map.element_strides[i] = elementStrides[i];
    }
    for (cuuint32_t i = 0; i + 1 < tensorRank; i++) {
        /* Each stride is a multiple of 16 (32 interleaved) below 2^40 and
         * covers the dimension before it. */
        cuuint64_t stride = globalStrides[i];
        if (stride % (interleaved ? 32u : 16u) != 0 || stride >= (1ull << 40))
            return CUDA_ERROR_INVALID_VALUE;
        cuuint64_t inner = i == 0 ? globalDim[0] * element : globalStrides[i - 1] * globalDim[i];
        if (stride < inner)
            return CUDA_ERROR_INVALID_VALUE;
    }
    /* Without interleave, the inner box is a multiple of 16 bytes and, when
     * swizzled, at most the swizzle span. */
    if (!interleaved) {
        uint64_t inner = (uint64_t)boxDim[0] * element;
        if (inner % 16 != 0)
            return CUDA_ERROR_INVALID_VALUE;
        static const uint64_t span[] = {0, 32, 64, 128};
        if (swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && swizzle <= CU_TENSOR_MAP_SWIZZLE_128B && inner > span[swizzle])
            return CUDA_ERROR_INVALID_VALUE;
    }
    map.magic = SIM_TENSOR_MAP_MAGIC;
    map.data_type = tensorDataType;
    map.rank = tensorRank;
    map.interleave = interleave;
    map.swizzle = swizzle;
    map.l2_promotion = l2Promotion;
    map.oob_fill = oobFill;
    map.global_address = (uint64_t)(uintptr_t)globalAddress;
    memset(tensorMap, 0, sizeof(*tensorMap));
    memcpy(tensorMap, &map, sizeof(map));
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Managed memory prefetch
 * ------------------------------------------------------------------------ */

static CUresult prefetch(CUdeviceptr ptr, size_t count, int device, bool host, CUstream handle)
{
    if (count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t base = 0;
    size_t size = 0;
    if (sim_mem_classify((uintptr_t)ptr, NULL) != SIM_MEM_MANAGED ||
        sim_mem_range((uintptr_t)ptr, &base, &size) != 0 || (uintptr_t)ptr + count > base + size)
        return CUDA_ERROR_INVALID_VALUE;
    if (!host && (device < 0 || device >= sim_device_count))
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult result = CUDA_SUCCESS;
    if (sim_stream_resolve(handle, false, &result) == NULL)
        return result;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuMemPrefetchAsync, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    return prefetch(devPtr, count, dstDevice, dstDevice == CU_DEVICE_CPU, hStream);
}

SIM_EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                          unsigned int flags, CUstream hStream)
{
    CUresult entry = SIM_ENTER(cuMemPrefetchAsync_v2, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    switch (location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return prefetch(devPtr, count, location.id, false, hStream);
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return prefetch(devPtr, count, 0, true, hStream);
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

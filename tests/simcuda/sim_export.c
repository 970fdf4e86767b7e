/* sim_export.c: `cuGetExportTable`, the driver's private tables for the
 * CUDA runtime and NVRTC.
 *
 * libcudart 13 (shared and static) asks for seven tables by UUID before its
 * first API call, and NVRTC 13 asks for one. Each table is an array of
 * pointers; most begin with their own size in bytes. The layouts were
 * established by logging what the runtime asks for and calls
 * (`SIMCUDA_LOG_EXPORT=1` prints every request and call) and by the public
 * descriptions of peer projects that run the runtime on drivers of their own.
 * README.md lists what each slot does. A slot whose purpose is unknown holds a
 * stub that names the table and slot on stderr and returns
 * CUDA_ERROR_NOT_SUPPORTED, so an unexpected call is never silent; an
 * unknown UUID is CUDA_ERROR_INVALID_VALUE, the tables the runtime must not
 * use are CUDA_ERROR_NOT_FOUND.
 *
 * None of these slots allocates device memory, copies or launches: module
 * loading goes through `sim_module_load_image`, the same loader as
 * `cuModuleLoadData`, and the primary-context slot through
 * `cuDevicePrimaryCtxRetain`.
 * Entry point: `cuGetExportTable`.
 */
#include "sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_enabled = -1;

static bool export_log(void)
{
    if (log_enabled < 0) {
        const char *v = getenv("SIMCUDA_LOG_EXPORT");
        log_enabled = v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
    }
    return log_enabled;
}

/* `__extension__`: ISO C has no function-to-object pointer conversion, but
 * the tables are arrays of `void *` by definition. */
#define SLOT(fn) (__extension__(void *)(fn))

#define EXPORT_TRACE(...)                                                                                  \
    do {                                                                                                   \
        if (export_log())                                                                                  \
            fprintf(stderr, "simcuda: export " __VA_ARGS__);                                              \
    } while (0)

/* ------------------------------------------------------------------------
 * Slots nobody has seen called: loud stubs, one per (table, slot).
 * ------------------------------------------------------------------------ */

#define UNKNOWN_SLOT(table, slot)                                                                          \
    static CUresult unknown_##table##_##slot(void)                                                         \
    {                                                                                                      \
        fprintf(stderr, "simcuda: the runtime called slot %d of export table %s, which simcuda does not "    \
                        "implement\n", slot, #table);                                                     \
        return CUDA_ERROR_NOT_SUPPORTED;                                                                   \
    }

UNKNOWN_SLOT(cudart, 3)
UNKNOWN_SLOT(cudart, 4)
UNKNOWN_SLOT(cudart, 5)
UNKNOWN_SLOT(cudart, 9)
UNKNOWN_SLOT(cudart, 10)
UNKNOWN_SLOT(cudart, 11)
UNKNOWN_SLOT(tools_tls, 1)
UNKNOWN_SLOT(tools_tls, 3)
UNKNOWN_SLOT(tools_hooks, 1)
UNKNOWN_SLOT(tools_hooks, 3)
UNKNOWN_SLOT(tools_hooks, 4)
UNKNOWN_SLOT(tools_hooks, 5)
UNKNOWN_SLOT(ctx_storage, 3)
UNKNOWN_SLOT(ctx_checks, 1)
UNKNOWN_SLOT(ctx_id, 1)
UNKNOWN_SLOT(ctx_id, 2)
UNKNOWN_SLOT(ctx_id, 3)
UNKNOWN_SLOT(integrity, 2)

/* ------------------------------------------------------------------------
 * Runtime interface, 6bd5fb6c-5bf4-e74a-8987-d93912fd9df9
 * ------------------------------------------------------------------------ */

/* Slot 1: a module from a fatbin wrapper (`__fatBinC_Wrapper_t`, magic
 * 0x466243B1), as `__cudaRegisterFatBinary` hands it over. */
static CUresult cudart_module_from_wrapper(CUmodule *module, const void *wrapper)
{
    EXPORT_TRACE("cudart[1] module from wrapper %p\n", wrapper);
    return sim_module_load_image(module, wrapper);
}

/* Slot 2: retains the device's primary context. */
static CUresult cudart_primary_ctx(CUcontext *pctx, CUdevice dev)
{
    EXPORT_TRACE("cudart[2] primary context of device %d\n", dev);
    return cuDevicePrimaryCtxRetain(pctx, dev);
}

/* Slot 6: the same with extra arguments (JIT options); only their absence
 * is understood. */
static CUresult cudart_module_from_wrapper_ext(CUmodule *module, const void *wrapper, void *arg3, void *arg4,
                                               unsigned arg5)
{
    EXPORT_TRACE("cudart[6] module from wrapper %p (%p %p %u)\n", wrapper, arg3, arg4, arg5);
    if (arg3 != NULL || arg4 != NULL || arg5 != 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    return sim_module_load_image(module, wrapper);
}

/* Slot 7: called with one word at start-up; nothing to do. */
static CUresult cudart_slot7(uintptr_t arg)
{
    EXPORT_TRACE("cudart[7] (%#lx)\n", (unsigned long)arg);
    return CUDA_SUCCESS;
}

/* Slot 8: a module from a fatbin container (magic 0xBA55ED50), arguments
 * in the other order. */
static CUresult cudart_module_from_fatbin(const void *fatbin, CUmodule *module, void *arg3, void *arg4,
                                          unsigned arg5)
{
    EXPORT_TRACE("cudart[8] module from fatbin %p (%p %p %u)\n", fatbin, arg3, arg4, arg5);
    if (arg3 != NULL || arg4 != NULL || arg5 != 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    return sim_module_load_image(module, fatbin);
}

/* Slot 12: loads the driver's compilers (PTX JIT); the interpreter needs
 * none. */
static CUresult cudart_load_compilers(void)
{
    EXPORT_TRACE("cudart[12] load compilers\n");
    return CUDA_SUCCESS;
}

static const void *cudart_table[13] = {
    (void *)sizeof(cudart_table),
    SLOT(cudart_module_from_wrapper),
    SLOT(cudart_primary_ctx),
    SLOT(unknown_cudart_3),
    SLOT(unknown_cudart_4),
    SLOT(unknown_cudart_5),
    SLOT(cudart_module_from_wrapper_ext),
    SLOT(cudart_slot7),
    SLOT(cudart_module_from_fatbin),
    SLOT(unknown_cudart_9),
    SLOT(unknown_cudart_10),
    SLOT(unknown_cudart_11),
    SLOT(cudart_load_compilers),
};

/* ------------------------------------------------------------------------
 * Tools: TLS 42d85a81-23f6-cb47-8298-f6e78a3aecdc and runtime callback hooks
 * a094798c-2e74-2e74-93f2-0800200c0a66 (the runtime reads the sizes and
 * asks for two zeroed buffers where profilers would write).
 * ------------------------------------------------------------------------ */

/* TLS slot 2: the calling thread's current context (NULL when none), as
 * `cuCtxGetCurrent` answers. The static runtime inside cuBLASLt calls it
 * for every GEMM candidate, then asks the context table below for the
 * context's id; with an error here cuBLASLt finds no kernel at all and
 * `cublasSgemm` fails with CUBLAS_STATUS_NOT_SUPPORTED ("Failed to query
 * heuristics") before it looks a kernel up. */
static CUresult tools_tls_current_ctx(CUcontext *pctx)
{
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = sim_ctx_current();
    EXPORT_TRACE("tools_tls[2] current context %p\n", (void *)*pctx);
    return CUDA_SUCCESS;
}

static const void *tools_tls_table[4] = {
    (void *)sizeof(tools_tls_table),
    SLOT(unknown_tools_tls_1),
    SLOT(tools_tls_current_ctx),
    SLOT(unknown_tools_tls_3),
};

/* ------------------------------------------------------------------------
 * Context, 21318c60-9714-3248-8ca6-41ff7324c8f2: asked for by cuBLASLt's
 * static runtime, which uses slot 4 only. The real table is longer; only
 * the slots up to the one used are given, and the size word says so.
 * ------------------------------------------------------------------------ */

/* Slot 4: the context's unique id (`cuCtxGetId`; NULL is the current
 * context), the key of cuBLASLt's per-context kernel registry. */
static CUresult ctx_id(CUcontext ctx, unsigned long long *id)
{
    CUresult result = cuCtxGetId(ctx, id);
    EXPORT_TRACE("ctx_id[4] ctx %p: %d\n", (void *)ctx, (int)result);
    return result;
}

static const void *ctx_id_table[5] = {
    (void *)sizeof(ctx_id_table),
    SLOT(unknown_ctx_id_1),
    SLOT(unknown_ctx_id_2),
    SLOT(unknown_ctx_id_3),
    SLOT(ctx_id),
};

static uint32_t hooks_buffer_a[1024];
static uint32_t hooks_buffer_b[14];

static void tools_hooks_buffer_a(void **ptr, size_t *size)
{
    EXPORT_TRACE("tools_hooks[2]\n");
    *ptr = hooks_buffer_a;
    *size = sizeof(hooks_buffer_a) / sizeof(hooks_buffer_a[0]);
}

static void tools_hooks_buffer_b(void **ptr, size_t *size)
{
    EXPORT_TRACE("tools_hooks[6]\n");
    *ptr = hooks_buffer_b;
    *size = sizeof(hooks_buffer_b) / sizeof(hooks_buffer_b[0]);
}

static const void *tools_hooks_table[7] = {
    (void *)sizeof(tools_hooks_table),
    SLOT(unknown_tools_hooks_1),
    SLOT(tools_hooks_buffer_a),
    SLOT(unknown_tools_hooks_3),
    SLOT(unknown_tools_hooks_4),
    SLOT(unknown_tools_hooks_5),
    SLOT(tools_hooks_buffer_b),
};

/* ------------------------------------------------------------------------
 * Context-local storage, c693336e-1121-df11-a8c3-68f355d89593: the runtime
 * keeps its per-context state under a key of its own. This table has no
 * size word. Entries live until the process exits.
 * ------------------------------------------------------------------------ */

typedef void (*cls_dtor_fn)(CUcontext, void *, void *);

typedef struct cls_entry_s {
    CUcontext ctx;
    void *key, *value;
    cls_dtor_fn dtor;
    struct cls_entry_s *next;
} cls_entry_t;

static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;
static cls_entry_t *cls_entries; /* guarded by cls_lock */

static CUresult cls_context(CUcontext *ctx)
{
    if (*ctx != NULL)
        return sim_ctx_valid(*ctx) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    return sim_ctx_require(ctx);
}

static CUresult cls_put(CUcontext ctx, void *key, void *value, cls_dtor_fn dtor)
{
    CUresult result = cls_context(&ctx);
    EXPORT_TRACE("ctx_storage[0] put ctx %p key %p value %p\n", (void *)ctx, key, value);
    if (result != CUDA_SUCCESS)
        return result;
    pthread_mutex_lock(&cls_lock);
    cls_entry_t *e = cls_entries;
    while (e != NULL && (e->ctx != ctx || e->key != key))
        e = e->next;
    if (e == NULL) {
        e = calloc(1, sizeof(*e));
        if (e == NULL) {
            pthread_mutex_unlock(&cls_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        e->ctx = ctx;
        e->key = key;
        e->next = cls_entries;
        cls_entries = e;
    }
    e->value = value;
    e->dtor = dtor;
    pthread_mutex_unlock(&cls_lock);
    return CUDA_SUCCESS;
}

static CUresult cls_delete(CUcontext ctx, void *key)
{
    CUresult result = cls_context(&ctx);
    EXPORT_TRACE("ctx_storage[1] delete ctx %p key %p\n", (void *)ctx, key);
    if (result != CUDA_SUCCESS)
        return result;
    pthread_mutex_lock(&cls_lock);
    for (cls_entry_t **p = &cls_entries; *p != NULL; p = &(*p)->next) {
        if ((*p)->ctx == ctx && (*p)->key == key) {
            cls_entry_t *dead = *p;
            *p = dead->next;
            free(dead);
            break;
        }
    }
    pthread_mutex_unlock(&cls_lock);
    return CUDA_SUCCESS;
}

static CUresult cls_get(void **value, CUcontext ctx, void *key)
{
    CUresult result = cls_context(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    result = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&cls_lock);
    for (cls_entry_t *e = cls_entries; e != NULL; e = e->next) {
        if (e->ctx == ctx && e->key == key) {
            *value = e->value;
            result = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&cls_lock);
    EXPORT_TRACE("ctx_storage[2] get ctx %p key %p: %d\n", (void *)ctx, key, result);
    return result;
}

static const void *ctx_storage_table[4] = {
    SLOT(cls_put),
    SLOT(cls_delete),
    SLOT(cls_get),
    SLOT(unknown_ctx_storage_3),
};

/* ------------------------------------------------------------------------
 * Context checks, 263e8860-7cd2-6143-92f6-bbd5006dfa7e: flags of a context
 * that are never set on this driver.
 * ------------------------------------------------------------------------ */

static CUresult ctx_check(CUcontext ctx, uint32_t *flags, const void **extra)
{
    EXPORT_TRACE("ctx_checks[2] ctx %p\n", (void *)ctx);
    (void)extra;
    if (flags != NULL)
        *flags = 0;
    return CUDA_SUCCESS;
}

static uint32_t ctx_check_global(void)
{
    EXPORT_TRACE("ctx_checks[3]\n");
    return 0;
}

static const void *ctx_checks_table[4] = {
    (void *)sizeof(ctx_checks_table),
    SLOT(unknown_ctx_checks_1),
    SLOT(ctx_check),
    SLOT(ctx_check_global),
};

/* ------------------------------------------------------------------------
 * Integrity check, d4082055-bde6-704b-8d34-ba123c66e1f2.
 *
 * The runtime calls slot 1 with a version and the time and compares the 16
 * bytes written with what it computes itself. Versions ending in 0 and 1
 * expect constants; later ones HMAC-MD2 (RFC 1319, RFC 2104; MD2's block is
 * 16 bytes, so the 16-byte key needs no padding) over the caller's view of
 * the process (driver version, request version, pid, thread, the addresses
 * of the runtime-interface table, of this table and of this function, the
 * time) followed by each device's UUID and PCI domain, bus and device.
 * ------------------------------------------------------------------------ */

/* RFC 1319's permutation of 0..255 built from the digits of pi. */
static const uint8_t md2_s[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,   243, 192, 199,
    115, 140, 152, 147, 43,  217, 188, 76,  130, 202, 30,  155, 87,  60,  253, 212, 224, 22,  103, 66,  111, 24,
    138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160, 251, 245, 142, 187, 47,  238, 122, 169, 104,
    121, 145, 21,  178, 7,   63,  148, 194, 16,  137, 11,  34,  95,  33,  128, 127, 93,  154, 90,  144, 50,  39,
    53,  62,  204, 231, 191, 247, 151, 3,   255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,
    170, 198, 79,  184, 56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,
    100, 113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,  96,  37,  173, 174, 176, 185, 246, 28,  70,
    97,  105, 52,  64,  126, 15,  85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249, 206, 186, 197, 234, 38,
    44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129, 77,  82,  106, 220, 55,  200, 108, 193,
    171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120, 136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254,
    59,  0,   29,  57,  242, 239, 183, 14,  102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,  68,
    80,  180, 143, 237, 31,  26,  219, 153, 141, 51,  159, 17,  131, 20,
};

typedef struct md2_s {
    uint8_t x[48];
    uint8_t checksum[16];
    uint8_t block[16];
    unsigned used;
} md2_t;

static void md2_compress(md2_t *m)
{
    uint8_t l = m->checksum[15];
    for (int j = 0; j < 16; j++) {
        m->x[16 + j] = m->block[j];
        m->x[32 + j] = m->x[16 + j] ^ m->x[j];
        l = m->checksum[j] ^= md2_s[m->block[j] ^ l];
    }
    uint8_t t = 0;
    for (int round = 0; round < 18; round++) {
        for (int k = 0; k < 48; k++)
            t = m->x[k] ^= md2_s[t];
        t = (uint8_t)(t + round);
    }
}

static void md2_init(md2_t *m)
{
    memset(m, 0, sizeof(*m));
}

static void md2_update(md2_t *m, const void *data, size_t len, uint8_t mask)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        m->block[m->used++] = p[i] ^ mask;
        if (m->used == 16) {
            md2_compress(m);
            m->used = 0;
        }
    }
}

static void md2_final(md2_t *m, uint8_t out[16])
{
    uint8_t pad = (uint8_t)(16 - m->used);
    uint8_t padding[16];
    memset(padding, pad, sizeof(padding));
    md2_update(m, padding, pad, 0);
    uint8_t checksum[16];
    memcpy(checksum, m->checksum, 16);
    md2_update(m, checksum, 16, 0);
    memcpy(out, m->x, 16);
}

__attribute__((unused)) static void sim_md2(const void *data, size_t len, uint8_t out[16])
{
    md2_t m;
    md2_init(&m);
    md2_update(&m, data, len, 0);
    md2_final(&m, out);
}

static const uint8_t integrity_key[16] = {
    0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52, 0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f,
};

static const void *integrity_table[3];

/* What the runtime hashes about the process, in this layout. */
struct integrity_process_s {
    uint32_t driver_version, version, pid, thread;
    const void *cudart_table, *integrity_table, *check_fn;
    uint64_t unix_seconds;
};

struct integrity_device_s {
    CUuuid uuid;
    int32_t pci_domain, pci_bus, pci_device;
};

static CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t result[2]);

static CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t result[2])
{
    EXPORT_TRACE("integrity[1] version %u\n", version);
    if (result == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (version % 10 == 0) {
        result[0] = 0x3341181c03cb675cull;
        result[1] = 0x8ed383aa1f4cd1e8ull;
        return CUDA_SUCCESS;
    }
    if (version % 10 == 1) {
        result[0] = 0x1841181c03cb675cull;
        result[1] = 0x8ed383aa1f4cd1e8ull;
        return CUDA_SUCCESS;
    }
    int driver_version = 0, count = 0;
    cuDriverGetVersion(&driver_version);
    CUresult rc = cuDeviceGetCount(&count);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct integrity_process_s process = {
        .driver_version = (uint32_t)driver_version,
        .version = version,
        .pid = (uint32_t)getpid(),
        .thread = (uint32_t)pthread_self(),
        .cudart_table = cudart_table,
        .integrity_table = integrity_table,
        .check_fn = SLOT(integrity_check),
        .unix_seconds = unix_seconds,
    };
    md2_t inner;
    md2_init(&inner);
    md2_update(&inner, integrity_key, sizeof(integrity_key), 0x36);
    md2_update(&inner, &process, sizeof(process), 0);
    for (int dev = 0; dev < count; dev++) {
        struct integrity_device_s d;
        memset(&d, 0, sizeof(d));
        cuDeviceGetUuid_v2(&d.uuid, dev);
        cuDeviceGetAttribute(&d.pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev);
        cuDeviceGetAttribute(&d.pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev);
        cuDeviceGetAttribute(&d.pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev);
        md2_update(&inner, &d, sizeof(d), 0);
    }
    uint8_t inner_digest[16], digest[16];
    md2_final(&inner, inner_digest);
    md2_t outer;
    md2_init(&outer);
    md2_update(&outer, integrity_key, sizeof(integrity_key), 0x5c);
    md2_update(&outer, inner_digest, sizeof(inner_digest), 0);
    md2_final(&outer, digest);
    memcpy(result, digest, sizeof(digest));
    return CUDA_SUCCESS;
}

static const void *integrity_table[3] = {
    (void *)sizeof(integrity_table),
    SLOT(integrity_check),
    SLOT(unknown_integrity_2),
};

/* ------------------------------------------------------------------------
 * The lookup
 * ------------------------------------------------------------------------ */

typedef struct export_row_s {
    const char *uuid; /* as printed: bytes in order, dashes after 4, 6, 8, 10 */
    const char *name;
    const void *table; /* NULL: answer CUDA_ERROR_NOT_FOUND */
} export_row_t;

static const export_row_t export_rows[] = {
    /* Asking first: success would make the runtime skip its normal
     * start-up (a driver-side runtime bypass). */
    {"f8cff951-2146-8b4e-b9e2-fb469e7c0dd9", "runtime bypass", NULL},
    {"6bd5fb6c-5bf4-e74a-8987-d93912fd9df9", "runtime interface", cudart_table},
    {"a094798c-2e74-2e74-93f2-0800200c0a66", "tools runtime callback hooks", tools_hooks_table},
    {"42d85a81-23f6-cb47-8298-f6e78a3aecdc", "tools TLS", tools_tls_table},
    {"c693336e-1121-df11-a8c3-68f355d89593", "context-local storage", ctx_storage_table},
    {"263e8860-7cd2-6143-92f6-bbd5006dfa7e", "context checks", ctx_checks_table},
    {"d4082055-bde6-704b-8d34-ba123c66e1f2", "integrity check", integrity_table},
    /* cuBLASLt's static runtime, at its first GEMM. */
    {"21318c60-9714-3248-8ca6-41ff7324c8f2", "context", ctx_id_table},
    /* NVRTC 13: compiles without it. */
    {"da9151d3-3ae6-cc41-a5c0-4f26d533e328", "NVRTC driver interface", NULL},
};

static void uuid_format(const CUuuid *id, char out[37])
{
    const unsigned char *b = (const unsigned char *)id->bytes;
    char *p = out;
    for (int i = 0; i < 16; i++) {
        p += sprintf(p, "%02x", b[i]);
        if (i == 3 || i == 5 || i == 7 || i == 9)
            *p++ = '-';
    }
    *p = '\0';
}

SIM_EXPORT CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    CUresult entry = SIM_ENTER(cuGetExportTable, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (ppExportTable == NULL || pExportTableId == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *ppExportTable = NULL;
    char text[37];
    uuid_format(pExportTableId, text);
    for (size_t i = 0; i < sizeof(export_rows) / sizeof(export_rows[0]); i++) {
        if (strcmp(export_rows[i].uuid, text) != 0)
            continue;
        EXPORT_TRACE("table %s (%s): %s\n", text, export_rows[i].name,
                     export_rows[i].table != NULL ? "given" : "not found");
        if (export_rows[i].table == NULL)
            return CUDA_ERROR_NOT_FOUND;
        *ppExportTable = export_rows[i].table;
        return CUDA_SUCCESS;
    }
    EXPORT_TRACE("table %s: unknown\n", text);
    return CUDA_ERROR_INVALID_VALUE;
}

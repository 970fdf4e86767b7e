/* sim_module.c: modules and libraries built by nvcc or NVRTC.
 *
 * An image is a fatbin wrapper (`__fatBinC_Wrapper_t`, magic 0x466243B1),
 * a fatbin container (0xBA55ED50) of ELF and PTX entries, an ELF cubin, or
 * PTX text. The PTX is parsed (`ptx_parse.c`); each `.entry` becomes a
 * kernel whose parameter layout is the PTX's, each `.global`/`.const`
 * variable an allocation of the simulated device holding its initialiser.
 * Entries compressed with zstd or LZ4 (nvcc's default) are decompressed with
 * the system's libzstd/liblz4 when present, else the load is refused with a
 * line telling the user to build with `nvcc -no-compress`. A module with only
 * SASS (ELF) loads, but looking up one of its kernels fails naming it.
 * Lookups by name try the registered (built-in) kernels, then the module.
 * Entry points: `cuModule*`, `cuLibrary*`, `cuKernelGetFunction`,
 * `sim_module_load_image`, `sim_module_execute`.
 */
#include "ptx.h"
#include "sim_exec.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_MODULE_MAGIC 0x4d4f444cu  /* "MODL" */
#define SIM_LIBRARY_MAGIC 0x4c494252u /* "LIBR" */

#define FATBIN_WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xba55ed50u
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2
#define FATBIN_FLAG_LZ4 0x2000u
#define FATBIN_FLAG_ZSTD 0x8000u

struct CUmod_st {
    uint32_t magic;
    CUcontext ctx;
    ptx_module_t *ptx;
    sim_kernel_t *kernels; /* one per .entry, in PTX order */
    size_t nkernels;
    char **sass_only;      /* kernels present only as SASS */
    size_t nsass;
    bool *sass_reported;   /* per `sass_only` entry: its refusal was printed */
    unsigned sass_sm;      /* the architecture of that SASS (90: sm_90) */
    void **global_allocs;
    struct CUlib_st *library; /* the library that loaded it, if any */
};

struct CUlib_st {
    uint32_t magic;
    struct CUmod_st *module;
};

/* The fatbin structures as nvcc lays them out. */
typedef struct fatbin_wrapper_s {
    uint32_t magic, version;
    const void *data;
    const void *filename_or_fatbins;
} fatbin_wrapper_t;

typedef struct fatbin_header_s {
    uint32_t magic;
    uint16_t version, header_size;
    uint64_t files_size;
} fatbin_header_t;

typedef struct fatbin_entry_s {
    uint16_t kind, version;
    uint32_t header_size;
    uint64_t payload_size;
    uint32_t compressed_size, unknown1;
    uint32_t unknown2, sm_version;
    uint32_t bit_width, unknown3;
    uint64_t flags, unknown5, uncompressed_size;
} fatbin_entry_t;

/* ------------------------------------------------------------------------
 * Images
 * ------------------------------------------------------------------------ */

typedef struct image_s {
    char *ptx;          /* owned, NUL-terminated */
    size_t ptx_len;
    const unsigned char *elf; /* the ELF entry a device of SIM_SASS_SM would load */
    size_t elf_len;
    unsigned char *elf_owned; /* `elf` when it was decompressed */
    unsigned sm;
} image_t;

/* The simulated devices are H100s: the SASS a real one would load is
 * sm_90's. */
#define SIM_SASS_SM 90

static char *decompress(const unsigned char *src, size_t len, size_t out_len, uint64_t flags, char *err, size_t errlen)
{
    const char *lib = (flags & FATBIN_FLAG_ZSTD) ? "libzstd.so.1" : "liblz4.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    char *out = h != NULL ? malloc(out_len + 1) : NULL;
    if (out == NULL) {
        snprintf(err, errlen, "the module's PTX is compressed (%s) and %s is not available: build with "
                              "`nvcc -no-compress`", (flags & FATBIN_FLAG_ZSTD) ? "zstd" : "LZ4", lib);
        if (h != NULL)
            dlclose(h);
        return NULL;
    }
    bool ok = false;
    if (flags & FATBIN_FLAG_ZSTD) {
        size_t (*zd)(void *, size_t, const void *, size_t) = __extension__(size_t (*)(void *, size_t, const void *, size_t))dlsym(h, "ZSTD_decompress");
        unsigned (*iserr)(size_t) = __extension__(unsigned (*)(size_t))dlsym(h, "ZSTD_isError");
        if (zd != NULL && iserr != NULL) {
            size_t n = zd(out, out_len, src, len);
            ok = !iserr(n) && n <= out_len;
            if (ok)
                out[n] = '\0';
        }
    } else {
        int (*ld)(const char *, char *, int, int) = __extension__(int (*)(const char *, char *, int, int))dlsym(h, "LZ4_decompress_safe");
        if (ld != NULL) {
            int n = ld((const char *)src, out, (int)len, (int)out_len);
            ok = n >= 0;
            if (ok)
                out[n] = '\0';
        }
    }
    if (!ok) {
        free(out);
        out = NULL;
        snprintf(err, errlen, "the module's compressed PTX could not be decompressed: build with `nvcc -no-compress`");
    }
    return out;
}

static int read_fatbin(const unsigned char *data, image_t *img, char *err, size_t errlen)
{
    const fatbin_header_t *h = (const fatbin_header_t *)data;
    const unsigned char *p = data + h->header_size, *end = p + h->files_size;
    const fatbin_entry_t *elf = NULL;
    while (p + sizeof(fatbin_entry_t) <= end) {
        const fatbin_entry_t *e = (const fatbin_entry_t *)p;
        const unsigned char *payload = p + e->header_size;
        if (e->kind == FATBIN_KIND_PTX && (img->ptx == NULL || e->sm_version > img->sm)) {
            char *text;
            if (e->flags & (FATBIN_FLAG_ZSTD | FATBIN_FLAG_LZ4)) {
                text = decompress(payload, e->compressed_size, e->uncompressed_size, e->flags, err, errlen);
                if (text == NULL)
                    return -1;
            } else {
                text = malloc(e->payload_size + 1);
                if (text == NULL)
                    return -1;
                memcpy(text, payload, e->payload_size);
                text[e->payload_size] = '\0';
            }
            free(img->ptx);
            img->ptx = text;
            img->ptx_len = strlen(text);
            img->sm = e->sm_version;
        } else if (e->kind == FATBIN_KIND_ELF &&
                   (elf == NULL || (elf->sm_version != SIM_SASS_SM && e->sm_version > elf->sm_version) ||
                    e->sm_version == SIM_SASS_SM)) {
            if (elf == NULL || elf->sm_version != SIM_SASS_SM)
                elf = e;
        }
        p = payload + e->payload_size;
    }
    /* Without PTX, the SASS still names the kernels, so that looking one up
     * can say it has no PTX; nvcc compresses it like PTX. */
    if (img->ptx == NULL && elf != NULL) {
        const unsigned char *payload = (const unsigned char *)elf + elf->header_size;
        if (elf->flags & (FATBIN_FLAG_ZSTD | FATBIN_FLAG_LZ4)) {
            img->elf_owned = (unsigned char *)decompress(payload, elf->compressed_size, elf->uncompressed_size,
                                                         elf->flags, err, errlen);
            if (img->elf_owned == NULL)
                return -1;
            img->elf = img->elf_owned;
            img->elf_len = elf->uncompressed_size;
        } else {
            img->elf = payload;
            img->elf_len = elf->payload_size;
        }
    }
    return 0;
}

static int read_image(const void *image, image_t *img, char *err, size_t errlen)
{
    const unsigned char *data = image;
    uint32_t magic;
    memcpy(&magic, data, 4);
    if (magic == FATBIN_WRAPPER_MAGIC) {
        const fatbin_wrapper_t *w = image;
        return read_fatbin(w->data, img, err, errlen);
    }
    if (magic == FATBIN_MAGIC)
        return read_fatbin(data, img, err, errlen);
    if (memcmp(data, "\177ELF", 4) == 0) {
        /* Only a 64-bit CUDA ELF (EM_CUDA, 190) names kernels; anything
         * else after the magic is a placeholder without code. */
        uint16_t machine, shentsize;
        if (data[4] != 2 || data[5] != 1)
            return 0;
        memcpy(&machine, data + 18, 2);
        if (machine != 190)
            return 0;
        memcpy(&shentsize, data + 0x3a, 2);
        if (shentsize != 64)
            return 0;
        img->elf = data;
        img->elf_len = 0;
        return 0;
    }
    size_t len = strlen((const char *)data);
    /* Text without a PTX directive names no code: tests pass any string and
     * look up registered kernels, which always worked. */
    if (strstr((const char *)data, ".version") == NULL && strstr((const char *)data, ".entry") == NULL)
        return 0;
    img->ptx = malloc(len + 1);
    if (img->ptx == NULL)
        return -1;
    memcpy(img->ptx, data, len + 1);
    img->ptx_len = len;
    return 0;
}

/* Function symbols of an ELF cubin: the kernels its SASS implements, and
 * its architecture: `e_flags` bits 0-7 up to ABI version 7 (cuBLAS's
 * cubins), bits 8-15 from version 8 (nvcc 13). */
static void elf_kernel_names(const unsigned char *elf, struct CUmod_st *mod)
{
    const unsigned char *shdr_base;
    uint64_t shoff;
    uint16_t shentsize, shnum;
    uint32_t e_flags;
    memcpy(&e_flags, elf + 0x30, 4);
    mod->sass_sm = elf[8] >= 8 ? (e_flags >> 8) & 0xff : e_flags & 0xff;
    memcpy(&shoff, elf + 0x28, 8);
    memcpy(&shentsize, elf + 0x3a, 2);
    memcpy(&shnum, elf + 0x3c, 2);
    shdr_base = elf + shoff;
    for (unsigned i = 0; i < shnum; i++) {
        const unsigned char *sh = shdr_base + (size_t)i * shentsize;
        uint32_t type, link;
        uint64_t off, size, entsize;
        memcpy(&type, sh + 4, 4);
        if (type != 2) /* SHT_SYMTAB */
            continue;
        memcpy(&off, sh + 0x18, 8);
        memcpy(&size, sh + 0x20, 8);
        memcpy(&link, sh + 0x28, 4);
        memcpy(&entsize, sh + 0x38, 8);
        const unsigned char *strsh = shdr_base + (size_t)link * shentsize;
        uint64_t stroff;
        memcpy(&stroff, strsh + 0x18, 8);
        for (uint64_t s = 0; entsize && s < size / entsize; s++) {
            const unsigned char *sym = elf + off + s * entsize;
            uint32_t name;
            memcpy(&name, sym, 4);
            if ((sym[4] & 0xf) != 2) /* STT_FUNC */
                continue;
            char **grown = realloc(mod->sass_only, (mod->nsass + 1) * sizeof(char *));
            if (grown == NULL)
                return;
            mod->sass_only = grown;
            bool *reported = realloc(mod->sass_reported, (mod->nsass + 1) * sizeof(bool));
            if (reported == NULL)
                return;
            mod->sass_reported = reported;
            mod->sass_reported[mod->nsass] = false;
            mod->sass_only[mod->nsass++] = strdup((const char *)elf + stroff + name);
        }
    }
}

/* ------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------ */

static int load_globals(struct CUmod_st *mod, char *err, size_t errlen)
{
    ptx_module_t *m = mod->ptx;
    m->global_addrs = calloc(m->nglobals ? m->nglobals : 1, sizeof(uintptr_t));
    mod->global_allocs = calloc(m->nglobals ? m->nglobals : 1, sizeof(void *));
    if (m->global_addrs == NULL || mod->global_allocs == NULL)
        return -1;
    for (size_t i = 0; i < m->nglobals; i++) {
        ptx_global_t *g = &m->globals[i];
        if (g->is_extern)
            continue;
        CUdeviceptr dptr;
        CUresult rc = cuMemAlloc_v2(&dptr, g->size ? g->size : 1);
        if (rc != CUDA_SUCCESS) {
            snprintf(err, errlen, "no device memory for the module variable '%s' (%llu bytes)", g->name,
                     (unsigned long long)g->size);
            return -1;
        }
        unsigned char *p = (unsigned char *)(uintptr_t)dptr;
        if (g->init != NULL)
            memcpy(p, g->init, g->size);
        else
            memset(p, 0, g->size);
        m->global_addrs[i] = (uintptr_t)dptr;
        mod->global_allocs[i] = p;
    }
    return 0;
}

static void kernel_run(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)args;
    (void)launch;
    (void)user;
}

/* The virtual clock charges an interpreted kernel by its launch geometry,
 * known at submission: 2 us plus 1 ns per thread. */
static uint64_t kernel_cost(void **args, const simcuda_launch_t *launch, void *user)
{
    (void)args;
    (void)user;
    uint64_t threads = (uint64_t)launch->grid[0] * launch->grid[1] * launch->grid[2] * launch->block[0] *
                       launch->block[1] * launch->block[2];
    return 2000 + threads;
}

static int make_kernels(struct CUmod_st *mod)
{
    ptx_module_t *m = mod->ptx;
    size_t n = 0;
    for (size_t i = 0; i < m->nfuncs; i++)
        if (m->funcs[i].is_entry && m->funcs[i].has_body)
            n++;
    mod->kernels = calloc(n ? n : 1, sizeof(sim_kernel_t));
    if (mod->kernels == NULL)
        return -1;
    for (size_t i = 0; i < m->nfuncs; i++) {
        ptx_func_t *f = &m->funcs[i];
        if (!f->is_entry || !f->has_body)
            continue;
        sim_kernel_t *k = &mod->kernels[mod->nkernels++];
        k->magic = SIM_KERNEL_MAGIC;
        k->name = f->name;
        k->param_count = f->nparams;
        k->param_offsets = calloc(f->nparams ? f->nparams : 1, sizeof(size_t));
        k->param_sizes = calloc(f->nparams ? f->nparams : 1, sizeof(size_t));
        if (k->param_offsets == NULL || k->param_sizes == NULL)
            return -1;
        for (unsigned p = 0; p < f->nparams; p++) {
            k->param_offsets[p] = f->params[p].offset;
            k->param_sizes[p] = f->params[p].size;
        }
        k->args_size = f->params_size;
        k->fn = kernel_run;
        k->cost = kernel_cost;
        k->ptx_module = m;
        k->ptx_func = f;
        k->module = mod;
    }
    return 0;
}

static void module_free(struct CUmod_st *mod)
{
    if (mod == NULL)
        return;
    for (size_t i = 0; i < mod->nkernels; i++) {
        free(mod->kernels[i].param_offsets);
        free(mod->kernels[i].param_sizes);
    }
    free(mod->kernels);
    if (mod->ptx != NULL && mod->global_allocs != NULL)
        for (size_t i = 0; i < mod->ptx->nglobals; i++)
            if (mod->global_allocs[i] != NULL)
                cuMemFree_v2((CUdeviceptr)(uintptr_t)mod->global_allocs[i]);
    free(mod->global_allocs);
    for (size_t i = 0; i < mod->nsass; i++)
        free(mod->sass_only[i]);
    free(mod->sass_only);
    free(mod->sass_reported);
    ptx_module_free(mod->ptx);
    mod->magic = 0;
    free(mod);
}

static CUresult module_load(struct CUmod_st **out, const void *image)
{
    if (out == NULL || image == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    struct CUmod_st *mod = calloc(1, sizeof(*mod));
    if (mod == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    mod->magic = SIM_MODULE_MAGIC;
    mod->ctx = ctx;
    image_t img;
    memset(&img, 0, sizeof(img));
    char err[512] = "";
    if (read_image(image, &img, err, sizeof(err)) != 0) {
        fprintf(stderr, "simcuda: module load failed: %s\n", err[0] ? err : "unreadable image");
        free(img.elf_owned);
        module_free(mod);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    if (img.ptx == NULL) {
        if (img.elf != NULL)
            elf_kernel_names(img.elf, mod);
        free(img.elf_owned);
        mod->ptx = calloc(1, sizeof(ptx_module_t));
        *out = mod;
        return mod->ptx != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    mod->ptx = ptx_parse(img.ptx, img.ptx_len, err, sizeof(err));
    free(img.ptx);
    if (mod->ptx == NULL) {
        fprintf(stderr, "simcuda: module load failed: %s\n", err);
        module_free(mod);
        return CUDA_ERROR_INVALID_PTX;
    }
    if (load_globals(mod, err, sizeof(err)) != 0 || make_kernels(mod) != 0) {
        fprintf(stderr, "simcuda: module load failed: %s\n", err[0] ? err : "out of memory");
        module_free(mod);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = mod;
    return CUDA_SUCCESS;
}

CUresult sim_module_load_image(CUmodule *module, const void *image)
{
    return module_load(module, image);
}

/* A kernel registered by name (the built-ins, `simcuda_register_kernel`)
 * stands in for a module kernel of the same name: the shim's
 * `vramshim_content_hash` runs as host code, not interpreted. */
static CUresult module_function(struct CUmod_st *mod, const char *name, sim_kernel_t **out)
{
    sim_kernel_t *registered = sim_kernel_find(name);
    if (registered != NULL) {
        *out = registered;
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; i < mod->nkernels; i++)
        if (strcmp(mod->kernels[i].name, name) == 0) {
            *out = &mod->kernels[i];
            return CUDA_SUCCESS;
        }
    /* Said once per kernel: libraries such as cuBLAS retry a lookup for
     * every candidate algorithm. */
    for (size_t i = 0; i < mod->nsass; i++)
        if (strcmp(mod->sass_only[i], name) == 0) {
            if (!__atomic_exchange_n(&mod->sass_reported[i], true, __ATOMIC_RELAXED))
                fprintf(stderr, "simcuda: kernel %s has no PTX (only SASS for sm_%u): simcuda runs only PTX and "
                                "cannot run it\n", name, mod->sass_sm);
            return CUDA_ERROR_NO_BINARY_FOR_GPU;
        }
    return CUDA_ERROR_NOT_FOUND;
}

static CUresult module_global(struct CUmod_st *mod, const char *name, CUdeviceptr *dptr, size_t *bytes)
{
    if (name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    ptx_module_t *m = mod->ptx;
    for (size_t i = 0; m != NULL && i < m->nglobals; i++) {
        if (strcmp(m->globals[i].name, name) != 0 || m->global_addrs == NULL || m->global_addrs[i] == 0)
            continue;
        if (dptr != NULL)
            *dptr = (CUdeviceptr)m->global_addrs[i];
        if (bytes != NULL)
            *bytes = m->globals[i].size;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_FOUND;
}

void sim_module_execute(const sim_kernel_t *kernel, const unsigned char *args, const unsigned grid[3],
                        const unsigned block[3], unsigned shared_bytes)
{
    ptx_launch_t launch = {
        .module = kernel->ptx_module,
        .func = kernel->ptx_func,
        .params = args,
        .dyn_shared = shared_bytes,
    };
    memcpy(launch.grid, grid, sizeof(launch.grid));
    memcpy(launch.block, block, sizeof(launch.block));
    char err[512];
    if (ptx_execute(&launch, err, sizeof(err)) != 0) {
        /* A GPU would stop with an unrecoverable error; never go on with a
         * wrong result. */
        fprintf(stderr, "simcuda: kernel '%s' cannot run: %s\n", kernel->name, err);
        abort();
    }
}

/* ------------------------------------------------------------------------
 * Driver API
 * ------------------------------------------------------------------------ */

static bool module_valid(CUmodule mod)
{
    return mod != NULL && mod->magic == SIM_MODULE_MAGIC;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf != NULL)
        buf[n] = '\0';
    fclose(f);
    return buf;
}

SIM_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    CUresult entry = SIM_ENTER(cuModuleLoad, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (fname == NULL || module == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    char *data = read_file(fname);
    if (data == NULL)
        return CUDA_ERROR_FILE_NOT_FOUND;
    CUresult rc = module_load(module, data);
    free(data);
    return rc;
}

SIM_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    CUresult entry = SIM_ENTER(cuModuleLoadData, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return module_load(module, image);
}

SIM_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                       CUjit_option *options, void **optionValues)
{
    CUresult entry = SIM_ENTER(cuModuleLoadDataEx, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (numOptions > 0 && (options == NULL || optionValues == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    return module_load(module, image);
}

SIM_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    CUresult entry = SIM_ENTER(cuModuleLoadFatBinary, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return module_load(module, fatCubin);
}

SIM_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    CUresult entry = SIM_ENTER(cuModuleUnload, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!module_valid(hmod))
        return CUDA_ERROR_INVALID_HANDLE;
    module_free(hmod);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    CUresult entry = SIM_ENTER(cuModuleGetFunction, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (hfunc == NULL || name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!module_valid(hmod))
        return CUDA_ERROR_INVALID_HANDLE;
    sim_kernel_t *k;
    CUresult rc = module_function(hmod, name, &k);
    if (rc == CUDA_SUCCESS)
        *hfunc = (CUfunction)(void *)k;
    return rc;
}

SIM_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    CUresult entry = SIM_ENTER(cuModuleGetGlobal_v2, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!module_valid(hmod))
        return CUDA_ERROR_INVALID_HANDLE;
    return module_global(hmod, name, dptr, bytes);
}

SIM_EXPORT CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    CUresult entry = SIM_ENTER(cuModuleGetLoadingMode, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (mode == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *mode = CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

/* A library is context-independent; its variables are allocated in the
 * current context, or device 0's primary context when none is current. */
static CUresult library_load(CUlibrary *library, const void *code)
{
    if (library == NULL || code == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    bool pushed = false;
    if (sim_ctx_current() == NULL) {
        CUcontext primary;
        CUresult rc = cuDevicePrimaryCtxRetain(&primary, 0);
        if (rc != CUDA_SUCCESS)
            return rc;
        cuCtxPushCurrent_v2(primary);
        pushed = true;
    }
    struct CUlib_st *lib = calloc(1, sizeof(*lib));
    CUresult rc = lib != NULL ? module_load(&lib->module, code) : CUDA_ERROR_OUT_OF_MEMORY;
    if (pushed) {
        CUcontext popped;
        cuCtxPopCurrent_v2(&popped);
    }
    if (rc != CUDA_SUCCESS) {
        free(lib);
        return rc;
    }
    lib->magic = SIM_LIBRARY_MAGIC;
    lib->module->library = lib;
    *library = lib;
    return CUDA_SUCCESS;
}

/* Library options: `CU_LIBRARY_BINARY_IS_PRESERVED` takes no value, so its
 * value array may be NULL (cuBLAS loads its cubins that way, and real
 * drivers accept it); `CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE`
 * needs one. The preserved-binary hint is invalid from a file (cuda.h). */
static CUresult library_options_check(const CUlibraryOption *options, void *const *values, unsigned count,
                                      bool from_file)
{
    if (count > 0 && options == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) {
        switch (options[i]) {
        case CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE:
            if (values == NULL)
                return CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_LIBRARY_BINARY_IS_PRESERVED:
            if (from_file)
                return CUDA_ERROR_INVALID_VALUE;
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                      void **jitOptionsValues, unsigned int numJitOptions,
                                      CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                      unsigned int numLibraryOptions)
{
    CUresult entry = SIM_ENTER(cuLibraryLoadData, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (numJitOptions > 0 && (jitOptions == NULL || jitOptionsValues == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = library_options_check(libraryOptions, libraryOptionValues, numLibraryOptions, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    return library_load(library, code);
}

SIM_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                          void **jitOptionsValues, unsigned int numJitOptions,
                                          CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                          unsigned int numLibraryOptions)
{
    CUresult entry = SIM_ENTER(cuLibraryLoadFromFile, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    CUresult rc = library_options_check(libraryOptions, libraryOptionValues, numLibraryOptions, true);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (fileName == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    char *data = read_file(fileName);
    if (data == NULL)
        return CUDA_ERROR_FILE_NOT_FOUND;
    rc = library_load(library, data);
    free(data);
    return rc;
}

static bool library_valid(CUlibrary lib)
{
    return lib != NULL && lib->magic == SIM_LIBRARY_MAGIC;
}

SIM_EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
    CUresult entry = SIM_ENTER(cuLibraryUnload, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!library_valid(library))
        return CUDA_ERROR_INVALID_HANDLE;
    module_free(library->module);
    library->magic = 0;
    free(library);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    CUresult entry = SIM_ENTER(cuLibraryGetKernel, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pKernel == NULL || name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!library_valid(library))
        return CUDA_ERROR_INVALID_HANDLE;
    sim_kernel_t *k;
    CUresult rc = module_function(library->module, name, &k);
    if (rc == CUDA_SUCCESS)
        *pKernel = (CUkernel)(void *)k;
    return rc;
}

SIM_EXPORT CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    CUresult entry = SIM_ENTER(cuLibraryGetModule, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pMod == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!library_valid(library))
        return CUDA_ERROR_INVALID_HANDLE;
    *pMod = library->module;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
    CUresult entry = SIM_ENTER(cuLibraryGetGlobal, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (!library_valid(library))
        return CUDA_ERROR_INVALID_HANDLE;
    return module_global(library->module, name, dptr, bytes);
}

/* The library a kernel was found in; a kernel registered by name (the
 * built-ins) belongs to none. */
SIM_EXPORT CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
    CUresult entry = SIM_ENTER(cuKernelGetLibrary, SIM_NEED_INIT);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pLib == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    sim_kernel_t *k = sim_kernel_from_handle(kernel);
    if (k == NULL || k->module == NULL || k->module->library == NULL || !library_valid(k->module->library))
        return CUDA_ERROR_INVALID_HANDLE;
    *pLib = k->module->library;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    CUresult entry = SIM_ENTER(cuKernelGetFunction, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    if (pFunc == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    sim_kernel_t *k = sim_kernel_from_handle(kernel);
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    CUcontext ctx;
    CUresult result = sim_ctx_require(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    *pFunc = (CUfunction)(void *)k;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Occupancy, from the H100-like limits the devices report: 2048 threads,
 * 32 blocks and 228 KiB of shared memory per multiprocessor.
 * ------------------------------------------------------------------------ */

static size_t static_shared(const sim_kernel_t *k)
{
    return k->ptx_module != NULL ? (size_t)k->ptx_module->shared_dynamic_base : 0;
}

static int blocks_per_sm(const sim_kernel_t *k, int block_size, size_t dynamic_smem)
{
    if (block_size <= 0 || block_size > 1024)
        return 0;
    int warps = (block_size + 31) / 32;
    int by_threads = 64 / warps;
    int blocks = by_threads < 32 ? by_threads : 32;
    size_t by_smem = 233472 / (static_shared(k) + dynamic_smem + 1024);
    if ((size_t)blocks > by_smem)
        blocks = (int)by_smem;
    return blocks;
}

SIM_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                                 size_t dynamicSMemSize)
{
    CUresult entry = SIM_ENTER(cuOccupancyMaxActiveBlocksPerMultiprocessor, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_kernel_t *k = sim_kernel_from_handle(func);
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (numBlocks == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *numBlocks = blocks_per_sm(k, blockSize, dynamicSMemSize);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                                          int blockSize, size_t dynamicSMemSize,
                                                                          unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    (void)flags;
    sim_kernel_t *k = sim_kernel_from_handle(func);
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (numBlocks == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *numBlocks = blocks_per_sm(k, blockSize, dynamicSMemSize);
    return CUDA_SUCCESS;
}

static CUresult potential_block_size(int *minGridSize, int *blockSize, CUfunction func,
                                     CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize,
                                     int blockSizeLimit)
{
    sim_kernel_t *k = sim_kernel_from_handle(func);
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (minGridSize == NULL || blockSize == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int limit = blockSizeLimit > 0 && blockSizeLimit < 1024 ? blockSizeLimit : 1024;
    int best = 32, best_threads = 0;
    for (int b = 32; b <= limit; b += 32) {
        size_t smem = blockSizeToDynamicSMemSize != NULL ? blockSizeToDynamicSMemSize(b) : dynamicSMemSize;
        int threads = blocks_per_sm(k, b, smem) * b;
        if (threads >= best_threads) {
            best_threads = threads;
            best = b;
        }
    }
    *blockSize = best;
    size_t smem = blockSizeToDynamicSMemSize != NULL ? blockSizeToDynamicSMemSize(best) : dynamicSMemSize;
    *minGridSize = blocks_per_sm(k, best, smem) * 132;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                                      CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                      size_t dynamicSMemSize, int blockSizeLimit)
{
    CUresult entry = SIM_ENTER(cuOccupancyMaxPotentialBlockSize, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    return potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                                blockSizeLimit);
}

SIM_EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
                                                               CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                               size_t dynamicSMemSize, int blockSizeLimit,
                                                               unsigned int flags)
{
    CUresult entry = SIM_ENTER(cuOccupancyMaxPotentialBlockSizeWithFlags, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    (void)flags;
    return potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                                blockSizeLimit);
}

SIM_EXPORT CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func, int numBlocks,
                                                            int blockSize)
{
    CUresult entry = SIM_ENTER(cuOccupancyAvailableDynamicSMemPerBlock, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_kernel_t *k = sim_kernel_from_handle(func);
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (dynamicSmemSize == NULL || numBlocks <= 0 || blockSize <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t per = 233472 / (size_t)numBlocks;
    size_t avail = per > static_shared(k) + 1024 ? per - static_shared(k) - 1024 : 0;
    *dynamicSmemSize = avail < 232448 ? avail : 232448;
    return CUDA_SUCCESS;
}

bool sim_module_attribute(const sim_kernel_t *k, CUfunction_attribute attribute, int *value)
{
    const ptx_func_t *f = k->ptx_func;
    switch (attribute) {
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
        *value = (int)static_shared(k);
        return true;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
        *value = (int)f->local_size;
        return true;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
        *value = k->ptx_module->target_sm;
        return true;
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *value = f->reqntid[0] ? (int)(f->reqntid[0] * (f->reqntid[1] ? f->reqntid[1] : 1) *
                                       (f->reqntid[2] ? f->reqntid[2] : 1))
                               : 1024;
        return true;
    default:
        return false;
    }
}

SIM_EXPORT uint64_t simcuda_lane_instructions(void)
{
    return ptx_lane_instructions();
}

/* Clusters: a cluster's blocks must fit one GPC; the simulated device has
 * 132 multiprocessors in groups of 16 (8 blocks per cluster at most, the
 * portable size, 16 when non-portable sizes are allowed). */
static unsigned cluster_dims(const CUlaunchConfig *config)
{
    unsigned size = 1;
    for (unsigned i = 0; config != NULL && i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            size = config->attrs[i].value.clusterDim.x * config->attrs[i].value.clusterDim.y *
                   config->attrs[i].value.clusterDim.z;
    return size ? size : 1;
}

SIM_EXPORT CUresult cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func, const CUlaunchConfig *config)
{
    CUresult entry = SIM_ENTER(cuOccupancyMaxPotentialClusterSize, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_kernel_t *k = sim_kernel_from_handle(func);
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (clusterSize == NULL || config == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int per_sm = blocks_per_sm(k, (int)(config->blockDimX * config->blockDimY * config->blockDimZ),
                               config->sharedMemBytes);
    *clusterSize = per_sm > 0 ? 8 : 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const CUlaunchConfig *config)
{
    CUresult entry = SIM_ENTER(cuOccupancyMaxActiveClusters, SIM_NEED_NOTHING);
    if (entry != CUDA_SUCCESS)
        return entry;
    sim_kernel_t *k = sim_kernel_from_handle(func);
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (numClusters == NULL || config == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned size = cluster_dims(config);
    if (size > 16) {
        *numClusters = 0;
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
    int per_sm = blocks_per_sm(k, (int)(config->blockDimX * config->blockDimY * config->blockDimZ),
                               config->sharedMemBytes);
    /* 8 GPCs of 16 multiprocessors (plus 4 that clusters cannot use whole) */
    *numClusters = (int)(8u * (16u * (unsigned)per_sm / size));
    return CUDA_SUCCESS;
}

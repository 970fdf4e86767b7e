/* preload_offload_vmm.c: the application's own virtual memory management
 * (`cuMemCreate`, `cuMemMap`, `cuMemSetAccess`) under the offload mode, on
 * the simulated driver, in the shapes frameworks use it. Each mode's
 * working set is four times the VRAM_LIMIT its test sets.
 *
 * - `arena`: PyTorch's expandable segments: one 64 MiB reservation grown
 *   by 16 handles of 4 MiB mapped at consecutive offsets, access granted
 *   one chunk at a time and then over four chunks at once; every chunk
 *   refilled by a kernel round after round and checked byte for byte
 *   (kernel checksum and a copy) after the others have pushed it out; one
 *   copy across three chunks; a tensor across two chunks, written and read
 *   by kernels given a pointer into the first one only, with both pushed
 *   out before; torn down as PyTorch does (unmap each chunk, release each
 *   handle, free the reservation), after which `cuMemGetInfo` shows the
 *   memory back (within one granule: under offload the shim's own working
 *   memory, its hash lanes, is counted once the first eviction made it).
 * - `objects`: vLLM's and torch_memory_saver's objects: 8 x 6 MiB, each
 *   its own reservation, handle kept by the application. Filled, cycled,
 *   checked; then "sleep and wake": half of them unmapped and mapped again
 *   from the same handle (three at their own address, one at a new one)
 *   while the others keep the limit busy, and their bytes must survive.
 *   One more object has its handle released right after the map and
 *   grant: still used and checked, and its unmap frees it.
 * - `queries`: what the application asks of its mappings after they were
 *   pushed out: `cuMemRetainAllocationHandle` answers the handle value
 *   `cuMemCreate` gave (and its release leaves the application's reference
 *   alone), `cuMemGetAllocationPropertiesFromHandle` the properties given,
 *   `cuMemGetAccess` the grant. A handle created exportable (POSIX file
 *   descriptor, as PyTorch's expandable segments make theirs) is mapped,
 *   used and pushed out (under the shim), then exported: the export works
 *   on the memory the shim made anew, and from then on the simulated
 *   driver itself (`simcuda_entry_point`, which the shim does not
 *   interpose) maps the same memory at its address after every other
 *   mapping has cycled, and the shim's snapshot (VRAMSHIM_DEBUG_SNAPSHOT,
 *   when set) calls it not evictable. A mapping of part of a handle (a
 *   non-zero offset) is refused by H100 and H200 alike
 *   (CUDA_ERROR_NOT_SUPPORTED, tests/gpu/driver_facts.recorded.txt) and by
 *   the simulated driver: the program must get the answer the driver
 *   gives to the same map of a handle of its own (and, were it a success,
 *   a mapping that is byte-exact), and then the handle maps whole.
 *
 * Apart from that snapshot, read only when VRAMSHIM_DEBUG_SNAPSHOT is set,
 * the program checks nothing a program without the shim could not see: it
 * passes on the simulated driver alone, where nothing is evicted. Whether
 * evictions happened is the exit summary's to show
 * (check_offload_summary.py). A kernel that touches a mapping the shim
 * left evicted faults in the simulated driver; the fault's line names the
 * mapping.
 *
 * Exit status: 0 when every check holds, 1 otherwise, 2 on a usage error.
 */
#include "preload_util.h"
#include "simcuda.h"

#define MiB (1ull << 20)

#define ARENA_CHUNKS 16
#define ARENA_CHUNK_BYTES (4 * MiB)
#define ARENA_ROUNDS 3

#define OBJECTS 8
#define OBJECT_BYTES (6 * MiB)
#define OBJECT_ROUNDS 2

#define QUERY_UNITS 8
#define QUERY_UNIT_BYTES (4 * MiB)

#define LARGEST_BYTES OBJECT_BYTES

static CUfunction fn_fill, fn_checksum;

/* The mappings the program made, for the fault reporter: a kernel that
 * touches an evicted mapping faults in the simulated driver, and the line
 * then says which. */
#define MAPPINGS_MAX 32
typedef struct known_mapping_s {
    CUdeviceptr base;
    uint64_t bytes;
    const char *what;
    int index;
} known_mapping_t;
static known_mapping_t mappings[MAPPINGS_MAX];
static int mapping_count;

static void remember(CUdeviceptr base, uint64_t bytes, const char *what, int index)
{
    if (mapping_count < MAPPINGS_MAX)
        mappings[mapping_count++] = (known_mapping_t){base, bytes, what, index};
}

static int describe_address(uintptr_t address, char *line, size_t cap, int length)
{
    for (int i = 0; i < mapping_count && length >= 0 && (size_t)length < cap; i++) {
        if (address >= mappings[i].base && address < mappings[i].base + mappings[i].bytes)
            length += snprintf(line + length, cap - (size_t)length, ", inside %s %d at offset %llu", mappings[i].what,
                               mappings[i].index, (unsigned long long)(address - mappings[i].base));
    }
    return length;
}

static void setup(void)
{
    CUmodule module;
    vs_test_fault_reporter_install(describe_address);
    (void)preload_context();
    VS_CHECK(cuModuleLoadData(&module, "preload_offload_vmm kernels"));
    VS_CHECK(cuModuleGetFunction(&fn_fill, module, "sim_fill_u32"));
    VS_CHECK(cuModuleGetFunction(&fn_checksum, module, "sim_checksum_u32"));
}

static uint32_t fill_word(uint32_t seed, uint64_t i)
{
    return seed ^ (uint32_t)(i * 2654435761u);
}

static void launch_fill(CUdeviceptr dst, uint64_t bytes, uint32_t seed)
{
    uint64_t words = bytes / 4;
    void *args[] = {&dst, &words, &seed};
    VS_CHECK(cuLaunchKernel(fn_fill, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
}

/* A read of all of `src` by a kernel, so that the shim must have it on the
 * device; the sum is left in `result`. */
static void launch_checksum(CUdeviceptr src, uint64_t bytes, CUdeviceptr result)
{
    uint64_t words = bytes / 4;
    void *args[] = {&src, &words, &result};
    VS_CHECK(cuLaunchKernel(fn_checksum, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
}

/* Whether [src, src + bytes) holds words `first`, `first` + 1, ... of the
 * `launch_fill(seed)` pattern (`first` > 0: the tail of what one fill
 * wrote from further down), read back through a kernel (which restores
 * what it reads) and a copy. */
static bool exact_from(CUdeviceptr src, uint64_t bytes, uint32_t seed, uint64_t first)
{
    static uint32_t *back;
    if (back == NULL && (back = malloc(LARGEST_BYTES)) == NULL)
        exit(1);
    if (bytes > LARGEST_BYTES)
        return false;
    uint64_t words = bytes / 4, sum = 0, expected = 0;
    CUdeviceptr result;
    VS_CHECK(cuMemAlloc(&result, 8));
    launch_checksum(src, bytes, result);
    VS_CHECK(cuCtxSynchronize());
    VS_CHECK(cuMemcpyDtoH(&sum, result, sizeof sum));
    VS_CHECK(cuMemFree(result));
    for (uint64_t i = 0; i < words; i++)
        expected += (uint64_t)fill_word(seed, first + i) * (i + 1);
    if (sum != expected)
        return false;
    VS_CHECK(cuMemcpyDtoH(back, src, bytes));
    for (uint64_t i = 0; i < words; i++)
        if (back[i] != fill_word(seed, first + i))
            return false;
    return true;
}

static bool exact(CUdeviceptr src, uint64_t bytes, uint32_t seed)
{
    return exact_from(src, bytes, seed, 0);
}

/* Kernel reads of each of `ptrs` in turn: under a limit a quarter of the
 * working set, whatever was touched before them is pushed out. */
static void touch_all(const CUdeviceptr *ptrs, int count, uint64_t bytes)
{
    CUdeviceptr result;
    VS_CHECK(cuMemAlloc(&result, 8));
    for (int i = 0; i < count; i++)
        launch_checksum(ptrs[i], bytes, result);
    VS_CHECK(cuCtxSynchronize());
    VS_CHECK(cuMemFree(result));
}

static CUmemAllocationProp device_prop(unsigned long long handle_types)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = (CUmemAllocationHandleType)handle_types;
    return prop;
}

/* Read and write for device 0 over [ptr, ptr + bytes), which may cover
 * several mappings. */
static void grant(CUdeviceptr ptr, uint64_t bytes)
{
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = 0;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    VS_CHECK(cuMemSetAccess(ptr, bytes, &desc, 1));
}

/* What the shim may come to hold of the device for itself meanwhile (its
 * hash lanes, a few KiB): less than one granule, the least a handle that
 * stayed counted would keep. */
#define SHIM_OWN_BYTES (2 * MiB - 1)

static size_t free_bytes(void)
{
    size_t free_now = 0, total = 0;
    VS_CHECK(cuMemGetInfo(&free_now, &total));
    return free_now;
}

static uint32_t seed_of(int unit, int round)
{
    return 0x1000u * (uint32_t)(round + 1) + (uint32_t)unit;
}

/* ---- arena ------------------------------------------------------------------ */

/* Chunks `first` to `first + count - 1` read with one copy across them
 * (they sit side by side in the reservation), each as round `round` left
 * it. */
static void expect_chunks_copied(const CUdeviceptr *chunks, int first, int count, int round)
{
    uint32_t *words = malloc((size_t)count * ARENA_CHUNK_BYTES);
    if (words == NULL)
        exit(1);
    VS_CHECK(cuMemcpyDtoH(words, chunks[first], (size_t)count * ARENA_CHUNK_BYTES));
    for (int c = 0; c < count; c++) {
        const uint32_t *chunk = words + (uint64_t)c * (ARENA_CHUNK_BYTES / 4);
        uint64_t w = 0;
        while (w < ARENA_CHUNK_BYTES / 4 && chunk[w] == fill_word(seed_of(first + c, round), w))
            w++;
        VS_EXPECT(w == ARENA_CHUNK_BYTES / 4, "chunk %d in one copy of chunks %d to %d: word %llu differs",
                  first + c, first, first + count - 1, (unsigned long long)w);
    }
    free(words);
}

static void case_arena(void)
{
    CUmemAllocationProp prop = device_prop(CU_MEM_HANDLE_TYPE_NONE);
    CUmemGenericAllocationHandle handles[ARENA_CHUNKS];
    CUdeviceptr arena, chunks[ARENA_CHUNKS];
    size_t free_before = free_bytes();

    VS_CHECK(cuMemAddressReserve(&arena, ARENA_CHUNKS * ARENA_CHUNK_BYTES, 0, 0, 0));
    /* The segment grows a chunk at a time; the first half is granted chunk
     * by chunk, the second four chunks at a time (one cuMemSetAccess over
     * several mappings, as PyTorch grants a grown range). */
    for (int i = 0; i < ARENA_CHUNKS; i++) {
        chunks[i] = arena + (CUdeviceptr)i * ARENA_CHUNK_BYTES;
        VS_CHECK(cuMemCreate(&handles[i], ARENA_CHUNK_BYTES, &prop, 0));
        VS_CHECK(cuMemMap(chunks[i], ARENA_CHUNK_BYTES, 0, handles[i], 0));
        remember(chunks[i], ARENA_CHUNK_BYTES, "chunk", i);
        if (i < ARENA_CHUNKS / 2)
            grant(chunks[i], ARENA_CHUNK_BYTES);
        else if (i % 4 == 3)
            grant(chunks[i - 3], 4 * ARENA_CHUNK_BYTES);
    }

    /* Round after round every chunk is rewritten, so what an eviction keeps
     * is never an earlier fill by chance; each is checked once all the
     * others have been written after it. */
    for (int round = 0; round < ARENA_ROUNDS; round++) {
        for (int i = 0; i < ARENA_CHUNKS; i++)
            launch_fill(chunks[i], ARENA_CHUNK_BYTES, seed_of(i, round));
        VS_CHECK(cuCtxSynchronize());
        for (int i = 0; i < ARENA_CHUNKS; i++)
            VS_EXPECT(exact(chunks[i], ARENA_CHUNK_BYTES, seed_of(i, round)), "chunk %d after round %d", i, round);
    }
    const int last = ARENA_ROUNDS - 1;
    /* Chunks 6 to 8 (less than the limit) in one copy. */
    expect_chunks_copied(chunks, 6, 3, last);

    /* A tensor across two chunks, as the allocator places them in a
     * segment: one kernel given a pointer into chunk 9 writes its second
     * half and the first half of chunk 10, both pushed out first; then one
     * kernel and one copy read it back across the boundary, again after
     * the others have pushed both out. The halves it did not cover keep
     * the last round's words. */
    const uint64_t half = ARENA_CHUNK_BYTES / 2;
    const uint32_t tensor_seed = 0x7e5;
    CUdeviceptr tensor = chunks[9] + half;
    CUdeviceptr others[ARENA_CHUNKS - 2];
    int other_count = 0;
    for (int i = 0; i < ARENA_CHUNKS; i++)
        if (i != 9 && i != 10)
            others[other_count++] = chunks[i];
    touch_all(others, other_count, ARENA_CHUNK_BYTES);
    launch_fill(tensor, ARENA_CHUNK_BYTES, tensor_seed);
    VS_CHECK(cuCtxSynchronize());
    touch_all(others, other_count, ARENA_CHUNK_BYTES);
    VS_EXPECT(exact(tensor, ARENA_CHUNK_BYTES, tensor_seed), "the tensor across chunks 9 and 10");
    VS_EXPECT(exact(chunks[9], half, seed_of(9, last)), "the first half of chunk 9, beside the tensor");
    VS_EXPECT(exact_from(chunks[10] + half, half, seed_of(10, last), half / 4),
              "the second half of chunk 10, beside the tensor");

    /* PyTorch's teardown: unmap each chunk, release its handle, then free
     * the reservation; all of it is given back. */
    for (int i = 0; i < ARENA_CHUNKS; i++) {
        VS_CHECK(cuMemUnmap(chunks[i], ARENA_CHUNK_BYTES));
        VS_CHECK(cuMemRelease(handles[i]));
    }
    VS_CHECK(cuMemAddressFree(arena, ARENA_CHUNKS * ARENA_CHUNK_BYTES));
    size_t free_after = free_bytes();
    VS_EXPECT(free_after <= free_before && free_after + SHIM_OWN_BYTES >= free_before,
              "cuMemGetInfo free: %zu bytes before the arena, %zu after its teardown",
              free_before, free_after);
}

/* ---- objects ------------------------------------------------------------------ */

typedef struct vmm_object_s {
    CUdeviceptr reservation, ptr;
    CUmemGenericAllocationHandle handle;
    uint32_t seed;
} vmm_object_t;

static void object_create(vmm_object_t *o, int index)
{
    CUmemAllocationProp prop = device_prop(CU_MEM_HANDLE_TYPE_NONE);
    VS_CHECK(cuMemAddressReserve(&o->reservation, OBJECT_BYTES, 0, 0, 0));
    o->ptr = o->reservation;
    VS_CHECK(cuMemCreate(&o->handle, OBJECT_BYTES, &prop, 0));
    VS_CHECK(cuMemMap(o->ptr, OBJECT_BYTES, 0, o->handle, 0));
    remember(o->ptr, OBJECT_BYTES, "object", index);
    grant(o->ptr, OBJECT_BYTES);
}

static void objects_fill(vmm_object_t *objects, int count, int round)
{
    for (int i = 0; i < count; i++) {
        objects[i].seed = seed_of(i, round);
        launch_fill(objects[i].ptr, OBJECT_BYTES, objects[i].seed);
    }
    VS_CHECK(cuCtxSynchronize());
}

static void objects_touch(const vmm_object_t *objects, int count)
{
    CUdeviceptr ptrs[OBJECTS + 1];
    for (int i = 0; i < count; i++)
        ptrs[i] = objects[i].ptr;
    touch_all(ptrs, count, OBJECT_BYTES);
}

static void case_objects(void)
{
    /* objects[OBJECTS]: the one whose handle is released right after the
     * map and grant. */
    vmm_object_t objects[OBJECTS + 1];
    size_t free_before = free_bytes();

    for (int i = 0; i < OBJECTS + 1; i++)
        object_create(&objects[i], i);
    CUmemGenericAllocationHandle dropped = objects[OBJECTS].handle;
    VS_CHECK(cuMemRelease(dropped));
    for (int round = 0; round < OBJECT_ROUNDS; round++) {
        objects_fill(objects, OBJECTS + 1, round);
        for (int i = 0; i < OBJECTS + 1; i++)
            VS_EXPECT(exact(objects[i].ptr, OBJECT_BYTES, objects[i].seed), "object %d after round %d", i, round);
    }

    /* Sleep: half the objects unmapped, their handles kept; the others
     * are rewritten and read meanwhile, which keeps the limit busy. */
    for (int i = 0; i < OBJECTS; i += 2)
        VS_CHECK(cuMemUnmap(objects[i].ptr, OBJECT_BYTES));
    for (int i = 1; i < OBJECTS; i += 2) {
        objects[i].seed = seed_of(i, 7);
        launch_fill(objects[i].ptr, OBJECT_BYTES, objects[i].seed);
    }
    CUdeviceptr awake[OBJECTS / 2 + 1];
    int awake_count = 0;
    for (int i = 1; i < OBJECTS; i += 2)
        awake[awake_count++] = objects[i].ptr;
    awake[awake_count++] = objects[OBJECTS].ptr;
    touch_all(awake, awake_count, OBJECT_BYTES);
    /* Wake: the same handles mapped again, each at its own address but the
     * last, which moves to a new reservation: the bytes follow the handle. */
    for (int i = 0; i < OBJECTS; i += 2) {
        if (i == OBJECTS - 2) {
            VS_CHECK(cuMemAddressFree(objects[i].reservation, OBJECT_BYTES));
            VS_CHECK(cuMemAddressReserve(&objects[i].reservation, OBJECT_BYTES, 0, 0, 0));
            objects[i].ptr = objects[i].reservation;
            remember(objects[i].ptr, OBJECT_BYTES, "object", i);
        }
        VS_CHECK(cuMemMap(objects[i].ptr, OBJECT_BYTES, 0, objects[i].handle, 0));
        grant(objects[i].ptr, OBJECT_BYTES);
    }
    for (int i = 0; i < OBJECTS + 1; i++)
        VS_EXPECT(exact(objects[i].ptr, OBJECT_BYTES, objects[i].seed), "object %d after the sleep and wake%s", i,
                  i % 2 == 0 && i < OBJECTS ? " (it slept)" : "");
    /* And once more after a full cycle of rewrites. */
    objects_fill(objects, OBJECTS + 1, 9);
    objects_touch(objects, OBJECTS + 1);
    for (int i = 0; i < OBJECTS + 1; i++)
        VS_EXPECT(exact(objects[i].ptr, OBJECT_BYTES, objects[i].seed), "object %d after waking and a cycle", i);

    /* The object whose handle was released: its unmap frees it, so nothing
     * is mapped there any more and no handle is left to retain. */
    VS_CHECK(cuMemUnmap(objects[OBJECTS].ptr, OBJECT_BYTES));
    CUmemGenericAllocationHandle retained = 0;
    VS_EXPECT(cuMemRetainAllocationHandle(&retained, (void *)(uintptr_t)objects[OBJECTS].ptr)
                  == CUDA_ERROR_INVALID_VALUE,
              "a handle could still be retained at the unmapped, released object");
    VS_CHECK(cuMemAddressFree(objects[OBJECTS].reservation, OBJECT_BYTES));
    /* The rest torn down in the other order: release first, then unmap. */
    for (int i = 0; i < OBJECTS; i++) {
        if (i % 2 == 0) {
            VS_CHECK(cuMemRelease(objects[i].handle));
            VS_CHECK(cuMemUnmap(objects[i].ptr, OBJECT_BYTES));
        } else {
            VS_CHECK(cuMemUnmap(objects[i].ptr, OBJECT_BYTES));
            VS_CHECK(cuMemRelease(objects[i].handle));
        }
        VS_CHECK(cuMemAddressFree(objects[i].reservation, OBJECT_BYTES));
    }
    size_t free_after = free_bytes();
    VS_EXPECT(free_after <= free_before && free_after + SHIM_OWN_BYTES >= free_before,
              "cuMemGetInfo free: %zu bytes before the objects, %zu after their teardown",
              free_before, free_after);
}

/* ---- queries ------------------------------------------------------------------ */

typedef CUresult retain_fn_t(CUmemGenericAllocationHandle *, void *);
typedef CUresult release_fn_t(CUmemGenericAllocationHandle);

/* Whether the simulated driver itself maps `handle` at `ptr` now: asked
 * past any interposer, whose own mappings would answer otherwise. */
/* The handle the simulated driver itself maps at `ptr`; 0 when nothing is
 * mapped there (the shim evicted it). */
static CUmemGenericAllocationHandle driver_handle_at(CUdeviceptr ptr)
{
    retain_fn_t *retain = __extension__(retain_fn_t *) simcuda_entry_point("cuMemRetainAllocationHandle");
    release_fn_t *release = __extension__(release_fn_t *) simcuda_entry_point("cuMemRelease");
    CUmemGenericAllocationHandle found = 0;
    if (retain == NULL || release == NULL || retain(&found, (void *)(uintptr_t)ptr) != CUDA_SUCCESS)
        return 0;
    VS_CHECK(release(found));
    return found;
}

typedef CUresult reserve_fn_t(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult address_free_fn_t(CUdeviceptr, size_t);
typedef CUresult create_fn_t(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
typedef CUresult map_fn_t(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult unmap_fn_t(CUdeviceptr, size_t);

/* What the simulated driver itself answers to a map of `bytes` at
 * `offset` into a handle of `handle_bytes`, on memory of its own that no
 * interposer sees: the answer the program must get through the shim. */
static CUresult driver_map_answer(uint64_t handle_bytes, uint64_t offset, uint64_t bytes)
{
    reserve_fn_t *reserve = __extension__(reserve_fn_t *) simcuda_entry_point("cuMemAddressReserve");
    address_free_fn_t *address_free = __extension__(address_free_fn_t *) simcuda_entry_point("cuMemAddressFree");
    create_fn_t *create = __extension__(create_fn_t *) simcuda_entry_point("cuMemCreate");
    map_fn_t *map = __extension__(map_fn_t *) simcuda_entry_point("cuMemMap");
    unmap_fn_t *unmap = __extension__(unmap_fn_t *) simcuda_entry_point("cuMemUnmap");
    release_fn_t *release = __extension__(release_fn_t *) simcuda_entry_point("cuMemRelease");
    if (reserve == NULL || address_free == NULL || create == NULL || map == NULL || unmap == NULL || release == NULL) {
        fprintf(stderr, "preload_offload_vmm: the simulated driver exports no VMM entry points\n");
        exit(1);
    }
    CUmemAllocationProp prop = device_prop(CU_MEM_HANDLE_TYPE_NONE);
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va;
    VS_CHECK(reserve(&va, handle_bytes, 0, 0, 0));
    VS_CHECK(create(&handle, handle_bytes, &prop, 0));
    CUresult answer = map(va, bytes, offset, handle, 0);
    if (answer == CUDA_SUCCESS)
        VS_CHECK(unmap(va, bytes));
    VS_CHECK(release(handle));
    VS_CHECK(address_free(va, handle_bytes));
    return answer;
}

static void case_queries(void)
{
    CUmemAllocationProp prop = device_prop(CU_MEM_HANDLE_TYPE_NONE);
    CUmemGenericAllocationHandle handles[QUERY_UNITS];
    CUdeviceptr units[QUERY_UNITS];
    CUmemLocation device0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};

    for (int i = 0; i < QUERY_UNITS; i++) {
        VS_CHECK(cuMemAddressReserve(&units[i], QUERY_UNIT_BYTES, 0, 0, 0));
        VS_CHECK(cuMemCreate(&handles[i], QUERY_UNIT_BYTES, &prop, 0));
        VS_CHECK(cuMemMap(units[i], QUERY_UNIT_BYTES, 0, handles[i], 0));
        remember(units[i], QUERY_UNIT_BYTES, "unit", i);
        grant(units[i], QUERY_UNIT_BYTES);
        launch_fill(units[i], QUERY_UNIT_BYTES, seed_of(i, 0));
    }
    VS_CHECK(cuCtxSynchronize());
    /* Unit 0 was used first: reading all the others pushes it out. */
    touch_all(units + 1, QUERY_UNITS - 1, QUERY_UNIT_BYTES);

    /* The handle behind an interior address is the one cuMemCreate gave;
     * the retain is one more reference, and its release leaves the
     * application's own (the properties still answer on it). */
    CUmemGenericAllocationHandle retained = 0;
    VS_CHECK(cuMemRetainAllocationHandle(&retained, (void *)(uintptr_t)(units[0] + 4096)));
    VS_EXPECT(retained == handles[0], "cuMemRetainAllocationHandle on unit 0: handle 0x%llx, cuMemCreate gave 0x%llx",
              (unsigned long long)retained, (unsigned long long)handles[0]);
    VS_CHECK(cuMemRelease(retained));
    CUmemAllocationProp read_back;
    memset(&read_back, 0xa5, sizeof read_back);
    VS_CHECK(cuMemGetAllocationPropertiesFromHandle(&read_back, handles[0]));
    VS_EXPECT(read_back.type == prop.type && read_back.location.type == prop.location.type &&
                  read_back.location.id == prop.location.id &&
                  read_back.requestedHandleTypes == prop.requestedHandleTypes,
              "properties of unit 0's handle: type %d, location %d/%d, handle types %d", (int)read_back.type,
              (int)read_back.location.type, read_back.location.id, (int)read_back.requestedHandleTypes);

    /* The grant answers while the unit is out (pushed out again first). */
    touch_all(units + 1, QUERY_UNITS - 1, QUERY_UNIT_BYTES);
    unsigned long long flags = 0;
    VS_CHECK(cuMemGetAccess(&flags, &device0, units[0] + QUERY_UNIT_BYTES - 1));
    VS_EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "cuMemGetAccess on unit 0: %llu, granted read-write", flags);
    for (int i = 0; i < QUERY_UNITS; i++)
        VS_EXPECT(exact(units[i], QUERY_UNIT_BYTES, seed_of(i, 0)), "unit %d after the queries", i);

    /* Exportable (PyTorch's expandable segments ask for POSIX file
     * descriptors by default): evictable until it is exported, and its
     * memory made anew exportable; exported, resident for good. */
    CUmemAllocationProp shareable_prop = device_prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemGenericAllocationHandle shareable;
    CUdeviceptr shared_ptr;
    VS_CHECK(cuMemAddressReserve(&shared_ptr, QUERY_UNIT_BYTES, 0, 0, 0));
    VS_CHECK(cuMemCreate(&shareable, QUERY_UNIT_BYTES, &shareable_prop, 0));
    VS_CHECK(cuMemMap(shared_ptr, QUERY_UNIT_BYTES, 0, shareable, 0));
    remember(shared_ptr, QUERY_UNIT_BYTES, "exportable mapping", 0);
    grant(shared_ptr, QUERY_UNIT_BYTES);
    launch_fill(shared_ptr, QUERY_UNIT_BYTES, 0xfd);
    VS_CHECK(cuCtxSynchronize());
    bool pushed_out = false;
    for (int cycle = 0; cycle < 2 && !pushed_out; cycle++) {
        touch_all(units, QUERY_UNITS, QUERY_UNIT_BYTES);
        pushed_out = driver_handle_at(shared_ptr) == 0;
    }
    if (getenv("LD_PRELOAD") != NULL)
        VS_EXPECT(pushed_out, "the exportable mapping was never pushed out before its export");
    int fd = -1;
    VS_CHECK(cuMemExportToShareableHandle(&fd, shareable, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    VS_EXPECT(fd >= 0, "cuMemExportToShareableHandle gave descriptor %d", fd);
    if (fd >= 0)
        close(fd);
    CUmemGenericAllocationHandle exported = driver_handle_at(shared_ptr);
    VS_EXPECT(exported != 0, "the exportable mapping is not in place after its export");
    for (int cycle = 0; cycle < 2; cycle++)
        touch_all(units, QUERY_UNITS, QUERY_UNIT_BYTES);
    VS_EXPECT(driver_handle_at(shared_ptr) == exported, "the exported memory left its address");
    VS_CHECK(cuMemRetainAllocationHandle(&retained, (void *)(uintptr_t)shared_ptr));
    VS_EXPECT(retained == shareable, "cuMemRetainAllocationHandle on the exportable mapping: another handle");
    VS_CHECK(cuMemRelease(retained));
    VS_CHECK(cuMemGetAllocationPropertiesFromHandle(&read_back, shareable));
    VS_EXPECT(read_back.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
              "the exportable handle's properties: handle types %d", (int)read_back.requestedHandleTypes);
    if (getenv("VRAMSHIM_DEBUG_SNAPSHOT") != NULL) {
        preload_snapshot_t snap = preload_snapshot();
        preload_alloc_t a = preload_find(&snap, shared_ptr);
        VS_EXPECT(a.found && !a.evictable, "the shim's snapshot: the exportable mapping %s",
                  a.found ? "is evictable" : "is not listed");
        preload_snapshot_free(&snap);
    }
    VS_EXPECT(exact(shared_ptr, QUERY_UNIT_BYTES, 0xfd), "the exportable mapping after the cycles");

    /* Part of a handle: its second granule alone, at offset 2 MiB. */
    CUmemGenericAllocationHandle split;
    CUdeviceptr split_ptr;
    const uint64_t granule = 2 * MiB;
    VS_CHECK(cuMemAddressReserve(&split_ptr, QUERY_UNIT_BYTES, 0, 0, 0));
    VS_CHECK(cuMemCreate(&split, QUERY_UNIT_BYTES, &prop, 0));
    CUresult driver_part = driver_map_answer(QUERY_UNIT_BYTES, granule, granule);
    CUresult part = cuMemMap(split_ptr, granule, granule, split, 0);
    VS_EXPECT(part == driver_part, "cuMemMap at offset 2 MiB of a 4 MiB handle: %d, the driver answers %d",
              (int)part, (int)driver_part);
    if (part == CUDA_SUCCESS) {
        grant(split_ptr, granule);
        launch_fill(split_ptr, granule, 0x5a1);
        VS_CHECK(cuCtxSynchronize());
        touch_all(units, QUERY_UNITS, QUERY_UNIT_BYTES);
        VS_EXPECT(exact(split_ptr, granule, 0x5a1), "the mapping of part of a handle");
        VS_CHECK(cuMemUnmap(split_ptr, granule));
    }
    /* Refused or not, the handle then maps whole there, as any other. */
    VS_CHECK(cuMemMap(split_ptr, QUERY_UNIT_BYTES, 0, split, 0));
    remember(split_ptr, QUERY_UNIT_BYTES, "once partly mapped handle", 0);
    grant(split_ptr, QUERY_UNIT_BYTES);
    launch_fill(split_ptr, QUERY_UNIT_BYTES, 0x5917);
    VS_CHECK(cuCtxSynchronize());
    touch_all(units, QUERY_UNITS, QUERY_UNIT_BYTES);
    VS_EXPECT(exact(split_ptr, QUERY_UNIT_BYTES, 0x5917), "the handle mapped whole after the partial map");
    VS_CHECK(cuMemRetainAllocationHandle(&retained, (void *)(uintptr_t)(split_ptr + granule)));
    VS_EXPECT(retained == split, "cuMemRetainAllocationHandle after the partial map: another handle");
    VS_CHECK(cuMemRelease(retained));

    VS_CHECK(cuMemUnmap(split_ptr, QUERY_UNIT_BYTES));
    VS_CHECK(cuMemRelease(split));
    VS_CHECK(cuMemAddressFree(split_ptr, QUERY_UNIT_BYTES));
    VS_CHECK(cuMemUnmap(shared_ptr, QUERY_UNIT_BYTES));
    VS_CHECK(cuMemRelease(shareable));
    VS_CHECK(cuMemAddressFree(shared_ptr, QUERY_UNIT_BYTES));
    for (int i = 0; i < QUERY_UNITS; i++) {
        VS_CHECK(cuMemUnmap(units[i], QUERY_UNIT_BYTES));
        VS_CHECK(cuMemRelease(handles[i]));
        VS_CHECK(cuMemAddressFree(units[i], QUERY_UNIT_BYTES));
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: preload_offload_vmm arena|objects|queries\n");
        return 2;
    }
    void (*run)(void) = NULL;
    if (strcmp(argv[1], "arena") == 0)
        run = case_arena;
    else if (strcmp(argv[1], "objects") == 0)
        run = case_objects;
    else if (strcmp(argv[1], "queries") == 0)
        run = case_queries;
    if (run == NULL) {
        fprintf(stderr, "preload_offload_vmm: unknown case %s\n", argv[1]);
        return 2;
    }
    vs_test_set_phase(argv[1]);
    setup();
    run();
    unsigned long failed = vs_test_failure_count();
    printf("preload_offload_vmm %s: %s (%lu failures)\n", argv[1], failed == 0 ? "ok" : "FAILED", failed);
    return failed == 0 ? 0 : 1;
}

#!/usr/bin/env python3
"""nvrtc_client.py: the shape of `LD_PRELOAD=libvramshim.so python infer.py`.

Standard library only (ctypes). Compiles its kernels at run time with the
toolkit's NVRTC, as CuPy and PyTorch's jiterator do, loads the PTX through the
real libcudart (cudaLibraryLoadData), launches with cudaLaunchKernel and checks
every result on the host. It keeps 8 MiB of device buffers alive and cycles
through them, so under VRAM_LIMIT=2M the shim's offload mode must evict and
restore them.

With --async the buffers are stream-ordered (cudaMallocAsync on a stream,
PyTorch's cudaMallocAsync backend's calls): 4 pairs of 2 MiB, freed with
cudaFreeAsync and allocated again once, and the default pool's
cudaMemPoolAttrUsedMemCurrent and cudaMemGetInfo are checked (free plus
what is allocated within the total, as PyTorch asserts).

With --vmm the buffers are the program's own virtual memory, made the way
PyTorch's expandable segments make theirs: the driver's VMM calls resolved
through the runtime (cudaGetDriverEntryPointByVersion), one reservation for
every buffer, one 2 MiB cuMemCreate handle (exportable as a POSIX file
descriptor, as PyTorch asks) mapped and granted per buffer, unmapped and
released at the end.

Usage: nvrtc_client.py [CUDA_ROOT] [--async | --vmm]. Exit 0 on success, 1
on a wrong result, 77 when NVRTC or libcudart cannot be found.
"""
import ctypes
import os
import struct
import sys

ASYNC = "--async" in sys.argv[1:]
VMM = "--vmm" in sys.argv[1:]
POSITIONAL = [a for a in sys.argv[1:] if a not in ("--async", "--vmm")]
CUDA_ROOT = POSITIONAL[0] if POSITIONAL else os.environ.get("CUDA_ROOT", "/usr/local/cuda")
USED_MEM_CURRENT = 7  # cudaMemPoolAttrUsedMemCurrent

SOURCE = rb"""
struct Span { const float *x; float *y; unsigned long long n; };

extern "C" __global__ void saxpy(float a, Span s)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < s.n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        s.y[i] = a * s.x[i] + s.y[i];
}

extern "C" __global__ void block_sums(const float *x, double *sums, int n)
{
    __shared__ double part[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    double v = i < n ? (double)x[i] : 0.0;
    for (int d = 16; d > 0; d /= 2)
        v += __shfl_down_sync(0xffffffffu, v, d);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int w = 0; w < (int)(blockDim.x / 32); w++)
            t += part[w];
        sums[blockIdx.x] = t;
    }
}
"""


def load(names):
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def main():
    lib = os.path.join(CUDA_ROOT, "lib64")
    nvrtc = load([os.path.join(lib, "libnvrtc.so.13"), os.path.join(lib, "libnvrtc.so"), "libnvrtc.so.13"])
    cudart = load([os.path.join(lib, "libcudart.so.13"), os.path.join(lib, "libcudart.so"), "libcudart.so.13"])
    if nvrtc is None or cudart is None:
        print("nvrtc_client: NVRTC or libcudart not found under", CUDA_ROOT)
        return 77

    def rtc(call, *args):
        rc = call(*args)
        if rc != 0:
            raise RuntimeError("%s failed: %d" % (call.__name__, rc))

    def rt(call, *args):
        rc = call(*args)
        if rc != 0:
            cudart.cudaGetErrorString.restype = ctypes.c_char_p
            raise RuntimeError("%s failed: %s" % (call.__name__, cudart.cudaGetErrorString(rc).decode()))

    # Compile.
    prog = ctypes.c_void_p()
    rtc(nvrtc.nvrtcCreateProgram, ctypes.byref(prog), SOURCE, b"kernels.cu", 0, None, None)
    opts = (ctypes.c_char_p * 1)(b"--gpu-architecture=compute_80")
    rc = nvrtc.nvrtcCompileProgram(prog, 1, opts)
    if rc != 0:
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        print("nvrtc_client: compile failed:", log.value.decode())
        return 1
    size = ctypes.c_size_t()
    rtc(nvrtc.nvrtcGetPTXSize, prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    rtc(nvrtc.nvrtcGetPTX, prog, ptx)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))

    # Load through the runtime and find the kernels.
    library = ctypes.c_void_p()
    rt(cudart.cudaLibraryLoadData, ctypes.byref(library), ptx, None, None, 0, None, None, 0)
    saxpy, block_sums = ctypes.c_void_p(), ctypes.c_void_p()
    rt(cudart.cudaLibraryGetKernel, ctypes.byref(saxpy), library, b"saxpy")
    rt(cudart.cudaLibraryGetKernel, ctypes.byref(block_sums), library, b"block_sums")

    class Dim3(ctypes.Structure):
        _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]

    class Span(ctypes.Structure):
        _fields_ = [("x", ctypes.c_void_p), ("y", ctypes.c_void_p), ("n", ctypes.c_ulonglong)]

    cudart.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                        ctypes.c_void_p]

    def launch(kernel, grid, block, *args):
        holders = [ctypes.pointer(a) for a in args]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(h, ctypes.c_void_p) for h in holders])
        rt(cudart.cudaLaunchKernel, kernel, Dim3(grid, 1, 1), Dim3(block, 1, 1), params, 0, None)

    H2D, D2H = 1, 2
    count, n = (4, 512 * 1024) if ASYNC or VMM else (8, 256 * 1024)  # 4 pairs of 2 MiB, or 8 of 1 MiB
    failures = 0
    stream = ctypes.c_void_p()
    rt(cudart.cudaStreamCreate, ctypes.byref(stream))

    if VMM:
        class MemLocation(ctypes.Structure):
            _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

        class AllocFlags(ctypes.Structure):
            _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                        ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]

        class AllocationProp(ctypes.Structure):
            _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", MemLocation),
                        ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", AllocFlags)]

        class AccessDesc(ctypes.Structure):
            _fields_ = [("location", MemLocation), ("flags", ctypes.c_int)]

        u64, size_t = ctypes.c_uint64, ctypes.c_size_t
        signatures = {
            "cuMemAddressReserve": [ctypes.POINTER(u64), size_t, size_t, u64, ctypes.c_ulonglong],
            "cuMemAddressFree": [u64, size_t],
            "cuMemCreate": [ctypes.POINTER(u64), size_t, ctypes.POINTER(AllocationProp), ctypes.c_ulonglong],
            "cuMemMap": [u64, size_t, size_t, u64, ctypes.c_ulonglong],
            "cuMemSetAccess": [u64, size_t, ctypes.POINTER(AccessDesc), size_t],
            "cuMemUnmap": [u64, size_t],
            "cuMemRelease": [u64],
        }
        drv = {}
        for name, argtypes in signatures.items():
            fn = ctypes.c_void_p()
            rt(cudart.cudaGetDriverEntryPointByVersion, name.encode(), ctypes.byref(fn), 12000, 0, None)
            drv[name] = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(fn.value)

        def du(name, *args):
            rc = drv[name](*args)
            if rc != 0:
                raise RuntimeError("%s failed: %d" % (name, rc))

        prop = AllocationProp()
        prop.type, prop.location.type, prop.location.id = 1, 1, 0  # pinned, on device 0
        prop.requestedHandleTypes = 1  # POSIX file descriptors, as PyTorch asks by default
        access = AccessDesc(MemLocation(1, 0), 3)  # read-write for device 0
        arena = u64()
        du("cuMemAddressReserve", ctypes.byref(arena), 2 * count * n * 4, 0, 0, 0)
        arena_next = [arena.value]
        handles = {}

    def alloc(ptr, size):
        if VMM:
            handle = u64()
            du("cuMemCreate", ctypes.byref(handle), size, ctypes.byref(prop), 0)
            at = arena_next[0]
            arena_next[0] += size
            du("cuMemMap", at, size, 0, handle.value, 0)
            du("cuMemSetAccess", at, size, ctypes.byref(access), 1)
            ptr.value = at
            handles[at] = (handle.value, size)
        elif ASYNC:
            rt(cudart.cudaMallocAsync, ctypes.byref(ptr), ctypes.c_size_t(size), stream)
            rt(cudart.cudaStreamSynchronize, stream)
        else:
            rt(cudart.cudaMalloc, ctypes.byref(ptr), ctypes.c_size_t(size))

    def release(ptr):
        if VMM:
            handle, size = handles.pop(ptr.value)
            du("cuMemUnmap", ptr.value, size)
            du("cuMemRelease", handle)
        elif ASYNC:
            rt(cudart.cudaFreeAsync, ptr, stream)
        else:
            rt(cudart.cudaFree, ptr)

    if ASYNC:
        # Freed and allocated again on the same stream: the same block.
        first, again = ctypes.c_void_p(), ctypes.c_void_p()
        alloc(first, n * 4)
        release(first)
        alloc(again, n * 4)
        if again.value != first.value:
            print("nvrtc_client: a block freed on a stream was not reused by it")
            failures += 1
        release(again)
        rt(cudart.cudaStreamSynchronize, stream)
    xs, ys = [], []
    for k in range(count):
        x, y = ctypes.c_void_p(), ctypes.c_void_p()
        alloc(x, n * 4)
        alloc(y, n * 4)
        hx = (ctypes.c_float * n)(*[float((i * 7 + k) % 1000) for i in range(n)])
        hy = (ctypes.c_float * n)(*[float(i % 97) for i in range(n)])
        rt(cudart.cudaMemcpy, x, hx, ctypes.c_size_t(n * 4), H2D)
        rt(cudart.cudaMemcpy, y, hy, ctypes.c_size_t(n * 4), H2D)
        xs.append(x)
        ys.append(y)
    for k in range(count):
        launch(saxpy, 64, 256, ctypes.c_float(0.5 + k), Span(xs[k], ys[k], n))
    rt(cudart.cudaGetLastError)
    if ASYNC:
        pool, used = ctypes.c_void_p(), ctypes.c_uint64()
        rt(cudart.cudaDeviceGetDefaultMemPool, ctypes.byref(pool), 0)
        rt(cudart.cudaMemPoolGetAttribute, pool, USED_MEM_CURRENT, ctypes.byref(used))
        if used.value != 2 * count * n * 4:
            print("nvrtc_client: the pool's used memory is %d, expected %d" % (used.value, 2 * count * n * 4))
            failures += 1
        free_bytes, total = ctypes.c_size_t(), ctypes.c_size_t()
        rt(cudart.cudaMemGetInfo, ctypes.byref(free_bytes), ctypes.byref(total))
        if free_bytes.value + used.value > total.value:
            print("nvrtc_client: cudaMemGetInfo free %d + %d allocated > total %d"
                  % (free_bytes.value, used.value, total.value))
            failures += 1
    blocks = (n + 255) // 256
    sums = ctypes.c_void_p()
    rt(cudart.cudaMalloc, ctypes.byref(sums), ctypes.c_size_t(blocks * 8))
    for k in range(count):
        out = (ctypes.c_float * n)()
        rt(cudart.cudaMemcpy, out, ys[k], ctypes.c_size_t(n * 4), D2H)
        a = ctypes.c_float(0.5 + k).value
        bad = 0
        for i in range(0, n):
            x = float((i * 7 + k) % 1000)
            y = float(i % 97)
            expect = struct.unpack("f", struct.pack("f", a * x + y))[0]
            if out[i] != expect:
                bad += 1
        if bad:
            print("nvrtc_client: saxpy buffer %d: %d wrong" % (k, bad))
            failures += 1
        launch(block_sums, blocks, 256, ctypes.c_void_p(ys[k].value), ctypes.c_void_p(sums.value), ctypes.c_int(n))
        hs = (ctypes.c_double * blocks)()
        rt(cudart.cudaMemcpy, hs, sums, ctypes.c_size_t(blocks * 8), D2H)
        for b in range(0, blocks, 97):
            chunk = out[b * 256:(b + 1) * 256]
            # the kernel's order: shuffle tree within each warp, then warps in order
            total = 0.0
            for w in range(8):
                vals = [float(v) for v in chunk[w * 32:(w + 1) * 32]]
                d = 16
                while d > 0:
                    # out-of-range lanes read their own value, as shfl.down does
                    vals = [vals[i] + (vals[i + d] if i + d < 32 else vals[i]) for i in range(32)]
                    d //= 2
                total += vals[0]
            expect = total
            if hs[b] != expect:
                print("nvrtc_client: block_sums buffer %d block %d: %r, expected %r" % (k, b, hs[b], expect))
                failures += 1
                break
    for k in range(count):
        release(xs[k])
        release(ys[k])
    rt(cudart.cudaStreamSynchronize, stream)
    if VMM:
        du("cuMemAddressFree", arena.value, 2 * count * n * 4)
    rt(cudart.cudaStreamDestroy, stream)
    rt(cudart.cudaFree, sums)
    rt(cudart.cudaLibraryUnload, library)
    if failures:
        print("nvrtc_client: %d check(s) failed" % failures)
        return 1
    print("nvrtc_client: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""gpu_frameworks.py: PyTorch and accelerate features under `vramshim run`, on a real GPU.

Not registered in a suite yet and not yet run: docs/frameworks.md says so.
Needs torch (and accelerate for its cases) and a GPU.

usage: gpu_frameworks.py VRAMSHIM OUTDIR [CASE,...]       (driver: every case, with and without the shim)
       gpu_frameworks.py --case NAME             (one case, in this process)

Each case prints one line `RESULT {json}` with a checksum of what it computed.
The driver runs it once plainly and once under `vramshim run --limit 1G
--log info`, and records status, checksums, the shim's exit summary
(evictions, restores) and the last lines of stderr.
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import time

LIMIT = "1G"
N_WEIGHTS, DIM, PASSES = 24, 4096, 3  # 24 x 64 MiB fp32 = 1.5 GiB of weights


def digest(t):
    import torch
    return hashlib.sha256(t.detach().to("cpu", torch.float32).contiguous().numpy().tobytes()).hexdigest()[:16]


def weights(torch):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(DIM, DIM, generator=g) / DIM ** 0.5).cuda() for _ in range(N_WEIGHTS)]


def chain(torch, ws, x):
    for _ in range(PASSES):
        for w in ws:
            x = torch.tanh(x @ w)
    return x


def case_caching(extra=None):
    import torch
    ws = weights(torch)
    x = torch.randn(64, DIM, generator=torch.Generator().manual_seed(1)).cuda()
    y = chain(torch, ws, x)
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return {"digest": digest(y), "mem_get_info_total": total, "reserved": torch.cuda.memory_reserved(),
            **(extra or {})}


def case_graph():
    import torch
    ws = weights(torch)[:8]
    static_x = torch.randn(64, DIM, generator=torch.Generator().manual_seed(1)).cuda()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            y = chain(torch, ws, static_x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = chain(torch, ws, static_x)
    # more memory than the limit beside the graph
    other = [torch.full((DIM, DIM), float(i), device="cuda") for i in range(12)]
    outs = []
    for i in range(3):
        static_x.copy_(torch.randn(64, DIM, generator=torch.Generator().manual_seed(10 + i)).cuda())
        g.replay()
        outs.append(digest(static_y))
        _ = [o.sum() for o in other]
    torch.cuda.synchronize()
    return {"digest": "-".join(outs), "other_ok": all(float(o[0, 0]) == i for i, o in enumerate(other))}


def case_compile():
    import torch
    ws = weights(torch)[:8]
    def f(x):
        for w in ws:
            x = torch.nn.functional.gelu(x @ w) * 0.5 + x
        return x
    cf = torch.compile(f)
    x = torch.randn(64, DIM, generator=torch.Generator().manual_seed(1)).cuda()
    y = cf(x)
    y2 = f(x)
    torch.cuda.synchronize()
    return {"digest": digest(y), "close_to_eager": bool(torch.allclose(y, y2, rtol=1e-3, atol=1e-3))}


def _ipc_child(q, t):
    q.put(float(t.sum().item()))


def case_ipc():
    import torch
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    t = torch.ones(DIM, DIM, device="cuda")  # 64 MiB: evictable under the shim
    q = ctx.Queue()
    p = ctx.Process(target=_ipc_child, args=(q, t))
    try:
        p.start()
        p.join(60)
        got = q.get(timeout=5) if p.exitcode == 0 else None
        return {"digest": str(got), "child_exit": p.exitcode}
    except Exception as e:  # the parent's export fails
        return {"digest": "error", "error": f"{type(e).__name__}: {str(e)[:200]}"}


def case_nccl():
    import torch
    import torch.distributed as dist
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29511", rank=0, world_size=1)
    ws = weights(torch)
    t = torch.arange(DIM * DIM, device="cuda", dtype=torch.float32).reshape(DIM, DIM)
    dist.all_reduce(t)
    s = sum(float(w.sum()) for w in ws)  # touch everything, forcing evictions
    dist.all_reduce(t)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    return {"digest": digest(t), "weights_sum": round(s, 3)}


def _mlp(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(DIM, DIM) for _ in range(N_WEIGHTS)])


def case_accelerate_cpu_offload():
    import torch
    from accelerate import cpu_offload
    m = _mlp(torch)
    cpu_offload(m, execution_device=torch.device("cuda:0"))
    x = torch.randn(64, DIM, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y = m(x.cuda())
    return {"digest": digest(y)}


def case_accelerate_device_map():
    import torch
    from accelerate import dispatch_model
    m = _mlp(torch)
    device_map = {str(i): (0 if i < N_WEIGHTS // 2 else "cpu") for i in range(N_WEIGHTS)}
    m = dispatch_model(m, device_map=device_map)
    x = torch.randn(64, DIM, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y = m(x.cuda())
    return {"digest": digest(y)}


def case_accelerate_all_on_gpu():
    """The model placed whole on the GPU (device_map everything on 0, 2.3x the limit)."""
    import torch
    m = _mlp(torch).cuda()
    x = torch.randn(64, DIM, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y = m(x.cuda())
    return {"digest": digest(y)}


CASES = {
    "caching_allocator": (lambda: case_caching(), {}),
    "expandable_segments": (lambda: case_caching(), {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    "cudaMallocAsync": (lambda: case_caching(), {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}),
    "cuda_graphs": (case_graph, {}),
    "torch_compile": (case_compile, {}),
    "multiprocessing_ipc": (case_ipc, {}),
    "multiprocessing_ipc_min_evict": (case_ipc, {"VRAMSHIM_MIN_EVICT": "128M"}),
    "nccl_world1": (case_nccl, {}),
    "accelerate_cpu_offload": (case_accelerate_cpu_offload, {}),
    "accelerate_device_map": (case_accelerate_device_map, {}),
    "model_whole_on_gpu": (case_accelerate_all_on_gpu, {}),
}


def run_case(vramshim, name, shim, timeout):
    env = dict(os.environ, **CASES[name][1])
    cmd = [sys.executable, __file__, "--case", name]
    if shim:
        cmd = [vramshim, "run", "--limit", LIMIT, "--log", "info", "--"] + cmd
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        rc, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    res = {"status": rc, "seconds": round(time.time() - t0, 1)}
    m = re.search(r"^RESULT (.*)$", out, re.M)
    if m:
        res.update(json.loads(m.group(1)))
    s = re.search(r"(?s)info:   evicted +(\d+) times, [^(\n]*\((\d+) bytes\).*?"
                  r"info:   restored +(\d+) times, [^(\n]*\((\d+) bytes\)", err)
    if s:
        res.update(evictions=int(s.group(1)), restores=int(s.group(3)), to_host=int(s.group(2)),
                   to_device=int(s.group(4)))
    sm = re.search(r"info:   peak tracked .*", err)
    if sm:
        res["shim_summary"] = sm.group(0)[:400]
    warn = [l for l in err.splitlines() if "warn" in l or "Error" in l or "error" in l][:6]
    res["stderr_notes"] = [l[:300] for l in warn]
    if rc != 0:
        res["stderr_tail"] = err[-1500:]
    return res


def main():
    if sys.argv[1] == "--case":
        name = sys.argv[2]
        print("RESULT " + json.dumps(CASES[name][0]()), flush=True)
        return 0
    vramshim, outdir = sys.argv[1], sys.argv[2]
    only = sys.argv[3].split(",") if len(sys.argv) > 3 else list(CASES)
    results = {}
    for name in only:
        results[name] = {"plain": run_case(vramshim, name, False, 120),
                         "shim": run_case(vramshim, name, True, 180)}
        p, s = results[name]["plain"], results[name]["shim"]
        results[name]["same_result"] = p.get("digest") is not None and p.get("digest") == s.get("digest")
        print(name, json.dumps(results[name])[:600], flush=True)
        with open(os.path.join(outdir, "frameworks.json"), "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

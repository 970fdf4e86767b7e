#!/usr/bin/env python3
"""gpu_torch_cap.py: PyTorch under libvramshim.so in cap mode, on a real GPU.

Usage: gpu_torch_cap.py /path/to/libvramshim.so

Runs a synthetic transformer (random weights from a fixed seed; nothing is
downloaded) twice in child processes: once directly, once with
LD_PRELOAD=libvramshim.so VRAMSHIM_MODE=cap VRAM_LIMIT=<limit>. Checks that
under the shim
  - torch.cuda.mem_get_info() reports a total equal to the limit,
  - allocating past the limit raises torch.OutOfMemoryError and what was
    granted never exceeds the limit,
  - the model's outputs match the run without the shim.
Exits 77 (skipped) when torch or a GPU is not available.
"""
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
LIMIT_MIB = 1536


def child(out_path):
    import torch

    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda:0")

    layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).to(device).eval()
    x = torch.randn(8, 128, 512, generator=torch.Generator().manual_seed(99)).to(device)
    with torch.no_grad():
        y = model(x)
        for _ in range(3):
            y = model(y)
    torch.cuda.synchronize()
    result = {"output": y.double().cpu().flatten().tolist()[:4096], "sum": float(y.double().sum().item())}

    free, total = torch.cuda.mem_get_info()
    result["total"] = total
    result["free"] = free

    if os.environ.get("VRAM_LIMIT"):
        # Fill what is left with 64 MiB tensors until the cap refuses one.
        granted = []
        oom = False
        try:
            for _ in range(10000):
                granted.append(torch.empty(64 << 20, dtype=torch.uint8, device=device))
        except torch.cuda.OutOfMemoryError:
            oom = True
        result["oom"] = oom
        result["reserved_at_oom"] = torch.cuda.memory_reserved()
        del granted
        torch.cuda.empty_cache()

    with open(out_path, "w") as f:
        json.dump(result, f)
    return 0


def run_child(env_extra):
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as tmp:
        path = tmp.name
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(env_extra)
    env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    proc = subprocess.run([sys.executable, __file__, "--child", path], env=env)
    if proc.returncode != 0:
        print("child failed with status %d (env %s)" % (proc.returncode, env_extra))
        sys.exit(1)
    with open(path) as f:
        data = json.load(f)
    os.unlink(path)
    return data


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        return child(sys.argv[2])
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    try:
        import torch
    except ImportError:
        print("torch is not installed: skipped")
        return SKIP
    if not torch.cuda.is_available():
        print("no CUDA GPU: skipped")
        return SKIP
    shim = os.path.abspath(sys.argv[1])
    limit = LIMIT_MIB << 20

    direct = run_child({})
    capped = run_child({"LD_PRELOAD": shim, "VRAMSHIM_MODE": "cap", "VRAM_LIMIT": "%dM" % LIMIT_MIB,
                        "VRAMSHIM_LOG": "info"})

    failures = []
    if capped["total"] != min(limit, direct["total"]):
        failures.append("mem_get_info total %d, expected %d" % (capped["total"], min(limit, direct["total"])))
    if not capped.get("oom"):
        failures.append("no OutOfMemoryError below the limit")
    if capped.get("reserved_at_oom", 0) > limit:
        failures.append("reserved %d bytes, over the %d-byte limit" % (capped["reserved_at_oom"], limit))
    a, b = direct["output"], capped["output"]
    worst = max(abs(p - q) for p, q in zip(a, b))
    if len(a) != len(b) or worst > 1e-5 or abs(direct["sum"] - capped["sum"]) > 1e-3 * max(1.0, abs(direct["sum"])):
        failures.append("outputs differ: max abs difference %g, sums %r vs %r" % (worst, direct["sum"], capped["sum"]))
    print("gpu_torch_cap: total %d MiB (limit %d MiB), OOM raised: %s, reserved at OOM %d MiB, "
          "max output difference %g (bitwise equal: %s)" % (
              capped["total"] >> 20, LIMIT_MIB, capped.get("oom"), capped.get("reserved_at_oom", 0) >> 20,
              worst, a == b))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

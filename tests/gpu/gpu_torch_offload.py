#!/usr/bin/env python3
"""gpu_torch_offload.py: PyTorch under libvramshim.so in offload mode, on a real GPU.

Usage: gpu_torch_offload.py /path/to/libvramshim.so

Runs a synthetic transformer (random weights from a fixed seed; nothing is
downloaded; about 1.2 GB of weights) in child processes: once directly, which
measures its footprint (torch.cuda.memory_reserved() at the end), then with
LD_PRELOAD=libvramshim.so and VRAM_LIMIT = 25% of that footprint. Checks that
under the shim
  - the outputs are bit-identical to the run without the shim (SHA-256 of the
    output tensor's bytes),
  - torch.cuda.mem_get_info() reports a total equal to the limit,
  - the shim really evicted and restored (its exit summary at
    VRAMSHIM_LOG=info).
Exits 77 (skipped) when torch or a GPU is not available.
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77


def child(out_path):
    import torch

    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda:0")

    layer = torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=24, enable_nested_tensor=False).to(device).eval()
    x = torch.randn(4, 256, 1024, generator=torch.Generator().manual_seed(99)).to(device)
    with torch.no_grad():
        y = model(x)
        for _ in range(2):
            y = model(y)
    torch.cuda.synchronize()
    data = y.float().cpu().contiguous().numpy().tobytes()
    free, total = torch.cuda.mem_get_info()
    result = {
        "sha256": hashlib.sha256(data).hexdigest(),
        "sum": float(y.double().sum().item()),
        "reserved": torch.cuda.memory_reserved(),
        "total": total,
    }
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
    proc = subprocess.run([sys.executable, __file__, "--child", path], env=env, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        print("child failed with status %d (env %s)" % (proc.returncode, env_extra))
        sys.exit(1)
    with open(path) as f:
        data = json.load(f)
    os.unlink(path)
    return data, proc.stderr


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

    direct, _ = run_child({})
    limit = direct["reserved"] // 4
    offloaded, log = run_child({"LD_PRELOAD": shim, "VRAM_LIMIT": str(limit), "VRAMSHIM_LOG": "info"})

    failures = []
    if offloaded["sha256"] != direct["sha256"]:
        failures.append("outputs differ: sums %r vs %r" % (direct["sum"], offloaded["sum"]))
    if offloaded["total"] != min(limit, direct["total"]):
        failures.append("mem_get_info total %d, expected %d" % (offloaded["total"], min(limit, direct["total"])))
    moved = re.search(r"(?s)info:   evicted +(\d+) times, .*?info:   restored +(\d+) times", log)
    if moved is None or int(moved.group(1)) == 0 or int(moved.group(2)) == 0:
        failures.append("no evictions and restores in the shim's exit summary")
    print("gpu_torch_offload: footprint %d MiB, VRAM_LIMIT %d MiB (25%%), outputs bit-identical: %s, %s" % (
        direct["reserved"] >> 20, limit >> 20, offloaded["sha256"] == direct["sha256"],
        "evictions %s, restores %s" % moved.groups() if moved else "no offload summary"))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# tools/demo.sh: builds vramshim and runs a short demonstration under the shim.
#
# With an NVIDIA GPU and driver present the workloads run on the GPU;
# otherwise on the simulated driver (tests/simcuda), whose report of what
# happened is printed at the end. Shown: the hard cap (VRAM_LIMIT=256M lets a
# program have exactly four 64 MiB buffers and cuMemGetInfo says 256 MiB); then
# the offload mode (a 1.5 GiB
# fill/checksum working set, byte-exact under VRAM_LIMIT=512M, through the
# libcudart-style entry path) with `vramshim dump` of it while it runs and the
# shim's exit summary.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
tools/setup.sh >/dev/null

vramshim="$build_dir/tools/vramshim"
client="$build_dir/tests/clients/client_cudart_like"
report=$(mktemp -t vramshim-demo-XXXXXX.json)
trap 'rm -f "$report"' EXIT

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "demo: GPU found ($(nvidia-smi -L | head -n 1)); running on it"
    on_gpu=1
else
    echo "demo: no GPU; running on the simulated driver (tests/simcuda)"
    on_gpu=0
    export LD_LIBRARY_PATH="$PWD/$build_dir/tests/simcuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export SIMCUDA_DEVICE_MEM=${SIMCUDA_DEVICE_MEM:-1G}
    export SIMCUDA_REPORT="$report"
fi

echo
echo "demo: 1. the hard cap: VRAM_LIMIT=256M, 64 MiB buffers until refused"
"$vramshim" run --mode cap --limit 256M -- "$client" --alloc-until-oom --mib 64 --expect-count 4 --expect-total-mib 256

echo
echo "demo: 2. offload: 24 x 64 MiB (1.5 GiB) under VRAM_LIMIT=512M, dumped from outside while it runs"
"$vramshim" run --limit 512M --log info -- "$client" --buffers 24 --mib 64 --rounds 1 --streams 4 --hold-ms 1000 &
workload=$!
for _ in $(seq 100); do
    sleep 0.2
    if "$vramshim" dump "$workload" --state host 2>/dev/null | grep -q host; then
        "$vramshim" dump "$workload"
        break
    fi
done
wait "$workload"

if [ "$on_gpu" = 0 ]; then
    echo
    echo "demo: the simulated driver's report of the last run:"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["calls"]=dict(sorted(r["calls"].items(), key=lambda kv: -kv[1])[:8]); print(json.dumps(r, indent=1))' "$report"
fi

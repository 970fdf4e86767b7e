#!/usr/bin/env bash
# tools/demo.sh: builds vramshim and runs a short demonstration workload.
#
# With an NVIDIA GPU and driver present, the workload runs on the GPU;
# otherwise it runs on the simulated driver (tests/simcuda) and prints the
# simulated driver's report of what happened.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
tools/setup.sh >/dev/null

report=$(mktemp -t vramshim-demo-XXXXXX.json)
trap 'rm -f "$report"' EXIT

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "demo: GPU found ($(nvidia-smi -L | head -n 1)); running the workload on it"
    "$build_dir/tests/clients/client_cudart_like" --buffers 8 --mib 64 --rounds 2 --streams 4
    exit
fi

echo "demo: no GPU; running on the simulated driver (tests/simcuda)"
export LD_LIBRARY_PATH="$PWD/$build_dir/tests/simcuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SIMCUDA_DEVICE_MEM=${SIMCUDA_DEVICE_MEM:-1G}
SIMCUDA_REPORT="$report" "$build_dir/tests/clients/client_cudart_like" --buffers 8 --mib 64 --rounds 2 --streams 4
echo "demo: simulated driver report:"
python3 -m json.tool "$report" | head -n 40

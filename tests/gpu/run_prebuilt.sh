#!/usr/bin/env bash
# run_prebuilt.sh: the gpu suite, the cuda suite's programs natively and
# under the shim, the driver's facts and host costs, and the DiT benchmark,
# on a GPU machine from a build made elsewhere (`meson setup build-gpu
# -Dgpu_tests=enabled && ninja -C build-gpu`, the folder copied there),
# without Meson, whose version there may differ from the build's. Each
# step runs as `meson introspect --tests` names it, under a time limit,
# and prints `--- NAME rc=N SECONDS`.
#
#     tests/gpu/run_prebuilt.sh BUILD_DIR OUT_DIR [all|facts|tests|dit|cuda]
#
# OUT_DIR receives log.txt and what is worth keeping: driver_facts.txt,
# device_attributes.txt, host_costs.txt, dit.txt. Run from the repository
# root. The DiT step takes about three minutes on an H200 (12 GiB of
# weights), the rest about one.
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR OUT_DIR [all|facts|tests|dit|cuda]" >&2
  exit 2
fi
B=$(cd "$1" && pwd) || exit 2
OUT=$(mkdir -p "$2" && cd "$2" && pwd) || exit 2
only=${3:-all}
case $only in all|facts|tests|dit|cuda) ;; *) echo "$0: unknown step '$only'" >&2; exit 2 ;; esac
SRC=$PWD
SHIM=$B/shim/libvramshim.so
exec > >(tee -a "$OUT/log.txt") 2>&1

step() { echo; echo "=== $1 ($(date +%T))"; }
run() {
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  step "$name"
  timeout -k 5 "$limit" "$@"
  echo "--- $name rc=$? $((SECONDS - start))s"
}
wanted() { [ "$only" = all ] || [ "$only" = "$1" ]; }

step machine
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())'
nproc; free -g | head -2
cd "$B" || exit 1

if wanted facts; then
  run driver_facts 90 bash -c "tests/gpu/driver_facts > '$OUT/driver_facts.txt'"
  run device_attributes 60 bash -c "tests/gpu/device_attributes > '$OUT/device_attributes.txt'"
  run host_costs 180 bash -c "set -o pipefail; bench/gpu/host_costs | tee '$OUT/host_costs.txt'"
fi

if wanted tests; then
  run gpu_device_hash 60 tests/gpu/gpu_device_hash
  run gpu_libcudart_cap 60 env LD_PRELOAD="$SHIM" VRAMSHIM_MODE=cap VRAM_LIMIT=256M \
    tests/gpu/client_libcudart --mib 64 --buffers 8 --expect-count 4
  run gpu_torch_cap 180 python3 "$SRC/tests/gpu/gpu_torch_cap.py" "$SHIM"
  run gpu_torch_offload 240 python3 "$SRC/tests/gpu/gpu_torch_offload.py" "$SHIM"
fi

if wanted dit; then
  run gpu_dit_offload 330 bash -c "set -o pipefail; python3 '$SRC/bench/gpu/dit_offload.py' '$SHIM' --vramshim-tool tools/vramshim \
    --max-weights 12G --passes 5 --warmup 20 --limits 25,40,60 --child-timeout 150 | tee '$OUT/dit.txt'"
fi

if wanted cuda; then
  for app in app_static app_shared; do
    run "cuda_${app}_native" 60 "tests/cuda/$app"
    run "cuda_${app}_offload" 60 env LD_PRELOAD="$SHIM" VRAM_LIMIT=16M VRAMSHIM_LOG=info "tests/cuda/$app"
    run "cuda_${app}_cap" 60 env LD_PRELOAD="$SHIM" VRAMSHIM_MODE=cap VRAM_LIMIT=64M "tests/cuda/$app"
  done
  run cuda_nvrtc_offload 90 env LD_PRELOAD="$SHIM" VRAM_LIMIT=2M python3 "$SRC/tests/cuda/nvrtc_client.py" /usr/local/cuda
  run cuda_nvrtc_cap 90 env LD_PRELOAD="$SHIM" VRAMSHIM_MODE=cap VRAM_LIMIT=32M \
    python3 "$SRC/tests/cuda/nvrtc_client.py" /usr/local/cuda
fi
step done

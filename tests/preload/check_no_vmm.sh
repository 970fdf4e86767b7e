#!/bin/sh
# check_no_vmm.sh SHIM PROGRAM [ARGS...]: the offload mode on a device
# without virtual memory management (SIMCUDA_VMM=0, as on some vGPU and WSL
# setups), where cuMemCreate and cuMemAddressReserve answer
# CUDA_ERROR_NOT_SUPPORTED. VRAM_LIMIT=256M holds there as a hard cap:
# PROGRAM (a test client) with 3 x 64 MiB is byte-exact; allocating 64 MiB
# at a time gets exactly four, then CUDA_ERROR_OUT_OF_MEMORY; each run
# warns once, naming the device and why. ARGS are the client's own flags
# (--per-thread).
set -u
shim=$1
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr:"; cat "$dir/err"; exit 1; }
warning='device 0 (simcuda device 0) does not support virtual memory management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0), which offload needs: VRAM_LIMIT is enforced there as a hard cap, without offload'

export SIMCUDA_VMM=0 VRAM_LIMIT=256M SIMCUDA_DEVICE_MEM=1G
LD_PRELOAD="$shim" "$@" --buffers 3 --mib 64 --rounds 2 --streams 2 >"$dir/out" 2>"$dir/err"
status=$?
[ "$status" -eq 0 ] || fail "under the limit: exit status $status"
[ "$(grep -c 'does not support virtual memory management' "$dir/err")" -eq 1 ] || fail "under the limit: not one warning"
grep -qF "$warning" "$dir/err" || fail "under the limit: not the expected warning"
echo "ok: 3 x 64 MiB under 256M, byte-exact: $(grep -F 'virtual memory management' "$dir/err")"

LD_PRELOAD="$shim" "$@" --alloc-until-oom --mib 64 --expect-count 4 --expect-total-mib 256 >"$dir/out" 2>"$dir/err"
status=$?
[ "$status" -eq 0 ] || fail "over the limit: exit status $status (expected four 64 MiB buffers, then CUDA_ERROR_OUT_OF_MEMORY)"
[ "$(grep -c 'does not support virtual memory management' "$dir/err")" -eq 1 ] || fail "over the limit: not one warning"
echo "ok: four 64 MiB buffers under 256M, then CUDA_ERROR_OUT_OF_MEMORY"

#!/bin/sh
# check_old_driver.sh SHIM PROGRAM OLD_DRIVER_DIR: the shim on a driver
# without kernel parameter info (CUDA below 12.4, e.g. R535's 12.2).
#
# OLD_DRIVER_DIR holds simcuda built as a 12.2 driver (no cuFuncGetParamInfo
# or cuKernelGetParamInfo for dlsym; SIMCUDA_DRIVER_VERSION=12020 makes
# cuDriverGetVersion and cuGetProcAddress agree). The offload mode could not
# see what a launch touches and would run kernels on evicted memory, so it is
# refused at load: exactly one line naming the driver's version and
# VRAMSHIM_MODE=cap, exit status 2, before the program runs. The cap and
# track modes work there, their launches counted as unscanned. A driver whose
# cuDriverGetVersion fails counts as old. A process with no driver at all
# has no CUDA: nothing is refused.
set -u
export VRAMSHIM_DEBUG_SNAPSHOT  # preload_threads reads the shim's snapshot back
shim=$1
program=$2
old_dir=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
VRAMSHIM_DEBUG_SNAPSHOT="$dir/snap"
fail() { echo "FAIL: $*"; echo "--- stderr:"; cat "$dir/err"; exit 1; }

# Offload on 12.2: one line, exit 2, the program never ran.
LD_LIBRARY_PATH="$old_dir" SIMCUDA_DRIVER_VERSION=12020 VRAM_LIMIT=64M \
    LD_PRELOAD="$shim" "$program" >"$dir/out" 2>"$dir/err"
status=$?
[ "$status" -eq 2 ] || fail "offload on 12.2: exit status $status, expected 2"
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "offload on 12.2: not exactly one line on stderr"
expected='vramshim: VRAM_LIMIT offload needs CUDA driver 12.4 or newer to see kernel arguments (cuFuncGetParamInfo); this driver (libcuda.so.1) is 12.2: run with VRAMSHIM_MODE=cap to cap memory without offloading'
[ "$(cat "$dir/err")" = "$expected" ] || fail "offload on 12.2: not the expected line"
[ ! -s "$dir/out" ] || fail "offload on 12.2: the program ran"
echo "ok: $(cat "$dir/err")"

# The same through VRAMSHIM_DRIVER (the path is named in the line).
VRAMSHIM_DRIVER="$old_dir/libcuda.so.1" SIMCUDA_DRIVER_VERSION=12020 VRAM_LIMIT=64M \
    LD_PRELOAD="$shim" "$program" >"$dir/out" 2>"$dir/err"
status=$?
[ "$status" -eq 2 ] || fail "VRAMSHIM_DRIVER on 12.2: exit status $status, expected 2"
grep -q "this driver ($old_dir/libcuda.so.1) is 12.2" "$dir/err" || fail "VRAMSHIM_DRIVER on 12.2: the path is not named"

# Cap on 12.2: runs, checks its own bytes, launches counted unscanned, the
# old driver reported once.
LD_LIBRARY_PATH="$old_dir" SIMCUDA_DRIVER_VERSION=12020 VRAM_LIMIT=64M VRAMSHIM_MODE=cap VRAMSHIM_LOG=info \
    LD_PRELOAD="$shim" "$program" >"$dir/out" 2>"$dir/err"
status=$?
[ "$status" -eq 0 ] || fail "cap on 12.2: exit status $status"
[ "$(grep -c 'kernel parameter layouts need 12.4' "$dir/err")" -eq 1 ] || fail "cap on 12.2: no single report of the old driver"
grep -q 'reports version 12.2' "$dir/err" || fail "cap on 12.2: the version is not named"
grep -Eq 'info:   operations +[0-9]+ launches \([1-9][0-9]* unscanned\)' "$dir/err" || fail "cap on 12.2: launches were not counted as unscanned"
echo "ok: cap on 12.2 ran"

# Track (no VRAM_LIMIT) on 12.2 runs too.
LD_LIBRARY_PATH="$old_dir" SIMCUDA_DRIVER_VERSION=12020 \
    LD_PRELOAD="$shim" "$program" >"$dir/out" 2>"$dir/err"
status=$?
[ "$status" -eq 0 ] || fail "track on 12.2: exit status $status"
echo "ok: track on 12.2 ran"

# A driver whose cuDriverGetVersion fails is treated as old.
SIMCUDA_FAIL=cuDriverGetVersion:after=0 VRAM_LIMIT=64M \
    LD_PRELOAD="$shim" "$program" >"$dir/out" 2>"$dir/err"
status=$?
[ "$status" -eq 2 ] || fail "failing cuDriverGetVersion: exit status $status, expected 2"
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "failing cuDriverGetVersion: not exactly one line"
grep -q 'this driver (libcuda.so.1) does not report its version: run with VRAMSHIM_MODE=cap' "$dir/err" \
    || fail "failing cuDriverGetVersion: not the expected line"
SIMCUDA_FAIL=cuDriverGetVersion:after=0 VRAM_LIMIT=64M VRAMSHIM_MODE=cap VRAMSHIM_LOG=info \
    LD_PRELOAD="$shim" "$program" >"$dir/out" 2>"$dir/err"
status=$?
[ "$status" -eq 0 ] || fail "cap with failing cuDriverGetVersion: exit status $status"
grep -Eq 'info:   operations +[0-9]+ launches \([1-9][0-9]* unscanned\)' "$dir/err" || fail "cap with failing cuDriverGetVersion: launches were not counted as unscanned"
echo "ok: a driver that reports no version is old"

# No driver at all: a program without CUDA runs under offload, silently.
mkdir "$dir/empty"
LD_LIBRARY_PATH="$dir/empty" VRAM_LIMIT=64M LD_PRELOAD="$shim" sh -c 'echo no cuda' >"$dir/out" 2>"$dir/err"
status=$?
[ "$status" -eq 0 ] || fail "no driver: exit status $status"
[ ! -s "$dir/err" ] || fail "no driver: something on stderr"
[ "$(cat "$dir/out")" = "no cuda" ] || fail "no driver: the program did not run"
echo "ok: no driver, no refusal"

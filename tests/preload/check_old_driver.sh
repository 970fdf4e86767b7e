#!/bin/sh
# check_old_driver.sh SHIM PROGRAM: a driver that cannot report 12.4 or newer
# (simulated by failing every cuDriverGetVersion) is detected and reported
# clearly, once, and the program still runs: launches are counted as
# unscanned instead of being scanned with a layout the driver cannot give.
set -u
shim=$1
program=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
SIMCUDA_FAIL=cuDriverGetVersion:after=0 VRAMSHIM_LOG=info VRAMSHIM_DEBUG_SNAPSHOT="$dir/snap" \
    LD_PRELOAD="$shim" "$program" >"$dir/out" 2>"$dir/err"
status=$?
fail() { echo "FAIL: $*"; echo "--- stderr:"; cat "$dir/err"; exit 1; }
[ "$status" -eq 0 ] || fail "exit status $status"
[ "$(grep -c 'kernel parameter layouts need 12.4' "$dir/err")" -eq 1 ] || fail "no single clear report of the old driver"
grep -q 'launches [0-9]* (unscanned [1-9]' "$dir/err" || fail "launches were not counted as unscanned"
echo "ok: $(grep '12.4' "$dir/err")"

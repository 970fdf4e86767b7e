#!/bin/sh
# check_patched.sh CLIENT MODE: runs patch_client MODE under the shim
# (environment from Meson) and checks that it succeeds and that the shim
# said, in exactly one line, that libvs_patcher.so wrote over its
# cuMemAlloc_v2 wrapper.
set -u
client=$1
mode=$2
err=$(mktemp)
"$client" "$mode" 2>"$err"
status=$?
cat "$err" >&2
lines=$(grep -c "cuMemAlloc_v2: .*libvs_patcher.so wrote a jump over the start of the shim's wrapper" "$err")
all=$(grep -c "wrote a jump over" "$err")
rm -f "$err"
if [ "$status" -ne 0 ]; then
    echo "check_patched.sh: patch_client $mode exited with status $status"
    exit 1
fi
if [ "$lines" -ne 1 ] || [ "$all" -ne 1 ]; then
    echo "check_patched.sh: expected one line naming libvs_patcher.so, got $lines (of $all about patched wrappers)"
    exit 1
fi
echo "check_patched.sh: $mode: the program ran through the patched wrapper and the shim said so once"

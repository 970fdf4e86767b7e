#!/bin/sh
# check_malformed.sh SHIM PROGRAM VARIABLE VALUE [NAME=VALUE...]: a malformed
# value of VARIABLE stops PROGRAM at load under the shim: exit status 2,
# exactly one line on stderr naming the variable, the value and the accepted
# forms, and nothing from the program itself (it never reached main). The
# NAME=VALUE arguments are set too (VRAMSHIM_SPILL_DIR is checked only in the
# offload mode, so its cases add VRAM_LIMIT).
#
# For paths that must exist, a VALUE starting with @dir names this run's
# temporary directory, which holds `file` (a regular file) and `readonly/`
# (a directory of mode 0500; cases under it are skipped as root, who can
# write anywhere).
set -u
shim=$1
program=$2
variable=$3
value=$4
shift 4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
: >"$dir/file"
mkdir -m 0500 "$dir/readonly"
case $value in
@dir*) value=$dir${value#@dir} ;;
esac
case $value in
"$dir/readonly"*)
    if [ "$(id -u)" -eq 0 ]; then
        echo "skipped: root can create files in a read-only directory"
        exit 77
    fi
    ;;
esac
env "$variable=$value" "$@" LD_PRELOAD="$shim" "$program" >"$dir/out" 2>"$dir/err"
status=$?
fail() { echo "FAIL ($variable=\"$value\"): $*"; echo "--- stderr:"; cat "$dir/err"; exit 1; }
[ "$status" -eq 2 ] || fail "exit status $status, expected 2"
[ "$(wc -l < "$dir/err")" -eq 1 ] || fail "stderr is not one line"
grep -qF "$variable=\"$value\"" "$dir/err" || fail "message does not name the variable and value"
grep -q "accepted: " "$dir/err" || fail "message does not list the accepted forms"
[ ! -s "$dir/out" ] || fail "the program ran: $(cat "$dir/out")"
echo "ok: $(cat "$dir/err")"

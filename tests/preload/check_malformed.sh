#!/bin/sh
# check_malformed.sh SHIM PROGRAM VARIABLE VALUE: a malformed value of
# VARIABLE stops PROGRAM at load under the shim: exit status 2, exactly one
# line on stderr naming the variable, the value and the accepted forms, and
# nothing from the program itself (it never reached main).
set -u
shim=$1
program=$2
variable=$3
value=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
env "$variable=$value" LD_PRELOAD="$shim" "$program" >"$dir/out" 2>"$dir/err"
status=$?
fail() { echo "FAIL ($variable=\"$value\"): $*"; echo "--- stderr:"; cat "$dir/err"; exit 1; }
[ "$status" -eq 2 ] || fail "exit status $status, expected 2"
[ "$(wc -l < "$dir/err")" -eq 1 ] || fail "stderr is not one line"
grep -qF "$variable=\"$value\"" "$dir/err" || fail "message does not name the variable and value"
grep -q "accepted: " "$dir/err" || fail "message does not list the accepted forms"
[ ! -s "$dir/out" ] || fail "the program ran: $(cat "$dir/out")"
echo "ok: $(cat "$dir/err")"

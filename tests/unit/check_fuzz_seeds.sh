#!/bin/sh
# check_fuzz_seeds.sh DRIVER: the fuzz driver's --seed picks its sequence:
# the same seed twice generates the same inputs (same digest), and seeds
# that differ only in their lowest bit (2 and 3, which `| 1` once made one)
# generate different ones.
set -u
driver=$1
digest() { "$driver" --runs 2000 --seed "$1" | sed -n 's/.*digest \([0-9a-f]*\).*/\1/p'; }
a=$(digest 2); b=$(digest 3); c=$(digest 2)
[ -n "$a" ] || { echo "FAIL: no digest in the driver's output"; exit 1; }
[ "$a" = "$c" ] || { echo "FAIL: --seed 2 twice gave $a and $c"; exit 1; }
[ "$a" != "$b" ] || { echo "FAIL: --seed 2 and --seed 3 are the same sequence ($a)"; exit 1; }
echo "ok: seed 2 -> $a (twice), seed 3 -> $b"

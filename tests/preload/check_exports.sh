#!/bin/sh
# check_exports.sh LIB HOOKS_DEF NCCL_DEF: the dynamic exports of
# libvramshim.so are exactly the rows of hooks.def, the VS_NCCL rows of
# nccl.def, dlsym, cudaMalloc and cudaFree.
set -eu
lib=$1
hooks=$2
nccl=$3
expected=$( { sed -n 's/^VS_HOOK([a-z_]*, *\([A-Za-z0-9_]*\))$/\1/p' "$hooks"; sed -n 's/^VS_NCCL(\([A-Za-z0-9_]*\))$/\1/p' "$nccl"; printf '%s\n' dlsym cudaMalloc cudaFree; } | sort)
actual=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort)
if [ "$expected" != "$actual" ]; then
    echo "exports differ from hooks.def (< expected, > actual):"
    printf '%s\n' "$expected" > "${TMPDIR:-/tmp}/vs_expected.$$"
    printf '%s\n' "$actual" | diff "${TMPDIR:-/tmp}/vs_expected.$$" - || true
    rm -f "${TMPDIR:-/tmp}/vs_expected.$$"
    exit 1
fi
count=$(printf '%s\n' "$actual" | wc -l)
[ "$count" -gt 100 ] || { echo "suspiciously few exports: $count"; exit 1; }
echo "exports: $count symbols, exactly hooks.def + nccl.def + dlsym + cudaMalloc + cudaFree"

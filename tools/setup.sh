#!/usr/bin/env bash
# tools/setup.sh: installs what the build needs (Debian packages), configures
# `build/` and builds it. Safe to run again: it only does what is missing.
#
#   BUILD_DIR=build-asan MESON_ARGS="-Db_sanitize=address,undefined" tools/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${BUILD_DIR:-build}
packages=(meson ninja-build uthash-dev libcmocka-dev pkg-config python3)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y --no-install-recommends "${missing[@]}" ||
        { $sudo apt-get update && $sudo apt-get install -y --no-install-recommends "${missing[@]}"; }
fi

if [ ! -f "$build_dir/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$build_dir" ${MESON_ARGS:-}
fi
ninja -C "$build_dir"

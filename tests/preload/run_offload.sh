#!/bin/sh
# run_offload.sh: runs a program under the shim, then checks the simulated
# driver's report it left (check_offload_report.py). One Meson test for
# both, since Meson does not order tests.
#
#   run_offload.sh PYTHON CHECKER LIMIT_MIB ALLOWANCE_MIB PROGRAM [ARGS...]
#
# SIMCUDA_REPORT must be set (the report path). Exits 0 when the program
# exits 0 and the report shows a device peak within LIMIT_MIB +
# ALLOWANCE_MIB and evictions (unmaps, bytes to the host and back); else 1.
set -u

if [ $# -lt 5 ] || [ -z "${SIMCUDA_REPORT:-}" ]; then
    echo "usage: SIMCUDA_REPORT=path $0 PYTHON CHECKER LIMIT_MIB ALLOWANCE_MIB PROGRAM [ARGS...]" >&2
    exit 1
fi
python=$1 checker=$2 limit_mib=$3 allowance_mib=$4
shift 4

rm -f "$SIMCUDA_REPORT"
"$@"
status=$?
if [ "$status" -ne 0 ]; then
    if [ "$status" -gt 128 ]; then
        echo "run_offload.sh: $1 was killed by signal $((status - 128))" >&2
    else
        echo "run_offload.sh: $1 exited with status $status" >&2
    fi
    exit 1
fi
# CHECK_OFFLOAD_OPTIONS: more of the checker's options (word-split).
# shellcheck disable=SC2086
"$python" "$checker" "$SIMCUDA_REPORT" --limit-mib "$limit_mib" --allowance-mib "$allowance_mib" \
    --expect-evictions ${CHECK_OFFLOAD_OPTIONS:-} || exit 1

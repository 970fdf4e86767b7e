#!/usr/bin/env python3
"""check_coarse_plan.py: near the balance point the regime meter tries the
balanced plan streaming fewer, larger allocations (the policy's coarser
floor), and keeps it where its cycles take no longer (shim/offload_meter.c,
`VS_REGIME_COARSE`).

usage: check_coarse_plan.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the sweep's LLM at 25%, ratio 1 (`OFFLOAD_CYCLE SHIM sweep --cell llm
25 1 LOG --warmup 32`, on the virtual clock): twelve blocks of 6, 2, 8 and
8 MiB weights and a written 4 MiB KV cache, then a 16 MiB LM head, compute
equal to F / B. The balanced plan's floor, the smallest size whose members
hold the stream and an eighth more, is 2 MiB: it streams eight 2 MiB
weights and three KV caches a pass, whose restores take their room from
departures of other sizes (a wait, unmaps, releases and a create on the
launching thread), 1.044-1.053 x the bound. The lean plan is timed slower
and the cycle goes back; then the coarse plan, its floor at 4
MiB (the 8, 6 and 4 MiB tensors hold the stream), streams seven KV caches
and no 2 MiB weight, every KV cache swapped with another's memory: 1.026
-1.037 x, and it stays.

Checks: the child exits 0 with every word read back as loaded; the shim's
log names the coarse plan; the measured passes ran it, copying back the 28
MiB a pass of the seven KV caches it streams, each written every pass (the
balanced plan copies back 12); the cell takes at most 1.05 x the bound (the
sweep's goal) and brings in at most 1.02 x F. The cycle may go back at the
run's last cycle, the child's checks after the measured passes, which take
a third longer (as check_regime_meter.py says of the DiT at 50%, ratio
1.33). Exit 0 when all of it holds, 1 otherwise.
"""
import sys

from cell_check import ceiling_judge, check_main, read_cell_log

NAME = "check_coarse_plan"
COARSE = "the cycle is near the balance point, fewer and larger allocations streamed"
KV_CACHES_OUT_MIB = 28.0
WORKLOAD, PERCENT, RATIO = "llm", 25, 1.0


def judge(row):
    failures = ceiling_judge(NAME, 1.05, max_out_mib=KV_CACHES_OUT_MIB)(row)
    if row["out_mib"] < KV_CACHES_OUT_MIB:
        print(f"{NAME}: FAILED: {row['out_mib']} MiB copied back a pass: the measured passes did not run the "
              f"coarse plan ({KV_CACHES_OUT_MIB})")
        failures = 1
    log = read_cell_log(NAME, sys.argv[3], WORKLOAD, PERCENT, RATIO)
    if log is None:
        return 1
    if COARSE not in log:
        print(f"{NAME}: FAILED: the shim's log does not name the coarse plan ({COARSE!r})")
        failures = 1
    return failures


if __name__ == "__main__":
    sys.exit(check_main(NAME, __doc__, WORKLOAD, PERCENT, RATIO, 32, judge))

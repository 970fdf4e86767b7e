#!/usr/bin/env python3
"""check_step_restores.py: a prefetch step among small allocations makes one
restore before its operation is launched, and the next operation's step
goes on, so the GPU is not left without queued work while the host swaps.

usage: check_step_restores.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the sweep's LLM at 50%, ratio 1 (`OFFLOAD_CYCLE SHIM sweep --cell llm
50 1 LOG --warmup 16`, on the virtual clock): twelve blocks of 6, 2, 8 and 8
MiB weights and a written 4 MiB KV cache, then a 16 MiB LM head, with
compute equal to F / B. Once a pass, a step waited for the oldest departure
and then made four restores before the launch: unmaps and releases of the
departure's other victims, creates, maps and grants. The GPU idled 237 us
(1.085 x the bound). With one restore a step (shim/tunables.h,
`VS_PREFETCH_STEP_RESTORES`) the cell takes 1.041 x.

Exit 0 when the child read every word back as loaded and the sweep's
verdict on the cell is "met" (`cell_check.goals_judge`), 1 otherwise.
"""
import sys

from cell_check import check_main, goals_judge

if __name__ == "__main__":
    sys.exit(check_main("check_step_restores", __doc__, "llm", 50, 1.0, 16, goals_judge("check_step_restores")))

#!/usr/bin/env python3
"""check_framework.py: a model as a framework runs it (each block's weights
one allocation read by several kernels in a row, large activations written
by every block) streams its blocks as the plan says, not a few of them.

usage: check_framework.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the framework cell at 50%, ratio 1 (`OFFLOAD_CYCLE SHIM sweep --cell
framework 50 1 LOG --warmup 48`, on the virtual clock, the sweep's warm-up):
bench/gpu/dit_offload.py's DiT as PyTorch ran it on an H200, scaled by 1/10
(16 blocks of 36 MiB, twenty kernels a block as PyTorch launches the GPU's,
five of them reading views of the block's weights; 28 MiB of activations).
The policy tells members of the cycle by the longest gap of their pattern
of uses (policy/plan.c): every block is a member, 1.108 x the bound,
1.003 x F in. By the mean gap, which five kernels divide by five, the plan
keeps most blocks as used more than once a cycle, streams a few, and the
rest come in on demand (2.000 x the bound, 1.620 x F in; on the H200, 1.56
to 1.74 x).

Exit 0 when the child read every word back as written, at most 1.02 x F
came in, nothing was copied back and the pass took at most 1.20 x the
bound; 1 otherwise.
"""
import sys

from cell_check import check_main


def judge(row):
    print(f"check_framework: {row['over_bound']:.3f} x the bound, in {row['in_f']:.3f} x F, "
          f"copied back {row['out_mib']} MiB a pass")
    if row["in_f"] > 1.02 or row["out_mib"] > 0 or row["over_bound"] > 1.20:
        print("check_framework: FAILED: wanted at most 1.02 x F in, nothing copied back, 1.20 x the bound")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(check_main("check_framework", __doc__, "framework", 50, 1.0, 48, judge))

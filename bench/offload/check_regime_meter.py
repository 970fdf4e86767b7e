#!/usr/bin/env python3
"""check_regime_meter.py: the shim finds a compute-bound cycle compute-bound,
a link-bound one link-bound and a balanced one neither, and plans each as
its regime asks (shim/offload_meter.c).

usage: check_regime_meter.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs three cells of the sweep alone (`OFFLOAD_CYCLE SHIM sweep --cell dit 25
RATIO LOG`, the DiT at 25% of its weights, on the virtual clock: the
figures do not depend on the machine) and reads the row and the shim's log
of each:
- ratio 2 (compute twice the transfer): the log says the cycle is
  compute-bound, the exit summary counts one regime change, and the plan
  streams at most 1.02 x F a pass (no room for a departure) within 1.05 x
  the bound;
- ratio 0.5 (transfer twice the compute): the same, link-bound;
- ratio 1 (the balance point): no regime change; the departure's room
  stays (bytes over 1.02 x F), which keeps the pass within 1.10 x the bound.
Exit 0 when all of it holds, 1 otherwise.
"""
import os
import re
import subprocess
import sys

ROW = re.compile(r"^dit\s+25%\s+(?P<ratio>[\d.]+)\s+[\d.]+\s+[\d.]+\s+(?P<in_f>[\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+"
                 r"\s+(?P<bound>[\d.]+)\s+[\d.]+\s+(?P<goal>\S+)$", re.M)
CHANGES = re.compile(r", regime changes (?P<n>\d+)")
# ratio, the regime the log must name (None: no change), at most (in/F, time/bound), at least in/F
CELLS = [("2", "compute-bound", 1.02, 1.05, 0.0), ("0.5", "link-bound", 1.02, 1.05, 0.0),
         ("1", None, 9.0, 1.10, 1.02)]


def run_cell(program, shim, work, ratio):
    log = os.path.join(work, f"dit_25_{ratio}.log")
    if os.path.exists(log):
        os.unlink(log)
    run = subprocess.run([program, shim, "sweep", "--cell", "dit", "25", ratio, log], capture_output=True,
                         text=True)
    if run.returncode != 0:
        return None, None, f"ratio {ratio}: exit status {run.returncode}: {run.stderr.strip()}"
    row = ROW.search(run.stdout)
    if row is None:
        return None, None, f"ratio {ratio}: no row in:\n{run.stdout}"
    try:
        with open(log, encoding="utf-8") as f:
            return row, f.read(), None
    except OSError as e:
        return None, None, f"ratio {ratio}: no shim log: {e}"


def main():
    program, shim, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    failures = []
    for ratio, regime, max_in, max_time, min_in in CELLS:
        row, log, error = run_cell(program, shim, work, ratio)
        if error is not None:
            failures.append(error)
            continue
        changes = CHANGES.search(log)
        n = int(changes.group("n")) if changes else -1
        in_f, bound = float(row.group("in_f")), float(row.group("bound"))
        named = [r for r in ("compute-bound", "link-bound") if f"the cycle is {r}" in log]
        print(f"check_regime_meter: ratio {ratio}: in {in_f} x F, {bound} x the bound, regime changes {n}, "
              f"found {named or 'none'}")
        if regime is not None and (named != [regime] or n != 1):
            failures.append(f"ratio {ratio}: expected one change, to {regime}")
        if regime is None and (named or n != 0):
            failures.append(f"ratio {ratio}: expected no regime change")
        if in_f > max_in or in_f <= min_in or bound > max_time:
            failures.append(f"ratio {ratio}: in {in_f} x F (over {min_in}, at most {max_in}), {bound} x the bound "
                            f"(at most {max_time})")
    for f in failures:
        print("check_regime_meter: FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

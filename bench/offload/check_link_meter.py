#!/usr/bin/env python3
"""check_link_meter.py: the shim finds a compute-bound cycle compute-bound,
and a balanced one not, and plans each as its regime asks.

usage: check_link_meter.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs two cells of the sweep alone (`OFFLOAD_CYCLE SHIM sweep --cell dit 25
RATIO LOG`, the DiT at 25% of its weights, on the virtual clock) and reads
the row and the shim's log of each:
- ratio 2 (compute twice the transfer): the log says the cycle is
  compute-bound, the exit summary counts one regime change, and the plan
  streams no more than 1.02 x F a pass (no room for a departure) within
  1.05 x the bound;
- ratio 1 (the balance point): no regime change; the departure's room stays
  (bytes over 1.02 x F), which keeps the pass within 1.10 x the bound.
Exit 0 when all of it holds, 1 otherwise.
"""
import os
import re
import subprocess
import sys

ROW = re.compile(r"^dit\s+25%\s+(?P<ratio>[\d.]+)\s+[\d.]+\s+[\d.]+\s+(?P<in_f>[\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+"
                 r"\s+(?P<bound>[\d.]+)\s+[\d.]+\s+(?P<goal>\S+)$", re.M)
CHANGES = re.compile(r", regime changes (?P<n>\d+)")


def run_cell(program, shim, work, ratio):
    log = os.path.join(work, f"dit_25_{ratio}.log")
    if os.path.exists(log):
        os.unlink(log)
    run = subprocess.run([program, shim, "sweep", "--cell", "dit", "25", ratio, log], capture_output=True,
                         text=True)
    if run.returncode != 0:
        return None, None, f"ratio {ratio}: exit status {run.returncode}: {run.stderr.strip()}"
    row = ROW.search(run.stdout)
    try:
        with open(log, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        return None, None, f"ratio {ratio}: no shim log: {e}"
    if row is None:
        return None, None, f"ratio {ratio}: no row in:\n{run.stdout}"
    return row, text, None


def main():
    program, shim, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    failures = []
    for ratio in ("2", "1"):
        row, log, error = run_cell(program, shim, work, ratio)
        if error is not None:
            failures.append(error)
            continue
        changes = CHANGES.search(log)
        n = int(changes.group("n")) if changes else -1
        in_f, bound = float(row.group("in_f")), float(row.group("bound"))
        found = "the cycle is compute-bound" in log
        if ratio == "2":
            if not found or n != 1:
                failures.append(f"ratio 2: compute-bound not found (log line: {found}, regime changes {n})")
            if in_f > 1.02 or bound > 1.05:
                failures.append(f"ratio 2: in {in_f} x F, {bound} x the bound (at most 1.02 and 1.05)")
        else:
            if found or n != 0:
                failures.append(f"ratio 1: found compute-bound (log line: {found}, regime changes {n})")
            if in_f <= 1.02 or bound > 1.10:
                failures.append(f"ratio 1: in {in_f} x F (the room: over 1.02), {bound} x the bound (at most 1.10)")
        print(f"check_link_meter: ratio {ratio}: in {in_f} x F, {bound} x the bound, regime changes {n}")
    for f in failures:
        print("check_link_meter: FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

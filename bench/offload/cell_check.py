"""cell_check.py: what the checks that run one cell of the sweep share.

`check_main` is such a check's main: it takes OFFLOAD_CYCLE SHIM WORK_DIR
from the command line (else prints the usage line of the check's `doc`), runs the cell and returns `judge(row)`'s exit
status (2 for a wrong command line, 1 when the run failed); `goals_judge(name)`
is the judge of a check that wants the sweep's goals met. `run_cell` runs `OFFLOAD_CYCLE SHIM sweep --cell WORKLOAD PERCENT RATIO LOG
--warmup N` (on the virtual clock, deterministic; at VRAMSHIM_LOG=debug with
`details`, for a check that reads the exit summary's details) and returns its row as a
dict (in_mib, in_f, out_mib, ms, bound_ms, over_bound as numbers; goal,
"met" or "MISSED"), or None after
printing why the run failed.
"""
import os
import re
import subprocess
import sys

# After the cell's name: C ms, in MiB, in/F, out MiB, ms/pass, bound ms,
# /bound, idle, and the sweep's verdict on its goals (from the unrounded
# figures).
COLUMNS = (r"\s+[\d.]+\s+(?P<in_mib>[\d.]+)\s+(?P<in_f>[\d.]+)\s+(?P<out_mib>[\d.]+)\s+(?P<ms>[\d.]+)"
           r"\s+(?P<bound_ms>[\d.]+)\s+(?P<over_bound>[\d.]+)\s+[\d.]+\s+(?P<goal>met|MISSED)\b")


def cell_log(work, workload, percent, ratio):
    """Where `run_cell` has the shim write the cell's log."""
    return os.path.join(work, f"{workload}_{percent}_{ratio}.log")


def read_cell_log(name, work, workload, percent, ratio):
    """The shim's log of the cell `run_cell` ran; None, the failure printed,
    when it cannot be read."""
    try:
        with open(cell_log(work, workload, percent, ratio), encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        print(f"{name}: FAILED: no shim log: {e}")
        return None


def details_env():
    """The environment of a cell whose check reads the exit summary's
    details (`offload details:`), which the shim prints at
    VRAMSHIM_LOG=debug."""
    return dict(os.environ, VRAMSHIM_LOG="debug")


def run_cell(name, program, shim, work, workload, percent, ratio, warmup, details=False):
    os.makedirs(work, exist_ok=True)
    log = cell_log(work, workload, percent, ratio)
    run = subprocess.run([program, shim, "sweep", "--cell", workload, str(percent), str(ratio), log,
                          "--warmup", str(warmup)], capture_output=True, text=True,
                         env=details_env() if details else None)
    sys.stdout.write(run.stdout)
    if run.returncode != 0:
        print(f"{name}: FAILED: exit status {run.returncode}: {run.stderr.strip()}")
        return None
    name_pattern = rf"^{re.escape(workload)}\s+{percent}%\s+{re.escape(f'{ratio:.2f}')}"
    row = re.search(name_pattern + COLUMNS, run.stdout, re.M)
    if row is None:
        print(f"{name}: FAILED: no {workload} row in the output above")
        return None
    return {key: value if key == "goal" else float(value) for key, value in row.groupdict().items()}


def check_main(name, doc, workload, percent, ratio, warmup, judge, details=False):
    if len(sys.argv) != 4:
        usage = [line for line in doc.splitlines() if line.startswith("usage:")]
        print(usage[0] if usage else f"usage: {name}.py OFFLOAD_CYCLE SHIM WORK_DIR", file=sys.stderr)
        return 2
    program, shim, work = sys.argv[1:4]
    row = run_cell(name, program, shim, work, workload, percent, ratio, warmup, details)
    return 1 if row is None else judge(row)


def goals_judge(name):
    """A judge that prints the cell's figures and wants the sweep's verdict
    "met": at most 1.05 x the bound, 1.02 x F in, nothing clean copied back."""
    def judge(row):
        print(f"{name}: {row['over_bound']:.3f} x the bound, in {row['in_f']:.3f} x F, "
              f"copied back {row['out_mib']} MiB a pass")
        if row["goal"] != "met":
            print(f"{name}: FAILED: the cell misses the sweep's goals (1.05 x the bound, 1.02 x F, "
                  "nothing clean copied back)")
            return 1
        return 0
    return judge


def ceiling_judge(name, ceiling, max_in_f=1.02, max_out_mib=0.0):
    """A judge for a mechanism whose cell races around the sweep's time goal:
    at most `ceiling` x the bound (where the goal is the sweep's to report),
    at most `max_in_f` x F in, at most `max_out_mib` MiB copied back a pass
    (the written allocations' bytes)."""
    def judge(row):
        print(f"{name}: {row['over_bound']:.3f} x the bound (at most {ceiling}), in {row['in_f']:.3f} x F, "
              f"copied back {row['out_mib']} MiB a pass")
        failures = []
        if row["over_bound"] > ceiling:
            failures.append(f"{row['over_bound']:.3f} x the bound, over {ceiling}")
        if row["in_f"] > max_in_f:
            failures.append(f"in {row['in_f']:.3f} x F, over {max_in_f}")
        if row["out_mib"] > max_out_mib:
            failures.append(f"{row['out_mib']} MiB copied back a pass, over {max_out_mib}")
        for failure in failures:
            print(f"{name}: FAILED: {failure}")
        return 1 if failures else 0
    return judge

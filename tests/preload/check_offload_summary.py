#!/usr/bin/env python3
"""Runs a program under the shim's offload mode and checks its exit summary.

At VRAMSHIM_LOG=info the shim prints, at exit, a block of labelled lines:

    vramshim[PID] info: at exit:
    vramshim[PID] info:   peak tracked    ...
    vramshim[PID] info:   operations      ...
    vramshim[PID] info:   evicted         N times, 768 MiB to the host (B bytes); ...
    vramshim[PID] info:   restored        N times, 768 MiB to the device (B bytes); ...
    vramshim[PID] info:   waited          X ms for restores; over the limit N times
    vramshim[PID] info:   host memory     256 MiB pinned of 11.8 GiB allowed (P of L bytes); ...

This runs PROGRAM (the environment must preload the shim with a VRAM_LIMIT
and VRAMSHIM_LOG=info), passes its output through, and checks that it
exited 0 and that the block is on stderr once, showing evictions, restores,
bytes both ways and a host pool no larger than its limit.

    check_offload_summary.py PROGRAM [ARGS...]

Exit status: 0 when every check holds, 1 when one fails (one line each), 2
on a usage error.
"""
import subprocess
import sys

import exit_summary


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: check_offload_summary.py PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    run = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stdout.write(run.stdout)
    sys.stdout.write(run.stderr)

    failures = []
    if run.returncode != 0:
        failures.append(f"{args[0]} exited with status {run.returncode}")
    summaries = exit_summary.parse_all(run.stderr)
    if len(summaries) != 1 or "evictions" not in summaries[0]:
        failures.append(f"{len(summaries)} exit summaries with the offload's lines on stderr, expected 1 "
                        f"(lines of the summary: {exit_summary.mentions(run.stderr)!r})")
    else:
        s = summaries[0]
        for name in ("evictions", "restores", "to_host", "to_device", "pinned"):
            if s[name] <= 0:
                failures.append(f"the summary reports {name.replace('_', ' ')} {s[name]}, expected more than 0")
        if s["pinned"] > s["pool_limit"]:
            failures.append(f"the host pool pinned {s['pinned']} bytes, more than its limit {s['pool_limit']}")

    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print("summary ok:", summaries[0])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Runs a program under the shim's offload mode and checks its exit summary.

At VRAMSHIM_LOG=info the shim prints, at exit, one line

    vramshim[PID] info: offload: evictions N, restores N, to host B bytes,
    to device B bytes, restore wait X ms, over the limit N times,
    host pool P of L bytes pinned[, more figures]

This runs PROGRAM (the environment must preload the shim with a VRAM_LIMIT
and VRAMSHIM_LOG=info), passes its output through, and checks that it
exited 0 and that exactly one such line is on stderr, showing evictions,
restores, bytes both ways and a host pool no larger than its limit. With
--expect-ahead, the line must also count evictions ahead of need (the
prefetcher's departures) and restores mapped ahead (a restore's map and
grant done on a departing allocation's memory before its departure ended),
and a second line must tell device 0's plans: at least one built, over a
learned cycle of at least one operation.

    check_offload_summary.py [--expect-ahead] PROGRAM [ARGS...]

Exit status: 0 when every check holds, 1 when one fails (one line each), 2
on a usage error.
"""
import re
import subprocess
import sys

SUMMARY = re.compile(
    r"^vramshim\[(?P<pid>\d+)\] info: offload: evictions (?P<evictions>\d+), restores (?P<restores>\d+), "
    r"to host (?P<to_host>\d+) bytes, to device (?P<to_device>\d+) bytes, restore wait (?P<wait>\d+(\.\d+)?) ms, "
    r"over the limit (?P<over>\d+) times, host pool (?P<pinned>\d+) of (?P<pool_limit>\d+) bytes pinned(, .*)?$"
)


AHEAD = re.compile(r", evictions ahead of need (?P<ahead>\d+)(,|$)")
MAPPED_AHEAD = re.compile(r", restores mapped ahead (?P<mapped>\d+)(,|$)")
PLANS = re.compile(r"^vramshim\[\d+\] info: offload: device 0: plans built (?P<built>\d+), "
                   r"learned cycle (?P<cycle>\d+) operations, the plan streams (?P<streams>\d+) bytes a cycle; "
                   r"built for the cycle (?P<cycle_builds>\d+), members (?P<member_builds>\d+), "
                   r"a rhythm (?P<rhythm_builds>\d+), the budget (?P<budget_builds>\d+), "
                   r"the settings (?P<settings_builds>\d+)"
                   r"(; the last plan in pieces: pieces of (?P<pieces>\d+) bytes, fillers of (?P<fillers>\d+) bytes)?$")
CAUSES = ("cycle_builds", "member_builds", "rhythm_builds", "budget_builds", "settings_builds")


def main():
    args = sys.argv[1:]
    expect_ahead = bool(args) and args[0] == "--expect-ahead"
    if expect_ahead:
        args = args[1:]
    if not args:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: check_offload_summary.py [--expect-ahead] PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    run = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stdout.write(run.stdout)
    sys.stdout.write(run.stderr)

    failures = []
    if run.returncode != 0:
        failures.append(f"{args[0]} exited with status {run.returncode}")
    lines = [m for m in map(SUMMARY.match, run.stderr.splitlines()) if m]
    offload_lines = [line for line in run.stderr.splitlines() if "info: offload:" in line]
    if len(lines) != 1:
        failures.append(f"{len(lines)} well-formed offload summary lines on stderr, expected 1 "
                        f"(lines mentioning it: {offload_lines!r})")
    else:
        s = {k: float(v) if k == "wait" else int(v) for k, v in lines[0].groupdict().items() if v is not None}
        for name in ("evictions", "restores", "to_host", "to_device", "pinned"):
            if s[name] <= 0:
                failures.append(f"the summary reports {name.replace('_', ' ')} {s[name]}, expected more than 0")
        if s["pinned"] > s["pool_limit"]:
            failures.append(f"the host pool pinned {s['pinned']} bytes, more than its limit {s['pool_limit']}")
        if expect_ahead:
            ahead = AHEAD.search(lines[0].group(0))
            if ahead is None or int(ahead.group("ahead")) <= 0:
                failures.append("the summary counts no evictions ahead of need (expected the prefetcher's departures)")
            mapped = MAPPED_AHEAD.search(lines[0].group(0))
            if mapped is None or int(mapped.group("mapped")) <= 0:
                failures.append("the summary counts no restores mapped ahead (expected restores mapped onto "
                                "departing allocations' memory)")
            plans = [m for m in map(PLANS.match, run.stderr.splitlines()) if m]
            if len(plans) != 1:
                failures.append(f"{len(plans)} lines telling device 0's plans, expected 1")
            elif int(plans[0].group("built")) <= 0 or int(plans[0].group("cycle")) <= 0:
                failures.append(f"device 0's plans: {plans[0].group(0)!r}, expected one built at least, "
                                "over a learned cycle")
            elif sum(int(plans[0].group(c)) for c in CAUSES) < int(plans[0].group("built")):
                failures.append(f"device 0's plans: {plans[0].group(0)!r}, expected every build to count "
                                "under one cause at least")

    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print("summary ok:", lines[0].group(0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

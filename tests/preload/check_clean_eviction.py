#!/usr/bin/env python3
"""Runs a program under the offload mode and checks that clean eviction ran.

The program (preload_offload_clean) checks every byte it wrote; this checks
the shim's exit summary at VRAMSHIM_LOG=debug (exit_summary.py): its
"evicted" line (evictions, bytes to the host, those unchanged since their
host copy and the bytes they did not copy) and its details (kept host
copies dropped, partial evictions, partial restores).

It requires the program to exit 0 and the summary to show both kinds of
eviction: clean ones (dropped without a copy, so the clean path really
ran) and ones that copied to the host. Beyond that, the evictions that
copied must outnumber those that can have copied for want of a host copy
(an allocation has none before its first eviction, or after its kept copy
was dropped): so some evictions copied over a kept host copy, the verdict
("changed", or "not known to be unchanged") that a lost write would have
needed to be "clean". The program itself proves that no write was lost.

    check_clean_eviction.py [--partial|--no-partial] EVICTABLE PROGRAM [ARGS...]

With --no-partial, no eviction may have left a head on the device. With
--partial, some evictions must also have left their allocation's head
on the device (partial residency: the summary's "partial evictions"), and
some prefetches must have brought an allocation's head in ahead of its tail
("partial restores"); with --no-partial, none may have. Which
allocation the plan names depends on how the threads' uses interleave, and
a run whose plan never names one happens (once in about fifteen runs with
two threads under ASan); so a run that passes every other check but kept
no head (or brought none in ahead) is run once more, and the second must. A run that fails
any other check fails at once.
EVICTABLE is the number of evictable allocations PROGRAM makes (each can
lack a host copy once, at its first eviction). Exit status: 0 when every
check holds, 1 when one fails (one line each), 2 on a usage error.
"""
import subprocess
import sys

import exit_summary

NO_PARTIAL = "no partial residency: no allocation kept a head on the device, or none came in ahead of its tail"


def check(command, evictable, partial, no_partial=False):
    """Runs the program once; returns the list of failed checks."""
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stdout.write(run.stdout)
    sys.stdout.flush()
    sys.stderr.write(run.stderr)  # where a wrapper around this one looks for the shim's lines
    sys.stderr.flush()

    failures = []
    if run.returncode != 0:
        failures.append(f"{command[0]} exited with status {run.returncode}")
    summaries = [s for s in exit_summary.parse_all(run.stderr) if "evictions" in s and "partial" in s]
    if len(summaries) != 1:
        failures.append(f"{len(summaries)} exit summaries with evictions and the offload's details on stderr, "
                        f"expected 1 (VRAMSHIM_LOG=debug; lines of the summary: "
                        f"{exit_summary.mentions(run.stderr)!r})")
    else:
        s = summaries[0]
        copied = s["evictions"] - s["clean"]
        without_host_copy = evictable + s["dropped"]
        changed = copied - without_host_copy
        print(f"clean eviction: {s['evictions']} evictions, {s['clean']} clean ({s['not_copied']} bytes not "
              f"copied), {copied} copied ({s['to_host']} bytes to the host), at least {changed} of them over a "
              f"kept host copy ({evictable} allocations, {s['dropped']} kept host copies dropped)")
        if s["clean"] <= 0 or s["not_copied"] <= 0:
            failures.append(f"no clean eviction (clean evictions {s['clean']}, {s['not_copied']} bytes not "
                            "copied): the clean path was not exercised")
        if copied <= 0 or s["to_host"] <= 0:
            failures.append(f"no eviction copied to the host ({copied} evictions copied, to host "
                            f"{s['to_host']} bytes)")
        if partial:
            print(f"partial residency: {s['partial']} evictions left a head on the device")
            print(f"partial residency: {s['partial_restores']} prefetches brought a head in ahead of its tail")
            if s["partial"] <= 0 or s["partial_restores"] <= 0:
                failures.append(NO_PARTIAL)
        if no_partial and s["partial"] != 0:
            failures.append(f"{s['partial']} evictions left a head on the device, expected none")
        if no_partial and s["partial_restores"] != 0:
            failures.append(f"{s['partial_restores']} prefetches brought a head in ahead of its tail, expected none")
        if changed <= 0:
            failures.append(f"{copied} evictions copied, no more than could lack a host copy "
                            f"({evictable} allocations + {s['dropped']} kept copies dropped): none is known to "
                            "have copied over a kept host copy")

    return failures


def main():
    args = sys.argv[1:]
    partial = bool(args) and args[0] == "--partial"
    no_partial = bool(args) and args[0] == "--no-partial"
    args = args[1:] if partial or no_partial else args
    if len(args) < 2 or not args[0].isdigit():
        print("usage: check_clean_eviction.py [--partial|--no-partial] EVICTABLE PROGRAM [ARGS...]",
              file=sys.stderr)
        return 2
    evictable = int(args[0])
    command = args[1:]
    failures = check(command, evictable, partial, no_partial)
    if failures == [NO_PARTIAL]:
        print("partial residency: this run kept no head; running it once more")
        failures = check(command, evictable, partial)
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print("clean eviction ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

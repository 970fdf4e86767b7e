#!/usr/bin/env python3
"""Runs a program under the shim with VRAMSHIM_TRACE and checks the trace.

    check_trace.py TRACE_PATH MIN_EVICTABLE PROGRAM [ARGS...]
    check_trace.py --unwritable PROGRAM [ARGS...]

The second form expects VRAMSHIM_TRACE to name a path that cannot be
created: the program must still succeed, with exactly one warning naming
the variable.

The environment must preload the shim, set VRAMSHIM_TRACE=TRACE_PATH and
VRAMSHIM_LOG=info (the exit summary gives the number of launches). The
trace must follow policy/trace.h's format line by line:

  - every line is a comment or one of A/F/U/R with well-formed fields;
  - ids are allocated once (A), freed once (F) after their A, and every U
    and R names a live id; every allocation is freed by the end;
  - at least MIN_EVICTABLE allocations are evictable;
  - U lines: seq and time_ns never decrease, the uses of one seq are
    consecutive and share op, stream and time, op is launch/copy/memset/
    graph, and there is one launch seq per launch in the exit summary;
  - R lines name evictable allocations only, both directions occur, and an
    allocation never goes the same way twice in a row.

Exit status: 0 when every check holds, 1 when one fails (one line each), 2
on a usage error.
"""
import re
import subprocess
import sys

import exit_summary

NUMBER = r"(?:0[xX][0-9A-Fa-f]+|[0-9]+)"
LINES = {
    "A": re.compile(rf"^A[ \t]+(?P<id>{NUMBER})[ \t]+(?P<size>{NUMBER})[ \t]+(?P<ev>[en])$"),
    "F": re.compile(rf"^F[ \t]+(?P<id>{NUMBER})$"),
    "U": re.compile(rf"^U[ \t]+(?P<seq>{NUMBER})[ \t]+(?P<id>{NUMBER})[ \t]+(?P<op>[A-Za-z0-9_.]{{1,31}})"
                    rf"[ \t]+(?P<stream>{NUMBER})[ \t]+(?P<time>{NUMBER})[ \t]+(?P<rw>[rwu])$"),
    "R": re.compile(rf"^R[ \t]+(?P<id>{NUMBER})[ \t]+(?P<res>[01])$"),
}
OPS = {"launch", "copy", "memset", "graph"}


def num(text):
    return int(text, 0)


def check_unwritable(program):
    run = subprocess.run(program, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(run.stderr)
    warnings = [line for line in run.stderr.splitlines() if "VRAMSHIM_TRACE" in line]
    if run.returncode != 0 or len(warnings) != 1:
        print(f"check_trace: exit {run.returncode}, {len(warnings)} warnings naming VRAMSHIM_TRACE; "
              "expected 0 and 1")
        return 1
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "--unwritable":
        return check_unwritable(argv[2:])
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    path, min_evictable, program = argv[1], int(argv[2]), argv[3:]
    run = subprocess.run(program, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(run.stderr)
    failures = []
    if run.returncode != 0:
        failures.append(f"the program exited {run.returncode}")
    launches = [s["launches"] for s in exit_summary.parse_all(run.stderr) if "launches" in s]
    if len(launches) != 1:
        failures.append(f"expected one exit summary with a launch count, found {len(launches)}")

    live, evictable, freed = {}, set(), set()
    last_residency = {}
    residency_seen = set()
    last_seq, last_time, seq_key, finished_seqs = 0, 0, None, set()
    launch_seqs = set()
    ops = {}
    with open(path, encoding="ascii") as trace:
        lines = trace.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, 1):
        def fail(why):
            failures.append(f"{path}:{number}: {why}: {line!r}")

        if line.strip() == "" or line.startswith("#"):
            continue
        pattern = LINES.get(line[0])
        m = pattern.match(line) if pattern else None
        if m is None or len(line) > 512:
            fail("malformed line")
            continue
        ident = num(m["id"])
        if line[0] == "A":
            if ident in live or ident in freed:
                fail("id allocated twice")
            live[ident] = num(m["size"])
            if m["ev"] == "e":
                evictable.add(ident)
        elif line[0] == "F":
            if ident not in live:
                fail("free of an id that is not live")
            live.pop(ident, None)
            freed.add(ident)
        elif line[0] == "U":
            seq, time = num(m["seq"]), num(m["time"])
            if ident not in live:
                fail("use of an id that is not live")
            if m["op"] not in OPS:
                fail("unknown op")
            if seq < last_seq or time < last_time:
                fail("seq or time_ns went back")
            key = (seq, m["op"], num(m["stream"]), time)
            if seq != last_seq:
                if seq in finished_seqs:
                    fail("uses of one operation are not consecutive")
                if seq_key is not None:
                    finished_seqs.add(seq_key[0])
            elif key != seq_key:
                fail("uses of one operation disagree on op, stream or time")
            seq_key, last_seq, last_time = key, seq, time
            ops[m["op"]] = ops.get(m["op"], 0) + 1
            if m["op"] == "launch":
                launch_seqs.add(seq)
        else:
            on_device = m["res"] == "1"
            if ident not in live:
                fail("residency change of an id that is not live")
            if ident not in evictable:
                fail("residency change of an allocation that is not evictable")
            if last_residency.get(ident) == on_device:
                fail("the same residency change twice in a row")
            last_residency[ident] = on_device
            residency_seen.add(on_device)

    if live:
        failures.append(f"allocations never freed in the trace: {sorted(live)}")
    if len(evictable) < min_evictable:
        failures.append(f"{len(evictable)} evictable allocations, expected at least {min_evictable}")
    if residency_seen != {True, False}:
        failures.append(f"residency changes seen: {sorted(residency_seen)}, expected both 0 and 1")
    if len(launches) == 1 and len(launch_seqs) != launches[0]:
        failures.append(f"{len(launch_seqs)} launches in the trace, {launches[0]} in the exit summary")
    for failure in failures[:20]:
        print(f"check_trace: {failure}")
    if not failures:
        print(f"check_trace: {len(lines)} lines, {len(freed)} allocations ({len(evictable)} evictable), "
              f"uses by op {ops}, {len(launch_seqs)} launches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

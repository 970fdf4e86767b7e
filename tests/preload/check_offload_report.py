#!/usr/bin/env python3
"""The simulated driver's report of a run under the offload mode.

Reads the JSON report simcuda wrote at exit (SIMCUDA_REPORT) and checks that
device 0's peak stayed within the limit plus the small-allocation allowance
(or, with a per-device list such as `0:64,1:48`, each listed device's peak
within its own limit) and, with --expect-evictions, that the shim really
moved data: it unmapped physical memory, and bytes went to the host and came
back.

    check_offload_report.py REPORT --limit-mib L|D:L[,D:L...] --allowance-mib A [--expect-evictions]
                            [--max-htod-mib M]

With --max-htod-mib, the bytes copied from the host to the device (the
report's copied.htod, the program's own copies included) must be at most M
MiB: what a workload must not move twice.

Exit status: 0 when every check holds, 1 when one fails (one line each) or
the report cannot be read, 2 on a usage error.
"""
import argparse
import json
import sys

MIB = 1 << 20


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--limit-mib", required=True, help="MiB for device 0, or ORDINAL:MIB,... per device")
    parser.add_argument("--allowance-mib", type=int, required=True)
    parser.add_argument("--expect-evictions", action="store_true")
    parser.add_argument("--max-htod-mib", type=float)
    args = parser.parse_args()

    try:
        if ":" in args.limit_mib:
            limits = {int(d): int(m) for d, m in (entry.split(":") for entry in args.limit_mib.split(","))}
        else:
            limits = {0: int(args.limit_mib)}
    except ValueError:
        print(f"usage: --limit-mib {args.limit_mib!r} is neither MIB nor ORDINAL:MIB,...")
        return 2
    try:
        with open(args.report) as f:
            report = json.load(f)
        peaks = {d: report["devices"][d]["peak_bytes"] for d in limits}
        calls = report["calls"]
        copied = report["copied"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as error:
        print(f"FAIL: cannot read the report {args.report}: {error!r}")
        return 1

    failures = []
    for d, limit in limits.items():
        peak = peaks[d]
        bound = (limit + args.allowance_mib) * MIB
        if peak > bound:
            failures.append(f"device {d} peak {peak} bytes ({peak / MIB:.1f} MiB) is over the limit {limit} MiB "
                            f"+ allowance {args.allowance_mib} MiB = {bound} bytes")
    if args.expect_evictions:
        unmaps = calls.get("cuMemUnmap", 0)
        if unmaps <= 0:
            failures.append("calls[cuMemUnmap] is 0: physical memory was never unmapped, nothing was evicted")
        if copied.get("dtoh", 0) <= 0:
            failures.append("copied.dtoh is 0: no bytes went to the host")
        if copied.get("htod", 0) <= 0:
            failures.append("copied.htod is 0: no bytes came back to the device")

    if args.max_htod_mib is not None and copied.get("htod", 0) > args.max_htod_mib * MIB:
        failures.append(f"copied.htod is {copied.get('htod', 0) / MIB:.1f} MiB, more than {args.max_htod_mib:g} MiB")
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        within = ", ".join(f"device {d} peak {peaks[d] / MIB:.1f} MiB <= {limit} + {args.allowance_mib} MiB"
                           for d, limit in limits.items())
        print(f"report ok: {within}, "
              f"cuMemUnmap {calls.get('cuMemUnmap', 0)}, dtoh {copied.get('dtoh', 0)}, htod {copied.get('htod', 0)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
